/*
 * api_events.c - Server-Sent Events: one job's events (GET /v1/jobs/{id}/events), a tenant's change feed as a
 * stream (GET /v1/events), signed URLs for browsers (POST /v1/jobs/{id}:sign and their check), and CORS.
 *
 * A job's stream replays the job's event log (store events_after) from Last-Event-ID, then follows the job:
 * it waits on the job's cache entry and reads what the log gained each time the entry changes. It reads the
 * log a page at a time and only when its backlog is empty, so a slow client slows its own stream and nothing
 * else. A handful of streams per job is the expected load.
 *
 * /v1/events streams may be many (dashboards, fan-out), so a change is never read back per stream: the
 * published cache entry is framed once and appended to every matching stream, whose backlog cap cuts off a
 * consumer that cannot keep up (sse.h). Its ids are job seqs, the cursor of /v1/jobs/changes: resuming
 * replays the change feed from that cursor, page by page as the client drains, then goes live.
 */
#include "api/api_int.h"
#include "job/event.h"
#include "http/sse.h"
#include "api/valet.h"
#include "common/json.h"

#include <stdlib.h>
#include <string.h>

#define AD_EVENTS_PAGE 100
#define AD_SIGN_TTL_DEFAULT 3600
#define AD_SIGN_TTL_MAX (7 * 86400)

static const struct ad_sse_conf *conf;

/* ---- streams per tenant ---- */

/* One per tenant ever streamed to, never freed: tenants are few (they come from the configured keys). */
struct tenant_count {
    struct tenant_count *next;
    int n;
    char tenant[];
};
static struct tenant_count *counts;

static struct tenant_count *tenant_count(const char *tenant)
{
    struct tenant_count *tc = counts;
    while (tc != NULL && strcmp(tc->tenant, tenant) != 0)
        tc = tc->next;
    if (tc == NULL) {
        size_t len = strlen(tenant);
        tc = ad_malloc(sizeof(*tc) + len + 1);
        memcpy(tc->tenant, tenant, len + 1);
        tc->n = 0;
        tc->next = counts;
        counts = tc;
    }
    return tc;
}

/* Turn a new stream away (200 with a long retry:) when the daemon stops or a stream cap is reached. */
static int overloaded(const char *tenant)
{
    return ad_hub.shutting_down || ad_sse_count() >= (size_t)conf->max_streams ||
           tenant_count(tenant)->n >= conf->max_streams_per_tenant;
}

/* ---- shared ---- */

int ad_api_events_init(char *err, size_t errlen)
{
    conf = &ad_hub.cfg->sse;
    ad_sse_configure(conf->heartbeat_ms, conf->backlog_bytes, conf->retry_ms, conf->io_uring);
    return ad_valet_init(ad_hub.cfg->signing_key, ad_hub.cfg->data_dir, err, errlen);
}

void ad_api_events_shutdown(void)
{
    ad_sse_close_all(conf != NULL ? conf->retry_ms : 2000);
}

/* The live job named by the request, given what ad_api_lookup found, or NULL after answering 404 or 410. */
static struct ad_entry *live_job(struct ad_request *r, ad_err err, struct ad_entry *e)
{
    if (err != AD_E_OK && err != AD_E_NOT_FOUND) {
        ad_api_fail(r, err);
        return NULL;
    }
    if (e != NULL && ad_api_job_live(e->job))
        return e;
    if (e != NULL && ad_now_ms() < e->job->expires_at + ad_hub.cfg->tombstone_ms) {
        ad_http_problemf(r->req, AD_E_GONE, "job %s expired", r->id);
        return NULL;
    }
    ad_http_problemf(r->req, AD_E_NOT_FOUND, "no job %s", r->id);
    return NULL;
}

/* Where a stream resumes: Last-Event-ID (what EventSource sends when it reconnects), else ?since= (a change
 * feed cursor), else -1. Returns -1 after answering 400 when the value is not a cursor. */
static int resume_point(struct ad_request *r, int64_t *out)
{
    const char *v = ad_http_get_str(r->req, "last-event-id");
    const char *name = "Last-Event-ID";
    if (v == NULL || v[0] == '\0') {
        v = ad_http_query(r, "since");
        name = "since";
    }
    *out = -1;
    if (v == NULL)
        return 0;
    long long n;
    if (ad_parse_int(v, strlen(v), 0, INT64_MAX, &n) != 0) {
        ad_http_problemf(r->req, AD_E_INVALID_REQUEST, "%s must be an event id this server sent", name);
        return -1;
    }
    *out = n;
    return 0;
}

/* ---- GET /v1/jobs/{id}/events ---- */

struct job_stream {
    struct ad_sse sse;
    struct ad_waiter w;
    struct tenant_count *tc;
    const char *tenant, *id; /* the stream's copies (ad_sse_strdup) */
    int64_t last;            /* id of the last event queued */
    struct log_read *rd;     /* the read of the log in flight, or NULL */
    int again;               /* woken while reading: pump again once it returns */
};

/* A page of a job's log being read (job_pump). */
struct log_read {
    struct ad_op op;
    struct job_stream *js; /* NULL once the stream closed */
    char *id;
    int64_t after;
    struct ad_event_list l;
};

static void job_send_done(struct job_stream *js, int64_t id, const struct ad_entry *e)
{
    ad_sse_event(&js->sse, id, "done", e->body, e->len);
    ad_sse_close(&js->sse, 0);
}

/* A status event made from the job, which its log does not hold: view is the job as the event shows it
 * (ad_event_created_view, ad_event_started_view). */
static void job_send_view(struct job_stream *js, int64_t id, const struct ad_job *view)
{
    struct ad_buf b;
    ad_buf_init(&b, SIZE_MAX);
    ad_event_render_brief(view, &b);
    if (ad_sse_event(&js->sse, id, "status", b.data, b.len) == 0)
        js->last = id;
    ad_buf_free(&b);
}

static void job_send_created(struct job_stream *js, const struct ad_job *j)
{
    struct ad_job v = ad_event_created_view(j);
    job_send_view(js, j->created_seq, &v);
}

static void job_send_started(struct job_stream *js, const struct ad_job *j)
{
    struct ad_job v = ad_event_started_view(j);
    job_send_view(js, j->started_seq, &v);
}

/* Queue the events of the page l read after js->last, with those made from the job in their places: the first
 * (created_seq), the running event of the last lease (started_seq) and done. */
static void job_send_page(struct job_stream *js, const struct ad_entry *e, const struct ad_event_list *l)
{
    const struct ad_job *j = e->job;
    int done = 0, ahead = 0;
    for (size_t i = 0; i < l->n && !done && !js->sse.closing; i++) {
        const struct ad_event *ev = &l->items[i];
        /* The log can be ahead of the cached job (a commit is read before its publish): such events wait for the
         * publish, which wakes the stream again. Sent now, they could pass the running event of a lease the
         * cached job does not know yet. */
        if (ev->seq > j->seq) {
            ahead = 1;
            break;
        }
        if (ev->seq <= js->last)
            continue; /* sent while the page was read */
        if (j->started_seq > js->last && j->started_seq < ev->seq) {
            job_send_started(js, j);
            if (js->sse.closing)
                break;
        }
        if (strcmp(ev->kind, "done") == 0) {
            /* A log written before done events were made from the job ends with one. It carries the job as the
             * cache has it. */
            if (ad_status_terminal(j->status))
                job_send_done(js, ev->seq, e);
            done = 1;
        } else if (ad_sse_event(&js->sse, ev->seq, ev->kind, ev->data, ev->data != NULL ? strlen(ev->data) : 0) == 0) {
            js->last = ev->seq;
        }
    }
    /* done is not in the log: once the log is read to its end, a finished job's stream ends with done, made from
     * the job under its last seq (and a job finished before it had a log ends the same way). */
    if (!done && !ahead && l->n < AD_EVENTS_PAGE && !js->sse.closing) {
        if (j->started_seq > js->last)
            job_send_started(js, j);
        if (!js->sse.closing && ad_status_terminal(j->status) && js->last < j->seq)
            job_send_done(js, j->seq, e);
    }
}

static ad_err log_apply(struct ad_op *op, struct ad_conn *c)
{
    struct log_read *x = (struct log_read *)op;
    return ad_hub.store->ops->events_after(c, x->id, x->after, AD_EVENTS_PAGE, &x->l);
}

static void log_destroy(struct ad_op *op)
{
    struct log_read *x = (struct log_read *)op;
    if (op->err == AD_E_OK)
        ad_event_list_free(&x->l);
    free(x->id);
    free(x);
}

static void job_pump(struct job_stream *js, const struct ad_entry *e);
static struct ad_entry *job_entry(struct job_stream *js);

static void log_done(struct ad_op *op)
{
    struct log_read *x = (struct log_read *)op;
    struct job_stream *js = x->js;
    if (js != NULL) {
        js->rd = NULL;
        /* The job as the cache has it now: it may have moved on (or left) while the page was read. */
        struct ad_entry *e = job_entry(js);
        if (op->err != AD_E_OK || e == NULL) {
            ad_sse_close(&js->sse, conf->retry_ms); /* the reconnect reads it again */
        } else {
            job_send_page(js, e, &x->l);
            if (js->again) {
                js->again = 0;
                job_pump(js, e);
            }
        }
    }
    ad_op_free(op);
}

/* Queue the log's next page unless the client still has one to take or a read of it is in flight (which pumps
 * again when it returns). */
static void job_pump(struct job_stream *js, const struct ad_entry *e)
{
    if (js->rd != NULL) {
        js->again = 1;
        return;
    }
    if (js->sse.closing || ad_sse_backlog(&js->sse) != 0)
        return;
    const struct ad_job *j = e->job;
    if (js->last < j->created_seq) {
        job_send_created(js, j);
        if (js->sse.closing || ad_sse_backlog(&js->sse) != 0)
            return;
    }
    struct log_read *x = ad_calloc(1, sizeof(*x));
    x->op.apply = log_apply;
    x->op.done = log_done;
    x->op.destroy = log_destroy;
    x->js = js;
    x->id = ad_strdup(js->id);
    x->after = js->last;
    js->rd = x;
    js->again = 0;
    ad_hub_read(&x->op); /* on SQLite log_done has run when it returns */
}

/* The stream's job from the cache. Read back into it after an eviction only where reads cannot stall the loop;
 * elsewhere NULL, and the stream closes with a retry hint: the reconnect reads the job off the loop. */
static struct ad_entry *job_entry(struct job_stream *js)
{
    struct ad_entry *e = ad_cache_get(js->id);
    ad_err err;
    if (e == NULL && !ad_hub.store->ops->reads_may_block)
        ad_hub_lookup(js->tenant, js->id, &err, &e, NULL, NULL);
    return e;
}

static void job_wake(struct ad_waiter *w, struct ad_entry *e)
{
    struct job_stream *js = H2O_STRUCT_FROM_MEMBER(struct job_stream, w, w);
    if (e == NULL)
        e = job_entry(js);
    if (e == NULL) {
        ad_sse_close(&js->sse, conf->retry_ms);
        return;
    }
    ad_cache_watch(e, &js->w);
    job_pump(js, e);
}

static void job_drain(struct ad_sse *s)
{
    struct job_stream *js = (struct job_stream *)s;
    struct ad_entry *e = job_entry(js);
    if (e != NULL)
        job_pump(js, e);
}

static void job_close(struct ad_sse *s)
{
    struct job_stream *js = (struct job_stream *)s;
    ad_cache_unwatch(&js->w);
    js->tc->n--;
    if (js->rd != NULL)
        js->rd->js = NULL;
}

static const struct ad_sse_callbacks job_callbacks = {job_close, job_drain};

static int job_events_found(struct ad_request *r, ad_err err, struct ad_entry *e, void *arg)
{
    e = live_job(r, err, e);
    int64_t last;
    if (e == NULL || resume_point(r, &last) != 0)
        return 0;
    /* The client saw done (or a later id): the stream has nothing more to say, and 204 tells EventSource
     * to stop reconnecting. */
    if (ad_status_terminal(e->job->status) && last >= e->job->seq)
        return ad_http_empty(r->req, 204);
    if (overloaded(r->tenant))
        return ad_sse_refuse(r->req, conf->overload_retry_ms);
    struct job_stream *js = ad_sse_start(r->req, sizeof(*js), &job_callbacks, conf->retry_ms);
    js->tc = tenant_count(r->tenant);
    js->tc->n++;
    js->tenant = ad_sse_strdup(&js->sse, r->tenant);
    js->id = ad_sse_strdup(&js->sse, r->id);
    js->last = last > 0 ? last : 0;
    js->w.wake = job_wake;
    ad_cache_watch(e, &js->w);
    job_pump(js, e);
    return 0;
}

int ad_api_job_events(struct ad_request *r)
{
    return ad_api_lookup(r, r->id, job_events_found, NULL);
}

/* ---- GET /v1/events ---- */

struct feed_stream {
    struct ad_sse sse;
    h2o_linklist_t link; /* in feeds */
    struct tenant_count *tc;
    const char *tenant, *type; /* the stream's copies (ad_sse_strdup); type NULL = any */
    int has_status;
    enum ad_status status;
    int64_t last;         /* seq of the last change queued or skipped */
    int replaying;        /* still catching up from the change feed: live changes are read back there */
    struct feed_read *rd; /* the read in flight, or NULL */
};

/* A page of the change feed being read for a stream. */
struct feed_read {
    struct ad_op op;
    struct feed_stream *fs; /* NULL once the stream closed */
    char *tenant;
    int64_t after;
    struct ad_job_list l;
};

static h2o_linklist_t feeds = {&feeds, &feeds};

static int feed_match(const struct feed_stream *fs, const struct ad_job *j)
{
    return strcmp(fs->tenant, j->tenant) == 0 && (fs->type == NULL || strcmp(fs->type, j->type) == 0) &&
           (!fs->has_status || fs->status == j->status) && ad_api_job_live(j);
}

static ad_err feed_apply(struct ad_op *op, struct ad_conn *c)
{
    struct feed_read *x = (struct feed_read *)op;
    return ad_hub.store->ops->job_changes(c, x->tenant, x->after, AD_EVENTS_PAGE, &x->l);
}

static void feed_destroy(struct ad_op *op)
{
    struct feed_read *x = (struct feed_read *)op;
    ad_job_list_free(&x->l);
    free(x->tenant);
    free(x);
}

static void feed_replay(struct feed_stream *fs);
/* A read of the feed is running inline (SQLite): its done leaves reading on to feed_replay's loop, which would
 * otherwise recurse once per page. */
static int feed_inline;

/* Queue a page of the change feed read after fs->last, and read on while the client takes them. */
static void feed_read_done(struct ad_op *op)
{
    struct feed_read *x = (struct feed_read *)op;
    struct feed_stream *fs = x->fs;
    if (fs == NULL) {
        ad_op_free(op);
        return;
    }
    fs->rd = NULL;
    if (op->err != AD_E_OK) {
        ad_sse_close(&fs->sse, conf->retry_ms);
    } else {
        struct ad_buf b;
        ad_buf_init(&b, SIZE_MAX);
        for (size_t i = 0; i < x->l.n && !fs->sse.closing; i++) {
            const struct ad_job *j = x->l.items[i];
            fs->last = j->seq;
            if (!feed_match(fs, j))
                continue;
            b.len = 0;
            ad_job_render(j, &b);
            ad_sse_event(&fs->sse, j->seq, "job", b.data, b.len);
        }
        ad_buf_free(&b);
        if (x->l.n < AD_EVENTS_PAGE)
            fs->replaying = 0;
        ad_op_free(op);
        if (!feed_inline)
            feed_replay(fs); /* inline, feed_replay's loop reads on */
        return;
    }
    ad_op_free(op);
}

static void feed_read(struct feed_stream *fs, int64_t after)
{
    struct feed_read *x = ad_calloc(1, sizeof(*x));
    x->op.apply = feed_apply;
    x->op.done = feed_read_done;
    x->op.destroy = feed_destroy;
    x->fs = fs;
    x->tenant = ad_strdup(fs->tenant);
    x->after = after;
    fs->rd = x;
    feed_inline++;
    ad_hub_read(&x->op); /* on SQLite feed_read_done has run when it returns */
    feed_inline--;
}

/* Queue the change feed's next page(s) until something was queued or the feed is caught up: one read at a time,
 * each queueing its page and reading on from its done. */
static void feed_replay(struct feed_stream *fs)
{
    while (fs->replaying && fs->rd == NULL && !fs->sse.closing && ad_sse_backlog(&fs->sse) == 0)
        feed_read(fs, fs->last);
}

static void feed_drain(struct ad_sse *s)
{
    feed_replay((struct feed_stream *)s);
}

static void feed_close(struct ad_sse *s)
{
    struct feed_stream *fs = (struct feed_stream *)s;
    h2o_linklist_unlink(&fs->link);
    fs->tc->n--;
    if (fs->rd != NULL)
        fs->rd->fs = NULL;
}

static const struct ad_sse_callbacks feed_callbacks = {feed_close, feed_drain};

void ad_api_events_notify(const struct ad_job *j, const char *body, size_t len)
{
    static struct ad_sse **match; /* the streams that want j; reused, grows to the most streams ever open */
    static size_t cap;
    size_t n = 0;
    for (h2o_linklist_t *node = feeds.next; node != &feeds; node = node->next) {
        struct feed_stream *fs = H2O_STRUCT_FROM_MEMBER(struct feed_stream, link, node);
        if (fs->replaying || j->seq <= fs->last || !feed_match(fs, j))
            continue;
        if (n == cap) {
            cap = cap != 0 ? 2 * cap : 64;
            match = ad_realloc(match, cap * sizeof(*match));
        }
        fs->last = j->seq;
        match[n++] = &fs->sse;
    }
    if (n == 0)
        return;
    /* Framed once and shared by every stream. */
    struct ad_buf b;
    ad_buf_init(&b, SIZE_MAX);
    ad_sse_frame(&b, j->seq, "job", body, len);
    struct ad_sse_chunk *frame = ad_sse_chunk_new(b.data, b.len);
    ad_buf_free(&b);
    ad_sse_write_many(match, n, frame);
    ad_sse_chunk_release(frame);
}

int ad_api_events(struct ad_request *r)
{
    const char *status = ad_http_query(r, "status");
    enum ad_status st = AD_QUEUED;
    if (status != NULL && ad_status_parse(status, &st) != 0)
        return ad_http_problemf(r->req, AD_E_INVALID_REQUEST, "unknown status %.64s", status);
    int64_t last;
    if (resume_point(r, &last) != 0)
        return 0;
    if (overloaded(r->tenant))
        return ad_sse_refuse(r->req, conf->overload_retry_ms);
    struct feed_stream *fs = ad_sse_start(r->req, sizeof(*fs), &feed_callbacks, conf->retry_ms);
    fs->tc = tenant_count(r->tenant);
    fs->tc->n++;
    fs->tenant = ad_sse_strdup(&fs->sse, r->tenant);
    fs->type = ad_sse_strdup(&fs->sse, ad_http_query(r, "type"));
    fs->has_status = status != NULL;
    fs->status = st;
    h2o_linklist_insert(&feeds, &fs->link);
    if (last >= 0) {
        fs->last = last;
        fs->replaying = 1;
        feed_replay(fs);
    } else {
        /* Live from now: after the newest change the streams were handed. Not the store's newest seq: in a cluster
         * a change committed there reaches the streams later, from the pump (cluster.c), and a stream placed
         * past it would never send it, though its client had the 200 before it submitted that job. */
        fs->last = ad_hub_event_seq();
    }
    return 0;
}

/* ---- signed URLs ---- */

ad_err ad_api_auth_signed(struct ad_request *r)
{
    const char *sig = ad_http_query(r, "sig"), *exp = ad_http_query(r, "exp");
    long long x;
    if (sig == NULL || exp == NULL || r->id == NULL || ad_parse_int(exp, strlen(exp), 0, INT64_MAX / 1000, &x) != 0)
        return AD_E_UNAUTHORIZED;
    if (!ad_valet_verify(r->id, x, sig, strlen(sig)) || x * 1000 <= ad_now_ms())
        return AD_E_UNAUTHORIZED;
    /* The signature names the job; the job names the tenant. Every signed route looks the job up first
     * (ad_api_lookup), which sets the tenant from the job it finds, reading the store off the loop on a miss. */
    struct ad_entry *e = ad_cache_get(r->id);
    r->tenant = e != NULL ? h2o_strdup(&r->req->pool, e->job->tenant, SIZE_MAX).base : NULL;
    r->roles = AD_API_SIGNED;
    return AD_E_OK;
}

static int sign_found(struct ad_request *r, ad_err err, struct ad_entry *e, void *arg)
{
    e = live_job(r, err, e);
    if (e == NULL)
        return 0;
    long long ttl = AD_SIGN_TTL_DEFAULT;
    if (r->req->entity.len != 0) {
        json_t *body = ad_api_body(r);
        if (body == NULL)
            return 0;
        json_t *t = json_object_get(body, "ttlSeconds");
        int bad = !json_is_object(body) || (t != NULL && (!json_is_integer(t) || json_integer_value(t) < 1 ||
                                                          json_integer_value(t) > AD_SIGN_TTL_MAX));
        if (t != NULL && !bad)
            ttl = json_integer_value(t);
        json_decref(body);
        if (bad) {
            struct ad_verr v;
            ad_verr_init(&v);
            ad_verr_add(&v, "/ttlSeconds", "ttlSeconds must be an integer from 1 to 604800");
            return ad_verr_send(&v, r);
        }
    }
    /* Rounded up: the URL lives at least ttl seconds, never a fraction of the first one less. */
    int64_t exp = (ad_now_ms() + 999) / 1000 + ttl;
    char sig[AD_VALET_SIG_LEN + 1];
    ad_valet_sign(r->id, exp, sig);
    struct ad_buf b;
    ad_buf_init(&b, SIZE_MAX);
    /* The public URL is the operator's text (a '"' or a byte that is not UTF-8 is not refused there), so the
     * URLs go through the JSON string writer. */
    static const char *const tails[] = {"", "/events", "/result"};
    char *url[3];
    for (size_t i = 0; i < 3; i++)
        url[i] =
            ad_asprintf("%s/v1/jobs/%s%s?exp=%lld&sig=%s", ad_hub.public_url, r->id, tails[i], (long long)exp, sig);
    AD_JSON_OPEN(&b, "url");
    ad_json_str(&b, url[0]);
    AD_JSON_KEY(&b, "events");
    ad_json_str(&b, url[1]);
    AD_JSON_KEY(&b, "result");
    ad_json_str(&b, url[2]);
    for (size_t i = 0; i < 3; i++)
        free(url[i]);
    AD_JSON_KEY(&b, "expiresAt");
    ad_json_time(&b, exp * 1000);
    AD_BUF_LIT(&b, "}");
    char *body = h2o_mem_alloc_pool(&r->req->pool, b.len);
    memcpy(body, b.data, b.len);
    size_t len = b.len;
    ad_buf_free(&b);
    ad_http_header(r->req, H2O_TOKEN_CACHE_CONTROL, "no-store");
    return ad_http_json(r, 200, body, len);
}

int ad_api_sign(struct ad_request *r)
{
    return ad_api_lookup(r, r->id, sign_found, NULL);
}

/* ---- CORS ---- */

int ad_api_cors(struct ad_request *r)
{
    h2o_req_t *req = r->req;
    if (h2o_find_header_by_str(&req->headers, H2O_STRLIT("origin"), -1) < 0)
        return 0;
    /* Any origin: credentials are bearer keys or signed URLs, never cookies, so a page gains nothing it was
     * not given. */
    ad_http_header(req, H2O_TOKEN_ACCESS_CONTROL_ALLOW_ORIGIN, "*");
    if (h2o_memis(req->method.base, req->method.len, H2O_STRLIT("OPTIONS")) &&
        h2o_find_header_by_str(&req->headers, H2O_STRLIT("access-control-request-method"), -1) >= 0) {
        ad_http_header_str(req, "access-control-allow-methods", "GET, POST, DELETE");
        ad_http_header_str(req, "access-control-allow-headers",
                           "Authorization, Content-Type, Idempotency-Key, If-None-Match, Last-Event-ID, Prefer");
        ad_http_header_str(req, "access-control-max-age", "86400");
        ad_http_empty(req, 204);
        return 1;
    }
    ad_http_header_str(req, "access-control-expose-headers",
                       "ETag, Location, Operation-Location, Content-Location, Link, Retry-After, Expires, "
                       "Preference-Applied, Idempotent-Replayed, WWW-Authenticate, RateLimit, RateLimit-Policy");
    return 0;
}
