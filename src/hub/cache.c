/*
 * cache.c - hash table of ad_entry plus an LRU list for eviction.
 *
 * Keys are server-generated random ids, so a simple FNV-1a hash is enough; lookups of unknown ids never
 * insert anything. The table is open-addressed with linear probing, and each slot holds its entry's hash: a
 * probe compares hashes in the table itself and reaches an entry only when they match. (A chained table
 * reached every entry of a chain to compare its hash; with a full cache that was a cache miss per entry and
 * most of the time of a submit's put and of its eviction.) At most half the slots are used. A removal moves
 * the entries after it back (no tombstones).
 */
#include "hub/cache.h"

#include <stdlib.h>
#include <string.h>

struct slot {
    size_t hash;
    struct ad_entry *e; /* NULL: empty */
};

static struct slot *slots;
static size_t nslots, count;
static size_t bytes, max_bytes; /* what the entries take (entry_cost), and the budget */
static int held;                /* ad_cache_hold */
static struct ad_list lru = AD_LIST_INIT(lru);

static size_t hash(const char *s)
{
    uint64_t h = 1469598103934665603ULL;
    for (; *s != '\0'; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    return (size_t)h;
}

/* The slot of id (hash h), or the empty slot where it would go. */
static size_t find_slot(const char *id, size_t h)
{
    size_t mask = nslots - 1, i = h & mask;
    while (slots[i].e != NULL && (slots[i].hash != h || strcmp(slots[i].e->job->id, id) != 0))
        i = (i + 1) & mask;
    return i;
}

/* The slot of e, which is in the table. */
static size_t slot_of(const struct ad_entry *e)
{
    size_t mask = nslots - 1, i = e->hash & mask;
    while (slots[i].e != e)
        i = (i + 1) & mask;
    return i;
}

static void table_alloc(size_t n)
{
    nslots = n;
    slots = ad_calloc(nslots, sizeof(*slots));
}

void ad_cache_init(size_t budget)
{
    max_bytes = budget;
    table_alloc(1024);
}

static void grow(void)
{
    size_t old_n = nslots;
    struct slot *old = slots;
    table_alloc(nslots * 2);
    for (size_t k = 0; k < old_n; k++) {
        if (old[k].e == NULL)
            continue;
        size_t i = old[k].hash & (nslots - 1);
        while (slots[i].e != NULL)
            i = (i + 1) & (nslots - 1);
        slots[i] = old[k];
    }
    free(old);
}

/* Empty slot i: each entry after it in its run moves back into the hole unless its home slot lies after the
 * hole (cyclically), so that every entry stays reachable from its home without crossing an empty slot. */
static void slot_clear(size_t i)
{
    size_t mask = nslots - 1;
    for (size_t j = (i + 1) & mask; slots[j].e != NULL; j = (j + 1) & mask) {
        size_t home = slots[j].hash & mask;
        if (((j - home) & mask) >= ((j - i) & mask)) {
            slots[i] = slots[j];
            i = j;
        }
    }
    slots[i].e = NULL;
}

/* The waiters are detached first: a wake callback may watch e again (a long poll whose status did not change),
 * and that waiter must wait for the next change, not be woken again by this one. */
static void wake_all(struct ad_entry *e, struct ad_entry *arg)
{
    struct ad_list woken = AD_LIST_INIT(woken);
    ad_list_insert_list(&woken, &e->waiters);
    while (!ad_list_empty(&woken)) {
        struct ad_waiter *w = AD_CONTAINER_OF(woken.next, struct ad_waiter, link);
        ad_list_unlink(&w->link);
        w->wake(w, arg);
    }
}

/* Jobs are rendered into this buffer, kept from one render to the next, and copied out at their size: one
 * allocation per render instead of a chain of reallocations as the text grows. A buffer grown past
 * SCRATCH_KEEP by a large job is let go afterwards. */
#define SCRATCH_KEEP 65536
static struct ad_buf scratch = {.max = SIZE_MAX};

/* The heap bytes e takes with its job and body, allocator overhead aside. A job's texts are in the cache twice,
 * as fields and inside the body (a job with a 1 MiB result costs 2 MiB): the fields count as long as the body,
 * which holds the large ones, so that no put reads through them again. */
static size_t entry_cost(const struct ad_entry *e)
{
    return sizeof(*e) + sizeof(*e->job) + 2 * (e->len + 1);
}

/* Render e's job into e->body (the caller frees the body it replaces) and account for its new cost. */
static void render(struct ad_entry *e)
{
    scratch.len = 0;
    ad_job_render(e->job, &scratch);
    e->body = ad_malloc(scratch.len + 1);
    memcpy(e->body, scratch.data, scratch.len + 1);
    e->len = scratch.len;
    if (scratch.cap > SCRATCH_KEEP)
        ad_buf_free(&scratch);
    bytes -= e->cost;
    e->cost = entry_cost(e);
    bytes += e->cost;
}

const char *ad_entry_etag(struct ad_entry *e)
{
    if (e->etag[0] == '\0')
        ad_etag(e->body, e->len, e->etag);
    return e->etag;
}

static void unlink_entry(size_t i)
{
    struct ad_entry *e = slots[i].e;
    slot_clear(i);
    ad_list_unlink(&e->lru);
    count--;
    bytes -= e->cost;
}

static void free_entry(struct ad_entry *e)
{
    ad_job_free(e->job);
    free(e->body);
    free(e);
}

/* Evict least recently used entries without waiters until the budget is met, never the entry being put, and
 * none while the cache is held. */
static void evict(struct ad_entry *keep)
{
    if (held)
        return;
    struct ad_list *node = lru.prev;
    while (bytes > max_bytes && node != &lru) {
        struct ad_entry *e = AD_CONTAINER_OF(node, struct ad_entry, lru);
        node = node->prev;
        if (e == keep || !ad_list_empty(&e->waiters))
            continue;
        unlink_entry(slot_of(e));
        free_entry(e);
    }
}

/* Mark e most recently used. */
static void touch(struct ad_entry *e)
{
    ad_list_unlink(&e->lru);
    ad_list_insert(lru.next, &e->lru);
}

struct ad_entry *ad_cache_get(const char *id)
{
    if (nslots == 0)
        return NULL;
    struct ad_entry *e = slots[find_slot(id, hash(id))].e;
    if (e != NULL)
        touch(e);
    return e;
}

struct ad_entry *ad_cache_put(struct ad_job *job, int *changed, struct ad_job **replaced)
{
    size_t h = hash(job->id);
    if (nslots == 0)
        table_alloc(1024);
    size_t slot = find_slot(job->id, h);
    struct ad_entry *e = slots[slot].e;
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
        evict(e);
        return e;
    }
    e = ad_calloc(1, sizeof(*e));
    e->job = job;
    e->hash = h;
    ad_list_init(&e->waiters);
    render(e);
    slots[slot] = (struct slot){h, e};
    ad_list_insert(lru.next, &e->lru);
    *changed = 1;
    if (++count * 2 > nslots)
        grow();
    evict(e);
    return e;
}

void ad_cache_hold(int on)
{
    held = on;
    if (!on)
        evict(NULL);
}

void ad_cache_remove(const char *id)
{
    if (nslots == 0)
        return;
    size_t slot = find_slot(id, hash(id));
    struct ad_entry *e = slots[slot].e;
    if (e == NULL)
        return;
    unlink_entry(slot);
    wake_all(e, NULL);
    free_entry(e);
}

void ad_cache_watch(struct ad_entry *e, struct ad_waiter *w)
{
    ad_list_insert(&e->waiters, &w->link);
}

void ad_cache_unwatch(struct ad_waiter *w)
{
    if (ad_list_linked(&w->link))
        ad_list_unlink(&w->link);
}

size_t ad_cache_size(void)
{
    return count;
}

size_t ad_cache_bytes(void)
{
    return bytes;
}

void ad_cache_clear(void)
{
    /* The table is let go first: a woken waiter that looks an id up finds nothing. */
    struct slot *old = slots;
    size_t old_n = nslots;
    slots = NULL;
    nslots = count = bytes = 0;
    for (size_t i = 0; i < old_n; i++) {
        struct ad_entry *e = old[i].e;
        if (e == NULL)
            continue;
        ad_list_unlink(&e->lru);
        wake_all(e, NULL);
        free_entry(e);
    }
    free(old);
    ad_buf_free(&scratch);
}
