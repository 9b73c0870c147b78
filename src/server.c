/*
 * server.c - the daemon's wiring: it opens the store, starts the layers in order (writer, hub, cluster
 * follower, webhook delivery, HTTP), runs the event loop, and stops them in reverse order on SIGTERM.
 *
 * Nothing here decides anything about jobs or HTTP; each layer does its own work (README, "Layout").
 */
#include "server.h"
#include "api/api.h"
#include "common/timer.h"
#include "core/core.h"
#include "hub/cluster.h"
#include "hub/hub.h"
#include "hub/reader.h"
#include "http/tls.h"
#include "webhook/webhook.h"
#include "core/writer.h"

#include <errno.h>
#include <netdb.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define AD_DRAIN_MS 10000
#define AD_FLUSH_MS 500
#define AD_GOAWAY_MS 2000 /* libh2o's second GOAWAY comes after a second: room for it, then a connection's close */

/* h2o's configuration, context and accept context: the listener's, used nowhere else. */
static struct {
    h2o_globalconf_t h2o;
    h2o_context_t ctx;
    h2o_accept_ctx_t accept;
} srv;
static volatile sig_atomic_t stop_requested;

static int open_listener(const struct ad_config *cfg, char *bound, size_t boundlen)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE}, *res;
    char port[16];
    snprintf(port, sizeof(port), "%d", cfg->listen_port);
    int gai = getaddrinfo(cfg->listen_host, port, &hints, &res);
    if (gai != 0) {
        ad_error("cannot resolve listen address %s: %s", cfg->listen_host, gai_strerror(gai));
        return -1;
    }
    int fd = socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0), on = 1;
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on)) != 0 ||
        bind(fd, res->ai_addr, res->ai_addrlen) != 0 || listen(fd, SOMAXCONN) != 0) {
        ad_error("cannot listen on %s:%d: %s", cfg->listen_host, cfg->listen_port, strerror(errno));
        if (fd >= 0)
            close(fd);
        freeaddrinfo(res);
        return -1;
    }
    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);
    getsockname(fd, (struct sockaddr *)&ss, &sl);
    char host[NI_MAXHOST], serv[NI_MAXSERV];
    getnameinfo((struct sockaddr *)&ss, sl, host, sizeof(host), serv, sizeof(serv), NI_NUMERICHOST | NI_NUMERICSERV);
    snprintf(bound, boundlen, ss.ss_family == AF_INET6 ? "[%s]:%s" : "%s:%s", host, serv);
    freeaddrinfo(res);
    return fd;
}

/* limits.maxConnections: at the cap the listener stops accepting, so further clients wait in the kernel's
 * backlog instead of being refused, and it resumes as soon as a connection closes. */
static h2o_socket_t *listener_sock;
static size_t nconnections;

static void on_accept(h2o_socket_t *listener, const char *err);

static void on_connection_close(void *data)
{
    ad_http_conn_closed(data);
    if (nconnections-- == (size_t)ad_hub.cfg->max_connections && !ad_hub.shutting_down)
        h2o_socket_read_start(listener_sock, on_accept);
}

static void on_accept(h2o_socket_t *listener, const char *err)
{
    if (err != NULL)
        return;
    h2o_socket_t *sock = h2o_evloop_socket_accept(listener);
    if (sock == NULL)
        return;
    sock->on_close.cb = on_connection_close;
    sock->on_close.data = ad_http_conn_open(sock);
    if (++nconnections == (size_t)ad_hub.cfg->max_connections)
        h2o_socket_read_stop(listener);
    h2o_accept(&srv.accept, sock);
}

/* One turn of the event loop: wait for events up to max_wait ms (not at all while writer completions are
 * waiting), handle them and a chunk of the completions, run the timers that are due, then the socket callbacks
 * those two left pending, before the loop polls again (ad_http_run_pending). */
static void loop_turn(h2o_loop_t *loop, int32_t max_wait)
{
    h2o_evloop_run(loop, max_wait);
    ad_writer_turn();
    ad_timers_run();
    ad_http_run_pending(loop);
}

static void on_signal(int sig)
{
    stop_requested = 1;
}

static int is_loopback_host(const char *h)
{
    return strncmp(h, "127.", 4) == 0 || strcmp(h, "::1") == 0 || strcmp(h, "localhost") == 0;
}

int ad_server_run(struct ad_config *cfg)
{
    char err[256];
    ad_log_set_json(cfg->log.json);
    if (ad_http_pool_check(err, sizeof(err)) != 0) {
        ad_error("cannot start: %s", err);
        return 1;
    }
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

    h2o_config_init(&srv.h2o);
    srv.h2o.server_name = h2o_iovec_init(H2O_STRLIT("acceptd"));
    /* h2o itself answers bodies beyond this; below it, our own 413 problem does (api.c, api_artifacts.c). */
    srv.h2o.max_request_entity_size =
        (cfg->max_upload_part_bytes > cfg->max_body_bytes ? cfg->max_upload_part_bytes : cfg->max_body_bytes) +
        64 * 1024;
    h2o_hostconf_t *host = h2o_config_register_host(&srv.h2o, h2o_iovec_init(H2O_STRLIT("default")), 65535);
    h2o_pathconf_t *path = h2o_config_register_path(host, "/", 0);
    ad_http_register_guard(path);
    h2o_handler_t *handler = h2o_create_handler(path, sizeof(*handler));
    handler->on_req = ad_api_on_req;
    ad_http_register_problem_filter(path, cfg->max_body_bytes, cfg->max_upload_part_bytes);
    ad_http_register_problem_filter(&host->fallback_path, cfg->max_body_bytes, cfg->max_upload_part_bytes);
    ad_http_register_logger(path, cfg->log.access_log);
    ad_http_register_logger(&host->fallback_path, cfg->log.access_log);

    h2o_loop_t *loop = h2o_evloop_create();
    h2o_context_init(&srv.ctx, loop, &srv.h2o);
    srv.accept.ctx = &srv.ctx;
    srv.accept.hosts = srv.h2o.hosts;
    if (cfg->tls.cert != NULL || cfg->tls.key != NULL) {
        srv.accept.ssl_ctx = ad_tls_context(&cfg->tls, err, sizeof(err));
        if (srv.accept.ssl_ctx == NULL) {
            ad_error("%s", err);
            return 1;
        }
    }
    const char *scheme = srv.accept.ssl_ctx != NULL ? "https" : "http";

    if (ad_writer_start(ad_hub.store, loop, err, sizeof(err)) != 0) {
        ad_error("cannot start the writer: %s", err);
        return 1;
    }
    if (ad_reader_start(ad_hub.store, err, sizeof(err)) != 0) {
        ad_error("cannot start the readers: %s", err);
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
    if (ad_cluster_enabled() && (cfg->signing_key == NULL || cfg->webhooks.secret_key == NULL))
        ad_warn("cluster mode: configure signingKey and webhooks.secretKey, the same on every node; without them "
                "each node keeps its own keys in %s and cannot check the others' signed URLs or read the "
                "webhook secrets they stored",
                cfg->data_dir);

    char bound[300];
    int fd = open_listener(cfg, bound, sizeof(bound));
    if (fd < 0)
        return 1;
    ad_hub.public_url = cfg->public_url != NULL ? ad_strdup(cfg->public_url) : ad_asprintf("%s://%s", scheme, bound);
    if (ad_webhook_start(cfg, ad_hub.store, ad_hub.public_url, err, sizeof(err)) != 0) {
        ad_error("cannot start webhook delivery: %s", err);
        return 1;
    }
    h2o_socket_t *listener = h2o_evloop_socket_create(loop, fd, H2O_SOCKET_FLAG_DONT_READ);
    listener_sock = listener;
    h2o_socket_read_start(listener, on_accept);

    struct sigaction sa = {.sa_handler = on_signal};
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);

    if (ad_hub.open_mode)
        ad_warn("no keys configured: serving loopback clients only, all as tenant \"default\"");
    /* The URL may carry a password: name the backend only. */
    if (cfg->store != NULL)
        ad_info("store: %s (cluster mode), keys in %s", ad_hub.store->ops->name, cfg->data_dir);
    else
        ad_info("store: %s in %s", ad_hub.store->ops->name, cfg->data_dir);
    printf("acceptd: listening on %s://%s\n", scheme, bound);
    fflush(stdout);

    while (!stop_requested)
        loop_turn(loop, ad_timers_next_wait(200));

    /* Graceful stop: no new connections; everything already handed to the writer is committed and its
     * answer sent before the process exits. */
    ad_info("shutting down");
    ad_hub.shutting_down = 1;
    ad_api_events_shutdown();
    h2o_socket_read_stop(listener);
    h2o_socket_close(listener);
    /* HTTP/2 clients get GOAWAY and send no new streams; HTTP/1 answers from here on close their connection. */
    h2o_context_request_shutdown(&srv.ctx);
    /* New writes are refused with 503 from here on (api.c); what was accepted is committed and answered. */
    int64_t drain_until = ad_mono_ms() + AD_DRAIN_MS;
    while (!ad_writer_idle() && ad_mono_ms() < drain_until)
        loop_turn(loop, 20);
    ad_api_artifacts_stop();
    ad_webhook_stop();
    ad_cluster_stop();
    ad_reader_stop();
    ad_writer_stop();
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
    while (ad_mono_ms() < until && (ad_mono_ms() < start + AD_FLUSH_MS || !ad_http_http2_idle(&srv.ctx)))
        loop_turn(loop, 50);
    ad_hub.store->ops->disconnect(ad_hub.rconn);
    ad_hub.store->ops->close(ad_hub.store);
    ad_info("stopped");
    return 0;
}
