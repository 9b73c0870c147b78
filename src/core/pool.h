/*
 * pool.h - the one queue-and-threads primitive: a FIFO of items served by a few named threads. The writer's
 * hand-off (core/writer.c), the store readers (hub/reader.c), the artifact service (core/artifacts.c) and the
 * webhook resolver (webhook/ssrf.c) are each one pool.
 *
 * An item is a struct ad_pool_item inside the caller's own struct (nothing is allocated per item). A thread either
 * runs one item at a time (run), or, for a consumer that takes items in batches (the writer's group commit), lives
 * in main and takes them itself with ad_pool_wait and ad_pool_take. Waits are on the monotonic clock, so a change of
 * the wall clock neither stalls nor hurries them; each thread carries the pool's name (pthread_setname_np), as
 * top, perf and gdb show it.
 *
 * Stopping (ad_pool_stop): each thread finishes the item it is in; what is still queued is run (drain) or handed
 * to drop without being run (not drain), each pool says which. Once the last thread has left, the pool takes no
 * more items: ad_pool_submit returns -1 and the caller answers the item itself. A pool may be started again after
 * it stopped. What this file does not do: know what an item is, or hand results back to the event loop (the
 * callers do, e.g. with ad_writer_complete or a mailbox of core/loop.h).
 */
#ifndef AD_POOL_H
#define AD_POOL_H

#include "common/util.h"

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#define AD_POOL_MAX_THREADS 4
/* No deadline (ad_pool_wait). */
#define AD_POOL_FOREVER INT64_MAX

struct ad_pool_item {
    struct ad_pool_item *next;
};

/* The caller sets the fields up to data (a static initializer); ad_pool_start the rest. */
struct ad_pool {
    const char *name; /* the threads' name, at most 15 characters */
    size_t nthreads;  /* 1 to AD_POOL_MAX_THREADS; with 1, items run in the order they were queued */
    int drain;        /* at stop: 1 runs the queued items, 0 hands them to drop */
    /* On the thread that calls ad_pool_start, once per thread before it runs: its state (a store connection), or
     * NULL with err filled to fail the start. NULL: the threads have no state. */
    void *(*thread_start)(struct ad_pool *p, char *err, size_t errlen);
    /* At stop, after the thread ended, with its state. May be NULL. */
    void (*thread_end)(struct ad_pool *p, void *state);
    /* On a pool thread: run one item (the lock is not held). */
    void (*run)(struct ad_pool *p, void *state, struct ad_pool_item *it);
    /* On a pool thread, at stop of a pool that does not drain: an item queued and not run. NULL: it is left as it
     * is, its owner's to free. */
    void (*drop)(struct ad_pool *p, struct ad_pool_item *it);
    /* Instead of run: the thread's whole life. It takes items with ad_pool_wait and ad_pool_take and returns once
     * ad_pool_closing said 1 (and only then). */
    void (*main)(struct ad_pool *p, void *state);
    /* With run: NULL, or run on a pool thread at start and then every_ms after each run of it ended, between items
     * (the artifact collector). */
    void (*every)(struct ad_pool *p, void *state);
    int64_t every_ms;
    void *data; /* the caller's */

    /* ---- ad_pool_start's ---- */
    pthread_mutex_t mu;
    pthread_cond_t cv; /* on CLOCK_MONOTONIC */
    int inited;        /* mu and cv were made (they live on after a stop, for ad_pool_submit to refuse) */
    struct ad_pool_item *head, **tail;
    size_t queued;
    int stopping, closed;
    size_t started, left; /* threads started; threads that have left (closed once all have) */
    int64_t due;          /* monotonic ns of the next run of every; AD_POOL_FOREVER when none is to start */
    struct ad_pool_thread {
        struct ad_pool *pool;
        pthread_t id;
        void *state;
    } threads[AD_POOL_MAX_THREADS];
};

/* Start p's threads. 0, or -1 with err filled (the threads started are stopped again). */
int ad_pool_start(struct ad_pool *p, char *err, size_t errlen);
/* Queue it (any thread). 0, or -1 when the pool has stopped (or never started): it was not queued. */
int ad_pool_submit(struct ad_pool *p, struct ad_pool_item *it);
/* Stop the threads as the header says (drain or drop) and end their states; nothing when p is not running. Any
 * thread but p's own. */
void ad_pool_stop(struct ad_pool *p);
/* Release the lock and condition variable of a stopped pool that will not be used again (one inside memory about to
 * be freed). */
void ad_pool_destroy(struct ad_pool *p);

/* In main: wait until at least want items are queued, the pool is stopping, or the monotonic clock reaches
 * deadline_ns (ad_mono_ns; AD_POOL_FOREVER: no deadline). Returns the number queued. */
size_t ad_pool_wait(struct ad_pool *p, size_t want, int64_t deadline_ns);
/* In main: take up to max queued items without waiting: their chain (NULL-terminated) and its length in *n; NULL
 * when none is queued. */
struct ad_pool_item *ad_pool_take(struct ad_pool *p, size_t max, size_t *n);
/* In main: 1 when the pool is stopping and nothing is queued: the thread must return, and once every thread has,
 * the pool takes no more items. Else 0. */
int ad_pool_closing(struct ad_pool *p);
/* 1 once ad_pool_stop was called (any thread). */
int ad_pool_stopping(struct ad_pool *p);

#endif
