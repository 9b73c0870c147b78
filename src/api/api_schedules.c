/*
 * api_schedules.c - the schedules of a tenant (CONTRACT.md section 12): POST and GET /v1/schedules, GET, PATCH and
 * DELETE /v1/schedules/{id}, POST /v1/schedules/{id}:trigger.
 *
 * A body is checked here in full before anything is written: the definition by core/schedules.c's rules, the job
 * template as a submit would be (ad_api_submit_parse), its problems pointed under /job. A PATCH is an RFC 7396
 * merge patch of the stored definition: read, merged and checked here, then written by the writer only if the
 * schedule did not change meanwhile (409 conflict otherwise). Writes answer once durable; reads go through
 * ad_api_read (off the loop on PostgreSQL). Another tenant's schedule is not found. Pages are by id, their token
 * the last id given. Firing is the core's (core/schedules.h); after a write the engine is told the schedule's
 * next fire time.
 */
#include "api/api_int.h"
#include "common/base64.h"
#include "common/json.h"
#include "core/schedules.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define SCHEDULE_ID_MAX 64
#define PAGE_DEFAULT 50
#define PAGE_MAX 200

static const char *tenant_of(struct ad_request *r)
{
    return r->tenant != NULL ? r->tenant : "default";
}

static int send_schedule(struct ad_request *r, int status, const struct ad_schedule *s)
{
    struct ad_buf b;
    ad_buf_init(&b, SIZE_MAX);
    ad_schedule_render(s, &b);
    char etag[25];
    ad_etag(b.data, b.len, etag);
    ad_http_header(r->req, H2O_TOKEN_ETAG, etag);
    ad_http_header(r->req, H2O_TOKEN_CACHE_CONTROL, "no-cache");
    const char *inm = ad_http_get(r->req, H2O_TOKEN_IF_NONE_MATCH);
    if (status == 200 && inm != NULL && (strcmp(inm, "*") == 0 || strstr(inm, etag) != NULL)) {
        ad_buf_free(&b);
        return ad_http_empty(r->req, 304);
    }
    return ad_api_send_buf(r, status, &b);
}

static int not_found(struct ad_request *r, ad_err e)
{
    if (e == AD_E_NOT_FOUND)
        return ad_http_problemf(r->req, AD_E_NOT_FOUND, "no schedule %.64s", r->id);
    return ad_api_fail(r, e);
}

/* ---- checking a body ---- */

static void bad_cb(void *arg, const char *pointer, const char *detail)
{
    ad_verr_add(arg, pointer, detail);
}

/* Move the errors of a submit's parse into v, their pointers under /job. */
static void job_errors(struct ad_api_submit_parsed *p, struct ad_verr *v)
{
    char detail[300];
    if (p->err == AD_E_UNKNOWN_TYPE) {
        snprintf(detail, sizeof(detail), "no job type named %.200s is configured", p->job->type);
        ad_verr_add(v, "/job/type", detail);
        return;
    }
    const char *extra = ad_verr_finish(&p->v, detail, sizeof(detail));
    char *wrapped = ad_asprintf("{%s}", extra != NULL ? extra + 1 : "");
    json_t *o = json_loads(wrapped, 0, NULL);
    free(wrapped);
    size_t i;
    json_t *e;
    json_array_foreach(json_object_get(o, "errors"), i, e)
    {
        char ptr[300];
        snprintf(ptr, sizeof(ptr), "/job%s", json_string_value(json_object_get(e, "pointer")));
        ad_verr_add(v, ptr, json_string_value(json_object_get(e, "detail")));
    }
    json_decref(o);
}

/* Check body (the definition and its job) into v; on success *tmpl is the job template (heap). */
static void check_body(struct ad_request *r, json_t *body, int64_t now, struct ad_verr *v, char **tmpl)
{
    *tmpl = NULL;
    struct ad_sched_def d;
    ad_schedule_def_read(body, &d, bad_cb, v);
    ad_schedule_def_clear(&d);
    json_t *job = json_object_get(body, "job");
    if (!json_is_object(job)) {
        ad_verr_add(v, "/job", "job is required: a submit body, as POST /v1/jobs takes");
        return;
    }
    static const char *const refused[] = {"runAt", "debounceSeconds"};
    for (size_t i = 0; i < 2; i++) {
        json_t *m = json_object_get(job, refused[i]);
        if (m != NULL && !json_is_null(m)) {
            char ptr[64];
            snprintf(ptr, sizeof(ptr), "/job/%s", refused[i]);
            ad_verr_add(v, ptr, "a schedule's job runs at its fire time: no runAt or debounceSeconds");
        }
    }
    struct ad_api_submit_parsed p;
    ad_api_submit_parse(r, job, 0, "", now, &p);
    if (p.err != AD_E_OK)
        job_errors(&p, v);
    else
        *tmpl = ad_schedule_tmpl(p.job);
    ad_buf_free(&p.v.b);
    ad_job_free(p.job);
}

static int id_ok(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > SCHEDULE_ID_MAX)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') ||
              s[i] == '_' || s[i] == '-'))
            return 0;
    return 1;
}

/* ---- writes ---- */

static void write_done(struct ad_op *op)
{
    struct ad_schedule_op *x = (struct ad_schedule_op *)op;
    struct ad_request *r = ad_api_write_take(x->ctx);
    if (op->err == AD_E_OK && x->kind != AD_SCHED_DELETE)
        ad_schedules_wake(x->s.next_at);
    if (r == NULL) {
        ad_op_free(op);
        return;
    }
    if (op->err == AD_E_ALREADY_EXISTS)
        ad_http_problemf(r->req, AD_E_ALREADY_EXISTS, "the tenant has a schedule %.64s", x->s.id);
    else if (op->err == AD_E_CONFLICT)
        ad_http_problem(r->req, AD_E_CONFLICT, "the schedule changed while the patch was applied; send it again", NULL);
    else if (op->err != AD_E_OK)
        not_found(r, op->err);
    else if (x->kind == AD_SCHED_DELETE)
        ad_http_empty(r->req, 204);
    else if (x->kind == AD_SCHED_CREATE) {
        char loc[96];
        snprintf(loc, sizeof(loc), "/v1/schedules/%s", x->s.id);
        ad_http_header(r->req, H2O_TOKEN_LOCATION, loc);
        send_schedule(r, 201, &x->s);
    } else {
        send_schedule(r, 200, &x->s);
    }
    ad_op_free(op);
}

static struct ad_schedule_op *write_op(struct ad_request *r, enum ad_schedule_kind kind, const char *id)
{
    struct ad_schedule_op *x = ad_schedule_op_new();
    x->kind = kind;
    x->s.tenant = ad_strdup(tenant_of(r));
    x->s.id = ad_strdup(id);
    x->now = ad_now_ms();
    x->ctx = ad_api_write_begin(r);
    x->op.done = write_done;
    return x;
}

int ad_api_schedule_create(struct ad_request *r)
{
    json_t *body = ad_api_body(r);
    if (body == NULL)
        return 0;
    struct ad_verr v;
    ad_verr_init(&v);
    char *tmpl = NULL;
    int64_t now = ad_now_ms();
    const char *id = NULL;
    if (!json_is_object(body)) {
        ad_verr_add(&v, "", "the body must be a JSON object");
    } else {
        json_t *idv = json_object_get(body, "id");
        if (idv != NULL && !json_is_null(idv)) {
            id = json_is_string(idv) ? json_string_value(idv) : NULL;
            if (id == NULL || !id_ok(id) || strlen(id) != json_string_length(idv))
                ad_verr_add(&v, "/id", "id must be 1 to 64 of A-Z, a-z, 0-9, _ and -");
        }
        check_body(r, body, now, &v, &tmpl);
    }
    if (v.n > 0) {
        free(tmpl);
        json_decref(body);
        return ad_verr_send(&v, r);
    }
    ad_buf_free(&v.b);
    char *fresh = id == NULL ? ad_new_id("sch_") : NULL;
    struct ad_schedule_op *x = write_op(r, AD_SCHED_CREATE, id != NULL ? id : fresh);
    free(fresh);
    x->s.spec = ad_schedule_spec(body);
    x->s.tmpl = tmpl;
    x->s.created_at = now;
    json_decref(body);
    ad_writer_submit(&x->op);
    return 0;
}

int ad_api_schedule_delete(struct ad_request *r)
{
    ad_writer_submit(&write_op(r, AD_SCHED_DELETE, r->id)->op);
    return 0;
}

int ad_api_schedule_trigger(struct ad_request *r)
{
    ad_writer_submit(&write_op(r, AD_SCHED_TRIGGER, r->id)->op);
    return 0;
}

/* ---- reads ---- */

enum sched_read_kind { SR_GET, SR_LIST, SR_PATCH };
struct sched_read {
    struct ad_api_read rd;
    enum sched_read_kind kind;
    char *tenant, *id, *after;
    int limit;
    json_t *patch;
    struct ad_schedule s;
    struct ad_schedule_list l;
};

static ad_err sched_read_apply(struct ad_op *op, struct ad_conn *c)
{
    struct sched_read *x = (struct sched_read *)op;
    const struct ad_store_ops *st = ad_hub.store->ops;
    if (x->kind == SR_LIST)
        return st->schedule_list(c, x->tenant, x->after, x->limit + 1, &x->l);
    return st->schedule_get(c, x->tenant, x->id, &x->s);
}

static int send_list(struct ad_request *r, struct sched_read *x)
{
    int more = x->l.n > (size_t)x->limit;
    struct ad_buf b;
    ad_buf_init(&b, SIZE_MAX);
    AD_BUF_LIT(&b, "{\"items\":[");
    size_t n = more ? (size_t)x->limit : x->l.n;
    for (size_t i = 0; i < n; i++) {
        if (i > 0)
            AD_BUF_LIT(&b, ",");
        ad_schedule_render(&x->l.items[i], &b);
    }
    AD_BUF_LIT(&b, "],\"nextPageToken\":");
    if (more) {
        const char *last = x->l.items[n - 1].id;
        char tok[2 * SCHEDULE_ID_MAX];
        ad_b64url_encode((const uint8_t *)last, strlen(last), tok);
        ad_json_str(&b, tok);
    } else {
        ad_json_null(&b);
    }
    AD_BUF_LIT(&b, "}");
    ad_http_header(r->req, H2O_TOKEN_CACHE_CONTROL, "no-store");
    return ad_api_send_buf(r, 200, &b);
}

/* RFC 7396: target with patch merged in (a new reference). */
static json_t *merge_patch(json_t *target, json_t *patch)
{
    if (!json_is_object(patch))
        return json_incref(patch);
    json_t *out = json_is_object(target) ? json_deep_copy(target) : json_object();
    const char *k;
    json_t *v;
    json_object_foreach(patch, k, v)
    {
        if (json_is_null(v)) {
            json_object_del(out, k);
        } else {
            json_t *m = merge_patch(json_object_get(out, k), v);
            json_object_set_new(out, k, m);
        }
    }
    return out;
}

static void patch_answer(struct sched_read *x, struct ad_request *r)
{
    json_t *spec = json_loads(x->s.spec, 0, NULL);
    json_t *merged = merge_patch(spec, x->patch);
    json_decref(spec);
    struct ad_verr v;
    ad_verr_init(&v);
    json_t *idv = json_object_get(x->patch, "id");
    if (idv != NULL && !(json_is_string(idv) && strcmp(json_string_value(idv), x->s.id) == 0))
        ad_verr_add(&v, "/id", "a schedule's id cannot change");
    char *tmpl = NULL;
    if (!json_is_object(x->patch))
        ad_verr_add(&v, "", "the patch must be a JSON object");
    else
        check_body(r, merged, ad_now_ms(), &v, &tmpl);
    if (v.n > 0) {
        free(tmpl);
        json_decref(merged);
        ad_verr_send(&v, r);
        return;
    }
    ad_buf_free(&v.b);
    struct ad_schedule_op *op = write_op(r, AD_SCHED_REPLACE, x->s.id);
    op->s.spec = ad_schedule_spec(merged);
    op->s.tmpl = tmpl;
    op->expect_version = x->s.version;
    json_decref(merged);
    ad_writer_submit(&op->op);
}

static void sched_read_answer(struct ad_api_read *rd, struct ad_request *r)
{
    struct sched_read *x = (struct sched_read *)rd;
    ad_err e = rd->op.err;
    if (r == NULL)
        ;
    else if (e != AD_E_OK && x->kind != SR_LIST)
        not_found(r, e);
    else if (e != AD_E_OK)
        ad_api_fail(r, e);
    else if (x->kind == SR_GET)
        send_schedule(r, 200, &x->s);
    else if (x->kind == SR_LIST)
        send_list(r, x);
    else
        patch_answer(x, r);
    ad_schedule_clear(&x->s);
    ad_schedule_list_free(&x->l);
    json_decref(x->patch);
    free(x->tenant);
    free(x->id);
    free(x->after);
}

static int sched_read(struct ad_request *r, enum sched_read_kind kind, json_t *patch, char *after, int limit)
{
    struct sched_read *x = ad_calloc(1, sizeof(*x));
    x->kind = kind;
    x->tenant = ad_strdup(tenant_of(r));
    x->id = ad_strdup_opt(r->id);
    x->after = after;
    x->limit = limit;
    x->patch = patch;
    x->rd.op.apply = sched_read_apply;
    x->rd.answer = sched_read_answer;
    return ad_api_read(r, &x->rd);
}

int ad_api_schedule_get(struct ad_request *r)
{
    return sched_read(r, SR_GET, NULL, NULL, 0);
}

int ad_api_schedule_list(struct ad_request *r)
{
    long long limit = PAGE_DEFAULT;
    if (ad_api_query_int(r, "limit", 1, PAGE_MAX, &limit) != 0)
        return 0;
    char *after = NULL;
    const char *tok = ad_http_query(r, "pageToken");
    if (tok != NULL) {
        size_t len = strlen(tok);
        uint8_t raw[SCHEDULE_ID_MAX + 4];
        long n = len <= 2 * SCHEDULE_ID_MAX ? ad_b64url_decode(tok, len, raw) : -1;
        if (n > 0 && n <= SCHEDULE_ID_MAX) {
            raw[n] = '\0';
            after = id_ok((char *)raw) ? ad_strdup((char *)raw) : NULL;
        }
        if (after == NULL)
            return ad_http_problem(r->req, AD_E_INVALID_REQUEST, "pageToken is not one this list gave", NULL);
    }
    return sched_read(r, SR_LIST, NULL, after, (int)limit);
}

int ad_api_schedule_patch(struct ad_request *r)
{
    const char *ct = ad_http_get(r->req, H2O_TOKEN_CONTENT_TYPE);
    size_t len = ct != NULL ? strcspn(ct, "; \t") : 0;
    if (ct == NULL || len != 28 || strncasecmp(ct, "application/merge-patch+json", 28) != 0)
        return ad_http_problem(r->req, AD_E_UNSUPPORTED_MEDIA_TYPE,
                               "send the change as an RFC 7396 merge patch, application/merge-patch+json", NULL);
    json_t *body = ad_api_body(r);
    if (body == NULL)
        return 0;
    return sched_read(r, SR_PATCH, body, NULL, 0);
}
