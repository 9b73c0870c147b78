/*
 * job.h - the job: its fields, its closed state machine, its JSON representation and ETag.
 *
 * Everything here is pure: no I/O, no clock reads, no store. Every path that changes a job's status goes
 * through ad_job_transition(), so the rules in docs/state-machine.md live in exactly one function.
 */
#ifndef AD_JOB_H
#define AD_JOB_H

#include <stddef.h>
#include <stdint.h>
#include "common/error.h"
#include "common/util.h"

enum ad_status { AD_QUEUED = 0, AD_RUNNING, AD_SUCCEEDED, AD_FAILED, AD_CANCELLED, AD_PARTIAL, AD_STATUS__COUNT };
enum ad_priority { AD_PRIO_LOW = 0, AD_PRIO_NORMAL = 1, AD_PRIO_HIGH = 2 };

/* What can happen to a job; the input of the state machine. */
enum ad_job_event {
    AD_EV_LEASE,            /* a worker takes a queued job */
    AD_EV_HEARTBEAT,        /* a worker reports on a running job */
    AD_EV_COMPLETE,         /* worker: succeeded */
    AD_EV_COMPLETE_PARTIAL, /* worker: partialSuccess */
    AD_EV_FAIL,             /* worker: failed, may be retried */
    AD_EV_FAIL_FINAL,       /* worker: failed, must not be retried */
    AD_EV_CANCEL,           /* client asks to cancel */
    AD_EV_CANCEL_ACK,       /* worker acknowledges a cancel request */
    AD_EV_LEASE_EXPIRED,    /* the lease ran out without word from the worker */
    AD_EV_RELEASE           /* worker hands the job back unfinished; the attempt does not count */
};

/* Times are ms since the epoch; 0 means "not reached" (null in JSON). Strings are heap-owned, NULL = absent. */
struct ad_job {
    char *id;
    char *tenant;
    char *type;
    enum ad_status status;
    int progress; /* 0-100, -1 = unknown */
    enum ad_priority priority;
    char *payload;         /* compact JSON text, never NULL once valid */
    char *result;          /* compact JSON text, or NULL */
    char *result_location; /* external result URL given by the worker, or NULL */
    char *error;           /* compact JSON problem text (failed only), or NULL */
    char *message;         /* last worker message, or NULL */
    int attempt;
    int max_attempts;
    int cancel_requested;
    int timeout_seconds; /* 0 = none */
    int on_complete_redirect;
    int64_t created_at, started_at, updated_at, finished_at, expires_at, run_at;
    char *callback_url;
    char *retry_of;
    char *resource; /* Content-Location of the business resource, expanded, or NULL */
    char *lease_id; /* current lease while running, else NULL */
    int64_t lease_expires_at;
    char *worker;
    int tombstoned; /* payload/result dropped at expiry; answers 410 */
    /* The result artifact (a file a worker uploaded under its lease, api_artifacts.c), or NULL: "<leaseId> " then
     * its JSON view {"size", "contentType", "digest", "href"}. The lease names the file; the view is rendered as is. */
    char *artifact;
    int64_t seq;         /* change cursor: assigned by the store on every insert/update */
    int64_t cseq;        /* creation order: assigned by the store on insert */
    int64_t created_seq; /* the seq of the insert, set by the store: the id of the job's first event, which is not
                            in its log but made from the job; 0 for a job whose log holds that event (older ones) */
    int64_t started_seq; /* the seq of the lease that started the current (or last) attempt when that attempt's
                            running event is not in the log but made from the job (ad_event_started_view), else 0.
                            AD_SEQ_OF_THIS_WRITE asks the store to set it to the seq of the update it is written by */
    char *unique_key;    /* while the job is queued or running, a submit of its tenant and type with this uniqueKey
                            answers it instead of making a job (core.c, unique_apply), or NULL */
    char *group;  /* the unit of fairness within a type (docs/protocol.md "Groups and fairness"), or NULL: the jobs
                     without one form one group */
    int64_t turn; /* the job's round among its type's groups at its priority, assigned by the store on insert from
                     the queue as it is then (store_int.h); the lease order is priority, turn, cseq */
    /* The job's trace context (docs/tracing.md), set at submit and never changed, or NULL: a version 00 traceparent
     * whose parent id is acceptd's span of the submit, and the submitter's tracestate as cleaned (common/trace.h). */
    char *traceparent;
    char *tracestate;
    /* Dependencies (core/deps.h): the ids the submit named in dependsOn, as a compact JSON array, or NULL; how many
     * of them have not ended yet (a queued job with deps > 0 is never leased: "waitingFor": "dependencies"); and
     * whether the job runs even when one of them failed or was cancelled (onDependencyFailure "run"). */
    char *depends_on;
    int deps;
    int dep_run;
    char *batch_id; /* the batch the job was created in (core/batches.h), or NULL */
    int dependents; /* 1 once a job has named this one in its dependsOn (store dep_add): its end settles them */
    char
        *schedule; /* the schedule run that made the job, compact JSON {"id", "fireTime"} (core/schedules.c), or NULL */
};
#define AD_SEQ_OF_THIS_WRITE (-1)

/* The outcome of applying an event. */
struct ad_transition {
    enum ad_status to;
    int cancel_requested;
};

/* The state machine. Returns AD_E_OK with *out filled, or AD_E_ILLEGAL_TRANSITION. Pure. */
ad_err ad_job_transition(const struct ad_job *job, enum ad_job_event ev, struct ad_transition *out);

int ad_status_terminal(enum ad_status s);
/* "queued", "running", ... Static storage. */
const char *ad_status_name(enum ad_status s);
/* Parse a status name; returns 0 or -1. */
int ad_status_parse(const char *s, enum ad_status *out);
const char *ad_priority_name(enum ad_priority p);
int ad_priority_parse(const char *s, enum ad_priority *out);

struct ad_job *ad_job_new(void);
/* Deep copy; the caller frees with ad_job_free. */
struct ad_job *ad_job_dup(const struct ad_job *j);
void ad_job_free(struct ad_job *j);
/* Replace a heap string field: frees the old value, copies v (may be NULL). */
void ad_job_set(char **field, const char *v);

/* Append the job's JSON representation (docs/protocol.md) to b. Returns 0 or -1 when b's cap is hit. */
int ad_job_render(const struct ad_job *j, struct ad_buf *b);
/* Strong ETag of a rendered representation: '"' + 22 base64url chars + '"' into out (>= 25 bytes). */
void ad_etag(const char *body, size_t len, char *out);

#endif
