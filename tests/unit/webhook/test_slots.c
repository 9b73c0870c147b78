/*
 * test_slots.c - unit tests for src/webhook/slots.c: an endpoint's share of the delivery slots shrinks with
 * each failed or slow answer down to one and grows back with good ones, endpoints that keep failing together
 * never hold more than three quarters of the slots, the endpoints that may not start are listed for the store
 * to read past, and the records of failing endpoints are bounded. Pure: no thread, no network, no store.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "webhook/webhook_int.h"

static int teardown(void **state)
{
    ad_wh_slots_reset();
    return 0;
}

/* Start n transfers to id, asserting each may start; their records into hs. */
static void begin_n(const char *id, size_t n, struct ad_wh_health **hs)
{
    for (size_t i = 0; i < n; i++) {
        assert_true(ad_wh_slots_may_start(id));
        hs[i] = ad_wh_slots_begin(id);
    }
}

static void test_share_shrinks_and_grows_back(void **state)
{
    struct ad_wh_health *hs[16];
    ad_wh_slots_init(16, 64);
    assert_true(ad_wh_slots_may_start("whk_a"));
    assert_int_equal(ad_wh_slots_cap("whk_a"), 16);
    begin_n("whk_a", 16, hs);
    assert_false(ad_wh_slots_may_start("whk_a")); /* at its share */
    assert_true(ad_wh_slots_may_start("whk_b"));  /* another endpoint is not */
    /* Each failure halves the share, down to one. */
    static const size_t caps[] = {8, 4, 2, 1, 1, 1};
    for (size_t i = 0; i < 6; i++) {
        ad_wh_slots_judge(hs[i], 0);
        ad_wh_slots_end(hs[i]);
        assert_int_equal(ad_wh_slots_cap("whk_a"), caps[i]);
    }
    for (size_t i = 6; i < 16; i++)
        ad_wh_slots_end(hs[i]);
    /* Nothing in flight, but the strikes are remembered: one transfer at a time. */
    begin_n("whk_a", 1, hs);
    assert_false(ad_wh_slots_may_start("whk_a"));
    /* Each good answer doubles it again. */
    static const size_t back[] = {2, 4, 8, 16};
    for (size_t i = 0; i < 4; i++) {
        ad_wh_slots_judge(hs[0], 1);
        ad_wh_slots_end(hs[0]);
        assert_int_equal(ad_wh_slots_cap("whk_a"), back[i]);
        hs[0] = ad_wh_slots_begin("whk_a");
    }
    ad_wh_slots_end(hs[0]);
    begin_n("whk_a", 16, hs);
    for (size_t i = 0; i < 16; i++)
        ad_wh_slots_end(hs[i]);
}

static void test_failing_endpoints_never_hold_every_slot(void **state)
{
    /* 4 slots, 2 an endpoint. Four endpoints fail once each: one slot each, and three of the four together. */
    struct ad_wh_health *h[4];
    char id[4][24];
    ad_wh_slots_init(2, 4);
    for (int i = 0; i < 4; i++) {
        snprintf(id[i], sizeof(id[i]), "whk_bad%d", i);
        h[i] = ad_wh_slots_begin(id[i]);
        ad_wh_slots_judge(h[i], 0);
        ad_wh_slots_end(h[i]);
        assert_int_equal(ad_wh_slots_cap(id[i]), 1);
    }
    for (int i = 0; i < 3; i++) {
        assert_true(ad_wh_slots_may_start(id[i]));
        h[i] = ad_wh_slots_begin(id[i]);
        assert_false(ad_wh_slots_may_start(id[i]));
    }
    assert_false(ad_wh_slots_may_start(id[3])); /* the last slot is kept for endpoints that answer well */
    assert_true(ad_wh_slots_may_start("whk_good"));
    /* The store is asked to read past those that may not start: the three in flight first, then the fourth. */
    const char *full[16];
    size_t n = ad_wh_slots_full(full, 16);
    assert_int_equal(n, 4);
    assert_string_equal(full[3], id[3]);
    assert_int_equal(ad_wh_slots_full(full, 2), 2);
    /* A good answer from one of them takes its strike away: it is no longer counted with the failing ones. */
    ad_wh_slots_judge(h[0], 1);
    assert_true(ad_wh_slots_may_start(id[0]));
    assert_true(ad_wh_slots_may_start(id[3]));
    for (int i = 0; i < 3; i++)
        ad_wh_slots_end(h[i]);
}

static void test_records_are_bounded(void **state)
{
    /* Failing endpoints with nothing in flight are remembered up to 4,096; past that all are forgotten. */
    ad_wh_slots_init(16, 64);
    char id[32];
    for (int i = 0; i < 4096; i++) {
        snprintf(id, sizeof(id), "whk_%d", i);
        struct ad_wh_health *h = ad_wh_slots_begin(id);
        ad_wh_slots_judge(h, 0);
        ad_wh_slots_end(h);
    }
    assert_int_equal(ad_wh_slots_cap("whk_0"), 8);
    assert_int_equal(ad_wh_slots_cap("whk_4095"), 8);
    struct ad_wh_health *h = ad_wh_slots_begin("whk_more");
    ad_wh_slots_judge(h, 0);
    ad_wh_slots_end(h);
    assert_int_equal(ad_wh_slots_cap("whk_0"), 16);
    assert_int_equal(ad_wh_slots_cap("whk_more"), 16);
    /* A record with nothing in flight and no strikes is not kept at all. */
    h = ad_wh_slots_begin("whk_fine");
    ad_wh_slots_judge(h, 1);
    ad_wh_slots_end(h);
    const char *full[16];
    assert_int_equal(ad_wh_slots_full(full, 16), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_share_shrinks_and_grows_back, teardown),
        cmocka_unit_test_teardown(test_failing_endpoints_never_hold_every_slot, teardown),
        cmocka_unit_test_teardown(test_records_are_bounded, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
