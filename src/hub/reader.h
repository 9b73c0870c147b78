/*
 * reader.h - the reader threads: store reads that could stall the event loop, run on connections of their own.
 *
 * On PostgreSQL every read is a network round trip, and one that waits on a lock (another session's, or a
 * database that went away) would hold every connection of the node for as long. The loop hands such reads to a
 * small pool of threads, each with its own store connection; a read is a struct ad_op (core/writer.h) whose
 * apply runs on a reader thread and whose done runs back on the loop, through the writer's hand-back queue, so
 * completions of both kinds are run by the one mechanism (ad_writer_deliver).
 *
 * On SQLite nothing here starts: ad_hub_read (hub.h) applies the read inline on the loop's own connection. A
 * read of a local file in WAL mode never waits for the writer, and costs less than a hand-off to another
 * thread and back. What this file does not do: decide which store's reads may block (the store says,
 * ad_store_ops.reads_may_block) or write anything.
 */
#ifndef AD_READER_H
#define AD_READER_H

#include <h2o.h>
#include "core/writer.h"
#include "store/store.h"

/* Reader threads on a store whose reads may block. */
#define AD_READER_THREADS 2

/* Start the reader threads on connections of their own when store's reads may block (else nothing). 0, or -1
 * with err filled. */
int ad_reader_start(struct ad_store *store, char *err, size_t errlen);
/* Queue a read (event loop thread); its apply runs on a reader thread, its done on the loop. */
void ad_reader_submit(struct ad_op *op);
/* Finish the read each thread is in, answer the queued ones AD_E_UNAVAILABLE without reading (their done runs
 * on the loop), and stop the threads. */
void ad_reader_stop(void);

#endif
