/*
 * yamlmap.c - the YAML-to-struct mapper behind the config file: a libyaml document walked with tables of
 * fields (yamlmap_int.h).
 *
 * A key that is not in its table is an error, never ignored, so a typo such as `maxAtempts` stops the daemon
 * instead of silently keeping a default; so is a repeated key, which libyaml would otherwise let win
 * silently, and a second document. Every error names the file, the line and the path of the value.
 *
 * It checks the scalar kinds (strings, bounded integers and durations, booleans) and leaves everything else
 * to the schema's F_FN functions; it knows none of acceptd's keys.
 */
#include "core/yamlmap_int.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int ad_ymap_fail(struct ad_ymap *p, const yaml_node_t *node, const char *fmt, ...)
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

size_t ad_ymap_push(struct ad_ymap *p, const char *name, size_t index)
{
    size_t len = strlen(p->where);
    if (name == NULL)
        snprintf(p->where + len, sizeof p->where - len, "[%zu]", index);
    else
        snprintf(p->where + len, sizeof p->where - len, "%s%s", len ? "." : "", name);
    return len;
}

void ad_ymap_pop(struct ad_ymap *p, size_t mark)
{
    p->where[mark] = '\0';
}

yaml_node_t *ad_ymap_node(struct ad_ymap *p, int index)
{
    return yaml_document_get_node(p->doc, index);
}

int ad_ymap_is_null(const yaml_node_t *n)
{
    if (n->type != YAML_SCALAR_NODE || n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
        return 0;
    const char *v = (const char *)n->data.scalar.value;
    return !strcmp(v, "") || !strcmp(v, "~") || !strcmp(v, "null") || !strcmp(v, "Null") || !strcmp(v, "NULL");
}

const char *ad_ymap_scalar(const yaml_node_t *n)
{
    return n->type == YAML_SCALAR_NODE ? (const char *)n->data.scalar.value : NULL;
}

int ad_ymap_clean_text(const char *s, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x20 || c == 0x7f)
            return 0;
    }
    return 1;
}

const char *ad_ymap_text(struct ad_ymap *p, const yaml_node_t *n)
{
    const char *s = ad_ymap_scalar(n);
    if (s == NULL || ad_ymap_is_null(n) || s[0] == '\0') {
        ad_ymap_fail(p, n, "%s: expected a non-empty string", p->where);
        return NULL;
    }
    if (!ad_ymap_clean_text(s, n->data.scalar.length)) {
        ad_ymap_fail(p, n, "%s: control characters are not allowed", p->where);
        return NULL;
    }
    return s;
}

void ad_ymap_replace_str(char **slot, const char *s)
{
    free(*slot);
    *slot = s ? ad_strdup(s) : NULL;
}

static int set_field(struct ad_ymap *p, const struct field *f, yaml_node_t *v, void *obj)
{
    void *slot = (char *)obj + f->offset;
    const char *s = ad_ymap_scalar(v);
    long long n;
    int64_t ms;

    switch (f->kind) {
    case F_STR:
        if ((s = ad_ymap_text(p, v)) == NULL)
            return -1;
        ad_ymap_replace_str(slot, s);
        return 0;
    case F_INT:
    case F_SIZE:
        if (s == NULL || ad_parse_int(s, strlen(s), f->min, f->max, &n) < 0)
            return ad_ymap_fail(p, v, "%s: expected an integer from %lld to %lld, got '%.64s'", p->where, f->min,
                                f->max, s ? s : "(not a scalar)");
        if (f->kind == F_INT)
            *(int *)slot = (int)n;
        else
            *(size_t *)slot = (size_t)n;
        return 0;
    case F_DURATION:
        if (s == NULL || ad_parse_duration_ms(s, &ms) < 0 || ms < f->min || ms > f->max)
            return ad_ymap_fail(p, v, "%s: expected a duration such as 30, 500ms, 10s, 5m, 2h or 30d%s, got '%.64s'",
                                p->where, f->min > 0 ? " (more than 0)" : "", s ? s : "(not a scalar)");
        *(int64_t *)slot = ms;
        return 0;
    case F_BOOL:
        if (s != NULL && (!strcmp(s, "true") || !strcmp(s, "True") || !strcmp(s, "TRUE")))
            *(int *)slot = 1;
        else if (s != NULL && (!strcmp(s, "false") || !strcmp(s, "False") || !strcmp(s, "FALSE")))
            *(int *)slot = 0;
        else
            return ad_ymap_fail(p, v, "%s: expected true or false, got '%.64s'", p->where, s ? s : "(not a scalar)");
        return 0;
    case F_MAP:
        return ad_ymap_parse_map(p, v, f->sub, slot);
    case F_FN:
        return f->fn(p, v, obj);
    }
    return -1;
}

static const char *where_suffix(struct ad_ymap *p)
{
    return p->where[0] ? p->where : "the top level";
}

int ad_ymap_parse_map(struct ad_ymap *p, yaml_node_t *map, const struct field *fields, void *obj)
{
    if (map->type != YAML_MAPPING_NODE)
        return ad_ymap_fail(p, map, "expected a mapping in %s", where_suffix(p));

    for (yaml_node_pair_t *pair = map->data.mapping.pairs.start; pair < map->data.mapping.pairs.top; pair++) {
        yaml_node_t *k = ad_ymap_node(p, pair->key), *v = ad_ymap_node(p, pair->value);
        const char *name = ad_ymap_scalar(k);
        if (name == NULL)
            return ad_ymap_fail(p, k, "expected a plain key in %s", where_suffix(p));
        /* libyaml keeps repeated keys; the second one would silently win. */
        for (yaml_node_pair_t *prev = map->data.mapping.pairs.start; prev < pair; prev++) {
            const char *pname = ad_ymap_scalar(ad_ymap_node(p, prev->key));
            if (pname != NULL && !strcmp(pname, name))
                return ad_ymap_fail(p, k, "duplicate key '%.64s' in %s", name, where_suffix(p));
        }
        const struct field *f = fields;
        while (f->name != NULL && strcmp(f->name, name) != 0)
            f++;
        if (f->name == NULL)
            return ad_ymap_fail(p, k, "unknown key '%.64s' in %s", name, where_suffix(p));

        size_t mark = ad_ymap_push(p, name, 0);
        int rc = set_field(p, f, v, obj);
        ad_ymap_pop(p, mark);
        if (rc < 0)
            return -1;
    }
    return 0;
}

yaml_node_t *ad_ymap_get(struct ad_ymap *p, yaml_node_t *map, const char *name)
{
    for (yaml_node_pair_t *pair = map->data.mapping.pairs.start; pair < map->data.mapping.pairs.top; pair++) {
        const char *k = ad_ymap_scalar(ad_ymap_node(p, pair->key));
        if (k != NULL && !strcmp(k, name))
            return ad_ymap_node(p, pair->value);
    }
    return NULL;
}

long ad_ymap_list_len(struct ad_ymap *p, yaml_node_t *v)
{
    if (ad_ymap_is_null(v))
        return 0;
    if (v->type != YAML_SEQUENCE_NODE)
        return ad_ymap_fail(p, v, "%s: expected a list", p->where);
    return (long)(v->data.sequence.items.top - v->data.sequence.items.start);
}

int ad_ymap_each(struct ad_ymap *p, yaml_node_t *v, long n, ad_ymap_item_fn item, void *obj)
{
    for (long i = 0; i < n; i++) {
        size_t mark = ad_ymap_push(p, NULL, (size_t)i);
        int rc = item(p, ad_ymap_node(p, v->data.sequence.items.start[i]), (size_t)i, obj);
        ad_ymap_pop(p, mark);
        if (rc < 0)
            return -1;
    }
    return 0;
}

void ad_ymap_free_strs(char ***strs, size_t *n)
{
    for (size_t i = 0; i < *n; i++)
        free((*strs)[i]);
    free(*strs);
    *strs = NULL;
    *n = 0;
}

static int yaml_fail(struct ad_ymap *p, const yaml_parser_t *parser)
{
    snprintf(p->err, p->errlen, "%s:%zu: %s%s%s", p->file, (size_t)parser->problem_mark.line + 1,
             parser->problem ? parser->problem : "invalid YAML", parser->context ? " " : "",
             parser->context ? parser->context : "");
    return -1;
}

int ad_ymap_walk(struct ad_ymap *p, yaml_parser_t *parser, const struct field *fields, void *obj)
{
    yaml_document_t doc, extra;
    if (p->errlen > 0)
        p->err[0] = '\0';
    if (!yaml_parser_load(parser, &doc))
        return yaml_fail(p, parser);
    p->doc = &doc;

    int rc = 0;
    /* A second document would be ignored by the loader; refuse it rather than run half a configuration. */
    if (!yaml_parser_load(parser, &extra)) {
        rc = yaml_fail(p, parser);
    } else {
        yaml_node_t *second = yaml_document_get_root_node(&extra);
        if (second != NULL)
            rc = ad_ymap_fail(p, second, "only one YAML document is allowed");
        yaml_document_delete(&extra);
    }

    yaml_node_t *root = yaml_document_get_root_node(&doc);
    if (rc == 0 && root != NULL && !ad_ymap_is_null(root))
        rc = ad_ymap_parse_map(p, root, fields, obj);

    yaml_document_delete(&doc);
    p->doc = NULL;
    return rc;
}
