/*
 * test_queues.c - unit tests for src/core/queues.c: the merge patch of a queue's settings (members, nulls, nested
 * rate limits, pointers to what is wrong), the configuration's initial settings, and what a queue lets a lease take
 * (pause, running count, fixed rate window; per group: room, skipped groups, hints) against a real SQLite store in a
 * throwaway directory.
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
#include "core_test.h"

#define T0 INT64_C(1800000000000)

static int setup(void **state)
{
    return core_fx_open(state, "queues",
                        "types:\n  a: { concurrency: 2, rateLimit: { limit: 3, period: 10s } }\n  b: {}\n");
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

/* A job of tenant t and type in group (NULL: none) stored with status st. */
static void put_job(struct fx *f, const char *id, const char *type, const char *group, enum ad_status st)
{
    struct ad_job *j = ad_job_new();
    ad_job_set(&j->id, id);
    ad_job_set(&j->tenant, "t");
    ad_job_set(&j->type, type);
    ad_job_set(&j->payload, "{}");
    ad_job_set(&j->group, group);
    j->status = st;
    j->priority = AD_PRIO_NORMAL;
    j->max_attempts = 1;
    j->created_at = j->updated_at = T0;
    assert_int_equal(f->s->ops->job_insert(f->c, j), AD_E_OK);
    ad_job_free(j);
}

/* The ids of what a gate picked, comma separated, into buf. */
static const char *picked_ids(const struct ad_job_list *l, char *buf, size_t size)
{
    buf[0] = '\0';
    for (size_t i = 0; i < l->n; i++)
        snprintf(buf + strlen(buf), size - strlen(buf), "%s%s", i > 0 ? "," : "", l->items[i]->id);
    return buf;
}

/* groupConcurrency: a lease takes no more of a group than its room, passes over a full group's jobs, and leaves the
 * groups it filled as the reason their jobs wait (not a group whose room it only knew to be at least its size). */
static void test_gate_group_limits(void **state)
{
    struct fx *f = *state;
    char buf[128];
    struct ad_queue q = {.tenant = "t", .type = "g", .group_concurrency = 3};
    assert_int_equal(f->s->ops->begin(f->c), AD_E_OK);
    assert_int_equal(f->s->ops->queue_put(f->c, &q), AD_E_OK);
    put_job(f, "r1", "g", "A", AD_RUNNING);
    put_job(f, "r2", "g", "A", AD_RUNNING);
    put_job(f, "f1", "g", "F", AD_RUNNING);
    put_job(f, "f2", "g", "F", AD_RUNNING);
    put_job(f, "f3", "g", "F", AD_RUNNING);
    put_job(f, "a1", "g", "A", AD_QUEUED);
    put_job(f, "f4", "g", "F", AD_QUEUED);
    put_job(f, "a2", "g", "A", AD_QUEUED);
    put_job(f, "b1", "g", "B", AD_QUEUED);
    put_job(f, "b2", "g", "B", AD_QUEUED);
    char *types[] = {"g"};
    struct ad_queue_gate g;
    int limit = 10;
    assert_int_equal(ad_queue_gate_open(&g, f->c, "t", types, 1, T0, &limit), AD_E_OK);
    struct ad_job_list picked;
    assert_int_equal(ad_queue_gate_pick(&g, f->c, "t", T0, limit, &picked), AD_E_OK);
    /* A has room for one, F none, B for three. */
    assert_string_equal(picked_ids(&picked, buf, sizeof(buf)), "a1,b1,b2");
    assert_int_equal(ad_queue_gate_close(&g, f->c, &picked, T0), AD_E_OK);
    assert_int_equal(picked.n, 3);
    ad_job_list_free(&picked);
    ad_queue_gate_free(&g);
    assert_int_equal(ad_queues_waiting("t", "g", "A"), AD_WAIT_GROUP_CONCURRENCY);
    assert_int_equal(ad_queues_waiting("t", "g", "F"), AD_WAIT_GROUP_CONCURRENCY);
    assert_int_equal(ad_queues_waiting("t", "g", "B"), AD_WAIT_NONE);
    assert_int_equal(ad_queues_waiting("t", "g", NULL), AD_WAIT_NONE);
    ad_queues_group_freed("t", "g", "F");
    assert_int_equal(ad_queues_waiting("t", "g", "F"), AD_WAIT_NONE);
    /* With a type without limits asked for too: both picked, merged in lease order. */
    put_job(f, "p1", "p", "A", AD_QUEUED);
    char *both[] = {"p", "g"};
    limit = 10;
    assert_int_equal(ad_queue_gate_open(&g, f->c, "t", both, 2, T0, &limit), AD_E_OK);
    assert_int_equal(ad_queue_gate_pick(&g, f->c, "t", T0, limit, &picked), AD_E_OK);
    assert_string_equal(picked_ids(&picked, buf, sizeof(buf)), "a1,b1,b2,p1");
    ad_job_list_free(&picked);
    ad_queue_gate_free(&g);
    limit = 2;
    assert_int_equal(ad_queue_gate_open(&g, f->c, "t", both, 2, T0, &limit), AD_E_OK);
    assert_int_equal(ad_queue_gate_pick(&g, f->c, "t", T0, limit, &picked), AD_E_OK);
    assert_string_equal(picked_ids(&picked, buf, sizeof(buf)), "a1,b1");
    ad_job_list_free(&picked);
    ad_queue_gate_free(&g);
    /* A lease of one reads only the groups one job could fill: C, with nothing running, is not full after it. */
    struct ad_queue h = {.tenant = "t", .type = "h", .group_concurrency = 3};
    assert_int_equal(f->s->ops->queue_put(f->c, &h), AD_E_OK);
    put_job(f, "c1", "h", "C", AD_QUEUED);
    put_job(f, "c2", "h", "C", AD_QUEUED);
    char *htypes[] = {"h"};
    limit = 1;
    assert_int_equal(ad_queue_gate_open(&g, f->c, "t", htypes, 1, T0, &limit), AD_E_OK);
    assert_int_equal(ad_queue_gate_pick(&g, f->c, "t", T0, limit, &picked), AD_E_OK);
    assert_string_equal(picked_ids(&picked, buf, sizeof(buf)), "c1");
    assert_int_equal(ad_queue_gate_close(&g, f->c, &picked, T0), AD_E_OK);
    ad_job_list_free(&picked);
    ad_queue_gate_free(&g);
    assert_int_equal(ad_queues_waiting("t", "h", "C"), AD_WAIT_NONE);
    assert_int_equal(f->s->ops->commit(f->c), AD_E_OK);
}

/* More full groups than a lease query names: the jobs of the others are dropped after it, and a group with room is
 * still found behind them. */
static void test_gate_many_full_groups(void **state)
{
    struct fx *f = *state;
    char buf[128];
    struct ad_queue q = {.tenant = "t", .type = "g", .group_concurrency = 1};
    assert_int_equal(f->s->ops->begin(f->c), AD_E_OK);
    assert_int_equal(f->s->ops->queue_put(f->c, &q), AD_E_OK);
    for (int i = 0; i < 100; i++) {
        char id[32], group[32];
        snprintf(group, sizeof(group), "full%d", i);
        snprintf(id, sizeof(id), "r%d", i);
        put_job(f, id, "g", group, AD_RUNNING);
        snprintf(id, sizeof(id), "q%d", i);
        put_job(f, id, "g", group, AD_QUEUED);
    }
    put_job(f, "z1", "g", "Z", AD_QUEUED);
    put_job(f, "z2", "g", "Z", AD_QUEUED);
    char *types[] = {"g"};
    struct ad_queue_gate g;
    struct ad_job_list picked;
    int limit = 10;
    assert_int_equal(ad_queue_gate_open(&g, f->c, "t", types, 1, T0, &limit), AD_E_OK);
    assert_int_equal(ad_queue_gate_pick(&g, f->c, "t", T0, limit, &picked), AD_E_OK);
    assert_string_equal(picked_ids(&picked, buf, sizeof(buf)), "z1");
    assert_int_equal(ad_queue_gate_close(&g, f->c, &picked, T0), AD_E_OK);
    ad_job_list_free(&picked);
    ad_queue_gate_free(&g);
    assert_int_equal(ad_queues_waiting("t", "g", "full99"), AD_WAIT_GROUP_CONCURRENCY);
    assert_int_equal(ad_queues_waiting("t", "g", "Z"), AD_WAIT_GROUP_CONCURRENCY);
    assert_int_equal(f->s->ops->commit(f->c), AD_E_OK);
}

/* groupRateLimit: a group's leases in its window never pass the limit, another group's go on, and the window's
 * end is when the parked lease looks again. */
static void test_gate_group_rate_limit(void **state)
{
    struct fx *f = *state;
    char buf[128];
    struct ad_queue q = {.tenant = "t", .type = "g", .group_rate = {2, 10000}};
    assert_int_equal(f->s->ops->begin(f->c), AD_E_OK);
    assert_int_equal(f->s->ops->queue_put(f->c, &q), AD_E_OK);
    for (int i = 1; i <= 3; i++) {
        char id[16];
        snprintf(id, sizeof(id), "a%d", i);
        put_job(f, id, "g", "A", AD_QUEUED);
    }
    char *types[] = {"g"};
    struct ad_queue_gate g;
    struct ad_job_list picked;
    int limit = 10;
    assert_int_equal(ad_queue_gate_open(&g, f->c, "t", types, 1, T0, &limit), AD_E_OK);
    assert_int_equal(ad_queue_gate_pick(&g, f->c, "t", T0, limit, &picked), AD_E_OK);
    assert_string_equal(picked_ids(&picked, buf, sizeof(buf)), "a1,a2");
    assert_int_equal(ad_queue_gate_close(&g, f->c, &picked, T0), AD_E_OK);
    ad_job_list_free(&picked);
    ad_queue_gate_free(&g);
    assert_int_equal(ad_queues_waiting("t", "g", "A"), AD_WAIT_GROUP_RATE_LIMIT);
    /* The jobs were not leased (no job changed), so a2 is still queued; the window holds A back, not B. */
    put_job(f, "b1", "g", "B", AD_QUEUED);
    limit = 10;
    assert_int_equal(ad_queue_gate_open(&g, f->c, "t", types, 1, T0 + 1, &limit), AD_E_OK);
    assert_true(g.open_at == T0 - T0 % 10000 + 10000);
    assert_int_equal(ad_queue_gate_pick(&g, f->c, "t", T0 + 1, limit, &picked), AD_E_OK);
    assert_string_equal(picked_ids(&picked, buf, sizeof(buf)), "b1");
    ad_job_list_free(&picked);
    ad_queue_gate_free(&g);
    /* The next window counts afresh. */
    limit = 10;
    assert_int_equal(ad_queue_gate_open(&g, f->c, "t", types, 1, T0 + 10000, &limit), AD_E_OK);
    assert_int_equal(ad_queue_gate_pick(&g, f->c, "t", T0 + 10000, limit, &picked), AD_E_OK);
    assert_string_equal(picked_ids(&picked, buf, sizeof(buf)), "a1,b1,a2");
    ad_job_list_free(&picked);
    ad_queue_gate_free(&g);
    assert_int_equal(f->s->ops->commit(f->c), AD_E_OK);
}

int main(void)
{
#define T(name) cmocka_unit_test_setup_teardown(name, setup, core_fx_close)
    const struct CMUnitTest tests[] = {
        T(test_patch_merges_clears_and_points_at_what_is_wrong),
        T(test_configuration_gives_the_initial_settings),
        T(test_room_pause_concurrency_and_fixed_window),
        T(test_gate_narrows_types_and_drops_past_room),
        T(test_patch_reaches_a_queue_leased_before),
        T(test_gate_group_limits),
        T(test_gate_group_rate_limit),
        T(test_gate_many_full_groups),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
