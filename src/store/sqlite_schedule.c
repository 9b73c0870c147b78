/*
 * sqlite_schedule.c - the SQLite store's schedule rows (schedule_*): a schedule's definition and job template as
 * text, and its progress (next fire time, last job, recent runs, counters). It stores and finds; what a schedule
 * means, and when it fires, is core/schedules.c's. Written only by the writer, inside its transaction; a fire's
 * write is a compare-and-set on next_at, so a fire time is taken once even if two transactions read the same row.
 * The due rows are found through the partial index on next_at.
 */
#include "store/store_sqlite_int.h"

#include <stdlib.h>
#include <string.h>

static void read_schedule(sqlite3_stmt *st, void *slot)
{
    struct ad_schedule *s = slot;
    s->tenant = ad_sq_read_TEXT(st, 0);
    s->id = ad_sq_read_TEXT(st, 1);
    s->spec = ad_sq_read_TEXT(st, 2);
    s->tmpl = ad_sq_read_TEXT(st, 3);
    s->next_at = ad_sq_read_TIME(st, 4);
    s->last_job = ad_sq_read_TEXT(st, 5);
    s->recent = ad_sq_read_TEXT(st, 6);
    s->fires = ad_sq_read_INT64(st, 7);
    s->skips = ad_sq_read_INT64(st, 8);
    s->catchups = ad_sq_read_INT64(st, 9);
    s->created_at = ad_sq_read_INT64(st, 10);
    s->updated_at = ad_sq_read_INT64(st, 11);
    s->version = ad_sq_read_INT64(st, 12);
}

ad_err ad_sq_schedule_put(struct ad_conn *c, const struct ad_schedule *s, int fresh, int64_t expect_next)
{
    ad_err e = ad_sq_check_tx(c);
    if (e != AD_E_OK)
        return e;
    sqlite3_stmt *st = ad_sq_stmt(c, fresh ? ST_SCHEDULE_INSERT : ST_SCHEDULE_UPDATE);
    if (st == NULL)
        return AD_E_INTERNAL;
    ad_sq_bind_TEXT(st, 1, s->tenant);
    ad_sq_bind_TEXT(st, 2, s->id);
    ad_sq_bind_TEXT(st, 3, s->spec);
    ad_sq_bind_TEXT(st, 4, s->tmpl);
    ad_sq_bind_TIME(st, 5, s->next_at);
    ad_sq_bind_TEXT(st, 6, s->last_job);
    ad_sq_bind_TEXT(st, 7, s->recent);
    sqlite3_bind_int64(st, 8, s->fires);
    sqlite3_bind_int64(st, 9, s->skips);
    sqlite3_bind_int64(st, 10, s->catchups);
    sqlite3_bind_int64(st, 11, s->created_at);
    sqlite3_bind_int64(st, 12, s->updated_at);
    sqlite3_bind_int64(st, 13, s->version);
    if (!fresh)
        ad_sq_bind_TIME(st, 14, expect_next);
    e = ad_sq_run(c, st, fresh ? "insert schedule" : "update schedule");
    if (e == AD_E_OK && !fresh && sqlite3_changes(c->db) == 0)
        e = AD_E_NOT_FOUND;
    return e;
}

ad_err ad_sq_schedule_get(struct ad_conn *c, const char *tenant, const char *id, struct ad_schedule *out)
{
    memset(out, 0, sizeof(*out));
    sqlite3_stmt *st = ad_sq_stmt(c, ST_SCHEDULE_GET);
    if (st == NULL)
        return AD_E_INTERNAL;
    ad_sq_bind_TEXT(st, 1, tenant);
    ad_sq_bind_TEXT(st, 2, id);
    int rc = sqlite3_step(st);
    ad_err e = AD_E_OK;
    if (rc == SQLITE_ROW)
        read_schedule(st, out);
    else if (rc == SQLITE_DONE)
        e = AD_E_NOT_FOUND;
    else
        e = ad_sq_fail(c, rc, "get schedule");
    ad_sq_done(st);
    return e;
}

static ad_err fetch(struct ad_conn *c, sqlite3_stmt *st, struct ad_schedule_list *out, const char *what)
{
    ad_err e = ad_sq_fetch_rows(c, st, &out->items, &out->n, sizeof(*out->items), read_schedule, what);
    if (e != AD_E_OK)
        ad_schedule_list_free(out);
    return e;
}

ad_err ad_sq_schedule_list(struct ad_conn *c, const char *tenant, const char *after, int limit,
                           struct ad_schedule_list *out)
{
    memset(out, 0, sizeof(*out));
    sqlite3_stmt *st = ad_sq_stmt(c, ST_SCHEDULE_LIST);
    if (st == NULL)
        return AD_E_INTERNAL;
    ad_sq_bind_TEXT(st, 1, tenant);
    ad_sq_bind_TEXT(st, 2, after != NULL ? after : "");
    sqlite3_bind_int(st, 3, limit);
    return fetch(c, st, out, "list schedules");
}

ad_err ad_sq_schedule_delete(struct ad_conn *c, const char *tenant, const char *id)
{
    ad_err e = ad_sq_check_tx(c);
    if (e != AD_E_OK)
        return e;
    sqlite3_stmt *st = ad_sq_stmt(c, ST_SCHEDULE_DELETE);
    if (st == NULL)
        return AD_E_INTERNAL;
    ad_sq_bind_TEXT(st, 1, tenant);
    ad_sq_bind_TEXT(st, 2, id);
    e = ad_sq_run(c, st, "delete schedule");
    if (e == AD_E_OK && sqlite3_changes(c->db) == 0)
        e = AD_E_NOT_FOUND;
    return e;
}

ad_err ad_sq_schedule_due(struct ad_conn *c, int64_t before, int limit, struct ad_schedule_list *out)
{
    memset(out, 0, sizeof(*out));
    sqlite3_stmt *st = ad_sq_stmt(c, ST_SCHEDULE_DUE);
    if (st == NULL)
        return AD_E_INTERNAL;
    sqlite3_bind_int64(st, 1, before);
    sqlite3_bind_int(st, 2, limit);
    return fetch(c, st, out, "read due schedules");
}
