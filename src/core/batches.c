/*
 * batches.c - batches (batches.h): their status rules and representation, the counts kept as their jobs change,
 * and the operations that create, read and cancel them.
 *
 * A create applies every check that can refuse it (its idempotency key, each job's dependencies) before its first
 * write, so that a refused batch writes nothing and costs the writer's other operations nothing; a replayed one
 * writes nothing either. The key's record (the store's, which a job's key uses too: it names the batch in place of
 * a job) is written in the batch's commit. A cancel is the single-job cancel
 * applied to each job not final, nested in the operation, as a bulk cancel does (bulk.c).
 */
#include "core/batches.h"
#include "core/core.h"
#include "core/deps.h"
#include "common/json.h"
#include "job/event.h"

#include <stdlib.h>
#include <string.h>

enum ad_status ad_batch_status(const struct ad_batch *b)
{
    if (b->n[AD_QUEUED] + b->n[AD_RUNNING] > 0)
        return AD_RUNNING;
    if (b->n[AD_SUCCEEDED] == b->total)
        return AD_SUCCEEDED;
    if (b->n[AD_SUCCEEDED] + b->n[AD_PARTIAL] + b->n[AD_FAILED] == 0)
        return AD_CANCELLED;
    if (b->n[AD_SUCCEEDED] + b->n[AD_PARTIAL] == 0)
        return AD_FAILED;
    return AD_PARTIAL;
}

int ad_batch_render(const struct ad_batch *batch, struct ad_buf *b)
{
    enum ad_status s = ad_batch_status(batch);
    int done = batch->total - batch->n[AD_QUEUED] - batch->n[AD_RUNNING];
    AD_JSON_OPEN(b, "id");
    ad_json_str(b, batch->id);
    AD_JSON_KEY(b, "status");
    ad_json_str(b, ad_status_name(s));
    AD_JSON_KEY(b, "total");
    ad_json_int(b, batch->total);
    AD_JSON_KEY(b, "counts");
    static const enum ad_status order[] = {AD_QUEUED, AD_RUNNING, AD_SUCCEEDED, AD_PARTIAL, AD_FAILED, AD_CANCELLED};
    for (size_t i = 0; i < sizeof(order) / sizeof(order[0]); i++) {
        if (i == 0)
            AD_BUF_LIT(b, "{\"");
        else
            AD_BUF_LIT(b, ",\"");
        ad_buf_str(b, ad_status_name(order[i]));
        AD_BUF_LIT(b, "\":");
        ad_json_int(b, batch->n[order[i]]);
    }
    AD_BUF_LIT(b, "}");
    AD_JSON_KEY(b, "progress");
    ad_json_int(b, batch->total > 0 ? done * 100 / batch->total : 100);
    AD_JSON_KEY(b, "createdAt");
    ad_json_time(b, batch->created_at);
    AD_JSON_KEY(b, "finishedAt");
    ad_json_time(b, batch->finished_at);
    AD_BUF_LIT(b, ",\"links\":{\"self\":\"/v1/batches/");
    ad_buf_str(b, batch->id);
    AD_BUF_LIT(b, "\",\"jobs\":\"/v1/batches/");
    ad_buf_str(b, batch->id);
    AD_BUF_LIT(b, "/jobs\",\"cancel\":\"/v1/batches/");
    ad_buf_str(b, batch->id);
    AD_BUF_LIT(b, ":cancel\"}}");
    return ad_json_end(b);
}

ad_err ad_batch_moved(struct ad_conn *c, const struct ad_job *j, enum ad_status from)
{
    const struct ad_store_ops *st = ad_core_store_ops();
    struct ad_batch *b;
    ad_err e = st->batch_get(c, NULL, j->batch_id, &b);
    if (e != AD_E_OK)
        return e == AD_E_NOT_FOUND ? AD_E_OK : e;
    if (b->n[from] > 0)
        b->n[from]--;
    b->n[j->status]++;
    /* The batch expires with the last of its jobs to expire (each ended job's expires_at is its type's retention
     * for its final status): it answers 410 from then, and the sweep deletes its row a tombstone period later. */
    if (ad_status_terminal(j->status) && j->expires_at > b->expires_at)
        b->expires_at = j->expires_at;
    e = AD_E_OK;
    if (b->finished_at == 0 && ad_batch_status(b) != AD_RUNNING) {
        /* The batch ends here, once: its event goes into the outbox in this transaction. */
        b->finished_at = j->updated_at;
        enum ad_status s = ad_batch_status(b);
        ad_deps_ended(b->id, s == AD_FAILED || s == AD_CANCELLED);
        e = ad_core_batch_outbox(c, b, s);
    }
    if (e == AD_E_OK)
        e = st->batch_update(c, b);
    ad_batch_free(b);
    return e;
}

/* The key's record, if any: with the same fingerprint, x's batch becomes the stored one (*found = 1). */
static ad_err idem_replay(struct ad_batch_create_op *x, struct ad_conn *c, int *found)
{
    const struct ad_store_ops *st = ad_core_store_ops();
    struct ad_idem rec;
    ad_err e = st->idem_get(c, x->batch->tenant, x->idem_key, &rec);
    if (e != AD_E_OK)
        return e == AD_E_NOT_FOUND ? AD_E_OK : e;
    int same = strcmp(rec.fingerprint, x->fingerprint) == 0;
    struct ad_batch *orig = NULL;
    if (same)
        e = st->batch_get(c, x->batch->tenant, rec.job_id, &orig);
    free(rec.job_id);
    if (!same)
        return AD_E_IDEMPOTENCY_KEY_REUSED;
    if (e != AD_E_OK)
        return e == AD_E_NOT_FOUND ? AD_E_GONE : e;
    ad_batch_free(x->batch);
    x->batch = orig;
    x->replayed = 1;
    *found = 1;
    return AD_E_OK;
}

static ad_err create_apply(struct ad_op *op, struct ad_conn *c)
{
    struct ad_batch_create_op *x = (struct ad_batch_create_op *)op;
    const struct ad_store_ops *st = ad_core_store_ops();
    if (x->idem_key != NULL) {
        int found = 0;
        ad_err e = idem_replay(x, c, &found);
        if (e != AD_E_OK || found)
            return e;
    }
    char **failed = ad_calloc(x->n, sizeof(*failed));
    ad_err e = x->batch->callback_url != NULL ? ad_core_callback_ready(c, x->batch->tenant) : AD_E_OK;
    for (size_t i = 0; e == AD_E_OK && i < x->n; i++) {
        if (x->jobs[i]->depends_on == NULL)
            continue;
        e = ad_deps_check(c, x->jobs[i], &x->dep_bad, &failed[i]);
        if (e != AD_E_OK)
            x->bad_item = (int)i;
    }
    x->batch->n[AD_QUEUED] = x->batch->total = (int)x->n;
    if (e == AD_E_OK)
        e = st->batch_insert(c, x->batch);
    if (e == AD_E_OK && x->idem_key != NULL)
        e = st->idem_put(c, x->batch->tenant, x->idem_key, x->fingerprint, x->batch->id, x->batch->created_at);
    for (size_t i = 0; e == AD_E_OK && i < x->n; i++) {
        struct ad_job *j = x->jobs[i];
        ad_job_set(&j->batch_id, x->batch->id);
        e = ad_core_job_insert(c, j);
        if (e == AD_E_OK && j->depends_on != NULL)
            e = ad_deps_link(c, j, failed[i], j->created_at);
        if (e == AD_E_OK)
            ad_op_changed(op, &x->jobs[i]);
    }
    for (size_t i = 0; i < x->n; i++)
        free(failed[i]);
    free(failed);
    if (e == AD_E_OK)
        e = ad_deps_settle(op, c, NULL, x->batch->created_at);
    return e;
}

static void create_destroy(struct ad_op *op)
{
    struct ad_batch_create_op *x = (struct ad_batch_create_op *)op;
    for (size_t i = 0; i < x->n; i++)
        ad_job_free(x->jobs[i]);
    free(x->jobs);
    ad_batch_free(x->batch);
    free(x->idem_key);
    free(x->inflight);
    free(x);
}

struct ad_batch_create_op *ad_batch_create_op_new(size_t n)
{
    struct ad_batch_create_op *x = ad_calloc(1, sizeof(*x));
    x->op.apply = create_apply;
    x->op.destroy = create_destroy;
    x->n = n;
    x->jobs = ad_calloc(n != 0 ? n : 1, sizeof(*x->jobs));
    x->bad_item = x->dep_bad = -1;
    return x;
}

/* Cancel each job of the batch not final, as DELETE /v1/jobs/{id} would. */
static ad_err cancel_jobs(struct ad_batches_op *x, struct ad_conn *c)
{
    const struct ad_store_ops *st = ad_core_store_ops();
    struct ad_job_list l;
    ad_err e = st->batch_jobs(c, x->tenant, x->id, 0, AD_BATCH_MAX, &l);
    for (size_t i = 0; e == AD_E_OK && i < l.n; i++) {
        const struct ad_job *j = l.items[i];
        if (ad_status_terminal(j->status) || (j->status == AD_RUNNING && j->cancel_requested))
            continue;
        struct ad_cancel_op *it = ad_cancel_op_new();
        it->tenant = ad_strdup(j->tenant);
        it->id = ad_strdup(j->id);
        it->now = x->now;
        e = ad_writer_apply_nested(st, &it->op, c);
        /* The nested op's changes are taken over: the jobs move into this op, which publishes them. */
        for (size_t k = 0; e == AD_E_OK && it->op.err == AD_E_OK && k < it->op.nchanged; k++) {
            struct ad_job **slot = ad_op_change_at(&it->op, k)->job;
            ad_op_changed_own(&x->op, *slot);
            *slot = NULL;
        }
        ad_op_free(&it->op);
    }
    ad_job_list_free(&l);
    return e;
}

static ad_err batches_apply(struct ad_op *op, struct ad_conn *c)
{
    struct ad_batches_op *x = (struct ad_batches_op *)op;
    const struct ad_store_ops *st = ad_core_store_ops();
    ad_err e = st->batch_get(c, x->tenant, x->id, &x->batch);
    if (e != AD_E_OK || x->action == AD_BATCH_GET)
        return e;
    if (x->action == AD_BATCH_JOBS)
        return st->batch_jobs(c, x->tenant, x->id, x->before, x->limit, &x->jobs);
    if (ad_batch_status(x->batch) != AD_RUNNING)
        return AD_E_OK;
    e = cancel_jobs(x, c);
    ad_batch_free(x->batch);
    x->batch = NULL;
    return e == AD_E_OK ? st->batch_get(c, x->tenant, x->id, &x->batch) : e;
}

static void batches_destroy(struct ad_op *op)
{
    struct ad_batches_op *x = (struct ad_batches_op *)op;
    free(x->tenant);
    free(x->id);
    ad_batch_free(x->batch);
    ad_job_list_free(&x->jobs);
    free(x);
}

struct ad_batches_op *ad_batches_op_new(void)
{
    struct ad_batches_op *x = ad_calloc(1, sizeof(*x));
    x->op.apply = batches_apply;
    x->op.destroy = batches_destroy;
    return x;
}
