/*
 * api_artifacts.c - result artifacts: a file a worker uploads under its lease as the job's result, and the
 * answers that hand it out (docs/protocol.md "Result artifacts").
 *
 * Upload: PUT /v1/jobs/{id}/result in parts, each at most limits.maxUploadPartBytes, with the resumable-upload
 * headers Upload-Offset and Upload-Complete. Parts, not one streamed body: h2o 2.2 reads a request's whole body
 * before its handler runs, so a part is what is ever held in memory. A part is written, hashed and (the last one)
 * fsync'd on the artifact service's thread (core/artifacts.h: file I/O never stalls the loop), one part at a time,
 * in the order they came.
 * Completing the job with "artifact": true publishes the finished file (store/artifact.h).
 *
 * Download: GET and HEAD of /v1/jobs/{id}/result serve the file with a strong ETag (its SHA-256), Repr-Digest,
 * single ranges and If-None-Match / If-Range; a redirect goes to a signed URL. Where the bytes live is the store's
 * (ad_store_ops.artifact_*): files next to SQLite's database, rows in PostgreSQL that every node reads.
 */
#include "api/api_int.h"
#include "api/valet.h"
#include "common/timer.h"
#include "common/base64.h"
#include "core/artifacts.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define ART_CHUNK (256 * 1024) /* bytes read from the file per write to the client */

/* ---- upload ---- */

/*
 * A part passes through megabyte buffers (h2o's request body, the copy the thread writes from), freed once it is
 * answered. tcmalloc, the plain build's allocator (docs/operations.md), keeps freed spans for reuse and gives them
 * back to the system only slowly, so an upload would leave the daemon tens of megabytes larger: they are given back
 * once parts stop coming for a while. Not after each part: the next one would then fault every page of its buffers
 * in again, which cost more than half of an upload's time. Weak, so that builds without tcmalloc (ASan) link.
 */
extern void MallocExtension_ReleaseFreeMemory(void) __attribute__((weak));
static struct ad_timer release_timer;

static void release_memory(struct ad_timer *t)
{
    (void)t;
    if (MallocExtension_ReleaseFreeMemory != NULL)
        MallocExtension_ReleaseFreeMemory();
}

struct part_op {
    struct ad_op op;
    struct ad_pending *pend;
    struct ad_artifact_part part;
    char *job_id, *lease_id, *ctype;
    void *data;
    uint64_t offset; /* out */
    char *view;      /* out */
};

static ad_err part_apply(struct ad_op *op, struct ad_conn *c)
{
    struct part_op *x = (struct part_op *)op;
    return ad_hub.store->ops->artifact_write(c, &x->part, &x->offset, &x->view);
}

static void part_destroy(struct ad_op *op)
{
    struct part_op *x = (struct part_op *)op;
    free(x->job_id);
    free(x->lease_id);
    free(x->ctype);
    free(x->data);
    free(x->view);
    free(x);
}

static void part_done(struct ad_op *op)
{
    struct part_op *x = (struct part_op *)op;
    release_timer.cb = release_memory;
    ad_timer_arm(&release_timer, ad_mono_ms() + 200); /* once no part came for a while */
    struct ad_request *r = ad_api_write_take(x->pend);
    if (r != NULL) {
        h2o_req_t *req = r->req;
        char off[24];
        snprintf(off, sizeof(off), "%llu", (unsigned long long)x->offset);
        if (op->err == AD_E_OK || op->err == AD_E_UPLOAD_OFFSET)
            ad_http_header_str(req, "upload-offset", off);
        if (op->err == AD_E_UPLOAD_OFFSET)
            ad_http_problemf(req, op->err, "the upload under this lease has %llu bytes; send the part from there",
                             (unsigned long long)x->offset);
        else if (op->err == AD_E_DIGEST_MISMATCH)
            ad_http_problem(req, op->err,
                            x->part.last && x->part.has_repr_digest && !x->part.has_part_digest
                                ? "Repr-Digest is not the SHA-256 of the whole artifact; the upload was discarded"
                                : "a digest sent is not the SHA-256 of what was received; the part was not kept",
                            NULL);
        else if (op->err == AD_E_PAYLOAD_TOO_LARGE)
            ad_http_problemf(req, op->err, "a result artifact may have at most %zu bytes (limits.maxResultBytes)",
                             ad_hub.cfg->max_result_bytes);
        else if (op->err == AD_E_STORAGE_FULL)
            ad_http_problem(req, op->err, "the disk is full; the part was not kept, send it again later", NULL);
        else if (op->err != AD_E_OK)
            ad_http_problem(req, op->err, "the part could not be written", NULL);
        else if (x->view == NULL) {
            ad_http_header_str(req, "upload-complete", "?0");
            ad_http_empty(req, 204);
        } else {
            const char *d = strstr(x->view, "\"digest\":\"");
            if (d != NULL) {
                d += strlen("\"digest\":\"");
                ad_http_header_str(req, "repr-digest", h2o_strdup(&req->pool, d, strcspn(d, "\"")).base);
            }
            ad_http_header_str(req, "upload-complete", "?1");
            ad_http_json(r, 200, h2o_strdup(&req->pool, x->view, SIZE_MAX).base, strlen(x->view));
        }
    }
    ad_op_free(op);
}

/* A structured-field boolean (RFC 8941): ?1 or ?0; -1 otherwise. */
static int sf_bool(const char *v)
{
    if (v == NULL)
        return -1;
    return strcmp(v, "?1") == 0 ? 1 : strcmp(v, "?0") == 0 ? 0 : -1;
}

/* A sha-256 digest from a Content-Digest / Repr-Digest field ("sha-256=:<base64>:", among others); 1 when found,
 * 0 when the field has no sha-256 member, -1 when it is malformed. */
static int sha_digest(const char *v, uint8_t out[AD_SHA256_LEN])
{
    if (v == NULL)
        return 0;
    const char *p = strstr(v, AD_DIGEST_SHA256_PREFIX);
    if (p == NULL)
        return 0;
    char one[AD_DIGEST_SHA256_CHARS + 1];
    if (strnlen(p, AD_DIGEST_SHA256_CHARS) < AD_DIGEST_SHA256_CHARS)
        return -1;
    memcpy(one, p, AD_DIGEST_SHA256_CHARS);
    one[AD_DIGEST_SHA256_CHARS] = '\0';
    return ad_digest_sha256_parse(one, out) == 0 ? 1 : -1;
}

static const char *lease_of(struct ad_request *r)
{
    const char *l = ad_http_get_str(r->req, "lease-id");
    return l != NULL ? l : ad_http_query(r, "leaseId");
}

/* The job is there: write the part if the job runs under the request's lease. */
static int put_job_found(struct ad_request *r, ad_err err, struct ad_entry *e, void *arg)
{
    (void)arg;
    if (err != AD_E_OK)
        return ad_api_fail(r, err);
    const struct ad_job *j = e->job;
    const char *lease = lease_of(r);
    if (j->status != AD_RUNNING || j->lease_id == NULL || strcmp(j->lease_id, lease) != 0)
        return ad_http_problemf(r->req, AD_E_STALE_LEASE, "job %s is not running under lease %.64s", j->id, lease);
    h2o_req_t *req = r->req;
    struct part_op *x = ad_calloc(1, sizeof(*x));
    x->op.apply = part_apply;
    x->op.done = part_done;
    x->op.destroy = part_destroy;
    x->job_id = ad_strdup(j->id);
    x->lease_id = ad_strdup(lease);
    const char *ct = ad_http_get(req, H2O_TOKEN_CONTENT_TYPE);
    x->ctype = ad_strdup(ct != NULL && strlen(ct) < 256 ? ct : "application/octet-stream");
    x->data = ad_malloc(req->entity.len > 0 ? req->entity.len : 1);
    memcpy(x->data, req->entity.base, req->entity.len);
    struct ad_artifact_part *p = &x->part;
    p->job_id = x->job_id;
    p->lease_id = x->lease_id;
    p->ctype = x->ctype;
    p->data = x->data;
    p->len = req->entity.len;
    p->max_bytes = ad_hub.cfg->max_result_bytes;
    const char *off = ad_http_get_str(req, "upload-offset");
    p->fresh = off == NULL;
    if (off != NULL) {
        long long n;
        if (ad_parse_int(off, strlen(off), 0, INT64_MAX, &n) != 0) {
            ad_op_free(&x->op);
            return ad_http_problem(req, AD_E_INVALID_REQUEST, "Upload-Offset must be a non-negative integer", NULL);
        }
        p->offset = (uint64_t)n;
    }
    const char *complete = ad_http_get_str(req, "upload-complete");
    p->last = complete == NULL ? 1 : sf_bool(complete);
    int cd = sha_digest(ad_http_get_str(req, "content-digest"), p->part_sha);
    int rd = sha_digest(ad_http_get_str(req, "repr-digest"), p->repr_sha);
    if (p->last < 0 || cd < 0 || rd < 0) {
        ad_op_free(&x->op);
        return ad_http_problem(req, AD_E_INVALID_REQUEST,
                               p->last < 0 ? "Upload-Complete must be ?1 or ?0"
                                           : "a digest field must carry sha-256=:<base64 of 32 bytes>:",
                               NULL);
    }
    p->has_part_digest = cd == 1;
    p->has_repr_digest = rd == 1 && p->last;
    x->pend = ad_api_write_begin(r);
    ad_artifacts_submit(&x->op);
    return 0;
}

int ad_api_put_result(struct ad_request *r)
{
    const char *lease = lease_of(r);
    if (lease == NULL || *lease == '\0' || strlen(lease) > 64)
        return ad_http_problem(r->req, AD_E_INVALID_REQUEST, "send the job's lease id in Lease-Id", NULL);
    if (r->req->entity.len > ad_hub.cfg->max_upload_part_bytes)
        return ad_http_problemf(r->req, AD_E_PAYLOAD_TOO_LARGE,
                                "a part of an upload may have at most %zu bytes (limits.maxUploadPartBytes); send "
                                "the artifact in parts with Upload-Offset and Upload-Complete",
                                ad_hub.cfg->max_upload_part_bytes);
    return ad_api_lookup(r, r->id, put_job_found, NULL);
}

/* HEAD or GET of the result with Lease-Id: how far the upload under that lease got. */
struct progress_read {
    struct ad_api_read rd;
    char *job_id, *lease_id;
    uint64_t offset;
    int done;
};

static ad_err progress_apply(struct ad_op *op, struct ad_conn *c)
{
    struct progress_read *x = (struct progress_read *)op;
    return ad_hub.store->ops->artifact_progress(c, x->job_id, x->lease_id, &x->offset, &x->done);
}

static void progress_answer(struct ad_api_read *rd, struct ad_request *r)
{
    struct progress_read *x = (struct progress_read *)rd;
    /* No upload under the lease (none yet, or one discarded) answers as one at 0: send from the start. */
    if (r != NULL && rd->op.err != AD_E_OK && rd->op.err != AD_E_NOT_FOUND) {
        ad_api_fail(r, rd->op.err);
    } else if (r != NULL) {
        char n[24];
        snprintf(n, sizeof(n), "%llu", (unsigned long long)x->offset);
        ad_http_header_str(r->req, "upload-offset", n);
        ad_http_header_str(r->req, "upload-complete", x->done ? "?1" : "?0");
        ad_http_header(r->req, H2O_TOKEN_CACHE_CONTROL, "no-store");
        ad_http_empty(r->req, 204);
    }
    free(x->job_id);
    free(x->lease_id);
}

static int progress_found(struct ad_request *r, ad_err err, struct ad_entry *e, void *arg)
{
    (void)arg;
    if (err != AD_E_OK)
        return ad_api_fail(r, err);
    struct progress_read *x = ad_calloc(1, sizeof(*x));
    x->job_id = ad_strdup(e->job->id);
    x->lease_id = ad_strdup(lease_of(r));
    x->rd.op.apply = progress_apply;
    x->rd.answer = progress_answer;
    return ad_api_read(r, &x->rd);
}

int ad_api_upload_progress(struct ad_request *r)
{
    if ((r->roles & (AD_ROLE_WORKER | AD_ROLE_ADMIN)) == 0)
        return ad_http_problem(r->req, AD_E_FORBIDDEN, "only a worker key reads an upload's progress", NULL);
    return ad_api_lookup(r, r->id, progress_found, NULL);
}

/* A complete with "artifact": true: the view of the finished upload under its lease, then the report. */
struct complete_read {
    struct ad_api_read rd;
    struct ad_report_op *x;
    char *view;
};

static ad_err complete_apply(struct ad_op *op, struct ad_conn *c)
{
    struct complete_read *cr = (struct complete_read *)op;
    return ad_hub.store->ops->artifact_view(c, cr->x->id, cr->x->lease_id, &cr->view);
}

static void complete_answer(struct ad_api_read *rd, struct ad_request *r)
{
    struct complete_read *cr = (struct complete_read *)rd;
    struct ad_report_op *x = cr->x;
    ad_err err = rd->op.err;
    if (r != NULL && err == AD_E_OK) {
        x->artifact = ad_asprintf("%s %s", x->lease_id, cr->view);
        x->ctx = ad_api_write_begin(r);
        ad_writer_submit(&x->op);
        x = NULL;
    } else if (r != NULL && err == AD_E_NOT_FOUND) {
        ad_http_problem(r->req, AD_E_ARTIFACT_INCOMPLETE,
                        "no finished upload under this lease: PUT the result first, its last part with "
                        "Upload-Complete: ?1",
                        NULL);
    } else if (r != NULL) {
        ad_api_fail(r, err);
    }
    if (x != NULL)
        ad_op_free(&x->op);
    free(cr->view);
}

int ad_api_complete_artifact(struct ad_request *r, struct ad_report_op *x)
{
    struct complete_read *cr = ad_calloc(1, sizeof(*cr));
    cr->x = x;
    cr->rd.op.apply = complete_apply;
    cr->rd.answer = complete_answer;
    return ad_api_read(r, &cr->rd);
}

/* ---- download ---- */

/* An artifact being sent: a chunk is read (a store read, ad_api_read), sent, and the next read when h2o asks. */
struct art_gen {
    h2o_generator_t super;
    struct ad_request *r;
    char *job_id, *lease_id;
    uint64_t off, left;
    char *buf;
};

struct chunk_read {
    struct ad_api_read rd;
    struct art_gen *g; /* valid while the request is (answer's r not NULL) */
    char *job_id, *lease_id;
    uint64_t off;
    size_t len, n;
    char *buf; /* the generator's, lent for the read */
};

static void gen_free(void *p)
{
    struct art_gen *g = p;
    free(g->job_id);
    free(g->lease_id);
    free(g->buf);
    g->job_id = g->lease_id = g->buf = NULL;
}

static ad_err chunk_apply(struct ad_op *op, struct ad_conn *c)
{
    struct chunk_read *x = (struct chunk_read *)op;
    return ad_hub.store->ops->artifact_read(c, x->job_id, x->lease_id, x->off, x->buf, x->len, &x->n);
}

static void chunk_answer(struct ad_api_read *rd, struct ad_request *r)
{
    struct chunk_read *x = (struct chunk_read *)rd;
    if (r != NULL) {
        struct art_gen *g = x->g;
        if (rd->op.err != AD_E_OK || x->n == 0) {
            ad_warn("artifacts: reading job %s's artifact at %llu failed: %s", g->job_id, (unsigned long long)g->off,
                    rd->op.err != AD_E_OK ? ad_err_code(rd->op.err) : "it ends early");
            g->buf = x->buf;
            h2o_send(r->req, NULL, 0, H2O_SEND_STATE_ERROR);
        } else {
            g->buf = x->buf;
            g->off += x->n;
            g->left -= x->n;
            h2o_iovec_t v = h2o_iovec_init(g->buf, x->n);
            h2o_send(r->req, &v, 1, g->left == 0 ? H2O_SEND_STATE_FINAL : H2O_SEND_STATE_IN_PROGRESS);
        }
    } else {
        free(x->buf); /* the request went first: the buffer is the read's now */
    }
    free(x->job_id);
    free(x->lease_id);
}

static void gen_proceed(h2o_generator_t *self, h2o_req_t *req)
{
    struct art_gen *g = (struct art_gen *)self;
    struct chunk_read *x = ad_calloc(1, sizeof(*x));
    x->g = g;
    x->job_id = ad_strdup(g->job_id);
    x->lease_id = ad_strdup(g->lease_id);
    x->off = g->off;
    x->len = g->left < ART_CHUNK ? (size_t)g->left : ART_CHUNK;
    x->buf = g->buf; /* the read's while it runs: the request may go meanwhile, and its pool with it */
    g->buf = NULL;
    x->rd.op.apply = chunk_apply;
    x->rd.answer = chunk_answer;
    ad_api_read(g->r, &x->rd);
}

static void gen_stop(h2o_generator_t *self, h2o_req_t *req)
{
}

/* A single byte range of a file of size bytes: 1 with [*from, *to] when v is one, 0 when it should be ignored
 * (not bytes, several ranges, malformed: the whole is sent), -1 when it cannot be satisfied. */
static int parse_range(const char *v, uint64_t size, uint64_t *from, uint64_t *to)
{
    if (strncmp(v, "bytes=", 6) != 0 || strchr(v, ',') != NULL)
        return 0;
    v += 6;
    char *end;
    if (*v == '-') {
        errno = 0;
        unsigned long long n = strtoull(v + 1, &end, 10);
        if (end == v + 1 || *end != '\0' || errno != 0)
            return 0;
        if (n == 0 || size == 0)
            return -1;
        *from = n >= size ? 0 : size - n;
        *to = size - 1;
        return 1;
    }
    if (*v < '0' || *v > '9')
        return 0;
    errno = 0;
    unsigned long long a = strtoull(v, &end, 10);
    if (*end != '-' || errno != 0)
        return 0;
    const char *b = end + 1;
    unsigned long long z = size > 0 ? size - 1 : 0;
    if (*b != '\0') {
        z = strtoull(b, &end, 10);
        if (*end != '\0' || errno != 0 || z < a)
            return 0;
        if (size > 0 && z > size - 1)
            z = size - 1;
    }
    if (a >= size)
        return -1;
    *from = a;
    *to = z;
    return 1;
}

/* The entity tag of an artifact: its SHA-256 in hex, from the view's digest (base64). */
static int artifact_etag(const char *digest, char *out, size_t len)
{
    uint8_t md[AD_SHA256_LEN];
    if (len < 2 * AD_SHA256_LEN + 3 || ad_digest_sha256_parse(digest, md) != 0)
        return -1;
    out[0] = '"';
    ad_hex_encode(md, AD_SHA256_LEN, out + 1);
    memcpy(out + 1 + 2 * AD_SHA256_LEN, "\"", 2);
    return 0;
}

static int etag_in(const char *list, const char *etag)
{
    if (list == NULL)
        return 0;
    if (strcmp(list, "*") == 0)
        return 1;
    const char *p = strstr(list, etag);
    return p != NULL;
}

int ad_api_send_artifact(struct ad_request *r, const struct ad_job *j)
{
    h2o_req_t *req = r->req;
    const char *space = strchr(j->artifact, ' ');
    json_t *view = space != NULL ? json_loads(space + 1, 0, NULL) : NULL;
    const char *ctype = json_string_value(json_object_get(view, "contentType"));
    const char *digest = json_string_value(json_object_get(view, "digest"));
    json_int_t size = json_integer_value(json_object_get(view, "size"));
    char etag[80];
    if (ctype == NULL || digest == NULL || size < 0 || artifact_etag(digest, etag, sizeof(etag)) != 0) {
        json_decref(view);
        ad_error("artifacts: job %s names an artifact that cannot be read", j->id);
        return ad_http_problem(req, AD_E_INTERNAL, "the job's artifact cannot be read", NULL);
    }
    ad_http_header(req, H2O_TOKEN_ETAG, etag);
    ad_http_header_str(req, "repr-digest", digest);
    time_t finished = (time_t)(j->finished_at / 1000);
    struct tm gmt;
    char date[H2O_TIMESTR_RFC1123_LEN + 1];
    gmtime_r(&finished, &gmt);
    h2o_time2str_rfc1123(date, &gmt);
    ad_http_header(req, H2O_TOKEN_LAST_MODIFIED, date);
    ad_http_header(req, H2O_TOKEN_CACHE_CONTROL, "private, no-cache");
    ad_http_header(req, H2O_TOKEN_ACCEPT_RANGES, "bytes");
    if (etag_in(ad_http_get(req, H2O_TOKEN_IF_NONE_MATCH), etag)) {
        json_decref(view);
        return ad_http_empty(req, 304);
    }
    uint64_t from = 0, to = size > 0 ? (uint64_t)size - 1 : 0;
    int status = 200;
    const char *range = ad_http_get(req, H2O_TOKEN_RANGE);
    const char *if_range = ad_http_get_str(req, "if-range");
    if (range != NULL && (if_range == NULL || strcmp(if_range, etag) == 0)) {
        int pr = parse_range(range, (uint64_t)size, &from, &to);
        if (pr < 0) {
            json_decref(view);
            ad_http_headerf(req, H2O_TOKEN_CONTENT_RANGE, "bytes */%lld", (long long)size);
            return ad_http_problemf(req, AD_E_RANGE_NOT_SATISFIABLE, "the artifact has %lld bytes", (long long)size);
        }
        if (pr > 0) {
            status = 206;
            ad_http_headerf(req, H2O_TOKEN_CONTENT_RANGE, "bytes %llu-%llu/%lld", (unsigned long long)from,
                            (unsigned long long)to, (long long)size);
        }
    }
    req->res.status = status;
    req->res.reason = status == 206 ? "Partial Content" : "OK";
    ad_http_header(req, H2O_TOKEN_CONTENT_TYPE, ctype);
    json_decref(view);
    uint64_t len = size == 0 ? 0 : to - from + 1;
    req->res.content_length = (size_t)len;
    struct art_gen *g = h2o_mem_alloc_shared(&req->pool, sizeof(*g), gen_free);
    memset(g, 0, sizeof(*g));
    g->r = r;
    g->off = from;
    g->left = len;
    g->super.proceed = gen_proceed;
    g->super.stop = gen_stop;
    h2o_start_response(req, &g->super);
    if (len == 0 || h2o_memis(req->method.base, req->method.len, H2O_STRLIT("HEAD"))) {
        h2o_send(req, NULL, 0, H2O_SEND_STATE_FINAL);
        return 0;
    }
    g->job_id = ad_strdup(j->id);
    g->lease_id = ad_strndup(j->artifact, (size_t)(space - j->artifact));
    g->buf = ad_malloc(ART_CHUNK);
    gen_proceed(&g->super, req);
    return 0;
}

void ad_api_artifact_location(struct ad_request *r, const struct ad_job *j)
{
    int64_t exp = (ad_now_ms() + ad_hub.cfg->artifacts.url_lifetime_ms + 999) / 1000; /* at least the lifetime */
    char sig[AD_VALET_SIG_LEN + 1];
    ad_valet_sign(j->id, exp, sig);
    ad_http_headerf(r->req, H2O_TOKEN_LOCATION, "/v1/jobs/%s/result?exp=%lld&sig=%s", j->id, (long long)exp, sig);
}
