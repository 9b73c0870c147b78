/*
 * api_int.h - what the files of api/ share and nothing outside api/ includes: the resource handlers
 * (api_*.c), body parsing, validation errors, auth, job answers, waits and page tokens.
 *
 * Handlers turn HTTP requests into core operations and their outcomes back into HTTP answers. The daemon
 * itself sees only api.h.
 */
#ifndef AD_API_INT_H
#define AD_API_INT_H

#include <jansson.h>
#include "api/api.h"
#include "http/http.h"
#include "common/timer.h"
#include "common/metrics.h"
#include "common/trace.h"
#include "core/core.h"
#include "core/writer.h"
#include "hub/hub.h"

/* Parse the request body as a JSON value. On failure sends the problem (415/413/400) and returns NULL.
 * The caller decrefs. */
json_t *ad_api_body(struct ad_request *r);

/* The text of v if it is a JSON string of min to max bytes holding no U+0000, else NULL. The body parser
 * lets U+0000 into strings (payloads and results are kept as JSON, so it survives there), but a C string
 * ends at it: a type, URL or lease id read as one would silently lose its tail. The text belongs to v. */
const char *ad_api_text(const json_t *v, size_t min, size_t max);
/* A group name (docs/protocol.md "Groups and fairness"): 1-128 printable ASCII characters; NULL when v is none. */
const char *ad_api_group(const json_t *v);

/* Validation errors collected for one 422 answer. */
struct ad_verr {
    struct ad_buf b;
    int n;
};
void ad_verr_init(struct ad_verr *v);
void ad_verr_add(struct ad_verr *v, const char *pointer, const char *detail);
/* Close v's list for a problem: the detail (written to detail) and the extra members, or NULL when none; v still
 * owns them (ad_buf_free(&v->b) afterwards). */
const char *ad_verr_finish(struct ad_verr *v, char *detail, size_t len);
/* The problem of a submit the writer refused with AD_E_DEPENDENCY_UNKNOWN (an id in dependsOn is no job of the
 * tenant): as ad_verr_finish, over v, which this fills (ad_buf_free(&v->b) afterwards). */
struct ad_submit_op;
const char *ad_api_dep_unknown(const struct ad_submit_op *s, struct ad_verr *v, char *detail, size_t len);
/* Send 422 validation-failed with every collected error and free v. */
int ad_verr_send(struct ad_verr *v, struct ad_request *r);

/* Job answers shared by the handlers: representation with ETag and cache headers. */
int ad_api_send_job(struct ad_request *r, struct ad_entry *e, int status);
/* The ETag of e's representation as it is served now: a due queued job held back by its queue's settings says so
 * in "waitingFor" (core/queues.h), spliced in when it is answered, and has an ETag of its own then. */
const char *ad_api_job_etag(h2o_req_t *req, struct ad_entry *e);
/* ETag, Cache-Control and Retry-After or Expires of a job answer, for one that is not the job view. */
void ad_api_job_headers(h2o_req_t *req, struct ad_entry *e);
/* Location, Operation-Location (the Azure status monitor) and, as the submit's route asks, Azure-AsyncOperation
 * and a Location that answers 202 while pending (api_jobs.c, docs/protocol.md "Azure compatibility"). */
void ad_api_monitor_headers(struct ad_request *r, const char *id);
/* The 202 for an accepted job: Location, Operation-Location, Link, Retry-After, Content-Location. how: 0 or the
 * bits below: an idempotent replay (Idempotent-Replayed: true), the live job of the submit's uniqueKey (the body
 * says "deduplicated": true). */
#define AD_API_REPLAYED 1
#define AD_API_DEDUPLICATED 2
int ad_api_send_accepted(struct ad_request *r, struct ad_entry *e, int how);
/* A request answered when its writer operation is done: begin returns the op's ctx; take (in done) gives the
 * request back, or NULL when the client went away meanwhile. */
struct ad_pending *ad_api_write_begin(struct ad_request *r);
struct ad_request *ad_api_write_take(void *ctx);

/*
 * Store reads for a request, which never stall the event loop (hub.h, ad_hub_read). A handler returns at once and
 * answers from a continuation: at once on SQLite or a cache hit, later on PostgreSQL, and not at all when the
 * client went away meanwhile.
 *
 * ad_api_lookup: the job id of the request's tenant (ad_hub_lookup); then(r, err, e, arg) answers. arg must own
 * nothing (it is dropped when the client goes). A cache hit is a hash lookup and a call, as the poll path needs.
 */
typedef int (*ad_api_found)(struct ad_request *r, ad_err err, struct ad_entry *e, void *arg);
int ad_api_lookup(struct ad_request *r, const char *id, ad_api_found then, void *arg);
/* A read of its own for a request: allocate it with ad_calloc, set op.apply (runs on whichever thread reads, on
 * the connection it is given: it touches nothing but the read) and answer, then hand it to ad_api_read. */
struct ad_api_read {
    struct ad_op op; /* done and destroy are ad_api_read's */
    struct ad_pending *pend;
    struct ad_request *r;
    /* Event loop: answer r with the read's outcome (op.err and what apply filled in), or with r NULL when the
     * client went away; either way free what the read owns (not the struct itself). */
    void (*answer)(struct ad_api_read *rd, struct ad_request *r);
};
/* Run rd for r and answer it through rd->answer; rd is freed afterwards. Returns 0 (a handler's value). */
int ad_api_read(struct ad_request *r, struct ad_api_read *rd);

/*
 * A request waiting on its job's cache entry, with a timer (api_wait.c): a long poll. Embed it first in a struct of
 * the handler's own, allocated with ad_calloc, set keep and finish, and start it; it is freed after finish, or
 * silently when the client goes away.
 */
struct ad_api_wait {
    struct ad_waiter w;
    struct ad_timer timer;
    struct ad_pending *pend;
    struct ad_request *r;
    /* 1 when the change to e does not end the wait. */
    int (*keep)(struct ad_api_wait *w, const struct ad_entry *e);
    /* Answer r: e is the entry whose change ended the wait, NULL when the timer ran out (timed_out) or the entry
     * left the cache (read the job back). */
    void (*finish)(struct ad_api_wait *w, struct ad_request *r, struct ad_entry *e, int timed_out);
};
/* Hold r on e for at most ms milliseconds. */
void ad_api_wait_start(struct ad_api_wait *w, struct ad_request *r, struct ad_entry *e, int64_t ms);

/* Page tokens (api_page.c): base64url of "<kind>:<cursor>", kind naming the list ("c1", "o1", "d1"). */
#define AD_API_PAGE_TOKEN_MAX 48
void ad_api_page_token(const char *kind, int64_t cursor, char out[AD_API_PAGE_TOKEN_MAX]);
/* The cursor of a token of kind into *cursor: 0, or -1 when it is not one (of that kind). */
int ad_api_page_token_parse(const char *token, const char *kind, int64_t *cursor);
/* ?pageToken= of r into *cursor (unchanged when absent): 0, or -1 after answering 400. */
int ad_api_page_token_read(struct ad_request *r, const char *kind, int64_t *cursor);

/* ---- the job resource's parts (api_jobs.c, api_azure.c, api_bulk.c, api_collections.c) ---- */

/* The detail of a job with a callbackUrl refused for want of a callback secret. */
#define AD_API_CALLBACK_SECRET_HOWTO                                                                                   \
    "a callbackUrl's deliveries are signed with the tenant's callback secret, and it has none that was shown: POST "   \
    "/v1/webhooks/callback:rotate makes one and answers it (once), then submit again"

/* Claim an idempotency key being committed (tenant '\n' key); 0, or -1 when another request holds it. Release
 * it once the commit is answered. */
int ad_api_inflight_claim(const char *name);
void ad_api_inflight_release(const char *name);
/* The Idempotency-Key field of req (POST /v1/jobs, POST /v1/batches) into *out (heap; NULL when absent): why it is
 * refused (the detail of a 400), or NULL. */
const char *ad_api_idem_key(h2o_req_t *req, char **out);
/* AD_E_OK while the job is live, AD_E_GONE in its tombstone period, then AD_E_NOT_FOUND. */
ad_err ad_api_expiry_state(const struct ad_job *j);
/* 1 while j is live (neither expired nor tombstoned): what every read, list and stream shows. */
int ad_api_job_live(const struct ad_job *j);
/* Read an integer query parameter into *out (unchanged when absent). Sends 400 and returns -1 when bad. */
int ad_api_query_int(struct ad_request *r, const char *name, long long min, long long max, long long *out);
/* A wait in seconds, capped at limits.maxWaitSeconds. */
int ad_api_wait_cap(int n);

/* A submit's body checked and made into a job: what POST /v1/jobs, a configured route and each job of a batch
 * share. */
struct ad_api_submit_parsed {
    struct ad_job *job;   /* prepared (ad_core_job_prepare) when err is AD_E_OK; then the caller's */
    char fingerprint[65]; /* of the request, when it carries an idempotency key */
    ad_err err;           /* AD_E_OK, AD_E_VALIDATION_FAILED (v says why) or AD_E_UNKNOWN_TYPE */
    struct ad_verr v;
    int debounce; /* debounceSeconds came with the uniqueKey: the job's runAt is now + that (ad_submit_op) */
    char trace_parent[AD_SPAN_ID_HEX + 1]; /* the submitter's span (api_trace.c), "" when none */
};
/* Parse body (not consumed) as a submit of r's tenant and route. keyed: an idempotency key comes with it, so
 * the fingerprint is taken, over the method, fp_path and the canonical body. */
void ad_api_submit_parse(struct ad_request *r, json_t *body, int keyed, const char *fp_path, int64_t now,
                         struct ad_api_submit_parsed *p);
/* Trace context (api_trace.c, docs/tracing.md). The job's from r's traceparent and tracestate headers, its
 * submitter's span id into parent ("" when none). */
void ad_api_trace_begin(struct ad_request *r, struct ad_job *job, char parent[AD_SPAN_ID_HEX + 1]);
/* The spans of the submit (route names it) and the enqueue of j, just stored; parent: the submitter's span. */
void ad_api_trace_submitted(const struct ad_job *j, const char *route, const char *parent, int64_t start_ms);
/* Append ,"traceparent","tracestate" of the lease j holds to b when j has a trace context: the attempt's span
 * as the parent, acceptd's entry at the left of the tracestate. */
void ad_api_trace_lease(struct ad_buf *b, const struct ad_job *j);
/* The problem of a submit that failed to parse, appended to b (a batch's item) or, with b NULL, sent as r's
 * answer; frees p. */
int ad_api_submit_parse_fail(struct ad_request *r, struct ad_api_submit_parsed *p, struct ad_buf *b);

/* The Azure compatibility of a job's reads (api_azure.c, docs/protocol.md "Azure compatibility"). */
/* The modes a read of a job may ask for, under acceptd's names or the Azure sample's (OnPending=Synchronous):
 * how a pending job answers, how a final one does, and whether a long poll waits for the final state. */
enum ad_az_pending { AZ_PENDING_OK, AZ_PENDING_ACCEPTED, AZ_PENDING_SYNC };
enum ad_az_complete { AZ_COMPLETE_DEFAULT, AZ_COMPLETE_INLINE, AZ_COMPLETE_REDIRECT, AZ_COMPLETE_STREAM };
struct ad_az_modes {
    enum ad_az_pending pending;
    enum ad_az_complete complete;
    int until_done;
};
/* Read the modes of r (values case-insensitive, as the sample spells them). 0, or -1 after sending 400. */
int ad_api_az_modes_read(struct ad_request *r, struct ad_az_modes *m);
/* Whether r is the status monitor, GET /v1/jobs/{id}/status: it shares the job's read and long poll. */
int ad_api_is_monitor(struct ad_request *r);
/* Answer the job of e as the status monitor, with status (200, 202 or 304). */
int ad_api_send_monitor(struct ad_request *r, struct ad_entry *e, int status);
/* The monitor's body for j (ad_api_send_monitor without the HTTP): 0, or -1 when b's cap is hit. */
int ad_api_monitor_render(struct ad_buf *b, const struct ad_job *j);

/* The message of a failed job's stored problem p (parsed; NULL or not an object is fine) for the compatibility
 * views: its detail, else its title, else a generic one. The text belongs to p or is static. */
const char *ad_api_problem_message(const json_t *p);

/* Count n more requests against the rate limit of the request's key (a batch counts each job; the request itself
 * was counted when it was authenticated): returns how many of them fit in what is left of the window, and
 * updates the RateLimit field (and sets Retry-After when some did not fit). n when the key has no limit. */
int ad_api_rate_more(struct ad_request *r, int n);

/* Answer r with the JSON rendered into b (copied into the request's pool) and free b; a render that hit b's cap
 * (ad_json_end) is answered 500 instead. */
int ad_api_send_buf(struct ad_request *r, int status, struct ad_buf *b);

/* The problem for an ad_err coming back from the core. */
int ad_api_fail(struct ad_request *r, ad_err err);

/* Handlers. */
/* GET /v1/queues; and /v1/queues/{type} (api_queues.c): 1 with r->id the type, and the handler and roles of r's
 * method, when r's path is a queue's; else 0. */
int ad_api_queue_list(struct ad_request *r);
int ad_api_queue_route(struct ad_request *r, ad_handler *handler, int *roles);
int ad_api_submit(struct ad_request *r);
int ad_api_submit_batch(struct ad_request *r);
int ad_api_bulk_cancel(struct ad_request *r);
int ad_api_bulk_retry(struct ad_request *r);
int ad_api_get_job(struct ad_request *r);
int ad_api_get_result(struct ad_request *r);
/* Shared by the job answers of api_jobs.c and the business resources: the live job given what ad_api_lookup
 * found (else NULL after a 404/410), a finished job's result (200, or 303 to its resultLocation), a failed
 * one's stored problem with its own status. */
struct ad_entry *ad_api_live_job(struct ad_request *r, ad_err err, struct ad_entry *e);
int ad_api_send_result(struct ad_request *r, const struct ad_job *j);
int ad_api_send_stored_problem(h2o_req_t *req, const struct ad_job *j);
/* GET on a route's resource (api_resources.c): ad_api_resource_match says whether path is one (1, with the
 * job id it names in the request pool in *id), and ad_api_get_resource answers it. */
int ad_api_resource_match(h2o_req_t *req, h2o_iovec_t path, char **id);
int ad_api_get_resource(struct ad_request *r);
int ad_api_get_status(struct ad_request *r);
int ad_api_list(struct ad_request *r);
int ad_api_changes(struct ad_request *r);
int ad_api_cancel(struct ad_request *r);
int ad_api_retry(struct ad_request *r);
int ad_api_lease(struct ad_request *r);
int ad_api_heartbeat(struct ad_request *r);
int ad_api_complete(struct ad_request *r);
int ad_api_fail_job(struct ad_request *r);
int ad_api_release(struct ad_request *r);
/* Answer r with the outcome of the report x, whose job is published as e (api_leases.c). */
void ad_api_report_answer(struct ad_request *r, struct ad_report_op *x, struct ad_entry *e);
/* Write the heartbeat x (validated) for r, coalesced with the other heartbeats of its lease (api_heartbeats.c):
 * r is answered once a write holding it is durable. Takes x. Returns 0. */
int ad_api_heartbeat_submit(struct ad_request *r, struct ad_report_op *x);
/* At shutdown (ad_hub.shutting_down set): hand every heartbeat still waiting for its window to the writer now. */
void ad_api_heartbeats_flush(void);
int ad_api_attempts(struct ad_request *r);
int ad_api_healthz(struct ad_request *r);
int ad_api_readyz(struct ad_request *r);
int ad_api_metrics(struct ad_request *r);
/* Result artifacts (api_artifacts.c); the thread that writes uploads is core/artifacts.h's. */
/* PUT /v1/jobs/{id}/result: a part of the result artifact, under the worker's lease (Lease-Id). */
int ad_api_put_result(struct ad_request *r);
/* GET or HEAD of the result with Lease-Id: how far the upload under that lease got (Upload-Offset). */
int ad_api_upload_progress(struct ad_request *r);
/* A complete with "artifact": true (x ready but for its artifact): read the view of the finished upload under
 * x's lease, then hand x to the writer, or answer 409 artifact-incomplete. Takes x. Returns 0. */
int ad_api_complete_artifact(struct ad_request *r, struct ad_report_op *x);
/* Answer with job j's artifact (j->artifact set): the bytes, a range of them, or 304. */
int ad_api_send_artifact(struct ad_request *r, const struct ad_job *j);
/* Location: a signed URL of j's result, valid for artifacts.urlLifetime. */
void ad_api_artifact_location(struct ad_request *r, const struct ad_job *j);
/* Schedules (api_schedules.c). */
int ad_api_schedule_create(struct ad_request *r);
int ad_api_schedule_list(struct ad_request *r);
int ad_api_schedule_get(struct ad_request *r);
int ad_api_schedule_patch(struct ad_request *r);
int ad_api_schedule_delete(struct ad_request *r);
int ad_api_schedule_trigger(struct ad_request *r);
/* GET /openapi.json (api_openapi.c). */
int ad_api_openapi(struct ad_request *r);

/* Webhook endpoints, the callback secret ("callback") and deliveries (api_webhooks.c). */
/* Batches (api_batches.c). */
int ad_api_batch_create(struct ad_request *r);
int ad_api_batch_get(struct ad_request *r);
int ad_api_batch_jobs(struct ad_request *r);
int ad_api_batch_cancel(struct ad_request *r);
/* GET /v1/batches/{id}/events (api_batch_events.c), and a job's change heard (the hub's event listener): the streams
 * of its batch read it again. */
int ad_api_batch_events(struct ad_request *r);
void ad_api_batch_events_changed(const struct ad_job *j);
/* A job's change was published (the hub's published listener): the cached answer of its batch, if any, is stale. */
void ad_api_batches_changed(const struct ad_job *j);
/* AD_E_OK while batch b is live, AD_E_GONE from its expiry for the tombstone period, then AD_E_NOT_FOUND. */
ad_err ad_api_batch_expiry_state(const struct ad_batch *b);
/* GET /v1/operations/{id} of a batch (bat_...): its AIP-151 view. */
int ad_api_batch_operation(struct ad_request *r);
int ad_api_webhook_create(struct ad_request *r);
int ad_api_webhook_list(struct ad_request *r);
int ad_api_webhook_get(struct ad_request *r);
int ad_api_webhook_delete(struct ad_request *r);
int ad_api_webhook_deliveries(struct ad_request *r);
int ad_api_webhook_rotate(struct ad_request *r);
int ad_api_webhook_enable(struct ad_request *r);
int ad_api_redeliver(struct ad_request *r);
/* 1 when url (may be NULL) cannot be a webhook destination: not an http(s) URL of at most 2048 characters, or
 * refused by the SSRF guard; the detail is written to why. */
int ad_api_webhook_url_invalid(const char *url, char *why, size_t whylen);

/* A job of tenant changed: wake the /changes long polls of that tenant (a hub listener). */
void ad_api_changes_notify(const char *tenant);
/* Take a parked lease request of tenant that waits for type, to hand it a job being submitted in the same
 * transaction (its lease length and worker name are written to *lease_ms and *worker). NULL when no
 * one waits. The claim must be settled with ad_api_leases_handoff_done. */
void *ad_api_leases_claim(const char *tenant, const char *type, int64_t *lease_ms, const char **worker);
/* Settle a claim: e is the published job leased to it, or NULL when the hand-off did not happen. */
void ad_api_leases_handoff_done(void *claim, struct ad_entry *e);
/* Serve parked lease requests of tenant for type (a hub listener). */
void ad_api_leases_kick(const char *tenant, const char *type);

/* Each parked lease request of tenant (NULL: of every tenant), for the dashboard: fn gets its tenant, types, worker
 * name (may be NULL) and how long it has waited. */
void ad_api_leases_parked(const char *tenant,
                          void (*fn)(void *arg, const char *tenant, char *const *types, size_t ntypes,
                                     const char *worker, int64_t waited_ms),
                          void *arg);

/* The dashboard (api_stats.c, api_ui.c): GET /v1/stats (counts, rates and latencies of the caller's tenant, every
 * tenant's for an admin), GET /v1/leases (running jobs' leases and parked lease requests), and the files of /ui/. */
void ad_api_stats_init(void);
int ad_api_stats(struct ad_request *r);
int ad_api_lease_list(struct ad_request *r);
int ad_api_ui(struct ad_request *r);

/* The Google AIP-151 operations view of jobs (api_operations.c). */
int ad_api_op_get(struct ad_request *r);
int ad_api_op_list(struct ad_request *r);
int ad_api_op_cancel(struct ad_request *r);
int ad_api_op_delete(struct ad_request *r);
int ad_api_op_wait(struct ad_request *r);
/* The answer to an accepted job of a route with style: operation: 200 with its Operation (ad_api_send_accepted). */
int ad_api_op_accepted(struct ad_request *r, struct ad_entry *e, int replayed);

/* Server-Sent Events, signed URLs and CORS (api_events.c). */
#define AD_API_SIGNED 8 /* role bit of a request carrying a signed URL: read access to the one job it names */
int ad_api_job_events(struct ad_request *r);
int ad_api_events(struct ad_request *r);
int ad_api_sign(struct ad_request *r);
/* At start: the signing key and the SSE limits. 0, or -1 with err filled. */
int ad_api_events_init(char *err, size_t errlen);
/* A committed change, in seq order: append it (the job and its rendered body) to the matching /v1/events
 * streams (a hub listener: the hub calls it for every published change in seq order). */
void ad_api_events_notify(const struct ad_job *j, const char *body, size_t len);
/* At shutdown (ad_api_shutdown): close every stream with a retry hint. */
void ad_api_events_shutdown(void);
/* Authenticate a request by its signed URL (?exp=&sig=) for the job in its path. */
ad_err ad_api_auth_signed(struct ad_request *r);
/* CORS headers for a request with Origin; answers a preflight and returns 1, else 0. */
int ad_api_cors(struct ad_request *r);

#endif
