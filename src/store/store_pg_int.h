/*
 * store_pg_int.h - what the files of the PostgreSQL store share and nothing else uses: the statements (enum
 * pg_stmt, their text in pg_schema.c), a connection (struct ad_conn) with its pipeline's bookkeeping, and the
 * functions of each file that the others call. store_pg.c describes the design; store.h is the contract.
 * Included by store_pg.c, pg_conn.c, pg_schema.c, pg_webhook.c, pg_artifact.c, pg_feed.c, pg_queue.c, pg_turn.c and
 * their unit test.
 */
#ifndef AD_STORE_PG_INT_H
#define AD_STORE_PG_INT_H

#include "store/store_int.h"

#include <libpq-fe.h>
#include <stddef.h>
#include <stdint.h>

enum pg_col {
#define PG_COL_ENUM(name, kind, n, fixed) COL_##name,
    AD_JOB_COLUMNS(PG_COL_ENUM)
#undef PG_COL_ENUM
        COL_seq,
    COL_cseq,
    COL_created_seq,
    COL_started_seq,
    COL_grp,
    COL_turn,
    COL_traceparent,
    COL_tracestate,
    COL_deps,
    COL_depends_on,
    COL_dep_run,
    COL_batch_id,
    COL_dependents,
    COL_schedule
};

/* The parameter numbers are written out (SQL needs them as text); they must be the column positions. */
#define PG_COL_CHECK(name, kind, n, fixed) _Static_assert(COL_##name + 1 == n, "parameter number of column " #name);
AD_JOB_COLUMNS(PG_COL_CHECK)
#undef PG_COL_CHECK
#define PG_SEQ_PARAM "$32"
_Static_assert(COL_seq + 1 == 32, "seq is the parameter after the columns");

#define PG_COL_NAME(name, kind, n, fixed) #name ", "
#define PG_COL_PARAM(name, kind, n, fixed) "$" #n ", "
/* An update sets only the columns that can change, as SQLite's does: naming tombstoned queued its trigger on every
 * update, and naming payload sent it, and stored it again, every time. The fixed columns' parameters are still
 * bound at their places, unused, so their type is declared (update_param_types). */
#define PG_COL_SET(name, kind, n, fixed) PG_COL_SET_##fixed(name, n)
#define PG_COL_SET_0(name, n) #name " = $" #n ", "
#define PG_COL_SET_1(name, n)
#define PG_SELECT_JOB                                                                                                  \
    "SELECT " AD_JOB_COLUMNS(                                                                                          \
        PG_COL_NAME) "seq, cseq, created_seq, started_seq, grp, turn, traceparent, tracestate, deps"                   \
                     ", depends_on, dep_run, batch_id, dependents, schedule FROM jobs "
/*
 * An insert's turn (job.h), computed by the server under the write lock, so that every node counts the same turns:
 * one past the last turn of its group's due queued jobs at its priority (jobs_group), or for a group with none the
 * turn of the next job to lease at that priority (jobs_queue), read only then: coalesce evaluates no further than
 * its first value, and a group's last due turn is never before the next job's. $33 is the group, "" for none.
 */
#define PG_TURN_EXPR                                                                                                   \
    "coalesce((SELECT turn + 1 FROM jobs WHERE tenant = $2 AND type = $3 AND priority = $6 AND grp = $33"              \
    " AND status = 0 AND (run_at IS NULL OR run_at <= $17) ORDER BY turn DESC LIMIT 1), (SELECT turn FROM jobs"        \
    " WHERE tenant = $2 AND type = $3 AND priority = $6 AND status = 0 AND (run_at IS NULL OR run_at <= $17)"          \
    " ORDER BY turn, cseq LIMIT 1), 0)"
/* The insert's columns and parameters: cseq and created_seq are the seq of the insert; the turn, last, is
 * PG_TURN_EXPR (ST_INSERT) or $41 (ST_INSERT_TURN, pg_turn.c). */
#define PG_INSERT_COLS                                                                                                 \
    AD_JOB_COLUMNS(PG_COL_NAME)                                                                                        \
    "seq, cseq, created_seq, grp, deps, depends_on, dep_run, batch_id, traceparent,"                                   \
    " tracestate, schedule, turn"
#define PG_INSERT_PARAMS                                                                                               \
    AD_JOB_COLUMNS(PG_COL_PARAM)                                                                                       \
    PG_SEQ_PARAM ", " PG_SEQ_PARAM ", " PG_SEQ_PARAM ", $33, $34, $35, $36, $37, $38, $39, $40, "

/* Held (per session) while migrating, so that nodes starting together migrate one at a time: "acceptd". */
#define PG_MIGRATE_LOCK "27412351295714404"
#define PG_WRITE_LOCK "27412351295714405"
/* The queues table's columns (pg_queue.c reads them in this order), and the count of a queue's running jobs
 * ($1 tenant, $2 type). */
#define PG_QUEUE_COLS                                                                                                  \
    "tenant, type, paused, concurrency, group_concurrency, rate_limit, rate_period, group_rate_limit,"                 \
    " group_rate_period, window_start, window_count"
#define PG_QUEUE_RUNNING "SELECT count(*) FROM jobs WHERE tenant = $1 AND status = 1 AND type = $2"
#define PG_CHANNEL "acceptd_changes"
/* NOTIFY payloads must stay under 8000 bytes; each announcement is cut at this size. */
#define PG_NOTIFY_MAX 7000
/* Collect the results of pipelined writes at least this often, so that neither side's buffers fill up. */
#define PG_MAX_PENDING 512
/* Filters of a list query, as bits of the index into the list statements. */
#define PG_LIST_STATUS 1
#define PG_LIST_TYPE 2
#define PG_LIST_UPDATED 4
#define PG_LIST_VARIANTS 8

#define PG_LIST_HEAD PG_SELECT_JOB "WHERE tenant = $1 AND cseq < $2"
#define PG_LIST_F_STATUS " AND status = $3"
#define PG_LIST_F_TYPE " AND type = $4"
#define PG_LIST_F_UPDATED " AND updated_at > $5"
#define PG_LIST_TAIL " ORDER BY cseq DESC LIMIT $6"

enum pg_stmt {
    ST_BEGIN,
    ST_COMMIT,
    ST_ROLLBACK,
    ST_SAVEPOINT,
    ST_RELEASE,
    ST_ROLLBACK_TO,
    ST_WRITE_LOCK,
    ST_COUNTER_LOCK,
    ST_COUNTER_SET,
    ST_NOTIFY,
    ST_SPACE_CLEAR,
    ST_SPACE_PROBE,
    ST_INSERT,
    ST_UPDATE,
    ST_GET,
    ST_LIST,
    ST_LIST_LAST = ST_LIST + PG_LIST_VARIANTS - 1,
    ST_CHANGES,
    ST_CHANGES_ALL,
    ST_LEASABLE,
    ST_RUNNING,
    ST_SCHEDULED,
    ST_BULK_END,
    ST_BULK_SPAN,
    ST_BULK_PAGE,
    ST_UNIQUE,
    ST_SET_PAYLOAD,
    ST_TOMBSTONE,
    ST_DELETE,
    ST_MAX_SEQ,
    ST_IDEM_GET,
    ST_IDEM_PUT,
    ST_IDEM_SWEEP,
    ST_ATTEMPT_ADD,
    ST_ATTEMPT_LIST,
    ST_EVENT_APPEND,
    ST_EVENTS_AFTER,
    ST_JOB_COUNTS,
    ST_WEBHOOK_PUT,
    ST_WEBHOOK_GET,
    ST_WEBHOOK_CALLBACK,
    ST_WEBHOOK_LIST,
    ST_WEBHOOK_DELETE,
    ST_DELIVERY_INSERT,
    ST_DELIVERY_UPDATE,
    ST_DELIVERY_GET,
    ST_DELIVERY_GET_SEQ,
    ST_DELIVERY_DUE,
    ST_DELIVERY_LIST,
    ST_DELIVERY_LIST_STATE,
    ST_DELIVERY_ABANDON,
    ST_DELIVERY_SWEEP,
    ST_DELIVERY_CLAIM,
    ST_DELIVERY_RELEASE,
    ST_QUEUE_GET,
    ST_QUEUE_PUT,
    ST_QUEUE_LIST,
    ST_QUEUE_COUNTS,
    ST_QUEUE_RUNNING,
    ST_GROUP_RUNNING,
    ST_GROUP_WINDOW,
    ST_GROUP_TOOK,
    ST_GROUP_FORGET,
    ST_LEASABLE_EXCEPT,
    ST_SCHEDULE_INSERT,
    ST_SCHEDULE_UPDATE,
    ST_SCHEDULE_GET,
    ST_SCHEDULE_LIST,
    ST_SCHEDULE_DELETE,
    ST_SCHEDULE_DUE,
    ST_INSERT_TURN,
    ST_GROUP_QUEUED,
    ST_DEP_ADD,
    ST_DEP_TAKE,
    ST_DEP_MARK,
    ST_BATCH_INSERT,
    ST_BATCH_UPDATE,
    ST_BATCH_GET,
    ST_BATCH_SWEEP,
    ST_BATCH_JOBS,
    ST__COUNT
};

/* The text of each statement, prepared under the name "s<id>" on first use (pg_conn.c). */
extern const char *const ad_pg_stmt_sql[ST__COUNT];
/* The declared parameter types of the list statements (6) and of ST_UPDATE (33); see pg_schema.c. */
extern const Oid ad_pg_list_param_types[6];
extern const Oid ad_pg_update_param_types[33];

struct pg_store {
    struct ad_store base;
    char *url;
    char node[17]; /* this process's id in announcements: 16 hex characters */
};

/* What a pending result is checked for when it is collected. */
enum pg_check {
    CHECK_NONE,
    CHECK_ROW,      /* the statement must have touched a row */
    CHECK_COMMIT,   /* the server must have committed, not rolled back */
    CHECK_SEQ,      /* the counter read at begin: its row sets the batch's seq */
    CHECK_PREFETCH, /* a job read ahead (pg_job_prefetch): its result goes to prefetch slot stmt */
    CHECK_TURN,     /* an insert's RETURNING turn, cseq: pg_turn.c keeps it */
};

/* A statement (or sync) sent on the pipeline whose result has not been collected yet. */
enum pg_pend_kind { PEND_QUERY, PEND_PREPARE, PEND_SYNC };
struct pg_pending {
    enum pg_pend_kind kind;
    enum pg_check check;
    int stmt;         /* for PEND_PREPARE: which statement it prepares; for CHECK_PREFETCH: the slot */
    const char *what; /* for the log */
};

/*
 * The queued jobs a batch's leases take from (pg_job_leasable): the head of one tenant's queue for one list of
 * types, in lease order (priority, turn, cseq), as the first lease of the batch read it, kept exact by every
 * write of a job in the batch (an insert into it drops it: the server assigns the new job's turn). Leases after the
 * first take from it without a round trip.
 */
struct pg_pool {
    int valid;
    char *tenant, *types; /* types as the text[] literal (text_array), to compare with */
    char **type;
    size_t ntypes;
    int64_t horizon;      /* holds the jobs due by then; a lease at a later time reads again */
    int exhaustive;       /* the read found fewer jobs than it asked for: these are all of them */
    struct ad_job **rows; /* lease order */
    size_t n, cap;
};
/* Jobs read into the pool beyond those the first lease asks for, and how far ahead of its time. */
#define PG_POOL_ROWS 32
#define PG_POOL_HORIZON_MS 1000

/* A queue row the open transaction read or wrote (pg_queue.c): the leases of a batch read their queue's settings
 * once, not once each. Nobody else writes while the transaction holds the write lock. */
#define PG_QUEUES_SEEN 8
struct pg_queue_seen {
    struct ad_queue q; /* tenant and type owned */
    int found;         /* 0: the queue has no row */
};

/* The turn the last insert of a group in the open transaction got (pg_turn.c). */
#define PG_TURNS 8
struct pg_turn {
    char *tenant, *type, *grp;
    enum ad_priority priority;
    int known;    /* 0 while the insert's RETURNING is still to be collected */
    int64_t turn; /* the insert's turn, once known */
    int64_t cseq; /* the insert's cseq */
};

struct ad_conn {
    struct pg_store *s;
    PGconn *pg;
    unsigned char prepared[ST__COUNT]; /* 0 not, 1 sent (result pending), 2 known to exist */
    int broken;                        /* the pipeline lost track of its results: reset before the next use */
    int down;                          /* reconnecting failed; logged once per outage */
    int quiet;                         /* failures are not logged nor counted (the space probe, pg_reclaim) */
    struct pg_pending *pend;           /* results still to collect, oldest at pend[head] */
    size_t head, npend, pend_cap;
    int in_tx;         /* between begin and commit/rollback */
    int auto_tx;       /* the transaction was opened by a write outside begin/commit */
    ad_err poison;     /* the first error of the open transaction; the commit will fail with it */
    int64_t seq;       /* last seq handed out by this connection */
    int64_t seq_begin; /* the counter as begin read it */
    int seq_known;     /* begin's counter read has been collected */
    char **ids;        /* jobs inserted or updated in the transaction, to announce at commit */
    size_t nids, ids_cap, ids_savepoint;
    int64_t writes;          /* statements sent that may write (pg_changes) */
    struct pg_prefetch *pre; /* jobs read ahead in the open transaction (pg_job_prefetch) */
    size_t npre, pre_cap;
    struct pg_pool pool;
    struct ad_hook_cache hooks;
    struct pg_queue_seen queues[PG_QUEUES_SEEN];
    size_t nqueues;
    struct pg_turn turns[PG_TURNS];
    size_t nturns;
};

/*
 * A job read ahead in the open transaction: its row (or no row) as the transaction saw it after every write
 * sent before the read, good until a write of the job (or a sweep) is sent after it.
 */
enum pg_pre_state { PRE_SENT, PRE_READY, PRE_STALE };
struct pg_prefetch {
    char *id;
    PGresult *res; /* PRE_READY: the result */
    enum pg_pre_state state;
};
#define PG_MAX_PREFETCH 1024

/* ---- parameters and rows ---- */

#define PG_MAX_PARAMS 48 /* a job insert with its turn takes 41 (store_pg.c, write_job) */

/* Parameters in text format; numbers are formatted into num. NULL values are SQL NULLs. */
struct pg_params {
    int n;
    const char *v[PG_MAX_PARAMS];
    char num[PG_MAX_PARAMS][24];
};

/* ---- store_pg.c: transactions and rows (the ops table is there too) ---- */

/* A write outside begin/commit is a transaction of its own: auto_begin opens one unless one is open (*own),
 * auto_end commits it (e OK) or rolls it back, and returns e or the commit's error. */
ad_err ad_pg_auto_begin(struct ad_conn *c, int *own);
ad_err ad_pg_auto_end(struct ad_conn *c, int own, ad_err e);
/* One pipelined write, in its own transaction when none is open. */
ad_err ad_pg_write1(struct ad_conn *c, enum pg_stmt id, const struct pg_params *p, enum pg_check check,
                    const char *what);
/* Announce entry (taken) at the commit, beside the jobs the transaction changed: "queue\t<tenant>\t<type>" for a
 * queue whose settings changed (pg_queue.c). */
void ad_pg_announce(struct ad_conn *c, char *entry);
/* Start a write that takes the next seq (*seq), in the open batch or a transaction of its own (*own). */
ad_err ad_pg_begin_seq_write(struct ad_conn *c, int *own, int64_t *seq);
/* Run statement id and read every row into a new array (*items, *n; room for one more), read filling a slot. */
ad_err ad_pg_fetch_rows(struct ad_conn *c, enum pg_stmt id, const struct pg_params *p, void *items, size_t *n,
                        size_t elem, void (*read)(const PGresult *r, int row, void *slot), const char *what);
/* One sweep statement with (before, limit), in the open batch or a transaction of its own; *done_out rows. */
ad_err ad_pg_sweep_alone(struct ad_conn *c, enum pg_stmt id, int64_t before, int limit, int *done_out,
                         const char *what);

/* ---- pg_deps.c: the edges of dependencies (ops->dep_add, dep_take) ---- */
ad_err ad_pg_dep_add(struct ad_conn *c, const char *job_id, const char *dep_id);
ad_err ad_pg_dep_take(struct ad_conn *c, const char *dep_id, char ***ids, size_t *n);
ad_err ad_pg_batch_insert(struct ad_conn *c, const struct ad_batch *b);
ad_err ad_pg_batch_update(struct ad_conn *c, const struct ad_batch *b);
ad_err ad_pg_batch_sweep(struct ad_conn *c, int64_t before, int limit, int *done_out);
ad_err ad_pg_batch_get(struct ad_conn *c, const char *tenant, const char *id, struct ad_batch **out);
ad_err ad_pg_batch_jobs(struct ad_conn *c, const char *tenant, const char *batch_id, int64_t before, int limit,
                        struct ad_job_list *out);
/* store_pg.c: forget the job id read ahead in the open batch (a write of its row that is not job_update's). */
void ad_pg_prefetch_drop(struct ad_conn *c, const char *id);

/* ---- pg_conn.c: the connection and its pipeline ---- */

/* Log a failure (libpq's message, trailing newline cut) and count it as a store error. */
void ad_pg_log_failure(const char *what, const char *msg, const char *state);
/* A failed result: logged (primary message only), the connection marked broken if it is closing, mapped. */
ad_err ad_pg_fail_result(struct ad_conn *c, const PGresult *r, const char *what);
/* libpq could not send or receive: logged, the connection marked broken; AD_E_UNAVAILABLE. */
ad_err ad_pg_fail_conn(struct ad_conn *c, const char *what);
/* Send a sync / a flush request (results so far, without ending the pipeline). */
ad_err ad_pg_send_sync(struct ad_conn *c);
ad_err ad_pg_send_flush(struct ad_conn *c);
/* Collect the oldest pending result (*out a successful query's result, caller clears); a failure poisons. */
ad_err ad_pg_collect(struct ad_conn *c, PGresult **out);
/* Collect pending results until keep are left; the first error. */
ad_err ad_pg_drain(struct ad_conn *c, size_t keep);
/* Send statement id, preparing it first on this connection if it is not yet. */
ad_err ad_pg_send_stmt(struct ad_conn *c, enum pg_stmt id, int nparams, const char *const *values, enum pg_check check,
                       const char *what);
/* Append a parameter (text not copied; NULL, a negative progress or a zero time are SQL NULL). */
void ad_pg_param_TEXT(struct pg_params *p, const char *v);
void ad_pg_param_INT64(struct pg_params *p, int64_t v);
void ad_pg_param_INT(struct pg_params *p, int v);
void ad_pg_param_PROG(struct pg_params *p, int v);
void ad_pg_param_TIME(struct pg_params *p, int64_t v);
/* The job's columns as $1..$31 and seq as $32; the job must outlive the send. */
void ad_pg_param_job(struct pg_params *p, const struct ad_job *j, int64_t seq);
/* Read a column of a row (TEXT: heap copy or NULL; the caller frees). */
char *ad_pg_col_TEXT(const PGresult *r, int row, int i);
int64_t ad_pg_col_INT64(const PGresult *r, int row, int i);
int ad_pg_col_INT(const PGresult *r, int row, int i);
int ad_pg_col_PROG(const PGresult *r, int row, int i);
int64_t ad_pg_col_TIME(const PGresult *r, int row, int i);
/* A new job from a row of a PG_SELECT_JOB statement; the caller frees. */
struct ad_job *ad_pg_read_job(const PGresult *r, int row);
/* The text[] literal of n strings (heap; the caller frees). */
char *ad_pg_text_array(const char *const *v, size_t n);
/* A new plain connection to the store's database; NULL with err filled. */
PGconn *ad_pg_dial(struct pg_store *s, char *err, size_t errlen);
/* Make sure c is up, resetting it once if it was lost: 0, or -1 while it stays down. */
int ad_pg_revive(struct ad_conn *c);
/* Run one statement and wait for its result (*res, caller clears); see pg_conn.c for in and out of a batch. */
ad_err ad_pg_query(struct ad_conn *c, enum pg_stmt id, const struct pg_params *p, PGresult **res, const char *what);
/* Send a write in the open transaction, its result checked later by check; refused once poisoned. */
ad_err ad_pg_send_write(struct ad_conn *c, enum pg_stmt id, const struct pg_params *p, enum pg_check check,
                        const char *what);
/* End the server's transaction whatever its state and collect every pending result. */
void ad_pg_rollback_wire(struct ad_conn *c);

/* ---- pg_schema.c ---- */

/* Apply the migrations the database lacks, under the migration lock: 0, or -1 with err filled. */
int ad_pg_migrate(PGconn *pg, char *err, size_t errlen);

/* ---- pg_webhook.c: ops->snapshot_*, webhook_* and delivery_* (store.h) ---- */

ad_err ad_pg_snapshot_begin(struct ad_conn *c);
void ad_pg_snapshot_end(struct ad_conn *c);
ad_err ad_pg_webhook_put(struct ad_conn *c, const struct ad_webhook *w);
ad_err ad_pg_webhook_get(struct ad_conn *c, const char *tenant, const char *id, struct ad_webhook **out);
ad_err ad_pg_webhook_list(struct ad_conn *c, const char *tenant, int enabled_only, struct ad_webhook_list *out);
ad_err ad_pg_webhook_delete(struct ad_conn *c, const char *tenant, const char *id);
ad_err ad_pg_delivery_insert(struct ad_conn *c, struct ad_delivery *d);
ad_err ad_pg_delivery_update(struct ad_conn *c, const struct ad_delivery *d);
ad_err ad_pg_delivery_get(struct ad_conn *c, const char *tenant, const char *id, int64_t seq, struct ad_delivery **out);
ad_err ad_pg_delivery_due(struct ad_conn *c, const char *const *exclude, size_t nexclude, int limit, struct ad_due *out,
                          size_t *n);
ad_err ad_pg_delivery_list(struct ad_conn *c, const char *webhook_id, int state, int64_t before, int limit,
                           struct ad_delivery_list *out);
ad_err ad_pg_delivery_abandon(struct ad_conn *c, const char *webhook_id, const char *reason);
ad_err ad_pg_delivery_sweep(struct ad_conn *c, int64_t before, int limit, int *done_out);
ad_err ad_pg_delivery_claim(struct ad_conn *c, int64_t seq, int64_t now, int64_t until, const char *owner);
ad_err ad_pg_delivery_release(struct ad_conn *c, const char *owner, int64_t now);

/* ---- pg_feed.c: ops->feed_* (store.h) ---- */

void ad_pg_feed_close(struct ad_feed *f);
struct ad_feed *ad_pg_feed_open(struct ad_store *s, char *err, size_t errlen);
int ad_pg_feed_wait(struct ad_feed *f, int timeout_ms, int wake_fd,
                    void (*fn)(void *arg, const struct ad_feed_change *ch), void *arg);

/* ---- pg_artifact.c: ops->artifact_* (store.h) ---- */

ad_err ad_pg_artifact_write(struct ad_conn *c, const struct ad_artifact_part *p, uint64_t *offset, char **view);
ad_err ad_pg_artifact_progress(struct ad_conn *c, const char *job_id, const char *lease_id, uint64_t *offset,
                               int *done);
ad_err ad_pg_artifact_view(struct ad_conn *c, const char *job_id, const char *lease_id, char **view);
ad_err ad_pg_artifact_read(struct ad_conn *c, const char *job_id, const char *lease_id, uint64_t off, void *buf,
                           size_t len, size_t *n);
ad_err ad_pg_artifact_gc(struct ad_conn *c, int *removed);

/* ---- pg_queue.c: ops->queue_* (store.h) ---- */

ad_err ad_pg_queue_get(struct ad_conn *c, const char *tenant, const char *type, struct ad_queue *out);
ad_err ad_pg_queue_put(struct ad_conn *c, const struct ad_queue *q);
ad_err ad_pg_queue_list(struct ad_conn *c, const char *tenant, struct ad_queue_list *out);
ad_err ad_pg_queue_counts(struct ad_conn *c, const char *tenant, const char *type, int64_t now,
                          struct ad_queue_counts *out);
ad_err ad_pg_queue_running(struct ad_conn *c, const char *tenant, const char *type, int64_t *out);
ad_err ad_pg_queue_group_running(struct ad_conn *c, const char *tenant, const char *type, int64_t min,
                                 struct ad_group_count_list *out);
ad_err ad_pg_queue_group_window(struct ad_conn *c, const char *tenant, const char *type, int64_t window_start,
                                int64_t min, struct ad_group_count_list *out);
ad_err ad_pg_queue_group_took(struct ad_conn *c, const char *tenant, const char *type, const char *group,
                              int64_t window_start, int n);
ad_err ad_pg_queue_group_queued(struct ad_conn *c, const char *tenant, const char *type, int64_t now,
                                const char *const *groups, size_t ngroups, int64_t *out);
/* Forget the queue rows the transaction saw (its end, an operation rolled back). */
void ad_pg_queues_forget(struct ad_conn *c);

/* ---- pg_turn.c: the turns of a transaction's inserts ---- */

/* 1 with *turn set when job, inserted as cseq, takes one past the last insert of its group (ST_INSERT_TURN); 0 when
 * the server must compute it (ST_INSERT). */
int ad_pg_turn_next(struct ad_conn *c, const struct ad_job *job, int64_t cseq, int64_t *turn);
/* job was just sent with ST_INSERT as cseq: its RETURNING gives its group's turn. */
void ad_pg_turn_sent(struct ad_conn *c, const struct ad_job *job, int64_t cseq);
/* An insert's RETURNING, collected. */
void ad_pg_turn_returned(struct ad_conn *c, int64_t cseq, int64_t turn);
/* Forget the turns of tenant's type (tenant NULL: every turn). */
void ad_pg_turns_forget(struct ad_conn *c, const char *tenant, const char *type);

/* ---- pg_schedule.c: ops->schedule_* (store.h) ---- */

ad_err ad_pg_schedule_put(struct ad_conn *c, const struct ad_schedule *s, int fresh, int64_t expect_next);
ad_err ad_pg_schedule_get(struct ad_conn *c, const char *tenant, const char *id, struct ad_schedule *out);
ad_err ad_pg_schedule_list(struct ad_conn *c, const char *tenant, const char *after, int limit,
                           struct ad_schedule_list *out);
ad_err ad_pg_schedule_delete(struct ad_conn *c, const char *tenant, const char *id);
ad_err ad_pg_schedule_due(struct ad_conn *c, int64_t before, int limit, struct ad_schedule_list *out);

/* ---- pg_records.c: idempotency keys, attempts, job events, counts (store.h) ---- */

ad_err ad_pg_idem_get(struct ad_conn *c, const char *tenant, const char *key, struct ad_idem *out);
ad_err ad_pg_idem_put(struct ad_conn *c, const char *tenant, const char *key, const char *fingerprint,
                      const char *job_id, int64_t now);
ad_err ad_pg_idem_sweep(struct ad_conn *c, int64_t before, int limit, int *done_out);
ad_err ad_pg_attempt_add(struct ad_conn *c, const struct ad_job *j, int64_t ended_at, const char *outcome);
ad_err ad_pg_attempt_list(struct ad_conn *c, const char *job_id, struct ad_attempt_list *out);
ad_err ad_pg_job_counts(struct ad_conn *c, const char *tenant, int limit, struct ad_job_count_list *out);
ad_err ad_pg_event_append(struct ad_conn *c, const char *job_id, int64_t seq, const char *kind, const char *data);
ad_err ad_pg_events_after(struct ad_conn *c, const char *job_id, int64_t after, int limit, struct ad_event_list *out);

#endif
