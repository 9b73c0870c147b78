/*
 * batch.c - `acceptd batch submit FILE`: submit a batch (POST /v1/batches) and, with --wait, follow it to its end.
 *
 * FILE (or - for stdin) holds the batch as POST /v1/batches takes it ({"jobs": [...]}), or only the array of its
 * jobs. Without --wait the batch is printed as the server answered it. With --wait the batch is polled: GET
 * /v1/batches/{id} with If-None-Match, as often as Retry-After says (1 s without one); on a terminal its progress
 * is drawn as a bar on stderr, otherwise each change is one line; the final batch goes to stdout, and the exit
 * status is its outcome, as for `acceptd submit --wait`: 0 succeeded, 1 failed, 3 cancelled, 4 partialSuccess.
 * It does not resubmit: a batch whose create got no answer may exist.
 */
#include "cli/cli_int.h"

#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PROG "acceptd batch"
#define BAR_CELLS 30

static void usage(FILE *f)
{
    fprintf(f, "usage: acceptd batch submit FILE|- [--wait [--timeout S]] [--url URL] [--key KEY]\n"
               "  FILE                 the batch, {\"jobs\": [submit bodies]} or only the array of them (- for stdin)\n"
               "      --wait           follow the batch to its end: progress on stderr, the batch on stdout\n"
               "      --timeout S      with --wait: give up after S seconds (exit 5)\n"
               "      --url URL        the server (ACCEPTD_URL; default " AD_CLI_DEFAULT_URL ")\n"
               "      --key KEY        a client key (ACCEPTD_KEY)\n"
               "  -h, --help           this text\n"
               "Exit status: 0 done (with --wait: succeeded), 1 failed, 2 usage error, 3 cancelled, 4 partialSuccess,\n"
               "5 --timeout passed, 6 no answer from the server, 7 the server refused the batch (its problem is\n"
               "printed on stderr), 130 interrupted. See acceptd(1).\n");
}

/* The batch's progress, a line or (tty) a bar redrawn in place. */
static void view(const char *id, json_t *b, int tty)
{
    const char *status = json_string_value(json_object_get(b, "status"));
    int p = (int)json_integer_value(json_object_get(b, "progress"));
    json_t *k = json_object_get(b, "counts");
    char counts[160];
    snprintf(counts, sizeof(counts), "%lld/%lld done, %lld running, %lld failed, %lld cancelled",
             (long long)(json_integer_value(json_object_get(k, "succeeded")) +
                         json_integer_value(json_object_get(k, "partialSuccess"))),
             (long long)json_integer_value(json_object_get(b, "total")),
             (long long)json_integer_value(json_object_get(k, "running")),
             (long long)json_integer_value(json_object_get(k, "failed")),
             (long long)json_integer_value(json_object_get(k, "cancelled")));
    if (tty) {
        char bar[BAR_CELLS + 1];
        int full = (p > 100 ? 100 : p < 0 ? 0 : p) * BAR_CELLS / 100;
        for (int i = 0; i < BAR_CELLS; i++)
            bar[i] = i < full ? '#' : '.';
        bar[BAR_CELLS] = '\0';
        fprintf(stderr, "\r\033[K%s %-14s [%s] %3d%% %s", id, status != NULL ? status : "?", bar, p, counts);
    } else {
        fprintf(stderr, "%s: %s %d%% %s\n", id, status != NULL ? status : "?", p, counts);
    }
    fflush(stderr);
}

/* Retry-After in ms, or dflt when there is none that parses. */
static int64_t retry_after_ms(struct ad_cli_req *r, int64_t dflt)
{
    const char *ra = ad_cli_header(r, "retry-after");
    long long s;
    return ra != NULL && ad_parse_int(ra, strlen(ra), 1, 3600, &s) == 0 ? (int64_t)s * 1000 : dflt;
}

static int outcome(const char *status)
{
    if (status == NULL || strcmp(status, "succeeded") == 0)
        return AD_CLI_OK;
    if (strcmp(status, "failed") == 0)
        return AD_CLI_FAILED;
    if (strcmp(status, "cancelled") == 0)
        return AD_CLI_CANCELLED;
    return AD_CLI_PARTIAL;
}

/* Poll batch id until it ends; the final batch on stdout. The exit status. */
static int wait_batch(struct ad_cli *c, const char *id, json_t *first)
{
    int tty = isatty(STDERR_FILENO);
    char *path = ad_asprintf("/v1/batches/%s", id);
    char *etag = NULL;
    json_t *b = json_incref(first);
    int rc = AD_CLI_OK, last_p = -1;
    for (;;) {
        const char *status = json_string_value(json_object_get(b, "status"));
        int p = (int)json_integer_value(json_object_get(b, "progress"));
        if (p != last_p || (status != NULL && strcmp(status, "running") != 0))
            view(id, b, tty);
        last_p = p;
        if (status != NULL && strcmp(status, "running") != 0) {
            if (tty)
                fputc('\n', stderr);
            ad_cli_print_json(b);
            rc = outcome(status);
            break;
        }
        struct ad_cli_req r;
        struct curl_slist *h = NULL;
        if (etag != NULL) {
            char *line = ad_asprintf("If-None-Match: %s", etag);
            h = curl_slist_append(NULL, line);
            free(line);
        }
        ad_cli_req_init(c, &r, "GET", path, NULL, h, AD_CLI_REQUEST_TIMEOUT_MS);
        int64_t wait_ms = 1000;
        rc = ad_cli_perform(c, &r);
        if (rc == 0 && r.rc == CURLE_OK && r.status == 304) {
            wait_ms = retry_after_ms(&r, 1000);
        } else if (rc == 0 && (r.rc != CURLE_OK || r.status != 200)) {
            rc = ad_cli_report(c, &r);
        } else if (rc == 0) {
            json_t *v = ad_cli_json(c, &r);
            if (v == NULL) {
                rc = AD_CLI_PROBLEM;
            } else {
                json_decref(b);
                b = v;
                free(etag);
                etag = ad_cli_header(&r, "etag") != NULL ? ad_strdup(ad_cli_header(&r, "etag")) : NULL;
                wait_ms = retry_after_ms(&r, 0);
            }
        }
        ad_cli_req_free(&r);
        if (rc != AD_CLI_OK)
            break;
        const char *now = json_string_value(json_object_get(b, "status"));
        if (wait_ms > 0 && now != NULL && strcmp(now, "running") == 0 && (rc = ad_cli_sleep(c, wait_ms)) != 0)
            break;
    }
    if (tty && rc != AD_CLI_OK && last_p >= 0)
        fputc('\n', stderr);
    json_decref(b);
    free(etag);
    free(path);
    return rc;
}

int ad_cli_batch_main(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"url", required_argument, NULL, 'U'}, {"key", required_argument, NULL, 'K'},
        {"wait", no_argument, NULL, 'w'},      {"timeout", required_argument, NULL, 't'},
        {"help", no_argument, NULL, 'h'},      {NULL, 0, NULL, 0}};
    const char *url = NULL, *key = NULL;
    int wait = 0, ch;
    long long timeout = 0;
    char err[512];
    opterr = 0;
    optind = 0; /* glibc: start afresh */
    while ((ch = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        switch (ch) {
        case 'U':
            url = optarg;
            break;
        case 'K':
            key = optarg;
            break;
        case 'w':
            wait = 1;
            break;
        case 't':
            if (ad_parse_int(optarg, strlen(optarg), 1, 86400 * 365, &timeout) != 0)
                return ad_cli_usage_error(PROG, usage, "--timeout: expected a whole number of seconds, got '%s'",
                                          optarg);
            break;
        case 'h':
            usage(stdout);
            return AD_CLI_OK;
        default:
            ad_getopt_error(ch, argc, argv, err, sizeof(err));
            return ad_cli_usage_error(PROG, usage, "%s", err);
        }
    }
    if (optind + 2 != argc || strcmp(argv[optind], "submit") != 0)
        return ad_cli_usage_error(PROG, usage, "expected: batch submit FILE");
    if (timeout > 0 && !wait)
        return ad_cli_usage_error(PROG, usage, "--timeout goes with --wait");
    char *text = ad_cli_read_file(argv[optind + 1], "FILE", err, sizeof(err));
    if (text == NULL) {
        fprintf(stderr, PROG ": %s\n", err);
        return AD_CLI_USAGE;
    }
    json_error_t jerr;
    json_t *doc = json_loads(text, 0, &jerr);
    free(text);
    if (json_is_array(doc)) {
        json_t *o = json_pack("{s:o}", "jobs", doc);
        doc = o;
    }
    if (!json_is_object(doc)) {
        json_decref(doc);
        fprintf(stderr, PROG ": %s: not a batch: {\"jobs\": [...]} or an array of jobs\n", argv[optind + 1]);
        return AD_CLI_USAGE;
    }
    char *body = json_dumps(doc, JSON_COMPACT);
    json_decref(doc);
    struct ad_cli c;
    int rc = ad_cli_open(&c, PROG, url, key);
    if (rc != AD_CLI_OK) {
        free(body);
        return rc;
    }
    if (timeout > 0)
        c.deadline = ad_mono_ms() + timeout * 1000;
    struct ad_cli_req r;
    ad_cli_req_init(&c, &r, "POST", "/v1/batches", body, NULL, AD_CLI_REQUEST_TIMEOUT_MS);
    rc = ad_cli_perform(&c, &r);
    if (rc == 0 && (r.rc != CURLE_OK || r.status != 202))
        rc = ad_cli_report(&c, &r);
    json_t *b = rc == 0 ? ad_cli_json(&c, &r) : NULL;
    if (rc == 0 && b == NULL)
        rc = AD_CLI_PROBLEM;
    ad_cli_req_free(&r);
    if (b != NULL && !wait)
        ad_cli_print_json(b);
    else if (b != NULL) {
        const char *id = json_string_value(json_object_get(b, "id"));
        rc = id != NULL ? wait_batch(&c, id, b) : AD_CLI_PROBLEM;
    }
    json_decref(b);
    ad_cli_close(&c);
    return rc;
}
