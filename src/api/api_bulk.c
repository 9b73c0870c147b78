/*
 * api_bulk.c - bulk submit, POST /v1/jobs:batch: up to 1,000 jobs, each validated and answered on its own
 * (207 multi-status, in the request's order), all that pass durable in one commit.
 *
 * Each job is parsed as POST /v1/jobs parses one (ad_api_submit_parse) and may carry its own idempotencyKey; a
 * refused item takes no part in the commit and is answered with its problem. The batch counts each job against
 * the key's rate limit. What it does not do: take an Idempotency-Key for the whole batch (each job has its own),
 * or refuse the whole batch for one bad job (POST /v1/batches, the batch resource, does that).
 */
#include "api/api_int.h"
#include "common/json.h"

#include <stdlib.h>
#include <string.h>

/* Jobs one batch may hold: 1,000 realistic jobs (about 300 bytes each) fit well in the default body cap. */
#define AD_BATCH_MAX 1000

struct batch_ctx {
    struct ad_pending *pend;
    struct ad_request *r;
    size_t n;
    char **problem;  /* the item's problem document, when it was refused before the writer */
    ad_err *refused; /* and the error it was refused with */
    char **inflight; /* the idempotency key (tenant '\n' key) the item claimed, or NULL */
    int minimal;
    char trace_parent[AD_SPAN_ID_HEX + 1]; /* the submitter's span, the parent of every job's (api_trace.c) */
};

static void batch_ctx_free(struct batch_ctx *ctx)
{
    for (size_t i = 0; i < ctx->n; i++) {
        if (ctx->inflight[i] != NULL)
            ad_api_inflight_release(ctx->inflight[i]);
        free(ctx->inflight[i]);
        free(ctx->problem[i]);
    }
    free(ctx->inflight);
    free(ctx->problem);
    free(ctx->refused);
    free(ctx);
}

/* Refuse item i with err: its problem document. */
static void batch_problem(struct batch_ctx *ctx, size_t i, ad_err err, const char *detail, const char *extra)
{
    struct ad_buf b;
    ad_buf_init(&b, SIZE_MAX);
    ad_http_problem_render(ctx->r->req, &b, err, detail, extra);
    ctx->problem[i] = b.data;
    ctx->refused[i] = err;
}

/* Append one item of the answer: {"status":202,"id","location"[,"replayed"][,"deduplicated"],"job"} or
 * {"status","problem"}. */
static void batch_render_item(struct ad_buf *b, struct ad_batch_op *op, size_t i)
{
    struct batch_ctx *ctx = op->ctx;
    struct ad_submit_op *s = op->items[i];
    struct ad_entry *e = op->change[i] >= 0 ? ad_op_published(&op->op, (size_t)op->change[i]) : NULL;
    if (e != NULL) {
        AD_JSON_OPEN(b, "status");
        ad_json_int(b, 202);
        AD_JSON_KEY(b, "id");
        ad_json_str(b, e->job->id);
        AD_JSON_KEY(b, "location");
        AD_BUF_LIT(b, "\"/v1/jobs/");
        ad_json_chars(b, e->job->id);
        AD_BUF_LIT(b, "\"");
        if (s->replayed)
            AD_BUF_LIT(b, ",\"replayed\":true");
        if (s->deduplicated)
            AD_BUF_LIT(b, ",\"deduplicated\":true");
        if (!ctx->minimal) {
            AD_JSON_KEY(b, "job");
            ad_buf_append(b, e->body, e->len);
        }
        AD_BUF_LIT(b, "}");
        return;
    }
    if (ctx->problem[i] == NULL) {
        ad_err err = s != NULL && s->op.err != AD_E_OK ? s->op.err : AD_E_INTERNAL;
        if (err == AD_E_DEPENDENCY_UNKNOWN) {
            struct ad_verr v;
            char detail[300];
            const char *extra = ad_api_dep_unknown(s, &v, detail, sizeof(detail));
            batch_problem(ctx, i, err, detail, extra);
            ad_buf_free(&v.b);
        } else {
            batch_problem(ctx, i, err, err == AD_E_CALLBACK_SECRET_MISSING ? AD_API_CALLBACK_SECRET_HOWTO : NULL, NULL);
        }
    }
    AD_JSON_OPEN(b, "status");
    ad_json_int(b, ad_err_status(ctx->refused[i]));
    AD_JSON_KEY(b, "problem");
    ad_buf_str(b, ctx->problem[i]);
    AD_BUF_LIT(b, "}");
}

/* The 207 with one item per job, in the request's order. */
static void batch_answer(struct ad_batch_op *op)
{
    struct batch_ctx *ctx = op->ctx;
    struct ad_request *r = ctx->r;
    struct ad_buf b;
    ad_buf_init(&b, SIZE_MAX);
    AD_JSON_OPEN(&b, "results");
    AD_BUF_LIT(&b, "[");
    for (size_t i = 0; i < op->n; i++) {
        if (i > 0)
            AD_BUF_LIT(&b, ",");
        batch_render_item(&b, op, i);
    }
    AD_BUF_LIT(&b, "]}");
    ad_http_header(r->req, H2O_TOKEN_CACHE_CONTROL, "no-store");
    ad_http_json(r, 207, b.data, b.len);
    ad_buf_free(&b);
}

static void batch_done(struct ad_op *o)
{
    struct ad_batch_op *op = (struct ad_batch_op *)o;
    struct batch_ctx *ctx = op->ctx;
    for (size_t i = 0; o->err == AD_E_OK && i < op->n; i++) {
        struct ad_entry *e = op->change[i] >= 0 ? ad_op_published(o, (size_t)op->change[i]) : NULL;
        if (e != NULL && !op->items[i]->replayed && !op->items[i]->deduplicated)
            ad_api_trace_submitted(e->job, "POST /v1/jobs:batch", ctx->trace_parent, e->job->created_at);
    }
    if (ad_pending_take(ctx->pend) != NULL) {
        /* The batch as a whole failed (the store): nothing of it was stored, which one problem says best. */
        if (o->err != AD_E_OK)
            ad_api_fail(ctx->r, o->err);
        else
            batch_answer(op);
    }
    batch_ctx_free(ctx);
    ad_op_free(o);
}

/* An item's idempotencyKey: NULL when it has none, else the key (the item's), or *why says what is wrong. */
static const char *batch_item_key(json_t *item, const char **why)
{
    *why = NULL;
    json_t *k = json_object_get(item, "idempotencyKey");
    if (k == NULL || json_is_null(k))
        return NULL;
    const char *key = ad_api_text(k, 1, 255);
    for (const char *p = key; p != NULL && *p != '\0'; p++)
        if (*p < 0x20 || *p > 0x7e)
            key = NULL;
    if (key == NULL)
        *why = "idempotencyKey must be a string of 1 to 255 printable ASCII characters";
    return key;
}

/* Make item i of ctx a submit op (NULL, with its problem set in ctx, when it is refused). keys: the items' keys by
 * index, set here for i (those before it are set). */
static struct ad_submit_op *batch_item(struct ad_request *r, struct batch_ctx *ctx, size_t i, json_t *item, char **keys,
                                       int64_t now)
{
    const char *why = NULL, *key = json_is_object(item) ? batch_item_key(item, &why) : NULL;
    if (why != NULL) {
        struct ad_verr v;
        ad_verr_init(&v);
        ad_verr_add(&v, "/idempotencyKey", why);
        char detail[160];
        const char *extra = ad_verr_finish(&v, detail, sizeof(detail));
        batch_problem(ctx, i, AD_E_VALIDATION_FAILED, detail, extra);
        ad_buf_free(&v.b);
        return NULL;
    }
    keys[i] = key != NULL ? ad_strdup(key) : NULL;
    if (key != NULL) /* the job is fingerprinted as a POST /v1/jobs of it would be, so either replays the other */
        json_object_del(item, "idempotencyKey");
    struct ad_api_submit_parsed p;
    ad_api_submit_parse(r, item, keys[i] != NULL, "/v1/jobs", now, &p);
    if (p.err != AD_E_OK) {
        struct ad_buf b;
        ad_buf_init(&b, SIZE_MAX);
        ad_api_submit_parse_fail(r, &p, &b);
        ctx->problem[i] = b.data;
        ctx->refused[i] = p.err;
        return NULL;
    }
    ad_buf_free(&p.v.b);
    memcpy(ctx->trace_parent, p.trace_parent, sizeof(ctx->trace_parent));
    if (keys[i] != NULL) {
        ctx->inflight[i] = ad_asprintf("%s\n%s", r->tenant, keys[i]);
        if (ad_api_inflight_claim(ctx->inflight[i]) != 0) {
            /* An earlier job of this batch holds the key: the writer answers this one as a replay of that one (or as
             * reused), in the same transaction. */
            size_t k = 0;
            while (k < i && (ctx->inflight[k] == NULL || strcmp(keys[k], keys[i]) != 0))
                k++;
            free(ctx->inflight[i]);
            ctx->inflight[i] = NULL;
            if (k == i) {
                ad_job_free(p.job);
                batch_problem(ctx, i, AD_E_IDEMPOTENCY_IN_FLIGHT,
                              "a request with this idempotencyKey is still being accepted; retry later", NULL);
                return NULL;
            }
        }
    }
    struct ad_submit_op *s = ad_submit_op_new();
    s->job = p.job;
    s->idem_key = keys[i] != NULL ? ad_strdup(keys[i]) : NULL;
    s->debounce = p.debounce;
    memcpy(s->fingerprint, p.fingerprint, sizeof(p.fingerprint));
    return s;
}

int ad_api_submit_batch(struct ad_request *r)
{
    h2o_req_t *req = r->req;
    if (ad_http_get_str(req, "idempotency-key") != NULL)
        return ad_http_problem(req, AD_E_IDEMPOTENCY_KEY_INVALID,
                               "a batch takes a key per job: give each job its own idempotencyKey", NULL);
    json_t *body = ad_api_body(r);
    if (body == NULL)
        return 0;
    json_t *jobs = json_object_get(body, "jobs");
    size_t n = json_array_size(jobs);
    if (n > AD_BATCH_MAX) {
        json_decref(body);
        return ad_http_problemf(req, AD_E_PAYLOAD_TOO_LARGE, "a batch holds at most %d jobs; this one has %zu",
                                AD_BATCH_MAX, n);
    }
    if (!json_is_object(body) || !json_is_array(jobs) || n == 0) {
        json_decref(body);
        struct ad_verr v;
        ad_verr_init(&v);
        ad_verr_add(&v, "/jobs", "jobs is required: an array of 1 to 1000 jobs, each as POST /v1/jobs takes it");
        return ad_verr_send(&v, r);
    }
    size_t granted = 1 + (size_t)ad_api_rate_more(r, (int)n - 1);
    struct batch_ctx *ctx = ad_calloc(1, sizeof(*ctx));
    ctx->n = n;
    ctx->problem = ad_calloc(n, sizeof(*ctx->problem));
    ctx->inflight = ad_calloc(n, sizeof(*ctx->inflight));
    ctx->refused = ad_calloc(n, sizeof(*ctx->refused));
    ctx->r = r;
    ctx->minimal = ad_http_prefer_minimal(req);
    struct ad_batch_op *op = ad_batch_op_new(n);
    op->ctx = ctx;
    op->op.done = batch_done;
    char **keys = ad_calloc(n, sizeof(*keys));
    int64_t now = ad_now_ms();
    for (size_t i = 0; i < n; i++) {
        op->change[i] = -1;
        if (i >= granted)
            batch_problem(ctx, i, AD_E_RATE_LIMITED,
                          "this key has used its quota for the current window; see Retry-After", NULL);
        else
            op->items[i] = batch_item(r, ctx, i, json_array_get(jobs, i), keys, now);
    }
    for (size_t i = 0; i < n; i++)
        free(keys[i]);
    free(keys);
    json_decref(body);
    ctx->pend = ad_pending_new(req, ctx, NULL);
    op->op.weight = n; /* limits.maxQueuedWrites counts the jobs the batch holds until its answer */
    ad_writer_submit(&op->op);
    return 0;
}
