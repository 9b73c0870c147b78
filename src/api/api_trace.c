/*
 * api_trace.c - W3C Trace Context at the HTTP edge (docs/tracing.md): a submit's traceparent and tracestate
 * headers made into its job's trace context, the spans of the submit and the enqueue once the job is stored, and
 * the trace context a lease hands the worker.
 *
 * A job's traceparent names acceptd's span of its submit (SERVER), whose parent is the submitter's span. Each
 * attempt's span (CONSUMER) is a child of that submit span, with an id derived from its lease id
 * (ad_trace_span_of), so the lease, the worker's calls and the attempt's export all agree without storing it.
 * What this file does not do: parse the headers' grammar (common/trace.h) or export (core/tracer.h).
 */
#include "api/api_int.h"
#include "core/tracer.h"
#include "common/json.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void ad_api_trace_begin(struct ad_request *r, struct ad_job *job, char parent[AD_SPAN_ID_HEX + 1])
{
    struct ad_trace_ctx ctx;
    parent[0] = '\0';
    const char *tp = ad_http_get_str(r->req, "traceparent");
    if (ad_tracer_begin(tp, &ctx, parent) != 0)
        return;
    char text[AD_TRACEPARENT_LEN + 1];
    ad_traceparent_format(&ctx, text);
    ad_job_set(&job->traceparent, text);
    /* The tracestate goes with a valid traceparent only: a trace acceptd starts has none. */
    free(job->tracestate);
    job->tracestate = parent[0] != '\0' ? ad_tracestate_clean(ad_http_get_str(r->req, "tracestate")) : NULL;
}

void ad_api_trace_submitted(const struct ad_job *j, const char *route, const char *parent, int64_t start_ms)
{
    ad_tracer_submitted(j, route, parent, start_ms);
}

void ad_api_trace_lease(struct ad_buf *b, const struct ad_job *j)
{
    struct ad_trace_ctx ctx;
    if (j->lease_id == NULL || ad_tracer_job_ctx(j, &ctx) != 0)
        return;
    ad_trace_span_of(j->lease_id, ctx.span_id);
    char text[AD_TRACEPARENT_LEN + 1];
    ad_traceparent_format(&ctx, text);
    AD_JSON_KEY(b, "traceparent");
    ad_json_str(b, text);
    char *ts = ad_tracestate_push(j->tracestate, AD_TRACESTATE_KEY, ctx.span_id);
    AD_JSON_KEY(b, "tracestate");
    ad_json_str(b, ts);
    free(ts);
}
