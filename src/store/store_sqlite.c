/*
 * store_sqlite.c - the embedded store: one SQLite file <dir>/acceptd.db in WAL mode with synchronous=FULL.
 *
 * Each thread has its own connection (struct ad_conn) with its own cache of prepared statements; the writer
 * thread is the only one that writes, so there is never more than one writer and readers never wait for it.
 * The schema is created and upgraded by numbered migrations at open, in one transaction. Every query is
 * served by an index (tests/unit/test_store_sqlite.c checks the plans). This file decides nothing about
 * jobs: it stores what the core hands it and answers queries. It never logs payloads or results.
 */
#include "store/store_int.h"
#include "store/artifact.h"
#include "store/walbuf.h"
#include "common/metrics.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

enum sq_col {
#define SQ_COL_ENUM(name, kind, n, fixed) COL_##name,
    AD_JOB_COLUMNS(SQ_COL_ENUM)
#undef SQ_COL_ENUM
        COL_seq,
    COL_cseq,
    COL_created_seq,
    COL_started_seq
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
#define SQ_SEQ_PARAM "?31"
_Static_assert(COL_seq + 1 == 31, "seq is the parameter after the columns");
#define SQ_CSEQ_PARAM "?32" /* an update's row */
#define SQ_CSEQ_PARAM_N 32
#define SQ_STARTED_PARAM "?33" /* an update's started_seq */
#define SQ_STARTED_PARAM_N 33
#define SQ_TKEY_PARAM "?34" /* an insert's tkey */
#define SQ_TKEY_PARAM_N 34
#define SQ_TTKEY_PARAM "?35" /* an insert's ttkey */
#define SQ_TTKEY_PARAM_N 35
#define SQ_SELECT_JOB "SELECT " AD_JOB_COLUMNS(SQ_COL_NAME) "seq, cseq, created_seq, started_seq FROM jobs "

/*
 * The integer that stands for a tenant (type NULL), or for a tenant and a type, at the head of the jobs
 * indexes: FNV-1a over the names (a NUL byte between them), 31 bits. SQLite compares an integer key in a few
 * instructions and a text key through memcmp and its collation, once per entry on every level of each
 * index it seeks. Stored in the file: never change it.
 */
static int64_t sq_key(const char *tenant, const char *type)
{
    uint32_t h = 2166136261u;
    for (const unsigned char *p = (const unsigned char *)tenant; *p != '\0'; p++)
        h = (h ^ *p) * 16777619u;
    if (type != NULL) {
        h *= 16777619u; /* the NUL byte: h ^ 0 is h */
        for (const unsigned char *p = (const unsigned char *)type; *p != '\0'; p++)
            h = (h ^ *p) * 16777619u;
    }
    return (int64_t)(h & 0x7fffffffu);
}

/* acceptd_key(tenant [, type]) in SQL, for migration 9. */
static void sql_key(sqlite3_context *ctx, int argc, sqlite3_value **argv)
{
    const char *tenant = (const char *)sqlite3_value_text(argv[0]);
    const char *type = argc > 1 ? (const char *)sqlite3_value_text(argv[1]) : NULL;
    if (tenant == NULL || (argc > 1 && type == NULL)) {
        sqlite3_result_null(ctx);
        return;
    }
    sqlite3_result_int64(ctx, sq_key(tenant, type));
}

/*
 * Migrations, applied in order; schema_version holds the number applied. Never edit a shipped migration:
 * append a new one.
 *
 * Index notes. cseq is the rowid, so every index ends in it implicitly. Since migration 9 the per-tenant
 * indexes lead with tkey (or ttkey, for tenant and type), integer keys of the names (sq_key), and every query
 * compares the names as well. jobs_queue holds only queued jobs in lease order (per tenant and type); jobs_running and
 * jobs_scheduled are partial too, so they stay as small as the sets they serve. jobs_expiry leads with tombstoned so
 * that the tombstoning pass does not walk the tombstones still waiting for deletion, and the deleting pass does not
 * walk live jobs. jobs_updated serves the lists by updatedAfter that few jobs match (sq_job_list). meta keeps seq_hw,
 * the highest seq a committed transaction handed out, so that seq never repeats, even after the newest rows are swept
 * away (before migration 5: seq_floor, the highest seq handed out before rows were deleted).
 */
static const char *const migrations[] = {
    /* 1 */
    "CREATE TABLE jobs ("
    " cseq INTEGER PRIMARY KEY,"
    " id TEXT NOT NULL UNIQUE,"
    " seq INTEGER NOT NULL UNIQUE,"
    " tenant TEXT NOT NULL,"
    " type TEXT NOT NULL,"
    " status INTEGER NOT NULL,"
    " progress INTEGER,"
    " priority INTEGER NOT NULL,"
    " payload TEXT,"
    " result TEXT,"
    " result_location TEXT,"
    " error TEXT,"
    " message TEXT,"
    " attempt INTEGER NOT NULL,"
    " max_attempts INTEGER NOT NULL,"
    " cancel_requested INTEGER NOT NULL,"
    " timeout_seconds INTEGER NOT NULL,"
    " on_complete_redirect INTEGER NOT NULL,"
    " created_at INTEGER,"
    " started_at INTEGER,"
    " updated_at INTEGER,"
    " finished_at INTEGER,"
    " expires_at INTEGER,"
    " run_at INTEGER,"
    " callback_url TEXT,"
    " retry_of TEXT,"
    " resource TEXT,"
    " lease_id TEXT,"
    " lease_expires_at INTEGER,"
    " worker TEXT,"
    " tombstoned INTEGER NOT NULL);"
    "CREATE INDEX jobs_tenant_cseq ON jobs (tenant, cseq);"
    "CREATE INDEX jobs_tenant_status ON jobs (tenant, status, cseq);"
    "CREATE INDEX jobs_tenant_type ON jobs (tenant, type, cseq);"
    "CREATE INDEX jobs_tenant_seq ON jobs (tenant, seq);"
    "CREATE INDEX jobs_queue ON jobs (tenant, type, priority DESC, cseq) WHERE status = 0;"
    "CREATE INDEX jobs_running ON jobs (lease_expires_at) WHERE status = 1;"
    "CREATE INDEX jobs_scheduled ON jobs (run_at) WHERE status = 0 AND run_at IS NOT NULL;"
    "CREATE INDEX jobs_expiry ON jobs (tombstoned, expires_at) WHERE expires_at IS NOT NULL;"
    "CREATE TABLE idempotency ("
    " tenant TEXT NOT NULL,"
    " key TEXT NOT NULL,"
    " fingerprint TEXT NOT NULL,"
    " job_id TEXT NOT NULL,"
    " created_at INTEGER NOT NULL,"
    " PRIMARY KEY (tenant, key));"
    "CREATE INDEX idempotency_created ON idempotency (created_at);"
    "CREATE TABLE meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL);",
    /* 2: attempt history, one row per lease, removed with its job. */
    "CREATE TABLE attempts ("
    " job_id TEXT NOT NULL,"
    " attempt INTEGER NOT NULL,"
    " worker TEXT,"
    " started_at INTEGER NOT NULL,"
    " ended_at INTEGER,"
    " outcome TEXT);"
    "CREATE INDEX attempts_job ON attempts (job_id, started_at);"
    "CREATE TRIGGER jobs_delete_attempts AFTER DELETE ON jobs"
    " BEGIN DELETE FROM attempts WHERE job_id = old.id; END;",
    /* 3: the event log of each job (SSE), id = the job's seq after the change. It lives as long as the job's
     * data: emptied when the job is tombstoned (a done event would otherwise keep the result), removed with it. */
    "CREATE TABLE job_events ("
    " job_id TEXT NOT NULL,"
    " seq INTEGER NOT NULL,"
    " kind TEXT NOT NULL,"
    " data TEXT,"
    " PRIMARY KEY (job_id, seq)) WITHOUT ROWID;"
    "CREATE TRIGGER jobs_delete_events AFTER DELETE ON jobs"
    " BEGIN DELETE FROM job_events WHERE job_id = old.id; END;"
    "CREATE TRIGGER jobs_tombstone_events AFTER UPDATE OF tombstoned ON jobs WHEN new.tombstoned = 1"
    " BEGIN DELETE FROM job_events WHERE job_id = new.id; END;",
    /* 4: webhooks. An endpoint row with url NULL is the tenant's callback secret. The outbox keeps one row per
     * event and destination; deliveries_due holds only the pending ones, in due order, for the delivery thread. */
    "CREATE TABLE webhooks ("
    " id TEXT PRIMARY KEY,"
    " tenant TEXT NOT NULL,"
    " url TEXT,"
    " events INTEGER NOT NULL,"
    " secret TEXT NOT NULL,"
    " prev_secret TEXT,"
    " prev_until INTEGER,"
    " created_at INTEGER NOT NULL,"
    " disabled_at INTEGER,"
    " disabled_reason TEXT);"
    "CREATE INDEX webhooks_tenant ON webhooks (tenant, created_at) WHERE url IS NOT NULL;"
    "CREATE UNIQUE INDEX webhooks_callback ON webhooks (tenant) WHERE url IS NULL;"
    "CREATE TABLE deliveries ("
    " seq INTEGER PRIMARY KEY,"
    " id TEXT NOT NULL UNIQUE,"
    " tenant TEXT NOT NULL,"
    " webhook_id TEXT NOT NULL,"
    " url TEXT NOT NULL,"
    " event_id TEXT NOT NULL,"
    " event_type TEXT NOT NULL,"
    " job_id TEXT NOT NULL,"
    " body TEXT NOT NULL,"
    " created_at INTEGER NOT NULL,"
    " state INTEGER NOT NULL,"
    " attempts INTEGER NOT NULL,"
    " next_at INTEGER,"
    " last_at INTEGER,"
    " last_status INTEGER,"
    " last_error TEXT);"
    "CREATE INDEX deliveries_due ON deliveries (next_at) WHERE state = 0;"
    "CREATE INDEX deliveries_webhook ON deliveries (webhook_id);"
    "CREATE INDEX deliveries_webhook_state ON deliveries (webhook_id, state);"
    "CREATE INDEX deliveries_finished ON deliveries (created_at) WHERE state != 0;"
    "CREATE TRIGGER webhooks_delete_deliveries AFTER DELETE ON webhooks"
    " BEGIN DELETE FROM deliveries WHERE webhook_id = old.id; END;",
    /* 5: seq is no longer UNIQUE. Its index was rewritten by every change of a job (a fifth of an update's index
     * writes) and served only the high-water mark of seq, which meta keeps now as seq_hw, raised by each write
     * transaction that hands out seqs (sq_commit); jobs_tenant_seq serves the change feed. SQLite cannot drop a
     * constraint, so the table is rebuilt, with the same columns in the same order, indexes and triggers. */
    "CREATE TABLE jobs_v5 ("
    " cseq INTEGER PRIMARY KEY,"
    " id TEXT NOT NULL UNIQUE,"
    " seq INTEGER NOT NULL,"
    " tenant TEXT NOT NULL,"
    " type TEXT NOT NULL,"
    " status INTEGER NOT NULL,"
    " progress INTEGER,"
    " priority INTEGER NOT NULL,"
    " payload TEXT,"
    " result TEXT,"
    " result_location TEXT,"
    " error TEXT,"
    " message TEXT,"
    " attempt INTEGER NOT NULL,"
    " max_attempts INTEGER NOT NULL,"
    " cancel_requested INTEGER NOT NULL,"
    " timeout_seconds INTEGER NOT NULL,"
    " on_complete_redirect INTEGER NOT NULL,"
    " created_at INTEGER,"
    " started_at INTEGER,"
    " updated_at INTEGER,"
    " finished_at INTEGER,"
    " expires_at INTEGER,"
    " run_at INTEGER,"
    " callback_url TEXT,"
    " retry_of TEXT,"
    " resource TEXT,"
    " lease_id TEXT,"
    " lease_expires_at INTEGER,"
    " worker TEXT,"
    " tombstoned INTEGER NOT NULL);"
    "INSERT INTO jobs_v5 SELECT * FROM jobs;"
    "INSERT INTO meta (key, value) VALUES ('seq_hw', (SELECT max(coalesce((SELECT max(seq) FROM jobs), 0),"
    " coalesce((SELECT value FROM meta WHERE key = 'seq_floor'), 0))))"
    " ON CONFLICT (key) DO UPDATE SET value = max(value, excluded.value);"
    "DROP TABLE jobs;"
    "ALTER TABLE jobs_v5 RENAME TO jobs;"
    "CREATE INDEX jobs_tenant_cseq ON jobs (tenant, cseq);"
    "CREATE INDEX jobs_tenant_status ON jobs (tenant, status, cseq);"
    "CREATE INDEX jobs_tenant_type ON jobs (tenant, type, cseq);"
    "CREATE INDEX jobs_tenant_seq ON jobs (tenant, seq);"
    "CREATE INDEX jobs_queue ON jobs (tenant, type, priority DESC, cseq) WHERE status = 0;"
    "CREATE INDEX jobs_running ON jobs (lease_expires_at) WHERE status = 1;"
    "CREATE INDEX jobs_scheduled ON jobs (run_at) WHERE status = 0 AND run_at IS NOT NULL;"
    "CREATE INDEX jobs_expiry ON jobs (tombstoned, expires_at) WHERE expires_at IS NOT NULL;"
    "CREATE TRIGGER jobs_delete_attempts AFTER DELETE ON jobs"
    " BEGIN DELETE FROM attempts WHERE job_id = old.id; END;"
    "CREATE TRIGGER jobs_delete_events AFTER DELETE ON jobs"
    " BEGIN DELETE FROM job_events WHERE job_id = old.id; END;"
    "CREATE TRIGGER jobs_tombstone_events AFTER UPDATE OF tombstoned ON jobs WHEN new.tombstoned = 1"
    " BEGIN DELETE FROM job_events WHERE job_id = new.id; END;",
    /* 6: the seq of a job's insert, the id of its first event, which its log no longer holds (core.c); NULL for
     * the jobs created before, whose logs do. */
    "ALTER TABLE jobs ADD COLUMN created_seq INTEGER;",
    /* 7: an attempt is written when it ends; the live one is the running job's own (store.h). */
    "DELETE FROM attempts WHERE ended_at IS NULL;",
    /* 8: the seq of the lease whose running event is made from the job (job.h); NULL for the leases before. */
    "ALTER TABLE jobs ADD COLUMN started_seq INTEGER;",
    /* 9: the indexes on jobs lead with integer keys of the tenant (tkey) and of tenant and type (ttkey), not
     * with their names, and jobs_tenant_cseq is gone (the unfiltered list merges jobs_tenant_status over the
     * statuses): a submit's insert costs a fifth less (sq_key). The keys are filled by acceptd_key, which only
     * the migrating connection defines; the store writes them itself afterwards. */
    "ALTER TABLE jobs ADD COLUMN tkey INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE jobs ADD COLUMN ttkey INTEGER NOT NULL DEFAULT 0;"
    "UPDATE jobs SET tkey = acceptd_key(tenant), ttkey = acceptd_key(tenant, type);"
    "DROP INDEX jobs_tenant_cseq;"
    "DROP INDEX jobs_tenant_status;"
    "DROP INDEX jobs_tenant_type;"
    "DROP INDEX jobs_tenant_seq;"
    "DROP INDEX jobs_queue;"
    "CREATE INDEX jobs_tenant_status ON jobs (tkey, status, cseq);"
    "CREATE INDEX jobs_tenant_type ON jobs (ttkey, cseq);"
    "CREATE INDEX jobs_tenant_seq ON jobs (tkey, seq);"
    "CREATE INDEX jobs_queue ON jobs (ttkey, priority DESC, cseq) WHERE status = 0;",
    /* 10: the job's result artifact, "<leaseId> <JSON>" (job.h). */
    "ALTER TABLE jobs ADD COLUMN artifact TEXT;",
    /* 11: the lists by updatedAfter find the few jobs updated since through it (sq_job_list). */
    "CREATE INDEX jobs_updated ON jobs (tkey, updated_at);",
    /* 12: the delivery thread's reads of the due rows (ST_DELIVERY_DUE) find the endpoint in the index. Read
     * from the table, a row was a page read of its own after every commit (a new snapshot drops the cache),
     * and the fair read past a full endpoint's backlog read all of its rows. state is in it for SQLite to take
     * the index as covering. */
    ("DROP INDEX deliveries_due;"
     "CREATE INDEX deliveries_due ON deliveries (next_at, seq, webhook_id, state) WHERE state = 0;"),
};
#define SQ_SCHEMA_VERSION ((int)(sizeof(migrations) / sizeof(migrations[0])))

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

#define SQ_WEBHOOK_COLS                                                                                                \
    "id, tenant, url, events, secret, prev_secret, prev_until, created_at, disabled_at, disabled_reason"
#define SQ_DELIVERY_COLS                                                                                               \
    "id, tenant, webhook_id, url, event_id, event_type, job_id, body, created_at, state, attempts, next_at,"           \
    " last_at, last_status, last_error"

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
    ST__COUNT
};

static const char *const stmt_sql[ST__COUNT] = {
    [ST_BEGIN] = "BEGIN IMMEDIATE",
    [ST_COMMIT] = "COMMIT",
    [ST_ROLLBACK] = "ROLLBACK",
    /* One fixed name: operations are not nested, and rollback_to releases it again. */
    [ST_SAVEPOINT] = "SAVEPOINT op",
    [ST_RELEASE] = "RELEASE op",
    [ST_ROLLBACK_TO] = "ROLLBACK TO op",
    /* The sweep's own savepoint makes it atomic whether or not the caller opened a transaction. */
    [ST_SWEEP_SAVEPOINT] = "SAVEPOINT sweep",
    [ST_SWEEP_RELEASE] = "RELEASE sweep",
    [ST_SWEEP_ROLLBACK_TO] = "ROLLBACK TO sweep",
    [ST_INSERT] =
        "INSERT INTO jobs (" AD_JOB_COLUMNS(SQ_COL_NAME) "seq, created_seq, tkey, ttkey) VALUES (" AD_JOB_COLUMNS(
            SQ_COL_PARAM) SQ_SEQ_PARAM ", " SQ_SEQ_PARAM ", " SQ_TKEY_PARAM ", " SQ_TTKEY_PARAM ")",
    /* By rowid: one b-tree seek fewer than through the id index; the id must match too. */
    [ST_UPDATE] =
        "UPDATE jobs SET " AD_JOB_COLUMNS(SQ_COL_SET) "seq = " SQ_SEQ_PARAM ", started_seq = " SQ_STARTED_PARAM
                                                      " WHERE cseq = " SQ_CSEQ_PARAM " AND id = ?1",
    [ST_GET] = SQ_SELECT_JOB "WHERE id = ?1 AND (?2 IS NULL OR tenant = ?2)",
    [ST_LIST + 0] = SQ_LIST_ANY(""),
    [ST_LIST + SQ_LIST_STATUS] = SQ_LIST_STATUS_HEAD SQ_LIST_TAIL,
    [ST_LIST + SQ_LIST_TYPE] = SQ_LIST_TYPE_HEAD SQ_LIST_TAIL,
    [ST_LIST + SQ_LIST_STATUS + SQ_LIST_TYPE] = SQ_LIST_STATUS_HEAD SQ_LIST_F_TYPE SQ_LIST_TAIL,
    /* Not the merge of the statuses' walks: one whose status has no job updated since would read all of them. */
    [ST_LIST + SQ_LIST_UPDATED] =
        SQ_SELECT_JOB "NOT INDEXED WHERE cseq < ?2 AND tkey = ?7 AND tenant = ?1" SQ_LIST_F_UPDATED SQ_LIST_TAIL,
    [ST_LIST + SQ_LIST_STATUS + SQ_LIST_UPDATED] = SQ_LIST_STATUS_HEAD SQ_LIST_F_UPDATED SQ_LIST_TAIL,
    [ST_LIST + SQ_LIST_TYPE + SQ_LIST_UPDATED] = SQ_LIST_TYPE_HEAD SQ_LIST_F_UPDATED SQ_LIST_TAIL,
    [ST_LIST_LAST] = SQ_LIST_STATUS_HEAD SQ_LIST_F_TYPE SQ_LIST_F_UPDATED SQ_LIST_TAIL,
    [ST_LIST_FEW_PROBE] = SQ_LIST_FEW_PROBE,
    [ST_LIST_FEW + 0] = SQ_LIST_FEW_HEAD SQ_LIST_TAIL,
    [ST_LIST_FEW + SQ_LIST_STATUS] = SQ_LIST_FEW_HEAD SQ_LIST_FEW_F_STATUS SQ_LIST_TAIL,
    [ST_LIST_FEW + SQ_LIST_TYPE] = SQ_LIST_FEW_HEAD SQ_LIST_F_TYPE SQ_LIST_TAIL,
    [ST_LIST_FEW_LAST] = SQ_LIST_FEW_HEAD SQ_LIST_FEW_F_STATUS SQ_LIST_F_TYPE SQ_LIST_TAIL,
    [ST_CHANGES] = SQ_SELECT_JOB "WHERE tkey = ?4 AND tenant = ?1 AND seq > ?2 ORDER BY seq LIMIT ?3",
    /* One type per query: each is a straight walk of jobs_queue; several types are merged in C. */
    [ST_LEASABLE] = SQ_SELECT_JOB "WHERE status = 0 AND ttkey = ?5 AND tenant = ?1 AND type = ?2"
                                  " AND (run_at IS NULL OR run_at <= ?3) ORDER BY priority DESC, cseq LIMIT ?4",
    [ST_RUNNING] = SQ_SELECT_JOB "WHERE status = 1 ORDER BY lease_expires_at",
    /* Two ordered branches, merged: a row value (run_at, cseq) > (?1, ?2) would seek on run_at alone and step
     * over every job sharing run_at ?1 that comes before the cursor, on every page of a batch scheduled at once. */
    [ST_SCHEDULED] =
        SQ_SELECT_JOB "WHERE status = 0 AND run_at = ?1 AND cseq > ?2"
                      " UNION ALL " SQ_SELECT_JOB "WHERE status = 0 AND run_at > ?1 ORDER BY run_at, cseq LIMIT ?3",
    [ST_TOMBSTONE] =
        "UPDATE jobs SET tombstoned = 1, payload = '{}', result = NULL, error = NULL, message = NULL, artifact = NULL"
        " WHERE cseq IN (SELECT cseq FROM jobs WHERE tombstoned = 0 AND expires_at <= ?1 LIMIT ?2)",
    [ST_DELETE] = "DELETE FROM jobs"
                  " WHERE cseq IN (SELECT cseq FROM jobs WHERE tombstoned = 1 AND expires_at <= ?1 LIMIT ?2)",
    [ST_SET_SEQ_HW] = "INSERT INTO meta (key, value) VALUES ('seq_hw', ?1)"
                      " ON CONFLICT (key) DO UPDATE SET value = max(value, excluded.value)",
    [ST_MAX_SEQ] = "SELECT coalesce((SELECT value FROM meta WHERE key = 'seq_hw'), 0)",
    [ST_IDEM_GET] = "SELECT fingerprint, job_id, created_at FROM idempotency WHERE tenant = ?1 AND key = ?2",
    [ST_IDEM_PUT] = "INSERT INTO idempotency (tenant, key, fingerprint, job_id, created_at)"
                    " VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT (tenant, key) DO UPDATE SET"
                    " fingerprint = excluded.fingerprint, job_id = excluded.job_id, created_at = excluded.created_at",
    [ST_IDEM_SWEEP] = "DELETE FROM idempotency"
                      " WHERE rowid IN (SELECT rowid FROM idempotency WHERE created_at < ?1 LIMIT ?2)",
    [ST_ATTEMPT_ADD] = "INSERT INTO attempts (job_id, attempt, worker, started_at, ended_at, outcome)"
                       " VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    [ST_ATTEMPT_LIST] = "SELECT attempt, worker, started_at, ended_at, outcome FROM attempts WHERE job_id = ?1"
                        " ORDER BY started_at, rowid",
    [ST_EVENT_APPEND] = "INSERT INTO job_events (job_id, seq, kind, data) VALUES (?1, ?2, ?3, ?4)",
    /* The dashboard's counts read every row of the tenant (or of the store) and sort them into their groups, on
     * purpose and only there (the index check of the unit tests names these two). */
    [ST_JOB_COUNTS] =
        "SELECT type, status, count(*), min(created_at) FROM jobs WHERE tkey = ?3 AND tenant = ?1 AND tombstoned = 0"
        " GROUP BY type, status ORDER BY type, status LIMIT ?2",
    [ST_JOB_COUNTS_ALL] = "SELECT type, status, count(*), min(created_at) FROM jobs WHERE tombstoned = 0"
                          " GROUP BY type, status ORDER BY type, status LIMIT ?1",
    [ST_EVENTS_AFTER] =
        "SELECT seq, kind, data FROM job_events WHERE job_id = ?1 AND seq > ?2 ORDER BY job_id, seq LIMIT ?3",
    [ST_SNAPSHOT] = "BEGIN DEFERRED",
    [ST_DATA_VERSION] = "PRAGMA data_version",
    [ST_WEBHOOK_PUT] = "INSERT INTO webhooks (" SQ_WEBHOOK_COLS ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)"
                       " ON CONFLICT (id) DO UPDATE SET url = excluded.url, events = excluded.events,"
                       " secret = excluded.secret, prev_secret = excluded.prev_secret,"
                       " prev_until = excluded.prev_until, disabled_at = excluded.disabled_at,"
                       " disabled_reason = excluded.disabled_reason",
    [ST_WEBHOOK_GET] = "SELECT " SQ_WEBHOOK_COLS " FROM webhooks WHERE id = ?1 AND (?2 IS NULL OR tenant = ?2)",
    [ST_WEBHOOK_CALLBACK] = "SELECT " SQ_WEBHOOK_COLS " FROM webhooks WHERE tenant = ?1 AND url IS NULL",
    [ST_WEBHOOK_LIST] = "SELECT " SQ_WEBHOOK_COLS " FROM webhooks WHERE tenant = ?1 AND url IS NOT NULL"
                        " AND (?2 = 0 OR disabled_at IS NULL) ORDER BY created_at, rowid",
    [ST_WEBHOOK_DELETE] = "DELETE FROM webhooks WHERE id = ?1 AND tenant = ?2 AND url IS NOT NULL",
    [ST_DELIVERY_INSERT] = "INSERT INTO deliveries (" SQ_DELIVERY_COLS ")"
                           " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)",
    [ST_DELIVERY_UPDATE] = "UPDATE deliveries SET state = ?2, attempts = ?3, next_at = ?4, last_at = ?5,"
                           " last_status = ?6, last_error = ?7 WHERE seq = ?1",
    [ST_DELIVERY_GET] = "SELECT seq, " SQ_DELIVERY_COLS " FROM deliveries WHERE id = ?1 AND tenant = ?2",
    [ST_DELIVERY_GET_SEQ] = "SELECT seq, " SQ_DELIVERY_COLS " FROM deliveries WHERE seq = ?1",
    /* ?2..?17: the endpoints left out (AD_DUE_EXCLUDE_MAX); the slots not needed are bound to "". */
    [ST_DELIVERY_DUE] = "SELECT seq, next_at, webhook_id FROM deliveries WHERE state = 0 AND webhook_id NOT IN"
                        " (?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17)"
                        " ORDER BY next_at, seq LIMIT ?1",
    [ST_DELIVERY_LIST] = "SELECT seq, " SQ_DELIVERY_COLS " FROM deliveries WHERE webhook_id = ?1 AND seq < ?2"
                         " ORDER BY seq DESC LIMIT ?3",
    [ST_DELIVERY_LIST_STATE] = "SELECT seq, " SQ_DELIVERY_COLS " FROM deliveries WHERE webhook_id = ?1"
                               " AND state = ?4 AND seq < ?2 ORDER BY seq DESC LIMIT ?3",
    [ST_DELIVERY_ABANDON] = "UPDATE deliveries SET state = 2, next_at = NULL, last_error = ?2"
                            " WHERE webhook_id = ?1 AND state = 0",
    [ST_DELIVERY_SWEEP] = "DELETE FROM deliveries"
                          " WHERE seq IN (SELECT seq FROM deliveries WHERE state != 0 AND created_at < ?1 LIMIT ?2)",
};

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

/* Test hook (declared by tests/unit/test_store_sqlite.c): the SQL of statement i, NULL past the last one. */
const char *ad_store_sqlite_stmt_sql(size_t i);
const char *ad_store_sqlite_stmt_sql(size_t i)
{
    return i < ST__COUNT ? stmt_sql[i] : NULL;
}

/* Transient conditions (lock held too long, disk trouble) answer 503; everything else is our bug. A full disk has
 * its own code: the writer keeps /readyz at 503 until there is room again (writer.c). */
static ad_err map_rc(int rc)
{
    switch (rc & 0xff) {
    case SQLITE_FULL:
        return AD_E_STORAGE_FULL;
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
    case SQLITE_IOERR:
    case SQLITE_CANTOPEN:
    case SQLITE_PROTOCOL:
    case SQLITE_READONLY:
        return AD_E_UNAVAILABLE;
    default:
        return AD_E_INTERNAL;
    }
}

static ad_err fail(struct ad_conn *c, int rc, const char *what)
{
    ad_error("store: %s: %s (%d)", what, sqlite3_errmsg(c->db), rc);
    ad_metrics_store_error();
    if ((rc & 0xff) == SQLITE_FULL)
        c->tx_full = c->in_tx;
    return map_rc(rc);
}

/* The cached statement id, prepared on first use; NULL (logged) when it does not prepare. */
static sqlite3_stmt *stmt(struct ad_conn *c, enum sq_stmt id)
{
    if (c->st[id] == NULL) {
        int rc = sqlite3_prepare_v3(c->db, stmt_sql[id], -1, SQLITE_PREPARE_PERSISTENT, &c->st[id], NULL);
        if (rc != SQLITE_OK) {
            fail(c, rc, "prepare");
            c->st[id] = NULL;
        }
    }
    return c->st[id];
}

/* Make a used statement ready for its next use. */
static void done(sqlite3_stmt *st)
{
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
}

/* Step a statement that returns no rows (or whose rows are ignored) to the end, then reset it. */
static ad_err run(struct ad_conn *c, sqlite3_stmt *st, const char *what)
{
    int rc;
    do {
        rc = sqlite3_step(st);
    } while (rc == SQLITE_ROW);
    ad_err e = rc == SQLITE_DONE ? AD_E_OK : fail(c, rc, what);
    done(st);
    return e;
}

static ad_err run_id(struct ad_conn *c, enum sq_stmt id, const char *what)
{
    sqlite3_stmt *st = stmt(c, id);
    return st != NULL ? run(c, st, what) : AD_E_INTERNAL;
}

/*
 * SQLite rolls a whole transaction back by itself on some errors (disk full, I/O error). Writing on after
 * that would commit each statement on its own, outside the batch the caller thinks it is in, so a write
 * refuses to run once the transaction is gone.
 */
static ad_err check_tx(struct ad_conn *c)
{
    if (c->in_tx && sqlite3_get_autocommit(c->db)) {
        ad_error("store: the transaction was rolled back by SQLite; refusing to write outside it");
        return c->tx_full ? AD_E_STORAGE_FULL : AD_E_UNAVAILABLE;
    }
    return AD_E_OK;
}

/* The prepared statement id for a write inside the open transaction, or why there is none. */
static ad_err write_stmt(struct ad_conn *c, enum sq_stmt id, sqlite3_stmt **st)
{
    ad_err e = check_tx(c);
    if (e != AD_E_OK)
        return e;
    *st = stmt(c, id);
    return *st != NULL ? AD_E_OK : AD_E_INTERNAL;
}

/*
 * Raise the seq counter to the file's high-water mark (meta's seq_hw: the highest seq a committed transaction
 * handed out, raised by sq_commit) once per transaction, so that seq never goes backwards or repeats, even
 * across restarts, rolled-back transactions (which only leave gaps) and deletions of the newest rows.
 */
static ad_err sync_seq(struct ad_conn *c)
{
    if (c->seq_synced)
        return AD_E_OK;
    sqlite3_stmt *st = stmt(c, ST_MAX_SEQ);
    if (st == NULL)
        return AD_E_INTERNAL;
    int rc = sqlite3_step(st);
    if (rc != SQLITE_ROW) {
        ad_err e = fail(c, rc, "read max seq");
        done(st);
        return e;
    }
    int64_t max = sqlite3_column_int64(st, 0);
    done(st);
    if (max > c->seq)
        c->seq = max;
    c->seq_stored = max;
    c->seq_synced = c->in_tx;
    return AD_E_OK;
}

/* ---- rows ---- */

static int bind_TEXT(sqlite3_stmt *st, int i, const char *v)
{
    return v != NULL ? sqlite3_bind_text(st, i, v, -1, SQLITE_STATIC) : sqlite3_bind_null(st, i);
}

static int bind_INT(sqlite3_stmt *st, int i, int v)
{
    return sqlite3_bind_int(st, i, v);
}

static int bind_PROG(sqlite3_stmt *st, int i, int v)
{
    return v >= 0 ? sqlite3_bind_int(st, i, v) : sqlite3_bind_null(st, i);
}

static int bind_TIME(sqlite3_stmt *st, int i, int64_t v)
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
        rc = bind_##kind(st, COL_##name + 1, j->name);
    AD_JOB_COLUMNS(SQ_BIND)
#undef SQ_BIND
    if (rc == SQLITE_OK)
        rc = sqlite3_bind_int64(st, COL_seq + 1, seq);
    return rc;
}

static char *read_TEXT(sqlite3_stmt *st, int i)
{
    const unsigned char *v = sqlite3_column_text(st, i);
    return v != NULL ? ad_strndup((const char *)v, (size_t)sqlite3_column_bytes(st, i)) : NULL;
}

static int read_INT(sqlite3_stmt *st, int i)
{
    return sqlite3_column_int(st, i);
}

static int read_PROG(sqlite3_stmt *st, int i)
{
    return sqlite3_column_type(st, i) == SQLITE_NULL ? -1 : sqlite3_column_int(st, i);
}

static int64_t read_TIME(sqlite3_stmt *st, int i)
{
    return sqlite3_column_int64(st, i);
}

/* A new job from the current row of a SQ_SELECT_JOB statement; the caller frees. */
static struct ad_job *read_job(sqlite3_stmt *st)
{
    struct ad_job *j = ad_job_new();
#define SQ_READ(name, kind, n, fixed) j->name = read_##kind(st, COL_##name);
    AD_JOB_COLUMNS(SQ_READ)
#undef SQ_READ
    j->seq = sqlite3_column_int64(st, COL_seq);
    j->cseq = sqlite3_column_int64(st, COL_cseq);
    j->created_seq = sqlite3_column_int64(st, COL_created_seq);
    j->started_seq = sqlite3_column_int64(st, COL_started_seq);
    return j;
}

/*
 * Step a bound select to the end, appending one element per row to the array *items of *n elements of
 * elem bytes (read fills an element from the current row), then reset the statement. The array grows at
 * powers of two: n is a power of two exactly when it is full. On error the caller frees what was read.
 */
static ad_err fetch_rows(struct ad_conn *c, sqlite3_stmt *st, void *items, size_t *n, size_t elem,
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
    done(st);
    return rc == SQLITE_DONE ? AD_E_OK : fail(c, rc, what);
}

static void read_job_slot(sqlite3_stmt *st, void *slot)
{
    *(struct ad_job **)slot = read_job(st);
}

/* Append the rows of a bound SQ_SELECT_JOB statement to out. On error out keeps what it held before. */
static ad_err fetch_jobs(struct ad_conn *c, sqlite3_stmt *st, struct ad_job_list *out, const char *what)
{
    size_t before = out->n;
    ad_err e = fetch_rows(c, st, &out->items, &out->n, sizeof(*out->items), read_job_slot, what);
    while (e != AD_E_OK && out->n > before)
        ad_job_free(out->items[--out->n]);
    return e;
}

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

static size_t row_slot(const char *id)
{
    size_t h = 5381;
    for (const char *p = id; *p != '\0'; p++)
        h = h * 33 + (unsigned char)*p;
    return h & (SQ_ROWS - 1);
}

static void rows_drop(struct ad_conn *c)
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

/* At begin: the kept rows are stale if another connection has committed since this one last looked. */
static ad_err rows_check(struct ad_conn *c)
{
    sqlite3_stmt *st = stmt(c, ST_DATA_VERSION);
    if (st == NULL)
        return AD_E_INTERNAL;
    int rc = sqlite3_step(st);
    int64_t v = rc == SQLITE_ROW ? sqlite3_column_int64(st, 0) : -1;
    done(st);
    if (v != c->data_version)
        rows_drop(c);
    c->data_version = v;
    return rc == SQLITE_ROW ? AD_E_OK : fail(c, rc, "read data_version");
}

/* ---- connections and transactions ---- */

static void sq_disconnect(struct ad_conn *c)
{
    if (c == NULL)
        return;
    for (int i = 0; i < ST__COUNT; i++)
        sqlite3_finalize(c->st[i]);
    sqlite3_close(c->db);
    ad_hook_cache_drop(&c->hooks);
    rows_drop(c);
    free(c->rows);
    free(c);
}

/* Process-wide settings, before SQLite initializes (ad_walbuf_register does): no memory statistics. Nothing
 * here reads them, and keeping them takes a global mutex on every allocation SQLite makes (5% of the
 * writer's time under load). Too late only if something else initialized SQLite first; then the default
 * stays. */
static void sq_configure(void)
{
    sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
}

/* SQLite's own automatic checkpoint runs inside the commit that fills the log to 1000 frames, before the
 * commit returns, so that batch's answers waited for it (about 200 page writes and a sync of the database
 * file: 1.5-3 ms, every 40-50 batches of a steady submit load). A connection that runs the writer's batches
 * (the first sq_begin) only counts the frames instead, and checkpoints once the batch's answers are out
 * (sq_after_batch). Other connections, which write only now and then, keep SQLite's. */
#define SQ_CHECKPOINT_FRAMES 1000
/*
 * A checkpoint copies the log into the database but leaves the file its size, to be written over from the start:
 * the log keeps the most it ever held. journal_size_limit truncates it back to this at that restart: twice what
 * it holds between two checkpoints, so that a steady load never pays for it, while a log swollen by a huge
 * batch, or by checkpoints that readers held back, gives its space back.
 */
#define SQ_WAL_LIMIT "8388608"
/* How far the log grows between two looks at the free space of its file system (sq_after_batch). */
#define SQ_SPACE_CHECK_FRAMES 64
#define SQ_BUSY_TIMEOUT_MS 5000

static int sq_wal_hook(void *arg, sqlite3 *db, const char *name, int frames)
{
    ((struct ad_conn *)arg)->wal_frames = frames;
    return SQLITE_OK;
}

/* Copy the whole log into the database and truncate it to nothing, without waiting for a reader in the way
 * (then the copy stops at what it holds and the next try goes on). SQLITE_OK when the log is empty. */
static int truncate_log(struct ad_conn *c)
{
    sqlite3_busy_timeout(c->db, 0);
    int rc = sqlite3_wal_checkpoint_v2(c->db, "main", SQLITE_CHECKPOINT_TRUNCATE, NULL, NULL);
    sqlite3_busy_timeout(c->db, SQ_BUSY_TIMEOUT_MS);
    if (rc == SQLITE_OK)
        c->wal_frames = c->space_frames = 0;
    return rc;
}

/* Free bytes on the file system of the database (and its log), or -1 when it cannot be told. */
static int64_t free_bytes(struct ad_conn *c)
{
    struct statvfs fs;
    return statvfs(sqlite3_db_filename(c->db, "main"), &fs) == 0 ? (int64_t)fs.f_bavail * (int64_t)fs.f_frsize : -1;
}

/*
 * Whether the log takes more room than its file system has left. On a small volume the log, which a checkpoint
 * empties but does not shrink, would fill it long before SQ_CHECKPOINT_FRAMES (1000 frames are 4 MiB): every
 * batch would then fail for want of room that the log only holds for pages the database file already has.
 */
static int log_crowds_disk(struct ad_conn *c)
{
    const char *wal = sqlite3_filename_wal(sqlite3_db_filename(c->db, "main"));
    struct stat st;
    if (wal == NULL || stat(wal, &st) != 0)
        return 0;
    int64_t room = free_bytes(c);
    return room >= 0 && room < (int64_t)st.st_size;
}

static void sq_after_batch(struct ad_conn *c)
{
    if (c->wal_frames < c->space_frames)
        c->space_frames = 0; /* the log restarted */
    if (c->wal_frames - c->space_frames >= SQ_SPACE_CHECK_FRAMES) {
        c->space_frames = c->wal_frames;
        if (log_crowds_disk(c) && truncate_log(c) == SQLITE_OK)
            return;
    }
    if (c->wal_frames < SQ_CHECKPOINT_FRAMES)
        return;
    int rc = sqlite3_wal_checkpoint_v2(c->db, "main", SQLITE_CHECKPOINT_PASSIVE, NULL, NULL);
    if (rc != SQLITE_OK && rc != SQLITE_BUSY)
        ad_warn("store: checkpoint: %s", sqlite3_errmsg(c->db));
    c->wal_frames = 0;
}

/*
 * Out of space: the log is what the store can give back, since every page in it that has been copied into the
 * database takes room twice. Then there is room again once the file system has SQ_ROOM_BYTES free and a write
 * of one page (a row written and deleted again in one transaction) goes through. The write alone would say yes
 * too soon: it fits in the tail that the failed batch left in the log, and the next batch would fail again.
 * Nothing here logs its failure: the writer tries again and again while the disk is full.
 */
#define SQ_ROOM_BYTES (1024 * 1024)

static ad_err sq_reclaim(struct ad_conn *c)
{
    truncate_log(c);
    int64_t room = free_bytes(c);
    if (room >= 0 && room < SQ_ROOM_BYTES)
        return AD_E_STORAGE_FULL;
    int rc = sqlite3_exec(c->db,
                          "BEGIN IMMEDIATE;"
                          "INSERT OR REPLACE INTO meta (key, value) VALUES ('space_probe', 0);"
                          "DELETE FROM meta WHERE key = 'space_probe';"
                          "COMMIT",
                          NULL, NULL, NULL);
    if (rc != SQLITE_OK && !sqlite3_get_autocommit(c->db))
        sqlite3_exec(c->db, "ROLLBACK", NULL, NULL, NULL);
    return rc == SQLITE_OK ? AD_E_OK : map_rc(rc);
}

static struct ad_conn *sq_connect(struct ad_store *s, char *err, size_t errlen)
{
    static pthread_once_t configured = PTHREAD_ONCE_INIT;
    struct sq_store *ss = (struct sq_store *)s;
    struct ad_conn *c = ad_calloc(1, sizeof(*c));
    pthread_once(&configured, sq_configure);
    /* NOMUTEX: a connection is used by exactly one thread. */
    int rc = ad_walbuf_register();
    if (rc == SQLITE_OK)
        rc = sqlite3_open_v2(ss->path, &c->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, AD_WALBUF_VFS);
    if (rc != SQLITE_OK) {
        snprintf(err, errlen, "open %s: %s", ss->path, c->db != NULL ? sqlite3_errmsg(c->db) : sqlite3_errstr(rc));
        sq_disconnect(c);
        return NULL;
    }
    sqlite3_extended_result_codes(c->db, 1);
    /* synchronous=FULL makes a commit durable, and walbuf.c relies on it. */
    static const char pragmas[] = "PRAGMA journal_mode = WAL;"
                                  "PRAGMA synchronous = FULL;"
                                  "PRAGMA cache_size = -16384;" /* 16 MiB, not 2: the hot pages of every index */
                                  "PRAGMA temp_store = MEMORY;"
                                  "PRAGMA journal_size_limit = " SQ_WAL_LIMIT ";"
                                  "PRAGMA foreign_keys = ON;";
    char *msg = NULL;
    rc = sqlite3_exec(c->db, pragmas, NULL, NULL, &msg);
    if (rc != SQLITE_OK) {
        snprintf(err, errlen, "configure %s: %s", ss->path, msg != NULL ? msg : sqlite3_errstr(rc));
        sqlite3_free(msg);
        sq_disconnect(c);
        return NULL;
    }
    sqlite3_busy_timeout(c->db, SQ_BUSY_TIMEOUT_MS);
    return c;
}

/* The transaction is over (or begins): nothing learnt in it holds any more. */
static void tx_reset(struct ad_conn *c, int in_tx)
{
    c->in_tx = in_tx;
    c->seq_synced = 0;
    ad_hook_cache_drop(&c->hooks);
}

static ad_err sq_begin(struct ad_conn *c)
{
    if (!c->own_checkpoints) {
        sqlite3_wal_hook(c->db, sq_wal_hook, c);
        c->own_checkpoints = 1;
    }
    c->tx_full = 0;
    ad_err e = run_id(c, ST_BEGIN, "begin");
    if (e == AD_E_OK)
        tx_reset(c, 1);
    if (e == AD_E_OK)
        e = rows_check(c);
    if (e != AD_E_OK && !sqlite3_get_autocommit(c->db)) {
        run_id(c, ST_ROLLBACK, "rollback after failed begin");
        tx_reset(c, 0);
    }
    return e;
}

/* The transaction's seqs are in the file once it commits: raise seq_hw to the last one it handed out. */
static ad_err store_seq_hw(struct ad_conn *c)
{
    if (c->seq <= c->seq_stored)
        return AD_E_OK;
    sqlite3_stmt *st = stmt(c, ST_SET_SEQ_HW);
    if (st == NULL)
        return AD_E_INTERNAL;
    sqlite3_bind_int64(st, 1, c->seq);
    return run(c, st, "record seq high-water mark");
}

static ad_err sq_commit(struct ad_conn *c)
{
    ad_err e = check_tx(c);
    if (e == AD_E_OK)
        e = store_seq_hw(c);
    if (e == AD_E_OK)
        e = run_id(c, ST_COMMIT, "commit");
    if (e == AD_E_OK)
        c->seq_stored = c->seq;
    /* A failed COMMIT in WAL mode leaves the transaction open; end it so the next begin starts clean. */
    if (e != AD_E_OK && !sqlite3_get_autocommit(c->db))
        run_id(c, ST_ROLLBACK, "rollback after failed commit");
    if (e != AD_E_OK)
        rows_drop(c);
    tx_reset(c, 0);
    return e;
}

static void sq_rollback(struct ad_conn *c)
{
    if (!sqlite3_get_autocommit(c->db))
        run_id(c, ST_ROLLBACK, "rollback");
    tx_reset(c, 0);
    rows_drop(c);
}

static int64_t sq_changes(struct ad_conn *c)
{
    return sqlite3_total_changes64(c->db);
}

static ad_err sq_savepoint(struct ad_conn *c)
{
    ad_err e = check_tx(c);
    return e == AD_E_OK ? run_id(c, ST_SAVEPOINT, "savepoint") : e;
}

static ad_err sq_release(struct ad_conn *c)
{
    ad_err e = check_tx(c);
    return e == AD_E_OK ? run_id(c, ST_RELEASE, "release") : e;
}

static void sq_rollback_to(struct ad_conn *c)
{
    if (check_tx(c) != AD_E_OK)
        return;
    /* ROLLBACK TO keeps the savepoint open; release it so the next operation's savepoint is not nested. */
    if (run_id(c, ST_ROLLBACK_TO, "rollback to savepoint") == AD_E_OK)
        run_id(c, ST_RELEASE, "release after rollback");
    /* A webhook or a job written by the undone operation may be in what is remembered. */
    ad_hook_cache_drop(&c->hooks);
    rows_drop(c);
}

/* ---- jobs ---- */

/* Inside a transaction (job_write_tx). */
static ad_err job_write(struct ad_conn *c, struct ad_job *job, enum sq_stmt id, const char *what)
{
    ad_err e = check_tx(c);
    if (e == AD_E_OK)
        e = sync_seq(c);
    sqlite3_stmt *st = e == AD_E_OK ? stmt(c, id) : NULL;
    if (st == NULL)
        return e != AD_E_OK ? e : AD_E_INTERNAL;
    int64_t seq = ++c->seq;
    int64_t started = job->started_seq == AD_SEQ_OF_THIS_WRITE ? seq : job->started_seq;
    int rc = bind_job(st, job, seq);
    if (rc == SQLITE_OK && id == ST_INSERT)
        rc = sqlite3_bind_int64(st, SQ_TKEY_PARAM_N, sq_key(job->tenant, NULL));
    if (rc == SQLITE_OK && id == ST_INSERT)
        rc = sqlite3_bind_int64(st, SQ_TTKEY_PARAM_N, sq_key(job->tenant, job->type));
    if (rc == SQLITE_OK && id == ST_UPDATE)
        rc = sqlite3_bind_int64(st, SQ_CSEQ_PARAM_N, job->cseq);
    if (rc == SQLITE_OK && id == ST_UPDATE)
        rc = bind_TIME(st, SQ_STARTED_PARAM_N, started);
    if (rc != SQLITE_OK) {
        e = fail(c, rc, what);
        done(st);
        return e;
    }
    e = run(c, st, what);
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
    ad_err e = sq_begin(c);
    if (e == AD_E_OK)
        e = job_write(c, job, id, what);
    if (e == AD_E_OK)
        return sq_commit(c);
    sq_rollback(c);
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
    sqlite3_stmt *st = stmt(c, ST_GET);
    if (st == NULL)
        return AD_E_INTERNAL;
    bind_TEXT(st, 1, id);
    bind_TEXT(st, 2, tenant);
    struct ad_job_list l = {0};
    ad_err e = fetch_jobs(c, st, &l, "get job");
    if (e == AD_E_OK && l.n == 0)
        e = AD_E_NOT_FOUND;
    if (e == AD_E_OK) {
        *out = l.items[0];
        l.n = 0;
    }
    ad_job_list_free(&l);
    return e;
}

/* Every list statement numbers its parameters alike, so the unused ones may be bound too. */
static void list_bind(sqlite3_stmt *st, const struct ad_list_query *q, int limit)
{
    bind_TEXT(st, 1, q->tenant);
    sqlite3_bind_int64(st, 2, q->before_cseq > 0 ? q->before_cseq : INT64_MAX);
    sqlite3_bind_int(st, 3, (int)q->status);
    bind_TEXT(st, 4, q->type);
    sqlite3_bind_int64(st, 5, q->updated_after);
    sqlite3_bind_int(st, 6, limit);
    sqlite3_bind_int64(st, 7, sq_key(q->tenant, NULL));
    sqlite3_bind_int64(st, 8, q->type != NULL ? sq_key(q->tenant, q->type) : 0);
}

/* Whether fewer than SQ_LIST_FEW_MAX entries of jobs_updated match a list by updatedAfter (the statement returns
 * the last of that many, if any): a read of the index alone. Then the page is made from them (SQ_LIST_FEW); else
 * the walk by cseq fills it soon when the jobs updated since are mostly recent ones (the usual case: a page of
 * old jobs updated since, below many newer ones that were not, costs the walk over those). */
static ad_err list_few(struct ad_conn *c, const struct ad_list_query *q, int *out)
{
    sqlite3_stmt *st = stmt(c, ST_LIST_FEW_PROBE);
    if (st == NULL)
        return AD_E_INTERNAL;
    list_bind(st, q, SQ_LIST_FEW_MAX - 1);
    int rc = sqlite3_step(st);
    ad_err e = rc == SQLITE_ROW || rc == SQLITE_DONE ? AD_E_OK : fail(c, rc, "count updated jobs");
    *out = rc == SQLITE_DONE;
    done(st);
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
    sqlite3_stmt *st = stmt(c, id);
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
    sqlite3_stmt *st = stmt(c, ST_CHANGES);
    if (st == NULL)
        return AD_E_INTERNAL;
    bind_TEXT(st, 1, tenant);
    sqlite3_bind_int64(st, 2, since);
    sqlite3_bind_int(st, 3, limit);
    sqlite3_bind_int64(st, 4, sq_key(tenant, NULL));
    return fetch_jobs(c, st, out, "job changes");
}

/* Lease order: higher priority first, then older (lower cseq) first. */
static int lease_order(const void *a, const void *b)
{
    const struct ad_job *x = *(const struct ad_job *const *)a;
    const struct ad_job *y = *(const struct ad_job *const *)b;
    if (x->priority != y->priority)
        return x->priority > y->priority ? -1 : 1;
    return (x->cseq > y->cseq) - (x->cseq < y->cseq);
}

/*
 * One indexed query per type, then a merge. A single "type IN (...)" query cannot walk one index in lease
 * order across several types: SQLite would either sort every queued job of those types or walk the tenant's
 * whole queue skipping other types. Per type, each query reads at most `limit` rows.
 */
static ad_err sq_job_leasable(struct ad_conn *c, const char *tenant, const char *const *types, size_t ntypes,
                              int64_t now, int limit, struct ad_job_list *out)
{
    *out = (struct ad_job_list){0};
    sqlite3_stmt *st = stmt(c, ST_LEASABLE);
    if (st == NULL)
        return AD_E_INTERNAL;
    for (size_t i = 0; i < ntypes; i++) {
        int seen = 0;
        for (size_t k = 0; k < i && !seen; k++)
            seen = strcmp(types[k], types[i]) == 0;
        if (seen)
            continue;
        bind_TEXT(st, 1, tenant);
        bind_TEXT(st, 2, types[i]);
        sqlite3_bind_int64(st, 3, now);
        sqlite3_bind_int(st, 4, limit);
        sqlite3_bind_int64(st, 5, sq_key(tenant, types[i]));
        ad_err e = fetch_jobs(c, st, out, "leasable jobs");
        if (e != AD_E_OK) {
            ad_job_list_free(out);
            return e;
        }
    }
    if (out->n > 1)
        qsort(out->items, out->n, sizeof(*out->items), lease_order);
    size_t keep = limit > 0 ? (size_t)limit : 0;
    while (out->n > keep)
        ad_job_free(out->items[--out->n]);
    return AD_E_OK;
}

static ad_err sq_job_running(struct ad_conn *c, struct ad_job_list *out)
{
    *out = (struct ad_job_list){0};
    sqlite3_stmt *st = stmt(c, ST_RUNNING);
    return st != NULL ? fetch_jobs(c, st, out, "running jobs") : AD_E_INTERNAL;
}

static ad_err sq_job_scheduled(struct ad_conn *c, int64_t run_at, int64_t cseq, int limit, struct ad_job_list *out)
{
    *out = (struct ad_job_list){0};
    sqlite3_stmt *st = stmt(c, ST_SCHEDULED);
    if (st == NULL)
        return AD_E_INTERNAL;
    sqlite3_bind_int64(st, 1, run_at);
    sqlite3_bind_int64(st, 2, cseq);
    sqlite3_bind_int(st, 3, limit);
    return fetch_jobs(c, st, out, "scheduled jobs");
}

/* Run a sweep statement with (cutoff, limit); adds the rows it touched to *n. */
static ad_err sweep_step(struct ad_conn *c, enum sq_stmt id, int64_t cutoff, int limit, int *n, const char *what)
{
    sqlite3_stmt *st = stmt(c, id);
    if (st == NULL)
        return AD_E_INTERNAL;
    sqlite3_bind_int64(st, 1, cutoff);
    sqlite3_bind_int(st, 2, limit);
    ad_err e = run(c, st, what);
    if (e == AD_E_OK)
        *n += sqlite3_changes(c->db);
    return e;
}

static ad_err sq_sweep(struct ad_conn *c, int64_t now, int64_t tombstone_ms, int limit, int *done_out)
{
    *done_out = 0;
    ad_err e = check_tx(c);
    if (e == AD_E_OK)
        e = run_id(c, ST_SWEEP_SAVEPOINT, "sweep savepoint");
    if (e != AD_E_OK)
        return e;
    rows_drop(c); /* rows are tombstoned and deleted by query */
    int tombstoned = 0, deleted = 0;
    e = sweep_step(c, ST_TOMBSTONE, now, limit, &tombstoned, "tombstone expired jobs");
    if (e == AD_E_OK)
        e = sweep_step(c, ST_DELETE, now - tombstone_ms, limit, &deleted, "delete tombstones");
    if (e == AD_E_OK)
        e = run_id(c, ST_SWEEP_RELEASE, "sweep release");
    if (e != AD_E_OK) {
        if (check_tx(c) == AD_E_OK && !sqlite3_get_autocommit(c->db) &&
            run_id(c, ST_SWEEP_ROLLBACK_TO, "sweep rollback") == AD_E_OK)
            run_id(c, ST_SWEEP_RELEASE, "sweep release after rollback");
        return e;
    }
    *done_out = tombstoned + deleted;
    return AD_E_OK;
}

static ad_err sq_max_seq(struct ad_conn *c, int64_t *out)
{
    *out = 0;
    sqlite3_stmt *st = stmt(c, ST_MAX_SEQ);
    if (st == NULL)
        return AD_E_INTERNAL;
    int rc = sqlite3_step(st);
    ad_err e = AD_E_OK;
    if (rc == SQLITE_ROW)
        *out = sqlite3_column_int64(st, 0);
    else
        e = fail(c, rc, "max seq");
    done(st);
    return e;
}

/* ---- idempotency ---- */

static ad_err sq_idem_get(struct ad_conn *c, const char *tenant, const char *key, struct ad_idem *out)
{
    memset(out, 0, sizeof(*out));
    sqlite3_stmt *st = stmt(c, ST_IDEM_GET);
    if (st == NULL)
        return AD_E_INTERNAL;
    bind_TEXT(st, 1, tenant);
    bind_TEXT(st, 2, key);
    int rc = sqlite3_step(st);
    ad_err e = AD_E_OK;
    if (rc == SQLITE_ROW) {
        const char *fp = (const char *)sqlite3_column_text(st, 0);
        snprintf(out->fingerprint, sizeof(out->fingerprint), "%s", fp != NULL ? fp : "");
        out->job_id = read_TEXT(st, 1);
        out->created_at = sqlite3_column_int64(st, 2);
    } else if (rc == SQLITE_DONE) {
        e = AD_E_NOT_FOUND;
    } else {
        e = fail(c, rc, "get idempotency record");
    }
    done(st);
    return e;
}

/* Writes the record, replacing one the key already has (an expired record not yet swept). */
static ad_err sq_idem_put(struct ad_conn *c, const char *tenant, const char *key, const char *fingerprint,
                          const char *job_id, int64_t now)
{
    sqlite3_stmt *st;
    ad_err e = write_stmt(c, ST_IDEM_PUT, &st);
    if (e != AD_E_OK)
        return e;
    bind_TEXT(st, 1, tenant);
    bind_TEXT(st, 2, key);
    bind_TEXT(st, 3, fingerprint);
    bind_TEXT(st, 4, job_id);
    sqlite3_bind_int64(st, 5, now);
    return run(c, st, "put idempotency record");
}

static ad_err sq_idem_sweep(struct ad_conn *c, int64_t before, int limit, int *done_out)
{
    *done_out = 0;
    ad_err e = check_tx(c);
    return e == AD_E_OK ? sweep_step(c, ST_IDEM_SWEEP, before, limit, done_out, "sweep idempotency records") : e;
}

/* ---- attempts ---- */

static ad_err sq_attempt_add(struct ad_conn *c, const struct ad_job *j, int64_t ended_at, const char *outcome)
{
    sqlite3_stmt *st;
    ad_err e = write_stmt(c, ST_ATTEMPT_ADD, &st);
    if (e != AD_E_OK)
        return e;
    bind_TEXT(st, 1, j->id);
    sqlite3_bind_int(st, 2, j->attempt);
    bind_TEXT(st, 3, j->worker);
    sqlite3_bind_int64(st, 4, j->started_at);
    sqlite3_bind_int64(st, 5, ended_at);
    bind_TEXT(st, 6, outcome);
    return run(c, st, "add attempt");
}

static void read_attempt(sqlite3_stmt *st, void *slot)
{
    struct ad_attempt *a = slot;
    a->attempt = sqlite3_column_int(st, 0);
    a->worker = read_TEXT(st, 1);
    a->started_at = sqlite3_column_int64(st, 2);
    a->ended_at = read_TIME(st, 3);
    a->outcome = read_TEXT(st, 4);
}

static ad_err sq_attempt_list(struct ad_conn *c, const char *job_id, struct ad_attempt_list *out)
{
    memset(out, 0, sizeof(*out));
    sqlite3_stmt *st = stmt(c, ST_ATTEMPT_LIST);
    if (st == NULL)
        return AD_E_INTERNAL;
    bind_TEXT(st, 1, job_id);
    ad_err e = fetch_rows(c, st, &out->items, &out->n, sizeof(*out->items), read_attempt, "list attempts");
    if (e != AD_E_OK)
        ad_attempt_list_free(out);
    return e;
}

/* ---- counts for the dashboard ---- */

static void read_count(sqlite3_stmt *st, void *slot)
{
    struct ad_job_count *k = slot;
    k->type = read_TEXT(st, 0);
    k->status = sqlite3_column_int(st, 1);
    k->n = sqlite3_column_int64(st, 2);
    k->oldest = sqlite3_column_int64(st, 3);
}

static ad_err sq_job_counts(struct ad_conn *c, const char *tenant, int limit, struct ad_job_count_list *out)
{
    memset(out, 0, sizeof(*out));
    sqlite3_stmt *st = stmt(c, tenant != NULL ? ST_JOB_COUNTS : ST_JOB_COUNTS_ALL);
    if (st == NULL)
        return AD_E_INTERNAL;
    if (tenant != NULL) {
        bind_TEXT(st, 1, tenant);
        sqlite3_bind_int(st, 2, limit);
        sqlite3_bind_int64(st, 3, sq_key(tenant, NULL));
    } else {
        sqlite3_bind_int(st, 1, limit);
    }
    ad_err e = fetch_rows(c, st, &out->items, &out->n, sizeof(*out->items), read_count, "count jobs");
    if (e != AD_E_OK)
        ad_job_count_list_free(out);
    return e;
}

/* ---- job events ---- */

static ad_err sq_event_append(struct ad_conn *c, const char *job_id, int64_t seq, const char *kind, const char *data)
{
    sqlite3_stmt *st;
    ad_err e = write_stmt(c, ST_EVENT_APPEND, &st);
    if (e != AD_E_OK)
        return e;
    bind_TEXT(st, 1, job_id);
    sqlite3_bind_int64(st, 2, seq);
    bind_TEXT(st, 3, kind);
    bind_TEXT(st, 4, data);
    return run(c, st, "append job event");
}

static void read_event(sqlite3_stmt *st, void *slot)
{
    struct ad_event *ev = slot;
    ev->seq = sqlite3_column_int64(st, 0);
    ev->kind = read_TEXT(st, 1);
    ev->data = read_TEXT(st, 2);
}

static ad_err sq_events_after(struct ad_conn *c, const char *job_id, int64_t after, int limit,
                              struct ad_event_list *out)
{
    memset(out, 0, sizeof(*out));
    sqlite3_stmt *st = stmt(c, ST_EVENTS_AFTER);
    if (st == NULL)
        return AD_E_INTERNAL;
    bind_TEXT(st, 1, job_id);
    sqlite3_bind_int64(st, 2, after);
    sqlite3_bind_int(st, 3, limit);
    ad_err e = fetch_rows(c, st, &out->items, &out->n, sizeof(*out->items), read_event, "list job events");
    if (e != AD_E_OK)
        ad_event_list_free(out);
    return e;
}

/* ---- webhooks ---- */

/* A read transaction: one snapshot (and one WAL read lock) for a run of queries. */
static ad_err sq_snapshot_begin(struct ad_conn *c)
{
    return run_id(c, ST_SNAPSHOT, "begin snapshot");
}

static void sq_snapshot_end(struct ad_conn *c)
{
    if (!sqlite3_get_autocommit(c->db))
        run_id(c, ST_ROLLBACK, "end snapshot");
}

static struct ad_webhook *read_webhook(sqlite3_stmt *st)
{
    struct ad_webhook *w = ad_calloc(1, sizeof(*w));
    w->id = read_TEXT(st, 0);
    w->tenant = read_TEXT(st, 1);
    w->url = read_TEXT(st, 2);
    w->events = (unsigned)sqlite3_column_int64(st, 3);
    w->secret = read_TEXT(st, 4);
    w->prev_secret = read_TEXT(st, 5);
    w->prev_until = read_TIME(st, 6);
    w->created_at = read_TIME(st, 7);
    w->disabled_at = read_TIME(st, 8);
    w->disabled_reason = read_TEXT(st, 9);
    return w;
}

static void read_webhook_slot(sqlite3_stmt *st, void *slot)
{
    *(struct ad_webhook **)slot = read_webhook(st);
}

/* Step a bound webhook select to the end into out (which it starts empty), then reset it. */
static ad_err fetch_webhooks(struct ad_conn *c, sqlite3_stmt *st, struct ad_webhook_list *out, const char *what)
{
    *out = (struct ad_webhook_list){0};
    ad_err e = fetch_rows(c, st, &out->items, &out->n, sizeof(*out->items), read_webhook_slot, what);
    if (e != AD_E_OK)
        ad_webhook_list_free(out);
    return e;
}

static ad_err sq_webhook_put(struct ad_conn *c, const struct ad_webhook *w)
{
    ad_hook_cache_drop(&c->hooks);
    sqlite3_stmt *st;
    ad_err e = write_stmt(c, ST_WEBHOOK_PUT, &st);
    if (e != AD_E_OK)
        return e;
    bind_TEXT(st, 1, w->id);
    bind_TEXT(st, 2, w->tenant);
    bind_TEXT(st, 3, w->url);
    sqlite3_bind_int64(st, 4, w->events);
    bind_TEXT(st, 5, w->secret);
    bind_TEXT(st, 6, w->prev_secret);
    bind_TIME(st, 7, w->prev_until);
    sqlite3_bind_int64(st, 8, w->created_at);
    bind_TIME(st, 9, w->disabled_at);
    bind_TEXT(st, 10, w->disabled_reason);
    return run(c, st, "put webhook");
}

/* The rows behind webhook_get and webhook_list; store.c remembers the write transaction's lookups (ad_hooks_get,
 * ad_hooks_list): the writer is the only one to write the file, and its own endpoint writes drop them. */
static ad_err sq_hooks_fetch(struct ad_conn *c, enum ad_hook_kind kind, const char *tenant, const char *id,
                             struct ad_webhook_list *out)
{
    sqlite3_stmt *st = stmt(c, kind == AD_HOOKS_BY_ID      ? ST_WEBHOOK_GET
                               : kind == AD_HOOKS_CALLBACK ? ST_WEBHOOK_CALLBACK
                                                           : ST_WEBHOOK_LIST);
    if (st == NULL)
        return AD_E_INTERNAL;
    if (kind == AD_HOOKS_BY_ID) {
        bind_TEXT(st, 1, id);
        bind_TEXT(st, 2, tenant);
    } else {
        bind_TEXT(st, 1, tenant);
        if (kind != AD_HOOKS_CALLBACK)
            sqlite3_bind_int(st, 2, kind == AD_HOOKS_ENABLED);
    }
    return fetch_webhooks(c, st, out,
                          kind == AD_HOOKS_ALL || kind == AD_HOOKS_ENABLED ? "list webhooks" : "get webhook");
}

static ad_err sq_webhook_get(struct ad_conn *c, const char *tenant, const char *id, struct ad_webhook **out)
{
    return ad_hooks_get(&c->hooks, c->in_tx, c, sq_hooks_fetch, tenant, id, out);
}

static ad_err sq_webhook_list(struct ad_conn *c, const char *tenant, int enabled_only, struct ad_webhook_list *out)
{
    return ad_hooks_list(&c->hooks, c->in_tx, c, sq_hooks_fetch, tenant, enabled_only, out);
}

static ad_err sq_webhook_delete(struct ad_conn *c, const char *tenant, const char *id)
{
    ad_hook_cache_drop(&c->hooks);
    sqlite3_stmt *st;
    ad_err e = write_stmt(c, ST_WEBHOOK_DELETE, &st);
    if (e != AD_E_OK)
        return e;
    bind_TEXT(st, 1, id);
    bind_TEXT(st, 2, tenant);
    e = run(c, st, "delete webhook");
    return e == AD_E_OK && sqlite3_changes(c->db) == 0 ? AD_E_NOT_FOUND : e;
}

static struct ad_delivery *read_delivery(sqlite3_stmt *st)
{
    struct ad_delivery *d = ad_calloc(1, sizeof(*d));
    d->seq = sqlite3_column_int64(st, 0);
    d->id = read_TEXT(st, 1);
    d->tenant = read_TEXT(st, 2);
    d->webhook_id = read_TEXT(st, 3);
    d->url = read_TEXT(st, 4);
    d->event_id = read_TEXT(st, 5);
    d->event_type = read_TEXT(st, 6);
    d->job_id = read_TEXT(st, 7);
    d->body = read_TEXT(st, 8);
    d->created_at = read_TIME(st, 9);
    d->state = (enum ad_delivery_state)sqlite3_column_int(st, 10);
    d->attempts = sqlite3_column_int(st, 11);
    d->next_at = read_TIME(st, 12);
    d->last_at = read_TIME(st, 13);
    d->last_status = sqlite3_column_int(st, 14);
    d->last_error = read_TEXT(st, 15);
    return d;
}

static void read_delivery_slot(sqlite3_stmt *st, void *slot)
{
    *(struct ad_delivery **)slot = read_delivery(st);
}

static ad_err fetch_deliveries(struct ad_conn *c, sqlite3_stmt *st, struct ad_delivery_list *out, const char *what)
{
    *out = (struct ad_delivery_list){0};
    ad_err e = fetch_rows(c, st, &out->items, &out->n, sizeof(*out->items), read_delivery_slot, what);
    if (e != AD_E_OK)
        ad_delivery_list_free(out);
    return e;
}

static ad_err sq_delivery_insert(struct ad_conn *c, struct ad_delivery *d)
{
    sqlite3_stmt *st;
    ad_err e = write_stmt(c, ST_DELIVERY_INSERT, &st);
    if (e != AD_E_OK)
        return e;
    bind_TEXT(st, 1, d->id);
    bind_TEXT(st, 2, d->tenant);
    bind_TEXT(st, 3, d->webhook_id);
    bind_TEXT(st, 4, d->url);
    bind_TEXT(st, 5, d->event_id);
    bind_TEXT(st, 6, d->event_type);
    bind_TEXT(st, 7, d->job_id);
    bind_TEXT(st, 8, d->body);
    sqlite3_bind_int64(st, 9, d->created_at);
    sqlite3_bind_int(st, 10, (int)d->state);
    sqlite3_bind_int(st, 11, d->attempts);
    bind_TIME(st, 12, d->next_at);
    bind_TIME(st, 13, d->last_at);
    sqlite3_bind_int(st, 14, d->last_status);
    bind_TEXT(st, 15, d->last_error);
    e = run(c, st, "insert delivery");
    if (e == AD_E_OK)
        d->seq = sqlite3_last_insert_rowid(c->db);
    return e;
}

static ad_err sq_delivery_update(struct ad_conn *c, const struct ad_delivery *d)
{
    sqlite3_stmt *st;
    ad_err e = write_stmt(c, ST_DELIVERY_UPDATE, &st);
    if (e != AD_E_OK)
        return e;
    sqlite3_bind_int64(st, 1, d->seq);
    sqlite3_bind_int(st, 2, (int)d->state);
    sqlite3_bind_int(st, 3, d->attempts);
    bind_TIME(st, 4, d->state == AD_DLV_PENDING ? d->next_at : 0);
    bind_TIME(st, 5, d->last_at);
    sqlite3_bind_int(st, 6, d->last_status);
    bind_TEXT(st, 7, d->last_error);
    e = run(c, st, "update delivery");
    return e == AD_E_OK && sqlite3_changes(c->db) == 0 ? AD_E_NOT_FOUND : e;
}

static ad_err sq_delivery_get(struct ad_conn *c, const char *tenant, const char *id, int64_t seq,
                              struct ad_delivery **out)
{
    *out = NULL;
    sqlite3_stmt *st = stmt(c, id != NULL ? ST_DELIVERY_GET : ST_DELIVERY_GET_SEQ);
    if (st == NULL)
        return AD_E_INTERNAL;
    if (id != NULL) {
        bind_TEXT(st, 1, id);
        bind_TEXT(st, 2, tenant);
    } else {
        sqlite3_bind_int64(st, 1, seq);
    }
    struct ad_delivery_list l;
    ad_err e = fetch_deliveries(c, st, &l, "get delivery");
    if (e == AD_E_OK && l.n == 0)
        e = AD_E_NOT_FOUND;
    if (e == AD_E_OK) {
        *out = l.items[0];
        l.items[0] = NULL;
    }
    ad_delivery_list_free(&l);
    return e;
}

static ad_err sq_delivery_due(struct ad_conn *c, const char *const *exclude, size_t nexclude, int limit,
                              struct ad_due *out, size_t *n)
{
    *n = 0;
    sqlite3_stmt *st = stmt(c, ST_DELIVERY_DUE);
    if (st == NULL)
        return AD_E_INTERNAL;
    sqlite3_bind_int(st, 1, limit);
    for (int i = 0; i < AD_DUE_EXCLUDE_MAX; i++)
        bind_TEXT(st, 2 + i, (size_t)i < nexclude ? exclude[i] : "");
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW && *n < (size_t)limit) {
        out[*n].seq = sqlite3_column_int64(st, 0);
        out[*n].next_at = sqlite3_column_int64(st, 1);
        ad_due_set_webhook(&out[*n], (const char *)sqlite3_column_text(st, 2));
        (*n)++;
    }
    ad_err e = rc == SQLITE_DONE || rc == SQLITE_ROW ? AD_E_OK : fail(c, rc, "due deliveries");
    done(st);
    return e;
}

static ad_err sq_delivery_list(struct ad_conn *c, const char *webhook_id, int state, int64_t before, int limit,
                               struct ad_delivery_list *out)
{
    *out = (struct ad_delivery_list){0};
    sqlite3_stmt *st = stmt(c, state >= 0 ? ST_DELIVERY_LIST_STATE : ST_DELIVERY_LIST);
    if (st == NULL)
        return AD_E_INTERNAL;
    bind_TEXT(st, 1, webhook_id);
    sqlite3_bind_int64(st, 2, before > 0 ? before : INT64_MAX);
    sqlite3_bind_int(st, 3, limit);
    if (state >= 0)
        sqlite3_bind_int(st, 4, state);
    return fetch_deliveries(c, st, out, "list deliveries");
}

static ad_err sq_delivery_abandon(struct ad_conn *c, const char *webhook_id, const char *reason)
{
    sqlite3_stmt *st;
    ad_err e = write_stmt(c, ST_DELIVERY_ABANDON, &st);
    if (e != AD_E_OK)
        return e;
    bind_TEXT(st, 1, webhook_id);
    bind_TEXT(st, 2, reason);
    return run(c, st, "abandon deliveries");
}

/* One process per data directory (the lock in ad_store_sqlite_open): its busy set is claim enough. */
static ad_err sq_delivery_claim(struct ad_conn *c, int64_t seq, int64_t now, int64_t until, const char *owner)
{
    return AD_E_OK;
}

static ad_err sq_delivery_release(struct ad_conn *c, const char *owner, int64_t now)
{
    return AD_E_OK;
}

static ad_err sq_delivery_sweep(struct ad_conn *c, int64_t before, int limit, int *done_out)
{
    *done_out = 0;
    ad_err e = check_tx(c);
    return e == AD_E_OK ? sweep_step(c, ST_DELIVERY_SWEEP, before, limit, done_out, "sweep deliveries") : e;
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
                                   int *done)
{
    return ad_artifact_progress(job_id, lease_id, offset, done);
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
    .connect = sq_connect,
    .disconnect = sq_disconnect,
    .begin = sq_begin,
    .commit = sq_commit,
    .rollback = sq_rollback,
    .after_batch = sq_after_batch,
    .reclaim = sq_reclaim,
    .changes = sq_changes,
    .savepoint = sq_savepoint,
    .release = sq_release,
    .rollback_to = sq_rollback_to,
    .job_insert = sq_job_insert,
    .job_update = sq_job_update,
    .job_get = sq_job_get,
    .job_list = sq_job_list,
    .job_changes = sq_job_changes,
    .job_leasable = sq_job_leasable,
    .job_running = sq_job_running,
    .job_scheduled = sq_job_scheduled,
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
    .event_append = sq_event_append,
    .events_after = sq_events_after,
    .snapshot_begin = sq_snapshot_begin,
    .snapshot_end = sq_snapshot_end,
    .webhook_put = sq_webhook_put,
    .webhook_get = sq_webhook_get,
    .webhook_list = sq_webhook_list,
    .webhook_delete = sq_webhook_delete,
    .delivery_insert = sq_delivery_insert,
    .delivery_update = sq_delivery_update,
    .delivery_get = sq_delivery_get,
    .delivery_due = sq_delivery_due,
    .delivery_list = sq_delivery_list,
    .delivery_abandon = sq_delivery_abandon,
    .delivery_sweep = sq_delivery_sweep,
    .delivery_claim = sq_delivery_claim,
    .delivery_release = sq_delivery_release,
    .close = sq_close,
};

/* Apply the migrations the file has not seen yet, all in one transaction. 0 or -1 with err filled. */
static int migrate(struct ad_conn *c, char *err, size_t errlen)
{
    char *msg = NULL;
    int rc =
        sqlite3_create_function(c->db, "acceptd_key", 1, SQLITE_UTF8 | SQLITE_DETERMINISTIC, NULL, sql_key, NULL, NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_create_function(c->db, "acceptd_key", 2, SQLITE_UTF8 | SQLITE_DETERMINISTIC, NULL, sql_key, NULL,
                                     NULL);
    if (rc == SQLITE_OK)
        rc =
            sqlite3_exec(c->db, "BEGIN IMMEDIATE; CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)",
                         NULL, NULL, &msg);
    int version = 0;
    if (rc == SQLITE_OK) {
        sqlite3_stmt *st = NULL;
        rc = sqlite3_prepare_v2(c->db, "SELECT coalesce(max(version), 0) FROM schema_version", -1, &st, NULL);
        if (rc == SQLITE_OK)
            rc = sqlite3_step(st);
        if (rc == SQLITE_ROW) {
            version = sqlite3_column_int(st, 0);
            rc = SQLITE_OK;
        }
        sqlite3_finalize(st);
    }
    if (rc == SQLITE_OK && version > SQ_SCHEMA_VERSION) {
        snprintf(err, errlen, "the database schema is version %d, newer than this acceptd knows (%d)", version,
                 SQ_SCHEMA_VERSION);
        sqlite3_exec(c->db, "ROLLBACK", NULL, NULL, NULL);
        return -1;
    }
    for (int v = version; rc == SQLITE_OK && v < SQ_SCHEMA_VERSION; v++) {
        rc = sqlite3_exec(c->db, migrations[v], NULL, NULL, &msg);
        if (rc == SQLITE_OK) {
            char sql[80];
            snprintf(sql, sizeof(sql), "INSERT INTO schema_version (version) VALUES (%d)", v + 1);
            rc = sqlite3_exec(c->db, sql, NULL, NULL, &msg);
        }
    }
    if (rc == SQLITE_OK)
        rc = sqlite3_exec(c->db, "COMMIT", NULL, NULL, &msg);
    if (rc != SQLITE_OK) {
        snprintf(err, errlen, "migrate the database schema: %s", msg != NULL ? msg : sqlite3_errmsg(c->db));
        sqlite3_free(msg);
        if (!sqlite3_get_autocommit(c->db))
            sqlite3_exec(c->db, "ROLLBACK", NULL, NULL, NULL);
        return -1;
    }
    return 0;
}

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
    struct ad_conn *c = sq_connect(&s->base, err, errlen);
    if (c == NULL || migrate(c, err, errlen) != 0) {
        sq_disconnect(c);
        sq_close(&s->base);
        return NULL;
    }
    sq_disconnect(c);
    return &s->base;
}
