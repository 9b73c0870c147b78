/*
 * client.c - the HTTP pieces `acceptd worker`, `acceptd submit` and `acceptd jobs` share (see client.h).
 *
 * Only setting up requests and reading their answers: no transfer loop, no retry policy (the worker's
 * reports and the CLI's polls retry differently), nothing about jobs.
 */
#include "worker/client.h"
#include "worker/worker.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define CONNECT_TIMEOUT_MS 5000

void ad_client_init(struct ad_client *c, const char *url, const char *key, const char *agent)
{
    size_t len = strlen(url);
    while (len > 0 && url[len - 1] == '/')
        len--;
    c->base = ad_strndup(url, len);
    c->auth = key != NULL && key[0] != '\0' ? ad_asprintf("Authorization: Bearer %s", key) : NULL;
    c->agent = agent;
}

void ad_client_free(struct ad_client *c)
{
    free(c->base);
    c->base = NULL;
    if (c->auth != NULL) {
        memset(c->auth, 0, strlen(c->auth));
        free(c->auth);
        c->auth = NULL;
    }
}

struct curl_slist *ad_client_headers(const struct ad_client *c, struct curl_slist *h)
{
    int accept = 0;
    for (const struct curl_slist *l = h; l != NULL; l = l->next)
        accept |= strncasecmp(l->data, "Accept:", 7) == 0;
    if (!accept)
        h = curl_slist_append(h, "Accept: application/json, application/problem+json");
    h = curl_slist_append(h, "Expect:");
    if (c->auth != NULL)
        h = curl_slist_append(h, c->auth);
    return h;
}

static size_t on_body(char *p, size_t size, size_t n, void *ud)
{
    struct ad_buf *b = ud;
    return ad_buf_append(b, p, size * n) == 0 ? size * n : 0;
}

CURL *ad_client_easy(const struct ad_client *c, const char *path, struct curl_slist *h, struct ad_buf *resp,
                     char *errbuf, long timeout_ms)
{
    CURL *e = curl_easy_init();
    if (e == NULL) {
        ad_error("out of memory (curl_easy_init)");
        abort();
    }
    errbuf[0] = '\0';
    char *url = ad_asprintf("%s%s", c->base, path);
    curl_easy_setopt(e, CURLOPT_URL, url);
    free(url); /* libcurl keeps its own copy */
    curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, resp);
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, errbuf);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    if (timeout_ms > 0)
        curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, timeout_ms);
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, (long)CONNECT_TIMEOUT_MS);
    curl_easy_setopt(e, CURLOPT_USERAGENT, c->agent);
    return e;
}

json_t *ad_client_json(const struct ad_buf *resp, size_t flags, json_error_t *err)
{
    return json_loadb(resp->data != NULL ? resp->data : "", resp->len, flags, err);
}

struct curl_slist *ad_client_header_add(struct curl_slist *h, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *line = NULL;
    if (vasprintf(&line, fmt, ap) < 0) {
        ad_error("out of memory (vasprintf)");
        abort();
    }
    va_end(ap);
    h = curl_slist_append(h, line);
    free(line);
    return h;
}

int ad_client_id_ok(const char *id)
{
    size_t n = strlen(id);
    if (n == 0 || n > 128)
        return 0;
    for (size_t i = 0; i < n; i++) {
        char c = id[i];
        if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-'))
            return 0;
    }
    return 1;
}

void ad_client_utf8_cut(char *s, size_t max)
{
    size_t len = strlen(s);
    if (len <= max)
        return;
    while (max > 0 && ((unsigned char)s[max] & 0xC0) == 0x80)
        max--;
    s[max] = '\0';
}

char *ad_client_describe(CURLcode rc, const char *errbuf, long status, const struct ad_buf *resp)
{
    if (rc != CURLE_OK && !(rc == CURLE_WRITE_ERROR && resp->toobig))
        return ad_strdup(errbuf[0] != '\0' ? errbuf : curl_easy_strerror(rc));
    if (resp->toobig)
        return ad_asprintf("HTTP %ld: the answer is larger than %zu bytes", status, resp->max);
    json_t *p = ad_client_json(resp, 0, NULL);
    const char *code = json_string_value(json_object_get(p, "code"));
    const char *detail = json_string_value(json_object_get(p, "detail"));
    char *raw = ad_asprintf("HTTP %ld%s%s%s%s", status, code != NULL ? " " : "", code != NULL ? code : "",
                            detail != NULL ? ": " : "", detail != NULL ? detail : "");
    json_decref(p);
    char *s = ad_worker_clean_cut(raw, strlen(raw), 400);
    free(raw);
    return s;
}
