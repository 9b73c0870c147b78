/*
 * test_event.c - unit tests for src/event.c: which change of a job makes which event (a new job, a status
 * change, progress or message news, the terminal status, and changes that make none), and the brief data.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "job/event.h"

static struct ad_job *job(enum ad_status s, int progress, const char *message)
{
    struct ad_job *j = ad_job_new();
    ad_job_set(&j->id, "job_x");
    ad_job_set(&j->tenant, "t");
    ad_job_set(&j->type, "a");
    j->status = s;
    j->progress = progress;
    ad_job_set(&j->message, message);
    j->updated_at = INT64_C(1800000000000);
    return j;
}

/* The kind of event changing `before` into `after` makes. */
static enum ad_event_kind kind(const struct ad_job *before, const struct ad_job *after)
{
    struct ad_event_prev p;
    ad_event_prev_take(&p, before);
    enum ad_event_kind k = ad_event_kind_of(&p, after);
    ad_event_prev_free(&p);
    return k;
}

static void test_kinds(void **state)
{
    struct ad_job *queued = job(AD_QUEUED, -1, NULL);
    struct ad_job *running = job(AD_RUNNING, -1, NULL);
    struct ad_job *p10 = job(AD_RUNNING, 10, NULL);
    struct ad_job *p10m = job(AD_RUNNING, 10, "half");
    struct ad_job *p10m2 = job(AD_RUNNING, 10, "more");
    struct ad_job *done = job(AD_SUCCEEDED, 100, NULL);
    struct ad_job *failed = job(AD_FAILED, 10, "half");
    struct ad_job *cancelled = job(AD_CANCELLED, -1, NULL);

    assert_int_equal(kind(NULL, queued), AD_EVK_STATUS);
    assert_int_equal(kind(queued, running), AD_EVK_STATUS);
    assert_int_equal(kind(running, p10), AD_EVK_PROGRESS);
    assert_int_equal(kind(p10, p10m), AD_EVK_PROGRESS);
    assert_int_equal(kind(p10m, p10m2), AD_EVK_PROGRESS);
    assert_int_equal(kind(p10m, p10m), AD_EVK_NONE); /* a heartbeat without news */
    assert_int_equal(kind(running, running), AD_EVK_NONE);
    assert_int_equal(kind(p10m, queued), AD_EVK_STATUS); /* requeued after a failed attempt */
    assert_int_equal(kind(p10m, done), AD_EVK_DONE);     /* terminal wins over the progress change */
    assert_int_equal(kind(p10m, failed), AD_EVK_DONE);
    assert_int_equal(kind(queued, cancelled), AD_EVK_DONE);
    assert_int_equal(kind(NULL, cancelled), AD_EVK_DONE);
    assert_int_equal(kind(done, done), AD_EVK_NONE); /* a terminal job never makes a second done */

    ad_job_free(queued);
    ad_job_free(running);
    ad_job_free(p10);
    ad_job_free(p10m);
    ad_job_free(p10m2);
    ad_job_free(done);
    ad_job_free(failed);
    ad_job_free(cancelled);
}

static void test_prev_is_a_copy(void **state)
{
    /* The op changes the message in place after the capture; the capture must not see it. */
    struct ad_job *j = job(AD_RUNNING, 10, "before");
    struct ad_event_prev p;
    ad_event_prev_take(&p, j);
    ad_job_set(&j->message, "after");
    assert_int_equal(ad_event_kind_of(&p, j), AD_EVK_PROGRESS);
    ad_event_prev_free(&p);
    ad_job_free(j);
}

static void test_names(void **state)
{
    assert_string_equal(ad_event_name(AD_EVK_STATUS), "status");
    assert_string_equal(ad_event_name(AD_EVK_PROGRESS), "progress");
    assert_string_equal(ad_event_name(AD_EVK_DONE), "done");
    assert_null(ad_event_name(AD_EVK_NONE));
}

static void test_brief(void **state)
{
    struct ad_job *j = job(AD_RUNNING, 42, "a \"quoted\"\nline");
    struct ad_buf b;
    ad_buf_init(&b, SIZE_MAX);
    assert_int_equal(ad_event_render_brief(j, &b), 0);
    assert_string_equal(b.data,
                        "{\"id\":\"job_x\",\"status\":\"running\",\"progress\":42,"
                        "\"message\":\"a \\\"quoted\\\"\\nline\",\"lastUpdatedAt\":\"2027-01-15T08:00:00.000Z\"}");
    ad_buf_free(&b);
    j->progress = -1;
    ad_job_set(&j->message, NULL);
    ad_buf_init(&b, SIZE_MAX);
    ad_event_render_brief(j, &b);
    assert_string_equal(b.data, "{\"id\":\"job_x\",\"status\":\"running\",\"progress\":null,\"message\":null,"
                                "\"lastUpdatedAt\":\"2027-01-15T08:00:00.000Z\"}");
    ad_buf_free(&b);
    ad_buf_init(&b, 20);
    assert_int_equal(ad_event_render_brief(j, &b), -1);
    ad_buf_free(&b);
    ad_job_free(j);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kinds),
        cmocka_unit_test(test_prev_is_a_copy),
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_brief),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
