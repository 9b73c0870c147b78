/*
 * worker.c - `acceptd worker`: lease jobs over HTTP, run a command once per job, report the outcome.
 *
 * One thread and one loop. libcurl's multi interface carries the lease long-poll, the heartbeats, the reports
 * and the result files' uploads at the same time, and curl_multi_poll() also wakes for the children's pipes
 * and for the self-pipe of common/signals.h (SIGTERM/SIGINT: stop; SIGCHLD: a command ended). Each leased job
 * is a task: its command a child process (child.c), its result file uploaded in parts (upload.c). This file is
 * the lease loop: leasing as many jobs as there are free slots, renewing each lease, deciding from how the
 * command ended what to report, sending the report (which asks for the slot's next job) and the shutdown.
 *
 * A job leaves the worker only through a report the server accepted (complete, fail, cancel acknowledgement),
 * or when the server said the lease is no longer ours: nothing is dropped silently. The worker does not
 * decide about retries (the server does, from :fail's `retryable`) and does not know the server's internals.
 * The wire protocol is docs/workers.md.
 */
#include "worker/worker_int.h"
#include "common/signals.h"
#include "common/trace.h"
#include "common/version.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define LEASE_RESPONSE_MAX ((size_t)256 * 1024 * 1024) /* up to 100 jobs with their payloads */
#define PROGRESS_SPACING_MS 250                        /* fastest heartbeat rate driven by progress lines */
#define REQUEST_TIMEOUT_MS 15000
#define LOOP_MAX_SLEEP_MS 1000

static const char *const call_names[] = {"lease", "heartbeat", "complete", "fail", "cancel", "upload"};

static int64_t interval_ms(const struct ad_worker *w)
{
    int64_t ms = (int64_t)w->o.lease_seconds * 1000 / 3;
    return ms < 100 ? 100 : ms;
}

/* ---- HTTP calls ---- */

void ad_worker_call_free(struct ad_worker *w, struct ad_call *c)
{
    if (c == NULL)
        return;
    curl_multi_remove_handle(w->multi, c->easy);
    curl_easy_cleanup(c->easy);
    curl_slist_free_all(c->headers);
    free(c->body);
    ad_buf_free(&c->resp);
    free(c);
}

/* Start a POST of body (taken over) to base + path. */
static struct ad_call *call_start(struct ad_worker *w, enum ad_call_kind kind, struct ad_task *t, const char *path,
                                  char *body)
{
    struct ad_call *c = ad_calloc(1, sizeof(*c));
    c->kind = kind;
    c->task = t;
    c->body = body;
    c->sent = ad_mono_ms();
    ad_buf_init(&c->resp,
                kind == AD_CALL_LEASE || (t != NULL && t->asks_next) ? LEASE_RESPONSE_MAX : AD_WORKER_RESPONSE_MAX);
    c->headers = ad_client_headers(&w->client, curl_slist_append(NULL, "Content-Type: application/json"));
    if (t != NULL && t->traceparent != NULL)
        c->headers = ad_client_header_add(c->headers, "traceparent: %s", t->traceparent);
    long timeout = kind == AD_CALL_LEASE ? (w->o.lease_wait * 1000L + REQUEST_TIMEOUT_MS) : REQUEST_TIMEOUT_MS;
    c->easy = ad_client_easy(&w->client, path, c->headers, &c->resp, c->errbuf, timeout);
    curl_easy_setopt(c->easy, CURLOPT_POSTFIELDS, c->body);
    curl_easy_setopt(c->easy, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(c->body));
    curl_easy_setopt(c->easy, CURLOPT_PRIVATE, c);
    curl_multi_add_handle(w->multi, c->easy);
    return c;
}

int ad_worker_transient(CURLcode rc, long status)
{
    return rc != CURLE_OK || status == 0 || status == 429 || status >= 500;
}

int64_t ad_worker_backoff(int64_t *backoff)
{
    int64_t now = *backoff;
    *backoff = now * 2 > AD_WORKER_BACKOFF_MAX_MS ? AD_WORKER_BACKOFF_MAX_MS : now * 2;
    return now;
}

/* What went wrong with a call, for logs. The caller frees. */
static char *describe(const struct ad_call *c, CURLcode rc, long status)
{
    return ad_client_describe(rc, c->errbuf, status, &c->resp);
}

static void task_free(struct ad_worker *w, struct ad_task *t)
{
    ad_worker_upload_end(w, t);
    ad_worker_result_free(t);
    ad_worker_call_free(w, t->hb);
    ad_worker_call_free(w, t->report);
    ad_worker_task_output_free(t);
    free(t->id);
    free(t->type);
    free(t->lease_id);
    free(t->payload);
    free(t->message);
    free(t->report_body);
    free(t->traceparent);
    free(t->tracestate);
    free(t);
}

/* What this worker leases, max at a time: the members of a lease request but wait. */
static json_t *lease_ask(const struct ad_worker *w, int max)
{
    json_t *types = json_array();
    for (size_t i = 0; i < w->o.ntypes; i++)
        json_array_append_new(types, json_string(w->o.types[i]));
    json_t *ask = json_object();
    json_object_set_new(ask, "types", types);
    json_object_set_new(ask, "max", json_integer(max));
    json_object_set_new(ask, "leaseSeconds", json_integer(w->o.lease_seconds));
    json_object_set_new(ask, "worker", json_string(w->name));
    return ask;
}

/* Send t's report. A :complete or :fail asks for the slot's next job in the same call ("next"), unless the
 * worker is stopping: one commit to wait for instead of two. */
static void report_send(struct ad_worker *w, struct ad_task *t)
{
    char *path = ad_asprintf("/v1/jobs/%s:%s", t->id, call_names[t->report_kind]);
    char *body;
    t->asks_next = !w->stopping && (t->report_kind == AD_CALL_COMPLETE || t->report_kind == AD_CALL_FAIL);
    if (t->asks_next) {
        json_t *ask = lease_ask(w, 1);
        char *text = json_dumps(ask, JSON_COMPACT);
        json_decref(ask);
        body = ad_asprintf("%.*s,\"next\":%s}", (int)strlen(t->report_body) - 1, t->report_body, text);
        free(text);
    } else {
        body = ad_strdup(t->report_body);
    }
    t->report = call_start(w, t->report_kind, t, path, body);
    free(path);
}

/* Decide what to tell the server; body is a JSON object taken over. */
void ad_worker_task_report(struct ad_worker *w, struct ad_task *t, enum ad_call_kind kind, json_t *body)
{
    json_object_set_new(body, "leaseId", json_string(t->lease_id));
    free(t->report_body);
    t->report_body = json_dumps(body, JSON_COMPACT);
    json_decref(body);
    t->report_kind = kind;
    t->reporting = 1;
    t->report_backoff = AD_WORKER_BACKOFF_MIN_MS;
    ad_worker_call_free(w, t->hb);
    t->hb = NULL;
    report_send(w, t);
}

void ad_worker_task_fail(struct ad_worker *w, struct ad_task *t, const char *code, const char *title,
                         const char *detail, int retryable)
{
    char *type = ad_asprintf(AD_CLIENT_PROBLEM_BASE "%s", code);
    json_t *problem = json_object();
    json_object_set_new(problem, "type", json_string(type));
    json_object_set_new(problem, "title", json_string(title));
    json_object_set_new(problem, "status", json_integer(500));
    json_object_set_new(problem, "detail", json_string(detail));
    json_object_set_new(problem, "code", json_string(code));
    free(type);
    json_t *body = json_object();
    json_object_set_new(body, "error", problem);
    json_object_set_new(body, "retryable", json_boolean(retryable));
    ad_info("job %s: reporting failure (%s%s): %.300s", t->id, code, retryable ? ", retryable" : "", detail);
    ad_worker_task_report(w, t, AD_CALL_FAIL, body);
}

/* The command is over and its pipes are drained: tell the server. */
static void task_finished(struct ad_worker *w, struct ad_task *t)
{
    int64_t ms = ad_mono_ms() - t->started;
    if (t->why == AD_END_LOST) {
        ad_warn("job %s: dropped: the lease is no longer this worker's", t->id);
        t->done = 1;
        return;
    }
    if (t->why == AD_END_CANCEL) {
        ad_info("job %s: command stopped after a cancel request; acknowledging", t->id);
        ad_worker_task_report(w, t, AD_CALL_CANCEL, json_object());
        return;
    }
    int ok = WIFEXITED(t->wstatus) && WEXITSTATUS(t->wstatus) == 0;
    if (!ok) {
        char *d = ad_worker_exit_detail(
            t, t->why == AD_END_SHUTDOWN ? "the worker stopped before the command finished: " : "");
        if (t->why == AD_END_SHUTDOWN)
            ad_worker_task_fail(w, t, "worker-shutdown", "Worker shut down", d, 1);
        else
            ad_worker_task_fail(w, t, "command-failed", "Command failed", d, 1);
        free(d);
        return;
    }
    /* A result file, when the command left one, is the result; stdout is then not read as JSON. */
    if (ad_worker_result_file(w, t))
        return;
    if (t->result.toobig) {
        char *d = ad_asprintf("the command printed more than %zu bytes on stdout; the result is limited to that",
                              t->result.max);
        ad_worker_task_fail(w, t, "output-too-large", "Output too large", d, 0);
        free(d);
        return;
    }
    json_error_t jerr;
    json_t *result =
        t->result.len > 0 ? json_loadb(t->result.data, t->result.len, JSON_DECODE_ANY | JSON_ALLOW_NUL, &jerr) : NULL;
    if (result == NULL) {
        char *d;
        if (t->result.len == 0) {
            d = ad_strdup("the command exited 0 but printed nothing on stdout; the result must be a JSON document");
        } else {
            char *start = ad_worker_clean_cut(t->result.data, t->result.len < 120 ? t->result.len : 120, 100);
            d = ad_asprintf("the command's output was not JSON (%s at line %d, column %d); stdout began with: %s",
                            jerr.text, jerr.line, jerr.column, start);
            free(start);
        }
        ad_worker_task_fail(w, t, "output-not-json", "Output was not JSON", d, 0);
        free(d);
        return;
    }
    ad_info("job %s: command succeeded after %lld ms; completing", t->id, (long long)ms);
    json_t *body = json_object();
    json_object_set_new(body, "result", result);
    ad_worker_task_report(w, t, AD_CALL_COMPLETE, body);
}

static void task_start(struct ad_worker *w, json_t *lease, json_t *job, const char *lease_id)
{
    const char *id = json_string_value(json_object_get(job, "id"));
    const char *type = json_string_value(json_object_get(job, "type"));
    if (id == NULL || !ad_client_id_ok(id) || lease_id == NULL) {
        ad_error("worker: ignoring a lease entry without a usable job id and leaseId");
        return;
    }
    struct ad_task *t = ad_calloc(1, sizeof(*t));
    t->w = w;
    t->id = ad_strdup(id);
    t->type = ad_strdup(type != NULL ? type : "");
    t->lease_id = ad_strdup(lease_id);
    t->attempt = (int)json_integer_value(json_object_get(job, "attempt"));
    struct ad_trace_ctx tc;
    const char *tp = json_string_value(json_object_get(lease, "traceparent"));
    const char *ts = json_string_value(json_object_get(lease, "tracestate"));
    if (ad_traceparent_parse(tp, &tc) == 0) {
        t->traceparent = ad_strdup(tp);
        t->tracestate = ts != NULL ? ad_tracestate_clean(ts) : NULL;
    }
    t->started = ad_mono_ms();
    t->lease_until = t->started + (int64_t)w->o.lease_seconds * 1000;
    t->hb_due = t->started + interval_ms(w);
    t->progress = -1;
    t->fd_in = t->fd_out = t->fd_err = t->up_fd = -1;
    json_t *payload = json_object_get(job, "payload");
    char *text = payload != NULL ? json_dumps(payload, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
    t->payload = ad_asprintf("%s\n", text != NULL ? text : "{}");
    free(text);
    t->payload_len = strlen(t->payload);
    ad_worker_task_output_init(t);
    t->next = w->tasks;
    w->tasks = t;
    char err[512];
    if (ad_worker_result_dir(t, err, sizeof(err)) != 0) {
        ad_error("job %s: %s", t->id, err);
        ad_worker_task_fail(w, t, "command-failed", "Command failed", err, 1);
        return;
    }
    if (ad_worker_task_spawn(w, t) != 0) {
        char *d = ad_asprintf("cannot start %s: %s", w->exe, strerror(errno));
        ad_error("job %s: %s", t->id, d);
        ad_worker_task_fail(w, t, "command-failed", "Command failed", d, 1);
        free(d);
        return;
    }
    ad_info("job %s (%s, attempt %d): started pid %ld", t->id, t->type, t->attempt, (long)t->pid);
    ad_worker_task_io(t);
}

/* Slots in use: commands running, and reports that bring their slot's next job. */
static int slots_taken(const struct ad_worker *w)
{
    int n = 0;
    for (const struct ad_task *t = w->tasks; t != NULL; t = t->next)
        n += (!t->reporting || t->asks_next) && !t->done;
    return n;
}

/* ---- answers ---- */

/* Start a task for every lease in leases, the "leases" array of a lease answer or of a report's with next.
 * Returns how many. */
static size_t start_leased(struct ad_worker *w, json_t *leases)
{
    for (size_t i = 0; i < json_array_size(leases); i++) {
        json_t *l = json_array_get(leases, i);
        task_start(w, l, json_object_get(l, "job"), json_string_value(json_object_get(l, "leaseId")));
    }
    return json_array_size(leases);
}

static void lease_done(struct ad_worker *w, struct ad_call *c, CURLcode rc, long status)
{
    int64_t now = ad_mono_ms();
    if (ad_worker_transient(rc, status)) {
        char *why = describe(c, rc, status);
        if (!w->lease_failing)
            ad_warn("worker: cannot lease from %s (%s); retrying", w->client.base, why);
        free(why);
        w->lease_failing = 1;
        w->lease_due = now + ad_worker_backoff(&w->lease_backoff);
        return;
    }
    if (w->lease_failing)
        ad_info("worker: leasing from %s again", w->client.base);
    w->lease_failing = 0;
    w->lease_backoff = AD_WORKER_BACKOFF_MIN_MS;
    if (status == 204) {
        /* Nothing came. A server that does not hold lease requests (wait 0, or maxWaitSeconds 0) must not
         * turn this into a busy loop: ask at most once a second. */
        if (c->sent + 1000 > now)
            w->lease_due = c->sent + 1000;
        return;
    }
    if (status != 200) {
        char *why = describe(c, rc, status);
        ad_error("worker: the server refused the lease request (%s); stopping", why);
        free(why);
        w->exit_code = 1;
        if (!w->stopping) {
            w->stopping = 1;
            w->stop_deadline = now + (int64_t)w->o.grace_seconds * 1000;
        }
        return;
    }
    json_error_t jerr;
    json_t *root = ad_client_json(&c->resp, 0, &jerr);
    json_t *leases = json_object_get(root, "leases");
    if (!json_is_array(leases))
        ad_error("worker: a lease answer without a leases array (%s); its jobs wait for their lease to expire",
                 root == NULL ? jerr.text : "no array");
    start_leased(w, leases);
    json_decref(root);
}

static void heartbeat_done(struct ad_worker *w, struct ad_task *t, struct ad_call *c, CURLcode rc, long status)
{
    int64_t now = ad_mono_ms();
    if (t->reporting)
        return; /* the command ended while this was under way; the report decides */
    if (ad_worker_transient(rc, status)) {
        char *why = describe(c, rc, status);
        ad_warn("job %s: heartbeat failed (%s); retrying", t->id, why);
        free(why);
        t->hb_due = now + (interval_ms(w) < 1000 ? interval_ms(w) : 1000);
        return;
    }
    if (status == 409 || status == 404 || status == 410) {
        char *why = describe(c, rc, status);
        ad_warn("job %s: the lease was taken away (%s); stopping the command", t->id, why);
        free(why);
        ad_worker_task_terminate(t, AD_END_LOST);
        return;
    }
    if (status != 200) {
        char *why = describe(c, rc, status);
        ad_warn("job %s: heartbeat refused (%s)", t->id, why);
        free(why);
        return;
    }
    t->lease_until = c->sent + (int64_t)w->o.lease_seconds * 1000;
    json_t *root = ad_client_json(&c->resp, 0, NULL);
    if (json_is_true(json_object_get(root, "cancelRequested")) && t->why < AD_END_CANCEL) {
        ad_info("job %s: cancel requested; sending SIGTERM to the command", t->id);
        ad_worker_task_terminate(t, AD_END_CANCEL);
    }
    json_decref(root);
}

static void report_done(struct ad_worker *w, struct ad_task *t, struct ad_call *c, CURLcode rc, long status)
{
    int64_t now = ad_mono_ms();
    const char *what = call_names[t->report_kind];
    if (status >= 200 && status < 300 && rc == CURLE_OK) {
        json_t *root = ad_client_json(&c->resp, 0, NULL);
        /* With next: {"job", "leases"}. A daemon that predates next answers the job alone. */
        json_t *job = json_object_get(root, "job");
        const char *st = json_string_value(json_object_get(json_is_object(job) ? job : root, "status"));
        ad_info("job %s: %s accepted; the job is %s", t->id, what, st != NULL ? st : "?");
        t->done = 1;
        if (t->asks_next && start_leased(w, json_object_get(root, "leases")) > 0)
            ad_info("job %s: the next job came with the %s", t->id, what);
        json_decref(root);
        return;
    }
    char *why = describe(c, rc, status);
    if (ad_worker_transient(rc, status)) {
        if (now + t->report_backoff < t->lease_until) {
            ad_warn("job %s: %s failed (%s); retrying", t->id, what, why);
            t->report_due = now + ad_worker_backoff(&t->report_backoff);
        } else {
            ad_error("job %s: giving up on %s (%s): the lease has run out, the server will requeue the job", t->id,
                     what, why);
            t->done = 1;
        }
    } else if (status == 409 || status == 404 || status == 410) {
        ad_warn("job %s: %s refused (%s): the job is no longer this worker's", t->id, what, why);
        t->done = 1;
    } else if (t->report_kind == AD_CALL_COMPLETE && status != 401 && status != 403) {
        /* The result itself was refused (413 too large, 422): the job must still end. */
        char *d = ad_asprintf("the server refused the command's result: %s", why);
        ad_worker_task_fail(w, t, "result-rejected", "Result rejected", d, 0);
        free(d);
    } else {
        ad_error("job %s: %s refused (%s); the job is left to its lease expiry", t->id, what, why);
        t->done = 1;
    }
    free(why);
}

static void process_answers(struct ad_worker *w)
{
    CURLMsg *m;
    int left;
    while ((m = curl_multi_info_read(w->multi, &left)) != NULL) {
        if (m->msg != CURLMSG_DONE)
            continue;
        CURLcode rc = m->data.result;
        struct ad_call *c = NULL;
        curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, (char **)&c);
        long status = 0;
        curl_easy_getinfo(m->easy_handle, CURLINFO_RESPONSE_CODE, &status);
        struct ad_task *t = c->task;
        if (c->kind == AD_CALL_LEASE) {
            w->lease = NULL;
            lease_done(w, c, rc, status);
        } else if (c->kind == AD_CALL_HEARTBEAT) {
            t->hb = NULL;
            heartbeat_done(w, t, c, rc, status);
        } else if (c->kind == AD_CALL_UPLOAD) {
            t->up = NULL;
            ad_worker_upload_done(w, t, c, rc, status);
        } else {
            t->report = NULL;
            report_done(w, t, c, rc, status);
        }
        ad_worker_call_free(w, c);
    }
}

/* ---- the loop ---- */

static void heartbeat_send(struct ad_worker *w, struct ad_task *t, int64_t now)
{
    json_t *body = json_object();
    json_object_set_new(body, "leaseId", json_string(t->lease_id));
    json_object_set_new(body, "leaseSeconds", json_integer(w->o.lease_seconds));
    if (t->progress >= 0)
        json_object_set_new(body, "progress", json_integer(t->progress));
    if (t->message != NULL)
        json_object_set_new(body, "message", json_string(t->message));
    char *text = json_dumps(body, JSON_COMPACT);
    json_decref(body);
    char *path = ad_asprintf("/v1/jobs/%s:heartbeat", t->id);
    t->hb = call_start(w, AD_CALL_HEARTBEAT, t, path, text);
    free(path);
    t->hb_dirty = 0;
    t->hb_last = now;
    t->hb_due = now + interval_ms(w);
}

/* Renew t's lease when due (or sooner for a progress line); lowers *next to when it will be. */
void ad_worker_heartbeat_tick(struct ad_worker *w, struct ad_task *t, int64_t now, int64_t *next)
{
    if (t->hb != NULL || t->why == AD_END_LOST)
        return;
    int64_t due = t->hb_due;
    if (t->hb_dirty && t->hb_last + PROGRESS_SPACING_MS < due)
        due = t->hb_last + PROGRESS_SPACING_MS;
    if (now >= due)
        heartbeat_send(w, t, now);
    else if (due < *next)
        *next = due;
}

static void lease_send(struct ad_worker *w, int free_slots)
{
    json_t *body = lease_ask(w, free_slots);
    json_object_set_new(body, "wait", json_integer(w->o.lease_wait));
    char *text = json_dumps(body, JSON_COMPACT);
    json_decref(body);
    w->lease = call_start(w, AD_CALL_LEASE, NULL, "/v1/leases", text);
}

static void on_stop_signal(struct ad_worker *w, int64_t now)
{
    w->signals_seen++;
    if (w->signals_seen == 1) {
        if (!w->stopping) {
            w->stopping = 1;
            w->stop_deadline = now + (int64_t)w->o.grace_seconds * 1000;
        }
        ad_info("worker: stopping: no new leases; %d running command(s) get %d s to finish", slots_taken(w),
                w->o.grace_seconds);
        return;
    }
    /* A second signal: do not wait any more, but still report every job. */
    ad_info("worker: second signal: killing the running commands now");
    w->stopping = 1;
    w->stop_deadline = now;
    ad_worker_call_free(w, w->lease);
    w->lease = NULL;
    for (struct ad_task *t = w->tasks; t != NULL; t = t->next) {
        if (t->pid > 0) {
            ad_worker_task_terminate(t, AD_END_SHUTDOWN);
            t->kill_at = now;
        }
    }
}

/* Timers and state changes of one loop turn. Returns the ms until the next thing is due. */
static int64_t step(struct ad_worker *w)
{
    int64_t now = ad_mono_ms();
    int64_t next = now + LOOP_MAX_SLEEP_MS;
    ad_worker_reap(w);
    for (struct ad_task *t = w->tasks; t != NULL; t = t->next) {
        if (t->reporting || t->done)
            continue;
        if (t->uploading) {
            ad_worker_upload_tick(w, t, now, &next);
            continue;
        }
        ad_worker_task_io(t);
        if (t->pid == 0) {
            ad_worker_task_drain(t);
            task_finished(w, t);
            continue;
        }
        if (w->stopping && now >= w->stop_deadline && t->why == AD_END_NONE) {
            ad_info("job %s: still running at the end of the grace period; sending SIGTERM", t->id);
            ad_worker_task_terminate(t, AD_END_SHUTDOWN);
        }
        if (t->kill_at != 0 && !t->killed) {
            if (now >= t->kill_at) {
                ad_warn("job %s: the command outlived its grace period; sending SIGKILL", t->id);
                kill(-t->pid, SIGKILL);
                t->killed = 1;
            } else if (t->kill_at < next) {
                next = t->kill_at;
            }
        }
        ad_worker_heartbeat_tick(w, t, now, &next);
    }
    for (struct ad_task *t = w->tasks; t != NULL; t = t->next) {
        if (t->reporting && !t->done && t->report == NULL) {
            if (now >= t->report_due)
                report_send(w, t);
            else if (t->report_due < next)
                next = t->report_due;
        }
    }
    for (struct ad_task **pp = &w->tasks; *pp != NULL;) {
        struct ad_task *t = *pp;
        if (t->done) {
            *pp = t->next;
            task_free(w, t);
        } else {
            pp = &t->next;
        }
    }
    if (w->stopping && w->stop_deadline > now && w->stop_deadline < next)
        next = w->stop_deadline;
    int free_slots = w->o.concurrency - slots_taken(w);
    if (!w->stopping && w->lease == NULL && free_slots > 0) {
        if (now >= w->lease_due)
            lease_send(w, free_slots);
        else if (w->lease_due < next)
            next = w->lease_due;
    }
    return next - now < 0 ? 0 : next - now;
}

static int run(struct ad_worker *w)
{
    struct curl_waitfd *fds = NULL;
    size_t cap = 0;
    for (;;) {
        int64_t now = ad_mono_ms();
        while (w->signals_seen < ad_signals_stops()) {
            if (w->signals_seen >= 2) {
                ad_error("worker: third signal: exiting now; unreported jobs wait for their lease to expire");
                for (struct ad_task *t = w->tasks; t != NULL; t = t->next)
                    if (t->pid > 0)
                        kill(-t->pid, SIGKILL);
                free(fds);
                return 1;
            }
            on_stop_signal(w, now);
        }
        int64_t timeout = step(w);
        if (w->stopping && w->tasks == NULL && w->lease == NULL)
            break;

        size_t need = 1;
        for (struct ad_task *t = w->tasks; t != NULL; t = t->next)
            need += 3;
        if (need > cap) {
            cap = need * 2;
            fds = ad_realloc(fds, cap * sizeof(*fds));
        }
        size_t n = 0;
        fds[n++] = (struct curl_waitfd){.fd = ad_signals_fd(), .events = CURL_WAIT_POLLIN};
        for (struct ad_task *t = w->tasks; t != NULL; t = t->next) {
            if (t->fd_in >= 0)
                fds[n++] = (struct curl_waitfd){.fd = t->fd_in, .events = CURL_WAIT_POLLOUT};
            if (t->fd_out >= 0)
                fds[n++] = (struct curl_waitfd){.fd = t->fd_out, .events = CURL_WAIT_POLLIN};
            if (t->fd_err >= 0)
                fds[n++] = (struct curl_waitfd){.fd = t->fd_err, .events = CURL_WAIT_POLLIN};
        }
        /* revents is not read: curl drops POLLHUP, so every pipe is simply tried each turn (non-blocking). */
        curl_multi_poll(w->multi, fds, (unsigned)n, (int)timeout, NULL);
        ad_signals_drain();
        int still;
        curl_multi_perform(w->multi, &still);
        process_answers(w);
    }
    free(fds);
    return w->exit_code;
}

int ad_worker_main(int argc, char **argv)
{
    struct ad_worker w;
    char err[512];
    memset(&w, 0, sizeof(w));
    int rc = ad_worker_parse_args(argc, argv, &w.o, err, sizeof(err));
    if (rc == 1) {
        ad_worker_usage(stdout);
        return 0;
    }
    if (rc != 0) {
        fprintf(stderr, "acceptd worker: %s\n", err);
        ad_worker_usage(stderr);
        return 2;
    }
    w.exe = ad_worker_resolve_command(w.o.command[0]);
    if (w.exe == NULL) {
        fprintf(stderr, "acceptd worker: %s: not an executable file (nor found in PATH)\n", w.o.command[0]);
        return 2;
    }
    ad_worker_std_fds_open();
    /* A shell starting us in the background without job control ignores SIGINT for us: keep it so, so that
     * Ctrl-C reaches us once, through the script's own signal. SIGCHLD wakes the loop to reap. */
    if (ad_signals_open(AD_SIGNALS_CHILD | AD_SIGNALS_KEEP_IGNORED_INT) != 0) {
        fprintf(stderr, "acceptd worker: cannot create a pipe: %s\n", strerror(errno));
        free(w.exe);
        return 1;
    }
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK || (w.multi = curl_multi_init()) == NULL) {
        fprintf(stderr, "acceptd worker: cannot initialise libcurl\n");
        free(w.exe);
        return 1;
    }
    ad_client_init(&w.client, w.o.url, w.o.key, "acceptd-worker/" AD_VERSION);
    if (w.o.name != NULL) {
        w.name = ad_strdup(w.o.name);
    } else {
        char host[256];
        if (gethostname(host, sizeof(host)) != 0)
            snprintf(host, sizeof(host), "worker");
        host[sizeof(host) - 1] = '\0';
        w.name = ad_asprintf("%.100s/%ld", host, (long)getpid());
    }
    ad_worker_env_init(&w);
    w.lease_backoff = AD_WORKER_BACKOFF_MIN_MS;
    w.part_max = AD_WORKER_PART_BYTES;

    char types[512] = "";
    size_t tl = 0;
    for (size_t i = 0; i < w.o.ntypes && tl < sizeof(types); i++)
        tl += (size_t)snprintf(types + tl, sizeof(types) - tl, "%s%s", i ? "," : "", w.o.types[i]);
    ad_info("worker %s: leasing %s from %s, %d at a time, lease %d s; command %s", w.name, types, w.client.base,
            w.o.concurrency, w.o.lease_seconds, w.exe);

    rc = run(&w);
    ad_info("worker %s: stopped", w.name);

    while (w.tasks != NULL) {
        struct ad_task *t = w.tasks;
        w.tasks = t->next;
        task_free(&w, t);
    }
    ad_worker_call_free(&w, w.lease);
    curl_multi_cleanup(w.multi);
    curl_global_cleanup();
    free(w.envp);
    ad_client_free(&w.client);
    free(w.name);
    free(w.exe);
    ad_signals_close();
    return rc;
}
