/*
 * test_store_sqlite.c - the SQLite store: the store contract (store_contract.h) and what is SQLite's own, each
 * test on its own throwaway directory.
 *
 * SQLite's own: the private data directory and the schema it makes, the statements' query plans (every one
 * served by an index), the colliding index keys of tenants and types, the write-ahead log written by walbuf.c in
 * a few calls and checkpointed after the batch, no memory statistics, the rows a transaction reads back without
 * a select, the migrations from older files, and update leaving the fixed columns alone.
 */
/* To reach a connection's sqlite3 handle (store_sqlite_int.h) and the migrations. */
#include "store/sqlite_schema.c"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store_test.h"
#include "tmpdir.h"
#include "write_calls.h"

struct fx {
    char dir[64];   /* mkdtemp root, removed at teardown */
    char data[128]; /* the store's data directory: two levels below dir, to exercise mkdir -p */
    struct ad_store *s;
    struct ad_conn *c;
};

/* The SQL of statement i, NULL past the last one. */
static const char *stmt_sql(size_t i)
{
    return i < ST__COUNT ? ad_sq_stmt_sql[i] : NULL;
}

static void open_store(struct fx *f)
{
    char err[256] = "";
    f->s = ad_store_open(f->data, err, sizeof(err));
    if (f->s == NULL)
        fail_msg("ad_store_open(%s): %s", f->data, err);
    f->c = f->s->ops->connect(f->s, err, sizeof(err));
    if (f->c == NULL)
        fail_msg("connect: %s", err);
}

static void close_store(struct fx *f)
{
    if (f->c != NULL)
        f->s->ops->disconnect(f->c);
    if (f->s != NULL)
        f->s->ops->close(f->s);
    f->c = NULL;
    f->s = NULL;
}

static int setup(void **state)
{
    struct fx *f = calloc(1, sizeof(*f));
    if (tmpdir_make(f->dir, sizeof(f->dir), "store") != 0)
        return -1;
    snprintf(f->data, sizeof(f->data), "%s/a/data", f->dir);
    open_store(f);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fx *f = *state;
    close_store(f);
    tmpdir_remove(f->dir);
    free(f);
    return 0;
}

#include "store_contract.h"

static struct ad_store *sc_open(struct fx *f)
{
    char err[256] = "";
    struct ad_store *s = ad_store_open(f->data, err, sizeof(err));
    if (s == NULL)
        fail_msg("ad_store_open(%s): %s", f->data, err);
    return s;
}

/* On the store's own connection, as SQLite allows one writer: inside f->c's transaction when one is open. */
static void sc_exec_behind(struct fx *f, const char *sql)
{
    char *msg = NULL;
    if (sqlite3_exec(f->c->db, sql, NULL, NULL, &msg) != SQLITE_OK)
        fail_msg("%s: %s", sql, msg);
}

static void test_open_creates_private_dir_and_schema(void **state)
{
    struct fx *f = *state;
    struct stat sb;
    assert_int_equal(stat(f->data, &sb), 0);
    assert_true(S_ISDIR(sb.st_mode));
    assert_int_equal(sb.st_mode & 0777, 0700);
    char path[160];
    snprintf(path, sizeof(path), "%s/acceptd.db", f->data);
    assert_int_equal(stat(path, &sb), 0);
    assert_int_equal(sb.st_mode & 0077, 0);

    sqlite3 *db = NULL;
    assert_int_equal(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    sqlite3_stmt *st = NULL;
    assert_int_equal(sqlite3_prepare_v2(db, "SELECT max(version), count(*) FROM schema_version", -1, &st, NULL),
                     SQLITE_OK);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    assert_int_equal(sqlite3_column_int(st, 0), SQ_SCHEMA_VERSION); /* one row per migration applied */
    assert_int_equal(sqlite3_column_int(st, 1), SQ_SCHEMA_VERSION);
    sqlite3_finalize(st);
    assert_int_equal(sqlite3_prepare_v2(db, "PRAGMA journal_mode", -1, &st, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    assert_string_equal((const char *)sqlite3_column_text(st, 0), "wal");
    sqlite3_finalize(st);
    sqlite3_close(db);
}

static void test_open_dispatches_postgres_and_rejects_bad_dir(void **state)
{
    struct fx *f = *state;
    char err[256] = "";
    /* Both URL schemes go to the PostgreSQL backend (a server that is not there), not to a directory. */
    assert_null(ad_store_open("postgresql:///acceptd?host=/nonexistent-acceptd-socket-dir", err, sizeof(err)));
    assert_non_null(strstr(err, "connect to PostgreSQL"));
    err[0] = '\0';
    assert_null(ad_store_open("postgres:///acceptd?host=/nonexistent-acceptd-socket-dir", err, sizeof(err)));
    assert_non_null(strstr(err, "connect to PostgreSQL"));

    /* A data directory path that runs through a regular file. */
    char path[160];
    snprintf(path, sizeof(path), "%s/file", f->dir);
    FILE *fp = fopen(path, "w");
    assert_non_null(fp);
    fclose(fp);
    snprintf(path, sizeof(path), "%s/file/data", f->dir);
    err[0] = '\0';
    assert_null(ad_store_open(path, err, sizeof(err)));
    assert_non_null(strstr(err, "create data directory"));
}

/* An update writes only the columns that can change: the fixed ones keep what the insert wrote, so the
 * indexes on them (id, tenant, type) are left alone, and so does the trigger on tombstoned. */
static void test_update_leaves_fixed_columns(void **state)
{
    struct fx *f = *state;
    struct ad_job *a = new_job("job_a", "t1", "a", AD_QUEUED, AD_PRIO_NORMAL);
    sc_insert(f, a);
    a->status = AD_RUNNING;
    a->attempt = 1;
    ad_job_set(&a->type, "b");
    ad_job_set(&a->payload, "{\"n\":2}");
    a->priority = AD_PRIO_HIGH;
    a->max_attempts = 9;
    a->created_at = T0 + 7;
    a->tombstoned = 1; /* only the retention sweep tombstones, by a statement of its own */
    assert_int_equal(f->s->ops->job_update(f->c, a), AD_E_OK);

    struct ad_job *g = sc_get(f, f->c, "t1", "job_a");
    assert_int_equal(g->tombstoned, 0);
    assert_int_equal(g->status, AD_RUNNING);
    assert_int_equal(g->attempt, 1);
    assert_string_equal(g->type, "a");
    assert_string_equal(g->payload, "{\"n\":1}");
    assert_int_equal(g->priority, AD_PRIO_NORMAL);
    assert_int_equal(g->max_attempts, 3);
    assert_int_equal(g->created_at, T0);
    ad_job_free(g);
    ad_job_free(a);
}

/* Tenants, and types, whose index keys collide share index ranges and still see only their own jobs. */
static void test_colliding_keys_keep_tenants_and_types_apart(void **state)
{
    struct fx *f = *state;
    assert_int_equal(ad_sq_key("t439599", NULL), ad_sq_key("t622382", NULL));
    assert_int_equal(ad_sq_key("t1", "y821118"), ad_sq_key("t1", "y1219044"));
    sc_insert_new(f, "a1", "t439599", "x", AD_QUEUED, AD_PRIO_NORMAL, 0);
    sc_insert_new(f, "b1", "t622382", "x", AD_QUEUED, AD_PRIO_NORMAL, 0);
    sc_insert_new(f, "b2", "t622382", "x", AD_RUNNING, AD_PRIO_NORMAL, 0);
    sc_insert_new(f, "y1", "t1", "y821118", AD_QUEUED, AD_PRIO_NORMAL, 0);
    sc_insert_new(f, "y2", "t1", "y1219044", AD_QUEUED, AD_PRIO_NORMAL, 0);

    struct ad_list_query q = {.tenant = "t439599", .limit = 1};
    sc_list(f, &q, "a1");
    q.tenant = "t622382";
    q.limit = 50;
    sc_list(f, &q, "b2,b1");
    q.has_status = 1;
    q.status = AD_QUEUED;
    sc_list(f, &q, "b1");
    q = (struct ad_list_query){.tenant = "t1", .type = "y821118", .limit = 1};
    sc_list(f, &q, "y1");
    q.type = "y1219044";
    sc_list(f, &q, "y2");
    sc_changes(f, "t439599", 0, 1, "a1");
    sc_changes(f, "t622382", 0, 50, "b1,b2");
    const char *y[] = {"y821118"}, *x[] = {"x"};
    sc_leasable(f, "t1", y, 1, T0, 1, "y1");
    sc_leasable(f, "t439599", x, 1, T0, 1, "a1");
    sc_leasable(f, "t622382", x, 1, T0, 50, "b1");
}

/* A JSON string payload of n bytes, quotes included; the caller frees. */
static char *string_payload(size_t n)
{
    char *p = ad_malloc(n + 1);
    memset(p, 'x', n);
    p[0] = p[n - 1] = '"';
    p[n] = '\0';
    return p;
}

/* The store opens its database through walbuf.c: a commit of some 30 pages leaves in a few write calls
 * (SQLite alone makes two per page). */
static void test_commit_writes_the_wal_at_once(void **state)
{
    struct fx *f = *state;
    char *payload = string_payload(3001), id[32];
    for (int round = 0; round < 2; round++) { /* the first commit after open also writes the WAL's header */
        assert_int_equal(f->s->ops->begin(f->c), AD_E_OK);
        for (int i = 0; i < 30; i++) {
            snprintf(id, sizeof(id), "w%d-%d", round, i);
            struct ad_job *j = new_job(id, "t1", "x", AD_QUEUED, AD_PRIO_NORMAL);
            ad_job_set(&j->payload, payload);
            sc_insert(f, j);
            ad_job_free(j);
        }
        long before = write_calls();
        assert_int_equal(f->s->ops->commit(f->c), AD_E_OK);
        long calls = write_calls() - before;
        if (round == 1 && calls > 3)
            fail_msg("a commit of 30 jobs of 3 KB took %ld write calls, want at most 3", calls);
    }
    free(payload);
    sc_reopen(f);
    struct ad_job *g = sc_get(f, f->c, "t1", "w1-29");
    assert_int_equal(strlen(g->payload), 3001);
    ad_job_free(g);
}

static off_t db_size(struct fx *f)
{
    char path[256];
    struct stat st;
    snprintf(path, sizeof(path), "%s/acceptd.db", f->data);
    assert_int_equal(stat(path, &st), 0);
    return st.st_size;
}

/* A batch's commit leaves the checkpoint (copying the log into the database file) to after_batch, which the
 * writer runs once the batch's answers are out: the commit that fills the log past 1000 frames does not grow
 * the database file, and after_batch does. */
static void test_checkpoint_runs_after_the_batch(void **state)
{
    struct fx *f = *state;
    char *payload = string_payload(5001), id[32];
    off_t before = db_size(f);
    assert_int_equal(f->s->ops->begin(f->c), AD_E_OK);
    for (int i = 0; i < 1000; i++) { /* 5 MB: about 1,300 pages */
        snprintf(id, sizeof(id), "c%d", i);
        struct ad_job *j = new_job(id, "t1", "x", AD_QUEUED, AD_PRIO_NORMAL);
        ad_job_set(&j->payload, payload);
        sc_insert(f, j);
        ad_job_free(j);
    }
    assert_int_equal(f->s->ops->commit(f->c), AD_E_OK);
    free(payload);
    assert_int_equal(db_size(f), before);
    assert_true(f->c->wal_frames >= 1000);
    f->s->ops->after_batch(f->c);
    assert_true(db_size(f) > before + 1000 * 4096);
    assert_int_equal(f->c->wal_frames, 0);
}

static off_t wal_size(struct fx *f)
{
    char path[256];
    struct stat st;
    snprintf(path, sizeof(path), "%s/acceptd.db-wal", f->data);
    return stat(path, &st) == 0 ? st.st_size : 0;
}

/* Out of room (here the database may not grow past its pages, which SQLite answers as it does a full disk): a write
 * answers storage-full. reclaim copies the log into the database and truncates it, then writes; once there is room
 * again, writes go through on the same connection. */
static void test_full_store_answers_storage_full_and_reclaims(void **state)
{
    struct fx *f = *state;
    char *payload = string_payload(5001), id[32];
    assert_int_equal(f->s->ops->begin(f->c), AD_E_OK);
    for (int i = 0; i < 50; i++) {
        snprintf(id, sizeof(id), "r%d", i);
        struct ad_job *j = new_job(id, "t1", "x", AD_QUEUED, AD_PRIO_NORMAL);
        ad_job_set(&j->payload, payload);
        sc_insert(f, j);
        ad_job_free(j);
    }
    assert_int_equal(f->s->ops->commit(f->c), AD_E_OK);
    off_t log = wal_size(f);
    assert_true(log > 50 * 5000);

    assert_int_equal(sqlite3_exec(f->c->db, "PRAGMA max_page_count = 1", NULL, NULL, NULL), SQLITE_OK);
    struct ad_job *j = new_job("r_full", "t1", "x", AD_QUEUED, AD_PRIO_NORMAL);
    ad_job_set(&j->payload, payload);
    assert_int_equal(f->s->ops->begin(f->c), AD_E_OK);
    assert_int_equal(f->s->ops->job_insert(f->c, j), AD_E_STORAGE_FULL);
    f->s->ops->rollback(f->c);

    assert_int_equal(sqlite3_exec(f->c->db, "PRAGMA max_page_count = 1073741823", NULL, NULL, NULL), SQLITE_OK);
    off_t db = db_size(f);
    assert_int_equal(f->s->ops->reclaim(f->c), AD_E_OK);
    assert_true(db_size(f) > db + 50 * 4096);  /* the log was copied into the database */
    assert_true(wal_size(f) <= 32 + 4 * 4120); /* and truncated: what is left is the probe's write */
    assert_int_equal(f->s->ops->begin(f->c), AD_E_OK);
    sc_insert(f, j);
    assert_int_equal(f->s->ops->commit(f->c), AD_E_OK);
    ad_job_free(j);
    free(payload);
    j = sc_get(f, f->c, "t1", "r_full");
    assert_int_equal(strlen(j->payload), 5001);
    ad_job_free(j);
    sqlite3_stmt *st = NULL; /* the write leaves no row behind */
    assert_int_equal(sqlite3_prepare_v2(f->c->db, "SELECT count(*) FROM meta WHERE key = 'space_probe'", -1, &st, NULL),
                     SQLITE_OK);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    assert_int_equal(sqlite3_column_int(st, 0), 0);
    sqlite3_finalize(st);
}

/* SQLite keeps no memory statistics in this process (their global mutex is taken on every allocation):
 * with them on, the memory in use after storing a job would be counted. */
static void test_no_memory_statistics(void **state)
{
    struct fx *f = *state;
    struct ad_job *j = new_job("job_m", "t1", "x", AD_QUEUED, AD_PRIO_NORMAL);
    sc_insert(f, j);
    ad_job_free(j);
    assert_int_equal(sqlite3_memory_used(), 0);
}

/* The EXPLAIN QUERY PLAN lines of sql, joined by '\n' into buf. */
static void plan(sqlite3 *db, const char *sql, char *buf, size_t size)
{
    char *q = sqlite3_mprintf("EXPLAIN QUERY PLAN %s", sql);
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(db, q, -1, &st, NULL) != SQLITE_OK)
        fail_msg("explain %s: %s", sql, sqlite3_errmsg(db));
    sqlite3_free(q);
    size_t len = 0;
    buf[0] = '\0';
    while (sqlite3_step(st) == SQLITE_ROW && len < size)
        len += (size_t)snprintf(buf + len, size - len, "%s\n", (const char *)sqlite3_column_text(st, 3));
    sqlite3_finalize(st);
}

/* NULL when every table access of the plan goes through an index and nothing is sorted, else the bad line. */
static const char *plan_problem(const char *p)
{
    static char line[256];
    for (const char *s = p; *s != '\0';) {
        const char *nl = strchr(s, '\n');
        size_t n = nl != NULL ? (size_t)(nl - s) : strlen(s);
        snprintf(line, sizeof(line), "%.*s", (int)n, s);
        int full_scan =
            strncmp(line, "SCAN ", 5) == 0 && strstr(line, " USING ") == NULL && strcmp(line, "SCAN CONSTANT ROW") != 0;
        if (full_scan || strstr(line, "TEMP B-TREE") != NULL)
            return line;
        s += n + (nl != NULL);
    }
    return NULL;
}

/* The plan of the one backend statement containing fragment. */
static void plan_of(sqlite3 *db, const char *fragment, char *buf, size_t size)
{
    const char *found = NULL;
    for (size_t i = 0; stmt_sql(i) != NULL; i++) {
        if (strstr(stmt_sql(i), fragment) != NULL) {
            if (found != NULL)
                fail_msg("more than one statement contains \"%s\"", fragment);
            found = stmt_sql(i);
        }
    }
    if (found == NULL)
        fail_msg("no statement contains \"%s\"", fragment);
    plan(db, found, buf, size);
}

static void assert_plan_uses(sqlite3 *db, const char *fragment, const char *index)
{
    char p[2048];
    plan_of(db, fragment, p, sizeof(p));
    if (strstr(p, index) == NULL)
        fail_msg("statement with \"%s\" does not use %s:\n%s", fragment, index, p);
}

static void test_every_statement_uses_an_index(void **state)
{
    struct fx *f = *state;
    char path[160];
    snprintf(path, sizeof(path), "%s/acceptd.db", f->data);
    sqlite3 *db = NULL;
    assert_int_equal(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);

    /* The checker itself must see a full scan and a sort. */
    char p[2048];
    plan(db, "SELECT * FROM jobs WHERE payload = ?1", p, sizeof(p));
    assert_non_null(plan_problem(p));
    plan(db, "SELECT * FROM jobs WHERE tenant = ?1 ORDER BY updated_at", p, sizeof(p));
    assert_non_null(plan_problem(p));
    plan(db, "SELECT * FROM jobs WHERE tkey = ?1 AND status = 0 ORDER BY cseq", p, sizeof(p));
    assert_null(plan_problem(p));

    size_t n = 0;
    for (; stmt_sql(n) != NULL; n++) {
        /* The job counts (GET /v1/stats, GET /metrics) group every row of a tenant, or of the store: a full pass is
         * what they are for, and nothing on a job's path runs them. The tenant's still seeks its rows. */
        if (strstr(stmt_sql(n), "count(*), min(created_at)") != NULL)
            continue;
        plan(db, stmt_sql(n), p, sizeof(p));
        const char *bad = plan_problem(p);
        if (bad != NULL)
            fail_msg("%s\nplan line: %s\nfull plan:\n%s", stmt_sql(n), bad, p);
    }
    assert_true(n >= 20);

    assert_plan_uses(db, "ORDER BY priority DESC, turn, cseq", "jobs_queue");
    assert_plan_uses(db, "AND grp = ?37 AND status = 0", "jobs_group");
    assert_plan_uses(db, "AND grp = ?37 AND status = 0", "jobs_queue");
    assert_plan_uses(db, "seq > ?2 ORDER BY seq", "jobs_tenant_seq");
    assert_plan_uses(db, "ORDER BY lease_expires_at", "jobs_running");
    assert_plan_uses(db, "next_at <= ?1 ORDER BY next_at", "schedules_next");
    assert_plan_uses(db, "unique_key = ?3", "jobs_unique");
    assert_plan_uses(db, "run_at = ?1 AND cseq > ?2", "jobs_scheduled (run_at=? AND rowid>?)");
    assert_plan_uses(db, "SET tombstoned = 1", "jobs_expiry");
    assert_plan_uses(db, "DELETE FROM jobs", "jobs_expiry");
    assert_plan_uses(db, "DELETE FROM idempotency", "idempotency_created");
    assert_plan_uses(db, "FROM job_events WHERE", "PRIMARY KEY");
    assert_plan_uses(db, "WHERE tkey = ?3 AND tenant = ?1 AND tombstoned = 0", "(tkey=?)");
    /* The unfiltered list merges one walk of jobs_tenant_status per status. */
    plan_of(db, "status = 5 AND tenant = ?1 AND cseq < ?2 ORDER BY", p, sizeof(p));
    if (strstr(p, "MERGE (UNION ALL)") == NULL || strstr(p, "jobs_tenant_status") == NULL)
        fail_msg("the unfiltered list is not a merge of jobs_tenant_status walks:\n%s", p);
    assert_plan_uses(db, "status = ?3 AND tenant = ?1 AND cseq < ?2 ORDER BY", "jobs_tenant_status");
    assert_plan_uses(db, "type = ?4 AND tenant = ?1 AND cseq < ?2 ORDER BY", "jobs_tenant_type");
    /* A bulk walk's span and page read jobs_tenant_type by cseq (no sort); its end is the index's last entry. */
    assert_plan_uses(db, "SELECT max(cseq) FROM (SELECT cseq FROM jobs WHERE ttkey", "COVERING INDEX jobs_tenant_type");
    assert_plan_uses(db, "AND (?7 = 0 OR (?7 >> status) & 1)", "jobs_tenant_type (ttkey=? AND cseq>? AND cseq<?)");
    assert_plan_uses(db, "SELECT max(cseq) FROM jobs WHERE ttkey = ?1", "jobs_tenant_type");
    /* A list by updatedAfter: the probe reads jobs_updated alone; the few jobs it finds are read by cseq from it,
     * in order (no sort); the walks by cseq stay off it. */
    assert_plan_uses(db, "LIMIT 1 OFFSET ?6", "COVERING INDEX jobs_updated (tkey=? AND updated_at>?)");
    plan_of(db, "AND cseq < ?2) AND tenant = ?1 ORDER BY", p, sizeof(p));
    if (strstr(p, "jobs_updated") == NULL || strstr(p, "USING INTEGER PRIMARY KEY (rowid=?)") == NULL)
        fail_msg("the list of the few updated jobs is not read by cseq from jobs_updated:\n%s", p);
    int walks = 0;
    for (size_t i = 0; stmt_sql(i) != NULL; i++) {
        if (strstr(stmt_sql(i), "+updated_at > ?5") == NULL)
            continue;
        plan(db, stmt_sql(i), p, sizeof(p));
        if (strstr(p, "jobs_updated") != NULL)
            fail_msg("a walk by cseq uses jobs_updated:\n%s", p);
        walks++;
    }
    assert_int_equal(walks, 4);
    assert_plan_uses(db, "NOT INDEXED WHERE cseq < ?2", "USING INTEGER PRIMARY KEY (rowid<?)");
    /* The delivery thread's read of the due rows, past the endpoints left out, reads no row of the table. */
    assert_plan_uses(db, "webhook_id NOT IN", "USING COVERING INDEX deliveries_due");
    sqlite3_close(db);
}

/* The one unique index of jobs: on id (seq lost its own in migration 5). */
static void assert_unique_indexes_of_jobs(sqlite3 *db, const char *want)
{
    sqlite3_stmt *st = NULL;
    assert_int_equal(sqlite3_prepare_v2(db,
                                        "SELECT group_concat(name) FROM (SELECT ii.name FROM pragma_index_list('jobs')"
                                        " AS il, pragma_index_info(il.name) AS ii WHERE il.\"unique\" = 1 AND"
                                        " il.origin = 'u' ORDER BY ii.name)",
                                        -1, &st, NULL),
                     SQLITE_OK);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    assert_string_equal((const char *)sqlite3_column_text(st, 0), want);
    sqlite3_finalize(st);
}

/* A database of schema 4, with jobs, an event log, attempts and a seq floor above their seqs, gets migrations 5 to
 * 8 when the store opens it: every row and event is kept, seq is unique no more, the next seq is above the floor,
 * only the jobs inserted (leased) from then on have a created_seq (started_seq): those events are not in their
 * logs; and only ended attempts stay in the history (a live one is its running job's own). */
static void test_migrations_5_9_keep_rows_and_the_seq_high_water_mark(void **state)
{
    struct fx *f = *state;
    close_store(f);
    char path[160];
    snprintf(path, sizeof(path), "%s/acceptd.db", f->data);
    unlink(path);
    sqlite3 *db = NULL;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    assert_int_equal(sqlite3_exec(db, "CREATE TABLE schema_version (version INTEGER NOT NULL)", NULL, NULL, NULL),
                     SQLITE_OK);
    for (int v = 0; v < 4; v++) {
        assert_int_equal(sqlite3_exec(db, migrations[v], NULL, NULL, NULL), SQLITE_OK);
        char sql[80];
        snprintf(sql, sizeof(sql), "INSERT INTO schema_version (version) VALUES (%d)", v + 1);
        assert_int_equal(sqlite3_exec(db, sql, NULL, NULL, NULL), SQLITE_OK);
    }
    assert_unique_indexes_of_jobs(db, "id,seq");
    assert_int_equal(
        sqlite3_exec(
            db,
            "INSERT INTO jobs (id, seq, tenant, type, status, progress, priority, payload, attempt, max_attempts,"
            " cancel_requested, timeout_seconds, on_complete_redirect, created_at, updated_at, lease_id,"
            " tombstoned) VALUES"
            " ('a', 7, 't1', 'x', 1, 40, 2, '{\"k\":1}', 1, 3, 0, 0, 0, 100, 200, 'lse_a', 0),"
            " ('b', 9, 't1', 'x', 0, NULL, 1, '{}', 0, 3, 0, 0, 0, 150, 150, NULL, 0);"
            "INSERT INTO job_events (job_id, seq, kind, data) VALUES ('b', 9, 'status', '{}');"
            "INSERT INTO attempts (job_id, attempt, worker, started_at, ended_at, outcome) VALUES"
            " ('a', 1, 'w1', 100, 150, 'released'), ('a', 1, 'w2', 160, NULL, NULL);"
            "INSERT INTO meta (key, value) VALUES ('seq_floor', 1000)",
            NULL, NULL, NULL),
        SQLITE_OK);
    sqlite3_close(db);
    db = NULL;

    open_store(f);
    struct ad_job *g = NULL;
    assert_int_equal(f->s->ops->job_get(f->c, NULL, "a", &g), AD_E_OK);
    assert_int_equal(g->seq, 7);
    assert_int_equal(g->status, AD_RUNNING);
    assert_int_equal(g->progress, 40);
    assert_string_equal(g->payload, "{\"k\":1}");
    assert_string_equal(g->lease_id, "lse_a");
    assert_int_equal(g->created_seq, 0); /* its log holds its first event */
    assert_int_equal(g->started_seq, 0); /* and the running event of its lease */
    int64_t cseq_a = g->cseq;
    ad_job_free(g);
    assert_int_equal(f->s->ops->job_get(f->c, NULL, "b", &g), AD_E_OK);
    assert_int_equal(g->seq, 9);
    assert_true(g->cseq > cseq_a);
    ad_job_free(g);
    struct ad_event_list events;
    assert_int_equal(f->s->ops->events_after(f->c, "b", 0, 10, &events), AD_E_OK);
    assert_int_equal(events.n, 1);
    ad_event_list_free(&events);
    struct ad_attempt_list attempts;
    assert_int_equal(f->s->ops->attempt_list(f->c, "a", &attempts), AD_E_OK);
    assert_int_equal(attempts.n, 1);
    assert_string_equal(attempts.items[0].worker, "w1");
    assert_string_equal(attempts.items[0].outcome, "released");
    ad_attempt_list_free(&attempts);
    int64_t max = 0;
    assert_int_equal(f->s->ops->max_seq(f->c, &max), AD_E_OK);
    assert_int_equal(max, 1000);
    /* Migration 9 keyed the old rows: the indexes find them. */
    struct ad_list_query q = {.tenant = "t1", .limit = 50};
    sc_list(f, &q, "b,a");
    q.type = "x";
    sc_list(f, &q, "b,a");
    sc_changes(f, "t1", 0, 50, "a,b");
    const char *x[] = {"x"};
    sc_leasable(f, "t1", x, 1, T0, 50, "b");
    struct ad_job *c = new_job("c", "t1", "x", AD_QUEUED, AD_PRIO_NORMAL);
    sc_insert(f, c);
    assert_int_equal(c->seq, 1001);
    assert_int_equal(c->created_seq, 1001);
    c->status = AD_RUNNING;
    assert_int_equal(f->s->ops->job_update(f->c, c), AD_E_OK);
    assert_int_equal(f->s->ops->job_get(f->c, NULL, "c", &g), AD_E_OK);
    assert_int_equal(g->seq, 1002);
    assert_int_equal(g->created_seq, 1001); /* the insert's, kept by updates */
    ad_job_free(g);
    ad_job_free(c);
    assert_int_equal(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    assert_unique_indexes_of_jobs(db, "id");
    sqlite3_close(db);
}

/* A write transaction reads a job back as it last updated it, without a select, as long as no other connection
 * committed since (PRAGMA data_version), nothing it wrote was rolled back, and for the tenant asked. */
static void test_updated_rows_read_back_without_a_select(void **state)
{
    struct fx *f = *state;
    const struct ad_store_ops *ops = f->s->ops;
    struct ad_job *j = new_job("kept", "t1", "a", AD_QUEUED, AD_PRIO_NORMAL);
    sc_insert(f, j);
    assert_int_equal(ops->begin(f->c), AD_E_OK);
    j->status = AD_RUNNING;
    assert_int_equal(ops->job_update(f->c, j), AD_E_OK);
    assert_int_equal(ops->commit(f->c), AD_E_OK);

    /* Changed behind the store's back on its own connection: the next transaction still reads its version. */
    assert_int_equal(sqlite3_exec(f->c->db, "UPDATE jobs SET message = 'behind' WHERE id = 'kept'", NULL, NULL, NULL),
                     SQLITE_OK);
    struct ad_job *g = NULL;
    assert_int_equal(ops->begin(f->c), AD_E_OK);
    assert_int_equal(ops->job_get(f->c, "t1", "kept", &g), AD_E_OK);
    assert_job_equal(g, j);
    ad_job_free(g);
    assert_int_equal(ops->job_get(f->c, "t2", "kept", &g), AD_E_NOT_FOUND);
    assert_int_equal(ops->commit(f->c), AD_E_OK);
    assert_int_equal(ops->job_get(f->c, NULL, "kept", &g), AD_E_OK); /* outside a transaction: the file */
    assert_string_equal(g->message, "behind");
    ad_job_free(g);

    /* Another connection commits: the next transaction reads the file. */
    char err[256];
    struct ad_conn *other = ops->connect(f->s, err, sizeof(err));
    assert_non_null(other);
    assert_int_equal(ops->begin(other), AD_E_OK);
    ad_job_set(&j->message, "other");
    assert_int_equal(ops->job_update(other, j), AD_E_OK);
    assert_int_equal(ops->commit(other), AD_E_OK);
    ops->disconnect(other);
    assert_int_equal(ops->begin(f->c), AD_E_OK);
    assert_int_equal(ops->job_get(f->c, NULL, "kept", &g), AD_E_OK);
    assert_string_equal(g->message, "other");
    ad_job_free(g);
    ops->rollback(f->c);

    /* A job with large texts is not kept: the table stays small. */
    struct ad_job *big = new_job("big", "t1", "a", AD_QUEUED, AD_PRIO_NORMAL);
    char payload[SQ_ROW_TEXT_MAX + 16];
    memset(payload, 'x', sizeof(payload) - 1);
    payload[0] = '"';
    payload[sizeof(payload) - 2] = '"';
    payload[sizeof(payload) - 1] = '\0';
    ad_job_set(&big->payload, payload);
    sc_insert(f, big);
    assert_int_equal(ops->begin(f->c), AD_E_OK);
    assert_int_equal(ops->job_update(f->c, big), AD_E_OK);
    assert_int_equal(ops->commit(f->c), AD_E_OK);
    assert_int_equal(sqlite3_exec(f->c->db, "UPDATE jobs SET message = 'behind' WHERE id = 'big'", NULL, NULL, NULL),
                     SQLITE_OK);
    assert_int_equal(ops->begin(f->c), AD_E_OK);
    assert_int_equal(ops->job_get(f->c, NULL, "big", &g), AD_E_OK);
    assert_string_equal(g->message, "behind");
    ad_job_free(g);
    ops->rollback(f->c);
    ad_job_free(big);

    /* A rolled back update is forgotten. */
    assert_int_equal(ops->begin(f->c), AD_E_OK);
    j->status = AD_SUCCEEDED;
    assert_int_equal(ops->job_update(f->c, j), AD_E_OK);
    ops->rollback(f->c);
    assert_int_equal(ops->begin(f->c), AD_E_OK);
    assert_int_equal(ops->job_get(f->c, NULL, "kept", &g), AD_E_OK);
    assert_int_equal(g->status, AD_RUNNING);
    ad_job_free(g);
    ops->rollback(f->c);
    ad_job_free(j);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        STORE_CONTRACT_TESTS(setup, teardown),
        STORE_CONTRACT_SINGLE_NODE_TESTS(setup, teardown),
        cmocka_unit_test_setup_teardown(test_open_creates_private_dir_and_schema, setup, teardown),
        cmocka_unit_test_setup_teardown(test_open_dispatches_postgres_and_rejects_bad_dir, setup, teardown),
        cmocka_unit_test_setup_teardown(test_update_leaves_fixed_columns, setup, teardown),
        cmocka_unit_test_setup_teardown(test_colliding_keys_keep_tenants_and_types_apart, setup, teardown),
        cmocka_unit_test_setup_teardown(test_commit_writes_the_wal_at_once, setup, teardown),
        cmocka_unit_test_setup_teardown(test_checkpoint_runs_after_the_batch, setup, teardown),
        cmocka_unit_test_setup_teardown(test_full_store_answers_storage_full_and_reclaims, setup, teardown),
        cmocka_unit_test_setup_teardown(test_no_memory_statistics, setup, teardown),
        cmocka_unit_test_setup_teardown(test_every_statement_uses_an_index, setup, teardown),
        cmocka_unit_test_setup_teardown(test_updated_rows_read_back_without_a_select, setup, teardown),
        cmocka_unit_test_setup_teardown(test_migrations_5_9_keep_rows_and_the_seq_high_water_mark, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
