/*
 * webhook_int.h - what the files of src/webhook/ share and nothing outside it uses (webhook.h is the public
 * side). webhook.c holds the outbox and the setup every file reads; delivery.c the delivery thread; outcome.c
 * what an attempt's outcome does and how it reaches the writer; slots.c the share of delivery slots each
 * endpoint may have; endpoints.c the operations on endpoints and deliveries.
 */
#ifndef AD_WEBHOOK_INT_H
#define AD_WEBHOOK_INT_H

#include "webhook/webhook.h"

/* Set by ad_webhook_configure before the writer applies operations; read-only afterwards, by every thread. */
struct ad_wh_setup {
    const struct ad_webhooks_conf *conf;
    const struct ad_store_ops *st;
    char *public_url;
    struct ad_cidr *allow;
    struct ad_ssrf guard;
};
extern struct ad_wh_setup ad_wh_setup;

/* ---- webhook.c ---- */

/* A new endpoint row with a fresh secret, sealed; the plain secret is written to secret. The caller frees it
 * (ad_webhook_free). */
struct ad_webhook *ad_wh_hook_new(const char *tenant, const char *url, unsigned events, int64_t now, char *secret);
/* Writer thread: the tenant's callback secret into *out (the caller frees it), created when it has none: not
 * shown (events 0) until a rotate replaces it. */
ad_err ad_wh_callback_hook(struct ad_conn *c, const char *tenant, int64_t now, struct ad_webhook **out);

/* ---- delivery.c ---- */

/* Writer thread: the batch being applied wrote deliveries due now; its end wakes the delivery thread. */
void ad_wh_outbox_wrote(void);
/* Any thread: wake the delivery thread; with reread, its next scan reads the store again instead of starting
 * the due rows it kept. */
void ad_wh_wake(int reread);
/* Any thread: the delivery with this seq may be started again (its outcome is committed, or failed to be). */
void ad_wh_busy_remove(int64_t seq);

/* ---- outcome.c (delivery thread, unless said otherwise) ---- */

/* Judge an attempt that took seconds and queue its outcome for the writer; takes d. */
void ad_wh_settle(struct ad_delivery *d, int is_callback, long status, long retry_after, const char *error,
                  double seconds);
/* Queue d's new state for the writer as it is (disable: the endpoint must be disabled); takes d. */
void ad_wh_results_push(struct ad_delivery *d, int disable);
/* Hand the outcomes queued since the last call to the writer, as one operation. */
void ad_wh_results_flush(void);
/* Have the writer delete the delivered and dead deliveries made before before (wall ms), one batch. */
void ad_wh_sweep(int64_t before);
/* Whether the last sweep deleted a full batch (so another should follow soon). Any thread. */
int ad_wh_sweep_full(void);

/* ---- slots.c (delivery thread only) ---- */

/* An endpoint's record: how many of its transfers are in flight and how it has been answering. */
struct ad_wh_health;

/* Start afresh with these limits (webhooks.perEndpoint and webhooks.concurrency); forgets what was known. */
void ad_wh_slots_init(int per_endpoint, int concurrency);
/* Forget every record; none may have a transfer in flight. */
void ad_wh_slots_reset(void);
/* Whether endpoint id may have one more transfer in flight now. */
int ad_wh_slots_may_start(const char *id);
/* A transfer to endpoint id starts: its record, to hand to judge and end (owned by slots.c). */
struct ad_wh_health *ad_wh_slots_begin(const char *id);
/* The answer of a transfer to h's endpoint (still counted in flight) was good (a quick 2xx) or not. */
void ad_wh_slots_judge(struct ad_wh_health *h, int good);
/* A transfer to h's endpoint ended; h may be freed. */
void ad_wh_slots_end(struct ad_wh_health *h);
/* The ids of up to max endpoints that may not start a transfer now, those with transfers in flight first,
 * into out (pointers into the records, valid until a transfer ends); returns how many. */
size_t ad_wh_slots_full(const char **out, size_t max);
/* The transfers endpoint id may have in flight now (its share after its strikes), for tests and logs. */
size_t ad_wh_slots_cap(const char *id);

#endif
