/*
 * test_tz.c - unit tests for src/common/tz.c: offsets of real zone files (Debian's tzdata) before, between and
 * after their listed transitions, where the footer's TZ rule decides (2040 and later); local times in gaps and
 * overlaps; footer rules written by hand (daylight time all year, negative daylight time, rule times past 24h
 * and below 0); names refused; and truncated, corrupted, oversized and version 1 files.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/tz.h"
#include "common/util.h"
#include "tmpdir.h"

/* Seconds since the epoch of an RFC 3339 time. */
static int64_t at(const char *rfc3339)
{
    int64_t ms;
    if (ad_time_parse_rfc3339(rfc3339, &ms) != 0)
        fail_msg("bad time %s", rfc3339);
    return ms / 1000;
}

static struct ad_tz *load(const char *name)
{
    char why[256] = "";
    struct ad_tz *tz = ad_tz_load(name, why, sizeof(why));
    if (tz == NULL)
        fail_msg("%s: %s", name, why);
    return tz;
}

static uint8_t *read_all(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    uint8_t *buf = ad_malloc(AD_TZ_MAX_FILE);
    *len = fread(buf, 1, AD_TZ_MAX_FILE, f);
    fclose(f);
    return buf;
}

static void test_offsets(void **state)
{
    (void)state;
    static const struct {
        const char *zone, *when;
        int32_t off;
    } v[] = {
        {"Europe/Berlin", "2026-01-15T12:00:00Z", 3600},
        {"Europe/Berlin", "2026-07-15T12:00:00Z", 7200},
        {"Europe/Berlin", "2026-03-29T00:59:59Z", 3600}, /* the last Sunday of March, 01:00Z */
        {"Europe/Berlin", "2026-03-29T01:00:00Z", 7200},
        {"Europe/Berlin", "2026-10-25T00:59:59Z", 7200}, /* the last Sunday of October, 01:00Z */
        {"Europe/Berlin", "2026-10-25T01:00:00Z", 3600},
        /* Past the file's transitions: the footer's CET-1CEST,M3.5.0,M10.5.0/3 decides. */
        {"Europe/Berlin", "2045-03-26T00:59:59Z", 3600},
        {"Europe/Berlin", "2045-03-26T01:00:00Z", 7200},
        {"Europe/Berlin", "2060-10-31T00:59:59Z", 7200},
        {"Europe/Berlin", "2060-10-31T01:00:00Z", 3600},
        {"Europe/Berlin", "2200-07-01T00:00:00Z", 7200},
        {"Europe/Berlin", "2200-12-01T00:00:00Z", 3600},
        /* Before 1901 (only in the 64-bit data): local mean time, +0:53:28. And 1945's double summer time. */
        {"Europe/Berlin", "1880-01-01T00:00:00Z", 3208},
        {"Europe/Berlin", "1945-06-01T00:00:00Z", 10800},
        {"America/New_York", "2026-01-15T12:00:00Z", -18000},
        {"America/New_York", "2026-03-08T06:59:59Z", -18000}, /* second Sunday of March, 02:00 EST */
        {"America/New_York", "2026-03-08T07:00:00Z", -14400},
        {"America/New_York", "2026-11-01T05:59:59Z", -14400}, /* first Sunday of November, 02:00 EDT */
        {"America/New_York", "2026-11-01T06:00:00Z", -18000},
        {"America/New_York", "2040-03-11T07:00:00Z", -14400},
        {"America/New_York", "2040-11-04T05:59:59Z", -14400},
        {"America/New_York", "2040-11-04T06:00:00Z", -18000},
        {"America/New_York", "2099-07-04T12:00:00Z", -14400},
        {"Australia/Sydney", "2026-01-15T00:00:00Z", 39600}, /* southern summer */
        {"Australia/Sydney", "2026-07-15T00:00:00Z", 36000},
        {"Australia/Sydney", "2050-01-15T00:00:00Z", 39600},
        {"Australia/Sydney", "2050-07-15T00:00:00Z", 36000},
        {"Australia/Lord_Howe", "2050-01-15T00:00:00Z", 39600}, /* half an hour of daylight time */
        {"Australia/Lord_Howe", "2050-07-15T00:00:00Z", 37800},
        {"Europe/Dublin", "2050-01-15T00:00:00Z", 0}, /* IST-1GMT0,M10.5.0,M3.5.0/1: negative DST */
        {"Europe/Dublin", "2050-07-15T00:00:00Z", 3600},
        {"Asia/Kolkata", "2050-07-15T00:00:00Z", 19800},
        {"Etc/UTC", "2050-07-15T00:00:00Z", 0},
        {"UTC", "2050-07-15T00:00:00Z", 0},
    };
    for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
        struct ad_tz *tz = load(v[i].zone);
        int32_t got = ad_tz_offset(tz, at(v[i].when));
        if (got != v[i].off)
            fail_msg("%s at %s: offset %d, want %d", v[i].zone, v[i].when, got, v[i].off);
        assert_string_equal(ad_tz_name(tz), v[i].zone);
        ad_tz_free(tz);
    }
}

static void test_next_change(void **state)
{
    (void)state;
    struct ad_tz *tz = load("Europe/Berlin");
    assert_int_equal(ad_tz_next_change(tz, at("2026-01-01T00:00:00Z")), at("2026-03-29T01:00:00Z"));
    assert_int_equal(ad_tz_next_change(tz, at("2026-03-29T01:00:00Z")), at("2026-10-25T01:00:00Z"));
    assert_int_equal(ad_tz_next_change(tz, at("2060-04-01T00:00:00Z")), at("2060-10-31T01:00:00Z"));
    ad_tz_free(tz);
    tz = load("Asia/Kolkata");
    assert_int_equal(ad_tz_next_change(tz, at("2026-01-01T00:00:00Z")), INT64_MAX);
    ad_tz_free(tz);
    tz = load("UTC");
    assert_int_equal(ad_tz_next_change(tz, 0), INT64_MAX);
    ad_tz_free(tz);
}

static void test_resolve(void **state)
{
    (void)state;
    int64_t u[2];
    struct ad_tz *tz = load("Europe/Berlin");
    /* 09:00 local: 08:00Z in winter, 07:00Z in summer. */
    assert_int_equal(ad_tz_resolve(tz, at("2026-01-15T09:00:00Z"), u), 1);
    assert_int_equal(u[0], at("2026-01-15T08:00:00Z"));
    assert_int_equal(ad_tz_resolve(tz, at("2026-07-15T09:00:00Z"), u), 1);
    assert_int_equal(u[0], at("2026-07-15T07:00:00Z"));
    /* The gap 02:00-03:00 on 29 March 2026: 02:30 is read with the winter offset, 01:30Z (03:30 CEST). */
    assert_int_equal(ad_tz_resolve(tz, at("2026-03-29T02:30:00Z"), u), 0);
    assert_int_equal(u[0], at("2026-03-29T01:30:00Z"));
    assert_int_equal(ad_tz_resolve(tz, at("2026-03-29T02:00:00Z"), u), 0);
    assert_int_equal(u[0], at("2026-03-29T01:00:00Z"));
    assert_int_equal(ad_tz_resolve(tz, at("2026-03-29T03:00:00Z"), u), 1);
    assert_int_equal(u[0], at("2026-03-29T01:00:00Z"));
    assert_int_equal(ad_tz_resolve(tz, at("2026-03-29T01:59:59Z"), u), 1);
    assert_int_equal(u[0], at("2026-03-29T00:59:59Z"));
    /* The overlap 02:00-03:00 on 25 October 2026: both, summer time first. */
    assert_int_equal(ad_tz_resolve(tz, at("2026-10-25T02:30:00Z"), u), 2);
    assert_int_equal(u[0], at("2026-10-25T00:30:00Z"));
    assert_int_equal(u[1], at("2026-10-25T01:30:00Z"));
    assert_int_equal(ad_tz_resolve(tz, at("2026-10-25T03:00:00Z"), u), 1);
    assert_int_equal(u[0], at("2026-10-25T02:00:00Z"));
    /* And in 2045, from the footer's rule. */
    assert_int_equal(ad_tz_resolve(tz, at("2045-03-26T02:30:00Z"), u), 0);
    assert_int_equal(u[0], at("2045-03-26T01:30:00Z"));
    assert_int_equal(ad_tz_resolve(tz, at("2045-10-29T02:30:00Z"), u), 2);
    assert_int_equal(u[0], at("2045-10-29T00:30:00Z"));
    assert_int_equal(u[1], at("2045-10-29T01:30:00Z"));
    ad_tz_free(tz);
    tz = load("America/New_York");
    assert_int_equal(ad_tz_resolve(tz, at("2040-03-11T02:30:00Z"), u), 0);
    assert_int_equal(u[0], at("2040-03-11T07:30:00Z"));
    assert_int_equal(ad_tz_resolve(tz, at("2040-11-04T01:30:00Z"), u), 2);
    assert_int_equal(u[0], at("2040-11-04T05:30:00Z"));
    assert_int_equal(u[1], at("2040-11-04T06:30:00Z"));
    ad_tz_free(tz);
}

static void test_names_refused(void **state)
{
    (void)state;
    static const char *const bad[] = {"",
                                      "../etc/passwd",
                                      "/etc/passwd",
                                      "Europe/../../etc/passwd",
                                      "Europe/Berlin;",
                                      "Europe/Berlin ",
                                      "Europe/Ber\nlin",
                                      "zone.tab",
                                      "Nowhere/Land",
                                      "Europe",
                                      "right/Europe/Berlin",
                                      "Aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa/B"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char why[256] = "";
        struct ad_tz *tz = ad_tz_load(bad[i], why, sizeof(why));
        if (tz != NULL)
            fail_msg("'%s' was loaded", bad[i]);
        assert_true(strlen(why) > 0 && strchr(why, '\n') == NULL);
    }
    char why[256];
    assert_null(ad_tz_load("right/Europe/Berlin", why, sizeof(why)));
    assert_non_null(strstr(why, "leap seconds"));
    assert_null(ad_tz_load("Nowhere/Land", why, sizeof(why)));
    assert_non_null(strstr(why, "unknown"));
}

/* A version 2 TZif file with no transitions (a version 1 block of one type, then the 64-bit one) and footer. */
static size_t make_tzif(uint8_t *out, int32_t utoff, const char *footer)
{
    size_t n = 0;
    for (int v = 0; v < 2; v++) {
        memset(out + n, 0, 44);
        memcpy(out + n, "TZif2", 5);
        out[n + 39] = 1; /* typecnt */
        out[n + 43] = 4; /* charcnt */
        n += 44;
        out[n++] = (uint8_t)((uint32_t)utoff >> 24);
        out[n++] = (uint8_t)((uint32_t)utoff >> 16);
        out[n++] = (uint8_t)((uint32_t)utoff >> 8);
        out[n++] = (uint8_t)utoff;
        out[n++] = 0;
        out[n++] = 0;
        memcpy(out + n, "XYZ", 4);
        n += 4;
    }
    n += (size_t)snprintf((char *)out + n, 300, "\n%s\n", footer);
    return n;
}

static void test_footer_rules(void **state)
{
    (void)state;
    static const struct {
        const char *footer, *when;
        int32_t off;
    } v[] = {
        {"EST5EDT,0/0,J365/25", "2050-01-01T03:00:00Z", -14400}, /* daylight time all year (RFC 8536 §3.3.1) */
        {"EST5EDT,0/0,J365/25", "2050-06-01T00:00:00Z", -14400},
        {"EST5EDT,0/0,J365/25", "2050-12-31T23:00:00Z", -14400},
        {"IST-1GMT0,M10.5.0,M3.5.0/1", "2050-07-01T00:00:00Z", 3600},
        {"IST-1GMT0,M10.5.0,M3.5.0/1", "2050-12-01T00:00:00Z", 0},
        {"<-03>3<-02>,M3.5.0/-2,M10.5.0/-1", "2050-07-01T00:00:00Z", -7200}, /* negative rule times */
        {"<-03>3<-02>,M3.5.0/-2,M10.5.0/-1", "2050-12-01T00:00:00Z", -10800},
        {"<+1030>-10:30<+11>-11,M10.1.0,M4.1.0", "2050-01-01T00:00:00Z", 39600},
        {"<+1030>-10:30<+11>-11,M10.1.0,M4.1.0", "2050-07-01T00:00:00Z", 37800},
        {"EST5EDT", "2050-07-01T00:00:00Z", -14400}, /* no rule: the United States' */
        {"EST5EDT", "2050-11-07T00:00:00Z", -18000},
        {"IRT-3:30", "2050-11-07T00:00:00Z", 12600},
        {"AAA3BBB,J60/167,J61", "2051-03-08T02:00:00Z", -7200}, /* from 1 March 167:00 -03 (8 March 02:00Z) */
        {"AAA3BBB,J60/167,J61", "2051-03-08T01:59:59Z", -10800},
        {"", "2050-07-01T00:00:00Z", -10800}, /* an empty footer: the last type */
    };
    for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
        uint8_t buf[512];
        size_t n = make_tzif(buf, -10800, v[i].footer);
        char why[256];
        struct ad_tz *tz = ad_tz_parse("Test/Zone", buf, n, why, sizeof(why));
        if (tz == NULL)
            fail_msg("footer '%s': %s", v[i].footer, why);
        int32_t got = ad_tz_offset(tz, at(v[i].when));
        if (got != v[i].off)
            fail_msg("footer '%s' at %s: offset %d, want %d", v[i].footer, v[i].when, got, v[i].off);
        ad_tz_free(tz);
    }
    static const char *const bad[] = {"EST",    "ES5",          "EST5EDT,M3.2.0",        "EST5EDT,M13.2.0,M11.1.0",
                                      "EST25",  "<E>5",         "EST5EDT,M3.2.0/168,J1", "EST5EDT,J0,J1",
                                      "EST5 x", "EST5EDT,366,1"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        uint8_t buf[512];
        size_t n = make_tzif(buf, 0, bad[i]);
        char why[256];
        struct ad_tz *tz = ad_tz_parse("Test/Zone", buf, n, why, sizeof(why));
        if (tz != NULL)
            fail_msg("footer '%s' was accepted", bad[i]);
        assert_non_null(strstr(why, "footer"));
    }
}

/* Every truncation of a real file is refused, and every corruption of one byte is refused or gives a zone
 * whose offsets stay in range. */
static void test_damaged_files(void **state)
{
    (void)state;
    size_t len;
    uint8_t *good = read_all("/usr/share/zoneinfo/America/New_York", &len);
    uint8_t *copy = ad_malloc(len);
    char why[256];
    for (size_t cut = 0; cut < len; cut++) {
        memcpy(copy, good, cut);
        struct ad_tz *tz = ad_tz_parse("Cut", copy, cut, why, sizeof(why));
        if (tz != NULL)
            fail_msg("truncated at %zu of %zu: loaded", cut, len);
    }
    int loaded = 0;
    for (size_t pos = 0; pos < len; pos++) {
        memcpy(copy, good, len);
        copy[pos] ^= (uint8_t)(0x5a + pos);
        struct ad_tz *tz = ad_tz_parse("Bent", copy, len, why, sizeof(why));
        if (tz == NULL)
            continue;
        loaded++;
        for (int64_t t = -4000000000LL; t < 8000000000LL; t += 123456789) {
            int32_t o = ad_tz_offset(tz, t);
            assert_true(o >= -26 * 3600 && o <= 26 * 3600);
            int64_t u[2];
            ad_tz_resolve(tz, t, u);
            assert_true(ad_tz_next_change(tz, t) > t);
        }
        ad_tz_free(tz);
    }
    assert_true(loaded > 0); /* some bytes (abbreviations, the 32-bit data) do not matter */
    struct ad_tz *tz = ad_tz_parse("Whole", good, len, why, sizeof(why));
    assert_non_null(tz);
    ad_tz_free(tz);
    free(copy);
    free(good);
}

/* A version 1 file (the 32-bit block alone) has its transitions and no footer: the last offset stays. */
static void test_version1(void **state)
{
    (void)state;
    size_t len;
    uint8_t *buf = read_all("/usr/share/zoneinfo/Europe/Berlin", &len);
    buf[4] = 0;
    char why[256];
    struct ad_tz *tz = ad_tz_parse("V1", buf, len, why, sizeof(why));
    if (tz == NULL)
        fail_msg("%s", why);
    assert_int_equal(ad_tz_offset(tz, at("2026-07-15T12:00:00Z")), 7200);
    assert_int_equal(ad_tz_offset(tz, at("2026-01-15T12:00:00Z")), 3600);
    ad_tz_free(tz);
    free(buf);
}

static void test_directory(void **state)
{
    (void)state;
    char dir[64], path[256], why[256];
    assert_int_equal(tmpdir_make(dir, sizeof(dir), "tz"), 0);
    snprintf(path, sizeof(path), "%s/Test", dir);
    assert_int_equal(mkdir(path, 0700), 0);
    size_t len;
    uint8_t *buf = read_all("/usr/share/zoneinfo/Asia/Kolkata", &len);
    snprintf(path, sizeof(path), "%s/Test/Zone", dir);
    FILE *f = fopen(path, "wb");
    fwrite(buf, 1, len, f);
    fclose(f);
    /* A file over the cap is refused before it is read. */
    snprintf(path, sizeof(path), "%s/Test/Big", dir);
    f = fopen(path, "wb");
    uint8_t *big = ad_calloc(1, AD_TZ_MAX_FILE + 1);
    memcpy(big, buf, len);
    fwrite(big, 1, AD_TZ_MAX_FILE + 1, f);
    fclose(f);
    free(big);
    free(buf);
    ad_tz_set_dir(dir);
    struct ad_tz *tz = ad_tz_load("Test/Zone", why, sizeof(why));
    if (tz == NULL)
        fail_msg("%s", why);
    assert_int_equal(ad_tz_offset(tz, 0), 19800);
    /* Loaded twice: the same zone, freed when both are done with it (ASan would see a leak or a double free). */
    struct ad_tz *again = load("Test/Zone");
    assert_ptr_equal(again, tz);
    ad_tz_free(again);
    ad_tz_free(tz);
    assert_null(ad_tz_load("Test/Big", why, sizeof(why)));
    assert_non_null(strstr(why, "too large"));
    assert_null(ad_tz_load("Europe/Berlin", why, sizeof(why))); /* not in this directory */
    ad_tz_set_dir(NULL);
    tz = load("Europe/Berlin");
    ad_tz_free(tz);
    tmpdir_remove(dir);
}

static void test_calendar(void **state)
{
    (void)state;
    assert_int_equal(ad_days_from_civil(1970, 1, 1), 0);
    assert_int_equal(ad_days_from_civil(2000, 3, 1), 11017);
    assert_int_equal(ad_days_from_civil(1969, 12, 31), -1);
    for (int64_t d = -800000; d < 800000; d += 997) {
        int64_t y;
        int m, dd;
        ad_civil_from_days(d, &y, &m, &dd);
        assert_int_equal(ad_days_from_civil(y, m, dd), d);
    }
    assert_int_equal(ad_weekday(0), 4); /* a Thursday */
    assert_int_equal(ad_weekday(-1), 3);
    assert_int_equal(ad_days_in_month(2028, 2), 29);
    assert_int_equal(ad_days_in_month(2100, 2), 28);
    assert_int_equal(ad_days_in_month(2000, 2), 29);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_offsets),       cmocka_unit_test(test_next_change),  cmocka_unit_test(test_resolve),
        cmocka_unit_test(test_names_refused), cmocka_unit_test(test_footer_rules), cmocka_unit_test(test_damaged_files),
        cmocka_unit_test(test_version1),      cmocka_unit_test(test_directory),    cmocka_unit_test(test_calendar),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
