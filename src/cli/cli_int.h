/*
 * cli_int.h - what the files of src/cli/ share: the connection to the server, one request run to its end on
 * the multi handle, problem answers printed for people, and the output formats.
 *
 * One thread: each request runs on the curl multi handle until it ends, the deadline passes or a signal
 * comes (the self-pipe of common/signals.h, which curl_multi_poll() watches), so a wait of any length stays
 * interruptible and bounded.
 */
#ifndef AD_CLI_INT_H
#define AD_CLI_INT_H

#include "cli/cli.h"
#include "common/util.h"
#include "common/version.h"
#include "worker/client.h"

#include <curl/curl.h>
#include <jansson.h>
#include <stdio.h>

#define AD_CLI_DEFAULT_URL "http://127.0.0.1:8080"
/* Largest answer read (a page of 500 jobs with their payloads and results). */
#define AD_CLI_RESPONSE_MAX ((size_t)64 * 1024 * 1024)
/* Longest one plain request may take; long polls add their wait. */
#define AD_CLI_REQUEST_TIMEOUT_MS 30000

enum ad_cli_output { AD_CLI_JSON, AD_CLI_TABLE };

struct ad_cli {
    const char *prog; /* "acceptd submit", for messages */
    struct ad_client client;
    CURLM *multi;
    int64_t deadline; /* monotonic ms after which waiting ends with AD_CLI_TIMEOUT; 0 none */
    int stopped;      /* a SIGINT or SIGTERM came */
};

/* One request and its answer. */
struct ad_cli_req {
    CURL *easy;
    struct curl_slist *headers;
    char *body;         /* what is sent, or NULL */
    struct ad_buf resp; /* the answer's body (unless a stream callback takes it) */
    char errbuf[CURL_ERROR_SIZE];
    CURLcode rc;
    long status;
};

/* Read --url/--key defaults from ACCEPTD_URL/ACCEPTD_KEY, check url, connect the client and the signals.
 * Returns 0, or AD_CLI_USAGE / AD_CLI_CONNECT after printing why. */
int ad_cli_open(struct ad_cli *c, const char *prog, const char *url, const char *key);
void ad_cli_close(struct ad_cli *c);

/* Prepare method path with JSON body (NULL: none; taken over) and extra headers (taken over, may be NULL). */
void ad_cli_req_init(struct ad_cli *c, struct ad_cli_req *r, const char *method, const char *path, char *body,
                     struct curl_slist *extra, long timeout_ms);
void ad_cli_req_free(struct ad_cli_req *r);
/* Run r to its end. Returns 0 (r->rc, r->status set), AD_CLI_TIMEOUT when the deadline passed or
 * AD_CLI_INTERRUPTED on a signal (then r->rc is CURLE_ABORTED_BY_CALLBACK). */
int ad_cli_perform(struct ad_cli *c, struct ad_cli_req *r);
/* Sleep ms or until the deadline or a signal: 0, AD_CLI_TIMEOUT, AD_CLI_INTERRUPTED. */
int ad_cli_sleep(struct ad_cli *c, int64_t ms);
/* A response header's value (the last one), or NULL; valid until r is freed. */
const char *ad_cli_header(struct ad_cli_req *r, const char *name);

/*
 * The outcome of a finished request that did not get what it wanted: print it on stderr (a problem answer
 * readably: status, title, detail, each validation error) and return the exit status (AD_CLI_CONNECT with no
 * answer, else AD_CLI_PROBLEM).
 */
int ad_cli_report(struct ad_cli *c, struct ad_cli_req *r);
/* The body of a 2xx answer as JSON, or NULL after printing why (then the exit status is AD_CLI_PROBLEM). */
json_t *ad_cli_json(struct ad_cli *c, struct ad_cli_req *r);

/* Print a problem document (a failed job's `error`, or an answer) on stderr, after the prefix. */
void ad_cli_print_problem(const char *prefix, long status, json_t *p);

/* The verb at argv[optind] among verbs[0..n), verbs[0] being list (no argument) and each other taking one argument,
 * named by one ("give one job id"): NULL with its index in *v (n when unknown), or why the command line is wrong. */
const char *ad_cli_verb(const char *const *verbs, size_t n, int argc, char **argv, const char *one, size_t *v);

/* One request with body (NULL: none) as JSON of Content-Type ctype: on a 2xx its JSON answer in *out (the caller
 * decrefs; NULL for a 204) and 0; else why is printed (ad_cli_report) and the exit status returned. */
int ad_cli_call(struct ad_cli *c, const char *method, const char *path, json_t *body, const char *ctype, json_t **out);
/* Print an answer: as JSON, or as a table of the array under member list, or of v itself when it has none. */
void ad_cli_print_items(json_t *v, enum ad_cli_output output, const char *list,
                        void (*table)(json_t *const *items, size_t n));
/* The text of the file at path ("-": stdin), at most AD_CLI_FILE_MAX bytes; the caller frees. NULL with err set
 * ("what: ..."). */
#define AD_CLI_FILE_MAX (16u << 20)
char *ad_cli_read_file(const char *path, const char *what, char *err, size_t errlen);
/* A table cell: the string v cleaned and cut to max bytes, or the integer v; "-" when v is not one. */
char *ad_cli_cell_str(json_t *v, size_t max);
char *ad_cli_cell_int(json_t *v);

/* A bad command line: print "prog: <fmt...>" and the usage text on stderr; returns AD_CLI_USAGE. */
int ad_cli_usage_error(const char *prog, void (*usage)(FILE *), const char *fmt, ...) AD_PRINTF(3, 4);

/* Print v as indented JSON and a newline on stdout. */
void ad_cli_print_json(json_t *v);
/* Print jobs as a table with aligned columns: id, type, status, progress, created; header first when
 * header is set. */
void ad_cli_print_jobs(json_t *const *jobs, size_t n, int header);
/*
 * Print a table of rows x cols cells on stdout, each column as wide as its widest cell or head and two blanks
 * apart; column k is aligned right when bit k of right is set, and the last one is not padded. heads (cols
 * strings) is printed first when header is set. Frees every cell and cells itself.
 */
void ad_cli_print_table(const char *const *heads, int header, char **cells, size_t rows, size_t cols, unsigned right);

/* A copy of server text fit for a terminal: controls and bad UTF-8 become '?', cut to max bytes. The caller
 * frees. */
char *ad_cli_clean(const char *s, size_t max);

/* Parse an --output value. 0, or -1. */
int ad_cli_parse_output(const char *v, enum ad_cli_output *out);

/*
 * Read the job's SSE stream (GET /v1/jobs/{id}/events), handing each event to on_event, which returns 1 for
 * the last one wanted. A stream that breaks is opened again with Last-Event-ID, after the server's retry:
 * (at most 5 s), up to AD_CLI_SSE_RECONNECTS times. Returns 0 once on_event said so, AD_CLI_TIMEOUT or
 * AD_CLI_INTERRUPTED, or -1 when the server refused the stream (not 200 text/event-stream, *refused set) or
 * it kept breaking; then r holds the last answer (the caller frees it), else r is freed.
 */
#define AD_CLI_SSE_RECONNECTS 3
int ad_cli_stream(struct ad_cli *c, const char *id,
                  int (*on_event)(void *ctx, const char *event, const char *data, size_t len, const char *eid),
                  void *ctx, struct ad_cli_req *r, int *refused);

/* Follow a job to its end (submit.c): SSE first, then polling. Returns the final job (the caller decrefs)
 * and sets *exit to AD_CLI_OK, or NULL with *exit set after printing why. tty: draw a progress bar. */
json_t *ad_cli_follow(struct ad_cli *c, const char *id, int tty, int *exit);

/*
 * Save the artifact of job id (the job's `artifact` object) to file: GET its href streamed into file.part,
 * the SHA-256 checked against artifact.digest, then renamed to file. Returns 0, AD_CLI_DIGEST (nothing
 * written), AD_CLI_FILE, or the request's failure, after printing why. download.c.
 */
int ad_cli_save_artifact(struct ad_cli *c, const char *id, json_t *artifact, const char *file);
/* Write v as indented JSON to file (through file.part). 0, or AD_CLI_FILE after printing why. */
int ad_cli_save_json(struct ad_cli *c, json_t *v, const char *file);
/* Print {"artifact": artifact} on stdout and a hint on stderr: what -O would save. */
void ad_cli_print_artifact(struct ad_cli *c, const char *id, json_t *artifact);

#endif
