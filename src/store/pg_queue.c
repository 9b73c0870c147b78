/*
 * pg_queue.c - the PostgreSQL store's queue rows (queue_*): the settings of each tenant's type and its rate
 * window, and the counts of a queue's jobs. It stores and counts; what the settings mean is decided in
 * core/queues.c. The writer reads and writes them under the cluster's write lock (store_pg.c), so the running
 * count and the rate window a lease reads are the whole cluster's. A settings write is announced on the feed,
 * so that the other nodes' parked lease requests look again (an unpause, a higher limit). The rows a transaction
 * read or wrote are remembered until it ends (struct pg_queue_seen): the many leases of one batch cost one read.
 * The per-group limits read the running jobs by group and keep each group's rate window in queue_groups, a row per
 * group leased in the current window, written under the same lock.
 */
#include "store/store_pg_int.h"

#include <stdlib.h>
#include <string.h>

static void param_int_opt(struct pg_params *p, int v)
{
    if (v > 0)
        ad_pg_param_INT(p, v);
    else
        ad_pg_param_TEXT(p, NULL);
}

static void param_rate(struct pg_params *p, const struct ad_queue_rate *r)
{
    param_int_opt(p, r->limit);
    if (r->limit > 0)
        ad_pg_param_INT64(p, r->period_ms);
    else
        ad_pg_param_TEXT(p, NULL);
}

static void read_queue(const PGresult *r, int row, void *slot)
{
    struct ad_queue *q = slot;
    q->tenant = ad_pg_col_TEXT(r, row, 0);
    q->type = ad_pg_col_TEXT(r, row, 1);
    q->paused = PQgetvalue(r, row, 2)[0] == 't';
    q->concurrency = ad_pg_col_INT(r, row, 3);
    q->group_concurrency = ad_pg_col_INT(r, row, 4);
    q->rate = (struct ad_queue_rate){ad_pg_col_INT(r, row, 5), ad_pg_col_TIME(r, row, 6)};
    q->group_rate = (struct ad_queue_rate){ad_pg_col_INT(r, row, 7), ad_pg_col_TIME(r, row, 8)};
    q->window_start = ad_pg_col_INT64(r, row, 9);
    q->window_count = ad_pg_col_INT(r, row, 10);
}

void ad_pg_queues_forget(struct ad_conn *c)
{
    for (size_t i = 0; i < c->nqueues; i++)
        ad_queue_clear(&c->queues[i].q);
    c->nqueues = 0;
}

static void copy_queue(struct ad_queue *to, const struct ad_queue *from)
{
    *to = *from;
    to->tenant = ad_strdup(from->tenant);
    to->type = ad_strdup(from->type);
}

static struct pg_queue_seen *seen_find(struct ad_conn *c, const char *tenant, const char *type)
{
    for (size_t i = 0; i < c->nqueues; i++)
        if (strcmp(c->queues[i].q.tenant, tenant) == 0 && strcmp(c->queues[i].q.type, type) == 0)
            return &c->queues[i];
    return NULL;
}

/* Remember q (found or not) for the rest of the open transaction, while there is room. */
static void seen_put(struct ad_conn *c, const struct ad_queue *q, int found)
{
    if (!c->in_tx)
        return;
    struct pg_queue_seen *s = seen_find(c, q->tenant, q->type);
    if (s == NULL && c->nqueues == PG_QUEUES_SEEN)
        return;
    if (s == NULL)
        s = &c->queues[c->nqueues++];
    else
        ad_queue_clear(&s->q);
    copy_queue(&s->q, q);
    s->found = found;
}

ad_err ad_pg_queue_get(struct ad_conn *c, const char *tenant, const char *type, struct ad_queue *out)
{
    memset(out, 0, sizeof(*out));
    const struct pg_queue_seen *s = c->in_tx ? seen_find(c, tenant, type) : NULL;
    if (s != NULL) {
        if (!s->found)
            return AD_E_NOT_FOUND;
        copy_queue(out, &s->q);
        return AD_E_OK;
    }
    struct pg_params p = {0};
    ad_pg_param_TEXT(&p, tenant);
    ad_pg_param_TEXT(&p, type);
    PGresult *r;
    ad_err e = ad_pg_query(c, ST_QUEUE_GET, &p, &r, "get queue");
    if (e == AD_E_OK && PQntuples(r) == 0)
        e = AD_E_NOT_FOUND;
    if (e == AD_E_OK)
        read_queue(r, 0, out);
    PQclear(r);
    if (e == AD_E_OK || e == AD_E_NOT_FOUND) {
        struct ad_queue key = {.tenant = (char *)tenant, .type = (char *)type};
        seen_put(c, e == AD_E_OK ? out : &key, e == AD_E_OK);
    }
    return e;
}

ad_err ad_pg_queue_put(struct ad_conn *c, const struct ad_queue *q)
{
    struct pg_params p = {0};
    ad_pg_param_TEXT(&p, q->tenant);
    ad_pg_param_TEXT(&p, q->type);
    ad_pg_param_TEXT(&p, q->paused ? "true" : "false");
    param_int_opt(&p, q->concurrency);
    param_int_opt(&p, q->group_concurrency);
    param_rate(&p, &q->rate);
    param_rate(&p, &q->group_rate);
    ad_pg_param_INT64(&p, q->window_start);
    ad_pg_param_INT(&p, q->window_count);
    ad_err e = ad_pg_write1(c, ST_QUEUE_PUT, &p, CHECK_NONE, "put queue");
    if (e == AD_E_OK && c->in_tx) {
        ad_pg_announce(c, ad_asprintf("queue\t%s\t%s", q->tenant, q->type));
        seen_put(c, q, 1);
    }
    return e;
}

ad_err ad_pg_queue_list(struct ad_conn *c, const char *tenant, struct ad_queue_list *out)
{
    memset(out, 0, sizeof(*out));
    struct pg_params p = {0};
    ad_pg_param_TEXT(&p, tenant);
    ad_err e =
        ad_pg_fetch_rows(c, ST_QUEUE_LIST, &p, &out->items, &out->n, sizeof(*out->items), read_queue, "list queues");
    if (e != AD_E_OK)
        ad_queue_list_free(out);
    return e;
}

ad_err ad_pg_queue_counts(struct ad_conn *c, const char *tenant, const char *type, int64_t now,
                          struct ad_queue_counts *out)
{
    memset(out, 0, sizeof(*out));
    struct pg_params p = {0};
    ad_pg_param_TEXT(&p, tenant);
    ad_pg_param_TEXT(&p, type);
    ad_pg_param_INT64(&p, now);
    PGresult *r;
    ad_err e = ad_pg_query(c, ST_QUEUE_COUNTS, &p, &r, "count queue");
    if (e == AD_E_OK && PQntuples(r) == 1) {
        out->queued = ad_pg_col_INT64(r, 0, 0);
        out->running = ad_pg_col_INT64(r, 0, 1);
        out->scheduled = ad_pg_col_INT64(r, 0, 2);
    }
    PQclear(r);
    return e;
}

ad_err ad_pg_queue_running(struct ad_conn *c, const char *tenant, const char *type, int64_t *out)
{
    *out = 0;
    struct pg_params p = {0};
    ad_pg_param_TEXT(&p, tenant);
    ad_pg_param_TEXT(&p, type);
    PGresult *r;
    ad_err e = ad_pg_query(c, ST_QUEUE_RUNNING, &p, &r, "count running jobs of a queue");
    if (e == AD_E_OK && PQntuples(r) == 1)
        *out = ad_pg_col_INT64(r, 0, 0);
    PQclear(r);
    return e;
}

static void read_group_count(const PGresult *r, int row, void *slot)
{
    struct ad_group_count *g = slot;
    g->group = ad_pg_col_TEXT(r, row, 0);
    if (g->group == NULL)
        g->group = ad_strdup("");
    g->n = ad_pg_col_INT64(r, row, 1);
}

static ad_err group_counts(struct ad_conn *c, enum pg_stmt id, const struct pg_params *p,
                           struct ad_group_count_list *out, const char *what)
{
    memset(out, 0, sizeof(*out));
    ad_err e = ad_pg_fetch_rows(c, id, p, &out->items, &out->n, sizeof(*out->items), read_group_count, what);
    if (e != AD_E_OK)
        ad_group_count_list_free(out);
    return e;
}

ad_err ad_pg_queue_group_running(struct ad_conn *c, const char *tenant, const char *type, int64_t min,
                                 struct ad_group_count_list *out)
{
    struct pg_params p = {0};
    ad_pg_param_TEXT(&p, tenant);
    ad_pg_param_TEXT(&p, type);
    ad_pg_param_INT64(&p, min);
    return group_counts(c, ST_GROUP_RUNNING, &p, out, "count running jobs by group");
}

ad_err ad_pg_queue_group_window(struct ad_conn *c, const char *tenant, const char *type, int64_t window_start,
                                int64_t min, struct ad_group_count_list *out)
{
    struct pg_params p = {0};
    ad_pg_param_TEXT(&p, tenant);
    ad_pg_param_TEXT(&p, type);
    ad_pg_param_INT64(&p, window_start);
    ad_pg_param_INT64(&p, min);
    return group_counts(c, ST_GROUP_WINDOW, &p, out, "read group rate windows");
}

ad_err ad_pg_queue_group_took(struct ad_conn *c, const char *tenant, const char *type, const char *group,
                              int64_t window_start, int n)
{
    struct pg_params p = {0};
    ad_pg_param_TEXT(&p, tenant);
    ad_pg_param_TEXT(&p, type);
    ad_pg_param_INT64(&p, window_start);
    ad_err e = ad_pg_write1(c, ST_GROUP_FORGET, &p, CHECK_NONE, "forget group rate windows");
    if (e != AD_E_OK)
        return e;
    ad_pg_param_TEXT(&p, group != NULL ? group : "");
    ad_pg_param_INT(&p, n);
    return ad_pg_write1(c, ST_GROUP_TOOK, &p, CHECK_NONE, "count a group's leases");
}

ad_err ad_pg_queue_group_queued(struct ad_conn *c, const char *tenant, const char *type, int64_t now,
                                const char *const *groups, size_t ngroups, int64_t *out)
{
    *out = 0;
    char *arr = ad_pg_text_array(groups, ngroups);
    struct pg_params p = {0};
    ad_pg_param_TEXT(&p, tenant);
    ad_pg_param_TEXT(&p, type);
    ad_pg_param_INT64(&p, now);
    ad_pg_param_TEXT(&p, arr);
    PGresult *r;
    ad_err e = ad_pg_query(c, ST_GROUP_QUEUED, &p, &r, "count queued jobs of groups");
    if (e == AD_E_OK && PQntuples(r) == 1)
        *out = ad_pg_col_INT64(r, 0, 0);
    PQclear(r);
    free(arr);
    return e;
}
