/*
 * cron.c - cron expressions (Vixie cron's syntax, with an optional seconds field first) and their next fire
 * time in a time zone.
 *
 * A parsed expression is one bit set per field. The next fire time is found in local (wall-clock) time by
 * jumping field by field: a month that does not match skips to the next one that does, an hour to the next
 * hour, and so on, so a yearly expression costs a handful of steps, never a walk through seconds. Each local
 * candidate is then turned into instants (ad_tz_resolve) by the rules of docs/schedules.md: a local time in a
 * spring-forward gap is read with the offset before the gap (02:30 in a gap from 02:00 to 03:00 fires at
 * 03:30 new time: RFC 5545 §3.3.5, Temporal's "compatible", java.time's ZonedDateTime.of); a local time that
 * happens twice in a fall-back overlap fires at its first occurrence, unless the expression's seconds,
 * minute or hour field is written with `*` (alone or with a step), which then fires in both passes, following the clock
 * as it is (cron(8) of Vixie cron and cronie). Those two rules let a later local time give an earlier instant
 * near a change, so the search starts early enough (first_local), steps over local times whose instants are
 * too early (skip_early), and stops at the first instant that no later local time can undercut.
 * What it does not do: Quartz's `L`, `W`, `#` and `?`, ranges that wrap around (FRI-MON), and years.
 */
#include "common/cron.h"
#include "common/util.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DAY 86400
/* Instants handled: the years 1 to 9000, so that no calendar arithmetic overflows. */
#define MIN_S (-62135596800LL + 30 * DAY)
#define MAX_S 221845392000LL
/* No instant is further from its local time than a day and two hours (tz.c's bound). */
#define WINDOW (26 * 3600)
/* Local times ad_cron_next looks at, at most, before it gives up with what it has. */
#define MAX_STEPS 10000

enum { F_SEC, F_MIN, F_HOUR, F_DOM, F_MON, F_DOW, F__COUNT };

struct ad_cron {
    uint64_t bits[F__COUNT]; /* bit v set: value v matches (days of month 1-31, months 1-12, weekdays 0-6) */
    int dom_star, dow_star;  /* the day fields were written starting with '*' */
    int both_passes;         /* seconds, minute or hour starts with '*': fires in both passes of an overlap */
    int impossible;
};

static const struct {
    const char *name;
    int lo, hi;
} fields[F__COUNT] = {
    {"seconds", 0, 59},      {"minute", 0, 59}, {"hour", 0, 23},
    {"day-of-month", 1, 31}, {"month", 1, 12},  {"day-of-week", 0, 7},
};

static const char *const month_names[] = {"JAN", "FEB", "MAR", "APR", "MAY", "JUN",
                                          "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"};
static const char *const day_names[] = {"SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"};

/* A number or (month and weekday fields) a three-letter name at *p. */
static int parse_value(const char **p, int f, int *out)
{
    const char *s = *p;
    if (isdigit((unsigned char)*s)) {
        int v = 0, digits = 0;
        while (isdigit((unsigned char)*s) && digits < 3) {
            v = v * 10 + (*s++ - '0');
            digits++;
        }
        if (isdigit((unsigned char)*s))
            return -1;
        *out = v;
        *p = s;
        return 0;
    }
    const char *const *names = f == F_MON ? month_names : f == F_DOW ? day_names : NULL;
    int count = f == F_MON ? 12 : 7, base = f == F_MON ? 1 : 0;
    if (names == NULL || !isalpha((unsigned char)s[0]) || !isalpha((unsigned char)s[1]) ||
        !isalpha((unsigned char)s[2]) || isalnum((unsigned char)s[3]))
        return -1;
    for (int i = 0; i < count; i++) {
        if (strncasecmp(s, names[i], 3) == 0) {
            *out = i + base;
            *p = s + 3;
            return 0;
        }
    }
    return -1;
}

/* One field (its text is [s, s + len)) into c->bits[f]; NULL, or why it is refused. */
static const char *parse_field(struct ad_cron *c, int f, const char *s, size_t len, char *why, size_t whylen)
{
    char text[AD_CRON_MAX_LEN + 1];
    memcpy(text, s, len);
    text[len] = '\0';
    int lo = fields[f].lo, hi = fields[f].hi;
    const char *p = text;
    for (;;) {
        int a, b, step = 1, single = 0;
        if (*p == '*') {
            a = lo;
            b = hi;
            p++;
        } else {
            if (parse_value(&p, f, &a) < 0)
                goto bad;
            b = a;
            single = 1;
            if (*p == '-') {
                p++;
                single = 0;
                if (parse_value(&p, f, &b) < 0)
                    goto bad;
            }
        }
        if (*p == '/') {
            p++;
            if (!isdigit((unsigned char)*p) || parse_value(&p, F_SEC, &step) < 0 || step == 0)
                goto bad;
            if (single) /* "a/n" is "a-max/n" */
                b = hi;
        }
        if (a < lo || a > hi || b < lo || b > hi) {
            snprintf(why, whylen, "%s field '%s': values go from %d to %d", fields[f].name, text, lo, hi);
            return why;
        }
        if (a > b) {
            snprintf(why, whylen, "%s field '%s': range %d-%d goes backwards", fields[f].name, text, a, b);
            return why;
        }
        for (int v = a; v <= b; v += step)
            c->bits[f] |= (uint64_t)1 << (f == F_DOW ? v % 7 : v);
        if (*p == '\0')
            return NULL;
        if (*p++ != ',' || *p == '\0')
            goto bad;
    }
bad:
    if (strchr(text, '#') != NULL || ((f == F_DOM || f == F_DOW) && strpbrk(text, "LW") != NULL) ||
        strchr(text, '?') != NULL)
        snprintf(why, whylen,
                 "%s field '%s': 'L', 'W', '#' and '?' (Quartz's last, nearest weekday, nth weekday, no value) "
                 "are not supported",
                 fields[f].name, text);
    else
        snprintf(why, whylen, "%s field '%s': expected *, a value, a range a-b, a step (*/n, a-b/n) or a list of them",
                 fields[f].name, text);
    return why;
}

/* 1 when no month of the expression has a day it names, and the day of the week cannot help. */
static int never_fires(const struct ad_cron *c)
{
    if (!c->dow_star && !c->dom_star) /* either day field matches: every weekday comes round */
        return 0;
    if (c->dom_star) /* the days of the month include the 1st, and the weekday of the 1st comes round */
        return 0;
    for (int m = 1; m <= 12; m++) {
        if (!(c->bits[F_MON] & (uint64_t)1 << m))
            continue;
        int max = ad_days_in_month(2000, m); /* a leap year: 29 February counts */
        for (int d = 1; d <= max; d++) {
            if (c->bits[F_DOM] & (uint64_t)1 << d)
                return 0;
        }
    }
    return 1;
}

struct ad_cron *ad_cron_parse(const char *expr, char *why, size_t whylen)
{
    static const struct {
        const char *name, *expr;
    } macros[] = {{"@yearly", "0 0 1 1 *"}, {"@annually", "0 0 1 1 *"}, {"@monthly", "0 0 1 * *"},
                  {"@weekly", "0 0 * * 0"}, {"@daily", "0 0 * * *"},    {"@midnight", "0 0 * * *"},
                  {"@hourly", "0 * * * *"}};
    if (expr == NULL || strlen(expr) > AD_CRON_MAX_LEN) {
        snprintf(why, whylen, "cron expression longer than %d characters", AD_CRON_MAX_LEN);
        return NULL;
    }
    while (isspace((unsigned char)*expr))
        expr++;
    if (expr[0] == '@') {
        size_t len = strcspn(expr, " \t\r\n\v\f");
        const char *rest = expr + len;
        while (isspace((unsigned char)*rest))
            rest++;
        for (size_t i = 0; i < sizeof(macros) / sizeof(macros[0]) && *rest == '\0'; i++) {
            if (strlen(macros[i].name) == len && strncasecmp(expr, macros[i].name, len) == 0)
                return ad_cron_parse(macros[i].expr, why, whylen);
        }
        snprintf(why, whylen,
                 "'%.*s': the names are @yearly, @annually, @monthly, @weekly, @daily, @midnight "
                 "and @hourly",
                 (int)(len < 32 ? len : 32), expr);
        return NULL;
    }
    const char *start[F__COUNT + 1];
    size_t len[F__COUNT + 1];
    int n = 0;
    for (const char *p = expr; *p != '\0';) {
        size_t l = strcspn(p, " \t\r\n");
        if (n <= F__COUNT) {
            start[n] = p;
            len[n] = l;
        }
        n++;
        p += l;
        while (isspace((unsigned char)*p))
            p++;
    }
    if (n != 5 && n != 6) {
        snprintf(why, whylen,
                 "expected 5 fields (minute hour day-of-month month day-of-week) or 6 (seconds first), got %d", n);
        return NULL;
    }
    struct ad_cron *c = ad_calloc(1, sizeof(*c));
    int first = n == 5 ? F_MIN : F_SEC;
    if (n == 5)
        c->bits[F_SEC] = 1; /* second 0 */
    for (int f = first; f < F__COUNT; f++) {
        int i = f - first;
        if (parse_field(c, f, start[i], len[i], why, whylen) != NULL) {
            free(c);
            return NULL;
        }
    }
    c->dom_star = start[F_DOM - first][0] == '*';
    c->dow_star = start[F_DOW - first][0] == '*';
    c->both_passes =
        (n == 6 && start[0][0] == '*') || start[F_MIN - first][0] == '*' || start[F_HOUR - first][0] == '*';
    c->impossible = never_fires(c);
    return c;
}

void ad_cron_free(struct ad_cron *c)
{
    free(c);
}

int ad_cron_impossible(const struct ad_cron *c)
{
    return c->impossible;
}

/* The lowest value >= v in bits, or -1. */
static int next_bit(uint64_t bits, int v)
{
    if (v >= 64)
        return -1;
    uint64_t rest = bits & (~(uint64_t)0 << v);
    return rest == 0 ? -1 : __builtin_ctzll(rest);
}

static int day_matches(const struct ad_cron *c, int64_t days, int d)
{
    int dom = (c->bits[F_DOM] >> d) & 1, dow = (c->bits[F_DOW] >> ad_weekday(days)) & 1;
    return c->dom_star || c->dow_star ? dom && dow : dom || dow;
}

/* The first local time >= from that the fields match, or -1 when it would be after limit. */
static int64_t next_local(const struct ad_cron *c, int64_t from, int64_t limit)
{
    int64_t days = from / DAY - (from % DAY < 0), y;
    int64_t sod = from - days * DAY;
    int m, d, h = (int)(sod / 3600), mi = (int)(sod / 60 % 60), s = (int)(sod % 60);
    ad_civil_from_days(days, &y, &m, &d);
    for (;;) {
        /* Carry what the steps below overflowed. */
        if (s >= 60)
            s = 0, mi++;
        if (mi >= 60)
            mi = 0, h++;
        if (h >= 24)
            h = 0, d++;
        if (d > ad_days_in_month(y, m))
            d = 1, m++;
        if (m > 12)
            m = 1, y++;
        if (ad_days_from_civil(y, m, d) * DAY > limit)
            return -1;
        if (!(c->bits[F_MON] >> m & 1)) {
            int next = next_bit(c->bits[F_MON], m + 1);
            if (next < 0)
                y++, next = next_bit(c->bits[F_MON], 1);
            m = next, d = 1, h = mi = s = 0;
            continue;
        }
        days = ad_days_from_civil(y, m, d);
        if (!day_matches(c, days, d)) {
            if (c->dow_star) { /* only the day of the month decides: jump to the next one */
                int next = next_bit(c->bits[F_DOM], d + 1);
                d = next < 0 ? 32 : next;
            } else {
                d++;
            }
            h = mi = s = 0;
            continue;
        }
        if (!(c->bits[F_HOUR] >> h & 1)) {
            int next = next_bit(c->bits[F_HOUR], h + 1);
            h = next < 0 ? 24 : next, mi = s = 0;
            continue;
        }
        if (!(c->bits[F_MIN] >> mi & 1)) {
            int next = next_bit(c->bits[F_MIN], mi + 1);
            mi = next < 0 ? 60 : next, s = 0;
            continue;
        }
        if (!(c->bits[F_SEC] >> s & 1)) {
            int next = next_bit(c->bits[F_SEC], s + 1);
            s = next < 0 ? 60 : next;
            continue;
        }
        return days * DAY + h * 3600 + mi * 60 + s;
    }
}

/* The lowest and highest offsets in force at some instant of [a, b]. */
static void offset_range(const struct ad_tz *tz, int64_t a, int64_t b, int32_t *lo, int32_t *hi)
{
    *lo = *hi = ad_tz_offset(tz, a);
    for (int64_t t = ad_tz_next_change(tz, a); t <= b; t = ad_tz_next_change(tz, t)) {
        int32_t o = ad_tz_offset(tz, t);
        *lo = o < *lo ? o : *lo;
        *hi = o > *hi ? o : *hi;
    }
}

/* The earliest local time whose instants can be t or later. Usually t's own local time; earlier when t is
 * within a gap's length after a spring-forward (a local time in the gap is read with the offset before it, so
 * it lands after the change) or an overlap's length before a fall-back (the second pass repeats local times
 * earlier than t's). With gaps 0, the gap's local times are left out (the caller is past them). */
static int64_t first_local(const struct ad_tz *tz, int64_t t, int gaps)
{
    int64_t from = t + ad_tz_offset(tz, t);
    for (int64_t c = ad_tz_next_change(tz, t - WINDOW); c <= t + WINDOW; c = ad_tz_next_change(tz, c)) {
        int32_t o1 = ad_tz_offset(tz, c - 1), o2 = ad_tz_offset(tz, c);
        if (gaps && o2 > o1 && c <= t && t < c + (o2 - o1) && t + o1 < from)
            from = t + o1; /* the local times of the gap from which t on is reached */
        if (o2 < o1 && t < c && c < t + (o1 - o2) && c + o2 < from)
            from = c + o2;
    }
    return from;
}

/* Where to look after local, whose instants u[0..n) (n 0: local is in a gap) all come before t, such that
 * no local time skipped has an instant at t or later. slack is the spread of the offsets near t. */
static int64_t skip_early(const struct ad_tz *tz, int64_t local, const int64_t *u, int n, int64_t t, int32_t slack)
{
    if (n == 0) { /* a gap: its local times move with their instants, up to the gap's end */
        int32_t o2 = ad_tz_offset(tz, u[0]);
        int64_t change = ad_tz_next_change(tz, local - o2 - 1);
        if (change > MAX_S) /* no real change (a hostile zone) */
            return local + 1;
        return t < change + (o2 - (local - u[0])) ? local + (t - u[0]) : change + o2;
    }
    /* The last pass's instant: if no change lies between it and t, local times up to t's move with it, and
     * what else could reach t is what first_local finds (a fall-back just after t). */
    int64_t last = u[n - 1];
    if (ad_tz_next_change(tz, last) > t) {
        int64_t to = first_local(tz, t, 0);
        return to > local ? to : local + 1;
    }
    int64_t skip = t - last - slack;
    return local + (skip > 1 ? skip : 1);
}

int64_t ad_cron_next(const struct ad_cron *c, const struct ad_tz *tz, int64_t after_s)
{
    if (c->impossible || after_s < MIN_S || after_s > MAX_S)
        return -1;
    int64_t t = after_s + 1, from = first_local(tz, t, 1), y;
    int m, d;
    ad_civil_from_days(from / DAY, &y, &m, &d);
    int64_t limit = ad_days_from_civil(y + AD_CRON_HORIZON_YEARS, m, 1) * DAY;
    int32_t lo, hi;
    offset_range(tz, t - 3 * WINDOW, t + 3 * WINDOW, &lo, &hi);
    int64_t best = -1, last = INT64_MIN;
    /* Each step moves on by at least a second, and real zones take a handful; the cap is for hostile ones. */
    for (int steps = 0; steps < MAX_STEPS; steps++) {
        int64_t local = next_local(c, from > last ? from : last + 1, limit);
        if (local < 0)
            break;
        last = local;
        int64_t u[2];
        int n = ad_tz_resolve(tz, local, u);
        int take = n == 2 && c->both_passes ? 2 : 1;
        if (u[0] > after_s) {
            if (best < 0 || u[0] < best)
                best = u[0];
            /* A local time that exists: later ones keep to its offset until the next change, and whatever
             * comes after that change (a gap read with this offset, an overlap's passes) is later still. */
            if (n != 0)
                break;
            /* In a gap, later local times of the gap give later instants, but the local times after the gap
             * start again from the change: go on from there. */
            int32_t o2 = ad_tz_offset(tz, u[0]);
            int64_t change = ad_tz_next_change(tz, local - o2 - 1);
            from = change <= MAX_S ? change + o2 : local + 1; /* else no real change (a hostile zone) */
            continue;
        }
        if (take == 2 && u[1] > after_s) {
            /* The first pass is behind and the second ahead. */
            if (best < 0 || u[1] < best)
                best = u[1];
            if (ad_tz_next_change(tz, u[0]) <= after_s)
                break;                 /* the first pass is over: later local times give later instants */
            from = local + (t - u[0]); /* t falls in the first pass: its local time may come before best */
            continue;
        }
        /* Too early: skip the local times that cannot reach t. */
        from = skip_early(tz, local, u, n == 0 ? 0 : take, t, hi - lo);
    }
    return best;
}
