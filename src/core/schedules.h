/*
 * schedules.h - recurring jobs (CONTRACT.md section 12): a schedule's definition (cron or every, in a time zone,
 * with an overlap policy, a catch-up window, a pause and bounds), the writer operations that create, replace,
 * delete and trigger one, and the engine that fires the due ones.
 *
 * Exactly once per fire time: each fire is one writer operation whose transaction holds the jobs it makes and the
 * schedule's progress (next fire time, last job, recent runs, counters), and the progress is written with a
 * compare-and-set on the next fire time that was read (store.h, schedule_put). A crash before the commit leaves
 * the fire time due, after it leaves it done; on PostgreSQL the write lock and the compare-and-set keep two nodes
 * from both taking it. The engine keeps one timer, for the earliest next fire time in the store (an index): a
 * schedule costs nothing between its fires and nothing per future fire time. A bufferOne run made while the one
 * before it runs is held (its runAt far ahead) and released when that one ends. Cluster stores are also looked at
 * once a second, for schedules another node wrote. What a request sends is validated in api/ (the job template as
 * a submit would be); the definition's rules are here, so that both read a schedule alike.
 */
#ifndef AD_CORE_SCHEDULES_H
#define AD_CORE_SCHEDULES_H

#include <jansson.h>

#include "common/util.h"
#include "core/writer.h"
#include "store/store.h"

enum ad_overlap { AD_OVERLAP_SKIP, AD_OVERLAP_BUFFER_ONE, AD_OVERLAP_ALLOW, AD_OVERLAP_CANCEL_OTHER };

/* A schedule's definition, read from its spec. Strings are heap (ad_schedule_def_clear). */
struct ad_sched_def {
    char *cron;       /* NULL with every */
    int64_t every_ms; /* 0 with cron */
    char *timezone;   /* an IANA name; "UTC" by default */
    enum ad_overlap overlap;
    int64_t catchup_ms;
    int paused;
    int64_t start_at, end_at; /* ms; 0 = none */
};
void ad_schedule_def_clear(struct ad_sched_def *d);

/* Where a definition is wrong: pointer (RFC 6901, into the body read) and a sentence. */
typedef void (*ad_sched_bad_fn)(void *arg, const char *pointer, const char *detail);
/* Read the definition members of body (a create's body, or a schedule's spec with a merge patch applied) into d,
 * calling bad for each problem (bad may be NULL); returns how many there were. d is filled as far as it could be
 * and must be cleared either way. Members other than the definition's ("id", "job") are not looked at. */
int ad_schedule_def_read(const json_t *body, struct ad_sched_def *d, ad_sched_bad_fn bad, void *arg);
/* The spec kept for body: its definition members and "job", as a compact JSON object (heap). */
char *ad_schedule_spec(const json_t *body);
/* The job template kept for j, a job parsed from the schedule's "job" (heap). */
char *ad_schedule_tmpl(const struct ad_job *j);
/* The first fire time of d after `after` (ms, UTC), anchored (every) at anchor; 0 when there is none (past endAt,
 * or a cron expression that never fires). */
int64_t ad_schedule_next(const struct ad_sched_def *d, int64_t anchor, int64_t after);
/* The ms a schedule's every counts from: its startAt, else its creation to the second. */
int64_t ad_schedule_anchor(const struct ad_sched_def *d, int64_t created_at);

/* The representation of s (the contract's fields, nextRunAt, upcoming, recentRuns, counters) into b: 0, or -1
 * when b's cap was hit. */
int ad_schedule_render(const struct ad_schedule *s, struct ad_buf *b);

/* A schedule written by the writer. kinds: CREATE s (its tenant, id, spec, tmpl, created_at; AD_E_ALREADY_EXISTS
 * when the id is taken); REPLACE the spec and tmpl of s->tenant and s->id (AD_E_CONFLICT when its version is no
 * longer expect_version); DELETE; TRIGGER one run now under its overlap policy. Out: s, the row as written
 * (DELETE: as it was). */
enum ad_schedule_kind { AD_SCHED_CREATE, AD_SCHED_REPLACE, AD_SCHED_DELETE, AD_SCHED_TRIGGER };
struct ad_schedule_op {
    struct ad_op op;
    enum ad_schedule_kind kind;
    struct ad_schedule s;
    int64_t expect_version;
    int64_t now;
    void *ctx;
    struct ad_op **nested; /* the job operations of a trigger (owned) */
    size_t nnested;
};
struct ad_schedule_op *ad_schedule_op_new(void);

/* Start the engine (event loop thread): a first look at the due schedules, then one timer. cluster: the store is
 * shared with other nodes, so it is looked at once a second too. */
void ad_schedules_start(int cluster);
/* Stop arming the timer (shutdown). */
void ad_schedules_stop(void);
/* A schedule was written with next fire time at (ms; 0 none): fire it then (event loop thread). */
void ad_schedules_wake(int64_t at);

/* A committed change of job j (event loop thread; every node hears every change): when j, a schedule's run, has
 * ended, its bufferOne run held behind it starts now. */
void ad_schedules_job_event(const struct ad_job *j);

#endif
