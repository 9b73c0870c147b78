/*
 * test_client.c - unit tests for src/worker/client.c, what the worker and the CLI share: the job id check,
 * header lines, an answer read as JSON, a failed request described for logs, and UTF-8 cutting.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "worker/client.h"

static void test_id_ok(void **state)
{
    (void)state;
    char max[130];
    memset(max, 'a', 128);
    max[128] = '\0';
    assert_true(ad_client_id_ok("job_0AZaz-9"));
    assert_true(ad_client_id_ok(max));
    max[128] = 'a';
    max[129] = '\0';
    assert_false(ad_client_id_ok(max)); /* 129 characters */
    static const char *const bad[] = {"", "a/b", "a b", "a?b", "a%2F", "..", "é"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        if (ad_client_id_ok(bad[i]))
            fail_msg("accepted '%s'", bad[i]);
}

static void test_header_add(void **state)
{
    (void)state;
    struct curl_slist *h = ad_client_header_add(NULL, "Lease-Id: %s", "l1");
    h = ad_client_header_add(h, "Upload-Offset: %llu", 18446744073709551615ull);
    assert_string_equal(h->data, "Lease-Id: l1");
    assert_string_equal(h->next->data, "Upload-Offset: 18446744073709551615");
    assert_null(h->next->next);
    curl_slist_free_all(h);
}

static void test_json_and_describe(void **state)
{
    (void)state;
    struct ad_buf b;
    ad_buf_init(&b, 1024);
    assert_null(ad_client_json(&b, 0, NULL)); /* nothing came: data is NULL */
    json_error_t e;
    assert_null(ad_client_json(&b, JSON_DECODE_ANY, &e));
    const char *p = "{\"type\":\"x\",\"code\":\"stale-lease\",\"detail\":\"the lease\\u0007 moved\"}";
    ad_buf_append(&b, p, strlen(p));
    json_t *v = ad_client_json(&b, 0, NULL);
    assert_string_equal(json_string_value(json_object_get(v, "code")), "stale-lease");
    json_decref(v);
    char *d = ad_client_describe(CURLE_OK, "", 409, &b);
    assert_string_equal(d, "HTTP 409 stale-lease: the lease? moved"); /* control characters cleaned */
    free(d);
    d = ad_client_describe(CURLE_COULDNT_CONNECT, "Connection refused", 0, &b);
    assert_string_equal(d, "Connection refused");
    free(d);
    ad_buf_free(&b);
}

static void test_utf8_cut(void **state)
{
    (void)state;
    char s[] = "ab\xc3\xa9z"; /* "abéz" */
    ad_client_utf8_cut(s, 3); /* inside é: cut before it */
    assert_string_equal(s, "ab");
    char t[] = "abc";
    ad_client_utf8_cut(t, 10);
    assert_string_equal(t, "abc");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_id_ok),
        cmocka_unit_test(test_header_add),
        cmocka_unit_test(test_json_and_describe),
        cmocka_unit_test(test_utf8_cut),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
