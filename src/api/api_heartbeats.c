/*
 * api_heartbeats.c - heartbeats coalesced per lease: at most one write per lease per window, however fast a
 * worker heartbeats.
 *
 * Every heartbeat is a write (the lease's new expiry, lastUpdatedAt) and, when its progress or message changed,
 * an event in the job's log and the job.progress webhooks. One worker heartbeating thousands of times a second
 * would grow the store by an event per heartbeat. So the writes of one lease (tenant, job, lease id) are spaced:
 * the first heartbeat after a quiet window is written at once; one that arrives within AD_HB_WINDOW_MS of the
 * last write (or while it is with the writer) waits, merged with any others that arrive meanwhile, and the window's
 * end writes them as one report: the latest progress, the latest message, the latest lease length, at the time
 * of the latest heartbeat. Each waiting request is answered only once that write is durable, with its outcome, so
 * an answer never promises a lease extension the store does not hold, and each heartbeat's extension is honoured
 * (the write counts it from the latest heartbeat's arrival, not later). The window is never more than a quarter
 * of the lease length, so that a worker on a short lease keeps it. No heartbeat is refused for its rate.
 *
 * At shutdown (ad_api_heartbeats_flush) every waiting heartbeat is written at once, so that the drain commits
 * and answers it. What this does not do: limit heartbeats across nodes (each node spaces its own; a worker
 * spreading one lease over n nodes gets n writes per window), or answer faster than the window (a worker sending
 * progress more often than that waits for its answers: that is the back-pressure). Event loop thread only.
 */
#include "api/api_int.h"
#include "common/timer.h"

#include <stdlib.h>
#include <string.h>

/* The most writes of one lease's heartbeats: one per window (docs/protocol.md, "Heartbeats"). */
#define AD_HB_WINDOW_MS 1000

/* The heartbeats of one lease while its window is open. */
struct hb_lease {
    struct hb_lease *next; /* in its bucket */
    size_t hash;
    char *tenant, *id, *lease_id;
    int64_t issued;           /* monotonic ms of the last write handed to the writer */
    int64_t window;           /* ms between writes, for the lease length last asked */
    int in_flight;            /* a write is with the writer */
    struct ad_report_op *due; /* the merged heartbeats waiting for the window's end, or NULL */
    struct ad_pending **waiting;
    size_t nwaiting, cap;
    struct ad_timer timer; /* at issued + window while not in flight */
};

/* The heartbeats a write answers: taken from the lease when the write is handed in. */
struct hb_batch {
    struct hb_lease *l;
    struct ad_pending **waiting;
    size_t n;
};

static struct hb_lease **buckets;
static size_t nbuckets, nleases;

static size_t hash_str(size_t h, const char *s)
{
    for (; *s != '\0'; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211u;
    return (h ^ 0xff) * 1099511628211u; /* a separator, so that ("ab", "c") and ("a", "bc") differ */
}

static size_t lease_hash(const char *tenant, const char *id, const char *lease_id)
{
    return hash_str(hash_str(hash_str(14695981039346656037u, tenant), id), lease_id);
}

static struct hb_lease **slot_of(size_t hash, const char *tenant, const char *id, const char *lease_id)
{
    struct hb_lease **p = &buckets[hash & (nbuckets - 1)];
    while (*p != NULL && ((*p)->hash != hash || strcmp((*p)->id, id) != 0 || strcmp((*p)->lease_id, lease_id) != 0 ||
                          strcmp((*p)->tenant, tenant) != 0))
        p = &(*p)->next;
    return p;
}

static void grow(void)
{
    size_t n = nbuckets == 0 ? 64 : nbuckets * 2;
    struct hb_lease **b = ad_calloc(n, sizeof(*b));
    for (size_t i = 0; i < nbuckets; i++)
        while (buckets[i] != NULL) {
            struct hb_lease *l = buckets[i];
            buckets[i] = l->next;
            l->next = b[l->hash & (n - 1)];
            b[l->hash & (n - 1)] = l;
        }
    free(buckets);
    buckets = b;
    nbuckets = n;
}

static void lease_free(struct hb_lease *l)
{
    struct hb_lease **p = slot_of(l->hash, l->tenant, l->id, l->lease_id);
    *p = l->next;
    nleases--;
    ad_timer_cancel(&l->timer);
    free(l->tenant);
    free(l->id);
    free(l->lease_id);
    free(l->waiting);
    free(l);
}

static void hb_done(struct ad_op *op);
static void hb_settle(struct hb_lease *l);

static void hb_timer(struct ad_timer *t)
{
    hb_settle(H2O_STRUCT_FROM_MEMBER(struct hb_lease, timer, t));
}

/* Hand l's due heartbeats to the writer, with the requests they answer. */
static void hb_issue(struct hb_lease *l)
{
    struct ad_report_op *x = l->due;
    struct hb_batch *b = ad_calloc(1, sizeof(*b));
    b->l = l;
    b->waiting = l->waiting;
    b->n = l->nwaiting;
    l->due = NULL;
    l->waiting = NULL;
    l->nwaiting = l->cap = 0;
    l->in_flight = 1;
    l->issued = ad_mono_ms();
    ad_timer_cancel(&l->timer);
    x->ctx = b;
    x->op.done = hb_done;
    ad_writer_submit(&x->op);
}

/* What l does next: wait for its write, write what is due once the window allows, or end once it is quiet. */
static void hb_settle(struct hb_lease *l)
{
    if (l->in_flight)
        return;
    int64_t now = ad_mono_ms();
    /* At shutdown no window holds a heartbeat back: the drain commits what was handed in. */
    if (now < l->issued + l->window && !ad_hub.shutting_down) {
        ad_timer_arm(&l->timer, l->issued + l->window);
        return;
    }
    if (l->due != NULL)
        hb_issue(l);
    else
        lease_free(l);
}

static void hb_done(struct ad_op *op)
{
    struct ad_report_op *x = (struct ad_report_op *)op;
    struct hb_batch *b = x->ctx;
    struct ad_entry *e = ad_op_published(op, 0);
    for (size_t i = 0; i < b->n; i++) {
        struct ad_request *r = ad_api_write_take(b->waiting[i]);
        if (r != NULL)
            ad_api_report_answer(r, x, e);
    }
    struct hb_lease *l = b->l;
    free(b->waiting);
    free(b);
    ad_op_free(op);
    l->in_flight = 0;
    hb_settle(l);
}

/* Merge the heartbeat x into the one due: what it says replaces what the earlier ones said. Frees x. */
static void merge(struct ad_report_op *due, struct ad_report_op *x)
{
    if (x->progress >= 0)
        due->progress = x->progress;
    if (x->message != NULL) {
        free(due->message);
        due->message = x->message;
        x->message = NULL;
    }
    due->lease_ms = x->lease_ms;
    if (x->now > due->now)
        due->now = x->now;
    ad_op_free(&x->op);
}

int ad_api_heartbeat_submit(struct ad_request *r, struct ad_report_op *x)
{
    size_t hash = lease_hash(x->tenant, x->id, x->lease_id);
    if (nleases >= nbuckets)
        grow();
    struct hb_lease **p = slot_of(hash, x->tenant, x->id, x->lease_id);
    struct hb_lease *l = *p;
    if (l == NULL) {
        l = ad_calloc(1, sizeof(*l));
        l->hash = hash;
        l->tenant = ad_strdup(x->tenant);
        l->id = ad_strdup(x->id);
        l->lease_id = ad_strdup(x->lease_id);
        l->issued = ad_mono_ms() - AD_HB_WINDOW_MS; /* a first heartbeat is written at once */
        l->timer.cb = hb_timer;
        *p = l;
        nleases++;
    }
    int64_t window = x->lease_ms / 4 < AD_HB_WINDOW_MS ? x->lease_ms / 4 : AD_HB_WINDOW_MS;
    if (l->due == NULL || window < l->window)
        l->window = window;
    if (l->due == NULL)
        l->due = x;
    else
        merge(l->due, x);
    if (l->nwaiting == l->cap) {
        l->cap = l->cap == 0 ? 4 : l->cap * 2;
        l->waiting = ad_realloc(l->waiting, l->cap * sizeof(*l->waiting));
    }
    l->waiting[l->nwaiting++] = ad_api_write_begin(r);
    hb_settle(l);
    return 0;
}

void ad_api_heartbeats_flush(void)
{
    for (size_t i = 0; i < nbuckets; i++) {
        struct hb_lease *l = buckets[i];
        while (l != NULL) {
            struct hb_lease *next = l->next; /* settling may free l */
            hb_settle(l);
            l = next;
        }
    }
}
