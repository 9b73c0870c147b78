/*
 * cache.c - chained hash table of ad_entry plus an LRU list for eviction.
 *
 * Keys are server-generated random ids, so a simple FNV-1a hash is enough; lookups of unknown ids never
 * insert anything.
 */
#include "cache.h"

#include <stdlib.h>
#include <string.h>

static struct ad_entry **buckets;
static size_t nbuckets, count, max_count;
static h2o_linklist_t lru = {&lru, &lru};

static size_t hash(const char *s)
{
    uint64_t h = 1469598103934665603ULL;
    for (; *s != '\0'; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    return (size_t)h;
}

/* The chain link pointing at the entry for id (hash h), or at the chain's NULL end. The stored hash spares
 * a strcmp, and the cache misses of reaching each entry's id, for every other entry in the chain. */
static struct ad_entry **find_slot(const char *id, size_t h)
{
    struct ad_entry **p = &buckets[h & (nbuckets - 1)];
    while (*p != NULL && ((*p)->hash != h || strcmp((*p)->job->id, id) != 0))
        p = &(*p)->next;
    return p;
}

/* The chain link pointing at e, which is in the table. */
static struct ad_entry **slot_of(struct ad_entry *e)
{
    struct ad_entry **p = &buckets[e->hash & (nbuckets - 1)];
    while (*p != e)
        p = &(*p)->next;
    return p;
}

void ad_cache_init(size_t max_entries)
{
    max_count = max_entries;
    nbuckets = 1024;
    buckets = ad_calloc(nbuckets, sizeof(*buckets));
}

static void grow(void)
{
    size_t old_n = nbuckets;
    struct ad_entry **old = buckets;
    nbuckets *= 2;
    buckets = ad_calloc(nbuckets, sizeof(*buckets));
    for (size_t i = 0; i < old_n; i++) {
        struct ad_entry *e = old[i];
        while (e != NULL) {
            struct ad_entry *next = e->next;
            struct ad_entry **slot = &buckets[e->hash & (nbuckets - 1)];
            e->next = *slot;
            *slot = e;
            e = next;
        }
    }
    free(old);
}

/* The waiters are detached first: a wake callback may watch e again (a long poll whose status did not change),
 * and that waiter must wait for the next change, not be woken again by this one. */
static void wake_all(struct ad_entry *e, struct ad_entry *arg)
{
    h2o_linklist_t woken;
    h2o_linklist_init_anchor(&woken);
    h2o_linklist_insert_list(&woken, &e->waiters);
    while (!h2o_linklist_is_empty(&woken)) {
        struct ad_waiter *w = H2O_STRUCT_FROM_MEMBER(struct ad_waiter, link, woken.next);
        h2o_linklist_unlink(&w->link);
        w->wake(w, arg);
    }
}

/* Jobs are rendered into this buffer, kept from one render to the next, and copied out at their size: one
 * allocation per render instead of a chain of reallocations as the text grows. A buffer grown past
 * SCRATCH_KEEP by a large job is let go afterwards. */
#define SCRATCH_KEEP 65536
static struct ad_buf scratch = {.max = SIZE_MAX};

/* Render e's job into e->body (the caller frees the body it replaces). */
static void render(struct ad_entry *e)
{
    scratch.len = 0;
    ad_job_render(e->job, &scratch);
    e->body = ad_malloc(scratch.len + 1);
    memcpy(e->body, scratch.data, scratch.len + 1);
    e->len = scratch.len;
    if (scratch.cap > SCRATCH_KEEP)
        ad_buf_free(&scratch);
}

const char *ad_entry_etag(struct ad_entry *e)
{
    if (e->etag[0] == '\0')
        ad_etag(e->body, e->len, e->etag);
    return e->etag;
}

static void unlink_entry(struct ad_entry **slot)
{
    struct ad_entry *e = *slot;
    *slot = e->next;
    h2o_linklist_unlink(&e->lru);
    count--;
}

static void free_entry(struct ad_entry *e)
{
    ad_job_free(e->job);
    free(e->body);
    free(e);
}

/* Evict least recently used entries without waiters until the cap is met, never the entry being put. */
static void evict(struct ad_entry *keep)
{
    h2o_linklist_t *node = lru.prev;
    while (count > max_count && node != &lru) {
        struct ad_entry *e = H2O_STRUCT_FROM_MEMBER(struct ad_entry, lru, node);
        node = node->prev;
        if (e == keep || !h2o_linklist_is_empty(&e->waiters))
            continue;
        unlink_entry(slot_of(e));
        free_entry(e);
    }
}

/* Mark e most recently used. */
static void touch(struct ad_entry *e)
{
    h2o_linklist_unlink(&e->lru);
    h2o_linklist_insert(lru.next, &e->lru);
}

struct ad_entry *ad_cache_get(const char *id)
{
    struct ad_entry *e = *find_slot(id, hash(id));
    if (e != NULL)
        touch(e);
    return e;
}

struct ad_entry *ad_cache_put(struct ad_job *job, int *changed, struct ad_job **replaced)
{
    size_t h = hash(job->id);
    struct ad_entry **slot = find_slot(job->id, h);
    struct ad_entry *e = *slot;
    *changed = 0;
    if (replaced != NULL)
        *replaced = NULL;
    if (e != NULL) {
        if (e->job->seq >= job->seq) {
            ad_job_free(job);
            touch(e);
            return e;
        }
        if (replaced != NULL)
            *replaced = e->job;
        else
            ad_job_free(e->job);
        e->job = job;
        char *old = e->body;
        size_t old_len = e->len;
        render(e);
        /* The same representation keeps its ETag (and wakes no one); another one gets its own when asked. */
        int same = old_len == e->len && memcmp(old, e->body, e->len) == 0;
        free(old);
        *changed = 1;
        touch(e);
        if (!same) {
            e->etag[0] = '\0';
            wake_all(e, e);
        }
        return e;
    }
    e = ad_calloc(1, sizeof(*e));
    e->job = job;
    e->hash = h;
    h2o_linklist_init_anchor(&e->waiters);
    render(e);
    e->next = NULL;
    *slot = e;
    h2o_linklist_insert(lru.next, &e->lru);
    *changed = 1;
    if (++count > nbuckets)
        grow();
    if (count > max_count)
        evict(e);
    return e;
}

void ad_cache_remove(const char *id)
{
    struct ad_entry **slot = find_slot(id, hash(id));
    struct ad_entry *e = *slot;
    if (e == NULL)
        return;
    unlink_entry(slot);
    wake_all(e, NULL);
    free_entry(e);
}

void ad_cache_watch(struct ad_entry *e, struct ad_waiter *w)
{
    h2o_linklist_insert(&e->waiters, &w->link);
}

void ad_cache_unwatch(struct ad_waiter *w)
{
    if (h2o_linklist_is_linked(&w->link))
        h2o_linklist_unlink(&w->link);
}

size_t ad_cache_size(void)
{
    return count;
}

void ad_cache_clear(void)
{
    for (size_t i = 0; i < nbuckets; i++) {
        while (buckets[i] != NULL) {
            struct ad_entry *e = buckets[i];
            unlink_entry(&buckets[i]);
            wake_all(e, NULL);
            free_entry(e);
        }
    }
    free(buckets);
    buckets = NULL;
    nbuckets = 0;
    ad_buf_free(&scratch);
}
