/*
 * api_wait.c - a request held until its job's cache entry changes the way it waits for, or a timer runs out:
 * the one mechanism behind long polls (GET /v1/jobs/{id}?wait=), Prefer: wait on a submit and the AIP-151
 * WaitOperation.
 *
 * The wait hangs on the entry's waiters (cache.h) and on one timer; whichever comes first ends it, and a client
 * that goes away ends it silently. The handler says when a change ends the wait (keep) and how to answer (finish);
 * this file owns the rest: the watch, the timer, the pending request and the memory. It does not read the store:
 * a wait whose entry left the cache is finished with no entry, and the handler reads the job back.
 */
#include "api/api_int.h"

#include <stdlib.h>

static void wait_end(struct ad_api_wait *w, struct ad_entry *e, int timed_out)
{
    struct ad_request *r = w->r;
    ad_cache_unwatch(&w->w);
    ad_timer_cancel(&w->timer);
    ad_pending_take(w->pend);
    w->finish(w, r, e, timed_out);
    free(w);
}

static void wait_wake(struct ad_waiter *waiter, struct ad_entry *e)
{
    struct ad_api_wait *w = H2O_STRUCT_FROM_MEMBER(struct ad_api_wait, w, waiter);
    if (e != NULL && w->keep(w, e)) {
        ad_cache_watch(e, &w->w);
        return;
    }
    wait_end(w, e, 0);
}

static void wait_timeout(struct ad_timer *t)
{
    wait_end(H2O_STRUCT_FROM_MEMBER(struct ad_api_wait, timer, t), NULL, 1);
}

static void wait_gone(struct ad_pending *p)
{
    struct ad_api_wait *w = p->owner;
    ad_pending_take(p);
    ad_cache_unwatch(&w->w);
    ad_timer_cancel(&w->timer);
    free(w);
}

void ad_api_wait_start(struct ad_api_wait *w, struct ad_request *r, struct ad_entry *e, int64_t ms)
{
    w->r = r;
    w->w.wake = wait_wake;
    w->timer.cb = wait_timeout;
    w->pend = ad_pending_new(r->req, w, wait_gone);
    ad_cache_watch(e, &w->w);
    ad_timer_arm(&w->timer, ad_mono_ms() + ms);
}
