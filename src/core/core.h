/*
 * core.h - what can be done to jobs, as operations applied by the writer inside its transaction.
 *
 * Each operation reads the rows it needs, asks the state machine (job.h) whether the change is legal,
 * and writes the new rows. Operations run on the writer thread and never touch HTTP or the cache. Each names
 * the jobs it changed (ad_op_changed, writer.h): after the commit the writer hands them to the hub, taking them
 * out of the op (its job fields below are then NULL), and the caller's done() callback, on the event loop
 * thread, answers with the published entries (ad_op_published).
 */
#ifndef AD_CORE_H
#define AD_CORE_H

#include "core/config.h"
#include "job/job.h"
#include "core/writer.h"

struct ad_event_prev;
/* Write j (changed from prev, which this releases) with its event and webhook deliveries, as every operation does:
 * for core/deps.c. Writer thread. */
ad_err ad_core_job_write(struct ad_conn *c, struct ad_job *j, struct ad_event_prev *prev);
/* For core/batches.c, writer thread: the webhook layer's callback_ready and batch_outbox (AD_E_OK without one). */
ad_err ad_core_callback_ready(struct ad_conn *c, const char *tenant);
ad_err ad_core_batch_outbox(struct ad_conn *c, const struct ad_batch *b, enum ad_status s);
/* Insert the new job j with its creation's webhook deliveries: for core/batches.c. Writer thread. */
ad_err ad_core_job_insert(struct ad_conn *c, struct ad_job *j);

/* Set once at start; read-only afterwards (shared by both threads). */
void ad_core_init(const struct ad_config *cfg, struct ad_store *store);
/* The store's operations, as ad_core_init was given them (for the operations of core/bulk.c). */
const struct ad_store_ops *ad_core_store_ops(void);

/* What the core asks of the webhook layer inside the writer's transaction. webhook/ registers it when configured,
 * so that core does not depend on the layer that delivers. Writer thread. */
struct ad_core_webhooks {
    /* What a change of j (from status before, at progress_before) also writes: its deliveries, in the outbox.
     * An error fails the change. */
    ad_err (*outbox)(struct ad_conn *c, enum ad_status before, int progress_before, const struct ad_job *j);
    /* AD_E_OK when tenant's callback secret may sign a job's callback (someone was shown it), else
     * AD_E_CALLBACK_SECRET_MISSING or the store's error. */
    ad_err (*callback_ready)(struct ad_conn *c, const char *tenant);
    /* What the end of batch b (in final status s) also writes: its event's deliveries (core/batches.c). */
    ad_err (*batch_outbox)(struct ad_conn *c, const struct ad_batch *b, enum ad_status s);
};
/* Set once at start, before the writer runs (w is not copied); NULL: no webhooks (a unit test of the core). */
void ad_core_set_webhooks(const struct ad_core_webhooks *w);

/* Make job, validated from a request (type, payload and the options it gave), a new job of tenant: its id, the
 * defaults of its type's configuration (maxAttempts, timeoutSeconds), its times (now), and the completion style
 * and business resource of the route it came by (NULL: POST /v1/jobs). Event loop thread. */
void ad_core_job_prepare(struct ad_job *job, const char *tenant, const struct ad_route *route, int64_t now);

/* Submit a prepared job (ad_core_job_prepare).
 * With an idempotency key: an existing record with the same fingerprint replays its job (replayed = 1);
 * a different fingerprint fails with AD_E_IDEMPOTENCY_KEY_REUSED. Then, with a job->unique_key: a live job of the
 * tenant, type and key is answered instead and nothing is inserted (deduplicated = 1); with debounce, a queued one
 * first takes the job's payload and runAt. The key is then recorded for that job. Out: job (owned by the op),
 * change 0. */
struct ad_submit_op {
    struct ad_op op;
    struct ad_job *job;
    char *idem_key;       /* NULL when none */
    char fingerprint[65]; /* hex SHA-256 of the request */
    int replayed;
    /* Hand-off: a worker is already waiting for this type, so the new job is leased to it in the same
     * transaction (one commit from submit to worker). 0 = no hand-off. */
    int64_t handoff_ms; /* the lease length of a job handed over at once */
    char *handoff_worker;
    void *ctx;
    void *handoff_ctx;
    int debounce;     /* with job->unique_key: a queued job of the key takes job's payload and runAt */
    int deduplicated; /* out: job is the live job of job->unique_key, not a new one */
    int dep_bad;      /* out, on AD_E_DEPENDENCY_UNKNOWN: the index in dependsOn of the id that is no job (deps.h) */
};

/* Submit many prepared jobs in one operation (POST /v1/jobs:batch), so that they are applied in one transaction
 * and committed together, never split between batches. items[i] (NULL: a slot the caller answers itself) is a
 * submit op that is never queued: it answers in its own op.err as it would alone (replayed, key reused, callback
 * secret missing). A job it wrote or replays is the batch's change change[i] (-1: none); its pointer stays in the
 * item. An item that fails after writing fails the batch. The items are freed with the batch. */
struct ad_batch_op {
    struct ad_op op;
    struct ad_submit_op **items;
    long *change;
    size_t n;
    void *ctx;
};

/* Cancel (client) or acknowledge a cancel request (worker, lease_id set). Out: job, change 0 (also, unchanged
 * and not published, on AD_E_ILLEGAL_TRANSITION). */
struct ad_cancel_op {
    struct ad_op op;
    char *tenant, *id, *lease_id;
    int64_t now;
    struct ad_job *job;
    void *ctx;
};

/* Retry a failed or cancelled job as a new job with a fresh id (new_id set by the caller). Out: job (the new
 * one, change 0; on AD_E_ILLEGAL_TRANSITION the old one, unchanged and not published). */
struct ad_retry_op {
    struct ad_op op;
    char *tenant, *id, *new_id;
    int64_t now;
    struct ad_job *job;
    void *ctx;
};

/* Lease up to max queued jobs of the given types. Out: leased (running, with lease ids), changes 0 to n-1. */
struct ad_lease_op {
    struct ad_op op;
    char *tenant;
    char **types;
    size_t ntypes;
    int max;
    int64_t lease_ms;
    char *worker;
    int64_t now;
    struct ad_job_list leased;
    void *ctx;
    int64_t open_at; /* out: when a rate window holding back one of the types opens (wall ms), 0 = none */
};

/* A worker's report on a running job under its lease: heartbeat, complete, fail. Out: job, change 0; the jobs
 * next leased are changes 1 to next->leased.n. */
struct ad_report_op {
    struct ad_op op;
    enum ad_job_event event; /* AD_EV_HEARTBEAT, AD_EV_COMPLETE(_PARTIAL), AD_EV_FAIL(_FINAL), AD_EV_RELEASE */
    char *tenant, *id, *lease_id;
    int progress; /* -1 = unchanged */
    char *message;
    int64_t lease_ms; /* 0 = unchanged */
    char *result;     /* compact JSON text */
    char *result_location;
    char *artifact; /* the result artifact uploaded under the lease, as job.h keeps it, or NULL */
    char *error;    /* compact JSON problem text */
    int64_t now;
    struct ad_job *job;
    int replayed;             /* a repeated final report: job is unchanged, and next leases nothing */
    int conflict;             /* AD_E_STALE_LEASE because the lease already ended the job with another report */
    int64_t lease_expires_at; /* the job's lease expiry as the report left it (a heartbeat's answer) */
    /* A copy of job as the report left it, made only when next leased that same job again (a release with next):
     * change 0's published entry then shows the newer, leased version. NULL otherwise; owned by the op. */
    struct ad_job *shown;
    /* The worker's next lease, taken in the same transaction once the report succeeded (its tenant is the
     * report's); NULL = none. Owned by the report op. */
    struct ad_lease_op *next;
    void *ctx;
};

/* Lease expiry check for one job: requeues/fails/cancels it when lease_id is still its lease and has run out.
 * Out: changed, and job: when changed, change 0 (published, so NULL in done()); else its current state. */
struct ad_expire_op {
    struct ad_op op;
    char *id, *lease_id;
    int64_t now;
    struct ad_job *job;
    int changed;
};

/* Retention sweep: one bounded batch of tombstoning/deleting jobs and expiring idempotency keys. Out: done. */
struct ad_sweep_op {
    struct ad_op op;
    int64_t now;
    int done;
};

#define AD_SWEEP_BATCH 500

struct ad_submit_op *ad_submit_op_new(void);
/* n items, all NULL until the caller sets them. */
struct ad_batch_op *ad_batch_op_new(size_t n);
struct ad_cancel_op *ad_cancel_op_new(void);
struct ad_retry_op *ad_retry_op_new(void);
struct ad_lease_op *ad_lease_op_new(void);
struct ad_report_op *ad_report_op_new(void);
struct ad_expire_op *ad_expire_op_new(void);
struct ad_sweep_op *ad_sweep_op_new(void);

/* Retention in ms for a job of this type ending in status s. */
int64_t ad_core_retention_ms(const char *type, enum ad_status s);
/* Delay before attempt n+1 after a failed attempt n: exponential with jitter. */
int64_t ad_core_backoff_ms(int attempt);

/* Hex SHA-256 over method, path and canonical body text, NUL-separated, into out (65 bytes). */
void ad_fingerprint(const char *method, const char *path, const char *canonical_body, char out[65]);

#endif
