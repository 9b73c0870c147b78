/*
 * test_child.c - unit tests for the parts of src/worker/child.c that need no server: finding the command in
 * PATH, the environment commands get (without the key and the per-job variables), how a command's end is
 * described with its stderr tail, and one real child run through the pipes to its end.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "worker/child.c"

static void test_resolve_command(void **state)
{
    (void)state;
    setenv("PATH", "/nonexistent-acceptd:/bin:/usr/bin", 1);
    char *p = ad_worker_resolve_command("sh");
    assert_non_null(p);
    assert_true(strcmp(p, "/bin/sh") == 0 || strcmp(p, "/usr/bin/sh") == 0);
    free(p);
    p = ad_worker_resolve_command("/bin/sh");
    assert_string_equal(p, "/bin/sh");
    free(p);
    assert_null(ad_worker_resolve_command("acceptd-no-such-command"));
    assert_null(ad_worker_resolve_command("/etc")); /* a directory */
    assert_null(ad_worker_resolve_command("/etc/hostname-acceptd-none"));
}

static void test_env(void **state)
{
    (void)state;
    setenv("ACCEPTD_KEY", "secret", 1);
    setenv("ACCEPTD_JOB_ID", "stale", 1);
    setenv("ACCEPTD_TEST_KEEP", "1", 1);
    struct ad_worker w;
    memset(&w, 0, sizeof(w));
    ad_worker_env_init(&w);
    int keep = 0;
    for (size_t i = 0; i < w.nenv; i++) {
        assert_int_not_equal(strncmp(w.envp[i], "ACCEPTD_KEY=", 12), 0);
        assert_int_not_equal(strncmp(w.envp[i], "ACCEPTD_JOB_ID=", 15), 0);
        keep |= strcmp(w.envp[i], "ACCEPTD_TEST_KEEP=1") == 0;
    }
    assert_true(keep);
    assert_null(w.envp[w.nenv]);
    free(w.envp);
}

static void test_exit_detail(void **state)
{
    (void)state;
    struct ad_task t;
    memset(&t, 0, sizeof(t));
    t.wstatus = 3 << 8; /* exit status 3 */
    const char *tail = "\xa9rest of a line\nno such file\n \r\n";
    memcpy(t.tail, tail, strlen(tail));
    t.tail_len = strlen(tail);
    char *d = ad_worker_exit_detail(&t, "p: ");
    assert_string_equal(d, "p: exit status 3: rest of a line\nno such file");
    free(d);
    t.wstatus = 9; /* killed by SIGKILL */
    t.tail_len = 0;
    d = ad_worker_exit_detail(&t, "");
    assert_string_equal(d, "killed by signal 9 (Killed)");
    free(d);
}

/* A real command through spawn, the pipes and the reaper: its payload read, progress parsed, stdout the result,
 * stderr the tail. */
static void test_spawn_and_drain(void **state)
{
    (void)state;
    static char *argv[] = {"/bin/sh", "-c",
                           "read p; echo \"::progress 40 half\"; echo \"$p $ACCEPTD_JOB_ID\"; echo oops >&2; exit 2",
                           NULL};
    struct ad_worker w;
    memset(&w, 0, sizeof(w));
    w.exe = "/bin/sh";
    w.o.command = argv;
    w.o.grace_seconds = 1;
    ad_worker_env_init(&w);
    w.client.base = "http://127.0.0.1:1";
    struct ad_task t;
    memset(&t, 0, sizeof(t));
    t.w = &w;
    t.id = "job1";
    t.type = "t";
    t.dir = "/tmp";
    t.progress = -1;
    t.payload = "{\"x\":1}\n";
    t.payload_len = strlen(t.payload);
    t.fd_in = t.fd_out = t.fd_err = -1;
    w.tasks = &t;
    ad_worker_task_output_init(&t);
    assert_int_equal(ad_worker_task_spawn(&w, &t), 0);
    assert_true(t.pid > 0);
    for (int i = 0; i < 20000 && t.pid != 0; i++) { /* at most 20 s */
        ad_worker_task_io(&t);
        ad_worker_reap(&w);
        usleep(1000);
    }
    assert_int_equal(t.pid, 0);
    ad_worker_task_drain(&t);
    assert_true(WIFEXITED(t.wstatus));
    assert_int_equal(WEXITSTATUS(t.wstatus), 2);
    assert_int_equal(t.progress, 40);
    assert_string_equal(t.message, "half");
    assert_int_equal(t.result.len, strlen("{\"x\":1} job1\n"));
    assert_memory_equal(t.result.data, "{\"x\":1} job1\n", t.result.len);
    assert_int_equal(t.tail_len, 5);
    assert_memory_equal(t.tail, "oops\n", 5);
    assert_int_equal(t.fd_in, -1);
    assert_int_equal(t.fd_out, -1);
    assert_int_equal(t.fd_err, -1);
    ad_worker_task_output_free(&t);
    free(t.message);
    free(w.envp);
}

/* A command that exits while a process it started still holds its stdout: the pipe is closed at its exit
 * and the unterminated last line still counts. */
static void test_drain_with_leftover(void **state)
{
    (void)state;
    static char *argv[] = {"/bin/sh", "-c", "printf '::progress 7 tail'; sleep 30 & exit 0", NULL};
    struct ad_worker w;
    memset(&w, 0, sizeof(w));
    w.exe = "/bin/sh";
    w.o.command = argv;
    ad_worker_env_init(&w);
    w.client.base = "http://127.0.0.1:1";
    struct ad_task t;
    memset(&t, 0, sizeof(t));
    t.w = &w;
    t.id = "job2";
    t.type = "t";
    t.dir = "/tmp";
    t.progress = -1;
    t.payload = "{}\n";
    t.payload_len = 3;
    t.fd_in = t.fd_out = t.fd_err = -1;
    w.tasks = &t;
    ad_worker_task_output_init(&t);
    assert_int_equal(ad_worker_task_spawn(&w, &t), 0);
    pid_t group = t.pid;
    for (int i = 0; i < 20000 && t.pid != 0; i++) {
        ad_worker_task_io(&t);
        ad_worker_reap(&w);
        usleep(1000);
    }
    assert_int_equal(t.pid, 0);
    assert_true(t.fd_out >= 0); /* the sleep holds it */
    ad_worker_task_drain(&t);
    assert_int_equal(t.fd_out, -1);
    assert_int_equal(t.progress, 7);
    assert_string_equal(t.message, "tail");
    kill(-group, SIGKILL);
    ad_worker_task_output_free(&t);
    free(t.message);
    free(w.envp);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_resolve_command),     cmocka_unit_test(test_env),
        cmocka_unit_test(test_exit_detail),         cmocka_unit_test(test_spawn_and_drain),
        cmocka_unit_test(test_drain_with_leftover),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
