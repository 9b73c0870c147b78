/*
 * artifact.c - result artifacts (artifact.h): the state and view every backend shares, and the files backend:
 * parts appended and hashed as they come, the finished file fsync'd with its view, the collector of files no job
 * names.
 *
 * The running SHA-256 is kept in <lease>.state after every part, so an upload resumes where it stopped even
 * across a restart, without reading back what it already received. A part's bytes reach the disk before the
 * state that counts them: after a crash the state never names bytes the file lost (the upload would go on past
 * a hole, and the finished digest would be that of bytes the file does not hold). The low-level SHA256_CTX is used
 * because it is a plain struct that can be saved that way (OpenSSL 3 marks it deprecated, not removed).
 */
#define OPENSSL_SUPPRESS_DEPRECATED
#include "store/artifact.h"
#include "common/json.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <openssl/sha.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define ART_STATE_MAGIC 0x61637464617274UL /* "acdart" */
#define ART_MAX_LEASES 64                  /* lease files per job directory the collector looks at */

_Static_assert(sizeof(SHA256_CTX) <= sizeof(((struct ad_artifact_state *)0)->sha), "a SHA256_CTX fits the state");

static char root[4096];

void ad_artifact_state_init(struct ad_artifact_state *st, const char *ctype)
{
    memset(st, 0, sizeof(*st));
    st->magic = ART_STATE_MAGIC;
    SHA256_Init((SHA256_CTX *)st->sha);
    snprintf(st->ctype, sizeof(st->ctype), "%s", ctype);
}

int ad_artifact_state_valid(const struct ad_artifact_state *st)
{
    return st->magic == ART_STATE_MAGIC;
}

void ad_artifact_state_update(struct ad_artifact_state *st, const void *data, size_t len)
{
    SHA256_Update((SHA256_CTX *)st->sha, data, len);
    st->offset += len;
}

void ad_artifact_state_final(struct ad_artifact_state *st, uint8_t md[AD_SHA256_LEN])
{
    SHA256_Final(md, (SHA256_CTX *)st->sha);
}

char *ad_artifact_render_view(const char *job_id, uint64_t size, const char *ctype, const uint8_t md[AD_SHA256_LEN])
{
    char b64[64];
    ad_b64_encode(md, AD_SHA256_LEN, b64); /* RFC 9530 digests are sf-binary: base64 */
    struct ad_buf b;
    ad_buf_init(&b, 1024);
    ad_buf_printf(&b, "{\"size\":%llu,\"contentType\":", (unsigned long long)size);
    ad_json_str(&b, ctype);
    ad_buf_printf(&b, ",\"digest\":\"sha-256=:%s:\",\"href\":\"/v1/jobs/%s/result\"}", b64, job_id);
    char *view = ad_strndup(b.data, b.len);
    ad_buf_free(&b);
    return view;
}

ad_err ad_artifact_check_part(const struct ad_artifact_part *p)
{
    if (!p->has_part_digest)
        return AD_E_OK;
    uint8_t md[AD_SHA256_LEN];
    ad_sha256(p->data, p->len, md);
    return memcmp(md, p->part_sha, sizeof(md)) == 0 ? AD_E_OK : AD_E_DIGEST_MISMATCH;
}

int ad_artifact_kept(const struct ad_job *j, const char *lease_id)
{
    if (j == NULL || j->tombstoned)
        return 0;
    if (j->status == AD_RUNNING && j->lease_id != NULL && strcmp(j->lease_id, lease_id) == 0)
        return 1;
    size_t n = strlen(lease_id);
    return j->artifact != NULL && strncmp(j->artifact, lease_id, n) == 0 && j->artifact[n] == ' ';
}

int ad_artifact_init(const char *data_dir, char *err, size_t errlen)
{
    if ((size_t)snprintf(root, sizeof(root), "%s/artifacts", data_dir) >= sizeof(root)) {
        snprintf(err, errlen, "data directory path too long");
        return -1;
    }
    if (mkdir(root, 0700) != 0 && errno != EEXIST) {
        snprintf(err, errlen, "create %s: %s", root, strerror(errno));
        return -1;
    }
    return 0;
}

/* <root>/<job>[/<lease><suffix>] into out; -1 when it does not fit. Ids are [A-Za-z0-9_-] (the router's). */
static int art_path(char *out, size_t len, const char *job, const char *lease, const char *suffix)
{
    int n = lease != NULL ? snprintf(out, len, "%s/%s/%s%s", root, job, lease, suffix)
                          : snprintf(out, len, "%s/%s", root, job);
    return n < 0 || (size_t)n >= len ? -1 : 0;
}

/* A failed file operation's error; what is not the disk filling up is logged, as nothing else says why. */
#define errno_err(e) errno_err_at((e), __LINE__)
static ad_err errno_err_at(int e, int line)
{
    if (e == ENOSPC || e == EDQUOT)
        return AD_E_STORAGE_FULL;
    ad_error("artifacts: a file operation failed (artifact.c:%d): %s", line, strerror(e));
    return AD_E_INTERNAL;
}

/* Write all of len bytes at off. */
static int pwrite_all(int fd, const void *data, size_t len, uint64_t off)
{
    const char *p = data;
    while (len > 0) {
        ssize_t n = pwrite(fd, p, len, (off_t)off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        p += n;
        len -= (size_t)n;
        off += (uint64_t)n;
    }
    return 0;
}

/* fsync a directory, so that a rename or a new entry in it is durable. */
static int sync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY);
    if (fd < 0)
        return -1;
    int rc = fsync(fd);
    close(fd);
    return rc;
}

static int state_load(const char *job, const char *lease, struct ad_artifact_state *st)
{
    char path[4200];
    if (art_path(path, sizeof(path), job, lease, ".state") != 0)
        return -1;
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return -1;
    ssize_t n = pread(fd, st, sizeof(*st), 0);
    close(fd);
    if (n != (ssize_t)sizeof(*st) || !ad_artifact_state_valid(st))
        return -1;
    /* A state ahead of the bytes (a file system that lost the part's file or its end in a crash) names no
     * upload: going on from it would leave a hole. */
    struct stat sb;
    return art_path(path, sizeof(path), job, lease, ".part") == 0 && stat(path, &sb) == 0 &&
                   (uint64_t)sb.st_size >= st->offset
               ? 0
               : -1;
}

/* Replace the upload's state whole: written beside it and renamed over it, so a reader (HEAD on the loop thread)
 * sees the old state or the new one, never a mix. It is not flushed: a crash of the host may leave the old state,
 * or none, and the upload then resumes from further back, which is safe (the bytes already on disk are written
 * again); what must never reach the disk is a state ahead of the bytes, hence the part's flush before. */
static int state_save(const char *job, const char *lease, const struct ad_artifact_state *st)
{
    char path[4200], tmp[4200];
    if (art_path(path, sizeof(path), job, lease, ".state") != 0 ||
        art_path(tmp, sizeof(tmp), job, lease, ".state.tmp") != 0)
        return -1;
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0)
        return -1;
    int rc = pwrite_all(fd, st, sizeof(*st), 0);
    int e = errno;
    close(fd);
    if (rc == 0 && rename(tmp, path) != 0) {
        e = errno;
        rc = -1;
    }
    errno = e;
    return rc;
}

/* Remove every file of the upload under lease (those that exist). */
static void art_drop(const char *job, const char *lease)
{
    static const char *const suffixes[] = {".part", ".state", ".state.tmp", "", ".meta"};
    char path[4200];
    for (size_t i = 0; i < sizeof(suffixes) / sizeof(suffixes[0]); i++)
        if (art_path(path, sizeof(path), job, lease, suffixes[i]) == 0)
            unlink(path);
}

/* The finished upload: the file fsync'd under its final name, then its view, then the directory. */
static ad_err art_finish(const char *job, const char *lease, int fd, struct ad_artifact_state *st,
                         const struct ad_artifact_part *p, char **view)
{
    uint8_t md[AD_SHA256_LEN];
    ad_artifact_state_final(st, md);
    if (p->has_repr_digest && memcmp(md, p->repr_sha, sizeof(md)) != 0) {
        art_drop(job, lease);
        return AD_E_DIGEST_MISMATCH;
    }
    if (ftruncate(fd, (off_t)st->offset) != 0 || fsync(fd) != 0)
        return errno_err(errno);
    char part[4200], done[4200], meta[4200], dir[4200];
    if (art_path(part, sizeof(part), job, lease, ".part") != 0 || art_path(done, sizeof(done), job, lease, "") != 0 ||
        art_path(meta, sizeof(meta), job, lease, ".meta") != 0 || art_path(dir, sizeof(dir), job, NULL, NULL) != 0)
        return AD_E_INTERNAL;
    char *v = ad_artifact_render_view(job, st->offset, st->ctype, md);
    int fd2 = open(meta, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    int rc = fd2 < 0 || pwrite_all(fd2, v, strlen(v), 0) != 0 || fsync(fd2) != 0 ? -1 : 0;
    int e = errno;
    if (fd2 >= 0)
        close(fd2);
    if (rc != 0 || rename(part, done) != 0 || sync_dir(dir) != 0) {
        free(v);
        return errno_err(rc != 0 ? e : errno);
    }
    char state[4200];
    if (art_path(state, sizeof(state), job, lease, ".state") == 0)
        unlink(state);
    *view = v;
    return AD_E_OK;
}

ad_err ad_artifact_write(const struct ad_artifact_part *p, uint64_t *offset, char **view)
{
    *view = NULL;
    char dir[4200], part[4200];
    if (art_path(dir, sizeof(dir), p->job_id, NULL, NULL) != 0 ||
        art_path(part, sizeof(part), p->job_id, p->lease_id, ".part") != 0)
        return AD_E_INTERNAL;
    ad_err err = ad_artifact_check_part(p);
    if (err != AD_E_OK)
        return err;
    struct ad_artifact_state st;
    int fresh = p->fresh;
    if (!fresh && state_load(p->job_id, p->lease_id, &st) != 0) {
        *offset = 0;
        if (p->offset != 0)
            return AD_E_UPLOAD_OFFSET; /* none in progress */
        fresh = 1;                     /* offset 0 with nothing received: the start */
    }
    if (fresh) {
        art_drop(p->job_id, p->lease_id);
        ad_artifact_state_init(&st, p->ctype);
        if (mkdir(dir, 0700) != 0 && errno != EEXIST)
            return errno_err(errno);
    } else if (st.offset != p->offset) {
        *offset = st.offset;
        return AD_E_UPLOAD_OFFSET;
    }
    if (st.offset + p->len > p->max_bytes)
        return AD_E_PAYLOAD_TOO_LARGE;
    int fd = open(part, O_WRONLY | O_CREAT, 0600);
    if (fd < 0)
        return errno_err(errno);
    if (pwrite_all(fd, p->data, p->len, st.offset) != 0) {
        int e = errno;
        if (ftruncate(fd, (off_t)st.offset) != 0) { /* undo what part of it was written */
        }
        close(fd);
        return errno_err(e);
    }
    ad_artifact_state_update(&st, p->data, p->len);
    if (p->last)
        err = art_finish(p->job_id, p->lease_id, fd, &st, p, view);
    else if (fdatasync(fd) != 0 || state_save(p->job_id, p->lease_id, &st) != 0) {
        err = errno_err(errno);
        st.offset -= p->len; /* the state still says where it was: the part is sent again */
        if (ftruncate(fd, (off_t)st.offset) != 0) {
        }
    }
    close(fd);
    *offset = st.offset;
    return err;
}

ad_err ad_artifact_progress(const char *job_id, const char *lease_id, uint64_t *offset, int *done)
{
    char path[4200];
    struct stat sb;
    if (art_path(path, sizeof(path), job_id, lease_id, "") == 0 && stat(path, &sb) == 0) {
        *offset = (uint64_t)sb.st_size;
        *done = 1;
        return AD_E_OK;
    }
    struct ad_artifact_state st;
    if (state_load(job_id, lease_id, &st) != 0)
        return AD_E_NOT_FOUND;
    *offset = st.offset;
    *done = 0;
    return AD_E_OK;
}

ad_err ad_artifact_view(const char *job_id, const char *lease_id, char **view)
{
    *view = NULL;
    char path[4200];
    if (art_path(path, sizeof(path), job_id, lease_id, ".meta") != 0)
        return AD_E_NOT_FOUND;
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return errno == ENOENT ? AD_E_NOT_FOUND : AD_E_INTERNAL;
    char buf[1024];
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0 || n == (ssize_t)sizeof(buf) - 1)
        return AD_E_INTERNAL;
    *view = ad_strndup(buf, (size_t)n);
    return AD_E_OK;
}

ad_err ad_artifact_read(const char *job_id, const char *lease_id, uint64_t off, void *buf, size_t len, size_t *n)
{
    *n = 0;
    char path[4200];
    if (art_path(path, sizeof(path), job_id, lease_id, "") != 0)
        return AD_E_NOT_FOUND;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT ? AD_E_NOT_FOUND : AD_E_INTERNAL;
    ssize_t got;
    while ((got = pread(fd, buf, len, (off_t)off)) < 0 && errno == EINTR)
        ;
    close(fd);
    if (got < 0)
        return AD_E_INTERNAL;
    *n = (size_t)got;
    return AD_E_OK;
}

/* The lease id a file of the job directory belongs to (its name up to the first dot), into out. */
static int lease_of(const char *name, char *out, size_t len)
{
    size_t n = strcspn(name, ".");
    if (n == 0 || n >= len)
        return -1;
    memcpy(out, name, n);
    out[n] = '\0';
    return 0;
}

/* Collect one job directory. */
static int gc_job(const char *job, ad_artifact_keep_fn keep, void *arg)
{
    char dir[4200];
    if (art_path(dir, sizeof(dir), job, NULL, NULL) != 0)
        return 0;
    DIR *d = opendir(dir);
    if (d == NULL)
        return 0;
    char *leases[ART_MAX_LEASES];
    size_t n = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL && n < ART_MAX_LEASES) {
        char lease[128];
        if (de->d_name[0] == '.' || lease_of(de->d_name, lease, sizeof(lease)) != 0)
            continue;
        size_t i = 0;
        while (i < n && strcmp(leases[i], lease) != 0)
            i++;
        if (i == n)
            leases[n++] = ad_strdup(lease);
    }
    closedir(d);
    int kept[ART_MAX_LEASES] = {0};
    int unsure = keep(arg, job, leases, n, kept) != 0;
    int removed = 0, left = 0;
    for (size_t i = 0; i < n; i++) {
        if (kept[i] || unsure)
            left++;
        else {
            art_drop(job, leases[i]);
            removed++;
        }
        free(leases[i]);
    }
    if (left == 0)
        rmdir(dir); /* fails, harmlessly, if a new upload put a file there meanwhile */
    return removed;
}

int ad_artifact_gc(ad_artifact_keep_fn keep, void *arg)
{
    DIR *d = opendir(root);
    if (d == NULL)
        return 0;
    int removed = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL)
        if (de->d_name[0] != '.')
            removed += gc_job(de->d_name, keep, arg);
    closedir(d);
    return removed;
}
