/*
 * config.c - defaults, the YAML config file, ACCEPTD_* environment variables and listen-address parsing.
 *
 * The file is read with libyaml's document API and walked with small tables: each mapping the format
 * allows has one table of its keys (name, kind, where the value goes). A key that is not in the table is an
 * error, never ignored, so a typo such as `maxAtempts` stops the daemon instead of silently keeping a
 * default. Every error names the file and line.
 *
 * Lists in the file (keys, types, routes) replace what cfg held; scalars override one by one. On an error
 * cfg is left partly merged but always safe to pass to ad_config_free, which is all a caller should do then.
 */
#include "core/config.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <errno.h>
#include <yaml.h>

#include "common/sign.h"
#include "common/cidr.h"
#include "common/util.h"

/* Longest duration accepted anywhere: 100 years keeps finishedAt + retention far from int64 overflow. */
#define MAX_DURATION_MS ((int64_t)36500 * 86400 * 1000)
#define MAX_TYPE_NAME 128

struct parse {
    const char *file;
    yaml_document_t *doc;
    struct ad_config *cfg;
    char *err;
    size_t errlen;
    char where[256];  /* dotted path of the value being read: "routes[0].type", "" at the top */
    int *route_lines; /* line of each route's `type` in this file, for the check that runs after all keys */
    size_t nroute_lines;
};

static int fail(struct parse *p, const yaml_node_t *node, const char *fmt, ...) AD_PRINTF(3, 4);

static int fail(struct parse *p, const yaml_node_t *node, const char *fmt, ...)
{
    size_t n = 0;
    if (p->errlen == 0)
        return -1;
    if (node != NULL)
        n = (size_t)snprintf(p->err, p->errlen, "%s:%zu: ", p->file, (size_t)node->start_mark.line + 1);
    else
        n = (size_t)snprintf(p->err, p->errlen, "%s: ", p->file);
    if (n < p->errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(p->err + n, p->errlen - n, fmt, ap);
        va_end(ap);
    }
    return -1;
}

/* Extend the path with ".name" (or "[i]" when name is NULL); returns what path_pop restores. */
static size_t path_push(struct parse *p, const char *name, size_t index)
{
    size_t len = strlen(p->where);
    if (name == NULL)
        snprintf(p->where + len, sizeof p->where - len, "[%zu]", index);
    else
        snprintf(p->where + len, sizeof p->where - len, "%s%s", len ? "." : "", name);
    return len;
}

static void path_pop(struct parse *p, size_t len)
{
    p->where[len] = '\0';
}

static yaml_node_t *node_at(struct parse *p, int index)
{
    return yaml_document_get_node(p->doc, index);
}

/* An empty plain value, `~` or `null`: YAML's ways of writing "nothing here". */
static int is_null(const yaml_node_t *n)
{
    if (n->type != YAML_SCALAR_NODE || n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
        return 0;
    const char *v = (const char *)n->data.scalar.value;
    return !strcmp(v, "") || !strcmp(v, "~") || !strcmp(v, "null") || !strcmp(v, "Null") || !strcmp(v, "NULL");
}

/* The text of a scalar, or NULL for a mapping or sequence. */
static const char *scalar(const yaml_node_t *n)
{
    return n->type == YAML_SCALAR_NODE ? (const char *)n->data.scalar.value : NULL;
}

/* Config strings end up in headers, paths and log lines: no control characters, no embedded NUL. */
static int clean_text(const char *s, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x20 || c == 0x7f)
            return 0;
    }
    return 1;
}

/* A non-empty scalar without control characters; NULL after reporting the error otherwise. */
static const char *text(struct parse *p, const yaml_node_t *n)
{
    const char *s = scalar(n);
    if (s == NULL || is_null(n) || s[0] == '\0') {
        fail(p, n, "%s: expected a non-empty string", p->where);
        return NULL;
    }
    if (!clean_text(s, n->data.scalar.length)) {
        fail(p, n, "%s: control characters are not allowed", p->where);
        return NULL;
    }
    return s;
}

static void replace_str(char **slot, const char *s)
{
    free(*slot);
    *slot = s ? ad_strdup(s) : NULL;
}

/*
 * The tables. A field's value is written at `offset` inside the object the table describes; F_MAP descends
 * into a nested mapping whose own table is `sub`; F_FN hands the value node to a function.
 */
typedef int (*field_fn)(struct parse *p, yaml_node_t *value, void *obj);

enum field_kind {
    F_STR,      /* char *, non-empty, replaced */
    F_INT,      /* int within [min, max] */
    F_SIZE,     /* size_t within [min, max] */
    F_DURATION, /* int64_t milliseconds within [min, max], written "30", "500ms", "10s", "5m", "2h", "30d" */
    F_BOOL,     /* int 0/1, written true/false */
    F_MAP,      /* nested mapping described by sub */
    F_FN,       /* anything else */
};

struct field {
    const char *name;
    enum field_kind kind;
    size_t offset;
    long long min, max;
    const struct field *sub;
    field_fn fn;
};

static int parse_map(struct parse *p, yaml_node_t *map, const struct field *fields, void *obj);

static int set_field(struct parse *p, const struct field *f, yaml_node_t *v, void *obj)
{
    void *slot = (char *)obj + f->offset;
    const char *s = scalar(v);
    long long n;
    int64_t ms;

    switch (f->kind) {
    case F_STR:
        if ((s = text(p, v)) == NULL)
            return -1;
        replace_str(slot, s);
        return 0;
    case F_INT:
    case F_SIZE:
        if (s == NULL || ad_parse_int(s, strlen(s), f->min, f->max, &n) < 0)
            return fail(p, v, "%s: expected an integer from %lld to %lld, got '%.64s'", p->where, f->min, f->max,
                        s ? s : "(not a scalar)");
        if (f->kind == F_INT)
            *(int *)slot = (int)n;
        else
            *(size_t *)slot = (size_t)n;
        return 0;
    case F_DURATION:
        if (s == NULL || ad_parse_duration_ms(s, &ms) < 0 || ms < f->min || ms > f->max)
            return fail(p, v, "%s: expected a duration such as 30, 500ms, 10s, 5m, 2h or 30d%s, got '%.64s'", p->where,
                        f->min > 0 ? " (more than 0)" : "", s ? s : "(not a scalar)");
        *(int64_t *)slot = ms;
        return 0;
    case F_BOOL:
        if (s != NULL && (!strcmp(s, "true") || !strcmp(s, "True") || !strcmp(s, "TRUE")))
            *(int *)slot = 1;
        else if (s != NULL && (!strcmp(s, "false") || !strcmp(s, "False") || !strcmp(s, "FALSE")))
            *(int *)slot = 0;
        else
            return fail(p, v, "%s: expected true or false, got '%.64s'", p->where, s ? s : "(not a scalar)");
        return 0;
    case F_MAP:
        return parse_map(p, v, f->sub, slot);
    case F_FN:
        return f->fn(p, v, obj);
    }
    return -1;
}

static const char *where_suffix(struct parse *p)
{
    return p->where[0] ? p->where : "the top level";
}

static int parse_map(struct parse *p, yaml_node_t *map, const struct field *fields, void *obj)
{
    if (map->type != YAML_MAPPING_NODE)
        return fail(p, map, "expected a mapping in %s", where_suffix(p));

    for (yaml_node_pair_t *pair = map->data.mapping.pairs.start; pair < map->data.mapping.pairs.top; pair++) {
        yaml_node_t *k = node_at(p, pair->key), *v = node_at(p, pair->value);
        const char *name = scalar(k);
        if (name == NULL)
            return fail(p, k, "expected a plain key in %s", where_suffix(p));
        /* libyaml keeps repeated keys; the second one would silently win. */
        for (yaml_node_pair_t *prev = map->data.mapping.pairs.start; prev < pair; prev++) {
            const char *pname = scalar(node_at(p, prev->key));
            if (pname != NULL && !strcmp(pname, name))
                return fail(p, k, "duplicate key '%.64s' in %s", name, where_suffix(p));
        }
        const struct field *f = fields;
        while (f->name != NULL && strcmp(f->name, name) != 0)
            f++;
        if (f->name == NULL)
            return fail(p, k, "unknown key '%.64s' in %s", name, where_suffix(p));

        size_t mark = path_push(p, name, 0);
        int rc = set_field(p, f, v, obj);
        path_pop(p, mark);
        if (rc < 0)
            return -1;
    }
    return 0;
}

/* Look up a key of a mapping node; NULL when absent. */
static yaml_node_t *map_get(struct parse *p, yaml_node_t *map, const char *name)
{
    for (yaml_node_pair_t *pair = map->data.mapping.pairs.start; pair < map->data.mapping.pairs.top; pair++) {
        const char *k = scalar(node_at(p, pair->key));
        if (k != NULL && !strcmp(k, name))
            return node_at(p, pair->value);
    }
    return NULL;
}

/* A list value: a sequence, or nothing at all (an empty list). Returns the item count or -1. */
static long list_len(struct parse *p, yaml_node_t *v)
{
    if (is_null(v))
        return 0;
    if (v->type != YAML_SEQUENCE_NODE)
        return fail(p, v, "%s: expected a list", p->where);
    return (long)(v->data.sequence.items.top - v->data.sequence.items.start);
}

/* Retention per terminal state; a type's missing entries fall back to the global ones after the file is read. */
static const struct field retention_fields[] = {
    {"succeeded", F_DURATION, offsetof(struct ad_retention, succeeded_ms), 0, MAX_DURATION_MS, NULL, NULL},
    {"failed", F_DURATION, offsetof(struct ad_retention, failed_ms), 0, MAX_DURATION_MS, NULL, NULL},
    {"cancelled", F_DURATION, offsetof(struct ad_retention, cancelled_ms), 0, MAX_DURATION_MS, NULL, NULL},
    {"partialSuccess", F_DURATION, offsetof(struct ad_retention, partial_ms), 0, MAX_DURATION_MS, NULL, NULL},
    {NULL},
};

/* keys[i] */

static int key_role(struct parse *p, yaml_node_t *v, void *obj)
{
    static const struct {
        const char *name;
        enum ad_role role;
    } roles[] = {{"client", AD_ROLE_CLIENT}, {"worker", AD_ROLE_WORKER}, {"admin", AD_ROLE_ADMIN}};
    const char *s = scalar(v);
    for (size_t i = 0; s != NULL && i < sizeof roles / sizeof roles[0]; i++) {
        if (!strcmp(s, roles[i].name)) {
            ((struct ad_key *)obj)->role = roles[i].role;
            return 0;
        }
    }
    return fail(p, v, "%s: expected client, worker or admin, got '%.64s'", p->where, s ? s : "(not a scalar)");
}

static int key_secret(struct parse *p, yaml_node_t *v, void *obj)
{
    /* The value is a secret: errors describe it, never quote it. */
    const char *s = scalar(v);
    if (s == NULL || is_null(v) || s[0] == '\0')
        return fail(p, v, "%s: expected a non-empty string", p->where);
    for (size_t i = 0; i < v->data.scalar.length; i++) {
        if ((unsigned char)s[i] <= 0x20 || (unsigned char)s[i] >= 0x7f)
            return fail(p, v, "%s: a key must be printable ASCII without spaces (it is sent as a Bearer token)",
                        p->where);
    }
    replace_str(&((struct ad_key *)obj)->key, s);
    return 0;
}

/* limits.rateLimit and keys[i].rateLimit: { requests: N, window: DURATION }. */
static const struct field rate_fields[] = {
    {"requests", F_INT, offsetof(struct ad_rate, requests), 0, 1000000000, NULL, NULL},
    {"window", F_DURATION, offsetof(struct ad_rate, window_ms), 1000, 86400 * (int64_t)1000, NULL, NULL},
    {NULL},
};

static int parse_rate(struct parse *p, yaml_node_t *v, struct ad_rate *r)
{
    *r = (struct ad_rate){0};
    if (parse_map(p, v, rate_fields, r) < 0)
        return -1;
    if (r->requests > 0 && r->window_ms == 0)
        return fail(p, v, "%s: 'window' is required with 'requests'", p->where);
    if (r->window_ms % 1000 != 0)
        return fail(p, v, "%s: 'window' must be a whole number of seconds", p->where);
    r->set = 1;
    return 0;
}

static int key_rate(struct parse *p, yaml_node_t *v, void *obj)
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

static int top_keys(struct parse *p, yaml_node_t *v, void *obj)
{
    struct ad_config *cfg = obj;
    long n = list_len(p, v);
    if (n < 0)
        return -1;
    free_keys(cfg);
    cfg->keys = ad_calloc((size_t)n, sizeof *cfg->keys);
    cfg->nkeys = (size_t)n;
    for (long i = 0; i < n; i++) {
        yaml_node_t *item = node_at(p, v->data.sequence.items.start[i]);
        struct ad_key *k = &cfg->keys[i];
        size_t mark = path_push(p, NULL, (size_t)i);
        int rc = parse_map(p, item, key_fields, k);
        if (rc == 0 && (k->key == NULL || k->tenant == NULL || k->role == 0))
            rc = fail(p, item, "%s: 'key', 'tenant' and 'role' are required", p->where);
        for (long j = 0; rc == 0 && j < i; j++) {
            if (!strcmp(cfg->keys[j].key, k->key))
                rc = fail(p, item, "%s: the same key as keys[%ld]; keys must be unique", p->where, j);
        }
        path_pop(p, mark);
        if (rc < 0)
            return -1;
    }
    return 0;
}

/* types.NAME */

static int type_required(struct parse *p, yaml_node_t *v, void *obj)
{
    struct ad_type_conf *t = obj;
    long n = list_len(p, v);
    if (n < 0)
        return -1;
    for (size_t i = 0; i < t->nrequired; i++)
        free(t->required[i]);
    free(t->required);
    t->required = ad_calloc((size_t)n, sizeof *t->required);
    t->nrequired = 0;
    for (long i = 0; i < n; i++) {
        yaml_node_t *item = node_at(p, v->data.sequence.items.start[i]);
        size_t mark = path_push(p, NULL, (size_t)i);
        const char *s = text(p, item);
        path_pop(p, mark);
        if (s == NULL)
            return -1;
        t->required[t->nrequired++] = ad_strdup(s);
    }
    return 0;
}

static const struct field type_fields[] = {
    {"required", F_FN, 0, 0, 0, NULL, type_required},
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
        for (size_t j = 0; j < t->nrequired; j++)
            free(t->required[j]);
        free(t->required);
    }
    free(cfg->types);
    cfg->types = NULL;
    cfg->ntypes = 0;
}

static int top_types(struct parse *p, yaml_node_t *v, void *obj)
{
    struct ad_config *cfg = obj;
    if (!is_null(v) && v->type != YAML_MAPPING_NODE)
        return fail(p, v, "types: expected a mapping of type name to its settings");
    size_t n = is_null(v) ? 0 : (size_t)(v->data.mapping.pairs.top - v->data.mapping.pairs.start);
    free_types(cfg);
    cfg->types = ad_calloc(n, sizeof *cfg->types);
    cfg->ntypes = n;
    for (size_t i = 0; i < n; i++) {
        yaml_node_pair_t *pair = &v->data.mapping.pairs.start[i];
        yaml_node_t *k = node_at(p, pair->key), *tv = node_at(p, pair->value);
        struct ad_type_conf *t = &cfg->types[i];
        /* -1 and 0 mark "not given": filled from the global retention and maxAttempts once the file is read. */
        t->retention = (struct ad_retention){-1, -1, -1, -1};
        const char *name = text(p, k);
        if (name == NULL)
            return -1;
        if (k->data.scalar.length > MAX_TYPE_NAME)
            return fail(p, k, "types: a type name is at most %d characters", MAX_TYPE_NAME);
        for (size_t j = 0; j < i; j++) {
            if (!strcmp(cfg->types[j].name, name))
                return fail(p, k, "duplicate key '%.64s' in types", name);
        }
        t->name = ad_strdup(name);
        size_t mark = path_push(p, name, 0);
        int rc = is_null(tv) ? 0 : parse_map(p, tv, type_fields, t);
        path_pop(p, mark);
        if (rc < 0)
            return -1;
    }
    return 0;
}

/* routes[i] */

static int route_method(struct parse *p, yaml_node_t *v, void *obj)
{
    const char *s = scalar(v);
    size_t len = s ? strlen(s) : 0;
    int ok = len > 0 && len <= 16;
    for (size_t i = 0; ok && i < len; i++)
        ok = s[i] >= 'A' && s[i] <= 'Z';
    if (!ok)
        return fail(p, v, "%s: expected an upper-case HTTP method such as POST, got '%.64s'", p->where,
                    s ? s : "(not a scalar)");
    replace_str(&((struct ad_route *)obj)->method, s);
    return 0;
}

/* A local path: starts with '/', no spaces, no query or fragment. */
static int is_path(const char *s)
{
    if (s == NULL || s[0] != '/')
        return 0;
    return strcspn(s, " ?#") == strlen(s);
}

static int route_path(struct parse *p, yaml_node_t *v, void *obj)
{
    const char *s = text(p, v);
    if (s == NULL)
        return -1;
    if (!is_path(s))
        return fail(p, v, "%s: expected a path starting with '/', without spaces, '?' or '#', got '%.64s'", p->where,
                    s);
    replace_str(&((struct ad_route *)obj)->path, s);
    return 0;
}

static int route_resource(struct parse *p, yaml_node_t *v, void *obj)
{
    const char *s = text(p, v);
    if (s == NULL)
        return -1;
    if (!is_path(s))
        return fail(p, v, "%s: expected a path such as /v1/videos/{id}, got '%.64s'", p->where, s);
    replace_str(&((struct ad_route *)obj)->resource, s);
    return 0;
}

/* A route option of two values: yes sets *flag, no clears it. */
static int route_choice(struct parse *p, yaml_node_t *v, int *flag, const char *yes, const char *no)
{
    const char *s = scalar(v);
    if (s != NULL && !strcmp(s, yes))
        *flag = 1;
    else if (s != NULL && !strcmp(s, no))
        *flag = 0;
    else
        return fail(p, v, "%s: expected %s or %s, got '%.64s'", p->where, yes, no, s ? s : "(not a scalar)");
    return 0;
}

static int route_on_complete(struct parse *p, yaml_node_t *v, void *obj)
{
    return route_choice(p, v, &((struct ad_route *)obj)->on_complete_redirect, "redirect", "inline");
}

/* style: job (202 with the job, the default) or operation (200 with the job as an AIP-151 Operation). */
static int route_style(struct parse *p, yaml_node_t *v, void *obj)
{
    return route_choice(p, v, &((struct ad_route *)obj)->style_operation, "operation", "job");
}

/* onPending: ok (the default) or accepted (the submit's Location answers 202 while the job is pending). */
static int route_on_pending(struct parse *p, yaml_node_t *v, void *obj)
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
    }
    free(cfg->routes);
    cfg->routes = NULL;
    cfg->nroutes = 0;
}

static int top_routes(struct parse *p, yaml_node_t *v, void *obj)
{
    struct ad_config *cfg = obj;
    long n = list_len(p, v);
    if (n < 0)
        return -1;
    free_routes(cfg);
    cfg->routes = ad_calloc((size_t)n, sizeof *cfg->routes);
    cfg->nroutes = (size_t)n;
    free(p->route_lines);
    p->route_lines = ad_calloc((size_t)n, sizeof *p->route_lines);
    p->nroute_lines = (size_t)n;
    for (long i = 0; i < n; i++) {
        yaml_node_t *item = node_at(p, v->data.sequence.items.start[i]);
        struct ad_route *r = &cfg->routes[i];
        size_t mark = path_push(p, NULL, (size_t)i);
        int rc = parse_map(p, item, route_fields, r);
        if (rc == 0 && (r->method == NULL || r->path == NULL || r->type == NULL))
            rc = fail(p, item, "%s: 'method', 'path' and 'type' are required", p->where);
        for (long j = 0; rc == 0 && j < i; j++) {
            if (!strcmp(cfg->routes[j].method, r->method) && !strcmp(cfg->routes[j].path, r->path))
                rc = fail(p, item, "%s: %s %s is already routed by routes[%ld]", p->where, r->method, r->path, j);
        }
        if (rc == 0)
            p->route_lines[i] = (int)map_get(p, item, "type")->start_mark.line + 1;
        path_pop(p, mark);
        if (rc < 0)
            return -1;
    }
    return 0;
}

/* Top level */

static int top_listen(struct parse *p, yaml_node_t *v, void *obj)
{
    const char *s = scalar(v);
    if (s == NULL || ad_config_set_listen(obj, s) < 0)
        return fail(p, v, "listen: expected HOST:PORT, \"[IPv6]:PORT\" or :PORT, got '%.64s'",
                    s ? s : "(not a scalar)");
    return 0;
}

static int top_data(struct parse *p, yaml_node_t *v, void *obj)
{
    const char *s = text(p, v);
    return s == NULL ? -1 : ad_config_set_data(obj, s);
}

static int top_public_url(struct parse *p, yaml_node_t *v, void *obj)
{
    if (is_null(v)) {
        replace_str(&((struct ad_config *)obj)->public_url, NULL);
        return 0;
    }
    const char *s = scalar(v);
    if (s == NULL || ad_config_set_public_url(obj, s) < 0)
        return fail(p, v, "publicUrl: expected an http:// or https:// URL without query or fragment, got '%.64s'",
                    s ? s : "(not a scalar)");
    return 0;
}

static int limits_rate(struct parse *p, yaml_node_t *v, void *obj)
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
    {"rateLimit", F_FN, 0, 0, 0, NULL, limits_rate},
    {NULL},
};

/* webhooks */

static void free_allow_networks(struct ad_webhooks_conf *w)
{
    for (size_t i = 0; i < w->nallow_networks; i++)
        free(w->allow_networks[i]);
    free(w->allow_networks);
    w->allow_networks = NULL;
    w->nallow_networks = 0;
}

static int webhooks_allow(struct parse *p, yaml_node_t *v, void *obj)
{
    struct ad_webhooks_conf *w = obj;
    long n = list_len(p, v);
    if (n < 0)
        return -1;
    free_allow_networks(w);
    w->allow_networks = ad_calloc((size_t)n, sizeof *w->allow_networks);
    for (long i = 0; i < n; i++) {
        yaml_node_t *item = node_at(p, v->data.sequence.items.start[i]);
        size_t mark = path_push(p, NULL, (size_t)i);
        const char *s = text(p, item);
        struct ad_cidr net;
        int rc = s == NULL ? -1 : 0;
        if (rc == 0 && ad_cidr_parse(s, &net) != 0)
            rc = fail(p, item, "%s: expected a network such as 127.0.0.0/8 or ::1/128 (host bits zero), got '%.64s'",
                      p->where, s);
        path_pop(p, mark);
        if (rc < 0)
            return -1;
        w->allow_networks[w->nallow_networks++] = ad_strdup(s);
    }
    return 0;
}

static int webhooks_schedule(struct parse *p, yaml_node_t *v, void *obj)
{
    struct ad_webhooks_conf *w = obj;
    long n = list_len(p, v);
    if (n < 0)
        return -1;
    if (n < 1 || n > 100)
        return fail(p, v, "%s: expected a list of 1 to 100 delays", p->where);
    int64_t *ms = ad_calloc((size_t)n, sizeof *ms);
    for (long i = 0; i < n; i++) {
        yaml_node_t *item = node_at(p, v->data.sequence.items.start[i]);
        const char *s = scalar(item);
        if (s == NULL || ad_parse_duration_ms(s, &ms[i]) < 0 || ms[i] > 7 * 86400 * (int64_t)1000) {
            size_t mark = path_push(p, NULL, (size_t)i);
            fail(p, item, "%s: expected seconds (or a duration such as 500ms, 5m) up to 7d, got '%.64s'", p->where,
                 s ? s : "(not a scalar)");
            path_pop(p, mark);
            free(ms);
            return -1;
        }
    }
    free(w->retry_schedule_ms);
    w->retry_schedule_ms = ms;
    w->nretry_schedule = (size_t)n;
    return 0;
}

static int webhooks_secret_key(struct parse *p, yaml_node_t *v, void *obj)
{
    /* A secret: errors describe it, never quote it. */
    const char *s = scalar(v);
    uint8_t key[AD_SEAL_KEY_BYTES];
    if (s == NULL || ad_seal_key_parse(s, key) != 0)
        return fail(p, v, "%s: expected base64 of 32 bytes (openssl rand -base64 32)", p->where);
    replace_str(&((struct ad_webhooks_conf *)obj)->secret_key, s);
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

static int log_format(struct parse *p, yaml_node_t *v, void *obj)
{
    const char *s = scalar(v);
    if (s == NULL || (strcmp(s, "text") != 0 && strcmp(s, "json") != 0))
        return fail(p, v, "%s: expected text or json, got '%.64s'", p->where, s ? s : "(not a scalar)");
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

static int top_signing_key(struct parse *p, yaml_node_t *v, void *obj)
{
    /* A secret: errors describe it, never quote it. */
    const char *s = text(p, v);
    if (s == NULL)
        return -1;
    if (strlen(s) < 32)
        return fail(p, v, "signingKey: expected at least 32 characters");
    replace_str(&((struct ad_config *)obj)->signing_key, s);
    return 0;
}

static int store_postgres(struct parse *p, yaml_node_t *v, void *obj)
{
    /* May hold a password: errors describe it, never quote it. */
    const char *s = scalar(v);
    if (s == NULL || ad_config_set_store(obj, s) < 0)
        return fail(p, v, "store.postgres: expected a postgresql:// connection URL");
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
    {NULL},
};

/* Checks that need the whole file: fallbacks from global settings, and routes naming configured types. */
static int finish(struct parse *p)
{
    struct ad_config *cfg = p->cfg;
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
        if (i < p->nroute_lines)
            snprintf(p->err, p->errlen, "%s:%d: routes[%zu].type: '%.64s' is not one of the configured types", p->file,
                     p->route_lines[i], i, cfg->routes[i].type);
        else
            fail(p, NULL, "routes[%zu].type: '%.64s' is not one of the configured types", i, cfg->routes[i].type);
        return -1;
    }
    return 0;
}

static int yaml_fail(struct parse *p, const yaml_parser_t *parser)
{
    snprintf(p->err, p->errlen, "%s:%zu: %s%s%s", p->file, (size_t)parser->problem_mark.line + 1,
             parser->problem ? parser->problem : "invalid YAML", parser->context ? " " : "",
             parser->context ? parser->context : "");
    return -1;
}

static int load(struct ad_config *cfg, yaml_parser_t *parser, const char *file, char *err, size_t errlen)
{
    struct parse p = {.file = file, .cfg = cfg, .err = err, .errlen = errlen};
    yaml_document_t doc, extra;
    if (errlen > 0)
        err[0] = '\0';
    if (!yaml_parser_load(parser, &doc))
        return yaml_fail(&p, parser);
    p.doc = &doc;

    int rc = 0;
    /* A second document would be ignored by the loader; refuse it rather than run half a configuration. */
    if (!yaml_parser_load(parser, &extra)) {
        rc = yaml_fail(&p, parser);
    } else {
        yaml_node_t *second = yaml_document_get_root_node(&extra);
        if (second != NULL)
            rc = fail(&p, second, "only one YAML document is allowed");
        yaml_document_delete(&extra);
    }

    yaml_node_t *root = yaml_document_get_root_node(&doc);
    if (rc == 0 && root != NULL && !is_null(root))
        rc = parse_map(&p, root, top_fields, cfg);
    if (rc == 0)
        rc = finish(&p);

    free(p.route_lines);
    yaml_document_delete(&doc);
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

void ad_config_defaults(struct ad_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->listen_host = ad_strdup("127.0.0.1");
    cfg->listen_port = 8080;
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
    if (dir == NULL || dir[0] == '\0' || !clean_text(dir, strlen(dir)))
        return -1;
    replace_str(&cfg->data_dir, dir);
    return 0;
}

int ad_config_set_store(struct ad_config *cfg, const char *url)
{
    if (url == NULL || !clean_text(url, strlen(url)) ||
        (strncmp(url, "postgresql://", 13) != 0 && strncmp(url, "postgres://", 11) != 0))
        return -1;
    replace_str(&cfg->store, url);
    return 0;
}

int ad_config_set_public_url(struct ad_config *cfg, const char *url)
{
    if (url == NULL || !clean_text(url, strlen(url)))
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

void ad_config_free(struct ad_config *cfg)
{
    free(cfg->listen_host);
    free(cfg->data_dir);
    free(cfg->store);
    free(cfg->public_url);
    free_keys(cfg);
    free_types(cfg);
    free_routes(cfg);
    free_allow_networks(&cfg->webhooks);
    free(cfg->webhooks.retry_schedule_ms);
    free(cfg->webhooks.secret_key);
    free(cfg->webhooks.ca_file);
    free(cfg->tls.cert);
    free(cfg->tls.key);
    free(cfg->signing_key);
    memset(cfg, 0, sizeof *cfg);
}
