/*
 * reader.c - the reader threads (reader.h), a pool of store operations (core/pool.h, core/writer.h). They are two,
 * so that a slow read (a long list) does not hold up a cache miss behind it; a read that waits on a lock still
 * waits, but on its own thread, while the loop serves what the cache holds.
 */
#include "hub/reader.h"
#include "core/writer.h"
#include "hub/hub.h"

static struct ad_pool readers = {.name = "acceptd-reader", .nthreads = AD_READER_THREADS, .drain = 0, AD_OP_POOL};

int ad_reader_start(struct ad_store *s, char *err, size_t errlen)
{
    if (!s->ops->reads_may_block)
        return 0;
    readers.data = s;
    return ad_pool_start(&readers, err, errlen);
}

void ad_reader_stop(void)
{
    ad_pool_stop(&readers);
}

void ad_hub_read(struct ad_op *op)
{
    if (ad_hub.store->ops->reads_may_block) {
        ad_op_pool_submit(&readers, op);
        return;
    }
    /* SQLite: inline, on the loop's connection (reader.h says why). */
    op->next = NULL;
    op->err = op->apply(op, ad_hub.rconn);
    op->done(op);
}
