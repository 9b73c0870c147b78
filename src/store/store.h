/*
 * store.h - the store contract: the durable store behind one interface (struct ad_store_ops), which
 * store_sqlite.c and store_pg.c implement and tests/unit/store_contract.h checks against both.
 *
 * This is all that the layers above may use; what the backends share among themselves (the jobs table's
 * columns, the per-transaction webhook lookups, their constructors) is in store_int.h, the way curl keeps
 * vtls.h and vtls_int.h. Nothing above this file knows which backend it talks to. The store keeps rows and
 * answers indexed queries; it makes no decisions: state changes are decided in the core and written here.
 * Each thread opens its own connection (ad_conn): the writer thread does all writes inside
 * begin/commit, other threads only read.
 */
#ifndef AD_STORE_H
#define AD_STORE_H

#include <stddef.h>
#include <stdint.h>
#include "common/error.h"
#include "job/job.h"

struct ad_store;
struct ad_conn;
struct ad_feed;

/* A list query; strings NULL when not filtered. */
struct ad_list_query {
    const char *tenant;
    int has_status;
    enum ad_status status;
    const char *type;
    int64_t updated_after; /* ms, 0 = no filter */
    int64_t before_cseq;   /* keyset cursor: only jobs with cseq < this; 0 = from the newest */
    int limit;
};

/* The filter of a bulk cancel or retry (core/bulk.h): the live jobs of a tenant and type, by status, group and
 * creation time. */
struct ad_bulk_query {
    const char *tenant, *type;
    unsigned statuses;      /* bit (1u << status) of each status matched; 0 = any */
    const char *group;      /* only the jobs of this group; NULL = any */
    int64_t created_before; /* ms: only jobs created before it; 0 = no bound */
    int64_t created_after;  /* ms: only jobs created after it; 0 = no bound */
    int64_t now;            /* jobs tombstoned or expired by then are not matched */
};

/* An idempotency record. */
struct ad_idem {
    char fingerprint[65]; /* hex SHA-256 */
    char *job_id;         /* heap, caller frees */
    int64_t created_at;
};

/* One lease of a job: who held it, when, and how it ended (ended_at 0 and outcome NULL while it is live). */
struct ad_attempt {
    int attempt;
    char *worker;
    int64_t started_at, ended_at;
    char *outcome;
};

struct ad_attempt_list {
    struct ad_attempt *items;
    size_t n;
};
void ad_attempt_list_free(struct ad_attempt_list *l);
/* Append to l, read by attempt_list, the attempt that job j holds itself, unless l already holds it (j may be
 * older than the store: its attempt may have ended since; and earlier versions stored the rows of completed
 * attempts too): the live attempt of a running job, or the last attempt of a job that its worker
 * completed (succeeded or partialSuccess), ended at the job's finishedAt. */
void ad_attempt_own(struct ad_attempt_list *l, const struct ad_job *j);
/* Whether a job in status s holds its latest attempt itself (ad_attempt_own), so that no row is written for it:
 * running (the live attempt), succeeded or partialSuccess (the attempt its worker completed). */
int ad_attempt_is_own(enum ad_status s);

/* Jobs counted by type and status (store job_counts: the dashboard's overview and GET /metrics): how many, and the
 * created_at of the oldest of them. */
struct ad_job_count {
    char *type;
    int status;
    int64_t n;
    int64_t oldest;
};
struct ad_job_count_list {
    struct ad_job_count *items;
    size_t n;
};
void ad_job_count_list_free(struct ad_job_count_list *l);

/* One entry of a job's event log: kind "status", "progress" or "done"; data JSON text, NULL for done (the
 * event carries the job itself, rendered when it is sent). */
struct ad_event {
    int64_t seq;
    char *kind;
    char *data;
};

struct ad_event_list {
    struct ad_event *items;
    size_t n;
};
void ad_event_list_free(struct ad_event_list *l);

/* A webhook endpoint of a tenant, or (url NULL) the tenant's callback secret, which signs the deliveries to its
 * jobs' callbackUrl and is not listed as an endpoint. Secrets are sealed (sign.h), never plain. */
struct ad_webhook {
    char *id;
    char *tenant;
    char *url;
    unsigned events;   /* bit (1 << AD_WHE_x) for each event type it receives (webhook.h) */
    char *secret;      /* sealed */
    char *prev_secret; /* sealed; signs too until prev_until (a rotation), or NULL */
    int64_t prev_until;
    int64_t created_at;
    int64_t disabled_at; /* 0 = enabled */
    char *disabled_reason;
};

struct ad_webhook_list {
    struct ad_webhook **items;
    size_t n;
};
void ad_webhook_free(struct ad_webhook *w);
void ad_webhook_list_free(struct ad_webhook_list *l);

/* A row of the webhook outbox: one event for one destination, and how its delivery went. */
enum ad_delivery_state { AD_DLV_PENDING = 0, AD_DLV_DELIVERED = 1, AD_DLV_DEAD = 2 };
struct ad_delivery {
    int64_t seq; /* set by delivery_insert */
    char *id;
    char *tenant;
    char *webhook_id;
    char *url;
    char *event_id;
    char *event_type;
    char *job_id;
    char *body; /* the exact bytes that are signed and sent */
    int64_t created_at;
    enum ad_delivery_state state;
    int attempts;
    int64_t next_at; /* pending: when the next attempt is due */
    int64_t last_at; /* 0 = never attempted */
    int last_status; /* HTTP status of the last attempt, 0 = none (no answer) */
    char *last_error;
    char *traceparent; /* the job's trace context (job.h), sent with each attempt (docs/tracing.md), or NULL */
    char *tracestate;
};

struct ad_delivery_list {
    struct ad_delivery **items;
    size_t n;
};
void ad_delivery_free(struct ad_delivery *d);
void ad_delivery_list_free(struct ad_delivery_list *l);

/* An entry of the due queue: a pending delivery, when it is due, and its endpoint. */
#define AD_DUE_ID_MAX 48
struct ad_due {
    int64_t seq;
    int64_t next_at;
    char webhook_id[AD_DUE_ID_MAX]; /* "" if longer (acceptd's own ids are 32 characters) */
};
/* How many endpoints delivery_due can leave out. */
#define AD_DUE_EXCLUDE_MAX 16

/* A job another node changed, as its commit announced it (store.h feed_wait). tenant and type are set only when
 * the job is queued now, i.e. when workers waiting for that tenant and type may want it. */
struct ad_feed_change {
    const char *job_id;
    const char *tenant, *type; /* NULL unless queued */
};

/* One part of a result artifact's upload (ops->artifact_write). */
struct ad_artifact_part {
    const char *job_id, *lease_id;
    int fresh;         /* no offset given: start afresh, dropping what an earlier upload under the lease left */
    uint64_t offset;   /* where the part goes: must be the bytes received so far */
    const char *ctype; /* the content type, kept from the first part */
    const void *data;
    size_t len;
    int last;            /* the upload is complete with this part */
    uint64_t max_bytes;  /* cap on the whole artifact */
    int has_part_digest; /* Content-Digest: the part's SHA-256 must be part_sha */
    uint8_t part_sha[32];
    int has_repr_digest; /* Repr-Digest (last part): the whole artifact's SHA-256 must be repr_sha */
    uint8_t repr_sha[32];
};

/* A batch (core/batches.h): its jobs counted by status (n[AD_QUEUED] ...), kept as they change. finished_at is set
 * when the last of them reached a final status. */
struct ad_batch {
    char *id, *tenant, *callback_url; /* heap; callback_url NULL when none */
    int total;
    int n[AD_STATUS__COUNT];
    int64_t created_at, finished_at;
    int64_t expires_at; /* the latest of its ended jobs' expires_at; 0 while none ended */
};
void ad_batch_free(struct ad_batch *b);

/* A list of jobs returned by a query; free with ad_job_list_free. */
struct ad_job_list {
    struct ad_job **items;
    size_t n;
};
void ad_job_list_free(struct ad_job_list *l);

/* Whether job a goes to a worker before job b: higher priority first, then the earlier turn (round-robin among the
 * type's groups, job.h), then lower cseq (the order of submits). Turns are counted per tenant, type and priority. */
int ad_lease_before(const struct ad_job *a, const struct ad_job *b);

/* Several types' queues merged for one lease (the stores' job_leasable, and core/queues.c's gate): l holds each type's
 * rows in lease order (ad_lease_before), one type after another. Each step takes the head that comes first by priority,
 * then age (cseq), so that without groups the order is that of priority and age alone; a type's own order, fair among
 * its groups, is kept. Then l is cut to limit rows (those past it freed). */
void ad_lease_merge(struct ad_job_list *l, int limit);

/* A queue's settings, one row per tenant and type (queue_*): what the core's flow control (core/queues.h) reads in
 * the lease's transaction. A limit of 0 is none. The rate window is the type's fixed window (core/queues.c): where
 * it started and how many leases it has started so far. */
struct ad_queue_rate {
    int limit;         /* 0: none */
    int64_t period_ms; /* > 0 when limit is */
};
struct ad_queue {
    char *tenant, *type; /* heap (queue_get and queue_list fill them; the caller frees with ad_queue_clear) */
    int paused;
    int concurrency, group_concurrency;
    struct ad_queue_rate rate, group_rate;
    int64_t window_start;
    int window_count;
};
struct ad_queue_list {
    struct ad_queue *items;
    size_t n;
};
void ad_queue_clear(struct ad_queue *q);
void ad_queue_list_free(struct ad_queue_list *l);
/* A count per group of one queue (queue_group_running, queue_group_window): the group ("" for the jobs without one;
 * heap) and its count. */
struct ad_group_count {
    char *group;
    int64_t n;
};
struct ad_group_count_list {
    struct ad_group_count *items;
    size_t n;
};
void ad_group_count_list_free(struct ad_group_count_list *l);
/* A schedule (CONTRACT.md section 12; core/schedules.c decides what its fields mean): its definition and job
 * template as text, and its progress, written with the jobs of each fire in one transaction. */
struct ad_schedule {
    char *tenant, *id;
    char *spec;      /* the definition (cron or every, timezone, overlap, ...): a compact JSON object */
    char *tmpl;      /* the job template as the core makes jobs from it: a compact JSON object */
    int64_t next_at; /* ms: the next fire time; 0 = none (paused, or past its end) */
    char *last_job;  /* the id of the job of its latest run, or NULL */
    char *recent;    /* its recent runs, newest first: a compact JSON array */
    int64_t fires, skips, catchups;
    int64_t created_at, updated_at;
    int64_t version; /* grows with every write: the ETag's */
};
struct ad_schedule_list {
    struct ad_schedule *items;
    size_t n;
};
void ad_schedule_clear(struct ad_schedule *s);
void ad_schedule_list_free(struct ad_schedule_list *l);

/* A queue's jobs by state: queued and due, running, queued with a runAt still to come. */
struct ad_queue_counts {
    int64_t queued, running, scheduled;
};

struct ad_store_ops {
    const char *name;
    /* 1 when an open write transaction holds back the writers of other processes (PostgreSQL: the cluster's
     * write lock), so the writer must not keep one open while it waits for more operations. */
    int tx_blocks_others;
    /* 1 when a read can wait on the network or on another process's lock (PostgreSQL): the event loop then
     * hands its reads to the reader threads (hub/reader.h). 0 (SQLite: a local file in WAL mode, where the
     * writer never blocks a reader) lets the loop read inline, which is faster than a hand-off. */
    int reads_may_block;
    /* Open a connection for the calling thread. NULL with err filled on failure. */
    struct ad_conn *(*connect)(struct ad_store *s, char *err, size_t errlen);
    void (*disconnect)(struct ad_conn *c);
    /* Transactions (writer thread). begin takes the write lock; commit is durable when it returns 0. */
    ad_err (*begin)(struct ad_conn *c);
    ad_err (*commit)(struct ad_conn *c);
    void (*rollback)(struct ad_conn *c);
    /* Writer thread, once a batch's answers have been handed back: upkeep that a commit would otherwise do
     * before it returns (SQLite copies its write-ahead log back into the database here). NULL: none. */
    void (*after_batch)(struct ad_conn *c);
    /* Writer thread, outside a transaction, while writes fail for want of space (AD_E_STORAGE_FULL): give back
     * what space the store holds for itself (SQLite: copy its log into the database and truncate it), then commit
     * a small write of its own. AD_E_OK once that write went through: there is room again. NULL: the store cannot
     * tell, and the next batch that commits says so instead. */
    ad_err (*reclaim)(struct ad_conn *c);
    /* Rows inserted, updated or deleted on c so far (any count that moves with every row written). With it, the
     * writer applies a batch's operations without savepoints: an operation that fails having written nothing
     * costs the others nothing, and one that fails after writing fails its whole batch. NULL: the writer
     * opens a savepoint per operation instead (below), so that a failed operation is undone alone. */
    int64_t (*changes)(struct ad_conn *c);
    /* One nested savepoint per operation inside a batch, so one failed op does not undo the others. */
    ad_err (*savepoint)(struct ad_conn *c);
    ad_err (*release)(struct ad_conn *c);
    void (*rollback_to)(struct ad_conn *c);

    /* Insert a new job; sets job->seq and job->cseq. */
    ad_err (*job_insert)(struct ad_conn *c, struct ad_job *job);
    /* Write every field of an existing job (by id); sets a new job->seq. */
    ad_err (*job_update)(struct ad_conn *c, struct ad_job *job);
    /* One job by id; tenant NULL = any tenant. *out NULL and AD_E_NOT_FOUND when absent. Caller frees. */
    ad_err (*job_get)(struct ad_conn *c, const char *tenant, const char *id, struct ad_job **out);
    /* Writer thread, inside its transaction: job id will be asked for (job_get) later in it; a store that talks
     * to a server may send the read now, with others, instead of waiting for it alone then. NULL: no use. */
    void (*job_prefetch)(struct ad_conn *c, const char *id);
    /* Newest first (cseq descending), filtered, at most q->limit. */
    ad_err (*job_list)(struct ad_conn *c, const struct ad_list_query *q, struct ad_job_list *out);
    /* Jobs of a tenant (NULL: of every tenant, PostgreSQL only: the cluster's pump) with seq > since, by seq
     * ascending, at most limit. */
    ad_err (*job_changes)(struct ad_conn *c, const char *tenant, int64_t since, int limit, struct ad_job_list *out);
    /* Queued jobs of a tenant of one of the types with run_at <= now, at most limit, in lease order: within a type,
     * highest priority, then earliest turn (round-robin among its groups, job.h), then lowest cseq; several types
     * merged by their heads' priority, then age (ad_lease_merge). */
    ad_err (*job_leasable)(struct ad_conn *c, const char *tenant, const char *const *types, size_t ntypes, int64_t now,
                           int limit, struct ad_job_list *out);
    /* One page of a bulk walk over the jobs of q->tenant and q->type by cseq (core/bulk.c): the first limit of them
     * with cseq in (after, *upto] are examined, whatever their status, and those that match q go into out by cseq;
     * *next is the last cseq examined, 0 when none was (the walk is over). limit bounds a page's work however few
     * jobs match. *upto 0 (the first page): set to the highest cseq of those jobs now, so that the walk ends with the
     * jobs that were there when it began. */
    ad_err (*job_bulk_page)(struct ad_conn *c, const struct ad_bulk_query *q, int64_t after, int64_t *upto, int limit,
                            struct ad_job_list *out, int64_t *next);
    /* The jobs of a tenant (NULL: of every tenant) counted by type and status, by type then status, at most limit
     * groups. It reads every row of the tenant: for the dashboard's overview, not for a hot path. */
    ad_err (*job_counts)(struct ad_conn *c, const char *tenant, int limit, struct ad_job_count_list *out);
    /* Queue settings (struct ad_queue). queue_get: AD_E_NOT_FOUND when the queue has no row. queue_put (writer
     * thread, in its transaction) writes every field, replacing the row; on a cluster store its commit tells the
     * other nodes' feeds (a change with job_id "queue", tenant and type), so that their parked lease requests look
     * again. queue_list: the tenant's rows by type. queue_counts: the jobs of one queue by state (status and run_at
     * against now), read in the caller's transaction, so that a writer's read sees its own writes. */
    ad_err (*queue_get)(struct ad_conn *c, const char *tenant, const char *type, struct ad_queue *out);
    ad_err (*queue_put)(struct ad_conn *c, const struct ad_queue *q);
    ad_err (*queue_list)(struct ad_conn *c, const char *tenant, struct ad_queue_list *out);
    ad_err (*queue_counts)(struct ad_conn *c, const char *tenant, const char *type, int64_t now,
                           struct ad_queue_counts *out);
    /* The running jobs of one queue (counts.running alone, cheap enough for every lease of a limited type). */
    ad_err (*queue_running)(struct ad_conn *c, const char *tenant, const char *type, int64_t *out);
    /* Per-group limits (core/queues.c), read and written in the writer's transaction. queue_group_running: the groups
     * of one queue with at least min running jobs, with their running counts (it reads the tenant's running jobs).
     * queue_group_window: the groups whose rate window starting at window_start has counted at least min leases.
     * queue_group_took: count n leases of group in the window starting at window_start, and forget the queue's
     * windows that started before it, so that the rows are those of the groups leased in one period. */
    ad_err (*queue_group_running)(struct ad_conn *c, const char *tenant, const char *type, int64_t min,
                                  struct ad_group_count_list *out);
    ad_err (*queue_group_window)(struct ad_conn *c, const char *tenant, const char *type, int64_t window_start,
                                 int64_t min, struct ad_group_count_list *out);
    ad_err (*queue_group_took)(struct ad_conn *c, const char *tenant, const char *type, const char *group,
                               int64_t window_start, int n);
    /* job_leasable for one type whose groups have limits: the queued jobs due by now in lease order, none of the
     * nexcept groups in except ("" for the jobs without one), found among the first walk jobs of the queue in that
     * order (those of skipped groups count): at most limit. The walk bounds the work whatever the skipped groups hold.
     */
    ad_err (*job_leasable_except)(struct ad_conn *c, const char *tenant, const char *type, int64_t now,
                                  const char *const *except, size_t nexcept, int walk, int limit,
                                  struct ad_job_list *out);
    /* Every running job (used at start to rebuild lease timers). */
    ad_err (*job_running)(struct ad_conn *c, struct ad_job_list *out);
    /* Queued jobs with a run_at whose (run_at, cseq) comes after (run_at, cseq), soonest first (then by cseq), at
     * most limit: what hub.c reads past the horizon of its runAt timers. */
    ad_err (*job_scheduled)(struct ad_conn *c, int64_t run_at, int64_t cseq, int limit, struct ad_job_list *out);
    /* The live job (queued or running) of tenant and type whose unique_key is key, the oldest if several, read
     * through an index of the live jobs that have a key. *out NULL and AD_E_NOT_FOUND when none. Caller frees. */
    ad_err (*job_unique)(struct ad_conn *c, const char *tenant, const char *type, const char *key, struct ad_job **out);
    /* Replace the payload of job id (a debounced submit, core.c), which job_update leaves as it was written.
     * AD_E_NOT_FOUND when there is no such job (inside a transaction a backend may only tell at its commit, which
     * then fails, as job_update's does). */
    ad_err (*job_set_payload)(struct ad_conn *c, const char *id, const char *payload);
    /* Retention: drop payload/result of up to limit jobs with expires_at <= now (tombstone them), and delete up
     * to limit tombstones with expires_at <= now - tombstone_ms. *done = rows touched. */
    ad_err (*sweep)(struct ad_conn *c, int64_t now, int64_t tombstone_ms, int limit, int *done);
    /* Highest seq in the store (0 when empty). */
    ad_err (*max_seq)(struct ad_conn *c, int64_t *out);
    /* Attempt history: a row per lease, written when the lease ends, from the running job j (its attempt, worker and
     * started_at) before the change that ends it. Two attempts are not stored, being the job's own (ad_attempt_own):
     * the live attempt of a running job, and the attempt that a worker's complete ended, the job's last. */
    ad_err (*attempt_add)(struct ad_conn *c, const struct ad_job *j, int64_t ended_at, const char *outcome);
    /* The ended attempts, oldest first. */
    ad_err (*attempt_list)(struct ad_conn *c, const char *job_id, struct ad_attempt_list *out);

    /* Idempotency records, scoped by tenant. idem_get: AD_E_NOT_FOUND when absent. */
    ad_err (*idem_get)(struct ad_conn *c, const char *tenant, const char *key, struct ad_idem *out);
    ad_err (*idem_put)(struct ad_conn *c, const char *tenant, const char *key, const char *fingerprint,
                       const char *job_id, int64_t now);
    /* Delete up to limit records created before `before`. */
    ad_err (*idem_sweep)(struct ad_conn *c, int64_t before, int limit, int *done);

    /* The event log of a job (SSE), kept as long as the job's data. seq is the job's seq after the change. */
    ad_err (*event_append)(struct ad_conn *c, const char *job_id, int64_t seq, const char *kind, const char *data);
    /* Events of job_id with seq > after, oldest first, at most limit. */
    ad_err (*events_after)(struct ad_conn *c, const char *job_id, int64_t after, int limit, struct ad_event_list *out);

    /* A read-only snapshot on a reading connection: the queries until snapshot_end all see the same committed
     * state, at the cost of one read lock (the webhook delivery thread reads a batch of rows this way). */
    ad_err (*snapshot_begin)(struct ad_conn *c);
    void (*snapshot_end)(struct ad_conn *c);
    /* Webhook endpoints and callback secrets (webhook.h). webhook_put inserts, or replaces the row with w->id. */
    ad_err (*webhook_put)(struct ad_conn *c, const struct ad_webhook *w);
    /* By id (tenant NULL = any tenant), or with id NULL the tenant's callback secret. AD_E_NOT_FOUND when absent. */
    ad_err (*webhook_get)(struct ad_conn *c, const char *tenant, const char *id, struct ad_webhook **out);
    /* A tenant's endpoints, oldest first; enabled_only leaves out disabled ones. */
    ad_err (*webhook_list)(struct ad_conn *c, const char *tenant, int enabled_only, struct ad_webhook_list *out);
    /* Delete an endpoint (never the callback secret) and its deliveries. AD_E_NOT_FOUND when absent. */
    ad_err (*webhook_delete)(struct ad_conn *c, const char *tenant, const char *id);
    /* The outbox. insert sets d->seq; update writes state, attempts, next_at and the last_* fields. */
    ad_err (*delivery_insert)(struct ad_conn *c, struct ad_delivery *d);
    ad_err (*delivery_update)(struct ad_conn *c, const struct ad_delivery *d);
    /* By id within tenant, or (id NULL) by seq. AD_E_NOT_FOUND when absent. */
    ad_err (*delivery_get)(struct ad_conn *c, const char *tenant, const char *id, int64_t seq,
                           struct ad_delivery **out);
    /* Pending deliveries soonest first, none of the nexclude (<= AD_DUE_EXCLUDE_MAX) endpoints in exclude (their
     * webhook ids): at most limit into out, count in *n. */
    ad_err (*delivery_due)(struct ad_conn *c, const char *const *exclude, size_t nexclude, int limit,
                           struct ad_due *out, size_t *n);
    /* An endpoint's deliveries, newest first: seq < before (0 = from the newest), state -1 = any, at most limit. */
    ad_err (*delivery_list)(struct ad_conn *c, const char *webhook_id, int state, int64_t before, int limit,
                            struct ad_delivery_list *out);
    /* Every pending delivery of an endpoint becomes dead with reason (the endpoint was disabled). */
    ad_err (*delivery_abandon)(struct ad_conn *c, const char *webhook_id, const char *reason);
    /* Delete up to limit delivered or dead deliveries created before `before`. */
    ad_err (*delivery_sweep)(struct ad_conn *c, int64_t before, int limit, int *done);
    /* Take a pending delivery that is due (next_at <= now) for node owner's delivery thread by moving its
     * next_at to until, outside any transaction, so that other nodes leave it alone while it is in flight; a
     * node that dies with it leaves it due again at until, unless it comes back first and releases it.
     * AD_E_NOT_FOUND when it is no longer pending and due (another node took it, or its outcome is in). A
     * single-node backend has no one to race: AD_E_OK. */
    ad_err (*delivery_claim)(struct ad_conn *c, int64_t seq, int64_t now, int64_t until, const char *owner);
    /* Every pending delivery claimed by owner is due again at now (its transfers were cut: a stop, a crash). */
    ad_err (*delivery_release)(struct ad_conn *c, const char *owner, int64_t now);

    /*
     * Result artifacts: the bytes a worker uploads under its lease as a job's result, kept where every node of
     * the store can read them (SQLite: files in the data directory, store/artifact.h; PostgreSQL: rows). An
     * upload is visible only once the job names it (job.h, artifact); what no job names is artifact_gc's.
     * These run outside the writer's transactions, on connections of their own (api_artifacts.c).
     *
     * artifact_write: a part. AD_E_OK with *offset the bytes received now, and for the last part *view, the
     * artifact's JSON view (heap). AD_E_UPLOAD_OFFSET (*offset: the bytes received so far), AD_E_DIGEST_MISMATCH
     * (the part is not kept; the whole upload is dropped when the artifact's digest is wrong),
     * AD_E_PAYLOAD_TOO_LARGE, AD_E_STORAGE_FULL (the part is not kept), or the store's error. The last part is
     * durable when it returns.
     */
    ad_err (*artifact_write)(struct ad_conn *c, const struct ad_artifact_part *p, uint64_t *offset, char **view);
    /* How far the upload under lease_id got: *offset, and *done 1 once finished. AD_E_NOT_FOUND when none. */
    ad_err (*artifact_progress)(struct ad_conn *c, const char *job_id, const char *lease_id, uint64_t *offset,
                                int *done);
    /* The JSON view of the finished upload under lease_id (heap). AD_E_NOT_FOUND when it is not finished. */
    ad_err (*artifact_view)(struct ad_conn *c, const char *job_id, const char *lease_id, char **view);
    /* Up to len bytes of the finished artifact from off into buf; *n how many (0 only past its end). */
    ad_err (*artifact_read)(struct ad_conn *c, const char *job_id, const char *lease_id, uint64_t off, void *buf,
                            size_t len, size_t *n);
    /* Remove the uploads no job names: neither the live lease of a running job nor its artifact. *removed: how
     * many. */
    ad_err (*artifact_gc)(struct ad_conn *c, int *removed);

    /*
     * Changes committed by other nodes sharing the store (cluster backends; NULL for single-node ones). Every
     * commit that inserted or updated jobs announces them (struct ad_feed_change); feed_wait hears the
     * announcements of every node but this one. One feed per process, used by one thread.
     */
    struct ad_feed *(*feed_open)(struct ad_store *s, char *err, size_t errlen);
    /* Wait up to timeout_ms, or until wake_fd (when >= 0) is readable (it is not read), then call fn(arg, change)
     * for each job another node changed. 0, or -1 when the connection is lost: announcements may have been
     * missed, so the caller resynchronises and reopens. */
    int (*feed_wait)(struct ad_feed *f, int timeout_ms, int wake_fd,
                     void (*fn)(void *arg, const struct ad_feed_change *ch), void *arg);
    void (*feed_close)(struct ad_feed *f);

    void (*close)(struct ad_store *s);

    /* The due queued jobs (status and run_at against now, as queue_counts' queued) of the ngroups groups of one
     * queue ("" for the jobs without one), counted together: those held back by their groups' limits
     * (core/queues.c). Index seeks per group and priority: it costs what those groups hold, not the queue. */
    ad_err (*queue_group_queued)(struct ad_conn *c, const char *tenant, const char *type, int64_t now,
                                 const char *const *groups, size_t ngroups, int64_t *out);
    /* Dependencies (core/deps.c), writer thread in its transaction: an edge from job_id to a job it depends on (which
     * marks that job: its dependents becomes 1, read by every later job_get, and never reset by job_update), and
     * the jobs waiting for dep_id (dep_take: their ids, heap, into *ids, *n of them, the caller frees each and the
     * array), whose edges it deletes: a job ends once, so its edges are read once. */
    ad_err (*dep_add)(struct ad_conn *c, const char *job_id, const char *dep_id);
    ad_err (*dep_take)(struct ad_conn *c, const char *dep_id, char ***ids, size_t *n);
    /* Batches (core/batches.c). insert and update (every counter and finished_at) in the writer's transaction;
     * get by id within tenant (NULL: any), AD_E_NOT_FOUND when absent (the caller frees *out). batch_jobs: the
     * batch's jobs newest first (cseq descending) with cseq < before (0: from the newest), at most limit. */
    ad_err (*batch_insert)(struct ad_conn *c, const struct ad_batch *b);
    ad_err (*batch_update)(struct ad_conn *c, const struct ad_batch *b);
    ad_err (*batch_get)(struct ad_conn *c, const char *tenant, const char *id, struct ad_batch **out);
    /* Delete up to limit batches with expires_at <= before (their tombstone period over). *done = rows deleted. */
    ad_err (*batch_sweep)(struct ad_conn *c, int64_t before, int limit, int *done);
    ad_err (*batch_jobs)(struct ad_conn *c, const char *tenant, const char *batch_id, int64_t before, int limit,
                         struct ad_job_list *out);

    /*
     * Schedules (struct ad_schedule), written by the writer in its transaction. schedule_put: fresh, a new row
     * (the caller has looked: the id is free); else the row of s->tenant and s->id replaced, only if its next_at is
     * still expect_next (0: none): the compare-and-set of a fire, so that two writers never both take one fire
     * time. A row that is not so is AD_E_NOT_FOUND (or, where writes are sent ahead, fails the commit).
     * schedule_get: AD_E_NOT_FOUND when absent; the caller clears *out. schedule_list: a tenant's rows by id after
     * `after` (NULL: from the first), at most limit. schedule_delete: AD_E_NOT_FOUND when absent (or fails the
     * commit). schedule_due: the rows with a next_at <= before, soonest first, at most limit (through an index).
     */
    ad_err (*schedule_put)(struct ad_conn *c, const struct ad_schedule *s, int fresh, int64_t expect_next);
    ad_err (*schedule_get)(struct ad_conn *c, const char *tenant, const char *id, struct ad_schedule *out);
    ad_err (*schedule_list)(struct ad_conn *c, const char *tenant, const char *after, int limit,
                            struct ad_schedule_list *out);
    ad_err (*schedule_delete)(struct ad_conn *c, const char *tenant, const char *id);
    ad_err (*schedule_due)(struct ad_conn *c, int64_t before, int limit, struct ad_schedule_list *out);
};

struct ad_store {
    const struct ad_store_ops *ops;
};

/* Open the store named by target: "postgresql://..." or "postgres://..." selects PostgreSQL, anything else is a
 * data directory for SQLite (created if missing). NULL with err on failure. Close with s->ops->close(s). */
struct ad_store *ad_store_open(const char *target, char *err, size_t errlen);

#endif
