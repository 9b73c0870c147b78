/*
 * test_pool.c - unit tests for src/http/pool.c, h2o's request pool with a 2 KiB first chunk: that libh2o's own
 * calls reach it (the point of it: h2o allocates a request's headers there), that what it hands out is
 * aligned, distinct and kept until the pool is cleared, and that shared entries live as long as their last
 * pool. The memory it saves per HTTP/2 event stream is measured by bench/sse.sh.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <malloc.h>
#include <string.h>
#include <h2o/memory.h>
#include <h2o/string_.h>

#include "http/http.h"

/* h2o_strdup is libh2o's: it allocates through libh2o's PLT, which must lead to pool.c. With h2o's own pool
 * the first chunk would take 4 KiB. */
static void test_libh2o_allocates_from_a_small_first_chunk(void **state)
{
    h2o_mem_pool_t pool;
    h2o_mem_init_pool(&pool);
    h2o_iovec_t s = h2o_strdup(&pool, "hello", 5);
    assert_string_equal(s.base, "hello");
    assert_non_null(pool.chunks);
    size_t usable = malloc_usable_size(pool.chunks);
    if (usable < 2048 || usable >= 4096)
        fail_msg("the first chunk holds %zu bytes, want 2048 to 4095", usable);
    assert_true(s.base > (char *)pool.chunks && s.base < (char *)pool.chunks + usable);
    void *first = pool.chunks;
    h2o_mem_clear_pool(&pool);
    assert_null(pool.chunks);
    /* The next pool of this thread starts from the same chunk, recycled. */
    h2o_mem_init_pool(&pool);
    h2o_strdup(&pool, "again", 5);
    assert_ptr_equal(pool.chunks, first);
    h2o_mem_clear_pool(&pool);

    /* The daemon's own check at start says the same. */
    char err[256] = "";
    assert_int_equal(ad_http_pool_check(err, sizeof(err)), 0);
    assert_string_equal(err, "");
}

/* Sizes from 0 to past the direct-allocation threshold, across many chunks: every block is 16-byte aligned and
 * keeps its bytes until the pool is cleared, so no two overlap (and ASan sees none run past its chunk). */
static void test_allocations_are_aligned_distinct_and_kept(void **state)
{
    enum { N = 600 };
    unsigned char *p[N];
    size_t len[N];
    h2o_mem_pool_t pool;
    h2o_mem_init_pool(&pool);
    for (int i = 0; i < N; i++) {
        len[i] = (size_t)(i * 37) % 1400;
        p[i] = h2o_mem_alloc_pool(&pool, len[i]);
        if ((uintptr_t)p[i] % 16 != 0)
            fail_msg("block %d (%zu bytes) at %p is not 16-byte aligned", i, len[i], (void *)p[i]);
        memset(p[i], i & 0xff, len[i]);
    }
    for (int i = 0; i < N; i++)
        for (size_t j = 0; j < len[i]; j++)
            if (p[i][j] != (i & 0xff))
                fail_msg("block %d byte %zu reads %d, want %d: overwritten by another block", i, j, p[i][j], i & 0xff);
    /* Past the first chunk, a pool grows by 4 KiB chunks. */
    if (malloc_usable_size(pool.chunks) < 4096)
        fail_msg("the newest chunk holds %zu bytes, want 4096", malloc_usable_size(pool.chunks));
    h2o_mem_clear_pool(&pool);
}

static int disposed;

static void count_dispose(void *p)
{
    assert_string_equal(p, "shared");
    disposed++;
}

static void test_shared_entries_live_as_long_as_their_last_pool(void **state)
{
    h2o_mem_pool_t a, b;
    h2o_mem_init_pool(&a);
    h2o_mem_init_pool(&b);
    disposed = 0;
    char *s = h2o_mem_alloc_shared(&a, 7, count_dispose);
    memcpy(s, "shared", 7);
    h2o_mem_link_shared(&b, s);
    h2o_mem_clear_pool(&a);
    assert_int_equal(disposed, 0);
    h2o_mem_clear_pool(&b);
    assert_int_equal(disposed, 1);

    char *orphan = h2o_mem_alloc_shared(NULL, 7, count_dispose);
    memcpy(orphan, "shared", 7);
    h2o_mem_release_shared(orphan);
    assert_int_equal(disposed, 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_libh2o_allocates_from_a_small_first_chunk),
        cmocka_unit_test(test_allocations_are_aligned_distinct_and_kept),
        cmocka_unit_test(test_shared_entries_live_as_long_as_their_last_pool),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
