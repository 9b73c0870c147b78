/*
 * bulk.c - a page of a bulk cancel or retry (bulk.h): read the page's matching jobs, then apply the core's single-job
 * cancel or retry to each, nested in the page, inside the writer's transaction.
 *
 * The single-job operations are used as they are, so nothing here decides what a cancel or a retry does: a job that
 * changed state between the page's read and its turn (a worker completed it) is judged as the single operation
 * judges it, and a job that needs nothing (final, or running with its cancel already asked for) is matched but not
 * changed. A nested operation that fails before writing (a retry of a job whose callbackUrl has no secret) costs the
 * page only that job; one that fails after writing fails the page, and the writer's batch with it, as any op would.
 */
#include "core/bulk.h"

#include <stdlib.h>
#include <string.h>

/* The single-job op that a matching job calls for, or NULL when it needs none. */
static struct ad_op *bulk_item(const struct ad_bulk_op *b, const struct ad_job *j)
{
    if (b->action == AD_BULK_CANCEL) {
        if (ad_status_terminal(j->status) || (j->status == AD_RUNNING && j->cancel_requested))
            return NULL;
        struct ad_cancel_op *x = ad_cancel_op_new();
        x->tenant = ad_strdup(j->tenant);
        x->id = ad_strdup(j->id);
        x->now = b->now;
        return &x->op;
    }
    if (j->status != AD_FAILED && j->status != AD_CANCELLED)
        return NULL;
    struct ad_retry_op *x = ad_retry_op_new();
    x->tenant = ad_strdup(j->tenant);
    x->id = ad_strdup(j->id);
    x->new_id = ad_new_id("job_");
    x->now = b->now;
    return &x->op;
}

static ad_err bulk_apply(struct ad_op *op, struct ad_conn *c)
{
    struct ad_bulk_op *b = (struct ad_bulk_op *)op;
    const struct ad_store_ops *st = ad_core_store_ops();
    struct ad_job_list l;
    b->q.now = b->now;
    ad_err e = st->job_bulk_page(c, &b->q, b->after, &b->upto, AD_BULK_PAGE, &l, &b->next);
    if (e != AD_E_OK)
        return e;
    b->matched = l.n;
    b->items = ad_calloc(l.n != 0 ? l.n : 1, sizeof(*b->items));
    for (size_t i = 0; i < l.n; i++) {
        struct ad_op *it = bulk_item(b, l.items[i]);
        if (it != NULL)
            b->items[b->nitems++] = it;
    }
    ad_job_list_free(&l);
    /* The jobs the page will load, read ahead together (a store that talks to a server sends them at once). */
    for (size_t i = 0; i < b->nitems; i++)
        if (b->items[i]->prefetch != NULL)
            b->items[i]->prefetch(b->items[i], c);
    for (size_t i = 0; i < b->nitems; i++) {
        struct ad_op *it = b->items[i];
        e = ad_writer_apply_nested(st, it, c);
        if (e != AD_E_OK)
            return e;
        if (it->err != AD_E_OK)
            continue;
        b->changed++;
        for (size_t k = 0; k < it->nchanged; k++)
            ad_op_changed(op, ad_op_change_at(it, k)->job);
    }
    return AD_E_OK;
}

static void bulk_destroy(struct ad_op *op)
{
    struct ad_bulk_op *b = (struct ad_bulk_op *)op;
    for (size_t i = 0; i < b->nitems; i++)
        ad_op_free(b->items[i]);
    free(b->items);
    free(b);
}

struct ad_bulk_op *ad_bulk_op_new(void)
{
    struct ad_bulk_op *b = ad_calloc(1, sizeof(*b));
    b->op.apply = bulk_apply;
    b->op.destroy = bulk_destroy;
    return b;
}
