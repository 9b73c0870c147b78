/*
 * test_store_pg.c - the PostgreSQL store: the store contract (store_contract.h) and what is PostgreSQL's own,
 * against the database named by ACCEPTD_TEST_PG (a URL; without it the binary fails: `make blackbox-pg` runs it,
 * `make unit` does not).
 *
 * Each test runs in a schema of its own (created at setup, dropped at teardown, selected with search_path in
 * the URL), so every test starts from an empty database and migrates it. PostgreSQL's own: migrations
 * (idempotent, two nodes at once), cseq drawn from the seq counter, NULL columns, a batch larger than the
 * pipeline's interval, a poisoned batch, the global seq order across two nodes, the write lock and the leasing
 * that passes over locked rows, delivery claims between nodes, the feed losing its connection, and reconnecting after
 * the server dropped the connections.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <libpq-fe.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "store_test.h"

static const char *base_url; /* ACCEPTD_TEST_PG */

struct fx {
    char schema[32];
    char *url; /* base_url with this test's search_path */
    struct ad_store *s;
    struct ad_conn *c;
    const struct ad_store_ops *ops;
};

/* ---- helpers ---- */

static void quiet(void *arg, const char *msg)
{
}

static PGconn *raw_connect(const char *url)
{
    PGconn *pg = PQconnectdb(url);
    if (PQstatus(pg) != CONNECTION_OK)
        fail_msg("connect %s: %s", url, PQerrorMessage(pg));
    PQsetNoticeProcessor(pg, quiet, NULL); /* DROP SCHEMA ... CASCADE lists what it drops */
    return pg;
}

/* Run sql on a raw connection; the first value of the first row (empty when none), in buf. */
static const char *raw_exec(PGconn *pg, const char *sql, char *buf, size_t size)
{
    PGresult *r = PQexec(pg, sql);
    ExecStatusType st = PQresultStatus(r);
    if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK)
        fail_msg("%s: %s", sql, PQerrorMessage(pg));
    snprintf(buf, size, "%s", st == PGRES_TUPLES_OK && PQntuples(r) > 0 ? PQgetvalue(r, 0, 0) : "");
    PQclear(r);
    return buf;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Kill the server connections (other than its own) that match `where` on pg_stat_activity, then give
 * them a moment to go; returns how many. */
static long terminate_backends(const char *where)
{
    PGconn *pg = raw_connect(base_url);
    char sql[256], buf[64];
    snprintf(sql, sizeof(sql),
             "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE %s AND pid <> pg_backend_pid()",
             where);
    long n = strtol(raw_exec(pg, sql, buf, sizeof(buf)), NULL, 10);
    PQfinish(pg);
    sleep_ms(100);
    return n;
}

/* A raw connection inside this test's schema. */
static PGconn *raw_schema(struct fx *f)
{
    return raw_connect(f->url);
}

static struct ad_store *open_store(struct fx *f)
{
    char err[256] = "";
    struct ad_store *s = ad_store_open(f->url, err, sizeof(err));
    if (s == NULL)
        fail_msg("ad_store_open: %s", err);
    return s;
}

static struct ad_conn *connect_conn(struct ad_store *s)
{
    char err[256] = "";
    struct ad_conn *c = s->ops->connect(s, err, sizeof(err));
    if (c == NULL)
        fail_msg("connect: %s", err);
    return c;
}

static int setup(void **state)
{
    struct fx *f = calloc(1, sizeof(*f));
    uint8_t raw[6];
    ad_random_bytes(raw, sizeof(raw));
    char hex[13];
    ad_hex_encode(raw, sizeof(raw), hex);
    snprintf(f->schema, sizeof(f->schema), "t_%s", hex);
    /* lock_timeout: a statement that waits for a lock it should skip fails the test instead of hanging it. */
    f->url = ad_asprintf("%s%coptions=-csearch_path%%3D%s%%20-clock_timeout%%3D10000", base_url,
                         strchr(base_url, '?') != NULL ? '&' : '?', f->schema);
    PGconn *pg = raw_connect(base_url);
    char buf[64], sql[96];
    snprintf(sql, sizeof(sql), "CREATE SCHEMA %s", f->schema);
    raw_exec(pg, sql, buf, sizeof(buf));
    PQfinish(pg);
    f->s = open_store(f);
    f->c = connect_conn(f->s);
    f->ops = f->s->ops;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fx *f = *state;
    if (f->c != NULL)
        f->ops->disconnect(f->c);
    if (f->s != NULL)
        f->ops->close(f->s);
    PGconn *pg = raw_connect(base_url);
    char buf[64], sql[96];
    snprintf(sql, sizeof(sql), "DROP SCHEMA %s CASCADE", f->schema);
    raw_exec(pg, sql, buf, sizeof(buf));
    PQfinish(pg);
    free(f->url);
    free(f);
    return 0;
}

/* Insert a job (in its own transaction unless one is open) and forget it; its seq. */
static int64_t insert_new(struct fx *f, struct ad_conn *c, const char *id, const char *tenant, const char *type,
                          enum ad_status status, enum ad_priority priority, int64_t run_at)
{
    struct ad_job *j = new_job(id, tenant, type, status, priority);
    j->run_at = run_at;
    assert_int_equal(f->ops->job_insert(c, j), AD_E_OK);
    int64_t seq = j->seq;
    ad_job_free(j);
    return seq;
}

static struct ad_job *get(struct fx *f, struct ad_conn *c, const char *tenant, const char *id)
{
    struct ad_job *j = NULL;
    ad_err e = f->ops->job_get(c, tenant, id, &j);
    if (e != AD_E_OK)
        fail_msg("job_get %s: %s", id, ad_err_code(e));
    assert_non_null(j);
    return j;
}

static void assert_not_found(struct fx *f, struct ad_conn *c, const char *tenant, const char *id)
{
    struct ad_job *j = (struct ad_job *)1;
    assert_int_equal(f->ops->job_get(c, tenant, id, &j), AD_E_NOT_FOUND);
    assert_null(j);
}

/* ---- the contract ---- */

#include "store_contract.h"

static struct ad_store *sc_open(struct fx *f)
{
    return open_store(f);
}

/* On a connection of its own, committed at once (PostgreSQL has no writer of the file to share). */
static void sc_exec_behind(struct fx *f, const char *sql)
{
    PGconn *pg = raw_schema(f);
    char buf[64];
    raw_exec(pg, sql, buf, sizeof(buf));
    PQfinish(pg);
}

/* ---- migrations ---- */

struct opener {
    struct fx *f;
    pthread_barrier_t *go;
    struct ad_store *s;
    char err[256];
};

static void *open_thread(void *arg)
{
    struct opener *o = arg;
    pthread_barrier_wait(o->go);
    o->s = ad_store_open(o->f->url, o->err, sizeof(o->err));
    return NULL;
}

/* Two nodes migrating one empty schema at the same moment both succeed, and the schema is made once; opening
 * again changes nothing. */
static void test_migrations_concurrent_and_idempotent(void **state)
{
    struct fx *f = *state;
    /* Start from an empty schema again: setup's store has migrated this one. */
    f->ops->disconnect(f->c);
    f->ops->close(f->s);
    f->c = NULL;
    f->s = NULL;
    PGconn *pg = raw_schema(f);
    char buf[256], sql[128];
    snprintf(sql, sizeof(sql), "DROP SCHEMA %s CASCADE; CREATE SCHEMA %s", f->schema, f->schema);
    raw_exec(pg, sql, buf, sizeof(buf));
    assert_string_equal(
        raw_exec(pg, "SELECT count(*) FROM pg_tables WHERE schemaname = current_schema()", buf, sizeof(buf)), "0");

    for (int round = 0; round < 3; round++) {
        pthread_barrier_t go;
        pthread_barrier_init(&go, NULL, 2);
        struct opener o[2] = {{.f = f, .go = &go}, {.f = f, .go = &go}};
        pthread_t t[2];
        for (int i = 0; i < 2; i++)
            assert_int_equal(pthread_create(&t[i], NULL, open_thread, &o[i]), 0);
        for (int i = 0; i < 2; i++)
            pthread_join(t[i], NULL);
        pthread_barrier_destroy(&go);
        for (int i = 0; i < 2; i++) {
            if (o[i].s == NULL)
                fail_msg("round %d, node %d: %s", round, i, o[i].err);
            o[i].s->ops->close(o[i].s);
        }
        assert_string_equal(
            raw_exec(pg, "SELECT count(*) || ':' || max(version) FROM acceptd_schema", buf, sizeof(buf)), "17:17");
        assert_string_equal(raw_exec(pg, "SELECT count(*) || ':' || max(seq) FROM acceptd_counter", buf, sizeof(buf)),
                            "1:0");
    }
    /* The schema is the whole one: every table the store uses. */
    assert_string_equal(
        raw_exec(pg,
                 "SELECT string_agg(tablename, ',' ORDER BY tablename) FROM pg_tables"
                 " WHERE schemaname = current_schema()",
                 buf, sizeof(buf)),
        "acceptd_counter,acceptd_schema,acceptd_space,artifact_chunks,artifact_uploads,attempts,batches,deliveries,"
        "idempotency,job_deps,job_events,jobs,queue_groups,queues,"
        "schedules,webhooks");
    /* A database from a newer acceptd is refused, not downgraded. */
    raw_exec(pg, "INSERT INTO acceptd_schema (version) VALUES (99)", buf, sizeof(buf));
    char err[256] = "";
    assert_null(ad_store_open(f->url, err, sizeof(err)));
    assert_non_null(strstr(err, "newer than this acceptd"));
    PQfinish(pg);
}

/* The text columns of the store's tables, as "n:m": n of them, m not in the "C" collation. */
#define TEXT_COLLATIONS                                                                                                \
    "SELECT count(*) || ':' || count(*) FILTER (WHERE collation_name IS DISTINCT FROM 'C')"                            \
    " FROM information_schema.columns WHERE table_schema = current_schema() AND data_type = 'text'"

/* Migration 8 puts every text column in the "C" collation, on a schema that has rows: the indexes rebuilt
 * still find them, the foreign keys still hold, and a job removed takes its attempts and events with it. */
static void test_text_columns_compare_bytes(void **state)
{
    struct fx *f = *state;
    PGconn *pg = raw_schema(f);
    char buf[256];
    assert_string_equal(raw_exec(pg, TEXT_COLLATIONS, buf, sizeof(buf)), "70:0");
    /* Back to version 7 (migrations 9 and on are undone too): every text column in the database's own collation, and
     * rows in the tables it touches. */
    raw_exec(pg,
             "DO $$DECLARE t record; BEGIN FOR t IN SELECT table_name, string_agg(format('ALTER COLUMN %I TYPE text"
             " COLLATE pg_catalog.\"default\"', column_name), ', ') AS alters FROM information_schema.columns"
             " WHERE table_schema = current_schema() AND data_type = 'text' GROUP BY table_name"
             " LOOP EXECUTE format('ALTER TABLE %I %s', t.table_name, t.alters); END LOOP; END$$;"
             "DELETE FROM acceptd_schema WHERE version >= 8; DROP TABLE acceptd_space; DROP TABLE queues;"
             " DROP TABLE queue_groups; DROP TABLE job_deps; DROP TABLE batches; DROP TABLE schedules",
             buf, sizeof(buf));
    assert_string_equal(raw_exec(pg, TEXT_COLLATIONS, buf, sizeof(buf)), "54:54");
    insert_new(f, f->c, "job_a", "t1", "kind", AD_QUEUED, AD_PRIO_NORMAL, 0);
    insert_new(f, f->c, "job_b", "t1", "kind", AD_QUEUED, AD_PRIO_NORMAL, 0);
    raw_exec(pg,
             "INSERT INTO attempts (job_id, attempt, started_at) VALUES ('job_a', 1, 0), ('job_b', 1, 0);"
             "INSERT INTO job_events (job_id, seq, kind) VALUES ('job_a', 100, 'progress'), ('job_b', 101, 'progress')",
             buf, sizeof(buf));
    f->ops->disconnect(f->c);
    f->ops->close(f->s);
    char err[256] = "";
    f->s = ad_store_open(f->url, err, sizeof(err));
    if (f->s == NULL)
        fail_msg("open: %s", err);
    f->c = f->s->ops->connect(f->s, err, sizeof(err));
    assert_non_null(f->c);
    assert_string_equal(raw_exec(pg, TEXT_COLLATIONS, buf, sizeof(buf)), "70:0");
    assert_string_equal(raw_exec(pg, "SELECT max(version) FROM acceptd_schema", buf, sizeof(buf)), "17");
    struct ad_job *g = get(f, f->c, "t1", "job_b");
    assert_string_equal(g->type, "kind");
    ad_job_free(g);
    struct ad_job_list l = {0};
    assert_int_equal(f->ops->job_list(f->c, &(struct ad_list_query){.tenant = "t1", .limit = 10}, &l), AD_E_OK);
    assert_int_equal(l.n, 2);
    ad_job_list_free(&l);
    raw_exec(pg, "DELETE FROM jobs WHERE id = 'job_a'", buf, sizeof(buf));
    assert_string_equal(raw_exec(pg, "SELECT string_agg(job_id, ',') FROM attempts", buf, sizeof(buf)), "job_b");
    assert_string_equal(raw_exec(pg, "SELECT string_agg(job_id, ',') FROM job_events", buf, sizeof(buf)), "job_b");
    PQfinish(pg);
}

/* ---- jobs ---- */

/* cseq is drawn from the seq counter: a job's cseq is the seq of its insert, in a batch too. And an update leaves
 * the fixed columns as they were (store_int.h's AD_JOB_COLUMNS), as SQLite's does (its runner's
 * test_update_leaves_fixed_columns): tombstoned and the payload here. */
static void test_cseq_is_the_insert_seq(void **state)
{
    struct fx *f = *state;
    struct ad_job *j = new_full_job();
    assert_int_equal(f->ops->job_insert(f->c, j), AD_E_OK);
    assert_int_equal(j->cseq, j->seq);
    int tombstoned = j->tombstoned;
    char *payload = ad_strdup(j->payload);
    j->tombstoned = !tombstoned;
    ad_job_set(&j->payload, "{\"changed\":true}");
    assert_int_equal(f->ops->job_update(f->c, j), AD_E_OK);
    struct ad_job *g = get(f, f->c, NULL, "job_full");
    assert_int_equal(g->tombstoned, tombstoned);
    assert_string_equal(g->payload, payload);
    free(payload);
    assert_int_equal(g->cseq, g->created_seq);
    ad_job_free(g);
    ad_job_free(j);

    assert_int_equal(f->ops->begin(f->c), AD_E_OK);
    for (int i = 0; i < 3; i++) {
        char id[16];
        snprintf(id, sizeof(id), "b%d", i);
        assert_int_equal(f->ops->savepoint(f->c), AD_E_OK);
        insert_new(f, f->c, id, "t1", "a", AD_QUEUED, AD_PRIO_NORMAL, 0);
        assert_int_equal(f->ops->release(f->c), AD_E_OK);
    }
    assert_int_equal(f->ops->commit(f->c), AD_E_OK);
    struct ad_job_list l = {0};
    assert_int_equal(f->ops->job_changes(f->c, "t1", 0, 10, &l), AD_E_OK);
    assert_int_equal(l.n, 4);
    for (size_t i = 0; i < l.n; i++)
        if (strcmp(l.items[i]->id, "job_full") != 0)
            assert_int_equal(l.items[i]->seq, l.items[i]->cseq);
    ad_job_list_free(&l);
}

/* What the store reads back as absent is NULL in its columns. */
static void test_absent_fields_are_null_columns(void **state)
{
    struct fx *f = *state;
    struct ad_job *j = ad_job_new();
    ad_job_set(&j->id, "job_min");
    ad_job_set(&j->tenant, "t1");
    ad_job_set(&j->type, "a");
    assert_int_equal(f->ops->job_insert(f->c, j), AD_E_OK);
    ad_job_free(j);
    PGconn *pg = raw_schema(f);
    char buf[64];
    assert_string_equal(raw_exec(pg,
                                 "SELECT (progress IS NULL)::text || (payload IS NULL)::text || (run_at IS NULL)::text"
                                 " FROM jobs WHERE id = 'job_min'",
                                 buf, sizeof(buf)),
                        "truetruetrue");
    PQfinish(pg);
}

static void leasable(struct fx *f, struct ad_conn *c, const char *const *types, size_t ntypes, int64_t now, int limit,
                     const char *want)
{
    struct ad_job_list l = {0};
    assert_int_equal(f->ops->job_leasable(c, "t1", types, ntypes, now, limit, &l), AD_E_OK);
    assert_ids(&l, want);
    ad_job_list_free(&l);
}

/* ---- writer batches ---- */

/* A batch far larger than the pipeline's collection interval: results are collected on the way, in order,
 * and neither side stalls on a full buffer. */
static void test_large_batch(void **state)
{
    struct fx *f = *state;
    const struct ad_store_ops *ops = f->ops;
    char *payload = malloc(4097);
    memset(payload, 'x', 4096);
    payload[0] = '"';
    payload[4095] = '"';
    payload[4096] = '\0';
    assert_int_equal(ops->begin(f->c), AD_E_OK);
    for (int i = 0; i < 1200; i++) {
        char id[32];
        snprintf(id, sizeof(id), "big_%04d", i);
        struct ad_job *j = new_job(id, "t1", "a", AD_QUEUED, AD_PRIO_NORMAL);
        ad_job_set(&j->payload, payload);
        assert_int_equal(ops->savepoint(f->c), AD_E_OK);
        assert_int_equal(ops->job_insert(f->c, j), AD_E_OK);
        assert_int_equal(ops->event_append(f->c, id, j->seq, "status", payload), AD_E_OK);
        assert_int_equal(ops->release(f->c), AD_E_OK);
        ad_job_free(j);
    }
    assert_int_equal(ops->commit(f->c), AD_E_OK);
    free(payload);
    PGconn *pg = raw_schema(f);
    char buf[64];
    assert_string_equal(raw_exec(pg, "SELECT count(*) FROM jobs WHERE length(payload) = 4096", buf, sizeof(buf)),
                        "1200");
    assert_string_equal(raw_exec(pg, "SELECT count(*) FROM job_events", buf, sizeof(buf)), "1200");
    PQfinish(pg);
}

/* A database error inside a batch poisons it: the commit fails and nothing of the batch is kept, and the next
 * batch on the same connection works. */
static void test_error_poisons_the_batch(void **state)
{
    struct fx *f = *state;
    const struct ad_store_ops *ops = f->ops;
    insert_new(f, f->c, "dup", "t1", "a", AD_QUEUED, AD_PRIO_NORMAL, 0);
    assert_int_equal(ops->begin(f->c), AD_E_OK);
    insert_new(f, f->c, "fine1", "t1", "a", AD_QUEUED, AD_PRIO_NORMAL, 0);
    assert_int_equal(ops->savepoint(f->c), AD_E_OK);
    struct ad_job *j = new_job("dup", "t1", "a", AD_QUEUED, AD_PRIO_NORMAL);
    ad_err e = ops->job_insert(f->c, j); /* only sent: the error shows later */
    ad_job_free(j);
    if (e == AD_E_OK)
        e = ops->release(f->c);
    else
        ops->rollback_to(f->c);
    /* A read after the failed write reports the error. */
    struct ad_job *g = NULL;
    assert_int_equal(ops->job_get(f->c, "t1", "fine1", &g), AD_E_INTERNAL);
    assert_null(g);
    assert_int_equal(ops->commit(f->c), AD_E_INTERNAL);
    ops->rollback(f->c); /* as the writer does after a failed commit: harmless */
    assert_not_found(f, f->c, NULL, "fine1");

    assert_int_equal(ops->begin(f->c), AD_E_OK);
    insert_new(f, f->c, "fine2", "t1", "a", AD_QUEUED, AD_PRIO_NORMAL, 0);
    assert_int_equal(ops->commit(f->c), AD_E_OK);
    g = get(f, f->c, "t1", "fine2");
    ad_job_free(g);
}

/*
 * The server out of room (SQLSTATE class 53, insufficient resources) is AD_E_STORAGE_FULL, as SQLite's SQLITE_FULL,
 * which keeps /readyz at 503: a batch that meets it fails with it, a write outside a batch too, and reclaim, the
 * writer's probe, says so until a write that needs a new page goes through again. A trigger raises the server's
 * own disk_full (53100) and out_of_memory (53200) here; a disk that fills up is tests/blackbox/pg_diskfull.test.mjs's.
 */
static void test_out_of_space_is_storage_full(void **state)
{
    struct fx *f = *state;
    const struct ad_store_ops *ops = f->ops;
    assert_non_null(ops->reclaim);
    assert_int_equal(ops->reclaim(f->c), AD_E_OK);
    sc_exec_behind(f, "CREATE FUNCTION no_room() RETURNS trigger LANGUAGE plpgsql AS"
                      " $$BEGIN RAISE EXCEPTION 'no room' USING ERRCODE = 'disk_full'; END$$;"
                      "CREATE TRIGGER no_room BEFORE INSERT ON jobs FOR EACH ROW EXECUTE FUNCTION no_room();"
                      "CREATE TRIGGER no_room BEFORE INSERT ON acceptd_space FOR EACH ROW EXECUTE FUNCTION no_room()");
    /* In a batch: the insert is only sent, and the commit reports it. */
    assert_int_equal(ops->begin(f->c), AD_E_OK);
    struct ad_job *j = new_job("j1", "t1", "a", AD_QUEUED, AD_PRIO_NORMAL);
    ad_err e = ops->job_insert(f->c, j);
    ad_job_free(j);
    if (e == AD_E_OK)
        e = ops->commit(f->c);
    ops->rollback(f->c);
    assert_string_equal(ad_err_code(e), ad_err_code(AD_E_STORAGE_FULL));
    /* Outside one. */
    j = new_job("j2", "t1", "a", AD_QUEUED, AD_PRIO_NORMAL);
    assert_string_equal(ad_err_code(ops->job_insert(f->c, j)), ad_err_code(AD_E_STORAGE_FULL));
    ad_job_free(j);
    assert_string_equal(ad_err_code(ops->reclaim(f->c)), ad_err_code(AD_E_STORAGE_FULL));
    sc_exec_behind(f, "CREATE OR REPLACE FUNCTION no_room() RETURNS trigger LANGUAGE plpgsql AS"
                      " $$BEGIN RAISE EXCEPTION 'no memory' USING ERRCODE = 'out_of_memory'; END$$");
    assert_string_equal(ad_err_code(ops->reclaim(f->c)), ad_err_code(AD_E_STORAGE_FULL));
    /* Room again: the probe goes through, and so do writes; nothing of the failed ones was kept. */
    sc_exec_behind(f, "DROP TRIGGER no_room ON acceptd_space; DROP TRIGGER no_room ON jobs");
    assert_int_equal(ops->reclaim(f->c), AD_E_OK);
    assert_int_equal(ops->reclaim(f->c), AD_E_OK);
    insert_new(f, f->c, "j3", "t1", "a", AD_QUEUED, AD_PRIO_NORMAL, 0);
    assert_not_found(f, f->c, NULL, "j1");
    assert_not_found(f, f->c, NULL, "j2");
    ad_job_free(get(f, f->c, "t1", "j3"));
}

/*
 * A batch as the writer applies it on PostgreSQL: the jobs its operations will load are read ahead, all at once,
 * and no operation has a savepoint. An operation that fails having written nothing leaves the count of writes
 * where it was (the writer then lets the batch go on), and the others commit. A job read ahead and written
 * since is read again: a later load sees the write, never the row as it was; a job read ahead under another
 * tenant is not found; a job inserted in the batch after its read ahead (which found nothing) is found.
 */
static void test_batch_reads_ahead_without_savepoints(void **state)
{
    struct fx *f = *state;
    const struct ad_store_ops *ops = f->ops;
    assert_non_null(ops->changes);
    assert_non_null(ops->job_prefetch);
    insert_new(f, f->c, "ra_p", "t1", "a", AD_QUEUED, AD_PRIO_NORMAL, 0);
    assert_int_equal(ops->begin(f->c), AD_E_OK);
    ops->job_prefetch(f->c, "ra_p");
    ops->job_prefetch(f->c, "ra_missing");
    ops->job_prefetch(f->c, "ra_new");
    ops->job_prefetch(f->c, "ra_p"); /* asked twice: read once */

    int64_t before = ops->changes(f->c);
    insert_new(f, f->c, "ra_new", "t1", "a", AD_QUEUED, AD_PRIO_NORMAL, 0);
    assert_true(ops->changes(f->c) != before);

    /* An operation that fails on its load (a stale id) wrote nothing. */
    before = ops->changes(f->c);
    assert_not_found(f, f->c, "t1", "ra_missing");
    assert_int_equal(ops->changes(f->c), before);

    struct ad_job *n = get(f, f->c, "t1", "ra_new");
    ad_job_free(n);
    assert_not_found(f, f->c, "t2", "ra_p");
    struct ad_job *p = get(f, f->c, "t1", "ra_p");
    assert_int_equal(p->status, AD_QUEUED);
    p->status = AD_RUNNING;
    ad_job_set(&p->worker, "w1");
    assert_int_equal(ops->job_update(f->c, p), AD_E_OK);
    ad_job_free(p);
    p = get(f, f->c, "t1", "ra_p");
    assert_int_equal(p->status, AD_RUNNING);
    assert_string_equal(p->worker, "w1");
    ad_job_free(p);
    assert_int_equal(ops->commit(f->c), AD_E_OK);

    p = get(f, f->c, NULL, "ra_p");
    assert_int_equal(p->status, AD_RUNNING);
    ad_job_free(p);
    n = get(f, f->c, NULL, "ra_new");
    ad_job_free(n);
    PGconn *pg = raw_schema(f);
    char buf[64];
    assert_string_equal(raw_exec(pg, "SELECT count(*) FROM jobs", buf, sizeof(buf)), "2");
    PQfinish(pg);

    /* Outside a batch a read ahead is ignored, and nothing is left of the last batch's. */
    ops->job_prefetch(f->c, "ra_p");
    p = get(f, f->c, "t1", "ra_p");
    ad_job_free(p);
}

/* Lease what job_leasable gives at now (limit at most), each job written as running; their ids, comma-separated, in
 * buf. */
static const char *lease_ids(struct fx *f, int64_t now, int limit, char *buf, size_t size)
{
    const char *types[] = {"a"};
    struct ad_job_list l = {0};
    assert_int_equal(f->ops->job_leasable(f->c, "t1", types, 1, now, limit, &l), AD_E_OK);
    buf[0] = '\0';
    for (size_t i = 0; i < l.n; i++) {
        snprintf(buf + strlen(buf), size - strlen(buf), "%s%s", i > 0 ? "," : "", l.items[i]->id);
        l.items[i]->status = AD_RUNNING;
        assert_int_equal(f->ops->job_update(f->c, l.items[i]), AD_E_OK);
    }
    ad_job_list_free(&l);
    return buf;
}

/* Within a batch, leases after the first are answered from the head of the queue the first one read; what the
 * batch writes meanwhile (a new job of higher priority, a job released back to the queue, a job that becomes due,
 * one of another type) is seen exactly as a fresh read would see it, and so is the end of the queue. */
static void test_batch_leases_in_queue_order(void **state)
{
    struct fx *f = *state;
    const struct ad_store_ops *ops = f->ops;
    char buf[512];
    insert_new(f, f->c, "q_sched", "t1", "a", AD_QUEUED, AD_PRIO_NORMAL, T0 + 500);
    for (int i = 0; i < 40; i++) {
        char id[16];
        snprintf(id, sizeof(id), "q%02d", i);
        insert_new(f, f->c, id, "t1", "a", AD_QUEUED, AD_PRIO_NORMAL, 0);
    }
    assert_int_equal(ops->begin(f->c), AD_E_OK);
    assert_string_equal(lease_ids(f, T0, 1, buf, sizeof(buf)), "q00");
    insert_new(f, f->c, "q_high", "t1", "a", AD_QUEUED, AD_PRIO_HIGH, 0);
    insert_new(f, f->c, "q_other", "t1", "b", AD_QUEUED, AD_PRIO_HIGH, 0);
    insert_new(f, f->c, "q_low", "t1", "a", AD_QUEUED, AD_PRIO_LOW, 0);
    assert_string_equal(lease_ids(f, T0, 1, buf, sizeof(buf)), "q_high");
    assert_string_equal(lease_ids(f, T0 + 600, 1, buf, sizeof(buf)), "q_sched");
    struct ad_job *r = get(f, f->c, "t1", "q00");
    r->status = AD_QUEUED; /* released */
    assert_int_equal(ops->job_update(f->c, r), AD_E_OK);
    ad_job_free(r);
    assert_string_equal(lease_ids(f, T0, 2, buf, sizeof(buf)), "q00,q01");
    assert_string_equal(lease_ids(f, T0, 3, buf, sizeof(buf)), "q02,q03,q04");
    assert_string_equal(lease_ids(f, T0, 100, buf, sizeof(buf)),
                        "q05,q06,q07,q08,q09,q10,q11,q12,q13,q14,q15,q16,q17,q18,q19,q20,q21,q22,q23,q24,q25,q26,"
                        "q27,q28,q29,q30,q31,q32,q33,q34,q35,q36,q37,q38,q39,q_low");
    assert_string_equal(lease_ids(f, T0, 1, buf, sizeof(buf)), "");
    insert_new(f, f->c, "q_last", "t1", "a", AD_QUEUED, AD_PRIO_LOW, 0);
    assert_string_equal(lease_ids(f, T0, 1, buf, sizeof(buf)), "q_last");
    assert_int_equal(ops->commit(f->c), AD_E_OK);
    PGconn *pg = raw_schema(f);
    assert_string_equal(raw_exec(pg, "SELECT string_agg(id, ',') FROM jobs WHERE status = 0", buf, sizeof(buf)),
                        "q_other");
    PQfinish(pg);
}

/* ---- two nodes ---- */

/* A pending outbox row for endpoint hook, due at next_at. */
static struct ad_delivery new_delivery(const char *id, const char *hook, int64_t next_at)
{
    return (struct ad_delivery){.id = (char *)id,
                                .tenant = "t1",
                                .webhook_id = (char *)hook,
                                .url = "https://h.example/in",
                                .event_id = "evt_1",
                                .event_type = "job.succeeded",
                                .job_id = "job_1",
                                .body = "{\"id\":\"evt_1\"}",
                                .created_at = T0,
                                .state = AD_DLV_PENDING,
                                .next_at = next_at};
}

/* Two stores (two nodes) writing alternately draw seqs from one counter: strictly increasing in commit order. */
static void test_seq_is_global_across_nodes(void **state)
{
    struct fx *f = *state;
    struct ad_store *s2 = open_store(f);
    struct ad_conn *c2 = connect_conn(s2);
    struct ad_conn *node[2] = {f->c, c2};
    int64_t last = 0;
    char want[512] = "";
    for (int i = 0; i < 10; i++) {
        struct ad_conn *c = node[i % 2];
        char id[16];
        snprintf(id, sizeof(id), "n%d_%d", i % 2, i);
        snprintf(want + strlen(want), sizeof(want) - strlen(want), "%s%s", i ? "," : "", id);
        assert_int_equal(f->ops->begin(c), AD_E_OK);
        int64_t seq = insert_new(f, c, id, "t1", "a", AD_QUEUED, AD_PRIO_NORMAL, 0);
        /* An outbox row takes a seq from the same counter. */
        if (i == 4) {
            struct ad_webhook w = {.id = "whk_1", .tenant = "t1", .url = "https://h.example/", .secret = "s"};
            assert_int_equal(f->ops->webhook_put(c, &w), AD_E_OK);
            struct ad_delivery d = new_delivery("dlv_1", "whk_1", T0);
            d.job_id = id;
            assert_int_equal(f->ops->delivery_insert(c, &d), AD_E_OK);
            assert_true(d.seq > seq);
            seq = d.seq;
        }
        assert_int_equal(f->ops->commit(c), AD_E_OK);
        assert_true(seq > last);
        last = seq;
    }
    struct ad_job_list l = {0};
    assert_int_equal(f->ops->job_changes(c2, "t1", 0, 100, &l), AD_E_OK);
    assert_ids(&l, want);
    ad_job_list_free(&l);
    int64_t max = 0;
    assert_int_equal(f->ops->max_seq(f->c, &max), AD_E_OK);
    assert_int_equal(max, last);
    f->ops->disconnect(c2);
    s2->ops->close(s2);
}

struct begin_arg {
    struct fx *f;
    struct ad_conn *c;
    int done; /* atomic */
    ad_err e;
    struct ad_job_list leased;
};

static void *begin_and_lease(void *arg)
{
    struct begin_arg *b = arg;
    b->e = b->f->ops->begin(b->c);
    const char *a[] = {"a"};
    /* begin only sends the lock request: the batch's first read is where it waits. */
    if (b->e == AD_E_OK)
        b->e = b->f->ops->job_leasable(b->c, "t1", a, 1, T0, 1, &b->leased);
    __atomic_store_n(&b->done, 1, __ATOMIC_SEQ_CST);
    if (b->e == AD_E_OK)
        b->e = b->f->ops->commit(b->c);
    return NULL;
}

/* A second node's batch waits for the first one's commit, so it never leases the job the first one took. */
static void test_second_writer_waits_for_the_first(void **state)
{
    struct fx *f = *state;
    struct ad_store *s2 = open_store(f);
    struct ad_conn *c2 = connect_conn(s2);
    insert_new(f, f->c, "first", "t1", "a", AD_QUEUED, AD_PRIO_HIGH, 0);
    insert_new(f, f->c, "second", "t1", "a", AD_QUEUED, AD_PRIO_NORMAL, 0);

    assert_int_equal(f->ops->begin(f->c), AD_E_OK);
    struct ad_job_list l = {0};
    const char *a[] = {"a"};
    assert_int_equal(f->ops->job_leasable(f->c, "t1", a, 1, T0, 1, &l), AD_E_OK);
    assert_ids(&l, "first");

    struct begin_arg b = {.f = f, .c = c2};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, begin_and_lease, &b), 0);
    sleep_ms(300);
    assert_int_equal(__atomic_load_n(&b.done, __ATOMIC_SEQ_CST), 0); /* still waiting for the write lock */
    l.items[0]->status = AD_RUNNING;
    assert_int_equal(f->ops->job_update(f->c, l.items[0]), AD_E_OK);
    assert_int_equal(f->ops->commit(f->c), AD_E_OK);
    pthread_join(t, NULL);
    assert_int_equal(b.e, AD_E_OK);
    assert_ids(&b.leased, "second");
    ad_job_list_free(&b.leased);
    ad_job_list_free(&l);
    f->ops->disconnect(c2);
    s2->ops->close(s2);
}

/* A job row locked by another transaction is skipped, not waited for. */
static void test_leasable_skips_locked_rows(void **state)
{
    struct fx *f = *state;
    insert_new(f, f->c, "locked", "t1", "a", AD_QUEUED, AD_PRIO_HIGH, 0);
    insert_new(f, f->c, "free", "t1", "a", AD_QUEUED, AD_PRIO_NORMAL, 0);
    PGconn *pg = raw_schema(f);
    char buf[64];
    raw_exec(pg, "BEGIN", buf, sizeof(buf));
    raw_exec(pg, "SELECT id FROM jobs WHERE id = 'locked' FOR UPDATE", buf, sizeof(buf));
    const char *a[] = {"a"};
    struct ad_job_list l = {0};
    ad_err e = f->ops->begin(f->c);
    /* Waiting for the lock would fail after lock_timeout; asserted once the lock is released, so that the
     * teardown's DROP SCHEMA does not wait for it. */
    ad_err le = e == AD_E_OK ? f->ops->job_leasable(f->c, "t1", a, 1, T0, 10, &l) : e;
    if (e == AD_E_OK)
        e = f->ops->commit(f->c);
    raw_exec(pg, "ROLLBACK", buf, sizeof(buf));
    PQfinish(pg);
    assert_int_equal(e, AD_E_OK);
    assert_int_equal(le, AD_E_OK);
    assert_ids(&l, "free");
    ad_job_list_free(&l);
    leasable(f, f->c, a, 1, T0, 10, "locked,free");
}

/* ---- the feed ---- */

/* The feed says so when its connection is gone: the caller resynchronises and reopens it. */
static void test_feed_says_when_its_connection_is_gone(void **state)
{
    struct fx *f = *state;
    const struct ad_store_ops *ops = f->ops;
    struct ad_store *s2 = open_store(f);
    char err[256] = "";
    struct ad_feed *theirs = ops->feed_open(s2, err, sizeof(err));
    if (theirs == NULL)
        fail_msg("feed_open: %s", err);
    insert_new(f, f->c, "job_a", "t1", "a", AD_QUEUED, AD_PRIO_NORMAL, 0);
    struct sc_heard h = {0};
    sc_listen_for(f, theirs, 300, &h);
    assert_int_equal(sc_heard_times(&h, "job_a"), 1);
    terminate_backends("query = 'LISTEN acceptd_changes'");
    int rc = 0;
    for (int i = 0; i < 20 && rc == 0; i++)
        rc = ops->feed_wait(theirs, 100, -1, sc_on_heard, &h);
    assert_int_equal(rc, -1);
    ops->feed_close(theirs);
    s2->ops->close(s2);
}

/* ---- delivery claims between nodes ---- */

/* A claim moves next_at to until: once per due time, and due again at until. */
static void test_delivery_claim(void **state)
{
    struct fx *f = *state;
    const struct ad_store_ops *ops = f->ops;
    struct ad_webhook w = {.id = "whk_1", .tenant = "t1", .url = "https://a.example/", .secret = "s"};
    assert_int_equal(ops->webhook_put(f->c, &w), AD_E_OK);
    struct ad_delivery d = new_delivery("dlv_1", "whk_1", T0);
    assert_int_equal(ops->delivery_insert(f->c, &d), AD_E_OK);

    struct ad_store *s2 = open_store(f);
    struct ad_conn *other = connect_conn(s2);
    assert_int_equal(ops->delivery_claim(f->c, d.seq, T0 - 1, T0 + 60000, "n1"), AD_E_NOT_FOUND); /* not due yet */
    assert_int_equal(ops->delivery_claim(f->c, d.seq, T0, T0 + 60000, "n1"), AD_E_OK);
    assert_int_equal(ops->delivery_claim(other, d.seq, T0 + 1, T0 + 60000, "n2"), AD_E_NOT_FOUND);
    struct ad_delivery *got = NULL;
    assert_int_equal(ops->delivery_get(other, NULL, NULL, d.seq, &got), AD_E_OK);
    assert_int_equal(got->next_at, T0 + 60000);
    ad_delivery_free(got);
    /* Another node's release leaves n1's claim alone; n1's own (after a restart) makes it due again. */
    assert_int_equal(ops->delivery_release(other, "n2", T0 + 5), AD_E_OK);
    assert_int_equal(ops->delivery_claim(other, d.seq, T0 + 5, T0 + 60000, "n2"), AD_E_NOT_FOUND);
    assert_int_equal(ops->delivery_release(f->c, "n1", T0 + 5), AD_E_OK);
    assert_int_equal(ops->delivery_get(other, NULL, NULL, d.seq, &got), AD_E_OK);
    assert_int_equal(got->next_at, T0 + 5);
    ad_delivery_free(got);
    assert_int_equal(ops->delivery_claim(other, d.seq, T0 + 5, T0 + 60000, "n2"), AD_E_OK);
    assert_int_equal(ops->delivery_claim(other, d.seq, T0 + 60000, T0 + 120000, "n2"), AD_E_OK);
    d.state = AD_DLV_DELIVERED;
    assert_int_equal(ops->delivery_update(f->c, &d), AD_E_OK);
    assert_int_equal(ops->delivery_claim(f->c, d.seq, T0 + 999999, T0 + 9999999, "n1"), AD_E_NOT_FOUND);
    assert_int_equal(ops->delivery_claim(f->c, 424242, T0, T0 + 1, "n1"), AD_E_NOT_FOUND);
    /* Released only while pending: a delivered row keeps its state. */
    assert_int_equal(ops->delivery_release(other, "n2", T0), AD_E_OK);
    assert_int_equal(ops->delivery_get(other, NULL, NULL, d.seq, &got), AD_E_OK);
    assert_int_equal(got->state, AD_DLV_DELIVERED);
    ad_delivery_free(got);
    ops->disconnect(other);
    s2->ops->close(s2);
}

/* ---- losing the server ---- */

/* The server drops every acceptd connection: a reader and the writer each reconnect on their next use. */
static void test_reconnects_after_connections_are_dropped(void **state)
{
    struct fx *f = *state;
    const struct ad_store_ops *ops = f->ops;
    struct ad_conn *r = connect_conn(f->s);
    insert_new(f, f->c, "before", "t1", "a", AD_QUEUED, AD_PRIO_NORMAL, 0);
    struct ad_job *g = get(f, r, "t1", "before"); /* both connections have prepared statements now */
    ad_job_free(g);

    assert_true(terminate_backends("application_name = 'acceptd'") >= 2);

    g = get(f, r, "t1", "before");
    ad_job_free(g);
    assert_int_equal(ops->begin(f->c), AD_E_OK);
    insert_new(f, f->c, "after", "t1", "a", AD_QUEUED, AD_PRIO_NORMAL, 0);
    assert_int_equal(ops->commit(f->c), AD_E_OK);
    g = get(f, r, "t1", "after");
    ad_job_free(g);

    /* Dropped in the middle of a batch: the batch fails as unavailable, the next one works. */
    assert_int_equal(ops->begin(f->c), AD_E_OK);
    insert_new(f, f->c, "lost", "t1", "a", AD_QUEUED, AD_PRIO_NORMAL, 0);
    assert_true(terminate_backends("application_name = 'acceptd'") >= 1);
    assert_int_equal(ops->commit(f->c), AD_E_UNAVAILABLE);
    ops->rollback(f->c);
    assert_not_found(f, r, NULL, "lost");
    insert_new(f, f->c, "again", "t1", "a", AD_QUEUED, AD_PRIO_NORMAL, 0);
    g = get(f, r, "t1", "again");
    ad_job_free(g);
    ops->disconnect(r);
}

static void test_open_fails_cleanly_without_a_server(void **state)
{
    char err[256] = "";
    int64_t t = ad_mono_ms();
    assert_null(ad_store_open("postgresql://nobody@/acceptd?host=/nonexistent-dir&port=1", err, sizeof(err)));
    assert_non_null(strstr(err, "connect to PostgreSQL"));
    assert_true(ad_mono_ms() - t < 5000);
}

int main(void)
{
    base_url = getenv("ACCEPTD_TEST_PG");
    if (base_url == NULL || base_url[0] == '\0') {
        fprintf(stderr, "test_store_pg: set ACCEPTD_TEST_PG to a PostgreSQL URL (make blackbox-pg does)\n");
        return 1;
    }
    const struct CMUnitTest tests[] = {
        STORE_CONTRACT_TESTS(setup, teardown),
        STORE_CONTRACT_CLUSTER_TESTS(setup, teardown),
        cmocka_unit_test_setup_teardown(test_migrations_concurrent_and_idempotent, setup, teardown),
        cmocka_unit_test_setup_teardown(test_text_columns_compare_bytes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cseq_is_the_insert_seq, setup, teardown),
        cmocka_unit_test_setup_teardown(test_absent_fields_are_null_columns, setup, teardown),
        cmocka_unit_test_setup_teardown(test_large_batch, setup, teardown),
        cmocka_unit_test_setup_teardown(test_error_poisons_the_batch, setup, teardown),
        cmocka_unit_test_setup_teardown(test_batch_reads_ahead_without_savepoints, setup, teardown),
        cmocka_unit_test_setup_teardown(test_batch_leases_in_queue_order, setup, teardown),
        cmocka_unit_test_setup_teardown(test_seq_is_global_across_nodes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_second_writer_waits_for_the_first, setup, teardown),
        cmocka_unit_test_setup_teardown(test_leasable_skips_locked_rows, setup, teardown),
        cmocka_unit_test_setup_teardown(test_feed_says_when_its_connection_is_gone, setup, teardown),
        cmocka_unit_test_setup_teardown(test_delivery_claim, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reconnects_after_connections_are_dropped, setup, teardown),
        cmocka_unit_test_setup_teardown(test_out_of_space_is_storage_full, setup, teardown),
        cmocka_unit_test(test_open_fails_cleanly_without_a_server),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
