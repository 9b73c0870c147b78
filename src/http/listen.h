/*
 * listen.h - the daemon's HTTP listener: libh2o's configuration (limits, problem answers, access log, TLS), the
 * listening socket and the accept loop with its connection cap, set up in one call so that server.c wires the
 * layers without naming h2o. What answers a request is the caller's (on_req, api/).
 */
#ifndef AD_HTTP_LISTEN_H
#define AD_HTTP_LISTEN_H

#include "core/config.h"
#include "http/loop.h"

/* Serve HTTP on loop: bind cfg's listen address, configure h2o with on_req as the handler of every path, and
 * accept connections (at most limits.maxConnections at once: at the cap the listener stops accepting, so further
 * clients wait in the kernel's backlog instead of being refused). The bound address ("127.0.0.1:8080",
 * "[::1]:8080") goes into bound and "http" or "https" into *scheme. 0, or -1 with err filled. cfg must outlive it. */
int ad_http_listen(struct ad_loop *loop, const struct ad_config *cfg, int (*on_req)(h2o_handler_t *, h2o_req_t *),
                   char *bound, size_t boundlen, const char **scheme, char *err, size_t errlen);
/* Stop accepting and close the listener; the connections already open are served on, HTTP/2 ones after a GOAWAY
 * (they open no new streams) and HTTP/1 ones closed after their next answer. */
void ad_http_listen_stop(void);
/* 1 once no HTTP/2 connection is left, after ad_http_listen_stop: their GOAWAYs have done. */
int ad_http_listen_idle(void);

#endif
