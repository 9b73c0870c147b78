/*
 * test_api_operations.c - unit tests for src/api/api_operations.c that need no connection: a job rendered as a
 * google.longrunning.Operation in proto3 JSON (name, metadata, done, response or error), and the google.rpc.Code
 * of a problem's HTTP status.
 *
 * api_operations.c is included to reach its static renderers.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "api/api_operations.c"
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
    j->attempt = 1;
    j->created_at = T0;
    return j;
}

/* The operation of j, parsed; frees j. */
static json_t *operation(struct ad_job *j)
{
    struct ad_buf b;
    ad_buf_init(&b, SIZE_MAX);
    render_operation(&b, j);
    return rendered(&b, j);
}

static void test_pending(void **state)
{
    (void)state;
    json_t *v = operation(mk(AD_RUNNING, 30));
    assert_string_equal(str(v, "name"), "operations/job_a");
    assert_true(json_is_false(json_object_get(v, "done")));
    assert_null(json_object_get(v, "response"));
    assert_null(json_object_get(v, "error"));
    json_t *md = json_object_get(v, "metadata");
    assert_string_equal(str(md, "@type"), AD_OPS_STRUCT);
    json_t *m = json_object_get(md, "value");
    assert_string_equal(str(m, "status"), "running");
    assert_int_equal(json_integer_value(json_object_get(m, "progress")), 30);
    /* Never updated: updateTime is the creation time; no endTime until it ends. */
    assert_string_equal(str(m, "updateTime"), str(m, "createTime"));
    assert_null(json_object_get(m, "endTime"));
    json_decref(v);
}

static void test_done(void **state)
{
    (void)state;
    struct ad_job *j = mk(AD_SUCCEEDED, 100);
    ad_job_set(&j->result, "[1,2]");
    j->finished_at = T0 + 5000;
    json_t *v = operation(j);
    assert_true(json_is_true(json_object_get(v, "done")));
    json_t *resp = json_object_get(v, "response");
    assert_string_equal(str(resp, "@type"), AD_OPS_VALUE);
    assert_int_equal(json_array_size(json_object_get(resp, "value")), 2);
    assert_non_null(json_object_get(json_object_get(json_object_get(v, "metadata"), "value"), "endTime"));
    json_decref(v);

    j = mk(AD_SUCCEEDED, 100);
    ad_job_set(&j->result_location, "https://files.example/r");
    v = operation(j);
    assert_string_equal(str(json_object_get(json_object_get(v, "response"), "value"), "resultLocation"),
                        "https://files.example/r");
    json_decref(v);

    j = mk(AD_FAILED, -1);
    ad_job_set(&j->error, "{\"title\":\"Gone\",\"status\":404,\"detail\":\"no source\",\"code\":\"no-source\"}");
    v = operation(j);
    json_t *e = json_object_get(v, "error");
    assert_int_equal(json_integer_value(json_object_get(e, "code")), 5); /* NOT_FOUND */
    assert_string_equal(str(e, "message"), "no source");
    json_t *d = json_array_get(json_object_get(e, "details"), 0);
    assert_string_equal(str(json_object_get(d, "value"), "code"), "no-source");
    assert_null(json_object_get(v, "response"));
    json_decref(v);

    v = operation(mk(AD_CANCELLED, -1));
    assert_int_equal(json_integer_value(json_object_get(json_object_get(v, "error"), "code")), 1); /* CANCELLED */
    json_decref(v);
}

static void test_grpc_codes(void **state)
{
    (void)state;
    assert_int_equal(grpc_code(400), 3);
    assert_int_equal(grpc_code(422), 3);
    assert_int_equal(grpc_code(401), 16);
    assert_int_equal(grpc_code(403), 7);
    assert_int_equal(grpc_code(404), 5);
    assert_int_equal(grpc_code(409), 10);
    assert_int_equal(grpc_code(429), 8);
    assert_int_equal(grpc_code(500), 13);
    assert_int_equal(grpc_code(503), 14);
    assert_int_equal(grpc_code(504), 4);
    assert_int_equal(grpc_code(418), 2); /* UNKNOWN */
    assert_int_equal(grpc_code(0), 2);   /* a problem without a status */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pending),
        cmocka_unit_test(test_done),
        cmocka_unit_test(test_grpc_codes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
