/*
 * writer.h - the one store writer: a thread that applies operations in batches (group commit).
 *
 * The event loop hands operations to ad_writer_submit(). The writer thread opens one transaction, applies
 * every operation queued so far and those that keep arriving while it expects more (writer.c), commits once (one fsync
 * for the batch) and then hands each operation back to the event loop thread, where op->done runs inside
 * h2o_evloop_run (ad_writer_deliver). An operation's result is therefore durable before done() is called: a 202
 * leaves only after its batch committed.
 */
#ifndef AD_WRITER_H
#define AD_WRITER_H

#include <h2o.h>
#include "common/error.h"
#include "store/store.h"

struct ad_op {
    /* Writer thread, inside the batch transaction. Return an error before writing anything: an error after a
     * write fails the whole batch (unless the store gives each op a savepoint; see ad_store_ops.changes). */
    ad_err (*apply)(struct ad_op *op, struct ad_conn *c);
    /* Event loop thread, after the batch committed (or failed: op->err says which). Must end with ad_op_free. */
    void (*done)(struct ad_op *op);
    /* Frees the op and everything it owns; set by the op's constructor. */
    void (*destroy)(struct ad_op *op);
    ad_err err;
    h2o_multithread_message_t msg;
    struct ad_op *next;
};

/* Free an op through its destroy function. */
static inline void ad_op_free(struct ad_op *op)
{
    op->destroy(op);
}

/* Start the writer thread on its own connection to store; completions are delivered on loop. 0 or -1. */
int ad_writer_start(struct ad_store *store, h2o_loop_t *loop, char *err, size_t errlen);
/* Run fn on the writer thread after every batch's transaction has ended (committed or not), before the batch's
 * completions are handed back; NULL removes it. The webhook outbox uses it to wake its delivery thread. */
void ad_writer_set_batch_hook(void (*fn)(void));
/* Run the next few completions handed back (event loop thread). The loop does it itself: the first chunk of
 * what arrives runs in the h2o_evloop_run that receives it, and the next in each run after ad_writer_turn.
 * Returns 1 when some are still waiting. */
int ad_writer_deliver(void);
/* After each h2o_evloop_run (event loop thread): have the next run, which then does not sleep, run the next chunk
 * of completions, if any wait, after it has read its sockets. */
void ad_writer_turn(void);
/* Hand op back to the event loop from another thread, without applying it: its done() runs on the loop in
 * the same turns as the writer's completions (the reader threads of hub/reader.c answer through it). An op
 * handed back so counts as handed in until its done() has run (ad_writer_idle). */
void ad_writer_complete(struct ad_op *op);
/* Queue op (any thread). */
void ad_writer_submit(struct ad_op *op);
/* Finish the queued operations, then stop the thread. Completions still pending are delivered by the loop. */
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
/* Operations handed in whose done() has not run yet: queued, in the open batch, or waiting for the loop (event
 * loop thread). Each holds its request's memory until then; the API refuses writes past limits.maxQueuedWrites. */
size_t ad_writer_outstanding(void);

#endif
