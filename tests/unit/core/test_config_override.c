/*
 * test_config_override.c - unit tests for src/core/config_override.c: the setters behind --listen, --data,
 * --public-url and --store (each leaves cfg as it was on a bad value), the ACCEPTD_* environment variables,
 * and that the file's store.postgres goes through the same check without quoting the URL it refuses.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/config.h"

static void test_listen(void **state)
{
    (void)state;
    static const struct {
        const char *in, *host;
        int port;
    } good[] = {
        {"127.0.0.1:8080", "127.0.0.1", 8080},
        {"[::1]:8080", "::1", 8080},
        {"[::]:443", "::", 443},
        {"[fe80::1:2]:1", "fe80::1:2", 1},
        {":8080", "0.0.0.0", 8080},
        {"localhost:0", "localhost", 0},
        {"0.0.0.0:65535", "0.0.0.0", 65535},
        {"my-host.example_1.com:80", "my-host.example_1.com", 80},
    };
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        struct ad_config cfg;
        ad_config_defaults(&cfg);
        if (ad_config_set_listen(&cfg, good[i].in) != 0)
            fail_msg("rejected '%s'", good[i].in);
        assert_string_equal(cfg.listen_host, good[i].host);
        assert_int_equal(cfg.listen_port, good[i].port);
        ad_config_free(&cfg);
    }
    static const char *const bad[] = {
        "",
        "8080",
        "localhost",
        "localhost:",
        "localhost:65536",
        "localhost:-1",
        "localhost:+80",
        "localhost: 80",
        "localhost:80x",
        "::1:8080",
        "[::1]",
        "[::1]8080",
        "[]:80",
        "[::1:80",
        "[127.0.0.1]:80",
        "[::g]:80",
        "local host:80",
        "a/b:80",
        "[::1]:",
        ":",
        "host:99999999999999999999",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct ad_config cfg;
        ad_config_defaults(&cfg);
        if (ad_config_set_listen(&cfg, bad[i]) != -1)
            fail_msg("accepted '%s'", bad[i]);
        assert_string_equal(cfg.listen_host, "127.0.0.1"); /* unchanged on error */
        assert_int_equal(cfg.listen_port, 8080);
        ad_config_free(&cfg);
    }
    struct ad_config cfg;
    ad_config_defaults(&cfg);
    assert_int_equal(ad_config_set_listen(&cfg, NULL), -1);
    ad_config_free(&cfg);
}

static void test_public_url_and_data(void **state)
{
    (void)state;
    static const struct {
        const char *in, *want;
    } good[] = {
        {"http://127.0.0.1:8080", "http://127.0.0.1:8080"},
        {"https://jobs.example.com/", "https://jobs.example.com"},
        {"https://example.com/base//", "https://example.com/base"},
    };
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        struct ad_config cfg;
        ad_config_defaults(&cfg);
        assert_int_equal(ad_config_set_public_url(&cfg, good[i].in), 0);
        assert_string_equal(cfg.public_url, good[i].want);
        ad_config_free(&cfg);
    }
    static const char *const bad[] = {
        "",           "example.com",   "ftp://example.com", "http://",  "https:///",  "http:///path",
        "http://a b", "http://a/?q=1", "http://a/#f",       "HTTP://a", "http://a\n",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct ad_config cfg;
        ad_config_defaults(&cfg);
        if (ad_config_set_public_url(&cfg, bad[i]) != -1)
            fail_msg("accepted '%s'", bad[i]);
        assert_null(cfg.public_url);
        ad_config_free(&cfg);
    }

    struct ad_config cfg;
    ad_config_defaults(&cfg);
    assert_int_equal(ad_config_set_data(&cfg, "/tmp/x"), 0);
    assert_string_equal(cfg.data_dir, "/tmp/x");
    assert_int_equal(ad_config_set_data(&cfg, ""), -1);
    assert_int_equal(ad_config_set_data(&cfg, "a\tb"), -1);
    assert_int_equal(ad_config_set_data(&cfg, NULL), -1);
    assert_string_equal(cfg.data_dir, "/tmp/x");
    ad_config_free(&cfg);
}

static void test_env(void **state)
{
    (void)state;
    struct ad_config cfg;
    char err[256] = "";
    ad_config_defaults(&cfg);
    unsetenv("ACCEPTD_LISTEN");
    unsetenv("ACCEPTD_DATA");
    unsetenv("ACCEPTD_PUBLIC_URL");
    assert_int_equal(ad_config_apply_env(&cfg, err, sizeof err), 0);
    assert_string_equal(cfg.listen_host, "127.0.0.1");
    assert_string_equal(cfg.data_dir, "./data");
    assert_null(cfg.public_url);

    setenv("ACCEPTD_LISTEN", "[::1]:9000", 1);
    setenv("ACCEPTD_DATA", "/srv/acceptd", 1);
    setenv("ACCEPTD_PUBLIC_URL", "https://q.example/", 1);
    assert_int_equal(ad_config_apply_env(&cfg, err, sizeof err), 0);
    assert_string_equal(cfg.listen_host, "::1");
    assert_int_equal(cfg.listen_port, 9000);
    assert_string_equal(cfg.data_dir, "/srv/acceptd");
    assert_string_equal(cfg.public_url, "https://q.example");

    setenv("ACCEPTD_DATA", "", 1); /* empty counts as unset */
    unsetenv("ACCEPTD_PUBLIC_URL");
    assert_int_equal(ad_config_apply_env(&cfg, err, sizeof err), 0);
    assert_string_equal(cfg.data_dir, "/srv/acceptd");

    setenv("ACCEPTD_LISTEN", "nonsense", 1);
    assert_int_equal(ad_config_apply_env(&cfg, err, sizeof err), -1);
    assert_string_equal(err, "ACCEPTD_LISTEN: expected HOST:PORT, [IPv6]:PORT or :PORT, got 'nonsense'");
    unsetenv("ACCEPTD_LISTEN");

    setenv("ACCEPTD_PUBLIC_URL", "ftp://x", 1);
    assert_int_equal(ad_config_apply_env(&cfg, err, sizeof err), -1);
    assert_non_null(strstr(err, "ACCEPTD_PUBLIC_URL: expected an http:// or https:// URL"));
    unsetenv("ACCEPTD_PUBLIC_URL");
    unsetenv("ACCEPTD_DATA");
    ad_config_free(&cfg);
}

static void test_store(void **state)
{
    (void)state;
    struct ad_config cfg;
    char err[256] = "";
    ad_config_defaults(&cfg);
    assert_null(cfg.store); /* SQLite unless told otherwise */
    assert_int_equal(ad_config_set_store(&cfg, "postgresql://u:pw@127.0.0.1/db"), 0);
    assert_string_equal(cfg.store, "postgresql://u:pw@127.0.0.1/db");
    assert_int_equal(ad_config_set_store(&cfg, "postgres://127.0.0.1/db"), 0);
    assert_string_equal(cfg.store, "postgres://127.0.0.1/db");
    static const char *const bad[] = {"", "mysql://127.0.0.1/db", "postgresql:/x", "postgresql://a\nb", NULL};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        if (ad_config_set_store(&cfg, bad[i]) != -1)
            fail_msg("accepted '%s'", bad[i] ? bad[i] : "(null)");
        assert_string_equal(cfg.store, "postgres://127.0.0.1/db");
    }

    unsetenv("ACCEPTD_LISTEN");
    unsetenv("ACCEPTD_DATA");
    unsetenv("ACCEPTD_PUBLIC_URL");
    setenv("ACCEPTD_STORE", "postgresql://127.0.0.1:5433/q", 1);
    assert_int_equal(ad_config_apply_env(&cfg, err, sizeof err), 0);
    assert_string_equal(cfg.store, "postgresql://127.0.0.1:5433/q");
    setenv("ACCEPTD_STORE", "sqlite://x", 1);
    assert_int_equal(ad_config_apply_env(&cfg, err, sizeof err), -1);
    assert_string_equal(err, "ACCEPTD_STORE: expected a postgresql:// connection URL, got 'sqlite://x'");
    unsetenv("ACCEPTD_STORE");
    ad_config_free(&cfg);

    /* The file's value may hold a password: the error describes it, never quotes it. */
    const char *yaml = "store:\n  postgres: mysql://u:secret@127.0.0.1/db\n";
    ad_config_defaults(&cfg);
    assert_int_equal(ad_config_load_string(&cfg, yaml, strlen(yaml), err, sizeof err), -1);
    assert_string_equal(err, "<config>:2: store.postgres: expected a postgresql:// connection URL");
    ad_config_free(&cfg);
    yaml = "store: { postgres: \"postgresql://127.0.0.1/f\" }\n";
    ad_config_defaults(&cfg);
    assert_int_equal(ad_config_load_string(&cfg, yaml, strlen(yaml), err, sizeof err), 0);
    assert_string_equal(cfg.store, "postgresql://127.0.0.1/f");
    ad_config_free(&cfg);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_listen),
        cmocka_unit_test(test_public_url_and_data),
        cmocka_unit_test(test_env),
        cmocka_unit_test(test_store),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
