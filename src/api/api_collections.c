/*
 * api_collections.c - the lists of jobs: GET /v1/jobs (filtered, cursor-paged), a job's attempts
 * (GET /v1/jobs/{id}/attempts) and the change feed (GET /v1/jobs/changes, with ?wait= long polling).
 *
 * Every list is a store read off the event loop (ad_api_read, ad_hub_read), paged by an index: a page token holds
 * the last cseq shown (api_page.c), the feed's cursor the last seq. A change feed that waits hangs in
 * change_waiters and reads again when a change of its tenant is published (ad_api_changes_notify); it never
 * polls. Expired jobs are left out of every page.
 */
#include "api/api_int.h"
#include "common/json.h"

#include <stdlib.h>
#include <string.h>

#define AD_LIST_DEFAULT 50
#define AD_LIST_MAX 500
#define AD_CHANGES_DEFAULT 100
#define AD_CHANGES_MAX 1000

/* Append the live jobs of l as a JSON array to b. */
static void render_items(struct ad_buf *b, const struct ad_job_list *l)
{
    AD_BUF_LIT(b, "[");
    int first = 1;
    for (size_t i = 0; i < l->n; i++) {
        if (!ad_api_job_live(l->items[i]))
            continue;
        if (!first)
            AD_BUF_LIT(b, ",");
        first = 0;
        ad_job_render(l->items[i], b);
    }
    AD_BUF_LIT(b, "]");
}

static int send_list(struct ad_request *r, struct ad_buf *b)
{
    ad_http_header(r->req, H2O_TOKEN_CACHE_CONTROL, "no-cache");
    return ad_api_send_buf(r, 200, b);
}

/* The attempts answer: the rows read, with the attempt the job holds itself (ad_attempt_own). */
static int send_attempts(struct ad_request *r, struct ad_attempt_list *l, const struct ad_job *j)
{
    ad_attempt_own(l, j);
    struct ad_buf b;
    ad_buf_init(&b, SIZE_MAX);
    AD_JSON_OPEN(&b, "attempts");
    AD_BUF_LIT(&b, "[");
    for (size_t i = 0; i < l->n; i++) {
        const struct ad_attempt *a = &l->items[i];
        if (i != 0)
            AD_BUF_LIT(&b, ",");
        AD_JSON_OPEN(&b, "attempt");
        ad_json_int(&b, a->attempt);
        AD_JSON_KEY(&b, "worker");
        ad_json_str(&b, a->worker);
        AD_JSON_KEY(&b, "startedAt");
        ad_json_time(&b, a->started_at);
        AD_JSON_KEY(&b, "endedAt");
        ad_json_time(&b, a->ended_at);
        AD_JSON_KEY(&b, "outcome");
        ad_json_str(&b, a->outcome);
        AD_BUF_LIT(&b, "}");
    }
    AD_BUF_LIT(&b, "]}");
    return send_list(r, &b);
}

struct attempts_read {
    struct ad_api_read rd;
    struct ad_job *job; /* a copy: the cache may drop its entry while the rows are read */
    struct ad_attempt_list l;
};

static ad_err attempts_apply(struct ad_op *op, struct ad_conn *c)
{
    struct attempts_read *x = (struct attempts_read *)op;
    return ad_hub.store->ops->attempt_list(c, x->job->id, &x->l);
}

static void attempts_answer(struct ad_api_read *rd, struct ad_request *r)
{
    struct attempts_read *x = (struct attempts_read *)rd;
    if (r != NULL && rd->op.err != AD_E_OK)
        ad_api_fail(r, rd->op.err);
    else if (r != NULL)
        send_attempts(r, &x->l, x->job);
    if (rd->op.err == AD_E_OK)
        ad_attempt_list_free(&x->l);
    ad_job_free(x->job);
}

static int attempts_found(struct ad_request *r, ad_err err, struct ad_entry *e, void *arg)
{
    e = ad_api_live_job(r, err, e);
    if (e == NULL)
        return 0;
    struct attempts_read *x = ad_calloc(1, sizeof(*x));
    x->job = ad_job_dup(e->job);
    x->rd.op.apply = attempts_apply;
    x->rd.answer = attempts_answer;
    return ad_api_read(r, &x->rd);
}

int ad_api_attempts(struct ad_request *r)
{
    return ad_api_lookup(r, r->id, attempts_found, NULL);
}

struct list_read {
    struct ad_api_read rd;
    struct ad_list_query q;
    char *tenant, *type; /* q's strings */
    struct ad_job_list l;
};

static ad_err list_apply(struct ad_op *op, struct ad_conn *c)
{
    struct list_read *x = (struct list_read *)op;
    return ad_hub.store->ops->job_list(c, &x->q, &x->l);
}

static void list_send(struct ad_request *r, struct ad_job_list *lp, int limit);

static void list_answer(struct ad_api_read *rd, struct ad_request *r)
{
    struct list_read *x = (struct list_read *)rd;
    if (r != NULL && rd->op.err != AD_E_OK)
        ad_api_fail(r, rd->op.err);
    else if (r != NULL)
        list_send(r, &x->l, x->q.limit);
    ad_job_list_free(&x->l);
    free(x->tenant);
    free(x->type);
}

int ad_api_list(struct ad_request *r)
{
    struct ad_list_query q = {.tenant = r->tenant, .limit = AD_LIST_DEFAULT};
    long long limit = AD_LIST_DEFAULT;
    if (ad_api_query_int(r, "limit", 1, AD_LIST_MAX, &limit) != 0)
        return 0;
    q.limit = (int)limit;
    const char *status = ad_http_query(r, "status");
    if (status != NULL) {
        if (ad_status_parse(status, &q.status) != 0)
            return ad_http_problemf(r->req, AD_E_INVALID_REQUEST, "unknown status %.64s", status);
        q.has_status = 1;
    }
    q.type = ad_http_query(r, "type");
    const char *after = ad_http_query(r, "updatedAfter");
    if (after != NULL && ad_time_parse_rfc3339(after, &q.updated_after) != 0)
        return ad_http_problem(r->req, AD_E_INVALID_REQUEST, "updatedAfter must be an RFC 3339 date-time", NULL);
    if (ad_api_page_token_read(r, "c1", &q.before_cseq) != 0)
        return 0;
    q.limit++; /* one more than asked tells whether there is a next page */
    struct list_read *x = ad_calloc(1, sizeof(*x));
    x->q = q;
    x->q.tenant = x->tenant = ad_strdup(r->tenant); /* the request may be gone while the reader reads */
    x->q.type = x->type = q.type != NULL ? ad_strdup(q.type) : NULL;
    x->rd.op.apply = list_apply;
    x->rd.answer = list_answer;
    return ad_api_read(r, &x->rd);
}

static void list_send(struct ad_request *r, struct ad_job_list *lp, int limit)
{
    struct ad_job_list l = *lp;
    int more = l.n == (size_t)limit;
    if (more)
        ad_job_free(l.items[--l.n]);
    struct ad_buf b;
    ad_buf_init(&b, SIZE_MAX);
    AD_JSON_OPEN(&b, "items");
    render_items(&b, &l);
    AD_JSON_KEY(&b, "nextPageToken");
    if (more && l.n > 0) {
        char tok[AD_API_PAGE_TOKEN_MAX];
        ad_api_page_token("c1", l.items[l.n - 1]->cseq, tok);
        ad_json_str(&b, tok);
    } else {
        ad_json_null(&b);
    }
    AD_BUF_LIT(&b, "}");
    *lp = l;
    send_list(r, &b);
}

/*
 * A change feed request, from its first read to its answer. Its reads run off the loop (ad_hub_read), one at a time;
 * with ?wait= it waits in change_waiters from the start, so that a change published while a read is in
 * flight (which that read may or may not have seen) has it read again before it waits on.
 */
struct changes_wait {
    h2o_linklist_t link;
    struct ad_timer timer;
    struct ad_pending *pend;
    struct ad_request *r;
    char *tenant;
    int64_t since;
    int limit;
    int waiting; /* an empty page waits for a change (until the timer ends the wait) */
    int reading; /* a read is in flight */
    int again;   /* a change came while reading: an empty page reads again */
    int gone;    /* the client went away while a read was in flight: the read frees it */
};

/* Change feed requests waiting for a change. */
static h2o_linklist_t change_waiters = {&change_waiters, &change_waiters};

struct changes_read {
    struct ad_op op;
    struct changes_wait *c;
    struct ad_job_list l;
};

static ad_err changes_apply(struct ad_op *op, struct ad_conn *c)
{
    struct changes_read *x = (struct changes_read *)op;
    return ad_hub.store->ops->job_changes(c, x->c->tenant, x->c->since, x->c->limit, &x->l);
}

static void changes_read_destroy(struct ad_op *op)
{
    struct changes_read *x = (struct changes_read *)op;
    ad_job_list_free(&x->l);
    free(x);
}

static void changes_free(struct changes_wait *c)
{
    if (h2o_linklist_is_linked(&c->link))
        h2o_linklist_unlink(&c->link);
    ad_timer_cancel(&c->timer);
    free(c->tenant);
    free(c);
}

static void changes_send(struct ad_request *r, const struct ad_job_list *l, int64_t since)
{
    struct ad_buf b;
    ad_buf_init(&b, SIZE_MAX);
    /* The cursor is a string: a client's JSON numbers need not hold 64 bits. */
    char cursor[AD_INT_CHARS + 1];
    ad_format_int(l->n > 0 ? l->items[l->n - 1]->seq : since, cursor);
    AD_JSON_OPEN(&b, "changes");
    render_items(&b, l);
    AD_JSON_KEY(&b, "cursor");
    ad_json_str(&b, cursor);
    AD_BUF_LIT(&b, "}");
    send_list(r, &b);
}

static void changes_read(struct changes_wait *c);

static void changes_read_done(struct ad_op *op)
{
    struct changes_read *x = (struct changes_read *)op;
    struct changes_wait *c = x->c;
    c->reading = 0;
    if (c->gone) {
        changes_free(c);
    } else if (op->err == AD_E_OK && x->l.n == 0 && c->waiting) {
        if (c->again)
            changes_read(c);
    } else {
        struct ad_request *r = c->r;
        if (ad_pending_take(c->pend) != NULL) {
            if (op->err != AD_E_OK)
                ad_api_fail(r, op->err);
            else
                changes_send(r, &x->l, c->since);
        }
        changes_free(c);
    }
    ad_op_free(op);
}

static void changes_read(struct changes_wait *c)
{
    struct changes_read *x = ad_calloc(1, sizeof(*x));
    x->c = c;
    x->op.apply = changes_apply;
    x->op.done = changes_read_done;
    x->op.destroy = changes_read_destroy;
    c->reading = 1;
    c->again = 0;
    ad_hub_read(&x->op); /* may answer, and free c, before it returns */
}

static void changes_gone(struct ad_pending *p)
{
    struct changes_wait *c = p->owner;
    ad_pending_take(p);
    if (!c->reading) {
        changes_free(c);
        return;
    }
    c->gone = 1;
    if (h2o_linklist_is_linked(&c->link))
        h2o_linklist_unlink(&c->link);
    ad_timer_cancel(&c->timer);
}

static void changes_timeout(struct ad_timer *t)
{
    struct changes_wait *c = H2O_STRUCT_FROM_MEMBER(struct changes_wait, timer, t);
    c->waiting = 0;
    if (!c->reading)
        changes_read(c); /* else the read in flight answers, empty or not */
}

void ad_api_changes_notify(const char *tenant)
{
    h2o_linklist_t *node = change_waiters.next;
    while (node != &change_waiters) {
        struct changes_wait *c = H2O_STRUCT_FROM_MEMBER(struct changes_wait, link, node);
        node = node->next;
        if (strcmp(c->tenant, tenant) != 0)
            continue;
        if (c->reading)
            c->again = 1;
        else
            changes_read(c);
    }
}

int ad_api_changes(struct ad_request *r)
{
    long long since = 0, limit = AD_CHANGES_DEFAULT, wait = 0;
    if (ad_api_query_int(r, "since", 0, INT64_MAX, &since) != 0 ||
        ad_api_query_int(r, "limit", 1, AD_CHANGES_MAX, &limit) != 0 ||
        ad_api_query_int(r, "wait", 0, 86400, &wait) != 0)
        return 0;
    wait = ad_api_wait_cap((int)wait);
    struct changes_wait *c = ad_calloc(1, sizeof(*c));
    c->r = r;
    c->tenant = ad_strdup(r->tenant);
    c->since = since;
    c->limit = (int)limit;
    c->waiting = wait > 0;
    c->timer.cb = changes_timeout;
    c->pend = ad_pending_new(r->req, c, changes_gone);
    if (c->waiting) {
        h2o_linklist_insert(&change_waiters, &c->link);
        ad_timer_arm(&c->timer, ad_mono_ms() + wait * 1000);
    }
    changes_read(c);
    return 0;
}
