/*
 * test_sse.c - unit tests for src/sse.c's framing: ids, event names, and data split into one "data:" line per
 * line whatever the line break (LF, CR, CRLF), so that a client's parser gives back exactly the data sent.
 * The streams themselves need h2o and are covered by the black-box tests (tests/blackbox/sse*.test.mjs).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "http/sse.h"

static void expect_frame(int64_t id, const char *name, const char *data, size_t len, const char *want)
{
    struct ad_buf b;
    ad_buf_init(&b, SIZE_MAX);
    assert_int_equal(ad_sse_frame(&b, id, name, data, len), 0);
    if (b.len != strlen(want) || memcmp(b.data, want, b.len) != 0)
        fail_msg("frame:\n%.*s\nwant:\n%s", (int)b.len, b.data, want);
    ad_buf_free(&b);
}

static void frame(int64_t id, const char *name, const char *data, const char *want)
{
    expect_frame(id, name, data, strlen(data), want);
}

static void test_id_name_and_data(void **state)
{
    frame(42, "progress", "{\"p\":1}", "id: 42\nevent: progress\ndata: {\"p\":1}\n\n");
    frame(0, "done", "{}", "id: 0\nevent: done\ndata: {}\n\n");
    frame(INT64_MAX, "x", "y", "id: 9223372036854775807\nevent: x\ndata: y\n\n");
}

static void test_id_and_name_are_optional(void **state)
{
    frame(-1, NULL, "hello", "data: hello\n\n");
    frame(7, NULL, "hello", "id: 7\ndata: hello\n\n");
    frame(-1, "ping", "", "event: ping\ndata: \n\n");
}

static void test_every_line_break_starts_a_data_line(void **state)
{
    frame(-1, NULL, "a\nb", "data: a\ndata: b\n\n");
    frame(-1, NULL, "a\rb", "data: a\ndata: b\n\n");
    frame(-1, NULL, "a\r\nb", "data: a\ndata: b\n\n");
    frame(-1, NULL, "a\n\nb", "data: a\ndata: \ndata: b\n\n");
    frame(-1, NULL, "a\n", "data: a\ndata: \n\n");
    frame(-1, NULL, "\n", "data: \ndata: \n\n");
    frame(-1, NULL, "a\r\n\r\n", "data: a\ndata: \ndata: \n\n");
    frame(-1, NULL, "a\n\rb", "data: a\ndata: \ndata: b\n\n");
}

static void test_data_is_taken_by_length(void **state)
{
    /* Bytes past len are not sent. */
    expect_frame(1, NULL, "abcdef", 3, "id: 1\ndata: abc\n\n");
    expect_frame(1, NULL, "ab\ncd", 3, "id: 1\ndata: ab\ndata: \n\n");
}

static void test_cap(void **state)
{
    struct ad_buf b;
    ad_buf_init(&b, 10);
    assert_int_equal(ad_sse_frame(&b, 1, "progress", "{}", 2), -1);
    assert_true(b.toobig);
    ad_buf_free(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_id_name_and_data),
        cmocka_unit_test(test_id_and_name_are_optional),
        cmocka_unit_test(test_every_line_break_starts_a_data_line),
        cmocka_unit_test(test_data_is_taken_by_length),
        cmocka_unit_test(test_cap),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
