/*
 * queues.c - `acceptd queues VERB`: list, get, pause, resume, set.
 *
 * Each verb is one request: list and get read GET /v1/queues[/{type}], the others send a merge patch to
 * PATCH /v1/queues/{type} (an admin key) and print the queue as the server answers it. Answers are printed as
 * JSON, or with --output table as aligned columns. The server checks the values: a limit given here is only
 * turned into JSON ("none" is null).
 */
#include "cli/cli_int.h"

#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#define PROG "acceptd queues"

struct queues_opts {
    const char *url, *key;
    enum ad_cli_output output;
    json_t *patch; /* set: the members given */
};

static void usage(FILE *f)
{
    fprintf(f, "usage: acceptd queues list [COMMON]\n"
               "       acceptd queues get TYPE [COMMON]\n"
               "       acceptd queues pause TYPE [COMMON]\n"
               "       acceptd queues resume TYPE [COMMON]\n"
               "       acceptd queues set TYPE [--concurrency N|none] [--group-concurrency N|none]\n"
               "                               [--rate-limit N/PERIOD|none] [--group-rate-limit N/PERIOD|none]\n"
               "                               [COMMON]\n"
               "COMMON: [--url URL] [--key KEY] [--output json|table]\n"
               "      --concurrency N          set: at most N jobs of the type running at once (none: no limit)\n"
               "      --group-concurrency N    set: at most N running per group\n"
               "      --rate-limit N/PERIOD    set: at most N leases started per PERIOD (1s, 10s, 1m, ...)\n"
               "      --group-rate-limit N/PERIOD  set: the same per group\n"
               "      --url URL                the server (ACCEPTD_URL; default " AD_CLI_DEFAULT_URL ")\n"
               "      --key KEY                the key (ACCEPTD_KEY); pause, resume and set need an admin key\n"
               "  -o, --output json|table      JSON (default) or aligned columns\n"
               "  -h, --help                   this text\n"
               "Exit status: 0 done, 2 usage error, 6 no answer from the server, 7 the server refused the request\n"
               "(its problem is printed on stderr). See acceptd(1).\n");
}

/* A limit as JSON: a whole number, or null for "none"; NULL when it is neither. */
static json_t *limit_json(const char *v)
{
    if (strcmp(v, "none") == 0)
        return json_null();
    long long n;
    if (ad_parse_int(v, strlen(v), 1, 1000000000, &n) != 0)
        return NULL;
    return json_integer(n);
}

/* N/PERIOD as {"limit", "period"}, or null for "none"; NULL when it is neither. */
static json_t *rate_json(const char *v)
{
    if (strcmp(v, "none") == 0)
        return json_null();
    const char *slash = strchr(v, '/');
    long long n;
    if (slash == NULL || slash[1] == '\0' || ad_parse_int(v, (size_t)(slash - v), 1, 1000000000, &n) != 0)
        return NULL;
    return json_pack("{s:I,s:s}", "limit", (json_int_t)n, "period", slash + 1);
}

static char *cell_rate(json_t *v)
{
    if (!json_is_object(v))
        return ad_strdup("-");
    return ad_asprintf("%lld/%s", (long long)json_integer_value(json_object_get(v, "limit")),
                       json_string_value(json_object_get(v, "period")) ? json_string_value(json_object_get(v, "period"))
                                                                       : "?");
}

#define COLS 9

static void print_table(json_t *const *qs, size_t n)
{
    static const char *const heads[COLS] = {"TYPE",    "PAUSED",  "CONCURRENCY", "RATE",      "QUEUED",
                                            "RUNNING", "WAITING", "SCHEDULED",   "WAITINGFOR"};
    char **cells = ad_calloc(n * COLS + 1, sizeof(*cells));
    for (size_t i = 0; i < n; i++) {
        json_t *q = qs[i], *k = json_object_get(q, "counts");
        char **row = cells + i * COLS;
        const char *type = json_string_value(json_object_get(q, "type"));
        const char *why = json_string_value(json_object_get(q, "waitingFor"));
        row[0] = ad_cli_clean(type != NULL ? type : "?", 128);
        row[1] = ad_strdup(json_is_true(json_object_get(q, "paused")) ? "yes" : "no");
        row[2] = ad_cli_cell_int(json_object_get(q, "concurrency"));
        row[3] = cell_rate(json_object_get(q, "rateLimit"));
        row[4] = ad_cli_cell_int(json_object_get(k, "queued"));
        row[5] = ad_cli_cell_int(json_object_get(k, "running"));
        row[6] = ad_cli_cell_int(json_object_get(k, "waiting"));
        row[7] = ad_cli_cell_int(json_object_get(k, "scheduled"));
        row[8] = ad_cli_clean(why != NULL ? why : "-", 64);
    }
    /* The counts are aligned right. */
    ad_cli_print_table(heads, 1, cells, n, COLS, (1u << 4) | (1u << 5) | (1u << 6) | (1u << 7));
}

static int request(struct ad_cli *c, const struct queues_opts *o, const char *method, const char *type, json_t *patch)
{
    char *path;
    if (type == NULL) {
        path = ad_strdup("/v1/queues");
    } else {
        char *e = curl_easy_escape(NULL, type, 0);
        path = ad_asprintf("/v1/queues/%s", e != NULL ? e : "");
        curl_free(e);
    }
    json_t *v;
    int rc = ad_cli_call(c, method, path, patch, "application/merge-patch+json", &v);
    free(path);
    if (v != NULL)
        ad_cli_print_items(v, o->output, "queues", print_table);
    json_decref(v);
    return rc;
}

static const char *const verbs[] = {"list", "get", "pause", "resume", "set"};

/* One of the set options into o->patch under name; -1 (usage printed) when its value is not one. */
static int set_member(struct queues_opts *o, const char *name, json_t *v, const char *opt, const char *arg)
{
    if (v == NULL) {
        ad_cli_usage_error(PROG, usage, "%s: expected %s, got '%s'", opt,
                           strstr(opt, "rate") != NULL ? "N/PERIOD or none" : "a whole number or none", arg);
        return -1;
    }
    if (o->patch == NULL)
        o->patch = json_object();
    json_object_set_new(o->patch, name, v);
    return 0;
}

int ad_cli_queues_main(int argc, char **argv)
{
    static const struct option longopts[] = {{"url", required_argument, NULL, 'U'},
                                             {"key", required_argument, NULL, 'K'},
                                             {"output", required_argument, NULL, 'o'},
                                             {"concurrency", required_argument, NULL, 'c'},
                                             {"group-concurrency", required_argument, NULL, 'g'},
                                             {"rate-limit", required_argument, NULL, 'r'},
                                             {"group-rate-limit", required_argument, NULL, 'R'},
                                             {"help", no_argument, NULL, 'h'},
                                             {NULL, 0, NULL, 0}};
    struct queues_opts o;
    memset(&o, 0, sizeof(o));
    int ch, rc = AD_CLI_OK;
    char err[512];
    opterr = 0;
    optind = 0; /* glibc: start afresh */
    while (rc == AD_CLI_OK && (ch = getopt_long(argc, argv, ":ho:", longopts, NULL)) != -1) {
        switch (ch) {
        case 'U':
            o.url = optarg;
            break;
        case 'K':
            o.key = optarg;
            break;
        case 'o':
            if (ad_cli_parse_output(optarg, &o.output) != 0)
                rc = ad_cli_usage_error(PROG, usage, "--output: expected json or table, got '%s'", optarg);
            break;
        case 'c':
            if (set_member(&o, "concurrency", limit_json(optarg), "--concurrency", optarg) < 0)
                rc = AD_CLI_USAGE;
            break;
        case 'g':
            if (set_member(&o, "groupConcurrency", limit_json(optarg), "--group-concurrency", optarg) < 0)
                rc = AD_CLI_USAGE;
            break;
        case 'r':
            if (set_member(&o, "rateLimit", rate_json(optarg), "--rate-limit", optarg) < 0)
                rc = AD_CLI_USAGE;
            break;
        case 'R':
            if (set_member(&o, "groupRateLimit", rate_json(optarg), "--group-rate-limit", optarg) < 0)
                rc = AD_CLI_USAGE;
            break;
        case 'h':
            usage(stdout);
            json_decref(o.patch);
            return AD_CLI_OK;
        default:
            ad_getopt_error(ch, argc, argv, err, sizeof(err));
            rc = ad_cli_usage_error(PROG, usage, "%s", err);
        }
    }
    if (rc != AD_CLI_OK) {
        json_decref(o.patch);
        return rc;
    }
    size_t v;
    const char *why = ad_cli_verb(verbs, sizeof(verbs) / sizeof(verbs[0]), argc, argv, "give one type", &v);
    if (why == NULL && v != 4 && o.patch != NULL)
        why = "--concurrency, --group-concurrency, --rate-limit and --group-rate-limit go with set";
    else if (why == NULL && v == 4 && o.patch == NULL)
        why = "set needs at least one of --concurrency, --group-concurrency, --rate-limit, --group-rate-limit";
    if (why != NULL) {
        json_decref(o.patch);
        return ad_cli_usage_error(PROG, usage, "%s", why);
    }
    struct ad_cli c;
    rc = ad_cli_open(&c, PROG, o.url, o.key);
    if (rc != AD_CLI_OK) {
        json_decref(o.patch);
        return rc;
    }
    const char *type = v > 0 ? argv[optind + 1] : NULL;
    if (v == 2 || v == 3) {
        json_decref(o.patch);
        o.patch = json_pack("{s:b}", "paused", v == 2);
    }
    rc = request(&c, &o, o.patch != NULL ? "PATCH" : "GET", type, o.patch);
    json_decref(o.patch);
    ad_cli_close(&c);
    return rc;
}
