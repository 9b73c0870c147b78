/*
 * api_jobs.c - the job resource: submit (generic and routed), read, result, lists, change feed, cancel
 * and retry, with long polling and Prefer: wait.
 *
 * Reads are served from the cache (server.h); every write is a core operation handed to the writer, and
 * its HTTP answer is sent from the operation's done() once the batch is durable.
 */
#include "api/api.h"
#include "core/core.h"
#include "common/json.h"
#include "common/timer.h"
#include "core/writer.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define AD_LIST_DEFAULT 50
#define AD_LIST_MAX 500
#define AD_CHANGES_DEFAULT 100
#define AD_CHANGES_MAX 1000
/* The detail of a job with a callbackUrl refused for want of a callback secret. */
#define AD_CALLBACK_SECRET_HOWTO                                                                                       \
    "a callbackUrl's deliveries are signed with the tenant's callback secret, and it has none that was shown: POST "   \
    "/v1/webhooks/callback:rotate makes one and answers it (once), then submit again"

/* ---- idempotency keys being committed right now (tenant '\n' key) ---- */

struct inflight {
    struct inflight *next;
    char name[];
};
static struct inflight *inflight_buckets[256];

static struct inflight **inflight_slot(const char *name)
{
    size_t h = 5381;
    for (const char *p = name; *p != '\0'; p++)
        h = h * 33 + (unsigned char)*p;
    struct inflight **s = &inflight_buckets[h & 255];
    while (*s != NULL && strcmp((*s)->name, name) != 0)
        s = &(*s)->next;
    return s;
}

/* Claim name; returns 0, or -1 when another request holds it. */
static int inflight_claim(const char *name)
{
    struct inflight **s = inflight_slot(name);
    if (*s != NULL)
        return -1;
    size_t len = strlen(name);
    *s = ad_malloc(sizeof(**s) + len + 1);
    (*s)->next = NULL;
    memcpy((*s)->name, name, len + 1);
    return 0;
}

static void inflight_release(const char *name)
{
    struct inflight **s = inflight_slot(name), *f = *s;
    if (f != NULL) {
        *s = f->next;
        free(f);
    }
}

/* ---- shared ---- */

static int wait_cap(int n)
{
    return n > ad_hub.cfg->max_wait_seconds ? ad_hub.cfg->max_wait_seconds : n;
}

/* AD_E_OK while the job is live, AD_E_GONE in its tombstone period, then AD_E_NOT_FOUND. */
static ad_err expiry_state(const struct ad_job *j)
{
    if (j->expires_at == 0 && !j->tombstoned)
        return AD_E_OK;
    int64_t now = ad_now_ms();
    if (!j->tombstoned && now < j->expires_at)
        return AD_E_OK;
    return now < j->expires_at + ad_hub.cfg->tombstone_ms ? AD_E_GONE : AD_E_NOT_FOUND;
}

/* The live job named by the request, given what ad_api_lookup found, or NULL after sending 404/410. */
static struct ad_entry *live_job(struct ad_request *r, ad_err err, struct ad_entry *e)
{
    if (err == AD_E_OK)
        err = expiry_state(e->job);
    if (err == AD_E_GONE) {
        char date[40];
        ad_time_rfc3339(e->job->expires_at, date, sizeof(date));
        ad_http_problemf(r->req, AD_E_GONE, "job %s expired at %s", r->id, date);
        return NULL;
    }
    if (err == AD_E_NOT_FOUND) {
        ad_http_problemf(r->req, AD_E_NOT_FOUND, "no job %s", r->id);
        return NULL;
    }
    if (err != AD_E_OK) {
        ad_api_fail(r, err);
        return NULL;
    }
    return e;
}

/* Read an integer query parameter into *out (unchanged when absent). Sends 400 and returns -1 when bad. */
static int query_int(struct ad_request *r, const char *name, long long min, long long max, long long *out)
{
    const char *v = ad_http_query(r, name);
    if (v == NULL)
        return 0;
    if (ad_parse_int(v, strlen(v), min, max, out) != 0) {
        ad_http_problemf(r->req, AD_E_INVALID_REQUEST, "%s must be an integer from %lld to %lld", name, min, max);
        return -1;
    }
    return 0;
}

static int etag_matches(const char *inm, struct ad_entry *e)
{
    if (inm == NULL)
        return 0;
    const char *etag = ad_entry_etag(e);
    return strcmp(inm, etag) == 0 || strcmp(inm, "*") == 0 || strstr(inm, etag) != NULL;
}

/* ---- Azure compatibility (docs/protocol.md, "Azure compatibility") ---- */

/* The modes a read of a job may ask for, under acceptd's names or the Azure sample's (OnPending=Synchronous):
 * how a pending job answers, how a final one does, and whether a long poll waits for the final state. */
enum az_pending { AZ_PENDING_OK, AZ_PENDING_ACCEPTED, AZ_PENDING_SYNC };
enum az_complete { AZ_COMPLETE_DEFAULT, AZ_COMPLETE_INLINE, AZ_COMPLETE_REDIRECT, AZ_COMPLETE_STREAM };
struct az_modes {
    enum az_pending pending;
    enum az_complete complete;
    int until_done;
};

static const char *query_either(struct ad_request *r, const char *name, const char *azure_name)
{
    const char *v = ad_http_query(r, name);
    return v != NULL ? v : ad_http_query(r, azure_name);
}

/* Read the modes of r (values case-insensitive, as the sample spells them). 0, or -1 after sending 400. */
static int az_modes_read(struct ad_request *r, struct az_modes *m)
{
    memset(m, 0, sizeof(*m));
    const char *p = query_either(r, "onPending", "OnPending");
    const char *c = query_either(r, "onComplete", "OnComplete");
    const char *u = ad_http_query(r, "until");
    if (p == NULL || strcasecmp(p, "ok") == 0)
        m->pending = AZ_PENDING_OK;
    else if (strcasecmp(p, "accepted") == 0)
        m->pending = AZ_PENDING_ACCEPTED;
    else if (strcasecmp(p, "synchronous") == 0)
        m->pending = AZ_PENDING_SYNC;
    else
        return ad_http_problem(r->req, AD_E_INVALID_REQUEST, "onPending must be ok, accepted or synchronous", NULL), -1;
    if (c == NULL)
        m->complete = AZ_COMPLETE_DEFAULT;
    else if (strcasecmp(c, "inline") == 0)
        m->complete = AZ_COMPLETE_INLINE;
    else if (strcasecmp(c, "redirect") == 0)
        m->complete = AZ_COMPLETE_REDIRECT;
    else if (strcasecmp(c, "stream") == 0)
        m->complete = AZ_COMPLETE_STREAM;
    else
        return ad_http_problem(r->req, AD_E_INVALID_REQUEST, "onComplete must be redirect, inline or stream", NULL), -1;
    if (u != NULL && strcmp(u, "done") != 0)
        return ad_http_problem(r->req, AD_E_INVALID_REQUEST, "until must be done", NULL), -1;
    m->until_done = u != NULL || m->pending == AZ_PENDING_SYNC;
    return 0;
}

/* The monitor is GET /v1/jobs/{id}/status; it shares the job's read and long poll, and differs in the answer. */
static int is_monitor(struct ad_request *r)
{
    return r->path.len > 7 && memcmp(r->path.base + r->path.len - 7, "/status", 7) == 0;
}

void ad_api_monitor_headers(struct ad_request *r, const char *id)
{
    h2o_req_t *req = r->req;
    const struct ad_route *rt = r->route;
    ad_http_header_cat(req, H2O_TOKEN_LOCATION, "/v1/jobs/", id,
                       rt != NULL && rt->on_pending_accepted ? "?onPending=accepted" : "");
    h2o_iovec_t abs = h2o_concat(&req->pool, h2o_iovec_init(ad_hub.public_url, strlen(ad_hub.public_url)),
                                 h2o_iovec_init(H2O_STRLIT("/v1/jobs/")), h2o_iovec_init(id, strlen(id)),
                                 h2o_iovec_init(H2O_STRLIT("/status")));
    h2o_add_header_by_str(&req->pool, &req->res.headers, H2O_STRLIT("operation-location"), 0, NULL, abs.base, abs.len);
    if (rt != NULL && rt->azure_async_operation)
        h2o_add_header_by_str(&req->pool, &req->res.headers, H2O_STRLIT("azure-asyncoperation"), 0, NULL, abs.base,
                              abs.len);
}

/* The Azure REST API guidelines' status names. partialSuccess is Succeeded (with "partialSuccess": true): a
 * client that knows only those names would otherwise poll it forever. */
static const char *az_status(enum ad_status s)
{
    switch (s) {
    case AD_QUEUED:
        return "NotStarted";
    case AD_RUNNING:
        return "Running";
    case AD_SUCCEEDED:
    case AD_PARTIAL:
        return "Succeeded";
    case AD_FAILED:
        return "Failed";
    default:
        return "Canceled";
    }
}

/* The error member of a failed job's monitor: the stored problem's code and detail (or title). */
static void az_error(struct ad_buf *b, const struct ad_job *j)
{
    json_t *v = j->error != NULL ? json_loads(j->error, 0, NULL) : NULL;
    const char *code = json_string_value(json_object_get(v, "code"));
    AD_JSON_OPEN(b, "code");
    ad_json_str(b, code != NULL ? code : "job-failed");
    AD_JSON_KEY(b, "message");
    ad_json_str(b, ad_api_problem_message(v));
    AD_BUF_LIT(b, "}");
    json_decref(v);
}

/* The status monitor in the Azure guidelines' shape: id, status, percentComplete, times, then error (Failed,
 * Canceled) or result and resourceLocation (Succeeded). */
static int send_monitor(struct ad_request *r, struct ad_entry *e, int status)
{
    const struct ad_job *j = e->job;
    ad_api_job_headers(r->req, e);
    if (status == 304)
        return ad_http_empty(r->req, 304);
    struct ad_buf b;
    ad_buf_init(&b, SIZE_MAX);
    AD_JSON_OPEN(&b, "id");
    ad_json_str(&b, j->id);
    AD_JSON_KEY(&b, "status");
    ad_json_str(&b, az_status(j->status));
    int pct = j->status == AD_SUCCEEDED || j->status == AD_PARTIAL ? 100 : j->progress;
    if (pct >= 0) {
        AD_JSON_KEY(&b, "percentComplete");
        ad_json_int(&b, pct);
    }
    AD_JSON_KEY(&b, "createdDateTime");
    ad_json_time(&b, j->created_at);
    AD_JSON_KEY(&b, "lastActionDateTime");
    ad_json_time(&b, j->updated_at);
    if (j->message != NULL) {
        AD_JSON_KEY(&b, "message");
        ad_json_str(&b, j->message);
    }
    if (j->status == AD_SUCCEEDED || j->status == AD_PARTIAL) {
        if (j->status == AD_PARTIAL)
            AD_BUF_LIT(&b, ",\"partialSuccess\":true");
        if (j->result != NULL) {
            AD_JSON_KEY(&b, "result");
            ad_json_raw(&b, j->result);
        }
        /* Where the outcome lives: the route's business resource (which now answers the result), the worker's
         * external result, or the stored result document. */
        AD_JSON_KEY(&b, "resourceLocation");
        if (j->resource != NULL) {
            AD_BUF_LIT(&b, "\"");
            ad_json_chars(&b, ad_hub.public_url);
            ad_json_chars(&b, j->resource);
            AD_BUF_LIT(&b, "\"");
        } else if (j->result == NULL && j->result_location != NULL) {
            ad_json_str(&b, j->result_location);
        } else {
            AD_BUF_LIT(&b, "\"");
            ad_json_chars(&b, ad_hub.public_url);
            AD_BUF_LIT(&b, "/v1/jobs/");
            ad_json_chars(&b, j->id);
            AD_BUF_LIT(&b, "/result\"");
        }
    } else if (j->status == AD_FAILED) {
        AD_JSON_KEY(&b, "error");
        az_error(&b, j);
    } else if (j->status == AD_CANCELLED) {
        AD_JSON_KEY(&b, "error");
        AD_JSON_OPEN(&b, "code");
        ad_json_str(&b, "job-cancelled");
        AD_JSON_KEY(&b, "message");
        ad_json_str(&b, "the job was cancelled");
        AD_BUF_LIT(&b, "}");
    }
    AD_BUF_LIT(&b, "}");
    if (ad_json_end(&b) != 0) {
        ad_buf_free(&b);
        return ad_api_fail(r, AD_E_INTERNAL);
    }
    char *body = h2o_mem_alloc_pool(&r->req->pool, b.len);
    memcpy(body, b.data, b.len);
    size_t len = b.len;
    ad_buf_free(&b);
    return ad_http_json(r, status, body, len);
}

/* ---- submit ---- */

struct submit_ctx {
    struct ad_pending *pend;
    struct ad_request *r;
    char *inflight;
    int wait; /* Prefer: wait=N to honour after the commit, or -1 */
    int respond_async;
};

struct outcome_wait {
    struct ad_waiter w;
    struct ad_timer timer;
    struct ad_pending *pend;
    struct ad_request *r;
    int wait;
};

/* A failed job's stored problem, answered with its own status (500 when it has none in 400-599). */
static int send_stored_problem(h2o_req_t *req, const struct ad_job *j)
{
    const char *doc = j->error != NULL ? j->error : "{}";
    json_t *v = json_loads(doc, 0, NULL);
    json_int_t status = json_integer_value(json_object_get(v, "status"));
    json_decref(v);
    return ad_http_problem_doc(req, doc, status >= 400 && status <= 599 ? (int)status : 500);
}

/* The result document of a finished job as its own answer: 200 (201 for a routed resource), or 303 to an
 * external result. */
static int send_result(struct ad_request *r, const struct ad_job *j, int created)
{
    if (j->artifact != NULL)
        return ad_api_send_artifact(r, j);
    if (j->result == NULL && j->result_location != NULL) {
        ad_http_header(r->req, H2O_TOKEN_LOCATION, j->result_location);
        return ad_http_empty(r->req, 303);
    }
    if (created)
        ad_http_header(r->req, H2O_TOKEN_LOCATION, j->resource);
    const char *doc = j->result != NULL ? j->result : "null";
    return ad_http_json(r, created ? 201 : 200, doc, strlen(doc));
}

/* For the business resources of api_resources.c, which answer as /v1/jobs/{id}/result does. */
struct ad_entry *ad_api_live_job(struct ad_request *r, ad_err err, struct ad_entry *e)
{
    return live_job(r, err, e);
}

int ad_api_send_result(struct ad_request *r, const struct ad_job *j)
{
    return send_result(r, j, 0);
}

int ad_api_send_stored_problem(h2o_req_t *req, const struct ad_job *j)
{
    return send_stored_problem(req, j);
}

static int send_outcome(struct ad_request *r, struct ad_entry *e, int wait)
{
    h2o_req_t *req = r->req;
    const struct ad_job *j = e->job;
    char applied[32];
    snprintf(applied, sizeof(applied), "wait=%d", wait);
    ad_http_header_str(req, "preference-applied", applied);
    ad_http_header_cat(req, H2O_TOKEN_CONTENT_LOCATION, "/v1/jobs/", j->id, "");
    ad_http_header_cat(req, H2O_TOKEN_LINK, "</v1/jobs/", j->id, ">; rel=\"monitor\"");
    switch (j->status) {
    case AD_SUCCEEDED:
    case AD_PARTIAL:
        return send_result(r, j, j->resource != NULL);
    case AD_FAILED:
        return send_stored_problem(req, j);
    default:
        return ad_http_problemf(req, AD_E_JOB_CANCELLED, "job %s was cancelled", j->id);
    }
}

static void outcome_free(struct outcome_wait *o)
{
    ad_cache_unwatch(&o->w);
    ad_timer_cancel(&o->timer);
    free(o);
}

static void outcome_gone(struct ad_pending *p)
{
    struct outcome_wait *o = p->owner;
    ad_pending_take(p);
    outcome_free(o);
}

static int outcome_found(struct ad_request *r, ad_err err, struct ad_entry *e, void *wait)
{
    return err != AD_E_OK ? ad_api_fail(r, err) : send_outcome(r, e, (int)(intptr_t)wait);
}

static int accepted_found(struct ad_request *r, ad_err err, struct ad_entry *e, void *arg)
{
    return err != AD_E_OK ? ad_api_fail(r, err) : ad_api_send_accepted(r, e, 0);
}

static void outcome_wake(struct ad_waiter *w, struct ad_entry *e)
{
    struct outcome_wait *o = H2O_STRUCT_FROM_MEMBER(struct outcome_wait, w, w);
    if (e != NULL && !ad_status_terminal(e->job->status)) {
        ad_cache_watch(e, &o->w);
        return;
    }
    struct ad_request *r = o->r;
    ad_pending_take(o->pend);
    int wait = o->wait;
    outcome_free(o);
    if (e != NULL)
        send_outcome(r, e, wait);
    else
        ad_api_lookup(r, r->id, outcome_found, (void *)(intptr_t)wait);
}

static void outcome_timeout(struct ad_timer *t)
{
    struct outcome_wait *o = H2O_STRUCT_FROM_MEMBER(struct outcome_wait, timer, t);
    struct ad_request *r = o->r;
    ad_pending_take(o->pend);
    outcome_free(o);
    ad_api_lookup(r, r->id, accepted_found, NULL);
}

static void submit_done(struct ad_op *op)
{
    struct ad_submit_op *s = (struct ad_submit_op *)op;
    struct submit_ctx *ctx = s->ctx;
    if (ctx->inflight != NULL)
        inflight_release(ctx->inflight);
    struct ad_entry *e = ad_op_published(op, 0); /* the job, as the writer published it; NULL on an error */
    if (s->handoff_ctx != NULL) {
        int handed = e != NULL && !s->replayed && e->job->status == AD_RUNNING && e->job->attempt == 1;
        ad_api_leases_handoff_done(s->handoff_ctx, handed ? e : NULL);
    }
    if (ad_pending_take(ctx->pend) != NULL) {
        struct ad_request *r = ctx->r;
        if (op->err == AD_E_CALLBACK_SECRET_MISSING) {
            ad_http_problem(r->req, op->err, AD_CALLBACK_SECRET_HOWTO, NULL);
        } else if (op->err != AD_E_OK) {
            ad_api_fail(r, op->err);
        } else if (ctx->respond_async) {
            ad_http_header_str(r->req, "preference-applied", "respond-async");
            ad_api_send_accepted(r, e, s->replayed);
        } else if (ctx->wait > 0 && ad_status_terminal(e->job->status)) {
            send_outcome(r, e, ctx->wait);
        } else if (ctx->wait > 0) {
            struct outcome_wait *o = ad_calloc(1, sizeof(*o));
            o->r = r;
            r->id = h2o_strdup(&r->req->pool, e->job->id, SIZE_MAX).base;
            o->wait = ctx->wait;
            o->w.wake = outcome_wake;
            o->timer.cb = outcome_timeout;
            o->pend = ad_pending_new(r->req, o, outcome_gone);
            ad_cache_watch(e, &o->w);
            ad_timer_arm(&o->timer, ad_mono_ms() + (int64_t)ctx->wait * 1000);
        } else {
            ad_api_send_accepted(r, e, s->replayed);
        }
    }
    free(ctx->inflight);
    free(ctx);
    ad_op_free(op);
}

/* Parse the Idempotency-Key field: a structured-field string (RFC 8941 §3.3.3: "abc", with \" and \\ escapes)
 * or a bare value, 1-255 printable ASCII characters once unquoted. Two fields read as their list (ad_http_get),
 * which no key parses as: a list is refused rather than guessing which key was meant. Returns why the field is
 * refused, or NULL. */
static const char *parse_idem_key(h2o_req_t *req, char **out)
{
    *out = NULL;
    const char *v = ad_http_get_str(req, "idempotency-key");
    if (v == NULL)
        return NULL;
    size_t vlen = strlen(v);
    int quoted = vlen >= 2 && v[0] == '"' && v[vlen - 1] == '"';
    const char *p = quoted ? v + 1 : v, *end = quoted ? v + vlen - 1 : v + vlen;
    char key[256];
    size_t len = 0;
    for (; p < end; p++) {
        char ch = *p;
        if (quoted && ch == '\\' && p + 1 < end && (p[1] == '"' || p[1] == '\\'))
            ch = *++p;
        else if (ch < 0x20 || ch > 0x7e || ch == '"' || ch == '\\')
            return "an Idempotency-Key is printable ASCII; inside quotes, \" and \\ are escaped as \\\" and \\\\";
        else if (!quoted && ch == ',')
            return "send one Idempotency-Key: a bare key has no comma, as a list of keys would (quote a key that "
                   "holds one)";
        if (len == sizeof(key) - 1)
            return "an Idempotency-Key is at most 255 characters";
        key[len++] = ch;
    }
    if (len == 0)
        return "the Idempotency-Key is empty";
    *out = ad_strndup(key, len);
    return NULL;
}

static char *dump_compact(const json_t *v)
{
    return json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
}

/* Validate a generic submit body into job; adds every problem to v. */
static void validate_submit(json_t *body, struct ad_job *job, struct ad_verr *v, int *unknown_type)
{
    const struct ad_config *cfg = ad_hub.cfg;
    const char *type = ad_api_text(json_object_get(body, "type"), 1, 128);
    if (type == NULL) {
        ad_verr_add(v, "/type", "type is required: a string of 1 to 128 characters");
    } else {
        job->type = ad_strdup(type);
        if (cfg->ntypes != 0 && ad_config_type(cfg, job->type) == NULL)
            *unknown_type = 1;
    }
    json_t *payload = json_object_get(body, "payload");
    if (payload != NULL && !json_is_object(payload))
        ad_verr_add(v, "/payload", "payload must be an object");
    else if (payload != NULL)
        job->payload = dump_compact(payload);
    json_t *prio = json_object_get(body, "priority");
    const char *prio_text = ad_api_text(prio, 0, SIZE_MAX);
    if (prio != NULL && (prio_text == NULL || ad_priority_parse(prio_text, &job->priority) != 0))
        ad_verr_add(v, "/priority", "priority must be \"high\", \"normal\" or \"low\"");
    json_t *cb = json_object_get(body, "callbackUrl");
    if (cb != NULL && !json_is_null(cb)) {
        const char *u = ad_api_text(cb, 0, SIZE_MAX);
        char why[300];
        if (ad_api_webhook_url_invalid(u, why, sizeof(why)))
            ad_verr_add(v, "/callbackUrl", why);
        else
            job->callback_url = ad_strdup(u);
    }
    json_t *run_at = json_object_get(body, "runAt");
    if (run_at != NULL && !json_is_null(run_at) &&
        ad_time_parse_rfc3339(ad_api_text(run_at, 0, SIZE_MAX), &job->run_at) != 0)
        ad_verr_add(v, "/runAt", "runAt must be an RFC 3339 date-time");
    json_t *ma = json_object_get(body, "maxAttempts");
    if (ma != NULL) {
        if (!json_is_integer(ma) || json_integer_value(ma) < 1 || json_integer_value(ma) > 100)
            ad_verr_add(v, "/maxAttempts", "maxAttempts must be an integer from 1 to 100");
        else
            job->max_attempts = (int)json_integer_value(ma);
    }
    json_t *ts = json_object_get(body, "timeoutSeconds");
    if (ts != NULL) {
        if (!json_is_integer(ts) || json_integer_value(ts) < 1 || json_integer_value(ts) > 604800)
            ad_verr_add(v, "/timeoutSeconds", "timeoutSeconds must be an integer from 1 to 604800");
        else
            job->timeout_seconds = (int)json_integer_value(ts);
    }
}

/* Check the type's required payload fields. prefix is the pointer of the payload in the request body. */
static void validate_required(const struct ad_type_conf *tc, json_t *payload, const char *prefix, struct ad_verr *v)
{
    for (size_t i = 0; tc != NULL && i < tc->nrequired; i++) {
        if (json_object_get(payload, tc->required[i]) == NULL) {
            char ptr[300], detail[300];
            snprintf(ptr, sizeof(ptr), "%s/%s", prefix, tc->required[i]);
            snprintf(detail, sizeof(detail), "%s is required for jobs of type %s", tc->required[i], tc->name);
            ad_verr_add(v, ptr, detail);
        }
    }
}

/* A submit's body checked and made into a job: what POST /v1/jobs, a configured route and each job of a batch
 * share. */
struct submit_parsed {
    struct ad_job *job;   /* prepared (ad_core_job_prepare) when err is AD_E_OK; then the caller's */
    char fingerprint[65]; /* of the request, when it carries an idempotency key */
    ad_err err;           /* AD_E_OK, AD_E_VALIDATION_FAILED (v says why) or AD_E_UNKNOWN_TYPE */
    struct ad_verr v;
};

/* Parse body (not consumed) as a submit of r's tenant and route. keyed: an idempotency key comes with it, so
 * the fingerprint is taken, over the method, fp_path and the canonical body. */
static void submit_parse(struct ad_request *r, json_t *body, int keyed, const char *fp_path, int64_t now,
                         struct submit_parsed *p)
{
    struct ad_job *job = ad_job_new();
    ad_verr_init(&p->v);
    int unknown_type = 0;
    if (!json_is_object(body)) {
        ad_verr_add(&p->v, "", "the body must be a JSON object");
    } else if (r->route != NULL) {
        job->type = ad_strdup(r->route->type);
        job->payload = dump_compact(body);
        validate_required(ad_config_type(ad_hub.cfg, job->type), body, "", &p->v);
    } else {
        validate_submit(body, job, &p->v, &unknown_type);
        if (job->type != NULL && !unknown_type)
            validate_required(ad_config_type(ad_hub.cfg, job->type), json_object_get(body, "payload"), "/payload",
                              &p->v);
    }
    if (keyed && p->v.n == 0 && !unknown_type) {
        char *canon = json_dumps(body, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);
        ad_fingerprint("POST", fp_path, canon, p->fingerprint);
        free(canon);
    }
    p->err = unknown_type ? AD_E_UNKNOWN_TYPE : p->v.n != 0 ? AD_E_VALIDATION_FAILED : AD_E_OK;
    if (p->err == AD_E_OK)
        ad_core_job_prepare(job, r->tenant, r->route, now);
    p->job = job;
}

/* The problem of a submit that failed to parse, appended to b (a batch's item) or, with b NULL, sent as r's
 * answer; frees p. */
static int submit_parse_fail(struct ad_request *r, struct submit_parsed *p, struct ad_buf *b)
{
    char detail[300];
    const char *extra = NULL;
    if (p->err == AD_E_UNKNOWN_TYPE)
        snprintf(detail, sizeof(detail), "no job type named %.200s is configured", p->job->type);
    else
        extra = ad_verr_finish(&p->v, detail, sizeof(detail));
    int rc = 0;
    if (b != NULL)
        ad_http_problem_render(r->req, b, p->err, detail, extra);
    else
        rc = ad_http_problem(r->req, p->err, detail, extra);
    ad_buf_free(&p->v.b);
    ad_job_free(p->job);
    return rc;
}

int ad_api_submit(struct ad_request *r)
{
    h2o_req_t *req = r->req;
    char *key;
    const char *bad_key = parse_idem_key(req, &key);
    if (bad_key != NULL)
        return ad_http_problem(req, AD_E_IDEMPOTENCY_KEY_INVALID, bad_key, NULL);
    if (key == NULL && r->route != NULL && r->route->require_idempotency_key)
        return ad_http_problem(req, AD_E_IDEMPOTENCY_KEY_MISSING, "this route requires an Idempotency-Key header",
                               NULL);
    json_t *body = ad_api_body(r);
    if (body == NULL) {
        free(key);
        return 0;
    }
    struct submit_parsed p;
    char *path = ad_strndup(r->path.base, r->path.len);
    submit_parse(r, body, key != NULL, path, ad_now_ms(), &p);
    free(path);
    json_decref(body);
    if (p.err != AD_E_OK) {
        free(key);
        return submit_parse_fail(r, &p, NULL);
    }
    ad_buf_free(&p.v.b);
    struct ad_job *job = p.job;
    int64_t now = job->created_at;

    struct submit_ctx *ctx = ad_calloc(1, sizeof(*ctx));
    if (key != NULL) {
        ctx->inflight = ad_asprintf("%s\n%s", r->tenant, key);
        if (inflight_claim(ctx->inflight) != 0) {
            free(ctx->inflight);
            free(ctx);
            free(key);
            ad_job_free(job);
            return ad_http_problem(req, AD_E_IDEMPOTENCY_IN_FLIGHT,
                                   "a request with this Idempotency-Key is still being accepted; retry later", NULL);
        }
    }
    ad_http_prefer(req, &ctx->respond_async, &ctx->wait);
    ctx->wait = ctx->wait > 0 ? wait_cap(ctx->wait) : -1;
    ctx->r = r;
    ctx->pend = ad_pending_new(req, ctx, NULL);
    struct ad_submit_op *s = ad_submit_op_new();
    s->job = job;
    s->idem_key = key;
    if (key != NULL)
        memcpy(s->fingerprint, p.fingerprint, sizeof(p.fingerprint));
    s->ctx = ctx;
    s->op.done = submit_done;
    if (job->run_at <= now) {
        const char *worker;
        s->handoff_ctx = ad_api_leases_claim(r->tenant, job->type, &s->handoff_ms, &worker);
        s->handoff_worker = s->handoff_ctx != NULL && worker != NULL ? ad_strdup(worker) : NULL;
    }
    ad_writer_submit(&s->op);
    return 0;
}

/* ---- POST /v1/jobs:batch ---- */

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
};

static void batch_ctx_free(struct batch_ctx *ctx)
{
    for (size_t i = 0; i < ctx->n; i++) {
        if (ctx->inflight[i] != NULL)
            inflight_release(ctx->inflight[i]);
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

/* Append one item of the answer: {"status":202,"id","location"[,"replayed"],"job"} or {"status","problem"}. */
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
        if (!ctx->minimal) {
            AD_JSON_KEY(b, "job");
            ad_buf_append(b, e->body, e->len);
        }
        AD_BUF_LIT(b, "}");
        return;
    }
    if (ctx->problem[i] == NULL) {
        ad_err err = s != NULL && s->op.err != AD_E_OK ? s->op.err : AD_E_INTERNAL;
        batch_problem(ctx, i, err, err == AD_E_CALLBACK_SECRET_MISSING ? AD_CALLBACK_SECRET_HOWTO : NULL, NULL);
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
    struct submit_parsed p;
    submit_parse(r, item, keys[i] != NULL, "/v1/jobs", now, &p);
    if (p.err != AD_E_OK) {
        struct ad_buf b;
        ad_buf_init(&b, SIZE_MAX);
        submit_parse_fail(r, &p, &b);
        ctx->problem[i] = b.data;
        ctx->refused[i] = p.err;
        return NULL;
    }
    ad_buf_free(&p.v.b);
    if (keys[i] != NULL) {
        ctx->inflight[i] = ad_asprintf("%s\n%s", r->tenant, keys[i]);
        if (inflight_claim(ctx->inflight[i]) != 0) {
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

/* ---- GET /v1/jobs/{id} with long polling ---- */

struct poll_wait {
    struct ad_waiter w;
    struct ad_timer timer;
    struct ad_pending *pend;
    struct ad_request *r;
    const char *inm;
    enum ad_status status; /* without If-None-Match: wait for a status other than this */
    int prefer;            /* the wait came from Prefer: answer Preference-Applied */
    int wait;
    int until_done; /* ?until=done or OnPending=Synchronous: wait for a final status */
};

static int answer_final(struct ad_request *r, const struct ad_job *j);

/* A finished job read with a redirect asked for (or its route's default): 303 to its result. */
static int send_redirect(struct ad_request *r, struct ad_entry *e)
{
    const struct ad_job *j = e->job;
    /* A signed URL's reader keeps its signature: the result is covered by it too. */
    if (j->artifact != NULL && r->roles != AD_API_SIGNED)
        ad_api_artifact_location(r, j); /* a file is fetched by whatever follows the redirect: it needs no key */
    else if (r->roles == AD_API_SIGNED)
        ad_http_headerf(r->req, H2O_TOKEN_LOCATION, "/v1/jobs/%s/result?exp=%s&sig=%s", j->id, ad_http_query(r, "exp"),
                        ad_http_query(r, "sig"));
    else
        ad_http_headerf(r->req, H2O_TOKEN_LOCATION, "/v1/jobs/%s/result", j->id);
    return ad_api_send_job(r, e, 303);
}

/* The answer to a read of the job or its monitor, once any wait is over; the modes were checked on arrival. */
static int answer_job(struct ad_request *r, struct ad_entry *e, const char *inm, int prefer_wait)
{
    const struct ad_job *j = e->job;
    struct az_modes m;
    if (az_modes_read(r, &m) != 0)
        return 0;
    int final = ad_status_terminal(j->status);
    if (!is_monitor(r) && final && m.complete == AZ_COMPLETE_STREAM)
        return answer_final(r, j);
    int redirect = m.complete != AZ_COMPLETE_DEFAULT ? m.complete == AZ_COMPLETE_REDIRECT : j->on_complete_redirect;
    if (!is_monitor(r) && redirect && (j->status == AD_SUCCEEDED || j->status == AD_PARTIAL || j->status == AD_FAILED))
        return send_redirect(r, e);
    if (prefer_wait > 0) {
        char applied[32];
        snprintf(applied, sizeof(applied), "wait=%d", prefer_wait);
        ad_http_header_str(r->req, "preference-applied", applied);
    }
    int status = 200;
    if (!final && m.pending == AZ_PENDING_ACCEPTED) {
        /* For clients that poll only while they get 202 (Logic Apps): the same read again. */
        ad_http_header(r->req, H2O_TOKEN_LOCATION, h2o_strdup(&r->req->pool, r->req->path.base, r->req->path.len).base);
        status = 202;
    }
    if (etag_matches(inm, e))
        status = 304;
    return is_monitor(r) ? send_monitor(r, e, status) : ad_api_send_job(r, e, status);
}

static void poll_free(struct poll_wait *p)
{
    ad_cache_unwatch(&p->w);
    ad_timer_cancel(&p->timer);
    free(p);
}

static void poll_gone(struct ad_pending *pd)
{
    struct poll_wait *p = pd->owner;
    ad_pending_take(pd);
    poll_free(p);
}

/* The job of a finished wait read back (it left the cache meanwhile); prefer is the Prefer: wait to echo. */
static int poll_found(struct ad_request *r, ad_err err, struct ad_entry *e, void *prefer)
{
    e = live_job(r, err, e);
    return e != NULL ? answer_job(r, e, ad_http_get(r->req, H2O_TOKEN_IF_NONE_MATCH), (int)(intptr_t)prefer) : 0;
}

static void poll_finish(struct poll_wait *p, struct ad_entry *e)
{
    struct ad_request *r = p->r;
    const char *inm = p->inm;
    int prefer = p->prefer ? p->wait : 0;
    ad_pending_take(p->pend);
    poll_free(p);
    if (e == NULL)
        ad_api_lookup(r, r->id, poll_found, (void *)(intptr_t)prefer);
    else
        answer_job(r, e, inm, prefer);
}

static void poll_wake(struct ad_waiter *w, struct ad_entry *e)
{
    struct poll_wait *p = H2O_STRUCT_FROM_MEMBER(struct poll_wait, w, w);
    if (e != NULL && p->until_done && !ad_status_terminal(e->job->status)) {
        ad_cache_watch(e, &p->w);
        return;
    }
    if (e != NULL && p->inm == NULL && e->job->status == p->status) {
        ad_cache_watch(e, &p->w);
        return;
    }
    poll_finish(p, e);
}

static void poll_timeout(struct ad_timer *t)
{
    poll_finish(H2O_STRUCT_FROM_MEMBER(struct poll_wait, timer, t), NULL);
}

static int get_job_found(struct ad_request *r, ad_err err, struct ad_entry *e, void *arg)
{
    e = live_job(r, err, e);
    if (e == NULL)
        return 0;
    const struct ad_job *j = e->job;
    struct az_modes m;
    if (az_modes_read(r, &m) != 0)
        return 0;
    long long wait = 0;
    int prefer_async, prefer_wait;
    ad_http_prefer(r->req, &prefer_async, &prefer_wait);
    if (query_int(r, "wait", 0, 86400, &wait) != 0)
        return 0;
    int prefer = ad_http_query(r, "wait") == NULL && prefer_wait > 0;
    if (prefer)
        wait = prefer_wait;
    else if (m.until_done && ad_http_query(r, "wait") == NULL)
        wait = ad_hub.cfg->max_wait_seconds;
    wait = wait_cap((int)wait);
    const char *inm = ad_http_get(r->req, H2O_TOKEN_IF_NONE_MATCH);
    if (wait <= 0 || ad_status_terminal(j->status) || (inm != NULL && !etag_matches(inm, e)))
        return answer_job(r, e, inm, prefer ? (int)wait : 0);
    struct poll_wait *p = ad_calloc(1, sizeof(*p));
    p->r = r;
    p->inm = inm;
    p->status = j->status;
    p->prefer = prefer;
    p->wait = (int)wait;
    p->until_done = m.until_done;
    p->w.wake = poll_wake;
    p->timer.cb = poll_timeout;
    p->pend = ad_pending_new(r->req, p, poll_gone);
    ad_cache_watch(e, &p->w);
    ad_timer_arm(&p->timer, ad_mono_ms() + wait * 1000);
    return 0;
}

int ad_api_get_job(struct ad_request *r)
{
    return ad_api_lookup(r, r->id, get_job_found, NULL);
}

static int get_result_found(struct ad_request *r, ad_err err, struct ad_entry *e, void *arg)
{
    e = live_job(r, err, e);
    return e != NULL ? answer_final(r, e->job) : 0;
}

/* The result of a job as its own answer (GET .../result, OnComplete=Stream): the document, the stored problem,
 * or a problem saying why there is none. */
static int answer_final(struct ad_request *r, const struct ad_job *j)
{
    switch (j->status) {
    case AD_SUCCEEDED:
    case AD_PARTIAL:
        return send_result(r, j, 0);
    case AD_FAILED:
        return send_stored_problem(r->req, j);
    case AD_CANCELLED:
        return ad_http_problemf(r->req, AD_E_JOB_CANCELLED, "job %s was cancelled and has no result", j->id);
    default:
        ad_http_header_int(r->req, H2O_TOKEN_RETRY_AFTER, ad_hub_retry_after(j));
        return ad_http_problemf(r->req, AD_E_RESULT_NOT_READY, "job %s is %s", j->id, ad_status_name(j->status));
    }
}

int ad_api_get_result(struct ad_request *r)
{
    if (ad_http_get_str(r->req, "lease-id") != NULL || ad_http_query(r, "leaseId") != NULL)
        return ad_api_upload_progress(r);
    return ad_api_lookup(r, r->id, get_result_found, NULL);
}

int ad_api_get_status(struct ad_request *r)
{
    return ad_api_lookup(r, r->id, get_job_found, NULL);
}

/* ---- collections ---- */

/* Append the live jobs of l as a JSON array to b. */
static void render_items(struct ad_buf *b, const struct ad_job_list *l)
{
    AD_BUF_LIT(b, "[");
    int first = 1;
    for (size_t i = 0; i < l->n; i++) {
        if (expiry_state(l->items[i]) != AD_E_OK)
            continue;
        if (!first)
            AD_BUF_LIT(b, ",");
        first = 0;
        ad_job_render(l->items[i], b);
    }
    AD_BUF_LIT(b, "]");
}

static int send_buf(struct ad_request *r, struct ad_buf *b)
{
    char *body = h2o_mem_alloc_pool(&r->req->pool, b->len);
    memcpy(body, b->data, b->len);
    ad_http_header(r->req, H2O_TOKEN_CACHE_CONTROL, "no-cache");
    int rc = ad_http_json(r, 200, body, b->len);
    ad_buf_free(b);
    return rc;
}

/* The attempts answer: the rows read, with the attempt the job holds itself (ad_attempt_own). */
static int send_attempts(struct ad_request *r, struct ad_attempt_list *l, const struct ad_job *j)
{
    ad_attempt_own(l, j);
    struct ad_buf b;
    ad_buf_init(&b, SIZE_MAX);
    AD_JSON_OPEN(&b, "attempts");
    AD_BUF_LIT(&b, "[");
    for (size_t i = 0; i < l->n; i++) {
        const struct ad_attempt *a = &l->items[i];
        if (i != 0)
            AD_BUF_LIT(&b, ",");
        AD_JSON_OPEN(&b, "attempt");
        ad_json_int(&b, a->attempt);
        AD_JSON_KEY(&b, "worker");
        ad_json_str(&b, a->worker);
        AD_JSON_KEY(&b, "startedAt");
        ad_json_time(&b, a->started_at);
        AD_JSON_KEY(&b, "endedAt");
        ad_json_time(&b, a->ended_at);
        AD_JSON_KEY(&b, "outcome");
        ad_json_str(&b, a->outcome);
        AD_BUF_LIT(&b, "}");
    }
    AD_BUF_LIT(&b, "]}");
    return send_buf(r, &b);
}

struct attempts_read {
    struct ad_api_read rd;
    struct ad_job *job; /* a copy: the cache may drop its entry while the rows are read */
    struct ad_attempt_list l;
};

static ad_err attempts_apply(struct ad_op *op, struct ad_conn *c)
{
    struct attempts_read *x = (struct attempts_read *)op;
    return ad_hub.store->ops->attempt_list(c, x->job->id, &x->l);
}

static void attempts_answer(struct ad_api_read *rd, struct ad_request *r)
{
    struct attempts_read *x = (struct attempts_read *)rd;
    if (r != NULL && rd->op.err != AD_E_OK)
        ad_api_fail(r, rd->op.err);
    else if (r != NULL)
        send_attempts(r, &x->l, x->job);
    if (rd->op.err == AD_E_OK)
        ad_attempt_list_free(&x->l);
    ad_job_free(x->job);
}

static int attempts_found(struct ad_request *r, ad_err err, struct ad_entry *e, void *arg)
{
    e = live_job(r, err, e);
    if (e == NULL)
        return 0;
    struct attempts_read *x = ad_calloc(1, sizeof(*x));
    x->job = ad_job_dup(e->job);
    x->rd.op.apply = attempts_apply;
    x->rd.answer = attempts_answer;
    return ad_api_read(r, &x->rd);
}

int ad_api_attempts(struct ad_request *r)
{
    return ad_api_lookup(r, r->id, attempts_found, NULL);
}

struct list_read {
    struct ad_api_read rd;
    struct ad_list_query q;
    char *tenant, *type; /* q's strings */
    struct ad_job_list l;
};

static ad_err list_apply(struct ad_op *op, struct ad_conn *c)
{
    struct list_read *x = (struct list_read *)op;
    return ad_hub.store->ops->job_list(c, &x->q, &x->l);
}

static void list_send(struct ad_request *r, struct ad_job_list *lp, int limit);

static void list_answer(struct ad_api_read *rd, struct ad_request *r)
{
    struct list_read *x = (struct list_read *)rd;
    if (r != NULL && rd->op.err != AD_E_OK)
        ad_api_fail(r, rd->op.err);
    else if (r != NULL)
        list_send(r, &x->l, x->q.limit);
    ad_job_list_free(&x->l);
    free(x->tenant);
    free(x->type);
}

int ad_api_list(struct ad_request *r)
{
    struct ad_list_query q = {.tenant = r->tenant, .limit = AD_LIST_DEFAULT};
    long long limit = AD_LIST_DEFAULT;
    if (query_int(r, "limit", 1, AD_LIST_MAX, &limit) != 0)
        return 0;
    q.limit = (int)limit;
    const char *status = ad_http_query(r, "status");
    if (status != NULL) {
        if (ad_status_parse(status, &q.status) != 0)
            return ad_http_problemf(r->req, AD_E_INVALID_REQUEST, "unknown status %.64s", status);
        q.has_status = 1;
    }
    q.type = ad_http_query(r, "type");
    const char *after = ad_http_query(r, "updatedAfter");
    if (after != NULL && ad_time_parse_rfc3339(after, &q.updated_after) != 0)
        return ad_http_problem(r->req, AD_E_INVALID_REQUEST, "updatedAfter must be an RFC 3339 date-time", NULL);
    const char *token = ad_http_query(r, "pageToken");
    if (token != NULL) {
        uint8_t raw[32];
        long n = strlen(token) < 40 ? ad_b64url_decode(token, strlen(token), raw) : -1;
        long long cseq;
        if (n < 3 || memcmp(raw, "c1:", 3) != 0 || ad_parse_int((char *)raw + 3, n - 3, 1, INT64_MAX, &cseq) != 0)
            return ad_http_problem(r->req, AD_E_INVALID_REQUEST, "pageToken is not one this server issued", NULL);
        q.before_cseq = cseq;
    }
    q.limit++; /* one more than asked tells whether there is a next page */
    struct list_read *x = ad_calloc(1, sizeof(*x));
    x->q = q;
    x->q.tenant = x->tenant = ad_strdup(r->tenant); /* the request may be gone while the reader reads */
    x->q.type = x->type = q.type != NULL ? ad_strdup(q.type) : NULL;
    x->rd.op.apply = list_apply;
    x->rd.answer = list_answer;
    return ad_api_read(r, &x->rd);
}

static void list_send(struct ad_request *r, struct ad_job_list *lp, int limit)
{
    struct ad_job_list l = *lp;
    int more = l.n == (size_t)limit;
    if (more)
        ad_job_free(l.items[--l.n]);
    struct ad_buf b;
    ad_buf_init(&b, SIZE_MAX);
    AD_JSON_OPEN(&b, "items");
    render_items(&b, &l);
    AD_JSON_KEY(&b, "nextPageToken");
    if (more && l.n > 0) {
        char raw[32], tok[48];
        int n = snprintf(raw, sizeof(raw), "c1:%lld", (long long)l.items[l.n - 1]->cseq);
        ad_b64url_encode((uint8_t *)raw, (size_t)n, tok);
        ad_json_str(&b, tok);
    } else {
        ad_json_null(&b);
    }
    AD_BUF_LIT(&b, "}");
    *lp = l;
    send_buf(r, &b);
}

/*
 * A change feed request, from its first read to its answer. Its reads run off the loop (ad_hub_read), one at a time;
 * with ?wait= it waits in change_waiters from the start, so that a change published while a read is in
 * flight (which that read may or may not have seen) has it read again before it waits on.
 */
struct changes_wait {
    h2o_linklist_t link;
    struct ad_timer timer;
    struct ad_pending *pend;
    struct ad_request *r;
    char *tenant;
    int64_t since;
    int limit;
    int waiting; /* an empty page waits for a change (until the timer ends the wait) */
    int reading; /* a read is in flight */
    int again;   /* a change came while reading: an empty page reads again */
    int gone;    /* the client went away while a read was in flight: the read frees it */
};

/* Change feed requests waiting for a change. */
static h2o_linklist_t change_waiters = {&change_waiters, &change_waiters};

struct changes_read {
    struct ad_op op;
    struct changes_wait *c;
    struct ad_job_list l;
};

static ad_err changes_apply(struct ad_op *op, struct ad_conn *c)
{
    struct changes_read *x = (struct changes_read *)op;
    return ad_hub.store->ops->job_changes(c, x->c->tenant, x->c->since, x->c->limit, &x->l);
}

static void changes_read_destroy(struct ad_op *op)
{
    struct changes_read *x = (struct changes_read *)op;
    ad_job_list_free(&x->l);
    free(x);
}

static void changes_free(struct changes_wait *c)
{
    if (h2o_linklist_is_linked(&c->link))
        h2o_linklist_unlink(&c->link);
    ad_timer_cancel(&c->timer);
    free(c->tenant);
    free(c);
}

static void changes_send(struct ad_request *r, const struct ad_job_list *l, int64_t since)
{
    struct ad_buf b;
    ad_buf_init(&b, SIZE_MAX);
    /* The cursor is a string: a client's JSON numbers need not hold 64 bits. */
    char cursor[AD_INT_CHARS + 1];
    ad_format_int(l->n > 0 ? l->items[l->n - 1]->seq : since, cursor);
    AD_JSON_OPEN(&b, "changes");
    render_items(&b, l);
    AD_JSON_KEY(&b, "cursor");
    ad_json_str(&b, cursor);
    AD_BUF_LIT(&b, "}");
    send_buf(r, &b);
}

static void changes_read(struct changes_wait *c);

static void changes_read_done(struct ad_op *op)
{
    struct changes_read *x = (struct changes_read *)op;
    struct changes_wait *c = x->c;
    c->reading = 0;
    if (c->gone) {
        changes_free(c);
    } else if (op->err == AD_E_OK && x->l.n == 0 && c->waiting) {
        if (c->again)
            changes_read(c);
    } else {
        struct ad_request *r = c->r;
        if (ad_pending_take(c->pend) != NULL) {
            if (op->err != AD_E_OK)
                ad_api_fail(r, op->err);
            else
                changes_send(r, &x->l, c->since);
        }
        changes_free(c);
    }
    ad_op_free(op);
}

static void changes_read(struct changes_wait *c)
{
    struct changes_read *x = ad_calloc(1, sizeof(*x));
    x->c = c;
    x->op.apply = changes_apply;
    x->op.done = changes_read_done;
    x->op.destroy = changes_read_destroy;
    c->reading = 1;
    c->again = 0;
    ad_hub_read(&x->op); /* may answer, and free c, before it returns */
}

static void changes_gone(struct ad_pending *p)
{
    struct changes_wait *c = p->owner;
    ad_pending_take(p);
    if (!c->reading) {
        changes_free(c);
        return;
    }
    c->gone = 1;
    if (h2o_linklist_is_linked(&c->link))
        h2o_linklist_unlink(&c->link);
    ad_timer_cancel(&c->timer);
}

static void changes_timeout(struct ad_timer *t)
{
    struct changes_wait *c = H2O_STRUCT_FROM_MEMBER(struct changes_wait, timer, t);
    c->waiting = 0;
    if (!c->reading)
        changes_read(c); /* else the read in flight answers, empty or not */
}

void ad_api_changes_notify(const char *tenant)
{
    h2o_linklist_t *node = change_waiters.next;
    while (node != &change_waiters) {
        struct changes_wait *c = H2O_STRUCT_FROM_MEMBER(struct changes_wait, link, node);
        node = node->next;
        if (strcmp(c->tenant, tenant) != 0)
            continue;
        if (c->reading)
            c->again = 1;
        else
            changes_read(c);
    }
}

int ad_api_changes(struct ad_request *r)
{
    long long since = 0, limit = AD_CHANGES_DEFAULT, wait = 0;
    if (query_int(r, "since", 0, INT64_MAX, &since) != 0 || query_int(r, "limit", 1, AD_CHANGES_MAX, &limit) != 0 ||
        query_int(r, "wait", 0, 86400, &wait) != 0)
        return 0;
    wait = wait_cap((int)wait);
    struct changes_wait *c = ad_calloc(1, sizeof(*c));
    c->r = r;
    c->tenant = ad_strdup(r->tenant);
    c->since = since;
    c->limit = (int)limit;
    c->waiting = wait > 0;
    c->timer.cb = changes_timeout;
    c->pend = ad_pending_new(r->req, c, changes_gone);
    if (c->waiting) {
        h2o_linklist_insert(&change_waiters, &c->link);
        ad_timer_arm(&c->timer, ad_mono_ms() + wait * 1000);
    }
    changes_read(c);
    return 0;
}

/* ---- cancel and retry ---- */

static void cancel_done(struct ad_op *op)
{
    struct ad_cancel_op *x = (struct ad_cancel_op *)op;
    struct ad_request *r = ad_api_write_take(x->ctx);
    struct ad_entry *e = ad_op_published(op, 0);
    if (r != NULL) {
        if (op->err == AD_E_ILLEGAL_TRANSITION && x->job != NULL)
            ad_http_problemf(r->req, op->err, "job %s is %s and can no longer be cancelled", x->job->id,
                             ad_status_name(x->job->status));
        else if (op->err != AD_E_OK)
            ad_api_fail(r, op->err);
        else
            ad_api_send_job(r, e, e->job->status == AD_CANCELLED ? 200 : 202);
    }
    ad_op_free(op);
}

int ad_api_cancel(struct ad_request *r)
{
    char *lease_id = NULL;
    if (r->req->entity.len != 0) {
        json_t *body = ad_api_body(r);
        if (body == NULL)
            return 0;
        json_t *lid = json_object_get(body, "leaseId");
        if (lid != NULL && ad_api_text(lid, 0, SIZE_MAX) == NULL) {
            json_decref(body);
            struct ad_verr v;
            ad_verr_init(&v);
            ad_verr_add(&v, "/leaseId", "leaseId must be a string");
            return ad_verr_send(&v, r);
        }
        if (lid != NULL)
            lease_id = ad_strdup(json_string_value(lid));
        json_decref(body);
    }
    int need = lease_id != NULL ? AD_ROLE_WORKER : AD_ROLE_CLIENT;
    if ((r->roles & need) == 0) {
        free(lease_id);
        return ad_http_problem(r->req, AD_E_FORBIDDEN,
                               need == AD_ROLE_WORKER ? "acknowledging a cancel needs a worker key"
                                                      : "cancelling needs a client key",
                               NULL);
    }
    struct ad_cancel_op *x = ad_cancel_op_new();
    x->tenant = ad_strdup(r->tenant);
    x->id = ad_strdup(r->id);
    x->lease_id = lease_id;
    x->now = ad_now_ms();
    x->ctx = ad_api_write_begin(r);
    x->op.done = cancel_done;
    ad_writer_submit(&x->op);
    return 0;
}

static void retry_done(struct ad_op *op)
{
    struct ad_retry_op *x = (struct ad_retry_op *)op;
    struct ad_request *r = ad_api_write_take(x->ctx);
    struct ad_entry *e = ad_op_published(op, 0);
    if (r != NULL) {
        if (op->err == AD_E_ILLEGAL_TRANSITION && x->job != NULL)
            ad_http_problemf(r->req, op->err, "job %s is %s; only failed or cancelled jobs can be retried", x->job->id,
                             ad_status_name(x->job->status));
        else if (op->err == AD_E_CALLBACK_SECRET_MISSING)
            ad_http_problem(r->req, op->err, AD_CALLBACK_SECRET_HOWTO, NULL);
        else if (op->err != AD_E_OK)
            ad_api_fail(r, op->err);
        else
            ad_api_send_accepted(r, e, 0);
    }
    ad_op_free(op);
}

int ad_api_retry(struct ad_request *r)
{
    struct ad_retry_op *x = ad_retry_op_new();
    x->tenant = ad_strdup(r->tenant);
    x->id = ad_strdup(r->id);
    x->new_id = ad_new_id("job_");
    x->now = ad_now_ms();
    x->ctx = ad_api_write_begin(r);
    x->op.done = retry_done;
    ad_writer_submit(&x->op);
    return 0;
}
