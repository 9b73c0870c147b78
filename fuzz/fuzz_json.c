/*
 * fuzz_json.c - libFuzzer target: the JSON acceptd writes itself (the writer, src/common/json.c, and the job
 * rendered with it, src/job/job.c) stays JSON, and UTF-8 (RFC 8259 §8.1), whatever the text it carries. The
 * input, split at 0x01 bytes, fills the text fields a client or a worker can set (type, message,
 * resultLocation; a fourth piece, when there is one, replaces the id) and the status, progress and times; the
 * job is rendered and the result must parse with jansson, which refuses text that is not UTF-8. A text that is
 * UTF-8 must come back exactly; one that is not (a header or a query value can carry any byte) must come back
 * with U+FFFD in it. The whole input, up to its first NUL, also goes through ad_json_str alone, and through
 * ad_json_chars, which must write the same text without the quotes.
 */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "job/job.h"
#include "common/json.h"
#include "common/util.h"

static void check(int ok)
{
    if (!ok)
        abort();
}

/* The next 0x01-separated piece of [*p, end) as a NUL-terminated copy; NULL when it holds a NUL (a C string
 * cannot). *valid says whether it is UTF-8. */
static char *piece(const uint8_t **p, const uint8_t *end, int *bad, int *valid)
{
    const uint8_t *start = *p, *q = memchr(start, 1, (size_t)(end - start));
    if (q == NULL)
        q = end;
    *p = q < end ? q + 1 : end;
    size_t n = (size_t)(q - start);
    if (memchr(start, 0, n) != NULL) {
        *bad = 1;
        return NULL;
    }
    json_t *probe = json_stringn((const char *)start, n);
    *valid = probe != NULL;
    json_decref(probe);
    return ad_strndup((const char *)start, n);
}

/* The member key of doc reads back as want when want is UTF-8, else as a string with U+FFFD in it. */
static void expect_str(json_t *doc, const char *key, const char *want, int valid)
{
    json_t *v = json_object_get(doc, key);
    if (want == NULL)
        check(v == NULL || json_is_null(v));
    else if (valid)
        check(json_is_string(v) && strcmp(json_string_value(v), want) == 0);
    else
        check(json_is_string(v) && strstr(json_string_value(v), "\xef\xbf\xbd") != NULL);
}

/* s alone through ad_json_str: one JSON string, s itself when s is UTF-8. */
static void check_str(const uint8_t *data, size_t size)
{
    const uint8_t *nul = memchr(data, 0, size);
    size_t n = nul != NULL ? (size_t)(nul - data) : size;
    char *s = ad_strndup((const char *)data, n);
    json_t *probe = json_stringn(s, n);
    struct ad_buf b;
    ad_buf_init(&b, SIZE_MAX);
    check(ad_json_str(&b, s) == 0);
    json_t *doc = json_loadb(b.data, b.len, JSON_DECODE_ANY, NULL);
    check(json_is_string(doc));
    check(probe == NULL ? strstr(json_string_value(doc), "\xef\xbf\xbd") != NULL
                        : strcmp(json_string_value(doc), s) == 0);
    /* Nothing grows by more than 6 bytes a byte (\u00XX; U+FFFD is 3 for at least 1). */
    check(b.len <= 2 + 6 * n);
    /* The same text, unquoted, from ad_json_chars; and ad_json_plain_len stops where the writer's work starts. */
    struct ad_buf c;
    ad_buf_init(&c, SIZE_MAX);
    check(ad_json_chars(&c, s) == 0);
    check(c.len + 2 == b.len && memcmp(c.data, b.data + 1, c.len) == 0);
    size_t plain = ad_json_plain_len(s);
    check(plain <= n && memcmp(b.data + 1, s, plain) == 0);
    check(plain == n ? c.len == n : c.len > plain);
    ad_buf_free(&c);
    json_decref(doc);
    json_decref(probe);
    ad_buf_free(&b);
    free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    check_str(data, size);
    if (size < 3)
        return 0;
    const uint8_t *p = data + 3, *end = data + size;
    int bad = 0, valid_type = 0, valid_message = 0, valid_location = 0;
    struct ad_job *j = ad_job_new();
    ad_job_set(&j->id, "job_-P7jjGIpFs70zG6iPmvqW0123");
    j->type = piece(&p, end, &bad, &valid_type);
    j->message = piece(&p, end, &bad, &valid_message);
    j->result_location = piece(&p, end, &bad, &valid_location);
    int valid_id = 1;
    char *id = p < end ? piece(&p, end, &bad, &valid_id) : NULL;
    if (id != NULL && id[0] != '\0')
        ad_job_set(&j->id, id);
    free(id);
    if (!bad && j->type != NULL) {
        j->status = (enum ad_status)(data[0] % AD_STATUS__COUNT);
        j->progress = data[1] % 102 - 1;
        j->created_at = (int64_t)data[2] * 86400000 * 365;
        ad_job_set(&j->payload, "{\"n\":1}");
        ad_job_set(&j->result, "[1]");
        ad_job_set(&j->error, "{\"status\":500}");
        struct ad_buf b;
        ad_buf_init(&b, SIZE_MAX);
        check(ad_job_render(j, &b) == 0);
        json_error_t err;
        json_t *doc = json_loadb(b.data, b.len, 0, &err);
        check(doc != NULL);
        expect_str(doc, "id", j->id, valid_id);
        expect_str(doc, "type", j->type, valid_type);
        /* The links carry the id as the member does. */
        json_t *id_doc = json_object_get(doc, "id");
        const char *self = json_string_value(json_object_get(json_object_get(doc, "links"), "self"));
        check(self != NULL && strncmp(self, "/v1/jobs/", 9) == 0 && strcmp(self + 9, json_string_value(id_doc)) == 0);
        expect_str(doc, "message", j->message, valid_message);
        if (json_object_get(doc, "resultLocation") != NULL)
            expect_str(doc, "resultLocation", j->result_location, valid_location);
        json_decref(doc);
        ad_buf_free(&b);
    }
    ad_job_free(j);
    return 0;
}
