/*
 * workers.c - the worker side of acceptd measured from a C client (built and run by bench/workers.sh).
 * The same rounds as bench/workers.mjs, without a JavaScript runtime between the daemon and the clock:
 *
 *   workers HOST PORT handoff COUNT
 *       A worker connection parks POST /v1/leases {"types":["bench.handoff"],"wait":30}; 2 ms later one
 *       job is submitted on a second connection. Latency: from just before the submit is written to the
 *       lease answer fully read. The worker then completes the job. COUNT rounds, one after the other.
 *       Prints handoff-n, handoff-p50, handoff-p99, handoff-max (ms).
 *   workers HOST PORT e2e JOBS SUBMITTERS WORKERS [MAX]
 *       JOBS submitted over SUBMITTERS connections (one request in flight on each) while WORKERS connections
 *       each lease up to MAX jobs at a time (default 1; wait 5) and complete them one after the other. Rate:
 *       completed jobs per second from the first submit to the last completion. Prints e2e-n and e2e (jobs/s).
 *       With "next", a worker's complete of the last job it holds asks for its next lease in the same call
 *       ("next" in :complete), and only leases on its own (parked, wait 5) when that brought nothing.
 *
 * Every connection is keep-alive HTTP/1.1 on 127.0.0.1 with TCP_NODELAY. handoff uses blocking sockets;
 * e2e drives all of its connections from one thread with epoll, as wrk does. Any unexpected answer stops
 * the run with a message and exit status 1.
 */
#define _GNU_SOURCE /* strcasestr */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define HANDOFF_TYPE "bench.handoff"
#define E2E_TYPE "bench.e2e-c" /* not bench.e2e: the node run after it starts from an empty queue */
#define MAX_LEASE 100          /* the daemon's cap on "max" */

struct lease {
    char job[64], id[64];
};

struct conn {
    int fd;
    int worker;      /* e2e: a worker connection (else a submitter) */
    int completing;  /* e2e worker: the request in flight is a complete */
    struct lease leased[MAX_LEASE];
    int nleased; /* e2e worker: leases not yet completed */
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

static void handoff(int count)
{
    static struct conn worker, submitter;
    dial(&worker);
    dial(&submitter);
    double *lat = calloc((size_t)count, sizeof *lat);
    char *body, sub[128], req[256];
    post(&worker, "/v1/leases", "{\"types\":[\"" HANDOFF_TYPE "\"],\"max\":1,\"wait\":0}");
    if (answer(&worker, &body) != 204)
        die("warm-up lease: want 204 (nothing of type " HANDOFF_TYPE " may be queued)");
    for (int i = 0; i < count; i++) {
        post(&worker, "/v1/leases",
             "{\"types\":[\"" HANDOFF_TYPE "\"],\"max\":1,\"wait\":30,\"leaseSeconds\":60,\"worker\":\"bench\"}");
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
    qsort(lat, (size_t)count, sizeof *lat, cmp);
    printf("handoff-n %d\n", count);
    printf("handoff-p50 %.3f\n", lat[(count + 1) / 2 - 1]);
    printf("handoff-p99 %.3f\n", lat[(count * 99 + 99) / 100 - 1]);
    printf("handoff-max %.3f\n", lat[count - 1]);
}

static int submitted;

/* Submit the next job on c, or close c when all are submitted: idle, the daemon's keep-alive timeout
 * would close it. */
static void submit_next(struct conn *c, int jobs)
{
    if (submitted >= jobs) {
        close(c->fd);
        return;
    }
    char req[128];
    snprintf(req, sizeof req, "{\"type\":\"" E2E_TYPE "\",\"payload\":{\"n\":%d}}", submitted++);
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

static void e2e(int jobs, int submitters, int workers)
{
    int n = submitters + workers, ep = epoll_create1(0), completed = 0;
    struct conn *conns = calloc((size_t)n, sizeof *conns);
    for (int i = 0; i < n; i++) {
        dial(&conns[i]);
        conns[i].worker = i >= submitters;
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &conns[i]};
        epoll_ctl(ep, EPOLL_CTL_ADD, conns[i].fd, &ev);
    }
    double t0 = now_ms(), deadline = t0 + 60000;
    for (int i = 0; i < n; i++) {
        if (conns[i].worker)
            work_next(&conns[i]);
        else
            submit_next(&conns[i], jobs);
    }
    struct epoll_event evs[64];
    while (completed < jobs) {
        if (now_ms() > deadline)
            die("e2e: not done within 60 s");
        int k = epoll_wait(ep, evs, 64, 1000);
        for (int e = 0; e < k; e++) {
            struct conn *c = evs[e].data.ptr;
            char *body;
            int status;
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
    double s = (now_ms() - t0) / 1000;
    printf("e2e-n %d\n", completed);
    printf("e2e %.0f\n", completed / s);
}

int main(int argc, char **argv)
{
    const char *usage = "usage: workers HOST PORT handoff COUNT | e2e JOBS SUBMITTERS WORKERS [MAX [next]]";
    if (argc < 5)
        die(usage);
    host = argv[1];
    port = atoi(argv[2]);
    int a = atoi(argv[4]);
    if (strcmp(argv[3], "handoff") == 0 && argc == 5 && a > 0) {
        handoff(a);
    } else if (strcmp(argv[3], "e2e") == 0 && argc >= 7 && argc <= 9 && a > 0 && atoi(argv[5]) > 0 &&
               atoi(argv[6]) > 0 && (argc < 9 || strcmp(argv[8], "next") == 0)) {
        lease_max = argc >= 8 ? atoi(argv[7]) : 1;
        chain = argc == 9;
        if (lease_max < 1 || lease_max > MAX_LEASE)
            die("MAX must be 1 to 100");
        e2e(a, atoi(argv[5]), atoi(argv[6]));
    } else {
        die(usage);
    }
    return 0;
}
