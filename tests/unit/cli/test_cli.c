/*
 * test_cli.c - unit tests for the pure parts of src/cli/cli.c: the text/event-stream parser (fields, line
 * endings, events cut across reads, the cap) and the poll delay (Retry-After obeyed, backoff doubling to its
 * cap, jitter that never makes a wait shorter than the one before), the tables of --output table and the usage
 * errors.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli_int.h"
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

/* What fn printed on stdout (at most 4 KiB), NUL-terminated into out. */
static void capture(void (*fn)(void *), void *arg, char *out, size_t n)
{
    char path[] = "/tmp/acceptd-cli-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    unlink(path);
    fflush(stdout);
    int saved = dup(STDOUT_FILENO);
    dup2(fd, STDOUT_FILENO);
    fn(arg);
    fflush(stdout);
    dup2(saved, STDOUT_FILENO);
    close(saved);
    ssize_t got = pread(fd, out, n - 1, 0);
    out[got > 0 ? got : 0] = '\0';
    close(fd);
}

static void print_jobs_table(void *arg)
{
    json_t *jobs = arg;
    json_t *v[2] = {json_array_get(jobs, 0), json_array_get(jobs, 1)};
    ad_cli_print_jobs(v, 2, 1);
    ad_cli_print_jobs(v, 1, 0); /* a later part: same widths, no header */
}

static void print_right(void *arg)
{
    (void)arg;
    static const char *const heads[] = {"N", "NAME", "LAST"};
    char **cells = ad_calloc(6, sizeof(char *));
    const char *v[] = {"7", "a", "x y", "123", "bcd", "-"};
    for (int i = 0; i < 6; i++)
        cells[i] = ad_strdup(v[i]);
    ad_cli_print_table(heads, 1, cells, 2, 3, 1u << 0);
}

static void test_tables(void **state)
{
    (void)state;
    json_t *jobs = json_pack("[{s:s,s:s,s:s,s:i,s:s},{s:s,s:s,s:s}]", "id", "job_1", "type", "resize", "status",
                             "running", "progress", 40, "createdAt", "2026-12-07T10:00:00.000Z", "id", "j2", "type",
                             "t\x01", "status", "queued");
    char out[4096];
    capture(print_jobs_table, jobs, out, sizeof(out));
    assert_string_equal(out, "ID     TYPE    STATUS   PROGRESS  CREATED\n"
                             "job_1  resize  running       40%  2026-12-07T10:00:00.000Z\n"
                             "j2     t?      queued          -  -\n"
                             "job_1  resize  running       40%  2026-12-07T10:00:00.000Z\n");
    json_decref(jobs);
    capture(print_right, NULL, out, sizeof(out));
    assert_string_equal(out, "  N  NAME  LAST\n"
                             "  7  a     x y\n"
                             "123  bcd   -\n");
}

static void print_usage(FILE *f)
{
    fputs("usage: x\n", f);
}

static void test_usage_error(void **state)
{
    (void)state;
    char path[] = "/tmp/acceptd-cli-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    unlink(path);
    fflush(stderr);
    int saved = dup(STDERR_FILENO);
    dup2(fd, STDERR_FILENO);
    int rc = ad_cli_usage_error("acceptd jobs", print_usage, "--limit: %s '%d'", "bad", 7);
    fflush(stderr);
    dup2(saved, STDERR_FILENO);
    close(saved);
    char out[256];
    ssize_t got = pread(fd, out, sizeof(out) - 1, 0);
    out[got > 0 ? got : 0] = '\0';
    close(fd);
    assert_int_equal(rc, AD_CLI_USAGE);
    assert_string_equal(out, "acceptd jobs: --limit: bad '7'\nusage: x\n");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sse_events), cmocka_unit_test(test_sse_cap),     cmocka_unit_test(test_poll_delay),
        cmocka_unit_test(test_tables),     cmocka_unit_test(test_usage_error),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
