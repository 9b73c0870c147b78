/*
 * api_page.c - page tokens: the cursor of a paged list, opaque to the client.
 *
 * A token is base64url of "<kind>:<cursor>": the kind names the list it pages ("c1" the jobs, "o1" the
 * operations, "d1" a webhook's deliveries; the digit is the format's version), so that a token of one list is
 * refused by another rather than read as a position in it, and the cursor is the positive integer the store
 * pages by. Nothing is signed: a token a client makes up names a position it could have paged to anyway.
 */
#include "api/api_int.h"

#include <stdio.h>
#include <string.h>

void ad_api_page_token(const char *kind, int64_t cursor, char out[AD_API_PAGE_TOKEN_MAX])
{
    char raw[32];
    int n = snprintf(raw, sizeof(raw), "%.8s:%lld", kind, (long long)cursor);
    ad_b64url_encode((uint8_t *)raw, (size_t)n, out);
}

int ad_api_page_token_parse(const char *token, const char *kind, int64_t *cursor)
{
    size_t klen = strlen(kind), len = strlen(token);
    uint8_t raw[32];
    long n = len < 40 ? ad_b64url_decode(token, len, raw) : -1;
    long long v;
    if (n < (long)klen + 1 || memcmp(raw, kind, klen) != 0 || raw[klen] != ':' ||
        ad_parse_int((char *)raw + klen + 1, (size_t)n - klen - 1, 1, INT64_MAX, &v) != 0)
        return -1;
    *cursor = v;
    return 0;
}

int ad_api_page_token_read(struct ad_request *r, const char *kind, int64_t *cursor)
{
    const char *token = ad_http_query(r, "pageToken");
    if (token == NULL)
        return 0;
    if (ad_api_page_token_parse(token, kind, cursor) != 0) {
        ad_http_problem(r->req, AD_E_INVALID_REQUEST, "pageToken is not one this server issued", NULL);
        return -1;
    }
    return 0;
}
