/*
 * metrics.h - the process's counters, gauges and histograms, and their rendering in the Prometheus text format
 * (version 0.0.4) for GET /metrics.
 *
 * Every layer reports its events here, so the registry sits in common/ and knows nothing of jobs, HTTP or the
 * store: it keeps numbers under names and label values it is given. Counters start at zero with the process.
 * Updates are plain integer additions on the event loop thread; the few the writer thread makes (commits, store
 * errors) are relaxed atomics. Histograms have fixed buckets. Nothing here allocates on the hot path except the
 * first request of a (route, status) pair.
 */
#ifndef AD_METRICS_H
#define AD_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include "common/util.h"

/* Event loop thread. */
/* A request answered: route is its route template ("/v1/jobs/{id}", never the raw path), status its status. */
void ad_metrics_request(const char *route, int status);
/* A submit answered 202, seconds after the request came in. */
void ad_metrics_submit_latency(double seconds);
/* Leases: granted to a worker (hand-offs included), a running job's lease expired, a job handed to a parked
 * lease request the moment it was submitted. */
void ad_metrics_lease_granted(size_t n);
void ad_metrics_lease_expired(void);
void ad_metrics_lease_handed_off(void);
/* A webhook delivery attempt ended after seconds (0 when it was refused before sending): delivered, failed and to
 * be tried again, or failed for the last time (a dead letter). Any thread (relaxed atomics). */
enum ad_metrics_webhook { AD_METRICS_WH_DELIVERED, AD_METRICS_WH_RETRYING, AD_METRICS_WH_DEAD, AD_METRICS_WH__COUNT };
void ad_metrics_webhook(enum ad_metrics_webhook outcome, double seconds);
/* A request refused for its key's rate limit. */
void ad_metrics_rate_limited(void);
/* Jobs by type and state: replaced whole from the store's counts (ad_metrics_jobs_reset, then one _add per
 * (type, state) the store has). */
void ad_metrics_jobs_reset(void);
void ad_metrics_jobs_add(const char *type, const char *state, int64_t n);
/* Queued jobs held back by their queue's settings, by reason (core/queues.h): set whole with each count of the jobs.
 * reason is a static string; at most AD_METRICS_WAITING_MAX reasons. Event loop thread. */
#define AD_METRICS_WAITING_MAX 8
void ad_metrics_waiting_set(const char *reason, int64_t n);
/* A job changed (published): the counts above may be stale. _take_changed says whether one did since it was
 * last called. */
void ad_metrics_jobs_changed(void);
int ad_metrics_jobs_take_changed(void);

/* Any thread (relaxed atomics). */
/* A batch of n operations committed (or failed to) in seconds. */
void ad_metrics_commit(size_t n, double seconds);
/* A store operation failed for a reason of the store's own (not a refused request). */
void ad_metrics_store_error(void);
/* Trace export (core/tracer.h): n spans the collector took, n spans lost, or one export request that failed. */
enum ad_metrics_spans {
    AD_METRICS_SPANS_EXPORTED,
    AD_METRICS_SPANS_DROPPED,
    AD_METRICS_SPANS_EXPORT_FAILED,
    AD_METRICS_SPANS__COUNT
};
void ad_metrics_trace_spans(enum ad_metrics_spans what, size_t n);
/* Schedules (core/schedules.h), writer thread: n fire times that made a job, skipped (by the overlap policy, or
 * missed past the catch-up window), or run late within the catch-up window. */
enum ad_metrics_schedule {
    AD_METRICS_SCHED_FIRES,
    AD_METRICS_SCHED_PASSED_OVER,
    AD_METRICS_SCHED_CATCHUPS,
    AD_METRICS_SCHED__COUNT
};
void ad_metrics_schedule(enum ad_metrics_schedule what, size_t n);

/* A gauge whose value the caller reads at scrape time. */
struct ad_metrics_gauge {
    const char *name, *help;
    size_t value;
};

/* Append every metric to b in the text format 0.0.4: build info (version, commit), the caller's gauges, then
 * the registry. Event loop thread. */
void ad_metrics_render(struct ad_buf *b, const char *version, const char *commit, const struct ad_metrics_gauge *g,
                       size_t ng);

#endif
