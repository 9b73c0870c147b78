/*
 * api.h - the resource handlers (api_*.c) and what they share: body parsing, validation errors, auth.
 *
 * Handlers turn HTTP requests into core operations and their outcomes back into HTTP answers.
 */
#ifndef AD_API_H
#define AD_API_H

#include <jansson.h>
#include "http.h"
#include "server.h"

/* The h2o handler for every request: auth, routing, then the route's handler. */
int ad_api_on_req(h2o_handler_t *self, h2o_req_t *req);

/* Parse the request body as a JSON value. On failure sends the problem (415/413/400) and returns NULL.
 * The caller decrefs. */
json_t *ad_api_body(struct ad_request *r);

/* Validation errors collected for one 422 answer. */
struct ad_verr {
    struct ad_buf b;
    int n;
};
void ad_verr_init(struct ad_verr *v);
void ad_verr_add(struct ad_verr *v, const char *pointer, const char *detail);
/* Send 422 validation-failed with every collected error and free v. */
int ad_verr_send(struct ad_verr *v, struct ad_request *r);

/* Job answers shared by the handlers: representation with ETag and cache headers. */
int ad_api_send_job(struct ad_request *r, struct ad_entry *e, int status);
/* The 202 for an accepted job: Location, Operation-Location, Link, Retry-After, Content-Location. */
int ad_api_send_accepted(struct ad_request *r, struct ad_entry *e, int replayed);
/* The problem for an ad_err coming back from the core. */
int ad_api_fail(struct ad_request *r, ad_err err);

/* Handlers. */
int ad_api_submit(struct ad_request *r);
int ad_api_get_job(struct ad_request *r);
int ad_api_get_result(struct ad_request *r);
int ad_api_list(struct ad_request *r);
int ad_api_changes(struct ad_request *r);
int ad_api_cancel(struct ad_request *r);
int ad_api_retry(struct ad_request *r);
int ad_api_lease(struct ad_request *r);
int ad_api_heartbeat(struct ad_request *r);
int ad_api_complete(struct ad_request *r);
int ad_api_fail_job(struct ad_request *r);
int ad_api_release(struct ad_request *r);
int ad_api_attempts(struct ad_request *r);
int ad_api_healthz(struct ad_request *r);
int ad_api_readyz(struct ad_request *r);

/* Called by server.c when a change is published (wakes /changes long polls of that tenant). */
void ad_api_changes_notify(const char *tenant);
/* Serve parked lease requests of tenant for type (server.c's kick). */
void ad_api_leases_kick(const char *tenant, const char *type);

#endif
