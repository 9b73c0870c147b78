/*
 * download.c - a finished job's result artifact (docs/protocol.md, "Result artifacts") saved to a file, for
 * `acceptd jobs result ID -O FILE` and `acceptd submit TYPE --wait -O FILE`.
 *
 * The bytes of GET /v1/jobs/{id}/result go straight from libcurl's write callback to FILE.part, hashed on
 * the way, so an artifact of any size costs a few buffers of memory. FILE appears (a rename) only once the
 * SHA-256 of what came matches the job's `artifact.digest`; a mismatch removes FILE.part and is its own exit
 * status (AD_CLI_DIGEST), so a script can tell a corrupted transfer from a refusal. It does not resume a
 * broken download with Range (a rerun fetches it again), and it does not trust the answer's own Repr-Digest:
 * the digest checked is the one the job document carries.
 */
#include "cli/cli_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define DOWNLOAD_STALL_S 60 /* a download that moves no byte for this long has failed */

struct sink {
    struct ad_cli_req *r;
    int fd;
    struct ad_sha256_stream *sha;
    uint64_t got, max;
    int checked, is_body;
    int write_errno; /* a write to the file failed: errno */
    int toolong;     /* more bytes than the artifact's size came */
};

static size_t on_bytes(char *p, size_t size, size_t n, void *ud)
{
    struct sink *s = ud;
    size_t len = size * n;
    if (!s->checked) {
        long status = 0;
        curl_easy_getinfo(s->r->easy, CURLINFO_RESPONSE_CODE, &status);
        s->checked = 1;
        s->is_body = status == 200;
    }
    if (!s->is_body) /* a problem answer: kept for the report */
        return ad_buf_append(&s->r->resp, p, len) == 0 ? len : 0;
    if (len > s->max - s->got) {
        s->toolong = 1;
        return 0;
    }
    for (size_t off = 0; off < len;) {
        ssize_t w = write(s->fd, p + off, len - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            s->write_errno = w < 0 ? errno : EIO;
            return 0;
        }
        off += (size_t)w;
    }
    ad_sha256_update(s->sha, p, len);
    s->got += len;
    return len;
}

/* The artifact's path on the server: its href when it is a plain absolute path, else the documented one. */
static char *artifact_path(const char *id, json_t *artifact)
{
    const char *href = json_string_value(json_object_get(artifact, "href"));
    if (href != NULL && href[0] == '/' && href[1] != '/' && strlen(href) < 1024 &&
        strspn(href, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~/?=&%:") == strlen(href))
        return ad_strdup(href);
    return ad_asprintf("/v1/jobs/%s/result", id);
}

int ad_cli_save_artifact(struct ad_cli *c, const char *id, json_t *artifact, const char *file)
{
    uint8_t want[AD_SHA256_LEN], got[AD_SHA256_LEN];
    json_t *size = json_object_get(artifact, "size");
    const char *digest = json_string_value(json_object_get(artifact, "digest"));
    if (!json_is_integer(size) || json_integer_value(size) < 0 || ad_digest_sha256_parse(digest, want) != 0) {
        fprintf(stderr, "%s: job %s: the artifact has no size or no sha-256 digest to check the download against\n",
                c->prog, id);
        return AD_CLI_PROBLEM;
    }
    char *part = ad_asprintf("%s.part", file);
    int fd = open(part, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    if (fd < 0) {
        fprintf(stderr, "%s: cannot create %s: %s\n", c->prog, part, strerror(errno));
        free(part);
        return AD_CLI_FILE;
    }
    struct ad_cli_req r;
    struct sink s;
    memset(&s, 0, sizeof(s));
    s.r = &r;
    s.fd = fd;
    s.max = (uint64_t)json_integer_value(size);
    s.sha = ad_sha256_begin();
    char *path = artifact_path(id, artifact);
    ad_cli_req_init(c, &r, "GET", path, NULL, curl_slist_append(NULL, "Accept: */*"), 0);
    free(path);
    curl_easy_setopt(r.easy, CURLOPT_WRITEFUNCTION, on_bytes);
    curl_easy_setopt(r.easy, CURLOPT_WRITEDATA, &s);
    curl_easy_setopt(r.easy, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(r.easy, CURLOPT_LOW_SPEED_TIME, (long)DOWNLOAD_STALL_S);
    /* A job submitted with onComplete: redirect answers 303 to a signed URL of the same result. */
    curl_easy_setopt(r.easy, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(r.easy, CURLOPT_MAXREDIRS, 3L);
    curl_easy_setopt(r.easy, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
    /* --timeout bounds the wait for the job, not the transfer of its result. */
    int64_t deadline = c->deadline;
    c->deadline = 0;
    int rc = ad_cli_perform(c, &r);
    c->deadline = deadline;
    ad_sha256_end(s.sha, got);
    if (rc == 0 && s.write_errno != 0) {
        fprintf(stderr, "%s: cannot write %s: %s\n", c->prog, part, strerror(s.write_errno));
        rc = AD_CLI_FILE;
    } else if (rc == 0 && r.rc == CURLE_OK && r.status != 200) {
        rc = ad_cli_report(c, &r);
    } else if (rc == 0 &&
               (s.toolong || (r.rc == CURLE_OK && (s.got != s.max || memcmp(got, want, sizeof(got)) != 0)))) {
        char mine[AD_DIGEST_SHA256_CHARS + 1];
        ad_digest_sha256_format(got, mine);
        char *d = ad_cli_clean(digest, 200);
        if (s.toolong)
            fprintf(stderr,
                    "%s: job %s: the download is corrupt: more than the artifact's %llu bytes came; %s not written\n",
                    c->prog, id, (unsigned long long)s.max, file);
        else
            fprintf(stderr,
                    "%s: job %s: the download is corrupt: %llu bytes with digest %s, the artifact has %llu "
                    "bytes with digest %s; %s not written\n",
                    c->prog, id, (unsigned long long)s.got, mine, (unsigned long long)s.max, d, file);
        free(d);
        rc = AD_CLI_DIGEST;
    } else if (rc == 0 && r.rc != CURLE_OK) {
        rc = ad_cli_report(c, &r);
    }
    ad_cli_req_free(&r);
    if (rc == 0 && fsync(fd) != 0) {
        fprintf(stderr, "%s: cannot write %s: %s\n", c->prog, part, strerror(errno));
        rc = AD_CLI_FILE;
    }
    if (close(fd) != 0 && rc == 0) {
        fprintf(stderr, "%s: cannot write %s: %s\n", c->prog, part, strerror(errno));
        rc = AD_CLI_FILE;
    }
    if (rc == 0 && rename(part, file) != 0) {
        fprintf(stderr, "%s: cannot rename %s to %s: %s\n", c->prog, part, file, strerror(errno));
        rc = AD_CLI_FILE;
    }
    if (rc != 0)
        unlink(part);
    else
        fprintf(stderr, "%s: job %s: saved %llu bytes to %s (%s verified)\n", c->prog, id, (unsigned long long)s.got,
                file, "sha-256");
    free(part);
    return rc;
}

int ad_cli_save_json(struct ad_cli *c, json_t *v, const char *file)
{
    char *part = ad_asprintf("%s.part", file);
    FILE *f = fopen(part, "wbe");
    int rc = 0;
    if (f == NULL || json_dumpf(v, f, JSON_INDENT(2) | JSON_ENCODE_ANY) != 0 || fputc('\n', f) == EOF ||
        fflush(f) != 0 || fsync(fileno(f)) != 0)
        rc = AD_CLI_FILE;
    if (f != NULL && fclose(f) != 0)
        rc = AD_CLI_FILE;
    if (rc == 0 && rename(part, file) != 0)
        rc = AD_CLI_FILE;
    if (rc != 0) {
        fprintf(stderr, "%s: cannot write %s: %s\n", c->prog, file, strerror(errno));
        unlink(part);
    }
    free(part);
    return rc;
}

void ad_cli_print_artifact(struct ad_cli *c, const char *id, json_t *artifact)
{
    json_t *out = json_pack("{s:O}", "artifact", artifact);
    ad_cli_print_json(out);
    json_decref(out);
    fprintf(stderr, "%s: job %s has a result file; -O FILE saves it\n", c->prog, id);
}
