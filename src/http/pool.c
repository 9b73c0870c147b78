/*
 * pool.c - h2o's per-request memory pool, starting with a 2 KiB chunk instead of 4 KiB.
 *
 * libh2o 2.2 gives every request, and every HTTP/2 stream, a pool whose first allocation takes a 4 KiB chunk.
 * An HTTP/2 event stream keeps its request, and so that chunk, for as long as it is open, and uses about 1 KiB
 * of it: 4 of the 5.1 KiB such a stream cost (docs/benchmarks.md, "SSE streams at 4 KiB"). The functions below
 * are h2o's own pool API, defined in the binary: the dynamic linker binds libh2o's calls to them here (libh2o
 * makes every such call through its PLT), so h2o's pools and acceptd's are the same pools. A pool starts with
 * a chunk of FIRST_CHUNK bytes and takes 4 KiB chunks once that is full, as h2o's did from the start.
 *
 * What stays as h2o has it: the fields of h2o_mem_pool_t (its public header), 16-byte alignment, allocations of
 * a quarter of a 4 KiB chunk or more taken directly from malloc, reference-counted shared entries (whose layout
 * the header's inline addref and release read). Every function that reads a chunk, a direct allocation or a
 * shared reference is defined here, so nothing depends on a layout private to libh2o's memory.c. h2o's
 * buffers (h2o_buffer_t) and its recycling allocator, which this uses, are not replaced.
 *
 * A libh2o that calls its pool functions directly (linked statically, or with -Bsymbolic) would mix the two:
 * chunks made here freed by h2o's code as 4 KiB ones. ad_http_pool_check, run before the daemon serves, refuses
 * that libh2o.
 */
#include <malloc.h>
#include <h2o/memory.h>
#include <h2o/string_.h>
#include "common/util.h"
#include "http/http.h"

/* bytes[] is 16-byte aligned: malloc's alignment, after a 16-byte header. */
struct st_h2o_mem_pool_chunk_t {
    struct st_h2o_mem_pool_chunk_t *next;
    size_t size; /* of bytes[] */
    char bytes[];
};

struct st_h2o_mem_pool_direct_t {
    struct st_h2o_mem_pool_direct_t *next;
    size_t unused; /* keeps bytes[] 16-byte aligned */
    char bytes[];
};

struct st_h2o_mem_pool_shared_ref_t {
    struct st_h2o_mem_pool_shared_ref_t *next;
    struct st_h2o_mem_pool_shared_entry_t *entry;
};

#define FIRST_CHUNK 2048
#define LATER_CHUNK 4096
#define CHUNK_ROOM(n) ((n)-offsetof(struct st_h2o_mem_pool_chunk_t, bytes))
/* h2o's threshold: a quarter of a 4 KiB chunk's room. */
#define DIRECT_MIN (CHUNK_ROOM(LATER_CHUNK) / 4)
/* So whatever is not taken directly fits in a pool's first chunk. */
_Static_assert(DIRECT_MIN <= CHUNK_ROOM(FIRST_CHUNK), "the first chunk holds less than a direct allocation");

/* Freed chunks of each size, kept for the next pools of this thread, 16 of each as h2o keeps. */
static __thread h2o_mem_recycle_t first_chunks = {16, 0, NULL}, later_chunks = {16, 0, NULL};

void h2o_mem_init_pool(h2o_mem_pool_t *pool)
{
    pool->chunks = NULL;
    pool->chunk_offset = 0;
    pool->directs = NULL;
    pool->shared_refs = NULL;
}

void h2o_mem_clear_pool(h2o_mem_pool_t *pool)
{
    /* The shared entries first: their disposers may still read the pool's chunks. */
    for (struct st_h2o_mem_pool_shared_ref_t *ref = pool->shared_refs; ref != NULL; ref = ref->next)
        h2o_mem_release_shared(ref->entry->bytes);
    pool->shared_refs = NULL;
    while (pool->directs != NULL) {
        struct st_h2o_mem_pool_direct_t *next = pool->directs->next;
        free(pool->directs);
        pool->directs = next;
    }
    while (pool->chunks != NULL) {
        struct st_h2o_mem_pool_chunk_t *next = pool->chunks->next;
        h2o_mem_recycle_t *r = pool->chunks->size == CHUNK_ROOM(FIRST_CHUNK) ? &first_chunks : &later_chunks;
        h2o_mem_free_recycle(r, pool->chunks);
        pool->chunks = next;
    }
    pool->chunk_offset = 0;
}

void *h2o_mem_alloc_pool(h2o_mem_pool_t *pool, size_t sz)
{
    if (sz >= DIRECT_MIN) {
        struct st_h2o_mem_pool_direct_t *d = ad_malloc(offsetof(struct st_h2o_mem_pool_direct_t, bytes) + sz);
        d->next = pool->directs;
        pool->directs = d;
        return d->bytes;
    }
    sz = sz == 0 ? 16 : (sz + 15) & ~(size_t)15; /* a distinct pointer even for 0 bytes */
    if (pool->chunks == NULL || pool->chunks->size - pool->chunk_offset < sz) {
        int first = pool->chunks == NULL;
        size_t n = first ? FIRST_CHUNK : LATER_CHUNK;
        struct st_h2o_mem_pool_chunk_t *c = h2o_mem_alloc_recycle(first ? &first_chunks : &later_chunks, n);
        c->next = pool->chunks;
        c->size = CHUNK_ROOM(n);
        pool->chunks = c;
        pool->chunk_offset = 0;
    }
    void *p = pool->chunks->bytes + pool->chunk_offset;
    pool->chunk_offset += sz;
    return p;
}

static void link_shared(h2o_mem_pool_t *pool, struct st_h2o_mem_pool_shared_entry_t *entry)
{
    struct st_h2o_mem_pool_shared_ref_t *ref = h2o_mem_alloc_pool(pool, sizeof(*ref));
    ref->entry = entry;
    ref->next = pool->shared_refs;
    pool->shared_refs = ref;
}

void *h2o_mem_alloc_shared(h2o_mem_pool_t *pool, size_t sz, void (*dispose)(void *))
{
    struct st_h2o_mem_pool_shared_entry_t *e = ad_malloc(offsetof(struct st_h2o_mem_pool_shared_entry_t, bytes) + sz);
    e->refcnt = 1;
    e->dispose = dispose;
    if (pool != NULL)
        link_shared(pool, e);
    return e->bytes;
}

void h2o_mem_link_shared(h2o_mem_pool_t *pool, void *p)
{
    h2o_mem_addref_shared(p);
    link_shared(pool, H2O_STRUCT_FROM_MEMBER(struct st_h2o_mem_pool_shared_entry_t, bytes, p));
}

int ad_http_pool_check(char *err, size_t errlen)
{
    /* No chunk, and an offset that h2o's allocator too reads as a full chunk: either makes a chunk. */
    h2o_mem_pool_t pool = {NULL, CHUNK_ROOM(LATER_CHUNK), NULL, NULL};
    h2o_strdup(&pool, "x", 1); /* libh2o's own code, allocating through its PLT */
    if (malloc_usable_size(pool.chunks) < LATER_CHUNK) {
        h2o_mem_clear_pool(&pool);
        return 0;
    }
    free(pool.chunks); /* h2o's chunk, which h2o_mem_clear_pool here must not recycle */
    snprintf(err, errlen,
             "libh2o allocates its requests' memory without acceptd's pool (http/pool.c): it is "
             "linked so that its own calls bypass the dynamic linker (statically, or -Bsymbolic)");
    return -1;
}
