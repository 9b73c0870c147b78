/*
 * job.c - the job state machine, the job's JSON representation and its ETag.
 *
 * The representation is written by hand in a fixed field order so that the payload and result, already
 * stored as compact JSON text, are spliced in without being parsed again. It is rendered once per change;
 * the poll path serves the rendered bytes. It is written with the one JSON writer (common/json.h), whose
 * strings are UTF-8 whatever bytes they are given; the spliced text is jansson's, UTF-8 already.
 */
#include "job/job.h"
#include "common/json.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const status_names[AD_STATUS__COUNT] = {"queued", "running",   "succeeded",
                                                           "failed", "cancelled", "partialSuccess"};
static const char *const priority_names[] = {"low", "normal", "high"};

int ad_status_terminal(enum ad_status s)
{
    return s == AD_SUCCEEDED || s == AD_FAILED || s == AD_CANCELLED || s == AD_PARTIAL;
}

const char *ad_status_name(enum ad_status s)
{
    return (unsigned)s < AD_STATUS__COUNT ? status_names[s] : "unknown";
}

int ad_status_parse(const char *s, enum ad_status *out)
{
    for (int i = 0; i < AD_STATUS__COUNT; i++) {
        if (strcmp(s, status_names[i]) == 0) {
            *out = (enum ad_status)i;
            return 0;
        }
    }
    return -1;
}

const char *ad_priority_name(enum ad_priority p)
{
    return (unsigned)p <= AD_PRIO_HIGH ? priority_names[p] : "normal";
}

int ad_priority_parse(const char *s, enum ad_priority *out)
{
    for (int i = 0; i <= AD_PRIO_HIGH; i++) {
        if (strcmp(s, priority_names[i]) == 0) {
            *out = (enum ad_priority)i;
            return 0;
        }
    }
    return -1;
}

ad_err ad_job_transition(const struct ad_job *job, enum ad_job_event ev, struct ad_transition *out)
{
    out->to = job->status;
    out->cancel_requested = job->cancel_requested;
    if (ad_status_terminal(job->status))
        return AD_E_ILLEGAL_TRANSITION;
    int attempts_left = job->attempt < job->max_attempts;
    switch (ev) {
    case AD_EV_LEASE:
        if (job->status != AD_QUEUED)
            return AD_E_ILLEGAL_TRANSITION;
        out->to = AD_RUNNING;
        return AD_E_OK;
    case AD_EV_CANCEL:
        if (job->status == AD_QUEUED)
            out->to = AD_CANCELLED;
        else
            out->cancel_requested = 1;
        return AD_E_OK;
    default:
        break;
    }
    /* Everything below is a report about a running job. */
    if (job->status != AD_RUNNING)
        return AD_E_ILLEGAL_TRANSITION;
    switch (ev) {
    case AD_EV_HEARTBEAT:
        return AD_E_OK;
    case AD_EV_COMPLETE:
        out->to = AD_SUCCEEDED;
        return AD_E_OK;
    case AD_EV_COMPLETE_PARTIAL:
        out->to = AD_PARTIAL;
        return AD_E_OK;
    case AD_EV_FAIL:
        out->to = attempts_left && !job->cancel_requested ? AD_QUEUED : AD_FAILED;
        return AD_E_OK;
    case AD_EV_FAIL_FINAL:
        out->to = AD_FAILED;
        return AD_E_OK;
    case AD_EV_CANCEL_ACK:
        out->to = AD_CANCELLED;
        return AD_E_OK;
    case AD_EV_RELEASE:
        out->to = job->cancel_requested ? AD_CANCELLED : AD_QUEUED;
        return AD_E_OK;
    case AD_EV_LEASE_EXPIRED:
        if (job->cancel_requested)
            out->to = AD_CANCELLED;
        else
            out->to = attempts_left ? AD_QUEUED : AD_FAILED;
        return AD_E_OK;
    default:
        return AD_E_ILLEGAL_TRANSITION;
    }
}

struct ad_job *ad_job_new(void)
{
    struct ad_job *j = ad_calloc(1, sizeof(*j));
    j->progress = -1;
    j->priority = AD_PRIO_NORMAL;
    return j;
}

void ad_job_set(char **field, const char *v)
{
    char *old = *field;
    *field = ad_strdup_opt(v);
    free(old);
}

/* The job's heap-allocated texts: what a copy duplicates and a free releases. */
#define AD_JOB_TEXTS(X)                                                                                                \
    X(id)                                                                                                              \
    X(tenant)                                                                                                          \
    X(type)                                                                                                            \
    X(payload)                                                                                                         \
    X(result)                                                                                                          \
    X(result_location)                                                                                                 \
    X(error)                                                                                                           \
    X(message)                                                                                                         \
    X(callback_url)                                                                                                    \
    X(retry_of)                                                                                                        \
    X(resource)                                                                                                        \
    X(lease_id)                                                                                                        \
    X(worker)                                                                                                          \
    X(artifact)                                                                                                        \
    X(unique_key)                                                                                                      \
    X(group)                                                                                                           \
    X(traceparent)                                                                                                     \
    X(tracestate)                                                                                                      \
    X(depends_on)                                                                                                      \
    X(batch_id)                                                                                                        \
    X(schedule)

struct ad_job *ad_job_dup(const struct ad_job *j)
{
    struct ad_job *d = ad_malloc(sizeof(*d));
    *d = *j;
#define AD_DUP(f) d->f = ad_strdup_opt(j->f);
    AD_JOB_TEXTS(AD_DUP)
#undef AD_DUP
    return d;
}

void ad_job_free(struct ad_job *j)
{
    if (j == NULL)
        return;
#define AD_FREE(f) free(j->f);
    AD_JOB_TEXTS(AD_FREE)
#undef AD_FREE
    free(j);
}

/* The job's id inside a string (a link), as the writer escapes it: whole when plain (idn is its length). */
static void write_id(struct ad_buf *b, const char *id, size_t idn)
{
    if (id[idn] == '\0')
        ad_buf_append(b, id, idn);
    else
        ad_json_chars(b, id);
}

int ad_job_render(const struct ad_job *j, struct ad_buf *b)
{
    /* The renderer is the hot path: the returns are skipped for the writer's sticky error (json.h), checked
     * once at the end. The id, written six times, is scanned once. */
    size_t idn = ad_json_plain_len(j->id);
    AD_JSON_OPEN(b, "id");
    ad_json_str(b, j->id);
    AD_JSON_KEY(b, "type");
    ad_json_str(b, j->type);
    AD_JSON_KEY(b, "status");
    ad_json_str(b, ad_status_name(j->status));
    AD_JSON_KEY(b, "progress");
    j->progress >= 0 ? ad_json_int(b, j->progress) : ad_json_null(b);
    AD_JSON_KEY(b, "priority");
    ad_json_str(b, ad_priority_name(j->priority));
    if (j->group != NULL) {
        AD_JSON_KEY(b, "group");
        ad_json_str(b, j->group);
    }
    AD_JSON_KEY(b, "payload");
    ad_json_raw(b, j->payload != NULL ? j->payload : "{}");
    if (j->status == AD_SUCCEEDED || j->status == AD_PARTIAL) {
        if (j->result != NULL || (j->result_location == NULL && j->artifact == NULL)) {
            AD_JSON_KEY(b, "result");
            ad_json_raw(b, j->result);
        }
        if (j->result_location != NULL) {
            AD_JSON_KEY(b, "resultLocation");
            ad_json_str(b, j->result_location);
        }
        const char *view = j->artifact != NULL ? strchr(j->artifact, ' ') : NULL;
        if (view != NULL) {
            AD_JSON_KEY(b, "artifact");
            ad_json_raw(b, view + 1);
        }
    }
    /* A job cancelled because a dependency failed says which in its error (core/deps.c). */
    if (j->status == AD_FAILED || (j->status == AD_CANCELLED && j->depends_on != NULL && j->error != NULL)) {
        AD_JSON_KEY(b, "error");
        ad_json_raw(b, j->error);
    }
    AD_JSON_KEY(b, "attempt");
    ad_json_int(b, j->attempt);
    AD_JSON_KEY(b, "maxAttempts");
    ad_json_int(b, j->max_attempts);
    AD_JSON_KEY(b, "cancelRequested");
    ad_json_bool(b, j->cancel_requested);
    AD_JSON_KEY(b, "createdAt");
    ad_json_time(b, j->created_at);
    AD_JSON_KEY(b, "startedAt");
    ad_json_time(b, j->started_at);
    AD_JSON_KEY(b, "lastUpdatedAt");
    ad_json_time(b, j->updated_at);
    AD_JSON_KEY(b, "finishedAt");
    ad_json_time(b, j->finished_at);
    AD_JSON_KEY(b, "expiresAt");
    ad_json_time(b, j->expires_at);
    AD_JSON_KEY(b, "runAt");
    ad_json_time(b, j->run_at);
    AD_JSON_KEY(b, "retryOf");
    ad_json_str(b, j->retry_of);
    AD_JSON_KEY(b, "message");
    ad_json_str(b, j->message);
    if (j->unique_key != NULL) {
        AD_JSON_KEY(b, "uniqueKey");
        ad_json_str(b, j->unique_key);
    }
    /* The trace id of the job's traceparent ("00-" then 32 hex digits): a checked value, written as it is. */
    if (j->traceparent != NULL && strlen(j->traceparent) > 35) {
        AD_JSON_KEY(b, "traceId");
        AD_BUF_LIT(b, "\"");
        ad_buf_append(b, j->traceparent + 3, 32);
        AD_BUF_LIT(b, "\"");
    }
    if (j->batch_id != NULL) {
        AD_JSON_KEY(b, "batchId");
        ad_json_str(b, j->batch_id);
    }
    if (j->depends_on != NULL) {
        AD_JSON_KEY(b, "dependsOn");
        ad_json_raw(b, j->depends_on);
        AD_JSON_KEY(b, "onDependencyFailure");
        ad_json_str(b, j->dep_run ? "run" : "cancel");
    }
    if (j->schedule != NULL) {
        AD_JSON_KEY(b, "schedule");
        ad_buf_str(b, j->schedule);
    }
    static const char *const links[] = {",\"links\":{\"self\":\"/v1/jobs/", "\",\"cancel\":\"/v1/jobs/",
                                        ":cancel\",\"retry\":\"/v1/jobs/", ":retry\",\"events\":\"/v1/jobs/",
                                        "/events\",\"result\":\"/v1/jobs/"};
    for (size_t i = 0; i < sizeof(links) / sizeof(links[0]); i++) {
        ad_buf_str(b, links[i]);
        write_id(b, j->id, idn);
    }
    AD_BUF_LIT(b, "/result\"}}");
    return ad_json_end(b);
}

void ad_etag(const char *body, size_t len, char *out)
{
    uint8_t md[AD_SHA256_LEN];
    ad_sha256(body, len, md);
    out[0] = '"';
    ad_b64url_encode(md, 16, out + 1);
    out[23] = '"';
    out[24] = '\0';
}
