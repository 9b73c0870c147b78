/*
 * submit.c - `acceptd submit TYPE`: submit a job and, with --wait, follow it to its end.
 *
 * Following reads the job's SSE stream (docs/protocol.md, "Server-Sent Events"); a stream that breaks is
 * resumed with Last-Event-ID a few times. When the stream is refused (not 200 text/event-stream: a proxy
 * answering 406 or 503, say) or keeps breaking, the job is polled: GET /v1/jobs/{id} with If-None-Match, as
 * often as Retry-After says, or with exponential backoff and jitter from 1 s to 30 s when the answer has
 * none (seed 000, section 4.1). On a terminal the job's progress and message are drawn as a bar on stderr,
 * otherwise each change is one line; the result alone goes to stdout, and the exit status is the outcome.
 * It does not resubmit: a job whose submit got no answer may exist, and --idempotency-key is how a caller
 * makes a second try safe.
 */
#include "cli/cli_int.h"

#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#define PROG "acceptd submit"
#define BAR_CELLS 30
#define MESSAGE_SHOWN 60
#define RECONNECT_MAX_MS 5000
#define NO_ANSWER_LIMIT 5 /* polls in a row without an answer before giving up */
#define STREAM_STALL_S 60 /* a stream silent this long is dead (the server sends a comment every 15 s) */

/* ---- the SSE stream ---- */

struct stream {
    struct ad_cli_sse sse;
    int (*on_event)(void *ctx, const char *event, const char *data, size_t len, const char *eid);
    void *ctx;
    struct ad_cli_req *r;
    int checked, refused, ended;
};

static void stream_event(void *ud, const char *event, const char *data, size_t len, const char *eid)
{
    struct stream *s = ud;
    if (!s->ended && s->on_event(s->ctx, event, data, len, eid))
        s->ended = 1;
}

/* Whether the answer so far is an event stream: 200 and text/event-stream. */
static int is_stream(struct ad_cli_req *r)
{
    long status = 0;
    char *ct = NULL;
    curl_easy_getinfo(r->easy, CURLINFO_RESPONSE_CODE, &status);
    curl_easy_getinfo(r->easy, CURLINFO_CONTENT_TYPE, &ct);
    return status == 200 && ct != NULL && strncasecmp(ct, "text/event-stream", 17) == 0;
}

static size_t stream_body(char *p, size_t size, size_t n, void *ud)
{
    struct stream *s = ud;
    size_t len = size * n;
    if (!s->checked) {
        s->checked = 1;
        s->refused = !is_stream(s->r);
    }
    if (s->refused) /* kept to report the problem */
        return ad_buf_append(&s->r->resp, p, len) == 0 ? len : 0;
    if (ad_cli_sse_feed(&s->sse, p, len) != 0 || s->ended)
        return 0; /* ends the transfer: the last event came (or an overlong one) */
    return len;
}

int ad_cli_stream(struct ad_cli *c, const char *id,
                  int (*on_event)(void *ctx, const char *event, const char *data, size_t len, const char *eid),
                  void *ctx, struct ad_cli_req *r, int *refused)
{
    char last[64] = "";
    long long retry = 1000;
    char *path = ad_asprintf("/v1/jobs/%s/events", id);
    int out = -1;
    *refused = 0;
    for (int attempt = 0;; attempt++) {
        struct stream s;
        memset(&s, 0, sizeof(s));
        ad_cli_sse_init(&s.sse, stream_event, &s);
        s.on_event = on_event;
        s.ctx = ctx;
        s.r = r;
        struct curl_slist *h = curl_slist_append(NULL, "Accept: text/event-stream");
        if (last[0] != '\0')
            h = ad_client_header_add(h, "Last-Event-ID: %s", last);
        ad_cli_req_init(c, r, "GET", path, NULL, h, 0);
        curl_easy_setopt(r->easy, CURLOPT_WRITEFUNCTION, stream_body);
        curl_easy_setopt(r->easy, CURLOPT_WRITEDATA, &s);
        curl_easy_setopt(r->easy, CURLOPT_LOW_SPEED_LIMIT, 1L);
        curl_easy_setopt(r->easy, CURLOPT_LOW_SPEED_TIME, (long)STREAM_STALL_S);
        int rc = ad_cli_perform(c, r);
        if (s.sse.id[0] != '\0')
            snprintf(last, sizeof(last), "%s", s.sse.id);
        if (s.sse.retry >= 0)
            retry = s.sse.retry;
        ad_cli_sse_free(&s.sse);
        if (rc != 0 || s.ended) {
            out = rc;
            ad_cli_req_free(r);
            break;
        }
        if (!s.checked)
            s.refused = !is_stream(r) || r->rc != CURLE_OK;
        /* A resume at or past `done` answers 204: the job ended while we were away. Polling reads it. */
        if (s.refused || attempt >= AD_CLI_SSE_RECONNECTS) {
            *refused = s.refused;
            break;
        }
        ad_cli_req_free(r);
        rc = ad_cli_sleep(c, retry < RECONNECT_MAX_MS ? retry : RECONNECT_MAX_MS);
        if (rc != 0) {
            out = rc;
            break;
        }
    }
    free(path);
    return out;
}

/* ---- the view: a progress bar on a terminal, lines elsewhere ---- */

struct follow {
    struct ad_cli *c;
    const char *id;
    int tty;
    char status[32];
    int progress; /* -1 none */
    char *message;
    int drawn; /* a bar is on the current line of a terminal */
    int shown; /* anything shown yet */
    json_t *final;
};

static void view_break(struct follow *f)
{
    if (f->drawn) {
        fputc('\n', stderr);
        f->drawn = 0;
    }
}

static void view_update(struct follow *f, const char *status, json_t *progress, json_t *message)
{
    int p = json_is_integer(progress) ? (int)json_integer_value(progress) : -1;
    const char *m = json_string_value(message);
    if (status == NULL)
        status = f->status;
    if (f->shown && strcmp(status, f->status) == 0 && p == f->progress &&
        (m == NULL ? f->message == NULL : f->message != NULL && strcmp(m, f->message) == 0))
        return;
    f->shown = 1;
    snprintf(f->status, sizeof(f->status), "%s", status);
    f->progress = p;
    free(f->message);
    f->message = m != NULL ? ad_cli_clean(m, 4096) : NULL;
    if (f->message != NULL) {
        for (char *q = f->message; *q != '\0'; q++)
            if (*q == '\n' || *q == '\r' || *q == '\t')
                *q = ' ';
        ad_client_utf8_cut(f->message, MESSAGE_SHOWN);
    }
    char pct[16] = "  -";
    if (p >= 0)
        snprintf(pct, sizeof(pct), "%3d", p);
    if (f->tty) {
        char bar[BAR_CELLS + 1];
        int full = p > 0 ? (p > 100 ? 100 : p) * BAR_CELLS / 100 : 0;
        for (int i = 0; i < BAR_CELLS; i++)
            bar[i] = i < full ? '#' : '.';
        bar[BAR_CELLS] = '\0';
        fprintf(stderr, "\r\033[K%s %-8s [%s] %s%% %s", f->id, f->status, bar, pct, f->message ? f->message : "");
        f->drawn = 1;
    } else {
        fprintf(stderr, "%s: %s %s%%%s%s\n", f->id, f->status, pct, f->message ? " " : "",
                f->message ? f->message : "");
    }
    fflush(stderr);
}

static void view_job(struct follow *f, json_t *job)
{
    view_update(f, json_string_value(json_object_get(job, "status")), json_object_get(job, "progress"),
                json_object_get(job, "message"));
}

static int follow_event(void *ud, const char *event, const char *data, size_t len, const char *eid)
{
    struct follow *f = ud;
    json_t *v = json_loadb(data, len, 0, NULL);
    if (!json_is_object(v)) {
        json_decref(v);
        return 0;
    }
    view_job(f, v);
    if (strcmp(event, "done") == 0) {
        f->final = v;
        return 1;
    }
    json_decref(v);
    return 0;
}

static int terminal(const char *s)
{
    return s != NULL && (strcmp(s, "succeeded") == 0 || strcmp(s, "failed") == 0 || strcmp(s, "cancelled") == 0 ||
                         strcmp(s, "partialSuccess") == 0);
}

/* Retry-After in seconds (delay-seconds or an HTTP-date), or -1 when absent or unreadable. */
static long long retry_after(struct ad_cli_req *r)
{
    const char *v = ad_cli_header(r, "Retry-After");
    if (v == NULL)
        return -1;
    long long s;
    if (ad_parse_int(v, strlen(v), 0, 86400, &s) == 0)
        return s;
    time_t t = curl_getdate(v, NULL);
    if (t < 0)
        return -1;
    long long d = (long long)t - ad_now_ms() / 1000;
    return d < 0 ? 0 : d;
}

static double random_unit(void)
{
    uint32_t x;
    ad_random_bytes((uint8_t *)&x, sizeof(x));
    return (double)x / 4294967296.0;
}

static json_t *poll_job(struct follow *f, int *exit)
{
    struct ad_cli *c = f->c;
    char *path = ad_asprintf("/v1/jobs/%s", f->id);
    char *etag = NULL;
    int64_t backoff = AD_CLI_BACKOFF_MIN_MS, delay = 0;
    int no_answer = 0;
    json_t *out = NULL;
    for (;;) {
        int rc = delay > 0 ? ad_cli_sleep(c, delay) : 0;
        if (rc != 0) {
            *exit = rc;
            break;
        }
        struct curl_slist *h = etag != NULL ? ad_client_header_add(NULL, "If-None-Match: %s", etag) : NULL;
        struct ad_cli_req r;
        ad_cli_req_init(c, &r, "GET", path, NULL, h, AD_CLI_REQUEST_TIMEOUT_MS);
        rc = ad_cli_perform(c, &r);
        if (rc != 0) {
            ad_cli_req_free(&r);
            *exit = rc;
            break;
        }
        long long ra = retry_after(&r);
        if (r.rc != CURLE_OK || r.status == 0) {
            if (++no_answer >= NO_ANSWER_LIMIT) {
                view_break(f);
                *exit = ad_cli_report(c, &r);
                ad_cli_req_free(&r);
                break;
            }
        } else if (r.status == 429 || r.status >= 500) {
            no_answer = 0; /* the server is there and asks to come back later */
        } else if (r.status == 200) {
            no_answer = 0;
            json_t *job = ad_cli_json(c, &r);
            if (!json_is_object(job)) {
                json_decref(job);
                ad_cli_req_free(&r);
                *exit = AD_CLI_PROBLEM;
                break;
            }
            const char *tag = ad_cli_header(&r, "ETag");
            if (tag != NULL) {
                free(etag);
                etag = ad_strdup(tag);
            }
            view_job(f, job);
            if (terminal(json_string_value(json_object_get(job, "status")))) {
                out = job;
                ad_cli_req_free(&r);
                break;
            }
            json_decref(job);
        } else if (r.status != 304) {
            view_break(f);
            *exit = ad_cli_report(c, &r);
            ad_cli_req_free(&r);
            break;
        }
        ad_cli_req_free(&r);
        delay = ad_cli_poll_delay(ra, &backoff, random_unit());
    }
    free(etag);
    free(path);
    return out;
}

json_t *ad_cli_follow(struct ad_cli *c, const char *id, int tty, int *exit)
{
    struct follow f;
    memset(&f, 0, sizeof(f));
    f.c = c;
    f.id = id;
    f.tty = tty;
    f.progress = -1;
    *exit = AD_CLI_OK;
    struct ad_cli_req r;
    int refused;
    int rc = ad_cli_stream(c, id, follow_event, &f, &r, &refused);
    json_t *job = NULL;
    if (rc == 0) {
        job = f.final;
    } else if (rc > 0) {
        *exit = rc;
    } else {
        view_break(&f);
        if (refused && r.status == 204)
            ; /* a resume past `done`: the job ended while the stream was away */
        else if (refused)
            fprintf(stderr, "%s: the event stream was refused (HTTP %ld); polling the job instead\n", c->prog,
                    r.status);
        else
            fprintf(stderr, "%s: the event stream kept breaking; polling the job instead\n", c->prog);
        ad_cli_req_free(&r);
        job = poll_job(&f, exit);
    }
    view_break(&f);
    free(f.message);
    return job;
}

/* ---- the command ---- */

static void usage(FILE *f)
{
    fprintf(f, "usage: acceptd submit TYPE [--payload JSON|@FILE|-] [--idempotency-key KEY] [--priority P]\n"
               "                      [--run-at TIME] [--callback-url URL] [--wait [--timeout SECONDS]]\n"
               "                      [-O FILE] [--url URL] [--key KEY]\n"
               "      --payload JSON|@FILE|-   the job's payload: JSON text, a file's, or stdin's (default {})\n"
               "      --idempotency-key KEY    sent as Idempotency-Key: a repeat returns the same job\n"
               "      --priority P             high, normal or low\n"
               "      --run-at TIME            RFC 3339 time before which the job is not run\n"
               "      --callback-url URL       where the job's final event is delivered (signed webhook)\n"
               "      --wait                   follow the job to its end (SSE, else polling); print its result\n"
               "      --timeout SECONDS        with --wait: give up after this long (exit 5)\n"
               "  -O, --output-file FILE       with --wait: save the result to FILE instead of printing it; a\n"
               "                               result file is checked against its sha-256 digest (exit 8 when it\n"
               "                               does not match, 9 when FILE cannot be written)\n"
               "      --url URL                the server (ACCEPTD_URL; default " AD_CLI_DEFAULT_URL ")\n"
               "      --key KEY                a client key (ACCEPTD_KEY)\n"
               "  -h, --help                   this text\n"
               "Without --wait prints the submitted job as JSON. With --wait prints the result on stdout (for a\n"
               "result file: its size, type and digest), progress on\n"
               "stderr (a bar on a terminal), and exits by outcome: 0 succeeded, 1 failed, 3 cancelled,\n"
               "4 partialSuccess, 5 timeout; 2 usage error, 6 no answer from the server, 7 the server refused the\n"
               "request, 130 interrupted. See acceptd(1).\n");
}

/* The payload text: JSON as given, @FILE's contents or stdin's. The caller frees. NULL with err set. */
static char *read_payload(const char *v, char *err, size_t errlen)
{
    if (strcmp(v, "-") != 0 && v[0] != '@')
        return ad_strdup(v);
    return ad_cli_read_file(v[0] == '@' ? v + 1 : v, "--payload", err, errlen);
}

/* The submit's body. NULL with err set. The caller frees. */
static char *submit_body(const char *type, const char *payload, const char *priority, const char *run_at,
                         const char *callback, char *err, size_t errlen)
{
    json_t *body = json_object();
    json_object_set_new(body, "type", json_string(type));
    if (payload != NULL) {
        char *text = read_payload(payload, err, errlen);
        if (text == NULL) {
            json_decref(body);
            return NULL;
        }
        json_error_t je;
        json_t *p = json_loads(text, JSON_DECODE_ANY, &je);
        free(text);
        if (p == NULL) {
            snprintf(err, errlen, "--payload: not JSON: %s (line %d)", je.text, je.line);
            json_decref(body);
            return NULL;
        }
        json_object_set_new(body, "payload", p);
    } else {
        json_object_set_new(body, "payload", json_object());
    }
    if (priority != NULL)
        json_object_set_new(body, "priority", json_string(priority));
    if (run_at != NULL)
        json_object_set_new(body, "runAt", json_string(run_at));
    if (callback != NULL)
        json_object_set_new(body, "callbackUrl", json_string(callback));
    char *s = json_dumps(body, JSON_COMPACT);
    json_decref(body);
    if (s == NULL)
        snprintf(err, errlen, "TYPE and the options must be UTF-8 text");
    return s;
}

/* The outcome of a final job: its result on stdout (or in file), a failure on stderr, and the exit status. */
static int outcome(struct ad_cli *c, json_t *job, const char *file)
{
    const char *id = json_string_value(json_object_get(job, "id"));
    const char *st = json_string_value(json_object_get(job, "status"));
    if (st != NULL && (strcmp(st, "succeeded") == 0 || strcmp(st, "partialSuccess") == 0)) {
        int ok = strcmp(st, "succeeded") == 0 ? AD_CLI_OK : AD_CLI_PARTIAL;
        json_t *res = json_object_get(job, "result");
        json_t *art = json_object_get(job, "artifact");
        const char *loc = json_string_value(json_object_get(job, "resultLocation"));
        if (json_is_object(art) && id != NULL) {
            if (file == NULL) {
                ad_cli_print_artifact(c, id, art);
                return ok;
            }
            int rc = ad_cli_save_artifact(c, id, art, file);
            return rc != 0 ? rc : ok;
        }
        if (file != NULL && res != NULL) {
            int rc = ad_cli_save_json(c, res, file);
            return rc != 0 ? rc : ok;
        }
        if (res == NULL && loc != NULL) {
            char *t = ad_cli_clean(loc, 4096);
            printf("%s\n", t);
            free(t);
            fflush(stdout);
        } else {
            json_t *null = json_null();
            ad_cli_print_json(res != NULL ? res : null);
            json_decref(null);
        }
        return ok;
    }
    if (st != NULL && strcmp(st, "failed") == 0) {
        char *prefix = ad_asprintf("%s: job %s failed", c->prog, id != NULL ? id : "?");
        json_t *err = json_object_get(job, "error");
        if (err != NULL)
            ad_cli_print_problem(prefix, 0, err);
        else
            fprintf(stderr, "%s\n", prefix);
        free(prefix);
        return AD_CLI_FAILED;
    }
    fprintf(stderr, "%s: job %s was cancelled\n", c->prog, id != NULL ? id : "?");
    return AD_CLI_CANCELLED;
}

int ad_cli_submit_main(int argc, char **argv)
{
    static const struct option longopts[] = {{"payload", required_argument, NULL, 'p'},
                                             {"idempotency-key", required_argument, NULL, 'i'},
                                             {"priority", required_argument, NULL, 'P'},
                                             {"run-at", required_argument, NULL, 'r'},
                                             {"callback-url", required_argument, NULL, 'b'},
                                             {"wait", no_argument, NULL, 'w'},
                                             {"timeout", required_argument, NULL, 't'},
                                             {"output-file", required_argument, NULL, 'O'},
                                             {"url", required_argument, NULL, 'U'},
                                             {"key", required_argument, NULL, 'K'},
                                             {"help", no_argument, NULL, 'h'},
                                             {NULL, 0, NULL, 0}};
    const char *payload = NULL, *idem = NULL, *priority = NULL, *run_at = NULL, *callback = NULL;
    const char *url = NULL, *key = NULL, *file = NULL;
    int wait = 0;
    long long timeout = 0;
    char err[512];
    int ch;
    opterr = 0;
    optind = 0; /* glibc: start afresh */
    while ((ch = getopt_long(argc, argv, ":hO:", longopts, NULL)) != -1) {
        switch (ch) {
        case 'p':
            payload = optarg;
            break;
        case 'i':
            idem = optarg;
            break;
        case 'P':
            priority = optarg;
            break;
        case 'r':
            run_at = optarg;
            break;
        case 'b':
            callback = optarg;
            break;
        case 'w':
            wait = 1;
            break;
        case 't':
            if (ad_parse_int(optarg, strlen(optarg), 1, 31536000, &timeout) != 0) {
                return ad_cli_usage_error(PROG, usage, "--timeout: expected whole seconds from 1, got '%s'", optarg);
            }
            break;
        case 'O':
            file = optarg;
            break;
        case 'U':
            url = optarg;
            break;
        case 'K':
            key = optarg;
            break;
        case 'h':
            usage(stdout);
            return AD_CLI_OK;
        default:
            ad_getopt_error(ch, argc, argv, err, sizeof(err));
            return ad_cli_usage_error(PROG, usage, "%s", err);
        }
    }
    if (optind != argc - 1)
        return ad_cli_usage_error(PROG, usage, "%s", optind >= argc ? "no job type given" : "one job type only");
    if (timeout > 0 && !wait)
        return ad_cli_usage_error(PROG, usage, "--timeout goes with --wait");
    if (file != NULL && (!wait || file[0] == '\0'))
        return ad_cli_usage_error(PROG, usage, "%s",
                                  !wait ? "--output-file goes with --wait" : "--output-file: give a file name");
    const char *type = argv[optind];
    char *body = submit_body(type, payload, priority, run_at, callback, err, sizeof(err));
    if (body == NULL) {
        fprintf(stderr, PROG ": %s\n", err);
        return AD_CLI_USAGE;
    }
    struct ad_cli c;
    int rc = ad_cli_open(&c, PROG, url, key);
    if (rc != 0) {
        free(body);
        ad_cli_close(&c);
        return rc;
    }
    if (timeout > 0)
        c.deadline = ad_mono_ms() + timeout * 1000;
    struct curl_slist *h = idem != NULL ? ad_client_header_add(NULL, "Idempotency-Key: %s", idem) : NULL;
    struct ad_cli_req r;
    ad_cli_req_init(&c, &r, "POST", "/v1/jobs", body, h, AD_CLI_REQUEST_TIMEOUT_MS);
    rc = ad_cli_perform(&c, &r);
    json_t *job = NULL;
    if (rc == 0 && (r.rc != CURLE_OK || r.status < 200 || r.status > 299))
        rc = ad_cli_report(&c, &r);
    if (rc == 0)
        job = ad_cli_json(&c, &r); /* not inside json_is_object(): a macro that reads its argument twice */
    if (rc == 0 && !json_is_object(job))
        rc = AD_CLI_PROBLEM;
    ad_cli_req_free(&r);
    const char *id = json_string_value(json_object_get(job, "id"));
    if (rc == 0 && (id == NULL || !ad_client_id_ok(id))) {
        fprintf(stderr, PROG ": the answer has no job id\n");
        rc = AD_CLI_PROBLEM;
    }
    if (rc == 0 && !wait) {
        ad_cli_print_json(job);
    } else if (rc == 0) {
        json_t *final = ad_cli_follow(&c, id, isatty(STDERR_FILENO), &rc);
        if (final != NULL) {
            rc = outcome(&c, final, file);
            json_decref(final);
        } else if (rc == AD_CLI_TIMEOUT) {
            fprintf(stderr, PROG ": timed out after %lld s; job %s has not ended\n", timeout, id);
        }
    }
    if (rc == AD_CLI_TIMEOUT && !wait)
        fprintf(stderr, PROG ": timed out\n");
    if (rc == AD_CLI_INTERRUPTED)
        fprintf(stderr, PROG ": interrupted%s%s\n", id != NULL ? "; job " : "", id != NULL ? id : "");
    json_decref(job);
    ad_cli_close(&c);
    return rc;
}
