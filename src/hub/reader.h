/*
 * reader.h - thread pools for store work that could stall the event loop, each thread on a store connection of
 * its own; and the reader threads, one such pool.
 *
 * A pool serves one queue of ops (struct ad_op, core/writer.h): an op's apply runs on a pool thread, its done
 * back on the loop through the writer's hand-back queue (ad_writer_complete), so completions of every kind are
 * run by the one mechanism (ad_writer_deliver), and none of them counts as a write (ad_writer_outstanding). A
 * pool may also run a periodic job on one of its threads between ops (the artifact collector). Users: the
 * readers here, and the artifact thread (api/api_artifacts.c: one thread, so that parts go in order).
 *
 * The readers: on PostgreSQL every read is a network round trip, and one that waits on a lock (another session's,
 * or a database that went away) would hold every connection of the node for as long. The loop hands such reads to
 * a pool of AD_READER_THREADS. On SQLite nothing here starts: ad_hub_read (hub.h) applies the read inline on the
 * loop's own connection. A read of a local file in WAL mode never waits for the writer, and costs less than a
 * hand-off to another thread and back. What this file does not do: decide which store's reads may block (the
 * store says, ad_store_ops.reads_may_block) or what an op does.
 */
#ifndef AD_READER_H
#define AD_READER_H

#include <pthread.h>
#include "core/writer.h"
#include "store/store.h"

/* Reader threads on a store whose reads may block. */
#define AD_READER_THREADS 2
/* Threads in one pool at most. */
#define AD_POOL_MAX_THREADS 2

/* A pool: the caller sets the fields up to every_ms (a static initializer), ad_pool_start the rest. */
struct ad_pool {
    const char *name; /* the threads' name, at most 15 characters */
    size_t nthreads;  /* 1 to AD_POOL_MAX_THREADS; with 1, ops are applied in the order they were queued */
    /* At stop, the queued ops are applied (1) or answered AD_E_UNAVAILABLE without being applied (0); the op a
     * thread is in is finished either way. */
    int drain;
    /* NULL, or run on a pool thread at start and then every_ms after each run ended, between ops. */
    void (*every)(struct ad_conn *c);
    int64_t every_ms;
    struct ad_store *store;
    pthread_mutex_t mu;
    pthread_cond_t cv; /* on CLOCK_MONOTONIC */
    struct ad_op *head, **tail;
    int stopping;
    int64_t due; /* monotonic ms of the next run of every; INT64_MAX when none is to start */
    size_t started;
    struct ad_pool_thread {
        struct ad_pool *pool;
        pthread_t id;
        struct ad_conn *conn;
    } threads[AD_POOL_MAX_THREADS];
};

/* Start p's threads, each on a connection of its own to store. 0, or -1 with err filled. */
int ad_pool_start(struct ad_pool *p, struct ad_store *store, char *err, size_t errlen);
/* Queue op (event loop thread); its apply runs on a pool thread, its done on the loop. */
void ad_pool_submit(struct ad_pool *p, struct ad_op *op);
/* Finish the op each thread is in, apply or refuse the queued ones (p->drain), stop the threads and close their
 * connections (event loop thread; the done of each op runs on the loop later). Nothing when p did not start. */
void ad_pool_stop(struct ad_pool *p);

/* Start the reader threads when store's reads may block (else nothing). 0, or -1 with err filled. */
int ad_reader_start(struct ad_store *store, char *err, size_t errlen);
/* Stop the reader threads: the reads still queued are answered AD_E_UNAVAILABLE (a client sends a read again at
 * no cost, and one queued behind a lock would hold the stop). */
void ad_reader_stop(void);

#endif
