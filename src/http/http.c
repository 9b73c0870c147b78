/*
 * http.c - routing, problem responses and request helpers on top of h2o.
 *
 * This file knows HTTP and nothing about jobs. Every error answer is application/problem+json built
 * from the AD_ERRNO_MAP entry of its code; no handler writes a status line for an error by hand.
 */
#include "http/http.h"
#include "http/http_int.h"
#include "common/json.h"
#include "common/metrics.h"
#include "common/timer.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

static int is_id_char(int c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
}

/* Where the id starting at a place of the path ends: the patterns that share a prefix all scan the same id (a
 * worker's report is tried against nine of them), so the end found first is kept for the others. */
struct id_scan {
    const char *start, *end;
};

/* Match path against pattern; on success returns 1 and the {id} span. */
static int match_pattern(const char *pat, h2o_iovec_t path, h2o_iovec_t *id, struct id_scan *scan)
{
    const char *p = path.base, *end = path.base + path.len;
    while (*pat != '\0') {
        if (*pat == '{' && strncmp(pat, "{id}", 4) == 0) {
            const char *start = p;
            if (scan->start != start) {
                while (p < end && is_id_char(*p))
                    p++;
                *scan = (struct id_scan){start, p};
            }
            p = scan->end;
            if (p == start || p - start > 64)
                return 0;
            *id = h2o_iovec_init(start, p - start);
            pat += 4;
            continue;
        }
        if (p == end || *p != *pat)
            return 0;
        p++;
        pat++;
    }
    return p == end;
}

ad_err ad_http_match(h2o_req_t *req, const struct ad_route_def *table, size_t n, h2o_iovec_t path,
                     const struct ad_route_def **out, char **id, h2o_iovec_t *allow)
{
    /* HEAD is GET without the body (h2o drops it), so it is routed as GET. */
    h2o_iovec_t method = req->method;
    if (h2o_memis(method.base, method.len, H2O_STRLIT("HEAD")))
        method = h2o_iovec_init(H2O_STRLIT("GET"));
    /* The routes of the request's method first: most requests match one, and the others are only walked to
     * tell 405 (with the methods that path has) from 404. */
    struct id_scan scan = {NULL, NULL};
    for (size_t i = 0; i < n; i++) {
        h2o_iovec_t span = {NULL, 0};
        if (!h2o_memis(method.base, method.len, table[i].method, strlen(table[i].method)) ||
            !match_pattern(table[i].pattern, path, &span, &scan))
            continue;
        *out = &table[i];
        *id = span.base != NULL ? h2o_mem_alloc_pool(&req->pool, span.len + 1) : NULL;
        if (*id != NULL) {
            memcpy(*id, span.base, span.len);
            (*id)[span.len] = '\0';
        }
        return AD_E_OK;
    }
    struct ad_buf methods;
    ad_buf_init(&methods, 256);
    for (size_t i = 0; i < n; i++) {
        h2o_iovec_t span = {NULL, 0};
        if (!match_pattern(table[i].pattern, path, &span, &scan))
            continue;
        /* A path with GET has HEAD too (routed as GET above), and Allow says so (RFC 9110 §10.2.1). */
        if (strstr(methods.data != NULL ? methods.data : "", table[i].method) == NULL)
            ad_buf_printf(&methods, "%s%s%s", methods.len != 0 ? ", " : "", table[i].method,
                          strcmp(table[i].method, "GET") == 0 ? ", HEAD" : "");
    }
    ad_err result = methods.len != 0 ? AD_E_METHOD_NOT_ALLOWED : AD_E_NOT_FOUND;
    if (result == AD_E_METHOD_NOT_ALLOWED)
        *allow = h2o_strdup(&req->pool, methods.data, methods.len);
    ad_buf_free(&methods);
    return result;
}

void ad_http_header(h2o_req_t *req, const h2o_token_t *token, const char *value)
{
    size_t len = strlen(value);
    h2o_add_header(&req->pool, &req->res.headers, token, NULL, h2o_strdup(&req->pool, value, len).base, len);
}

void ad_http_header_int(h2o_req_t *req, const h2o_token_t *token, int64_t value)
{
    char *buf = h2o_mem_alloc_pool(&req->pool, AD_INT_CHARS + 1);
    h2o_add_header(&req->pool, &req->res.headers, token, NULL, buf, ad_format_int(value, buf));
}

void ad_http_header_cat(h2o_req_t *req, const h2o_token_t *token, const char *a, const char *b, const char *c)
{
    h2o_iovec_t v = h2o_concat(&req->pool, h2o_iovec_init(a, strlen(a)), h2o_iovec_init(b, strlen(b)),
                               h2o_iovec_init(c, strlen(c)));
    h2o_add_header(&req->pool, &req->res.headers, token, NULL, v.base, v.len);
}

void ad_http_headerf(h2o_req_t *req, const h2o_token_t *token, const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    ad_http_header(req, token, buf);
}

void ad_http_header_str(h2o_req_t *req, const char *name, const char *value)
{
    size_t len = strlen(value);
    h2o_add_header_by_str(&req->pool, &req->res.headers, name, strlen(name), 0, NULL,
                          h2o_strdup(&req->pool, value, len).base, len);
}

static const char *reason(int status)
{
    switch (status) {
    case 200:
        return "OK";
    case 201:
        return "Created";
    case 202:
        return "Accepted";
    case 204:
        return "No Content";
    case 207:
        return "Multi-Status";
    case 303:
        return "See Other";
    case 304:
        return "Not Modified";
    case 400:
        return "Bad Request";
    case 401:
        return "Unauthorized";
    case 403:
        return "Forbidden";
    case 404:
        return "Not Found";
    case 405:
        return "Method Not Allowed";
    case 409:
        return "Conflict";
    case 410:
        return "Gone";
    case 413:
        return "Content Too Large";
    case 415:
        return "Unsupported Media Type";
    case 422:
        return "Unprocessable Content";
    case 429:
        return "Too Many Requests";
    case 431:
        return "Request Header Fields Too Large";
    case 499: /* nginx's: never read, the client has gone (conn.c) */
        return "Client Closed Request";
    case 503:
        return "Service Unavailable";
    default:
        return status < 400 ? "OK" : status < 500 ? "Client Error" : "Server Error";
    }
}

/* Every answer leaves through here. The length is set explicitly: without it h2o would close the
 * HTTP/1.1 connection after any non-200 answer. h2o_send_inline copies body into the request's pool. */
static int send_body(h2o_req_t *req, int status, const char *content_type, const char *body, size_t len)
{
    if (ad_http_charge_answer(req, status, len) != 0) {
        /* Its connection is being closed for what it holds already (conn.c): nothing more for it. */
        status = 503;
        content_type = NULL;
        len = 0;
        req->http1_is_persistent = 0;
    }
    req->res.status = status;
    req->res.reason = reason(status);
    if (content_type != NULL)
        ad_http_header(req, H2O_TOKEN_CONTENT_TYPE, content_type);
    if (status != 204 && status != 304)
        req->res.content_length = len;
    if (len != 0) {
        h2o_send_inline(req, body, len);
        return 0;
    }
    /* No zero-length buffer: libh2o's evloop counts one as unwritten, waits for the socket to become
     * writable and writes it in a second writev, with an epoll_ctl pair per request (a 304 costs 20% more). */
    static h2o_generator_t generator = {NULL, NULL};
    h2o_start_response(req, &generator);
    h2o_send(req, NULL, 0, H2O_SEND_STATE_FINAL);
    return 0;
}

int ad_http_send(struct ad_request *r, int status, const char *content_type, const char *body, size_t len)
{
    return send_body(r->req, status, content_type, body, len);
}

int ad_http_json(struct ad_request *r, int status, const char *body, size_t len)
{
    return send_body(r->req, status, "application/json", body, len);
}

int ad_http_empty(h2o_req_t *req, int status)
{
    return send_body(req, status, NULL, "", 0);
}

int ad_http_problem_doc(h2o_req_t *req, const char *json, int status)
{
    return send_body(req, status, "application/problem+json", json, strlen(json));
}

/* Whether c may stand as it is in a URI reference (RFC 3986 §2: unreserved, gen-delims, sub-delims). */
static int uri_char(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           (c != '\0' && strchr("-._~:/?#[]@!$&'()*+,;=", c) != NULL);
}

static int hexval(int c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/*
 * The instance member is a URI reference (RFC 9457 §3.1.5), so the request target is echoed as one: a byte
 * that may not stand in a URI (a control, a space, '"', '\\', a byte of UTF-8 or not) is percent-encoded, and
 * so is a '%' that does not start an escape. What a client sent as a valid URI reads back byte for byte, and
 * the result is ASCII, whatever was sent. The caller frees it.
 */
static char *uri_escape(const char *s, size_t len)
{
    static const char hex[] = "0123456789ABCDEF";
    char *out = ad_malloc(len * 3 + 1), *o = out;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (uri_char(c) || (c == '%' && len - i >= 3 && hexval((unsigned char)s[i + 1]) >= 0 &&
                            hexval((unsigned char)s[i + 2]) >= 0)) {
            *o++ = (char)c;
        } else {
            *o++ = '%';
            *o++ = hex[c >> 4];
            *o++ = hex[c & 15];
        }
    }
    *o = '\0';
    return out;
}

/* ---- request ids, the request counter and the access log (http.h) ---- */

/* What is known of a request for its id and its access line. It is found from the request through req->env,
 * h2o's list of per-request name/value pairs, which nothing else in the daemon uses: one pair names note_name
 * (by address) and points at the note, in the request's pool. */
struct req_note {
    struct ad_request *r; /* NULL until routed */
    const char *route;    /* the route template, or NULL */
    int64_t start_ns;     /* monotonic, when the note was made: h2o's own timestamps are the loop's cached time */
    char id[AD_REQUEST_ID_MAX + 1];
};

static const char note_name[] = "acceptd";

static struct req_note *note_find(h2o_req_t *req)
{
    for (size_t i = 0; i + 1 < req->env.size; i += 2)
        if (req->env.entries[i].base == note_name)
            return (struct req_note *)req->env.entries[i + 1].base;
    return NULL;
}

/* An id a client may choose: one a log line or a header can carry as it is. */
static int id_sane(const char *v, size_t len)
{
    if (len == 0 || len > AD_REQUEST_ID_MAX)
        return 0;
    for (size_t i = 0; i < len; i++)
        if (!is_id_char((unsigned char)v[i]) && v[i] != '.')
            return 0;
    return 1;
}

static struct req_note *note_get(h2o_req_t *req)
{
    struct req_note *n = note_find(req);
    if (n != NULL)
        return n;
    n = h2o_mem_alloc_pool(&req->pool, sizeof(*n));
    memset(n, 0, sizeof(*n));
    n->start_ns = ad_mono_ns();
    /* Taken only when sent once: two fields are two ids, neither of them the request's. */
    ssize_t i = h2o_find_header_by_str(&req->headers, H2O_STRLIT("x-request-id"), -1);
    h2o_iovec_t v = i >= 0 ? req->headers.entries[i].value : h2o_iovec_init(NULL, 0);
    if (i >= 0 && h2o_find_header_by_str(&req->headers, H2O_STRLIT("x-request-id"), i) < 0 && id_sane(v.base, v.len)) {
        memcpy(n->id, v.base, v.len);
    } else {
        uint8_t raw[12]; /* 96 bits: not guessed, and 16 characters */
        ad_random_bytes(raw, sizeof(raw));
        ad_b64url_encode(raw, sizeof(raw), n->id);
    }
    h2o_vector_reserve(&req->pool, &req->env, req->env.size + 2);
    req->env.entries[req->env.size++] = h2o_iovec_init(note_name, sizeof(note_name) - 1);
    req->env.entries[req->env.size++] = h2o_iovec_init(n, sizeof(*n));
    return n;
}

const char *ad_http_request_id(h2o_req_t *req)
{
    return note_get(req)->id;
}

void ad_http_note_route(struct ad_request *r, const char *route)
{
    struct req_note *n = note_get(r->req);
    n->r = r;
    if (route != NULL)
        n->route = route;
}

/* Every answer passes the problem filter, which calls this as it starts: after h2o's own error answers have
 * cleared the headers, so that those carry the id too. */
static void echo_request_id(h2o_req_t *req)
{
    const char *id = ad_http_request_id(req);
    h2o_add_header_by_str(&req->pool, &req->res.headers, H2O_STRLIT("x-request-id"), 0, NULL, id, strlen(id));
}

void ad_http_takeover_headers(h2o_req_t *req)
{
    echo_request_id(req);
}

struct access_logger {
    h2o_logger_t super;
    int access_log;
};

static int64_t tv_us(const struct timeval *tv)
{
    return (int64_t)tv->tv_sec * 1000000 + tv->tv_usec;
}

/* The access line: never the query string, where signed URLs carry their signature and expiry, and never a
 * header, where keys are; the path is cut at 512 bytes. */
static void access_line(h2o_req_t *req, const struct req_note *n)
{
    char method[32], path[513];
    snprintf(method, sizeof(method), "%.*s", (int)(req->method.len < 31 ? req->method.len : 31), req->method.base);
    size_t plen = req->query_at != SIZE_MAX ? req->query_at : req->path.len;
    snprintf(path, sizeof(path), "%.*s", (int)(plen < 512 ? plen : 512), req->path.base);
    int64_t us;
    if (n != NULL) {
        us = (ad_mono_ns() - n->start_ns) / 1000;
    } else {
        struct timeval now;
        gettimeofday(&now, NULL);
        us = tv_us(&now) - tv_us(&req->processed_at.at);
    }
    const char *tenant =
        n != NULL && n->r != NULL && n->r->tenant != NULL && n->r->tenant[0] != '\0' ? n->r->tenant : "-";
    struct ad_log_field f[] = {
        {"method", method, 0},
        {"path", path, 0},
        {"status", NULL, req->res.status},
        {"bytes", NULL, (int64_t)req->bytes_sent},
        {"durationUs", NULL, us > 0 ? us : 0},
        {"tenant", tenant, 0},
        {"requestId", n != NULL ? n->id : "-", 0},
    };
    ad_log_fields("info", "access", f, sizeof(f) / sizeof(f[0]));
}

static void log_access(h2o_logger_t *self, h2o_req_t *req)
{
    const struct req_note *n = note_find(req);
    if (req->res.status != 0) /* 0: the client went away before any answer */
        ad_metrics_request(n != NULL && n->route != NULL ? n->route : "unmatched", req->res.status);
    if (((struct access_logger *)self)->access_log)
        access_line(req, n);
}

void ad_http_register_logger(h2o_pathconf_t *conf, int access_log)
{
    struct access_logger *l = (struct access_logger *)h2o_create_logger(conf, sizeof(*l));
    l->super.log_access = log_access;
    l->access_log = access_log;
}

static char *problem_instance(h2o_req_t *req);

/* The problem document for err with the given status, appended to b. */
static void problem_render(h2o_req_t *req, struct ad_buf *b, ad_err err, int status, const char *detail,
                           const char *extra)
{
    AD_JSON_OPEN(b, "type");
    AD_BUF_LIT(b, "\"" AD_PROBLEM_BASE);
    ad_json_chars(b, ad_err_code(err));
    AD_BUF_LIT(b, "\"");
    AD_JSON_KEY(b, "title");
    ad_json_str(b, ad_err_title(err));
    AD_JSON_KEY(b, "status");
    ad_json_int(b, status);
    AD_JSON_KEY(b, "detail");
    ad_json_str(b, detail != NULL ? detail : ad_err_title(err));
    char *instance = problem_instance(req);
    AD_JSON_KEY(b, "instance");
    ad_json_str(b, instance);
    free(instance);
    AD_JSON_KEY(b, "code");
    ad_json_str(b, ad_err_code(err));
    AD_JSON_KEY(b, "requestId");
    ad_json_str(b, ad_http_request_id(req));
    if (extra != NULL)
        ad_buf_str(b, extra); /* members the caller wrote with the same writer (ad_verr) */
    AD_BUF_LIT(b, "}");
}

void ad_http_problem_render(h2o_req_t *req, struct ad_buf *b, ad_err err, const char *detail, const char *extra)
{
    problem_render(req, b, err, ad_err_status(err), detail, extra);
}

/* The problem document for err with the given status, allocated in the request's pool. */
static h2o_iovec_t problem_body(h2o_req_t *req, ad_err err, int status, const char *detail, const char *extra)
{
    struct ad_buf b;
    ad_buf_init(&b, SIZE_MAX);
    problem_render(req, &b, err, status, detail, extra);
    h2o_iovec_t body = h2o_strdup(&req->pool, b.data, b.len);
    ad_buf_free(&b);
    return body;
}

int ad_http_problem(h2o_req_t *req, ad_err err, const char *detail, const char *extra)
{
    int status = ad_err_status(err);
    h2o_iovec_t body = problem_body(req, err, status, detail, extra);
    if (err == AD_E_UNAUTHORIZED)
        ad_http_header(req, H2O_TOKEN_WWW_AUTHENTICATE, "Bearer realm=\"acceptd\"");
    if (err == AD_E_UNAVAILABLE || err == AD_E_STORAGE_FULL)
        ad_http_header(req, H2O_TOKEN_RETRY_AFTER, "1");
    ad_http_header(req, H2O_TOKEN_CACHE_CONTROL, "no-store");
    return send_body(req, status, "application/problem+json", body.base, body.len);
}

/*
 * h2o answers a few errors itself before any handler runs (a body over its entity limit, a malformed
 * request) with a text/plain body. This filter swaps such bodies for a problem document, so that no
 * answer of the daemon is ever anything but JSON.
 */
struct problem_filter {
    h2o_filter_t super;
    size_t body_limit, part_limit; /* what a 413 names as the limits: limits.maxBodyBytes, maxUploadPartBytes */
};

struct problem_ostream {
    h2o_ostream_t super;
    h2o_iovec_t body;
};

static void problem_do_send(h2o_ostream_t *self, h2o_req_t *req, h2o_iovec_t *bufs, size_t bufcnt,
                            h2o_send_state_t state)
{
    struct problem_ostream *p = (struct problem_ostream *)self;
    h2o_iovec_t body = p->body;
    p->body = h2o_iovec_init(NULL, 0);
    h2o_ostream_send_next(self, req, &body, body.len != 0 ? 1 : 0, state);
}

/* The code of such an answer: the generic one of its status, the first listed in error.h. */
static ad_err err_for_status(int status)
{
    for (int e = 0; e < AD_E__COUNT; e++)
        if (ad_err_status((ad_err)e) == status)
            return (ad_err)e;
    return status < 500 ? AD_E_INVALID_REQUEST : AD_E_INTERNAL;
}

static void problem_setup_ostream(h2o_filter_t *self, h2o_req_t *req, h2o_ostream_t **slot)
{
    ad_http_linger_arm(req);
    echo_request_id(req);
    ssize_t ct = h2o_find_header(&req->res.headers, H2O_TOKEN_CONTENT_TYPE, -1);
    if (req->res.status >= 400 && ct >= 0 &&
        h2o_memis(req->res.headers.entries[ct].value.base, 10, H2O_STRLIT("text/plain"))) {
        ad_err err = err_for_status(req->res.status);
        const char *detail = req->res.reason;
        if (req->res.status == 413) {
            char *buf = h2o_mem_alloc_pool(&req->pool, 160);
            const struct problem_filter *f = (const struct problem_filter *)self;
            snprintf(buf, 160,
                     "the body is larger than the limit of %zu bytes (a part of a result artifact may have %zu: "
                     "limits.maxUploadPartBytes)",
                     f->body_limit, f->part_limit);
            detail = buf;
        }
        struct problem_ostream *p = (struct problem_ostream *)h2o_add_ostream(req, sizeof(*p), slot);
        p->super.do_send = problem_do_send;
        p->body = problem_body(req, err, req->res.status, detail, NULL);
        req->res.headers.entries[ct].value = h2o_iovec_init(H2O_STRLIT("application/problem+json"));
        req->res.content_length = p->body.len;
        slot = &p->super.next;
    }
    h2o_setup_next_ostream(req, slot);
}

void ad_http_register_problem_filter(h2o_pathconf_t *conf, size_t body_limit, size_t part_limit)
{
    struct problem_filter *f = (struct problem_filter *)h2o_create_filter(conf, sizeof(*f));
    f->super.on_setup_ostream = problem_setup_ostream;
    f->body_limit = body_limit;
    f->part_limit = part_limit;
}

int ad_http_problemf(h2o_req_t *req, ad_err err, const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    return ad_http_problem(req, err, buf, NULL);
}

/* The next field named by token (or by name when token is NULL) after index from; -1 when none. */
static ssize_t find_field(h2o_req_t *req, const h2o_token_t *token, const char *name, ssize_t from)
{
    return token != NULL ? h2o_find_header(&req->headers, token, from)
                         : h2o_find_header_by_str(&req->headers, name, strlen(name), from);
}

/* A field sent more than once reads as one value, the fields joined by ", " in order (RFC 9110 §5.3): a list
 * field then reads whole, and a singleton field sent twice reads as a list its parser refuses. */
static const char *field_value(h2o_req_t *req, const h2o_token_t *token, const char *name)
{
    ssize_t i = find_field(req, token, name, -1);
    if (i < 0)
        return NULL;
    h2o_iovec_t v = req->headers.entries[i].value;
    ssize_t next = find_field(req, token, name, i);
    if (next < 0)
        return h2o_strdup(&req->pool, v.base, v.len).base;
    for (; next >= 0; next = find_field(req, token, name, next))
        v = h2o_concat(&req->pool, v, h2o_iovec_init(H2O_STRLIT(", ")), req->headers.entries[next].value);
    return v.base; /* h2o_concat ends it with a NUL */
}

const char *ad_http_get(h2o_req_t *req, const h2o_token_t *token)
{
    return field_value(req, token, NULL);
}

const char *ad_http_get_str(h2o_req_t *req, const char *name)
{
    return field_value(req, NULL, name);
}

/* The byte the query text at *p stands for, moving *p past it: %XX is decoded and '+' is a space. %00 stays as
 * it is, like a bad escape: a NUL would end the C string every caller reads, so "type=a%00b" would filter by
 * type a. */
static int query_byte(const char **p, const char *end)
{
    const char *v = *p;
    if (*v == '%' && end - v >= 3 && hexval(v[1]) >= 0 && hexval(v[2]) >= 0 && (v[1] != '0' || v[2] != '0')) {
        *p = v + 3;
        return hexval(v[1]) * 16 + hexval(v[2]);
    }
    *p = v + 1;
    return *v == '+' ? ' ' : (unsigned char)*v;
}

/* [p, end) decoded into the request's pool, NUL-terminated. */
static char *query_decode(h2o_req_t *req, const char *p, const char *end)
{
    char *out = h2o_mem_alloc_pool(&req->pool, end - p + 1), *o = out;
    while (p < end)
        *o++ = (char)query_byte(&p, end);
    *o = '\0';
    return out;
}

/* Whether the name [k, kend) decodes to name: "lim%69t" is the parameter limit, as URLSearchParams reads it. */
static int query_name_is(const char *k, const char *kend, const char *name)
{
    for (; k < kend; name++)
        if (*name == '\0' || query_byte(&k, kend) != (unsigned char)*name)
            return 0;
    return *name == '\0';
}

/* One parameter of a query string at a time: its name [name, name_end) and its value [value, end_of_it);
 * a parameter without '=' has an empty value. */
struct query_iter {
    const char *p, *end;
    const char *name, *name_end, *value, *value_end;
};

static void query_iter_init(struct query_iter *it, const struct ad_request *r)
{
    it->p = r->query.base;
    it->end = r->query.base + r->query.len;
}

static int query_next(struct query_iter *it)
{
    if (it->p >= it->end)
        return 0;
    const char *amp = memchr(it->p, '&', it->end - it->p);
    it->value_end = amp != NULL ? amp : it->end;
    const char *eq = memchr(it->p, '=', it->value_end - it->p);
    it->name = it->p;
    it->name_end = eq != NULL ? eq : it->value_end;
    it->value = eq != NULL ? eq + 1 : it->value_end;
    it->p = it->value_end + 1;
    return 1;
}

/*
 * The instance of a problem: the request target (uri_escape), but never more of it than a client could need to
 * recognise its request (512 bytes), and never the value of a signed URL's sig, which is a credential for as
 * long as the URL lives: "sig=redacted" stands in for it, as the access log leaves the query out. The caller
 * frees it.
 */
static char *problem_instance(h2o_req_t *req)
{
    size_t len = req->path.len < 512 ? req->path.len : 512;
    const char *target = req->path.base, *q = memchr(target, '?', len);
    struct ad_buf b;
    ad_buf_init(&b, 8192); /* "sig=x" grows by 7 bytes: 512 bytes of them fit */
    struct query_iter it = {.p = q != NULL ? q + 1 : target + len, .end = target + len};
    const char *copied = target;
    while (query_next(&it)) {
        if (it.value == it.value_end || !query_name_is(it.name, it.name_end, "sig"))
            continue;
        ad_buf_append(&b, copied, (size_t)(it.value - copied));
        AD_BUF_LIT(&b, "redacted");
        copied = it.value_end;
    }
    if (b.len == 0)
        return uri_escape(target, len);
    ad_buf_append(&b, copied, (size_t)(target + len - copied));
    char *out = uri_escape(b.data, b.len);
    ad_buf_free(&b);
    return out;
}

const char *ad_http_query(struct ad_request *r, const char *name)
{
    struct query_iter it;
    query_iter_init(&it, r);
    while (query_next(&it))
        if (query_name_is(it.name, it.name_end, name))
            return query_decode(r->req, it.value, it.value_end);
    return NULL;
}

static int cmp_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

const char *ad_http_query_repeated(struct ad_request *r)
{
    if (r->query.len == 0 || memchr(r->query.base, '&', r->query.len) == NULL)
        return NULL;
    size_t n = 0, cap = 1;
    for (size_t i = 0; i < r->query.len; i++)
        cap += r->query.base[i] == '&';
    /* Sorted rather than compared pairwise: a 32 KiB target (the cap, api.c) holds up to 10k parameters. */
    char **names = h2o_mem_alloc_pool(&r->req->pool, cap * sizeof(*names));
    struct query_iter it;
    query_iter_init(&it, r);
    while (query_next(&it))
        if (it.name_end > it.name)
            names[n++] = query_decode(r->req, it.name, it.name_end);
    qsort(names, n, sizeof(*names), cmp_names);
    for (size_t i = 1; i < n; i++)
        if (strcmp(names[i - 1], names[i]) == 0)
            return names[i];
    return NULL;
}

/* Call each(name, nlen, value, vlen, arg) for every preference of the request's Prefer fields; value is NULL
 * for a preference without one, and unquoted. Parameters after ';' are skipped: none is understood. */
static void prefer_each(h2o_req_t *req, void (*each)(const char *, size_t, const char *, size_t, void *), void *arg)
{
    for (ssize_t i = -1; (i = h2o_find_header_by_str(&req->headers, H2O_STRLIT("prefer"), i)) != -1;) {
        h2o_iovec_t v = req->headers.entries[i].value;
        const char *p = v.base, *end = v.base + v.len;
        while (p < end) {
            while (p < end && (*p == ' ' || *p == ',' || *p == '\t'))
                p++;
            const char *tok = p;
            while (p < end && *p != ',')
                p++;
            const char *tend = p;
            const char *semi = memchr(tok, ';', tend - tok);
            if (semi != NULL)
                tend = semi;
            while (tend > tok && (tend[-1] == ' ' || tend[-1] == '\t'))
                tend--;
            /* RFC 7240: token [ BWS "=" BWS word ], word = token / quoted-string */
            const char *eq = memchr(tok, '=', tend - tok);
            const char *nend = eq != NULL ? eq : tend;
            while (nend > tok && (nend[-1] == ' ' || nend[-1] == '\t'))
                nend--;
            const char *val = NULL, *vend = tend;
            if (eq != NULL) {
                val = eq + 1;
                while (val < vend && (*val == ' ' || *val == '\t'))
                    val++;
                if (vend - val >= 2 && *val == '"' && vend[-1] == '"') {
                    val++;
                    vend--;
                }
            }
            if (nend > tok)
                each(tok, nend - tok, val, val != NULL ? (size_t)(vend - val) : 0, arg);
        }
    }
}

struct prefer_parts {
    int respond_async, wait, ret;
};

static void prefer_part(const char *name, size_t nlen, const char *val, size_t vlen, void *arg)
{
    struct prefer_parts *pp = arg;
    long long n;
    if (val == NULL && h2o_lcstris(name, nlen, H2O_STRLIT("respond-async")))
        pp->respond_async = 1;
    else if (val != NULL && h2o_lcstris(name, nlen, H2O_STRLIT("wait")) && ad_parse_int(val, vlen, 0, 86400, &n) == 0)
        pp->wait = (int)n;
    else if (val != NULL && h2o_lcstris(name, nlen, H2O_STRLIT("return")) &&
             h2o_lcstris(val, vlen, H2O_STRLIT("minimal")))
        pp->ret = AD_PREFER_MINIMAL;
    else if (val != NULL && h2o_lcstris(name, nlen, H2O_STRLIT("return")) &&
             h2o_lcstris(val, vlen, H2O_STRLIT("representation")))
        pp->ret = AD_PREFER_REPRESENTATION;
}

void ad_http_prefer(h2o_req_t *req, int *respond_async, int *wait)
{
    struct prefer_parts pp = {0, -1, 0};
    prefer_each(req, prefer_part, &pp);
    *respond_async = pp.respond_async;
    *wait = pp.wait;
}

int ad_http_prefer_return(h2o_req_t *req)
{
    struct prefer_parts pp = {0, -1, 0};
    prefer_each(req, prefer_part, &pp);
    return pp.ret;
}

int ad_http_prefer_minimal(h2o_req_t *req)
{
    if (ad_http_prefer_return(req) != AD_PREFER_MINIMAL)
        return 0;
    ad_http_header_str(req, "preference-applied", "return=minimal");
    return 1;
}
