/*
 * test_api_azure.c - unit tests for src/api/api_azure.c that need no connection: the status monitor's body in
 * the Azure REST API guidelines' shape for every job state (status names, percentComplete, error, result and
 * resourceLocation), parsed back as JSON.
 *
 * api_azure.c is included to reach its static status mapping.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "api/api_azure.c"
#include "render_test.h"

#define T0 INT64_C(1800000000000)

static struct ad_job *mk(enum ad_status st, int progress)
{
    struct ad_job *j = ad_job_new();
    ad_job_set(&j->id, "job_a");
    ad_job_set(&j->tenant, "t1");
    ad_job_set(&j->type, "video");
    j->status = st;
    j->progress = progress;
    j->created_at = T0;
    j->updated_at = T0 + 1500;
    return j;
}

/* The monitor of j, parsed; frees j. */
static json_t *monitor(struct ad_job *j)
{
    ad_hub.public_url = "http://127.0.0.1:8080";
    struct ad_buf b;
    ad_buf_init(&b, SIZE_MAX);
    assert_int_equal(ad_api_monitor_render(&b, j), 0);
    return rendered(&b, j);
}

static void test_status_names(void **state)
{
    (void)state;
    assert_string_equal(az_status(AD_QUEUED), "NotStarted");
    assert_string_equal(az_status(AD_RUNNING), "Running");
    assert_string_equal(az_status(AD_SUCCEEDED), "Succeeded");
    assert_string_equal(az_status(AD_PARTIAL), "Succeeded"); /* with partialSuccess: true */
    assert_string_equal(az_status(AD_FAILED), "Failed");
    assert_string_equal(az_status(AD_CANCELLED), "Canceled");
}

static void test_pending(void **state)
{
    (void)state;
    json_t *v = monitor(mk(AD_QUEUED, -1));
    assert_string_equal(str(v, "id"), "job_a");
    assert_string_equal(str(v, "status"), "NotStarted");
    assert_null(json_object_get(v, "percentComplete")); /* unknown progress is left out, not 0 */
    assert_string_equal(str(v, "createdDateTime"), "2027-01-15T08:00:00.000Z");
    assert_string_equal(str(v, "lastActionDateTime"), "2027-01-15T08:00:01.500Z");
    assert_null(json_object_get(v, "error"));
    assert_null(json_object_get(v, "resourceLocation"));
    json_decref(v);

    struct ad_job *j = mk(AD_RUNNING, 40);
    ad_job_set(&j->message, "encoding");
    v = monitor(j);
    assert_string_equal(str(v, "status"), "Running");
    assert_int_equal(json_integer_value(json_object_get(v, "percentComplete")), 40);
    assert_string_equal(str(v, "message"), "encoding");
    json_decref(v);
}

static void test_succeeded(void **state)
{
    (void)state;
    struct ad_job *j = mk(AD_SUCCEEDED, 70);
    ad_job_set(&j->result, "{\"answer\":42}");
    json_t *v = monitor(j);
    assert_string_equal(str(v, "status"), "Succeeded");
    assert_int_equal(json_integer_value(json_object_get(v, "percentComplete")), 100);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(v, "result"), "answer")), 42);
    assert_string_equal(str(v, "resourceLocation"), "http://127.0.0.1:8080/v1/jobs/job_a/result");
    assert_null(json_object_get(v, "partialSuccess"));
    json_decref(v);

    /* A route's business resource, then a worker's external result, is where the outcome lives. */
    j = mk(AD_PARTIAL, -1);
    ad_job_set(&j->resource, "/v1/videos/job_a");
    v = monitor(j);
    assert_string_equal(str(v, "status"), "Succeeded");
    assert_true(json_is_true(json_object_get(v, "partialSuccess")));
    assert_string_equal(str(v, "resourceLocation"), "http://127.0.0.1:8080/v1/videos/job_a");
    assert_null(json_object_get(v, "result"));
    json_decref(v);

    j = mk(AD_SUCCEEDED, -1);
    ad_job_set(&j->result_location, "https://files.example/out.mp4");
    v = monitor(j);
    assert_string_equal(str(v, "resourceLocation"), "https://files.example/out.mp4");
    json_decref(v);
}

static void test_failed_and_cancelled(void **state)
{
    (void)state;
    struct ad_job *j = mk(AD_FAILED, 10);
    ad_job_set(&j->error, "{\"title\":\"Boom\",\"status\":500,\"detail\":\"it broke\",\"code\":\"boom\"}");
    json_t *v = monitor(j);
    assert_string_equal(str(v, "status"), "Failed");
    json_t *e = json_object_get(v, "error");
    assert_string_equal(str(e, "code"), "boom");
    assert_string_equal(str(e, "message"), "it broke");
    assert_null(json_object_get(v, "resourceLocation"));
    json_decref(v);

    j = mk(AD_FAILED, -1); /* no stored problem: still an error with a code */
    v = monitor(j);
    assert_string_equal(str(json_object_get(v, "error"), "code"), "job-failed");
    json_decref(v);

    v = monitor(mk(AD_CANCELLED, -1));
    assert_string_equal(str(v, "status"), "Canceled");
    assert_string_equal(str(json_object_get(v, "error"), "code"), "job-cancelled");
    json_decref(v);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_status_names),
        cmocka_unit_test(test_pending),
        cmocka_unit_test(test_succeeded),
        cmocka_unit_test(test_failed_and_cancelled),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
