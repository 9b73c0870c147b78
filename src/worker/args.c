/*
 * args.c - the command line of `acceptd worker`: its options, their defaults from the environment, and the
 * usage text.
 *
 * Only reading: every string in the options points into argv or the environment, nothing is checked against
 * the server (the job types exist or not there), and the command is not looked for here (child.c does that).
 */
#include "worker/worker_int.h"

#include <getopt.h>
#include <stdlib.h>
#include <string.h>

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

void ad_worker_usage(FILE *f)
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
