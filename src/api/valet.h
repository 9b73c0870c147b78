/*
 * valet.h - signed URLs (the valet key pattern): read access to one job, its result and its events for
 * whoever holds the URL, until it expires, without a bearer key. Browsers' EventSource cannot send headers,
 * so this is how a web page follows a job.
 *
 * A URL carries ?exp=<unix seconds>&sig=<base64url HMAC-SHA256(key, "<job id>\n<exp>")>. The key is the
 * configured signingKey, or else 32 random bytes created once in <data dir>/signing.key (mode 0600), so URLs
 * stay valid across restarts. Nothing here knows HTTP; api_events.c checks requests with it.
 */
#ifndef AD_VALET_H
#define AD_VALET_H

#include <stddef.h>
#include <stdint.h>

#define AD_VALET_SIG_LEN 43 /* base64url of a SHA-256 MAC */

/* Load or create the key. configured: the signingKey setting or NULL. 0, or -1 with err filled. */
int ad_valet_init(const char *configured, const char *data_dir, char *err, size_t errlen);
/* The signature granting id until exp (Unix seconds) into out (>= AD_VALET_SIG_LEN + 1 bytes). */
void ad_valet_sign(const char *id, int64_t exp, char *out);
/* 1 when sig (len bytes) is the signature for id and exp, compared in constant time; else 0. Expiry is the
 * caller's to check. */
int ad_valet_verify(const char *id, int64_t exp, const char *sig, size_t len);

#endif
