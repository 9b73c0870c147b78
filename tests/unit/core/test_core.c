/*
 * test_core.c - unit tests for src/core.c: retry backoff, retention lookup, request fingerprints, and every
 * operation applied directly to a real SQLite store in a throwaway directory (no writer thread: each test opens
 * a connection and runs begin, op->apply, commit itself).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/core.h"
#include "core_test.h"

#define SEC INT64_C(1000)
#define HOUR (3600 * SEC)
#define DAY (86400 * SEC)
#define T0 INT64_C(1800000000000)

static int setup(void **state)
{
    return core_fx_open(state, "core", NULL);
}

/* Replace the configuration with defaults + yaml and hand it to the core. */
static void load_config(struct fx *f, const char *yaml)
{
    ad_config_free(&f->cfg);
    ad_config_defaults(&f->cfg);
    char err[256] = "";
    if (ad_config_load_string(&f->cfg, yaml, strlen(yaml), err, sizeof(err)) != 0)
        fail_msg("config: %s", err);
    ad_core_init(&f->cfg, f->s);
}

/* The stored row (any tenant); NULL when absent. Caller frees. */
static struct ad_job *stored(struct fx *f, const char *id)
{
    struct ad_job *j = NULL;
    ad_err e = f->s->ops->job_get(f->c, NULL, id, &j);
    if (e != AD_E_OK && e != AD_E_NOT_FOUND)
        fail_msg("job_get %s: %s", id, ad_err_code(e));
    return j;
}

static struct ad_job *new_job(const char *tenant, const char *type, int max_attempts)
{
    struct ad_job *j = ad_job_new();
    j->id = ad_new_id("job_");
    ad_job_set(&j->tenant, tenant);
    ad_job_set(&j->type, type);
    ad_job_set(&j->payload, "{\"src\":\"a\"}");
    j->max_attempts = max_attempts;
    j->created_at = j->updated_at = T0;
    return j;
}

/* Submit a fresh job; returns its id (caller frees). */
static char *submit(struct fx *f, const char *tenant, int max_attempts, enum ad_priority prio)
{
    struct ad_submit_op *s = ad_submit_op_new();
    s->job = new_job(tenant, "video", max_attempts);
    s->job->priority = prio;
    assert_int_equal(core_fx_apply(f, &s->op), AD_E_OK);
    assert_int_equal(s->replayed, 0);
    char *id = ad_strdup(s->job->id);
    ad_op_free(&s->op);
    return id;
}

static struct ad_lease_op *lease_op(const char *tenant, const char *type, int max, int lease_seconds, int64_t now)
{
    struct ad_lease_op *x = ad_lease_op_new();
    x->tenant = ad_strdup(tenant);
    x->types = ad_calloc(1, sizeof(char *));
    x->types[0] = ad_strdup(type);
    x->ntypes = 1;
    x->max = max;
    x->lease_ms = (int64_t)lease_seconds * 1000;
    x->worker = ad_strdup("w1");
    x->now = now;
    return x;
}

/* Lease one job of tenant t1 at now; returns its lease id (caller frees) and checks it was job id. */
static char *lease_one(struct fx *f, const char *id, int64_t now)
{
    struct ad_lease_op *x = lease_op("t1", "video", 1, 30, now);
    assert_int_equal(core_fx_apply(f, &x->op), AD_E_OK);
    assert_int_equal(x->leased.n, 1);
    assert_string_equal(x->leased.items[0]->id, id);
    char *lid = ad_strdup(x->leased.items[0]->lease_id);
    ad_op_free(&x->op);
    return lid;
}

static struct ad_report_op *report_op(enum ad_job_event ev, const char *id, const char *lease_id, int64_t now)
{
    struct ad_report_op *x = ad_report_op_new();
    x->event = ev;
    x->tenant = ad_strdup("t1");
    x->id = ad_strdup(id);
    x->lease_id = lease_id != NULL ? ad_strdup(lease_id) : NULL;
    x->now = now;
    return x;
}

/* ---- backoff, retention, fingerprint ---- */

static int64_t uncapped(int64_t base, int attempt)
{
    int64_t d = base;
    for (int i = 1; i < attempt && d < 3600 * SEC; i++)
        d *= 2;
    return d < 3600 * SEC ? d : 3600 * SEC;
}

static void test_backoff_within_jitter_bounds(void **state)
{
    struct fx *f = *state;
    f->cfg.retry_backoff_ms = 2000; /* read from the config, not a built-in 1 s */
    for (int attempt = 1; attempt <= 30; attempt++) {
        int64_t d = uncapped(2000, attempt);
        for (int k = 0; k < 200; k++) {
            int64_t b = ad_core_backoff_ms(attempt);
            if (b < d / 2 || b > d)
                fail_msg("attempt %d: backoff %lld outside [%lld, %lld]", attempt, (long long)b, (long long)(d / 2),
                         (long long)d);
        }
    }
    /* attempt 0 (never ran) waits like the first. */
    for (int k = 0; k < 50; k++)
        assert_in_range(ad_core_backoff_ms(0), 1000, 2000);
}

static void test_backoff_grows_then_caps(void **state)
{
    struct fx *f = *state;
    f->cfg.retry_backoff_ms = 1000;
    int64_t prev_max = 0;
    for (int attempt = 1; attempt <= 12; attempt++) {
        int64_t lo = INT64_MAX, hi = 0;
        for (int k = 0; k < 100; k++) {
            int64_t b = ad_core_backoff_ms(attempt);
            lo = b < lo ? b : lo;
            hi = b > hi ? b : hi;
        }
        /* Equal jitter: the shortest wait of attempt n+1 is at least the longest of attempt n. */
        if (lo < prev_max)
            fail_msg("attempt %d: min %lld below the previous attempt's max %lld", attempt, (long long)lo,
                     (long long)prev_max);
        if (uncapped(1000, attempt) < 3600 * SEC && attempt > 1 && hi <= prev_max)
            fail_msg("attempt %d did not grow", attempt);
        prev_max = hi;
    }
    /* Capped at one hour, however many attempts, and without overflow for huge attempt numbers. */
    const int big[] = {13, 20, 21, 22, 40, 63, 64, 100, 1000000};
    for (size_t i = 0; i < sizeof(big) / sizeof(big[0]); i++)
        for (int k = 0; k < 50; k++)
            assert_in_range(ad_core_backoff_ms(big[i]), 1800 * SEC, 3600 * SEC);
    /* A base beyond the cap is capped too, also when just above it. */
    f->cfg.retry_backoff_ms = 3650 * SEC;
    for (int k = 0; k < 200; k++)
        assert_in_range(ad_core_backoff_ms(1), 1800 * SEC, 3600 * SEC);
    f->cfg.retry_backoff_ms = 2 * HOUR;
    for (int k = 0; k < 50; k++)
        assert_in_range(ad_core_backoff_ms(1), 1800 * SEC, 3600 * SEC);
    f->cfg.retry_backoff_ms = 30 * DAY;
    for (int k = 0; k < 50; k++)
        assert_in_range(ad_core_backoff_ms(25), 1800 * SEC, 3600 * SEC);
}

static void test_backoff_is_jittered(void **state)
{
    struct fx *f = *state;
    f->cfg.retry_backoff_ms = 1000;
    int64_t seen[100];
    size_t distinct = 0;
    for (int k = 0; k < 100; k++) {
        int64_t b = ad_core_backoff_ms(7); /* d = 64 s: 32001 possible values */
        int dup = 0;
        for (size_t i = 0; i < distinct && !dup; i++)
            dup = seen[i] == b;
        if (!dup)
            seen[distinct++] = b;
    }
    if (distinct < 50)
        fail_msg("only %zu distinct delays in 100 draws", distinct);
}

static const char retention_yaml[] =
    "types:\n"
    "  video.transcode: { retention: { succeeded: 1d, failed: 2d, cancelled: 3h, partialSuccess: 4m } }\n"
    "  report.build: { retention: { failed: 90d } }\n"
    "  noop:\n"
    "retention: { succeeded: 10d, failed: 20d, cancelled: 30d, partialSuccess: 40d }\n";

static void test_retention_per_type_and_status(void **state)
{
    struct fx *f = *state;
    /* Defaults: 30 days each. */
    assert_int_equal(ad_core_retention_ms("x", AD_SUCCEEDED), 30 * DAY);
    assert_int_equal(ad_core_retention_ms("x", AD_FAILED), 30 * DAY);
    assert_int_equal(ad_core_retention_ms("x", AD_CANCELLED), 30 * DAY);
    assert_int_equal(ad_core_retention_ms("x", AD_PARTIAL), 30 * DAY);

    load_config(f, retention_yaml);
    assert_int_equal(ad_core_retention_ms("video.transcode", AD_SUCCEEDED), 1 * DAY);
    assert_int_equal(ad_core_retention_ms("video.transcode", AD_FAILED), 2 * DAY);
    assert_int_equal(ad_core_retention_ms("video.transcode", AD_CANCELLED), 3 * HOUR);
    assert_int_equal(ad_core_retention_ms("video.transcode", AD_PARTIAL), 4 * 60 * SEC);
    /* A type that sets some: the rest from the global retention. */
    assert_int_equal(ad_core_retention_ms("report.build", AD_FAILED), 90 * DAY);
    assert_int_equal(ad_core_retention_ms("report.build", AD_SUCCEEDED), 10 * DAY);
    assert_int_equal(ad_core_retention_ms("report.build", AD_CANCELLED), 30 * DAY);
    assert_int_equal(ad_core_retention_ms("report.build", AD_PARTIAL), 40 * DAY);
    /* A type that sets none, and a type not configured: all global. */
    const char *types[] = {"noop", "unknown.type"};
    for (size_t i = 0; i < 2; i++) {
        assert_int_equal(ad_core_retention_ms(types[i], AD_SUCCEEDED), 10 * DAY);
        assert_int_equal(ad_core_retention_ms(types[i], AD_FAILED), 20 * DAY);
        assert_int_equal(ad_core_retention_ms(types[i], AD_CANCELLED), 30 * DAY);
        assert_int_equal(ad_core_retention_ms(types[i], AD_PARTIAL), 40 * DAY);
    }
}

/* What a submit leaves to the server: an id, the type's defaults (else the global maxAttempts), the times, and a
 * route's completion style and business resource with the new id in it. */
static void test_job_prepare_defaults(void **state)
{
    struct fx *f = *state;
    load_config(f, "maxAttempts: 7\n"
                   "types:\n"
                   "  video.transcode: { maxAttempts: 3, timeoutSeconds: 600 }\n");
    struct ad_job *j = ad_job_new();
    j->type = ad_strdup("video.transcode");
    struct ad_route route = {.type = "video.transcode", .resource = "/v1/videos/{id}/file", .on_complete_redirect = 1};
    ad_core_job_prepare(j, "t1", &route, 1234);
    assert_non_null(j->id);
    assert_int_equal(strncmp(j->id, "job_", 4), 0);
    assert_string_equal(j->tenant, "t1");
    assert_string_equal(j->payload, "{}");
    assert_int_equal(j->max_attempts, 3);
    assert_int_equal(j->timeout_seconds, 600);
    assert_int_equal(j->created_at, 1234);
    assert_int_equal(j->updated_at, 1234);
    assert_int_equal(j->on_complete_redirect, 1);
    char want[128];
    snprintf(want, sizeof(want), "/v1/videos/%s/file", j->id);
    assert_string_equal(j->resource, want);
    ad_job_free(j);

    /* An unconfigured type, by POST /v1/jobs, with its own options: those stay, the rest is the global default. */
    j = ad_job_new();
    j->type = ad_strdup("other");
    j->payload = ad_strdup("{\"a\":1}");
    j->timeout_seconds = 5;
    ad_core_job_prepare(j, "t2", NULL, 99);
    assert_string_equal(j->payload, "{\"a\":1}");
    assert_int_equal(j->max_attempts, 7);
    assert_int_equal(j->timeout_seconds, 5);
    assert_int_equal(j->on_complete_redirect, 0);
    assert_null(j->resource);
    ad_job_free(j);
}

static void test_fingerprint(void **state)
{
    (void)state;
    char a[65], b[65];
    memset(a, 'x', sizeof(a));
    ad_fingerprint("POST", "/v1/jobs", "{\"payload\":{},\"type\":\"a\"}", a);
    /* SHA-256 of "POST\0/v1/jobs\0{...}": records survive restarts, so the definition must not drift. */
    assert_string_equal(a, "0faaa2822bee30641f56b890180a1d3a22f745119df83bcfe174907e3bc60a7b");
    assert_int_equal(strlen(a), 64);
    for (int i = 0; i < 64; i++)
        assert_true((a[i] >= '0' && a[i] <= '9') || (a[i] >= 'a' && a[i] <= 'f'));
    ad_fingerprint("POST", "/v1/jobs", "{\"payload\":{},\"type\":\"a\"}", b);
    assert_string_equal(a, b);

    ad_fingerprint("PUT", "/v1/jobs", "{\"payload\":{},\"type\":\"a\"}", b);
    assert_string_not_equal(a, b);
    ad_fingerprint("POST", "/v1/videos", "{\"payload\":{},\"type\":\"a\"}", b);
    assert_string_not_equal(a, b);
    ad_fingerprint("POST", "/v1/jobs", "{\"payload\":{},\"type\":\"b\"}", b);
    assert_string_not_equal(a, b);
    /* The separators keep the parts apart: moving bytes between method, path and body changes it. */
    char c[65], d[65];
    ad_fingerprint("POST", "/v1/jobsX", "", c);
    ad_fingerprint("POST", "/v1/jobs", "X", d);
    assert_string_not_equal(c, d);
    ad_fingerprint("POST/", "v1", "", c);
    ad_fingerprint("POST", "/v1", "", d);
    assert_string_not_equal(c, d);
}

/* ---- submit ---- */

static void test_submit_inserts(void **state)
{
    struct fx *f = *state;
    char *id = submit(f, "t1", 3, AD_PRIO_HIGH);
    struct ad_job *j = stored(f, id);
    assert_non_null(j);
    assert_string_equal(j->tenant, "t1");
    assert_int_equal(j->status, AD_QUEUED);
    assert_int_equal(j->priority, AD_PRIO_HIGH);
    assert_int_equal(j->attempt, 0);
    assert_string_equal(j->payload, "{\"src\":\"a\"}");
    assert_true(j->seq > 0);
    ad_job_free(j);
    free(id);
}

static struct ad_submit_op *keyed_submit(const char *tenant, const char *key, const char *body)
{
    struct ad_submit_op *s = ad_submit_op_new();
    s->job = new_job(tenant, "video", 3);
    s->idem_key = ad_strdup(key);
    ad_fingerprint("POST", "/v1/jobs", body, s->fingerprint);
    return s;
}

static void test_submit_idempotency(void **state)
{
    struct fx *f = *state;
    struct ad_submit_op *s1 = keyed_submit("t1", "key-1", "{\"a\":1}");
    assert_int_equal(core_fx_apply(f, &s1->op), AD_E_OK);
    assert_int_equal(s1->replayed, 0);
    char *orig = ad_strdup(s1->job->id);
    ad_op_free(&s1->op);

    /* Same key and fingerprint: the original job, no second row. */
    struct ad_submit_op *s2 = keyed_submit("t1", "key-1", "{\"a\":1}");
    char *second = ad_strdup(s2->job->id);
    assert_int_equal(core_fx_apply(f, &s2->op), AD_E_OK);
    assert_int_equal(s2->replayed, 1);
    assert_string_equal(s2->job->id, orig);
    assert_int_equal(s2->job->status, AD_QUEUED);
    ad_op_free(&s2->op);
    assert_null(stored(f, second));
    free(second);

    /* Same key, different request: rejected, nothing stored. */
    struct ad_submit_op *s3 = keyed_submit("t1", "key-1", "{\"a\":2}");
    char *third = ad_strdup(s3->job->id);
    assert_int_equal(core_fx_apply(f, &s3->op), AD_E_IDEMPOTENCY_KEY_REUSED);
    assert_int_equal(s3->replayed, 0);
    ad_op_free(&s3->op);
    assert_null(stored(f, third));
    free(third);

    /* Keys are per tenant: the same key elsewhere is a new job. */
    struct ad_submit_op *s4 = keyed_submit("t2", "key-1", "{\"a\":2}");
    assert_int_equal(core_fx_apply(f, &s4->op), AD_E_OK);
    assert_int_equal(s4->replayed, 0);
    assert_string_not_equal(s4->job->id, orig);
    struct ad_job *j4 = stored(f, s4->job->id);
    assert_non_null(j4);
    assert_string_equal(j4->tenant, "t2");
    ad_job_free(j4);
    ad_op_free(&s4->op);

    /* The replay shows the job's current state, not the submitted one. */
    struct ad_cancel_op *x = ad_cancel_op_new();
    x->tenant = ad_strdup("t1");
    x->id = ad_strdup(orig);
    x->now = T0 + SEC;
    assert_int_equal(core_fx_apply(f, &x->op), AD_E_OK);
    ad_op_free(&x->op);
    struct ad_submit_op *s5 = keyed_submit("t1", "key-1", "{\"a\":1}");
    assert_int_equal(core_fx_apply(f, &s5->op), AD_E_OK);
    assert_int_equal(s5->replayed, 1);
    assert_string_equal(s5->job->id, orig);
    assert_int_equal(s5->job->status, AD_CANCELLED);
    ad_op_free(&s5->op);
    free(orig);
}

/* ---- unique keys ---- */

/* A submit of tenant t1 with uniqueKey key at now; debounce_s > 0 asks for debounceSeconds (runAt now + that). */
static struct ad_submit_op *unique_submit(const char *key, const char *payload, int64_t now, int debounce_s)
{
    struct ad_submit_op *s = ad_submit_op_new();
    s->job = new_job("t1", "video", 3);
    ad_job_set(&s->job->unique_key, key);
    ad_job_set(&s->job->payload, payload);
    s->job->created_at = s->job->updated_at = now;
    s->debounce = debounce_s > 0;
    s->job->run_at = debounce_s > 0 ? now + debounce_s * SEC : 0;
    return s;
}

/* The op's answer: deduplicated or not, and the job's id (caller frees); the op is freed. */
static char *unique_apply_ok(struct fx *f, struct ad_submit_op *s, int deduplicated)
{
    char *own = ad_strdup(s->job->id);
    assert_int_equal(core_fx_apply(f, &s->op), AD_E_OK);
    assert_int_equal(s->deduplicated, deduplicated);
    assert_int_equal(s->op.nchanged, 1);
    char *id = ad_strdup(s->job->id);
    if (deduplicated)
        assert_null(stored(f, own)); /* nothing of the new submit was stored */
    free(own);
    ad_op_free(&s->op);
    return id;
}

static void test_submit_unique_and_debounce(void **state)
{
    struct fx *f = *state;
    char *id = unique_apply_ok(f, unique_submit("k", "{\"v\":1}", T0, 0), 0);
    /* Without debounce: the live job as it is. */
    char *same = unique_apply_ok(f, unique_submit("k", "{\"v\":2}", T0 + SEC, 0), 1);
    assert_string_equal(same, id);
    free(same);
    struct ad_job *j = stored(f, id);
    assert_string_equal(j->payload, "{\"v\":1}");
    assert_int_equal(j->run_at, 0);
    int64_t seq = j->seq;
    ad_job_free(j);
    /* With debounce: the queued job takes the payload and the runAt, as a change (a new seq). */
    same = unique_apply_ok(f, unique_submit("k", "{\"v\":3}", T0 + 2 * SEC, 60), 1);
    assert_string_equal(same, id);
    free(same);
    j = stored(f, id);
    assert_string_equal(j->payload, "{\"v\":3}");
    assert_int_equal(j->run_at, T0 + 62 * SEC);
    assert_int_equal(j->updated_at, T0 + 2 * SEC);
    assert_true(j->seq > seq);
    ad_job_free(j);
    /* Another key: a new job. */
    char *other = unique_apply_ok(f, unique_submit("k2", "{}", T0 + 3 * SEC, 0), 0);
    assert_string_not_equal(other, id);
    free(other);
    /* Running: answered unchanged, debounce or not. */
    char *lid = lease_one(f, id, T0 + 70 * SEC);
    j = stored(f, id);
    seq = j->seq;
    ad_job_free(j);
    same = unique_apply_ok(f, unique_submit("k", "{\"v\":4}", T0 + 71 * SEC, 60), 1);
    assert_string_equal(same, id);
    free(same);
    j = stored(f, id);
    assert_int_equal(j->status, AD_RUNNING);
    assert_string_equal(j->payload, "{\"v\":3}");
    assert_int_equal(j->seq, seq);
    ad_job_free(j);
    /* Ended: the key is free. */
    struct ad_report_op *r = report_op(AD_EV_COMPLETE, id, lid, T0 + 72 * SEC);
    assert_int_equal(core_fx_apply(f, &r->op), AD_E_OK);
    ad_op_free(&r->op);
    char *next = unique_apply_ok(f, unique_submit("k", "{\"v\":5}", T0 + 73 * SEC, 0), 0);
    assert_string_not_equal(next, id);
    free(next);
    free(lid);
    free(id);
}

/* Two items of one key in one batch: the later answers the earlier's job, in the same transaction. */
static void test_batch_unique_key_twice(void **state)
{
    struct fx *f = *state;
    struct ad_batch_op *b = ad_batch_op_new(2);
    b->items[0] = unique_submit("bk", "{\"v\":1}", T0, 0);
    b->items[1] = unique_submit("bk", "{\"v\":2}", T0, 30);
    char *second = ad_strdup(b->items[1]->job->id);
    assert_int_equal(core_fx_apply(f, &b->op), AD_E_OK);
    assert_int_equal(b->items[0]->deduplicated, 0);
    assert_int_equal(b->items[1]->deduplicated, 1);
    assert_string_equal(b->items[1]->job->id, b->items[0]->job->id);
    struct ad_job *j = stored(f, b->items[0]->job->id);
    assert_string_equal(j->payload, "{\"v\":2}");
    assert_int_equal(j->run_at, T0 + 30 * SEC);
    ad_job_free(j);
    assert_null(stored(f, second));
    free(second);
    ad_op_free(&b->op);
}

/* ---- batch ---- */

/* Three jobs in one op: a new one, a key reused with another request (refused alone), and the first one's key
 * again (a replay of it, inside the same transaction); the jobs are the batch's changes in item order. */
static void test_batch_items_answer_alone(void **state)
{
    struct fx *f = *state;
    struct ad_submit_op *old = keyed_submit("t1", "old", "{\"a\":1}");
    assert_int_equal(core_fx_apply(f, &old->op), AD_E_OK);
    ad_op_free(&old->op);

    struct ad_batch_op *b = ad_batch_op_new(4);
    b->items[0] = keyed_submit("t1", "k1", "{\"a\":1}");
    b->items[1] = keyed_submit("t1", "old", "{\"a\":2}");
    b->items[2] = keyed_submit("t1", "k1", "{\"a\":1}");
    /* items[3] stays NULL: an item the caller answers itself */
    char *refused = ad_strdup(b->items[1]->job->id);
    assert_int_equal(core_fx_apply(f, &b->op), AD_E_OK);
    assert_int_equal(b->items[0]->op.err, AD_E_OK);
    assert_int_equal(b->items[0]->replayed, 0);
    assert_int_equal(b->items[1]->op.err, AD_E_IDEMPOTENCY_KEY_REUSED);
    assert_int_equal(b->items[2]->op.err, AD_E_OK);
    assert_int_equal(b->items[2]->replayed, 1);
    assert_string_equal(b->items[2]->job->id, b->items[0]->job->id);
    assert_int_equal(b->change[0], 0);
    assert_int_equal(b->change[1], -1);
    assert_int_equal(b->change[2], 1);
    assert_int_equal(b->change[3], -1);
    assert_int_equal(b->op.nchanged, 2);
    assert_ptr_equal(ad_op_change_at(&b->op, 1)->job, &b->items[2]->job);
    struct ad_job *j = stored(f, b->items[0]->job->id);
    assert_non_null(j);
    ad_job_free(j);
    assert_null(stored(f, refused));
    free(refused);
    ad_op_free(&b->op);
}

/* ---- cancel ---- */

static struct ad_cancel_op *cancel_op(const char *tenant, const char *id, const char *lease_id, int64_t now)
{
    struct ad_cancel_op *x = ad_cancel_op_new();
    x->tenant = ad_strdup(tenant);
    x->id = ad_strdup(id);
    x->lease_id = lease_id != NULL ? ad_strdup(lease_id) : NULL;
    x->now = now;
    return x;
}

static void test_cancel_queued(void **state)
{
    struct fx *f = *state;
    char *id = submit(f, "t1", 3, AD_PRIO_NORMAL);
    int64_t now = T0 + 5 * SEC;
    struct ad_cancel_op *x = cancel_op("t1", id, NULL, now);
    assert_int_equal(core_fx_apply(f, &x->op), AD_E_OK);
    assert_int_equal(x->job->status, AD_CANCELLED);
    ad_op_free(&x->op);

    struct ad_job *j = stored(f, id);
    assert_int_equal(j->status, AD_CANCELLED);
    assert_int_equal(j->finished_at, now);
    assert_int_equal(j->expires_at, now + 30 * DAY);
    assert_int_equal(j->updated_at, now);
    assert_int_equal(j->cancel_requested, 0);
    assert_null(j->lease_id);
    ad_job_free(j);

    /* Terminal: illegal, row unchanged. */
    struct ad_job *before = stored(f, id);
    x = cancel_op("t1", id, NULL, now + SEC);
    assert_int_equal(core_fx_apply(f, &x->op), AD_E_ILLEGAL_TRANSITION);
    ad_op_free(&x->op);
    struct ad_job *after = stored(f, id);
    assert_int_equal(after->seq, before->seq);
    assert_int_equal(after->updated_at, now);
    ad_job_free(before);
    ad_job_free(after);

    /* Another tenant's job, or no job: not found. */
    x = cancel_op("t2", id, NULL, now);
    assert_int_equal(core_fx_apply(f, &x->op), AD_E_NOT_FOUND);
    ad_op_free(&x->op);
    x = cancel_op("t1", "job_nope", NULL, now);
    assert_int_equal(core_fx_apply(f, &x->op), AD_E_NOT_FOUND);
    ad_op_free(&x->op);

    /* After expiresAt the job is gone for every operation. */
    x = cancel_op("t1", id, NULL, now + 30 * DAY);
    assert_int_equal(core_fx_apply(f, &x->op), AD_E_GONE);
    ad_op_free(&x->op);
    free(id);
}

static void test_cancel_running_then_ack(void **state)
{
    struct fx *f = *state;
    char *id = submit(f, "t1", 3, AD_PRIO_NORMAL);
    char *lid = lease_one(f, id, T0 + SEC);

    struct ad_cancel_op *x = cancel_op("t1", id, NULL, T0 + 2 * SEC);
    assert_int_equal(core_fx_apply(f, &x->op), AD_E_OK);
    assert_int_equal(x->job->status, AD_RUNNING);
    assert_int_equal(x->job->cancel_requested, 1);
    ad_op_free(&x->op);
    struct ad_job *j = stored(f, id);
    assert_int_equal(j->status, AD_RUNNING);
    assert_int_equal(j->cancel_requested, 1);
    assert_int_equal(j->finished_at, 0);
    assert_string_equal(j->lease_id, lid); /* the worker keeps its lease until it acknowledges */
    ad_job_free(j);

    /* The worker acknowledges with a wrong lease: stale. */
    x = cancel_op("t1", id, "lse_wrong", T0 + 3 * SEC);
    assert_int_equal(core_fx_apply(f, &x->op), AD_E_STALE_LEASE);
    ad_op_free(&x->op);

    x = cancel_op("t1", id, lid, T0 + 3 * SEC);
    assert_int_equal(core_fx_apply(f, &x->op), AD_E_OK);
    ad_op_free(&x->op);
    j = stored(f, id);
    assert_int_equal(j->status, AD_CANCELLED);
    assert_int_equal(j->finished_at, T0 + 3 * SEC);
    assert_int_equal(j->expires_at, T0 + 3 * SEC + 30 * DAY);
    assert_string_equal(j->lease_id, lid); /* kept but no longer live */
    assert_int_equal(j->lease_expires_at, 0);
    ad_job_free(j);

    /* The same acknowledgement again (its answer was lost): answered again, nothing changes. */
    x = cancel_op("t1", id, lid, T0 + 4 * SEC);
    assert_int_equal(core_fx_apply(f, &x->op), AD_E_OK);
    assert_int_equal(x->job->finished_at, T0 + 3 * SEC);
    ad_op_free(&x->op);
    free(lid);
    free(id);
}

/* ---- lease ---- */

static void test_lease(void **state)
{
    struct fx *f = *state;
    char *low = submit(f, "t1", 3, AD_PRIO_LOW);
    char *high = submit(f, "t1", 3, AD_PRIO_HIGH);
    char *other = submit(f, "t2", 3, AD_PRIO_HIGH);

    int64_t now = T0 + 10 * SEC;
    struct ad_lease_op *x = lease_op("t1", "video", 1, 30, now);
    assert_int_equal(core_fx_apply(f, &x->op), AD_E_OK);
    assert_int_equal(x->leased.n, 1);
    struct ad_job *j = x->leased.items[0];
    assert_string_equal(j->id, high); /* highest priority first */
    assert_int_equal(j->status, AD_RUNNING);
    assert_int_equal(j->attempt, 1);
    assert_int_equal(j->started_at, now);
    assert_int_equal(j->updated_at, now);
    assert_non_null(j->lease_id);
    assert_int_equal(strncmp(j->lease_id, "lse_", 4), 0);
    assert_int_equal(strlen(j->lease_id), 4 + AD_ID_CHARS);
    assert_int_equal(j->lease_expires_at, now + 30 * SEC);
    assert_string_equal(j->worker, "w1");
    char *lid = ad_strdup(j->lease_id);
    ad_op_free(&x->op);

    struct ad_job *s = stored(f, high);
    assert_int_equal(s->status, AD_RUNNING);
    assert_int_equal(s->attempt, 1);
    assert_string_equal(s->lease_id, lid);
    assert_int_equal(s->lease_expires_at, now + 30 * SEC);
    assert_int_equal(s->started_at, now);
    ad_job_free(s);

    /* Next: the low one; then nothing (t2's job is not ours, the running one is not queued). */
    x = lease_op("t1", "video", 10, 60, now);
    assert_int_equal(core_fx_apply(f, &x->op), AD_E_OK);
    assert_int_equal(x->leased.n, 1);
    assert_string_equal(x->leased.items[0]->id, low);
    assert_string_not_equal(x->leased.items[0]->lease_id, lid); /* every lease id is fresh */
    ad_op_free(&x->op);
    x = lease_op("t1", "video", 10, 60, now);
    assert_int_equal(core_fx_apply(f, &x->op), AD_E_OK);
    assert_int_equal(x->leased.n, 0);
    ad_op_free(&x->op);
    /* Other types: nothing. */
    x = lease_op("t2", "image", 10, 60, now);
    assert_int_equal(core_fx_apply(f, &x->op), AD_E_OK);
    assert_int_equal(x->leased.n, 0);
    ad_op_free(&x->op);
    free(lid);
    free(low);
    free(high);
    free(other);
}

static void test_lease_respects_run_at(void **state)
{
    struct fx *f = *state;
    struct ad_submit_op *s = ad_submit_op_new();
    s->job = new_job("t1", "video", 3);
    s->job->run_at = T0 + HOUR;
    assert_int_equal(core_fx_apply(f, &s->op), AD_E_OK);
    char *id = ad_strdup(s->job->id);
    ad_op_free(&s->op);

    struct ad_lease_op *x = lease_op("t1", "video", 1, 30, T0 + HOUR - 1);
    assert_int_equal(core_fx_apply(f, &x->op), AD_E_OK);
    assert_int_equal(x->leased.n, 0);
    ad_op_free(&x->op);
    char *lid = lease_one(f, id, T0 + HOUR);
    free(lid);
    free(id);
}

/* ---- reports ---- */

static void test_report_stale_lease_changes_nothing(void **state)
{
    struct fx *f = *state;
    char *id = submit(f, "t1", 3, AD_PRIO_NORMAL);
    char *lid = lease_one(f, id, T0);
    struct ad_job *before = stored(f, id);

    const enum ad_job_event evs[] = {AD_EV_HEARTBEAT, AD_EV_COMPLETE, AD_EV_COMPLETE_PARTIAL, AD_EV_FAIL,
                                     AD_EV_FAIL_FINAL};
    for (size_t i = 0; i < sizeof(evs) / sizeof(evs[0]); i++) {
        /* A wrong id, a missing one, and the right one after it ran out. */
        const char *leases[] = {"lse_AAAAAAAAAAAAAAAAAAAAAA", NULL, lid};
        const int64_t whens[] = {T0 + SEC, T0 + SEC, T0 + 30 * SEC};
        for (size_t k = 0; k < 3; k++) {
            struct ad_report_op *x = report_op(evs[i], id, leases[k], whens[k]);
            x->progress = 99;
            x->message = ad_strdup("hi");
            x->result = ad_strdup("{}");
            x->error = ad_strdup("{\"status\":500}");
            ad_err e = core_fx_apply(f, &x->op);
            if (e != AD_E_STALE_LEASE)
                fail_msg("event %zu lease %zu: %s, want stale-lease", i, k, ad_err_code(e));
            ad_op_free(&x->op);
        }
    }
    struct ad_job *after = stored(f, id);
    assert_int_equal(after->seq, before->seq);
    assert_int_equal(after->status, AD_RUNNING);
    assert_int_equal(after->progress, before->progress);
    assert_null(after->message);
    assert_null(after->result);
    assert_null(after->error);
    assert_int_equal(after->updated_at, before->updated_at);
    assert_int_equal(after->lease_expires_at, before->lease_expires_at);
    ad_job_free(before);
    ad_job_free(after);
    free(lid);
    free(id);
}

static void test_report_heartbeat(void **state)
{
    struct fx *f = *state;
    char *id = submit(f, "t1", 3, AD_PRIO_NORMAL);
    char *lid = lease_one(f, id, T0);
    struct ad_report_op *x = report_op(AD_EV_HEARTBEAT, id, lid, T0 + 10 * SEC);
    x->progress = 42;
    x->message = ad_strdup("transcoding");
    x->lease_ms = 120000;
    assert_int_equal(core_fx_apply(f, &x->op), AD_E_OK);
    ad_op_free(&x->op);
    struct ad_job *j = stored(f, id);
    assert_int_equal(j->status, AD_RUNNING);
    assert_int_equal(j->progress, 42);
    assert_string_equal(j->message, "transcoding");
    assert_int_equal(j->lease_expires_at, T0 + 130 * SEC);
    assert_int_equal(j->updated_at, T0 + 10 * SEC);
    assert_string_equal(j->lease_id, lid);
    ad_job_free(j);

    /* Progress -1 and lease_ms 0 leave both as they were. */
    x = report_op(AD_EV_HEARTBEAT, id, lid, T0 + 20 * SEC);
    assert_int_equal(core_fx_apply(f, &x->op), AD_E_OK);
    ad_op_free(&x->op);
    j = stored(f, id);
    assert_int_equal(j->progress, 42);
    assert_int_equal(j->lease_expires_at, T0 + 130 * SEC);
    assert_int_equal(j->updated_at, T0 + 20 * SEC);
    ad_job_free(j);
    free(lid);
    free(id);
}

static void test_report_complete(void **state)
{
    struct fx *f = *state;
    char *id = submit(f, "t1", 3, AD_PRIO_NORMAL);
    char *lid = lease_one(f, id, T0);
    int64_t now = T0 + 7 * SEC;
    struct ad_report_op *x = report_op(AD_EV_COMPLETE, id, lid, now);
    x->result = ad_strdup("{\"url\":\"https://out\"}");
    assert_int_equal(core_fx_apply(f, &x->op), AD_E_OK);
    assert_int_equal(x->job->status, AD_SUCCEEDED);
    ad_op_free(&x->op);
    struct ad_job *j = stored(f, id);
    assert_int_equal(j->status, AD_SUCCEEDED);
    assert_string_equal(j->result, "{\"url\":\"https://out\"}");
    assert_int_equal(j->progress, 100);
    assert_int_equal(j->finished_at, now);
    assert_int_equal(j->expires_at, now + 30 * DAY);
    assert_string_equal(j->lease_id, lid); /* kept but no longer live */
    /* The event log holds nothing: the first event (queued, under the seq of the insert), the running event of its
     * lease (under the lease's seq) and done are made from the job itself. */
    struct ad_event_list events;
    assert_int_equal(f->s->ops->events_after(f->c, id, 0, 10, &events), AD_E_OK);
    assert_int_equal(events.n, 0);
    ad_event_list_free(&events);
    assert_true(j->created_seq > 0 && j->created_seq < j->started_seq && j->started_seq < j->seq);
    /* The completed attempt is not stored either: it is the job's own, ended at finishedAt. */
    struct ad_attempt_list a;
    assert_int_equal(f->s->ops->attempt_list(f->c, id, &a), AD_E_OK);
    assert_int_equal(a.n, 0);
    ad_attempt_own(&a, j);
    ad_attempt_own(&a, j); /* already there: not twice */
    assert_int_equal(a.n, 1);
    assert_int_equal(a.items[0].attempt, 1);
    assert_int_equal(a.items[0].started_at, T0);
    assert_int_equal(a.items[0].ended_at, now);
    assert_string_equal(a.items[0].outcome, "succeeded");
    assert_string_equal(a.items[0].worker, j->worker);
    ad_attempt_list_free(&a);
    ad_job_free(j);

    /* The same report again (its answer was lost): answered with the job, which does not change. */
    x = report_op(AD_EV_COMPLETE, id, lid, now + 1);
    x->result = ad_strdup("{\"url\":\"https://out\"}");
    assert_int_equal(core_fx_apply(f, &x->op), AD_E_OK);
    assert_int_equal(x->replayed, 1);
    assert_int_equal(x->job->finished_at, now);
    ad_op_free(&x->op);
    /* The same document written otherwise is the same report; another result, or none, is not: the first stands. */
    const char *results[] = {"{ \"url\" : \"https://out\" }", "{\"url\":\"https://other\"}", NULL};
    for (size_t i = 0; i < 3; i++) {
        x = report_op(AD_EV_COMPLETE, id, lid, now + 1);
        x->result = ad_strdup_opt(results[i]);
        assert_int_equal(core_fx_apply(f, &x->op), i == 0 ? AD_E_OK : AD_E_STALE_LEASE);
        assert_int_equal(x->conflict, i == 0 ? 0 : 1);
        ad_op_free(&x->op);
    }
    j = stored(f, id);
    assert_string_equal(j->result, "{\"url\":\"https://out\"}");
    ad_job_free(j);
    /* Anything else under the ended lease is stale. */
    x = report_op(AD_EV_HEARTBEAT, id, lid, now + 2);
    assert_int_equal(core_fx_apply(f, &x->op), AD_E_STALE_LEASE);
    ad_op_free(&x->op);
    x = report_op(AD_EV_FAIL, id, lid, now + 3);
    assert_int_equal(core_fx_apply(f, &x->op), AD_E_STALE_LEASE);
    ad_op_free(&x->op);
    free(lid);
    free(id);
}

/* A report with next leases in its own transaction, and only once the report succeeded: a refused report
 * writes nothing at all, so it costs its batch nothing (writer.h). */
static void test_report_with_next(void **state)
{
    struct fx *f = *state;
    char *a = submit(f, "t1", 3, AD_PRIO_NORMAL);
    char *lid = lease_one(f, a, T0);
    char *b = submit(f, "t1", 3, AD_PRIO_LOW);
    char *c = submit(f, "t1", 3, AD_PRIO_HIGH);

    /* Refused (a stale lease, a missing job): nothing is written, nothing leased. */
    const char *ids[] = {a, "job_AAAAAAAAAAAAAAAAAAAAAA"};
    const ad_err want[] = {AD_E_STALE_LEASE, AD_E_NOT_FOUND};
    for (size_t i = 0; i < 2; i++) {
        struct ad_report_op *x = report_op(AD_EV_COMPLETE, ids[i], "lse_AAAAAAAAAAAAAAAAAAAAAA", T0 + SEC);
        x->next = lease_op("t1", "video", 2, 60, T0 + SEC);
        assert_int_equal(f->s->ops->begin(f->c), AD_E_OK);
        int64_t before = f->s->ops->changes(f->c);
        assert_int_equal(x->op.apply(&x->op, f->c), want[i]);
        assert_int_equal(f->s->ops->changes(f->c), before);
        f->s->ops->rollback(f->c);
        assert_int_equal(x->next->leased.n, 0);
        ad_op_free(&x->op);
    }

    /* Accepted: a is done, then c and b are leased, highest priority first, under live leases. */
    struct ad_report_op *x = report_op(AD_EV_COMPLETE, a, lid, T0 + 2 * SEC);
    x->next = lease_op("t1", "video", 2, 60, T0 + 2 * SEC);
    assert_int_equal(core_fx_apply(f, &x->op), AD_E_OK);
    assert_int_equal(x->job->status, AD_SUCCEEDED);
    assert_int_equal(x->next->leased.n, 2);
    const char *order[] = {c, b};
    for (size_t i = 0; i < 2; i++) {
        const struct ad_job *l = x->next->leased.items[i];
        assert_string_equal(l->id, order[i]);
        struct ad_job *j = stored(f, l->id);
        assert_int_equal(j->status, AD_RUNNING);
        assert_string_equal(j->lease_id, l->lease_id);
        assert_int_equal(j->lease_expires_at, T0 + 62 * SEC);
        ad_job_free(j);
    }
    ad_op_free(&x->op);
    struct ad_job *j = stored(f, a);
    assert_int_equal(j->status, AD_SUCCEEDED);
    ad_job_free(j);
    free(lid);
    free(a);
    free(b);
    free(c);
}

static void test_report_complete_partial_with_location(void **state)
{
    struct fx *f = *state;
    load_config(f, retention_yaml);
    struct ad_submit_op *s = ad_submit_op_new();
    s->job = new_job("t1", "video.transcode", 3);
    assert_int_equal(core_fx_apply(f, &s->op), AD_E_OK);
    char *id = ad_strdup(s->job->id);
    ad_op_free(&s->op);
    struct ad_lease_op *l = lease_op("t1", "video.transcode", 1, 30, T0);
    assert_int_equal(core_fx_apply(f, &l->op), AD_E_OK);
    assert_int_equal(l->leased.n, 1);
    char *lid = ad_strdup(l->leased.items[0]->lease_id);
    ad_op_free(&l->op);

    struct ad_report_op *x = report_op(AD_EV_COMPLETE_PARTIAL, id, lid, T0 + SEC);
    x->result_location = ad_strdup("https://cdn/out");
    assert_int_equal(core_fx_apply(f, &x->op), AD_E_OK);
    ad_op_free(&x->op);
    struct ad_job *j = stored(f, id);
    assert_int_equal(j->status, AD_PARTIAL);
    assert_null(j->result);
    assert_string_equal(j->result_location, "https://cdn/out");
    assert_int_equal(j->expires_at, T0 + SEC + 4 * 60 * SEC); /* the type's partialSuccess retention */
    struct ad_attempt_list a;
    assert_int_equal(f->s->ops->attempt_list(f->c, id, &a), AD_E_OK);
    ad_attempt_own(&a, j);
    assert_int_equal(a.n, 1);
    assert_int_equal(a.items[0].ended_at, T0 + SEC);
    assert_string_equal(a.items[0].outcome, "partialSuccess");
    ad_attempt_list_free(&a);
    ad_job_free(j);
    free(lid);
    free(id);
}

static void test_report_fail_retryable_requeues_with_backoff(void **state)
{
    struct fx *f = *state;
    f->cfg.retry_backoff_ms = 4000;
    char *id = submit(f, "t1", 3, AD_PRIO_NORMAL);
    char *lid = lease_one(f, id, T0);
    int64_t now = T0 + 2 * SEC;
    struct ad_report_op *x = report_op(AD_EV_FAIL, id, lid, now);
    x->error = ad_strdup("{\"status\":502,\"code\":\"upstream\"}");
    assert_int_equal(core_fx_apply(f, &x->op), AD_E_OK);
    ad_op_free(&x->op);
    struct ad_job *j = stored(f, id);
    assert_int_equal(j->status, AD_QUEUED);
    assert_int_equal(j->attempt, 1);
    assert_in_range(j->run_at, now + 2000, now + 4000); /* backoff after attempt 1 with a 4 s base */
    assert_string_equal(j->lease_id, lid);              /* kept but no longer live */
    assert_int_equal(j->lease_expires_at, 0);
    assert_int_equal(j->finished_at, 0);
    assert_int_equal(j->expires_at, 0);
    int64_t run_at = j->run_at;
    ad_job_free(j);

    /* Not leasable before run_at; leased again as attempt 2 after. */
    struct ad_lease_op *l = lease_op("t1", "video", 1, 30, run_at - 1);
    assert_int_equal(core_fx_apply(f, &l->op), AD_E_OK);
    assert_int_equal(l->leased.n, 0);
    ad_op_free(&l->op);
    l = lease_op("t1", "video", 1, 30, run_at);
    assert_int_equal(core_fx_apply(f, &l->op), AD_E_OK);
    assert_int_equal(l->leased.n, 1);
    assert_int_equal(l->leased.items[0]->attempt, 2);
    assert_string_not_equal(l->leased.items[0]->lease_id, lid);
    ad_op_free(&l->op);

    /* The old lease is dead. */
    x = report_op(AD_EV_HEARTBEAT, id, lid, run_at + 1);
    assert_int_equal(core_fx_apply(f, &x->op), AD_E_STALE_LEASE);
    ad_op_free(&x->op);
    free(lid);
    free(id);
}

static void test_report_fail_terminal(void **state)
{
    struct fx *f = *state;
    /* Last attempt. */
    char *id = submit(f, "t1", 1, AD_PRIO_NORMAL);
    char *lid = lease_one(f, id, T0);
    struct ad_report_op *x = report_op(AD_EV_FAIL, id, lid, T0 + SEC);
    x->error = ad_strdup("{\"status\":500,\"code\":\"boom\"}");
    assert_int_equal(core_fx_apply(f, &x->op), AD_E_OK);
    ad_op_free(&x->op);
    struct ad_job *j = stored(f, id);
    assert_int_equal(j->status, AD_FAILED);
    assert_string_equal(j->error, "{\"status\":500,\"code\":\"boom\"}");
    assert_int_equal(j->finished_at, T0 + SEC);
    assert_int_equal(j->expires_at, T0 + SEC + 30 * DAY);
    ad_job_free(j);
    free(lid);
    free(id);

    /* Not retryable, attempts left. */
    id = submit(f, "t1", 5, AD_PRIO_NORMAL);
    lid = lease_one(f, id, T0);
    x = report_op(AD_EV_FAIL_FINAL, id, lid, T0 + SEC);
    x->error = ad_strdup("{\"status\":422}");
    assert_int_equal(core_fx_apply(f, &x->op), AD_E_OK);
    ad_op_free(&x->op);
    j = stored(f, id);
    assert_int_equal(j->status, AD_FAILED);
    ad_job_free(j);
    free(lid);
    free(id);
}

/* ---- lease expiry ---- */

static struct ad_expire_op *expire_op(const char *id, const char *lease_id, int64_t now)
{
    struct ad_expire_op *x = ad_expire_op_new();
    x->id = ad_strdup(id);
    x->lease_id = ad_strdup(lease_id);
    x->now = now;
    return x;
}

static void test_expire_requeues(void **state)
{
    struct fx *f = *state;
    char *id = submit(f, "t1", 3, AD_PRIO_NORMAL);
    char *lid = lease_one(f, id, T0); /* lease runs out at T0 + 30 s */

    /* Before the deadline: nothing. */
    struct ad_expire_op *x = expire_op(id, lid, T0 + 30 * SEC - 1);
    assert_int_equal(core_fx_apply(f, &x->op), AD_E_OK);
    assert_int_equal(x->changed, 0);
    assert_non_null(x->job);
    assert_int_equal(x->job->status, AD_RUNNING);
    ad_op_free(&x->op);
    /* An old lease id: nothing. */
    x = expire_op(id, "lse_old", T0 + HOUR);
    assert_int_equal(core_fx_apply(f, &x->op), AD_E_OK);
    assert_int_equal(x->changed, 0);
    ad_op_free(&x->op);

    x = expire_op(id, lid, T0 + 30 * SEC);
    assert_int_equal(core_fx_apply(f, &x->op), AD_E_OK);
    assert_int_equal(x->changed, 1);
    assert_int_equal(x->job->status, AD_QUEUED);
    ad_op_free(&x->op);
    struct ad_job *j = stored(f, id);
    assert_int_equal(j->status, AD_QUEUED);
    assert_null(j->lease_id); /* an expired lease is forgotten: its worker gets 409 from now on */
    assert_int_equal(j->lease_expires_at, 0);
    assert_int_equal(j->updated_at, T0 + 30 * SEC);
    assert_int_equal(j->attempt, 1);
    ad_job_free(j);

    /* Expiring the same lease again: already handled. */
    x = expire_op(id, lid, T0 + HOUR);
    assert_int_equal(core_fx_apply(f, &x->op), AD_E_OK);
    assert_int_equal(x->changed, 0);
    ad_op_free(&x->op);

    /* Unknown job. */
    x = expire_op("job_nope", lid, T0 + HOUR);
    assert_int_equal(core_fx_apply(f, &x->op), AD_E_NOT_FOUND);
    ad_op_free(&x->op);
    free(lid);
    free(id);
}

/* A lease's running event is made from the job (started_seq, the lease's seq) until the job is leased again: then
 * it goes into the log, and the new lease's is made from the job. A lease of a job that keeps a message from an
 * earlier attempt logs its event, which carries the message. */
static void test_running_events_move_to_the_log_at_the_next_lease(void **state)
{
    struct fx *f = *state;
    char *id = submit(f, "t1", 3, AD_PRIO_NORMAL);
    char *lid = lease_one(f, id, T0);
    struct ad_job *j = stored(f, id);
    int64_t first = j->started_seq;
    assert_true(first > j->created_seq && first == j->seq);
    ad_job_free(j);
    struct ad_expire_op *x = expire_op(id, lid, T0 + 30 * SEC);
    assert_int_equal(core_fx_apply(f, &x->op), AD_E_OK);
    ad_op_free(&x->op);
    free(lid);
    lid = lease_one(f, id, T0 + 31 * SEC);
    j = stored(f, id);
    int64_t second = j->started_seq;
    assert_true(second > first && second == j->seq);
    ad_job_free(j);
    struct ad_event_list ev;
    assert_int_equal(f->s->ops->events_after(f->c, id, 0, 10, &ev), AD_E_OK);
    assert_int_equal(ev.n, 2);
    assert_int_equal(ev.items[0].seq, first);
    assert_string_equal(ev.items[0].kind, "status");
    assert_non_null(strstr(ev.items[0].data, "\"status\":\"running\""));
    assert_non_null(strstr(ev.items[0].data, "\"message\":null"));
    assert_non_null(strstr(ev.items[1].data, "\"status\":\"queued\""));
    assert_true(ev.items[1].seq > first && ev.items[1].seq < second);
    ad_event_list_free(&ev);

    /* A message from this attempt stays on the job into the next one, whose lease then logs its event. */
    struct ad_report_op *r = report_op(AD_EV_HEARTBEAT, id, lid, T0 + 32 * SEC);
    r->message = ad_strdup("half way");
    assert_int_equal(core_fx_apply(f, &r->op), AD_E_OK);
    ad_op_free(&r->op);
    x = expire_op(id, lid, T0 + 70 * SEC);
    assert_int_equal(core_fx_apply(f, &x->op), AD_E_OK);
    ad_op_free(&x->op);
    free(lid);
    lid = lease_one(f, id, T0 + 71 * SEC);
    j = stored(f, id);
    assert_int_equal(j->started_seq, 0);
    int64_t third = j->seq;
    ad_job_free(j);
    assert_int_equal(f->s->ops->events_after(f->c, id, first, 10, &ev), AD_E_OK);
    assert_true(ev.n >= 3);
    assert_int_equal(ev.items[ev.n - 1].seq, third);
    assert_non_null(strstr(ev.items[ev.n - 1].data, "\"message\":\"half way\""));
    int found_second = 0;
    for (size_t i = 0; i < ev.n; i++)
        found_second |= ev.items[i].seq == second;
    assert_true(found_second);
    ad_event_list_free(&ev);
    free(lid);
    free(id);
}

/* A lease op made (its now read) on another node a moment before the expiry it is applied after: the new
 * attempt starts no earlier than the old one ended, and the job's times do not go back. */
static void test_lease_after_a_later_change_keeps_time_moving_forward(void **state)
{
    struct fx *f = *state;
    char *id = submit(f, "t1", 3, AD_PRIO_NORMAL);
    char *lid = lease_one(f, id, T0);
    struct ad_expire_op *x = expire_op(id, lid, T0 + 30 * SEC);
    assert_int_equal(core_fx_apply(f, &x->op), AD_E_OK);
    assert_int_equal(x->changed, 1);
    ad_op_free(&x->op);

    struct ad_lease_op *l = lease_op("t1", "video", 1, 30, T0 + 30 * SEC - 5);
    assert_int_equal(core_fx_apply(f, &l->op), AD_E_OK);
    assert_int_equal(l->leased.n, 1);
    assert_int_equal(l->leased.items[0]->started_at, T0 + 30 * SEC);
    assert_int_equal(l->leased.items[0]->updated_at, T0 + 30 * SEC);
    assert_int_equal(l->leased.items[0]->lease_expires_at, T0 + 60 * SEC);
    ad_op_free(&l->op);
    /* The expired attempt is stored; the live one is the job's own. */
    struct ad_attempt_list a;
    assert_int_equal(f->s->ops->attempt_list(f->c, id, &a), AD_E_OK);
    assert_int_equal(a.n, 1);
    assert_int_equal(a.items[0].attempt, 1);
    assert_int_equal(a.items[0].started_at, T0);
    assert_int_equal(a.items[0].ended_at, T0 + 30 * SEC);
    assert_string_equal(a.items[0].outcome, "expired");
    struct ad_job *live = stored(f, id);
    ad_attempt_own(&a, live);
    ad_attempt_own(&a, live); /* already there: not twice */
    assert_int_equal(a.n, 2);
    assert_int_equal(a.items[1].attempt, 2);
    assert_int_equal(a.items[1].started_at, T0 + 30 * SEC);
    assert_int_equal(a.items[1].ended_at, 0);
    assert_null(a.items[1].outcome);
    ad_job_free(live);
    ad_attempt_list_free(&a);

    /* A report made before the lease was granted is applied at the job's time too. */
    struct ad_job *j = stored(f, id);
    struct ad_report_op *r = report_op(AD_EV_HEARTBEAT, id, j->lease_id, T0 + 30 * SEC - 3);
    ad_job_free(j);
    r->progress = 10;
    assert_int_equal(core_fx_apply(f, &r->op), AD_E_OK);
    assert_int_equal(r->job->updated_at, T0 + 30 * SEC);
    ad_op_free(&r->op);
    free(lid);
    free(id);
}

static void test_expire_fails_without_attempts(void **state)
{
    struct fx *f = *state;
    char *id = submit(f, "t1", 1, AD_PRIO_NORMAL);
    char *lid = lease_one(f, id, T0);
    struct ad_expire_op *x = expire_op(id, lid, T0 + HOUR);
    assert_int_equal(core_fx_apply(f, &x->op), AD_E_OK);
    assert_int_equal(x->changed, 1);
    ad_op_free(&x->op);
    struct ad_job *j = stored(f, id);
    assert_int_equal(j->status, AD_FAILED);
    assert_int_equal(j->finished_at, T0 + HOUR);
    assert_int_equal(j->expires_at, T0 + HOUR + 30 * DAY);
    assert_non_null(j->error);
    assert_non_null(strstr(j->error, "\"code\":\"lease-expired\""));
    assert_null(j->lease_id);
    ad_job_free(j);
    free(lid);
    free(id);
}

static void test_expire_cancels_when_requested(void **state)
{
    struct fx *f = *state;
    char *id = submit(f, "t1", 3, AD_PRIO_NORMAL);
    char *lid = lease_one(f, id, T0);
    struct ad_cancel_op *c = cancel_op("t1", id, NULL, T0 + SEC);
    assert_int_equal(core_fx_apply(f, &c->op), AD_E_OK);
    ad_op_free(&c->op);
    struct ad_expire_op *x = expire_op(id, lid, T0 + HOUR);
    assert_int_equal(core_fx_apply(f, &x->op), AD_E_OK);
    assert_int_equal(x->changed, 1);
    ad_op_free(&x->op);
    struct ad_job *j = stored(f, id);
    assert_int_equal(j->status, AD_CANCELLED);
    assert_int_equal(j->finished_at, T0 + HOUR);
    assert_null(j->error);
    ad_job_free(j);
    free(lid);
    free(id);
}

/* ---- retry ---- */

static struct ad_retry_op *retry_op(const char *tenant, const char *id, int64_t now)
{
    struct ad_retry_op *x = ad_retry_op_new();
    x->tenant = ad_strdup(tenant);
    x->id = ad_strdup(id);
    x->new_id = ad_new_id("job_");
    x->now = now;
    return x;
}

static void test_retry_failed_creates_new_job(void **state)
{
    struct fx *f = *state;
    struct ad_submit_op *s = ad_submit_op_new();
    s->job = new_job("t1", "video", 1);
    s->job->priority = AD_PRIO_HIGH;
    s->job->timeout_seconds = 600;
    s->job->on_complete_redirect = 1;
    ad_job_set(&s->job->callback_url, "https://cb.example/hook");
    s->job->resource = ad_asprintf("/v1/videos/%s", s->job->id);
    assert_int_equal(core_fx_apply(f, &s->op), AD_E_OK);
    char *id = ad_strdup(s->job->id);
    ad_op_free(&s->op);

    /* Not failed yet: illegal. */
    struct ad_retry_op *r = retry_op("t1", id, T0 + SEC);
    assert_int_equal(core_fx_apply(f, &r->op), AD_E_ILLEGAL_TRANSITION);
    ad_op_free(&r->op);

    char *lid = lease_one(f, id, T0);
    struct ad_report_op *x = report_op(AD_EV_FAIL, id, lid, T0 + SEC);
    x->error = ad_strdup("{\"status\":500}");
    assert_int_equal(core_fx_apply(f, &x->op), AD_E_OK);
    ad_op_free(&x->op);

    r = retry_op("t1", id, T0 + 2 * SEC);
    char *new_id = ad_strdup(r->new_id);
    assert_int_equal(core_fx_apply(f, &r->op), AD_E_OK);
    assert_string_equal(r->job->id, new_id);
    ad_op_free(&r->op);

    struct ad_job *n = stored(f, new_id);
    assert_non_null(n);
    assert_string_equal(n->retry_of, id);
    assert_string_equal(n->tenant, "t1");
    assert_string_equal(n->type, "video");
    assert_string_equal(n->payload, "{\"src\":\"a\"}");
    assert_int_equal(n->priority, AD_PRIO_HIGH);
    assert_int_equal(n->max_attempts, 1);
    assert_int_equal(n->timeout_seconds, 600);
    assert_int_equal(n->on_complete_redirect, 1);
    assert_string_equal(n->callback_url, "https://cb.example/hook");
    assert_int_equal(n->status, AD_QUEUED);
    assert_int_equal(n->attempt, 0);
    assert_int_equal(n->created_at, T0 + 2 * SEC);
    assert_null(n->error);
    assert_null(n->result);
    assert_null(n->lease_id);
    char *want_res = ad_asprintf("/v1/videos/%s", new_id);
    assert_string_equal(n->resource, want_res); /* the resource follows the new id */
    free(want_res);
    ad_job_free(n);

    /* The old job is untouched. */
    struct ad_job *old = stored(f, id);
    assert_int_equal(old->status, AD_FAILED);
    ad_job_free(old);

    /* The new job is queued: retrying it is illegal; another tenant cannot see the old one. */
    r = retry_op("t1", new_id, T0 + 3 * SEC);
    assert_int_equal(core_fx_apply(f, &r->op), AD_E_ILLEGAL_TRANSITION);
    ad_op_free(&r->op);
    r = retry_op("t2", id, T0 + 3 * SEC);
    assert_int_equal(core_fx_apply(f, &r->op), AD_E_NOT_FOUND);
    ad_op_free(&r->op);
    free(new_id);
    free(lid);
    free(id);
}

static void test_retry_cancelled(void **state)
{
    struct fx *f = *state;
    char *id = submit(f, "t1", 3, AD_PRIO_NORMAL);
    struct ad_cancel_op *c = cancel_op("t1", id, NULL, T0 + SEC);
    assert_int_equal(core_fx_apply(f, &c->op), AD_E_OK);
    ad_op_free(&c->op);
    struct ad_retry_op *r = retry_op("t1", id, T0 + 2 * SEC);
    assert_int_equal(core_fx_apply(f, &r->op), AD_E_OK);
    assert_string_equal(r->job->retry_of, id);
    assert_null(r->job->resource);
    ad_op_free(&r->op);
    free(id);
}

int main(void)
{
#define T(name) cmocka_unit_test_setup_teardown(name, setup, core_fx_close)
    const struct CMUnitTest tests[] = {
        T(test_backoff_within_jitter_bounds),
        T(test_job_prepare_defaults),
        T(test_backoff_grows_then_caps),
        T(test_backoff_is_jittered),
        T(test_retention_per_type_and_status),
        T(test_fingerprint),
        T(test_submit_inserts),
        T(test_submit_idempotency),
        T(test_batch_items_answer_alone),
        T(test_submit_unique_and_debounce),
        T(test_batch_unique_key_twice),
        T(test_cancel_queued),
        T(test_cancel_running_then_ack),
        T(test_lease),
        T(test_lease_respects_run_at),
        T(test_report_stale_lease_changes_nothing),
        T(test_report_heartbeat),
        T(test_report_complete),
        T(test_report_with_next),
        T(test_report_complete_partial_with_location),
        T(test_report_fail_retryable_requeues_with_backoff),
        T(test_report_fail_terminal),
        T(test_expire_requeues),
        T(test_running_events_move_to_the_log_at_the_next_lease),
        T(test_lease_after_a_later_change_keeps_time_moving_forward),
        T(test_expire_fails_without_attempts),
        T(test_expire_cancels_when_requested),
        T(test_retry_failed_creates_new_job),
        T(test_retry_cancelled),
    };
#undef T
    return cmocka_run_group_tests(tests, NULL, NULL);
}
