/*
 * sqlite_webhook.c - the SQLite store's webhook rows: endpoints and callback secrets (webhook_*), the outbox of
 * deliveries (delivery_*), and the read snapshots the delivery thread reads them in. One node has no one to
 * race for a delivery, so claiming one is a no-op. Like the rest of the store it decides nothing.
 */
#include "store/store_sqlite_int.h"

#include <stdlib.h>
#include <string.h>

/* ---- webhooks ---- */

/* A read transaction: one snapshot (and one WAL read lock) for a run of queries. */
ad_err ad_sq_snapshot_begin(struct ad_conn *c)
{
    return ad_sq_run_id(c, ST_SNAPSHOT, "begin snapshot");
}

void ad_sq_snapshot_end(struct ad_conn *c)
{
    if (!sqlite3_get_autocommit(c->db))
        ad_sq_run_id(c, ST_ROLLBACK, "end snapshot");
}

static struct ad_webhook *read_webhook(sqlite3_stmt *st)
{
    struct ad_webhook *w = ad_calloc(1, sizeof(*w));
#define SQ_READ(name, kind, n) w->name = ad_sq_read_##kind(st, n);
    AD_WEBHOOK_COLUMNS(SQ_READ)
#undef SQ_READ
    return w;
}

static void read_webhook_slot(sqlite3_stmt *st, void *slot)
{
    *(struct ad_webhook **)slot = read_webhook(st);
}

/* Step a bound webhook select to the end into out (which it starts empty), then reset it. */
static ad_err fetch_webhooks(struct ad_conn *c, sqlite3_stmt *st, struct ad_webhook_list *out, const char *what)
{
    *out = (struct ad_webhook_list){0};
    ad_err e = ad_sq_fetch_rows(c, st, &out->items, &out->n, sizeof(*out->items), read_webhook_slot, what);
    if (e != AD_E_OK)
        ad_webhook_list_free(out);
    return e;
}

ad_err ad_sq_webhook_put(struct ad_conn *c, const struct ad_webhook *w)
{
    ad_hook_cache_drop(&c->hooks);
    sqlite3_stmt *st;
    ad_err e = ad_sq_write_stmt(c, ST_WEBHOOK_PUT, &st);
    if (e != AD_E_OK)
        return e;
    ad_sq_bind_TEXT(st, 1, w->id);
    ad_sq_bind_TEXT(st, 2, w->tenant);
    ad_sq_bind_TEXT(st, 3, w->url);
    sqlite3_bind_int64(st, 4, w->events);
    ad_sq_bind_TEXT(st, 5, w->secret);
    ad_sq_bind_TEXT(st, 6, w->prev_secret);
    ad_sq_bind_TIME(st, 7, w->prev_until);
    sqlite3_bind_int64(st, 8, w->created_at);
    ad_sq_bind_TIME(st, 9, w->disabled_at);
    ad_sq_bind_TEXT(st, 10, w->disabled_reason);
    return ad_sq_run(c, st, "put webhook");
}

/* The rows behind webhook_get and webhook_list; store.c remembers the write transaction's lookups (ad_hooks_get,
 * ad_hooks_list): the writer is the only one to write the file, and its own endpoint writes drop them. */
static ad_err sq_hooks_fetch(struct ad_conn *c, enum ad_hook_kind kind, const char *tenant, const char *id,
                             struct ad_webhook_list *out)
{
    sqlite3_stmt *st = ad_sq_stmt(c, kind == AD_HOOKS_BY_ID      ? ST_WEBHOOK_GET
                                     : kind == AD_HOOKS_CALLBACK ? ST_WEBHOOK_CALLBACK
                                                                 : ST_WEBHOOK_LIST);
    if (st == NULL)
        return AD_E_INTERNAL;
    if (kind == AD_HOOKS_BY_ID) {
        ad_sq_bind_TEXT(st, 1, id);
        ad_sq_bind_TEXT(st, 2, tenant);
    } else {
        ad_sq_bind_TEXT(st, 1, tenant);
        if (kind != AD_HOOKS_CALLBACK)
            sqlite3_bind_int(st, 2, kind == AD_HOOKS_ENABLED);
    }
    return fetch_webhooks(c, st, out,
                          kind == AD_HOOKS_ALL || kind == AD_HOOKS_ENABLED ? "list webhooks" : "get webhook");
}

ad_err ad_sq_webhook_get(struct ad_conn *c, const char *tenant, const char *id, struct ad_webhook **out)
{
    return ad_hooks_get(&c->hooks, c->in_tx, c, sq_hooks_fetch, tenant, id, out);
}

ad_err ad_sq_webhook_list(struct ad_conn *c, const char *tenant, int enabled_only, struct ad_webhook_list *out)
{
    return ad_hooks_list(&c->hooks, c->in_tx, c, sq_hooks_fetch, tenant, enabled_only, out);
}

ad_err ad_sq_webhook_delete(struct ad_conn *c, const char *tenant, const char *id)
{
    ad_hook_cache_drop(&c->hooks);
    sqlite3_stmt *st;
    ad_err e = ad_sq_write_stmt(c, ST_WEBHOOK_DELETE, &st);
    if (e != AD_E_OK)
        return e;
    ad_sq_bind_TEXT(st, 1, id);
    ad_sq_bind_TEXT(st, 2, tenant);
    e = ad_sq_run(c, st, "delete webhook");
    return e == AD_E_OK && sqlite3_changes(c->db) == 0 ? AD_E_NOT_FOUND : e;
}

static struct ad_delivery *read_delivery(sqlite3_stmt *st)
{
    struct ad_delivery *d = ad_calloc(1, sizeof(*d));
    d->seq = sqlite3_column_int64(st, 0);
#define SQ_READ(name, kind, n) d->name = ad_sq_read_##kind(st, n);
    AD_DELIVERY_COLUMNS(SQ_READ)
#undef SQ_READ
    return d;
}

static void read_delivery_slot(sqlite3_stmt *st, void *slot)
{
    *(struct ad_delivery **)slot = read_delivery(st);
}

static ad_err fetch_deliveries(struct ad_conn *c, sqlite3_stmt *st, struct ad_delivery_list *out, const char *what)
{
    *out = (struct ad_delivery_list){0};
    ad_err e = ad_sq_fetch_rows(c, st, &out->items, &out->n, sizeof(*out->items), read_delivery_slot, what);
    if (e != AD_E_OK)
        ad_delivery_list_free(out);
    return e;
}

ad_err ad_sq_delivery_insert(struct ad_conn *c, struct ad_delivery *d)
{
    sqlite3_stmt *st;
    ad_err e = ad_sq_write_stmt(c, ST_DELIVERY_INSERT, &st);
    if (e != AD_E_OK)
        return e;
    ad_sq_bind_TEXT(st, 1, d->id);
    ad_sq_bind_TEXT(st, 2, d->tenant);
    ad_sq_bind_TEXT(st, 3, d->webhook_id);
    ad_sq_bind_TEXT(st, 4, d->url);
    ad_sq_bind_TEXT(st, 5, d->event_id);
    ad_sq_bind_TEXT(st, 6, d->event_type);
    ad_sq_bind_TEXT(st, 7, d->job_id);
    ad_sq_bind_TEXT(st, 8, d->body);
    sqlite3_bind_int64(st, 9, d->created_at);
    sqlite3_bind_int(st, 10, (int)d->state);
    sqlite3_bind_int(st, 11, d->attempts);
    ad_sq_bind_TIME(st, 12, d->next_at);
    ad_sq_bind_TIME(st, 13, d->last_at);
    sqlite3_bind_int(st, 14, d->last_status);
    ad_sq_bind_TEXT(st, 15, d->last_error);
    ad_sq_bind_TEXT(st, 16, d->traceparent);
    ad_sq_bind_TEXT(st, 17, d->tracestate);
    e = ad_sq_run(c, st, "insert delivery");
    if (e == AD_E_OK)
        d->seq = sqlite3_last_insert_rowid(c->db);
    return e;
}

ad_err ad_sq_delivery_update(struct ad_conn *c, const struct ad_delivery *d)
{
    sqlite3_stmt *st;
    ad_err e = ad_sq_write_stmt(c, ST_DELIVERY_UPDATE, &st);
    if (e != AD_E_OK)
        return e;
    sqlite3_bind_int64(st, 1, d->seq);
    sqlite3_bind_int(st, 2, (int)d->state);
    sqlite3_bind_int(st, 3, d->attempts);
    ad_sq_bind_TIME(st, 4, d->state == AD_DLV_PENDING ? d->next_at : 0);
    ad_sq_bind_TIME(st, 5, d->last_at);
    sqlite3_bind_int(st, 6, d->last_status);
    ad_sq_bind_TEXT(st, 7, d->last_error);
    e = ad_sq_run(c, st, "update delivery");
    return e == AD_E_OK && sqlite3_changes(c->db) == 0 ? AD_E_NOT_FOUND : e;
}

ad_err ad_sq_delivery_get(struct ad_conn *c, const char *tenant, const char *id, int64_t seq, struct ad_delivery **out)
{
    *out = NULL;
    sqlite3_stmt *st = ad_sq_stmt(c, id != NULL ? ST_DELIVERY_GET : ST_DELIVERY_GET_SEQ);
    if (st == NULL)
        return AD_E_INTERNAL;
    if (id != NULL) {
        ad_sq_bind_TEXT(st, 1, id);
        ad_sq_bind_TEXT(st, 2, tenant);
    } else {
        sqlite3_bind_int64(st, 1, seq);
    }
    struct ad_delivery_list l;
    ad_err e = fetch_deliveries(c, st, &l, "get delivery");
    return ad_delivery_list_one(&l, e, out);
}

ad_err ad_sq_delivery_due(struct ad_conn *c, const char *const *exclude, size_t nexclude, int limit, struct ad_due *out,
                          size_t *n)
{
    *n = 0;
    sqlite3_stmt *st = ad_sq_stmt(c, ST_DELIVERY_DUE);
    if (st == NULL)
        return AD_E_INTERNAL;
    sqlite3_bind_int(st, 1, limit);
    for (int i = 0; i < AD_DUE_EXCLUDE_MAX; i++)
        ad_sq_bind_TEXT(st, 2 + i, (size_t)i < nexclude ? exclude[i] : "");
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW && *n < (size_t)limit) {
        out[*n].seq = sqlite3_column_int64(st, 0);
        out[*n].next_at = sqlite3_column_int64(st, 1);
        ad_due_set_webhook(&out[*n], (const char *)sqlite3_column_text(st, 2));
        (*n)++;
    }
    ad_err e = rc == SQLITE_DONE || rc == SQLITE_ROW ? AD_E_OK : ad_sq_fail(c, rc, "due deliveries");
    ad_sq_done(st);
    return e;
}

ad_err ad_sq_delivery_list(struct ad_conn *c, const char *webhook_id, int state, int64_t before, int limit,
                           struct ad_delivery_list *out)
{
    *out = (struct ad_delivery_list){0};
    sqlite3_stmt *st = ad_sq_stmt(c, state >= 0 ? ST_DELIVERY_LIST_STATE : ST_DELIVERY_LIST);
    if (st == NULL)
        return AD_E_INTERNAL;
    ad_sq_bind_TEXT(st, 1, webhook_id);
    sqlite3_bind_int64(st, 2, before > 0 ? before : INT64_MAX);
    sqlite3_bind_int(st, 3, limit);
    if (state >= 0)
        sqlite3_bind_int(st, 4, state);
    return fetch_deliveries(c, st, out, "list deliveries");
}

ad_err ad_sq_delivery_abandon(struct ad_conn *c, const char *webhook_id, const char *reason)
{
    sqlite3_stmt *st;
    ad_err e = ad_sq_write_stmt(c, ST_DELIVERY_ABANDON, &st);
    if (e != AD_E_OK)
        return e;
    ad_sq_bind_TEXT(st, 1, webhook_id);
    ad_sq_bind_TEXT(st, 2, reason);
    return ad_sq_run(c, st, "abandon deliveries");
}

/* One process per data directory (the lock in ad_store_sqlite_open): its busy set is claim enough. */
ad_err ad_sq_delivery_claim(struct ad_conn *c, int64_t seq, int64_t now, int64_t until, const char *owner)
{
    return AD_E_OK;
}

ad_err ad_sq_delivery_release(struct ad_conn *c, const char *owner, int64_t now)
{
    return AD_E_OK;
}

ad_err ad_sq_delivery_sweep(struct ad_conn *c, int64_t before, int limit, int *done_out)
{
    *done_out = 0;
    ad_err e = ad_sq_check_tx(c);
    return e == AD_E_OK ? ad_sq_sweep_step(c, ST_DELIVERY_SWEEP, before, limit, done_out, "sweep deliveries") : e;
}
