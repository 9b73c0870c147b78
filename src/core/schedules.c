/*
 * schedules.c - recurring jobs: a schedule's definition, its representation, the writer operations on it and
 * the engine that fires it (schedules.h says how a fire time is taken exactly once).
 *
 * A fire makes its job as a submit would (ad_submit_op, applied nested in the fire's transaction), with
 * "schedule": {"id", "fireTime"} on it and, when export is on, a trace of its own (core/tracer.h); cancelOther
 * cancels the previous job the same way (ad_cancel_op). The overlap policy looks at the schedule's last job only. Time
 * zones and cron expressions come from common/tz.h and common/cron.h; zones are loaded once per name and kept. This
 * file does not parse HTTP nor check job templates (api/api_schedules.c does, as a submit would), and keeps nothing per
 * future fire time.
 */
#include "core/schedules.h"
#include "common/cron.h"
#include "common/json.h"
#include "common/metrics.h"
#include "common/timer.h"
#include "common/tz.h"
#include "core/core.h"
#include "core/tracer.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RECENT_MAX 10
#define UPCOMING 5
#define TICK_SCHEDULES 200     /* schedules one fire operation takes */
#define FIRES_PER_SCHEDULE 100 /* fire times of one schedule one operation runs; the next one goes on */
#define WINDOW_WALK 100000     /* cron fire times counted one by one when skipping past the window */
#define CLUSTER_LOOK_MS 1000
#define RETRY_MS 1000
#define DEFAULT_CATCHUP_MS 60000
/* The runAt of a bufferOne run held behind a running one: 9999-12-31T23:59:59Z, until it is released. */
#define HOLD_AT INT64_C(253402300799000)

/* ---- time zones, loaded once per name and kept (immutable, shared by threads) ---- */

struct zone {
    struct zone *next;
    struct ad_tz *tz;
    char name[];
};
static struct zone *zones;
static pthread_mutex_t zones_mu = PTHREAD_MUTEX_INITIALIZER;

static const struct ad_tz *zone(const char *name, char *why, size_t whylen)
{
    pthread_mutex_lock(&zones_mu);
    struct zone *z = zones;
    while (z != NULL && strcmp(z->name, name) != 0)
        z = z->next;
    if (z == NULL) {
        struct ad_tz *tz = ad_tz_load(name, why, whylen);
        if (tz != NULL) {
            size_t len = strlen(name) + 1;
            z = ad_malloc(sizeof(*z) + len);
            memcpy(z->name, name, len);
            z->tz = tz;
            z->next = zones;
            zones = z;
        }
    }
    pthread_mutex_unlock(&zones_mu);
    return z != NULL ? z->tz : NULL;
}

/* ---- the definition ---- */

void ad_schedule_def_clear(struct ad_sched_def *d)
{
    free(d->cron);
    free(d->timezone);
    memset(d, 0, sizeof(*d));
}

static const char *const overlap_names[] = {"skip", "bufferOne", "allow", "cancelOther"};

static int bad_at(ad_sched_bad_fn bad, void *arg, const char *pointer, const char *detail)
{
    if (bad != NULL)
        bad(arg, pointer, detail);
    return 1;
}

static const char *text_of(const json_t *v)
{
    return json_is_string(v) && strlen(json_string_value(v)) == json_string_length(v) ? json_string_value(v) : NULL;
}

/* An optional RFC 3339 member into *ms. */
static int read_time(const json_t *body, const char *name, const char *pointer, int64_t *ms, ad_sched_bad_fn bad,
                     void *arg)
{
    const json_t *v = json_object_get(body, name);
    if (v == NULL || json_is_null(v))
        return 0;
    const char *s = text_of(v);
    if (s == NULL || ad_time_parse_rfc3339(s, ms) != 0) {
        char d[96];
        snprintf(d, sizeof(d), "%s must be an RFC 3339 date-time", name);
        return bad_at(bad, arg, pointer, d);
    }
    return 0;
}

int ad_schedule_def_read(const json_t *body, struct ad_sched_def *d, ad_sched_bad_fn bad, void *arg)
{
    memset(d, 0, sizeof(*d));
    d->catchup_ms = DEFAULT_CATCHUP_MS;
    int n = 0;
    char why[200], detail[300];
    const json_t *cron = json_object_get(body, "cron"), *every = json_object_get(body, "every");
    if (cron != NULL && json_is_null(cron))
        cron = NULL;
    if (every != NULL && json_is_null(every))
        every = NULL;
    if ((cron == NULL) == (every == NULL))
        n += bad_at(bad, arg, cron == NULL ? "" : "/every", "give exactly one of cron and every");
    if (cron != NULL) {
        const char *s = text_of(cron);
        struct ad_cron *c = s != NULL && strlen(s) <= AD_CRON_MAX_LEN ? ad_cron_parse(s, why, sizeof(why)) : NULL;
        if (s == NULL || strlen(s) > AD_CRON_MAX_LEN)
            snprintf(why, sizeof(why), "a string of at most %d bytes", AD_CRON_MAX_LEN);
        if (c == NULL) {
            snprintf(detail, sizeof(detail), "cron is not a valid expression: %s", why);
            n += bad_at(bad, arg, "/cron", detail);
        } else if (ad_cron_impossible(c)) {
            n += bad_at(bad, arg, "/cron", "cron never fires (no month has that day)");
        } else {
            d->cron = ad_strdup(s);
        }
        ad_cron_free(c);
    }
    if (every != NULL) {
        const char *s = text_of(every);
        if (s == NULL || ad_parse_duration_ms(s, &d->every_ms) != 0 || d->every_ms < 1000 ||
            d->every_ms > 366LL * 86400000)
            n += bad_at(bad, arg, "/every", "every must be a duration from 1s to 366d, like \"30s\" or \"5m\"");
    }
    const json_t *tzv = json_object_get(body, "timezone");
    const char *tzname = tzv == NULL || json_is_null(tzv) ? "UTC" : text_of(tzv);
    if (tzname == NULL || strlen(tzname) > AD_TZ_MAX_NAME || zone(tzname, why, sizeof(why)) == NULL) {
        if (tzname == NULL || strlen(tzname) > AD_TZ_MAX_NAME)
            snprintf(why, sizeof(why), "a string of at most %d bytes", AD_TZ_MAX_NAME);
        snprintf(detail, sizeof(detail), "timezone must be an IANA time zone name: %s", why);
        n += bad_at(bad, arg, "/timezone", detail);
    } else {
        d->timezone = ad_strdup(tzname);
    }
    const json_t *ov = json_object_get(body, "overlap");
    if (ov != NULL && !json_is_null(ov)) {
        const char *s = text_of(ov);
        size_t i = 0;
        while (s != NULL && i < 4 && strcmp(s, overlap_names[i]) != 0)
            i++;
        if (s == NULL || i == 4)
            n += bad_at(bad, arg, "/overlap", "overlap must be \"skip\", \"bufferOne\", \"allow\" or \"cancelOther\"");
        else
            d->overlap = (enum ad_overlap)i;
    }
    const json_t *cw = json_object_get(body, "catchupWindow");
    if (cw != NULL && !json_is_null(cw)) {
        const char *s = text_of(cw);
        if (s == NULL || ad_parse_duration_ms(s, &d->catchup_ms) != 0 || d->catchup_ms < 0 ||
            d->catchup_ms > 366LL * 86400000)
            n += bad_at(bad, arg, "/catchupWindow", "catchupWindow must be a duration up to 366d, like \"10m\"");
    }
    const json_t *p = json_object_get(body, "paused");
    if (p != NULL && !json_is_null(p) && !json_is_boolean(p))
        n += bad_at(bad, arg, "/paused", "paused must be true or false");
    d->paused = json_is_true(p);
    n += read_time(body, "startAt", "/startAt", &d->start_at, bad, arg);
    n += read_time(body, "endAt", "/endAt", &d->end_at, bad, arg);
    if (d->start_at != 0 && d->end_at != 0 && d->end_at < d->start_at)
        n += bad_at(bad, arg, "/endAt", "endAt must not be before startAt");
    return n;
}

char *ad_schedule_spec(const json_t *body)
{
    static const char *const keys[] = {"cron",   "every",   "timezone", "overlap", "catchupWindow",
                                       "paused", "startAt", "endAt",    "job"};
    json_t *o = json_object();
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
        json_t *v = json_object_get(body, keys[i]);
        if (v != NULL && !json_is_null(v))
            json_object_set(o, keys[i], v);
    }
    char *s = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    return s;
}

char *ad_schedule_tmpl(const struct ad_job *j)
{
    json_t *o = json_object();
    json_object_set_new(o, "type", json_string(j->type));
    json_object_set_new(o, "payload", json_loads(j->payload != NULL ? j->payload : "{}", JSON_DECODE_ANY, NULL));
    json_object_set_new(o, "priority", json_integer(j->priority));
    json_object_set_new(o, "maxAttempts", json_integer(j->max_attempts));
    json_object_set_new(o, "timeoutSeconds", json_integer(j->timeout_seconds));
    if (j->callback_url != NULL)
        json_object_set_new(o, "callbackUrl", json_string(j->callback_url));
    if (j->group != NULL)
        json_object_set_new(o, "group", json_string(j->group));
    if (j->unique_key != NULL)
        json_object_set_new(o, "uniqueKey", json_string(j->unique_key));
    char *s = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    return s;
}

/* A new job of tenant from template text (as ad_schedule_tmpl wrote it), not yet prepared; NULL if it is not one. */
static struct ad_job *job_from_tmpl(const char *tmpl)
{
    json_t *o = json_loads(tmpl, 0, NULL);
    const char *type = text_of(json_object_get(o, "type"));
    if (type == NULL) {
        json_decref(o);
        return NULL;
    }
    struct ad_job *j = ad_job_new();
    j->type = ad_strdup(type);
    j->payload = json_dumps(json_object_get(o, "payload"), JSON_COMPACT | JSON_ENCODE_ANY);
    j->priority = (enum ad_priority)json_integer_value(json_object_get(o, "priority"));
    j->max_attempts = (int)json_integer_value(json_object_get(o, "maxAttempts"));
    j->timeout_seconds = (int)json_integer_value(json_object_get(o, "timeoutSeconds"));
    j->callback_url = ad_strdup_opt(text_of(json_object_get(o, "callbackUrl")));
    j->group = ad_strdup_opt(text_of(json_object_get(o, "group")));
    j->unique_key = ad_strdup_opt(text_of(json_object_get(o, "uniqueKey")));
    json_decref(o);
    return j;
}

int64_t ad_schedule_anchor(const struct ad_sched_def *d, int64_t created_at)
{
    return d->start_at != 0 ? d->start_at : created_at - created_at % 1000;
}

int64_t ad_schedule_next(const struct ad_sched_def *d, int64_t anchor, int64_t after)
{
    if (d->start_at != 0 && after < d->start_at - 1)
        after = d->start_at - 1;
    int64_t t;
    if (d->every_ms > 0) {
        int64_t k = after < anchor ? 0 : (after - anchor) / d->every_ms + 1;
        t = anchor + k * d->every_ms;
    } else {
        char why[200];
        const struct ad_tz *tz = zone(d->timezone != NULL ? d->timezone : "UTC", why, sizeof(why));
        struct ad_cron *c = d->cron != NULL ? ad_cron_parse(d->cron, why, sizeof(why)) : NULL;
        /* Whole seconds: the first second strictly after `after`. */
        int64_t after_s = after >= 0 ? after / 1000 : -((-after + 999) / 1000);
        int64_t s = c != NULL && tz != NULL ? ad_cron_next(c, tz, after_s) : -1;
        ad_cron_free(c);
        t = s < 0 ? 0 : s * 1000;
    }
    if (t != 0 && d->end_at != 0 && t > d->end_at)
        t = 0;
    return t;
}

/* ---- the representation ---- */

static int read_def(const struct ad_schedule *s, struct ad_sched_def *d, json_t **spec)
{
    *spec = json_loads(s->spec != NULL ? s->spec : "{}", 0, NULL);
    return ad_schedule_def_read(*spec, d, NULL, NULL);
}

static void render_str_member(struct ad_buf *b, const json_t *spec, const char *name, const char *key_lit,
                              const char *dflt)
{
    const char *v = text_of(json_object_get(spec, name));
    ad_buf_str(b, key_lit);
    if (v == NULL && dflt == NULL)
        ad_json_null(b);
    else
        ad_json_str(b, v != NULL ? v : dflt);
}

int ad_schedule_render(const struct ad_schedule *s, struct ad_buf *b)
{
    struct ad_sched_def d;
    json_t *spec;
    read_def(s, &d, &spec);
    AD_JSON_OPEN(b, "id");
    ad_json_str(b, s->id);
    render_str_member(b, spec, "cron", ",\"cron\":", NULL);
    render_str_member(b, spec, "every", ",\"every\":", NULL);
    render_str_member(b, spec, "timezone", ",\"timezone\":", "UTC");
    AD_JSON_KEY(b, "overlap");
    ad_json_str(b, overlap_names[d.overlap]);
    render_str_member(b, spec, "catchupWindow", ",\"catchupWindow\":", "1m");
    AD_JSON_KEY(b, "paused");
    ad_json_bool(b, d.paused);
    AD_JSON_KEY(b, "startAt");
    ad_json_time(b, d.start_at);
    AD_JSON_KEY(b, "endAt");
    ad_json_time(b, d.end_at);
    AD_JSON_KEY(b, "job");
    char *job = json_dumps(json_object_get(spec, "job"), JSON_COMPACT | JSON_ENCODE_ANY);
    ad_json_raw(b, job);
    free(job);
    AD_JSON_KEY(b, "nextRunAt");
    ad_json_time(b, s->next_at);
    AD_JSON_KEY(b, "upcoming");
    AD_BUF_LIT(b, "[");
    int64_t t = s->next_at, anchor = ad_schedule_anchor(&d, s->created_at);
    for (int i = 0; i < UPCOMING && t != 0; i++) {
        if (i > 0)
            AD_BUF_LIT(b, ",");
        ad_json_time(b, t);
        t = ad_schedule_next(&d, anchor, t);
    }
    AD_BUF_LIT(b, "]");
    AD_JSON_KEY(b, "recentRuns");
    ad_json_raw(b, s->recent != NULL ? s->recent : "[]");
    AD_JSON_KEY(b, "counts");
    AD_JSON_OPEN(b, "fires");
    ad_json_int(b, s->fires);
    AD_JSON_KEY(b, "skips");
    ad_json_int(b, s->skips);
    AD_JSON_KEY(b, "catchups");
    ad_json_int(b, s->catchups);
    AD_BUF_LIT(b, "}");
    AD_JSON_KEY(b, "createdAt");
    ad_json_time(b, s->created_at);
    AD_JSON_KEY(b, "updatedAt");
    ad_json_time(b, s->updated_at);
    AD_JSON_KEY(b, "links");
    AD_JSON_OPEN(b, "self");
    ad_buf_str(b, "\"/v1/schedules/");
    ad_json_chars(b, s->id);
    AD_BUF_LIT(b, "\"}}");
    ad_schedule_def_clear(&d);
    json_decref(spec);
    return ad_json_end(b);
}

/* ---- firing ---- */

static const struct ad_store_ops *st;
static int64_t engine_started; /* fire times before it were missed while this node was down: catch-ups */
static int engine_on, engine_cluster, tick_inflight, tick_again;

/* The nested job operations of a fire, kept until the outer op's done (their jobs are its changes). */
struct nested {
    struct ad_op ***ops;
    size_t *n;
};

static void nested_add(struct nested *ns, struct ad_op *op)
{
    *ns->ops = ad_realloc(*ns->ops, (*ns->n + 1) * sizeof(**ns->ops));
    (*ns->ops)[(*ns->n)++] = op;
}

static void nested_free(struct ad_op **ops, size_t n)
{
    for (size_t i = 0; i < n; i++)
        ad_op_free(ops[i]);
    free(ops);
}

/* A job changed by outer itself, kept until outer's done (the writer takes it out at the commit). */
struct kept_job {
    struct ad_op op;
    struct ad_job *job;
};

static void kept_destroy(struct ad_op *op)
{
    ad_job_free(((struct kept_job *)op)->job);
    free(op);
}

/* Keep j (taken) in ns until outer's done: the returned place stays put, for ad_op_changed. */
static struct ad_job **nested_keep(struct nested *ns, struct ad_job *j)
{
    struct kept_job *k = ad_calloc(1, sizeof(*k));
    k->op.destroy = kept_destroy;
    k->job = j;
    nested_add(ns, &k->op);
    return &k->job;
}

/* Apply op nested in outer; its jobs become outer's changes. Returns the batch-failing error; *ok the op's own. */
static ad_err apply_nested(struct ad_op *outer, struct ad_op *op, struct ad_conn *c, struct nested *ns, int *ok)
{
    nested_add(ns, op);
    op->nchanged = 0;
    ad_err e = ad_writer_apply_nested(st, op, c);
    *ok = e == AD_E_OK && op->err == AD_E_OK;
    if (*ok)
        for (size_t k = 0; k < op->nchanged; k++)
            ad_op_changed(outer, ad_op_change_at(op, k)->job);
    return e;
}

static void recent_add(struct ad_schedule *s, int64_t fire, const char *job_id)
{
    json_t *a = json_loads(s->recent != NULL ? s->recent : "[]", 0, NULL);
    if (!json_is_array(a)) {
        json_decref(a);
        a = json_array();
    }
    char ts[40];
    ad_time_rfc3339(fire, ts, sizeof(ts));
    json_array_insert_new(a, 0, json_pack("{s:s,s:s}", "fireTime", ts, "jobId", job_id));
    while (json_array_size(a) > RECENT_MAX)
        json_array_remove(a, RECENT_MAX);
    free(s->recent);
    s->recent = json_dumps(a, JSON_COMPACT);
    json_decref(a);
}

static void count_skip(struct ad_schedule *s, int64_t n)
{
    s->skips += n;
    ad_metrics_schedule(AD_METRICS_SCHED_PASSED_OVER, (size_t)n);
}

/* The id of the run before the latest in s's recent runs (heap), or NULL. */
static char *previous_run(const struct ad_schedule *s)
{
    json_t *a = json_loads(s->recent != NULL ? s->recent : "[]", 0, NULL);
    char *id = ad_strdup_opt(text_of(json_object_get(json_array_get(a, 1), "jobId")));
    json_decref(a);
    return id;
}

/* bufferOne: s's last job j is held (HOLD_AT) behind the run before it; once that one has ended (or is gone), start
 * j now. *released says whether it did. */
static ad_err release_held(struct ad_op *op, struct ad_conn *c, const struct ad_schedule *s, struct ad_job **j,
                           int64_t now, int *released)
{
    *released = 0;
    if ((*j)->status != AD_QUEUED || (*j)->run_at != HOLD_AT)
        return AD_E_OK;
    char *prev_id = previous_run(s);
    struct ad_job *prev = NULL;
    ad_err e = prev_id != NULL ? st->job_get(c, s->tenant, prev_id, &prev) : AD_E_NOT_FOUND;
    free(prev_id);
    int ended = e == AD_E_NOT_FOUND || (e == AD_E_OK && ad_status_terminal(prev->status));
    ad_job_free(prev);
    if (e != AD_E_OK && e != AD_E_NOT_FOUND)
        return e;
    if (!ended)
        return AD_E_OK;
    (*j)->run_at = now;
    (*j)->updated_at = now;
    e = st->job_update(c, *j);
    if (e == AD_E_OK) {
        *released = 1;
        ad_op_changed(op, j);
    }
    return e;
}

/* One run of s at fire time `fire`, under its overlap policy. */
static ad_err fire_one(struct ad_op *outer, struct ad_conn *c, struct ad_schedule *s, const struct ad_sched_def *d,
                       int64_t fire, int64_t now, struct nested *ns)
{
    struct ad_job *last = NULL;
    if (s->last_job != NULL) {
        ad_err e = st->job_get(c, s->tenant, s->last_job, &last);
        if (e != AD_E_OK && e != AD_E_NOT_FOUND)
            return e;
    }
    int live = last != NULL && !ad_status_terminal(last->status);
    int queued = live && last->status == AD_QUEUED, running = live && last->status == AD_RUNNING;
    if (live && d->overlap == AD_OVERLAP_BUFFER_ONE && queued) {
        /* A held run whose release was missed (its node died as the run before it ended) starts now. */
        int released;
        ad_err e = release_held(outer, c, s, nested_keep(ns, last), now, &released);
        if (e == AD_E_OK)
            count_skip(s, 1);
        return e;
    }
    ad_job_free(last);
    if (live && d->overlap == AD_OVERLAP_SKIP) {
        count_skip(s, 1);
        return AD_E_OK;
    }
    int ok;
    if (live && d->overlap == AD_OVERLAP_CANCEL_OTHER) {
        struct ad_cancel_op *x = ad_cancel_op_new();
        x->tenant = ad_strdup(s->tenant);
        x->id = ad_strdup(s->last_job);
        x->now = now;
        ad_err e = apply_nested(outer, &x->op, c, ns, &ok);
        if (e != AD_E_OK)
            return e;
    }
    struct ad_job *j = job_from_tmpl(s->tmpl);
    if (j == NULL) {
        count_skip(s, 1);
        return AD_E_OK;
    }
    ad_core_job_prepare(j, s->tenant, NULL, now);
    if (running && d->overlap == AD_OVERLAP_BUFFER_ONE)
        j->run_at = HOLD_AT; /* waits behind the running one: released when it ends (ad_schedules_job_event) */
    struct ad_buf b;
    ad_buf_init(&b, SIZE_MAX);
    AD_JSON_OPEN(&b, "id");
    ad_json_str(&b, s->id);
    AD_JSON_KEY(&b, "fireTime");
    ad_json_time(&b, fire);
    AD_BUF_LIT(&b, "}");
    ad_buf_append(&b, "", 1);
    j->schedule = ad_strdup(b.data);
    ad_buf_free(&b);
    /* Each fire starts a trace of its own (docs/tracing.md), its job's span a root. */
    char trace_parent[AD_SPAN_ID_HEX + 1];
    int traced = ad_tracer_made(j, NULL, trace_parent) == 0;
    char *job_id = ad_strdup(j->id);
    struct ad_submit_op *sub = ad_submit_op_new();
    sub->job = j;
    ad_err e = apply_nested(outer, &sub->op, c, ns, &ok);
    if (e == AD_E_OK && ok && traced && !sub->deduplicated && sub->job != NULL)
        ad_tracer_submitted(sub->job, NULL, trace_parent, now);
    if (e == AD_E_OK && ok) {
        free(s->last_job);
        s->last_job = job_id;
        recent_add(s, fire, job_id);
        s->fires++;
        ad_metrics_schedule(AD_METRICS_SCHED_FIRES, 1);
        if (fire < engine_started) {
            s->catchups++;
            ad_metrics_schedule(AD_METRICS_SCHED_CATCHUPS, 1);
        }
    } else {
        free(job_id);
        if (e == AD_E_OK)
            count_skip(s, 1); /* the submit refused it (a callback without its secret): nothing was written */
    }
    return e;
}

/* Run the due fire times of s (read in this transaction) up to now, and write its progress. */
static ad_err fire_due(struct ad_op *outer, struct ad_conn *c, struct ad_schedule *s, int64_t now, struct nested *ns)
{
    struct ad_sched_def d;
    json_t *spec;
    read_def(s, &d, &spec);
    json_decref(spec);
    int64_t expect = s->next_at, t = s->next_at, anchor = ad_schedule_anchor(&d, s->created_at);
    ad_err e = AD_E_OK;
    for (int n = 0; e == AD_E_OK && t != 0 && t <= now && n < FIRES_PER_SCHEDULE; n++) {
        if (d.paused) {
            t = 0;
            break;
        }
        if (now - t > d.catchup_ms) {
            /* Missed past the window: skipped and counted, without a walk through every one of them. */
            int64_t oldest = now - d.catchup_ms;
            if (d.every_ms > 0) {
                int64_t k = (oldest - t + d.every_ms - 1) / d.every_ms;
                count_skip(s, k);
                t += k * d.every_ms;
            } else {
                int64_t k = 0;
                while (t != 0 && t < oldest && k < WINDOW_WALK) {
                    t = ad_schedule_next(&d, anchor, t);
                    k++;
                }
                if (t != 0 && t < oldest)
                    t = ad_schedule_next(&d, anchor, oldest - 1);
                count_skip(s, k);
            }
            if (d.end_at != 0 && t > d.end_at)
                t = 0;
            continue;
        }
        e = fire_one(outer, c, s, &d, t, now, ns);
        t = ad_schedule_next(&d, anchor, t);
    }
    ad_schedule_def_clear(&d);
    if (e != AD_E_OK)
        return e;
    s->next_at = t;
    s->updated_at = now;
    s->version++;
    return st->schedule_put(c, s, 0, expect);
}

/* ---- releasing a held run when the run before it ends ---- */

struct release_op {
    struct ad_op op;
    char *tenant, *id, *ended;
    struct ad_op **nested;
    size_t nnested;
};

static ad_err release_apply(struct ad_op *op, struct ad_conn *c)
{
    struct release_op *x = (struct release_op *)op;
    struct ad_schedule s;
    ad_err e = st->schedule_get(c, x->tenant, x->id, &s);
    if (e != AD_E_OK)
        return e == AD_E_NOT_FOUND ? AD_E_OK : e;
    char *prev = previous_run(&s);
    struct ad_job *last = NULL;
    if (prev != NULL && strcmp(prev, x->ended) == 0 && s.last_job != NULL) {
        e = st->job_get(c, s.tenant, s.last_job, &last);
        if (e == AD_E_OK) {
            struct nested ns = {&x->nested, &x->nnested};
            int released;
            e = release_held(op, c, &s, nested_keep(&ns, last), ad_now_ms(), &released);
        }
    }
    free(prev);
    ad_schedule_clear(&s);
    return e == AD_E_NOT_FOUND ? AD_E_OK : e;
}

static void release_destroy(struct ad_op *op)
{
    struct release_op *x = (struct release_op *)op;
    free(x->tenant);
    free(x->id);
    free(x->ended);
    nested_free(x->nested, x->nnested);
    free(x);
}

static void release_done(struct ad_op *op)
{
    ad_op_free(op);
}

void ad_schedules_job_event(const struct ad_job *j)
{
    if (j->schedule == NULL || !ad_status_terminal(j->status) || !engine_on)
        return;
    json_t *o = json_loads(j->schedule, 0, NULL);
    const char *id = text_of(json_object_get(o, "id"));
    if (id != NULL) {
        struct release_op *x = ad_calloc(1, sizeof(*x));
        x->op.apply = release_apply;
        x->op.destroy = release_destroy;
        x->op.done = release_done;
        x->tenant = ad_strdup(j->tenant);
        x->id = ad_strdup(id);
        x->ended = ad_strdup(j->id);
        ad_writer_submit(&x->op);
    }
    json_decref(o);
}

/* ---- writer operations ---- */

static ad_err schedule_apply(struct ad_op *op, struct ad_conn *c)
{
    struct ad_schedule_op *x = (struct ad_schedule_op *)op;
    struct ad_schedule cur;
    ad_err e = st->schedule_get(c, x->s.tenant, x->s.id, &cur);
    if (x->kind == AD_SCHED_CREATE) {
        ad_schedule_clear(&cur);
        if (e != AD_E_NOT_FOUND)
            return e == AD_E_OK ? AD_E_ALREADY_EXISTS : e;
        struct ad_sched_def d;
        json_t *spec;
        read_def(&x->s, &d, &spec);
        json_decref(spec);
        x->s.next_at = d.paused ? 0 : ad_schedule_next(&d, ad_schedule_anchor(&d, x->s.created_at), x->now);
        ad_schedule_def_clear(&d);
        if (x->s.recent == NULL)
            x->s.recent = ad_strdup("[]");
        x->s.updated_at = x->now;
        x->s.version = 1;
        return st->schedule_put(c, &x->s, 1, 0);
    }
    if (e != AD_E_OK)
        return e;
    if (x->kind == AD_SCHED_DELETE) {
        e = st->schedule_delete(c, x->s.tenant, x->s.id);
        ad_schedule_clear(&x->s);
        x->s = cur;
        return e;
    }
    int64_t expect = cur.next_at;
    if (x->kind == AD_SCHED_REPLACE) {
        if (x->expect_version != 0 && cur.version != x->expect_version) {
            ad_schedule_clear(&cur);
            return AD_E_CONFLICT;
        }
        free(cur.spec);
        free(cur.tmpl);
        cur.spec = x->s.spec;
        cur.tmpl = x->s.tmpl;
        x->s.spec = x->s.tmpl = NULL;
        struct ad_sched_def d;
        json_t *spec;
        read_def(&cur, &d, &spec);
        json_decref(spec);
        /* A pause drops the fire times it covers; a resume, or a new rule, counts from now. */
        cur.next_at = d.paused ? 0 : ad_schedule_next(&d, ad_schedule_anchor(&d, cur.created_at), x->now);
        ad_schedule_def_clear(&d);
    } else {
        struct nested ns = {&x->nested, &x->nnested};
        struct ad_sched_def d;
        json_t *spec;
        read_def(&cur, &d, &spec);
        json_decref(spec);
        e = fire_one(op, c, &cur, &d, x->now, x->now, &ns);
        ad_schedule_def_clear(&d);
        if (e != AD_E_OK) {
            ad_schedule_clear(&cur);
            return e;
        }
    }
    cur.updated_at = x->now;
    cur.version++;
    e = st->schedule_put(c, &cur, 0, expect);
    ad_schedule_clear(&x->s);
    x->s = cur;
    return e;
}

static void schedule_destroy(struct ad_op *op)
{
    struct ad_schedule_op *x = (struct ad_schedule_op *)op;
    ad_schedule_clear(&x->s);
    nested_free(x->nested, x->nnested);
    free(x);
}

struct ad_schedule_op *ad_schedule_op_new(void)
{
    struct ad_schedule_op *x = ad_calloc(1, sizeof(*x));
    st = ad_core_store_ops();
    x->op.apply = schedule_apply;
    x->op.destroy = schedule_destroy;
    return x;
}

/* ---- the engine: one timer for the earliest next fire time ---- */

struct tick_op {
    struct ad_op op;
    int64_t next; /* out: the earliest next fire time left (0 none) */
    int more;     /* out: due schedules were left for another operation */
    struct ad_op **nested;
    size_t nnested;
};

static struct ad_timer timer;

static ad_err tick_apply(struct ad_op *op, struct ad_conn *c)
{
    struct tick_op *x = (struct tick_op *)op;
    int64_t now = ad_now_ms();
    struct ad_schedule_list due;
    ad_err e = st->schedule_due(c, now, TICK_SCHEDULES, &due);
    if (e != AD_E_OK)
        return e;
    struct nested ns = {&x->nested, &x->nnested};
    for (size_t i = 0; e == AD_E_OK && i < due.n; i++)
        e = fire_due(op, c, &due.items[i], now, &ns);
    x->more = due.n == TICK_SCHEDULES;
    ad_schedule_list_free(&due);
    if (e != AD_E_OK)
        return e;
    e = st->schedule_due(c, INT64_MAX, 1, &due);
    if (e == AD_E_OK && due.n == 1) {
        x->next = due.items[0].next_at;
        x->more |= x->next <= now;
    }
    ad_schedule_list_free(&due);
    return e;
}

static void tick_destroy(struct ad_op *op)
{
    struct tick_op *x = (struct tick_op *)op;
    nested_free(x->nested, x->nnested);
    free(x);
}

static void arm(int64_t at)
{
    if (!engine_on)
        return;
    if (engine_cluster) {
        int64_t look = ad_now_ms() + CLUSTER_LOOK_MS;
        if (at == 0 || at > look)
            at = look;
    }
    if (at == 0)
        return;
    /* at is wall-clock ms; the timers count monotonic ms. */
    int64_t now = ad_now_ms(), mono = ad_mono_ms() + (at > now ? at - now : 0);
    if (ad_timer_armed(&timer) && timer.at <= mono)
        return;
    ad_timer_arm(&timer, mono);
}

static void tick_done(struct ad_op *op)
{
    struct tick_op *x = (struct tick_op *)op;
    tick_inflight = 0;
    int64_t next = op->err == AD_E_OK ? x->next : ad_now_ms() + RETRY_MS;
    int again = op->err == AD_E_OK && (x->more || tick_again);
    ad_op_free(op);
    tick_again = 0;
    arm(again ? ad_now_ms() : next);
}

static void tick(struct ad_timer *t)
{
    (void)t;
    if (!engine_on)
        return;
    if (tick_inflight) {
        tick_again = 1;
        return;
    }
    tick_inflight = 1;
    struct tick_op *x = ad_calloc(1, sizeof(*x));
    x->op.apply = tick_apply;
    x->op.destroy = tick_destroy;
    x->op.done = tick_done;
    ad_writer_submit(&x->op);
}

void ad_schedules_start(int cluster)
{
    st = ad_core_store_ops();
    engine_started = ad_now_ms();
    engine_on = 1;
    engine_cluster = cluster;
    timer.cb = tick;
    tick(&timer);
}

void ad_schedules_stop(void)
{
    engine_on = 0;
    if (ad_timer_armed(&timer))
        ad_timer_cancel(&timer);
}

void ad_schedules_wake(int64_t at)
{
    if (at == 0 || !engine_on)
        return;
    if (tick_inflight) {
        tick_again = 1;
        return;
    }
    arm(at);
}
