/*
 * jobs.c - `acceptd jobs VERB`: list, get, result, cancel, retry, events, attempts.
 *
 * Each verb is one request (list may follow its page tokens; list --watch long-polls the change feed,
 * GET /v1/jobs/changes, until interrupted; events tails the job's SSE stream until `done`). Answers are
 * printed as JSON, or with --output table as aligned columns. The server decides everything: nothing is
 * filtered or checked here that it would check itself, except `list --watch`, whose feed has no filters.
 */
#include "cli/cli_int.h"

#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#define PROG "acceptd jobs"
#define WATCH_WAIT_S 30
#define PAGE_LIMIT 10000 /* pages followed by --all, a bound against a server that never ends the list */

struct jobs_opts {
    const char *url, *key;
    enum ad_cli_output output;
    const char *status, *type, *updated_after, *limit, *page_token;
    const char *file; /* result -O FILE */
    int all, watch;
};

static void usage(FILE *f)
{
    fprintf(f, "usage: acceptd jobs list [--status S] [--type T] [--updated-after TIME] [--limit N]\n"
               "                         [--page-token TOKEN | --all] [--watch] [COMMON]\n"
               "       acceptd jobs get ID [COMMON]\n"
               "       acceptd jobs result ID [-O FILE] [COMMON]\n"
               "       acceptd jobs cancel ID [COMMON]\n"
               "       acceptd jobs retry ID [COMMON]\n"
               "       acceptd jobs events ID [COMMON]\n"
               "       acceptd jobs attempts ID [COMMON]\n"
               "COMMON: [--url URL] [--key KEY] [--output json|table]\n"
               "      --status S           list: only jobs in this status (queued, running, succeeded, ...)\n"
               "      --type T             list: only jobs of this type\n"
               "      --updated-after TIME list: only jobs changed after this RFC 3339 time\n"
               "      --limit N            list: jobs per page (1-500; the server's default 50)\n"
               "      --page-token TOKEN   list: the page after the one that gave this token\n"
               "      --all                list: every page\n"
               "  -O, --output-file FILE   result: save the result to FILE (a result file is checked against its\n"
               "                           sha-256 digest first; exit 8 when it does not match, 9 when FILE cannot\n"
               "                           be written)\n"
               "      --watch              list: follow the change feed (every job once, then each change) until\n"
               "                           interrupted; --status and --type filter it\n"
               "      --url URL            the server (ACCEPTD_URL; default " AD_CLI_DEFAULT_URL ")\n"
               "      --key KEY            the key (ACCEPTD_KEY)\n"
               "  -o, --output json|table  JSON (default) or aligned columns (id, type, status, progress, created)\n"
               "  -h, --help               this text\n"
               "result prints the job's result document, or for a result file its size, type and digest;\n"
               "events prints one line per event until `done`.\n"
               "Exit status: 0 done, 2 usage error, 6 no answer from the server, 7 the server refused the request\n"
               "(its problem is printed on stderr), 130 interrupted. See acceptd(1).\n");
}

/* Append &name=value, escaped, to q. */
static void query_add(struct ad_buf *q, const char *name, const char *value)
{
    if (value == NULL)
        return;
    char *e = curl_easy_escape(NULL, value, 0);
    ad_buf_printf(q, "%s%s=%s", q->len == 0 ? "?" : "&", name, e != NULL ? e : "");
    curl_free(e);
}

/* Run r; on anything but a 2xx print why and return the exit status, else 0. */
static int run(struct ad_cli *c, struct ad_cli_req *r)
{
    int rc = ad_cli_perform(c, r);
    if (rc == 0 && (r->rc != CURLE_OK || r->status < 200 || r->status > 299))
        rc = ad_cli_report(c, r);
    return rc;
}

/* One request whose 2xx answer is JSON: returns it (the caller decrefs) or NULL with *rc set. */
static json_t *request_json(struct ad_cli *c, const char *method, const char *path, int *rc)
{
    json_t *v;
    *rc = ad_cli_call(c, method, path, NULL, NULL, &v);
    return v;
}

static void print_job(const struct jobs_opts *o, json_t *job)
{
    if (o->output == AD_CLI_TABLE)
        ad_cli_print_jobs(&job, 1, 1);
    else
        ad_cli_print_json(job);
}

static int print_items(json_t *items, int header)
{
    size_t n = json_array_size(items);
    json_t **v = ad_calloc(n + 1, sizeof(*v));
    for (size_t i = 0; i < n; i++)
        v[i] = json_array_get(items, i);
    ad_cli_print_jobs(v, n, header);
    free(v);
    return 0;
}

static int list(struct ad_cli *c, const struct jobs_opts *o)
{
    json_t *all = json_array();
    const char *token = o->page_token;
    char *owned = NULL;
    int rc = 0;
    for (int page = 0; page < PAGE_LIMIT; page++) {
        struct ad_buf qs;
        ad_buf_init(&qs, 64 * 1024);
        query_add(&qs, "status", o->status);
        query_add(&qs, "type", o->type);
        query_add(&qs, "updatedAfter", o->updated_after);
        query_add(&qs, "limit", o->limit);
        query_add(&qs, "pageToken", token);
        char *path = ad_asprintf("/v1/jobs%s", qs.data != NULL ? qs.data : "");
        ad_buf_free(&qs);
        json_t *body = request_json(c, "GET", path, &rc);
        free(path);
        if (body == NULL)
            break;
        json_t *items = json_object_get(body, "items");
        const char *next = json_string_value(json_object_get(body, "nextPageToken"));
        if (!json_is_array(items)) {
            fprintf(stderr, "%s: the answer has no items\n", c->prog);
            json_decref(body);
            rc = AD_CLI_PROBLEM;
            break;
        }
        if (!o->all) {
            if (o->output == AD_CLI_JSON) {
                ad_cli_print_json(body);
            } else {
                print_items(items, 1);
                if (next != NULL)
                    fprintf(stderr, "more: --page-token %s\n", next);
            }
            json_decref(body);
            break;
        }
        json_array_extend(all, items);
        free(owned);
        owned = next != NULL ? ad_strdup(next) : NULL;
        token = owned;
        json_decref(body);
        if (token == NULL) {
            if (o->output == AD_CLI_JSON) {
                json_t *out = json_pack("{s:O,s:n}", "items", all, "nextPageToken");
                ad_cli_print_json(out);
                json_decref(out);
            } else {
                print_items(all, 1);
            }
            break;
        }
    }
    free(owned);
    json_decref(all);
    return rc;
}

static int wanted(const struct jobs_opts *o, json_t *job)
{
    const char *s = json_string_value(json_object_get(job, "status"));
    const char *t = json_string_value(json_object_get(job, "type"));
    return (o->status == NULL || (s != NULL && strcmp(s, o->status) == 0)) &&
           (o->type == NULL || (t != NULL && strcmp(t, o->type) == 0));
}

static int watch(struct ad_cli *c, const struct jobs_opts *o)
{
    char *cursor = NULL;
    int header = 1;
    for (;;) {
        char *path = cursor != NULL ? ad_asprintf("/v1/jobs/changes?wait=%d&since=%s", WATCH_WAIT_S, cursor)
                                    : ad_asprintf("/v1/jobs/changes?wait=%d", WATCH_WAIT_S);
        struct ad_cli_req r;
        ad_cli_req_init(c, &r, "GET", path, NULL, NULL, AD_CLI_REQUEST_TIMEOUT_MS + WATCH_WAIT_S * 1000L);
        free(path);
        int rc = run(c, &r);
        json_t *body = rc == 0 ? ad_cli_json(c, &r) : NULL;
        ad_cli_req_free(&r);
        if (rc == AD_CLI_INTERRUPTED) {
            rc = AD_CLI_OK; /* how a watch ends */
        } else if (rc == 0 && !json_is_array(json_object_get(body, "changes"))) {
            fprintf(stderr, "%s: the change feed's answer has no changes\n", c->prog);
            rc = AD_CLI_PROBLEM;
        }
        if (rc != 0 || body == NULL) {
            json_decref(body);
            free(cursor);
            return rc;
        }
        json_t *changes = json_object_get(body, "changes"), *job;
        size_t i;
        json_t *shown = json_array();
        json_array_foreach(changes, i, job)
        {
            if (wanted(o, job))
                json_array_append(shown, job);
        }
        if (o->output == AD_CLI_TABLE && json_array_size(shown) > 0) {
            print_items(shown, header);
            header = 0;
        } else if (o->output == AD_CLI_JSON) {
            json_array_foreach(shown, i, job)
            {
                char *s = json_dumps(job, JSON_COMPACT);
                if (s != NULL)
                    printf("%s\n", s);
                free(s);
            }
            fflush(stdout);
        }
        json_decref(shown);
        const char *next = json_string_value(json_object_get(body, "cursor"));
        if (next != NULL && next[0] != '\0' && strspn(next, "0123456789") == strlen(next)) {
            free(cursor);
            cursor = ad_strdup(next);
        }
        json_decref(body);
    }
}

static int result(struct ad_cli *c, const char *id, const char *file)
{
    /* The job first: a result file (an artifact) is saved or described, never poured onto a terminal.
     * inline: the job itself even when its route answers finished jobs with a redirect. */
    char *path = ad_asprintf("/v1/jobs/%s?onComplete=inline", id);
    int rc;
    json_t *job = request_json(c, "GET", path, &rc);
    free(path);
    if (job == NULL)
        return rc;
    json_t *art = json_object_get(job, "artifact");
    if (json_is_object(art)) {
        if (file != NULL)
            rc = ad_cli_save_artifact(c, id, art, file);
        else
            ad_cli_print_artifact(c, id, art);
        json_decref(job);
        return rc;
    }
    json_decref(job);
    path = ad_asprintf("/v1/jobs/%s/result", id);
    struct ad_cli_req r;
    ad_cli_req_init(c, &r, "GET", path, NULL, NULL, AD_CLI_REQUEST_TIMEOUT_MS);
    free(path);
    rc = ad_cli_perform(c, &r);
    const char *loc = rc == 0 && r.rc == CURLE_OK && r.status == 303 ? ad_cli_header(&r, "Location") : NULL;
    if (loc != NULL) {
        char *t = ad_cli_clean(loc, 4096);
        printf("%s\n", t);
        free(t);
    } else if (rc == 0 && (r.rc != CURLE_OK || r.status < 200 || r.status > 299)) {
        rc = ad_cli_report(c, &r);
    } else if (rc == 0) {
        json_t *v = ad_cli_json(c, &r);
        if (v != NULL && file != NULL)
            rc = ad_cli_save_json(c, v, file);
        else if (v != NULL)
            ad_cli_print_json(v);
        else
            rc = AD_CLI_PROBLEM;
        json_decref(v);
    }
    ad_cli_req_free(&r);
    return rc;
}

static void print_attempts(json_t *attempts)
{
    static const char *const keys[] = {"attempt", "worker", "startedAt", "endedAt", "outcome"};
    enum { N = sizeof(keys) / sizeof(keys[0]) };
    static const char *const heads[N] = {"ATTEMPT", "WORKER", "STARTED", "ENDED", "OUTCOME"};
    size_t rows = json_array_size(attempts);
    char **cells = ad_calloc(rows * N + 1, sizeof(char *));
    for (size_t i = 0; i < rows; i++) {
        json_t *a = json_array_get(attempts, i);
        for (size_t k = 0; k < N; k++) {
            json_t *v = json_object_get(a, keys[k]);
            char *s;
            if (json_is_integer(v))
                s = ad_asprintf("%lld", (long long)json_integer_value(v));
            else if (json_string_value(v) != NULL)
                s = ad_cli_clean(json_string_value(v), 4096);
            else
                s = ad_strdup("-");
            ad_client_utf8_cut(s, 200);
            cells[i * N + k] = s;
        }
    }
    ad_cli_print_table(heads, 1, cells, rows, N, 1u << 0);
}

struct tail {
    const struct jobs_opts *o;
    int header;
};

static int tail_event(void *ud, const char *event, const char *data, size_t len, const char *eid)
{
    struct tail *t = ud;
    json_t *v = json_loadb(data, len, 0, NULL);
    if (t->o->output == AD_CLI_JSON) {
        json_t *line = json_pack("{s:s,s:s,s:O}", "id", eid, "event", event, "data", v != NULL ? v : json_null());
        char *s = line != NULL ? json_dumps(line, JSON_COMPACT) : NULL;
        if (s != NULL)
            printf("%s\n", s);
        free(s);
        json_decref(line);
    } else {
        if (t->header)
            printf("%-8s  %-8s  %-14s  %8s  %s\n", "EVENT-ID", "EVENT", "STATUS", "PROGRESS", "MESSAGE");
        t->header = 0;
        json_t *p = json_object_get(v, "progress");
        const char *st = json_string_value(json_object_get(v, "status"));
        const char *m = json_string_value(json_object_get(v, "message"));
        char pct[16] = "-";
        if (json_is_integer(p))
            snprintf(pct, sizeof(pct), "%lld%%", (long long)json_integer_value(p));
        char *cm = m != NULL ? ad_cli_clean(m, 4096) : ad_strdup("");
        char *cs = ad_cli_clean(st != NULL ? st : "-", 4096);
        char *ce = ad_cli_clean(event, 4096);
        char *ci = ad_cli_clean(eid, 4096);
        ad_client_utf8_cut(cm, 200);
        printf("%-8s  %-8s  %-14s  %8s  %s\n", ci, ce, cs, pct, cm);
        free(cm);
        free(cs);
        free(ce);
        free(ci);
    }
    fflush(stdout);
    json_decref(v);
    return strcmp(event, "done") == 0;
}

static int events(struct ad_cli *c, const struct jobs_opts *o, const char *id)
{
    struct tail t = {o, 1};
    struct ad_cli_req r;
    int refused;
    int rc = ad_cli_stream(c, id, tail_event, &t, &r, &refused);
    if (rc >= 0)
        return rc;
    if (refused && r.status == 204) {
        rc = AD_CLI_OK; /* nothing after the resume point: the job has ended */
    } else if (refused) {
        rc = r.status >= 200 && r.status <= 299
                 ? (fprintf(stderr, "%s: HTTP %ld is not an event stream\n", c->prog, r.status), AD_CLI_PROBLEM)
                 : ad_cli_report(c, &r);
    } else {
        rc = ad_cli_report(c, &r);
        if (rc == AD_CLI_PROBLEM) {
            fprintf(stderr, "%s: the event stream kept breaking\n", c->prog);
            rc = AD_CLI_CONNECT;
        }
    }
    ad_cli_req_free(&r);
    return rc;
}

static int attempts(struct ad_cli *c, const struct jobs_opts *o, const char *id)
{
    char *path = ad_asprintf("/v1/jobs/%s/attempts", id);
    int rc;
    json_t *body = request_json(c, "GET", path, &rc);
    free(path);
    if (body != NULL && o->output == AD_CLI_TABLE)
        print_attempts(json_object_get(body, "attempts"));
    else if (body != NULL)
        ad_cli_print_json(body);
    json_decref(body);
    return rc;
}

/* get, cancel, retry: one request whose answer is a job. */
static int one_job(struct ad_cli *c, const struct jobs_opts *o, const char *method, const char *id, const char *suffix)
{
    char *path = ad_asprintf("/v1/jobs/%s%s", id, suffix);
    int rc;
    json_t *job = request_json(c, method, path, &rc);
    free(path);
    if (job != NULL)
        print_job(o, job);
    json_decref(job);
    return rc;
}

static const char *const verbs[] = {"list", "get", "result", "cancel", "retry", "events", "attempts"};

/* Why the command line is wrong, or NULL: the verb (its index in verbs: *v) and the options that go with it. */
static const char *misuse(int argc, char **argv, const struct jobs_opts *o, int list_only, size_t *v)
{
    const char *why = ad_cli_verb(verbs, sizeof(verbs) / sizeof(verbs[0]), argc, argv, "give one job id", v);
    if (why != NULL)
        return why;
    if (*v > 0 && list_only)
        return "--status, --type, --updated-after, --limit, --page-token, --all and --watch go with list";
    if (*v > 0 && !ad_client_id_ok(argv[optind + 1]))
        return "not a job id";
    if (o->file != NULL && *v != 2)
        return "--output-file goes with result";
    if (o->file != NULL && o->file[0] == '\0')
        return "--output-file: give a file name";
    if (o->all && (o->page_token != NULL || o->watch))
        return "--all goes without --page-token and --watch";
    if (o->watch && (o->updated_after != NULL || o->limit != NULL || o->page_token != NULL))
        return "--watch takes only --status and --type";
    return NULL;
}

int ad_cli_jobs_main(int argc, char **argv)
{
    static const struct option longopts[] = {{"url", required_argument, NULL, 'U'},
                                             {"key", required_argument, NULL, 'K'},
                                             {"output", required_argument, NULL, 'o'},
                                             {"status", required_argument, NULL, 's'},
                                             {"type", required_argument, NULL, 't'},
                                             {"updated-after", required_argument, NULL, 'a'},
                                             {"limit", required_argument, NULL, 'l'},
                                             {"page-token", required_argument, NULL, 'p'},
                                             {"all", no_argument, NULL, 'A'},
                                             {"watch", no_argument, NULL, 'w'},
                                             {"output-file", required_argument, NULL, 'O'},
                                             {"help", no_argument, NULL, 'h'},
                                             {NULL, 0, NULL, 0}};
    struct jobs_opts o;
    memset(&o, 0, sizeof(o));
    int list_only = 0, ch;
    char err[512];
    opterr = 0;
    optind = 0; /* glibc: start afresh */
    while ((ch = getopt_long(argc, argv, ":ho:O:", longopts, NULL)) != -1) {
        switch (ch) {
        case 'U':
            o.url = optarg;
            break;
        case 'K':
            o.key = optarg;
            break;
        case 'o':
            if (ad_cli_parse_output(optarg, &o.output) != 0) {
                return ad_cli_usage_error(PROG, usage, "--output: expected json or table, got '%s'", optarg);
            }
            break;
        case 's':
            o.status = optarg, list_only = 1;
            break;
        case 't':
            o.type = optarg, list_only = 1;
            break;
        case 'a':
            o.updated_after = optarg, list_only = 1;
            break;
        case 'l':
            o.limit = optarg, list_only = 1;
            break;
        case 'p':
            o.page_token = optarg, list_only = 1;
            break;
        case 'A':
            o.all = 1, list_only = 1;
            break;
        case 'w':
            o.watch = 1, list_only = 1;
            break;
        case 'O':
            o.file = optarg;
            break;
        case 'h':
            usage(stdout);
            return AD_CLI_OK;
        default:
            ad_getopt_error(ch, argc, argv, err, sizeof(err));
            return ad_cli_usage_error(PROG, usage, "%s", err);
        }
    }
    const char *verb = optind < argc ? argv[optind] : NULL;
    size_t v;
    const char *why = misuse(argc, argv, &o, list_only, &v);
    if (why != NULL)
        return ad_cli_usage_error(PROG, usage, "%s%s%s", why,
                                  verb != NULL && v == sizeof(verbs) / sizeof(verbs[0]) ? " " : "",
                                  verb != NULL && v == sizeof(verbs) / sizeof(verbs[0]) ? verb : "");
    const char *id = v > 0 ? argv[optind + 1] : NULL;
    struct ad_cli c;
    int rc = ad_cli_open(&c, PROG, o.url, o.key);
    if (rc == 0) {
        switch (v) {
        case 0:
            rc = o.watch ? watch(&c, &o) : list(&c, &o);
            break;
        case 1:
            rc = one_job(&c, &o, "GET", id, "");
            break;
        case 2:
            rc = result(&c, id, o.file);
            break;
        case 3:
            rc = one_job(&c, &o, "POST", id, ":cancel");
            break;
        case 4:
            rc = one_job(&c, &o, "POST", id, ":retry");
            break;
        case 5:
            rc = events(&c, &o, id);
            break;
        default:
            rc = attempts(&c, &o, id);
            break;
        }
    }
    if (rc == AD_CLI_INTERRUPTED)
        fprintf(stderr, PROG ": interrupted\n");
    ad_cli_close(&c);
    return rc;
}
