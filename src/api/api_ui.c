/*
 * api_ui.c - the dashboard's files at /ui/: index.html, app.js and style.css from ui/, built into the binary.
 *
 * The pages hold no data and need no key: every datum the dashboard shows comes from the API, called by the page
 * with the key the operator typed (kept in sessionStorage, sent as Authorization; docs/dashboard.md). So what
 * matters here is that the files cannot be turned against the operator: a strict Content-Security-Policy (no
 * inline script or style, no eval, nothing from another origin, no framing), nosniff and no referrer. Each file
 * has a strong ETag, its content's hash, and is revalidated on every load (no-cache), so an upgraded daemon
 * never meets a browser holding the old script.
 */
#include "api/api_int.h"
#include "common/embed.h"

#include <stdio.h>
#include <string.h>

AD_EMBED(ad_ui_index, "ui/index.html");
AD_EMBED(ad_ui_app, "ui/app.js");
AD_EMBED(ad_ui_style, "ui/style.css");

#define AD_UI_CSP                                                                                                      \
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "              \
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

struct ui_file {
    const char *path; /* as requested */
    const char *type;
    const char *data, *end;
    char etag[20]; /* "16 hex digits", made on first use */
};

static struct ui_file files[] = {
    {"/ui/", "text/html; charset=utf-8", ad_ui_index, ad_ui_index_end, ""},
    {"/ui/index.html", "text/html; charset=utf-8", ad_ui_index, ad_ui_index_end, ""},
    {"/ui/app.js", "text/javascript; charset=utf-8", ad_ui_app, ad_ui_app_end, ""},
    {"/ui/style.css", "text/css; charset=utf-8", ad_ui_style, ad_ui_style_end, ""},
};

/* 64-bit FNV-1a: a validator, not a defence (the files are ours). */
static void make_etag(struct ui_file *f)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    for (const char *p = f->data; p < f->end; p++)
        h = (h ^ (unsigned char)*p) * 0x100000001b3ULL;
    snprintf(f->etag, sizeof(f->etag), "\"%016llx\"", (unsigned long long)h);
}

/* If-None-Match (RFC 9110 §13.1.2, weak comparison): "*" or a listed tag equal to etag, W/ or not. */
static int none_match(const char *inm, const char *etag)
{
    size_t elen = strlen(etag);
    const char *p = inm;
    while (*p != '\0') {
        while (*p == ' ' || *p == '\t' || *p == ',')
            p++;
        if (*p == '*')
            return 1;
        if (p[0] == 'W' && p[1] == '/')
            p += 2;
        size_t n = strcspn(p, ", \t");
        if (n == elen && memcmp(p, etag, n) == 0)
            return 1;
        p += n;
    }
    return 0;
}

int ad_api_ui(struct ad_request *r)
{
    h2o_req_t *req = r->req;
    if (h2o_memis(r->path.base, r->path.len, H2O_STRLIT("/ui"))) {
        ad_http_header(req, H2O_TOKEN_LOCATION, "/ui/");
        return ad_http_empty(req, 308);
    }
    struct ui_file *f = NULL;
    for (size_t i = 0; i < sizeof(files) / sizeof(files[0]) && f == NULL; i++)
        if (h2o_memis(r->path.base, r->path.len, files[i].path, strlen(files[i].path)))
            f = &files[i];
    if (f == NULL)
        return ad_http_problem(req, AD_E_NOT_FOUND, NULL, NULL);
    if (f->etag[0] == '\0')
        make_etag(f);
    ad_http_header_str(req, "content-security-policy", AD_UI_CSP);
    ad_http_header_str(req, "x-content-type-options", "nosniff");
    ad_http_header_str(req, "referrer-policy", "no-referrer");
    ad_http_header_str(req, "cross-origin-opener-policy", "same-origin");
    ad_http_header_str(req, "x-frame-options", "DENY");
    ad_http_header(req, H2O_TOKEN_CACHE_CONTROL, "no-cache");
    ad_http_header(req, H2O_TOKEN_ETAG, f->etag);
    const char *inm = ad_http_get(req, H2O_TOKEN_IF_NONE_MATCH);
    if (inm != NULL && none_match(inm, f->etag))
        return ad_http_empty(req, 304);
    return ad_http_send(r, 200, f->type, f->data, (size_t)(f->end - f->data));
}
