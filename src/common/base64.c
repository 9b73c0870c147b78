/*
 * base64.c - base64 in both alphabets, and SHA-256 digest fields (see base64.h).
 *
 * Hand-written rather than OpenSSL's EVP_EncodeBlock/EVP_DecodeBlock: those know only the standard alphabet,
 * skip blanks, and read a '=' anywhere as a zero, so every caller had to check around them.
 */
#include "common/base64.h"

#include <string.h>

static const char std_alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
static const char url_alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/* The characters of n bytes in alphabet a, padded with '=' to a multiple of four when pad is set. Returns the
 * end of what was written (the NUL is written there). */
static char *encode(const char *a, const uint8_t *in, size_t n, int pad, char *o)
{
    size_t i = 0;
    for (; i + 3 <= n; i += 3) {
        uint32_t v = (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8 | in[i + 2];
        *o++ = a[v >> 18 & 63];
        *o++ = a[v >> 12 & 63];
        *o++ = a[v >> 6 & 63];
        *o++ = a[v & 63];
    }
    if (n - i > 0) {
        uint32_t v = (uint32_t)in[i] << 16 | (n - i == 2 ? (uint32_t)in[i + 1] << 8 : 0);
        *o++ = a[v >> 18 & 63];
        *o++ = a[v >> 12 & 63];
        if (n - i == 2)
            *o++ = a[v >> 6 & 63];
        else if (pad)
            *o++ = '=';
        if (pad)
            *o++ = '=';
    }
    *o = '\0';
    return o;
}

static int value(char c, int url)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (c == (url ? '-' : '+'))
        return 62;
    if (c == (url ? '_' : '/'))
        return 63;
    return -1;
}

/* Decode n characters without padding. strict: the bits left over after the last byte must be zero. */
static long decode(const char *in, size_t n, int url, int strict, uint8_t *out)
{
    if (n % 4 == 1)
        return -1;
    size_t o = 0;
    uint32_t acc = 0;
    int bits = 0;
    for (size_t i = 0; i < n; i++) {
        int v = value(in[i], url);
        if (v < 0)
            return -1;
        acc = (acc << 6 | (uint32_t)v) & 0xffffff;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out[o++] = (uint8_t)(acc >> bits);
        }
    }
    if (strict && (acc & ((1u << bits) - 1)))
        return -1;
    return (long)o;
}

size_t ad_b64_len(size_t n)
{
    return (n + 2) / 3 * 4;
}

void ad_b64_encode(const uint8_t *in, size_t n, char *out)
{
    encode(std_alphabet, in, n, 1, out);
}

long ad_b64_decode(const char *in, size_t len, uint8_t *out)
{
    if (len % 4 != 0)
        return -1;
    size_t pad = len > 0 && in[len - 1] == '=' ? 1 + (in[len - 2] == '=') : 0;
    /* Leftover bits are not checked: the decoder this replaced (OpenSSL's) accepted them, and secrets written
     * by hand may carry them. */
    return decode(in, len - pad, 0, 0, out);
}

size_t ad_b64url_len(size_t n)
{
    return n / 3 * 4 + (n % 3 == 0 ? 0 : n % 3 + 1);
}

void ad_b64url_encode(const uint8_t *in, size_t n, char *out)
{
    encode(url_alphabet, in, n, 0, out);
}

long ad_b64url_decode(const char *in, size_t n, uint8_t *out)
{
    return decode(in, n, 1, 1, out);
}

void ad_digest_sha256_format(const uint8_t md[32], char *out)
{
    memcpy(out, AD_DIGEST_SHA256_PREFIX, sizeof(AD_DIGEST_SHA256_PREFIX) - 1);
    char *end = encode(std_alphabet, md, 32, 1, out + sizeof(AD_DIGEST_SHA256_PREFIX) - 1);
    end[0] = ':';
    end[1] = '\0';
}

int ad_digest_sha256_parse(const char *s, uint8_t md[32])
{
    size_t plen = sizeof(AD_DIGEST_SHA256_PREFIX) - 1;
    if (s == NULL || strlen(s) != AD_DIGEST_SHA256_CHARS || memcmp(s, AD_DIGEST_SHA256_PREFIX, plen) != 0 ||
        s[AD_DIGEST_SHA256_CHARS - 1] != ':')
        return -1;
    uint8_t buf[33];
    if (ad_b64_decode(s + plen, 44, buf) != 32)
        return -1;
    memcpy(md, buf, 32);
    return 0;
}
