/*
 * test_lines.c - unit tests for src/worker/lines.c: the progress-line marker and parser, the output splitter
 * (progress lines vs. the result) and the text cleaner used for problem details and terminals.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "worker/worker.h"

/* ---- progress lines ---- */

static void test_progress_prefix(void **state)
{
    (void)state;
    assert_int_equal(ad_worker_progress_prefix("", 0), 0);
    assert_int_equal(ad_worker_progress_prefix(":", 1), 0);
    assert_int_equal(ad_worker_progress_prefix("::prog", 6), 0);
    assert_int_equal(ad_worker_progress_prefix("::progress", 10), 0);
    assert_int_equal(ad_worker_progress_prefix("::progress ", 11), 1);
    assert_int_equal(ad_worker_progress_prefix("::progress\t5", 12), 1);
    assert_int_equal(ad_worker_progress_prefix("::progress\r", 11), 1);
    assert_int_equal(ad_worker_progress_prefix("::progressive", 13), -1);
    assert_int_equal(ad_worker_progress_prefix("{", 1), -1);
    assert_int_equal(ad_worker_progress_prefix(" ::progress 5", 13), -1);
    assert_int_equal(ad_worker_progress_prefix("::PROGRESS 5", 12), -1);
}

static void check_progress(const char *line, int want_rc, int want_pct, const char *want_msg)
{
    int pct = -7;
    const char *msg = "unset";
    size_t msglen = 0;
    int rc = ad_worker_parse_progress(line, strlen(line), &pct, &msg, &msglen);
    if (rc != want_rc)
        fail_msg("'%s': rc %d, want %d", line, rc, want_rc);
    if (rc != 0)
        return;
    if (pct != want_pct)
        fail_msg("'%s': progress %d, want %d", line, pct, want_pct);
    if (want_msg == NULL) {
        if (msg != NULL)
            fail_msg("'%s': message '%.*s', want none", line, (int)msglen, msg);
    } else if (msg == NULL || msglen != strlen(want_msg) || memcmp(msg, want_msg, msglen) != 0) {
        fail_msg("'%s': message '%.*s', want '%s'", line, msg ? (int)msglen : 0, msg ? msg : "", want_msg);
    }
}

static void test_parse_progress(void **state)
{
    (void)state;
    check_progress("::progress 42", 0, 42, NULL);
    check_progress("::progress 42 encoding video", 0, 42, "encoding video");
    check_progress("::progress\t0\tstart", 0, 0, "start");
    check_progress("::progress 100", 0, 100, NULL);
    check_progress("::progress 0100", 0, 100, NULL);
    check_progress("::progress   7   spaced   out  \r", 0, 7, "spaced   out");
    check_progress("::progress 42.9 fraction truncated", 0, 42, "fraction truncated");
    check_progress("::progress 42% with percent", 0, 42, "with percent");
    check_progress("::progress 99.5%", 0, 99, NULL);
    check_progress("::progress 5\r", 0, 5, NULL);
    check_progress("::progress", -1, 0, NULL);
    check_progress("::progress ", -1, 0, NULL);
    check_progress("::progress 101", -1, 0, NULL);
    check_progress("::progress 1000", -1, 0, NULL);
    check_progress("::progress 00050", -1, 0, NULL);
    check_progress("::progress -1", -1, 0, NULL);
    check_progress("::progress abc", -1, 0, NULL);
    check_progress("::progress 42x", -1, 0, NULL);
    check_progress("::progress 42.", -1, 0, NULL);
    check_progress("::progress 42%%", -1, 0, NULL);
    check_progress("::progressive 42", -1, 0, NULL);
    check_progress("progress 42", -1, 0, NULL);
}

/* ---- the splitter ---- */

struct sink {
    struct ad_buf text;
    char progress[8][128];
    size_t lens[8];
    int n;
};

static void sink_text(void *ctx, const char *p, size_t n)
{
    struct sink *s = ctx;
    assert_int_equal(ad_buf_append(&s->text, p, n), 0);
}

static void sink_progress(void *ctx, const char *line, size_t n)
{
    struct sink *s = ctx;
    assert_true(s->n < 8);
    s->lens[s->n] = n;
    memcpy(s->progress[s->n], line, n < 127 ? n : 127);
    s->progress[s->n][n < 127 ? n : 127] = '\0';
    s->n++;
}

/* Feed input in chunks of `step` bytes (0: all at once) and finish. */
static void split(struct sink *s, const char *in, size_t len, size_t step)
{
    memset(s, 0, sizeof(*s));
    ad_buf_init(&s->text, 1 << 20);
    struct ad_worker_lines l;
    ad_worker_lines_init(&l, sink_text, sink_progress, s);
    if (step == 0)
        step = len;
    for (size_t i = 0; i < len; i += step)
        ad_worker_lines_feed(&l, in + i, len - i < step ? len - i : step);
    ad_worker_lines_finish(&l);
    ad_worker_lines_free(&l);
}

static void test_lines_split(void **state)
{
    (void)state;
    const char *in = "{\"a\":\n::progress 5 five\n  1,\n::prog\n::progressive\n::progress\n::progress 9\r\n}\n"
                     "::progress 10 no newline";
    const char *want_text = "{\"a\":\n  1,\n::prog\n::progressive\n}\n";
    for (size_t step = 0; step <= 7; step++) {
        struct sink s;
        split(&s, in, strlen(in), step);
        if (strcmp(s.text.data != NULL ? s.text.data : "", want_text) != 0)
            fail_msg("step %zu: text '%s'", step, s.text.data);
        assert_int_equal(s.n, 4);
        assert_string_equal(s.progress[0], "::progress 5 five");
        assert_string_equal(s.progress[1], "::progress");
        assert_string_equal(s.progress[2], "::progress 9\r");
        assert_string_equal(s.progress[3], "::progress 10 no newline");
        ad_buf_free(&s.text);
    }

    /* An unterminated last line that is text, or only a prefix of the marker, stays text. */
    struct sink s;
    split(&s, "x\n::pro", 7, 0);
    assert_string_equal(s.text.data, "x\n::pro");
    assert_int_equal(s.n, 0);
    ad_buf_free(&s.text);
    split(&s, "", 0, 0);
    assert_int_equal(s.text.len, 0);
    assert_int_equal(s.n, 0);
    ad_buf_free(&s.text);
}

static void test_lines_long(void **state)
{
    (void)state;
    /* A text line longer than the line cap passes through whole: results may be one long JSON line. */
    size_t big = 3 * AD_WORKER_LINE_MAX + 17;
    char *in = ad_malloc(big + 64);
    memset(in, 'x', big);
    memcpy(in + big, "\n::progress 1\n", 15);
    struct sink s;
    split(&s, in, big + 14, 4096);
    assert_int_equal(s.text.len, big + 1);
    assert_int_equal(s.n, 1);
    assert_string_equal(s.progress[0], "::progress 1");
    ad_buf_free(&s.text);

    /* A progress line longer than the cap is cut to it; the next line is intact. */
    memcpy(in, "::progress 3 ", 13);
    memset(in + 13, 'm', big - 13);
    memcpy(in + big, "\nafter\n", 8);
    split(&s, in, big + 7, 5000);
    assert_int_equal(s.n, 1);
    assert_int_equal(s.lens[0], AD_WORKER_LINE_MAX);
    assert_memory_equal(s.progress[0], "::progress 3 mmm", 16);
    assert_string_equal(s.text.data, "after\n");
    ad_buf_free(&s.text);
    free(in);
}

/* ---- text cleaning ---- */

static void check_clean(const char *in, size_t n, const char *want)
{
    char *out = ad_worker_clean_text(in, n);
    if (strcmp(out, want) != 0)
        fail_msg("cleaned to '%s', want '%s'", out, want);
    free(out);
}

static void test_clean_text(void **state)
{
    (void)state;
    check_clean("plain\ttext\r\nline", 16, "plain\ttext\r\nline");
    check_clean("h\xc3\xa9llo \xe2\x82\xac \xf0\x9f\x98\x80", 15, "h\xc3\xa9llo \xe2\x82\xac \xf0\x9f\x98\x80");
    check_clean("\x80\xbfstart", 7, "start"); /* a character cut at the front is dropped */
    check_clean("a\xff"
                "b",
                3, "a?b");         /* not UTF-8 */
    check_clean("a\xc3", 2, "a?"); /* cut at the end */
    check_clean("a\xc0\xaf"
                "b",
                4, "a??b"); /* overlong */
    check_clean("a\xed\xa0\x80"
                "b",
                5, "a???b"); /* surrogate */
    check_clean("a\xf4\x90\x80\x80"
                "b",
                6, "a????b"); /* above U+10FFFF */
    check_clean("nul\0esc\x1b"
                "del\x7f",
                12, "nul?esc?del?"); /* controls */
    check_clean("", 0, "");
}

static void test_clean_cut(void **state)
{
    (void)state;
    char *s = ad_worker_clean_cut("ab\x01\xc3\xa9z", 6, 4); /* "ab?éz" cut inside é */
    assert_string_equal(s, "ab?");
    free(s);
    s = ad_worker_clean_cut("abc", 3, 10);
    assert_string_equal(s, "abc");
    free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_progress_prefix), cmocka_unit_test(test_parse_progress),
        cmocka_unit_test(test_lines_split),     cmocka_unit_test(test_lines_long),
        cmocka_unit_test(test_clean_text),      cmocka_unit_test(test_clean_cut),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
