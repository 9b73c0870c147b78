/*
 * api_batches.c - batches (CONTRACT.md section 13, core/batches.h): POST /v1/batches, GET /v1/batches/{id} (with
 * ETag, 304 and Retry-After while it runs), GET /v1/batches/{id}/jobs (paged like /v1/jobs) and POST
 * /v1/batches/{id}:cancel.
 *
 * GET /v1/operations/{batch id} is the batch's AIP-151 view (api_operations.c hands it here): the batch as a
 * google.longrunning.Operation, its counts in the metadata, done once it ended.
 *
 * A create is all or nothing: every item is validated as a POST /v1/jobs body first, and one invalid item refuses
 * the whole batch with 422 and a pointer into /jobs/N; the writer inserts the batch and its jobs in one operation.
 * An Idempotency-Key header is read as a submit's (the same syntax, fingerprint, claim while in flight and store of
 * the tenant's keys): a retry with the same key and body answers the original batch's 202 with Idempotent-Replayed.
 * A batch is read from its row (one row, whatever its size), and its answer (body and ETag) kept in a small
 * direct-mapped cache on the event loop until a change of one of its jobs is published (ad_api_batches_changed,
 * the hub's published listener): every change of its counts is the change of a job of it, in the same commit. A
 * job is published when this node commits it and, in cluster mode, when the follower (hub/cluster.c) or a read of
 * the job brings another node's change in, the moment the job's own cached answer is replaced: a batch's answer is
 * as fresh as its jobs'.
 * A read that began before such a change fills nothing (the slot's generation moved); one that read the row before
 * a commit and came back before its publish is dropped by that publish. An expired batch is not answered from the
 * cache. Another tenant's batch is not found. An item may not carry what makes a submit
 * answer another job than a new one (uniqueKey, an idempotencyKey) or a callbackUrl of its own: the batch's callbackUrl
 * hears of its end.
 */
#include "api/api_int.h"
#include "common/json.h"
#include "core/batches.h"
#include "core/deps.h"
#include "hub/hub.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BATCH_RETRY_AFTER 2
#define BATCH_LIST_DEFAULT 50 /* as /v1/jobs */
#define BATCH_LIST_MAX 500

/* The pointers and details of item i's validation errors, into v under /jobs/i. */
static void item_errors(struct ad_verr *v, size_t i, struct ad_api_submit_parsed *p)
{
    char detail[160];
    const char *extra = ad_verr_finish(&p->v, detail, sizeof(detail));
    char ptr[300];
    json_t *errs = NULL;
    if (extra != NULL) {
        size_t n = strlen(extra);
        char *doc = ad_malloc(n + 2);
        doc[0] = '{';
        memcpy(doc + 1, extra + 1, n - 1); /* extra is ,"errors":[...] */
        doc[n] = '}';
        doc[n + 1] = '\0';
        json_t *o = json_loads(doc, 0, NULL);
        free(doc);
        errs = json_incref(json_object_get(o, "errors"));
        json_decref(o);
    }
    if (p->err == AD_E_UNKNOWN_TYPE) {
        snprintf(ptr, sizeof(ptr), "/jobs/%zu/type", i);
        ad_verr_add(v, ptr, "no job type of this name is configured");
    }
    for (size_t k = 0; k < json_array_size(errs); k++) {
        json_t *e = json_array_get(errs, k);
        snprintf(ptr, sizeof(ptr), "/jobs/%zu%s", i, json_string_value(json_object_get(e, "pointer")));
        ad_verr_add(v, ptr, json_string_value(json_object_get(e, "detail")));
    }
    json_decref(errs);
}

static const char *const refused_members[][2] = {
    {"uniqueKey", "a batch's jobs are all new: uniqueKey is not taken here"},
    {"debounceSeconds", "a batch's jobs are all new: debounceSeconds is not taken here"},
    {"idempotencyKey", "send an Idempotency-Key header with the whole batch instead of one per job"},
    {"callbackUrl", "a batch's jobs have no callbackUrl of their own"},
};

static void create_done(struct ad_op *op)
{
    struct ad_batch_create_op *x = (struct ad_batch_create_op *)op;
    if (x->inflight != NULL)
        ad_api_inflight_release(x->inflight);
    struct ad_request *r = ad_api_write_take(x->ctx);
    if (r == NULL) {
        ad_op_free(op);
        return;
    }
    if (op->err == AD_E_DEPENDENCY_UNKNOWN) {
        struct ad_verr v;
        char ptr[64], detail[160];
        ad_verr_init(&v);
        snprintf(ptr, sizeof(ptr), "/jobs/%d/dependsOn/%d", x->bad_item, x->dep_bad);
        ad_verr_add(&v, ptr, "no job or batch of this tenant has this id");
        const char *extra = ad_verr_finish(&v, detail, sizeof(detail));
        ad_http_problem(r->req, op->err, detail, extra);
        ad_buf_free(&v.b);
        ad_op_free(op);
        return;
    }
    if (op->err != AD_E_OK) {
        ad_err e = op->err;
        ad_op_free(op);
        if (e == AD_E_CALLBACK_SECRET_MISSING)
            ad_http_problem(r->req, e, AD_API_CALLBACK_SECRET_HOWTO, NULL);
        else
            ad_api_fail(r, e);
        return;
    }
    /* Each job's spans, as a submit's (api_trace.c): children of the submitter's span, which all share. */
    struct ad_trace_ctx sub;
    const char *parent = ad_traceparent_parse(ad_http_get_str(r->req, "traceparent"), &sub) == 0 ? sub.span_id : "";
    for (size_t i = 0; i < op->nchanged; i++) {
        struct ad_entry *e = ad_op_published(op, i);
        if (e != NULL && e->job->batch_id != NULL && strcmp(e->job->batch_id, x->batch->id) == 0)
            ad_api_trace_submitted(e->job, "POST /v1/batches", parent, e->job->created_at);
    }
    struct ad_buf b;
    ad_buf_init(&b, SIZE_MAX);
    ad_batch_render(x->batch, &b);
    ad_http_headerf(r->req, H2O_TOKEN_LOCATION, "/v1/batches/%s", x->batch->id);
    ad_http_header_int(r->req, H2O_TOKEN_RETRY_AFTER, BATCH_RETRY_AFTER);
    if (x->replayed)
        ad_http_header_str(r->req, "idempotent-replayed", "true");
    ad_op_free(op);
    ad_api_send_buf(r, 202, &b);
}

int ad_api_batch_create(struct ad_request *r)
{
    char *key;
    const char *bad_key = ad_api_idem_key(r->req, &key);
    if (bad_key != NULL)
        return ad_http_problem(r->req, AD_E_IDEMPOTENCY_KEY_INVALID, bad_key, NULL);
    json_t *body = ad_api_body(r);
    if (body == NULL) {
        free(key);
        return 0;
    }
    json_t *jobs = json_is_object(body) ? json_object_get(body, "jobs") : NULL;
    struct ad_verr v;
    ad_verr_init(&v);
    if (!json_is_object(body))
        ad_verr_add(&v, "", "the body must be a JSON object");
    else if (!json_is_array(jobs) || json_array_size(jobs) < 1 || json_array_size(jobs) > AD_BATCH_MAX)
        ad_verr_add(&v, "/jobs", "jobs must be an array of 1 to 1000 submit bodies");
    json_t *cb = json_is_object(body) ? json_object_get(body, "callbackUrl") : NULL;
    const char *cb_url = cb != NULL && !json_is_null(cb) ? ad_api_text(cb, 0, SIZE_MAX) : NULL;
    char why[300];
    if (cb != NULL && !json_is_null(cb) && ad_api_webhook_url_invalid(cb_url, why, sizeof(why)))
        ad_verr_add(&v, "/callbackUrl", why);
    size_t n = v.n == 0 ? json_array_size(jobs) : 0;
    int64_t now = ad_now_ms();
    struct ad_batch_create_op *x = ad_batch_create_op_new(n);
    for (size_t i = 0; i < n; i++) {
        json_t *item = json_array_get(jobs, i);
        for (size_t k = 0; json_is_object(item) && k < sizeof(refused_members) / sizeof(refused_members[0]); k++) {
            if (json_object_get(item, refused_members[k][0]) != NULL) {
                char ptr[300];
                snprintf(ptr, sizeof(ptr), "/jobs/%zu/%s", i, refused_members[k][0]);
                ad_verr_add(&v, ptr, refused_members[k][1]);
            }
        }
        struct ad_api_submit_parsed p;
        ad_api_submit_parse(r, item, 0, "/v1/batches", now, &p);
        if (p.err != AD_E_OK)
            item_errors(&v, i, &p);
        ad_buf_free(&p.v.b);
        if (p.err == AD_E_OK)
            x->jobs[i] = p.job;
        else
            ad_job_free(p.job);
    }
    char *callback = v.n == 0 && cb_url != NULL ? ad_strdup(cb_url) : NULL;
    if (v.n == 0 && key != NULL) {
        /* As a submit's (api_jobs.c): the method, the path and the canonical body. */
        char *canon = json_dumps(body, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);
        ad_fingerprint("POST", "/v1/batches", canon, x->fingerprint);
        free(canon);
    }
    json_decref(body);
    if (v.n != 0) {
        free(key);
        ad_op_free(&x->op);
        return ad_verr_send(&v, r);
    }
    ad_buf_free(&v.b);
    if (key != NULL) {
        x->inflight = ad_asprintf("%s\n%s", r->tenant, key);
        x->idem_key = key;
        if (ad_api_inflight_claim(x->inflight) != 0) {
            free(callback);
            ad_op_free(&x->op); /* frees the key and the claim's name */
            return ad_http_problem(r->req, AD_E_IDEMPOTENCY_IN_FLIGHT,
                                   "a request with this Idempotency-Key is still being accepted; retry later", NULL);
        }
    }
    x->batch = ad_calloc(1, sizeof(*x->batch));
    x->batch->id = ad_new_id("bat_");
    x->batch->tenant = ad_strdup(r->tenant != NULL ? r->tenant : "default");
    x->batch->created_at = now;
    x->batch->callback_url = callback;
    x->ctx = ad_api_write_begin(r);
    x->op.done = create_done;
    x->op.weight = n;
    ad_writer_submit(&x->op);
    return 0;
}

/* ---- the cache of answers ---- */

#define BATCH_CACHE_SLOTS 1024 /* a power of two */

struct cached_batch {
    char *id, *tenant;
    char etag[25];
    char *body;
    size_t len;
    int running;
    int64_t expires_at; /* the batch's (0: none yet): the answer is not served from then */
};
static struct cached_batch cache[BATCH_CACHE_SLOTS];
static uint64_t cache_gen[BATCH_CACHE_SLOTS];

static size_t cache_slot(const char *id)
{
    size_t h = 5381;
    for (const char *p = id; *p != '\0'; p++)
        h = h * 33 + (unsigned char)*p;
    return h & (BATCH_CACHE_SLOTS - 1);
}

static void cache_drop(size_t s)
{
    free(cache[s].id);
    free(cache[s].tenant);
    free(cache[s].body);
    cache[s] = (struct cached_batch){0};
}

void ad_api_batches_changed(const struct ad_job *j)
{
    if (j->batch_id == NULL)
        return;
    size_t s = cache_slot(j->batch_id);
    cache_gen[s]++;
    cache_drop(s);
}

/* ---- reads and cancel ---- */

struct batch_read {
    struct ad_api_read rd;
    struct ad_batches_op *x;
    uint64_t gen; /* of the batch's cache slot when the read began */
};

static ad_err read_apply(struct ad_op *op, struct ad_conn *c)
{
    struct batch_read *br = (struct batch_read *)op;
    br->x->op.err = br->x->op.apply(&br->x->op, c);
    return br->x->op.err;
}

/* Answer a batch's cached answer c: its validators and cache headers, and 304 when If-None-Match names it. */
static int send_cached(struct ad_request *r, const struct cached_batch *c)
{
    h2o_add_header(&r->req->pool, &r->req->res.headers, H2O_TOKEN_ETAG, NULL, c->etag, 24);
    ad_http_header(r->req, H2O_TOKEN_CACHE_CONTROL, "no-cache");
    if (c->running)
        ad_http_header_int(r->req, H2O_TOKEN_RETRY_AFTER, BATCH_RETRY_AFTER);
    const char *inm = ad_http_get(r->req, H2O_TOKEN_IF_NONE_MATCH);
    if (inm != NULL && (strcmp(inm, "*") == 0 || strstr(inm, c->etag) != NULL))
        return ad_http_empty(r->req, 304);
    char *body = h2o_mem_alloc_pool(&r->req->pool, c->len);
    memcpy(body, c->body, c->len);
    return ad_http_json(r, 200, body, c->len);
}

/* The batch as its representation, kept in the cache unless a change came since the read began (gen). */
static void send_batch(struct ad_request *r, const struct ad_batch *batch, uint64_t gen)
{
    struct ad_buf b;
    ad_buf_init(&b, SIZE_MAX);
    ad_batch_render(batch, &b);
    struct cached_batch c = {
        .body = b.data, .len = b.len, .running = ad_batch_status(batch) == AD_RUNNING, .expires_at = batch->expires_at};
    ad_etag(b.data, b.len, c.etag);
    size_t s = cache_slot(batch->id);
    if (cache_gen[s] == gen && ad_json_end(&b) == 0) {
        cache_drop(s);
        c.id = ad_strdup(batch->id);
        c.tenant = ad_strdup(batch->tenant);
        cache[s] = c;
        send_cached(r, &cache[s]);
        return;
    }
    send_cached(r, &c);
    ad_buf_free(&b);
}

/* The batch as a google.longrunning.Operation in proto3 JSON (as api_operations.c renders a job): metadata a Struct
 * with its counts, response a Value with them once it ended succeeded or partialSuccess, error a google.rpc.Status
 * once it ended failed (UNKNOWN) or cancelled (CANCELLED). */
static void render_operation(struct ad_buf *b, const struct ad_batch *batch)
{
    enum ad_status s = ad_batch_status(batch);
    AD_BUF_LIT(b, "{\"name\":\"operations/");
    ad_json_chars(b, batch->id);
    AD_BUF_LIT(b, "\",\"metadata\":{\"@type\":\"type.googleapis.com/google.protobuf.Struct\",\"value\":");
    ad_batch_render(batch, b);
    AD_BUF_LIT(b, "},\"done\":");
    ad_json_bool(b, s != AD_RUNNING);
    if (s == AD_SUCCEEDED || s == AD_PARTIAL) {
        AD_BUF_LIT(b, ",\"response\":{\"@type\":\"type.googleapis.com/google.protobuf.Value\",\"value\":{\"status\":");
        ad_json_str(b, ad_status_name(s));
        AD_BUF_LIT(b, "}}");
    } else if (s == AD_FAILED) {
        AD_BUF_LIT(b, ",\"error\":{\"code\":2,\"message\":\"no job of the batch succeeded\",\"details\":[]}");
    } else if (s == AD_CANCELLED) {
        AD_BUF_LIT(b, ",\"error\":{\"code\":1,\"message\":\"the batch was cancelled\",\"details\":[]}");
    }
    AD_BUF_LIT(b, "}");
}

/* The operation view of the batch, with its own strong ETag (304 on If-None-Match). */
static void send_operation(struct ad_request *r, const struct ad_batch *batch)
{
    struct ad_buf b;
    ad_buf_init(&b, SIZE_MAX);
    render_operation(&b, batch);
    char etag[25];
    ad_etag(b.data, b.len, etag);
    char *et = h2o_mem_alloc_pool(&r->req->pool, sizeof(etag));
    memcpy(et, etag, sizeof(etag));
    h2o_add_header(&r->req->pool, &r->req->res.headers, H2O_TOKEN_ETAG, NULL, et, 24);
    ad_http_header(r->req, H2O_TOKEN_CACHE_CONTROL, "no-cache");
    const char *inm = ad_http_get(r->req, H2O_TOKEN_IF_NONE_MATCH);
    if (inm != NULL && (strcmp(inm, "*") == 0 || strstr(inm, etag) != NULL)) {
        ad_buf_free(&b);
        ad_http_empty(r->req, 304);
        return;
    }
    ad_api_send_buf(r, 200, &b);
}

static void send_jobs(struct ad_request *r, struct ad_batches_op *x)
{
    struct ad_job_list *l = &x->jobs;
    int more = l->n == (size_t)x->limit;
    if (more)
        ad_job_free(l->items[--l->n]);
    struct ad_buf b;
    ad_buf_init(&b, SIZE_MAX);
    AD_JSON_OPEN(&b, "items");
    AD_BUF_LIT(&b, "[");
    for (size_t i = 0; i < l->n; i++) {
        if (i > 0)
            AD_BUF_LIT(&b, ",");
        ad_job_render(l->items[i], &b);
    }
    AD_BUF_LIT(&b, "]");
    AD_JSON_KEY(&b, "nextPageToken");
    if (more && l->n > 0) {
        char tok[AD_API_PAGE_TOKEN_MAX];
        ad_api_page_token("b1", l->items[l->n - 1]->cseq, tok);
        ad_json_str(&b, tok);
    } else {
        ad_json_null(&b);
    }
    AD_BUF_LIT(&b, "}");
    ad_http_header(r->req, H2O_TOKEN_CACHE_CONTROL, "no-store");
    ad_api_send_buf(r, 200, &b);
}

/* AD_E_OK while the batch is live, AD_E_GONE in its tombstone period (as a job's, api_jobs.c), then
 * AD_E_NOT_FOUND (the sweep deletes its row by then). */
ad_err ad_api_batch_expiry_state(const struct ad_batch *b)
{
    int64_t now = ad_now_ms();
    if (b->expires_at == 0 || now < b->expires_at)
        return AD_E_OK;
    return now < b->expires_at + ad_hub.cfg->tombstone_ms ? AD_E_GONE : AD_E_NOT_FOUND;
}

static void answer(struct ad_request *r, struct ad_batches_op *x, uint64_t gen)
{
    if (x->op.err == AD_E_OK && x->batch != NULL)
        x->op.err = ad_api_batch_expiry_state(x->batch);
    if (x->op.err == AD_E_GONE && x->view)
        x->op.err = AD_E_NOT_FOUND; /* an expired job is gone as an operation too (api_operations.c) */
    if (x->op.err == AD_E_GONE) {
        char date[40];
        ad_time_rfc3339(x->batch->expires_at, date, sizeof(date));
        ad_http_problemf(r->req, AD_E_GONE, "batch %s expired at %s", x->id, date);
    } else if (x->op.err == AD_E_NOT_FOUND && x->view)
        ad_http_problemf(r->req, AD_E_NOT_FOUND, "no operation operations/%s", x->id);
    else if (x->op.err == AD_E_NOT_FOUND)
        ad_http_problem(r->req, AD_E_NOT_FOUND, "this tenant has no batch with this id", NULL);
    else if (x->op.err == AD_E_OK && x->view)
        send_operation(r, x->batch);
    else if (x->op.err != AD_E_OK)
        ad_api_fail(r, x->op.err);
    else if (x->action == AD_BATCH_JOBS)
        send_jobs(r, x);
    else
        send_batch(r, x->batch, gen);
}

static void read_answer(struct ad_api_read *rd, struct ad_request *r)
{
    struct batch_read *br = (struct batch_read *)rd;
    if (r != NULL)
        answer(r, br->x, br->gen);
    ad_op_free(&br->x->op);
}

static struct ad_batches_op *batches_op(struct ad_request *r, enum ad_batch_action action)
{
    struct ad_batches_op *x = ad_batches_op_new();
    x->action = action;
    x->tenant = ad_strdup(r->tenant != NULL ? r->tenant : "default");
    x->id = ad_strdup(r->id);
    x->now = ad_now_ms();
    return x;
}

static int read_batch(struct ad_request *r, struct ad_batches_op *x)
{
    struct batch_read *br = ad_calloc(1, sizeof(*br));
    br->x = x;
    br->gen = cache_gen[cache_slot(x->id)];
    br->rd.op.apply = read_apply;
    br->rd.answer = read_answer;
    return ad_api_read(r, &br->rd);
}

int ad_api_batch_get(struct ad_request *r)
{
    const struct cached_batch *c = &cache[cache_slot(r->id)];
    const char *tenant = r->tenant != NULL ? r->tenant : "default";
    if (c->id != NULL && strcmp(c->id, r->id) == 0 && strcmp(c->tenant, tenant) == 0 &&
        (c->expires_at == 0 || ad_now_ms() < c->expires_at))
        return send_cached(r, c);
    return read_batch(r, batches_op(r, AD_BATCH_GET));
}

int ad_api_batch_operation(struct ad_request *r)
{
    struct ad_batches_op *x = batches_op(r, AD_BATCH_GET);
    x->view = 1;
    return read_batch(r, x);
}

int ad_api_batch_jobs(struct ad_request *r)
{
    long long limit = BATCH_LIST_DEFAULT;
    if (ad_api_query_int(r, "limit", 1, BATCH_LIST_MAX, &limit) != 0)
        return 0;
    int64_t before = 0;
    if (ad_api_page_token_read(r, "b1", &before) != 0)
        return 0;
    struct ad_batches_op *x = batches_op(r, AD_BATCH_JOBS);
    x->limit = (int)limit + 1; /* one more than asked tells whether there is a next page */
    x->before = before;
    return read_batch(r, x);
}

static void cancel_done(struct ad_op *op)
{
    struct ad_batches_op *x = (struct ad_batches_op *)op;
    struct ad_request *r = ad_api_write_take(x->ctx);
    if (r != NULL)
        answer(r, x, cache_gen[cache_slot(x->id)] - 1); /* never cached: its changes are not yet published */
    ad_op_free(op);
}

int ad_api_batch_cancel(struct ad_request *r)
{
    struct ad_batches_op *x = batches_op(r, AD_BATCH_CANCEL);
    x->ctx = ad_api_write_begin(r);
    x->op.done = cancel_done;
    ad_writer_submit(&x->op);
    return 0;
}
