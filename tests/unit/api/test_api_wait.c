/*
 * test_api_wait.c - unit tests for src/api/api_wait.c: a request held on a job's cache entry ends when a change
 * the handler does not keep waiting for comes, when its timer runs out, or when the entry leaves the cache; a
 * client that goes away ends it without an answer, and nothing of it is left armed or watching.
 *
 * The cache and the timer heap are the real ones (process-global: each test sets them up and clears them); the
 * request is a bare h2o_req_t, whose pool going away is the client going away.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "api/api_int.h"

struct fake {
    h2o_req_t req;
    struct ad_request r;
};

/* What the handler saw. */
struct seen {
    int finished, timed_out;
    enum ad_status status; /* of the entry finish got */
    int had_entry;
};

struct test_wait {
    struct ad_api_wait w;
    struct seen *seen;
};

static int setup(void **state)
{
    ad_cache_init(1 << 20);
    struct fake *f = calloc(1, sizeof(*f));
    h2o_mem_init_pool(&f->req.pool);
    f->r.req = &f->req;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fake *f = *state;
    h2o_mem_clear_pool(&f->req.pool);
    free(f);
    ad_cache_clear();
    assert_int_equal(ad_timers_count(), 0);
    return 0;
}

static struct ad_entry *put(enum ad_status st, int64_t seq)
{
    struct ad_job *j = ad_job_new();
    ad_job_set(&j->id, "job_a");
    ad_job_set(&j->tenant, "t1");
    ad_job_set(&j->type, "video");
    j->status = st;
    j->seq = seq;
    j->progress = (int)seq;
    int changed;
    return ad_cache_put(j, &changed, NULL);
}

static int keep_unless_final(struct ad_api_wait *w, const struct ad_entry *e)
{
    return !ad_status_terminal(e->job->status);
}

static void record(struct ad_api_wait *w, struct ad_request *r, struct ad_entry *e, int timed_out)
{
    struct seen *s = ((struct test_wait *)w)->seen;
    s->finished++;
    s->timed_out = timed_out;
    s->had_entry = e != NULL;
    if (e != NULL)
        s->status = e->job->status;
}

static void start(struct fake *f, struct seen *s, struct ad_entry *e, int64_t ms)
{
    struct test_wait *t = ad_calloc(1, sizeof(*t));
    t->seen = s;
    t->w.keep = keep_unless_final;
    t->w.finish = record;
    ad_api_wait_start(&t->w, &f->r, e, ms);
}

static void test_ends_on_the_change_it_waits_for(void **state)
{
    struct fake *f = *state;
    struct seen s = {0};
    start(f, &s, put(AD_RUNNING, 1), 60000);
    put(AD_RUNNING, 2); /* a change that keeps it waiting */
    assert_int_equal(s.finished, 0);
    put(AD_SUCCEEDED, 3);
    assert_int_equal(s.finished, 1);
    assert_true(s.had_entry);
    assert_int_equal(s.status, AD_SUCCEEDED);
    assert_false(s.timed_out);
    assert_int_equal(ad_timers_count(), 0); /* its timer went with it */
    put(AD_SUCCEEDED, 4);
    assert_int_equal(s.finished, 1); /* and so did its watch */
}

static void test_timeout(void **state)
{
    struct fake *f = *state;
    struct seen s = {0};
    start(f, &s, put(AD_QUEUED, 1), 0);
    assert_int_equal(ad_timers_count(), 1);
    ad_timers_run();
    assert_int_equal(s.finished, 1);
    assert_true(s.timed_out);
    assert_false(s.had_entry);
    put(AD_SUCCEEDED, 2);
    assert_int_equal(s.finished, 1);
}

static void test_entry_left_the_cache(void **state)
{
    struct fake *f = *state;
    struct seen s = {0};
    start(f, &s, put(AD_RUNNING, 1), 60000);
    ad_cache_remove("job_a");
    assert_int_equal(s.finished, 1);
    assert_false(s.had_entry); /* the handler reads it back */
    assert_false(s.timed_out);
    assert_int_equal(ad_timers_count(), 0);
}

static void test_client_gone(void **state)
{
    struct fake *f = *state;
    struct seen s = {0};
    start(f, &s, put(AD_RUNNING, 1), 60000);
    h2o_mem_clear_pool(&f->req.pool); /* h2o disposes of the request */
    h2o_mem_init_pool(&f->req.pool);
    assert_int_equal(ad_timers_count(), 0);
    put(AD_SUCCEEDED, 2);
    assert_int_equal(s.finished, 0); /* nobody to answer */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_ends_on_the_change_it_waits_for, setup, teardown),
        cmocka_unit_test_setup_teardown(test_timeout, setup, teardown),
        cmocka_unit_test_setup_teardown(test_entry_left_the_cache, setup, teardown),
        cmocka_unit_test_setup_teardown(test_client_gone, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
