/*
 * loop.c - core/loop.h on libh2o's public API: the loop is an h2o evloop, a mailbox is a receiver of h2o's
 * multithread queue (one queue per loop), a task is an entry of a zero timeout.
 *
 * A mailbox keeps its messages in a list of its own under its own lock and sends h2o one wake-up message while
 * any wait, so that the nodes senders pass in are ours (struct ad_list) and never h2o's. A task scheduled from its
 * own callback is linked only after the evloop run returns: h2o runs a zero timeout's entries until none is left,
 * so linked at once it would run again in the same run, and the loop would not read between two chunks of work.
 */
#include "http/loop.h"
#include "common/util.h"

#include <pthread.h>
#include <stdlib.h>

struct ad_loop {
    h2o_loop_t *h2o;
    h2o_multithread_queue_t *queue;
    h2o_timeout_t zero;
    struct ad_list again; /* tasks scheduled from their own callback, linked after the run */
};

struct ad_mailbox {
    h2o_multithread_receiver_t receiver;
    h2o_multithread_message_t wake; /* in h2o's queue while wake_sent */
    void (*received)(void *arg, struct ad_list *msgs);
    void *arg;
    pthread_mutex_t mu;
    struct ad_list msgs; /* under mu */
    int wake_sent;       /* under mu */
};

struct ad_loop_task {
    h2o_timeout_entry_t entry;
    struct ad_loop *loop;
    void (*run)(void *arg);
    void *arg;
    struct ad_list again; /* in loop->again */
    int running;
};

struct ad_loop *ad_loop_new(void)
{
    struct ad_loop *l = ad_calloc(1, sizeof(*l));
    l->h2o = h2o_evloop_create();
    l->queue = h2o_multithread_create_queue(l->h2o);
    h2o_timeout_init(l->h2o, &l->zero, 0);
    ad_list_init(&l->again);
    return l;
}

h2o_loop_t *ad_loop_h2o(struct ad_loop *loop)
{
    return loop->h2o;
}

void ad_loop_run(struct ad_loop *loop, int32_t max_wait_ms)
{
    h2o_evloop_run(loop->h2o, max_wait_ms);
    while (!ad_list_empty(&loop->again)) {
        struct ad_loop_task *t = AD_CONTAINER_OF(loop->again.next, struct ad_loop_task, again);
        ad_list_unlink(&t->again);
        if (!h2o_timeout_is_linked(&t->entry))
            h2o_timeout_link(loop->h2o, &loop->zero, &t->entry);
    }
}

/* ---- mailboxes ---- */

static void on_wake(h2o_multithread_receiver_t *r, h2o_linklist_t *messages)
{
    struct ad_mailbox *mb = H2O_STRUCT_FROM_MEMBER(struct ad_mailbox, receiver, r);
    while (!h2o_linklist_is_empty(messages)) /* the wake message, the only one sent on this receiver */
        h2o_linklist_unlink(messages->next);
    struct ad_list got = AD_LIST_INIT(got);
    pthread_mutex_lock(&mb->mu);
    mb->wake_sent = 0;
    ad_list_insert_list(&got, &mb->msgs);
    pthread_mutex_unlock(&mb->mu);
    if (!ad_list_empty(&got))
        mb->received(mb->arg, &got);
}

struct ad_mailbox *ad_mailbox_new(struct ad_loop *loop, void (*received)(void *arg, struct ad_list *msgs), void *arg)
{
    struct ad_mailbox *mb = ad_calloc(1, sizeof(*mb));
    mb->received = received;
    mb->arg = arg;
    pthread_mutex_init(&mb->mu, NULL);
    ad_list_init(&mb->msgs);
    h2o_multithread_register_receiver(loop->queue, &mb->receiver, on_wake);
    return mb;
}

void ad_mailbox_send_list(struct ad_mailbox *mb, struct ad_list *msgs)
{
    pthread_mutex_lock(&mb->mu);
    ad_list_insert_list(&mb->msgs, msgs);
    int wake = !mb->wake_sent;
    mb->wake_sent = 1;
    pthread_mutex_unlock(&mb->mu);
    if (wake)
        h2o_multithread_send_message(&mb->receiver, &mb->wake);
}

void ad_mailbox_send(struct ad_mailbox *mb, struct ad_list *msg)
{
    pthread_mutex_lock(&mb->mu);
    ad_list_insert(&mb->msgs, msg);
    int wake = !mb->wake_sent;
    mb->wake_sent = 1;
    pthread_mutex_unlock(&mb->mu);
    if (wake)
        h2o_multithread_send_message(&mb->receiver, &mb->wake);
}

/* ---- tasks ---- */

static void on_task(h2o_timeout_entry_t *entry)
{
    struct ad_loop_task *t = H2O_STRUCT_FROM_MEMBER(struct ad_loop_task, entry, entry);
    t->running = 1;
    t->run(t->arg);
    t->running = 0;
}

struct ad_loop_task *ad_loop_task_new(struct ad_loop *loop, void (*run)(void *arg), void *arg)
{
    struct ad_loop_task *t = ad_calloc(1, sizeof(*t));
    t->entry.cb = on_task;
    t->loop = loop;
    t->run = run;
    t->arg = arg;
    return t;
}

void ad_loop_task_schedule(struct ad_loop_task *t)
{
    if (t->running) {
        if (!ad_list_linked(&t->again))
            ad_list_insert(&t->loop->again, &t->again);
    } else if (!h2o_timeout_is_linked(&t->entry)) {
        h2o_timeout_link(t->loop->h2o, &t->loop->zero, &t->entry);
    }
}
