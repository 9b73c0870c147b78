/*
 * api_stats.c - what the dashboard (/ui/) reads besides the job API: GET /v1/stats and GET /v1/leases.
 *
 * GET /v1/stats answers a tenant's jobs counted by type and state (one aggregate read of the store, with the
 * oldest of each group: the oldest queued job per type) and, from memory, the last hour of activity: submits,
 * completions, failures and cancels per 10-second bucket, and pickup (queued to running) and turnaround
 * (submitted to succeeded) latencies. The activity is noted from the hub's change stream (every published
 * change, the other nodes' too in a cluster), so it costs one bucket increment per change and no store read;
 * it starts empty when the daemon starts, and the answer says since when it counts ("collectingSince").
 *
 * GET /v1/leases lists the running jobs (their worker, lease expiry and last heartbeat) and the lease requests
 * parked on this node. Both are the caller's tenant's, or every tenant's for an admin key.
 */
#include "api/api_int.h"
#include "common/json.h"
#include "common/util.h"

#include <stdlib.h>
#include <string.h>

#define AD_STATS_BUCKET_MS 10000
#define AD_STATS_BUCKETS 360 /* an hour */
#define AD_STATS_SAMPLES 1024
#define AD_STATS_TENANTS 256 /* tenants come from the configured keys; past this, activity is not noted */
#define AD_STATS_GROUPS 2000 /* type and state groups in one answer */
#define AD_STATS_LEASES 1000 /* running jobs in one GET /v1/leases answer */

enum { K_SUBMITTED, K_COMPLETED, K_FAILED, K_CANCELLED, K__COUNT };
static const char *const kind_names[K__COUNT] = {"submitted", "completed", "failed", "cancelled"};

struct bucket {
    int64_t start; /* ms since the epoch, a multiple of AD_STATS_BUCKET_MS; 0 = unused */
    uint32_t n[K__COUNT];
};

struct sample {
    int64_t at, ms;
};

struct samples {
    struct sample s[AD_STATS_SAMPLES]; /* a ring: the newest AD_STATS_SAMPLES */
    size_t next, n;
};

struct activity {
    struct activity *next;
    struct bucket b[AD_STATS_BUCKETS];
    struct samples pickup, turnaround;
    char tenant[];
};

static struct activity *activities;
static size_t nactivities;
static int64_t collecting_since;

static struct activity *activity_of(const char *tenant)
{
    struct activity *a = activities;
    while (a != NULL && strcmp(a->tenant, tenant) != 0)
        a = a->next;
    if (a != NULL || nactivities >= AD_STATS_TENANTS)
        return a;
    size_t len = strlen(tenant);
    a = ad_calloc(1, sizeof(*a) + len + 1);
    memcpy(a->tenant, tenant, len + 1);
    a->next = activities;
    activities = a;
    nactivities++;
    return a;
}

static void count(struct activity *a, int64_t at, int kind)
{
    int64_t start = at - at % AD_STATS_BUCKET_MS;
    struct bucket *b = &a->b[(start / AD_STATS_BUCKET_MS) % AD_STATS_BUCKETS];
    if (b->start != start) {
        if (b->start > start)
            return; /* older than the hour the ring holds */
        memset(b, 0, sizeof(*b));
        b->start = start;
    }
    b->n[kind]++;
}

static void sample(struct samples *s, int64_t at, int64_t ms)
{
    s->s[s->next] = (struct sample){at, ms < 0 ? 0 : ms};
    s->next = (s->next + 1) % AD_STATS_SAMPLES;
    if (s->n < AD_STATS_SAMPLES)
        s->n++;
}

/* A published change: which step of a job's life it is follows from the job's times, since every change sets
 * updated_at to its own time (core.c). */
static void note(const struct ad_job *j, const char *body, size_t len)
{
    (void)body;
    (void)len;
    struct activity *a = activity_of(j->tenant);
    if (a == NULL)
        return;
    if (j->status == AD_QUEUED && j->attempt == 0 && j->created_at == j->updated_at) {
        count(a, j->created_at, K_SUBMITTED);
    } else if (j->status == AD_RUNNING && j->started_at == j->updated_at) {
        /* A job handed to a parked worker by its own submit is published running, never queued. */
        if (j->attempt == 1 && j->created_at == j->started_at)
            count(a, j->created_at, K_SUBMITTED);
        int64_t ready = j->run_at > j->created_at ? j->run_at : j->created_at;
        if (j->attempt == 1)
            sample(&a->pickup, j->started_at, j->started_at - ready);
    } else if (ad_status_terminal(j->status) && j->finished_at == j->updated_at) {
        int kind = j->status == AD_FAILED ? K_FAILED : j->status == AD_CANCELLED ? K_CANCELLED : K_COMPLETED;
        count(a, j->finished_at, kind);
        if (kind == K_COMPLETED)
            sample(&a->turnaround, j->finished_at, j->finished_at - j->created_at);
    }
}

static const struct ad_hub_listener stats_listener = {.event = note};

void ad_api_stats_init(void)
{
    collecting_since = ad_now_ms();
    ad_hub_listen(&stats_listener);
}

static int cmp_int64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

/* {"p50":ms,"p99":ms,"samples":n} of the samples of the matching tenants newer than since (null when none). */
static void percentiles(struct ad_buf *b, const char *tenant, int64_t since, int turnaround)
{
    size_t cap = 0;
    for (const struct activity *a = activities; a != NULL; a = a->next)
        cap += AD_STATS_SAMPLES;
    int64_t *v = ad_calloc(cap + 1, sizeof(*v));
    size_t n = 0;
    for (const struct activity *a = activities; a != NULL; a = a->next) {
        if (tenant != NULL && strcmp(a->tenant, tenant) != 0)
            continue;
        const struct samples *s = turnaround ? &a->turnaround : &a->pickup;
        for (size_t i = 0; i < s->n; i++)
            if (s->s[i].at >= since)
                v[n++] = s->s[i].ms;
    }
    qsort(v, n, sizeof(*v), cmp_int64);
    AD_JSON_OPEN(b, "p50");
    if (n == 0)
        ad_json_null(b);
    else
        ad_json_int(b, v[(n - 1) * 50 / 100]);
    AD_JSON_KEY(b, "p99");
    if (n == 0)
        ad_json_null(b);
    else
        ad_json_int(b, v[(n - 1) * 99 / 100]);
    AD_JSON_KEY(b, "samples");
    ad_json_int(b, (int64_t)n);
    AD_BUF_LIT(b, "}");
    free(v);
}

/* "activity": the hour's buckets oldest first, and "ratesPerSecond": over the last minute, the bucket still filling
 * included for the part of it that has passed (so a burst shows at once). */
static void render_activity(struct ad_buf *b, const char *tenant, int64_t now)
{
    int64_t last = now - now % AD_STATS_BUCKET_MS; /* the bucket still filling */
    uint32_t minute[K__COUNT] = {0};
    double span_s = (double)(60000 - AD_STATS_BUCKET_MS + (now - last)) / 1000.0;
    AD_JSON_KEY(b, "bucketSeconds");
    ad_json_int(b, AD_STATS_BUCKET_MS / 1000);
    AD_JSON_KEY(b, "activity");
    AD_BUF_LIT(b, "[");
    for (int i = AD_STATS_BUCKETS - 1; i >= 0; i--) {
        int64_t start = last - (int64_t)i * AD_STATS_BUCKET_MS;
        uint32_t n[K__COUNT] = {0};
        for (const struct activity *a = activities; a != NULL; a = a->next) {
            const struct bucket *bk = &a->b[(start / AD_STATS_BUCKET_MS) % AD_STATS_BUCKETS];
            if ((tenant == NULL || strcmp(a->tenant, tenant) == 0) && bk->start == start)
                for (int k = 0; k < K__COUNT; k++)
                    n[k] += bk->n[k];
        }
        if (i < 60000 / AD_STATS_BUCKET_MS)
            for (int k = 0; k < K__COUNT; k++)
                minute[k] += n[k];
        if (i != AD_STATS_BUCKETS - 1)
            AD_BUF_LIT(b, ",");
        AD_BUF_LIT(b, "[");
        ad_json_int(b, start);
        for (int k = 0; k < K__COUNT; k++) {
            AD_BUF_LIT(b, ",");
            ad_json_int(b, n[k]);
        }
        AD_BUF_LIT(b, "]");
    }
    AD_BUF_LIT(b, "]");
    AD_JSON_KEY(b, "activityColumns");
    AD_BUF_LIT(b, "[\"start\"");
    for (int k = 0; k < K__COUNT; k++) {
        AD_BUF_LIT(b, ",");
        ad_json_str(b, kind_names[k]);
    }
    AD_BUF_LIT(b, "]");
    AD_JSON_KEY(b, "ratesPerSecond");
    AD_BUF_LIT(b, "{");
    for (int k = 0; k < K__COUNT; k++) {
        if (k != 0)
            AD_BUF_LIT(b, ",");
        ad_json_str(b, kind_names[k]);
        ad_buf_printf(b, ":%.3f", minute[k] / span_s);
    }
    AD_BUF_LIT(b, "}");
    AD_JSON_KEY(b, "latencyMs");
    AD_JSON_OPEN(b, "pickup");
    percentiles(b, tenant, now - (int64_t)AD_STATS_BUCKETS * AD_STATS_BUCKET_MS, 0);
    AD_JSON_KEY(b, "turnaround");
    percentiles(b, tenant, now - (int64_t)AD_STATS_BUCKETS * AD_STATS_BUCKET_MS, 1);
    AD_BUF_LIT(b, "}");
}

/* The tenant a dashboard read covers: the caller's, or NULL (every tenant) for an admin key. */
static const char *scope(const struct ad_request *r)
{
    return (r->roles & AD_ROLE_ADMIN) != 0 ? NULL : r->tenant;
}

/* ---- GET /v1/stats ---- */

/*
 * The counts are a pass over the tenant's rows (every row, for an admin), and on SQLite a read runs on the event
 * loop: so each scope's counts are kept for AD_STATS_COUNTS_TTL_MS and every dashboard open on it shares them,
 * whatever their number.
 */
#define AD_STATS_COUNTS_TTL_MS 5000
#define AD_STATS_COUNTS_KEPT 64

struct counts_kept {
    struct counts_kept *next;
    char *tenant; /* NULL: every tenant */
    int64_t at;   /* monotonic ms */
    struct ad_job_count_list l;
};
static struct counts_kept *kept;

static int same_scope(const char *a, const char *b)
{
    return a == NULL ? b == NULL : b != NULL && strcmp(a, b) == 0;
}

static const struct counts_kept *kept_fresh(const char *tenant)
{
    int64_t now = ad_mono_ms();
    for (const struct counts_kept *k = kept; k != NULL; k = k->next)
        if (same_scope(k->tenant, tenant) && now - k->at < AD_STATS_COUNTS_TTL_MS)
            return k;
    return NULL;
}

/* Keep l (taken: it is emptied) as tenant's counts, in place of any older ones; past AD_STATS_COUNTS_KEPT scopes
 * the stalest is dropped. */
static void keep(const char *tenant, struct ad_job_count_list *l)
{
    struct counts_kept **pp = &kept, **stalest = NULL;
    size_t n = 0;
    for (; *pp != NULL; pp = &(*pp)->next, n++) {
        if (same_scope((*pp)->tenant, tenant))
            break;
        if (stalest == NULL || (*pp)->at < (*stalest)->at)
            stalest = pp;
    }
    struct counts_kept *k = *pp;
    if (k == NULL && n >= AD_STATS_COUNTS_KEPT) {
        k = *stalest;
        free(k->tenant);
        k->tenant = ad_strdup_opt(tenant);
    } else if (k == NULL) {
        k = ad_calloc(1, sizeof(*k));
        k->tenant = ad_strdup_opt(tenant);
        k->next = kept;
        kept = k;
    }
    ad_job_count_list_free(&k->l);
    k->l = *l;
    *l = (struct ad_job_count_list){0};
    k->at = ad_mono_ms();
}

struct stats_read {
    struct ad_api_read rd;
    char *tenant; /* NULL: every tenant */
    struct ad_job_count_list l;
};

static ad_err stats_apply(struct ad_op *op, struct ad_conn *c)
{
    struct stats_read *x = (struct stats_read *)op;
    return ad_hub.store->ops->job_counts(c, x->tenant, AD_STATS_GROUPS, &x->l);
}

static void stats_send(struct ad_request *r, const char *tenant, const struct ad_job_count_list *l)
{
    int64_t now = ad_now_ms();
    struct ad_buf b;
    ad_buf_init(&b, 4 * 1024 * 1024);
    AD_JSON_OPEN(&b, "tenant");
    if (tenant != NULL)
        ad_json_str(&b, tenant);
    else
        ad_json_null(&b);
    AD_JSON_KEY(&b, "now");
    ad_json_time(&b, now);
    AD_JSON_KEY(&b, "collectingSince");
    ad_json_time(&b, collecting_since);
    AD_JSON_KEY(&b, "counts");
    AD_BUF_LIT(&b, "[");
    for (size_t i = 0; i < l->n; i++) {
        const struct ad_job_count *k = &l->items[i];
        if (i != 0)
            AD_BUF_LIT(&b, ",");
        AD_JSON_OPEN(&b, "type");
        ad_json_str(&b, k->type != NULL ? k->type : "");
        AD_JSON_KEY(&b, "state");
        ad_json_str(&b, ad_status_name((enum ad_status)k->status));
        AD_JSON_KEY(&b, "count");
        ad_json_int(&b, k->n);
        AD_JSON_KEY(&b, "oldestCreatedAt");
        ad_json_time(&b, k->oldest);
        AD_BUF_LIT(&b, "}");
    }
    AD_BUF_LIT(&b, "]");
    AD_JSON_KEY(&b, "countsTruncated");
    ad_json_bool(&b, l->n >= AD_STATS_GROUPS);
    render_activity(&b, tenant, now);
    AD_BUF_LIT(&b, "}");
    if (ad_json_end(&b) != 0)
        ad_http_problem(r->req, AD_E_INTERNAL, "the statistics do not fit in an answer", NULL);
    else
        ad_http_json(r, 200, h2o_strdup(&r->req->pool, b.data, b.len).base, b.len);
    ad_buf_free(&b);
}

static void stats_answer(struct ad_api_read *rd, struct ad_request *r)
{
    struct stats_read *x = (struct stats_read *)rd;
    if (r != NULL && rd->op.err != AD_E_OK)
        ad_api_fail(r, rd->op.err);
    else if (r != NULL)
        stats_send(r, x->tenant, &x->l);
    if (rd->op.err == AD_E_OK)
        keep(x->tenant, &x->l);
    ad_job_count_list_free(&x->l);
    free(x->tenant);
}

int ad_api_stats(struct ad_request *r)
{
    ad_http_header(r->req, H2O_TOKEN_CACHE_CONTROL, "no-store");
    const struct counts_kept *k = kept_fresh(scope(r));
    if (k != NULL) {
        stats_send(r, k->tenant, &k->l);
        return 0;
    }
    struct stats_read *x = ad_calloc(1, sizeof(*x));
    x->tenant = ad_strdup_opt(scope(r));
    x->rd.op.apply = stats_apply;
    x->rd.answer = stats_answer;
    return ad_api_read(r, &x->rd);
}

/* ---- GET /v1/leases ---- */

struct leases_read {
    struct ad_api_read rd;
    struct ad_job_list l;
};

static ad_err leases_apply(struct ad_op *op, struct ad_conn *c)
{
    return ad_hub.store->ops->job_running(c, &((struct leases_read *)op)->l);
}

struct parked_out {
    struct ad_buf *b;
    int first;
};

static void append_parked(void *arg, const char *tenant, char *const *types, size_t ntypes, const char *worker,
                          int64_t waited_ms)
{
    struct parked_out *o = arg;
    if (!o->first)
        AD_BUF_LIT(o->b, ",");
    o->first = 0;
    AD_JSON_OPEN(o->b, "tenant");
    ad_json_str(o->b, tenant);
    AD_JSON_KEY(o->b, "worker");
    if (worker != NULL)
        ad_json_str(o->b, worker);
    else
        ad_json_null(o->b);
    AD_JSON_KEY(o->b, "types");
    AD_BUF_LIT(o->b, "[");
    for (size_t i = 0; i < ntypes; i++) {
        if (i != 0)
            AD_BUF_LIT(o->b, ",");
        ad_json_str(o->b, types[i]);
    }
    AD_BUF_LIT(o->b, "]");
    AD_JSON_KEY(o->b, "waitingMs");
    ad_json_int(o->b, waited_ms);
    AD_BUF_LIT(o->b, "}");
}

static void leases_send(struct ad_request *r, const struct ad_job_list *l)
{
    const char *tenant = scope(r);
    struct ad_buf b;
    ad_buf_init(&b, 4 * 1024 * 1024);
    AD_JSON_OPEN(&b, "now");
    ad_json_time(&b, ad_now_ms());
    AD_JSON_KEY(&b, "leases");
    AD_BUF_LIT(&b, "[");
    size_t shown = 0, total = 0;
    for (size_t i = 0; i < l->n; i++) {
        const struct ad_job *j = l->items[i];
        if (tenant != NULL && strcmp(j->tenant, tenant) != 0)
            continue;
        if (total++ >= AD_STATS_LEASES)
            continue;
        if (shown++ != 0)
            AD_BUF_LIT(&b, ",");
        AD_JSON_OPEN(&b, "jobId");
        ad_json_str(&b, j->id);
        AD_JSON_KEY(&b, "tenant");
        ad_json_str(&b, j->tenant);
        AD_JSON_KEY(&b, "type");
        ad_json_str(&b, j->type);
        AD_JSON_KEY(&b, "worker");
        if (j->worker != NULL)
            ad_json_str(&b, j->worker);
        else
            ad_json_null(&b);
        AD_JSON_KEY(&b, "attempt");
        ad_json_int(&b, j->attempt);
        AD_JSON_KEY(&b, "progress");
        if (j->progress >= 0)
            ad_json_int(&b, j->progress);
        else
            ad_json_null(&b);
        AD_JSON_KEY(&b, "startedAt");
        ad_json_time(&b, j->started_at);
        AD_JSON_KEY(&b, "leaseExpiresAt");
        ad_json_time(&b, j->lease_expires_at);
        /* Every report of the lease's holder (a heartbeat, a progress) is a change, and the lease began as one. */
        AD_JSON_KEY(&b, "lastHeartbeatAt");
        ad_json_time(&b, j->updated_at);
        AD_JSON_KEY(&b, "cancelRequested");
        ad_json_bool(&b, j->cancel_requested);
        AD_BUF_LIT(&b, "}");
    }
    AD_BUF_LIT(&b, "]");
    AD_JSON_KEY(&b, "leasesTotal");
    ad_json_int(&b, (int64_t)total);
    AD_JSON_KEY(&b, "parked");
    AD_BUF_LIT(&b, "[");
    struct parked_out o = {&b, 1};
    ad_api_leases_parked(tenant, append_parked, &o);
    AD_BUF_LIT(&b, "]}");
    if (ad_json_end(&b) != 0)
        ad_http_problem(r->req, AD_E_INTERNAL, "the leases do not fit in an answer", NULL);
    else
        ad_http_json(r, 200, h2o_strdup(&r->req->pool, b.data, b.len).base, b.len);
    ad_buf_free(&b);
}

static void leases_answer(struct ad_api_read *rd, struct ad_request *r)
{
    struct leases_read *x = (struct leases_read *)rd;
    if (r != NULL && rd->op.err != AD_E_OK)
        ad_api_fail(r, rd->op.err);
    else if (r != NULL)
        leases_send(r, &x->l);
    if (rd->op.err == AD_E_OK)
        ad_job_list_free(&x->l);
}

int ad_api_lease_list(struct ad_request *r)
{
    struct leases_read *x = ad_calloc(1, sizeof(*x));
    x->rd.op.apply = leases_apply;
    x->rd.answer = leases_answer;
    ad_http_header(r->req, H2O_TOKEN_CACHE_CONTROL, "no-store");
    return ad_api_read(r, &x->rd);
}
