/*
 * api_resources.c - the business resources of configured routes: GET on a route's `resource`.
 *
 * A route with resource "/v1/videos/{id}" names each job it accepts at that path with {id} the job id, so a
 * GET there needs no table of its own: the id in the path is the job's, and the job says whether that path is
 * its resource (a job of another route, or none, is not found). While the job is pending the path serves a
 * placeholder that points at the job; once it ended, its outcome as the resource's own representation.
 */
#include "api/api_int.h"
#include "common/json.h"

#include <string.h>

int ad_api_resource_match(h2o_req_t *req, h2o_iovec_t path, char **id)
{
    const struct ad_config *cfg = ad_hub.cfg;
    for (size_t i = 0; i < cfg->nroutes; i++) {
        const char *res = cfg->routes[i].resource;
        const char *at = res != NULL ? strstr(res, "{id}") : NULL;
        if (at == NULL)
            continue;
        size_t pre = (size_t)(at - res), post = strlen(at + 4);
        if (path.len <= pre + post || memcmp(path.base, res, pre) != 0 ||
            memcmp(path.base + path.len - post, at + 4, post) != 0)
            continue;
        /* An id is one path segment: "/v1/videos/a/b" is not the resource of a job "a/b". */
        const char *idp = path.base + pre;
        size_t idlen = path.len - pre - post;
        if (memchr(idp, '/', idlen) != NULL)
            continue;
        *id = h2o_strdup(&req->pool, idp, idlen).base;
        return 1;
    }
    return 0;
}

/* The placeholder of a pending job's resource: {"id", "status", "job"}, pointing at the job to monitor. */
static int send_placeholder(struct ad_request *r, const struct ad_job *j)
{
    ad_http_header_cat(r->req, H2O_TOKEN_LINK, "</v1/jobs/", j->id, ">; rel=\"monitor\"");
    ad_http_header_int(r->req, H2O_TOKEN_RETRY_AFTER, ad_hub_retry_after(j));
    struct ad_buf b;
    ad_buf_init(&b, SIZE_MAX);
    AD_JSON_OPEN(&b, "id");
    ad_json_str(&b, j->id);
    AD_JSON_KEY(&b, "status");
    ad_json_str(&b, ad_status_name(j->status));
    AD_JSON_KEY(&b, "job");
    AD_BUF_LIT(&b, "\"/v1/jobs/");
    ad_json_chars(&b, j->id);
    AD_BUF_LIT(&b, "\"}");
    int rc = ad_http_json(r, 200, h2o_strdup(&r->req->pool, b.data, b.len).base, b.len);
    ad_buf_free(&b);
    return rc;
}

static int resource_found(struct ad_request *r, ad_err err, struct ad_entry *e, void *arg)
{
    /* The path must be the job's resource: the job of another route, or of none, is no resource here. */
    if (err == AD_E_OK && (e->job->resource == NULL || strlen(e->job->resource) != r->path.len ||
                           memcmp(e->job->resource, r->path.base, r->path.len) != 0))
        err = AD_E_NOT_FOUND;
    e = ad_api_live_job(r, err, e);
    if (e == NULL)
        return 0;
    const struct ad_job *j = e->job;
    /* The job's validator: the resource changes exactly when its job does. */
    const char *etag = ad_entry_etag(e);
    h2o_add_header(&r->req->pool, &r->req->res.headers, H2O_TOKEN_ETAG, NULL, etag, strlen(etag));
    h2o_add_header(&r->req->pool, &r->req->res.headers, H2O_TOKEN_CACHE_CONTROL, NULL, H2O_STRLIT("no-cache"));
    const char *inm = ad_http_get(r->req, H2O_TOKEN_IF_NONE_MATCH);
    if (inm != NULL && (strcmp(inm, etag) == 0 || strcmp(inm, "*") == 0))
        return ad_http_empty(r->req, 304);
    switch (j->status) {
    case AD_SUCCEEDED:
    case AD_PARTIAL:
        return ad_api_send_result(r, j);
    case AD_FAILED:
        return ad_api_send_stored_problem(r->req, j);
    case AD_CANCELLED:
        return ad_http_problemf(r->req, AD_E_JOB_CANCELLED, "job %s was cancelled and made no resource", j->id);
    default:
        return send_placeholder(r, j);
    }
}

int ad_api_get_resource(struct ad_request *r)
{
    return ad_api_lookup(r, r->id, resource_found, NULL);
}
