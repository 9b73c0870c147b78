/*
 * timer.c - binary min-heap of struct ad_timer keyed by deadline.
 *
 * Each timer remembers its heap slot, so cancel and re-arm are O(log n) without searching.
 */
#include "common/timer.h"
#include "common/util.h"

#include <stdlib.h>

static struct ad_timer **heap;
static size_t heap_len, heap_cap;

static void place(size_t i, struct ad_timer *t)
{
    heap[i] = t;
    t->slot = i + 1;
}

static void sift_up(size_t i)
{
    struct ad_timer *t = heap[i];
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (heap[parent]->at <= t->at)
            break;
        place(i, heap[parent]);
        i = parent;
    }
    place(i, t);
}

static void sift_down(size_t i)
{
    struct ad_timer *t = heap[i];
    for (;;) {
        size_t child = 2 * i + 1;
        if (child >= heap_len)
            break;
        if (child + 1 < heap_len && heap[child + 1]->at < heap[child]->at)
            child++;
        if (t->at <= heap[child]->at)
            break;
        place(i, heap[child]);
        i = child;
    }
    place(i, t);
}

void ad_timer_cancel(struct ad_timer *t)
{
    if (t->slot == 0)
        return;
    size_t i = t->slot - 1;
    t->slot = 0;
    struct ad_timer *last = heap[--heap_len];
    if (i == heap_len)
        return;
    place(i, last);
    sift_up(i);
    sift_down(last->slot - 1);
}

void ad_timer_arm(struct ad_timer *t, int64_t at_ms)
{
    ad_timer_cancel(t);
    if (heap_len == heap_cap) {
        heap_cap = heap_cap != 0 ? heap_cap * 2 : 64;
        heap = ad_realloc(heap, heap_cap * sizeof(*heap));
    }
    t->at = at_ms;
    place(heap_len, t);
    sift_up(heap_len++);
}

int32_t ad_timers_next_wait(int32_t max_ms)
{
    if (heap_len == 0)
        return max_ms;
    int64_t wait = heap[0]->at - ad_mono_ms();
    if (wait < 0)
        return 0;
    return wait < max_ms ? (int32_t)wait : max_ms;
}

void ad_timers_run(void)
{
    int64_t now = ad_mono_ms();
    while (heap_len != 0 && heap[0]->at <= now) {
        struct ad_timer *t = heap[0];
        ad_timer_cancel(t);
        t->cb(t);
    }
}

size_t ad_timers_count(void)
{
    return heap_len;
}
