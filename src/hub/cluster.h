/*
 * cluster.h - keeping one node in step with the other nodes that share a cluster store (PostgreSQL).
 *
 * The store's seq order is the cluster's log of changes: every write batch of every node commits in seq
 * order (store_pg.c). Each node follows that log from the store ("the pump") and publishes what it reads:
 * the cache, long polls, parked lease requests, lease and runAt timers and SSE streams then see other
 * nodes' changes as they see their own. Announcements from other nodes (the store's change feed, heard by
 * a thread of its own) say when to read, and which parked workers to offer new jobs at once; a missed one
 * delays a change by at most a second, never loses it. On a single-node store nothing here runs.
 */
#ifndef AD_CLUSTER_H
#define AD_CLUSTER_H

#include <stddef.h>

struct ad_loop;

/* Start following the store (ad_hub.store) when it is shared by a cluster; else do nothing. 0 or -1. */
int ad_cluster_start(struct ad_loop *loop, char *err, size_t errlen);
/* 1 when the store is shared by a cluster. */
int ad_cluster_enabled(void);
/* A local change was published: read the log soon, so change streams get it in seq order (event loop). */
void ad_cluster_changed(void);
/* Stop the feed thread. */
void ad_cluster_stop(void);

#endif
