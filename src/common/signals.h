/*
 * signals.h - the stop signals (SIGTERM, SIGINT) as a count and a self-pipe that a poll loop can wait on.
 *
 * The handler counts each stop signal and writes a byte to a non-blocking pipe; a loop watches the pipe's
 * read end next to its other descriptors (curl_multi_poll, poll), so that a signal wakes it at once wherever
 * it waits, and reads the count to decide what the signal means (the worker: the first drains, the second
 * kills, the third exits). With AD_SIGNALS_CHILD, SIGCHLD writes to the pipe too, only to wake the loop.
 * SIGPIPE is ignored (a peer that closed is an error return, not a death). One set per process: handlers are
 * process-wide, so the daemon, the worker and the CLI each open it once. It does not block signals or pick
 * a thread to receive them.
 */
#ifndef AD_SIGNALS_H
#define AD_SIGNALS_H

/* ad_signals_open's flags. */
#define AD_SIGNALS_CHILD 1u /* SIGCHLD (not for stops) also wakes the loop */
/* Leave SIGINT ignored when the process started with it ignored: a shell without job control starts
 * background jobs so, and a Ctrl-C meant for the script must not reach them. */
#define AD_SIGNALS_KEEP_IGNORED_INT 2u

/* Make the pipe and install the handlers (SA_RESTART). 0, or -1 with errno set (nothing installed). */
int ad_signals_open(unsigned flags);
/* The pipe's read end, for polling (POLLIN); -1 when not open. */
int ad_signals_fd(void);
/* Empty the pipe after a wake-up. */
void ad_signals_drain(void);
/* How many SIGTERM and SIGINT came since the process started. */
unsigned ad_signals_stops(void);
/* Close the pipe. The handlers stay: a late signal is still counted, its byte goes nowhere. */
void ad_signals_close(void);

#endif
