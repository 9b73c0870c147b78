/*
 * writer.c - the group-commit writer thread.
 *
 * Batching needs no timer of its own: while one batch is being fsynced, new operations pile up in the queue,
 * and the next batch takes them all. Under light load a batch is one operation and adds no delay. Under
 * steady load a batch waits a moment for as many operations as the last one held (gather_and_apply).
 * A batch's completions reach the event loop together (one mailbox send, core/loop.h) and are run a chunk per
 * turn of the loop (ad_writer_deliver, from a task of the loop), between its reads.
 *
 * A batch that fails for want of space (AD_E_STORAGE_FULL) puts the writer in the full state, which
 * ad_writer_storage_full tells /readyz. While in it, the writer has the store give back what space it can and try
 * a small write of its own (ops->reclaim) after every batch and, when no batch comes, every
 * AD_WRITER_RECLAIM_MS, and leaves the state once one goes through.
 *
 * Publishing (writer.h) happens in ad_writer_deliver, on the event loop thread, right before each op's done(), so
 * that changes are published in the order of the batch and each answer finds its own published entries.
 */
#include "core/writer.h"
#include "common/util.h"
#include "common/metrics.h"

#include <stdio.h>
#include <time.h>

#define AD_WRITER_MAX_BATCH 1024
#define AD_WRITER_GATHER_NS 500000
/* Completions run per turn of the event loop. A batch's answers all arrive at once; run in one go, a batch
 * of 250 keeps the loop from reading for 5 ms, while the writer, with nothing queued, waits. In turns, the
 * requests that the first answers bring back are read, and reach the writer, between them. */
#define AD_WRITER_DELIVER_CHUNK 32
/* How often the writer, with nothing queued, tries to make room while the store is full. */
#define AD_WRITER_RECLAIM_MS 500

static void writer_main(struct ad_pool *p, void *state);
/* The hand-off: ops queued for the writer thread, which takes them in batches (core/pool.h). It drains at stop:
 * whatever was handed in is committed and answered. */
static struct ad_pool queue = {.name = "acceptd-writer", .nthreads = 1, .drain = 1, .main = writer_main};
static uint64_t stat_batches, stat_ops; /* atomics */
static uint64_t submitted, delivered;   /* atomics: ops handed in, ops whose done() has run */
/* atomics: of those, the ops handed back without the writer (ad_writer_complete: reads, file I/O), which are no
 * writes waiting for the store and so are not counted against limits.maxQueuedWrites */
static uint64_t back_submitted, back_delivered;
static uint64_t stat_apply_ns, stat_commit_ns; /* written by the writer thread only */

static uint64_t mono_ns(void)
{
    return (uint64_t)ad_mono_ns();
}
static struct ad_conn *conn;
static struct ad_store *store;
static struct ad_loop *deliver_loop;
static struct ad_mailbox *mailbox; /* the hand-back to the loop, made once per loop */
static struct ad_loop_task *deliver_task;
static void (*batch_hook)(void);
/* The hub's (ad_writer_set_publish); event loop thread only. */
static void *(*publish_fn)(struct ad_job *job);
static void (*settled_fn)(void);
/* Atomic: 1 from a batch that failed for want of space until a write goes through again (writer thread writes,
 * any thread reads). */
static int storage_full;

/* Completions the writer has handed back and the event loop has not run yet (event loop thread only). */
static struct ad_list ready = AD_LIST_INIT(ready);

/*
 * Completions run from a task of the loop, inside its turn, which finishes the answers they write (runs their write
 * callbacks) before it next updates its polling. Run after the turn, an HTTP/1 answer's socket was still writing
 * when the next turn updated it: libh2o 2.2 polled it for EPOLLOUT, and for EPOLLIN again once the callback had
 * run, two epoll_ctl per answer.
 */
static void deliver_run(void *arg)
{
    if (ad_writer_deliver())
        ad_loop_task_schedule(deliver_task); /* the next chunk on the next turn, after the loop has read */
}

static void on_messages(void *arg, struct ad_list *msgs)
{
    ad_list_insert_list(&ready, msgs);
    ad_loop_task_schedule(deliver_task);
}

void ad_op_changed(struct ad_op *op, struct ad_job **job)
{
    size_t i = op->nchanged;
    if (i >= AD_OP_CHANGES_INLINE && i - AD_OP_CHANGES_INLINE == op->more_cap) {
        op->more_cap = op->more_cap != 0 ? op->more_cap * 2 : 8;
        op->more = ad_realloc(op->more, op->more_cap * sizeof(*op->more));
    }
    op->nchanged++;
    struct ad_op_change *ch = ad_op_change_at(op, i);
    ch->job = job;
    ch->published = NULL;
}

void ad_op_changed_own(struct ad_op *op, struct ad_job *job)
{
    struct ad_op_owned *o = ad_calloc(1, sizeof(*o));
    o->job = job;
    o->next = op->owned;
    op->owned = o;
    ad_op_changed(op, &o->job);
}

void ad_op_owned_free(struct ad_op_owned *o)
{
    while (o != NULL) {
        struct ad_op_owned *next = o->next;
        ad_job_free(o->job);
        free(o);
        o = next;
    }
}

/* Hand the jobs op changed to the publish function (event loop thread), unless op failed; 1 when it published. */
static int publish(struct ad_op *op)
{
    if (op->nchanged == 0 || op->err != AD_E_OK || publish_fn == NULL)
        return 0;
    for (size_t i = 0; i < op->nchanged; i++) {
        struct ad_op_change *ch = ad_op_change_at(op, i);
        struct ad_job *j = *ch->job;
        *ch->job = NULL;
        ch->published = j != NULL ? publish_fn(j) : NULL;
    }
    return 1;
}

static uint64_t op_weight(const struct ad_op *op)
{
    return op->weight != 0 ? op->weight : 1;
}

int ad_writer_deliver(void)
{
    for (size_t n = 0; n < AD_WRITER_DELIVER_CHUNK && !ad_list_empty(&ready); n++) {
        struct ad_op *op = AD_CONTAINER_OF(ready.next, struct ad_op, msg);
        ad_list_unlink(&op->msg);
        int published = publish(op);
        uint64_t weight = op_weight(op); /* done() frees op */
        int back = op->handed_back;
        op->done(op);
        if (back)
            __atomic_add_fetch(&back_delivered, weight, __ATOMIC_RELAXED);
        if (published && settled_fn != NULL)
            settled_fn();
        __atomic_add_fetch(&delivered, weight, __ATOMIC_RELAXED);
    }
    return !ad_list_empty(&ready);
}

/*
 * Apply ops (a chain) inside the open transaction. An operation that fails has usually written nothing (it
 * checks before it writes: a stale lease, an illegal transition); failing after a write means the store
 * failed, and then so does the batch: *berr is set, the batch is rolled back and every operation in it
 * answers that error. A savepoint per operation would undo a failed one alone, but SQLite copies every page
 * an operation touches into the savepoint's journal: a fifth of a submit's instructions. Stores that cannot
 * count their changes (changes NULL) still get a savepoint per operation. The caller rolls back.
 */
static void apply_ops(struct ad_op *op, ad_err *berr)
{
    for (struct ad_op *o = op; o != NULL; o = o->next)
        if (o->prefetch != NULL)
            o->prefetch(o, conn);
    for (; op != NULL && *berr == AD_E_OK; op = op->next)
        *berr = ad_writer_apply_nested(store->ops, op, conn);
}

ad_err ad_writer_apply_nested(const struct ad_store_ops *ops, struct ad_op *op, struct ad_conn *c)
{
    if (ops->changes != NULL) {
        int64_t before = ops->changes(c);
        op->err = op->apply(op, c);
        return op->err != AD_E_OK && ops->changes(c) != before ? op->err : AD_E_OK;
    }
    op->err = ops->savepoint(c);
    if (op->err != AD_E_OK)
        return AD_E_OK;
    op->err = op->apply(op, c);
    if (op->err == AD_E_OK)
        op->err = ops->release(c);
    else
        ops->rollback_to(c);
    return AD_E_OK;
}

/* Take up to max queued operations off the queue: their chain (by op->next), its last op in *last and its length
 * in *n; NULL when none is queued. */
static struct ad_op *take_queued(size_t max, struct ad_op **last, size_t *n)
{
    struct ad_pool_item *it = max != 0 ? ad_pool_take(&queue, max, n) : NULL;
    struct ad_op *first = NULL, **tail = &first;
    if (it == NULL)
        *n = 0;
    for (; it != NULL; it = it->next) {
        struct ad_op *op = AD_CONTAINER_OF(it, struct ad_op, item);
        *tail = *last = op;
        tail = &op->next;
    }
    *tail = NULL;
    return first;
}

/* Under steady load every client whose answer left with the last batch sends its next request at about
 * the same time. Starting a batch on the first arrival and committing at once would split them into a
 * batch of one and a batch of the rest; waiting for all of them before applying anything would leave the
 * writer idle while the event loop reads them. So a batch opens its transaction on the first arrival,
 * applies operations as they come, and commits once it holds as many as the last batch did, or, once
 * AD_WRITER_GATHER_NS (far less than an fsync) have passed since it began, as soon as none is queued.
 * With one client at a time the last batch was 1, and nothing waits. The writer sleeps between arrivals:
 * yielding its CPU instead grew batches but cost the end-to-end rate on a 2-vCPU host (docs/operations.md,
 * Benchmarks). A store whose open transaction holds back other nodes (tx_blocks_others) waits for the
 * company before it begins instead, and then applies what has come.
 *
 * Returns the batch's chain and its length in *count, and in *berr what fails the whole batch: begin's error,
 * or that of an operation that failed after writing (the transaction is then rolled back here). */
static struct ad_op *gather_and_apply(size_t last_batch, ad_err *berr, size_t *count)
{
    struct ad_op *batch = NULL, **btail = &batch;
    size_t n = 0, k;
    int wait_in_tx = !store->ops->tx_blocks_others;
    int64_t deadline = ad_mono_ns() + AD_WRITER_GATHER_NS;
    if (!wait_in_tx)
        ad_pool_wait(&queue, last_batch, deadline);
    uint64_t t0 = mono_ns();
    *berr = store->ops->begin(conn);
    uint64_t apply_ns = mono_ns() - t0;
    for (;;) {
        struct ad_op *last = NULL, *taken = take_queued(AD_WRITER_MAX_BATCH - n, &last, &k);
        if (taken != NULL) {
            t0 = mono_ns();
            if (*berr == AD_E_OK) {
                apply_ops(taken, berr);
                if (*berr != AD_E_OK)
                    store->ops->rollback(conn);
            }
            apply_ns += mono_ns() - t0;
            *btail = taken;
            btail = &last->next;
            n += k;
        }
        if (n >= last_batch || n >= AD_WRITER_MAX_BATCH || !wait_in_tx || *berr != AD_E_OK || ad_pool_stopping(&queue))
            break;
        if (ad_pool_wait(&queue, 1, deadline) == 0)
            break;
    }
    __atomic_add_fetch(&stat_apply_ns, apply_ns, __ATOMIC_RELAXED);
    *count = n;
    return batch;
}

/* In the full state: have the store make room and try a write; leave the state once one went
 * through. A store without reclaim leaves it at the next batch that commits (commit_and_deliver). */
static void reclaim(void)
{
    if (!__atomic_load_n(&storage_full, __ATOMIC_RELAXED) || store->ops->reclaim == NULL)
        return;
    if (store->ops->reclaim(conn) != AD_E_OK)
        return;
    __atomic_store_n(&storage_full, 0, __ATOMIC_RELAXED);
    ad_info("store: writes go through again");
}

/* Commit the batch unless it already failed, hand each operation back to the event loop, and only
 * then run the store's upkeep (after_batch), which the answers need not wait for. The full state is entered
 * before the answers leave, so that a client that got storage-full finds /readyz saying so too. */
static void commit_and_deliver(struct ad_op *batch, ad_err berr, size_t n)
{
    if (berr == AD_E_OK) {
        uint64_t t0 = mono_ns();
        berr = store->ops->commit(conn);
        if (berr != AD_E_OK)
            store->ops->rollback(conn);
        uint64_t ns = mono_ns() - t0;
        __atomic_add_fetch(&stat_commit_ns, ns, __ATOMIC_RELAXED);
        ad_metrics_commit(n, (double)ns / 1e9);
    }
    /* An operation may answer storage-full alone: a statement that SQLite undid by itself, the batch going on. */
    int full = berr == AD_E_STORAGE_FULL;
    for (const struct ad_op *op = batch; op != NULL && !full; op = op->next)
        full = op->err == AD_E_STORAGE_FULL;
    if (full && !__atomic_load_n(&storage_full, __ATOMIC_RELAXED)) {
        __atomic_store_n(&storage_full, 1, __ATOMIC_RELAXED);
        ad_warn("store: out of space: writes fail until there is room again");
    } else if (!full && berr == AD_E_OK && store->ops->reclaim == NULL) {
        __atomic_store_n(&storage_full, 0, __ATOMIC_RELAXED);
    }
    void (*hook)(void) = __atomic_load_n(&batch_hook, __ATOMIC_ACQUIRE);
    if (hook != NULL)
        hook();
    struct ad_list back = AD_LIST_INIT(back);
    while (batch != NULL) {
        struct ad_op *op = batch;
        batch = op->next;
        if (berr != AD_E_OK)
            op->err = berr;
        ad_list_insert(&back, &op->msg);
    }
    ad_mailbox_send_list(mailbox, &back);
    if (store->ops->after_batch != NULL)
        store->ops->after_batch(conn);
    reclaim();
}

/* Wait for an operation, or the stop. In the full state, wake every AD_WRITER_RECLAIM_MS to try to make room, so
 * that readiness comes back without a request to find out. */
static void wait_for_work(void)
{
    for (;;) {
        int full = __atomic_load_n(&storage_full, __ATOMIC_RELAXED);
        int64_t deadline = full ? ad_mono_ns() + (int64_t)AD_WRITER_RECLAIM_MS * 1000000 : AD_POOL_FOREVER;
        if (ad_pool_wait(&queue, 1, deadline) != 0 || ad_pool_stopping(&queue))
            return;
        reclaim();
    }
}

/* The writer thread (the pool's main): a batch at a time until the stop has drained the queue. */
static void writer_main(struct ad_pool *p, void *state)
{
    size_t last_batch = 0;
    for (;;) {
        wait_for_work();
        if (ad_pool_closing(&queue))
            return;
        ad_err berr;
        size_t n;
        struct ad_op *batch = gather_and_apply(last_batch, &berr, &n);
        last_batch = n;
        __atomic_add_fetch(&stat_batches, 1, __ATOMIC_RELAXED);
        __atomic_add_fetch(&stat_ops, n, __ATOMIC_RELAXED);
        commit_and_deliver(batch, berr, n);
    }
}

int ad_writer_start(struct ad_store *s, struct ad_loop *loop, char *err, size_t errlen)
{
    store = s;
    conn = s->ops->connect(s, err, errlen);
    if (conn == NULL)
        return -1;
    if (loop != deliver_loop) { /* completions of an earlier start may still be on their way to the old one */
        deliver_loop = loop;
        mailbox = ad_mailbox_new(loop, on_messages, NULL);
        deliver_task = ad_loop_task_new(loop, deliver_run, NULL);
    }
    __atomic_store_n(&storage_full, 0, __ATOMIC_RELAXED);
    if (ad_pool_start(&queue, err, errlen) != 0) {
        s->ops->disconnect(conn);
        conn = NULL;
        return -1;
    }
    return 0;
}

void ad_writer_set_publish(void *(*publish)(struct ad_job *job), void (*settled)(void))
{
    publish_fn = publish;
    settled_fn = settled;
}

void ad_writer_set_batch_hook(void (*fn)(void))
{
    __atomic_store_n(&batch_hook, fn, __ATOMIC_RELEASE);
}

int ad_writer_storage_full(void)
{
    return __atomic_load_n(&storage_full, __ATOMIC_RELAXED);
}

int ad_writer_idle(void)
{
    return __atomic_load_n(&submitted, __ATOMIC_RELAXED) == __atomic_load_n(&delivered, __ATOMIC_RELAXED);
}

size_t ad_writer_outstanding(void)
{
    /* Read one after the other, the two counts may be one op apart for a moment, either way; never below none. */
    uint64_t back =
        __atomic_load_n(&back_submitted, __ATOMIC_RELAXED) - __atomic_load_n(&back_delivered, __ATOMIC_RELAXED);
    uint64_t all = __atomic_load_n(&submitted, __ATOMIC_RELAXED) - __atomic_load_n(&delivered, __ATOMIC_RELAXED);
    return all > back ? (size_t)(all - back) : 0;
}

void ad_writer_submit(struct ad_op *op)
{
    op->next = NULL;
    op->nchanged = 0;
    op->handed_back = 0;
    op->err = AD_E_OK;
    __atomic_add_fetch(&submitted, op_weight(op), __ATOMIC_RELAXED);
    if (ad_pool_submit(&queue, &op->item) != 0) {
        /* After the stop: a write made by the answer to a read that came back late (a complete that first read
         * its artifact). It is refused, and its done still runs on the loop. */
        __atomic_sub_fetch(&submitted, op_weight(op), __ATOMIC_RELAXED);
        op->err = AD_E_UNAVAILABLE;
        ad_writer_complete(op);
    }
}

void ad_writer_complete(struct ad_op *op)
{
    op->handed_back = 1;
    __atomic_add_fetch(&back_submitted, op_weight(op), __ATOMIC_RELAXED);
    __atomic_add_fetch(&submitted, op_weight(op), __ATOMIC_RELAXED);
    ad_mailbox_send(mailbox, &op->msg);
}

void ad_writer_stop(void)
{
    if (conn == NULL) /* not running */
        return;
    ad_pool_stop(&queue);
    store->ops->disconnect(conn);
    conn = NULL;
}

void ad_writer_stats(struct ad_writer_stats *out)
{
    out->batches = __atomic_load_n(&stat_batches, __ATOMIC_RELAXED);
    out->ops = __atomic_load_n(&stat_ops, __ATOMIC_RELAXED);
    out->apply_ns = __atomic_load_n(&stat_apply_ns, __ATOMIC_RELAXED);
    out->commit_ns = __atomic_load_n(&stat_commit_ns, __ATOMIC_RELAXED);
}

/* ---- pools of store operations (writer.h) ---- */

void *ad_op_pool_connect(struct ad_pool *p, char *err, size_t errlen)
{
    struct ad_store *s = p->data;
    return s->ops->connect(s, err, errlen);
}

void ad_op_pool_disconnect(struct ad_pool *p, void *c)
{
    struct ad_store *s = p->data;
    s->ops->disconnect(c);
}

void ad_op_pool_run(struct ad_pool *p, void *c, struct ad_pool_item *it)
{
    struct ad_op *op = AD_CONTAINER_OF(it, struct ad_op, item);
    op->err = op->apply(op, c);
    ad_writer_complete(op);
}

void ad_op_pool_drop(struct ad_pool *p, struct ad_pool_item *it)
{
    struct ad_op *op = AD_CONTAINER_OF(it, struct ad_op, item);
    op->err = AD_E_UNAVAILABLE;
    ad_writer_complete(op);
}

void ad_op_pool_submit(struct ad_pool *p, struct ad_op *op)
{
    op->next = NULL;
    op->err = AD_E_OK;
    if (ad_pool_submit(p, &op->item) != 0)
        ad_op_pool_drop(p, &op->item);
}
