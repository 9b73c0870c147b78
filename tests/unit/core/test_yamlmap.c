/*
 * test_yamlmap.c - unit tests for src/core/yamlmap.c, the YAML-to-struct mapper, with a small schema of its own
 * (not acceptd's): each field kind and its bounds, nested mappings and the path they put in errors, unknown and
 * repeated keys, lists walked item by item (the path names the item, and is restored after it), a second
 * document, empty and null documents, and the text rule shared with the command-line setters.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "core/yamlmap_int.h"

struct inner {
    int flag;
    char *name;
};

struct outer {
    char *str;
    int count;
    size_t size;
    int64_t ms;
    struct inner in;
    char **tags;
    size_t ntags;
    char where_after[256]; /* p->where once the list was walked */
};

static int tag_item(struct ad_ymap *p, yaml_node_t *item, size_t i, void *obj)
{
    struct outer *o = obj;
    const char *s = ad_ymap_text(p, item);
    if (s == NULL)
        return -1;
    if (!strcmp(s, "bad"))
        return ad_ymap_fail(p, item, "%s: not this one", p->where);
    o->tags[i] = ad_strdup(s);
    o->ntags = i + 1;
    return 0;
}

static int outer_tags(struct ad_ymap *p, yaml_node_t *v, void *obj)
{
    struct outer *o = obj;
    long n = ad_ymap_list_len(p, v);
    if (n < 0)
        return -1;
    ad_ymap_free_strs(&o->tags, &o->ntags);
    o->tags = ad_calloc((size_t)n, sizeof *o->tags);
    int rc = ad_ymap_each(p, v, n, tag_item, o);
    snprintf(o->where_after, sizeof o->where_after, "%s", p->where);
    return rc;
}

static const struct field inner_fields[] = {
    {"flag", F_BOOL, offsetof(struct inner, flag), 0, 0, NULL, NULL},
    {"name", F_STR, offsetof(struct inner, name), 0, 0, NULL, NULL},
    {NULL},
};

static const struct field outer_fields[] = {
    {"str", F_STR, offsetof(struct outer, str), 0, 0, NULL, NULL},
    {"count", F_INT, offsetof(struct outer, count), -5, 5, NULL, NULL},
    {"size", F_SIZE, offsetof(struct outer, size), 1, 1LL << 40, NULL, NULL},
    {"ms", F_DURATION, offsetof(struct outer, ms), 1, 3600 * 1000, NULL, NULL},
    {"in", F_MAP, offsetof(struct outer, in), 0, 0, inner_fields, NULL},
    {"tags", F_FN, 0, 0, 0, NULL, outer_tags},
    {NULL},
};

static void outer_free(struct outer *o)
{
    free(o->str);
    free(o->in.name);
    ad_ymap_free_strs(&o->tags, &o->ntags);
}

/* Walk yaml into o (zeroed first); err holds the message. */
static int walk(struct outer *o, const char *yaml, char *err, size_t errlen)
{
    memset(o, 0, sizeof *o);
    yaml_parser_t parser;
    assert_true(yaml_parser_initialize(&parser));
    yaml_parser_set_input_string(&parser, (const unsigned char *)yaml, strlen(yaml));
    struct ad_ymap p = {.file = "t.yaml", .err = err, .errlen = errlen};
    int rc = ad_ymap_walk(&p, &parser, outer_fields, o);
    yaml_parser_delete(&parser);
    return rc;
}

/* The YAML must be refused with exactly want. */
static void expect_error(const char *yaml, const char *want)
{
    struct outer o;
    char err[256] = "stale";
    int rc = walk(&o, yaml, err, sizeof err);
    outer_free(&o);
    if (rc != -1)
        fail_msg("accepted:\n%s", yaml);
    if (strcmp(err, want) != 0)
        fail_msg("error '%s', want '%s'", err, want);
}

static void test_kinds(void **state)
{
    (void)state;
    struct outer o;
    char err[256] = "stale";
    int rc = walk(&o,
                  "str: hello\ncount: -5\nsize: 1099511627776\nms: 2m\n"
                  "in: { flag: TRUE, name: x }\ntags: [a, b, c]\n",
                  err, sizeof err);
    if (rc != 0)
        fail_msg("%s", err);
    assert_string_equal(err, "");
    assert_string_equal(o.str, "hello");
    assert_int_equal(o.count, -5);
    assert_true(o.size == (size_t)1 << 40);
    assert_int_equal(o.ms, 120000);
    assert_int_equal(o.in.flag, 1);
    assert_string_equal(o.in.name, "x");
    assert_int_equal(o.ntags, 3);
    assert_string_equal(o.tags[2], "c");
    assert_string_equal(o.where_after, "tags");
    outer_free(&o);
}

static void test_errors(void **state)
{
    (void)state;
    expect_error("count: 6\n", "t.yaml:1: count: expected an integer from -5 to 5, got '6'");
    expect_error("count: [1]\n", "t.yaml:1: count: expected an integer from -5 to 5, got '(not a scalar)'");
    expect_error("size: 0\n", "t.yaml:1: size: expected an integer from 1 to 1099511627776, got '0'");
    expect_error("ms: 2h\n",
                 "t.yaml:1: ms: expected a duration such as 30, 500ms, 10s, 5m, 2h or 30d (more than 0), got '2h'");
    expect_error("str: ''\n", "t.yaml:1: str: expected a non-empty string");
    expect_error("str: \"a\\tb\"\n", "t.yaml:1: str: control characters are not allowed");
    expect_error("\n\nin: { flag: yes }\n", "t.yaml:3: in.flag: expected true or false, got 'yes'");
    expect_error("in: 3\n", "t.yaml:1: expected a mapping in in");
    expect_error("- 1\n", "t.yaml:1: expected a mapping in the top level");
    expect_error("in: { nmae: x }\n", "t.yaml:1: unknown key 'nmae' in in");
    expect_error("str: a\ncount: 1\nstr: b\n", "t.yaml:3: duplicate key 'str' in the top level");
    expect_error("? [a]\n: 1\n", "t.yaml:1: expected a plain key in the top level");
    expect_error("str: a\n---\nstr: b\n", "t.yaml:3: only one YAML document is allowed");
    expect_error("str: [\n", "t.yaml:2: did not find expected node content while parsing a flow node");
}

/* A list's items are walked in order, each with "[i]" on the path, and the path is restored after a failure. */
static void test_lists(void **state)
{
    (void)state;
    expect_error("tags: 3\n", "t.yaml:1: tags: expected a list");
    expect_error("tags:\n  - a\n  - bad\n", "t.yaml:3: tags[1]: not this one");
    expect_error("tags: [a, '']\n", "t.yaml:1: tags[1]: expected a non-empty string");

    struct outer o;
    char err[256];
    assert_int_equal(walk(&o, "tags: [a, bad, c]\n", err, sizeof err), -1);
    assert_string_equal(o.where_after, "tags");
    assert_int_equal(o.ntags, 1); /* the items before the failing one were taken */
    outer_free(&o);
    assert_null(o.tags);
    assert_int_equal(o.ntags, 0);

    assert_int_equal(walk(&o, "tags:\n", err, sizeof err), 0); /* nothing at all is an empty list */
    assert_int_equal(o.ntags, 0);
    outer_free(&o);
}

static void test_empty_documents(void **state)
{
    (void)state;
    static const char *const empty[] = {"", "# only a comment\n", "~\n", "null\n", "---\n"};
    for (size_t i = 0; i < sizeof empty / sizeof empty[0]; i++) {
        struct outer o;
        char err[64] = "stale";
        if (walk(&o, empty[i], err, sizeof err) != 0)
            fail_msg("'%s' refused: %s", empty[i], err);
        assert_string_equal(err, "");
        assert_null(o.str);
        outer_free(&o);
    }
}

/* No room for a message (errlen 0) still fails, and writes nothing. */
static void test_no_error_buffer(void **state)
{
    (void)state;
    struct outer o;
    char err[8] = "intact";
    assert_int_equal(walk(&o, "count: 9\n", err, 0), -1);
    assert_string_equal(err, "intact");
    outer_free(&o);
}

static void test_text_helpers(void **state)
{
    (void)state;
    assert_true(ad_ymap_clean_text("a b/c", 5));
    assert_false(ad_ymap_clean_text("a\nb", 3));
    assert_false(ad_ymap_clean_text("a\0b", 3));
    assert_false(ad_ymap_clean_text("\x7f", 1));
    assert_true(ad_ymap_clean_text("caf\xc3\xa9", 5));

    char *s = ad_strdup("old");
    ad_ymap_replace_str(&s, "new");
    assert_string_equal(s, "new");
    ad_ymap_replace_str(&s, NULL);
    assert_null(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kinds),           cmocka_unit_test(test_errors),
        cmocka_unit_test(test_lists),           cmocka_unit_test(test_empty_documents),
        cmocka_unit_test(test_no_error_buffer), cmocka_unit_test(test_text_helpers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
