/*
 * writer.h - the one store writer: a thread that applies operations in batches (group commit).
 *
 * The event loop hands operations to ad_writer_submit(). The writer thread opens one transaction, applies
 * every operation queued so far and those that keep arriving while it expects more (writer.c), commits once (one fsync
 * for the batch) and then hands each operation back to the event loop thread (a mailbox of core/loop.h), where
 * op->done runs in a turn of the loop (ad_writer_deliver). An operation's result is therefore durable before done() is
 * called: a 202 leaves only after its batch committed.
 *
 * The one publish path: an operation's apply names the jobs it changed (ad_op_changed), and on the event loop, after
 * the batch committed and before the operation's done(), the writer hands each to the publish function the hub
 * registered at start (ad_writer_set_publish): the cache, long polls, SSE, parked leases, the change feed and the
 * cluster subscribe there. done() finds what the publish returned (ad_op_published) and answers with it; it
 * publishes nothing itself. A batch that failed publishes nothing. The writer does not know what a publish does.
 */
#ifndef AD_WRITER_H
#define AD_WRITER_H

#include <stdlib.h>
#include "common/error.h"
#include "core/loop.h"
#include "core/pool.h"
#include "store/store.h"

/* A job an operation changed (ad_op_changed). */
struct ad_op_change {
    struct ad_job **job; /* the op's own pointer to it: the writer takes the job out (the publish owns it) */
    void *published;     /* what the publish function returned for it (ad_op_published) */
};
/* Changes an op holds without allocating: a submit (with its hand-off) names one job, a report with next two. */
#define AD_OP_CHANGES_INLINE 2

struct ad_op {
    /* Writer thread, inside the batch transaction. Return an error before writing anything: an error after a
     * write fails the whole batch (unless the store gives each op a savepoint; see ad_store_ops.changes). */
    ad_err (*apply)(struct ad_op *op, struct ad_conn *c);
    /* Writer thread, inside the batch transaction, before apply of this op and of the others taken with it: tell
     * the store what apply will read (ad_store_ops.job_prefetch), so that the reads of a chunk go together.
     * NULL: nothing. */
    void (*prefetch)(struct ad_op *op, struct ad_conn *c);
    /* Event loop thread, after the batch committed (or failed: op->err says which). Must end with ad_op_free. */
    void (*done)(struct ad_op *op);
    /* Frees the op and everything it owns; set by the op's constructor. */
    void (*destroy)(struct ad_op *op);
    ad_err err;
    /* What the op counts for in ad_writer_outstanding, set before it is handed in: the jobs of a batch submit,
     * which holds them all until its answer; 0 counts as 1. */
    size_t weight;
    int handed_back;          /* handed back by ad_writer_complete, not applied by the writer: no write */
    struct ad_list msg;       /* in the hand-back to the loop */
    struct ad_pool_item item; /* in the queue of a pool (the writer's, or ad_op_pool_submit's) */
    struct ad_op *next;       /* in the writer's batch */
    /* The jobs apply changed, in the order named: the first AD_OP_CHANGES_INLINE in changed, the rest in more
     * (allocated, freed by ad_op_free). Writer thread until the commit, then the event loop thread. */
    size_t nchanged, more_cap;
    struct ad_op_change changed[AD_OP_CHANGES_INLINE];
    struct ad_op_change *more;
    struct ad_op_owned *owned; /* the jobs named with ad_op_changed_own, freed by ad_op_free */
};

/* A job an op changed beyond those it holds itself (ad_op_changed_own). */
struct ad_op_owned {
    struct ad_job *job;
    struct ad_op_owned *next;
};
void ad_op_owned_free(struct ad_op_owned *o);

/* Free an op through its destroy function. */
static inline void ad_op_free(struct ad_op *op)
{
    free(op->more);
    ad_op_owned_free(op->owned);
    op->destroy(op);
}

/* Change i of op (i < op->nchanged). */
static inline struct ad_op_change *ad_op_change_at(struct ad_op *op, size_t i)
{
    return i < AD_OP_CHANGES_INLINE ? &op->changed[i] : &op->more[i - AD_OP_CHANGES_INLINE];
}

/* In apply (writer thread): *job, a job this op wrote, is to be published once the batch commits; called again
 * for each further one. *job must stay put in the op until done(): the writer takes the job out of it (sets it
 * to NULL) and hands it to the publish function. Nothing is published if the op or its batch fails; the job then
 * stays the op's. A job the op answers with unchanged (a replayed report or submit) may be named too: the publish
 * keeps the version it already has. */
void ad_op_changed(struct ad_op *op, struct ad_job **job);
/* In apply (writer thread): as ad_op_changed for a job the op does not hold (a job a dependency's end changed,
 * core/deps.c): the op takes job (heap) and keeps it until ad_op_free, unless the publish took it. */
void ad_op_changed_own(struct ad_op *op, struct ad_job *job);

/* In done() (event loop thread): what the publish function returned for the op's change i, in the order apply
 * named them; NULL when the op failed, i is past its changes, or no publish function is set. */
static inline void *ad_op_published(struct ad_op *op, size_t i)
{
    return op->err == AD_E_OK && i < op->nchanged ? ad_op_change_at(op, i)->published : NULL;
}

/* Start the writer thread on its own connection to store; completions are delivered on loop. 0 or -1. */
int ad_writer_start(struct ad_store *store, struct ad_loop *loop, char *err, size_t errlen);
/* Run fn on the writer thread after every batch's transaction has ended (committed or not), before the batch's
 * completions are handed back; NULL removes it. The webhook outbox uses it to wake its delivery thread. */
void ad_writer_set_batch_hook(void (*fn)(void));
/* Set once at start, before the first operation is submitted (event loop thread). After a batch commits, each
 * job its operations changed goes to publish, which takes ownership of it and returns what the op's done()
 * answers with (opaque here: the hub's cache entry); once done() has run, settled() is called (the hub keeps the
 * entries it returned until then). Without a publish function the jobs stay in their ops (unit tests). */
void ad_writer_set_publish(void *(*publish)(struct ad_job *job), void (*settled)(void));
/* Run the next few completions handed back (event loop thread). The loop does it itself, from a task (core/loop.h):
 * the first chunk of what arrives runs in the turn that receives it, and each next chunk in the turn after, once
 * the loop has read its sockets. Returns 1 when some are still waiting. */
int ad_writer_deliver(void);
/* Hand op back to the event loop from another thread, without applying it: its done() runs on the loop in
 * the same turns as the writer's completions (the reader threads of hub/reader.c answer through it). An op
 * handed back so counts as handed in until its done() has run (ad_writer_idle). */
void ad_writer_complete(struct ad_op *op);
/* Apply op inside the open batch transaction as the writer applies each queued op (writer.c, apply_ops): op->err
 * is the op's own outcome, undone alone when it failed before writing (or, on a store that cannot count its
 * changes, by a savepoint); returns the error that fails the whole batch (op failed after writing), else AD_E_OK.
 * For an op that applies others it holds (ad_batch_op, core.h); ops: the store's, that c belongs to. Writer
 * thread, inside an apply. */
ad_err ad_writer_apply_nested(const struct ad_store_ops *ops, struct ad_op *op, struct ad_conn *c);
/* Queue op (any thread). After ad_writer_stop, op is not applied: its done runs on the loop with AD_E_UNAVAILABLE. */
void ad_writer_submit(struct ad_op *op);
/* Finish the queued operations, then stop the thread (nothing when it is not running). Completions still pending
 * are delivered by the loop. */
void ad_writer_stop(void);
/* Counters since start: batches committed, operations applied, and the time spent applying operations
 * and committing (the fsync) in nanoseconds. */
struct ad_writer_stats {
    uint64_t batches, ops, apply_ns, commit_ns;
};
void ad_writer_stats(struct ad_writer_stats *out);
/* 1 while writes fail for want of space: from a batch that failed with AD_E_STORAGE_FULL until a write goes
 * through again (any thread; one atomic load). */
int ad_writer_storage_full(void);
/* 1 when every operation handed in has been applied and its done() has run (event loop thread). */
int ad_writer_idle(void);
/* Writes handed in whose done() has not run yet, each counted by its weight: queued, in the open batch, or
 * waiting for the loop (event loop thread). Each holds its request's memory until then; the API refuses writes past
 * limits.maxQueuedWrites. Ops handed back with ad_writer_complete (reads, file I/O) are not counted. */
size_t ad_writer_outstanding(void);

/*
 * Pools of store operations (core/pool.h): readers and the artifact service. Each thread is on a store connection
 * of its own (the pool's data is the store); an op's apply runs there, its done on the loop through
 * ad_writer_complete. Dropped at stop (a pool that does not drain), and refused once the pool has stopped, an op
 * answers AD_E_UNAVAILABLE. A pool of them is declared with AD_OP_POOL among its initializers.
 */
void *ad_op_pool_connect(struct ad_pool *p, char *err, size_t errlen);
void ad_op_pool_disconnect(struct ad_pool *p, void *conn);
void ad_op_pool_run(struct ad_pool *p, void *conn, struct ad_pool_item *it);
void ad_op_pool_drop(struct ad_pool *p, struct ad_pool_item *it);
#define AD_OP_POOL                                                                                                     \
    .thread_start = ad_op_pool_connect, .thread_end = ad_op_pool_disconnect, .run = ad_op_pool_run,                    \
    .drop = ad_op_pool_drop
/* Queue op on p (event loop thread); its apply runs on a pool thread, its done on the loop. */
void ad_op_pool_submit(struct ad_pool *p, struct ad_op *op);

#endif
