/*
 * base64.h - base64 in both alphabets of RFC 4648, and the SHA-256 digest fields of RFC 9530 written with it.
 *
 * One encoder and one decoder serve both alphabets: the standard one with padding (section 4: webhook
 * secrets and signatures, sealed secrets, digest fields) and base64url without padding (section 5: ids,
 * ETags, page tokens, signed URLs). Decoding is strict about the alphabet, the length and where padding may
 * stand; base64url also refuses non-zero leftover bits, so that each byte string has exactly one spelling (ids
 * and tokens compare as text). Nothing here allocates.
 */
#ifndef AD_BASE64_H
#define AD_BASE64_H

#include <stddef.h>
#include <stdint.h>

/* Length of the standard encoding of n bytes, padding included (without the NUL). */
size_t ad_b64_len(size_t n);
/* Standard base64 with padding, NUL-terminated into out (>= ad_b64_len(n) + 1 bytes). */
void ad_b64_encode(const uint8_t *in, size_t n, char *out);
/* Decode standard base64 with padding into out (>= 3 * len / 4 bytes). Returns the length or -1. */
long ad_b64_decode(const char *in, size_t len, uint8_t *out);

/* Length of the base64url encoding of n bytes (no padding, without the NUL). */
size_t ad_b64url_len(size_t n);
/* base64url without padding, NUL-terminated into out (>= ad_b64url_len(n) + 1 bytes). */
void ad_b64url_encode(const uint8_t *in, size_t n, char *out);
/* Decode base64url without padding into out (>= n * 3 / 4 bytes). Returns the decoded length or -1. */
long ad_b64url_decode(const char *in, size_t n, uint8_t *out);

/* A SHA-256 digest field, "sha-256=:<base64 of the 32 bytes>:" (RFC 9530; the artifacts' `digest`). */
#define AD_DIGEST_SHA256_PREFIX "sha-256=:"
#define AD_DIGEST_SHA256_CHARS (9 + 44 + 1)
/* Write the field of md into out (>= AD_DIGEST_SHA256_CHARS + 1 bytes), NUL-terminated. */
void ad_digest_sha256_format(const uint8_t md[32], char *out);
/* The 32 bytes of a field that is exactly "sha-256=:<base64>:" (NUL-terminated s). 0, or -1 when it is not one. */
int ad_digest_sha256_parse(const char *s, uint8_t md[32]);

#endif
