/*
 * store_sqlite_int.h - what the files of the SQLite store share and nothing else uses: the statements (enum
 * sq_stmt, their text in sqlite_schema.c), a connection (struct ad_conn), and the functions of each file that the
 * others call. store_sqlite.c describes the store; store.h is the contract. Included by store_sqlite.c,
 * sqlite_conn.c, sqlite_schema.c, sqlite_webhook.c, sqlite_queue.c and their unit test.
 */
#ifndef AD_STORE_SQLITE_INT_H
#define AD_STORE_SQLITE_INT_H

#include "store/store_int.h"

#include <sqlite3.h>
#include <stddef.h>
#include <stdint.h>

enum sq_col {
#define SQ_COL_ENUM(name, kind, n, fixed) COL_##name,
    AD_JOB_COLUMNS(SQ_COL_ENUM)
#undef SQ_COL_ENUM
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

#define SQ_COL_NAME(name, kind, n, fixed) #name ", "
#define SQ_COL_PARAM(name, kind, n, fixed) "?, "
/* An update sets only the columns that can change, so SQLite leaves the indexes on fixed columns alone (it
 * rewrites an index entry when the SET list names one of its columns, changed or not), and the trigger on
 * tombstoned does not run (a tenth of an update's cost when it did). The parameters are
 * numbered, so every column is still bound at its place (store_pg.c checks that n is that place). */
#define SQ_COL_SET(name, kind, n, fixed) SQ_COL_SET_##fixed(name, n)
#define SQ_COL_SET_0(name, n) #name " = ?" #n ", "
#define SQ_COL_SET_1(name, n)
#define SQ_SEQ_PARAM "?32"
_Static_assert(COL_seq + 1 == 32, "seq is the parameter after the columns");
#define SQ_CSEQ_PARAM "?33" /* an update's row */
#define SQ_CSEQ_PARAM_N 33
#define SQ_STARTED_PARAM "?34" /* an update's started_seq */
#define SQ_STARTED_PARAM_N 34
#define SQ_TKEY_PARAM "?35" /* an insert's tkey */
#define SQ_TKEY_PARAM_N 35
#define SQ_TTKEY_PARAM "?36" /* an insert's ttkey */
#define SQ_TTKEY_PARAM_N 36
#define SQ_GRP_PARAM "?37" /* an insert's grp: the job's group, "" for none */
#define SQ_GRP_PARAM_N 37
#define SQ_DEPS_PARAM "?38" /* the job's count of unfinished dependencies (an insert's and an update's) */
#define SQ_DEPS_PARAM_N 38
#define SQ_TRACE_PARAM_N 42    /* an insert's traceparent, then its tracestate */
#define SQ_SCHEDULE_PARAM_N 44 /* an insert's schedule run (job.h) */
/*
 * An insert's turn (job.h): one past the last turn of its group's due queued jobs at its priority, or for a group
 * with none the turn of the next job to lease at that priority, read only then (as PG_TURN_EXPR; jobs_group and
 * jobs_queue, one entry each). Rows whose keys collide are passed over by the names.
 */
#define SQ_TURN_EXPR                                                                                                   \
    "coalesce((SELECT turn + 1 FROM jobs WHERE ttkey = ?36 AND priority = ?6 AND grp = ?37 AND status = 0"             \
    " AND tenant = ?2 AND type = ?3 AND (run_at IS NULL OR run_at <= ?17) ORDER BY turn DESC LIMIT 1),"                \
    " (SELECT turn FROM jobs WHERE ttkey = ?36 AND priority = ?6 AND status = 0 AND tenant = ?2 AND type = ?3"         \
    " AND (run_at IS NULL OR run_at <= ?17) ORDER BY turn, cseq LIMIT 1), 0)"
#define SQ_SELECT_JOB                                                                                                  \
    "SELECT " AD_JOB_COLUMNS(SQ_COL_NAME) "seq, cseq, created_seq, started_seq, grp, turn, traceparent, tracestate,"   \
                                          " deps, depends_on, dep_run, batch_id, dependents, schedule FROM jobs "
/* The insert's columns and values: created_seq is the seq of the insert, turn is computed (SQ_TURN_EXPR). */
#define SQ_INSERT_COLS                                                                                                 \
    AD_JOB_COLUMNS(SQ_COL_NAME)                                                                                        \
    "seq, created_seq, tkey, ttkey, grp, turn, deps, depends_on, dep_run, batch_id, traceparent, tracestate, schedule"
#define SQ_INSERT_PARAMS                                                                                               \
    AD_JOB_COLUMNS(SQ_COL_PARAM)                                                                                       \
    SQ_SEQ_PARAM ", " SQ_SEQ_PARAM ", " SQ_TKEY_PARAM ", " SQ_TTKEY_PARAM ", " SQ_GRP_PARAM ", " SQ_TURN_EXPR          \
                 ", " SQ_DEPS_PARAM ", ?39, ?40, ?41, ?42, ?43, ?44"

/* Filters of a list query, as bits of the index into the list statements. */
#define SQ_LIST_STATUS 1
#define SQ_LIST_TYPE 2
#define SQ_LIST_UPDATED 4
#define SQ_LIST_VARIANTS 8

/* Every list statement numbers its parameters alike: ?1 tenant, ?2 before cseq, ?3 status, ?4 type, ?5 updated
 * after, ?6 limit, ?7 tkey, ?8 ttkey. A key only narrows the index range: the names are compared too, so
 * tenants (or types) whose keys collide never see each other's jobs. */
/* The walks by cseq test updated_at on each row they read (the unary + keeps the planner off jobs_updated); the
 * few jobs updated since are read through jobs_updated instead (SQ_LIST_FEW). Without a status or a type, the walk
 * is the table's own, by cseq, across tenants. */
#define SQ_LIST_F_UPDATED " AND +updated_at > ?5"
#define SQ_LIST_TAIL " ORDER BY cseq DESC LIMIT ?6"
#define SQ_LIST_STATUS_HEAD SQ_SELECT_JOB "WHERE tkey = ?7 AND status = ?3 AND tenant = ?1 AND cseq < ?2"
#define SQ_LIST_F_TYPE " AND type = ?4"
#define SQ_LIST_TYPE_HEAD SQ_SELECT_JOB "WHERE ttkey = ?8 AND type = ?4 AND tenant = ?1 AND cseq < ?2"
/* Without a status or a type: one walk of jobs_tenant_status per status, merged by cseq. SQLite merges the
 * ordered branches lazily, so a page reads about limit + 6 entries, not every job of the tenant. */
#define SQ_LIST_ANY_BRANCH(status, f)                                                                                  \
    SQ_SELECT_JOB "WHERE tkey = ?7 AND status = " #status " AND tenant = ?1 AND cseq < ?2" f
#define SQ_LIST_ANY(f)                                                                                                 \
    SQ_LIST_ANY_BRANCH(0, f)                                                                                           \
    " UNION ALL " SQ_LIST_ANY_BRANCH(1, f) " UNION ALL " SQ_LIST_ANY_BRANCH(2, f) " UNION ALL " SQ_LIST_ANY_BRANCH(    \
        3, f) " UNION ALL " SQ_LIST_ANY_BRANCH(4, f) " UNION ALL " SQ_LIST_ANY_BRANCH(5, f) SQ_LIST_TAIL
_Static_assert(AD_STATUS__COUNT == 6, "SQ_LIST_ANY has a branch for each status");
/* A list by updatedAfter that at most SQ_LIST_FEW_MAX jobs (of the tenant's key, below the page's cseq) match:
 * their cseqs come from jobs_updated, which holds cseq (the rowid) beside updated_at, and SQLite keeps them
 * ordered for the walk by cseq that follows, so the page costs a read of the few index entries and limit rows.
 * updated_at does not grow with cseq (an operation reads its time before it is queued; cluster nodes), so no
 * walk of cseq alone can stop early. */
#define SQ_LIST_FEW_MAX 10000
#define SQ_LIST_FEW_PROBE                                                                                              \
    "SELECT 1 FROM jobs INDEXED BY jobs_updated WHERE tkey = ?7 AND updated_at > ?5 AND cseq < ?2 LIMIT 1 OFFSET ?6"
#define SQ_LIST_FEW_HEAD                                                                                               \
    SQ_SELECT_JOB "WHERE cseq IN (SELECT cseq FROM jobs INDEXED BY jobs_updated WHERE tkey = ?7 AND updated_at > ?5"   \
                  " AND cseq < ?2) AND tenant = ?1"
#define SQ_LIST_FEW_F_STATUS " AND status = ?3"

/* The queues table's columns (sqlite_queue.c reads them in this order), and the count of a queue's running jobs:
 * ?1 tenant, ?2 type, ?5 the tenant's key. */
#define SQ_QUEUE_COLS                                                                                                  \
    "tenant, type, paused, concurrency, group_concurrency, rate_limit, rate_period, group_rate_limit,"                 \
    " group_rate_period, window_start, window_count"
#define SQ_QUEUE_RUNNING "SELECT count(*) FROM jobs WHERE tkey = ?5 AND status = 1 AND tenant = ?1 AND type = ?2"

enum sq_stmt {
    ST_BEGIN,
    ST_COMMIT,
    ST_ROLLBACK,
    ST_SAVEPOINT,
    ST_RELEASE,
    ST_ROLLBACK_TO,
    ST_SWEEP_SAVEPOINT,
    ST_SWEEP_RELEASE,
    ST_SWEEP_ROLLBACK_TO,
    ST_INSERT,
    ST_UPDATE,
    ST_GET,
    ST_LIST,
    ST_LIST_LAST = ST_LIST + SQ_LIST_VARIANTS - 1,
    ST_LIST_FEW_PROBE,
    ST_LIST_FEW,
    ST_LIST_FEW_LAST = ST_LIST_FEW + SQ_LIST_UPDATED - 1,
    ST_CHANGES,
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
    ST_SET_SEQ_HW,
    ST_MAX_SEQ,
    ST_IDEM_GET,
    ST_IDEM_PUT,
    ST_IDEM_SWEEP,
    ST_ATTEMPT_ADD,
    ST_ATTEMPT_LIST,
    ST_EVENT_APPEND,
    ST_EVENTS_AFTER,
    ST_JOB_COUNTS,
    ST_JOB_COUNTS_ALL,
    ST_SNAPSHOT,
    ST_DATA_VERSION,
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
    ST_QUEUE_GET,
    ST_QUEUE_PUT,
    ST_QUEUE_LIST,
    ST_QUEUE_COUNTS,
    ST_QUEUE_RUNNING,
    ST_GROUP_RUNNING,
    ST_GROUP_WINDOW,
    ST_GROUP_TOOK,
    ST_GROUP_FORGET,
    ST_GROUP_QUEUED,
    ST_DEP_ADD,
    ST_DEP_LIST,
    ST_DEP_DELETE,
    ST_DEP_MARK,
    ST_BATCH_INSERT,
    ST_BATCH_UPDATE,
    ST_BATCH_GET,
    ST_BATCH_SWEEP,
    ST_BATCH_JOBS,
    ST_SCHEDULE_INSERT,
    ST_SCHEDULE_UPDATE,
    ST_SCHEDULE_GET,
    ST_SCHEDULE_LIST,
    ST_SCHEDULE_DELETE,
    ST_SCHEDULE_DUE,
    ST__COUNT
};

/* The text of each statement, prepared on a connection's first use of it (sqlite_conn.c). */
extern const char *const ad_sq_stmt_sql[ST__COUNT];

/*
 * The rows a write transaction changed, kept by job id in a small direct-mapped table: a worker's report reads
 * its running job back before changing it, and the version this connection wrote when the job was leased (or
 * last heartbeated) is still the job's, unless another connection committed since, which PRAGMA data_version
 * tells at each begin. Kept only from updates (a job's first report follows its lease), and only for jobs whose
 * texts are small (at most SQ_ROW_TEXT_MAX bytes of payload, result, error and message: the table holds at most
 * SQ_ROWS of them, a few MiB); only a write transaction's reads use them; dropped when a transaction or an
 * operation is rolled back and when the sweep rewrites rows by query.
 */
#define SQ_ROWS 4096
#define SQ_ROW_TEXT_MAX 2048

struct sq_store {
    struct ad_store base;
    char *path;  /* <dir>/acceptd.db */
    int lock_fd; /* <dir>/acceptd.lock, flock()ed while the store is open; -1 when not held */
};

struct ad_conn {
    sqlite3 *db;
    sqlite3_stmt *st[ST__COUNT]; /* prepared on first use, kept until disconnect */
    int in_tx;                   /* between begin and commit/rollback */
    int64_t seq;                 /* last seq handed out by this connection */
    int64_t seq_stored;          /* seq_hw as the file has it, as far as this connection knows */
    int seq_synced;              /* seq has been raised to the file's high-water mark in this transaction */
    struct ad_hook_cache hooks;  /* the write transaction's webhook lookups */
    struct ad_job **rows;        /* SQ_ROWS: jobs as this connection last updated them (sq_job_get), or NULL */
    int64_t data_version;        /* PRAGMA data_version when rows was last known to match the file */
    int own_checkpoints;         /* checkpoints in sq_after_batch, not inside its commits (set by sq_begin) */
    int wal_frames;              /* frames in the write-ahead log after this connection's last commit */
    int space_frames;            /* wal_frames when sq_after_batch last looked at the free space */
    int tx_full;                 /* a statement of the open transaction failed for want of space */
};

/* ---- store_sqlite.c: rows ---- */

/* Bind a value at parameter i (NULL, a negative progress or a zero time bind NULL); SQLite's result code. */
int ad_sq_bind_TEXT(sqlite3_stmt *st, int i, const char *v);
int ad_sq_bind_INT(sqlite3_stmt *st, int i, int v);
int ad_sq_bind_PROG(sqlite3_stmt *st, int i, int v);
int ad_sq_bind_TIME(sqlite3_stmt *st, int i, int64_t v);
/* Read column i of the current row (TEXT: heap copy or NULL; the caller frees). */
char *ad_sq_read_TEXT(sqlite3_stmt *st, int i);
int ad_sq_read_INT(sqlite3_stmt *st, int i);
int ad_sq_read_PROG(sqlite3_stmt *st, int i);
int64_t ad_sq_read_TIME(sqlite3_stmt *st, int i);
int64_t ad_sq_read_INT64(sqlite3_stmt *st, int i);
/* Step a bound select to the end into a growing array (*items, *n), read filling an element; resets st. */
ad_err ad_sq_fetch_rows(struct ad_conn *c, sqlite3_stmt *st, void *items, size_t *n, size_t elem,
                        void (*read)(sqlite3_stmt *st, void *slot), const char *what);
/* Forget the rows the connection remembers (a rollback, a sweep). */
void ad_sq_rows_drop(struct ad_conn *c);
/* At begin: drop the remembered rows if another connection committed since (PRAGMA data_version). */
ad_err ad_sq_rows_check(struct ad_conn *c);
/* Run a sweep statement with (cutoff, limit); adds the rows it deleted to *n. */
ad_err ad_sq_sweep_step(struct ad_conn *c, enum sq_stmt id, int64_t cutoff, int limit, int *n, const char *what);

/* ---- sqlite_conn.c: statements, connections and transactions (ops->connect .. rollback_to) ---- */

/* Log a failed call with what it was and map rc (a full disk: AD_E_STORAGE_FULL). */
ad_err ad_sq_fail(struct ad_conn *c, int rc, const char *what);
/* Statement id on this connection, prepared on first use and kept; NULL (logged) if it fails to prepare. */
sqlite3_stmt *ad_sq_stmt(struct ad_conn *c, enum sq_stmt id);
/* Reset a statement and clear its bindings. */
void ad_sq_done(sqlite3_stmt *st);
/* Step a bound statement that returns no row, and reset it; run_id for one without parameters. */
ad_err ad_sq_run(struct ad_conn *c, sqlite3_stmt *st, const char *what);
ad_err ad_sq_run_id(struct ad_conn *c, enum sq_stmt id, const char *what);
/* AD_E_OK inside a write transaction, else an error (logged): writes happen in the writer's transactions. */
ad_err ad_sq_check_tx(struct ad_conn *c);
/* Inside a transaction, statement id (*st) for a write that takes the next seq. */
ad_err ad_sq_write_stmt(struct ad_conn *c, enum sq_stmt id, sqlite3_stmt **st);
/* Raise the connection's seq to the file's high-water mark, once per transaction. */
ad_err ad_sq_sync_seq(struct ad_conn *c);
void ad_sq_disconnect(struct ad_conn *c);
void ad_sq_after_batch(struct ad_conn *c);
ad_err ad_sq_reclaim(struct ad_conn *c);
struct ad_conn *ad_sq_connect(struct ad_store *s, char *err, size_t errlen);
ad_err ad_sq_begin(struct ad_conn *c);
ad_err ad_sq_commit(struct ad_conn *c);
void ad_sq_rollback(struct ad_conn *c);
int64_t ad_sq_changes(struct ad_conn *c);
ad_err ad_sq_savepoint(struct ad_conn *c);
ad_err ad_sq_release(struct ad_conn *c);
void ad_sq_rollback_to(struct ad_conn *c);

/* ---- sqlite_schema.c ---- */

/* The integer key of a tenant (type NULL) or of a tenant and a type, stored in the file: never change it. */
int64_t ad_sq_key(const char *tenant, const char *type);
/* Apply the migrations the file lacks, in one transaction: 0, or -1 with err filled. */
int ad_sq_migrate(struct ad_conn *c, char *err, size_t errlen);

/* ---- sqlite_webhook.c: ops->snapshot_*, webhook_* and delivery_* (store.h) ---- */

ad_err ad_sq_snapshot_begin(struct ad_conn *c);
void ad_sq_snapshot_end(struct ad_conn *c);
ad_err ad_sq_webhook_put(struct ad_conn *c, const struct ad_webhook *w);
ad_err ad_sq_webhook_get(struct ad_conn *c, const char *tenant, const char *id, struct ad_webhook **out);
ad_err ad_sq_webhook_list(struct ad_conn *c, const char *tenant, int enabled_only, struct ad_webhook_list *out);
ad_err ad_sq_webhook_delete(struct ad_conn *c, const char *tenant, const char *id);
ad_err ad_sq_delivery_insert(struct ad_conn *c, struct ad_delivery *d);
ad_err ad_sq_delivery_update(struct ad_conn *c, const struct ad_delivery *d);
ad_err ad_sq_delivery_get(struct ad_conn *c, const char *tenant, const char *id, int64_t seq, struct ad_delivery **out);
ad_err ad_sq_delivery_due(struct ad_conn *c, const char *const *exclude, size_t nexclude, int limit, struct ad_due *out,
                          size_t *n);
ad_err ad_sq_delivery_list(struct ad_conn *c, const char *webhook_id, int state, int64_t before, int limit,
                           struct ad_delivery_list *out);
ad_err ad_sq_delivery_abandon(struct ad_conn *c, const char *webhook_id, const char *reason);
ad_err ad_sq_delivery_claim(struct ad_conn *c, int64_t seq, int64_t now, int64_t until, const char *owner);
ad_err ad_sq_delivery_release(struct ad_conn *c, const char *owner, int64_t now);
ad_err ad_sq_delivery_sweep(struct ad_conn *c, int64_t before, int limit, int *done_out);

/* ---- sqlite_queue.c: ops->queue_* (store.h) ---- */

ad_err ad_sq_queue_get(struct ad_conn *c, const char *tenant, const char *type, struct ad_queue *out);
ad_err ad_sq_queue_put(struct ad_conn *c, const struct ad_queue *q);
ad_err ad_sq_queue_list(struct ad_conn *c, const char *tenant, struct ad_queue_list *out);
ad_err ad_sq_queue_counts(struct ad_conn *c, const char *tenant, const char *type, int64_t now,
                          struct ad_queue_counts *out);
ad_err ad_sq_queue_running(struct ad_conn *c, const char *tenant, const char *type, int64_t *out);
ad_err ad_sq_queue_group_running(struct ad_conn *c, const char *tenant, const char *type, int64_t min,
                                 struct ad_group_count_list *out);
ad_err ad_sq_queue_group_queued(struct ad_conn *c, const char *tenant, const char *type, int64_t now,
                                const char *const *groups, size_t ngroups, int64_t *out);
ad_err ad_sq_queue_group_window(struct ad_conn *c, const char *tenant, const char *type, int64_t window_start,
                                int64_t min, struct ad_group_count_list *out);
ad_err ad_sq_queue_group_took(struct ad_conn *c, const char *tenant, const char *type, const char *group,
                              int64_t window_start, int n);

/* ---- sqlite_schedule.c: ops->schedule_* (store.h) ---- */

ad_err ad_sq_schedule_put(struct ad_conn *c, const struct ad_schedule *s, int fresh, int64_t expect_next);
ad_err ad_sq_schedule_get(struct ad_conn *c, const char *tenant, const char *id, struct ad_schedule *out);
ad_err ad_sq_schedule_list(struct ad_conn *c, const char *tenant, const char *after, int limit,
                           struct ad_schedule_list *out);
ad_err ad_sq_schedule_delete(struct ad_conn *c, const char *tenant, const char *id);
ad_err ad_sq_schedule_due(struct ad_conn *c, int64_t before, int limit, struct ad_schedule_list *out);

#endif
