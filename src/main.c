/*
 * main.c - the acceptd command line: subcommands over the library.
 */
#include "cli/cli.h"
#include "core/config.h"
#include "server.h"
#include "common/util.h"
#include "common/version.h"
#include "worker/worker.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* `git describe` of the tree built, from the Makefile (COMMIT); a build outside it cannot know it. */

static void usage(FILE *f)
{
    fprintf(f, "usage: acceptd serve [--listen HOST:PORT] [--data DIR] [--store postgresql://...] [--config FILE]\n"
               "                     [--public-url URL]\n"
               "       acceptd worker --url URL --type TYPE [--concurrency N] -- COMMAND [ARGS...]\n"
               "       acceptd submit TYPE [--payload JSON|@FILE|-] [--wait [--timeout S]] [--url URL] [--key KEY]\n"
               "       acceptd jobs list|get|result|cancel|retry|events|attempts [ID] [--output json|table]\n"
               "       acceptd queues list|get|pause|resume|set [TYPE] [--output json|table]\n"
               "       acceptd batch submit FILE|- [--wait [--timeout S]] [--url URL] [--key KEY]\n"
               "       acceptd schedules list|get|create|pause|resume|trigger|delete [ID] [--output json|table]\n"
               "       acceptd version | --version\n"
               "       acceptd help | --help\n"
               "`acceptd COMMAND --help` describes each command's options.\n");
}

static void serve_usage(FILE *f)
{
    fprintf(f,
            "usage: acceptd serve [--listen HOST:PORT] [--data DIR] [--store postgresql://...] [--config FILE]\n"
            "                     [--public-url URL]\n"
            "      --listen HOST:PORT   address to listen on (ACCEPTD_LISTEN; default 127.0.0.1:8080)\n"
            "      --data DIR           directory of the SQLite store (ACCEPTD_DATA; default ./data)\n"
            "      --store URL          a postgresql:// URL: the PostgreSQL store instead of SQLite (ACCEPTD_STORE)\n"
            "      --config FILE        YAML configuration file (ACCEPTD_CONFIG)\n"
            "      --public-url URL     base of the absolute URLs sent (ACCEPTD_PUBLIC_URL)\n"
            "  -h, --help               this text\n"
            "Defaults, then the file, then the environment, then these flags. See acceptd(1).\n");
}

/*
 * The flags are collected first and applied last: they override the environment, which overrides the file,
 * and the file is only known once --config has been read wherever it stands.
 */
static int cmd_serve(int argc, char **argv)
{
    static const struct option longopts[] = {{"listen", required_argument, NULL, 'l'},
                                             {"data", required_argument, NULL, 'd'},
                                             {"store", required_argument, NULL, 's'},
                                             {"config", required_argument, NULL, 'c'},
                                             {"public-url", required_argument, NULL, 'u'},
                                             {"help", no_argument, NULL, 'h'},
                                             {NULL, 0, NULL, 0}};
    const char *listen_addr = NULL, *data = NULL, *store = NULL, *public_url = NULL;
    const char *config_file = getenv("ACCEPTD_CONFIG");
    char err[512];
    int c;
    opterr = 0;
    optind = 0; /* glibc: start afresh */
    while ((c = getopt_long(argc, argv, "+:h", longopts, NULL)) != -1) {
        switch (c) {
        case 'l':
            listen_addr = optarg;
            break;
        case 'd':
            data = optarg;
            break;
        case 's':
            store = optarg;
            break;
        case 'c':
            config_file = optarg;
            break;
        case 'u':
            public_url = optarg;
            break;
        case 'h':
            serve_usage(stdout);
            return 0;
        default:
            ad_getopt_error(c, argc, argv, err, sizeof(err));
            fprintf(stderr, "acceptd serve: %s\n", err);
            serve_usage(stderr);
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "acceptd serve: unexpected argument %s\n", argv[optind]);
        serve_usage(stderr);
        return 2;
    }

    struct ad_config cfg;
    ad_config_defaults(&cfg);
    int rc = 2;
    if (config_file != NULL && ad_config_load_file(&cfg, config_file, err, sizeof(err)) != 0) {
        fprintf(stderr, "acceptd: %s\n", err);
        goto out;
    }
    if (ad_config_apply_env(&cfg, err, sizeof(err)) != 0) {
        fprintf(stderr, "acceptd: %s\n", err);
        goto out;
    }
    if (listen_addr != NULL && ad_config_set_listen(&cfg, listen_addr) != 0) {
        fprintf(stderr, "acceptd: --listen %s: expected HOST:PORT\n", listen_addr);
        goto out;
    }
    if (data != NULL && ad_config_set_data(&cfg, data) != 0) {
        fprintf(stderr, "acceptd: --data: expected a directory\n");
        goto out;
    }
    if (store != NULL && ad_config_set_store(&cfg, store) != 0) {
        fprintf(stderr, "acceptd: --store: expected a postgresql:// connection URL\n");
        goto out;
    }
    if (public_url != NULL && ad_config_set_public_url(&cfg, public_url) != 0) {
        fprintf(stderr, "acceptd: --public-url %s: expected an http(s) URL\n", public_url);
        goto out;
    }
    rc = ad_server_run(&cfg);
out:
    ad_config_free(&cfg);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (strcmp(argv[1], "serve") == 0)
        return cmd_serve(argc - 1, argv + 1);
    if (strcmp(argv[1], "worker") == 0)
        return ad_worker_main(argc - 2, argv + 2);
    if (strcmp(argv[1], "submit") == 0)
        return ad_cli_submit_main(argc - 1, argv + 1);
    if (strcmp(argv[1], "jobs") == 0)
        return ad_cli_jobs_main(argc - 1, argv + 1);
    if (strcmp(argv[1], "queues") == 0)
        return ad_cli_queues_main(argc - 1, argv + 1);
    if (strcmp(argv[1], "batch") == 0)
        return ad_cli_batch_main(argc - 1, argv + 1);
    if (strcmp(argv[1], "schedules") == 0)
        return ad_cli_schedules_main(argc - 1, argv + 1);
    if (strcmp(argv[1], "version") == 0 || strcmp(argv[1], "--version") == 0) {
        printf("acceptd %s (commit %s)\n", AD_VERSION, AD_COMMIT);
        return 0;
    }
    if (strcmp(argv[1], "help") == 0 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        usage(stdout);
        return 0;
    }
    fprintf(stderr, "acceptd: unknown command %s\n", argv[1]);
    usage(stderr);
    return 2;
}
