/*
 * store_contract.h - the store contract's tests: one set of tests for every operation of struct ad_store_ops
 * (store.h), run unchanged against each backend by a thin runner, tests/unit/test_store_sqlite.c and
 * tests/unit/test_store_pg.c, which keep only what is their backend's own (SQLite's file, indexes and
 * migrations; PostgreSQL's two nodes, locks, pipeline and reconnects).
 *
 * A runner defines `struct fx` (with at least `struct ad_store *s` and `struct ad_conn *c`, the store and the
 * writer's connection of a fresh, empty store), includes this file, defines the three functions declared below,
 * and lists STORE_CONTRACT_TESTS(setup, teardown) in its cmocka array. Each operation is covered by at least one
 * test that fails if it is broken; the list, with the tests, is in sc_test_ops_table.
 */
#ifndef AD_STORE_CONTRACT_H
#define AD_STORE_CONTRACT_H

#include "store_test.h"

#include <stdlib.h>

struct fx;
/* Another store on the fixture's target (fails the test if it cannot be opened): a second node where the backend
 * allows several, or the same store reopened once the fixture's own is closed. */
static struct ad_store *sc_open(struct fx *f);
/* Run sql on the fixture's database behind the store's back (not through its ops), committed when it returns
 * unless f->c is inside a transaction and the backend runs it on f->c's own connection. */
static void sc_exec_behind(struct fx *f, const char *sql);

/* ---- helpers ---- */

static struct ad_conn *sc_connect(struct ad_store *s)
{
    char err[256] = "";
    struct ad_conn *c = s->ops->connect(s, err, sizeof(err));
    if (c == NULL)
        fail_msg("connect: %s", err);
    return c;
}

/* Close the fixture's store and open it again: what a restart sees. */
static void sc_reopen(struct fx *f)
{
    f->s->ops->disconnect(f->c);
    f->s->ops->close(f->s);
    f->c = NULL;
    f->s = NULL;
    f->s = sc_open(f);
    f->c = sc_connect(f->s);
}

static void sc_insert(struct fx *f, struct ad_job *j)
{
    ad_err e = f->s->ops->job_insert(f->c, j);
    if (e != AD_E_OK)
        fail_msg("job_insert %s: %s", j->id, ad_err_code(e));
}

/* Insert a job (in its own transaction unless one is open) and forget it; its seq. */
static int64_t sc_insert_new(struct fx *f, const char *id, const char *tenant, const char *type, enum ad_status status,
                             enum ad_priority priority, int64_t run_at)
{
    struct ad_job *j = new_job(id, tenant, type, status, priority);
    j->run_at = run_at;
    sc_insert(f, j);
    int64_t seq = j->seq;
    ad_job_free(j);
    return seq;
}

static struct ad_job *sc_get(struct fx *f, struct ad_conn *c, const char *tenant, const char *id)
{
    struct ad_job *j = NULL;
    ad_err e = f->s->ops->job_get(c, tenant, id, &j);
    if (e != AD_E_OK)
        fail_msg("job_get %s: %s", id, ad_err_code(e));
    assert_non_null(j);
    return j;
}

static void sc_assert_not_found(struct fx *f, struct ad_conn *c, const char *tenant, const char *id)
{
    struct ad_job *j = (struct ad_job *)1;
    assert_int_equal(f->s->ops->job_get(c, tenant, id, &j), AD_E_NOT_FOUND);
    assert_null(j);
}

static void sc_list(struct fx *f, const struct ad_list_query *q, const char *want)
{
    struct ad_job_list l = {0};
    assert_int_equal(f->s->ops->job_list(f->c, q, &l), AD_E_OK);
    assert_ids(&l, want);
    ad_job_list_free(&l);
}

static void sc_changes(struct fx *f, const char *tenant, int64_t since, int limit, const char *want)
{
    struct ad_job_list l = {0};
    assert_int_equal(f->s->ops->job_changes(f->c, tenant, since, limit, &l), AD_E_OK);
    assert_ids(&l, want);
    for (size_t i = 1; i < l.n; i++)
        assert_true(l.items[i]->seq > l.items[i - 1]->seq);
    ad_job_list_free(&l);
}

static void sc_leasable(struct fx *f, const char *tenant, const char *const *types, size_t ntypes, int64_t now,
                        int limit, const char *want)
{
    struct ad_job_list l = {0};
    assert_int_equal(f->s->ops->job_leasable(f->c, tenant, types, ntypes, now, limit, &l), AD_E_OK);
    assert_ids(&l, want);
    ad_job_list_free(&l);
}

/* The ids of a list, sorted, comma separated (for queries in no particular order). */
static void sc_assert_id_set(const struct ad_job_list *l, const char *want)
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

/* A succeeded job of t1 with a result, a message and an error, that expires at expires_at. */
static void sc_insert_expiring(struct fx *f, const char *id, int64_t expires_at)
{
    struct ad_job *j = new_job(id, "t1", "a", AD_SUCCEEDED, AD_PRIO_NORMAL);
    ad_job_set(&j->result, "{\"big\":true}");
    ad_job_set(&j->message, "done");
    ad_job_set(&j->error, "{}");
    j->expires_at = expires_at;
    sc_insert(f, j);
    ad_job_free(j);
}

/* A job's event log as "seq:kind:data ..." ("-" for no data). */
static void sc_events(struct fx *f, const char *job, int64_t after, int limit, const char *want)
{
    struct ad_event_list l;
    assert_int_equal(f->s->ops->events_after(f->c, job, after, limit, &l), AD_E_OK);
    char got[256] = "";
    for (size_t i = 0; i < l.n; i++) {
        if (strcmp(l.items[i].kind, "done") == 0)
            assert_null(l.items[i].data); /* a done event carries the job, rendered when sent */
        snprintf(got + strlen(got), sizeof(got) - strlen(got), "%s%lld:%s:%s", i ? " " : "", (long long)l.items[i].seq,
                 l.items[i].kind, l.items[i].data != NULL ? l.items[i].data : "-");
    }
    ad_event_list_free(&l);
    assert_str_eq(got, want, "events");
}

static int64_t sc_max_seq(struct fx *f, struct ad_conn *c)
{
    int64_t max = -1;
    assert_int_equal(f->s->ops->max_seq(c, &max), AD_E_OK);
    return max;
}

/* A pending outbox row of t1 for endpoint hook, due at next_at. */
static struct ad_delivery sc_delivery(const char *id, const char *hook, int64_t next_at)
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

/* ---- the table ---- */

/*
 * Every operation a backend must have is there; the optional ones go by their rules (changes or savepoints, the
 * three feed operations together). The operations and the tests that cover them:
 *   connect, disconnect, close       every test (fixture), sc_test_connections_see_only_committed_rows, sc_reopen
 *   begin, commit, rollback          sc_test_connections_see_only_committed_rows, sc_test_savepoints_and_rollback,
 *                                    sc_test_seq_high_water_mark_follows_every_commit
 *   after_batch (optional)           sc_test_after_batch_keeps_what_was_committed
 *   changes (optional)               sc_test_changes_move_with_every_row_written
 *   savepoint, release, rollback_to  sc_test_savepoints_and_rollback, sc_test_batch_of_submits_commits_together
 *   job_insert, job_get              sc_test_every_field_round_trips, sc_test_absent_fields_read_back_absent,
 *                                    sc_test_get_is_scoped_by_tenant, sc_test_writes_outside_a_transaction
 *   job_update                       sc_test_update_writes_fields_and_moves_seq, sc_test_every_field_round_trips
 *   job_list                         sc_test_list_order_filters_and_keyset, sc_test_list_updated_after_exact
 *   job_changes                      sc_test_changes_by_seq
 *   job_leasable                     sc_test_leasable_order_and_exclusions, sc_test_leasable_types_with_special_chars,
 *                                    sc_test_leasable_groups_round_robin,
 * sc_test_leasable_group_backlog_does_not_starve job_running                      sc_test_running_jobs_by_lease_expiry
 *   job_scheduled                    sc_test_scheduled_soonest_first
 *   job_bulk_page                    sc_test_bulk_page_walks_matching_jobs
 *   sweep                            sc_test_sweep_tombstones_then_deletes, sc_test_job_events, sc_test_attempts
 *   max_seq                          sc_test_update_writes_fields_and_moves_seq, sc_test_seq_*
 *   attempt_add, attempt_list        sc_test_attempts
 *   idem_get, idem_put, idem_sweep   sc_test_idempotency_records
 *   event_append, events_after       sc_test_job_events
 *   job_counts                       sc_test_job_counts_by_type_and_status
 *   snapshot_begin, snapshot_end     sc_test_snapshot_reads_committed_rows
 *   webhook_put, webhook_get,
 *   webhook_list, webhook_delete     sc_test_webhooks, sc_test_webhook_lookups_kept_for_the_transaction
 *   delivery_insert, delivery_update,
 *   delivery_get, delivery_due,
 *   delivery_list, delivery_abandon,
 *   delivery_sweep                   sc_test_deliveries
 *   delivery_claim, delivery_release sc_test_delivery_claim_and_release
 *   artifact_write, artifact_progress,
 *   artifact_view, artifact_read,
 *   artifact_gc                      sc_test_artifacts
 *   feed_open, feed_wait, feed_close sc_test_feed_hears_other_nodes_only (cluster backends; NULL for the others)
 *   queue_group_running, queue_group_window,
 *   queue_group_took, job_leasable_except
 *                                    sc_test_group_limits
 */
static void sc_test_ops_table(void **state)
{
    struct fx *f = *state;
    const struct ad_store_ops *o = f->s->ops;
    assert_non_null(o->name);
#define SC_REQUIRED(X)                                                                                                 \
    X(connect)                                                                                                         \
    X(disconnect)                                                                                                      \
    X(begin)                                                                                                           \
    X(commit)                                                                                                          \
    X(rollback)                                                                                                        \
    X(savepoint)                                                                                                       \
    X(release)                                                                                                         \
    X(rollback_to)                                                                                                     \
    X(job_insert)                                                                                                      \
    X(job_update)                                                                                                      \
    X(job_get)                                                                                                         \
    X(job_list)                                                                                                        \
    X(job_changes)                                                                                                     \
    X(job_leasable)                                                                                                    \
    X(job_counts)                                                                                                      \
    X(job_running)                                                                                                     \
    X(job_scheduled)                                                                                                   \
    X(job_bulk_page)                                                                                                   \
    X(job_unique)                                                                                                      \
    X(job_set_payload)                                                                                                 \
    X(sweep)                                                                                                           \
    X(max_seq)                                                                                                         \
    X(attempt_add)                                                                                                     \
    X(attempt_list)                                                                                                    \
    X(idem_get)                                                                                                        \
    X(idem_put)                                                                                                        \
    X(idem_sweep)                                                                                                      \
    X(event_append)                                                                                                    \
    X(events_after)                                                                                                    \
    X(snapshot_begin)                                                                                                  \
    X(snapshot_end)                                                                                                    \
    X(webhook_put)                                                                                                     \
    X(webhook_get)                                                                                                     \
    X(webhook_list)                                                                                                    \
    X(webhook_delete)                                                                                                  \
    X(delivery_insert)                                                                                                 \
    X(delivery_update)                                                                                                 \
    X(delivery_get)                                                                                                    \
    X(delivery_due)                                                                                                    \
    X(delivery_list)                                                                                                   \
    X(delivery_abandon)                                                                                                \
    X(delivery_sweep)                                                                                                  \
    X(delivery_claim)                                                                                                  \
    X(delivery_release)                                                                                                \
    X(artifact_write)                                                                                                  \
    X(artifact_progress)                                                                                               \
    X(artifact_view)                                                                                                   \
    X(artifact_read)                                                                                                   \
    X(artifact_gc)                                                                                                     \
    X(queue_get)                                                                                                       \
    X(queue_put)                                                                                                       \
    X(queue_list)                                                                                                      \
    X(queue_counts)                                                                                                    \
    X(queue_running)                                                                                                   \
    X(queue_group_running)                                                                                             \
    X(queue_group_window)                                                                                              \
    X(queue_group_took)                                                                                                \
    X(job_leasable_except)                                                                                             \
    X(close)
#define SC_CHECK(op)                                                                                                   \
    if (o->op == NULL)                                                                                                 \
        fail_msg("%s: ops->" #op " is NULL", o->name);
    SC_REQUIRED(SC_CHECK)
#undef SC_CHECK
#undef SC_REQUIRED
    /* The feed is all or nothing: a cluster backend has the three. */
    assert_true((o->feed_open == NULL) == (o->feed_wait == NULL));
    assert_true((o->feed_open == NULL) == (o->feed_close == NULL));
    assert_true(o->tx_blocks_others == 0 || o->tx_blocks_others == 1);
    /* Reads on the event loop are safe only where they never wait on the network (store.h). */
    assert_true(o->reads_may_block == 0 || o->reads_may_block == 1);
    assert_true(o->reads_may_block == (o->feed_open != NULL));
}

/* ---- connections and transactions ---- */

/* A second connection sees a transaction's writes only once it commits, and never a rolled back one's. */
static void sc_test_connections_see_only_committed_rows(void **state)
{
    struct fx *f = *state;
    const struct ad_store_ops *ops = f->s->ops;
    struct ad_conn *r = sc_connect(f->s);
    int64_t before = sc_max_seq(f, r);
    assert_int_equal(ops->begin(f->c), AD_E_OK);
    int64_t seq = sc_insert_new(f, "pending", "t1", "a", AD_QUEUED, AD_PRIO_NORMAL, 0);
    sc_assert_not_found(f, r, "t1", "pending");
    assert_int_equal(sc_max_seq(f, r), before);
    assert_int_equal(ops->commit(f->c), AD_E_OK);
    struct ad_job *j = sc_get(f, r, "t1", "pending");
    assert_string_equal(j->id, "pending");
    ad_job_free(j);
    assert_int_equal(sc_max_seq(f, r), seq);

    assert_int_equal(ops->begin(f->c), AD_E_OK);
    sc_insert_new(f, "gone", "t1", "a", AD_QUEUED, AD_PRIO_NORMAL, 0);
    ops->rollback(f->c);
    sc_assert_not_found(f, r, NULL, "gone");
    sc_assert_not_found(f, f->c, NULL, "gone");
    ops->disconnect(r);
}

/* One savepoint per operation: rollback_to undoes the writes of one operation only (job, event, idempotency
 * record), which it may have read back before failing; the batch's other operations commit. A whole transaction
 * rolled back leaves nothing, and seq still never repeats. */
static void sc_test_savepoints_and_rollback(void **state)
{
    struct fx *f = *state;
    const struct ad_store_ops *ops = f->s->ops;
    assert_int_equal(ops->begin(f->c), AD_E_OK);
    assert_int_equal(ops->savepoint(f->c), AD_E_OK);
    sc_insert_new(f, "kept1", "t1", "a", AD_QUEUED, AD_PRIO_NORMAL, 0);
    assert_int_equal(ops->release(f->c), AD_E_OK);
    assert_int_equal(ops->savepoint(f->c), AD_E_OK);
    int64_t undone = sc_insert_new(f, "undone", "t1", "a", AD_QUEUED, AD_PRIO_NORMAL, 0);
    assert_int_equal(ops->idem_put(f->c, "t1", "k", "fp", "undone", T0), AD_E_OK);
    assert_int_equal(ops->event_append(f->c, "undone", undone, "status", "{}"), AD_E_OK);
    struct ad_job *g = sc_get(f, f->c, "t1", "undone"); /* the operation reads its own write */
    ad_job_free(g);
    ops->rollback_to(f->c);
    sc_assert_not_found(f, f->c, NULL, "undone");
    assert_int_equal(ops->savepoint(f->c), AD_E_OK);
    int64_t kept2 = sc_insert_new(f, "kept2", "t1", "a", AD_QUEUED, AD_PRIO_NORMAL, 0);
    assert_int_equal(ops->release(f->c), AD_E_OK);
    assert_int_equal(ops->commit(f->c), AD_E_OK);
    assert_true(kept2 > undone); /* gaps are allowed, repeats are not */

    struct ad_conn *r = sc_connect(f->s);
    g = sc_get(f, r, "t1", "kept1");
    ad_job_free(g);
    g = sc_get(f, r, "t1", "kept2");
    ad_job_free(g);
    sc_assert_not_found(f, r, NULL, "undone");
    struct ad_idem rec;
    assert_int_equal(ops->idem_get(r, "t1", "k", &rec), AD_E_NOT_FOUND);
    ops->disconnect(r);
    sc_events(f, "undone", 0, 10, "");

    sc_reopen(f);
    g = sc_get(f, f->c, "t1", "kept1");
    ad_job_free(g);
    g = sc_get(f, f->c, "t1", "kept2");
    ad_job_free(g);
    sc_assert_not_found(f, f->c, NULL, "undone");
    assert_int_equal(ops->idem_get(f->c, "t1", "k", &rec), AD_E_NOT_FOUND);

    assert_int_equal(ops->begin(f->c), AD_E_OK);
    int64_t gone = sc_insert_new(f, "gone", "t1", "a", AD_QUEUED, AD_PRIO_NORMAL, 0);
    ops->rollback(f->c);
    sc_assert_not_found(f, f->c, NULL, "gone");
    int64_t after = sc_insert_new(f, "after", "t1", "a", AD_QUEUED, AD_PRIO_NORMAL, 0);
    assert_true(after > gone);
}

/* A batch as the writer runs it for 100 submits: one savepoint each, job + event + the outbox's webhook lookup
 * + idempotency record; nothing visible to another connection before the commit, all of it after. */
static void sc_test_batch_of_submits_commits_together(void **state)
{
    struct fx *f = *state;
    const struct ad_store_ops *ops = f->s->ops;
    struct ad_conn *r = sc_connect(f->s);
    int64_t before = sc_max_seq(f, r);
    assert_int_equal(ops->begin(f->c), AD_E_OK);
    int64_t last = 0;
    for (int i = 0; i < 100; i++) {
        char id[32], key[32];
        snprintf(id, sizeof(id), "job_%03d", i);
        snprintf(key, sizeof(key), "key_%03d", i);
        assert_int_equal(ops->savepoint(f->c), AD_E_OK);
        struct ad_job *j = new_job(id, "t1", "a", AD_QUEUED, AD_PRIO_NORMAL);
        sc_insert(f, j);
        assert_true(j->seq > last);
        last = j->seq;
        assert_int_equal(ops->event_append(f->c, id, j->seq, "status", "{\"status\":\"queued\"}"), AD_E_OK);
        struct ad_webhook_list hooks;
        assert_int_equal(ops->webhook_list(f->c, "t1", 1, &hooks), AD_E_OK);
        assert_int_equal(hooks.n, 0);
        ad_webhook_list_free(&hooks);
        assert_int_equal(ops->idem_put(f->c, "t1", key, "fp", id, T0), AD_E_OK);
        assert_int_equal(ops->release(f->c), AD_E_OK);
        ad_job_free(j);
    }
    sc_assert_not_found(f, r, "t1", "job_000");
    assert_int_equal(sc_max_seq(f, r), before);
    assert_int_equal(ops->commit(f->c), AD_E_OK);

    struct ad_job_list l = {0};
    assert_int_equal(ops->job_changes(r, "t1", before, 1000, &l), AD_E_OK);
    assert_int_equal(l.n, 100);
    for (size_t i = 0; i < l.n; i++) {
        char id[32], key[32];
        snprintf(id, sizeof(id), "job_%03zu", i);
        assert_string_equal(l.items[i]->id, id);
        if (i > 0)
            assert_true(l.items[i]->seq > l.items[i - 1]->seq && l.items[i]->cseq > l.items[i - 1]->cseq);
        struct ad_event_list ev;
        assert_int_equal(ops->events_after(r, id, 0, 10, &ev), AD_E_OK);
        assert_int_equal(ev.n, 1);
        assert_int_equal(ev.items[0].seq, l.items[i]->seq);
        ad_event_list_free(&ev);
        struct ad_idem rec;
        snprintf(key, sizeof(key), "key_%03zu", i);
        assert_int_equal(ops->idem_get(r, "t1", key, &rec), AD_E_OK);
        assert_string_equal(rec.job_id, id);
        free(rec.job_id);
    }
    ad_job_list_free(&l);
    assert_int_equal(sc_max_seq(f, r), last);
    ops->disconnect(r);
}

/* Seqs handed out by a write outside begin/commit (a transaction of its own) and by a committed batch are what
 * max_seq says; a rolled back batch's leave a gap at most, and after a restart seq goes on above them. */
static void sc_test_seq_high_water_mark_follows_every_commit(void **state)
{
    struct fx *f = *state;
    const struct ad_store_ops *ops = f->s->ops;
    assert_int_equal(sc_max_seq(f, f->c), 0); /* empty */
    struct ad_job *a = new_job("a", "t1", "x", AD_QUEUED, AD_PRIO_NORMAL);
    sc_insert(f, a); /* outside a transaction */
    assert_int_equal(sc_max_seq(f, f->c), a->seq);
    assert_int_equal(ops->begin(f->c), AD_E_OK);
    assert_int_equal(ops->job_update(f->c, a), AD_E_OK);
    assert_int_equal(ops->job_update(f->c, a), AD_E_OK);
    assert_int_equal(ops->commit(f->c), AD_E_OK);
    assert_int_equal(sc_max_seq(f, f->c), a->seq);
    int64_t committed = a->seq;
    assert_int_equal(ops->begin(f->c), AD_E_OK);
    assert_int_equal(ops->job_update(f->c, a), AD_E_OK);
    ops->rollback(f->c);
    assert_int_equal(sc_max_seq(f, f->c), committed);
    sc_reopen(f);
    struct ad_job *b = new_job("b", "t1", "x", AD_QUEUED, AD_PRIO_NORMAL);
    sc_insert(f, b);
    assert_true(b->seq > committed);
    ad_job_free(a);
    ad_job_free(b);
}

/* The newest rows deleted by retention: max_seq never goes back and seq never repeats, across a restart. */
static void sc_test_seq_never_repeats_after_newest_rows_are_deleted(void **state)
{
    struct fx *f = *state;
    sc_insert_expiring(f, "old", T0 - 10);
    struct ad_job *j = new_job("newest", "t1", "a", AD_SUCCEEDED, AD_PRIO_NORMAL);
    j->expires_at = T0 - 10;
    sc_insert(f, j);
    int64_t old_max = j->seq;
    ad_job_free(j);
    int n = 0;
    assert_int_equal(f->s->ops->sweep(f->c, T0 + 100, 0, 10, &n), AD_E_OK);
    assert_int_equal(n, 4); /* both tombstoned, then both deleted */
    sc_assert_not_found(f, f->c, NULL, "newest");
    assert_true(sc_max_seq(f, f->c) >= old_max);

    sc_reopen(f);
    assert_true(sc_max_seq(f, f->c) >= old_max);
    j = new_job("next", "t1", "a", AD_QUEUED, AD_PRIO_NORMAL);
    sc_insert(f, j);
    assert_true(j->seq > old_max);
    ad_job_free(j);
}

/* What was committed is kept, and reads back after a restart; seq and cseq move on from where they were. */
static void sc_test_reopen_keeps_data_and_seq_moves_on(void **state)
{
    struct fx *f = *state;
    struct ad_job *a = new_job("a", "t1", "x", AD_QUEUED, AD_PRIO_NORMAL);
    sc_insert(f, a);
    sc_insert_new(f, "b", "t1", "x", AD_QUEUED, AD_PRIO_NORMAL, 0);
    a->status = AD_RUNNING;
    assert_int_equal(f->s->ops->job_update(f->c, a), AD_E_OK);
    int64_t old_max = a->seq;
    assert_int_equal(f->s->ops->idem_put(f->c, "t1", "k", "fp", "a", T0), AD_E_OK);

    sc_reopen(f);
    struct ad_job *g = sc_get(f, f->c, "t1", "a");
    assert_int_equal(g->status, AD_RUNNING);
    assert_int_equal(g->seq, old_max);
    ad_job_free(g);
    struct ad_idem r;
    assert_int_equal(f->s->ops->idem_get(f->c, "t1", "k", &r), AD_E_OK);
    assert_string_equal(r.job_id, "a");
    free(r.job_id);
    assert_int_equal(sc_max_seq(f, f->c), old_max);

    struct ad_job *c = new_job("c", "t1", "x", AD_QUEUED, AD_PRIO_NORMAL);
    sc_insert(f, c);
    assert_true(c->seq > old_max);
    assert_true(c->cseq > a->cseq);
    ad_job_free(c);
    ad_job_free(a);
}

/* after_batch (optional) is upkeep only: what was committed before it stays, on every connection. */
__attribute__((unused)) static void sc_test_after_batch_keeps_what_was_committed(void **state)
{
    struct fx *f = *state;
    const struct ad_store_ops *ops = f->s->ops;
    assert_non_null(ops->after_batch);
    assert_int_equal(ops->begin(f->c), AD_E_OK);
    for (int i = 0; i < 50; i++) {
        char id[16];
        snprintf(id, sizeof(id), "ab%d", i);
        sc_insert_new(f, id, "t1", "a", AD_QUEUED, AD_PRIO_NORMAL, 0);
    }
    assert_int_equal(ops->commit(f->c), AD_E_OK);
    ops->after_batch(f->c);
    ops->after_batch(f->c); /* twice in a row: nothing to do */
    struct ad_conn *r = sc_connect(f->s);
    struct ad_job *g = sc_get(f, r, "t1", "ab49");
    ad_job_free(g);
    ops->disconnect(r);
    sc_reopen(f);
    g = sc_get(f, f->c, "t1", "ab0");
    ad_job_free(g);
}

/* reclaim (optional) gives back the space the store holds for itself and proves there is room with a write of its
 * own: with room, it answers OK, and everything committed before it stays, seen by every connection and after a
 * reopen; its own write leaves no job behind. */
__attribute__((unused)) static void sc_test_reclaim_keeps_what_was_committed(void **state)
{
    struct fx *f = *state;
    const struct ad_store_ops *ops = f->s->ops;
    assert_non_null(ops->reclaim);
    assert_int_equal(ops->begin(f->c), AD_E_OK);
    for (int i = 0; i < 30; i++) {
        char id[16];
        snprintf(id, sizeof(id), "rc%d", i);
        sc_insert_new(f, id, "t1", "a", AD_QUEUED, AD_PRIO_NORMAL, 0);
    }
    assert_int_equal(ops->commit(f->c), AD_E_OK);
    int64_t seq = sc_max_seq(f, f->c);
    assert_int_equal(ops->reclaim(f->c), AD_E_OK);
    assert_int_equal(ops->reclaim(f->c), AD_E_OK); /* twice in a row: still room */
    struct ad_conn *r = sc_connect(f->s);
    struct ad_job *g = sc_get(f, r, "t1", "rc29");
    ad_job_free(g);
    ops->disconnect(r);
    sc_reopen(f);
    g = sc_get(f, f->c, "t1", "rc0");
    ad_job_free(g);
    struct ad_job_list l = {0};
    assert_int_equal(ops->job_changes(f->c, "t1", seq, 100, &l), AD_E_OK);
    assert_int_equal(l.n, 0); /* no job row was written by the reclaim */
    ad_job_list_free(&l);
}

/* changes (optional) moves with every row inserted, updated or deleted, and not with a read or a write that
 * wrote nothing: the writer relies on it to leave out savepoints. */
__attribute__((unused)) static void sc_test_changes_move_with_every_row_written(void **state)
{
    struct fx *f = *state;
    const struct ad_store_ops *ops = f->s->ops;
    assert_non_null(ops->changes);
    assert_int_equal(ops->begin(f->c), AD_E_OK);
    int64_t n0 = ops->changes(f->c);
    struct ad_job *j = new_job("ch", "t1", "a", AD_QUEUED, AD_PRIO_NORMAL);
    sc_insert(f, j);
    int64_t n1 = ops->changes(f->c);
    assert_true(n1 > n0);
    assert_int_equal(ops->job_update(f->c, j), AD_E_OK);
    int64_t n2 = ops->changes(f->c);
    assert_true(n2 > n1);
    struct ad_job *g = sc_get(f, f->c, "t1", "ch");
    ad_job_free(g);
    struct ad_job *ghost = new_job("ghost", "t1", "a", AD_QUEUED, AD_PRIO_NORMAL);
    assert_int_equal(ops->job_update(f->c, ghost), AD_E_NOT_FOUND);
    assert_int_equal(ops->changes(f->c), n2);
    assert_int_equal(ops->idem_put(f->c, "t1", "k", "fp", "ch", T0), AD_E_OK);
    assert_true(ops->changes(f->c) > n2);
    assert_int_equal(ops->commit(f->c), AD_E_OK);
    ad_job_free(ghost);
    ad_job_free(j);
}

/* A snapshot on a reading connection reads committed rows, and once it ends the next reads see later commits. */
static void sc_test_snapshot_reads_committed_rows(void **state)
{
    struct fx *f = *state;
    const struct ad_store_ops *ops = f->s->ops;
    struct ad_conn *r = sc_connect(f->s);
    sc_insert_new(f, "first", "t1", "a", AD_QUEUED, AD_PRIO_NORMAL, 0);
    assert_int_equal(ops->snapshot_begin(r), AD_E_OK);
    struct ad_job *g = sc_get(f, r, "t1", "first");
    ad_job_free(g);
    struct ad_delivery_list dl;
    assert_int_equal(ops->delivery_list(r, "whk_none", -1, 0, 10, &dl), AD_E_OK);
    assert_int_equal(dl.n, 0);
    ad_delivery_list_free(&dl);
    ops->snapshot_end(r);
    sc_insert_new(f, "second", "t1", "a", AD_QUEUED, AD_PRIO_NORMAL, 0);
    g = sc_get(f, r, "t1", "second");
    ad_job_free(g);
    assert_int_equal(ops->snapshot_begin(r), AD_E_OK);
    g = sc_get(f, r, "t1", "second");
    ad_job_free(g);
    ops->snapshot_end(r);
    ops->disconnect(r);
}

/* ---- jobs ---- */

static void sc_test_every_field_round_trips(void **state)
{
    struct fx *f = *state;
    const struct ad_store_ops *ops = f->s->ops;
    struct ad_job *j = new_full_job();
    sc_insert(f, j);
    assert_true(j->seq > 0);
    assert_true(j->cseq > 0);
    assert_int_equal(j->created_seq, j->seq);

    /* Read back on the writer's connection and through a second one: committed, and every column mapped. */
    struct ad_conn *r = sc_connect(f->s);
    struct ad_conn *conns[2] = {f->c, r};
    for (int i = 0; i < 2; i++) {
        struct ad_job *g = sc_get(f, conns[i], "t1", "job_full");
        assert_job_equal(g, j);
        assert_int_equal(g->seq, j->seq);
        assert_int_equal(g->cseq, j->cseq);
        assert_int_equal(g->created_seq, j->seq);
        ad_job_free(g);
    }

    /* Update: the changeable fields written, seq moves, cseq stays; NULLs written back as absent. */
    int64_t first = j->seq, cseq = j->cseq;
    j->status = AD_SUCCEEDED;
    j->progress = -1;
    ad_job_set(&j->result, NULL);
    ad_job_set(&j->message, NULL);
    ad_job_set(&j->lease_id, NULL);
    j->lease_expires_at = 0;
    j->finished_at = T0 + 50;
    assert_int_equal(ops->job_update(f->c, j), AD_E_OK);
    assert_true(j->seq > first);
    struct ad_job *g = sc_get(f, r, NULL, "job_full");
    assert_job_equal(g, j);
    assert_int_equal(g->progress, -1);
    assert_null(g->result);
    assert_null(g->message);
    assert_null(g->lease_id);
    assert_int_equal(g->lease_expires_at, 0);
    assert_int_equal(g->seq, j->seq);
    assert_int_equal(g->cseq, cseq);
    assert_int_equal(g->created_seq, first);
    ad_job_free(g);
    assert_int_equal(sc_max_seq(f, r), j->seq);
    sc_assert_not_found(f, r, "t2", "job_full");
    ops->disconnect(r);
    ad_job_free(j);
}

static void sc_test_absent_fields_read_back_absent(void **state)
{
    struct fx *f = *state;
    struct ad_job *j = ad_job_new();
    ad_job_set(&j->id, "job_min");
    ad_job_set(&j->tenant, "t1");
    ad_job_set(&j->type, "a");
    ad_job_set(&j->payload, "{}");
    sc_insert(f, j);
    ad_job_set(&j->id, "job_nopayload");
    ad_job_set(&j->payload, NULL);
    sc_insert(f, j);
    ad_job_free(j);

    struct ad_job *g = sc_get(f, f->c, "t1", "job_min");
    assert_job_minimal(g);
    assert_string_equal(g->payload, "{}");
    ad_job_free(g);
    g = sc_get(f, f->c, "t1", "job_nopayload");
    assert_job_minimal(g);
    assert_null(g->payload);
    ad_job_free(g);
}

static void sc_test_get_is_scoped_by_tenant(void **state)
{
    struct fx *f = *state;
    sc_insert_new(f, "job_a", "t1", "a", AD_QUEUED, AD_PRIO_NORMAL, 0);
    struct ad_job *g = sc_get(f, f->c, "t1", "job_a");
    assert_string_equal(g->tenant, "t1");
    ad_job_free(g);
    sc_assert_not_found(f, f->c, "t2", "job_a");
    sc_assert_not_found(f, f->c, "t1", "job_nope");
    g = sc_get(f, f->c, NULL, "job_a");
    assert_string_equal(g->id, "job_a");
    ad_job_free(g);
}

/* Outside begin/commit each write is a transaction of its own: a duplicate id fails and keeps the first job,
 * an update of a job that is not there is not found; failed writes leave gaps in seq, never repeats. */
static void sc_test_writes_outside_a_transaction(void **state)
{
    struct fx *f = *state;
    int64_t a = sc_insert_new(f, "job_a", "t1", "a", AD_QUEUED, AD_PRIO_NORMAL, 0);
    int64_t b = sc_insert_new(f, "job_b", "t1", "a", AD_QUEUED, AD_PRIO_NORMAL, 0);
    struct ad_job *j = new_job("job_a", "t2", "b", AD_QUEUED, AD_PRIO_NORMAL);
    j->seq = 0;
    assert_int_equal(f->s->ops->job_insert(f->c, j), AD_E_INTERNAL);
    assert_int_equal(j->seq, 0);
    ad_job_free(j);
    struct ad_job *g = sc_get(f, f->c, NULL, "job_a");
    assert_string_equal(g->tenant, "t1");
    ad_job_free(g);
    g = sc_get(f, f->c, NULL, "job_b");
    int64_t b_cseq = g->cseq;
    ad_job_free(g);

    struct ad_job *ghost = new_job("job_ghost", "t1", "a", AD_QUEUED, AD_PRIO_NORMAL);
    assert_int_equal(f->s->ops->job_update(f->c, ghost), AD_E_NOT_FOUND);
    assert_int_equal(ghost->seq, 0);
    sc_assert_not_found(f, f->c, NULL, "job_ghost");
    /* An update finds its row by id (and cseq where the backend keys on it): another job's cseq changes nothing. */
    ghost->cseq = b_cseq;
    ghost->status = AD_FAILED;
    assert_int_equal(f->s->ops->job_update(f->c, ghost), AD_E_NOT_FOUND);
    sc_assert_not_found(f, f->c, NULL, "job_ghost");
    g = sc_get(f, f->c, "t1", "job_b");
    assert_int_equal(g->status, AD_QUEUED);
    assert_int_equal(g->seq, b);
    ad_job_free(g);
    ad_job_free(ghost);
    int64_t c = sc_insert_new(f, "job_c", "t1", "a", AD_QUEUED, AD_PRIO_NORMAL, 0);
    assert_true(c > b && b > a);
}

static void sc_test_update_writes_fields_and_moves_seq(void **state)
{
    struct fx *f = *state;
    struct ad_job *a = new_job("job_a", "t1", "a", AD_QUEUED, AD_PRIO_NORMAL);
    struct ad_job *b = new_job("job_b", "t1", "a", AD_QUEUED, AD_PRIO_NORMAL);
    sc_insert(f, a);
    sc_insert(f, b);
    assert_true(b->seq > a->seq);
    assert_true(b->cseq > a->cseq);
    int64_t cseq = a->cseq;

    a->status = AD_SUCCEEDED;
    a->progress = 100;
    ad_job_set(&a->result, "{\"r\":2}");
    a->finished_at = T0 + 50;
    assert_int_equal(f->s->ops->job_update(f->c, a), AD_E_OK);
    assert_true(a->seq > b->seq);
    int64_t first = a->seq;
    assert_int_equal(f->s->ops->job_update(f->c, a), AD_E_OK);
    assert_true(a->seq > first);

    struct ad_job *g = sc_get(f, f->c, "t1", "job_a");
    assert_int_equal(g->status, AD_SUCCEEDED);
    assert_int_equal(g->progress, 100);
    assert_string_equal(g->result, "{\"r\":2}");
    assert_int_equal(g->finished_at, T0 + 50);
    assert_int_equal(g->seq, a->seq);
    assert_int_equal(g->cseq, cseq);
    ad_job_free(g);
    assert_int_equal(sc_max_seq(f, f->c), a->seq);
    g = sc_get(f, f->c, "t1", "job_b");
    assert_int_equal(g->status, AD_QUEUED);
    assert_int_equal(g->seq, b->seq);
    ad_job_free(g);
    ad_job_free(a);
    ad_job_free(b);
}

static void sc_test_list_order_filters_and_keyset(void **state)
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
        sc_insert(f, j);
        cseq[i] = j->cseq;
        ad_job_free(j);
    }
    sc_insert_new(f, "other", "t2", "a", AD_QUEUED, AD_PRIO_NORMAL, 0);

    struct ad_list_query q = {.tenant = "t1", .limit = 50};
    sc_list(f, &q, "j4,j3,j2,j1,j0");
    q.limit = 2;
    sc_list(f, &q, "j4,j3");
    q.before_cseq = cseq[3];
    sc_list(f, &q, "j2,j1");
    q.before_cseq = cseq[1];
    sc_list(f, &q, "j0");
    q.before_cseq = cseq[0];
    sc_list(f, &q, "");

    q = (struct ad_list_query){.tenant = "t1", .limit = 50, .has_status = 1, .status = AD_RUNNING};
    sc_list(f, &q, "j2,j1");
    q.status = AD_QUEUED;
    sc_list(f, &q, "j3,j0");
    q = (struct ad_list_query){.tenant = "t1", .limit = 50, .type = "a"};
    sc_list(f, &q, "j4,j2,j0");
    q.has_status = 1;
    q.status = AD_RUNNING;
    sc_list(f, &q, "j2");
    q = (struct ad_list_query){.tenant = "t1", .limit = 50, .updated_after = T0 + 20};
    sc_list(f, &q, "j4,j3");
    q.type = "b";
    sc_list(f, &q, "j3");
    q.has_status = 1;
    q.status = AD_QUEUED;
    sc_list(f, &q, "j3");
    q = (struct ad_list_query){.tenant = "t2", .limit = 50};
    sc_list(f, &q, "other");
    q = (struct ad_list_query){.tenant = "t3", .limit = 50};
    sc_list(f, &q, "");
}

/* A bulk walk's pages: "id,id|id|..." (pages joined by '|'), walking q with pages of limit; *upto as the walk left it.
 */
static void sc_bulk_walk(struct fx *f, const struct ad_bulk_query *q, int limit, int64_t *upto, const char *want)
{
    char got[512] = "";
    int64_t after = 0, next = 0;
    for (int page = 0;; page++) {
        struct ad_job_list l = {0};
        assert_int_equal(f->s->ops->job_bulk_page(f->c, q, after, upto, limit, &l, &next), AD_E_OK);
        if (next == 0) {
            assert_int_equal(l.n, 0);
            break;
        }
        assert_true(next > after);
        snprintf(got + strlen(got), sizeof(got) - strlen(got), "%s", page ? "|" : "");
        for (size_t i = 0; i < l.n; i++) {
            assert_true(l.items[i]->cseq > after && l.items[i]->cseq <= next);
            snprintf(got + strlen(got), sizeof(got) - strlen(got), "%s%s", i ? "," : "", l.items[i]->id);
        }
        ad_job_list_free(&l);
        after = next;
    }
    assert_str_eq(got, want, "bulk walk");
}

/* The bulk walk examines limit jobs of the tenant and type a page, whatever their status, returns those that match,
 * leaves out other tenants and types, tombstoned and expired jobs, and ends with the jobs there when it began. */
static void sc_test_bulk_page_walks_matching_jobs(void **state)
{
    struct fx *f = *state;
    const enum ad_status st[] = {AD_QUEUED, AD_RUNNING, AD_SUCCEEDED, AD_FAILED, AD_QUEUED, AD_CANCELLED};
    for (int i = 0; i < 6; i++) {
        char id[16];
        snprintf(id, sizeof(id), "b%d", i);
        struct ad_job *j = new_job(id, "t1", "a", st[i], AD_PRIO_NORMAL);
        j->created_at = T0 + i * 10;
        sc_insert(f, j);
        ad_job_free(j);
    }
    sc_insert_new(f, "other_tenant", "t2", "a", AD_QUEUED, AD_PRIO_NORMAL, 0);
    sc_insert_new(f, "other_type", "t1", "b", AD_QUEUED, AD_PRIO_NORMAL, 0);
    struct ad_job *gone = new_job("tomb", "t1", "a", AD_FAILED, AD_PRIO_NORMAL);
    gone->tombstoned = 1;
    gone->expires_at = T0 + 1000;
    sc_insert(f, gone);
    ad_job_free(gone);
    struct ad_job *old = new_job("expired", "t1", "a", AD_FAILED, AD_PRIO_NORMAL);
    old->expires_at = T0 - 1;
    sc_insert(f, old);
    ad_job_free(old);

    struct ad_bulk_query q = {.tenant = "t1", .type = "a", .now = T0};
    int64_t upto = 0;
    sc_bulk_walk(f, &q, 100, &upto, "b0,b1,b2,b3,b4,b5");
    assert_true(upto > 0);
    upto = 0;
    sc_bulk_walk(f, &q, 4, &upto, "b0,b1,b2,b3|b4,b5"); /* the last page examines tomb and expired */
    q.statuses = 1u << AD_QUEUED | 1u << AD_RUNNING;
    upto = 0;
    sc_bulk_walk(f, &q, 2, &upto, "b0,b1||b4|"); /* a page of no match still moves on */
    q.statuses = 1u << AD_FAILED | 1u << AD_CANCELLED;
    q.created_after = T0 + 10;
    q.created_before = T0 + 50;
    upto = 0;
    sc_bulk_walk(f, &q, 100, &upto, "b3");
    q = (struct ad_bulk_query){.tenant = "t1", .type = "a", .now = T0, .created_before = T0 + 15};
    upto = 0;
    sc_bulk_walk(f, &q, 100, &upto, "b0,b1");

    /* A job inserted after the walk's first page is beyond its end. */
    q = (struct ad_bulk_query){.tenant = "t1", .type = "a", .now = T0, .statuses = 1u << AD_QUEUED};
    upto = 0;
    struct ad_job_list l = {0};
    int64_t next = 0;
    assert_int_equal(f->s->ops->job_bulk_page(f->c, &q, 0, &upto, 100, &l, &next), AD_E_OK);
    assert_ids(&l, "b0,b4");
    ad_job_list_free(&l);
    sc_insert_new(f, "late", "t1", "a", AD_QUEUED, AD_PRIO_NORMAL, 0);
    assert_int_equal(f->s->ops->job_bulk_page(f->c, &q, next, &upto, 100, &l, &next), AD_E_OK);
    assert_int_equal(next, 0);
    assert_int_equal(l.n, 0);
    upto = 0;
    sc_bulk_walk(f, &q, 100, &upto, "b0,b4,late");
    q.tenant = "t3";
    upto = 0;
    sc_bulk_walk(f, &q, 100, &upto, "");
}

/* Jobs of t1 in cseq order, whose updated_at does not follow it (an operation reads its time before it is queued;
 * cluster nodes write with their own clocks), and a t2 job updated last. */
static void sc_insert_updated(struct fx *f, const char *const *ids, const int64_t *updated, int n, int64_t *cseq)
{
    for (int i = 0; i < n; i++) {
        struct ad_job *j =
            new_job(ids[i], "t1", i % 2 == 0 ? "a" : "b", i % 3 == 0 ? AD_RUNNING : AD_SUCCEEDED, AD_PRIO_NORMAL);
        j->updated_at = updated[i];
        sc_insert(f, j);
        cseq[i] = j->cseq;
        ad_job_free(j);
    }
    struct ad_job *j = new_job("u_other", "t2", "a", AD_RUNNING, AD_PRIO_NORMAL);
    j->updated_at = T0 + 1000;
    sc_insert(f, j);
    ad_job_free(j);
}

/* A list by updatedAfter returns exactly the jobs updated after the time, newest cseq first, with every filter and
 * page, whether few jobs match (read through the index of updated_at) or many (a walk by cseq: the SQLite store
 * switches at 10,000, SQ_LIST_FEW_MAX); a job updated after a later one counts by its own updated_at. */
static void sc_test_list_updated_after_exact(void **state)
{
    struct fx *f = *state;
    /* u0 was updated last though inserted first; u3 after the time though u4 (a later cseq) is not. */
    const char *ids[] = {"u0", "u1", "u2", "u3", "u4", "u5"};
    const int64_t updated[] = {T0 + 900, T0 + 10, T0 + 400, T0 + 300, T0 + 20, T0 + 500};
    int64_t cseq[6];
    for (int round = 0; round < 2; round++) {
        if (round == 1) {
            /* Many jobs updated after the time, all older than the u jobs. */
            sc_exec_behind(f, "DELETE FROM jobs");
            assert_int_equal(f->s->ops->begin(f->c), AD_E_OK);
            for (int i = 0; i < 10050; i++) {
                char id[32];
                snprintf(id, sizeof(id), "many_%05d", i);
                struct ad_job *j = new_job(id, "t1", "c", AD_QUEUED, AD_PRIO_NORMAL);
                j->updated_at = T0 + 200 + i % 7;
                sc_insert(f, j);
                ad_job_free(j);
            }
            assert_int_equal(f->s->ops->commit(f->c), AD_E_OK);
        }
        sc_insert_updated(f, ids, updated, 6, cseq);
        struct ad_list_query q = {.tenant = "t1", .limit = 4, .updated_after = T0 + 100};
        sc_list(f, &q, "u5,u3,u2,u0");
        q.limit = 2;
        sc_list(f, &q, "u5,u3");
        q.before_cseq = cseq[3];
        sc_list(f, &q, "u2,u0");
        q.before_cseq = cseq[0];
        sc_list(f, &q, round == 0 ? "" : "many_10049,many_10048");
        q = (struct ad_list_query){.tenant = "t1", .limit = 4, .updated_after = T0 + 300};
        sc_list(f, &q, "u5,u2,u0");
        q = (struct ad_list_query){
            .tenant = "t1", .limit = 4, .updated_after = T0 + 100, .has_status = 1, .status = AD_RUNNING};
        sc_list(f, &q, "u3,u0");
        q.limit = 1;
        q.before_cseq = cseq[3];
        sc_list(f, &q, "u0");
        q = (struct ad_list_query){.tenant = "t1", .limit = 4, .updated_after = T0 + 100, .type = "a"};
        sc_list(f, &q, "u2,u0");
        q.has_status = 1;
        q.status = AD_SUCCEEDED;
        sc_list(f, &q, "u2");
        q = (struct ad_list_query){.tenant = "t1", .limit = 4, .updated_after = T0 + 100, .type = "c"};
        sc_list(f, &q, round == 0 ? "" : "many_10049,many_10048,many_10047,many_10046");
        q = (struct ad_list_query){.tenant = "t1", .limit = 4, .updated_after = T0 + 900};
        sc_list(f, &q, "");
        q = (struct ad_list_query){.tenant = "t2", .limit = 4, .updated_after = T0 + 900};
        sc_list(f, &q, "u_other");
        sc_exec_behind(f, "DELETE FROM jobs WHERE id LIKE 'u%'");
    }
}

static void sc_test_changes_by_seq(void **state)
{
    struct fx *f = *state;
    struct ad_job *a = new_job("a", "t1", "x", AD_QUEUED, AD_PRIO_NORMAL);
    struct ad_job *b = new_job("b", "t1", "x", AD_QUEUED, AD_PRIO_NORMAL);
    sc_insert(f, a);
    sc_insert_new(f, "other", "t2", "x", AD_QUEUED, AD_PRIO_NORMAL, 0);
    sc_insert(f, b);
    sc_insert_new(f, "c", "t1", "x", AD_QUEUED, AD_PRIO_NORMAL, 0);
    a->status = AD_RUNNING;
    assert_int_equal(f->s->ops->job_update(f->c, a), AD_E_OK);

    sc_changes(f, "t1", 0, 50, "b,c,a");
    sc_changes(f, "t1", 0, 2, "b,c");
    sc_changes(f, "t1", 0, 1, "b");
    sc_changes(f, "t1", b->seq, 50, "c,a");
    sc_changes(f, "t1", a->seq, 50, "");
    sc_changes(f, "t2", 0, 50, "other");

    struct ad_job_list l = {0};
    assert_int_equal(f->s->ops->job_changes(f->c, "t1", b->seq, 50, &l), AD_E_OK);
    assert_int_equal(l.n, 2);
    assert_int_equal(l.items[1]->status, AD_RUNNING);
    assert_int_equal(l.items[1]->seq, a->seq);
    ad_job_list_free(&l);
    ad_job_free(a);
    ad_job_free(b);
}

static void sc_test_leasable_order_and_exclusions(void **state)
{
    struct fx *f = *state;
    sc_insert_new(f, "low_old", "t1", "a", AD_QUEUED, AD_PRIO_LOW, 0);
    sc_insert_new(f, "norm1", "t1", "a", AD_QUEUED, AD_PRIO_NORMAL, 0);
    sc_insert_new(f, "high1", "t1", "a", AD_QUEUED, AD_PRIO_HIGH, 0);
    sc_insert_new(f, "future_high", "t1", "a", AD_QUEUED, AD_PRIO_HIGH, T0 + 1);
    sc_insert_new(f, "due_norm", "t1", "a", AD_QUEUED, AD_PRIO_NORMAL, T0);
    sc_insert_new(f, "high2", "t1", "a", AD_QUEUED, AD_PRIO_HIGH, 0);
    sc_insert_new(f, "b_high", "t1", "b", AD_QUEUED, AD_PRIO_HIGH, 0);
    sc_insert_new(f, "b_norm", "t1", "b", AD_QUEUED, AD_PRIO_NORMAL, 0);
    sc_insert_new(f, "c_high", "t1", "c", AD_QUEUED, AD_PRIO_HIGH, 0);
    sc_insert_new(f, "t2_high", "t2", "a", AD_QUEUED, AD_PRIO_HIGH, 0);
    sc_insert_new(f, "running", "t1", "a", AD_RUNNING, AD_PRIO_HIGH, 0);
    sc_insert_new(f, "done", "t1", "a", AD_SUCCEEDED, AD_PRIO_HIGH, 0);

    const char *a[] = {"a"};
    sc_leasable(f, "t1", a, 1, T0, 10, "high1,high2,norm1,due_norm,low_old");
    sc_leasable(f, "t1", a, 1, T0, 2, "high1,high2");
    const char *ab[] = {"b", "a"};
    sc_leasable(f, "t1", ab, 2, T0, 10, "high1,high2,b_high,norm1,due_norm,b_norm,low_old");
    sc_leasable(f, "t1", ab, 2, T0, 4, "high1,high2,b_high,norm1");
    const char *bab[] = {"b", "a", "b"};
    sc_leasable(f, "t1", bab, 3, T0, 10, "high1,high2,b_high,norm1,due_norm,b_norm,low_old");
    const char *dup[] = {"a", "a"};
    sc_leasable(f, "t1", dup, 2, T0, 10, "high1,high2,norm1,due_norm,low_old");
    const char *none[] = {"zzz"};
    sc_leasable(f, "t1", none, 1, T0, 10, "");
    sc_leasable(f, "t2", a, 1, T0, 10, "t2_high");
    /* Once its runAt has passed, the scheduled job takes its place by priority and age. */
    sc_leasable(f, "t1", a, 1, T0 + 1, 3, "high1,future_high,high2");
    /* Inside a transaction too. */
    assert_int_equal(f->s->ops->begin(f->c), AD_E_OK);
    sc_leasable(f, "t1", a, 1, T0, 2, "high1,high2");
    assert_int_equal(f->s->ops->commit(f->c), AD_E_OK);
}

/* Insert a queued job of group (NULL: none) of type "g" at priority. */
static void sc_insert_grouped(struct fx *f, const char *id, const char *group, enum ad_priority priority)
{
    struct ad_job *j = new_job(id, "t1", "g", AD_QUEUED, priority);
    ad_job_set(&j->group, group);
    sc_insert(f, j);
    ad_job_free(j);
}

/* Take job id out of the queue, as a lease does. */
static void sc_run(struct fx *f, const char *id)
{
    struct ad_job *j = sc_get(f, f->c, "t1", id);
    j->status = AD_RUNNING;
    assert_int_equal(f->s->ops->job_update(f->c, j), AD_E_OK);
    ad_job_free(j);
}

/* Within a priority, a type's groups take turns (the jobs without a group are one group), each group's jobs oldest
 * first; a group that comes to a queue other groups have a backlog in joins the turn the queue is at. */
static void sc_test_leasable_groups_round_robin(void **state)
{
    struct fx *f = *state;
    const char *g[] = {"g"};
    for (int i = 1; i <= 5; i++) {
        char id[16];
        snprintf(id, sizeof(id), "a%d", i);
        sc_insert_grouped(f, id, "A", AD_PRIO_NORMAL);
    }
    sc_insert_grouped(f, "b1", "B", AD_PRIO_NORMAL);
    sc_insert_grouped(f, "b2", "B", AD_PRIO_NORMAL);
    sc_insert_grouped(f, "n1", NULL, AD_PRIO_NORMAL);
    sc_insert_grouped(f, "ah", "A", AD_PRIO_HIGH);
    struct ad_job *j = sc_get(f, f->c, "t1", "b1");
    assert_string_equal(j->group, "B");
    ad_job_free(j);
    j = sc_get(f, f->c, "t1", "n1");
    assert_null(j->group);
    ad_job_free(j);
    sc_leasable(f, "t1", g, 1, T0, 20, "ah,a1,b1,n1,a2,b2,a3,a4,a5");
    sc_leasable(f, "t1", g, 1, T0, 3, "ah,a1,b1");
    /* Leased jobs leave their turns: B's next job joins the turn the queue is at, not the one after B's last. */
    sc_run(f, "ah");
    sc_run(f, "a1");
    sc_run(f, "b1");
    sc_run(f, "n1");
    sc_run(f, "a2");
    sc_run(f, "b2");
    sc_insert_grouped(f, "b3", "B", AD_PRIO_NORMAL);
    sc_insert_grouped(f, "b4", "B", AD_PRIO_NORMAL);
    sc_insert_grouped(f, "c1", "C", AD_PRIO_NORMAL);
    sc_leasable(f, "t1", g, 1, T0, 20, "a3,b3,c1,a4,b4,a5");
    /* Inside a transaction, and with another type asked for too (each type keeps its own turns). */
    sc_insert_new(f, "other", "t1", "o", AD_QUEUED, AD_PRIO_NORMAL, 0);
    assert_int_equal(f->s->ops->begin(f->c), AD_E_OK);
    sc_leasable(f, "t1", g, 1, T0, 2, "a3,b3");
    sc_run(f, "a3");
    sc_insert_grouped(f, "a6", "A", AD_PRIO_NORMAL);
    sc_leasable(f, "t1", g, 1, T0, 20, "b3,c1,a4,b4,a5,a6");
    const char *go[] = {"g", "o"};
    sc_leasable(f, "t1", go, 2, T0, 3, "b3,c1,a4");
    assert_int_equal(f->s->ops->commit(f->c), AD_E_OK);
}

/* The lease of a group-limited type without the skipped groups, bounded by its walk. */
static void sc_leasable_except(struct fx *f, const char *const *skip, size_t nskip, int walk, int limit,
                               const char *want)
{
    struct ad_job_list l = {0};
    assert_int_equal(f->s->ops->job_leasable_except(f->c, "t1", "g", T0, skip, nskip, walk, limit, &l), AD_E_OK);
    assert_ids(&l, want);
    ad_job_list_free(&l);
}

/* The group counts of a list, "group=n,..." in the list's order sorted by group, into buf. */
static const char *sc_group_counts(struct ad_group_count_list *l, char *buf, size_t size)
{
    for (size_t i = 0; i < l->n; i++)
        for (size_t k = i + 1; k < l->n; k++)
            if (strcmp(l->items[k].group, l->items[i].group) < 0) {
                struct ad_group_count t = l->items[i];
                l->items[i] = l->items[k];
                l->items[k] = t;
            }
    buf[0] = '\0';
    for (size_t i = 0; i < l->n; i++)
        snprintf(buf + strlen(buf), size - strlen(buf), "%s%s=%lld", i > 0 ? "," : "", l->items[i].group,
                 (long long)l->items[i].n);
    ad_group_count_list_free(l);
    return buf;
}

/* Per-group limits: running counts by group (at least min), the groups' rate windows (counted, and the older ones
 * forgotten at a count), and the lease that passes over skipped groups within a bounded walk. */
static void sc_test_group_limits(void **state)
{
    struct fx *f = *state;
    const struct ad_store_ops *o = f->s->ops;
    char buf[256];
    struct ad_group_count_list l;
    for (int i = 1; i <= 3; i++) {
        char id[16];
        snprintf(id, sizeof(id), "a%d", i);
        sc_insert_grouped(f, id, "A", AD_PRIO_NORMAL);
    }
    sc_insert_grouped(f, "b1", "B", AD_PRIO_NORMAL);
    sc_insert_grouped(f, "b2", "B", AD_PRIO_NORMAL);
    sc_insert_grouped(f, "n1", NULL, AD_PRIO_NORMAL);
    /* Lease order: a1,b1,n1,a2,b2,a3. */
    const char *none[] = {""};
    const char *a[] = {"A"};
    const char *ab[] = {"A", "B"};
    sc_leasable_except(f, a, 0, 100, 20, "a1,b1,n1,a2,b2,a3");
    sc_leasable_except(f, a, 1, 100, 20, "b1,n1,b2");
    sc_leasable_except(f, ab, 2, 100, 20, "n1");
    sc_leasable_except(f, none, 1, 100, 20, "a1,b1,a2,b2,a3");
    sc_leasable_except(f, a, 1, 100, 2, "b1,n1");
    /* The walk counts the skipped groups' jobs: the first 4 are a1,b1,n1,a2. */
    sc_leasable_except(f, a, 1, 4, 20, "b1,n1");
    sc_leasable_except(f, ab, 2, 2, 20, "");
    sc_insert_new(f, "x1", "t2", "g", AD_QUEUED, AD_PRIO_NORMAL, 0); /* another tenant's */
    sc_leasable_except(f, ab, 2, 100, 20, "n1");

    /* Running counts by group, the jobs without one as "". */
    sc_run(f, "a1");
    sc_run(f, "a2");
    sc_run(f, "b1");
    sc_run(f, "n1");
    sc_insert_new(f, "r1", "t2", "g", AD_RUNNING, AD_PRIO_NORMAL, 0);
    sc_insert_new(f, "r2", "t1", "o", AD_RUNNING, AD_PRIO_NORMAL, 0);
    assert_int_equal(o->queue_group_running(f->c, "t1", "g", 1, &l), AD_E_OK);
    assert_string_equal(sc_group_counts(&l, buf, sizeof(buf)), "=1,A=2,B=1");
    assert_int_equal(o->queue_group_running(f->c, "t1", "g", 2, &l), AD_E_OK);
    assert_string_equal(sc_group_counts(&l, buf, sizeof(buf)), "A=2");
    assert_int_equal(o->queue_group_running(f->c, "t1", "o", 1, &l), AD_E_OK);
    assert_string_equal(sc_group_counts(&l, buf, sizeof(buf)), "=1");
    assert_int_equal(o->queue_group_running(f->c, "t1", "nothing", 1, &l), AD_E_OK);
    assert_int_equal(l.n, 0);
    ad_group_count_list_free(&l);

    /* Rate windows: counts add up within a window; a count in a later window forgets the earlier ones. */
    assert_int_equal(o->begin(f->c), AD_E_OK);
    assert_int_equal(o->queue_group_took(f->c, "t1", "g", "A", T0, 2), AD_E_OK);
    assert_int_equal(o->queue_group_took(f->c, "t1", "g", "A", T0, 1), AD_E_OK);
    assert_int_equal(o->queue_group_took(f->c, "t1", "g", "", T0, 1), AD_E_OK);
    assert_int_equal(o->queue_group_took(f->c, "t2", "g", "A", T0, 5), AD_E_OK);
    /* Read in the writer's own transaction. */
    assert_int_equal(o->queue_group_window(f->c, "t1", "g", T0, 1, &l), AD_E_OK);
    assert_string_equal(sc_group_counts(&l, buf, sizeof(buf)), "=1,A=3");
    assert_int_equal(o->commit(f->c), AD_E_OK);
    assert_int_equal(o->queue_group_window(f->c, "t1", "g", T0, 2, &l), AD_E_OK);
    assert_string_equal(sc_group_counts(&l, buf, sizeof(buf)), "A=3");
    assert_int_equal(o->queue_group_window(f->c, "t1", "g", T0 + 1000, 1, &l), AD_E_OK);
    assert_int_equal(l.n, 0);
    ad_group_count_list_free(&l);
    assert_int_equal(o->begin(f->c), AD_E_OK);
    assert_int_equal(o->queue_group_took(f->c, "t1", "g", "B", T0 + 1000, 1), AD_E_OK);
    assert_int_equal(o->commit(f->c), AD_E_OK);
    assert_int_equal(o->queue_group_window(f->c, "t1", "g", T0, 1, &l), AD_E_OK);
    assert_int_equal(l.n, 0); /* forgotten */
    ad_group_count_list_free(&l);
    assert_int_equal(o->queue_group_window(f->c, "t1", "g", T0 + 1000, 1, &l), AD_E_OK);
    assert_string_equal(sc_group_counts(&l, buf, sizeof(buf)), "B=1");
    assert_int_equal(o->queue_group_window(f->c, "t2", "g", T0, 1, &l), AD_E_OK);
    assert_string_equal(sc_group_counts(&l, buf, sizeof(buf)), "A=5"); /* another tenant's queue is its own */
}

/* A group with a backlog holds back another group's job by one job: 100 jobs of A, then one of B. */
static void sc_test_leasable_group_backlog_does_not_starve(void **state)
{
    struct fx *f = *state;
    const char *g[] = {"g"};
    assert_int_equal(f->s->ops->begin(f->c), AD_E_OK);
    for (int i = 0; i < 100; i++) {
        char id[16];
        snprintf(id, sizeof(id), "a%d", i);
        sc_insert_grouped(f, id, "A", AD_PRIO_NORMAL);
    }
    sc_insert_grouped(f, "b", "B", AD_PRIO_NORMAL);
    assert_int_equal(f->s->ops->commit(f->c), AD_E_OK);
    sc_leasable(f, "t1", g, 1, T0, 3, "a0,b,a1");
    /* In one transaction, after a lease (PostgreSQL keeps the head it read for the leases that follow): a job of the
     * group read last goes behind its group, one of a new group takes its turn at the head. */
    assert_int_equal(f->s->ops->begin(f->c), AD_E_OK);
    sc_leasable(f, "t1", g, 1, T0, 1, "a0");
    sc_run(f, "a0");
    sc_insert_grouped(f, "a_late", "A", AD_PRIO_NORMAL);
    sc_insert_grouped(f, "c", "C", AD_PRIO_NORMAL);
    sc_leasable(f, "t1", g, 1, T0, 3, "b,c,a1");
    f->s->ops->rollback(f->c);
    /* Two backlogs alternate. */
    for (int i = 1; i < 50; i++) {
        char id[16];
        snprintf(id, sizeof(id), "b%d", i);
        sc_insert_grouped(f, id, "B", AD_PRIO_NORMAL);
    }
    struct ad_job_list l = {0};
    assert_int_equal(f->s->ops->job_leasable(f->c, "t1", g, 1, T0, 60, &l), AD_E_OK);
    assert_int_equal(l.n, 60);
    for (size_t i = 0; i < l.n; i++)
        if (strcmp(l.items[i]->group, i % 2 == 0 ? "A" : "B") != 0)
            fail_msg("lease %zu is %s of %s", i, l.items[i]->id, l.items[i]->group);
    ad_job_list_free(&l);
}

/* Type names are data, whatever characters they hold (PostgreSQL passes the list as one text[] literal, in which
 * quotes, backslashes, commas, braces, blanks and NULL are syntax). */
static void sc_test_leasable_types_with_special_chars(void **state)
{
    struct fx *f = *state;
    const char *types[] = {"plain", "with\"quote", "back\\slash", "com,ma", "{brace}", "sp ace", "NULL"};
    for (size_t i = 0; i < 7; i++)
        sc_insert_new(f, types[i], "t1", types[i], AD_QUEUED, AD_PRIO_NORMAL, 0);
    sc_insert_new(f, "not_asked", "t1", "other", AD_QUEUED, AD_PRIO_NORMAL, 0);
    const char *ask[] = {"NULL", "with\"quote", "absent", "back\\slash", "com,ma", "{brace}", "sp ace", "plain"};
    struct ad_job_list l = {0};
    assert_int_equal(f->s->ops->job_leasable(f->c, "t1", ask, 8, T0, 20, &l), AD_E_OK);
    sc_assert_id_set(&l, "NULL,back\\slash,com,ma,plain,sp ace,with\"quote,{brace}");
    ad_job_list_free(&l);
}

static void sc_test_running_jobs_by_lease_expiry(void **state)
{
    struct fx *f = *state;
    const char *ids[] = {"r_late", "q", "r_early", "done"};
    const enum ad_status st[] = {AD_RUNNING, AD_QUEUED, AD_RUNNING, AD_FAILED};
    const int64_t exp[] = {T0 + 100, 0, T0 + 10, 0};
    for (int i = 0; i < 4; i++) {
        struct ad_job *j = new_job(ids[i], i == 2 ? "t2" : "t1", "a", st[i], AD_PRIO_NORMAL);
        j->lease_expires_at = exp[i];
        sc_insert(f, j);
        ad_job_free(j);
    }
    struct ad_job_list l = {0};
    assert_int_equal(f->s->ops->job_running(f->c, &l), AD_E_OK);
    assert_ids(&l, "r_early,r_late");
    assert_int_equal(l.items[0]->lease_expires_at, T0 + 10);
    ad_job_list_free(&l);
}

/* The dashboard's counts: a tenant's jobs (or every tenant's) grouped by type then status, with the oldest's
 * created_at, and no more groups than asked for. */
/* ---- result artifacts ---- */

static struct ad_artifact_part sc_part(const char *job, const char *lease, const char *data, int fresh, uint64_t off,
                                       int last)
{
    struct ad_artifact_part p = {.job_id = job,
                                 .lease_id = lease,
                                 .fresh = fresh,
                                 .offset = off,
                                 .ctype = "text/plain",
                                 .data = data,
                                 .len = strlen(data),
                                 .last = last,
                                 .max_bytes = 1 << 20};
    return p;
}

/* Parts append at their offset only, the last one makes the view, reads give the bytes back from any offset; an
 * upload no job names is the collector's, and the ones a job names (its live lease's, its artifact's) stay. */
static void sc_test_artifacts(void **state)
{
    struct fx *f = *state;
    const struct ad_store_ops *ops = f->s->ops;
    uint64_t off = 99;
    char *view = NULL;
    int done = 1;
    assert_int_equal(ops->artifact_progress(f->c, "art1", "L1", &off, &done), AD_E_NOT_FOUND);
    struct ad_artifact_part p = sc_part("art1", "L1", "hello ", 1, 0, 0);
    assert_int_equal(ops->artifact_write(f->c, &p, &off, &view), AD_E_OK);
    assert_int_equal(off, 6);
    assert_null(view);
    /* A part that is not where the upload is: refused, with where it is. */
    p = sc_part("art1", "L1", "world", 0, 3, 1);
    assert_int_equal(ops->artifact_write(f->c, &p, &off, &view), AD_E_UPLOAD_OFFSET);
    assert_int_equal(off, 6);
    assert_int_equal(ops->artifact_progress(f->c, "art1", "L1", &off, &done), AD_E_OK);
    assert_int_equal(off, 6);
    assert_int_equal(done, 0);
    assert_int_equal(ops->artifact_view(f->c, "art1", "L1", &view), AD_E_NOT_FOUND);
    /* A part whose Content-Digest is wrong is not kept. */
    p = sc_part("art1", "L1", "world", 0, 6, 1);
    p.has_part_digest = 1;
    assert_int_equal(ops->artifact_write(f->c, &p, &off, &view), AD_E_DIGEST_MISMATCH);
    ad_sha256("world", 5, p.part_sha);
    assert_int_equal(ops->artifact_write(f->c, &p, &off, &view), AD_E_OK);
    assert_int_equal(off, 11);
    assert_non_null(view);
    /* sha-256("hello world") */
    assert_non_null(strstr(view, "\"size\":11,\"contentType\":\"text/plain\",\"digest\":\"sha-256=:"
                                 "uU0nuZNNPgilLlLX2n2r+sSE7+N6U4DukIj3rOLvzek=:\""));
    char *again = NULL;
    assert_int_equal(ops->artifact_view(f->c, "art1", "L1", &again), AD_E_OK);
    assert_string_equal(again, view);
    free(again);
    free(view);
    assert_int_equal(ops->artifact_progress(f->c, "art1", "L1", &off, &done), AD_E_OK);
    assert_int_equal(done, 1);
    char buf[32];
    size_t n = 0;
    assert_int_equal(ops->artifact_read(f->c, "art1", "L1", 4, buf, sizeof(buf), &n), AD_E_OK);
    /* A read may end early at a part's end (PostgreSQL reads one part at a time): read on until the end. */
    size_t got = n;
    while (n > 0 && got < 7) {
        assert_int_equal(ops->artifact_read(f->c, "art1", "L1", 4 + got, buf + got, sizeof(buf) - got, &n), AD_E_OK);
        got += n;
    }
    assert_int_equal(got, 7);
    assert_memory_equal(buf, "o world", 7);
    /* The whole artifact's digest is checked too: a wrong one drops the upload. */
    p = sc_part("art2", "L2", "abc", 1, 0, 1);
    p.has_repr_digest = 1;
    assert_int_equal(ops->artifact_write(f->c, &p, &off, &view), AD_E_DIGEST_MISMATCH);
    assert_int_equal(ops->artifact_progress(f->c, "art2", "L2", &off, &done), AD_E_NOT_FOUND);
    /* Past the cap. */
    p = sc_part("art2", "L2", "abc", 1, 0, 1);
    p.max_bytes = 2;
    assert_int_equal(ops->artifact_write(f->c, &p, &off, &view), AD_E_PAYLOAD_TOO_LARGE);

    /* The collector: art1's job names L1 as its artifact, art3's runs under L3; the rest goes. */
    struct ad_job *j = new_job("art1", "t1", "a", AD_SUCCEEDED, AD_PRIO_NORMAL);
    j->artifact = ad_strdup("L1 {}");
    sc_insert(f, j);
    ad_job_free(j);
    j = new_job("art3", "t1", "a", AD_RUNNING, AD_PRIO_NORMAL);
    j->lease_id = ad_strdup("L3");
    sc_insert(f, j);
    ad_job_free(j);
    const char *const uploads[][2] = {{"art1", "L0"}, {"art3", "L3"}, {"art3", "L4"}, {"gone", "L5"}};
    for (size_t i = 0; i < sizeof(uploads) / sizeof(uploads[0]); i++) {
        p = sc_part(uploads[i][0], uploads[i][1], "x", 1, 0, 0);
        assert_int_equal(ops->artifact_write(f->c, &p, &off, &view), AD_E_OK);
    }
    int removed = -1;
    assert_int_equal(ops->artifact_gc(f->c, &removed), AD_E_OK);
    assert_int_equal(removed, 3); /* art1's L0, art3's L4, gone's L5 */
    assert_int_equal(ops->artifact_progress(f->c, "art1", "L1", &off, &done), AD_E_OK);
    assert_int_equal(ops->artifact_progress(f->c, "art3", "L3", &off, &done), AD_E_OK);
    assert_int_equal(ops->artifact_progress(f->c, "art1", "L0", &off, &done), AD_E_NOT_FOUND);
    assert_int_equal(ops->artifact_progress(f->c, "art3", "L4", &off, &done), AD_E_NOT_FOUND);
    assert_int_equal(ops->artifact_progress(f->c, "gone", "L5", &off, &done), AD_E_NOT_FOUND);
    assert_int_equal(ops->artifact_gc(f->c, &removed), AD_E_OK);
    assert_int_equal(removed, 0);
}

/* Queue rows: absent until put, every field round-trips (a limit of 0 is none), a put replaces the row, a list is
 * the tenant's by type, the rows survive a reopen, and the counts split a queue's jobs by state and runAt. */
static void sc_test_queues(void **state)
{
    struct fx *f = *state;
    const struct ad_store_ops *o = f->s->ops;
    struct ad_queue q;
    assert_int_equal(o->queue_get(f->c, "t1", "b", &q), AD_E_NOT_FOUND);
    /* A rolled-back put leaves nothing, even for a read later in the same connection's next transaction. */
    struct ad_queue gone = {.tenant = "t1", .type = "b", .paused = 1};
    assert_int_equal(o->begin(f->c), AD_E_OK);
    assert_int_equal(o->queue_get(f->c, "t1", "b", &q), AD_E_NOT_FOUND);
    assert_int_equal(o->queue_put(f->c, &gone), AD_E_OK);
    assert_int_equal(o->queue_get(f->c, "t1", "b", &q), AD_E_OK);
    assert_int_equal(q.paused, 1);
    ad_queue_clear(&q);
    o->rollback(f->c);
    assert_int_equal(o->begin(f->c), AD_E_OK);
    assert_int_equal(o->queue_get(f->c, "t1", "b", &q), AD_E_NOT_FOUND);
    o->rollback(f->c);
    struct ad_queue w = {.tenant = "t1",
                         .type = "b",
                         .paused = 1,
                         .concurrency = 3,
                         .group_concurrency = 2,
                         .rate = {5, 1000},
                         .group_rate = {7, 60000},
                         .window_start = T0,
                         .window_count = 4};
    assert_int_equal(o->begin(f->c), AD_E_OK);
    assert_int_equal(o->queue_put(f->c, &w), AD_E_OK);
    struct ad_queue a = {.tenant = "t1", .type = "a"};
    assert_int_equal(o->queue_put(f->c, &a), AD_E_OK);
    struct ad_queue other = {.tenant = "t2", .type = "b", .concurrency = 1};
    assert_int_equal(o->queue_put(f->c, &other), AD_E_OK);
    /* The writer reads what it wrote in the same transaction. */
    assert_int_equal(o->queue_get(f->c, "t1", "b", &q), AD_E_OK);
    assert_int_equal(q.window_count, 4);
    ad_queue_clear(&q);
    assert_int_equal(o->commit(f->c), AD_E_OK);
    sc_reopen(f);
    o = f->s->ops;
    assert_int_equal(o->queue_get(f->c, "t1", "b", &q), AD_E_OK);
    assert_string_equal(q.tenant, "t1");
    assert_string_equal(q.type, "b");
    assert_int_equal(q.paused, 1);
    assert_int_equal(q.concurrency, 3);
    assert_int_equal(q.group_concurrency, 2);
    assert_int_equal(q.rate.limit, 5);
    assert_int_equal(q.rate.period_ms, 1000);
    assert_int_equal(q.group_rate.limit, 7);
    assert_int_equal(q.group_rate.period_ms, 60000);
    assert_int_equal(q.window_start, T0);
    assert_int_equal(q.window_count, 4);
    ad_queue_clear(&q);
    /* A put replaces every field: cleared limits read back as none. */
    w.paused = 0;
    w.concurrency = 0;
    w.rate = (struct ad_queue_rate){0, 0};
    assert_int_equal(o->begin(f->c), AD_E_OK);
    assert_int_equal(o->queue_put(f->c, &w), AD_E_OK);
    assert_int_equal(o->commit(f->c), AD_E_OK);
    assert_int_equal(o->queue_get(f->c, "t1", "b", &q), AD_E_OK);
    assert_int_equal(q.paused, 0);
    assert_int_equal(q.concurrency, 0);
    assert_int_equal(q.rate.limit, 0);
    assert_int_equal(q.group_concurrency, 2);
    ad_queue_clear(&q);
    struct ad_queue_list l;
    assert_int_equal(o->queue_list(f->c, "t1", &l), AD_E_OK);
    assert_int_equal(l.n, 2);
    assert_string_equal(l.items[0].type, "a");
    assert_string_equal(l.items[1].type, "b");
    ad_queue_list_free(&l);
    assert_int_equal(o->queue_list(f->c, "nobody", &l), AD_E_OK);
    assert_int_equal(l.n, 0);
    ad_queue_list_free(&l);

    sc_insert_new(f, "q1", "t1", "b", AD_QUEUED, AD_PRIO_NORMAL, 0);
    sc_insert_new(f, "q2", "t1", "b", AD_QUEUED, AD_PRIO_NORMAL, T0 - 1);
    sc_insert_new(f, "q3", "t1", "b", AD_QUEUED, AD_PRIO_NORMAL, T0 + 1000);
    sc_insert_new(f, "q4", "t1", "b", AD_RUNNING, AD_PRIO_NORMAL, 0);
    sc_insert_new(f, "q5", "t1", "b", AD_SUCCEEDED, AD_PRIO_NORMAL, 0);
    sc_insert_new(f, "q6", "t1", "a", AD_RUNNING, AD_PRIO_NORMAL, 0);
    sc_insert_new(f, "q7", "t2", "b", AD_RUNNING, AD_PRIO_NORMAL, 0);
    struct ad_queue_counts k;
    assert_int_equal(o->queue_counts(f->c, "t1", "b", T0, &k), AD_E_OK);
    assert_int_equal(k.queued, 2);
    assert_int_equal(k.running, 1);
    assert_int_equal(k.scheduled, 1);
    int64_t running = -1;
    assert_int_equal(o->queue_running(f->c, "t1", "b", &running), AD_E_OK);
    assert_int_equal(running, 1);
    assert_int_equal(o->queue_running(f->c, "t1", "c", &running), AD_E_OK);
    assert_int_equal(running, 0);
}

static void sc_test_job_counts_by_type_and_status(void **state)
{
    struct fx *f = *state;
    const struct {
        const char *id, *tenant, *type;
        enum ad_status st;
        int64_t created;
    } rows[] = {
        {"c1", "t1", "b", AD_QUEUED, T0 + 30}, {"c2", "t1", "b", AD_QUEUED, T0 + 10}, {"c3", "t1", "a", AD_FAILED, T0},
        {"c4", "t1", "b", AD_RUNNING, T0 + 5}, {"c5", "t2", "b", AD_QUEUED, T0 + 1},
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        struct ad_job *j = new_job(rows[i].id, rows[i].tenant, rows[i].type, rows[i].st, AD_PRIO_NORMAL);
        j->created_at = rows[i].created;
        sc_insert(f, j);
        ad_job_free(j);
    }
    struct ad_job_count_list l = {0};
    assert_int_equal(f->s->ops->job_counts(f->c, "t1", 100, &l), AD_E_OK);
    assert_int_equal(l.n, 3);
    assert_string_equal(l.items[0].type, "a");
    assert_int_equal(l.items[0].status, AD_FAILED);
    assert_int_equal(l.items[0].n, 1);
    assert_string_equal(l.items[1].type, "b");
    assert_int_equal(l.items[1].status, AD_QUEUED);
    assert_int_equal(l.items[1].n, 2);
    assert_int_equal(l.items[1].oldest, T0 + 10);
    assert_int_equal(l.items[2].status, AD_RUNNING);
    ad_job_count_list_free(&l);
    assert_int_equal(f->s->ops->job_counts(f->c, NULL, 100, &l), AD_E_OK);
    assert_int_equal(l.n, 3);
    assert_int_equal(l.items[1].n, 3);
    assert_int_equal(l.items[1].oldest, T0 + 1);
    ad_job_count_list_free(&l);
    assert_int_equal(f->s->ops->job_counts(f->c, "t1", 2, &l), AD_E_OK);
    assert_int_equal(l.n, 2);
    ad_job_count_list_free(&l);
    assert_int_equal(f->s->ops->job_counts(f->c, "nobody", 100, &l), AD_E_OK);
    assert_int_equal(l.n, 0);
    ad_job_count_list_free(&l);
}

static void sc_test_scheduled_soonest_first(void **state)
{
    struct fx *f = *state;
    const struct ad_store_ops *ops = f->s->ops;
    sc_insert_new(f, "later", "t1", "a", AD_QUEUED, AD_PRIO_NORMAL, T0 + 300);
    sc_insert_new(f, "due", "t1", "a", AD_QUEUED, AD_PRIO_NORMAL, T0);
    sc_insert_new(f, "soon", "t2", "a", AD_QUEUED, AD_PRIO_NORMAL, T0 + 100);
    sc_insert_new(f, "running", "t1", "a", AD_RUNNING, AD_PRIO_NORMAL, T0 + 50);
    sc_insert_new(f, "now", "t1", "a", AD_QUEUED, AD_PRIO_NORMAL, 0);
    sc_insert_new(f, "mid", "t1", "a", AD_QUEUED, AD_PRIO_NORMAL, T0 + 200);
    sc_insert_new(f, "tie", "t2", "a", AD_QUEUED, AD_PRIO_NORMAL, T0 + 200);

    struct ad_job_list l = {0};
    assert_int_equal(ops->job_scheduled(f->c, T0, INT64_MAX, 10, &l), AD_E_OK);
    assert_ids(&l, "soon,mid,tie,later");
    ad_job_list_free(&l);
    assert_int_equal(ops->job_scheduled(f->c, T0 - 1, INT64_MAX, 10, &l), AD_E_OK);
    assert_ids(&l, "due,soon,mid,tie,later");
    ad_job_list_free(&l);
    assert_int_equal(ops->job_scheduled(f->c, T0, INT64_MAX, 2, &l), AD_E_OK);
    assert_ids(&l, "soon,mid");
    /* The cursor is (run_at, cseq): a job is not after its own key, and is after one just before it; a cursor
     * between two jobs of the same run_at starts the next page with the second. */
    int64_t mid_cseq = l.items[1]->cseq;
    ad_job_list_free(&l);
    assert_int_equal(ops->job_scheduled(f->c, T0 + 200, mid_cseq, 10, &l), AD_E_OK);
    assert_ids(&l, "tie,later");
    ad_job_list_free(&l);
    assert_int_equal(ops->job_scheduled(f->c, T0 + 200, mid_cseq - 1, 10, &l), AD_E_OK);
    assert_ids(&l, "mid,tie,later");
    ad_job_list_free(&l);
    assert_int_equal(ops->job_scheduled(f->c, T0 + 200, INT64_MAX, 10, &l), AD_E_OK);
    assert_ids(&l, "later");
    ad_job_list_free(&l);
    assert_int_equal(ops->job_scheduled(f->c, T0 + 300, INT64_MAX, 10, &l), AD_E_OK);
    assert_ids(&l, "");
    ad_job_list_free(&l);
}

/* ---- unique keys ---- */

static struct ad_job *sc_unique(struct fx *f, const char *tenant, const char *type, const char *key, ad_err want)
{
    struct ad_job *j = (struct ad_job *)1;
    ad_err e = f->s->ops->job_unique(f->c, tenant, type, key, &j);
    if (e != want)
        fail_msg("job_unique %s/%s/%s: %s, want %s", tenant, type, key, ad_err_code(e), ad_err_code(want));
    if (want != AD_E_OK)
        assert_null(j);
    return j;
}

static void sc_insert_keyed(struct fx *f, const char *id, const char *tenant, const char *type, enum ad_status status,
                            const char *key)
{
    struct ad_job *j = new_job(id, tenant, type, status, AD_PRIO_NORMAL);
    ad_job_set(&j->unique_key, key);
    sc_insert(f, j);
    ad_job_free(j);
}

/* job_unique finds the live (queued or running) job of a tenant, type and key, the oldest of several; ended jobs,
 * other tenants, types and keys are not it. */
static void sc_test_unique_key_finds_the_live_job(void **state)
{
    struct fx *f = *state;
    const struct ad_store_ops *ops = f->s->ops;
    sc_insert_keyed(f, "done", "t1", "a", AD_SUCCEEDED, "k");
    sc_insert_keyed(f, "failed", "t1", "a", AD_FAILED, "k");
    sc_insert_keyed(f, "queued", "t1", "a", AD_QUEUED, "k");
    sc_insert_keyed(f, "later", "t1", "a", AD_QUEUED, "k");
    sc_insert_keyed(f, "running", "t1", "b", AD_RUNNING, "k");
    sc_insert_keyed(f, "other", "t2", "a", AD_QUEUED, "k");
    sc_insert_keyed(f, "nokey", "t1", "c", AD_QUEUED, NULL);
    struct ad_job *j = sc_unique(f, "t1", "a", "k", AD_E_OK);
    assert_string_equal(j->id, "queued");
    assert_string_equal(j->unique_key, "k");
    /* Ended, the oldest live job gives way to the next. */
    j->status = AD_CANCELLED;
    assert_int_equal(ops->job_update(f->c, j), AD_E_OK);
    ad_job_free(j);
    j = sc_unique(f, "t1", "a", "k", AD_E_OK);
    assert_string_equal(j->id, "later");
    ad_job_free(j);
    j = sc_unique(f, "t1", "b", "k", AD_E_OK);
    assert_string_equal(j->id, "running");
    ad_job_free(j);
    j = sc_unique(f, "t2", "a", "k", AD_E_OK);
    assert_string_equal(j->id, "other");
    ad_job_free(j);
    sc_unique(f, "t1", "a", "K", AD_E_NOT_FOUND);
    sc_unique(f, "t1", "c", "k", AD_E_NOT_FOUND);
    sc_unique(f, "t3", "a", "k", AD_E_NOT_FOUND);
    j = sc_get(f, f->c, "t1", "later");
    j->status = AD_SUCCEEDED;
    assert_int_equal(ops->job_update(f->c, j), AD_E_OK);
    ad_job_free(j);
    sc_unique(f, "t1", "a", "k", AD_E_NOT_FOUND);
}

/* job_set_payload replaces the payload that job_update leaves alone, and a read in the same transaction sees it. */
static void sc_test_set_payload(void **state)
{
    struct fx *f = *state;
    const struct ad_store_ops *ops = f->s->ops;
    sc_insert_keyed(f, "deb", "t1", "a", AD_QUEUED, "k");
    assert_int_equal(ops->begin(f->c), AD_E_OK);
    struct ad_job *j = sc_get(f, f->c, "t1", "deb");
    j->run_at = T0 + 1000;
    assert_int_equal(ops->job_update(f->c, j), AD_E_OK); /* a backend may remember the row it wrote */
    assert_int_equal(ops->job_set_payload(f->c, "deb", "{\"v\":2}"), AD_E_OK);
    ad_job_set(&j->payload, "{\"v\":2}");
    j->run_at = T0 + 2000;
    assert_int_equal(ops->job_update(f->c, j), AD_E_OK);
    struct ad_job *g = sc_get(f, f->c, "t1", "deb");
    assert_string_equal(g->payload, "{\"v\":2}");
    assert_int_equal(g->run_at, T0 + 2000);
    ad_job_free(g);
    assert_int_equal(ops->job_set_payload(f->c, "deb", "{\"v\":3}"), AD_E_OK);
    g = sc_get(f, f->c, "t1", "deb");
    assert_string_equal(g->payload, "{\"v\":3}");
    ad_job_free(g);
    assert_int_equal(ops->commit(f->c), AD_E_OK);
    assert_int_equal(ops->job_set_payload(f->c, "nope", "{}"), AD_E_NOT_FOUND);
    struct ad_conn *r = sc_connect(f->s);
    g = sc_get(f, r, "t1", "deb");
    assert_string_equal(g->payload, "{\"v\":3}");
    assert_int_equal(g->run_at, T0 + 2000);
    assert_int_equal(g->seq, j->seq);
    ad_job_free(g);
    ops->disconnect(r);
    ad_job_free(j);
}

/* ---- retention ---- */

static void sc_test_sweep_tombstones_then_deletes(void **state)
{
    struct fx *f = *state;
    const int64_t tomb = 1000;
    sc_insert_expiring(f, "e1", T0 - 10);
    sc_insert_expiring(f, "e2", T0 - 5);
    sc_insert_expiring(f, "e3", T0);
    sc_insert_expiring(f, "live", T0 + tomb);
    sc_insert_new(f, "forever", "t1", "a", AD_QUEUED, AD_PRIO_NORMAL, 0);

    int n = -1;
    assert_int_equal(f->s->ops->sweep(f->c, T0, tomb, 2, &n), AD_E_OK);
    assert_int_equal(n, 2);
    assert_int_equal(f->s->ops->sweep(f->c, T0, tomb, 2, &n), AD_E_OK);
    assert_int_equal(n, 1);
    assert_int_equal(f->s->ops->sweep(f->c, T0, tomb, 2, &n), AD_E_OK);
    assert_int_equal(n, 0);

    const char *gone[] = {"e1", "e2", "e3"};
    for (int i = 0; i < 3; i++) {
        struct ad_job *g = sc_get(f, f->c, "t1", gone[i]);
        assert_int_equal(g->tombstoned, 1);
        assert_string_equal(g->payload, "{}");
        assert_null(g->result);
        assert_null(g->error);
        assert_null(g->message);
        ad_job_free(g);
    }
    struct ad_job *g = sc_get(f, f->c, "t1", "live");
    assert_int_equal(g->tombstoned, 0);
    assert_string_equal(g->result, "{\"big\":true}");
    assert_string_equal(g->payload, "{\"n\":1}");
    ad_job_free(g);
    g = sc_get(f, f->c, "t1", "forever");
    assert_int_equal(g->tombstoned, 0);
    ad_job_free(g);

    /* At T0 + tomb - 5, e1 and e2 are past their tombstone period, e3 is not, live has not expired. */
    assert_int_equal(f->s->ops->sweep(f->c, T0 + tomb - 5, tomb, 1, &n), AD_E_OK);
    assert_int_equal(n, 1);
    assert_int_equal(f->s->ops->sweep(f->c, T0 + tomb - 5, tomb, 10, &n), AD_E_OK);
    assert_int_equal(n, 1);
    sc_assert_not_found(f, f->c, NULL, "e1");
    sc_assert_not_found(f, f->c, NULL, "e2");
    g = sc_get(f, f->c, "t1", "e3");
    assert_int_equal(g->tombstoned, 1);
    ad_job_free(g);
    g = sc_get(f, f->c, "t1", "live");
    assert_int_equal(g->tombstoned, 0);
    ad_job_free(g);

    /* live expires and is tombstoned, and e3 is deleted, in one call. */
    assert_int_equal(f->s->ops->sweep(f->c, T0 + tomb + 1, tomb, 10, &n), AD_E_OK);
    assert_int_equal(n, 2);
    sc_assert_not_found(f, f->c, NULL, "e3");
    g = sc_get(f, f->c, "t1", "live");
    assert_int_equal(g->tombstoned, 1);
    ad_job_free(g);
}

/* The event log: rows come back by seq after a cursor, a page at a time, one per seq; tombstoning a job empties
 * its log (a done event must not outlive the result) and deleting the job removes it; other jobs keep theirs. */
static void sc_test_job_events(void **state)
{
    struct fx *f = *state;
    const struct ad_store_ops *ops = f->s->ops;
    const int64_t tomb = 1000;
    sc_insert_expiring(f, "ev", T0);
    sc_insert_new(f, "other", "t1", "a", AD_QUEUED, AD_PRIO_NORMAL, 0);
    assert_int_equal(ops->event_append(f->c, "ev", 10, "status", "{\"s\":1}"), AD_E_OK);
    assert_int_equal(ops->event_append(f->c, "other", 11, "status", "{\"o\":1}"), AD_E_OK);
    assert_int_equal(ops->event_append(f->c, "ev", 12, "progress", "{\"p\":5}"), AD_E_OK);
    assert_int_equal(ops->event_append(f->c, "ev", 13, "done", NULL), AD_E_OK);
    assert_int_not_equal(ops->event_append(f->c, "ev", 12, "progress", "{}"), AD_E_OK); /* one event per seq */

    sc_events(f, "ev", 0, 100, "10:status:{\"s\":1} 12:progress:{\"p\":5} 13:done:-");
    sc_events(f, "ev", 10, 1, "12:progress:{\"p\":5}");
    sc_events(f, "ev", 12, 100, "13:done:-");
    sc_events(f, "ev", 13, 100, "");
    sc_events(f, "nope", 0, 100, "");

    int n;
    assert_int_equal(ops->sweep(f->c, T0, tomb, 10, &n), AD_E_OK); /* tombstones ev */
    sc_events(f, "ev", 0, 100, "");
    sc_events(f, "other", 0, 100, "11:status:{\"o\":1}");
    assert_int_equal(ops->event_append(f->c, "ev", 14, "status", "{}"), AD_E_OK);
    assert_int_equal(ops->sweep(f->c, T0 + tomb, tomb, 10, &n), AD_E_OK); /* deletes ev */
    sc_assert_not_found(f, f->c, NULL, "ev");
    sc_events(f, "ev", 0, 100, "");
    sc_events(f, "other", 0, 100, "11:status:{\"o\":1}");
}

/* The attempt history: rows oldest first, with their worker (or none), times and outcome; deleted with the job. */
static void sc_test_attempts(void **state)
{
    struct fx *f = *state;
    const struct ad_store_ops *ops = f->s->ops;
    const int64_t tomb = 1000;
    sc_insert_expiring(f, "e1", T0 - 10);
    sc_insert_new(f, "other", "t1", "a", AD_QUEUED, AD_PRIO_NORMAL, 0);
    struct ad_attempt_list al;
    assert_int_equal(ops->attempt_list(f->c, "e1", &al), AD_E_OK);
    assert_int_equal(al.n, 0);
    ad_attempt_list_free(&al);

    struct ad_job a1 = {.id = "e1", .attempt = 1, .worker = "w1", .started_at = T0 - 100};
    struct ad_job a2 = {.id = "e1", .attempt = 2, .started_at = T0 - 80};
    struct ad_job o1 = {.id = "other", .attempt = 1, .worker = "w9", .started_at = T0 - 50};
    assert_int_equal(ops->attempt_add(f->c, &a1, T0 - 90, "retrying"), AD_E_OK);
    assert_int_equal(ops->attempt_add(f->c, &o1, T0 - 40, "released"), AD_E_OK);
    assert_int_equal(ops->attempt_add(f->c, &a2, T0 - 70, "failed"), AD_E_OK);
    assert_int_equal(ops->attempt_list(f->c, "e1", &al), AD_E_OK);
    assert_int_equal(al.n, 2);
    assert_int_equal(al.items[0].attempt, 1);
    assert_string_equal(al.items[0].worker, "w1");
    assert_int_equal(al.items[0].started_at, T0 - 100);
    assert_int_equal(al.items[0].ended_at, T0 - 90);
    assert_string_equal(al.items[0].outcome, "retrying");
    assert_int_equal(al.items[1].attempt, 2);
    assert_null(al.items[1].worker);
    assert_int_equal(al.items[1].started_at, T0 - 80);
    assert_int_equal(al.items[1].ended_at, T0 - 70);
    assert_string_equal(al.items[1].outcome, "failed");
    ad_attempt_list_free(&al);

    /* Tombstoned, the job keeps its history; deleted, it goes with it. */
    int n;
    assert_int_equal(ops->sweep(f->c, T0, tomb, 10, &n), AD_E_OK);
    assert_int_equal(ops->attempt_list(f->c, "e1", &al), AD_E_OK);
    assert_int_equal(al.n, 2);
    ad_attempt_list_free(&al);
    assert_int_equal(ops->sweep(f->c, T0 + tomb, tomb, 10, &n), AD_E_OK);
    sc_assert_not_found(f, f->c, NULL, "e1");
    assert_int_equal(ops->attempt_list(f->c, "e1", &al), AD_E_OK);
    assert_int_equal(al.n, 0);
    ad_attempt_list_free(&al);
    assert_int_equal(ops->attempt_list(f->c, "other", &al), AD_E_OK);
    assert_int_equal(al.n, 1);
    assert_string_equal(al.items[0].worker, "w9");
    ad_attempt_list_free(&al);
}

static void sc_test_idempotency_records(void **state)
{
    struct fx *f = *state;
    const struct ad_store_ops *ops = f->s->ops;
    const char *fp1 = "0000000000000000000000000000000000000000000000000000000000000001";
    const char *fp2 = "ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff";
    assert_int_equal(ops->idem_put(f->c, "t1", "k1", fp1, "job_1", T0), AD_E_OK);
    assert_int_equal(ops->idem_put(f->c, "t2", "k1", fp2, "job_2", T0 + 10), AD_E_OK);
    assert_int_equal(ops->idem_put(f->c, "t1", "k3", fp2, "job_3", T0 + 20), AD_E_OK);

    struct ad_idem r;
    assert_int_equal(ops->idem_get(f->c, "t1", "k1", &r), AD_E_OK);
    assert_string_equal(r.fingerprint, fp1);
    assert_string_equal(r.job_id, "job_1");
    assert_int_equal(r.created_at, T0);
    free(r.job_id);
    assert_int_equal(ops->idem_get(f->c, "t2", "k1", &r), AD_E_OK);
    assert_string_equal(r.fingerprint, fp2);
    assert_string_equal(r.job_id, "job_2");
    free(r.job_id);
    assert_int_equal(ops->idem_get(f->c, "t3", "k1", &r), AD_E_NOT_FOUND);
    assert_null(r.job_id);
    assert_int_equal(ops->idem_get(f->c, "t1", "k2", &r), AD_E_NOT_FOUND);

    /* A put on an existing key replaces the record. */
    assert_int_equal(ops->idem_put(f->c, "t1", "k1", fp2, "job_9", T0 + 30), AD_E_OK);
    assert_int_equal(ops->idem_get(f->c, "t1", "k1", &r), AD_E_OK);
    assert_string_equal(r.fingerprint, fp2);
    assert_string_equal(r.job_id, "job_9");
    assert_int_equal(r.created_at, T0 + 30);
    free(r.job_id);

    /* Now t2/k1 (T0 + 10) and t1/k3 (T0 + 20) are older than T0 + 21; t1/k1 (T0 + 30) is not. */
    int n = -1;
    assert_int_equal(ops->idem_sweep(f->c, T0 + 21, 1, &n), AD_E_OK);
    assert_int_equal(n, 1);
    assert_int_equal(ops->idem_sweep(f->c, T0 + 21, 10, &n), AD_E_OK);
    assert_int_equal(n, 1);
    assert_int_equal(ops->idem_sweep(f->c, T0 + 21, 10, &n), AD_E_OK);
    assert_int_equal(n, 0);
    assert_int_equal(ops->idem_get(f->c, "t2", "k1", &r), AD_E_NOT_FOUND);
    assert_int_equal(ops->idem_get(f->c, "t1", "k3", &r), AD_E_NOT_FOUND);
    assert_int_equal(ops->idem_get(f->c, "t1", "k1", &r), AD_E_OK);
    free(r.job_id);
}

/* ---- webhooks and the outbox ---- */

static void sc_test_webhooks(void **state)
{
    struct fx *f = *state;
    const struct ad_store_ops *ops = f->s->ops;
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
    struct ad_webhook other = {
        .id = "whk_o", .tenant = "t2", .url = "https://o.example/", .events = 1, .secret = "so", .created_at = T0};
    assert_int_equal(ops->webhook_put(f->c, &w1), AD_E_OK);
    assert_int_equal(ops->webhook_put(f->c, &w2), AD_E_OK);
    assert_int_equal(ops->webhook_put(f->c, &cb), AD_E_OK);
    assert_int_equal(ops->webhook_put(f->c, &other), AD_E_OK);

    struct ad_webhook *g = NULL;
    assert_int_equal(ops->webhook_get(f->c, NULL, "whk_2", &g), AD_E_OK);
    assert_string_equal(g->id, "whk_2");
    assert_string_equal(g->tenant, "t1");
    assert_string_equal(g->url, "https://b.example/");
    assert_int_equal(g->events, 1);
    assert_string_equal(g->secret, "s2");
    assert_string_equal(g->prev_secret, "p2");
    assert_int_equal(g->prev_until, T0 + 9);
    assert_int_equal(g->created_at, T0);
    assert_int_equal(g->disabled_at, 0);
    assert_null(g->disabled_reason);
    ad_webhook_free(g);
    assert_int_equal(ops->webhook_get(f->c, "t1", "whk_2", &g), AD_E_OK);
    ad_webhook_free(g);
    g = (struct ad_webhook *)1;
    assert_int_equal(ops->webhook_get(f->c, "t2", "whk_2", &g), AD_E_NOT_FOUND);
    assert_null(g);
    assert_int_equal(ops->webhook_get(f->c, "t1", NULL, &g), AD_E_OK);
    assert_string_equal(g->id, "whk_cb");
    assert_null(g->url);
    assert_string_equal(g->secret, "cbs");
    ad_webhook_free(g);
    assert_int_equal(ops->webhook_get(f->c, "t2", NULL, &g), AD_E_NOT_FOUND);
    assert_null(g);

    /* A tenant's endpoints oldest first, never the callback secret nor another tenant's; the same inside a
     * transaction, where the list follows the transaction's own writes and its undone operations. */
    struct ad_webhook_list l;
    for (int in_tx = 0; in_tx < 2; in_tx++) {
        assert_int_equal(ops->webhook_list(f->c, "t1", 1, &l), AD_E_OK);
        assert_int_equal(l.n, 2);
        assert_string_equal(l.items[0]->id, "whk_1");
        assert_string_equal(l.items[1]->id, "whk_2");
        assert_string_equal(l.items[1]->prev_secret, "p2");
        ad_webhook_list_free(&l);
        assert_int_equal(ops->webhook_list(f->c, "t3", 0, &l), AD_E_OK);
        assert_int_equal(l.n, 0);
        ad_webhook_list_free(&l);
        if (in_tx == 0)
            assert_int_equal(ops->begin(f->c), AD_E_OK);
    }
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
    /* A rotation: webhook_put replaces the row with its id. */
    w2.secret = "s2b";
    w2.prev_secret = "s2";
    w2.prev_until = T0 + 99;
    assert_int_equal(ops->webhook_put(f->c, &w2), AD_E_OK);
    assert_int_equal(ops->webhook_get(f->c, "t1", "whk_2", &g), AD_E_OK);
    assert_string_equal(g->secret, "s2b");
    assert_string_equal(g->prev_secret, "s2");
    assert_int_equal(g->prev_until, T0 + 99);
    ad_webhook_free(g);

    /* Deleting an endpoint: only the tenant's own, never the callback secret; inside a batch too. */
    assert_int_equal(ops->webhook_delete(f->c, "t2", "whk_1"), AD_E_NOT_FOUND);
    assert_int_equal(ops->webhook_delete(f->c, "t1", "whk_cb"), AD_E_NOT_FOUND);
    assert_int_equal(ops->webhook_delete(f->c, "t1", "whk_1"), AD_E_OK);
    assert_int_equal(ops->webhook_delete(f->c, "t1", "whk_1"), AD_E_NOT_FOUND);
    assert_int_equal(ops->webhook_get(f->c, NULL, "whk_1", &g), AD_E_NOT_FOUND);
    assert_int_equal(ops->begin(f->c), AD_E_OK);
    assert_int_equal(ops->webhook_list(f->c, "t1", 0, &l), AD_E_OK);
    assert_int_equal(l.n, 1);
    ad_webhook_list_free(&l);
    assert_int_equal(ops->webhook_delete(f->c, "t1", "whk_nope"), AD_E_NOT_FOUND);
    assert_int_equal(ops->webhook_delete(f->c, "t1", "whk_2"), AD_E_OK);
    assert_int_equal(ops->webhook_list(f->c, "t1", 0, &l), AD_E_OK);
    assert_int_equal(l.n, 0);
    ad_webhook_list_free(&l);
    assert_int_equal(ops->commit(f->c), AD_E_OK);
    assert_int_equal(ops->webhook_get(f->c, NULL, "whk_2", &g), AD_E_NOT_FOUND);
    assert_int_equal(ops->webhook_get(f->c, "t1", NULL, &g), AD_E_OK); /* the secret stays */
    ad_webhook_free(g);
    assert_int_equal(ops->webhook_get(f->c, "t2", "whk_o", &g), AD_E_OK);
    ad_webhook_free(g);
}

/* Inside a write transaction the store answers a webhook lookup it has made once from memory: the outbox asks
 * on every change. What it remembers follows its own endpoint writes and undone operations; a row changed behind
 * its back shows only once the transaction has ended. */
static void sc_test_webhook_lookups_kept_for_the_transaction(void **state)
{
    struct fx *f = *state;
    const struct ad_store_ops *ops = f->s->ops;
    struct ad_webhook w1 = {.id = "whk_1", .tenant = "t1", .url = "https://a.example/", .events = 5, .secret = "s1"};
    struct ad_webhook w2 = {.id = "whk_2", .tenant = "t1", .url = "https://b.example/", .events = 1, .secret = "s2"};
    struct ad_webhook cb = {.id = "whk_cb", .tenant = "t1", .secret = "cbs"};
    assert_int_equal(ops->webhook_put(f->c, &w1), AD_E_OK);
    assert_int_equal(ops->webhook_put(f->c, &w2), AD_E_OK);
    assert_int_equal(ops->webhook_put(f->c, &cb), AD_E_OK);
    struct ad_webhook_list l;
    struct ad_webhook *g;

    assert_int_equal(ops->begin(f->c), AD_E_OK);
    assert_int_equal(ops->webhook_list(f->c, "t1", 1, &l), AD_E_OK);
    assert_int_equal(l.n, 2);
    ad_webhook_list_free(&l);
    assert_int_equal(ops->webhook_get(f->c, "t1", NULL, &g), AD_E_OK);
    ad_webhook_free(g);
    sc_exec_behind(f, "UPDATE webhooks SET disabled_at = 1 WHERE id = 'whk_1';"
                      "UPDATE webhooks SET secret = 'other' WHERE id = 'whk_cb'");
    assert_int_equal(ops->webhook_list(f->c, "t1", 1, &l), AD_E_OK);
    assert_int_equal(l.n, 2); /* remembered */
    assert_string_equal(l.items[1]->secret, "s2");
    ad_webhook_list_free(&l);
    assert_int_equal(ops->webhook_get(f->c, "t1", NULL, &g), AD_E_OK);
    assert_string_equal(g->secret, "cbs"); /* remembered */
    ad_webhook_free(g);
    assert_int_equal(ops->webhook_get(f->c, NULL, "whk_1", &g), AD_E_OK); /* by id: never remembered */
    assert_int_equal(g->disabled_at, 1);
    ad_webhook_free(g);
    assert_int_equal(ops->webhook_put(f->c, &w2), AD_E_OK); /* its own write: looked up again */
    assert_int_equal(ops->webhook_list(f->c, "t1", 1, &l), AD_E_OK);
    assert_int_equal(l.n, 1);
    assert_string_equal(l.items[0]->id, "whk_2");
    ad_webhook_list_free(&l);
    assert_int_equal(ops->webhook_list(f->c, "t1", 0, &l), AD_E_OK);
    assert_int_equal(l.n, 2);
    ad_webhook_list_free(&l);

    /* An undone operation takes what it wrote out of the remembered lookups too. */
    w1.disabled_at = 0;
    assert_int_equal(ops->savepoint(f->c), AD_E_OK);
    assert_int_equal(ops->webhook_put(f->c, &w1), AD_E_OK);
    assert_int_equal(ops->webhook_list(f->c, "t1", 1, &l), AD_E_OK);
    assert_int_equal(l.n, 2);
    ad_webhook_list_free(&l);
    ops->rollback_to(f->c);
    assert_int_equal(ops->webhook_list(f->c, "t1", 1, &l), AD_E_OK);
    assert_int_equal(l.n, 1);
    ad_webhook_list_free(&l);
    assert_int_equal(ops->commit(f->c), AD_E_OK);

    /* Outside a transaction every lookup reads the database. */
    sc_exec_behind(f, "UPDATE webhooks SET disabled_at = NULL");
    assert_int_equal(ops->webhook_list(f->c, "t1", 1, &l), AD_E_OK);
    assert_int_equal(l.n, 2);
    ad_webhook_list_free(&l);
    assert_int_equal(ops->webhook_get(f->c, "t1", NULL, &g), AD_E_OK);
    assert_string_equal(g->secret, "other");
    ad_webhook_free(g);
    /* A new transaction starts with nothing remembered. */
    assert_int_equal(ops->begin(f->c), AD_E_OK);
    assert_int_equal(ops->webhook_list(f->c, "t1", 1, &l), AD_E_OK);
    assert_int_equal(l.n, 2);
    ad_webhook_list_free(&l);
    ops->rollback(f->c);
    sc_exec_behind(f, "UPDATE webhooks SET disabled_at = 5 WHERE id = 'whk_2'");
    assert_int_equal(ops->begin(f->c), AD_E_OK);
    assert_int_equal(ops->webhook_list(f->c, "t1", 1, &l), AD_E_OK);
    assert_int_equal(l.n, 1);
    ad_webhook_list_free(&l);
    assert_int_equal(ops->commit(f->c), AD_E_OK);
}

static void sc_test_deliveries(void **state)
{
    struct fx *f = *state;
    const struct ad_store_ops *ops = f->s->ops;
    struct ad_webhook w1 = {.id = "whk_1", .tenant = "t1", .url = "https://a.example/", .secret = "s1"};
    struct ad_webhook w2 = {.id = "whk_2", .tenant = "t1", .url = "https://b.example/", .secret = "s2"};
    assert_int_equal(ops->webhook_put(f->c, &w1), AD_E_OK);
    assert_int_equal(ops->webhook_put(f->c, &w2), AD_E_OK);

    struct ad_delivery d1 = sc_delivery("dlv_1", "whk_1", T0 + 20);
    struct ad_delivery d2 = sc_delivery("dlv_2", "whk_2", T0 + 10);
    struct ad_delivery d3 = sc_delivery("dlv_3", "whk_2", T0 + 30);
    assert_int_equal(ops->delivery_insert(f->c, &d1), AD_E_OK);
    assert_int_equal(ops->delivery_insert(f->c, &d2), AD_E_OK);
    assert_int_equal(ops->delivery_insert(f->c, &d3), AD_E_OK);
    assert_true(d1.seq > 0 && d2.seq > d1.seq && d3.seq > d2.seq);

    /* Every field reads back. */
    struct ad_delivery *got = NULL;
    assert_int_equal(ops->delivery_get(f->c, "t1", "dlv_1", 0, &got), AD_E_OK);
    assert_int_equal(got->seq, d1.seq);
    assert_string_equal(got->id, "dlv_1");
    assert_string_equal(got->tenant, "t1");
    assert_string_equal(got->webhook_id, "whk_1");
    assert_string_equal(got->url, "https://h.example/in");
    assert_string_equal(got->event_id, "evt_1");
    assert_string_equal(got->event_type, "job.succeeded");
    assert_string_equal(got->job_id, "job_1");
    assert_string_equal(got->body, "{\"id\":\"evt_1\"}");
    assert_int_equal(got->created_at, T0);
    assert_int_equal(got->state, AD_DLV_PENDING);
    assert_int_equal(got->attempts, 0);
    assert_int_equal(got->next_at, T0 + 20);
    assert_int_equal(got->last_at, 0);
    assert_int_equal(got->last_status, 0);
    assert_null(got->last_error);
    ad_delivery_free(got);

    /* The due queue: soonest first, with the endpoint; a limit; endpoints left out. */
    struct ad_due due[8];
    size_t n = 0;
    assert_int_equal(ops->delivery_due(f->c, NULL, 0, 8, due, &n), AD_E_OK);
    assert_int_equal(n, 3);
    assert_int_equal(due[0].seq, d2.seq);
    assert_int_equal(due[0].next_at, T0 + 10);
    assert_string_equal(due[0].webhook_id, "whk_2");
    assert_int_equal(due[1].seq, d1.seq);
    assert_string_equal(due[1].webhook_id, "whk_1");
    assert_int_equal(due[2].seq, d3.seq);
    assert_int_equal(ops->delivery_due(f->c, NULL, 0, 1, due, &n), AD_E_OK);
    assert_int_equal(n, 1);
    const char *full[] = {"whk_2", "whk_9"};
    assert_int_equal(ops->delivery_due(f->c, full, 2, 8, due, &n), AD_E_OK);
    assert_int_equal(n, 1);
    assert_int_equal(due[0].seq, d1.seq);

    /* An update writes the outcome; only pending deliveries keep a due time. */
    d2.state = AD_DLV_DELIVERED;
    d2.attempts = 1;
    d2.last_at = T0 + 11;
    d2.last_status = 204;
    assert_int_equal(ops->delivery_update(f->c, &d2), AD_E_OK);
    assert_int_equal(ops->delivery_get(f->c, "t1", "dlv_2", 0, &got), AD_E_OK);
    assert_int_equal(got->state, AD_DLV_DELIVERED);
    assert_int_equal(got->attempts, 1);
    assert_int_equal(got->next_at, 0);
    assert_int_equal(got->last_status, 204);
    assert_int_equal(got->last_at, T0 + 11);
    assert_null(got->last_error);
    assert_string_equal(got->body, "{\"id\":\"evt_1\"}");
    ad_delivery_free(got);
    d1.attempts = 2;
    d1.next_at = T0 + 500;
    d1.last_at = T0 + 21;
    d1.last_error = "connection refused";
    assert_int_equal(ops->delivery_update(f->c, &d1), AD_E_OK);
    assert_int_equal(ops->delivery_get(f->c, NULL, NULL, d1.seq, &got), AD_E_OK);
    assert_int_equal(got->state, AD_DLV_PENDING);
    assert_int_equal(got->attempts, 2);
    assert_int_equal(got->next_at, T0 + 500);
    assert_int_equal(got->last_status, 0);
    assert_string_equal(got->last_error, "connection refused");
    ad_delivery_free(got);
    assert_int_equal(ops->delivery_due(f->c, NULL, 0, 8, due, &n), AD_E_OK);
    assert_int_equal(n, 2); /* d2 is delivered */
    assert_int_equal(due[0].seq, d3.seq);
    assert_int_equal(due[1].seq, d1.seq);
    got = (struct ad_delivery *)1;
    assert_int_equal(ops->delivery_get(f->c, "t2", "dlv_2", 0, &got), AD_E_NOT_FOUND);
    assert_null(got);
    assert_int_equal(ops->delivery_get(f->c, NULL, NULL, d3.seq, &got), AD_E_OK);
    assert_string_equal(got->id, "dlv_3");
    ad_delivery_free(got);

    /* An endpoint's deliveries, newest first, by state, after a cursor. */
    struct ad_delivery_list dl;
    assert_int_equal(ops->delivery_list(f->c, "whk_2", -1, 0, 10, &dl), AD_E_OK);
    assert_int_equal(dl.n, 2);
    assert_string_equal(dl.items[0]->id, "dlv_3");
    assert_string_equal(dl.items[1]->id, "dlv_2");
    ad_delivery_list_free(&dl);
    assert_int_equal(ops->delivery_list(f->c, "whk_2", -1, 0, 1, &dl), AD_E_OK);
    assert_int_equal(dl.n, 1);
    ad_delivery_list_free(&dl);
    assert_int_equal(ops->delivery_list(f->c, "whk_2", AD_DLV_DELIVERED, 0, 10, &dl), AD_E_OK);
    assert_int_equal(dl.n, 1);
    assert_string_equal(dl.items[0]->id, "dlv_2");
    ad_delivery_list_free(&dl);
    assert_int_equal(ops->delivery_list(f->c, "whk_2", -1, d3.seq, 10, &dl), AD_E_OK);
    assert_int_equal(dl.n, 1);
    assert_string_equal(dl.items[0]->id, "dlv_2");
    ad_delivery_list_free(&dl);

    /* Abandoned: the endpoint's pending deliveries die with the reason; the others are left as they are. */
    assert_int_equal(ops->delivery_abandon(f->c, "whk_2", "disabled"), AD_E_OK);
    assert_int_equal(ops->delivery_get(f->c, NULL, NULL, d3.seq, &got), AD_E_OK);
    assert_int_equal(got->state, AD_DLV_DEAD);
    assert_string_equal(got->last_error, "disabled");
    ad_delivery_free(got);
    assert_int_equal(ops->delivery_get(f->c, NULL, NULL, d2.seq, &got), AD_E_OK);
    assert_int_equal(got->state, AD_DLV_DELIVERED);
    ad_delivery_free(got);
    assert_int_equal(ops->delivery_get(f->c, NULL, NULL, d1.seq, &got), AD_E_OK);
    assert_int_equal(got->state, AD_DLV_PENDING);
    ad_delivery_free(got);

    /* Swept: delivered and dead ones created before `before`, a limit at a time; never pending ones. */
    int done = -1;
    assert_int_equal(ops->delivery_sweep(f->c, T0, 10, &done), AD_E_OK);
    assert_int_equal(done, 0); /* created at T0: not before it */
    assert_int_equal(ops->delivery_sweep(f->c, T0 + 1, 1, &done), AD_E_OK);
    assert_int_equal(done, 1);
    assert_int_equal(ops->delivery_sweep(f->c, T0 + 1, 10, &done), AD_E_OK);
    assert_int_equal(done, 1);
    assert_int_equal(ops->delivery_sweep(f->c, T0 + 1, 10, &done), AD_E_OK);
    assert_int_equal(done, 0);
    assert_int_equal(ops->delivery_get(f->c, NULL, NULL, d2.seq, &got), AD_E_NOT_FOUND);
    assert_int_equal(ops->delivery_update(f->c, &d2), AD_E_NOT_FOUND);
    assert_int_equal(ops->delivery_get(f->c, NULL, NULL, d1.seq, &got), AD_E_OK);
    ad_delivery_free(got);

    /* Deleting an endpoint takes its deliveries. */
    assert_int_equal(ops->webhook_delete(f->c, "t1", "whk_1"), AD_E_OK);
    assert_int_equal(ops->delivery_get(f->c, NULL, NULL, d1.seq, &got), AD_E_NOT_FOUND);
    assert_int_equal(ops->delivery_due(f->c, NULL, 0, 8, due, &n), AD_E_OK);
    assert_int_equal(n, 0);
}

/* Claiming a due pending delivery succeeds (a single-node backend has no one to race; a cluster one moves its due
 * time to `until`, so another node leaves it alone), and the owner's release makes it due again at `now`. */
static void sc_test_delivery_claim_and_release(void **state)
{
    struct fx *f = *state;
    const struct ad_store_ops *ops = f->s->ops;
    struct ad_webhook w = {.id = "whk_1", .tenant = "t1", .url = "https://a.example/", .secret = "s"};
    assert_int_equal(ops->webhook_put(f->c, &w), AD_E_OK);
    struct ad_delivery d = sc_delivery("dlv_1", "whk_1", T0);
    assert_int_equal(ops->delivery_insert(f->c, &d), AD_E_OK);
    assert_int_equal(ops->delivery_claim(f->c, d.seq, T0, T0 + 60000, "n1"), AD_E_OK);
    struct ad_delivery *got = NULL;
    assert_int_equal(ops->delivery_get(f->c, NULL, NULL, d.seq, &got), AD_E_OK);
    assert_int_equal(got->state, AD_DLV_PENDING);
    assert_true(got->next_at == T0 || got->next_at == T0 + 60000);
    ad_delivery_free(got);
    assert_int_equal(ops->delivery_release(f->c, "n1", T0 + 5), AD_E_OK);
    assert_int_equal(ops->delivery_get(f->c, NULL, NULL, d.seq, &got), AD_E_OK);
    assert_int_equal(got->state, AD_DLV_PENDING);
    assert_true(got->next_at <= T0 + 5);
    ad_delivery_free(got);
    struct ad_due due[2];
    size_t n = 0;
    assert_int_equal(ops->delivery_due(f->c, NULL, 0, 2, due, &n), AD_E_OK);
    assert_int_equal(n, 1);
    assert_true(due[0].next_at <= T0 + 5);
    assert_int_equal(ops->delivery_claim(f->c, d.seq, T0 + 5, T0 + 60000, "n1"), AD_E_OK);
    /* Released only while pending: a delivered row keeps its state. */
    d.state = AD_DLV_DELIVERED;
    assert_int_equal(ops->delivery_update(f->c, &d), AD_E_OK);
    assert_int_equal(ops->delivery_release(f->c, "n1", T0 + 6), AD_E_OK);
    assert_int_equal(ops->delivery_get(f->c, NULL, NULL, d.seq, &got), AD_E_OK);
    assert_int_equal(got->state, AD_DLV_DELIVERED);
    ad_delivery_free(got);
}

/* ---- the change feed (cluster backends) ---- */

struct sc_heard {
    char ids[64][40];
    char queued[64][32]; /* "tenant/type" when announced as queued, else "" */
    int n;
    int total;
};

static void sc_on_heard(void *arg, const struct ad_feed_change *ch)
{
    struct sc_heard *h = arg;
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
static const char *sc_heard_as(const struct sc_heard *h, const char *id)
{
    for (int i = 0; i < h->n; i++)
        if (strcmp(h->ids[i], id) == 0)
            return h->queued[i];
    return NULL;
}

static int sc_heard_times(const struct sc_heard *h, const char *id)
{
    int n = 0;
    for (int i = 0; i < h->n; i++)
        n += strcmp(h->ids[i], id) == 0;
    return n;
}

/* Collect what a feed hears for up to ms. */
static void sc_listen_for(struct fx *f, struct ad_feed *feed, int ms, struct sc_heard *h)
{
    int64_t end = ad_mono_ms() + ms;
    while (ad_mono_ms() < end)
        assert_int_equal(f->s->ops->feed_wait(feed, (int)(end - ad_mono_ms()), -1, sc_on_heard, h), 0);
}

/* Every commit that inserted or updated jobs announces each once, as it ended (queued ones with their tenant and
 * type), to every node but the one that made it; nothing before the commit, nothing for what was undone. */
__attribute__((unused)) static void sc_test_feed_hears_other_nodes_only(void **state)
{
    struct fx *f = *state;
    const struct ad_store_ops *ops = f->s->ops;
    assert_non_null(ops->feed_open);
    struct ad_store *s2 = sc_open(f);
    char err[256] = "";
    struct ad_feed *mine = ops->feed_open(f->s, err, sizeof(err));
    struct ad_feed *theirs = ops->feed_open(s2, err, sizeof(err));
    if (mine == NULL || theirs == NULL)
        fail_msg("feed_open: %s", err);

    struct ad_job *upd = new_job("job_upd", "t1", "a", AD_QUEUED, AD_PRIO_NORMAL);
    sc_insert(f, upd);
    struct sc_heard h = {0};
    sc_listen_for(f, theirs, 300, &h);
    assert_int_equal(sc_heard_times(&h, "job_upd"), 1);
    assert_string_equal(sc_heard_as(&h, "job_upd"), "t1/a");

    assert_int_equal(ops->begin(f->c), AD_E_OK);
    assert_int_equal(ops->savepoint(f->c), AD_E_OK);
    sc_insert_new(f, "job_new", "t1", "a", AD_QUEUED, AD_PRIO_NORMAL, 0);
    upd->status = AD_RUNNING;
    assert_int_equal(ops->job_update(f->c, upd), AD_E_OK);
    assert_int_equal(ops->job_update(f->c, upd), AD_E_OK);
    assert_int_equal(ops->release(f->c), AD_E_OK);
    assert_int_equal(ops->savepoint(f->c), AD_E_OK);
    sc_insert_new(f, "job_undone", "t1", "a", AD_QUEUED, AD_PRIO_NORMAL, 0);
    ops->rollback_to(f->c);
    h = (struct sc_heard){0};
    sc_listen_for(f, theirs, 100, &h);
    assert_int_equal(h.total, 0); /* nothing before the commit */
    assert_int_equal(ops->commit(f->c), AD_E_OK);
    assert_int_equal(ops->begin(f->c), AD_E_OK);
    sc_insert_new(f, "job_rolled_back", "t1", "a", AD_QUEUED, AD_PRIO_NORMAL, 0);
    ops->rollback(f->c);

    sc_listen_for(f, theirs, 500, &h);
    assert_int_equal(sc_heard_times(&h, "job_new"), 1);
    assert_int_equal(sc_heard_times(&h, "job_upd"), 1);         /* updated twice, announced once */
    assert_string_equal(sc_heard_as(&h, "job_upd"), "");        /* as it ended: running */
    assert_string_equal(sc_heard_as(&h, "job_new"), "t1/a");    /* queued */
    assert_int_equal(sc_heard_times(&h, "job_undone"), 0);      /* undone by rollback_to */
    assert_int_equal(sc_heard_times(&h, "job_rolled_back"), 0); /* undone by rollback */
    assert_int_equal(h.total, 2);

    struct sc_heard self = {0};
    sc_listen_for(f, mine, 200, &self);
    assert_int_equal(self.total, 0); /* a node does not hear itself */

    /* A batch of many jobs announces every one. */
    assert_int_equal(ops->begin(f->c), AD_E_OK);
    for (int i = 0; i < 400; i++) {
        char id[40];
        snprintf(id, sizeof(id), "job_many_%04d_padded_to_id_sizes", i);
        sc_insert_new(f, id, "t1", "a", AD_QUEUED, AD_PRIO_NORMAL, 0);
    }
    assert_int_equal(ops->commit(f->c), AD_E_OK);
    h = (struct sc_heard){0};
    sc_listen_for(f, theirs, 500, &h);
    assert_int_equal(h.total, 400);
    ops->feed_close(theirs);
    ops->feed_close(mine);
    ad_job_free(upd);
    s2->ops->close(s2);
}

/* The contract's tests, for a runner's cmocka array. */
/* The contract of the optional operations, for the runners of the backends that have them (sc_test_ops_table
 * checks which are set together): the single-node store's write upkeep, and the cluster store's change feed. */
#define STORE_CONTRACT_SINGLE_NODE_TESTS(setup, teardown)                                                              \
    cmocka_unit_test_setup_teardown(sc_test_after_batch_keeps_what_was_committed, setup, teardown),                    \
        cmocka_unit_test_setup_teardown(sc_test_changes_move_with_every_row_written, setup, teardown),                 \
        cmocka_unit_test_setup_teardown(sc_test_reclaim_keeps_what_was_committed, setup, teardown)
#define STORE_CONTRACT_CLUSTER_TESTS(setup, teardown)                                                                  \
    cmocka_unit_test_setup_teardown(sc_test_feed_hears_other_nodes_only, setup, teardown)

#define STORE_CONTRACT_TESTS(setup, teardown)                                                                          \
    cmocka_unit_test_setup_teardown(sc_test_ops_table, setup, teardown),                                               \
        cmocka_unit_test_setup_teardown(sc_test_connections_see_only_committed_rows, setup, teardown),                 \
        cmocka_unit_test_setup_teardown(sc_test_savepoints_and_rollback, setup, teardown),                             \
        cmocka_unit_test_setup_teardown(sc_test_batch_of_submits_commits_together, setup, teardown),                   \
        cmocka_unit_test_setup_teardown(sc_test_seq_high_water_mark_follows_every_commit, setup, teardown),            \
        cmocka_unit_test_setup_teardown(sc_test_seq_never_repeats_after_newest_rows_are_deleted, setup, teardown),     \
        cmocka_unit_test_setup_teardown(sc_test_reopen_keeps_data_and_seq_moves_on, setup, teardown),                  \
        cmocka_unit_test_setup_teardown(sc_test_snapshot_reads_committed_rows, setup, teardown),                       \
        cmocka_unit_test_setup_teardown(sc_test_every_field_round_trips, setup, teardown),                             \
        cmocka_unit_test_setup_teardown(sc_test_absent_fields_read_back_absent, setup, teardown),                      \
        cmocka_unit_test_setup_teardown(sc_test_get_is_scoped_by_tenant, setup, teardown),                             \
        cmocka_unit_test_setup_teardown(sc_test_writes_outside_a_transaction, setup, teardown),                        \
        cmocka_unit_test_setup_teardown(sc_test_update_writes_fields_and_moves_seq, setup, teardown),                  \
        cmocka_unit_test_setup_teardown(sc_test_list_order_filters_and_keyset, setup, teardown),                       \
        cmocka_unit_test_setup_teardown(sc_test_list_updated_after_exact, setup, teardown),                            \
        cmocka_unit_test_setup_teardown(sc_test_bulk_page_walks_matching_jobs, setup, teardown),                       \
        cmocka_unit_test_setup_teardown(sc_test_changes_by_seq, setup, teardown),                                      \
        cmocka_unit_test_setup_teardown(sc_test_leasable_order_and_exclusions, setup, teardown),                       \
        cmocka_unit_test_setup_teardown(sc_test_leasable_types_with_special_chars, setup, teardown),                   \
        cmocka_unit_test_setup_teardown(sc_test_leasable_groups_round_robin, setup, teardown),                         \
        cmocka_unit_test_setup_teardown(sc_test_leasable_group_backlog_does_not_starve, setup, teardown),              \
        cmocka_unit_test_setup_teardown(sc_test_running_jobs_by_lease_expiry, setup, teardown),                        \
        cmocka_unit_test_setup_teardown(sc_test_job_counts_by_type_and_status, setup, teardown),                       \
        cmocka_unit_test_setup_teardown(sc_test_queues, setup, teardown),                                              \
        cmocka_unit_test_setup_teardown(sc_test_group_limits, setup, teardown),                                        \
        cmocka_unit_test_setup_teardown(sc_test_artifacts, setup, teardown),                                           \
        cmocka_unit_test_setup_teardown(sc_test_scheduled_soonest_first, setup, teardown),                             \
        cmocka_unit_test_setup_teardown(sc_test_unique_key_finds_the_live_job, setup, teardown),                       \
        cmocka_unit_test_setup_teardown(sc_test_set_payload, setup, teardown),                                         \
        cmocka_unit_test_setup_teardown(sc_test_sweep_tombstones_then_deletes, setup, teardown),                       \
        cmocka_unit_test_setup_teardown(sc_test_job_events, setup, teardown),                                          \
        cmocka_unit_test_setup_teardown(sc_test_attempts, setup, teardown),                                            \
        cmocka_unit_test_setup_teardown(sc_test_idempotency_records, setup, teardown),                                 \
        cmocka_unit_test_setup_teardown(sc_test_webhooks, setup, teardown),                                            \
        cmocka_unit_test_setup_teardown(sc_test_webhook_lookups_kept_for_the_transaction, setup, teardown),            \
        cmocka_unit_test_setup_teardown(sc_test_deliveries, setup, teardown),                                          \
        cmocka_unit_test_setup_teardown(sc_test_delivery_claim_and_release, setup, teardown)

#endif
