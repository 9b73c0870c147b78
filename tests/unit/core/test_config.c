/*
 * test_config.c - unit tests for src/core/config.c and config_override.c: defaults, the YAML format and its errors
 * (with line numbers), retention and maxAttempts fallbacks, listen parsing, environment overrides and lookups.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/config.h"

#define SEC 1000LL
#define DAY (86400 * SEC)

/* Load yaml over defaults into cfg; returns the loader's result, err holds its message. */
static int load(struct ad_config *cfg, const char *yaml, char *err, size_t errlen)
{
    ad_config_defaults(cfg);
    return ad_config_load_string(cfg, yaml, strlen(yaml), err, errlen);
}

/* The YAML must be rejected with a message containing want; cfg is freed either way. */
static void expect_error(const char *yaml, const char *want)
{
    struct ad_config cfg;
    char err[256] = "";
    int rc = load(&cfg, yaml, err, sizeof err);
    ad_config_free(&cfg);
    if (rc != -1)
        fail_msg("accepted:\n%s", yaml);
    if (strstr(err, want) == NULL)
        fail_msg("error '%s' does not contain '%s'", err, want);
}

static const char example[] =
    "listen: 127.0.0.1:9090\n"
    "data: /var/lib/acceptd\n"
    "publicUrl: https://jobs.example.com/\n"
    "keys:\n"
    "  - { key: \"ka\", tenant: a, role: client }\n"
    "  - { key: \"kw\", tenant: a, role: worker }\n"
    "  - key: kadm\n"
    "    tenant: b\n"
    "    role: admin\n"
    "types:\n"
    "  video.transcode: { required: [sourceUrl, format], maxAttempts: 5, timeoutSeconds: 600,\n"
    "                     retention: { succeeded: 1d, failed: 2d, cancelled: 3h, partialSuccess: 4m } }\n"
    "  report.build: { retention: { failed: 90d } }\n"
    "  noop:\n"
    "routes:\n"
    "  - { method: POST, path: /v1/videos, type: video.transcode, resource: \"/v1/videos/{id}\",\n"
    "      onComplete: redirect, requireIdempotencyKey: true }\n"
    "  - { method: PUT, path: /v1/reports, type: report.build }\n"
    "retention: { succeeded: 10d, failed: 20d, cancelled: 30d, partialSuccess: 40d }\n"
    "tombstone: 2d\n"
    "idempotencyTtl: 12h\n"
    "sweepInterval: 250ms\n"
    "maxAttempts: 7\n"
    "retryBackoff: 5s\n"
    "limits: { maxBodyBytes: 2048, maxWaitSeconds: 30, maxConnections: 500, cacheBytes: 8388608,"
    " scheduledTimers: 3, maxQueuedWrites: 7, maxUnsentBytesPerConnection: 2097152, maxUnsentBytes: 4194304,"
    " unsentStall: 3s }\n";

static void test_defaults(void **state)
{
    (void)state;
    struct ad_config cfg;
    ad_config_defaults(&cfg);
    assert_string_equal(cfg.listen_host, "127.0.0.1");
    assert_int_equal(cfg.listen_port, 8080);
    assert_string_equal(cfg.data_dir, "./data");
    assert_null(cfg.public_url);
    assert_int_equal(cfg.nkeys, 0);
    assert_int_equal(cfg.ntypes, 0);
    assert_int_equal(cfg.nroutes, 0);
    assert_int_equal(cfg.retention.succeeded_ms, 30 * DAY);
    assert_int_equal(cfg.retention.failed_ms, 30 * DAY);
    assert_int_equal(cfg.retention.cancelled_ms, 30 * DAY);
    assert_int_equal(cfg.retention.partial_ms, 30 * DAY);
    assert_int_equal(cfg.tombstone_ms, 7 * DAY);
    assert_int_equal(cfg.idempotency_ttl_ms, DAY);
    assert_int_equal(cfg.sweep_interval_ms, SEC);
    assert_int_equal(cfg.max_body_bytes, 1048576);
    assert_int_equal(cfg.max_wait_seconds, 60);
    assert_int_equal(cfg.default_max_attempts, 3);
    assert_int_equal(cfg.retry_backoff_ms, SEC);
    assert_int_equal(cfg.max_connections, 10000);
    assert_int_equal(cfg.cache_bytes, 64 << 20);
    assert_int_equal(cfg.scheduled_timers, 10000);
    assert_int_equal(cfg.max_queued_writes, 10000);
    assert_int_equal(cfg.max_unsent_per_conn, 8 << 20);
    assert_int_equal(cfg.max_unsent, 128 << 20);
    assert_int_equal(cfg.unsent_stall_ms, 10 * SEC);
    ad_config_free(&cfg);
    assert_null(cfg.listen_host);
    assert_null(cfg.data_dir);
    ad_config_free(&cfg); /* freeing twice is harmless: free zeroes the struct */
}

static void test_full_example(void **state)
{
    (void)state;
    struct ad_config cfg;
    char err[256] = "";
    if (load(&cfg, example, err, sizeof err) != 0)
        fail_msg("%s", err);
    assert_string_equal(err, "");

    assert_string_equal(cfg.listen_host, "127.0.0.1");
    assert_int_equal(cfg.listen_port, 9090);
    assert_string_equal(cfg.data_dir, "/var/lib/acceptd");
    assert_string_equal(cfg.public_url, "https://jobs.example.com"); /* no trailing slash */

    assert_int_equal(cfg.nkeys, 3);
    assert_string_equal(cfg.keys[0].key, "ka");
    assert_string_equal(cfg.keys[0].tenant, "a");
    assert_int_equal(cfg.keys[0].role, AD_ROLE_CLIENT);
    assert_int_equal(cfg.keys[1].role, AD_ROLE_WORKER);
    assert_string_equal(cfg.keys[2].key, "kadm");
    assert_string_equal(cfg.keys[2].tenant, "b");
    assert_int_equal(cfg.keys[2].role, AD_ROLE_ADMIN);

    assert_int_equal(cfg.ntypes, 3);
    const struct ad_type_conf *t = ad_config_type(&cfg, "video.transcode");
    assert_non_null(t);
    assert_string_equal(t->name, "video.transcode");
    assert_int_equal(t->nrequired, 2);
    assert_string_equal(t->required[0], "sourceUrl");
    assert_string_equal(t->required[1], "format");
    assert_int_equal(t->max_attempts, 5);
    assert_int_equal(t->timeout_seconds, 600);
    assert_int_equal(t->retention.succeeded_ms, DAY);
    assert_int_equal(t->retention.failed_ms, 2 * DAY);
    assert_int_equal(t->retention.cancelled_ms, 3 * 3600 * SEC);
    assert_int_equal(t->retention.partial_ms, 4 * 60 * SEC);

    t = ad_config_type(&cfg, "noop"); /* a type with no settings at all */
    assert_non_null(t);
    assert_int_equal(t->nrequired, 0);
    assert_int_equal(t->max_attempts, 7);
    assert_int_equal(t->timeout_seconds, 0);
    assert_int_equal(t->retention.succeeded_ms, 10 * DAY);
    assert_null(ad_config_type(&cfg, "video"));
    assert_null(ad_config_type(&cfg, "video.transcode2"));

    assert_int_equal(cfg.nroutes, 2);
    const struct ad_route *r = &cfg.routes[0];
    assert_string_equal(r->method, "POST");
    assert_string_equal(r->path, "/v1/videos");
    assert_string_equal(r->type, "video.transcode");
    assert_string_equal(r->resource, "/v1/videos/{id}");
    assert_int_equal(r->on_complete_redirect, 1);
    assert_int_equal(r->require_idempotency_key, 1);
    r = &cfg.routes[1];
    assert_string_equal(r->method, "PUT");
    assert_null(r->resource);
    assert_int_equal(r->on_complete_redirect, 0);
    assert_int_equal(r->require_idempotency_key, 0);

    assert_int_equal(cfg.retention.succeeded_ms, 10 * DAY);
    assert_int_equal(cfg.retention.failed_ms, 20 * DAY);
    assert_int_equal(cfg.retention.cancelled_ms, 30 * DAY);
    assert_int_equal(cfg.retention.partial_ms, 40 * DAY);
    assert_int_equal(cfg.tombstone_ms, 2 * DAY);
    assert_int_equal(cfg.idempotency_ttl_ms, 12 * 3600 * SEC);
    assert_int_equal(cfg.sweep_interval_ms, 250);
    assert_int_equal(cfg.default_max_attempts, 7);
    assert_int_equal(cfg.retry_backoff_ms, 5 * SEC);
    assert_int_equal(cfg.max_body_bytes, 2048);
    assert_int_equal(cfg.max_wait_seconds, 30);
    assert_int_equal(cfg.max_connections, 500);
    assert_int_equal(cfg.cache_bytes, 8388608);
    assert_int_equal(cfg.scheduled_timers, 3);
    assert_int_equal(cfg.max_queued_writes, 7);
    assert_int_equal(cfg.max_unsent_per_conn, 2097152);
    assert_int_equal(cfg.max_unsent, 4194304);
    assert_int_equal(cfg.unsent_stall_ms, 3 * SEC);
    ad_config_free(&cfg);
}

static void test_retention_fallback(void **state)
{
    (void)state;
    struct ad_config cfg;
    char err[256] = "";
    /* The type comes before the global retention it falls back to: order in the file must not matter. */
    const char *yaml = "types:\n"
                       "  a: { retention: { failed: 90d } }\n"
                       "  b: {}\n"
                       "retention: { succeeded: 1d, cancelled: 2h }\n";
    if (load(&cfg, yaml, err, sizeof err) != 0)
        fail_msg("%s", err);
    const struct ad_type_conf *a = ad_config_type(&cfg, "a"), *b = ad_config_type(&cfg, "b");
    assert_non_null(a);
    assert_non_null(b);
    assert_int_equal(a->retention.failed_ms, 90 * DAY); /* its own */
    assert_int_equal(a->retention.succeeded_ms, DAY);   /* global, from the file */
    assert_int_equal(a->retention.cancelled_ms, 2 * 3600 * SEC);
    assert_int_equal(a->retention.partial_ms, 30 * DAY); /* global default */
    assert_int_equal(b->retention.failed_ms, 30 * DAY);
    assert_int_equal(b->retention.succeeded_ms, DAY);
    assert_int_equal(a->max_attempts, 3); /* global default maxAttempts */
    ad_config_free(&cfg);

    /* A retention of 0 is a real value (expire at once), not "not given". */
    if (load(&cfg, "types: { a: { retention: { succeeded: 0 } } }\n", err, sizeof err) != 0)
        fail_msg("%s", err);
    assert_int_equal(cfg.types[0].retention.succeeded_ms, 0);
    assert_int_equal(cfg.types[0].retention.failed_ms, 30 * DAY);
    ad_config_free(&cfg);
}

static void test_empty_and_null_documents(void **state)
{
    (void)state;
    static const char *const docs[] = {"", "\n# only a comment\n", "---\n", "~\n", "---\n...\n"};
    for (size_t i = 0; i < sizeof docs / sizeof docs[0]; i++) {
        struct ad_config cfg;
        char err[256] = "";
        if (load(&cfg, docs[i], err, sizeof err) != 0)
            fail_msg("'%s': %s", docs[i], err);
        assert_int_equal(cfg.listen_port, 8080);
        assert_string_equal(cfg.data_dir, "./data");
        ad_config_free(&cfg);
    }

    /* Empty lists are allowed and mean "none". */
    struct ad_config cfg;
    char err[256] = "";
    if (load(&cfg, "keys: []\ntypes: {}\nroutes:\n", err, sizeof err) != 0)
        fail_msg("%s", err);
    assert_int_equal(cfg.nkeys, 0);
    assert_int_equal(cfg.ntypes, 0);
    assert_int_equal(cfg.nroutes, 0);
    ad_config_free(&cfg);
}

static void test_malformed_yaml(void **state)
{
    (void)state;
    expect_error("listen: [\n", "<config>:2:");
    expect_error("a: b\n  c: d\n", "<config>:2: mapping values are not allowed");
    expect_error("keys:\n  - { key: \"unterminated }\n", "<config>:");
    expect_error("listen: :8080\n\tdata: x\n", "<config>:2:");
    expect_error("listen: *nowhere\n", "<config>:1:");
    expect_error("- a\n- b\n", "<config>:1: expected a mapping in the top level");
    expect_error("just a string\n", "expected a mapping in the top level");
    expect_error("listen: :1\n---\nlisten: :2\n", "<config>:3: only one YAML document is allowed");
}

static void test_unknown_keys(void **state)
{
    (void)state;
    expect_error("listen: :8080\nlisen: :9\n", "<config>:2: unknown key 'lisen' in the top level");
    expect_error("routes:\n  - { method: POST, path: /x, type: t, x: 1 }\n",
                 "<config>:2: unknown key 'x' in routes[0]");
    expect_error("keys:\n  - { key: k1, tenant: a, role: client }\n  - { key: k2, tenant: a, role: client,\n"
                 "      tennant: b }\n",
                 "<config>:4: unknown key 'tennant' in keys[1]");
    expect_error("limits: { maxBodyBytes: 10, maxWait: 5 }\n", "<config>:1: unknown key 'maxWait' in limits");
    expect_error("types:\n  v.t:\n    maxAtempts: 2\n", "<config>:3: unknown key 'maxAtempts' in types.v.t");
    expect_error("types:\n  v: { retention: { succeded: 1d } }\n",
                 "<config>:2: unknown key 'succeded' in types.v.retention");
    expect_error("retention: { partial: 1d }\n", "unknown key 'partial' in retention");
    expect_error("listen: :1\nlisten: :2\n", "<config>:2: duplicate key 'listen' in the top level");
    expect_error("limits: { maxBodyBytes: 1, maxBodyBytes: 2 }\n", "duplicate key 'maxBodyBytes' in limits");
    expect_error("types: { a: {}, a: {} }\n", "duplicate key 'a' in types");
    expect_error("? [a, b]\n: c\n", "<config>:1: expected a plain key in the top level");
}

/* sse, tls and signingKey: defaults, values, and errors that never quote the key. */
static void test_sse_tls_signing(void **state)
{
    struct ad_config cfg;
    char err[256] = "";
    assert_int_equal(load(&cfg, "", err, sizeof err), 0);
    assert_int_equal(cfg.sse.heartbeat_ms, 15000);
    assert_int_equal(cfg.sse.retry_ms, 2000);
    assert_int_equal(cfg.sse.overload_retry_ms, 30000);
    assert_int_equal(cfg.sse.backlog_bytes, 1024 * 1024);
    assert_int_equal(cfg.sse.max_streams, 50000);
    assert_int_equal(cfg.sse.max_streams_per_tenant, 20000);
    assert_int_equal(cfg.sse.io_uring, 1);
    assert_null(cfg.tls.cert);
    assert_null(cfg.signing_key);
    ad_config_free(&cfg);

    const char *yaml = "sse: { heartbeat: 5s, retry: 500ms, overloadRetry: 1m, backlogBytes: 4096, maxStreams: 7,"
                       " maxStreamsPerTenant: 3, ioUring: false }\n"
                       "tls: { cert: /etc/c.pem, key: /etc/k.pem }\n"
                       "signingKey: 0123456789abcdef0123456789abcdef\n";
    assert_int_equal(load(&cfg, yaml, err, sizeof err), 0);
    assert_int_equal(cfg.sse.heartbeat_ms, 5000);
    assert_int_equal(cfg.sse.retry_ms, 500);
    assert_int_equal(cfg.sse.overload_retry_ms, 60000);
    assert_int_equal(cfg.sse.backlog_bytes, 4096);
    assert_int_equal(cfg.sse.max_streams, 7);
    assert_int_equal(cfg.sse.max_streams_per_tenant, 3);
    assert_int_equal(cfg.sse.io_uring, 0);
    assert_string_equal(cfg.tls.cert, "/etc/c.pem");
    assert_string_equal(cfg.tls.key, "/etc/k.pem");
    assert_string_equal(cfg.signing_key, "0123456789abcdef0123456789abcdef");
    ad_config_free(&cfg);

    expect_error("sse: { heartbeat: 10ms }\n", "sse.heartbeat: expected a duration");
    expect_error("sse: { backlogBytes: 10 }\n", "sse.backlogBytes: expected an integer from 1024");
    expect_error("sse: { retries: 1 }\n", "unknown key 'retries' in sse");
    expect_error("tls: { cert: /a, chain: /b }\n", "unknown key 'chain' in tls");
    expect_error("signingKey: short-secret\n", "signingKey: expected at least 32 characters");
    assert_int_equal(load(&cfg, "signingKey: short-secret\n", err, sizeof err), -1);
    assert_null(strstr(err, "short-secret"));
    ad_config_free(&cfg);
}

static void test_wrong_values(void **state)
{
    (void)state;
    expect_error("maxAttempts: abc\n", "<config>:1: maxAttempts: expected an integer from 1 to 100, got 'abc'");
    expect_error("maxAttempts: 0\n", "maxAttempts: expected an integer from 1 to 100, got '0'");
    expect_error("maxAttempts: 101\n", "got '101'");
    expect_error("maxAttempts: [3]\n", "got '(not a scalar)'");
    expect_error("\n\nlimits:\n  maxBodyBytes: -1\n", "<config>:4: limits.maxBodyBytes: expected an integer");
    expect_error("limits: { maxBodyBytes: 99999999999999999999 }\n", "limits.maxBodyBytes");
    /* The cache needs room for at least one large job. */
    expect_error("limits: { cacheBytes: 1048575 }\n",
                 "<config>:1: limits.cacheBytes: expected an integer from 1048576 to 1099511627776, got '1048575'");
    expect_error("limits: { maxConnections: 0 }\n", "limits.maxConnections");
    expect_error("limits: { scheduledTimers: 0 }\n", "limits.scheduledTimers");
    expect_error("limits: { maxQueuedWrites: 0 }\n", "limits.maxQueuedWrites");
    expect_error("limits: { maxWaitSeconds: 3601 }\n", "limits.maxWaitSeconds");
    /* Below 1 MiB a job's own representation could never be answered. */
    expect_error("limits: { maxUnsentBytesPerConnection: 65536 }\n",
                 "<config>:1: limits.maxUnsentBytesPerConnection: expected an integer from 1048576 to 1099511627776, "
                 "got '65536'");
    expect_error("limits: { maxUnsentBytes: 0 }\n", "limits.maxUnsentBytes: expected an integer from 1048576");
    expect_error("limits: { unsentStall: 500ms }\n", "<config>:1: limits.unsentStall: expected a duration");
    expect_error("limits: { unsentStall: 2h }\n", "limits.unsentStall");
    expect_error("limits: { maxUnsentBytes: 4194304 }\n",
                 "<config>: limits.maxUnsentBytesPerConnection (8388608) must not be more than limits.maxUnsentBytes "
                 "(4194304)");
    expect_error("limits: 5\n", "<config>:1: expected a mapping in limits");
    expect_error("tombstone: 7 days\n", "<config>:1: tombstone: expected a duration");
    expect_error("tombstone: -1s\n", "tombstone: expected a duration");
    expect_error("sweepInterval: 0s\n", "sweepInterval: expected a duration such as 30, 500ms, 10s, 5m, 2h or 30d "
                                        "(more than 0), got '0s'");
    expect_error("idempotencyTtl: 1w\n", "idempotencyTtl");
    expect_error("retryBackoff: 0ms\n", "retryBackoff: expected a duration");
    expect_error("retention: { succeeded: 36501d }\n", "retention.succeeded"); /* beyond 100 years */
    expect_error("retention: 30d\n", "expected a mapping in retention");
    expect_error("types:\n  v: { timeoutSeconds: 604801 }\n", "types.v.timeoutSeconds");
    expect_error("types:\n  v: { required: sourceUrl }\n", "<config>:2: types.v.required: expected a list");
    expect_error("types:\n  v: { required: [a, \"\"] }\n", "types.v.required[1]: expected a non-empty string");
    expect_error("types:\n  v: { required: [a, {b: c}] }\n", "types.v.required[1]: expected a non-empty string");
    expect_error("types:\n  v: 3\n", "expected a mapping in types.v");
    expect_error("types: [a, b]\n", "types: expected a mapping");
    expect_error("types:\n  \"\": {}\n", "<config>:2: types: expected a non-empty string");
    expect_error("keys: { key: k }\n", "keys: expected a list");
    expect_error("keys: [k1]\n", "expected a mapping in keys[0]");
    expect_error("data: \"\"\n", "data: expected a non-empty string");
    expect_error("data:\n", "data: expected a non-empty string");
    expect_error("data: \"a\\0b\"\n", "data: control characters are not allowed");
    expect_error("data: \"a\\nb\"\n", "data: control characters are not allowed");
    expect_error("listen: localhost\n", "<config>:1: listen: expected HOST:PORT");
    expect_error("listen: 8080\n", "listen: expected HOST:PORT");
    expect_error("publicUrl: ftp://x\n", "publicUrl: expected an http:// or https:// URL");
    expect_error("publicUrl: https://x/?a=b\n", "publicUrl");

    /* A long type name is refused, and no error message runs past its buffer. */
    char yaml[400];
    memset(yaml, 'n', sizeof yaml);
    memcpy(yaml, "types: { ", 9);
    memcpy(yaml + 9 + 200, ": {} }\n", 8);
    expect_error(yaml, "a type name is at most 128 characters");
    char tiny[8];
    struct ad_config cfg;
    assert_int_equal(load(&cfg, "maxAttempts: abcdefghijkl\n", tiny, sizeof tiny), -1);
    assert_string_equal(tiny, "<config");
    ad_config_free(&cfg);
}

static void test_keys(void **state)
{
    (void)state;
    expect_error("keys:\n  - { key: k1, tenant: a, role: superuser }\n",
                 "<config>:2: keys[0].role: expected client, worker or admin, got 'superuser'");
    expect_error("keys:\n  - { key: k1, tenant: a, role: Client }\n", "keys[0].role: expected client");
    expect_error("keys:\n  - { key: k1, tenant: a }\n", "<config>:2: keys[0]: 'key', 'tenant' and 'role' are required");
    expect_error("keys:\n  - { tenant: a, role: admin }\n", "keys[0]: 'key', 'tenant' and 'role' are required");
    expect_error("keys:\n  - { key: k1, role: admin }\n", "keys[0]: 'key', 'tenant' and 'role' are required");
    expect_error("keys:\n  - { key: \"\", tenant: a, role: admin }\n", "keys[0].key: expected a non-empty string");
    expect_error("keys:\n  - { key: \"has space\", tenant: a, role: admin }\n",
                 "keys[0].key: a key must be printable ASCII without spaces");
    expect_error("keys:\n  - { key: k1, tenant: \"\", role: admin }\n", "keys[0].tenant: expected a non-empty string");

    /* Duplicate keys are refused, and the error does not print the secret. */
    struct ad_config cfg;
    char err[256] = "";
    const char *dup = "keys:\n"
                      "  - { key: s3cr3t-value, tenant: a, role: client }\n"
                      "  - { key: other, tenant: a, role: client }\n"
                      "  - { key: s3cr3t-value, tenant: b, role: admin }\n";
    assert_int_equal(load(&cfg, dup, err, sizeof err), -1);
    ad_config_free(&cfg);
    assert_string_equal(err, "<config>:4: keys[2]: the same key as keys[0]; keys must be unique");
    assert_null(strstr(err, "s3cr3t"));

    assert_int_equal(load(&cfg, "keys: [{ key: \"bad key\", tenant: a, role: admin }]\n", err, sizeof err), -1);
    ad_config_free(&cfg);
    assert_null(strstr(err, "bad key"));

    /* Short keys are allowed (tests use them). */
    if (load(&cfg, "keys: [{ key: k, tenant: t, role: worker }]\n", err, sizeof err) != 0)
        fail_msg("%s", err);
    assert_string_equal(cfg.keys[0].key, "k");
    ad_config_free(&cfg);
}

static void test_rate_limits(void **state)
{
    (void)state;
    struct ad_config cfg;
    char err[256] = "";
    const char *yaml = "keys:\n"
                       "  - { key: k1, tenant: a, role: client }\n"
                       "  - { key: k2, tenant: a, role: client, rateLimit: { requests: 5, window: 2s } }\n"
                       "  - { key: k3, tenant: a, role: worker, rateLimit: { requests: 0 } }\n"
                       "limits: { rateLimit: { requests: 100, window: 1m } }\n";
    if (load(&cfg, yaml, err, sizeof err) != 0)
        fail_msg("%s", err);
    assert_int_equal(cfg.rate_limit.requests, 100);
    assert_int_equal(cfg.rate_limit.window_ms, 60 * SEC);
    assert_false(cfg.keys[0].rate.set); /* takes limits.rateLimit */
    assert_true(cfg.keys[1].rate.set);
    assert_int_equal(cfg.keys[1].rate.requests, 5);
    assert_int_equal(cfg.keys[1].rate.window_ms, 2 * SEC);
    assert_true(cfg.keys[2].rate.set); /* no limit for this key, whatever the default */
    assert_int_equal(cfg.keys[2].rate.requests, 0);
    ad_config_free(&cfg);

    /* No limit unless configured. */
    ad_config_defaults(&cfg);
    assert_int_equal(cfg.rate_limit.requests, 0);
    ad_config_free(&cfg);

    expect_error("limits: { rateLimit: { requests: 10 } }\n",
                 "<config>:1: limits.rateLimit: 'window' is required with 'requests'");
    expect_error("limits: { rateLimit: { requests: 10, window: 1500ms } }\n",
                 "limits.rateLimit: 'window' must be a whole number of seconds");
    expect_error("limits: { rateLimit: { requests: 10, window: 500ms } }\n", "limits.rateLimit.window");
    expect_error("limits: { rateLimit: { requests: -1, window: 1s } }\n", "limits.rateLimit.requests");
    expect_error("keys:\n  - { key: k1, tenant: a, role: client, rateLimit: { rps: 3 } }\n",
                 "<config>:2: unknown key 'rps' in keys[0].rateLimit");
}

static void test_routes(void **state)
{
    (void)state;
    expect_error("types: { a: {} }\nroutes:\n  - { method: POST, path: /v1/x, type: b }\n",
                 "<config>:3: routes[0].type: 'b' is not one of the configured types");
    /* Routes before types: the check still runs, with the route's line. */
    expect_error("routes:\n  - { method: POST, path: /v1/x, type: a }\n  - { method: POST, path: /v1/y,\n"
                 "      type: zz }\ntypes: { a: {} }\n",
                 "<config>:4: routes[1].type: 'zz' is not one of the configured types");
    expect_error("routes:\n  - { method: POST, path: /v1/x, type: t, onComplete: maybe }\n",
                 "<config>:2: routes[0].onComplete: expected redirect or inline, got 'maybe'");
    expect_error("routes:\n  - { method: POST, type: t }\n", "routes[0]: 'method', 'path' and 'type' are required");
    expect_error("routes:\n  - { path: /x, type: t }\n", "routes[0]: 'method', 'path' and 'type' are required");
    expect_error("routes:\n  - { method: POST, path: /x }\n", "routes[0]: 'method', 'path' and 'type' are required");
    expect_error("routes:\n  - { method: post, path: /x, type: t }\n", "routes[0].method: expected an upper-case");
    expect_error("routes:\n  - { method: POST, path: v1/x, type: t }\n", "routes[0].path: expected a path");
    expect_error("routes:\n  - { method: POST, path: \"/x?y\", type: t }\n", "routes[0].path: expected a path");
    expect_error("routes:\n  - { method: POST, path: /x, type: t, resource: \"videos/{id}\" }\n",
                 "routes[0].resource: expected a path");
    expect_error("routes:\n  - { method: POST, path: /x, type: t, requireIdempotencyKey: yes }\n",
                 "routes[0].requireIdempotencyKey: expected true or false, got 'yes'");
    expect_error("routes:\n  - { method: POST, path: /x, type: t }\n  - { method: POST, path: /x, type: u }\n",
                 "<config>:3: routes[1]: POST /x is already routed by routes[0]");

    /* Without types any type name is accepted; same path with another method is a different route. */
    struct ad_config cfg;
    char err[256] = "";
    const char *yaml = "routes:\n"
                       "  - { method: POST, path: /v1/x, type: anything, onComplete: inline,"
                       " requireIdempotencyKey: false }\n"
                       "  - { method: PUT, path: /v1/x, type: other, requireIdempotencyKey: True }\n";
    if (load(&cfg, yaml, err, sizeof err) != 0)
        fail_msg("%s", err);
    assert_int_equal(cfg.nroutes, 2);
    assert_int_equal(cfg.routes[1].require_idempotency_key, 1);

    /* Lookups compare exactly, with explicit lengths (request strings are not NUL-terminated). */
    const char *req = "PUT /v1/xyz";
    const struct ad_route *r = ad_config_route(&cfg, req, 3, req + 4, 5);
    assert_non_null(r);
    assert_string_equal(r->type, "other");
    r = ad_config_route(&cfg, "POST", 4, "/v1/x", 5);
    assert_non_null(r);
    assert_string_equal(r->type, "anything");
    assert_null(ad_config_route(&cfg, req, 3, req + 4, 6));
    assert_null(ad_config_route(&cfg, req, 3, req + 4, 4));
    assert_null(ad_config_route(&cfg, "PO", 2, "/v1/x", 5));
    assert_null(ad_config_route(&cfg, "GET", 3, "/v1/x", 5));
    ad_config_free(&cfg);
}

static void test_aliases_do_not_loop(void **state)
{
    (void)state;
    /* An anchor referring to itself builds a cycle in libyaml's document; the walker must not follow it. */
    expect_error("keys: &a [*a]\n", "expected a mapping in keys[0]");
    expect_error("limits: &l { maxBodyBytes: *l }\n", "limits.maxBodyBytes: expected an integer");

    /* Ordinary aliases work. */
    struct ad_config cfg;
    char err[256] = "";
    const char *yaml = "retention: &r { succeeded: 1d, failed: 1d, cancelled: 1d, partialSuccess: 1d }\n"
                       "types: { a: { retention: *r } }\n";
    if (load(&cfg, yaml, err, sizeof err) != 0)
        fail_msg("%s", err);
    assert_int_equal(cfg.types[0].retention.partial_ms, DAY);
    ad_config_free(&cfg);
}

static void test_second_load_replaces_lists(void **state)
{
    (void)state;
    struct ad_config cfg;
    char err[256] = "";
    const char *second = "keys: [{ key: k2, tenant: b, role: admin }]\ndata: ./other\npublicUrl: ~\n";
    if (load(&cfg, example, err, sizeof err) != 0)
        fail_msg("%s", err);
    if (ad_config_load_string(&cfg, second, strlen(second), err, sizeof err) != 0)
        fail_msg("%s", err);
    assert_int_equal(cfg.nkeys, 1);
    assert_string_equal(cfg.keys[0].key, "k2");
    assert_string_equal(cfg.data_dir, "./other");
    assert_null(cfg.public_url);
    assert_int_equal(cfg.ntypes, 3); /* untouched lists stay */
    assert_int_equal(cfg.listen_port, 9090);

    /* An error part-way leaves cfg safe to free (ASan reports any leak or double free). */
    const char *broken = "keys:\n  - { key: k3, tenant: c, role: admin }\n  - { key: k3, tenant: c, role: bad }\n";
    assert_int_equal(ad_config_load_string(&cfg, broken, strlen(broken), err, sizeof err), -1);
    ad_config_free(&cfg);
}

/* The file's listen goes through the same parser as --listen (config_override.c). */
static void test_listen_in_file(void **state)
{
    (void)state;
    struct ad_config cfg;
    /* YAML needs quotes around the bracketed form, a bare :PORT works as a plain scalar. */
    char err[256] = "";
    if (load(&cfg, "listen: \"[::1]:9\"\n", err, sizeof err) != 0)
        fail_msg("%s", err);
    assert_string_equal(cfg.listen_host, "::1");
    assert_int_equal(cfg.listen_port, 9);
    ad_config_free(&cfg);
    if (load(&cfg, "listen: :7\n", err, sizeof err) != 0)
        fail_msg("%s", err);
    assert_string_equal(cfg.listen_host, "0.0.0.0");
    assert_int_equal(cfg.listen_port, 7);
    ad_config_free(&cfg);
}

static void test_load_file(void **state)
{
    (void)state;
    char path[] = "/tmp/acceptd-test-config-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    const char *yaml = "listen: :0\n"
                       "keys:\n"
                       "  - { key: ka, tenant: a, role: client }\n"
                       "\n"
                       "bogus: 1\n";
    assert_int_equal(write(fd, yaml, strlen(yaml)), (ssize_t)strlen(yaml));
    close(fd);

    struct ad_config cfg;
    char err[512] = "", want[600];
    ad_config_defaults(&cfg);
    assert_int_equal(ad_config_load_file(&cfg, path, err, sizeof err), -1);
    snprintf(want, sizeof want, "%s:5: unknown key 'bogus' in the top level", path);
    assert_string_equal(err, want);
    ad_config_free(&cfg);

    /* Rewrite without the bad key: loads, and the values are there. */
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("listen: :0\nkeys:\n  - { key: ka, tenant: a, role: client }\n", f);
    fclose(f);
    ad_config_defaults(&cfg);
    if (ad_config_load_file(&cfg, path, err, sizeof err) != 0)
        fail_msg("%s", err);
    assert_int_equal(cfg.listen_port, 0);
    assert_int_equal(cfg.nkeys, 1);
    ad_config_free(&cfg);
    unlink(path);

    ad_config_defaults(&cfg);
    assert_int_equal(ad_config_load_file(&cfg, "/nonexistent/acceptd.yaml", err, sizeof err), -1);
    assert_string_equal(err, "/nonexistent/acceptd.yaml: No such file or directory");
    ad_config_free(&cfg);
}

static void test_webhooks(void **state)
{
    (void)state;
    struct ad_config cfg;
    char err[256] = "";
    ad_config_defaults(&cfg);
    assert_int_equal(cfg.webhooks.nallow_networks, 0); /* nothing non-global is reachable by default */
    assert_int_equal(cfg.webhooks.nretry_schedule, 10);
    assert_int_equal(cfg.webhooks.retry_schedule_ms[0], 0);
    assert_int_equal(cfg.webhooks.retry_schedule_ms[9], 86400 * SEC);
    assert_int_equal(cfg.webhooks.timeout_seconds, 10);
    assert_int_equal(cfg.webhooks.concurrency, 64);
    assert_int_equal(cfg.webhooks.per_endpoint, 16);
    assert_int_equal(cfg.webhooks.headers_timeout_seconds, 5);
    assert_int_equal(cfg.webhooks.max_response_bytes, 64 * 1024);
    assert_null(cfg.webhooks.secret_key);
    assert_null(cfg.webhooks.ca_file);
    assert_int_equal(cfg.webhooks.http2, 0);
    ad_config_free(&cfg);

    assert_int_equal(load(&cfg,
                          "webhooks:\n"
                          "  allowNetworks: [\"127.0.0.0/8\", \"::1/128\"]\n"
                          "  retrySchedule: [0, 500ms, 2, 5m]\n"
                          "  timeoutSeconds: 3\n"
                          "  concurrency: 8\n"
                          "  perEndpoint: 2\n"
                          "  headersTimeoutSeconds: 2\n"
                          "  maxResponseBytes: 4096\n"
                          "  secretKey: AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE=\n"
                          "  keepDeliveries: 7d\n"
                          "  rotationGrace: 0\n"
                          "  caFile: /etc/acceptd/receivers-ca.pem\n"
                          "  http2: true\n",
                          err, sizeof err),
                     0);
    assert_int_equal(cfg.webhooks.nallow_networks, 2);
    assert_string_equal(cfg.webhooks.allow_networks[1], "::1/128");
    assert_int_equal(cfg.webhooks.nretry_schedule, 4);
    assert_int_equal(cfg.webhooks.retry_schedule_ms[1], 500);
    assert_int_equal(cfg.webhooks.retry_schedule_ms[2], 2 * SEC);
    assert_int_equal(cfg.webhooks.retry_schedule_ms[3], 300 * SEC);
    assert_int_equal(cfg.webhooks.timeout_seconds, 3);
    assert_int_equal(cfg.webhooks.concurrency, 8);
    assert_int_equal(cfg.webhooks.per_endpoint, 2);
    assert_int_equal(cfg.webhooks.headers_timeout_seconds, 2);
    assert_int_equal(cfg.webhooks.max_response_bytes, 4096);
    assert_non_null(cfg.webhooks.secret_key);
    assert_int_equal(cfg.webhooks.keep_ms, 7 * DAY);
    assert_int_equal(cfg.webhooks.rotation_grace_ms, 0);
    assert_string_equal(cfg.webhooks.ca_file, "/etc/acceptd/receivers-ca.pem");
    assert_int_equal(cfg.webhooks.http2, 1);
    ad_config_free(&cfg);

    expect_error("webhooks: { allowNetworks: [10.1.2.3/8] }\n", "webhooks.allowNetworks[0]: expected a network");
    expect_error("webhooks: { allowNetworks: [localhost] }\n", "webhooks.allowNetworks[0]");
    expect_error("webhooks: { allowNetworks: 127.0.0.0/8 }\n", "webhooks.allowNetworks: expected a list");
    expect_error("webhooks: { retrySchedule: [] }\n", "webhooks.retrySchedule: expected a list of 1 to 100 delays");
    expect_error("webhooks: { retrySchedule: [0, soon] }\n", "webhooks.retrySchedule[1]: expected seconds");
    expect_error("webhooks: { retrySchedule: [8d] }\n", "webhooks.retrySchedule[0]");
    expect_error("webhooks: { timeoutSeconds: 0 }\n", "webhooks.timeoutSeconds");
    expect_error("webhooks: { concurrency: 0 }\n", "webhooks.concurrency");
    expect_error("webhooks: { perEndpoint: 0 }\n", "webhooks.perEndpoint");
    expect_error("webhooks: { headersTimeoutSeconds: 0 }\n", "webhooks.headersTimeoutSeconds");
    expect_error("webhooks: { maxResponseBytes: 100 }\n", "webhooks.maxResponseBytes");
    expect_error("webhooks: { retries: 3 }\n", "unknown key 'retries' in webhooks");
    /* A bad key is described, never quoted. */
    expect_error("webhooks: { secretKey: c2VjcmV0LXZhbHVl }\n", "webhooks.secretKey: expected base64 of 32 bytes");
    load(&cfg, "webhooks: { secretKey: c2VjcmV0LXZhbHVl }\n", err, sizeof err);
    ad_config_free(&cfg);
    assert_null(strstr(err, "c2VjcmV0LXZhbHVl"));
}

static void test_tracing(void **state)
{
    struct ad_config cfg;
    char err[256] = "";
    assert_int_equal(load(&cfg, "", err, sizeof err), 0);
    assert_null(cfg.tracing.otlp_endpoint);
    assert_true(cfg.tracing.sample_ratio == 1);
    ad_config_free(&cfg);
    assert_int_equal(load(&cfg,
                          "tracing:\n  otlpEndpoint: http://127.0.0.1:4318/v1/traces\n  sampleRatio: 0.25\n"
                          "  headers: { x-api-key: s3cret, X-Other: \"a b\" }\n"
                          "  viewerUrl: http://127.0.0.1:16686/trace/{traceId}\n",
                          err, sizeof err),
                     0);
    assert_string_equal(cfg.tracing.otlp_endpoint, "http://127.0.0.1:4318/v1/traces");
    assert_true(cfg.tracing.sample_ratio == 0.25);
    assert_int_equal(cfg.tracing.nheaders, 2);
    assert_string_equal(cfg.tracing.headers[0], "x-api-key: s3cret");
    assert_string_equal(cfg.tracing.headers[1], "X-Other: a b");
    assert_string_equal(cfg.tracing.viewer_url, "http://127.0.0.1:16686/trace/{traceId}");
    ad_config_free(&cfg);
    expect_error("tracing: { otlpEndpoint: 127.0.0.1:4318 }\n", "tracing.otlpEndpoint: expected");
    expect_error("tracing: { otlpEndpoint: ftp://x/v1/traces }\n", "tracing.otlpEndpoint: expected");
    expect_error("tracing: { sampleRatio: 1.5 }\n", "tracing.sampleRatio: expected a number from 0 to 1");
    expect_error("tracing: { sampleRatio: -0.1 }\n", "tracing.sampleRatio");
    expect_error("tracing: { sampleRatio: half }\n", "tracing.sampleRatio");
    expect_error("tracing: { sampleRatio: nan }\n", "tracing.sampleRatio");
    expect_error("tracing: { viewerUrl: http://x/trace }\n", "tracing.viewerUrl: expected");
    expect_error("tracing: { headers: [a] }\n", "tracing.headers: expected a mapping");
    expect_error("tracing: { headers: { \"bad name\": x } }\n", "tracing.headers: expected header names");
    expect_error("tracing: { sampling: 1 }\n", "unknown key 'sampling' in tracing");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_full_example),
        cmocka_unit_test(test_retention_fallback),
        cmocka_unit_test(test_empty_and_null_documents),
        cmocka_unit_test(test_malformed_yaml),
        cmocka_unit_test(test_unknown_keys),
        cmocka_unit_test(test_wrong_values),
        cmocka_unit_test(test_sse_tls_signing),
        cmocka_unit_test(test_keys),
        cmocka_unit_test(test_rate_limits),
        cmocka_unit_test(test_routes),
        cmocka_unit_test(test_aliases_do_not_loop),
        cmocka_unit_test(test_second_load_replaces_lists),
        cmocka_unit_test(test_listen_in_file),
        cmocka_unit_test(test_load_file),
        cmocka_unit_test(test_webhooks),
        cmocka_unit_test(test_tracing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
