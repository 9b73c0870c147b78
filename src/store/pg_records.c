/*
 * pg_records.c - what the PostgreSQL store keeps beside a job (store.h): idempotency keys, the attempts, the job
 * events, and the counts by state for the dashboard. Each an operation of the ops table (store_pg.c).
 */
#include "store/store_pg_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- idempotency ---- */

ad_err ad_pg_idem_get(struct ad_conn *c, const char *tenant, const char *key, struct ad_idem *out)
{
    memset(out, 0, sizeof(*out));
    struct pg_params p = {0};
    ad_pg_param_TEXT(&p, tenant);
    ad_pg_param_TEXT(&p, key);
    PGresult *r;
    ad_err e = ad_pg_query(c, ST_IDEM_GET, &p, &r, "get idempotency record");
    if (e == AD_E_OK && PQntuples(r) == 0)
        e = AD_E_NOT_FOUND;
    if (e == AD_E_OK) {
        snprintf(out->fingerprint, sizeof(out->fingerprint), "%s", PQgetvalue(r, 0, 0));
        out->job_id = ad_pg_col_TEXT(r, 0, 1);
        out->created_at = ad_pg_col_INT64(r, 0, 2);
    }
    PQclear(r);
    return e;
}

/* Writes the record, replacing one the key already has (an expired record not yet swept). */
ad_err ad_pg_idem_put(struct ad_conn *c, const char *tenant, const char *key, const char *fingerprint,
                      const char *job_id, int64_t now)
{
    struct pg_params p = {0};
    ad_pg_param_TEXT(&p, tenant);
    ad_pg_param_TEXT(&p, key);
    ad_pg_param_TEXT(&p, fingerprint);
    ad_pg_param_TEXT(&p, job_id);
    ad_pg_param_INT64(&p, now);
    return ad_pg_write1(c, ST_IDEM_PUT, &p, CHECK_NONE, "put idempotency record");
}

ad_err ad_pg_idem_sweep(struct ad_conn *c, int64_t before, int limit, int *done_out)
{
    return ad_pg_sweep_alone(c, ST_IDEM_SWEEP, before, limit, done_out, "sweep idempotency records");
}

ad_err ad_pg_batch_sweep(struct ad_conn *c, int64_t before, int limit, int *done_out)
{
    return ad_pg_sweep_alone(c, ST_BATCH_SWEEP, before, limit, done_out, "sweep batches");
}

/* ---- attempts ---- */

ad_err ad_pg_attempt_add(struct ad_conn *c, const struct ad_job *j, int64_t ended_at, const char *outcome)
{
    struct pg_params p = {0};
    ad_pg_param_TEXT(&p, j->id);
    ad_pg_param_INT(&p, j->attempt);
    ad_pg_param_TEXT(&p, j->worker);
    ad_pg_param_INT64(&p, j->started_at);
    ad_pg_param_INT64(&p, ended_at);
    ad_pg_param_TEXT(&p, outcome);
    return ad_pg_write1(c, ST_ATTEMPT_ADD, &p, CHECK_NONE, "add attempt");
}

static void read_attempt(const PGresult *r, int row, void *slot)
{
    struct ad_attempt *a = slot;
    a->attempt = ad_pg_col_INT(r, row, 0);
    a->worker = ad_pg_col_TEXT(r, row, 1);
    a->started_at = ad_pg_col_INT64(r, row, 2);
    a->ended_at = ad_pg_col_TIME(r, row, 3);
    a->outcome = ad_pg_col_TEXT(r, row, 4);
}

ad_err ad_pg_attempt_list(struct ad_conn *c, const char *job_id, struct ad_attempt_list *out)
{
    memset(out, 0, sizeof(*out));
    struct pg_params p = {0};
    ad_pg_param_TEXT(&p, job_id);
    return ad_pg_fetch_rows(c, ST_ATTEMPT_LIST, &p, &out->items, &out->n, sizeof(*out->items), read_attempt,
                            "list attempts");
}

/* ---- counts for the dashboard ---- */

static void read_count(const PGresult *r, int row, void *slot)
{
    struct ad_job_count *k = slot;
    k->type = ad_pg_col_TEXT(r, row, 0);
    k->status = (int)ad_pg_col_INT64(r, row, 1);
    k->n = ad_pg_col_INT64(r, row, 2);
    k->oldest = ad_pg_col_INT64(r, row, 3);
}

ad_err ad_pg_job_counts(struct ad_conn *c, const char *tenant, int limit, struct ad_job_count_list *out)
{
    memset(out, 0, sizeof(*out));
    struct pg_params p = {0};
    ad_pg_param_TEXT(&p, tenant);
    ad_pg_param_INT(&p, limit);
    return ad_pg_fetch_rows(c, ST_JOB_COUNTS, &p, &out->items, &out->n, sizeof(*out->items), read_count, "count jobs");
}

/* ---- job events ---- */

ad_err ad_pg_event_append(struct ad_conn *c, const char *job_id, int64_t seq, const char *kind, const char *data)
{
    struct pg_params p = {0};
    ad_pg_param_TEXT(&p, job_id);
    ad_pg_param_INT64(&p, seq);
    ad_pg_param_TEXT(&p, kind);
    ad_pg_param_TEXT(&p, data);
    return ad_pg_write1(c, ST_EVENT_APPEND, &p, CHECK_NONE, "append job event");
}

static void read_event(const PGresult *r, int row, void *slot)
{
    struct ad_event *ev = slot;
    ev->seq = ad_pg_col_INT64(r, row, 0);
    ev->kind = ad_pg_col_TEXT(r, row, 1);
    ev->data = ad_pg_col_TEXT(r, row, 2);
}

ad_err ad_pg_events_after(struct ad_conn *c, const char *job_id, int64_t after, int limit, struct ad_event_list *out)
{
    memset(out, 0, sizeof(*out));
    struct pg_params p = {0};
    ad_pg_param_TEXT(&p, job_id);
    ad_pg_param_INT64(&p, after);
    ad_pg_param_INT(&p, limit);
    return ad_pg_fetch_rows(c, ST_EVENTS_AFTER, &p, &out->items, &out->n, sizeof(*out->items), read_event,
                            "list job events");
}
