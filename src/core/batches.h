/*
 * batches.h - a batch (CONTRACT.md section 13): up to 1,000 jobs submitted in one commit, all or none, and followed
 * as one asynchronous operation with its jobs counted by status.
 *
 * The counts live in the batch's row and move in the same transaction as each of its jobs changes status
 * (ad_batch_moved, from the core's one write path), so a read of a batch is one row, whatever its size. The batch
 * ends in the change that ends its last job: then its status is final, and the jobs that depend on it (core/deps.h,
 * fan-in) are settled in that same transaction. Operations here run on the writer thread (create, cancel) or a
 * reader (get, jobs); nothing here knows HTTP.
 */
#ifndef AD_CORE_BATCHES_H
#define AD_CORE_BATCHES_H

#include "core/writer.h"
#include "store/store.h"

#define AD_BATCH_MAX 1000

/* A batch's status: AD_RUNNING until every job is final, then AD_SUCCEEDED (all succeeded), AD_CANCELLED (none
 * succeeded or failed: cancelled before any ended otherwise), AD_FAILED (none succeeded), else AD_PARTIAL. */
enum ad_status ad_batch_status(const struct ad_batch *b);
/* Append the batch's JSON representation to b. 0, or -1 when b's cap is hit. */
int ad_batch_render(const struct ad_batch *batch, struct ad_buf *b);

/* A job of batch j->batch_id moved from status from to j->status (writer thread, in the change's transaction):
 * count it, and when it was the batch's last job to end, end the batch (its dependents are settled by the
 * operation's ad_deps_settle). */
ad_err ad_batch_moved(struct ad_conn *c, const struct ad_job *j, enum ad_status from);

/* POST /v1/batches: batch (its tenant, total, created_at; id set by the caller) and its jobs (prepared, as a
 * submit's), inserted in one operation, or none of them: on AD_E_DEPENDENCY_UNKNOWN bad_item is the job and
 * dep_bad the index in its dependsOn. Out: the jobs are changes 0 .. n-1.
 * With an idempotency key (the tenant's, shared with POST /v1/jobs), the key's record names the batch and is
 * stored in the batch's commit; an existing record with the same fingerprint replays its batch instead (replayed
 * = 1, batch replaced by the stored one, no change; AD_E_GONE when the batch is gone), another fingerprint (another
 * body, or a key used for a job) fails with AD_E_IDEMPOTENCY_KEY_REUSED. */
struct ad_batch_create_op {
    struct ad_op op;
    struct ad_batch *batch;
    struct ad_job **jobs;
    size_t n;
    int bad_item, dep_bad;
    char *idem_key;       /* NULL when none */
    char fingerprint[65]; /* ad_fingerprint of the request, with idem_key */
    int replayed;
    char *inflight; /* the caller's: the key's claim (freed here) */
    void *ctx;
};
struct ad_batch_create_op *ad_batch_create_op_new(size_t n);

/* Read a batch of tenant (AD_BATCH_GET), a page of its jobs (AD_BATCH_JOBS: cseq < before, at most limit), or
 * cancel every job of it not final (AD_BATCH_CANCEL, writer: the jobs it changed are its changes). Out: batch (as
 * it is after), jobs. AD_E_NOT_FOUND when the tenant has no such batch. */
enum ad_batch_action { AD_BATCH_GET, AD_BATCH_JOBS, AD_BATCH_CANCEL };
struct ad_batches_op {
    struct ad_op op;
    enum ad_batch_action action;
    char *tenant, *id;
    int64_t before, now;
    int limit;
    struct ad_batch *batch;
    struct ad_job_list jobs;
    void *ctx;
    int view; /* the caller's: answered as the AIP-151 view */
};
struct ad_batches_op *ad_batches_op_new(void);

#endif
