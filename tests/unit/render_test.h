/*
 * render_test.h - for unit tests of renderers that write a job as JSON into a buffer: parse what was written
 * (failing the test when it is not JSON) and read a string member. Include after cmocka and the source under test.
 */
#ifndef AD_RENDER_TEST_H
#define AD_RENDER_TEST_H

#include <jansson.h>

#include "common/util.h"
#include "job/job.h"

/* What b holds, parsed as JSON; frees b and j (the job it was rendered from). The caller decrefs. */
static inline json_t *rendered(struct ad_buf *b, struct ad_job *j)
{
    json_error_t err;
    json_t *v = json_loadb(b->data, b->len, 0, &err);
    if (v == NULL)
        fail_msg("not JSON (%s): %.*s", err.text, (int)b->len, b->data);
    ad_buf_free(b);
    ad_job_free(j);
    return v;
}

/* The string member name of v, or NULL. */
static inline const char *str(json_t *v, const char *name)
{
    return json_string_value(json_object_get(v, name));
}

#endif
