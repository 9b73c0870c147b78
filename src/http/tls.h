/*
 * tls.h - the listener's TLS context: certificate, key, and ALPN offering h2 before http/1.1, so that
 * browsers get HTTP/2 (many SSE streams on one connection) and everyone else HTTP/1.1.
 *
 * Only the context is built here; h2o runs the handshakes (h2o_accept with accept_ctx.ssl_ctx set).
 */
#ifndef AD_TLS_H
#define AD_TLS_H

#include <openssl/ssl.h>
#include <stddef.h>
#include "core/config.h"

/* A server context for conf (cert and key PEM files), TLS 1.2 and later. NULL with err filled on failure.
 * Free with SSL_CTX_free. */
SSL_CTX *ad_tls_context(const struct ad_tls_conf *conf, char *err, size_t errlen);

#endif
