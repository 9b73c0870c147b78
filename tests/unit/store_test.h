/*
 * store_test.h - what the store backends' unit tests share: a clock, a job to store, and assertions on what
 * comes back. Included by tests/unit/test_store_*.c only.
 */
#ifndef AD_STORE_TEST_H
#define AD_STORE_TEST_H

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>
#include "job/job.h"
#include "store/store_int.h"

#define T0 INT64_C(1800000000000)

static inline void assert_str_eq(const char *a, const char *b, const char *what)
{
    if (a == NULL && b == NULL)
        return;
    if (a == NULL || b == NULL || strcmp(a, b) != 0)
        fail_msg("%s: \"%s\" != \"%s\"", what, a != NULL ? a : "(null)", b != NULL ? b : "(null)");
}

static inline struct ad_job *new_job(const char *id, const char *tenant, const char *type, enum ad_status status,
                                     enum ad_priority priority)
{
    struct ad_job *j = ad_job_new();
    ad_job_set(&j->id, id);
    ad_job_set(&j->tenant, tenant);
    ad_job_set(&j->type, type);
    ad_job_set(&j->payload, "{\"n\":1}");
    j->status = status;
    j->priority = priority;
    j->max_attempts = 3;
    j->created_at = T0;
    j->updated_at = T0;
    return j;
}

/* job_full of tenant t1: every column set, none to its default, and text that needs quoting. */
static inline struct ad_job *new_full_job(void)
{
    struct ad_job *j = new_job("job_full", "t1", "video.transcode", AD_RUNNING, AD_PRIO_HIGH);
    j->progress = 42;
    ad_job_set(&j->payload, "{\"text\":\"caf\xc3\xa9 'quoted' \\\"x\\\" \\\\ {a,b}\"}");
    ad_job_set(&j->result, "{\"ok\":true}");
    ad_job_set(&j->result_location, "https://r.example/x");
    ad_job_set(&j->error, "{\"code\":\"x\"}");
    ad_job_set(&j->message, "halfway");
    j->attempt = 2;
    j->max_attempts = 5;
    j->cancel_requested = 1;
    j->timeout_seconds = 600;
    j->on_complete_redirect = 1;
    j->created_at = T0 + 1;
    j->started_at = T0 + 2;
    j->updated_at = T0 + 3;
    j->finished_at = T0 + 4;
    j->expires_at = T0 + 5;
    j->run_at = T0 + 6;
    ad_job_set(&j->callback_url, "https://cb.example/hook");
    ad_job_set(&j->retry_of, "job_old");
    ad_job_set(&j->resource, "/v1/videos/job_full");
    ad_job_set(&j->lease_id, "lse_1");
    j->lease_expires_at = INT64_C(9007199254740993); /* beyond a double's precision */
    ad_job_set(&j->worker, "w1");
    j->tombstoned = 1;
    ad_job_set(&j->unique_key, "report-7 'q' \"x\" caf\xc3\xa9");
    ad_job_set(&j->traceparent, "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01");
    ad_job_set(&j->tracestate, "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE");
    ad_job_set(&j->schedule, "{\"id\":\"nightly\",\"fireTime\":\"2027-01-15T08:00:00.000Z\"}");
    return j;
}

/* The ids of a list, in order, comma separated, are want. */
/* A job stored with only its required fields reads back with every optional field empty. */
static inline void assert_job_minimal(const struct ad_job *g)
{
    assert_int_equal(g->progress, -1);
    assert_null(g->result);
    assert_null(g->result_location);
    assert_null(g->error);
    assert_null(g->message);
    assert_null(g->callback_url);
    assert_null(g->retry_of);
    assert_null(g->resource);
    assert_null(g->lease_id);
    assert_null(g->worker);
    assert_null(g->traceparent);
    assert_null(g->tracestate);
    assert_int_equal(g->created_at, 0);
    assert_int_equal(g->started_at, 0);
    assert_int_equal(g->finished_at, 0);
    assert_int_equal(g->expires_at, 0);
    assert_int_equal(g->run_at, 0);
    assert_int_equal(g->lease_expires_at, 0);
}

static inline void assert_ids(const struct ad_job_list *l, const char *want)
{
    char got[1024] = "";
    size_t len = 0;
    for (size_t i = 0; i < l->n && len < sizeof(got); i++)
        len += (size_t)snprintf(got + len, sizeof(got) - len, "%s%s", i ? "," : "", l->items[i]->id);
    assert_string_equal(got, want);
}

static inline void assert_int64_field(int64_t got, int64_t want, const char *what)
{
    if (got != want)
        fail_msg("%s: %lld != %lld", what, (long long)got, (long long)want);
}

/* Every stored column of got (AD_JOB_COLUMNS) is as in want. */
static inline void assert_job_equal(const struct ad_job *got, const struct ad_job *want)
{
#define ST_CHECK_TEXT(name) assert_str_eq(got->name, want->name, #name);
#define ST_CHECK_INT(name) assert_int64_field(got->name, want->name, #name);
#define ST_CHECK_PROG(name) ST_CHECK_INT(name)
#define ST_CHECK_TIME(name) ST_CHECK_INT(name)
#define ST_CHECK(name, kind, n, fixed) ST_CHECK_##kind(name)
    AD_JOB_COLUMNS(ST_CHECK)
    /* The columns kept beside the list (store_int.h), set on insert only. */
    ST_CHECK_TEXT(traceparent)
    ST_CHECK_TEXT(tracestate)
#undef ST_CHECK
#undef ST_CHECK_TIME
#undef ST_CHECK_PROG
#undef ST_CHECK_INT
#undef ST_CHECK_TEXT
}

#endif
