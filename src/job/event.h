/*
 * event.h - the job event log: which change of a job makes which Server-Sent Event, and what it carries.
 *
 * Pure functions, shared by the core (which appends each event to the log inside the change's transaction)
 * and the SSE handlers (which send them). Nothing here does I/O or knows HTTP; the framing of an event on the
 * wire is sse.h's.
 */
#ifndef AD_EVENT_H
#define AD_EVENT_H

#include "job/job.h"
#include "common/util.h"

enum ad_event_kind {
    AD_EVK_NONE = 0, /* the change makes no event (a heartbeat without news, a cancel request) */
    AD_EVK_STATUS,   /* the status changed (a new job counts as a change to queued) */
    AD_EVK_PROGRESS, /* progress or message changed, status did not */
    AD_EVK_DONE      /* the job reached a terminal status: the last event */
};

/* The state of a job before a change, as far as events care. */
struct ad_event_prev {
    enum ad_status status; /* AD_STATUS__COUNT for a job that did not exist */
    int progress;
    char *message; /* owned copy */
};

/* Capture j (NULL: a job being created) before changing it; release with ad_event_prev_free. */
void ad_event_prev_take(struct ad_event_prev *p, const struct ad_job *j);
void ad_event_prev_free(struct ad_event_prev *p);

/* The event a change from prev to j makes. A terminal status wins over everything else. */
enum ad_event_kind ad_event_kind_of(const struct ad_event_prev *prev, const struct ad_job *j);

/* "status", "progress", "done"; NULL for AD_EVK_NONE. Static storage. */
const char *ad_event_name(enum ad_event_kind k);

/* The data of a status or progress event: {"id","status","progress","message","lastUpdatedAt"}.
 * Returns 0 or -1 when b's cap is hit. (A done event carries the whole job, ad_job_render.) */
int ad_event_render_brief(const struct ad_job *j, struct ad_buf *b);
/* j as the events made from it rather than stored show it (a copy whose strings are j's): its first event, as it
 * was created (queued, progress and message unknown, updated at created_at), and the running event of the lease
 * at j->started_seq (running, progress and message unknown, updated at started_at). */
struct ad_job ad_event_created_view(const struct ad_job *j);
struct ad_job ad_event_started_view(const struct ad_job *j);

#endif
