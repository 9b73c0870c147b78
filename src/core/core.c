/*
 * core.c - job operations applied by the writer: submit, cancel, retry, lease, report, expire, sweep.
 *
 * Every status change goes through ad_job_transition(). Timestamps come from the op (taken on the event
 * loop when the request arrived), so a batch applies one consistent clock per request. Every job an operation
 * answers with once it succeeded is named to the writer (ad_op_changed), which publishes it after the commit.
 */
#include "core/core.h"
#include "core/batches.h"
#include "core/deps.h"
#include "core/queues.h"
#include "core/tracer.h"
#include "job/event.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

static const struct ad_config *config;
static const struct ad_store_ops *st;
static const struct ad_core_webhooks *webhooks;

void ad_core_init(const struct ad_config *cfg, struct ad_store *store)
{
    config = cfg;
    st = store->ops;
    ad_queues_init(cfg, store->ops);
}

const struct ad_store_ops *ad_core_store_ops(void)
{
    return st;
}

void ad_core_set_webhooks(const struct ad_core_webhooks *w)
{
    webhooks = w;
}

/* A job's callback is signed with the tenant's callback secret: only one that someone was shown. */
static ad_err callback_ready(struct ad_conn *c, const char *tenant)
{
    return webhooks != NULL ? webhooks->callback_ready(c, tenant) : AD_E_OK;
}

void ad_core_job_prepare(struct ad_job *job, const char *tenant, const struct ad_route *route, int64_t now)
{
    const struct ad_type_conf *tc = ad_config_type(config, job->type);
    job->id = ad_new_id("job_");
    job->tenant = ad_strdup(tenant);
    if (job->payload == NULL)
        job->payload = ad_strdup("{}");
    if (job->max_attempts == 0)
        job->max_attempts = tc != NULL && tc->max_attempts > 0 ? tc->max_attempts : config->default_max_attempts;
    if (job->timeout_seconds == 0 && tc != NULL)
        job->timeout_seconds = tc->timeout_seconds;
    job->created_at = job->updated_at = now;
    if (route == NULL)
        return;
    job->on_complete_redirect = route->on_complete_redirect;
    if (route->resource != NULL) {
        const char *at = strstr(route->resource, "{id}");
        job->resource = at != NULL
                            ? ad_asprintf("%.*s%s%s", (int)(at - route->resource), route->resource, job->id, at + 4)
                            : ad_strdup(route->resource);
    }
}

int64_t ad_core_retention_ms(const char *type, enum ad_status s)
{
    const struct ad_type_conf *t = config != NULL ? ad_config_type(config, type) : NULL;
    const struct ad_retention *r = t != NULL ? &t->retention : &config->retention;
    switch (s) {
    case AD_SUCCEEDED:
        return r->succeeded_ms;
    case AD_PARTIAL:
        return r->partial_ms;
    case AD_CANCELLED:
        return r->cancelled_ms;
    default:
        return r->failed_ms;
    }
}

int64_t ad_core_backoff_ms(int attempt)
{
    int64_t base = config != NULL ? config->retry_backoff_ms : 1000;
    int shift = attempt > 1 ? attempt - 1 : 0;
    if (shift > 20)
        shift = 20;
    int64_t d = base << shift;
    if (d > 3600 * 1000)
        d = 3600 * 1000;
    uint32_t r;
    ad_random_bytes((uint8_t *)&r, sizeof(r));
    /* Equal jitter: half fixed, half random, so retries of many jobs spread out but never come early. */
    return d / 2 + (int64_t)(r % (uint32_t)(d / 2 + 1));
}

void ad_fingerprint(const char *method, const char *path, const char *body, char out[65])
{
    struct ad_buf b;
    ad_buf_init(&b, SIZE_MAX);
    ad_buf_append(&b, method, strlen(method) + 1);
    ad_buf_append(&b, path, strlen(path) + 1);
    ad_buf_append(&b, body, strlen(body));
    uint8_t md[AD_SHA256_LEN];
    ad_sha256(b.data, b.len, md);
    ad_buf_free(&b);
    ad_hex_encode(md, sizeof(md), out);
}

/* Move job to its terminal state's bookkeeping: finish time, expiry, no lease. */
static void finish(struct ad_job *j, enum ad_status to, int64_t now)
{
    j->status = to;
    j->finished_at = now;
    j->expires_at = now + ad_core_retention_ms(j->type, to);
    j->lease_expires_at = 0;
}

/* lease_id stays after the lease ends (not live: the job is no longer running), so that a worker's
 * repeated final report under it can be recognised and answered again (see report_replay). */
static void requeue(struct ad_job *j, int64_t run_at)
{
    j->status = AD_QUEUED;
    j->run_at = run_at;
    j->lease_expires_at = 0;
}

/* Apply a transition's outcome to the row: status-specific fields, then the change time. */
static void apply_transition(struct ad_job *j, const struct ad_transition *t, int64_t now)
{
    j->cancel_requested = t->cancel_requested;
    if (t->to != j->status) {
        if (ad_status_terminal(t->to))
            finish(j, t->to, now);
        else if (t->to == AD_QUEUED)
            requeue(j, 0);
        else
            j->status = t->to;
    }
    j->updated_at = now;
}

/* A lease granted or extended at now for seconds, never past the job's timeoutSeconds from the start of
 * the attempt: a job that runs too long loses its lease and is retried or failed like a crashed one. */
static int64_t lease_until(const struct ad_job *j, int64_t now, int64_t ms)
{
    int64_t until = now + ms;
    if (j->timeout_seconds > 0 && until > j->started_at + (int64_t)j->timeout_seconds * 1000)
        until = j->started_at + (int64_t)j->timeout_seconds * 1000;
    return until;
}

static int same_lease(const struct ad_job *j, const char *lease_id)
{
    return j->lease_id != NULL && lease_id != NULL &&
           ad_ct_equal(j->lease_id, strlen(j->lease_id), lease_id, strlen(lease_id));
}

static int lease_live(const struct ad_job *j, const char *lease_id, int64_t now)
{
    return j->status == AD_RUNNING && same_lease(j, lease_id) && j->lease_expires_at > now;
}

/* How an attempt ended, for its history row. */
static const char *attempt_outcome(enum ad_job_event ev, enum ad_status to)
{
    switch (ev) {
    case AD_EV_LEASE_EXPIRED:
        return "expired";
    case AD_EV_RELEASE:
        return to == AD_CANCELLED ? "cancelled" : "released";
    case AD_EV_FAIL:
        return to == AD_QUEUED ? "retrying" : "failed";
    default:
        return ad_status_name(to);
    }
}

/* A worker's final report repeated under the lease that already ended the job in the same way (its first
 * answer was lost): answered again with the job as it is, changing nothing. */
static int report_replay(struct ad_conn *c, const struct ad_job *j, const char *lease_id, enum ad_job_event ev)
{
    if (j->status == AD_RUNNING || !same_lease(j, lease_id))
        return 0;
    struct ad_attempt_list l;
    if (st->attempt_list(c, j->id, &l) != AD_E_OK)
        return 0;
    ad_attempt_own(&l, j);
    const char *o = l.n != 0 ? l.items[l.n - 1].outcome : NULL;
    int same = 0;
    if (o != NULL) {
        switch (ev) {
        case AD_EV_COMPLETE:
            same = strcmp(o, "succeeded") == 0;
            break;
        case AD_EV_COMPLETE_PARTIAL:
            same = strcmp(o, "partialSuccess") == 0;
            break;
        case AD_EV_FAIL:
            /* A retryable fail ends the job failed only when it had no attempt left or a cancel was asked for; a
             * job failed otherwise was failed with retryable false, which this report would not have done. */
            same = strcmp(o, "retrying") == 0 ||
                   (strcmp(o, "failed") == 0 && (j->attempt >= j->max_attempts || j->cancel_requested));
            break;
        case AD_EV_FAIL_FINAL:
            same = strcmp(o, "failed") == 0;
            break;
        case AD_EV_RELEASE:
            same = strcmp(o, "released") == 0;
            break;
        case AD_EV_CANCEL_ACK:
            same = strcmp(o, "cancelled") == 0;
            break;
        default:
            break;
        }
    }
    ad_attempt_list_free(&l);
    return same;
}

/* Whether two JSON texts (compact, as reports are stored) are the same document: another order of an object's
 * members is the same, so that a worker that builds its report again need not build it byte for byte. NULL is
 * taken as null (a :complete without result). Parsed only when the texts differ, on a repeated report alone. */
static int same_json(const char *a, const char *b)
{
    a = a != NULL ? a : "null";
    b = b != NULL ? b : "null";
    if (strcmp(a, b) == 0)
        return 1;
    json_t *x = json_loads(a, JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);
    json_t *y = json_loads(b, JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);
    int same = x != NULL && y != NULL && json_equal(x, y);
    json_decref(x);
    json_decref(y);
    return same;
}

/* Whether x says what the report that ended j's lease said (report_replay having matched its kind): the same
 * result and resultLocation, or the same problem. A report that says something else is not its repeat: the
 * first one stands, and a worker must not be told that this one was stored. */
static int report_same(const struct ad_job *j, const struct ad_report_op *x)
{
    switch (x->event) {
    case AD_EV_COMPLETE:
    case AD_EV_COMPLETE_PARTIAL:
        return same_json(j->result, x->result) &&
               (j->result_location != NULL
                    ? x->result_location != NULL && strcmp(j->result_location, x->result_location) == 0
                    : x->result_location == NULL) &&
               (j->artifact != NULL ? x->artifact != NULL && strcmp(j->artifact, x->artifact) == 0
                                    : x->artifact == NULL);
    case AD_EV_FAIL:
    case AD_EV_FAIL_FINAL:
        return same_json(j->error, x->error);
    default:
        return 1;
    }
}

/* Append to shown's event log a status or progress event under seq, showing shown. */
static ad_err append_event(struct ad_conn *c, const struct ad_job *shown, int64_t seq, const char *kind)
{
    struct ad_buf b;
    ad_buf_init(&b, SIZE_MAX);
    ad_event_render_brief(shown, &b);
    ad_buf_append(&b, "", 1);
    ad_err e = st->event_append(c, shown->id, seq, kind, b.data);
    ad_buf_free(&b);
    return e;
}

/* After writing a change of j (write = the insert's or update's outcome): append the event it makes to the job's
 * event log (event.h) in the same transaction, with the job's new seq as its id. Three kinds of event are not
 * stored, being made from the job (api_events.c): the job's creation as queued, under the seq of its insert
 * (created_seq); the running event of the lease that started its attempt, under that lease's seq (started_seq,
 * see lease_job); and done, which carries the finished job itself under its last seq. Always releases prev. */
static ad_err log_event(struct ad_conn *c, const struct ad_job *j, struct ad_event_prev *prev, ad_err write)
{
    /* The change's webhook deliveries go into the outbox in the same transaction (ad_core_set_webhooks). */
    if (write == AD_E_OK && webhooks != NULL)
        write = webhooks->outbox(c, prev->status, prev->progress, j);
    /* A batch's counts move with its jobs, in the same transaction (core/batches.h). */
    if (write == AD_E_OK && j->batch_id != NULL && prev->status != AD_STATUS__COUNT && prev->status != j->status)
        write = ad_batch_moved(c, j, prev->status);
    enum ad_event_kind k = ad_event_kind_of(prev, j);
    int creation = prev->status == AD_STATUS__COUNT;
    ad_event_prev_free(prev);
    if (write != AD_E_OK || k == AD_EVK_NONE || k == AD_EVK_DONE || creation || j->started_seq == j->seq)
        return write;
    return append_event(c, j, j->seq, ad_event_name(k));
}

ad_err ad_core_job_write(struct ad_conn *c, struct ad_job *j, struct ad_event_prev *prev)
{
    return log_event(c, j, prev, st->job_update(c, j));
}

ad_err ad_core_callback_ready(struct ad_conn *c, const char *tenant)
{
    return callback_ready(c, tenant);
}

ad_err ad_core_batch_outbox(struct ad_conn *c, const struct ad_batch *b, enum ad_status s)
{
    return webhooks != NULL && webhooks->batch_outbox != NULL ? webhooks->batch_outbox(c, b, s) : AD_E_OK;
}

ad_err ad_core_job_insert(struct ad_conn *c, struct ad_job *j)
{
    struct ad_event_prev prev;
    ad_event_prev_take(&prev, NULL);
    return log_event(c, j, &prev, st->job_insert(c, j));
}

/*
 * The time of a change to j: never before its last change. An operation's now is read when it is made, before
 * it waits for the write lock, so in a cluster an operation made a moment earlier on another node can be
 * applied after a later one; the job's times (and its attempt history) still only move forward.
 */
static int64_t change_time(const struct ad_job *j, int64_t now)
{
    return now > j->updated_at ? now : j->updated_at;
}

/* Fetch a job for a change at *now (moved up to change_time); tombstoned and expired jobs are gone for every
 * operation. */
static ad_err load(struct ad_conn *c, const char *tenant, const char *id, int64_t *now, struct ad_job **out)
{
    ad_err e = st->job_get(c, tenant, id, out);
    if (e != AD_E_OK)
        return e;
    if ((*out)->tombstoned || ((*out)->expires_at != 0 && (*out)->expires_at <= *now)) {
        ad_job_free(*out);
        *out = NULL;
        return AD_E_GONE;
    }
    *now = change_time(*out, *now);
    return AD_E_OK;
}

static ad_err lease_job(struct ad_conn *c, struct ad_job *j, int64_t lease_ms, const char *worker, int64_t now);

/* A submit with a uniqueKey while a job of the key is live: that job is the answer (*found = 1), and with debounce a
 * queued one takes the new payload and runAt first (the last submit wins). The writer applies submits one at a time,
 * each lookup inside the transaction that inserts (on PostgreSQL under the cluster's write lock), so two submits
 * of one key never both insert, nor two items of one batch. */
static ad_err unique_apply(struct ad_conn *c, struct ad_submit_op *s, int *found)
{
    struct ad_job *live;
    ad_err e = st->job_unique(c, s->job->tenant, s->job->type, s->job->unique_key, &live);
    *found = e == AD_E_OK;
    if (e != AD_E_OK)
        return e == AD_E_NOT_FOUND ? AD_E_OK : e;
    if (s->debounce && live->status == AD_QUEUED) {
        struct ad_event_prev prev;
        ad_event_prev_take(&prev, live);
        int64_t now = change_time(live, s->job->created_at);
        ad_job_set(&live->payload, s->job->payload);
        live->run_at = s->job->run_at > now ? s->job->run_at : now;
        live->updated_at = now;
        e = st->job_set_payload(c, live->id, live->payload);
        e = log_event(c, live, &prev, e == AD_E_OK ? st->job_update(c, live) : e);
    }
    ad_job_free(s->job);
    s->job = live;
    s->deduplicated = 1;
    return e;
}

static ad_err submit_apply(struct ad_op *op, struct ad_conn *c)
{
    struct ad_submit_op *s = (struct ad_submit_op *)op;
    if (s->idem_key != NULL) {
        struct ad_idem rec;
        ad_err e = st->idem_get(c, s->job->tenant, s->idem_key, &rec);
        if (e == AD_E_OK) {
            int same = strcmp(rec.fingerprint, s->fingerprint) == 0;
            struct ad_job *orig = NULL;
            if (same)
                e = st->job_get(c, s->job->tenant, rec.job_id, &orig);
            free(rec.job_id);
            if (!same)
                return AD_E_IDEMPOTENCY_KEY_REUSED;
            if (e != AD_E_OK)
                return e == AD_E_NOT_FOUND ? AD_E_GONE : e;
            ad_job_free(s->job);
            s->job = orig;
            s->replayed = 1;
            ad_op_changed(op, &s->job);
            return AD_E_OK;
        }
        if (e != AD_E_NOT_FOUND)
            return e;
    }
    int found = 0;
    int64_t now = s->job->created_at;
    ad_err e = s->job->unique_key != NULL ? unique_apply(c, s, &found) : AD_E_OK;
    if (e != AD_E_OK || found) {
        if (e == AD_E_OK && s->idem_key != NULL)
            e = st->idem_put(c, s->job->tenant, s->idem_key, s->fingerprint, s->job->id, now);
        if (e == AD_E_OK)
            ad_op_changed(op, &s->job);
        return e;
    }
    if (s->job->callback_url != NULL) {
        e = callback_ready(c, s->job->tenant);
        if (e != AD_E_OK)
            return e;
    }
    char *failed = NULL;
    if (s->job->depends_on != NULL && (e = ad_deps_check(c, s->job, &s->dep_bad, &failed)) != AD_E_OK)
        return e;
    struct ad_event_prev prev;
    ad_event_prev_take(&prev, NULL);
    e = log_event(c, s->job, &prev, st->job_insert(c, s->job));
    if (e == AD_E_OK && s->job->depends_on != NULL)
        e = ad_deps_link(c, s->job, failed, now);
    free(failed);
    if (e == AD_E_OK && s->idem_key != NULL)
        e = st->idem_put(c, s->job->tenant, s->idem_key, s->fingerprint, s->job->id, s->job->created_at);
    int admitted = 0;
    if (e == AD_E_OK && s->handoff_ms > 0 && s->job->run_at <= s->job->created_at && s->job->status == AD_QUEUED &&
        s->job->deps == 0)
        e = ad_queue_take_one(c, s->job->tenant, s->job->type, s->job->group, s->job->created_at, &admitted);
    if (e == AD_E_OK && admitted)
        e = lease_job(c, s->job, s->handoff_ms, s->handoff_worker, s->job->created_at);
    if (e == AD_E_OK)
        ad_op_changed(op, &s->job);
    return e;
}

static void submit_destroy(struct ad_op *op)
{
    struct ad_submit_op *s = (struct ad_submit_op *)op;
    ad_job_free(s->job);
    free(s->idem_key);
    free(s->handoff_worker);
    free(s);
}

struct ad_submit_op *ad_submit_op_new(void)
{
    struct ad_submit_op *s = ad_calloc(1, sizeof(*s));
    s->op.apply = submit_apply;
    s->op.destroy = submit_destroy;
    return s;
}

/* Each item is applied as it would be alone, inside the batch's transaction; the jobs it names become the batch's
 * changes, so that they are published after the one commit. An item's idempotency record is visible to the items
 * after it, so a key given twice replays the first (or is refused as reused). */
static ad_err batch_apply(struct ad_op *op, struct ad_conn *c)
{
    struct ad_batch_op *b = (struct ad_batch_op *)op;
    for (size_t i = 0; i < b->n; i++) {
        struct ad_submit_op *s = b->items[i];
        b->change[i] = -1;
        if (s == NULL)
            continue;
        s->op.nchanged = 0;
        ad_err e = ad_writer_apply_nested(st, &s->op, c);
        if (e != AD_E_OK)
            return e;
        if (s->op.err != AD_E_OK)
            continue;
        b->change[i] = (long)op->nchanged;
        for (size_t k = 0; k < s->op.nchanged; k++)
            ad_op_changed(op, ad_op_change_at(&s->op, k)->job);
    }
    return AD_E_OK;
}

static void batch_destroy(struct ad_op *op)
{
    struct ad_batch_op *b = (struct ad_batch_op *)op;
    for (size_t i = 0; i < b->n; i++)
        if (b->items[i] != NULL)
            ad_op_free(&b->items[i]->op);
    free(b->items);
    free(b->change);
    free(b);
}

struct ad_batch_op *ad_batch_op_new(size_t n)
{
    struct ad_batch_op *b = ad_calloc(1, sizeof(*b));
    b->op.apply = batch_apply;
    b->op.destroy = batch_destroy;
    b->n = n;
    b->items = ad_calloc(n != 0 ? n : 1, sizeof(*b->items));
    b->change = ad_calloc(n != 0 ? n : 1, sizeof(*b->change));
    return b;
}

/* The job an operation on one job by id will load. */
static void prefetch_id(struct ad_conn *c, const char *id)
{
    if (st->job_prefetch != NULL && id != NULL)
        st->job_prefetch(c, id);
}

static void cancel_prefetch(struct ad_op *op, struct ad_conn *c)
{
    prefetch_id(c, ((struct ad_cancel_op *)op)->id);
}

static ad_err cancel_apply(struct ad_op *op, struct ad_conn *c)
{
    struct ad_cancel_op *x = (struct ad_cancel_op *)op;
    ad_err e = load(c, x->tenant, x->id, &x->now, &x->job);
    if (e != AD_E_OK)
        return e;
    struct ad_transition t;
    if (x->lease_id != NULL) {
        if (report_replay(c, x->job, x->lease_id, AD_EV_CANCEL_ACK)) {
            ad_op_changed(op, &x->job);
            return AD_E_OK;
        }
        if (!lease_live(x->job, x->lease_id, x->now))
            return ad_status_terminal(x->job->status) ? AD_E_ILLEGAL_TRANSITION : AD_E_STALE_LEASE;
        e = ad_job_transition(x->job, AD_EV_CANCEL_ACK, &t);
        if (e == AD_E_OK)
            e = st->attempt_add(c, x->job, x->now, "cancelled");
        if (e == AD_E_OK)
            ad_tracer_attempt(x->job, x->now, "cancelled");
    } else {
        e = ad_job_transition(x->job, AD_EV_CANCEL, &t);
    }
    if (e != AD_E_OK)
        return e;
    struct ad_event_prev prev;
    ad_event_prev_take(&prev, x->job);
    apply_transition(x->job, &t, x->now);
    e = log_event(c, x->job, &prev, st->job_update(c, x->job));
    if (e == AD_E_OK)
        ad_op_changed(op, &x->job);
    if (e == AD_E_OK)
        e = ad_deps_settle(op, c, x->job, x->now);
    return e;
}

static void cancel_destroy(struct ad_op *op)
{
    struct ad_cancel_op *x = (struct ad_cancel_op *)op;
    free(x->tenant);
    free(x->id);
    free(x->lease_id);
    ad_job_free(x->job);
    free(x);
}

struct ad_cancel_op *ad_cancel_op_new(void)
{
    struct ad_cancel_op *x = ad_calloc(1, sizeof(*x));
    x->op.apply = cancel_apply;
    x->op.prefetch = cancel_prefetch;
    x->op.destroy = cancel_destroy;
    return x;
}

static ad_err retry_apply(struct ad_op *op, struct ad_conn *c)
{
    struct ad_retry_op *x = (struct ad_retry_op *)op;
    struct ad_job *old;
    ad_err e = load(c, x->tenant, x->id, &x->now, &old);
    if (e != AD_E_OK)
        return e;
    if (old->status != AD_FAILED && old->status != AD_CANCELLED) {
        x->job = old; /* lets the answer say what state the job is in */
        return AD_E_ILLEGAL_TRANSITION;
    }
    /* The new job keeps the callbackUrl (of a job an earlier version took without a callback secret, say). */
    if (old->callback_url != NULL && (e = callback_ready(c, old->tenant)) != AD_E_OK) {
        ad_job_free(old);
        return e;
    }
    struct ad_job *j = ad_job_new();
    j->id = ad_strdup(x->new_id);
    j->tenant = ad_strdup(old->tenant);
    j->type = ad_strdup(old->type);
    j->payload = ad_strdup(old->payload);
    j->priority = old->priority;
    j->max_attempts = old->max_attempts;
    j->timeout_seconds = old->timeout_seconds;
    j->on_complete_redirect = old->on_complete_redirect;
    ad_job_set(&j->callback_url, old->callback_url);
    ad_job_set(&j->retry_of, old->id);
    ad_job_set(&j->group, old->group);
    j->created_at = j->updated_at = x->now;
    if (old->resource != NULL) {
        /* The placeholder resource follows the new job: its id is part of the path. */
        const char *at = strstr(old->resource, old->id);
        j->resource =
            at != NULL ? ad_asprintf("%.*s%s%s", (int)(at - old->resource), old->resource, j->id, at + strlen(old->id))
                       : ad_strdup(old->resource);
    }
    /* The new job continues the trace of the one it retries (docs/tracing.md). */
    char trace_parent[AD_SPAN_ID_HEX + 1];
    int traced = ad_tracer_made(j, old, trace_parent) == 0;
    ad_job_free(old);
    x->job = j;
    struct ad_event_prev prev;
    ad_event_prev_take(&prev, NULL);
    e = log_event(c, j, &prev, st->job_insert(c, j));
    if (e == AD_E_OK)
        ad_op_changed(op, &x->job);
    if (e == AD_E_OK && traced)
        ad_tracer_submitted(j, NULL, trace_parent, x->now);
    return e;
}

static void retry_destroy(struct ad_op *op)
{
    struct ad_retry_op *x = (struct ad_retry_op *)op;
    free(x->tenant);
    free(x->id);
    free(x->new_id);
    ad_job_free(x->job);
    free(x);
}

struct ad_retry_op *ad_retry_op_new(void)
{
    struct ad_retry_op *x = ad_calloc(1, sizeof(*x));
    x->op.apply = retry_apply;
    x->op.destroy = retry_destroy;
    return x;
}

/* Lease one queued job to worker: running, a fresh lease id, attempt + 1 (the attempt's history row is written
 * when it ends). */
static ad_err lease_job(struct ad_conn *c, struct ad_job *j, int64_t lease_ms, const char *worker, int64_t now)
{
    now = change_time(j, now);
    struct ad_transition t;
    ad_err e = ad_job_transition(j, AD_EV_LEASE, &t);
    if (e != AD_E_OK)
        return e;
    /* The running event of the job's last attempt was made from the job: it goes into the log now that the job
     * no longer holds it. This attempt's is made from the job too, unless the job keeps a message (the event
     * carries it; ad_event_started_view has none). */
    if (j->started_seq > 0) {
        struct ad_job v = ad_event_started_view(j);
        e = append_event(c, &v, j->started_seq, "status");
        if (e != AD_E_OK)
            return e;
    }
    j->started_seq = j->message == NULL ? AD_SEQ_OF_THIS_WRITE : 0;
    struct ad_event_prev prev;
    ad_event_prev_take(&prev, j);
    apply_transition(j, &t, now);
    j->attempt++;
    j->started_at = now;
    j->progress = -1;
    char *lid = ad_new_id("lse_");
    ad_job_set(&j->lease_id, lid);
    free(lid);
    j->lease_expires_at = lease_until(j, now, lease_ms);
    ad_job_set(&j->worker, worker);
    return log_event(c, j, &prev, st->job_update(c, j));
}

/* Lease what x asks for, naming each job leased as a change of op (x's own, or the report x is the next of). */
static ad_err lease_jobs(struct ad_lease_op *x, struct ad_op *op, struct ad_conn *c)
{
    /* The queues' settings narrow the types and the count (queues.h); the store picks the jobs. */
    struct ad_queue_gate g;
    int max = x->max;
    ad_err e = ad_queue_gate_open(&g, c, x->tenant, x->types, x->ntypes, x->now, &max);
    if (e == AD_E_OK && max > 0 && g.ntypes > 0)
        e = ad_queue_gate_pick(&g, c, x->tenant, x->now, max, &x->leased);
    if (e == AD_E_OK)
        e = ad_queue_gate_close(&g, c, &x->leased, x->now);
    x->open_at = g.open_at;
    ad_queue_gate_free(&g);
    for (size_t i = 0; e == AD_E_OK && i < x->leased.n; i++) {
        e = lease_job(c, x->leased.items[i], x->lease_ms, x->worker, x->now);
        if (e == AD_E_OK)
            ad_op_changed(op, &x->leased.items[i]);
    }
    return e;
}

static ad_err lease_apply(struct ad_op *op, struct ad_conn *c)
{
    return lease_jobs((struct ad_lease_op *)op, op, c);
}

static void lease_destroy(struct ad_op *op)
{
    struct ad_lease_op *x = (struct ad_lease_op *)op;
    free(x->tenant);
    for (size_t i = 0; i < x->ntypes; i++)
        free(x->types[i]);
    free(x->types);
    free(x->worker);
    ad_job_list_free(&x->leased);
    free(x);
}

struct ad_lease_op *ad_lease_op_new(void)
{
    struct ad_lease_op *x = ad_calloc(1, sizeof(*x));
    x->op.apply = lease_apply;
    x->op.destroy = lease_destroy;
    return x;
}

static ad_err report_job(struct ad_conn *c, struct ad_report_op *x)
{
    ad_err e = load(c, x->tenant, x->id, &x->now, &x->job);
    if (e != AD_E_OK)
        return e;
    struct ad_job *j = x->job;
    if (report_replay(c, j, x->lease_id, x->event) && report_same(j, x)) {
        x->replayed = 1;
        return AD_E_OK;
    }
    if (!lease_live(j, x->lease_id, x->now)) {
        x->conflict = j->status != AD_RUNNING && same_lease(j, x->lease_id);
        return AD_E_STALE_LEASE;
    }
    struct ad_transition t;
    e = ad_job_transition(j, x->event, &t);
    if (e != AD_E_OK)
        return e;
    ad_tracer_attempt(j, x->now, attempt_outcome(x->event, t.to));
    /* A live or completed attempt is the job's own (ad_attempt_own): the row and index entry of a completed one
     * took 6.5% of the writer's time end to end. */
    if (!ad_attempt_is_own(t.to)) {
        e = st->attempt_add(c, j, x->now, attempt_outcome(x->event, t.to));
        if (e != AD_E_OK)
            return e;
    }
    struct ad_event_prev prev;
    ad_event_prev_take(&prev, j);
    if (x->event == AD_EV_RELEASE)
        j->attempt--;
    if (x->progress >= 0)
        j->progress = x->progress;
    if (x->message != NULL)
        ad_job_set(&j->message, x->message);
    if (x->lease_ms > 0)
        j->lease_expires_at = lease_until(j, x->now, x->lease_ms);
    switch (x->event) {
    case AD_EV_COMPLETE:
    case AD_EV_COMPLETE_PARTIAL:
        ad_job_set(&j->result, x->result);
        ad_job_set(&j->result_location, x->result_location);
        ad_job_set(&j->artifact, x->artifact);
        if (x->event == AD_EV_COMPLETE)
            j->progress = 100;
        break;
    case AD_EV_FAIL:
    case AD_EV_FAIL_FINAL:
        ad_job_set(&j->error, x->error);
        break;
    default:
        break;
    }
    apply_transition(j, &t, x->now);
    if (t.to == AD_QUEUED && x->event == AD_EV_FAIL)
        j->run_at = x->now + ad_core_backoff_ms(j->attempt);
    return log_event(c, j, &prev, st->job_update(c, j));
}

static void report_prefetch(struct ad_op *op, struct ad_conn *c)
{
    prefetch_id(c, ((struct ad_report_op *)op)->id);
}

static ad_err report_apply(struct ad_op *op, struct ad_conn *c)
{
    struct ad_report_op *x = (struct ad_report_op *)op;
    ad_err e = report_job(c, x);
    if (e != AD_E_OK)
        return e;
    x->lease_expires_at = x->job->lease_expires_at;
    ad_op_changed(op, &x->job);
    /* A repeat leases nothing again: the jobs the first one leased stay leased until their leases run out, and a
     * worker that repeats its report over and over must not take the queue with it. */
    if (x->next == NULL || x->replayed)
        return x->replayed ? e : ad_deps_settle(op, c, x->job, x->now);
    /* Leased at the report's time: the job it ended finished when the next one started. A failed lease after
     * the report has written fails the batch, but only the store itself fails a lease. The jobs leased are
     * changes of the report (the writer knows only it): published after its own job. */
    x->next->now = x->now;
    e = lease_jobs(x->next, op, c);
    for (size_t i = 0; e == AD_E_OK && x->shown == NULL && i < x->next->leased.n; i++)
        if (strcmp(x->next->leased.items[i]->id, x->job->id) == 0)
            x->shown = ad_job_dup(x->job);
    /* The jobs waiting for it come after the leases, which the answer finds from change 1 on. */
    if (e == AD_E_OK)
        e = ad_deps_settle(op, c, x->job, x->now);
    return e;
}

static void report_destroy(struct ad_op *op)
{
    struct ad_report_op *x = (struct ad_report_op *)op;
    free(x->tenant);
    free(x->id);
    free(x->lease_id);
    free(x->message);
    free(x->result);
    free(x->result_location);
    free(x->artifact);
    free(x->error);
    ad_job_free(x->job);
    ad_job_free(x->shown);
    if (x->next != NULL)
        ad_op_free(&x->next->op);
    free(x);
}

struct ad_report_op *ad_report_op_new(void)
{
    struct ad_report_op *x = ad_calloc(1, sizeof(*x));
    x->op.apply = report_apply;
    x->op.prefetch = report_prefetch;
    x->op.destroy = report_destroy;
    x->progress = -1;
    return x;
}

static void expire_prefetch(struct ad_op *op, struct ad_conn *c)
{
    prefetch_id(c, ((struct ad_expire_op *)op)->id);
}

static ad_err expire_apply(struct ad_op *op, struct ad_conn *c)
{
    struct ad_expire_op *x = (struct ad_expire_op *)op;
    ad_err e = st->job_get(c, NULL, x->id, &x->job);
    if (e != AD_E_OK)
        return e;
    struct ad_job *j = x->job;
    if (j->status != AD_RUNNING || j->lease_id == NULL || strcmp(j->lease_id, x->lease_id) != 0 ||
        j->lease_expires_at > x->now)
        return AD_E_OK;
    x->now = change_time(j, x->now);
    struct ad_transition t;
    e = ad_job_transition(j, AD_EV_LEASE_EXPIRED, &t);
    if (e != AD_E_OK)
        return e;
    if (t.to == AD_FAILED) {
        free(j->error);
        j->error = ad_asprintf("{\"type\":\"" AD_PROBLEM_BASE "lease-expired\",\"title\":\"Lease expired\","
                               "\"status\":500,\"detail\":\"the worker stopped reporting and no attempts "
                               "remain\",\"code\":\"lease-expired\"}");
    }
    struct ad_event_prev prev;
    ad_event_prev_take(&prev, j);
    ad_tracer_attempt(j, x->now, attempt_outcome(AD_EV_LEASE_EXPIRED, t.to));
    apply_transition(j, &t, x->now);
    /* The worker that lost this lease must hear 409 from now on, not a replay of someone's report. */
    ad_job_set(&j->lease_id, NULL);
    x->changed = 1;
    e = st->attempt_add(c, j, x->now, attempt_outcome(AD_EV_LEASE_EXPIRED, t.to));
    e = log_event(c, j, &prev, e == AD_E_OK ? st->job_update(c, j) : e);
    if (e == AD_E_OK)
        ad_op_changed(op, &x->job);
    if (e == AD_E_OK)
        e = ad_deps_settle(op, c, x->job, x->now);
    return e;
}

static void expire_destroy(struct ad_op *op)
{
    struct ad_expire_op *x = (struct ad_expire_op *)op;
    free(x->id);
    free(x->lease_id);
    ad_job_free(x->job);
    free(x);
}

struct ad_expire_op *ad_expire_op_new(void)
{
    struct ad_expire_op *x = ad_calloc(1, sizeof(*x));
    x->op.apply = expire_apply;
    x->op.prefetch = expire_prefetch;
    x->op.destroy = expire_destroy;
    return x;
}

static ad_err sweep_apply(struct ad_op *op, struct ad_conn *c)
{
    struct ad_sweep_op *x = (struct ad_sweep_op *)op;
    int jobs = 0, keys = 0, batches = 0;
    ad_err e = st->sweep(c, x->now, config->tombstone_ms, AD_SWEEP_BATCH, &jobs);
    if (e == AD_E_OK)
        e = st->idem_sweep(c, x->now - config->idempotency_ttl_ms, AD_SWEEP_BATCH, &keys);
    if (e == AD_E_OK)
        e = st->batch_sweep(c, x->now - config->tombstone_ms, AD_SWEEP_BATCH, &batches);
    x->done = jobs + keys + batches;
    return e;
}

static void sweep_destroy(struct ad_op *op)
{
    free(op);
}

struct ad_sweep_op *ad_sweep_op_new(void)
{
    struct ad_sweep_op *x = ad_calloc(1, sizeof(*x));
    x->op.apply = sweep_apply;
    x->op.destroy = sweep_destroy;
    return x;
}
