/*
 * test_timer.c - unit tests for src/timer.c: the min-heap fires in deadline order, cancel and re-arm from any
 * position, callbacks that arm and cancel other timers while ad_timers_run is firing, and the sleep bound.
 *
 * Deadlines are relative to ad_mono_ms(); a timer is made due by arming it in the past. The heap is global, so
 * each test leaves no timer armed (checked in teardown).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/timer.h"
#include "common/util.h"

#define N 500

struct tt {
    struct ad_timer t;
    int index;
    int fired;
    int64_t fired_at; /* deadline seen when it fired */
};

static struct tt timers[N];
static int order[N];
static int norder;

static void record(struct ad_timer *t)
{
    struct tt *x = (struct tt *)t;
    if (ad_timer_armed(t))
        fail_msg("timer %d still armed inside its callback", x->index);
    x->fired++;
    x->fired_at = t->at;
    if (norder < N)
        order[norder] = x->index;
    norder++;
}

static int setup(void **state)
{
    (void)state;
    memset(timers, 0, sizeof(timers));
    for (int i = 0; i < N; i++) {
        timers[i].index = i;
        timers[i].t.cb = record;
    }
    norder = 0;
    return ad_timers_count() == 0 ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    for (int i = 0; i < N; i++)
        ad_timer_cancel(&timers[i].t);
    return ad_timers_count() == 0 ? 0 : -1;
}

/* Deterministic pseudo-random numbers, so a failure reproduces. */
static uint32_t rng = 12345;
static uint32_t next_rand(void)
{
    rng = rng * 1103515245u + 12345u;
    return rng >> 8;
}

/* Check that fired deadlines never decrease, and that exactly want timers fired. */
static void check_fire_order(int want)
{
    assert_int_equal(norder, want);
    for (int k = 1; k < norder; k++) {
        int64_t a = timers[order[k - 1]].fired_at, b = timers[order[k]].fired_at;
        if (a > b)
            fail_msg("fired out of order at %d: timer %d (at %lld) before timer %d (at %lld)", k, order[k - 1],
                     (long long)a, order[k], (long long)b);
    }
}

static void test_many_random_deadlines_fire_in_order(void **state)
{
    (void)state;
    int64_t now = ad_mono_ms();
    for (int i = 0; i < N; i++) {
        /* Many duplicates (range 200) among N timers, all in the past. */
        ad_timer_arm(&timers[i].t, now - 1 - (int64_t)(next_rand() % 200));
        assert_true(ad_timer_armed(&timers[i].t));
    }
    assert_int_equal(ad_timers_count(), N);
    assert_int_equal(ad_timers_next_wait(1000), 0);
    ad_timers_run();
    assert_int_equal(ad_timers_count(), 0);
    check_fire_order(N);
    for (int i = 0; i < N; i++) {
        assert_int_equal(timers[i].fired, 1);
        assert_false(ad_timer_armed(&timers[i].t));
    }
}

static void test_only_due_timers_fire(void **state)
{
    (void)state;
    int64_t now = ad_mono_ms();
    for (int i = 0; i < 100; i++)
        ad_timer_arm(&timers[i].t, i % 2 == 0 ? now - 1 - i : now + 3600 * 1000 + i);
    ad_timers_run();
    assert_int_equal(norder, 50);
    for (int i = 0; i < 100; i++) {
        assert_int_equal(timers[i].fired, i % 2 == 0);
        assert_int_equal(ad_timer_armed(&timers[i].t), i % 2 == 1);
    }
    assert_int_equal(ad_timers_count(), 50);
    /* Nothing more is due. */
    ad_timers_run();
    assert_int_equal(norder, 50);
}

static void test_cancel_middle_elements(void **state)
{
    (void)state;
    int64_t now = ad_mono_ms();
    for (int i = 0; i < N; i++)
        ad_timer_arm(&timers[i].t, now - 1 - (int64_t)(next_rand() % 100000));
    /* Cancel every third one: leaves, inner nodes and the root all get removed somewhere. */
    int left = N;
    for (int i = 0; i < N; i += 3) {
        ad_timer_cancel(&timers[i].t);
        assert_false(ad_timer_armed(&timers[i].t));
        left--;
        assert_int_equal(ad_timers_count(), (size_t)left);
    }
    ad_timer_cancel(&timers[0].t); /* twice: no-op */
    assert_int_equal(ad_timers_count(), (size_t)left);
    ad_timers_run();
    check_fire_order(left);
    for (int i = 0; i < N; i++)
        assert_int_equal(timers[i].fired, i % 3 != 0);
}

static void test_rearm_moves(void **state)
{
    (void)state;
    int64_t now = ad_mono_ms();
    for (int i = 0; i < N; i++)
        ad_timer_arm(&timers[i].t, now - 1000 - (int64_t)(next_rand() % 100000));
    /* Re-arm half of them: some later (still due), some into the future, some earlier. */
    for (int i = 0; i < N; i += 2) {
        int64_t at;
        switch (i % 3) {
        case 0:
            at = now + 3600 * 1000; /* not due any more */
            break;
        case 1:
            at = now - 1; /* the latest of the due ones */
            break;
        default:
            at = now - 200000 - i; /* earlier than everything */
            break;
        }
        ad_timer_arm(&timers[i].t, at);
        assert_int_equal(timers[i].t.at, at);
    }
    assert_int_equal(ad_timers_count(), N); /* re-arming never duplicates */
    ad_timers_run();
    int want = 0;
    for (int i = 0; i < N; i++) {
        int future = i % 2 == 0 && i % 3 == 0;
        assert_int_equal(timers[i].fired, !future);
        want += !future;
    }
    check_fire_order(want);
    /* The ones moved earlier than everything (i % 6 == 2) fired first, all of them. */
    int nearly = 0;
    for (int i = 0; i < N; i++)
        nearly += i % 6 == 2;
    for (int k = 0; k < nearly; k++)
        if (order[k] % 6 != 2)
            fail_msg("fire #%d was timer %d, not one of the re-armed earliest", k, order[k]);
}

/* ---- callbacks that change the heap while it fires ---- */

static struct ad_timer *victim;    /* cancelled by cancel_other */
static struct ad_timer *newcomer;  /* armed (due) by arm_other */
static struct ad_timer *scheduled; /* armed (future) by arm_other */
static int64_t base_now;

static void cancel_other(struct ad_timer *t)
{
    record(t);
    ad_timer_cancel(victim);
}

static void arm_other(struct ad_timer *t)
{
    record(t);
    ad_timer_arm(newcomer, base_now - 1);
    ad_timer_arm(scheduled, base_now + 3600 * 1000);
}

static void rearm_self_future(struct ad_timer *t)
{
    record(t);
    ad_timer_arm(t, base_now + 3600 * 1000);
}

static void test_callbacks_arm_and_cancel(void **state)
{
    (void)state;
    base_now = ad_mono_ms();
    /* 0 fires first and cancels 1, which was also due; 2 arms 3 (due) and 4 (future); 5 re-arms itself later. */
    timers[0].t.cb = cancel_other;
    victim = &timers[1].t;
    timers[2].t.cb = arm_other;
    newcomer = &timers[3].t;
    scheduled = &timers[4].t;
    timers[5].t.cb = rearm_self_future;
    ad_timer_arm(&timers[0].t, base_now - 100);
    ad_timer_arm(&timers[1].t, base_now - 50);
    ad_timer_arm(&timers[2].t, base_now - 40);
    ad_timer_arm(&timers[5].t, base_now - 30);
    ad_timer_arm(&timers[4].t, base_now - 20); /* due, but arm_other moves it to the future first */
    for (int i = 6; i < 40; i++)
        ad_timer_arm(&timers[i].t, base_now - 10 - i);
    ad_timers_run();

    assert_int_equal(timers[0].fired, 1);
    assert_int_equal(timers[1].fired, 0);
    assert_false(ad_timer_armed(&timers[1].t));
    assert_int_equal(timers[2].fired, 1);
    assert_int_equal(timers[3].fired, 1); /* armed during the run, already due: fired in the same run */
    assert_int_equal(timers[4].fired, 0);
    assert_true(ad_timer_armed(&timers[4].t));
    assert_int_equal(timers[5].fired, 1);
    assert_true(ad_timer_armed(&timers[5].t));
    for (int i = 6; i < 40; i++)
        assert_int_equal(timers[i].fired, 1);
    assert_int_equal(ad_timers_count(), 2);
    int32_t w = ad_timers_next_wait(INT32_MAX);
    assert_in_range(w, 3600 * 1000 - 5000, 3600 * 1000);
}

static void test_next_wait(void **state)
{
    (void)state;
    /* Nothing armed: the cap. */
    assert_int_equal(ad_timers_next_wait(1234), 1234);
    assert_int_equal(ad_timers_next_wait(0), 0);

    int64_t now = ad_mono_ms();
    ad_timer_arm(&timers[0].t, now + 5000);
    assert_int_equal(ad_timers_next_wait(100), 100); /* capped */
    int32_t w = ad_timers_next_wait(60000);
    assert_in_range(w, 4000, 5000);

    /* The earliest one counts, wherever it was armed. */
    ad_timer_arm(&timers[1].t, now + 2000);
    w = ad_timers_next_wait(60000);
    assert_in_range(w, 1000, 2000);
    ad_timer_cancel(&timers[1].t);
    w = ad_timers_next_wait(60000);
    assert_in_range(w, 4000, 5000);

    /* A deadline far beyond INT32_MAX ms from now is still capped, not truncated. */
    ad_timer_arm(&timers[0].t, now + ((int64_t)1 << 40));
    assert_int_equal(ad_timers_next_wait(INT32_MAX), INT32_MAX);
    assert_int_equal(ad_timers_next_wait(60000), 60000);

    /* Due (now or long ago): zero. */
    ad_timer_arm(&timers[2].t, now);
    assert_int_equal(ad_timers_next_wait(60000), 0);
    ad_timer_arm(&timers[2].t, now - 100000);
    assert_int_equal(ad_timers_next_wait(60000), 0);
    ad_timers_run();
    assert_int_equal(timers[2].fired, 1);
    assert_true(ad_timers_next_wait(60000) == 60000);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_many_random_deadlines_fire_in_order, setup, teardown),
        cmocka_unit_test_setup_teardown(test_only_due_timers_fire, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cancel_middle_elements, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rearm_moves, setup, teardown),
        cmocka_unit_test_setup_teardown(test_callbacks_arm_and_cancel, setup, teardown),
        cmocka_unit_test_setup_teardown(test_next_wait, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
