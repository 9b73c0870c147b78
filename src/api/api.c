/*
 * api.c - the route table, authentication and the helpers every resource handler shares.
 *
 * Every endpoint is listed in `routes` below; business routes from the configuration are matched first
 * and all submit jobs. A request reaches its handler only after its key and role were checked.
 */
#include "api/api_int.h"
#include "core/queues.h"
#include "job/job.h"
#include "common/json.h"
#include "common/version.h"
#include "common/timer.h"
#include "core/writer.h"
#include "http/sse.h"

#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#define ALL (AD_ROLE_CLIENT | AD_ROLE_WORKER | AD_ROLE_ADMIN)
#define CLIENT (AD_ROLE_CLIENT | AD_ROLE_ADMIN)
#define WORKER (AD_ROLE_WORKER | AD_ROLE_ADMIN)
#define SIGNED AD_API_SIGNED

/* First match wins, so literal paths come before the {id} patterns they would also match. */
static const struct ad_route_def routes[] = {
    {"GET", "/healthz", ad_api_healthz, 0},
    {"GET", "/readyz", ad_api_readyz, 0},
    {"GET", "/metrics", ad_api_metrics, AD_ROLE_ADMIN},
    {"GET", "/openapi.json", ad_api_openapi, 0},
    {"POST", "/v1/jobs", ad_api_submit, CLIENT},
    {"POST", "/v1/jobs:batch", ad_api_submit_batch, CLIENT},
    {"POST", "/v1/jobs:cancel", ad_api_bulk_cancel, CLIENT},
    {"POST", "/v1/jobs:retry", ad_api_bulk_retry, CLIENT},
    {"GET", "/v1/jobs", ad_api_list, ALL},
    {"GET", "/v1/jobs/changes", ad_api_changes, ALL},
    {"GET", "/v1/jobs/{id}", ad_api_get_job, ALL | SIGNED},
    {"DELETE", "/v1/jobs/{id}", ad_api_cancel, CLIENT},
    {"GET", "/v1/jobs/{id}/result", ad_api_get_result, ALL | SIGNED},
    {"PUT", "/v1/jobs/{id}/result", ad_api_put_result, WORKER},
    {"GET", "/v1/jobs/{id}/status", ad_api_get_status, ALL},
    {"GET", "/v1/jobs/{id}/events", ad_api_job_events, ALL | SIGNED},
    {"POST", "/v1/jobs/{id}:sign", ad_api_sign, CLIENT},
    {"GET", "/v1/events", ad_api_events, ALL},
    {"GET", "/v1/jobs/{id}/attempts", ad_api_attempts, ALL},
    {"POST", "/v1/jobs/{id}:cancel", ad_api_cancel, ALL},
    {"POST", "/v1/jobs/{id}:retry", ad_api_retry, CLIENT},
    {"POST", "/v1/jobs/{id}:heartbeat", ad_api_heartbeat, WORKER},
    {"POST", "/v1/jobs/{id}:complete", ad_api_complete, WORKER},
    {"POST", "/v1/jobs/{id}:fail", ad_api_fail_job, WORKER},
    {"POST", "/v1/jobs/{id}:release", ad_api_release, WORKER},
    {"POST", "/v1/leases", ad_api_lease, WORKER},
    {"GET", "/v1/leases", ad_api_lease_list, ALL},
    {"GET", "/v1/stats", ad_api_stats, ALL},
    {"GET", "/v1/queues", ad_api_queue_list, ALL},
    {"GET", "/ui", ad_api_ui, 0},
    {"GET", "/ui/", ad_api_ui, 0},
    {"GET", "/ui/{id}.html", ad_api_ui, 0},
    {"GET", "/ui/{id}.js", ad_api_ui, 0},
    {"GET", "/ui/{id}.css", ad_api_ui, 0},
    {"POST", "/v1/webhooks", ad_api_webhook_create, CLIENT},
    {"GET", "/v1/webhooks", ad_api_webhook_list, CLIENT},
    {"GET", "/v1/webhooks/{id}", ad_api_webhook_get, CLIENT},
    {"DELETE", "/v1/webhooks/{id}", ad_api_webhook_delete, CLIENT},
    {"GET", "/v1/webhooks/{id}/deliveries", ad_api_webhook_deliveries, CLIENT},
    {"POST", "/v1/webhooks/{id}:rotate", ad_api_webhook_rotate, CLIENT},
    {"POST", "/v1/webhooks/{id}:enable", ad_api_webhook_enable, CLIENT},
    {"POST", "/v1/deliveries/{id}:redeliver", ad_api_redeliver, CLIENT},
    {"GET", "/v1/operations", ad_api_op_list, ALL},
    {"GET", "/v1/operations/operations/{id}", ad_api_op_get, ALL | SIGNED},
    {"DELETE", "/v1/operations/operations/{id}", ad_api_op_delete, CLIENT},
    {"POST", "/v1/operations/operations/{id}:cancel", ad_api_op_cancel, CLIENT},
    {"POST", "/v1/operations/operations/{id}:wait", ad_api_op_wait, ALL | SIGNED},
    {"GET", "/v1/operations/{id}", ad_api_op_get, ALL | SIGNED},
    {"DELETE", "/v1/operations/{id}", ad_api_op_delete, CLIENT},
    {"POST", "/v1/operations/{id}:cancel", ad_api_op_cancel, CLIENT},
    {"POST", "/v1/operations/{id}:wait", ad_api_op_wait, ALL | SIGNED},
    {"POST", "/v1/batches", ad_api_batch_create, CLIENT},
    {"GET", "/v1/batches/{id}", ad_api_batch_get, ALL},
    {"GET", "/v1/batches/{id}/jobs", ad_api_batch_jobs, ALL},
    {"GET", "/v1/batches/{id}/events", ad_api_batch_events, ALL},
    {"POST", "/v1/batches/{id}:cancel", ad_api_batch_cancel, CLIENT},
    {"POST", "/v1/schedules", ad_api_schedule_create, CLIENT},
    {"GET", "/v1/schedules", ad_api_schedule_list, ALL},
    {"GET", "/v1/schedules/{id}", ad_api_schedule_get, ALL},
    {"PATCH", "/v1/schedules/{id}", ad_api_schedule_patch, CLIENT},
    {"DELETE", "/v1/schedules/{id}", ad_api_schedule_delete, CLIENT},
    {"POST", "/v1/schedules/{id}:trigger", ad_api_schedule_trigger, CLIENT},
};

static int peer_is_loopback(h2o_req_t *req)
{
    struct sockaddr_storage ss;
    socklen_t len = req->conn->callbacks->get_peername(req->conn, (struct sockaddr *)&ss);
    if (len == 0)
        return 0;
    if (ss.ss_family == AF_INET)
        return (ntohl(((struct sockaddr_in *)&ss)->sin_addr.s_addr) >> 24) == 127;
    if (ss.ss_family == AF_INET6) {
        const struct in6_addr *a = &((struct sockaddr_in6 *)&ss)->sin6_addr;
        return IN6_IS_ADDR_LOOPBACK(a) || (IN6_IS_ADDR_V4MAPPED(a) && a->s6_addr[12] == 127);
    }
    return ss.ss_family == AF_UNIX;
}

/* Find the key for a bearer token. Every configured key is compared in constant time, so the time taken
 * does not depend on which key (if any) matched. */
static const struct ad_key *find_key(const char *token, size_t len)
{
    const struct ad_key *found = NULL;
    for (size_t i = 0; i < ad_hub.cfg->nkeys; i++) {
        const struct ad_key *k = &ad_hub.cfg->keys[i];
        if (ad_ct_equal(k->key, strlen(k->key), token, len))
            found = k;
    }
    return found;
}

/*
 * Rate limits per key (limits.rateLimit, keys[i].rateLimit): a fixed window that opens at the key's first
 * request and counts every authenticated request until it closes. Each answer to a limited key carries the
 * policy and what is left of it (draft-ietf-httpapi-ratelimit-headers); the request past the quota is 429
 * with Retry-After at the window's end. The counts live in this process only: in cluster mode each node
 * counts its own.
 */
struct rate_window {
    int64_t start_ms; /* monotonic */
    int used;
};

static const struct ad_config *rate_cfg; /* the configuration rate_windows was sized for */
static struct rate_window *rate_windows; /* one per configured key, in the keys' order */

static ad_err rate_take(struct ad_request *r, const struct ad_key *k)
{
    const struct ad_config *cfg = ad_hub.cfg;
    const struct ad_rate *rate = k->rate.set ? &k->rate : &cfg->rate_limit;
    if (rate->requests == 0)
        return AD_E_OK;
    if (rate_cfg != cfg) {
        free(rate_windows);
        rate_windows = ad_calloc(cfg->nkeys, sizeof(*rate_windows));
        rate_cfg = cfg;
    }
    struct rate_window *w = &rate_windows[k - cfg->keys];
    int64_t now = ad_mono_ms();
    if (w->used == 0 || now >= w->start_ms + rate->window_ms) {
        w->start_ms = now;
        w->used = 0;
    }
    int64_t reset = (w->start_ms + rate->window_ms - now + 999) / 1000;
    int over = w->used >= rate->requests;
    if (!over)
        w->used++;
    char v[96];
    snprintf(v, sizeof(v), "\"default\";q=%d;w=%lld", rate->requests, (long long)(rate->window_ms / 1000));
    ad_http_header_str(r->req, "ratelimit-policy", v);
    snprintf(v, sizeof(v), "\"default\";r=%d;t=%lld", rate->requests - w->used, (long long)reset);
    ad_http_header_str(r->req, "ratelimit", v);
    if (!over)
        return AD_E_OK;
    ad_metrics_rate_limited();
    ad_http_header_int(r->req, H2O_TOKEN_RETRY_AFTER, reset);
    return AD_E_RATE_LIMITED;
}

int ad_api_rate_more(struct ad_request *r, int n)
{
    const char *v = ad_http_get(r->req, H2O_TOKEN_AUTHORIZATION);
    size_t len = v != NULL ? strlen(v) : 0;
    const struct ad_key *k = !ad_hub.open_mode && len >= 7 ? find_key(v + 7, len - 7) : NULL;
    const struct ad_rate *rate = k == NULL ? NULL : k->rate.set ? &k->rate : &ad_hub.cfg->rate_limit;
    if (rate == NULL || rate->requests == 0 || rate_cfg != ad_hub.cfg || n <= 0)
        return n;
    /* rate_take opened the window for this very request a moment ago. */
    struct rate_window *w = &rate_windows[k - ad_hub.cfg->keys];
    int granted = rate->requests - w->used < n ? rate->requests - w->used : n;
    w->used += granted;
    int64_t reset = (w->start_ms + rate->window_ms - ad_mono_ms() + 999) / 1000;
    char value[96];
    snprintf(value, sizeof(value), "\"default\";r=%d;t=%lld", rate->requests - w->used, (long long)reset);
    size_t vlen = strlen(value);
    h2o_set_header_by_str(&r->req->pool, &r->req->res.headers, H2O_STRLIT("ratelimit"), 0,
                          h2o_strdup(&r->req->pool, value, vlen).base, vlen, 1);
    if (granted < n)
        ad_http_header_int(r->req, H2O_TOKEN_RETRY_AFTER, reset);
    return granted;
}

/* roles: the route's; a route open to SIGNED also takes a signed URL when there is no Authorization. */
static ad_err authenticate(struct ad_request *r, int roles)
{
    if (ad_hub.open_mode) {
        if (!peer_is_loopback(r->req))
            return AD_E_FORBIDDEN;
        r->tenant = "default";
        r->roles = ALL;
        return AD_E_OK;
    }
    /* Two fields read as their list ("Bearer a, Bearer b"), which is no key: neither credential is chosen. */
    const char *v = ad_http_get(r->req, H2O_TOKEN_AUTHORIZATION);
    if (v == NULL)
        return (roles & SIGNED) != 0 ? ad_api_auth_signed(r) : AD_E_UNAUTHORIZED;
    size_t len = strlen(v);
    if (len < 7 || !h2o_lcstris(v, 7, H2O_STRLIT("bearer ")))
        return AD_E_UNAUTHORIZED;
    const struct ad_key *k = find_key(v + 7, len - 7);
    if (k == NULL)
        return AD_E_UNAUTHORIZED;
    r->tenant = k->tenant;
    r->roles = k->role == AD_ROLE_ADMIN ? ALL : (int)k->role;
    return rate_take(r, k);
}

/* The HTTP parser accepts up to ~400 KB of headers; no client of this API needs more than this. */
#define AD_MAX_HEADER_BYTES (32 * 1024)

static size_t header_bytes(const h2o_req_t *req)
{
    size_t n = req->path.len;
    for (size_t i = 0; i < req->headers.size; i++)
        n += req->headers.entries[i].name->len + req->headers.entries[i].value.len + 4;
    return n;
}

/*
 * Work the daemon does not queue, answered 503 with Retry-After: anything more on a connection with as many
 * requests outstanding as it may have streams (its client reset some while their work ran on: see http.h), and
 * a write (any method but GET and HEAD) while limits.maxQueuedWrites operations are with the writer, whose
 * queue would otherwise hold every request's memory for as long as clients outpace the store. Returns 1 when
 * answered.
 */
static int refuse_overload(h2o_req_t *req, int is_read)
{
    if (ad_http_conn_full(req)) {
        ad_http_problem(req, AD_E_UNAVAILABLE,
                        "this connection has as many requests outstanding as it may have streams, some of them "
                        "reset by the client; send this again once they have ended",
                        NULL);
        return 1;
    }
    size_t queued = ad_writer_outstanding();
    if (!is_read && queued >= ad_hub.cfg->max_queued_writes) {
        ad_http_problemf(req, AD_E_UNAVAILABLE,
                         "%zu writes are waiting for the store (limits.maxQueuedWrites); send this again later",
                         queued);
        return 1;
    }
    return 0;
}

static void api_event(const struct ad_job *j, const char *body, size_t len)
{
    ad_api_batch_events_changed(j);
    ad_api_events_notify(j, body, len);
}

static const struct ad_hub_listener api_listener = {
    .changed = ad_api_changes_notify,
    .published = ad_api_batches_changed,
    .event = api_event,
    .work = ad_api_leases_kick,
};

int ad_api_init(char *err, size_t errlen)
{
    ad_hub_listen(&api_listener);
    ad_api_stats_init();
    return ad_api_events_init(err, errlen);
}

void ad_api_shutdown(void)
{
    ad_api_events_shutdown();
    ad_api_heartbeats_flush(); /* before the drain, which waits for the writer */
}

/* A GET (or HEAD) of a configured route's resource, whose job id it notes in r->id. */
static int is_resource_get(struct ad_request *r)
{
    h2o_iovec_t m = r->req->method;
    if (!h2o_memis(m.base, m.len, H2O_STRLIT("GET")) && !h2o_memis(m.base, m.len, H2O_STRLIT("HEAD")))
        return 0;
    char *id;
    if (!ad_api_resource_match(r->req, r->path, &id))
        return 0;
    r->id = id;
    return 1;
}

int ad_api_on_req(h2o_handler_t *self, h2o_req_t *req)
{
    if (ad_http1_refuse_framing(req))
        return 0;
    if (header_bytes(req) > AD_MAX_HEADER_BYTES)
        return ad_http_problemf(req, AD_E_HEADERS_TOO_LARGE, "request headers may total at most %d bytes",
                                AD_MAX_HEADER_BYTES);
    struct ad_request *r = h2o_mem_alloc_pool(&req->pool, sizeof(*r));
    memset(r, 0, sizeof(*r));
    r->req = req;
    r->started_ns = ad_mono_ns();
    r->path = req->path;
    ad_http_note_route(r, NULL);
    if (req->query_at != SIZE_MAX) {
        r->path.len = req->query_at;
        r->query = h2o_iovec_init(req->path.base + req->query_at + 1, req->path.len - req->query_at - 1);
    }
    if (ad_api_cors(r))
        return 0;
    ad_handler handler = NULL;
    int roles = CLIENT;
    r->route = ad_config_route(ad_hub.cfg, req->method.base, req->method.len, r->path.base, r->path.len);
    if (r->route != NULL) {
        handler = ad_api_submit;
        ad_http_note_route(r, r->route->path);
    } else if (is_resource_get(r)) {
        handler = ad_api_get_resource;
        roles = ALL;
        ad_http_note_route(r, "{configured resource}");
    } else if (ad_api_queue_route(r, &handler, &roles)) {
        ad_http_note_route(r, "/v1/queues/{type}");
    } else {
        const struct ad_route_def *def;
        h2o_iovec_t allow;
        ad_err e = ad_http_match(req, routes, sizeof(routes) / sizeof(routes[0]), r->path, &def, &r->id, &allow);
        if (e == AD_E_METHOD_NOT_ALLOWED)
            h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_ALLOW, NULL, allow.base, allow.len);
        if (e != AD_E_OK)
            return ad_http_problem(req, e, NULL, NULL);
        handler = def->handler;
        roles = def->roles;
        ad_http_note_route(r, def->pattern);
    }
    int is_read = h2o_memis(req->method.base, req->method.len, H2O_STRLIT("GET")) ||
                  h2o_memis(req->method.base, req->method.len, H2O_STRLIT("HEAD"));
    if (ad_hub.shutting_down && !is_read)
        return ad_http_problem(req, AD_E_UNAVAILABLE, "shutting down; send this again to another node or later", NULL);
    if (refuse_overload(req, is_read))
        return 0;
    if (roles != 0) {
        ad_err e = authenticate(r, roles);
        if (e == AD_E_OK && (r->roles & roles) == 0)
            e = AD_E_FORBIDDEN;
        if (e == AD_E_RATE_LIMITED)
            return ad_http_problem(req, e, "this key has used its quota for the current window; see Retry-After", NULL);
        if (e != AD_E_OK)
            return ad_http_problem(req, e, NULL, NULL);
    }
    /* Refused here for every route, as a header field sent twice is: which of two values a handler read, or a
     * proxy in front checked, must never be a guess. */
    const char *twice = ad_http_query_repeated(r);
    if (twice != NULL)
        return ad_http_problemf(req, AD_E_INVALID_REQUEST, "the query parameter \"%.128s\" is given more than once",
                                twice);
    return handler(r);
}

static int is_json_type(const char *ct)
{
    if (ct == NULL)
        return 0;
    size_t len = strcspn(ct, ";");
    while (len > 0 && (ct[len - 1] == ' ' || ct[len - 1] == '\t'))
        len--;
    return (len == 16 && h2o_lcstris(ct, len, H2O_STRLIT("application/json"))) ||
           (len > 5 && h2o_lcstris(ct + len - 5, 5, H2O_STRLIT("+json")) && memchr(ct, '/', len) != NULL);
}

json_t *ad_api_body(struct ad_request *r)
{
    h2o_req_t *req = r->req;
    if (req->entity.len > ad_hub.cfg->max_body_bytes) {
        ad_http_problemf(req, AD_E_PAYLOAD_TOO_LARGE, "the body is %zu bytes; the limit is %zu", req->entity.len,
                         ad_hub.cfg->max_body_bytes);
        return NULL;
    }
    if (!is_json_type(ad_http_get(req, H2O_TOKEN_CONTENT_TYPE))) {
        ad_http_problem(req, AD_E_UNSUPPORTED_MEDIA_TYPE, "send the body as application/json", NULL);
        return NULL;
    }
    json_error_t jerr;
    json_t *v = json_loadb(req->entity.base != NULL ? req->entity.base : "", req->entity.len,
                           JSON_DECODE_ANY | JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &jerr);
    if (v == NULL)
        ad_http_problemf(req, AD_E_MALFORMED_JSON, "line %d, column %d: %s", jerr.line, jerr.column, jerr.text);
    return v;
}

const char *ad_api_text(const json_t *v, size_t min, size_t max)
{
    const char *s = json_string_value(v);
    if (s == NULL)
        return NULL;
    size_t len = json_string_length(v);
    return len >= min && len <= max && strlen(s) == len ? s : NULL;
}

void ad_verr_init(struct ad_verr *v)
{
    ad_buf_init(&v->b, 64 * 1024);
    v->n = 0;
}

void ad_verr_add(struct ad_verr *v, const char *pointer, const char *detail)
{
    int first = v->n++ == 0;
    /* Past the cap the list keeps the errors that fitted whole (the count says how many there were): the one
     * the cap cut is taken back, and one byte is kept for the closing ']'. */
    if (v->b.toobig)
        return;
    size_t mark = v->b.len;
    if (first) {
        AD_JSON_KEY(&v->b, "errors");
        AD_BUF_LIT(&v->b, "[");
    } else {
        AD_BUF_LIT(&v->b, ",");
    }
    AD_JSON_OPEN(&v->b, "pointer");
    ad_json_str(&v->b, pointer);
    AD_JSON_KEY(&v->b, "detail");
    ad_json_str(&v->b, detail);
    AD_BUF_LIT(&v->b, "}");
    if (ad_json_end(&v->b) != 0 || v->b.len >= v->b.max) {
        v->b.len = mark;
        if (v->b.data != NULL)
            v->b.data[mark] = '\0';
        v->b.toobig = 1;
    }
}

const char *ad_verr_finish(struct ad_verr *v, char *detail, size_t len)
{
    if (v->b.len > 0)
        AD_BUF_LIT(&v->b, "]");
    snprintf(detail, len, "%d field%s failed validation; see errors", v->n, v->n == 1 ? "" : "s");
    return v->b.len > 0 ? v->b.data : NULL;
}

int ad_verr_send(struct ad_verr *v, struct ad_request *r)
{
    char detail[160];
    const char *extra = ad_verr_finish(v, detail, sizeof(detail));
    int rc = ad_http_problem(r->req, AD_E_VALIDATION_FAILED, detail, extra);
    ad_buf_free(&v->b);
    return rc;
}

struct ad_pending *ad_api_write_begin(struct ad_request *r)
{
    return ad_pending_new(r->req, r, NULL);
}

struct ad_request *ad_api_write_take(void *ctx)
{
    struct ad_pending *p = ctx;
    struct ad_request *r = p->owner;
    return ad_pending_take(p) != NULL ? r : NULL;
}

/* ---- reads (api.h) ---- */

struct api_lookup {
    struct ad_pending *pend;
    ad_api_found then;
    void *arg;
};

/* A signed URL's request learns its tenant from the job (ad_api_auth_signed): "" when there is none. */
static void found_tenant(struct ad_request *r, struct ad_entry *e)
{
    if (r->tenant == NULL)
        r->tenant = e != NULL ? h2o_strdup(&r->req->pool, e->job->tenant, SIZE_MAX).base : "";
}

static void api_found(void *a, ad_err err, struct ad_entry *e)
{
    struct api_lookup *lk = a;
    struct ad_request *r = ad_api_write_take(lk->pend);
    ad_api_found then = lk->then;
    void *arg = lk->arg;
    free(lk);
    if (r != NULL) {
        found_tenant(r, e);
        then(r, err, e, arg);
    }
}

int ad_api_lookup(struct ad_request *r, const char *id, ad_api_found then, void *arg)
{
    struct ad_entry *e = ad_cache_get(id);
    if (e != NULL) { /* the poll path: nothing more than before reads went off the loop */
        int mine = r->tenant == NULL || strcmp(e->job->tenant, r->tenant) == 0;
        found_tenant(r, e);
        return then(r, mine ? AD_E_OK : AD_E_NOT_FOUND, mine ? e : NULL, arg);
    }
    struct api_lookup *lk = ad_calloc(1, sizeof(*lk));
    lk->then = then;
    lk->arg = arg;
    ad_err err;
    if (ad_hub_lookup(r->tenant, id, &err, &e, api_found, lk)) {
        free(lk);
        found_tenant(r, e);
        return then(r, err, e, arg);
    }
    lk->pend = ad_api_write_begin(r);
    return 0;
}

static void api_read_done(struct ad_op *op)
{
    struct ad_api_read *rd = (struct ad_api_read *)op;
    struct ad_request *r = rd->pend != NULL ? ad_api_write_take(rd->pend) : rd->r;
    rd->answer(rd, r);
    free(rd);
}

static void api_read_destroy(struct ad_op *op)
{
    free(op);
}

int ad_api_read(struct ad_request *r, struct ad_api_read *rd)
{
    rd->r = r;
    rd->op.done = api_read_done;
    rd->op.destroy = api_read_destroy;
    /* Answered inline (SQLite) the request needs no guard: it cannot go away before this returns. */
    rd->pend = ad_hub.store->ops->reads_may_block ? ad_api_write_begin(r) : NULL;
    ad_hub_read(&rd->op);
    return 0;
}

int ad_api_send_buf(struct ad_request *r, int status, struct ad_buf *b)
{
    if (ad_json_end(b) != 0) {
        ad_buf_free(b);
        return ad_api_fail(r, AD_E_INTERNAL);
    }
    char *body = h2o_mem_alloc_pool(&r->req->pool, b->len);
    memcpy(body, b->data, b->len);
    size_t len = b->len;
    ad_buf_free(b);
    return ad_http_json(r, status, body, len);
}

int ad_api_fail(struct ad_request *r, ad_err err)
{
    return ad_http_problem(r->req, err, NULL, NULL);
}

/* Validators and cache headers shared by every answer that carries a job. */
/* Why a due queued job waits (core/queues.h), or NULL: its representation then says so in "waitingFor". */
static const char *job_waiting(const struct ad_job *j)
{
    if (j->status != AD_QUEUED || (j->run_at != 0 && j->run_at > ad_now_ms()))
        return NULL;
    if (j->deps > 0)
        return "dependencies";
    return ad_wait_name(ad_queues_waiting(j->tenant, j->type, j->group));
}

/* The body of e with "waitingFor": why spliced in before its closing brace, in req's pool; its length in *len. */
static char *job_body_waiting(h2o_req_t *req, struct ad_entry *e, const char *why, size_t *len)
{
    size_t wl = strlen(why);
    char *b = h2o_mem_alloc_pool(&req->pool, e->len + wl + 18);
    size_t n = e->len - 1; /* the body ends with its object's '}' */
    memcpy(b, e->body, n);
    memcpy(b + n, ",\"waitingFor\":\"", 15);
    memcpy(b + n + 15, why, wl);
    memcpy(b + n + 15 + wl, "\"}", 2);
    *len = n + 15 + wl + 2;
    return b;
}

const char *ad_api_job_etag(h2o_req_t *req, struct ad_entry *e)
{
    const char *why = job_waiting(e->job);
    if (why == NULL || e->len == 0)
        return ad_entry_etag(e);
    size_t len;
    char *body = job_body_waiting(req, e, why, &len);
    char *etag = h2o_mem_alloc_pool(&req->pool, 25);
    ad_etag(body, len, etag);
    return etag;
}

static void job_headers(h2o_req_t *req, struct ad_entry *e)
{
    h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_ETAG, NULL, ad_api_job_etag(req, e), 24);
    h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_CACHE_CONTROL, NULL, H2O_STRLIT("no-cache"));
    if (ad_status_terminal(e->job->status)) {
        char date[40];
        ad_time_http(e->job->expires_at, date, sizeof(date));
        ad_http_header(req, H2O_TOKEN_EXPIRES, date);
    } else {
        ad_http_header_int(req, H2O_TOKEN_RETRY_AFTER, ad_hub_retry_after(e->job));
    }
}

void ad_api_job_headers(h2o_req_t *req, struct ad_entry *e)
{
    job_headers(req, e);
}

int ad_api_send_job(struct ad_request *r, struct ad_entry *e, int status)
{
    job_headers(r->req, e);
    if (status == 304)
        return ad_http_empty(r->req, 304);
    const char *why = job_waiting(e->job);
    if (why != NULL && e->len > 0) {
        size_t len;
        char *body = job_body_waiting(r->req, e, why, &len);
        return ad_http_json(r, status, body, len);
    }
    return ad_http_json(r, status, e->body, e->len);
}

/* The 202 of a client that prefers return=minimal: the headers as always, a body of only {"id"}. */
static int send_minimal_accepted(struct ad_request *r, struct ad_entry *e)
{
    job_headers(r->req, e);
    struct ad_buf b;
    ad_buf_init(&b, SIZE_MAX);
    AD_JSON_OPEN(&b, "id");
    ad_json_str(&b, e->job->id);
    AD_BUF_LIT(&b, "}");
    int rc = ad_http_json(r, 202, h2o_strdup(&r->req->pool, b.data, b.len).base, b.len);
    ad_buf_free(&b);
    return rc;
}

/* The job's 202 with "deduplicated": true as its last member (the body is the job's, its ETag too). */
static int send_deduplicated(struct ad_request *r, struct ad_entry *e, int minimal)
{
    job_headers(r->req, e);
    struct ad_buf b;
    ad_buf_init(&b, SIZE_MAX);
    if (minimal) {
        AD_JSON_OPEN(&b, "id");
        ad_json_str(&b, e->job->id);
    } else {
        ad_buf_append(&b, e->body, e->len - 1); /* without its closing '}' */
    }
    AD_BUF_LIT(&b, ",\"deduplicated\":true}");
    int rc = ad_http_json(r, 202, h2o_strdup(&r->req->pool, b.data, b.len).base, b.len);
    ad_buf_free(&b);
    return rc;
}

int ad_api_send_accepted(struct ad_request *r, struct ad_entry *e, int how)
{
    ad_metrics_submit_latency((double)(ad_mono_ns() - r->started_ns) / 1e9);
    int replayed = (how & AD_API_REPLAYED) != 0;
    if (r->route != NULL && r->route->style_operation)
        return ad_api_op_accepted(r, e, replayed);
    h2o_req_t *req = r->req;
    const char *id = e->job->id;
    ad_api_monitor_headers(r, id);
    ad_http_header_cat(req, H2O_TOKEN_LINK, "</v1/jobs/", id, ">; rel=\"monitor\"");
    if (e->job->resource != NULL)
        ad_http_header(req, H2O_TOKEN_CONTENT_LOCATION, e->job->resource);
    if (replayed)
        ad_http_header_str(req, "idempotent-replayed", "true");
    if (how & AD_API_DEDUPLICATED)
        return send_deduplicated(r, e, ad_http_prefer_minimal(req));
    if (ad_http_prefer_minimal(req))
        return send_minimal_accepted(r, e);
    return ad_api_send_job(r, e, 202);
}

const char *ad_api_problem_message(const json_t *p)
{
    const char *detail = json_string_value(json_object_get(p, "detail"));
    const char *title = json_string_value(json_object_get(p, "title"));
    return detail != NULL ? detail : title != NULL ? title : "the job failed";
}

/* "auth" says whether requests need a key: "none" when no keys are configured (loopback clients only), which the
 * dashboard reads to open without asking for one, else "bearer". */
int ad_api_healthz(struct ad_request *r)
{
    static const char open[] = "{\"status\":\"ok\",\"auth\":\"none\"}";
    static const char keyed[] = "{\"status\":\"ok\",\"auth\":\"bearer\"}";
    if (ad_hub.cfg->tracing.viewer_url != NULL) { /* the dashboard links a job's trace id there (docs/tracing.md) */
        struct ad_buf b;
        ad_buf_init(&b, SIZE_MAX);
        ad_buf_str(&b, ad_hub.open_mode ? "{\"status\":\"ok\",\"auth\":\"none\""
                                        : "{\"status\":\"ok\",\"auth\":\"bearer\"");
        AD_JSON_KEY(&b, "traceViewer");
        ad_json_str(&b, ad_hub.cfg->tracing.viewer_url);
        AD_BUF_LIT(&b, "}");
        int rc = ad_http_json(r, 200, b.data, b.len);
        ad_buf_free(&b);
        return rc;
    }
    return ad_hub.open_mode ? ad_http_json(r, 200, open, sizeof(open) - 1)
                            : ad_http_json(r, 200, keyed, sizeof(keyed) - 1);
}

struct ready_read {
    struct ad_api_read rd;
    int64_t seq;
};

static ad_err ready_apply(struct ad_op *op, struct ad_conn *c)
{
    return ad_hub.store->ops->max_seq(c, &((struct ready_read *)op)->seq);
}

static void ready_answer(struct ad_api_read *rd, struct ad_request *r)
{
    static const char body[] = "{\"status\":\"ready\"}";
    if (r != NULL && rd->op.err != AD_E_OK)
        ad_http_problem(r->req, AD_E_UNAVAILABLE, "the store does not answer", NULL);
    else if (r != NULL)
        ad_http_json(r, 200, body, sizeof(body) - 1);
}

int ad_api_readyz(struct ad_request *r)
{
    if (ad_hub.shutting_down)
        return ad_http_problem(r->req, AD_E_UNAVAILABLE, "shutting down", NULL);
    /* The store answers reads but refuses every write: a load balancer should send submits elsewhere. */
    if (ad_writer_storage_full())
        return ad_http_problem(r->req, AD_E_STORAGE_FULL, "the store is out of space: writes fail until there is room",
                               NULL);
    struct ready_read *x = ad_calloc(1, sizeof(*x));
    x->rd.op.apply = ready_apply;
    x->rd.answer = ready_answer;
    return ad_api_read(r, &x->rd);
}

/*
 * GET /metrics (docs/operations.md, "Metrics"). Jobs by type and state are counted by the store (one aggregate
 * query) rather than kept from the transitions: on a shared PostgreSQL store other nodes change jobs too, and a
 * count taken from the store is right on every node. A scrape counts again when a change was published since
 * the last count (ad_metrics_jobs_changed; the cluster follower publishes the other nodes' changes) and a
 * second has passed, or after AD_METRICS_JOBS_MAX_AGE_MS whatever happened (the retention sweep deletes without
 * publishing); otherwise it shows the last count. The count is a scan of the jobs table (no index serves it, and
 * one kept for it would cost every write): on SQLite it runs on the event loop, so it runs at most once in
 * twenty times what the last one took, and a store of millions of jobs stalls the loop for at most 5% of the time.
 */
#define AD_METRICS_JOBS_MIN_AGE_MS 1000
#define AD_METRICS_JOBS_MAX_AGE_MS 30000

static int64_t jobs_counted_at = -1; /* monotonic ms of the last count, -1 = never */
static int64_t jobs_count_ms;        /* what the last count took */

/* Type and status pairs counted at most: far more than a configuration has (types times six statuses). */
#define AD_METRICS_JOB_GROUPS 4096

struct metrics_read {
    struct ad_api_read rd;
    struct ad_job_count_list l;
    int64_t started_ms;
    int64_t waiting[AD_WAIT__COUNT];
};

static ad_err metrics_apply(struct ad_op *op, struct ad_conn *c)
{
    struct metrics_read *x = (struct metrics_read *)op;
    ad_err e = ad_hub.store->ops->job_counts(c, NULL, AD_METRICS_JOB_GROUPS, &x->l);
    return e == AD_E_OK ? ad_queues_count_waiting(c, ad_now_ms(), x->waiting) : e;
}

static int metrics_send(struct ad_request *r)
{
    struct ad_metrics_gauge gauges[] = {
        {"acceptd_timers", "Timers armed on the event loop: leases, runAt, long polls, the sweeper.",
         ad_timers_count()},
        {"acceptd_scheduled_timers", "runAt timers in memory; later scheduled jobs wait in the store.",
         ad_hub_runat_timers()},
        {"acceptd_scheduled_timers_limit", "limits.scheduledTimers.", ad_hub.cfg->scheduled_timers},
        {"acceptd_cache_jobs", "Jobs whose representation is cached in memory.", ad_cache_size()},
        {"acceptd_cache_bytes", "What the cached jobs count against limits.cacheBytes.", ad_cache_bytes()},
        {"acceptd_sse_streams", "Server-Sent Events streams open.", ad_sse_count()},
        {"acceptd_writer_queued", "Operations waiting for the writer thread.", ad_writer_outstanding()},
    };
    struct ad_buf b;
    ad_buf_init(&b, 16 << 20);
    ad_metrics_render(&b, AD_VERSION, AD_COMMIT, gauges, sizeof(gauges) / sizeof(gauges[0]));
    int rc = ad_http_send(r, 200, "text/plain; version=0.0.4; charset=utf-8", b.data, b.len);
    ad_buf_free(&b);
    return rc;
}

static void metrics_answer(struct ad_api_read *rd, struct ad_request *r)
{
    struct metrics_read *x = (struct metrics_read *)rd;
    if (rd->op.err == AD_E_OK) {
        jobs_count_ms = ad_mono_ms() - x->started_ms;
        ad_metrics_jobs_reset();
        for (size_t i = 0; i < x->l.n; i++) {
            const struct ad_job_count *k = &x->l.items[i];
            if (k->status >= 0 && k->status < AD_STATUS__COUNT)
                ad_metrics_jobs_add(k->type, ad_status_name((enum ad_status)k->status), k->n);
        }
        for (int w = AD_WAIT_NONE + 1; w < AD_WAIT__COUNT; w++)
            ad_metrics_waiting_set(ad_wait_name((enum ad_wait)w), x->waiting[w]);
        jobs_counted_at = ad_mono_ms();
    }
    ad_job_count_list_free(&x->l);
    /* A store that does not answer leaves the last count: the other metrics matter most then. */
    if (r != NULL)
        metrics_send(r);
}

int ad_api_metrics(struct ad_request *r)
{
    int64_t now = ad_mono_ms(), age = now - jobs_counted_at;
    int64_t min_age = jobs_count_ms * 20 > AD_METRICS_JOBS_MIN_AGE_MS ? jobs_count_ms * 20 : AD_METRICS_JOBS_MIN_AGE_MS;
    if (jobs_counted_at >= 0 && age < min_age)
        return metrics_send(r);
    if (jobs_counted_at >= 0 && age < AD_METRICS_JOBS_MAX_AGE_MS && !ad_metrics_jobs_take_changed())
        return metrics_send(r);
    ad_metrics_jobs_take_changed();
    struct metrics_read *x = ad_calloc(1, sizeof(*x));
    x->started_ms = now;
    x->rd.op.apply = metrics_apply;
    x->rd.answer = metrics_answer;
    return ad_api_read(r, &x->rd);
}
