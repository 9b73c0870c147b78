/*
 * tracer.c - sampling at submit, the bounded queue of finished spans and the thread that exports them (tracer.h).
 *
 * The encoding is OTLP/HTTP's JSON (the OTLP specification's "JSON Protobuf Encoding"), built with jansson: trace
 * and span ids as lowercase hex (not base64, as OTLP's JSON asks), 64-bit integers as decimal strings, enums as
 * numbers. Protobuf through protobuf-c would need OpenTelemetry's .proto files at build time, which Debian does
 * not package; JSON needs nothing new and every collector takes it (docs/tracing.md).
 *
 * The queue is the pool's own FIFO: one item per span, allocated by the thread that emits it and freed by the
 * export thread, and a count that bounds it. A dead collector costs a failed connect per batch; a slow one, at
 * most AD_TRACER_TIMEOUT_MS per batch, while new spans past the bound are dropped, not waited for.
 */
#include "core/tracer.h"
#include "core/pool.h"
#include "common/metrics.h"
#include "common/util.h"
#include "common/version.h"

#include <curl/curl.h>
#include <jansson.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct span_item {
    struct ad_pool_item item;
    char trace_id[AD_TRACE_ID_HEX + 1], span_id[AD_SPAN_ID_HEX + 1], parent_id[AD_SPAN_ID_HEX + 1];
    enum ad_span_kind kind;
    int64_t start_ms, end_ms;
    int error, attempt, http_status;
    char *name, *message, *job_id, *type, *tenant, *event;
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

static void item_free(struct span_item *s)
{
    free(s->name);
    free(s->message);
    free(s->job_id);
    free(s->type);
    free(s->tenant);
    free(s->event);
    free(s);
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
    struct span_item *s = ad_calloc(1, sizeof(*s));
    memcpy(s->trace_id, in->trace->trace_id, sizeof(s->trace_id));
    snprintf(s->span_id, sizeof(s->span_id), "%s", in->span);
    snprintf(s->parent_id, sizeof(s->parent_id), "%s", in->parent != NULL ? in->parent : "");
    s->kind = in->kind;
    s->start_ms = in->start_ms;
    s->end_ms = in->end_ms > in->start_ms ? in->end_ms : in->start_ms;
    s->error = in->error;
    s->attempt = in->attempt;
    s->http_status = in->http_status;
    s->name = ad_strdup(in->name);
    s->message = ad_strdup_opt(in->message);
    s->job_id = ad_strdup_opt(in->job_id);
    s->type = ad_strdup_opt(in->type);
    s->tenant = ad_strdup_opt(in->tenant);
    s->event = ad_strdup_opt(in->event);
    if (ad_pool_submit(&tr.pool, &s->item) != 0) {
        atomic_fetch_sub(&tr.queued, 1);
        ad_metrics_trace_spans(AD_METRICS_SPANS_DROPPED, 1);
        item_free(s);
    }
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

static json_t *str_attr(const char *key, const char *v)
{
    return json_pack("{s:s, s:{s:s}}", "key", key, "value", "stringValue", v);
}

static json_t *int_attr(const char *key, long long v)
{
    char n[24];
    snprintf(n, sizeof(n), "%lld", v);
    return json_pack("{s:s, s:{s:s}}", "key", key, "value", "intValue", n);
}

static json_t *nanos(int64_t ms)
{
    char n[32];
    snprintf(n, sizeof(n), "%lld000000", (long long)ms);
    return json_string(n);
}

static const char *operation_of(enum ad_span_kind k)
{
    return k == AD_SPAN_PRODUCER ? "send" : k == AD_SPAN_CONSUMER ? "process" : NULL;
}

static json_t *span_json(const struct span_item *s)
{
    json_t *attrs = json_array();
    json_array_append_new(attrs, str_attr("messaging.system", "acceptd"));
    if (operation_of(s->kind) != NULL)
        json_array_append_new(attrs, str_attr("messaging.operation.type", operation_of(s->kind)));
    if (s->type != NULL)
        json_array_append_new(attrs, str_attr("messaging.destination.name", s->type));
    if (s->job_id != NULL)
        json_array_append_new(attrs, str_attr("messaging.message.id", s->job_id));
    if (s->tenant != NULL)
        json_array_append_new(attrs, str_attr("acceptd.tenant", s->tenant));
    if (s->attempt > 0)
        json_array_append_new(attrs, int_attr("acceptd.attempt", s->attempt));
    if (s->event != NULL)
        json_array_append_new(attrs, str_attr("acceptd.webhook.event", s->event));
    if (s->http_status > 0)
        json_array_append_new(attrs, int_attr("http.response.status_code", s->http_status));
    json_t *o = json_pack("{s:s, s:s, s:s, s:i, s:o, s:o, s:o}", "traceId", s->trace_id, "spanId", s->span_id, "name",
                          s->name, "kind", (int)s->kind, "startTimeUnixNano", nanos(s->start_ms), "endTimeUnixNano",
                          nanos(s->end_ms), "attributes", attrs);
    if (s->parent_id[0] != '\0')
        json_object_set_new(o, "parentSpanId", json_string(s->parent_id));
    if (s->error)
        json_object_set_new(o, "status", json_pack("{s:i, s:s}", "code", 2, "message", s->message ? s->message : ""));
    return o;
}

static size_t discard(char *p, size_t size, size_t n, void *ud)
{
    return size * n;
}

/* Post the n spans of chain to the collector; frees them. */
static void export_batch(CURL *easy, struct ad_pool_item *chain, size_t n, long timeout_ms)
{
    json_t *spans = json_array();
    for (struct ad_pool_item *it = chain, *next; it != NULL; it = next) {
        next = it->next;
        struct span_item *s = (struct span_item *)it;
        json_array_append_new(spans, span_json(s));
        item_free(s);
    }
    atomic_fetch_sub(&tr.queued, n);
    json_t *req = json_pack("{s:[{s:{s:[o, o]}, s:[{s:{s:s, s:s}, s:o}]}]}", "resourceSpans", "resource", "attributes",
                            str_attr("service.name", "acceptd"), str_attr("service.version", AD_VERSION), "scopeSpans",
                            "scope", "name", "acceptd", "version", AD_VERSION, "spans", spans);
    char *body = json_dumps(req, JSON_COMPACT);
    json_decref(req);
    curl_easy_setopt(easy, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(easy, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(body));
    curl_easy_setopt(easy, CURLOPT_TIMEOUT_MS, timeout_ms);
    CURLcode rc = curl_easy_perform(easy);
    long status = 0;
    curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &status);
    free(body);
    if (rc == CURLE_OK && status >= 200 && status < 300) {
        ad_metrics_trace_spans(AD_METRICS_SPANS_EXPORTED, n);
        return;
    }
    ad_metrics_trace_spans(AD_METRICS_SPANS_DROPPED, n);
    ad_metrics_trace_spans(AD_METRICS_SPANS_EXPORT_FAILED, 1);
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
    while (!ad_pool_closing(p)) {
        ad_pool_wait(p, AD_TRACER_BATCH, ad_mono_ns() + (int64_t)AD_TRACER_FLUSH_MS * 1000000);
        size_t n;
        struct ad_pool_item *chain = ad_pool_take(p, AD_TRACER_BATCH, &n);
        if (chain != NULL)
            export_batch(easy, chain, n, ad_pool_stopping(p) ? 1000L : AD_TRACER_TIMEOUT_MS);
    }
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
