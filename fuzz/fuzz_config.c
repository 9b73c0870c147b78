/*
 * fuzz_config.c - libFuzzer target: the YAML configuration (src/core/config.c and the mapper in yamlmap.c) from
 * arbitrary bytes.
 *
 * Whatever the input, loading either succeeds or fails with a message, never crashes, leaks or reads out of
 * bounds; a loaded configuration answers type and route lookups, and frees cleanly.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "core/config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct ad_config cfg;
    char err[512] = "";
    ad_config_defaults(&cfg);
    if (ad_config_load_string(&cfg, (const char *)data, size, err, sizeof(err)) == 0) {
        ad_config_type(&cfg, "video.transcode");
        ad_config_route(&cfg, "POST", 4, "/v1/videos", 10);
    } else if (err[0] == '\0') {
        __builtin_trap(); /* a failure always says why */
    }
    ad_config_free(&cfg);
    return 0;
}
