/*
 * sqlite_schema.c - the SQLite store's schema and statements: the integer keys of tenants and types that lead
 * the jobs indexes, the numbered migrations applied at open (in one transaction), and the text of every
 * statement (indexed by enum sq_stmt, store_sqlite_int.h). It runs nothing but the migrations: statements
 * are prepared and run by sqlite_conn.c and the operations.
 */
#include "store/store_sqlite_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*
 * The integer that stands for a tenant (type NULL), or for a tenant and a type, at the head of the jobs
 * indexes: FNV-1a over the names (a NUL byte between them), 31 bits. SQLite compares an integer key in a few
 * instructions and a text key through memcmp and its collation, once per entry on every level of each
 * index it seeks. Stored in the file: never change it.
 */
int64_t ad_sq_key(const char *tenant, const char *type)
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
    sqlite3_result_int64(ctx, ad_sq_key(tenant, type));
}

/*
 * Migrations, applied in order; schema_version holds the number applied. Never edit a shipped migration:
 * append a new one.
 *
 * Index notes. cseq is the rowid, so every index ends in it implicitly. Since migration 9 the per-tenant
 * indexes lead with tkey (or ttkey, for tenant and type), integer keys of the names (ad_sq_key), and every query
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
     * transaction that hands out seqs (ad_sq_commit); jobs_tenant_seq serves the change feed. SQLite cannot drop a
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
     * statuses): a submit's insert costs a fifth less (ad_sq_key). The keys are filled by acceptd_key, which only
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
    /* 13 (the groups' migration; PostgreSQL's 10): the job's group ("" for none) and turn (job.h). jobs_queue
     * holds the queue in lease order, by turn within a priority; jobs_group finds a group's last turn at insert
     * (ST_INSERT). The jobs queued before keep turn 0: they go first, oldest first, as they would have. */
    ("ALTER TABLE jobs ADD COLUMN grp TEXT NOT NULL DEFAULT '';"
     "ALTER TABLE jobs ADD COLUMN turn INTEGER NOT NULL DEFAULT 0;"
     "DROP INDEX jobs_queue;"
     "CREATE INDEX jobs_queue ON jobs (ttkey, priority DESC, turn, cseq) WHERE status = 0;"
     "CREATE INDEX jobs_group ON jobs (ttkey, priority, grp, turn) WHERE status = 0;"),
    /* 14 (PostgreSQL's 11): queue settings, one row per tenant and type, and the type's rate window
     * (sqlite_queue.c). */
    ("CREATE TABLE queues (tenant TEXT NOT NULL, type TEXT NOT NULL, paused INTEGER NOT NULL,"
     " concurrency INTEGER, group_concurrency INTEGER, rate_limit INTEGER, rate_period INTEGER,"
     " group_rate_limit INTEGER, group_rate_period INTEGER, window_start INTEGER NOT NULL,"
     " window_count INTEGER NOT NULL, PRIMARY KEY (tenant, type)) WITHOUT ROWID;"),
    /* 15 (PostgreSQL's 12): a job's uniqueKey, and the live jobs (queued or running) that
     * have one, by tenant and type (ttkey) and key: what a submit with a uniqueKey looks up (ST_UNIQUE). */
    ("ALTER TABLE jobs ADD COLUMN unique_key TEXT;"
     "CREATE INDEX jobs_unique ON jobs (ttkey, unique_key) WHERE unique_key IS NOT NULL AND status <= 1;"),
    /* 16 (PostgreSQL's 13): the rate windows of the groups of a queue with a groupRateLimit (sqlite_queue.c): one
     * row per group leased in the current window; the rows of older windows are deleted as a lease writes. */
    ("CREATE TABLE queue_groups (tenant TEXT NOT NULL, type TEXT NOT NULL, window_start INTEGER NOT NULL,"
     " grp TEXT NOT NULL, window_count INTEGER NOT NULL, PRIMARY KEY (tenant, type, window_start, grp))"
     " WITHOUT ROWID;"),
    /* 17 (PostgreSQL's 14): a job's trace context, kept from its submit, and a delivery's, copied from its job
     * (docs/tracing.md); NULL when the submit had none. */
    ("ALTER TABLE jobs ADD COLUMN traceparent TEXT;"
     "ALTER TABLE jobs ADD COLUMN tracestate TEXT;"
     "ALTER TABLE deliveries ADD COLUMN traceparent TEXT;"
     "ALTER TABLE deliveries ADD COLUMN tracestate TEXT;"),
    /* 18 (PostgreSQL's 15): dependencies (core/deps.c): a job's count of unfinished dependencies (a queued job with
     * deps > 0 is not leased), the ids it named and onDependencyFailure, and the edges by dependency, which the end
     * of a job reads (and deletes) to find the jobs waiting for it; batches (core/batches.c): a row each with its
     * jobs counted by status, and the jobs of a batch by creation. */
    ("ALTER TABLE jobs ADD COLUMN deps INTEGER NOT NULL DEFAULT 0;"
     "ALTER TABLE jobs ADD COLUMN depends_on TEXT;"
     "ALTER TABLE jobs ADD COLUMN dep_run INTEGER NOT NULL DEFAULT 0;"
     "CREATE TABLE job_deps (dep_id TEXT NOT NULL, job_id TEXT NOT NULL, PRIMARY KEY (dep_id, job_id))"
     " WITHOUT ROWID;"
     "ALTER TABLE jobs ADD COLUMN batch_id TEXT;"
     "ALTER TABLE jobs ADD COLUMN dependents INTEGER NOT NULL DEFAULT 0;"
     "CREATE INDEX jobs_batch ON jobs (batch_id, cseq) WHERE batch_id IS NOT NULL;"
     "CREATE TABLE batches (id TEXT PRIMARY KEY, tenant TEXT NOT NULL, total INTEGER NOT NULL,"
     " n_queued INTEGER NOT NULL, n_running INTEGER NOT NULL, n_succeeded INTEGER NOT NULL,"
     " n_failed INTEGER NOT NULL, n_cancelled INTEGER NOT NULL, n_partial INTEGER NOT NULL, callback_url TEXT,"
     " created_at INTEGER NOT NULL, finished_at INTEGER) WITHOUT ROWID;"),
    /* 19 (PostgreSQL's 16): schedules (sqlite_schedule.c), their next fire times in one index (the engine's one
     * timer reads its head), and the run of a schedule that made a job (job.h, schedule). */
    ("ALTER TABLE jobs ADD COLUMN schedule TEXT;"
     "CREATE TABLE schedules (tenant TEXT NOT NULL, id TEXT NOT NULL, spec TEXT NOT NULL, tmpl TEXT NOT NULL,"
     " next_at INTEGER, last_job TEXT, recent TEXT NOT NULL, fires INTEGER NOT NULL, skips INTEGER NOT NULL,"
     " catchups INTEGER NOT NULL, created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL,"
     " version INTEGER NOT NULL, PRIMARY KEY (tenant, id)) WITHOUT ROWID;"
     "CREATE INDEX schedules_next ON schedules (next_at) WHERE next_at IS NOT NULL;"),
    /* 20 (PostgreSQL's 17): a batch's expiry, the latest of its jobs' (set as each ends; NULL while it runs), by
     * which it answers 410 and then goes in the sweep (core/batches.c). */
    ("ALTER TABLE batches ADD COLUMN expires_at INTEGER;"
     "CREATE INDEX batches_expiry ON batches (expires_at) WHERE expires_at IS NOT NULL;"),
};
#define SQ_SCHEMA_VERSION ((int)(sizeof(migrations) / sizeof(migrations[0])))

const char *const ad_sq_stmt_sql[ST__COUNT] = {
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
    [ST_INSERT] = "INSERT INTO jobs (" SQ_INSERT_COLS ") VALUES (" SQ_INSERT_PARAMS ")",
    /* By rowid: one b-tree seek fewer than through the id index; the id must match too. */
    [ST_UPDATE] = "UPDATE jobs SET " AD_JOB_COLUMNS(SQ_COL_SET) "seq = " SQ_SEQ_PARAM ", deps = " SQ_DEPS_PARAM
                                                                ", started_seq = " SQ_STARTED_PARAM
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
    [ST_LEASABLE] = SQ_SELECT_JOB "WHERE status = 0 AND ttkey = ?5 AND tenant = ?1 AND type = ?2 AND deps = 0"
                                  " AND (run_at IS NULL OR run_at <= ?3) ORDER BY priority DESC, turn, cseq LIMIT ?4",
    [ST_RUNNING] = SQ_SELECT_JOB "WHERE status = 1 ORDER BY lease_expires_at",
    /* Two ordered branches, merged: a row value (run_at, cseq) > (?1, ?2) would seek on run_at alone and step
     * over every job sharing run_at ?1 that comes before the cursor, on every page of a batch scheduled at once. */
    [ST_SCHEDULED] =
        SQ_SELECT_JOB "WHERE status = 0 AND run_at = ?1 AND cseq > ?2"
                      " UNION ALL " SQ_SELECT_JOB "WHERE status = 0 AND run_at > ?1 ORDER BY run_at, cseq LIMIT ?3",
    /* A bulk walk (sq_job_bulk_page): where it ends, how far a page reaches (limit entries of jobs_tenant_type,
     * whatever their status), and the jobs of that span that match, read by cseq from the same index. */
    [ST_BULK_END] = "SELECT max(cseq) FROM jobs WHERE ttkey = ?1",
    [ST_BULK_SPAN] = "SELECT max(cseq) FROM (SELECT cseq FROM jobs WHERE ttkey = ?1 AND cseq > ?2 AND cseq <= ?3"
                     " ORDER BY cseq LIMIT ?4)",
    [ST_BULK_PAGE] = SQ_SELECT_JOB "WHERE ttkey = ?1 AND cseq > ?2 AND cseq <= ?3 AND tenant = ?4 AND type = ?5"
                                   " AND tombstoned = 0 AND (expires_at IS NULL OR expires_at > ?6)"
                                   " AND (?7 = 0 OR (?7 >> status) & 1) AND (?8 = 0 OR created_at < ?8)"
                                   " AND (?9 = 0 OR created_at > ?9) AND (?10 IS NULL OR grp = ?10) ORDER BY cseq",
    /* Through jobs_unique: its WHERE is repeated word for word (status <= 1), so that SQLite takes the index. */
    [ST_UNIQUE] = SQ_SELECT_JOB "WHERE ttkey = ?4 AND unique_key = ?3 AND status <= 1 AND tenant = ?1 AND type = ?2"
                                " ORDER BY cseq LIMIT 1",
    [ST_SET_PAYLOAD] = "UPDATE jobs SET payload = ?2 WHERE id = ?1",
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
    [ST_WEBHOOK_PUT] = "INSERT INTO webhooks (" AD_WEBHOOK_COLS ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)"
                       " ON CONFLICT (id) DO UPDATE SET url = excluded.url, events = excluded.events,"
                       " secret = excluded.secret, prev_secret = excluded.prev_secret,"
                       " prev_until = excluded.prev_until, disabled_at = excluded.disabled_at,"
                       " disabled_reason = excluded.disabled_reason",
    [ST_WEBHOOK_GET] = "SELECT " AD_WEBHOOK_COLS " FROM webhooks WHERE id = ?1 AND (?2 IS NULL OR tenant = ?2)",
    [ST_WEBHOOK_CALLBACK] = "SELECT " AD_WEBHOOK_COLS " FROM webhooks WHERE tenant = ?1 AND url IS NULL",
    [ST_WEBHOOK_LIST] = "SELECT " AD_WEBHOOK_COLS " FROM webhooks WHERE tenant = ?1 AND url IS NOT NULL"
                        " AND (?2 = 0 OR disabled_at IS NULL) ORDER BY created_at, rowid",
    [ST_WEBHOOK_DELETE] = "DELETE FROM webhooks WHERE id = ?1 AND tenant = ?2 AND url IS NOT NULL",
    [ST_DELIVERY_INSERT] = "INSERT INTO deliveries (" AD_DELIVERY_COLS ")"
                           " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17)",
    [ST_DELIVERY_UPDATE] = "UPDATE deliveries SET state = ?2, attempts = ?3, next_at = ?4, last_at = ?5,"
                           " last_status = ?6, last_error = ?7 WHERE seq = ?1",
    [ST_DELIVERY_GET] = "SELECT seq, " AD_DELIVERY_COLS " FROM deliveries WHERE id = ?1 AND tenant = ?2",
    [ST_DELIVERY_GET_SEQ] = "SELECT seq, " AD_DELIVERY_COLS " FROM deliveries WHERE seq = ?1",
    /* ?2..?17: the endpoints left out (AD_DUE_EXCLUDE_MAX); the slots not needed are bound to "". */
    [ST_DELIVERY_DUE] = "SELECT seq, next_at, webhook_id FROM deliveries WHERE state = 0 AND webhook_id NOT IN"
                        " (?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17)"
                        " ORDER BY next_at, seq LIMIT ?1",
    [ST_DELIVERY_LIST] = "SELECT seq, " AD_DELIVERY_COLS " FROM deliveries WHERE webhook_id = ?1 AND seq < ?2"
                         " ORDER BY seq DESC LIMIT ?3",
    [ST_DELIVERY_LIST_STATE] = "SELECT seq, " AD_DELIVERY_COLS " FROM deliveries WHERE webhook_id = ?1"
                               " AND state = ?4 AND seq < ?2 ORDER BY seq DESC LIMIT ?3",
    [ST_DELIVERY_ABANDON] = "UPDATE deliveries SET state = 2, next_at = NULL, last_error = ?2"
                            " WHERE webhook_id = ?1 AND state = 0",
    [ST_DELIVERY_SWEEP] = "DELETE FROM deliveries"
                          " WHERE seq IN (SELECT seq FROM deliveries WHERE state != 0 AND created_at < ?1 LIMIT ?2)",
    [ST_QUEUE_GET] = "SELECT " SQ_QUEUE_COLS " FROM queues WHERE tenant = ?1 AND type = ?2",
    [ST_QUEUE_PUT] = "INSERT OR REPLACE INTO queues (" SQ_QUEUE_COLS ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9,"
                     " ?10, ?11)",
    [ST_QUEUE_LIST] = "SELECT " SQ_QUEUE_COLS " FROM queues WHERE tenant = ?1 ORDER BY type",
    /* Queued through jobs_queue, running through jobs_tenant_status: a backlog is read whole, for the queue's view
     * only; a lease counts the running alone (ST_QUEUE_RUNNING). */
    [ST_QUEUE_COUNTS] =
        "SELECT (SELECT count(*) FROM jobs WHERE ttkey = ?4 AND status = 0 AND tenant = ?1 AND type = ?2"
        " AND (run_at IS NULL OR run_at <= ?3)), (" SQ_QUEUE_RUNNING "), (SELECT count(*) FROM jobs WHERE ttkey = ?4"
        " AND status = 0 AND tenant = ?1 AND type = ?2 AND run_at > ?3)",
    [ST_QUEUE_RUNNING] = SQ_QUEUE_RUNNING,
    /* Per-group limits: the groups of the tenant's running jobs (jobs_tenant_status; counted in C, without a temporary
     * b-tree), and the groups' rate windows
     * (queue_groups, whose key leads with the queue and the window, so that a window's rows and the older windows
     * are each one range). */
    [ST_GROUP_RUNNING] = "SELECT grp FROM jobs WHERE tkey = ?5 AND status = 1 AND tenant = ?1 AND type = ?2",
    [ST_GROUP_WINDOW] = "SELECT grp, window_count FROM queue_groups WHERE tenant = ?1 AND type = ?2"
                        " AND window_start = ?3 AND window_count >= ?4",
    [ST_GROUP_TOOK] = "INSERT INTO queue_groups (tenant, type, window_start, grp, window_count)"
                      " VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT (tenant, type, window_start, grp)"
                      " DO UPDATE SET window_count = window_count + excluded.window_count",
    [ST_GROUP_FORGET] = "DELETE FROM queue_groups WHERE tenant = ?1 AND type = ?2 AND window_start < ?3",
    /* The due queued jobs of one group of a queue: jobs_group, seeking each priority. */
    [ST_GROUP_QUEUED] = "SELECT count(*) FROM jobs WHERE ttkey = ?4 AND priority IN (0, 1, 2) AND grp = ?6"
                        " AND status = 0 AND tenant = ?1 AND type = ?2 AND (run_at IS NULL OR run_at <= ?3)",
    [ST_DEP_ADD] = "INSERT OR IGNORE INTO job_deps (dep_id, job_id) VALUES (?1, ?2)",
    [ST_DEP_LIST] = "SELECT job_id FROM job_deps WHERE dep_id = ?1",
    [ST_DEP_DELETE] = "DELETE FROM job_deps WHERE dep_id = ?1",
    [ST_DEP_MARK] = "UPDATE jobs SET dependents = 1 WHERE id = ?1 AND dependents = 0",
    [ST_BATCH_INSERT] =
        "INSERT INTO batches (id, tenant, total, n_queued, n_running, n_succeeded, n_failed, n_cancelled,"
        " n_partial, callback_url, created_at, finished_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9,"
        " ?10, ?11, ?12)",
    [ST_BATCH_UPDATE] = "UPDATE batches SET n_queued = ?4, n_running = ?5, n_succeeded = ?6, n_failed = ?7,"
                        " n_cancelled = ?8, n_partial = ?9, finished_at = ?12,"
                        " expires_at = ?13 WHERE id = ?1",
    [ST_BATCH_GET] =
        "SELECT id, tenant, total, n_queued, n_running, n_succeeded, n_failed, n_cancelled, n_partial,"
        " callback_url, created_at, finished_at, expires_at FROM batches WHERE id = ?1 AND (?2 IS NULL OR tenant = ?2)",
    [ST_BATCH_SWEEP] = "DELETE FROM batches"
                       " WHERE id IN (SELECT id FROM batches WHERE expires_at <= ?1 LIMIT ?2)",
    [ST_BATCH_JOBS] = SQ_SELECT_JOB "WHERE batch_id = ?1 AND tenant = ?2 AND cseq < ?3 ORDER BY cseq DESC LIMIT ?4",
    [ST_SCHEDULE_INSERT] = "INSERT INTO schedules (tenant, id, spec, tmpl, next_at, last_job, recent, fires, skips, "
                           "catchups, created_at, updated_at, version)"
                           " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)",
    /* The compare-and-set of a fire (store.h, schedule_put): the row only if its next fire time is as read. */
    [ST_SCHEDULE_UPDATE] = "UPDATE schedules SET spec = ?3, tmpl = ?4, next_at = ?5, last_job = ?6, recent = ?7,"
                           " fires = ?8, skips = ?9, catchups = ?10, created_at = ?11, updated_at = ?12, version = ?13"
                           " WHERE tenant = ?1 AND id = ?2 AND next_at IS ?14",
    [ST_SCHEDULE_GET] = "SELECT tenant, id, spec, tmpl, next_at, last_job, recent, fires, skips, catchups, created_at, "
                        "updated_at, version FROM schedules WHERE tenant = ?1 AND id = ?2",
    [ST_SCHEDULE_LIST] =
        "SELECT tenant, id, spec, tmpl, next_at, last_job, recent, fires, skips, catchups, created_at, updated_at, "
        "version FROM schedules WHERE tenant = ?1 AND id > ?2 ORDER BY id LIMIT ?3",
    [ST_SCHEDULE_DELETE] = "DELETE FROM schedules WHERE tenant = ?1 AND id = ?2",
    [ST_SCHEDULE_DUE] = "SELECT tenant, id, spec, tmpl, next_at, last_job, recent, fires, skips, catchups, created_at, "
                        "updated_at, version FROM schedules WHERE next_at IS NOT NULL AND next_at <= ?1"
                        " ORDER BY next_at LIMIT ?2",
};

/* Apply the migrations the file has not seen yet, all in one transaction. 0 or -1 with err filled. */
int ad_sq_migrate(struct ad_conn *c, char *err, size_t errlen)
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
