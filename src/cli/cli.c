/*
 * cli.c - the plumbing of `acceptd submit` and `acceptd jobs`: the connection, one request at a time on a
 * curl multi handle that a signal or the deadline can interrupt, problems printed for people, the output
 * formats, the SSE parser and the poll delay.
 *
 * Nothing here knows what a command does with an answer: submit.c follows a job, jobs.c reads and changes
 * jobs. Text from the server is cleaned of control characters before it reaches a terminal.
 */
#include "cli/cli_int.h"
#include "common/signals.h"
#include "worker/worker.h"

#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdlib.h>
#include <getopt.h>
#include <string.h>
#include <strings.h>

int ad_cli_open(struct ad_cli *c, const char *prog, const char *url, const char *key)
{
    memset(c, 0, sizeof(*c));
    c->prog = prog;
    if (url == NULL) {
        const char *env = getenv("ACCEPTD_URL");
        url = env != NULL && env[0] != '\0' ? env : AD_CLI_DEFAULT_URL;
    }
    if (key == NULL)
        key = getenv("ACCEPTD_KEY");
    if (strncmp(url, "http://", 7) != 0 && strncmp(url, "https://", 8) != 0) {
        fprintf(stderr, "%s: --url: expected an http:// or https:// URL, got '%s'\n", prog, url);
        return AD_CLI_USAGE;
    }
    if (ad_signals_open(0) != 0) {
        fprintf(stderr, "%s: cannot create a pipe: %s\n", prog, strerror(errno));
        return AD_CLI_CONNECT;
    }
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK || (c->multi = curl_multi_init()) == NULL) {
        fprintf(stderr, "%s: cannot initialise libcurl\n", prog);
        return AD_CLI_CONNECT;
    }
    ad_client_init(&c->client, url, key, "acceptd-cli/" AD_VERSION);
    return 0;
}

void ad_cli_close(struct ad_cli *c)
{
    if (c->multi != NULL) {
        curl_multi_cleanup(c->multi);
        curl_global_cleanup();
        c->multi = NULL;
    }
    ad_client_free(&c->client);
    ad_signals_close();
}

void ad_cli_req_init(struct ad_cli *c, struct ad_cli_req *r, const char *method, const char *path, char *body,
                     struct curl_slist *extra, long timeout_ms)
{
    memset(r, 0, sizeof(*r));
    ad_buf_init(&r->resp, AD_CLI_RESPONSE_MAX);
    r->body = body;
    int typed = 0; /* extra names the body's type itself (a merge patch) */
    for (const struct curl_slist *h = extra; h != NULL; h = h->next)
        typed |= strncasecmp(h->data, "Content-Type:", 13) == 0;
    if (body != NULL && !typed)
        extra = curl_slist_append(extra, "Content-Type: application/json");
    r->headers = ad_client_headers(&c->client, extra);
    r->easy = ad_client_easy(&c->client, path, r->headers, &r->resp, r->errbuf, timeout_ms);
    if (strcmp(method, "POST") == 0 || body != NULL) {
        curl_easy_setopt(r->easy, CURLOPT_POSTFIELDS, body != NULL ? body : "");
        curl_easy_setopt(r->easy, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)(body != NULL ? strlen(body) : 0));
    }
    if (strcmp(method, "POST") != 0 && strcmp(method, "GET") != 0)
        curl_easy_setopt(r->easy, CURLOPT_CUSTOMREQUEST, method);
}

void ad_cli_req_free(struct ad_cli_req *r)
{
    if (r->easy != NULL)
        curl_easy_cleanup(r->easy);
    curl_slist_free_all(r->headers);
    free(r->body);
    ad_buf_free(&r->resp);
    memset(r, 0, sizeof(*r));
}

/* ms until the deadline, at most cap; 0 when it has passed. */
static int64_t until_deadline(const struct ad_cli *c, int64_t cap)
{
    if (c->deadline == 0)
        return cap;
    int64_t left = c->deadline - ad_mono_ms();
    return left <= 0 ? 0 : left < cap ? left : cap;
}

int ad_cli_perform(struct ad_cli *c, struct ad_cli_req *r)
{
    curl_multi_add_handle(c->multi, r->easy);
    int out = 0;
    for (;;) {
        int still = 0, left = 0, done = 0;
        curl_multi_perform(c->multi, &still);
        CURLMsg *m;
        while ((m = curl_multi_info_read(c->multi, &left)) != NULL) {
            if (m->msg == CURLMSG_DONE && m->easy_handle == r->easy) {
                r->rc = m->data.result;
                done = 1;
            }
        }
        if (done)
            break;
        if (ad_signals_stops() > 0) {
            c->stopped = 1;
            out = AD_CLI_INTERRUPTED;
            break;
        }
        int64_t wait = until_deadline(c, 1000);
        if (wait == 0) {
            out = AD_CLI_TIMEOUT;
            break;
        }
        struct curl_waitfd fd = {.fd = ad_signals_fd(), .events = CURL_WAIT_POLLIN};
        curl_multi_poll(c->multi, &fd, 1, (int)wait, NULL);
        ad_signals_drain();
    }
    curl_multi_remove_handle(c->multi, r->easy);
    if (out != 0)
        r->rc = CURLE_ABORTED_BY_CALLBACK;
    curl_easy_getinfo(r->easy, CURLINFO_RESPONSE_CODE, &r->status);
    return out;
}

int ad_cli_sleep(struct ad_cli *c, int64_t ms)
{
    int64_t end = ad_mono_ms() + ms;
    for (;;) {
        if (ad_signals_stops() > 0) {
            c->stopped = 1;
            return AD_CLI_INTERRUPTED;
        }
        int64_t now = ad_mono_ms();
        if (now >= end)
            return 0;
        int64_t wait = until_deadline(c, end - now);
        if (wait == 0)
            return AD_CLI_TIMEOUT;
        struct pollfd p = {.fd = ad_signals_fd(), .events = POLLIN};
        poll(&p, 1, (int)wait);
        ad_signals_drain();
    }
}

const char *ad_cli_header(struct ad_cli_req *r, const char *name)
{
    struct curl_header *h;
    if (curl_easy_header(r->easy, name, 0, CURLH_HEADER, -1, &h) != CURLHE_OK)
        return NULL;
    if (h->amount > 1 && curl_easy_header(r->easy, name, h->amount - 1, CURLH_HEADER, -1, &h) != CURLHE_OK)
        return NULL;
    return h->value;
}

char *ad_cli_clean(const char *s, size_t max)
{
    return ad_worker_clean_cut(s, strlen(s), max);
}

static void print_field(const char *before, json_t *v)
{
    const char *s = json_string_value(v);
    if (s == NULL)
        return;
    char *t = ad_cli_clean(s, 2000);
    fprintf(stderr, "%s%s", before, t);
    free(t);
}

void ad_cli_print_problem(const char *prefix, long status, json_t *p)
{
    json_t *st = json_object_get(p, "status");
    if (json_is_integer(st))
        status = (long)json_integer_value(st);
    fprintf(stderr, "%s: ", prefix);
    if (status > 0)
        fprintf(stderr, "%ld ", status);
    if (json_string_value(json_object_get(p, "title")) != NULL)
        print_field("", json_object_get(p, "title"));
    else
        fprintf(stderr, "error");
    const char *title = json_string_value(json_object_get(p, "title"));
    const char *detail = json_string_value(json_object_get(p, "detail"));
    if (detail != NULL && (title == NULL || strcmp(title, detail) != 0))
        print_field(": ", json_object_get(p, "detail"));
    json_t *code = json_object_get(p, "code");
    if (json_string_value(code) != NULL) {
        print_field(" (", code);
        fprintf(stderr, ")");
    }
    fprintf(stderr, "\n");
    json_t *errors = json_object_get(p, "errors");
    size_t i;
    json_t *e;
    json_array_foreach(errors, i, e)
    {
        const char *ptr = json_string_value(json_object_get(e, "pointer"));
        print_field(ptr != NULL && ptr[0] != '\0' ? "  " : "  (body)", json_object_get(e, "pointer"));
        print_field(": ", json_object_get(e, "detail"));
        fprintf(stderr, "\n");
    }
}

int ad_cli_report(struct ad_cli *c, struct ad_cli_req *r)
{
    if (r->rc != CURLE_OK && !(r->rc == CURLE_WRITE_ERROR && r->resp.toobig)) {
        char *u = ad_cli_clean(c->client.base, 400);
        fprintf(stderr, "%s: no answer from %s: %s\n", c->prog, u,
                r->errbuf[0] != '\0' ? r->errbuf : curl_easy_strerror(r->rc));
        free(u);
        return AD_CLI_CONNECT;
    }
    if (r->resp.toobig) {
        fprintf(stderr, "%s: HTTP %ld: the answer is larger than %zu bytes\n", c->prog, r->status, r->resp.max);
        return AD_CLI_PROBLEM;
    }
    json_t *p = ad_client_json(&r->resp, 0, NULL);
    if (json_is_object(p)) {
        ad_cli_print_problem(c->prog, r->status, p);
    } else {
        char *d = ad_client_describe(r->rc, r->errbuf, r->status, &r->resp);
        fprintf(stderr, "%s: %s\n", c->prog, d);
        free(d);
    }
    json_decref(p);
    return AD_CLI_PROBLEM;
}

json_t *ad_cli_json(struct ad_cli *c, struct ad_cli_req *r)
{
    json_error_t e;
    json_t *v = ad_client_json(&r->resp, JSON_DECODE_ANY, &e);
    if (v == NULL) {
        char *t = ad_cli_clean(e.text, 200);
        fprintf(stderr, "%s: HTTP %ld: the answer is not JSON (%s)\n", c->prog, r->status, t);
        free(t);
    }
    return v;
}

int ad_cli_call(struct ad_cli *c, const char *method, const char *path, json_t *body, const char *ctype, json_t **out)
{
    *out = NULL;
    struct curl_slist *extra = NULL;
    char *text = NULL;
    if (body != NULL) {
        text = json_dumps(body, JSON_COMPACT);
        char *h = ad_asprintf("Content-Type: %s", ctype);
        extra = curl_slist_append(NULL, h);
        free(h);
    }
    struct ad_cli_req r;
    ad_cli_req_init(c, &r, method, path, text, extra, AD_CLI_REQUEST_TIMEOUT_MS);
    int rc = ad_cli_perform(c, &r);
    if (rc == 0 && (r.rc != CURLE_OK || r.status < 200 || r.status > 299))
        rc = ad_cli_report(c, &r);
    if (rc == 0 && r.status != 204 && (*out = ad_cli_json(c, &r)) == NULL)
        rc = AD_CLI_PROBLEM;
    ad_cli_req_free(&r);
    return rc;
}

void ad_cli_print_items(json_t *v, enum ad_cli_output output, const char *list,
                        void (*table)(json_t *const *items, size_t n))
{
    json_t *items = json_object_get(v, list);
    if (output == AD_CLI_JSON) {
        ad_cli_print_json(v);
        return;
    }
    if (items == NULL) {
        table(&v, 1);
        return;
    }
    size_t n = json_array_size(items);
    json_t **xs = ad_calloc(n + 1, sizeof(*xs));
    for (size_t i = 0; i < n; i++)
        xs[i] = json_array_get(items, i);
    table(xs, n);
    free(xs);
}

char *ad_cli_read_file(const char *path, const char *what, char *err, size_t errlen)
{
    FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
    if (f == NULL) {
        snprintf(err, errlen, "%s: cannot open %s: %s", what, path, strerror(errno));
        return NULL;
    }
    struct ad_buf b;
    ad_buf_init(&b, AD_CLI_FILE_MAX);
    char chunk[65536];
    size_t n;
    while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0 && ad_buf_append(&b, chunk, n) == 0)
        ;
    int bad = ferror(f) || b.toobig;
    if (f != stdin)
        fclose(f);
    if (bad) {
        snprintf(err, errlen, "%s: %s: %s", what, path, b.toobig ? "larger than 16 MiB" : "read error");
        ad_buf_free(&b);
        return NULL;
    }
    return b.data != NULL ? b.data : ad_strdup("");
}

char *ad_cli_cell_str(json_t *v, size_t max)
{
    const char *s = json_string_value(v);
    return ad_cli_clean(s != NULL ? s : "-", max);
}

char *ad_cli_cell_int(json_t *v)
{
    return json_is_integer(v) ? ad_asprintf("%lld", (long long)json_integer_value(v)) : ad_strdup("-");
}

const char *ad_cli_verb(const char *const *verbs, size_t n, int argc, char **argv, const char *one, size_t *v)
{
    const char *verb = optind < argc ? argv[optind] : NULL;
    *v = 0;
    while (verb != NULL && *v < n && strcmp(verb, verbs[*v]) != 0)
        (*v)++;
    if (verb == NULL)
        return "no verb given";
    if (*v == n)
        return "unknown verb";
    if (*v == 0 && optind + 1 != argc)
        return "list takes no arguments";
    if (*v > 0 && optind + 2 != argc)
        return one;
    return NULL;
}

int ad_cli_usage_error(const char *prog, void (*usage)(FILE *), const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: ", prog);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    usage(stderr);
    return AD_CLI_USAGE;
}

void ad_cli_print_json(json_t *v)
{
    char *s = json_dumps(v, JSON_INDENT(2) | JSON_ENCODE_ANY);
    if (s != NULL) {
        fputs(s, stdout);
        fputc('\n', stdout);
        free(s);
    }
    fflush(stdout);
}

enum { COLS = 5 };

/* The table's cells of one job; each freed by the caller. */
static void job_cells(json_t *j, char *cells[COLS])
{
    static const char *const keys[COLS] = {"id", "type", "status", NULL, "createdAt"};
    for (int k = 0; k < COLS; k++) {
        if (keys[k] == NULL) {
            json_t *p = json_object_get(j, "progress");
            cells[k] = json_is_integer(p) ? ad_asprintf("%lld%%", (long long)json_integer_value(p)) : ad_strdup("-");
            continue;
        }
        const char *s = json_string_value(json_object_get(j, keys[k]));
        cells[k] = s != NULL ? ad_cli_clean(s, 200) : ad_strdup("-");
    }
}

void ad_cli_print_table(const char *const *heads, int header, char **cells, size_t rows, size_t cols, unsigned right)
{
    size_t *width = ad_calloc(cols, sizeof(*width));
    for (size_t k = 0; k < cols; k++) {
        /* The head's width counts even when it is not printed, so a table printed in parts lines up. */
        width[k] = strlen(heads[k]);
        for (size_t i = 0; i < rows; i++)
            if (strlen(cells[i * cols + k]) > width[k])
                width[k] = strlen(cells[i * cols + k]);
    }
    for (size_t i = header ? 0 : 1; i <= rows; i++) {
        for (size_t k = 0; k < cols; k++) {
            const char *v = i == 0 ? heads[k] : cells[(i - 1) * cols + k];
            int w = k + 1 == cols ? 0 : (int)width[k];
            printf("%s%*s%s", k > 0 ? "  " : "", (right >> k) & 1 ? w : -w, v, k + 1 == cols ? "\n" : "");
        }
    }
    for (size_t i = 0; i < rows * cols; i++)
        free(cells[i]);
    free(cells);
    free(width);
    fflush(stdout);
}

void ad_cli_print_jobs(json_t *const *jobs, size_t n, int header)
{
    static const char *const heads[COLS] = {"ID", "TYPE", "STATUS", "PROGRESS", "CREATED"};
    char **cells = ad_calloc(n * COLS + 1, sizeof(char *));
    for (size_t i = 0; i < n; i++)
        job_cells(jobs[i], cells + i * COLS);
    ad_cli_print_table(heads, header, cells, n, COLS, 1u << 3);
}

int ad_cli_parse_output(const char *v, enum ad_cli_output *out)
{
    if (strcmp(v, "json") == 0)
        *out = AD_CLI_JSON;
    else if (strcmp(v, "table") == 0)
        *out = AD_CLI_TABLE;
    else
        return -1;
    return 0;
}

/* ---- the SSE parser ---- */

void ad_cli_sse_init(struct ad_cli_sse *p, void (*on_event)(void *, const char *, const char *, size_t, const char *),
                     void *ctx)
{
    memset(p, 0, sizeof(*p));
    p->on_event = on_event;
    p->ctx = ctx;
    p->retry = -1;
}

void ad_cli_sse_free(struct ad_cli_sse *p)
{
    free(p->line);
    free(p->data);
    p->line = p->data = NULL;
}

/* Append n bytes to a capped growing string. 0, or -1 past AD_CLI_SSE_MAX. */
static int grow_append(char **s, size_t *len, size_t *cap, const char *b, size_t n)
{
    if (n > AD_CLI_SSE_MAX - *len)
        return -1;
    if (*len + n + 1 > *cap) {
        size_t want = *cap < 256 ? 256 : *cap;
        while (want < *len + n + 1)
            want *= 2;
        *s = ad_realloc(*s, want);
        *cap = want;
    }
    memcpy(*s + *len, b, n);
    *len += n;
    (*s)[*len] = '\0';
    return 0;
}

static void copy_cut(char *dst, size_t size, const char *v, size_t n)
{
    if (n >= size)
        n = size - 1;
    memcpy(dst, v, n);
    dst[n] = '\0';
}

static int sse_line(struct ad_cli_sse *p, const char *l, size_t n)
{
    if (n == 0) {
        if (p->has_data) {
            if (p->dlen > 0 && p->data[p->dlen - 1] == '\n')
                p->data[--p->dlen] = '\0';
            p->on_event(p->ctx, p->event[0] != '\0' ? p->event : "message", p->data != NULL ? p->data : "", p->dlen,
                        p->id);
        }
        p->has_data = 0;
        p->dlen = 0;
        p->event[0] = '\0';
        return 0;
    }
    if (l[0] == ':')
        return 0;
    const char *colon = memchr(l, ':', n);
    size_t flen = colon != NULL ? (size_t)(colon - l) : n;
    const char *v = colon != NULL ? colon + 1 : l + n;
    size_t vlen = (size_t)(l + n - v);
    if (vlen > 0 && v[0] == ' ')
        v++, vlen--;
    if (flen == 5 && memcmp(l, "event", 5) == 0) {
        copy_cut(p->event, sizeof(p->event), v, vlen);
    } else if (flen == 4 && memcmp(l, "data", 4) == 0) {
        if (grow_append(&p->data, &p->dlen, &p->dcap, v, vlen) != 0 ||
            grow_append(&p->data, &p->dlen, &p->dcap, "\n", 1) != 0)
            return -1;
        p->has_data = 1;
    } else if (flen == 2 && memcmp(l, "id", 2) == 0) {
        if (memchr(v, '\0', vlen) == NULL)
            copy_cut(p->id, sizeof(p->id), v, vlen);
    } else if (flen == 5 && memcmp(l, "retry", 5) == 0) {
        long long ms;
        if (ad_parse_int(v, vlen, 0, 86400000, &ms) == 0)
            p->retry = ms;
    }
    return 0;
}

int ad_cli_sse_feed(struct ad_cli_sse *p, const char *b, size_t n)
{
    if (p->toobig)
        return -1;
    size_t start = 0;
    for (size_t i = 0; i < n; i++) {
        char ch = b[i];
        if (p->cr && ch == '\n') {
            p->cr = 0;
            start = i + 1;
            continue;
        }
        p->cr = 0;
        if (ch != '\r' && ch != '\n')
            continue;
        p->cr = ch == '\r';
        if (grow_append(&p->line, &p->len, &p->cap, b + start, i - start) != 0 ||
            sse_line(p, p->line != NULL ? p->line : "", p->len) != 0) {
            p->toobig = 1;
            return -1;
        }
        p->len = 0;
        start = i + 1;
    }
    if (start < n && grow_append(&p->line, &p->len, &p->cap, b + start, n - start) != 0) {
        p->toobig = 1;
        return -1;
    }
    return 0;
}

/* ---- polling ---- */

int64_t ad_cli_poll_delay(long long retry_after_s, int64_t *backoff, double rnd)
{
    if (retry_after_s >= 0) {
        int64_t ms = retry_after_s * 1000;
        if (ms < AD_CLI_BACKOFF_MIN_MS)
            ms = AD_CLI_BACKOFF_MIN_MS; /* "0" would make a busy loop of a server that always says it */
        return ms + (int64_t)((double)ms * 0.1 * rnd);
    }
    int64_t b = *backoff < AD_CLI_BACKOFF_MIN_MS ? AD_CLI_BACKOFF_MIN_MS : *backoff;
    int64_t d = b + (int64_t)((double)(b / 4) * rnd);
    if (d > AD_CLI_BACKOFF_MAX_MS)
        d = AD_CLI_BACKOFF_MAX_MS;
    *backoff = b * 2 > AD_CLI_BACKOFF_MAX_MS ? AD_CLI_BACKOFF_MAX_MS : b * 2;
    return d;
}
