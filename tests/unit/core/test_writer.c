/*
 * test_writer.c - the group-commit writer on a real SQLite store: operations queued together commit in one
 * batch, an operation that fails before writing costs the others nothing while one that fails after writing
 * fails its batch, done() runs on the event loop thread after the commit, an operation that arrives
 * while a batch is open joins that batch, a batch's completions are run by the loop itself, a chunk per run, and
 * the store's upkeep after a batch (after_batch) does not hold back its answers, and a batch that fails for want of
 * space keeps the writer in the full state until the store has made room, with no operation needed to find out.
 * The jobs an operation names as changed (ad_op_changed) reach the publish function after the commit and before
 * its done(), which gets what the publish returned; a failed operation or batch publishes nothing.
 *
 * Operations can be made to stop inside apply() (the started/go semaphores), so that what is queued when is
 * decided by the test and not by thread timing. writer.c is included for its chunk size.
 */
#include <pthread.h>
#include <semaphore.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>
#include <cmocka.h>
#include "store_test.h"
#include "tmpdir.h"
#include "core/writer.c"

struct test_op {
    struct ad_op op;
    const char *job_id; /* inserted by apply when set */
    ad_err fail;        /* returned by apply (AD_E_OK: succeed) */
    int fail_first;     /* fail before the insert instead of after it */
    sem_t *started, *go;
    int done;
    ad_err done_err;
    int done_on_loop_thread, committed_at_done; /* committed: its job is visible to another connection */
    /* Jobs inserted and named as changed (ad_op_changed) by apply; with name_then_fail, the first is named and
     * apply fails without inserting anything. */
    const char *changes[3];
    size_t nchanges;
    int name_then_fail;
    struct ad_job *jobs[3];
    void *seen[3];            /* ad_op_published in done() */
    size_t published_at_done; /* how many jobs the publish function had been handed when done() ran */
};

static struct ad_loop *loop;
static pthread_t loop_thread;
static struct ad_store *store;
static struct ad_conn *reader;
static char dir[64];

/* What the publish function (test_publish) was handed, in order. */
struct publication {
    char id[32];
    int committed; /* the job was in the store, seen through another connection */
    int on_loop_thread;
};
static struct publication published[8];
static size_t npublished, nsettled;

/* 1 when the job is in the store, seen through another connection. */
static int stored(const char *id)
{
    struct ad_job *j = NULL;
    ad_err e = store->ops->job_get(reader, "t1", id, &j);
    ad_job_free(j);
    return e == AD_E_OK;
}

static ad_err op_apply(struct ad_op *op, struct ad_conn *c)
{
    struct test_op *t = (struct test_op *)op;
    if (t->started != NULL)
        sem_post(t->started);
    if (t->go != NULL)
        sem_wait(t->go);
    if (t->fail_first)
        return t->fail;
    for (size_t i = 0; i < t->nchanges; i++) {
        t->jobs[i] = new_job(t->changes[i], "t1", "bench", AD_QUEUED, AD_PRIO_NORMAL);
        ad_op_changed(op, &t->jobs[i]);
        if (t->name_then_fail)
            return AD_E_ILLEGAL_TRANSITION;
        ad_err e = store->ops->job_insert(c, t->jobs[i]);
        if (e != AD_E_OK)
            return e;
    }
    if (t->job_id != NULL) {
        struct ad_job *j = new_job(t->job_id, "t1", "bench", AD_QUEUED, AD_PRIO_NORMAL);
        ad_err e = store->ops->job_insert(c, j);
        ad_job_free(j);
        if (e != AD_E_OK)
            return e;
    }
    return t->fail;
}

static void op_done(struct ad_op *op)
{
    struct test_op *t = (struct test_op *)op;
    t->done = 1;
    t->done_err = op->err;
    t->done_on_loop_thread = pthread_equal(pthread_self(), loop_thread);
    t->committed_at_done = t->job_id == NULL || op->err != AD_E_OK || stored(t->job_id);
    for (size_t i = 0; i < t->nchanges; i++)
        t->seen[i] = ad_op_published(op, i);
    t->published_at_done = npublished;
    ad_op_free(op); /* frees what ad_op_changed allocated past the inline changes */
}

static void op_destroy(struct ad_op *op)
{
    (void)op; /* test_ops live on the test's stack */
}

static void init_op(struct test_op *t, const char *job_id)
{
    memset(t, 0, sizeof(*t));
    t->op.apply = op_apply;
    t->op.done = op_done;
    t->op.destroy = op_destroy;
    t->job_id = job_id;
}

/* The hub's part (ad_writer_set_publish): take the job, note it, and return the note as what done() answers with. */
static void *test_publish(struct ad_job *j)
{
    assert_true(npublished < sizeof(published) / sizeof(published[0]));
    struct publication *p = &published[npublished++];
    snprintf(p->id, sizeof(p->id), "%s", j->id);
    p->committed = stored(j->id);
    p->on_loop_thread = pthread_equal(pthread_self(), loop_thread);
    ad_job_free(j);
    return p;
}

static void test_settled(void)
{
    nsettled++;
}

/* Run the event loop until every op in ops has had its done() called. */
static void run_until_done(struct test_op **ops, size_t n)
{
    for (;;) {
        size_t done = 0;
        for (size_t i = 0; i < n; i++)
            done += ops[i]->done;
        if (done == n)
            return;
        ad_loop_run(loop, 100);
    }
}

static uint64_t batches(void)
{
    struct ad_writer_stats s;
    ad_writer_stats(&s);
    return s.batches;
}

static int setup(void **state)
{
    (void)state;
    char err[256] = "", data[128];
    if (tmpdir_make(dir, sizeof(dir), "writer") != 0)
        return -1;
    snprintf(data, sizeof(data), "%s/data", dir);
    store = ad_store_open(data, err, sizeof(err));
    if (store == NULL)
        fail_msg("ad_store_open: %s", err);
    reader = store->ops->connect(store, err, sizeof(err));
    loop = ad_loop_new();
    loop_thread = pthread_self();
    if (reader == NULL || ad_writer_start(store, loop, err, sizeof(err)) != 0)
        fail_msg("start: %s", err);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    ad_writer_stop();
    ad_loop_run(loop, 0); /* deliver what the stop left */
    while (ad_writer_deliver())
        ;
    store->ops->disconnect(reader);
    store->ops->close(store);
    tmpdir_remove(dir);
    return 0;
}

/* Queue a, b and c while the writer is held inside another batch; return when all four are done. */
static void run_behind_hold(struct test_op *a, struct test_op *b, struct test_op *c)
{
    sem_t started, go;
    sem_init(&started, 0, 0);
    sem_init(&go, 0, 0);
    struct test_op hold;
    init_op(&hold, NULL);
    hold.started = &started;
    hold.go = &go;
    ad_writer_submit(&hold.op);
    sem_wait(&started); /* the writer is inside hold's batch: a, b and c queue up behind it */
    ad_writer_submit(&a->op);
    ad_writer_submit(&b->op);
    ad_writer_submit(&c->op);
    sem_post(&go);
    struct test_op *all[] = {&hold, a, b, c};
    run_until_done(all, 4);
    for (size_t i = 0; i < 4; i++) {
        assert_true(all[i]->done_on_loop_thread);
        assert_true(all[i]->committed_at_done);
    }
    sem_destroy(&started);
    sem_destroy(&go);
}

/* t answered err, and its job is in the store (in_store 1) or not. */
static void expect(const struct test_op *t, ad_err err, int in_store)
{
    assert_int_equal(t->done_err, err);
    assert_int_equal(stored(t->job_id), in_store);
}

/* Three operations queued while the writer is busy commit as one batch; the one that fails before writing
 * anything (a stale lease, an illegal transition) answers its error, and each done() runs on the loop
 * thread with its own result, after the commit. */
static void test_batch_commits_together_and_fails_alone(void **state)
{
    (void)state;
    struct test_op a, b, c;
    init_op(&a, "job_a");
    init_op(&b, "job_b");
    b.fail = AD_E_ILLEGAL_TRANSITION;
    b.fail_first = 1;
    init_op(&c, "job_c");
    uint64_t before = batches();
    run_behind_hold(&a, &b, &c);
    assert_int_equal(batches() - before, 2); /* hold's, then one for a, b and c */
    expect(&a, AD_E_OK, 1);
    expect(&b, AD_E_ILLEGAL_TRANSITION, 0);
    expect(&c, AD_E_OK, 1);
}

/* An operation that fails after writing (the store failed under it) fails its batch: nothing of the batch is
 * committed, every operation in it answers the error, and the next batch commits as usual. */
static void test_failure_after_a_write_fails_the_batch(void **state)
{
    (void)state;
    struct test_op a, b, c, d;
    init_op(&a, "job_e");
    init_op(&b, "job_f");
    b.fail = AD_E_INTERNAL;
    init_op(&c, "job_g");
    run_behind_hold(&a, &b, &c);
    expect(&a, AD_E_INTERNAL, 0);
    expect(&b, AD_E_INTERNAL, 0);
    expect(&c, AD_E_INTERNAL, 0);

    init_op(&d, "job_h");
    ad_writer_submit(&d.op);
    struct test_op *one[] = {&d};
    run_until_done(one, 1);
    expect(&d, AD_E_OK, 1);
}

/* After a batch of several operations, the next batch stays open for company: an operation that arrives
 * while the first is being applied joins it, and both commit together. A writer that waited for company
 * before applying anything would have started applying p only after giving up on company, then committed
 * p alone. */
static void test_arrival_joins_the_open_batch(void **state)
{
    (void)state;
    sem_t started, go;
    sem_init(&started, 0, 0);
    sem_init(&go, 0, 0);
    struct test_op hold, y, z, p, q;

    /* y and z queue while the writer is held inside hold's batch: the batch they end up in holds more than
     * one operation, so the next batch expects company. */
    init_op(&hold, NULL);
    hold.started = &started;
    hold.go = &go;
    init_op(&y, "job_y");
    init_op(&z, "job_z");
    ad_writer_submit(&hold.op);
    sem_wait(&started);
    ad_writer_submit(&y.op);
    ad_writer_submit(&z.op);
    sem_post(&go);
    struct test_op *first[] = {&hold, &y, &z};
    run_until_done(first, 3);

    /* p is being applied when q is submitted; p's apply returns only after that. */
    init_op(&p, "job_p");
    p.started = &started;
    p.go = &go;
    init_op(&q, "job_q");
    uint64_t before = batches();
    ad_writer_submit(&p.op);
    sem_wait(&started);
    ad_writer_submit(&q.op);
    sem_post(&go);
    struct test_op *second[] = {&p, &q};
    run_until_done(second, 2);

    assert_int_equal(batches() - before, 1);
    assert_int_equal(p.done_err, AD_E_OK);
    assert_int_equal(q.done_err, AD_E_OK);
    assert_true(stored("job_p") && stored("job_q"));
    sem_destroy(&started);
    sem_destroy(&go);
}

static int count_done(const struct test_op *ops, size_t n)
{
    int done = 0;
    for (size_t i = 0; i < n; i++)
        done += ops[i].done;
    return done;
}

/* A batch of 80 comes back to the loop at once. The loop runs its completions itself, inside its turn (so
 * that the answers they write are finished before the loop updates its polling), at most
 * AD_WRITER_DELIVER_CHUNK per turn: between chunks it reads its sockets. A turn with completions waiting
 * does not sleep however long it may wait. Last: it leaves the writer expecting large
 * batches. */
static void test_completions_run_in_chunks(void **state)
{
    (void)state;
    enum { N = 81 };
    sem_t started, go;
    sem_init(&started, 0, 0);
    sem_init(&go, 0, 0);
    struct test_op ops[N];
    init_op(&ops[0], NULL);
    ops[0].started = &started;
    ops[0].go = &go;
    ad_writer_submit(&ops[0].op);
    sem_wait(&started);
    for (int i = 1; i < N; i++) {
        init_op(&ops[i], NULL);
        ad_writer_submit(&ops[i].op);
    }
    sem_post(&go);
    int done = 0, turns_delivering = 0;
    for (int turns = 0; done < N; turns++) {
        assert_true(turns < 1000);
        /* Once some have come back, the rest must not wait for this run's timeout. */
        ad_loop_run(loop, done == 0 ? 100 : 60000);
        int now = count_done(ops, N);
        assert_true(now - done <= AD_WRITER_DELIVER_CHUNK);
        if (now > done)
            turns_delivering++;
        else
            assert_int_equal(done, 0);
        done = now;
    }
    assert_true(turns_delivering >= (N + AD_WRITER_DELIVER_CHUNK - 1) / AD_WRITER_DELIVER_CHUNK);
    assert_int_equal(ad_writer_deliver(), 0);
    sem_destroy(&started);
    sem_destroy(&go);
}

/* A store's after_batch (SQLite checkpoints there) runs once the batch's answers are handed back: the batch's
 * done() runs while after_batch is still held. Only the after_batch of the op's own batch is held (a_applied): the
 * writer may still be on its way to the after_batch of the last test's batch when the store's functions are
 * swapped, its answers already delivered. */
static sem_t after_entered, after_go, after_left, a_applied;
static void (*real_after_batch)(struct ad_conn *c);

static void held_after_batch(struct ad_conn *c)
{
    if (sem_trywait(&a_applied) != 0) {
        real_after_batch(c);
        return;
    }
    sem_post(&after_entered);
    sem_wait(&after_go);
    real_after_batch(c);
    sem_post(&after_left);
}

static void test_answers_leave_before_after_batch(void **state)
{
    (void)state;
    const struct ad_store_ops *saved = store->ops;
    struct ad_store_ops held = *saved;
    real_after_batch = saved->after_batch;
    held.after_batch = held_after_batch;
    sem_init(&after_entered, 0, 0);
    sem_init(&after_go, 0, 0);
    sem_init(&after_left, 0, 0);
    sem_init(&a_applied, 0, 0);
    store->ops = &held;
    struct test_op a;
    init_op(&a, "job_after");
    a.started = &a_applied;
    ad_writer_submit(&a.op);
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += 10;
    int entered = sem_timedwait(&after_entered, &deadline) == 0;
    for (int turns = 0; entered && !a.done && turns < 50; turns++) {
        ad_loop_run(loop, 100);
    }
    int answered_while_held = a.done;
    sem_post(&after_go); /* let the writer go before asserting, or a failure would leave it stuck in there */
    if (entered)
        sem_wait(&after_left);
    store->ops = saved;
    run_until_done((struct test_op *[]){&a}, 1);
    sem_destroy(&after_entered);
    sem_destroy(&after_go);
    sem_destroy(&after_left);
    sem_destroy(&a_applied);
    assert_true(entered);
    assert_true(answered_while_held);
    assert_true(a.committed_at_done);
}

/* ad_writer_outstanding counts an operation from its submit until its done() has run: while the writer holds it,
 * once committed with its completion still waiting for the loop, and no more after, each by its weight.
 * limits.maxQueuedWrites is checked against this count. */
static void test_outstanding_counts_until_done(void **state)
{
    (void)state;
    sem_t started, go;
    sem_init(&started, 0, 0);
    sem_init(&go, 0, 0);
    assert_int_equal(ad_writer_outstanding(), 0);
    struct test_op hold, a, b;
    init_op(&hold, NULL);
    hold.started = &started;
    hold.go = &go;
    init_op(&a, "job_outstanding_a");
    init_op(&b, "job_outstanding_b");
    b.op.weight = 100; /* a batch submit of 100 jobs counts as 100 */
    ad_writer_submit(&hold.op);
    sem_wait(&started);
    ad_writer_submit(&a.op);
    ad_writer_submit(&b.op);
    assert_int_equal(ad_writer_outstanding(), 102);
    sem_post(&go);
    /* Committed but not yet handed to done(): the loop has not run, so all three still count. */
    while (!stored("job_outstanding_b"))
        usleep(1000);
    assert_int_equal(ad_writer_outstanding(), 102);
    struct test_op *all[] = {&hold, &a, &b};
    run_until_done(all, 3);
    assert_int_equal(ad_writer_outstanding(), 0);
    sem_destroy(&started);
    sem_destroy(&go);
}

/* A reclaim that finds no room until the test makes some, counting its calls. */
static ad_err (*real_reclaim)(struct ad_conn *c);
static int reclaim_calls, room;

static ad_err scarce_reclaim(struct ad_conn *c)
{
    __atomic_add_fetch(&reclaim_calls, 1, __ATOMIC_SEQ_CST);
    return __atomic_load_n(&room, __ATOMIC_SEQ_CST) ? real_reclaim(c) : AD_E_STORAGE_FULL;
}

/* A batch that fails for want of space puts the writer in the full state before its answers leave. With
 * nothing queued the writer keeps trying to make room on its own, and leaves the state once the store has some. */
static void test_full_until_the_store_has_room(void **state)
{
    (void)state;
    const struct ad_store_ops *saved = store->ops;
    struct ad_store_ops scarce = *saved;
    real_reclaim = saved->reclaim;
    scarce.reclaim = scarce_reclaim;
    store->ops = &scarce; /* the writer is idle and not full: it reads store->ops only for an operation */
    assert_false(ad_writer_storage_full());
    struct test_op a;
    init_op(&a, "job_full");
    a.fail = AD_E_STORAGE_FULL; /* after its insert: the batch fails */
    ad_writer_submit(&a.op);
    run_until_done((struct test_op *[]){&a}, 1);
    expect(&a, AD_E_STORAGE_FULL, 0);
    assert_true(ad_writer_storage_full());
    int before = __atomic_load_n(&reclaim_calls, __ATOMIC_SEQ_CST);
    while (__atomic_load_n(&reclaim_calls, __ATOMIC_SEQ_CST) < before + 2) /* tried again with no operation */
        usleep(10000);
    assert_true(ad_writer_storage_full());
    __atomic_store_n(&room, 1, __ATOMIC_SEQ_CST);
    while (ad_writer_storage_full())
        usleep(10000);
    store->ops = saved; /* not full any more: the idle writer no longer reads it */
    struct test_op b;
    init_op(&b, "job_room");
    ad_writer_submit(&b.op);
    run_until_done((struct test_op *[]){&b}, 1);
    expect(&b, AD_E_OK, 1);
    assert_false(ad_writer_storage_full());
}

/* Operations of one batch name the jobs they changed: after the commit each job reaches the publish function, on
 * the loop thread and in the batch's order, which takes it out of the op; the op's done() runs after its own jobs
 * were published and finds, for each, what the publish returned (three jobs: past the inline changes). An
 * operation that fails alone, having named a job, publishes nothing and keeps its job. */
static void test_changed_jobs_are_published_after_commit_before_done(void **state)
{
    (void)state;
    npublished = nsettled = 0;
    ad_writer_set_publish(test_publish, test_settled);
    struct test_op a, b, c;
    init_op(&a, NULL);
    a.changes[0] = "job_pub_a";
    a.nchanges = 1;
    init_op(&b, NULL);
    b.changes[0] = "job_pub_b0";
    b.changes[1] = "job_pub_b1";
    b.changes[2] = "job_pub_b2";
    b.nchanges = 3;
    init_op(&c, NULL);
    c.changes[0] = "job_pub_c";
    c.nchanges = 1;
    c.name_then_fail = 1;
    uint64_t before = batches();
    run_behind_hold(&a, &b, &c);
    ad_writer_set_publish(NULL, NULL);
    assert_int_equal(batches() - before, 2); /* hold's, then one for a, b and c */
    assert_int_equal(npublished, 4);
    const char *order[] = {"job_pub_a", "job_pub_b0", "job_pub_b1", "job_pub_b2"};
    for (size_t i = 0; i < 4; i++) {
        assert_string_equal(published[i].id, order[i]);
        assert_true(published[i].committed);
        assert_true(published[i].on_loop_thread);
    }
    assert_int_equal(a.done_err, AD_E_OK);
    assert_ptr_equal(a.seen[0], &published[0]);
    assert_null(a.jobs[0]); /* the publish owns it */
    assert_true(a.published_at_done >= 1);
    assert_int_equal(b.done_err, AD_E_OK);
    for (size_t i = 0; i < 3; i++) {
        assert_ptr_equal(b.seen[i], &published[1 + i]);
        assert_null(b.jobs[i]);
    }
    assert_int_equal(b.published_at_done, 4);
    assert_int_equal(c.done_err, AD_E_ILLEGAL_TRANSITION);
    assert_null(c.seen[0]);
    assert_non_null(c.jobs[0]); /* still the op's */
    ad_job_free(c.jobs[0]);
    assert_int_equal(nsettled, 2); /* once after each done() of an op that published */
}

/* A batch that fails (an operation failed after writing) publishes nothing: the jobs its operations named stay
 * theirs, and their done() gets nothing published. */
static void test_failed_batch_publishes_nothing(void **state)
{
    (void)state;
    npublished = nsettled = 0;
    ad_writer_set_publish(test_publish, test_settled);
    struct test_op a, b, c;
    init_op(&a, NULL);
    a.changes[0] = "job_unpub_a";
    a.nchanges = 1;
    init_op(&b, "job_unpub_b");
    b.fail = AD_E_INTERNAL;
    init_op(&c, NULL);
    c.changes[0] = "job_unpub_c0";
    c.changes[1] = "job_unpub_c1";
    c.changes[2] = "job_unpub_c2";
    c.nchanges = 3;
    run_behind_hold(&a, &b, &c);
    ad_writer_set_publish(NULL, NULL);
    assert_int_equal(npublished, 0);
    assert_int_equal(nsettled, 0);
    assert_int_equal(a.done_err, AD_E_INTERNAL);
    assert_int_equal(c.done_err, AD_E_INTERNAL);
    assert_null(a.seen[0]);
    assert_non_null(a.jobs[0]);
    ad_job_free(a.jobs[0]);
    assert_false(stored("job_unpub_a"));
    for (size_t i = 0; i < 3; i++) {
        assert_null(c.seen[i]);
        /* c comes after b's failure: the batch was rolled back before c was applied, so it named nothing. */
        assert_null(c.jobs[i]);
    }
}

/* An op queued after the stop (a write made by the answer to a read that came back late) is not applied, and
 * its done still runs on the loop, with 503's error: not left queued where nothing would ever answer it. Last:
 * the writer stays stopped (teardown's stop does nothing). */
static void test_submit_after_stop_is_refused(void **state)
{
    (void)state;
    struct test_op a;
    init_op(&a, "job_after_stop");
    ad_writer_stop();
    ad_writer_submit(&a.op);
    /* Its answer is one message away; a writer that queued it would never answer (bounded, not timed: 50 turns). */
    for (int turn = 0; turn < 50 && !a.done; turn++) {
        ad_loop_run(loop, 100);
    }
    assert_true(a.done);
    assert_true(a.done_on_loop_thread);
    expect(&a, AD_E_UNAVAILABLE, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_batch_commits_together_and_fails_alone),
        cmocka_unit_test(test_failure_after_a_write_fails_the_batch),
        cmocka_unit_test(test_arrival_joins_the_open_batch),
        cmocka_unit_test(test_completions_run_in_chunks),
        cmocka_unit_test(test_answers_leave_before_after_batch),
        cmocka_unit_test(test_outstanding_counts_until_done),
        cmocka_unit_test(test_full_until_the_store_has_room),
        cmocka_unit_test(test_changed_jobs_are_published_after_commit_before_done),
        cmocka_unit_test(test_failed_batch_publishes_nothing),
        cmocka_unit_test(test_submit_after_stop_is_refused),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
