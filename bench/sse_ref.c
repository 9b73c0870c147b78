/*
 * bench/sse_ref.c - the reference for bench/sse.sh's HTTP/1.1 fan-out: the least an SSE server has to do,
 * so that acceptd's fan-out can be read as a ratio of what this machine allows in the same run.
 *
 * It holds what bench/sse_client.c opens, driven the same way as against acceptd: each GET gets a minimal SSE
 * head (200, text/event-stream, chunked, the same retry hint), and its connection is then only an fd in an
 * array (nothing read, no per-stream state: a floor for memory too). A POST (sse_client.c's heartbeat, on its
 * own control connection) is the update: the server answers it 200 and writes one event to every stream,
 * framed and sized as acceptd frames a job update (one HTTP/1.1 chunk carrying "id:", "event: job" and a
 * job representation of the same length holding the POST's "message"). No store, no JSON parsing beyond
 * finding the message, no locks: what is left is the kernel's cost of 10,000 small sends.
 *
 * How the event is written, chosen on the command line so the script can keep the fastest:
 *   send   one send() per stream
 *   uring  io_uring, BATCH sends per io_uring_enter (acceptd: 256), each batch waited for
 *   sqpoll the same with IORING_SETUP_SQPOLL: a kernel thread takes the sends off the ring
 * THREADS 1 or 2: with 2 a second thread writes the second half of the streams while the first writes the
 * first half (acceptd splits so from 512 streams).
 *
 * Usage: sse_ref send|uring|sqpoll THREADS BATCH   prints "listening PORT" (127.0.0.1, an ephemeral port),
 * then "sent MS" after each update (the time its sends took), and serves until killed. Loopback only, like
 * every bench.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <liburing.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_FD 65536
#define REQ_MAX 4096

/* A job representation as acceptd sends it in an update, split where the message goes: with "fanout K"
 * as the message and "id: N" in front, the chunk is as long as acceptd's (711 bytes for K and N of one
 * digit). */
static const char job_head[] =
    "{\"id\":\"job_-P892wXA3IuvwT-rQgoeOCInbBgl\",\"type\":\"bench.sse\",\"status\":\"running\",\"progress\":1,"
    "\"priority\":\"normal\",\"payload\":{\"n\":1},\"attempt\":1,\"maxAttempts\":3,\"cancelRequested\":false,"
    "\"createdAt\":\"2026-12-06T06:34:38.090Z\",\"startedAt\":\"2026-12-06T06:34:38.301Z\","
    "\"lastUpdatedAt\":\"2026-12-06T06:34:38.517Z\",\"finishedAt\":null,\"expiresAt\":null,\"runAt\":null,"
    "\"retryOf\":null,\"message\":\"";
static const char job_tail[] = "\",\"links\":{\"self\":\"/v1/jobs/job_-P892wXA3IuvwT-rQgoeOCInbBgl\","
                               "\"cancel\":\"/v1/jobs/job_-P892wXA3IuvwT-rQgoeOCInbBgl:cancel\","
                               "\"retry\":\"/v1/jobs/job_-P892wXA3IuvwT-rQgoeOCInbBgl:retry\","
                               "\"events\":\"/v1/jobs/job_-P892wXA3IuvwT-rQgoeOCInbBgl/events\","
                               "\"result\":\"/v1/jobs/job_-P892wXA3IuvwT-rQgoeOCInbBgl/result\"}}";

static const char sse_head[] = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
                               "Transfer-Encoding: chunked\r\n\r\nd\r\nretry: 2000\n\n\r\n";

static int use_ring;
static unsigned ring_flags;
static int nthreads;
static unsigned batch;
static int *streams;
static size_t nstreams;
static char *pending[MAX_FD]; /* a request read in part (rare: the client writes each in one go) */
static size_t pending_len[MAX_FD];

static void die(const char *what)
{
    fprintf(stderr, "sse_ref: %s: %s\n", what, strerror(errno));
    exit(1);
}

static void write_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            die("write");
        p += w;
        n -= (size_t)w;
    }
}

/* Each writing thread's ring. */
static __thread struct io_uring ring;
static __thread int ring_up;

/* Write buf to fds[from, to). A short or failed write is fatal: the reference must have delivered every
 * event it is timed on. */
static void send_range(size_t from, size_t to, const char *buf, size_t len)
{
    if (!use_ring) {
        for (size_t i = from; i < to; i++)
            if (send(streams[i], buf, len, MSG_DONTWAIT | MSG_NOSIGNAL) != (ssize_t)len)
                die("send");
        return;
    }
    if (!ring_up) {
        int rc = io_uring_queue_init(batch, &ring, ring_flags);
        if (rc < 0) {
            errno = -rc;
            die("io_uring_queue_init");
        }
        ring_up = 1;
    }
    for (size_t i = from; i < to;) {
        unsigned n = 0;
        for (; i < to && n < batch; i++, n++)
            io_uring_prep_send(io_uring_get_sqe(&ring), streams[i], buf, len, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (io_uring_submit_and_wait(&ring, n) != (int)n)
            die("io_uring_submit_and_wait");
        struct io_uring_cqe *cqe;
        unsigned head, seen = 0;
        io_uring_for_each_cqe(&ring, head, cqe)
        {
            if (cqe->res != (int)len) {
                errno = cqe->res < 0 ? -cqe->res : EAGAIN;
                die("io_uring send");
            }
            seen++;
        }
        io_uring_cq_advance(&ring, seen);
        if (seen != n)
            die("io_uring: completions missing");
    }
}

/* The second writer: one fan-out at a time, handed over and waited for as acceptd's sender thread is. */
static struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int busy;
    size_t from, to;
    const char *buf;
    size_t len;
} sender = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};

static void *sender_main(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&sender.mu);
    for (;;) {
        while (!sender.busy)
            pthread_cond_wait(&sender.cv, &sender.mu);
        pthread_mutex_unlock(&sender.mu);
        send_range(sender.from, sender.to, sender.buf, sender.len);
        pthread_mutex_lock(&sender.mu);
        sender.busy = 0;
        pthread_cond_broadcast(&sender.cv);
    }
    return NULL;
}

static void fan_out(const char *buf, size_t len)
{
    size_t half = nthreads == 2 ? nstreams / 2 : nstreams;
    if (half < nstreams) {
        pthread_mutex_lock(&sender.mu);
        sender.from = half;
        sender.to = nstreams;
        sender.buf = buf;
        sender.len = len;
        sender.busy = 1;
        pthread_cond_broadcast(&sender.cv);
        pthread_mutex_unlock(&sender.mu);
    }
    send_range(0, half, buf, len);
    if (half < nstreams) {
        pthread_mutex_lock(&sender.mu);
        while (sender.busy)
            pthread_cond_wait(&sender.cv, &sender.mu);
        pthread_mutex_unlock(&sender.mu);
    }
}

/* The update: answer the POST, then one event to every stream. */
static void update(int fd, const char *body, size_t blen)
{
    static long id;
    static char ev[2048];
    char message[64] = "";
    const char *m = memmem(body, blen, "\"message\":\"", 11);
    if (m != NULL) {
        m += 11;
        const char *q = memchr(m, '"', blen - (size_t)(m - body));
        size_t n = q != NULL ? (size_t)(q - m) : 0;
        if (n >= sizeof(message))
            n = sizeof(message) - 1;
        memcpy(message, m, n);
        message[n] = 0;
    }
    char data[1024];
    int dlen = snprintf(data, sizeof(data), "id: %ld\nevent: job\ndata: %s%s%s\n\n", ++id, job_head, message, job_tail);
    int len = snprintf(ev, sizeof(ev), "%x\r\n%s\r\n", dlen, data);
    static const char ok[] = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}";
    write_all(fd, ok, sizeof(ok) - 1);
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    fan_out(ev, (size_t)len);
    clock_gettime(CLOCK_MONOTONIC, &b);
    /* The write loop's own time, for the script: how much of the fan-out is the server's sends. */
    printf("sent %.2f\n", (double)(b.tv_sec - a.tv_sec) * 1e3 + (double)(b.tv_nsec - a.tv_nsec) / 1e6);
    fflush(stdout);
}

/* A whole request is in req (0 terminated): 1 if handled, 0 if more is needed. */
static int handle(int ep, int fd, char *req, size_t len)
{
    char *end = strstr(req, "\r\n\r\n");
    if (end == NULL)
        return 0;
    size_t hlen = (size_t)(end + 4 - req);
    if (strncmp(req, "GET ", 4) == 0) {
        write_all(fd, sse_head, sizeof(sse_head) - 1);
        epoll_ctl(ep, EPOLL_CTL_DEL, fd, NULL);
        streams[nstreams++] = fd;
        return 1;
    }
    char *cl = strcasestr(req, "content-length:");
    size_t want = hlen + (cl != NULL && cl < end ? strtoul(cl + 15, NULL, 10) : 0);
    if (len < want)
        return 0;
    update(fd, req + hlen, want - hlen);
    return 1;
}

static void on_readable(int ep, int fd)
{
    char buf[REQ_MAX + 1];
    size_t have = pending_len[fd];
    if (have > 0)
        memcpy(buf, pending[fd], have);
    ssize_t r = recv(fd, buf + have, REQ_MAX - have, 0);
    if (r <= 0) {
        if (r < 0 && (errno == EAGAIN || errno == EINTR))
            return;
        epoll_ctl(ep, EPOLL_CTL_DEL, fd, NULL);
        close(fd);
        free(pending[fd]);
        pending[fd] = NULL;
        pending_len[fd] = 0;
        return;
    }
    have += (size_t)r;
    buf[have] = 0;
    if (handle(ep, fd, buf, have)) {
        free(pending[fd]);
        pending[fd] = NULL;
        pending_len[fd] = 0;
        return;
    }
    if (have >= REQ_MAX) {
        fprintf(stderr, "sse_ref: request over %d bytes\n", REQ_MAX);
        exit(1);
    }
    if (pending[fd] == NULL && (pending[fd] = malloc(REQ_MAX)) == NULL)
        die("malloc");
    memcpy(pending[fd], buf, have);
    pending_len[fd] = have;
}

int main(int argc, char **argv)
{
    if (argc != 4 ||
        (strcmp(argv[1], "send") != 0 && strcmp(argv[1], "uring") != 0 && strcmp(argv[1], "sqpoll") != 0)) {
        fprintf(stderr, "usage: sse_ref send|uring|sqpoll THREADS BATCH\n");
        return 2;
    }
    use_ring = strcmp(argv[1], "send") != 0;
    ring_flags = strcmp(argv[1], "sqpoll") == 0 ? IORING_SETUP_SQPOLL : 0;
    nthreads = atoi(argv[2]) == 2 ? 2 : 1;
    batch = (unsigned)atoi(argv[3]);
    if (batch < 1 || batch > 4096) {
        fprintf(stderr, "sse_ref: BATCH must be 1-4096\n");
        return 2;
    }
    streams = malloc(MAX_FD * sizeof(*streams));
    int ls = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    int ep = epoll_create1(0);
    if (streams == NULL || ls < 0 || ep < 0)
        die("setup");
    int one = 1;
    setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t alen = sizeof(a);
    if (bind(ls, (struct sockaddr *)&a, sizeof(a)) != 0 || listen(ls, 4096) != 0 ||
        getsockname(ls, (struct sockaddr *)&a, &alen) != 0)
        die("listen");
    struct epoll_event lev = {.events = EPOLLIN, .data.fd = ls};
    if (epoll_ctl(ep, EPOLL_CTL_ADD, ls, &lev) != 0)
        die("epoll_ctl");
    if (nthreads == 2) {
        pthread_t t;
        if (pthread_create(&t, NULL, sender_main, NULL) != 0)
            die("pthread_create");
        pthread_detach(t);
    }
    printf("listening %d\n", ntohs(a.sin_port));
    fflush(stdout);

    struct epoll_event evs[256];
    for (;;) {
        int n = epoll_wait(ep, evs, 256, -1);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            die("epoll_wait");
        for (int e = 0; e < n; e++) {
            int fd = evs[e].data.fd;
            if (fd != ls) {
                on_readable(ep, fd);
                continue;
            }
            int c;
            while ((c = accept4(ls, NULL, NULL, SOCK_NONBLOCK)) >= 0) {
                if (c >= MAX_FD) {
                    fprintf(stderr, "sse_ref: fd %d over %d\n", c, MAX_FD);
                    exit(1);
                }
                setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
                struct epoll_event ev = {.events = EPOLLIN, .data.fd = c};
                if (epoll_ctl(ep, EPOLL_CTL_ADD, c, &ev) != 0)
                    die("epoll_ctl");
            }
        }
    }
}
