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
 *                                    sc_test_leasable_groups_round_robin, sc_test_turns_of_one_transaction,
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
 *   queue_group_took, job_leasable_except, queue_group_queued
 *                                    sc_test_group_limits, sc_test_group_queued_counts
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
    X(queue_group_queued)                                                                                              \
    X(schedule_put)                                                                                                    \
    X(schedule_get)                                                                                                    \
    X(schedule_list)                                                                                                   \
    X(schedule_delete)                                                                                                 \
    X(schedule_due)                                                                                                    \
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

/* The tests, by the part of the contract they cover. */
#include "store_contract_tx.h"
#include "store_contract_jobs.h"
#include "store_contract_artifacts.h"
#include "store_contract_retention.h"
#include "store_contract_webhooks.h"
#include "store_contract_schedules.h"

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
        cmocka_unit_test_setup_teardown(sc_test_turns_of_one_transaction, setup, teardown),                            \
        cmocka_unit_test_setup_teardown(sc_test_running_jobs_by_lease_expiry, setup, teardown),                        \
        cmocka_unit_test_setup_teardown(sc_test_job_counts_by_type_and_status, setup, teardown),                       \
        cmocka_unit_test_setup_teardown(sc_test_queues, setup, teardown),                                              \
        cmocka_unit_test_setup_teardown(sc_test_group_limits, setup, teardown),                                        \
        cmocka_unit_test_setup_teardown(sc_test_group_queued_counts, setup, teardown),                                 \
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
        cmocka_unit_test_setup_teardown(sc_test_delivery_claim_and_release, setup, teardown),                          \
        cmocka_unit_test_setup_teardown(sc_test_schedules, setup, teardown)

#endif
