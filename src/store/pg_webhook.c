/*
 * pg_webhook.c - the PostgreSQL store's webhook rows: endpoints and callback secrets (webhook_*), and the
 * outbox of deliveries (delivery_*), which several nodes' delivery threads share by claiming a row before
 * sending it. Like the rest of the store it decides nothing: the outbox's rules are in webhook/.
 */
#include "store/store_pg_int.h"

#include <stdlib.h>
#include <string.h>

/* ---- webhooks ---- */

/*
 * No-ops: PostgreSQL needs no read lock to give each statement a consistent view, and the delivery thread,
 * the one user of snapshots, claims each delivery it read with delivery_claim, which checks the row again
 * atomically before anything is sent.
 */
ad_err ad_pg_snapshot_begin(struct ad_conn *c)
{
    return AD_E_OK;
}

void ad_pg_snapshot_end(struct ad_conn *c)
{
}

static struct ad_webhook *read_webhook(const PGresult *r, int row)
{
    struct ad_webhook *w = ad_calloc(1, sizeof(*w));
#define PG_READ(name, kind, n) w->name = ad_pg_col_##kind(r, row, n);
    AD_WEBHOOK_COLUMNS(PG_READ)
#undef PG_READ
    return w;
}

static void read_webhook_slot(const PGresult *r, int row, void *slot)
{
    *(struct ad_webhook **)slot = read_webhook(r, row);
}

static ad_err fetch_webhooks(struct ad_conn *c, enum pg_stmt id, const struct pg_params *p, struct ad_webhook_list *out,
                             const char *what)
{
    *out = (struct ad_webhook_list){0};
    return ad_pg_fetch_rows(c, id, p, &out->items, &out->n, sizeof(*out->items), read_webhook_slot, what);
}

ad_err ad_pg_webhook_put(struct ad_conn *c, const struct ad_webhook *w)
{
    ad_hook_cache_drop(&c->hooks);
    struct pg_params p = {0};
    ad_pg_param_TEXT(&p, w->id);
    ad_pg_param_TEXT(&p, w->tenant);
    ad_pg_param_TEXT(&p, w->url);
    ad_pg_param_INT64(&p, w->events);
    ad_pg_param_TEXT(&p, w->secret);
    ad_pg_param_TEXT(&p, w->prev_secret);
    ad_pg_param_TIME(&p, w->prev_until);
    ad_pg_param_INT64(&p, w->created_at);
    ad_pg_param_TIME(&p, w->disabled_at);
    ad_pg_param_TEXT(&p, w->disabled_reason);
    return ad_pg_write1(c, ST_WEBHOOK_PUT, &p, CHECK_NONE, "put webhook");
}

/* The rows behind webhook_get and webhook_list; store.c remembers the transaction's lookups (ad_hooks_get,
 * ad_hooks_list): each job outcome with a callbackUrl asks for the callback secret, and the outbox for the
 * tenant's endpoints on every change. */
static ad_err pg_hooks_fetch(struct ad_conn *c, enum ad_hook_kind kind, const char *tenant, const char *id,
                             struct ad_webhook_list *out)
{
    struct pg_params p = {0};
    if (kind == AD_HOOKS_BY_ID) {
        ad_pg_param_TEXT(&p, id);
        ad_pg_param_TEXT(&p, tenant);
        return fetch_webhooks(c, ST_WEBHOOK_GET, &p, out, "get webhook");
    }
    ad_pg_param_TEXT(&p, tenant);
    if (kind == AD_HOOKS_CALLBACK)
        return fetch_webhooks(c, ST_WEBHOOK_CALLBACK, &p, out, "get webhook");
    ad_pg_param_INT(&p, kind == AD_HOOKS_ENABLED ? 1 : 0);
    return fetch_webhooks(c, ST_WEBHOOK_LIST, &p, out, "list webhooks");
}

ad_err ad_pg_webhook_get(struct ad_conn *c, const char *tenant, const char *id, struct ad_webhook **out)
{
    return ad_hooks_get(&c->hooks, c->in_tx, c, pg_hooks_fetch, tenant, id, out);
}

ad_err ad_pg_webhook_list(struct ad_conn *c, const char *tenant, int enabled_only, struct ad_webhook_list *out)
{
    return ad_hooks_list(&c->hooks, c->in_tx, c, pg_hooks_fetch, tenant, enabled_only, out);
}

/* Awaited, not only sent: the caller answers 404 for an endpoint that is not there. The endpoint's
 * deliveries go with it (foreign key). */
ad_err ad_pg_webhook_delete(struct ad_conn *c, const char *tenant, const char *id)
{
    ad_hook_cache_drop(&c->hooks);
    int own;
    ad_err e = ad_pg_auto_begin(c, &own);
    if (e != AD_E_OK)
        return e;
    struct pg_params p = {0};
    ad_pg_param_TEXT(&p, id);
    ad_pg_param_TEXT(&p, tenant);
    PGresult *r;
    e = ad_pg_query(c, ST_WEBHOOK_DELETE, &p, &r, "delete webhook");
    int gone = e == AD_E_OK && strcmp(PQcmdTuples(r), "0") == 0;
    PQclear(r);
    e = ad_pg_auto_end(c, own, e);
    return e == AD_E_OK && gone ? AD_E_NOT_FOUND : e;
}

static struct ad_delivery *read_delivery(const PGresult *r, int row)
{
    struct ad_delivery *d = ad_calloc(1, sizeof(*d));
    d->seq = ad_pg_col_INT64(r, row, 0);
#define PG_READ(name, kind, n) d->name = ad_pg_col_##kind(r, row, n);
    AD_DELIVERY_COLUMNS(PG_READ)
#undef PG_READ
    return d;
}

static void read_delivery_slot(const PGresult *r, int row, void *slot)
{
    *(struct ad_delivery **)slot = read_delivery(r, row);
}

static ad_err fetch_deliveries(struct ad_conn *c, enum pg_stmt id, const struct pg_params *p,
                               struct ad_delivery_list *out, const char *what)
{
    *out = (struct ad_delivery_list){0};
    return ad_pg_fetch_rows(c, id, p, &out->items, &out->n, sizeof(*out->items), read_delivery_slot, what);
}

/* The outbox shares the jobs' counter: a delivery's seq is the next seq of the batch that writes it. */
ad_err ad_pg_delivery_insert(struct ad_conn *c, struct ad_delivery *d)
{
    int own;
    int64_t seq;
    ad_err e = ad_pg_begin_seq_write(c, &own, &seq);
    if (e != AD_E_OK)
        return e;
    struct pg_params p = {0};
    ad_pg_param_INT64(&p, seq);
    ad_pg_param_TEXT(&p, d->id);
    ad_pg_param_TEXT(&p, d->tenant);
    ad_pg_param_TEXT(&p, d->webhook_id);
    ad_pg_param_TEXT(&p, d->url);
    ad_pg_param_TEXT(&p, d->event_id);
    ad_pg_param_TEXT(&p, d->event_type);
    ad_pg_param_TEXT(&p, d->job_id);
    ad_pg_param_TEXT(&p, d->body);
    ad_pg_param_INT64(&p, d->created_at);
    ad_pg_param_INT(&p, (int)d->state);
    ad_pg_param_INT(&p, d->attempts);
    ad_pg_param_TIME(&p, d->next_at);
    ad_pg_param_TIME(&p, d->last_at);
    ad_pg_param_INT(&p, d->last_status);
    ad_pg_param_TEXT(&p, d->last_error);
    ad_pg_param_TEXT(&p, d->traceparent);
    ad_pg_param_TEXT(&p, d->tracestate);
    e = ad_pg_auto_end(c, own, ad_pg_send_write(c, ST_DELIVERY_INSERT, &p, CHECK_NONE, "insert delivery"));
    if (e == AD_E_OK)
        d->seq = seq;
    return e;
}

/*
 * Only sent inside a batch, so a delivery deleted meanwhile (with its endpoint) is not reported as
 * AD_E_NOT_FOUND there: nothing is written, which is what the callers do on AD_E_NOT_FOUND too. Outside
 * a transaction the answer is exact.
 */
ad_err ad_pg_delivery_update(struct ad_conn *c, const struct ad_delivery *d)
{
    struct pg_params p = {0};
    ad_pg_param_INT64(&p, d->seq);
    ad_pg_param_INT(&p, (int)d->state);
    ad_pg_param_INT(&p, d->attempts);
    ad_pg_param_TIME(&p, d->state == AD_DLV_PENDING ? d->next_at : 0);
    ad_pg_param_TIME(&p, d->last_at);
    ad_pg_param_INT(&p, d->last_status);
    ad_pg_param_TEXT(&p, d->last_error);
    return ad_pg_write1(c, ST_DELIVERY_UPDATE, &p, c->in_tx ? CHECK_NONE : CHECK_ROW, "update delivery");
}

ad_err ad_pg_delivery_get(struct ad_conn *c, const char *tenant, const char *id, int64_t seq, struct ad_delivery **out)
{
    *out = NULL;
    struct pg_params p = {0};
    if (id != NULL) {
        ad_pg_param_TEXT(&p, id);
        ad_pg_param_TEXT(&p, tenant);
    } else {
        ad_pg_param_INT64(&p, seq);
    }
    struct ad_delivery_list l;
    ad_err e = fetch_deliveries(c, id != NULL ? ST_DELIVERY_GET : ST_DELIVERY_GET_SEQ, &p, &l, "get delivery");
    return ad_delivery_list_one(&l, e, out);
}

ad_err ad_pg_delivery_due(struct ad_conn *c, const char *const *exclude, size_t nexclude, int limit, struct ad_due *out,
                          size_t *n)
{
    *n = 0;
    struct pg_params p = {0};
    ad_pg_param_INT(&p, limit);
    char *arr = ad_pg_text_array(exclude, nexclude);
    ad_pg_param_TEXT(&p, arr);
    PGresult *r;
    ad_err e = ad_pg_query(c, ST_DELIVERY_DUE, &p, &r, "due deliveries");
    free(arr);
    if (e != AD_E_OK)
        return e;
    for (int i = 0; i < PQntuples(r) && *n < (size_t)limit; i++) {
        out[*n].seq = ad_pg_col_INT64(r, i, 0);
        out[*n].next_at = ad_pg_col_INT64(r, i, 1);
        ad_due_set_webhook(&out[*n], PQgetvalue(r, i, 2));
        (*n)++;
    }
    PQclear(r);
    return AD_E_OK;
}

ad_err ad_pg_delivery_list(struct ad_conn *c, const char *webhook_id, int state, int64_t before, int limit,
                           struct ad_delivery_list *out)
{
    struct pg_params p = {0};
    ad_pg_param_TEXT(&p, webhook_id);
    ad_pg_param_INT64(&p, before > 0 ? before : INT64_MAX);
    ad_pg_param_INT(&p, limit);
    if (state >= 0)
        ad_pg_param_INT(&p, state);
    return fetch_deliveries(c, state >= 0 ? ST_DELIVERY_LIST_STATE : ST_DELIVERY_LIST, &p, out, "list deliveries");
}

ad_err ad_pg_delivery_abandon(struct ad_conn *c, const char *webhook_id, const char *reason)
{
    struct pg_params p = {0};
    ad_pg_param_TEXT(&p, webhook_id);
    ad_pg_param_TEXT(&p, reason);
    return ad_pg_write1(c, ST_DELIVERY_ABANDON, &p, CHECK_NONE, "abandon deliveries");
}

ad_err ad_pg_delivery_sweep(struct ad_conn *c, int64_t before, int limit, int *done_out)
{
    return ad_pg_sweep_alone(c, ST_DELIVERY_SWEEP, before, limit, done_out, "sweep deliveries");
}

/* Several nodes' delivery threads read the same due rows: the one whose update moves next_at sends it. */
ad_err ad_pg_delivery_claim(struct ad_conn *c, int64_t seq, int64_t now, int64_t until, const char *owner)
{
    struct pg_params p = {0};
    ad_pg_param_INT64(&p, seq);
    ad_pg_param_INT64(&p, now);
    ad_pg_param_INT64(&p, until);
    ad_pg_param_TEXT(&p, owner);
    PGresult *r;
    ad_err e = ad_pg_query(c, ST_DELIVERY_CLAIM, &p, &r, "claim delivery");
    if (e == AD_E_OK && strcmp(PQcmdTuples(r), "1") != 0)
        e = AD_E_NOT_FOUND;
    PQclear(r);
    return e;
}

ad_err ad_pg_delivery_release(struct ad_conn *c, const char *owner, int64_t now)
{
    struct pg_params p = {0};
    ad_pg_param_TEXT(&p, owner);
    ad_pg_param_INT64(&p, now);
    PGresult *r;
    ad_err e = ad_pg_query(c, ST_DELIVERY_RELEASE, &p, &r, "release claimed deliveries");
    PQclear(r);
    return e;
}
