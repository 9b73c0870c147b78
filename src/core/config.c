/*
 * config.c - acceptd's configuration file: the schema (keys, types, routes, listen, limits, webhooks, sse,
 * tls, log, artifacts, store, tracing) and its loading.
 *
 * Each mapping the format allows has one table of its keys (name, kind, where the value goes), walked by the
 * mapper in yamlmap.c, which refuses unknown and repeated keys and names the file and line of every error.
 * This file holds the tables, the values a table cannot check alone (roles, secrets, methods, paths, CIDRs,
 * the retry schedule) and the checks that need the whole file (fallbacks, routes naming configured types).
 * Defaults, environment variables, flags and lookups are in config_override.c.
 *
 * Lists in the file (keys, types, routes) replace what cfg held; scalars override one by one. On an error
 * cfg is left partly merged but always safe to pass to ad_config_free, which is all a caller should do then.
 */
#include "core/config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <errno.h>
#include <yaml.h>

#include "common/sign.h"
#include "common/cidr.h"
#include "common/util.h"
#include "core/yamlmap_int.h"

/* Longest duration accepted anywhere: 100 years keeps finishedAt + retention far from int64 overflow. */
#define MAX_DURATION_MS ((int64_t)36500 * 86400 * 1000)
#define MAX_TYPE_NAME 128

/* What one load keeps besides the mapper's state (struct ad_ymap's ctx). */
struct load {
    struct ad_config *cfg;
    int *route_lines; /* line of each route's `type` in this file, for the check that runs after all keys */
    size_t nroute_lines;
};

/* Retention per terminal state; a type's missing entries fall back to the global ones after the file is read. */
static const struct field retention_fields[] = {
    {"succeeded", F_DURATION, offsetof(struct ad_retention, succeeded_ms), 0, MAX_DURATION_MS, NULL, NULL},
    {"failed", F_DURATION, offsetof(struct ad_retention, failed_ms), 0, MAX_DURATION_MS, NULL, NULL},
    {"cancelled", F_DURATION, offsetof(struct ad_retention, cancelled_ms), 0, MAX_DURATION_MS, NULL, NULL},
    {"partialSuccess", F_DURATION, offsetof(struct ad_retention, partial_ms), 0, MAX_DURATION_MS, NULL, NULL},
    {NULL},
};

/* keys[i] */

static int key_role(struct ad_ymap *p, yaml_node_t *v, void *obj)
{
    static const struct {
        const char *name;
        enum ad_role role;
    } roles[] = {{"client", AD_ROLE_CLIENT}, {"worker", AD_ROLE_WORKER}, {"admin", AD_ROLE_ADMIN}};
    const char *s = ad_ymap_scalar(v);
    for (size_t i = 0; s != NULL && i < sizeof roles / sizeof roles[0]; i++) {
        if (!strcmp(s, roles[i].name)) {
            ((struct ad_key *)obj)->role = roles[i].role;
            return 0;
        }
    }
    return ad_ymap_fail(p, v, "%s: expected client, worker or admin, got '%.64s'", p->where, s ? s : "(not a scalar)");
}

static int key_secret(struct ad_ymap *p, yaml_node_t *v, void *obj)
{
    /* The value is a secret: errors describe it, never quote it. */
    const char *s = ad_ymap_scalar(v);
    if (s == NULL || ad_ymap_is_null(v) || s[0] == '\0')
        return ad_ymap_fail(p, v, "%s: expected a non-empty string", p->where);
    for (size_t i = 0; i < v->data.scalar.length; i++) {
        if ((unsigned char)s[i] <= 0x20 || (unsigned char)s[i] >= 0x7f)
            return ad_ymap_fail(p, v, "%s: a key must be printable ASCII without spaces (it is sent as a Bearer token)",
                                p->where);
    }
    ad_ymap_replace_str(&((struct ad_key *)obj)->key, s);
    return 0;
}

/* limits.rateLimit and keys[i].rateLimit: { requests: N, window: DURATION }. */
static const struct field rate_fields[] = {
    {"requests", F_INT, offsetof(struct ad_rate, requests), 0, 1000000000, NULL, NULL},
    {"window", F_DURATION, offsetof(struct ad_rate, window_ms), 1000, 86400 * (int64_t)1000, NULL, NULL},
    {NULL},
};

static int parse_rate(struct ad_ymap *p, yaml_node_t *v, struct ad_rate *r)
{
    *r = (struct ad_rate){0};
    if (ad_ymap_parse_map(p, v, rate_fields, r) < 0)
        return -1;
    if (r->requests > 0 && r->window_ms == 0)
        return ad_ymap_fail(p, v, "%s: 'window' is required with 'requests'", p->where);
    if (r->window_ms % 1000 != 0)
        return ad_ymap_fail(p, v, "%s: 'window' must be a whole number of seconds", p->where);
    r->set = 1;
    return 0;
}

static int key_rate(struct ad_ymap *p, yaml_node_t *v, void *obj)
{
    return parse_rate(p, v, &((struct ad_key *)obj)->rate);
}

static const struct field key_fields[] = {
    {"key", F_FN, 0, 0, 0, NULL, key_secret},
    {"tenant", F_STR, offsetof(struct ad_key, tenant), 0, 0, NULL, NULL},
    {"role", F_FN, 0, 0, 0, NULL, key_role},
    {"rateLimit", F_FN, 0, 0, 0, NULL, key_rate},
    {NULL},
};

static void free_keys(struct ad_config *cfg)
{
    for (size_t i = 0; i < cfg->nkeys; i++) {
        free(cfg->keys[i].key);
        free(cfg->keys[i].tenant);
    }
    free(cfg->keys);
    cfg->keys = NULL;
    cfg->nkeys = 0;
}

static int key_item(struct ad_ymap *p, yaml_node_t *item, size_t i, void *obj)
{
    struct ad_config *cfg = obj;
    struct ad_key *k = &cfg->keys[i];
    if (ad_ymap_parse_map(p, item, key_fields, k) < 0)
        return -1;
    if (k->key == NULL || k->tenant == NULL || k->role == 0)
        return ad_ymap_fail(p, item, "%s: 'key', 'tenant' and 'role' are required", p->where);
    for (size_t j = 0; j < i; j++) {
        if (!strcmp(cfg->keys[j].key, k->key))
            return ad_ymap_fail(p, item, "%s: the same key as keys[%zu]; keys must be unique", p->where, j);
    }
    return 0;
}

static int top_keys(struct ad_ymap *p, yaml_node_t *v, void *obj)
{
    struct ad_config *cfg = obj;
    long n = ad_ymap_list_len(p, v);
    if (n < 0)
        return -1;
    free_keys(cfg);
    cfg->keys = ad_calloc((size_t)n, sizeof *cfg->keys);
    cfg->nkeys = (size_t)n;
    return ad_ymap_each(p, v, n, key_item, cfg);
}

/* types.NAME */

/* A list of strings (types.NAME.required, webhooks.allowNetworks) being read; check, when not NULL, refuses
 * an item's text after reporting why. */
struct strs {
    char ***strs;
    size_t *n;
    int (*check)(struct ad_ymap *p, yaml_node_t *item, const char *s);
};

static int str_item(struct ad_ymap *p, yaml_node_t *item, size_t i, void *obj)
{
    struct strs *l = obj;
    const char *s = ad_ymap_text(p, item);
    (void)i;
    if (s == NULL || (l->check != NULL && l->check(p, item, s) < 0))
        return -1;
    (*l->strs)[(*l->n)++] = ad_strdup(s);
    return 0;
}

/* A list of non-empty strings without control characters, replacing *strs. */
static int parse_strs(struct ad_ymap *p, yaml_node_t *v, struct strs l)
{
    long n = ad_ymap_list_len(p, v);
    if (n < 0)
        return -1;
    ad_ymap_free_strs(l.strs, l.n);
    *l.strs = ad_calloc((size_t)n, sizeof **l.strs);
    return ad_ymap_each(p, v, n, str_item, &l);
}

static int type_required(struct ad_ymap *p, yaml_node_t *v, void *obj)
{
    struct ad_type_conf *t = obj;
    return parse_strs(p, v, (struct strs){&t->required, &t->nrequired, NULL});
}

/* A queue's rate limit: {limit, period}, both required (core/queues.c keeps the same bounds for a PATCH). */
static const struct field type_rate_fields[] = {
    {"limit", F_INT, offsetof(struct ad_type_rate, limit), 1, 1000000, NULL, NULL},
    {"period", F_DURATION, offsetof(struct ad_type_rate, period_ms), 1, 86400 * (int64_t)1000, NULL, NULL},
    {NULL},
};

static int parse_type_rate(struct ad_ymap *p, yaml_node_t *v, struct ad_type_rate *r)
{
    *r = (struct ad_type_rate){0};
    if (ad_ymap_is_null(v))
        return 0;
    if (ad_ymap_parse_map(p, v, type_rate_fields, r) < 0)
        return -1;
    if (r->limit == 0 || r->period_ms == 0)
        return ad_ymap_fail(p, v, "%s: a rate limit needs both 'limit' and 'period'", p->where);
    return 0;
}

static int type_rate(struct ad_ymap *p, yaml_node_t *v, void *obj)
{
    return parse_type_rate(p, v, &((struct ad_type_conf *)obj)->rate_limit);
}

static int type_group_rate(struct ad_ymap *p, yaml_node_t *v, void *obj)
{
    return parse_type_rate(p, v, &((struct ad_type_conf *)obj)->group_rate_limit);
}

static const struct field type_fields[] = {
    {"required", F_FN, 0, 0, 0, NULL, type_required},
    {"paused", F_BOOL, offsetof(struct ad_type_conf, paused), 0, 0, NULL, NULL},
    {"concurrency", F_INT, offsetof(struct ad_type_conf, concurrency), 1, 1000000, NULL, NULL},
    {"groupConcurrency", F_INT, offsetof(struct ad_type_conf, group_concurrency), 1, 1000000, NULL, NULL},
    {"rateLimit", F_FN, 0, 0, 0, NULL, type_rate},
    {"groupRateLimit", F_FN, 0, 0, 0, NULL, type_group_rate},
    {"maxAttempts", F_INT, offsetof(struct ad_type_conf, max_attempts), 1, 100, NULL, NULL},
    {"timeoutSeconds", F_INT, offsetof(struct ad_type_conf, timeout_seconds), 0, 604800, NULL, NULL},
    {"retention", F_MAP, offsetof(struct ad_type_conf, retention), 0, 0, retention_fields, NULL},
    {NULL},
};

static void free_types(struct ad_config *cfg)
{
    for (size_t i = 0; i < cfg->ntypes; i++) {
        struct ad_type_conf *t = &cfg->types[i];
        free(t->name);
        ad_ymap_free_strs(&t->required, &t->nrequired);
    }
    free(cfg->types);
    cfg->types = NULL;
    cfg->ntypes = 0;
}

static int top_types(struct ad_ymap *p, yaml_node_t *v, void *obj)
{
    struct ad_config *cfg = obj;
    if (!ad_ymap_is_null(v) && v->type != YAML_MAPPING_NODE)
        return ad_ymap_fail(p, v, "types: expected a mapping of type name to its settings");
    size_t n = ad_ymap_is_null(v) ? 0 : (size_t)(v->data.mapping.pairs.top - v->data.mapping.pairs.start);
    free_types(cfg);
    cfg->types = ad_calloc(n, sizeof *cfg->types);
    cfg->ntypes = n;
    for (size_t i = 0; i < n; i++) {
        yaml_node_pair_t *pair = &v->data.mapping.pairs.start[i];
        yaml_node_t *k = ad_ymap_node(p, pair->key), *tv = ad_ymap_node(p, pair->value);
        struct ad_type_conf *t = &cfg->types[i];
        /* -1 and 0 mark "not given": filled from the global retention and maxAttempts once the file is read. */
        t->retention = (struct ad_retention){-1, -1, -1, -1};
        const char *name = ad_ymap_text(p, k);
        if (name == NULL)
            return -1;
        if (k->data.scalar.length > MAX_TYPE_NAME)
            return ad_ymap_fail(p, k, "types: a type name is at most %d characters", MAX_TYPE_NAME);
        for (size_t j = 0; j < i; j++) {
            if (!strcmp(cfg->types[j].name, name))
                return ad_ymap_fail(p, k, "duplicate key '%.64s' in types", name);
        }
        t->name = ad_strdup(name);
        size_t mark = ad_ymap_push(p, name, 0);
        int rc = ad_ymap_is_null(tv) ? 0 : ad_ymap_parse_map(p, tv, type_fields, t);
        ad_ymap_pop(p, mark);
        if (rc < 0)
            return -1;
    }
    return 0;
}

/* routes[i] */

static int route_method(struct ad_ymap *p, yaml_node_t *v, void *obj)
{
    const char *s = ad_ymap_scalar(v);
    size_t len = s ? strlen(s) : 0;
    int ok = len > 0 && len <= 16;
    for (size_t i = 0; ok && i < len; i++)
        ok = s[i] >= 'A' && s[i] <= 'Z';
    if (!ok)
        return ad_ymap_fail(p, v, "%s: expected an upper-case HTTP method such as POST, got '%.64s'", p->where,
                            s ? s : "(not a scalar)");
    ad_ymap_replace_str(&((struct ad_route *)obj)->method, s);
    return 0;
}

/* A local path: starts with '/', no spaces, no query or fragment. */
static int is_path(const char *s)
{
    if (s == NULL || s[0] != '/')
        return 0;
    return strcspn(s, " ?#") == strlen(s);
}

static int route_path(struct ad_ymap *p, yaml_node_t *v, void *obj)
{
    const char *s = ad_ymap_text(p, v);
    if (s == NULL)
        return -1;
    if (!is_path(s))
        return ad_ymap_fail(p, v, "%s: expected a path starting with '/', without spaces, '?' or '#', got '%.64s'",
                            p->where, s);
    ad_ymap_replace_str(&((struct ad_route *)obj)->path, s);
    return 0;
}

static int route_resource(struct ad_ymap *p, yaml_node_t *v, void *obj)
{
    const char *s = ad_ymap_text(p, v);
    if (s == NULL)
        return -1;
    if (!is_path(s))
        return ad_ymap_fail(p, v, "%s: expected a path such as /v1/videos/{id}, got '%.64s'", p->where, s);
    ad_ymap_replace_str(&((struct ad_route *)obj)->resource, s);
    return 0;
}

/* A route option of two values: yes sets *flag, no clears it. */
static int route_choice(struct ad_ymap *p, yaml_node_t *v, int *flag, const char *yes, const char *no)
{
    const char *s = ad_ymap_scalar(v);
    if (s != NULL && !strcmp(s, yes))
        *flag = 1;
    else if (s != NULL && !strcmp(s, no))
        *flag = 0;
    else
        return ad_ymap_fail(p, v, "%s: expected %s or %s, got '%.64s'", p->where, yes, no, s ? s : "(not a scalar)");
    return 0;
}

static int route_on_complete(struct ad_ymap *p, yaml_node_t *v, void *obj)
{
    return route_choice(p, v, &((struct ad_route *)obj)->on_complete_redirect, "redirect", "inline");
}

/* style: job (202 with the job, the default) or operation (200 with the job as an AIP-151 Operation). */
static int route_style(struct ad_ymap *p, yaml_node_t *v, void *obj)
{
    return route_choice(p, v, &((struct ad_route *)obj)->style_operation, "operation", "job");
}

/* onPending: ok (the default) or accepted (the submit's Location answers 202 while the job is pending). */
static int route_on_pending(struct ad_ymap *p, yaml_node_t *v, void *obj)
{
    return route_choice(p, v, &((struct ad_route *)obj)->on_pending_accepted, "accepted", "ok");
}

static const struct field route_fields[] = {
    {"method", F_FN, 0, 0, 0, NULL, route_method},
    {"path", F_FN, 0, 0, 0, NULL, route_path},
    {"type", F_STR, offsetof(struct ad_route, type), 0, 0, NULL, NULL},
    {"resource", F_FN, 0, 0, 0, NULL, route_resource},
    {"onComplete", F_FN, 0, 0, 0, NULL, route_on_complete},
    {"requireIdempotencyKey", F_BOOL, offsetof(struct ad_route, require_idempotency_key), 0, 0, NULL, NULL},
    {"style", F_FN, 0, 0, 0, NULL, route_style},
    {"onPending", F_FN, 0, 0, 0, NULL, route_on_pending},
    {"azureAsyncOperation", F_BOOL, offsetof(struct ad_route, azure_async_operation), 0, 0, NULL, NULL},
    {"group", F_STR, offsetof(struct ad_route, group), 0, 0, NULL, NULL},
    {NULL},
};

static void free_routes(struct ad_config *cfg)
{
    for (size_t i = 0; i < cfg->nroutes; i++) {
        struct ad_route *r = &cfg->routes[i];
        free(r->method);
        free(r->path);
        free(r->type);
        free(r->resource);
        free(r->group);
    }
    free(cfg->routes);
    cfg->routes = NULL;
    cfg->nroutes = 0;
}

static int route_item(struct ad_ymap *p, yaml_node_t *item, size_t i, void *obj)
{
    struct ad_config *cfg = obj;
    struct load *l = p->ctx;
    struct ad_route *r = &cfg->routes[i];
    if (ad_ymap_parse_map(p, item, route_fields, r) < 0)
        return -1;
    if (r->method == NULL || r->path == NULL || r->type == NULL)
        return ad_ymap_fail(p, item, "%s: 'method', 'path' and 'type' are required", p->where);
    for (size_t j = 0; j < i; j++) {
        if (!strcmp(cfg->routes[j].method, r->method) && !strcmp(cfg->routes[j].path, r->path))
            return ad_ymap_fail(p, item, "%s: %s %s is already routed by routes[%zu]", p->where, r->method, r->path, j);
    }
    l->route_lines[i] = (int)ad_ymap_get(p, item, "type")->start_mark.line + 1;
    return 0;
}

static int top_routes(struct ad_ymap *p, yaml_node_t *v, void *obj)
{
    struct ad_config *cfg = obj;
    struct load *l = p->ctx;
    long n = ad_ymap_list_len(p, v);
    if (n < 0)
        return -1;
    free_routes(cfg);
    cfg->routes = ad_calloc((size_t)n, sizeof *cfg->routes);
    cfg->nroutes = (size_t)n;
    free(l->route_lines);
    l->route_lines = ad_calloc((size_t)n, sizeof *l->route_lines);
    l->nroute_lines = (size_t)n;
    return ad_ymap_each(p, v, n, route_item, cfg);
}

/* Top level */

static int top_listen(struct ad_ymap *p, yaml_node_t *v, void *obj)
{
    const char *s = ad_ymap_scalar(v);
    if (s == NULL || ad_config_set_listen(obj, s) < 0)
        return ad_ymap_fail(p, v, "listen: expected HOST:PORT, \"[IPv6]:PORT\" or :PORT, got '%.64s'",
                            s ? s : "(not a scalar)");
    return 0;
}

static int top_data(struct ad_ymap *p, yaml_node_t *v, void *obj)
{
    const char *s = ad_ymap_text(p, v);
    return s == NULL ? -1 : ad_config_set_data(obj, s);
}

static int top_public_url(struct ad_ymap *p, yaml_node_t *v, void *obj)
{
    if (ad_ymap_is_null(v)) {
        ad_ymap_replace_str(&((struct ad_config *)obj)->public_url, NULL);
        return 0;
    }
    const char *s = ad_ymap_scalar(v);
    if (s == NULL || ad_config_set_public_url(obj, s) < 0)
        return ad_ymap_fail(p, v,
                            "publicUrl: expected an http:// or https:// URL without query or fragment, got '%.64s'",
                            s ? s : "(not a scalar)");
    return 0;
}

static int limits_rate(struct ad_ymap *p, yaml_node_t *v, void *obj)
{
    return parse_rate(p, v, &((struct ad_config *)obj)->rate_limit);
}

static const struct field limits_fields[] = {
    {"maxBodyBytes", F_SIZE, offsetof(struct ad_config, max_body_bytes), 1, 1 << 30, NULL, NULL},
    {"maxUploadPartBytes", F_SIZE, offsetof(struct ad_config, max_upload_part_bytes), 1, 1 << 30, NULL, NULL},
    {"maxResultBytes", F_SIZE, offsetof(struct ad_config, max_result_bytes), 1, 1LL << 50, NULL, NULL},
    {"maxWaitSeconds", F_INT, offsetof(struct ad_config, max_wait_seconds), 0, 3600, NULL, NULL},
    {"maxConnections", F_INT, offsetof(struct ad_config, max_connections), 1, 1000000, NULL, NULL},
    {"cacheBytes", F_SIZE, offsetof(struct ad_config, cache_bytes), 1 << 20, 1LL << 40, NULL, NULL},
    {"scheduledTimers", F_SIZE, offsetof(struct ad_config, scheduled_timers), 1, 100000000, NULL, NULL},
    {"maxQueuedWrites", F_SIZE, offsetof(struct ad_config, max_queued_writes), 1, 100000000, NULL, NULL},
    {"maxUnsentBytesPerConnection", F_SIZE, offsetof(struct ad_config, max_unsent_per_conn), 1 << 20, 1LL << 40, NULL,
     NULL},
    {"maxUnsentBytes", F_SIZE, offsetof(struct ad_config, max_unsent), 1 << 20, 1LL << 40, NULL, NULL},
    {"unsentStall", F_DURATION, offsetof(struct ad_config, unsent_stall_ms), 1000, 3600 * 1000, NULL, NULL},
    {"rateLimit", F_FN, 0, 0, 0, NULL, limits_rate},
    {NULL},
};

/* webhooks */

static int check_network(struct ad_ymap *p, yaml_node_t *item, const char *s)
{
    struct ad_cidr net;
    if (ad_cidr_parse(s, &net) != 0)
        return ad_ymap_fail(p, item,
                            "%s: expected a network such as 127.0.0.0/8 or ::1/128 (host bits zero), got '%.64s'",
                            p->where, s);
    return 0;
}

static int webhooks_allow(struct ad_ymap *p, yaml_node_t *v, void *obj)
{
    struct ad_webhooks_conf *w = obj;
    return parse_strs(p, v, (struct strs){&w->allow_networks, &w->nallow_networks, check_network});
}

static int schedule_item(struct ad_ymap *p, yaml_node_t *item, size_t i, void *obj)
{
    int64_t *ms = obj;
    const char *s = ad_ymap_scalar(item);
    if (s == NULL || ad_parse_duration_ms(s, &ms[i]) < 0 || ms[i] > 7 * 86400 * (int64_t)1000)
        return ad_ymap_fail(p, item, "%s: expected seconds (or a duration such as 500ms, 5m) up to 7d, got '%.64s'",
                            p->where, s ? s : "(not a scalar)");
    return 0;
}

static int webhooks_schedule(struct ad_ymap *p, yaml_node_t *v, void *obj)
{
    struct ad_webhooks_conf *w = obj;
    long n = ad_ymap_list_len(p, v);
    if (n < 0)
        return -1;
    if (n < 1 || n > 100)
        return ad_ymap_fail(p, v, "%s: expected a list of 1 to 100 delays", p->where);
    int64_t *ms = ad_calloc((size_t)n, sizeof *ms);
    if (ad_ymap_each(p, v, n, schedule_item, ms) < 0) {
        free(ms);
        return -1;
    }
    free(w->retry_schedule_ms);
    w->retry_schedule_ms = ms;
    w->nretry_schedule = (size_t)n;
    return 0;
}

static int webhooks_secret_key(struct ad_ymap *p, yaml_node_t *v, void *obj)
{
    /* A secret: errors describe it, never quote it. */
    const char *s = ad_ymap_scalar(v);
    uint8_t key[AD_SEAL_KEY_BYTES];
    if (s == NULL || ad_seal_key_parse(s, key) != 0)
        return ad_ymap_fail(p, v, "%s: expected base64 of 32 bytes (openssl rand -base64 32)", p->where);
    ad_ymap_replace_str(&((struct ad_webhooks_conf *)obj)->secret_key, s);
    return 0;
}

static const struct field webhooks_fields[] = {
    {"allowNetworks", F_FN, 0, 0, 0, NULL, webhooks_allow},
    {"retrySchedule", F_FN, 0, 0, 0, NULL, webhooks_schedule},
    {"timeoutSeconds", F_INT, offsetof(struct ad_webhooks_conf, timeout_seconds), 1, 300, NULL, NULL},
    {"headersTimeoutSeconds", F_INT, offsetof(struct ad_webhooks_conf, headers_timeout_seconds), 1, 300, NULL, NULL},
    {"maxResponseBytes", F_SIZE, offsetof(struct ad_webhooks_conf, max_response_bytes), 1024, 1 << 30, NULL, NULL},
    {"concurrency", F_INT, offsetof(struct ad_webhooks_conf, concurrency), 1, 1024, NULL, NULL},
    {"perEndpoint", F_INT, offsetof(struct ad_webhooks_conf, per_endpoint), 1, 1024, NULL, NULL},
    {"secretKey", F_FN, 0, 0, 0, NULL, webhooks_secret_key},
    {"caFile", F_STR, offsetof(struct ad_webhooks_conf, ca_file), 0, 0, NULL, NULL},
    {"http2", F_BOOL, offsetof(struct ad_webhooks_conf, http2), 0, 0, NULL, NULL},
    {"keepDeliveries", F_DURATION, offsetof(struct ad_webhooks_conf, keep_ms), 1, MAX_DURATION_MS, NULL, NULL},
    {"rotationGrace", F_DURATION, offsetof(struct ad_webhooks_conf, rotation_grace_ms), 0, 7 * 86400 * (int64_t)1000,
     NULL, NULL},
    {NULL},
};

static const struct field sse_fields[] = {
    {"heartbeat", F_DURATION, offsetof(struct ad_sse_conf, heartbeat_ms), 100, 3600 * 1000, NULL, NULL},
    {"retry", F_DURATION, offsetof(struct ad_sse_conf, retry_ms), 100, 3600 * 1000, NULL, NULL},
    {"overloadRetry", F_DURATION, offsetof(struct ad_sse_conf, overload_retry_ms), 100, 3600 * 1000, NULL, NULL},
    {"backlogBytes", F_SIZE, offsetof(struct ad_sse_conf, backlog_bytes), 1024, 64 << 20, NULL, NULL},
    {"maxStreams", F_INT, offsetof(struct ad_sse_conf, max_streams), 0, 10000000, NULL, NULL},
    {"maxStreamsPerTenant", F_INT, offsetof(struct ad_sse_conf, max_streams_per_tenant), 0, 10000000, NULL, NULL},
    {"ioUring", F_BOOL, offsetof(struct ad_sse_conf, io_uring), 0, 0, NULL, NULL},
    {NULL},
};

static int log_format(struct ad_ymap *p, yaml_node_t *v, void *obj)
{
    const char *s = ad_ymap_scalar(v);
    if (s == NULL || (strcmp(s, "text") != 0 && strcmp(s, "json") != 0))
        return ad_ymap_fail(p, v, "%s: expected text or json, got '%.64s'", p->where, s ? s : "(not a scalar)");
    ((struct ad_log_conf *)obj)->json = strcmp(s, "json") == 0;
    return 0;
}

static const struct field log_fields[] = {
    {"accessLog", F_BOOL, offsetof(struct ad_log_conf, access_log), 0, 0, NULL, NULL},
    {"format", F_FN, 0, 0, 0, NULL, log_format},
    {NULL},
};

static const struct field artifacts_fields[] = {
    {"urlLifetime", F_DURATION, offsetof(struct ad_artifacts_conf, url_lifetime_ms), 1000, 7 * 86400 * (int64_t)1000,
     NULL, NULL},
    {"gcInterval", F_DURATION, offsetof(struct ad_artifacts_conf, gc_interval_ms), 100, MAX_DURATION_MS, NULL, NULL},
    {NULL, 0, 0, 0, 0, NULL, NULL},
};

static const struct field tls_fields[] = {
    {"cert", F_STR, offsetof(struct ad_tls_conf, cert), 0, 0, NULL, NULL},
    {"key", F_STR, offsetof(struct ad_tls_conf, key), 0, 0, NULL, NULL},
    {NULL},
};

static int http_url(const char *s)
{
    return s != NULL && (strncmp(s, "http://", 7) == 0 || strncmp(s, "https://", 8) == 0) && strlen(s) > 8 &&
           ad_ymap_clean_text(s, strlen(s)) && strchr(s, ' ') == NULL;
}

static int tracing_endpoint(struct ad_ymap *p, yaml_node_t *v, void *obj)
{
    const char *s = ad_ymap_scalar(v);
    if (!http_url(s))
        return ad_ymap_fail(p, v, "tracing.otlpEndpoint: expected the collector's http:// or https:// URL, got '%.64s'",
                            s ? s : "(not a scalar)");
    ad_ymap_replace_str(&((struct ad_tracing_conf *)obj)->otlp_endpoint, s);
    return 0;
}

static int tracing_viewer(struct ad_ymap *p, yaml_node_t *v, void *obj)
{
    const char *s = ad_ymap_scalar(v);
    if (!http_url(s) || strstr(s, "{traceId}") == NULL || strpbrk(s, "\"<>") != NULL)
        return ad_ymap_fail(p, v, "tracing.viewerUrl: expected an http:// or https:// URL with {traceId} in it");
    ad_ymap_replace_str(&((struct ad_tracing_conf *)obj)->viewer_url, s);
    return 0;
}

static int tracing_ratio(struct ad_ymap *p, yaml_node_t *v, void *obj)
{
    const char *s = ad_ymap_scalar(v);
    char *end = NULL;
    double r = s != NULL && *s != '\0' ? strtod(s, &end) : -1;
    if (end == NULL || *end != '\0' || !(r >= 0 && r <= 1))
        return ad_ymap_fail(p, v, "tracing.sampleRatio: expected a number from 0 to 1, got '%.64s'",
                            s ? s : "(not a scalar)");
    ((struct ad_tracing_conf *)obj)->sample_ratio = r;
    return 0;
}

/* headers: a mapping of header names to values, sent with every export (an API key); values are secrets, never
 * quoted in errors. */
static int tracing_headers(struct ad_ymap *p, yaml_node_t *v, void *obj)
{
    struct ad_tracing_conf *t = obj;
    if (v->type != YAML_MAPPING_NODE)
        return ad_ymap_fail(p, v, "tracing.headers: expected a mapping of header names to values");
    ad_ymap_free_strs(&t->headers, &t->nheaders);
    for (yaml_node_pair_t *pr = v->data.mapping.pairs.start; pr < v->data.mapping.pairs.top; pr++) {
        yaml_node_t *k = ad_ymap_node(p, pr->key), *val = ad_ymap_node(p, pr->value);
        const char *name = ad_ymap_scalar(k), *value = ad_ymap_scalar(val);
        int ok = name != NULL && *name != '\0' && value != NULL && ad_ymap_clean_text(value, strlen(value));
        for (const char *c = name; ok && *c != '\0'; c++)
            ok = *c > 0x20 && *c < 0x7f && strchr("()<>@,;:\\\"/[]?={}", *c) == NULL;
        if (!ok)
            return ad_ymap_fail(p, k, "tracing.headers: expected header names (tokens) with printable values");
        t->headers = ad_realloc(t->headers, (t->nheaders + 1) * sizeof(*t->headers));
        t->headers[t->nheaders++] = ad_asprintf("%s: %s", name, value);
    }
    return 0;
}

static const struct field tracing_fields[] = {
    {"otlpEndpoint", F_FN, 0, 0, 0, NULL, tracing_endpoint},
    {"headers", F_FN, 0, 0, 0, NULL, tracing_headers},
    {"sampleRatio", F_FN, 0, 0, 0, NULL, tracing_ratio},
    {"viewerUrl", F_FN, 0, 0, 0, NULL, tracing_viewer},
    {NULL},
};

static int top_signing_key(struct ad_ymap *p, yaml_node_t *v, void *obj)
{
    /* A secret: errors describe it, never quote it. */
    const char *s = ad_ymap_text(p, v);
    if (s == NULL)
        return -1;
    if (strlen(s) < 32)
        return ad_ymap_fail(p, v, "signingKey: expected at least 32 characters");
    ad_ymap_replace_str(&((struct ad_config *)obj)->signing_key, s);
    return 0;
}

static int store_postgres(struct ad_ymap *p, yaml_node_t *v, void *obj)
{
    /* May hold a password: errors describe it, never quote it. */
    const char *s = ad_ymap_scalar(v);
    if (s == NULL || ad_config_set_store(obj, s) < 0)
        return ad_ymap_fail(p, v, "store.postgres: expected a postgresql:// connection URL");
    return 0;
}

static const struct field store_fields[] = {
    {"postgres", F_FN, 0, 0, 0, NULL, store_postgres},
    {NULL},
};

static const struct field top_fields[] = {
    {"listen", F_FN, 0, 0, 0, NULL, top_listen},
    {"data", F_FN, 0, 0, 0, NULL, top_data},
    {"store", F_MAP, 0, 0, 0, store_fields, NULL},
    {"publicUrl", F_FN, 0, 0, 0, NULL, top_public_url},
    {"keys", F_FN, 0, 0, 0, NULL, top_keys},
    {"types", F_FN, 0, 0, 0, NULL, top_types},
    {"routes", F_FN, 0, 0, 0, NULL, top_routes},
    {"retention", F_MAP, offsetof(struct ad_config, retention), 0, 0, retention_fields, NULL},
    {"tombstone", F_DURATION, offsetof(struct ad_config, tombstone_ms), 0, MAX_DURATION_MS, NULL, NULL},
    {"idempotencyTtl", F_DURATION, offsetof(struct ad_config, idempotency_ttl_ms), 1, MAX_DURATION_MS, NULL, NULL},
    {"sweepInterval", F_DURATION, offsetof(struct ad_config, sweep_interval_ms), 1, MAX_DURATION_MS, NULL, NULL},
    {"maxAttempts", F_INT, offsetof(struct ad_config, default_max_attempts), 1, 100, NULL, NULL},
    {"retryBackoff", F_DURATION, offsetof(struct ad_config, retry_backoff_ms), 1, MAX_DURATION_MS, NULL, NULL},
    {"limits", F_MAP, 0, 0, 0, limits_fields, NULL},
    {"webhooks", F_MAP, offsetof(struct ad_config, webhooks), 0, 0, webhooks_fields, NULL},
    {"sse", F_MAP, offsetof(struct ad_config, sse), 0, 0, sse_fields, NULL},
    {"tls", F_MAP, offsetof(struct ad_config, tls), 0, 0, tls_fields, NULL},
    {"log", F_MAP, offsetof(struct ad_config, log), 0, 0, log_fields, NULL},
    {"artifacts", F_MAP, offsetof(struct ad_config, artifacts), 0, 0, artifacts_fields, NULL},
    {"signingKey", F_FN, 0, 0, 0, NULL, top_signing_key},
    {"tracing", F_MAP, offsetof(struct ad_config, tracing), 0, 0, tracing_fields, NULL},
    {NULL},
};

/* Checks that need the whole file: fallbacks from global settings, limits that bound one another, and routes
 * naming configured types. */
static int finish(struct ad_ymap *p)
{
    struct load *l = p->ctx;
    struct ad_config *cfg = l->cfg;
    if (cfg->max_unsent_per_conn > cfg->max_unsent)
        return ad_ymap_fail(
            p, NULL, "limits.maxUnsentBytesPerConnection (%zu) must not be more than limits.maxUnsentBytes (%zu)",
            cfg->max_unsent_per_conn, cfg->max_unsent);
    for (size_t i = 0; i < cfg->ntypes; i++) {
        struct ad_type_conf *t = &cfg->types[i];
        struct ad_retention *r = &t->retention;
        if (r->succeeded_ms < 0)
            r->succeeded_ms = cfg->retention.succeeded_ms;
        if (r->failed_ms < 0)
            r->failed_ms = cfg->retention.failed_ms;
        if (r->cancelled_ms < 0)
            r->cancelled_ms = cfg->retention.cancelled_ms;
        if (r->partial_ms < 0)
            r->partial_ms = cfg->retention.partial_ms;
        if (t->max_attempts == 0)
            t->max_attempts = cfg->default_max_attempts;
    }
    if (cfg->ntypes == 0)
        return 0;
    for (size_t i = 0; i < cfg->nroutes; i++) {
        if (ad_config_type(cfg, cfg->routes[i].type) != NULL)
            continue;
        if (i < l->nroute_lines)
            snprintf(p->err, p->errlen, "%s:%d: routes[%zu].type: '%.64s' is not one of the configured types", p->file,
                     l->route_lines[i], i, cfg->routes[i].type);
        else
            ad_ymap_fail(p, NULL, "routes[%zu].type: '%.64s' is not one of the configured types", i,
                         cfg->routes[i].type);
        return -1;
    }
    return 0;
}

static int load(struct ad_config *cfg, yaml_parser_t *parser, const char *file, char *err, size_t errlen)
{
    struct load l = {.cfg = cfg};
    struct ad_ymap p = {.file = file, .err = err, .errlen = errlen, .ctx = &l};
    int rc = ad_ymap_walk(&p, parser, top_fields, cfg);
    if (rc == 0)
        rc = finish(&p);
    free(l.route_lines);
    return rc;
}

int ad_config_load_string(struct ad_config *cfg, const char *yaml, size_t len, char *err, size_t errlen)
{
    yaml_parser_t parser;
    if (!yaml_parser_initialize(&parser))
        abort(); /* only allocation can fail here */
    yaml_parser_set_input_string(&parser, (const unsigned char *)yaml, len);
    int rc = load(cfg, &parser, "<config>", err, errlen);
    yaml_parser_delete(&parser);
    return rc;
}

int ad_config_load_file(struct ad_config *cfg, const char *path, char *err, size_t errlen)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return -1;
    }
    yaml_parser_t parser;
    if (!yaml_parser_initialize(&parser))
        abort();
    yaml_parser_set_input_file(&parser, f);
    int rc = load(cfg, &parser, path, err, errlen);
    yaml_parser_delete(&parser);
    fclose(f);
    return rc;
}

void ad_config_free(struct ad_config *cfg)
{
    free(cfg->listen_host);
    free(cfg->data_dir);
    free(cfg->store);
    free(cfg->public_url);
    free_keys(cfg);
    free_types(cfg);
    free_routes(cfg);
    ad_ymap_free_strs(&cfg->webhooks.allow_networks, &cfg->webhooks.nallow_networks);
    free(cfg->webhooks.retry_schedule_ms);
    free(cfg->webhooks.secret_key);
    free(cfg->webhooks.ca_file);
    free(cfg->tls.cert);
    free(cfg->tls.key);
    free(cfg->signing_key);
    free(cfg->tracing.otlp_endpoint);
    ad_ymap_free_strs(&cfg->tracing.headers, &cfg->tracing.nheaders);
    free(cfg->tracing.viewer_url);
    memset(cfg, 0, sizeof *cfg);
}
