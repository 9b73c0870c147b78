/*
 * test_util.c - unit tests for src/util.c: allocation wrappers, clocks, time formats, hex,
 * random ids, duration and integer parsing, constant-time comparison, logging and the capped buffer.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/util.h"

/* 2026-11-30T18:11:40.123Z */
#define T_2026 ((int64_t)1796062300 * 1000 + 123)

static void test_alloc(void **state)
{
    (void)state;
    char *p = ad_malloc(0);
    assert_non_null(p);
    free(p);

    unsigned char *z = ad_calloc(16, 4);
    for (size_t i = 0; i < 64; i++)
        assert_int_equal(z[i], 0);
    z[63] = 7;
    z = ad_realloc(z, 4096);
    assert_int_equal(z[63], 7);
    free(z);

    char *s = ad_strdup("hello");
    assert_string_equal(s, "hello");
    free(s);
    s = ad_strndup("hello", 3);
    assert_string_equal(s, "hel");
    free(s);
    s = ad_strndup("hi", 10); /* n beyond the terminator stops at it */
    assert_string_equal(s, "hi");
    free(s);

    s = ad_asprintf("%s-%d-%05.1f", "x", 42, 3.14159);
    assert_string_equal(s, "x-42-003.1");
    free(s);
    s = ad_asprintf("%s", "");
    assert_string_equal(s, "");
    free(s);
}

static void test_clocks(void **state)
{
    (void)state;
    int64_t wall = ad_now_ms();
    int64_t sys = (int64_t)time(NULL) * 1000;
    assert_in_range(wall, sys - 2000, sys + 2000);

    int64_t a = ad_mono_ms();
    struct timespec ts = {0, 20 * 1000 * 1000};
    nanosleep(&ts, NULL);
    int64_t b = ad_mono_ms();
    assert_true(b >= a + 19);
    assert_true(b < a + 5000);

    /* The nanosecond clock is the same clock: it moves with the other, never back. */
    int64_t n0 = ad_mono_ns(), m = ad_mono_ms(), n1 = ad_mono_ns();
    assert_true(n1 >= n0);
    assert_true(n0 / 1000000 <= m && m <= n1 / 1000000);
    nanosleep(&ts, NULL);
    assert_true(ad_mono_ns() - n1 >= 19 * 1000000);
}

static void test_time_rfc3339_format(void **state)
{
    (void)state;
    char buf[32];
    ad_time_rfc3339(0, buf, sizeof buf);
    assert_string_equal(buf, "1970-01-01T00:00:00.000Z");
    ad_time_rfc3339(T_2026, buf, sizeof buf);
    assert_string_equal(buf, "2026-11-30T18:11:40.123Z");
    ad_time_rfc3339(-1, buf, sizeof buf);
    assert_string_equal(buf, "1969-12-31T23:59:59.999Z");
    ad_time_rfc3339((int64_t)1709208000 * 1000 + 7, buf, sizeof buf);
    assert_string_equal(buf, "2024-02-29T12:00:00.007Z");
    /* A short buffer is truncated, never overrun. */
    char small[8];
    ad_time_rfc3339(T_2026, small, sizeof small);
    assert_string_equal(small, "2026-11");
}

/* Against gmtime_r, for times scattered over four centuries and for runs within one day and across midnight:
 * the date of the last day formatted is kept (per thread) and must never leak into another day's time. */
static void test_time_rfc3339_matches_gmtime(void **state)
{
    (void)state;
    uint64_t r = 88172645463325252ull;
    int64_t ms = 0;
    for (int i = 0; i < 20000; i++) {
        r ^= r << 13;
        r ^= r >> 7;
        r ^= r << 17;
        if (i % 4 == 0)
            ms = (int64_t)(r % 12623040000000ull) - 2208988800000LL; /* 1900 to 2300 */
        else if (i % 4 == 1)
            ms += (int64_t)(r % 1000); /* the same day, mostly */
        else if (i % 4 == 2)
            ms = ms - ms % 86400000 + 86400000 - 1 - (int64_t)(r % 2); /* either side of midnight */
        else
            ms += 1;
        time_t secs = (time_t)(ms >= 0 ? ms / 1000 : (ms - 999) / 1000);
        struct tm tm;
        assert_non_null(gmtime_r(&secs, &tm));
        char want[80], got[40];
        snprintf(want, sizeof want, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                 tm.tm_hour, tm.tm_min, tm.tm_sec, (int)(ms - (int64_t)secs * 1000));
        ad_time_rfc3339(ms, got, sizeof got);
        if (strcmp(want, got) != 0)
            fail_msg("%lld: want %s, got %s", (long long)ms, want, got);
    }
    /* A year the fixed layout cannot hold, between two times of one cached day. */
    char buf[40];
    ad_time_rfc3339(T_2026, buf, sizeof buf);
    ad_time_rfc3339((int64_t)253402300800000LL, buf, sizeof buf);
    assert_string_equal(buf, "10000-01-01T00:00:00.000Z");
    ad_time_rfc3339(T_2026, buf, sizeof buf);
    assert_string_equal(buf, "2026-11-30T18:11:40.123Z");
}

static void test_time_rfc3339_parse(void **state)
{
    (void)state;
    static const struct {
        const char *in;
        int64_t ms;
    } good[] = {
        {"2026-11-30T18:11:40.123Z", T_2026},
        {"2026-11-30T18:11:40Z", T_2026 - 123},
        {"2026-11-30t18:11:40.123z", T_2026},
        {"2026-11-30T20:11:40.123+02:00", T_2026},
        {"2026-11-30T12:41:40.123-05:30", T_2026},
        {"2026-11-30T18:11:40.123-00:00", T_2026},
        {"2026-11-30T18:11:40.1Z", T_2026 - 23},
        {"2026-11-30T18:11:40.12Z", T_2026 - 3},
        {"2026-11-30T18:11:40.123999999Z", T_2026}, /* sub-millisecond digits are truncated */
        {"1970-01-01T00:00:00Z", 0},
        {"1969-12-31T23:59:59.999Z", -1},
        {"2024-02-29T12:00:00Z", (int64_t)1709208000 * 1000},
        {"1999-12-31T23:59:60Z", (int64_t)946684800 * 1000}, /* leap second folds into the next minute */
        {"2000-01-01T00:00:00+23:59", (int64_t)946684800 * 1000 - (23 * 60 + 59) * 60000},
    };
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        int64_t ms = -12345;
        if (ad_time_parse_rfc3339(good[i].in, &ms) != 0)
            fail_msg("rejected %s", good[i].in);
        if (ms != good[i].ms)
            fail_msg("%s: got %lld, want %lld", good[i].in, (long long)ms, (long long)good[i].ms);
    }

    static const char *const bad[] = {
        "",
        "2026-11-30",
        "2026-11-30T18:11:40",       /* no zone */
        "2026-11-30 18:11:40Z",      /* space separator */
        "2026-11-30T18:11:40.Z",     /* empty fraction */
        "2026-11-30T18:11:40.123ZZ", /* trailing junk */
        "2026-11-30T18:11:40+02",    /* short offset */
        "2026-11-30T18:11:40+2:00",  /* one-digit hour */
        "2026-11-30T18:11:40+24:00", /* offset hour out of range */
        "2026-11-30T18:11:40+02:60", /* offset minute out of range */
        "2026-13-01T00:00:00Z",      /* month */
        "2026-00-01T00:00:00Z",      /* month */
        "2026-02-29T00:00:00Z",      /* not a leap year */
        "2026-04-31T00:00:00Z",      /* April has 30 days */
        "2026-11-00T00:00:00Z",      /* day */
        "2026-11-30T24:00:00Z",      /* hour */
        "2026-11-30T18:60:00Z",      /* minute */
        "2026-11-30T18:11:61Z",      /* second */
        "2026/11/30T18:11:40Z",      /* separators */
        "+2026-11-30T18:11:40Z",
        "2026-11-3OT18:11:40Z", /* letter O */
        " 2026-11-30T18:11:40Z",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int64_t ms = 0;
        if (ad_time_parse_rfc3339(bad[i], &ms) != -1)
            fail_msg("accepted '%s' as %lld", bad[i], (long long)ms);
    }
    int64_t ms;
    assert_int_equal(ad_time_parse_rfc3339(NULL, &ms), -1);
}

static void test_time_rfc3339_round_trip(void **state)
{
    (void)state;
    char buf[32];
    const int64_t samples[] = {0, 1, 999, 1000, T_2026, -86400001, (int64_t)253402300799 * 1000 + 999};
    for (size_t i = 0; i < sizeof samples / sizeof samples[0]; i++) {
        int64_t back = 0;
        ad_time_rfc3339(samples[i], buf, sizeof buf);
        assert_int_equal(ad_time_parse_rfc3339(buf, &back), 0);
        assert_int_equal(back, samples[i]);
    }
}

static void test_time_http(void **state)
{
    (void)state;
    char buf[32];
    ad_time_http(0, buf, sizeof buf);
    assert_string_equal(buf, "Thu, 01 Jan 1970 00:00:00 GMT");
    ad_time_http(T_2026, buf, sizeof buf);
    assert_string_equal(buf, "Mon, 30 Nov 2026 18:11:40 GMT");
    ad_time_http((int64_t)1709208000 * 1000, buf, sizeof buf);
    assert_string_equal(buf, "Thu, 29 Feb 2024 12:00:00 GMT");
}

/* The calendar arithmetic against the C library's, for every day of years 0000-9999 at a time of day that
 * moves with the day, before 1970 too. */
static void test_time_matches_gmtime(void **state)
{
    (void)state;
    static const char wday[7][4] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
    static const char month[12][4] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                      "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
    const int64_t first_day = -719528, last_day = 2932896;      /* 0000-01-01, 9999-12-31 */
    for (int64_t day = first_day; day <= last_day; day += 11) { /* 11: every weekday and day of the month */
        int64_t ms = day * 86400000 + (day * 7919 % 86400000 + 86400000) % 86400000;
        time_t sec = (time_t)(ms / 1000 - (ms % 1000 < 0));
        struct tm tm;
        assert_non_null(gmtime_r(&sec, &tm));
        char want[64], got[64];
        snprintf(want, sizeof want, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                 tm.tm_hour, tm.tm_min, tm.tm_sec, (int)((ms % 1000 + 1000) % 1000));
        ad_time_rfc3339(ms, got, sizeof got);
        if (strcmp(want, got) != 0)
            fail_msg("ms %lld: want %s, got %s", (long long)ms, want, got);
        snprintf(want, sizeof want, "%s, %02d %s %04d %02d:%02d:%02d GMT", wday[tm.tm_wday], tm.tm_mday,
                 month[tm.tm_mon], tm.tm_year + 1900, tm.tm_hour, tm.tm_min, tm.tm_sec);
        ad_time_http(ms, got, sizeof got);
        if (strcmp(want, got) != 0)
            fail_msg("ms %lld: want %s, got %s", (long long)ms, want, got);
    }
}

static void test_hex(void **state)
{
    (void)state;
    const uint8_t in[] = {0x00, 0x01, 0xab, 0xff, 0x7f};
    char out[11];
    ad_hex_encode(in, sizeof in, out);
    assert_string_equal(out, "0001abff7f");
    ad_hex_encode(in, 0, out);
    assert_string_equal(out, "");
}

static int cmp_draw(const void *a, const void *b)
{
    return memcmp(a, b, 15);
}

/* Draws come from a per-thread pool: across several refills no two draws are equal, and a forked child never
 * hands out the bytes its parent has yet to. */
static void test_random_pool(void **state)
{
    (void)state;
    enum { DRAWS = 1000 }; /* 15,000 bytes: the pool is refilled a few times on the way */
    static uint8_t draws[DRAWS][15];
    for (int i = 0; i < DRAWS; i++)
        ad_random_bytes(draws[i], 15);
    qsort(draws, DRAWS, 15, cmp_draw);
    for (int i = 1; i < DRAWS; i++)
        assert_memory_not_equal(draws[i - 1], draws[i], 15);

    uint8_t mine[15], theirs[15] = {0};
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        uint8_t child[15];
        ad_random_bytes(child, sizeof child);
        _exit(write(fds[1], child, sizeof child) == (ssize_t)sizeof child ? 0 : 1);
    }
    ad_random_bytes(mine, sizeof mine);
    assert_int_equal(read(fds[0], theirs, sizeof theirs), (ssize_t)sizeof theirs);
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    assert_memory_not_equal(mine, theirs, sizeof mine);
    close(fds[0]);
    close(fds[1]);
}

static void test_random_and_ids(void **state)
{
    (void)state;
    uint8_t a[32] = {0}, b[32] = {0}, zero[32] = {0};
    ad_random_bytes(a, sizeof a);
    ad_random_bytes(b, sizeof b);
    assert_memory_not_equal(a, b, sizeof a);
    assert_memory_not_equal(a, zero, sizeof a);
    ad_random_bytes(NULL, 0);

    char *x = ad_new_id("job_"), *y = ad_new_id("job_");
    assert_int_equal(strlen(x), 4 + AD_ID_CHARS);
    assert_int_equal(AD_ID_CHARS, 28);
    assert_memory_equal(x, "job_", 4);
    assert_string_not_equal(x, y);
    uint8_t raw[AD_ID_RANDOM_BYTES + 1];
    assert_int_equal(ad_b64url_decode(x + 4 + AD_ID_TIME_CHARS, AD_ID_CHARS - AD_ID_TIME_CHARS, raw),
                     AD_ID_RANDOM_BYTES);
    free(x);
    free(y);

    /* The time digits compare as the times do, across a carry in every digit. */
    int64_t times[2 * AD_ID_TIME_CHARS + 1] = {0, 1};
    size_t n = 2;
    for (int d = 1; d < AD_ID_TIME_CHARS; d++) {
        times[n++] = ((int64_t)1 << (6 * d)) - 1;
        times[n++] = (int64_t)1 << (6 * d);
    }
    times[n++] = ((int64_t)1 << (6 * AD_ID_TIME_CHARS)) - 1;
    char prev[AD_ID_TIME_CHARS], next[AD_ID_TIME_CHARS];
    for (size_t i = 0; i < n; i++) {
        ad_id_time(times[i], next);
        if (i > 0)
            assert_true(memcmp(prev, next, AD_ID_TIME_CHARS) < 0);
        memcpy(prev, next, sizeof prev);
    }
    /* And an id starts with the time it was made. */
    ad_id_time(ad_now_ms(), prev);
    x = ad_new_id("");
    ad_id_time(ad_now_ms(), next);
    assert_int_equal(strlen(x), AD_ID_CHARS);
    assert_true(memcmp(prev, x, AD_ID_TIME_CHARS) <= 0 && memcmp(x, next, AD_ID_TIME_CHARS) <= 0);
    free(x);
}

static void test_parse_duration(void **state)
{
    (void)state;
    static const struct {
        const char *in;
        int64_t ms;
    } good[] = {
        {"30", 30000},
        {"0", 0},
        {"500ms", 500},
        {"10s", 10000},
        {"5m", 300000},
        {"2h", 7200000},
        {"30d", 30LL * 86400000},
        {"007s", 7000},
        {"9223372036854775807ms", INT64_MAX},
        {"9223372036854775s", 9223372036854775000LL},
    };
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        int64_t ms = -1;
        if (ad_parse_duration_ms(good[i].in, &ms) != 0)
            fail_msg("rejected '%s'", good[i].in);
        if (ms != good[i].ms)
            fail_msg("'%s': got %lld, want %lld", good[i].in, (long long)ms, (long long)good[i].ms);
    }
    static const char *const bad[] = {
        "",
        "ms",
        "s",
        "10x",
        "1.5h",
        " 10s",
        "10s ",
        "10 s",
        "-5s",
        "+5s",
        "10S",
        "10sec",
        "1h30m",
        "10mss",
        "9223372036854775808ms", /* int64 overflow while reading digits */
        "9223372036854776s",     /* overflow when scaled */
        "106751991167301d",
        "99999999999999999999999",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int64_t ms = 42;
        if (ad_parse_duration_ms(bad[i], &ms) != -1)
            fail_msg("accepted '%s'", bad[i]);
        assert_int_equal(ms, 42); /* untouched on error */
    }
    int64_t ms;
    assert_int_equal(ad_parse_duration_ms(NULL, &ms), -1);
}

static int parse(const char *s, long long min, long long max, long long *out)
{
    return ad_parse_int(s, strlen(s), min, max, out);
}

/* ad_format_int writes what printf("%lld") writes, at both ends of the range and around every power of ten. */
static void test_format_int(void **state)
{
    (void)state;
    int64_t values[64] = {0, -1, 1, INT64_MAX, INT64_MIN, INT64_MIN + 1};
    size_t n = 6;
    for (int64_t p = 10; p <= INT64_MAX / 10; p *= 10) {
        values[n++] = p - 1;
        values[n++] = -p;
        values[n++] = p + 1;
    }
    assert_true(n <= sizeof(values) / sizeof(values[0]));
    for (size_t i = 0; i < n; i++) {
        char got[AD_INT_CHARS + 1], want[32];
        size_t len = ad_format_int(values[i], got);
        snprintf(want, sizeof(want), "%lld", (long long)values[i]);
        assert_string_equal(got, want);
        assert_int_equal(len, strlen(want));
    }
}

static void sha256_hex(const char *text, size_t len, char out[2 * AD_SHA256_LEN + 1])
{
    uint8_t md[AD_SHA256_LEN];
    ad_sha256(text, len, md);
    ad_hex_encode(md, sizeof(md), out);
}

/* FIPS 180-2's examples, and the same digests from threads hashing at once (each keeps its own context). */
static const char *const sha_abc = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
static const char *const sha_448 = "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1";
static const char *const text_448 = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";

static void *sha256_thread(void *arg)
{
    int *bad = arg;
    for (int i = 0; i < 2000; i++) {
        char hex[2 * AD_SHA256_LEN + 1];
        sha256_hex(i % 2 != 0 ? "abc" : text_448, i % 2 != 0 ? 3 : strlen(text_448), hex);
        *bad += strcmp(hex, i % 2 != 0 ? sha_abc : sha_448) != 0;
    }
    return NULL;
}

static void test_sha256(void **state)
{
    (void)state;
    char hex[2 * AD_SHA256_LEN + 1];
    sha256_hex("", 0, hex);
    assert_string_equal(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    sha256_hex("abc", 3, hex);
    assert_string_equal(hex, sha_abc);
    sha256_hex(text_448, strlen(text_448), hex);
    assert_string_equal(hex, sha_448);
    pthread_t t[4];
    int bad[4] = {0};
    for (int i = 0; i < 4; i++)
        assert_int_equal(pthread_create(&t[i], NULL, sha256_thread, &bad[i]), 0);
    for (int i = 0; i < 4; i++) {
        assert_int_equal(pthread_join(t[i], NULL), 0);
        assert_int_equal(bad[i], 0);
    }
}

/* The streamed digest of FIPS 180-2's 448-bit example fed in every split, equal to the one-shot's; an abandoned
 * stream frees what it holds (ASan's leak check sees it). */
static void test_sha256_stream(void **state)
{
    (void)state;
    size_t len = strlen(text_448);
    for (size_t cut = 0; cut <= len; cut++) {
        struct ad_sha256_stream *h = ad_sha256_begin();
        ad_sha256_update(h, text_448, cut);
        ad_sha256_update(h, text_448 + cut, len - cut);
        uint8_t md[AD_SHA256_LEN];
        char hex[2 * AD_SHA256_LEN + 1];
        ad_sha256_end(h, md);
        ad_hex_encode(md, sizeof(md), hex);
        assert_string_equal(hex, sha_448);
    }
    struct ad_sha256_stream *h = ad_sha256_begin();
    ad_sha256_update(h, "abc", 3);
    ad_sha256_abandon(h);
    ad_sha256_abandon(NULL);
}

static void test_parse_int(void **state)
{
    (void)state;
    long long v = 0;
    assert_int_equal(parse("0", 0, 10, &v), 0);
    assert_int_equal(v, 0);
    assert_int_equal(parse("123", 0, 1000, &v), 0);
    assert_int_equal(v, 123);
    assert_int_equal(parse("-42", -100, 100, &v), 0);
    assert_int_equal(v, -42);
    assert_int_equal(parse("-0", -1, 1, &v), 0);
    assert_int_equal(v, 0);
    assert_int_equal(parse("9223372036854775807", LLONG_MIN, LLONG_MAX, &v), 0);
    assert_true(v == LLONG_MAX);
    assert_int_equal(parse("-9223372036854775808", LLONG_MIN, LLONG_MAX, &v), 0);
    assert_true(v == LLONG_MIN);

    /* range bounds are inclusive */
    assert_int_equal(parse("1", 1, 100, &v), 0);
    assert_int_equal(parse("100", 1, 100, &v), 0);
    v = 77;
    assert_int_equal(parse("0", 1, 100, &v), -1);
    assert_int_equal(parse("101", 1, 100, &v), -1);
    assert_int_equal(parse("-1", 0, 100, &v), -1);
    assert_int_equal(v, 77); /* untouched on error */

    static const char *const bad[] = {
        "",
        "-",
        "+1",
        " 1",
        "1 ",
        "1a",
        "0x10",
        "1e3",
        "1.0",
        "1_000",
        "--1",
        "\t1",
        "9223372036854775808",
        "-9223372036854775809",
        "99999999999999999999",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        if (parse(bad[i], LLONG_MIN, LLONG_MAX, &v) != -1)
            fail_msg("accepted '%s' as %lld", bad[i], v);
    }

    /* Only len bytes are read: a header value need not be NUL-terminated. */
    assert_int_equal(ad_parse_int("12345", 2, 0, 100, &v), 0);
    assert_int_equal(v, 12);
    assert_int_equal(ad_parse_int("12x", 2, 0, 100, &v), 0);
    assert_int_equal(ad_parse_int("12x", 3, 0, 100, &v), -1);
    assert_int_equal(ad_parse_int(NULL, 0, 0, 100, &v), -1);
}

static void test_ct_equal(void **state)
{
    (void)state;
    assert_int_equal(ad_ct_equal("secret-key", 10, "secret-key", 10), 1);
    assert_int_equal(ad_ct_equal("secret-key", 10, "secret-kez", 10), 0);
    assert_int_equal(ad_ct_equal("secret-key", 10, "Secret-key", 10), 0);
    assert_int_equal(ad_ct_equal("secret-key", 10, "secret-ke", 9), 0); /* prefix */
    assert_int_equal(ad_ct_equal("secret-ke", 9, "secret-key", 10), 0);
    assert_int_equal(ad_ct_equal("", 0, "", 0), 1);
    assert_int_equal(ad_ct_equal(NULL, 0, NULL, 0), 1);
    assert_int_equal(ad_ct_equal("a", 1, NULL, 0), 0);
    const uint8_t x[] = {0, 1, 2}, y[] = {0, 1, 3};
    assert_int_equal(ad_ct_equal(x, 3, y, 3), 0);
    assert_int_equal(ad_ct_equal(x, 2, y, 2), 1);
}

/* Run fn with stderr captured; returns what it wrote (caller frees). */
static char *capture_stderr(void (*fn)(void))
{
    FILE *tmp = tmpfile();
    assert_non_null(tmp);
    fflush(stderr);
    int saved = dup(STDERR_FILENO);
    assert_true(saved >= 0);
    assert_true(dup2(fileno(tmp), STDERR_FILENO) >= 0);
    fn();
    assert_true(dup2(saved, STDERR_FILENO) >= 0);
    close(saved);

    /* ad_log wrote through the descriptor, so the FILE position is stale: measure from the end. */
    assert_int_equal(fseek(tmp, 0, SEEK_END), 0);
    long n = ftell(tmp);
    assert_true(n >= 0);
    rewind(tmp);
    char *out = ad_calloc((size_t)n + 1, 1);
    assert_int_equal(fread(out, 1, (size_t)n, tmp), (size_t)n);
    fclose(tmp);
    return out;
}

static void log_simple(void)
{
    ad_info("hello %d %s", 42, "world");
}

static void log_injection(void)
{
    ad_warn("user said %s", "a\nfake 2026-01-01T00:00:00.000Z error line\r");
}

static void log_long(void)
{
    char big[5000];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    ad_error("%s", big);
}

static void assert_log_prefix(const char *line, const char *level)
{
    int64_t ms;
    char stamp[25];
    memcpy(stamp, line, 24);
    stamp[24] = '\0';
    assert_int_equal(ad_time_parse_rfc3339(stamp, &ms), 0);
    assert_in_range(ms, ad_now_ms() - 5000, ad_now_ms());
    assert_int_equal(line[19], '.');
    assert_int_equal(line[23], 'Z');
    assert_int_equal(line[24], ' ');
    assert_memory_equal(line + 25, level, strlen(level));
    assert_int_equal(line[25 + strlen(level)], ' ');
}

static void test_log(void **state)
{
    (void)state;
    char *out = capture_stderr(log_simple);
    assert_log_prefix(out, "info");
    assert_string_equal(out + 30, "hello 42 world\n");
    free(out);

    out = capture_stderr(log_injection);
    assert_log_prefix(out, "warn");
    assert_string_equal(out + 30, "user said a fake 2026-01-01T00:00:00.000Z error line \n");
    assert_ptr_equal(strchr(out, '\n'), out + strlen(out) - 1); /* exactly one line */
    free(out);

    out = capture_stderr(log_long);
    assert_log_prefix(out, "error");
    assert_int_equal(strlen(out), 31 + 2047 + 1); /* the message cut to 2047 bytes, still newline-terminated */
    assert_int_equal(out[31 + 2047], '\n');
    assert_int_equal(out[31 + 2046], 'x');
    free(out);
}

static void log_fields_line(void)
{
    struct ad_log_field f[] = {{"path", "/v1/jobs", 0}, {"status", NULL, 202}, {"tenant", "a b\n\"c", 0}};
    ad_log_fields("info", "access", f, 3);
}

static void test_log_fields(void **state)
{
    (void)state;
    char *out = capture_stderr(log_fields_line);
    assert_log_prefix(out, "info");
    /* A value that is not one plain word is quoted, so that the line still splits into its fields. */
    assert_string_equal(out + 30, "access path=/v1/jobs status=202 tenant=\"a b\\n\\\"c\"\n");
    free(out);

    ad_log_set_json(1);
    out = capture_stderr(log_fields_line);
    char *inj = capture_stderr(log_injection);
    ad_log_set_json(0);
    assert_non_null(strstr(out, "\"level\":\"info\",\"msg\":\"access\",\"path\":\"/v1/jobs\",\"status\":202,"
                                "\"tenant\":\"a b\\n\\\"c\"}\n"));
    assert_int_equal(strncmp(out, "{\"time\":\"", 9), 0);
    /* One object per line: a newline in a message is escaped, not written. */
    assert_ptr_equal(strchr(inj, '\n'), inj + strlen(inj) - 1);
    assert_non_null(strstr(inj, "\"msg\":\"user said a\\nfake"));
    free(out);
    free(inj);
}

static void test_buf_append(void **state)
{
    (void)state;
    struct ad_buf b;
    ad_buf_init(&b, 10);
    assert_null(b.data);
    assert_int_equal(b.len, 0);

    assert_int_equal(ad_buf_append(&b, "hello", 5), 0);
    assert_int_equal(ad_buf_append(&b, "world", 5), 0); /* exactly at the cap */
    assert_int_equal(b.len, 10);
    assert_string_equal(b.data, "helloworld");
    assert_int_equal(b.toobig, 0);

    assert_int_equal(ad_buf_append(&b, "!", 1), -1);
    assert_int_equal(b.toobig, 1);
    assert_int_equal(b.len, 10);
    assert_string_equal(b.data, "helloworld");
    assert_int_equal(ad_buf_append(&b, "", 0), 0);

    ad_buf_free(&b);
    assert_null(b.data);
    assert_int_equal(b.len, 0);
    assert_int_equal(b.toobig, 0);
    assert_int_equal(b.max, 10);

    /* A single append bigger than the cap appends nothing. */
    ad_buf_init(&b, 4);
    assert_int_equal(ad_buf_append(&b, "ab", 2), 0);
    assert_int_equal(ad_buf_append(&b, "cde", 3), -1);
    assert_int_equal(b.len, 2);
    assert_memory_equal(b.data, "ab", 3);
    assert_true(b.cap <= 5);
    ad_buf_free(&b);

    ad_buf_init(&b, 0);
    assert_int_equal(ad_buf_append(&b, "x", 1), -1);
    assert_int_equal(b.toobig, 1);
    ad_buf_free(&b);
}

static void test_buf_growth(void **state)
{
    (void)state;
    struct ad_buf b;
    ad_buf_init(&b, 1 << 20);
    for (int i = 0; i < 100000; i++) {
        char c = (char)('a' + i % 26);
        assert_int_equal(ad_buf_append(&b, &c, 1), 0);
    }
    assert_int_equal(b.len, 100000);
    assert_true(b.cap > b.len && b.cap <= (1 << 20) + 1);
    for (size_t i = 0; i < b.len; i++)
        assert_int_equal(b.data[i], 'a' + (int)(i % 26));
    assert_int_equal(b.data[b.len], '\0');
    ad_buf_free(&b);
}

static void test_buf_printf(void **state)
{
    (void)state;
    struct ad_buf b;
    ad_buf_init(&b, 16);
    assert_int_equal(ad_buf_printf(&b, "%d-%s", 7, "abc"), 0);
    assert_int_equal(ad_buf_printf(&b, "%s", ""), 0);
    assert_int_equal(ad_buf_printf(&b, "[%03d]", 5), 0);
    assert_string_equal(b.data, "7-abc[005]");
    assert_int_equal(b.len, 10);
    assert_int_equal(ad_buf_printf(&b, "%s", "1234567"), -1); /* 17 > 16 */
    assert_int_equal(b.toobig, 1);
    assert_string_equal(b.data, "7-abc[005]");
    assert_int_equal(ad_buf_printf(&b, "%s", "123456"), 0); /* exactly 16 still fits */
    assert_int_equal(b.len, 16);
    assert_string_equal(b.data, "7-abc[005]123456");
    ad_buf_free(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_alloc),
        cmocka_unit_test(test_clocks),
        cmocka_unit_test(test_time_rfc3339_format),
        cmocka_unit_test(test_time_rfc3339_matches_gmtime),
        cmocka_unit_test(test_time_rfc3339_parse),
        cmocka_unit_test(test_time_rfc3339_round_trip),
        cmocka_unit_test(test_time_http),
        cmocka_unit_test(test_time_matches_gmtime),
        cmocka_unit_test(test_hex),
        cmocka_unit_test(test_random_and_ids),
        cmocka_unit_test(test_random_pool),
        cmocka_unit_test(test_parse_duration),
        cmocka_unit_test(test_parse_int),
        cmocka_unit_test(test_format_int),
        cmocka_unit_test(test_sha256),
        cmocka_unit_test(test_sha256_stream),
        cmocka_unit_test(test_ct_equal),
        cmocka_unit_test(test_log),
        cmocka_unit_test(test_log_fields),
        cmocka_unit_test(test_buf_append),
        cmocka_unit_test(test_buf_growth),
        cmocka_unit_test(test_buf_printf),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
