/*
 * webhook.h - webhooks: the event catalog, the durable outbox, the delivery thread and the operations on
 * endpoints and deliveries.
 *
 * A job change that makes an event writes the event's delivery rows in the same transaction as the change
 * (ad_webhook_outbox, called by the core), one row per destination: the job's callbackUrl for its final event,
 * and every enabled endpoint of the tenant whose filter takes the event. A committed change therefore never
 * loses its notification. The delivery thread reads due rows on its own store connection, sends them with
 * libcurl's multi interface (signed, SSRF-guarded), and hands each outcome back to the writer as an
 * operation. It is woken by the writer after a batch that wrote deliveries, and otherwise sleeps until the
 * soonest retry is due: no table is polled. Delivery is at least once; receivers deduplicate on the event id
 * (Idempotency-Key, webhook-id). The protocol is docs/webhooks.md.
 */
#ifndef AD_WEBHOOK_H
#define AD_WEBHOOK_H

#include "core/config.h"
#include "job/job.h"
#include "common/sign.h"
#include "webhook/ssrf.h"
#include "store/store.h"
#include "core/writer.h"

/* The event catalog, in the order of their bits in an endpoint's filter. */
enum ad_webhook_event {
    AD_WHE_QUEUED,
    AD_WHE_STARTED,
    AD_WHE_PROGRESS, /* opt-in: not in the default filter */
    AD_WHE_SUCCEEDED,
    AD_WHE_FAILED,
    AD_WHE_CANCELLED,
    AD_WHE_PARTIAL,
    AD_WHE_BATCH_SUCCEEDED, /* a batch ended (core/batches.h); opt-in: not in the default filter */
    AD_WHE_BATCH_FAILED,
    AD_WHE_BATCH_CANCELLED,
    AD_WHE_BATCH_PARTIAL,
    AD_WHE__COUNT
};
#define AD_WHE_ALL ((1u << AD_WHE__COUNT) - 1)
#define AD_WHE_BATCH                                                                                                   \
    ((1u << AD_WHE_BATCH_SUCCEEDED) | (1u << AD_WHE_BATCH_FAILED) | (1u << AD_WHE_BATCH_CANCELLED) |                   \
     (1u << AD_WHE_BATCH_PARTIAL))
#define AD_WHE_DEFAULT (AD_WHE_ALL & ~(1u << AD_WHE_PROGRESS) & ~AD_WHE_BATCH)
/* What a job's callbackUrl hears: its outcome. A callback secret's row carries these as its events once its
 * secret has been shown (POST /v1/webhooks/callback:rotate); a row whose events are 0 was made by an earlier
 * version for a job's first callback, with a secret no one was ever shown. */
#define AD_WHE_FINAL                                                                                                   \
    ((1u << AD_WHE_SUCCEEDED) | (1u << AD_WHE_FAILED) | (1u << AD_WHE_CANCELLED) | (1u << AD_WHE_PARTIAL))

/* "job.queued", ... Static storage. */
const char *ad_webhook_event_name(enum ad_webhook_event e);
/* Parse an event name; 0 or -1. */
int ad_webhook_event_parse(const char *name, enum ad_webhook_event *out);
/* The event a change makes: before = the status before it (AD_STATUS__COUNT for a new job), progress_before
 * likewise; -1 when the change makes none. Pure. */
int ad_webhook_event_of(enum ad_status before, int progress_before, const struct ad_job *j);

/* Set once before the writer applies operations: the allow-list, the base of absolute job URLs and the
 * retry schedule (both threads read them afterwards). ad_webhook_start calls it; unit tests call it alone. */
void ad_webhook_configure(const struct ad_config *cfg, struct ad_store *store, const char *public_url);
/* The SSRF guard built from webhooks.allowNetworks. */
const struct ad_ssrf *ad_webhook_guard(void);

/* Whether someone was shown w's current secret: always for an endpoint (its create answered it); for the
 * callback secret once a rotate did (AD_WHE_FINAL), or when an earlier version rotated it (it keeps the
 * previous secret). No delivery is signed with a secret that was never shown. */
int ad_webhook_secret_shown(const struct ad_webhook *w);
/* Writer thread: AD_E_OK when tenant's callback secret has been shown, so that a job with a callbackUrl may be
 * made (submit, :retry); else AD_E_CALLBACK_SECRET_MISSING. */
ad_err ad_webhook_callback_ready(struct ad_conn *c, const char *tenant);

/* Writer thread, inside the transaction of a job change: write the delivery rows of the event the change makes
 * (see ad_webhook_event_of). A callback of a job made before its tenant had a callback secret (by an earlier
 * version) creates one, which signs nothing until a rotate has shown a new one. */
ad_err ad_webhook_outbox(struct ad_conn *c, enum ad_status before, int progress_before, const struct ad_job *j);
/* The event of batch b's end (status s, final), in the same transaction: one row per endpoint that lists it, and
 * one to the batch's callbackUrl, signed with the tenant's callback secret. */
ad_err ad_webhook_batch_outbox(struct ad_conn *c, const struct ad_batch *b, enum ad_status s);

/* What an attempt's outcome does to a delivery (pure except for the jitter): sets state, attempts, next_at,
 * last_*; *disable is set when the endpoint must be disabled (410 from a tenant endpoint). status is the HTTP
 * status (0 = no answer), retry_after_s the Retry-After of a 429/503 (-1 = none), error why it failed. */
void ad_webhook_judge(struct ad_delivery *d, int is_callback, long status, long retry_after_s, const char *error,
                      int64_t now, int *disable);

/* Start the delivery thread (after the writer). Loads the sealing key. 0, or -1 with err filled. */
int ad_webhook_start(const struct ad_config *cfg, struct ad_store *store, const char *public_url, char *err,
                     size_t errlen);
/* Stop the delivery thread (before the writer): transfers in flight are dropped and sent again later. */
void ad_webhook_stop(void);

/*
 * Operations on endpoints and deliveries, applied by the writer. In: kind, tenant, id (an endpoint id, or
 * "callback" for the callback secret; a delivery id for REDELIVER), now, and for CREATE url and events.
 * Out: hook (CREATE, ROTATE, ENABLE), secret (the new plain secret after CREATE and ROTATE: sent once, never
 * logged) and delivery (REDELIVER).
 */
enum ad_webhook_op_kind {
    AD_WHOP_CREATE,
    AD_WHOP_DELETE,
    AD_WHOP_ROTATE,
    AD_WHOP_ENABLE,
    AD_WHOP_REDELIVER,
};

/* The version of the event catalog (docs/webhooks.md): the "version" of every event body and its
 * Webhook-Version header. A new version only for a change a receiver could trip on (a member removed or
 * changed in meaning); added members and event types keep it. */
#define AD_WEBHOOK_VERSION "2026-12-05"
#define AD_WEBHOOKS_MAX 100 /* endpoints per tenant */

struct ad_webhook_op {
    struct ad_op op;
    enum ad_webhook_op_kind kind;
    char *tenant, *id, *url;
    unsigned events;
    int64_t now;
    struct ad_webhook *hook;
    char secret[AD_SECRET_LEN + 1];
    struct ad_delivery *delivery;
    void *ctx;
};
struct ad_webhook_op *ad_webhook_op_new(enum ad_webhook_op_kind kind);

#endif
