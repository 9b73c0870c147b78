/*
 * test_error.c - unit tests for src/error.c: every AD_ERRNO_MAP entry is well formed and looked up as listed,
 * every problem code the protocol documents exists with its documented status, and out-of-range codes fall
 * back to internal/500.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "common/error.h"

/* The map as the test sees it, expanded independently of error.c's table. */
static const struct {
    ad_err e;
    const char *name;
    const char *code;
    int status;
    const char *title;
} map[] = {
#define ROW(e, code, status, title) {AD_E_##e, #e, code, status, title},
    AD_ERRNO_MAP(ROW)
#undef ROW
};
#define NMAP (sizeof(map) / sizeof(map[0]))

static void test_map_entries_well_formed(void **state)
{
    (void)state;
    assert_int_equal(NMAP, AD_E__COUNT);
    assert_int_equal(AD_E_OK, 0); /* callers test `e != AD_E_OK` and zero-initialised ops start as OK */
    for (size_t i = 0; i < NMAP; i++) {
        assert_int_equal(map[i].e, (ad_err)i);
        const char *code = map[i].code;
        if (code == NULL || code[0] == '\0')
            fail_msg("AD_E_%s: empty code", map[i].name);
        /* The code is the last segment of the problem type URI: lowercase words joined by single hyphens. */
        for (const char *p = code; *p != '\0'; p++) {
            int ok = (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || (*p == '-' && p != code && p[1] != '\0');
            if (!ok || (*p == '-' && p[1] == '-'))
                fail_msg("AD_E_%s: code \"%s\" is not a lowercase-hyphen token", map[i].name, code);
        }
        int st = map[i].status;
        if (i == AD_E_OK) {
            assert_int_equal(st, 200);
        } else if (!(st >= 400 && st <= 599)) {
            fail_msg("AD_E_%s: status %d is not 4xx/5xx", map[i].name, st);
        }
        if (map[i].title == NULL || map[i].title[0] == '\0')
            fail_msg("AD_E_%s: empty title", map[i].name);

        /* The lookups answer exactly what the map lists. */
        assert_string_equal(ad_err_code(map[i].e), code);
        assert_int_equal(ad_err_status(map[i].e), st);
        assert_string_equal(ad_err_title(map[i].e), map[i].title);
    }
}

static void test_codes_unique(void **state)
{
    (void)state;
    for (size_t i = 0; i < NMAP; i++) {
        for (size_t k = i + 1; k < NMAP; k++) {
            if (strcmp(map[i].code, map[k].code) == 0)
                fail_msg("AD_E_%s and AD_E_%s share code \"%s\"", map[i].name, map[k].name, map[i].code);
        }
    }
}

/* An error h2o answers itself gets the first code of its status (src/http.c), so that one must be generic. */
static void test_first_code_of_each_status_is_the_generic_one(void **state)
{
    (void)state;
    static const struct {
        int status;
        ad_err e;
    } want[] = {
        {400, AD_E_INVALID_REQUEST}, {404, AD_E_NOT_FOUND}, {413, AD_E_PAYLOAD_TOO_LARGE}, {500, AD_E_INTERNAL}};
    for (size_t w = 0; w < sizeof(want) / sizeof(want[0]); w++) {
        size_t i = 0;
        while (i < NMAP && map[i].status != want[w].status)
            i++;
        if (i == NMAP || map[i].e != want[w].e)
            fail_msg("status %d: the first code is %s", want[w].status, i == NMAP ? "missing" : map[i].code);
    }
}

static void test_documented_problems(void **state)
{
    (void)state;
    /* docs/protocol.md: each problem it names, with the status it gives. */
    static const struct {
        ad_err e;
        const char *code;
        int status;
    } doc[] = {
        {AD_E_UNAUTHORIZED, "unauthorized", 401},
        {AD_E_FORBIDDEN, "forbidden", 403},
        {AD_E_NOT_FOUND, "not-found", 404},
        {AD_E_MALFORMED_JSON, "malformed-json", 400},
        {AD_E_UNSUPPORTED_MEDIA_TYPE, "unsupported-media-type", 415},
        {AD_E_PAYLOAD_TOO_LARGE, "payload-too-large", 413},
        {AD_E_VALIDATION_FAILED, "validation-failed", 422},
        {AD_E_UNKNOWN_TYPE, "unknown-type", 422},
        {AD_E_IDEMPOTENCY_KEY_INVALID, "idempotency-key-invalid", 400},
        {AD_E_IDEMPOTENCY_KEY_REUSED, "idempotency-key-reused", 422},
        {AD_E_IDEMPOTENCY_IN_FLIGHT, "idempotency-key-in-flight", 409},
        {AD_E_IDEMPOTENCY_KEY_MISSING, "idempotency-key-missing", 400},
        {AD_E_JOB_CANCELLED, "job-cancelled", 409},
        {AD_E_RESULT_NOT_READY, "result-not-ready", 404},
        {AD_E_GONE, "gone", 410},
        {AD_E_INVALID_REQUEST, "invalid-request", 400},
        {AD_E_ILLEGAL_TRANSITION, "illegal-transition", 409},
        {AD_E_STALE_LEASE, "stale-lease", 409},
        {AD_E_UNAVAILABLE, "unavailable", 503},
        {AD_E_STORAGE_FULL, "storage-full", 503},
        {AD_E_INTERNAL, "internal", 500},
        /* "Result artifacts" */
        {AD_E_DIGEST_MISMATCH, "digest-mismatch", 400},
        {AD_E_UPLOAD_OFFSET, "upload-offset-mismatch", 409},
        {AD_E_ARTIFACT_INCOMPLETE, "artifact-incomplete", 409},
        {AD_E_RANGE_NOT_SATISFIABLE, "range-not-satisfiable", 416},
    };
    for (size_t i = 0; i < sizeof(doc) / sizeof(doc[0]); i++) {
        assert_string_equal(ad_err_code(doc[i].e), doc[i].code);
        if (ad_err_status(doc[i].e) != doc[i].status)
            fail_msg("%s: status %d, protocol says %d", doc[i].code, ad_err_status(doc[i].e), doc[i].status);
    }
}

static void test_out_of_range_is_internal(void **state)
{
    (void)state;
    const ad_err bad[] = {AD_E__COUNT, (ad_err)(AD_E__COUNT + 1), (ad_err)1000, (ad_err)0x7fffffff, (ad_err)-1};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_string_equal(ad_err_code(bad[i]), "internal");
        assert_int_equal(ad_err_status(bad[i]), 500);
        assert_string_equal(ad_err_title(bad[i]), ad_err_title(AD_E_INTERNAL));
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_map_entries_well_formed),
        cmocka_unit_test(test_codes_unique),
        cmocka_unit_test(test_first_code_of_each_status_is_the_generic_one),
        cmocka_unit_test(test_documented_problems),
        cmocka_unit_test(test_out_of_range_is_internal),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
