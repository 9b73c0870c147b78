/*
 * test_webhook.c - unit tests for src/webhook/webhook.c, outcome.c and endpoints.c, and the webhook rows of
 * the SQLite store: which change makes which event, the outbox rows a change writes (filters, disabled
 * endpoints, the callback secret, one event id for every destination, same transaction as the job), how an
 * attempt's outcome is judged (schedule, jitter, Retry-After, 410, exhaustion) and written (disabling on
 * 410), and the endpoint operations (create, rotate, enable, redeliver, delete).
 * Operations are applied directly on a connection inside begin/commit, as the writer would; no thread, no
 * network.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/core.h"
#include "tmpdir.h"
/* The .c itself, to reach the outcome operation of the delivery thread (see the Makefile's note). */
#include "webhook/outcome.c"

#define T0 INT64_C(1800000000000)
#define BIT(e) (1u << (e))

struct fx {
    char dir[64];
    char data[128];
    struct ad_config cfg;
    struct ad_store *s;
    struct ad_conn *c;
    const struct ad_store_ops *st;
};

static int fx_setup(void **state)
{
    struct fx *f = calloc(1, sizeof(*f));
    if (tmpdir_make(f->dir, sizeof(f->dir), "webhook") != 0)
        return -1;
    snprintf(f->data, sizeof(f->data), "%s/data", f->dir);
    ad_config_defaults(&f->cfg);
    static const char yaml[] = "webhooks: { retrySchedule: [0, 5, 300], allowNetworks: [127.0.0.0/8] }";
    char err[256] = "";
    if (ad_config_load_string(&f->cfg, yaml, strlen(yaml), err, sizeof(err)) != 0) {
        fprintf(stderr, "config: %s\n", err);
        return -1;
    }
    f->s = ad_store_open(f->data, err, sizeof(err));
    if (f->s == NULL || (f->c = f->s->ops->connect(f->s, err, sizeof(err))) == NULL) {
        fprintf(stderr, "store: %s\n", err);
        return -1;
    }
    f->st = f->s->ops;
    uint8_t key[AD_SEAL_KEY_BYTES];
    memset(key, 42, sizeof(key));
    ad_seal_init(key);
    ad_core_init(&f->cfg, f->s);
    ad_webhook_configure(&f->cfg, f->s, "https://jobs.example");
    *state = f;
    return 0;
}

static int fx_teardown(void **state)
{
    struct fx *f = *state;
    f->st->disconnect(f->c);
    f->st->close(f->s);
    ad_config_free(&f->cfg);
    tmpdir_remove(f->dir);
    free(f);
    return 0;
}

/* Apply op in its own transaction, as the writer does; returns its error. */
static ad_err apply(struct fx *f, struct ad_op *op)
{
    assert_int_equal(f->st->begin(f->c), AD_E_OK);
    ad_err e = op->apply(op, f->c);
    if (e == AD_E_OK)
        assert_int_equal(f->st->commit(f->c), AD_E_OK);
    else
        f->st->rollback(f->c);
    return e;
}

static struct ad_job *job_in(const char *tenant, enum ad_status s, int progress, const char *callback)
{
    struct ad_job *j = ad_job_new();
    j->id = ad_new_id("job_");
    j->tenant = strdup(tenant);
    j->type = strdup("t");
    j->payload = strdup("{}");
    j->status = s;
    j->progress = progress;
    j->max_attempts = 3;
    j->created_at = j->updated_at = T0;
    j->callback_url = callback != NULL ? strdup(callback) : NULL;
    return j;
}

/* Create an endpoint through its operation; returns its id (caller frees) and the plain secret. */
static char *create_hook(struct fx *f, const char *tenant, const char *url, unsigned events, char *secret)
{
    struct ad_webhook_op *x = ad_webhook_op_new(AD_WHOP_CREATE);
    x->tenant = strdup(tenant);
    x->url = strdup(url);
    x->events = events;
    x->now = T0;
    assert_int_equal(apply(f, &x->op), AD_E_OK);
    char *id = strdup(x->hook->id);
    if (secret != NULL)
        memcpy(secret, x->secret, sizeof(x->secret));
    ad_op_free(&x->op);
    return id;
}

/* The outbox rows written for one change, in a transaction of their own. */
static void outbox(struct fx *f, enum ad_status before, int progress_before, const struct ad_job *j)
{
    assert_int_equal(f->st->begin(f->c), AD_E_OK);
    assert_int_equal(ad_webhook_outbox(f->c, before, progress_before, j), AD_E_OK);
    assert_int_equal(f->st->commit(f->c), AD_E_OK);
}

static struct ad_delivery_list deliveries_of(struct fx *f, const char *hook_id)
{
    struct ad_delivery_list l;
    assert_int_equal(f->st->delivery_list(f->c, hook_id, -1, 0, 100, &l), AD_E_OK);
    return l;
}

static void test_event_of_each_change(void **state)
{
    struct ad_job *j = job_in("a", AD_QUEUED, -1, NULL);
    assert_int_equal(ad_webhook_event_of(AD_STATUS__COUNT, -1, j), AD_WHE_QUEUED);
    assert_int_equal(ad_webhook_event_of(AD_QUEUED, -1, j), -1);
    j->status = AD_QUEUED;
    assert_int_equal(ad_webhook_event_of(AD_RUNNING, -1, j), AD_WHE_QUEUED); /* a retry requeues it */
    j->status = AD_RUNNING;
    assert_int_equal(ad_webhook_event_of(AD_QUEUED, -1, j), AD_WHE_STARTED);
    assert_int_equal(ad_webhook_event_of(AD_RUNNING, -1, j), -1); /* a heartbeat without progress */
    j->progress = 40;
    assert_int_equal(ad_webhook_event_of(AD_RUNNING, 30, j), AD_WHE_PROGRESS);
    assert_int_equal(ad_webhook_event_of(AD_RUNNING, 40, j), -1);
    static const struct {
        enum ad_status s;
        enum ad_webhook_event e;
        const char *name;
    } ends[] = {{AD_SUCCEEDED, AD_WHE_SUCCEEDED, "job.succeeded"},
                {AD_FAILED, AD_WHE_FAILED, "job.failed"},
                {AD_CANCELLED, AD_WHE_CANCELLED, "job.cancelled"},
                {AD_PARTIAL, AD_WHE_PARTIAL, "job.partialSuccess"}};
    for (size_t i = 0; i < 4; i++) {
        j->status = ends[i].s;
        assert_int_equal(ad_webhook_event_of(AD_RUNNING, 40, j), ends[i].e);
        assert_string_equal(ad_webhook_event_name(ends[i].e), ends[i].name);
        enum ad_webhook_event parsed;
        assert_int_equal(ad_webhook_event_parse(ends[i].name, &parsed), 0);
        assert_int_equal(parsed, ends[i].e);
    }
    enum ad_webhook_event parsed;
    assert_int_equal(ad_webhook_event_parse("job.exploded", &parsed), -1);
    ad_job_free(j);
}

static void test_outbox_follows_filters_and_callback(void **state)
{
    struct fx *f = *state;
    char *all = create_hook(f, "a", "https://a.example/all", AD_WHE_DEFAULT, NULL);
    char *done = create_hook(f, "a", "https://a.example/done", BIT(AD_WHE_SUCCEEDED), NULL);
    char *progress = create_hook(f, "a", "https://a.example/progress", BIT(AD_WHE_PROGRESS), NULL);
    char *other = create_hook(f, "b", "https://b.example/all", AD_WHE_ALL, NULL);

    struct ad_job *j = job_in("a", AD_QUEUED, -1, "https://cb.example/x");
    outbox(f, AD_STATUS__COUNT, -1, j); /* created: job.queued */
    j->status = AD_RUNNING;
    outbox(f, AD_QUEUED, -1, j); /* job.started */
    j->progress = 50;
    outbox(f, AD_RUNNING, -1, j); /* job.progress */
    outbox(f, AD_RUNNING, 50, j); /* nothing */
    j->status = AD_SUCCEEDED;
    j->updated_at = T0 + 1000;
    outbox(f, AD_RUNNING, 50, j); /* job.succeeded */

    struct ad_delivery_list l = deliveries_of(f, all);
    assert_int_equal(l.n, 3);
    assert_string_equal(l.items[0]->event_type, "job.succeeded"); /* newest first */
    assert_string_equal(l.items[1]->event_type, "job.started");
    assert_string_equal(l.items[2]->event_type, "job.queued");
    char *succeeded_event = strdup(l.items[0]->event_id);
    /* The body carries the event, its version and an absolute link to the job, nothing else. */
    json_t *body = json_loads(l.items[0]->body, 0, NULL);
    assert_non_null(body);
    assert_string_equal(json_string_value(json_object_get(body, "id")), succeeded_event);
    assert_string_equal(json_string_value(json_object_get(body, "type")), "job.succeeded");
    assert_string_equal(json_string_value(json_object_get(body, "createdAt")), "2027-01-15T08:00:01.000Z");
    char url[128];
    snprintf(url, sizeof(url), "https://jobs.example/v1/jobs/%s", j->id);
    assert_string_equal(json_string_value(json_object_get(json_object_get(body, "data"), "job")), url);
    /* And the catalog version it was made under (docs/webhooks.md). */
    assert_string_equal(json_string_value(json_object_get(body, "version")), AD_WEBHOOK_VERSION);
    assert_int_equal(json_object_size(body), 5);
    json_decref(body);
    assert_int_equal(l.items[0]->state, AD_DLV_PENDING);
    assert_int_equal(l.items[0]->next_at, T0 + 1000); /* the schedule's first delay is 0 */
    assert_string_equal(l.items[0]->url, "https://a.example/all");
    ad_delivery_list_free(&l);

    l = deliveries_of(f, done);
    assert_int_equal(l.n, 1);
    assert_string_equal(l.items[0]->event_id, succeeded_event); /* one event id for every destination */
    ad_delivery_list_free(&l);
    l = deliveries_of(f, progress);
    assert_int_equal(l.n, 1);
    assert_string_equal(l.items[0]->event_type, "job.progress");
    ad_delivery_list_free(&l);
    l = deliveries_of(f, other);
    assert_int_equal(l.n, 0); /* another tenant's endpoint hears nothing */
    ad_delivery_list_free(&l);

    /* The callbackUrl hears the outcome only, under the tenant's callback secret, here made on the way (a job an
     * earlier version took without one): never shown, so it signs nothing and jobs with a callbackUrl wait for a
     * rotate. */
    struct ad_webhook *cb;
    assert_int_equal(f->st->webhook_get(f->c, "a", NULL, &cb), AD_E_OK);
    assert_null(cb->url);
    assert_false(ad_webhook_secret_shown(cb));
    assert_int_equal(ad_webhook_callback_ready(f->c, "a"), AD_E_CALLBACK_SECRET_MISSING);
    char *plain = ad_unseal(cb->id, cb->secret);
    assert_non_null(plain);
    assert_int_equal(strncmp(plain, "whsec_", 6), 0);
    free(plain);
    l = deliveries_of(f, cb->id);
    assert_int_equal(l.n, 1);
    assert_string_equal(l.items[0]->url, "https://cb.example/x");
    assert_string_equal(l.items[0]->event_id, succeeded_event);
    ad_delivery_list_free(&l);
    /* The callback secret is not an endpoint. */
    struct ad_webhook_list hooks;
    assert_int_equal(f->st->webhook_list(f->c, "a", 0, &hooks), AD_E_OK);
    assert_int_equal(hooks.n, 3);
    ad_webhook_list_free(&hooks);
    ad_webhook_free(cb);

    free(succeeded_event);
    free(all);
    free(done);
    free(progress);
    free(other);
    ad_job_free(j);
}

static void test_outbox_is_in_the_job_transaction(void **state)
{
    struct fx *f = *state;
    char *hook = create_hook(f, "a", "https://a.example/all", AD_WHE_DEFAULT, NULL);
    /* Through the core: a submit that commits writes its event; one that rolls back writes nothing. */
    struct ad_submit_op *s = ad_submit_op_new();
    s->job = job_in("a", AD_QUEUED, -1, NULL);
    assert_int_equal(f->st->begin(f->c), AD_E_OK);
    assert_int_equal(s->op.apply(&s->op, f->c), AD_E_OK);
    f->st->rollback(f->c);
    ad_op_free(&s->op);
    struct ad_delivery_list l = deliveries_of(f, hook);
    assert_int_equal(l.n, 0);
    ad_delivery_list_free(&l);

    s = ad_submit_op_new();
    s->job = job_in("a", AD_QUEUED, -1, NULL);
    assert_int_equal(apply(f, &s->op), AD_E_OK);
    l = deliveries_of(f, hook);
    assert_int_equal(l.n, 1);
    assert_string_equal(l.items[0]->job_id, s->job->id);
    assert_string_equal(l.items[0]->event_type, "job.queued");
    ad_delivery_list_free(&l);
    ad_op_free(&s->op);
    free(hook);
}

static void test_disabled_endpoint_gets_nothing(void **state)
{
    struct fx *f = *state;
    char *hook = create_hook(f, "a", "https://a.example/all", AD_WHE_DEFAULT, NULL);
    struct ad_webhook *w;
    assert_int_equal(f->st->webhook_get(f->c, "a", hook, &w), AD_E_OK);
    w->disabled_at = T0;
    assert_int_equal(f->st->begin(f->c), AD_E_OK);
    assert_int_equal(f->st->webhook_put(f->c, w), AD_E_OK);
    assert_int_equal(f->st->commit(f->c), AD_E_OK);
    ad_webhook_free(w);
    struct ad_job *j = job_in("a", AD_QUEUED, -1, NULL);
    outbox(f, AD_STATUS__COUNT, -1, j);
    struct ad_delivery_list l = deliveries_of(f, hook);
    assert_int_equal(l.n, 0);
    ad_delivery_list_free(&l);
    /* Enabled again, it hears the next event. */
    struct ad_webhook_op *x = ad_webhook_op_new(AD_WHOP_ENABLE);
    x->tenant = strdup("a");
    x->id = strdup(hook);
    assert_int_equal(apply(f, &x->op), AD_E_OK);
    assert_int_equal(x->hook->disabled_at, 0);
    ad_op_free(&x->op);
    j->status = AD_RUNNING;
    outbox(f, AD_QUEUED, -1, j);
    l = deliveries_of(f, hook);
    assert_int_equal(l.n, 1);
    ad_delivery_list_free(&l);
    ad_job_free(j);
    free(hook);
}

static struct ad_delivery *fresh_delivery(void)
{
    struct ad_delivery *d = calloc(1, sizeof(*d));
    d->state = AD_DLV_PENDING;
    return d;
}

static void test_judge_schedule_and_outcomes(void **state)
{
    int disable;
    struct ad_delivery *d = fresh_delivery();
    /* 500 after the first attempt: the schedule's second delay (5 s) plus at most a tenth. */
    for (int i = 0; i < 50; i++) {
        d->attempts = 0;
        ad_webhook_judge(d, 0, 500, -1, NULL, T0, &disable);
        assert_int_equal(d->state, AD_DLV_PENDING);
        assert_int_equal(d->attempts, 1);
        assert_true(d->next_at >= T0 + 5000 && d->next_at <= T0 + 5500);
        assert_int_equal(d->last_status, 500);
        assert_non_null(strstr(d->last_error, "HTTP 500"));
        assert_int_equal(disable, 0);
    }
    /* Retry-After on 429 and 503 is honoured when it asks for more than the schedule. */
    d->attempts = 0;
    ad_webhook_judge(d, 0, 429, 120, NULL, T0, &disable);
    assert_int_equal(d->next_at, T0 + 120000);
    d->attempts = 0;
    ad_webhook_judge(d, 0, 503, 1, NULL, T0, &disable);
    assert_true(d->next_at >= T0 + 5000); /* never earlier than the schedule */
    d->attempts = 0;
    ad_webhook_judge(d, 0, 500, 120, NULL, T0, &disable);
    assert_true(d->next_at <= T0 + 5500); /* only 429 and 503 carry a meaningful Retry-After */
    d->attempts = 0;
    ad_webhook_judge(d, 0, 429, 999999999, NULL, T0, &disable);
    assert_int_equal(d->next_at, T0 + 86400 * INT64_C(1000)); /* capped at a day */
    /* A redirect is a failure: redirects are never followed. */
    d->attempts = 0;
    ad_webhook_judge(d, 0, 302, -1, NULL, T0, &disable);
    assert_int_equal(d->state, AD_DLV_PENDING);
    assert_non_null(strstr(d->last_error, "302"));
    /* No answer at all: the error says why. */
    d->attempts = 1;
    ad_webhook_judge(d, 0, 0, -1, "refused: 10.0.0.1 is private", T0, &disable);
    assert_int_equal(d->state, AD_DLV_PENDING);
    assert_true(d->next_at >= T0 + 300000 && d->next_at <= T0 + 330000);
    assert_string_equal(d->last_error, "refused: 10.0.0.1 is private");
    assert_int_equal(d->last_status, 0);
    /* The last attempt of the schedule failing makes a dead letter. */
    ad_webhook_judge(d, 0, 500, -1, NULL, T0, &disable);
    assert_int_equal(d->attempts, 3);
    assert_int_equal(d->state, AD_DLV_DEAD);
    assert_int_equal(d->next_at, 0);
    /* 2xx delivers and clears the error. */
    d->attempts = 1;
    ad_webhook_judge(d, 0, 204, -1, NULL, T0 + 7, &disable);
    assert_int_equal(d->state, AD_DLV_DELIVERED);
    assert_null(d->last_error);
    assert_int_equal(d->last_at, T0 + 7);
    /* 410 ends the delivery; an endpoint is disabled, a job's callback is not. */
    d->attempts = 0;
    ad_webhook_judge(d, 0, 410, -1, NULL, T0, &disable);
    assert_int_equal(d->state, AD_DLV_DEAD);
    assert_int_equal(disable, 1);
    d->attempts = 0;
    ad_webhook_judge(d, 1, 410, -1, NULL, T0, &disable);
    assert_int_equal(d->state, AD_DLV_DEAD);
    assert_int_equal(disable, 0);
    ad_delivery_free(d);
}

static void test_rotation_keeps_the_old_secret_signing(void **state)
{
    struct fx *f = *state;
    char first[AD_SECRET_LEN + 1];
    char *hook = create_hook(f, "a", "https://a.example/all", AD_WHE_DEFAULT, first);
    assert_int_equal(strlen(first), AD_SECRET_LEN);
    struct ad_webhook_op *x = ad_webhook_op_new(AD_WHOP_ROTATE);
    x->tenant = strdup("a");
    x->id = strdup(hook);
    x->now = T0 + 5;
    assert_int_equal(apply(f, &x->op), AD_E_OK);
    assert_string_not_equal(x->secret, first);
    char *now_secret = ad_unseal(hook, x->hook->secret), *prev = ad_unseal(hook, x->hook->prev_secret);
    assert_string_equal(now_secret, x->secret);
    assert_string_equal(prev, first);
    assert_int_equal(x->hook->prev_until, T0 + 5 + f->cfg.webhooks.rotation_grace_ms);
    free(now_secret);
    free(prev);
    ad_op_free(&x->op);
    /* Another tenant cannot rotate it. */
    x = ad_webhook_op_new(AD_WHOP_ROTATE);
    x->tenant = strdup("b");
    x->id = strdup(hook);
    assert_int_equal(apply(f, &x->op), AD_E_NOT_FOUND);
    ad_op_free(&x->op);
    /* "callback" rotates the callback secret, making it when there is none: the one it answers is the only one
     * that signs (none made on the way is kept for a grace period), and jobs with a callbackUrl may be made. */
    assert_int_equal(ad_webhook_callback_ready(f->c, "a"), AD_E_CALLBACK_SECRET_MISSING);
    x = ad_webhook_op_new(AD_WHOP_ROTATE);
    x->tenant = strdup("a");
    x->id = strdup("callback");
    assert_int_equal(apply(f, &x->op), AD_E_OK);
    assert_null(x->hook->url);
    assert_null(x->hook->prev_secret);
    assert_int_equal(x->hook->events, AD_WHE_FINAL);
    ad_op_free(&x->op);
    assert_int_equal(ad_webhook_callback_ready(f->c, "a"), AD_E_OK);
    /* The stored row never holds a plain secret. */
    struct ad_webhook *w;
    assert_int_equal(f->st->webhook_get(f->c, "a", hook, &w), AD_E_OK);
    assert_null(strstr(w->secret, "whsec_"));
    assert_null(strstr(w->prev_secret, first + 6));
    ad_webhook_free(w);
    free(hook);
}

static void test_redeliver_and_delete(void **state)
{
    struct fx *f = *state;
    char *hook = create_hook(f, "a", "https://a.example/all", AD_WHE_DEFAULT, NULL);
    struct ad_job *j = job_in("a", AD_QUEUED, -1, NULL);
    outbox(f, AD_STATUS__COUNT, -1, j);
    struct ad_delivery_list l = deliveries_of(f, hook);
    struct ad_delivery *d = l.items[0];
    struct ad_webhook_op *x = ad_webhook_op_new(AD_WHOP_REDELIVER);
    x->tenant = strdup("a");
    x->id = strdup(d->id);
    x->now = T0 + 60000;
    assert_int_equal(apply(f, &x->op), AD_E_ILLEGAL_TRANSITION); /* still pending */
    ad_op_free(&x->op);
    /* Dead after its attempts: listed as a dead letter, then sent again on request. */
    d->state = AD_DLV_DEAD;
    d->attempts = 3;
    d->last_at = T0 + 1000;
    d->last_status = 500;
    assert_int_equal(f->st->begin(f->c), AD_E_OK);
    assert_int_equal(f->st->delivery_update(f->c, d), AD_E_OK);
    assert_int_equal(f->st->commit(f->c), AD_E_OK);
    struct ad_delivery_list dead;
    assert_int_equal(f->st->delivery_list(f->c, hook, AD_DLV_DEAD, 0, 10, &dead), AD_E_OK);
    assert_int_equal(dead.n, 1);
    ad_delivery_list_free(&dead);
    struct ad_due due[4];
    size_t n;
    assert_int_equal(f->st->delivery_due(f->c, NULL, 0, 4, due, &n), AD_E_OK);
    assert_int_equal(n, 0);
    x = ad_webhook_op_new(AD_WHOP_REDELIVER);
    x->tenant = strdup("b");
    x->id = strdup(d->id);
    assert_int_equal(apply(f, &x->op), AD_E_NOT_FOUND); /* another tenant's delivery */
    ad_op_free(&x->op);
    x = ad_webhook_op_new(AD_WHOP_REDELIVER);
    x->tenant = strdup("a");
    x->id = strdup(d->id);
    x->now = T0 + 60000;
    assert_int_equal(apply(f, &x->op), AD_E_OK);
    assert_int_equal(x->delivery->state, AD_DLV_PENDING);
    assert_int_equal(x->delivery->attempts, 0);
    assert_string_equal(x->delivery->event_id, d->event_id); /* the same event, the same Idempotency-Key */
    ad_op_free(&x->op);
    assert_int_equal(f->st->delivery_due(f->c, NULL, 0, 4, due, &n), AD_E_OK);
    assert_int_equal(n, 1);
    assert_int_equal(due[0].seq, d->seq);
    assert_int_equal(due[0].next_at, T0 + 60000);
    ad_delivery_list_free(&l);

    /* Deleting the endpoint deletes its deliveries. */
    x = ad_webhook_op_new(AD_WHOP_DELETE);
    x->tenant = strdup("a");
    x->id = strdup(hook);
    assert_int_equal(apply(f, &x->op), AD_E_OK);
    ad_op_free(&x->op);
    assert_int_equal(f->st->delivery_due(f->c, NULL, 0, 4, due, &n), AD_E_OK);
    assert_int_equal(n, 0);
    x = ad_webhook_op_new(AD_WHOP_DELETE);
    x->tenant = strdup("a");
    x->id = strdup(hook);
    assert_int_equal(apply(f, &x->op), AD_E_NOT_FOUND);
    ad_op_free(&x->op);
    ad_job_free(j);
    free(hook);
}

/* A job of tenant changed at `at`: the outbox rows of its event. */
static void event_at(struct fx *f, const char *tenant, int64_t at)
{
    struct ad_job *j = job_in(tenant, AD_QUEUED, -1, NULL);
    j->updated_at = at;
    outbox(f, AD_STATUS__COUNT, -1, j);
    ad_job_free(j);
}

static void test_due_leaves_out_full_endpoints(void **state)
{
    struct fx *f = *state;
    char *ha = create_hook(f, "a", "https://a.example/all", AD_WHE_DEFAULT, NULL);
    char *hb = create_hook(f, "b", "https://b.example/all", AD_WHE_DEFAULT, NULL);
    event_at(f, "a", T0);
    event_at(f, "b", T0 + 1);
    event_at(f, "a", T0 + 2);
    struct ad_due due[8];
    size_t n;
    assert_int_equal(f->st->delivery_due(f->c, NULL, 0, 8, due, &n), AD_E_OK);
    assert_int_equal(n, 3);
    assert_string_equal(due[0].webhook_id, ha);
    assert_string_equal(due[1].webhook_id, hb);
    assert_string_equal(due[2].webhook_id, ha);
    /* a has its share in flight: only b's delivery, even though a's come first. */
    const char *full[] = {ha};
    assert_int_equal(f->st->delivery_due(f->c, full, 1, 8, due, &n), AD_E_OK);
    assert_int_equal(n, 1);
    assert_string_equal(due[0].webhook_id, hb);
    free(ha);
    free(hb);
}

static void test_due_order_abandon_and_sweep(void **state)
{
    struct fx *f = *state;
    char *hook = create_hook(f, "a", "https://a.example/all", AD_WHE_DEFAULT, NULL);
    /* Three events at different times: due soonest first. */
    event_at(f, "a", T0 + 3000);
    event_at(f, "a", T0 + 1000);
    event_at(f, "a", T0 + 2000);
    struct ad_due due[8];
    size_t n;
    assert_int_equal(f->st->delivery_due(f->c, NULL, 0, 8, due, &n), AD_E_OK);
    assert_int_equal(n, 3);
    assert_int_equal(due[0].next_at, T0 + 1000);
    assert_int_equal(due[1].next_at, T0 + 2000);
    assert_int_equal(due[2].next_at, T0 + 3000);
    assert_int_equal(f->st->delivery_due(f->c, NULL, 0, 2, due, &n), AD_E_OK);
    assert_int_equal(n, 2);
    /* Abandoning an endpoint's deliveries makes them dead letters with the reason. */
    assert_int_equal(f->st->begin(f->c), AD_E_OK);
    assert_int_equal(f->st->delivery_abandon(f->c, hook, "not sent: the endpoint was disabled"), AD_E_OK);
    assert_int_equal(f->st->commit(f->c), AD_E_OK);
    assert_int_equal(f->st->delivery_due(f->c, NULL, 0, 8, due, &n), AD_E_OK);
    assert_int_equal(n, 0);
    struct ad_delivery_list l;
    assert_int_equal(f->st->delivery_list(f->c, hook, AD_DLV_DEAD, 0, 10, &l), AD_E_OK);
    assert_int_equal(l.n, 3);
    assert_string_equal(l.items[0]->last_error, "not sent: the endpoint was disabled");
    /* Paging: newest first, before a seq. */
    struct ad_delivery_list page;
    assert_int_equal(f->st->delivery_list(f->c, hook, -1, l.items[0]->seq, 10, &page), AD_E_OK);
    assert_int_equal(page.n, 2);
    assert_int_equal(page.items[0]->seq, l.items[1]->seq);
    ad_delivery_list_free(&page);
    ad_delivery_list_free(&l);
    /* The sweep deletes finished deliveries created before the cutoff, and only those. */
    int done = 0;
    assert_int_equal(f->st->begin(f->c), AD_E_OK);
    assert_int_equal(f->st->delivery_sweep(f->c, T0 + 2500, 100, &done), AD_E_OK);
    assert_int_equal(f->st->commit(f->c), AD_E_OK);
    assert_int_equal(done, 2);
    l = deliveries_of(f, hook);
    assert_int_equal(l.n, 1);
    ad_delivery_list_free(&l);
    free(hook);
}

/* Take the outcomes queued by ad_wh_settle() and apply them as the writer would. */
static ad_err apply_results(struct fx *f)
{
    struct result_op *x = results;
    results = NULL;
    assert_non_null(x);
    ad_err e = apply(f, &x->op);
    ad_op_free(&x->op);
    return e;
}

static void test_outcomes_follow_the_endpoint(void **state)
{
    struct fx *f = *state;
    char *hook = create_hook(f, "a", "https://a.example/all", AD_WHE_DEFAULT, NULL);
    for (int i = 0; i < 3; i++) {
        struct ad_job *j = job_in("a", AD_QUEUED, -1, NULL);
        outbox(f, AD_STATUS__COUNT, -1, j);
        ad_job_free(j);
    }
    struct ad_delivery_list l = deliveries_of(f, hook);
    assert_int_equal(l.n, 3);
    /* One attempt answered 500, one 410: the 410 disables the endpoint and the other pending deliveries
     * become dead letters, including the one whose retry was decided while it was in flight. */
    struct ad_delivery *failed = l.items[0], *gone = l.items[1];
    l.items[0] = l.items[1] = NULL;
    ad_wh_settle(gone, 0, 410, -1, NULL, 0);
    ad_wh_settle(failed, 0, 500, -1, NULL, 0); /* its retry is decided after the 410 in the same batch */
    assert_int_equal(apply_results(f), AD_E_OK);
    ad_delivery_list_free(&l);
    struct ad_webhook *w;
    assert_int_equal(f->st->webhook_get(f->c, "a", hook, &w), AD_E_OK);
    assert_true(w->disabled_at != 0);
    assert_non_null(strstr(w->disabled_reason, "410"));
    ad_webhook_free(w);
    l = deliveries_of(f, hook);
    for (size_t i = 0; i < l.n; i++)
        if (l.items[i]->state != AD_DLV_DEAD)
            fail_msg("delivery %zu is %d, not dead", i, l.items[i]->state);
    assert_int_equal(l.items[0]->last_status, 500);
    assert_int_equal(l.items[0]->attempts, 1);
    assert_non_null(strstr(l.items[0]->last_error, "not sent again"));
    assert_int_equal(l.items[1]->last_status, 410);
    assert_int_equal(l.items[2]->attempts, 0); /* never sent */
    assert_non_null(strstr(l.items[2]->last_error, "disabled"));
    /* An outcome for a delivery whose endpoint was deleted meanwhile is dropped, not an error. */
    struct ad_delivery *late = l.items[0];
    l.items[0] = NULL;
    ad_delivery_list_free(&l);
    struct ad_webhook_op *x = ad_webhook_op_new(AD_WHOP_DELETE);
    x->tenant = strdup("a");
    x->id = strdup(hook);
    assert_int_equal(apply(f, &x->op), AD_E_OK);
    ad_op_free(&x->op);
    ad_wh_settle(late, 0, 200, -1, NULL, 0);
    assert_int_equal(apply_results(f), AD_E_OK);
    free(hook);
}

static void test_endpoint_limit(void **state)
{
    struct fx *f = *state;
    for (int i = 0; i < AD_WEBHOOKS_MAX; i++)
        free(create_hook(f, "a", "https://a.example/x", AD_WHE_DEFAULT, NULL));
    struct ad_webhook_op *x = ad_webhook_op_new(AD_WHOP_CREATE);
    x->tenant = strdup("a");
    x->url = strdup("https://a.example/one-too-many");
    assert_int_equal(apply(f, &x->op), AD_E_VALIDATION_FAILED);
    ad_op_free(&x->op);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_event_of_each_change),
        cmocka_unit_test_setup_teardown(test_outbox_follows_filters_and_callback, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_outbox_is_in_the_job_transaction, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_disabled_endpoint_gets_nothing, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_judge_schedule_and_outcomes, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_rotation_keeps_the_old_secret_signing, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_redeliver_and_delete, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_due_leaves_out_full_endpoints, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_due_order_abandon_and_sweep, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_outcomes_follow_the_endpoint, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_endpoint_limit, fx_setup, fx_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
