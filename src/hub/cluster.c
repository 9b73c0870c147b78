/*
 * cluster.c - follows the shared store's change log and publishes other nodes' changes on this node.
 *
 * Two parts. The feed thread waits on the store's change feed (feed_open/feed_wait) and wakes the event
 * loop when another node committed something; it reopens the feed by itself when the database goes away.
 * Jobs that another node made queued are announced with their tenant and type: the loop offers them to its
 * parked workers at once, before reading anything (the handoff from a submit on one node to a worker waiting
 * on another costs no extra round trip).
 * The pump runs on the event loop: it reads every job with seq above what it has read so far, in seq order,
 * hands each change to the /v1/events streams and publishes it (ad_hub_publish keeps the cache, waiters
 * and timers in step; a change this node made itself is already published and changes nothing there). It
 * also runs once a second, so a lost announcement costs latency, not correctness.
 */
#include "hub/cluster.h"
#include "hub/hub.h"
#include "common/timer.h"
#include "core/loop.h"
#include "core/writer.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#define PUMP_PAGE 500
#define PUMP_PERIOD_MS 1000
#define PUMP_RETRY_MS 500
#define FEED_WAIT_MS 500
#define FEED_BACKOFF_MAX_MS 2000
#define KICKS_MAX 256

static struct {
    int enabled;
    int64_t pumped; /* highest seq read from the log */
    int reading;    /* a page is being read (pump_read) */
    int again;      /* a change was announced while it was */
    struct ad_timer timer;
    /* feed thread */
    pthread_t thread;
    atomic_int stopping;
    int stop_fd;                /* an eventfd, written by ad_cluster_stop: the feed thread's waits end at once */
    atomic_int wake_sent;       /* the wake message is in the queue */
    struct ad_mailbox *mailbox; /* to the loop (core/loop.h) */
    struct ad_list wake;        /* the one message sent on it */
    /* "tenant\0type" of jobs other nodes made queued, for the loop's parked workers; under mu */
    pthread_mutex_t mu;
    char *kicks[KICKS_MAX];
    size_t nkicks;
} cl = {.mu = PTHREAD_MUTEX_INITIALIZER};

int ad_cluster_enabled(void)
{
    return cl.enabled;
}

/* ---- the pump (event loop) ---- */

/* Send one change to the change streams, rendered as this version of the job. */
static void stream(const struct ad_job *j)
{
    struct ad_buf b;
    ad_buf_init(&b, SIZE_MAX);
    ad_job_render(j, &b);
    ad_hub_event(j, b.data, b.len);
    ad_buf_free(&b);
}

/* A page of the log being read off the loop (ad_hub_read): one at a time, from cl.pumped. */
struct pump_read {
    struct ad_op op;
    int64_t since;
    struct ad_job_list l;
};

static ad_err pump_apply(struct ad_op *op, struct ad_conn *c)
{
    struct pump_read *x = (struct pump_read *)op;
    return ad_hub.store->ops->job_changes(c, NULL, x->since, PUMP_PAGE, &x->l);
}

static void pump_destroy(struct ad_op *op)
{
    struct pump_read *x = (struct pump_read *)op;
    ad_job_list_free(&x->l);
    free(x);
}

static void pump_done(struct ad_op *op)
{
    struct pump_read *x = (struct pump_read *)op;
    cl.reading = 0;
    if (op->err != AD_E_OK) {
        ad_timer_arm(&cl.timer, ad_mono_ms() + PUMP_RETRY_MS); /* the store is away (logged) */
        ad_op_free(op);
        return;
    }
    for (size_t i = 0; i < x->l.n; i++) {
        struct ad_job *j = x->l.items[i];
        x->l.items[i] = NULL;
        if (j->seq <= cl.pumped) { /* cannot happen with one read at a time; kept cheap to be sure */
            ad_job_free(j);
            continue;
        }
        cl.pumped = j->seq;
        stream(j);
        ad_hub_publish(j);
    }
    int full = x->l.n == PUMP_PAGE;
    ad_op_free(op);
    /* A full page, or a change announced while reading: read on at once (from the timer, not recursively). */
    ad_timer_arm(&cl.timer, ad_mono_ms() + (full || cl.again ? 0 : PUMP_PERIOD_MS));
    cl.again = 0;
}

static void pump(struct ad_timer *t)
{
    if (atomic_load(&cl.stopping))
        return; /* the readers are stopping too: a read now would never be answered */
    if (cl.reading) {
        cl.again = 1;
        return;
    }
    struct pump_read *x = ad_calloc(1, sizeof(*x));
    x->op.apply = pump_apply;
    x->op.done = pump_done;
    x->op.destroy = pump_destroy;
    x->since = cl.pumped;
    cl.reading = 1;
    ad_hub_read(&x->op);
}

void ad_cluster_changed(void)
{
    if (cl.enabled && cl.reading)
        cl.again = 1;
    else if (cl.enabled && (!ad_timer_armed(&cl.timer) || cl.timer.at > ad_mono_ms()))
        ad_timer_arm(&cl.timer, ad_mono_ms());
}

static void on_wake(void *arg, struct ad_list *messages)
{
    while (!ad_list_empty(messages))
        ad_list_unlink(messages->next);
    atomic_store(&cl.wake_sent, 0);
    char *kicks[KICKS_MAX];
    pthread_mutex_lock(&cl.mu);
    size_t n = cl.nkicks;
    memcpy(kicks, cl.kicks, n * sizeof(*kicks));
    cl.nkicks = 0;
    pthread_mutex_unlock(&cl.mu);
    for (size_t i = 0; i < n; i++) {
        ad_hub_work(kicks[i], kicks[i] + strlen(kicks[i]) + 1);
        free(kicks[i]);
    }
    ad_cluster_changed();
}

/* ---- the feed thread ---- */

static void wake_loop(void)
{
    if (atomic_exchange(&cl.wake_sent, 1) == 0)
        ad_mailbox_send(cl.mailbox, &cl.wake);
}

static void heard(void *arg, const struct ad_feed_change *ch)
{
    *(int *)arg = 1;
    if (ch->tenant == NULL || ch->type == NULL)
        return;
    size_t tl = strlen(ch->tenant), yl = strlen(ch->type);
    pthread_mutex_lock(&cl.mu);
    int known = 0;
    for (size_t i = 0; i < cl.nkicks && !known; i++)
        known = strcmp(cl.kicks[i], ch->tenant) == 0 && strcmp(cl.kicks[i] + tl + 1, ch->type) == 0;
    /* Past the cap the pump still publishes the jobs, which offers them to parked workers a moment later. */
    if (!known && cl.nkicks < KICKS_MAX) {
        char *k = ad_malloc(tl + yl + 2);
        memcpy(k, ch->tenant, tl + 1);
        memcpy(k + tl + 1, ch->type, yl + 1);
        cl.kicks[cl.nkicks++] = k;
    }
    pthread_mutex_unlock(&cl.mu);
}

/* Wait ms, or less once ad_cluster_stop has written cl.stop_fd. */
static void nap(int ms)
{
    struct pollfd pfd = {.fd = cl.stop_fd, .events = POLLIN};
    poll(&pfd, 1, ms);
}

static void *feed_main(void *arg)
{
    const struct ad_store_ops *st = ad_hub.store->ops;
    struct ad_feed *f = NULL;
    int backoff = 100, lost = 0;
    char err[256];
    while (!atomic_load(&cl.stopping)) {
        if (f == NULL) {
            f = st->feed_open(ad_hub.store, err, sizeof(err));
            if (f == NULL) {
                if (!lost)
                    ad_warn("cluster: cannot hear other nodes' changes (%s); retrying", err);
                lost = 1;
                nap(backoff);
                backoff = backoff * 2 > FEED_BACKOFF_MAX_MS ? FEED_BACKOFF_MAX_MS : backoff * 2;
                continue;
            }
            if (lost)
                ad_info("cluster: hearing other nodes' changes again");
            lost = 0;
            backoff = 100;
            wake_loop(); /* whatever was committed while we were not listening */
        }
        int any = 0;
        if (st->feed_wait(f, FEED_WAIT_MS, cl.stop_fd, heard, &any) != 0) {
            ad_warn("cluster: lost the change feed; reconnecting");
            st->feed_close(f);
            f = NULL;
            lost = 1;
        }
        if (any)
            wake_loop();
    }
    if (f != NULL)
        st->feed_close(f);
    return NULL;
}

int ad_cluster_start(struct ad_loop *loop, char *err, size_t errlen)
{
    const struct ad_store_ops *st = ad_hub.store->ops;
    if (st->feed_open == NULL)
        return 0;
    cl.enabled = 1;
    cl.timer.cb = pump;
    if (st->max_seq(ad_hub.rconn, &cl.pumped) != AD_E_OK) {
        snprintf(err, errlen, "cannot read the newest seq from the store");
        return -1;
    }
    if (cl.mailbox == NULL)
        cl.mailbox = ad_mailbox_new(loop, on_wake, NULL);
    atomic_store(&cl.stopping, 0);
    cl.stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (cl.stop_fd < 0) {
        snprintf(err, errlen, "cannot create an eventfd (%s)", strerror(errno));
        return -1;
    }
    if (pthread_create(&cl.thread, NULL, feed_main, NULL) != 0) {
        snprintf(err, errlen, "cannot start the cluster feed thread");
        return -1;
    }
    pthread_setname_np(cl.thread, "acceptd-cluster");
    ad_timer_arm(&cl.timer, ad_mono_ms() + PUMP_PERIOD_MS);
    return 0;
}

void ad_cluster_stop(void)
{
    if (!cl.enabled)
        return;
    atomic_store(&cl.stopping, 1);
    if (eventfd_write(cl.stop_fd, 1) != 0)
        ad_warn("cluster: cannot wake the feed thread (%s); it stops within %d ms", strerror(errno), FEED_WAIT_MS);
    pthread_join(cl.thread, NULL);
    close(cl.stop_fd);
    ad_timer_cancel(&cl.timer);
    for (size_t i = 0; i < cl.nkicks; i++)
        free(cl.kicks[i]);
    cl.nkicks = 0;
}
