/*
 * store_int.h - what the store backends share among themselves and with store.c, and nothing above them uses:
 * the columns of the jobs table, the per-transaction webhook lookups, a due entry's endpoint id and the
 * backends' constructors. The contract for the layers above is store.h (as curl keeps vtls.h and vtls_int.h).
 * Included by store.c, the backends' own headers (store_sqlite_int.h, store_pg_int.h) and their unit tests only.
 */
#ifndef AD_STORE_INT_H
#define AD_STORE_INT_H

#include "store/store.h"

/*
 * The columns of the jobs table that mirror struct ad_job, in the order every backend selects and binds them:
 * XX(name, kind, n, fixed), n being the column's place from 1 (its parameter number where a backend numbers
 * them). Kinds: TEXT (NULL = absent), INT, PROG (NULL = -1 = unknown), TIME (NULL = 0 = not reached). A fixed
 * column (1) is written when the job is created and never changed by an update (tombstoning sets tombstoned and
 * empties the payload with a statement of its own). seq and cseq follow them and are handled by hand. Each backend
 * generates its select list, insert, update, binder and row reader from this one list, so no two can drift apart.
 */
#define AD_JOB_COLUMNS(XX)                                                                                             \
    XX(id, TEXT, 1, 1)                                                                                                 \
    XX(tenant, TEXT, 2, 1)                                                                                             \
    XX(type, TEXT, 3, 1)                                                                                               \
    XX(status, INT, 4, 0)                                                                                              \
    XX(progress, PROG, 5, 0)                                                                                           \
    XX(priority, INT, 6, 1)                                                                                            \
    XX(payload, TEXT, 7, 1)                                                                                            \
    XX(result, TEXT, 8, 0)                                                                                             \
    XX(result_location, TEXT, 9, 0)                                                                                    \
    XX(error, TEXT, 10, 0)                                                                                             \
    XX(message, TEXT, 11, 0)                                                                                           \
    XX(attempt, INT, 12, 0)                                                                                            \
    XX(max_attempts, INT, 13, 1)                                                                                       \
    XX(cancel_requested, INT, 14, 0)                                                                                   \
    XX(timeout_seconds, INT, 15, 1)                                                                                    \
    XX(on_complete_redirect, INT, 16, 1)                                                                               \
    XX(created_at, TIME, 17, 1)                                                                                        \
    XX(started_at, TIME, 18, 0)                                                                                        \
    XX(updated_at, TIME, 19, 0)                                                                                        \
    XX(finished_at, TIME, 20, 0)                                                                                       \
    XX(expires_at, TIME, 21, 0)                                                                                        \
    XX(run_at, TIME, 22, 0)                                                                                            \
    XX(callback_url, TEXT, 23, 1)                                                                                      \
    XX(retry_of, TEXT, 24, 1)                                                                                          \
    XX(resource, TEXT, 25, 1)                                                                                          \
    XX(lease_id, TEXT, 26, 0)                                                                                          \
    XX(lease_expires_at, TIME, 27, 0)                                                                                  \
    XX(worker, TEXT, 28, 0)                                                                                            \
    XX(tombstoned, INT, 29, 1)                                                                                         \
    XX(artifact, TEXT, 30, 0)                                                                                          \
    XX(unique_key, TEXT, 31, 1)                                                                                        \
    XX(schedule, TEXT, 32, 1)

/*
 * The columns of the webhooks and deliveries tables in the order every backend selects them (deliveries with seq
 * before them), as text for the statements and as lists XX(name, kind, n) of the struct's fields, n being the
 * column's place in a row (kinds as in AD_JOB_COLUMNS, and INT64), from which each backend generates its row
 * readers. The text and the lists must name the same columns in the same order.
 */
#define AD_WEBHOOK_COLUMNS(XX)                                                                                         \
    XX(id, TEXT, 0)                                                                                                    \
    XX(tenant, TEXT, 1)                                                                                                \
    XX(url, TEXT, 2)                                                                                                   \
    XX(events, INT64, 3)                                                                                               \
    XX(secret, TEXT, 4)                                                                                                \
    XX(prev_secret, TEXT, 5)                                                                                           \
    XX(prev_until, TIME, 6)                                                                                            \
    XX(created_at, TIME, 7)                                                                                            \
    XX(disabled_at, TIME, 8)                                                                                           \
    XX(disabled_reason, TEXT, 9)
#define AD_DELIVERY_COLUMNS(XX)                                                                                        \
    XX(id, TEXT, 1)                                                                                                    \
    XX(tenant, TEXT, 2)                                                                                                \
    XX(webhook_id, TEXT, 3)                                                                                            \
    XX(url, TEXT, 4)                                                                                                   \
    XX(event_id, TEXT, 5)                                                                                              \
    XX(event_type, TEXT, 6)                                                                                            \
    XX(job_id, TEXT, 7)                                                                                                \
    XX(body, TEXT, 8)                                                                                                  \
    XX(created_at, TIME, 9)                                                                                            \
    XX(state, INT, 10)                                                                                                 \
    XX(attempts, INT, 11)                                                                                              \
    XX(next_at, TIME, 12)                                                                                              \
    XX(last_at, TIME, 13)                                                                                              \
    XX(last_status, INT, 14)                                                                                           \
    XX(last_error, TEXT, 15)
#define AD_WEBHOOK_COLS                                                                                                \
    "id, tenant, url, events, secret, prev_secret, prev_until, created_at, disabled_at, disabled_reason"
#define AD_DELIVERY_COLS                                                                                               \
    "id, tenant, webhook_id, url, event_id, event_type, job_id, body, created_at, state, attempts, next_at,"           \
    " last_at, last_status, last_error"

/* The one row a lookup by key read into l: on AD_E_OK *out takes its first item (the caller frees it), and an empty
 * l is AD_E_NOT_FOUND; any other e is returned as it is, *out NULL. l is freed either way. */
ad_err ad_job_list_one(struct ad_job_list *l, ad_err e, struct ad_job **out);
ad_err ad_webhook_list_one(struct ad_webhook_list *l, ad_err e, struct ad_webhook **out);
ad_err ad_delivery_list_one(struct ad_delivery_list *l, ad_err e, struct ad_delivery **out);

/*
 * The webhook lookups of one write transaction, remembered for the rest of it: the outbox asks for the
 * tenant's endpoints on every change of a job. A backend keeps one per connection, asks it only while its
 * transaction holds the write lock (no other writer can change the endpoints meanwhile), and drops it when the
 * transaction or an operation in it ends undone, and whenever it writes an endpoint itself. AD_HOOKS_BY_ID is
 * never kept.
 */
enum ad_hook_kind { AD_HOOKS_ALL, AD_HOOKS_ENABLED, AD_HOOKS_CALLBACK, AD_HOOKS_BY_ID };
#define AD_HOOK_CACHE_MAX 64
struct ad_hook_cache {
    struct {
        enum ad_hook_kind kind;
        char *tenant;
        struct ad_webhook_list list; /* AD_HOOKS_CALLBACK: the secret, or empty when the tenant has none */
    } items[AD_HOOK_CACHE_MAX];
    size_t n;
};
/* Forget every lookup: the transaction, or an operation in it, ended undone, or the connection wrote an endpoint. */
void ad_hook_cache_drop(struct ad_hook_cache *c);

/*
 * A backend's query for webhook rows: AD_HOOKS_ALL or AD_HOOKS_ENABLED the tenant's endpoints oldest first,
 * AD_HOOKS_CALLBACK the tenant's callback secret (zero or one row), AD_HOOKS_BY_ID the row with id (tenant NULL =
 * any tenant; zero or one row). It fills out (zeroed by the caller) and frees what it filled on error.
 */
typedef ad_err (*ad_hook_fetch_fn)(struct ad_conn *c, enum ad_hook_kind kind, const char *tenant, const char *id,
                                   struct ad_webhook_list *out);
/*
 * ops->webhook_list and ops->webhook_get for every backend, over its fetch: inside its write transaction (in_tx)
 * a connection answers a lookup of (kind, tenant) it has made before from its cache, and keeps what it fetches;
 * outside one it always fetches. By id is never cached. *out is zeroed (NULL) first and on every error.
 */
ad_err ad_hooks_list(struct ad_hook_cache *cache, int in_tx, struct ad_conn *c, ad_hook_fetch_fn fetch,
                     const char *tenant, int enabled_only, struct ad_webhook_list *out);
ad_err ad_hooks_get(struct ad_hook_cache *cache, int in_tx, struct ad_conn *c, ad_hook_fetch_fn fetch,
                    const char *tenant, const char *id, struct ad_webhook **out);

/* Copy an endpoint id into d (the backends' rows). */
void ad_due_set_webhook(struct ad_due *d, const char *id);

/* Backend constructors, used by ad_store_open. */
struct ad_store *ad_store_sqlite_open(const char *dir, char *err, size_t errlen);
struct ad_store *ad_store_pg_open(const char *url, char *err, size_t errlen);

#endif
