/*
 * store_contract_tx.h - the store contract's tests (store_contract.h) of connections and transactions: isolation,
 * savepoints, batches, the seq high-water mark, reopening, snapshots, the single-node upkeep (after_batch, changes,
 * reclaim). Included by store_contract.h only, after its helpers.
 */
#ifndef AD_STORE_CONTRACT_TX_H
#define AD_STORE_CONTRACT_TX_H

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

#endif
