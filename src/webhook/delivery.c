/*
 * delivery.c - the delivery thread: which due deliveries to start, and each transfer with libcurl.
 *
 * Threads. The delivery thread owns the curl multi handle, a read connection to the store and the transfers.
 * The writer thread runs the outbox (webhook.c) and records outcomes (outcome.c). What they share is the set
 * of deliveries the delivery thread must not start again ("busy": in flight, or finished with the outcome not
 * committed yet), under a mutex, and the wake-up. The resolver thread (ssrf.c) only wakes the delivery thread.
 *
 * The delivery thread never writes: each outcome is an operation for the writer (outcome.c), and the delivery
 * stays busy until that operation's batch has ended. Before sending, the row is read again, so an outcome
 * committed after the due list was read is never sent twice by this process. A crash between sending and
 * committing the outcome sends the event again after the restart: delivery is at least once.
 *
 * A bad receiver holds a slot only so long: its answer is read up to webhooks.maxResponseBytes and its headers
 * must come within webhooks.headersTimeoutSeconds (the transfer is cut otherwise), and an endpoint that keeps
 * failing gets fewer slots (slots.c). How an attempt is judged and recorded is outcome.c's.
 */
#include "webhook/webhook_int.h"
#include "core/core.h"
#include "common/metrics.h"
#include "common/trace.h"
#include "core/tracer.h"

#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/x509.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#define SWEEP_PERIOD_MS 60000
#define FAIR_SCAN_MS 100 /* at most this often, a read of the due rows past endpoints at their share */
#define CONNECT_TIMEOUT_MS 10000
#define USER_AGENT "acceptd-webhooks"
#define CLAIM_MARGIN_MS 30000
#define NODE_FILE "node.id"
/* In a cluster, other nodes' deliveries become ours to send when their node dies: look at least this often. */
#define CLUSTER_SCAN_MS 1000

struct flight {
    struct flight *next, **pprev; /* eng.flights */
    struct ad_delivery *d;
    struct ad_wh_health *h; /* its endpoint's share of the slots (slots.c) */
    int is_callback;
    CURL *easy;
    struct curl_slist *headers, *resolve;
    struct ad_ssrf_dial dial;
    long retry_after;    /* seconds, -1 = none */
    long status;         /* of the last status line read, 0 before one */
    int headers_done;    /* the final answer's headers have all arrived */
    size_t answer_bytes; /* of headers and body read so far */
    int64_t started_ms;  /* monotonic */
    int64_t headers_by;  /* monotonic ms by which the headers must be complete */
    /* The attempt's span (docs/tracing.md), a child of its job's submit, when the job has a trace context. */
    struct ad_trace_ctx span;
    int traced;
    int64_t started_wall; /* ms since the epoch: the span's start */
    char cut[160];        /* why we ended the transfer ourselves; "" = we did not */
    char errbuf[CURL_ERROR_SIZE];
};

static struct {
    const struct ad_config *cfg;
    struct ad_store *store;
    struct ad_conn *conn; /* delivery thread's read connection */
    CURLM *multi;         /* NULL once stopped; read by other threads under mu */
    int epfd;             /* the sockets curl asks us to watch, and wakefd */
    int wakefd;           /* eventfd: wake() writes it; -1 once stopped; read by other threads under mu */
    int64_t curl_at;      /* monotonic ms when curl wants its timeout handled; INT64_MAX = never */
    struct ad_resolver *resolver;
    pthread_t thread;
    int started;
    atomic_int stopping;
    atomic_int dirty;  /* new work may be due: scan on the next turn */
    atomic_int reread; /* and rows sooner than those in due may be in the store: read it again */
    struct flight *flights;
    size_t inflight;
    CURL **idle; /* easy handles kept for reuse, up to the concurrency */
    size_t nidle;
    int64_t headers_at; /* monotonic ms of the soonest flight's headers deadline (or earlier); INT64_MAX = none */
    int64_t next_due;   /* wall ms of the soonest delivery not started; INT64_MAX = none known */
    pthread_mutex_t mu;
    int64_t *busy; /* seqs; under mu */
    size_t nbusy, capbusy;
    /* The soonest due rows read from the store and not started yet, soonest first: the next scans start from
     * them and read the store again only once they are used up (scan). */
    struct ad_due *due;
    size_t ndue, capdue;
    char node[33]; /* this node's name on the deliveries it claims (cluster stores); kept in the data dir */
} eng = {.mu = PTHREAD_MUTEX_INITIALIZER, .epfd = -1, .wakefd = -1};

/* Any thread. Only the wake that sets the flag needs to interrupt the poll: the thread looks at the flag
 * before it sleeps. */
static void wake(void)
{
    if (atomic_exchange(&eng.dirty, 1))
        return;
    pthread_mutex_lock(&eng.mu);
    if (eng.wakefd >= 0) {
        uint64_t one = 1;
        if (write(eng.wakefd, &one, sizeof(one)) < 0) { /* EAGAIN: the counter is full, a wake is pending anyway */
        }
    }
    pthread_mutex_unlock(&eng.mu);
}

/* Any thread: wake, and have the next scan read the store instead of starting what it read before. */
static void wake_reread(void)
{
    atomic_store(&eng.reread, 1);
    wake();
}

/* A name was resolved: the deliveries that waited for it were dropped from the due rows. */
static void resolver_wake(void *arg)
{
    wake_reread();
}

void ad_wh_wake(int reread)
{
    if (reread)
        wake_reread();
    else
        wake();
}

/* Deliveries written by the batch the writer is applying; the batch hook wakes the delivery thread. */
static atomic_int outbox_dirty;

void ad_wh_outbox_wrote(void)
{
    atomic_store(&outbox_dirty, 1);
}

/* Writer thread, after each batch. */
static void batch_hook(void)
{
    if (atomic_exchange(&outbox_dirty, 0))
        wake();
}

static void busy_add(int64_t seq)
{
    pthread_mutex_lock(&eng.mu);
    if (eng.nbusy == eng.capbusy) {
        eng.capbusy = eng.capbusy != 0 ? eng.capbusy * 2 : 64;
        eng.busy = ad_realloc(eng.busy, eng.capbusy * sizeof(*eng.busy));
    }
    eng.busy[eng.nbusy++] = seq;
    pthread_mutex_unlock(&eng.mu);
}

void ad_wh_busy_remove(int64_t seq)
{
    pthread_mutex_lock(&eng.mu);
    for (size_t i = 0; i < eng.nbusy; i++) {
        if (eng.busy[i] == seq) {
            eng.busy[i] = eng.busy[--eng.nbusy];
            break;
        }
    }
    pthread_mutex_unlock(&eng.mu);
}

static int seq_cmp(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* Count len more bytes of f's answer: -1 once they pass webhooks.maxResponseBytes (the transfer then ends). */
static int answer_take(struct flight *f, size_t len)
{
    f->answer_bytes += len;
    if (f->answer_bytes <= eng.cfg->webhooks.max_response_bytes)
        return 0;
    snprintf(f->cut, sizeof(f->cut), "the answer passed webhooks.maxResponseBytes (%zu bytes); the rest was not read",
             eng.cfg->webhooks.max_response_bytes);
    return -1;
}

static size_t on_body(char *p, size_t size, size_t n, void *ud)
{
    /* The answer's body means nothing to us: it is read and dropped, up to the cap. */
    return answer_take(ud, size * n) == 0 ? size * n : 0;
}

/* Note the status line and the end of the headers, and keep the Retry-After of the answer: delta-seconds or an
 * HTTP date. */
static size_t on_header(char *p, size_t size, size_t n, void *ud)
{
    struct flight *f = ud;
    size_t len = size * n;
    if (answer_take(f, len) != 0)
        return 0;
    if (len >= 12 && strncmp(p, "HTTP/", 5) == 0) { /* "HTTP/1.1 200 OK": a new answer (after a 1xx) */
        const char *sp = memchr(p, ' ', len);
        long long code;
        f->status = sp != NULL && p + len - sp > 3 && ad_parse_int(sp + 1, 3, 100, 999, &code) == 0 ? (long)code : 0;
        f->retry_after = -1;
        return len;
    }
    if (len <= 2 && (p[0] == '\r' || p[0] == '\n')) {
        f->headers_done = f->status >= 200;
        return len;
    }
    if (len <= 12 || strncasecmp(p, "retry-after:", 12) != 0)
        return len;
    const char *v = p + 12, *end = p + len;
    while (v < end && (*v == ' ' || *v == '\t'))
        v++;
    while (end > v && (end[-1] == '\r' || end[-1] == '\n' || end[-1] == ' ' || end[-1] == '\t'))
        end--;
    char text[64];
    size_t vl = (size_t)(end - v);
    if (vl == 0 || vl >= sizeof(text))
        return len;
    memcpy(text, v, vl);
    text[vl] = '\0';
    long long secs;
    if (ad_parse_int(text, vl, 0, INT32_MAX, &secs) == 0) {
        f->retry_after = (long)secs;
    } else {
        time_t at = curl_getdate(text, NULL), now = time(NULL);
        if (at >= 0)
            f->retry_after = at > now ? (long)(at - now) : 0;
    }
    return len;
}

/* The secrets of one endpoint, opened once per scan and wiped after it. */
struct signer {
    char *hook_id;
    int is_callback;
    int disabled;
    int unshown;      /* the callback secret was never shown (ad_webhook_secret_shown) */
    char *secrets[2]; /* current, then the previous one during a rotation; [0] NULL: cannot sign */
    size_t n;
};

#define SIGNERS_MAX 16

struct scan_state {
    int64_t now;
    int64_t *busy; /* sorted copy taken before the snapshot, and the deliveries this scan started */
    size_t nbusy, capbusy;
    struct signer signers[SIGNERS_MAX];
    size_t nsigners;
};

static void signer_clear(struct signer *s)
{
    for (size_t i = 0; i < 2; i++) {
        if (s->secrets[i] != NULL)
            OPENSSL_cleanse(s->secrets[i], strlen(s->secrets[i]));
        free(s->secrets[i]);
    }
    free(s->hook_id);
    memset(s, 0, sizeof(*s));
}

/* The signer of endpoint hook_id; NULL when the endpoint is gone. */
static struct signer *signer_for(struct scan_state *ss, const char *hook_id)
{
    for (size_t i = 0; i < ss->nsigners; i++)
        if (strcmp(ss->signers[i].hook_id, hook_id) == 0)
            return &ss->signers[i];
    struct ad_webhook *w = NULL;
    if (ad_wh_setup.st->webhook_get(eng.conn, NULL, hook_id, &w) != AD_E_OK)
        return NULL;
    if (ss->nsigners == SIGNERS_MAX)
        signer_clear(&ss->signers[--ss->nsigners]);
    struct signer *s = &ss->signers[ss->nsigners++];
    s->hook_id = ad_strdup(hook_id);
    s->is_callback = w->url == NULL;
    s->disabled = w->disabled_at != 0;
    /* A secret no one was shown signs nothing: the delivery waits (failing) for a rotate. The previous secret of a
     * callback row that an earlier version rotated may be the one its first callback made, so it does not sign
     * either; one this version kept had been shown. */
    s->unshown = !ad_webhook_secret_shown(w);
    s->secrets[0] = s->unshown ? NULL : ad_unseal(w->id, w->secret);
    if (s->secrets[0] != NULL && w->prev_secret != NULL && w->prev_until > ss->now &&
        (w->url != NULL || w->events != 0))
        s->secrets[1] = ad_unseal(w->id, w->prev_secret);
    s->n = s->secrets[1] != NULL ? 2 : 1;
    ad_webhook_free(w);
    return s;
}

/* Append "Webhook-Version: <v>" to h when d's body says its version: the outbox stores each body as made,
 * and one made before events had versions is delivered as it is, without a version it does not carry. */
static struct curl_slist *version_header(struct curl_slist *h, const struct ad_delivery *d)
{
    /* Our own compact JSON: {"id":"evt_...","type":"job....","version":"...", — fixed-charset strings first. */
    static const char key[] = "\",\"version\":\"";
    const char *v = strstr(d->body, key);
    if (v == NULL)
        return h;
    v += sizeof(key) - 1;
    size_t n = strcspn(v, "\"");
    char line[64];
    if (n > 32 || v[n] != '"')
        return h;
    snprintf(line, sizeof(line), "Webhook-Version: %.*s", (int)n, v);
    return curl_slist_append(h, line);
}

/* The signed request headers of d. */
static struct curl_slist *signed_headers(const struct ad_delivery *d, const struct signer *s, int64_t t)
{
    struct curl_slist *h = NULL;
    const char *const *secrets = (const char *const *)s->secrets;
    size_t len = strlen(d->body);
    struct ad_buf b;
    ad_buf_init(&b, 8192);
    ad_buf_printf(&b, "X-Webhook-Signature: ");
    ad_sign_stripe(secrets, s->n, t, d->body, len, &b);
    ad_buf_append(&b, "", 1);
    h = curl_slist_append(h, b.data);
    b.len = 0;
    ad_buf_printf(&b, "webhook-signature: ");
    ad_sign_standard(secrets, s->n, d->event_id, t, d->body, len, &b);
    ad_buf_append(&b, "", 1);
    h = curl_slist_append(h, b.data);
    b.len = 0;
    ad_buf_printf(&b, "webhook-id: %s", d->event_id);
    ad_buf_append(&b, "", 1);
    h = curl_slist_append(h, b.data);
    b.len = 0;
    ad_buf_printf(&b, "webhook-timestamp: %lld", (long long)t);
    ad_buf_append(&b, "", 1);
    h = curl_slist_append(h, b.data);
    b.len = 0;
    ad_buf_printf(&b, "Idempotency-Key: %s", d->event_id);
    ad_buf_append(&b, "", 1);
    h = curl_slist_append(h, b.data);
    ad_buf_free(&b);
    h = curl_slist_append(h, "Content-Type: application/json");
    h = version_header(h, d);
    h = curl_slist_append(h, "Expect:");
    return h;
}

/* The trace context headers of an attempt of d: its job's trace, with this attempt's span as the parent. Sets
 * f->span and f->traced. */
static struct curl_slist *trace_headers(struct flight *f, const struct ad_delivery *d, struct curl_slist *h)
{
    f->traced = ad_traceparent_parse(d->traceparent, &f->span) == 0;
    if (!f->traced)
        return h;
    ad_trace_new_span_id(f->span.span_id);
    char tp[AD_TRACEPARENT_LEN + 1], line[AD_TRACESTATE_MAX + 32];
    ad_traceparent_format(&f->span, tp);
    snprintf(line, sizeof(line), "traceparent: %s", tp);
    h = curl_slist_append(h, line);
    char *ts = ad_tracestate_push(d->tracestate, AD_TRACESTATE_KEY, f->span.span_id);
    snprintf(line, sizeof(line), "tracestate: %s", ts);
    free(ts);
    return curl_slist_append(h, line);
}

/* End a transfer: its easy handle is kept for the next one when there is room. */
static void flight_free(struct flight *f)
{
    curl_multi_remove_handle(eng.multi, f->easy);
    if (eng.nidle < (size_t)eng.cfg->webhooks.concurrency) {
        curl_easy_reset(f->easy);
        eng.idle[eng.nidle++] = f->easy;
    } else {
        curl_easy_cleanup(f->easy);
    }
    curl_slist_free_all(f->headers);
    curl_slist_free_all(f->resolve);
    *f->pprev = f->next;
    if (f->next != NULL)
        f->next->pprev = f->pprev;
    eng.inflight--;
    ad_wh_slots_end(f->h);
    free(f);
}

static void transfer_start(struct flight *f, const char *host, long port, const char *addrs)
{
    struct ad_delivery *d = f->d;
    /* Pin a name to the addresses that were checked; the connect hook checks the one it dials again. */
    struct ad_cidr literal;
    if (ad_cidr_parse(host, &literal) != 0) {
        char *pin = ad_asprintf("+%s:%ld:%s", host, port, addrs);
        f->resolve = curl_slist_append(NULL, pin);
        free(pin);
    }
    long timeout_ms = (long)eng.cfg->webhooks.timeout_seconds * 1000;
    CURL *e = eng.nidle > 0 ? eng.idle[--eng.nidle] : curl_easy_init();
    if (e == NULL)
        abort();
    f->easy = e;
    curl_easy_setopt(e, CURLOPT_URL, d->url);
    curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(e, CURLOPT_PROXY, ""); /* never through a proxy from the environment */
    curl_easy_setopt(e, CURLOPT_POSTFIELDS, d->body);
    curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(d->body));
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, f->headers);
    curl_easy_setopt(e, CURLOPT_RESOLVE, f->resolve);
    curl_easy_setopt(e, CURLOPT_OPENSOCKETFUNCTION, ad_ssrf_opensocket);
    curl_easy_setopt(e, CURLOPT_OPENSOCKETDATA, &f->dial);
    curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(e, CURLOPT_HEADERDATA, f);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, f);
    curl_easy_setopt(e, CURLOPT_PRIVATE, f);
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, f->errbuf);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, timeout_ms);
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, timeout_ms < CONNECT_TIMEOUT_MS ? timeout_ms : CONNECT_TIMEOUT_MS);
    curl_easy_setopt(e, CURLOPT_USERAGENT, USER_AGENT);
    /* HTTP/1.1 unless webhooks.http2. libcurl 7.88 (Debian 12) can end an HTTP/2 transfer before nghttp2 has
     * closed its stream, and then resets the stream: against Node's HTTP/2 server, after nearly every delivery.
     * Node counts those resets as a rapid reset attack and sends GOAWAY after about 1,000 of them; the transfers
     * in flight on that connection are sent again. Over HTTP/1.1 on kept-alive connections the same receiver
     * took twice as many deliveries a second (docs/benchmarks.md, "Webhook deliveries"). */
    int h2 = eng.cfg->webhooks.http2 && strncasecmp(d->url, "https:", 6) == 0;
    curl_easy_setopt(e, CURLOPT_HTTP_VERSION, (long)(h2 ? CURL_HTTP_VERSION_2TLS : CURL_HTTP_VERSION_1_1));
    /* Transfers started together wait for the first connection's handshake and share it instead of each opening
     * its own. */
    curl_easy_setopt(e, CURLOPT_PIPEWAIT, (long)h2);
    if (eng.cfg->webhooks.ca_file != NULL)
        curl_easy_setopt(e, CURLOPT_CAINFO, eng.cfg->webhooks.ca_file);
    f->next = eng.flights;
    if (f->next != NULL)
        f->next->pprev = &f->next;
    f->pprev = &eng.flights;
    eng.flights = f;
    eng.inflight++;
    f->h = ad_wh_slots_begin(d->webhook_id);
    f->started_ms = ad_mono_ms();
    f->headers_by = f->started_ms + (int64_t)eng.cfg->webhooks.headers_timeout_seconds * 1000;
    if (f->headers_by < eng.headers_at)
        eng.headers_at = f->headers_by;
    curl_multi_add_handle(eng.multi, e);
}

/* How long a claimed delivery is left to the node that claimed it: its transfer's timeout and then some. */
static int64_t claim_ms(void)
{
    return (int64_t)eng.cfg->webhooks.timeout_seconds * 1000 + CLAIM_MARGIN_MS;
}

/* A delivery this scan started: the snapshot still shows it due, so a later read in the scan must skip it. */
static void scan_busy_add(struct scan_state *ss, int64_t seq)
{
    if (ss->nbusy == ss->capbusy) {
        ss->capbusy = ss->capbusy * 2 + 16;
        ss->busy = ad_realloc(ss->busy, ss->capbusy * sizeof(*ss->busy));
    }
    size_t i = ss->nbusy++;
    for (; i > 0 && ss->busy[i - 1] > seq; i--)
        ss->busy[i] = ss->busy[i - 1];
    ss->busy[i] = seq;
}

/* Send the delivery with this seq if it is still due. */
static void start(struct scan_state *ss, int64_t seq)
{
    struct ad_delivery *d = NULL;
    /* Read again: an outcome committed after the due list was read must not be sent a second time. */
    if (ad_wh_setup.st->delivery_get(eng.conn, NULL, NULL, seq, &d) != AD_E_OK || d->state != AD_DLV_PENDING ||
        d->next_at > ss->now) {
        ad_delivery_free(d);
        return;
    }
    struct signer *s = signer_for(ss, d->webhook_id);
    if (s == NULL) { /* the endpoint was deleted with its deliveries */
        ad_delivery_free(d);
        return;
    }
    if (s->disabled) { /* left pending by a race with the 410 that disabled it: a dead letter, never sent */
        busy_add(seq);
        scan_busy_add(ss, seq);
        d->state = AD_DLV_DEAD;
        free(d->last_error);
        d->last_error = ad_strdup("not sent: the endpoint is disabled");
        ad_wh_results_push(d, 0);
        return;
    }
    char host[256], addrs[1024], why[256] = "";
    long port = 0;
    enum ad_resolve r = AD_RESOLVE_REFUSED;
    if (ad_ssrf_url_host(d->url, host, sizeof(host), &port) == 0)
        r = ad_resolver_lookup(eng.resolver, host, addrs, sizeof(addrs), why, sizeof(why));
    else
        snprintf(why, sizeof(why), "the URL does not parse");
    /* Nodes sharing a cluster store race for each due delivery: the claim lets one of them send it (a no-op
     * on a single node). A node that dies holding it leaves it due again when the claim runs out. */
    if (r == AD_RESOLVE_PENDING || /* the resolver wakes us when the answer is in */
        ad_wh_setup.st->delivery_claim(eng.conn, seq, ss->now, ss->now + claim_ms(), eng.node) != AD_E_OK) {
        ad_delivery_free(d);
        return;
    }
    busy_add(seq);
    scan_busy_add(ss, seq);
    if (r == AD_RESOLVE_OK && s->unshown)
        snprintf(why, sizeof(why),
                 "not sent: the callback secret was never shown; POST /v1/webhooks/callback:rotate shows a new one");
    else if (r == AD_RESOLVE_OK && s->secrets[0] == NULL)
        snprintf(why, sizeof(why), "the endpoint's secret cannot be unsealed (was webhooks.secretKey changed?)");
    if (r != AD_RESOLVE_OK || s->secrets[0] == NULL) {
        ad_wh_settle(d, s->is_callback, 0, -1, why, 0);
        return;
    }
    struct flight *f = ad_calloc(1, sizeof(*f));
    f->d = d;
    f->is_callback = s->is_callback;
    f->retry_after = -1;
    f->dial.guard = &ad_wh_setup.guard;
    f->headers = trace_headers(f, d, signed_headers(d, s, ss->now / 1000));
    f->started_wall = ad_now_ms();
    transfer_start(f, host, port, addrs);
}

/* The span of an attempt that ended with status (0: no answer) and error (NULL: none), when its job is traced. */
static void trace_attempt(const struct flight *f, long status, const char *error)
{
    if (!f->traced)
        return;
    struct ad_trace_ctx job;
    ad_traceparent_parse(f->d->traceparent, &job);
    int failed = error != NULL || status < 200 || status > 299;
    char message[64];
    snprintf(message, sizeof(message), "HTTP %ld", status);
    struct ad_span_info s = {
        .trace = &f->span,
        .kind = AD_SPAN_CLIENT,
        .name = "POST",
        .span = f->span.span_id,
        .parent = job.span_id,
        .start_ms = f->started_wall,
        .end_ms = ad_now_ms(),
        .error = failed,
        .message = error != NULL ? error : message,
        .job_id = f->d->job_id,
        .tenant = f->d->tenant,
        .event = f->d->event_type,
        .http_status = (int)status,
    };
    ad_tracer_span(&s);
}

/* A transfer ended (or we ended it: f->cut says why): judge it and free it. */
static void finish(struct flight *f, CURLcode rc)
{
    long status = 0;
    char why[320];
    const char *error = NULL;
    if (f->cut[0] != '\0') {
        /* An answer cut short is no success; a status the headers gave keeps its meaning (410, Retry-After). */
        status = f->headers_done && (f->status < 200 || f->status > 299) ? f->status : 0;
        if (f->headers_done)
            snprintf(why, sizeof(why), "the receiver answered HTTP %ld, but %s", f->status, f->cut);
        else
            snprintf(why, sizeof(why), "%s", f->cut);
        error = why;
    } else if (rc == CURLE_OK) {
        curl_easy_getinfo(f->easy, CURLINFO_RESPONSE_CODE, &status);
        if (status >= 300 && status <= 399) {
            snprintf(why, sizeof(why), "the receiver answered HTTP %ld (redirects are not followed)", status);
            error = why;
        }
    } else {
        snprintf(why, sizeof(why), "%s%s", f->dial.why[0] != '\0' ? "refused: " : "",
                 f->dial.why[0] != '\0' ? f->dial.why
                 : f->errbuf[0] != '\0' ? f->errbuf
                                        : curl_easy_strerror(rc));
        error = why;
    }
    struct ad_delivery *d = f->d;
    int is_callback = f->is_callback;
    long retry_after = f->retry_after;
    int64_t ms = ad_mono_ms() - f->started_ms;
    /* A 2xx that took more than half the headers timeout counts against the endpoint like a failure. */
    ad_wh_slots_judge(f->h, status >= 200 && status <= 299 &&
                                ms * 2 <= (int64_t)eng.cfg->webhooks.headers_timeout_seconds * 1000);
    trace_attempt(f, status, error);
    flight_free(f);
    ad_wh_settle(d, is_callback, status, retry_after, error, (double)ms / 1e3);
}

/* End the transfers whose answer's headers are late (webhooks.headersTimeoutSeconds); returns how many. */
static int cut_late(void)
{
    int64_t now = ad_mono_ms();
    if (now < eng.headers_at)
        return 0;
    eng.headers_at = INT64_MAX;
    int n = 0;
    struct flight *next;
    for (struct flight *f = eng.flights; f != NULL; f = next) {
        next = f->next;
        if (f->headers_done)
            continue;
        if (f->headers_by > now) {
            if (f->headers_by < eng.headers_at)
                eng.headers_at = f->headers_by;
            continue;
        }
        snprintf(f->cut, sizeof(f->cut), "no complete answer headers within webhooks.headersTimeoutSeconds (%d s)",
                 eng.cfg->webhooks.headers_timeout_seconds);
        finish(f, CURLE_OPERATION_TIMEDOUT);
        n++;
    }
    return n;
}

/* Handle every transfer that ended; returns how many. */
static int reap(void)
{
    int n = 0, left;
    CURLMsg *m;
    while ((m = curl_multi_info_read(eng.multi, &left)) != NULL) {
        if (m->msg != CURLMSG_DONE)
            continue;
        struct flight *f = NULL;
        CURLcode rc = m->data.result;
        curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, (char **)&f);
        finish(f, rc);
        n++;
    }
    return n;
}

/* Start the due deliveries among the n in due that are not in flight, while there is room, skipping those of
 * endpoints that have their share in flight. Returns whether it skipped any for that reason. With kept, the rows
 * that may still be started (skipped for their endpoint's share, or not reached for want of room) are moved to
 * the front of due, soonest first, and *kept says how many; the others are dropped. */
static int start_due(struct scan_state *ss, struct ad_due *due, size_t n, size_t *kept)
{
    size_t conc = (size_t)eng.cfg->webhooks.concurrency;
    int skipped = 0;
    size_t i, k = 0;
    for (i = 0; i < n && eng.inflight < conc; i++) {
        if (due[i].next_at > ss->now) {
            if (due[i].next_at < eng.next_due)
                eng.next_due = due[i].next_at;
            n = i; /* these and the later ones are read again once due */
            break;
        }
        if (bsearch(&due[i].seq, ss->busy, ss->nbusy, sizeof(*ss->busy), seq_cmp) != NULL)
            continue;
        if (!ad_wh_slots_may_start(due[i].webhook_id)) {
            skipped = 1;
            if (kept != NULL)
                due[k++] = due[i];
        } else {
            start(ss, due[i].seq);
        }
    }
    if (kept != NULL) {
        for (; i < n; i++)
            due[k++] = due[i];
        *kept = k;
    }
    return skipped;
}

/*
 * Start what is due, up to the concurrency, and note when the next delivery falls due. The busy set is copied
 * before the snapshot is taken: a delivery that left it later had its outcome committed after the snapshot,
 * so it is still in the copy and skipped, and every other row the snapshot shows is current.
 *
 * The due rows read are kept (eng.due) and started over the next scans: reading them again each time would
 * read the whole busy window (the rows in flight or with their outcome not committed) for the few that a
 * turn has room for, which was most of this thread's store time. The kept rows are the soonest due, so rows
 * written later (new events, retries, redeliveries: due now or later) come after them, and start() reads each
 * row again before sending it. The store is read again when they are used up, when something may have put a
 * sooner row there (reread: a name resolved, the start), and when a known due time comes (next_due).
 *
 * Fairness: an endpoint has at most perEndpoint transfers in flight, fewer while its attempts keep failing
 * (struct health), so a slow one cannot take every slot from the others. The soonest due rows are read as they come,
 * skipping endpoints at their share. When that skipped some and left room, the others' rows may lie behind a long
 * backlog of those endpoints; reading past it walks the whole backlog, so that second read, without them, runs at most
 * every FAIR_SCAN_MS.
 */
static void scan(int64_t now, int reread)
{
    static int64_t next_fair;
    size_t conc = (size_t)eng.cfg->webhooks.concurrency;
    if (reread) {
        eng.ndue = 0;
        eng.next_due = INT64_MAX;
    }
    if (eng.inflight >= conc)
        return; /* a transfer ending makes room and brings us back */
    struct scan_state ss = {.now = now};
    pthread_mutex_lock(&eng.mu);
    ss.nbusy = eng.nbusy;
    ss.capbusy = ss.nbusy + conc - eng.inflight; /* a scan starts at most that many */
    ss.busy = ad_malloc(ss.capbusy * sizeof(*ss.busy));
    if (ss.nbusy > 0)
        memcpy(ss.busy, eng.busy, ss.nbusy * sizeof(*ss.busy));
    pthread_mutex_unlock(&eng.mu);
    qsort(ss.busy, ss.nbusy, sizeof(*ss.busy), seq_cmp);
    const struct ad_store_ops *st = ad_wh_setup.st;
    int skipped = 0, ok = st->snapshot_begin(eng.conn) == AD_E_OK;
    if (ok && eng.ndue > 0)
        skipped = start_due(&ss, eng.due, eng.ndue, &eng.ndue);
    if (ok && eng.ndue == 0 && eng.inflight < conc) {
        /* Enough for a few turns past the busy window. */
        size_t limit = ss.nbusy + 4 * conc, n = 0;
        if (limit > eng.capdue) {
            eng.capdue = limit;
            eng.due = ad_realloc(eng.due, eng.capdue * sizeof(*eng.due));
        }
        eng.next_due = INT64_MAX;
        ok = st->delivery_due(eng.conn, NULL, 0, (int)limit, eng.due, &n) == AD_E_OK;
        if (ok)
            skipped = start_due(&ss, eng.due, n, &eng.ndue);
    }
    if (!ok) {
        eng.ndue = 0;
        eng.next_due = now + 1000; /* the store is in trouble (logged): look again in a second */
    } else if (skipped && eng.inflight < conc) {
        if (now >= next_fair || next_fair - now > FAIR_SCAN_MS) { /* (the clock may have been set back) */
            next_fair = now + FAIR_SCAN_MS;
            const char *full[AD_DUE_EXCLUDE_MAX];
            size_t nfull = ad_wh_slots_full(full, AD_DUE_EXCLUDE_MAX), n = 0;
            size_t limit = ss.nbusy + conc - eng.inflight;
            struct ad_due *due = ad_malloc(limit * sizeof(*due));
            if (st->delivery_due(eng.conn, full, nfull, (int)limit, due, &n) == AD_E_OK)
                start_due(&ss, due, n, NULL);
            free(due);
        } else if (next_fair < eng.next_due) {
            eng.next_due = next_fair;
        }
    }
    st->snapshot_end(eng.conn);
    if (st->feed_open != NULL && eng.next_due > now + CLUSTER_SCAN_MS)
        eng.next_due = now + CLUSTER_SCAN_MS;
    for (size_t i = 0; i < ss.nsigners; i++)
        signer_clear(&ss.signers[i]);
    free(ss.busy);
}

/*
 * Curl's socket interface: we watch the sockets it names with epoll and tell it which one is ready, so a turn
 * costs what the ready transfers cost. curl_multi_perform walks every transfer in flight and polls each socket
 * once per call, which was most of this thread's time with a busy receiver.
 */
static int on_socket(CURL *easy, curl_socket_t s, int what, void *userp, void *socketp)
{
    if (what == CURL_POLL_REMOVE) {
        epoll_ctl(eng.epfd, EPOLL_CTL_DEL, s, NULL); /* (fails harmlessly when curl closed it already) */
        return 0;
    }
    struct epoll_event ev = {
        .events = (what & CURL_POLL_IN ? EPOLLIN : 0) | (what & CURL_POLL_OUT ? EPOLLOUT : 0),
        .data.fd = s,
    };
    /* socketp is what we assigned when we added s; curl forgets it with the socket's REMOVE. */
    if (socketp != NULL && epoll_ctl(eng.epfd, EPOLL_CTL_MOD, s, &ev) == 0)
        return 0;
    if (epoll_ctl(eng.epfd, EPOLL_CTL_ADD, s, &ev) != 0 && errno == EEXIST)
        epoll_ctl(eng.epfd, EPOLL_CTL_MOD, s, &ev);
    curl_multi_assign(eng.multi, s, &eng);
    return 0;
}

static int on_timer(CURLM *multi, long timeout_ms, void *userp)
{
    eng.curl_at = timeout_ms < 0 ? INT64_MAX : ad_mono_ms() + timeout_ms;
    return 0;
}

/* Let curl handle its timeout when it is due. */
static void curl_timeout(void)
{
    if (eng.curl_at > ad_mono_ms())
        return;
    int running;
    eng.curl_at = INT64_MAX; /* set again by on_timer when curl wants another */
    curl_multi_socket_action(eng.multi, CURL_SOCKET_TIMEOUT, 0, &running);
}

#define EVENTS_MAX 64

/* Wait up to wait_ms for a socket, a wake or curl's timer, and hand the ready sockets to curl. */
static void wait_events(int64_t wait_ms)
{
    struct epoll_event evs[EVENTS_MAX];
    int64_t mono = ad_mono_ms();
    int64_t curl_wait = eng.curl_at == INT64_MAX ? INT64_MAX : eng.curl_at - mono;
    if (curl_wait < wait_ms)
        wait_ms = curl_wait;
    if (eng.headers_at != INT64_MAX && eng.headers_at - mono < wait_ms)
        wait_ms = eng.headers_at - mono;
    if (wait_ms < 0)
        wait_ms = 0;
    int n = epoll_wait(eng.epfd, evs, EVENTS_MAX, wait_ms > INT32_MAX ? INT32_MAX : (int)wait_ms);
    for (int i = 0; i < n; i++) {
        if (evs[i].data.fd == eng.wakefd) {
            uint64_t v;
            if (read(eng.wakefd, &v, sizeof(v)) < 0) { /* EAGAIN: drained by an earlier event */
            }
            continue;
        }
        int flags = (evs[i].events & EPOLLIN ? CURL_CSELECT_IN : 0) |
                    (evs[i].events & EPOLLOUT ? CURL_CSELECT_OUT : 0) |
                    (evs[i].events & (EPOLLERR | EPOLLHUP) ? CURL_CSELECT_ERR : 0);
        int running;
        curl_multi_socket_action(eng.multi, evs[i].data.fd, flags, &running);
    }
    curl_timeout();
}

static void *delivery_main(void *arg)
{
    size_t conc = (size_t)eng.cfg->webhooks.concurrency, room_at = (conc + 3) / 4;
    /* A quarter of one endpoint's share: with a single busy endpoint, the slots that matter are its own. */
    size_t per_at = ((size_t)eng.cfg->webhooks.per_endpoint + 3) / 4, need = per_at < room_at ? per_at : room_at;
    int64_t next_sweep = ad_mono_ms() + 1000;
    size_t room = 0; /* transfers ended since the last scan */
    while (!atomic_load(&eng.stopping)) {
        int64_t now = ad_now_ms();
        /* Ended transfers alone bring a scan only once a quarter of the slots are free and a quarter of an
         * endpoint's share has ended (or little is left in flight): each scan is a new snapshot, and after
         * the writer's last commit that means reading the store's pages again. */
        int roomy = room > 0 && conc - eng.inflight >= room_at && (room >= need || eng.inflight < need);
        if (atomic_exchange(&eng.dirty, 0) || now >= eng.next_due || roomy) {
            room = 0;
            scan(now, atomic_exchange(&eng.reread, 0) || now >= eng.next_due);
        }
        curl_timeout(); /* a transfer just added is started by its timeout of 0 */
        room += (size_t)reap() + (size_t)cut_late();
        ad_wh_results_flush();
        if (ad_mono_ms() >= next_sweep) {
            ad_wh_sweep(ad_now_ms() - eng.cfg->webhooks.keep_ms);
            next_sweep = ad_mono_ms() + (ad_wh_sweep_full() ? 1000 : SWEEP_PERIOD_MS);
        }
        int64_t wait = next_sweep - ad_mono_ms();
        if (eng.next_due != INT64_MAX && eng.next_due - ad_now_ms() < wait)
            wait = eng.next_due - ad_now_ms();
        if (atomic_load(&eng.dirty) || wait < 0 ||
            (room > 0 && conc - eng.inflight >= room_at && (room >= need || eng.inflight < need)))
            wait = 0;
        wait_events(wait);
        room += (size_t)reap() + (size_t)cut_late();
        ad_wh_results_flush();
    }
    return NULL;
}

/* The node's name for its claims: NODE_FILE in the data directory, made on first start. A node that comes back
 * after a crash has the same name and releases what it held (ad_webhook_start). */
static int load_node_name(const char *dir, char out[33], char *err, size_t errlen)
{
    char *path = ad_asprintf("%s/" NODE_FILE, dir);
    int rc = -1;
    FILE *f = fopen(path, "r");
    if (f == NULL && errno == ENOENT) {
        uint8_t raw[16];
        ad_random_bytes(raw, sizeof(raw));
        ad_hex_encode(raw, sizeof(raw), out);
        int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (fd >= 0 && write(fd, out, 32) == 32 && fsync(fd) == 0)
            rc = 0;
        else
            snprintf(err, errlen, "create %s: %s", path, strerror(errno));
        if (fd >= 0)
            close(fd);
    } else if (f == NULL) {
        snprintf(err, errlen, "open %s: %s", path, strerror(errno));
    } else {
        rc = fscanf(f, "%32[0-9a-f]", out) == 1 && strlen(out) == 32 ? 0 : -1;
        if (rc != 0)
            snprintf(err, errlen, "%s: expected 32 hex digits", path);
        fclose(f);
    }
    free(path);
    return rc;
}

/* webhooks.caFile must hold a certificate: curl would read it only at the first https delivery, and then fail
 * every one. */
static int ca_file_check(const char *path, char *err, size_t errlen)
{
    X509_STORE *st = X509_STORE_new();
    int ok = st != NULL && X509_STORE_load_file(st, path) == 1;
    X509_STORE_free(st);
    ERR_clear_error(); /* what the load left on this thread's queue would be blamed on a later call */
    if (!ok)
        snprintf(err, errlen, "webhooks.caFile: %s holds no PEM certificate that can be read", path);
    return ok ? 0 : -1;
}

int ad_webhook_start(const struct ad_config *cfg, struct ad_store *store, const char *public_url, char *err,
                     size_t errlen)
{
    uint8_t key[AD_SEAL_KEY_BYTES];
    if (ad_seal_key_load(cfg->webhooks.secret_key, cfg->data_dir, key, err, errlen) != 0)
        return -1;
    ad_seal_init(key);
    OPENSSL_cleanse(key, sizeof(key));
    if (cfg->webhooks.ca_file != NULL && ca_file_check(cfg->webhooks.ca_file, err, errlen) != 0)
        return -1;
    ad_webhook_configure(cfg, store, public_url);
    eng.cfg = cfg;
    eng.store = store;
    eng.conn = store->ops->connect(store, err, errlen);
    if (eng.conn == NULL)
        return -1;
    if (store->ops->feed_open != NULL) {
        if (load_node_name(cfg->data_dir, eng.node, err, errlen) != 0)
            return -1;
        /* What this node claimed before it last stopped or died is due again now, not when the claims run out. */
        store->ops->delivery_release(eng.conn, eng.node, ad_now_ms());
    }
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK || (eng.multi = curl_multi_init()) == NULL) {
        snprintf(err, errlen, "cannot initialise libcurl");
        return -1;
    }
    eng.epfd = epoll_create1(EPOLL_CLOEXEC);
    eng.wakefd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    struct epoll_event wev = {.events = EPOLLIN, .data.fd = eng.wakefd};
    if (eng.epfd < 0 || eng.wakefd < 0 || epoll_ctl(eng.epfd, EPOLL_CTL_ADD, eng.wakefd, &wev) != 0) {
        snprintf(err, errlen, "webhook delivery thread: epoll: %s", strerror(errno));
        return -1;
    }
    eng.curl_at = INT64_MAX;
    curl_multi_setopt(eng.multi, CURLMOPT_SOCKETFUNCTION, on_socket);
    curl_multi_setopt(eng.multi, CURLMOPT_TIMERFUNCTION, on_timer);
    curl_multi_setopt(eng.multi, CURLMOPT_MAXCONNECTS, (long)cfg->webhooks.concurrency * 2);
    eng.idle = ad_calloc((size_t)cfg->webhooks.concurrency, sizeof(*eng.idle));
    eng.next_due = INT64_MAX;
    eng.headers_at = INT64_MAX;
    ad_wh_slots_init(cfg->webhooks.per_endpoint, cfg->webhooks.concurrency);
    atomic_store(&eng.stopping, 0);
    atomic_store(&eng.dirty, 1); /* whatever was pending before a restart */
    atomic_store(&eng.reread, 1);
    eng.ndue = 0;
    eng.resolver = ad_resolver_new(&ad_wh_setup.guard, resolver_wake, NULL);
    ad_writer_set_batch_hook(batch_hook);
    if (pthread_create(&eng.thread, NULL, delivery_main, NULL) != 0) {
        snprintf(err, errlen, "cannot start the webhook delivery thread");
        return -1;
    }
    pthread_setname_np(eng.thread, "acceptd-webhook");
    eng.started = 1;
    return 0;
}

void ad_webhook_stop(void)
{
    if (!eng.started)
        return;
    eng.started = 0;
    ad_writer_set_batch_hook(NULL);
    atomic_store(&eng.stopping, 1);
    atomic_store(&eng.dirty, 0); /* so that wake() writes the event fd */
    wake();
    pthread_join(eng.thread, NULL);
    while (eng.flights != NULL) {
        ad_delivery_free(eng.flights->d);
        flight_free(eng.flights);
    }
    ad_wh_slots_reset();
    /* The transfers just cut: another node may send them at once (outcomes still being committed win). */
    eng.store->ops->delivery_release(eng.conn, eng.node, ad_now_ms());
    while (eng.nidle > 0)
        curl_easy_cleanup(eng.idle[--eng.nidle]);
    free(eng.idle);
    eng.idle = NULL;
    ad_resolver_free(eng.resolver);
    pthread_mutex_lock(&eng.mu);
    CURLM *m = eng.multi;
    eng.multi = NULL;
    close(eng.wakefd);
    eng.wakefd = -1;
    free(eng.busy);
    eng.busy = NULL;
    eng.nbusy = eng.capbusy = 0;
    free(eng.due);
    eng.due = NULL;
    eng.ndue = eng.capdue = 0;
    pthread_mutex_unlock(&eng.mu);
    curl_multi_cleanup(m);
    close(eng.epfd);
    eng.epfd = -1;
    curl_global_cleanup();
    eng.store->ops->disconnect(eng.conn);
    eng.conn = NULL;
}
