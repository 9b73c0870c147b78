/*
 * api_azure.c - the Azure REST API guidelines' view of a job: the status monitor (GET /v1/jobs/{id}/status, what
 * Operation-Location points to), the headers an accepted job carries for Azure pollers, and the Azure sample's
 * modes of a job read (?OnPending=Synchronous|OK|Accepted, ?OnComplete=Redirect|Stream) under their own names.
 *
 * Nothing is stored for it: the monitor is rendered from the job the jobs API reads, and its reads and long polls
 * are the job's own (api_jobs.c), which ask this file how to answer. docs/protocol.md, "Azure compatibility".
 */
#include "api/api_int.h"
#include "common/json.h"

#include <string.h>
#include <strings.h>

static const char *query_either(struct ad_request *r, const char *name, const char *azure_name)
{
    const char *v = ad_http_query(r, name);
    return v != NULL ? v : ad_http_query(r, azure_name);
}

/* Read the modes of r (values case-insensitive, as the sample spells them). 0, or -1 after sending 400. */
int ad_api_az_modes_read(struct ad_request *r, struct ad_az_modes *m)
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
int ad_api_is_monitor(struct ad_request *r)
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
int ad_api_monitor_render(struct ad_buf *b, const struct ad_job *j)
{
    AD_JSON_OPEN(b, "id");
    ad_json_str(b, j->id);
    AD_JSON_KEY(b, "status");
    ad_json_str(b, az_status(j->status));
    int pct = j->status == AD_SUCCEEDED || j->status == AD_PARTIAL ? 100 : j->progress;
    if (pct >= 0) {
        AD_JSON_KEY(b, "percentComplete");
        ad_json_int(b, pct);
    }
    AD_JSON_KEY(b, "createdDateTime");
    ad_json_time(b, j->created_at);
    AD_JSON_KEY(b, "lastActionDateTime");
    ad_json_time(b, j->updated_at);
    if (j->message != NULL) {
        AD_JSON_KEY(b, "message");
        ad_json_str(b, j->message);
    }
    if (j->status == AD_SUCCEEDED || j->status == AD_PARTIAL) {
        if (j->status == AD_PARTIAL)
            AD_BUF_LIT(b, ",\"partialSuccess\":true");
        if (j->result != NULL) {
            AD_JSON_KEY(b, "result");
            ad_json_raw(b, j->result);
        }
        /* Where the outcome lives: the route's business resource (which now answers the result), the worker's
         * external result, or the stored result document. */
        AD_JSON_KEY(b, "resourceLocation");
        if (j->resource != NULL) {
            AD_BUF_LIT(b, "\"");
            ad_json_chars(b, ad_hub.public_url);
            ad_json_chars(b, j->resource);
            AD_BUF_LIT(b, "\"");
        } else if (j->result == NULL && j->result_location != NULL) {
            ad_json_str(b, j->result_location);
        } else {
            AD_BUF_LIT(b, "\"");
            ad_json_chars(b, ad_hub.public_url);
            AD_BUF_LIT(b, "/v1/jobs/");
            ad_json_chars(b, j->id);
            AD_BUF_LIT(b, "/result\"");
        }
    } else if (j->status == AD_FAILED) {
        AD_JSON_KEY(b, "error");
        az_error(b, j);
    } else if (j->status == AD_CANCELLED) {
        AD_JSON_KEY(b, "error");
        AD_JSON_OPEN(b, "code");
        ad_json_str(b, "job-cancelled");
        AD_JSON_KEY(b, "message");
        ad_json_str(b, "the job was cancelled");
        AD_BUF_LIT(b, "}");
    }
    AD_BUF_LIT(b, "}");
    return ad_json_end(b);
}

int ad_api_send_monitor(struct ad_request *r, struct ad_entry *e, int status)
{
    ad_api_job_headers(r->req, e);
    if (status == 304)
        return ad_http_empty(r->req, 304);
    struct ad_buf b;
    ad_buf_init(&b, SIZE_MAX);
    ad_api_monitor_render(&b, e->job);
    return ad_api_send_buf(r, status, &b);
}
