/*
 * sign.c - webhook secrets, both signature schemes, and AES-256-GCM sealing of secrets at rest (see sign.h).
 */
#include "common/sign.h"
#include "common/base64.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <openssl/params.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define NONCE_BYTES 12
#define TAG_BYTES 16
#define SEAL_PREFIX "v1."
#define KEY_FILE "webhook-secrets.key"

static uint8_t seal_key[AD_SEAL_KEY_BYTES];

void ad_sign_new_secret(char *out)
{
    uint8_t raw[AD_SECRET_BYTES];
    ad_random_bytes(raw, sizeof(raw));
    memcpy(out, AD_SECRET_PREFIX, 6);
    ad_b64_encode(raw, sizeof(raw), out + 6);
}

static EVP_MAC *hmac_alg;
static pthread_once_t hmac_once = PTHREAD_ONCE_INIT;

static void hmac_init(void)
{
    hmac_alg = EVP_MAC_fetch(NULL, "HMAC", NULL);
    if (hmac_alg == NULL)
        abort();
}

/* HMAC-SHA256 of the concatenation of parts[0..nparts). */
static void hmac(const void *key, size_t keylen, const char *const *parts, const size_t *lens, size_t nparts,
                 uint8_t md[32])
{
    pthread_once(&hmac_once, hmac_init);
    EVP_MAC_CTX *ctx = EVP_MAC_CTX_new(hmac_alg);
    OSSL_PARAM params[] = {OSSL_PARAM_construct_utf8_string("digest", (char *)"SHA256", 0), OSSL_PARAM_construct_end()};
    size_t mdlen = 0;
    if (ctx == NULL || !EVP_MAC_init(ctx, key, keylen, params))
        abort();
    for (size_t i = 0; i < nparts; i++)
        EVP_MAC_update(ctx, (const unsigned char *)parts[i], lens[i]);
    if (!EVP_MAC_final(ctx, md, &mdlen, 32))
        abort();
    EVP_MAC_CTX_free(ctx);
}

void ad_sign_stripe(const char *const *secrets, size_t n, int64_t t, const char *body, size_t len, struct ad_buf *out)
{
    char ts[24];
    int tl = snprintf(ts, sizeof(ts), "%lld.", (long long)t);
    ad_buf_printf(out, "t=%lld", (long long)t);
    for (size_t i = 0; i < n; i++) {
        const char *parts[] = {ts, body};
        size_t lens[] = {(size_t)tl, len};
        uint8_t md[32];
        char hex[65];
        hmac(secrets[i], strlen(secrets[i]), parts, lens, 2, md);
        ad_hex_encode(md, sizeof(md), hex);
        ad_buf_printf(out, ",v1=%s", hex);
    }
}

int ad_sign_standard(const char *const *secrets, size_t n, const char *msg_id, int64_t t, const char *body, size_t len,
                     struct ad_buf *out)
{
    char head[160];
    int hl = snprintf(head, sizeof(head), "%s.%lld.", msg_id, (long long)t);
    if (hl < 0 || (size_t)hl >= sizeof(head))
        return 0;
    int written = 0;
    for (size_t i = 0; i < n; i++) {
        const char *s = secrets[i];
        if (strncmp(s, AD_SECRET_PREFIX, 6) != 0)
            continue;
        uint8_t key[128];
        size_t klen = strlen(s + 6);
        long kn = klen <= 4 * sizeof(key) / 3 ? ad_b64_decode(s + 6, klen, key) : -1;
        if (kn <= 0)
            continue;
        const char *parts[] = {head, body};
        size_t lens[] = {(size_t)hl, len};
        uint8_t md[32];
        char b64[48];
        hmac(key, (size_t)kn, parts, lens, 2, md);
        ad_b64_encode(md, sizeof(md), b64);
        ad_buf_printf(out, "%sv1,%s", written > 0 ? " " : "", b64);
        written++;
    }
    return written;
}

/* ---- sealing ---- */

int ad_seal_key_parse(const char *text, uint8_t key[AD_SEAL_KEY_BYTES])
{
    uint8_t buf[64];
    size_t len = strcspn(text, "\r\n");
    long n = len <= 64 ? ad_b64_decode(text, len, buf) : -1;
    if (n != AD_SEAL_KEY_BYTES)
        return -1;
    memcpy(key, buf, AD_SEAL_KEY_BYTES);
    return 0;
}

int ad_seal_key_load(const char *text, const char *dir, uint8_t key[AD_SEAL_KEY_BYTES], char *err, size_t errlen)
{
    if (text != NULL) {
        if (ad_seal_key_parse(text, key) != 0) {
            snprintf(err, errlen, "webhooks.secretKey: expected base64 of 32 bytes");
            return -1;
        }
        return 0;
    }
    char *path = ad_asprintf("%s/" KEY_FILE, dir);
    char buf[128];
    int rc = -1;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0 && errno == ENOENT) {
        /* First start: make a key. O_EXCL so two daemons starting at once cannot both write one. */
        uint8_t raw[AD_SEAL_KEY_BYTES];
        char b64[48];
        ad_random_bytes(raw, sizeof(raw));
        ad_b64_encode(raw, sizeof(raw), b64);
        fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        size_t n = strlen(b64);
        b64[n++] = '\n';
        if (fd >= 0 && write(fd, b64, n) == (ssize_t)n && fsync(fd) == 0) {
            memcpy(key, raw, sizeof(raw));
            rc = 0;
        } else {
            snprintf(err, errlen, "create %s: %s", path, strerror(errno));
        }
    } else if (fd < 0) {
        snprintf(err, errlen, "open %s: %s", path, strerror(errno));
    } else {
        ssize_t n = read(fd, buf, sizeof(buf) - 1);
        buf[n > 0 ? n : 0] = '\0';
        if (ad_seal_key_parse(buf, key) == 0)
            rc = 0;
        else
            snprintf(err, errlen, "%s: expected base64 of 32 bytes", path);
    }
    if (fd >= 0)
        close(fd);
    free(path);
    return rc;
}

void ad_seal_init(const uint8_t key[AD_SEAL_KEY_BYTES])
{
    memcpy(seal_key, key, AD_SEAL_KEY_BYTES);
}

char *ad_seal(const char *aad, const char *plain)
{
    size_t plen = strlen(plain);
    size_t rawlen = NONCE_BYTES + plen + TAG_BYTES;
    uint8_t *raw = ad_malloc(rawlen);
    ad_random_bytes(raw, NONCE_BYTES);
    EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new();
    int n = 0;
    if (ctx == NULL || !EVP_EncryptInit_ex(ctx, EVP_aes_256_gcm(), NULL, seal_key, raw) ||
        !EVP_EncryptUpdate(ctx, NULL, &n, (const unsigned char *)aad, (int)strlen(aad)) ||
        !EVP_EncryptUpdate(ctx, raw + NONCE_BYTES, &n, (const unsigned char *)plain, (int)plen) ||
        !EVP_EncryptFinal_ex(ctx, raw + NONCE_BYTES + n, &n) ||
        !EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, TAG_BYTES, raw + NONCE_BYTES + plen))
        abort();
    EVP_CIPHER_CTX_free(ctx);
    char *out = ad_malloc(3 + 4 * ((rawlen + 2) / 3) + 1);
    memcpy(out, SEAL_PREFIX, 3);
    ad_b64_encode(raw, rawlen, out + 3);
    free(raw);
    return out;
}

char *ad_unseal(const char *aad, const char *sealed)
{
    if (sealed == NULL || strncmp(sealed, SEAL_PREFIX, 3) != 0)
        return NULL;
    size_t len = strlen(sealed + 3);
    uint8_t *raw = ad_malloc(len * 3 / 4 + 3);
    long rawlen = ad_b64_decode(sealed + 3, len, raw);
    char *plain = NULL;
    if (rawlen >= NONCE_BYTES + TAG_BYTES) {
        size_t clen = (size_t)rawlen - NONCE_BYTES - TAG_BYTES;
        plain = ad_malloc(clen + 1);
        EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new();
        int n = 0, ok = ctx != NULL && EVP_DecryptInit_ex(ctx, EVP_aes_256_gcm(), NULL, seal_key, raw) &&
                        EVP_DecryptUpdate(ctx, NULL, &n, (const unsigned char *)aad, (int)strlen(aad)) &&
                        EVP_DecryptUpdate(ctx, (unsigned char *)plain, &n, raw + NONCE_BYTES, (int)clen) &&
                        EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_TAG, TAG_BYTES, raw + NONCE_BYTES + clen) &&
                        EVP_DecryptFinal_ex(ctx, (unsigned char *)plain + n, &n) > 0;
        EVP_CIPHER_CTX_free(ctx);
        if (ok) {
            plain[clen] = '\0';
        } else {
            free(plain);
            plain = NULL;
        }
    }
    free(raw);
    return plain;
}
