/*
 * api_queues.c - the queues of a tenant (CONTRACT.md section 11): GET /v1/queues, GET and PATCH
 * /v1/queues/{type}.
 *
 * A queue is a tenant's job type: its settings (paused, concurrency, rate limit and the per-group ones) and its
 * jobs counted by state, with how many of the queued are held back and why. A PATCH is an RFC 7396 merge patch
 * (application/merge-patch+json), applied by the writer (core/queues.c), so the answer is durable; an invalid or
 * unknown member is 422 with a JSON Pointer to it, and nothing of the patch applies. After a change this node's
 * parked lease requests for the type look again (the other nodes hear of it on the store's feed). Type names are
 * not ids (they hold dots), so /v1/queues/{type} is matched here rather than by the route table's {id}.
 */
#include "api/api_int.h"
#include "common/json.h"
#include "core/queues.h"
#include "hub/hub.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define QUEUE_TYPE_MAX 128
#define QUEUE_KICKS_MAX 1000

static void render_rate(struct ad_buf *b, const struct ad_queue_rate *r)
{
    if (r->limit <= 0) {
        ad_json_null(b);
        return;
    }
    AD_JSON_OPEN(b, "limit");
    ad_json_int(b, r->limit);
    AD_JSON_KEY(b, "period");
    /* The largest unit that divides it: what was written ("1m") reads back the same. */
    char p[32];
    int64_t ms = r->period_ms;
    if (ms % 3600000 == 0)
        snprintf(p, sizeof(p), "%lldh", (long long)(ms / 3600000));
    else if (ms % 60000 == 0)
        snprintf(p, sizeof(p), "%lldm", (long long)(ms / 60000));
    else if (ms % 1000 == 0)
        snprintf(p, sizeof(p), "%llds", (long long)(ms / 1000));
    else
        snprintf(p, sizeof(p), "%lldms", (long long)ms);
    ad_json_str(b, p);
    AD_BUF_LIT(b, "}");
}

static void render_limit(struct ad_buf *b, int n)
{
    if (n > 0)
        ad_json_int(b, n);
    else
        ad_json_null(b);
}

static void render_queue(struct ad_buf *b, const struct ad_queue_view *v)
{
    AD_JSON_OPEN(b, "type");
    ad_json_str(b, v->q.type);
    AD_JSON_KEY(b, "paused");
    ad_json_bool(b, v->q.paused);
    AD_JSON_KEY(b, "concurrency");
    render_limit(b, v->q.concurrency);
    AD_JSON_KEY(b, "groupConcurrency");
    render_limit(b, v->q.group_concurrency);
    AD_JSON_KEY(b, "rateLimit");
    render_rate(b, &v->q.rate);
    AD_JSON_KEY(b, "groupRateLimit");
    render_rate(b, &v->q.group_rate);
    AD_JSON_KEY(b, "counts");
    AD_JSON_OPEN(b, "queued");
    ad_json_int(b, v->counts.queued);
    AD_JSON_KEY(b, "running");
    ad_json_int(b, v->counts.running);
    AD_JSON_KEY(b, "scheduled");
    ad_json_int(b, v->counts.scheduled);
    AD_JSON_KEY(b, "waiting");
    ad_json_int(b, v->waiting);
    AD_BUF_LIT(b, "}");
    AD_JSON_KEY(b, "waitingFor");
    if (v->waiting > 0 && ad_wait_name(v->why) != NULL)
        ad_json_str(b, ad_wait_name(v->why));
    else
        ad_json_null(b);
    AD_BUF_LIT(b, "}");
}

static void queue_done(struct ad_op *op)
{
    struct ad_queue_op *x = (struct ad_queue_op *)op;
    struct ad_request *r = ad_api_write_take(x->ctx);
    if (x->patch != NULL && op->err == AD_E_OK) {
        /* A parked request each, up to as many as the queue could now give work to. */
        int64_t n = x->view.counts.queued < QUEUE_KICKS_MAX ? x->view.counts.queued : QUEUE_KICKS_MAX;
        for (int64_t i = 0; i < n; i++)
            ad_hub_work(x->tenant, x->type);
    }
    if (r == NULL) {
        ad_op_free(op); /* the client went away; a change stands */
        return;
    }
    if (op->err == AD_E_VALIDATION_FAILED && x->pointer != NULL) {
        struct ad_verr v;
        ad_verr_init(&v);
        ad_verr_add(&v, x->pointer, x->detail);
        ad_op_free(op);
        ad_verr_send(&v, r);
        return;
    }
    if (op->err != AD_E_OK) {
        ad_err e = op->err;
        ad_op_free(op);
        ad_api_fail(r, e);
        return;
    }
    struct ad_buf b;
    ad_buf_init(&b, SIZE_MAX);
    if (x->all) {
        AD_BUF_LIT(&b, "{\"queues\":[");
        for (size_t i = 0; i < x->nviews; i++) {
            if (i > 0)
                AD_BUF_LIT(&b, ",");
            render_queue(&b, &x->views[i]);
        }
        AD_BUF_LIT(&b, "]}");
    } else {
        render_queue(&b, &x->view);
    }
    ad_op_free(op);
    ad_http_header(r->req, H2O_TOKEN_CACHE_CONTROL, "no-store");
    ad_api_send_buf(r, 200, &b);
}

static struct ad_queue_op *queue_op(struct ad_request *r, const char *type)
{
    struct ad_queue_op *x = ad_queue_op_new();
    x->tenant = ad_strdup(r->tenant != NULL ? r->tenant : "default");
    x->type = ad_strdup_opt(type);
    x->now = ad_now_ms();
    x->ctx = ad_api_write_begin(r);
    x->op.done = queue_done;
    return x;
}

int ad_api_queue_list(struct ad_request *r)
{
    struct ad_queue_op *x = queue_op(r, NULL);
    x->all = 1;
    ad_hub_read(&x->op);
    return 0;
}

/* When the configuration lists types, a queue of another type cannot have jobs: 404, as its submit is refused. */
static int unknown_type(struct ad_request *r)
{
    if (ad_hub.cfg->ntypes == 0 || ad_config_type(ad_hub.cfg, r->id) != NULL)
        return 0;
    ad_http_problemf(r->req, AD_E_NOT_FOUND, "no job type %.128s is configured", r->id);
    return 1;
}

static int queue_get(struct ad_request *r)
{
    if (unknown_type(r))
        return 0;
    ad_hub_read(&queue_op(r, r->id)->op);
    return 0;
}

static int is_merge_patch(const char *ct)
{
    if (ct == NULL)
        return 0;
    size_t len = strcspn(ct, ";");
    while (len > 0 && (ct[len - 1] == ' ' || ct[len - 1] == '\t'))
        len--;
    return len == 28 && strncasecmp(ct, "application/merge-patch+json", 28) == 0;
}

static int queue_patch(struct ad_request *r)
{
    if (!is_merge_patch(ad_http_get(r->req, H2O_TOKEN_CONTENT_TYPE)))
        return ad_http_problem(r->req, AD_E_UNSUPPORTED_MEDIA_TYPE,
                               "send the settings as an RFC 7396 merge patch, application/merge-patch+json", NULL);
    if (unknown_type(r))
        return 0;
    json_t *body = ad_api_body(r);
    if (body == NULL)
        return 0;
    struct ad_queue_op *x = queue_op(r, r->id);
    x->patch = body;
    ad_writer_submit(&x->op);
    return 0;
}

static int hexval(char c)
{
    return c >= '0' && c <= '9'   ? c - '0'
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
           : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                  : -1;
}

/* The type of /v1/queues/<type>, percent-decoded into the request's pool; NULL when the path is not one. */
static char *queue_type(struct ad_request *r)
{
    static const char prefix[] = "/v1/queues/";
    size_t pl = sizeof(prefix) - 1;
    if (r->path.len <= pl || memcmp(r->path.base, prefix, pl) != 0)
        return NULL;
    const char *s = r->path.base + pl;
    size_t n = r->path.len - pl;
    char *out = h2o_mem_alloc_pool(&r->req->pool, n + 1);
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        int hi, lo;
        if (s[i] == '/')
            return NULL;
        if (s[i] == '%' && i + 2 < n && (hi = hexval(s[i + 1])) >= 0 && (lo = hexval(s[i + 2])) >= 0) {
            out[o++] = (char)(hi << 4 | lo);
            i += 2;
        } else {
            out[o++] = s[i];
        }
    }
    out[o] = '\0';
    if (o == 0 || o > QUEUE_TYPE_MAX || strlen(out) != o)
        return NULL;
    return out;
}

static int queue_method_not_allowed(struct ad_request *r)
{
    h2o_add_header(&r->req->pool, &r->req->res.headers, H2O_TOKEN_ALLOW, NULL, H2O_STRLIT("GET, HEAD, PATCH"));
    return ad_http_problem(r->req, AD_E_METHOD_NOT_ALLOWED, NULL, NULL);
}

int ad_api_queue_route(struct ad_request *r, ad_handler *handler, int *roles)
{
    char *type = queue_type(r);
    if (type == NULL)
        return 0;
    h2o_iovec_t m = r->req->method;
    if (h2o_memis(m.base, m.len, H2O_STRLIT("GET")) || h2o_memis(m.base, m.len, H2O_STRLIT("HEAD"))) {
        *handler = queue_get;
        *roles = AD_ROLE_CLIENT | AD_ROLE_WORKER | AD_ROLE_ADMIN;
    } else if (h2o_memis(m.base, m.len, H2O_STRLIT("PATCH"))) {
        *handler = queue_patch;
        *roles = AD_ROLE_ADMIN;
    } else {
        *handler = queue_method_not_allowed;
        *roles = 0;
    }
    r->id = type;
    return 1;
}
