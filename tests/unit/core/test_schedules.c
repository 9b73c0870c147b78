/*
 * test_schedules.c - unit tests for src/core/schedules.c: a definition's rules and the pointers to what is wrong,
 * the next fire time (every from its anchor, startAt, endAt, cron in a zone across a DST change), and the fires
 * themselves against a real SQLite store: the missed fire times within the catch-up window run once each, older
 * ones are skipped and counted, the overlap policies, a pause, and the compare-and-set that refuses a fire time
 * another writer took. The .c is included to reach its statics (fire_due).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "core/schedules.c"
#include "core_test.h"

#define T0 INT64_C(1800000000000) /* 2027-01-15T08:00:00Z, a whole minute */

static int setup(void **state)
{
    return core_fx_open(state, "schedules", "types:\n  a: {}\n");
}

static int teardown(void **state)
{
    return core_fx_close(state);
}

struct bad {
    char pointers[512];
};

static void bad_add(void *arg, const char *pointer, const char *detail)
{
    struct bad *b = arg;
    assert_non_null(detail);
    size_t n = strlen(b->pointers);
    snprintf(b->pointers + n, sizeof(b->pointers) - n, "%s%s", n > 0 ? " " : "", pointer);
}

/* The pointers of what is wrong with the JSON text, space-separated ("" when nothing is). */
static const char *problems(const char *text, struct ad_sched_def *d)
{
    static struct bad b;
    memset(&b, 0, sizeof(b));
    json_t *body = json_loads(text, 0, NULL);
    assert_non_null(body);
    int n = ad_schedule_def_read(body, d, bad_add, &b);
    json_decref(body);
    assert_int_equal(n == 0, b.pointers[0] == '\0');
    return b.pointers;
}

static void test_definition_rules_and_pointers(void **state)
{
    (void)state;
    struct ad_sched_def d;
    assert_string_equal(problems("{\"every\": \"30s\"}", &d), "");
    assert_int_equal(d.every_ms, 30000);
    assert_string_equal(d.timezone, "UTC");
    assert_int_equal(d.overlap, AD_OVERLAP_SKIP);
    assert_int_equal(d.catchup_ms, 60000);
    ad_schedule_def_clear(&d);
    assert_string_equal(
        problems("{\"cron\": \"0 9 * * *\", \"timezone\": \"Europe/Berlin\", \"overlap\": \"cancelOther\","
                 " \"catchupWindow\": \"10m\", \"paused\": true, \"startAt\": \"2027-01-01T00:00:00Z\"}",
                 &d),
        "");
    assert_int_equal(d.overlap, AD_OVERLAP_CANCEL_OTHER);
    assert_int_equal(d.catchup_ms, 600000);
    assert_int_equal(d.paused, 1);
    assert_true(d.start_at > 0);
    ad_schedule_def_clear(&d);
    /* Neither rule: one problem, the whole body's. */
    json_t *none = json_object();
    assert_int_equal(ad_schedule_def_read(none, &d, NULL, NULL), 1);
    json_decref(none);
    ad_schedule_def_clear(&d);
    assert_string_equal(problems("{\"cron\": \"* * * * *\", \"every\": \"1m\"}", &d), "/every");
    ad_schedule_def_clear(&d);
    assert_string_equal(problems("{\"cron\": \"0 0 30 2 *\"}", &d), "/cron");
    ad_schedule_def_clear(&d);
    assert_string_equal(problems("{\"cron\": 5, \"timezone\": \"No/Such_Zone\", \"overlap\": \"never\"}", &d),
                        "/cron /timezone /overlap");
    ad_schedule_def_clear(&d);
    assert_string_equal(problems("{\"every\": \"500ms\", \"catchupWindow\": \"-1s\", \"paused\": \"no\"}", &d),
                        "/every /catchupWindow /paused");
    ad_schedule_def_clear(&d);
    assert_string_equal(problems("{\"every\": \"1m\", \"startAt\": \"2027-02-01T00:00:00Z\","
                                 " \"endAt\": \"2027-01-01T00:00:00Z\"}",
                                 &d),
                        "/endAt");
    ad_schedule_def_clear(&d);
}

static void test_next_fire_times(void **state)
{
    (void)state;
    struct ad_sched_def d = {.every_ms = 60000};
    /* every counts from its anchor: the fire time after `after`, never `after` itself. */
    assert_int_equal(ad_schedule_anchor(&d, T0 + 1234), T0 + 1000);
    assert_int_equal(ad_schedule_next(&d, T0, T0), T0 + 60000);
    assert_int_equal(ad_schedule_next(&d, T0, T0 + 59999), T0 + 60000);
    assert_int_equal(ad_schedule_next(&d, T0, T0 + 60000), T0 + 120000);
    assert_int_equal(ad_schedule_next(&d, T0, T0 - 5), T0);
    /* startAt is the first fire time; endAt the last possible one. */
    d.start_at = T0 + 3600000;
    assert_int_equal(ad_schedule_anchor(&d, T0), T0 + 3600000);
    assert_int_equal(ad_schedule_next(&d, d.start_at, T0), T0 + 3600000);
    d.end_at = T0 + 3660000;
    assert_int_equal(ad_schedule_next(&d, d.start_at, T0 + 3600000), T0 + 3660000);
    assert_int_equal(ad_schedule_next(&d, d.start_at, T0 + 3660000), 0);
    /* cron in a zone: 09:00 in Berlin is 08:00Z in winter, 07:00Z once summer time starts (28 March 2027). */
    struct ad_sched_def c = {.cron = "0 9 * * *", .timezone = "Europe/Berlin"};
    int64_t mar27 = INT64_C(1806105600000); /* 2027-03-27T00:00:00Z */
    assert_int_equal(ad_schedule_next(&c, 0, mar27), mar27 + 8 * 3600000);
    assert_int_equal(ad_schedule_next(&c, 0, mar27 + 8 * 3600000), mar27 + 86400000 + 7 * 3600000);
}

/* A schedule of tenant t1 stored with spec, next fire time next_at, made at created. */
static void store_schedule(struct fx *f, const char *id, const char *spec, int64_t next_at, int64_t created)
{
    struct ad_schedule s = {.tenant = "t1",
                            .id = (char *)id,
                            .spec = (char *)spec,
                            .tmpl = "{\"type\":\"a\",\"payload\":{},\"priority\":1,\"maxAttempts\":3}",
                            .next_at = next_at,
                            .recent = "[]",
                            .created_at = created,
                            .updated_at = created,
                            .version = 1};
    assert_int_equal(f->s->ops->begin(f->c), AD_E_OK);
    assert_int_equal(f->s->ops->schedule_put(f->c, &s, 1, 0), AD_E_OK);
    assert_int_equal(f->s->ops->commit(f->c), AD_E_OK);
}

/* An op that runs fire_due on schedule id as read in its transaction, at now. */
struct fire_op {
    struct ad_op op;
    const char *id;
    int64_t now;
    int64_t expect; /* the next fire time it claims to have read; 0: the one it reads */
    struct ad_op **nested;
    size_t nnested;
};

static ad_err fire_apply(struct ad_op *op, struct ad_conn *c)
{
    struct fire_op *x = (struct fire_op *)op;
    struct ad_schedule s;
    ad_err e = st->schedule_get(c, "t1", x->id, &s);
    if (e != AD_E_OK)
        return e;
    if (x->expect != 0)
        s.next_at = x->expect;
    struct nested ns = {&x->nested, &x->nnested};
    e = fire_due(op, c, &s, x->now, &ns);
    ad_schedule_clear(&s);
    return e;
}

static void fire_destroy(struct ad_op *op)
{
    struct fire_op *x = (struct fire_op *)op;
    nested_free(x->nested, x->nnested);
}

static ad_err fire(struct fx *f, const char *id, int64_t now, int64_t expect)
{
    st = f->s->ops;
    struct fire_op x = {.op = {.apply = fire_apply, .destroy = fire_destroy}, .id = id, .now = now, .expect = expect};
    ad_err e = core_fx_apply(f, &x.op);
    /* The jobs stay in the nested ops (no writer takes them): freed with them. */
    free(x.op.more);
    fire_destroy(&x.op);
    return e;
}

static struct ad_schedule get(struct fx *f, const char *id)
{
    struct ad_schedule s;
    assert_int_equal(f->s->ops->schedule_get(f->c, "t1", id, &s), AD_E_OK);
    return s;
}

static size_t runs(const struct ad_schedule *s)
{
    json_t *a = json_loads(s->recent, 0, NULL);
    size_t n = json_array_size(a);
    json_decref(a);
    return n;
}

static void test_missed_fire_times_run_within_the_window_and_older_ones_are_counted(void **state)
{
    struct fx *f = *state;
    engine_started = T0 + 3600000; /* every fire time below was missed while the node was down */
    /* Every second since T0, a window of 10 s, now an hour later: 3590 skipped, the last 10 and now run. */
    store_schedule(f, "catch", "{\"every\":\"1s\",\"overlap\":\"allow\",\"catchupWindow\":\"10s\"}", T0, T0 - 1000);
    int64_t now = T0 + 3600000;
    assert_int_equal(fire(f, "catch", now, 0), AD_E_OK);
    struct ad_schedule s = get(f, "catch");
    assert_int_equal(s.skips, 3590);
    assert_int_equal(s.fires, 11);
    assert_int_equal(s.catchups, 10); /* now itself is not late */
    assert_int_equal(s.next_at, now + 1000);
    assert_int_equal(runs(&s), 10);
    assert_int_equal(s.version, 2);
    ad_schedule_clear(&s);
    /* The same fire again, from a stale read of the next fire time: the compare-and-set refuses it, nothing stays. */
    assert_int_not_equal(fire(f, "catch", now, T0), AD_E_OK);
    s = get(f, "catch");
    assert_int_equal(s.fires, 11);
    assert_int_equal(s.next_at, now + 1000);
    ad_schedule_clear(&s);
    struct ad_list_query q = {.tenant = "t1", .limit = 100};
    struct ad_job_list l;
    assert_int_equal(f->s->ops->job_list(f->c, &q, &l), AD_E_OK);
    assert_int_equal(l.n, 11);
    for (size_t i = 0; i < l.n; i++)
        assert_non_null(strstr(l.items[i]->schedule, "\"id\":\"catch\""));
    ad_job_list_free(&l);
}

static void test_overlap_policies_and_pause(void **state)
{
    struct fx *f = *state;
    engine_started = 0;
    /* skip: one job, then skips while it is queued. */
    store_schedule(f, "skip", "{\"every\":\"1s\"}", T0, T0 - 1000);
    assert_int_equal(fire(f, "skip", T0 + 2000, 0), AD_E_OK);
    struct ad_schedule s = get(f, "skip");
    assert_int_equal(s.fires, 1);
    assert_int_equal(s.skips, 2);
    ad_schedule_clear(&s);
    /* cancelOther: the previous job is cancelled by each next run. */
    store_schedule(f, "cancel", "{\"every\":\"1s\",\"overlap\":\"cancelOther\"}", T0, T0 - 1000);
    assert_int_equal(fire(f, "cancel", T0 + 2000, 0), AD_E_OK);
    s = get(f, "cancel");
    assert_int_equal(s.fires, 3);
    struct ad_job *last;
    assert_int_equal(f->s->ops->job_get(f->c, "t1", s.last_job, &last), AD_E_OK);
    assert_int_equal(last->status, AD_QUEUED);
    ad_job_free(last);
    ad_schedule_clear(&s);
    struct ad_list_query q = {.tenant = "t1", .has_status = 1, .status = AD_CANCELLED, .limit = 100};
    struct ad_job_list l;
    assert_int_equal(f->s->ops->job_list(f->c, &q, &l), AD_E_OK);
    assert_int_equal(l.n, 2);
    ad_job_list_free(&l);
    /* paused: a due fire time of a paused schedule makes nothing and leaves it without a next one. */
    store_schedule(f, "paused", "{\"every\":\"1s\",\"paused\":true}", T0, T0 - 1000);
    assert_int_equal(fire(f, "paused", T0 + 2000, 0), AD_E_OK);
    s = get(f, "paused");
    assert_int_equal(s.fires, 0);
    assert_int_equal(s.next_at, 0);
    ad_schedule_clear(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_definition_rules_and_pointers),
        cmocka_unit_test(test_next_fire_times),
        cmocka_unit_test_setup_teardown(test_missed_fire_times_run_within_the_window_and_older_ones_are_counted, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_overlap_policies_and_pause, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
