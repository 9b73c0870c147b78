/*
 * pg_schedule.c - the PostgreSQL store's schedule rows (schedule_*): a schedule's definition and job template as
 * text, and its progress. It stores and finds; what a schedule means is core/schedules.c's. The writer of every
 * node reads and writes them under the cluster's write lock (store_pg.c), and a fire's update is a
 * compare-and-set on next_at checked at the commit (CHECK_ROW): two nodes that read the same due row never both
 * commit its fire, and the jobs of a fire commit with it or not at all. Every node finds the due rows through the
 * partial index on next_at.
 */
#include "store/store_pg_int.h"

#include <stdlib.h>
#include <string.h>

static void read_schedule(const PGresult *r, int row, void *slot)
{
    struct ad_schedule *s = slot;
    s->tenant = ad_pg_col_TEXT(r, row, 0);
    s->id = ad_pg_col_TEXT(r, row, 1);
    s->spec = ad_pg_col_TEXT(r, row, 2);
    s->tmpl = ad_pg_col_TEXT(r, row, 3);
    s->next_at = ad_pg_col_TIME(r, row, 4);
    s->last_job = ad_pg_col_TEXT(r, row, 5);
    s->recent = ad_pg_col_TEXT(r, row, 6);
    s->fires = ad_pg_col_INT64(r, row, 7);
    s->skips = ad_pg_col_INT64(r, row, 8);
    s->catchups = ad_pg_col_INT64(r, row, 9);
    s->created_at = ad_pg_col_INT64(r, row, 10);
    s->updated_at = ad_pg_col_INT64(r, row, 11);
    s->version = ad_pg_col_INT64(r, row, 12);
}

ad_err ad_pg_schedule_put(struct ad_conn *c, const struct ad_schedule *s, int fresh, int64_t expect_next)
{
    struct pg_params p = {0};
    ad_pg_param_TEXT(&p, s->tenant);
    ad_pg_param_TEXT(&p, s->id);
    ad_pg_param_TEXT(&p, s->spec);
    ad_pg_param_TEXT(&p, s->tmpl);
    ad_pg_param_TIME(&p, s->next_at);
    ad_pg_param_TEXT(&p, s->last_job);
    ad_pg_param_TEXT(&p, s->recent);
    ad_pg_param_INT64(&p, s->fires);
    ad_pg_param_INT64(&p, s->skips);
    ad_pg_param_INT64(&p, s->catchups);
    ad_pg_param_INT64(&p, s->created_at);
    ad_pg_param_INT64(&p, s->updated_at);
    ad_pg_param_INT64(&p, s->version);
    if (fresh)
        return ad_pg_write1(c, ST_SCHEDULE_INSERT, &p, CHECK_NONE, "insert schedule");
    ad_pg_param_TIME(&p, expect_next);
    return ad_pg_write1(c, ST_SCHEDULE_UPDATE, &p, CHECK_ROW, "update schedule");
}

ad_err ad_pg_schedule_get(struct ad_conn *c, const char *tenant, const char *id, struct ad_schedule *out)
{
    memset(out, 0, sizeof(*out));
    struct pg_params p = {0};
    ad_pg_param_TEXT(&p, tenant);
    ad_pg_param_TEXT(&p, id);
    PGresult *r;
    ad_err e = ad_pg_query(c, ST_SCHEDULE_GET, &p, &r, "get schedule");
    if (e == AD_E_OK && PQntuples(r) == 0)
        e = AD_E_NOT_FOUND;
    if (e == AD_E_OK)
        read_schedule(r, 0, out);
    PQclear(r);
    return e;
}

static ad_err fetch(struct ad_conn *c, enum pg_stmt id, const struct pg_params *p, struct ad_schedule_list *out,
                    const char *what)
{
    memset(out, 0, sizeof(*out));
    ad_err e = ad_pg_fetch_rows(c, id, p, &out->items, &out->n, sizeof(*out->items), read_schedule, what);
    if (e != AD_E_OK)
        ad_schedule_list_free(out);
    return e;
}

ad_err ad_pg_schedule_list(struct ad_conn *c, const char *tenant, const char *after, int limit,
                           struct ad_schedule_list *out)
{
    struct pg_params p = {0};
    ad_pg_param_TEXT(&p, tenant);
    ad_pg_param_TEXT(&p, after != NULL ? after : "");
    ad_pg_param_INT(&p, limit);
    return fetch(c, ST_SCHEDULE_LIST, &p, out, "list schedules");
}

ad_err ad_pg_schedule_delete(struct ad_conn *c, const char *tenant, const char *id)
{
    struct pg_params p = {0};
    ad_pg_param_TEXT(&p, tenant);
    ad_pg_param_TEXT(&p, id);
    return ad_pg_write1(c, ST_SCHEDULE_DELETE, &p, CHECK_ROW, "delete schedule");
}

ad_err ad_pg_schedule_due(struct ad_conn *c, int64_t before, int limit, struct ad_schedule_list *out)
{
    struct pg_params p = {0};
    ad_pg_param_INT64(&p, before);
    ad_pg_param_INT(&p, limit);
    return fetch(c, ST_SCHEDULE_DUE, &p, out, "read due schedules");
}
