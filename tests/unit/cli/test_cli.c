/*
 * test_cli.c - unit tests for the pure parts of src/cli/cli.c: the text/event-stream parser (fields, line
 * endings, events cut across reads, the cap) and the poll delay (Retry-After obeyed, backoff doubling to its
 * cap, jitter that never makes a wait shorter than the one before).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "common/util.h"

struct seen {
    int n;
    char event[8][64];
    char data[8][256];
    char id[8][64];
};

static void on_event(void *ctx, const char *event, const char *data, size_t len, const char *id)
{
    struct seen *s = ctx;
    assert_true(s->n < 8);
    assert_int_equal(strlen(data), len);
    snprintf(s->event[s->n], sizeof(s->event[0]), "%s", event);
    snprintf(s->data[s->n], sizeof(s->data[0]), "%s", data);
    snprintf(s->id[s->n], sizeof(s->id[0]), "%s", id);
    s->n++;
}

static void feed_all(const char *text, size_t step, struct seen *s, long long *retry)
{
    struct ad_cli_sse p;
    ad_cli_sse_init(&p, on_event, s);
    size_t n = strlen(text);
    for (size_t i = 0; i < n; i += step)
        assert_int_equal(ad_cli_sse_feed(&p, text + i, i + step <= n ? step : n - i), 0);
    if (retry != NULL)
        *retry = p.retry;
    ad_cli_sse_free(&p);
}

static void test_sse_events(void **state)
{
    (void)state;
    const char *text = "retry: 2000\n\n: a comment\nid: 7\nevent: status\ndata: {\"a\":1}\n\n"
                       "id: 8\r\nevent: progress\r\ndata: line1\r\ndata:line2\r\n\r\n"
                       "data: no name\rid: 9\r\r"
                       "event: done\nid: 10\ndata\n\n"
                       "event: skipped\n\n"
                       "data: not dispatched without a blank line";
    /* Whole, and cut at every size down to one byte at a time: the same events. */
    for (size_t step = strlen(text); step >= 1; step = step > 7 ? step / 2 : step - 1) {
        struct seen s;
        memset(&s, 0, sizeof(s));
        long long retry = 0;
        feed_all(text, step, &s, &retry);
        assert_int_equal(retry, 2000);
        assert_int_equal(s.n, 4);
        assert_string_equal(s.event[0], "status");
        assert_string_equal(s.data[0], "{\"a\":1}");
        assert_string_equal(s.id[0], "7");
        assert_string_equal(s.event[1], "progress");
        assert_string_equal(s.data[1], "line1\nline2");
        assert_string_equal(s.id[1], "8");
        assert_string_equal(s.event[2], "message");
        assert_string_equal(s.data[2], "no name");
        assert_string_equal(s.id[2], "9"); /* an id line anywhere before the blank line counts */
        assert_string_equal(s.event[3], "done");
        assert_string_equal(s.data[3], "");
        assert_string_equal(s.id[3], "10");
    }
}

static void test_sse_cap(void **state)
{
    (void)state;
    struct seen s;
    memset(&s, 0, sizeof(s));
    struct ad_cli_sse p;
    ad_cli_sse_init(&p, on_event, &s);
    size_t chunk = 1024 * 1024;
    char *big = ad_malloc(chunk);
    memset(big, 'x', chunk);
    int rc = 0;
    for (size_t sent = 0; rc == 0 && sent <= AD_CLI_SSE_MAX; sent += chunk)
        rc = ad_cli_sse_feed(&p, big, chunk);
    assert_int_equal(rc, -1);
    assert_true(p.toobig);
    assert_int_equal(ad_cli_sse_feed(&p, "\n\n", 2), -1);
    assert_int_equal(s.n, 0);
    free(big);
    ad_cli_sse_free(&p);
}

static void test_poll_delay(void **state)
{
    (void)state;
    int64_t backoff = AD_CLI_BACKOFF_MIN_MS;
    /* Retry-After is obeyed (with at most 10% on top) and leaves the backoff alone. */
    assert_int_equal(ad_cli_poll_delay(3, &backoff, 0.0), 3000);
    assert_true(ad_cli_poll_delay(3, &backoff, 0.999) < 3300);
    assert_int_equal(ad_cli_poll_delay(0, &backoff, 0.0), 1000); /* never a busy loop */
    assert_int_equal(backoff, AD_CLI_BACKOFF_MIN_MS);
    /* Without it: 1, 2, 4, 8, 16, then 30 s, each with at most a quarter more, never shorter than before. */
    int64_t want[] = {1000, 2000, 4000, 8000, 16000, 30000, 30000};
    int64_t prev = 0;
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        int64_t lo_b = backoff;
        int64_t d = ad_cli_poll_delay(-1, &backoff, i % 2 ? 0.999 : 0.0);
        assert_true(d >= want[i]);
        assert_true(d <= want[i] + want[i] / 4 && d <= AD_CLI_BACKOFF_MAX_MS);
        assert_true(d >= prev);
        assert_true(backoff >= lo_b);
        prev = d;
    }
    assert_int_equal(backoff, AD_CLI_BACKOFF_MAX_MS);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sse_events),
        cmocka_unit_test(test_sse_cap),
        cmocka_unit_test(test_poll_delay),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
