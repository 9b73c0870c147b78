/*
 * signals.c - the stop signals' count and self-pipe (see signals.h).
 *
 * The handler does only what is async-signal-safe: it bumps a sig_atomic_t and write()s one byte, keeping
 * errno. The pipe is non-blocking at both ends: a full pipe already wakes the loop, so a lost byte is no loss.
 */
#include "common/signals.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

static int fds[2] = {-1, -1};
static volatile sig_atomic_t stops;

static void on_signal(int sig)
{
    int saved = errno;
    if (sig == SIGTERM || sig == SIGINT)
        stops++;
    char c = (char)sig;
    if (fds[1] >= 0) {
        ssize_t r = write(fds[1], &c, 1);
        (void)r;
    }
    errno = saved;
}

int ad_signals_open(unsigned flags)
{
    if (pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) {
        fds[0] = fds[1] = -1;
        return -1;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESTART | SA_NOCLDSTOP;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    if (flags & AD_SIGNALS_CHILD)
        sigaction(SIGCHLD, &sa, NULL);
    struct sigaction old;
    if (!(flags & AD_SIGNALS_KEEP_IGNORED_INT) || (sigaction(SIGINT, NULL, &old) == 0 && old.sa_handler != SIG_IGN))
        sigaction(SIGINT, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    return 0;
}

int ad_signals_fd(void)
{
    return fds[0];
}

void ad_signals_drain(void)
{
    char b[64];
    while (fds[0] >= 0 && read(fds[0], b, sizeof(b)) > 0)
        ;
}

unsigned ad_signals_stops(void)
{
    return (unsigned)stops;
}

void ad_signals_close(void)
{
    int r = fds[0], w = fds[1];
    fds[0] = fds[1] = -1;
    if (r >= 0)
        close(r);
    if (w >= 0)
        close(w);
}
