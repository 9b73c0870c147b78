/*
 * tls.c - building the listener's TLS context (tls.h).
 */
#include "http/tls.h"

#include <h2o.h>
#include <openssl/err.h>
#include <stdio.h>

/* The first OpenSSL error queued, as text, into err; the queue is emptied. */
static void openssl_error(const char *what, const char *file, char *err, size_t errlen)
{
    char detail[256] = "unknown error";
    unsigned long e = ERR_get_error();
    if (e != 0)
        ERR_error_string_n(e, detail, sizeof(detail));
    ERR_clear_error();
    snprintf(err, errlen, "tls: %s %s: %s", what, file, detail);
}

SSL_CTX *ad_tls_context(const struct ad_tls_conf *conf, char *err, size_t errlen)
{
    if (conf->cert == NULL || conf->key == NULL) {
        snprintf(err, errlen, "tls: both cert and key are required");
        return NULL;
    }
    SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
    if (ctx == NULL) {
        openssl_error("create context", "", err, errlen);
        return NULL;
    }
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    SSL_CTX_set_options(ctx, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION);
    if (SSL_CTX_use_certificate_chain_file(ctx, conf->cert) != 1) {
        openssl_error("certificate", conf->cert, err, errlen);
    } else if (SSL_CTX_use_PrivateKey_file(ctx, conf->key, SSL_FILETYPE_PEM) != 1) {
        openssl_error("private key", conf->key, err, errlen);
    } else if (SSL_CTX_check_private_key(ctx) != 1) {
        openssl_error("key does not match the certificate", conf->key, err, errlen);
    } else {
        h2o_ssl_register_alpn_protocols(ctx, h2o_alpn_protocols);
        return ctx;
    }
    SSL_CTX_free(ctx);
    return NULL;
}
