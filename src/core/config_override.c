/*
 * config_override.c - the settings around the config file: the defaults beneath it, the ACCEPTD_*
 * environment variables and command-line flags above it, and the lookups the daemon makes once cfg is built.
 *
 * The setters validate one value each and leave cfg as it was on a bad one; the file's `listen`, `data`,
 * `publicUrl` and `store.postgres` go through the same setters (config.c), so a flag, a variable and the file
 * accept the same values. Strings follow the mapper's one rule for config text (no control characters).
 * Nothing here reads a file or opens a socket.
 */
#include "core/config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "core/yamlmap_int.h"

void ad_config_defaults(struct ad_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->listen_host = ad_strdup("127.0.0.1");
    cfg->listen_port = 8080;
    cfg->tracing.sample_ratio = 1;
    cfg->data_dir = ad_strdup("./data");
    int64_t day = 86400 * 1000;
    cfg->retention = (struct ad_retention){30 * day, 30 * day, 30 * day, 30 * day};
    cfg->tombstone_ms = 7 * day;
    cfg->idempotency_ttl_ms = day;
    cfg->sweep_interval_ms = 1000;
    cfg->max_body_bytes = 1024 * 1024;
    cfg->max_upload_part_bytes = 4 * 1024 * 1024;
    cfg->max_result_bytes = (size_t)4 << 30;
    cfg->artifacts.url_lifetime_ms = 3600 * 1000;
    cfg->artifacts.gc_interval_ms = 60 * 1000;
    cfg->max_wait_seconds = 60;
    cfg->default_max_attempts = 3;
    cfg->retry_backoff_ms = 1000;
    cfg->max_connections = 10000;
    cfg->cache_bytes = 64 << 20;
    cfg->scheduled_timers = 10000;
    cfg->max_queued_writes = 10000;
    cfg->max_unsent_per_conn = 8 << 20;
    cfg->max_unsent = 128 << 20;
    cfg->unsent_stall_ms = 10000;
    static const int64_t schedule_s[] = {0, 5, 300, 1800, 7200, 18000, 36000, 50400, 72000, 86400};
    cfg->webhooks.nretry_schedule = sizeof schedule_s / sizeof schedule_s[0];
    cfg->webhooks.retry_schedule_ms = ad_calloc(cfg->webhooks.nretry_schedule, sizeof(int64_t));
    for (size_t i = 0; i < cfg->webhooks.nretry_schedule; i++)
        cfg->webhooks.retry_schedule_ms[i] = schedule_s[i] * 1000;
    cfg->webhooks.timeout_seconds = 10;
    cfg->webhooks.headers_timeout_seconds = 5;
    cfg->webhooks.max_response_bytes = 64 * 1024;
    cfg->webhooks.concurrency = 64;
    cfg->webhooks.per_endpoint = 16;
    cfg->webhooks.keep_ms = 30 * day;
    cfg->webhooks.rotation_grace_ms = day;
    cfg->sse = (struct ad_sse_conf){15000, 2000, 30000, 1024 * 1024, 50000, 20000, 1};
}

int ad_config_set_listen(struct ad_config *cfg, const char *hostport)
{
    const char *host, *colon;
    size_t hlen;
    if (hostport == NULL)
        return -1;
    if (hostport[0] == '[') {
        /* "[v6]:PORT"; the brackets are not part of the stored host */
        const char *close = strchr(hostport, ']');
        if (close == NULL || close[1] != ':')
            return -1;
        host = hostport + 1;
        hlen = (size_t)(close - host);
        colon = close + 1;
        if (hlen == 0 || memchr(host, ':', hlen) == NULL || strspn(host, "0123456789abcdefABCDEF:.") < hlen)
            return -1;
    } else {
        colon = strrchr(hostport, ':');
        if (colon == NULL)
            return -1;
        host = hostport;
        hlen = (size_t)(colon - hostport);
        /* An IPv6 address without brackets is ambiguous ("::1:8080"). */
        if (memchr(host, ':', hlen) != NULL)
            return -1;
        if (strspn(host, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_") < hlen)
            return -1;
    }
    long long port;
    if (ad_parse_int(colon + 1, strlen(colon + 1), 0, 65535, &port) < 0)
        return -1;
    free(cfg->listen_host);
    cfg->listen_host = hlen == 0 ? ad_strdup("0.0.0.0") : ad_strndup(host, hlen);
    cfg->listen_port = (int)port;
    return 0;
}

int ad_config_set_data(struct ad_config *cfg, const char *dir)
{
    if (dir == NULL || dir[0] == '\0' || !ad_ymap_clean_text(dir, strlen(dir)))
        return -1;
    ad_ymap_replace_str(&cfg->data_dir, dir);
    return 0;
}

int ad_config_set_store(struct ad_config *cfg, const char *url)
{
    if (url == NULL || !ad_ymap_clean_text(url, strlen(url)) ||
        (strncmp(url, "postgresql://", 13) != 0 && strncmp(url, "postgres://", 11) != 0))
        return -1;
    ad_ymap_replace_str(&cfg->store, url);
    return 0;
}

int ad_config_set_public_url(struct ad_config *cfg, const char *url)
{
    if (url == NULL || !ad_ymap_clean_text(url, strlen(url)))
        return -1;
    size_t scheme = !strncmp(url, "http://", 7) ? 7 : !strncmp(url, "https://", 8) ? 8 : 0;
    size_t len = strlen(url);
    while (len > scheme && url[len - 1] == '/')
        len--;
    if (scheme == 0 || len == scheme || url[scheme] == '/' || strcspn(url, " ?#") < len)
        return -1;
    free(cfg->public_url);
    cfg->public_url = ad_strndup(url, len);
    return 0;
}

int ad_config_apply_env(struct ad_config *cfg, char *err, size_t errlen)
{
    static const struct {
        const char *name;
        int (*set)(struct ad_config *, const char *);
        const char *expected;
    } vars[] = {
        {"ACCEPTD_LISTEN", ad_config_set_listen, "HOST:PORT, [IPv6]:PORT or :PORT"},
        {"ACCEPTD_DATA", ad_config_set_data, "a directory path"},
        {"ACCEPTD_PUBLIC_URL", ad_config_set_public_url, "an http:// or https:// URL without query or fragment"},
        {"ACCEPTD_STORE", ad_config_set_store, "a postgresql:// connection URL"},
    };
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *v = getenv(vars[i].name);
        if (v == NULL || v[0] == '\0') /* set but empty counts as unset, as shells make that easy */
            continue;
        if (vars[i].set(cfg, v) < 0) {
            snprintf(err, errlen, "%s: expected %s, got '%.64s'", vars[i].name, vars[i].expected, v);
            return -1;
        }
    }
    return 0;
}

const struct ad_type_conf *ad_config_type(const struct ad_config *cfg, const char *name)
{
    for (size_t i = 0; i < cfg->ntypes; i++) {
        if (!strcmp(cfg->types[i].name, name))
            return &cfg->types[i];
    }
    return NULL;
}

const struct ad_route *ad_config_route(const struct ad_config *cfg, const char *method, size_t mlen, const char *path,
                                       size_t plen)
{
    for (size_t i = 0; i < cfg->nroutes; i++) {
        const struct ad_route *r = &cfg->routes[i];
        if (strlen(r->method) == mlen && !memcmp(r->method, method, mlen) && strlen(r->path) == plen &&
            !memcmp(r->path, path, plen))
            return r;
    }
    return NULL;
}
