/*
 * timer.h - the daemon's one timer structure: a binary min-heap of deadlines on the event loop thread.
 *
 * Long-poll timeouts, lease expiry, runAt wake-ups and the retention sweeper all live here. The event loop
 * sleeps until the earliest deadline (ad_timers_next_wait) and then runs what is due (ad_timers_run).
 * Not thread-safe: only the event loop thread touches timers.
 */
#ifndef AD_TIMER_H
#define AD_TIMER_H

#include <stddef.h>
#include <stdint.h>

struct ad_timer {
    int64_t at;  /* monotonic ms */
    size_t slot; /* heap index + 1; 0 = not armed */
    void (*cb)(struct ad_timer *t);
};

/* Arm (or re-arm) t to fire at monotonic time at_ms. t->cb must be set. */
void ad_timer_arm(struct ad_timer *t, int64_t at_ms);
/* Disarm t if armed. */
void ad_timer_cancel(struct ad_timer *t);
static inline int ad_timer_armed(const struct ad_timer *t)
{
    return t->slot != 0;
}
/* Milliseconds until the earliest deadline, capped at max_ms (0 when one is due). */
int32_t ad_timers_next_wait(int32_t max_ms);
/* Fire every timer whose deadline has passed. Callbacks may arm or cancel timers. */
void ad_timers_run(void);
/* Number of armed timers. */
size_t ad_timers_count(void);

#endif
