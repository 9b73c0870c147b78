/*
 * test_batches.c - unit tests for src/core/batches.c: the status rules of a batch (pure), its representation, and
 * its create and counts over a real SQLite store in a throwaway directory (core_test.h): a refused create writes
 * nothing, and the counts move with the jobs' changes in their own transactions.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/batches.h"
#include "core_test.h"

#define T0 INT64_C(1800000000000)

static struct ad_batch counts(int q, int r, int s, int p, int f, int c)
{
    struct ad_batch b = {.total = q + r + s + p + f + c};
    b.n[AD_QUEUED] = q;
    b.n[AD_RUNNING] = r;
    b.n[AD_SUCCEEDED] = s;
    b.n[AD_PARTIAL] = p;
    b.n[AD_FAILED] = f;
    b.n[AD_CANCELLED] = c;
    return b;
}

static void test_status_rules(void **state)
{
    (void)state;
    struct ad_batch b;
    b = counts(1, 0, 5, 0, 0, 0);
    assert_int_equal(ad_batch_status(&b), AD_RUNNING);
    b = counts(0, 1, 5, 0, 0, 0);
    assert_int_equal(ad_batch_status(&b), AD_RUNNING);
    b = counts(0, 0, 5, 0, 0, 0);
    assert_int_equal(ad_batch_status(&b), AD_SUCCEEDED);
    b = counts(0, 0, 0, 0, 0, 3);
    assert_int_equal(ad_batch_status(&b), AD_CANCELLED);
    b = counts(0, 0, 0, 0, 2, 1);
    assert_int_equal(ad_batch_status(&b), AD_FAILED); /* none succeeded */
    b = counts(0, 0, 0, 0, 2, 0);
    assert_int_equal(ad_batch_status(&b), AD_FAILED);
    b = counts(0, 0, 4, 0, 1, 0);
    assert_int_equal(ad_batch_status(&b), AD_PARTIAL);
    b = counts(0, 0, 0, 1, 0, 0);
    assert_int_equal(ad_batch_status(&b), AD_PARTIAL); /* partialSuccess is not all succeeded */
    b = counts(0, 0, 1, 0, 0, 1);
    assert_int_equal(ad_batch_status(&b), AD_PARTIAL);
}

static void test_render(void **state)
{
    (void)state;
    struct ad_batch b = counts(1, 1, 1, 0, 1, 0);
    b.id = "bat_x";
    b.created_at = T0;
    struct ad_buf out;
    ad_buf_init(&out, SIZE_MAX);
    assert_int_equal(ad_batch_render(&b, &out), 0);
    assert_string_equal(out.data, "{\"id\":\"bat_x\",\"status\":\"running\",\"total\":4,\"counts\":{\"queued\":1,"
                                  "\"running\":1,\"succeeded\":1,\"partialSuccess\":0,\"failed\":1,\"cancelled\":0},"
                                  "\"progress\":50,\"createdAt\":\"2027-01-15T08:00:00.000Z\",\"finishedAt\":null,"
                                  "\"links\":{\"self\":\"/v1/batches/bat_x\",\"jobs\":\"/v1/batches/bat_x/jobs\","
                                  "\"cancel\":\"/v1/batches/bat_x:cancel\"}}");
    ad_buf_free(&out);
}

static int setup(void **state)
{
    return core_fx_open(state, "batches", NULL);
}

static struct ad_batch_create_op *create_op(int n, const char *dep)
{
    struct ad_batch_create_op *x = ad_batch_create_op_new((size_t)n);
    x->batch = ad_calloc(1, sizeof(*x->batch));
    x->batch->id = ad_new_id("bat_");
    x->batch->tenant = ad_strdup("t1");
    x->batch->created_at = T0;
    for (int i = 0; i < n; i++) {
        struct ad_job *j = ad_job_new();
        j->id = ad_new_id("job_");
        ad_job_set(&j->tenant, "t1");
        ad_job_set(&j->type, "kind");
        ad_job_set(&j->payload, "{}");
        j->max_attempts = 1;
        j->created_at = j->updated_at = T0;
        if (dep != NULL && i == n - 1)
            j->depends_on = ad_asprintf("[\"%s\"]", dep);
        x->jobs[i] = j;
    }
    return x;
}

/* A batch with an unknown dependency in its last job is refused whole, having written nothing. */
static void test_create_refused_writes_nothing(void **state)
{
    struct fx *f = *state;
    struct ad_batch_create_op *x = create_op(3, "job_unknown");
    assert_int_equal(core_fx_apply(f, &x->op), AD_E_DEPENDENCY_UNKNOWN);
    assert_int_equal(x->bad_item, 2);
    assert_int_equal(x->dep_bad, 0);
    struct ad_batch *b = NULL;
    assert_int_equal(f->s->ops->batch_get(f->c, NULL, x->batch->id, &b), AD_E_NOT_FOUND);
    struct ad_job_list l;
    assert_int_equal(f->s->ops->job_list(f->c, &(struct ad_list_query){.tenant = "t1", .limit = 10}, &l), AD_E_OK);
    assert_int_equal(l.n, 0);
    ad_job_list_free(&l);
    ad_op_free(&x->op);
}

/* The counts follow the jobs: a cancel moves one from queued to cancelled, in the cancel's own transaction. */
static void test_counts_move_with_jobs(void **state)
{
    struct fx *f = *state;
    struct ad_batch_create_op *x = create_op(2, NULL);
    assert_int_equal(core_fx_apply(f, &x->op), AD_E_OK);
    char *id = ad_strdup(x->batch->id), *job = ad_strdup(x->jobs[0]->id);
    ad_op_free(&x->op);
    struct ad_cancel_op *cx = ad_cancel_op_new();
    cx->tenant = ad_strdup("t1");
    cx->id = job;
    cx->now = T0 + 1000;
    assert_int_equal(core_fx_apply(f, &cx->op), AD_E_OK);
    ad_op_free(&cx->op);
    struct ad_batch *b = NULL;
    assert_int_equal(f->s->ops->batch_get(f->c, "t1", id, &b), AD_E_OK);
    assert_int_equal(b->total, 2);
    assert_int_equal(b->n[AD_QUEUED], 1);
    assert_int_equal(b->n[AD_CANCELLED], 1);
    assert_int_equal(ad_batch_status(b), AD_RUNNING);
    assert_true(b->finished_at == 0);
    ad_batch_free(b);
    assert_int_equal(f->s->ops->batch_get(f->c, "t2", id, &b), AD_E_NOT_FOUND); /* another tenant's */
    free(id);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_status_rules),
        cmocka_unit_test(test_render),
        cmocka_unit_test_setup_teardown(test_create_refused_writes_nothing, setup, core_fx_close),
        cmocka_unit_test_setup_teardown(test_counts_move_with_jobs, setup, core_fx_close),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
