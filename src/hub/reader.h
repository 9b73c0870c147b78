/*
 * reader.h - the reader threads: store reads off the event loop, each thread on a store connection of its own.
 *
 * On PostgreSQL every read is a network round trip, and one that waits on a lock (another session's, or a database
 * that went away) would hold every connection of the node for as long. The loop hands such reads to a pool
 * (core/pool.h) of AD_READER_THREADS, each an op (struct ad_op, core/writer.h) whose apply runs on a reader thread
 * and whose done runs back on the loop through the writer's hand-back (ad_writer_complete), so completions of every
 * kind are run by the one mechanism (ad_writer_deliver), and none of them counts as a write
 * (ad_writer_outstanding). On SQLite nothing here starts: ad_hub_read (hub.h) applies the read inline on the loop's
 * own connection. A read of a local file in WAL mode never waits for the writer, and costs less than a hand-off to
 * another thread and back. What this file does not do: decide which store's reads may block (the store says,
 * ad_store_ops.reads_may_block) or what an op does.
 */
#ifndef AD_READER_H
#define AD_READER_H

#include <stddef.h>
#include "store/store.h"

/* Reader threads on a store whose reads may block. */
#define AD_READER_THREADS 2

/* Start the reader threads when store's reads may block (else nothing). 0, or -1 with err filled. */
int ad_reader_start(struct ad_store *store, char *err, size_t errlen);
/* Stop the reader threads: the reads still queued, and any handed in after, are answered AD_E_UNAVAILABLE (a client
 * sends a read again at no cost, and one queued behind a lock would hold the stop). */
void ad_reader_stop(void);

#endif
