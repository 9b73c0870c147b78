/*
 * reader.c - the thread pools (reader.h): one queue per pool, its threads taking from it, each on its own store
 * connection. The readers are two, so that a slow read (a long list) does not hold up a cache miss behind it; a
 * read that waits on a lock still waits, but on its own thread, while the loop serves what the cache holds.
 */
#include "hub/reader.h"
#include "hub/hub.h"
#include "common/util.h"

#include <stdint.h>
#include <stdio.h>
#include <time.h>

static struct ad_pool readers = {.name = "acceptd-reader", .nthreads = AD_READER_THREADS};

static void *pool_main(void *arg)
{
    struct ad_pool_thread *t = arg;
    struct ad_pool *p = t->pool;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        if (!p->stopping && ad_mono_ms() >= p->due) {
            p->due = INT64_MAX; /* this thread runs it; the others serve the queue meanwhile */
            pthread_mutex_unlock(&p->mu);
            p->every(t->conn);
            pthread_mutex_lock(&p->mu);
            p->due = ad_mono_ms() + p->every_ms;
        } else if (p->head == NULL && p->stopping) {
            break;
        } else if (p->head == NULL && p->due == INT64_MAX) {
            pthread_cond_wait(&p->cv, &p->mu);
        } else if (p->head == NULL) {
            struct timespec at = {.tv_sec = p->due / 1000, .tv_nsec = p->due % 1000 * 1000000};
            pthread_cond_timedwait(&p->cv, &p->mu, &at);
        } else {
            struct ad_op *op = p->head;
            p->head = op->next;
            if (p->head == NULL)
                p->tail = &p->head;
            op->next = NULL;
            int refuse = p->stopping && !p->drain;
            pthread_mutex_unlock(&p->mu);
            op->err = refuse ? AD_E_UNAVAILABLE : op->apply(op, t->conn);
            ad_writer_complete(op);
            pthread_mutex_lock(&p->mu);
        }
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

int ad_pool_start(struct ad_pool *p, struct ad_store *s, char *err, size_t errlen)
{
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&p->cv, &ca);
    pthread_condattr_destroy(&ca);
    pthread_mutex_init(&p->mu, NULL);
    p->store = s;
    p->head = NULL;
    p->tail = &p->head;
    p->stopping = 0;
    p->due = p->every != NULL ? ad_mono_ms() : INT64_MAX;
    for (p->started = 0; p->started < p->nthreads; p->started++) {
        struct ad_pool_thread *t = &p->threads[p->started];
        t->pool = p;
        t->conn = s->ops->connect(s, err, errlen);
        if (t->conn == NULL)
            return -1;
        if (pthread_create(&t->id, NULL, pool_main, t) != 0) {
            s->ops->disconnect(t->conn);
            snprintf(err, errlen, "cannot start a thread (%s)", p->name);
            return -1;
        }
        pthread_setname_np(t->id, p->name);
    }
    return 0;
}

void ad_pool_submit(struct ad_pool *p, struct ad_op *op)
{
    op->next = NULL;
    op->err = AD_E_OK;
    pthread_mutex_lock(&p->mu);
    *p->tail = op;
    p->tail = &op->next;
    pthread_cond_signal(&p->cv);
    pthread_mutex_unlock(&p->mu);
}

void ad_pool_stop(struct ad_pool *p)
{
    if (p->started == 0)
        return;
    pthread_mutex_lock(&p->mu);
    p->stopping = 1;
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    for (size_t i = 0; i < p->started; i++) {
        pthread_join(p->threads[i].id, NULL);
        p->store->ops->disconnect(p->threads[i].conn);
    }
    p->started = 0;
    pthread_cond_destroy(&p->cv);
    pthread_mutex_destroy(&p->mu);
}

int ad_reader_start(struct ad_store *s, char *err, size_t errlen)
{
    return s->ops->reads_may_block ? ad_pool_start(&readers, s, err, errlen) : 0;
}

void ad_reader_stop(void)
{
    ad_pool_stop(&readers);
}

void ad_hub_read(struct ad_op *op)
{
    if (ad_hub.store->ops->reads_may_block) {
        ad_pool_submit(&readers, op);
        return;
    }
    /* SQLite: inline, on the loop's connection (reader.h says why). */
    op->next = NULL;
    op->err = op->apply(op, ad_hub.rconn);
    op->done(op);
}
