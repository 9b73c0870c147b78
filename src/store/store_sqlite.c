/*
 * store_sqlite.c - the embedded store: one SQLite file <dir>/acceptd.db in WAL mode with synchronous=FULL.
 *
 * Each thread has its own connection (struct ad_conn) with its own cache of prepared statements; the writer
 * thread is the only one that writes, so there is never more than one writer and readers never wait for it.
 * The schema is created and upgraded by numbered migrations at open, in one transaction. Every query is
 * served by an index (tests/unit/test_store_sqlite.c checks the plans). This file decides nothing about
 * jobs: it stores what the core hands it and answers queries. It never logs payloads or results.
 *
 * Fairness among groups (docs/protocol.md "Groups and fairness") is in the data, not in this file's memory: the
 * insert gives each job its turn (SQ_TURN_EXPR: one past its group's last queued turn at its priority, not before
 * the queue's next), and the lease walks jobs_queue by priority, turn, cseq, as it walked it by priority and cseq
 * before. A group without queued jobs leaves nothing behind.
 *
 * This file holds the store operations on jobs, idempotency records, attempts and job events, the artifacts
 * (files, store/artifact.c) and the ops table. The rest is one job a file, sharing store_sqlite_int.h:
 * sqlite_conn.c the connections, their statements and transactions, and the space the log takes;
 * sqlite_schema.c the migrations and the statements' text; sqlite_webhook.c the endpoints and the outbox;
 * sqlite_queue.c the queue settings.
 */
#include "store/store_sqlite_int.h"
#include "store/artifact.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>
#include <fcntl.h>
#include <errno.h>

/* ---- rows ---- */

int ad_sq_bind_TEXT(sqlite3_stmt *st, int i, const char *v)
{
    return v != NULL ? sqlite3_bind_text(st, i, v, -1, SQLITE_STATIC) : sqlite3_bind_null(st, i);
}

int ad_sq_bind_INT(sqlite3_stmt *st, int i, int v)
{
    return sqlite3_bind_int(st, i, v);
}

int ad_sq_bind_PROG(sqlite3_stmt *st, int i, int v)
{
    return v >= 0 ? sqlite3_bind_int(st, i, v) : sqlite3_bind_null(st, i);
}

int ad_sq_bind_TIME(sqlite3_stmt *st, int i, int64_t v)
{
    return v != 0 ? sqlite3_bind_int64(st, i, v) : sqlite3_bind_null(st, i);
}

/* Bind the job's columns to parameters 1..COL_seq and seq to parameter COL_seq + 1. The job must outlive the
 * statement's use: text is bound without copying. */
static int bind_job(sqlite3_stmt *st, const struct ad_job *j, int64_t seq)
{
    int rc = SQLITE_OK;
#define SQ_BIND(name, kind, n, fixed)                                                                                  \
    if (rc == SQLITE_OK)                                                                                               \
        rc = ad_sq_bind_##kind(st, COL_##name + 1, j->name);
    AD_JOB_COLUMNS(SQ_BIND)
#undef SQ_BIND
    if (rc == SQLITE_OK)
        rc = sqlite3_bind_int64(st, COL_seq + 1, seq);
    return rc;
}

char *ad_sq_read_TEXT(sqlite3_stmt *st, int i)
{
    const unsigned char *v = sqlite3_column_text(st, i);
    return v != NULL ? ad_strndup((const char *)v, (size_t)sqlite3_column_bytes(st, i)) : NULL;
}

int ad_sq_read_INT(sqlite3_stmt *st, int i)
{
    return sqlite3_column_int(st, i);
}

int ad_sq_read_PROG(sqlite3_stmt *st, int i)
{
    return sqlite3_column_type(st, i) == SQLITE_NULL ? -1 : sqlite3_column_int(st, i);
}

int64_t ad_sq_read_TIME(sqlite3_stmt *st, int i)
{
    return sqlite3_column_int64(st, i);
}

int64_t ad_sq_read_INT64(sqlite3_stmt *st, int i)
{
    return sqlite3_column_int64(st, i);
}

/* A new job from the current row of a SQ_SELECT_JOB statement; the caller frees. */
static struct ad_job *read_job(sqlite3_stmt *st)
{
    struct ad_job *j = ad_job_new();
#define SQ_READ(name, kind, n, fixed) j->name = ad_sq_read_##kind(st, COL_##name);
    AD_JOB_COLUMNS(SQ_READ)
#undef SQ_READ
    j->seq = sqlite3_column_int64(st, COL_seq);
    j->cseq = sqlite3_column_int64(st, COL_cseq);
    j->created_seq = sqlite3_column_int64(st, COL_created_seq);
    j->started_seq = sqlite3_column_int64(st, COL_started_seq);
    const unsigned char *g = sqlite3_column_text(st, COL_grp);
    j->group = g != NULL && *g != '\0' ? ad_strdup((const char *)g) : NULL;
    j->turn = sqlite3_column_int64(st, COL_turn);
    j->traceparent = ad_sq_read_TEXT(st, COL_traceparent);
    j->tracestate = ad_sq_read_TEXT(st, COL_tracestate);
    j->deps = sqlite3_column_int(st, COL_deps);
    j->depends_on = ad_sq_read_TEXT(st, COL_depends_on);
    j->dep_run = sqlite3_column_int(st, COL_dep_run);
    j->batch_id = ad_sq_read_TEXT(st, COL_batch_id);
    j->dependents = sqlite3_column_int(st, COL_dependents);
    j->schedule = ad_sq_read_TEXT(st, COL_schedule);
    return j;
}

/*
 * Step a bound select to the end, appending one element per row to the array *items of *n elements of
 * elem bytes (read fills an element from the current row), then reset the statement. The array grows at
 * powers of two: n is a power of two exactly when it is full. On error the caller frees what was read.
 */
ad_err ad_sq_fetch_rows(struct ad_conn *c, sqlite3_stmt *st, void *items, size_t *n, size_t elem,
                        void (*read)(sqlite3_stmt *st, void *slot), const char *what)
{
    char *arr; /* the caller's array pointer, copied in and out: its type is the caller's own */
    memcpy(&arr, items, sizeof(arr));
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        if ((*n & (*n - 1)) == 0) {
            arr = ad_realloc(arr, (*n == 0 ? 1 : *n * 2) * elem);
            memcpy(items, &arr, sizeof(arr));
        }
        read(st, arr + (*n)++ * elem);
    }
    ad_sq_done(st);
    return rc == SQLITE_DONE ? AD_E_OK : ad_sq_fail(c, rc, what);
}

static void read_job_slot(sqlite3_stmt *st, void *slot)
{
    *(struct ad_job **)slot = read_job(st);
}

/* Append the rows of a bound SQ_SELECT_JOB statement to out. On error out keeps what it held before. */
static ad_err fetch_jobs(struct ad_conn *c, sqlite3_stmt *st, struct ad_job_list *out, const char *what)
{
    size_t before = out->n;
    ad_err e = ad_sq_fetch_rows(c, st, &out->items, &out->n, sizeof(*out->items), read_job_slot, what);
    while (e != AD_E_OK && out->n > before)
        ad_job_free(out->items[--out->n]);
    return e;
}

static size_t row_slot(const char *id)
{
    size_t h = 5381;
    for (const char *p = id; *p != '\0'; p++)
        h = h * 33 + (unsigned char)*p;
    return h & (SQ_ROWS - 1);
}

void ad_sq_rows_drop(struct ad_conn *c)
{
    for (size_t i = 0; c->rows != NULL && i < SQ_ROWS; i++) {
        ad_job_free(c->rows[i]);
        c->rows[i] = NULL;
    }
}

static size_t text_len(const char *s)
{
    return s != NULL ? strlen(s) : 0;
}

static void rows_keep(struct ad_conn *c, const struct ad_job *j)
{
    if (c->rows == NULL)
        c->rows = ad_calloc(SQ_ROWS, sizeof(*c->rows));
    struct ad_job **slot = &c->rows[row_slot(j->id)];
    ad_job_free(*slot);
    size_t texts = text_len(j->payload) + text_len(j->result) + text_len(j->error) + text_len(j->message);
    *slot = texts <= SQ_ROW_TEXT_MAX ? ad_job_dup(j) : NULL;
}

/* A copy of the kept row of job id (of tenant, unless NULL), or NULL. */
static struct ad_job *rows_find(struct ad_conn *c, const char *tenant, const char *id)
{
    const struct ad_job *j = c->in_tx && c->rows != NULL ? c->rows[row_slot(id)] : NULL;
    if (j == NULL || strcmp(j->id, id) != 0 || (tenant != NULL && strcmp(j->tenant, tenant) != 0))
        return NULL;
    return ad_job_dup(j);
}

/* Drop the kept row of job id, if any (a write that does not go through job_write). */
static void rows_forget(struct ad_conn *c, const char *id)
{
    struct ad_job **slot = c->rows != NULL ? &c->rows[row_slot(id)] : NULL;
    if (slot != NULL && *slot != NULL && strcmp((*slot)->id, id) == 0) {
        ad_job_free(*slot);
        *slot = NULL;
    }
}

/* At begin: the kept rows are stale if another connection has committed since this one last looked. */
ad_err ad_sq_rows_check(struct ad_conn *c)
{
    sqlite3_stmt *st = ad_sq_stmt(c, ST_DATA_VERSION);
    if (st == NULL)
        return AD_E_INTERNAL;
    int rc = sqlite3_step(st);
    int64_t v = rc == SQLITE_ROW ? sqlite3_column_int64(st, 0) : -1;
    ad_sq_done(st);
    if (v != c->data_version)
        ad_sq_rows_drop(c);
    c->data_version = v;
    return rc == SQLITE_ROW ? AD_E_OK : ad_sq_fail(c, rc, "read data_version");
}

/* ---- jobs ---- */

/* Inside a transaction (job_write_tx). */
static ad_err job_write(struct ad_conn *c, struct ad_job *job, enum sq_stmt id, const char *what)
{
    ad_err e = ad_sq_check_tx(c);
    if (e == AD_E_OK)
        e = ad_sq_sync_seq(c);
    sqlite3_stmt *st = e == AD_E_OK ? ad_sq_stmt(c, id) : NULL;
    if (st == NULL)
        return e != AD_E_OK ? e : AD_E_INTERNAL;
    int64_t seq = ++c->seq;
    int64_t started = job->started_seq == AD_SEQ_OF_THIS_WRITE ? seq : job->started_seq;
    int rc = bind_job(st, job, seq);
    if (rc == SQLITE_OK && id == ST_INSERT)
        rc = sqlite3_bind_int64(st, SQ_TKEY_PARAM_N, ad_sq_key(job->tenant, NULL));
    if (rc == SQLITE_OK && id == ST_INSERT)
        rc = sqlite3_bind_int64(st, SQ_TTKEY_PARAM_N, ad_sq_key(job->tenant, job->type));
    if (rc == SQLITE_OK && id == ST_INSERT)
        rc = ad_sq_bind_TEXT(st, SQ_GRP_PARAM_N, job->group != NULL ? job->group : "");
    if (rc == SQLITE_OK)
        rc = sqlite3_bind_int(st, SQ_DEPS_PARAM_N, job->deps);
    if (rc == SQLITE_OK && id == ST_INSERT)
        rc = ad_sq_bind_TEXT(st, SQ_DEPS_PARAM_N + 1, job->depends_on);
    if (rc == SQLITE_OK && id == ST_INSERT)
        rc = sqlite3_bind_int(st, SQ_DEPS_PARAM_N + 2, job->dep_run);
    if (rc == SQLITE_OK && id == ST_INSERT)
        rc = ad_sq_bind_TEXT(st, SQ_DEPS_PARAM_N + 3, job->batch_id);
    if (rc == SQLITE_OK && id == ST_INSERT)
        rc = ad_sq_bind_TEXT(st, SQ_TRACE_PARAM_N, job->traceparent);
    if (rc == SQLITE_OK && id == ST_INSERT)
        rc = ad_sq_bind_TEXT(st, SQ_TRACE_PARAM_N + 1, job->tracestate);
    if (rc == SQLITE_OK && id == ST_INSERT)
        rc = ad_sq_bind_TEXT(st, SQ_SCHEDULE_PARAM_N, job->schedule);
    if (rc == SQLITE_OK && id == ST_UPDATE)
        rc = sqlite3_bind_int64(st, SQ_CSEQ_PARAM_N, job->cseq);
    if (rc == SQLITE_OK && id == ST_UPDATE)
        rc = ad_sq_bind_TIME(st, SQ_STARTED_PARAM_N, started);
    if (rc != SQLITE_OK) {
        e = ad_sq_fail(c, rc, what);
        ad_sq_done(st);
        return e;
    }
    e = ad_sq_run(c, st, what);
    if (e != AD_E_OK)
        return e;
    if (id == ST_UPDATE && sqlite3_changes(c->db) == 0)
        return AD_E_NOT_FOUND;
    job->seq = seq;
    if (id == ST_UPDATE)
        job->started_seq = started;
    if (id == ST_INSERT) {
        job->cseq = sqlite3_last_insert_rowid(c->db);
        job->created_seq = seq;
    } else {
        rows_keep(c, job);
    }
    return AD_E_OK;
}

/* A write outside begin/commit is a transaction of its own, so that seq_hw moves with it. */
static ad_err job_write_tx(struct ad_conn *c, struct ad_job *job, enum sq_stmt id, const char *what)
{
    if (c->in_tx)
        return job_write(c, job, id, what);
    ad_err e = ad_sq_begin(c);
    if (e == AD_E_OK)
        e = job_write(c, job, id, what);
    if (e == AD_E_OK)
        return ad_sq_commit(c);
    ad_sq_rollback(c);
    return e;
}

static ad_err sq_job_insert(struct ad_conn *c, struct ad_job *job)
{
    return job_write_tx(c, job, ST_INSERT, "insert job");
}

static ad_err sq_job_update(struct ad_conn *c, struct ad_job *job)
{
    return job_write_tx(c, job, ST_UPDATE, "update job");
}

static ad_err sq_job_get(struct ad_conn *c, const char *tenant, const char *id, struct ad_job **out)
{
    *out = rows_find(c, tenant, id);
    if (*out != NULL)
        return AD_E_OK;
    sqlite3_stmt *st = ad_sq_stmt(c, ST_GET);
    if (st == NULL)
        return AD_E_INTERNAL;
    ad_sq_bind_TEXT(st, 1, id);
    ad_sq_bind_TEXT(st, 2, tenant);
    struct ad_job_list l = {0};
    ad_err e = fetch_jobs(c, st, &l, "get job");
    return ad_job_list_one(&l, e, out);
}

/* Every list statement numbers its parameters alike, so the unused ones may be bound too. */
static void list_bind(sqlite3_stmt *st, const struct ad_list_query *q, int limit)
{
    ad_sq_bind_TEXT(st, 1, q->tenant);
    sqlite3_bind_int64(st, 2, q->before_cseq > 0 ? q->before_cseq : INT64_MAX);
    sqlite3_bind_int(st, 3, (int)q->status);
    ad_sq_bind_TEXT(st, 4, q->type);
    sqlite3_bind_int64(st, 5, q->updated_after);
    sqlite3_bind_int(st, 6, limit);
    sqlite3_bind_int64(st, 7, ad_sq_key(q->tenant, NULL));
    sqlite3_bind_int64(st, 8, q->type != NULL ? ad_sq_key(q->tenant, q->type) : 0);
}

/* Whether fewer than SQ_LIST_FEW_MAX entries of jobs_updated match a list by updatedAfter (the statement returns
 * the last of that many, if any): a read of the index alone. Then the page is made from them (SQ_LIST_FEW); else
 * the walk by cseq fills it soon when the jobs updated since are mostly recent ones (the usual case: a page of
 * old jobs updated since, below many newer ones that were not, costs the walk over those). */
static ad_err list_few(struct ad_conn *c, const struct ad_list_query *q, int *out)
{
    sqlite3_stmt *st = ad_sq_stmt(c, ST_LIST_FEW_PROBE);
    if (st == NULL)
        return AD_E_INTERNAL;
    list_bind(st, q, SQ_LIST_FEW_MAX - 1);
    int rc = sqlite3_step(st);
    ad_err e = rc == SQLITE_ROW || rc == SQLITE_DONE ? AD_E_OK : ad_sq_fail(c, rc, "count updated jobs");
    *out = rc == SQLITE_DONE;
    ad_sq_done(st);
    return e;
}

static ad_err sq_job_list(struct ad_conn *c, const struct ad_list_query *q, struct ad_job_list *out)
{
    *out = (struct ad_job_list){0};
    if (q->tenant == NULL) {
        ad_error("store: job_list without a tenant");
        return AD_E_INTERNAL;
    }
    int filters = (q->has_status ? SQ_LIST_STATUS : 0) | (q->type != NULL ? SQ_LIST_TYPE : 0);
    enum sq_stmt id = (enum sq_stmt)(ST_LIST + filters);
    if (q->updated_after != 0) {
        int few = 0;
        ad_err e = list_few(c, q, &few);
        if (e != AD_E_OK)
            return e;
        id = (enum sq_stmt)(few ? ST_LIST_FEW + filters : ST_LIST + filters + SQ_LIST_UPDATED);
    }
    sqlite3_stmt *st = ad_sq_stmt(c, id);
    if (st == NULL)
        return AD_E_INTERNAL;
    list_bind(st, q, q->limit);
    return fetch_jobs(c, st, out, "list jobs");
}

static ad_err sq_job_changes(struct ad_conn *c, const char *tenant, int64_t since, int limit, struct ad_job_list *out)
{
    *out = (struct ad_job_list){0};
    if (tenant == NULL) {
        /* Every tenant's changes in seq order: the cluster's pump, and a cluster needs PostgreSQL. No index
         * serves it here (jobs_tenant_seq is per tenant). */
        ad_error("store: the SQLite store has no change feed across tenants");
        return AD_E_INTERNAL;
    }
    sqlite3_stmt *st = ad_sq_stmt(c, ST_CHANGES);
    if (st == NULL)
        return AD_E_INTERNAL;
    ad_sq_bind_TEXT(st, 1, tenant);
    sqlite3_bind_int64(st, 2, since);
    sqlite3_bind_int(st, 3, limit);
    sqlite3_bind_int64(st, 4, ad_sq_key(tenant, NULL));
    return fetch_jobs(c, st, out, "job changes");
}

/*
 * One indexed query per type, then a merge (ad_lease_merge). A single "type IN (...)" query cannot walk one index in
 * lease order across several types: SQLite would either sort every queued job of those types or walk the tenant's
 * whole queue skipping other types. Per type, each query reads at most `limit` rows.
 */
static ad_err sq_job_leasable(struct ad_conn *c, const char *tenant, const char *const *types, size_t ntypes,
                              int64_t now, int limit, struct ad_job_list *out)
{
    *out = (struct ad_job_list){0};
    sqlite3_stmt *st = ad_sq_stmt(c, ST_LEASABLE);
    if (st == NULL)
        return AD_E_INTERNAL;
    for (size_t i = 0; i < ntypes; i++) {
        int seen = 0;
        for (size_t k = 0; k < i && !seen; k++)
            seen = strcmp(types[k], types[i]) == 0;
        if (seen)
            continue;
        ad_sq_bind_TEXT(st, 1, tenant);
        ad_sq_bind_TEXT(st, 2, types[i]);
        sqlite3_bind_int64(st, 3, now);
        sqlite3_bind_int(st, 4, limit);
        sqlite3_bind_int64(st, 5, ad_sq_key(tenant, types[i]));
        ad_err e = fetch_jobs(c, st, out, "leasable jobs");
        if (e != AD_E_OK) {
            ad_job_list_free(out);
            return e;
        }
    }
    ad_lease_merge(out, limit);
    return AD_E_OK;
}

/* The same walk of jobs_queue, stepped here: a row of a skipped group is passed over on its grp column alone, and
 * the walk stops at limit jobs taken or walk rows read. */
static ad_err sq_job_leasable_except(struct ad_conn *c, const char *tenant, const char *type, int64_t now,
                                     const char *const *except, size_t nexcept, int walk, int limit,
                                     struct ad_job_list *out)
{
    *out = (struct ad_job_list){0};
    sqlite3_stmt *st = ad_sq_stmt(c, ST_LEASABLE);
    if (st == NULL)
        return AD_E_INTERNAL;
    ad_sq_bind_TEXT(st, 1, tenant);
    ad_sq_bind_TEXT(st, 2, type);
    sqlite3_bind_int64(st, 3, now);
    sqlite3_bind_int(st, 4, walk);
    sqlite3_bind_int64(st, 5, ad_sq_key(tenant, type));
    out->items = ad_calloc(limit > 0 ? (size_t)limit : 1, sizeof(*out->items));
    int rc = SQLITE_DONE;
    while (out->n < (size_t)(limit > 0 ? limit : 0) && (rc = sqlite3_step(st)) == SQLITE_ROW) {
        const char *g = (const char *)sqlite3_column_text(st, COL_grp);
        size_t k = 0;
        while (k < nexcept && strcmp(except[k], g != NULL ? g : "") != 0)
            k++;
        if (k == nexcept)
            out->items[out->n++] = read_job(st);
    }
    ad_sq_done(st);
    if (rc == SQLITE_ROW || rc == SQLITE_DONE)
        return AD_E_OK;
    ad_job_list_free(out);
    return ad_sq_fail(c, rc, "leasable jobs");
}

/* ---- dependencies ---- */

static ad_err sq_dep_add(struct ad_conn *c, const char *job_id, const char *dep_id)
{
    ad_err e = ad_sq_check_tx(c);
    sqlite3_stmt *st = e == AD_E_OK ? ad_sq_stmt(c, ST_DEP_ADD) : NULL;
    if (st == NULL)
        return e != AD_E_OK ? e : AD_E_INTERNAL;
    ad_sq_bind_TEXT(st, 1, dep_id);
    ad_sq_bind_TEXT(st, 2, job_id);
    e = ad_sq_run(c, st, "add dependency");
    if (e != AD_E_OK || (st = ad_sq_stmt(c, ST_DEP_MARK)) == NULL)
        return e != AD_E_OK ? e : AD_E_INTERNAL;
    ad_sq_bind_TEXT(st, 1, dep_id);
    e = ad_sq_run(c, st, "mark a dependency");
    rows_forget(c, dep_id); /* the kept row has dependents 0 */
    return e;
}

static void read_id_slot(sqlite3_stmt *st, void *slot)
{
    *(char **)slot = ad_sq_read_TEXT(st, 0);
}

static ad_err sq_dep_take(struct ad_conn *c, const char *dep_id, char ***ids, size_t *n)
{
    *ids = NULL;
    *n = 0;
    ad_err e = ad_sq_check_tx(c);
    sqlite3_stmt *st = e == AD_E_OK ? ad_sq_stmt(c, ST_DEP_LIST) : NULL;
    if (st == NULL)
        return e != AD_E_OK ? e : AD_E_INTERNAL;
    ad_sq_bind_TEXT(st, 1, dep_id);
    e = ad_sq_fetch_rows(c, st, ids, n, sizeof(**ids), read_id_slot, "list dependents");
    if (e == AD_E_OK && *n > 0 && (st = ad_sq_stmt(c, ST_DEP_DELETE)) != NULL) {
        ad_sq_bind_TEXT(st, 1, dep_id);
        e = ad_sq_run(c, st, "delete dependency edges");
    }
    if (e != AD_E_OK) {
        for (size_t i = 0; i < *n; i++)
            free((*ids)[i]);
        free(*ids);
        *ids = NULL;
        *n = 0;
    }
    return e;
}

/* ---- batches ---- */

/* The counters in the order of the statements' ?4 .. ?9. */
static const enum ad_status batch_cols[] = {AD_QUEUED, AD_RUNNING, AD_SUCCEEDED, AD_FAILED, AD_CANCELLED, AD_PARTIAL};

static ad_err batch_write(struct ad_conn *c, enum sq_stmt id, const struct ad_batch *b, const char *what)
{
    ad_err e = ad_sq_check_tx(c);
    sqlite3_stmt *st = e == AD_E_OK ? ad_sq_stmt(c, id) : NULL;
    if (st == NULL)
        return e != AD_E_OK ? e : AD_E_INTERNAL;
    ad_sq_bind_TEXT(st, 1, b->id);
    if (id == ST_BATCH_INSERT) {
        ad_sq_bind_TEXT(st, 2, b->tenant);
        sqlite3_bind_int(st, 3, b->total);
        ad_sq_bind_TEXT(st, 10, b->callback_url);
        sqlite3_bind_int64(st, 11, b->created_at);
    }
    for (size_t i = 0; i < sizeof(batch_cols) / sizeof(batch_cols[0]); i++)
        sqlite3_bind_int(st, 4 + (int)i, b->n[batch_cols[i]]);
    ad_sq_bind_TIME(st, 12, b->finished_at);
    if (id == ST_BATCH_UPDATE)
        ad_sq_bind_TIME(st, 13, b->expires_at);
    e = ad_sq_run(c, st, what);
    if (e == AD_E_OK && id == ST_BATCH_UPDATE && sqlite3_changes(c->db) == 0)
        return AD_E_NOT_FOUND;
    return e;
}

static ad_err sq_batch_insert(struct ad_conn *c, const struct ad_batch *b)
{
    return batch_write(c, ST_BATCH_INSERT, b, "insert batch");
}

static ad_err sq_batch_update(struct ad_conn *c, const struct ad_batch *b)
{
    return batch_write(c, ST_BATCH_UPDATE, b, "update batch");
}

static ad_err sq_batch_get(struct ad_conn *c, const char *tenant, const char *id, struct ad_batch **out)
{
    *out = NULL;
    sqlite3_stmt *st = ad_sq_stmt(c, ST_BATCH_GET);
    if (st == NULL)
        return AD_E_INTERNAL;
    ad_sq_bind_TEXT(st, 1, id);
    ad_sq_bind_TEXT(st, 2, tenant);
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        struct ad_batch *b = ad_calloc(1, sizeof(*b));
        b->id = ad_sq_read_TEXT(st, 0);
        b->tenant = ad_sq_read_TEXT(st, 1);
        b->total = sqlite3_column_int(st, 2);
        for (size_t i = 0; i < sizeof(batch_cols) / sizeof(batch_cols[0]); i++)
            b->n[batch_cols[i]] = sqlite3_column_int(st, 3 + (int)i);
        b->callback_url = ad_sq_read_TEXT(st, 9);
        b->created_at = sqlite3_column_int64(st, 10);
        b->finished_at = sqlite3_column_int64(st, 11);
        b->expires_at = sqlite3_column_int64(st, 12);
        *out = b;
    }
    ad_sq_done(st);
    if (rc == SQLITE_ROW)
        return AD_E_OK;
    return rc == SQLITE_DONE ? AD_E_NOT_FOUND : ad_sq_fail(c, rc, "get batch");
}

static ad_err sq_batch_jobs(struct ad_conn *c, const char *tenant, const char *batch_id, int64_t before, int limit,
                            struct ad_job_list *out)
{
    *out = (struct ad_job_list){0};
    sqlite3_stmt *st = ad_sq_stmt(c, ST_BATCH_JOBS);
    if (st == NULL)
        return AD_E_INTERNAL;
    ad_sq_bind_TEXT(st, 1, batch_id);
    ad_sq_bind_TEXT(st, 2, tenant);
    sqlite3_bind_int64(st, 3, before > 0 ? before : INT64_MAX);
    sqlite3_bind_int(st, 4, limit);
    return fetch_jobs(c, st, out, "batch jobs");
}

static ad_err sq_job_running(struct ad_conn *c, struct ad_job_list *out)
{
    *out = (struct ad_job_list){0};
    sqlite3_stmt *st = ad_sq_stmt(c, ST_RUNNING);
    return st != NULL ? fetch_jobs(c, st, out, "running jobs") : AD_E_INTERNAL;
}

static ad_err sq_job_scheduled(struct ad_conn *c, int64_t run_at, int64_t cseq, int limit, struct ad_job_list *out)
{
    *out = (struct ad_job_list){0};
    sqlite3_stmt *st = ad_sq_stmt(c, ST_SCHEDULED);
    if (st == NULL)
        return AD_E_INTERNAL;
    sqlite3_bind_int64(st, 1, run_at);
    sqlite3_bind_int64(st, 2, cseq);
    sqlite3_bind_int(st, 3, limit);
    return fetch_jobs(c, st, out, "scheduled jobs");
}

/* The single integer of a bound statement's one row (NULL reads 0) into *out. */
static ad_err step_int64(struct ad_conn *c, sqlite3_stmt *st, int64_t *out, const char *what)
{
    int rc = sqlite3_step(st);
    *out = rc == SQLITE_ROW ? sqlite3_column_int64(st, 0) : 0;
    ad_sq_done(st);
    return rc == SQLITE_ROW || rc == SQLITE_DONE ? AD_E_OK : ad_sq_fail(c, rc, what);
}

/* Every query walks jobs_tenant_type under the key of tenant and type, which other pairs may share: the span a page
 * examines may hold their entries too, and the page's read compares the names. */
static ad_err sq_job_bulk_page(struct ad_conn *c, const struct ad_bulk_query *q, int64_t after, int64_t *upto,
                               int limit, struct ad_job_list *out, int64_t *next)
{
    *out = (struct ad_job_list){0};
    *next = 0;
    int64_t key = ad_sq_key(q->tenant, q->type);
    sqlite3_stmt *st;
    ad_err e = AD_E_OK;
    if (*upto == 0) {
        if ((st = ad_sq_stmt(c, ST_BULK_END)) == NULL)
            return AD_E_INTERNAL;
        sqlite3_bind_int64(st, 1, key);
        if ((e = step_int64(c, st, upto, "bulk walk end")) != AD_E_OK || *upto == 0)
            return e;
    }
    if ((st = ad_sq_stmt(c, ST_BULK_SPAN)) == NULL)
        return AD_E_INTERNAL;
    sqlite3_bind_int64(st, 1, key);
    sqlite3_bind_int64(st, 2, after);
    sqlite3_bind_int64(st, 3, *upto);
    sqlite3_bind_int(st, 4, limit);
    int64_t hi;
    if ((e = step_int64(c, st, &hi, "bulk walk span")) != AD_E_OK || hi == 0)
        return e;
    if ((st = ad_sq_stmt(c, ST_BULK_PAGE)) == NULL)
        return AD_E_INTERNAL;
    sqlite3_bind_int64(st, 1, key);
    sqlite3_bind_int64(st, 2, after);
    sqlite3_bind_int64(st, 3, hi);
    ad_sq_bind_TEXT(st, 4, q->tenant);
    ad_sq_bind_TEXT(st, 5, q->type);
    sqlite3_bind_int64(st, 6, q->now);
    sqlite3_bind_int64(st, 7, (int64_t)q->statuses);
    sqlite3_bind_int64(st, 8, q->created_before);
    sqlite3_bind_int64(st, 9, q->created_after);
    ad_sq_bind_TEXT(st, 10, q->group);
    e = fetch_jobs(c, st, out, "bulk walk page");
    if (e == AD_E_OK)
        *next = hi;
    return e;
}

static ad_err sq_job_unique(struct ad_conn *c, const char *tenant, const char *type, const char *key,
                            struct ad_job **out)
{
    *out = NULL;
    sqlite3_stmt *st = ad_sq_stmt(c, ST_UNIQUE);
    if (st == NULL)
        return AD_E_INTERNAL;
    ad_sq_bind_TEXT(st, 1, tenant);
    ad_sq_bind_TEXT(st, 2, type);
    ad_sq_bind_TEXT(st, 3, key);
    sqlite3_bind_int64(st, 4, ad_sq_key(tenant, type));
    struct ad_job_list l = {0};
    ad_err e = fetch_jobs(c, st, &l, "job by unique key");
    return ad_job_list_one(&l, e, out);
}

/* The rows this connection remembers keep their payload: a job's is dropped with its slot. */
static ad_err sq_job_set_payload(struct ad_conn *c, const char *id, const char *payload)
{
    ad_err e = ad_sq_check_tx(c);
    sqlite3_stmt *st = e == AD_E_OK ? ad_sq_stmt(c, ST_SET_PAYLOAD) : NULL;
    if (st == NULL)
        return e != AD_E_OK ? e : AD_E_INTERNAL;
    ad_sq_bind_TEXT(st, 1, id);
    ad_sq_bind_TEXT(st, 2, payload);
    rows_forget(c, id);
    e = ad_sq_run(c, st, "set payload");
    if (e == AD_E_OK && sqlite3_changes(c->db) == 0)
        return AD_E_NOT_FOUND;
    return e;
}

/* Run a sweep statement with (cutoff, limit); adds the rows it touched to *n. */
ad_err ad_sq_sweep_step(struct ad_conn *c, enum sq_stmt id, int64_t cutoff, int limit, int *n, const char *what)
{
    sqlite3_stmt *st = ad_sq_stmt(c, id);
    if (st == NULL)
        return AD_E_INTERNAL;
    sqlite3_bind_int64(st, 1, cutoff);
    sqlite3_bind_int(st, 2, limit);
    ad_err e = ad_sq_run(c, st, what);
    if (e == AD_E_OK)
        *n += sqlite3_changes(c->db);
    return e;
}

static ad_err sq_sweep(struct ad_conn *c, int64_t now, int64_t tombstone_ms, int limit, int *done_out)
{
    *done_out = 0;
    ad_err e = ad_sq_check_tx(c);
    if (e == AD_E_OK)
        e = ad_sq_run_id(c, ST_SWEEP_SAVEPOINT, "sweep savepoint");
    if (e != AD_E_OK)
        return e;
    ad_sq_rows_drop(c); /* rows are tombstoned and deleted by query */
    int tombstoned = 0, deleted = 0;
    e = ad_sq_sweep_step(c, ST_TOMBSTONE, now, limit, &tombstoned, "tombstone expired jobs");
    if (e == AD_E_OK)
        e = ad_sq_sweep_step(c, ST_DELETE, now - tombstone_ms, limit, &deleted, "delete tombstones");
    if (e == AD_E_OK)
        e = ad_sq_run_id(c, ST_SWEEP_RELEASE, "sweep release");
    if (e != AD_E_OK) {
        if (ad_sq_check_tx(c) == AD_E_OK && !sqlite3_get_autocommit(c->db) &&
            ad_sq_run_id(c, ST_SWEEP_ROLLBACK_TO, "sweep rollback") == AD_E_OK)
            ad_sq_run_id(c, ST_SWEEP_RELEASE, "sweep release after rollback");
        return e;
    }
    *done_out = tombstoned + deleted;
    return AD_E_OK;
}

static ad_err sq_max_seq(struct ad_conn *c, int64_t *out)
{
    *out = 0;
    sqlite3_stmt *st = ad_sq_stmt(c, ST_MAX_SEQ);
    if (st == NULL)
        return AD_E_INTERNAL;
    int rc = sqlite3_step(st);
    ad_err e = AD_E_OK;
    if (rc == SQLITE_ROW)
        *out = sqlite3_column_int64(st, 0);
    else
        e = ad_sq_fail(c, rc, "max seq");
    ad_sq_done(st);
    return e;
}

/* ---- idempotency ---- */

static ad_err sq_idem_get(struct ad_conn *c, const char *tenant, const char *key, struct ad_idem *out)
{
    memset(out, 0, sizeof(*out));
    sqlite3_stmt *st = ad_sq_stmt(c, ST_IDEM_GET);
    if (st == NULL)
        return AD_E_INTERNAL;
    ad_sq_bind_TEXT(st, 1, tenant);
    ad_sq_bind_TEXT(st, 2, key);
    int rc = sqlite3_step(st);
    ad_err e = AD_E_OK;
    if (rc == SQLITE_ROW) {
        const char *fp = (const char *)sqlite3_column_text(st, 0);
        snprintf(out->fingerprint, sizeof(out->fingerprint), "%s", fp != NULL ? fp : "");
        out->job_id = ad_sq_read_TEXT(st, 1);
        out->created_at = sqlite3_column_int64(st, 2);
    } else if (rc == SQLITE_DONE) {
        e = AD_E_NOT_FOUND;
    } else {
        e = ad_sq_fail(c, rc, "get idempotency record");
    }
    ad_sq_done(st);
    return e;
}

/* Writes the record, replacing one the key already has (an expired record not yet swept). */
static ad_err sq_idem_put(struct ad_conn *c, const char *tenant, const char *key, const char *fingerprint,
                          const char *job_id, int64_t now)
{
    sqlite3_stmt *st;
    ad_err e = ad_sq_write_stmt(c, ST_IDEM_PUT, &st);
    if (e != AD_E_OK)
        return e;
    ad_sq_bind_TEXT(st, 1, tenant);
    ad_sq_bind_TEXT(st, 2, key);
    ad_sq_bind_TEXT(st, 3, fingerprint);
    ad_sq_bind_TEXT(st, 4, job_id);
    sqlite3_bind_int64(st, 5, now);
    return ad_sq_run(c, st, "put idempotency record");
}

static ad_err sq_batch_sweep(struct ad_conn *c, int64_t before, int limit, int *done_out)
{
    *done_out = 0;
    ad_err e = ad_sq_check_tx(c);
    return e == AD_E_OK ? ad_sq_sweep_step(c, ST_BATCH_SWEEP, before, limit, done_out, "sweep batches") : e;
}

static ad_err sq_idem_sweep(struct ad_conn *c, int64_t before, int limit, int *done_out)
{
    *done_out = 0;
    ad_err e = ad_sq_check_tx(c);
    return e == AD_E_OK ? ad_sq_sweep_step(c, ST_IDEM_SWEEP, before, limit, done_out, "sweep idempotency records") : e;
}

/* ---- attempts ---- */

static ad_err sq_attempt_add(struct ad_conn *c, const struct ad_job *j, int64_t ended_at, const char *outcome)
{
    sqlite3_stmt *st;
    ad_err e = ad_sq_write_stmt(c, ST_ATTEMPT_ADD, &st);
    if (e != AD_E_OK)
        return e;
    ad_sq_bind_TEXT(st, 1, j->id);
    sqlite3_bind_int(st, 2, j->attempt);
    ad_sq_bind_TEXT(st, 3, j->worker);
    sqlite3_bind_int64(st, 4, j->started_at);
    sqlite3_bind_int64(st, 5, ended_at);
    ad_sq_bind_TEXT(st, 6, outcome);
    return ad_sq_run(c, st, "add attempt");
}

static void read_attempt(sqlite3_stmt *st, void *slot)
{
    struct ad_attempt *a = slot;
    a->attempt = sqlite3_column_int(st, 0);
    a->worker = ad_sq_read_TEXT(st, 1);
    a->started_at = sqlite3_column_int64(st, 2);
    a->ended_at = ad_sq_read_TIME(st, 3);
    a->outcome = ad_sq_read_TEXT(st, 4);
}

static ad_err sq_attempt_list(struct ad_conn *c, const char *job_id, struct ad_attempt_list *out)
{
    memset(out, 0, sizeof(*out));
    sqlite3_stmt *st = ad_sq_stmt(c, ST_ATTEMPT_LIST);
    if (st == NULL)
        return AD_E_INTERNAL;
    ad_sq_bind_TEXT(st, 1, job_id);
    ad_err e = ad_sq_fetch_rows(c, st, &out->items, &out->n, sizeof(*out->items), read_attempt, "list attempts");
    if (e != AD_E_OK)
        ad_attempt_list_free(out);
    return e;
}

/* ---- counts for the dashboard ---- */

static void read_count(sqlite3_stmt *st, void *slot)
{
    struct ad_job_count *k = slot;
    k->type = ad_sq_read_TEXT(st, 0);
    k->status = sqlite3_column_int(st, 1);
    k->n = sqlite3_column_int64(st, 2);
    k->oldest = sqlite3_column_int64(st, 3);
}

static ad_err sq_job_counts(struct ad_conn *c, const char *tenant, int limit, struct ad_job_count_list *out)
{
    memset(out, 0, sizeof(*out));
    sqlite3_stmt *st = ad_sq_stmt(c, tenant != NULL ? ST_JOB_COUNTS : ST_JOB_COUNTS_ALL);
    if (st == NULL)
        return AD_E_INTERNAL;
    if (tenant != NULL) {
        ad_sq_bind_TEXT(st, 1, tenant);
        sqlite3_bind_int(st, 2, limit);
        sqlite3_bind_int64(st, 3, ad_sq_key(tenant, NULL));
    } else {
        sqlite3_bind_int(st, 1, limit);
    }
    ad_err e = ad_sq_fetch_rows(c, st, &out->items, &out->n, sizeof(*out->items), read_count, "count jobs");
    if (e != AD_E_OK)
        ad_job_count_list_free(out);
    return e;
}

/* ---- job events ---- */

static ad_err sq_event_append(struct ad_conn *c, const char *job_id, int64_t seq, const char *kind, const char *data)
{
    sqlite3_stmt *st;
    ad_err e = ad_sq_write_stmt(c, ST_EVENT_APPEND, &st);
    if (e != AD_E_OK)
        return e;
    ad_sq_bind_TEXT(st, 1, job_id);
    sqlite3_bind_int64(st, 2, seq);
    ad_sq_bind_TEXT(st, 3, kind);
    ad_sq_bind_TEXT(st, 4, data);
    return ad_sq_run(c, st, "append job event");
}

static void read_event(sqlite3_stmt *st, void *slot)
{
    struct ad_event *ev = slot;
    ev->seq = sqlite3_column_int64(st, 0);
    ev->kind = ad_sq_read_TEXT(st, 1);
    ev->data = ad_sq_read_TEXT(st, 2);
}

static ad_err sq_events_after(struct ad_conn *c, const char *job_id, int64_t after, int limit,
                              struct ad_event_list *out)
{
    memset(out, 0, sizeof(*out));
    sqlite3_stmt *st = ad_sq_stmt(c, ST_EVENTS_AFTER);
    if (st == NULL)
        return AD_E_INTERNAL;
    ad_sq_bind_TEXT(st, 1, job_id);
    sqlite3_bind_int64(st, 2, after);
    sqlite3_bind_int(st, 3, limit);
    ad_err e = ad_sq_fetch_rows(c, st, &out->items, &out->n, sizeof(*out->items), read_event, "list job events");
    if (e != AD_E_OK)
        ad_event_list_free(out);
    return e;
}

/* ---- opening ---- */

static void sq_close(struct ad_store *s)
{
    struct sq_store *ss = (struct sq_store *)s;
    if (ss == NULL)
        return;
    if (ss->lock_fd >= 0)
        close(ss->lock_fd);
    free(ss->path);
    free(ss);
}

/* ---- result artifacts: files in the data directory (store/artifact.h) ---- */

static ad_err sq_artifact_write(struct ad_conn *c, const struct ad_artifact_part *p, uint64_t *offset, char **view)
{
    return ad_artifact_write(p, offset, view);
}

static ad_err sq_artifact_progress(struct ad_conn *c, const char *job_id, const char *lease_id, uint64_t *offset,
                                   int *ad_sq_done)
{
    return ad_artifact_progress(job_id, lease_id, offset, ad_sq_done);
}

static ad_err sq_artifact_view(struct ad_conn *c, const char *job_id, const char *lease_id, char **view)
{
    return ad_artifact_view(job_id, lease_id, view);
}

static ad_err sq_artifact_read(struct ad_conn *c, const char *job_id, const char *lease_id, uint64_t off, void *buf,
                               size_t len, size_t *n)
{
    return ad_artifact_read(job_id, lease_id, off, buf, len, n);
}

static int sq_artifact_keep(void *arg, const char *job_id, char *const *leases, size_t n, int *keep)
{
    struct ad_job *j = NULL;
    ad_err err = sq_job_get(arg, NULL, job_id, &j);
    if (err != AD_E_OK && err != AD_E_NOT_FOUND)
        return -1;
    for (size_t i = 0; i < n; i++)
        keep[i] = ad_artifact_kept(j, leases[i]);
    ad_job_free(j);
    return 0;
}

static ad_err sq_artifact_gc(struct ad_conn *c, int *removed)
{
    *removed = ad_artifact_gc(sq_artifact_keep, c);
    return AD_E_OK;
}

static const struct ad_store_ops sq_ops = {
    .name = "sqlite",
    .connect = ad_sq_connect,
    .disconnect = ad_sq_disconnect,
    .begin = ad_sq_begin,
    .commit = ad_sq_commit,
    .rollback = ad_sq_rollback,
    .after_batch = ad_sq_after_batch,
    .reclaim = ad_sq_reclaim,
    .changes = ad_sq_changes,
    .savepoint = ad_sq_savepoint,
    .release = ad_sq_release,
    .rollback_to = ad_sq_rollback_to,
    .job_insert = sq_job_insert,
    .job_update = sq_job_update,
    .job_get = sq_job_get,
    .job_list = sq_job_list,
    .job_changes = sq_job_changes,
    .job_leasable = sq_job_leasable,
    .job_leasable_except = sq_job_leasable_except,
    .job_running = sq_job_running,
    .job_scheduled = sq_job_scheduled,
    .job_bulk_page = sq_job_bulk_page,
    .job_unique = sq_job_unique,
    .job_set_payload = sq_job_set_payload,
    .sweep = sq_sweep,
    .max_seq = sq_max_seq,
    .job_counts = sq_job_counts,
    .artifact_write = sq_artifact_write,
    .artifact_progress = sq_artifact_progress,
    .artifact_view = sq_artifact_view,
    .artifact_read = sq_artifact_read,
    .artifact_gc = sq_artifact_gc,
    .attempt_add = sq_attempt_add,
    .attempt_list = sq_attempt_list,
    .idem_get = sq_idem_get,
    .idem_put = sq_idem_put,
    .idem_sweep = sq_idem_sweep,
    .batch_sweep = sq_batch_sweep,
    .event_append = sq_event_append,
    .events_after = sq_events_after,
    .snapshot_begin = ad_sq_snapshot_begin,
    .snapshot_end = ad_sq_snapshot_end,
    .queue_get = ad_sq_queue_get,
    .queue_put = ad_sq_queue_put,
    .queue_list = ad_sq_queue_list,
    .queue_counts = ad_sq_queue_counts,
    .queue_running = ad_sq_queue_running,
    .queue_group_running = ad_sq_queue_group_running,
    .queue_group_window = ad_sq_queue_group_window,
    .queue_group_took = ad_sq_queue_group_took,
    .webhook_put = ad_sq_webhook_put,
    .webhook_get = ad_sq_webhook_get,
    .webhook_list = ad_sq_webhook_list,
    .webhook_delete = ad_sq_webhook_delete,
    .delivery_insert = ad_sq_delivery_insert,
    .delivery_update = ad_sq_delivery_update,
    .delivery_get = ad_sq_delivery_get,
    .delivery_due = ad_sq_delivery_due,
    .delivery_list = ad_sq_delivery_list,
    .delivery_abandon = ad_sq_delivery_abandon,
    .delivery_sweep = ad_sq_delivery_sweep,
    .delivery_claim = ad_sq_delivery_claim,
    .delivery_release = ad_sq_delivery_release,
    .close = sq_close,
    .queue_group_queued = ad_sq_queue_group_queued,
    .dep_add = sq_dep_add,
    .dep_take = sq_dep_take,
    .batch_insert = sq_batch_insert,
    .batch_update = sq_batch_update,
    .batch_get = sq_batch_get,
    .batch_jobs = sq_batch_jobs,
    .schedule_put = ad_sq_schedule_put,
    .schedule_get = ad_sq_schedule_get,
    .schedule_list = ad_sq_schedule_list,
    .schedule_delete = ad_sq_schedule_delete,
    .schedule_due = ad_sq_schedule_due,
};

struct ad_store *ad_store_sqlite_open(const char *dir, char *err, size_t errlen)
{
    if (!sqlite3_threadsafe()) {
        snprintf(err, errlen, "libsqlite3 was built without thread support");
        return NULL;
    }
    if (ad_mkdir_p(dir) != 0) {
        snprintf(err, errlen, "create data directory %s: %s", dir, strerror(errno));
        return NULL;
    }
    if (ad_artifact_init(dir, err, errlen) != 0)
        return NULL;
    struct sq_store *s = ad_calloc(1, sizeof(*s));
    s->base.ops = &sq_ops;
    s->path = ad_asprintf("%s/acceptd.db", dir);
    /* One daemon per data directory: a second one would run its own writer, timers and sweeper on the
     * same rows. The lock goes away with the process, however it ends. */
    s->lock_fd = ad_lock_dir(dir);
    if (s->lock_fd < 0) {
        snprintf(err, errlen, "data directory %s is in use by another acceptd (%s)", dir, strerror(errno));
        sq_close(&s->base);
        return NULL;
    }
    /* Create the file ourselves so it is private from the start; SQLite gives -wal and -shm the same mode. */
    int fd = open(s->path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) {
        snprintf(err, errlen, "open %s: %s", s->path, strerror(errno));
        sq_close(&s->base);
        return NULL;
    }
    close(fd);
    struct ad_conn *c = ad_sq_connect(&s->base, err, errlen);
    if (c == NULL || ad_sq_migrate(c, err, errlen) != 0) {
        ad_sq_disconnect(c);
        sq_close(&s->base);
        return NULL;
    }
    ad_sq_disconnect(c);
    return &s->base;
}
