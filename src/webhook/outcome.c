/*
 * outcome.c - what an attempt's outcome does to a delivery, and how outcomes reach the store.
 *
 * ad_webhook_judge is the rule (pure but for the jitter): success, the retry schedule, Retry-After, 410 Gone,
 * dead letters. The delivery thread never writes: the outcomes of one of its turns are queued here and handed
 * to the writer as one operation, which records them (disabling an endpoint that answered 410, and not
 * retrying a delivery whose endpoint was disabled meanwhile). Until that operation's batch has ended, the
 * deliveries stay busy (delivery.c), so none is sent twice by this process. The sweep of old delivered and
 * dead deliveries is an operation of the same kind. This file starts no transfer and reads no answer.
 */
#include "webhook/webhook_int.h"
#include "core/core.h"
#include "common/metrics.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define SWEEP_BATCH 5000
#define RETRY_AFTER_MAX_S 86400

/* The last sweep deleted a full batch: sweep again soon. */
static atomic_int sweep_full;

void ad_webhook_judge(struct ad_delivery *d, int is_callback, long status, long retry_after_s, const char *error,
                      int64_t now, int *disable)
{
    const struct ad_webhooks_conf *w = ad_wh_setup.conf;
    *disable = 0;
    d->attempts++;
    d->last_at = now;
    d->last_status = (int)status;
    free(d->last_error);
    d->last_error = NULL;
    d->next_at = 0;
    if (status >= 200 && status <= 299) {
        d->state = AD_DLV_DELIVERED;
        return;
    }
    d->last_error = error != NULL ? ad_strdup(error) : ad_asprintf("the receiver answered HTTP %ld", status);
    if (status == 410) {
        /* Gone: the receiver wants no more. An endpoint is disabled; a job's callback just ends. */
        d->state = AD_DLV_DEAD;
        *disable = !is_callback;
        return;
    }
    if ((size_t)d->attempts >= w->nretry_schedule) {
        d->state = AD_DLV_DEAD;
        return;
    }
    /* Up to a tenth more than the schedule, never less: retries of many deliveries spread out. */
    int64_t delay = w->retry_schedule_ms[d->attempts];
    uint32_t r;
    ad_random_bytes((uint8_t *)&r, sizeof(r));
    delay += (int64_t)(r % (uint32_t)(delay / 10 + 1));
    if ((status == 429 || status == 503) && retry_after_s >= 0) {
        int64_t asked = (retry_after_s < RETRY_AFTER_MAX_S ? retry_after_s : RETRY_AFTER_MAX_S) * 1000;
        if (asked > delay)
            delay = asked;
    }
    d->state = AD_DLV_PENDING;
    d->next_at = now + delay;
}

/* Outcomes of attempts, written by the writer: every delivery that ended in one turn of the delivery thread. */
struct result_op {
    struct ad_op op;
    struct ad_delivery **d;
    int *disable;
    size_t n, cap;
    int64_t now;
};

/* The endpoint answered 410: disable it, and its pending deliveries become dead letters. */
static ad_err disable_hook(struct ad_conn *c, const char *hook_id, int64_t now)
{
    struct ad_webhook *w;
    ad_err e = ad_wh_setup.st->webhook_get(c, NULL, hook_id, &w);
    if (e == AD_E_OK && w->disabled_at == 0) {
        w->disabled_at = now;
        w->disabled_reason = ad_strdup("the receiver answered 410 Gone");
        e = ad_wh_setup.st->webhook_put(c, w);
        if (e == AD_E_OK)
            e = ad_wh_setup.st->delivery_abandon(c, w->id, "not sent: the endpoint was disabled (410 Gone)");
        if (e == AD_E_OK)
            ad_warn("webhooks: endpoint %s disabled: the receiver answered 410 Gone", w->id);
    }
    ad_webhook_free(w);
    return e == AD_E_NOT_FOUND ? AD_E_OK : e;
}

/* A delivery to retry whose endpoint was disabled while it was in flight is not retried. */
static ad_err unless_disabled(struct ad_conn *c, struct ad_delivery *d)
{
    struct ad_webhook *w = NULL;
    ad_err e = ad_wh_setup.st->webhook_get(c, NULL, d->webhook_id, &w);
    if (e == AD_E_OK && w->disabled_at != 0) {
        d->state = AD_DLV_DEAD;
        d->next_at = 0;
        free(d->last_error);
        d->last_error = ad_strdup("not sent again: the endpoint was disabled");
    }
    ad_webhook_free(w);
    return e == AD_E_NOT_FOUND ? AD_E_OK : e;
}

static ad_err result_apply(struct ad_op *op, struct ad_conn *c)
{
    struct result_op *x = (struct result_op *)op;
    for (size_t i = 0; i < x->n; i++) {
        ad_err e = x->d[i]->state == AD_DLV_PENDING ? unless_disabled(c, x->d[i]) : AD_E_OK;
        if (e == AD_E_OK)
            e = ad_wh_setup.st->delivery_update(c, x->d[i]);
        if (e == AD_E_NOT_FOUND) /* deleted with its endpoint meanwhile: nothing to record */
            continue;
        if (e == AD_E_OK && x->disable[i])
            e = disable_hook(c, x->d[i]->webhook_id, x->now);
        if (e != AD_E_OK)
            return e; /* none of the outcomes is recorded: those deliveries are sent again */
    }
    return AD_E_OK;
}

/* Event loop thread, once the outcomes are durable (or failed to be): the deliveries may be read again. */
static void result_done(struct ad_op *op)
{
    struct result_op *x = (struct result_op *)op;
    int retry = 0;
    for (size_t i = 0; i < x->n; i++) {
        ad_wh_busy_remove(x->d[i]->seq);
        retry |= x->d[i]->state == AD_DLV_PENDING;
    }
    /* A delivery that ended frees nothing to start; one to retry is due later, which the thread must learn; and
     * outcomes not recorded leave their deliveries due in the store, sooner than the rows the thread kept. */
    if (op->err != AD_E_OK)
        ad_wh_wake(1);
    else if (retry)
        ad_wh_wake(0);
    ad_op_free(op);
}

static void result_destroy(struct ad_op *op)
{
    struct result_op *x = (struct result_op *)op;
    for (size_t i = 0; i < x->n; i++)
        ad_delivery_free(x->d[i]);
    free(x->d);
    free(x->disable);
    free(x);
}

/* The outcomes of this turn, handed to the writer together by ad_wh_results_flush (delivery thread only). */
static struct result_op *results;

void ad_wh_results_push(struct ad_delivery *d, int disable)
{
    if (results == NULL) {
        results = ad_calloc(1, sizeof(*results));
        results->op.apply = result_apply;
        results->op.done = result_done;
        results->op.destroy = result_destroy;
        results->now = ad_now_ms();
    }
    struct result_op *x = results;
    if (x->n == x->cap) {
        x->cap = x->cap != 0 ? x->cap * 2 : 16;
        x->d = ad_realloc(x->d, x->cap * sizeof(*x->d));
        x->disable = ad_realloc(x->disable, x->cap * sizeof(*x->disable));
    }
    x->d[x->n] = d;
    x->disable[x->n] = disable;
    x->n++;
}

void ad_wh_settle(struct ad_delivery *d, int is_callback, long status, long retry_after, const char *error,
                  double seconds)
{
    int disable;
    ad_webhook_judge(d, is_callback, status, retry_after, error, ad_now_ms(), &disable);
    ad_metrics_webhook(d->state == AD_DLV_DELIVERED ? AD_METRICS_WH_DELIVERED
                       : d->state == AD_DLV_DEAD    ? AD_METRICS_WH_DEAD
                                                    : AD_METRICS_WH_RETRYING,
                       seconds);
    ad_wh_results_push(d, disable);
    if (d->state == AD_DLV_DEAD)
        ad_warn("webhooks: delivery %s of %s is a dead letter after %d attempt%s: %s", d->id, d->event_id, d->attempts,
                d->attempts == 1 ? "" : "s", d->last_error != NULL ? d->last_error : "");
}

void ad_wh_results_flush(void)
{
    if (results != NULL)
        ad_writer_submit(&results->op);
    results = NULL;
}

struct sweep_op {
    struct ad_op op;
    int64_t before;
};

static ad_err sweep_apply(struct ad_op *op, struct ad_conn *c)
{
    int done = 0;
    ad_err e = ad_wh_setup.st->delivery_sweep(c, ((struct sweep_op *)op)->before, SWEEP_BATCH, &done);
    atomic_store(&sweep_full, done >= SWEEP_BATCH);
    return e;
}

static void sweep_free(struct ad_op *op)
{
    free(op);
}

static void sweep_done(struct ad_op *op)
{
    ad_op_free(op);
}

void ad_wh_sweep(int64_t before)
{
    struct sweep_op *x = ad_calloc(1, sizeof(*x));
    x->op.apply = sweep_apply;
    x->op.done = sweep_done;
    x->op.destroy = sweep_free;
    x->before = before;
    ad_writer_submit(&x->op);
}

int ad_wh_sweep_full(void)
{
    return atomic_load(&sweep_full);
}
