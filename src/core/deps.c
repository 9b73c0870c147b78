/*
 * deps.c - dependencies between jobs (deps.h): the check and edges of a submit, and the settling of the jobs that
 * wait for one that ended.
 *
 * A job ends once, so its edges are taken (read and deleted) once, by the operation that ended it. Settling walks
 * down chains with a work list, not recursion: a job cancelled because its dependency failed is itself a failed
 * dependency of the jobs waiting for it. A dependent that is no longer waiting (cancelled by a client meanwhile,
 * or already cancelled through another of its dependencies) is passed over. The count on the job is what the
 * lease queries read; the edges are only the way from a dependency to its dependents. A batch is a dependency
 * like a job (fan-in): it ends in the write of its last job's end (batches.c), which notes it here
 * (ad_deps_ended), and the operation's settle takes it from there.
 */
#include "core/deps.h"
#include "core/batches.h"
#include "core/core.h"
#include "job/event.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

static int failed_status(enum ad_status s)
{
    return s == AD_FAILED || s == AD_CANCELLED;
}

/* The status of dependency id of tenant, a job's or (bat_...) a batch's (AD_RUNNING while it runs). */
static ad_err dep_status(struct ad_conn *c, const char *tenant, const char *id, enum ad_status *out)
{
    const struct ad_store_ops *st = ad_core_store_ops();
    if (strncmp(id, "bat_", 4) == 0) {
        struct ad_batch *b = NULL;
        ad_err e = st->batch_get(c, tenant, id, &b);
        if (e == AD_E_OK)
            *out = ad_batch_status(b);
        ad_batch_free(b);
        return e;
    }
    struct ad_job *d = NULL;
    ad_err e = st->job_get(c, tenant, id, &d);
    if (e == AD_E_OK)
        *out = d->status;
    ad_job_free(d);
    return e;
}

ad_err ad_deps_check(struct ad_conn *c, struct ad_job *job, int *bad, char **failed)
{
    *bad = -1;
    *failed = NULL;
    job->deps = 0;
    json_t *ids = json_loads(job->depends_on, 0, NULL);
    ad_err e = json_is_array(ids) ? AD_E_OK : AD_E_INTERNAL;
    for (size_t i = 0; e == AD_E_OK && i < json_array_size(ids); i++) {
        const char *id = json_string_value(json_array_get(ids, i));
        enum ad_status ds = AD_QUEUED;
        e = id != NULL ? dep_status(c, job->tenant, id, &ds) : AD_E_NOT_FOUND;
        if (e == AD_E_NOT_FOUND) {
            *bad = (int)i;
            e = AD_E_DEPENDENCY_UNKNOWN;
        } else if (e == AD_E_OK && !ad_status_terminal(ds)) {
            job->deps++;
        } else if (e == AD_E_OK && failed_status(ds) && *failed == NULL) {
            *failed = ad_strdup(id);
        }
    }
    json_decref(ids);
    if (e != AD_E_OK) {
        free(*failed);
        *failed = NULL;
    }
    return e;
}

/* Cancel j, a queued job waiting for dep, which ended failed or cancelled: the problem dependency-failed names it. */
static ad_err cancel_for(struct ad_conn *c, struct ad_job *j, const char *dep, int64_t now)
{
    struct ad_transition t;
    ad_err e = ad_job_transition(j, AD_EV_CANCEL, &t);
    if (e != AD_E_OK)
        return e;
    struct ad_event_prev prev;
    ad_event_prev_take(&prev, j);
    if (now < j->updated_at)
        now = j->updated_at;
    json_t *p =
        json_pack("{s:s, s:s, s:i, s:s, s:s, s:s}", "type", AD_PROBLEM_BASE "dependency-failed", "title",
                  "A dependency failed", "status", 424, "detail", "a job this job depends on ended failed or cancelled",
                  "code", "dependency-failed", "dependency", dep);
    char *text = json_dumps(p, JSON_COMPACT);
    json_decref(p);
    ad_job_set(&j->error, text);
    free(text);
    j->status = t.to;
    j->cancel_requested = t.cancel_requested;
    j->finished_at = j->updated_at = now;
    j->expires_at = now + ad_core_retention_ms(j->type, t.to);
    j->lease_expires_at = 0;
    return ad_core_job_write(c, j, &prev);
}

ad_err ad_deps_link(struct ad_conn *c, struct ad_job *job, const char *failed, int64_t now)
{
    const struct ad_store_ops *st = ad_core_store_ops();
    json_t *ids = json_loads(job->depends_on, 0, NULL);
    ad_err e = AD_E_OK;
    for (size_t i = 0; e == AD_E_OK && i < json_array_size(ids); i++) {
        const char *id = json_string_value(json_array_get(ids, i));
        enum ad_status ds = AD_QUEUED;
        e = dep_status(c, job->tenant, id, &ds);
        if (e == AD_E_OK && !ad_status_terminal(ds))
            e = st->dep_add(c, job->id, id);
    }
    json_decref(ids);
    if (e == AD_E_OK && failed != NULL && !job->dep_run)
        e = cancel_for(c, job, failed, now);
    return e;
}

/* The work list of a settle: the ids of jobs that ended, and whether each failed (for its dependents). */
struct ended {
    char **id;
    int *failed;
    size_t n, cap;
};

static void ended_push(struct ended *w, const char *id, int failed)
{
    if (w->n == w->cap) {
        w->cap = w->cap != 0 ? w->cap * 2 : 8;
        w->id = ad_realloc(w->id, w->cap * sizeof(*w->id));
        w->failed = ad_realloc(w->failed, w->cap * sizeof(*w->failed));
    }
    w->id[w->n] = ad_strdup(id);
    w->failed[w->n++] = failed;
}

/* The batches that ended in the writes since the last settle (writer thread only), checked against their rows when
 * taken (take_pending). */
static struct ended pending;

void ad_deps_ended(const char *batch_id, int failed)
{
    ended_push(&pending, batch_id, failed);
}

/* Move what ended meanwhile onto w: each batch as its row says it is now, so that an end whose write was undone
 * since (its operation failed after it, and the transaction with it) settles nothing. */
static ad_err take_pending(struct ad_conn *c, struct ended *w)
{
    const struct ad_store_ops *st = ad_core_store_ops();
    ad_err e = AD_E_OK;
    while (pending.n > 0) {
        pending.n--;
        struct ad_batch *b = NULL;
        ad_err ge = e == AD_E_OK ? st->batch_get(c, NULL, pending.id[pending.n], &b) : AD_E_NOT_FOUND;
        if (ge == AD_E_OK && ad_batch_status(b) != AD_RUNNING) {
            enum ad_status s = ad_batch_status(b);
            ended_push(w, b->id, s == AD_FAILED || s == AD_CANCELLED);
        } else if (ge != AD_E_NOT_FOUND && ge != AD_E_OK) {
            e = ge;
        }
        ad_batch_free(b);
        free(pending.id[pending.n]);
    }
    return e;
}

/* One dependent, waiting for dep, which ended (failed or not). */
static ad_err settle_one(struct ad_op *op, struct ad_conn *c, const char *id, const char *dep, int failed, int64_t now,
                         struct ended *w)
{
    const struct ad_store_ops *st = ad_core_store_ops();
    struct ad_job *j = NULL;
    ad_err e = st->job_get(c, NULL, id, &j);
    if (e == AD_E_NOT_FOUND)
        return AD_E_OK;
    if (e != AD_E_OK || j->status != AD_QUEUED || j->deps <= 0) {
        ad_job_free(j);
        return e;
    }
    if (failed && !j->dep_run) {
        e = cancel_for(c, j, dep, now);
        if (e == AD_E_OK && j->dependents)
            ended_push(w, j->id, 1);
    } else {
        struct ad_event_prev prev;
        ad_event_prev_take(&prev, j);
        j->deps--;
        if (j->deps == 0 && now > j->updated_at)
            j->updated_at = now;
        e = ad_core_job_write(c, j, &prev);
    }
    if (e != AD_E_OK) {
        ad_job_free(j);
        return e;
    }
    ad_op_changed_own(op, j);
    return AD_E_OK;
}

ad_err ad_deps_settle(struct ad_op *op, struct ad_conn *c, const struct ad_job *ended, int64_t now)
{
    const struct ad_store_ops *st = ad_core_store_ops();
    struct ended w = {0};
    /* A job no one named in dependsOn has no edges to take: the common end costs no read. */
    if (ended != NULL && ad_status_terminal(ended->status) && ended->dependents)
        ended_push(&w, ended->id, failed_status(ended->status));
    ad_err e = take_pending(c, &w);
    while (e == AD_E_OK && w.n > 0) {
        char *dep = w.id[--w.n];
        int failed = w.failed[w.n];
        char **ids;
        size_t n;
        e = st->dep_take(c, dep, &ids, &n);
        for (size_t i = 0; i < n; i++) {
            if (e == AD_E_OK)
                e = settle_one(op, c, ids[i], dep, failed, now, &w);
            free(ids[i]);
        }
        free(ids);
        free(dep);
        if (e == AD_E_OK)
            e = take_pending(c, &w);
    }
    while (w.n > 0)
        free(w.id[--w.n]);
    free(w.id);
    free(w.failed);
    return e;
}
