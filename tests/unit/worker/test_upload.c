/*
 * test_upload.c - unit tests for the pure parts of src/worker/upload.c: the part size after a 413 (the
 * daemon's named cap, the whole-artifact limit, a generic 413 halving down to the floor) and the result
 * file's media type from its .type sidecar, and the private directory's removal with what is in it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <sys/stat.h>

#include "tmpdir.h"
#include "worker/upload.c"

/* smaller_part() for a 413 whose body is text, after a part of len bytes. */
static uint64_t after_413(const char *text, uint64_t len)
{
    struct ad_call c;
    memset(&c, 0, sizeof(c));
    ad_buf_init(&c.resp, 4096);
    if (text != NULL)
        ad_buf_append(&c.resp, text, strlen(text));
    uint64_t n = smaller_part(&c, len);
    ad_buf_free(&c.resp);
    return n;
}

static void test_smaller_part(void **state)
{
    (void)state;
    const uint64_t mib4 = 4 * 1024 * 1024;
    /* The daemon names its cap. */
    assert_int_equal(
        after_413("{\"detail\":\"a part may be at most 1048576 bytes (limits.maxUploadPartBytes)\"}", mib4), 1048576);
    /* A cap no smaller than the part would not help. */
    assert_int_equal(
        after_413("{\"detail\":\"a part may be at most 8388608 bytes (limits.maxUploadPartBytes)\"}", mib4), 0);
    /* The whole artifact is too large: smaller parts do not help. */
    assert_int_equal(after_413("{\"detail\":\"a result may be at most 10 bytes (limits.maxResultBytes)\"}", mib4), 0);
    /* A 413 from something in front of the daemon: halve, down to UPLOAD_PART_MIN. */
    assert_int_equal(after_413("<html>too large</html>", mib4), mib4 / 2);
    assert_int_equal(after_413(NULL, 2 * UPLOAD_PART_MIN), UPLOAD_PART_MIN);
    assert_int_equal(after_413(NULL, 2 * UPLOAD_PART_MIN - 1), 0);
}

static void write_file(const char *dir, const char *name, const char *text)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void test_result_type(void **state)
{
    (void)state;
    char dir[256], err[512];
    assert_int_equal(tmpdir_make(dir, sizeof(dir), "upload"), 0);
    struct ad_task t;
    memset(&t, 0, sizeof(t));
    t.dir = dir;
    char *type = result_type(&t, err, sizeof(err));
    assert_string_equal(type, "application/octet-stream"); /* no sidecar */
    free(type);
    write_file(dir, "result.type", "  text/csv; charset=utf-8 \r\nignored\n");
    type = result_type(&t, err, sizeof(err));
    assert_string_equal(type, "text/csv; charset=utf-8");
    free(type);
    static const char *const bad[] = {"csv\n", "\n", "text/\x01csv\n"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        write_file(dir, "result.type", bad[i]);
        err[0] = '\0';
        assert_null(result_type(&t, err, sizeof(err)));
        assert_non_null(strstr(err, "not a media type"));
    }
    char longer[RESULT_TYPE_MAX + 8];
    memset(longer, 'a', sizeof(longer) - 1);
    longer[1] = '/';
    longer[sizeof(longer) - 1] = '\0';
    write_file(dir, "result.type", longer);
    assert_null(result_type(&t, err, sizeof(err)));
    tmpdir_remove(dir);
}

static void test_result_dir(void **state)
{
    (void)state;
    char dir[256], err[512];
    assert_int_equal(tmpdir_make(dir, sizeof(dir), "upload"), 0);
    setenv("TMPDIR", dir, 1);
    struct ad_task t;
    memset(&t, 0, sizeof(t));
    assert_int_equal(ad_worker_result_dir(&t, err, sizeof(err)), 0);
    assert_non_null(t.dir);
    assert_int_equal(strncmp(t.dir, dir, strlen(dir)), 0);
    char sub[600];
    snprintf(sub, sizeof(sub), "%s/left", t.dir);
    assert_int_equal(mkdir(sub, 0700), 0);
    write_file(sub, "behind", "x");
    write_file(t.dir, "result", "x");
    char *made = ad_strdup(t.dir);
    ad_worker_result_free(&t); /* removes it with everything in it */
    assert_null(t.dir);
    struct stat sb;
    assert_int_equal(stat(made, &sb), -1);
    free(made);
    setenv("TMPDIR", "/nonexistent-acceptd-dir", 1);
    assert_int_equal(ad_worker_result_dir(&t, err, sizeof(err)), -1);
    assert_null(t.dir);
    assert_non_null(strstr(err, "cannot create a directory for the result file (/nonexistent-acceptd-dir/"));
    unsetenv("TMPDIR");
    tmpdir_remove(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_smaller_part),
        cmocka_unit_test(test_result_type),
        cmocka_unit_test(test_result_dir),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
