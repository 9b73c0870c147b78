/*
 * test_artifact.c - unit tests for src/store/artifact.c, the files backend of result artifacts: an upload in
 * parts ends as a file holding exactly the bytes sent, with their digest; a part replaces the upload's state
 * whole, so a reader that opened the state before it still reads a consistent state (the HEAD on the loop
 * thread reads it while the artifact thread writes the next part); a state ahead of the bytes on disk names no
 * upload; and a dropped upload leaves no file.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/util.h"
#include "store/artifact.h"
#include "store/store.h"
#include "tmpdir.h"

#define JOB "job_artifacttest"
#define LEASE "lease_artifacttest"

struct fixture {
    char dir[64];
};

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof(*f));
    char err[256];
    if (tmpdir_make(f->dir, sizeof(f->dir), "artifact") != 0 || ad_artifact_init(f->dir, err, sizeof(err)) != 0)
        return -1;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    tmpdir_remove(f->dir);
    free(f);
    return 0;
}

/* Send part [off, off + len) of data; the status and, through *offset, the bytes received after it. */
static ad_err put(const char *data, uint64_t off, size_t len, int last, uint64_t *offset, char **view)
{
    struct ad_artifact_part p = {
        .job_id = JOB,
        .lease_id = LEASE,
        .fresh = off == 0,
        .offset = off,
        .ctype = "text/plain",
        .data = data + off,
        .len = len,
        .last = last,
        .max_bytes = 1 << 20,
    };
    char *v = NULL;
    ad_err e = ad_artifact_write(&p, offset, &v);
    if (view != NULL)
        *view = v;
    else
        free(v);
    return e;
}

static void upload_path(const struct fixture *f, const char *suffix, char *out, size_t len)
{
    snprintf(out, len, "%s/artifacts/%s/%s%s", f->dir, JOB, LEASE, suffix);
}

static void assert_no_file(const struct fixture *f, const char *suffix)
{
    char path[256];
    upload_path(f, suffix, path, sizeof(path));
    assert_int_equal(access(path, F_OK), -1);
}

/* The offset an already open state file holds. */
static uint64_t offset_in(int fd)
{
    struct ad_artifact_state st;
    assert_int_equal(pread(fd, &st, sizeof(st), 0), (ssize_t)sizeof(st));
    assert_true(ad_artifact_state_valid(&st));
    return st.offset;
}

static void test_parts_make_the_file_and_its_digest(void **state)
{
    const struct fixture *f = *state;
    const char data[] = "the result of a long job, sent in three parts";
    size_t n = sizeof(data) - 1;
    uint64_t off = 0;
    assert_int_equal(put(data, 0, 10, 0, &off, NULL), AD_E_OK);
    assert_int_equal(off, 10);
    /* A part that does not start where the upload is: refused, with where it is. */
    assert_int_equal(put(data, 5, 10, 0, &off, NULL), AD_E_UPLOAD_OFFSET);
    assert_int_equal(off, 10);
    assert_int_equal(put(data, 10, 20, 0, &off, NULL), AD_E_OK);
    uint64_t progress = 0;
    int done = 1;
    assert_int_equal(ad_artifact_progress(JOB, LEASE, &progress, &done), AD_E_OK);
    assert_int_equal(progress, 30);
    assert_int_equal(done, 0);
    char *view = NULL;
    assert_int_equal(put(data, 30, n - 30, 1, &off, &view), AD_E_OK);
    assert_int_equal(off, n);
    assert_non_null(view);

    uint8_t md[32];
    ad_sha256(data, n, md);
    char *expect = ad_artifact_render_view(JOB, n, "text/plain", md);
    assert_string_equal(view, expect);
    free(expect);
    free(view);

    char buf[128];
    size_t got = 0;
    assert_int_equal(ad_artifact_read(JOB, LEASE, 0, buf, sizeof(buf), &got), AD_E_OK);
    assert_int_equal(got, n);
    assert_memory_equal(buf, data, n);
    assert_int_equal(ad_artifact_progress(JOB, LEASE, &progress, &done), AD_E_OK);
    assert_int_equal(progress, n);
    assert_int_equal(done, 1);

    /* Only the finished file and its view are left. */
    assert_no_file(f, ".state");
    assert_no_file(f, ".state.tmp");
}

/* A reader that opened the state before a part was written still reads the state it opened, whole: the part
 * replaced the file instead of writing over it. Written in place, that reader would see the new offset (and,
 * caught half-way, a mix of the two states). */
static void test_a_part_replaces_the_state_whole(void **state)
{
    const struct fixture *f = *state;
    const char data[] = "0123456789abcdefghij";
    uint64_t off = 0;
    assert_int_equal(put(data, 0, 8, 0, &off, NULL), AD_E_OK);
    char path[256];
    upload_path(f, ".state", path, sizeof(path));
    int before = open(path, O_RDONLY);
    assert_true(before >= 0);
    assert_int_equal(offset_in(before), 8);

    assert_int_equal(put(data, 8, 8, 0, &off, NULL), AD_E_OK);
    assert_int_equal(offset_in(before), 8);
    close(before);
    int after = open(path, O_RDONLY);
    assert_true(after >= 0);
    assert_int_equal(offset_in(after), 16);
    close(after);
    assert_no_file(f, ".state.tmp");
}

/* A state that counts bytes the part's file does not hold (as a crash of the host can leave it on some file
 * systems) names no upload: the upload starts again from 0 instead of going on past a hole. */
static void test_a_state_ahead_of_the_bytes_is_no_upload(void **state)
{
    const struct fixture *f = *state;
    const char data[] = "0123456789abcdefghij";
    uint64_t off = 0;
    assert_int_equal(put(data, 0, 8, 0, &off, NULL), AD_E_OK);
    assert_int_equal(put(data, 8, 8, 0, &off, NULL), AD_E_OK);
    char path[256];
    upload_path(f, ".part", path, sizeof(path));
    assert_int_equal(truncate(path, 8), 0);

    uint64_t progress = 99;
    int done = 1;
    assert_int_equal(ad_artifact_progress(JOB, LEASE, &progress, &done), AD_E_NOT_FOUND);
    assert_int_equal(put(data, 16, 4, 1, &off, NULL), AD_E_UPLOAD_OFFSET);
    assert_int_equal(off, 0);
}

/* Collect everything: the collector is told no lease is kept. */
static int keep_none(void *arg, const char *job_id, char *const *leases, size_t n, int *keep)
{
    (void)arg, (void)job_id, (void)leases;
    memset(keep, 0, n * sizeof(*keep));
    return 0;
}

/* An upload left half-way, its state's temporary file included, is removed whole by the collector. */
static void test_collector_removes_an_unfinished_upload(void **state)
{
    const struct fixture *f = *state;
    const char data[] = "abcdefgh";
    uint64_t off = 0;
    assert_int_equal(put(data, 0, 4, 0, &off, NULL), AD_E_OK);
    char path[256];
    upload_path(f, ".state.tmp", path, sizeof(path)); /* as a crash between the write and the rename leaves it */
    FILE *fp = fopen(path, "w");
    assert_non_null(fp);
    fclose(fp);
    assert_int_equal(ad_artifact_gc(keep_none, NULL), 1);
    snprintf(path, sizeof(path), "%s/artifacts/%s", f->dir, JOB);
    assert_null(opendir(path));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_parts_make_the_file_and_its_digest, setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_part_replaces_the_state_whole, setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_state_ahead_of_the_bytes_is_no_upload, setup, teardown),
        cmocka_unit_test_setup_teardown(test_collector_removes_an_unfinished_upload, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
