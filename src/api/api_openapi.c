/*
 * api_openapi.c - GET /openapi.json: the OpenAPI 3.1 document of this API (docs/openapi.json).
 *
 * The document is built into the binary (common/embed.h), so the daemon serves exactly the file the linter and
 * the black-box suite's validator check, with nothing to install beside it. It never changes while the
 * process runs: its strong ETag is computed once, and a matching If-None-Match answers 304.
 */
#include "api/api_int.h"
#include "common/embed.h"
#include "job/job.h"

#include <string.h>

AD_EMBED(ad_openapi_json, "docs/openapi.json");

int ad_api_openapi(struct ad_request *r)
{
    static char etag[25]; /* '"' + 22 base64url characters + '"' + NUL (job.h) */
    if (etag[0] == '\0')
        ad_etag(ad_openapi_json, AD_EMBED_LEN(ad_openapi_json), etag);
    h2o_req_t *req = r->req;
    ad_http_header(req, H2O_TOKEN_ETAG, etag);
    ad_http_header(req, H2O_TOKEN_CACHE_CONTROL, "no-cache");
    const char *inm = ad_http_get(req, H2O_TOKEN_IF_NONE_MATCH);
    if (inm != NULL && (strcmp(inm, "*") == 0 || strstr(inm, etag) != NULL))
        return ad_http_empty(req, 304);
    return ad_http_send(r, 200, "application/json", ad_openapi_json, AD_EMBED_LEN(ad_openapi_json));
}
