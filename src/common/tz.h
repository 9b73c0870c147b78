/*
 * tz.h - time zones from the system's tz database, read from its TZif files (RFC 8536), never through the
 * process's TZ or localtime(3): the daemon has threads, and setenv is not thread-safe.
 *
 * A zone is the file's transitions (version 2+ 64-bit data when present, else version 1's 32-bit data) and its
 * footer's POSIX TZ string, which gives the offset after the last transition (Debian's files stop listing
 * transitions in 2037 or earlier and leave the future to that rule). Zones are immutable once loaded and may
 * be shared by threads. No table of offsets lives in the code: "UTC" is the only zone known without a file.
 * Leap-second ("right/") zones are refused. The database is /usr/share/zoneinfo, or the directory named by
 * ACCEPTD_ZONEINFO, or the one given to ad_tz_set_dir (tests).
 */
#ifndef AD_TZ_H
#define AD_TZ_H

#include <stddef.h>
#include <stdint.h>

/* Largest zone file read (bytes); real ones are under 4 KiB. */
#define AD_TZ_MAX_FILE (256 * 1024)
/* Longest zone name accepted ("America/Argentina/ComodRivadavia" is 32). */
#define AD_TZ_MAX_NAME 64

struct ad_tz;

/* Load the zone called name (an IANA name such as "Europe/Berlin"; "UTC" always works, without a file).
 * NULL with a one-line reason in why when the name is malformed (empty, too long, "..", a leading "/", a
 * character outside [A-Za-z0-9_+-/]), unknown, or not a valid TZif file. The caller frees with ad_tz_free. */
struct ad_tz *ad_tz_load(const char *name, char *why, size_t whylen);
/* Parse TZif data already in memory (len bytes), naming the zone name; as ad_tz_load otherwise (fuzzing, tests). */
struct ad_tz *ad_tz_parse(const char *name, const uint8_t *data, size_t len, char *why, size_t whylen);
/* Free a zone from ad_tz_load or ad_tz_parse; NULL is ignored. */
void ad_tz_free(struct ad_tz *tz);
/* The name the zone was loaded by. */
const char *ad_tz_name(const struct ad_tz *tz);
/* Seconds east of UTC at the instant utc_s (seconds since the Unix epoch). */
int32_t ad_tz_offset(const struct ad_tz *tz, int64_t utc_s);
/* The first instant after utc_s at which the offset may change (a listed transition or one of the footer's
 * rule), or INT64_MAX when it never changes again. */
int64_t ad_tz_next_change(const struct ad_tz *tz, int64_t utc_s);
/* The instants whose local (wall-clock) time is local_s, the local time written as seconds since
 * 1970-01-01T00:00 as if it were UTC. Returns how many: 1 normally, 2 in a fall-back overlap (out[0] < out[1]),
 * 0 in a spring-forward gap, where out[0] is set to local_s read with the offset in force before the gap (so
 * 02:30 in Berlin's gap is 01:30Z, 03:30 summer time: RFC 5545 §3.3.5, Temporal's "compatible"). */
int ad_tz_resolve(const struct ad_tz *tz, int64_t local_s, int64_t out[2]);
/* Read zones from dir instead of /usr/share/zoneinfo or ACCEPTD_ZONEINFO (NULL: back to those). Tests only:
 * not thread-safe against concurrent loads. */
void ad_tz_set_dir(const char *dir);

/* The proleptic Gregorian calendar, with no zone: days since 1970-01-01 of y-m-d (m 1-12, d 1-31), the date
 * of a day number, the length of a month, and the weekday of a day number (0 = Sunday). */
int64_t ad_days_from_civil(int64_t y, int m, int d);
void ad_civil_from_days(int64_t days, int64_t *y, int *m, int *d);
int ad_days_in_month(int64_t y, int m);
int ad_weekday(int64_t days);

#endif
