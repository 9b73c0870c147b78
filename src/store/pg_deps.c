/*
 * pg_deps.c - the PostgreSQL store's edges of dependencies (store.h dep_add, dep_take; core/deps.c decides what
 * they mean). An edge is a row (dep_id, job_id) keyed by dependency, so that the end of a job finds the jobs waiting
 * for it in one index range; taking them deletes them, returning the ids, in one statement. Both run in the writer's
 * transaction, under the cluster's write lock, so no two nodes take the same edges.
 */
#include "store/store_pg_int.h"

#include <stdlib.h>

ad_err ad_pg_dep_add(struct ad_conn *c, const char *job_id, const char *dep_id)
{
    struct pg_params p = {0};
    ad_pg_param_TEXT(&p, dep_id);
    ad_pg_param_TEXT(&p, job_id);
    return ad_pg_write1(c, ST_DEP_ADD, &p, CHECK_NONE, "add dependency");
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
