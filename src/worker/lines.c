/*
 * lines.c - reading what a command writes: progress lines (`::progress 42 message`) split from the rest of
 * its output as it streams, and text cleaned for logs and terminals.
 *
 * Pure: no I/O, no state beyond the splitter the caller owns. The worker (child.c) feeds a command's pipes
 * through it; the CLI and client.c clean the server's text with ad_worker_clean_text before printing it.
 * It does not decide what a progress line means for the job (child.c does) and keeps no output (the callbacks do).
 */
#include "worker/worker.h"
#include "common/util.h"
#include "worker/client.h"

#include <stdlib.h>
#include <string.h>

#define MARKER_LEN (sizeof(AD_WORKER_PROGRESS_PREFIX) - 1)

int ad_worker_progress_prefix(const char *p, size_t n)
{
    size_t k = n < MARKER_LEN ? n : MARKER_LEN;
    if (memcmp(p, AD_WORKER_PROGRESS_PREFIX, k) != 0)
        return -1;
    if (n <= MARKER_LEN)
        return 0;
    return p[MARKER_LEN] == ' ' || p[MARKER_LEN] == '\t' || p[MARKER_LEN] == '\r' ? 1 : -1;
}

static int is_blank(char c)
{
    return c == ' ' || c == '\t' || c == '\r';
}

static int is_digit(char c)
{
    return c >= '0' && c <= '9';
}

int ad_worker_parse_progress(const char *line, size_t len, int *pct, const char **msg, size_t *msglen)
{
    if (len < MARKER_LEN || ad_worker_progress_prefix(line, len) < 0)
        return -1;
    size_t i = MARKER_LEN;
    while (i < len && is_blank(line[i]))
        i++;
    size_t d0 = i;
    int v = 0;
    while (i < len && is_digit(line[i]) && i - d0 < 4)
        v = v * 10 + (line[i++] - '0');
    if (i == d0 || (i < len && is_digit(line[i])) || v > 100)
        return -1;
    if (i < len && line[i] == '.') {
        size_t f0 = ++i;
        while (i < len && is_digit(line[i]))
            i++;
        if (i == f0)
            return -1;
    }
    if (i < len && line[i] == '%')
        i++;
    if (i < len && !is_blank(line[i]))
        return -1;
    while (i < len && is_blank(line[i]))
        i++;
    size_t end = len;
    while (end > i && is_blank(line[end - 1]))
        end--;
    *pct = v;
    *msg = end > i ? line + i : NULL;
    *msglen = end - i;
    return 0;
}

enum { LINES_START, LINES_PROGRESS, LINES_TEXT };

void ad_worker_lines_init(struct ad_worker_lines *l, void (*text)(void *, const char *, size_t),
                          void (*progress)(void *, const char *, size_t), void *ctx)
{
    memset(l, 0, sizeof(*l));
    l->text = text;
    l->progress = progress;
    l->ctx = ctx;
    l->line = ad_malloc(AD_WORKER_LINE_MAX);
    l->mode = LINES_START;
}

/* At the end of a line still in LINES_START: the bare marker is a progress line, anything else text. */
static void lines_end_start(struct ad_worker_lines *l)
{
    if (l->len == MARKER_LEN && ad_worker_progress_prefix(l->line, l->len) == 0)
        l->progress(l->ctx, l->line, l->len);
    else if (l->len > 0)
        l->text(l->ctx, l->line, l->len);
}

void ad_worker_lines_feed(struct ad_worker_lines *l, const char *p, size_t n)
{
    size_t i = 0;
    while (i < n) {
        const char *nl;
        size_t m;
        switch (l->mode) {
        case LINES_TEXT:
            nl = memchr(p + i, '\n', n - i);
            m = nl != NULL ? (size_t)(nl - (p + i)) + 1 : n - i;
            l->text(l->ctx, p + i, m);
            i += m;
            if (nl != NULL)
                l->mode = LINES_START;
            break;
        case LINES_PROGRESS:
            nl = memchr(p + i, '\n', n - i);
            m = nl != NULL ? (size_t)(nl - (p + i)) : n - i;
            /* An overlong line is cut at the cap; the rest of it is dropped. */
            size_t keep = m < AD_WORKER_LINE_MAX - l->len ? m : AD_WORKER_LINE_MAX - l->len;
            memcpy(l->line + l->len, p + i, keep);
            l->len += keep;
            i += m;
            if (nl != NULL) {
                i++;
                l->progress(l->ctx, l->line, l->len);
                l->len = 0;
                l->mode = LINES_START;
            }
            break;
        default:
            if (p[i] == '\n') {
                /* Keep the newline with its line so the text sink sees the bytes exactly as written. */
                if (l->len == MARKER_LEN && ad_worker_progress_prefix(l->line, l->len) == 0) {
                    l->progress(l->ctx, l->line, l->len);
                } else {
                    l->line[l->len++] = '\n';
                    l->text(l->ctx, l->line, l->len);
                }
                l->len = 0;
                i++;
                break;
            }
            l->line[l->len++] = p[i++];
            int s = ad_worker_progress_prefix(l->line, l->len);
            if (s > 0) {
                l->mode = LINES_PROGRESS;
            } else if (s < 0) {
                l->text(l->ctx, l->line, l->len);
                l->len = 0;
                l->mode = LINES_TEXT;
            }
            break;
        }
    }
}

void ad_worker_lines_finish(struct ad_worker_lines *l)
{
    if (l->mode == LINES_PROGRESS)
        l->progress(l->ctx, l->line, l->len);
    else if (l->mode == LINES_START)
        lines_end_start(l);
    l->len = 0;
    l->mode = LINES_START;
}

void ad_worker_lines_free(struct ad_worker_lines *l)
{
    free(l->line);
    l->line = NULL;
}

/* Length of a valid UTF-8 sequence at s[0..n), or 0. */
static size_t utf8_seq(const unsigned char *s, size_t n)
{
    size_t len;
    unsigned cp, min;
    if (s[0] >= 0xC2 && s[0] <= 0xDF)
        len = 2, cp = s[0] & 0x1F, min = 0x80;
    else if (s[0] >= 0xE0 && s[0] <= 0xEF)
        len = 3, cp = s[0] & 0x0F, min = 0x800;
    else if (s[0] >= 0xF0 && s[0] <= 0xF4)
        len = 4, cp = s[0] & 0x07, min = 0x10000;
    else
        return 0;
    if (len > n)
        return 0;
    for (size_t k = 1; k < len; k++) {
        if ((s[k] & 0xC0) != 0x80)
            return 0;
        cp = (cp << 6) | (s[k] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
        return 0;
    return len;
}

char *ad_worker_clean_text(const char *p, size_t n)
{
    const unsigned char *s = (const unsigned char *)p;
    size_t i = 0;
    while (i < n && (s[i] & 0xC0) == 0x80)
        i++;
    char *out = ad_malloc(n - i + 1);
    size_t o = 0;
    while (i < n) {
        unsigned char c = s[i];
        if (c < 0x80) {
            int ok = (c >= 0x20 && c != 0x7f) || c == '\n' || c == '\t' || c == '\r';
            out[o++] = ok ? (char)c : '?';
            i++;
            continue;
        }
        size_t len = utf8_seq(s + i, n - i);
        if (len == 0) {
            out[o++] = '?';
            i++;
            continue;
        }
        memcpy(out + o, s + i, len);
        o += len;
        i += len;
    }
    out[o] = '\0';
    return out;
}

char *ad_worker_clean_cut(const char *p, size_t n, size_t max)
{
    char *s = ad_worker_clean_text(p, n);
    ad_client_utf8_cut(s, max);
    return s;
}
