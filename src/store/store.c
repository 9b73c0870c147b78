/*
 * store.c - picks the store backend for a target and holds what every backend shares.
 *
 * The backends themselves live in store_sqlite.c and store_pg.c; this file dispatches on the target's scheme,
 * frees the contract's lists, and answers the webhook lookups of a write transaction from its cache
 * (ad_hooks_list, ad_hooks_get) for both backends. It opens no connection of its own.
 */
#include "store/store_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int has_prefix(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

struct ad_store *ad_store_open(const char *target, char *err, size_t errlen)
{
    if (target == NULL || target[0] == '\0') {
        snprintf(err, errlen, "no store target given");
        return NULL;
    }
    if (has_prefix(target, "postgresql://") || has_prefix(target, "postgres://"))
        return ad_store_pg_open(target, err, errlen);
    return ad_store_sqlite_open(target, err, errlen);
}

void ad_job_list_free(struct ad_job_list *l)
{
    if (l == NULL)
        return;
    for (size_t i = 0; i < l->n; i++)
        ad_job_free(l->items[i]);
    free(l->items);
    l->items = NULL;
    l->n = 0;
}

void ad_queue_clear(struct ad_queue *q)
{
    free(q->tenant);
    free(q->type);
    q->tenant = q->type = NULL;
}

void ad_queue_list_free(struct ad_queue_list *l)
{
    for (size_t i = 0; i < l->n; i++)
        ad_queue_clear(&l->items[i]);
    free(l->items);
    l->items = NULL;
    l->n = 0;
}

void ad_schedule_clear(struct ad_schedule *s)
{
    free(s->tenant);
    free(s->id);
    free(s->spec);
    free(s->tmpl);
    free(s->last_job);
    free(s->recent);
    memset(s, 0, sizeof(*s));
}

void ad_schedule_list_free(struct ad_schedule_list *l)
{
    for (size_t i = 0; i < l->n; i++)
        ad_schedule_clear(&l->items[i]);
    free(l->items);
    l->items = NULL;
    l->n = 0;
}

void ad_group_count_list_free(struct ad_group_count_list *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->items[i].group);
    free(l->items);
    l->items = NULL;
    l->n = 0;
}

void ad_job_count_list_free(struct ad_job_count_list *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->items[i].type);
    free(l->items);
    l->items = NULL;
    l->n = 0;
}

void ad_attempt_list_free(struct ad_attempt_list *l)
{
    for (size_t i = 0; i < l->n; i++) {
        free(l->items[i].worker);
        free(l->items[i].outcome);
    }
    free(l->items);
    l->items = NULL;
    l->n = 0;
}

int ad_attempt_is_own(enum ad_status s)
{
    return s == AD_RUNNING || s == AD_SUCCEEDED || s == AD_PARTIAL;
}

void ad_attempt_own(struct ad_attempt_list *l, const struct ad_job *j)
{
    if (!ad_attempt_is_own(j->status))
        return;
    int completed = j->status != AD_RUNNING;
    for (size_t i = 0; i < l->n; i++)
        if (l->items[i].attempt == j->attempt && l->items[i].started_at == j->started_at)
            return;
    l->items = ad_realloc(l->items, (l->n + 1) * sizeof(*l->items));
    l->items[l->n++] = (struct ad_attempt){
        .attempt = j->attempt,
        .worker = ad_strdup_opt(j->worker),
        .started_at = j->started_at,
        .ended_at = completed ? j->finished_at : 0,
        .outcome = completed ? ad_strdup(ad_status_name(j->status)) : NULL,
    };
}

void ad_event_list_free(struct ad_event_list *l)
{
    for (size_t i = 0; i < l->n; i++) {
        free(l->items[i].kind);
        free(l->items[i].data);
    }
    free(l->items);
    l->items = NULL;
    l->n = 0;
}

int ad_lease_before(const struct ad_job *a, const struct ad_job *b)
{
    if (a->priority != b->priority)
        return a->priority > b->priority;
    return a->turn != b->turn ? a->turn < b->turn : a->cseq < b->cseq;
}

void ad_lease_merge(struct ad_job_list *l, int limit)
{
    size_t keep = limit > 0 ? (size_t)limit : 0;
    size_t runs = 0;
    for (size_t i = 0; i < l->n; i++)
        runs += i == 0 || strcmp(l->items[i]->type, l->items[i - 1]->type) != 0;
    if (runs > 1) {
        size_t *at = ad_calloc(runs * 2, sizeof(*at)); /* each run's next row, then its end */
        for (size_t i = 0, r = 0; i < l->n; i++) {
            if (i == 0 || strcmp(l->items[i]->type, l->items[i - 1]->type) != 0) {
                if (r > 0)
                    at[runs + r - 1] = i;
                at[r++] = i;
            }
        }
        at[runs * 2 - 1] = l->n;
        struct ad_job **out = ad_calloc(l->n, sizeof(*out));
        for (size_t n = 0; n < l->n; n++) {
            size_t best = runs;
            for (size_t r = 0; r < runs; r++) {
                if (at[r] == at[runs + r])
                    continue;
                const struct ad_job *h = l->items[at[r]];
                if (best == runs)
                    best = r;
                else if (h->priority != l->items[at[best]]->priority ? h->priority > l->items[at[best]]->priority
                                                                     : h->cseq < l->items[at[best]]->cseq)
                    best = r;
            }
            out[n] = l->items[at[best]++];
        }
        free(l->items);
        l->items = out;
        free(at);
    }
    while (l->n > keep)
        ad_job_free(l->items[--l->n]);
}

/* The body of each ad_*_list_one: the same steps over a list of another type, freed by F. */
#define AD_LIST_ONE(l, e, out, F)                                                                                      \
    do {                                                                                                               \
        *(out) = NULL;                                                                                                 \
        if ((e) == AD_E_OK && (l)->n == 0)                                                                             \
            (e) = AD_E_NOT_FOUND;                                                                                      \
        if ((e) == AD_E_OK) {                                                                                          \
            *(out) = (l)->items[0];                                                                                    \
            (l)->items[0] = NULL;                                                                                      \
        }                                                                                                              \
        F(l);                                                                                                          \
    } while (0)

ad_err ad_job_list_one(struct ad_job_list *l, ad_err e, struct ad_job **out)
{
    AD_LIST_ONE(l, e, out, ad_job_list_free);
    return e;
}

ad_err ad_webhook_list_one(struct ad_webhook_list *l, ad_err e, struct ad_webhook **out)
{
    AD_LIST_ONE(l, e, out, ad_webhook_list_free);
    return e;
}

ad_err ad_delivery_list_one(struct ad_delivery_list *l, ad_err e, struct ad_delivery **out)
{
    AD_LIST_ONE(l, e, out, ad_delivery_list_free);
    return e;
}

void ad_webhook_free(struct ad_webhook *w)
{
    if (w == NULL)
        return;
    free(w->id);
    free(w->tenant);
    free(w->url);
    free(w->secret);
    free(w->prev_secret);
    free(w->disabled_reason);
    free(w);
}

void ad_webhook_list_free(struct ad_webhook_list *l)
{
    for (size_t i = 0; i < l->n; i++)
        ad_webhook_free(l->items[i]);
    free(l->items);
    l->items = NULL;
    l->n = 0;
}

void ad_due_set_webhook(struct ad_due *d, const char *id)
{
    size_t n = id != NULL ? strlen(id) : 0;
    if (n >= sizeof(d->webhook_id))
        n = 0;
    if (n > 0)
        memcpy(d->webhook_id, id, n);
    d->webhook_id[n] = '\0';
}

void ad_delivery_free(struct ad_delivery *d)
{
    if (d == NULL)
        return;
    free(d->id);
    free(d->tenant);
    free(d->webhook_id);
    free(d->url);
    free(d->event_id);
    free(d->event_type);
    free(d->job_id);
    free(d->body);
    free(d->last_error);
    free(d->traceparent);
    free(d->tracestate);
    free(d);
}

void ad_delivery_list_free(struct ad_delivery_list *l)
{
    for (size_t i = 0; i < l->n; i++)
        ad_delivery_free(l->items[i]);
    free(l->items);
    l->items = NULL;
    l->n = 0;
}

static struct ad_webhook *webhook_dup(const struct ad_webhook *w)
{
    struct ad_webhook *d = ad_calloc(1, sizeof(*d));
    *d = *w;
    d->id = ad_strdup_opt(w->id);
    d->tenant = ad_strdup_opt(w->tenant);
    d->url = ad_strdup_opt(w->url);
    d->secret = ad_strdup_opt(w->secret);
    d->prev_secret = ad_strdup_opt(w->prev_secret);
    d->disabled_reason = ad_strdup_opt(w->disabled_reason);
    return d;
}

static void webhook_list_copy(const struct ad_webhook_list *from, struct ad_webhook_list *to)
{
    to->n = from->n;
    to->items = ad_calloc(from->n + 1, sizeof(*to->items));
    for (size_t i = 0; i < from->n; i++)
        to->items[i] = webhook_dup(from->items[i]);
}

/* A copy of the lookup kept for (kind, tenant) into out (the caller frees it): 1, or 0 when none is kept. */
static int hook_cache_find(const struct ad_hook_cache *c, enum ad_hook_kind kind, const char *tenant,
                           struct ad_webhook_list *out)
{
    for (size_t i = 0; tenant != NULL && i < c->n; i++)
        if (c->items[i].kind == kind && strcmp(c->items[i].tenant, tenant) == 0) {
            webhook_list_copy(&c->items[i].list, out);
            return 1;
        }
    return 0;
}

/* Keep a copy of l as the lookup for (kind, tenant); nothing once the cache is full. */
static void hook_cache_keep(struct ad_hook_cache *c, enum ad_hook_kind kind, const char *tenant,
                            const struct ad_webhook_list *l)
{
    if (tenant == NULL || c->n == AD_HOOK_CACHE_MAX)
        return;
    c->items[c->n].kind = kind;
    c->items[c->n].tenant = ad_strdup(tenant);
    webhook_list_copy(l, &c->items[c->n].list);
    c->n++;
}

void ad_hook_cache_drop(struct ad_hook_cache *c)
{
    for (size_t i = 0; i < c->n; i++) {
        free(c->items[i].tenant);
        ad_webhook_list_free(&c->items[i].list);
    }
    c->n = 0;
}

/* Only inside the connection's write transaction: the write lock keeps every other writer out until it ends, and
 * the connection's own endpoint writes and undone operations drop what it keeps. */
static ad_err hooks_lookup(struct ad_hook_cache *cache, int in_tx, struct ad_conn *c, ad_hook_fetch_fn fetch,
                           enum ad_hook_kind kind, const char *tenant, const char *id, struct ad_webhook_list *out)
{
    *out = (struct ad_webhook_list){0};
    int cached = in_tx && kind != AD_HOOKS_BY_ID;
    if (cached && hook_cache_find(cache, kind, tenant, out))
        return AD_E_OK;
    ad_err e = fetch(c, kind, tenant, id, out);
    if (e != AD_E_OK) {
        ad_webhook_list_free(out);
        return e;
    }
    if (cached)
        hook_cache_keep(cache, kind, tenant, out);
    return AD_E_OK;
}

ad_err ad_hooks_list(struct ad_hook_cache *cache, int in_tx, struct ad_conn *c, ad_hook_fetch_fn fetch,
                     const char *tenant, int enabled_only, struct ad_webhook_list *out)
{
    return hooks_lookup(cache, in_tx, c, fetch, enabled_only ? AD_HOOKS_ENABLED : AD_HOOKS_ALL, tenant, NULL, out);
}

ad_err ad_hooks_get(struct ad_hook_cache *cache, int in_tx, struct ad_conn *c, ad_hook_fetch_fn fetch,
                    const char *tenant, const char *id, struct ad_webhook **out)
{
    *out = NULL;
    struct ad_webhook_list l;
    ad_err e = hooks_lookup(cache, in_tx, c, fetch, id != NULL ? AD_HOOKS_BY_ID : AD_HOOKS_CALLBACK, tenant, id, &l);
    return ad_webhook_list_one(&l, e, out);
}

void ad_batch_free(struct ad_batch *b)
{
    if (b == NULL)
        return;
    free(b->id);
    free(b->tenant);
    free(b->callback_url);
    free(b);
}
