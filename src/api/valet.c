/*
 * valet.c - the key and the MAC of signed URLs (valet.h).
 */
#include "api/valet.h"
#include "common/util.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define KEY_FILE_BYTES 32

static uint8_t key[256];
static size_t key_len;

/* Read the key file, or create it with fresh random bytes when there is none. 0 or -1 (errno set). */
static int load_key_file(const char *path)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd >= 0) {
        ad_random_bytes(key, KEY_FILE_BYTES);
        int ok = write(fd, key, KEY_FILE_BYTES) == KEY_FILE_BYTES && fsync(fd) == 0;
        int saved = errno;
        close(fd);
        if (!ok) {
            unlink(path);
            errno = saved != 0 ? saved : EIO;
            return -1;
        }
        key_len = KEY_FILE_BYTES;
        return 0;
    }
    if (errno != EEXIST)
        return -1;
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, key, KEY_FILE_BYTES);
    close(fd);
    if (n != KEY_FILE_BYTES) {
        errno = EINVAL;
        return -1;
    }
    key_len = KEY_FILE_BYTES;
    return 0;
}

int ad_valet_init(const char *configured, const char *data_dir, char *err, size_t errlen)
{
    if (configured != NULL) {
        key_len = strlen(configured) < sizeof(key) ? strlen(configured) : sizeof(key);
        memcpy(key, configured, key_len);
        return 0;
    }
    if (strstr(data_dir, "://") != NULL) {
        /* A database URL has no directory to keep a key in; nodes sharing it must share a signingKey. */
        ad_random_bytes(key, KEY_FILE_BYTES);
        key_len = KEY_FILE_BYTES;
        ad_warn("no signingKey configured: signed URLs are valid on this process only");
        return 0;
    }
    char *path = ad_asprintf("%s/signing.key", data_dir);
    int rc = load_key_file(path);
    if (rc != 0)
        snprintf(err, errlen, "signing key %s: %s", path, errno == EINVAL ? "not 32 bytes" : strerror(errno));
    free(path);
    return rc;
}

static void mac(const char *id, int64_t exp, char *out)
{
    char msg[160];
    int n = snprintf(msg, sizeof(msg), "%s\n%lld", id, (long long)exp);
    uint8_t md[EVP_MAX_MD_SIZE];
    unsigned int mdlen = 0;
    HMAC(EVP_sha256(), key, (int)key_len, (const unsigned char *)msg, (size_t)n, md, &mdlen);
    ad_b64url_encode(md, mdlen, out);
}

void ad_valet_sign(const char *id, int64_t exp, char *out)
{
    mac(id, exp, out);
}

int ad_valet_verify(const char *id, int64_t exp, const char *sig, size_t len)
{
    char want[AD_VALET_SIG_LEN + 1];
    mac(id, exp, want);
    return ad_ct_equal(want, AD_VALET_SIG_LEN, sig, len);
}
