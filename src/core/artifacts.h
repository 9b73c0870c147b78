/*
 * artifacts.h - the artifact service: one thread, on a store connection of its own, that applies the file work of
 * result artifacts (writing, hashing and fsyncing upload parts) so that file I/O never stalls the event loop, and
 * runs the collector of uploads no job refers to at start and then every artifacts.gcInterval.
 *
 * One thread, so that the parts of an upload are written in the order they came. At stop it writes the parts still
 * queued (it drains, core/pool.h), as the writer commits what it was handed: their bytes are here, and each client
 * waits for its answer (a 503 would be safe, as nothing was acknowledged, but costs the client the part again).
 * What a part is and how it is answered is api/'s (api_artifacts.c); where the bytes live is the store's.
 */
#ifndef AD_ARTIFACTS_H
#define AD_ARTIFACTS_H

#include <stddef.h>
#include <stdint.h>
#include "core/writer.h"
#include "store/store.h"

/* Start the thread on store, the collector every gc_interval_ms. 0, or -1 with err filled. */
int ad_artifacts_start(struct ad_store *store, int64_t gc_interval_ms, char *err, size_t errlen);
/* Queue op (event loop thread): its apply runs on the artifact thread with that thread's connection, its done on
 * the loop. After the stop, its done runs with AD_E_UNAVAILABLE without apply. */
void ad_artifacts_submit(struct ad_op *op);
/* Apply what is queued, then end the thread and close its connection. Nothing when it is not running. */
void ad_artifacts_stop(void);

#endif
