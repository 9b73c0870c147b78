/*
 * test_store_pg.c - the PostgreSQL store through its ops table, against the database named by ACCEPTD_TEST_PG
 * (a URL; the tests pass, skipped, when it is not set).
 *
 * Each test runs in a schema of its own (created at setup, dropped at teardown, selected with search_path in
 * the URL), so every test starts from an empty database and migrates it. Covers migrations (idempotent, two
 * nodes at once), the round trip of every field, a writer batch of submits, savepoints, a poisoned batch,
 * the global seq order across two nodes, the write lock and SKIP LOCKED leasing, the change feed, delivery
 * claims, the quoting of type lists, webhooks and the outbox, retention, and reconnecting after the server
 * dropped the connections.
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

#include "store/store.h"
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

/* The ids of a list, comma separated, for one comparison that shows the whole order on failure. */
/* The ids of a list, sorted, comma separated (for queries in no particular order). */
static void assert_id_set(const struct ad_job_list *l, const char *want)
{
    for (size_t i = 0; i < l->n; i++)
        for (size_t k = i + 1; k < l->n; k++)
            if (strcmp(l->items[k]->id, l->items[i]->id) < 0) {
                struct ad_job *t = l->items[i];
                l->items[i] = l->items[k];
                l->items[k] = t;
            }
    assert_ids(l, want);
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
            raw_exec(pg, "SELECT count(*) || ':' || max(version) FROM acceptd_schema", buf, sizeof(buf)), "5:5");
        assert_string_equal(raw_exec(pg, "SELECT count(*) || ':' || max(seq) FROM acceptd_counter", buf, sizeof(buf)),
                            "1:0");
    }
    /* The schema is the whole one: every table the store uses. */
    assert_string_equal(raw_exec(pg,
                                 "SELECT string_agg(tablename, ',' ORDER BY tablename) FROM pg_tables"
                                 " WHERE schemaname = current_schema()",
                                 buf, sizeof(buf)),
                        "acceptd_counter,acceptd_schema,attempts,deliveries,idempotency,job_events,jobs,webhooks");
    /* A database from a newer acceptd is refused, not downgraded. */
    raw_exec(pg, "INSERT INTO acceptd_schema (version) VALUES (99)", buf, sizeof(buf));
    char err[256] = "";
    assert_null(ad_store_open(f->url, err, sizeof(err)));
    assert_non_null(strstr(err, "newer than this acceptd"));
    PQfinish(pg);
}

/* ---- jobs ---- */

static void test_every_field_round_trips(void **state)
{
    struct fx *f = *state;
    struct ad_job *j = new_full_job();
    assert_int_equal(f->ops->job_insert(f->c, j), AD_E_OK);
    assert_true(j->seq > 0);
    assert_int_equal(j->cseq, j->seq);
    assert_int_equal(j->created_seq, j->seq);

    /* Read back through a second connection: committed, and every column mapped. */
    struct ad_conn *r = connect_conn(f->s);
    struct ad_job *g = get(f, r, "t1", "job_full");
    assert_job_equal(g, j);
    assert_int_equal(g->seq, j->seq);
    assert_int_equal(g->cseq, j->cseq);
    assert_int_equal(g->created_seq, j->seq);
    ad_job_free(g);

    /* Update: every field written, seq moves, cseq stays; NULLs written back as absent. */
    int64_t first = j->seq;
    j->status = AD_SUCCEEDED;
    j->progress = -1;
    ad_job_set(&j->result, NULL);
    ad_job_set(&j->message, NULL);
    ad_job_set(&j->lease_id, NULL);
    j->lease_expires_at = 0;
    j->finished_at = T0 + 50;
    j->tombstoned = 0;
    assert_int_equal(f->ops->job_update(f->c, j), AD_E_OK);
    assert_true(j->seq > first);
    g = get(f, r, NULL, "job_full");
    assert_int_equal(g->status, AD_SUCCEEDED);
    assert_int_equal(g->progress, -1);
    assert_null(g->result);
    assert_null(g->message);
    assert_null(g->lease_id);
    assert_int_equal(g->lease_expires_at, 0);
    assert_int_equal(g->finished_at, T0 + 50);
    assert_int_equal(g->tombstoned, 0);
    assert_int_equal(g->seq, j->seq);
    assert_int_equal(g->cseq, first);
    assert_int_equal(g->created_seq, first);
    ad_job_free(g);
    int64_t max = 0;
    assert_int_equal(f->ops->max_seq(r, &max), AD_E_OK);
    assert_int_equal(max, j->seq);
    assert_not_found(f, r, "t2", "job_full");
    f->ops->disconnect(r);
    ad_job_free(j);
}

static void test_absent_fields_read_back_absent(void **state)
{
    struct fx *f = *state;
    struct ad_job *j = ad_job_new();
    ad_job_set(&j->id, "job_min");
    ad_job_set(&j->tenant, "t1");
    ad_job_set(&j->type, "a");
    assert_int_equal(f->ops->job_insert(f->c, j), AD_E_OK);
    ad_job_free(j);

    struct ad_job *g = get(f, f->c, "t1", "job_min");
    assert_job_minimal(g);
    assert_null(g->payload);
    ad_job_free(g);
    PGconn *pg = raw_schema(f);
    char buf[64];
    assert_string_equal(raw_exec(pg,
                                 "SELECT (progress IS NULL)::text || (payload IS NULL)::text || (run_at IS NULL)::text"
                                 " FROM jobs WHERE id = 'job_min'",
                                 buf, sizeof(buf)),
                        "truetruetrue");
    PQfinish(pg);
}

/* Outside begin/commit each write is a transaction of its own, with SQLite's answers. */
static void test_writes_outside_a_transaction(void **state)
{
    struct fx *f = *state;
    int64_t a = insert_new(f, f->c, "job_a", "t1", "a", AD_QUEUED, AD_PRIO_NORMAL, 0);
    struct ad_job *j = new_job("job_a", "t2", "b", AD_QUEUED, AD_PRIO_NORMAL);
    assert_int_equal(f->ops->job_insert(f->c, j), AD_E_INTERNAL);
    assert_int_equal(j->seq, 0);
    ad_job_free(j);
    struct ad_job *g = get(f, f->c, NULL, "job_a");
    assert_string_equal(g->tenant, "t1");
    ad_job_free(g);

    struct ad_job *ghost = new_job("job_ghost", "t1", "a", AD_QUEUED, AD_PRIO_NORMAL);
    assert_int_equal(f->ops->job_update(f->c, ghost), AD_E_NOT_FOUND);
    assert_int_equal(ghost->seq, 0);
    ad_job_free(ghost);
    assert_not_found(f, f->c, NULL, "job_ghost");
    /* Failed writes leave gaps, never repeats. */
    int64_t b = insert_new(f, f->c, "job_b", "t1", "a", AD_QUEUED, AD_PRIO_NORMAL, 0);
    assert_true(b > a);
}

static void list(struct fx *f, const struct ad_list_query *q, const char *want)
{
    struct ad_job_list l = {0};
    assert_int_equal(f->ops->job_list(f->c, q, &l), AD_E_OK);
    assert_ids(&l, want);
    ad_job_list_free(&l);
}

static void test_list_order_filters_and_keyset(void **state)
{
    struct fx *f = *state;
    const char *types[] = {"a", "b", "a", "b", "a"};
    const enum ad_status statuses[] = {AD_QUEUED, AD_RUNNING, AD_RUNNING, AD_QUEUED, AD_SUCCEEDED};
    int64_t cseq[5];
    for (int i = 0; i < 5; i++) {
        char id[16];
        snprintf(id, sizeof(id), "j%d", i);
        struct ad_job *j = new_job(id, "t1", types[i], statuses[i], AD_PRIO_NORMAL);
        j->updated_at = T0 + i * 10;
        assert_int_equal(f->ops->job_insert(f->c, j), AD_E_OK);
        cseq[i] = j->cseq;
        ad_job_free(j);
    }
    insert_new(f, f->c, "other", "t2", "a", AD_QUEUED, AD_PRIO_NORMAL, 0);

    struct ad_list_query q = {.tenant = "t1", .limit = 50};
    list(f, &q, "j4,j3,j2,j1,j0");
    q.limit = 2;
    list(f, &q, "j4,j3");
    q.before_cseq = cseq[3];
    list(f, &q, "j2,j1");
    q.before_cseq = cseq[0];
    list(f, &q, "");
    q = (struct ad_list_query){.tenant = "t1", .limit = 50, .has_status = 1, .status = AD_RUNNING};
    list(f, &q, "j2,j1");
    q = (struct ad_list_query){.tenant = "t1", .limit = 50, .type = "a"};
    list(f, &q, "j4,j2,j0");
    q.has_status = 1;
    q.status = AD_RUNNING;
    list(f, &q, "j2");
    q = (struct ad_list_query){.tenant = "t1", .limit = 50, .updated_after = T0 + 20};
    list(f, &q, "j4,j3");
    q.type = "b";
    list(f, &q, "j3");
    q.has_status = 1;
    q.status = AD_QUEUED;
    list(f, &q, "j3");
    q = (struct ad_list_query){.tenant = "t2", .limit = 50};
    list(f, &q, "other");
}

static void test_changes_by_seq(void **state)
{
    struct fx *f = *state;
    struct ad_job *a = new_job("a", "t1", "x", AD_QUEUED, AD_PRIO_NORMAL);
    assert_int_equal(f->ops->job_insert(f->c, a), AD_E_OK);
    insert_new(f, f->c, "other", "t2", "x", AD_QUEUED, AD_PRIO_NORMAL, 0);
    int64_t b = insert_new(f, f->c, "b", "t1", "x", AD_QUEUED, AD_PRIO_NORMAL, 0);
    insert_new(f, f->c, "c", "t1", "x", AD_QUEUED, AD_PRIO_NORMAL, 0);
    a->status = AD_RUNNING;
    assert_int_equal(f->ops->job_update(f->c, a), AD_E_OK);

    struct ad_job_list l = {0};
    assert_int_equal(f->ops->job_changes(f->c, "t1", 0, 50, &l), AD_E_OK);
    assert_ids(&l, "b,c,a");
    assert_int_equal(l.items[2]->status, AD_RUNNING);
    ad_job_list_free(&l);
    assert_int_equal(f->ops->job_changes(f->c, "t1", b, 50, &l), AD_E_OK);
    assert_ids(&l, "c,a");
    ad_job_list_free(&l);
    assert_int_equal(f->ops->job_changes(f->c, "t1", 0, 1, &l), AD_E_OK);
    assert_ids(&l, "b");
    ad_job_list_free(&l);
    assert_int_equal(f->ops->job_changes(f->c, "t1", a->seq, 50, &l), AD_E_OK);
    assert_ids(&l, "");
    ad_job_list_free(&l);
    ad_job_free(a);
}

static void leasable(struct fx *f, struct ad_conn *c, const char *const *types, size_t ntypes, int64_t now, int limit,
                     const char *want)
{
    struct ad_job_list l = {0};
    assert_int_equal(f->ops->job_leasable(c, "t1", types, ntypes, now, limit, &l), AD_E_OK);
    assert_ids(&l, want);
    ad_job_list_free(&l);
}

static void test_leasable_running_scheduled(void **state)
{
    struct fx *f = *state;
    struct ad_conn *c = f->c;
    insert_new(f, c, "low_old", "t1", "a", AD_QUEUED, AD_PRIO_LOW, 0);
    insert_new(f, c, "norm1", "t1", "a", AD_QUEUED, AD_PRIO_NORMAL, 0);
    insert_new(f, c, "high1", "t1", "a", AD_QUEUED, AD_PRIO_HIGH, 0);
    insert_new(f, c, "future_high", "t1", "a", AD_QUEUED, AD_PRIO_HIGH, T0 + 1);
    insert_new(f, c, "high2", "t1", "a", AD_QUEUED, AD_PRIO_HIGH, 0);
    insert_new(f, c, "b_high", "t1", "b", AD_QUEUED, AD_PRIO_HIGH, 0);
    insert_new(f, c, "b_norm", "t1", "b", AD_QUEUED, AD_PRIO_NORMAL, 0);
    insert_new(f, c, "t2_high", "t2", "a", AD_QUEUED, AD_PRIO_HIGH, 0);
    struct ad_job *r = new_job("running", "t1", "a", AD_RUNNING, AD_PRIO_HIGH);
    r->lease_expires_at = T0 + 100;
    assert_int_equal(f->ops->job_insert(c, r), AD_E_OK);
    ad_job_free(r);

    const char *a[] = {"a"};
    const char *ab[] = {"b", "a", "b"};
    const char *none[] = {"zzz"};
    leasable(f, c, a, 1, T0, 10, "high1,high2,norm1,low_old");
    leasable(f, c, ab, 3, T0, 10, "high1,high2,b_high,norm1,b_norm,low_old");
    leasable(f, c, ab, 3, T0, 4, "high1,high2,b_high,norm1");
    leasable(f, c, none, 1, T0, 10, "");
    leasable(f, c, a, 1, T0 + 1, 3, "high1,future_high,high2");
    /* Inside a transaction too (the rows stay locked until it ends). */
    assert_int_equal(f->ops->begin(c), AD_E_OK);
    leasable(f, c, a, 1, T0, 2, "high1,high2");
    assert_int_equal(f->ops->commit(c), AD_E_OK);

    struct ad_job_list l = {0};
    assert_int_equal(f->ops->job_running(c, &l), AD_E_OK);
    assert_ids(&l, "running");
    ad_job_list_free(&l);
    assert_int_equal(f->ops->job_scheduled(c, T0, INT64_MAX, 10, &l), AD_E_OK);
    assert_ids(&l, "future_high");
    /* The cursor is (run_at, cseq): the job itself is not after its own key, and is after one just before it. */
    int64_t cseq = l.items[0]->cseq;
    ad_job_list_free(&l);
    assert_int_equal(f->ops->job_scheduled(c, T0 + 1, cseq, 10, &l), AD_E_OK);
    assert_ids(&l, "");
    ad_job_list_free(&l);
    assert_int_equal(f->ops->job_scheduled(c, T0 + 1, cseq - 1, 10, &l), AD_E_OK);
    assert_ids(&l, "future_high");
    ad_job_list_free(&l);
}

/* ---- writer batches ---- */

/* A batch as the writer runs it for 100 submits: one savepoint each, job + event + idempotency record. */
static void test_batch_of_submits_commits_together(void **state)
{
    struct fx *f = *state;
    const struct ad_store_ops *ops = f->ops;
    struct ad_conn *r = connect_conn(f->s);
    int64_t before = 0;
    assert_int_equal(ops->max_seq(r, &before), AD_E_OK);
    assert_int_equal(ops->begin(f->c), AD_E_OK);
    int64_t last = 0;
    for (int i = 0; i < 100; i++) {
        char id[32], key[32];
        snprintf(id, sizeof(id), "job_%03d", i);
        snprintf(key, sizeof(key), "key_%03d", i);
        assert_int_equal(ops->savepoint(f->c), AD_E_OK);
        struct ad_job *j = new_job(id, "t1", "a", AD_QUEUED, AD_PRIO_NORMAL);
        assert_int_equal(ops->job_insert(f->c, j), AD_E_OK);
        assert_true(j->seq > last);
        last = j->seq;
        assert_int_equal(ops->event_append(f->c, id, j->seq, "status", "{\"status\":\"queued\"}"), AD_E_OK);
        /* The outbox reads the tenant's webhooks once per submit. */
        struct ad_webhook_list hooks;
        assert_int_equal(ops->webhook_list(f->c, "t1", 1, &hooks), AD_E_OK);
        assert_int_equal(hooks.n, 0);
        ad_webhook_list_free(&hooks);
        assert_int_equal(ops->idem_put(f->c, "t1", key, "fp", id, T0), AD_E_OK);
        assert_int_equal(ops->release(f->c), AD_E_OK);
        ad_job_free(j);
    }
    /* Nothing is visible to another connection before the commit. */
    assert_not_found(f, r, "t1", "job_000");
    int64_t max = 0;
    assert_int_equal(ops->max_seq(r, &max), AD_E_OK);
    assert_int_equal(max, before);
    assert_int_equal(ops->commit(f->c), AD_E_OK);

    struct ad_job_list l = {0};
    assert_int_equal(ops->job_changes(r, "t1", before, 1000, &l), AD_E_OK);
    assert_int_equal(l.n, 100);
    for (size_t i = 0; i < l.n; i++) {
        char id[32];
        snprintf(id, sizeof(id), "job_%03zu", i);
        assert_string_equal(l.items[i]->id, id);
        assert_int_equal(l.items[i]->seq, l.items[i]->cseq);
        if (i > 0)
            assert_true(l.items[i]->seq > l.items[i - 1]->seq);
        struct ad_event_list ev;
        assert_int_equal(ops->events_after(r, id, 0, 10, &ev), AD_E_OK);
        assert_int_equal(ev.n, 1);
        assert_int_equal(ev.items[0].seq, l.items[i]->seq);
        ad_event_list_free(&ev);
        struct ad_idem rec;
        char key[32];
        snprintf(key, sizeof(key), "key_%03zu", i);
        assert_int_equal(ops->idem_get(r, "t1", key, &rec), AD_E_OK);
        assert_string_equal(rec.job_id, id);
        free(rec.job_id);
    }
    ad_job_list_free(&l);
    assert_int_equal(ops->max_seq(r, &max), AD_E_OK);
    assert_int_equal(max, last);
    ops->disconnect(r);
}

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

/* rollback_to undoes the writes of one operation only; the batch's other operations commit. */
static void test_rollback_to_undoes_one_operation(void **state)
{
    struct fx *f = *state;
    const struct ad_store_ops *ops = f->ops;
    assert_int_equal(ops->begin(f->c), AD_E_OK);
    assert_int_equal(ops->savepoint(f->c), AD_E_OK);
    insert_new(f, f->c, "kept1", "t1", "a", AD_QUEUED, AD_PRIO_NORMAL, 0);
    assert_int_equal(ops->release(f->c), AD_E_OK);
    assert_int_equal(ops->savepoint(f->c), AD_E_OK);
    int64_t undone = insert_new(f, f->c, "undone", "t1", "a", AD_QUEUED, AD_PRIO_NORMAL, 0);
    assert_int_equal(ops->idem_put(f->c, "t1", "k", "fp", "undone", T0), AD_E_OK);
    assert_int_equal(ops->event_append(f->c, "undone", undone, "status", "{}"), AD_E_OK);
    /* The operation reads its own write before it decides to fail. */
    struct ad_job *g = get(f, f->c, "t1", "undone");
    ad_job_free(g);
    ops->rollback_to(f->c);
    assert_not_found(f, f->c, NULL, "undone");
    assert_int_equal(ops->savepoint(f->c), AD_E_OK);
    int64_t kept2 = insert_new(f, f->c, "kept2", "t1", "a", AD_QUEUED, AD_PRIO_NORMAL, 0);
    assert_int_equal(ops->release(f->c), AD_E_OK);
    assert_int_equal(ops->commit(f->c), AD_E_OK);
    assert_true(kept2 > undone);

    struct ad_conn *r = connect_conn(f->s);
    g = get(f, r, "t1", "kept1");
    ad_job_free(g);
    g = get(f, r, "t1", "kept2");
    ad_job_free(g);
    assert_not_found(f, r, NULL, "undone");
    struct ad_idem rec;
    assert_int_equal(ops->idem_get(r, "t1", "k", &rec), AD_E_NOT_FOUND);

    /* A whole transaction rolled back leaves nothing, and seq still never repeats on this connection. */
    assert_int_equal(ops->begin(f->c), AD_E_OK);
    int64_t gone = insert_new(f, f->c, "gone", "t1", "a", AD_QUEUED, AD_PRIO_NORMAL, 0);
    ops->rollback(f->c);
    assert_not_found(f, r, NULL, "gone");
    int64_t after = insert_new(f, f->c, "after", "t1", "a", AD_QUEUED, AD_PRIO_NORMAL, 0);
    assert_true(after > gone);
    ops->disconnect(r);
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

struct heard {
    char ids[64][32];
    char queued[64][32]; /* "tenant/type" when announced as queued, else "" */
    int n;
    int total;
};

static void on_heard(void *arg, const struct ad_feed_change *ch)
{
    struct heard *h = arg;
    if (h->n < 64) {
        snprintf(h->ids[h->n], sizeof(h->ids[0]), "%s", ch->job_id);
        if (ch->tenant != NULL && ch->type != NULL)
            snprintf(h->queued[h->n], sizeof(h->queued[0]), "%s/%s", ch->tenant, ch->type);
        else
            h->queued[h->n][0] = '\0';
        h->n++;
    }
    h->total++;
}

/* How id was announced: "tenant/type" when queued, "" when not, NULL when it was not heard. */
static const char *heard_as(const struct heard *h, const char *id)
{
    for (int i = 0; i < h->n; i++)
        if (strcmp(h->ids[i], id) == 0)
            return h->queued[i];
    return NULL;
}

static int heard(const struct heard *h, const char *id)
{
    int n = 0;
    for (int i = 0; i < h->n; i++)
        n += strcmp(h->ids[i], id) == 0;
    return n;
}

/* Collect what a feed hears for up to ms. */
static void listen_for(struct fx *f, struct ad_feed *feed, int ms, struct heard *h)
{
    int64_t end = ad_mono_ms() + ms;
    while (ad_mono_ms() < end)
        assert_int_equal(f->ops->feed_wait(feed, (int)(end - ad_mono_ms()), on_heard, h), 0);
}

static void test_feed_hears_other_nodes_only(void **state)
{
    struct fx *f = *state;
    const struct ad_store_ops *ops = f->ops;
    struct ad_store *s2 = open_store(f);
    char err[256] = "";
    struct ad_feed *mine = ops->feed_open(f->s, err, sizeof(err));
    struct ad_feed *theirs = ops->feed_open(s2, err, sizeof(err));
    if (mine == NULL || theirs == NULL)
        fail_msg("feed_open: %s", err);

    struct ad_job *upd = new_job("job_upd", "t1", "a", AD_QUEUED, AD_PRIO_NORMAL);
    assert_int_equal(ops->job_insert(f->c, upd), AD_E_OK);
    struct heard h = {0};
    listen_for(f, theirs, 300, &h);
    assert_int_equal(heard(&h, "job_upd"), 1);
    assert_string_equal(heard_as(&h, "job_upd"), "t1/a"); /* queued: parked workers of t1/a may want it */

    assert_int_equal(ops->begin(f->c), AD_E_OK);
    assert_int_equal(ops->savepoint(f->c), AD_E_OK);
    insert_new(f, f->c, "job_new", "t1", "a", AD_QUEUED, AD_PRIO_NORMAL, 0);
    upd->status = AD_RUNNING;
    assert_int_equal(ops->job_update(f->c, upd), AD_E_OK);
    assert_int_equal(ops->job_update(f->c, upd), AD_E_OK);
    assert_int_equal(ops->release(f->c), AD_E_OK);
    assert_int_equal(ops->savepoint(f->c), AD_E_OK);
    insert_new(f, f->c, "job_undone", "t1", "a", AD_QUEUED, AD_PRIO_NORMAL, 0);
    ops->rollback_to(f->c);
    /* Nothing is announced before the commit. */
    h = (struct heard){0};
    listen_for(f, theirs, 100, &h);
    assert_int_equal(h.total, 0);
    assert_int_equal(ops->commit(f->c), AD_E_OK);
    /* A rolled-back batch announces nothing. */
    assert_int_equal(ops->begin(f->c), AD_E_OK);
    insert_new(f, f->c, "job_rolled_back", "t1", "a", AD_QUEUED, AD_PRIO_NORMAL, 0);
    ops->rollback(f->c);

    listen_for(f, theirs, 500, &h);
    assert_int_equal(heard(&h, "job_new"), 1);
    assert_int_equal(heard(&h, "job_upd"), 1);            /* updated twice, announced once */
    assert_string_equal(heard_as(&h, "job_upd"), "");     /* as it ended: running */
    assert_string_equal(heard_as(&h, "job_new"), "t1/a"); /* queued */
    assert_int_equal(heard(&h, "job_undone"), 0);
    assert_int_equal(heard(&h, "job_rolled_back"), 0);
    assert_int_equal(h.total, 2);

    /* A node does not hear itself. */
    struct heard self = {0};
    listen_for(f, mine, 200, &self);
    assert_int_equal(self.total, 0);

    /* A batch whose ids do not fit one notification announces them all in several. */
    assert_int_equal(ops->begin(f->c), AD_E_OK);
    for (int i = 0; i < 400; i++) {
        char id[40];
        snprintf(id, sizeof(id), "job_many_%04d_padded_to_id_sizes", i);
        insert_new(f, f->c, id, "t1", "a", AD_QUEUED, AD_PRIO_NORMAL, 0);
    }
    assert_int_equal(ops->commit(f->c), AD_E_OK);
    h = (struct heard){0};
    listen_for(f, theirs, 500, &h);
    assert_int_equal(h.total, 400);

    /* The feed says so when its connection is gone. */
    terminate_backends("query = 'LISTEN acceptd_changes'");
    int rc = 0;
    for (int i = 0; i < 20 && rc == 0; i++)
        rc = ops->feed_wait(theirs, 100, on_heard, &h);
    assert_int_equal(rc, -1);
    ops->feed_close(theirs);
    ops->feed_close(mine);
    ad_job_free(upd);
    s2->ops->close(s2);
}

/* ---- webhooks and the outbox ---- */

static void test_webhooks_and_deliveries(void **state)
{
    struct fx *f = *state;
    const struct ad_store_ops *ops = f->ops;
    struct ad_webhook w1 = {
        .id = "whk_1", .tenant = "t1", .url = "https://a.example/", .events = 5, .secret = "s1", .created_at = T0};
    struct ad_webhook w2 = {.id = "whk_2",
                            .tenant = "t1",
                            .url = "https://b.example/",
                            .events = 1,
                            .secret = "s2",
                            .prev_secret = "p2",
                            .prev_until = T0 + 9,
                            .created_at = T0};
    struct ad_webhook cb = {.id = "whk_cb", .tenant = "t1", .secret = "cbs", .created_at = T0};
    assert_int_equal(ops->webhook_put(f->c, &w1), AD_E_OK);
    assert_int_equal(ops->webhook_put(f->c, &w2), AD_E_OK);
    assert_int_equal(ops->webhook_put(f->c, &cb), AD_E_OK);

    struct ad_webhook *g = NULL;
    assert_int_equal(ops->webhook_get(f->c, NULL, "whk_2", &g), AD_E_OK);
    assert_string_equal(g->url, "https://b.example/");
    assert_int_equal(g->events, 1);
    assert_string_equal(g->prev_secret, "p2");
    assert_int_equal(g->prev_until, T0 + 9);
    assert_int_equal(g->disabled_at, 0);
    assert_null(g->disabled_reason);
    ad_webhook_free(g);
    assert_int_equal(ops->webhook_get(f->c, "t2", "whk_2", &g), AD_E_NOT_FOUND);
    assert_int_equal(ops->webhook_get(f->c, "t1", NULL, &g), AD_E_OK);
    assert_string_equal(g->id, "whk_cb");
    assert_null(g->url);
    ad_webhook_free(g);
    assert_int_equal(ops->webhook_get(f->c, "t2", NULL, &g), AD_E_NOT_FOUND);

    /* Inside a batch, the remembered list follows the batch's own writes. */
    assert_int_equal(ops->begin(f->c), AD_E_OK);
    struct ad_webhook_list l;
    assert_int_equal(ops->webhook_list(f->c, "t1", 1, &l), AD_E_OK);
    assert_int_equal(l.n, 2);
    ad_webhook_list_free(&l);
    w1.disabled_at = T0 + 1;
    w1.disabled_reason = "410";
    assert_int_equal(ops->savepoint(f->c), AD_E_OK);
    assert_int_equal(ops->webhook_put(f->c, &w1), AD_E_OK);
    assert_int_equal(ops->webhook_list(f->c, "t1", 1, &l), AD_E_OK);
    assert_int_equal(l.n, 1);
    assert_string_equal(l.items[0]->id, "whk_2");
    ad_webhook_list_free(&l);
    ops->rollback_to(f->c); /* the disabling is undone, and so must the remembered list be */
    assert_int_equal(ops->webhook_list(f->c, "t1", 1, &l), AD_E_OK);
    assert_int_equal(l.n, 2);
    ad_webhook_list_free(&l);
    assert_int_equal(ops->webhook_put(f->c, &w1), AD_E_OK);
    assert_int_equal(ops->webhook_list(f->c, "t1", 1, &l), AD_E_OK);
    assert_int_equal(l.n, 1);
    ad_webhook_list_free(&l);
    assert_int_equal(ops->webhook_list(f->c, "t1", 0, &l), AD_E_OK);
    assert_int_equal(l.n, 2);
    assert_string_equal(l.items[0]->id, "whk_1"); /* oldest first */
    assert_int_equal(l.items[0]->disabled_at, T0 + 1);
    assert_string_equal(l.items[0]->disabled_reason, "410");
    ad_webhook_list_free(&l);
    assert_int_equal(ops->commit(f->c), AD_E_OK);

    /* The outbox. */
    struct ad_delivery d1 = new_delivery("dlv_1", "whk_1", T0 + 20);
    struct ad_delivery d2 = new_delivery("dlv_2", "whk_2", T0 + 10);
    struct ad_delivery d3 = new_delivery("dlv_3", "whk_2", T0 + 30);
    assert_int_equal(ops->delivery_insert(f->c, &d1), AD_E_OK);
    assert_int_equal(ops->delivery_insert(f->c, &d2), AD_E_OK);
    assert_int_equal(ops->delivery_insert(f->c, &d3), AD_E_OK);
    assert_true(d1.seq > 0 && d2.seq > d1.seq && d3.seq > d2.seq);
    struct ad_due due[8];
    size_t n = 0;
    assert_int_equal(ops->delivery_due(f->c, NULL, 0, 8, due, &n), AD_E_OK);
    assert_int_equal(n, 3);
    assert_int_equal(due[0].seq, d2.seq);
    assert_int_equal(due[0].next_at, T0 + 10);
    assert_int_equal(due[2].seq, d3.seq);
    assert_string_equal(due[0].webhook_id, "whk_2");
    assert_string_equal(due[1].webhook_id, "whk_1");
    assert_int_equal(ops->delivery_due(f->c, NULL, 0, 1, due, &n), AD_E_OK);
    assert_int_equal(n, 1);
    /* An endpoint left out (it has its share in flight): only the other's deliveries. */
    const char *full[] = {"whk_2", "whk_9"};
    assert_int_equal(ops->delivery_due(f->c, full, 2, 8, due, &n), AD_E_OK);
    assert_int_equal(n, 1);
    assert_int_equal(due[0].seq, d1.seq);

    d2.state = AD_DLV_DELIVERED;
    d2.attempts = 1;
    d2.last_at = T0 + 11;
    d2.last_status = 204;
    assert_int_equal(ops->delivery_update(f->c, &d2), AD_E_OK);
    struct ad_delivery *got = NULL;
    assert_int_equal(ops->delivery_get(f->c, "t1", "dlv_2", 0, &got), AD_E_OK);
    assert_int_equal(got->state, AD_DLV_DELIVERED);
    assert_int_equal(got->next_at, 0); /* only pending deliveries keep a due time */
    assert_int_equal(got->last_status, 204);
    assert_int_equal(got->last_at, T0 + 11);
    assert_null(got->last_error);
    assert_string_equal(got->body, "{\"id\":\"evt_1\"}");
    ad_delivery_free(got);
    assert_int_equal(ops->delivery_get(f->c, "t2", "dlv_2", 0, &got), AD_E_NOT_FOUND);
    assert_int_equal(ops->delivery_get(f->c, NULL, NULL, d3.seq, &got), AD_E_OK);
    assert_string_equal(got->id, "dlv_3");
    ad_delivery_free(got);

    struct ad_delivery_list dl;
    assert_int_equal(ops->delivery_list(f->c, "whk_2", -1, 0, 10, &dl), AD_E_OK);
    assert_int_equal(dl.n, 2);
    assert_string_equal(dl.items[0]->id, "dlv_3"); /* newest first */
    ad_delivery_list_free(&dl);
    assert_int_equal(ops->delivery_list(f->c, "whk_2", AD_DLV_DELIVERED, 0, 10, &dl), AD_E_OK);
    assert_int_equal(dl.n, 1);
    assert_string_equal(dl.items[0]->id, "dlv_2");
    ad_delivery_list_free(&dl);
    assert_int_equal(ops->delivery_list(f->c, "whk_2", -1, d3.seq, 10, &dl), AD_E_OK);
    assert_int_equal(dl.n, 1);
    ad_delivery_list_free(&dl);

    assert_int_equal(ops->delivery_abandon(f->c, "whk_2", "disabled"), AD_E_OK);
    assert_int_equal(ops->delivery_get(f->c, NULL, NULL, d3.seq, &got), AD_E_OK);
    assert_int_equal(got->state, AD_DLV_DEAD);
    assert_string_equal(got->last_error, "disabled");
    ad_delivery_free(got);
    assert_int_equal(ops->delivery_get(f->c, NULL, NULL, d2.seq, &got), AD_E_OK);
    assert_int_equal(got->state, AD_DLV_DELIVERED); /* only pending ones are abandoned */
    ad_delivery_free(got);

    int done = -1;
    assert_int_equal(ops->delivery_sweep(f->c, T0 + 1, 1, &done), AD_E_OK);
    assert_int_equal(done, 1);
    assert_int_equal(ops->delivery_sweep(f->c, T0 + 1, 10, &done), AD_E_OK);
    assert_int_equal(done, 1);
    assert_int_equal(ops->delivery_sweep(f->c, T0 + 1, 10, &done), AD_E_OK);
    assert_int_equal(done, 0); /* dlv_1 is pending */

    /* Deleting an endpoint takes its deliveries; the callback secret is not an endpoint. */
    assert_int_equal(ops->webhook_delete(f->c, "t2", "whk_1"), AD_E_NOT_FOUND);
    assert_int_equal(ops->webhook_delete(f->c, "t1", "whk_cb"), AD_E_NOT_FOUND);
    assert_int_equal(ops->webhook_delete(f->c, "t1", "whk_1"), AD_E_OK);
    assert_int_equal(ops->webhook_delete(f->c, "t1", "whk_1"), AD_E_NOT_FOUND);
    assert_int_equal(ops->delivery_get(f->c, NULL, NULL, d1.seq, &got), AD_E_NOT_FOUND);
    /* Inside a batch too. */
    assert_int_equal(ops->begin(f->c), AD_E_OK);
    assert_int_equal(ops->webhook_delete(f->c, "t1", "whk_nope"), AD_E_NOT_FOUND);
    assert_int_equal(ops->webhook_delete(f->c, "t1", "whk_2"), AD_E_OK);
    assert_int_equal(ops->commit(f->c), AD_E_OK);
    assert_int_equal(ops->webhook_get(f->c, NULL, "whk_2", &g), AD_E_NOT_FOUND);
    assert_int_equal(ops->delivery_update(f->c, &d2), AD_E_NOT_FOUND);
}

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

/* Type names reach the server as one text[] literal: every character that literal syntax treats specially
 * must come through quoted. */
static void test_leasable_types_array_quoting(void **state)
{
    struct fx *f = *state;
    const char *types[] = {"plain", "with\"quote", "back\\slash", "com,ma", "{brace}", "sp ace", "NULL"};
    for (size_t i = 0; i < 7; i++)
        insert_new(f, f->c, types[i], "t1", types[i], AD_QUEUED, AD_PRIO_NORMAL, 0);
    insert_new(f, f->c, "not_asked", "t1", "other", AD_QUEUED, AD_PRIO_NORMAL, 0);
    const char *ask[] = {"NULL", "with\"quote", "absent", "back\\slash", "com,ma", "{brace}", "sp ace", "plain"};
    struct ad_job_list l = {0};
    assert_int_equal(f->ops->job_leasable(f->c, "t1", ask, 8, T0, 20, &l), AD_E_OK);
    assert_id_set(&l, "NULL,back\\slash,com,ma,plain,sp ace,with\"quote,{brace}");
    ad_job_list_free(&l);
}

/* ---- retention, events, attempts ---- */

static void insert_expiring(struct fx *f, const char *id, int64_t expires_at)
{
    struct ad_job *j = new_job(id, "t1", "a", AD_SUCCEEDED, AD_PRIO_NORMAL);
    ad_job_set(&j->result, "{\"big\":true}");
    ad_job_set(&j->message, "done");
    j->expires_at = expires_at;
    assert_int_equal(f->ops->job_insert(f->c, j), AD_E_OK);
    ad_job_free(j);
}

static int count_events(struct fx *f, const char *id)
{
    struct ad_event_list l;
    assert_int_equal(f->ops->events_after(f->c, id, 0, 100, &l), AD_E_OK);
    int n = (int)l.n;
    ad_event_list_free(&l);
    return n;
}

static void test_sweep_events_and_attempts(void **state)
{
    struct fx *f = *state;
    const struct ad_store_ops *ops = f->ops;
    const int64_t tomb = 1000;
    insert_expiring(f, "e1", T0 - 10);
    insert_expiring(f, "e2", T0);
    insert_expiring(f, "live", T0 + tomb);
    assert_int_equal(ops->event_append(f->c, "e1", 10, "status", "{\"s\":1}"), AD_E_OK);
    assert_int_equal(ops->event_append(f->c, "e1", 12, "done", NULL), AD_E_OK);
    assert_int_equal(ops->event_append(f->c, "live", 11, "progress", "{\"p\":5}"), AD_E_OK);
    assert_int_not_equal(ops->event_append(f->c, "e1", 12, "progress", "{}"), AD_E_OK); /* one event per seq */
    struct ad_event_list ev;
    assert_int_equal(ops->events_after(f->c, "e1", 10, 100, &ev), AD_E_OK);
    assert_int_equal(ev.n, 1);
    assert_int_equal(ev.items[0].seq, 12);
    assert_string_equal(ev.items[0].kind, "done");
    assert_null(ev.items[0].data);
    ad_event_list_free(&ev);

    struct ad_job a1 = {.id = "e1", .attempt = 1, .worker = "w1", .started_at = T0 - 100};
    struct ad_job a2 = {.id = "e1", .attempt = 2, .started_at = T0 - 80};
    assert_int_equal(ops->attempt_add(f->c, &a1, T0 - 90, "retrying"), AD_E_OK);
    assert_int_equal(ops->attempt_add(f->c, &a2, T0 - 70, "failed"), AD_E_OK);
    struct ad_attempt_list al;
    assert_int_equal(ops->attempt_list(f->c, "e1", &al), AD_E_OK);
    assert_int_equal(al.n, 2);
    assert_int_equal(al.items[0].attempt, 1);
    assert_string_equal(al.items[0].worker, "w1");
    assert_int_equal(al.items[0].started_at, T0 - 100);
    assert_int_equal(al.items[0].ended_at, T0 - 90);
    assert_string_equal(al.items[0].outcome, "retrying");
    assert_int_equal(al.items[1].attempt, 2);
    assert_null(al.items[1].worker);
    assert_int_equal(al.items[1].ended_at, T0 - 70);
    assert_string_equal(al.items[1].outcome, "failed");
    ad_attempt_list_free(&al);

    int n = -1;
    assert_int_equal(ops->sweep(f->c, T0, tomb, 1, &n), AD_E_OK);
    assert_int_equal(n, 1);
    assert_int_equal(ops->sweep(f->c, T0, tomb, 10, &n), AD_E_OK);
    assert_int_equal(n, 1);
    assert_int_equal(ops->sweep(f->c, T0, tomb, 10, &n), AD_E_OK);
    assert_int_equal(n, 0);
    struct ad_job *g = get(f, f->c, "t1", "e1");
    assert_int_equal(g->tombstoned, 1);
    assert_string_equal(g->payload, "{}");
    assert_null(g->result);
    assert_null(g->message);
    ad_job_free(g);
    assert_int_equal(count_events(f, "e1"), 0); /* a done event must not outlive the result */
    assert_int_equal(count_events(f, "live"), 1);
    int64_t max_before = 0;
    assert_int_equal(ops->max_seq(f->c, &max_before), AD_E_OK);

    /* Past the tombstone period the rows go, with their attempts; seq never goes back. */
    assert_int_equal(ops->sweep(f->c, T0 + tomb, tomb, 10, &n), AD_E_OK);
    assert_int_equal(n, 3); /* e1 and e2 deleted, live tombstoned */
    assert_not_found(f, f->c, NULL, "e1");
    assert_int_equal(ops->attempt_list(f->c, "e1", &al), AD_E_OK);
    assert_int_equal(al.n, 0);
    ad_attempt_list_free(&al);
    assert_int_equal(count_events(f, "live"), 0);
    int64_t max = 0;
    assert_int_equal(ops->max_seq(f->c, &max), AD_E_OK);
    assert_true(max >= max_before);
    int64_t next = insert_new(f, f->c, "next", "t1", "a", AD_QUEUED, AD_PRIO_NORMAL, 0);
    assert_true(next > max_before);

    /* Idempotency records: replaced on put, swept by age. */
    assert_int_equal(ops->idem_put(f->c, "t1", "k1", "fp1", "job_1", T0), AD_E_OK);
    assert_int_equal(ops->idem_put(f->c, "t2", "k1", "fp2", "job_2", T0 + 10), AD_E_OK);
    assert_int_equal(ops->idem_put(f->c, "t1", "k1", "fp3", "job_3", T0 + 30), AD_E_OK);
    struct ad_idem r;
    assert_int_equal(ops->idem_get(f->c, "t1", "k1", &r), AD_E_OK);
    assert_string_equal(r.fingerprint, "fp3");
    assert_string_equal(r.job_id, "job_3");
    assert_int_equal(r.created_at, T0 + 30);
    free(r.job_id);
    assert_int_equal(ops->idem_get(f->c, "t3", "k1", &r), AD_E_NOT_FOUND);
    assert_null(r.job_id);
    assert_int_equal(ops->idem_sweep(f->c, T0 + 21, 10, &n), AD_E_OK);
    assert_int_equal(n, 1);
    assert_int_equal(ops->idem_get(f->c, "t2", "k1", &r), AD_E_NOT_FOUND);
    assert_int_equal(ops->idem_get(f->c, "t1", "k1", &r), AD_E_OK);
    free(r.job_id);
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
        printf("test_store_pg: ACCEPTD_TEST_PG is not set; skipped\n");
        return 0;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_migrations_concurrent_and_idempotent, setup, teardown),
        cmocka_unit_test_setup_teardown(test_every_field_round_trips, setup, teardown),
        cmocka_unit_test_setup_teardown(test_absent_fields_read_back_absent, setup, teardown),
        cmocka_unit_test_setup_teardown(test_writes_outside_a_transaction, setup, teardown),
        cmocka_unit_test_setup_teardown(test_list_order_filters_and_keyset, setup, teardown),
        cmocka_unit_test_setup_teardown(test_changes_by_seq, setup, teardown),
        cmocka_unit_test_setup_teardown(test_leasable_running_scheduled, setup, teardown),
        cmocka_unit_test_setup_teardown(test_batch_of_submits_commits_together, setup, teardown),
        cmocka_unit_test_setup_teardown(test_large_batch, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rollback_to_undoes_one_operation, setup, teardown),
        cmocka_unit_test_setup_teardown(test_error_poisons_the_batch, setup, teardown),
        cmocka_unit_test_setup_teardown(test_seq_is_global_across_nodes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_second_writer_waits_for_the_first, setup, teardown),
        cmocka_unit_test_setup_teardown(test_leasable_skips_locked_rows, setup, teardown),
        cmocka_unit_test_setup_teardown(test_feed_hears_other_nodes_only, setup, teardown),
        cmocka_unit_test_setup_teardown(test_webhooks_and_deliveries, setup, teardown),
        cmocka_unit_test_setup_teardown(test_delivery_claim, setup, teardown),
        cmocka_unit_test_setup_teardown(test_leasable_types_array_quoting, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sweep_events_and_attempts, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reconnects_after_connections_are_dropped, setup, teardown),
        cmocka_unit_test(test_open_fails_cleanly_without_a_server),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
