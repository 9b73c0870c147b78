/*
 * test_sign.c - unit tests for src/sign.c: secrets, both signature schemes against known vectors (the Standard
 * Webhooks specification's own, and a Stripe-style one computed independently with Python's hmac), rotation
 * lists, and sealing secrets at rest (round trip, wrong row, wrong key, tampering, the key file).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/sign.h"
#include "tmpdir.h"

/* The Standard Webhooks specification's test vector. */
#define SW_SECRET "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
#define SW_ID "msg_p5jXN8AQM9LWM0D4loKWxJek"
#define SW_TS 1614265330
#define SW_BODY "{\"test\": 2432232314}"
#define SW_SIG "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
/* hmac.new(SW_SECRET.encode(), b"1614265330." + SW_BODY, sha256).hexdigest() */
#define STRIPE_SIG "2e37df5d4a028c51a7f3133d64ae1e300d2c2c900f1b1d49d4369ad2530f8964"

static void test_standard_webhooks_vector(void **state)
{
    const char *secrets[] = {SW_SECRET};
    struct ad_buf b;
    ad_buf_init(&b, 4096);
    assert_int_equal(ad_sign_standard(secrets, 1, SW_ID, SW_TS, SW_BODY, strlen(SW_BODY), &b), 1);
    ad_buf_append(&b, "", 1);
    assert_string_equal(b.data, SW_SIG);
    ad_buf_free(&b);
}

static void test_stripe_style_vector(void **state)
{
    const char *secrets[] = {SW_SECRET};
    struct ad_buf b;
    ad_buf_init(&b, 4096);
    ad_sign_stripe(secrets, 1, SW_TS, SW_BODY, strlen(SW_BODY), &b);
    ad_buf_append(&b, "", 1);
    assert_string_equal(b.data, "t=1614265330,v1=" STRIPE_SIG);
    ad_buf_free(&b);
}

static void test_rotation_signs_with_both(void **state)
{
    char fresh[AD_SECRET_LEN + 1];
    ad_sign_new_secret(fresh);
    const char *secrets[] = {fresh, SW_SECRET};
    struct ad_buf b;
    ad_buf_init(&b, 4096);
    assert_int_equal(ad_sign_standard(secrets, 2, SW_ID, SW_TS, SW_BODY, strlen(SW_BODY), &b), 2);
    ad_buf_append(&b, "", 1);
    /* "v1,<new> v1,<old>": the old signature last, after one space. */
    const char *space = strchr(b.data, ' ');
    assert_non_null(space);
    assert_string_equal(space + 1, SW_SIG);
    assert_int_equal(strncmp(b.data, "v1,", 3), 0);
    assert_int_equal(space - b.data, 3 + 44);
    b.len = 0;
    ad_sign_stripe(secrets, 2, SW_TS, SW_BODY, strlen(SW_BODY), &b);
    ad_buf_append(&b, "", 1);
    assert_int_equal(strncmp(b.data, "t=1614265330,v1=", 16), 0);
    assert_non_null(strstr(b.data, ",v1=" STRIPE_SIG));
    assert_int_equal(strlen(b.data), strlen("t=1614265330") + 2 * (4 + 64));
    ad_buf_free(&b);
}

static void test_malformed_secret_is_skipped(void **state)
{
    const char *secrets[] = {"not-a-secret", "whsec_***"};
    struct ad_buf b;
    ad_buf_init(&b, 4096);
    assert_int_equal(ad_sign_standard(secrets, 2, SW_ID, SW_TS, SW_BODY, strlen(SW_BODY), &b), 0);
    assert_int_equal(b.len, 0);
    ad_buf_free(&b);
}

static void test_new_secrets(void **state)
{
    char a[AD_SECRET_LEN + 1], c[AD_SECRET_LEN + 1];
    ad_sign_new_secret(a);
    ad_sign_new_secret(c);
    assert_int_equal(strlen(a), AD_SECRET_LEN);
    assert_int_equal(strncmp(a, "whsec_", 6), 0);
    assert_string_not_equal(a, c);
    uint8_t raw[64];
    assert_int_equal(ad_b64_decode(a + 6, strlen(a + 6), raw), AD_SECRET_BYTES);
}

static void test_seal_round_trip_and_tamper(void **state)
{
    uint8_t key[AD_SEAL_KEY_BYTES], other[AD_SEAL_KEY_BYTES];
    memset(key, 7, sizeof(key));
    memset(other, 8, sizeof(other));
    ad_seal_init(key);
    char *sealed = ad_seal("whk_1", SW_SECRET);
    assert_int_equal(strncmp(sealed, "v1.", 3), 0);
    assert_null(strstr(sealed, "MfKQ9r8GKYq")); /* the stored form does not show the secret */
    char *again = ad_seal("whk_1", SW_SECRET);
    assert_string_not_equal(sealed, again); /* a fresh nonce each time */
    char *plain = ad_unseal("whk_1", sealed);
    assert_non_null(plain);
    assert_string_equal(plain, SW_SECRET);
    free(plain);
    assert_null(ad_unseal("whk_2", sealed)); /* bound to its row */
    assert_null(ad_unseal("whk_1", "v1.AAAA"));
    assert_null(ad_unseal("whk_1", "plain"));
    assert_null(ad_unseal("whk_1", NULL));
    char *bad = strdup(sealed);
    bad[10] = bad[10] == 'A' ? 'B' : 'A';
    assert_null(ad_unseal("whk_1", bad));
    free(bad);
    ad_seal_init(other);
    assert_null(ad_unseal("whk_1", sealed));
    ad_seal_init(key);
    free(sealed);
    free(again);
}

static void test_key_file_and_config_key(void **state)
{
    char dir[64];
    assert_int_equal(tmpdir_make(dir, sizeof(dir), "sign"), 0);
    uint8_t k1[AD_SEAL_KEY_BYTES], k2[AD_SEAL_KEY_BYTES];
    char err[256] = "";
    assert_int_equal(ad_seal_key_load(NULL, dir, k1, err, sizeof(err)), 0);
    char path[128];
    snprintf(path, sizeof(path), "%s/webhook-secrets.key", dir);
    struct stat sb;
    assert_int_equal(stat(path, &sb), 0);
    assert_int_equal(sb.st_mode & 0777, 0600);
    assert_int_equal(ad_seal_key_load(NULL, dir, k2, err, sizeof(err)), 0);
    assert_memory_equal(k1, k2, sizeof(k1)); /* the same key on the next start */
    /* A key in the configuration wins over the file. */
    assert_int_equal(ad_seal_key_load("AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE=", dir, k2, err, sizeof(err)), 0);
    for (size_t i = 0; i < sizeof(k2); i++)
        assert_int_equal(k2[i], 1);
    assert_int_equal(ad_seal_key_load("c2hvcnQ=", dir, k2, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "32 bytes"));
    FILE *f = fopen(path, "w");
    fputs("garbage\n", f);
    fclose(f);
    assert_int_equal(ad_seal_key_load(NULL, dir, k2, err, sizeof(err)), -1);
    tmpdir_remove(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_standard_webhooks_vector),
        cmocka_unit_test(test_stripe_style_vector),
        cmocka_unit_test(test_rotation_signs_with_both),
        cmocka_unit_test(test_malformed_secret_is_skipped),
        cmocka_unit_test(test_new_secrets),
        cmocka_unit_test(test_seal_round_trip_and_tamper),
        cmocka_unit_test(test_key_file_and_config_key),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
