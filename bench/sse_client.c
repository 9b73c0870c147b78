/*
 * bench/sse_client.c - the subscriber side of bench/sse.sh: STREAMS /v1/events streams held open and read with
 * one epoll loop, over HTTP/1.1 (a connection each) or over h2c (100 streams per connection, h2o's default
 * limit, with prior knowledge). It measures the fan-out: from just before one job update (a worker heartbeat
 * carrying a message) is sent to each subscriber receiving the event that carries it.
 *
 * Why C: a Node client spends about 6 µs of JavaScript per delivery (process.cpuUsage() in the bench), as
 * much CPU as the daemon spends sending; on a 2-core machine the client, not the daemon, was measured.
 * Here a delivery costs the client a share of one recv() and a memmem(). While an update is out, the client
 * looks for ready sockets in passes, 200 µs apart while fewer than 64 are ready, rather than sleeping in
 * epoll_wait: waking a sleeping reader is paid inside the writer's send(), a cost that subscribers on other
 * machines would not put on the daemon. Over h2c, frames are walked by hand (RFC 9113) and HPACK is used only
 * to send one fixed request; the client opens every stream's window to 2^31-1 so that the daemon never
 * waits for a WINDOW_UPDATE.
 *
 * Usage: sse_client HOST PORT STREAMS UPDATES JOB_ID LEASE_ID [h1|h2]
 * Protocol with bench/sse_fanout.mjs on stdin/stdout:
 *   prints "open MS" once every stream answered; waits for a line on stdin; runs UPDATES updates (100 ms
 *   apart) and prints "last P50 P99" (update -> last subscriber, ms) and "each P50 P99" (every delivery);
 *   keeps the streams open until stdin ends. The update goes out over HTTP/1.1 on a connection of its own.
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
#define H2_STREAMS 100
#define H2_FRAME_MAX (9 + 16384) /* SETTINGS_MAX_FRAME_SIZE is left at its default */
#define H2_BUF (8 * H2_FRAME_MAX)

/* A socket: one stream over HTTP/1.1, H2_STREAMS of them over h2c. */
struct sub {
    int fd;
    int opened;   /* h1: the answer began; h2: how many streams have their HEADERS */
    int first;    /* h2: the subscriber index of the socket's stream 1 */
    int nstreams; /* h2 */
    size_t carry; /* h1: bytes of the previous read kept in tail, for a marker split across reads */
    char tail[MARKER_MAX];
    size_t len; /* h2: bytes in buf, the start of a frame first */
    char *buf;
};

static struct sub *subs;
static int nsubs, nsocks, h2;
static int ep;
static struct sockaddr_in addr;

/* The update being timed: which subscribers have it, and when each got it. */
static const char *marker;
static size_t mlen;
static unsigned char *got;
static int count;
static double *lat, last, now_t;
static size_t nlat;

static void deliver(int i)
{
    if (marker != NULL && !got[i]) {
        got[i] = 1;
        count++;
        lat[nlat++] = now_t;
        last = now_t;
    }
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void die(const char *what)
{
    fprintf(stderr, "sse_client: %s: %s\n", what, strerror(errno));
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

static void lost(const char *why)
{
    fprintf(stderr, "sse_client: a stream ended (%s)\n", why);
    exit(1);
}

/* recv() up to n bytes from s into buf; 0 once nothing is left to read. A closed stream is fatal: the bench
 * lost a subscriber. */
static size_t recv_some(struct sub *s, char *buf, size_t n)
{
    for (;;) {
        ssize_t r = recv(s->fd, buf, n, 0);
        if (r > 0)
            return (size_t)r;
        if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return 0;
        if (r < 0 && errno == EINTR)
            continue;
        lost(r == 0 ? "closed by the daemon" : strerror(errno));
    }
}

/* Read what HTTP/1.1 subscriber s has. */
static void drain_h1(struct sub *s)
{
    char buf[16384 + MARKER_MAX];
    for (;;) {
        memcpy(buf, s->tail, s->carry);
        size_t r = recv_some(s, buf + s->carry, sizeof(buf) - MARKER_MAX);
        if (r == 0)
            return;
        s->opened = 1;
        size_t len = s->carry + r;
        if (marker != NULL && memmem(buf, len, marker, mlen) != NULL)
            deliver((int)(s - subs));
        s->carry = len < MARKER_MAX - 1 ? len : MARKER_MAX - 1;
        memcpy(s->tail, buf + len - s->carry, s->carry);
        if (r < sizeof(buf) - MARKER_MAX)
            return;
    }
}

static size_t h2_frame(char *out, int type, int flags, uint32_t stream, const void *payload, size_t len)
{
    out[0] = (char)(len >> 16);
    out[1] = (char)(len >> 8);
    out[2] = (char)len;
    out[3] = (char)type;
    out[4] = (char)flags;
    uint32_t sid = htonl(stream);
    memcpy(out + 5, &sid, 4);
    memcpy(out + 9, payload, len);
    return 9 + len;
}

/* Act on each whole frame of h2 socket s: an event's DATA on stream k is subscriber first + (k - 1) / 2. */
static void frames_h2(struct sub *s)
{
    size_t off = 0;
    while (s->len - off >= 9) {
        const unsigned char *f = (const unsigned char *)s->buf + off;
        size_t len = (size_t)f[0] << 16 | (size_t)f[1] << 8 | f[2];
        if (s->len - off < 9 + len)
            break;
        int type = f[3], flags = f[4];
        uint32_t stream = ((uint32_t)f[5] << 24 | (uint32_t)f[6] << 16 | (uint32_t)f[7] << 8 | f[8]) & 0x7fffffff;
        char ack[9 + 8];
        if (type == 0 && stream != 0 && marker != NULL && memmem(f + 9, len, marker, mlen) != NULL)
            deliver(s->first + (int)(stream - 1) / 2);
        else if (type == 1)
            s->opened++;
        else if ((type == 4 || type == 6) && (flags & 1) == 0) /* SETTINGS or PING: acknowledge */
            write_all(s->fd, ack, h2_frame(ack, type, 1, 0, f + 9, type == 6 ? 8 : 0));
        else if (type == 3 || type == 7)
            lost(type == 3 ? "RST_STREAM" : "GOAWAY");
        off += 9 + len;
    }
    memmove(s->buf, s->buf + off, s->len - off);
    s->len -= off;
}

/* Read what h2 socket s has and act on its frames. */
static void drain_h2(struct sub *s)
{
    for (;;) {
        size_t r = recv_some(s, s->buf + s->len, H2_BUF - s->len);
        if (r == 0)
            return;
        s->len += r;
        frames_h2(s);
    }
}

static void drain(struct sub *s)
{
    if (h2)
        drain_h2(s);
    else
        drain_h1(s);
}

static int answered(const struct sub *s)
{
    return h2 ? s->opened == s->nstreams : s->opened;
}

/* HPACK (RFC 7541 §6.2.2): a literal without indexing, its name indexed in the static table (index < 15). */
static size_t hpack_literal(char *out, int index, const char *value)
{
    size_t n = strlen(value);
    out[0] = (char)index;
    out[1] = (char)n; /* < 127, no Huffman */
    memcpy(out + 2, value, n);
    return 2 + n;
}

/* The connection preface, SETTINGS (INITIAL_WINDOW_SIZE 2^31-1), the connection's WINDOW_UPDATE to the same,
 * and a GET /v1/events (END_STREAM | END_HEADERS) on each of s's streams. */
static void open_h2(struct sub *s, const char *authority)
{
    static const char preface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
    char out[64 + H2_STREAMS * 64], block[48];
    size_t n = sizeof(preface) - 1;
    memcpy(out, preface, n);
    const unsigned char settings[6] = {0, 4, 0x7f, 0xff, 0xff, 0xff};
    n += h2_frame(out + n, 4, 0, 0, settings, sizeof(settings));
    uint32_t wu = htonl(0x7fffffff - 65535);
    n += h2_frame(out + n, 8, 0, 0, &wu, 4);
    size_t blen = 0;
    block[blen++] = (char)0x82; /* :method GET */
    block[blen++] = (char)0x86; /* :scheme http */
    blen += hpack_literal(block + blen, 4, "/v1/events");
    blen += hpack_literal(block + blen, 1, authority);
    for (int k = 0; k < s->nstreams; k++)
        n += h2_frame(out + n, 1, 0x5, (uint32_t)(2 * k + 1), block, blen);
    write_all(s->fd, out, n);
}

static void open_streams(const char *host, int port)
{
    char req[256], authority[64];
    snprintf(authority, sizeof(authority), "%s:%d", host, port);
    int n = snprintf(req, sizeof(req), "GET /v1/events HTTP/1.1\r\nHost: %s\r\nAccept: text/event-stream\r\n\r\n",
                     authority);
    struct epoll_event evs[1024];
    int opened = 0;
    for (int first = 0; first < nsocks; first += CONNECT_BATCH) {
        int end = first + CONNECT_BATCH < nsocks ? first + CONNECT_BATCH : nsocks;
        for (int i = first; i < end; i++) {
            subs[i].fd = connect_to();
            if (h2)
                open_h2(&subs[i], authority);
            else
                write_all(subs[i].fd, req, (size_t)n);
            if (fcntl(subs[i].fd, F_SETFL, O_NONBLOCK) != 0)
                die("fcntl");
            struct epoll_event ev = {.events = EPOLLIN, .data.u32 = (uint32_t)i};
            if (epoll_ctl(ep, EPOLL_CTL_ADD, subs[i].fd, &ev) != 0)
                die("epoll_ctl");
        }
        while (opened < end) {
            int k = epoll_wait(ep, evs, 1024, UPDATE_LIMIT_MS);
            if (k <= 0) {
                fprintf(stderr, "sse_client: %d of %d sockets answered\n", opened, nsocks);
                exit(1);
            }
            for (int e = 0; e < k; e++) {
                struct sub *s = &subs[evs[e].data.u32];
                int was = answered(s);
                drain(s);
                opened += answered(s) && !was;
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
    if (argc != 7 && argc != 8) {
        fprintf(stderr, "usage: sse_client HOST PORT STREAMS UPDATES JOB_ID LEASE_ID [h1|h2]\n");
        return 2;
    }
    const char *host = argv[1], *job = argv[5], *lease = argv[6];
    int port = atoi(argv[2]);
    nsubs = atoi(argv[3]);
    int updates = atoi(argv[4]);
    h2 = argc == 8 && strcmp(argv[7], "h2") == 0;
    /* The pause between updates; acceptd's driver sets it past the daemon's heartbeat window (a lease's
     * heartbeats are written at most once a second, docs/protocol.md), so that each update is written at once. */
    const char *gap = getenv("SSE_CLIENT_GAP_MS");
    int gap_ms = gap != NULL ? atoi(gap) : 100;
    if (nsubs < 1 || updates < 1 || inet_pton(AF_INET, host, &addr.sin_addr) != 1 ||
        (argc == 8 && !h2 && strcmp(argv[7], "h1") != 0)) {
        fprintf(stderr, "sse_client: bad arguments\n");
        return 2;
    }
    addr.sin_family = AF_INET;
    addr.sin_port = htons((uint16_t)port);
    nsocks = h2 ? (nsubs + H2_STREAMS - 1) / H2_STREAMS : nsubs;
    subs = calloc((size_t)nsocks, sizeof(*subs));
    lat = malloc((size_t)nsubs * (size_t)updates * sizeof(*lat));
    double *lasts = malloc((size_t)updates * sizeof(*lasts));
    got = malloc((size_t)nsubs);
    ep = epoll_create1(0);
    if (subs == NULL || lat == NULL || lasts == NULL || got == NULL || ep < 0)
        die("setup");
    for (int i = 0; h2 && i < nsocks; i++) {
        subs[i].first = i * H2_STREAMS;
        subs[i].nstreams = nsubs - subs[i].first < H2_STREAMS ? nsubs - subs[i].first : H2_STREAMS;
        if ((subs[i].buf = malloc(H2_BUF)) == NULL)
            die("setup");
    }

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
    for (int k = 1; k <= updates; k++) {
        char message[32], want[MARKER_MAX];
        snprintf(message, sizeof(message), "fanout %d", k);
        mlen = (size_t)snprintf(want, sizeof(want), "\"message\":\"%s\"", message);
        marker = want;
        memset(got, 0, (size_t)nsubs);
        count = 0;
        last = 0;
        double start = now_ms();
        int done = 0;
        heartbeat(ctl, host, port, job, lease, k, message);
        while (count < nsubs) {
            int n = epoll_wait(ep, evs, 1024, 0);
            if (n < 64 && now_ms() - start < UPDATE_LIMIT_MS)
                usleep(200);
            if (n == 0 && now_ms() - start < UPDATE_LIMIT_MS)
                continue;
            if (n <= 0) {
                fprintf(stderr, "sse_client: update %d: %d of %d subscribers got it within %d s\n", k, count, nsubs,
                        UPDATE_LIMIT_MS / 1000);
                return 1;
            }
            now_t = now_ms() - start;
            for (int e = 0; e < n; e++) {
                uint32_t i = evs[e].data.u32;
                if (i == UINT32_MAX)
                    done = done || answer_read(ctl, 0);
                else
                    drain(&subs[i]);
            }
        }
        marker = NULL;
        if (!done)
            answer_read(ctl, 1);
        if (strncmp(res, "HTTP/1.1 200", 12) != 0) {
            fprintf(stderr, "sse_client: heartbeat: %.200s\n", res);
            return 1;
        }
        lasts[k - 1] = last;
        usleep((useconds_t)gap_ms * 1000);
    }
    double l50 = pct(lasts, (size_t)updates, 50), l99 = pct(lasts, (size_t)updates, 99);
    printf("last %.1f %.1f\neach %.1f %.1f\n", l50, l99, pct(lat, nlat, 50), pct(lat, nlat, 99));
    fflush(stdout);
    while (fgets(line, sizeof(line), stdin) != NULL)
        ;
    return 0;
}
