/*
 * fuzz_cron.c - libFuzzer target: the schedules' parsers of outside input, src/common/cron.c and
 * src/common/tz.c. The first input byte picks one, the rest is its input:
 *   0 a cron expression (up to its first NUL): what parses has next times that are later than where they
 *     start, the same when asked again from just before them, and in order, in UTC and in Europe/Berlin
 *   1 a TZif file (a zone file is a schedule's data too: a damaged or hostile tzdata must not crash the
 *     daemon): what parses gives offsets within a day and two hours, next changes later than where they start,
 *     and next fire times of a few expressions later than where they start
 * A violated property aborts, which libFuzzer reports as a crash.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/cron.h"
#include "common/tz.h"
#include "common/util.h"

static void check(int ok)
{
    if (!ok)
        abort();
}

/* 2026-01-01, 2026-03-29 00:30Z (before Berlin's spring-forward), 2026-10-25 00:30Z (in its overlap), 2045 */
static const int64_t starts[] = {1767225600, 1774744200, 1792888200, 2366841600};

static void fuzz_expr(const uint8_t *data, size_t size)
{
    const uint8_t *nul = memchr(data, 0, size);
    char *expr = ad_strndup((const char *)data, nul != NULL ? (size_t)(nul - data) : size);
    char why[256];
    struct ad_cron *c = ad_cron_parse(expr, why, sizeof(why));
    if (c == NULL) {
        check(why[0] != '\0' && strchr(why, '\n') == NULL);
        free(expr);
        return;
    }
    const char *zones[] = {"UTC", "Europe/Berlin"};
    for (size_t z = 0; z < 2; z++) {
        struct ad_tz *tz = ad_tz_load(zones[z], why, sizeof(why));
        check(tz != NULL);
        for (size_t i = 0; i < sizeof(starts) / sizeof(starts[0]); i++) {
            int64_t t = starts[i];
            for (int k = 0; k < 4; k++) {
                int64_t next = ad_cron_next(c, tz, t);
                check(next == -1 || next > t);
                check(next == -1 || !ad_cron_impossible(c));
                if (next < 0)
                    break;
                check(ad_cron_next(c, tz, next - 1) == next);
                t = next;
            }
        }
        ad_tz_free(tz);
    }
    ad_cron_free(c);
    free(expr);
}

static void fuzz_tzif(const uint8_t *data, size_t size)
{
    char why[256];
    struct ad_tz *tz = ad_tz_parse("Fuzz/Zone", data, size, why, sizeof(why));
    if (tz == NULL) {
        check(why[0] != '\0');
        return;
    }
    for (int64_t t = -3000000000LL; t < 5000000000LL; t += 97654321) {
        int32_t o = ad_tz_offset(tz, t);
        check(o >= -26 * 3600 && o <= 26 * 3600);
        check(ad_tz_next_change(tz, t) > t);
        int64_t u[2];
        int n = ad_tz_resolve(tz, t, u);
        check(n >= 0 && n <= 2);
        check(n < 2 || u[0] < u[1]);
    }
    static const char *const exprs[] = {"30 2 * * *", "*/7 * * * *", "0 0 29 2 *"};
    for (size_t e = 0; e < sizeof(exprs) / sizeof(exprs[0]); e++) {
        struct ad_cron *c = ad_cron_parse(exprs[e], why, sizeof(why));
        check(c != NULL);
        for (size_t i = 0; i < sizeof(starts) / sizeof(starts[0]); i++) {
            int64_t next = ad_cron_next(c, tz, starts[i]);
            check(next == -1 || next > starts[i]);
        }
        ad_cron_free(c);
    }
    ad_tz_free(tz);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    if (data[0] % 2 == 0)
        fuzz_expr(data + 1, size - 1);
    else
        fuzz_tzif(data + 1, size - 1);
    return 0;
}
