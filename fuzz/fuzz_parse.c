/*
 * fuzz_parse.c - libFuzzer target: the small parsers of outside text. The first input byte picks one, the
 * rest is its input:
 *   0 RFC 3339 timestamps (runAt from clients): what parses renders and parses back to the same instant
 *   1 durations (retention, timeouts in the configuration)
 *   2 decimal integers (query parameters, headers): the same as strtoll and a bounds check
 *   3 base64url (signed URLs): what decodes encodes back to the same text
 *   4 CIDR ranges (the SSRF allow and deny lists): what parses contains its own address
 *   5 webhook URLs (the host and port the SSRF guard checks)
 *   6 progress lines printed by a worker's command
 *   7 status, priority and webhook event names
 *   8 traceparent headers: what parses writes back as version 00 of the same ids, and parses again alike
 *   9 tracestate headers: cleaning keeps at most 32 members in 512 bytes and changes nothing cleaned;
 *     acceptd's entry goes at the left
 * A violated property aborts, which libFuzzer reports as a crash.
 */
#include <errno.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "job/job.h"
#include "webhook/ssrf.h"
#include "common/trace.h"
#include "common/util.h"
#include "webhook/webhook.h"
#include "worker/worker.h"

static void check(int ok)
{
    if (!ok)
        abort();
}

static void rfc3339(const char *s)
{
    int64_t ms, again;
    char buf[64];
    if (ad_time_parse_rfc3339(s, &ms) != 0)
        return;
    ad_time_rfc3339(ms, buf, sizeof(buf));
    check(ad_time_parse_rfc3339(buf, &again) == 0 && again == ms);
}

/* Against strtoll: the same strings accepted, with the same values. */
static void integer(const char *s, size_t len)
{
    long long v, want = 0;
    int ok = ad_parse_int(s, len, -1000000, 1000000, &v) == 0;
    size_t digits = strspn(s + (s[0] == '-'), "0123456789");
    int want_ok = len > 0 && strlen(s) == len && digits > 0 && (s[0] == '-') + digits == len;
    if (want_ok) {
        errno = 0;
        want = strtoll(s, NULL, 10);
        want_ok = errno == 0 && want >= -1000000 && want <= 1000000;
    }
    check(ok == want_ok && (!ok || v == want));
}

static void b64url(const char *s, size_t len)
{
    uint8_t *raw = malloc(len + 1);
    long n = ad_b64url_decode(s, len, raw);
    if (n >= 0) {
        char *text = malloc(ad_b64url_len((size_t)n) + 1);
        ad_b64url_encode(raw, (size_t)n, text);
        check(strlen(text) == len && memcmp(text, s, len) == 0);
        free(text);
    }
    free(raw);
}

static void cidr(const char *s)
{
    struct ad_cidr c;
    if (ad_cidr_parse(s, &c) != 0)
        return;
    check(c.family == AF_INET ? c.prefix >= 0 && c.prefix <= 32 : c.prefix >= 0 && c.prefix <= 128);
    struct sockaddr_storage ss = {0};
    if (c.family == AF_INET) {
        struct sockaddr_in *in = (struct sockaddr_in *)&ss;
        in->sin_family = AF_INET;
        memcpy(&in->sin_addr, c.addr, 4);
    } else {
        struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;
        in6->sin6_family = AF_INET6;
        memcpy(&in6->sin6_addr, c.addr, 16);
    }
    check(ad_cidr_contains(&c, (struct sockaddr *)&ss) == 1);
}

static void url(const char *s)
{
    char host[256];
    long port = -1;
    if (ad_ssrf_url_host(s, host, sizeof(host), &port) != 0)
        return;
    check(strlen(host) < sizeof(host) && port >= 1 && port <= 65535);
}

static void progress(const char *s, size_t len)
{
    int pct = -1;
    const char *msg = NULL;
    size_t msglen = 0;
    if (ad_worker_parse_progress(s, len, &pct, &msg, &msglen) != 0)
        return;
    check(pct >= 0 && pct <= 100);
    check(msg == NULL ? msglen == 0 : msg >= s && msg + msglen <= s + len);
}

static void names(const char *s)
{
    enum ad_status st;
    enum ad_priority pr;
    enum ad_webhook_event ev;
    if (ad_status_parse(s, &st) == 0)
        check(strcmp(ad_status_name(st), s) == 0);
    if (ad_priority_parse(s, &pr) == 0)
        check(strcmp(ad_priority_name(pr), s) == 0);
    if (ad_webhook_event_parse(s, &ev) == 0)
        check(strcmp(ad_webhook_event_name(ev), s) == 0);
}

static void traceparent(const char *s)
{
    struct ad_trace_ctx t, again;
    if (ad_traceparent_parse(s, &t) != 0)
        return;
    char out[AD_TRACEPARENT_LEN + 1];
    ad_traceparent_format(&t, out);
    check(strlen(out) == AD_TRACEPARENT_LEN && memcmp(out + 2, s + 2, 51) == 0);
    check(ad_traceparent_parse(out, &again) == 0 && memcmp(&t, &again, sizeof(t)) == 0);
}

static size_t members(const char *ts)
{
    size_t n = 1;
    for (const char *p = ts; *p != '\0'; p++)
        n += *p == ',';
    return n;
}

static void tracestate(const char *s)
{
    char *c = ad_tracestate_clean(s);
    if (c != NULL) {
        check(strlen(c) <= AD_TRACESTATE_MAX && members(c) <= AD_TRACESTATE_MEMBERS);
        char *again = ad_tracestate_clean(c);
        check(again != NULL && strcmp(again, c) == 0);
        free(again);
    }
    char *p = ad_tracestate_push(c, AD_TRACESTATE_KEY, "00f067aa0ba902b7");
    check(p != NULL && strncmp(p, AD_TRACESTATE_KEY "=00f067aa0ba902b7", 24) == 0);
    check(strlen(p) <= AD_TRACESTATE_MAX && members(p) <= AD_TRACESTATE_MEMBERS);
    free(p);
    free(c);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    /* The text parsers take NUL-terminated strings; the length-taking ones get the same bytes. */
    size_t len = size - 1;
    char *s = malloc(len + 1);
    memcpy(s, data + 1, len);
    s[len] = '\0';
    switch (data[0] % 10) {
    case 0:
        rfc3339(s);
        break;
    case 1: {
        int64_t ms;
        if (ad_parse_duration_ms(s, &ms) == 0)
            check(ms >= 0);
        break;
    }
    case 2:
        integer(s, len);
        break;
    case 3:
        b64url(s, len);
        break;
    case 4:
        cidr(s);
        break;
    case 5:
        url(s);
        break;
    case 6:
        progress(s, len);
        break;
    case 8:
        traceparent(s);
        break;
    case 9:
        tracestate(s);
        break;
    default:
        names(s);
    }
    free(s);
    return 0;
}
