/*
 * util.h - allocation policy, time, encodings and random ids shared by every layer.
 *
 * Out-of-memory policy: abort. Every allocation goes through ad_malloc/ad_calloc/ad_realloc/ad_strdup,
 * which never return NULL. Nothing here touches the network or the store.
 */
#ifndef AD_UTIL_H
#define AD_UTIL_H

#include "common/base64.h" /* the encodings: util.h's users have them with it */

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#if defined(__GNUC__)
#define AD_PRINTF(fmt, args) __attribute__((format(printf, fmt, args)))
#else
#define AD_PRINTF(fmt, args)
#endif

/* Allocate or abort. The caller frees with free(). */
void *ad_malloc(size_t n);
void *ad_calloc(size_t count, size_t n);
void *ad_realloc(void *p, size_t n);
char *ad_strdup(const char *s);
/* ad_strdup, or NULL for NULL. */
char *ad_strdup_opt(const char *s);
char *ad_strndup(const char *s, size_t n);
/* printf into a new string; the caller frees. */
char *ad_asprintf(const char *fmt, ...) AD_PRINTF(1, 2);

/* Wall clock in milliseconds since the Unix epoch. */
int64_t ad_now_ms(void);
/* Monotonic clock (CLOCK_MONOTONIC) in milliseconds, and in nanoseconds for timing work; use these rather than
 * clock_gettime, so every deadline and duration is read from the same clock. */
int64_t ad_mono_ms(void);
int64_t ad_mono_ns(void);

#define AD_RFC3339_LEN 24 /* 2026-11-30T18:11:40.123Z, for years 0000-9999 */
/* Format ms-since-epoch as RFC 3339 UTC with milliseconds ("2026-11-30T18:11:40.123Z") into buf (>= 32 bytes). */
void ad_time_rfc3339(int64_t ms, char *buf, size_t size);
/* Parse RFC 3339 (Z or +hh:mm offset, optional fraction). Returns 0 and sets *ms, or -1. */
int ad_time_parse_rfc3339(const char *s, int64_t *ms);
/* Format ms-since-epoch as an IMF-fixdate for HTTP headers ("Mon, 30 Nov 2026 18:11:40 GMT") into buf (>= 32). */
void ad_time_http(int64_t ms, char *buf, size_t size);

/* Lowercase hex into out (>= 2n + 1). */
void ad_hex_encode(const uint8_t *in, size_t n, char *out);

/* Write v in decimal into out (at least AD_INT_CHARS + 1 bytes), NUL-terminated; returns its length. */
#define AD_INT_CHARS 20
size_t ad_format_int(int64_t v, char *out);

/* SHA-256 of data into out. One fetched digest for the process and one context per thread, kept: OpenSSL's
 * one-shot SHA256() fetches the algorithm and makes a context on every call, which cost more than hashing a
 * job. Aborts if OpenSSL cannot hash. */
#define AD_SHA256_LEN 32
void ad_sha256(const void *data, size_t len, uint8_t out[AD_SHA256_LEN]);
/* SHA-256 of data that comes in pieces (a file streamed up or down): ad_sha256_begin, any number of
 * ad_sha256_update, then ad_sha256_end, which writes the digest and frees h, or ad_sha256_abandon (NULL is
 * ignored), which frees h without one. Each aborts if OpenSSL cannot hash. */
struct ad_sha256_stream;
struct ad_sha256_stream *ad_sha256_begin(void);
void ad_sha256_update(struct ad_sha256_stream *h, const void *data, size_t len);
void ad_sha256_end(struct ad_sha256_stream *h, uint8_t out[AD_SHA256_LEN]);
void ad_sha256_abandon(struct ad_sha256_stream *h);

/* Fill buf with n bytes from the CSPRNG; aborts if the CSPRNG fails. */
void ad_random_bytes(uint8_t *buf, size_t n);

/* mkdir -p with mode 0700 for the directories it creates. 0, or -1 with errno set. */
int ad_mkdir_p(const char *dir);
/* Take <dir>/acceptd.lock (flock, exclusive, not waiting): one daemon per data directory. The lock goes away
 * with the process however it ends, or with close() of the returned fd. -1 with errno set when held or on
 * error. */
int ad_lock_dir(const char *dir);
/* An id is prefix + AD_ID_CHARS characters: the creation time in milliseconds, written by ad_id_time, then
 * AD_ID_RANDOM_BYTES (120 bits) from the CSPRNG in base64url. */
#define AD_ID_TIME_CHARS 8
#define AD_ID_RANDOM_BYTES 15
#define AD_ID_CHARS (AD_ID_TIME_CHARS + AD_ID_RANDOM_BYTES * 4 / 3)
/* 48 bits of ms in the base64url characters taken in ASCII order: the strings compare as the times do. */
void ad_id_time(int64_t ms, char out[AD_ID_TIME_CHARS]);
/* A new id (see above). The caller frees. */
char *ad_new_id(const char *prefix);

/* Parse a duration: bare seconds ("30") or a number with a unit ms|s|m|h|d ("500ms", "30d").
 * Returns 0 and sets *ms, or -1 on a malformed value. */
int ad_parse_duration_ms(const char *s, int64_t *ms);

/* Strict decimal integer parse of the whole string within [min, max]. Returns 0 or -1. */
int ad_parse_int(const char *s, size_t len, long long min, long long max, long long *out);

/* Constant-time comparison of two byte strings; lengths are compared too. Returns 1 when equal. */
int ad_ct_equal(const void *a, size_t alen, const void *b, size_t blen);

/* Log a line to stderr with a timestamp and level. Never pass secrets. */
void ad_log(const char *level, const char *fmt, ...) AD_PRINTF(2, 3);
/* A named value of a structured log line: str, or num when str is NULL. */
struct ad_log_field {
    const char *key;
    const char *str;
    int64_t num;
};
/* A line of msg and fields: "key=value" after the message in text, members of the object in JSON. */
void ad_log_fields(const char *level, const char *msg, const struct ad_log_field *f, size_t n);
/* log.format: 1 writes every line as one JSON object ({"time","level","msg", fields...}), 0 as text. Set once
 * at start, before other threads run. */
void ad_log_set_json(int on);
#define ad_info(...) ad_log("info", __VA_ARGS__)
#define ad_warn(...) ad_log("warn", __VA_ARGS__)
#define ad_error(...) ad_log("error", __VA_ARGS__)

/* A growable byte buffer with a hard cap. Appends past the cap fail and set `toobig`. */
struct ad_buf {
    char *data;
    size_t len;
    size_t cap;
    size_t max;
    int toobig;
};
void ad_buf_init(struct ad_buf *b, size_t max);
/* Returns 0, or -1 when the cap would be exceeded (then b->toobig is set and nothing is appended). Inline when
 * the text fits the room already there: a job's rendering is some forty appends, most of a literal, whose copy
 * the compiler then makes in a few moves. */
int ad_buf_append_grow(struct ad_buf *b, const void *p, size_t n);
static inline int ad_buf_append(struct ad_buf *b, const void *p, size_t n)
{
    if (b->cap - b->len <= n) /* the room must also hold the NUL; cap 0 (nothing yet) always grows */
        return ad_buf_append_grow(b, p, n);
    memcpy(b->data + b->len, p, n);
    b->len += n;
    b->data[b->len] = '\0';
    return 0;
}
int ad_buf_printf(struct ad_buf *b, const char *fmt, ...) AD_PRINTF(2, 3);
/* Appending without printf, for what is rendered on every change (format parsing costs more than the text):
 * a string literal, a NUL-terminated string, a number in decimal. Same results as ad_buf_append. */
#define AD_BUF_LIT(b, lit) ad_buf_append((b), (lit), sizeof(lit) - 1)
int ad_buf_str(struct ad_buf *b, const char *s);
int ad_buf_int(struct ad_buf *b, int64_t v);
void ad_buf_free(struct ad_buf *b);

/*
 * The one-line message for what getopt_long (optstring starting with ':', opterr 0) refused: c is what it
 * returned ('?' or ':'), argc and argv what it was given. Written into err, e.g. "unknown option --bogus" or
 * "--type needs a value".
 */
void ad_getopt_error(int c, int argc, char **argv, char *err, size_t errlen);

#endif
