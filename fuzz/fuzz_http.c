/*
 * fuzz_http.c - libFuzzer target: what src/http.c reads from a request. The first input byte picks one, the
 * rest is the request's text:
 *   0 Prefer headers (respond-async, wait=N), the rest split into several headers at 0x01 bytes
 *   1 a query string: every parameter the API reads, percent-decoded
 *   2 a path against routes shaped like the API's ({id} segments, ":action" suffixes)
 * Each result is held to what the callers rely on; a violation aborts.
 */
#include <h2o.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "http/http.h"

static void check(int ok)
{
    if (!ok)
        abort();
}

static void prefer(h2o_req_t *req, const char *s, size_t len)
{
    for (const char *p = s, *end = s + len; p <= end;) {
        const char *q = memchr(p, 1, (size_t)(end - p));
        if (q == NULL)
            q = end;
        h2o_add_header_by_str(&req->pool, &req->headers, H2O_STRLIT("prefer"), 0, NULL, p, (size_t)(q - p));
        p = q + 1;
    }
    int async = -1, wait = -2;
    ad_http_prefer(req, &async, &wait);
    check((async == 0 || async == 1) && wait >= -1 && wait <= 86400);
}

static void query(h2o_req_t *req, const char *s, size_t len)
{
    static const char *const names[] = {"limit",      "cursor", "status", "type",        "wait", "since",
                                        "onComplete", "exp",    "sig",    "lastEventId", ""};
    struct ad_request r = {.req = req, .query = h2o_iovec_init(s, len)};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        const char *v = ad_http_query(&r, names[i]);
        check(v == NULL || strlen(v) <= len);
    }
}

static void route(h2o_req_t *req, const char *s, size_t len)
{
    static const struct ad_route_def table[] = {
        {"POST", "/v1/jobs", NULL, 0},
        {"GET", "/v1/jobs/{id}", NULL, 0},
        {"DELETE", "/v1/jobs/{id}", NULL, 0},
        {"GET", "/v1/jobs/{id}/result", NULL, 0},
        {"POST", "/v1/jobs/{id}:cancel", NULL, 0},
        {"POST", "/v1/webhooks/{id}/deliveries/{id}:redeliver", NULL, 0},
    };
    static const char *const methods[] = {"GET", "POST", "DELETE", "HEAD", "PUT"};
    req->method = h2o_iovec_init(methods[len % 5], strlen(methods[len % 5]));
    const struct ad_route_def *def = NULL;
    char *id = NULL;
    h2o_iovec_t allow = {NULL, 0};
    ad_err e = ad_http_match(req, table, sizeof(table) / sizeof(table[0]), h2o_iovec_init(s, len), &def, &id, &allow);
    if (e == AD_E_OK) {
        check(def != NULL);
        if (id != NULL) {
            size_t n = strlen(id);
            check(n >= 1 && n <= 64 &&
                  strspn(id, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-") == n);
        }
    } else if (e == AD_E_METHOD_NOT_ALLOWED) {
        check(allow.base != NULL && allow.len > 0);
    } else {
        check(e == AD_E_NOT_FOUND);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    h2o_req_t req;
    memset(&req, 0, sizeof(req));
    h2o_mem_init_pool(&req.pool);
    const char *s = (const char *)data + 1;
    size_t len = size - 1;
    switch (data[0] % 3) {
    case 0:
        prefer(&req, s, len);
        break;
    case 1:
        query(&req, s, len);
        break;
    default:
        route(&req, s, len);
    }
    h2o_mem_clear_pool(&req.pool);
    return 0;
}
