/*
 * api_jobs.c - the job resource: submit (generic and routed), read with long polling, result, cancel and retry,
 * and what the other parts of the resource share (api_int.h): the submit parser, idempotency keys being
 * committed, a job's expiry.
 *
 * Reads are served from the cache (hub/cache.h); every write is a core operation handed to the writer, and its
 * HTTP answer is sent from the operation's done() once the batch is durable. The rest of the resource lives
 * beside it: the Azure status monitor and modes (api_azure.c), bulk submit (api_bulk.c), the lists and the
 * change feed (api_collections.c).
 */
#include "api/api_int.h"
#include "core/deps.h"
#include "common/json.h"

#include <stdlib.h>
#include <string.h>

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
int ad_api_inflight_claim(const char *name)
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

void ad_api_inflight_release(const char *name)
{
    struct inflight **s = inflight_slot(name), *f = *s;
    if (f != NULL) {
        *s = f->next;
        free(f);
    }
}

/* ---- shared ---- */

int ad_api_wait_cap(int n)
{
    return n > ad_hub.cfg->max_wait_seconds ? ad_hub.cfg->max_wait_seconds : n;
}

/* AD_E_OK while the job is live, AD_E_GONE in its tombstone period, then AD_E_NOT_FOUND. */
ad_err ad_api_expiry_state(const struct ad_job *j)
{
    if (j->expires_at == 0 && !j->tombstoned)
        return AD_E_OK;
    int64_t now = ad_now_ms();
    if (!j->tombstoned && now < j->expires_at)
        return AD_E_OK;
    return now < j->expires_at + ad_hub.cfg->tombstone_ms ? AD_E_GONE : AD_E_NOT_FOUND;
}

int ad_api_job_live(const struct ad_job *j)
{
    return ad_api_expiry_state(j) == AD_E_OK;
}

/* The live job named by the request, given what ad_api_lookup found, or NULL after sending 404/410. */
static struct ad_entry *live_job(struct ad_request *r, ad_err err, struct ad_entry *e)
{
    if (err == AD_E_OK)
        err = ad_api_expiry_state(e->job);
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
int ad_api_query_int(struct ad_request *r, const char *name, long long min, long long max, long long *out)
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

static int etag_matches(struct ad_request *r, const char *inm, struct ad_entry *e)
{
    if (inm == NULL)
        return 0;
    const char *etag = ad_api_job_etag(r->req, e);
    return strcmp(inm, etag) == 0 || strcmp(inm, "*") == 0 || strstr(inm, etag) != NULL;
}

/* ---- submit ---- */

struct submit_ctx {
    struct ad_pending *pend;
    struct ad_request *r;
    char *inflight;
    int wait; /* Prefer: wait=N to honour after the commit, or -1 */
    int respond_async;
    char trace_parent[AD_SPAN_ID_HEX + 1]; /* the submitter's span (api_trace.c) */
};

/* A submit with Prefer: wait=N, held until its job is final or N seconds pass. */
struct outcome_wait {
    struct ad_api_wait w;
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

static int outcome_found(struct ad_request *r, ad_err err, struct ad_entry *e, void *wait)
{
    return err != AD_E_OK ? ad_api_fail(r, err) : send_outcome(r, e, (int)(intptr_t)wait);
}

static int accepted_found(struct ad_request *r, ad_err err, struct ad_entry *e, void *arg)
{
    return err != AD_E_OK ? ad_api_fail(r, err) : ad_api_send_accepted(r, e, 0);
}

static int outcome_keep(struct ad_api_wait *w, const struct ad_entry *e)
{
    return !ad_status_terminal(e->job->status);
}

static void outcome_finish(struct ad_api_wait *w, struct ad_request *r, struct ad_entry *e, int timed_out)
{
    int wait = ((struct outcome_wait *)w)->wait;
    if (timed_out)
        ad_api_lookup(r, r->id, accepted_found, NULL);
    else if (e != NULL)
        send_outcome(r, e, wait);
    else
        ad_api_lookup(r, r->id, outcome_found, (void *)(intptr_t)wait);
}

static void submit_done(struct ad_op *op)
{
    struct ad_submit_op *s = (struct ad_submit_op *)op;
    struct submit_ctx *ctx = s->ctx;
    if (ctx->inflight != NULL)
        ad_api_inflight_release(ctx->inflight);
    struct ad_entry *e = ad_op_published(op, 0); /* the job, as the writer published it; NULL on an error */
    if (s->handoff_ctx != NULL) {
        int handed =
            e != NULL && !s->replayed && !s->deduplicated && e->job->status == AD_RUNNING && e->job->attempt == 1;
        ad_api_leases_handoff_done(s->handoff_ctx, handed ? e : NULL);
    }
    if (e != NULL && !s->replayed && !s->deduplicated)
        ad_api_trace_submitted(e->job, "POST /v1/jobs", ctx->trace_parent, e->job->created_at);
    if (ad_pending_take(ctx->pend) != NULL) {
        struct ad_request *r = ctx->r;
        int how = (s->replayed ? AD_API_REPLAYED : 0) | (s->deduplicated ? AD_API_DEDUPLICATED : 0);
        if (op->err == AD_E_CALLBACK_SECRET_MISSING) {
            ad_http_problem(r->req, op->err, AD_API_CALLBACK_SECRET_HOWTO, NULL);
        } else if (op->err == AD_E_DEPENDENCY_UNKNOWN) {
            struct ad_verr v;
            char detail[300];
            const char *extra = ad_api_dep_unknown(s, &v, detail, sizeof(detail));
            ad_http_problem(r->req, op->err, detail, extra);
            ad_buf_free(&v.b);
        } else if (op->err != AD_E_OK) {
            ad_api_fail(r, op->err);
        } else if (ctx->respond_async) {
            ad_http_header_str(r->req, "preference-applied", "respond-async");
            ad_api_send_accepted(r, e, how);
        } else if (ctx->wait > 0 && ad_status_terminal(e->job->status)) {
            send_outcome(r, e, ctx->wait);
        } else if (ctx->wait > 0) {
            struct outcome_wait *o = ad_calloc(1, sizeof(*o));
            r->id = h2o_strdup(&r->req->pool, e->job->id, SIZE_MAX).base;
            o->wait = ctx->wait;
            o->w.keep = outcome_keep;
            o->w.finish = outcome_finish;
            ad_api_wait_start(&o->w, r, e, (int64_t)ctx->wait * 1000);
        } else {
            ad_api_send_accepted(r, e, how);
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
const char *ad_api_idem_key(h2o_req_t *req, char **out)
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

const char *ad_api_group(const json_t *g)
{
    const char *s = ad_api_text(g, 1, 128);
    for (const char *p = s; p != NULL && *p != '\0'; p++)
        if (*p < 0x20 || *p > 0x7e)
            return NULL;
    return s;
}

/* A job's group, the body's member name; absent or null is none. */
static void validate_group(json_t *body, const char *name, struct ad_job *job, struct ad_verr *v)
{
    json_t *g = json_object_get(body, name);
    if (g == NULL || json_is_null(g))
        return;
    const char *s = ad_api_group(g);
    if (s != NULL) {
        job->group = ad_strdup(s);
        return;
    }
    struct ad_buf ptr; /* the member's JSON Pointer (RFC 6901: ~ and / escaped) */
    ad_buf_init(&ptr, SIZE_MAX);
    ad_buf_str(&ptr, "/");
    for (const char *p = name; *p != '\0'; p++)
        ad_buf_str(&ptr, *p == '~' ? "~0" : *p == '/' ? "~1" : (char[]){*p, '\0'});
    ad_buf_append(&ptr, "", 1);
    char detail[300];
    snprintf(detail, sizeof(detail), "%.200s must be a string of 1 to 128 printable ASCII characters (the job's group)",
             name);
    ad_verr_add(v, ptr.data, detail);
    ad_buf_free(&ptr);
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
    validate_group(body, "group", job, v);
}

/* dependsOn and onDependencyFailure (CONTRACT §13, core/deps.h): 1 to AD_DEPS_MAX distinct ids, kept as the
 * job's compact JSON array; whether they are jobs of the tenant is the writer's to check. */
static void validate_deps(json_t *body, struct ad_job *job, struct ad_verr *v)
{
    json_t *f = json_object_get(body, "onDependencyFailure");
    if (f != NULL && !json_is_null(f)) {
        const char *how = ad_api_text(f, 0, SIZE_MAX);
        if (how != NULL && strcmp(how, "run") == 0)
            job->dep_run = 1;
        else if (how == NULL || strcmp(how, "cancel") != 0)
            ad_verr_add(v, "/onDependencyFailure", "onDependencyFailure must be \"cancel\" or \"run\"");
    }
    json_t *d = json_object_get(body, "dependsOn");
    if (d == NULL || json_is_null(d))
        return;
    if (!json_is_array(d) || json_array_size(d) < 1 || json_array_size(d) > AD_DEPS_MAX) {
        ad_verr_add(v, "/dependsOn", "dependsOn must be an array of 1 to 100 job ids");
        return;
    }
    int ok = 1;
    for (size_t i = 0; i < json_array_size(d); i++) {
        char ptr[32];
        snprintf(ptr, sizeof(ptr), "/dependsOn/%zu", i);
        const char *id = ad_api_text(json_array_get(d, i), 1, 128);
        int twice = 0;
        for (size_t k = 0; id != NULL && k < i && !twice; k++)
            twice = json_equal(json_array_get(d, k), json_array_get(d, i));
        if (id == NULL)
            ad_verr_add(v, ptr, "each id in dependsOn is a string of 1 to 128 characters");
        else if (twice)
            ad_verr_add(v, ptr, "this id is given twice in dependsOn");
        ok = ok && id != NULL && !twice;
    }
    if (ok)
        job->depends_on = dump_compact(d);
}

const char *ad_api_dep_unknown(const struct ad_submit_op *s, struct ad_verr *v, char *detail, size_t len)
{
    char ptr[32];
    snprintf(ptr, sizeof(ptr), "/dependsOn/%d", s->dep_bad);
    ad_verr_init(v);
    ad_verr_add(v, ptr, "no job of this tenant has this id");
    return ad_verr_finish(v, detail, len);
}

/* uniqueKey and debounceSeconds (CONTRACT §11): the key is the job's; debounceSeconds makes its runAt now + n and
 * sets *debounce, so that the writer moves a queued job of the key there too. */
static void validate_unique(json_t *body, struct ad_job *job, int64_t now, struct ad_verr *v, int *debounce)
{
    json_t *uk = json_object_get(body, "uniqueKey");
    if (uk != NULL && !json_is_null(uk)) {
        const char *key = ad_api_text(uk, 1, 255);
        for (const char *p = key; p != NULL && *p != '\0'; p++)
            if ((unsigned char)*p < 0x20 || *p == 0x7f)
                key = NULL;
        if (key == NULL)
            ad_verr_add(v, "/uniqueKey", "uniqueKey must be a string of 1 to 255 characters, none a control character");
        else
            job->unique_key = ad_strdup(key);
    }
    json_t *ds = json_object_get(body, "debounceSeconds");
    if (ds == NULL || json_is_null(ds))
        return;
    if (!json_is_integer(ds) || json_integer_value(ds) < 1 || json_integer_value(ds) > 86400)
        ad_verr_add(v, "/debounceSeconds", "debounceSeconds must be an integer from 1 to 86400");
    else if (uk == NULL || json_is_null(uk))
        ad_verr_add(v, "/debounceSeconds", "debounceSeconds needs a uniqueKey: it delays the job of that key");
    else if (json_object_get(body, "runAt") != NULL && !json_is_null(json_object_get(body, "runAt")))
        ad_verr_add(v, "/debounceSeconds", "give runAt or debounceSeconds, not both: debounceSeconds sets the runAt");
    else {
        job->run_at = now + json_integer_value(ds) * 1000;
        *debounce = 1;
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

/* Parse body (not consumed) as a submit of r's tenant and route. keyed: an idempotency key comes with it, so
 * the fingerprint is taken, over the method, fp_path and the canonical body. */
void ad_api_submit_parse(struct ad_request *r, json_t *body, int keyed, const char *fp_path, int64_t now,
                         struct ad_api_submit_parsed *p)
{
    struct ad_job *job = ad_job_new();
    ad_verr_init(&p->v);
    p->debounce = 0;
    int unknown_type = 0;
    if (!json_is_object(body)) {
        ad_verr_add(&p->v, "", "the body must be a JSON object");
    } else if (r->route != NULL) {
        job->type = ad_strdup(r->route->type);
        job->payload = dump_compact(body);
        validate_required(ad_config_type(ad_hub.cfg, job->type), body, "", &p->v);
        if (r->route->group != NULL)
            validate_group(body, r->route->group, job, &p->v);
    } else {
        validate_submit(body, job, &p->v, &unknown_type);
        validate_unique(body, job, now, &p->v, &p->debounce);
        validate_deps(body, job, &p->v);
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
    p->trace_parent[0] = '\0';
    if (p->err == AD_E_OK) {
        ad_core_job_prepare(job, r->tenant, r->route, now);
        ad_api_trace_begin(r, job, p->trace_parent);
    }
    p->job = job;
}

/* The problem of a submit that failed to parse, appended to b (a batch's item) or, with b NULL, sent as r's
 * answer; frees p. */
int ad_api_submit_parse_fail(struct ad_request *r, struct ad_api_submit_parsed *p, struct ad_buf *b)
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
    const char *bad_key = ad_api_idem_key(req, &key);
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
    struct ad_api_submit_parsed p;
    char *path = ad_strndup(r->path.base, r->path.len);
    ad_api_submit_parse(r, body, key != NULL, path, ad_now_ms(), &p);
    free(path);
    json_decref(body);
    if (p.err != AD_E_OK) {
        free(key);
        return ad_api_submit_parse_fail(r, &p, NULL);
    }
    ad_buf_free(&p.v.b);
    struct ad_job *job = p.job;
    int64_t now = job->created_at;

    struct submit_ctx *ctx = ad_calloc(1, sizeof(*ctx));
    if (key != NULL) {
        ctx->inflight = ad_asprintf("%s\n%s", r->tenant, key);
        if (ad_api_inflight_claim(ctx->inflight) != 0) {
            free(ctx->inflight);
            free(ctx);
            free(key);
            ad_job_free(job);
            return ad_http_problem(req, AD_E_IDEMPOTENCY_IN_FLIGHT,
                                   "a request with this Idempotency-Key is still being accepted; retry later", NULL);
        }
    }
    ad_http_prefer(req, &ctx->respond_async, &ctx->wait);
    ctx->wait = ctx->wait > 0 ? ad_api_wait_cap(ctx->wait) : -1;
    ctx->r = r;
    memcpy(ctx->trace_parent, p.trace_parent, sizeof(ctx->trace_parent));
    ctx->pend = ad_pending_new(req, ctx, NULL);
    struct ad_submit_op *s = ad_submit_op_new();
    s->job = job;
    s->idem_key = key;
    if (key != NULL)
        memcpy(s->fingerprint, p.fingerprint, sizeof(p.fingerprint));
    s->debounce = p.debounce;
    s->ctx = ctx;
    s->op.done = submit_done;
    if (job->run_at <= now && job->depends_on == NULL) {
        const char *worker;
        s->handoff_ctx = ad_api_leases_claim(r->tenant, job->type, &s->handoff_ms, &worker);
        s->handoff_worker = s->handoff_ctx != NULL && worker != NULL ? ad_strdup(worker) : NULL;
    }
    ad_writer_submit(&s->op);
    return 0;
}

/* ---- GET /v1/jobs/{id} with long polling ---- */

struct poll_wait {
    struct ad_api_wait w;
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
    struct ad_az_modes m;
    if (ad_api_az_modes_read(r, &m) != 0)
        return 0;
    int final = ad_status_terminal(j->status);
    if (!ad_api_is_monitor(r) && final && m.complete == AZ_COMPLETE_STREAM)
        return answer_final(r, j);
    int redirect = m.complete != AZ_COMPLETE_DEFAULT ? m.complete == AZ_COMPLETE_REDIRECT : j->on_complete_redirect;
    if (!ad_api_is_monitor(r) && redirect &&
        (j->status == AD_SUCCEEDED || j->status == AD_PARTIAL || j->status == AD_FAILED))
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
    if (etag_matches(r, inm, e))
        status = 304;
    return ad_api_is_monitor(r) ? ad_api_send_monitor(r, e, status) : ad_api_send_job(r, e, status);
}

/* The job of a finished wait read back (it left the cache meanwhile); prefer is the Prefer: wait to echo. */
static int poll_found(struct ad_request *r, ad_err err, struct ad_entry *e, void *prefer)
{
    e = live_job(r, err, e);
    return e != NULL ? answer_job(r, e, ad_http_get(r->req, H2O_TOKEN_IF_NONE_MATCH), (int)(intptr_t)prefer) : 0;
}

static void poll_finish(struct ad_api_wait *w, struct ad_request *r, struct ad_entry *e, int timed_out)
{
    struct poll_wait *p = (struct poll_wait *)w;
    int prefer = p->prefer ? p->wait : 0;
    if (e == NULL)
        ad_api_lookup(r, r->id, poll_found, (void *)(intptr_t)prefer);
    else
        answer_job(r, e, p->inm, prefer);
}

static int poll_keep(struct ad_api_wait *w, const struct ad_entry *e)
{
    const struct poll_wait *p = (const struct poll_wait *)w;
    if (p->until_done && !ad_status_terminal(e->job->status))
        return 1;
    return p->inm == NULL && e->job->status == p->status;
}

static int get_job_found(struct ad_request *r, ad_err err, struct ad_entry *e, void *arg)
{
    e = live_job(r, err, e);
    if (e == NULL)
        return 0;
    const struct ad_job *j = e->job;
    struct ad_az_modes m;
    if (ad_api_az_modes_read(r, &m) != 0)
        return 0;
    long long wait = 0;
    int prefer_async, prefer_wait;
    ad_http_prefer(r->req, &prefer_async, &prefer_wait);
    if (ad_api_query_int(r, "wait", 0, 86400, &wait) != 0)
        return 0;
    int prefer = ad_http_query(r, "wait") == NULL && prefer_wait > 0;
    if (prefer)
        wait = prefer_wait;
    else if (m.until_done && ad_http_query(r, "wait") == NULL)
        wait = ad_hub.cfg->max_wait_seconds;
    wait = ad_api_wait_cap((int)wait);
    const char *inm = ad_http_get(r->req, H2O_TOKEN_IF_NONE_MATCH);
    if (wait <= 0 || ad_status_terminal(j->status) || (inm != NULL && !etag_matches(r, inm, e)))
        return answer_job(r, e, inm, prefer ? (int)wait : 0);
    struct poll_wait *p = ad_calloc(1, sizeof(*p));
    p->inm = inm;
    p->status = j->status;
    p->prefer = prefer;
    p->wait = (int)wait;
    p->until_done = m.until_done;
    p->w.keep = poll_keep;
    p->w.finish = poll_finish;
    ad_api_wait_start(&p->w, r, e, wait * 1000);
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
            ad_http_problem(r->req, op->err, AD_API_CALLBACK_SECRET_HOWTO, NULL);
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
