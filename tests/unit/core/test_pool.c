/*
 * test_pool.c - the queue-and-threads primitive (core/pool.c) with real threads: items run in order on threads
 * that carry the pool's name; a stop drains or drops what is queued, as the pool says, and finishes the item a
 * thread is in; a pool that has stopped refuses items; waits with a deadline are on the monotonic clock; the
 * periodic job runs between items; a thread with main takes its items in batches. And the pools of store
 * operations (ad_op_pool_*, core/writer.c) on a real SQLite store: apply on a pool thread with its own connection,
 * done on the loop, AD_E_UNAVAILABLE once stopped.
 *
 * Where a test must see a thread inside an item, the item waits on a semaphore the test posts: what is queued when
 * is decided by the test, not by thread timing. No assertion bounds how long something takes from above.
 */
#include <pthread.h>
#include <semaphore.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>
#include "store_test.h"
#include "tmpdir.h"
#include "core/pool.h"
#include "core/writer.h"

#define N_ITEMS 100

struct item {
    struct ad_pool_item it;
    int n;
};

/* What the pools' callbacks saw (under rec_mu). */
static pthread_mutex_t rec_mu = PTHREAD_MUTEX_INITIALIZER;
static int ran[N_ITEMS], nran, dropped[N_ITEMS], ndropped, everys, wrong_name;
static sem_t entered, go; /* item 0 of a held pool: posts entered, waits for go */
static int hold_first;

static void reset(void)
{
    pthread_mutex_lock(&rec_mu);
    nran = ndropped = everys = wrong_name = 0;
    hold_first = 0;
    pthread_mutex_unlock(&rec_mu);
    sem_init(&entered, 0, 0);
    sem_init(&go, 0, 0);
}

static void check_name(const char *want)
{
    char name[16] = "";
    pthread_getname_np(pthread_self(), name, sizeof(name));
    if (strcmp(name, want) != 0)
        wrong_name++;
}

static void item_run(struct ad_pool *p, void *state, struct ad_pool_item *it)
{
    struct item *x = (struct item *)it;
    if (x->n == 0 && hold_first) {
        sem_post(&entered);
        sem_wait(&go);
    }
    pthread_mutex_lock(&rec_mu);
    check_name(p->name);
    ran[nran++] = x->n;
    pthread_mutex_unlock(&rec_mu);
}

static void item_drop(struct ad_pool *p, struct ad_pool_item *it)
{
    pthread_mutex_lock(&rec_mu);
    dropped[ndropped++] = ((struct item *)it)->n;
    pthread_mutex_unlock(&rec_mu);
}

static int count(int *what)
{
    pthread_mutex_lock(&rec_mu);
    int n = *what;
    pthread_mutex_unlock(&rec_mu);
    return n;
}

/* Wait until *what reaches at least n: polled, bounded by a minute so that a bug fails instead of hanging. */
static void await_count(int *what, int n)
{
    for (int i = 0; i < 60000 && count(what) < n; i++)
        usleep(1000);
    if (count(what) < n)
        fail_msg("%d after a minute, waiting for %d", count(what), n);
}

static void test_items_run_in_order_on_named_threads(void **state)
{
    (void)state;
    reset();
    struct ad_pool p = {.name = "ad-test-pool", .nthreads = 1, .drain = 1, .run = item_run};
    static struct item items[N_ITEMS];
    char err[128];
    assert_int_equal(ad_pool_start(&p, err, sizeof(err)), 0);
    for (int i = 0; i < N_ITEMS; i++) {
        items[i].n = i;
        assert_int_equal(ad_pool_submit(&p, &items[i].it), 0);
    }
    await_count(&nran, N_ITEMS);
    ad_pool_stop(&p);
    for (int i = 0; i < N_ITEMS; i++)
        assert_int_equal(ran[i], i);
    assert_int_equal(wrong_name, 0);
    ad_pool_destroy(&p);
}

static void *stopper(void *arg)
{
    ad_pool_stop(arg);
    return NULL;
}

/* Item 0 holds the pool's one thread while five more are queued; the stop begins, then item 0 is let go. */
static void stop_while_held(struct ad_pool *p, struct item *items)
{
    char err[128];
    hold_first = 1;
    assert_int_equal(ad_pool_start(p, err, sizeof(err)), 0);
    for (int i = 0; i < 6; i++) {
        items[i].n = i;
        assert_int_equal(ad_pool_submit(p, &items[i].it), 0);
        if (i == 0)
            sem_wait(&entered);
    }
    pthread_t t;
    pthread_create(&t, NULL, stopper, p);
    for (int i = 0; i < 60000 && !ad_pool_stopping(p); i++)
        usleep(1000);
    assert_true(ad_pool_stopping(p));
    sem_post(&go);
    pthread_join(t, NULL);
}

static void test_stop_drains_a_draining_pool(void **state)
{
    (void)state;
    reset();
    struct ad_pool p = {.name = "ad-test-drain", .nthreads = 1, .drain = 1, .run = item_run, .drop = item_drop};
    struct item items[6];
    stop_while_held(&p, items);
    assert_int_equal(nran, 6);
    assert_int_equal(ndropped, 0);
    for (int i = 0; i < 6; i++)
        assert_int_equal(ran[i], i);
    ad_pool_destroy(&p);
}

static void test_stop_drops_what_a_dropping_pool_holds(void **state)
{
    (void)state;
    reset();
    struct ad_pool p = {.name = "ad-test-drop", .nthreads = 1, .drain = 0, .run = item_run, .drop = item_drop};
    struct item items[6];
    stop_while_held(&p, items);
    assert_int_equal(nran, 1); /* the item the thread was in is finished */
    assert_int_equal(ran[0], 0);
    assert_int_equal(ndropped, 5);
    for (int i = 0; i < 5; i++)
        assert_int_equal(dropped[i], i + 1);
    ad_pool_destroy(&p);
}

static void test_a_stopped_pool_refuses_items(void **state)
{
    (void)state;
    reset();
    struct ad_pool p = {.name = "ad-test-refuse", .nthreads = 2, .drain = 1, .run = item_run};
    struct item x = {.n = 7};
    char err[128];
    assert_int_equal(ad_pool_submit(&p, &x.it), -1); /* never started */
    assert_int_equal(ad_pool_start(&p, err, sizeof(err)), 0);
    ad_pool_stop(&p);
    assert_int_equal(ad_pool_submit(&p, &x.it), -1);
    /* Started again, it takes items again. */
    assert_int_equal(ad_pool_start(&p, err, sizeof(err)), 0);
    assert_int_equal(ad_pool_submit(&p, &x.it), 0);
    await_count(&nran, 1);
    ad_pool_stop(&p);
    assert_int_equal(nran, 1);
    ad_pool_destroy(&p);
}

/* A deadline 500 ms ahead on the monotonic clock is, read on the wall clock, decades in the past: a condition
 * variable on CLOCK_REALTIME would time out at once, again and again, and the wait would spin on the CPU until
 * the deadline. So the wait must last its 500 ms and cost the waiting thread almost no CPU time: a blocked
 * thread's CPU time does not grow with the machine's load, while a spinning one gets tens of ms even on a busy
 * host. */
static int64_t thread_cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void test_a_wait_ends_at_its_monotonic_deadline(void **state)
{
    (void)state;
    reset();
    struct ad_pool p = {.name = "ad-test-clock", .nthreads = 1, .drain = 1, .run = item_run};
    char err[128];
    assert_int_equal(ad_pool_start(&p, err, sizeof(err)), 0);
    int64_t t0 = ad_mono_ns(), cpu0 = thread_cpu_ns();
    assert_int_equal(ad_pool_wait(&p, 1, t0 + 500000000), 0);
    int64_t waited = ad_mono_ns() - t0, cpu = thread_cpu_ns() - cpu0;
    if (waited < 500000000)
        fail_msg("the wait ended after %lld ns, before its deadline (500 ms)", (long long)waited);
    if (cpu > 10000000)
        fail_msg("the wait spun: %lld ns of CPU in a 500 ms wait", (long long)cpu);
    ad_pool_stop(&p);
    ad_pool_destroy(&p);
}

static void every_count(struct ad_pool *p, void *state)
{
    pthread_mutex_lock(&rec_mu);
    check_name(p->name);
    everys++;
    pthread_mutex_unlock(&rec_mu);
}

static void test_every_runs_at_start_and_then_again(void **state)
{
    (void)state;
    reset();
    struct ad_pool p = {
        .name = "ad-test-every", .nthreads = 1, .drain = 1, .run = item_run, .every = every_count, .every_ms = 1};
    char err[128];
    assert_int_equal(ad_pool_start(&p, err, sizeof(err)), 0);
    await_count(&everys, 3);
    struct item x = {.n = 1};
    assert_int_equal(ad_pool_submit(&p, &x.it), 0);
    await_count(&nran, 1);
    ad_pool_stop(&p);
    int after_stop = count(&everys);
    usleep(20000);
    assert_int_equal(count(&everys), after_stop);
    assert_int_equal(wrong_name, 0);
    ad_pool_destroy(&p);
}

/* main: waits for three items, takes them in one batch, and leaves once the pool is closing. */
static size_t batch_sizes[8], nbatches;
static int main_left;

static void batch_main(struct ad_pool *p, void *state)
{
    for (;;) {
        ad_pool_wait(p, 3, AD_POOL_FOREVER);
        if (ad_pool_closing(p))
            break;
        size_t n;
        if (ad_pool_take(p, 10, &n) != NULL && nbatches < 8) {
            pthread_mutex_lock(&rec_mu);
            batch_sizes[nbatches++] = n;
            nran += (int)n;
            pthread_mutex_unlock(&rec_mu);
        }
    }
    pthread_mutex_lock(&rec_mu);
    main_left = 1;
    pthread_mutex_unlock(&rec_mu);
}

static void test_main_takes_items_in_batches(void **state)
{
    (void)state;
    reset();
    nbatches = 0;
    main_left = 0;
    struct ad_pool p = {.name = "ad-test-main", .nthreads = 1, .drain = 1, .main = batch_main};
    struct item items[3];
    char err[128];
    assert_int_equal(ad_pool_start(&p, err, sizeof(err)), 0);
    for (int i = 0; i < 3; i++)
        assert_int_equal(ad_pool_submit(&p, &items[i].it), 0);
    await_count(&nran, 3);
    ad_pool_stop(&p);
    assert_true(main_left);
    assert_int_equal(nbatches, 1);
    assert_int_equal(batch_sizes[0], 3);
    assert_int_equal(ad_pool_submit(&p, &items[0].it), -1);
    ad_pool_destroy(&p);
}

/* ---- pools of store operations ---- */

struct read_op {
    struct ad_op op;
    int applied, done, on_loop_thread, had_conn;
    ad_err err;
};

static pthread_t loop_thread;
static struct ad_store *op_store;

static ad_err read_apply(struct ad_op *op, struct ad_conn *c)
{
    struct read_op *r = (struct read_op *)op;
    r->applied = 1;
    r->had_conn = c != NULL;
    struct ad_job *j = NULL;
    ad_err e = op_store->ops->job_get(c, "t1", "job_absent", &j);
    ad_job_free(j);
    return e;
}

static void read_done(struct ad_op *op)
{
    struct read_op *r = (struct read_op *)op;
    r->done = 1;
    r->err = op->err;
    r->on_loop_thread = pthread_equal(pthread_self(), loop_thread);
    ad_op_free(op);
}

static void read_destroy(struct ad_op *op)
{
    (void)op; /* on the test's stack */
}

static void test_op_pool_applies_off_the_loop_and_answers_on_it(void **state)
{
    (void)state;
    char dir[64], data[128], err[256] = "";
    assert_int_equal(tmpdir_make(dir, sizeof(dir), "pool"), 0);
    snprintf(data, sizeof(data), "%s/data", dir);
    struct ad_store *store = ad_store_open(data, err, sizeof(err));
    if (store == NULL)
        fail_msg("ad_store_open: %s", err);
    op_store = store;
    struct ad_loop *loop = ad_loop_new();
    loop_thread = pthread_self();
    if (ad_writer_start(store, loop, err, sizeof(err)) != 0) /* the hand-back to the loop */
        fail_msg("ad_writer_start: %s", err);
    struct ad_pool p = {.name = "ad-test-ops", .nthreads = 2, .drain = 0, AD_OP_POOL, .data = store};
    if (ad_pool_start(&p, err, sizeof(err)) != 0)
        fail_msg("ad_pool_start: %s", err);
    struct read_op a = {.op = {.apply = read_apply, .done = read_done, .destroy = read_destroy}};
    ad_op_pool_submit(&p, &a.op);
    for (int turn = 0; turn < 600 && !a.done; turn++)
        ad_loop_run(loop, 100);
    assert_true(a.done);
    assert_true(a.applied);
    assert_true(a.had_conn);
    assert_true(a.on_loop_thread);
    assert_int_equal(a.err, AD_E_NOT_FOUND);
    ad_pool_stop(&p);
    /* Stopped: answered without apply. */
    struct read_op b = {.op = {.apply = read_apply, .done = read_done, .destroy = read_destroy}};
    ad_op_pool_submit(&p, &b.op);
    for (int turn = 0; turn < 600 && !b.done; turn++)
        ad_loop_run(loop, 100);
    assert_true(b.done);
    assert_false(b.applied);
    assert_int_equal(b.err, AD_E_UNAVAILABLE);
    ad_pool_destroy(&p);
    ad_writer_stop();
    store->ops->close(store);
    tmpdir_remove(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_items_run_in_order_on_named_threads),
        cmocka_unit_test(test_stop_drains_a_draining_pool),
        cmocka_unit_test(test_stop_drops_what_a_dropping_pool_holds),
        cmocka_unit_test(test_a_stopped_pool_refuses_items),
        cmocka_unit_test(test_a_wait_ends_at_its_monotonic_deadline),
        cmocka_unit_test(test_every_runs_at_start_and_then_again),
        cmocka_unit_test(test_main_takes_items_in_batches),
        cmocka_unit_test(test_op_pool_applies_off_the_loop_and_answers_on_it),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
