/*
 * ssrf.c - address classifier, allow-list, checking resolver and the curl connect hook (see ssrf.h).
 *
 * The classifier is a table of special-purpose ranges (IANA's IPv4 and IPv6 special-purpose registries plus
 * the cloud metadata addresses), first match wins, so narrower entries come before the ranges that contain
 * them. IPv6 outside 2000::/3 is not global unicast at all and is refused as a whole. Addresses that embed an
 * IPv4 address (mapped, compatible, translated, NAT64, 6to4, Teredo) are refused whatever they embed: the
 * IPv4 address they lead to is not the one the check would see.
 */
#include "webhook/ssrf.h"
#include "common/list.h"
#include "common/util.h"
#include "core/pool.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

struct range {
    const char *net;
    const char *why;
};

static const struct range v4_ranges[] = {
    {"0.0.0.0/8", "\"this network\" (0.0.0.0/8)"},
    {"10.0.0.0/8", "private (RFC 1918)"},
    {"100.100.100.200/32", "a cloud metadata address"},
    {"100.64.0.0/10", "shared address space (CGNAT, RFC 6598)"},
    {"127.0.0.0/8", "loopback"},
    {"168.63.129.16/32", "a cloud metadata address"},
    {"169.254.169.254/32", "a cloud metadata address"},
    {"169.254.0.0/16", "link-local"},
    {"172.16.0.0/12", "private (RFC 1918)"},
    {"192.0.0.0/24", "IETF protocol assignments (192.0.0.0/24)"},
    {"192.0.2.0/24", "documentation (TEST-NET-1)"},
    {"192.88.99.0/24", "6to4 relay anycast"},
    {"192.168.0.0/16", "private (RFC 1918)"},
    {"198.18.0.0/15", "benchmarking (RFC 2544)"},
    {"198.51.100.0/24", "documentation (TEST-NET-2)"},
    {"203.0.113.0/24", "documentation (TEST-NET-3)"},
    {"224.0.0.0/4", "multicast"},
    {"255.255.255.255/32", "limited broadcast"},
    {"240.0.0.0/4", "reserved (240.0.0.0/4)"},
};

static const struct range v6_ranges[] = {
    {"::/128", "the unspecified address"},
    {"::1/128", "loopback"},
    {"::ffff:0:0/96", "IPv4-mapped IPv6"},
    {"::ffff:0:0:0/96", "IPv4-translated IPv6 (SIIT)"},
    {"::/96", "IPv4-compatible IPv6"},
    {"64:ff9b::/96", "IPv4-embedded IPv6 (NAT64, RFC 6052)"},
    {"64:ff9b:1::/48", "IPv4-embedded IPv6 (local-use NAT64, RFC 8215)"},
    {"100::/64", "discard-only (RFC 6666)"},
    {"2001::/32", "Teredo (IPv4-embedded IPv6)"},
    {"2001:db8::/32", "documentation (2001:db8::/32)"},
    {"2001::/23", "IETF protocol assignments (2001::/23)"},
    {"2002::/16", "6to4 (IPv4-embedded IPv6)"},
    {"3fff::/20", "documentation (3fff::/20)"},
    {"fd00:ec2::254/128", "a cloud metadata address"},
    {"fc00::/7", "unique local (fc00::/7)"},
    {"fe80::/10", "link-local"},
    {"fec0::/10", "site-local (deprecated)"},
    {"ff00::/8", "multicast"},
    {"2000::/3", NULL}, /* global unicast: everything above is carved out of it or lies outside it */
};

#define NV4 (sizeof(v4_ranges) / sizeof(v4_ranges[0]))
#define NV6 (sizeof(v6_ranges) / sizeof(v6_ranges[0]))

static struct ad_cidr v4_nets[NV4], v6_nets[NV6];
static pthread_once_t tables_once = PTHREAD_ONCE_INIT;

static void tables_init(void)
{
    for (size_t i = 0; i < NV4; i++)
        if (ad_cidr_parse(v4_ranges[i].net, &v4_nets[i]) != 0)
            abort();
    for (size_t i = 0; i < NV6; i++)
        if (ad_cidr_parse(v6_ranges[i].net, &v6_nets[i]) != 0)
            abort();
}

const char *ad_ssrf_classify(const struct sockaddr *sa)
{
    pthread_once(&tables_once, tables_init);
    int family;
    const uint8_t *a = ad_sockaddr_bytes(sa, &family);
    if (a == NULL)
        return "not an IP address";
    if (family == AF_INET) {
        for (size_t i = 0; i < NV4; i++)
            if (ad_cidr_match(&v4_nets[i], a))
                return v4_ranges[i].why;
        return NULL;
    }
    for (size_t i = 0; i < NV6; i++)
        if (ad_cidr_match(&v6_nets[i], a))
            return v6_ranges[i].why;
    return "reserved (outside 2000::/3)";
}

static void addr_text(const struct sockaddr *sa, char *buf, size_t len)
{
    int family;
    const uint8_t *a = ad_sockaddr_bytes(sa, &family);
    if (a == NULL || inet_ntop(family, a, buf, (socklen_t)len) == NULL)
        snprintf(buf, len, "?");
}

int ad_ssrf_check_addr(const struct ad_ssrf *g, const struct sockaddr *sa, char *why, size_t whylen)
{
    for (size_t i = 0; g != NULL && i < g->nallow; i++)
        if (ad_cidr_contains(&g->allow[i], sa))
            return 0;
    const char *reason = ad_ssrf_classify(sa);
    if (reason == NULL)
        return 0;
    char text[INET6_ADDRSTRLEN];
    addr_text(sa, text, sizeof(text));
    snprintf(why, whylen, "%s is %s; not allow-listed in webhooks.allowNetworks", text, reason);
    return -1;
}

/* Parse an IP literal (no brackets) into ss. 0 or -1. */
static int parse_literal(const char *host, struct sockaddr_storage *ss)
{
    memset(ss, 0, sizeof(*ss));
    struct sockaddr_in *v4 = (struct sockaddr_in *)ss;
    struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)ss;
    if (inet_pton(AF_INET, host, &v4->sin_addr) == 1) {
        v4->sin_family = AF_INET;
        return 0;
    }
    if (inet_pton(AF_INET6, host, &v6->sin6_addr) == 1) {
        v6->sin6_family = AF_INET6;
        return 0;
    }
    return -1;
}

int ad_ssrf_url_host(const char *url, char *host, size_t hostlen, long *port)
{
    CURLU *u = curl_url();
    char *h = NULL, *p = NULL;
    int rc = -1;
    if (u != NULL && curl_url_set(u, CURLUPART_URL, url, 0) == CURLUE_OK &&
        curl_url_get(u, CURLUPART_HOST, &h, 0) == CURLUE_OK &&
        curl_url_get(u, CURLUPART_PORT, &p, CURLU_DEFAULT_PORT) == CURLUE_OK) {
        const char *s = h;
        size_t n = strlen(s);
        if (n >= 2 && s[0] == '[') {
            s++;
            n = strcspn(s, "]%");
        }
        long long port_num;
        if (n > 0 && n < hostlen && ad_parse_int(p, strlen(p), 1, 65535, &port_num) == 0) {
            for (size_t i = 0; i < n; i++)
                host[i] = (char)(s[i] >= 'A' && s[i] <= 'Z' ? s[i] + 32 : s[i]);
            host[n] = '\0';
            *port = (long)port_num;
            rc = 0;
        }
    }
    curl_free(h);
    curl_free(p);
    curl_url_cleanup(u);
    return rc;
}

static int is_localhost(const char *host)
{
    size_t n = strlen(host);
    if (n > 0 && host[n - 1] == '.')
        n--;
    return (n == 9 && strncmp(host, "localhost", 9) == 0) || (n > 10 && strncmp(host + n - 10, ".localhost", 10) == 0);
}

int ad_ssrf_check_url(const struct ad_ssrf *g, const char *url, char *why, size_t whylen)
{
    char host[256];
    long port;
    if (ad_ssrf_url_host(url, host, sizeof(host), &port) != 0) {
        snprintf(why, whylen, "the URL does not parse");
        return -1;
    }
    struct sockaddr_storage ss;
    if (parse_literal(host, &ss) == 0)
        return ad_ssrf_check_addr(g, (struct sockaddr *)&ss, why, whylen);
    if (is_localhost(host)) {
        if (parse_literal("127.0.0.1", &ss) != 0 || ad_ssrf_check_addr(g, (struct sockaddr *)&ss, why, whylen) != 0)
            return -1;
        return parse_literal("::1", &ss) == 0 ? ad_ssrf_check_addr(g, (struct sockaddr *)&ss, why, whylen) : -1;
    }
    return 0;
}

/* ---- the resolver ---- */

#define CACHE_BUCKETS 256
#define CACHE_MAX 4096
#define TTL_OK_MS 30000
#define TTL_FAIL_MS 5000
#define ADDRS_MAX 1024

struct entry {
    struct entry *next;       /* bucket chain */
    struct ad_pool_item item; /* in the resolver's queue, while pending */
    enum ad_resolve state;
    int64_t expires;       /* monotonic ms; 0 while pending */
    char addrs[ADDRS_MAX]; /* OK: the CURLOPT_RESOLVE address list */
    char why[200];         /* REFUSED: the reason */
    char host[];
};

struct ad_resolver {
    const struct ad_ssrf *guard;
    void (*wake)(void *);
    void *arg;
    /* One thread (core/pool.h), that drops the lookups still queued at stop (cache_clear frees them). */
    struct ad_pool pool;
    pthread_mutex_t mu; /* the cache */
    struct entry *buckets[CACHE_BUCKETS];
    size_t count;
};

static size_t host_hash(const char *s)
{
    size_t h = 5381;
    for (; *s != '\0'; s++)
        h = h * 33 + (unsigned char)*s;
    return h % CACHE_BUCKETS;
}

/* Drop every answered entry (pending ones are still referenced by the queue). Caller holds mu. */
static void cache_clear(struct ad_resolver *r, int all)
{
    for (size_t i = 0; i < CACHE_BUCKETS; i++) {
        struct entry **p = &r->buckets[i];
        while (*p != NULL) {
            struct entry *e = *p;
            if (all || e->state != AD_RESOLVE_PENDING) {
                *p = e->next;
                free(e);
                r->count--;
            } else {
                p = &e->next;
            }
        }
    }
}

/* Resolve one name and judge every answer. */
static void resolve(struct ad_resolver *r, const char *host, enum ad_resolve *state, char *addrs, char *why)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res = NULL;
    int gai = getaddrinfo(host, NULL, &hints, &res);
    addrs[0] = '\0';
    *state = AD_RESOLVE_REFUSED;
    if (gai != 0) {
        snprintf(why, 200, "cannot resolve %.100s: %s", host, gai_strerror(gai));
        return;
    }
    size_t len = 0;
    int refused = 0;
    for (struct addrinfo *ai = res; ai != NULL && !refused; ai = ai->ai_next) {
        char text[INET6_ADDRSTRLEN + 2], reason[160];
        if (ad_ssrf_check_addr(r->guard, ai->ai_addr, reason, sizeof(reason)) != 0) {
            snprintf(why, 200, "%.60s resolves to %.120s", host, reason);
            refused = 1;
            break;
        }
        char plain[INET6_ADDRSTRLEN];
        addr_text(ai->ai_addr, plain, sizeof(plain));
        snprintf(text, sizeof(text), ai->ai_family == AF_INET6 ? "[%s]" : "%s", plain);
        if (strstr(addrs, text) != NULL) /* getaddrinfo repeats an address once per protocol */
            continue;
        int n = snprintf(addrs + len, ADDRS_MAX - len, "%s%s", len > 0 ? "," : "", text);
        if (n < 0 || (size_t)n >= ADDRS_MAX - len)
            break; /* enough addresses to try; the rest were checked too */
        len += (size_t)n;
    }
    freeaddrinfo(res);
    if (!refused && len == 0)
        snprintf(why, 200, "%.100s has no IP address", host);
    else if (!refused)
        *state = AD_RESOLVE_OK;
}

/* On the resolver thread: answer one queued lookup. */
static void resolver_run(struct ad_pool *p, void *state, struct ad_pool_item *it)
{
    struct ad_resolver *r = p->data;
    struct entry *e = AD_CONTAINER_OF(it, struct entry, item);
    enum ad_resolve state_;
    char addrs[ADDRS_MAX], why[200] = "";
    resolve(r, e->host, &state_, addrs, why);
    pthread_mutex_lock(&r->mu);
    memcpy(e->addrs, addrs, sizeof(addrs));
    memcpy(e->why, why, sizeof(why));
    e->expires = ad_mono_ms() + (state_ == AD_RESOLVE_OK ? TTL_OK_MS : TTL_FAIL_MS);
    e->state = state_;
    pthread_mutex_unlock(&r->mu);
    r->wake(r->arg);
}

struct ad_resolver *ad_resolver_new(const struct ad_ssrf *g, void (*wake)(void *arg), void *arg)
{
    struct ad_resolver *r = ad_calloc(1, sizeof(*r));
    r->guard = g;
    r->wake = wake;
    r->arg = arg;
    pthread_mutex_init(&r->mu, NULL);
    r->pool = (struct ad_pool){.name = "acceptd-resolve", .nthreads = 1, .drain = 0, .run = resolver_run, .data = r};
    char err[128];
    if (ad_pool_start(&r->pool, err, sizeof(err)) != 0) {
        ad_error("webhooks: cannot start the resolver thread: %s", err);
        abort();
    }
    return r;
}

void ad_resolver_free(struct ad_resolver *r)
{
    if (r == NULL)
        return;
    ad_pool_stop(&r->pool);
    cache_clear(r, 1);
    pthread_mutex_destroy(&r->mu);
    ad_pool_destroy(&r->pool);
    free(r);
}

enum ad_resolve ad_resolver_lookup(struct ad_resolver *r, const char *host, char *addrs, size_t addrslen, char *why,
                                   size_t whylen)
{
    struct sockaddr_storage ss;
    if (parse_literal(host, &ss) == 0) {
        if (ad_ssrf_check_addr(r->guard, (struct sockaddr *)&ss, why, whylen) != 0)
            return AD_RESOLVE_REFUSED;
        snprintf(addrs, addrslen, ss.ss_family == AF_INET6 ? "[%s]" : "%s", host);
        return AD_RESOLVE_OK;
    }
    int64_t now = ad_mono_ms();
    pthread_mutex_lock(&r->mu);
    struct entry **p = &r->buckets[host_hash(host)];
    while (*p != NULL && strcmp((*p)->host, host) != 0)
        p = &(*p)->next;
    struct entry *e = *p;
    if (e != NULL && e->state != AD_RESOLVE_PENDING && e->expires <= now) {
        *p = e->next;
        free(e);
        r->count--;
        e = NULL;
    }
    if (e == NULL) {
        if (r->count >= CACHE_MAX)
            cache_clear(r, 0);
        size_t n = strlen(host);
        e = ad_calloc(1, sizeof(*e) + n + 1);
        memcpy(e->host, host, n + 1);
        e->state = AD_RESOLVE_PENDING;
        struct entry **b = &r->buckets[host_hash(host)];
        e->next = *b;
        *b = e;
        r->count++;
        if (ad_pool_submit(&r->pool, &e->item) != 0) { /* stopping: the delivery thread is about to end too */
            e->state = AD_RESOLVE_REFUSED;
            e->expires = now;
            snprintf(e->why, sizeof(e->why), "the resolver has stopped");
        }
    }
    enum ad_resolve state = e->state;
    if (state == AD_RESOLVE_OK)
        snprintf(addrs, addrslen, "%s", e->addrs);
    else if (state == AD_RESOLVE_REFUSED)
        snprintf(why, whylen, "%s", e->why);
    pthread_mutex_unlock(&r->mu);
    return state;
}

/* ---- the connect hook ---- */

curl_socket_t ad_ssrf_opensocket(void *clientp, curlsocktype purpose, struct curl_sockaddr *addr)
{
    struct ad_ssrf_dial *d = clientp;
    if (purpose != CURLSOCKTYPE_IPCXN) {
        snprintf(d->why, sizeof(d->why), "only plain TCP connections are made");
        return CURL_SOCKET_BAD;
    }
    if (ad_ssrf_check_addr(d->guard, &addr->addr, d->why, sizeof(d->why)) != 0)
        return CURL_SOCKET_BAD;
    int fd = socket(addr->family, addr->socktype | SOCK_CLOEXEC, addr->protocol);
    return fd >= 0 ? fd : CURL_SOCKET_BAD;
}
