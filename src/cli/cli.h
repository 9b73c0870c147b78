/*
 * cli.h - `acceptd submit`, `acceptd jobs` and `acceptd queues`: the client's command line over the daemon's HTTP API.
 *
 * Like src/worker/, a client of the daemon that shares no state with it; it uses common/ and the HTTP
 * pieces of worker/client.h. Declared here: the two entry points, their exit statuses (docs/acceptd.1), and
 * the pure pieces that read outside input (the SSE parser, the poll delay), so that unit tests reach them.
 */
#ifndef AD_CLI_H
#define AD_CLI_H

#include <stddef.h>
#include <stdint.h>

/* Exit statuses of both commands. The first five are the outcome of a job followed with `submit --wait`. */
enum ad_cli_exit {
    AD_CLI_OK = 0,           /* succeeded (or the command did what it was asked) */
    AD_CLI_FAILED = 1,       /* the job failed */
    AD_CLI_USAGE = 2,        /* bad command line or input */
    AD_CLI_CANCELLED = 3,    /* the job was cancelled */
    AD_CLI_PARTIAL = 4,      /* the job ended partialSuccess */
    AD_CLI_TIMEOUT = 5,      /* --timeout passed before the job ended */
    AD_CLI_CONNECT = 6,      /* no answer from the server (connection refused, reset, timed out) */
    AD_CLI_PROBLEM = 7,      /* the server refused the request (a problem answer) or answered nonsense */
    AD_CLI_DIGEST = 8,       /* -O: the downloaded artifact does not match its digest (nothing written) */
    AD_CLI_FILE = 9,         /* -O: the output file could not be written */
    AD_CLI_INTERRUPTED = 130 /* SIGINT or SIGTERM while waiting (not for `jobs list --watch`: that is its end) */
};

/* Run `acceptd submit` / `acceptd jobs`; argv[0] is the subcommand's name. Returns the exit status. */
int ad_cli_submit_main(int argc, char **argv);
int ad_cli_jobs_main(int argc, char **argv);
/* Run `acceptd queues` (queues.c); argv[0] is "queues". */
int ad_cli_queues_main(int argc, char **argv);
/* Run `acceptd batch` (batch.c); argv[0] is "batch". */
int ad_cli_batch_main(int argc, char **argv);
/* Run `acceptd schedules` (schedules.c); argv[0] is "schedules". */
int ad_cli_schedules_main(int argc, char **argv);

/* Longest SSE line or event data kept; a longer one ends the stream (a done event carries the whole job). */
#define AD_CLI_SSE_MAX ((size_t)32 * 1024 * 1024)

/*
 * A text/event-stream parser (the WHATWG rules, for the fields the daemon sends): feed it bytes as they
 * come; each event is handed to on_event with its name ("message" when none), its data (NUL-terminated) and
 * its id (the last id seen, "" when none). `retry` is the last retry: value in ms, -1 before one.
 */
struct ad_cli_sse {
    void (*on_event)(void *ctx, const char *event, const char *data, size_t len, const char *id);
    void *ctx;
    char *line; /* the line being read, capped at AD_CLI_SSE_MAX */
    size_t len, cap;
    char *data; /* the event's data lines joined by \n */
    size_t dlen, dcap;
    int has_data;
    int cr;          /* the last byte was a CR: a LF right after it ends nothing */
    char event[64];  /* longer names are cut */
    char id[64];     /* the last event id; longer ids are cut */
    long long retry; /* ms, -1 none */
    int toobig;      /* a line or data passed AD_CLI_SSE_MAX: the parser stopped */
};
void ad_cli_sse_init(struct ad_cli_sse *p, void (*on_event)(void *, const char *, const char *, size_t, const char *),
                     void *ctx);
/* Returns 0, or -1 once toobig (nothing more is parsed). */
int ad_cli_sse_feed(struct ad_cli_sse *p, const char *b, size_t n);
void ad_cli_sse_free(struct ad_cli_sse *p);

/* Bounds of the poll delay without Retry-After (seed 000 §4.1): 1 s doubling to 30 s. */
#define AD_CLI_BACKOFF_MIN_MS 1000
#define AD_CLI_BACKOFF_MAX_MS 30000

/*
 * The wait before the next poll, in ms. retry_after_s >= 0: the server's Retry-After, obeyed (plus up to
 * 10% jitter, so that clients told the same do not come back at once); *backoff is left alone. Otherwise the
 * exponential backoff: *backoff (start it at AD_CLI_BACKOFF_MIN_MS) plus up to a quarter of it in jitter,
 * capped at AD_CLI_BACKOFF_MAX_MS, and *backoff doubles for the next time. The jitter is at most a quarter so
 * that the delays never shrink from one poll to the next. rnd is a random value in [0, 1).
 */
int64_t ad_cli_poll_delay(long long retry_after_s, int64_t *backoff, double rnd);

#endif
