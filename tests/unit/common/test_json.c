/*
 * test_json.c - unit tests for src/common/json.c, the one JSON writer: string escaping (every one- and two-byte
 * string, and the edges of UTF-8, against jansson and against what a lenient decoder shows), the escaped text
 * of a string written in pieces, times, spliced JSON, numbers and literals, member keys, and the sticky error
 * at a buffer's cap.
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

#include "common/json.h"

static void test_json_str(void **state)
{
    (void)state;
    struct ad_buf b;
    ad_buf_init(&b, SIZE_MAX);
    assert_int_equal(ad_json_str(&b, NULL), 0);
    assert_int_equal(ad_json_str(&b, ""), 0);
    assert_int_equal(ad_json_str(&b, "a\"b\\c\n\r\t\x01\x1f"), 0);
    assert_int_equal(ad_buf_append(&b, "", 1), 0);
    assert_string_equal(b.data, "null\"\"\"a\\\"b\\\\c\\n\\r\\t\\u0001\\u001f\"");
    ad_buf_free(&b);

    /* The buffer's cap is reported, never overrun. */
    ad_buf_init(&b, 8);
    assert_int_equal(ad_json_str(&b, "0123456789"), -1);
    assert_true(b.len <= 8);
    assert_true(b.toobig);
    ad_buf_free(&b);
}

/* s written by ad_json_str, without its quotes, as a NUL-terminated string the caller frees. */
static char *json_str_body(const char *s)
{
    struct ad_buf b;
    ad_buf_init(&b, SIZE_MAX);
    assert_int_equal(ad_json_str(&b, s), 0);
    assert_true(b.len >= 2 && b.data[0] == '"' && b.data[b.len - 1] == '"');
    char *out = ad_strndup(b.data + 1, b.len - 2);
    ad_buf_free(&b);
    return out;
}

#define FFFD "\xef\xbf\xbd"

static void test_json_str_utf8(void **state)
{
    (void)state;
    /* What TextDecoder('utf-8') gives for the same bytes: one U+FFFD per maximal subpart (Unicode §3.9). */
    static const struct {
        const char *in, *out;
    } cases[] = {
        {"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"}, /* kept */
        {"\xef\xbf\xbd", FFFD},                                       /* U+FFFD itself is valid */
        {"\xf4\x8f\xbf\xbf", "\xf4\x8f\xbf\xbf"},                     /* U+10FFFF, the last code point */
        {"\xff", FFFD},                                               /* never in UTF-8 */
        {"unknown status \xff", "unknown status " FFFD},              /* the byte of ?status=%ff */
        {"/v1/jobs/\xff\xfe", "/v1/jobs/" FFFD FFFD},                 /* one each: neither starts a sequence */
        {"\x80", FFFD},                                               /* a lone continuation byte */
        {"\xc0\xaf", FFFD FFFD},                                      /* overlong '/': C0 never starts one */
        {"\xc1\xbf", FFFD FFFD},                                      /* overlong DEL */
        {"\xe0\x80\xaf", FFFD FFFD FFFD},                             /* overlong, three bytes */
        {"\xf0\x80\x80\xaf", FFFD FFFD FFFD FFFD},                    /* overlong, four bytes */
        {"\xed\xa0\x80", FFFD FFFD FFFD},                             /* U+D800, a surrogate */
        {"\xed\xbf\xbf", FFFD FFFD FFFD},                             /* U+DFFF */
        {"\xed\x9f\xbf", "\xed\x9f\xbf"},                             /* U+D7FF, just below them */
        {"\xf4\x90\x80\x80", FFFD FFFD FFFD FFFD},                    /* U+110000, past the last */
        {"\xf5\x80\x80\x80", FFFD FFFD FFFD FFFD},                    /* F5 never starts one */
        {"\xe2\x82", FFFD},                                           /* truncated at the end: one */
        {"\xe2\x82x", FFFD "x"},                                      /* truncated before ASCII */
        {"\xf0\x9f\x98", FFFD},                                       /* three of four bytes */
        {"\xf0\x9f\x98\xc3\xa9", FFFD "\xc3\xa9"},                    /* cut by a new sequence, which is kept */
        {"a\"\xff\n\xc3\xa9\x01", "a\\\"" FFFD "\\n\xc3\xa9\\u0001"}, /* with escapes around */
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char *got = json_str_body(cases[i].in);
        if (strcmp(got, cases[i].out) != 0)
            fail_msg("case %zu: got \"%s\", want \"%s\"", i, got, cases[i].out);
        free(got);
    }
}

/* Every string of one or two bytes, and of three and four bytes over the edges of the continuation ranges:
 * the output parses with jansson (which refuses what is not UTF-8); text jansson takes as UTF-8 comes back
 * exactly, and text it refuses comes back with U+FFFD in it. */
static void check_utf8_case(const unsigned char *in, size_t n)
{
    char s[8];
    memcpy(s, in, n);
    s[n] = '\0';
    struct ad_buf b;
    ad_buf_init(&b, SIZE_MAX);
    assert_int_equal(ad_json_str(&b, s), 0);
    json_t *doc = json_loadb(b.data, b.len, JSON_DECODE_ANY, NULL);
    if (doc == NULL)
        fail_msg("%02x %02x %02x %02x (%zu bytes): output is not JSON", in[0], in[1], in[2], in[3], n);
    json_t *probe = json_stringn(s, n);
    if (probe != NULL)
        assert_string_equal(json_string_value(doc), s);
    else
        assert_non_null(strstr(json_string_value(doc), FFFD));
    json_decref(probe);
    json_decref(doc);
    ad_buf_free(&b);
}

static void test_json_str_utf8_exhaustive(void **state)
{
    (void)state;
    static const unsigned char edges[] = {0x01, 0x41, 0x7f, 0x80, 0x8f, 0x90, 0x9f, 0xa0, 0xbf, 0xc0, 0xff};
    unsigned char in[4] = {0};
    for (unsigned a = 1; a < 256; a++) {
        in[0] = (unsigned char)a;
        check_utf8_case(in, 1);
        for (unsigned c = 1; c < 256; c++) {
            in[1] = (unsigned char)c;
            check_utf8_case(in, 2);
        }
        if (a < 0xe0 || a > 0xf7)
            continue;
        for (size_t x = 0; x < sizeof(edges); x++)
            for (size_t y = 0; y < sizeof(edges); y++) {
                in[1] = edges[x];
                in[2] = edges[y];
                check_utf8_case(in, 3);
                for (size_t z = 0; z < sizeof(edges); z++) {
                    in[3] = edges[z];
                    check_utf8_case(in, 4);
                }
            }
    }
}

/* 2026-11-30T18:11:40.123Z */
#define T_2026 ((int64_t)1796062300 * 1000 + 123)

/* What the appends f made to a fresh unbounded buffer, checked against want. */
#define EXPECT_WRITE(want, f)                                                                                          \
    do {                                                                                                               \
        struct ad_buf b_;                                                                                              \
        ad_buf_init(&b_, SIZE_MAX);                                                                                    \
        struct ad_buf *b = &b_;                                                                                        \
        assert_int_equal((f), 0);                                                                                      \
        assert_int_equal(ad_json_end(b), 0);                                                                           \
        if (b->len != strlen(want) || memcmp(b->data, (want), b->len) != 0)                                            \
            fail_msg("%s: wrote '%.*s', want '%s'", #f, (int)b->len, b->data, (want));                                 \
        ad_buf_free(b);                                                                                                \
    } while (0)

static void test_json_chars(void **state)
{
    (void)state;
    /* The text between the quotes of ad_json_str, for a string written in pieces. */
    EXPECT_WRITE("", ad_json_chars(b, ""));
    EXPECT_WRITE("wh_abc-_", ad_json_chars(b, "wh_abc-_"));
    EXPECT_WRITE("a\\\"b\\\\c\\n\\u0001" FFFD, ad_json_chars(b, "a\"b\\c\n\x01\xff"));
    assert_int_equal(ad_json_plain_len(""), 0);
    assert_int_equal(ad_json_plain_len("job_abc"), 7);
    assert_int_equal(ad_json_plain_len("ab\"c"), 2);
    assert_int_equal(ad_json_plain_len("ab\\c"), 2);
    assert_int_equal(ad_json_plain_len("ab\nc"), 2);
    assert_int_equal(ad_json_plain_len("caf\xc3\xa9"), 3);
    assert_int_equal(ad_json_plain_len("a\x7f"), 2); /* DEL is printable enough for JSON */
}

static void test_json_time(void **state)
{
    (void)state;
    EXPECT_WRITE("null", ad_json_time(b, 0));
    EXPECT_WRITE("\"2026-11-30T18:11:40.123Z\"", ad_json_time(b, T_2026));
    EXPECT_WRITE("\"1970-01-01T00:00:00.001Z\"", ad_json_time(b, 1));
}

static void test_json_values(void **state)
{
    (void)state;
    EXPECT_WRITE("0", ad_json_int(b, 0));
    EXPECT_WRITE("-9223372036854775808", ad_json_int(b, INT64_MIN));
    EXPECT_WRITE("9223372036854775807", ad_json_int(b, INT64_MAX));
    EXPECT_WRITE("true", ad_json_bool(b, 7));
    EXPECT_WRITE("false", ad_json_bool(b, 0));
    EXPECT_WRITE("null", ad_json_null(b));
    /* Stored JSON is spliced as it is, never parsed or escaped again. */
    EXPECT_WRITE("{\"a\":[1,\"\\u00e9\"]}", ad_json_raw(b, "{\"a\":[1,\"\\u00e9\"]}"));
    EXPECT_WRITE("null", ad_json_raw(b, NULL));
    EXPECT_WRITE("[1]", ad_json_rawn(b, "[1]xyz", 3));
    EXPECT_WRITE("{\"id\":", AD_JSON_OPEN(b, "id"));
    EXPECT_WRITE(",\"lastUpdatedAt\":", AD_JSON_KEY(b, "lastUpdatedAt"));
}

/* A document written from the pieces parses back with jansson to what was written. */
static void test_json_document(void **state)
{
    (void)state;
    struct ad_buf b;
    ad_buf_init(&b, SIZE_MAX);
    AD_JSON_OPEN(&b, "id");
    ad_json_str(&b, "wh_1");
    AD_JSON_KEY(&b, "n");
    ad_json_int(&b, -3);
    AD_JSON_KEY(&b, "on");
    ad_json_bool(&b, 1);
    AD_JSON_KEY(&b, "at");
    ad_json_time(&b, T_2026);
    AD_JSON_KEY(&b, "never");
    ad_json_time(&b, 0);
    AD_JSON_KEY(&b, "self");
    AD_BUF_LIT(&b, "\"/v1/webhooks/");
    ad_json_chars(&b, "a\"b");
    AD_BUF_LIT(&b, "\"");
    AD_JSON_KEY(&b, "payload");
    ad_json_raw(&b, "{\"x\":[true]}");
    AD_BUF_LIT(&b, "}");
    assert_int_equal(ad_json_end(&b), 0);
    json_error_t err;
    json_t *doc = json_loadb(b.data, b.len, 0, &err);
    if (doc == NULL)
        fail_msg("not JSON (%s): %s", err.text, b.data);
    assert_string_equal(json_string_value(json_object_get(doc, "id")), "wh_1");
    assert_int_equal(json_integer_value(json_object_get(doc, "n")), -3);
    assert_true(json_is_true(json_object_get(doc, "on")));
    assert_string_equal(json_string_value(json_object_get(doc, "at")), "2026-11-30T18:11:40.123Z");
    assert_true(json_is_null(json_object_get(doc, "never")));
    assert_string_equal(json_string_value(json_object_get(doc, "self")), "/v1/webhooks/a\"b");
    assert_true(json_is_true(json_array_get(json_object_get(json_object_get(doc, "payload"), "x"), 0)));
    json_decref(doc);
    ad_buf_free(&b);
}

/* One append refused at the cap is enough for ad_json_end to report the whole render, however many appends
 * followed it and fitted; nothing is written past the cap. */
static void test_json_sticky_error(void **state)
{
    (void)state;
    struct ad_buf b;
    ad_buf_init(&b, 16);
    AD_JSON_OPEN(&b, "id");
    assert_int_equal(ad_json_end(&b), 0);
    assert_int_equal(ad_json_str(&b, "a string too long to fit"), -1);
    assert_int_equal(ad_json_end(&b), -1);
    assert_int_equal(ad_json_null(&b), 0); /* fits, but the text is already cut */
    assert_int_equal(ad_json_end(&b), -1);
    assert_true(b.len <= 16);
    assert_int_equal(ad_json_time(&b, T_2026), -1);
    assert_int_equal(ad_json_chars(&b, "0123456789abcdef"), -1);
    assert_int_equal(ad_json_raw(&b, "[1,2,3,4,5,6,7,8]"), -1);
    assert_true(b.len <= 16);
    assert_int_equal(ad_json_end(&b), -1);
    ad_buf_free(&b);
    /* A fresh buffer starts clean. */
    ad_buf_init(&b, 16);
    assert_int_equal(ad_json_end(&b), 0);
    ad_buf_free(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_json_str),
        cmocka_unit_test(test_json_str_utf8),
        cmocka_unit_test(test_json_str_utf8_exhaustive),
        cmocka_unit_test(test_json_chars),
        cmocka_unit_test(test_json_time),
        cmocka_unit_test(test_json_values),
        cmocka_unit_test(test_json_document),
        cmocka_unit_test(test_json_sticky_error),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
