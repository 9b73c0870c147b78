/*
 * webhook.c - the event catalog, the setup every file of src/webhook/ reads, and the outbox (see webhook.h).
 *
 * The writer thread runs ad_webhook_outbox inside the transaction of each job change: the rows of the event it
 * makes, one per destination, with one event id and one body for all of them. The batch that wrote them wakes
 * the delivery thread (delivery.c) when it ends. What an attempt's outcome does is outcome.c's; the
 * operations on endpoints are endpoints.c's. This file sends nothing and starts no thread.
 */
#include "webhook/webhook_int.h"
#include "core/core.h"
#include "common/json.h"

#include <openssl/crypto.h>
#include <stdlib.h>
#include <string.h>

static const char *const event_names[AD_WHE__COUNT] = {
    [AD_WHE_QUEUED] = "job.queued",
    [AD_WHE_STARTED] = "job.started",
    [AD_WHE_PROGRESS] = "job.progress",
    [AD_WHE_SUCCEEDED] = "job.succeeded",
    [AD_WHE_FAILED] = "job.failed",
    [AD_WHE_CANCELLED] = "job.cancelled",
    [AD_WHE_PARTIAL] = "job.partialSuccess",
    [AD_WHE_BATCH_SUCCEEDED] = "batch.succeeded",
    [AD_WHE_BATCH_FAILED] = "batch.failed",
    [AD_WHE_BATCH_CANCELLED] = "batch.cancelled",
    [AD_WHE_BATCH_PARTIAL] = "batch.partialSuccess",
};

struct ad_wh_setup ad_wh_setup;

const char *ad_webhook_event_name(enum ad_webhook_event e)
{
    return e < AD_WHE__COUNT ? event_names[e] : "unknown";
}

int ad_webhook_event_parse(const char *name, enum ad_webhook_event *out)
{
    for (int i = 0; i < AD_WHE__COUNT; i++) {
        if (strcmp(event_names[i], name) == 0) {
            *out = (enum ad_webhook_event)i;
            return 0;
        }
    }
    return -1;
}

int ad_webhook_event_of(enum ad_status before, int progress_before, const struct ad_job *j)
{
    if (j->status == before)
        return j->status == AD_RUNNING && j->progress >= 0 && j->progress != progress_before ? AD_WHE_PROGRESS : -1;
    switch (j->status) {
    case AD_QUEUED:
        return AD_WHE_QUEUED;
    case AD_RUNNING:
        return AD_WHE_STARTED;
    case AD_SUCCEEDED:
        return AD_WHE_SUCCEEDED;
    case AD_FAILED:
        return AD_WHE_FAILED;
    case AD_CANCELLED:
        return AD_WHE_CANCELLED;
    case AD_PARTIAL:
        return AD_WHE_PARTIAL;
    default:
        return -1;
    }
}

void ad_webhook_configure(const struct ad_config *cfg, struct ad_store *store, const char *public_url)
{
    free(ad_wh_setup.public_url);
    free(ad_wh_setup.allow);
    ad_wh_setup.conf = &cfg->webhooks;
    ad_wh_setup.st = store->ops;
    ad_wh_setup.public_url = ad_strdup(public_url != NULL ? public_url : "");
    ad_wh_setup.allow = ad_calloc(cfg->webhooks.nallow_networks + 1, sizeof(*ad_wh_setup.allow));
    for (size_t i = 0; i < cfg->webhooks.nallow_networks; i++)
        ad_cidr_parse(cfg->webhooks.allow_networks[i], &ad_wh_setup.allow[i]); /* validated by the config parser */
    ad_wh_setup.guard.allow = ad_wh_setup.allow;
    ad_wh_setup.guard.nallow = cfg->webhooks.nallow_networks;
    static const struct ad_core_webhooks hooks = {ad_webhook_outbox, ad_webhook_callback_ready,
                                                  ad_webhook_batch_outbox};
    ad_core_set_webhooks(&hooks);
}

const struct ad_ssrf *ad_webhook_guard(void)
{
    return &ad_wh_setup.guard;
}

/* ---- the outbox ---- */

struct ad_webhook *ad_wh_hook_new(const char *tenant, const char *url, unsigned events, int64_t now, char *secret)
{
    struct ad_webhook *w = ad_calloc(1, sizeof(*w));
    w->id = ad_new_id("whk_");
    w->tenant = ad_strdup(tenant);
    w->url = ad_strdup_opt(url);
    w->events = events;
    w->created_at = now;
    ad_sign_new_secret(secret);
    w->secret = ad_seal(w->id, secret);
    return w;
}

ad_err ad_wh_callback_hook(struct ad_conn *c, const char *tenant, int64_t now, struct ad_webhook **out)
{
    ad_err e = ad_wh_setup.st->webhook_get(c, tenant, NULL, out);
    if (e != AD_E_NOT_FOUND)
        return e;
    char secret[AD_SECRET_LEN + 1];
    *out = ad_wh_hook_new(tenant, NULL, 0, now, secret);
    OPENSSL_cleanse(secret, sizeof(secret));
    return ad_wh_setup.st->webhook_put(c, *out);
}

int ad_webhook_secret_shown(const struct ad_webhook *w)
{
    return w->url != NULL || w->events != 0 || w->prev_secret != NULL;
}

ad_err ad_webhook_callback_ready(struct ad_conn *c, const char *tenant)
{
    struct ad_webhook *w = NULL;
    ad_err e = ad_wh_setup.st->webhook_get(c, tenant, NULL, &w);
    if (e == AD_E_OK && !ad_webhook_secret_shown(w))
        e = AD_E_NOT_FOUND;
    ad_webhook_free(w);
    return e == AD_E_NOT_FOUND ? AD_E_CALLBACK_SECRET_MISSING : e;
}

/* One event being written: its id and body are made on the first destination. Its subject is a job's or (kind
 * "batch") a batch's; a job's trace context goes with its deliveries (docs/tracing.md), a batch has none. */
struct outbox_event {
    const char *tenant, *subject, *kind; /* kind: "job" or "batch", the member of data and the path */
    const char *traceparent, *tracestate;
    int64_t at;
    enum ad_webhook_event type;
    char *id;
    char *body;
};

static ad_err outbox_add(struct ad_conn *c, struct outbox_event *ev, const char *hook_id, const char *url)
{
    if (ev->id == NULL) {
        ev->id = ad_new_id("evt_");
        char *job_url = ad_asprintf("%s/v1/%s/%s", ad_wh_setup.public_url,
                                    strcmp(ev->kind, "batch") == 0 ? "batches" : "jobs", ev->subject);
        struct ad_buf b;
        ad_buf_init(&b, SIZE_MAX);
        AD_JSON_OPEN(&b, "id");
        ad_json_str(&b, ev->id);
        AD_JSON_KEY(&b, "type");
        ad_json_str(&b, event_names[ev->type]);
        AD_JSON_KEY(&b, "version");
        AD_BUF_LIT(&b, "\"" AD_WEBHOOK_VERSION "\"");
        AD_JSON_KEY(&b, "createdAt");
        ad_json_time(&b, ev->at);
        AD_BUF_LIT(&b, ",\"data\":{\"");
        ad_buf_str(&b, ev->kind);
        AD_BUF_LIT(&b, "\":");
        ad_json_str(&b, job_url);
        AD_BUF_LIT(&b, "}}");
        ev->body = b.data;
        free(job_url);
    }
    char *id = ad_new_id("dlv_");
    struct ad_delivery d = {
        .id = id,
        .tenant = (char *)ev->tenant,
        .webhook_id = (char *)hook_id,
        .url = (char *)url,
        .event_id = ev->id,
        .event_type = (char *)event_names[ev->type],
        .job_id = (char *)ev->subject,
        .body = ev->body,
        .created_at = ev->at,
        .state = AD_DLV_PENDING,
        .next_at = ev->at + ad_wh_setup.conf->retry_schedule_ms[0],
        .traceparent = (char *)ev->traceparent,
        .tracestate = (char *)ev->tracestate,
    };
    ad_err e = ad_wh_setup.st->delivery_insert(c, &d);
    free(id);
    if (e == AD_E_OK)
        ad_wh_outbox_wrote();
    return e;
}

ad_err ad_webhook_outbox(struct ad_conn *c, enum ad_status before, int progress_before, const struct ad_job *j)
{
    int type = ad_webhook_event_of(before, progress_before, j);
    if (type < 0)
        return AD_E_OK;
    struct ad_webhook_list hooks;
    ad_err e = ad_wh_setup.st->webhook_list(c, j->tenant, 1, &hooks);
    struct outbox_event ev = {.tenant = j->tenant,
                              .subject = j->id,
                              .kind = "job",
                              .traceparent = j->traceparent,
                              .tracestate = j->tracestate,
                              .at = j->updated_at,
                              .type = (enum ad_webhook_event)type};
    for (size_t i = 0; e == AD_E_OK && i < hooks.n; i++)
        if (hooks.items[i]->events & (1u << type))
            e = outbox_add(c, &ev, hooks.items[i]->id, hooks.items[i]->url);
    /* A job's callbackUrl hears of its outcome only. */
    if (e == AD_E_OK && j->callback_url != NULL && ad_status_terminal(j->status) && type != AD_WHE_PROGRESS) {
        struct ad_webhook *cb = NULL;
        e = ad_wh_callback_hook(c, j->tenant, j->updated_at, &cb);
        if (e == AD_E_OK)
            e = outbox_add(c, &ev, cb->id, j->callback_url);
        ad_webhook_free(cb);
    }
    ad_webhook_list_free(&hooks);
    free(ev.id);
    free(ev.body);
    return e;
}

ad_err ad_webhook_batch_outbox(struct ad_conn *c, const struct ad_batch *b, enum ad_status s)
{
    enum ad_webhook_event type = s == AD_SUCCEEDED ? AD_WHE_BATCH_SUCCEEDED
                                 : s == AD_FAILED  ? AD_WHE_BATCH_FAILED
                                 : s == AD_PARTIAL ? AD_WHE_BATCH_PARTIAL
                                                   : AD_WHE_BATCH_CANCELLED;
    struct ad_webhook_list hooks;
    ad_err e = ad_wh_setup.st->webhook_list(c, b->tenant, 1, &hooks);
    struct outbox_event ev = {
        .tenant = b->tenant, .subject = b->id, .kind = "batch", .at = b->finished_at, .type = type};
    for (size_t i = 0; e == AD_E_OK && i < hooks.n; i++)
        if (hooks.items[i]->events & (1u << type))
            e = outbox_add(c, &ev, hooks.items[i]->id, hooks.items[i]->url);
    if (e == AD_E_OK && b->callback_url != NULL) {
        struct ad_webhook *cb = NULL;
        e = ad_wh_callback_hook(c, b->tenant, b->finished_at, &cb);
        if (e == AD_E_OK)
            e = outbox_add(c, &ev, cb->id, b->callback_url);
        ad_webhook_free(cb);
    }
    ad_webhook_list_free(&hooks);
    free(ev.id);
    free(ev.body);
    return e;
}
