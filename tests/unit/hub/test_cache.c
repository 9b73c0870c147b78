/*
 * test_cache.c - unit tests for src/cache.c: put/get, version ordering by seq, the changed flag, waking
 * long-poll waiters, unwatch, removal, LRU eviction past the byte budget (none while held) and growth of the hash
 * table.
 *
 * The cache is process-global, so every test initialises it in setup and clears it in teardown.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hub/cache.h"

#define T0 INT64_C(1800000000000)

static int setup_small(void **state)
{
    (void)state;
    ad_cache_init(1 << 20);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    ad_cache_clear();
    return 0;
}

static struct ad_job *mk(const char *id, int64_t seq, enum ad_status st, int progress)
{
    struct ad_job *j = ad_job_new();
    ad_job_set(&j->id, id);
    ad_job_set(&j->tenant, "t1");
    ad_job_set(&j->type, "video");
    ad_job_set(&j->payload, "{}");
    j->status = st;
    j->progress = progress;
    j->max_attempts = 3;
    j->created_at = T0;
    j->updated_at = T0;
    j->seq = seq;
    return j;
}

/* A waiter that records its wakes. rewatch > 0: re-watch the woken entry that many more times. */
struct probe {
    struct ad_waiter w;
    int woken;
    struct ad_entry *last;
    int rewatch;
};

static void probe_wake(struct ad_waiter *w, struct ad_entry *e)
{
    struct probe *p = AD_CONTAINER_OF(w, struct probe, w);
    p->woken++;
    p->last = e;
    if (ad_list_linked(&w->link))
        fail_msg("waiter still linked while its wake runs");
    if (e != NULL && p->rewatch > 0) {
        p->rewatch--;
        ad_cache_watch(e, &p->w);
    }
}

static void probe_init(struct probe *p)
{
    memset(p, 0, sizeof(*p));
    p->w.wake = probe_wake;
}

static void test_put_get(void **state)
{
    (void)state;
    assert_int_equal(ad_cache_size(), 0);
    assert_null(ad_cache_get("job_a"));
    assert_int_equal(ad_cache_size(), 0); /* a miss inserts nothing */

    struct ad_job *j = mk("job_a", 1, AD_QUEUED, -1);
    int changed = -1;
    struct ad_job *replaced = j; /* anything but NULL */
    struct ad_entry *e = ad_cache_put(j, &changed, &replaced);
    assert_null(replaced); /* a new entry replaces nothing */
    assert_non_null(e);
    assert_int_equal(changed, 1);
    assert_ptr_equal(e->job, j);
    assert_int_equal(ad_cache_size(), 1);
    assert_ptr_equal(ad_cache_get("job_a"), e);
    assert_null(ad_cache_get("job_b"));
    assert_null(ad_cache_get("job_"));
    assert_null(ad_cache_get("job_aa"));

    /* The body is the job's representation and the etag is that body's. */
    struct ad_buf b;
    ad_buf_init(&b, SIZE_MAX);
    assert_int_equal(ad_job_render(j, &b), 0);
    assert_int_equal(e->len, b.len);
    assert_memory_equal(e->body, b.data, b.len);
    char tag[25];
    ad_etag(b.data, b.len, tag);
    assert_string_equal(e->etag, ""); /* hashed only when asked for */
    assert_string_equal(ad_entry_etag(e), tag);
    assert_string_equal(e->etag, tag); /* and then kept */
    ad_buf_free(&b);

    struct ad_entry *e2 = ad_cache_put(mk("job_b", 2, AD_RUNNING, 5), &changed, NULL);
    assert_int_equal(changed, 1);
    assert_ptr_not_equal(e, e2);
    assert_int_equal(ad_cache_size(), 2);
    assert_ptr_equal(ad_cache_get("job_a"), e);
    assert_ptr_equal(ad_cache_get("job_b"), e2);
    assert_string_not_equal(ad_entry_etag(e), ad_entry_etag(e2));
}

static void test_older_seq_never_replaces_newer(void **state)
{
    (void)state;
    int changed;
    struct ad_entry *e = ad_cache_put(mk("job_a", 5, AD_RUNNING, 50), &changed, NULL);
    char tag[25];
    memcpy(tag, ad_entry_etag(e), sizeof(tag));
    char *body = ad_strndup(e->body, e->len);

    /* Older and equal versions are dropped (and freed: ASan checks); they replace nothing. */
    for (int64_t seq = 1; seq <= 5; seq++) {
        struct ad_job *replaced = mk("job_x", 0, AD_QUEUED, -1), *marker = replaced;
        struct ad_entry *r = ad_cache_put(mk("job_a", seq, AD_SUCCEEDED, 100), &changed, &replaced);
        assert_null(replaced);
        ad_job_free(marker);
        assert_int_equal(changed, 0);
        assert_ptr_equal(r, e);
        assert_int_equal(e->job->seq, 5);
        assert_int_equal(e->job->status, AD_RUNNING);
        assert_string_equal(ad_entry_etag(e), tag);
        assert_string_equal(e->body, body);
    }
    assert_int_equal(ad_cache_size(), 1);

    /* A newer one replaces it, in place, and the replaced version is handed back. */
    struct ad_job *replaced = NULL;
    struct ad_entry *r = ad_cache_put(mk("job_a", 6, AD_SUCCEEDED, 100), &changed, &replaced);
    assert_non_null(replaced);
    assert_int_equal(replaced->seq, 5);
    assert_int_equal(replaced->status, AD_RUNNING);
    ad_job_free(replaced);
    assert_int_equal(changed, 1);
    assert_ptr_equal(r, e);
    assert_int_equal(e->job->seq, 6);
    assert_int_equal(e->job->status, AD_SUCCEEDED);
    assert_string_equal(e->etag, ""); /* a new representation: hashed again when asked for */
    assert_string_not_equal(ad_entry_etag(e), tag);
    assert_non_null(strstr(e->body, "\"succeeded\""));
    assert_int_equal(ad_cache_size(), 1);
    free(body);
}

static void test_waiters_woken_once_on_change(void **state)
{
    (void)state;
    int changed;
    struct ad_entry *e = ad_cache_put(mk("job_a", 1, AD_RUNNING, 10), &changed, NULL);
    struct ad_entry *other = ad_cache_put(mk("job_b", 1, AD_RUNNING, 10), &changed, NULL);
    static struct probe p1, p2, p3; /* static: teardown may still wake them after a failed assertion */
    probe_init(&p1);
    probe_init(&p2);
    probe_init(&p3);
    ad_cache_watch(e, &p1.w);
    ad_cache_watch(e, &p2.w);
    ad_cache_watch(other, &p3.w);

    /* Same representation under a higher seq: stored, but no one is woken, and its ETag is kept. */
    char tag[25];
    memcpy(tag, ad_entry_etag(e), sizeof(tag));
    ad_cache_put(mk("job_a", 2, AD_RUNNING, 10), &changed, NULL);
    assert_int_equal(changed, 1);
    assert_int_equal(e->job->seq, 2);
    assert_string_equal(e->etag, tag);
    assert_int_equal(p1.woken, 0);
    assert_int_equal(p2.woken, 0);

    /* Older version: nothing happens. */
    ad_cache_put(mk("job_a", 1, AD_SUCCEEDED, 100), &changed, NULL);
    assert_int_equal(changed, 0);
    assert_int_equal(p1.woken, 0);

    /* The representation changes: both woken exactly once, with the entry; other entries' waiters are not. */
    ad_cache_put(mk("job_a", 3, AD_RUNNING, 11), &changed, NULL);
    assert_int_equal(changed, 1);
    assert_int_equal(p1.woken, 1);
    assert_int_equal(p2.woken, 1);
    assert_ptr_equal(p1.last, e);
    assert_ptr_equal(p2.last, e);
    assert_int_equal(p3.woken, 0);
    assert_false(ad_list_linked(&p1.w.link));
    assert_true(ad_list_empty(&e->waiters));

    /* Woken waiters are gone: the next change wakes nobody. */
    ad_cache_put(mk("job_a", 4, AD_RUNNING, 12), &changed, NULL);
    assert_int_equal(p1.woken, 1);
    assert_int_equal(p2.woken, 1);

    ad_cache_unwatch(&p1.w); /* already unlinked by the wake: harmless */
    ad_cache_unwatch(&p3.w);
    assert_true(ad_list_empty(&other->waiters));
}

/*
 * A long poll waiting for a status change re-watches the entry from its wake callback when only the progress
 * changed (api_jobs.c poll_wake, outcome_wake). That must leave it waiting for the next change, not wake it
 * again inside the same put: otherwise the event loop spins forever. The probe re-watches at most 3 times so
 * that a broken cache fails this test instead of hanging it.
 */
static void test_rewatch_from_wake_waits_for_next_change(void **state)
{
    (void)state;
    int changed;
    struct ad_entry *e = ad_cache_put(mk("job_a", 1, AD_RUNNING, 10), &changed, NULL);
    static struct probe p;
    probe_init(&p);
    p.rewatch = 3;
    ad_cache_watch(e, &p.w);
    ad_cache_put(mk("job_a", 2, AD_RUNNING, 20), &changed, NULL);
    if (p.woken != 1)
        fail_msg("one change woke a re-watching waiter %d times", p.woken);
    assert_true(ad_list_linked(&p.w.link));
    ad_cache_put(mk("job_a", 3, AD_RUNNING, 30), &changed, NULL);
    assert_int_equal(p.woken, 2);
    ad_cache_unwatch(&p.w);
}

static void test_unwatch(void **state)
{
    (void)state;
    int changed;
    struct ad_entry *e = ad_cache_put(mk("job_a", 1, AD_RUNNING, 10), &changed, NULL);
    static struct probe p1, p2, p3; /* static: teardown may still wake them after a failed assertion */
    probe_init(&p1);
    probe_init(&p2);
    probe_init(&p3);
    ad_cache_watch(e, &p1.w);
    ad_cache_watch(e, &p2.w);
    ad_cache_watch(e, &p3.w);
    ad_cache_unwatch(&p2.w); /* the middle one */
    ad_cache_unwatch(&p2.w); /* twice is safe */
    assert_false(ad_list_linked(&p2.w.link));
    ad_cache_put(mk("job_a", 2, AD_RUNNING, 20), &changed, NULL);
    assert_int_equal(p1.woken, 1);
    assert_int_equal(p2.woken, 0);
    assert_int_equal(p3.woken, 1);

    /* A waiter that was never watched can be unwatched too. */
    static struct probe p4;
    probe_init(&p4);
    ad_cache_unwatch(&p4.w);
    assert_int_equal(p4.woken, 0);
}

static void test_remove_wakes_with_null(void **state)
{
    (void)state;
    int changed;
    struct ad_entry *e = ad_cache_put(mk("job_a", 1, AD_RUNNING, 10), &changed, NULL);
    ad_cache_put(mk("job_b", 1, AD_RUNNING, 10), &changed, NULL);
    static struct probe p;
    probe_init(&p);
    p.last = e;
    ad_cache_watch(e, &p.w);
    ad_cache_remove("job_a");
    assert_int_equal(p.woken, 1);
    assert_null(p.last);
    assert_false(ad_list_linked(&p.w.link));
    assert_null(ad_cache_get("job_a"));
    assert_non_null(ad_cache_get("job_b"));
    assert_int_equal(ad_cache_size(), 1);
    ad_cache_unwatch(&p.w); /* after the entry is freed: must not touch it */

    ad_cache_remove("job_a"); /* unknown: no-op */
    ad_cache_remove("job_zzz");
    assert_int_equal(ad_cache_size(), 1);

    /* The id can be cached again afterwards. */
    struct ad_entry *again = ad_cache_put(mk("job_a", 1, AD_QUEUED, -1), &changed, NULL);
    assert_int_equal(changed, 1);
    assert_ptr_equal(ad_cache_get("job_a"), again);
}

/* A budget of three and a half queued jobs as mk makes them (ids of the same length cost the same): room for
 * three, whatever the few bytes by which a running version differs. */
static int setup_cap3(void **state)
{
    (void)state;
    int changed;
    ad_cache_init(1 << 20);
    ad_cache_put(mk("job_0", 1, AD_QUEUED, -1), &changed, NULL);
    size_t one = ad_cache_bytes();
    ad_cache_clear();
    ad_cache_init(3 * one + one / 2);
    return 0;
}

static void test_eviction_lru_skips_waiters(void **state)
{
    (void)state;
    int changed;
    char id[16];
    for (int i = 0; i < 3; i++) {
        snprintf(id, sizeof(id), "job_%d", i);
        ad_cache_put(mk(id, 1, AD_QUEUED, -1), &changed, NULL);
    }
    assert_int_equal(ad_cache_size(), 3);

    /* job_0 is the oldest but has a waiter; job_1 is touched by a get; so job_2 is least recently used. */
    static struct probe p;
    probe_init(&p);
    ad_cache_watch(ad_cache_get("job_0"), &p.w);
    ad_cache_get("job_1");
    ad_cache_get("job_0");
    ad_cache_get("job_1");
    /* LRU order now (newest first): 1, 0, 2 */
    ad_cache_put(mk("job_3", 1, AD_QUEUED, -1), &changed, NULL);
    assert_int_equal(ad_cache_size(), 3);
    assert_null(ad_cache_get("job_2"));
    assert_non_null(ad_cache_get("job_0"));
    assert_non_null(ad_cache_get("job_1"));
    assert_non_null(ad_cache_get("job_3"));
    ad_cache_get("job_0");
    ad_cache_get("job_1");
    ad_cache_get("job_3");
    /* order: 3, 1, 0; job_0 still has its waiter, so the next insert evicts job_1 */
    ad_cache_put(mk("job_4", 1, AD_QUEUED, -1), &changed, NULL);
    assert_int_equal(ad_cache_size(), 3);
    assert_null(ad_cache_get("job_1"));
    assert_non_null(ad_cache_get("job_0"));
    assert_int_equal(p.woken, 0); /* eviction never wakes or frees a watched entry */
    ad_cache_unwatch(&p.w);
}

/* Replacing an entry with a newer version counts as a use: a job that just changed is not the one evicted. */
static void test_update_counts_as_use(void **state)
{
    (void)state;
    int changed;
    char id[16];
    for (int i = 0; i < 3; i++) {
        snprintf(id, sizeof(id), "job_%d", i);
        ad_cache_put(mk(id, 1, AD_QUEUED, -1), &changed, NULL);
    }
    ad_cache_put(mk("job_0", 2, AD_RUNNING, 1), &changed, NULL);
    assert_int_equal(changed, 1);
    ad_cache_put(mk("job_3", 1, AD_QUEUED, -1), &changed, NULL);
    assert_int_equal(ad_cache_size(), 3);
    assert_non_null(ad_cache_get("job_0"));
    assert_null(ad_cache_get("job_1"));
    assert_non_null(ad_cache_get("job_2"));
    assert_non_null(ad_cache_get("job_3"));
}

/*
 * When every older entry has a waiter, the entry just inserted is the only one without: put must still return
 * a live entry that a get finds (the caller sends its body). The cache may then exceed its cap.
 */
static void test_eviction_never_drops_the_entry_being_put(void **state)
{
    (void)state;
    int changed;
    static struct probe p[3];
    char id[16];
    for (int i = 0; i < 3; i++) {
        snprintf(id, sizeof(id), "job_%d", i);
        struct ad_entry *e = ad_cache_put(mk(id, 1, AD_QUEUED, -1), &changed, NULL);
        probe_init(&p[i]);
        ad_cache_watch(e, &p[i].w);
    }
    struct ad_entry *e = ad_cache_put(mk("job_new", 7, AD_RUNNING, 1), &changed, NULL);
    assert_int_equal(changed, 1);
    struct ad_entry *found = ad_cache_get("job_new");
    if (found == NULL)
        fail_msg("the entry just put was evicted (put returned a freed entry)");
    assert_ptr_equal(found, e);
    assert_string_equal(e->job->id, "job_new");
    assert_int_equal(e->job->seq, 7);
    for (int i = 0; i < 3; i++) {
        snprintf(id, sizeof(id), "job_%d", i);
        assert_non_null(ad_cache_get(id));
        ad_cache_unwatch(&p[i].w);
    }
}

static int setup_big(void **state)
{
    (void)state;
    ad_cache_init((size_t)1 << 30);
    return 0;
}

static struct ad_job *mk_payload(const char *id, int64_t seq, size_t payload_bytes)
{
    struct ad_job *j = mk(id, seq, AD_QUEUED, -1);
    char *p = ad_malloc(payload_bytes + 1);
    memset(p, 'x', payload_bytes);
    p[0] = '"';
    p[payload_bytes - 1] = '"';
    p[payload_bytes] = '\0';
    free(j->payload);
    j->payload = p;
    return j;
}

/* The budget counts each entry's job and body: a payload counts twice (field and rendered), and the count follows
 * puts, replacements and removals. */
static void test_bytes_follow_the_entries(void **state)
{
    (void)state;
    int changed;
    ad_cache_put(mk("job_a", 1, AD_QUEUED, -1), &changed, NULL);
    size_t small = ad_cache_bytes();
    assert_true(small > 0);
    ad_cache_put(mk_payload("job_b", 1, 10000), &changed, NULL);
    size_t both = ad_cache_bytes();
    if (both - small < 2 * 10000)
        fail_msg("a 10000-byte payload added %zu bytes, want at least 20000", both - small);
    ad_cache_put(mk("job_b", 2, AD_QUEUED, -1), &changed, NULL); /* replaced by a small version */
    assert_int_equal(ad_cache_bytes(), 2 * small);
    ad_cache_remove("job_a");
    assert_int_equal(ad_cache_bytes(), small);
    ad_cache_remove("job_b");
    assert_int_equal(ad_cache_bytes(), 0);
}

/* Large jobs are evicted by their bytes, not by their number: a 1 MiB budget holds two jobs of 200 kB payloads
 * (about 400 kB each), the two put last. */
static void test_large_entries_are_evicted_by_bytes(void **state)
{
    (void)state;
    int changed;
    char id[16];
    for (int i = 0; i < 10; i++) {
        snprintf(id, sizeof(id), "job_%d", i);
        struct ad_entry *e = ad_cache_put(mk_payload(id, 1, 200000), &changed, NULL);
        assert_ptr_equal(ad_cache_get(id), e);
        if (ad_cache_bytes() > (size_t)1 << 20)
            fail_msg("after %d puts the entries take %zu bytes, over the 1 MiB budget", i + 1, ad_cache_bytes());
    }
    assert_int_equal(ad_cache_size(), 2);
    assert_non_null(ad_cache_get("job_8"));
    assert_non_null(ad_cache_get("job_9"));
    assert_null(ad_cache_get("job_7"));

    /* A version that grows past the budget evicts the others, and is kept itself. */
    ad_cache_put(mk("job_a", 1, AD_QUEUED, -1), &changed, NULL);
    ad_cache_put(mk_payload("job_a", 2, 600000), &changed, NULL);
    assert_int_equal(ad_cache_size(), 1);
    assert_non_null(ad_cache_get("job_a"));
}

/* While held, puts evict nothing, so that every entry an operation published stays valid until its answer is
 * written (hub.c): three jobs of 400 kB under a 1 MiB budget all stay, and letting go evicts down to the budget. */
static void test_hold_defers_eviction(void **state)
{
    (void)state;
    int changed;
    ad_cache_hold(1);
    struct ad_entry *a = ad_cache_put(mk_payload("job_a", 1, 200000), &changed, NULL);
    struct ad_entry *b = ad_cache_put(mk_payload("job_b", 1, 200000), &changed, NULL);
    struct ad_entry *c = ad_cache_put(mk_payload("job_c", 1, 200000), &changed, NULL);
    assert_int_equal(ad_cache_size(), 3);
    assert_ptr_equal(ad_cache_get("job_a"), a);
    assert_ptr_equal(ad_cache_get("job_b"), b);
    assert_ptr_equal(ad_cache_get("job_c"), c);
    assert_string_equal(a->job->id, "job_a");
    ad_cache_hold(0);
    assert_int_equal(ad_cache_size(), 2);
    assert_true(ad_cache_bytes() <= (size_t)1 << 20);
    assert_null(ad_cache_get("job_a")); /* the least recently used */
}

static void test_growth_keeps_every_entry(void **state)
{
    (void)state;
    enum { N = 5000 };
    static struct ad_entry *entries[N];
    char id[32];
    int changed;
    for (int i = 0; i < N; i++) {
        snprintf(id, sizeof(id), "job_%07d", i);
        entries[i] = ad_cache_put(mk(id, i + 1, AD_QUEUED, -1), &changed, NULL);
        assert_int_equal(changed, 1);
    }
    assert_int_equal(ad_cache_size(), N);
    for (int i = 0; i < N; i++) {
        snprintf(id, sizeof(id), "job_%07d", i);
        struct ad_entry *e = ad_cache_get(id);
        if (e != entries[i])
            fail_msg("%s not found after growth", id);
        assert_string_equal(e->job->id, id);
    }
    /* Updates and removals still find their entry after the table grew. */
    for (int i = 0; i < N; i += 2) {
        snprintf(id, sizeof(id), "job_%07d", i);
        ad_cache_put(mk(id, N + i + 1, AD_RUNNING, 1), &changed, NULL);
        assert_int_equal(changed, 1);
    }
    for (int i = 1; i < N; i += 2) {
        snprintf(id, sizeof(id), "job_%07d", i);
        ad_cache_remove(id);
    }
    assert_int_equal(ad_cache_size(), N / 2);
    for (int i = 0; i < N; i++) {
        snprintf(id, sizeof(id), "job_%07d", i);
        struct ad_entry *e = ad_cache_get(id);
        if (i % 2 == 0) {
            assert_non_null(e);
            assert_int_equal(e->job->status, AD_RUNNING);
        } else if (e != NULL) {
            fail_msg("%s still cached after remove", id);
        }
    }
}

/* Removals in random order from a table whose runs of occupied slots overlap: every entry left is still
 * found, none removed is, and a removed id can be put again. Breaks when a removal leaves a hole in the run of
 * an entry after it (or moves one past its home slot). */
static void test_removals_keep_the_rest_reachable(void **state)
{
    (void)state;
    enum { N = 20000 };
    static char present[N];
    char id[32];
    int changed;
    for (int i = 0; i < N; i++) {
        snprintf(id, sizeof(id), "job_%07d", i);
        ad_cache_put(mk(id, i + 1, AD_QUEUED, -1), &changed, NULL);
        present[i] = 1;
    }
    uint32_t r = 12345;
    for (int round = 0; round < 3; round++) {
        for (int k = 0; k < N / 2; k++) {
            r = r * 1103515245u + 12345u;
            int i = (int)((r >> 8) % N);
            snprintf(id, sizeof(id), "job_%07d", i);
            if (present[i]) {
                ad_cache_remove(id);
                present[i] = 0;
            } else if (k % 3 == 0) {
                ad_cache_put(mk(id, N + i + 1, AD_QUEUED, -1), &changed, NULL);
                present[i] = 1;
            }
        }
        size_t want = 0;
        for (int i = 0; i < N; i++) {
            snprintf(id, sizeof(id), "job_%07d", i);
            struct ad_entry *e = ad_cache_get(id);
            if (present[i] != (e != NULL))
                fail_msg("round %d: %s is %s", round, id, present[i] ? "lost" : "still cached");
            if (e != NULL)
                assert_string_equal(e->job->id, id);
            want += present[i];
        }
        assert_int_equal(ad_cache_size(), want);
    }
}

static void test_clear_wakes_and_empties(void **state)
{
    (void)state;
    int changed;
    struct ad_entry *e = ad_cache_put(mk("job_a", 1, AD_RUNNING, 10), &changed, NULL);
    ad_cache_put(mk("job_b", 1, AD_RUNNING, 10), &changed, NULL);
    static struct probe p;
    probe_init(&p);
    p.last = e;
    ad_cache_watch(e, &p.w);
    ad_cache_clear();
    assert_int_equal(p.woken, 1);
    assert_null(p.last);
    assert_int_equal(ad_cache_size(), 0);
    assert_int_equal(ad_cache_bytes(), 0);
    /* Usable again after a new init (teardown clears once more). */
    ad_cache_init(1 << 20);
    assert_null(ad_cache_get("job_a"));
    ad_cache_put(mk("job_a", 1, AD_RUNNING, 10), &changed, NULL);
    assert_int_equal(ad_cache_size(), 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_put_get, setup_small, teardown),
        cmocka_unit_test_setup_teardown(test_older_seq_never_replaces_newer, setup_small, teardown),
        cmocka_unit_test_setup_teardown(test_waiters_woken_once_on_change, setup_small, teardown),
        cmocka_unit_test_setup_teardown(test_rewatch_from_wake_waits_for_next_change, setup_small, teardown),
        cmocka_unit_test_setup_teardown(test_unwatch, setup_small, teardown),
        cmocka_unit_test_setup_teardown(test_remove_wakes_with_null, setup_small, teardown),
        cmocka_unit_test_setup_teardown(test_eviction_lru_skips_waiters, setup_cap3, teardown),
        cmocka_unit_test_setup_teardown(test_update_counts_as_use, setup_cap3, teardown),
        cmocka_unit_test_setup_teardown(test_eviction_never_drops_the_entry_being_put, setup_cap3, teardown),
        cmocka_unit_test_setup_teardown(test_bytes_follow_the_entries, setup_big, teardown),
        cmocka_unit_test_setup_teardown(test_large_entries_are_evicted_by_bytes, setup_small, teardown),
        cmocka_unit_test_setup_teardown(test_hold_defers_eviction, setup_small, teardown),
        cmocka_unit_test_setup_teardown(test_growth_keeps_every_entry, setup_big, teardown),
        cmocka_unit_test_setup_teardown(test_removals_keep_the_rest_reachable, setup_big, teardown),
        cmocka_unit_test_setup_teardown(test_clear_wakes_and_empties, setup_small, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
