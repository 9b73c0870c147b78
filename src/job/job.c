/*
 * job.c - the job state machine, the job's JSON representation and its ETag.
 *
 * The representation is written by hand in a fixed field order so that the payload and result, already
 * stored as compact JSON text, are spliced in without being parsed again. It is rendered once per change;
 * the poll path serves the rendered bytes. Every string the daemon writes into JSON by hand goes through
 * ad_json_str, which writes UTF-8 whatever bytes it is given; the spliced text is jansson's, UTF-8 already.
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

/* 1 for the bytes a JSON string holds as they are: printable ASCII but '"' and '\\'. A table: the loop over
 * them is the renderer's hottest (every id, type and message). */
static const unsigned char json_plain_tab[256] = {
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, /* 0x00 */
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, /* 0x10 */
    1, 1, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, /* 0x20 */
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, /* 0x30 */
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, /* 0x40 */
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 1, 1, 1, /* 0x50 */
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, /* 0x60 */
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, /* 0x70 */
    /* 0x80-0xff: 0, each sequence is checked as UTF-8 */
};

static int json_plain(unsigned char c)
{
    return json_plain_tab[c];
}

/*
 * The length of the UTF-8 sequence at p (not ASCII) and whether it is well formed (Unicode 15, table 3-7:
 * no overlong forms, no surrogates, nothing past U+10FFFF). When it is not, the length is that of its
 * maximal subpart, which one U+FFFD replaces (Unicode 15 §3.9, the practice WHATWG's decoder follows), so
 * a reader decoding the same bytes leniently sees the same text. The NUL ending s fails every continuation
 * test, so nothing past it is read.
 */
static size_t utf8_seq(const unsigned char *p, int *ok)
{
    unsigned lo = 0x80, hi = 0xbf;
    size_t n;
    *ok = 0;
    if (p[0] >= 0xc2 && p[0] <= 0xdf) {
        n = 2;
    } else if (p[0] >= 0xe0 && p[0] <= 0xef) {
        n = 3;
        lo = p[0] == 0xe0 ? 0xa0 : lo;
        hi = p[0] == 0xed ? 0x9f : hi;
    } else if (p[0] >= 0xf0 && p[0] <= 0xf4) {
        n = 4;
        lo = p[0] == 0xf0 ? 0x90 : lo;
        hi = p[0] == 0xf4 ? 0x8f : hi;
    } else {
        return 1;
    }
    if (p[1] < lo || p[1] > hi)
        return 1;
    for (size_t i = 2; i < n; i++)
        if ((p[i] & 0xc0) != 0x80)
            return i;
    *ok = 1;
    return n;
}

/* ad_json_str from p, the first byte that needs a look, on: escapes, U+FFFD for what is not UTF-8. Kept out
 * of ad_json_str so that its loop over plain ASCII, every id and type, stays tight. */
static int json_str_rest(struct ad_buf *b, const char *s, const unsigned char *p)
{
    static const char hex[] = "0123456789abcdef";
    const char *run = s; /* the bytes not yet appended, which need no change */
    while (*p != '\0') {
        char esc[6];
        size_t elen, skip = 1;
        if (json_plain(*p)) {
            p++;
            continue;
        }
        if (*p >= 0x80) {
            /* Valid UTF-8 is kept as it is; what is not becomes U+FFFD (RFC 8259 §8.1: JSON is UTF-8). */
            int ok;
            skip = utf8_seq(p, &ok);
            if (ok) {
                p += skip;
                continue;
            }
            memcpy(esc, "\xef\xbf\xbd", elen = 3);
        } else if (*p == '"' || *p == '\\') {
            esc[0] = '\\';
            esc[1] = (char)*p;
            elen = 2;
        } else if (*p == '\n' || *p == '\r' || *p == '\t') {
            esc[0] = '\\';
            esc[1] = *p == '\n' ? 'n' : *p == '\r' ? 'r' : 't';
            elen = 2;
        } else {
            memcpy(esc, "\\u00", 4);
            esc[4] = hex[*p >> 4];
            esc[5] = hex[*p & 15];
            elen = 6;
        }
        if (ad_buf_append(b, run, (size_t)((const char *)p - run)) != 0 || ad_buf_append(b, esc, elen) != 0)
            return -1;
        p += skip;
        run = (const char *)p;
    }
    return ad_buf_append(b, run, (size_t)((const char *)p - run));
}

int ad_json_str(struct ad_buf *b, const char *s)
{
    if (s == NULL)
        return ad_buf_append(b, "null", 4);
    /* Most strings (ids, types, URLs, lease ids) are printable ASCII: then they are appended whole. */
    const unsigned char *p = (const unsigned char *)s;
    while (json_plain(*p))
        p++;
    if (ad_buf_append(b, "\"", 1) != 0)
        return -1;
    if (*p == '\0' ? ad_buf_append(b, s, (size_t)((const char *)p - s)) != 0 : json_str_rest(b, s, p) != 0)
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
