/*
 * metrics.c - the registry behind GET /metrics (metrics.h) and its one rendering function.
 *
 * Names, help texts and bucket bounds are fixed here, so that docs/operations.md can list them and a scrape never
 * sees a metric appear or change its type. Label values come from the daemon (route templates, job types and
 * states), never from a raw request, and are escaped as the format says. This file does no I/O.
 */
#include "common/metrics.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

/* A histogram with fixed upper bounds. sum is kept in units of scale (1e-9 for seconds: nanoseconds), so that
 * the writer thread can add to it with an integer atomic. */
#define HIST_MAX_BOUNDS 16
struct hist {
    const char *name, *help;
    const double *bounds;
    size_t nbounds;
    double scale;
    uint64_t counts[HIST_MAX_BOUNDS + 1]; /* per bucket, not cumulative; the last is above every bound */
    uint64_t sum, count;
};

static const double latency_bounds[] = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};
static const double webhook_bounds[] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};
static const double batch_bounds[] = {1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024};
#define NB(a) (sizeof(a) / sizeof((a)[0]))

static struct hist submit_hist = {"acceptd_submit_duration_seconds",
                                  "Time from a submit's arrival to its 202 answer (the commit included).",
                                  latency_bounds, NB(latency_bounds), 1e-9};
static struct hist commit_hist = {"acceptd_commit_duration_seconds",
                                  "Time the writer thread spent committing one batch.", latency_bounds,
                                  NB(latency_bounds), 1e-9};
static struct hist batch_hist = {"acceptd_commit_batch_size", "Operations in one committed batch.", batch_bounds,
                                 NB(batch_bounds), 1};
static struct hist webhook_hist = {"acceptd_webhook_delivery_duration_seconds",
                                   "Time of one webhook delivery attempt, from sending to the answer or the error.",
                                   webhook_bounds, NB(webhook_bounds), 1e-9};

static uint64_t leases_granted, leases_expired, leases_handed_off, rate_limited; /* event loop thread */
static uint64_t store_errors;                                                    /* atomic */
static uint64_t trace_spans[AD_METRICS_SPANS__COUNT];                            /* atomic */
static uint64_t schedule_events[AD_METRICS_SCHED__COUNT];                        /* atomic */
static uint64_t webhook_outcomes[AD_METRICS_WH__COUNT];                          /* atomic */
static const char *const webhook_outcome_names[AD_METRICS_WH__COUNT] = {"delivered", "retrying", "dead"};

static void hist_observe(struct hist *h, double v, int atomic)
{
    size_t i = 0;
    while (i < h->nbounds && v > h->bounds[i])
        i++;
    uint64_t units = v > 0 ? (uint64_t)(v / h->scale + 0.5) : 0;
    if (atomic) {
        __atomic_add_fetch(&h->counts[i], 1, __ATOMIC_RELAXED);
        __atomic_add_fetch(&h->sum, units, __ATOMIC_RELAXED);
        __atomic_add_fetch(&h->count, 1, __ATOMIC_RELAXED);
    } else {
        h->counts[i]++;
        h->sum += units;
        h->count++;
    }
}

/* ---- requests by route and status: an open-addressed table, keyed by the template's text ---- */

struct req_slot {
    char *route; /* NULL: empty */
    uint32_t hash;
    int status;
    uint64_t n;
};

static struct req_slot *req_slots;
static size_t req_cap, req_used;

static uint32_t route_hash(const char *s, int status)
{
    uint32_t h = 2166136261u; /* FNV-1a */
    for (; *s != '\0'; s++)
        h = (h ^ (unsigned char)*s) * 16777619u;
    return (h ^ (uint32_t)status) * 16777619u;
}

static struct req_slot *req_find(const char *route, int status, uint32_t hash)
{
    size_t i = hash & (req_cap - 1);
    while (req_slots[i].route != NULL &&
           (req_slots[i].hash != hash || req_slots[i].status != status || strcmp(req_slots[i].route, route) != 0))
        i = (i + 1) & (req_cap - 1);
    return &req_slots[i];
}

static void req_grow(void)
{
    struct req_slot *old = req_slots;
    size_t oldcap = req_cap;
    req_cap = req_cap != 0 ? req_cap * 2 : 256;
    req_slots = ad_calloc(req_cap, sizeof(*req_slots));
    for (size_t i = 0; i < oldcap; i++)
        if (old[i].route != NULL)
            *req_find(old[i].route, old[i].status, old[i].hash) = old[i];
    free(old);
}

void ad_metrics_request(const char *route, int status)
{
    if (req_used * 4 >= req_cap * 3)
        req_grow();
    uint32_t hash = route_hash(route, status);
    struct req_slot *s = req_find(route, status, hash);
    if (s->route == NULL) {
        /* A copy: a configured route's path goes away with its configuration. */
        *s = (struct req_slot){ad_strdup(route), hash, status, 0};
        req_used++;
    }
    s->n++;
}

void ad_metrics_submit_latency(double seconds)
{
    hist_observe(&submit_hist, seconds, 0);
}

void ad_metrics_lease_granted(size_t n)
{
    leases_granted += n;
}

void ad_metrics_lease_expired(void)
{
    leases_expired++;
}

void ad_metrics_lease_handed_off(void)
{
    leases_handed_off++;
}

void ad_metrics_webhook(enum ad_metrics_webhook outcome, double seconds)
{
    __atomic_add_fetch(&webhook_outcomes[outcome], 1, __ATOMIC_RELAXED);
    hist_observe(&webhook_hist, seconds, 1);
}

void ad_metrics_rate_limited(void)
{
    rate_limited++;
}

void ad_metrics_commit(size_t n, double seconds)
{
    hist_observe(&batch_hist, (double)n, 1);
    hist_observe(&commit_hist, seconds, 1);
}

void ad_metrics_trace_spans(enum ad_metrics_spans what, size_t n)
{
    __atomic_add_fetch(&trace_spans[what], (uint64_t)n, __ATOMIC_RELAXED);
}

void ad_metrics_schedule(enum ad_metrics_schedule what, size_t n)
{
    __atomic_add_fetch(&schedule_events[what], (uint64_t)n, __ATOMIC_RELAXED);
}

void ad_metrics_store_error(void)
{
    __atomic_add_fetch(&store_errors, 1, __ATOMIC_RELAXED);
}

/* ---- jobs by type and state, as the store last counted them ---- */

struct job_count {
    char *type;
    const char *state;
    int64_t n;
};

static struct job_count *jobs;
static size_t njobs, jobs_cap;

static int jobs_changed;

void ad_metrics_jobs_changed(void)
{
    jobs_changed = 1;
}

int ad_metrics_jobs_take_changed(void)
{
    int c = jobs_changed;
    jobs_changed = 0;
    return c;
}

void ad_metrics_jobs_reset(void)
{
    for (size_t i = 0; i < njobs; i++)
        free(jobs[i].type);
    njobs = 0;
}

void ad_metrics_jobs_add(const char *type, const char *state, int64_t n)
{
    if (njobs == jobs_cap) {
        jobs_cap = jobs_cap != 0 ? jobs_cap * 2 : 32;
        jobs = ad_realloc(jobs, jobs_cap * sizeof(*jobs));
    }
    jobs[njobs++] = (struct job_count){ad_strdup(type), state, n};
}

struct waiting_count {
    const char *reason;
    int64_t n;
};
static struct waiting_count waiting[AD_METRICS_WAITING_MAX];

void ad_metrics_waiting_set(const char *reason, int64_t n)
{
    size_t i = 0;
    while (i < AD_METRICS_WAITING_MAX && waiting[i].reason != NULL && strcmp(waiting[i].reason, reason) != 0)
        i++;
    if (i < AD_METRICS_WAITING_MAX)
        waiting[i] = (struct waiting_count){reason, n};
}

/* ---- rendering ---- */

/* A label value as the text format wants it: backslash, double quote and line feed escaped. */
static void label_value(struct ad_buf *b, const char *s)
{
    const char *run = s;
    for (; *s != '\0'; s++) {
        const char *esc = *s == '\\' ? "\\\\" : *s == '"' ? "\\\"" : *s == '\n' ? "\\n" : NULL;
        if (esc == NULL)
            continue;
        ad_buf_append(b, run, (size_t)(s - run));
        ad_buf_str(b, esc);
        run = s + 1;
    }
    ad_buf_append(b, run, (size_t)(s - run));
}

static void head(struct ad_buf *b, const char *name, const char *type, const char *help)
{
    ad_buf_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void counter(struct ad_buf *b, const char *name, const char *help, uint64_t v)
{
    head(b, name, "counter", help);
    ad_buf_printf(b, "%s %" PRIu64 "\n", name, v);
}

static uint64_t load(const uint64_t *p)
{
    return __atomic_load_n(p, __ATOMIC_RELAXED);
}

static void hist_render(struct ad_buf *b, const struct hist *h)
{
    head(b, h->name, "histogram", h->help);
    uint64_t cum = 0;
    for (size_t i = 0; i < h->nbounds; i++) {
        cum += load(&h->counts[i]);
        ad_buf_printf(b, "%s_bucket{le=\"%g\"} %" PRIu64 "\n", h->name, h->bounds[i], cum);
    }
    cum += load(&h->counts[h->nbounds]);
    /* Read apart from the buckets, the count could run ahead of them: +Inf is their total, as it must be. */
    ad_buf_printf(b, "%s_bucket{le=\"+Inf\"} %" PRIu64 "\n", h->name, cum);
    ad_buf_printf(b, "%s_sum %.9g\n", h->name, (double)load(&h->sum) * h->scale);
    ad_buf_printf(b, "%s_count %" PRIu64 "\n", h->name, cum);
}

void ad_metrics_render(struct ad_buf *b, const char *version, const char *commit, const struct ad_metrics_gauge *g,
                       size_t ng)
{
    head(b, "acceptd_build_info", "gauge", "Always 1; the labels name the running build.");
    AD_BUF_LIT(b, "acceptd_build_info{version=\"");
    label_value(b, version);
    AD_BUF_LIT(b, "\",commit=\"");
    label_value(b, commit);
    AD_BUF_LIT(b, "\"} 1\n");
    for (size_t i = 0; i < ng; i++) {
        head(b, g[i].name, "gauge", g[i].help);
        ad_buf_printf(b, "%s %zu\n", g[i].name, g[i].value);
    }

    head(b, "acceptd_http_requests_total", "counter",
         "Requests answered, by route template (\"unmatched\" when none matched) and status code.");
    for (size_t i = 0; i < req_cap; i++) {
        if (req_slots[i].route == NULL)
            continue;
        AD_BUF_LIT(b, "acceptd_http_requests_total{route=\"");
        label_value(b, req_slots[i].route);
        ad_buf_printf(b, "\",code=\"%d\"} %" PRIu64 "\n", req_slots[i].status, req_slots[i].n);
    }
    hist_render(b, &submit_hist);
    hist_render(b, &batch_hist);
    hist_render(b, &commit_hist);

    head(b, "acceptd_jobs", "gauge", "Jobs in the store by type and state (expired jobs not counted).");
    for (size_t i = 0; i < njobs; i++) {
        AD_BUF_LIT(b, "acceptd_jobs{type=\"");
        label_value(b, jobs[i].type);
        AD_BUF_LIT(b, "\",state=\"");
        label_value(b, jobs[i].state);
        ad_buf_printf(b, "\"} %" PRId64 "\n", jobs[i].n);
    }

    head(b, "acceptd_jobs_waiting", "gauge",
         "Queued jobs that are due but held back by their queue's settings, by reason (the queues this node has seen "
         "limited).");
    for (size_t i = 0; i < AD_METRICS_WAITING_MAX && waiting[i].reason != NULL; i++)
        ad_buf_printf(b, "acceptd_jobs_waiting{reason=\"%s\"} %" PRId64 "\n", waiting[i].reason, waiting[i].n);

    counter(b, "acceptd_leases_granted_total", "Jobs leased to workers, hand-offs included.", leases_granted);
    counter(b, "acceptd_leases_expired_total", "Leases that ran out before their worker reported.", leases_expired);
    counter(b, "acceptd_leases_handed_off_total",
            "Jobs handed at submit to a worker whose lease request was waiting for work.", leases_handed_off);

    head(b, "acceptd_webhook_deliveries_total", "counter",
         "Webhook and callback delivery attempts by outcome: delivered, retrying (failed, will be sent again), dead "
         "(failed for the last time).");
    for (int i = 0; i < AD_METRICS_WH__COUNT; i++)
        ad_buf_printf(b, "acceptd_webhook_deliveries_total{outcome=\"%s\"} %" PRIu64 "\n", webhook_outcome_names[i],
                      load(&webhook_outcomes[i]));
    hist_render(b, &webhook_hist);

    counter(b, "acceptd_rate_limited_total", "Requests refused with 429 for their key's rate limit.", rate_limited);
    counter(b, "acceptd_store_errors_total", "Store operations that failed for a reason of the store's own.",
            load(&store_errors));
    counter(b, "acceptd_trace_spans_exported_total", "Spans the trace collector accepted (docs/tracing.md).",
            load(&trace_spans[AD_METRICS_SPANS_EXPORTED]));
    counter(b, "acceptd_trace_spans_dropped_total",
            "Spans lost: the export queue was full, or the collector failed or did not answer in time.",
            load(&trace_spans[AD_METRICS_SPANS_DROPPED]));
    counter(b, "acceptd_trace_exports_failed_total", "Export requests the collector failed or did not answer.",
            load(&trace_spans[AD_METRICS_SPANS_EXPORT_FAILED]));
    counter(b, "acceptd_schedule_fires_total", "Schedule runs that made a job, on this node.",
            load(&schedule_events[AD_METRICS_SCHED_FIRES]));
    counter(b, "acceptd_schedule_skips_total",
            "Schedule fire times skipped on this node: by the overlap policy, or missed past the catch-up window.",
            load(&schedule_events[AD_METRICS_SCHED_PASSED_OVER]));
    counter(b, "acceptd_schedule_catchups_total", "Missed schedule fire times run late, within the catch-up window.",
            load(&schedule_events[AD_METRICS_SCHED_CATCHUPS]));
}
