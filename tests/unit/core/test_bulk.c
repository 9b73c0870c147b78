/*
 * test_bulk.c - unit tests for src/core/bulk.c: pages of a bulk cancel and retry applied directly to a real SQLite
 * store in a throwaway directory (no writer thread: each page runs begin, op->apply, commit as the writer would),
 * walked to the end as api_bulk_control.c walks them.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/bulk.h"
#include "core_test.h"

#define T0 INT64_C(1800000000000)

static int setup(void **state)
{
    return core_fx_open(state, "bulk", NULL);
}

static struct ad_job *stored(struct fx *f, const char *id)
{
    struct ad_job *j = NULL;
    assert_int_equal(f->s->ops->job_get(f->c, NULL, id, &j), AD_E_OK);
    return j;
}

/* Submit a job of tenant and type, created at T0 + at; its id (caller frees). */
static char *submit(struct fx *f, const char *tenant, const char *type, int64_t at)
{
    struct ad_submit_op *s = ad_submit_op_new();
    s->job = ad_job_new();
    s->job->id = ad_new_id("job_");
    ad_job_set(&s->job->tenant, tenant);
    ad_job_set(&s->job->type, type);
    ad_job_set(&s->job->payload, "{}");
    s->job->max_attempts = 1;
    s->job->created_at = s->job->updated_at = T0 + at;
    assert_int_equal(core_fx_apply(f, &s->op), AD_E_OK);
    char *id = ad_strdup(s->job->id);
    ad_op_free(&s->op);
    return id;
}

/* Lease the next job of t1's type and report ev on it (AD_EV_HEARTBEAT: leave it running). */
static void run(struct fx *f, const char *type, const char *id, enum ad_job_event ev)
{
    struct ad_lease_op *l = ad_lease_op_new();
    l->tenant = ad_strdup("t1");
    l->types = ad_calloc(1, sizeof(char *));
    l->types[0] = ad_strdup(type);
    l->ntypes = 1;
    l->max = 1;
    l->lease_ms = 60000;
    l->worker = ad_strdup("w");
    l->now = T0 + 1000;
    assert_int_equal(core_fx_apply(f, &l->op), AD_E_OK);
    assert_int_equal(l->leased.n, 1);
    assert_string_equal(l->leased.items[0]->id, id);
    struct ad_report_op *r = ad_report_op_new();
    r->event = ev;
    r->tenant = ad_strdup("t1");
    r->id = ad_strdup(id);
    r->lease_id = ad_strdup(l->leased.items[0]->lease_id);
    r->error = ad_strdup("{\"title\":\"x\"}");
    r->now = T0 + 2000;
    assert_int_equal(core_fx_apply(f, &r->op), AD_E_OK);
    ad_op_free(&r->op);
    ad_op_free(&l->op);
}

/* Walk a bulk action over q to its end; the counts, and how many pages it took. Each page names as its changes
 * exactly the jobs it changed (one per cancel or retry). */
static void walk(struct fx *f, enum ad_bulk_action action, struct ad_bulk_query q, size_t *matched, size_t *changed,
                 int *pages)
{
    *matched = *changed = 0;
    *pages = 0;
    int64_t after = 0, upto = 0;
    for (;;) {
        struct ad_bulk_op *b = ad_bulk_op_new();
        b->action = action;
        b->q = q;
        b->after = after;
        b->upto = upto;
        b->now = T0 + 5000;
        assert_int_equal(core_fx_apply(f, &b->op), AD_E_OK);
        assert_true(b->matched <= AD_BULK_PAGE);
        assert_int_equal(b->op.nchanged, b->changed);
        *matched += b->matched;
        *changed += b->changed;
        (*pages)++;
        after = b->next;
        upto = b->upto;
        ad_op_free(&b->op);
        if (after == 0)
            break;
    }
}

static void test_cancel_walks_pages_of_queued_and_running_jobs(void **state)
{
    struct fx *f = *state;
    char *done = submit(f, "t1", "video", 0);
    run(f, "video", done, AD_EV_COMPLETE);
    char *running = submit(f, "t1", "video", 0);
    run(f, "video", running, AD_EV_HEARTBEAT);
    char *ids[300];
    for (int i = 0; i < 300; i++)
        ids[i] = submit(f, "t1", "video", 10);
    char *other_tenant = submit(f, "t2", "video", 10);
    char *other_type = submit(f, "t1", "audio", 10);

    size_t matched, changed;
    int pages;
    struct ad_bulk_query q = {.tenant = "t1", .type = "video"};
    walk(f, AD_BULK_CANCEL, q, &matched, &changed, &pages);
    assert_int_equal(matched, 302);
    assert_int_equal(changed, 301);
    assert_int_equal(pages, 3); /* 256 + 46 examined, then the end */
    for (int i = 0; i < 300; i++) {
        struct ad_job *j = stored(f, ids[i]);
        assert_int_equal(j->status, AD_CANCELLED);
        assert_int_equal(j->finished_at, T0 + 5000);
        ad_job_free(j);
        free(ids[i]);
    }
    struct ad_job *j = stored(f, running);
    assert_int_equal(j->status, AD_RUNNING);
    assert_int_equal(j->cancel_requested, 1);
    ad_job_free(j);
    const char *untouched[] = {other_tenant, other_type};
    for (int i = 0; i < 2; i++) {
        j = stored(f, untouched[i]);
        assert_int_equal(j->status, AD_QUEUED);
        ad_job_free(j);
    }
    j = stored(f, done);
    assert_int_equal(j->status, AD_SUCCEEDED);
    ad_job_free(j);

    /* Again: everything matches, nothing is left to change (the running job has its request already). */
    walk(f, AD_BULK_CANCEL, q, &matched, &changed, &pages);
    assert_int_equal(matched, 302);
    assert_int_equal(changed, 0);
    /* By creation time: only the two jobs created at T0. */
    q.created_before = T0 + 5;
    walk(f, AD_BULK_CANCEL, q, &matched, &changed, &pages);
    assert_int_equal(matched, 2);
    free(done);
    free(running);
    free(other_tenant);
    free(other_type);
}

static void test_retry_makes_new_jobs_of_failed_and_cancelled_ones(void **state)
{
    struct fx *f = *state;
    char *failed = submit(f, "t1", "video", 0);
    run(f, "video", failed, AD_EV_FAIL_FINAL);
    char *ok = submit(f, "t1", "video", 0);
    run(f, "video", ok, AD_EV_COMPLETE);
    char *queued = submit(f, "t1", "video", 0);
    struct ad_bulk_query q = {.tenant = "t1", .type = "video", .statuses = 1u << AD_QUEUED};
    size_t matched, changed;
    int pages;
    walk(f, AD_BULK_CANCEL, q, &matched, &changed, &pages);
    assert_int_equal(changed, 1);

    q.statuses = 0;
    struct ad_bulk_op *b = ad_bulk_op_new();
    b->action = AD_BULK_RETRY;
    b->q = q;
    b->now = T0 + 9000;
    assert_int_equal(core_fx_apply(f, &b->op), AD_E_OK);
    assert_int_equal(b->matched, 3);
    assert_int_equal(b->changed, 2);
    assert_int_equal(b->next != 0, 1);
    assert_int_equal(b->op.nchanged, 2);
    const char *was[2];
    for (size_t i = 0; i < 2; i++) {
        struct ad_job *n = *ad_op_change_at(&b->op, i)->job;
        assert_int_equal(n->status, AD_QUEUED);
        assert_int_equal(n->created_at, T0 + 9000);
        assert_string_not_equal(n->id, failed);
        was[i] = n->retry_of;
    }
    assert_string_equal(was[0], failed);
    assert_string_equal(was[1], queued);
    ad_op_free(&b->op);
    /* The originals stay as they were. */
    struct ad_job *j = stored(f, failed);
    assert_int_equal(j->status, AD_FAILED);
    ad_job_free(j);
    free(failed);
    free(ok);
    free(queued);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_cancel_walks_pages_of_queued_and_running_jobs, setup, core_fx_close),
        cmocka_unit_test_setup_teardown(test_retry_makes_new_jobs_of_failed_and_cancelled_ones, setup, core_fx_close),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
