/*
 * client.h - what the daemon's command-line clients share: `acceptd worker` (src/worker/) and `acceptd submit`
 * and `acceptd jobs` (src/cli/).
 *
 * A base URL and a bearer key, an easy handle for one request with the common headers and the answer read
 * into a capped buffer, header lines, the answer read as JSON, the job id check, and a one-line description
 * of a failed request. It lives in worker/ and not in
 * common/ because common/ does not link libcurl (the daemon's layers below webhook/ never talk HTTP out);
 * src/cli/ may include worker/ for this header only. It does not run transfers: each client drives its own
 * curl multi handle.
 */
#ifndef AD_CLIENT_H
#define AD_CLIENT_H

#include "common/util.h"

#include <curl/curl.h>
#include <jansson.h>
#include <stddef.h>

/* The type of problem documents, with the code after it ("https://acceptd.dev/problems/not-found"). */
#define AD_CLIENT_PROBLEM_BASE "https://acceptd.dev/problems/"

struct ad_client {
    char *base;        /* the URL without trailing slashes */
    char *auth;        /* the Authorization header line, or NULL; never printed */
    const char *agent; /* User-Agent, a literal */
};

/* Set c up for url (http:// or https://, checked by the caller) and key (NULL or "" for none). */
void ad_client_init(struct ad_client *c, const char *url, const char *key, const char *agent);
/* Free c's strings, wiping the key first. */
void ad_client_free(struct ad_client *c);

/* Append the headers every request carries (Accept unless h has one, no Expect, Authorization) to h; returns
 * the list. */
struct curl_slist *ad_client_headers(const struct ad_client *c, struct curl_slist *h);

/*
 * A new easy handle for GET base + path with headers h (kept by the caller, freed after the handle) and
 * timeout_ms (0: none) for the whole transfer. The answer's body is appended to resp, whose cap the caller
 * chose: past it the transfer fails (CURLE_WRITE_ERROR) with resp->toobig set. Errors are written to errbuf
 * (CURL_ERROR_SIZE bytes). The caller sets the method and body, adds it to a multi handle and cleans it up.
 * Aborts when libcurl cannot allocate one (the out-of-memory policy of util.h).
 */
CURL *ad_client_easy(const struct ad_client *c, const char *path, struct curl_slist *h, struct ad_buf *resp,
                     char *errbuf, long timeout_ms);

/*
 * "HTTP 409 stale-lease: <detail>" from a problem answer, "HTTP 502" from another, or the curl error when the
 * request got no answer; cleaned of control characters and cut to 400 bytes, for logs. The caller frees.
 */
char *ad_client_describe(CURLcode rc, const char *errbuf, long status, const struct ad_buf *resp);

/* The answer in resp as JSON (json_loadb's flags; err may be NULL), or NULL when it is not JSON. The caller
 * decrefs. */
json_t *ad_client_json(const struct ad_buf *resp, size_t flags, json_error_t *err);

/* Append the header line fmt... to h (curl_slist_append; the line is copied); returns the list. */
struct curl_slist *ad_client_header_add(struct curl_slist *h, const char *fmt, ...) AD_PRINTF(2, 3);

/* Whether a job id can go into a path as it is: 1 to 128 of A-Z a-z 0-9 _ - (job ids are URL-safe). */
int ad_client_id_ok(const char *id);

/* Shorten a valid UTF-8 string in place to at most max bytes without splitting a character. */
void ad_client_utf8_cut(char *s, size_t max);

#endif
