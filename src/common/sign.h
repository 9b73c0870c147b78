/*
 * sign.h - webhook secrets: making them, signing with them (both schemes), and sealing them at rest.
 *
 * A secret is "whsec_" + base64 of 32 random bytes. Every delivery is signed two ways:
 *   Stripe style       X-Webhook-Signature: t=<unix>,v1=<hex HMAC-SHA256(key = the whole secret string,
 *                      "<t>.<body>")>
 *   Standard Webhooks  webhook-signature: v1,<base64 HMAC-SHA256(key = base64-decoded secret after "whsec_",
 *                      "<id>.<t>.<body>")>
 * With several secrets (during a rotation) each signs: the Stripe header repeats v1=, the Standard Webhooks
 * header is a space-separated list. Secrets are stored sealed with AES-256-GCM under a key that is not in the
 * database. Only OpenSSL does cryptography here; this file holds no state besides the sealing key.
 */
#ifndef AD_SIGN_H
#define AD_SIGN_H

#include <stddef.h>
#include <stdint.h>
#include "common/util.h"

#define AD_SECRET_PREFIX "whsec_"
#define AD_SECRET_BYTES 32
#define AD_SECRET_LEN (6 + 44) /* "whsec_" + base64 of 32 bytes */
#define AD_SEAL_KEY_BYTES 32

/* A new secret into out (>= AD_SECRET_LEN + 1 bytes). */
void ad_sign_new_secret(char *out);

/* Append the Stripe-style header value for secrets[0..n) to out. */
void ad_sign_stripe(const char *const *secrets, size_t n, int64_t t, const char *body, size_t len, struct ad_buf *out);
/* Append the Standard Webhooks signature list for secrets[0..n) to out. A secret that is not "whsec_" + base64
 * is skipped. Returns the number of signatures written. */
int ad_sign_standard(const char *const *secrets, size_t n, const char *msg_id, int64_t t, const char *body, size_t len,
                     struct ad_buf *out);

/* Parse a sealing key given in the configuration: base64 of 32 bytes. 0 or -1. */
int ad_seal_key_parse(const char *text, uint8_t key[AD_SEAL_KEY_BYTES]);
/* The key from the configuration (text, may be NULL), else from <dir>/webhook-secrets.key, created with mode
 * 0600 when missing. 0, or -1 with err filled. */
int ad_seal_key_load(const char *text, const char *dir, uint8_t key[AD_SEAL_KEY_BYTES], char *err, size_t errlen);
/* Use key for ad_seal/ad_unseal from now on. Call once before other threads seal or unseal. */
void ad_seal_init(const uint8_t key[AD_SEAL_KEY_BYTES]);
/* Seal plain, bound to aad (the row it belongs to): "v1." + base64(nonce | ciphertext | tag). The caller frees. */
char *ad_seal(const char *aad, const char *plain);
/* Open a sealed value; NULL when it was sealed under another key or for another aad. The caller frees. */
char *ad_unseal(const char *aad, const char *sealed);

#endif
