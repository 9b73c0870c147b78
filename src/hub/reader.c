/*
 * reader.c - the reader threads (reader.h): one queue, AD_READER_THREADS threads taking from it, each on its
 * own store connection. Two, so that a slow read (a long list) does not hold up a cache miss behind it; a read
 * that waits on a lock still waits, but on its own thread, while the loop serves what the cache holds.
 */
#include "hub/reader.h"
#include "hub/hub.h"
#include "common/util.h"

#include <pthread.h>

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static struct ad_op *head, **tail = &head;
static int stopping;
static size_t nthreads;
static pthread_t threads[AD_READER_THREADS];
static struct ad_conn *conns[AD_READER_THREADS];
static struct ad_store *store;

static void *reader_main(void *arg)
{
    struct ad_conn *c = arg;
    pthread_mutex_lock(&mu);
    for (;;) {
        while (head == NULL && !stopping)
            pthread_cond_wait(&cv, &mu);
        if (head == NULL)
            break;
        struct ad_op *op = head;
        head = op->next;
        if (head == NULL)
            tail = &head;
        op->next = NULL;
        int stop = stopping;
        pthread_mutex_unlock(&mu);
        op->err = stop ? AD_E_UNAVAILABLE : op->apply(op, c);
        ad_writer_complete(op);
        pthread_mutex_lock(&mu);
    }
    pthread_mutex_unlock(&mu);
    return NULL;
}

int ad_reader_start(struct ad_store *s, char *err, size_t errlen)
{
    store = s;
    if (!s->ops->reads_may_block)
        return 0;
    stopping = 0;
    for (nthreads = 0; nthreads < AD_READER_THREADS; nthreads++) {
        conns[nthreads] = s->ops->connect(s, err, errlen);
        if (conns[nthreads] == NULL)
            return -1;
        if (pthread_create(&threads[nthreads], NULL, reader_main, conns[nthreads]) != 0) {
            s->ops->disconnect(conns[nthreads]);
            snprintf(err, errlen, "cannot start a reader thread");
            return -1;
        }
        pthread_setname_np(threads[nthreads], "acceptd-reader");
    }
    return 0;
}

void ad_reader_submit(struct ad_op *op)
{
    op->next = NULL;
    op->err = AD_E_OK;
    pthread_mutex_lock(&mu);
    *tail = op;
    tail = &op->next;
    pthread_cond_signal(&cv);
    pthread_mutex_unlock(&mu);
}

void ad_reader_stop(void)
{
    pthread_mutex_lock(&mu);
    stopping = 1;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
    for (size_t i = 0; i < nthreads; i++) {
        pthread_join(threads[i], NULL);
        store->ops->disconnect(conns[i]);
    }
    nthreads = 0;
}

void ad_hub_read(struct ad_op *op)
{
    if (ad_hub.store->ops->reads_may_block) {
        ad_reader_submit(op);
        return;
    }
    /* SQLite: inline, on the loop's connection (reader.h says why). */
    op->next = NULL;
    op->err = op->apply(op, ad_hub.rconn);
    op->done(op);
}
