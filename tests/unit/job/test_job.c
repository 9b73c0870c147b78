/*
 * test_job.c - unit tests for src/job.c: the state machine over every (status, event, attempts, cancel) case,
 * status and priority names, the JSON representation (parsed back with jansson; the writer's own tests are
 * tests/unit/common/test_json.c), the ETag and deep copies.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "job/job.h"

/* 2026-11-30T18:11:40.123Z */
#define T_2026 ((int64_t)1796062300 * 1000 + 123)

static const enum ad_job_event all_events[] = {
    AD_EV_LEASE,      AD_EV_HEARTBEAT, AD_EV_COMPLETE,   AD_EV_COMPLETE_PARTIAL, AD_EV_FAIL,
    AD_EV_FAIL_FINAL, AD_EV_CANCEL,    AD_EV_CANCEL_ACK, AD_EV_LEASE_EXPIRED,    AD_EV_RELEASE,
};
#define NEVENTS (sizeof(all_events) / sizeof(all_events[0]))

static const char *event_name(enum ad_job_event ev)
{
    static const char *const names[] = {"LEASE",      "HEARTBEAT", "COMPLETE",   "COMPLETE_PARTIAL", "FAIL",
                                        "FAIL_FINAL", "CANCEL",    "CANCEL_ACK", "LEASE_EXPIRED",    "RELEASE"};
    return (unsigned)ev < sizeof(names) / sizeof(names[0]) ? names[ev] : "?";
}

/* The rules, written out independently of job.c: returns 0 for an illegal transition, else 1 with *to and *cr set. */
static int expected(enum ad_status st, enum ad_job_event ev, int attempts_left, int cancel_req, enum ad_status *to,
                    int *cr)
{
    *to = st;
    *cr = cancel_req;
    if (st != AD_QUEUED && st != AD_RUNNING)
        return 0;
    if (st == AD_QUEUED) {
        switch (ev) {
        case AD_EV_LEASE:
            *to = AD_RUNNING;
            return 1;
        case AD_EV_CANCEL:
            *to = AD_CANCELLED;
            return 1;
        default:
            return 0; /* every worker report needs a running job */
        }
    }
    switch (ev) {
    case AD_EV_LEASE:
        return 0;
    case AD_EV_CANCEL:
        *cr = 1;
        return 1;
    case AD_EV_HEARTBEAT:
        return 1;
    case AD_EV_COMPLETE:
        *to = AD_SUCCEEDED;
        return 1;
    case AD_EV_COMPLETE_PARTIAL:
        *to = AD_PARTIAL;
        return 1;
    case AD_EV_FAIL:
        *to = attempts_left && !cancel_req ? AD_QUEUED : AD_FAILED;
        return 1;
    case AD_EV_FAIL_FINAL:
        *to = AD_FAILED;
        return 1;
    case AD_EV_CANCEL_ACK:
        *to = AD_CANCELLED;
        return 1;
    case AD_EV_LEASE_EXPIRED:
        *to = cancel_req ? AD_CANCELLED : attempts_left ? AD_QUEUED : AD_FAILED;
        return 1;
    case AD_EV_RELEASE: /* handing back never uses up an attempt, so only a cancel request ends the job */
        *to = cancel_req ? AD_CANCELLED : AD_QUEUED;
        return 1;
    }
    return 0;
}

static void test_transition_exhaustive(void **state)
{
    (void)state;
    int cases = 0;
    for (int st = 0; st < AD_STATUS__COUNT; st++) {
        for (size_t k = 0; k < NEVENTS; k++) {
            enum ad_job_event ev = all_events[k];
            for (int left = 0; left <= 1; left++) {
                for (int cr = 0; cr <= 1; cr++) {
                    struct ad_job j = {0};
                    j.status = (enum ad_status)st;
                    j.max_attempts = 3;
                    j.attempt = left ? 2 : 3;
                    j.cancel_requested = cr;
                    enum ad_status want_to;
                    int want_cr;
                    int legal = expected(j.status, ev, left, cr, &want_to, &want_cr);
                    struct ad_transition t = {AD_STATUS__COUNT, -1};
                    ad_err e = ad_job_transition(&j, ev, &t);
                    const char *what = ad_status_name(j.status);
                    if (!legal) {
                        if (e != AD_E_ILLEGAL_TRANSITION)
                            fail_msg("%s + %s (left=%d cr=%d): got %s, want illegal-transition", what, event_name(ev),
                                     left, cr, ad_err_code(e));
                    } else {
                        if (e != AD_E_OK)
                            fail_msg("%s + %s (left=%d cr=%d): got %s, want ok", what, event_name(ev), left, cr,
                                     ad_err_code(e));
                        if (t.to != want_to || t.cancel_requested != want_cr)
                            fail_msg("%s + %s (left=%d cr=%d): -> %s cr=%d, want %s cr=%d", what, event_name(ev), left,
                                     cr, ad_status_name(t.to), t.cancel_requested, ad_status_name(want_to), want_cr);
                    }
                    /* The job itself is only read. */
                    assert_int_equal(j.status, st);
                    assert_int_equal(j.cancel_requested, cr);
                    cases++;
                }
            }
        }
    }
    assert_int_equal(cases, AD_STATUS__COUNT * NEVENTS * 4);
}

static void test_transition_terminal_states_never_change(void **state)
{
    (void)state;
    const enum ad_status terminal[] = {AD_SUCCEEDED, AD_FAILED, AD_CANCELLED, AD_PARTIAL};
    for (size_t i = 0; i < 4; i++) {
        for (size_t k = 0; k < NEVENTS; k++) {
            for (int attempt = 0; attempt <= 5; attempt++) {
                struct ad_job j = {0};
                j.status = terminal[i];
                j.attempt = attempt;
                j.max_attempts = 3;
                j.cancel_requested = attempt & 1;
                struct ad_transition t;
                ad_err e = ad_job_transition(&j, all_events[k], &t);
                if (e != AD_E_ILLEGAL_TRANSITION)
                    fail_msg("%s + %s: %s", ad_status_name(terminal[i]), event_name(all_events[k]), ad_err_code(e));
            }
        }
    }
}

static ad_err run_ev(enum ad_status st, int attempt, int max, int cr, enum ad_job_event ev, struct ad_transition *t)
{
    struct ad_job j = {0};
    j.status = st;
    j.attempt = attempt;
    j.max_attempts = max;
    j.cancel_requested = cr;
    return ad_job_transition(&j, ev, t);
}

static void test_transition_named_rules(void **state)
{
    (void)state;
    struct ad_transition t;
    /* LEASE only from queued. */
    assert_int_equal(run_ev(AD_QUEUED, 0, 3, 0, AD_EV_LEASE, &t), AD_E_OK);
    assert_int_equal(t.to, AD_RUNNING);
    assert_int_equal(run_ev(AD_RUNNING, 1, 3, 0, AD_EV_LEASE, &t), AD_E_ILLEGAL_TRANSITION);
    /* CANCEL: queued -> cancelled; running -> still running with cancel requested. */
    assert_int_equal(run_ev(AD_QUEUED, 0, 3, 0, AD_EV_CANCEL, &t), AD_E_OK);
    assert_int_equal(t.to, AD_CANCELLED);
    assert_int_equal(run_ev(AD_RUNNING, 1, 3, 0, AD_EV_CANCEL, &t), AD_E_OK);
    assert_int_equal(t.to, AD_RUNNING);
    assert_int_equal(t.cancel_requested, 1);
    /* FAIL: the boundary between attempts left and none is attempt == max_attempts. */
    assert_int_equal(run_ev(AD_RUNNING, 1, 2, 0, AD_EV_FAIL, &t), AD_E_OK);
    assert_int_equal(t.to, AD_QUEUED);
    assert_int_equal(run_ev(AD_RUNNING, 2, 2, 0, AD_EV_FAIL, &t), AD_E_OK);
    assert_int_equal(t.to, AD_FAILED);
    assert_int_equal(run_ev(AD_RUNNING, 1, 1, 0, AD_EV_FAIL, &t), AD_E_OK);
    assert_int_equal(t.to, AD_FAILED);
    assert_int_equal(run_ev(AD_RUNNING, 1, 5, 1, AD_EV_FAIL, &t), AD_E_OK);
    assert_int_equal(t.to, AD_FAILED);
    /* LEASE_EXPIRED. */
    assert_int_equal(run_ev(AD_RUNNING, 1, 2, 0, AD_EV_LEASE_EXPIRED, &t), AD_E_OK);
    assert_int_equal(t.to, AD_QUEUED);
    assert_int_equal(run_ev(AD_RUNNING, 2, 2, 0, AD_EV_LEASE_EXPIRED, &t), AD_E_OK);
    assert_int_equal(t.to, AD_FAILED);
    assert_int_equal(run_ev(AD_RUNNING, 1, 5, 1, AD_EV_LEASE_EXPIRED, &t), AD_E_OK);
    assert_int_equal(t.to, AD_CANCELLED);
    assert_int_equal(run_ev(AD_RUNNING, 5, 5, 1, AD_EV_LEASE_EXPIRED, &t), AD_E_OK);
    assert_int_equal(t.to, AD_CANCELLED);
}

static void test_status_names(void **state)
{
    (void)state;
    static const char *const want[AD_STATUS__COUNT] = {"queued", "running",   "succeeded",
                                                       "failed", "cancelled", "partialSuccess"};
    static const int terminal[AD_STATUS__COUNT] = {0, 0, 1, 1, 1, 1};
    for (int i = 0; i < AD_STATUS__COUNT; i++) {
        assert_string_equal(ad_status_name((enum ad_status)i), want[i]);
        enum ad_status s = AD_STATUS__COUNT;
        assert_int_equal(ad_status_parse(want[i], &s), 0);
        assert_int_equal(s, i);
        assert_int_equal(ad_status_terminal((enum ad_status)i) != 0, terminal[i]);
    }
    assert_string_equal(ad_status_name(AD_STATUS__COUNT), "unknown");
    assert_string_equal(ad_status_name((enum ad_status)1000), "unknown");
    static const char *const bad[] = {"",        "Queued",   "QUEUED",  "queued ", " queued", "partialsuccess",
                                      "partial", "canceled", "unknown", "done"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        enum ad_status s;
        if (ad_status_parse(bad[i], &s) != -1)
            fail_msg("ad_status_parse accepted \"%s\"", bad[i]);
    }
}

static void test_priority_names(void **state)
{
    (void)state;
    static const struct {
        enum ad_priority p;
        const char *name;
    } want[] = {{AD_PRIO_LOW, "low"}, {AD_PRIO_NORMAL, "normal"}, {AD_PRIO_HIGH, "high"}};
    for (size_t i = 0; i < 3; i++) {
        assert_string_equal(ad_priority_name(want[i].p), want[i].name);
        enum ad_priority p = (enum ad_priority)99;
        assert_int_equal(ad_priority_parse(want[i].name, &p), 0);
        assert_int_equal(p, want[i].p);
    }
    /* Higher priority compares higher: the store orders by this. */
    assert_true(AD_PRIO_HIGH > AD_PRIO_NORMAL && AD_PRIO_NORMAL > AD_PRIO_LOW);
    assert_string_equal(ad_priority_name((enum ad_priority)7), "normal");
    static const char *const bad[] = {"", "High", "urgent", "norm", "low ", "medium"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        enum ad_priority p;
        if (ad_priority_parse(bad[i], &p) != -1)
            fail_msg("ad_priority_parse accepted \"%s\"", bad[i]);
    }
}

/* ---- representation ---- */

static struct ad_job *sample_job(enum ad_status st)
{
    struct ad_job *j = ad_job_new();
    ad_job_set(&j->id, "job_4dc0GZ0m2bVvOQkn0kC4Wg");
    ad_job_set(&j->tenant, "t1");
    ad_job_set(&j->type, "video.transcode");
    ad_job_set(&j->payload, "{\"sourceUrl\":\"https://x/y\",\"n\":[1,2]}");
    j->status = st;
    j->attempt = 1;
    j->max_attempts = 3;
    j->created_at = T_2026;
    j->updated_at = T_2026 + 1;
    return j;
}

/* Render j and parse the output; fails the test if it is not one JSON object. Caller json_decref()s. */
static json_t *render_parse(const struct ad_job *j)
{
    struct ad_buf b;
    ad_buf_init(&b, SIZE_MAX);
    assert_int_equal(ad_job_render(j, &b), 0);
    json_error_t jerr;
    json_t *doc = json_loadb(b.data, b.len, 0, &jerr);
    if (doc == NULL)
        fail_msg("render is not JSON (%s at %d): %.*s", jerr.text, jerr.position, (int)b.len, b.data);
    assert_true(json_is_object(doc));
    ad_buf_free(&b);
    return doc;
}

static void expect_str(json_t *doc, const char *key, const char *want)
{
    json_t *v = json_object_get(doc, key);
    if (v == NULL)
        fail_msg("member %s missing", key);
    if (want == NULL) {
        if (!json_is_null(v))
            fail_msg("%s: want null", key);
        return;
    }
    if (!json_is_string(v))
        fail_msg("%s: not a string", key);
    if (strcmp(json_string_value(v), want) != 0)
        fail_msg("%s: \"%s\" != \"%s\"", key, json_string_value(v), want);
}

static void expect_int(json_t *doc, const char *key, json_int_t want)
{
    json_t *v = json_object_get(doc, key);
    if (!json_is_integer(v))
        fail_msg("%s: not an integer", key);
    if (json_integer_value(v) != want)
        fail_msg("%s: %lld != %lld", key, (long long)json_integer_value(v), (long long)want);
}

/* doc[key] must equal the JSON text want (compared structurally). */
static void expect_json(json_t *doc, const char *key, const char *want)
{
    json_t *v = json_object_get(doc, key);
    if (v == NULL)
        fail_msg("member %s missing", key);
    json_t *w = json_loads(want, JSON_DECODE_ANY, NULL);
    assert_non_null(w);
    if (!json_equal(v, w)) {
        char *got = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
        fail_msg("%s: %s != %s", key, got, want);
    }
    json_decref(w);
}

static void test_render_every_field(void **state)
{
    (void)state;
    struct ad_job *j = sample_job(AD_RUNNING);
    j->progress = 42;
    j->priority = AD_PRIO_HIGH;
    j->attempt = 2;
    j->max_attempts = 5;
    j->cancel_requested = 1;
    j->started_at = T_2026 + 2000;
    j->run_at = T_2026 - 1000;
    ad_job_set(&j->retry_of, "job_old");
    ad_job_set(&j->message, "halfway");
    json_t *doc = render_parse(j);

    static const char *const members[] = {"id",        "type",          "status",      "progress",        "priority",
                                          "payload",   "attempt",       "maxAttempts", "cancelRequested", "createdAt",
                                          "startedAt", "lastUpdatedAt", "finishedAt",  "expiresAt",       "runAt",
                                          "retryOf",   "message",       "links"};
    for (size_t i = 0; i < sizeof(members) / sizeof(members[0]); i++)
        if (json_object_get(doc, members[i]) == NULL)
            fail_msg("member %s missing", members[i]);
    assert_int_equal(json_object_size(doc), sizeof(members) / sizeof(members[0]));

    expect_str(doc, "id", "job_4dc0GZ0m2bVvOQkn0kC4Wg");
    expect_str(doc, "type", "video.transcode");
    expect_str(doc, "status", "running");
    expect_int(doc, "progress", 42);
    expect_str(doc, "priority", "high");
    expect_json(doc, "payload", "{\"n\":[1,2],\"sourceUrl\":\"https://x/y\"}");
    expect_int(doc, "attempt", 2);
    expect_int(doc, "maxAttempts", 5);
    assert_true(json_is_true(json_object_get(doc, "cancelRequested")));
    expect_str(doc, "createdAt", "2026-11-30T18:11:40.123Z");
    expect_str(doc, "startedAt", "2026-11-30T18:11:42.123Z");
    expect_str(doc, "lastUpdatedAt", "2026-11-30T18:11:40.124Z");
    expect_str(doc, "finishedAt", NULL);
    expect_str(doc, "expiresAt", NULL);
    expect_str(doc, "runAt", "2026-11-30T18:11:39.123Z");
    expect_str(doc, "retryOf", "job_old");
    expect_str(doc, "message", "halfway");

    json_t *links = json_object_get(doc, "links");
    assert_true(json_is_object(links));
    assert_int_equal(json_object_size(links), 5);
    expect_str(links, "self", "/v1/jobs/job_4dc0GZ0m2bVvOQkn0kC4Wg");
    expect_str(links, "cancel", "/v1/jobs/job_4dc0GZ0m2bVvOQkn0kC4Wg:cancel");
    expect_str(links, "retry", "/v1/jobs/job_4dc0GZ0m2bVvOQkn0kC4Wg:retry");
    expect_str(links, "events", "/v1/jobs/job_4dc0GZ0m2bVvOQkn0kC4Wg/events");
    expect_str(links, "result", "/v1/jobs/job_4dc0GZ0m2bVvOQkn0kC4Wg/result");

    /* Internal fields never leak into the representation. */
    assert_null(json_object_get(doc, "tenant"));
    assert_null(json_object_get(doc, "leaseId"));
    assert_null(json_object_get(doc, "worker"));
    json_decref(doc);
    ad_job_free(j);
}

static void test_render_nulls_and_defaults(void **state)
{
    (void)state;
    struct ad_job *j = ad_job_new();
    ad_job_set(&j->id, "job_x");
    ad_job_set(&j->type, "t");
    /* ad_job_new: unknown progress, normal priority, queued */
    json_t *doc = render_parse(j);
    assert_true(json_is_null(json_object_get(doc, "progress")));
    expect_str(doc, "priority", "normal");
    expect_str(doc, "status", "queued");
    expect_json(doc, "payload", "{}"); /* a job without a payload shows an empty object */
    assert_true(json_is_false(json_object_get(doc, "cancelRequested")));
    static const char *const times[] = {"createdAt", "startedAt", "lastUpdatedAt", "finishedAt", "expiresAt", "runAt"};
    for (size_t i = 0; i < 6; i++)
        expect_str(doc, times[i], NULL);
    expect_str(doc, "retryOf", NULL);
    expect_str(doc, "message", NULL);
    assert_null(json_object_get(doc, "result"));
    assert_null(json_object_get(doc, "error"));
    assert_null(json_object_get(doc, "resultLocation"));
    assert_null(json_object_get(doc, "group")); /* no group: no member */
    json_decref(doc);

    /* A group is shown as it is, escaped as every string is. */
    ad_job_set(&j->group, "cust \"42\" \\");
    doc = render_parse(j);
    expect_str(doc, "group", "cust \"42\" \\");
    json_decref(doc);
    ad_job_set(&j->group, NULL);

    /* 0 is a real progress value, distinct from unknown. */
    j->progress = 0;
    doc = render_parse(j);
    expect_int(doc, "progress", 0);
    json_decref(doc);
    j->progress = 100;
    doc = render_parse(j);
    expect_int(doc, "progress", 100);
    json_decref(doc);
    ad_job_free(j);
}

/* uniqueKey is shown only when the job has one, escaped like any string; a copy keeps it. */
static void test_render_unique_key(void **state)
{
    (void)state;
    struct ad_job *j = sample_job(AD_QUEUED);
    json_t *doc = render_parse(j);
    assert_null(json_object_get(doc, "uniqueKey"));
    json_decref(doc);
    ad_job_set(&j->unique_key, "report \"7\"");
    struct ad_job *d = ad_job_dup(j);
    ad_job_free(j);
    doc = render_parse(d);
    expect_str(doc, "uniqueKey", "report \"7\"");
    json_decref(doc);
    ad_job_free(d);
}

/* traceId, the trace of the job's traceparent, is shown only when the job has one; a copy keeps the context. */
static void test_render_trace_id(void **state)
{
    (void)state;
    struct ad_job *j = sample_job(AD_RUNNING);
    json_t *doc = render_parse(j);
    assert_null(json_object_get(doc, "traceId"));
    json_decref(doc);
    ad_job_set(&j->traceparent, "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01");
    ad_job_set(&j->tracestate, "congo=t61rcWkgMzE");
    struct ad_job *d = ad_job_dup(j);
    ad_job_free(j);
    assert_string_equal(d->tracestate, "congo=t61rcWkgMzE");
    doc = render_parse(d);
    expect_str(doc, "traceId", "4bf92f3577b34da6a3ce929d0e0e4736");
    json_decref(doc);
    ad_job_free(d);
}

static void test_render_result_and_error_by_status(void **state)
{
    (void)state;
    for (int st = 0; st < AD_STATUS__COUNT; st++) {
        struct ad_job *j = sample_job((enum ad_status)st);
        ad_job_set(&j->result, "{\"url\":\"https://r\"}");
        ad_job_set(&j->error, "{\"type\":\"about:blank\",\"status\":502,\"code\":\"upstream\"}");
        if (ad_status_terminal((enum ad_status)st)) {
            j->finished_at = T_2026 + 5000;
            j->expires_at = T_2026 + 86400000;
        }
        json_t *doc = render_parse(j);
        int has_result = st == AD_SUCCEEDED || st == AD_PARTIAL;
        if ((json_object_get(doc, "result") != NULL) != has_result)
            fail_msg("%s: result present=%d", ad_status_name((enum ad_status)st), !has_result);
        if ((json_object_get(doc, "error") != NULL) != (st == AD_FAILED))
            fail_msg("%s: error present=%d", ad_status_name((enum ad_status)st), st != AD_FAILED);
        if (has_result)
            expect_json(doc, "result", "{\"url\":\"https://r\"}");
        if (st == AD_FAILED)
            expect_json(doc, "error", "{\"type\":\"about:blank\",\"status\":502,\"code\":\"upstream\"}");
        if (ad_status_terminal((enum ad_status)st)) {
            expect_str(doc, "finishedAt", "2026-11-30T18:11:45.123Z");
            expect_str(doc, "expiresAt", "2026-12-01T18:11:40.123Z");
        }
        json_decref(doc);
        ad_job_free(j);
    }
}

static void test_render_result_location(void **state)
{
    (void)state;
    /* Only a location: no result member, the location instead. */
    struct ad_job *j = sample_job(AD_SUCCEEDED);
    ad_job_set(&j->result_location, "https://cdn.example/out.mp4?a=1&b=\"2\"");
    json_t *doc = render_parse(j);
    assert_null(json_object_get(doc, "result"));
    expect_str(doc, "resultLocation", "https://cdn.example/out.mp4?a=1&b=\"2\"");
    json_decref(doc);

    /* Both: both shown. */
    ad_job_set(&j->result, "[1,2,3]");
    j->status = AD_PARTIAL;
    doc = render_parse(j);
    expect_json(doc, "result", "[1,2,3]");
    expect_str(doc, "resultLocation", "https://cdn.example/out.mp4?a=1&b=\"2\"");
    json_decref(doc);

    /* Neither: result is null (the worker stored nothing). */
    ad_job_set(&j->result, NULL);
    ad_job_set(&j->result_location, NULL);
    j->status = AD_SUCCEEDED;
    doc = render_parse(j);
    expect_str(doc, "result", NULL);
    assert_null(json_object_get(doc, "resultLocation"));
    json_decref(doc);

    /* Not finished: no location even when one is set. */
    ad_job_set(&j->result_location, "https://cdn.example/out.mp4");
    j->status = AD_RUNNING;
    doc = render_parse(j);
    assert_null(json_object_get(doc, "resultLocation"));
    assert_null(json_object_get(doc, "result"));
    json_decref(doc);
    j->status = AD_FAILED;
    doc = render_parse(j);
    assert_null(json_object_get(doc, "resultLocation"));
    json_decref(doc);
    ad_job_free(j);
}

static void test_render_escapes_strings(void **state)
{
    (void)state;
    /* Every control character, quotes, backslashes, slash, DEL and multi-byte UTF-8. */
    char nasty[128];
    size_t n = 0;
    for (int c = 1; c < 0x20; c++)
        nasty[n++] = (char)c;
    const char *tail = "\"q\" \\b\\ / \x7f caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x98\x80 end";
    memcpy(nasty + n, tail, strlen(tail) + 1);

    struct ad_job *j = sample_job(AD_SUCCEEDED);
    ad_job_set(&j->type, nasty);
    ad_job_set(&j->message, nasty);
    ad_job_set(&j->retry_of, "a\"b\\c");
    ad_job_set(&j->result_location, nasty);

    struct ad_buf b;
    ad_buf_init(&b, SIZE_MAX);
    assert_int_equal(ad_job_render(j, &b), 0);
    for (size_t i = 0; i < b.len; i++)
        if ((unsigned char)b.data[i] < 0x20)
            fail_msg("raw control character 0x%02x at offset %zu", (unsigned char)b.data[i], i);
    json_error_t jerr;
    json_t *doc = json_loadb(b.data, b.len, 0, &jerr);
    if (doc == NULL)
        fail_msg("not JSON (%s): %.*s", jerr.text, (int)b.len, b.data);
    expect_str(doc, "type", nasty);
    expect_str(doc, "message", nasty);
    expect_str(doc, "retryOf", "a\"b\\c");
    expect_str(doc, "resultLocation", nasty);
    json_decref(doc);
    ad_buf_free(&b);
    ad_job_free(j);
}

/* An id that is not the daemon's own plain base64url (none is) is still escaped in the member and every link. */
static void test_render_id_escaped(void **state)
{
    (void)state;
    struct ad_job *j = sample_job(AD_QUEUED);
    ad_job_set(&j->id, "job_a\"b\\c\xff");
    json_t *doc = render_parse(j);
    expect_str(doc, "id", "job_a\"b\\c\xef\xbf\xbd");
    json_t *links = json_object_get(doc, "links");
    assert_string_equal(json_string_value(json_object_get(links, "self")), "/v1/jobs/job_a\"b\\c\xef\xbf\xbd");
    assert_string_equal(json_string_value(json_object_get(links, "result")), "/v1/jobs/job_a\"b\\c\xef\xbf\xbd/result");
    json_decref(doc);
    ad_job_free(j);
}

static void test_render_cap(void **state)
{
    (void)state;
    struct ad_job *j = sample_job(AD_QUEUED);
    struct ad_buf full;
    ad_buf_init(&full, SIZE_MAX);
    assert_int_equal(ad_job_render(j, &full), 0);
    /* One byte short of the representation fails; exactly its size succeeds. */
    struct ad_buf b;
    ad_buf_init(&b, full.len - 1);
    assert_int_equal(ad_job_render(j, &b), -1);
    assert_true(b.toobig);
    ad_buf_free(&b);
    ad_buf_init(&b, full.len);
    assert_int_equal(ad_job_render(j, &b), 0);
    assert_int_equal(b.len, full.len);
    assert_memory_equal(b.data, full.data, full.len);
    ad_buf_free(&b);
    ad_buf_free(&full);
    ad_job_free(j);
}

/* ---- ETag ---- */

static void check_etag_shape(const char *tag)
{
    if (strlen(tag) != 24)
        fail_msg("etag %s: length %zu", tag, strlen(tag));
    assert_int_equal(tag[0], '"');
    assert_int_equal(tag[23], '"');
    for (int i = 1; i < 23; i++) {
        char c = tag[i];
        if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_'))
            fail_msg("etag %s: '%c' is not base64url", tag, c);
    }
}

static void test_etag(void **state)
{
    (void)state;
    char body[64];
    for (size_t i = 0; i < sizeof(body); i++)
        body[i] = (char)('a' + i % 26);
    char a[25], b[25];
    memset(a, 'x', sizeof(a));
    ad_etag(body, sizeof(body), a);
    check_etag_shape(a);
    ad_etag(body, sizeof(body), b);
    assert_string_equal(a, b);

    /* A weak tag starts with W/; a strong one with the quote. */
    assert_int_not_equal(a[0], 'W');

    /* Changing any single byte, or the length, changes the tag. */
    for (size_t i = 0; i < sizeof(body); i++) {
        body[i] ^= 1;
        ad_etag(body, sizeof(body), b);
        check_etag_shape(b);
        if (strcmp(a, b) == 0)
            fail_msg("flipping byte %zu kept etag %s", i, a);
        body[i] ^= 1;
    }
    ad_etag(body, sizeof(body) - 1, b);
    assert_string_not_equal(a, b);

    /* Only len bytes count: what follows does not. */
    char longer[65];
    memcpy(longer, body, sizeof(body));
    longer[64] = 'Z';
    ad_etag(longer, sizeof(body), b);
    assert_string_equal(a, b);

    ad_etag("", 0, b);
    check_etag_shape(b);
    assert_string_not_equal(a, b);
}

/* ---- copies ---- */

static void test_dup_deep_copy(void **state)
{
    (void)state;
    struct ad_job *j = sample_job(AD_RUNNING);
    ad_job_set(&j->result, "{\"r\":1}");
    ad_job_set(&j->result_location, "https://loc");
    ad_job_set(&j->error, "{\"e\":1}");
    ad_job_set(&j->message, "msg");
    ad_job_set(&j->callback_url, "https://cb");
    ad_job_set(&j->retry_of, "job_prev");
    ad_job_set(&j->resource, "/v1/videos/1");
    ad_job_set(&j->lease_id, "lse_1");
    ad_job_set(&j->worker, "w1");
    ad_job_set(&j->group, "customer-42");
    j->progress = 7;
    j->priority = AD_PRIO_LOW;
    j->timeout_seconds = 60;
    j->on_complete_redirect = 1;
    j->lease_expires_at = 99;
    j->tombstoned = 1;
    j->seq = 11;
    j->cseq = 12;
    j->finished_at = 13;
    j->expires_at = 14;
    j->run_at = 15;
    j->started_at = 16;

    struct ad_job *d = ad_job_dup(j);
    char **fs[] = {&j->id,     &j->tenant,  &j->type,         &j->payload,  &j->result,   &j->result_location,
                   &j->error,  &j->message, &j->callback_url, &j->retry_of, &j->resource, &j->lease_id,
                   &j->worker, &j->group};
    char **fd[] = {&d->id,     &d->tenant,  &d->type,         &d->payload,  &d->result,   &d->result_location,
                   &d->error,  &d->message, &d->callback_url, &d->retry_of, &d->resource, &d->lease_id,
                   &d->worker, &d->group};
    size_t nf = sizeof(fs) / sizeof(fs[0]);
    char *orig[sizeof(fs) / sizeof(fs[0])];
    for (size_t i = 0; i < nf; i++) {
        assert_non_null(*fd[i]);
        assert_ptr_not_equal(*fd[i], *fs[i]);
        assert_string_equal(*fd[i], *fs[i]);
        orig[i] = ad_strdup(*fs[i]);
    }
    assert_int_equal(d->status, AD_RUNNING);
    assert_int_equal(d->progress, 7);
    assert_int_equal(d->priority, AD_PRIO_LOW);
    assert_int_equal(d->timeout_seconds, 60);
    assert_int_equal(d->on_complete_redirect, 1);
    assert_int_equal(d->lease_expires_at, 99);
    assert_int_equal(d->tombstoned, 1);
    assert_int_equal(d->seq, 11);
    assert_int_equal(d->cseq, 12);
    assert_int_equal(d->created_at, T_2026);
    assert_int_equal(d->updated_at, T_2026 + 1);
    assert_int_equal(d->finished_at, 13);
    assert_int_equal(d->expires_at, 14);
    assert_int_equal(d->run_at, 15);
    assert_int_equal(d->started_at, 16);

    /* Scribble over the copy's strings in place, replace them, then free it: the original is untouched. */
    for (size_t i = 0; i < nf; i++) {
        memset(*fd[i], '#', strlen(*fd[i]));
        ad_job_set(fd[i], "changed");
    }
    d->status = AD_FAILED;
    ad_job_free(d);
    for (size_t i = 0; i < nf; i++) {
        assert_string_equal(*fs[i], orig[i]);
        free(orig[i]);
    }
    assert_int_equal(j->status, AD_RUNNING);

    /* NULL strings stay NULL in the copy. */
    struct ad_job *empty = ad_job_new();
    struct ad_job *e2 = ad_job_dup(empty);
    assert_null(e2->id);
    assert_null(e2->payload);
    assert_null(e2->lease_id);
    assert_int_equal(e2->progress, -1);
    ad_job_free(e2);
    ad_job_free(empty);
    ad_job_free(j);
    ad_job_free(NULL);
}

static void test_job_set(void **state)
{
    (void)state;
    char *f = NULL;
    ad_job_set(&f, "one");
    assert_string_equal(f, "one");
    char src[] = "two";
    ad_job_set(&f, src);
    src[0] = 'X'; /* a copy, not the caller's buffer */
    assert_string_equal(f, "two");
    ad_job_set(&f, f); /* setting a field to its own value must not read freed memory */
    assert_string_equal(f, "two");
    ad_job_set(&f, NULL);
    assert_null(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_transition_exhaustive),
        cmocka_unit_test(test_transition_terminal_states_never_change),
        cmocka_unit_test(test_transition_named_rules),
        cmocka_unit_test(test_status_names),
        cmocka_unit_test(test_priority_names),
        cmocka_unit_test(test_render_every_field),
        cmocka_unit_test(test_render_nulls_and_defaults),
        cmocka_unit_test(test_render_unique_key),
        cmocka_unit_test(test_render_trace_id),
        cmocka_unit_test(test_render_result_and_error_by_status),
        cmocka_unit_test(test_render_result_location),
        cmocka_unit_test(test_render_escapes_strings),
        cmocka_unit_test(test_render_id_escaped),
        cmocka_unit_test(test_render_cap),
        cmocka_unit_test(test_etag),
        cmocka_unit_test(test_dup_deep_copy),
        cmocka_unit_test(test_job_set),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
