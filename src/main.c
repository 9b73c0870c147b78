/*
 * main.c - the acceptd command line: subcommands over the library.
 */
#include "core/config.h"
#include "server.h"
#include "common/util.h"
#include "worker/worker.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef AD_VERSION
#define AD_VERSION "0.1.0"
#endif

static void usage(FILE *f)
{
    fprintf(f, "usage: acceptd serve [--listen HOST:PORT] [--data DIR] [--store postgresql://...] [--config FILE]\n"
               "                     [--public-url URL]\n"
               "       acceptd worker --url URL --type TYPE [--concurrency N] -- COMMAND [ARGS...]\n"
               "       acceptd version\n");
}

static int cmd_serve(int argc, char **argv)
{
    struct ad_config cfg;
    char err[512];
    const char *config_file = getenv("ACCEPTD_CONFIG");
    for (int i = 0; i < argc; i++)
        if (strcmp(argv[i], "--config") == 0 && i + 1 < argc)
            config_file = argv[i + 1];
    ad_config_defaults(&cfg);
    if (config_file != NULL && ad_config_load_file(&cfg, config_file, err, sizeof(err)) != 0) {
        fprintf(stderr, "acceptd: %s\n", err);
        return 2;
    }
    if (ad_config_apply_env(&cfg, err, sizeof(err)) != 0) {
        fprintf(stderr, "acceptd: %s\n", err);
        return 2;
    }
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--config") == 0 && v != NULL) {
            i++;
        } else if (strcmp(a, "--listen") == 0 && v != NULL) {
            if (ad_config_set_listen(&cfg, v) != 0) {
                fprintf(stderr, "acceptd: --listen %s: expected HOST:PORT\n", v);
                return 2;
            }
            i++;
        } else if (strcmp(a, "--data") == 0 && v != NULL) {
            if (ad_config_set_data(&cfg, v) != 0) {
                fprintf(stderr, "acceptd: --data: expected a directory\n");
                return 2;
            }
            i++;
        } else if (strcmp(a, "--store") == 0 && v != NULL) {
            if (ad_config_set_store(&cfg, v) != 0) {
                fprintf(stderr, "acceptd: --store: expected a postgresql:// connection URL\n");
                return 2;
            }
            i++;
        } else if (strcmp(a, "--public-url") == 0 && v != NULL) {
            if (ad_config_set_public_url(&cfg, v) != 0) {
                fprintf(stderr, "acceptd: --public-url %s: expected an http(s) URL\n", v);
                return 2;
            }
            i++;
        } else {
            fprintf(stderr, "acceptd serve: unknown or incomplete option %s\n", a);
            usage(stderr);
            return 2;
        }
    }
    int rc = ad_server_run(&cfg);
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
        return cmd_serve(argc - 2, argv + 2);
    if (strcmp(argv[1], "worker") == 0)
        return ad_worker_main(argc - 2, argv + 2);
    if (strcmp(argv[1], "version") == 0 || strcmp(argv[1], "--version") == 0) {
        printf("acceptd %s\n", AD_VERSION);
        return 0;
    }
    if (strcmp(argv[1], "help") == 0 || strcmp(argv[1], "--help") == 0) {
        usage(stdout);
        return 0;
    }
    fprintf(stderr, "acceptd: unknown command %s\n", argv[1]);
    usage(stderr);
    return 2;
}
