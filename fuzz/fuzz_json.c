/*
 * fuzz_json.c - libFuzzer target: the JSON acceptd writes by hand (src/job.c) stays JSON whatever the text
 * it carries. The input, split at 0x01 bytes, fills the text fields a client or a worker can set (type,
 * message, resultLocation) and the status, progress and times; the job is rendered and the result must parse
 * with jansson and give back each text exactly. Text that is not UTF-8 cannot reach a job (jansson rejects it
 * in request bodies), so such inputs are skipped.
 */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "job/job.h"
#include "common/util.h"

static void check(int ok)
{
    if (!ok)
        abort();
}

/* The next 0x01-separated piece of [*p, end) as a NUL-terminated copy; NULL when it is not UTF-8 or holds a
 * NUL (a C string cannot). */
static char *piece(const uint8_t **p, const uint8_t *end, int *bad)
{
    const uint8_t *start = *p, *q = memchr(start, 1, (size_t)(end - start));
    if (q == NULL)
        q = end;
    *p = q < end ? q + 1 : end;
    size_t n = (size_t)(q - start);
    json_t *probe = json_stringn((const char *)start, n);
    if (probe == NULL || memchr(start, 0, n) != NULL) {
        json_decref(probe);
        *bad = 1;
        return NULL;
    }
    json_decref(probe);
    return ad_strndup((const char *)start, n);
}

static void expect_str(json_t *doc, const char *key, const char *want)
{
    json_t *v = json_object_get(doc, key);
    if (want == NULL)
        check(v == NULL || json_is_null(v));
    else
        check(json_is_string(v) && strcmp(json_string_value(v), want) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 3)
        return 0;
    const uint8_t *p = data + 3, *end = data + size;
    int bad = 0;
    struct ad_job *j = ad_job_new();
    ad_job_set(&j->id, "job_-P7jjGIpFs70zG6iPmvqW0123");
    j->type = piece(&p, end, &bad);
    j->message = piece(&p, end, &bad);
    j->result_location = piece(&p, end, &bad);
    if (!bad && j->type != NULL) {
        j->status = (enum ad_status)(data[0] % AD_STATUS__COUNT);
        j->progress = data[1] % 102 - 1;
        j->created_at = (int64_t)data[2] * 86400000 * 365;
        ad_job_set(&j->payload, "{\"n\":1}");
        ad_job_set(&j->result, "[1]");
        ad_job_set(&j->error, "{\"status\":500}");
        struct ad_buf b;
        ad_buf_init(&b, SIZE_MAX);
        check(ad_job_render(j, &b) == 0);
        json_error_t err;
        json_t *doc = json_loadb(b.data, b.len, 0, &err);
        check(doc != NULL);
        expect_str(doc, "type", j->type);
        expect_str(doc, "message", j->message);
        if (json_object_get(doc, "resultLocation") != NULL)
            expect_str(doc, "resultLocation", j->result_location);
        json_decref(doc);
        ad_buf_free(&b);
    }
    ad_job_free(j);
    return 0;
}
