/*
 * server.c - the daemon's wiring: it opens the store, starts the services in one order, runs the event loop, and
 * stops them on SIGTERM:
 *
 *   start: the writer, the readers, the artifact service, api's listeners, the cluster follower, the hub's timers,
 *          the HTTP listener, webhook delivery; then the loop runs.
 *   stop:  SSE streams and the listener (HTTP/2 connections get GOAWAY); the writer's queue drained by the loop
 *          (answers go out); the artifact service (drains), webhook delivery, the cluster follower, the readers
 *          (drop), the writer (drains); the loop for the answers still being written: half a second, and until
 *          the HTTP/2 connections have ended, at most two.
 *
 * Each thread-owning service is a pool of core/pool.h (api/ starts no threads). The loop is core/loop.h's, run a
 * turn at a time here; nothing in this file names libh2o.
 *
 * Nothing here decides anything about jobs or HTTP; each layer does its own work (README, "Layout").
 */
#include "server.h"
#include "api/api.h"
#include "common/signals.h"
#include "common/timer.h"
#include "core/artifacts.h"
#include "core/core.h"
#include "hub/cluster.h"
#include "core/schedules.h"
#include "hub/hub.h"
#include "hub/reader.h"
#include "http/http.h"
#include "http/listen.h"
#include "webhook/webhook.h"
#include "core/loop.h"
#include "core/tracer.h"
#include "core/writer.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define AD_DRAIN_MS 10000
#define AD_FLUSH_MS 500
#define AD_GOAWAY_MS 2000 /* libh2o's second GOAWAY comes after a second: room for it, then a connection's close */

/* One turn of the event loop: wait for events up to max_wait ms (not at all while writer completions are
 * waiting), handle them and a chunk of the completions, run the timers that are due, then the socket callbacks
 * those left pending, before the loop polls again (ad_http_run_pending). */
static void loop_turn(struct ad_loop *loop, int32_t max_wait)
{
    ad_loop_run(loop, max_wait);
    ad_timers_run();
    ad_http_run_pending(loop);
}

/* Every committed change reaches the schedules: a run that ended starts the bufferOne run held behind it. */
static void schedules_event(const struct ad_job *j, const char *body, size_t len)
{
    (void)body;
    (void)len;
    ad_schedules_job_event(j);
}

static int is_loopback_host(const char *h)
{
    return strncmp(h, "127.", 4) == 0 || strcmp(h, "::1") == 0 || strcmp(h, "localhost") == 0;
}

int ad_server_run(struct ad_config *cfg)
{
    char err[256];
    ad_log_set_json(cfg->log.json);
    ad_hub.cfg = cfg;
    ad_hub.open_mode = cfg->nkeys == 0;
    if (ad_hub.open_mode && !is_loopback_host(cfg->listen_host))
        ad_warn("no keys configured: only loopback clients are served although listening on %s", cfg->listen_host);

    /* With a database for the store, the data directory still keeps the node's own keys (when none are
     * configured). The SQLite store makes it itself. */
    if (cfg->store != NULL && ad_mkdir_p(cfg->data_dir) != 0) {
        ad_error("cannot create data directory %s: %s", cfg->data_dir, strerror(errno));
        return 1;
    }
    /* One node per data directory here too: its keys and its webhook claims (webhook.c) are its own. */
    if (cfg->store != NULL && ad_lock_dir(cfg->data_dir) < 0) {
        ad_error("cannot open the store: data directory %s is in use by another acceptd (%s)", cfg->data_dir,
                 strerror(errno));
        return 1;
    }
    ad_hub.store = ad_store_open(cfg->store != NULL ? cfg->store : cfg->data_dir, err, sizeof(err));
    if (ad_hub.store == NULL) {
        ad_error("cannot open the store: %s", err);
        return 1;
    }
    ad_hub.rconn = ad_hub.store->ops->connect(ad_hub.store, err, sizeof(err));
    if (ad_hub.rconn == NULL) {
        ad_error("cannot connect to the store: %s", err);
        return 1;
    }
    ad_core_init(cfg, ad_hub.store);
    ad_cache_init(cfg->cache_bytes);

    struct ad_loop *loop = ad_loop_new();

    if (ad_tracer_start(cfg, err, sizeof(err)) != 0) {
        ad_error("cannot start the trace export: %s", err);
        return 1;
    }
    if (ad_writer_start(ad_hub.store, loop, err, sizeof(err)) != 0) {
        ad_error("cannot start the writer: %s", err);
        return 1;
    }
    if (ad_reader_start(ad_hub.store, err, sizeof(err)) != 0) {
        ad_error("cannot start the readers: %s", err);
        return 1;
    }
    if (ad_artifacts_start(ad_hub.store, cfg->artifacts.gc_interval_ms, err, sizeof(err)) != 0) {
        ad_error("cannot start the artifact service: %s", err);
        return 1;
    }
    if (ad_api_init(err, sizeof(err)) != 0) {
        ad_error("%s", err);
        return 1;
    }
    if (ad_cluster_start(loop, err, sizeof(err)) != 0) {
        ad_error("%s", err);
        return 1;
    }
    if (ad_hub_start() != 0) {
        ad_error("cannot read running leases from the store");
        return 1;
    }
    static const struct ad_hub_listener schedules_listener = {.event = schedules_event};
    ad_hub_listen(&schedules_listener);
    ad_schedules_start(ad_cluster_enabled());
    if (ad_cluster_enabled() && (cfg->signing_key == NULL || cfg->webhooks.secret_key == NULL))
        ad_warn("cluster mode: configure signingKey and webhooks.secretKey, the same on every node; without them "
                "each node keeps its own keys in %s and cannot check the others' signed URLs or read the "
                "webhook secrets they stored",
                cfg->data_dir);

    char bound[300];
    const char *scheme;
    if (ad_http_listen(loop, cfg, ad_api_on_req, bound, sizeof(bound), &scheme, err, sizeof(err)) != 0) {
        ad_error("%s", err);
        return 1;
    }
    ad_hub.public_url = cfg->public_url != NULL ? ad_strdup(cfg->public_url) : ad_asprintf("%s://%s", scheme, bound);
    if (ad_webhook_start(cfg, ad_hub.store, ad_hub.public_url, err, sizeof(err)) != 0) {
        ad_error("cannot start webhook delivery: %s", err);
        return 1;
    }

    /* The loop wakes at least every 200 ms and reads the count; it does not watch the pipe. */
    if (ad_signals_open(0) != 0) {
        ad_error("cannot create a pipe: %s", strerror(errno));
        return 1;
    }

    if (ad_hub.open_mode)
        ad_warn("no keys configured: serving loopback clients only, all as tenant \"default\"");
    /* The URL may carry a password: name the backend only. */
    if (cfg->store != NULL)
        ad_info("store: %s (cluster mode), keys in %s", ad_hub.store->ops->name, cfg->data_dir);
    else
        ad_info("store: %s in %s", ad_hub.store->ops->name, cfg->data_dir);
    printf("acceptd: listening on %s://%s\n", scheme, bound);
    fflush(stdout);

    while (ad_signals_stops() == 0)
        loop_turn(loop, ad_timers_next_wait(200));

    /* Graceful stop: no new connections; everything already handed to the writer is committed and its
     * answer sent before the process exits. */
    ad_info("shutting down");
    ad_hub.shutting_down = 1;
    ad_schedules_stop();
    ad_api_shutdown();
    ad_http_listen_stop();
    /* New writes are refused with 503 from here on (api.c); what was accepted is committed and answered. */
    int64_t drain_until = ad_mono_ms() + AD_DRAIN_MS;
    while (!ad_writer_idle() && ad_mono_ms() < drain_until)
        loop_turn(loop, 20);
    ad_artifacts_stop();
    ad_webhook_stop();
    ad_cluster_stop();
    ad_reader_stop();
    ad_writer_stop();
    ad_tracer_stop();
    struct ad_writer_stats ws;
    ad_writer_stats(&ws);
    ad_info("writer: %llu operations in %llu batches; %.1f ms applying, %.1f ms committing", (unsigned long long)ws.ops,
            (unsigned long long)ws.batches, ws.apply_ns / 1e6, ws.commit_ns / 1e6);
    /* The last answers: HTTP/2 ones are written on a later turn, and a client whose connection is closed under it
     * may drop answers it has received but not yet read. So the HTTP/2 connections are left to end themselves
     * after their GOAWAY (libh2o sends a second one with the last stream a second later and closes each once its
     * streams are done), for at most AD_GOAWAY_MS (a long poll still waiting is cut off then); and HTTP/1 answers,
     * whose writes cannot be seen from here, get half a second whatever. Without either, a burst of submits over
     * HTTP/2 loses 202s (tests/blackbox/durability.test.mjs). */
    int64_t start = ad_mono_ms(), until = start + AD_GOAWAY_MS;
    while (ad_mono_ms() < until && (ad_mono_ms() < start + AD_FLUSH_MS || !ad_http_listen_idle()))
        loop_turn(loop, 50);
    ad_hub.store->ops->disconnect(ad_hub.rconn);
    ad_hub.store->ops->close(ad_hub.store);
    ad_signals_close();
    ad_info("stopped");
    return 0;
}
