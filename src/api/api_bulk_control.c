/*
 * api_bulk_control.c - bulk cancel and retry by filter: POST /v1/jobs:cancel and POST /v1/jobs:retry with
 * {"type", "status"?, "group"?, "createdBefore"?, "createdAfter"?}, answered 200 {"matched", "changed"}.
 *
 * The filter is checked whole before anything is done (422 with a JSON Pointer to each bad or unknown member). The
 * work is a walk of pages (core/bulk.h), each a writer operation of its own, handed in once the one before has
 * committed: other writes get in between pages, and a match of 100,000 jobs never holds the store for long. The
 * answer leaves when the last page has committed. A client that goes away meanwhile does not stop the walk (what it
 * asked for is done; a cancel asked again finds nothing left to change); a daemon that stops does, between two pages,
 * and answers 503: every page is applied whole or not at all. What it does not do: remember a walk across a restart,
 * or keep a second walk over the same jobs from running at the same time (each change is still checked alone).
 */
#include "api/api_int.h"
#include "core/bulk.h"
#include "common/json.h"

#include <stdlib.h>
#include <string.h>

/* A walk under way: the request it answers, the filter (the pages point into it) and the counts so far. */
struct bulk_walk {
    struct ad_pending *pend;
    enum ad_bulk_action action;
    char *tenant, *type, *group;
    struct ad_bulk_query q;
    uint64_t matched, changed;
};

static void walk_free(struct bulk_walk *w)
{
    free(w->tenant);
    free(w->type);
    free(w->group);
    free(w);
}

static void walk_page(struct bulk_walk *w, int64_t after, int64_t upto);

/* The walk ended (err AD_E_OK: every page committed): answer the request, if its client is still there. */
static void walk_end(struct bulk_walk *w, ad_err err)
{
    struct ad_request *r = ad_api_write_take(w->pend);
    if (r != NULL && err != AD_E_OK) {
        ad_http_problemf(r->req, err, "the %s stopped after %llu of the matching jobs (%llu changed); send it again",
                         w->action == AD_BULK_CANCEL ? "bulk cancel" : "bulk retry", (unsigned long long)w->matched,
                         (unsigned long long)w->changed);
    } else if (r != NULL) {
        struct ad_buf b;
        ad_buf_init(&b, SIZE_MAX);
        AD_JSON_OPEN(&b, "matched");
        ad_json_int(&b, (int64_t)w->matched);
        AD_JSON_KEY(&b, "changed");
        ad_json_int(&b, (int64_t)w->changed);
        AD_BUF_LIT(&b, "}");
        ad_http_header(r->req, H2O_TOKEN_CACHE_CONTROL, "no-store");
        ad_api_send_buf(r, 200, &b);
    }
    walk_free(w);
}

static void page_done(struct ad_op *op)
{
    struct ad_bulk_op *b = (struct ad_bulk_op *)op;
    struct bulk_walk *w = b->ctx;
    ad_err err = op->err;
    int64_t next = b->next, upto = b->upto;
    if (err == AD_E_OK) {
        w->matched += b->matched;
        w->changed += b->changed;
    }
    ad_op_free(op);
    if (err == AD_E_OK && next != 0 && ad_hub.shutting_down)
        err = AD_E_UNAVAILABLE;
    if (err != AD_E_OK || next == 0)
        walk_end(w, err);
    else
        walk_page(w, next, upto);
}

/* Hand in the page after cseq after; each page takes its time when it is handed in, as a single operation does. */
static void walk_page(struct bulk_walk *w, int64_t after, int64_t upto)
{
    struct ad_bulk_op *b = ad_bulk_op_new();
    b->action = w->action;
    b->q = w->q;
    b->after = after;
    b->upto = upto;
    b->now = ad_now_ms();
    b->ctx = w;
    b->op.done = page_done;
    ad_writer_submit(&b->op);
}

/* A JSON Pointer to member name of the body (RFC 6901: '~' and '/' escaped), into v's list. */
static void add_member_error(struct ad_verr *v, const char *name, const char *detail)
{
    struct ad_buf p;
    ad_buf_init(&p, SIZE_MAX);
    ad_buf_append(&p, "/", 1);
    for (const char *c = name; *c != '\0'; c++) {
        if (*c == '~')
            ad_buf_append(&p, "~0", 2);
        else if (*c == '/')
            ad_buf_append(&p, "~1", 2);
        else
            ad_buf_append(&p, c, 1);
    }
    ad_buf_append(&p, "", 1);
    ad_verr_add(v, p.data, detail);
    ad_buf_free(&p);
}

/* The statuses of a filter's "status": one name or an array of 1 to 6 of them, as bits (1u << status); 0 when bad. */
static unsigned parse_statuses(const json_t *v)
{
    unsigned bits = 0;
    enum ad_status s;
    if (json_is_string(v))
        return ad_status_parse(json_string_value(v), &s) == 0 ? 1u << s : 0;
    if (!json_is_array(v) || json_array_size(v) == 0 || json_array_size(v) > AD_STATUS__COUNT)
        return 0;
    size_t i;
    const json_t *e;
    json_array_foreach(v, i, e)
    {
        if (!json_is_string(e) || ad_status_parse(json_string_value(e), &s) != 0)
            return 0;
        bits |= 1u << s;
    }
    return bits;
}

/* A filter's date-time member into *ms (unchanged when absent); an error in v when it is not one. */
static void parse_time(struct ad_verr *v, const json_t *body, const char *name, int64_t *ms)
{
    const json_t *t = json_object_get(body, name);
    if (t == NULL)
        return;
    const char *s = ad_api_text(t, 1, 64);
    if (s == NULL || ad_time_parse_rfc3339(s, ms) != 0) {
        add_member_error(v, name, "must be an RFC 3339 date-time");
        return;
    }
    /* 0 means no bound to the store: a bound at or before 1970 is one that no job's creation can pass. */
    if (*ms <= 0)
        *ms = strcmp(name, "createdBefore") == 0 ? 1 : INT64_MAX - 1;
}

/* Check body as a filter into w: 0, or -1 after answering the problem. */
static int parse_filter(struct ad_request *r, json_t *body, struct bulk_walk *w)
{
    struct ad_verr v;
    ad_verr_init(&v);
    if (!json_is_object(body)) {
        ad_verr_add(&v, "", "the body must be a JSON object: the filter, with at least a type");
        ad_verr_send(&v, r);
        return -1;
    }
    const char *key;
    json_t *val;
    json_object_foreach(body, key, val)
    {
        if (strcmp(key, "type") != 0 && strcmp(key, "status") != 0 && strcmp(key, "group") != 0 &&
            strcmp(key, "createdBefore") != 0 && strcmp(key, "createdAfter") != 0)
            add_member_error(&v, key,
                             "is not a member of the filter: type, status, group, createdBefore, createdAfter");
    }
    const char *type = ad_api_text(json_object_get(body, "type"), 1, 128);
    if (type == NULL)
        ad_verr_add(&v, "/type", "type is required: a string of 1 to 128 characters");
    const json_t *st = json_object_get(body, "status");
    if (st != NULL && (w->q.statuses = parse_statuses(st)) == 0)
        ad_verr_add(&v, "/status",
                    "status must be a status name (queued, running, succeeded, partialSuccess, failed, "
                    "cancelled) or an array of them");
    const json_t *g = json_object_get(body, "group");
    const char *group = g != NULL ? ad_api_group(g) : NULL;
    if (g != NULL && group == NULL)
        ad_verr_add(&v, "/group", "group must be a string of 1 to 128 printable ASCII characters");
    parse_time(&v, body, "createdBefore", &w->q.created_before);
    parse_time(&v, body, "createdAfter", &w->q.created_after);
    if (v.n != 0) {
        ad_verr_send(&v, r);
        return -1;
    }
    ad_buf_free(&v.b);
    w->tenant = ad_strdup(r->tenant);
    w->type = ad_strdup(type);
    w->group = group != NULL ? ad_strdup(group) : NULL;
    w->q.tenant = w->tenant;
    w->q.type = w->type;
    w->q.group = w->group;
    return 0;
}

static int bulk_control(struct ad_request *r, enum ad_bulk_action action)
{
    json_t *body = ad_api_body(r);
    if (body == NULL)
        return 0;
    struct bulk_walk *w = ad_calloc(1, sizeof(*w));
    w->action = action;
    int bad = parse_filter(r, body, w);
    json_decref(body);
    if (bad) {
        walk_free(w);
        return 0;
    }
    w->pend = ad_api_write_begin(r);
    walk_page(w, 0, 0);
    return 0;
}

int ad_api_bulk_cancel(struct ad_request *r)
{
    return bulk_control(r, AD_BULK_CANCEL);
}

int ad_api_bulk_retry(struct ad_request *r)
{
    return bulk_control(r, AD_BULK_RETRY);
}
