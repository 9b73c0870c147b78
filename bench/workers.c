/*
 * workers.c - the worker side of acceptd measured from a C client (built and run by bench/workers.sh).
 * The same rounds as bench/workers.mjs, without a JavaScript runtime between the daemon and the clock:
 *
 *   workers HOST PORT handoff COUNT [FILE]
 *       A worker connection parks POST /v1/leases {"types":["bench.handoff"],"wait":30}; 2 ms later one
 *       job is submitted on a second connection. Latency: from just before the submit is written to the
 *       lease answer fully read. The worker then completes the job. COUNT rounds, one after the other.
 *       Prints handoff-n, handoff-p50, handoff-p99, handoff-max (ms).
 *       With FILE, each round also times the floor of any durable handoff on that disk: one write of a
 *       commit's size (REF_COMMIT, what a submit's commit writes to SQLite's log) to FILE, as a log is
 *       written (on from the last, back to the start after REF_LOG), and fdatasync. Timed in the same
 *       rounds, so that both see the same noise. Prints fsync-p50, fsync-p99 (ms).
 *   workers HOST PORT e2e JOBS SUBMITTERS WORKERS [MAX]
 *       JOBS submitted over SUBMITTERS connections (one request in flight on each) while WORKERS connections
 *       each lease up to MAX jobs at a time (default 1; wait 5) and complete them one after the other. Rate:
 *       completed jobs per second from the first submit to the last completion. Prints e2e-n, e2e (jobs/s)
 *       and e2e-client-us (this client's own CPU time per job, user and system).
 *       With "next", a worker's complete of the last job it holds asks for its next lease in the same call
 *       ("next" in :complete), and only leases on its own (parked, wait 5) when that brought nothing.
 *   workers HOST PORT e2e-h2 JOBS SUBMITTERS WORKERS SLOTS
 *       The same, with each worker one HTTP/2 connection (h2c) that holds up to SLOTS jobs at once, as a
 *       worker running SLOTS jobs at a time does (acceptd worker --concurrency): it leases up to its free
 *       slots (wait 5), completes every job it holds on a stream of its own, each complete asking for that
 *       slot's next job ("next" with max 1), and leases again when slots are free and no lease is pending.
 *   BENCH_GROUPS=n (e2e, e2e-h2): each job names one of n groups, of mixed sizes (submit_next).
 *
 * Submitters and the e2e workers are keep-alive HTTP/1.1 on 127.0.0.1 with TCP_NODELAY; e2e-h2's workers
 * speak HTTP/2 through libnghttp2. handoff uses blocking sockets; e2e and e2e-h2 drive all of their
 * connections from one thread with epoll, as wrk does. Any unexpected answer stops the run with a message
 * and exit status 1.
 */
#define _GNU_SOURCE /* strcasestr */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <fcntl.h>
#include <netinet/tcp.h>
#include <nghttp2/nghttp2.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define HANDOFF_TYPE "bench.handoff"
#define E2E_TYPE "bench.e2e-c"    /* not bench.e2e: the node run after it starts from an empty queue */
#define MAX_LEASE 100             /* the daemon's cap on "max" */
#define REF_COMMIT (32 * 1024)    /* a submit's commit to the log: 8 frames of a 4 KiB page (strace) */
#define REF_LOG (4 * 1024 * 1024) /* about what the log holds between two checkpoints (1000 frames) */

struct lease {
    char job[64], id[64];
};

struct h2worker;

struct conn {
    int fd;
    int worker;          /* e2e: a worker connection (else a submitter) */
    struct h2worker *h2; /* e2e-h2: the worker's HTTP/2 session (else HTTP/1.1) */
    int completing;      /* e2e worker: the request in flight is a complete */
    struct lease leased[MAX_LEASE];
    int nleased;     /* e2e worker: leases not yet completed */
    char buf[65536]; /* answer bytes read so far */
    size_t len;
};

static const char *host;
static int port;

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void die(const char *what)
{
    fprintf(stderr, "bench/workers.c: %s\n", what);
    exit(1);
}

static void dial(struct conn *c)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    if (inet_pton(AF_INET, host, &a.sin_addr) != 1)
        die("HOST must be an IPv4 address");
    c->fd = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (c->fd < 0 || connect(c->fd, (struct sockaddr *)&a, sizeof a) != 0)
        die("connect");
    c->len = 0;
}

static void post(struct conn *c, const char *path, const char *body)
{
    char req[1024];
    int n =
        snprintf(req, sizeof req,
                 "POST %s HTTP/1.1\r\nHost: bench\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s",
                 path, strlen(body), body);
    /* A request this small goes out whole on a connection with nothing else in flight. */
    if (n <= 0 || (size_t)n >= sizeof req || write(c->fd, req, (size_t)n) != n)
        die("write");
}

/* If c->buf holds one whole answer, return its status and point *body at its NUL-terminated body (valid
 * until the next read on c); else 0. */
static int parse(struct conn *c, char **body)
{
    c->buf[c->len] = '\0';
    char *end = strstr(c->buf, "\r\n\r\n");
    if (end == NULL)
        return 0;
    const char *cl = strcasestr(c->buf, "\r\ncontent-length:");
    size_t need = (size_t)(end + 4 - c->buf) + (cl != NULL && cl < end ? strtoul(cl + 17, NULL, 10) : 0);
    if (c->len < need)
        return 0;
    if (c->len > need)
        die("bytes after an answer (none was asked for)");
    *body = end + 4;
    c->len = 0;
    return atoi(c->buf + 9);
}

/* Read what is there (blocking or not); 0 when a non-blocking socket has nothing. */
static int fill(struct conn *c)
{
    if (c->len + 1 >= sizeof c->buf)
        die("answer too big");
    ssize_t n = read(c->fd, c->buf + c->len, sizeof c->buf - 1 - c->len);
    if (n == 0)
        die("connection closed by the daemon");
    if (n < 0)
        return 0;
    c->len += (size_t)n;
    return 1;
}

/* Blocking: read one whole answer. */
static int answer(struct conn *c, char **body)
{
    int status;
    while ((status = parse(c, body)) == 0)
        fill(c);
    return status;
}

/* Copy the string value of the first "key":"..." in s to out. */
static void field(const char *s, const char *key, char *out, size_t cap)
{
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\":\"", key);
    const char *p = strstr(s, pat);
    if (p == NULL)
        die(key);
    p += strlen(pat);
    size_t n = strcspn(p, "\"");
    if (n >= cap)
        die(key);
    memcpy(out, p, n);
    out[n] = '\0';
}

/* Complete job under lease id, on c; with next (a lease request object), lease more in the same call. */
static void complete(struct conn *c, const char *job, const char *id, const char *next)
{
    char path[256], req[768];
    snprintf(path, sizeof path, "/v1/jobs/%s:complete", job);
    snprintf(req, sizeof req, "{\"leaseId\":\"%s\",\"result\":{\"ok\":true}%s%s}", id, next ? ",\"next\":" : "",
             next ? next : "");
    post(c, path, req);
}

/* Keep the leases in an answer's "leases":[...] in c->leased: each is {"job":{...,"id":...},"leaseId":...}.
 * Returns how many. */
static int take_leases(struct conn *c, const char *body)
{
    c->nleased = 0;
    const char *leases = strstr(body, "\"leases\":[");
    if (leases == NULL)
        die("no leases in the answer");
    for (const char *p = strstr(leases, "{\"job\":"); p != NULL; p = strstr(p + 1, "{\"job\":")) {
        if (c->nleased == MAX_LEASE)
            die("more leases than asked for");
        struct lease *l = &c->leased[c->nleased++];
        field(p, "id", l->job, sizeof l->job);
        field(p, "leaseId", l->id, sizeof l->id);
    }
    return c->nleased;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* One write of a commit's size at *off in fd, and fdatasync: the time in ms. */
static double ref_commit(int fd, off_t *off)
{
    static char page[REF_COMMIT];
    double t0 = now_ms();
    if (pwrite(fd, page, sizeof page, *off) != (ssize_t)sizeof page || fdatasync(fd) != 0)
        die("fsync reference: cannot write");
    *off = (*off + REF_COMMIT) % REF_LOG;
    return now_ms() - t0;
}

static void print_quantiles(const char *name, double *lat, int count)
{
    qsort(lat, (size_t)count, sizeof *lat, cmp);
    printf("%s-n %d\n", name, count);
    printf("%s-p50 %.3f\n", name, lat[(count + 1) / 2 - 1]);
    printf("%s-p99 %.3f\n", name, lat[(count * 99 + 99) / 100 - 1]);
    printf("%s-max %.3f\n", name, lat[count - 1]);
}

static void handoff(int count, const char *ref_file)
{
    static struct conn worker, submitter;
    dial(&worker);
    dial(&submitter);
    double *lat = calloc((size_t)count, sizeof *lat), *ref = calloc((size_t)count, sizeof *ref);
    int ref_fd = -1;
    off_t ref_off = 0;
    if (ref_file != NULL && (ref_fd = open(ref_file, O_RDWR | O_CREAT | O_TRUNC, 0600)) < 0)
        die("fsync reference: cannot open the file");
    char *body, sub[128], req[256];
    post(&worker, "/v1/leases", "{\"types\":[\"" HANDOFF_TYPE "\"],\"max\":1,\"wait\":0}");
    if (answer(&worker, &body) != 204)
        die("warm-up lease: want 204 (nothing of type " HANDOFF_TYPE " may be queued)");
    for (int i = 0; i < count; i++) {
        post(&worker, "/v1/leases",
             "{\"types\":[\"" HANDOFF_TYPE "\"],\"max\":1,\"wait\":30,\"leaseSeconds\":60,\"worker\":\"bench\"}");
        if (ref_fd >= 0)
            ref[i] = ref_commit(ref_fd, &ref_off);
        nanosleep(&(struct timespec){.tv_nsec = 2000000}, NULL); /* let the lease request park */
        snprintf(req, sizeof req, "{\"type\":\"" HANDOFF_TYPE "\",\"payload\":{\"i\":%d}}", i);
        double t0 = now_ms();
        post(&submitter, "/v1/jobs", req);
        int status = answer(&worker, &body);
        lat[i] = now_ms() - t0;
        if (status != 200)
            die("lease: want 200");
        if (take_leases(&worker, body) != 1)
            die("lease: want one lease");
        const struct lease *l = &worker.leased[0];
        complete(&worker, l->job, l->id, NULL);
        if (answer(&submitter, &body) != 202)
            die("submit: want 202");
        field(body, "id", sub, sizeof sub);
        if (strcmp(sub, l->job) != 0)
            die("the worker leased another job than the one submitted");
        if (answer(&worker, &body) != 200)
            die("complete: want 200");
    }
    print_quantiles("handoff", lat, count);
    if (ref_fd >= 0) {
        print_quantiles("fsync", ref, count);
        close(ref_fd);
        unlink(ref_file);
    }
    free(lat);
    free(ref);
}

static int submitted;
static int groups; /* BENCH_GROUPS=n: each e2e job names one of n groups, of mixed sizes */

/* Submit the next job on c, or close c when all are submitted: idle, the daemon's keep-alive timeout
 * would close it. With groups, job i's group is g<floor(n * u^2)>, u a hash of i in [0, 1): group k gets about
 * JOBS / (2 sqrt(k n)) jobs, from a hundredth of them (g0) down to a handful. */
static void submit_next(struct conn *c, int jobs)
{
    if (submitted >= jobs) {
        close(c->fd);
        return;
    }
    char req[160];
    int n = submitted++;
    if (groups > 0) {
        uint32_t h = (uint32_t)n * 2654435761u;
        h ^= h >> 15;
        double u = h / 4294967296.0;
        snprintf(req, sizeof req, "{\"type\":\"" E2E_TYPE "\",\"payload\":{\"n\":%d},\"group\":\"g%d\"}", n,
                 (int)(groups * u * u));
    } else {
        snprintf(req, sizeof req, "{\"type\":\"" E2E_TYPE "\",\"payload\":{\"n\":%d}}", n);
    }
    post(c, "/v1/jobs", req);
}

static int lease_max = 1;
static int chain; /* the last complete of a batch asks for the next one ("next") */

/* A worker's next request: complete the next job it holds, or lease more. */
static void work_next(struct conn *c)
{
    char ask[256];
    snprintf(ask, sizeof ask, "{\"types\":[\"" E2E_TYPE "\"],\"max\":%d,\"leaseSeconds\":60,\"worker\":\"bench\"}",
             lease_max);
    if (c->nleased > 0) {
        struct lease *l = &c->leased[--c->nleased];
        complete(c, l->job, l->id, chain && c->nleased == 0 ? ask : NULL);
        c->completing = 1;
        return;
    }
    char req[256];
    snprintf(req, sizeof req, "%.*s,\"wait\":5}", (int)strlen(ask) - 1, ask);
    post(c, "/v1/leases", req);
    c->completing = 0;
}

/* ---- e2e-h2: workers on HTTP/2 ---- */

/* One request on a worker's HTTP/2 connection: its body going out and its answer coming in. */
struct h2req {
    struct h2worker *w;
    int completing; /* a complete (else a lease request) */
    char out[768];
    size_t outlen, outoff;
    int status;
    char *in;
    size_t inlen, incap;
};

struct h2worker {
    struct conn c; /* fd and epoll registration */
    nghttp2_session *s;
    int slots, held; /* jobs it may hold, jobs it holds (leased, not yet completed) */
    int leasing;     /* a lease request is in flight */
};

static int h2_jobs, h2_completed;
static int h2_minimal; /* BENCH_MINIMAL=1: Prefer: return=minimal on leases and completes */

static ssize_t h2_read_body(nghttp2_session *s, int32_t id, uint8_t *buf, size_t len, uint32_t *flags,
                            nghttp2_data_source *src, void *user)
{
    struct h2req *r = src->ptr;
    size_t n = r->outlen - r->outoff < len ? r->outlen - r->outoff : len;
    memcpy(buf, r->out + r->outoff, n);
    r->outoff += n;
    if (r->outoff == r->outlen)
        *flags |= NGHTTP2_DATA_FLAG_EOF;
    return (ssize_t)n;
}

#define NV(name, value)                                                                                                \
    {                                                                                                                  \
        (uint8_t *)(name), (uint8_t *)(value), sizeof(name) - 1, strlen(value), NGHTTP2_NV_FLAG_NONE                   \
    }

static void h2_post(struct h2worker *w, const char *path, const char *body, int completing)
{
    struct h2req *r = calloc(1, sizeof *r);
    r->w = w;
    r->completing = completing;
    r->outlen = strlen(body);
    if (r->outlen >= sizeof r->out)
        die("request body too big");
    memcpy(r->out, body, r->outlen);
    char len[16], authority[64];
    snprintf(len, sizeof len, "%zu", r->outlen);
    snprintf(authority, sizeof authority, "%s:%d", host, port);
    nghttp2_nv nv[] = {NV(":method", "POST"),
                       NV(":scheme", "http"),
                       NV(":authority", authority),
                       NV(":path", path),
                       NV("content-type", "application/json"),
                       NV("content-length", len),
                       NV("prefer", "return=minimal")};
    /* BENCH_MINIMAL=1: ask for lean answers (leases without the whole job); else the last header is left out. */
    size_t nnv = sizeof nv / sizeof nv[0] - (h2_minimal ? 0 : 1);
    nghttp2_data_provider prd = {.source.ptr = r, .read_callback = h2_read_body};
    if (nghttp2_submit_request(w->s, NULL, nv, nnv, &prd, r) < 0)
        die("nghttp2_submit_request");
}

static void h2_lease(struct h2worker *w)
{
    char req[256];
    snprintf(req, sizeof req,
             "{\"types\":[\"" E2E_TYPE "\"],\"max\":%d,\"wait\":5,\"leaseSeconds\":60,\"worker\":\"bench\"}",
             w->slots - w->held);
    w->leasing = 1;
    h2_post(w, "/v1/leases", req, 0);
}

static void h2_complete(struct h2worker *w, const char *job, const char *id)
{
    char path[256], req[512];
    snprintf(path, sizeof path, "/v1/jobs/%s:complete", job);
    snprintf(req, sizeof req,
             "{\"leaseId\":\"%s\",\"result\":{\"ok\":true},\"next\":{\"types\":[\"" E2E_TYPE "\"],\"max\":1,"
             "\"leaseSeconds\":60,\"worker\":\"bench\"}}",
             id);
    h2_post(w, path, req, 1);
}

/* Complete every lease in an answer's "leases":[...]; returns how many there were. */
static int h2_take(struct h2worker *w, const char *body)
{
    const char *leases = strstr(body, "\"leases\":[");
    if (leases == NULL)
        die("no leases in the answer");
    int n = 0;
    /* A lean lease ({"id", ..., "leaseId"}) starts with its id; a full one with the job. */
    const char *start = h2_minimal ? "{\"id\":" : "{\"job\":";
    for (const char *p = strstr(leases, start); p != NULL; p = strstr(p + 1, start)) {
        struct lease l;
        field(p, "id", l.job, sizeof l.job);
        field(p, "leaseId", l.id, sizeof l.id);
        h2_complete(w, l.job, l.id);
        n++;
    }
    return n;
}

static int h2_on_header(nghttp2_session *s, const nghttp2_frame *f, const uint8_t *name, size_t namelen,
                        const uint8_t *value, size_t valuelen, uint8_t flags, void *user)
{
    struct h2req *r = nghttp2_session_get_stream_user_data(s, f->hd.stream_id);
    if (r != NULL && namelen == 7 && memcmp(name, ":status", 7) == 0)
        r->status = atoi((const char *)value);
    return 0;
}

static int h2_on_data(nghttp2_session *s, uint8_t flags, int32_t id, const uint8_t *data, size_t len, void *user)
{
    struct h2req *r = nghttp2_session_get_stream_user_data(s, id);
    if (r == NULL)
        return 0;
    if (r->inlen + len + 1 > r->incap) {
        r->incap = (r->inlen + len + 1) * 2;
        r->in = realloc(r->in, r->incap);
    }
    memcpy(r->in + r->inlen, data, len);
    r->inlen += len;
    r->in[r->inlen] = '\0';
    return 0;
}

static int h2_on_close(nghttp2_session *s, int32_t id, uint32_t error, void *user)
{
    struct h2req *r = nghttp2_session_get_stream_user_data(s, id);
    if (r == NULL)
        return 0;
    struct h2worker *w = r->w;
    const char *body = r->in != NULL ? r->in : "";
    if (error != 0)
        die("a stream was reset");
    if (r->completing) {
        if (r->status != 200)
            die("complete: want 200");
        h2_completed++;
        w->held--;
        w->held += h2_take(w, body);
    } else {
        w->leasing = 0;
        if (r->status == 200)
            w->held += h2_take(w, body);
        else if (r->status != 204)
            die("lease: want 200 or 204");
    }
    if (w->held < w->slots && !w->leasing && h2_completed < h2_jobs)
        h2_lease(w);
    free(r->in);
    free(r);
    return 0;
}

/* Write what the session has to send; the socket is blocking-by-poll, so a full buffer waits. The frames are
 * gathered first and written together, as HTTP/2 clients built for load do (h2load, curl): nghttp2 hands them
 * out one at a time, and a write per frame would cost this client, and the daemon's reads, a system call each. */
static void h2_flush(struct h2worker *w)
{
    static uint8_t *out;
    static size_t cap;
    size_t len = 0;
    const uint8_t *data;
    ssize_t n;
    while ((n = nghttp2_session_mem_send(w->s, &data)) > 0) {
        if (len + (size_t)n > cap) {
            cap = (len + (size_t)n) * 2;
            if ((out = realloc(out, cap)) == NULL)
                die("out of memory");
        }
        memcpy(out + len, data, (size_t)n);
        len += (size_t)n;
    }
    if (n < 0)
        die("nghttp2_session_mem_send");
    for (size_t off = 0; off < len;) {
        ssize_t k = write(w->c.fd, out + off, len - off);
        if (k > 0) {
            off += (size_t)k;
        } else {
            struct pollfd p = {.fd = w->c.fd, .events = POLLOUT};
            poll(&p, 1, 1000);
        }
    }
}

/* Feed what the socket has to the session, then send what that made it want to. */
static void h2_input(struct h2worker *w)
{
    uint8_t buf[65536];
    ssize_t n;
    while ((n = read(w->c.fd, buf, sizeof buf)) > 0)
        if (nghttp2_session_mem_recv(w->s, buf, (size_t)n) != n)
            die("nghttp2_session_mem_recv");
    if (n == 0)
        die("connection closed by the daemon");
    h2_flush(w);
}

static struct h2worker *h2_worker(int slots)
{
    struct h2worker *w = calloc(1, sizeof *w);
    dial(&w->c);
    w->c.worker = 1;
    w->c.h2 = w;
    w->slots = slots;
    fcntl(w->c.fd, F_SETFL, O_NONBLOCK);
    nghttp2_session_callbacks *cb;
    nghttp2_session_callbacks_new(&cb);
    nghttp2_session_callbacks_set_on_header_callback(cb, h2_on_header);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, h2_on_data);
    nghttp2_session_callbacks_set_on_stream_close_callback(cb, h2_on_close);
    if (nghttp2_session_client_new(&w->s, cb, w) != 0)
        die("nghttp2_session_client_new");
    nghttp2_session_callbacks_del(cb);
    nghttp2_settings_entry iv[] = {{NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, 256}};
    nghttp2_submit_settings(w->s, NGHTTP2_FLAG_NONE, iv, 1);
    h2_lease(w);
    h2_flush(w);
    return w;
}

/* slots 0: HTTP/1.1 workers (work_next); else HTTP/2 workers holding up to slots jobs each. */
static void e2e(int jobs, int submitters, int workers, int slots)
{
    int ep = epoll_create1(0), completed = 0;
    struct conn *conns = calloc((size_t)(submitters + workers), sizeof *conns);
    double t0 = now_ms(), deadline = t0 + 60000;
    h2_jobs = jobs;
    for (int i = 0; i < submitters + workers; i++) {
        struct conn *c = &conns[i];
        if (i >= submitters && slots > 0) {
            c = &h2_worker(slots)->c;
        } else {
            dial(c);
            c->worker = i >= submitters;
        }
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
        epoll_ctl(ep, EPOLL_CTL_ADD, c->fd, &ev);
        if (!c->worker)
            submit_next(c, jobs);
        else if (c->h2 == NULL)
            work_next(c);
    }
    struct epoll_event evs[64];
    while (completed + h2_completed < jobs) {
        if (now_ms() > deadline)
            die("e2e: not done within 60 s");
        int k = epoll_wait(ep, evs, 64, 1000);
        for (int e = 0; e < k; e++) {
            struct conn *c = evs[e].data.ptr;
            char *body;
            int status;
            if (c->h2 != NULL) {
                h2_input(c->h2);
                continue;
            }
            fill(c);
            if ((status = parse(c, &body)) == 0)
                continue;
            if (!c->worker) {
                if (status != 202)
                    die("submit: want 202");
                submit_next(c, jobs);
            } else if (c->completing) {
                if (status != 200)
                    die("complete: want 200");
                if (chain && c->nleased == 0)
                    take_leases(c, body);
                if (++completed < jobs)
                    work_next(c);
            } else if (status == 200) {
                if (take_leases(c, body) == 0)
                    die("lease: 200 without a lease");
                work_next(c);
            } else if (status == 204) {
                work_next(c);
            } else {
                die("lease: want 200 or 204");
            }
        }
    }
    completed += h2_completed;
    double s = (now_ms() - t0) / 1000;
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    double cpu_us = (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e6 + ru.ru_utime.tv_usec + ru.ru_stime.tv_usec;
    printf("e2e-n %d\n", completed);
    printf("e2e %.0f\n", completed / s);
    printf("e2e-client-us %.1f\n", cpu_us / completed);
}

int main(int argc, char **argv)
{
    const char *usage = "usage: workers HOST PORT handoff COUNT [FILE] | e2e JOBS SUBMITTERS WORKERS [MAX [next]] |"
                        " e2e-h2 JOBS SUBMITTERS WORKERS SLOTS";
    if (argc < 5)
        die(usage);
    const char *g = getenv("BENCH_GROUPS");
    groups = g != NULL ? atoi(g) : 0;
    const char *minimal = getenv("BENCH_MINIMAL");
    h2_minimal = minimal != NULL && strcmp(minimal, "1") == 0;
    host = argv[1];
    port = atoi(argv[2]);
    int a = atoi(argv[4]);
    if (strcmp(argv[3], "handoff") == 0 && (argc == 5 || argc == 6) && a > 0) {
        handoff(a, argc == 6 ? argv[5] : NULL);
    } else if (strcmp(argv[3], "e2e") == 0 && argc >= 7 && argc <= 9 && a > 0 && atoi(argv[5]) > 0 &&
               atoi(argv[6]) > 0 && (argc < 9 || strcmp(argv[8], "next") == 0)) {
        lease_max = argc >= 8 ? atoi(argv[7]) : 1;
        chain = argc == 9;
        if (lease_max < 1 || lease_max > MAX_LEASE)
            die("MAX must be 1 to 100");
        e2e(a, atoi(argv[5]), atoi(argv[6]), 0);
    } else if (strcmp(argv[3], "e2e-h2") == 0 && argc == 8 && a > 0 && atoi(argv[5]) > 0 && atoi(argv[6]) > 0 &&
               atoi(argv[7]) > 0 && atoi(argv[7]) <= MAX_LEASE) {
        e2e(a, atoi(argv[5]), atoi(argv[6]), atoi(argv[7]));
    } else {
        die(usage);
    }
    return 0;
}
