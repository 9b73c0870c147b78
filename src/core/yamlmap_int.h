/*
 * yamlmap_int.h - core's YAML-to-struct mapper: a libyaml document walked with tables of fields, one table per
 * mapping the format allows (name, kind, where the value goes in the object being filled).
 *
 * It knows YAML, paths such as "routes[0].type" and the error line "file:line: path: message", not any of
 * acceptd's keys: the schema (config.c) owns the tables and the functions of its F_FN fields. Only core/
 * includes this header.
 */
#ifndef AD_YAMLMAP_INT_H
#define AD_YAMLMAP_INT_H

#include <stddef.h>
#include <yaml.h>

#include "common/util.h"

/* One walk over one document; errors go into err, the first one wins. */
struct ad_ymap {
    const char *file; /* named in every error */
    yaml_document_t *doc;
    char *err;
    size_t errlen;
    char where[256]; /* dotted path of the value being read: "routes[0].type", "" at the top */
    void *ctx;       /* the schema's own state, for its F_FN functions */
};

/*
 * The tables. A field's value is written at `offset` inside the object the table describes; F_MAP descends
 * into a nested mapping whose own table is `sub`; F_FN hands the value node to a function. A table ends with
 * a field whose name is NULL.
 */
typedef int (*field_fn)(struct ad_ymap *p, yaml_node_t *value, void *obj);

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

/* Load the parser's one document and fill obj from its root mapping with fields (an empty document or a
 * null root leaves obj as it was). Clears err first. Returns 0, or -1 with err set: invalid YAML, a second
 * document, or an error of the walk. */
int ad_ymap_walk(struct ad_ymap *p, yaml_parser_t *parser, const struct field *fields, void *obj);

/* Fill obj from a mapping node with fields: an unknown or repeated key is an error. Returns 0 or -1. */
int ad_ymap_parse_map(struct ad_ymap *p, yaml_node_t *map, const struct field *fields, void *obj);

/* Write "file:line: " (the node's line; no line when node is NULL) and the message into p->err. Returns -1. */
int ad_ymap_fail(struct ad_ymap *p, const yaml_node_t *node, const char *fmt, ...) AD_PRINTF(3, 4);

/* Extend p->where with ".name" (or "[index]" when name is NULL); returns what ad_ymap_pop restores. */
size_t ad_ymap_push(struct ad_ymap *p, const char *name, size_t index);
void ad_ymap_pop(struct ad_ymap *p, size_t mark);

/* The node of a document index (a pair's key or value, a sequence's item). */
yaml_node_t *ad_ymap_node(struct ad_ymap *p, int index);

/* Whether n is an empty plain value, `~` or `null`: YAML's ways of writing "nothing here". */
int ad_ymap_is_null(const yaml_node_t *n);

/* The text of a scalar, or NULL for a mapping or sequence. */
const char *ad_ymap_scalar(const yaml_node_t *n);

/* A non-empty scalar without control characters; NULL after reporting the error otherwise. */
const char *ad_ymap_text(struct ad_ymap *p, const yaml_node_t *n);

/* Whether s has no control characters (nor an embedded NUL): config strings end up in headers, paths and log
 * lines, whether they come from the file, a flag or the environment. */
int ad_ymap_clean_text(const char *s, size_t len);

/* Free *slot and put a heap copy of s there (NULL when s is NULL). */
void ad_ymap_replace_str(char **slot, const char *s);

/* The value of a key of a mapping node; NULL when absent. */
yaml_node_t *ad_ymap_get(struct ad_ymap *p, yaml_node_t *map, const char *name);

/* A list value: a sequence, or nothing at all (an empty list). Returns the item count, or -1 after reporting
 * the error. */
long ad_ymap_list_len(struct ad_ymap *p, yaml_node_t *v);

/* Call item(p, node, i, obj) for each of the n items of the list v (n from ad_ymap_list_len), with the path
 * extended by "[i]" meanwhile. Returns 0, or -1 at the first item that fails. */
typedef int (*ad_ymap_item_fn)(struct ad_ymap *p, yaml_node_t *item, size_t i, void *obj);
int ad_ymap_each(struct ad_ymap *p, yaml_node_t *v, long n, ad_ymap_item_fn item, void *obj);

/* Free a list of n heap strings and empty it. */
void ad_ymap_free_strs(char ***strs, size_t *n);

#endif
