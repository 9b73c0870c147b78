/*
 * endpoints.c - the operations on endpoints and deliveries that the API hands the writer (webhook.h,
 * struct ad_webhook_op): create an endpoint with its secret, delete it, rotate a secret (the previous one keeps
 * signing for webhooks.rotationGrace when someone was shown it), enable an endpoint a 410 disabled, and send a
 * dead or delivered delivery again from the start of the schedule. They run on the writer thread, inside its
 * transaction; a plain secret lives only in the operation, is answered once and wiped with it. Nothing here
 * sends a request: a redelivery only wakes the delivery thread once its batch has ended.
 */
#include "webhook/webhook_int.h"
#include "core/core.h"

#include <openssl/crypto.h>
#include <stdlib.h>
#include <string.h>

/* The endpoint named id ("callback": the callback secret, created for ROTATE when missing). */
static ad_err find_hook(struct ad_conn *c, struct ad_webhook_op *x, int create, struct ad_webhook **out)
{
    if (strcmp(x->id, "callback") == 0)
        return create ? ad_wh_callback_hook(c, x->tenant, x->now, out)
                      : ad_wh_setup.st->webhook_get(c, x->tenant, NULL, out);
    ad_err e = ad_wh_setup.st->webhook_get(c, x->tenant, x->id, out);
    if (e == AD_E_OK && (*out)->url == NULL) {
        ad_webhook_free(*out);
        *out = NULL;
        e = AD_E_NOT_FOUND;
    }
    return e;
}

static ad_err op_create(struct ad_webhook_op *x, struct ad_conn *c)
{
    struct ad_webhook_list l;
    ad_err e = ad_wh_setup.st->webhook_list(c, x->tenant, 0, &l);
    if (e != AD_E_OK)
        return e;
    size_t n = l.n;
    ad_webhook_list_free(&l);
    if (n >= AD_WEBHOOKS_MAX)
        return AD_E_VALIDATION_FAILED;
    x->hook = ad_wh_hook_new(x->tenant, x->url, x->events, x->now, x->secret);
    return ad_wh_setup.st->webhook_put(c, x->hook);
}

static ad_err op_rotate(struct ad_webhook_op *x, struct ad_conn *c)
{
    ad_err e = find_hook(c, x, 1, &x->hook);
    if (e != AD_E_OK)
        return e;
    struct ad_webhook *w = x->hook;
    /* A secret that was never shown (the callback secret just made, or made by an earlier version for a job)
     * is not kept to sign during a grace period: no receiver knows it. */
    int shown = ad_webhook_secret_shown(w);
    free(w->prev_secret);
    w->prev_secret = NULL;
    w->prev_until = 0;
    if (w->url == NULL)
        w->events = AD_WHE_FINAL;
    if (shown && ad_wh_setup.conf->rotation_grace_ms > 0) {
        w->prev_secret = w->secret;
        w->prev_until = x->now + ad_wh_setup.conf->rotation_grace_ms;
    } else {
        free(w->secret);
    }
    ad_sign_new_secret(x->secret);
    w->secret = ad_seal(w->id, x->secret);
    return ad_wh_setup.st->webhook_put(c, w);
}

static ad_err op_enable(struct ad_webhook_op *x, struct ad_conn *c)
{
    ad_err e = find_hook(c, x, 0, &x->hook);
    if (e != AD_E_OK)
        return e;
    x->hook->disabled_at = 0;
    free(x->hook->disabled_reason);
    x->hook->disabled_reason = NULL;
    return ad_wh_setup.st->webhook_put(c, x->hook);
}

static ad_err op_redeliver(struct ad_webhook_op *x, struct ad_conn *c)
{
    ad_err e = ad_wh_setup.st->delivery_get(c, x->tenant, x->id, 0, &x->delivery);
    if (e != AD_E_OK)
        return e;
    struct ad_delivery *d = x->delivery;
    struct ad_webhook *w = NULL;
    e = ad_wh_setup.st->webhook_get(c, NULL, d->webhook_id, &w);
    int disabled = e == AD_E_OK && w->disabled_at != 0;
    x->hook = w; /* its answer names the endpoint, and why a redelivery was refused */
    if (e != AD_E_OK)
        return e;
    if (d->state == AD_DLV_PENDING || disabled)
        return AD_E_ILLEGAL_TRANSITION;
    /* A fresh run of the whole schedule, same event: the receiver sees the same webhook-id and Idempotency-Key. */
    d->state = AD_DLV_PENDING;
    d->attempts = 0;
    d->next_at = x->now;
    e = ad_wh_setup.st->delivery_update(c, d);
    if (e == AD_E_OK)
        ad_wh_outbox_wrote();
    return e;
}

static ad_err op_apply(struct ad_op *op, struct ad_conn *c)
{
    struct ad_webhook_op *x = (struct ad_webhook_op *)op;
    switch (x->kind) {
    case AD_WHOP_CREATE:
        return op_create(x, c);
    case AD_WHOP_DELETE:
        return ad_wh_setup.st->webhook_delete(c, x->tenant, x->id);
    case AD_WHOP_ROTATE:
        return op_rotate(x, c);
    case AD_WHOP_ENABLE:
        return op_enable(x, c);
    case AD_WHOP_REDELIVER:
        return op_redeliver(x, c);
    }
    return AD_E_INTERNAL;
}

static void op_destroy(struct ad_op *op)
{
    struct ad_webhook_op *x = (struct ad_webhook_op *)op;
    free(x->tenant);
    free(x->id);
    free(x->url);
    ad_webhook_free(x->hook);
    ad_delivery_free(x->delivery);
    OPENSSL_cleanse(x->secret, sizeof(x->secret));
    free(x);
}

struct ad_webhook_op *ad_webhook_op_new(enum ad_webhook_op_kind kind)
{
    struct ad_webhook_op *x = ad_calloc(1, sizeof(*x));
    x->op.apply = op_apply;
    x->op.destroy = op_destroy;
    x->kind = kind;
    return x;
}
