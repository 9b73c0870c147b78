/*
 * server.c - the daemon: listener, event loop, shutdown, and the hooks run for every committed change
 * (cache, waiters, parked workers, lease and runAt timers, run-time estimates).
 *
 * Timers here are all in the one heap of timer.c. A lease's expiry timer hangs on its job's cache entry:
 * every published heartbeat moves it to the new expiry, and the change that ends the lease (complete, fail,
 * release, cancel) cancels it. A timer whose entry was evicted fires at the expiry it knew; if a heartbeat
 * moved it, the expire op finds the lease still live and the timer is armed again for the new time. No table
 * is ever scanned for due work.
 */
#include "server.h"
#include "api/api.h"
#include "hub/cluster.h"
#include "core/core.h"
#include "common/timer.h"
#include "http/tls.h"
#include "webhook/webhook.h"
#include "core/writer.h"

#include <errno.h>
#include <math.h>
#include <netdb.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define AD_TYPE_STATS_MAX 256
#define AD_DEFAULT_RUN_MS 5000.0
#define AD_DRAIN_MS 10000
#define AD_RECHECK_MS 1000

struct ad_server ad_srv;
static volatile sig_atomic_t stop_requested;
static struct ad_timer sweep_timer;

/* ---- run-time estimates for Retry-After ---- */

static struct {
    char *type;
    double avg_ms;
} type_stats[AD_TYPE_STATS_MAX];
static size_t ntype_stats;

static double *type_avg(const char *type, int create)
{
    for (size_t i = 0; i < ntype_stats; i++)
        if (strcmp(type_stats[i].type, type) == 0)
            return &type_stats[i].avg_ms;
    if (!create || ntype_stats == AD_TYPE_STATS_MAX)
        return NULL;
    type_stats[ntype_stats].type = ad_strdup(type);
    type_stats[ntype_stats].avg_ms = AD_DEFAULT_RUN_MS;
    return &type_stats[ntype_stats++].avg_ms;
}

int ad_server_retry_after(const struct ad_job *j)
{
    int64_t now = ad_now_ms();
    double *avg = type_avg(j->type, 0);
    double remaining = avg != NULL ? *avg : AD_DEFAULT_RUN_MS;
    if (j->status == AD_RUNNING && j->started_at != 0) {
        double elapsed = (double)(now - j->started_at);
        if (j->progress > 0)
            remaining = elapsed * (100 - j->progress) / j->progress;
        else
            remaining -= elapsed;
    } else if (j->run_at > now) {
        remaining += (double)(j->run_at - now);
    }
    double secs = ceil(remaining / 2000.0);
    return secs < 1 ? 1 : secs > 30 ? 30 : (int)secs;
}

/* ---- timers for leases and runAt ---- */

struct lease_timer {
    struct ad_timer t;
    char *id, *lease_id;
};

/* Monotonic deadline for a wall-clock time, a millisecond late: the two clocks are read apart and in whole
 * milliseconds, so without it a timer could fire just before wall_ms, when the job is not yet leasable (runAt)
 * or its lease not yet over, and the kick or check it makes would find nothing to do. */
static int64_t mono_at(int64_t wall_ms)
{
    return ad_mono_ms() + (wall_ms - ad_now_ms()) + 1;
}

static void lease_timer_fire(struct ad_timer *t);

static int holds_lease(const struct ad_job *j, const char *lease_id)
{
    return j->status == AD_RUNNING && j->lease_id != NULL && strcmp(j->lease_id, lease_id) == 0;
}

/*
 * Check lease lease_id of job id at monotonic time at. The job's cache entry e (NULL: none), while it shows that
 * lease, holds the timer (ad_entry.lease_timer), so that the change ending the lease cancels it
 * (follow_lease_timer). Without that, every finished lease stayed in memory until its expiry and then cost the
 * writer a check that changed nothing. A timer whose entry was evicted just fires and makes that check.
 */
static void arm_lease_check(struct ad_entry *e, const char *id, const char *lease_id, int64_t at)
{
    int linked = e != NULL && holds_lease(e->job, lease_id);
    if (linked && e->lease_timer != NULL)
        return; /* the entry's timer checks this lease, at its expiry (follow_lease_timer) */
    struct lease_timer *lt = ad_calloc(1, sizeof(*lt));
    lt->id = ad_strdup(id);
    lt->lease_id = ad_strdup(lease_id);
    lt->t.cb = lease_timer_fire;
    ad_timer_arm(&lt->t, at);
    if (linked)
        e->lease_timer = &lt->t;
}

static void arm_lease_timer(struct ad_entry *e, const struct ad_job *j)
{
    arm_lease_check(e, j->id, j->lease_id, mono_at(j->lease_expires_at));
}

static void lease_timer_free(struct lease_timer *lt)
{
    free(lt->id);
    free(lt->lease_id);
    free(lt);
}

/* Keep the lease timer e holds in step with e's new version: cancelled once the job no longer holds that lease,
 * else moved to the lease's expiry, which a heartbeat may have moved. Later, the timer would fire at the old one
 * and cost the writer a check that finds the lease still live; sooner (a heartbeat with a shorter leaseSeconds),
 * the lease would run out long before anything looked. */
static void follow_lease_timer(struct ad_entry *e)
{
    if (e->lease_timer == NULL)
        return;
    struct lease_timer *lt = H2O_STRUCT_FROM_MEMBER(struct lease_timer, t, e->lease_timer);
    if (holds_lease(e->job, lt->lease_id)) {
        int64_t at = mono_at(e->job->lease_expires_at);
        if (at != lt->t.at)
            ad_timer_arm(&lt->t, at);
        return;
    }
    ad_timer_cancel(&lt->t);
    lease_timer_free(lt);
    e->lease_timer = NULL;
}

static void expire_done(struct ad_op *op)
{
    struct ad_expire_op *x = (struct ad_expire_op *)op;
    if (op->err == AD_E_OK && x->job != NULL) {
        struct ad_job *j = x->job;
        x->job = NULL;
        if (holds_lease(j, x->lease_id) && !x->changed)
            arm_lease_timer(ad_cache_get(j->id), j);
        if (x->changed)
            ad_server_publish(j);
        else
            ad_job_free(j);
    } else if (op->err != AD_E_OK && op->err != AD_E_NOT_FOUND) {
        /* The store is away: look again soon, or the lease would never run out. */
        arm_lease_check(ad_cache_get(x->id), x->id, x->lease_id, ad_mono_ms() + AD_RECHECK_MS);
    }
    ad_op_free(op);
}

static void lease_timer_fire(struct ad_timer *t)
{
    struct lease_timer *lt = H2O_STRUCT_FROM_MEMBER(struct lease_timer, t, t);
    struct ad_entry *e = ad_cache_get(lt->id);
    if (e != NULL && e->lease_timer == t)
        e->lease_timer = NULL;
    struct ad_expire_op *x = ad_expire_op_new();
    x->id = lt->id;
    x->lease_id = lt->lease_id;
    x->now = ad_now_ms();
    x->op.done = expire_done;
    free(lt);
    ad_writer_submit(&x->op);
}

/*
 * runAt. A job queued with a future runAt gets a timer that kicks a parked lease of its tenant and type when it
 * comes due. At most limits.scheduledTimers of them are in memory at once; past that, jobs wait in the store
 * behind a horizon. Every queued job whose key (run_at, cseq) is at or before the horizon has its timer (or was
 * kicked); when the horizon comes due, runat_refill reads the next page past it from the store (job_scheduled,
 * an index range, never a scan). So a million jobs scheduled for tomorrow hold a page of timers, not a million,
 * and the ones a restart finds are read the same way.
 */
struct runat_timer {
    struct ad_timer t;
    h2o_linklist_t link; /* in runat.armed */
    int64_t run_at, cseq;
    char *tenant, *type;
};

/* Jobs read from the store per refill: one refill holds the event loop for about a millisecond per 200. */
#define AD_RUNAT_PAGE 1000

static struct {
    h2o_linklist_t armed; /* struct runat_timer */
    size_t n;
    int64_t horizon_at, horizon_cseq; /* both INT64_MAX: every scheduled job has its timer */
    struct ad_timer refill;           /* armed at horizon_at while there is a horizon */
} runat = {.armed = {&runat.armed, &runat.armed}, .horizon_at = INT64_MAX, .horizon_cseq = INT64_MAX};

static int runat_beyond(int64_t run_at, int64_t cseq)
{
    return run_at > runat.horizon_at || (run_at == runat.horizon_at && cseq > runat.horizon_cseq);
}

static void runat_unlink(struct runat_timer *rt)
{
    h2o_linklist_unlink(&rt->link);
    runat.n--;
}

static void runat_free(struct runat_timer *rt)
{
    free(rt->tenant);
    free(rt->type);
    free(rt);
}

static void runat_fire(struct ad_timer *t)
{
    struct runat_timer *rt = H2O_STRUCT_FROM_MEMBER(struct runat_timer, t, t);
    runat_unlink(rt);
    ad_api_leases_kick(rt->tenant, rt->type);
    runat_free(rt);
}

static void runat_arm(const struct ad_job *j)
{
    struct runat_timer *rt = ad_calloc(1, sizeof(*rt));
    rt->run_at = j->run_at;
    rt->cseq = j->cseq;
    rt->tenant = ad_strdup(j->tenant);
    rt->type = ad_strdup(j->type);
    rt->t.cb = runat_fire;
    h2o_linklist_insert(&runat.armed, &rt->link);
    runat.n++;
    ad_timer_arm(&rt->t, mono_at(j->run_at));
}

/* Put the horizon at (run_at, cseq); the refill runs when it comes due (at once for one already due). */
static void runat_set_horizon(int64_t run_at, int64_t cseq)
{
    runat.horizon_at = run_at;
    runat.horizon_cseq = cseq;
    int64_t at = mono_at(run_at), now = ad_mono_ms();
    ad_timer_arm(&runat.refill, at > now ? at : now);
}

/* A job that has just become queued with a future runAt. */
static void runat_schedule(const struct ad_job *j)
{
    if (runat_beyond(j->run_at, j->cseq))
        return; /* a refill will read it */
    if (runat.n < ad_srv.cfg->scheduled_timers)
        runat_arm(j);
    else
        runat_set_horizon(j->run_at, j->cseq - 1); /* the timers already armed stay under the horizon */
}

static void runat_refill(struct ad_timer *t)
{
    /* The timers past the horizon (armed before it came down) are read again below: drop them first, so that
     * none is kept twice. */
    for (h2o_linklist_t *l = runat.armed.next; l != &runat.armed;) {
        struct runat_timer *rt = H2O_STRUCT_FROM_MEMBER(struct runat_timer, link, l);
        l = l->next;
        if (runat_beyond(rt->run_at, rt->cseq)) {
            ad_timer_cancel(&rt->t);
            runat_unlink(rt);
            runat_free(rt);
        }
    }
    size_t room = ad_srv.cfg->scheduled_timers - runat.n;
    int limit = room < AD_RUNAT_PAGE ? (int)room : AD_RUNAT_PAGE;
    struct ad_job_list l = {0};
    if (limit == 0 ||
        ad_srv.store->ops->job_scheduled(ad_srv.rconn, runat.horizon_at, runat.horizon_cseq, limit, &l) != AD_E_OK) {
        /* Full of timers that are due now and about to fire, or the store is away: look again soon. */
        ad_timer_arm(&runat.refill, ad_mono_ms() + (limit == 0 ? 1 : AD_RECHECK_MS));
        return;
    }
    int64_t now = ad_now_ms();
    for (size_t i = 0; i < l.n; i++) {
        if (l.items[i]->run_at <= now)
            ad_api_leases_kick(l.items[i]->tenant, l.items[i]->type);
        else
            runat_arm(l.items[i]);
    }
    if (l.n == (size_t)limit) {
        runat_set_horizon(l.items[l.n - 1]->run_at, l.items[l.n - 1]->cseq);
    } else {
        runat.horizon_at = runat.horizon_cseq = INT64_MAX;
        ad_timer_cancel(&runat.refill);
    }
    ad_job_list_free(&l);
}

size_t ad_server_runat_timers(void)
{
    return runat.n;
}

/* ---- publishing committed changes ---- */

struct ad_entry *ad_server_publish(struct ad_job *job)
{
    /* The version this one replaces, if it was cached: what changed decides the timers and kicks below. */
    struct ad_job *prev;
    int changed;
    struct ad_entry *e = ad_cache_put(job, &changed, &prev);
    if (changed) {
        enum ad_status prev_status = prev != NULL ? prev->status : AD_STATUS__COUNT;
        const struct ad_job *j = e->job;
        ad_api_changes_notify(j->tenant);
        if (ad_cluster_enabled())
            ad_cluster_changed(); /* the change streams follow the store's seq order (cluster.c) */
        else
            ad_api_events_notify(j, e->body, e->len);
        if (j->status == AD_QUEUED && prev_status != AD_QUEUED) {
            if (j->run_at > ad_now_ms())
                runat_schedule(j);
            else
                ad_api_leases_kick(j->tenant, j->type);
        }
        /* A running job's entry holds the timer of its lease; one read back from the store after an eviction
         * gets its own here (the evicted entry's still fires, at the expiry it knew, and checks). */
        follow_lease_timer(e);
        if (j->status == AD_RUNNING && j->lease_id != NULL && e->lease_timer == NULL)
            arm_lease_timer(e, j);
        if (ad_status_terminal(j->status) && !ad_status_terminal(prev_status) && j->started_at != 0 &&
            j->status == AD_SUCCEEDED) {
            double *avg = type_avg(j->type, 1);
            if (avg != NULL)
                *avg = 0.8 * *avg + 0.2 * (double)(j->finished_at - j->started_at);
        }
    }
    ad_job_free(prev);
    return e;
}

ad_err ad_server_lookup(const char *tenant, const char *id, struct ad_entry **out)
{
    struct ad_entry *e = ad_cache_get(id);
    *out = NULL;
    if (e == NULL) {
        struct ad_job *j;
        ad_err err = ad_srv.store->ops->job_get(ad_srv.rconn, NULL, id, &j);
        if (err != AD_E_OK)
            return err;
        int changed;
        e = ad_cache_put(j, &changed, NULL);
    }
    if (strcmp(e->job->tenant, tenant) != 0)
        return AD_E_NOT_FOUND;
    *out = e;
    return AD_E_OK;
}

/* ---- retention sweeper ---- */

static void sweep_done(struct ad_op *op)
{
    struct ad_sweep_op *x = (struct ad_sweep_op *)op;
    /* A full batch means more is due: go again at once, else wait for the next period. */
    int64_t next = x->done >= AD_SWEEP_BATCH ? 0 : ad_srv.cfg->sweep_interval_ms;
    ad_op_free(op);
    if (!ad_srv.shutting_down)
        ad_timer_arm(&sweep_timer, ad_mono_ms() + next);
}

static void sweep_fire(struct ad_timer *t)
{
    struct ad_sweep_op *x = ad_sweep_op_new();
    x->now = ad_now_ms();
    x->op.done = sweep_done;
    ad_writer_submit(&x->op);
}

/* ---- start-up ---- */

/* Re-arm the timers that live only in memory: every running lease, and the first page of scheduled jobs (the
 * ones already due need no kick: no lease is parked yet, and a lease request reads the store). */
static int recover_timers(void)
{
    struct ad_job_list l = {0};
    if (ad_srv.store->ops->job_running(ad_srv.rconn, &l) != AD_E_OK)
        return -1;
    for (size_t i = 0; i < l.n; i++)
        if (l.items[i]->lease_id != NULL)
            arm_lease_timer(NULL, l.items[i]);
    size_t leases = l.n;
    ad_job_list_free(&l);
    runat.refill.cb = runat_refill;
    runat.horizon_at = ad_now_ms();
    runat.horizon_cseq = INT64_MAX;
    runat_refill(&runat.refill);
    if (leases != 0 || runat.n != 0)
        ad_info("recovered %zu running leases and %zu scheduled jobs%s", leases, runat.n,
                ad_timer_armed(&runat.refill) ? " (more are read as they come due)" : "");
    return 0;
}

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
    if (nconnections-- == (size_t)ad_srv.cfg->max_connections && !ad_srv.shutting_down)
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
    if (++nconnections == (size_t)ad_srv.cfg->max_connections)
        h2o_socket_read_stop(listener);
    h2o_accept(&ad_srv.accept, sock);
}

/* One turn of the event loop: wait for events up to max_wait ms (not at all while writer completions are
 * waiting), handle them and a chunk of the completions, then run the timers that are due. */
static void loop_turn(h2o_loop_t *loop, int32_t max_wait)
{
    h2o_evloop_run(loop, max_wait);
    ad_writer_turn();
    ad_timers_run();
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
    memset(&ad_srv, 0, sizeof(ad_srv));
    ad_srv.cfg = cfg;
    h2o_linklist_init_anchor(&ad_srv.change_waiters);
    h2o_linklist_init_anchor(&ad_srv.parked);
    ad_srv.open_mode = cfg->nkeys == 0;
    if (ad_srv.open_mode && !is_loopback_host(cfg->listen_host))
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
    ad_srv.store = ad_store_open(cfg->store != NULL ? cfg->store : cfg->data_dir, err, sizeof(err));
    if (ad_srv.store == NULL) {
        ad_error("cannot open the store: %s", err);
        return 1;
    }
    ad_srv.rconn = ad_srv.store->ops->connect(ad_srv.store, err, sizeof(err));
    if (ad_srv.rconn == NULL) {
        ad_error("cannot connect to the store: %s", err);
        return 1;
    }
    ad_core_init(cfg, ad_srv.store);
    ad_cache_init(cfg->cache_bytes);

    h2o_config_init(&ad_srv.h2o);
    ad_srv.h2o.server_name = h2o_iovec_init(H2O_STRLIT("acceptd"));
    /* h2o itself answers bodies beyond this; below it, our own 413 problem does (api.c). */
    ad_srv.h2o.max_request_entity_size = cfg->max_body_bytes + 64 * 1024;
    h2o_hostconf_t *host = h2o_config_register_host(&ad_srv.h2o, h2o_iovec_init(H2O_STRLIT("default")), 65535);
    h2o_pathconf_t *path = h2o_config_register_path(host, "/", 0);
    h2o_handler_t *handler = h2o_create_handler(path, sizeof(*handler));
    handler->on_req = ad_api_on_req;
    ad_http_register_problem_filter(path, cfg->max_body_bytes);
    ad_http_register_problem_filter(&host->fallback_path, cfg->max_body_bytes);

    h2o_loop_t *loop = h2o_evloop_create();
    h2o_context_init(&ad_srv.ctx, loop, &ad_srv.h2o);
    ad_srv.accept.ctx = &ad_srv.ctx;
    ad_srv.accept.hosts = ad_srv.h2o.hosts;
    if (cfg->tls.cert != NULL || cfg->tls.key != NULL) {
        ad_srv.accept.ssl_ctx = ad_tls_context(&cfg->tls, err, sizeof(err));
        if (ad_srv.accept.ssl_ctx == NULL) {
            ad_error("%s", err);
            return 1;
        }
    }
    const char *scheme = ad_srv.accept.ssl_ctx != NULL ? "https" : "http";

    if (ad_writer_start(ad_srv.store, loop, err, sizeof(err)) != 0) {
        ad_error("cannot start the writer: %s", err);
        return 1;
    }
    if (ad_api_events_init(err, sizeof(err)) != 0) {
        ad_error("%s", err);
        return 1;
    }
    if (ad_cluster_start(loop, err, sizeof(err)) != 0) {
        ad_error("%s", err);
        return 1;
    }
    if (recover_timers() != 0) {
        ad_error("cannot read running leases from the store");
        return 1;
    }
    if (ad_cluster_enabled() && (cfg->signing_key == NULL || cfg->webhooks.secret_key == NULL))
        ad_warn("cluster mode: configure signingKey and webhooks.secretKey, the same on every node; without them "
                "each node keeps its own keys in %s and cannot check the others' signed URLs or read the "
                "webhook secrets they stored",
                cfg->data_dir);
    sweep_timer.cb = sweep_fire;
    ad_timer_arm(&sweep_timer, ad_mono_ms() + cfg->sweep_interval_ms);

    char bound[300];
    int fd = open_listener(cfg, bound, sizeof(bound));
    if (fd < 0)
        return 1;
    ad_srv.public_url = cfg->public_url != NULL ? ad_strdup(cfg->public_url) : ad_asprintf("%s://%s", scheme, bound);
    if (ad_webhook_start(cfg, ad_srv.store, ad_srv.public_url, err, sizeof(err)) != 0) {
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

    if (ad_srv.open_mode)
        ad_warn("no keys configured: serving loopback clients only, all as tenant \"default\"");
    /* The URL may carry a password: name the backend only. */
    if (cfg->store != NULL)
        ad_info("store: %s (cluster mode), keys in %s", ad_srv.store->ops->name, cfg->data_dir);
    else
        ad_info("store: %s in %s", ad_srv.store->ops->name, cfg->data_dir);
    printf("acceptd: listening on %s://%s\n", scheme, bound);
    fflush(stdout);

    while (!stop_requested)
        loop_turn(loop, ad_timers_next_wait(200));

    /* Graceful stop: no new connections; everything already handed to the writer is committed and its
     * answer sent before the process exits. */
    ad_info("shutting down");
    ad_srv.shutting_down = 1;
    ad_api_events_shutdown();
    h2o_socket_read_stop(listener);
    h2o_socket_close(listener);
    /* New writes are refused with 503 from here on (api.c); what was accepted is committed and answered. */
    int64_t drain_until = ad_mono_ms() + AD_DRAIN_MS;
    while (!ad_writer_idle() && ad_mono_ms() < drain_until)
        loop_turn(loop, 20);
    ad_webhook_stop();
    ad_cluster_stop();
    ad_writer_stop();
    struct ad_writer_stats ws;
    ad_writer_stats(&ws);
    ad_info("writer: %llu operations in %llu batches; %.1f ms applying, %.1f ms committing", (unsigned long long)ws.ops,
            (unsigned long long)ws.batches, ws.apply_ns / 1e6, ws.commit_ns / 1e6);
    int64_t until = ad_mono_ms() + 500;
    while (ad_mono_ms() < until)
        loop_turn(loop, 50);
    ad_srv.store->ops->disconnect(ad_srv.rconn);
    ad_srv.store->ops->close(ad_srv.store);
    ad_info("stopped");
    return 0;
}
