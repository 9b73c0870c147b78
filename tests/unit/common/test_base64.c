/*
 * test_base64.c - unit tests for src/common/base64.c: both alphabets against RFC 4648's vectors, round trips,
 * what each decoder refuses, and the SHA-256 digest fields of RFC 9530.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "common/base64.h"
#include "common/util.h"

static void test_b64_vectors(void **state)
{
    static const struct {
        const char *plain, *b64;
    } v[] = {{"", ""}, {"f", "Zg=="}, {"fo", "Zm8="}, {"foo", "Zm9v"}, {"foob", "Zm9vYg=="}, {"fooba", "Zm9vYmE="}};
    for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
        char out[16];
        uint8_t back[16];
        ad_b64_encode((const uint8_t *)v[i].plain, strlen(v[i].plain), out);
        assert_string_equal(out, v[i].b64);
        assert_int_equal(ad_b64_decode(v[i].b64, strlen(v[i].b64), back), (long)strlen(v[i].plain));
        assert_memory_equal(back, v[i].plain, strlen(v[i].plain));
    }
    uint8_t back[16];
    assert_int_equal(ad_b64_decode("Zm9", 3, back), -1);
    assert_int_equal(ad_b64_decode("Zm9v!!!!", 8, back), -1);
}

static void test_b64url_vectors(void **state)
{
    (void)state;
    /* RFC 4648 section 10, without padding */
    static const struct {
        const char *raw, *enc;
    } v[] = {
        {"", ""},           {"f", "Zg"},          {"fo", "Zm8"},          {"foo", "Zm9v"},
        {"foob", "Zm9vYg"}, {"fooba", "Zm9vYmE"}, {"foobar", "Zm9vYmFy"},
    };
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        size_t n = strlen(v[i].raw);
        char out[16];
        uint8_t back[16];
        assert_int_equal(ad_b64url_len(n), strlen(v[i].enc));
        ad_b64url_encode((const uint8_t *)v[i].raw, n, out);
        assert_string_equal(out, v[i].enc);
        assert_int_equal(ad_b64url_decode(out, strlen(out), back), (long)n);
        assert_memory_equal(back, v[i].raw, n);
    }

    /* The URL-safe alphabet: '-' and '_' instead of '+' and '/'. */
    const uint8_t fb[] = {0xfb, 0xff};
    char out[8];
    ad_b64url_encode(fb, sizeof fb, out);
    assert_string_equal(out, "-_8");
    assert_int_equal(ad_b64url_len(16), 22);
}

static void test_b64url_decode_errors(void **state)
{
    (void)state;
    uint8_t out[16];
    static const char *const bad[] = {
        "Zg==",  /* padding is not part of base64url here */
        "Z",     /* a lone sextet cannot encode a byte */
        "Zm9vY", /* same, after a full group */
        "Zh",    /* non-zero trailing bits: not the canonical encoding of any byte */
        "Zm9",   /* 'Zm9' has non-zero trailing bits */
        "Zm9v+A", "Zm9v/A", "Zm 9v",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        if (ad_b64url_decode(bad[i], strlen(bad[i]), out) != -1)
            fail_msg("accepted '%s'", bad[i]);
    }
    assert_int_equal(ad_b64url_decode("", 0, out), 0);
    /* Only n characters are read. */
    assert_int_equal(ad_b64url_decode("Zm9v!!!", 4, out), 3);
    assert_memory_equal(out, "foo", 3);
}

/* Every length from 0 to 64 through each alphabet and back, in only that alphabet's characters. */
static void test_round_trips(void **state)
{
    (void)state;
    static const struct {
        void (*encode)(const uint8_t *, size_t, char *);
        long (*decode)(const char *, size_t, uint8_t *);
        size_t (*len)(size_t);
        const char *chars;
    } alpha[] = {
        {ad_b64_encode, ad_b64_decode, ad_b64_len, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/="},
        {ad_b64url_encode, ad_b64url_decode, ad_b64url_len,
         "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"},
    };
    uint8_t raw[64], back[64];
    char enc[ad_b64_len(64) + 1];
    for (size_t a = 0; a < sizeof alpha / sizeof alpha[0]; a++) {
        for (size_t n = 0; n <= sizeof raw; n++) {
            ad_random_bytes(raw, n);
            alpha[a].encode(raw, n, enc);
            assert_int_equal(strlen(enc), alpha[a].len(n));
            assert_int_equal(strspn(enc, alpha[a].chars), strlen(enc));
            assert_int_equal(alpha[a].decode(enc, strlen(enc), back), (long)n);
            assert_memory_equal(back, raw, n);
        }
    }
    /* The standard alphabet: '+' and '/'. */
    const uint8_t fb[] = {0xfb, 0xff, 0xbf};
    ad_b64_encode(fb, sizeof fb, enc);
    assert_string_equal(enc, "+/+/");
}

static void test_b64_decode_errors(void **state)
{
    (void)state;
    uint8_t out[16];
    static const char *const bad[] = {
        "Zm9",      /* not a multiple of four */
        "Zm9v!!!!", /* outside the alphabet */
        "Zm=v",     /* padding in the middle (OpenSSL read it as a zero) */
        "Z===",     /* three padding characters */
        "====",     /* nothing but padding */
        "Zm9v-_==", /* the URL-safe alphabet */
        " Zm9v",    /* blanks (OpenSSL skipped them) */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        if (ad_b64_decode(bad[i], strlen(bad[i]), out) != -1)
            fail_msg("accepted '%s'", bad[i]);
    }
    assert_int_equal(ad_b64_decode("", 0, out), 0);
    /* Leftover bits are tolerated in the standard alphabet, as the decoder it replaced did. */
    assert_int_equal(ad_b64_decode("Zh==", 4, out), 1);
    assert_int_equal(out[0], 'f');
}

static void test_digest_field(void **state)
{
    (void)state;
    uint8_t md[32], back[32];
    char field[AD_DIGEST_SHA256_CHARS + 1];
    /* SHA-256 of the empty string, as RFC 9530 writes it. */
    ad_sha256("", 0, md);
    ad_digest_sha256_format(md, field);
    assert_string_equal(field, "sha-256=:47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=:");
    assert_int_equal(strlen(field), AD_DIGEST_SHA256_CHARS);
    assert_int_equal(ad_digest_sha256_parse(field, back), 0);
    assert_memory_equal(back, md, 32);

    static const char *const bad[] = {
        "sha-256=:47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=",   /* no closing colon */
        "sha-256=:47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=:x", /* something after it */
        "sha-256=:47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=;",  /* not a colon at the end */
        "sha-512=:47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=:",  /* another algorithm */
        "sha-256=:47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFUA:",  /* 33 bytes, no padding */
        "sha-256=:47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSu==:",   /* 31 bytes */
        "sha-256=:47DEQpj8HBSa-_TImW+5JCeuQeRkm5NMpJWZG3hSuFU=:",  /* base64url */
        "",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        if (ad_digest_sha256_parse(bad[i], back) != -1)
            fail_msg("accepted '%s'", bad[i]);
    }
    assert_int_equal(ad_digest_sha256_parse(NULL, back), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_b64_vectors),          cmocka_unit_test(test_round_trips),
        cmocka_unit_test(test_b64_decode_errors),    cmocka_unit_test(test_b64url_vectors),
        cmocka_unit_test(test_b64url_decode_errors), cmocka_unit_test(test_digest_field),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
