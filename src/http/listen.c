/*
 * listen.c - the listener (listen.h): h2o's configuration, context and accept context, used nowhere else, and
 * limits.maxConnections. Each accepted connection gets the budget of the rapid-reset defence (http.h,
 * ad_http_conn_open) as the data of its socket's on_close.
 */
#include "http/listen.h"
#include "http/http.h"
#include "http/tls.h"

#include <errno.h>
#include <netdb.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static struct {
    h2o_globalconf_t h2o;
    h2o_context_t ctx;
    h2o_accept_ctx_t accept;
    h2o_socket_t *sock; /* the listener; NULL once stopped */
    size_t nconnections, max_connections;
} srv;

static int open_listener(const struct ad_config *cfg, char *bound, size_t boundlen, char *err, size_t errlen)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE}, *res;
    char port[16];
    snprintf(port, sizeof(port), "%d", cfg->listen_port);
    int gai = getaddrinfo(cfg->listen_host, port, &hints, &res);
    if (gai != 0) {
        snprintf(err, errlen, "cannot resolve listen address %s: %s", cfg->listen_host, gai_strerror(gai));
        return -1;
    }
    int fd = socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0), on = 1;
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on)) != 0 ||
        bind(fd, res->ai_addr, res->ai_addrlen) != 0 || listen(fd, SOMAXCONN) != 0) {
        snprintf(err, errlen, "cannot listen on %s:%d: %s", cfg->listen_host, cfg->listen_port, strerror(errno));
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

static void on_accept(h2o_socket_t *listener, const char *err);

static void on_connection_close(void *data)
{
    ad_http_conn_closed(data);
    if (srv.nconnections-- == srv.max_connections && srv.sock != NULL)
        h2o_socket_read_start(srv.sock, on_accept);
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
    if (++srv.nconnections == srv.max_connections)
        h2o_socket_read_stop(listener);
    h2o_accept(&srv.accept, sock);
}

int ad_http_listen(struct ad_loop *loop, const struct ad_config *cfg, int (*on_req)(h2o_handler_t *, h2o_req_t *),
                   char *bound, size_t boundlen, const char **scheme, char *err, size_t errlen)
{
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
    handler->on_req = on_req;
    ad_http_register_problem_filter(path, cfg->max_body_bytes, cfg->max_upload_part_bytes);
    ad_http_register_problem_filter(&host->fallback_path, cfg->max_body_bytes, cfg->max_upload_part_bytes);
    ad_http_register_logger(path, cfg->log.access_log);
    ad_http_register_logger(&host->fallback_path, cfg->log.access_log);

    h2o_context_init(&srv.ctx, ad_loop_h2o(loop), &srv.h2o);
    srv.accept.ctx = &srv.ctx;
    srv.accept.hosts = srv.h2o.hosts;
    if (cfg->tls.cert != NULL || cfg->tls.key != NULL) {
        srv.accept.ssl_ctx = ad_tls_context(&cfg->tls, err, errlen);
        if (srv.accept.ssl_ctx == NULL)
            return -1;
    }
    *scheme = srv.accept.ssl_ctx != NULL ? "https" : "http";
    int fd = open_listener(cfg, bound, boundlen, err, errlen);
    if (fd < 0)
        return -1;
    srv.max_connections = (size_t)cfg->max_connections;
    ad_http_configure_unsent(cfg->max_unsent_per_conn, cfg->max_unsent, cfg->unsent_stall_ms);
    srv.sock = h2o_evloop_socket_create(ad_loop_h2o(loop), fd, H2O_SOCKET_FLAG_DONT_READ);
    h2o_socket_read_start(srv.sock, on_accept);
    return 0;
}

void ad_http_listen_stop(void)
{
    if (srv.sock == NULL)
        return;
    h2o_socket_read_stop(srv.sock);
    h2o_socket_close(srv.sock);
    srv.sock = NULL;
    h2o_context_request_shutdown(&srv.ctx);
}

int ad_http_listen_idle(void)
{
    return ad_http_http2_idle(&srv.ctx);
}
