/*
 * bulk.h - bulk cancel and retry by filter (POST /v1/jobs:cancel, POST /v1/jobs:retry): one page of the walk over
 * the matching jobs of a tenant and type, as an operation the writer applies like any other.
 *
 * A page examines at most AD_BULK_PAGE of the type's jobs (store.h, job_bulk_page) and applies to each matching one
 * the core's own single-job operation, nested inside the page (ad_writer_apply_nested): a cancel (core.h,
 * ad_cancel_op) or a retry (ad_retry_op). So each change is checked by the state machine, logged, put in the webhook
 * outbox and published exactly as a single cancel or retry is, and a page is all or nothing. The caller walks page
 * after page, handing in the next once the last has committed, so that other writes get in between and no
 * transaction holds the store for long. What it does not do: walk by itself (api_bulk_control.c drives the pages
 * and decides when to stop).
 */
#ifndef AD_BULK_H
#define AD_BULK_H

#include "core/core.h"

/* Jobs a page examines: a page's transaction is a few milliseconds of the writer's time. */
#define AD_BULK_PAGE 256

enum ad_bulk_action { AD_BULK_CANCEL, AD_BULK_RETRY };

/* One page of a bulk cancel or retry of the jobs that match q (its strings are the caller's and outlive the op),
 * from cseq after up to upto (0 on the first page: the store sets it, store.h). A job matched is cancelled when it is
 * not final (a running job gets its cancel request; one that has it already is left as it is), or retried (as a new
 * job with retryOf) when it is failed or cancelled. Out: matched, changed, and next (0: the walk is over) with upto
 * for the next page. The jobs changed, and the new jobs of retries, are the op's changes. */
struct ad_bulk_op {
    struct ad_op op;
    enum ad_bulk_action action;
    struct ad_bulk_query q;
    int64_t after, upto;
    int64_t now;
    int64_t next;
    size_t matched, changed;
    struct ad_op **items; /* the single-job ops applied, owned by the page */
    size_t nitems;
    void *ctx;
};

struct ad_bulk_op *ad_bulk_op_new(void);

#endif
