/*
 * api_webhooks.c - webhook endpoints, the callback secret and deliveries: create, list, get, delete, rotate,
 * enable, the delivery log of an endpoint (dead letters included) and redelivery.
 *
 * Reads go to the store on the event loop's connection; every change is a webhook operation (webhook.h)
 * answered from its done() once durable. A secret leaves the daemon exactly twice: in the answer to the
 * create or rotate that made it. Nothing here logs a secret or a destination URL.
 */
#include "api/api_int.h"
#include "webhook/webhook.h"
#include "common/json.h"

#include <stdlib.h>
#include <string.h>

#define AD_DELIVERIES_DEFAULT 50
#define AD_DELIVERIES_MAX 500
#define CALLBACK_ID "callback"

static const char *const delivery_states[] = {"pending", "delivered", "dead"};

int ad_api_webhook_url_invalid(const char *url, char *why, size_t whylen)
{
    char host[256];
    long port;
    if (url == NULL || strlen(url) > 2048 || (strncmp(url, "http://", 7) != 0 && strncmp(url, "https://", 8) != 0) ||
        ad_ssrf_url_host(url, host, sizeof(host), &port) != 0) {
        snprintf(why, whylen, "must be an http:// or https:// URL of at most 2048 characters");
        return 1;
    }
    char reason[200];
    if (ad_ssrf_check_url(ad_webhook_guard(), url, reason, sizeof(reason)) != 0) {
        snprintf(why, whylen, "refused destination: %s", reason);
        return 1;
    }
    return 0;
}

/* ---- representations ---- */

/* The public id of an endpoint row: its own, or "callback" for the callback secret. */
static const char *hook_public_id(const struct ad_webhook *w)
{
    return w->url != NULL ? w->id : CALLBACK_ID;
}

/* A path with an id in it as a JSON string: "<head><id><tail>", the id escaped like any other text. */
static void json_path(struct ad_buf *b, const char *head, const char *id, const char *tail)
{
    AD_BUF_LIT(b, "\"");
    ad_buf_str(b, head);
    ad_json_chars(b, id);
    ad_buf_str(b, tail);
    AD_BUF_LIT(b, "\"");
}

/*
 * The renderers skip the appends' returns for the writer's sticky error (json.h): an append refused at the
 * buffer's cap leaves b->toobig set, and send_buf checks it once before anything is sent. That is simpler
 * than checking some thirty returns here, and as correct: a refused append adds nothing, so what follows it
 * cannot overrun anything, and the text is then dropped as a whole.
 */
static void render_hook(struct ad_buf *b, const struct ad_webhook *w, const char *secret)
{
    const char *id = hook_public_id(w);
    /* The callback secret signs what a job's callbackUrl hears: its outcome. */
    unsigned events = w->url != NULL ? w->events : AD_WHE_FINAL;
    AD_JSON_OPEN(b, "id");
    ad_json_str(b, id);
    AD_JSON_KEY(b, "url");
    ad_json_str(b, w->url);
    AD_JSON_KEY(b, "events");
    AD_BUF_LIT(b, "[");
    for (int e = 0, n = 0; e < AD_WHE__COUNT; e++) {
        if ((events & (1u << e)) == 0)
            continue;
        if (n++ > 0)
            AD_BUF_LIT(b, ",");
        ad_json_str(b, ad_webhook_event_name((enum ad_webhook_event)e));
    }
    AD_BUF_LIT(b, "]");
    AD_JSON_KEY(b, "enabled");
    ad_json_bool(b, w->disabled_at == 0);
    AD_JSON_KEY(b, "disabledAt");
    ad_json_time(b, w->disabled_at);
    AD_JSON_KEY(b, "disabledReason");
    ad_json_str(b, w->disabled_reason);
    AD_JSON_KEY(b, "createdAt");
    ad_json_time(b, w->created_at);
    AD_JSON_KEY(b, "previousSecretExpiresAt");
    ad_json_time(b, w->prev_secret != NULL ? w->prev_until : 0);
    if (secret != NULL) {
        AD_JSON_KEY(b, "secret");
        ad_json_str(b, secret);
    }
    AD_JSON_KEY(b, "links");
    AD_JSON_OPEN(b, "self");
    json_path(b, "/v1/webhooks/", id, "");
    AD_JSON_KEY(b, "deliveries");
    json_path(b, "/v1/webhooks/", id, "/deliveries");
    AD_JSON_KEY(b, "rotate");
    json_path(b, "/v1/webhooks/", id, ":rotate");
    AD_BUF_LIT(b, "}}");
}

static void render_delivery(struct ad_buf *b, const struct ad_delivery *d, const char *hook_id)
{
    AD_JSON_OPEN(b, "id");
    ad_json_str(b, d->id);
    AD_JSON_KEY(b, "webhookId");
    ad_json_str(b, hook_id);
    AD_JSON_KEY(b, "eventId");
    ad_json_str(b, d->event_id);
    AD_JSON_KEY(b, "eventType");
    ad_json_str(b, d->event_type);
    AD_JSON_KEY(b, "jobId");
    ad_json_str(b, d->job_id);
    AD_JSON_KEY(b, "url");
    ad_json_str(b, d->url);
    AD_JSON_KEY(b, "status");
    ad_json_str(b, delivery_states[d->state]);
    AD_JSON_KEY(b, "attempts");
    ad_json_int(b, d->attempts);
    AD_JSON_KEY(b, "createdAt");
    ad_json_time(b, d->created_at);
    AD_JSON_KEY(b, "lastAttemptAt");
    ad_json_time(b, d->last_at);
    AD_JSON_KEY(b, "nextAttemptAt");
    ad_json_time(b, d->state == AD_DLV_PENDING ? d->next_at : 0);
    AD_JSON_KEY(b, "lastStatus");
    d->last_status != 0 ? ad_json_int(b, d->last_status) : ad_json_null(b);
    AD_JSON_KEY(b, "lastError");
    ad_json_str(b, d->last_error);
    AD_JSON_KEY(b, "links");
    AD_JSON_OPEN(b, "redeliver");
    json_path(b, "/v1/deliveries/", d->id, ":redeliver");
    AD_BUF_LIT(b, "}}");
}

/* Answer with one endpoint (and its new secret, which must not be cached anywhere). */
static int send_hook(struct ad_request *r, int status, const struct ad_webhook *w, const char *secret)
{
    struct ad_buf b;
    ad_buf_init(&b, SIZE_MAX);
    render_hook(&b, w, secret);
    ad_http_header(r->req, H2O_TOKEN_CACHE_CONTROL, secret != NULL ? "no-store" : "no-cache");
    return ad_api_send_buf(r, status, &b);
}

/*
 * The reads of this file, each run off the event loop where the store's reads may block (ad_api_read): an endpoint
 * (GET), a tenant's endpoints (list), or an endpoint and a page of its deliveries.
 */
enum hook_read_kind { HR_GET, HR_LIST, HR_DELIVERIES };
struct hook_read {
    struct ad_api_read rd;
    enum hook_read_kind kind;
    char *tenant, *id; /* id NULL: the callback secret */
    int state;         /* deliveries: -1 = any */
    int64_t before;
    int limit;
    struct ad_webhook *w;
    struct ad_webhook_list hooks;
    struct ad_delivery_list dl;
};

static ad_err hook_read_apply(struct ad_op *op, struct ad_conn *c)
{
    struct hook_read *x = (struct hook_read *)op;
    const struct ad_store_ops *st = ad_hub.store->ops;
    if (x->kind == HR_LIST)
        return st->webhook_list(c, x->tenant, 0, &x->hooks);
    ad_err e = st->webhook_get(c, x->tenant, x->id, &x->w);
    if (e == AD_E_OK && x->id != NULL && x->w->url == NULL)
        e = AD_E_NOT_FOUND; /* the callback secret is not an endpoint */
    if (e == AD_E_OK && x->kind == HR_DELIVERIES)
        e = st->delivery_list(c, x->w->id, x->state, x->before, x->limit + 1, &x->dl);
    return e;
}

static int send_hook_list(struct ad_request *r, const struct ad_webhook_list *l);
static int send_deliveries(struct ad_request *r, const struct ad_webhook *w, struct ad_delivery_list *l, int limit);
static int hook_missing(struct ad_request *r, ad_err e);

static void hook_read_answer(struct ad_api_read *rd, struct ad_request *r)
{
    struct hook_read *x = (struct hook_read *)rd;
    ad_err e = rd->op.err;
    if (r != NULL && e != AD_E_OK && x->kind != HR_LIST)
        hook_missing(r, e);
    else if (r != NULL && e != AD_E_OK)
        ad_api_fail(r, e);
    else if (r != NULL && x->kind == HR_GET)
        send_hook(r, 200, x->w, NULL);
    else if (r != NULL && x->kind == HR_LIST)
        send_hook_list(r, &x->hooks);
    else if (r != NULL)
        send_deliveries(r, x->w, &x->dl, x->limit);
    ad_webhook_free(x->w);
    ad_webhook_list_free(&x->hooks);
    ad_delivery_list_free(&x->dl);
    free(x->tenant);
    free(x->id);
}

/* Read kind for the endpoint the request names (or, list, for the tenant) and answer. */
static int hook_read(struct ad_request *r, enum hook_read_kind kind, int state, int64_t before, int limit)
{
    struct hook_read *x = ad_calloc(1, sizeof(*x));
    x->kind = kind;
    x->tenant = ad_strdup(r->tenant);
    x->id = kind != HR_LIST && strcmp(r->id, CALLBACK_ID) != 0 ? ad_strdup(r->id) : NULL;
    x->state = state;
    x->before = before;
    x->limit = limit;
    x->rd.op.apply = hook_read_apply;
    x->rd.answer = hook_read_answer;
    return ad_api_read(r, &x->rd);
}

/* The answer when the endpoint the request names could not be read: 404, or the store's error. */
static int hook_missing(struct ad_request *r, ad_err e)
{
    int callback = strcmp(r->id, CALLBACK_ID) == 0;
    if (e == AD_E_NOT_FOUND && callback)
        ad_http_problem(r->req, AD_E_NOT_FOUND, "no callback secret yet: POST /v1/webhooks/callback:rotate makes one",
                        NULL);
    else if (e == AD_E_NOT_FOUND)
        ad_http_problemf(r->req, AD_E_NOT_FOUND, "no webhook endpoint %s", r->id);
    else
        ad_api_fail(r, e);
    return 0;
}

/* ---- writes ---- */

struct write_ctx {
    struct ad_pending *pend;
    struct ad_request *r;
};

static struct ad_webhook_op *op_new(struct ad_request *r, enum ad_webhook_op_kind kind, void (*done)(struct ad_op *))
{
    struct ad_webhook_op *x = ad_webhook_op_new(kind);
    struct write_ctx *w = ad_calloc(1, sizeof(*w));
    w->r = r;
    w->pend = ad_pending_new(r->req, w, NULL);
    x->ctx = w;
    x->tenant = ad_strdup(r->tenant);
    x->id = ad_strdup_opt(r->id);
    x->now = ad_now_ms();
    x->op.done = done;
    return x;
}

/* The request of a finished operation, or NULL when the client went away; the context is freed either way. */
static struct ad_request *op_request(struct ad_webhook_op *x)
{
    struct write_ctx *w = x->ctx;
    struct ad_request *r = w->pend->req != NULL ? w->r : NULL;
    ad_pending_take(w->pend);
    free(w);
    return r;
}

static void hook_done(struct ad_op *op)
{
    struct ad_webhook_op *x = (struct ad_webhook_op *)op;
    struct ad_request *r = op_request(x);
    if (r == NULL) {
        ad_op_free(op); /* the client went away; the change stands */
        return;
    }
    if (op->err == AD_E_VALIDATION_FAILED && x->kind == AD_WHOP_CREATE) {
        ad_http_problemf(r->req, AD_E_VALIDATION_FAILED, "a tenant may have at most %d webhook endpoints",
                         AD_WEBHOOKS_MAX);
    } else if (op->err == AD_E_NOT_FOUND) {
        ad_http_problemf(r->req, AD_E_NOT_FOUND, "no webhook endpoint %s", x->id);
    } else if (op->err != AD_E_OK) {
        ad_api_fail(r, op->err);
    } else if (x->kind == AD_WHOP_DELETE) {
        ad_http_empty(r->req, 204);
    } else {
        int created = x->kind == AD_WHOP_CREATE;
        if (created)
            ad_http_headerf(r->req, H2O_TOKEN_LOCATION, "/v1/webhooks/%s", x->hook->id);
        send_hook(r, created ? 201 : 200, x->hook, x->secret[0] != '\0' ? x->secret : NULL);
    }
    ad_op_free(op);
}

int ad_api_webhook_create(struct ad_request *r)
{
    json_t *body = ad_api_body(r);
    if (body == NULL)
        return 0;
    struct ad_verr v;
    ad_verr_init(&v);
    char why[300];
    const char *url = ad_api_text(json_object_get(body, "url"), 0, SIZE_MAX);
    unsigned events = AD_WHE_DEFAULT;
    if (!json_is_object(body)) {
        ad_verr_add(&v, "", "the body must be a JSON object");
    } else {
        if (ad_api_webhook_url_invalid(url, why, sizeof(why)))
            ad_verr_add(&v, "/url", why);
        json_t *list = json_object_get(body, "events");
        if (list != NULL && (!json_is_array(list) || json_array_size(list) == 0)) {
            ad_verr_add(&v, "/events", "events must be a non-empty array of event types");
        } else if (list != NULL) {
            events = 0;
            for (size_t i = 0; i < json_array_size(list); i++) {
                enum ad_webhook_event e;
                const char *name = ad_api_text(json_array_get(list, i), 0, SIZE_MAX);
                char ptr[32];
                snprintf(ptr, sizeof(ptr), "/events/%zu", i);
                if (name == NULL || ad_webhook_event_parse(name, &e) != 0)
                    ad_verr_add(&v, ptr,
                                "not an event type: job.queued, job.started, job.progress, job.succeeded, "
                                "job.failed, job.cancelled or job.partialSuccess");
                else
                    events |= 1u << e;
            }
        }
    }
    if (v.n != 0) {
        json_decref(body);
        return ad_verr_send(&v, r);
    }
    ad_buf_free(&v.b);
    struct ad_webhook_op *x = op_new(r, AD_WHOP_CREATE, hook_done);
    x->url = ad_strdup(url);
    x->events = events;
    json_decref(body);
    ad_writer_submit(&x->op);
    return 0;
}

int ad_api_webhook_delete(struct ad_request *r)
{
    if (strcmp(r->id, CALLBACK_ID) == 0)
        return ad_http_problem(
            r->req, AD_E_INVALID_REQUEST,
            "the callback secret cannot be deleted; rotate it with POST /v1/webhooks/callback:rotate", NULL);
    ad_writer_submit(&op_new(r, AD_WHOP_DELETE, hook_done)->op);
    return 0;
}

int ad_api_webhook_rotate(struct ad_request *r)
{
    ad_writer_submit(&op_new(r, AD_WHOP_ROTATE, hook_done)->op);
    return 0;
}

int ad_api_webhook_enable(struct ad_request *r)
{
    ad_writer_submit(&op_new(r, AD_WHOP_ENABLE, hook_done)->op);
    return 0;
}

static void redeliver_done(struct ad_op *op)
{
    struct ad_webhook_op *x = (struct ad_webhook_op *)op;
    struct ad_request *r = op_request(x);
    if (r != NULL && op->err == AD_E_ILLEGAL_TRANSITION && x->hook != NULL && x->hook->disabled_at != 0) {
        ad_http_problemf(r->req, AD_E_ILLEGAL_TRANSITION, "the endpoint is disabled; POST /v1/webhooks/%s:enable first",
                         x->hook->id);
    } else if (r != NULL && op->err == AD_E_ILLEGAL_TRANSITION) {
        ad_http_problemf(r->req, AD_E_ILLEGAL_TRANSITION, "delivery %s is pending already", x->id);
    } else if (r != NULL && op->err == AD_E_NOT_FOUND) {
        ad_http_problemf(r->req, AD_E_NOT_FOUND, "no delivery %s", x->id);
    } else if (r != NULL && op->err != AD_E_OK) {
        ad_api_fail(r, op->err);
    } else if (r != NULL) {
        struct ad_buf b;
        ad_buf_init(&b, SIZE_MAX);
        render_delivery(&b, x->delivery, x->hook != NULL ? hook_public_id(x->hook) : x->delivery->webhook_id);
        ad_api_send_buf(r, 202, &b);
    }
    ad_op_free(op);
}

int ad_api_redeliver(struct ad_request *r)
{
    /* The writer checks the delivery and its endpoint (webhook.c op_redeliver), and redeliver_done says which
     * refused it: nothing is read on the loop first. */
    ad_writer_submit(&op_new(r, AD_WHOP_REDELIVER, redeliver_done)->op);
    return 0;
}

/* ---- reads ---- */

int ad_api_webhook_list(struct ad_request *r)
{
    return hook_read(r, HR_LIST, -1, 0, 0);
}

static int send_hook_list(struct ad_request *r, const struct ad_webhook_list *l)
{
    struct ad_buf b;
    ad_buf_init(&b, SIZE_MAX);
    AD_JSON_OPEN(&b, "items");
    AD_BUF_LIT(&b, "[");
    for (size_t i = 0; i < l->n; i++) {
        if (i > 0)
            AD_BUF_LIT(&b, ",");
        render_hook(&b, l->items[i], NULL);
    }
    AD_BUF_LIT(&b, "]}");
    ad_http_header(r->req, H2O_TOKEN_CACHE_CONTROL, "no-cache");
    return ad_api_send_buf(r, 200, &b);
}

int ad_api_webhook_get(struct ad_request *r)
{
    return hook_read(r, HR_GET, -1, 0, 0);
}

int ad_api_webhook_deliveries(struct ad_request *r)
{
    long long limit = AD_DELIVERIES_DEFAULT;
    int64_t before = 0;
    const char *v = ad_http_query(r, "limit");
    if (v != NULL && ad_parse_int(v, strlen(v), 1, AD_DELIVERIES_MAX, &limit) != 0)
        return ad_http_problemf(r->req, AD_E_INVALID_REQUEST, "limit must be an integer from 1 to %d",
                                AD_DELIVERIES_MAX);
    int state = -1;
    const char *status = ad_http_query(r, "status");
    for (int i = 0; status != NULL && i < 3 && state < 0; i++)
        if (strcmp(status, delivery_states[i]) == 0)
            state = i;
    if (status != NULL && state < 0)
        return ad_http_problem(r->req, AD_E_INVALID_REQUEST, "status must be pending, delivered or dead", NULL);
    if (ad_api_page_token_read(r, "d1", &before) != 0)
        return 0;
    return hook_read(r, HR_DELIVERIES, state, before, (int)limit);
}

static int send_deliveries(struct ad_request *r, const struct ad_webhook *w, struct ad_delivery_list *lp, int limit)
{
    struct ad_delivery_list l = *lp;
    int more = l.n > (size_t)limit;
    if (more)
        ad_delivery_free(l.items[--l.n]);
    struct ad_buf b;
    ad_buf_init(&b, SIZE_MAX);
    AD_JSON_OPEN(&b, "items");
    AD_BUF_LIT(&b, "[");
    for (size_t i = 0; i < l.n; i++) {
        if (i > 0)
            AD_BUF_LIT(&b, ",");
        render_delivery(&b, l.items[i], hook_public_id(w));
    }
    AD_BUF_LIT(&b, "]");
    AD_JSON_KEY(&b, "nextPageToken");
    if (more && l.n > 0) {
        char tok[AD_API_PAGE_TOKEN_MAX];
        ad_api_page_token("d1", l.items[l.n - 1]->seq, tok);
        ad_json_str(&b, tok);
    } else {
        ad_json_null(&b);
    }
    AD_BUF_LIT(&b, "}");
    *lp = l;
    ad_http_header(r->req, H2O_TOKEN_CACHE_CONTROL, "no-cache");
    return ad_api_send_buf(r, 200, &b);
}
