/*
 * store_pg.c - the cluster store: several acceptd nodes share one PostgreSQL database through libpq.
 *
 * One global write order. Every writer transaction starts by taking one transaction-scoped advisory lock, so
 * write batches of all nodes run one after another and commit in seq order; each batch then reads the seq
 * counter (acceptd_counter), hands out seqs from it locally and writes it back at commit if it moved. A
 * reader that has seen seq n has therefore seen every change up to n (the changes feed and event ids never
 * skip a late commit), and rows swept away never make seq go back. An advisory lock writes nothing, so a
 * batch that changed nothing (an idle sweep, a lease request that found no job) commits without a WAL flush.
 *
 * One round trip per batch. Every connection is in libpq pipeline mode. Inside a transaction a write is only
 * sent; its result is checked when the next read, or the commit, collects the results in order. begin only
 * sends the lock and the counter read: the batch's first read, or its first seq, collects them. A database
 * error anywhere in a batch poisons it: the commit then rolls back and reports the error. Outside a
 * transaction each statement is sent with a sync and awaited, which is plain synchronous execution.
 * A batch's operations have no savepoints (pg_changes): the store counts the writes it sends, as SQLite counts
 * rows changed. The reads a batch must wait for are few: the jobs its operations load are read ahead, all in
 * one go (pg_job_prefetch), and its leases take from the head of the queue that its first lease read (struct
 * pg_pool), so a batch of submits, completes and leases waits about three times: reads ahead, queue, commit.
 *
 * The feed. Each store has a random node id; a commit that changed jobs announces them with NOTIFY
 * acceptd_changes "<node>\n<id>\n<id>\t<tenant>\t<type>..." (tenant and type for the jobs that are queued
 * now), and a node's feed connection LISTENs and passes on what the other nodes announced.
 *
 * Like store_sqlite.c, this file decides nothing about jobs and never logs parameter values (payloads,
 * results, secrets): only the statement's purpose and the server's primary message.
 */
#include "store/store_int.h"
#include "store/artifact.h"
#include "common/metrics.h"

#include <errno.h>
#include <libpq-fe.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum pg_col {
#define PG_COL_ENUM(name, kind, n, fixed) COL_##name,
    AD_JOB_COLUMNS(PG_COL_ENUM)
#undef PG_COL_ENUM
        COL_seq,
    COL_cseq,
    COL_created_seq,
    COL_started_seq
};

/* The parameter numbers are written out (SQL needs them as text); they must be the column positions. */
#define PG_COL_CHECK(name, kind, n, fixed) _Static_assert(COL_##name + 1 == n, "parameter number of column " #name);
AD_JOB_COLUMNS(PG_COL_CHECK)
#undef PG_COL_CHECK
#define PG_SEQ_PARAM "$31"
_Static_assert(COL_seq + 1 == 31, "seq is the parameter after the columns");

#define PG_COL_NAME(name, kind, n, fixed) #name ", "
#define PG_COL_PARAM(name, kind, n, fixed) "$" #n ", "
/* An update sets only the columns that can change, as SQLite's does: naming tombstoned queued its trigger on every
 * update, and naming payload sent it, and stored it again, every time. The fixed columns' parameters are still
 * bound at their places, unused, so their type is declared (update_param_types). */
#define PG_COL_SET(name, kind, n, fixed) PG_COL_SET_##fixed(name, n)
#define PG_COL_SET_0(name, n) #name " = $" #n ", "
#define PG_COL_SET_1(name, n)
#define PG_SELECT_JOB "SELECT " AD_JOB_COLUMNS(PG_COL_NAME) "seq, cseq, created_seq, started_seq FROM jobs "
/* The insert's columns and parameters: cseq and created_seq are the seq of the insert. */
#define PG_INSERT_COLS AD_JOB_COLUMNS(PG_COL_NAME) "seq, cseq, created_seq"
#define PG_INSERT_PARAMS AD_JOB_COLUMNS(PG_COL_PARAM) PG_SEQ_PARAM ", " PG_SEQ_PARAM ", " PG_SEQ_PARAM

/*
 * Migrations, applied in order at open; acceptd_schema holds the numbers applied. Never edit a shipped
 * migration: append a new one.
 *
 * Migration 1 is the whole schema of SQLite's migrations 1-4, with the same indexes. cseq is the seq of
 * the insert (both come from acceptd_counter), so jobs need no sequence of their own. Attempts, job events
 * and deliveries go with their job or endpoint by foreign key; a trigger empties a job's event log when it
 * is tombstoned, like SQLite's. attempts.id and webhooks.ord keep insertion order (SQLite's rowid).
 */
static const char *const migrations[] = {
    /* 1 */
    "CREATE TABLE jobs ("
    " cseq bigint PRIMARY KEY,"
    " id text NOT NULL UNIQUE,"
    " seq bigint NOT NULL UNIQUE,"
    " tenant text NOT NULL,"
    " type text NOT NULL,"
    " status int NOT NULL,"
    " progress int,"
    " priority int NOT NULL,"
    " payload text,"
    " result text,"
    " result_location text,"
    " error text,"
    " message text,"
    " attempt int NOT NULL,"
    " max_attempts int NOT NULL,"
    " cancel_requested int NOT NULL,"
    " timeout_seconds int NOT NULL,"
    " on_complete_redirect int NOT NULL,"
    " created_at bigint,"
    " started_at bigint,"
    " updated_at bigint,"
    " finished_at bigint,"
    " expires_at bigint,"
    " run_at bigint,"
    " callback_url text,"
    " retry_of text,"
    " resource text,"
    " lease_id text,"
    " lease_expires_at bigint,"
    " worker text,"
    " tombstoned int NOT NULL);"
    "CREATE INDEX jobs_tenant_cseq ON jobs (tenant, cseq);"
    "CREATE INDEX jobs_tenant_status ON jobs (tenant, status, cseq);"
    "CREATE INDEX jobs_tenant_type ON jobs (tenant, type, cseq);"
    "CREATE INDEX jobs_tenant_seq ON jobs (tenant, seq);"
    "CREATE INDEX jobs_queue ON jobs (tenant, type, priority DESC, cseq) WHERE status = 0;"
    "CREATE INDEX jobs_running ON jobs (lease_expires_at) WHERE status = 1;"
    "CREATE INDEX jobs_scheduled ON jobs (run_at) WHERE status = 0 AND run_at IS NOT NULL;"
    "CREATE INDEX jobs_expiry ON jobs (tombstoned, expires_at) WHERE expires_at IS NOT NULL;"
    "CREATE TABLE idempotency ("
    " tenant text NOT NULL,"
    " key text NOT NULL,"
    " fingerprint text NOT NULL,"
    " job_id text NOT NULL,"
    " created_at bigint NOT NULL,"
    " PRIMARY KEY (tenant, key));"
    "CREATE INDEX idempotency_created ON idempotency (created_at);"
    "CREATE TABLE attempts ("
    " id bigserial PRIMARY KEY,"
    " job_id text NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,"
    " attempt int NOT NULL,"
    " worker text,"
    " started_at bigint NOT NULL,"
    " ended_at bigint,"
    " outcome text);"
    "CREATE INDEX attempts_job ON attempts (job_id, started_at);"
    "CREATE TABLE job_events ("
    " job_id text NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,"
    " seq bigint NOT NULL,"
    " kind text NOT NULL,"
    " data text,"
    " PRIMARY KEY (job_id, seq));"
    "CREATE FUNCTION acceptd_tombstone_events() RETURNS trigger LANGUAGE plpgsql AS"
    " $$BEGIN DELETE FROM job_events WHERE job_id = NEW.id; RETURN NULL; END$$;"
    "CREATE TRIGGER jobs_tombstone_events AFTER UPDATE OF tombstoned ON jobs"
    " FOR EACH ROW WHEN (NEW.tombstoned = 1) EXECUTE FUNCTION acceptd_tombstone_events();"
    "CREATE TABLE webhooks ("
    " id text PRIMARY KEY,"
    " ord bigserial NOT NULL,"
    " tenant text NOT NULL,"
    " url text,"
    " events bigint NOT NULL,"
    " secret text NOT NULL,"
    " prev_secret text,"
    " prev_until bigint,"
    " created_at bigint NOT NULL,"
    " disabled_at bigint,"
    " disabled_reason text);"
    "CREATE INDEX webhooks_tenant ON webhooks (tenant, created_at, ord) WHERE url IS NOT NULL;"
    "CREATE UNIQUE INDEX webhooks_callback ON webhooks (tenant) WHERE url IS NULL;"
    "CREATE TABLE deliveries ("
    " seq bigint PRIMARY KEY,"
    " id text NOT NULL UNIQUE,"
    " tenant text NOT NULL,"
    " webhook_id text NOT NULL REFERENCES webhooks (id) ON DELETE CASCADE,"
    " url text NOT NULL,"
    " event_id text NOT NULL,"
    " event_type text NOT NULL,"
    " job_id text NOT NULL,"
    " body text NOT NULL,"
    " created_at bigint NOT NULL,"
    " state int NOT NULL,"
    " attempts int NOT NULL,"
    " next_at bigint,"
    " last_at bigint,"
    " last_status int,"
    " last_error text,"
    " claimed_by text);"
    "CREATE INDEX deliveries_due ON deliveries (next_at) WHERE state = 0;"
    "CREATE INDEX deliveries_claimed ON deliveries (claimed_by) WHERE state = 0;"
    "CREATE INDEX deliveries_webhook ON deliveries (webhook_id);"
    "CREATE INDEX deliveries_webhook_state ON deliveries (webhook_id, state);"
    "CREATE INDEX deliveries_finished ON deliveries (created_at) WHERE state != 0;"
    "CREATE TABLE acceptd_counter (id int PRIMARY KEY, seq bigint NOT NULL);"
    "INSERT INTO acceptd_counter (id, seq) VALUES (1, 0);",
    /* 2: the seq of a job's insert, the id of its first event, which its log no longer holds (core.c); NULL for
     * the jobs created before, whose logs do (SQLite's migration 6). */
    "ALTER TABLE jobs ADD COLUMN created_seq bigint;",
    /* 3: an attempt is written when it ends; the live one is the running job's own (SQLite's migration 7). */
    "DELETE FROM attempts WHERE ended_at IS NULL;",
    /* 4: the seq of the lease whose running event is made from the job (job.h); NULL for the leases before. */
    "ALTER TABLE jobs ADD COLUMN started_seq bigint;",
    /* 5: scheduled jobs are read past a (run_at, cseq) cursor (hub.c keeps only so many runAt timers). */
    ("DROP INDEX jobs_scheduled;"
     "CREATE INDEX jobs_scheduled ON jobs (run_at, cseq) WHERE status = 0 AND run_at IS NOT NULL;"),
    /* 6: result artifacts: the job's, "<leaseId> <JSON>" (job.h; SQLite's migration 10), and their bytes. */
    ("ALTER TABLE jobs ADD COLUMN artifact text;"
     "CREATE TABLE artifact_uploads (job_id text NOT NULL, lease_id text NOT NULL, size bigint NOT NULL,"
     " state bytea NOT NULL, view text, PRIMARY KEY (job_id, lease_id));"
     "CREATE TABLE artifact_chunks (job_id text NOT NULL, lease_id text NOT NULL, off bigint NOT NULL,"
     " data bytea NOT NULL, PRIMARY KEY (job_id, lease_id, off));"
     "ALTER TABLE artifact_chunks ALTER COLUMN data SET STORAGE EXTERNAL;"),
    /* 7: the lists by updatedAfter read the few jobs updated since through it (SQLite's migration 11). Not led by
     * tenant: the planner then took it, now and then, for the lease's read of the queue (tenant = $1 and no range
     * on updated_at), reading every job of the tenant per lease, and halved the end-to-end rate. Other tenants'
     * jobs updated since are read and passed over; those are the few the list was planned for. */
    "CREATE INDEX jobs_updated ON jobs (updated_at);",
    /* 8: every text column compares bytes (the "C" collation), whatever the database's own: ids, tenants and
     * types are keys, not words. In a database created with a locale (en_US.UTF-8, a common default) every
     * comparison in an index went through strcoll, and PostgreSQL spent a tenth more CPU per job end to end
     * (docs/benchmarks.md). Every column at once, so that no comparison mixes two collations. No table is
     * rewritten; the indexes on these columns are rebuilt (about 1 s per 100,000 jobs). A text column added
     * later says COLLATE "C" too: test_text_columns_compare_bytes counts those that do not. */
    ("DO $$DECLARE t record; BEGIN"
     " FOR t IN SELECT table_name, string_agg(format('ALTER COLUMN %I TYPE text COLLATE \"C\"', column_name), ', ')"
     " AS alters FROM information_schema.columns WHERE table_schema = current_schema() AND data_type = 'text'"
     " AND table_name IN ('jobs', 'idempotency', 'attempts', 'job_events', 'webhooks', 'deliveries',"
     " 'artifact_uploads', 'artifact_chunks') GROUP BY table_name ORDER BY table_name"
     " LOOP EXECUTE format('ALTER TABLE %I %s', t.table_name, t.alters); END LOOP; END$$;"),
};
#define PG_SCHEMA_VERSION ((int)(sizeof(migrations) / sizeof(migrations[0])))

/* Held (per session) while migrating, so that nodes starting together migrate one at a time: "acceptd". */
#define PG_MIGRATE_LOCK "27412351295714404"
#define PG_WRITE_LOCK "27412351295714405"
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

#define PG_WEBHOOK_COLS                                                                                                \
    "id, tenant, url, events, secret, prev_secret, prev_until, created_at, disabled_at, disabled_reason"
#define PG_DELIVERY_COLS                                                                                               \
    "id, tenant, webhook_id, url, event_id, event_type, job_id, body, created_at, state, attempts, next_at,"           \
    " last_at, last_status, last_error"

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
    ST__COUNT
};

static const char *const stmt_sql[ST__COUNT] = {
    [ST_BEGIN] = "BEGIN",
    [ST_COMMIT] = "COMMIT",
    [ST_ROLLBACK] = "ROLLBACK",
    /* One fixed name: operations are not nested, and rollback_to releases it again. */
    [ST_SAVEPOINT] = "SAVEPOINT op",
    [ST_RELEASE] = "RELEASE op",
    [ST_ROLLBACK_TO] = "ROLLBACK TO op",
    /* The global write lock: held from begin to commit by the one batch writing, on any node. */
    [ST_WRITE_LOCK] = "SELECT pg_advisory_xact_lock(" PG_WRITE_LOCK ")",
    /* A statement of its own, after the lock: its snapshot then shows the last holder's commit. */
    [ST_COUNTER_LOCK] = "SELECT seq FROM acceptd_counter WHERE id = 1",
    [ST_COUNTER_SET] = "UPDATE acceptd_counter SET seq = $1 WHERE id = 1",
    [ST_NOTIFY] = "SELECT pg_notify('" PG_CHANNEL "', $1)",
    [ST_INSERT] = "INSERT INTO jobs (" PG_INSERT_COLS ") VALUES (" PG_INSERT_PARAMS ")",
    [ST_UPDATE] =
        "UPDATE jobs SET " AD_JOB_COLUMNS(PG_COL_SET) "seq = " PG_SEQ_PARAM ", started_seq = $32 WHERE id = $1",
    [ST_GET] = PG_SELECT_JOB "WHERE id = $1 AND ($2::text IS NULL OR tenant = $2)",
    [ST_LIST + 0] = PG_LIST_HEAD PG_LIST_TAIL,
    [ST_LIST + PG_LIST_STATUS] = PG_LIST_HEAD PG_LIST_F_STATUS PG_LIST_TAIL,
    [ST_LIST + PG_LIST_TYPE] = PG_LIST_HEAD PG_LIST_F_TYPE PG_LIST_TAIL,
    [ST_LIST + PG_LIST_STATUS + PG_LIST_TYPE] = PG_LIST_HEAD PG_LIST_F_STATUS PG_LIST_F_TYPE PG_LIST_TAIL,
    [ST_LIST + PG_LIST_UPDATED] = PG_LIST_HEAD PG_LIST_F_UPDATED PG_LIST_TAIL,
    [ST_LIST + PG_LIST_STATUS + PG_LIST_UPDATED] = PG_LIST_HEAD PG_LIST_F_STATUS PG_LIST_F_UPDATED PG_LIST_TAIL,
    [ST_LIST + PG_LIST_TYPE + PG_LIST_UPDATED] = PG_LIST_HEAD PG_LIST_F_TYPE PG_LIST_F_UPDATED PG_LIST_TAIL,
    [ST_LIST_LAST] = PG_LIST_HEAD PG_LIST_F_STATUS PG_LIST_F_TYPE PG_LIST_F_UPDATED PG_LIST_TAIL,
    [ST_CHANGES] = PG_SELECT_JOB "WHERE tenant = $1 AND seq > $2 ORDER BY seq LIMIT $3",
    [ST_CHANGES_ALL] = PG_SELECT_JOB "WHERE seq > $1 ORDER BY seq LIMIT $2",
    /* SKIP LOCKED: rows another transaction has locked are someone else's to lease. */
    [ST_LEASABLE] = PG_SELECT_JOB "WHERE status = 0 AND tenant = $1 AND type = ANY ($2::text[])"
                                  " AND (run_at IS NULL OR run_at <= $3) ORDER BY priority DESC, cseq LIMIT $4"
                                  " FOR UPDATE SKIP LOCKED",
    [ST_RUNNING] = PG_SELECT_JOB "WHERE status = 1 ORDER BY lease_expires_at",
    [ST_SCHEDULED] = PG_SELECT_JOB "WHERE status = 0 AND run_at IS NOT NULL AND (run_at, cseq) > ($1, $2)"
                                   " ORDER BY run_at, cseq LIMIT $3",
    [ST_TOMBSTONE] =
        "UPDATE jobs SET tombstoned = 1, payload = '{}', result = NULL, error = NULL, message = NULL, artifact = NULL"
        " WHERE cseq IN (SELECT cseq FROM jobs WHERE tombstoned = 0 AND expires_at <= $1 LIMIT $2)",
    [ST_DELETE] = "DELETE FROM jobs"
                  " WHERE cseq IN (SELECT cseq FROM jobs WHERE tombstoned = 1 AND expires_at <= $1 LIMIT $2)",
    [ST_MAX_SEQ] = "SELECT seq FROM acceptd_counter WHERE id = 1",
    [ST_IDEM_GET] = "SELECT fingerprint, job_id, created_at FROM idempotency WHERE tenant = $1 AND key = $2",
    [ST_IDEM_PUT] = "INSERT INTO idempotency (tenant, key, fingerprint, job_id, created_at)"
                    " VALUES ($1, $2, $3, $4, $5) ON CONFLICT (tenant, key) DO UPDATE SET"
                    " fingerprint = excluded.fingerprint, job_id = excluded.job_id, created_at = excluded.created_at",
    [ST_IDEM_SWEEP] = "DELETE FROM idempotency WHERE (tenant, key) IN"
                      " (SELECT tenant, key FROM idempotency WHERE created_at < $1 LIMIT $2)",
    [ST_ATTEMPT_ADD] = "INSERT INTO attempts (job_id, attempt, worker, started_at, ended_at, outcome)"
                       " VALUES ($1, $2, $3, $4, $5, $6)",
    [ST_ATTEMPT_LIST] = "SELECT attempt, worker, started_at, ended_at, outcome FROM attempts WHERE job_id = $1"
                        " ORDER BY started_at, id",
    [ST_EVENT_APPEND] = "INSERT INTO job_events (job_id, seq, kind, data) VALUES ($1, $2, $3, $4)",
    [ST_JOB_COUNTS] = "SELECT type, status, count(*), min(created_at) FROM jobs"
                      " WHERE ($1::text IS NULL OR tenant = $1) AND tombstoned = 0"
                      " GROUP BY type, status ORDER BY type, status LIMIT $2",
    [ST_EVENTS_AFTER] = "SELECT seq, kind, data FROM job_events WHERE job_id = $1 AND seq > $2 ORDER BY seq LIMIT $3",
    [ST_WEBHOOK_PUT] = "INSERT INTO webhooks (" PG_WEBHOOK_COLS ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)"
                       " ON CONFLICT (id) DO UPDATE SET url = excluded.url, events = excluded.events,"
                       " secret = excluded.secret, prev_secret = excluded.prev_secret,"
                       " prev_until = excluded.prev_until, disabled_at = excluded.disabled_at,"
                       " disabled_reason = excluded.disabled_reason",
    [ST_WEBHOOK_GET] = "SELECT " PG_WEBHOOK_COLS " FROM webhooks WHERE id = $1 AND ($2::text IS NULL OR tenant = $2)",
    [ST_WEBHOOK_CALLBACK] = "SELECT " PG_WEBHOOK_COLS " FROM webhooks WHERE tenant = $1 AND url IS NULL",
    [ST_WEBHOOK_LIST] = "SELECT " PG_WEBHOOK_COLS " FROM webhooks WHERE tenant = $1 AND url IS NOT NULL"
                        " AND ($2::int = 0 OR disabled_at IS NULL) ORDER BY created_at, ord",
    [ST_WEBHOOK_DELETE] = "DELETE FROM webhooks WHERE id = $1 AND tenant = $2 AND url IS NOT NULL",
    [ST_DELIVERY_INSERT] = "INSERT INTO deliveries (seq, " PG_DELIVERY_COLS ")"
                           " VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16)",
    [ST_DELIVERY_UPDATE] = "UPDATE deliveries SET state = $2, attempts = $3, next_at = $4, last_at = $5,"
                           " last_status = $6, last_error = $7 WHERE seq = $1",
    [ST_DELIVERY_GET] = "SELECT seq, " PG_DELIVERY_COLS " FROM deliveries WHERE id = $1 AND tenant = $2",
    [ST_DELIVERY_GET_SEQ] = "SELECT seq, " PG_DELIVERY_COLS " FROM deliveries WHERE seq = $1",
    [ST_DELIVERY_DUE] = "SELECT seq, next_at, webhook_id FROM deliveries WHERE state = 0"
                        " AND webhook_id <> ALL ($2::text[]) ORDER BY next_at, seq LIMIT $1",
    [ST_DELIVERY_LIST] = "SELECT seq, " PG_DELIVERY_COLS " FROM deliveries WHERE webhook_id = $1 AND seq < $2"
                         " ORDER BY seq DESC LIMIT $3",
    [ST_DELIVERY_LIST_STATE] = "SELECT seq, " PG_DELIVERY_COLS " FROM deliveries WHERE webhook_id = $1"
                               " AND state = $4 AND seq < $2 ORDER BY seq DESC LIMIT $3",
    [ST_DELIVERY_ABANDON] = "UPDATE deliveries SET state = 2, next_at = NULL, last_error = $2"
                            " WHERE webhook_id = $1 AND state = 0",
    [ST_DELIVERY_SWEEP] = "DELETE FROM deliveries"
                          " WHERE seq IN (SELECT seq FROM deliveries WHERE state != 0 AND created_at < $1 LIMIT $2)",
    [ST_DELIVERY_CLAIM] = "UPDATE deliveries SET next_at = $3, claimed_by = $4"
                          " WHERE seq = $1 AND state = 0 AND next_at <= $2",
    [ST_DELIVERY_RELEASE] = "UPDATE deliveries SET next_at = $2, claimed_by = NULL WHERE claimed_by = $1 AND state = 0",
};

/* The list variants do not all mention every parameter, so their types are declared: text, bigint, int,
 * text, bigint, bigint (the OIDs of pg_type). */
static const Oid list_param_types[6] = {25, 20, 23, 25, 20, 20};
/* ST_UPDATE's: text for the fixed columns it does not name (but id, in its WHERE), the rest left to the server. */
#define PG_UPDATE_TYPE(name, kind, n, fixed) (fixed) && (n) != 1 ? 25 : 0,
static const Oid update_param_types[32] = {AD_JOB_COLUMNS(PG_UPDATE_TYPE) 0, 0};

struct pg_store {
    struct ad_store base;
    char *url;
    char node[17]; /* this process's id in announcements: 16 hex characters */
};

static int64_t col_INT64(const PGresult *r, int row, int col);

/* What a pending result is checked for when it is collected. */
enum pg_check {
    CHECK_NONE,
    CHECK_ROW,      /* the statement must have touched a row */
    CHECK_COMMIT,   /* the server must have committed, not rolled back */
    CHECK_SEQ,      /* the counter read at begin: its row sets the batch's seq */
    CHECK_PREFETCH, /* a job read ahead (pg_job_prefetch): its result goes to prefetch slot stmt */
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
 * types, in lease order (priority, then cseq), as the first lease of the batch read it, kept exact by every
 * write of a job in the batch. Leases after the first take from it without a round trip.
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

struct ad_conn {
    struct pg_store *s;
    PGconn *pg;
    unsigned char prepared[ST__COUNT]; /* 0 not, 1 sent (result pending), 2 known to exist */
    int broken;                        /* the pipeline lost track of its results: reset before the next use */
    int down;                          /* reconnecting failed; logged once per outage */
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

static void tx_end(struct ad_conn *c);

/* ---- errors ---- */

/*
 * Losing the server, the server shutting down or running out of resources, and a serialization failure or
 * deadlock are transient: 503, try again. Anything else is a bug in a statement or in this file.
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
    if (sqlstate_lost(state) || strncmp(state, "53", 2) == 0 || strcmp(state, "40001") == 0 ||
        strcmp(state, "40P01") == 0)
        return AD_E_UNAVAILABLE;
    return AD_E_INTERNAL;
}

/* Log msg (libpq's messages end in a newline) with what failed. */
static void log_failure(const char *what, const char *msg, const char *state)
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
static ad_err fail_result(struct ad_conn *c, const PGresult *r, const char *what)
{
    const char *state = PQresultErrorField(r, PG_DIAG_SQLSTATE);
    const char *msg = PQresultErrorField(r, PG_DIAG_MESSAGE_PRIMARY);
    log_failure(what, msg != NULL ? msg : PQerrorMessage(c->pg), state);
    /* The server is closing this connection: the rest of its results would only say so again. */
    if (PQstatus(c->pg) != CONNECTION_OK || (state != NULL && sqlstate_lost(state)))
        c->broken = 1;
    return map_sqlstate(c->pg, state);
}

/* libpq could not send or receive: the connection is gone or unusable. */
static ad_err fail_conn(struct ad_conn *c, const char *what)
{
    log_failure(what, PQerrorMessage(c->pg), NULL);
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

static ad_err send_sync(struct ad_conn *c)
{
    if (!PQpipelineSync(c->pg))
        return fail_conn(c, "send sync");
    pend_push(c, (struct pg_pending){.kind = PEND_SYNC, .what = "sync"});
    return AD_E_OK;
}

/* Ask the server for the results so far without ending the pipeline, and send everything queued. */
static ad_err send_flush(struct ad_conn *c)
{
    if (!PQsendFlushRequest(c->pg) || PQflush(c->pg) != 0)
        return fail_conn(c, "send flush request");
    return AD_E_OK;
}

/*
 * Collect the oldest pending result; *out (when not NULL) receives a successful query's result, which the
 * caller clears. A failure is logged once (later statements of the pipeline only report that they were
 * skipped) and poisons the open transaction.
 */
static ad_err collect(struct ad_conn *c, PGresult **out)
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
        e = fail_conn(c, p.what);
        pend_forget(c);
    } else if (p.kind == PEND_SYNC) {
        if (PQresultStatus(r) != PGRES_PIPELINE_SYNC) {
            e = fail_conn(c, PQstatus(c->pg) != CONNECTION_OK ? "connection lost" : "pipeline out of step at a sync");
            pend_forget(c);
        }
        PQclear(r);
        r = NULL;
    } else {
        ExecStatusType status = PQresultStatus(r);
        if (status == PGRES_PIPELINE_ABORTED)
            e = c->poison != AD_E_OK ? c->poison : AD_E_INTERNAL;
        else if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK)
            e = fail_result(c, r, p.what);
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
                c->seq_begin = col_INT64(r, 0, 0);
                /* Never below what this connection handed out before: a rolled-back batch leaves a gap. */
                if (c->seq_begin > c->seq)
                    c->seq = c->seq_begin;
                c->seq_known = 1;
            }
        }
        if (p.kind == PEND_PREPARE)
            c->prepared[p.stmt] = e == AD_E_OK ? 2 : 0;
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
            e = fail_conn(c, "pipeline out of step after a result");
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
static ad_err drain(struct ad_conn *c, size_t keep)
{
    ad_err first = AD_E_OK;
    while (c->npend > keep) {
        ad_err e = collect(c, NULL);
        if (first == AD_E_OK)
            first = e;
    }
    return first;
}

/* Send statement id with its parameters, preparing it first on this connection if it is not yet. */
static ad_err send_stmt(struct ad_conn *c, enum pg_stmt id, int nparams, const char *const *values, enum pg_check check,
                        const char *what)
{
    char name[16];
    snprintf(name, sizeof(name), "s%d", (int)id);
    int list = id >= ST_LIST && id <= ST_LIST_LAST;
    int ntypes = list ? 6 : id == ST_UPDATE ? 32 : 0;
    const Oid *types = list ? list_param_types : id == ST_UPDATE ? update_param_types : NULL;
    /* A list by updatedAfter is planned for its own parameters each time: whether jobs_updated (few jobs updated
     * since) or the walk by cseq (many) is cheaper depends on the time, and a prepared statement's generic plan,
     * which PostgreSQL may switch to after five runs, knows neither. */
    if (list && ((int)(id - ST_LIST) & PG_LIST_UPDATED) != 0) {
        if (!PQsendQueryParams(c->pg, stmt_sql[id], nparams, types, values, NULL, NULL, 0))
            return fail_conn(c, what);
        pend_push(c, (struct pg_pending){.kind = PEND_QUERY, .check = check, .what = what});
        return AD_E_OK;
    }
    if (c->prepared[id] == 0) {
        if (!PQsendPrepare(c->pg, name, stmt_sql[id], ntypes, types))
            return fail_conn(c, "send prepare");
        pend_push(c, (struct pg_pending){.kind = PEND_PREPARE, .stmt = id, .what = "prepare"});
        c->prepared[id] = 1;
    }
    if (!PQsendQueryPrepared(c->pg, name, nparams, values, NULL, NULL, 0))
        return fail_conn(c, what);
    pend_push(c, (struct pg_pending){.kind = PEND_QUERY, .check = check, .what = what});
    /* Every statement but a SELECT may write a row (a SELECT here only reads, locks or notifies). */
    if (strncmp(stmt_sql[id], "SELECT", 6) != 0)
        c->writes++;
    return AD_E_OK;
}

/* ---- parameters and rows ---- */

#define PG_MAX_PARAMS 36

/* Parameters in text format; numbers are formatted into num. NULL values are SQL NULLs. */
struct pg_params {
    int n;
    const char *v[PG_MAX_PARAMS];
    char num[PG_MAX_PARAMS][24];
};

static void param_TEXT(struct pg_params *p, const char *v)
{
    p->v[p->n++] = v;
}

static void param_INT64(struct pg_params *p, int64_t v)
{
    snprintf(p->num[p->n], sizeof(p->num[p->n]), "%lld", (long long)v);
    p->v[p->n] = p->num[p->n];
    p->n++;
}

static void param_INT(struct pg_params *p, int v)
{
    param_INT64(p, v);
}

static void param_PROG(struct pg_params *p, int v)
{
    if (v >= 0)
        param_INT64(p, v);
    else
        param_TEXT(p, NULL);
}

static void param_TIME(struct pg_params *p, int64_t v)
{
    if (v != 0)
        param_INT64(p, v);
    else
        param_TEXT(p, NULL);
}

/* The job's columns as parameters $1..$30, seq as $31. Text is not copied: the job must outlive the send. */
static void param_job(struct pg_params *p, const struct ad_job *j, int64_t seq)
{
#define PG_PARAM(name, kind, n, fixed) param_##kind(p, j->name);
    AD_JOB_COLUMNS(PG_PARAM)
#undef PG_PARAM
    param_INT64(p, seq);
}

static char *col_TEXT(const PGresult *r, int row, int i)
{
    return PQgetisnull(r, row, i) ? NULL : ad_strndup(PQgetvalue(r, row, i), (size_t)PQgetlength(r, row, i));
}

static int64_t col_INT64(const PGresult *r, int row, int i)
{
    return PQgetisnull(r, row, i) ? 0 : strtoll(PQgetvalue(r, row, i), NULL, 10);
}

static int col_INT(const PGresult *r, int row, int i)
{
    return (int)col_INT64(r, row, i);
}

static int col_PROG(const PGresult *r, int row, int i)
{
    return PQgetisnull(r, row, i) ? -1 : col_INT(r, row, i);
}

static int64_t col_TIME(const PGresult *r, int row, int i)
{
    return col_INT64(r, row, i);
}

/* A new job from a row of a PG_SELECT_JOB statement; the caller frees. */
static struct ad_job *read_job(const PGresult *r, int row)
{
    struct ad_job *j = ad_job_new();
#define PG_READ(name, kind, n, fixed) j->name = col_##kind(r, row, COL_##name);
    AD_JOB_COLUMNS(PG_READ)
#undef PG_READ
    j->seq = col_INT64(r, row, COL_seq);
    j->cseq = col_INT64(r, row, COL_cseq);
    j->created_seq = col_INT64(r, row, COL_created_seq);
    j->started_seq = col_INT64(r, row, COL_started_seq);
    return j;
}

/* The text[] literal of n strings: each quoted, '"' and '\' escaped. The caller frees. */
static char *text_array(const char *const *v, size_t n)
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
static PGconn *dial(struct pg_store *s, char *err, size_t errlen)
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
static int revive(struct ad_conn *c)
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
            log_failure("reconnect", PQerrorMessage(c->pg), NULL);
        c->down = 1;
        return -1;
    }
    if (PQpipelineStatus(c->pg) == PQ_PIPELINE_OFF && !PQenterPipelineMode(c->pg)) {
        fail_conn(c, "enter pipeline mode");
        return -1;
    }
    if (c->down)
        ad_info("store: reconnected to PostgreSQL");
    c->down = 0;
    return 0;
}

static void ids_clear(struct ad_conn *c)
{
    for (size_t i = 0; i < c->nids; i++)
        free(c->ids[i]);
    c->nids = c->ids_savepoint = 0;
}

static void pg_disconnect(struct ad_conn *c)
{
    if (c == NULL)
        return;
    PQfinish(c->pg);
    ids_clear(c);
    ad_hook_cache_drop(&c->hooks);
    tx_end(c);
    free(c->pool.rows);
    free(c->pre);
    free(c->ids);
    free(c->pend);
    free(c);
}

static struct ad_conn *pg_connect(struct ad_store *s, char *err, size_t errlen)
{
    struct pg_store *ps = (struct pg_store *)s;
    PGconn *pg = dial(ps, err, errlen);
    if (pg == NULL)
        return NULL;
    if (!PQenterPipelineMode(pg)) {
        snprintf(err, errlen, "enter pipeline mode: %s", PQerrorMessage(pg));
        PQfinish(pg);
        return NULL;
    }
    struct ad_conn *c = ad_calloc(1, sizeof(*c));
    c->s = ps;
    c->pg = pg;
    return c;
}

/*
 * Run one statement and wait for its result (*res, cleared by the caller; NULL on error). Inside a
 * transaction it goes out with a flush request, and the results of the writes sent before it are collected
 * first: an error among them is the answer. Outside one it goes out with a sync, so it commits on its own;
 * a read that finds the connection lost is tried again once on a fresh one.
 */
static ad_err query(struct ad_conn *c, enum pg_stmt id, const struct pg_params *p, PGresult **res, const char *what)
{
    *res = NULL;
    if (c->in_tx) {
        if (c->poison != AD_E_OK)
            return c->poison;
        ad_err e = send_stmt(c, id, p->n, p->v, CHECK_NONE, what);
        if (e == AD_E_OK)
            e = send_flush(c);
        if (e == AD_E_OK)
            e = drain(c, 1);
        if (e == AD_E_OK)
            e = collect(c, res);
        if (e != AD_E_OK && c->poison == AD_E_OK)
            c->poison = e;
        return e;
    }
    int retry = strncmp(stmt_sql[id], "SELECT", 6) == 0;
    for (;;) {
        if (revive(c) != 0)
            return AD_E_UNAVAILABLE;
        ad_err e = send_stmt(c, id, p->n, p->v, CHECK_NONE, what);
        if (e == AD_E_OK)
            e = send_sync(c);
        if (e == AD_E_OK && PQflush(c->pg) != 0)
            e = fail_conn(c, what);
        /* Everything sent is collected, through the sync, so the pipeline is empty for the next call:
         * [the prepare,] the statement, the sync. */
        if (e == AD_E_OK)
            e = drain(c, 2);
        if (c->npend == 2) {
            ad_err q = collect(c, res);
            if (e == AD_E_OK)
                e = q;
        }
        ad_err d = drain(c, 0);
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
static ad_err send_write(struct ad_conn *c, enum pg_stmt id, const struct pg_params *p, enum pg_check check,
                         const char *what)
{
    if (c->poison != AD_E_OK)
        return c->poison;
    ad_err e = send_stmt(c, id, p->n, p->v, check, what);
    if (e == AD_E_OK && c->npend >= PG_MAX_PENDING) {
        e = send_flush(c);
        if (e == AD_E_OK)
            e = drain(c, 0);
    }
    if (e != AD_E_OK && c->poison == AD_E_OK)
        c->poison = e;
    return e;
}

/* ---- transactions ---- */

/* End the transaction on the server whatever state it is in, and collect every pending result. */
static void rollback_wire(struct ad_conn *c)
{
    if (c->broken || PQstatus(c->pg) != CONNECTION_OK) {
        pend_forget(c);
        return;
    }
    /* The sync ends an aborted pipeline; only then does a ROLLBACK run instead of being skipped. */
    if (send_sync(c) == AD_E_OK && PQflush(c->pg) == 0)
        drain(c, 0);
    else
        pend_forget(c);
    if (c->broken || PQtransactionStatus(c->pg) == PQTRANS_IDLE)
        return;
    if (send_stmt(c, ST_ROLLBACK, 0, NULL, CHECK_NONE, "rollback") == AD_E_OK && send_sync(c) == AD_E_OK &&
        PQflush(c->pg) == 0)
        drain(c, 0);
    else
        pend_forget(c);
}

/* Forget the jobs read ahead: every one (id NULL, a sweep or the transaction's end) or id's, written. */
static void prefetch_drop(struct ad_conn *c, const char *id)
{
    for (size_t i = 0; i < c->npre; i++) {
        struct pg_prefetch *pf = &c->pre[i];
        if (pf->state == PRE_STALE || (id != NULL && strcmp(pf->id, id) != 0))
            continue;
        PQclear(pf->res);
        pf->res = NULL;
        pf->state = PRE_STALE;
    }
}

static void pool_drop(struct pg_pool *pl)
{
    for (size_t i = 0; i < pl->n; i++)
        ad_job_free(pl->rows[i]);
    for (size_t i = 0; i < pl->ntypes; i++)
        free(pl->type[i]);
    free(pl->type);
    free(pl->tenant);
    free(pl->types);
    struct ad_job **rows = pl->rows;
    size_t cap = pl->cap;
    *pl = (struct pg_pool){.rows = rows, .cap = cap};
}

static void tx_end(struct ad_conn *c)
{
    pool_drop(&c->pool);
    prefetch_drop(c, NULL);
    for (size_t i = 0; i < c->npre; i++)
        free(c->pre[i].id);
    c->npre = 0;
    c->in_tx = 0;
    c->auto_tx = 0;
    c->poison = AD_E_OK;
    ids_clear(c);
    ad_hook_cache_drop(&c->hooks);
}

/*
 * BEGIN, take the global write lock and read the counter, all only sent: the batch's first read collects
 * them with its own result (one round trip), and the first seq handed out waits for the counter (next_seq).
 */
static ad_err begin_once(struct ad_conn *c)
{
    c->in_tx = 1;
    c->poison = AD_E_OK;
    c->seq_known = 0;
    c->seq_begin = c->seq;
    ad_err e = send_stmt(c, ST_BEGIN, 0, NULL, CHECK_NONE, "begin");
    if (e == AD_E_OK)
        e = send_stmt(c, ST_WRITE_LOCK, 0, NULL, CHECK_NONE, "take the write lock");
    if (e == AD_E_OK)
        e = send_stmt(c, ST_COUNTER_LOCK, 0, NULL, CHECK_SEQ, "read the seq counter");
    if (e == AD_E_OK)
        e = send_flush(c);
    if (e != AD_E_OK) {
        rollback_wire(c);
        tx_end(c);
    }
    return e;
}

/* The next seq of the open batch, once begin's counter read is in. */
static ad_err next_seq(struct ad_conn *c, int64_t *seq)
{
    if (!c->seq_known) {
        ad_err e = c->poison != AD_E_OK ? c->poison : send_flush(c);
        if (e == AD_E_OK)
            e = drain(c, 0);
        if (e == AD_E_OK && !c->seq_known)
            e = AD_E_INTERNAL;
        if (e != AD_E_OK) {
            if (c->poison == AD_E_OK)
                c->poison = e;
            return e;
        }
    }
    *seq = ++c->seq;
    return AD_E_OK;
}

static ad_err pg_begin(struct ad_conn *c)
{
    if (c->in_tx) {
        ad_error("store: begin inside a transaction");
        return AD_E_INTERNAL;
    }
    tx_end(c);
    /* A server that restarted has closed this connection: notice it now, while the batch can still go to a
     * fresh connection (begin waits for nothing, so it would notice too late). Non-blocking reads: the first
     * may only take the server's goodbye message, the second then sees the end of the stream. */
    for (int i = 0; i < 2 && !c->broken && c->npend == 0; i++)
        if (!PQconsumeInput(c->pg) || PQstatus(c->pg) != CONNECTION_OK)
            c->broken = 1;
    if (revive(c) != 0)
        return AD_E_UNAVAILABLE;
    ad_err e = begin_once(c);
    /* A server restart is only noticed on the first use after it: one more try on a fresh connection. */
    if (e == AD_E_UNAVAILABLE && (c->broken || PQstatus(c->pg) != CONNECTION_OK)) {
        if (revive(c) != 0)
            return AD_E_UNAVAILABLE;
        e = begin_once(c);
    }
    return e;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Announce the changed jobs: "<node>\n<entry>\n<entry>..." (ids_add), in as many notifications as the size limit
 * needs. */
static ad_err send_announcements(struct ad_conn *c)
{
    if (c->nids == 0)
        return AD_E_OK;
    qsort(c->ids, c->nids, sizeof(*c->ids), cmp_str);
    struct ad_buf b;
    ad_buf_init(&b, SIZE_MAX);
    ad_err e = AD_E_OK;
    size_t head = strlen(c->s->node);
    for (size_t i = 0; i <= c->nids && e == AD_E_OK; i++) {
        size_t len = i < c->nids ? strlen(c->ids[i]) : 0;
        if (i < c->nids && ((i > 0 && strcmp(c->ids[i], c->ids[i - 1]) == 0) || head + 1 + len > PG_NOTIFY_MAX))
            continue; /* a repeat, or an id that could never fit (ids are short) */
        if (b.len > 0 && (i == c->nids || b.len + 1 + len > PG_NOTIFY_MAX)) {
            struct pg_params p = {0};
            param_TEXT(&p, b.data);
            e = send_write(c, ST_NOTIFY, &p, CHECK_NONE, "announce changes");
            b.len = 0;
        }
        if (i < c->nids) {
            if (b.len == 0)
                ad_buf_append(&b, c->s->node, head);
            AD_BUF_LIT(&b, "\n");
            ad_buf_append(&b, c->ids[i], len);
        }
    }
    ad_buf_free(&b);
    return e;
}

/*
 * Everything left goes out at once: the new counter, the announcements, COMMIT and a sync; then every
 * pending result is collected. Any error on the way (including one that poisoned the batch earlier) means
 * nothing was committed: the transaction is rolled back and the error returned.
 */
static ad_err pg_commit(struct ad_conn *c)
{
    if (!c->in_tx) {
        ad_error("store: commit outside a transaction");
        return AD_E_INTERNAL;
    }
    ad_err e = c->poison;
    if (e == AD_E_OK && c->seq != c->seq_begin) {
        struct pg_params p = {0};
        param_INT64(&p, c->seq);
        e = send_write(c, ST_COUNTER_SET, &p, CHECK_ROW, "advance the counter");
    }
    if (e == AD_E_OK)
        e = send_announcements(c);
    if (e == AD_E_OK)
        e = send_stmt(c, ST_COMMIT, 0, NULL, CHECK_COMMIT, "commit");
    if (e == AD_E_OK)
        e = send_sync(c);
    if (e == AD_E_OK && PQflush(c->pg) != 0)
        e = fail_conn(c, "commit");
    if (e == AD_E_OK) {
        e = drain(c, 0);
        if (e == AD_E_OK && c->poison != AD_E_OK)
            e = c->poison;
    }
    if (e != AD_E_OK)
        rollback_wire(c);
    tx_end(c);
    return e;
}

static void pg_rollback(struct ad_conn *c)
{
    if (!c->in_tx)
        return;
    rollback_wire(c);
    tx_end(c);
}

static ad_err tx_stmt(struct ad_conn *c, enum pg_stmt id, const char *what)
{
    if (!c->in_tx) {
        ad_error("store: %s outside a transaction", what);
        return AD_E_INTERNAL;
    }
    struct pg_params p = {0};
    return send_write(c, id, &p, CHECK_NONE, what);
}

/*
 * The writes sent on c so far, whether or not their results are in. With it the writer needs no savepoint per
 * operation: an operation that fails before sending a write leaves nothing to undo, and a write's own failure
 * poisons the whole batch anyway (a pipeline skips everything after an error until its sync), so a savepoint
 * could undo nothing the batch would keep. It saved two statements and a subtransaction per operation.
 */
static int64_t pg_changes(struct ad_conn *c)
{
    return c->writes;
}

static ad_err pg_savepoint(struct ad_conn *c)
{
    ad_err e = tx_stmt(c, ST_SAVEPOINT, "savepoint");
    if (e == AD_E_OK)
        c->ids_savepoint = c->nids;
    return e;
}

static ad_err pg_release(struct ad_conn *c)
{
    return tx_stmt(c, ST_RELEASE, "release");
}

static void pg_rollback_to(struct ad_conn *c)
{
    /* ROLLBACK TO keeps the savepoint open; release it so the next operation's savepoint is not nested. */
    if (tx_stmt(c, ST_ROLLBACK_TO, "rollback to savepoint") == AD_E_OK)
        tx_stmt(c, ST_RELEASE, "release after rollback");
    while (c->nids > c->ids_savepoint)
        free(c->ids[--c->nids]);
    /* A webhook written by the undone operation may be in a remembered lookup. */
    ad_hook_cache_drop(&c->hooks);
}

/* A write outside begin/commit is a transaction of its own (as SQLite's autocommit): it takes the write
 * lock and hands out seqs like any batch. *own tells auto_end whether to end it. */
static ad_err auto_begin(struct ad_conn *c, int *own)
{
    *own = !c->in_tx;
    if (!*own)
        return AD_E_OK;
    ad_err e = pg_begin(c);
    if (e == AD_E_OK)
        c->auto_tx = 1;
    return e;
}

static ad_err auto_end(struct ad_conn *c, int own, ad_err e)
{
    if (!own)
        return e;
    if (e == AD_E_OK)
        return pg_commit(c);
    pg_rollback(c);
    return e;
}

/* One pipelined write, in its own transaction when none is open. */
static ad_err write1(struct ad_conn *c, enum pg_stmt id, const struct pg_params *p, enum pg_check check,
                     const char *what)
{
    int own;
    ad_err e = auto_begin(c, &own);
    if (e != AD_E_OK)
        return e;
    return auto_end(c, own, send_write(c, id, p, check, what));
}

/* ---- jobs ---- */

/* Remember a changed job for the commit's announcement: "<id>", or "<id>\t<tenant>\t<type>" while it is queued
 * (tenants and types hold no control characters). A later change of the same job in the batch replaces it. */
static void ids_add(struct ad_conn *c, const struct ad_job *job)
{
    char *entry =
        job->status == AD_QUEUED ? ad_asprintf("%s\t%s\t%s", job->id, job->tenant, job->type) : ad_strdup(job->id);
    size_t idlen = strlen(job->id);
    for (size_t i = c->nids; i > c->ids_savepoint && i + 8 > c->nids; i--) {
        char *prev = c->ids[i - 1];
        if (strncmp(prev, job->id, idlen) == 0 && (prev[idlen] == '\0' || prev[idlen] == '\t')) {
            free(prev);
            c->ids[i - 1] = entry;
            return;
        }
    }
    if (c->nids == c->ids_cap) {
        c->ids_cap = c->ids_cap ? c->ids_cap * 2 : 64;
        c->ids = ad_realloc(c->ids, c->ids_cap * sizeof(*c->ids));
    }
    c->ids[c->nids++] = entry;
}

/* Start the write of a row that takes the next seq: in the open batch, or in a transaction of its own (*own,
 * ended with auto_end). */
static ad_err begin_seq_write(struct ad_conn *c, int *own, int64_t *seq)
{
    ad_err e = auto_begin(c, own);
    if (e != AD_E_OK)
        return e;
    e = next_seq(c, seq);
    return e != AD_E_OK ? auto_end(c, *own, e) : AD_E_OK;
}

/* Whether a ranks before b in lease order: higher priority first, then lower cseq. */
static int lease_before(const struct ad_job *a, const struct ad_job *b)
{
    return a->priority != b->priority ? a->priority > b->priority : a->cseq < b->cseq;
}

/*
 * Keep the pool exact after job was written: its old row leaves the pool, and if it is now a queued job the
 * pool's lease query would find, it goes in at its place, unless it ranks after the pool's last job and the
 * pool does not hold the whole queue (it is then beyond the head the pool holds, as the rows never read are).
 */
static void pool_note(struct ad_conn *c, const struct ad_job *job)
{
    struct pg_pool *pl = &c->pool;
    if (!pl->valid)
        return;
    for (size_t i = 0; i < pl->n; i++)
        if (strcmp(pl->rows[i]->id, job->id) == 0) {
            ad_job_free(pl->rows[i]);
            memmove(pl->rows + i, pl->rows + i + 1, (pl->n - i - 1) * sizeof(*pl->rows));
            pl->n--;
            break;
        }
    if (job->status != AD_QUEUED || strcmp(job->tenant, pl->tenant) != 0 ||
        (job->run_at != 0 && job->run_at > pl->horizon))
        return;
    size_t t = 0;
    while (t < pl->ntypes && strcmp(pl->type[t], job->type) != 0)
        t++;
    if (t == pl->ntypes)
        return;
    size_t at = pl->n;
    while (at > 0 && lease_before(job, pl->rows[at - 1]))
        at--;
    if (at == pl->n && !pl->exhaustive)
        return;
    if (pl->n == pl->cap) {
        pl->cap = pl->cap ? pl->cap * 2 : 64;
        pl->rows = ad_realloc(pl->rows, pl->cap * sizeof(*pl->rows));
    }
    memmove(pl->rows + at + 1, pl->rows + at, (pl->n - at) * sizeof(*pl->rows));
    pl->rows[at] = ad_job_dup(job);
    pl->n++;
}

/* Insert (ST_INSERT) or update (ST_UPDATE) every column of job with the batch's next seq, and remember it for
 * the commit's announcement. seq and cseq come from the counter: cseq is the seq of the insert. */
static ad_err write_job(struct ad_conn *c, struct ad_job *job, enum pg_stmt id)
{
    int own;
    int64_t seq;
    ad_err e = begin_seq_write(c, &own, &seq);
    if (e != AD_E_OK)
        return e;
    struct pg_params p = {0};
    param_job(&p, job, seq);
    int insert = id == ST_INSERT;
    prefetch_drop(c, job->id);
    int64_t started = job->started_seq == AD_SEQ_OF_THIS_WRITE ? seq : job->started_seq;
    if (!insert)
        param_TIME(&p, started); /* $32 */
    e = send_write(c, id, &p, insert ? CHECK_NONE : CHECK_ROW, insert ? "insert job" : "update job");
    if (e == AD_E_OK)
        ids_add(c, job);
    e = auto_end(c, own, e);
    if (e == AD_E_OK) {
        job->seq = seq;
        if (insert)
            job->cseq = job->created_seq = seq;
        else
            job->started_seq = started;
        if (c->in_tx)
            pool_note(c, job);
    }
    return e;
}

static ad_err pg_job_insert(struct ad_conn *c, struct ad_job *job)
{
    return write_job(c, job, ST_INSERT);
}

/*
 * Inside a batch the update is only sent, so a missing row is found at the next collection: it poisons the
 * batch with AD_E_NOT_FOUND. Every caller has read the job in the same transaction, under the write lock,
 * so the row cannot be missing; outside a transaction the answer is AD_E_NOT_FOUND as in SQLite.
 */
static ad_err pg_job_update(struct ad_conn *c, struct ad_job *job)
{
    return write_job(c, job, ST_UPDATE);
}

/*
 * Run statement id and read every row of its result into a new array of elem-byte elements at *items (read
 * fills one from a row), *n of them. The array has room for one more, so it is never empty.
 */
static ad_err fetch_rows(struct ad_conn *c, enum pg_stmt id, const struct pg_params *p, void *items, size_t *n,
                         size_t elem, void (*read)(const PGresult *r, int row, void *slot), const char *what)
{
    PGresult *r;
    ad_err e = query(c, id, p, &r, what);
    if (e != AD_E_OK)
        return e;
    int rows = PQntuples(r);
    char *arr = ad_calloc((size_t)rows + 1, elem); /* the caller's array: its type is the caller's own */
    for (int i = 0; i < rows; i++)
        read(r, i, arr + (size_t)i * elem);
    memcpy(items, &arr, sizeof(arr));
    *n = (size_t)rows;
    PQclear(r);
    return AD_E_OK;
}

static void read_job_slot(const PGresult *r, int row, void *slot)
{
    *(struct ad_job **)slot = read_job(r, row);
}

/* Run a PG_SELECT_JOB statement into out. */
static ad_err fetch_jobs(struct ad_conn *c, enum pg_stmt id, const struct pg_params *p, struct ad_job_list *out,
                         const char *what)
{
    *out = (struct ad_job_list){0};
    return fetch_rows(c, id, p, &out->items, &out->n, sizeof(*out->items), read_job_slot, what);
}

/*
 * Read job id ahead, inside the open batch: the read is only sent, and a job_get of id later in the batch takes
 * its result, unless the job has been written since. The writer sends the reads of a whole chunk of operations
 * at once, before applying any of them, so that they cost one round trip instead of one each.
 */
static void pg_job_prefetch(struct ad_conn *c, const char *id)
{
    if (!c->in_tx || c->poison != AD_E_OK || c->broken || c->npre >= PG_MAX_PREFETCH)
        return;
    for (size_t i = c->npre; i-- > 0;)
        if (c->pre[i].state != PRE_STALE && strcmp(c->pre[i].id, id) == 0)
            return;
    if (c->npend >= PG_MAX_PENDING && (send_flush(c) != AD_E_OK || drain(c, 0) != AD_E_OK))
        return;
    const char *v[2] = {id, NULL};
    if (send_stmt(c, ST_GET, 2, v, CHECK_PREFETCH, "read a job ahead") != AD_E_OK) {
        if (c->poison == AD_E_OK)
            c->poison = AD_E_UNAVAILABLE;
        return;
    }
    if (c->npre == c->pre_cap) {
        c->pre_cap = c->pre_cap ? c->pre_cap * 2 : 64;
        c->pre = ad_realloc(c->pre, c->pre_cap * sizeof(*c->pre));
    }
    c->pre[c->npre] = (struct pg_prefetch){.id = ad_strdup(id), .state = PRE_SENT};
    c->pend[c->head + c->npend - 1].stmt = (int)c->npre++;
}

/* job_get from a read sent ahead: 1 with *e set when one answers it, 0 when none does. */
static int prefetched_get(struct ad_conn *c, const char *tenant, const char *id, struct ad_job **out, ad_err *e)
{
    struct pg_prefetch *pf = NULL;
    for (size_t i = c->npre; i-- > 0 && pf == NULL;)
        if (c->pre[i].state != PRE_STALE && strcmp(c->pre[i].id, id) == 0)
            pf = &c->pre[i];
    if (pf == NULL || c->poison != AD_E_OK)
        return 0;
    if (pf->state == PRE_SENT) {
        /* Its result comes after those of everything sent before it: collect up to it. */
        *e = send_flush(c);
        while (*e == AD_E_OK && pf->state == PRE_SENT && c->npend > 0)
            *e = collect(c, NULL);
        if (*e != AD_E_OK)
            return 1;
        if (pf->state != PRE_READY)
            return 0;
    }
    if (PQntuples(pf->res) == 0) {
        *e = AD_E_NOT_FOUND;
        return 1;
    }
    struct ad_job *j = read_job(pf->res, 0);
    if (tenant != NULL && strcmp(j->tenant, tenant) != 0) {
        ad_job_free(j);
        *e = AD_E_NOT_FOUND;
        return 1;
    }
    *out = j;
    *e = AD_E_OK;
    return 1;
}

static ad_err pg_job_get(struct ad_conn *c, const char *tenant, const char *id, struct ad_job **out)
{
    *out = NULL;
    ad_err pe;
    if (c->in_tx && prefetched_get(c, tenant, id, out, &pe))
        return pe;
    struct pg_params p = {0};
    param_TEXT(&p, id);
    param_TEXT(&p, tenant);
    struct ad_job_list l;
    ad_err e = fetch_jobs(c, ST_GET, &p, &l, "get job");
    if (e == AD_E_OK && l.n == 0)
        e = AD_E_NOT_FOUND;
    if (e == AD_E_OK) {
        *out = l.items[0];
        l.n = 0;
    }
    ad_job_list_free(&l);
    return e;
}

static ad_err pg_job_list(struct ad_conn *c, const struct ad_list_query *q, struct ad_job_list *out)
{
    *out = (struct ad_job_list){0};
    if (q->tenant == NULL) {
        ad_error("store: job_list without a tenant");
        return AD_E_INTERNAL;
    }
    int variant = (q->has_status ? PG_LIST_STATUS : 0) | (q->type != NULL ? PG_LIST_TYPE : 0) |
                  (q->updated_after != 0 ? PG_LIST_UPDATED : 0);
    /* Every variant numbers its parameters alike (their types are declared), so all are passed. */
    struct pg_params p = {0};
    param_TEXT(&p, q->tenant);
    param_INT64(&p, q->before_cseq > 0 ? q->before_cseq : INT64_MAX);
    param_INT(&p, (int)q->status);
    param_TEXT(&p, q->type);
    param_INT64(&p, q->updated_after);
    param_INT(&p, q->limit);
    return fetch_jobs(c, (enum pg_stmt)(ST_LIST + variant), &p, out, "list jobs");
}

static ad_err pg_job_changes(struct ad_conn *c, const char *tenant, int64_t since, int limit, struct ad_job_list *out)
{
    struct pg_params p = {0};
    if (tenant != NULL)
        param_TEXT(&p, tenant);
    param_INT64(&p, since);
    param_INT(&p, limit);
    return fetch_jobs(c, tenant != NULL ? ST_CHANGES : ST_CHANGES_ALL, &p, out, "job changes");
}

/* One query for all the types; the jobs it returns stay locked until the transaction ends. */
/*
 * Serve a lease from the pool when it answers it exactly: it holds the head of the same queue, due by now, and
 * limit jobs due by now are in it, or it holds the whole queue. 1 with *out filled (the jobs leave the pool),
 * else 0.
 */
static int pool_take(struct pg_pool *pl, const char *tenant, const char *arr, int64_t now, int limit,
                     struct ad_job_list *out)
{
    if (!pl->valid || now > pl->horizon || strcmp(pl->tenant, tenant) != 0 || strcmp(pl->types, arr) != 0)
        return 0;
    size_t due = 0;
    for (size_t i = 0; i < pl->n && due < (size_t)limit; i++)
        due += pl->rows[i]->run_at == 0 || pl->rows[i]->run_at <= now;
    if (due < (size_t)limit && !pl->exhaustive)
        return 0;
    out->items = ad_calloc(due + 1, sizeof(*out->items));
    out->n = 0;
    size_t keep = 0;
    for (size_t i = 0; i < pl->n; i++) {
        struct ad_job *j = pl->rows[i];
        if (out->n < due && (j->run_at == 0 || j->run_at <= now))
            out->items[out->n++] = j;
        else
            pl->rows[keep++] = j;
    }
    pl->n = keep;
    return 1;
}

/*
 * Inside a batch, the first lease reads the head of the queue, beyond what it takes, into the pool (locked like
 * the jobs it takes), and the leases after it take from the pool, which every write of a job keeps exact: one
 * round trip for the batch's leases of one queue instead of one each. Outside a batch, or when the pool cannot
 * answer, a lease reads what it takes.
 */
static ad_err pg_job_leasable(struct ad_conn *c, const char *tenant, const char *const *types, size_t ntypes,
                              int64_t now, int limit, struct ad_job_list *out)
{
    char *arr = text_array(types, ntypes);
    int pool = c->in_tx && limit > 0;
    if (pool && pool_take(&c->pool, tenant, arr, now, limit, out)) {
        free(arr);
        return AD_E_OK;
    }
    int want = limit > 0 ? limit : 0;
    int64_t until = now;
    if (pool) {
        want = limit + PG_POOL_ROWS;
        until = now + PG_POOL_HORIZON_MS;
    }
    struct pg_params p = {0};
    param_TEXT(&p, tenant);
    param_TEXT(&p, arr);
    param_INT64(&p, until);
    param_INT(&p, want);
    struct ad_job_list got;
    ad_err e = fetch_jobs(c, ST_LEASABLE, &p, pool ? &got : out, "leasable jobs");
    if (e != AD_E_OK || !pool) {
        free(arr);
        return e;
    }
    struct pg_pool *pl = &c->pool;
    pool_drop(pl);
    pl->valid = 1;
    pl->tenant = ad_strdup(tenant);
    pl->types = arr;
    pl->type = ad_calloc(ntypes + 1, sizeof(*pl->type));
    for (size_t i = 0; i < ntypes; i++)
        pl->type[i] = ad_strdup(types[i]);
    pl->ntypes = ntypes;
    pl->horizon = until;
    pl->exhaustive = got.n < (size_t)want;
    if (pl->cap < got.n) {
        pl->cap = got.n;
        pl->rows = ad_realloc(pl->rows, pl->cap * sizeof(*pl->rows));
    }
    if (got.n > 0) /* an empty queue: rows and items may both be NULL, which memcpy may not be given */
        memcpy(pl->rows, got.items, got.n * sizeof(*got.items));
    pl->n = got.n;
    got.n = 0;
    ad_job_list_free(&got);
    if (pool_take(pl, tenant, pl->types, now, limit, out))
        return AD_E_OK;
    /* Jobs due later than now fill the head the pool holds: read just what this lease takes. */
    pool_drop(pl);
    arr = text_array(types, ntypes);
    p = (struct pg_params){0};
    param_TEXT(&p, tenant);
    param_TEXT(&p, arr);
    param_INT64(&p, now);
    param_INT(&p, limit);
    e = fetch_jobs(c, ST_LEASABLE, &p, out, "leasable jobs");
    free(arr);
    return e;
}

static ad_err pg_job_running(struct ad_conn *c, struct ad_job_list *out)
{
    struct pg_params p = {0};
    return fetch_jobs(c, ST_RUNNING, &p, out, "running jobs");
}

static ad_err pg_job_scheduled(struct ad_conn *c, int64_t run_at, int64_t cseq, int limit, struct ad_job_list *out)
{
    struct pg_params p = {0};
    param_INT64(&p, run_at);
    param_INT64(&p, cseq);
    param_INT(&p, limit);
    return fetch_jobs(c, ST_SCHEDULED, &p, out, "scheduled jobs");
}

/* Run a sweep statement with (cutoff, limit) and wait for it: the caller needs the count. Adds it to *n. */
static ad_err sweep_step(struct ad_conn *c, enum pg_stmt id, int64_t cutoff, int limit, int *n, const char *what)
{
    struct pg_params p = {0};
    param_INT64(&p, cutoff);
    param_INT(&p, limit);
    PGresult *r;
    ad_err e = query(c, id, &p, &r, what);
    if (e == AD_E_OK)
        *n += (int)strtol(PQcmdTuples(r), NULL, 10);
    PQclear(r);
    return e;
}

/* One sweep statement, in the open batch or in a transaction of its own; *done_out = rows deleted. */
static ad_err sweep_alone(struct ad_conn *c, enum pg_stmt id, int64_t before, int limit, int *done_out,
                          const char *what)
{
    *done_out = 0;
    int own;
    ad_err e = auto_begin(c, &own);
    if (e != AD_E_OK)
        return e;
    int n = 0;
    e = auto_end(c, own, sweep_step(c, id, before, limit, &n, what));
    if (e == AD_E_OK)
        *done_out = n;
    return e;
}

/* The trigger jobs_tombstone_events empties the event logs of the jobs tombstoned here; foreign keys take
 * attempts and events away with the deleted jobs. acceptd_counter keeps seq above the deleted rows. */
static ad_err pg_sweep(struct ad_conn *c, int64_t now, int64_t tombstone_ms, int limit, int *done_out)
{
    *done_out = 0;
    int own;
    ad_err e = auto_begin(c, &own);
    if (e != AD_E_OK)
        return e;
    int tombstoned = 0, deleted = 0;
    prefetch_drop(c, NULL);
    pool_drop(&c->pool);
    e = sweep_step(c, ST_TOMBSTONE, now, limit, &tombstoned, "tombstone expired jobs");
    if (e == AD_E_OK)
        e = sweep_step(c, ST_DELETE, now - tombstone_ms, limit, &deleted, "delete tombstones");
    e = auto_end(c, own, e);
    if (e == AD_E_OK)
        *done_out = tombstoned + deleted;
    return e;
}

/* The counter: inside a batch, what it will be at commit. */
static ad_err pg_max_seq(struct ad_conn *c, int64_t *out)
{
    *out = 0;
    if (c->in_tx) {
        *out = c->seq;
        return AD_E_OK;
    }
    struct pg_params p = {0};
    PGresult *r;
    ad_err e = query(c, ST_MAX_SEQ, &p, &r, "max seq");
    if (e == AD_E_OK && PQntuples(r) == 1)
        *out = col_INT64(r, 0, 0);
    PQclear(r);
    return e;
}

/* ---- idempotency ---- */

static ad_err pg_idem_get(struct ad_conn *c, const char *tenant, const char *key, struct ad_idem *out)
{
    memset(out, 0, sizeof(*out));
    struct pg_params p = {0};
    param_TEXT(&p, tenant);
    param_TEXT(&p, key);
    PGresult *r;
    ad_err e = query(c, ST_IDEM_GET, &p, &r, "get idempotency record");
    if (e == AD_E_OK && PQntuples(r) == 0)
        e = AD_E_NOT_FOUND;
    if (e == AD_E_OK) {
        snprintf(out->fingerprint, sizeof(out->fingerprint), "%s", PQgetvalue(r, 0, 0));
        out->job_id = col_TEXT(r, 0, 1);
        out->created_at = col_INT64(r, 0, 2);
    }
    PQclear(r);
    return e;
}

/* Writes the record, replacing one the key already has (an expired record not yet swept). */
static ad_err pg_idem_put(struct ad_conn *c, const char *tenant, const char *key, const char *fingerprint,
                          const char *job_id, int64_t now)
{
    struct pg_params p = {0};
    param_TEXT(&p, tenant);
    param_TEXT(&p, key);
    param_TEXT(&p, fingerprint);
    param_TEXT(&p, job_id);
    param_INT64(&p, now);
    return write1(c, ST_IDEM_PUT, &p, CHECK_NONE, "put idempotency record");
}

static ad_err pg_idem_sweep(struct ad_conn *c, int64_t before, int limit, int *done_out)
{
    return sweep_alone(c, ST_IDEM_SWEEP, before, limit, done_out, "sweep idempotency records");
}

/* ---- attempts ---- */

static ad_err pg_attempt_add(struct ad_conn *c, const struct ad_job *j, int64_t ended_at, const char *outcome)
{
    struct pg_params p = {0};
    param_TEXT(&p, j->id);
    param_INT(&p, j->attempt);
    param_TEXT(&p, j->worker);
    param_INT64(&p, j->started_at);
    param_INT64(&p, ended_at);
    param_TEXT(&p, outcome);
    return write1(c, ST_ATTEMPT_ADD, &p, CHECK_NONE, "add attempt");
}

static void read_attempt(const PGresult *r, int row, void *slot)
{
    struct ad_attempt *a = slot;
    a->attempt = col_INT(r, row, 0);
    a->worker = col_TEXT(r, row, 1);
    a->started_at = col_INT64(r, row, 2);
    a->ended_at = col_TIME(r, row, 3);
    a->outcome = col_TEXT(r, row, 4);
}

static ad_err pg_attempt_list(struct ad_conn *c, const char *job_id, struct ad_attempt_list *out)
{
    memset(out, 0, sizeof(*out));
    struct pg_params p = {0};
    param_TEXT(&p, job_id);
    return fetch_rows(c, ST_ATTEMPT_LIST, &p, &out->items, &out->n, sizeof(*out->items), read_attempt, "list attempts");
}

/* ---- counts for the dashboard ---- */

static void read_count(const PGresult *r, int row, void *slot)
{
    struct ad_job_count *k = slot;
    k->type = col_TEXT(r, row, 0);
    k->status = (int)col_INT64(r, row, 1);
    k->n = col_INT64(r, row, 2);
    k->oldest = col_INT64(r, row, 3);
}

static ad_err pg_job_counts(struct ad_conn *c, const char *tenant, int limit, struct ad_job_count_list *out)
{
    memset(out, 0, sizeof(*out));
    struct pg_params p = {0};
    param_TEXT(&p, tenant);
    param_INT(&p, limit);
    return fetch_rows(c, ST_JOB_COUNTS, &p, &out->items, &out->n, sizeof(*out->items), read_count, "count jobs");
}

/* ---- job events ---- */

static ad_err pg_event_append(struct ad_conn *c, const char *job_id, int64_t seq, const char *kind, const char *data)
{
    struct pg_params p = {0};
    param_TEXT(&p, job_id);
    param_INT64(&p, seq);
    param_TEXT(&p, kind);
    param_TEXT(&p, data);
    return write1(c, ST_EVENT_APPEND, &p, CHECK_NONE, "append job event");
}

static void read_event(const PGresult *r, int row, void *slot)
{
    struct ad_event *ev = slot;
    ev->seq = col_INT64(r, row, 0);
    ev->kind = col_TEXT(r, row, 1);
    ev->data = col_TEXT(r, row, 2);
}

static ad_err pg_events_after(struct ad_conn *c, const char *job_id, int64_t after, int limit,
                              struct ad_event_list *out)
{
    memset(out, 0, sizeof(*out));
    struct pg_params p = {0};
    param_TEXT(&p, job_id);
    param_INT64(&p, after);
    param_INT(&p, limit);
    return fetch_rows(c, ST_EVENTS_AFTER, &p, &out->items, &out->n, sizeof(*out->items), read_event, "list job events");
}

/* ---- webhooks ---- */

/*
 * No-ops: PostgreSQL needs no read lock to give each statement a consistent view, and the delivery thread,
 * the one user of snapshots, claims each delivery it read with delivery_claim, which checks the row again
 * atomically before anything is sent.
 */
static ad_err pg_snapshot_begin(struct ad_conn *c)
{
    return AD_E_OK;
}

static void pg_snapshot_end(struct ad_conn *c)
{
}

static struct ad_webhook *read_webhook(const PGresult *r, int row)
{
    struct ad_webhook *w = ad_calloc(1, sizeof(*w));
    w->id = col_TEXT(r, row, 0);
    w->tenant = col_TEXT(r, row, 1);
    w->url = col_TEXT(r, row, 2);
    w->events = (unsigned)col_INT64(r, row, 3);
    w->secret = col_TEXT(r, row, 4);
    w->prev_secret = col_TEXT(r, row, 5);
    w->prev_until = col_TIME(r, row, 6);
    w->created_at = col_TIME(r, row, 7);
    w->disabled_at = col_TIME(r, row, 8);
    w->disabled_reason = col_TEXT(r, row, 9);
    return w;
}

static void read_webhook_slot(const PGresult *r, int row, void *slot)
{
    *(struct ad_webhook **)slot = read_webhook(r, row);
}

static ad_err fetch_webhooks(struct ad_conn *c, enum pg_stmt id, const struct pg_params *p, struct ad_webhook_list *out,
                             const char *what)
{
    *out = (struct ad_webhook_list){0};
    return fetch_rows(c, id, p, &out->items, &out->n, sizeof(*out->items), read_webhook_slot, what);
}

static ad_err pg_webhook_put(struct ad_conn *c, const struct ad_webhook *w)
{
    ad_hook_cache_drop(&c->hooks);
    struct pg_params p = {0};
    param_TEXT(&p, w->id);
    param_TEXT(&p, w->tenant);
    param_TEXT(&p, w->url);
    param_INT64(&p, w->events);
    param_TEXT(&p, w->secret);
    param_TEXT(&p, w->prev_secret);
    param_TIME(&p, w->prev_until);
    param_INT64(&p, w->created_at);
    param_TIME(&p, w->disabled_at);
    param_TEXT(&p, w->disabled_reason);
    return write1(c, ST_WEBHOOK_PUT, &p, CHECK_NONE, "put webhook");
}

/* The rows behind webhook_get and webhook_list; store.c remembers the transaction's lookups (ad_hooks_get,
 * ad_hooks_list): each job outcome with a callbackUrl asks for the callback secret, and the outbox for the
 * tenant's endpoints on every change. */
static ad_err pg_hooks_fetch(struct ad_conn *c, enum ad_hook_kind kind, const char *tenant, const char *id,
                             struct ad_webhook_list *out)
{
    struct pg_params p = {0};
    if (kind == AD_HOOKS_BY_ID) {
        param_TEXT(&p, id);
        param_TEXT(&p, tenant);
        return fetch_webhooks(c, ST_WEBHOOK_GET, &p, out, "get webhook");
    }
    param_TEXT(&p, tenant);
    if (kind == AD_HOOKS_CALLBACK)
        return fetch_webhooks(c, ST_WEBHOOK_CALLBACK, &p, out, "get webhook");
    param_INT(&p, kind == AD_HOOKS_ENABLED ? 1 : 0);
    return fetch_webhooks(c, ST_WEBHOOK_LIST, &p, out, "list webhooks");
}

static ad_err pg_webhook_get(struct ad_conn *c, const char *tenant, const char *id, struct ad_webhook **out)
{
    return ad_hooks_get(&c->hooks, c->in_tx, c, pg_hooks_fetch, tenant, id, out);
}

static ad_err pg_webhook_list(struct ad_conn *c, const char *tenant, int enabled_only, struct ad_webhook_list *out)
{
    return ad_hooks_list(&c->hooks, c->in_tx, c, pg_hooks_fetch, tenant, enabled_only, out);
}

/* Awaited, not only sent: the caller answers 404 for an endpoint that is not there. The endpoint's
 * deliveries go with it (foreign key). */
static ad_err pg_webhook_delete(struct ad_conn *c, const char *tenant, const char *id)
{
    ad_hook_cache_drop(&c->hooks);
    int own;
    ad_err e = auto_begin(c, &own);
    if (e != AD_E_OK)
        return e;
    struct pg_params p = {0};
    param_TEXT(&p, id);
    param_TEXT(&p, tenant);
    PGresult *r;
    e = query(c, ST_WEBHOOK_DELETE, &p, &r, "delete webhook");
    int gone = e == AD_E_OK && strcmp(PQcmdTuples(r), "0") == 0;
    PQclear(r);
    e = auto_end(c, own, e);
    return e == AD_E_OK && gone ? AD_E_NOT_FOUND : e;
}

static struct ad_delivery *read_delivery(const PGresult *r, int row)
{
    struct ad_delivery *d = ad_calloc(1, sizeof(*d));
    d->seq = col_INT64(r, row, 0);
    d->id = col_TEXT(r, row, 1);
    d->tenant = col_TEXT(r, row, 2);
    d->webhook_id = col_TEXT(r, row, 3);
    d->url = col_TEXT(r, row, 4);
    d->event_id = col_TEXT(r, row, 5);
    d->event_type = col_TEXT(r, row, 6);
    d->job_id = col_TEXT(r, row, 7);
    d->body = col_TEXT(r, row, 8);
    d->created_at = col_TIME(r, row, 9);
    d->state = (enum ad_delivery_state)col_INT(r, row, 10);
    d->attempts = col_INT(r, row, 11);
    d->next_at = col_TIME(r, row, 12);
    d->last_at = col_TIME(r, row, 13);
    d->last_status = col_INT(r, row, 14);
    d->last_error = col_TEXT(r, row, 15);
    return d;
}

static void read_delivery_slot(const PGresult *r, int row, void *slot)
{
    *(struct ad_delivery **)slot = read_delivery(r, row);
}

static ad_err fetch_deliveries(struct ad_conn *c, enum pg_stmt id, const struct pg_params *p,
                               struct ad_delivery_list *out, const char *what)
{
    *out = (struct ad_delivery_list){0};
    return fetch_rows(c, id, p, &out->items, &out->n, sizeof(*out->items), read_delivery_slot, what);
}

/* The outbox shares the jobs' counter: a delivery's seq is the next seq of the batch that writes it. */
static ad_err pg_delivery_insert(struct ad_conn *c, struct ad_delivery *d)
{
    int own;
    int64_t seq;
    ad_err e = begin_seq_write(c, &own, &seq);
    if (e != AD_E_OK)
        return e;
    struct pg_params p = {0};
    param_INT64(&p, seq);
    param_TEXT(&p, d->id);
    param_TEXT(&p, d->tenant);
    param_TEXT(&p, d->webhook_id);
    param_TEXT(&p, d->url);
    param_TEXT(&p, d->event_id);
    param_TEXT(&p, d->event_type);
    param_TEXT(&p, d->job_id);
    param_TEXT(&p, d->body);
    param_INT64(&p, d->created_at);
    param_INT(&p, (int)d->state);
    param_INT(&p, d->attempts);
    param_TIME(&p, d->next_at);
    param_TIME(&p, d->last_at);
    param_INT(&p, d->last_status);
    param_TEXT(&p, d->last_error);
    e = auto_end(c, own, send_write(c, ST_DELIVERY_INSERT, &p, CHECK_NONE, "insert delivery"));
    if (e == AD_E_OK)
        d->seq = seq;
    return e;
}

/*
 * Only sent inside a batch, so a delivery deleted meanwhile (with its endpoint) is not reported as
 * AD_E_NOT_FOUND there: nothing is written, which is what the callers do on AD_E_NOT_FOUND too. Outside
 * a transaction the answer is exact.
 */
static ad_err pg_delivery_update(struct ad_conn *c, const struct ad_delivery *d)
{
    struct pg_params p = {0};
    param_INT64(&p, d->seq);
    param_INT(&p, (int)d->state);
    param_INT(&p, d->attempts);
    param_TIME(&p, d->state == AD_DLV_PENDING ? d->next_at : 0);
    param_TIME(&p, d->last_at);
    param_INT(&p, d->last_status);
    param_TEXT(&p, d->last_error);
    return write1(c, ST_DELIVERY_UPDATE, &p, c->in_tx ? CHECK_NONE : CHECK_ROW, "update delivery");
}

static ad_err pg_delivery_get(struct ad_conn *c, const char *tenant, const char *id, int64_t seq,
                              struct ad_delivery **out)
{
    *out = NULL;
    struct pg_params p = {0};
    if (id != NULL) {
        param_TEXT(&p, id);
        param_TEXT(&p, tenant);
    } else {
        param_INT64(&p, seq);
    }
    struct ad_delivery_list l;
    ad_err e = fetch_deliveries(c, id != NULL ? ST_DELIVERY_GET : ST_DELIVERY_GET_SEQ, &p, &l, "get delivery");
    if (e == AD_E_OK && l.n == 0)
        e = AD_E_NOT_FOUND;
    if (e == AD_E_OK) {
        *out = l.items[0];
        l.items[0] = NULL;
    }
    ad_delivery_list_free(&l);
    return e;
}

static ad_err pg_delivery_due(struct ad_conn *c, const char *const *exclude, size_t nexclude, int limit,
                              struct ad_due *out, size_t *n)
{
    *n = 0;
    struct pg_params p = {0};
    param_INT(&p, limit);
    char *arr = text_array(exclude, nexclude);
    param_TEXT(&p, arr);
    PGresult *r;
    ad_err e = query(c, ST_DELIVERY_DUE, &p, &r, "due deliveries");
    free(arr);
    if (e != AD_E_OK)
        return e;
    for (int i = 0; i < PQntuples(r) && *n < (size_t)limit; i++) {
        out[*n].seq = col_INT64(r, i, 0);
        out[*n].next_at = col_INT64(r, i, 1);
        ad_due_set_webhook(&out[*n], PQgetvalue(r, i, 2));
        (*n)++;
    }
    PQclear(r);
    return AD_E_OK;
}

static ad_err pg_delivery_list(struct ad_conn *c, const char *webhook_id, int state, int64_t before, int limit,
                               struct ad_delivery_list *out)
{
    struct pg_params p = {0};
    param_TEXT(&p, webhook_id);
    param_INT64(&p, before > 0 ? before : INT64_MAX);
    param_INT(&p, limit);
    if (state >= 0)
        param_INT(&p, state);
    return fetch_deliveries(c, state >= 0 ? ST_DELIVERY_LIST_STATE : ST_DELIVERY_LIST, &p, out, "list deliveries");
}

static ad_err pg_delivery_abandon(struct ad_conn *c, const char *webhook_id, const char *reason)
{
    struct pg_params p = {0};
    param_TEXT(&p, webhook_id);
    param_TEXT(&p, reason);
    return write1(c, ST_DELIVERY_ABANDON, &p, CHECK_NONE, "abandon deliveries");
}

static ad_err pg_delivery_sweep(struct ad_conn *c, int64_t before, int limit, int *done_out)
{
    return sweep_alone(c, ST_DELIVERY_SWEEP, before, limit, done_out, "sweep deliveries");
}

/* Several nodes' delivery threads read the same due rows: the one whose update moves next_at sends it. */
static ad_err pg_delivery_claim(struct ad_conn *c, int64_t seq, int64_t now, int64_t until, const char *owner)
{
    struct pg_params p = {0};
    param_INT64(&p, seq);
    param_INT64(&p, now);
    param_INT64(&p, until);
    param_TEXT(&p, owner);
    PGresult *r;
    ad_err e = query(c, ST_DELIVERY_CLAIM, &p, &r, "claim delivery");
    if (e == AD_E_OK && strcmp(PQcmdTuples(r), "1") != 0)
        e = AD_E_NOT_FOUND;
    PQclear(r);
    return e;
}

static ad_err pg_delivery_release(struct ad_conn *c, const char *owner, int64_t now)
{
    struct pg_params p = {0};
    param_TEXT(&p, owner);
    param_INT64(&p, now);
    PGresult *r;
    ad_err e = query(c, ST_DELIVERY_RELEASE, &p, &r, "release claimed deliveries");
    PQclear(r);
    return e;
}

/* ---- the feed ---- */

struct ad_feed {
    struct pg_store *s;
    PGconn *pg;
};

static void pg_feed_close(struct ad_feed *f)
{
    if (f == NULL)
        return;
    PQfinish(f->pg);
    free(f);
}

/* A connection of its own that LISTENs; it never runs anything else. */
static struct ad_feed *pg_feed_open(struct ad_store *s, char *err, size_t errlen)
{
    struct ad_feed *f = ad_calloc(1, sizeof(*f));
    f->s = (struct pg_store *)s;
    f->pg = dial(f->s, err, errlen);
    if (f->pg == NULL) {
        free(f);
        return NULL;
    }
    PGresult *r = PQexec(f->pg, "LISTEN " PG_CHANNEL);
    if (PQresultStatus(r) != PGRES_COMMAND_OK) {
        snprintf(err, errlen, "listen for changes: %s", PQerrorMessage(f->pg));
        PQclear(r);
        pg_feed_close(f);
        return NULL;
    }
    PQclear(r);
    return f;
}

/* Pass on the ids of the announcements received so far that other nodes made. How many there were. */
static int feed_dispatch(struct ad_feed *f, void (*fn)(void *arg, const struct ad_feed_change *ch), void *arg)
{
    int got = 0;
    PGnotify *n;
    while ((n = PQnotifies(f->pg)) != NULL) {
        got++;
        char *s = n->extra;
        char *sp = strchr(s, '\n');
        size_t node_len = sp != NULL ? (size_t)(sp - s) : strlen(s);
        int ours = node_len == strlen(f->s->node) && memcmp(s, f->s->node, node_len) == 0;
        if (strcmp(n->relname, PG_CHANNEL) == 0 && !ours && sp != NULL) {
            /* The payload is ours to cut up: it is freed with the notification. */
            for (char *id = sp + 1; *id != '\0';) {
                char *end = strchr(id, '\n');
                if (end != NULL)
                    *end = '\0';
                struct ad_feed_change ch = {.job_id = id};
                char *tab = strchr(id, '\t');
                if (tab != NULL) {
                    *tab = '\0';
                    ch.tenant = tab + 1;
                    tab = strchr(ch.tenant, '\t');
                    if (tab != NULL) {
                        *tab = '\0';
                        ch.type = tab + 1;
                    } else {
                        ch.tenant = NULL;
                    }
                }
                if (*id != '\0')
                    fn(arg, &ch);
                if (end == NULL)
                    break;
                id = end + 1;
            }
        }
        PQfreemem(n);
    }
    return got;
}

static int pg_feed_wait(struct ad_feed *f, int timeout_ms, int wake_fd,
                        void (*fn)(void *arg, const struct ad_feed_change *ch), void *arg)
{
    if (PQstatus(f->pg) != CONNECTION_OK || PQsocket(f->pg) < 0)
        return -1;
    if (feed_dispatch(f, fn, arg) > 0)
        return 0;
    struct pollfd pfd[2] = {{.fd = PQsocket(f->pg), .events = POLLIN}, {.fd = wake_fd, .events = POLLIN}};
    int rc = poll(pfd, wake_fd >= 0 ? 2 : 1, timeout_ms);
    if (rc < 0)
        return errno == EINTR ? 0 : -1;
    if (pfd[0].revents != 0 && !PQconsumeInput(f->pg)) {
        log_failure("listen for changes", PQerrorMessage(f->pg), NULL);
        return -1;
    }
    feed_dispatch(f, fn, arg);
    return PQstatus(f->pg) == CONNECTION_OK ? 0 : -1;
}

/* ---- opening ---- */

static void pg_close(struct ad_store *s)
{
    struct pg_store *ps = (struct pg_store *)s;
    if (ps == NULL)
        return;
    free(ps->url);
    free(ps);
}

/*
 * ---- result artifacts: rows every node reads (store.h, artifact_*) ----
 *
 * artifact_uploads has a row per upload (its size, the state that resumes it, and once finished its view);
 * artifact_chunks a row per part, keyed by its offset, stored uncompressed (STORAGE EXTERNAL) so that a read of a
 * range fetches only the pages it covers. A part is committed with its state in one transaction: what a client was
 * told is received is durable. These statements leave the pipeline for their run (art_begin): they carry megabytes
 * as binary parameters and results, one at a time, on a connection that has nothing else in flight.
 */

/* Leave pipeline mode for a run of artifact statements. AD_E_OK, or AD_E_UNAVAILABLE when the connection is down. */
static ad_err art_begin(struct ad_conn *c)
{
    if (revive(c) != 0)
        return AD_E_UNAVAILABLE;
    if (c->npend != 0 || c->in_tx) {
        ad_error("store: artifact statement on a connection with writes in flight");
        return AD_E_INTERNAL;
    }
    if (PQpipelineStatus(c->pg) != PQ_PIPELINE_OFF && !PQexitPipelineMode(c->pg))
        return fail_conn(c, "exit pipeline mode");
    return AD_E_OK;
}

static void art_end(struct ad_conn *c)
{
    if (PQpipelineStatus(c->pg) == PQ_PIPELINE_OFF && PQstatus(c->pg) == CONNECTION_OK && !PQenterPipelineMode(c->pg))
        fail_conn(c, "enter pipeline mode");
}

/* Run sql with n parameters (lens/fmts NULL: all text); *out the result when wanted (caller clears). */
static ad_err art_exec(struct ad_conn *c, const char *sql, int n, const char *const *vals, const int *lens,
                       const int *fmts, int binary, PGresult **out, const char *what)
{
    PGresult *r = PQexecParams(c->pg, sql, n, NULL, vals, lens, fmts, binary);
    ExecStatusType st = PQresultStatus(r);
    if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK) {
        if (out != NULL)
            *out = r;
        else
            PQclear(r);
        return AD_E_OK;
    }
    const char *state = PQresultErrorField(r, PG_DIAG_SQLSTATE);
    int full = state != NULL && strcmp(state, "53100") == 0; /* disk_full */
    ad_err e = r != NULL ? fail_result(c, r, what) : fail_conn(c, what);
    PQclear(r);
    return full ? AD_E_STORAGE_FULL : e;
}

static void art_rollback(struct ad_conn *c)
{
    PQclear(PQexec(c->pg, "ROLLBACK"));
}

static ad_err art_write(struct ad_conn *c, const struct ad_artifact_part *p, uint64_t *offset, char **view)
{
    *view = NULL;
    ad_err err = ad_artifact_check_part(p);
    if (err != AD_E_OK)
        return err;
    if ((err = art_begin(c)) != AD_E_OK)
        return err;
    const char *key[2] = {p->job_id, p->lease_id};
    PGresult *r = NULL;
    struct ad_artifact_state st;
    err = art_exec(c, "BEGIN", 0, NULL, NULL, NULL, 0, NULL, "begin an artifact part");
    int fresh = p->fresh;
    if (err == AD_E_OK && !fresh) {
        err = art_exec(
            c, "SELECT state FROM artifact_uploads WHERE job_id = $1 AND lease_id = $2 AND view IS NULL FOR UPDATE", 2,
            key, NULL, NULL, 1, &r, "read an upload's state");
        int none = err == AD_E_OK && (PQntuples(r) != 1 || PQgetlength(r, 0, 0) != (int)sizeof(st));
        if (none && p->offset == 0)
            fresh = 1; /* offset 0 with nothing received: the start */
        else if (none)
            err = AD_E_UPLOAD_OFFSET; /* none in progress */
        else if (err == AD_E_OK)
            memcpy(&st, PQgetvalue(r, 0, 0), sizeof(st));
        *offset = 0;
        if (err == AD_E_OK && !fresh && (!ad_artifact_state_valid(&st) || st.offset != p->offset)) {
            *offset = st.offset;
            err = AD_E_UPLOAD_OFFSET;
        }
        PQclear(r);
    }
    if (err == AD_E_OK && fresh) {
        err = art_exec(c, "DELETE FROM artifact_chunks WHERE job_id = $1 AND lease_id = $2", 2, key, NULL, NULL, 0,
                       NULL, "drop an earlier upload");
        ad_artifact_state_init(&st, p->ctype);
    }
    if (err == AD_E_OK && st.offset + p->len > p->max_bytes)
        err = AD_E_PAYLOAD_TOO_LARGE;
    if (err == AD_E_OK && p->len > 0) {
        char off[24];
        snprintf(off, sizeof(off), "%llu", (unsigned long long)st.offset);
        const char *vals[4] = {p->job_id, p->lease_id, off, p->data};
        const int lens[4] = {0, 0, 0, (int)p->len}, fmts[4] = {0, 0, 0, 1};
        err = art_exec(c, "INSERT INTO artifact_chunks (job_id, lease_id, off, data) VALUES ($1, $2, $3, $4)", 4, vals,
                       lens, fmts, 0, NULL, "write an artifact part");
    }
    if (err == AD_E_OK)
        ad_artifact_state_update(&st, p->data, p->len);
    int mismatch = 0;
    if (err == AD_E_OK && p->last) {
        uint8_t md[32];
        ad_artifact_state_final(&st, md);
        mismatch = p->has_repr_digest && memcmp(md, p->repr_sha, sizeof(md)) != 0;
        if (!mismatch)
            *view = ad_artifact_render_view(p->job_id, st.offset, st.ctype, md);
    }
    if (err == AD_E_OK && mismatch) {
        err = art_exec(c, "DELETE FROM artifact_chunks WHERE job_id = $1 AND lease_id = $2", 2, key, NULL, NULL, 0,
                       NULL, "drop an upload");
        if (err == AD_E_OK)
            err = art_exec(c, "DELETE FROM artifact_uploads WHERE job_id = $1 AND lease_id = $2", 2, key, NULL, NULL, 0,
                           NULL, "drop an upload");
    } else if (err == AD_E_OK) {
        char size[24];
        snprintf(size, sizeof(size), "%llu", (unsigned long long)st.offset);
        const char *vals[5] = {p->job_id, p->lease_id, size, (const char *)&st, *view};
        const int lens[5] = {0, 0, 0, (int)sizeof(st), 0}, fmts[5] = {0, 0, 0, 1, 0};
        err = art_exec(c,
                       "INSERT INTO artifact_uploads (job_id, lease_id, size, state, view) VALUES ($1, $2, $3, $4, $5)"
                       " ON CONFLICT (job_id, lease_id) DO UPDATE SET size = $3, state = $4, view = $5",
                       5, vals, lens, fmts, 0, NULL, "write an upload's state");
    }
    if (err == AD_E_OK)
        err = art_exec(c, "COMMIT", 0, NULL, NULL, NULL, 0, NULL, "commit an artifact part");
    else
        art_rollback(c);
    art_end(c);
    if (err == AD_E_OK && mismatch)
        err = AD_E_DIGEST_MISMATCH;
    if (err == AD_E_OK)
        *offset = st.offset;
    else {
        free(*view);
        *view = NULL;
    }
    return err;
}

/* The row of the upload under lease_id: size and view (NULL while in progress). */
static ad_err art_row(struct ad_conn *c, const char *job_id, const char *lease_id, PGresult **r)
{
    ad_err err = art_begin(c);
    if (err != AD_E_OK)
        return err;
    const char *key[2] = {job_id, lease_id};
    err = art_exec(c, "SELECT size, view FROM artifact_uploads WHERE job_id = $1 AND lease_id = $2", 2, key, NULL, NULL,
                   0, r, "read an upload");
    art_end(c);
    if (err == AD_E_OK && PQntuples(*r) != 1) {
        PQclear(*r);
        *r = NULL;
        err = AD_E_NOT_FOUND;
    }
    return err;
}

static ad_err art_progress(struct ad_conn *c, const char *job_id, const char *lease_id, uint64_t *offset, int *done)
{
    PGresult *r;
    ad_err err = art_row(c, job_id, lease_id, &r);
    if (err != AD_E_OK)
        return err;
    *offset = strtoull(PQgetvalue(r, 0, 0), NULL, 10);
    *done = !PQgetisnull(r, 0, 1);
    PQclear(r);
    return AD_E_OK;
}

static ad_err art_view(struct ad_conn *c, const char *job_id, const char *lease_id, char **view)
{
    *view = NULL;
    PGresult *r;
    ad_err err = art_row(c, job_id, lease_id, &r);
    if (err != AD_E_OK)
        return err;
    if (!PQgetisnull(r, 0, 1))
        *view = ad_strdup(PQgetvalue(r, 0, 1));
    PQclear(r);
    return *view != NULL ? AD_E_OK : AD_E_NOT_FOUND;
}

static ad_err art_read(struct ad_conn *c, const char *job_id, const char *lease_id, uint64_t off, void *buf, size_t len,
                       size_t *n)
{
    *n = 0;
    ad_err err = art_begin(c);
    if (err != AD_E_OK)
        return err;
    char o[24], l[24];
    snprintf(o, sizeof(o), "%llu", (unsigned long long)off);
    snprintf(l, sizeof(l), "%zu", len);
    const char *vals[4] = {job_id, lease_id, o, l};
    PGresult *r = NULL;
    /* The part holding off, from there: a range read of a TOASTed value fetches only the chunks it covers. */
    err = art_exec(c,
                   "SELECT substring(data from ($3::bigint - off + 1)::int for $4::int) FROM artifact_chunks"
                   " WHERE job_id = $1 AND lease_id = $2 AND off <= $3::bigint ORDER BY off DESC LIMIT 1",
                   4, vals, NULL, NULL, 1, &r, "read an artifact");
    art_end(c);
    if (err != AD_E_OK)
        return err;
    if (PQntuples(r) == 1) {
        size_t got = (size_t)PQgetlength(r, 0, 0);
        *n = got < len ? got : len;
        memcpy(buf, PQgetvalue(r, 0, 0), *n);
    }
    PQclear(r);
    return AD_E_OK;
}

static ad_err art_gc(struct ad_conn *c, int *removed)
{
    *removed = 0;
    ad_err err = art_begin(c);
    if (err != AD_E_OK)
        return err;
    PGresult *r = NULL;
    /* Kept: a running job's upload under its live lease, and the artifact a job names ("<lease> <view>"). */
    err = art_exec(c,
                   "WITH dead AS (SELECT u.job_id, u.lease_id FROM artifact_uploads u WHERE NOT EXISTS ("
                   "SELECT 1 FROM jobs j WHERE j.id = u.job_id AND j.tombstoned = 0 AND ((j.status = 1 AND j.lease_id"
                   " = u.lease_id) OR left(j.artifact, length(u.lease_id) + 1) = u.lease_id || ' '))),"
                   " chunks AS (DELETE FROM artifact_chunks k USING dead d WHERE k.job_id = d.job_id AND k.lease_id ="
                   " d.lease_id)"
                   " DELETE FROM artifact_uploads u USING dead d WHERE u.job_id = d.job_id AND u.lease_id = d.lease_id",
                   0, NULL, NULL, NULL, 0, &r, "collect artifacts");
    art_end(c);
    if (err == AD_E_OK) {
        *removed = (int)strtol(PQcmdTuples(r), NULL, 10);
        PQclear(r);
    }
    return err;
}

static const struct ad_store_ops pg_ops = {
    .name = "postgresql",
    .tx_blocks_others = 1,
    .reads_may_block = 1,
    .connect = pg_connect,
    .disconnect = pg_disconnect,
    .begin = pg_begin,
    .commit = pg_commit,
    .rollback = pg_rollback,
    .changes = pg_changes,
    .savepoint = pg_savepoint,
    .release = pg_release,
    .rollback_to = pg_rollback_to,
    .job_insert = pg_job_insert,
    .job_update = pg_job_update,
    .job_get = pg_job_get,
    .job_prefetch = pg_job_prefetch,
    .job_list = pg_job_list,
    .job_changes = pg_job_changes,
    .job_leasable = pg_job_leasable,
    .job_running = pg_job_running,
    .job_scheduled = pg_job_scheduled,
    .sweep = pg_sweep,
    .max_seq = pg_max_seq,
    .job_counts = pg_job_counts,
    .artifact_write = art_write,
    .artifact_progress = art_progress,
    .artifact_view = art_view,
    .artifact_read = art_read,
    .artifact_gc = art_gc,
    .attempt_add = pg_attempt_add,
    .attempt_list = pg_attempt_list,
    .idem_get = pg_idem_get,
    .idem_put = pg_idem_put,
    .idem_sweep = pg_idem_sweep,
    .event_append = pg_event_append,
    .events_after = pg_events_after,
    .snapshot_begin = pg_snapshot_begin,
    .snapshot_end = pg_snapshot_end,
    .webhook_put = pg_webhook_put,
    .webhook_get = pg_webhook_get,
    .webhook_list = pg_webhook_list,
    .webhook_delete = pg_webhook_delete,
    .delivery_insert = pg_delivery_insert,
    .delivery_update = pg_delivery_update,
    .delivery_get = pg_delivery_get,
    .delivery_due = pg_delivery_due,
    .delivery_list = pg_delivery_list,
    .delivery_abandon = pg_delivery_abandon,
    .delivery_sweep = pg_delivery_sweep,
    .delivery_claim = pg_delivery_claim,
    .delivery_release = pg_delivery_release,
    .feed_open = pg_feed_open,
    .feed_wait = pg_feed_wait,
    .feed_close = pg_feed_close,
    .close = pg_close,
};

/* Run sql (one or more statements) on a plain connection. 0, or -1 with err filled. */
static int exec_sql(PGconn *pg, const char *sql, const char *what, char *err, size_t errlen)
{
    PGresult *r = PQexec(pg, sql);
    ExecStatusType st = PQresultStatus(r);
    int ok = st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK;
    if (!ok) {
        const char *msg = PQresultErrorField(r, PG_DIAG_MESSAGE_PRIMARY);
        snprintf(err, errlen, "%s: %s", what, msg != NULL ? msg : PQerrorMessage(pg));
    }
    PQclear(r);
    return ok ? 0 : -1;
}

/*
 * Apply the migrations the database has not seen yet, in one transaction, under a session advisory lock so
 * that nodes starting at the same time do it one after another (the later ones find nothing to do).
 * 0 or -1 with err filled.
 */
static int migrate(PGconn *pg, char *err, size_t errlen)
{
    if (exec_sql(pg, "SET client_min_messages = warning", "configure the session", err, errlen) != 0 ||
        exec_sql(pg, "SELECT pg_advisory_lock(" PG_MIGRATE_LOCK ")", "take the migration lock", err, errlen) != 0)
        return -1;
    int rc = exec_sql(pg, "BEGIN; CREATE TABLE IF NOT EXISTS acceptd_schema (version int NOT NULL)",
                      "migrate the database schema", err, errlen);
    int version = 0;
    if (rc == 0) {
        PGresult *r = PQexec(pg, "SELECT coalesce(max(version), 0) FROM acceptd_schema");
        if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1) {
            version = (int)strtol(PQgetvalue(r, 0, 0), NULL, 10);
        } else {
            snprintf(err, errlen, "read the schema version: %s", PQerrorMessage(pg));
            rc = -1;
        }
        PQclear(r);
    }
    if (rc == 0 && version > PG_SCHEMA_VERSION) {
        snprintf(err, errlen, "the database schema is version %d, newer than this acceptd knows (%d)", version,
                 PG_SCHEMA_VERSION);
        rc = -1;
    }
    for (int v = version; rc == 0 && v < PG_SCHEMA_VERSION; v++) {
        char sql[80];
        snprintf(sql, sizeof(sql), "INSERT INTO acceptd_schema (version) VALUES (%d)", v + 1);
        rc = exec_sql(pg, migrations[v], "migrate the database schema", err, errlen);
        if (rc == 0)
            rc = exec_sql(pg, sql, "record the schema version", err, errlen);
    }
    if (rc == 0)
        rc = exec_sql(pg, "COMMIT", "commit the schema", err, errlen);
    if (rc != 0) {
        char ignored[8];
        exec_sql(pg, "ROLLBACK", "rollback", ignored, sizeof(ignored));
    }
    char ignored[8];
    exec_sql(pg, "SELECT pg_advisory_unlock(" PG_MIGRATE_LOCK ")", "release the migration lock", ignored,
             sizeof(ignored));
    return rc;
}

struct ad_store *ad_store_pg_open(const char *url, char *err, size_t errlen)
{
    struct pg_store *s = ad_calloc(1, sizeof(*s));
    s->base.ops = &pg_ops;
    s->url = ad_strdup(url);
    uint8_t raw[8];
    ad_random_bytes(raw, sizeof(raw));
    ad_hex_encode(raw, sizeof(raw), s->node);
    PGconn *pg = dial(s, err, errlen);
    if (pg == NULL || migrate(pg, err, errlen) != 0) {
        PQfinish(pg);
        pg_close(&s->base);
        return NULL;
    }
    PQfinish(pg);
    return &s->base;
}
