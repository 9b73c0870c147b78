/*
 * config.h - the daemon's configuration: defaults, the YAML file, then ACCEPTD_* environment variables,
 * then command-line flags, each overriding the one before.
 *
 * This module only parses and validates; it does not open sockets or files other than the config file.
 */
#ifndef AD_CONFIG_H
#define AD_CONFIG_H

#include <stddef.h>
#include <stdint.h>

enum ad_role { AD_ROLE_CLIENT = 1, AD_ROLE_WORKER = 2, AD_ROLE_ADMIN = 4 };

/* Retention per terminal state, in milliseconds after finishedAt. */
struct ad_retention {
    int64_t succeeded_ms;
    int64_t failed_ms;
    int64_t cancelled_ms;
    int64_t partial_ms;
};

/* A fixed-window request quota: at most `requests` requests per `window_ms`; requests 0 = no limit. */
struct ad_rate {
    int requests;
    int64_t window_ms; /* whole seconds: the RateLimit header fields count in seconds */
    int set;           /* written in the file (a key without its own takes limits.rateLimit) */
};

struct ad_key {
    char *key;
    char *tenant;
    enum ad_role role;
    struct ad_rate rate;
};

struct ad_type_conf {
    char *name;
    char **required; /* payload fields that must be present */
    size_t nrequired;
    int max_attempts;    /* default for jobs of this type */
    int timeout_seconds; /* default lease/run timeout hint, 0 = none */
    struct ad_retention retention;
    /* The queue's initial settings (core/queues.h), until a PATCH /v1/queues/{type} writes the queue's own. */
    int paused;
    int concurrency, group_concurrency; /* 0 = none */
    struct ad_type_rate {
        int limit; /* 0 = none */
        int64_t period_ms;
    } rate_limit, group_rate_limit;
};

struct ad_route {
    char *method;                /* "POST" */
    char *path;                  /* "/v1/videos" */
    char *type;                  /* job type created by the route */
    char *resource;              /* placeholder business resource, may contain "{id}", or NULL */
    int on_complete_redirect;    /* 1: a finished job answers 303 to its result by default */
    int require_idempotency_key; /* 1: a POST without Idempotency-Key gets 400 */
    int style_operation;         /* 1 (style: operation): accepted as 200 with an AIP-151 Operation, not 202 */
    int on_pending_accepted;     /* 1: the submit's Location answers 202 while the job is pending */
    int azure_async_operation;   /* 1: the submit also sends Azure-AsyncOperation */
    char *group;                 /* the member of the body whose value is the job's group, or NULL: no group */
};

/* webhooks: delivery of job events to callback URLs and tenant endpoints (docs/webhooks.md). */
struct ad_webhooks_conf {
    char **allow_networks; /* CIDRs the SSRF guard lets through; default none */
    size_t nallow_networks;
    int64_t *retry_schedule_ms; /* delay before each attempt; its length is the number of attempts */
    size_t nretry_schedule;
    int timeout_seconds;       /* a delivery must answer 2xx within this: default 10 */
    int concurrency;           /* deliveries in flight at once: default 64 */
    int per_endpoint;          /* of those, to one endpoint (a tenant's job callbacks are one): default 16 */
    char *secret_key;          /* base64 of 32 bytes sealing stored secrets; NULL = key file in the data dir */
    int64_t keep_ms;           /* delivered and dead deliveries are kept this long: default 30d */
    int64_t rotation_grace_ms; /* the previous secret keeps signing this long after a rotation: default 24h */
    char *ca_file;             /* PEM certificates https receivers are verified against; NULL = the system's */
    int http2;                 /* offer HTTP/2 to https receivers (ALPN); default off: HTTP/1.1 */
    /* A receiver's answer: its headers must be complete within this (default 5), and at most this many bytes of
     * it (headers and body) are read before the attempt fails (default 64 KiB). */
    int headers_timeout_seconds;
    size_t max_response_bytes;
};

/* sse: Server-Sent Events streams (docs/protocol.md, "Server-Sent Events"). */
struct ad_sse_conf {
    int64_t heartbeat_ms;       /* comment line on an idle stream: default 15s */
    int64_t retry_ms;           /* "retry:" a stream opens with: default 2s */
    int64_t overload_retry_ms;  /* "retry:" when a stream is turned away (overload) or closed at shutdown: 30s */
    size_t backlog_bytes;       /* queued bytes per stream before a slow consumer is cut off: default 1 MiB */
    int max_streams;            /* open streams per daemon: default 50000 */
    int max_streams_per_tenant; /* default 20000 */
    int io_uring;               /* fan-out writes through io_uring where the kernel allows it: default true */
};

/* log: what the daemon writes to stderr (docs/configuration.md, "log"). */
struct ad_log_conf {
    int access_log; /* a line per request answered: default false */
    int json;       /* format: json (one object per line) instead of text: default false */
};

/* artifacts: result files uploaded by workers (api_artifacts.c). */
struct ad_artifacts_conf {
    int64_t url_lifetime_ms; /* lifetime of the signed URL a 303 to an artifact carries: default 1h, at most 7d */
    int64_t gc_interval_ms;  /* how often the collector removes the files no job references: default 60s */
};

/* tracing: the export of spans over OTLP/HTTP (docs/tracing.md). Trace context is kept and handed on without it. */
struct ad_tracing_conf {
    char *otlp_endpoint; /* the collector's full http(s)://.../v1/traces URL; NULL = no export */
    char **headers;      /* "Name: value" lines sent with each export */
    size_t nheaders;
    double sample_ratio; /* share of traces exported, 0 to 1: default 1 */
    char *viewer_url;    /* a trace viewer's URL with {traceId} in it, for the dashboard's link; NULL = none */
};

/* tls: HTTPS (HTTP/1.1 and HTTP/2 by ALPN) instead of plain HTTP on the listener. */
struct ad_tls_conf {
    char *cert; /* PEM certificate chain file; NULL = no TLS */
    char *key;  /* PEM private key file */
};

struct ad_config {
    char *listen_host; /* "127.0.0.1" */
    int listen_port;   /* 8080; 0 picks an ephemeral port */
    char *data_dir;    /* "./data": the SQLite store, and the keys a node keeps when none are configured */
    char *store;       /* store.postgres: "postgresql://..." shared by the nodes of a cluster; NULL = SQLite */
    char *public_url;  /* base for absolute URLs, without trailing slash; NULL = derive from listen address */
    struct ad_key *keys;
    size_t nkeys;
    struct ad_type_conf *types; /* empty: any type is accepted, with the defaults below */
    size_t ntypes;
    struct ad_route *routes;
    size_t nroutes;

    struct ad_retention retention; /* default per terminal state: 30d each */
    int64_t tombstone_ms;          /* how long an expired job answers 410 before 404: default 7d */
    int64_t idempotency_ttl_ms;    /* how long idempotency keys are kept: default 24h */
    int64_t sweep_interval_ms;     /* retention sweeper period: default 1s */
    size_t max_body_bytes;         /* request body cap: default 1 MiB */
    size_t max_upload_part_bytes;  /* body cap of one part of a result artifact's upload: default 4 MiB */
    size_t max_result_bytes;       /* cap on a result artifact: default 4 GiB */
    int max_wait_seconds;          /* cap for wait=N on long polls: default 60 */
    int default_max_attempts;      /* default 3 */
    int64_t retry_backoff_ms;      /* base delay before a failed attempt runs again (doubles each time): 1s */
    int max_connections;           /* default 10000 */
    size_t cache_bytes;            /* budget of the in-memory job representations (cache.h): default 64 MiB */
    size_t scheduled_timers;       /* runAt timers kept in memory; later jobs wait in the store: default 10000 */
    size_t max_queued_writes;      /* writes with the writer at once; past it a write is 503: default 10000 */
    size_t max_unsent_per_conn;    /* answers a connection holds that its client has not taken: default 8 MiB */
    size_t max_unsent;             /* the same, all connections together: default 128 MiB */
    int64_t unsent_stall_ms;       /* a connection holding some of which none leaves is closed after: 10s */
    struct ad_rate rate_limit;     /* each key's quota unless it has its own: default none */
    struct ad_webhooks_conf webhooks;
    struct ad_sse_conf sse;
    struct ad_tls_conf tls;
    struct ad_log_conf log;
    struct ad_artifacts_conf artifacts;
    char *signing_key; /* HMAC key of signed URLs (at least 32 chars); NULL = a random key kept in the data dir */
    struct ad_tracing_conf tracing;
};

/* Fill cfg with the defaults above. Strings are heap copies owned by cfg. */
void ad_config_defaults(struct ad_config *cfg);

/* Merge a YAML file into cfg. On error returns -1 and writes a one-line message ("file:line: ...") into err. */
int ad_config_load_file(struct ad_config *cfg, const char *path, char *err, size_t errlen);

/* Same, from a YAML string already in memory (used by tests and fuzzers). */
int ad_config_load_string(struct ad_config *cfg, const char *yaml, size_t len, char *err, size_t errlen);

/* Apply ACCEPTD_LISTEN, ACCEPTD_DATA, ACCEPTD_PUBLIC_URL, ACCEPTD_STORE from the environment. Returns -1 with err on a
 * bad value. */
int ad_config_apply_env(struct ad_config *cfg, char *err, size_t errlen);

/* Parse "HOST:PORT" / "[v6]:PORT" / ":PORT" into cfg->listen_host/listen_port. Returns 0 or -1. */
int ad_config_set_listen(struct ad_config *cfg, const char *hostport);

/* Set the data directory (non-empty, no control characters), as --data does.
 * Returns 0, or -1 leaving cfg as it was. */
int ad_config_set_data(struct ad_config *cfg, const char *dir);

/* Select the PostgreSQL store (a postgresql:// or postgres:// URL), as --store does.
 * Returns 0, or -1 leaving cfg as it was. */
int ad_config_set_store(struct ad_config *cfg, const char *url);

/* Set publicUrl from an http:// or https:// URL without query or fragment; trailing slashes are dropped.
 * Used for --public-url. Returns 0, or -1 leaving cfg as it was. */
int ad_config_set_public_url(struct ad_config *cfg, const char *url);

/* Look up a type; NULL when not configured. */
const struct ad_type_conf *ad_config_type(const struct ad_config *cfg, const char *name);

/* Look up a route by method and exact path; NULL when none. */
const struct ad_route *ad_config_route(const struct ad_config *cfg, const char *method, size_t mlen, const char *path,
                                       size_t plen);

/* Free everything cfg owns (not cfg itself). */
void ad_config_free(struct ad_config *cfg);

#endif
