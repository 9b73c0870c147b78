/*
 * test_trace.c - unit tests for src/common/trace.c: the traceparent grammar (what the W3C Trace Context
 * specification says to ignore, and later versions read as 00), tracestate cleaning and acceptd's entry, ids and
 * the ratio sampler's rule.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/trace.h"
#include "common/util.h"

#define TRACE "4bf92f3577b34da6a3ce929d0e0e4736"
#define SPAN "00f067aa0ba902b7"

static void test_traceparent_valid(void **state)
{
    struct ad_trace_ctx t;
    assert_int_equal(ad_traceparent_parse("00-" TRACE "-" SPAN "-01", &t), 0);
    assert_string_equal(t.trace_id, TRACE);
    assert_string_equal(t.span_id, SPAN);
    assert_int_equal(t.flags, AD_TRACE_SAMPLED);
    assert_int_equal(ad_traceparent_parse("00-" TRACE "-" SPAN "-00", &t), 0);
    assert_int_equal(t.flags, 0);
    /* Flags this version does not define are not handed on. */
    assert_int_equal(ad_traceparent_parse("00-" TRACE "-" SPAN "-ff", &t), 0);
    assert_int_equal(t.flags, AD_TRACE_SAMPLED);
    /* A later version: the first four fields as 00 has them, and anything after a further '-'. */
    assert_int_equal(ad_traceparent_parse("01-" TRACE "-" SPAN "-01", &t), 0);
    assert_int_equal(ad_traceparent_parse("cc-" TRACE "-" SPAN "-02-more-fields", &t), 0);
    assert_int_equal(t.flags, 0);
    char out[AD_TRACEPARENT_LEN + 1];
    ad_traceparent_format(&t, out);
    assert_string_equal(out, "00-" TRACE "-" SPAN "-00");
}

static void test_traceparent_invalid(void **state)
{
    static const char *const bad[] = {
        "",
        "00-" TRACE "-" SPAN "-0",
        "00-" TRACE "-" SPAN "-01-",
        "00-" TRACE "-" SPAN "-01 ",
        "00-4BF92F3577B34DA6A3CE929D0E0E4736-" SPAN "-01",
        "00-" TRACE "-00F067AA0BA902B7-01",
        "00-00000000000000000000000000000000-" SPAN "-01",
        "00-" TRACE "-0000000000000000-01",
        "ff-" TRACE "-" SPAN "-01",
        "0-" TRACE "-" SPAN "-012",
        "00_" TRACE "_" SPAN "_01",
        "00-" TRACE "-" SPAN "-0x",
        "01-" TRACE "-" SPAN "-01x",
        "00-" TRACE "-" SPAN "-01, 00-" TRACE "-" SPAN "-01",
        "Z0-" TRACE "-" SPAN "-01",
    };
    struct ad_trace_ctx t;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        if (ad_traceparent_parse(bad[i], &t) != -1)
            fail_msg("accepted '%s'", bad[i]);
    assert_int_equal(ad_traceparent_parse(NULL, &t), -1);
}

static void check_clean(const char *in, const char *want)
{
    char *got = ad_tracestate_clean(in);
    if (want == NULL ? got != NULL : got == NULL || strcmp(got, want) != 0)
        fail_msg("clean('%s') = '%s', want '%s'", in, got ? got : "(null)", want ? want : "(null)");
    free(got);
}

static void test_tracestate_clean(void **state)
{
    check_clean("congo=t61rcWkgMzE", "congo=t61rcWkgMzE");
    check_clean(" rojo=00f067aa0ba902b7 ,\tcongo=t61rcWkgMzE ", "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE");
    check_clean("a=1,,b=2", "a=1,b=2");
    check_clean("Upper=1,b=2", "b=2");
    check_clean("a=,b=2", "b=2");
    check_clean("a=x=y,b=2", "b=2");
    check_clean("a=1 2,b=2", "a=1 2,b=2");
    check_clean("1a=1,t1@sys=2,@x=3,t@1=4,t@s=5", "t1@sys=2,t@s=5");
    check_clean("a=1,a=2", "a=1");
    check_clean("", NULL);
    check_clean(NULL, NULL);
    check_clean("nope", NULL);
    /* At most 32 members. */
    struct ad_buf b;
    ad_buf_init(&b, SIZE_MAX);
    for (int i = 0; i < 40; i++)
        ad_buf_printf(&b, "%sk%d=v", i ? "," : "", i);
    ad_buf_append(&b, "", 1);
    char *got = ad_tracestate_clean(b.data);
    size_t commas = 0;
    for (const char *p = got; *p; p++)
        commas += *p == ',';
    assert_int_equal(commas, 31);
    assert_non_null(strstr(got, "k31=v"));
    assert_null(strstr(got, "k32=v"));
    free(got);
    ad_buf_free(&b);
}

static void test_tracestate_size(void **state)
{
    /* Past 512 bytes, long members go first (from the right), then members from the right. */
    char big[250];
    memset(big, 'x', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    char *in = ad_asprintf("a=1,long1=%s,b=2,long2=%s,long3=%s,c=3", big, big, big);
    char *got = ad_tracestate_clean(in);
    char *want = ad_asprintf("a=1,long1=%s,b=2,c=3", big);
    assert_string_equal(got, want);
    assert_true(strlen(got) <= AD_TRACESTATE_MAX);
    free(in);
    free(got);
    free(want);
}

static void test_tracestate_push(void **state)
{
    char *got = ad_tracestate_push("congo=1,acceptd=0123456789abcdef,rojo=2", AD_TRACESTATE_KEY, SPAN);
    assert_string_equal(got, "acceptd=" SPAN ",congo=1,rojo=2");
    free(got);
    got = ad_tracestate_push(NULL, AD_TRACESTATE_KEY, SPAN);
    assert_string_equal(got, "acceptd=" SPAN);
    free(got);
    struct ad_buf b;
    ad_buf_init(&b, SIZE_MAX);
    for (int i = 0; i < 32; i++)
        ad_buf_printf(&b, "%sk%d=v", i ? "," : "", i);
    ad_buf_append(&b, "", 1);
    got = ad_tracestate_push(b.data, AD_TRACESTATE_KEY, SPAN);
    assert_true(strncmp(got, "acceptd=" SPAN ",k0=v,", 26) == 0);
    assert_non_null(strstr(got, "k30=v"));
    assert_null(strstr(got, "k31=v")); /* 33 members: the rightmost goes */
    free(got);
    ad_buf_free(&b);
}

static void test_ids(void **state)
{
    char t1[AD_TRACE_ID_HEX + 1], t2[AD_TRACE_ID_HEX + 1], s1[AD_SPAN_ID_HEX + 1], s2[AD_SPAN_ID_HEX + 1];
    ad_trace_new_trace_id(t1);
    ad_trace_new_trace_id(t2);
    ad_trace_new_span_id(s1);
    ad_trace_new_span_id(s2);
    assert_int_equal(strlen(t1), 32);
    assert_int_equal(strlen(s1), 16);
    assert_string_not_equal(t1, t2);
    assert_string_not_equal(s1, s2);
    struct ad_trace_ctx c = {.flags = 1};
    memcpy(c.trace_id, t1, sizeof(t1));
    memcpy(c.span_id, s1, sizeof(s1));
    char tp[AD_TRACEPARENT_LEN + 1];
    ad_traceparent_format(&c, tp);
    struct ad_trace_ctx back;
    assert_int_equal(ad_traceparent_parse(tp, &back), 0);
    /* A lease's span: the same for the same lease, another for another, and not the lease's own bytes. */
    ad_trace_span_of("lease_-P8I3kD0BUmzKs_h9Mr3iSaS68ue", s1);
    ad_trace_span_of("lease_-P8I3kD0BUmzKs_h9Mr3iSaS68ue", s2);
    assert_string_equal(s1, s2);
    ad_trace_span_of("lease_-P8I3kD0BUmzKs_h9Mr3iSaS68uf", s2);
    assert_string_not_equal(s1, s2);
}

static void test_ratio(void **state)
{
    assert_true(ad_trace_id_within(TRACE, 1));
    assert_false(ad_trace_id_within(TRACE, 0));
    assert_true(ad_trace_id_within("ffffffffffffffff0000000000000000", 0.001));
    assert_false(ad_trace_id_within("0000000000000000ffffffffffffffff", 0.999));
    /* About half of random traces at 0.5. */
    int in = 0;
    for (int i = 0; i < 2000; i++) {
        char t[AD_TRACE_ID_HEX + 1];
        ad_trace_new_trace_id(t);
        in += ad_trace_id_within(t, 0.5);
    }
    assert_in_range(in, 800, 1200);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_traceparent_valid),
        cmocka_unit_test(test_traceparent_invalid),
        cmocka_unit_test(test_tracestate_clean),
        cmocka_unit_test(test_tracestate_size),
        cmocka_unit_test(test_tracestate_push),
        cmocka_unit_test(test_ids),
        cmocka_unit_test(test_ratio),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
