/*
 * test_queues.c - unit tests for src/core/queues.c: the merge patch of a queue's settings (members, nulls, nested
 * rate limits, pointers to what is wrong), the configuration's initial settings, and what a queue lets a lease take
 * (pause, running count, fixed rate window) against a real SQLite store in a throwaway directory.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "core/queues.h"
#include "tmpdir.h"

#define T0 INT64_C(1800000000000)

struct fx {
    char dir[64];
    char data[128];
    struct ad_config cfg;
    struct ad_store *s;
    struct ad_conn *c;
};

static int setup(void **state)
{
    struct fx *f = calloc(1, sizeof(*f));
    if (tmpdir_make(f->dir, sizeof(f->dir), "queues") != 0)
        return -1;
    snprintf(f->data, sizeof(f->data), "%s/data", f->dir);
    ad_config_defaults(&f->cfg);
    char err[256] = "";
    const char *yaml = "types:\n  a: { concurrency: 2, rateLimit: { limit: 3, period: 10s } }\n  b: {}\n";
    if (ad_config_load_string(&f->cfg, yaml, strlen(yaml), err, sizeof(err)) != 0) {
        fprintf(stderr, "config: %s\n", err);
        return -1;
    }
    f->s = ad_store_open(f->data, err, sizeof(err));
    if (f->s == NULL) {
        fprintf(stderr, "ad_store_open: %s\n", err);
        return -1;
    }
    f->c = f->s->ops->connect(f->s, err, sizeof(err));
    if (f->c == NULL) {
        fprintf(stderr, "connect: %s\n", err);
        return -1;
    }
    ad_core_init(&f->cfg, f->s);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fx *f = *state;
    f->s->ops->disconnect(f->c);
    f->s->ops->close(f->s);
    ad_config_free(&f->cfg);
    tmpdir_remove(f->dir);
    free(f);
    return 0;
}

/* Patch q with the JSON text; the pointer of the refusal, or NULL when it applied. */
static char *patch(struct ad_queue *q, const char *text)
{
    json_t *p = json_loads(text, JSON_DECODE_ANY, NULL);
    assert_non_null(p);
    char *pointer = NULL, *detail = NULL;
    int rc = ad_queue_patch(q, p, &pointer, &detail);
    json_decref(p);
    assert_int_equal(rc == 0, pointer == NULL);
    assert_int_equal(rc == 0, detail == NULL);
    free(detail);
    return pointer;
}

static void test_patch_merges_clears_and_points_at_what_is_wrong(void **state)
{
    (void)state;
    struct ad_queue q = {0};
    assert_null(patch(&q, "{\"paused\": true, \"concurrency\": 3, \"rateLimit\": {\"limit\": 5, \"period\": \"1m\"}}"));
    assert_int_equal(q.paused, 1);
    assert_int_equal(q.concurrency, 3);
    assert_int_equal(q.rate.limit, 5);
    assert_int_equal(q.rate.period_ms, 60000);
    /* A nested object merges; members left out stay. */
    assert_null(patch(&q, "{\"rateLimit\": {\"period\": \"500ms\"}}"));
    assert_int_equal(q.rate.limit, 5);
    assert_int_equal(q.rate.period_ms, 500);
    assert_int_equal(q.concurrency, 3);
    /* null clears. */
    assert_null(patch(&q, "{\"paused\": null, \"concurrency\": null, \"rateLimit\": null}"));
    assert_int_equal(q.paused, 0);
    assert_int_equal(q.concurrency, 0);
    assert_int_equal(q.rate.limit, 0);
    /* Refusals name the member, and leave q as it was. */
    q.group_concurrency = 7;
    const struct {
        const char *text, *pointer;
    } bad[] = {
        {"[]", ""},
        {"{\"nope\": 1}", "/nope"},
        {"{\"a/b~c\": 1}", "/a~1b~0c"},
        {"{\"groupConcurrency\": 2, \"concurrency\": 0}", "/concurrency"},
        {"{\"concurrency\": 1000001}", "/concurrency"},
        {"{\"paused\": \"yes\"}", "/paused"},
        {"{\"rateLimit\": {\"limit\": 2}}", "/rateLimit/period"},
        {"{\"rateLimit\": {\"period\": \"1s\"}}", "/rateLimit/limit"},
        {"{\"groupRateLimit\": {\"limit\": 2, \"period\": \"2d\"}}", "/groupRateLimit/period"},
        {"{\"groupRateLimit\": {\"limit\": 2, \"period\": \"1s\", \"x\": 1}}", "/groupRateLimit/x"},
        {"{\"rateLimit\": 5}", "/rateLimit"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char *p = patch(&q, bad[i].text);
        if (p == NULL)
            fail_msg("%s applied", bad[i].text);
        if (strcmp(p, bad[i].pointer) != 0)
            fail_msg("%s: pointer %s, expected %s", bad[i].text, p, bad[i].pointer);
        free(p);
        assert_int_equal(q.group_concurrency, 7);
        assert_int_equal(q.concurrency, 0);
    }
}

static void test_configuration_gives_the_initial_settings(void **state)
{
    struct fx *f = *state;
    struct ad_queue q;
    assert_int_equal(ad_queue_load(f->c, "t", "a", &q), AD_E_OK);
    assert_int_equal(q.concurrency, 2);
    assert_int_equal(q.rate.limit, 3);
    assert_int_equal(q.rate.period_ms, 10000);
    ad_queue_clear(&q);
    assert_int_equal(ad_queue_load(f->c, "t", "b", &q), AD_E_OK);
    assert_int_equal(q.concurrency, 0);
    ad_queue_clear(&q);
    /* A stored row replaces them whole. */
    struct ad_queue row = {.tenant = "t", .type = "a", .paused = 1};
    assert_int_equal(f->s->ops->begin(f->c), AD_E_OK);
    assert_int_equal(f->s->ops->queue_put(f->c, &row), AD_E_OK);
    assert_int_equal(f->s->ops->commit(f->c), AD_E_OK);
    assert_int_equal(ad_queue_load(f->c, "t", "a", &q), AD_E_OK);
    assert_int_equal(q.paused, 1);
    assert_int_equal(q.concurrency, 0);
    ad_queue_clear(&q);
}

static void insert_running(struct fx *f, const char *id)
{
    struct ad_job j = {.id = (char *)id,
                       .tenant = "t",
                       .type = "a",
                       .payload = "{}",
                       .status = AD_RUNNING,
                       .progress = -1,
                       .max_attempts = 3,
                       .created_at = T0,
                       .updated_at = T0};
    assert_int_equal(f->s->ops->job_insert(f->c, &j), AD_E_OK);
}

static void test_room_pause_concurrency_and_fixed_window(void **state)
{
    struct fx *f = *state;
    struct ad_queue q = {.tenant = "t", .type = "a", .concurrency = 2, .rate = {3, 10000}};
    int room;
    enum ad_wait why;
    int64_t open_at;
    assert_int_equal(f->s->ops->begin(f->c), AD_E_OK);
    assert_int_equal(ad_queue_room(f->c, &q, T0, &room, &why, &open_at), AD_E_OK);
    assert_int_equal(room, 2);
    assert_int_equal(why, AD_WAIT_NONE);
    insert_running(f, "job_1");
    assert_int_equal(ad_queue_room(f->c, &q, T0, &room, &why, &open_at), AD_E_OK);
    assert_int_equal(room, 1);
    insert_running(f, "job_2");
    assert_int_equal(ad_queue_room(f->c, &q, T0, &room, &why, &open_at), AD_E_OK);
    assert_int_equal(room, 0);
    assert_int_equal(why, AD_WAIT_CONCURRENCY);
    assert_string_equal(ad_wait_name(why), "concurrency");
    /* The rate window: 3 per aligned 10 s, counted in the row. */
    q.concurrency = 0;
    int64_t w = T0 - T0 % 10000;
    assert_int_equal(ad_queue_took(f->c, &q, 2, w + 100), AD_E_OK);
    assert_int_equal(ad_queue_room(f->c, &q, w + 200, &room, &why, &open_at), AD_E_OK);
    assert_int_equal(room, 1);
    assert_int_equal(ad_queue_took(f->c, &q, 1, w + 300), AD_E_OK);
    assert_int_equal(ad_queue_room(f->c, &q, w + 9999, &room, &why, &open_at), AD_E_OK);
    assert_int_equal(room, 0);
    assert_int_equal(why, AD_WAIT_RATE_LIMIT);
    assert_int_equal(open_at, w + 10000);
    struct ad_queue stored;
    assert_int_equal(f->s->ops->queue_get(f->c, "t", "a", &stored), AD_E_OK);
    assert_int_equal(stored.window_start, w);
    assert_int_equal(stored.window_count, 3);
    ad_queue_clear(&stored);
    /* The next window starts afresh. */
    assert_int_equal(ad_queue_room(f->c, &q, w + 10000, &room, &why, &open_at), AD_E_OK);
    assert_int_equal(room, 3);
    /* Paused wins over everything. */
    q.paused = 1;
    assert_int_equal(ad_queue_room(f->c, &q, w + 10000, &room, &why, &open_at), AD_E_OK);
    assert_int_equal(room, 0);
    assert_int_equal(why, AD_WAIT_PAUSED);
    assert_int_equal(f->s->ops->commit(f->c), AD_E_OK);
}

static void test_gate_narrows_types_and_drops_past_room(void **state)
{
    struct fx *f = *state;
    struct ad_queue paused = {.tenant = "t", .type = "b", .paused = 1};
    assert_int_equal(f->s->ops->begin(f->c), AD_E_OK);
    assert_int_equal(f->s->ops->queue_put(f->c, &paused), AD_E_OK);
    char *types[] = {"a", "b", "c"};
    struct ad_queue_gate g;
    int limit = 10;
    assert_int_equal(ad_queue_gate_open(&g, f->c, "t", types, 3, T0, &limit), AD_E_OK);
    assert_int_equal(g.ntypes, 2); /* b is paused */
    assert_string_equal(g.types[0], "a");
    assert_string_equal(g.types[1], "c");
    assert_int_equal(limit, 10); /* c has no limit */
    assert_true(ad_queues_limited("t", "b"));
    assert_int_equal(ad_queues_waiting("t", "b", NULL), AD_WAIT_PAUSED);
    /* a's room is 2 (its configured concurrency): a third job of a is dropped. */
    struct ad_job_list picked = {0};
    picked.items = calloc(4, sizeof(*picked.items));
    for (int i = 0; i < 4; i++) {
        picked.items[i] = calloc(1, sizeof(struct ad_job));
        picked.items[i]->type = strdup(i < 3 ? "a" : "c");
        picked.items[i]->id = strdup("x");
    }
    picked.n = 4;
    assert_int_equal(ad_queue_gate_close(&g, f->c, &picked, T0), AD_E_OK);
    assert_int_equal(picked.n, 3);
    assert_string_equal(picked.items[2]->type, "c");
    ad_job_list_free(&picked);
    ad_queue_gate_free(&g);
    assert_int_equal(f->s->ops->commit(f->c), AD_E_OK);
}

/* A queue the writer has seen without a row (and so no longer reads) is read again once a patch wrote it. */
static void test_patch_reaches_a_queue_leased_before(void **state)
{
    struct fx *f = *state;
    char *types[] = {"c"};
    struct ad_queue_gate g;
    for (int round = 0; round < 2; round++) {
        int limit = 5;
        assert_int_equal(f->s->ops->begin(f->c), AD_E_OK);
        assert_int_equal(ad_queue_gate_open(&g, f->c, "t", types, 1, T0, &limit), AD_E_OK);
        assert_int_equal(g.ntypes, 1);
        assert_int_equal(limit, 5);
        ad_queue_gate_free(&g);
        assert_int_equal(f->s->ops->commit(f->c), AD_E_OK);
    }
    struct ad_queue_op *x = ad_queue_op_new();
    x->tenant = strdup("t");
    x->type = strdup("c");
    x->patch = json_pack("{s:b}", "paused", 1);
    x->now = T0;
    assert_int_equal(f->s->ops->begin(f->c), AD_E_OK);
    assert_int_equal(x->op.apply(&x->op, f->c), AD_E_OK);
    assert_int_equal(f->s->ops->commit(f->c), AD_E_OK);
    assert_int_equal(x->view.q.paused, 1);
    ad_op_free(&x->op);
    int limit = 5;
    assert_int_equal(f->s->ops->begin(f->c), AD_E_OK);
    assert_int_equal(ad_queue_gate_open(&g, f->c, "t", types, 1, T0, &limit), AD_E_OK);
    assert_int_equal(g.ntypes, 0);
    assert_int_equal(limit, 0);
    ad_queue_gate_free(&g);
    assert_int_equal(f->s->ops->commit(f->c), AD_E_OK);
}

int main(void)
{
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(test_patch_merges_clears_and_points_at_what_is_wrong),
        T(test_configuration_gives_the_initial_settings),
        T(test_room_pause_concurrency_and_fixed_window),
        T(test_gate_narrows_types_and_drops_past_room),
        T(test_patch_reaches_a_queue_leased_before),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
