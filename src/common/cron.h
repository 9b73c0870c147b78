/*
 * cron.h - cron expressions and their next fire time in a time zone.
 *
 * Five fields (minute hour day-of-month month day-of-week) or six (seconds first); `*`, lists, ranges, steps,
 * month and weekday names (JAN-DEC, SUN-SAT, 7 = Sunday), and the names @yearly, @annually, @monthly,
 * @weekly, @daily, @midnight, @hourly. When both day fields are restricted a day matches either (Vixie
 * cron). Quartz's `L`, `W`, `#` and `?` are refused with a reason. Fire times are local times in the zone,
 * turned into instants by the rules of docs/schedules.md (gaps and overlaps). Next times are found by
 * jumping field by field, not by stepping through seconds. A parsed expression is immutable and may be
 * shared by threads.
 */
#ifndef AD_CRON_H
#define AD_CRON_H

#include <stddef.h>
#include <stdint.h>

#include "common/tz.h"

/* Longest expression accepted (bytes). */
#define AD_CRON_MAX_LEN 256
/* ad_cron_next looks this many years past after_s before answering -1: enough for every expression that can
 * fire at all (29 February can be 8 years apart, 2096 to 2104; a first of February that is a Thursday, 12,
 * 2091 to 2103). */
#define AD_CRON_HORIZON_YEARS 13

struct ad_cron;

/* Parse expr; NULL with a one-line reason in why when it is not valid. The caller frees with ad_cron_free. */
struct ad_cron *ad_cron_parse(const char *expr, char *why, size_t whylen);
/* Free an expression; NULL is ignored. */
void ad_cron_free(struct ad_cron *c);
/* The first fire time strictly after after_s, in UTC seconds since the epoch, with the fields read as local
 * time in tz; -1 when there is none within AD_CRON_HORIZON_YEARS (an expression that can never fire, such
 * as `0 0 30 2 *`, always gives -1). */
int64_t ad_cron_next(const struct ad_cron *c, const struct ad_tz *tz, int64_t after_s);
/* 1 when the expression can never fire (a day of the month that none of its months has, like 30 February). */
int ad_cron_impossible(const struct ad_cron *c);

#endif
