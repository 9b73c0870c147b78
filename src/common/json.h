/*
 * json.h - the one JSON writer: everything acceptd renders itself (a job, its events, webhook endpoints and
 * deliveries, lists and pages, problem documents) is appended to a struct ad_buf through these.
 *
 * A writer, not a model: the caller writes members in the order the wire contract gives, with no tree and no
 * parse, so a stored JSON text (a payload, a result, a rendered job) is spliced in as it is (ad_json_raw).
 * Punctuation and member keys are the caller's literals (AD_JSON_KEY); the writer does not check the shape of
 * the document. What it guarantees is that every value is JSON and UTF-8 whatever bytes it is given.
 *
 * Errors are sticky. Each function returns 0, or -1 when b's cap is hit, exactly as ad_buf_append; a refused
 * append adds nothing and sets b->toobig, which stays set until the buffer is freed. So a renderer may skip
 * the returns and ask ad_json_end(b) once at the end: later appends after a refusal may still land, but the
 * text is discarded as a whole. Reading JSON is jansson's, not this file's.
 */
#ifndef AD_JSON_H
#define AD_JSON_H

#include <stdint.h>
#include "common/util.h"

/* Append s as a JSON string (quoted, escaped); s may be NULL -> null. Bytes that are not well-formed UTF-8
 * become U+FFFD, one per maximal subpart, so the output is always UTF-8. */
int ad_json_str(struct ad_buf *b, const char *s);
/* ad_json_str's escaped text of s without the quotes, for a string written in pieces (a link with an id in it);
 * s must not be NULL. */
int ad_json_chars(struct ad_buf *b, const char *s);
/* The length of s's leading run of bytes that a JSON string holds as they are (printable ASCII but '"' and
 * '\'). When s[n] is '\0' nothing in s needs escaping, so a text written several times is scanned once. */
size_t ad_json_plain_len(const char *s);
/* Append the time ms (Unix milliseconds) as an RFC 3339 UTC string, or null when ms is 0 (never happened). */
int ad_json_time(struct ad_buf *b, int64_t ms);
/* Splice in text, a JSON value acceptd stored or rendered itself (jansson's compact dump, a rendered job), as it
 * is: the caller vouches that it is JSON. NULL -> null. */
int ad_json_raw(struct ad_buf *b, const char *text);
/* ad_json_raw of the len bytes at text (a rendered job body, which knows its length). */
static inline int ad_json_rawn(struct ad_buf *b, const char *text, size_t len)
{
    return ad_buf_append(b, text, len);
}

/* Append v in decimal. */
static inline int ad_json_int(struct ad_buf *b, int64_t v)
{
    return ad_buf_int(b, v);
}

/* Append true or false. */
static inline int ad_json_bool(struct ad_buf *b, int v)
{
    return v ? AD_BUF_LIT(b, "true") : AD_BUF_LIT(b, "false");
}

static inline int ad_json_null(struct ad_buf *b)
{
    return AD_BUF_LIT(b, "null");
}

/* Member keys, from a literal name: AD_JSON_OPEN starts an object with its first member ({"name":),
 * AD_JSON_KEY writes a later one (,"name":). One literal append each, as cheap as the hand-written text. */
#define AD_JSON_OPEN(b, name) AD_BUF_LIT((b), "{\"" name "\":")
#define AD_JSON_KEY(b, name) AD_BUF_LIT((b), ",\"" name "\":")

/* The outcome of a render into b: -1 when an append was refused since b was initialised (its cap was hit),
 * else 0. The one check a renderer that skips the returns makes, at its end. */
static inline int ad_json_end(const struct ad_buf *b)
{
    return b->toobig ? -1 : 0;
}

#endif
