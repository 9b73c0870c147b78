/*
 * pg_conn.c - a PostgreSQL store connection and its libpq pipeline (store_pg.c): dialling and reconnecting,
 * sending statements (prepared on first use) and collecting their results in order, the text parameters and
 * the row readers, and what a failure means (SQLSTATE to ad_err, logged once without parameter values).
 *
 * Every connection stays in pipeline mode. A statement sent is remembered (struct pg_pending) until its result
 * is collected; a result that breaks the order, or a connection that could not send, marks the connection
 * broken, and it is reset before its next use (revive). It knows nothing of jobs or batches: the transactions
 * and the seq counter are store_pg.c's; it only records the first error of the open transaction (poison).
 */
#include "store/store_pg_int.h"
#include "common/metrics.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- errors ---- */

/*
 * Losing the server, the server shutting down, and a serialization failure or deadlock are transient: 503, try
 * again. So is running out of resources, which has its own code (below). Anything else is a bug in a statement or
 * in this file.
 */
static int sqlstate_lost(const char *state)
{
    return strncmp(state, "08", 2) == 0 || strcmp(state, "57P01") == 0 || strcmp(state, "57P02") == 0 ||
           strcmp(state, "57P03") == 0;
}

static ad_err map_sqlstate(PGconn *pg, const char *state)
{
    if (PQstatus(pg) != CONNECTION_OK)
        return AD_E_UNAVAILABLE;
    if (state == NULL)
        return AD_E_INTERNAL;
    /* Class 53, insufficient resources (53100 disk_full, 53200 out_of_memory, 53400 configuration_limit_exceeded):
     * the server cannot take writes for want of room, as SQLite's SQLITE_FULL, and the writer keeps /readyz at 503
     * until its probe (ops->reclaim) writes again. */
    if (strncmp(state, "53", 2) == 0)
        return AD_E_STORAGE_FULL;
    if (sqlstate_lost(state) || strcmp(state, "40001") == 0 || strcmp(state, "40P01") == 0)
        return AD_E_UNAVAILABLE;
    return AD_E_INTERNAL;
}

/* Log msg (libpq's messages end in a newline) with what failed. */
void ad_pg_log_failure(const char *what, const char *msg, const char *state)
{
    int len = (int)strlen(msg);
    while (len > 0 && (msg[len - 1] == '\n' || msg[len - 1] == ' '))
        len--;
    ad_metrics_store_error();
    if (state != NULL)
        ad_error("store: %s: %.*s (%s)", what, len, msg, state);
    else
        ad_error("store: %s: %.*s", what, len, msg);
}

/* A failed result. Only the primary message is logged: DETAIL and CONTEXT may quote parameter values. */
ad_err ad_pg_fail_result(struct ad_conn *c, const PGresult *r, const char *what)
{
    const char *state = PQresultErrorField(r, PG_DIAG_SQLSTATE);
    const char *msg = PQresultErrorField(r, PG_DIAG_MESSAGE_PRIMARY);
    if (!c->quiet)
        ad_pg_log_failure(what, msg != NULL ? msg : PQerrorMessage(c->pg), state);
    /* The server is closing this connection: the rest of its results would only say so again. */
    if (PQstatus(c->pg) != CONNECTION_OK || (state != NULL && sqlstate_lost(state)))
        c->broken = 1;
    return map_sqlstate(c->pg, state);
}

/* libpq could not send or receive: the connection is gone or unusable. */
ad_err ad_pg_fail_conn(struct ad_conn *c, const char *what)
{
    if (!c->quiet)
        ad_pg_log_failure(what, PQerrorMessage(c->pg), NULL);
    c->broken = 1;
    return AD_E_UNAVAILABLE;
}

/* Server warnings go to the log; notices (such as "no transaction in progress") do not. */
static void on_notice(void *arg, const PGresult *r)
{
    const char *severity = PQresultErrorField(r, PG_DIAG_SEVERITY_NONLOCALIZED);
    const char *msg = PQresultErrorField(r, PG_DIAG_MESSAGE_PRIMARY);
    if (severity != NULL && msg != NULL && strcmp(severity, "WARNING") == 0)
        ad_warn("store: server warning: %s", msg);
}

/* ---- the pipeline ---- */

static void pend_push(struct ad_conn *c, struct pg_pending p)
{
    if (c->head + c->npend == c->pend_cap) {
        if (c->head > 0) {
            memmove(c->pend, c->pend + c->head, c->npend * sizeof(*c->pend));
            c->head = 0;
        } else {
            c->pend_cap = c->pend_cap ? c->pend_cap * 2 : 64;
            c->pend = ad_realloc(c->pend, c->pend_cap * sizeof(*c->pend));
        }
    }
    c->pend[c->head + c->npend++] = p;
}

/* Forget every pending result (the connection they would come from is gone); nothing is prepared any more. */
static void pend_forget(struct ad_conn *c)
{
    c->head = c->npend = 0;
    memset(c->prepared, 0, sizeof(c->prepared));
}

ad_err ad_pg_send_sync(struct ad_conn *c)
{
    if (!PQpipelineSync(c->pg))
        return ad_pg_fail_conn(c, "send sync");
    pend_push(c, (struct pg_pending){.kind = PEND_SYNC, .what = "sync"});
    return AD_E_OK;
}

/* Ask the server for the results so far without ending the pipeline, and send everything queued. */
ad_err ad_pg_send_flush(struct ad_conn *c)
{
    if (!PQsendFlushRequest(c->pg) || PQflush(c->pg) != 0)
        return ad_pg_fail_conn(c, "send flush request");
    return AD_E_OK;
}

/*
 * Collect the oldest pending result; *out (when not NULL) receives a successful query's result, which the
 * caller clears. A failure is logged once (later statements of the pipeline only report that they were
 * skipped) and poisons the open transaction.
 */
ad_err ad_pg_collect(struct ad_conn *c, PGresult **out)
{
    if (out != NULL)
        *out = NULL;
    if (c->broken) {
        /* A connection that failed to send or lost count is never read from again: it may block. */
        pend_forget(c);
        if (c->in_tx && c->poison == AD_E_OK)
            c->poison = AD_E_UNAVAILABLE;
        return AD_E_UNAVAILABLE;
    }
    struct pg_pending p = c->pend[c->head];
    c->head++;
    c->npend--;
    PGresult *r = PQgetResult(c->pg);
    ad_err e = AD_E_OK;
    if (r == NULL) {
        /* Nothing where a result was due: the connection is gone, or this file lost count. */
        e = ad_pg_fail_conn(c, p.what);
        pend_forget(c);
    } else if (p.kind == PEND_SYNC) {
        if (PQresultStatus(r) != PGRES_PIPELINE_SYNC) {
            e = ad_pg_fail_conn(c, PQstatus(c->pg) != CONNECTION_OK ? "connection lost"
                                                                    : "pipeline out of step at a sync");
            pend_forget(c);
        }
        PQclear(r);
        r = NULL;
    } else {
        ExecStatusType status = PQresultStatus(r);
        if (status == PGRES_PIPELINE_ABORTED)
            e = c->poison != AD_E_OK ? c->poison : AD_E_INTERNAL;
        else if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK)
            e = ad_pg_fail_result(c, r, p.what);
        else if (p.check == CHECK_ROW && strcmp(PQcmdTuples(r), "0") == 0) {
            if (!c->auto_tx)
                ad_error("store: %s: the row is gone; the batch is undone", p.what);
            e = AD_E_NOT_FOUND;
        } else if (p.check == CHECK_COMMIT && strcmp(PQcmdStatus(r), "COMMIT") != 0) {
            ad_error("store: %s: the server rolled the transaction back", p.what);
            e = AD_E_INTERNAL;
        } else if (p.check == CHECK_SEQ) {
            if (PQntuples(r) != 1) {
                ad_error("store: %s: the counter row is missing", p.what);
                e = AD_E_INTERNAL;
            } else {
                c->seq_begin = ad_pg_col_INT64(r, 0, 0);
                /* Never below what this connection handed out before: a rolled-back batch leaves a gap. */
                if (c->seq_begin > c->seq)
                    c->seq = c->seq_begin;
                c->seq_known = 1;
            }
        }
        if (p.kind == PEND_PREPARE)
            c->prepared[p.stmt] = e == AD_E_OK ? 2 : 0;
        if (p.check == CHECK_TURN && e == AD_E_OK && PQntuples(r) == 1)
            ad_pg_turn_returned(c, ad_pg_col_INT64(r, 0, 1), ad_pg_col_INT64(r, 0, 0));
        if (p.check == CHECK_PREFETCH && (size_t)p.stmt < c->npre) {
            struct pg_prefetch *pf = &c->pre[p.stmt];
            if (e == AD_E_OK && pf->state == PRE_SENT) {
                pf->res = r;
                pf->state = PRE_READY;
                r = NULL;
            } else if (pf->state == PRE_SENT) {
                pf->state = PRE_STALE;
            }
        }
        /* Each query's results end with a NULL. */
        PGresult *end = PQgetResult(c->pg);
        if (end != NULL) {
            PQclear(end);
            e = ad_pg_fail_conn(c, "pipeline out of step after a result");
            pend_forget(c);
        }
        if (e != AD_E_OK) {
            PQclear(r);
            r = NULL;
        }
    }
    if (e != AD_E_OK && c->in_tx && c->poison == AD_E_OK)
        c->poison = e;
    if (out != NULL)
        *out = r;
    else
        PQclear(r);
    return e;
}

/* Collect pending results until only keep are left (a flush request or sync must follow them). The first
 * error, if any. */
ad_err ad_pg_drain(struct ad_conn *c, size_t keep)
{
    ad_err first = AD_E_OK;
    while (c->npend > keep) {
        ad_err e = ad_pg_collect(c, NULL);
        if (first == AD_E_OK)
            first = e;
    }
    return first;
}

/* Send statement id with its parameters, preparing it first on this connection if it is not yet. */
ad_err ad_pg_send_stmt(struct ad_conn *c, enum pg_stmt id, int nparams, const char *const *values, enum pg_check check,
                       const char *what)
{
    char name[16];
    snprintf(name, sizeof(name), "s%d", (int)id);
    int list = id >= ST_LIST && id <= ST_LIST_LAST;
    int ntypes = list ? 6 : id == ST_UPDATE ? 33 : 0;
    const Oid *types = list ? ad_pg_list_param_types : id == ST_UPDATE ? ad_pg_update_param_types : NULL;
    /* A list by updatedAfter is planned for its own parameters each time: whether jobs_updated (few jobs updated
     * since) or the walk by cseq (many) is cheaper depends on the time, and a prepared statement's generic plan,
     * which PostgreSQL may switch to after five runs, knows neither. */
    if (list && ((int)(id - ST_LIST) & PG_LIST_UPDATED) != 0) {
        if (!PQsendQueryParams(c->pg, ad_pg_stmt_sql[id], nparams, types, values, NULL, NULL, 0))
            return ad_pg_fail_conn(c, what);
        pend_push(c, (struct pg_pending){.kind = PEND_QUERY, .check = check, .what = what});
        return AD_E_OK;
    }
    if (c->prepared[id] == 0) {
        if (!PQsendPrepare(c->pg, name, ad_pg_stmt_sql[id], ntypes, types))
            return ad_pg_fail_conn(c, "send prepare");
        pend_push(c, (struct pg_pending){.kind = PEND_PREPARE, .stmt = id, .what = "prepare"});
        c->prepared[id] = 1;
    }
    if (!PQsendQueryPrepared(c->pg, name, nparams, values, NULL, NULL, 0))
        return ad_pg_fail_conn(c, what);
    pend_push(c, (struct pg_pending){.kind = PEND_QUERY, .check = check, .what = what});
    /* Every statement but a SELECT may write a row (a SELECT here only reads, locks or notifies). */
    if (strncmp(ad_pg_stmt_sql[id], "SELECT", 6) != 0)
        c->writes++;
    return AD_E_OK;
}

/* Every statement's parameters fit (PG_MAX_PARAMS): one more is a bug of this file's callers, stopped here. */
static void param_room(const struct pg_params *p)
{
    if (p->n >= PG_MAX_PARAMS)
        abort();
}

void ad_pg_param_TEXT(struct pg_params *p, const char *v)
{
    param_room(p);
    p->v[p->n++] = v;
}

void ad_pg_param_INT64(struct pg_params *p, int64_t v)
{
    param_room(p);
    snprintf(p->num[p->n], sizeof(p->num[p->n]), "%lld", (long long)v);
    p->v[p->n] = p->num[p->n];
    p->n++;
}

void ad_pg_param_INT(struct pg_params *p, int v)
{
    ad_pg_param_INT64(p, v);
}

void ad_pg_param_PROG(struct pg_params *p, int v)
{
    if (v >= 0)
        ad_pg_param_INT64(p, v);
    else
        ad_pg_param_TEXT(p, NULL);
}

void ad_pg_param_TIME(struct pg_params *p, int64_t v)
{
    if (v != 0)
        ad_pg_param_INT64(p, v);
    else
        ad_pg_param_TEXT(p, NULL);
}

/* The job's columns as parameters $1..$31, seq as $32. Text is not copied: the job must outlive the send. */
void ad_pg_param_job(struct pg_params *p, const struct ad_job *j, int64_t seq)
{
#define PG_PARAM(name, kind, n, fixed) ad_pg_param_##kind(p, j->name);
    AD_JOB_COLUMNS(PG_PARAM)
#undef PG_PARAM
    ad_pg_param_INT64(p, seq);
}

char *ad_pg_col_TEXT(const PGresult *r, int row, int i)
{
    return PQgetisnull(r, row, i) ? NULL : ad_strndup(PQgetvalue(r, row, i), (size_t)PQgetlength(r, row, i));
}

int64_t ad_pg_col_INT64(const PGresult *r, int row, int i)
{
    return PQgetisnull(r, row, i) ? 0 : strtoll(PQgetvalue(r, row, i), NULL, 10);
}

int ad_pg_col_INT(const PGresult *r, int row, int i)
{
    return (int)ad_pg_col_INT64(r, row, i);
}

int ad_pg_col_PROG(const PGresult *r, int row, int i)
{
    return PQgetisnull(r, row, i) ? -1 : ad_pg_col_INT(r, row, i);
}

int64_t ad_pg_col_TIME(const PGresult *r, int row, int i)
{
    return ad_pg_col_INT64(r, row, i);
}

/* A new job from a row of a PG_SELECT_JOB statement; the caller frees. */
struct ad_job *ad_pg_read_job(const PGresult *r, int row)
{
    struct ad_job *j = ad_job_new();
#define PG_READ(name, kind, n, fixed) j->name = ad_pg_col_##kind(r, row, COL_##name);
    AD_JOB_COLUMNS(PG_READ)
#undef PG_READ
    j->seq = ad_pg_col_INT64(r, row, COL_seq);
    j->cseq = ad_pg_col_INT64(r, row, COL_cseq);
    j->created_seq = ad_pg_col_INT64(r, row, COL_created_seq);
    j->started_seq = ad_pg_col_INT64(r, row, COL_started_seq);
    j->group =
        PQgetisnull(r, row, COL_grp) || PQgetlength(r, row, COL_grp) == 0 ? NULL : ad_pg_col_TEXT(r, row, COL_grp);
    j->turn = ad_pg_col_INT64(r, row, COL_turn);
    j->traceparent = ad_pg_col_TEXT(r, row, COL_traceparent);
    j->tracestate = ad_pg_col_TEXT(r, row, COL_tracestate);
    j->deps = ad_pg_col_INT(r, row, COL_deps);
    j->depends_on = ad_pg_col_TEXT(r, row, COL_depends_on);
    j->dep_run = ad_pg_col_INT(r, row, COL_dep_run);
    j->batch_id = ad_pg_col_TEXT(r, row, COL_batch_id);
    j->dependents = ad_pg_col_INT(r, row, COL_dependents);
    j->schedule = ad_pg_col_TEXT(r, row, COL_schedule);
    return j;
}

/* The text[] literal of n strings: each quoted, '"' and '\' escaped. The caller frees. */
char *ad_pg_text_array(const char *const *v, size_t n)
{
    struct ad_buf b;
    ad_buf_init(&b, SIZE_MAX);
    AD_BUF_LIT(&b, "{");
    for (size_t i = 0; i < n; i++) {
        if (i > 0)
            AD_BUF_LIT(&b, ",");
        AD_BUF_LIT(&b, "\"");
        for (const char *s = v[i]; *s != '\0'; s++) {
            if (*s == '"' || *s == '\\')
                AD_BUF_LIT(&b, "\\");
            ad_buf_append(&b, s, 1);
        }
        AD_BUF_LIT(&b, "\"");
    }
    AD_BUF_LIT(&b, "}");
    return b.data;
}

/* ---- connections ---- */

/*
 * A new connection to the store's database. Defaults that the URL may override: give up connecting after
 * 5 s, and notice a silent peer over TCP within about half a minute instead of waiting forever (ignored on
 * unix sockets, where the kernel reports a dead server at once). NULL with err filled on failure.
 */
PGconn *ad_pg_dial(struct pg_store *s, char *err, size_t errlen)
{
    static const char *const keys[] = {"connect_timeout",  "application_name", "keepalives_idle", "keepalives_interval",
                                       "keepalives_count", "tcp_user_timeout", "dbname",          NULL};
    const char *values[] = {"5", "acceptd", "10", "5", "3", "30000", s->url, NULL};
    PGconn *pg = PQconnectdbParams(keys, values, 1);
    if (pg == NULL || PQstatus(pg) != CONNECTION_OK) {
        const char *msg = pg != NULL ? PQerrorMessage(pg) : "out of memory";
        int len = (int)strlen(msg);
        while (len > 0 && msg[len - 1] == '\n')
            len--;
        snprintf(err, errlen, "connect to PostgreSQL: %.*s", len, msg);
        PQfinish(pg);
        return NULL;
    }
    PQsetNoticeReceiver(pg, on_notice, NULL);
    return pg;
}

/* Make sure the connection is up, resetting it once if it was lost. 0, or -1 when it stays down (logged
 * once per outage: every use tries again, and an outage would flood the log). */
int ad_pg_revive(struct ad_conn *c)
{
    if (!c->broken && PQstatus(c->pg) == CONNECTION_OK)
        return 0;
    if (!c->down)
        ad_warn("store: the connection to PostgreSQL was lost; reconnecting");
    pend_forget(c);
    c->broken = 0;
    PQreset(c->pg);
    if (PQstatus(c->pg) != CONNECTION_OK) {
        if (!c->down)
            ad_pg_log_failure("reconnect", PQerrorMessage(c->pg), NULL);
        c->down = 1;
        return -1;
    }
    if (PQpipelineStatus(c->pg) == PQ_PIPELINE_OFF && !PQenterPipelineMode(c->pg)) {
        ad_pg_fail_conn(c, "enter pipeline mode");
        return -1;
    }
    if (c->down)
        ad_info("store: reconnected to PostgreSQL");
    c->down = 0;
    return 0;
}

/*
 * Run one statement and wait for its result (*res, cleared by the caller; NULL on error). Inside a
 * transaction it goes out with a flush request, and the results of the writes sent before it are collected
 * first: an error among them is the answer. Outside one it goes out with a sync, so it commits on its own;
 * a read that finds the connection lost is tried again once on a fresh one.
 */
ad_err ad_pg_query(struct ad_conn *c, enum pg_stmt id, const struct pg_params *p, PGresult **res, const char *what)
{
    *res = NULL;
    if (c->in_tx) {
        if (c->poison != AD_E_OK)
            return c->poison;
        ad_err e = ad_pg_send_stmt(c, id, p->n, p->v, CHECK_NONE, what);
        if (e == AD_E_OK)
            e = ad_pg_send_flush(c);
        if (e == AD_E_OK)
            e = ad_pg_drain(c, 1);
        if (e == AD_E_OK)
            e = ad_pg_collect(c, res);
        if (e != AD_E_OK && c->poison == AD_E_OK)
            c->poison = e;
        return e;
    }
    int retry = strncmp(ad_pg_stmt_sql[id], "SELECT", 6) == 0;
    for (;;) {
        if (ad_pg_revive(c) != 0)
            return AD_E_UNAVAILABLE;
        ad_err e = ad_pg_send_stmt(c, id, p->n, p->v, CHECK_NONE, what);
        if (e == AD_E_OK)
            e = ad_pg_send_sync(c);
        if (e == AD_E_OK && PQflush(c->pg) != 0)
            e = ad_pg_fail_conn(c, what);
        /* Everything sent is collected, through the sync, so the pipeline is empty for the next call:
         * [the prepare,] the statement, the sync. */
        if (e == AD_E_OK)
            e = ad_pg_drain(c, 2);
        if (c->npend == 2) {
            ad_err q = ad_pg_collect(c, res);
            if (e == AD_E_OK)
                e = q;
        }
        ad_err d = ad_pg_drain(c, 0);
        if (e == AD_E_OK)
            e = d;
        if (e != AD_E_OK) {
            PQclear(*res);
            *res = NULL;
        }
        if (e == AD_E_OK || !retry || (!c->broken && PQstatus(c->pg) == CONNECTION_OK))
            return e;
        retry = 0;
    }
}

/*
 * Send a write inside the open transaction without waiting for it; its result is checked later (by check).
 * A poisoned transaction refuses further writes with its error.
 */
ad_err ad_pg_send_write(struct ad_conn *c, enum pg_stmt id, const struct pg_params *p, enum pg_check check,
                        const char *what)
{
    if (c->poison != AD_E_OK)
        return c->poison;
    ad_err e = ad_pg_send_stmt(c, id, p->n, p->v, check, what);
    if (e == AD_E_OK && c->npend >= PG_MAX_PENDING) {
        e = ad_pg_send_flush(c);
        if (e == AD_E_OK)
            e = ad_pg_drain(c, 0);
    }
    if (e != AD_E_OK && c->poison == AD_E_OK)
        c->poison = e;
    return e;
}

/* ---- transactions ---- */

/* End the transaction on the server whatever state it is in, and collect every pending result. */
void ad_pg_rollback_wire(struct ad_conn *c)
{
    if (c->broken || PQstatus(c->pg) != CONNECTION_OK) {
        pend_forget(c);
        return;
    }
    /* The sync ends an aborted pipeline; only then does a ROLLBACK run instead of being skipped. */
    if (ad_pg_send_sync(c) == AD_E_OK && PQflush(c->pg) == 0)
        ad_pg_drain(c, 0);
    else
        pend_forget(c);
    if (c->broken || PQtransactionStatus(c->pg) == PQTRANS_IDLE)
        return;
    if (ad_pg_send_stmt(c, ST_ROLLBACK, 0, NULL, CHECK_NONE, "rollback") == AD_E_OK && ad_pg_send_sync(c) == AD_E_OK &&
        PQflush(c->pg) == 0)
        ad_pg_drain(c, 0);
    else
        pend_forget(c);
}
