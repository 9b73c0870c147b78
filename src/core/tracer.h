/*
 * tracer.h - the trace of a job (docs/tracing.md): deciding at submit whether it is sampled, and exporting the
 * spans of its submit, enqueue, attempts and webhook deliveries over OTLP/HTTP (JSON) to tracing.otlpEndpoint.
 *
 * Any thread hands a finished span to ad_tracer_emit (the event loop, the writer, the delivery thread): it is
 * queued in memory, or dropped and counted when the queue holds AD_TRACER_QUEUE_MAX spans, and never waits.
 * One thread of a core/pool.h pool takes the queue in batches and posts them with libcurl; a collector that
 * fails or does not answer within AD_TRACER_TIMEOUT_MS loses that batch, and the batches of the next
 * AD_TRACER_RETRY_MS (doubling while it keeps failing, to AD_TRACER_RETRY_MAX_MS), counted in /metrics. What this file
 * does not do: read or write a traceparent (common/trace.h), or keep anything in the store.
 */
#ifndef AD_TRACER_H
#define AD_TRACER_H

#include "common/trace.h"
#include "core/config.h"
#include "job/job.h"

#include <stddef.h>
#include <stdint.h>

#define AD_TRACER_QUEUE_MAX 8192
#define AD_TRACER_BATCH 512
#define AD_TRACER_FLUSH_MS 500 /* a batch goes when it has AD_TRACER_BATCH spans or is this old */
#define AD_TRACER_POLL_MS 50   /* how often the export thread looks */
#define AD_TRACER_TIMEOUT_MS 5000
#define AD_TRACER_RETRY_MS 1000 /* after a failed export, batches are dropped unsent for this long, doubling */
#define AD_TRACER_RETRY_MAX_MS 30000

/* OTLP's SpanKind numbers. */
enum ad_span_kind { AD_SPAN_SERVER = 2, AD_SPAN_CLIENT = 3, AD_SPAN_PRODUCER = 4, AD_SPAN_CONSUMER = 5 };

/* Start the export thread when cfg->tracing.otlpEndpoint is set (cfg must outlive the tracer); nothing otherwise.
 * 0, or -1 with err filled. */
int ad_tracer_start(const struct ad_config *cfg, char *err, size_t errlen);
/* Send what is queued (giving the collector a short while) and stop the thread. */
void ad_tracer_stop(void);
/* Whether spans are exported at all. */
int ad_tracer_on(void);

/*
 * The trace context of a new job from its submit's traceparent header value (NULL: none) and tracestate: its
 * trace, with a new span id for acceptd's submit span, into *job_ctx, and the submitter's span (the parent of the
 * submit span, "" when acceptd starts the trace) into parent. The sampled flag: without export the submitter's
 * is kept as it came; with it, a trace is sampled when the submitter's flag says so (or there is no submitter)
 * and its trace id falls within tracing.sampleRatio. Returns 0, or -1 when the job has no trace: the header was
 * absent or invalid and export is off.
 */
int ad_tracer_begin(const char *traceparent, struct ad_trace_ctx *job_ctx, char parent[AD_SPAN_ID_HEX + 1]);

/* A finished span. The strings are copied; NULL ones are left out. */
struct ad_span_info {
    const struct ad_trace_ctx *trace; /* its trace id and sampled flag; the span id is span */
    enum ad_span_kind kind;
    const char *name;
    const char *span, *parent; /* span ids; parent NULL or "" for a root */
    int64_t start_ms, end_ms;  /* ms since the epoch */
    int error;                 /* error status, with message */
    const char *message;
    const char *job_id, *type, *tenant; /* attributes: messaging.message.id, messaging.destination.name, tenant */
    int attempt;                        /* 0: none */
    const char *event;                  /* a webhook delivery's event type, or NULL */
    int http_status;                    /* a webhook delivery's answer, 0: none */
};
/* Queue s for export. Nothing when export is off or the trace is not sampled. Any thread; never waits. */
void ad_tracer_span(const struct ad_span_info *s);
/* The trace context of job j (its traceparent parsed): 0, or -1 when it has none. */
int ad_tracer_job_ctx(const struct ad_job *j, struct ad_trace_ctx *out);
/*
 * The trace of a job acceptd makes itself, not from a request's headers (docs/tracing.md): a :retry's new job
 * continues the trace of from, the job it retries (the same trace id and sampled flag, a new span id whose parent
 * is from's span; from's tracestate); a schedule's fire (from NULL), or a retry of a job without a trace, starts a
 * new trace when export is on and has none otherwise. Sets j's traceparent and tracestate, and parent to the span
 * the job's own continues ("" for a new trace). 0, or -1 when the job has no trace.
 */
int ad_tracer_made(struct ad_job *j, const struct ad_job *from, char parent[AD_SPAN_ID_HEX + 1]);
/* The spans of a stored new job j's making: with route (a submit's, "POST /v1/jobs"), the submit (SERVER, the
 * job's span, a child of parent) and the enqueue (PRODUCER) beneath it; with route NULL (a job acceptd made,
 * ad_tracer_made), the enqueue alone, as the job's span, a child of parent. From start_ms to now. Any thread. */
void ad_tracer_submitted(const struct ad_job *j, const char *route, const char *parent, int64_t start_ms);
/* The span of the attempt of j that just ended (j still holds its lease id and start), ended_at, with the outcome
 * of its history row ("succeeded", "failed", "retrying", "expired", "released", "cancelled", ...). The writer
 * thread, inside the change's transaction. */
void ad_tracer_attempt(const struct ad_job *j, int64_t ended_at, const char *outcome);

#endif
