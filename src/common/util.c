/*
 * util.c - allocation, clocks, time formats, encodings, random ids, strict number parsing, logging and the
 * capped byte buffer.
 *
 * Every parser here is strict on purpose: its input comes from HTTP headers, query strings and the config
 * file, and a lenient parse ("12abc" read as 12) turns a typo into a silently different behaviour.
 * Nothing here knows about jobs, HTTP or the store.
 */
#include "common/util.h"
#include "common/json.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <getopt.h>
#include <pthread.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

static void oom(size_t n)
{
    /* No allocation and no stdio here: the heap is what just failed. */
    static const char msg[] = "acceptd: out of memory\n";
    ssize_t w = write(STDERR_FILENO, msg, sizeof msg - 1);
    (void)w;
    (void)n;
    abort();
}

void *ad_malloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (p == NULL)
        oom(n);
    return p;
}

void *ad_calloc(size_t count, size_t n)
{
    void *p = calloc(count ? count : 1, n ? n : 1);
    if (p == NULL)
        oom(count * n);
    return p;
}

void *ad_realloc(void *p, size_t n)
{
    void *q = realloc(p, n ? n : 1);
    if (q == NULL)
        oom(n);
    return q;
}

char *ad_strdup(const char *s)
{
    return ad_strndup(s, strlen(s));
}

char *ad_strdup_opt(const char *s)
{
    return s != NULL ? ad_strdup(s) : NULL;
}

char *ad_strndup(const char *s, size_t n)
{
    const char *end = memchr(s, '\0', n);
    size_t len = end ? (size_t)(end - s) : n;
    char *p = ad_malloc(len + 1);
    memcpy(p, s, len);
    p[len] = '\0';
    return p;
}

static char *vasprintf_or_abort(const char *fmt, va_list ap) AD_PRINTF(1, 0);

static char *vasprintf_or_abort(const char *fmt, va_list ap)
{
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap2);
    va_end(ap2);
    if (n < 0)
        abort(); /* only an invalid format gets here: a programming error */
    char *p = ad_malloc((size_t)n + 1);
    vsnprintf(p, (size_t)n + 1, fmt, ap);
    return p;
}

char *ad_asprintf(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *p = vasprintf_or_abort(fmt, ap);
    va_end(ap);
    return p;
}

static int64_t clock_ms(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t ad_now_ms(void)
{
    return clock_ms(CLOCK_REALTIME);
}

int64_t ad_mono_ms(void)
{
    return clock_ms(CLOCK_MONOTONIC);
}

int64_t ad_mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* The UTC calendar fields of ms. Not gmtime_r: glibc's takes the time zone lock on every call, and every
 * job rendered calls this six times. The date is Howard Hinnant's days-to-civil algorithm
 * (https://howardhinnant.github.io/date_algorithms.html#civil_from_days), exact for any int64 ms. */
struct utc {
    int64_t year;
    int mon, mday, wday, hour, min, sec, ms; /* mon 1-12, wday 0 = Sunday */
};

static struct utc utc_of(int64_t ms)
{
    struct utc u;
    int64_t day = ms / 86400000, in_day = ms % 86400000;
    if (in_day < 0) {
        in_day += 86400000;
        day--;
    }
    u.ms = (int)(in_day % 1000);
    u.sec = (int)(in_day / 1000 % 60);
    u.min = (int)(in_day / 60000 % 60);
    u.hour = (int)(in_day / 3600000);
    u.wday = (int)((day % 7 + 11) % 7); /* 1970-01-01 was a Thursday */
    int64_t z = day + 719468, era = (z >= 0 ? z : z - 146096) / 146097;
    int64_t doe = z - era * 146097;                                      /* [0, 146096] */
    int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365; /* [0, 399] */
    int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);               /* [0, 365], from March 1 */
    int64_t mp = (5 * doy + 2) / 153;                                    /* [0, 11], March = 0 */
    u.mday = (int)(doy - (153 * mp + 2) / 5 + 1);
    u.mon = (int)(mp < 10 ? mp + 3 : mp - 9);
    u.year = yoe + era * 400 + (u.mon <= 2);
    return u;
}

/* Write v as exactly n digits at p (v >= 0); returns p + n. */
static char *digits(char *p, int64_t v, int n)
{
    for (int i = n - 1; i >= 0; i--, v /= 10)
        p[i] = (char)('0' + v % 10);
    return p + n;
}

void ad_time_rfc3339(int64_t ms, char *buf, size_t size)
{
    /* The date of the last day formatted, per thread: most times written together (a job's, a page's) are of
     * one day, and the calendar arithmetic is most of the cost. */
    static __thread int64_t last_day = INT64_MIN;
    static __thread char last_date[11];
    int64_t day = ms / 86400000, in_day = ms % 86400000;
    if (in_day < 0) {
        in_day += 86400000;
        day--;
    }
    if (day != last_day) {
        struct utc u = utc_of(ms);
        if (u.year < 0 || u.year > 9999) {
            snprintf(buf, size, "%04lld-%02d-%02dT%02d:%02d:%02d.%03dZ", (long long)u.year, u.mon, u.mday, u.hour,
                     u.min, u.sec, u.ms);
            return;
        }
        char *p = digits(last_date, u.year, 4);
        *p++ = '-';
        p = digits(p, u.mon, 2);
        *p++ = '-';
        digits(p, u.mday, 2);
        last_day = day;
    }
    char t[AD_RFC3339_LEN + 1], *p = t;
    memcpy(p, last_date, 10);
    p += 10;
    *p++ = 'T';
    p = digits(p, in_day / 3600000, 2);
    *p++ = ':';
    p = digits(p, in_day / 60000 % 60, 2);
    *p++ = ':';
    p = digits(p, in_day / 1000 % 60, 2);
    *p++ = '.';
    p = digits(p, in_day % 1000, 3);
    *p++ = 'Z';
    /* Copied as snprintf("%s") would (cut to size), without its cost: every render writes six of these. */
    if (size > 0) {
        size_t n = (size_t)(p - t) < size ? (size_t)(p - t) : size - 1;
        memcpy(buf, t, n);
        buf[n] = '\0';
    }
}

/* Exactly n digits at s, as a number; -1 when any is not a digit. */
static int fixed_digits(const char *s, int n)
{
    int v = 0;
    for (int i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        v = v * 10 + (s[i] - '0');
    }
    return v;
}

static int days_in_month(int year, int month)
{
    static const int days[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    int leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
    return month == 2 && leap ? 29 : days[month - 1];
}

int ad_time_parse_rfc3339(const char *s, int64_t *ms)
{
    /* date-time = YYYY-MM-DD "T" hh:mm:ss [ "." 1*DIGIT ] ( "Z" / ( "+" / "-" ) hh:mm ) */
    if (s == NULL || strlen(s) < 20)
        return -1;
    int year = fixed_digits(s, 4), mon = fixed_digits(s + 5, 2), day = fixed_digits(s + 8, 2);
    int hour = fixed_digits(s + 11, 2), min = fixed_digits(s + 14, 2), sec = fixed_digits(s + 17, 2);
    if (s[4] != '-' || s[7] != '-' || (s[10] != 'T' && s[10] != 't') || s[13] != ':' || s[16] != ':')
        return -1;
    if (year < 0 || mon < 1 || mon > 12 || day < 1 || day > days_in_month(year, mon) || hour < 0 || hour > 23 ||
        min < 0 || min > 59 || sec < 0 || sec > 60) /* 60: a leap second, folded into the next minute */
        return -1;

    const char *p = s + 19;
    int frac_ms = 0;
    if (*p == '.') {
        int digits = 0;
        for (p++; *p >= '0' && *p <= '9'; p++, digits++) {
            if (digits < 3)
                frac_ms = frac_ms * 10 + (*p - '0'); /* finer than a millisecond is truncated */
        }
        if (digits == 0)
            return -1;
        for (; digits < 3; digits++)
            frac_ms *= 10;
    }

    int offset_min = 0;
    if (*p == 'Z' || *p == 'z') {
        p++;
    } else if (*p == '+' || *p == '-') {
        int oh = fixed_digits(p + 1, 2);
        if (oh < 0 || p[3] != ':')
            return -1;
        int om = fixed_digits(p + 4, 2);
        if (om < 0 || oh > 23 || om > 59)
            return -1;
        offset_min = (oh * 60 + om) * (*p == '-' ? -1 : 1);
        p += 6;
    } else {
        return -1;
    }
    if (*p != '\0')
        return -1;

    struct tm tm = {
        .tm_year = year - 1900, .tm_mon = mon - 1, .tm_mday = day, .tm_hour = hour, .tm_min = min, .tm_sec = sec};
    time_t t = timegm(&tm);
    *ms = (int64_t)t * 1000 + frac_ms - (int64_t)offset_min * 60000;
    return 0;
}

void ad_time_http(int64_t ms, char *buf, size_t size)
{
    /* Fixed English names: strftime's %a/%b follow the locale, and HTTP dates must not. */
    static const char wday[7][4] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
    static const char month[12][4] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                      "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
    struct utc u = utc_of(ms);
    snprintf(buf, size, "%s, %02d %s %04lld %02d:%02d:%02d GMT", wday[u.wday], u.mday, month[u.mon - 1],
             (long long)u.year, u.hour, u.min, u.sec);
}

void ad_hex_encode(const uint8_t *in, size_t n, char *out)
{
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = digits[in[i] >> 4];
        out[2 * i + 1] = digits[in[i] & 15];
    }
    out[2 * n] = '\0';
}

static void random_fill(uint8_t *buf, size_t n)
{
    while (n > 0) {
        int chunk = n > INT_MAX ? INT_MAX : (int)n;
        if (RAND_bytes(buf, chunk) != 1) {
            /* Ids and lease tokens are capabilities; guessable ones are worse than no service. */
            static const char msg[] = "acceptd: CSPRNG failure, aborting\n";
            ssize_t w = write(STDERR_FILENO, msg, sizeof msg - 1);
            (void)w;
            abort();
        }
        buf += chunk;
        n -= (size_t)chunk;
    }
}

/* RAND_bytes costs about 2.6 us a call on the CI machine (a getpid() for fork detection among it), more than
 * the rest of making an id. So each thread draws AD_RANDOM_POOL bytes at a time and hands them out; what it
 * hands out is wiped from the pool. A forked child starts with an empty pool, so that it never repeats the
 * bytes its parent has yet to hand out. Requests larger than a quarter of the pool (keys) are drawn whole. */
#define AD_RANDOM_POOL 4096
static __thread uint8_t random_pool[AD_RANDOM_POOL];
static __thread size_t random_left;
static pthread_once_t random_once = PTHREAD_ONCE_INIT;

static void random_forget(void)
{
    OPENSSL_cleanse(random_pool, sizeof random_pool);
    random_left = 0;
}

static void random_register(void)
{
    pthread_atfork(NULL, NULL, random_forget);
}

static EVP_MD *sha256_md;
static pthread_key_t sha256_ctx_key;
static pthread_once_t sha256_once = PTHREAD_ONCE_INIT;

static void sha256_ctx_free(void *ctx)
{
    EVP_MD_CTX_free(ctx);
}

static void sha256_init(void)
{
    sha256_md = EVP_MD_fetch(NULL, "SHA256", NULL);
    if (sha256_md == NULL || pthread_key_create(&sha256_ctx_key, sha256_ctx_free) != 0)
        abort();
}

void ad_sha256(const void *data, size_t len, uint8_t out[AD_SHA256_LEN])
{
    pthread_once(&sha256_once, sha256_init);
    EVP_MD_CTX *ctx = pthread_getspecific(sha256_ctx_key);
    if (ctx == NULL) {
        ctx = EVP_MD_CTX_new();
        if (ctx == NULL || pthread_setspecific(sha256_ctx_key, ctx) != 0)
            abort();
    }
    unsigned int n = 0;
    if (!EVP_DigestInit_ex2(ctx, sha256_md, NULL) || !EVP_DigestUpdate(ctx, data, len) ||
        !EVP_DigestFinal_ex(ctx, out, &n) || n != AD_SHA256_LEN)
        abort();
}

struct ad_sha256_stream {
    EVP_MD_CTX *ctx;
};

struct ad_sha256_stream *ad_sha256_begin(void)
{
    pthread_once(&sha256_once, sha256_init);
    struct ad_sha256_stream *h = ad_malloc(sizeof(*h));
    h->ctx = EVP_MD_CTX_new();
    if (h->ctx == NULL || !EVP_DigestInit_ex2(h->ctx, sha256_md, NULL))
        abort();
    return h;
}

void ad_sha256_update(struct ad_sha256_stream *h, const void *data, size_t len)
{
    if (!EVP_DigestUpdate(h->ctx, data, len))
        abort();
}

void ad_sha256_end(struct ad_sha256_stream *h, uint8_t out[AD_SHA256_LEN])
{
    unsigned int n = 0;
    if (!EVP_DigestFinal_ex(h->ctx, out, &n) || n != AD_SHA256_LEN)
        abort();
    ad_sha256_abandon(h);
}

void ad_sha256_abandon(struct ad_sha256_stream *h)
{
    if (h == NULL)
        return;
    EVP_MD_CTX_free(h->ctx);
    free(h);
}

size_t ad_format_int(int64_t v, char *out)
{
    char t[AD_INT_CHARS];
    uint64_t u = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
    size_t n = 0;
    do {
        t[n++] = (char)('0' + u % 10);
        u /= 10;
    } while (u != 0);
    size_t len = 0;
    if (v < 0)
        out[len++] = '-';
    while (n > 0)
        out[len++] = t[--n];
    out[len] = '\0';
    return len;
}

void ad_random_bytes(uint8_t *buf, size_t n)
{
    if (n == 0)
        return;
    if (n > AD_RANDOM_POOL / 4) {
        random_fill(buf, n);
        return;
    }
    pthread_once(&random_once, random_register);
    if (random_left < n) {
        random_fill(random_pool, AD_RANDOM_POOL);
        random_left = AD_RANDOM_POOL;
    }
    uint8_t *p = random_pool + AD_RANDOM_POOL - random_left;
    memcpy(buf, p, n);
    OPENSSL_cleanse(p, n);
    random_left -= n;
}

void ad_id_time(int64_t ms, char out[AD_ID_TIME_CHARS])
{
    static const char sorted[] = "-0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ_abcdefghijklmnopqrstuvwxyz";
    uint64_t t = (uint64_t)ms;
    for (int i = AD_ID_TIME_CHARS - 1; i >= 0; i--, t >>= 6)
        out[i] = sorted[t & 63];
}

/* Creation time first, so ids sort by creation: new rows land on the rightmost pages of every index keyed
 * by id instead of on a random page each, which cut the pages a batch of submits writes by 60%. The random
 * part alone makes an id unguessable. */
char *ad_new_id(const char *prefix)
{
    uint8_t raw[AD_ID_RANDOM_BYTES];
    ad_random_bytes(raw, sizeof raw);
    size_t plen = strlen(prefix);
    char *id = ad_malloc(plen + AD_ID_CHARS + 1);
    memcpy(id, prefix, plen);
    ad_id_time(ad_now_ms(), id + plen);
    ad_b64url_encode(raw, sizeof raw, id + plen + AD_ID_TIME_CHARS);
    return id;
}

int ad_parse_duration_ms(const char *s, int64_t *ms)
{
    static const struct {
        const char *suffix;
        int64_t ms;
    } units[] = {
        {"", 1000}, /* a bare number is seconds */
        {"ms", 1},  {"s", 1000}, {"m", 60 * 1000}, {"h", 3600 * 1000}, {"d", 86400 * 1000},
    };
    if (s == NULL)
        return -1;
    const char *p = s;
    int64_t n = 0;
    for (; *p >= '0' && *p <= '9'; p++) {
        int d = *p - '0';
        if (n > (INT64_MAX - d) / 10)
            return -1;
        n = n * 10 + d;
    }
    if (p == s)
        return -1;
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
        if (strcmp(p, units[i].suffix) == 0) {
            if (n > INT64_MAX / units[i].ms)
                return -1;
            *ms = n * units[i].ms;
            return 0;
        }
    }
    return -1;
}

int ad_parse_int(const char *s, size_t len, long long min, long long max, long long *out)
{
    if (s == NULL || len == 0)
        return -1;
    size_t i = 0;
    int neg = s[0] == '-';
    if (neg)
        i++;
    if (i == len)
        return -1;
    /* Accumulate the magnitude unsigned so LLONG_MIN, whose magnitude exceeds LLONG_MAX, still parses. */
    unsigned long long limit = neg ? (unsigned long long)LLONG_MAX + 1 : (unsigned long long)LLONG_MAX;
    unsigned long long v = 0;
    for (; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        unsigned d = (unsigned)(s[i] - '0');
        if (v > (limit - d) / 10)
            return -1;
        v = v * 10 + d;
    }
    long long r;
    if (neg)
        r = v == (unsigned long long)LLONG_MAX + 1 ? LLONG_MIN : -(long long)v;
    else
        r = (long long)v;
    if (r < min || r > max)
        return -1;
    *out = r;
    return 0;
}

int ad_ct_equal(const void *a, size_t alen, const void *b, size_t blen)
{
    /* A length mismatch returns early: it reveals the length, never the contents. */
    if (alen != blen)
        return 0;
    if (alen == 0)
        return 1;
    return CRYPTO_memcmp(a, b, alen) == 0;
}

static int log_json;

void ad_log_set_json(int on)
{
    log_json = on;
}

/* A single write keeps concurrent lines whole. */
static void log_write(const char *line, size_t n)
{
    ssize_t w;
    do {
        w = write(STDERR_FILENO, line, n);
    } while (w < 0 && errno == EINTR);
}

/* One entry is one line: a control character from a client-supplied value must not forge a second entry. */
static void log_flatten(char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
            s[i] = ' ';
}

/* A text value as is when it is one plain word, else quoted as a JSON string is, so that fields stay apart. */
static void log_text_value(struct ad_buf *b, const char *v)
{
    int plain = *v != '\0';
    for (const char *p = v; *p != '\0' && plain; p++)
        plain = (unsigned char)*p > 0x20 && *p != '"' && *p != 0x7f;
    if (plain)
        ad_buf_str(b, v);
    else
        ad_json_str(b, v);
}

#define AD_LOG_MAX 4096

void ad_log_fields(const char *level, const char *msg, const struct ad_log_field *f, size_t n)
{
    char time[32];
    ad_time_rfc3339(ad_now_ms(), time, sizeof time);
    struct ad_buf b;
    ad_buf_init(&b, AD_LOG_MAX);
    if (log_json) {
        AD_JSON_OPEN(&b, "time");
        ad_json_str(&b, time);
        AD_JSON_KEY(&b, "level");
        ad_json_str(&b, level);
        AD_JSON_KEY(&b, "msg");
        ad_json_str(&b, msg);
        for (size_t i = 0; i < n; i++) {
            AD_BUF_LIT(&b, ",");
            ad_json_str(&b, f[i].key);
            AD_BUF_LIT(&b, ":");
            if (f[i].str != NULL)
                ad_json_str(&b, f[i].str);
            else
                ad_json_int(&b, f[i].num);
        }
        AD_BUF_LIT(&b, "}");
    } else {
        ad_buf_str(&b, time);
        AD_BUF_LIT(&b, " ");
        ad_buf_str(&b, level);
        AD_BUF_LIT(&b, " ");
        size_t start = b.len;
        ad_buf_str(&b, msg);
        for (size_t i = 0; i < n; i++) {
            AD_BUF_LIT(&b, " ");
            ad_buf_str(&b, f[i].key);
            AD_BUF_LIT(&b, "=");
            if (f[i].str != NULL)
                log_text_value(&b, f[i].str);
            else
                ad_buf_int(&b, f[i].num);
        }
        if (b.data != NULL)
            log_flatten(b.data + start, b.len - start);
    }
    if (b.toobig) { /* a line past the cap is cut, never dropped: what fitted of the message says what happened */
        ad_buf_free(&b);
        char cut[512];
        snprintf(cut, sizeof cut, "%.400s", msg);
        ad_log_fields(level, cut, NULL, 0);
        return;
    }
    AD_BUF_LIT(&b, "\n");
    log_write(b.data, b.len);
    ad_buf_free(&b);
}

void ad_log(const char *level, const char *fmt, ...)
{
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    ad_log_fields(level, msg, NULL, 0);
}

void ad_buf_init(struct ad_buf *b, size_t max)
{
    b->data = NULL;
    b->len = 0;
    b->cap = 0;
    b->max = max;
    b->toobig = 0;
}

/* Make room for n more bytes plus a terminating NUL, or refuse when the cap would be exceeded. */
static int buf_reserve(struct ad_buf *b, size_t n)
{
    if (n > b->max - b->len) {
        b->toobig = 1;
        return -1;
    }
    size_t need = b->len + n + 1;
    if (need <= b->cap)
        return 0;
    size_t limit = b->max < SIZE_MAX ? b->max + 1 : SIZE_MAX;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < need)
        cap = cap > SIZE_MAX / 2 ? SIZE_MAX : cap * 2;
    if (cap > limit)
        cap = limit;
    b->data = ad_realloc(b->data, cap);
    b->cap = cap;
    return 0;
}

int ad_buf_append_grow(struct ad_buf *b, const void *p, size_t n)
{
    if (buf_reserve(b, n) < 0)
        return -1;
    if (n > 0)
        memcpy(b->data + b->len, p, n);
    b->len += n;
    b->data[b->len] = '\0';
    return 0;
}

int ad_buf_str(struct ad_buf *b, const char *s)
{
    return ad_buf_append(b, s, strlen(s));
}

int ad_buf_int(struct ad_buf *b, int64_t v)
{
    char t[AD_INT_CHARS + 1];
    return ad_buf_append(b, t, ad_format_int(v, t));
}

int ad_buf_printf(struct ad_buf *b, const char *fmt, ...)
{
    /* Format once into the room there is; only text that does not fit is formatted a second time. */
    size_t room = b->cap - b->len; /* 0 before the first byte: cap and len are both 0 */
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(room > 0 ? b->data + b->len : NULL, room, fmt, ap);
    va_end(ap);
    if (n >= 0 && (size_t)n < room) {
        b->len += (size_t)n;
        return 0;
    }
    if (room > 0)
        b->data[b->len] = '\0'; /* the cut-off attempt wrote over the terminator */
    if (n < 0 || buf_reserve(b, (size_t)n) < 0)
        return -1;
    va_start(ap, fmt);
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
    return 0;
}

void ad_buf_free(struct ad_buf *b)
{
    free(b->data);
    ad_buf_init(b, b->max);
}

int ad_mkdir_p(const char *dir)
{
    char *p = ad_strdup(dir);
    int rc = 0;
    for (char *s = p + 1; rc == 0; s++) {
        if (*s != '/' && *s != '\0')
            continue;
        char saved = *s;
        *s = '\0';
        if (mkdir(p, 0700) != 0 && errno != EEXIST)
            rc = -1;
        *s = saved;
        if (saved == '\0')
            break;
    }
    free(p);
    struct stat sb;
    if (rc == 0 && stat(dir, &sb) != 0)
        rc = -1;
    if (rc == 0 && !S_ISDIR(sb.st_mode)) {
        errno = ENOTDIR;
        rc = -1;
    }
    return rc;
}

int ad_lock_dir(const char *dir)
{
    char *path = ad_asprintf("%s/acceptd.lock", dir);
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    free(path);
    if (fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) != 0) {
        int saved = errno;
        close(fd);
        errno = saved;
        fd = -1;
    }
    return fd;
}

void ad_getopt_error(int c, int argc, char **argv, char *err, size_t errlen)
{
    /* getopt_long has moved optind past what it refused, value included when it took one. */
    const char *a = optind >= 1 && optind - 1 < argc ? argv[optind - 1] : "";
    if (c == ':')
        snprintf(err, errlen, "%.200s needs a value", a);
    else if (optopt != 0 && strncmp(a, "--", 2) == 0)
        snprintf(err, errlen, "%.200s takes no value", a);
    else if (optopt != 0)
        snprintf(err, errlen, "unknown option -%c", optopt);
    else
        snprintf(err, errlen, "unknown option %.200s", a);
}
