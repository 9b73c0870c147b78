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
#include "job.h"
#include "store.h"

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

/* The ids of a list, in order, comma separated, are want. */
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
#define ST_CHECK(name, kind, n) ST_CHECK_##kind(name)
    AD_JOB_COLUMNS(ST_CHECK)
#undef ST_CHECK
#undef ST_CHECK_TIME
#undef ST_CHECK_PROG
#undef ST_CHECK_INT
#undef ST_CHECK_TEXT
}

#endif
