/*
 * trace.c - W3C Trace Context: the traceparent and tracestate grammar of the specification's version 00, and
 * acceptd's span and trace ids (trace.h says what is kept and what is dropped).
 */
#include "common/trace.h"
#include "common/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int lower_hex(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return 0;
    return 1;
}

static int all_zero(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (s[i] != '0')
            return 0;
    return 1;
}

static int hexval(char c)
{
    return c <= '9' ? c - '0' : c - 'a' + 10;
}

int ad_traceparent_parse(const char *s, struct ad_trace_ctx *out)
{
    if (s == NULL)
        return -1;
    size_t len = strlen(s);
    /* version "-" trace-id "-" parent-id "-" trace-flags; a later version may add fields after a further "-". */
    if (len < AD_TRACEPARENT_LEN || !lower_hex(s, 2) || s[2] != '-' || s[35] != '-' || s[52] != '-')
        return -1;
    if (memcmp(s, "ff", 2) == 0)
        return -1;
    if (memcmp(s, "00", 2) == 0 ? len != AD_TRACEPARENT_LEN : len > AD_TRACEPARENT_LEN && s[55] != '-')
        return -1;
    const char *trace = s + 3, *parent = s + 36, *flags = s + 53;
    if (!lower_hex(trace, AD_TRACE_ID_HEX) || !lower_hex(parent, AD_SPAN_ID_HEX) || !lower_hex(flags, 2))
        return -1;
    if (all_zero(trace, AD_TRACE_ID_HEX) || all_zero(parent, AD_SPAN_ID_HEX))
        return -1;
    memcpy(out->trace_id, trace, AD_TRACE_ID_HEX);
    out->trace_id[AD_TRACE_ID_HEX] = '\0';
    memcpy(out->span_id, parent, AD_SPAN_ID_HEX);
    out->span_id[AD_SPAN_ID_HEX] = '\0';
    out->flags = (uint8_t)((hexval(flags[0]) * 16 + hexval(flags[1])) & AD_TRACE_SAMPLED);
    return 0;
}

void ad_traceparent_format(const struct ad_trace_ctx *t, char out[AD_TRACEPARENT_LEN + 1])
{
    snprintf(out, AD_TRACEPARENT_LEN + 1, "00-%s-%s-%02x", t->trace_id, t->span_id, (unsigned)t->flags);
}

/* ---- tracestate ---- */

static int key_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-' || c == '*' || c == '/';
}

/* key = simple-key / multi-tenant-key: lcalpha 0*255(keychar), or (lcalpha / DIGIT) 0*240(keychar) "@" lcalpha
 * 0*13(keychar). */
static int key_ok(const char *k, size_t n)
{
    const char *at = memchr(k, '@', n);
    if (at == NULL) {
        if (n < 1 || n > 256 || !(k[0] >= 'a' && k[0] <= 'z'))
            return 0;
        for (size_t i = 1; i < n; i++)
            if (!key_char(k[i]))
                return 0;
        return 1;
    }
    size_t tn = (size_t)(at - k), sn = n - tn - 1;
    if (tn < 1 || tn > 241 || sn < 1 || sn > 14 || !((k[0] >= 'a' && k[0] <= 'z') || (k[0] >= '0' && k[0] <= '9')))
        return 0;
    if (!(at[1] >= 'a' && at[1] <= 'z'))
        return 0;
    for (size_t i = 1; i < n; i++)
        if (k + i != at && !key_char(k[i]))
            return 0;
    return 1;
}

/* value = 0*255(chr) nblk-chr; chr = %x20 / nblk-chr; nblk-chr = %x21-2B / %x2D-3C / %x3E-7E. */
static int value_ok(const char *v, size_t n)
{
    if (n < 1 || n > 256 || v[n - 1] == ' ')
        return 0;
    for (size_t i = 0; i < n; i++)
        if (v[i] < 0x20 || v[i] > 0x7e || v[i] == ',' || v[i] == '=')
            return 0;
    return 1;
}

struct member {
    const char *p;
    size_t n;
};

/* The valid members of s (split at ',', optional spaces and tabs trimmed) into m, at most max; returns how many. */
static size_t members(const char *s, struct member *m, size_t max)
{
    size_t k = 0;
    while (s != NULL && *s != '\0' && k < max) {
        const char *end = strchr(s, ',');
        if (end == NULL)
            end = s + strlen(s);
        const char *a = s, *b = end;
        while (a < b && (*a == ' ' || *a == '\t'))
            a++;
        while (b > a && (b[-1] == ' ' || b[-1] == '\t'))
            b--;
        const char *eq = memchr(a, '=', (size_t)(b - a));
        if (eq != NULL && key_ok(a, (size_t)(eq - a)) && value_ok(eq + 1, (size_t)(b - eq - 1))) {
            int dup = 0;
            for (size_t i = 0; i < k && !dup; i++)
                dup = m[i].n > (size_t)(eq - a) && m[i].p[eq - a] == '=' && memcmp(m[i].p, a, (size_t)(eq - a)) == 0;
            if (!dup)
                m[k++] = (struct member){a, (size_t)(b - a)};
        }
        s = *end == ',' ? end + 1 : end;
    }
    return k;
}

/* Join m (n members) with ','; drop members until it fits AD_TRACESTATE_MAX: first the rightmost longer than
 * AD_TRACESTATE_LONG, then the rightmost. NULL when none is left. */
static char *join(struct member *m, size_t n)
{
    for (;;) {
        size_t total = 0;
        for (size_t i = 0; i < n; i++)
            total += m[i].n + (i > 0);
        if (total <= AD_TRACESTATE_MAX)
            break;
        size_t drop = n - 1;
        for (size_t i = n; i-- > 0;)
            if (m[i].n > AD_TRACESTATE_LONG) {
                drop = i;
                break;
            }
        memmove(m + drop, m + drop + 1, (n - drop - 1) * sizeof(*m));
        n--;
    }
    if (n == 0)
        return NULL;
    char *out = ad_malloc(AD_TRACESTATE_MAX + 1), *o = out;
    for (size_t i = 0; i < n; i++) {
        if (i > 0)
            *o++ = ',';
        memcpy(o, m[i].p, m[i].n);
        o += m[i].n;
    }
    *o = '\0';
    return out;
}

char *ad_tracestate_clean(const char *s)
{
    struct member m[AD_TRACESTATE_MEMBERS];
    return join(m, members(s, m, AD_TRACESTATE_MEMBERS));
}

char *ad_tracestate_push(const char *ts, const char *key, const char *value)
{
    struct member m[AD_TRACESTATE_MEMBERS + 1];
    char *own = ad_asprintf("%s=%s", key, value);
    m[0] = (struct member){own, strlen(own)};
    size_t n = 1 + members(ts, m + 1, AD_TRACESTATE_MEMBERS);
    size_t klen = strlen(key), k = 1;
    for (size_t i = 1; i < n; i++)
        if (!(m[i].n > klen && m[i].p[klen] == '=' && memcmp(m[i].p, key, klen) == 0))
            m[k++] = m[i];
    if (k > AD_TRACESTATE_MEMBERS)
        k = AD_TRACESTATE_MEMBERS;
    char *out = join(m, k);
    free(own);
    return out;
}

/* ---- ids ---- */

static int zero_bytes(const uint8_t *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (b[i] != 0)
            return 0;
    return 1;
}

static void random_hex(char *out, size_t bytes)
{
    uint8_t raw[16];
    do
        ad_random_bytes(raw, bytes);
    while (zero_bytes(raw, bytes));
    ad_hex_encode(raw, bytes, out);
}

void ad_trace_new_trace_id(char out[AD_TRACE_ID_HEX + 1])
{
    random_hex(out, AD_TRACE_ID_HEX / 2);
}

void ad_trace_new_span_id(char out[AD_SPAN_ID_HEX + 1])
{
    random_hex(out, AD_SPAN_ID_HEX / 2);
}

void ad_trace_span_of(const char *id, char out[AD_SPAN_ID_HEX + 1])
{
    uint8_t d[AD_SHA256_LEN];
    ad_sha256(id, strlen(id), d);
    if (zero_bytes(d, AD_SPAN_ID_HEX / 2))
        d[0] = 1;
    ad_hex_encode(d, AD_SPAN_ID_HEX / 2, out);
}

int ad_trace_id_within(const char *trace_id, double ratio)
{
    if (ratio >= 1)
        return 1;
    if (ratio <= 0)
        return 0;
    uint64_t v = 0;
    for (int i = AD_TRACE_ID_HEX - 16; i < AD_TRACE_ID_HEX; i++)
        v = v << 4 | (uint64_t)hexval(trace_id[i]);
    return (double)(v >> 11) < ratio * (double)(UINT64_C(1) << 53);
}
