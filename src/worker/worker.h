/*
 * worker.h - `acceptd worker`: lease jobs over HTTP and run a command once per job.
 *
 * The worker is a client of the daemon's worker API (docs/workers.md); it shares no state with the server
 * and talks to it only over HTTP. Declared here: the entry point (worker.c) and the pure pieces that read
 * outside input, so that unit tests and the CLI reach them: the command-line options (args.c), the command's
 * output lines and text cleaning (lines.c). What the worker's own files share is worker_int.h.
 */
#ifndef AD_WORKER_H
#define AD_WORKER_H

#include <stddef.h>

/* Longest line kept from a command's stdout/stderr when it may be a progress line; longer lines are cut. */
#define AD_WORKER_LINE_MAX (64 * 1024)
/* The marker that starts a progress line: `::progress <0-100> [message]`. */
#define AD_WORKER_PROGRESS_PREFIX "::progress"
/* Most job types one worker may lease (the server's limit on a lease request). */
#define AD_WORKER_MAX_TYPES 32

struct ad_worker_opts {
    const char *url; /* base URL, no trailing slash is required */
    const char *key; /* bearer key or NULL; never printed */
    const char *types[AD_WORKER_MAX_TYPES];
    size_t ntypes;
    int concurrency;   /* commands at once, 1-100 */
    int lease_seconds; /* 1-3600 */
    int grace_seconds; /* 0-3600: SIGTERM -> SIGKILL delay, and the drain time on shutdown */
    int lease_wait;    /* 0-60: how long one lease request may wait on the server for a job */
    const char *name;  /* worker name sent with leases, or NULL for host/pid */
    char **command;    /* points into argv: the command and its arguments, NULL-terminated */
};

/* Run `acceptd worker` with the arguments after the subcommand. Returns the process exit status. */
int ad_worker_main(int argc, char **argv);

/*
 * Parse the worker's options into o; ACCEPTD_URL and ACCEPTD_KEY from the environment are the defaults.
 * Every string in o points into argv or the environment. Returns 0, 1 when --help was asked for, or -1 with
 * a one-line message in err.
 */
int ad_worker_parse_args(int argc, char **argv, struct ad_worker_opts *o, char *err, size_t errlen);

/*
 * Whether the n bytes at the start of a line begin a progress line: 1 yes, 0 not yet known (a prefix of
 * the marker), -1 no. A progress line is the marker followed by a blank or the end of the line.
 */
int ad_worker_progress_prefix(const char *p, size_t n);

/*
 * Parse a progress line (without its newline): `::progress 42 [message]`; a fraction is truncated and a
 * `%` after the number is allowed. Returns 0 and sets *pct and the message (*msg, *msglen; *msg NULL when
 * there is none, blanks trimmed), or -1 when the line is a progress line without a valid 0-100 number.
 */
int ad_worker_parse_progress(const char *line, size_t len, int *pct, const char **msg, size_t *msglen);

/*
 * Splits a command's output stream into progress lines and the rest. Bytes of lines that are not progress
 * lines pass through to `text` unchanged (newlines included, no length limit); each progress line goes to
 * `progress` without its newline, cut to AD_WORKER_LINE_MAX bytes.
 */
struct ad_worker_lines {
    void (*text)(void *ctx, const char *p, size_t n);
    void (*progress)(void *ctx, const char *line, size_t n);
    void *ctx;
    char *line; /* the current line while it is or may be a progress line; AD_WORKER_LINE_MAX bytes */
    size_t len;
    int mode; /* 0 line start, 1 progress line, 2 other text */
};
void ad_worker_lines_init(struct ad_worker_lines *l, void (*text)(void *, const char *, size_t),
                          void (*progress)(void *, const char *, size_t), void *ctx);
void ad_worker_lines_feed(struct ad_worker_lines *l, const char *p, size_t n);
/* End of the stream: flush an unterminated last line. */
void ad_worker_lines_finish(struct ad_worker_lines *l);
void ad_worker_lines_free(struct ad_worker_lines *l);

/*
 * A copy of n bytes that is valid UTF-8 without control characters other than newline and tab: invalid
 * sequences and other controls become '?', and continuation bytes at the very start (a character cut by a
 * tail) are dropped. The caller frees.
 */
char *ad_worker_clean_text(const char *p, size_t n);
/* ad_worker_clean_text's copy cut to at most max bytes without splitting a character. The caller frees. */
char *ad_worker_clean_cut(const char *p, size_t n, size_t max);

#endif
