/*
 * bench/sse_h1.c - the HTTP/1.1 subscriber side of bench/sse.sh: STREAMS connections, each holding
 * GET /v1/events open, read with one epoll loop. It measures the fan-out: from just before one job update
 * (a worker heartbeat carrying a message) is sent to each subscriber receiving the event that carries it.
 *
 * Why C: a Node client spends about 6 µs of JavaScript per delivery (process.cpuUsage() in the bench), as
 * much CPU as the daemon spends sending; on a 2-core machine the client, not the daemon, was measured.
 * Here a delivery costs the client one recv() and a memmem(). While an update is out, the client looks for
 * ready streams in passes, 200 µs apart while fewer than 64 are ready, rather than sleeping in epoll_wait:
 * waking a sleeping reader is paid inside the writer's send(), a cost that subscribers on other machines
 * would not put on the daemon.
 *
 * Usage: sse_h1 HOST PORT STREAMS UPDATES JOB_ID LEASE_ID
 * Protocol with bench/sse_fanout.mjs on stdin/stdout:
 *   prints "open MS" once every stream answered; waits for a line on stdin; runs UPDATES updates (100 ms
 *   apart) and prints "last P50 P99" (update -> last subscriber, ms) and "each P50 P99" (every delivery);
 *   keeps the streams open until stdin ends.
 * Loopback only, like every bench.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MARKER_MAX 64
#define CONNECT_BATCH 250
#define UPDATE_LIMIT_MS 10000

struct sub {
    int fd;
    int opened;
    size_t carry; /* bytes of the previous read kept in tail, for a marker split across reads */
    char tail[MARKER_MAX];
};

static struct sub *subs;
static int nsubs;
static int ep;
static struct sockaddr_in addr;

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void die(const char *what)
{
    fprintf(stderr, "sse_h1: %s: %s\n", what, strerror(errno));
    exit(1);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double pct(double *v, size_t n, double p)
{
    qsort(v, n, sizeof(*v), cmp_double);
    size_t i = (size_t)(p / 100 * (double)n + 0.999999);
    return v[i == 0 ? 0 : (i > n ? n : i) - 1];
}

static int connect_to(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        die("socket");
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (connect(fd, (struct sockaddr *)&addr, sizeof(addr)) != 0)
        die("connect");
    return fd;
}

static void write_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            die("write");
        p += w;
        n -= (size_t)w;
    }
}

/* Read what sub i has; 1 if the marker arrived in it. A closed stream is fatal: the bench lost a subscriber. */
static int drain(struct sub *s, const char *marker, size_t mlen)
{
    char buf[16384 + MARKER_MAX];
    int found = 0;
    for (;;) {
        memcpy(buf, s->tail, s->carry);
        ssize_t r = recv(s->fd, buf + s->carry, sizeof(buf) - MARKER_MAX, 0);
        if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return found;
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            fprintf(stderr, "sse_h1: a stream ended (%s)\n", r == 0 ? "closed by the daemon" : strerror(errno));
            exit(1);
        }
        s->opened = 1;
        size_t len = s->carry + (size_t)r;
        if (mlen > 0 && memmem(buf, len, marker, mlen) != NULL)
            found = 1;
        s->carry = len < MARKER_MAX - 1 ? len : MARKER_MAX - 1;
        memcpy(s->tail, buf + len - s->carry, s->carry);
        if ((size_t)r < sizeof(buf) - MARKER_MAX)
            return found;
    }
}

static void open_streams(const char *host, int port)
{
    char req[256];
    int n = snprintf(req, sizeof(req), "GET /v1/events HTTP/1.1\r\nHost: %s:%d\r\nAccept: text/event-stream\r\n\r\n",
                     host, port);
    struct epoll_event evs[1024];
    int opened = 0;
    for (int first = 0; first < nsubs; first += CONNECT_BATCH) {
        int last = first + CONNECT_BATCH < nsubs ? first + CONNECT_BATCH : nsubs;
        for (int i = first; i < last; i++) {
            subs[i].fd = connect_to();
            write_all(subs[i].fd, req, (size_t)n);
            if (fcntl(subs[i].fd, F_SETFL, O_NONBLOCK) != 0)
                die("fcntl");
            struct epoll_event ev = {.events = EPOLLIN, .data.u32 = (uint32_t)i};
            if (epoll_ctl(ep, EPOLL_CTL_ADD, subs[i].fd, &ev) != 0)
                die("epoll_ctl");
        }
        while (opened < last) {
            int k = epoll_wait(ep, evs, 1024, UPDATE_LIMIT_MS);
            if (k <= 0) {
                fprintf(stderr, "sse_h1: %d of %d streams answered\n", opened, nsubs);
                exit(1);
            }
            for (int e = 0; e < k; e++) {
                struct sub *s = &subs[evs[e].data.u32];
                int was = s->opened;
                drain(s, NULL, 0);
                opened += s->opened && !was;
            }
        }
    }
}

/* The heartbeat's answer, read on the control connection while the deliveries come in. */
static char res[8192];
static size_t res_len;

/* Read what the control connection has (blocking: wait for it); 1 once a whole answer is in. */
static int answer_read(int fd, int blocking)
{
    for (;;) {
        ssize_t r = recv(fd, res + res_len, sizeof(res) - 1 - res_len, blocking ? 0 : MSG_DONTWAIT);
        if (r < 0 && !blocking && (errno == EAGAIN || errno == EWOULDBLOCK))
            return 0;
        if (r <= 0)
            die("heartbeat answer");
        res_len += (size_t)r;
        res[res_len] = 0;
        char *end = strstr(res, "\r\n\r\n");
        if (end == NULL)
            continue;
        char *cl = strcasestr(res, "content-length:");
        size_t want = (size_t)(end + 4 - res) + (cl != NULL && cl < end ? strtoul(cl + 15, NULL, 10) : 0);
        if (res_len >= want)
            return 1;
    }
}

/* Send POST /v1/jobs/{id}:heartbeat with message on the keep-alive control connection fd. */
static void heartbeat(int fd, const char *host, int port, const char *job, const char *lease, int k,
                      const char *message)
{
    char body[512], req[1024];
    int blen = snprintf(body, sizeof(body), "{\"leaseId\":\"%s\",\"progress\":%d,\"message\":\"%s\"}", lease, k % 100,
                        message);
    int n = snprintf(req, sizeof(req),
                     "POST /v1/jobs/%s:heartbeat HTTP/1.1\r\nHost: %s:%d\r\nContent-Type: application/json\r\n"
                     "Content-Length: %d\r\n\r\n%s",
                     job, host, port, blen, body);
    res_len = 0;
    write_all(fd, req, (size_t)n);
}

int main(int argc, char **argv)
{
    if (argc != 7) {
        fprintf(stderr, "usage: sse_h1 HOST PORT STREAMS UPDATES JOB_ID LEASE_ID\n");
        return 2;
    }
    const char *host = argv[1], *job = argv[5], *lease = argv[6];
    int port = atoi(argv[2]);
    nsubs = atoi(argv[3]);
    int updates = atoi(argv[4]);
    if (nsubs < 1 || updates < 1 || inet_pton(AF_INET, host, &addr.sin_addr) != 1) {
        fprintf(stderr, "sse_h1: bad arguments\n");
        return 2;
    }
    addr.sin_family = AF_INET;
    addr.sin_port = htons((uint16_t)port);
    subs = calloc((size_t)nsubs, sizeof(*subs));
    double *lat = malloc((size_t)nsubs * (size_t)updates * sizeof(*lat));
    double *lasts = malloc((size_t)updates * sizeof(*lasts));
    unsigned char *got = malloc((size_t)nsubs);
    ep = epoll_create1(0);
    if (subs == NULL || lat == NULL || lasts == NULL || got == NULL || ep < 0)
        die("setup");

    double t0 = now_ms();
    open_streams(host, port);
    printf("open %.0f\n", now_ms() - t0);
    fflush(stdout);
    char line[64];
    if (fgets(line, sizeof(line), stdin) == NULL)
        return 0;

    int ctl = connect_to();
    struct epoll_event cev = {.events = EPOLLIN, .data.u32 = UINT32_MAX};
    if (epoll_ctl(ep, EPOLL_CTL_ADD, ctl, &cev) != 0)
        die("epoll_ctl");
    struct epoll_event evs[1024];
    size_t nlat = 0;
    for (int k = 1; k <= updates; k++) {
        char message[32], marker[MARKER_MAX];
        snprintf(message, sizeof(message), "fanout %d", k);
        size_t mlen = (size_t)snprintf(marker, sizeof(marker), "\"message\":\"%s\"", message);
        memset(got, 0, (size_t)nsubs);
        int count = 0;
        double start = now_ms(), last = 0;
        int answered = 0;
        heartbeat(ctl, host, port, job, lease, k, message);
        while (count < nsubs) {
            int n = epoll_wait(ep, evs, 1024, 0);
            if (n < 64 && now_ms() - start < UPDATE_LIMIT_MS)
                usleep(200);
            if (n == 0 && now_ms() - start < UPDATE_LIMIT_MS)
                continue;
            if (n <= 0) {
                fprintf(stderr, "sse_h1: update %d: %d of %d subscribers got it within %d s\n", k, count, nsubs,
                        UPDATE_LIMIT_MS / 1000);
                return 1;
            }
            double t = now_ms() - start;
            for (int e = 0; e < n; e++) {
                uint32_t i = evs[e].data.u32;
                if (i == UINT32_MAX) {
                    answered = answered || answer_read(ctl, 0);
                    continue;
                }
                if (drain(&subs[i], marker, mlen) && !got[i]) {
                    got[i] = 1;
                    count++;
                    lat[nlat++] = t;
                    last = t;
                }
            }
        }
        if (!answered)
            answer_read(ctl, 1);
        if (strncmp(res, "HTTP/1.1 200", 12) != 0) {
            fprintf(stderr, "sse_h1: heartbeat: %.200s\n", res);
            return 1;
        }
        lasts[k - 1] = last;
        usleep(100000);
    }
    double l50 = pct(lasts, (size_t)updates, 50), l99 = pct(lasts, (size_t)updates, 99);
    printf("last %.1f %.1f\neach %.1f %.1f\n", l50, l99, pct(lat, nlat, 50), pct(lat, nlat, 99));
    fflush(stdout);
    while (fgets(line, sizeof(line), stdin) != NULL)
        ;
    return 0;
}
