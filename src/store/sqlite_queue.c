/*
 * sqlite_queue.c - the SQLite store's queue rows (queue_*): the settings of each tenant's type and its rate
 * window, and the counts of a queue's jobs. It stores and counts; what the settings mean is decided in
 * core/queues.c. Written only by the writer, inside its transaction, so a lease's read of the window and the
 * running count sees every earlier write of the same transaction. The per-group limits read the running jobs by
 * group and keep each group's rate window in queue_groups, a row per group leased in the current window.
 */
#include "store/store_sqlite_int.h"

#include <stdlib.h>
#include <string.h>

static void bind_rate(sqlite3_stmt *st, int i, const struct ad_queue_rate *r)
{
    if (r->limit > 0) {
        sqlite3_bind_int(st, i, r->limit);
        sqlite3_bind_int64(st, i + 1, r->period_ms);
    } else {
        sqlite3_bind_null(st, i);
        sqlite3_bind_null(st, i + 1);
    }
}

static void read_queue(sqlite3_stmt *st, void *slot)
{
    struct ad_queue *q = slot;
    q->tenant = ad_sq_read_TEXT(st, 0);
    q->type = ad_sq_read_TEXT(st, 1);
    q->paused = sqlite3_column_int(st, 2);
    q->concurrency = sqlite3_column_int(st, 3);
    q->group_concurrency = sqlite3_column_int(st, 4);
    q->rate = (struct ad_queue_rate){sqlite3_column_int(st, 5), sqlite3_column_int64(st, 6)};
    q->group_rate = (struct ad_queue_rate){sqlite3_column_int(st, 7), sqlite3_column_int64(st, 8)};
    q->window_start = sqlite3_column_int64(st, 9);
    q->window_count = sqlite3_column_int(st, 10);
}

ad_err ad_sq_queue_get(struct ad_conn *c, const char *tenant, const char *type, struct ad_queue *out)
{
    memset(out, 0, sizeof(*out));
    sqlite3_stmt *st = ad_sq_stmt(c, ST_QUEUE_GET);
    if (st == NULL)
        return AD_E_INTERNAL;
    ad_sq_bind_TEXT(st, 1, tenant);
    ad_sq_bind_TEXT(st, 2, type);
    int rc = sqlite3_step(st);
    ad_err e = AD_E_OK;
    if (rc == SQLITE_ROW)
        read_queue(st, out);
    else if (rc == SQLITE_DONE)
        e = AD_E_NOT_FOUND;
    else
        e = ad_sq_fail(c, rc, "get queue");
    ad_sq_done(st);
    return e;
}

ad_err ad_sq_queue_put(struct ad_conn *c, const struct ad_queue *q)
{
    ad_err e = ad_sq_check_tx(c);
    if (e != AD_E_OK)
        return e;
    sqlite3_stmt *st = ad_sq_stmt(c, ST_QUEUE_PUT);
    if (st == NULL)
        return AD_E_INTERNAL;
    ad_sq_bind_TEXT(st, 1, q->tenant);
    ad_sq_bind_TEXT(st, 2, q->type);
    sqlite3_bind_int(st, 3, q->paused != 0);
    if (q->concurrency > 0)
        sqlite3_bind_int(st, 4, q->concurrency);
    if (q->group_concurrency > 0)
        sqlite3_bind_int(st, 5, q->group_concurrency);
    bind_rate(st, 6, &q->rate);
    bind_rate(st, 8, &q->group_rate);
    sqlite3_bind_int64(st, 10, q->window_start);
    sqlite3_bind_int(st, 11, q->window_count);
    return ad_sq_run(c, st, "put queue");
}

ad_err ad_sq_queue_list(struct ad_conn *c, const char *tenant, struct ad_queue_list *out)
{
    memset(out, 0, sizeof(*out));
    sqlite3_stmt *st = ad_sq_stmt(c, ST_QUEUE_LIST);
    if (st == NULL)
        return AD_E_INTERNAL;
    ad_sq_bind_TEXT(st, 1, tenant);
    ad_err e = ad_sq_fetch_rows(c, st, &out->items, &out->n, sizeof(*out->items), read_queue, "list queues");
    if (e != AD_E_OK)
        ad_queue_list_free(out);
    return e;
}

static void bind_queue_keys(sqlite3_stmt *st, const char *tenant, const char *type)
{
    ad_sq_bind_TEXT(st, 1, tenant);
    ad_sq_bind_TEXT(st, 2, type);
    sqlite3_bind_int64(st, 4, ad_sq_key(tenant, type));
    sqlite3_bind_int64(st, 5, ad_sq_key(tenant, NULL));
}

ad_err ad_sq_queue_counts(struct ad_conn *c, const char *tenant, const char *type, int64_t now,
                          struct ad_queue_counts *out)
{
    memset(out, 0, sizeof(*out));
    sqlite3_stmt *st = ad_sq_stmt(c, ST_QUEUE_COUNTS);
    if (st == NULL)
        return AD_E_INTERNAL;
    bind_queue_keys(st, tenant, type);
    sqlite3_bind_int64(st, 3, now);
    int rc = sqlite3_step(st);
    ad_err e = AD_E_OK;
    if (rc == SQLITE_ROW) {
        out->queued = sqlite3_column_int64(st, 0);
        out->running = sqlite3_column_int64(st, 1);
        out->scheduled = sqlite3_column_int64(st, 2);
    } else {
        e = ad_sq_fail(c, rc, "count queue");
    }
    ad_sq_done(st);
    return e;
}

ad_err ad_sq_queue_running(struct ad_conn *c, const char *tenant, const char *type, int64_t *out)
{
    *out = 0;
    sqlite3_stmt *st = ad_sq_stmt(c, ST_QUEUE_RUNNING);
    if (st == NULL)
        return AD_E_INTERNAL;
    bind_queue_keys(st, tenant, type);
    int rc = sqlite3_step(st);
    ad_err e = AD_E_OK;
    if (rc == SQLITE_ROW)
        *out = sqlite3_column_int64(st, 0);
    else
        e = ad_sq_fail(c, rc, "count running jobs of a queue");
    ad_sq_done(st);
    return e;
}

static void read_group_count(sqlite3_stmt *st, void *slot)
{
    struct ad_group_count *g = slot;
    g->group = ad_sq_read_TEXT(st, 0);
    if (g->group == NULL)
        g->group = ad_strdup("");
    g->n = sqlite3_column_int64(st, 1);
}

static ad_err group_counts(struct ad_conn *c, sqlite3_stmt *st, struct ad_group_count_list *out, const char *what)
{
    ad_err e = ad_sq_fetch_rows(c, st, &out->items, &out->n, sizeof(*out->items), read_group_count, what);
    if (e != AD_E_OK)
        ad_group_count_list_free(out);
    return e;
}

static void read_group(sqlite3_stmt *st, void *slot)
{
    *(char **)slot = ad_sq_read_TEXT(st, 0);
}

static int cmp_group(const void *a, const void *b)
{
    const char *x = *(char *const *)a, *y = *(char *const *)b;
    return strcmp(x != NULL ? x : "", y != NULL ? y : "");
}

ad_err ad_sq_queue_group_running(struct ad_conn *c, const char *tenant, const char *type, int64_t min,
                                 struct ad_group_count_list *out)
{
    memset(out, 0, sizeof(*out));
    sqlite3_stmt *st = ad_sq_stmt(c, ST_GROUP_RUNNING);
    if (st == NULL)
        return AD_E_INTERNAL;
    bind_queue_keys(st, tenant, type);
    char **g = NULL;
    size_t n = 0;
    ad_err e = ad_sq_fetch_rows(c, st, &g, &n, sizeof(*g), read_group, "count running jobs by group");
    if (e == AD_E_OK && n > 0) {
        qsort(g, n, sizeof(*g), cmp_group);
        out->items = ad_calloc(n, sizeof(*out->items));
        for (size_t i = 0, run = 1; i < n; i++, run++) {
            if (i + 1 < n && cmp_group(&g[i], &g[i + 1]) == 0)
                continue;
            if ((int64_t)run >= min)
                out->items[out->n++] = (struct ad_group_count){ad_strdup(g[i] != NULL ? g[i] : ""), (int64_t)run};
            run = 0;
        }
    }
    for (size_t i = 0; i < n; i++)
        free(g[i]);
    free(g);
    return e;
}

ad_err ad_sq_queue_group_window(struct ad_conn *c, const char *tenant, const char *type, int64_t window_start,
                                int64_t min, struct ad_group_count_list *out)
{
    memset(out, 0, sizeof(*out));
    sqlite3_stmt *st = ad_sq_stmt(c, ST_GROUP_WINDOW);
    if (st == NULL)
        return AD_E_INTERNAL;
    ad_sq_bind_TEXT(st, 1, tenant);
    ad_sq_bind_TEXT(st, 2, type);
    sqlite3_bind_int64(st, 3, window_start);
    sqlite3_bind_int64(st, 4, min);
    return group_counts(c, st, out, "read group rate windows");
}

ad_err ad_sq_queue_group_took(struct ad_conn *c, const char *tenant, const char *type, const char *group,
                              int64_t window_start, int n)
{
    ad_err e = ad_sq_check_tx(c);
    if (e != AD_E_OK)
        return e;
    sqlite3_stmt *st = ad_sq_stmt(c, ST_GROUP_FORGET);
    if (st == NULL)
        return AD_E_INTERNAL;
    ad_sq_bind_TEXT(st, 1, tenant);
    ad_sq_bind_TEXT(st, 2, type);
    sqlite3_bind_int64(st, 3, window_start);
    e = ad_sq_run(c, st, "forget group rate windows");
    if (e != AD_E_OK)
        return e;
    if ((st = ad_sq_stmt(c, ST_GROUP_TOOK)) == NULL)
        return AD_E_INTERNAL;
    ad_sq_bind_TEXT(st, 1, tenant);
    ad_sq_bind_TEXT(st, 2, type);
    sqlite3_bind_int64(st, 3, window_start);
    ad_sq_bind_TEXT(st, 4, group != NULL ? group : "");
    sqlite3_bind_int(st, 5, n);
    return ad_sq_run(c, st, "count a group's leases");
}

/* One group at a time: a read here is a call, not a round trip. */
ad_err ad_sq_queue_group_queued(struct ad_conn *c, const char *tenant, const char *type, int64_t now,
                                const char *const *groups, size_t ngroups, int64_t *out)
{
    *out = 0;
    ad_err e = AD_E_OK;
    for (size_t i = 0; i < ngroups && e == AD_E_OK; i++) {
        sqlite3_stmt *st = ad_sq_stmt(c, ST_GROUP_QUEUED);
        if (st == NULL)
            return AD_E_INTERNAL;
        bind_queue_keys(st, tenant, type);
        sqlite3_bind_int64(st, 3, now);
        ad_sq_bind_TEXT(st, 6, groups[i]);
        int rc = sqlite3_step(st);
        if (rc == SQLITE_ROW)
            *out += sqlite3_column_int64(st, 0);
        else
            e = ad_sq_fail(c, rc, "count queued jobs of a group");
        ad_sq_done(st);
    }
    return e;
}
