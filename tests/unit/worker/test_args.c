/*
 * test_args.c - unit tests for src/worker/args.c: the worker's options, their defaults from ACCEPTD_URL and
 * ACCEPTD_KEY, and every refusal with its message.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "worker/worker.h"

/* ---- options ---- */

static int parse(struct ad_worker_opts *o, char *err, size_t errlen, ...)
{
    char *argv[64];
    int argc = 0;
    va_list ap;
    va_start(ap, errlen);
    for (char *a = va_arg(ap, char *); a != NULL; a = va_arg(ap, char *))
        argv[argc++] = a;
    va_end(ap);
    argv[argc] = NULL;
    static char *keep[64];
    memcpy(keep, argv, sizeof(argv)); /* o->command points into argv: keep it alive after return */
    err[0] = '\0';
    return ad_worker_parse_args(argc, keep, o, err, errlen);
}

static void clear_env(void)
{
    unsetenv("ACCEPTD_URL");
    unsetenv("ACCEPTD_KEY");
}

static void test_args_full(void **state)
{
    (void)state;
    clear_env();
    struct ad_worker_opts o;
    char err[256];
    int rc = parse(&o, err, sizeof(err), "--url", "http://h:1/", "--key", "k", "--type", "a.b", "--type", "c",
                   "--concurrency", "7", "--lease-seconds", "12", "--grace", "0", "--lease-wait", "2", "--name", "w1",
                   "--", "cmd", "--url", "x", NULL);
    assert_int_equal(rc, 0);
    assert_string_equal(o.url, "http://h:1/");
    assert_string_equal(o.key, "k");
    assert_int_equal(o.ntypes, 2);
    assert_string_equal(o.types[0], "a.b");
    assert_string_equal(o.types[1], "c");
    assert_int_equal(o.concurrency, 7);
    assert_int_equal(o.lease_seconds, 12);
    assert_int_equal(o.grace_seconds, 0);
    assert_int_equal(o.lease_wait, 2);
    assert_string_equal(o.name, "w1");
    /* Everything after -- belongs to the command, options included. */
    assert_string_equal(o.command[0], "cmd");
    assert_string_equal(o.command[1], "--url");
    assert_string_equal(o.command[2], "x");
    assert_null(o.command[3]);
}

static void test_args_defaults_and_env(void **state)
{
    (void)state;
    clear_env();
    setenv("ACCEPTD_URL", "https://env.example", 1);
    setenv("ACCEPTD_KEY", "envkey", 1);
    struct ad_worker_opts o;
    char err[256];
    assert_int_equal(parse(&o, err, sizeof(err), "--type", "t", "run.sh", "arg", NULL), 0);
    assert_string_equal(o.url, "https://env.example");
    assert_string_equal(o.key, "envkey");
    assert_int_equal(o.concurrency, 1);
    assert_int_equal(o.lease_seconds, 30);
    assert_int_equal(o.grace_seconds, 10);
    assert_int_equal(o.lease_wait, 5);
    assert_null(o.name);
    assert_string_equal(o.command[0], "run.sh"); /* a command may also start without -- */
    assert_string_equal(o.command[1], "arg");

    /* Flags win over the environment; an empty --key means none. */
    assert_int_equal(parse(&o, err, sizeof(err), "--url", "http://flag", "--key", "", "--type", "t", "--", "c", NULL),
                     0);
    assert_string_equal(o.url, "http://flag");
    assert_null(o.key);
    clear_env();
}

static void test_args_errors(void **state)
{
    (void)state;
    clear_env();
    struct ad_worker_opts o;
    char err[256];
    struct {
        int rc;
        const char *want; /* a piece of the message */
        char *args[12];
    } cases[] = {
        {-1, "no command", {"--url", "http://h", "--type", "t", NULL}},
        {-1, "no command", {"--url", "http://h", "--type", "t", "--", NULL}},
        {-1, "no server URL", {"--type", "t", "--", "c", NULL}},
        {-1, "no job type", {"--url", "http://h", "--", "c", NULL}},
        {-1, "http:// or https://", {"--url", "ftp://h", "--type", "t", "--", "c", NULL}},
        {-1, "--concurrency", {"--url", "http://h", "--type", "t", "--concurrency", "0", "--", "c", NULL}},
        {-1, "--concurrency", {"--url", "http://h", "--type", "t", "--concurrency", "101", "--", "c", NULL}},
        {-1, "--concurrency", {"--url", "http://h", "--type", "t", "--concurrency", "2x", "--", "c", NULL}},
        {-1, "--lease-seconds", {"--url", "http://h", "--type", "t", "--lease-seconds", "0", "--", "c", NULL}},
        {-1, "--grace", {"--url", "http://h", "--type", "t", "--grace", "-1", "--", "c", NULL}},
        {-1, "--lease-wait", {"--url", "http://h", "--type", "t", "--lease-wait", "61", "--", "c", NULL}},
        {-1, "unknown option --bogus", {"--url", "http://h", "--type", "t", "--bogus", "--", "c", NULL}},
        {-1, "--type needs a value", {"--url", "http://h", "--type", NULL}},
        {-1, "--type", {"--url", "http://h", "--type", "", "--", "c", NULL}},
        {1, "", {"--url", "http://h", "--help", NULL}},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        int argc = 0;
        while (cases[i].args[argc] != NULL)
            argc++;
        err[0] = '\0';
        int rc = ad_worker_parse_args(argc, cases[i].args, &o, err, sizeof(err));
        if (rc != cases[i].rc || strstr(err, cases[i].want) == NULL)
            fail_msg("case %zu: rc %d (want %d), message '%s' (want '%s')", i, rc, cases[i].rc, err, cases[i].want);
    }

    /* At most AD_WORKER_MAX_TYPES types. */
    char *argv[2 * AD_WORKER_MAX_TYPES + 8];
    int argc = 0;
    argv[argc++] = "--url";
    argv[argc++] = "http://h";
    for (int i = 0; i <= AD_WORKER_MAX_TYPES; i++) {
        argv[argc++] = "--type";
        argv[argc++] = "t";
    }
    argv[argc++] = "c";
    argv[argc] = NULL;
    assert_int_equal(ad_worker_parse_args(argc, argv, &o, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "at most"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_args_full),
        cmocka_unit_test(test_args_defaults_and_env),
        cmocka_unit_test(test_args_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
