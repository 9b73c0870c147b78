/*
 * job.c - the job state machine, the job's JSON representation and its ETag.
 *
 * The representation is written by hand in a fixed field order so that the payload and result, already
 * stored as compact JSON text, are spliced in without being parsed again. It is rendered once per change;
 * the poll path serves the rendered bytes.
 */
#include "job/job.h"

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
    X(worker)

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

int ad_json_str(struct ad_buf *b, const char *s)
{
    static const char hex[] = "0123456789abcdef";
    if (s == NULL)
        return ad_buf_append(b, "null", 4);
    /* Most strings (ids, types, URLs, lease ids) need no escape: then they are appended whole. */
    const unsigned char *q = (const unsigned char *)s;
    while (*q >= 0x20 && *q != '"' && *q != '\\')
        q++;
    if (*q == '\0') {
        if (ad_buf_append(b, "\"", 1) != 0 || ad_buf_append(b, s, (size_t)(q - (const unsigned char *)s)) != 0)
            return -1;
        return ad_buf_append(b, "\"", 1);
    }
    if (ad_buf_append(b, "\"", 1) != 0)
        return -1;
    const char *run = s;
    for (const unsigned char *p = (const unsigned char *)s; *p != '\0'; p++) {
        char esc[6];
        size_t elen = 0;
        switch (*p) {
        case '"':
            memcpy(esc, "\\\"", elen = 2);
            break;
        case '\\':
            memcpy(esc, "\\\\", elen = 2);
            break;
        case '\n':
            memcpy(esc, "\\n", elen = 2);
            break;
        case '\r':
            memcpy(esc, "\\r", elen = 2);
            break;
        case '\t':
            memcpy(esc, "\\t", elen = 2);
            break;
        default:
            if (*p < 0x20) {
                memcpy(esc, "\\u00", 4);
                esc[4] = hex[*p >> 4];
                esc[5] = hex[*p & 15];
                elen = 6;
            }
        }
        if (elen == 0)
            continue;
        if (ad_buf_append(b, run, (const char *)p - run) != 0 || ad_buf_append(b, esc, elen) != 0)
            return -1;
        run = (const char *)p + 1;
    }
    if (ad_buf_append(b, run, strlen(run)) != 0)
        return -1;
    return ad_buf_append(b, "\"", 1);
}

/* The renderer appends pieces instead of formatting with printf: a job is rendered on every change. */
static int json_time(struct ad_buf *b, int64_t ms)
{
    if (ms == 0)
        return AD_BUF_LIT(b, "null");
    char t[40];
    t[0] = '"';
    ad_time_rfc3339(ms, t + 1, sizeof(t) - 2);
    size_t n = strlen(t);
    t[n] = '"';
    return ad_buf_append(b, t, n + 1);
}

static int json_raw(struct ad_buf *b, const char *text)
{
    return ad_buf_str(b, text != NULL ? text : "null");
}

int ad_job_render(const struct ad_job *j, struct ad_buf *b)
{
    int rc = 0;
    rc |= AD_BUF_LIT(b, "{\"id\":");
    rc |= ad_json_str(b, j->id);
    rc |= AD_BUF_LIT(b, ",\"type\":");
    rc |= ad_json_str(b, j->type);
    rc |= AD_BUF_LIT(b, ",\"status\":\"");
    rc |= ad_buf_str(b, ad_status_name(j->status));
    rc |= AD_BUF_LIT(b, "\",\"progress\":");
    rc |= j->progress >= 0 ? ad_buf_int(b, j->progress) : AD_BUF_LIT(b, "null");
    rc |= AD_BUF_LIT(b, ",\"priority\":\"");
    rc |= ad_buf_str(b, ad_priority_name(j->priority));
    rc |= AD_BUF_LIT(b, "\",\"payload\":");
    rc |= json_raw(b, j->payload != NULL ? j->payload : "{}");
    if (j->status == AD_SUCCEEDED || j->status == AD_PARTIAL) {
        if (j->result != NULL || j->result_location == NULL) {
            rc |= AD_BUF_LIT(b, ",\"result\":");
            rc |= json_raw(b, j->result);
        }
        if (j->result_location != NULL) {
            rc |= AD_BUF_LIT(b, ",\"resultLocation\":");
            rc |= ad_json_str(b, j->result_location);
        }
    }
    if (j->status == AD_FAILED) {
        rc |= AD_BUF_LIT(b, ",\"error\":");
        rc |= json_raw(b, j->error);
    }
    rc |= AD_BUF_LIT(b, ",\"attempt\":");
    rc |= ad_buf_int(b, j->attempt);
    rc |= AD_BUF_LIT(b, ",\"maxAttempts\":");
    rc |= ad_buf_int(b, j->max_attempts);
    rc |=
        j->cancel_requested ? AD_BUF_LIT(b, ",\"cancelRequested\":true") : AD_BUF_LIT(b, ",\"cancelRequested\":false");
    static const char *const time_members[] = {",\"createdAt\":",  ",\"startedAt\":", ",\"lastUpdatedAt\":",
                                               ",\"finishedAt\":", ",\"expiresAt\":", ",\"runAt\":"};
    const int64_t times[] = {j->created_at, j->started_at, j->updated_at, j->finished_at, j->expires_at, j->run_at};
    for (size_t i = 0; i < sizeof(times) / sizeof(times[0]); i++) {
        rc |= ad_buf_str(b, time_members[i]);
        rc |= json_time(b, times[i]);
    }
    rc |= AD_BUF_LIT(b, ",\"retryOf\":");
    rc |= ad_json_str(b, j->retry_of);
    rc |= AD_BUF_LIT(b, ",\"message\":");
    rc |= ad_json_str(b, j->message);
    /* Ids are base64url, so they need no escaping inside the links. */
    static const char *const links[] = {",\"links\":{\"self\":\"/v1/jobs/", "\",\"cancel\":\"/v1/jobs/",
                                        ":cancel\",\"retry\":\"/v1/jobs/", ":retry\",\"events\":\"/v1/jobs/",
                                        "/events\",\"result\":\"/v1/jobs/"};
    for (size_t i = 0; i < sizeof(links) / sizeof(links[0]); i++) {
        rc |= ad_buf_str(b, links[i]);
        rc |= ad_buf_str(b, j->id);
    }
    rc |= AD_BUF_LIT(b, "/result\"}}");
    return rc != 0 ? -1 : 0;
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
