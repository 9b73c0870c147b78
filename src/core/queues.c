/*
 * queues.c - flow control by queue: loading a queue's settings, what they let a lease take, the gate of a lease,
 * and the operation that reads or patches a queue (queues.h).
 *
 * Rate limits use a fixed window aligned on the period (window = now - now % period): a window's leases are
 * counted in the queue's row, written in the lease's transaction, so every node counts the same window. A
 * window never starts more than limit leases, and any span of one period overlaps at most two windows, so it sees
 * at most twice limit. A queue held back by its window says when the next one opens (open_at), and the lease
 * request parked on it arms a timer for that moment (api_leases.c): nothing polls.
 *
 * Concurrency is the count of the queue's running jobs, read in the transaction (store queue_running). It does not
 * decide between types or groups: the store's lease query picks the jobs, this only narrows it.
 *
 * Per-group limits (groupConcurrency, groupRateLimit) cost nothing to a queue without them. With them, the gate reads
 * the groups that this lease could bring to a limit (running count, or count in the group's fixed window, within
 * the lease's size of it), names those at their limit to the store's lease query (job_leasable_except), which passes
 * over their jobs, and keeps no more of a group than its room. Bounds: at most GROUP_EXCEPT_MAX groups are named in
 * a query (the jobs of further full groups are dropped after it, and the query takes a job more for each of them;
 * a further round names first those it met), a query reads at most GROUP_WALK_ROWS queued jobs beyond its size,
 * the skipped groups' included, and a lease makes at most GROUP_ROUNDS queries per type (another when jobs were dropped
 * for a group's room and the answer had room left). So a job waits behind full groups only when more than
 * GROUP_WALK_ROWS jobs of full groups come before it in lease order (at one priority a group has one job per turn:
 * more than that many full groups; or a full group of higher priority with that backlog).
 */
#include "core/queues.h"

#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define AD_QUEUE_MAX_LIMIT 1000000
#define AD_QUEUE_MAX_PERIOD_MS ((int64_t)86400 * 1000)
#define LIMITED_MAX 4096
#define ABSENT_SLOTS 1024
#define GROUP_EXCEPT_MAX 64
#define GROUP_WALK_ROWS 1000
#define GROUP_ROUNDS 3
#define GROUP_HINTS_MAX 256

static const struct ad_config *config;
static const struct ad_store_ops *st;

/* The groups of one queue that the writer last found at a limit, and which (at most GROUP_HINTS_MAX). */
struct group_hint {
    char **group;
    enum ad_wait *why;
    size_t n;
};

static void hint_clear(struct group_hint *h)
{
    for (size_t i = 0; i < h->n; i++)
        free(h->group[i]);
    free(h->group);
    free(h->why);
    *h = (struct group_hint){0};
}

/* "tenant\0type" of the queues seen with a setting that holds jobs back; a hint for whom to wake (queues.h). */
static struct {
    pthread_mutex_t mu;
    char **keys;
    enum ad_wait *why;       /* per key: why its queued jobs wait, as the writer last decided */
    struct group_hint *hint; /* per key: its groups held back by their limits, as the writer last decided */
    size_t n, cap;
    atomic_size_t any; /* n, readable without the lock: the common case (nothing limited) takes no lock */
} limited = {.mu = PTHREAD_MUTEX_INITIALIZER};

static char *absent[ABSENT_SLOTS]; /* "tenant\0type": see absent_known */

void ad_queues_init(const struct ad_config *cfg, const struct ad_store_ops *ops)
{
    config = cfg;
    st = ops;
    for (size_t i = 0; i < ABSENT_SLOTS; i++) { /* another store: what the last one had is no guide */
        free(absent[i]);
        absent[i] = NULL;
    }
}

const char *ad_wait_name(enum ad_wait w)
{
    static const char *const names[AD_WAIT__COUNT] = {
        [AD_WAIT_PAUSED] = "paused",
        [AD_WAIT_CONCURRENCY] = "concurrency",
        [AD_WAIT_RATE_LIMIT] = "rateLimit",
        [AD_WAIT_GROUP_CONCURRENCY] = "groupConcurrency",
        [AD_WAIT_GROUP_RATE_LIMIT] = "groupRateLimit",
    };
    return w > AD_WAIT_NONE && w < AD_WAIT__COUNT ? names[w] : NULL;
}

/* A setting that holds the type back as a whole. */
static int type_limited(const struct ad_queue *q)
{
    return q->paused || q->concurrency > 0 || q->rate.limit > 0;
}

static int group_limited(const struct ad_queue *q)
{
    return q->group_concurrency > 0 || q->group_rate.limit > 0;
}

static int holds_back(const struct ad_queue *q)
{
    return type_limited(q) || group_limited(q);
}

static size_t limited_find(const char *tenant, const char *type, size_t tl)
{
    for (size_t i = 0; i < limited.n; i++)
        if (strcmp(limited.keys[i], tenant) == 0 && strcmp(limited.keys[i] + tl + 1, type) == 0)
            return i;
    return SIZE_MAX;
}

/* Remember whether q holds jobs back (the writer saw it so), and why they wait now (AD_WAIT_NONE: there is room). */
static void limited_note(const struct ad_queue *q, enum ad_wait why)
{
    size_t tl = strlen(q->tenant), yl = strlen(q->type);
    int on = holds_back(q);
    pthread_mutex_lock(&limited.mu);
    size_t i = limited_find(q->tenant, q->type, tl);
    if (on && i == SIZE_MAX && limited.n < LIMITED_MAX) {
        if (limited.n == limited.cap) {
            limited.cap = limited.cap ? limited.cap * 2 : 16;
            limited.keys = ad_realloc(limited.keys, limited.cap * sizeof(*limited.keys));
            limited.why = ad_realloc(limited.why, limited.cap * sizeof(*limited.why));
            limited.hint = ad_realloc(limited.hint, limited.cap * sizeof(*limited.hint));
        }
        char *k = ad_malloc(tl + yl + 2);
        memcpy(k, q->tenant, tl + 1);
        memcpy(k + tl + 1, q->type, yl + 1);
        i = limited.n++;
        limited.keys[i] = k;
        limited.hint[i] = (struct group_hint){0};
    } else if (!on && i != SIZE_MAX) {
        free(limited.keys[i]);
        hint_clear(&limited.hint[i]);
        limited.n--;
        limited.keys[i] = limited.keys[limited.n];
        limited.why[i] = limited.why[limited.n];
        limited.hint[i] = limited.hint[limited.n];
        i = SIZE_MAX;
    } else if (i != SIZE_MAX && !group_limited(q)) {
        hint_clear(&limited.hint[i]);
    }
    if (i != SIZE_MAX)
        limited.why[i] = q->paused ? AD_WAIT_PAUSED : why;
    atomic_store_explicit(&limited.any, limited.n, memory_order_relaxed);
    pthread_mutex_unlock(&limited.mu);
}

int ad_queues_limited(const char *tenant, const char *type)
{
    if (atomic_load_explicit(&limited.any, memory_order_relaxed) == 0)
        return 0;
    pthread_mutex_lock(&limited.mu);
    int on = limited.n > 0 && limited_find(tenant, type, strlen(tenant)) != SIZE_MAX;
    pthread_mutex_unlock(&limited.mu);
    return on;
}

/* Replace the groups of q's queue that the writer found at a limit (taken: the hint's arrays). */
static void limited_groups(const struct ad_queue *q, struct group_hint *taken)
{
    pthread_mutex_lock(&limited.mu);
    size_t i = limited.n > 0 ? limited_find(q->tenant, q->type, strlen(q->tenant)) : SIZE_MAX;
    if (i != SIZE_MAX) {
        hint_clear(&limited.hint[i]);
        limited.hint[i] = *taken;
        *taken = (struct group_hint){0};
    }
    pthread_mutex_unlock(&limited.mu);
    hint_clear(taken);
}

static size_t hint_find(const struct group_hint *h, const char *group)
{
    for (size_t k = 0; k < h->n; k++)
        if (strcmp(h->group[k], group) == 0)
            return k;
    return SIZE_MAX;
}

enum ad_wait ad_queues_waiting(const char *tenant, const char *type, const char *group)
{
    if (atomic_load_explicit(&limited.any, memory_order_relaxed) == 0)
        return AD_WAIT_NONE;
    pthread_mutex_lock(&limited.mu);
    size_t i = limited.n > 0 ? limited_find(tenant, type, strlen(tenant)) : SIZE_MAX;
    enum ad_wait why = i != SIZE_MAX ? limited.why[i] : AD_WAIT_NONE;
    if (why == AD_WAIT_NONE && i != SIZE_MAX && limited.hint[i].n > 0) {
        size_t k = hint_find(&limited.hint[i], group != NULL ? group : "");
        why = k != SIZE_MAX ? limited.hint[i].why[k] : AD_WAIT_NONE;
    }
    pthread_mutex_unlock(&limited.mu);
    return why;
}

void ad_queues_group_freed(const char *tenant, const char *type, const char *group)
{
    if (atomic_load_explicit(&limited.any, memory_order_relaxed) == 0)
        return;
    pthread_mutex_lock(&limited.mu);
    size_t i = limited.n > 0 ? limited_find(tenant, type, strlen(tenant)) : SIZE_MAX;
    size_t k = i != SIZE_MAX ? hint_find(&limited.hint[i], group != NULL ? group : "") : SIZE_MAX;
    if (k != SIZE_MAX && limited.hint[i].why[k] == AD_WAIT_GROUP_CONCURRENCY) {
        struct group_hint *h = &limited.hint[i];
        free(h->group[k]);
        h->n--;
        h->group[k] = h->group[h->n];
        h->why[k] = h->why[h->n];
    }
    pthread_mutex_unlock(&limited.mu);
}

/*
 * The writer's memory of queues that have no row, on a store only this process writes (no cluster feed): most
 * types have no settings, and their leases then read nothing more than before. A put forgets the queue (so a put
 * rolled back leaves it to be read again); on a shared store every lease reads, since another node may have written.
 * Direct-mapped by a hash of tenant and type; a collision only costs a read. Writer thread only.
 */

static size_t absent_slot(const char *tenant, const char *type)
{
    uint32_t h = 2166136261u;
    for (const unsigned char *p = (const unsigned char *)tenant; *p != '\0'; p++)
        h = (h ^ *p) * 16777619u;
    h *= 16777619u;
    for (const unsigned char *p = (const unsigned char *)type; *p != '\0'; p++)
        h = (h ^ *p) * 16777619u;
    return h % ABSENT_SLOTS;
}

static int absent_known(const char *tenant, const char *type)
{
    const char *k = absent[absent_slot(tenant, type)];
    return k != NULL && strcmp(k, tenant) == 0 && strcmp(k + strlen(k) + 1, type) == 0;
}

static void absent_set(const char *tenant, const char *type, int on)
{
    size_t i = absent_slot(tenant, type);
    free(absent[i]);
    absent[i] = NULL;
    if (on && st->feed_open == NULL) {
        size_t tl = strlen(tenant), yl = strlen(type);
        absent[i] = ad_malloc(tl + yl + 2);
        memcpy(absent[i], tenant, tl + 1);
        memcpy(absent[i] + tl + 1, type, yl + 1);
    }
}

/* The configuration's settings of tenant's type (types.<name>), or none, into out. */
static void queue_defaults(const char *tenant, const char *type, struct ad_queue *out)
{
    *out = (struct ad_queue){.tenant = ad_strdup(tenant), .type = ad_strdup(type)};
    const struct ad_type_conf *t = config != NULL ? ad_config_type(config, type) : NULL;
    if (t != NULL) {
        out->paused = t->paused;
        out->concurrency = t->concurrency;
        out->group_concurrency = t->group_concurrency;
        out->rate = (struct ad_queue_rate){t->rate_limit.limit, t->rate_limit.period_ms};
        out->group_rate = (struct ad_queue_rate){t->group_rate_limit.limit, t->group_rate_limit.period_ms};
    }
}

ad_err ad_queue_load(struct ad_conn *c, const char *tenant, const char *type, struct ad_queue *out)
{
    ad_err e = st->queue_get(c, tenant, type, out);
    if (e == AD_E_NOT_FOUND)
        queue_defaults(tenant, type, out);
    return e == AD_E_NOT_FOUND ? AD_E_OK : e;
}

/* ad_queue_load for the writer: what absent remembers spares the read. */
static ad_err load_for_lease(struct ad_conn *c, const char *tenant, const char *type, struct ad_queue *out)
{
    if (!absent_known(tenant, type)) {
        ad_err e = st->queue_get(c, tenant, type, out);
        if (e != AD_E_NOT_FOUND)
            return e;
        absent_set(tenant, type, 1);
    }
    queue_defaults(tenant, type, out);
    return AD_E_OK;
}

/* Write q (writer thread): the store's put, which its leases then read. */
static ad_err queue_write(struct ad_conn *c, const struct ad_queue *q)
{
    absent_set(q->tenant, q->type, 0);
    return st->queue_put(c, q);
}

static int64_t window_of(const struct ad_queue *q, int64_t now)
{
    return now - now % q->rate.period_ms;
}

ad_err ad_queue_room(struct ad_conn *c, const struct ad_queue *q, int64_t now, int *room, enum ad_wait *why,
                     int64_t *open_at)
{
    *room = INT_MAX;
    *why = AD_WAIT_NONE;
    *open_at = 0;
    if (q->paused) {
        *room = 0;
        *why = AD_WAIT_PAUSED;
        return AD_E_OK;
    }
    if (q->concurrency > 0) {
        int64_t running = 0;
        ad_err e = st->queue_running(c, q->tenant, q->type, &running);
        if (e != AD_E_OK)
            return e;
        *room = running >= q->concurrency ? 0 : (int)(q->concurrency - running);
        if (*room == 0) {
            *why = AD_WAIT_CONCURRENCY;
            return AD_E_OK;
        }
    }
    if (q->rate.limit > 0) {
        int64_t w = window_of(q, now);
        int used = q->window_start == w ? q->window_count : 0;
        int left = used >= q->rate.limit ? 0 : q->rate.limit - used;
        if (left < *room)
            *room = left;
        if (left == 0) {
            *why = AD_WAIT_RATE_LIMIT;
            *open_at = w + q->rate.period_ms;
        }
    }
    return AD_E_OK;
}

ad_err ad_queue_took(struct ad_conn *c, struct ad_queue *q, int n, int64_t now)
{
    if (q->rate.limit <= 0 || n <= 0)
        return AD_E_OK;
    int64_t w = window_of(q, now);
    if (q->window_start != w) {
        q->window_start = w;
        q->window_count = 0;
    }
    q->window_count += n;
    return queue_write(c, q);
}

/* ---- per-group limits ---- */

/* A group of one queue near a limit: the jobs a lease may take of it, the limit that says so, and how many it took. */
struct group_room {
    char *group;
    int room;
    enum ad_wait why;
    int taken;
    int exact; /* room is the group's own, not only a bound (at least the lease's size) */
    int met;   /* the round (from 1) in which a job of it was left out for its room, 0 = none */
};
struct ad_queue_groups {
    struct group_room *g;
    size_t n;
    int dflt;              /* the room of a group not in g: exact, or (dflt_exact 0) at least the lease's size */
    enum ad_wait dflt_why; /* the limit that gives it */
    int dflt_exact;
};

static struct group_room *groups_find(struct ad_queue_groups *gs, const char *group)
{
    for (size_t i = 0; i < gs->n; i++)
        if (strcmp(gs->g[i].group, group) == 0)
            return &gs->g[i];
    return NULL;
}

static void groups_limit(struct ad_queue_groups *gs, const char *group, int64_t room, enum ad_wait why)
{
    struct group_room *r = groups_find(gs, group);
    if (r == NULL) {
        gs->g = ad_realloc(gs->g, (gs->n + 1) * sizeof(*gs->g));
        r = &gs->g[gs->n++];
        *r = (struct group_room){.group = ad_strdup(group), .room = INT_MAX};
    }
    if (room < 0)
        room = 0;
    r->exact = 1;
    if (room < r->room) {
        r->room = (int)room;
        r->why = why;
    }
}

static void groups_free(struct ad_queue_groups *gs)
{
    for (size_t i = 0; i < gs->n; i++)
        free(gs->g[i].group);
    free(gs->g);
    *gs = (struct ad_queue_groups){0};
}

static int64_t group_window_of(const struct ad_queue *q, int64_t now)
{
    return now - now % q->group_rate.period_ms;
}

/* Read into gs the groups of q that a lease of want jobs could bring to a limit: those with room < want (a group not
 * read has room for want). *open_at: when the window of a group at its rate limit opens, if one is. */
static ad_err groups_load(struct ad_conn *c, const struct ad_queue *q, int want, int64_t now,
                          struct ad_queue_groups *gs, int64_t *open_at)
{
    struct ad_group_count_list l;
    gs->dflt = INT_MAX;
    if (q->group_concurrency > 0) {
        int64_t min = (int64_t)q->group_concurrency - want + 1;
        min = min > 1 ? min : 1;
        gs->dflt = (int)(q->group_concurrency - min + 1);
        gs->dflt_why = AD_WAIT_GROUP_CONCURRENCY;
        gs->dflt_exact = min == 1; /* every group with a running job was read: the others have none */
        ad_err e = st->queue_group_running(c, q->tenant, q->type, min, &l);
        if (e != AD_E_OK)
            return e;
        for (size_t i = 0; i < l.n; i++)
            groups_limit(gs, l.items[i].group, q->group_concurrency - l.items[i].n, AD_WAIT_GROUP_CONCURRENCY);
        ad_group_count_list_free(&l);
    }
    if (q->group_rate.limit > 0) {
        int64_t w = group_window_of(q, now);
        int64_t min = (int64_t)q->group_rate.limit - want + 1;
        min = min > 1 ? min : 1;
        if (q->group_rate.limit - min + 1 < gs->dflt) {
            gs->dflt = (int)(q->group_rate.limit - min + 1);
            gs->dflt_why = AD_WAIT_GROUP_RATE_LIMIT;
            gs->dflt_exact = min == 1;
        }
        ad_err e = st->queue_group_window(c, q->tenant, q->type, w, min, &l);
        if (e != AD_E_OK)
            return e;
        for (size_t i = 0; i < l.n; i++) {
            groups_limit(gs, l.items[i].group, q->group_rate.limit - l.items[i].n, AD_WAIT_GROUP_RATE_LIMIT);
            if (l.items[i].n >= q->group_rate.limit && (*open_at == 0 || w + q->group_rate.period_ms < *open_at))
                *open_at = w + q->group_rate.period_ms;
        }
        ad_group_count_list_free(&l);
    }
    return AD_E_OK;
}

static const char *group_of(const struct ad_job *j)
{
    return j->group != NULL ? j->group : "";
}

/* Whether list l holds a job with j's cseq. */
static int has_job(const struct ad_job_list *l, const struct ad_job *j)
{
    for (size_t i = 0; i < l->n; i++)
        if (l->items[i]->cseq == j->cseq)
            return 1;
    return 0;
}

/* The jobs of q's type to lease, at most want, none past its group's room (gs counts them), in lease order. */
static ad_err groups_pick(struct ad_queue_groups *gs, struct ad_conn *c, const struct ad_queue *q, int64_t now,
                          int want, struct ad_job_list *out)
{
    *out = (struct ad_job_list){.items = ad_calloc((size_t)want + 1, sizeof(*out->items))};
    const char **except = ad_calloc(GROUP_EXCEPT_MAX, sizeof(*except));
    ad_err e = AD_E_OK;
    for (int round = 0; round < GROUP_ROUNDS && out->n < (size_t)want && e == AD_E_OK; round++) {
        /* Name the full groups the last round met first (they are at the head of the queue), then the others; the
         * query takes one more row for each full group left unnamed, which the walk may meet. */
        size_t nexcept = 0, unnamed = 0;
        for (int pass = 0; pass < 2; pass++)
            for (size_t i = 0; i < gs->n; i++) {
                struct group_room *r = &gs->g[i];
                if (r->taken < r->room || (pass == 0) != (r->met == round))
                    continue;
                if (nexcept < GROUP_EXCEPT_MAX)
                    except[nexcept++] = r->group;
                else
                    unnamed++;
            }
        int ask = want + (int)(unnamed < GROUP_WALK_ROWS ? unnamed : GROUP_WALK_ROWS);
        struct ad_job_list got;
        e = st->job_leasable_except(c, q->tenant, q->type, now, except, nexcept, GROUP_WALK_ROWS + want, ask, &got);
        if (e != AD_E_OK)
            break;
        int dropped = 0;
        for (size_t k = 0; k < got.n; k++) {
            struct ad_job *j = got.items[k];
            struct group_room *r = groups_find(gs, group_of(j));
            if (r == NULL) {
                groups_limit(gs, group_of(j), gs->dflt, gs->dflt_why);
                r = groups_find(gs, group_of(j));
                r->exact = gs->dflt_exact;
            }
            if (out->n == (size_t)want || has_job(out, j) || r->taken >= r->room) {
                if (out->n < (size_t)want && !has_job(out, j)) {
                    dropped++;
                    r->met = round + 1;
                }
                ad_job_free(j);
                continue;
            }
            r->taken++;
            size_t at = out->n;
            while (at > 0 && ad_lease_before(j, out->items[at - 1]))
                at--;
            memmove(out->items + at + 1, out->items + at, (out->n - at) * sizeof(*out->items));
            out->items[at] = j;
            out->n++;
        }
        int full = got.n == (size_t)ask;
        free(got.items);
        if (!full || !dropped)
            break; /* the walk found no more, or nothing was left out for a group's room */
    }
    free(except);
    if (e != AD_E_OK)
        ad_job_list_free(out);
    return e;
}

/* ---- the gate ---- */

ad_err ad_queue_gate_open(struct ad_queue_gate *g, struct ad_conn *c, const char *tenant, char *const *types,
                          size_t ntypes, int64_t now, int *limit)
{
    *g = (struct ad_queue_gate){.n = ntypes};
    g->q = ad_calloc(ntypes ? ntypes : 1, sizeof(*g->q));
    g->room = ad_calloc(ntypes ? ntypes : 1, sizeof(*g->room));
    g->types = ad_calloc(ntypes ? ntypes : 1, sizeof(*g->types));
    for (size_t i = 0; i < ntypes; i++) {
        ad_err e = load_for_lease(c, tenant, types[i], &g->q[i]);
        if (e != AD_E_OK)
            return e;
        if (!holds_back(&g->q[i]))
            limited_note(&g->q[i], AD_WAIT_NONE);
        g->limited |= holds_back(&g->q[i]);
        g->grouped |= group_limited(&g->q[i]);
    }
    if (!g->limited) {
        for (size_t i = 0; i < ntypes; i++)
            g->types[i] = types[i];
        g->ntypes = ntypes;
        return AD_E_OK;
    }
    if (g->grouped)
        g->groups = ad_calloc(ntypes, sizeof(*g->groups));
    int total = 0;
    for (size_t i = 0; i < ntypes; i++) {
        enum ad_wait why;
        int64_t open_at;
        ad_err e = ad_queue_room(c, &g->q[i], now, &g->room[i], &why, &open_at);
        if (e != AD_E_OK)
            return e;
        limited_note(&g->q[i], why);
        if (g->room[i] > 0 && group_limited(&g->q[i])) {
            int64_t gopen = 0;
            e = groups_load(c, &g->q[i], g->room[i] < *limit ? g->room[i] : *limit, now, &g->groups[i], &gopen);
            if (e != AD_E_OK)
                return e;
            if (gopen != 0 && (open_at == 0 || gopen < open_at))
                open_at = gopen;
        }
        if (open_at != 0 && (g->open_at == 0 || open_at < g->open_at))
            g->open_at = open_at;
        if (g->room[i] > 0) {
            g->types[g->ntypes++] = types[i];
            total = g->room[i] > INT_MAX - total ? INT_MAX : total + g->room[i];
        }
    }
    if (total < *limit)
        *limit = total;
    return AD_E_OK;
}

/* The index of type in g's queues, or g->n. */
static size_t gate_index(const struct ad_queue_gate *g, const char *type)
{
    size_t i = 0;
    while (i < g->n && strcmp(g->q[i].type, type) != 0)
        i++;
    return i;
}

ad_err ad_queue_gate_pick(struct ad_queue_gate *g, struct ad_conn *c, const char *tenant, int64_t now, int limit,
                          struct ad_job_list *out)
{
    if (!g->grouped)
        return st->job_leasable(c, tenant, g->types, g->ntypes, now, limit, out);
    *out = (struct ad_job_list){0};
    const char **plain = ad_calloc(g->ntypes + 1, sizeof(*plain));
    size_t nplain = 0;
    for (size_t t = 0; t < g->ntypes; t++)
        if (!group_limited(&g->q[gate_index(g, g->types[t])]))
            plain[nplain++] = g->types[t];
    ad_err e = nplain > 0 ? st->job_leasable(c, tenant, plain, nplain, now, limit, out) : AD_E_OK;
    free(plain);
    for (size_t t = 0; t < g->ntypes && e == AD_E_OK; t++) {
        size_t i = gate_index(g, g->types[t]);
        int seen = 0;
        for (size_t k = 0; k < t && !seen; k++)
            seen = strcmp(g->types[k], g->types[t]) == 0;
        if (seen || !group_limited(&g->q[i]))
            continue;
        struct ad_job_list part;
        e = groups_pick(&g->groups[i], c, &g->q[i], now, g->room[i] < limit ? g->room[i] : limit, &part);
        if (e != AD_E_OK)
            break;
        out->items = ad_realloc(out->items, (out->n + part.n + 1) * sizeof(*out->items));
        memcpy(out->items + out->n, part.items, part.n * sizeof(*part.items));
        out->n += part.n;
        free(part.items);
    }
    if (e != AD_E_OK) {
        ad_job_list_free(out);
        return e;
    }
    ad_lease_merge(out, limit);
    return AD_E_OK;
}

/* Count what picked took of the groups of q (queue i of g) in their rate windows, and remember the groups now at a
 * limit for their jobs' waitingFor. */
static ad_err groups_close(struct ad_queue_gate *g, size_t i, struct ad_conn *c, const struct ad_job_list *picked,
                           int64_t now)
{
    struct ad_queue *q = &g->q[i];
    struct ad_queue_groups *gs = &g->groups[i];
    struct ad_queue_groups took = {0};
    for (size_t k = 0; k < picked->n; k++)
        if (strcmp(picked->items[k]->type, q->type) == 0) {
            groups_limit(&took, group_of(picked->items[k]), 0, AD_WAIT_NONE);
            groups_find(&took, group_of(picked->items[k]))->taken++;
        }
    ad_err e = AD_E_OK;
    for (size_t k = 0; k < took.n && e == AD_E_OK && q->group_rate.limit > 0; k++)
        e = st->queue_group_took(c, q->tenant, q->type, took.g[k].group, group_window_of(q, now), took.g[k].taken);
    struct group_hint h = {0};
    h.group = ad_calloc(gs->n + took.n + 1, sizeof(*h.group));
    h.why = ad_calloc(gs->n + took.n + 1, sizeof(*h.why));
    for (size_t k = 0; k < gs->n && h.n < GROUP_HINTS_MAX; k++) {
        const struct group_room *t = groups_find(&took, gs->g[k].group);
        if (gs->g[k].exact && (t != NULL ? t->taken : 0) >= gs->g[k].room) {
            h.group[h.n] = ad_strdup(gs->g[k].group);
            h.why[h.n++] = gs->g[k].why;
        }
    }
    limited_groups(q, &h);
    groups_free(&took);
    return e;
}

ad_err ad_queue_gate_close(struct ad_queue_gate *g, struct ad_conn *c, struct ad_job_list *picked, int64_t now)
{
    if (!g->limited)
        return AD_E_OK;
    int *taken = ad_calloc(g->n ? g->n : 1, sizeof(*taken));
    size_t kept = 0;
    for (size_t k = 0; k < picked->n; k++) {
        struct ad_job *j = picked->items[k];
        size_t i = gate_index(g, j->type);
        if (i < g->n && taken[i] >= g->room[i]) {
            ad_job_free(j); /* past the type's room: stays queued */
            continue;
        }
        if (i < g->n)
            taken[i]++;
        picked->items[kept++] = j;
    }
    picked->n = kept;
    ad_err e = AD_E_OK;
    for (size_t i = 0; i < g->n && e == AD_E_OK; i++) {
        e = ad_queue_took(c, &g->q[i], taken[i], now);
        if (e == AD_E_OK && g->groups != NULL && group_limited(&g->q[i]) && g->room[i] > 0 &&
            gate_index(g, g->q[i].type) == i)
            e = groups_close(g, i, c, picked, now);
    }
    free(taken);
    return e;
}

void ad_queue_gate_free(struct ad_queue_gate *g)
{
    for (size_t i = 0; i < g->n; i++) {
        ad_queue_clear(&g->q[i]);
        if (g->groups != NULL)
            groups_free(&g->groups[i]);
    }
    free(g->q);
    free(g->room);
    free(g->types);
    free(g->groups);
    *g = (struct ad_queue_gate){0};
}

ad_err ad_queue_take_one(struct ad_conn *c, const char *tenant, const char *type, const char *group, int64_t now,
                         int *ok)
{
    struct ad_queue q;
    *ok = 0;
    ad_err e = load_for_lease(c, tenant, type, &q);
    if (e != AD_E_OK)
        return e;
    int room = INT_MAX;
    enum ad_wait why = AD_WAIT_NONE;
    int64_t open_at = 0;
    if (type_limited(&q))
        e = ad_queue_room(c, &q, now, &room, &why, &open_at);
    limited_note(&q, why);
    struct ad_queue_groups gs = {0};
    if (e == AD_E_OK && room > 0 && group_limited(&q)) {
        e = groups_load(c, &q, 1, now, &gs, &open_at);
        const struct group_room *r = groups_find(&gs, group != NULL ? group : "");
        if (r != NULL && r->room <= 0)
            room = 0;
    }
    if (e == AD_E_OK && room > 0) {
        *ok = 1;
        e = ad_queue_took(c, &q, 1, now);
        if (e == AD_E_OK && q.group_rate.limit > 0)
            e = st->queue_group_took(c, tenant, type, group != NULL ? group : "", group_window_of(&q, now), 1);
    }
    groups_free(&gs);
    ad_queue_clear(&q);
    return e;
}

/* ---- the merge patch ---- */

/* member name as a JSON Pointer token (RFC 6901: ~ as ~0, / as ~1) after prefix. */
static char *pointer_to(const char *prefix, const char *name)
{
    struct ad_buf b;
    ad_buf_init(&b, SIZE_MAX);
    ad_buf_append(&b, prefix, strlen(prefix));
    AD_BUF_LIT(&b, "/");
    for (const char *p = name; *p != '\0'; p++) {
        if (*p == '~')
            AD_BUF_LIT(&b, "~0");
        else if (*p == '/')
            AD_BUF_LIT(&b, "~1");
        else
            ad_buf_append(&b, p, 1);
    }
    ad_buf_append(&b, "", 1);
    return b.data;
}

static int bad(char **pointer, char **detail, char *at, const char *what)
{
    *pointer = at;
    *detail = ad_strdup(what);
    return -1;
}

static int patch_limit(json_t *v, int *out, const char *at, const char *name, char **pointer, char **detail)
{
    if (json_is_null(v)) {
        *out = 0;
        return 0;
    }
    if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > AD_QUEUE_MAX_LIMIT)
        return bad(pointer, detail, pointer_to(at, name), "must be an integer from 1 to 1000000, or null");
    *out = (int)json_integer_value(v);
    return 0;
}

/* Merge patch v into rate r (RFC 7396: an object merges, null clears); both members are then needed. */
static int patch_rate(json_t *v, struct ad_queue_rate *r, const char *name, char **pointer, char **detail)
{
    char *at = pointer_to("", name);
    if (json_is_null(v)) {
        free(at);
        *r = (struct ad_queue_rate){0};
        return 0;
    }
    if (!json_is_object(v))
        return bad(pointer, detail, at, "must be an object {\"limit\", \"period\"}, or null");
    struct ad_queue_rate n = *r;
    const char *k;
    json_t *m;
    json_object_foreach(v, k, m)
    {
        if (strcmp(k, "limit") == 0) {
            if (patch_limit(m, &n.limit, at, k, pointer, detail) < 0) {
                free(at);
                return -1;
            }
        } else if (strcmp(k, "period") == 0) {
            int64_t ms = 0;
            if (json_is_null(m)) {
                n.period_ms = 0;
            } else if (!json_is_string(m) || ad_parse_duration_ms(json_string_value(m), &ms) < 0 || ms < 1 ||
                       ms > AD_QUEUE_MAX_PERIOD_MS) {
                char *p = pointer_to(at, k);
                free(at);
                return bad(pointer, detail, p, "must be a duration such as \"1s\", \"10s\" or \"1m\", up to 1d");
            } else {
                n.period_ms = ms;
            }
        } else {
            char *p = pointer_to(at, k);
            free(at);
            return bad(pointer, detail, p, "unknown member: a rate limit has \"limit\" and \"period\"");
        }
    }
    if ((n.limit > 0) != (n.period_ms > 0)) {
        char *p = pointer_to(at, n.limit > 0 ? "period" : "limit");
        free(at);
        return bad(pointer, detail, p, "a rate limit needs both \"limit\" and \"period\"");
    }
    free(at);
    *r = n;
    return 0;
}

int ad_queue_patch(struct ad_queue *q, json_t *patch, char **pointer, char **detail)
{
    *pointer = *detail = NULL;
    if (!json_is_object(patch))
        return bad(pointer, detail, ad_strdup(""), "a queue's merge patch must be a JSON object");
    struct ad_queue n = *q;
    const char *k;
    json_t *v;
    json_object_foreach(patch, k, v)
    {
        int rc = 0;
        if (strcmp(k, "paused") == 0) {
            if (json_is_null(v))
                n.paused = 0;
            else if (json_is_boolean(v))
                n.paused = json_is_true(v);
            else
                rc = bad(pointer, detail, pointer_to("", k), "must be true, false or null");
        } else if (strcmp(k, "concurrency") == 0) {
            rc = patch_limit(v, &n.concurrency, "", k, pointer, detail);
        } else if (strcmp(k, "groupConcurrency") == 0) {
            rc = patch_limit(v, &n.group_concurrency, "", k, pointer, detail);
        } else if (strcmp(k, "rateLimit") == 0) {
            rc = patch_rate(v, &n.rate, k, pointer, detail);
        } else if (strcmp(k, "groupRateLimit") == 0) {
            rc = patch_rate(v, &n.group_rate, k, pointer, detail);
        } else {
            rc = bad(pointer, detail, pointer_to("", k),
                     "unknown member: a queue's settings are paused, concurrency, groupConcurrency, rateLimit and "
                     "groupRateLimit");
        }
        if (rc < 0)
            return -1;
    }
    *q = n;
    return 0;
}

/* ---- the queue operation ---- */

static int group_listed(const struct ad_group_count_list *l, const char *group)
{
    for (size_t i = 0; i < l->n; i++)
        if (strcmp(l->items[i].group, group) == 0)
            return 1;
    return 0;
}

/*
 * The due queued jobs of q's groups that are at their limit now, held back whatever room the type has: held[reason]
 * (a group at both limits counts under groupConcurrency). It reads what a lease of the type reads (the running jobs by
 * group, the groups' rate windows, each only the groups at the limit) and counts the queued jobs of those groups alone
 * (queue_group_queued, index seeks per group): the cost grows with the groups at their limit, not with the queue.
 */
static ad_err groups_held(struct ad_conn *c, const struct ad_queue *q, int64_t now, int64_t held[AD_WAIT__COUNT])
{
    struct ad_group_count_list at[2] = {{0}, {0}};
    const enum ad_wait why[2] = {AD_WAIT_GROUP_CONCURRENCY, AD_WAIT_GROUP_RATE_LIMIT};
    ad_err e = AD_E_OK;
    if (q->group_concurrency > 0)
        e = st->queue_group_running(c, q->tenant, q->type, q->group_concurrency, &at[0]);
    if (e == AD_E_OK && q->group_rate.limit > 0)
        e = st->queue_group_window(c, q->tenant, q->type, group_window_of(q, now), q->group_rate.limit, &at[1]);
    for (int k = 0; k < 2 && e == AD_E_OK; k++) {
        const char **g = ad_calloc(at[k].n + 1, sizeof(*g));
        size_t n = 0;
        for (size_t i = 0; i < at[k].n; i++)
            if (k == 0 || !group_listed(&at[0], at[k].items[i].group))
                g[n++] = at[k].items[i].group;
        int64_t count = 0;
        if (n > 0)
            e = st->queue_group_queued(c, q->tenant, q->type, now, g, n, &count);
        held[why[k]] += count;
        free(g);
    }
    ad_group_count_list_free(&at[0]);
    ad_group_count_list_free(&at[1]);
    return e;
}

/* Fill v for tenant's type: settings, counts, and how many of the queued wait and why. The type's room is for the
 * jobs its groups' limits do not hold back already; while it has none, every queued job waits for the type. */
static ad_err view_load(struct ad_conn *c, const char *tenant, const char *type, int64_t now, struct ad_queue_view *v)
{
    ad_err e = ad_queue_load(c, tenant, type, &v->q);
    if (e == AD_E_OK)
        e = st->queue_counts(c, tenant, type, now, &v->counts);
    int room = INT_MAX;
    int64_t open_at;
    enum ad_wait why = AD_WAIT_NONE;
    if (e == AD_E_OK && holds_back(&v->q))
        e = ad_queue_room(c, &v->q, now, &room, &why, &open_at);
    int64_t *held = v->waiting_for;
    memset(v->waiting_for, 0, sizeof(v->waiting_for));
    if (e == AD_E_OK && room > 0 && group_limited(&v->q) && v->counts.queued > 0)
        e = groups_held(c, &v->q, now, held);
    int64_t by_groups = held[AD_WAIT_GROUP_CONCURRENCY] + held[AD_WAIT_GROUP_RATE_LIMIT];
    int64_t free_jobs = v->counts.queued > by_groups ? v->counts.queued - by_groups : 0;
    int64_t by_type = free_jobs > room ? free_jobs - room : 0;
    if (by_type > 0 && why == AD_WAIT_NONE) /* room for some: the rest wait for the limit that gave it */
        why = v->q.concurrency > 0 && v->counts.running + room >= v->q.concurrency ? AD_WAIT_CONCURRENCY
                                                                                   : AD_WAIT_RATE_LIMIT;
    if (by_type > 0)
        held[why] += by_type;
    v->waiting = by_type + by_groups;
    v->why = by_type > 0                                                         ? why
             : by_groups == 0                                                    ? AD_WAIT_NONE
             : held[AD_WAIT_GROUP_CONCURRENCY] >= held[AD_WAIT_GROUP_RATE_LIMIT] ? AD_WAIT_GROUP_CONCURRENCY
                                                                                 : AD_WAIT_GROUP_RATE_LIMIT;
    if (e == AD_E_OK)
        limited_note(&v->q, room == 0 ? why : AD_WAIT_NONE);
    return e;
}

ad_err ad_queues_count_waiting(struct ad_conn *c, int64_t now, int64_t out[AD_WAIT__COUNT])
{
    memset(out, 0, AD_WAIT__COUNT * sizeof(*out));
    pthread_mutex_lock(&limited.mu);
    size_t n = limited.n;
    char **keys = ad_calloc(n ? n : 1, sizeof(*keys));
    for (size_t i = 0; i < n; i++) {
        size_t tl = strlen(limited.keys[i]);
        size_t len = tl + 1 + strlen(limited.keys[i] + tl + 1) + 1;
        keys[i] = ad_malloc(len);
        memcpy(keys[i], limited.keys[i], len);
    }
    pthread_mutex_unlock(&limited.mu);
    ad_err e = AD_E_OK;
    for (size_t i = 0; i < n; i++) {
        struct ad_queue_view v = {0};
        if (e == AD_E_OK)
            e = view_load(c, keys[i], keys[i] + strlen(keys[i]) + 1, now, &v);
        for (int w = AD_WAIT_NONE + 1; e == AD_E_OK && w < AD_WAIT__COUNT; w++)
            out[w] += v.waiting_for[w];
        ad_queue_clear(&v.q);
        free(keys[i]);
    }
    free(keys);
    return e;
}

static int has_type(const struct ad_queue_op *x, const char *type)
{
    for (size_t i = 0; i < x->nviews; i++)
        if (strcmp(x->views[i].q.type, type) == 0)
            return 1;
    return 0;
}

static int cmp_view(const void *a, const void *b)
{
    return strcmp(((const struct ad_queue_view *)a)->q.type, ((const struct ad_queue_view *)b)->q.type);
}

static ad_err queue_list_all(struct ad_queue_op *x, struct ad_conn *c)
{
    struct ad_queue_list rows;
    struct ad_job_count_list counts;
    ad_err e = st->queue_list(c, x->tenant, &rows);
    if (e != AD_E_OK)
        return e;
    e = st->job_counts(c, x->tenant, 100000, &counts);
    if (e != AD_E_OK) {
        ad_queue_list_free(&rows);
        return e;
    }
    x->views = ad_calloc(rows.n + counts.n + 1, sizeof(*x->views));
    for (size_t i = 0; i < rows.n + counts.n && e == AD_E_OK; i++) {
        const char *type = i < rows.n ? rows.items[i].type : counts.items[i - rows.n].type;
        if (!has_type(x, type))
            e = view_load(c, x->tenant, type, x->now, &x->views[x->nviews++]);
    }
    ad_queue_list_free(&rows);
    ad_job_count_list_free(&counts);
    if (x->nviews > 1)
        qsort(x->views, x->nviews, sizeof(*x->views), cmp_view);
    return e;
}

static ad_err queue_apply(struct ad_op *op, struct ad_conn *c)
{
    struct ad_queue_op *x = (struct ad_queue_op *)op;
    if (x->all)
        return queue_list_all(x, c);
    if (x->patch == NULL)
        return view_load(c, x->tenant, x->type, x->now, &x->view);
    struct ad_queue q;
    ad_err e = ad_queue_load(c, x->tenant, x->type, &q);
    if (e != AD_E_OK)
        return e;
    if (ad_queue_patch(&q, x->patch, &x->pointer, &x->detail) < 0) {
        ad_queue_clear(&q);
        return AD_E_VALIDATION_FAILED;
    }
    e = queue_write(c, &q);
    ad_queue_clear(&q);
    if (e == AD_E_OK)
        e = view_load(c, x->tenant, x->type, x->now, &x->view);
    return e;
}

static void queue_destroy(struct ad_op *op)
{
    struct ad_queue_op *x = (struct ad_queue_op *)op;
    free(x->tenant);
    free(x->type);
    if (x->patch != NULL)
        json_decref(x->patch);
    ad_queue_clear(&x->view.q);
    for (size_t i = 0; i < x->nviews; i++)
        ad_queue_clear(&x->views[i].q);
    free(x->views);
    free(x->pointer);
    free(x->detail);
    free(x);
}

struct ad_queue_op *ad_queue_op_new(void)
{
    struct ad_queue_op *x = ad_calloc(1, sizeof(*x));
    x->op.apply = queue_apply;
    x->op.destroy = queue_destroy;
    return x;
}
