/*
 * hub.c - publishing committed changes (hub.h): the cache, the listeners, lease and runAt timers, the
 * retention sweep and the run-time estimates behind Retry-After. Event loop thread only. The writer hands it every
 * job a batch changed (publish_committed); the cluster follower every change it reads.
 *
 * What this file does not do: answer HTTP (api/ does, through the listeners it registers) or write to the
 * store (every change is an operation for the writer, core/writer.h).
 */
#include "hub/hub.h"
#include "common/timer.h"
#include "common/metrics.h"
#include "core/core.h"
#include "core/queues.h"
#include "core/writer.h"
#include "hub/cluster.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define AD_TYPE_STATS_MAX 256
#define AD_DEFAULT_RUN_MS 5000.0
#define AD_RECHECK_MS 1000

struct ad_hub ad_hub;
static struct ad_timer sweep_timer;

/* ---- listeners ---- */

static const struct ad_hub_listener *listeners[AD_HUB_LISTENERS_MAX];
static size_t nlisteners;

void ad_hub_listen(const struct ad_hub_listener *l)
{
    if (nlisteners == AD_HUB_LISTENERS_MAX)
        abort(); /* a wiring mistake, not a run-time condition */
    listeners[nlisteners++] = l;
}

void ad_hub_work(const char *tenant, const char *type)
{
    for (size_t i = 0; i < nlisteners; i++)
        if (listeners[i]->work != NULL)
            listeners[i]->work(tenant, type);
}

/* The seq of the newest change handed to the event listeners; at start, the store's newest (ad_hub_start). */
static int64_t event_seq;

void ad_hub_event(const struct ad_job *j, const char *body, size_t len)
{
    if (j->seq > event_seq)
        event_seq = j->seq;
    for (size_t i = 0; i < nlisteners; i++)
        if (listeners[i]->event != NULL)
            listeners[i]->event(j, body, len);
}

int64_t ad_hub_event_seq(void)
{
    return event_seq;
}

/* ---- run-time estimates for Retry-After ---- */

static struct {
    char *type;
    double avg_ms;
} type_stats[AD_TYPE_STATS_MAX];
static size_t ntype_stats;

static double *type_avg(const char *type, int create)
{
    for (size_t i = 0; i < ntype_stats; i++)
        if (strcmp(type_stats[i].type, type) == 0)
            return &type_stats[i].avg_ms;
    if (!create || ntype_stats == AD_TYPE_STATS_MAX)
        return NULL;
    type_stats[ntype_stats].type = ad_strdup(type);
    type_stats[ntype_stats].avg_ms = AD_DEFAULT_RUN_MS;
    return &type_stats[ntype_stats++].avg_ms;
}

int ad_hub_retry_after(const struct ad_job *j)
{
    int64_t now = ad_now_ms();
    double *avg = type_avg(j->type, 0);
    double remaining = avg != NULL ? *avg : AD_DEFAULT_RUN_MS;
    if (j->status == AD_RUNNING && j->started_at != 0) {
        double elapsed = (double)(now - j->started_at);
        if (j->progress > 0)
            remaining = elapsed * (100 - j->progress) / j->progress;
        else
            remaining -= elapsed;
    } else if (j->run_at > now) {
        remaining += (double)(j->run_at - now);
    }
    double secs = ceil(remaining / 2000.0);
    return secs < 1 ? 1 : secs > 30 ? 30 : (int)secs;
}

/* ---- timers for leases and runAt ---- */

struct lease_timer {
    struct ad_timer t;
    char *id, *lease_id;
};

/* Monotonic deadline for a wall-clock time, a millisecond late: the two clocks are read apart and in whole
 * milliseconds, so without it a timer could fire just before wall_ms, when the job is not yet leasable (runAt)
 * or its lease not yet over, and the kick or check it makes would find nothing to do. */
static int64_t mono_at(int64_t wall_ms)
{
    return ad_mono_ms() + (wall_ms - ad_now_ms()) + 1;
}

static void lease_timer_fire(struct ad_timer *t);

static int holds_lease(const struct ad_job *j, const char *lease_id)
{
    return j->status == AD_RUNNING && j->lease_id != NULL && strcmp(j->lease_id, lease_id) == 0;
}

/*
 * Check lease lease_id of job id at monotonic time at. The job's cache entry e (NULL: none), while it shows that
 * lease, holds the timer (ad_entry.lease_timer), so that the change ending the lease cancels it
 * (follow_lease_timer). Without that, every finished lease stayed in memory until its expiry and then cost the
 * writer a check that changed nothing. A timer whose entry was evicted just fires and makes that check.
 */
static void arm_lease_check(struct ad_entry *e, const char *id, const char *lease_id, int64_t at)
{
    int linked = e != NULL && holds_lease(e->job, lease_id);
    if (linked && e->lease_timer != NULL)
        return; /* the entry's timer checks this lease, at its expiry (follow_lease_timer) */
    struct lease_timer *lt = ad_calloc(1, sizeof(*lt));
    lt->id = ad_strdup(id);
    lt->lease_id = ad_strdup(lease_id);
    lt->t.cb = lease_timer_fire;
    ad_timer_arm(&lt->t, at);
    if (linked)
        e->lease_timer = &lt->t;
}

static void arm_lease_timer(struct ad_entry *e, const struct ad_job *j)
{
    arm_lease_check(e, j->id, j->lease_id, mono_at(j->lease_expires_at));
}

static void lease_timer_free(struct lease_timer *lt)
{
    free(lt->id);
    free(lt->lease_id);
    free(lt);
}

/* Keep the lease timer e holds in step with e's new version: cancelled once the job no longer holds that lease,
 * else moved to the lease's expiry, which a heartbeat may have moved. Later, the timer would fire at the old one
 * and cost the writer a check that finds the lease still live; sooner (a heartbeat with a shorter leaseSeconds),
 * the lease would run out long before anything looked. */
static void follow_lease_timer(struct ad_entry *e)
{
    if (e->lease_timer == NULL)
        return;
    struct lease_timer *lt = AD_CONTAINER_OF(e->lease_timer, struct lease_timer, t);
    if (holds_lease(e->job, lt->lease_id)) {
        int64_t at = mono_at(e->job->lease_expires_at);
        if (at != lt->t.at)
            ad_timer_arm(&lt->t, at);
        return;
    }
    ad_timer_cancel(&lt->t);
    lease_timer_free(lt);
    e->lease_timer = NULL;
}

/* A change the check made was published before this runs, like any other (publish_committed); a lease it found
 * still live (a heartbeat moved it) is checked again at its new expiry. */
static void expire_done(struct ad_op *op)
{
    struct ad_expire_op *x = (struct ad_expire_op *)op;
    if (op->err == AD_E_OK) {
        if (x->changed)
            ad_metrics_lease_expired();
        if (!x->changed && x->job != NULL && holds_lease(x->job, x->lease_id))
            arm_lease_timer(ad_cache_get(x->job->id), x->job);
    } else if (op->err != AD_E_NOT_FOUND) {
        /* The store is away: look again soon, or the lease would never run out. */
        arm_lease_check(ad_cache_get(x->id), x->id, x->lease_id, ad_mono_ms() + AD_RECHECK_MS);
    }
    ad_op_free(op);
}

static void lease_timer_fire(struct ad_timer *t)
{
    struct lease_timer *lt = AD_CONTAINER_OF(t, struct lease_timer, t);
    struct ad_entry *e = ad_cache_get(lt->id);
    if (e != NULL && e->lease_timer == t)
        e->lease_timer = NULL;
    struct ad_expire_op *x = ad_expire_op_new();
    x->id = lt->id;
    x->lease_id = lt->lease_id;
    x->now = ad_now_ms();
    x->op.done = expire_done;
    free(lt);
    ad_writer_submit(&x->op);
}

/*
 * runAt. A job queued with a future runAt gets a timer that kicks a parked lease of its tenant and type when it
 * comes due. At most limits.scheduledTimers of them are in memory at once; past that, jobs wait in the store
 * behind a horizon. Every queued job whose key (run_at, cseq) is at or before the horizon has its timer (or was
 * kicked); when the horizon comes due, runat_refill reads the next page past it from the store (job_scheduled,
 * an index range, never a scan). So a million jobs scheduled for tomorrow hold a page of timers, not a million,
 * and the ones a restart finds are read the same way.
 */
struct runat_timer {
    struct ad_timer t;
    struct ad_list link; /* in runat.armed */
    int64_t run_at, cseq;
    char *tenant, *type;
};

/* Jobs read from the store per refill: one refill holds the event loop for about a millisecond per 200. */
#define AD_RUNAT_PAGE 1000

static struct {
    struct ad_list armed; /* struct runat_timer */
    size_t n;
    int64_t horizon_at, horizon_cseq; /* both INT64_MAX: every scheduled job has its timer */
    struct ad_timer refill;           /* armed at horizon_at while there is a horizon */
    /* While a refill's page is being read off the loop (a store whose reads may block), jobs scheduled past the
     * horizon are armed at once, since the page may have been read before they committed; their cseqs are kept
     * so that the page does not arm them twice. A horizon brought down meanwhile makes the page stale. */
    int reading, stale;
    int64_t *meanwhile;
    size_t nmeanwhile, capmeanwhile;
} runat = {.armed = {&runat.armed, &runat.armed}, .horizon_at = INT64_MAX, .horizon_cseq = INT64_MAX};

static int runat_beyond(int64_t run_at, int64_t cseq)
{
    return run_at > runat.horizon_at || (run_at == runat.horizon_at && cseq > runat.horizon_cseq);
}

static void runat_unlink(struct runat_timer *rt)
{
    ad_list_unlink(&rt->link);
    runat.n--;
}

static void runat_free(struct runat_timer *rt)
{
    free(rt->tenant);
    free(rt->type);
    free(rt);
}

static void runat_fire(struct ad_timer *t)
{
    struct runat_timer *rt = AD_CONTAINER_OF(t, struct runat_timer, t);
    runat_unlink(rt);
    ad_hub_work(rt->tenant, rt->type);
    runat_free(rt);
}

static void runat_arm(const struct ad_job *j)
{
    struct runat_timer *rt = ad_calloc(1, sizeof(*rt));
    rt->run_at = j->run_at;
    rt->cseq = j->cseq;
    rt->tenant = ad_strdup(j->tenant);
    rt->type = ad_strdup(j->type);
    rt->t.cb = runat_fire;
    ad_list_insert(&runat.armed, &rt->link);
    runat.n++;
    ad_timer_arm(&rt->t, mono_at(j->run_at));
}

/* Put the horizon at (run_at, cseq); the refill runs when it comes due (at once for one already due). */
static void runat_set_horizon(int64_t run_at, int64_t cseq)
{
    runat.horizon_at = run_at;
    runat.horizon_cseq = cseq;
    int64_t at = mono_at(run_at), now = ad_mono_ms();
    ad_timer_arm(&runat.refill, at > now ? at : now);
}

/* A job that has just become queued with a future runAt. */
static void runat_schedule(const struct ad_job *j)
{
    if (runat_beyond(j->run_at, j->cseq) && !runat.reading)
        return; /* a refill will read it */
    if (runat.n < ad_hub.cfg->scheduled_timers) {
        runat_arm(j);
        if (runat.reading) {
            if (runat.nmeanwhile == runat.capmeanwhile) {
                runat.capmeanwhile = runat.capmeanwhile != 0 ? 2 * runat.capmeanwhile : 16;
                runat.meanwhile = ad_realloc(runat.meanwhile, runat.capmeanwhile * sizeof(*runat.meanwhile));
            }
            runat.meanwhile[runat.nmeanwhile++] = j->cseq;
        }
    } else if (!runat_beyond(j->run_at, j->cseq)) {
        runat_set_horizon(j->run_at, j->cseq - 1); /* the timers already armed stay under the horizon */
        runat.stale = runat.reading;
    } else {
        runat.stale = 1; /* no room, and the page being read may not hold it: read again */
    }
}

static int runat_armed_meanwhile(int64_t cseq)
{
    for (size_t i = 0; i < runat.nmeanwhile; i++)
        if (runat.meanwhile[i] == cseq)
            return 1;
    return 0;
}

/* Arm (or kick, when due) the jobs of a page read past the horizon, in its order, while there is room; the new
 * horizon is the last one taken, or none when the page was the end. */
static void runat_take_page(const struct ad_job_list *l, int limit)
{
    int64_t now = ad_now_ms();
    size_t i = 0;
    for (; i < l->n; i++) {
        const struct ad_job *j = l->items[i];
        if (runat_armed_meanwhile(j->cseq))
            continue;
        if (j->run_at <= now)
            ad_hub_work(j->tenant, j->type);
        else if (runat.n < ad_hub.cfg->scheduled_timers)
            runat_arm(j);
        else
            break;
    }
    if (i == 0 && l->n != 0) {
        ad_timer_arm(&runat.refill, ad_mono_ms() + 1); /* full of timers that are due now and about to fire */
    } else if (i < l->n || l->n == (size_t)limit) {
        runat_set_horizon(l->items[i - 1]->run_at, l->items[i - 1]->cseq);
    } else {
        runat.horizon_at = runat.horizon_cseq = INT64_MAX;
        ad_timer_cancel(&runat.refill);
    }
}

/* A refill's page: the jobs past the horizon it was given, at most limit of them, soonest first. */
struct runat_read {
    struct ad_op op;
    int64_t horizon_at, horizon_cseq;
    int limit;
    struct ad_job_list l;
};

static ad_err runat_read_apply(struct ad_op *op, struct ad_conn *c)
{
    struct runat_read *rr = (struct runat_read *)op;
    return ad_hub.store->ops->job_scheduled(c, rr->horizon_at, rr->horizon_cseq, rr->limit, &rr->l);
}

static void runat_read_done(struct ad_op *op)
{
    struct runat_read *rr = (struct runat_read *)op;
    runat.reading = 0;
    if (op->err != AD_E_OK)
        ad_timer_arm(&runat.refill, ad_mono_ms() + AD_RECHECK_MS); /* the store is away: look again soon */
    else if (runat.stale)
        ad_timer_arm(&runat.refill, ad_mono_ms()); /* the horizon moved while reading: read from it again */
    else
        runat_take_page(&rr->l, rr->limit);
    runat.stale = 0;
    runat.nmeanwhile = 0;
    ad_op_free(op);
}

static void runat_read_destroy(struct ad_op *op)
{
    struct runat_read *rr = (struct runat_read *)op;
    ad_job_list_free(&rr->l);
    free(rr);
}

/* The horizon came due: read the next page past it (ad_hub_read: off the loop where reads may block). */
static void runat_refill(struct ad_timer *t)
{
    if (runat.reading)
        return; /* the read in flight ends with what is due (runat_read_done) */
    /* The timers past the horizon (armed before it came down) are read again below: drop them first, so that
     * none is kept twice. */
    for (struct ad_list *l = runat.armed.next; l != &runat.armed;) {
        struct runat_timer *rt = AD_CONTAINER_OF(l, struct runat_timer, link);
        l = l->next;
        if (runat_beyond(rt->run_at, rt->cseq)) {
            ad_timer_cancel(&rt->t);
            runat_unlink(rt);
            runat_free(rt);
        }
    }
    size_t room = ad_hub.cfg->scheduled_timers - runat.n;
    if (room == 0) {
        ad_timer_arm(&runat.refill, ad_mono_ms() + 1); /* full of timers that are due now and about to fire */
        return;
    }
    struct runat_read *rr = ad_calloc(1, sizeof(*rr));
    rr->horizon_at = runat.horizon_at;
    rr->horizon_cseq = runat.horizon_cseq;
    rr->limit = room < AD_RUNAT_PAGE ? (int)room : AD_RUNAT_PAGE;
    rr->op.apply = runat_read_apply;
    rr->op.done = runat_read_done;
    rr->op.destroy = runat_read_destroy;
    runat.reading = 1;
    ad_hub_read(&rr->op);
}

size_t ad_hub_runat_timers(void)
{
    return runat.n;
}

/* ---- publishing committed changes ---- */

struct ad_entry *ad_hub_publish(struct ad_job *job)
{
    /* The version this one replaces, if it was cached: what changed decides the timers and kicks below. */
    struct ad_job *prev;
    int changed;
    struct ad_entry *e = ad_cache_put(job, &changed, &prev);
    if (changed) {
        ad_metrics_jobs_changed();
        enum ad_status prev_status = prev != NULL ? prev->status : AD_STATUS__COUNT;
        const struct ad_job *j = e->job;
        for (size_t i = 0; i < nlisteners; i++) {
            if (listeners[i]->changed != NULL)
                listeners[i]->changed(j->tenant);
            if (listeners[i]->published != NULL)
                listeners[i]->published(j);
        }
        if (ad_cluster_enabled())
            ad_cluster_changed(); /* the change streams follow the store's seq order (cluster.c) */
        else
            ad_hub_event(j, e->body, e->len);
        /* Newly queued, or queued still with its runAt moved (a debounced submit, core.c): the timer of the
         * old runAt, if any, fires in vain. A job waiting for dependencies (core/deps.h) is nobody's work until the
         * change that ends its wait. */
        if (j->status == AD_QUEUED && j->deps == 0 &&
            (prev_status != AD_QUEUED || prev->run_at != j->run_at || prev->deps != 0)) {
            if (j->run_at > ad_now_ms())
                runat_schedule(j);
            else
                ad_hub_work(j->tenant, j->type);
        } else if (j->status != AD_RUNNING && (prev == NULL || prev_status == AD_RUNNING) &&
                   ad_queues_limited(j->tenant, j->type)) {
            /* A job of a limited queue ended (on this node or, unknown here before, on another): a slot may be
             * free for a lease parked on the queue's limit, or its group's. */
            ad_queues_group_freed(j->tenant, j->type, j->group);
            ad_hub_work(j->tenant, j->type);
        }
        /* A running job's entry holds the timer of its lease; one read back from the store after an eviction
         * gets its own here (the evicted entry's still fires, at the expiry it knew, and checks). */
        follow_lease_timer(e);
        if (j->status == AD_RUNNING && j->lease_id != NULL && e->lease_timer == NULL)
            arm_lease_timer(e, j);
        if (ad_status_terminal(j->status) && !ad_status_terminal(prev_status) && j->started_at != 0 &&
            j->status == AD_SUCCEEDED) {
            double *avg = type_avg(j->type, 1);
            if (avg != NULL)
                *avg = 0.8 * *avg + 0.2 * (double)(j->finished_at - j->started_at);
        }
    }
    ad_job_free(prev);
    return e;
}

/* The writer's publish (ad_writer_set_publish): every job an operation changed comes here once its batch has
 * committed, before the operation's done() answers with the entries. The cache is held from the first until
 * published_settled, so that publishing an operation's second job cannot evict the entry of its first. */
static void *publish_committed(struct ad_job *job)
{
    ad_cache_hold(1);
    return ad_hub_publish(job);
}

static void published_settled(void)
{
    ad_cache_hold(0);
}

/* A cache miss being read (ad_hub_lookup). */
struct lookup_read {
    struct ad_op op;
    char *tenant, *id;
    struct ad_job *job;
    void (*found)(void *arg, ad_err err, struct ad_entry *e);
    void *arg;
};

static ad_err lookup_apply(struct ad_op *op, struct ad_conn *c)
{
    struct lookup_read *lk = (struct lookup_read *)op;
    return ad_hub.store->ops->job_get(c, NULL, lk->id, &lk->job);
}

static void lookup_destroy(struct ad_op *op)
{
    struct lookup_read *lk = (struct lookup_read *)op;
    ad_job_free(lk->job);
    free(lk->tenant);
    free(lk->id);
    free(lk);
}

/* A job read from the store into the cache (unless the cache got a newer version meanwhile), checked against
 * the tenant (takes ownership of j). */
static ad_err lookup_settle(const char *tenant, struct ad_job *j, struct ad_entry **out)
{
    int changed;
    struct ad_entry *e = ad_cache_put(j, &changed, NULL);
    /* In cluster mode a read can bring another node's change in before the follower does, which then changes
     * nothing here: what follows a job's published versions hears of it now. */
    for (size_t i = 0; changed && i < nlisteners; i++)
        if (listeners[i]->published != NULL)
            listeners[i]->published(e->job);
    *out = NULL;
    if (tenant != NULL && strcmp(e->job->tenant, tenant) != 0)
        return AD_E_NOT_FOUND;
    *out = e;
    return AD_E_OK;
}

static void lookup_done(struct ad_op *op)
{
    struct lookup_read *lk = (struct lookup_read *)op;
    struct ad_entry *e = NULL;
    ad_err err = op->err;
    if (err == AD_E_OK) {
        err = lookup_settle(lk->tenant, lk->job, &e);
        lk->job = NULL;
    }
    lk->found(lk->arg, err, e);
    ad_op_free(op);
}

int ad_hub_lookup(const char *tenant, const char *id, ad_err *err, struct ad_entry **out,
                  void (*found)(void *arg, ad_err err, struct ad_entry *e), void *arg)
{
    struct ad_entry *e = ad_cache_get(id);
    *out = NULL;
    if (e != NULL) {
        int mine = tenant == NULL || strcmp(e->job->tenant, tenant) == 0;
        *out = mine ? e : NULL;
        *err = mine ? AD_E_OK : AD_E_NOT_FOUND;
        return 1;
    }
    if (!ad_hub.store->ops->reads_may_block) {
        /* SQLite: the read ad_hub_read would run inline, without a read op to allocate (reader.h). */
        struct ad_job *j;
        *err = ad_hub.store->ops->job_get(ad_hub.rconn, NULL, id, &j);
        if (*err == AD_E_OK)
            *err = lookup_settle(tenant, j, out);
        return 1;
    }
    struct lookup_read *lk = ad_calloc(1, sizeof(*lk));
    lk->op.apply = lookup_apply;
    lk->op.done = lookup_done;
    lk->op.destroy = lookup_destroy;
    lk->tenant = tenant != NULL ? ad_strdup(tenant) : NULL;
    lk->id = ad_strdup(id);
    lk->found = found;
    lk->arg = arg;
    ad_hub_read(&lk->op);
    return 0;
}

/* ---- retention sweeper ---- */

static void sweep_done(struct ad_op *op)
{
    struct ad_sweep_op *x = (struct ad_sweep_op *)op;
    /* A full batch means more is due: go again at once, else wait for the next period. */
    int64_t next = x->done >= AD_SWEEP_BATCH ? 0 : ad_hub.cfg->sweep_interval_ms;
    ad_op_free(op);
    if (!ad_hub.shutting_down)
        ad_timer_arm(&sweep_timer, ad_mono_ms() + next);
}

static void sweep_fire(struct ad_timer *t)
{
    struct ad_sweep_op *x = ad_sweep_op_new();
    x->now = ad_now_ms();
    x->op.done = sweep_done;
    ad_writer_submit(&x->op);
}

/* ---- start-up ---- */

/* Re-arm the timers that live only in memory: every running lease, and the first page of scheduled jobs (the
 * ones already due need no kick: no lease is parked yet, and a lease request reads the store). */
static int recover_timers(void)
{
    struct ad_job_list l = {0};
    if (ad_hub.store->ops->job_running(ad_hub.rconn, &l) != AD_E_OK)
        return -1;
    for (size_t i = 0; i < l.n; i++)
        if (l.items[i]->lease_id != NULL)
            arm_lease_timer(NULL, l.items[i]);
    size_t leases = l.n;
    ad_job_list_free(&l);
    runat.refill.cb = runat_refill;
    runat.horizon_at = ad_now_ms();
    runat.horizon_cseq = INT64_MAX;
    /* The first page on the loop's own connection: nothing is served yet, and the log can say what it found. */
    size_t cap = ad_hub.cfg->scheduled_timers;
    struct runat_read first = {.horizon_at = runat.horizon_at,
                               .horizon_cseq = runat.horizon_cseq,
                               .limit = cap < AD_RUNAT_PAGE ? (int)cap : AD_RUNAT_PAGE};
    if (first.limit == 0 || runat_read_apply(&first.op, ad_hub.rconn) != AD_E_OK)
        ad_timer_arm(&runat.refill, ad_mono_ms() + AD_RECHECK_MS); /* the store is away: look again soon */
    else
        runat_take_page(&first.l, first.limit);
    ad_job_list_free(&first.l);
    if (leases != 0 || runat.n != 0)
        ad_info("recovered %zu running leases and %zu scheduled jobs%s", leases, runat.n,
                ad_timer_armed(&runat.refill) ? " (more are read as they come due)" : "");
    return 0;
}

int ad_hub_start(void)
{
    ad_writer_set_publish(publish_committed, published_settled);
    if (ad_hub.store->ops->max_seq(ad_hub.rconn, &event_seq) != AD_E_OK || recover_timers() != 0)
        return -1;
    sweep_timer.cb = sweep_fire;
    ad_timer_arm(&sweep_timer, ad_mono_ms() + ad_hub.cfg->sweep_interval_ms);
    return 0;
}
