/*
 * schedules.c - `acceptd schedules VERB`: list, get, create, pause, resume, trigger, delete.
 *
 * Each verb is one request to /v1/schedules (CONTRACT.md section 12): list and get read, create posts a schedule
 * built from the options, pause and resume send a merge patch of "paused", trigger posts :trigger, delete deletes.
 * Answers are printed as JSON, or with --output table as aligned columns. The server checks every value: the
 * options are only turned into JSON (the payload must be a JSON object).
 */
#include "cli/cli_int.h"

#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#define PROG "acceptd schedules"

struct schedules_opts {
    const char *url, *key;
    enum ad_cli_output output;
    json_t *body; /* create: the members given */
};

static void usage(FILE *f)
{
    fprintf(f, "usage: acceptd schedules list [COMMON]\n"
               "       acceptd schedules get|pause|resume|trigger|delete ID [COMMON]\n"
               "       acceptd schedules create (--cron EXPR | --every DURATION) --type TYPE [--payload JSON]\n"
               "                                [--id ID] [--timezone ZONE] [--overlap POLICY]\n"
               "                                [--catchup-window DURATION] [--paused] [COMMON]\n"
               "COMMON: [--url URL] [--key KEY] [--output json|table]\n"
               "      --cron EXPR              create: 5 fields, 6 with seconds first, or @hourly, @daily, ...\n"
               "      --every DURATION         create: a fixed interval (30s, 5m, 1h)\n"
               "      --type TYPE              create: the job type of each run\n"
               "      --payload JSON           create: the job's payload, a JSON object (default {})\n"
               "      --id ID                  create: the schedule's id (default: one the server makes)\n"
               "      --timezone ZONE          create: an IANA zone the cron fields are read in (default UTC)\n"
               "      --overlap POLICY         create: skip, bufferOne, allow or cancelOther (default skip)\n"
               "      --catchup-window D       create: missed fire times within D still run (default 1m)\n"
               "      --paused                 create: paused from the start\n"
               "      --url URL                the server (ACCEPTD_URL; default " AD_CLI_DEFAULT_URL ")\n"
               "      --key KEY                the key (ACCEPTD_KEY)\n"
               "  -o, --output json|table      JSON (default) or aligned columns\n"
               "  -h, --help                   this text\n"
               "Exit status: 0 done, 2 usage error, 6 no answer from the server, 7 the server refused the request\n"
               "(its problem is printed on stderr). See acceptd(1).\n");
}

#define COLS 8

static void print_table(json_t *const *ss, size_t n)
{
    static const char *const heads[COLS] = {"ID",   "SCHEDULE", "TIMEZONE", "PAUSED",
                                            "NEXT", "LASTJOB",  "FIRES",    "SKIPS"};
    char **cells = ad_calloc(n * COLS + 1, sizeof(*cells));
    for (size_t i = 0; i < n; i++) {
        json_t *s = ss[i], *k = json_object_get(s, "counts");
        json_t *rule = json_object_get(s, "cron");
        if (!json_is_string(rule))
            rule = json_object_get(s, "every");
        json_t *last = json_array_get(json_object_get(s, "recentRuns"), 0);
        char **row = cells + i * COLS;
        row[0] = ad_cli_cell_str(json_object_get(s, "id"), 64);
        row[1] = ad_cli_cell_str(rule, 64);
        row[2] = ad_cli_cell_str(json_object_get(s, "timezone"), 64);
        row[3] = ad_strdup(json_is_true(json_object_get(s, "paused")) ? "yes" : "no");
        row[4] = ad_cli_cell_str(json_object_get(s, "nextRunAt"), 32);
        row[5] = ad_cli_cell_str(json_object_get(last, "jobId"), 64);
        row[6] = ad_cli_cell_int(json_object_get(k, "fires"));
        row[7] = ad_cli_cell_int(json_object_get(k, "skips"));
    }
    ad_cli_print_table(heads, 1, cells, n, COLS, (1u << 6) | (1u << 7));
}

static int request(struct ad_cli *c, const struct schedules_opts *o, const char *method, const char *path, json_t *body,
                   const char *ctype)
{
    json_t *v;
    int rc = ad_cli_call(c, method, path, body, ctype, &v);
    if (v != NULL)
        ad_cli_print_items(v, o->output, "items", print_table);
    json_decref(v);
    return rc;
}

static const char *const verbs[] = {"list", "create", "get", "pause", "resume", "trigger", "delete"};
#define VERB_ONE_ID 2 /* verbs from here on take one id */

/* A create option into o->body under name. */
static void set_member(struct schedules_opts *o, const char *name, json_t *v)
{
    if (o->body == NULL)
        o->body = json_object();
    json_object_set_new(o->body, name, v);
}

static int run(struct schedules_opts *o, size_t v, const char *id)
{
    struct ad_cli c;
    int rc = ad_cli_open(&c, PROG, o->url, o->key);
    if (rc != AD_CLI_OK)
        return rc;
    char *path;
    if (id == NULL) {
        path = ad_strdup("/v1/schedules");
    } else {
        char *e = curl_easy_escape(NULL, id, 0);
        path = ad_asprintf("/v1/schedules/%s%s", e != NULL ? e : "", v == 5 ? ":trigger" : "");
        curl_free(e);
    }
    json_t *patch = v == 3 || v == 4 ? json_pack("{s:b}", "paused", v == 3) : NULL;
    static const char *const methods[] = {"GET", "POST", "GET", "PATCH", "PATCH", "POST", "DELETE"};
    rc = request(&c, o, methods[v], path, v == 1 ? o->body : patch,
                 v == 1 ? "application/json" : "application/merge-patch+json");
    json_decref(patch);
    free(path);
    ad_cli_close(&c);
    return rc;
}

int ad_cli_schedules_main(int argc, char **argv)
{
    static const struct option longopts[] = {{"url", required_argument, NULL, 'U'},
                                             {"key", required_argument, NULL, 'K'},
                                             {"output", required_argument, NULL, 'o'},
                                             {"cron", required_argument, NULL, 'c'},
                                             {"every", required_argument, NULL, 'e'},
                                             {"type", required_argument, NULL, 't'},
                                             {"payload", required_argument, NULL, 'p'},
                                             {"id", required_argument, NULL, 'i'},
                                             {"timezone", required_argument, NULL, 'z'},
                                             {"overlap", required_argument, NULL, 'O'},
                                             {"catchup-window", required_argument, NULL, 'w'},
                                             {"paused", no_argument, NULL, 'P'},
                                             {"help", no_argument, NULL, 'h'},
                                             {NULL, 0, NULL, 0}};
    static const struct {
        int ch;
        const char *member;
    } strs[] = {{'c', "cron"},     {'e', "every"},   {'i', "id"},
                {'z', "timezone"}, {'O', "overlap"}, {'w', "catchupWindow"}};
    struct schedules_opts o;
    memset(&o, 0, sizeof(o));
    const char *type = NULL, *payload = NULL;
    int ch, rc = AD_CLI_OK;
    char err[512];
    opterr = 0;
    optind = 0; /* glibc: start afresh */
    while (rc == AD_CLI_OK && (ch = getopt_long(argc, argv, ":ho:", longopts, NULL)) != -1) {
        size_t k = 0;
        while (k < sizeof(strs) / sizeof(strs[0]) && strs[k].ch != ch)
            k++;
        if (k < sizeof(strs) / sizeof(strs[0])) {
            set_member(&o, strs[k].member, json_string(optarg));
            continue;
        }
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
        case 't':
            type = optarg;
            break;
        case 'p':
            payload = optarg;
            break;
        case 'P':
            set_member(&o, "paused", json_true());
            break;
        case 'h':
            usage(stdout);
            json_decref(o.body);
            return AD_CLI_OK;
        default:
            ad_getopt_error(ch, argc, argv, err, sizeof(err));
            rc = ad_cli_usage_error(PROG, usage, "%s", err);
        }
    }
    size_t v = 0;
    const char *verb = optind < argc ? argv[optind] : NULL;
    while (verb != NULL && v < sizeof(verbs) / sizeof(verbs[0]) && strcmp(verb, verbs[v]) != 0)
        v++;
    const char *why = NULL;
    if (rc != AD_CLI_OK)
        why = "";
    else if (verb == NULL)
        why = "no verb given";
    else if (v == sizeof(verbs) / sizeof(verbs[0]))
        why = "unknown verb";
    else if (v < VERB_ONE_ID && optind + 1 != argc)
        why = "list and create take no arguments (create's id is --id)";
    else if (v >= VERB_ONE_ID && optind + 2 != argc)
        why = "give one schedule id";
    else if (v != 1 && (o.body != NULL || type != NULL || payload != NULL))
        why = "--cron, --every, --type, --payload, --id, --timezone, --overlap, --catchup-window and --paused go with "
              "create";
    else if (v == 1 && type == NULL)
        why = "create needs --type";
    json_t *pl = NULL;
    if (why == NULL && v == 1) {
        pl = payload != NULL ? json_loads(payload, 0, NULL) : json_object();
        if (!json_is_object(pl))
            why = "--payload: expected a JSON object";
        else
            set_member(&o, "job", json_pack("{s:s,s:O}", "type", type, "payload", pl));
        json_decref(pl);
    }
    if (why != NULL) {
        json_decref(o.body);
        return rc != AD_CLI_OK ? rc : ad_cli_usage_error(PROG, usage, "%s", why);
    }
    rc = run(&o, v, v >= VERB_ONE_ID ? argv[optind + 1] : NULL);
    json_decref(o.body);
    return rc;
}
