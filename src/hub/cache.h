/*
 * cache.h - the in-memory representation of jobs: rendered JSON body and ETag, keyed by id.
 *
 * The poll path (GET with If-None-Match) of a cached job is one lookup here and never touches the store.
 * Entries are replaced whenever the writer commits a change; an entry is never replaced by an older version
 * (lower seq). Long-poll waiters hang on entries. Entries without waiters are evicted least recently used first
 * once the entries take more than a byte budget (an entry counts its body twice, so large payloads and results
 * cannot grow it without bound); an evicted job is read back from the store when asked for.
 * Event loop thread only.
 */
#ifndef AD_CACHE_H
#define AD_CACHE_H

#include <stddef.h>
#include "common/list.h"
#include "job/job.h"

struct ad_timer;

struct ad_entry {
    struct ad_job *job; /* owned */
    char *body;         /* rendered representation, owned */
    size_t len;
    size_t cost;   /* the bytes counted against the budget for this entry (cache.c) */
    char etag[25]; /* the body's (ad_etag), once asked for (ad_entry_etag); "" until then */
    struct ad_list lru;
    struct ad_list waiters; /* of struct ad_waiter */
    size_t hash;            /* of job->id */
    /* The expiry check of the job's lease, armed by hub.c, which keeps it at the lease's expiry and cancels it
     * when the lease ends; NULL when none. Not owned: an evicted entry leaves its timer to fire. */
    struct ad_timer *lease_timer;
};

/* Someone waiting for an entry to change; wake is called once, after the waiter is unlinked. */
struct ad_waiter {
    struct ad_list link;
    void (*wake)(struct ad_waiter *w, struct ad_entry *e);
};

/* Start empty, with a budget of budget bytes for the entries. */
void ad_cache_init(size_t budget);
/* The entry's strong ETag: its body's, hashed when first asked for. Most versions of a job are never asked (a
 * leased job's goes out inside the lease answer, a worker's report is answered with the job inside the answer). */
const char *ad_entry_etag(struct ad_entry *e);
/* The entry for id, or NULL when not cached. Marks it recently used. */
struct ad_entry *ad_cache_get(const char *id);
/* Store job (takes ownership) unless the cached version is newer; returns the current entry. Wakes the
 * entry's waiters when the representation changed. *changed is set to 1 when the stored entry changed.
 * replaced (may be NULL): set to the version job replaced, now the caller's to free, or to NULL when there
 * was none (a new entry, or job was dropped as older); without it the replaced version is freed here. */
struct ad_entry *ad_cache_put(struct ad_job *job, int *changed, struct ad_job **replaced);
/* While on (1), puts evict nothing, so that every entry returned meanwhile stays valid: the hub holds the cache
 * from an operation's first publish until its done() has answered with the entries (hub.c). Off (0) evicts down
 * to the budget again. */
void ad_cache_hold(int on);
/* Drop the entry for id (its waiters are woken with e == NULL). */
void ad_cache_remove(const char *id);
void ad_cache_watch(struct ad_entry *e, struct ad_waiter *w);
/* Unlink w if it is still waiting. Safe to call twice. */
void ad_cache_unwatch(struct ad_waiter *w);
size_t ad_cache_size(void);
/* The bytes the entries take, as counted against the budget. */
size_t ad_cache_bytes(void);
/* Free every entry (at shutdown). */
void ad_cache_clear(void);

#endif
