/*
 * queues.h - flow control by queue (CONTRACT.md section 11): the settings of each tenant's job type (pause,
 * concurrency, rate limit, and the same per group), what they let a lease take, and the operations that read and
 * change them.
 *
 * The decision is made on the writer thread, inside the lease's own transaction, from rows of the store (the
 * queue's settings, its running count, its rate window): on PostgreSQL that transaction holds the cluster's write
 * lock, so the limits hold across nodes with nothing kept in one node's memory. What the event loop keeps
 * (ad_queues_limited) is only a hint of which queues are limited, for deciding whom to wake.
 */
#ifndef AD_CORE_QUEUES_H
#define AD_CORE_QUEUES_H

#include <jansson.h>

#include "core/config.h"
#include "core/writer.h"
#include "store/store.h"

/* Why a queued job is held back (its "waitingFor"); AD_WAIT_NONE: it is not. */
enum ad_wait {
    AD_WAIT_NONE,
    AD_WAIT_PAUSED,
    AD_WAIT_CONCURRENCY,
    AD_WAIT_RATE_LIMIT,
    AD_WAIT_GROUP_CONCURRENCY,
    AD_WAIT_GROUP_RATE_LIMIT,
    AD_WAIT__COUNT
};
/* "paused", "concurrency", "rateLimit", ...; NULL for AD_WAIT_NONE. */
const char *ad_wait_name(enum ad_wait w);

/* Set once at start, with the core (the configuration's types.<name> give the initial settings). */
void ad_queues_init(const struct ad_config *cfg, const struct ad_store_ops *st);

/* A queue's settings: its row, else its type's configuration, else none. Fills out (tenant and type copied; free
 * with ad_queue_clear). Any thread, on its own connection. */
ad_err ad_queue_load(struct ad_conn *c, const char *tenant, const char *type, struct ad_queue *out);

/* What the queue q lets a lease take at now, for the type as a whole (its per-group limits are the gate's):
 * *room jobs (INT_MAX: no limit), and when 0, *why and, for a rate limit, *open_at (wall ms) when its window opens.
 * Writer thread, in the lease's transaction. */
ad_err ad_queue_room(struct ad_conn *c, const struct ad_queue *q, int64_t now, int *room, enum ad_wait *why,
                     int64_t *open_at);
/* Count n leases started at now against q's rate window, and write it (nothing without a rate limit). */
ad_err ad_queue_took(struct ad_conn *c, struct ad_queue *q, int n, int64_t now);

/*
 * The gate of one lease: the queues of the types it asks for, loaded once. ad_queue_gate_open narrows the types
 * to those with room and *limit to the room there is (one type: min(max, room)), and reads, for a type with
 * per-group limits, the groups near them; ad_queue_gate_pick has the store pick the jobs (leaving out the groups
 * at their limits, and no more of a group than its room); ad_queue_gate_close drops (and frees) those past a
 * type's room and counts the rest in the rate windows, the type's and its groups'. Nothing set on any of the
 * types: the types stay as asked, pick is the store's job_leasable and close does nothing.
 */
struct ad_queue_groups;
struct ad_queue_gate {
    size_t n;
    struct ad_queue *q; /* one per type asked */
    int *room;          /* per type */
    const char **types; /* the types with room (pointers into the ask) */
    size_t ntypes;
    int limited;                    /* any type has a setting */
    int grouped;                    /* any type has a per-group limit */
    struct ad_queue_groups *groups; /* per type: the groups near their limits (queues.c) */
    int64_t open_at;                /* out: the soonest a rate window holding back a type opens (wall ms), 0 = none */
};
ad_err ad_queue_gate_open(struct ad_queue_gate *g, struct ad_conn *c, const char *tenant, char *const *types,
                          size_t ntypes, int64_t now, int *limit);
/* The jobs of the gate's types to lease at now, at most limit, in lease order, into out (the caller frees). */
ad_err ad_queue_gate_pick(struct ad_queue_gate *g, struct ad_conn *c, const char *tenant, int64_t now, int limit,
                          struct ad_job_list *out);
ad_err ad_queue_gate_close(struct ad_queue_gate *g, struct ad_conn *c, struct ad_job_list *picked, int64_t now);
void ad_queue_gate_free(struct ad_queue_gate *g);

/* Whether a job of tenant's type and group (NULL: none) may be leased at once (a submit's hand-off to a parked
 * worker); counts it in the rate windows when it may. Writer thread. */
ad_err ad_queue_take_one(struct ad_conn *c, const char *tenant, const char *type, const char *group, int64_t now,
                         int *ok);

/* Whether the queue of tenant's type has a setting that can hold jobs back, as the writer last saw it: a job of
 * the type that ends may free a slot for a parked lease. Any thread. */
int ad_queues_limited(const char *tenant, const char *type);
/* Why the due queued jobs of tenant's type and group (NULL: none) wait, as this node's writer last decided (a lease
 * that found no room for the type or the group, a PATCH), AD_WAIT_NONE when it found room or the queue holds
 * nothing back: what a queued job's "waitingFor" shows. A hint, not a count: it is set by this node's leases and
 * changes. Any thread. */
enum ad_wait ad_queues_waiting(const char *tenant, const char *type, const char *group);
/* A running job of tenant's type and group ended: its group is no longer held back by groupConcurrency (until the
 * next lease says otherwise). Any thread. */
void ad_queues_group_freed(const char *tenant, const char *type, const char *group);

/* Count the due queued jobs held back now, by reason (out[AD_WAIT_x]), over the queues this node knows to be
 * limited (ad_queues_limited), every tenant. A read, on c. */
ad_err ad_queues_count_waiting(struct ad_conn *c, int64_t now, int64_t out[AD_WAIT__COUNT]);

/* Apply an RFC 7396 merge patch to q. 0, or -1 with *pointer (a JSON Pointer into the patch) and *detail set
 * (heap, the caller frees): then q is unchanged. */
int ad_queue_patch(struct ad_queue *q, json_t *patch, char **pointer, char **detail);

/* A queue as its view shows it: settings, jobs by state, and how many of the queued wait, and why. */
struct ad_queue_view {
    struct ad_queue q;
    struct ad_queue_counts counts;
    int64_t waiting;
    enum ad_wait why;
    int64_t waiting_for[AD_WAIT__COUNT]; /* waiting by reason: the type's limits, and the groups' at theirs */
};

/* Read (patch NULL: a read op, ad_hub_read) or change (writer) the queue of tenant's type. Out: view, as the queue
 * is after the change; on AD_E_VALIDATION_FAILED, pointer and detail. With all set (a read), every queue of the
 * tenant instead, those with a row or with jobs, by type, in views. */
struct ad_queue_op {
    struct ad_op op;
    char *tenant, *type;
    json_t *patch;
    int all;
    int64_t now;
    struct ad_queue_view view;
    struct ad_queue_view *views;
    size_t nviews;
    char *pointer, *detail;
    void *ctx;
};
struct ad_queue_op *ad_queue_op_new(void);

#endif
