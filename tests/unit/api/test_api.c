/*
 * test_api.c - unit tests for src/api/api.c that need no connection: the route table. Every endpoint reaches the
 * handler and roles it is listed with; literal paths win over the {id} patterns that would also match them; a
 * known path with another method is 405 with its Allow list; workers' reports are for worker keys only and signed
 * URLs read, never write.
 *
 * api.c is included to reach the table (`routes`); each test builds a bare h2o_req_t for the matcher's pool.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "api/api.c"

#define NROUTES (sizeof(routes) / sizeof(routes[0]))

static int setup(void **state)
{
    h2o_req_t *req = calloc(1, sizeof(*req));
    h2o_mem_init_pool(&req->pool);
    *state = req;
    return 0;
}

static int teardown(void **state)
{
    h2o_req_t *req = *state;
    h2o_mem_clear_pool(&req->pool);
    free(req);
    return 0;
}

/* Match method and path against the daemon's table: the row (NULL when none), the id and the Allow list. */
static ad_err match(h2o_req_t *req, const char *method, const char *path, const struct ad_route_def **row, char **id,
                    h2o_iovec_t *allow)
{
    req->method = h2o_iovec_init(method, strlen(method));
    *row = NULL;
    *id = NULL;
    *allow = h2o_iovec_init(NULL, 0);
    return ad_http_match(req, routes, NROUTES, h2o_iovec_init(path, strlen(path)), row, id, allow);
}

static void expect(h2o_req_t *req, const char *method, const char *path, ad_handler handler, const char *id)
{
    const struct ad_route_def *row;
    char *got;
    h2o_iovec_t allow;
    ad_err e = match(req, method, path, &row, &got, &allow);
    if (e != AD_E_OK || row->handler != handler)
        fail_msg("%s %s: error %d, row %s", method, path, (int)e, row != NULL ? row->pattern : "(none)");
    if (id != NULL)
        assert_string_equal(got, id);
}

static void test_every_resource(void **state)
{
    h2o_req_t *req = *state;
    expect(req, "POST", "/v1/jobs", ad_api_submit, NULL);
    expect(req, "POST", "/v1/jobs:batch", ad_api_submit_batch, NULL);
    expect(req, "GET", "/v1/jobs", ad_api_list, NULL);
    expect(req, "GET", "/v1/jobs/job_a", ad_api_get_job, "job_a");
    expect(req, "DELETE", "/v1/jobs/job_a", ad_api_cancel, "job_a");
    expect(req, "GET", "/v1/jobs/job_a/result", ad_api_get_result, "job_a");
    expect(req, "PUT", "/v1/jobs/job_a/result", ad_api_put_result, "job_a");
    expect(req, "GET", "/v1/jobs/job_a/status", ad_api_get_status, "job_a");
    expect(req, "GET", "/v1/jobs/job_a/events", ad_api_job_events, "job_a");
    expect(req, "GET", "/v1/jobs/job_a/attempts", ad_api_attempts, "job_a");
    expect(req, "POST", "/v1/jobs/job_a:cancel", ad_api_cancel, "job_a");
    expect(req, "POST", "/v1/jobs/job_a:retry", ad_api_retry, "job_a");
    expect(req, "POST", "/v1/jobs/job_a:heartbeat", ad_api_heartbeat, "job_a");
    expect(req, "POST", "/v1/jobs/job_a:complete", ad_api_complete, "job_a");
    expect(req, "POST", "/v1/jobs/job_a:fail", ad_api_fail_job, "job_a");
    expect(req, "POST", "/v1/jobs/job_a:release", ad_api_release, "job_a");
    expect(req, "POST", "/v1/jobs/job_a:sign", ad_api_sign, "job_a");
    expect(req, "GET", "/v1/events", ad_api_events, NULL);
    expect(req, "POST", "/v1/leases", ad_api_lease, NULL);
    expect(req, "GET", "/v1/leases", ad_api_lease_list, NULL);
    expect(req, "GET", "/v1/webhooks/wh_1/deliveries", ad_api_webhook_deliveries, "wh_1");
    expect(req, "POST", "/v1/deliveries/dl_1:redeliver", ad_api_redeliver, "dl_1");
    expect(req, "GET", "/v1/operations", ad_api_op_list, NULL);
    expect(req, "POST", "/v1/operations/job_a:wait", ad_api_op_wait, "job_a");
    expect(req, "GET", "/healthz", ad_api_healthz, NULL);
    expect(req, "GET", "/openapi.json", ad_api_openapi, NULL);
}

static void test_literals_before_patterns(void **state)
{
    h2o_req_t *req = *state;
    /* "changes" would be a job id to /v1/jobs/{id}, "operations/x" an operation id to /v1/operations/{id}. */
    expect(req, "GET", "/v1/jobs/changes", ad_api_changes, NULL);
    expect(req, "GET", "/v1/operations/operations/job_a", ad_api_op_get, "job_a");
    expect(req, "GET", "/v1/operations/job_a", ad_api_op_get, "job_a");
    expect(req, "POST", "/v1/operations/operations/job_a:cancel", ad_api_op_cancel, "job_a");
    expect(req, "GET", "/ui/", ad_api_ui, NULL);
    expect(req, "GET", "/ui/app.js", ad_api_ui, "app");
}

static void test_unknown_and_wrong_method(void **state)
{
    h2o_req_t *req = *state;
    const struct ad_route_def *row;
    char *id;
    h2o_iovec_t allow;
    assert_int_equal(match(req, "GET", "/v1/nothing", &row, &id, &allow), AD_E_NOT_FOUND);
    assert_int_equal(match(req, "GET", "/v1/jobs/job_a:unknown", &row, &id, &allow), AD_E_NOT_FOUND);
    assert_int_equal(match(req, "PATCH", "/v1/jobs/job_a", &row, &id, &allow), AD_E_METHOD_NOT_ALLOWED);
    char *list = strndup(allow.base, allow.len);
    assert_non_null(strstr(list, "GET"));
    assert_non_null(strstr(list, "DELETE"));
    assert_null(strstr(list, "POST"));
    free(list);
    assert_int_equal(match(req, "GET", "/v1/jobs/job_a:heartbeat", &row, &id, &allow), AD_E_METHOD_NOT_ALLOWED);
}

static void test_roles(void **state)
{
    (void)state;
    for (size_t i = 0; i < NROUTES; i++) {
        const struct ad_route_def *d = &routes[i];
        int write = strcmp(d->method, "GET") != 0;
        /* A signed URL grants reading one job: never a write (WaitOperation is a read sent as POST, by AIP-151). */
        if ((d->roles & SIGNED) && write && d->handler != ad_api_op_wait)
            fail_msg("%s %s is a write open to signed URLs", d->method, d->pattern);
        /* A worker's reports and uploads are for worker keys (and admins), never a client's. */
        if (d->handler == ad_api_heartbeat || d->handler == ad_api_complete || d->handler == ad_api_fail_job ||
            d->handler == ad_api_release || d->handler == ad_api_lease || d->handler == ad_api_put_result) {
            assert_int_equal(d->roles, WORKER);
        }
        /* Submits are clients' (and admins'), not workers'. */
        if (d->handler == ad_api_submit || d->handler == ad_api_submit_batch)
            assert_int_equal(d->roles, CLIENT);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_every_resource, setup, teardown),
        cmocka_unit_test_setup_teardown(test_literals_before_patterns, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unknown_and_wrong_method, setup, teardown),
        cmocka_unit_test(test_roles),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
