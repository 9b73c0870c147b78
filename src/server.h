/*
 * server.h - the running daemon: its configuration, store, event loop and the hooks that keep the cache,
 * waiters and timers in step with every committed change.
 *
 * One event loop thread serves HTTP and owns everything here; the writer thread (writer.h) owns the
 * store's write connection. ad_server_publish() is the single entry point for a committed change.
 */
#ifndef AD_SERVER_H
#define AD_SERVER_H

#include <h2o.h>
#include "hub/cache.h"
#include "core/config.h"
#include "store/store.h"

struct ad_server {
    struct ad_config *cfg;
    struct ad_store *store;
    struct ad_conn *rconn; /* read connection of the event loop thread */
    h2o_globalconf_t h2o;
    h2o_context_t ctx;
    h2o_accept_ctx_t accept;
    char *public_url;
    int open_mode; /* no keys configured: loopback only, tenant "default" */
    int shutting_down;
    h2o_linklist_t change_waiters; /* long polls on /v1/jobs/changes */
    h2o_linklist_t parked;         /* lease requests waiting for work */
};

extern struct ad_server ad_srv;

/* Run the daemon with cfg until SIGTERM/SIGINT. Returns the process exit status. */
int ad_server_run(struct ad_config *cfg);

/* A change committed by the writer: update the cache (takes ownership of job), then wake long polls and
 * change feeds, hand work to parked workers and arm lease/runAt timers. Returns the cache entry. */
struct ad_entry *ad_server_publish(struct ad_job *job);

/* The job for a request's tenant, from the cache or else the store: AD_E_OK with *out set, AD_E_NOT_FOUND when
 * absent or another tenant's, or the store's error (AD_E_UNAVAILABLE while the database is away). */
ad_err ad_server_lookup(const char *tenant, const char *id, struct ad_entry **out);

/* Estimated seconds until a client should look again (Retry-After), 1..30. */
int ad_server_retry_after(const struct ad_job *job);

/* runAt timers in memory now (at most limits.scheduledTimers). */
size_t ad_server_runat_timers(void);

#endif
