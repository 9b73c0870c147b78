/*
 * test_signals.c - unit tests for src/common/signals.c: stop signals counted and waking the pipe, SIGCHLD
 * waking it only when asked, an inherited ignored SIGINT kept so on request, SIGPIPE ignored. The tests that
 * change how SIGCHLD or SIGINT are handled run in a child process, so that the others see the defaults.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/signals.h"

/* Whether the pipe has a byte within ms. */
static int readable(int ms)
{
    struct pollfd p = {.fd = ad_signals_fd(), .events = POLLIN};
    return poll(&p, 1, ms) == 1 && (p.revents & POLLIN);
}

/* Run fn in a child process; its exit status is the number of the first check that failed (0: none). */
static void in_child(int (*fn)(void))
{
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0)
        _exit(fn());
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
}

static void test_stops_counted_and_wake(void **state)
{
    (void)state;
    assert_int_equal(ad_signals_fd(), -1);
    assert_int_equal(ad_signals_open(0), 0);
    assert_true(ad_signals_fd() >= 0);
    unsigned s0 = ad_signals_stops();
    assert_false(readable(0));
    raise(SIGTERM);
    assert_int_equal(ad_signals_stops(), s0 + 1);
    assert_true(readable(0));
    ad_signals_drain();
    assert_false(readable(0));
    raise(SIGINT);
    assert_int_equal(ad_signals_stops(), s0 + 2);
    assert_true(readable(0));
    struct sigaction old;
    assert_int_equal(sigaction(SIGPIPE, NULL, &old), 0);
    assert_true(old.sa_handler == SIG_IGN);
    ad_signals_close();
    assert_int_equal(ad_signals_fd(), -1);
    raise(SIGTERM); /* counted still, written nowhere */
    assert_int_equal(ad_signals_stops(), s0 + 3);
}

/* A child that exits at once, reaped. */
static void child_exits(void)
{
    pid_t pid = fork();
    if (pid == 0)
        _exit(0);
    waitpid(pid, NULL, 0);
}

static int child_wakes(void)
{
    unsigned s0 = ad_signals_stops(); /* what the tests before counted, inherited */
    if (ad_signals_open(0) != 0)
        return 1;
    child_exits();
    if (readable(0))
        return 2; /* without the flag SIGCHLD keeps its default */
    ad_signals_close();
    if (ad_signals_open(AD_SIGNALS_CHILD) != 0)
        return 3;
    child_exits();
    if (!readable(10000))
        return 4;
    if (ad_signals_stops() != s0)
        return 5; /* a SIGCHLD is not a stop */
    ad_signals_close();
    return 0;
}

static void test_child_wakes_only_when_asked(void **state)
{
    (void)state;
    in_child(child_wakes);
}

static int keeps_ignored_int(void)
{
    unsigned s0 = ad_signals_stops();
    signal(SIGINT, SIG_IGN);
    if (ad_signals_open(AD_SIGNALS_KEEP_IGNORED_INT) != 0)
        return 1;
    raise(SIGINT);
    if (ad_signals_stops() != s0 || readable(0))
        return 2;
    raise(SIGTERM);
    if (ad_signals_stops() != s0 + 1)
        return 3;
    ad_signals_close();
    if (ad_signals_open(0) != 0) /* without the flag SIGINT is taken over */
        return 4;
    raise(SIGINT);
    if (ad_signals_stops() != s0 + 2)
        return 5;
    ad_signals_close();
    return 0;
}

static void test_keep_ignored_int(void **state)
{
    (void)state;
    in_child(keeps_ignored_int);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stops_counted_and_wake),
        cmocka_unit_test(test_child_wakes_only_when_asked),
        cmocka_unit_test(test_keep_ignored_int),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
