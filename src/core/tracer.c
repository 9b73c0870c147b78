/*
 * tracer.c - sampling at submit, the bounded queue of finished spans and the thread that exports them (tracer.h).
 *
 * The encoding is OTLP/HTTP's JSON (the OTLP specification's "JSON Protobuf Encoding"), written with the project's
 * JSON writer (common/json.h) straight into one buffer per batch: trace and span ids as lowercase hex (not base64,
 * as OTLP's JSON asks), 64-bit integers as decimal strings, enums as numbers. (Built as jansson trees it cost more
 * CPU than the submit it describes.) Protobuf through protobuf-c would need OpenTelemetry's .proto files at build time,
 * which Debian does not package; JSON needs nothing new and every collector takes it (docs/tracing.md).
 *
 * The queue is the pool's own FIFO: one item per span, allocated by the thread that emits it and freed by the
 * export thread, and a count that bounds it. A dead collector costs a failed connect per batch; a slow one, at
 * most AD_TRACER_TIMEOUT_MS per batch, while new spans past the bound are dropped, not waited for.
 */
#include "core/tracer.h"
#include "core/pool.h"
#include "common/json.h"
#include "common/metrics.h"
#include "common/util.h"
#include "common/version.h"

#include <curl/curl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* One finished span, with its strings after it in the same allocation (one malloc per span on the emitting
 * thread, one free on the export thread). */
struct span_item {
    struct ad_pool_item item;
    char trace_id[AD_TRACE_ID_HEX + 1], span_id[AD_SPAN_ID_HEX + 1], parent_id[AD_SPAN_ID_HEX + 1];
    enum ad_span_kind kind;
    int64_t start_ms, end_ms;
    int error, attempt, http_status;
    const char *name, *message, *job_id, *type, *tenant, *event; /* into text, or NULL */
    char text[];
};

static void export_main(struct ad_pool *p, void *state);

static struct {
    const struct ad_tracing_conf *conf;
    atomic_int on;
    atomic_size_t queued;
    struct ad_pool pool;
} tr = {.pool = {.name = "tracer", .nthreads = 1, .drain = 1, .main = export_main}};

int ad_tracer_on(void)
{
    return tr.on;
}

int ad_tracer_begin(const char *traceparent, struct ad_trace_ctx *job_ctx, char parent[AD_SPAN_ID_HEX + 1])
{
    struct ad_trace_ctx in;
    int valid = ad_traceparent_parse(traceparent, &in) == 0;
    if (!valid && !tr.on)
        return -1;
    if (valid) {
        memcpy(job_ctx->trace_id, in.trace_id, sizeof(in.trace_id));
        memcpy(parent, in.span_id, AD_SPAN_ID_HEX + 1);
        job_ctx->flags = in.flags;
        if (tr.on && !ad_trace_id_within(in.trace_id, tr.conf->sample_ratio))
            job_ctx->flags = 0;
    } else {
        ad_trace_new_trace_id(job_ctx->trace_id);
        parent[0] = '\0';
        job_ctx->flags = ad_trace_id_within(job_ctx->trace_id, tr.conf->sample_ratio) ? AD_TRACE_SAMPLED : 0;
    }
    ad_trace_new_span_id(job_ctx->span_id);
    return 0;
}

int ad_tracer_job_ctx(const struct ad_job *j, struct ad_trace_ctx *out)
{
    return j->traceparent != NULL ? ad_traceparent_parse(j->traceparent, out) : -1;
}

/* Copy v (NULL stays NULL) to *at, moving it on. */
static const char *put(char **at, const char *v)
{
    if (v == NULL)
        return NULL;
    size_t n = strlen(v) + 1;
    char *d = memcpy(*at, v, n);
    *at += n;
    return d;
}

static size_t size_of(const char *v)
{
    return v != NULL ? strlen(v) + 1 : 0;
}

void ad_tracer_span(const struct ad_span_info *in)
{
    if (!tr.on || in->trace == NULL || !(in->trace->flags & AD_TRACE_SAMPLED))
        return;
    if (atomic_fetch_add(&tr.queued, 1) >= AD_TRACER_QUEUE_MAX) {
        atomic_fetch_sub(&tr.queued, 1);
        ad_metrics_trace_spans(AD_METRICS_SPANS_DROPPED, 1);
        return;
    }
    size_t text = size_of(in->name != NULL ? in->name : "span") + size_of(in->message) + size_of(in->job_id) +
                  size_of(in->type) + size_of(in->tenant) + size_of(in->event);
    struct span_item *s = ad_malloc(sizeof(*s) + text);
    char *at = s->text;
    memcpy(s->trace_id, in->trace->trace_id, sizeof(s->trace_id));
    snprintf(s->span_id, sizeof(s->span_id), "%s", in->span);
    snprintf(s->parent_id, sizeof(s->parent_id), "%s", in->parent != NULL ? in->parent : "");
    s->kind = in->kind;
    s->start_ms = in->start_ms;
    s->end_ms = in->end_ms > in->start_ms ? in->end_ms : in->start_ms;
    s->error = in->error;
    s->attempt = in->attempt;
    s->http_status = in->http_status;
    s->name = put(&at, in->name != NULL ? in->name : "span");
    s->message = put(&at, in->message);
    s->job_id = put(&at, in->job_id);
    s->type = put(&at, in->type);
    s->tenant = put(&at, in->tenant);
    s->event = put(&at, in->event);
    if (ad_pool_submit(&tr.pool, &s->item) != 0) {
        atomic_fetch_sub(&tr.queued, 1);
        ad_metrics_trace_spans(AD_METRICS_SPANS_DROPPED, 1);
        free(s);
    }
}

int ad_tracer_made(struct ad_job *j, const struct ad_job *from, char parent[AD_SPAN_ID_HEX + 1])
{
    struct ad_trace_ctx ctx;
    const char *ts = NULL;
    if (from != NULL && ad_tracer_job_ctx(from, &ctx) == 0) {
        memcpy(parent, ctx.span_id, AD_SPAN_ID_HEX + 1);
        ad_trace_new_span_id(ctx.span_id);
        ts = from->tracestate;
    } else if (ad_tracer_begin(NULL, &ctx, parent) != 0) {
        parent[0] = '\0';
        return -1;
    }
    char text[AD_TRACEPARENT_LEN + 1];
    ad_traceparent_format(&ctx, text);
    ad_job_set(&j->traceparent, text);
    ad_job_set(&j->tracestate, ts);
    return 0;
}

void ad_tracer_submitted(const struct ad_job *j, const char *route, const char *parent, int64_t start_ms)
{
    struct ad_trace_ctx ctx;
    if (!tr.on || ad_tracer_job_ctx(j, &ctx) != 0)
        return;
    char name[160], span[AD_SPAN_ID_HEX + 1];
    snprintf(name, sizeof(name), "send %.128s", j->type);
    struct ad_span_info s = {
        .trace = &ctx,
        .kind = AD_SPAN_PRODUCER,
        .name = name,
        .span = ctx.span_id,
        .parent = parent,
        .start_ms = start_ms,
        .end_ms = ad_now_ms(),
        .job_id = j->id,
        .type = j->type,
        .tenant = j->tenant,
    };
    if (route != NULL) {
        s.kind = AD_SPAN_SERVER;
        s.name = route;
        ad_tracer_span(&s);
        ad_trace_new_span_id(span);
        s.kind = AD_SPAN_PRODUCER;
        s.name = name;
        s.span = span;
        s.parent = ctx.span_id;
        s.start_ms = j->created_at;
    }
    ad_tracer_span(&s);
}

void ad_tracer_attempt(const struct ad_job *j, int64_t ended_at, const char *outcome)
{
    struct ad_trace_ctx ctx;
    if (!tr.on || j->lease_id == NULL || ad_tracer_job_ctx(j, &ctx) != 0)
        return;
    char span[AD_SPAN_ID_HEX + 1], name[160];
    ad_trace_span_of(j->lease_id, span);
    snprintf(name, sizeof(name), "process %.128s", j->type);
    int ok =
        strcmp(outcome, "succeeded") == 0 || strcmp(outcome, "partialSuccess") == 0 || strcmp(outcome, "released") == 0;
    struct ad_span_info s = {
        .trace = &ctx,
        .kind = AD_SPAN_CONSUMER,
        .name = name,
        .span = span,
        .parent = ctx.span_id,
        .start_ms = j->started_at,
        .end_ms = ended_at,
        .error = !ok,
        .message = ok ? NULL : outcome,
        .job_id = j->id,
        .type = j->type,
        .tenant = j->tenant,
        .attempt = j->attempt,
    };
    ad_tracer_span(&s);
}

/* ---- export ---- */

static void str_attr(struct ad_buf *b, const char *key, const char *v)
{
    AD_BUF_LIT(b, ",{\"key\":");
    ad_json_str(b, key);
    AD_BUF_LIT(b, ",\"value\":{\"stringValue\":");
    ad_json_str(b, v);
    AD_BUF_LIT(b, "}}");
}

/* OTLP's JSON writes 64-bit integers as strings. */
static void int_attr(struct ad_buf *b, const char *key, long long v)
{
    AD_BUF_LIT(b, ",{\"key\":");
    ad_json_str(b, key);
    ad_buf_printf(b, ",\"value\":{\"intValue\":\"%lld\"}}", v);
}

static const char *operation_of(enum ad_span_kind k)
{
    return k == AD_SPAN_PRODUCER ? "send" : k == AD_SPAN_CONSUMER ? "process" : NULL;
}

/* Append s as an OTLP JSON Span: ids in hex, times as decimal strings of nanoseconds, the kind as a number. */
static void span_json(struct ad_buf *b, const struct span_item *s)
{
    ad_buf_printf(b, "{\"traceId\":\"%s\",\"spanId\":\"%s\"", s->trace_id, s->span_id);
    if (s->parent_id[0] != '\0')
        ad_buf_printf(b, ",\"parentSpanId\":\"%s\"", s->parent_id);
    AD_JSON_KEY(b, "name");
    ad_json_str(b, s->name);
    ad_buf_printf(b, ",\"kind\":%d,\"startTimeUnixNano\":\"%lld000000\",\"endTimeUnixNano\":\"%lld000000\"",
                  (int)s->kind, (long long)s->start_ms, (long long)s->end_ms);
    AD_BUF_LIT(b, ",\"attributes\":[{\"key\":\"messaging.system\",\"value\":{\"stringValue\":\"acceptd\"}}");
    if (operation_of(s->kind) != NULL)
        str_attr(b, "messaging.operation.type", operation_of(s->kind));
    if (s->type != NULL)
        str_attr(b, "messaging.destination.name", s->type);
    if (s->job_id != NULL)
        str_attr(b, "messaging.message.id", s->job_id);
    if (s->tenant != NULL)
        str_attr(b, "acceptd.tenant", s->tenant);
    if (s->attempt > 0)
        int_attr(b, "acceptd.attempt", s->attempt);
    if (s->event != NULL)
        str_attr(b, "acceptd.webhook.event", s->event);
    if (s->http_status > 0)
        int_attr(b, "http.response.status_code", s->http_status);
    AD_BUF_LIT(b, "]");
    if (s->error) {
        AD_BUF_LIT(b, ",\"status\":{\"code\":2,\"message\":");
        ad_json_str(b, s->message != NULL ? s->message : "");
        AD_BUF_LIT(b, "}");
    }
    AD_BUF_LIT(b, "}");
}

static size_t discard(char *p, size_t size, size_t n, void *ud)
{
    return size * n;
}

/* Drop the n spans of chain, counted. */
static void drop_batch(struct ad_pool_item *chain, size_t n)
{
    for (struct ad_pool_item *it = chain, *next; it != NULL; it = next) {
        next = it->next;
        free(it);
    }
    atomic_fetch_sub(&tr.queued, n);
    ad_metrics_trace_spans(AD_METRICS_SPANS_DROPPED, n);
}

/* Post the n spans of chain to the collector; frees them. Returns 0, or -1 when the collector failed it. */
static int export_batch(CURL *easy, struct ad_buf *b, struct ad_pool_item *chain, size_t n, long timeout_ms)
{
    b->len = 0;
    AD_BUF_LIT(b, "{\"resourceSpans\":[{\"resource\":{\"attributes\":[{\"key\":\"service.name\",\"value\":"
                  "{\"stringValue\":\"acceptd\"}},{\"key\":\"service.version\",\"value\":{\"stringValue\":"
                  "\"" AD_VERSION "\"}}]},\"scopeSpans\":[{\"scope\":{\"name\":\"acceptd\",\"version\":"
                  "\"" AD_VERSION "\"},\"spans\":[");
    for (struct ad_pool_item *it = chain, *next; it != NULL; it = next) {
        next = it->next;
        if (it != chain)
            AD_BUF_LIT(b, ",");
        span_json(b, (struct span_item *)it);
        free(it);
    }
    AD_BUF_LIT(b, "]}]}]}");
    atomic_fetch_sub(&tr.queued, n);
    curl_easy_setopt(easy, CURLOPT_POSTFIELDS, b->data);
    curl_easy_setopt(easy, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)b->len);
    curl_easy_setopt(easy, CURLOPT_TIMEOUT_MS, timeout_ms);
    CURLcode rc = curl_easy_perform(easy);
    long status = 0;
    curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &status);
    if (rc == CURLE_OK && status >= 200 && status < 300) {
        ad_metrics_trace_spans(AD_METRICS_SPANS_EXPORTED, n);
        return 0;
    }
    ad_metrics_trace_spans(AD_METRICS_SPANS_DROPPED, n);
    ad_metrics_trace_spans(AD_METRICS_SPANS_EXPORT_FAILED, 1);
    return -1;
}

static void export_main(struct ad_pool *p, void *state)
{
    CURL *easy = curl_easy_init();
    struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
    h = curl_slist_append(h, "Expect:");
    for (size_t i = 0; i < tr.conf->nheaders; i++)
        h = curl_slist_append(h, tr.conf->headers[i]);
    curl_easy_setopt(easy, CURLOPT_URL, tr.conf->otlp_endpoint);
    curl_easy_setopt(easy, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(easy, CURLOPT_CONNECTTIMEOUT_MS, 2000L);
    curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, discard);
    curl_easy_setopt(easy, CURLOPT_USERAGENT, "acceptd/" AD_VERSION);
    struct ad_buf b;
    ad_buf_init(&b, SIZE_MAX);
    /* After a failed export the collector is given AD_TRACER_RETRY_MS, doubling to AD_TRACER_RETRY_MAX_MS, during
     * which batches are dropped unencoded: a dead collector costs one failed request per interval. */
    int64_t down_until = 0, retry_ms = AD_TRACER_RETRY_MS, sent = ad_mono_ms();
    while (!ad_pool_closing(p)) {
        /* Polled, not woken: ad_pool_wait would wake this thread at every span queued (a context switch per
         * span, on the emitter's core too), where a look every AD_TRACER_POLL_MS costs nothing. */
        if (atomic_load(&tr.queued) < AD_TRACER_BATCH && ad_mono_ms() - sent < AD_TRACER_FLUSH_MS &&
            !ad_pool_stopping(p)) {
            struct timespec nap = {0, AD_TRACER_POLL_MS * 1000000L};
            nanosleep(&nap, NULL);
            continue;
        }
        sent = ad_mono_ms();
        size_t n;
        struct ad_pool_item *chain = ad_pool_take(p, AD_TRACER_BATCH, &n);
        if (chain == NULL)
            continue;
        if (ad_mono_ms() < down_until && !ad_pool_stopping(p)) {
            drop_batch(chain, n);
        } else if (export_batch(easy, &b, chain, n, ad_pool_stopping(p) ? 1000L : AD_TRACER_TIMEOUT_MS) != 0) {
            down_until = ad_mono_ms() + retry_ms;
            retry_ms = retry_ms * 2 > AD_TRACER_RETRY_MAX_MS ? AD_TRACER_RETRY_MAX_MS : retry_ms * 2;
        } else {
            retry_ms = AD_TRACER_RETRY_MS;
        }
    }
    ad_buf_free(&b);
    curl_slist_free_all(h);
    curl_easy_cleanup(easy);
}

int ad_tracer_start(const struct ad_config *cfg, char *err, size_t errlen)
{
    tr.conf = &cfg->tracing;
    if (cfg->tracing.otlp_endpoint == NULL)
        return 0;
    if (ad_pool_start(&tr.pool, err, errlen) != 0)
        return -1;
    tr.on = 1;
    return 0;
}

void ad_tracer_stop(void)
{
    if (!tr.on)
        return;
    tr.on = 0;
    ad_pool_stop(&tr.pool);
}
