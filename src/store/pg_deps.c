/*
 * pg_deps.c - the PostgreSQL store's edges of dependencies (store.h dep_add, dep_take; core/deps.c decides what
 * they mean) and its batch rows (batch_insert, batch_update, batch_get, batch_jobs; core/batches.c keeps their
 * counts). An edge is
 * a row (dep_id, job_id) keyed by dependency, so that the end of a job finds the jobs waiting for it in one index
 * range; taking them deletes them, returning the ids, in one statement. Both run in the writer's transaction, under the
 * cluster's write lock, so no two nodes take the same edges.
 */
#include "store/store_pg_int.h"

#include <stdlib.h>

ad_err ad_pg_dep_add(struct ad_conn *c, const char *job_id, const char *dep_id)
{
    struct pg_params p = {0};
    ad_pg_param_TEXT(&p, dep_id);
    ad_pg_param_TEXT(&p, job_id);
    ad_err e = ad_pg_write1(c, ST_DEP_ADD, &p, CHECK_NONE, "add dependency");
    struct pg_params m = {0};
    ad_pg_param_TEXT(&m, dep_id);
    if (e == AD_E_OK)
        e = ad_pg_write1(c, ST_DEP_MARK, &m, CHECK_NONE, "mark a dependency");
    ad_pg_prefetch_drop(c, dep_id); /* read ahead before the mark */
    return e;
}

ad_err ad_pg_dep_take(struct ad_conn *c, const char *dep_id, char ***ids, size_t *n)
{
    *ids = NULL;
    *n = 0;
    struct pg_params p = {0};
    ad_pg_param_TEXT(&p, dep_id);
    PGresult *r = NULL;
    ad_err e = ad_pg_query(c, ST_DEP_TAKE, &p, &r, "take dependents");
    if (e != AD_E_OK)
        return e;
    int rows = PQntuples(r);
    *ids = ad_calloc((size_t)rows + 1, sizeof(**ids));
    for (int i = 0; i < rows; i++)
        (*ids)[i] = ad_pg_col_TEXT(r, i, 0);
    *n = (size_t)rows;
    PQclear(r);
    return AD_E_OK;
}

/* The counters in the order of the batch statements' columns. */
static const enum ad_status batch_cols[] = {AD_QUEUED, AD_RUNNING, AD_SUCCEEDED, AD_FAILED, AD_CANCELLED, AD_PARTIAL};
#define NCOLS (sizeof(batch_cols) / sizeof(batch_cols[0]))

ad_err ad_pg_batch_insert(struct ad_conn *c, const struct ad_batch *b)
{
    struct pg_params p = {0};
    ad_pg_param_TEXT(&p, b->id);
    ad_pg_param_TEXT(&p, b->tenant);
    ad_pg_param_INT(&p, b->total);
    for (size_t i = 0; i < NCOLS; i++)
        ad_pg_param_INT(&p, b->n[batch_cols[i]]);
    ad_pg_param_TEXT(&p, b->callback_url);
    ad_pg_param_INT64(&p, b->created_at);
    ad_pg_param_TIME(&p, b->finished_at);
    return ad_pg_write1(c, ST_BATCH_INSERT, &p, CHECK_NONE, "insert batch");
}

ad_err ad_pg_batch_update(struct ad_conn *c, const struct ad_batch *b)
{
    struct pg_params p = {0};
    ad_pg_param_TEXT(&p, b->id);
    for (size_t i = 0; i < NCOLS; i++)
        ad_pg_param_INT(&p, b->n[batch_cols[i]]);
    ad_pg_param_TIME(&p, b->finished_at);
    ad_pg_param_TIME(&p, b->expires_at);
    return ad_pg_write1(c, ST_BATCH_UPDATE, &p, CHECK_NONE, "update batch");
}

ad_err ad_pg_batch_get(struct ad_conn *c, const char *tenant, const char *id, struct ad_batch **out)
{
    *out = NULL;
    struct pg_params p = {0};
    ad_pg_param_TEXT(&p, id);
    ad_pg_param_TEXT(&p, tenant);
    PGresult *r = NULL;
    ad_err e = ad_pg_query(c, ST_BATCH_GET, &p, &r, "get batch");
    if (e != AD_E_OK)
        return e;
    if (PQntuples(r) == 0) {
        PQclear(r);
        return AD_E_NOT_FOUND;
    }
    struct ad_batch *b = ad_calloc(1, sizeof(*b));
    b->id = ad_pg_col_TEXT(r, 0, 0);
    b->tenant = ad_pg_col_TEXT(r, 0, 1);
    b->total = ad_pg_col_INT(r, 0, 2);
    for (size_t i = 0; i < NCOLS; i++)
        b->n[batch_cols[i]] = ad_pg_col_INT(r, 0, 3 + (int)i);
    b->callback_url = ad_pg_col_TEXT(r, 0, 9);
    b->created_at = ad_pg_col_INT64(r, 0, 10);
    b->finished_at = ad_pg_col_TIME(r, 0, 11);
    b->expires_at = ad_pg_col_TIME(r, 0, 12);
    PQclear(r);
    *out = b;
    return AD_E_OK;
}

static void read_job_slot(const PGresult *r, int row, void *slot)
{
    *(struct ad_job **)slot = ad_pg_read_job(r, row);
}

ad_err ad_pg_batch_jobs(struct ad_conn *c, const char *tenant, const char *batch_id, int64_t before, int limit,
                        struct ad_job_list *out)
{
    *out = (struct ad_job_list){0};
    struct pg_params p = {0};
    ad_pg_param_TEXT(&p, batch_id);
    ad_pg_param_TEXT(&p, tenant);
    ad_pg_param_INT64(&p, before > 0 ? before : INT64_MAX);
    ad_pg_param_INT(&p, limit);
    return ad_pg_fetch_rows(c, ST_BATCH_JOBS, &p, &out->items, &out->n, sizeof(*out->items), read_job_slot,
                            "batch jobs");
}
