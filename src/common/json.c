/*
 * json.c - the one JSON writer (json.h): strings escaped to UTF-8, times, stored JSON spliced in.
 *
 * Strings are the hot part: every id, type and message of every job rendered goes through ad_json_str, so the
 * loop over plain ASCII is a table lookup per byte and a string that is all plain is appended whole. Nothing
 * here allocates beyond the buffer, and nothing parses JSON.
 */
#include "common/json.h"

#include <string.h>

/* 1 for the bytes a JSON string holds as they are: printable ASCII but '"' and '\\'. A table: the loop over
 * them is the renderer's hottest (every id, type and message). */
static const unsigned char json_plain_tab[256] = {
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, /* 0x00 */
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, /* 0x10 */
    1, 1, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, /* 0x20 */
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, /* 0x30 */
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, /* 0x40 */
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 1, 1, 1, /* 0x50 */
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, /* 0x60 */
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, /* 0x70 */
    /* 0x80-0xff: 0, each sequence is checked as UTF-8 */
};

static int json_plain(unsigned char c)
{
    return json_plain_tab[c];
}

/*
 * The length of the UTF-8 sequence at p (not ASCII) and whether it is well formed (Unicode 15, table 3-7:
 * no overlong forms, no surrogates, nothing past U+10FFFF). When it is not, the length is that of its
 * maximal subpart, which one U+FFFD replaces (Unicode 15 §3.9, the practice WHATWG's decoder follows), so
 * a reader decoding the same bytes leniently sees the same text. The NUL ending s fails every continuation
 * test, so nothing past it is read.
 */
static size_t utf8_seq(const unsigned char *p, int *ok)
{
    unsigned lo = 0x80, hi = 0xbf;
    size_t n;
    *ok = 0;
    if (p[0] >= 0xc2 && p[0] <= 0xdf) {
        n = 2;
    } else if (p[0] >= 0xe0 && p[0] <= 0xef) {
        n = 3;
        lo = p[0] == 0xe0 ? 0xa0 : lo;
        hi = p[0] == 0xed ? 0x9f : hi;
    } else if (p[0] >= 0xf0 && p[0] <= 0xf4) {
        n = 4;
        lo = p[0] == 0xf0 ? 0x90 : lo;
        hi = p[0] == 0xf4 ? 0x8f : hi;
    } else {
        return 1;
    }
    if (p[1] < lo || p[1] > hi)
        return 1;
    for (size_t i = 2; i < n; i++)
        if ((p[i] & 0xc0) != 0x80)
            return i;
    *ok = 1;
    return n;
}

/* ad_json_chars from p, the first byte that needs a look, on: escapes, U+FFFD for what is not UTF-8. Kept out
 * of ad_json_str so that its loop over plain ASCII, every id and type, stays tight. */
static int json_str_rest(struct ad_buf *b, const char *s, const unsigned char *p)
{
    static const char hex[] = "0123456789abcdef";
    const char *run = s; /* the bytes not yet appended, which need no change */
    while (*p != '\0') {
        char esc[6];
        size_t elen, skip = 1;
        if (json_plain(*p)) {
            p++;
            continue;
        }
        if (*p >= 0x80) {
            /* Valid UTF-8 is kept as it is; what is not becomes U+FFFD (RFC 8259 §8.1: JSON is UTF-8). */
            int ok;
            skip = utf8_seq(p, &ok);
            if (ok) {
                p += skip;
                continue;
            }
            memcpy(esc, "\xef\xbf\xbd", elen = 3);
        } else if (*p == '"' || *p == '\\') {
            esc[0] = '\\';
            esc[1] = (char)*p;
            elen = 2;
        } else if (*p == '\n' || *p == '\r' || *p == '\t') {
            esc[0] = '\\';
            esc[1] = *p == '\n' ? 'n' : *p == '\r' ? 'r' : 't';
            elen = 2;
        } else {
            memcpy(esc, "\\u00", 4);
            esc[4] = hex[*p >> 4];
            esc[5] = hex[*p & 15];
            elen = 6;
        }
        if (ad_buf_append(b, run, (size_t)((const char *)p - run)) != 0 || ad_buf_append(b, esc, elen) != 0)
            return -1;
        p += skip;
        run = (const char *)p;
    }
    return ad_buf_append(b, run, (size_t)((const char *)p - run));
}

int ad_json_str(struct ad_buf *b, const char *s)
{
    if (s == NULL)
        return AD_BUF_LIT(b, "null");
    /* Most strings (ids, types, URLs, lease ids) are printable ASCII: then they are appended whole. */
    const unsigned char *p = (const unsigned char *)s;
    while (json_plain(*p))
        p++;
    if (AD_BUF_LIT(b, "\"") != 0)
        return -1;
    if (*p == '\0' ? ad_buf_append(b, s, (size_t)((const char *)p - s)) != 0 : json_str_rest(b, s, p) != 0)
        return -1;
    return AD_BUF_LIT(b, "\"");
}

int ad_json_chars(struct ad_buf *b, const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    while (json_plain(*p))
        p++;
    return *p == '\0' ? ad_buf_append(b, s, (size_t)((const char *)p - s)) : json_str_rest(b, s, p);
}

size_t ad_json_plain_len(const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    while (json_plain(*p))
        p++;
    return (size_t)((const char *)p - s);
}

/* Appended in pieces instead of printed: a job is rendered with six times on every change. */
int ad_json_time(struct ad_buf *b, int64_t ms)
{
    if (ms == 0)
        return AD_BUF_LIT(b, "null");
    char t[40];
    t[0] = '"';
    ad_time_rfc3339(ms, t + 1, sizeof(t) - 2);
    size_t n = strlen(t);
    t[n] = '"';
    return ad_buf_append(b, t, n + 1);
}

int ad_json_raw(struct ad_buf *b, const char *text)
{
    return text != NULL ? ad_buf_str(b, text) : AD_BUF_LIT(b, "null");
}
