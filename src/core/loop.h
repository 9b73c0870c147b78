/*
 * loop.h - what the layers below the HTTP engine need of the event loop: to run it a turn at a time, to have
 * a callback run on it from another thread (a mailbox), and to have one run on its next turn (a task).
 *
 * Declared here and defined by the HTTP layer (http/loop.c, on libh2o's public API): core and hub call these
 * functions and never name h2o, and the one event loop is the HTTP engine's, so that sockets, completions and
 * wake-ups are served by the same thread. This is dependency inversion at link time: core states what it needs,
 * http provides it, and nothing below http includes an http header (scripts/layers.sh). Replacing the HTTP
 * engine means providing these functions again (docs/architecture.md). Deadline timers are not here: they live
 * in the one heap of common/timer.h, which the loop's owner runs after each turn (server.c).
 *
 * Threads: everything runs on the loop's thread but ad_mailbox_send, which any thread may call.
 */
#ifndef AD_LOOP_H
#define AD_LOOP_H

#include <stdint.h>
#include "common/list.h"

struct ad_loop;

/* A new event loop (aborts when the system refuses one). Lives as long as the process. */
struct ad_loop *ad_loop_new(void);
/* One turn: wait up to max_wait_ms for events (not at all while a task is scheduled), then run the callbacks of
 * the sockets, mailboxes and tasks that are ready. */
void ad_loop_run(struct ad_loop *loop, int32_t max_wait_ms);

/*
 * A mailbox: messages sent from any thread, received by a callback on the loop. A message is a struct ad_list
 * node inside the sender's own struct (nothing is allocated per message). received(arg, msgs) runs on a later
 * turn with every message sent since the last call, in the order sent; it must take each node off msgs (unlink
 * it or move it elsewhere). A node must not be sent again before it was received.
 */
struct ad_mailbox;
struct ad_mailbox *ad_mailbox_new(struct ad_loop *loop, void (*received)(void *arg, struct ad_list *msgs), void *arg);
/* Send msg (any thread). */
void ad_mailbox_send(struct ad_mailbox *mb, struct ad_list *msg);
/* Send every node of the list anchored at msgs, in order, with one lock (any thread); msgs is left empty. */
void ad_mailbox_send_list(struct ad_mailbox *mb, struct ad_list *msgs);

/*
 * A task: a callback the loop runs on its next turn, after it has read its sockets, without sleeping first.
 * Scheduling one that is already scheduled does nothing; scheduling it from its own callback runs it on the turn
 * after (so a long job done a chunk per turn lets the loop read in between).
 */
struct ad_loop_task;
struct ad_loop_task *ad_loop_task_new(struct ad_loop *loop, void (*run)(void *arg), void *arg);
void ad_loop_task_schedule(struct ad_loop_task *t);

#endif
