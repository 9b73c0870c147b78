/*
 * artifacts.c - the artifact service (artifacts.h): a pool of store operations (core/writer.h) of one thread that
 * drains at stop, with the collector as the pool's periodic job.
 */
#include "core/artifacts.h"
#include "common/util.h"

/* The collector, on the artifact thread between parts. */
static void gc_every(struct ad_pool *p, void *conn)
{
    struct ad_store *s = p->data;
    int removed = 0;
    ad_err err = s->ops->artifact_gc(conn, &removed);
    if (err != AD_E_OK)
        ad_warn("artifacts: the collector failed: %s", ad_err_code(err));
    else if (removed > 0)
        ad_info("artifacts: removed %d uploads that no job refers to", removed);
}

static struct ad_pool io_pool = {.name = "acceptd-results", .nthreads = 1, .drain = 1, .every = gc_every, AD_OP_POOL};

int ad_artifacts_start(struct ad_store *store, int64_t gc_interval_ms, char *err, size_t errlen)
{
    io_pool.data = store;
    io_pool.every_ms = gc_interval_ms;
    return ad_pool_start(&io_pool, err, errlen);
}

void ad_artifacts_submit(struct ad_op *op)
{
    ad_op_pool_submit(&io_pool, op);
}

void ad_artifacts_stop(void)
{
    ad_pool_stop(&io_pool);
}
