/*
 * test_http.c - unit tests for the parts of src/http.c that need no live connection: route matching, query
 * parameters (and their repeats), Prefer parsing, header lookups and the problem body (test_conn.c has the
 * connection's parts).
 *
 * Each test builds a bare h2o_req_t (zeroed, with its own memory pool and headers); nothing here sends a
 * response, which needs a real connection and is covered by the black-box tests; http.c is included for its
 * static parts.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sys/socket.h>
#include <unistd.h>

#include "http/http.c"

struct fake {
    h2o_req_t req;
    struct ad_request r;
};

static int setup(void **state)
{
    struct fake *f = calloc(1, sizeof(*f));
    h2o_mem_init_pool(&f->req.pool);
    f->r.req = &f->req;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fake *f = *state;
    h2o_mem_clear_pool(&f->req.pool);
    free(f);
    return 0;
}

static void set_method(struct fake *f, const char *m)
{
    f->req.method = h2o_iovec_init(m, strlen(m));
}

static void set_query(struct fake *f, const char *q)
{
    f->r.query = h2o_iovec_init(q, strlen(q));
}

static void add_header(struct fake *f, const char *lname, const char *value)
{
    h2o_add_header_by_str(&f->req.pool, &f->req.headers, lname, strlen(lname), 1, NULL, value, strlen(value));
}

static int h_any(struct ad_request *r)
{
    return 0;
}

/* The daemon's own shape of table (api.c), in the same order. */
static const struct ad_route_def table[] = {
    {"GET", "/healthz", h_any, 0},
    {"POST", "/v1/jobs", h_any, 1},
    {"GET", "/v1/jobs", h_any, 1},
    {"GET", "/v1/jobs/changes", h_any, 1},
    {"GET", "/v1/jobs/{id}", h_any, 1},
    {"DELETE", "/v1/jobs/{id}", h_any, 1},
    {"GET", "/v1/jobs/{id}/result", h_any, 1},
    {"POST", "/v1/jobs/{id}:cancel", h_any, 1},
    {"POST", "/v1/jobs/{id}:retry", h_any, 1},
    {"POST", "/v1/leases", h_any, 2},
};
#define NTABLE (sizeof(table) / sizeof(table[0]))

/* Match method+path; returns the error, *row the matched index (-1 when none) and *id. */
static ad_err match(struct fake *f, const char *method, const char *path, int *row, char **id, h2o_iovec_t *allow)
{
    set_method(f, method);
    const struct ad_route_def *out = NULL;
    *id = (char *)"untouched";
    *allow = h2o_iovec_init(NULL, 0);
    ad_err e = ad_http_match(&f->req, table, NTABLE, h2o_iovec_init(path, strlen(path)), &out, id, allow);
    *row = out != NULL ? (int)(out - table) : -1;
    return e;
}

static void test_match_routes(void **state)
{
    struct fake *f = *state;
    int row;
    char *id;
    h2o_iovec_t allow;

    assert_int_equal(match(f, "GET", "/healthz", &row, &id, &allow), AD_E_OK);
    assert_int_equal(row, 0);
    assert_null(id); /* no {id} in the pattern */

    assert_int_equal(match(f, "POST", "/v1/jobs", &row, &id, &allow), AD_E_OK);
    assert_int_equal(row, 1);
    assert_int_equal(match(f, "GET", "/v1/jobs", &row, &id, &allow), AD_E_OK);
    assert_int_equal(row, 2);
    /* The literal route listed first wins over {id}. */
    assert_int_equal(match(f, "GET", "/v1/jobs/changes", &row, &id, &allow), AD_E_OK);
    assert_int_equal(row, 3);

    assert_int_equal(match(f, "GET", "/v1/jobs/job_AbC-09_z", &row, &id, &allow), AD_E_OK);
    assert_int_equal(row, 4);
    assert_string_equal(id, "job_AbC-09_z");
    assert_int_equal(match(f, "DELETE", "/v1/jobs/job_1", &row, &id, &allow), AD_E_OK);
    assert_int_equal(row, 5);
    assert_string_equal(id, "job_1");
    assert_int_equal(match(f, "GET", "/v1/jobs/job_1/result", &row, &id, &allow), AD_E_OK);
    assert_int_equal(row, 6);
    assert_string_equal(id, "job_1");
    assert_int_equal(match(f, "POST", "/v1/jobs/job_1:cancel", &row, &id, &allow), AD_E_OK);
    assert_int_equal(row, 7);
    assert_string_equal(id, "job_1"); /* the verb is not part of the id */
    assert_int_equal(match(f, "POST", "/v1/jobs/job_1:retry", &row, &id, &allow), AD_E_OK);
    assert_int_equal(row, 8);
}

/* The id scanned for one pattern is reused only by a pattern whose {id} starts at the same place: here the
 * first pattern scans "bc" from offset 3, and the second's id starts at offset 6, after its literal "bc:". */
static void test_match_id_at_another_place(void **state)
{
    struct fake *f = *state;
    static const struct ad_route_def shifted[] = {
        {"POST", "/a/{id}:x", h_any, 0},
        {"POST", "/a/bc:{id}", h_any, 0},
    };
    set_method(f, "POST");
    const struct ad_route_def *out = NULL;
    char *id = NULL;
    h2o_iovec_t allow = {NULL, 0};
    assert_int_equal(ad_http_match(&f->req, shifted, 2, h2o_iovec_init(H2O_STRLIT("/a/bc:d")), &out, &id, &allow),
                     AD_E_OK);
    assert_ptr_equal(out, &shifted[1]);
    assert_string_equal(id, "d");
}

static void test_match_not_found(void **state)
{
    struct fake *f = *state;
    int row;
    char *id;
    h2o_iovec_t allow;
    static const char *const paths[] = {
        "/",
        "",
        "/v1/job",
        "/v1/jobs/",              /* empty id */
        "/v1/jobs/a/b",           /* extra segment */
        "/v1/jobs/a:frobnicate",  /* unknown verb */
        "/v1/jobs/a:cancelx",     /* verb followed by more */
        "/v1/jobs/a%20b",         /* not an id character */
        "/v1/jobs/a.b",           /* not an id character */
        "/v1/jobs/a/result/",     /* trailing slash */
        "/healthz/",              /* trailing slash */
        "/healthzz",              /* longer */
        "/V1/jobs",               /* case matters */
        "/v1/jobs/a:cancel:retry" /* two verbs */
    };
    for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
        ad_err e = match(f, "POST", paths[i], &row, &id, &allow);
        ad_err e2 = match(f, "GET", paths[i], &row, &id, &allow);
        if (e != AD_E_NOT_FOUND || e2 != AD_E_NOT_FOUND)
            fail_msg("\"%s\": %s / %s, want not-found", paths[i], ad_err_code(e), ad_err_code(e2));
        assert_int_equal(row, -1);
    }
}

static void test_match_id_length(void **state)
{
    struct fake *f = *state;
    int row;
    char *id;
    h2o_iovec_t allow;
    char path[128], want[80];
    memset(want, 'a', 64);
    want[64] = '\0';
    snprintf(path, sizeof(path), "/v1/jobs/%s", want);
    assert_int_equal(match(f, "GET", path, &row, &id, &allow), AD_E_OK);
    assert_string_equal(id, want);
    snprintf(path, sizeof(path), "/v1/jobs/%sa", want); /* 65 */
    assert_int_equal(match(f, "GET", path, &row, &id, &allow), AD_E_NOT_FOUND);
    assert_int_equal(match(f, "GET", "/v1/jobs/x", &row, &id, &allow), AD_E_OK);
    assert_string_equal(id, "x");
}

static void test_match_method_not_allowed(void **state)
{
    struct fake *f = *state;
    int row;
    char *id;
    h2o_iovec_t allow;

    assert_int_equal(match(f, "PUT", "/v1/jobs", &row, &id, &allow), AD_E_METHOD_NOT_ALLOWED);
    assert_int_equal(row, -1);
    assert_int_equal(allow.len, strlen("POST, GET, HEAD"));
    assert_memory_equal(allow.base, "POST, GET, HEAD", allow.len);

    assert_int_equal(match(f, "POST", "/healthz", &row, &id, &allow), AD_E_METHOD_NOT_ALLOWED);
    assert_int_equal(allow.len, strlen("GET, HEAD"));
    assert_memory_equal(allow.base, "GET, HEAD", allow.len);

    /* Each method once, even when several patterns match. */
    assert_int_equal(match(f, "PATCH", "/v1/jobs/job_1", &row, &id, &allow), AD_E_METHOD_NOT_ALLOWED);
    assert_int_equal(allow.len, strlen("GET, HEAD, DELETE"));
    assert_memory_equal(allow.base, "GET, HEAD, DELETE", allow.len);

    /* "changes" matches both GET patterns and the DELETE one. */
    assert_int_equal(match(f, "PUT", "/v1/jobs/changes", &row, &id, &allow), AD_E_METHOD_NOT_ALLOWED);
    assert_int_equal(allow.len, strlen("GET, HEAD, DELETE"));
    assert_memory_equal(allow.base, "GET, HEAD, DELETE", allow.len);

    assert_int_equal(match(f, "GET", "/v1/jobs/job_1:cancel", &row, &id, &allow), AD_E_METHOD_NOT_ALLOWED);
    assert_int_equal(allow.len, 4);
    assert_memory_equal(allow.base, "POST", 4);

    /* Methods are case-sensitive (RFC 9110). */
    assert_int_equal(match(f, "get", "/healthz", &row, &id, &allow), AD_E_METHOD_NOT_ALLOWED);
}

static void test_query(void **state)
{
    struct fake *f = *state;
    set_query(f, "status=queued&limit=10&type=video.transcode&empty=&flag&enc=a%20b%2Fc%3d&plus=a+b&status2=x");
    assert_string_equal(ad_http_query(&f->r, "status"), "queued");
    assert_string_equal(ad_http_query(&f->r, "limit"), "10");
    assert_string_equal(ad_http_query(&f->r, "type"), "video.transcode");
    assert_string_equal(ad_http_query(&f->r, "empty"), "");
    assert_string_equal(ad_http_query(&f->r, "flag"), "");
    assert_string_equal(ad_http_query(&f->r, "enc"), "a b/c=");
    assert_string_equal(ad_http_query(&f->r, "plus"), "a b");
    assert_string_equal(ad_http_query(&f->r, "status2"), "x");
    /* Names match whole, never by prefix or suffix. */
    assert_null(ad_http_query(&f->r, "stat"));
    assert_null(ad_http_query(&f->r, "tatus"));
    assert_null(ad_http_query(&f->r, "missing"));
    assert_null(ad_http_query(&f->r, ""));

    /* A repeated name reads as its first value, but no handler sees one: the router refuses the request
     * (ad_http_query_repeated, below). A bad escape is kept literally. */
    set_query(f, "a=1&a=2&b=%zz&c=%4&d=100%&n=x%00y&m=%010");
    assert_string_equal(ad_http_query(&f->r, "a"), "1");
    /* %00 too: the value would end at the NUL. */
    assert_string_equal(ad_http_query(&f->r, "n"), "x%00y");
    assert_string_equal(ad_http_query(&f->r, "m"), "\0010"); /* %01 is decoded, then a 0 */
    assert_string_equal(ad_http_query(&f->r, "b"), "%zz");
    assert_string_equal(ad_http_query(&f->r, "c"), "%4");
    assert_string_equal(ad_http_query(&f->r, "d"), "100%");

    set_query(f, "");
    assert_null(ad_http_query(&f->r, "a"));
    f->r.query = h2o_iovec_init(NULL, 0);
    assert_null(ad_http_query(&f->r, "a"));

    /* The query view is not NUL-terminated: nothing past its length is read. */
    static const char buf[] = "wait=5&limit=9";
    f->r.query = h2o_iovec_init(buf, 6); /* "wait=5" */
    assert_string_equal(ad_http_query(&f->r, "wait"), "5");
    assert_null(ad_http_query(&f->r, "limit"));
    static const char esc[] = "c=%41";
    f->r.query = h2o_iovec_init(esc, 4); /* "c=%4": the escape is cut off by the view's end */
    assert_string_equal(ad_http_query(&f->r, "c"), "%4");
}

static void test_query_names_decoded(void **state)
{
    struct fake *f = *state;
    /* Names are decoded like values, as URLSearchParams and most proxies read them. */
    set_query(f, "lim%69t=5&my+name=1&%77ait=2&n%00=3&%zz=4");
    assert_string_equal(ad_http_query(&f->r, "limit"), "5");
    assert_string_equal(ad_http_query(&f->r, "my name"), "1");
    assert_string_equal(ad_http_query(&f->r, "wait"), "2");
    assert_string_equal(ad_http_query(&f->r, "n%00"), "3"); /* %00 is kept as written, in names too */
    assert_null(ad_http_query(&f->r, "n"));
    assert_string_equal(ad_http_query(&f->r, "%zz"), "4");
    assert_null(ad_http_query(&f->r, "lim"));
    assert_null(ad_http_query(&f->r, "limitx"));
    set_query(f, "lim%6");
    assert_null(ad_http_query(&f->r, "lim%"));
    assert_string_equal(ad_http_query(&f->r, "lim%6"), "");
}

static void test_query_repeated(void **state)
{
    struct fake *f = *state;
    static const struct {
        const char *query, *repeated;
    } cases[] = {
        {"", NULL},
        {"limit=5", NULL},
        {"limit=5&wait=1&status=queued", NULL},
        {"limit=5&limit=600", "limit"},
        {"wait=86400&wait=0", "wait"},
        {"limit=5&limit=5", "limit"},     /* the same value twice too */
        {"wait&wait=0", "wait"},          /* a name without '=' counts */
        {"limit=5&lim%69t=600", "limit"}, /* compared decoded */
        {"a+b=1&a%20b=2", "a b"},
        {"b=1&a=1&c=1&a=2&b=2", "a"}, /* several: the first in byte order is named */
        {"&&=1&=2&x=1", NULL},        /* pieces without a name are not parameters */
        {"n%00=1&n=2", NULL},         /* %00 is not decoded, so these differ */
        {"%ff=1&%FF=2", "\xff"},      /* any byte; the problem writer makes it UTF-8 */
        {"limit=5&", NULL},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        set_query(f, cases[i].query);
        const char *got = ad_http_query_repeated(&f->r);
        if (cases[i].repeated == NULL ? got != NULL : got == NULL || strcmp(got, cases[i].repeated) != 0)
            fail_msg("\"%s\": got %s, want %s", cases[i].query, got != NULL ? got : "NULL",
                     cases[i].repeated != NULL ? cases[i].repeated : "NULL");
    }
    f->r.query = h2o_iovec_init(NULL, 0);
    assert_null(ad_http_query_repeated(&f->r));
    /* Only the view is read: "a=1&a" cut before its second a. */
    static const char buf[] = "a=1&b&a";
    f->r.query = h2o_iovec_init(buf, 5);
    assert_null(ad_http_query_repeated(&f->r));
    f->r.query = h2o_iovec_init(buf, 7);
    assert_string_equal(ad_http_query_repeated(&f->r), "a");
}

/* The problem body for a request whose target is path, as a string. */
static const char *problem_for(struct fake *f, const char *path)
{
    f->req.path = h2o_iovec_init(path, strlen(path));
    h2o_iovec_t body = problem_body(&f->req, AD_E_NOT_FOUND, 404, path, NULL);
    return h2o_strdup(&f->req.pool, body.base, body.len).base;
}

static void test_problem_instance(void **state)
{
    struct fake *f = *state;
    static const struct {
        const char *path, *instance;
    } cases[] = {
        {"/v1/jobs/job_1?status=queued&a=%41", "/v1/jobs/job_1?status=queued&a=%41"}, /* a valid URI: as sent */
        {"/v1/jobs/\xff\xfe", "/v1/jobs/%FF%FE"},
        {"/v1/caf\xc3\xa9", "/v1/caf%C3%A9"}, /* UTF-8 too: an IRI is not a URI */
        {"/a b\"c\\d<e>{|}^`", "/a%20b%22c%5Cd%3Ce%3E%7B%7C%7D%5E%60"},
        {"/x\x01\x7f", "/x%01%7F"},
        {"/100%/%zz/%4", "/100%25/%25zz/%254"}, /* a '%' that starts no escape */
        {"/-._~:@!$&'()*+,;=[]#?", "/-._~:@!$&'()*+,;=[]#?"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        json_t *doc = json_loads(problem_for(f, cases[i].path), 0, NULL);
        if (doc == NULL)
            fail_msg("case %zu: not JSON", i);
        assert_string_equal(json_string_value(json_object_get(doc, "instance")), cases[i].instance);
        json_decref(doc);
    }
    /* The detail, echoing the same bytes, is UTF-8 with U+FFFD for what was not. */
    json_t *doc = json_loads(problem_for(f, "/v1/jobs/\xff\xfe"), 0, NULL);
    assert_non_null(doc);
    assert_string_equal(json_string_value(json_object_get(doc, "detail")), "/v1/jobs/\xef\xbf\xbd\xef\xbf\xbd");
    json_decref(doc);
    /* At most 512 bytes of the target are echoed, each at most three once escaped. */
    char longpath[700];
    memset(longpath, 0xff, sizeof(longpath) - 1);
    longpath[0] = '/';
    longpath[sizeof(longpath) - 1] = '\0';
    doc = json_loads(problem_for(f, longpath), 0, NULL);
    assert_non_null(doc);
    assert_int_equal(strlen(json_string_value(json_object_get(doc, "instance"))), 1 + 511 * 3);
    json_decref(doc);
}

static void prefer(struct fake *f, int *async, int *wait)
{
    *async = -7;
    *wait = -7;
    ad_http_prefer(&f->req, async, wait);
}

static void test_prefer(void **state)
{
    struct fake *f = *state;
    int async, wait;
    prefer(f, &async, &wait);
    assert_int_equal(async, 0);
    assert_int_equal(wait, -1);

    add_header(f, "prefer", "respond-async, wait=10");
    prefer(f, &async, &wait);
    assert_int_equal(async, 1);
    assert_int_equal(wait, 10);
}

static void test_prefer_variants(void **state)
{
    struct fake *f = *state;
    static const struct {
        const char *value;
        int async, wait;
    } cases[] = {
        {"wait=5", 0, 5},
        {"Respond-Async", 1, -1},
        {"WAIT=7", 0, 7},
        {"  wait=3  ,  respond-async  ", 1, 3},
        {"respond-async; foo=bar", 1, -1},
        {"wait=5; x=y", 0, 5},
        {"wait=0", 0, 0},
        {"wait=86400", 0, 86400},
        {"wait=86401", 0, -1},
        {"wait=-1", 0, -1},
        {"wait=abc", 0, -1},
        {"wait=", 0, -1},
        {"wait", 0, -1},
        {"respond-asyncx", 0, -1},
        {"handling=lenient", 0, -1},
        {"return=minimal,wait=2", 0, 2},
        {"", 0, -1},
        {",,,", 0, -1},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        h2o_mem_clear_pool(&f->req.pool);
        memset(&f->req.headers, 0, sizeof(f->req.headers));
        add_header(f, "prefer", cases[i].value);
        int async, wait;
        prefer(f, &async, &wait);
        if (async != cases[i].async || wait != cases[i].wait)
            fail_msg("Prefer: \"%s\": async=%d wait=%d, want async=%d wait=%d", cases[i].value, async, wait,
                     cases[i].async, cases[i].wait);
    }

    /* Several Prefer headers combine. */
    h2o_mem_clear_pool(&f->req.pool);
    memset(&f->req.headers, 0, sizeof(f->req.headers));
    add_header(f, "prefer", "respond-async");
    add_header(f, "x-other", "wait=99");
    add_header(f, "prefer", "wait=4");
    int async, wait;
    prefer(f, &async, &wait);
    assert_int_equal(async, 1);
    assert_int_equal(wait, 4);
}

/*
 * RFC 7240 §2: preference = token [ BWS "=" BWS word ], word = token / quoted-string, and a recipient must
 * accept the optional whitespace (RFC 9110 §5.6.3). So `wait = 5` and `wait="5"` both mean wait=5.
 */
static void test_prefer_rfc7240_syntax(void **state)
{
    struct fake *f = *state;
    static const char *const values[] = {"wait = 5", "wait=\"5\"", "wait =\"5\"", "respond-async, wait\t=\t5"};
    for (size_t i = 0; i < sizeof(values) / sizeof(values[0]); i++) {
        h2o_mem_clear_pool(&f->req.pool);
        memset(&f->req.headers, 0, sizeof(f->req.headers));
        add_header(f, "prefer", values[i]);
        int async, wait;
        prefer(f, &async, &wait);
        if (wait != 5)
            fail_msg("Prefer: %s: wait=%d, want 5", values[i], wait);
    }
}

static void test_header_lookup(void **state)
{
    struct fake *f = *state;
    assert_null(ad_http_get(&f->req, H2O_TOKEN_IF_NONE_MATCH));
    assert_null(ad_http_get_str(&f->req, "idempotency-key"));
    add_header(f, "if-none-match", "\"abc\"");
    add_header(f, "idempotency-key", "k-1");
    add_header(f, "last-event-id", "7");
    add_header(f, "idempotency-key", "k-2");
    const char *v = ad_http_get(&f->req, H2O_TOKEN_IF_NONE_MATCH);
    assert_non_null(v);
    assert_string_equal(v, "\"abc\""); /* NUL-terminated copy */
    /* A field sent more than once reads as its values in order, joined as one list (RFC 9110 §5.3). */
    assert_string_equal(ad_http_get_str(&f->req, "idempotency-key"), "k-1, k-2");
    assert_string_equal(ad_http_get_str(&f->req, "last-event-id"), "7");
    assert_null(ad_http_get_str(&f->req, "idempotency"));
    add_header(f, "if-none-match", "W/\"def\"");
    add_header(f, "if-none-match", "\"ghi\"");
    assert_string_equal(ad_http_get(&f->req, H2O_TOKEN_IF_NONE_MATCH), "\"abc\", W/\"def\", \"ghi\"");

    /* Response headers: the value is copied, so the caller's buffer may change. */
    char buf[16] = "no-cache";
    ad_http_header(&f->req, H2O_TOKEN_CACHE_CONTROL, buf);
    ad_http_headerf(&f->req, H2O_TOKEN_RETRY_AFTER, "%d", 17);
    ad_http_header_str(&f->req, "preference-applied", "wait=3");
    memset(buf, 'X', sizeof(buf) - 1);
    ssize_t i = h2o_find_header(&f->req.res.headers, H2O_TOKEN_CACHE_CONTROL, -1);
    assert_true(i >= 0);
    assert_int_equal(f->req.res.headers.entries[i].value.len, 8);
    assert_memory_equal(f->req.res.headers.entries[i].value.base, "no-cache", 8);
    i = h2o_find_header(&f->req.res.headers, H2O_TOKEN_RETRY_AFTER, -1);
    assert_true(i >= 0);
    assert_memory_equal(f->req.res.headers.entries[i].value.base, "17", 2);
    i = h2o_find_header_by_str(&f->req.res.headers, H2O_STRLIT("preference-applied"), -1);
    assert_true(i >= 0);
    assert_memory_equal(f->req.res.headers.entries[i].value.base, "wait=3", 6);
}

int main(void)
{
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(test_match_routes),
        T(test_match_id_at_another_place),
        T(test_match_not_found),
        T(test_match_id_length),
        T(test_match_method_not_allowed),
        T(test_query),
        T(test_query_names_decoded),
        T(test_query_repeated),
        T(test_problem_instance),
        T(test_prefer),
        T(test_prefer_variants),
        T(test_prefer_rfc7240_syntax),
        T(test_header_lookup),
    };
#undef T
    return cmocka_run_group_tests(tests, NULL, NULL);
}
