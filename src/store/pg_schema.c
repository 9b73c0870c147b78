/*
 * pg_schema.c - the PostgreSQL store's schema and statements: the migrations applied at open, under a lock so
 * that nodes starting together take turns, and the text of every prepared statement (indexed by enum pg_stmt,
 * store_pg_int.h). It runs nothing but the migrations: statements are sent by pg_conn.c.
 */
#include "store/store_pg_int.h"

#include <stdio.h>
#include <stdlib.h>

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
    /* 9: the table of the space probe (store_pg.c, pg_reclaim), in the tablespace of the other tables. */
    "CREATE TABLE acceptd_space (n int);",
    /* 10: the job's group ("" for none) and turn (job.h; SQLite's migration 13). jobs_queue holds the queue in
     * lease order, by turn within a priority; jobs_group finds a group's last turn at insert (PG_TURN_EXPR). The
     * jobs queued before keep turn 0: they go first, oldest first, as they would have. It may run again over
     * itself (test_text_columns_compare_bytes runs 8 and on again). */
    ("ALTER TABLE jobs ADD COLUMN IF NOT EXISTS grp text COLLATE \"C\" NOT NULL DEFAULT '';"
     "ALTER TABLE jobs ADD COLUMN IF NOT EXISTS turn bigint NOT NULL DEFAULT 0;"
     "DROP INDEX jobs_queue;"
     "CREATE INDEX jobs_queue ON jobs (tenant, type, priority DESC, turn, cseq) WHERE status = 0;"
     "CREATE INDEX IF NOT EXISTS jobs_group ON jobs (tenant, type, priority, grp, turn) WHERE status = 0;"),
    /* 11 (SQLite's 14): queue settings, one row per tenant and type, and the type's rate window
     * (pg_queue.c). */
    ("CREATE TABLE queues (tenant text COLLATE \"C\" NOT NULL, type text COLLATE \"C\" NOT NULL,"
     " paused boolean NOT NULL, concurrency int, group_concurrency int, rate_limit int, rate_period bigint,"
     " group_rate_limit int, group_rate_period bigint, window_start bigint NOT NULL, window_count int NOT NULL,"
     " PRIMARY KEY (tenant, type));"),
    /* 12 (SQLite's 15): a job's uniqueKey, and the live jobs (queued or running) that have one, by tenant, type and
     * key: what a submit with a uniqueKey looks up (ST_UNIQUE). IF NOT EXISTS: test_text_columns_compare_bytes takes
     * the schema back to version 7 and migrates it again. */
    ("ALTER TABLE jobs ADD COLUMN IF NOT EXISTS unique_key text COLLATE \"C\";"
     "CREATE INDEX IF NOT EXISTS jobs_unique ON jobs (tenant, type, unique_key, cseq) WHERE unique_key IS NOT NULL AND "
     "status <= 1;"),
    /* 13 (SQLite's 16): the rate windows of the groups of a queue with a groupRateLimit (pg_queue.c): one row per
     * group leased in the current window; the rows of older windows are deleted as a lease writes. */
    ("CREATE TABLE IF NOT EXISTS queue_groups (tenant text COLLATE \"C\" NOT NULL, type text COLLATE \"C\" NOT NULL,"
     " window_start bigint NOT NULL, grp text COLLATE \"C\" NOT NULL, window_count int NOT NULL,"
     " PRIMARY KEY (tenant, type, window_start, grp));"),
    /* 14 (SQLite's 17): a job's trace context, kept from its submit, and a delivery's, copied from its job
     * (docs/tracing.md); NULL when the submit had none. */
    ("ALTER TABLE jobs ADD COLUMN IF NOT EXISTS traceparent text COLLATE \"C\";"
     "ALTER TABLE jobs ADD COLUMN IF NOT EXISTS tracestate text COLLATE \"C\";"
     "ALTER TABLE deliveries ADD COLUMN IF NOT EXISTS traceparent text COLLATE \"C\";"
     "ALTER TABLE deliveries ADD COLUMN IF NOT EXISTS tracestate text COLLATE \"C\";"),
    /* 15 (SQLite's 18): dependencies (core/deps.c): a job's count of unfinished dependencies (a queued job with
     * deps > 0 is not leased), the ids it named and onDependencyFailure, and the edges by dependency, which the end
     * of a job takes (deletes, returning them) to find the jobs waiting for it; batches (core/batches.c): a row
     * each with its jobs counted by status, and the jobs of a batch by creation. */
    ("ALTER TABLE jobs ADD COLUMN IF NOT EXISTS deps int NOT NULL DEFAULT 0;"
     "ALTER TABLE jobs ADD COLUMN IF NOT EXISTS depends_on text COLLATE \"C\";"
     "ALTER TABLE jobs ADD COLUMN IF NOT EXISTS dep_run int NOT NULL DEFAULT 0;"
     "CREATE TABLE IF NOT EXISTS job_deps (dep_id text COLLATE \"C\" NOT NULL, job_id text COLLATE \"C\" NOT NULL,"
     " PRIMARY KEY (dep_id, job_id));"
     "ALTER TABLE jobs ADD COLUMN IF NOT EXISTS batch_id text COLLATE \"C\";"
     "ALTER TABLE jobs ADD COLUMN IF NOT EXISTS dependents int NOT NULL DEFAULT 0;"
     "ALTER TABLE jobs ALTER COLUMN depends_on TYPE text COLLATE \"C\","
     " ALTER COLUMN batch_id TYPE text COLLATE \"C\";"
     "CREATE INDEX IF NOT EXISTS jobs_batch ON jobs (batch_id, cseq) WHERE batch_id IS NOT NULL;"
     "CREATE TABLE IF NOT EXISTS batches (id text COLLATE \"C\" PRIMARY KEY, tenant text COLLATE \"C\" NOT NULL,"
     " total int NOT NULL, n_queued int NOT NULL, n_running int NOT NULL, n_succeeded int NOT NULL,"
     " n_failed int NOT NULL, n_cancelled int NOT NULL, n_partial int NOT NULL, callback_url text COLLATE \"C\","
     " created_at bigint NOT NULL, finished_at bigint);"),
    /* 16 (SQLite's 19): schedules (pg_schedule.c), their next fire times in one index (every node's engine reads
     * its head), and the run of a schedule that made a job (job.h, schedule). */
    ("ALTER TABLE jobs ADD COLUMN IF NOT EXISTS schedule text COLLATE \"C\";"
     "CREATE TABLE IF NOT EXISTS schedules (tenant text COLLATE \"C\" NOT NULL, id text COLLATE \"C\" NOT NULL,"
     " spec text COLLATE \"C\" NOT NULL, tmpl text COLLATE \"C\" NOT NULL, next_at bigint,"
     " last_job text COLLATE \"C\", recent text COLLATE \"C\" NOT NULL,"
     " fires bigint NOT NULL, skips bigint NOT NULL, catchups bigint NOT NULL, created_at bigint NOT NULL,"
     " updated_at bigint NOT NULL, version bigint NOT NULL, PRIMARY KEY (tenant, id));"
     "CREATE INDEX IF NOT EXISTS schedules_next ON schedules (next_at) WHERE next_at IS NOT NULL;"),
    /* 17 (SQLite's 20): a batch's expiry, the latest of its jobs' (set as each ends; NULL while it runs), by which
     * it answers 410 and then goes in the sweep (core/batches.c). */
    ("ALTER TABLE batches ADD COLUMN IF NOT EXISTS expires_at bigint;"
     "CREATE INDEX IF NOT EXISTS batches_expiry ON batches (expires_at) WHERE expires_at IS NOT NULL;"),
};
#define PG_SCHEMA_VERSION ((int)(sizeof(migrations) / sizeof(migrations[0])))

const char *const ad_pg_stmt_sql[ST__COUNT] = {
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
    /* The space probe (pg_reclaim): a new, empty file for the table, then a row, which extends it by a page. */
    [ST_SPACE_CLEAR] = "TRUNCATE acceptd_space",
    [ST_SPACE_PROBE] = "INSERT INTO acceptd_space (n) VALUES (1)",
    [ST_INSERT] =
        "INSERT INTO jobs (" PG_INSERT_COLS ") VALUES (" PG_INSERT_PARAMS PG_TURN_EXPR ") RETURNING turn, cseq",
    /* The turn given: one past the last insert's of the same group in the transaction (pg_turn.c). */
    [ST_INSERT_TURN] = "INSERT INTO jobs (" PG_INSERT_COLS ") VALUES (" PG_INSERT_PARAMS "$41)",
    /* The due queued jobs of some groups of a queue: jobs_group, seeking each priority and group. */
    [ST_GROUP_QUEUED] = "SELECT count(*) FROM jobs WHERE tenant = $1 AND type = $2 AND priority = ANY('{0,1,2}'::int[])"
                        " AND grp = ANY($4::text[]) AND status = 0 AND (run_at IS NULL OR run_at <= $3)",
    [ST_UPDATE] = "UPDATE jobs SET " AD_JOB_COLUMNS(PG_COL_SET) "seq = " PG_SEQ_PARAM
                                                                ", started_seq = $33, deps = $34 WHERE id = $1",
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
    /* Per type (each type's turns are its own), one type after another; several are merged in C (ad_lease_merge). */
    [ST_LEASABLE] =
        "SELECT j.* FROM unnest($2::text[]) WITH ORDINALITY AS t (type, i), LATERAL (" PG_SELECT_JOB
        "WHERE status = 0 AND tenant = $1 AND type = t.type AND (run_at IS NULL OR run_at <= $3) AND deps = 0"
        " ORDER BY priority DESC, turn, cseq LIMIT $4 FOR UPDATE SKIP LOCKED) j"
        " ORDER BY t.i, j.priority DESC, j.turn, j.cseq",
    [ST_RUNNING] = PG_SELECT_JOB "WHERE status = 1 ORDER BY lease_expires_at",
    [ST_SCHEDULED] = PG_SELECT_JOB "WHERE status = 0 AND run_at IS NOT NULL AND (run_at, cseq) > ($1, $2)"
                                   " ORDER BY run_at, cseq LIMIT $3",
    /* A bulk walk (pg_job_bulk_page): where it ends, how far a page reaches (limit entries of jobs_tenant_type,
     * whatever their status), and the jobs of that span that match. */
    [ST_BULK_END] = "SELECT max(cseq) FROM jobs WHERE tenant = $1 AND type = $2",
    [ST_BULK_SPAN] = "SELECT max(cseq) FROM (SELECT cseq FROM jobs WHERE tenant = $1 AND type = $2 AND cseq > $3"
                     " AND cseq <= $4 ORDER BY cseq LIMIT $5) w",
    [ST_BULK_PAGE] = PG_SELECT_JOB "WHERE tenant = $1 AND type = $2 AND cseq > $3 AND cseq <= $4"
                                   " AND tombstoned = 0 AND (expires_at IS NULL OR expires_at > $5::bigint)"
                                   " AND ($6::int = 0 OR ($6::int >> status) & 1 = 1)"
                                   " AND ($7::bigint = 0 OR created_at < $7::bigint)"
                                   " AND ($8::bigint = 0 OR created_at > $8::bigint)"
                                   " AND ($9::text IS NULL OR grp = $9::text) ORDER BY cseq",
    [ST_UNIQUE] = PG_SELECT_JOB "WHERE tenant = $1 AND type = $2 AND unique_key = $3 AND status <= 1"
                                " ORDER BY cseq LIMIT 1",
    [ST_SET_PAYLOAD] = "UPDATE jobs SET payload = $2 WHERE id = $1",
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
    [ST_WEBHOOK_PUT] = "INSERT INTO webhooks (" AD_WEBHOOK_COLS ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)"
                       " ON CONFLICT (id) DO UPDATE SET url = excluded.url, events = excluded.events,"
                       " secret = excluded.secret, prev_secret = excluded.prev_secret,"
                       " prev_until = excluded.prev_until, disabled_at = excluded.disabled_at,"
                       " disabled_reason = excluded.disabled_reason",
    [ST_WEBHOOK_GET] = "SELECT " AD_WEBHOOK_COLS " FROM webhooks WHERE id = $1 AND ($2::text IS NULL OR tenant = $2)",
    [ST_WEBHOOK_CALLBACK] = "SELECT " AD_WEBHOOK_COLS " FROM webhooks WHERE tenant = $1 AND url IS NULL",
    [ST_WEBHOOK_LIST] = "SELECT " AD_WEBHOOK_COLS " FROM webhooks WHERE tenant = $1 AND url IS NOT NULL"
                        " AND ($2::int = 0 OR disabled_at IS NULL) ORDER BY created_at, ord",
    [ST_WEBHOOK_DELETE] = "DELETE FROM webhooks WHERE id = $1 AND tenant = $2 AND url IS NOT NULL",
    [ST_DELIVERY_INSERT] = "INSERT INTO deliveries (seq, " AD_DELIVERY_COLS ")"
                           " VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18)",
    [ST_DELIVERY_UPDATE] = "UPDATE deliveries SET state = $2, attempts = $3, next_at = $4, last_at = $5,"
                           " last_status = $6, last_error = $7 WHERE seq = $1",
    [ST_DELIVERY_GET] = "SELECT seq, " AD_DELIVERY_COLS " FROM deliveries WHERE id = $1 AND tenant = $2",
    [ST_DELIVERY_GET_SEQ] = "SELECT seq, " AD_DELIVERY_COLS " FROM deliveries WHERE seq = $1",
    [ST_DELIVERY_DUE] = "SELECT seq, next_at, webhook_id FROM deliveries WHERE state = 0"
                        " AND webhook_id <> ALL ($2::text[]) ORDER BY next_at, seq LIMIT $1",
    [ST_DELIVERY_LIST] = "SELECT seq, " AD_DELIVERY_COLS " FROM deliveries WHERE webhook_id = $1 AND seq < $2"
                         " ORDER BY seq DESC LIMIT $3",
    [ST_DELIVERY_LIST_STATE] = "SELECT seq, " AD_DELIVERY_COLS " FROM deliveries WHERE webhook_id = $1"
                               " AND state = $4 AND seq < $2 ORDER BY seq DESC LIMIT $3",
    [ST_DELIVERY_ABANDON] = "UPDATE deliveries SET state = 2, next_at = NULL, last_error = $2"
                            " WHERE webhook_id = $1 AND state = 0",
    [ST_DELIVERY_SWEEP] = "DELETE FROM deliveries"
                          " WHERE seq IN (SELECT seq FROM deliveries WHERE state != 0 AND created_at < $1 LIMIT $2)",
    [ST_DELIVERY_CLAIM] = "UPDATE deliveries SET next_at = $3, claimed_by = $4"
                          " WHERE seq = $1 AND state = 0 AND next_at <= $2",
    [ST_DELIVERY_RELEASE] = "UPDATE deliveries SET next_at = $2, claimed_by = NULL WHERE claimed_by = $1 AND state = 0",
    [ST_QUEUE_GET] = "SELECT " PG_QUEUE_COLS " FROM queues WHERE tenant = $1 AND type = $2",
    [ST_QUEUE_PUT] = "INSERT INTO queues (" PG_QUEUE_COLS ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)"
                     " ON CONFLICT (tenant, type) DO UPDATE SET paused = excluded.paused,"
                     " concurrency = excluded.concurrency, group_concurrency = excluded.group_concurrency,"
                     " rate_limit = excluded.rate_limit, rate_period = excluded.rate_period,"
                     " group_rate_limit = excluded.group_rate_limit, group_rate_period = excluded.group_rate_period,"
                     " window_start = excluded.window_start, window_count = excluded.window_count",
    [ST_QUEUE_LIST] = "SELECT " PG_QUEUE_COLS " FROM queues WHERE tenant = $1 ORDER BY type",
    /* Queued through jobs_queue, running through jobs_tenant_status: for the queue's view; a lease counts the
     * running alone (ST_QUEUE_RUNNING). */
    [ST_QUEUE_COUNTS] = "SELECT (SELECT count(*) FROM jobs WHERE tenant = $1 AND type = $2 AND status = 0"
                        " AND (run_at IS NULL OR run_at <= $3)), (" PG_QUEUE_RUNNING "), (SELECT count(*) FROM jobs"
                        " WHERE tenant = $1 AND type = $2 AND status = 0 AND run_at > $3)",
    [ST_QUEUE_RUNNING] = PG_QUEUE_RUNNING,
    /* Per-group limits: the running jobs of the queue by group, and the groups' rate windows (queue_groups, whose key
     * leads with the queue and the window, so that a window's rows and the older windows are each one range). */
    [ST_GROUP_RUNNING] = "SELECT grp, count(*) FROM jobs WHERE tenant = $1 AND status = 1 AND type = $2"
                         " GROUP BY grp HAVING count(*) >= $3::bigint",
    [ST_GROUP_WINDOW] = "SELECT grp, window_count FROM queue_groups WHERE tenant = $1 AND type = $2"
                        " AND window_start = $3 AND window_count >= $4",
    [ST_GROUP_TOOK] = "INSERT INTO queue_groups (tenant, type, window_start, grp, window_count)"
                      " VALUES ($1, $2, $3, $4, $5) ON CONFLICT (tenant, type, window_start, grp)"
                      " DO UPDATE SET window_count = queue_groups.window_count + excluded.window_count",
    [ST_GROUP_FORGET] = "DELETE FROM queue_groups WHERE tenant = $1 AND type = $2 AND window_start < $3",
    /* job_leasable_except: the first $6 entries of the queue in lease order (jobs_queue, with grp from the row),
     * those of no group in $5, each locked as it is taken, at most $4; the outer order is the walk's own, so the
     * walk stops once $4 are found. */
    [ST_LEASABLE_EXCEPT] =
        "SELECT j.* FROM (SELECT cseq, grp, priority, turn FROM jobs WHERE status = 0 AND tenant = $1"
        " AND type = $2 AND (run_at IS NULL OR run_at <= $3) AND deps = 0 ORDER BY priority DESC, turn, cseq"
        " LIMIT $6) w, LATERAL (" PG_SELECT_JOB "WHERE cseq = w.cseq AND status = 0"
        " FOR UPDATE SKIP LOCKED) j WHERE w.grp <> ALL($5::text[])"
        " ORDER BY w.priority DESC, w.turn, w.cseq LIMIT $4",
    [ST_DEP_ADD] = "INSERT INTO job_deps (dep_id, job_id) VALUES ($1, $2) ON CONFLICT DO NOTHING",
    [ST_DEP_TAKE] = "DELETE FROM job_deps WHERE dep_id = $1 RETURNING job_id",
    [ST_DEP_MARK] = "UPDATE jobs SET dependents = 1 WHERE id = $1 AND dependents = 0",
    [ST_BATCH_INSERT] =
        "INSERT INTO batches (id, tenant, total, n_queued, n_running, n_succeeded, n_failed, n_cancelled,"
        " n_partial, callback_url, created_at, finished_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9,"
        " $10, $11, $12)",
    [ST_BATCH_UPDATE] = "UPDATE batches SET n_queued = $2, n_running = $3, n_succeeded = $4, n_failed = $5,"
                        " n_cancelled = $6, n_partial = $7, finished_at = $8,"
                        " expires_at = $9 WHERE id = $1",
    [ST_BATCH_GET] =
        "SELECT id, tenant, total, n_queued, n_running, n_succeeded, n_failed, n_cancelled, n_partial,"
        " callback_url, created_at, finished_at, expires_at FROM batches WHERE id = $1 AND ($2::text IS NULL"
        " OR tenant = $2)",
    [ST_BATCH_SWEEP] = "DELETE FROM batches WHERE id IN (SELECT id FROM batches WHERE expires_at <= $1 LIMIT $2)",
    [ST_BATCH_JOBS] = PG_SELECT_JOB "WHERE batch_id = $1 AND tenant = $2 AND cseq < $3 ORDER BY cseq DESC LIMIT $4",
    [ST_SCHEDULE_INSERT] = "INSERT INTO schedules (tenant, id, spec, tmpl, next_at, last_job, recent, fires, skips, "
                           "catchups, created_at, updated_at, version)"
                           " VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)",
    /* The compare-and-set of a fire (store.h, schedule_put): the row only if its next fire time is as read. */
    [ST_SCHEDULE_UPDATE] = "UPDATE schedules SET spec = $3, tmpl = $4, next_at = $5, last_job = $6, recent = $7,"
                           " fires = $8, skips = $9, catchups = $10, created_at = $11, updated_at = $12, version = $13"
                           " WHERE tenant = $1 AND id = $2 AND next_at IS NOT DISTINCT FROM $14::bigint",
    [ST_SCHEDULE_GET] = "SELECT tenant, id, spec, tmpl, next_at, last_job, recent, fires, skips, catchups, created_at, "
                        "updated_at, version FROM schedules WHERE tenant = $1 AND id = $2",
    [ST_SCHEDULE_LIST] =
        "SELECT tenant, id, spec, tmpl, next_at, last_job, recent, fires, skips, catchups, created_at, updated_at, "
        "version FROM schedules WHERE tenant = $1 AND id > $2 ORDER BY id LIMIT $3",
    [ST_SCHEDULE_DELETE] = "DELETE FROM schedules WHERE tenant = $1 AND id = $2",
    [ST_SCHEDULE_DUE] = "SELECT tenant, id, spec, tmpl, next_at, last_job, recent, fires, skips, catchups, created_at, "
                        "updated_at, version FROM schedules WHERE next_at IS NOT NULL AND next_at <= $1"
                        " ORDER BY next_at LIMIT $2",
};

/* The list variants do not all mention every parameter, so their types are declared: text, bigint, int,
 * text, bigint, bigint (the OIDs of pg_type). */
const Oid ad_pg_list_param_types[6] = {25, 20, 23, 25, 20, 20};
/* ST_UPDATE's: text for the fixed columns it does not name (but id, in its WHERE), the rest left to the server. */
#define PG_UPDATE_TYPE(name, kind, n, fixed) (fixed) && (n) != 1 ? 25 : 0,
const Oid ad_pg_update_param_types[33] = {AD_JOB_COLUMNS(PG_UPDATE_TYPE) 0, 0};

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
int ad_pg_migrate(PGconn *pg, char *err, size_t errlen)
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
