/*
 * test_api_page.c - unit tests for src/api/api_page.c: page tokens read back as the cursor they were made from,
 * and a token of another list, a made-up one or one too long is refused.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "api/api_int.h"

static void test_round_trip(void **state)
{
    (void)state;
    const int64_t cursors[] = {1, 42, INT64_C(1800000000000), INT64_MAX};
    const char *kinds[] = {"c1", "o1", "d1"};
    for (size_t k = 0; k < 3; k++) {
        for (size_t i = 0; i < sizeof(cursors) / sizeof(cursors[0]); i++) {
            char tok[AD_API_PAGE_TOKEN_MAX];
            ad_api_page_token(kinds[k], cursors[i], tok);
            assert_true(strlen(tok) > 0 && strlen(tok) < AD_API_PAGE_TOKEN_MAX);
            assert_null(strpbrk(tok, "+/=")); /* base64url, unpadded: safe in a query */
            int64_t got = 0;
            assert_int_equal(ad_api_page_token_parse(tok, kinds[k], &got), 0);
            assert_int_equal(got, cursors[i]);
        }
    }
}

static void test_the_format_is_kept(void **state)
{
    (void)state;
    /* Tokens handed out before stay valid: base64url("c1:42"). */
    char tok[AD_API_PAGE_TOKEN_MAX];
    ad_api_page_token("c1", 42, tok);
    assert_string_equal(tok, "YzE6NDI");
    int64_t got = 0;
    assert_int_equal(ad_api_page_token_parse("YzE6NDI", "c1", &got), 0);
    assert_int_equal(got, 42);
}

static void test_refused(void **state)
{
    (void)state;
    char tok[AD_API_PAGE_TOKEN_MAX];
    int64_t got = 7;
    ad_api_page_token("o1", 42, tok);
    assert_int_equal(ad_api_page_token_parse(tok, "c1", &got), -1); /* another list's */
    assert_int_equal(ad_api_page_token_parse("", "c1", &got), -1);
    assert_int_equal(ad_api_page_token_parse("!!!", "c1", &got), -1);
    assert_int_equal(ad_api_page_token_parse("YzE6", "c1", &got), -1);     /* "c1:" */
    assert_int_equal(ad_api_page_token_parse("YzE6MA", "c1", &got), -1);   /* "c1:0" */
    assert_int_equal(ad_api_page_token_parse("YzE6LTE", "c1", &got), -1);  /* "c1:-1" */
    assert_int_equal(ad_api_page_token_parse("YzE6NDJ4", "c1", &got), -1); /* "c1:42x" */
    assert_int_equal(ad_api_page_token_parse("YzE7NDI", "c1", &got), -1);  /* "c1;42" */
    char longer[64];
    memset(longer, 'A', sizeof(longer) - 1);
    longer[sizeof(longer) - 1] = '\0';
    assert_int_equal(ad_api_page_token_parse(longer, "c1", &got), -1);
    assert_int_equal(got, 7); /* untouched */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_the_format_is_kept),
        cmocka_unit_test(test_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
