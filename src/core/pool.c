/*
 * pool.c - the queue-and-threads primitive (pool.h): one mutex, one condition variable on the monotonic clock, a
 * singly linked FIFO. A submit signals after it unlocks, so that the thread it wakes does not wake only to wait
 * for the lock. The lock and the condition variable are made once and kept after a stop, so that a submit after
 * the stop still finds them and is refused.
 */
#include "core/pool.h"

#include <stdio.h>
#include <time.h>

/* Wait on p->cv until signalled or deadline_ns (mu held). */
static void wait_until(struct ad_pool *p, int64_t deadline_ns)
{
    if (deadline_ns == AD_POOL_FOREVER) {
        pthread_cond_wait(&p->cv, &p->mu);
        return;
    }
    struct timespec at = {.tv_sec = deadline_ns / 1000000000, .tv_nsec = deadline_ns % 1000000000};
    pthread_cond_timedwait(&p->cv, &p->mu, &at);
}

static struct ad_pool_item *pop(struct ad_pool *p)
{
    struct ad_pool_item *it = p->head;
    p->head = it->next;
    if (p->head == NULL)
        p->tail = &p->head;
    p->queued--;
    it->next = NULL;
    return it;
}

/* A thread leaves (mu held): once the last has, nothing more is queued. */
static void leave(struct ad_pool *p)
{
    if (++p->left == p->started)
        p->closed = 1;
}

/* The life of a thread with run: items in order, every when due, until stopping with nothing queued. */
static void serve(struct ad_pool *p, void *state)
{
    pthread_mutex_lock(&p->mu);
    for (;;) {
        if (p->every != NULL && !p->stopping && ad_mono_ns() >= p->due) {
            p->due = AD_POOL_FOREVER; /* this thread runs it; the others serve the queue meanwhile */
            pthread_mutex_unlock(&p->mu);
            p->every(p, state);
            pthread_mutex_lock(&p->mu);
            p->due = ad_mono_ns() + p->every_ms * 1000000;
        } else if (p->head != NULL) {
            struct ad_pool_item *it = pop(p);
            int dropped = p->stopping && !p->drain;
            pthread_mutex_unlock(&p->mu);
            if (!dropped)
                p->run(p, state, it);
            else if (p->drop != NULL)
                p->drop(p, it);
            pthread_mutex_lock(&p->mu);
        } else if (p->stopping) {
            leave(p);
            break;
        } else {
            wait_until(p, p->every != NULL ? p->due : AD_POOL_FOREVER);
        }
    }
    pthread_mutex_unlock(&p->mu);
}

static void *thread_main(void *arg)
{
    struct ad_pool_thread *t = arg;
    /* Named here, before it runs anything, and by its creator too (ad_pool_start), so that it has its name both
     * before its first item and once the start has returned. */
    pthread_setname_np(pthread_self(), t->pool->name);
    if (t->pool->main != NULL)
        t->pool->main(t->pool, t->state);
    else
        serve(t->pool, t->state);
    return NULL;
}

int ad_pool_start(struct ad_pool *p, char *err, size_t errlen)
{
    if (!p->inited) {
        pthread_condattr_t ca;
        pthread_condattr_init(&ca);
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
        pthread_cond_init(&p->cv, &ca);
        pthread_condattr_destroy(&ca);
        pthread_mutex_init(&p->mu, NULL);
        p->inited = 1;
    }
    pthread_mutex_lock(&p->mu);
    p->head = NULL;
    p->tail = &p->head;
    p->queued = 0;
    p->stopping = p->closed = 0;
    p->started = p->left = 0;
    p->due = p->every != NULL ? ad_mono_ns() : AD_POOL_FOREVER;
    pthread_mutex_unlock(&p->mu);
    for (size_t i = 0; i < p->nthreads && i < AD_POOL_MAX_THREADS; i++) {
        struct ad_pool_thread *t = &p->threads[i];
        t->pool = p;
        t->state = NULL;
        if (p->thread_start != NULL && (t->state = p->thread_start(p, err, errlen)) == NULL) {
            ad_pool_stop(p);
            return -1;
        }
        /* Counted before it runs: a thread that left at once must not close the pool the others serve. */
        pthread_mutex_lock(&p->mu);
        p->started++;
        pthread_mutex_unlock(&p->mu);
        if (pthread_create(&t->id, NULL, thread_main, t) != 0) {
            pthread_mutex_lock(&p->mu);
            p->started--;
            pthread_mutex_unlock(&p->mu);
            if (p->thread_end != NULL)
                p->thread_end(p, t->state);
            snprintf(err, errlen, "cannot start a thread (%s)", p->name);
            ad_pool_stop(p);
            return -1;
        }
        pthread_setname_np(t->id, p->name);
    }
    return 0;
}

int ad_pool_submit(struct ad_pool *p, struct ad_pool_item *it)
{
    it->next = NULL;
    if (!p->inited)
        return -1;
    pthread_mutex_lock(&p->mu);
    if (p->closed || p->started == 0) {
        pthread_mutex_unlock(&p->mu);
        return -1;
    }
    *p->tail = it;
    p->tail = &it->next;
    p->queued++;
    pthread_mutex_unlock(&p->mu);
    pthread_cond_signal(&p->cv);
    return 0;
}

void ad_pool_stop(struct ad_pool *p)
{
    if (!p->inited)
        return;
    pthread_mutex_lock(&p->mu);
    size_t n = p->started;
    p->stopping = 1;
    if (n == 0)
        p->closed = 1;
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    for (size_t i = 0; i < n; i++) {
        pthread_join(p->threads[i].id, NULL);
        if (p->thread_end != NULL)
            p->thread_end(p, p->threads[i].state);
    }
    pthread_mutex_lock(&p->mu);
    p->started = p->left = 0;
    p->closed = 1;
    pthread_mutex_unlock(&p->mu);
}

void ad_pool_destroy(struct ad_pool *p)
{
    if (!p->inited)
        return;
    pthread_cond_destroy(&p->cv);
    pthread_mutex_destroy(&p->mu);
    p->inited = 0;
}

size_t ad_pool_wait(struct ad_pool *p, size_t want, int64_t deadline_ns)
{
    pthread_mutex_lock(&p->mu);
    while (p->queued < want && !p->stopping && ad_mono_ns() < deadline_ns)
        wait_until(p, deadline_ns);
    size_t n = p->queued;
    pthread_mutex_unlock(&p->mu);
    return n;
}

struct ad_pool_item *ad_pool_take(struct ad_pool *p, size_t max, size_t *n)
{
    pthread_mutex_lock(&p->mu);
    struct ad_pool_item *first = NULL, **tail = &first;
    for (*n = 0; *n < max && p->head != NULL; (*n)++) {
        *tail = pop(p);
        tail = &(*tail)->next;
    }
    pthread_mutex_unlock(&p->mu);
    return first;
}

int ad_pool_closing(struct ad_pool *p)
{
    pthread_mutex_lock(&p->mu);
    int closing = p->stopping && p->head == NULL;
    if (closing)
        leave(p);
    pthread_mutex_unlock(&p->mu);
    return closing;
}

int ad_pool_stopping(struct ad_pool *p)
{
    pthread_mutex_lock(&p->mu);
    int s = p->stopping;
    pthread_mutex_unlock(&p->mu);
    return s;
}
