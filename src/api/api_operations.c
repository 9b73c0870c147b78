/*
 * api_operations.c - the Google AIP-151 view of jobs: a job rendered as a google.longrunning.Operation in
 * proto3 JSON, with Get, List, Cancel, Delete and Wait (docs/protocol.md, "Operations view (AIP-151)").
 *
 * An operation is a job seen another way: its id is the job id, its name "operations/{id}". Nothing is stored
 * for it; every answer is rendered from the job the jobs API reads (cache or store), and writes are the jobs'
 * own cancel operation, so tenants, roles, signed URLs and long polls behave as they do for jobs.
 */
#include "api/api_int.h"
#include "core/core.h"
#include "common/json.h"
#include "common/timer.h"
#include "core/writer.h"

#include <stdlib.h>
#include <string.h>

#define AD_OPS_PAGE_DEFAULT 50
#define AD_OPS_PAGE_MAX 1000
#define AD_OPS_FILTER_MAX 256 /* a filter longer than this is no filter this view accepts */

/* Anys carrying arbitrary JSON: google.protobuf.Value and Struct have their own JSON mapping, so a proto3 JSON
 * decoder takes them without any acceptd .proto. */
#define AD_OPS_STRUCT "type.googleapis.com/google.protobuf.Struct"
#define AD_OPS_VALUE "type.googleapis.com/google.protobuf.Value"

/* ---- rendering ---- */

/* The google.rpc.Code for a problem's HTTP status (the table of google/rpc/code.proto, read backwards). */
static int grpc_code(long long status)
{
    switch (status) {
    case 400:
    case 422:
        return 3; /* INVALID_ARGUMENT */
    case 401:
        return 16; /* UNAUTHENTICATED */
    case 403:
        return 7; /* PERMISSION_DENIED */
    case 404:
    case 410:
        return 5; /* NOT_FOUND */
    case 409:
        return 10; /* ABORTED */
    case 412:
        return 9; /* FAILED_PRECONDITION */
    case 429:
        return 8; /* RESOURCE_EXHAUSTED */
    case 499:
        return 1; /* CANCELLED */
    case 500:
        return 13; /* INTERNAL */
    case 501:
        return 12; /* gRPC code 12, for HTTP 501 */
    case 503:
        return 14; /* UNAVAILABLE */
    case 504:
        return 4; /* DEADLINE_EXCEEDED */
    default:
        return 2; /* UNKNOWN */
    }
}

/* error of a failed job: its stored problem mapped to a google.rpc.Status, the problem itself as the detail. */
static void render_error(struct ad_buf *b, const struct ad_job *j)
{
    json_t *p = j->error != NULL ? json_loads(j->error, 0, NULL) : NULL;
    if (!json_is_object(p)) {
        json_decref(p);
        p = NULL;
    }
    AD_JSON_OPEN(b, "code");
    ad_json_int(b, grpc_code(json_integer_value(json_object_get(p, "status"))));
    AD_JSON_KEY(b, "message");
    ad_json_str(b, ad_api_problem_message(p));
    AD_JSON_KEY(b, "details");
    if (p != NULL) {
        AD_BUF_LIT(b, "[{\"@type\":\"" AD_OPS_STRUCT "\",\"value\":");
        ad_json_raw(b, j->error);
        AD_BUF_LIT(b, "}]}");
    } else {
        AD_BUF_LIT(b, "[]}");
    }
    json_decref(p);
}

/* Append job j as a google.longrunning.Operation. */
static void render_operation(struct ad_buf *b, const struct ad_job *j)
{
    AD_BUF_LIT(b, "{\"name\":\"operations/");
    ad_json_chars(b, j->id);
    AD_BUF_LIT(b, "\",\"metadata\":{\"@type\":\"" AD_OPS_STRUCT "\",\"value\":");
    /* acceptd.v1.JobMetadata, carried as a Struct */
    AD_JSON_OPEN(b, "id");
    ad_json_str(b, j->id);
    AD_JSON_KEY(b, "type");
    ad_json_str(b, j->type);
    AD_JSON_KEY(b, "status");
    ad_json_str(b, ad_status_name(j->status));
    if (j->progress >= 0) {
        AD_JSON_KEY(b, "progress");
        ad_json_int(b, j->progress);
    }
    if (j->message != NULL) {
        AD_JSON_KEY(b, "message");
        ad_json_str(b, j->message);
    }
    AD_JSON_KEY(b, "attempt");
    ad_json_int(b, j->attempt);
    AD_JSON_KEY(b, "cancelRequested");
    ad_json_bool(b, j->cancel_requested);
    AD_JSON_KEY(b, "createTime");
    ad_json_time(b, j->created_at);
    AD_JSON_KEY(b, "updateTime");
    ad_json_time(b, j->updated_at != 0 ? j->updated_at : j->created_at);
    if (j->finished_at != 0) {
        AD_JSON_KEY(b, "endTime");
        ad_json_time(b, j->finished_at);
    }
    AD_BUF_LIT(b, "}}");
    int done = ad_status_terminal(j->status);
    AD_JSON_KEY(b, "done");
    ad_json_bool(b, done);
    switch (done ? j->status : AD_QUEUED) {
    case AD_SUCCEEDED:
    case AD_PARTIAL:
        AD_BUF_LIT(b, ",\"response\":{\"@type\":\"" AD_OPS_VALUE "\",\"value\":");
        if (j->result != NULL) {
            ad_json_raw(b, j->result);
        } else if (j->result_location != NULL) {
            AD_JSON_OPEN(b, "resultLocation");
            ad_json_str(b, j->result_location);
            AD_BUF_LIT(b, "}");
        } else {
            ad_json_null(b);
        }
        AD_BUF_LIT(b, "}");
        break;
    case AD_FAILED:
        AD_JSON_KEY(b, "error");
        render_error(b, j);
        break;
    case AD_CANCELLED:
        AD_BUF_LIT(b, ",\"error\":{\"code\":1,\"message\":\"the job was cancelled\",\"details\":[]}");
        break;
    default:
        break;
    }
    AD_BUF_LIT(b, "}");
}

/* The operation's strong ETag: the job's with a suffix, so that it changes exactly when the job's does and is
 * never taken for the job representation's. out holds at least 32 bytes. */
static void operation_etag(struct ad_entry *e, char *out)
{
    const char *etag = ad_entry_etag(e); /* "..." */
    size_t n = strlen(etag);
    snprintf(out, 32, "%.*s-op\"", (int)(n > 1 ? n - 1 : 0), etag);
}

static int send_body(struct ad_request *r, int status, struct ad_buf *b)
{
    ad_http_header(r->req, H2O_TOKEN_CACHE_CONTROL, "no-cache");
    return ad_api_send_buf(r, status, b);
}

/* Answer the operation of e, or 304 when If-None-Match names its ETag. */
static int send_operation(struct ad_request *r, struct ad_entry *e)
{
    char etag[32];
    operation_etag(e, etag);
    ad_http_header(r->req, H2O_TOKEN_ETAG, etag);
    const char *inm = ad_http_get(r->req, H2O_TOKEN_IF_NONE_MATCH);
    if (inm != NULL && (strcmp(inm, "*") == 0 || strstr(inm, etag) != NULL)) {
        ad_http_header(r->req, H2O_TOKEN_CACHE_CONTROL, "no-cache");
        return ad_http_empty(r->req, 304);
    }
    struct ad_buf b;
    ad_buf_init(&b, SIZE_MAX);
    render_operation(&b, e->job);
    return send_body(r, 200, &b);
}

int ad_api_op_accepted(struct ad_request *r, struct ad_entry *e, int replayed)
{
    const char *id = e->job->id;
    ad_http_header_cat(r->req, H2O_TOKEN_LOCATION, "/v1/operations/", id, "");
    ad_http_header_cat(r->req, H2O_TOKEN_LINK, "</v1/operations/", id, ">; rel=\"monitor\"");
    if (e->job->resource != NULL)
        ad_http_header(r->req, H2O_TOKEN_CONTENT_LOCATION, e->job->resource);
    if (replayed)
        ad_http_header_str(r->req, "idempotent-replayed", "true");
    char etag[32];
    operation_etag(e, etag);
    ad_http_header(r->req, H2O_TOKEN_ETAG, etag);
    struct ad_buf b;
    ad_buf_init(&b, SIZE_MAX);
    render_operation(&b, e->job);
    return send_body(r, 200, &b);
}

/* The live job named by the request, or NULL after answering 404 (an expired job is gone as an operation). */
static struct ad_entry *live_op(struct ad_request *r, ad_err err, struct ad_entry *e)
{
    if (err == AD_E_OK && !ad_api_job_live(e->job))
        err = AD_E_NOT_FOUND;
    if (err == AD_E_NOT_FOUND) {
        ad_http_problemf(r->req, AD_E_NOT_FOUND, "no operation operations/%s", r->id);
        return NULL;
    }
    if (err != AD_E_OK) {
        ad_api_fail(r, err);
        return NULL;
    }
    return e;
}

/* ---- GetOperation ---- */

static int get_found(struct ad_request *r, ad_err err, struct ad_entry *e, void *arg)
{
    e = live_op(r, err, e);
    return e != NULL ? send_operation(r, e) : 0;
}

int ad_api_op_get(struct ad_request *r)
{
    if (strncmp(r->id, "bat_", 4) == 0 && r->roles != AD_API_SIGNED)
        return ad_api_batch_operation(r); /* a batch's view (api_batches.c) */
    return ad_api_lookup(r, r->id, get_found, NULL);
}

/* ---- ListOperations ---- */

struct op_filter {
    int has_done, done;
    int has_status;
    enum ad_status status;
};

/* Parse one term "done=true|false" or "status=NAME" / status="NAME" (spaces allowed around '='). */
static int filter_term(const char *s, size_t len, struct op_filter *f)
{
    while (len > 0 && s[0] == ' ')
        s++, len--;
    while (len > 0 && s[len - 1] == ' ')
        len--;
    const char *eq = memchr(s, '=', len);
    if (eq == NULL)
        return -1;
    size_t klen = (size_t)(eq - s), vlen = len - klen - 1;
    const char *v = eq + 1;
    while (klen > 0 && s[klen - 1] == ' ')
        klen--;
    while (vlen > 0 && v[0] == ' ')
        v++, vlen--;
    if (vlen >= 2 && v[0] == '"' && v[vlen - 1] == '"')
        v++, vlen -= 2;
    char val[32];
    if (vlen == 0 || vlen >= sizeof(val))
        return -1;
    memcpy(val, v, vlen);
    val[vlen] = '\0';
    if (klen == 4 && memcmp(s, "done", 4) == 0 && !f->has_done) {
        if (strcmp(val, "true") != 0 && strcmp(val, "false") != 0)
            return -1;
        f->has_done = 1;
        f->done = strcmp(val, "true") == 0;
        return 0;
    }
    if (klen == 6 && memcmp(s, "status", 6) == 0 && !f->has_status)
        return (f->has_status = 1, ad_status_parse(val, &f->status));
    return -1;
}

/* The grammar: terms joined by " AND " (docs/protocol.md). 0, or -1 for anything else. */
static int filter_parse(const char *s, struct op_filter *f)
{
    size_t len = strlen(s);
    if (len > AD_OPS_FILTER_MAX)
        return -1;
    while (len > 0) {
        const char *and = strstr(s, " AND ");
        size_t tlen = and != NULL ? (size_t)(and-s) : len;
        if (filter_term(s, tlen, f) != 0)
            return -1;
        if (and == NULL)
            break;
        len -= tlen + 5;
        s += tlen + 5;
        if (len == 0)
            return -1;
    }
    return 0;
}

static int filter_keeps(const struct op_filter *f, const struct ad_job *j)
{
    if (f->has_done && ad_status_terminal(j->status) != f->done)
        return 0;
    return !f->has_status || j->status == f->status;
}

struct list_read {
    struct ad_api_read rd;
    struct ad_list_query q;
    struct op_filter f;
    char *tenant; /* q's */
    struct ad_job_list l;
};

static ad_err list_apply(struct ad_op *op, struct ad_conn *c)
{
    struct list_read *x = (struct list_read *)op;
    return ad_hub.store->ops->job_list(c, &x->q, &x->l);
}

static void list_send(struct ad_request *r, struct list_read *x)
{
    struct ad_job_list *l = &x->l;
    /* One more than asked was read: it says there is a next page, which starts after the last one shown. A filter
     * narrower than the store's (done) is applied here, so a page may hold fewer than pageSize (AIP-158). */
    int more = l->n == (size_t)x->q.limit;
    size_t n = more ? l->n - 1 : l->n;
    struct ad_buf b;
    ad_buf_init(&b, SIZE_MAX);
    AD_BUF_LIT(&b, "{\"operations\":[");
    int first = 1;
    for (size_t i = 0; i < n; i++) {
        if (!ad_api_job_live(l->items[i]) || !filter_keeps(&x->f, l->items[i]))
            continue;
        if (!first)
            AD_BUF_LIT(&b, ",");
        first = 0;
        render_operation(&b, l->items[i]);
    }
    AD_BUF_LIT(&b, "]");
    if (more && n > 0) {
        char tok[AD_API_PAGE_TOKEN_MAX];
        ad_api_page_token("o1", l->items[n - 1]->cseq, tok);
        AD_JSON_KEY(&b, "nextPageToken");
        ad_json_str(&b, tok);
    }
    AD_BUF_LIT(&b, "}");
    send_body(r, 200, &b);
}

static void list_answer(struct ad_api_read *rd, struct ad_request *r)
{
    struct list_read *x = (struct list_read *)rd;
    if (r != NULL && rd->op.err != AD_E_OK)
        ad_api_fail(r, rd->op.err);
    else if (r != NULL)
        list_send(r, x);
    ad_job_list_free(&x->l);
    free(x->tenant);
}

int ad_api_op_list(struct ad_request *r)
{
    struct op_filter f = {0};
    const char *filter = ad_http_query(r, "filter");
    if (filter != NULL && filter_parse(filter, &f) != 0)
        return ad_http_problem(r->req, AD_E_INVALID_REQUEST,
                               "filter accepts done=true|false and status=\"NAME\", joined by AND", NULL);
    long long size = AD_OPS_PAGE_DEFAULT;
    const char *ps = ad_http_query(r, "pageSize");
    if (ps != NULL && ad_parse_int(ps, strlen(ps), 0, AD_OPS_PAGE_MAX, &size) != 0)
        return ad_http_problemf(r->req, AD_E_INVALID_REQUEST, "pageSize must be an integer from 0 to %d",
                                AD_OPS_PAGE_MAX);
    if (size == 0) /* AIP-158: 0 is the server's default */
        size = AD_OPS_PAGE_DEFAULT;
    struct ad_list_query q = {
        .tenant = r->tenant, .limit = (int)size + 1, .has_status = f.has_status, .status = f.status};
    const char *token = ad_http_query(r, "pageToken");
    /* AIP-158: an empty token asks for the first page. */
    if ((token == NULL || token[0] != '\0') && ad_api_page_token_read(r, "o1", &q.before_cseq) != 0)
        return 0;
    struct list_read *x = ad_calloc(1, sizeof(*x));
    x->q = q;
    x->f = f;
    x->q.tenant = x->tenant = ad_strdup(r->tenant); /* the request may be gone while the reader reads */
    x->rd.op.apply = list_apply;
    x->rd.answer = list_answer;
    return ad_api_read(r, &x->rd);
}

/* ---- CancelOperation and DeleteOperation ---- */

static void cancel_done(struct ad_op *op)
{
    struct ad_cancel_op *x = (struct ad_cancel_op *)op;
    struct ad_request *r = ad_api_write_take(x->ctx);
    if (r != NULL) {
        if (op->err == AD_E_ILLEGAL_TRANSITION && x->job != NULL)
            ad_http_problemf(r->req, op->err, "operation operations/%s is done (%s) and can no longer be cancelled",
                             x->job->id, ad_status_name(x->job->status));
        else if (op->err == AD_E_NOT_FOUND)
            ad_http_problemf(r->req, AD_E_NOT_FOUND, "no operation operations/%s", r->id);
        else if (op->err != AD_E_OK)
            ad_api_fail(r, op->err);
        else
            ad_http_json(r, 200, "{}", 2); /* google.protobuf.Empty */
    }
    ad_op_free(op);
}

static int cancel_submit(struct ad_request *r)
{
    struct ad_cancel_op *x = ad_cancel_op_new();
    x->tenant = ad_strdup(r->tenant);
    x->id = ad_strdup(r->id);
    x->now = ad_now_ms();
    x->ctx = ad_api_write_begin(r);
    x->op.done = cancel_done;
    ad_writer_submit(&x->op);
    return 0;
}

int ad_api_op_cancel(struct ad_request *r)
{
    return cancel_submit(r);
}

/* DeleteOperation: the client no longer wants the operation. A pending one is cancelled (a job nobody waits for
 * is work wasted); a done one is left to its retention, which removes it. Either way the answer is Empty. */
static int delete_found(struct ad_request *r, ad_err err, struct ad_entry *e, void *arg)
{
    e = live_op(r, err, e);
    if (e == NULL)
        return 0;
    if (ad_status_terminal(e->job->status) || e->job->cancel_requested)
        return ad_http_json(r, 200, "{}", 2);
    return cancel_submit(r);
}

int ad_api_op_delete(struct ad_request *r)
{
    return ad_api_lookup(r, r->id, delete_found, NULL);
}

/* ---- WaitOperation ---- */

/* A wait ends once the operation is done. */
static int wait_keep(struct ad_api_wait *w, const struct ad_entry *e)
{
    return !ad_status_terminal(e->job->status);
}

static void wait_finish(struct ad_api_wait *w, struct ad_request *r, struct ad_entry *e, int timed_out)
{
    if (e == NULL) /* the timeout, or it left the cache meanwhile: read it back */
        ad_api_lookup(r, r->id, get_found, NULL);
    else
        send_operation(r, e);
}

/* A google.protobuf.Duration in JSON: seconds with up to 9 fractional digits and an "s" ("30s", "1.5s").
 * Whole milliseconds into *ms; -1 when it is not one. */
static int parse_duration(const char *s, size_t len, int64_t *ms)
{
    if (len < 2 || s[len - 1] != 's')
        return -1;
    len--;
    const char *dot = memchr(s, '.', len);
    size_t ilen = dot != NULL ? (size_t)(dot - s) : len;
    long long secs;
    if (ilen == 0 || ad_parse_int(s, ilen, 0, 315576000000LL, &secs) != 0)
        return -1;
    int64_t frac = 0, scale = 100;
    if (dot != NULL) {
        size_t flen = len - ilen - 1;
        if (flen == 0 || flen > 9)
            return -1;
        for (size_t i = 0; i < flen; i++) {
            char c = dot[1 + i];
            if (c < '0' || c > '9')
                return -1;
            frac += (c - '0') * scale;
            scale /= 10;
        }
    }
    *ms = (int64_t)secs * 1000 + frac;
    return 0;
}

static int wait_found(struct ad_request *r, ad_err err, struct ad_entry *e, void *arg)
{
    e = live_op(r, err, e);
    if (e == NULL)
        return 0;
    int64_t ms = (int64_t)(intptr_t)arg;
    if (ms <= 0 || ad_status_terminal(e->job->status))
        return send_operation(r, e);
    struct ad_api_wait *w = ad_calloc(1, sizeof(*w));
    w->keep = wait_keep;
    w->finish = wait_finish;
    ad_api_wait_start(w, r, e, ms);
    return 0;
}

/* WaitOperation: {"timeout": Duration} in the body (or ?timeout=), capped by limits.maxWaitSeconds, which is also
 * the wait when none is given. Answers the operation once it is done or when the timeout passes. */
int ad_api_op_wait(struct ad_request *r)
{
    int64_t cap = (int64_t)ad_hub.cfg->max_wait_seconds * 1000, ms = cap;
    const char *t = ad_http_query(r, "timeout");
    if (r->req->entity.len != 0) {
        json_t *body = ad_api_body(r);
        if (body == NULL)
            return 0;
        json_t *v = json_object_get(body, "timeout");
        if (!json_is_object(body) || (v != NULL && !json_is_string(v))) {
            json_decref(body);
            return ad_http_problem(r->req, AD_E_INVALID_REQUEST,
                                   "the body is a WaitOperationRequest: {\"timeout\": \"30s\"}", NULL);
        }
        if (v != NULL)
            t = h2o_strdup(&r->req->pool, json_string_value(v), SIZE_MAX).base;
        json_decref(body);
    }
    if (t != NULL && parse_duration(t, strlen(t), &ms) != 0)
        return ad_http_problem(r->req, AD_E_INVALID_REQUEST, "timeout must be a Duration such as \"30s\"", NULL);
    if (ms > cap)
        ms = cap;
    return ad_api_lookup(r, r->id, wait_found, (void *)(intptr_t)ms);
}
