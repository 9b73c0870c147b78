/*
 * upload.c - the result file: the private directory a command may leave ACCEPTD_RESULT_FILE in, the file's
 * media type from its .type sidecar, and its resumable upload to PUT /v1/jobs/{id}/result
 * (docs/protocol.md, "Result artifacts").
 *
 * The file goes in parts under the job's lease, each read by libcurl straight from the file as the socket
 * takes it and hashed once, in order; a part whose answer was lost is resumed from the offset the server
 * names, a 413 makes the parts smaller, and once the last part is kept the server's size and digest are
 * checked against what was read before the job is completed. The lease is renewed meanwhile as while the
 * command ran. It never reads the file into memory, and it does not retry past the lease: a job whose
 * upload cannot finish in time is left to the server to requeue.
 */
#include "worker/worker_int.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define UPLOAD_PART_MIN ((uint64_t)64 * 1024) /* a generic 413 halves the parts down to this, then fails the job */
#define UPLOAD_STALL_S 60                     /* a part that moves no byte for this long has failed */
#define UPLOAD_RESUMES_MAX 5                  /* upload-offset-mismatch answers in a row before giving up */
#define RESULT_TYPE_MAX 255                   /* longest Content-Type read from the .type sidecar */

static int blank(char c)
{
    return c == ' ' || c == '\t' || c == '\r';
}

/* ---- the private directory ---- */

int ad_worker_result_dir(struct ad_task *t, char *err, size_t errlen)
{
    const char *tmp = getenv("TMPDIR");
    t->dir = ad_asprintf("%s/acceptd-job-XXXXXX", tmp != NULL && tmp[0] == '/' ? tmp : "/tmp");
    if (mkdtemp(t->dir) != NULL)
        return 0;
    snprintf(err, errlen, "cannot create a directory for the result file (%s): %s", t->dir, strerror(errno));
    free(t->dir);
    t->dir = NULL;
    return -1;
}

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)ftw;
    if ((flag == FTW_DP ? rmdir(path) : unlink(path)) != 0 && errno != ENOENT)
        ad_warn("worker: cannot remove %s: %s", path, strerror(errno));
    return 0;
}

void ad_worker_result_free(struct ad_task *t)
{
    free(t->up_type);
    t->up_type = NULL;
    if (t->dir != NULL) /* the result file and whatever else the command left there */
        nftw(t->dir, remove_entry, 8, FTW_DEPTH | FTW_PHYS);
    free(t->dir);
    t->dir = NULL;
}

/* ---- the upload ---- */

void ad_worker_upload_end(struct ad_worker *w, struct ad_task *t)
{
    ad_worker_call_free(w, t->up);
    t->up = NULL;
    ad_worker_close_fd(&t->up_fd);
    ad_sha256_abandon(t->up_sha);
    t->up_sha = NULL;
    t->uploading = 0;
}

/* libcurl asks for the next bytes of the part in flight: read them from the file where they are. */
static size_t upload_read(char *buf, size_t size, size_t n, void *ud)
{
    struct ad_task *t = ud;
    uint64_t left = t->part_len - t->part_pos;
    size_t want = (uint64_t)(size * n) < left ? size * n : (size_t)left;
    if (want == 0)
        return 0;
    uint64_t at = t->part_start + t->part_pos;
    ssize_t r;
    do
        r = pread(t->up_fd, buf, want, (off_t)at);
    while (r < 0 && errno == EINTR);
    if (r <= 0) {
        t->up_errno = r < 0 ? errno : ENODATA; /* 0: the file shrank under us */
        return CURL_READFUNC_ABORT;
    }
    /* Each byte is hashed once, in order; a part sent again (a retry, a rewind) is not hashed again. */
    if (at <= t->up_hashed && t->up_hashed < at + (uint64_t)r) {
        size_t skip = (size_t)(t->up_hashed - at);
        ad_sha256_update(t->up_sha, buf + skip, (size_t)r - skip);
        t->up_hashed = at + (uint64_t)r;
    }
    t->part_pos += (uint64_t)r;
    return (size_t)r;
}

/* libcurl rewinds a part it must send again on a new connection. */
static int upload_seek(void *ud, curl_off_t off, int origin)
{
    struct ad_task *t = ud;
    if (origin != SEEK_SET || off < 0 || (uint64_t)off > t->part_len)
        return CURL_SEEKFUNC_CANTSEEK;
    t->part_pos = (uint64_t)off;
    return CURL_SEEKFUNC_OK;
}

/* PUT the part of the file from t->up_off. */
static void upload_send(struct ad_worker *w, struct ad_task *t)
{
    struct ad_call *c = ad_calloc(1, sizeof(*c));
    c->kind = AD_CALL_UPLOAD;
    c->task = t;
    c->sent = ad_mono_ms();
    t->part_start = t->up_off;
    t->part_len = t->up_size - t->up_off < w->part_max ? t->up_size - t->up_off : w->part_max;
    t->part_pos = 0;
    t->up_errno = 0;
    ad_buf_init(&c->resp, AD_WORKER_RESPONSE_MAX);
    struct curl_slist *h = ad_client_header_add(NULL, "Content-Type: %s", t->up_type);
    h = ad_client_header_add(h, "Lease-Id: %s", t->lease_id);
    if (t->traceparent != NULL)
        h = ad_client_header_add(h, "traceparent: %s", t->traceparent);
    if (t->up_off > 0) /* absent: a fresh upload */
        h = ad_client_header_add(h, "Upload-Offset: %llu", (unsigned long long)t->up_off);
    h = curl_slist_append(h, t->part_start + t->part_len == t->up_size ? "Upload-Complete: ?1" : "Upload-Complete: ?0");
    c->headers = ad_client_headers(&w->client, h);
    char *path = ad_asprintf("/v1/jobs/%s/result", t->id);
    c->easy = ad_client_easy(&w->client, path, c->headers, &c->resp, c->errbuf, 0);
    free(path);
    curl_easy_setopt(c->easy, CURLOPT_UPLOAD, 1L);
    curl_easy_setopt(c->easy, CURLOPT_READFUNCTION, upload_read);
    curl_easy_setopt(c->easy, CURLOPT_READDATA, t);
    curl_easy_setopt(c->easy, CURLOPT_SEEKFUNCTION, upload_seek);
    curl_easy_setopt(c->easy, CURLOPT_SEEKDATA, t);
    curl_easy_setopt(c->easy, CURLOPT_INFILESIZE_LARGE, (curl_off_t)t->part_len);
    curl_easy_setopt(c->easy, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(c->easy, CURLOPT_LOW_SPEED_TIME, (long)UPLOAD_STALL_S);
    curl_easy_setopt(c->easy, CURLOPT_PRIVATE, c);
    curl_multi_add_handle(w->multi, c->easy);
    t->up = c;
}

/* The Content-Type of the result file: the first line of AD_WORKER_RESULT_NAME.type when the command wrote one, else
 * application/octet-stream. Returns it (the caller frees) or NULL with err set when the sidecar is unusable. */
static char *result_type(const struct ad_task *t, char *err, size_t errlen)
{
    char *path = ad_asprintf("%s/" AD_WORKER_RESULT_NAME ".type", t->dir);
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    free(path);
    if (fd < 0 && errno == ENOENT)
        return ad_strdup("application/octet-stream");
    char buf[RESULT_TYPE_MAX + 2];
    ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
    int e = errno;
    if (fd >= 0)
        close(fd);
    if (n < 0) {
        snprintf(err, errlen, "cannot read the result file's type (ACCEPTD_RESULT_FILE.type): %s", strerror(e));
        return NULL;
    }
    buf[n] = '\0';
    size_t len = strcspn(buf, "\r\n");
    while (len > 0 && blank(buf[len - 1]))
        len--;
    size_t start = 0;
    while (start < len && blank(buf[start]))
        start++;
    int ok = len > start && len - start <= RESULT_TYPE_MAX && memchr(buf + start, '/', len - start) != NULL;
    for (size_t i = start; ok && i < len; i++)
        ok = buf[i] >= 0x20 && buf[i] < 0x7f;
    if (!ok) {
        snprintf(err, errlen,
                 "the result file's type (ACCEPTD_RESULT_FILE.type) is not a media type such as text/csv on one "
                 "line of at most %d printable ASCII characters",
                 RESULT_TYPE_MAX);
        return NULL;
    }
    return ad_strndup(buf + start, len - start);
}

static void upload_begin(struct ad_worker *w, struct ad_task *t, int fd)
{
    struct stat sb;
    char err[256];
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        ad_worker_task_fail(w, t, "result-file-unreadable", "Result file unreadable",
                            "ACCEPTD_RESULT_FILE is not a regular file", 0);
        return;
    }
    char *type = result_type(t, err, sizeof(err));
    if (type == NULL) {
        close(fd);
        ad_worker_task_fail(w, t, "result-file-unreadable", "Result file unreadable", err, 0);
        return;
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0)
        fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    free(t->up_type);
    t->up_type = type;
    t->up_fd = fd;
    t->up_size = (uint64_t)sb.st_size;
    t->up_off = 0;
    t->up_hashed = 0;
    t->up_sha = ad_sha256_begin();
    t->up_resumes = 0;
    t->up_backoff = AD_WORKER_BACKOFF_MIN_MS;
    t->up_due = 0;
    t->uploading = 1;
    ad_info("job %s: uploading %llu bytes (%s) in parts of up to %llu bytes", t->id, (unsigned long long)t->up_size,
            t->up_type, (unsigned long long)w->part_max);
}

int ad_worker_result_file(struct ad_worker *w, struct ad_task *t)
{
    char *file = t->dir != NULL ? ad_asprintf("%s/" AD_WORKER_RESULT_NAME, t->dir) : NULL;
    int fd = file != NULL ? open(file, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK) : -1;
    int open_errno = file != NULL ? errno : ENOENT;
    free(file);
    if (fd >= 0) {
        ad_info("job %s: command succeeded after %lld ms; uploading its result file", t->id,
                (long long)(ad_mono_ms() - t->started));
        upload_begin(w, t, fd);
        return 1;
    }
    if (open_errno != ENOENT) {
        char *d = ad_asprintf("cannot open the result file ACCEPTD_RESULT_FILE: %s", strerror(open_errno));
        ad_worker_task_fail(w, t, "result-file-unreadable", "Result file unreadable", d, 0);
        free(d);
        return 1;
    }
    return 0;
}

/* The last part was kept: check the server's size and digest against what was read, then complete. */
static void upload_finished(struct ad_worker *w, struct ad_task *t, struct ad_call *c)
{
    json_t *root = ad_client_json(&c->resp, 0, NULL);
    json_t *size = json_object_get(root, "size");
    const char *digest = json_string_value(json_object_get(root, "digest"));
    uint8_t mine[AD_SHA256_LEN];
    ad_sha256_end(t->up_sha, mine);
    t->up_sha = NULL;
    char want[AD_DIGEST_SHA256_CHARS + 1];
    ad_digest_sha256_format(mine, want);
    int same = t->up_hashed == t->up_size && json_is_integer(size) &&
               (uint64_t)json_integer_value(size) == t->up_size && digest != NULL && strcmp(digest, want) == 0;
    json_decref(root);
    ad_worker_upload_end(w, t);
    if (!same) {
        char *d = ad_asprintf("the server's copy of the result file is not what was read (%llu bytes, %s); was "
                              "the file changed during the upload?",
                              (unsigned long long)t->up_size, want);
        ad_worker_task_fail(w, t, "result-upload-mismatch", "Result upload mismatch", d, 1);
        free(d);
        return;
    }
    ad_info("job %s: result file uploaded (%llu bytes, %s); completing", t->id, (unsigned long long)t->up_size, want);
    json_t *body = json_object();
    json_object_set_new(body, "artifact", json_true());
    ad_worker_task_report(w, t, AD_CALL_COMPLETE, body);
}

/* Upload-Offset of an answer, or -1 when absent or not a number. */
static long long answer_offset(struct ad_call *c)
{
    struct curl_header *h;
    long long n;
    if (curl_easy_header(c->easy, "Upload-Offset", 0, CURLH_HEADER, -1, &h) != CURLHE_OK ||
        ad_parse_int(h->value, strlen(h->value), 0, INT64_MAX, &n) != 0)
        return -1;
    return n;
}

/*
 * The part size to try after a 413 to a part of len bytes, or 0 when smaller parts would not help. The daemon
 * names its cap ("at most N bytes (limits.maxUploadPartBytes)"); a 413 about the whole artifact names
 * limits.maxResultBytes; any other 413 (one from in front of the daemon's handler, whose limit is not said)
 * halves the part, down to UPLOAD_PART_MIN.
 */
static uint64_t smaller_part(const struct ad_call *c, uint64_t len)
{
    json_t *p = ad_client_json(&c->resp, 0, NULL);
    const char *d = json_string_value(json_object_get(p, "detail"));
    const char *at = d != NULL && strstr(d, "maxUploadPartBytes") != NULL ? strstr(d, "at most ") : NULL;
    long long n = 0;
    if (at != NULL) {
        at += strlen("at most ");
        if (ad_parse_int(at, strspn(at, "0123456789"), 1, INT64_MAX, &n) != 0)
            n = 0;
    } else if ((d == NULL || strstr(d, "maxResultBytes") == NULL) && len / 2 >= UPLOAD_PART_MIN) {
        n = (long long)(len / 2);
    }
    json_decref(p);
    return (uint64_t)n < len ? (uint64_t)n : 0;
}

void ad_worker_upload_done(struct ad_worker *w, struct ad_task *t, struct ad_call *c, CURLcode rc, long status)
{
    int64_t now = ad_mono_ms();
    int last = t->part_start + t->part_len == t->up_size;
    if (rc == CURLE_OK && (status == 200 || status == 204)) {
        long long off = answer_offset(c);
        t->up_resumes = 0;
        t->up_backoff = AD_WORKER_BACKOFF_MIN_MS;
        if (last) {
            upload_finished(w, t, c);
        } else {
            t->up_off = off >= 0 && (uint64_t)off <= t->up_size ? (uint64_t)off : t->part_start + t->part_len;
            t->up_due = now;
        }
        return;
    }
    char *why = ad_client_describe(rc, c->errbuf, status, &c->resp);
    long long off = status == 409 ? answer_offset(c) : -1;
    json_t *p = off >= 0 ? ad_client_json(&c->resp, 0, NULL) : NULL;
    const char *code = json_string_value(json_object_get(p, "code"));
    int mismatch = code != NULL && strcmp(code, "upload-offset-mismatch") == 0;
    json_decref(p);
    if (rc == CURLE_OK && mismatch && (uint64_t)off <= t->up_size && ++t->up_resumes <= UPLOAD_RESUMES_MAX) {
        /* The server has a different number of bytes than we thought (a part whose answer was lost): go on
         * from where it is. */
        ad_warn("job %s: the server has %lld bytes of the result file; resuming from there", t->id, off);
        t->up_off = (uint64_t)off;
        t->up_due = now;
    } else if (t->up_errno != 0) {
        char *d = ad_asprintf("cannot read the result file at byte %llu: %s",
                              (unsigned long long)(t->part_start + t->part_pos), strerror(t->up_errno));
        ad_worker_upload_end(w, t);
        ad_worker_task_fail(w, t, "result-file-unreadable", "Result file unreadable", d, 0);
        free(d);
    } else if (ad_worker_transient(rc, status)) {
        if (now + t->up_backoff < t->lease_until) {
            ad_warn("job %s: upload of the result file failed (%s); retrying", t->id, why);
            t->up_due = now + ad_worker_backoff(&t->up_backoff);
        } else {
            ad_error("job %s: giving up on the upload (%s): the lease has run out, the server will requeue the job",
                     t->id, why);
            ad_worker_upload_end(w, t);
            t->done = 1;
        }
    } else if (rc == CURLE_OK && status == 413 && smaller_part(c, t->part_len) > 0) {
        w->part_max = smaller_part(c, t->part_len);
        ad_warn("job %s: a part of %llu bytes was too large (%s); sending parts of %llu bytes", t->id,
                (unsigned long long)t->part_len, why, (unsigned long long)w->part_max);
        t->up_due = now;
    } else if ((status == 409 && !mismatch) || status == 404 || status == 410) {
        ad_warn("job %s: upload refused (%s): the job is no longer this worker's", t->id, why);
        ad_worker_upload_end(w, t);
        t->done = 1;
    } else {
        /* The file itself was refused (413 too large, a 400, or offsets that do not converge). */
        char *d = ad_asprintf("the server refused the command's result file: %s", why);
        ad_worker_upload_end(w, t);
        ad_worker_task_fail(w, t, "result-rejected", "Result rejected", d, 0);
        free(d);
    }
    free(why);
}

/* A task whose command is over and whose result file is on its way: the lease is renewed as while the command
 * ran, a lost lease or a cancel ends the upload, and the next part goes when the last one was kept. */
void ad_worker_upload_tick(struct ad_worker *w, struct ad_task *t, int64_t now, int64_t *next)
{
    if (t->why == AD_END_LOST) {
        ad_warn("job %s: upload dropped: the lease is no longer this worker's", t->id);
        ad_worker_upload_end(w, t);
        t->done = 1;
        return;
    }
    if (t->why == AD_END_CANCEL) {
        ad_info("job %s: upload stopped after a cancel request; acknowledging", t->id);
        ad_worker_upload_end(w, t);
        ad_worker_task_report(w, t, AD_CALL_CANCEL, json_object());
        return;
    }
    ad_worker_heartbeat_tick(w, t, now, next);
    if (t->up != NULL)
        return;
    if (now >= t->up_due)
        upload_send(w, t);
    else if (t->up_due < *next)
        *next = t->up_due;
}
