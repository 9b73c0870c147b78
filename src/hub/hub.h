/*
 * hub.h - the node's shared state and the one path every committed change takes: the cache, the lease and
 * runAt timers, the retention sweep, run-time estimates, and the listeners that react to a change.
 *
 * The event loop thread owns everything here; the writer thread (core/writer.h) owns the store's write
 * connection. ad_hub_publish() is the single entry point for a committed change: after each commit the writer
 * hands what changed to the hub (ad_hub_start registers with ad_writer_set_publish, and the writer publishes each
 * job an operation changed before its done() runs), and the cluster follower (cluster.h) publishes what it reads
 * from a shared store. No handler publishes by hand: done() callbacks answer with the entries published for their
 * operation (ad_op_published). What reacts to changes above this layer (long polls, SSE streams, parked lease
 * requests, the change feed) registers an ad_hub_listener at start; nothing here calls up into api/.
 *
 * Timers are all in the one heap of common/timer.c. A lease's expiry timer hangs on its job's cache entry:
 * every published heartbeat moves it to the new expiry, and the change that ends the lease (complete, fail,
 * release, cancel) cancels it. A timer whose entry was evicted fires at the expiry it knew; if a heartbeat
 * moved it, the expire op finds the lease still live and the timer is armed again for the new time. No table
 * is ever scanned for due work.
 */
#ifndef AD_HUB_H
#define AD_HUB_H

#include "core/config.h"
#include "hub/cache.h"
#include "store/store.h"

struct ad_op;

struct ad_hub {
    struct ad_config *cfg;
    struct ad_store *store;
    struct ad_conn *rconn; /* read connection of the event loop thread */
    char *public_url;
    int open_mode; /* no keys configured: loopback only, tenant "default" */
    int shutting_down;
};

extern struct ad_hub ad_hub;

/* What reacts to published changes, registered once at start (event loop thread). Any member may be NULL. */
struct ad_hub_listener {
    /* A job of tenant changed. */
    void (*changed)(const char *tenant);
    /* A newer version of job j is in the cache: this node's commit as it commits, another node's as the cluster
     * follower or a read of the job brings it in (the moment the job's own cached answer is replaced); not in seq
     * order, and possibly a version already heard of (a job read back after an eviction). */
    void (*published)(const struct ad_job *j);
    /* A committed change with its rendered representation, in the store's seq order (the cluster follower
     * delivers them on a shared store, publish on a node of its own). */
    void (*event)(const struct ad_job *j, const char *body, size_t len);
    /* Jobs of type may now be leasable by tenant's workers (submitted, requeued, or their runAt came). */
    void (*work)(const char *tenant, const char *type);
};
/* Add l (not copied: it must outlive the hub). At most a handful; aborts past AD_HUB_LISTENERS_MAX. */
void ad_hub_listen(const struct ad_hub_listener *l);
#define AD_HUB_LISTENERS_MAX 4

/* Tell every listener: work of type for tenant (work), or a committed change in seq order (event). */
void ad_hub_work(const char *tenant, const char *type);
void ad_hub_event(const struct ad_job *j, const char *body, size_t len);
/* The seq of the newest change handed to the event listeners (ad_hub_event), or at start the store's newest:
 * every later change reaches them. Where a change stream that starts "now" begins. */
int64_t ad_hub_event_seq(void);

/* Take the writer's committed changes (ad_writer_set_publish), arm the lease and runAt timers of what the store
 * holds, and the retention sweep. Before the event loop runs. 0, or -1 when the store cannot be read. */
int ad_hub_start(void);

/* A committed change (the writer's, through ad_writer_set_publish, or one the cluster follower read): update the
 * cache (takes ownership of job), then tell the listeners and arm lease/runAt timers. Returns the cache entry. */
struct ad_entry *ad_hub_publish(struct ad_job *job);

/*
 * Reads of the store from the event loop go through these two, which never stall it (issue 37): a read that could
 * wait on the network goes to the reader threads (reader.h) and answers later; one that cannot runs at once.
 *
 * ad_hub_read: run a read op, a struct ad_op (core/writer.h) whose apply reads on the connection it is given and
 * whose done runs on the event loop thread. On a store whose reads may block (ad_store_ops.reads_may_block) it is
 * queued to the reader threads and done runs later; otherwise (SQLite) apply and done both run before it returns.
 */
void ad_hub_read(struct ad_op *op);

/* The job for a request's tenant, from the cache or else the store: AD_E_OK with *out set, AD_E_NOT_FOUND when
 * absent or another tenant's (tenant NULL: any), or the store's error (AD_E_UNAVAILABLE while the database is away). A
 * cache hit answers at once: 1 with *err and *out set (*out NULL on an error). A miss reads the store through
 * ad_hub_read: on SQLite that too answers at once; on a store whose reads may block it returns 0, and
 * found(arg, err, e) runs later on the event loop thread (arg is not freed here). */
int ad_hub_lookup(const char *tenant, const char *id, ad_err *err, struct ad_entry **out,
                  void (*found)(void *arg, ad_err err, struct ad_entry *e), void *arg);

/* Estimated seconds until a client should look again (Retry-After), 1..30. */
int ad_hub_retry_after(const struct ad_job *job);

/* runAt timers in memory now (at most limits.scheduledTimers). */
size_t ad_hub_runat_timers(void);

#endif
