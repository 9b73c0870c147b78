/*
 * test_cron.c - unit tests for src/common/cron.c: a table of expressions, zones and instants with the next
 * fire time each must give (fields, names, steps, both day fields, 29 February, expressions that never fire,
 * daylight saving in Europe/Berlin, America/New_York and Australia/Sydney, gaps and overlaps, years the zone
 * files leave to their footer's rule); sequences of fire times through transitions; what the parser refuses;
 * a comparison with a plain minute-by-minute search; and the cost of a next time.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cron.h"
#include "common/tz.h"
#include "common/util.h"

static int64_t at(const char *rfc3339)
{
    int64_t ms;
    if (ad_time_parse_rfc3339(rfc3339, &ms) != 0)
        fail_msg("bad time %s", rfc3339);
    return ms / 1000;
}

static const char *show(int64_t s, char *buf, size_t n)
{
    if (s < 0)
        snprintf(buf, n, "-1");
    else
        ad_time_rfc3339(s * 1000, buf, n);
    return buf;
}

static struct ad_cron *parse(const char *expr)
{
    char why[256] = "";
    struct ad_cron *c = ad_cron_parse(expr, why, sizeof(why));
    if (c == NULL)
        fail_msg("'%s': %s", expr, why);
    return c;
}

static struct ad_tz *zone(const char *name)
{
    char why[256] = "";
    struct ad_tz *tz = ad_tz_load(name, why, sizeof(why));
    if (tz == NULL)
        fail_msg("%s: %s", name, why);
    return tz;
}

static void test_table(void **state)
{
    (void)state;
    static const struct {
        const char *expr, *zone, *after, *next; /* next NULL: -1 */
    } v[] = {
        {"* * * * *", "UTC", "2026-01-01T00:00:00Z", "2026-01-01T00:01:00Z"},
        {"* * * * *", "UTC", "2026-01-01T00:00:59Z", "2026-01-01T00:01:00Z"},
        {"*/15 * * * *", "UTC", "2026-01-01T00:14:59Z", "2026-01-01T00:15:00Z"},
        {"*/15 * * * *", "UTC", "2026-01-01T00:15:00Z", "2026-01-01T00:30:00Z"},
        {"5/15 * * * *", "UTC", "2026-01-01T00:21:00Z", "2026-01-01T00:35:00Z"},
        {"10-20/5 * * * *", "UTC", "2026-01-01T00:21:00Z", "2026-01-01T01:10:00Z"},
        {"0,30 9-17 * * *", "UTC", "2026-01-01T17:30:00Z", "2026-01-02T09:00:00Z"},
        {"0 9 * * 1-5", "UTC", "2026-01-02T09:00:00Z", "2026-01-05T09:00:00Z"}, /* Friday to Monday */
        {"0 9 * * MON-FRI", "UTC", "2026-01-02T09:00:00Z", "2026-01-05T09:00:00Z"},
        {"0 0 * * 7", "UTC", "2026-01-01T00:00:00Z", "2026-01-04T00:00:00Z"}, /* 7 is Sunday */
        {"0 0 * * sun", "UTC", "2026-01-01T00:00:00Z", "2026-01-04T00:00:00Z"},
        {"0 0 * * 5-7", "UTC", "2026-01-03T00:00:00Z", "2026-01-04T00:00:00Z"},
        {"0 0 1 JAN,jul *", "UTC", "2026-02-01T00:00:00Z", "2026-07-01T00:00:00Z"},
        {"0 12 * FEB-MAR *", "UTC", "2026-03-31T12:00:00Z", "2027-02-01T12:00:00Z"},
        {"59 23 31 12 *", "UTC", "2026-12-31T23:59:00Z", "2027-12-31T23:59:00Z"},
        {"0 0 31 * *", "UTC", "2026-01-31T00:00:00Z", "2026-03-31T00:00:00Z"},
        {"@yearly", "UTC", "2026-01-01T00:00:00Z", "2027-01-01T00:00:00Z"},
        {"@annually", "UTC", "2026-06-01T00:00:00Z", "2027-01-01T00:00:00Z"},
        {"@monthly", "UTC", "2026-01-31T12:00:00Z", "2026-02-01T00:00:00Z"},
        {"@weekly", "UTC", "2026-01-01T00:00:00Z", "2026-01-04T00:00:00Z"},
        {"@daily", "UTC", "2026-01-01T00:00:00Z", "2026-01-02T00:00:00Z"},
        {"@midnight", "UTC", "2026-01-01T23:59:59Z", "2026-01-02T00:00:00Z"},
        {"@hourly", "UTC", "2026-01-01T10:30:00Z", "2026-01-01T11:00:00Z"},
        {"  @HOURLY  ", "UTC", "2026-01-01T10:30:00Z", "2026-01-01T11:00:00Z"},
        /* Six fields: seconds first. */
        {"*/10 * * * * *", "UTC", "2026-01-01T00:00:05Z", "2026-01-01T00:00:10Z"},
        {"* * * * * *", "UTC", "2026-01-01T00:00:05Z", "2026-01-01T00:00:06Z"},
        {"30 0 0 1 1 *", "UTC", "2026-01-01T00:00:30Z", "2027-01-01T00:00:30Z"},
        {"0 0 0 1 1 *", "UTC", "2026-12-31T23:59:59Z", "2027-01-01T00:00:00Z"},
        /* Both day fields restricted: either matches (13th or Friday). */
        {"0 0 13 * 5", "UTC", "2026-01-01T00:00:00Z", "2026-01-02T00:00:00Z"},
        {"0 0 13 * 5", "UTC", "2026-01-09T00:00:00Z", "2026-01-13T00:00:00Z"},
        {"0 0 1,15 * MON", "UTC", "2026-01-01T00:00:00Z", "2026-01-05T00:00:00Z"},
        /* A day field written with '*' (even with a step) makes it "and", as Vixie cron does. */
        {"0 0 */2 * 1", "UTC", "2026-01-01T00:00:00Z", "2026-01-05T00:00:00Z"},
        {"0 0 */2 * 1", "UTC", "2026-01-05T00:00:00Z", "2026-01-19T00:00:00Z"},
        {"0 0 * * 1", "UTC", "2026-01-05T00:00:00Z", "2026-01-12T00:00:00Z"},
        /* 29 February: leap years only, up to eight years apart across 2100. */
        {"0 0 29 2 *", "UTC", "2027-01-01T00:00:00Z", "2028-02-29T00:00:00Z"},
        {"0 0 29 2 *", "UTC", "2028-02-29T00:00:00Z", "2032-02-29T00:00:00Z"},
        {"0 0 29 2 *", "UTC", "2096-03-01T00:00:00Z", "2104-02-29T00:00:00Z"},
        /* The first of February on a Thursday (a day field written with '*' makes it "and"): 12 years apart. */
        {"0 0 */31 2 4", "UTC", "2091-02-01T00:00:00Z", "2103-02-01T00:00:00Z"},
        {"0 0 29 2 1", "UTC", "2027-02-26T00:00:00Z", "2028-02-07T00:00:00Z"}, /* or a Monday of February */
        /* Never: a day no month of the expression has. */
        {"0 0 30 2 *", "UTC", "2026-01-01T00:00:00Z", NULL},
        {"0 0 31 4,6,9,11 *", "UTC", "2026-01-01T00:00:00Z", NULL},
        {"0 0 30,31 FEB *", "Europe/Berlin", "2026-01-01T00:00:00Z", NULL},
        /* Out of the instants handled. */
        {"* * * * *", "UTC", "9999-01-01T00:00:00Z", NULL},
        /* 09:00 in Berlin: 08:00Z in winter, 07:00Z in summer, this year and when the footer rules. */
        {"0 9 * * *", "Europe/Berlin", "2026-01-15T00:00:00Z", "2026-01-15T08:00:00Z"},
        {"0 9 * * *", "Europe/Berlin", "2026-07-15T00:00:00Z", "2026-07-15T07:00:00Z"},
        {"0 9 * * *", "Europe/Berlin", "2026-03-28T12:00:00Z", "2026-03-29T07:00:00Z"},
        {"0 9 * * *", "Europe/Berlin", "2026-10-24T12:00:00Z", "2026-10-25T08:00:00Z"},
        {"0 9 * * *", "Europe/Berlin", "2045-12-01T00:00:00Z", "2045-12-01T08:00:00Z"},
        {"0 9 * * *", "Europe/Berlin", "2045-07-01T00:00:00Z", "2045-07-01T07:00:00Z"},
        {"0 9 * * *", "America/New_York", "2026-01-15T00:00:00Z", "2026-01-15T14:00:00Z"},
        {"0 9 * * *", "America/New_York", "2026-07-15T00:00:00Z", "2026-07-15T13:00:00Z"},
        {"0 9 * * *", "America/New_York", "2026-03-07T15:00:00Z", "2026-03-08T13:00:00Z"},
        {"0 9 * * *", "America/New_York", "2040-11-03T14:00:00Z", "2040-11-04T14:00:00Z"},
        {"0 9 * * *", "Australia/Sydney", "2026-01-15T00:00:00Z", "2026-01-15T22:00:00Z"},
        {"0 9 * * *", "Australia/Sydney", "2026-07-15T00:00:00Z", "2026-07-15T23:00:00Z"},
        {"0 9 * * *", "Asia/Kolkata", "2026-07-15T00:00:00Z", "2026-07-15T03:30:00Z"},
        /* A local time in a spring-forward gap is read with the offset before it: 02:30 is 03:30 summer time. */
        {"30 2 * * *", "Europe/Berlin", "2026-03-28T12:00:00Z", "2026-03-29T01:30:00Z"},
        {"30 2 * * *", "Europe/Berlin", "2026-03-29T01:00:00Z", "2026-03-29T01:30:00Z"},
        {"30 2 * * *", "Europe/Berlin", "2026-03-29T01:30:00Z", "2026-03-30T00:30:00Z"},
        {"30 2 * * *", "Europe/Berlin", "2041-03-30T12:00:00Z", "2041-03-31T01:30:00Z"},
        {"30 2 * * *", "America/New_York", "2026-03-07T12:00:00Z", "2026-03-08T07:30:00Z"},
        {"0 2 8 3 *", "America/New_York", "2026-01-01T00:00:00Z", "2026-03-08T07:00:00Z"},
        /* A fixed local time in a fall-back overlap fires once, at its first occurrence. */
        {"30 2 * * *", "Europe/Berlin", "2026-10-24T12:00:00Z", "2026-10-25T00:30:00Z"},
        {"30 2 * * *", "Europe/Berlin", "2026-10-25T00:30:00Z", "2026-10-26T01:30:00Z"},
        {"30 2 * * *", "Europe/Berlin", "2060-10-30T12:00:00Z", "2060-10-31T00:30:00Z"},
        {"30 2 * * *", "Europe/Berlin", "2060-10-31T00:30:00Z", "2060-11-01T01:30:00Z"},
        {"30 1 * * *", "America/New_York", "2026-10-31T12:00:00Z", "2026-11-01T05:30:00Z"},
        {"30 1 * * *", "America/New_York", "2026-11-01T05:30:00Z", "2026-11-02T06:30:00Z"},
        {"0 30 1 * * *", "America/New_York", "2026-11-01T05:30:00Z", "2026-11-02T06:30:00Z"},
        {"30 2 * * *", "Australia/Sydney", "2026-04-04T00:00:00Z", "2026-04-04T15:30:00Z"}, /* 5 April, +11 */
    };
    int failed = 0;
    for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
        struct ad_cron *c = parse(v[i].expr);
        struct ad_tz *tz = zone(v[i].zone);
        int64_t got = ad_cron_next(c, tz, at(v[i].after)), want = v[i].next != NULL ? at(v[i].next) : -1;
        if (got != want) {
            char a[40], b[40];
            print_error("'%s' in %s after %s: %s, want %s\n", v[i].expr, v[i].zone, v[i].after, show(got, a, 40),
                        show(want, b, 40));
            failed++;
        }
        ad_tz_free(tz);
        ad_cron_free(c);
    }
    assert_int_equal(failed, 0);
}

/* Consecutive fire times from after, each the next after the one before. */
static void expect_sequence(const char *expr, const char *zone_name, const char *after, const char *const *want,
                            size_t n)
{
    struct ad_cron *c = parse(expr);
    struct ad_tz *tz = zone(zone_name);
    int64_t t = at(after);
    for (size_t i = 0; i < n; i++) {
        t = ad_cron_next(c, tz, t);
        char a[40];
        if (t != at(want[i]))
            fail_msg("'%s' in %s, fire %zu: %s, want %s", expr, zone_name, i, show(t, a, 40), want[i]);
    }
    ad_tz_free(tz);
    ad_cron_free(c);
}

static void test_transitions(void **state)
{
    (void)state;
    /* Every hour through Berlin's fall-back: 02:00 summer time, 02:00 winter time, 03:00: one an hour. */
    static const char *const hourly_fall[] = {"2026-10-24T23:00:00Z", "2026-10-25T00:00:00Z", "2026-10-25T01:00:00Z",
                                              "2026-10-25T02:00:00Z"};
    expect_sequence("0 * * * *", "Europe/Berlin", "2026-10-24T22:30:00Z", hourly_fall, 4);
    expect_sequence("@hourly", "Europe/Berlin", "2026-10-24T22:30:00Z", hourly_fall, 4);
    /* Every half hour keeps to the real clock through both passes. */
    static const char *const half_fall[] = {"2026-10-25T00:00:00Z", "2026-10-25T00:30:00Z", "2026-10-25T01:00:00Z",
                                            "2026-10-25T01:30:00Z", "2026-10-25T02:00:00Z"};
    expect_sequence("*/30 * * * *", "Europe/Berlin", "2026-10-24T23:45:00Z", half_fall, 5);
    /* In the hour 02 only: both passes, since the minute is written with '*'. */
    static const char *const in_two[] = {"2026-10-25T00:00:00Z", "2026-10-25T00:30:00Z", "2026-10-25T01:00:00Z",
                                         "2026-10-25T01:30:00Z", "2026-10-26T01:00:00Z"};
    expect_sequence("*/30 2 * * *", "Europe/Berlin", "2026-10-24T12:00:00Z", in_two, 5);
    /* But minutes listed one by one in a fixed hour: once. */
    static const char *const fixed_two[] = {"2026-10-25T00:00:00Z", "2026-10-25T00:30:00Z", "2026-10-26T01:00:00Z"};
    expect_sequence("0,30 2 * * *", "Europe/Berlin", "2026-10-24T12:00:00Z", fixed_two, 3);
    /* Every hour through the spring-forward gap: 01:00 winter, then 03:00 summer; 02:00 falls on 03:00. */
    static const char *const hourly_spring[] = {"2026-03-29T00:00:00Z", "2026-03-29T01:00:00Z", "2026-03-29T02:00:00Z"};
    expect_sequence("0 * * * *", "Europe/Berlin", "2026-03-28T23:30:00Z", hourly_spring, 3);
    static const char *const quarter_spring[] = {"2026-03-29T00:45:00Z", "2026-03-29T01:00:00Z", "2026-03-29T01:15:00Z",
                                                 "2026-03-29T01:30:00Z"};
    expect_sequence("*/15 * * * *", "Europe/Berlin", "2026-03-29T00:30:00Z", quarter_spring, 4);
    /* Each second through New York's fall-back, 2040 (footer): no second lost or doubled in real time. */
    static const char *const seconds_fall[] = {"2040-11-04T05:59:59Z", "2040-11-04T06:00:00Z", "2040-11-04T06:00:01Z"};
    expect_sequence("* * * * * *", "America/New_York", "2040-11-04T05:59:58Z", seconds_fall, 3);
    /* Daily at 09:00 across both of Berlin's changes of 2026. */
    static const char *const nine[] = {"2026-03-28T08:00:00Z", "2026-03-29T07:00:00Z", "2026-03-30T07:00:00Z"};
    expect_sequence("0 9 * * *", "Europe/Berlin", "2026-03-28T00:00:00Z", nine, 3);
    static const char *const nine_fall[] = {"2026-10-24T07:00:00Z", "2026-10-25T08:00:00Z", "2026-10-26T08:00:00Z"};
    expect_sequence("0 9 * * *", "Europe/Berlin", "2026-10-24T00:00:00Z", nine_fall, 3);
}

static void test_refused(void **state)
{
    (void)state;
    static const struct {
        const char *expr, *why; /* a piece of the reason */
    } v[] = {
        {"", "expected 5 fields"},
        {"* * * *", "expected 5 fields"},
        {"* * * * * * *", "expected 5 fields"},
        {"60 * * * *", "minute field '60': values go from 0 to 59"},
        {"* 24 * * *", "hour field"},
        {"* * 0 * *", "day-of-month field"},
        {"* * 32 * *", "day-of-month field"},
        {"* * * 13 *", "month field"},
        {"* * * * 8", "day-of-week field"},
        {"60 * * * * *", "seconds field"},
        {"5-1 * * * *", "goes backwards"},
        {"* * * * FRI-MON", "goes backwards"},
        {"*/0 * * * *", "expected *"},
        {"*/ * * * *", "expected *"},
        {"1,,2 * * * *", "expected *"},
        {"1, * * * *", "expected *"},
        {"-1 * * * *", "expected *"},
        {"1-2-3 * * * *", "expected *"},
        {"** * * * *", "expected *"},
        {"0 0 * JANUARY *", "expected *"},
        {"0 0 * * MONDAY", "expected *"},
        {"0 0 MON * *", "expected *"},
        {"0 0 * * 1000", "expected *"},
        {"0 0 L * *", "'L', 'W', '#'"},
        {"0 0 15W * *", "'L', 'W', '#'"},
        {"0 0 LW * *", "'L', 'W', '#'"},
        {"0 0 * * 5L", "'L', 'W', '#'"},
        {"0 0 * * 1#2", "'L', 'W', '#'"},
        {"0 0 ? * 1", "'L', 'W', '#'"},
        {"@reboot", "the names are"},
        {"@daily 5", "the names are"},
        {"@every 5m", "the names are"},
        {"@\nolury\x01", "the names are"}, /* the name is quoted, not what follows it (a newline) */
    };
    for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
        char why[256] = "";
        struct ad_cron *c = ad_cron_parse(v[i].expr, why, sizeof(why));
        if (c != NULL)
            fail_msg("'%s' was accepted", v[i].expr);
        if (strstr(why, v[i].why) == NULL || strchr(why, '\n') != NULL)
            fail_msg("'%s': reason '%s' lacks '%s'", v[i].expr, why, v[i].why);
    }
    char big[AD_CRON_MAX_LEN + 2], why[256];
    memset(big, '1', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    assert_null(ad_cron_parse(big, why, sizeof(why)));
    struct ad_cron *c = parse("0 0 30 2 *");
    assert_true(ad_cron_impossible(c));
    ad_cron_free(c);
    c = parse("0 0 29 2 *");
    assert_false(ad_cron_impossible(c));
    ad_cron_free(c);
}

/* The fields' values, worked out the slow way from their text (no names; Vixie's day rule kept apart). */
struct sets {
    char ok[6][64];
    int day_and;
};

static void make_sets(const char *const f[6], struct sets *st)
{
    memset(st, 0, sizeof(*st));
    for (int i = 0; i < 6; i++) {
        char buf[64];
        snprintf(buf, sizeof(buf), "%s", f[i]);
        char *save = NULL;
        for (char *item = strtok_r(buf, ",", &save); item != NULL; item = strtok_r(NULL, ",", &save)) {
            int lo = i == 3 || i == 4 ? 1 : 0, hi = i == 0 || i == 1 ? 59 : i == 2 ? 23 : i == 3 ? 31 : i == 4 ? 12 : 7;
            int a = lo, b = hi, step = 1;
            char *slash = strchr(item, '/');
            if (slash != NULL)
                step = (int)strtol(slash + 1, NULL, 10);
            if (item[0] != '*') {
                a = (int)strtol(item, NULL, 10);
                char *dash = strchr(item, '-');
                b = dash != NULL ? (int)strtol(dash + 1, NULL, 10) : slash != NULL ? hi : a;
            }
            for (int x = a; x <= b; x += step)
                st->ok[i][i == 5 ? x % 7 : x] = 1;
        }
    }
    st->day_and = f[3][0] == '*' || f[5][0] == '*';
}

/* Does the time t (seconds since 1970 as if UTC) match? */
static int matches(const struct sets *st, int64_t t)
{
    int64_t days = t / 86400 - (t % 86400 < 0), sod = t - days * 86400, y;
    int m, d;
    ad_civil_from_days(days, &y, &m, &d);
    if (!st->ok[0][sod % 60] || !st->ok[1][sod / 60 % 60] || !st->ok[2][sod / 3600] || !st->ok[4][m])
        return 0;
    int dom = st->ok[3][d], dow = st->ok[5][ad_weekday(days)];
    return st->day_and ? dom && dow : dom || dow;
}

/* Random expressions in UTC against a search minute by minute (seconds fixed at 0) over the next 40 days. */
static void test_against_search(void **state)
{
    (void)state;
    static const char *const pool[5][6] = {
        {"*", "*/7", "5", "0-10", "3,17,45", "*/20"}, {"*", "3", "*/5", "9-17", "0,12", "22-23"},
        {"*", "1", "*/10", "15", "1-7", "28-31"},     {"*", "2", "*/3", "1,6,12", "*", "7-9"},
        {"*", "0", "1-5", "SAT,SUN", "*/2", "3"},
    };
    uint64_t seed = 12345;
    struct ad_tz *tz = zone("UTC");
    for (int round = 0; round < 300; round++) {
        const char *f[6];
        f[0] = "0";
        for (int i = 0; i < 5; i++) {
            seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
            f[i + 1] = pool[i][(seed >> 33) % 6];
        }
        if (strcmp(f[5], "SAT,SUN") == 0)
            f[5] = "0,6";
        char expr[128];
        snprintf(expr, sizeof(expr), "%s %s %s %s %s", f[1], f[2], f[3], f[4], f[5]);
        struct ad_cron *c = parse(expr);
        struct sets st;
        make_sets(f, &st);
        seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
        int64_t after = at("2026-01-01T00:00:00Z") + (int64_t)((seed >> 20) % (86400ULL * 365 * 3));
        int64_t want = -1;
        for (int64_t t = (after / 60 + 1) * 60; t < after + 40 * 86400; t += 60) {
            if (matches(&st, t)) {
                want = t;
                break;
            }
        }
        int64_t got = ad_cron_next(c, tz, after);
        if (want >= 0 && got != want) {
            char a[40], b[40];
            fail_msg("'%s' after %" PRId64 ": %s, want %s", expr, after, show(got, a, 40), show(want, b, 40));
        }
        if (want < 0)
            assert_true(got >= after + 40 * 86400 - 60 || got == -1);
        ad_cron_free(c);
    }
    ad_tz_free(tz);
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

/* Around daylight-saving changes, the rules of docs/schedules.md applied the slow way: every local minute
 * (or second) of four days (hours) that matches gives its instants by ad_tz_resolve (a gap: the one read with the
 * offset before it; an overlap: the first, and the second too when seconds, minute or hour is written with
 * '*'); ad_cron_next from many instants must give the least of them after it. */
static void test_against_rules(void **state)
{
    (void)state;
    static const char *const exprs[][6] = {
        {"0", "*", "*", "*", "*", "*"},      {"0", "*/7", "*", "*", "*", "*"},     {"0", "0", "*", "*", "*", "*"},
        {"0", "30", "2", "*", "*", "*"},     {"0", "15,45", "1-3", "*", "*", "*"}, {"0", "*/20", "2", "*", "*", "*"},
        {"0", "0", "*/2", "*", "*", "*"},    {"0", "0", "9", "*", "*", "*"},       {"0", "59", "1", "*", "*", "*"},
        {"0", "0", "3", "*", "*", "*"},      {"0", "*/30", "*", "*", "*", "*"},    {"0", "10", "0-4", "*", "*", "*"},
        {"*/13", "*", "1-3", "*", "*", "*"}, {"5", "0,30", "2", "*", "*", "*"},
    };
    static const char *const zones[] = {"Europe/Berlin",    "America/New_York",  "Australia/Lord_Howe",
                                        "Australia/Sydney", "America/Sao_Paulo", "Pacific/Apia"};
    static const char *const around[] = {"2026-01-01T00:00:00Z", "2026-06-01T00:00:00Z", "2011-12-01T00:00:00Z",
                                         "2045-01-01T00:00:00Z", "2045-06-01T00:00:00Z"};
    size_t cap = 4 * 86400 * 2, checked = 0;
    int64_t *set = ad_malloc(cap * sizeof(*set));
    for (size_t z = 0; z < sizeof(zones) / sizeof(zones[0]); z++) {
        struct ad_tz *tz = zone(zones[z]);
        for (size_t w = 0; w < sizeof(around) / sizeof(around[0]); w++) {
            int64_t change = ad_tz_next_change(tz, at(around[w]));
            if (change == INT64_MAX || change > at(around[w]) + 200 * 86400)
                continue;
            for (size_t e = 0; e < sizeof(exprs) / sizeof(exprs[0]); e++) {
                const char *const *f = exprs[e];
                int by_second = f[0][0] == '*';
                char expr[128];
                if (by_second)
                    snprintf(expr, sizeof(expr), "%s %s %s %s %s %s", f[0], f[1], f[2], f[3], f[4], f[5]);
                else
                    snprintf(expr, sizeof(expr), "%s %s %s %s %s", f[1], f[2], f[3], f[4], f[5]);
                int both = f[0][0] == '*' || f[1][0] == '*' || f[2][0] == '*';
                struct ad_cron *c = parse(expr);
                struct sets st;
                make_sets(f, &st);
                int64_t span = by_second ? 4 * 3600 : 86400; /* seconds: hours around the change */
                int32_t o1 = ad_tz_offset(tz, change - 1), o2 = ad_tz_offset(tz, change);
                int64_t lo = change + (o1 < o2 ? o1 : o2) - 2 * span, hi = change + (o1 > o2 ? o1 : o2) + 2 * span;
                int64_t step = by_second ? 1 : 60;
                size_t n = 0;
                for (int64_t local = lo; local < hi; local += step) {
                    if (!matches(&st, local))
                        continue;
                    int64_t u[2];
                    int k = ad_tz_resolve(tz, local, u);
                    set[n++] = u[0];
                    if (k == 2 && both)
                        set[n++] = u[1];
                }
                qsort(set, n, sizeof(*set), cmp_i64);
                /* Instants well inside the window, where the window's local times cover every candidate. */
                for (int64_t a = change - span; a < change + span; a += by_second ? 7 : 97) {
                    size_t i = 0;
                    while (i < n && set[i] <= a)
                        i++;
                    if (i == n || set[i] > change + span + span / 2)
                        continue;
                    int64_t got = ad_cron_next(c, tz, a);
                    checked++;
                    if (got != set[i]) {
                        char g[40], x[40], y[40];
                        fail_msg("'%s' in %s after %s: %s, want %s", expr, zones[z], show(a, x, 40), show(got, g, 40),
                                 show(set[i], y, 40));
                    }
                }
                ad_cron_free(c);
            }
        }
        ad_tz_free(tz);
    }
    free(set);
    print_message("%zu next times checked around changes\n", checked);
    assert_true(checked > 50000);
}

/* The next time comes from jumping fields, not from walking through time: a hundred thousand next times of a
 * yearly, a 29 February and an every-second expression, in a zone with daylight saving, each take microseconds.
 * The bound is generous (a walk through seconds would take minutes); the figure is printed. */
static void test_cost(void **state)
{
    (void)state;
    static const char *const exprs[] = {"0 0 1 1 *", "0 0 29 2 *", "* * * * * *", "30 2 * * *", "0 0 13 * 5"};
    struct ad_tz *tz = zone("Europe/Berlin");
    for (size_t i = 0; i < sizeof(exprs) / sizeof(exprs[0]); i++) {
        struct ad_cron *c = parse(exprs[i]);
        int64_t start = ad_mono_ns(), t = at("2026-01-01T00:00:00Z"), sum = 0;
        for (int k = 0; k < 100000; k++)
            sum += ad_cron_next(c, tz, t + k * 3607);
        int64_t ns = ad_mono_ns() - start;
        print_message("'%s': %.2f us a next time\n", exprs[i], (double)ns / 100000 / 1000);
        assert_true(sum > 0);
        assert_true(ns < 20LL * 1000 * 1000 * 1000);
        ad_cron_free(c);
    }
    ad_tz_free(tz);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table),          cmocka_unit_test(test_transitions),   cmocka_unit_test(test_refused),
        cmocka_unit_test(test_against_search), cmocka_unit_test(test_against_rules), cmocka_unit_test(test_cost),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
