/*
 * worker.c - `acceptd worker`: lease jobs over HTTP, run a command once per job, report the outcome.
 *
 * One thread and one loop. libcurl's multi interface carries the lease long-poll, the heartbeats and the
 * reports at the same time, and curl_multi_poll() also wakes for the children's pipes and for a self-pipe
 * written by the signal handlers (SIGTERM/SIGINT: stop; SIGCHLD: a command ended). Each leased job is a
 * `task`: a child in its own process group (so a signal reaches everything it started), its stdin fed with
 * the payload, its stdout and stderr read without blocking and split into progress lines and the rest.
 *
 * A job leaves the worker only through a report the server accepted (complete, fail, cancel acknowledgement),
 * or when the server said the lease is no longer ours: nothing is dropped silently. The worker does not
 * decide about retries (the server does, from :fail's `retryable`) and does not know the server's internals.
 * The wire protocol is docs/workers.md.
 */
#include "worker/worker.h"
#include "common/util.h"
#include "common/version.h"
#include "worker/client.h"

#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <getopt.h>
#include <jansson.h>
#include <openssl/evp.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define MARKER_LEN (sizeof(AD_WORKER_PROGRESS_PREFIX) - 1)

#define RESULT_MAX ((size_t)16 * 1024 * 1024)          /* stdout kept for the result */
#define RESPONSE_MAX ((size_t)16 * 1024 * 1024)        /* a heartbeat or report answer */
#define LEASE_RESPONSE_MAX ((size_t)256 * 1024 * 1024) /* up to 100 jobs with their payloads */
#define TAIL_MAX 2048                                  /* stderr tail in a failure's detail */
#define ECHO_MAX 1024                                  /* longest stderr line echoed to the log */
#define MESSAGE_MAX 1024                               /* the server's limit on a heartbeat message */
#define READ_CHUNK 65536
#define PROGRESS_SPACING_MS 250 /* fastest heartbeat rate driven by progress lines */
#define BACKOFF_MIN_MS 500
#define BACKOFF_MAX_MS 5000
#define REQUEST_TIMEOUT_MS 15000
#define LOOP_MAX_SLEEP_MS 1000
/* The first part's size: the daemon's default limits.maxUploadPartBytes (4 MiB; 8 MiB in its first version).
 * A daemon with a lower cap says so in its 413, and the worker sends parts of that size from then on. */
#define UPLOAD_PART_BYTES ((uint64_t)4 * 1024 * 1024)
#define UPLOAD_PART_MIN ((uint64_t)64 * 1024) /* a generic 413 halves the parts down to this, then fails the job */
#define UPLOAD_STALL_S 60                     /* a part that moves no byte for this long has failed */
#define UPLOAD_RESUMES_MAX 5                  /* upload-offset-mismatch answers in a row before giving up */
#define RESULT_TYPE_MAX 255                   /* longest Content-Type read from the .type sidecar */
#define RESULT_NAME "result"                  /* ACCEPTD_RESULT_FILE's name in the task's private directory */

/* ---- pure pieces: options, progress lines, text ---- */

static int parse_int_opt(const char *name, const char *v, long long min, long long max, int *out, char *err,
                         size_t errlen)
{
    long long n;
    if (ad_parse_int(v, strlen(v), min, max, &n) != 0) {
        snprintf(err, errlen, "%s: expected an integer from %lld to %lld, got '%s'", name, min, max, v);
        return -1;
    }
    *out = (int)n;
    return 0;
}

int ad_worker_parse_args(int argc, char **argv, struct ad_worker_opts *o, char *err, size_t errlen)
{
    memset(o, 0, sizeof(*o));
    o->concurrency = 1;
    o->lease_seconds = 30;
    o->grace_seconds = 10;
    o->lease_wait = 5;
    const char *env = getenv("ACCEPTD_URL");
    if (env != NULL && env[0] != '\0')
        o->url = env;
    env = getenv("ACCEPTD_KEY");
    if (env != NULL && env[0] != '\0')
        o->key = env;

    /* getopt_long wants the program's name first: a copy of argv behind one. "+" stops at the first
     * non-option (the command may start without --) and leaves argv unpermuted, so av[k + 1] is argv[k]. */
    static const struct option longopts[] = {{"url", required_argument, NULL, 'U'},
                                             {"key", required_argument, NULL, 'K'},
                                             {"type", required_argument, NULL, 'T'},
                                             {"concurrency", required_argument, NULL, 'C'},
                                             {"lease-seconds", required_argument, NULL, 'L'},
                                             {"grace", required_argument, NULL, 'G'},
                                             {"lease-wait", required_argument, NULL, 'W'},
                                             {"name", required_argument, NULL, 'N'},
                                             {"help", no_argument, NULL, 'h'},
                                             {NULL, 0, NULL, 0}};
    char **av = ad_calloc((size_t)argc + 2, sizeof(*av));
    av[0] = "acceptd worker";
    if (argc > 0)
        memcpy(av + 1, argv, (size_t)argc * sizeof(*av));
    int rc = 0, c, idx;
    opterr = 0;
    optind = 0; /* glibc: start afresh */
    while (rc == 0 && (c = getopt_long(argc + 1, av, "+:h", longopts, &idx)) != -1) {
        const char *v = optarg;
        const char *a = c == '?' || c == ':' || c == 'h' ? NULL : longopts[idx].name;
        char name[32];
        if (a != NULL)
            snprintf(name, sizeof(name), "--%s", a);
        switch (c) {
        case 'h':
            rc = 1;
            break;
        case 'U':
            o->url = v;
            break;
        case 'K':
            o->key = v[0] != '\0' ? v : NULL;
            break;
        case 'T':
            if (v[0] == '\0' || strlen(v) > 128) {
                snprintf(err, errlen, "--type: a job type is 1 to 128 characters");
                rc = -1;
            } else if (o->ntypes == AD_WORKER_MAX_TYPES) {
                snprintf(err, errlen, "--type: at most %d types", AD_WORKER_MAX_TYPES);
                rc = -1;
            } else {
                o->types[o->ntypes++] = v;
            }
            break;
        case 'C':
            rc = parse_int_opt(name, v, 1, 100, &o->concurrency, err, errlen);
            break;
        case 'L':
            rc = parse_int_opt(name, v, 1, 3600, &o->lease_seconds, err, errlen);
            break;
        case 'G':
            rc = parse_int_opt(name, v, 0, 3600, &o->grace_seconds, err, errlen);
            break;
        case 'W':
            rc = parse_int_opt(name, v, 0, 60, &o->lease_wait, err, errlen);
            break;
        case 'N':
            if (v[0] == '\0' || strlen(v) > 128) {
                snprintf(err, errlen, "--name: a worker name is 1 to 128 characters");
                rc = -1;
            } else {
                o->name = v;
            }
            break;
        default:
            ad_getopt_error(c, argc + 1, av, err, errlen);
            rc = -1;
            break;
        }
    }
    int i = optind - 1;
    free(av);
    if (rc != 0)
        return rc;
    if (i >= argc) {
        snprintf(err, errlen, "no command: give it after --, e.g. acceptd worker --type T -- ./run-job.sh");
        return -1;
    }
    o->command = argv + i;
    if (o->url == NULL) {
        snprintf(err, errlen, "no server URL: use --url or ACCEPTD_URL");
        return -1;
    }
    if (strncmp(o->url, "http://", 7) != 0 && strncmp(o->url, "https://", 8) != 0) {
        snprintf(err, errlen, "--url: expected an http:// or https:// URL, got '%s'", o->url);
        return -1;
    }
    if (o->ntypes == 0) {
        snprintf(err, errlen, "no job type: give at least one --type");
        return -1;
    }
    return 0;
}

int ad_worker_progress_prefix(const char *p, size_t n)
{
    size_t k = n < MARKER_LEN ? n : MARKER_LEN;
    if (memcmp(p, AD_WORKER_PROGRESS_PREFIX, k) != 0)
        return -1;
    if (n <= MARKER_LEN)
        return 0;
    return p[MARKER_LEN] == ' ' || p[MARKER_LEN] == '\t' || p[MARKER_LEN] == '\r' ? 1 : -1;
}

static int is_blank(char c)
{
    return c == ' ' || c == '\t' || c == '\r';
}

static int is_digit(char c)
{
    return c >= '0' && c <= '9';
}

int ad_worker_parse_progress(const char *line, size_t len, int *pct, const char **msg, size_t *msglen)
{
    if (len < MARKER_LEN || ad_worker_progress_prefix(line, len) < 0)
        return -1;
    size_t i = MARKER_LEN;
    while (i < len && is_blank(line[i]))
        i++;
    size_t d0 = i;
    int v = 0;
    while (i < len && is_digit(line[i]) && i - d0 < 4)
        v = v * 10 + (line[i++] - '0');
    if (i == d0 || (i < len && is_digit(line[i])) || v > 100)
        return -1;
    if (i < len && line[i] == '.') {
        size_t f0 = ++i;
        while (i < len && is_digit(line[i]))
            i++;
        if (i == f0)
            return -1;
    }
    if (i < len && line[i] == '%')
        i++;
    if (i < len && !is_blank(line[i]))
        return -1;
    while (i < len && is_blank(line[i]))
        i++;
    size_t end = len;
    while (end > i && is_blank(line[end - 1]))
        end--;
    *pct = v;
    *msg = end > i ? line + i : NULL;
    *msglen = end - i;
    return 0;
}

enum { LINES_START, LINES_PROGRESS, LINES_TEXT };

void ad_worker_lines_init(struct ad_worker_lines *l, void (*text)(void *, const char *, size_t),
                          void (*progress)(void *, const char *, size_t), void *ctx)
{
    memset(l, 0, sizeof(*l));
    l->text = text;
    l->progress = progress;
    l->ctx = ctx;
    l->line = ad_malloc(AD_WORKER_LINE_MAX);
    l->mode = LINES_START;
}

/* At the end of a line still in LINES_START: the bare marker is a progress line, anything else text. */
static void lines_end_start(struct ad_worker_lines *l)
{
    if (l->len == MARKER_LEN && ad_worker_progress_prefix(l->line, l->len) == 0)
        l->progress(l->ctx, l->line, l->len);
    else if (l->len > 0)
        l->text(l->ctx, l->line, l->len);
}

void ad_worker_lines_feed(struct ad_worker_lines *l, const char *p, size_t n)
{
    size_t i = 0;
    while (i < n) {
        const char *nl;
        size_t m;
        switch (l->mode) {
        case LINES_TEXT:
            nl = memchr(p + i, '\n', n - i);
            m = nl != NULL ? (size_t)(nl - (p + i)) + 1 : n - i;
            l->text(l->ctx, p + i, m);
            i += m;
            if (nl != NULL)
                l->mode = LINES_START;
            break;
        case LINES_PROGRESS:
            nl = memchr(p + i, '\n', n - i);
            m = nl != NULL ? (size_t)(nl - (p + i)) : n - i;
            /* An overlong line is cut at the cap; the rest of it is dropped. */
            size_t keep = m < AD_WORKER_LINE_MAX - l->len ? m : AD_WORKER_LINE_MAX - l->len;
            memcpy(l->line + l->len, p + i, keep);
            l->len += keep;
            i += m;
            if (nl != NULL) {
                i++;
                l->progress(l->ctx, l->line, l->len);
                l->len = 0;
                l->mode = LINES_START;
            }
            break;
        default:
            if (p[i] == '\n') {
                /* Keep the newline with its line so the text sink sees the bytes exactly as written. */
                if (l->len == MARKER_LEN && ad_worker_progress_prefix(l->line, l->len) == 0) {
                    l->progress(l->ctx, l->line, l->len);
                } else {
                    l->line[l->len++] = '\n';
                    l->text(l->ctx, l->line, l->len);
                }
                l->len = 0;
                i++;
                break;
            }
            l->line[l->len++] = p[i++];
            int s = ad_worker_progress_prefix(l->line, l->len);
            if (s > 0) {
                l->mode = LINES_PROGRESS;
            } else if (s < 0) {
                l->text(l->ctx, l->line, l->len);
                l->len = 0;
                l->mode = LINES_TEXT;
            }
            break;
        }
    }
}

void ad_worker_lines_finish(struct ad_worker_lines *l)
{
    if (l->mode == LINES_PROGRESS)
        l->progress(l->ctx, l->line, l->len);
    else if (l->mode == LINES_START)
        lines_end_start(l);
    l->len = 0;
    l->mode = LINES_START;
}

void ad_worker_lines_free(struct ad_worker_lines *l)
{
    free(l->line);
    l->line = NULL;
}

/* Length of a valid UTF-8 sequence at s[0..n), or 0. */
static size_t utf8_seq(const unsigned char *s, size_t n)
{
    size_t len;
    unsigned cp, min;
    if (s[0] >= 0xC2 && s[0] <= 0xDF)
        len = 2, cp = s[0] & 0x1F, min = 0x80;
    else if (s[0] >= 0xE0 && s[0] <= 0xEF)
        len = 3, cp = s[0] & 0x0F, min = 0x800;
    else if (s[0] >= 0xF0 && s[0] <= 0xF4)
        len = 4, cp = s[0] & 0x07, min = 0x10000;
    else
        return 0;
    if (len > n)
        return 0;
    for (size_t k = 1; k < len; k++) {
        if ((s[k] & 0xC0) != 0x80)
            return 0;
        cp = (cp << 6) | (s[k] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
        return 0;
    return len;
}

char *ad_worker_clean_text(const char *p, size_t n)
{
    const unsigned char *s = (const unsigned char *)p;
    size_t i = 0;
    while (i < n && (s[i] & 0xC0) == 0x80)
        i++;
    char *out = ad_malloc(n - i + 1);
    size_t o = 0;
    while (i < n) {
        unsigned char c = s[i];
        if (c < 0x80) {
            int ok = (c >= 0x20 && c != 0x7f) || c == '\n' || c == '\t' || c == '\r';
            out[o++] = ok ? (char)c : '?';
            i++;
            continue;
        }
        size_t len = utf8_seq(s + i, n - i);
        if (len == 0) {
            out[o++] = '?';
            i++;
            continue;
        }
        memcpy(out + o, s + i, len);
        o += len;
        i += len;
    }
    out[o] = '\0';
    return out;
}

/* ---- the worker ---- */

enum call_kind { CALL_LEASE, CALL_HEARTBEAT, CALL_COMPLETE, CALL_FAIL, CALL_CANCEL, CALL_UPLOAD };

static const char *const call_names[] = {"lease", "heartbeat", "complete", "fail", "cancel", "upload"};

struct task;

/* One HTTP request in the multi handle. */
struct call {
    CURL *easy;
    struct curl_slist *headers;
    enum call_kind kind;
    struct task *task;
    char *body;
    struct ad_buf resp;
    int64_t sent; /* monotonic ms */
    char errbuf[CURL_ERROR_SIZE];
};

/* Why the worker signalled a command; decides the report once it has exited. A later reason wins over an
 * earlier one only if it is stronger: a cancel is acknowledged even during shutdown, a lost lease is never
 * reported. */
enum task_end { END_NONE, END_SHUTDOWN, END_CANCEL, END_LOST };

struct task {
    struct task *next;
    struct worker *w;
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
    struct ad_buf result; /* stdout without progress lines, capped at RESULT_MAX */
    char tail[TAIL_MAX];  /* the last TAIL_MAX bytes of stderr without progress lines */
    size_t tail_len;
    char echo[ECHO_MAX + 1]; /* the stderr line being assembled for the log */
    size_t echo_len;

    int progress;  /* latest reported value, -1 none */
    char *message; /* with it, or NULL */
    int hb_dirty;  /* a progress line not yet sent */
    struct call *hb;
    int64_t hb_due;
    int64_t hb_last;

    enum task_end why;
    int64_t kill_at; /* SIGKILL then, 0: not signalled */
    int killed;

    int reporting; /* the command is over; report_body is what we tell the server */
    int asks_next; /* the report in flight also leases this task's slot again ("next"): it stays taken */
    enum call_kind report_kind;
    char *report_body;
    struct call *report;
    int64_t report_due;
    int64_t report_backoff;
    int done; /* remove at the end of this loop turn */

    char *dir; /* the private directory of ACCEPTD_RESULT_FILE, removed with the task; NULL before spawn */
    /* The result file on its way to the server: PUT in parts of UPLOAD_PART_BYTES under the lease, read
     * from up_fd by libcurl as the socket takes it, hashed once in order to check the server's digest. */
    int uploading;
    int up_fd;
    char *up_type;
    uint64_t up_size, up_off;                /* the file's size; the bytes the server has */
    uint64_t part_start, part_len, part_pos; /* the part in flight */
    EVP_MD_CTX *up_sha;                      /* SHA-256 of [0, up_hashed) */
    uint64_t up_hashed;
    int up_errno; /* reading the file failed */
    int up_resumes;
    struct call *up;
    int64_t up_due, up_backoff;
};

struct worker {
    struct ad_worker_opts o;
    struct ad_client client; /* the URL and the key */
    char *name;              /* sent with leases */
    char *exe;               /* the command, resolved once at start */
    char **envp;             /* the environment of commands, without ACCEPTD_KEY and the per-job variables */
    size_t nenv;
    CURLM *multi;
    struct task *tasks;
    struct call *lease;
    int64_t lease_due;
    int64_t lease_backoff;
    int lease_failing;
    uint64_t part_max; /* bytes per upload part: UPLOAD_PART_BYTES, or less once the daemon said so */
    int stopping;
    int64_t stop_deadline;
    int signals_seen;
    int exit_code;
};

static int sig_fd[2] = {-1, -1};
static volatile sig_atomic_t sig_stop_count;

static void on_signal(int sig)
{
    int saved = errno;
    if (sig == SIGTERM || sig == SIGINT)
        sig_stop_count++;
    char c = (char)sig;
    ssize_t r = write(sig_fd[1], &c, 1);
    (void)r;
    errno = saved;
}

static int64_t interval_ms(const struct worker *w)
{
    int64_t ms = (int64_t)w->o.lease_seconds * 1000 / 3;
    return ms < 100 ? 100 : ms;
}

/* ---- HTTP calls ---- */

static void call_free(struct worker *w, struct call *c)
{
    if (c == NULL)
        return;
    curl_multi_remove_handle(w->multi, c->easy);
    curl_easy_cleanup(c->easy);
    curl_slist_free_all(c->headers);
    free(c->body);
    ad_buf_free(&c->resp);
    free(c);
}

/* Start a POST of body (taken over) to base + path. */
static struct call *call_start(struct worker *w, enum call_kind kind, struct task *t, const char *path, char *body)
{
    struct call *c = ad_calloc(1, sizeof(*c));
    c->kind = kind;
    c->task = t;
    c->body = body;
    c->sent = ad_mono_ms();
    ad_buf_init(&c->resp, kind == CALL_LEASE || (t != NULL && t->asks_next) ? LEASE_RESPONSE_MAX : RESPONSE_MAX);
    c->headers = ad_client_headers(&w->client, curl_slist_append(NULL, "Content-Type: application/json"));
    long timeout = kind == CALL_LEASE ? (w->o.lease_wait * 1000L + REQUEST_TIMEOUT_MS) : REQUEST_TIMEOUT_MS;
    c->easy = ad_client_easy(&w->client, path, c->headers, &c->resp, c->errbuf, timeout);
    curl_easy_setopt(c->easy, CURLOPT_POSTFIELDS, c->body);
    curl_easy_setopt(c->easy, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(c->body));
    curl_easy_setopt(c->easy, CURLOPT_PRIVATE, c);
    curl_multi_add_handle(w->multi, c->easy);
    return c;
}

/* Network errors, 429 and 5xx may pass; anything else is the server's answer about this request. */
static int transient(CURLcode rc, long status)
{
    return rc != CURLE_OK || status == 0 || status == 429 || status >= 500;
}

/* What went wrong with a call, for logs. The caller frees. */
static char *describe(const struct call *c, CURLcode rc, long status)
{
    return ad_client_describe(rc, c->errbuf, status, &c->resp);
}

static int job_path_ok(const char *id)
{
    size_t n = strlen(id);
    if (n == 0 || n > 128)
        return 0;
    for (size_t i = 0; i < n; i++) {
        char c = id[i];
        if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || is_digit(c) || c == '_' || c == '-'))
            return 0;
    }
    return 1;
}

/* ---- tasks: children and their pipes ---- */

static void task_terminate(struct task *t, enum task_end why)
{
    if (why > t->why)
        t->why = why;
    if (t->pid > 0 && t->kill_at == 0) {
        kill(-t->pid, SIGTERM);
        t->kill_at = ad_mono_ms() + (int64_t)t->w->o.grace_seconds * 1000;
        if (t->kill_at == 0)
            t->kill_at = 1;
    }
}

static void on_out_text(void *ctx, const char *p, size_t n)
{
    struct task *t = ctx;
    ad_buf_append(&t->result, p, n); /* past the cap it sets result.toobig, reported when the command ends */
}

static void echo_flush(struct task *t)
{
    if (t->echo_len == 0)
        return;
    t->echo[t->echo_len] = '\0';
    char *s = ad_worker_clean_text(t->echo, t->echo_len);
    ad_info("job %s: %s", t->id, s);
    free(s);
    t->echo_len = 0;
}

static void on_err_text(void *ctx, const char *p, size_t n)
{
    struct task *t = ctx;
    if (n >= TAIL_MAX) {
        memcpy(t->tail, p + n - TAIL_MAX, TAIL_MAX);
        t->tail_len = TAIL_MAX;
    } else {
        size_t keep = t->tail_len + n > TAIL_MAX ? TAIL_MAX - n : t->tail_len;
        memmove(t->tail, t->tail + t->tail_len - keep, keep);
        memcpy(t->tail + keep, p, n);
        t->tail_len = keep + n;
    }
    /* Echo whole lines to the log; an overlong line is logged in pieces. */
    for (size_t i = 0; i < n; i++) {
        if (p[i] == '\n') {
            echo_flush(t);
            continue;
        }
        t->echo[t->echo_len++] = p[i];
        if (t->echo_len == ECHO_MAX)
            echo_flush(t);
    }
}

static void on_progress(void *ctx, const char *line, size_t n)
{
    struct task *t = ctx;
    int pct;
    const char *msg;
    size_t msglen;
    if (ad_worker_parse_progress(line, n, &pct, &msg, &msglen) != 0) {
        char *s = ad_worker_clean_text(line, n < 200 ? n : 200);
        ad_warn("job %s: ignored a progress line without a 0-100 number: %s", t->id, s);
        free(s);
        return;
    }
    t->progress = pct;
    free(t->message);
    t->message = NULL;
    if (msg != NULL) {
        t->message = ad_worker_clean_text(msg, msglen);
        ad_client_utf8_cut(t->message, MESSAGE_MAX);
    }
    t->hb_dirty = 1;
}

static void close_fd(int *fd)
{
    if (*fd >= 0)
        close(*fd);
    *fd = -1;
}

/* Read what a pipe has now. Returns after EAGAIN, EOF (then the fd is closed) or a bounded amount. */
static void pipe_read(int *fd, struct ad_worker_lines *l)
{
    char buf[READ_CHUNK];
    for (int k = 0; *fd >= 0 && k < 16; k++) {
        ssize_t n = read(*fd, buf, sizeof(buf));
        if (n > 0) {
            ad_worker_lines_feed(l, buf, (size_t)n);
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return;
        ad_worker_lines_finish(l); /* EOF or a read error: the stream is over */
        close_fd(fd);
    }
}

static void task_io(struct task *t)
{
    while (t->fd_in >= 0 && t->payload_off < t->payload_len) {
        ssize_t n = write(t->fd_in, t->payload + t->payload_off, t->payload_len - t->payload_off);
        if (n > 0) {
            t->payload_off += (size_t)n;
        } else if (n < 0 && errno == EINTR) {
            continue;
        } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            break;
        } else {
            close_fd(&t->fd_in); /* EPIPE: the command does not read its stdin, which is its business */
        }
    }
    if (t->fd_in >= 0 && t->payload_off == t->payload_len)
        close_fd(&t->fd_in);
    pipe_read(&t->fd_out, &t->out_lines);
    pipe_read(&t->fd_err, &t->err_lines);
}

static int set_nonblock(int fd)
{
    int fl = fcntl(fd, F_GETFL);
    return fl < 0 ? -1 : fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

/* Start the command for t. Returns 0, or -1 with errno set (nothing left open). */
static int task_spawn(struct worker *w, struct task *t)
{
    int in[2] = {-1, -1}, out[2] = {-1, -1}, err[2] = {-1, -1};
    if (pipe2(in, O_CLOEXEC) != 0 || pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0) {
        int e = errno;
        int fds[] = {in[0], in[1], out[0], out[1], err[0], err[1]};
        for (size_t i = 0; i < 6; i++)
            if (fds[i] >= 0)
                close(fds[i]);
        errno = e;
        return -1;
    }
    char **envp = ad_calloc(w->nenv + 6, sizeof(char *));
    memcpy(envp, w->envp, w->nenv * sizeof(char *));
    envp[w->nenv] = ad_asprintf("ACCEPTD_JOB_ID=%s", t->id);
    envp[w->nenv + 1] = ad_asprintf("ACCEPTD_JOB_TYPE=%s", t->type);
    envp[w->nenv + 2] = ad_asprintf("ACCEPTD_JOB_ATTEMPT=%d", t->attempt);
    envp[w->nenv + 3] = ad_asprintf("ACCEPTD_URL=%s", w->client.base);
    envp[w->nenv + 4] = ad_asprintf("ACCEPTD_RESULT_FILE=%s/" RESULT_NAME, t->dir);

    posix_spawn_file_actions_t fa;
    posix_spawnattr_t at;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, in[0], 0);
    posix_spawn_file_actions_adddup2(&fa, out[1], 1);
    posix_spawn_file_actions_adddup2(&fa, err[1], 2);
    posix_spawn_file_actions_addclosefrom_np(&fa, 3); /* curl's sockets and other tasks' pipes */
    posix_spawnattr_init(&at);
    sigset_t dflt, none;
    sigemptyset(&dflt);
    sigaddset(&dflt, SIGPIPE);
    sigaddset(&dflt, SIGTERM);
    sigaddset(&dflt, SIGINT);
    sigaddset(&dflt, SIGCHLD);
    sigemptyset(&none);
    posix_spawnattr_setsigdefault(&at, &dflt);
    posix_spawnattr_setsigmask(&at, &none);
    posix_spawnattr_setpgroup(&at, 0);
    posix_spawnattr_setflags(&at, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);
    pid_t pid;
    int rc = posix_spawn(&pid, w->exe, &fa, &at, w->o.command, envp);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&at);
    for (size_t i = w->nenv; i < w->nenv + 5; i++)
        free(envp[i]);
    free(envp);
    close(in[0]);
    close(out[1]);
    close(err[1]);
    if (rc != 0) {
        close(in[1]);
        close(out[0]);
        close(err[0]);
        errno = rc;
        return -1;
    }
    t->pid = pid;
    t->fd_in = in[1];
    t->fd_out = out[0];
    t->fd_err = err[0];
    set_nonblock(t->fd_in);
    set_nonblock(t->fd_out);
    set_nonblock(t->fd_err);
    return 0;
}

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)ftw;
    if ((flag == FTW_DP ? rmdir(path) : unlink(path)) != 0 && errno != ENOENT)
        ad_warn("worker: cannot remove %s: %s", path, strerror(errno));
    return 0;
}

static void upload_end(struct worker *w, struct task *t)
{
    call_free(w, t->up);
    t->up = NULL;
    close_fd(&t->up_fd);
    EVP_MD_CTX_free(t->up_sha);
    t->up_sha = NULL;
    t->uploading = 0;
}

static void task_free(struct worker *w, struct task *t)
{
    upload_end(w, t);
    free(t->up_type);
    if (t->dir != NULL) /* the result file and whatever else the command left there */
        nftw(t->dir, remove_entry, 8, FTW_DEPTH | FTW_PHYS);
    free(t->dir);
    call_free(w, t->hb);
    call_free(w, t->report);
    close_fd(&t->fd_in);
    close_fd(&t->fd_out);
    close_fd(&t->fd_err);
    ad_worker_lines_free(&t->out_lines);
    ad_worker_lines_free(&t->err_lines);
    ad_buf_free(&t->result);
    free(t->id);
    free(t->type);
    free(t->lease_id);
    free(t->payload);
    free(t->message);
    free(t->report_body);
    free(t);
}

/* What this worker leases, max at a time: the members of a lease request but wait. */
static json_t *lease_ask(const struct worker *w, int max)
{
    json_t *types = json_array();
    for (size_t i = 0; i < w->o.ntypes; i++)
        json_array_append_new(types, json_string(w->o.types[i]));
    json_t *ask = json_object();
    json_object_set_new(ask, "types", types);
    json_object_set_new(ask, "max", json_integer(max));
    json_object_set_new(ask, "leaseSeconds", json_integer(w->o.lease_seconds));
    json_object_set_new(ask, "worker", json_string(w->name));
    return ask;
}

/* Send t's report. A :complete or :fail asks for the slot's next job in the same call ("next"), unless the
 * worker is stopping: one commit to wait for instead of two. */
static void report_send(struct worker *w, struct task *t)
{
    char *path = ad_asprintf("/v1/jobs/%s:%s", t->id, call_names[t->report_kind]);
    char *body;
    t->asks_next = !w->stopping && (t->report_kind == CALL_COMPLETE || t->report_kind == CALL_FAIL);
    if (t->asks_next) {
        json_t *ask = lease_ask(w, 1);
        char *text = json_dumps(ask, JSON_COMPACT);
        json_decref(ask);
        body = ad_asprintf("%.*s,\"next\":%s}", (int)strlen(t->report_body) - 1, t->report_body, text);
        free(text);
    } else {
        body = ad_strdup(t->report_body);
    }
    t->report = call_start(w, t->report_kind, t, path, body);
    free(path);
}

/* Decide what to tell the server; body is a JSON object taken over. */
static void task_report(struct worker *w, struct task *t, enum call_kind kind, json_t *body)
{
    json_object_set_new(body, "leaseId", json_string(t->lease_id));
    free(t->report_body);
    t->report_body = json_dumps(body, JSON_COMPACT);
    json_decref(body);
    t->report_kind = kind;
    t->reporting = 1;
    t->report_backoff = BACKOFF_MIN_MS;
    call_free(w, t->hb);
    t->hb = NULL;
    report_send(w, t);
}

static void task_fail(struct worker *w, struct task *t, const char *code, const char *title, const char *detail,
                      int retryable)
{
    char *type = ad_asprintf(AD_CLIENT_PROBLEM_BASE "%s", code);
    json_t *problem = json_object();
    json_object_set_new(problem, "type", json_string(type));
    json_object_set_new(problem, "title", json_string(title));
    json_object_set_new(problem, "status", json_integer(500));
    json_object_set_new(problem, "detail", json_string(detail));
    json_object_set_new(problem, "code", json_string(code));
    free(type);
    json_t *body = json_object();
    json_object_set_new(body, "error", problem);
    json_object_set_new(body, "retryable", json_boolean(retryable));
    ad_info("job %s: reporting failure (%s%s): %.300s", t->id, code, retryable ? ", retryable" : "", detail);
    task_report(w, t, CALL_FAIL, body);
}

/* "exit status 3" or "killed by signal 9 (Killed)", then ": <stderr tail>" when there is one. Caller frees. */
static char *exit_detail(struct task *t, const char *prefix)
{
    char how[96];
    if (WIFEXITED(t->wstatus))
        snprintf(how, sizeof(how), "exit status %d", WEXITSTATUS(t->wstatus));
    else if (WIFSIGNALED(t->wstatus))
        snprintf(how, sizeof(how), "killed by signal %d (%s)", WTERMSIG(t->wstatus), strsignal(WTERMSIG(t->wstatus)));
    else
        snprintf(how, sizeof(how), "ended with wait status %d", t->wstatus);
    size_t n = t->tail_len;
    while (n > 0 && (t->tail[n - 1] == '\n' || t->tail[n - 1] == '\r' || t->tail[n - 1] == ' '))
        n--;
    char *tail = ad_worker_clean_text(t->tail, n);
    char *d = ad_asprintf("%s%s%s%s", prefix, how, tail[0] != '\0' ? ": " : "", tail);
    free(tail);
    return d;
}

static void upload_begin(struct worker *w, struct task *t, int fd);

/* The command is over and its pipes are drained: tell the server. */
static void task_finished(struct worker *w, struct task *t)
{
    int64_t ms = ad_mono_ms() - t->started;
    if (t->why == END_LOST) {
        ad_warn("job %s: dropped: the lease is no longer this worker's", t->id);
        t->done = 1;
        return;
    }
    if (t->why == END_CANCEL) {
        ad_info("job %s: command stopped after a cancel request; acknowledging", t->id);
        task_report(w, t, CALL_CANCEL, json_object());
        return;
    }
    int ok = WIFEXITED(t->wstatus) && WEXITSTATUS(t->wstatus) == 0;
    if (!ok) {
        char *d = exit_detail(t, t->why == END_SHUTDOWN ? "the worker stopped before the command finished: " : "");
        if (t->why == END_SHUTDOWN)
            task_fail(w, t, "worker-shutdown", "Worker shut down", d, 1);
        else
            task_fail(w, t, "command-failed", "Command failed", d, 1);
        free(d);
        return;
    }
    /* A result file, when the command left one, is the result; stdout is then not read as JSON. */
    char *file = t->dir != NULL ? ad_asprintf("%s/" RESULT_NAME, t->dir) : NULL;
    int fd = file != NULL ? open(file, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK) : -1;
    int open_errno = file != NULL ? errno : ENOENT;
    free(file);
    if (fd >= 0) {
        ad_info("job %s: command succeeded after %lld ms; uploading its result file", t->id, (long long)ms);
        upload_begin(w, t, fd);
        return;
    }
    if (open_errno != ENOENT) {
        char *d = ad_asprintf("cannot open the result file ACCEPTD_RESULT_FILE: %s", strerror(open_errno));
        task_fail(w, t, "result-file-unreadable", "Result file unreadable", d, 0);
        free(d);
        return;
    }
    if (t->result.toobig) {
        char *d = ad_asprintf("the command printed more than %zu bytes on stdout; the result is limited to that",
                              (size_t)RESULT_MAX);
        task_fail(w, t, "output-too-large", "Output too large", d, 0);
        free(d);
        return;
    }
    json_error_t jerr;
    json_t *result =
        t->result.len > 0 ? json_loadb(t->result.data, t->result.len, JSON_DECODE_ANY | JSON_ALLOW_NUL, &jerr) : NULL;
    if (result == NULL) {
        char *d;
        if (t->result.len == 0) {
            d = ad_strdup("the command exited 0 but printed nothing on stdout; the result must be a JSON document");
        } else {
            char *start = ad_worker_clean_text(t->result.data, t->result.len < 120 ? t->result.len : 120);
            ad_client_utf8_cut(start, 100);
            d = ad_asprintf("the command's output was not JSON (%s at line %d, column %d); stdout began with: %s",
                            jerr.text, jerr.line, jerr.column, start);
            free(start);
        }
        task_fail(w, t, "output-not-json", "Output was not JSON", d, 0);
        free(d);
        return;
    }
    ad_info("job %s: command succeeded after %lld ms; completing", t->id, (long long)ms);
    json_t *body = json_object();
    json_object_set_new(body, "result", result);
    task_report(w, t, CALL_COMPLETE, body);
}

static void task_start(struct worker *w, json_t *job, const char *lease_id)
{
    const char *id = json_string_value(json_object_get(job, "id"));
    const char *type = json_string_value(json_object_get(job, "type"));
    if (id == NULL || !job_path_ok(id) || lease_id == NULL) {
        ad_error("worker: ignoring a lease entry without a usable job id and leaseId");
        return;
    }
    struct task *t = ad_calloc(1, sizeof(*t));
    t->w = w;
    t->id = ad_strdup(id);
    t->type = ad_strdup(type != NULL ? type : "");
    t->lease_id = ad_strdup(lease_id);
    t->attempt = (int)json_integer_value(json_object_get(job, "attempt"));
    t->started = ad_mono_ms();
    t->lease_until = t->started + (int64_t)w->o.lease_seconds * 1000;
    t->hb_due = t->started + interval_ms(w);
    t->progress = -1;
    t->fd_in = t->fd_out = t->fd_err = t->up_fd = -1;
    json_t *payload = json_object_get(job, "payload");
    char *text = payload != NULL ? json_dumps(payload, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
    t->payload = ad_asprintf("%s\n", text != NULL ? text : "{}");
    free(text);
    t->payload_len = strlen(t->payload);
    ad_buf_init(&t->result, RESULT_MAX);
    ad_worker_lines_init(&t->out_lines, on_out_text, on_progress, t);
    ad_worker_lines_init(&t->err_lines, on_err_text, on_progress, t);
    t->next = w->tasks;
    w->tasks = t;
    const char *tmp = getenv("TMPDIR");
    t->dir = ad_asprintf("%s/acceptd-job-XXXXXX", tmp != NULL && tmp[0] == '/' ? tmp : "/tmp");
    if (mkdtemp(t->dir) == NULL) {
        char *d = ad_asprintf("cannot create a directory for the result file (%s): %s", t->dir, strerror(errno));
        free(t->dir);
        t->dir = NULL;
        ad_error("job %s: %s", t->id, d);
        task_fail(w, t, "command-failed", "Command failed", d, 1);
        free(d);
        return;
    }
    if (task_spawn(w, t) != 0) {
        char *d = ad_asprintf("cannot start %s: %s", w->exe, strerror(errno));
        ad_error("job %s: %s", t->id, d);
        task_fail(w, t, "command-failed", "Command failed", d, 1);
        free(d);
        return;
    }
    ad_info("job %s (%s, attempt %d): started pid %ld", t->id, t->type, t->attempt, (long)t->pid);
    task_io(t);
}

/* Slots in use: commands running, and reports that bring their slot's next job. */
static int slots_taken(const struct worker *w)
{
    int n = 0;
    for (const struct task *t = w->tasks; t != NULL; t = t->next)
        n += (!t->reporting || t->asks_next) && !t->done;
    return n;
}

/* ---- answers ---- */

/* Start a task for every lease in leases, the "leases" array of a lease answer or of a report's with next.
 * Returns how many. */
static size_t start_leased(struct worker *w, json_t *leases)
{
    for (size_t i = 0; i < json_array_size(leases); i++) {
        json_t *l = json_array_get(leases, i);
        task_start(w, json_object_get(l, "job"), json_string_value(json_object_get(l, "leaseId")));
    }
    return json_array_size(leases);
}

static void lease_done(struct worker *w, struct call *c, CURLcode rc, long status)
{
    int64_t now = ad_mono_ms();
    if (transient(rc, status)) {
        char *why = describe(c, rc, status);
        if (!w->lease_failing)
            ad_warn("worker: cannot lease from %s (%s); retrying", w->client.base, why);
        free(why);
        w->lease_failing = 1;
        w->lease_due = now + w->lease_backoff;
        w->lease_backoff = w->lease_backoff * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : w->lease_backoff * 2;
        return;
    }
    if (w->lease_failing)
        ad_info("worker: leasing from %s again", w->client.base);
    w->lease_failing = 0;
    w->lease_backoff = BACKOFF_MIN_MS;
    if (status == 204) {
        /* Nothing came. A server that does not hold lease requests (wait 0, or maxWaitSeconds 0) must not
         * turn this into a busy loop: ask at most once a second. */
        if (c->sent + 1000 > now)
            w->lease_due = c->sent + 1000;
        return;
    }
    if (status != 200) {
        char *why = describe(c, rc, status);
        ad_error("worker: the server refused the lease request (%s); stopping", why);
        free(why);
        w->exit_code = 1;
        if (!w->stopping) {
            w->stopping = 1;
            w->stop_deadline = now + (int64_t)w->o.grace_seconds * 1000;
        }
        return;
    }
    json_error_t jerr;
    json_t *root = json_loadb(c->resp.data != NULL ? c->resp.data : "", c->resp.len, 0, &jerr);
    json_t *leases = json_object_get(root, "leases");
    if (!json_is_array(leases))
        ad_error("worker: a lease answer without a leases array (%s); its jobs wait for their lease to expire",
                 root == NULL ? jerr.text : "no array");
    start_leased(w, leases);
    json_decref(root);
}

static void heartbeat_done(struct worker *w, struct task *t, struct call *c, CURLcode rc, long status)
{
    int64_t now = ad_mono_ms();
    if (t->reporting)
        return; /* the command ended while this was under way; the report decides */
    if (transient(rc, status)) {
        char *why = describe(c, rc, status);
        ad_warn("job %s: heartbeat failed (%s); retrying", t->id, why);
        free(why);
        t->hb_due = now + (interval_ms(w) < 1000 ? interval_ms(w) : 1000);
        return;
    }
    if (status == 409 || status == 404 || status == 410) {
        char *why = describe(c, rc, status);
        ad_warn("job %s: the lease was taken away (%s); stopping the command", t->id, why);
        free(why);
        task_terminate(t, END_LOST);
        return;
    }
    if (status != 200) {
        char *why = describe(c, rc, status);
        ad_warn("job %s: heartbeat refused (%s)", t->id, why);
        free(why);
        return;
    }
    t->lease_until = c->sent + (int64_t)w->o.lease_seconds * 1000;
    json_t *root = json_loadb(c->resp.data != NULL ? c->resp.data : "", c->resp.len, 0, NULL);
    if (json_is_true(json_object_get(root, "cancelRequested")) && t->why < END_CANCEL) {
        ad_info("job %s: cancel requested; sending SIGTERM to the command", t->id);
        task_terminate(t, END_CANCEL);
    }
    json_decref(root);
}

static void report_done(struct worker *w, struct task *t, struct call *c, CURLcode rc, long status)
{
    int64_t now = ad_mono_ms();
    const char *what = call_names[t->report_kind];
    if (status >= 200 && status < 300 && rc == CURLE_OK) {
        json_t *root = json_loadb(c->resp.data != NULL ? c->resp.data : "", c->resp.len, 0, NULL);
        /* With next: {"job", "leases"}. A daemon that predates next answers the job alone. */
        json_t *job = json_object_get(root, "job");
        const char *st = json_string_value(json_object_get(json_is_object(job) ? job : root, "status"));
        ad_info("job %s: %s accepted; the job is %s", t->id, what, st != NULL ? st : "?");
        t->done = 1;
        if (t->asks_next && start_leased(w, json_object_get(root, "leases")) > 0)
            ad_info("job %s: the next job came with the %s", t->id, what);
        json_decref(root);
        return;
    }
    char *why = describe(c, rc, status);
    if (transient(rc, status)) {
        if (now + t->report_backoff < t->lease_until) {
            ad_warn("job %s: %s failed (%s); retrying", t->id, what, why);
            t->report_due = now + t->report_backoff;
            t->report_backoff = t->report_backoff * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : t->report_backoff * 2;
        } else {
            ad_error("job %s: giving up on %s (%s): the lease has run out, the server will requeue the job", t->id,
                     what, why);
            t->done = 1;
        }
    } else if (status == 409 || status == 404 || status == 410) {
        ad_warn("job %s: %s refused (%s): the job is no longer this worker's", t->id, what, why);
        t->done = 1;
    } else if (t->report_kind == CALL_COMPLETE && status != 401 && status != 403) {
        /* The result itself was refused (413 too large, 422): the job must still end. */
        char *d = ad_asprintf("the server refused the command's result: %s", why);
        task_fail(w, t, "result-rejected", "Result rejected", d, 0);
        free(d);
    } else {
        ad_error("job %s: %s refused (%s); the job is left to its lease expiry", t->id, what, why);
        t->done = 1;
    }
    free(why);
}

/* ---- the result file ---- */

/* libcurl asks for the next bytes of the part in flight: read them from the file where they are. */
static size_t upload_read(char *buf, size_t size, size_t n, void *ud)
{
    struct task *t = ud;
    uint64_t left = t->part_len - t->part_pos;
    size_t want = (uint64_t)(size * n) < left ? size * n : (size_t)left;
    if (want == 0)
        return 0;
    uint64_t at = t->part_start + t->part_pos;
    ssize_t r;
    do
        r = pread(t->up_fd, buf, want, (off_t)at);
    while (r < 0 && errno == EINTR);
    if (r <= 0) {
        t->up_errno = r < 0 ? errno : ENODATA; /* 0: the file shrank under us */
        return CURL_READFUNC_ABORT;
    }
    /* Each byte is hashed once, in order; a part sent again (a retry, a rewind) is not hashed again. */
    if (at <= t->up_hashed && t->up_hashed < at + (uint64_t)r) {
        size_t skip = (size_t)(t->up_hashed - at);
        if (!EVP_DigestUpdate(t->up_sha, buf + skip, (size_t)r - skip))
            abort();
        t->up_hashed = at + (uint64_t)r;
    }
    t->part_pos += (uint64_t)r;
    return (size_t)r;
}

/* libcurl rewinds a part it must send again on a new connection. */
static int upload_seek(void *ud, curl_off_t off, int origin)
{
    struct task *t = ud;
    if (origin != SEEK_SET || off < 0 || (uint64_t)off > t->part_len)
        return CURL_SEEKFUNC_CANTSEEK;
    t->part_pos = (uint64_t)off;
    return CURL_SEEKFUNC_OK;
}

/* PUT the part of the file from t->up_off. */
static void upload_send(struct worker *w, struct task *t)
{
    struct call *c = ad_calloc(1, sizeof(*c));
    c->kind = CALL_UPLOAD;
    c->task = t;
    c->sent = ad_mono_ms();
    t->part_start = t->up_off;
    t->part_len = t->up_size - t->up_off < w->part_max ? t->up_size - t->up_off : w->part_max;
    t->part_pos = 0;
    t->up_errno = 0;
    ad_buf_init(&c->resp, RESPONSE_MAX);
    char line[512];
    struct curl_slist *h = NULL;
    snprintf(line, sizeof(line), "Content-Type: %s", t->up_type);
    h = curl_slist_append(h, line);
    snprintf(line, sizeof(line), "Lease-Id: %s", t->lease_id);
    h = curl_slist_append(h, line);
    if (t->up_off > 0) { /* absent: a fresh upload */
        snprintf(line, sizeof(line), "Upload-Offset: %llu", (unsigned long long)t->up_off);
        h = curl_slist_append(h, line);
    }
    h = curl_slist_append(h, t->part_start + t->part_len == t->up_size ? "Upload-Complete: ?1" : "Upload-Complete: ?0");
    c->headers = ad_client_headers(&w->client, h);
    char *path = ad_asprintf("/v1/jobs/%s/result", t->id);
    c->easy = ad_client_easy(&w->client, path, c->headers, &c->resp, c->errbuf, 0);
    free(path);
    curl_easy_setopt(c->easy, CURLOPT_UPLOAD, 1L);
    curl_easy_setopt(c->easy, CURLOPT_READFUNCTION, upload_read);
    curl_easy_setopt(c->easy, CURLOPT_READDATA, t);
    curl_easy_setopt(c->easy, CURLOPT_SEEKFUNCTION, upload_seek);
    curl_easy_setopt(c->easy, CURLOPT_SEEKDATA, t);
    curl_easy_setopt(c->easy, CURLOPT_INFILESIZE_LARGE, (curl_off_t)t->part_len);
    curl_easy_setopt(c->easy, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(c->easy, CURLOPT_LOW_SPEED_TIME, (long)UPLOAD_STALL_S);
    curl_easy_setopt(c->easy, CURLOPT_PRIVATE, c);
    curl_multi_add_handle(w->multi, c->easy);
    t->up = c;
}

/* The Content-Type of the result file: the first line of RESULT_NAME.type when the command wrote one, else
 * application/octet-stream. Returns it (the caller frees) or NULL with err set when the sidecar is unusable. */
static char *result_type(const struct task *t, char *err, size_t errlen)
{
    char *path = ad_asprintf("%s/" RESULT_NAME ".type", t->dir);
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    free(path);
    if (fd < 0 && errno == ENOENT)
        return ad_strdup("application/octet-stream");
    char buf[RESULT_TYPE_MAX + 2];
    ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
    int e = errno;
    if (fd >= 0)
        close(fd);
    if (n < 0) {
        snprintf(err, errlen, "cannot read the result file's type (ACCEPTD_RESULT_FILE.type): %s", strerror(e));
        return NULL;
    }
    buf[n] = '\0';
    size_t len = strcspn(buf, "\r\n");
    while (len > 0 && is_blank(buf[len - 1]))
        len--;
    size_t start = 0;
    while (start < len && is_blank(buf[start]))
        start++;
    int ok = len > start && len - start <= RESULT_TYPE_MAX && memchr(buf + start, '/', len - start) != NULL;
    for (size_t i = start; ok && i < len; i++)
        ok = buf[i] >= 0x20 && buf[i] < 0x7f;
    if (!ok) {
        snprintf(err, errlen,
                 "the result file's type (ACCEPTD_RESULT_FILE.type) is not a media type such as text/csv on one "
                 "line of at most %d printable ASCII characters",
                 RESULT_TYPE_MAX);
        return NULL;
    }
    return ad_strndup(buf + start, len - start);
}

static void upload_begin(struct worker *w, struct task *t, int fd)
{
    struct stat sb;
    char err[256];
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        task_fail(w, t, "result-file-unreadable", "Result file unreadable", "ACCEPTD_RESULT_FILE is not a regular file",
                  0);
        return;
    }
    char *type = result_type(t, err, sizeof(err));
    if (type == NULL) {
        close(fd);
        task_fail(w, t, "result-file-unreadable", "Result file unreadable", err, 0);
        return;
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0)
        fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    free(t->up_type);
    t->up_type = type;
    t->up_fd = fd;
    t->up_size = (uint64_t)sb.st_size;
    t->up_off = 0;
    t->up_hashed = 0;
    t->up_sha = EVP_MD_CTX_new();
    if (t->up_sha == NULL || !EVP_DigestInit_ex2(t->up_sha, EVP_sha256(), NULL))
        abort();
    t->up_resumes = 0;
    t->up_backoff = BACKOFF_MIN_MS;
    t->up_due = 0;
    t->uploading = 1;
    ad_info("job %s: uploading %llu bytes (%s) in parts of up to %llu bytes", t->id, (unsigned long long)t->up_size,
            t->up_type, (unsigned long long)w->part_max);
}

/* The last part was kept: check the server's size and digest against what was read, then complete. */
static void upload_finished(struct worker *w, struct task *t, struct call *c)
{
    json_t *root = json_loadb(c->resp.data != NULL ? c->resp.data : "", c->resp.len, 0, NULL);
    json_t *size = json_object_get(root, "size");
    const char *digest = json_string_value(json_object_get(root, "digest"));
    uint8_t mine[AD_SHA256_LEN];
    unsigned int hn = 0;
    if (!EVP_DigestFinal_ex(t->up_sha, mine, &hn) || hn != AD_SHA256_LEN)
        abort();
    char b64[48], want[64];
    EVP_EncodeBlock((unsigned char *)b64, mine, (int)sizeof(mine));
    snprintf(want, sizeof(want), "sha-256=:%s:", b64);
    int same = t->up_hashed == t->up_size && json_is_integer(size) &&
               (uint64_t)json_integer_value(size) == t->up_size && digest != NULL && strcmp(digest, want) == 0;
    json_decref(root);
    upload_end(w, t);
    if (!same) {
        char *d = ad_asprintf("the server's copy of the result file is not what was read (%llu bytes, %s); was "
                              "the file changed during the upload?",
                              (unsigned long long)t->up_size, want);
        task_fail(w, t, "result-upload-mismatch", "Result upload mismatch", d, 1);
        free(d);
        return;
    }
    ad_info("job %s: result file uploaded (%llu bytes, %s); completing", t->id, (unsigned long long)t->up_size, want);
    json_t *body = json_object();
    json_object_set_new(body, "artifact", json_true());
    task_report(w, t, CALL_COMPLETE, body);
}

/* Upload-Offset of an answer, or -1 when absent or not a number. */
static long long answer_offset(struct call *c)
{
    struct curl_header *h;
    long long n;
    if (curl_easy_header(c->easy, "Upload-Offset", 0, CURLH_HEADER, -1, &h) != CURLHE_OK ||
        ad_parse_int(h->value, strlen(h->value), 0, INT64_MAX, &n) != 0)
        return -1;
    return n;
}

/*
 * The part size to try after a 413 to a part of len bytes, or 0 when smaller parts would not help. The daemon
 * names its cap ("at most N bytes (limits.maxUploadPartBytes)"); a 413 about the whole artifact names
 * limits.maxResultBytes; any other 413 (one from in front of the daemon's handler, whose limit is not said)
 * halves the part, down to UPLOAD_PART_MIN.
 */
static uint64_t smaller_part(const struct call *c, uint64_t len)
{
    json_t *p = json_loadb(c->resp.data != NULL ? c->resp.data : "", c->resp.len, 0, NULL);
    const char *d = json_string_value(json_object_get(p, "detail"));
    const char *at = d != NULL && strstr(d, "maxUploadPartBytes") != NULL ? strstr(d, "at most ") : NULL;
    long long n = 0;
    if (at != NULL) {
        at += strlen("at most ");
        if (ad_parse_int(at, strspn(at, "0123456789"), 1, INT64_MAX, &n) != 0)
            n = 0;
    } else if ((d == NULL || strstr(d, "maxResultBytes") == NULL) && len / 2 >= UPLOAD_PART_MIN) {
        n = (long long)(len / 2);
    }
    json_decref(p);
    return (uint64_t)n < len ? (uint64_t)n : 0;
}

static void upload_done(struct worker *w, struct task *t, struct call *c, CURLcode rc, long status)
{
    int64_t now = ad_mono_ms();
    int last = t->part_start + t->part_len == t->up_size;
    if (rc == CURLE_OK && (status == 200 || status == 204)) {
        long long off = answer_offset(c);
        t->up_resumes = 0;
        t->up_backoff = BACKOFF_MIN_MS;
        if (last) {
            upload_finished(w, t, c);
        } else {
            t->up_off = off >= 0 && (uint64_t)off <= t->up_size ? (uint64_t)off : t->part_start + t->part_len;
            t->up_due = now;
        }
        return;
    }
    char *why = describe(c, rc, status);
    long long off = status == 409 ? answer_offset(c) : -1;
    json_t *p = off >= 0 ? json_loadb(c->resp.data != NULL ? c->resp.data : "", c->resp.len, 0, NULL) : NULL;
    const char *code = json_string_value(json_object_get(p, "code"));
    int mismatch = code != NULL && strcmp(code, "upload-offset-mismatch") == 0;
    json_decref(p);
    if (rc == CURLE_OK && mismatch && (uint64_t)off <= t->up_size && ++t->up_resumes <= UPLOAD_RESUMES_MAX) {
        /* The server has a different number of bytes than we thought (a part whose answer was lost): go on
         * from where it is. */
        ad_warn("job %s: the server has %lld bytes of the result file; resuming from there", t->id, off);
        t->up_off = (uint64_t)off;
        t->up_due = now;
    } else if (t->up_errno != 0) {
        char *d = ad_asprintf("cannot read the result file at byte %llu: %s",
                              (unsigned long long)(t->part_start + t->part_pos), strerror(t->up_errno));
        upload_end(w, t);
        task_fail(w, t, "result-file-unreadable", "Result file unreadable", d, 0);
        free(d);
    } else if (transient(rc, status)) {
        if (now + t->up_backoff < t->lease_until) {
            ad_warn("job %s: upload of the result file failed (%s); retrying", t->id, why);
            t->up_due = now + t->up_backoff;
            t->up_backoff = t->up_backoff * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : t->up_backoff * 2;
        } else {
            ad_error("job %s: giving up on the upload (%s): the lease has run out, the server will requeue the job",
                     t->id, why);
            upload_end(w, t);
            t->done = 1;
        }
    } else if (rc == CURLE_OK && status == 413 && smaller_part(c, t->part_len) > 0) {
        w->part_max = smaller_part(c, t->part_len);
        ad_warn("job %s: a part of %llu bytes was too large (%s); sending parts of %llu bytes", t->id,
                (unsigned long long)t->part_len, why, (unsigned long long)w->part_max);
        t->up_due = now;
    } else if ((status == 409 && !mismatch) || status == 404 || status == 410) {
        ad_warn("job %s: upload refused (%s): the job is no longer this worker's", t->id, why);
        upload_end(w, t);
        t->done = 1;
    } else {
        /* The file itself was refused (413 too large, a 400, or offsets that do not converge). */
        char *d = ad_asprintf("the server refused the command's result file: %s", why);
        upload_end(w, t);
        task_fail(w, t, "result-rejected", "Result rejected", d, 0);
        free(d);
    }
    free(why);
}

static void process_answers(struct worker *w)
{
    CURLMsg *m;
    int left;
    while ((m = curl_multi_info_read(w->multi, &left)) != NULL) {
        if (m->msg != CURLMSG_DONE)
            continue;
        CURLcode rc = m->data.result;
        struct call *c = NULL;
        curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, (char **)&c);
        long status = 0;
        curl_easy_getinfo(m->easy_handle, CURLINFO_RESPONSE_CODE, &status);
        struct task *t = c->task;
        if (c->kind == CALL_LEASE) {
            w->lease = NULL;
            lease_done(w, c, rc, status);
        } else if (c->kind == CALL_HEARTBEAT) {
            t->hb = NULL;
            heartbeat_done(w, t, c, rc, status);
        } else if (c->kind == CALL_UPLOAD) {
            t->up = NULL;
            upload_done(w, t, c, rc, status);
        } else {
            t->report = NULL;
            report_done(w, t, c, rc, status);
        }
        call_free(w, c);
    }
}

/* ---- the loop ---- */

static void heartbeat_send(struct worker *w, struct task *t, int64_t now)
{
    json_t *body = json_object();
    json_object_set_new(body, "leaseId", json_string(t->lease_id));
    json_object_set_new(body, "leaseSeconds", json_integer(w->o.lease_seconds));
    if (t->progress >= 0)
        json_object_set_new(body, "progress", json_integer(t->progress));
    if (t->message != NULL)
        json_object_set_new(body, "message", json_string(t->message));
    char *text = json_dumps(body, JSON_COMPACT);
    json_decref(body);
    char *path = ad_asprintf("/v1/jobs/%s:heartbeat", t->id);
    t->hb = call_start(w, CALL_HEARTBEAT, t, path, text);
    free(path);
    t->hb_dirty = 0;
    t->hb_last = now;
    t->hb_due = now + interval_ms(w);
}

/* Renew t's lease when due (or sooner for a progress line); lowers *next to when it will be. */
static void heartbeat_tick(struct worker *w, struct task *t, int64_t now, int64_t *next)
{
    if (t->hb != NULL || t->why == END_LOST)
        return;
    int64_t due = t->hb_due;
    if (t->hb_dirty && t->hb_last + PROGRESS_SPACING_MS < due)
        due = t->hb_last + PROGRESS_SPACING_MS;
    if (now >= due)
        heartbeat_send(w, t, now);
    else if (due < *next)
        *next = due;
}

/* A task whose command is over and whose result file is on its way: the lease is renewed as while the command
 * ran, a lost lease or a cancel ends the upload, and the next part goes when the last one was kept. */
static void upload_tick(struct worker *w, struct task *t, int64_t now, int64_t *next)
{
    if (t->why == END_LOST) {
        ad_warn("job %s: upload dropped: the lease is no longer this worker's", t->id);
        upload_end(w, t);
        t->done = 1;
        return;
    }
    if (t->why == END_CANCEL) {
        ad_info("job %s: upload stopped after a cancel request; acknowledging", t->id);
        upload_end(w, t);
        task_report(w, t, CALL_CANCEL, json_object());
        return;
    }
    heartbeat_tick(w, t, now, next);
    if (t->up != NULL)
        return;
    if (now >= t->up_due)
        upload_send(w, t);
    else if (t->up_due < *next)
        *next = t->up_due;
}

static void lease_send(struct worker *w, int free_slots)
{
    json_t *body = lease_ask(w, free_slots);
    json_object_set_new(body, "wait", json_integer(w->o.lease_wait));
    char *text = json_dumps(body, JSON_COMPACT);
    json_decref(body);
    w->lease = call_start(w, CALL_LEASE, NULL, "/v1/leases", text);
}

static void on_stop_signal(struct worker *w, int64_t now)
{
    w->signals_seen++;
    if (w->signals_seen == 1) {
        if (!w->stopping) {
            w->stopping = 1;
            w->stop_deadline = now + (int64_t)w->o.grace_seconds * 1000;
        }
        ad_info("worker: stopping: no new leases; %d running command(s) get %d s to finish", slots_taken(w),
                w->o.grace_seconds);
        return;
    }
    /* A second signal: do not wait any more, but still report every job. */
    ad_info("worker: second signal: killing the running commands now");
    w->stopping = 1;
    w->stop_deadline = now;
    call_free(w, w->lease);
    w->lease = NULL;
    for (struct task *t = w->tasks; t != NULL; t = t->next) {
        if (t->pid > 0) {
            task_terminate(t, END_SHUTDOWN);
            t->kill_at = now;
        }
    }
}

static void reap(struct worker *w)
{
    for (;;) {
        int st;
        pid_t pid = waitpid(-1, &st, WNOHANG);
        if (pid <= 0)
            return;
        for (struct task *t = w->tasks; t != NULL; t = t->next) {
            if (t->pid == pid) {
                t->pid = 0;
                t->wstatus = st;
            }
        }
    }
}

/* Timers and state changes of one loop turn. Returns the ms until the next thing is due. */
static int64_t step(struct worker *w)
{
    int64_t now = ad_mono_ms();
    int64_t next = now + LOOP_MAX_SLEEP_MS;
    reap(w);
    for (struct task *t = w->tasks; t != NULL; t = t->next) {
        if (t->reporting || t->done)
            continue;
        if (t->uploading) {
            upload_tick(w, t, now, &next);
            continue;
        }
        task_io(t);
        if (t->pid == 0) {
            /* Exited: what it wrote is in the pipes; anything later comes from processes it left behind. */
            task_io(t);
            close_fd(&t->fd_in);
            if (t->fd_out >= 0) {
                ad_worker_lines_finish(&t->out_lines);
                close_fd(&t->fd_out);
            }
            if (t->fd_err >= 0) {
                ad_worker_lines_finish(&t->err_lines);
                close_fd(&t->fd_err);
            }
            echo_flush(t);
            task_finished(w, t);
            continue;
        }
        if (w->stopping && now >= w->stop_deadline && t->why == END_NONE) {
            ad_info("job %s: still running at the end of the grace period; sending SIGTERM", t->id);
            task_terminate(t, END_SHUTDOWN);
        }
        if (t->kill_at != 0 && !t->killed) {
            if (now >= t->kill_at) {
                ad_warn("job %s: the command outlived its grace period; sending SIGKILL", t->id);
                kill(-t->pid, SIGKILL);
                t->killed = 1;
            } else if (t->kill_at < next) {
                next = t->kill_at;
            }
        }
        heartbeat_tick(w, t, now, &next);
    }
    for (struct task *t = w->tasks; t != NULL; t = t->next) {
        if (t->reporting && !t->done && t->report == NULL) {
            if (now >= t->report_due)
                report_send(w, t);
            else if (t->report_due < next)
                next = t->report_due;
        }
    }
    for (struct task **pp = &w->tasks; *pp != NULL;) {
        struct task *t = *pp;
        if (t->done) {
            *pp = t->next;
            task_free(w, t);
        } else {
            pp = &t->next;
        }
    }
    if (w->stopping && w->stop_deadline > now && w->stop_deadline < next)
        next = w->stop_deadline;
    int free_slots = w->o.concurrency - slots_taken(w);
    if (!w->stopping && w->lease == NULL && free_slots > 0) {
        if (now >= w->lease_due)
            lease_send(w, free_slots);
        else if (w->lease_due < next)
            next = w->lease_due;
    }
    return next - now < 0 ? 0 : next - now;
}

static int run(struct worker *w)
{
    struct curl_waitfd *fds = NULL;
    size_t cap = 0;
    for (;;) {
        int64_t now = ad_mono_ms();
        while (w->signals_seen < sig_stop_count) {
            if (w->signals_seen >= 2) {
                ad_error("worker: third signal: exiting now; unreported jobs wait for their lease to expire");
                for (struct task *t = w->tasks; t != NULL; t = t->next)
                    if (t->pid > 0)
                        kill(-t->pid, SIGKILL);
                free(fds);
                return 1;
            }
            on_stop_signal(w, now);
        }
        int64_t timeout = step(w);
        if (w->stopping && w->tasks == NULL && w->lease == NULL)
            break;

        size_t need = 1;
        for (struct task *t = w->tasks; t != NULL; t = t->next)
            need += 3;
        if (need > cap) {
            cap = need * 2;
            fds = ad_realloc(fds, cap * sizeof(*fds));
        }
        size_t n = 0;
        fds[n++] = (struct curl_waitfd){.fd = sig_fd[0], .events = CURL_WAIT_POLLIN};
        for (struct task *t = w->tasks; t != NULL; t = t->next) {
            if (t->fd_in >= 0)
                fds[n++] = (struct curl_waitfd){.fd = t->fd_in, .events = CURL_WAIT_POLLOUT};
            if (t->fd_out >= 0)
                fds[n++] = (struct curl_waitfd){.fd = t->fd_out, .events = CURL_WAIT_POLLIN};
            if (t->fd_err >= 0)
                fds[n++] = (struct curl_waitfd){.fd = t->fd_err, .events = CURL_WAIT_POLLIN};
        }
        /* revents is not read: curl drops POLLHUP, so every pipe is simply tried each turn (non-blocking). */
        curl_multi_poll(w->multi, fds, (unsigned)n, (int)timeout, NULL);
        char drain[64];
        while (read(sig_fd[0], drain, sizeof(drain)) > 0)
            ;
        int still;
        curl_multi_perform(w->multi, &still);
        process_answers(w);
    }
    free(fds);
    return w->exit_code;
}

/* The command as an executable path, searched in PATH when it has no slash. The caller frees. */
static char *resolve_command(const char *cmd)
{
    struct stat sb;
    if (strchr(cmd, '/') != NULL)
        return access(cmd, X_OK) == 0 && stat(cmd, &sb) == 0 && S_ISREG(sb.st_mode) ? ad_strdup(cmd) : NULL;
    const char *path = getenv("PATH");
    if (path == NULL || path[0] == '\0')
        path = "/usr/local/bin:/usr/bin:/bin";
    for (const char *p = path;;) {
        const char *end = strchr(p, ':');
        size_t len = end != NULL ? (size_t)(end - p) : strlen(p);
        char *cand = len == 0 ? ad_asprintf("./%s", cmd) : ad_asprintf("%.*s/%s", (int)len, p, cmd);
        if (access(cand, X_OK) == 0 && stat(cand, &sb) == 0 && S_ISREG(sb.st_mode))
            return cand;
        free(cand);
        if (end == NULL)
            return NULL;
        p = end + 1;
    }
}

extern char **environ;

static int env_ours(const char *e)
{
    static const char *const names[] = {"ACCEPTD_KEY=",      "ACCEPTD_URL=",         "ACCEPTD_JOB_ID=",
                                        "ACCEPTD_JOB_TYPE=", "ACCEPTD_JOB_ATTEMPT=", "ACCEPTD_RESULT_FILE="};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (strncmp(e, names[i], strlen(names[i])) == 0)
            return 1;
    return 0;
}

static void usage(FILE *f)
{
    fprintf(
        f, "usage: acceptd worker --url URL [--key KEY] --type TYPE [--type TYPE2 ...] [--concurrency N]\n"
           "                      [--lease-seconds S] [--lease-wait S] [--grace S] [--name NAME] -- COMMAND [ARGS...]\n"
           "Runs COMMAND once per leased job: the payload on stdin, ACCEPTD_JOB_ID, ACCEPTD_JOB_TYPE,\n"
           "ACCEPTD_JOB_ATTEMPT and ACCEPTD_URL in the environment; a line `::progress <0-100> [message]` on\n"
           "stdout or stderr reports progress; the JSON printed on stdout is the result, unless the command\n"
           "writes a file to $ACCEPTD_RESULT_FILE (its media type in $ACCEPTD_RESULT_FILE.type): that file is\n"
           "then uploaded as the job's result artifact.\n"
           "ACCEPTD_URL and ACCEPTD_KEY are read from the environment when not given. See docs/workers.md.\n");
}

/* Make sure fds 0-2 are open, so that a pipe never lands on them. */
static void std_fds_open(void)
{
    for (int fd = 0; fd < 3; fd++) {
        if (fcntl(fd, F_GETFD) < 0) {
            int n = open("/dev/null", O_RDWR);
            if (n >= 0 && n != fd) {
                dup2(n, fd);
                close(n);
            }
        }
    }
}

static int install_signals(void)
{
    if (pipe2(sig_fd, O_CLOEXEC | O_NONBLOCK) != 0)
        return -1;
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESTART | SA_NOCLDSTOP;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGCHLD, &sa, NULL);
    /* A shell starting us in the background without job control ignores SIGINT for us: keep it so, so that
     * Ctrl-C reaches us once, through the script's own signal. */
    struct sigaction old;
    if (sigaction(SIGINT, NULL, &old) == 0 && old.sa_handler != SIG_IGN)
        sigaction(SIGINT, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    return 0;
}

int ad_worker_main(int argc, char **argv)
{
    struct worker w;
    char err[512];
    memset(&w, 0, sizeof(w));
    int rc = ad_worker_parse_args(argc, argv, &w.o, err, sizeof(err));
    if (rc == 1) {
        usage(stdout);
        return 0;
    }
    if (rc != 0) {
        fprintf(stderr, "acceptd worker: %s\n", err);
        usage(stderr);
        return 2;
    }
    w.exe = resolve_command(w.o.command[0]);
    if (w.exe == NULL) {
        fprintf(stderr, "acceptd worker: %s: not an executable file (nor found in PATH)\n", w.o.command[0]);
        return 2;
    }
    std_fds_open();
    if (install_signals() != 0) {
        fprintf(stderr, "acceptd worker: cannot create a pipe: %s\n", strerror(errno));
        free(w.exe);
        return 1;
    }
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK || (w.multi = curl_multi_init()) == NULL) {
        fprintf(stderr, "acceptd worker: cannot initialise libcurl\n");
        free(w.exe);
        return 1;
    }
    ad_client_init(&w.client, w.o.url, w.o.key, "acceptd-worker/" AD_VERSION);
    if (w.o.name != NULL) {
        w.name = ad_strdup(w.o.name);
    } else {
        char host[256];
        if (gethostname(host, sizeof(host)) != 0)
            snprintf(host, sizeof(host), "worker");
        host[sizeof(host) - 1] = '\0';
        w.name = ad_asprintf("%.100s/%ld", host, (long)getpid());
    }
    size_t n = 0;
    while (environ[n] != NULL)
        n++;
    w.envp = ad_calloc(n + 1, sizeof(char *));
    for (size_t i = 0; i < n; i++)
        if (!env_ours(environ[i]))
            w.envp[w.nenv++] = environ[i];
    w.lease_backoff = BACKOFF_MIN_MS;
    w.part_max = UPLOAD_PART_BYTES;

    char types[512] = "";
    size_t tl = 0;
    for (size_t i = 0; i < w.o.ntypes && tl < sizeof(types); i++)
        tl += (size_t)snprintf(types + tl, sizeof(types) - tl, "%s%s", i ? "," : "", w.o.types[i]);
    ad_info("worker %s: leasing %s from %s, %d at a time, lease %d s; command %s", w.name, types, w.client.base,
            w.o.concurrency, w.o.lease_seconds, w.exe);

    rc = run(&w);
    ad_info("worker %s: stopped", w.name);

    while (w.tasks != NULL) {
        struct task *t = w.tasks;
        w.tasks = t->next;
        task_free(&w, t);
    }
    call_free(&w, w.lease);
    curl_multi_cleanup(w.multi);
    curl_global_cleanup();
    free(w.envp);
    ad_client_free(&w.client);
    free(w.name);
    free(w.exe);
    close(sig_fd[0]);
    close(sig_fd[1]);
    return rc;
}
