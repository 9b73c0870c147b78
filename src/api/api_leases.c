/*
 * api_leases.c - the worker side: leasing with parked waits, heartbeats, completion and failure.
 *
 * A lease request that finds no work is parked (not polled): it waits in parked_leases until a committed
 * change makes a job of its tenant and types available (ad_api_leases_kick) or its wait runs out.
 * A request held back by a queue's rate limit (core/queues.h) also wakes when the window opens (its window timer):
 * no other change announces that.
 * Fencing is in the core: a report under a lease that is not the job's current live lease is refused.
 */
#include "api/api_int.h"
#include "core/core.h"
#include "common/json.h"
#include "common/timer.h"
#include "core/writer.h"

#include <stdlib.h>
#include <string.h>

#define AD_LEASE_DEFAULT_SECONDS 30
#define AD_LEASE_MAX_SECONDS 3600
#define AD_LEASE_MAX_JOBS 100
#define AD_LEASE_MAX_TYPES 32

/* What a worker asks to lease: the body of POST /v1/leases, or the "next" of a final report. */
struct lease_ask {
    char **types;
    size_t ntypes;
    int max;
    int64_t wait_ms; /* at most limits.maxWaitSeconds */
    int64_t lease_ms;
    char *worker;
};

struct parked {
    h2o_linklist_t link;
    struct ad_timer timer;
    struct ad_pending *pend;
    struct ad_request *r;
    struct lease_ask ask;
    int64_t deadline;       /* monotonic ms */
    int in_flight;          /* a lease op is with the writer */
    uint64_t kicks;         /* the kick count when the op was issued */
    int minimal;            /* Prefer: return=minimal: leases as lean_lease writes them */
    struct ad_timer window; /* parked: when a rate window holding back one of its types opens */
    int64_t open_at;        /* that time (wall ms), as the last lease op said; 0 = none */
};

/* Lease requests waiting for work, oldest first. */
static h2o_linklist_t parked_leases = {&parked_leases, &parked_leases};

/* Kicks so far. A kick that comes while a request's lease op is with the writer cannot reach it; if work
 * turned up in between (another node's submit, announced while our op ran), the request must look again
 * rather than park and miss it. */
static uint64_t kicks;

static void ask_free(struct lease_ask *a)
{
    for (size_t i = 0; i < a->ntypes; i++)
        free(a->types[i]);
    free(a->types);
    free(a->worker);
}

static void parked_free(struct parked *p)
{
    if (h2o_linklist_is_linked(&p->link))
        h2o_linklist_unlink(&p->link);
    ad_timer_cancel(&p->timer);
    ad_timer_cancel(&p->window);
    ask_free(&p->ask);
    free(p);
}

static void parked_gone(struct ad_pending *pd)
{
    struct parked *p = pd->owner;
    /* With an op in flight, lease_done frees it; jobs leased for a client that left expire with their lease. */
    if (!p->in_flight) {
        ad_pending_take(pd);
        parked_free(p);
    }
}

/* End p's wait with 204 (nothing for you). */
static void parked_end(struct parked *p)
{
    h2o_req_t *req = ad_pending_take(p->pend);
    parked_free(p);
    if (req != NULL)
        ad_http_empty(req, 204);
}

static void parked_timeout(struct ad_timer *t)
{
    parked_end(H2O_STRUCT_FROM_MEMBER(struct parked, timer, t));
}

static void lease_done(struct ad_op *op);
static void lease_issue(struct parked *p);

/* A rate window opened: look again. */
static void parked_window(struct ad_timer *t)
{
    struct parked *p = H2O_STRUCT_FROM_MEMBER(struct parked, window, t);
    if (!h2o_linklist_is_linked(&p->link))
        return;
    h2o_linklist_unlink(&p->link);
    ad_timer_cancel(&p->timer);
    lease_issue(p);
}

/* A lease op for what a asks, in tenant. */
static struct ad_lease_op *lease_op_new(const char *tenant, const struct lease_ask *a)
{
    struct ad_lease_op *x = ad_lease_op_new();
    x->tenant = ad_strdup(tenant);
    x->types = ad_calloc(a->ntypes, sizeof(char *));
    for (size_t i = 0; i < a->ntypes; i++)
        x->types[i] = ad_strdup(a->types[i]);
    x->ntypes = a->ntypes;
    x->max = a->max;
    x->lease_ms = a->lease_ms;
    x->worker = ad_strdup_opt(a->worker);
    x->now = ad_now_ms();
    return x;
}

static void lease_issue(struct parked *p)
{
    struct ad_lease_op *x = lease_op_new(p->r->tenant, &p->ask);
    x->ctx = p;
    x->op.done = lease_done;
    p->in_flight = 1;
    p->kicks = kicks;
    ad_writer_submit(&x->op);
}

/* Append one lease ({"job", "leaseId", "leaseExpiresAt"}) of a published job to b. */
static void append_lease(struct ad_buf *b, const struct ad_entry *e, int first)
{
    /* Appended in pieces, not printed: every lease answer and report with "next" writes one per job. */
    if (!first)
        AD_BUF_LIT(b, ",");
    AD_JSON_OPEN(b, "job");
    ad_json_rawn(b, e->body, e->len);
    AD_JSON_KEY(b, "leaseId");
    ad_json_str(b, e->job->lease_id);
    AD_JSON_KEY(b, "leaseExpiresAt");
    ad_json_time(b, e->job->lease_expires_at);
    ad_api_trace_lease(b, e->job);
    AD_BUF_LIT(b, "}");
}

/* Append one lease as a client preferring return=minimal gets it: only what a worker needs to run the job
 * ({"id", "type", "payload", "attempt", "leaseId", "leaseExpiresAt"}), not the whole job. */
static void lean_lease(struct ad_buf *b, const struct ad_entry *e, int first)
{
    const struct ad_job *j = e->job;
    if (!first)
        AD_BUF_LIT(b, ",");
    AD_JSON_OPEN(b, "id");
    ad_json_str(b, j->id);
    AD_JSON_KEY(b, "type");
    ad_json_str(b, j->type);
    AD_JSON_KEY(b, "payload");
    ad_json_raw(b, j->payload);
    AD_JSON_KEY(b, "attempt");
    ad_json_int(b, j->attempt);
    if (j->depends_on != NULL) {
        AD_JSON_KEY(b, "dependsOn");
        ad_json_raw(b, j->depends_on);
    }
    AD_JSON_KEY(b, "leaseId");
    ad_json_str(b, j->lease_id);
    AD_JSON_KEY(b, "leaseExpiresAt");
    ad_json_time(b, j->lease_expires_at);
    ad_api_trace_lease(b, j);
    AD_BUF_LIT(b, "}");
}

/* Append "leases":[...] to b: the n jobs op leased, as the writer published them, its changes from first on
 * (core.h); lean ones (lean_lease) when minimal. */
static void append_leases(struct ad_buf *b, struct ad_op *op, size_t first, size_t n, int minimal)
{
    AD_BUF_LIT(b, "\"leases\":[");
    for (size_t i = 0; i < n; i++)
        (minimal ? lean_lease : append_lease)(b, ad_op_published(op, first + i), i == 0);
    AD_BUF_LIT(b, "]");
}

/* A lease attempt for p ended with err and leased (the {"leases": [...]} body in b when leased != 0):
 * answer, or park p again while its wait lasts. */
static void lease_finish(struct parked *p, ad_err err, size_t leased, const struct ad_buf *b)
{
    if (err == AD_E_OK) /* leased in the store even when the worker has gone: its leases will expire */
        ad_metrics_lease_granted(leased);
    p->in_flight = 0;
    if (p->pend->req == NULL) {
        ad_pending_take(p->pend);
        parked_free(p);
    } else if (err != AD_E_OK || leased != 0 || ad_mono_ms() >= p->deadline) {
        struct ad_request *r = p->r;
        int p_minimal = p->minimal;
        ad_pending_take(p->pend);
        parked_free(p);
        if (err != AD_E_OK)
            ad_api_fail(r, err);
        else if (leased == 0)
            ad_http_empty(r->req, 204);
        else if (p_minimal && ad_http_prefer_minimal(r->req))
            ad_http_json(r, 200, h2o_strdup(&r->req->pool, b->data, b->len).base, b->len);
        else
            ad_http_json(r, 200, h2o_strdup(&r->req->pool, b->data, b->len).base, b->len);
    } else if (p->kicks != kicks) {
        lease_issue(p);
    } else {
        h2o_linklist_insert(&parked_leases, &p->link);
        ad_timer_arm(&p->timer, p->deadline);
        if (p->open_at > 0) {
            int64_t in = p->open_at - ad_now_ms();
            int64_t at = ad_mono_ms() + (in > 0 ? in : 0) + 1;
            if (at < p->deadline)
                ad_timer_arm(&p->window, at);
        }
    }
}

static void lease_done(struct ad_op *op)
{
    struct ad_lease_op *x = (struct ad_lease_op *)op;
    struct ad_buf b;
    ad_buf_init(&b, SIZE_MAX);
    size_t leased = op->err == AD_E_OK ? x->leased.n : 0;
    AD_BUF_LIT(&b, "{");
    append_leases(&b, op, 0, leased, ((struct parked *)x->ctx)->minimal);
    AD_BUF_LIT(&b, "}");
    ((struct parked *)x->ctx)->open_at = x->open_at;
    lease_finish(x->ctx, op->err, leased, &b);
    ad_buf_free(&b);
    ad_op_free(op);
}

void *ad_api_leases_claim(const char *tenant, const char *type, int64_t *lease_ms, const char **worker)
{
    h2o_linklist_t *next;
    for (h2o_linklist_t *node = parked_leases.next; node != &parked_leases; node = next) {
        next = node->next;
        struct parked *p = H2O_STRUCT_FROM_MEMBER(struct parked, link, node);
        if (strcmp(p->r->tenant, tenant) != 0)
            continue;
        size_t i = 0;
        while (i < p->ask.ntypes && strcmp(p->ask.types[i], type) != 0)
            i++;
        if (i == p->ask.ntypes)
            continue;
        if (ad_pending_gone(p->pend)) {
            /* A worker that hung up is passed over, or the job would sit leased to nobody until its lease ran
             * out. It is answered all the same, so that h2o finds the connection closed and lets it go. */
            parked_end(p);
            continue;
        }
        h2o_linklist_unlink(&p->link);
        ad_timer_cancel(&p->timer);
        ad_timer_cancel(&p->window);
        p->in_flight = 1;
        *lease_ms = p->ask.lease_ms;
        *worker = p->ask.worker;
        return p;
    }
    return NULL;
}

void ad_api_leases_handoff_done(void *claim, struct ad_entry *e)
{
    struct parked *p = claim;
    if (e == NULL) {
        /* Not handed over (the submit failed or the job may not run yet): lease as usual. */
        p->in_flight = 0;
        if (p->pend->req == NULL) {
            ad_pending_take(p->pend);
            parked_free(p);
        } else {
            lease_issue(p);
        }
        return;
    }
    ad_metrics_lease_handed_off();
    struct ad_buf b;
    ad_buf_init(&b, SIZE_MAX);
    ad_buf_append(&b, "{\"leases\":[", 11);
    (p->minimal ? lean_lease : append_lease)(&b, e, 1);
    ad_buf_append(&b, "]}", 2);
    lease_finish(p, AD_E_OK, 1, &b);
    ad_buf_free(&b);
}

void ad_api_leases_kick(const char *tenant, const char *type)
{
    kicks++;
    int64_t lease_ms;
    const char *worker;
    struct parked *p = ad_api_leases_claim(tenant, type, &lease_ms, &worker);
    if (p != NULL)
        lease_issue(p);
}

/* Add the problem of member name of the object at JSON pointer at. Formatted only then: a valid ask (one in
 * every report with "next") formats nothing. */
static void member_error(struct ad_verr *v, const char *at, const char *name, const char *detail)
{
    char ptr[64];
    snprintf(ptr, sizeof(ptr), "%s/%s", at, name);
    ad_verr_add(v, ptr, detail);
}

/* Read an optional integer member in [min, max] of the object at JSON pointer at into *out. */
static void opt_int(json_t *obj, const char *at, const char *name, long long min, long long max, int *out,
                    struct ad_verr *v)
{
    json_t *n = json_object_get(obj, name);
    if (n == NULL || json_is_null(n))
        return;
    if (!json_is_integer(n) || json_integer_value(n) < min || json_integer_value(n) > max) {
        char detail[128];
        snprintf(detail, sizeof(detail), "%s must be an integer from %lld to %lld", name, min, max);
        member_error(v, at, name, detail);
        return;
    }
    *out = (int)json_integer_value(n);
}

/* Read an optional number of seconds in [min, max] of the object at JSON pointer at into *ms: an integer or
 * a decimal ("0.5"), taken to the millisecond (rounded to the nearest). */
static void opt_ms(json_t *obj, const char *at, const char *name, double min, double max, int64_t *ms,
                   struct ad_verr *v)
{
    json_t *n = json_object_get(obj, name);
    if (n == NULL || json_is_null(n))
        return;
    double s = json_number_value(n);
    if (!json_is_number(n) || !(s >= min && s <= max)) {
        char detail[128];
        snprintf(detail, sizeof(detail), "%s must be a number of seconds from %g to %g (decimals allowed)", name, min,
                 max);
        member_error(v, at, name, detail);
        return;
    }
    *ms = json_is_integer(n) ? (int64_t)json_integer_value(n) * 1000 : (int64_t)(s * 1000 + 0.5);
}

/* A JSON object body or NULL after answering (400/413/415/422). */
static json_t *object_body(struct ad_request *r)
{
    json_t *body = ad_api_body(r);
    if (body != NULL && !json_is_object(body)) {
        json_decref(body);
        struct ad_verr v;
        ad_verr_init(&v);
        ad_verr_add(&v, "", "the body must be a JSON object");
        ad_verr_send(&v, r);
        return NULL;
    }
    return body;
}

/* Read a lease request (the object at JSON pointer at) into a: types, max, wait, leaseSeconds, worker. */
static void ask_parse(json_t *obj, const char *at, struct lease_ask *a, struct ad_verr *v)
{
    json_t *types = json_object_get(obj, "types");
    size_t ntypes = json_array_size(types);
    if (!json_is_array(types) || ntypes == 0 || ntypes > AD_LEASE_MAX_TYPES)
        member_error(v, at, "types", "types must be an array of 1 to 32 job type names");
    for (size_t i = 0; i < ntypes; i++)
        if (ad_api_text(json_array_get(types, i), 0, SIZE_MAX) == NULL)
            member_error(v, at, "types", "every entry of types must be a string");
    a->max = 1;
    a->wait_ms = 0;
    a->lease_ms = AD_LEASE_DEFAULT_SECONDS * 1000;
    opt_int(obj, at, "max", 1, AD_LEASE_MAX_JOBS, &a->max, v);
    opt_ms(obj, at, "wait", 0, 86400, &a->wait_ms, v);
    opt_ms(obj, at, "leaseSeconds", 1, AD_LEASE_MAX_SECONDS, &a->lease_ms, v);
    if (a->wait_ms > (int64_t)ad_hub.cfg->max_wait_seconds * 1000)
        a->wait_ms = (int64_t)ad_hub.cfg->max_wait_seconds * 1000;
    json_t *worker = json_object_get(obj, "worker");
    if (worker != NULL && ad_api_text(worker, 0, 128) == NULL)
        member_error(v, at, "worker", "worker must be a string of at most 128 characters");
    if (v->n != 0)
        return;
    a->types = ad_calloc(ntypes, sizeof(char *));
    for (size_t i = 0; i < ntypes; i++)
        a->types[i] = ad_strdup(json_string_value(json_array_get(types, i)));
    a->ntypes = ntypes;
    a->worker = worker != NULL ? ad_strdup(json_string_value(worker)) : NULL;
}

int ad_api_lease(struct ad_request *r)
{
    json_t *body = object_body(r);
    if (body == NULL)
        return 0;
    struct ad_verr v;
    ad_verr_init(&v);
    struct parked *p = ad_calloc(1, sizeof(*p));
    ask_parse(body, "", &p->ask, &v);
    json_decref(body);
    if (v.n != 0) {
        parked_free(p);
        return ad_verr_send(&v, r);
    }
    ad_buf_free(&v.b);
    p->r = r;
    p->minimal = ad_http_prefer_return(r->req) == AD_PREFER_MINIMAL;
    p->deadline = ad_mono_ms() + p->ask.wait_ms;
    p->timer.cb = parked_timeout;
    p->window.cb = parked_window;
    p->pend = ad_pending_new(r->req, p, parked_gone);
    lease_issue(p);
    return 0;
}

/* ---- reports under a lease ---- */

void ad_api_report_answer(struct ad_request *r, struct ad_report_op *x, struct ad_entry *e)
{
    struct ad_op *op = &x->op;
    if (op->err == AD_E_OK && x->next != NULL)
        ad_metrics_lease_granted(x->next->leased.n);
    struct ad_buf b; /* the answer to a heartbeat ({"job", "leaseExpiresAt", ...}) or a report with next */
    ad_buf_init(&b, SIZE_MAX);
    if (op->err == AD_E_OK && x->next != NULL && r != NULL && ad_http_prefer_minimal(r->req)) {
        /* return=minimal: the job this report ended as its id and status only, and lean leases. */
        AD_BUF_LIT(&b, "{\"job\":");
        AD_JSON_OPEN(&b, "id");
        ad_json_str(&b, e->job->id);
        AD_JSON_KEY(&b, "status");
        ad_json_str(&b, ad_status_name(x->shown != NULL ? x->shown->status : e->job->status));
        AD_BUF_LIT(&b, "},");
        append_leases(&b, op, 1, x->next->leased.n, 1);
        AD_BUF_LIT(&b, "}");
    } else if (op->err == AD_E_OK && x->next != NULL && r != NULL) {
        AD_BUF_LIT(&b, "{\"job\":");
        /* The job as this report left it: its entry shows the next lease's version when that took it again. */
        if (x->shown != NULL)
            ad_job_render(x->shown, &b);
        else
            ad_buf_append(&b, e->body, e->len);
        AD_BUF_LIT(&b, ",");
        append_leases(&b, op, 1, x->next->leased.n, 0);
        AD_BUF_LIT(&b, "}");
    }
    if (r != NULL) {
        if (op->err == AD_E_STALE_LEASE && x->conflict) {
            ad_http_problem(r->req, op->err,
                            "this lease already ended with another report, which stands; this one was not "
                            "stored",
                            NULL);
        } else if (op->err != AD_E_OK) {
            ad_api_fail(r, op->err);
        } else if (x->event == AD_EV_HEARTBEAT) {
            AD_JSON_OPEN(&b, "job");
            ad_json_rawn(&b, e->body, e->len);
            AD_JSON_KEY(&b, "leaseExpiresAt");
            ad_json_time(&b, x->lease_expires_at);
            AD_JSON_KEY(&b, "cancelRequested");
            ad_json_bool(&b, e->job->cancel_requested);
            AD_BUF_LIT(&b, "}");
            ad_http_json(r, 200, h2o_strdup(&r->req->pool, b.data, b.len).base, b.len);
        } else if (x->next != NULL) {
            ad_http_json(r, 200, h2o_strdup(&r->req->pool, b.data, b.len).base, b.len);
        } else {
            ad_api_send_job(r, e, 200);
        }
    }
    ad_buf_free(&b);
}

static void report_done(struct ad_op *op)
{
    struct ad_report_op *x = (struct ad_report_op *)op;
    struct ad_request *r = ad_api_write_take(x->ctx);
    ad_api_report_answer(r, x, ad_op_published(op, 0)); /* the job; the jobs next leased follow (core.h) */
    ad_op_free(op);
}

/* Normalise a worker's problem into an RFC 9457 object with code; returns compact JSON text. */
static char *normalise_problem(json_t *err)
{
    json_t *p = json_is_object(err) ? json_deep_copy(err) : json_object();
    if (!json_is_string(json_object_get(p, "type")))
        json_object_set_new(p, "type", json_string("about:blank"));
    if (!json_is_string(json_object_get(p, "title")))
        json_object_set_new(p, "title", json_string("Job failed"));
    json_int_t status = json_integer_value(json_object_get(p, "status"));
    if (!json_is_integer(json_object_get(p, "status")) || status < 400 || status > 599)
        json_object_set_new(p, "status", json_integer(500));
    if (!json_is_string(json_object_get(p, "code")))
        json_object_set_new(p, "code", json_string("job-failed"));
    char *text = json_dumps(p, JSON_COMPACT);
    json_decref(p);
    return text;
}

static int report(struct ad_request *r, enum ad_job_event event)
{
    json_t *body = object_body(r);
    if (body == NULL)
        return 0;
    struct ad_verr v;
    ad_verr_init(&v);
    struct ad_report_op *x = ad_report_op_new();
    int artifact = 0; /* "artifact": true: the upload under the lease is the result */
    json_t *lid = json_object_get(body, "leaseId");
    if (ad_api_text(lid, 0, SIZE_MAX) == NULL)
        ad_verr_add(&v, "/leaseId", "leaseId is required: the id this job was leased under");
    else
        x->lease_id = ad_strdup(json_string_value(lid));
    opt_int(body, "", "progress", 0, 100, &x->progress, &v);
    /* Every heartbeat extends the lease: by leaseSeconds when given, else by the default lease length. */
    if (event == AD_EV_HEARTBEAT)
        x->lease_ms = AD_LEASE_DEFAULT_SECONDS * 1000;
    opt_ms(body, "", "leaseSeconds", 1, AD_LEASE_MAX_SECONDS, &x->lease_ms, &v);
    json_t *msg = json_object_get(body, "message");
    if (msg != NULL && !json_is_null(msg)) {
        if (ad_api_text(msg, 0, 1024) == NULL)
            ad_verr_add(&v, "/message", "message must be a string of at most 1024 characters");
        else
            x->message = ad_strdup(json_string_value(msg));
    }
    if (event == AD_EV_COMPLETE) {
        json_t *st = json_object_get(body, "status");
        const char *s = ad_api_text(st, 0, SIZE_MAX);
        if (st != NULL && (s == NULL || (strcmp(s, "succeeded") != 0 && strcmp(s, "partialSuccess") != 0)))
            ad_verr_add(&v, "/status", "status must be \"succeeded\" or \"partialSuccess\"");
        else if (s != NULL && strcmp(s, "partialSuccess") == 0)
            event = AD_EV_COMPLETE_PARTIAL;
        json_t *res = json_object_get(body, "result");
        if (res != NULL)
            x->result = json_dumps(res, JSON_COMPACT | JSON_ENCODE_ANY);
        json_t *art = json_object_get(body, "artifact");
        if (art != NULL && !json_is_boolean(art))
            ad_verr_add(&v, "/artifact", "artifact must be a boolean");
        else if (json_is_true(art) && (res != NULL || json_object_get(body, "resultLocation") != NULL))
            ad_verr_add(&v, "/artifact", "the uploaded artifact is the result: send no result or resultLocation");
        else if (json_is_true(art))
            artifact = 1;
        json_t *loc = json_object_get(body, "resultLocation");
        if (loc != NULL && !json_is_null(loc)) {
            const char *u = ad_api_text(loc, 0, SIZE_MAX);
            if (u == NULL || strlen(u) > 2048 ||
                (strncmp(u, "http://", 7) != 0 && strncmp(u, "https://", 8) != 0 && u[0] != '/'))
                ad_verr_add(&v, "/resultLocation", "resultLocation must be an http(s) URL or an absolute path");
            else
                x->result_location = ad_strdup(u);
        }
    } else if (event == AD_EV_FAIL) {
        json_t *err = json_object_get(body, "error");
        if (err != NULL && !json_is_object(err))
            ad_verr_add(&v, "/error", "error must be an RFC 9457 problem object");
        json_t *retryable = json_object_get(body, "retryable");
        if (retryable != NULL && !json_is_boolean(retryable))
            ad_verr_add(&v, "/retryable", "retryable must be a boolean");
        else if (json_is_false(retryable))
            event = AD_EV_FAIL_FINAL;
        x->error = normalise_problem(err);
    }
    json_t *next = json_object_get(body, "next");
    if (next != NULL && !json_is_null(next)) {
        struct lease_ask a = {0};
        if (event == AD_EV_HEARTBEAT)
            ad_verr_add(&v, "/next", "next is for :complete, :fail and :release, which end the lease");
        else if (!json_is_object(next))
            ad_verr_add(&v, "/next", "next must be a lease request object");
        else if (json_object_get(next, "wait") != NULL)
            ad_verr_add(&v, "/next/wait", "next takes no wait: it leases what is queued now");
        else
            ask_parse(next, "/next", &a, &v);
        if (a.types != NULL)
            x->next = lease_op_new(r->tenant, &a);
        ask_free(&a);
    }
    json_decref(body);
    if (v.n != 0) {
        ad_op_free(&x->op);
        return ad_verr_send(&v, r);
    }
    ad_buf_free(&v.b);
    x->event = event;
    x->tenant = ad_strdup(r->tenant);
    x->id = ad_strdup(r->id);
    x->now = ad_now_ms();
    x->op.done = report_done;
    if (artifact)
        return ad_api_complete_artifact(r, x);
    if (event == AD_EV_HEARTBEAT)
        return ad_api_heartbeat_submit(r, x); /* coalesced per lease (api_heartbeats.c) */
    x->ctx = ad_api_write_begin(r);
    ad_writer_submit(&x->op);
    return 0;
}

int ad_api_heartbeat(struct ad_request *r)
{
    return report(r, AD_EV_HEARTBEAT);
}

int ad_api_complete(struct ad_request *r)
{
    return report(r, AD_EV_COMPLETE);
}

int ad_api_fail_job(struct ad_request *r)
{
    return report(r, AD_EV_FAIL);
}

int ad_api_release(struct ad_request *r)
{
    return report(r, AD_EV_RELEASE);
}

void ad_api_leases_parked(const char *tenant,
                          void (*fn)(void *arg, const char *tenant, char *const *types, size_t ntypes,
                                     const char *worker, int64_t waited_ms),
                          void *arg)
{
    int64_t now = ad_mono_ms();
    for (h2o_linklist_t *node = parked_leases.next; node != &parked_leases; node = node->next) {
        const struct parked *p = H2O_STRUCT_FROM_MEMBER(struct parked, link, node);
        if (tenant == NULL || strcmp(p->r->tenant, tenant) == 0)
            fn(arg, p->r->tenant, p->ask.types, p->ask.ntypes, p->ask.worker, now - (p->deadline - p->ask.wait_ms));
    }
}
