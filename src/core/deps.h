/*
 * deps.h - dependencies between jobs (CONTRACT.md section 13): a job that names others in dependsOn stays queued,
 * "waitingFor": "dependencies", until each of them has succeeded (partialSuccess counts), and is cancelled with the
 * problem dependency-failed when one fails or is cancelled (unless it said onDependencyFailure "run").
 *
 * The state is in the store: a count of unfinished dependencies on the job (job.h deps; the lease queries pass
 * over a queued job with deps > 0) and an edge per unfinished dependency, keyed by it. Nothing polls: the
 * operation that ends a job settles its dependents in its own transaction (ad_deps_settle), so a job becomes
 * leasable in the commit that ends its last dependency, and its publish wakes the parked leases (hub.c). Writer
 * thread, inside the writer's transaction.
 */
#ifndef AD_CORE_DEPS_H
#define AD_CORE_DEPS_H

#include "core/writer.h"
#include "store/store.h"

/* At most this many ids in a dependsOn. */
#define AD_DEPS_MAX 100

/* Before job (a new job with depends_on set) is inserted: every id it names must be a job or a batch
 * (core/batches.h, fan-in) of its tenant, else
 * AD_E_DEPENDENCY_UNKNOWN with *bad the index of the first one that is not. Sets job->deps to how many have not
 * ended, and *failed (heap, the caller frees) to the first that ended failed or cancelled, or NULL. Writes
 * nothing. */
ad_err ad_deps_check(struct ad_conn *c, struct ad_job *job, int *bad, char **failed);
/* After job's insert: an edge to each of its dependencies that has not ended, and when failed (from
 * ad_deps_check) and the job does not run anyway, its cancellation (job is written again). */
ad_err ad_deps_link(struct ad_conn *c, struct ad_job *job, const char *failed, int64_t now);
/* After ended was written in a final status by op: the jobs waiting for it count it as done (a success, or a
 * failure where they run anyway) or are cancelled, and so on down their own dependents. Each job changed is
 * named to op (ad_op_changed_own) after those op named already. Nothing when ended is not final. */
ad_err ad_deps_settle(struct ad_op *op, struct ad_conn *c, const struct ad_job *ended, int64_t now);
/* A batch ended in the change being written (core/batches.c), failed (failed or cancelled) or not: its dependents
 * are settled by the next ad_deps_settle of the operation (ended may be NULL there). Writer thread. */
void ad_deps_ended(const char *batch_id, int failed);

#endif
