/*
 * worker_int.h - what the files of src/worker/ share and nothing outside them uses: the worker, its tasks
 * (one leased job each) and its HTTP calls, and the functions that pass between the lease loop (worker.c),
 * the command's process (child.c) and the result file's upload (upload.c). The public side is worker.h (the
 * entry point and the parsers of outside input, args.c and lines.c) and client.h (what the CLI shares).
 *
 * Everything runs on the worker's one thread: none of this is locked.
 */
#ifndef AD_WORKER_INT_H
#define AD_WORKER_INT_H

#include "common/util.h"
#include "worker/client.h"
#include "worker/worker.h"

#include <curl/curl.h>
#include <jansson.h>
#include <stdio.h>
#include <sys/types.h>

#define AD_WORKER_RESPONSE_MAX ((size_t)16 * 1024 * 1024) /* a heartbeat, report or upload answer */
#define AD_WORKER_TAIL_MAX 2048                           /* stderr tail in a failure's detail */
#define AD_WORKER_ECHO_MAX 1024                           /* longest stderr line echoed to the log */
#define AD_WORKER_BACKOFF_MIN_MS 500                      /* retries of leases, reports and upload parts */
#define AD_WORKER_BACKOFF_MAX_MS 5000
/* The first upload part's size: the daemon's default limits.maxUploadPartBytes (4 MiB; 8 MiB in its first
 * version). A daemon with a lower cap says so in its 413, and the worker sends parts of that size from then on. */
#define AD_WORKER_PART_BYTES ((uint64_t)4 * 1024 * 1024)
#define AD_WORKER_RESULT_NAME "result" /* ACCEPTD_RESULT_FILE's name in the task's private directory */

enum ad_call_kind { AD_CALL_LEASE, AD_CALL_HEARTBEAT, AD_CALL_COMPLETE, AD_CALL_FAIL, AD_CALL_CANCEL, AD_CALL_UPLOAD };

struct ad_task;

/* One HTTP request in the multi handle. */
struct ad_call {
    CURL *easy;
    struct curl_slist *headers;
    enum ad_call_kind kind;
    struct ad_task *task;
    char *body;
    struct ad_buf resp;
    int64_t sent; /* monotonic ms */
    char errbuf[CURL_ERROR_SIZE];
};

/* Why the worker signalled a command; decides the report once it has exited. A later reason wins over an
 * earlier one only if it is stronger: a cancel is acknowledged even during shutdown, a lost lease is never
 * reported. */
enum ad_task_end { AD_END_NONE, AD_END_SHUTDOWN, AD_END_CANCEL, AD_END_LOST };

/* One leased job: its command's process and pipes, its heartbeats, its report and its result file. */
struct ad_task {
    struct ad_task *next;
    struct ad_worker *w;
    char *id;
    char *type;
    char *lease_id;
    int attempt;
    int64_t started;     /* monotonic ms */
    int64_t lease_until; /* monotonic ms: when the lease runs out unless renewed */

    pid_t pid; /* 0 once reaped or never started */
    int wstatus;
    int fd_in, fd_out, fd_err; /* parent ends, -1 when closed */
    char *payload;             /* compact JSON and a newline, written to stdin */
    size_t payload_len, payload_off;
    struct ad_worker_lines out_lines, err_lines;
    struct ad_buf result;          /* stdout without progress lines, capped */
    char tail[AD_WORKER_TAIL_MAX]; /* the last bytes of stderr without progress lines */
    size_t tail_len;
    char echo[AD_WORKER_ECHO_MAX + 1]; /* the stderr line being assembled for the log */
    size_t echo_len;

    int progress;  /* latest reported value, -1 none */
    char *message; /* with it, or NULL */
    int hb_dirty;  /* a progress line not yet sent */
    struct ad_call *hb;
    int64_t hb_due;
    int64_t hb_last;

    enum ad_task_end why;
    int64_t kill_at; /* SIGKILL then, 0: not signalled */
    int killed;

    int reporting; /* the command is over; report_body is what we tell the server */
    int asks_next; /* the report in flight also leases this task's slot again ("next"): it stays taken */
    enum ad_call_kind report_kind;
    char *report_body;
    struct ad_call *report;
    int64_t report_due;
    int64_t report_backoff;
    int done; /* remove at the end of this loop turn */

    char *dir; /* the private directory of ACCEPTD_RESULT_FILE, removed with the task; NULL before spawn */
    /* The result file on its way to the server: PUT in parts of w->part_max under the lease, read from up_fd
     * by libcurl as the socket takes it, hashed once in order to check the server's digest. */
    int uploading;
    int up_fd;
    char *up_type;
    uint64_t up_size, up_off;                /* the file's size; the bytes the server has */
    uint64_t part_start, part_len, part_pos; /* the part in flight */
    struct ad_sha256_stream *up_sha;         /* SHA-256 of [0, up_hashed) */
    uint64_t up_hashed;
    int up_errno; /* reading the file failed */
    int up_resumes;
    struct ad_call *up;
    int64_t up_due, up_backoff;
    /* The lease's trace context (docs/tracing.md): the command's TRACEPARENT and TRACESTATE, and the traceparent
     * of this job's calls; NULL when the lease had none (or not a valid one). */
    char *traceparent;
    char *tracestate;
};

struct ad_worker {
    struct ad_worker_opts o;
    struct ad_client client; /* the URL and the key */
    char *name;              /* sent with leases */
    char *exe;               /* the command, resolved once at start */
    char **envp;             /* the environment of commands, without ACCEPTD_KEY and the per-job variables */
    size_t nenv;
    CURLM *multi;
    struct ad_task *tasks;
    struct ad_call *lease;
    int64_t lease_due;
    int64_t lease_backoff;
    int lease_failing;
    uint64_t part_max; /* bytes per upload part: AD_WORKER_PART_BYTES, or less once the daemon said so */
    int stopping;
    int64_t stop_deadline;
    unsigned signals_seen;
    int exit_code;
};

/* ---- worker.c: the lease loop ---- */

/* Remove c from the multi handle and free it (NULL is ignored). */
void ad_worker_call_free(struct ad_worker *w, struct ad_call *c);
/* Whether a call's outcome may pass: network errors, 429 and 5xx; anything else is the server's answer. */
int ad_worker_transient(CURLcode rc, long status);
/* The next retry delay after *backoff: it doubles up to AD_WORKER_BACKOFF_MAX_MS. Returns the delay to wait now. */
int64_t ad_worker_backoff(int64_t *backoff);
/* Tell the server how t ended with a report of kind carrying body (a JSON object, taken over); retried until
 * the server answers. */
void ad_worker_task_report(struct ad_worker *w, struct ad_task *t, enum ad_call_kind kind, json_t *body);
/* Report t failed with a problem of this code, title and detail. */
void ad_worker_task_fail(struct ad_worker *w, struct ad_task *t, const char *code, const char *title,
                         const char *detail, int retryable);
/* Renew t's lease when due (sooner after a progress line); lowers *next to when it will be. */
void ad_worker_heartbeat_tick(struct ad_worker *w, struct ad_task *t, int64_t now, int64_t *next);

/* ---- child.c: the command's process ---- */

/* The command as an executable path, searched in PATH when it has no slash; NULL when there is none. The
 * caller frees. */
char *ad_worker_resolve_command(const char *cmd);
/* The environment every command gets (w->envp, w->nenv): the worker's own, without ACCEPTD_KEY and the
 * variables set per job. */
void ad_worker_env_init(struct ad_worker *w);
/* Make sure fds 0-2 are open, so that a pipe never lands on them. */
void ad_worker_std_fds_open(void);
/* Set up t's output: stdout to the result, stderr to the tail and the log, progress lines from both. */
void ad_worker_task_output_init(struct ad_task *t);
/* Start the command for t. Returns 0, or -1 with errno set (nothing left open). */
int ad_worker_task_spawn(struct ad_worker *w, struct ad_task *t);
/* Feed stdin and read stdout and stderr as far as they go now (non-blocking). */
void ad_worker_task_io(struct ad_task *t);
/* The command has exited: read what it left in the pipes, then close them and end its lines. */
void ad_worker_task_drain(struct ad_task *t);
/* Close t's pipes and free its line splitters. */
void ad_worker_task_output_free(struct ad_task *t);
/* SIGTERM the command's process group for why (the stronger reason is kept); SIGKILL is due after the grace. */
void ad_worker_task_terminate(struct ad_task *t, enum ad_task_end why);
/* Reap every child that has exited and record its status in its task. */
void ad_worker_reap(struct ad_worker *w);
/* "<prefix>exit status 3" or "...killed by signal 9 (Killed)", then ": <stderr tail>". The caller frees. */
char *ad_worker_exit_detail(const struct ad_task *t, const char *prefix);
/* Close *fd if open and set it to -1. */
void ad_worker_close_fd(int *fd);

/* ---- upload.c: the result file ---- */

/* Make t's private directory for ACCEPTD_RESULT_FILE (t->dir). 0, or -1 with t->dir NULL and why in err. */
int ad_worker_result_dir(struct ad_task *t, char *err, size_t errlen);
/* The command succeeded: when it left a result file, start uploading it (or report why not) and return 1;
 * return 0 when there is none and stdout is the result. */
int ad_worker_result_file(struct ad_worker *w, struct ad_task *t);
/* One turn for an uploading task: lease renewal, a lost lease or a cancel, the next part when due. */
void ad_worker_upload_tick(struct ad_worker *w, struct ad_task *t, int64_t now, int64_t *next);
/* The answer to an upload part. */
void ad_worker_upload_done(struct ad_worker *w, struct ad_task *t, struct ad_call *c, CURLcode rc, long status);
/* Stop uploading t and free what the upload holds (its call, the file, the hash). */
void ad_worker_upload_end(struct ad_worker *w, struct ad_task *t);
/* Remove t's private directory and everything in it, and free the upload's type. */
void ad_worker_result_free(struct ad_task *t);

/* ---- args.c ---- */

/* The usage text. */
void ad_worker_usage(FILE *f);

#endif
