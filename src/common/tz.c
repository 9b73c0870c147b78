/*
 * tz.c - time zones read from TZif files (RFC 8536) and their footer's POSIX TZ rule (POSIX.1-2017 §8.3,
 * with RFC 8536 §3.3.1's extensions: hours up to 167 in rule times, and negative ones).
 *
 * A loaded zone keeps, for each transition, its instant and the UTC offset from then on; the offset before
 * the first is type 0's (RFC 8536 §3.2), and after the last the footer's rule decides (or the last offset when
 * the footer is empty, or the file is version 1). Only offsets are kept: abbreviations and the isdst flag
 * matter to nobody here. Loaded zones are shared through a small cache keyed by directory and name, so that
 * a hundred thousand schedules in Europe/Berlin read its file once; a zone is freed when its last user frees
 * it. The file is read whole, up to AD_TZ_MAX_FILE bytes, and every count and index in it is checked before
 * use: a truncated or hostile file is refused with a reason, never read past its end.
 */
#include "common/tz.h"
#include "common/util.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define DAY 86400
/* RFC 8536 §3.2: utoff SHOULD be in -89999..93599; anything beyond a day and two hours is refused. */
#define MAX_OFFSET (26 * 3600)
/* Rule arithmetic is done on instants within this bound (about 35 million years), so nothing overflows. */
#define MAX_RULE_T ((int64_t)1 << 50)
#define MAX_FOOTER 256

/* One end of a daylight-saving period: a day (Jn, n or Mm.w.d) and a local time of that day in seconds. */
struct rule_date {
    char kind; /* 'J': julian day 1-365 without 29 February; 'N': zero-based day 0-365; 'M': month.week.day */
    int n, month, week, wday;
    int32_t time;
};

struct rule {
    int32_t std_off, dst_off; /* seconds east of UTC */
    int has_dst;
    struct rule_date start, end;
};

struct ad_tz {
    char name[AD_TZ_MAX_NAME + 1];
    size_t n;
    int64_t *at;  /* transition instants, ascending */
    int32_t *off; /* offset from at[i] on */
    int32_t off0; /* before the first transition */
    int has_rule;
    struct rule rule;
    /* The cache: key is "dir/name"; refs counts users; both guarded by cache_lock. */
    char *key;
    int refs;
    struct ad_tz *next;
};

static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
static struct ad_tz *cache;
static char *dir_override;

/* The calendar (Howard Hinnant's days_from_civil and civil_from_days). */

int64_t ad_days_from_civil(int64_t y, int m, int d)
{
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    int64_t yoe = y - era * 400;
    int64_t doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

void ad_civil_from_days(int64_t days, int64_t *y, int *m, int *d)
{
    int64_t z = days + 719468;
    int64_t era = (z >= 0 ? z : z - 146096) / 146097;
    int64_t doe = z - era * 146097;
    int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    int64_t mp = (5 * doy + 2) / 153;
    *d = (int)(doy - (153 * mp + 2) / 5 + 1);
    *m = (int)(mp < 10 ? mp + 3 : mp - 9);
    *y = yoe + era * 400 + (*m <= 2);
}

static int is_leap(int64_t y)
{
    return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

int ad_days_in_month(int64_t y, int m)
{
    static const int len[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    return m == 2 && is_leap(y) ? 29 : len[m - 1];
}

int ad_weekday(int64_t days)
{
    int64_t w = (days + 4) % 7; /* 1970-01-01 was a Thursday */
    return (int)(w < 0 ? w + 7 : w);
}

static int64_t floor_div(int64_t a, int64_t b)
{
    return a / b - (a % b != 0 && (a < 0) != (b < 0));
}

/* The POSIX TZ string of the footer. */

/* A zone abbreviation: three or more letters, or <...> of letters, digits, '+' and '-'. */
static int parse_abbr(const char **p)
{
    const char *s = *p;
    size_t len = 0;
    if (*s == '<') {
        s++;
        while ((s[len] >= 'A' && s[len] <= 'Z') || (s[len] >= 'a' && s[len] <= 'z') ||
               (s[len] >= '0' && s[len] <= '9') || s[len] == '+' || s[len] == '-')
            len++;
        if (len < 3 || s[len] != '>')
            return -1;
        *p = s + len + 1;
        return 0;
    }
    while ((s[len] >= 'A' && s[len] <= 'Z') || (s[len] >= 'a' && s[len] <= 'z'))
        len++;
    if (len < 3)
        return -1;
    *p = s + len;
    return 0;
}

/* [+-]h[h[h]][:mm[:ss]] with hours up to max_h, into seconds (the sign kept as written). */
static int parse_hms(const char **p, int max_h, int32_t *out)
{
    const char *s = *p;
    int sign = 1;
    if (*s == '+' || *s == '-')
        sign = *s++ == '-' ? -1 : 1;
    int h = 0, digits = 0;
    while (*s >= '0' && *s <= '9' && digits < 3) {
        h = h * 10 + (*s++ - '0');
        digits++;
    }
    if (digits == 0 || h > max_h)
        return -1;
    int32_t v = h * 3600;
    for (int part = 0; part < 2 && *s == ':'; part++) {
        if (!(s[1] >= '0' && s[1] <= '5' && s[2] >= '0' && s[2] <= '9'))
            return -1;
        v += ((s[1] - '0') * 10 + (s[2] - '0')) * (part == 0 ? 60 : 1);
        s += 3;
    }
    *out = sign * v;
    *p = s;
    return 0;
}

static int parse_num(const char **p, int lo, int hi, int *out)
{
    const char *s = *p;
    int v = 0, digits = 0;
    while (*s >= '0' && *s <= '9' && digits < 4) {
        v = v * 10 + (*s++ - '0');
        digits++;
    }
    if (digits == 0 || v < lo || v > hi)
        return -1;
    *out = v;
    *p = s;
    return 0;
}

static int parse_rule_date(const char **p, struct rule_date *r)
{
    const char *s = *p;
    if (*s == 'J') {
        s++;
        r->kind = 'J';
        if (parse_num(&s, 1, 365, &r->n) < 0)
            return -1;
    } else if (*s == 'M') {
        s++;
        r->kind = 'M';
        if (parse_num(&s, 1, 12, &r->month) < 0 || *s++ != '.' || parse_num(&s, 1, 5, &r->week) < 0 || *s++ != '.' ||
            parse_num(&s, 0, 6, &r->wday) < 0)
            return -1;
    } else {
        r->kind = 'N';
        if (parse_num(&s, 0, 365, &r->n) < 0)
            return -1;
    }
    r->time = 2 * 3600;
    if (*s == '/' && (s++, parse_hms(&s, 167, &r->time) < 0))
        return -1;
    *p = s;
    return 0;
}

static int parse_posix(const char *s, struct rule *r)
{
    int32_t v;
    if (parse_abbr(&s) < 0 || parse_hms(&s, 24, &v) < 0)
        return -1;
    r->std_off = -v; /* POSIX counts west of Greenwich as positive */
    r->has_dst = 0;
    if (*s == '\0')
        return 0;
    if (parse_abbr(&s) < 0)
        return -1;
    r->has_dst = 1;
    r->dst_off = r->std_off + 3600;
    if (*s != ',' && *s != '\0') {
        if (parse_hms(&s, 24, &v) < 0)
            return -1;
        r->dst_off = -v;
    }
    if (*s == '\0') /* no rule: the United States' since 2007, as tzcode assumes */
        s = ",M3.2.0,M11.1.0";
    if (*s++ != ',' || parse_rule_date(&s, &r->start) < 0 || *s++ != ',' || parse_rule_date(&s, &r->end) < 0 ||
        *s != '\0')
        return -1;
    return 0;
}

/* The instant a rule date falls on in year y; the local time it names is read with offset off. */
static int64_t rule_instant(const struct rule_date *r, int64_t y, int32_t off)
{
    int64_t day;
    if (r->kind == 'J')
        day = ad_days_from_civil(y, 1, 1) + r->n - 1 + (is_leap(y) && r->n >= 60);
    else if (r->kind == 'N')
        day = ad_days_from_civil(y, 1, 1) + r->n;
    else {
        int64_t first = ad_days_from_civil(y, r->month, 1);
        int d = 1 + (r->wday - ad_weekday(first) + 7) % 7 + (r->week - 1) * 7;
        while (d > ad_days_in_month(y, r->month))
            d -= 7;
        day = first + d - 1;
    }
    return day * DAY + r->time - off;
}

/* The rule's changes in the years around instant t, in order: at[i] starts offset off[i]. Ties put the end of
 * one period before the start of the next, so that a zone on daylight time all year stays on it. */
static int rule_changes(const struct rule *r, int64_t t, int64_t at[6], int32_t off[6])
{
    int64_t y;
    int m, d;
    ad_civil_from_days(floor_div(t, DAY), &y, &m, &d);
    int n = 0;
    for (int64_t yy = y - 1; yy <= y + 1; yy++) {
        at[n] = rule_instant(&r->start, yy, r->std_off);
        off[n++] = r->dst_off;
        at[n] = rule_instant(&r->end, yy, r->dst_off);
        off[n++] = r->std_off;
    }
    for (int i = 1; i < n; i++) { /* insertion sort of six */
        for (int j = i; j > 0; j--) {
            int later = at[j - 1] > at[j] || (at[j - 1] == at[j] && off[j - 1] == r->dst_off && off[j] == r->std_off);
            if (!later)
                break;
            int64_t ta = at[j];
            at[j] = at[j - 1];
            at[j - 1] = ta;
            int32_t to = off[j];
            off[j] = off[j - 1];
            off[j - 1] = to;
        }
    }
    return n;
}

static int32_t rule_offset(const struct rule *r, int64_t t)
{
    if (!r->has_dst)
        return r->std_off;
    t = t > MAX_RULE_T ? MAX_RULE_T : t < -MAX_RULE_T ? -MAX_RULE_T : t;
    int64_t at[6];
    int32_t off[6];
    int n = rule_changes(r, t, at, off);
    int32_t cur = r->std_off;
    for (int i = 0; i < n && at[i] <= t; i++)
        cur = off[i];
    return cur;
}

static int64_t rule_next(const struct rule *r, int64_t t)
{
    if (!r->has_dst || t >= MAX_RULE_T)
        return INT64_MAX;
    if (t < -MAX_RULE_T)
        t = -MAX_RULE_T;
    int64_t at[6];
    int32_t off[6];
    int n = rule_changes(r, t, at, off);
    for (int i = 0; i < n; i++) {
        if (at[i] > t)
            return at[i];
    }
    return INT64_MAX;
}

/* Offsets. */

/* The index of the last transition at or before t, or -1 when t is before the first. */
static ptrdiff_t last_at_or_before(const struct ad_tz *tz, int64_t t)
{
    size_t lo = 0, hi = tz->n; /* answer in [lo, hi) + 1 */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (tz->at[mid] <= t)
            lo = mid + 1;
        else
            hi = mid;
    }
    return (ptrdiff_t)lo - 1;
}

int32_t ad_tz_offset(const struct ad_tz *tz, int64_t utc_s)
{
    if (tz->n == 0)
        return tz->has_rule ? rule_offset(&tz->rule, utc_s) : tz->off0;
    if (utc_s >= tz->at[tz->n - 1] && tz->has_rule)
        return rule_offset(&tz->rule, utc_s);
    ptrdiff_t i = last_at_or_before(tz, utc_s);
    return i < 0 ? tz->off0 : tz->off[i];
}

int64_t ad_tz_next_change(const struct ad_tz *tz, int64_t utc_s)
{
    if (tz->n > 0 && utc_s < tz->at[tz->n - 1])
        return tz->at[last_at_or_before(tz, utc_s) + 1];
    return tz->has_rule ? rule_next(&tz->rule, utc_s) : INT64_MAX;
}

int ad_tz_resolve(const struct ad_tz *tz, int64_t local_s, int64_t out[2])
{
    if (local_s > MAX_RULE_T || local_s < -MAX_RULE_T) {
        out[0] = local_s - ad_tz_offset(tz, local_s);
        return 1;
    }
    /* Walk the stretches of constant offset that an instant with this local time could lie in. */
    int64_t lo = local_s - MAX_OFFSET, hi = local_s + MAX_OFFSET, t = lo;
    int32_t o = ad_tz_offset(tz, t);
    int n = 0, gap = 0;
    int64_t gap_at = 0;
    for (;;) {
        int64_t end = ad_tz_next_change(tz, t), u = local_s - o;
        if (u >= t && u < end && n < 2)
            out[n++] = u;
        if (end > hi)
            break;
        int32_t o2 = ad_tz_offset(tz, end);
        if (o2 > o && local_s >= end + o && local_s < end + o2) {
            gap = 1;
            gap_at = local_s - o;
        }
        t = end;
        o = o2;
    }
    if (n == 0)
        out[0] = gap ? gap_at : local_s - ad_tz_offset(tz, local_s);
    return n;
}

/* Reading TZif. */

static uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static int64_t be64(const uint8_t *p)
{
    return (int64_t)((uint64_t)be32(p) << 32 | be32(p + 4));
}

struct header {
    uint32_t isutcnt, isstdcnt, leapcnt, timecnt, typecnt, charcnt;
};

/* The header at p (44 bytes available) and the size of the data block after it, with times of tsize bytes. */
static const char *read_header(const uint8_t *p, struct header *h, size_t tsize, size_t *block)
{
    if (memcmp(p, "TZif", 4) != 0)
        return "not a TZif file (no magic)";
    h->isutcnt = be32(p + 20);
    h->isstdcnt = be32(p + 24);
    h->leapcnt = be32(p + 28);
    h->timecnt = be32(p + 32);
    h->typecnt = be32(p + 36);
    h->charcnt = be32(p + 40);
    if (h->typecnt == 0 || h->typecnt > 256 || h->charcnt == 0)
        return "no local time types";
    if ((h->isutcnt != 0 && h->isutcnt != h->typecnt) || (h->isstdcnt != 0 && h->isstdcnt != h->typecnt))
        return "bad indicator counts";
    if (h->timecnt > AD_TZ_MAX_FILE || h->charcnt > AD_TZ_MAX_FILE || h->leapcnt > AD_TZ_MAX_FILE)
        return "counts larger than the file";
    *block = (size_t)h->timecnt * (tsize + 1) + (size_t)h->typecnt * 6 + h->charcnt + (size_t)h->leapcnt * (tsize + 4) +
             h->isstdcnt + h->isutcnt;
    return NULL;
}

static void tz_destroy(struct ad_tz *tz)
{
    free(tz->at);
    free(tz->off);
    free(tz->key);
    free(tz);
}

static struct ad_tz *fail(struct ad_tz *tz, char *why, size_t whylen, const char *name, const char *reason)
{
    snprintf(why, whylen, "time zone '%s': %s", name, reason);
    if (tz != NULL)
        tz_destroy(tz);
    return NULL;
}

struct ad_tz *ad_tz_parse(const char *name, const uint8_t *data, size_t len, char *why, size_t whylen)
{
    struct header h;
    size_t block, tsize = 4;
    const char *err;
    if (len > AD_TZ_MAX_FILE)
        return fail(NULL, why, whylen, name, "file too large");
    if (len < 44)
        return fail(NULL, why, whylen, name, "file truncated (header)");
    if ((err = read_header(data, &h, 4, &block)) != NULL)
        return fail(NULL, why, whylen, name, err);
    uint8_t version = data[4];
    if (version != 0 && (version < '2' || version > '4'))
        return fail(NULL, why, whylen, name, "unknown TZif version");
    const uint8_t *p = data + 44, *end = data + len;
    if (version >= '2') { /* skip version 1's 32-bit data for the 64-bit data that follows */
        if ((size_t)(end - p) < block + 44)
            return fail(NULL, why, whylen, name, "file truncated (version 1 data)");
        p += block;
        tsize = 8;
        if ((err = read_header(p, &h, 8, &block)) != NULL)
            return fail(NULL, why, whylen, name, err);
        p += 44;
    }
    if ((size_t)(end - p) < block)
        return fail(NULL, why, whylen, name, "file truncated (data)");
    if (h.leapcnt != 0)
        return fail(NULL, why, whylen, name, "zones with leap seconds are not supported");

    struct ad_tz *tz = ad_calloc(1, sizeof(*tz));
    snprintf(tz->name, sizeof(tz->name), "%s", name);
    tz->refs = 1;
    tz->n = h.timecnt;
    tz->at = ad_malloc((h.timecnt + 1) * sizeof(*tz->at));
    tz->off = ad_malloc((h.timecnt + 1) * sizeof(*tz->off));
    const uint8_t *times = p, *idx = p + (size_t)h.timecnt * tsize, *types = idx + h.timecnt;
    for (uint32_t i = 0; i < h.typecnt; i++) {
        int32_t utoff = (int32_t)be32(types + 6 * i);
        if (utoff < -MAX_OFFSET || utoff > MAX_OFFSET)
            return fail(tz, why, whylen, name, "UTC offset out of range");
        if (types[6 * i + 4] > 1 || types[6 * i + 5] >= h.charcnt)
            return fail(tz, why, whylen, name, "bad local time type");
    }
    tz->off0 = (int32_t)be32(types);
    for (uint32_t i = 0; i < h.timecnt; i++) {
        tz->at[i] = tsize == 8 ? be64(times + 8 * i) : (int32_t)be32(times + 4 * i);
        if (i > 0 && tz->at[i] <= tz->at[i - 1])
            return fail(tz, why, whylen, name, "transitions out of order");
        if (idx[i] >= h.typecnt)
            return fail(tz, why, whylen, name, "transition to an unknown type");
        tz->off[i] = (int32_t)be32(types + 6 * idx[i]);
    }
    p += block;
    if (tsize == 8) { /* the footer: "\n" TZ string "\n" */
        char footer[MAX_FOOTER + 1];
        const uint8_t *nl = p < end && *p == '\n' ? memchr(p + 1, '\n', (size_t)(end - p - 1)) : NULL;
        if (nl == NULL)
            return fail(tz, why, whylen, name, "file truncated (footer)");
        size_t flen = (size_t)(nl - p - 1);
        if (flen > MAX_FOOTER || memchr(p + 1, '\0', flen) != NULL)
            return fail(tz, why, whylen, name, "bad footer");
        memcpy(footer, p + 1, flen);
        footer[flen] = '\0';
        if (flen > 0) {
            if (parse_posix(footer, &tz->rule) < 0 || tz->rule.std_off < -MAX_OFFSET || tz->rule.std_off > MAX_OFFSET ||
                tz->rule.dst_off < -MAX_OFFSET || tz->rule.dst_off > MAX_OFFSET)
                return fail(tz, why, whylen, name, "bad TZ string in the footer");
            tz->has_rule = 1;
        }
    }
    return tz;
}

/* Loading by name, through the cache. */

static int name_ok(const char *name)
{
    size_t len = strlen(name);
    if (len == 0 || len > AD_TZ_MAX_NAME || name[0] == '/' || strstr(name, "..") != NULL)
        return 0;
    for (size_t i = 0; i < len; i++) {
        char c = name[i];
        if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '+' ||
              c == '-' || c == '/'))
            return 0;
    }
    return 1;
}

static struct ad_tz *read_zone(const char *name, const char *path, char *why, size_t whylen)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return fail(NULL, why, whylen, name, errno == ENOENT ? "unknown (no such zone)" : strerror(errno));
    struct stat st;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return fail(NULL, why, whylen, name, "unknown (not a zone file)");
    }
    if (st.st_size > AD_TZ_MAX_FILE) {
        close(fd);
        return fail(NULL, why, whylen, name, "file too large");
    }
    uint8_t *buf = ad_malloc((size_t)st.st_size + 1);
    size_t got = 0;
    while (got < (size_t)st.st_size) {
        ssize_t r = read(fd, buf + got, (size_t)st.st_size - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    close(fd);
    struct ad_tz *tz = ad_tz_parse(name, buf, got, why, whylen);
    free(buf);
    return tz;
}

struct ad_tz *ad_tz_load(const char *name, char *why, size_t whylen)
{
    if (name == NULL || !name_ok(name)) {
        /* Not echoed: it may hold anything, a newline included. */
        snprintf(why, whylen,
                 "time zone: not a zone name (up to %d letters, digits, '_', '+', '-' and '/', "
                 "no '..', not starting with '/')",
                 AD_TZ_MAX_NAME);
        return NULL;
    }
    if (strcmp(name, "UTC") == 0) {
        struct ad_tz *tz = ad_calloc(1, sizeof(*tz));
        snprintf(tz->name, sizeof(tz->name), "UTC");
        tz->refs = 1;
        return tz;
    }
    pthread_mutex_lock(&cache_lock);
    const char *dir = dir_override != NULL ? dir_override : getenv("ACCEPTD_ZONEINFO");
    if (dir == NULL || dir[0] == '\0')
        dir = "/usr/share/zoneinfo";
    char *key = ad_asprintf("%s/%s", dir, name);
    for (struct ad_tz *c = cache; c != NULL; c = c->next) {
        if (strcmp(c->key, key) == 0) {
            c->refs++;
            pthread_mutex_unlock(&cache_lock);
            free(key);
            return c;
        }
    }
    pthread_mutex_unlock(&cache_lock);
    /* Read outside the lock; two threads loading the same new zone at once may both read it, and one is kept. */
    struct ad_tz *tz = read_zone(name, key, why, whylen);
    if (tz == NULL) {
        free(key);
        return NULL;
    }
    pthread_mutex_lock(&cache_lock);
    for (struct ad_tz *c = cache; c != NULL; c = c->next) {
        if (strcmp(c->key, key) == 0) {
            c->refs++;
            pthread_mutex_unlock(&cache_lock);
            free(key);
            tz_destroy(tz);
            return c;
        }
    }
    tz->key = key;
    tz->next = cache;
    cache = tz;
    pthread_mutex_unlock(&cache_lock);
    return tz;
}

void ad_tz_free(struct ad_tz *tz)
{
    if (tz == NULL)
        return;
    if (tz->key == NULL) { /* not cached: UTC or ad_tz_parse's */
        tz_destroy(tz);
        return;
    }
    pthread_mutex_lock(&cache_lock);
    if (--tz->refs > 0) {
        pthread_mutex_unlock(&cache_lock);
        return;
    }
    for (struct ad_tz **pp = &cache; *pp != NULL; pp = &(*pp)->next) {
        if (*pp == tz) {
            *pp = tz->next;
            break;
        }
    }
    pthread_mutex_unlock(&cache_lock);
    tz_destroy(tz);
}

const char *ad_tz_name(const struct ad_tz *tz)
{
    return tz->name;
}

void ad_tz_set_dir(const char *dir)
{
    pthread_mutex_lock(&cache_lock);
    free(dir_override);
    dir_override = dir != NULL ? ad_strdup(dir) : NULL;
    pthread_mutex_unlock(&cache_lock);
}
