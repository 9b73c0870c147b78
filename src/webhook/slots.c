/*
 * slots.c - the share of the delivery slots each endpoint may have, from how it has been answering.
 *
 * An endpoint (a tenant's job callbacks count as one) may have perEndpoint >> strikes transfers in flight, and
 * never fewer than one. A failed or slow attempt adds a strike, a quick 2xx takes one away, so an endpoint
 * that keeps failing is down to one slot after a few attempts and back to its full share after as many good
 * ones. Endpoints with strikes together hold at most TROUBLED_QUARTERS quarters of the slots: the rest are
 * always there for endpoints that answer well, however many fail. Only endpoints with a transfer in flight or
 * a strike have a record. What makes an answer good or slow is the caller's (delivery.c) to say; this file
 * does no I/O, keeps its state in memory only (each node its own) and is used by the delivery thread alone.
 */
#include "webhook/webhook_int.h"
#include "common/util.h"

#include <stdlib.h>
#include <string.h>

#define HEALTH_BUCKETS 256
/* Records of endpoints with strikes and nothing in flight beyond this many are all forgotten at once: a
 * failing endpoint then gets its share again once, and loses it at its next failures. */
#define HEALTH_IDLE_MAX 4096
/* Endpoints with strikes hold at most this share of the slots (in quarters), whatever their number. */
#define TROUBLED_QUARTERS 3

struct ad_wh_health {
    struct ad_wh_health *next; /* in its bucket */
    char *id;                  /* the webhook id */
    size_t inflight;
    unsigned strikes;
};

static struct {
    size_t per, conc;
    unsigned strikes_max; /* the strikes that bring per down to 1 */
    struct ad_wh_health *bucket[HEALTH_BUCKETS];
    size_t idle;     /* records with strikes and nothing in flight */
    size_t troubled; /* transfers in flight to endpoints with strikes */
} slots;

static struct ad_wh_health **health_bucket(const char *id)
{
    uint32_t x = 2166136261u; /* FNV-1a */
    for (const unsigned char *p = (const unsigned char *)id; *p != '\0'; p++)
        x = (x ^ *p) * 16777619u;
    return &slots.bucket[x % HEALTH_BUCKETS];
}

/* The record of endpoint id; with create, made when missing (no strikes, nothing in flight). */
static struct ad_wh_health *health_find(const char *id, int create)
{
    struct ad_wh_health **b = health_bucket(id);
    for (struct ad_wh_health *h = *b; h != NULL; h = h->next)
        if (strcmp(h->id, id) == 0)
            return h;
    if (!create)
        return NULL;
    struct ad_wh_health *h = ad_calloc(1, sizeof(*h));
    h->id = ad_strdup(id);
    h->next = *b;
    *b = h;
    return h;
}

static void health_unlink(struct ad_wh_health *h)
{
    struct ad_wh_health **pp = health_bucket(h->id);
    while (*pp != h)
        pp = &(*pp)->next;
    *pp = h->next;
    free(h->id);
    free(h);
}

/* Forget every record with nothing in flight (when too many failing endpoints are remembered, and at a reset). */
static void forget_idle(void)
{
    for (size_t i = 0; i < HEALTH_BUCKETS; i++) {
        struct ad_wh_health **pp = &slots.bucket[i];
        while (*pp != NULL) {
            struct ad_wh_health *h = *pp;
            if (h->inflight > 0) {
                pp = &h->next;
                continue;
            }
            *pp = h->next;
            free(h->id);
            free(h);
        }
    }
    slots.idle = 0;
}

/* The transfers h's endpoint may have in flight. */
static size_t health_cap(const struct ad_wh_health *h)
{
    size_t cap = slots.per >> h->strikes;
    return cap > 0 ? cap : 1;
}

static int may_start(const struct ad_wh_health *h)
{
    size_t troubled_max = slots.conc - slots.conc * (4 - TROUBLED_QUARTERS) / 4;
    return h->inflight < health_cap(h) && (h->strikes == 0 || slots.troubled < troubled_max);
}

void ad_wh_slots_init(int per_endpoint, int concurrency)
{
    ad_wh_slots_reset();
    slots.per = (size_t)per_endpoint;
    slots.conc = (size_t)concurrency;
    slots.strikes_max = 0;
    while ((slots.per >> slots.strikes_max) > 1)
        slots.strikes_max++;
    if (slots.strikes_max == 0)
        slots.strikes_max = 1; /* perEndpoint 1: a strike still counts against the slots of troubled endpoints */
}

void ad_wh_slots_reset(void)
{
    forget_idle();
    slots.troubled = 0;
}

int ad_wh_slots_may_start(const char *id)
{
    const struct ad_wh_health *h = health_find(id, 0);
    return h == NULL || may_start(h); /* no record: nothing in flight, no strikes */
}

size_t ad_wh_slots_cap(const char *id)
{
    const struct ad_wh_health *h = health_find(id, 0);
    return h != NULL ? health_cap(h) : slots.per;
}

struct ad_wh_health *ad_wh_slots_begin(const char *id)
{
    struct ad_wh_health *h = health_find(id, 1);
    if (h->inflight++ == 0 && h->strikes > 0)
        slots.idle--;
    if (h->strikes > 0)
        slots.troubled++;
    return h;
}

void ad_wh_slots_judge(struct ad_wh_health *h, int good)
{
    unsigned before = h->strikes;
    if (good && h->strikes > 0)
        h->strikes--;
    else if (!good && h->strikes < slots.strikes_max)
        h->strikes++;
    if (before == 0 && h->strikes > 0)
        slots.troubled += h->inflight;
    else if (before > 0 && h->strikes == 0)
        slots.troubled -= h->inflight;
}

void ad_wh_slots_end(struct ad_wh_health *h)
{
    if (h->strikes > 0)
        slots.troubled--;
    if (--h->inflight > 0)
        return;
    if (h->strikes == 0)
        health_unlink(h);
    else if (++slots.idle > HEALTH_IDLE_MAX)
        forget_idle();
}

size_t ad_wh_slots_full(const char **out, size_t max)
{
    size_t n = 0;
    for (int pass = 0; pass < 2; pass++)
        for (size_t i = 0; i < HEALTH_BUCKETS; i++)
            for (const struct ad_wh_health *h = slots.bucket[i]; h != NULL && n < max; h = h->next)
                if ((h->inflight > 0) == (pass == 0) && !may_start(h))
                    out[n++] = h->id;
    return n;
}
