/*
 * sse.c - SSE streams on h2o's generator interface (HTTP/2) or on HTTP/1 connections taken over from h2o
 * (sse.h).
 *
 * HTTP/1: once the headers are out the connection is the stream's own (on_upgraded, below): the request and its
 * memory go back to h2o, and the stream frames and writes its chunks itself, one write in flight at a time.
 *
 * h2o lets a response have one write in flight: h2o_send() hands it bytes that must stay valid until h2o
 * calls the generator's proceed(). So each stream has two queues of chunks: `sent` (in flight) and `out`
 * (queued). proceed() releases `sent` and hands `out` over. A chunk fanned out to many streams is counted,
 * not copied: with thousands of streams, a copy and a malloc per stream per event cost more than the rest of
 * the fan-out together (the allocator churned and faulted pages in and out on every event).
 *
 * Heartbeats: one timer ticks every quarter period and walks the streams, writing a comment on each that has
 * been silent for three quarters of it, so a write costs a stream nothing but a timestamp. The same walk
 * finds streams whose write has not completed for two periods: their client stopped reading or vanished. On
 * HTTP/1 the stream is closed with its connection. On HTTP/2 the
 * connection may carry other, healthy streams, so a stalled stream is left to HTTP/2 flow control; its
 * memory is bounded by the backlog cap either way. An HTTP/2 stream's backlog (queued and in flight) is also
 * charged to its connection's budget of answers not yet taken (conn.c): a write that would pass the
 * connection's share (the connection is then closed) or come while the total is past its own ends the stream
 * after what it holds, and a connection none of whose writes has gone for limits.unsentStall is closed, so many
 * streams behind a closed window add up to the same limits as any answers.
 *
 * Fan-out (ad_sse_write_many): with 10,000 HTTP/1.1 streams, one event is 10,000 socket writes, and nearly
 * all of a write's cost is the kernel's. Through h2o each is a writev plus h2o's bookkeeping and a proceed
 * callback in the next loop turn. An idle HTTP/1.1 stream (no write in flight, nothing queued) has no state
 * in h2o's writer, so its chunk can instead go straight to the socket with one send(), chunked. From 512 such streams
 * on, a sender thread writes half of them while the loop thread writes the other half; the loop thread waits for it, so
 * h2o never runs while another thread writes to its sockets. A send that takes nothing falls back to the queue; one
 * that takes part of the chunk leaves the rest as the stream's tail, written raw when h2o says the socket is writable,
 * before anything queued. The sends go to the kernel through io_uring, AD_SSE_RING per system call (send() where
 * io_uring is not available or sse.ioUring is off). Measured in bench/sse.sh (10,000 streams, p50 of the last
 * subscriber): 90-98 ms through h2o, 85-87 ms with direct send()s on one thread, 69-74 ms on two, 45-46 ms with
 * io_uring.
 */
#include "http/sse.h"
#include "http/http.h"
#include "common/timer.h"

#include <h2o/http1.h>

#include <errno.h>
#include <liburing.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#define AD_SSE_MAX_IOV 256   /* chunks handed to h2o in one write */
#define AD_SSE_SPLIT_MIN 512 /* direct writes in one fan-out from which the sender thread takes half */
#define AD_SSE_RING 256      /* direct writes handed to io_uring in one system call */

static int64_t heartbeat_ms = 15000;
static size_t backlog_max = 1024 * 1024;
static int64_t cutoff_retry = 2000;
static int ring_wanted = 1;                           /* sse.ioUring */
static h2o_linklist_t streams = {&streams, &streams}; /* every stream until its request is disposed */
static size_t nstreams;
static struct ad_timer heartbeat_timer;
static struct ad_sse_chunk heartbeat_chunk = {UINT32_MAX, 3, ":\n\n"};

static void heartbeat_fire(struct ad_timer *t);

void ad_sse_configure(int64_t hb_ms, size_t backlog_bytes, int64_t cutoff_retry_ms, int io_uring)
{
    ring_wanted = io_uring;
    heartbeat_ms = hb_ms > 0 ? hb_ms : 15000;
    backlog_max = backlog_bytes > 0 ? backlog_bytes : 1024 * 1024;
    cutoff_retry = cutoff_retry_ms > 0 ? cutoff_retry_ms : 2000;
}

size_t ad_sse_count(void)
{
    return nstreams;
}

int ad_sse_frame(struct ad_buf *b, int64_t id, const char *name, const char *data, size_t len)
{
    int rc = 0;
    if (id >= 0) {
        rc |= AD_BUF_LIT(b, "id: ");
        rc |= ad_buf_int(b, id);
        rc |= AD_BUF_LIT(b, "\n");
    }
    if (name != NULL) {
        rc |= AD_BUF_LIT(b, "event: ");
        rc |= ad_buf_str(b, name);
        rc |= AD_BUF_LIT(b, "\n");
    }
    /* A line break inside data (CR, LF or CRLF) would end the field: each line gets its own "data:". */
    const char *p = data, *end = data + len;
    for (;;) {
        const char *eol = p;
        while (eol < end && *eol != '\n' && *eol != '\r')
            eol++;
        rc |= AD_BUF_LIT(b, "data: ");
        rc |= ad_buf_append(b, p, (size_t)(eol - p));
        rc |= AD_BUF_LIT(b, "\n");
        if (eol == end)
            break;
        p = eol + (*eol == '\r' && eol + 1 < end && eol[1] == '\n' ? 2 : 1);
    }
    rc |= AD_BUF_LIT(b, "\n");
    return rc != 0 ? -1 : 0;
}

/* ---- chunks and queues ---- */

struct ad_sse_chunk *ad_sse_chunk_new(const char *data, size_t len)
{
    struct ad_sse_chunk *c = ad_malloc(sizeof(*c) + len);
    char *copy = (char *)(c + 1);
    memcpy(copy, data, len);
    c->refs = 1;
    c->len = (uint32_t)len;
    c->data = copy;
    return c;
}

void ad_sse_chunk_release(struct ad_sse_chunk *c)
{
    if (c->refs != UINT32_MAX && --c->refs == 0)
        free(c);
}

static void queue_init(struct ad_sse_queue *q)
{
    q->v = q->inl;
    q->cap = AD_SSE_INLINE;
    q->n = 0;
    q->bytes = 0;
}

static void queue_push(struct ad_sse_queue *q, struct ad_sse_chunk *c)
{
    if (q->n == q->cap) {
        struct ad_sse_chunk **v = ad_malloc(2 * q->cap * sizeof(*v));
        memcpy(v, q->v, q->n * sizeof(*v));
        if (q->v != q->inl)
            free(q->v);
        q->v = v;
        q->cap *= 2;
    }
    q->v[q->n++] = c;
    q->bytes += c->len;
}

/* Release every chunk and any memory beyond the in-place room. */
static void queue_clear(struct ad_sse_queue *q)
{
    for (uint32_t i = 0; i < q->n; i++)
        ad_sse_chunk_release(q->v[i]);
    if (q->v != q->inl)
        free(q->v);
    queue_init(q);
}

/* ---- streams ---- */

/* Charge what an HTTP/2 stream holds to its connection: -1 when that is refused (conn.c), and then the stream
 * should hold no more. */
static int recharge(struct ad_sse *s)
{
    return s->charge != NULL ? ad_http_charge_set(s->charge, (size_t)s->out.bytes + s->sent.bytes) : 0;
}

struct ad_sse_kept {
    struct ad_sse_kept *next;
    char str[];
};

const char *ad_sse_strdup(struct ad_sse *s, const char *str)
{
    if (str == NULL)
        return NULL;
    if (!s->raw) /* the request outlives an HTTP/2 stream */
        return h2o_strdup(&s->req->pool, str, SIZE_MAX).base;
    size_t len = strlen(str);
    struct ad_sse_kept *k = ad_malloc(sizeof(*k) + len + 1);
    memcpy(k->str, str, len + 1);
    k->next = s->kept;
    s->kept = k;
    return k->str;
}

static void end(struct ad_sse *s)
{
    if (s->ended)
        return;
    s->ended = 1;
    s->cb->on_close(s);
}

/* The stream is gone: end it and release what it holds, but not s itself. */
static void release(struct ad_sse *s)
{
    end(s);
    h2o_linklist_unlink(&s->all);
    if (s->tail != NULL) {
        ad_sse_chunk_release(s->tail);
        s->tail = NULL;
    }
    queue_clear(&s->out);
    queue_clear(&s->sent);
    free(s->wbuf);
    s->wbuf = NULL;
    while (s->kept != NULL) {
        struct ad_sse_kept *k = s->kept;
        s->kept = k->next;
        free(k);
    }
    nstreams--;
}

/* A stream on a connection taken over from h2o (or being taken over) is done: close the socket, free s. */
static void raw_free(struct ad_sse *s)
{
    h2o_socket_t *sock = s->sock;
    s->sock = NULL;
    if (sock != NULL)
        h2o_socket_close(sock);
    release(s);
    free(s);
}

/* No request and no connection: nothing can be written any more. */
static int gone(const struct ad_sse *s)
{
    return s->req == NULL && s->sock == NULL;
}

/* At most: the hex size of a chunk, CRLF, and CRLF after it. */
#define AD_SSE_FRAMING 12

/* Copy len bytes of data to dst as HTTP/1.1 chunked framing would carry them (as they are when !chunked);
 * returns the bytes written, at most len + AD_SSE_FRAMING. */
static size_t frame_chunk(char *dst, const char *data, size_t len, int chunked)
{
    size_t n = chunked ? (size_t)snprintf(dst, AD_SSE_FRAMING, "%zx\r\n", len) : 0;
    memcpy(dst + n, data, len);
    n += len;
    if (chunked) {
        memcpy(dst + n, "\r\n", 2);
        n += 2;
    }
    return n;
}

static void on_raw_written(h2o_socket_t *sock, const char *err);

/* flush on a connection of our own: the queued chunks are framed into one buffer (a chunk shared by many
 * streams cannot carry one stream's framing), then the end of the body when closing. */
static void raw_flush(struct ad_sse *s)
{
    size_t size = 5;
    for (uint32_t i = 0; i < s->out.n; i++)
        size += s->out.v[i]->len + AD_SSE_FRAMING;
    char *buf = ad_malloc(size);
    size_t len = 0;
    for (uint32_t i = 0; i < s->out.n; i++)
        if (s->out.v[i]->len != 0) /* an empty chunk would end the body */
            len += frame_chunk(buf + len, s->out.v[i]->data, s->out.v[i]->len, s->chunked);
    queue_clear(&s->out);
    s->final = s->closing;
    if (s->final && s->chunked) {
        memcpy(buf + len, "0\r\n\r\n", 5);
        len += 5;
    }
    if (len == 0) {
        free(buf);
        if (s->final)
            raw_free(s);
        return;
    }
    s->wbuf = buf;
    s->sending = 1;
    s->send_at = ad_mono_ms();
    h2o_iovec_t iov = h2o_iovec_init(buf, len);
    h2o_socket_write(s->sock, &iov, 1, on_raw_written);
}

/* Hand the queued chunks to h2o unless a write is in flight. After a final write s may already be freed. */
static void flush(struct ad_sse *s)
{
    if (s->sending || gone(s) || (s->out.n == 0 && !s->closing))
        return;
    if (s->sock != NULL) {
        raw_flush(s);
        return;
    }
    h2o_iovec_t iov[AD_SSE_MAX_IOV];
    uint32_t n = s->out.n < AD_SSE_MAX_IOV ? s->out.n : AD_SSE_MAX_IOV;
    for (uint32_t i = 0; i < n; i++) {
        queue_push(&s->sent, s->out.v[i]);
        iov[i] = h2o_iovec_init(s->out.v[i]->data, s->out.v[i]->len);
    }
    memmove(s->out.v, s->out.v + n, (s->out.n - n) * sizeof(*s->out.v));
    s->out.n -= n;
    s->out.bytes -= s->sent.bytes;
    int final = s->closing && s->out.n == 0;
    s->sending = 1;
    s->send_at = ad_mono_ms();
    h2o_send(s->req, iov, n, final ? H2O_SEND_STATE_FINAL : H2O_SEND_STATE_IN_PROGRESS);
}

/* The write in flight went: let the owner queue more (on_drain), then write what is queued. */
static void written(struct ad_sse *s)
{
    s->sending = 0;
    if (!s->closing && s->out.n == 0 && s->cb->on_drain != NULL) {
        s->in_proceed = 1;
        s->cb->on_drain(s);
        s->in_proceed = 0;
    }
    flush(s);
}

static void on_proceed(h2o_generator_t *g, h2o_req_t *req)
{
    struct ad_sse *s = H2O_STRUCT_FROM_MEMBER(struct ad_sse, gen, g);
    queue_clear(&s->sent);
    recharge(s);
    written(s);
}

static void on_raw_written(h2o_socket_t *sock, const char *err)
{
    struct ad_sse *s = sock->data;
    free(s->wbuf);
    s->wbuf = NULL;
    if (err != NULL || s->final)
        raw_free(s);
    else
        written(s);
}

/* Nothing is expected from the client of a stream taken over: its bytes are dropped; its leaving ends it. */
static void on_raw_read(h2o_socket_t *sock, const char *err)
{
    struct ad_sse *s = sock->data;
    if (err != NULL)
        raw_free(s);
    else if (sock->input->size != 0)
        h2o_buffer_consume(&sock->input, sock->input->size);
}

static void on_stop(h2o_generator_t *g, h2o_req_t *req)
{
    struct ad_sse *s = H2O_STRUCT_FROM_MEMBER(struct ad_sse, gen, g);
    s->req = NULL;
    s->charge = NULL;
    end(s);
}

/* An HTTP/2 stream lives in its request's pool, next to h2o's own allocations in the pool's first chunk (4 KiB,
 * resident anyway), with only a pointer to it in a shared allocation for the dispose callback: the
 * stream struct on its own would be another malloc per stream. h2o runs the disposers before it frees the
 * chunks. */
static void on_dispose(void *p)
{
    struct ad_sse *s = *(struct ad_sse **)p;
    s->req = NULL;
    s->charge = NULL;
    release(s);
}

static void add_headers(h2o_req_t *req)
{
    h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_CONTENT_TYPE, NULL, H2O_STRLIT("text/event-stream"));
    h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_CACHE_CONTROL, NULL, H2O_STRLIT("no-cache"));
    /* Proxies such as nginx buffer responses unless told not to. */
    h2o_add_header_by_str(&req->pool, &req->res.headers, H2O_STRLIT("x-accel-buffering"), 0, NULL, H2O_STRLIT("no"));
}

static int retry_line(char *buf, size_t size, int64_t retry_ms)
{
    return snprintf(buf, size, "retry: %lld\n\n", (long long)retry_ms);
}

static void queue_retry(struct ad_sse *s, int64_t retry_ms)
{
    char line[48];
    struct ad_sse_chunk *c = ad_sse_chunk_new(line, (size_t)retry_line(line, sizeof(line), retry_ms));
    queue_push(&s->out, c);
    recharge(s); /* a retry line more, even when refused: the stream is ending */
}

/*
 * HTTP/1: the connection is taken over from h2o as soon as the headers are out (h2o_http1_upgrade, h2o's way to
 * hand a socket to WebSocket code, with our 200 instead of a 101), and the stream writes its chunks itself. An
 * open request costs h2o its connection struct, with the request in it, and the request's memory pool, whose
 * first allocation is a 4 KiB chunk: with the 8 KiB input buffer h2o keeps the
 * request's bytes in, more than 90% of what a stream cost (bench/sse.sh, 10,000 streams: 5.5 KiB per stream
 * through h2o, 0.7 KiB on a connection of our own). The socket alone stays, read only to notice the client leaving.
 *
 * h2o writes "Connection: upgrade" on such an answer; the "Connection: close" added here says what happens:
 * the connection ends with the stream, whose client reconnects for its next request.
 */
static void on_upgraded(void *data, h2o_socket_t *sock, size_t reqsize)
{
    struct ad_sse *s = data;
    (void)reqsize;
    s->req = NULL; /* disposed by now, with its pool */
    s->sending = 0;
    if (sock == NULL) {
        raw_free(s);
        return;
    }
    s->sock = sock;
    sock->data = s;
    /* The request's bytes, and the input buffer with them, are not needed any more. */
    if (sock->input->size != 0)
        h2o_buffer_consume(&sock->input, sock->input->size);
    h2o_socket_dont_read(sock, 0);
    h2o_socket_read_start(sock, on_raw_read);
    flush(s);
}

static void start_raw(struct ad_sse *s, h2o_req_t *req, int64_t retry_ms)
{
    s->raw = 1;
    s->chunked = req->version == 0x101;
    if (s->chunked)
        h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_TRANSFER_ENCODING, NULL, H2O_STRLIT("chunked"));
    h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_CONNECTION, NULL, H2O_STRLIT("close"));
    ad_http_takeover_headers(req);
    char line[48];
    size_t n = (size_t)retry_line(line, sizeof(line), retry_ms);
    /* In the pool: h2o keeps the request until this has been written. */
    h2o_iovec_t first = {h2o_mem_alloc_pool(&req->pool, n + AD_SSE_FRAMING), 0};
    first.len = frame_chunk(first.base, line, n, s->chunked);
    s->sending = 1; /* until on_upgraded: what is queued meanwhile waits */
    s->send_at = ad_mono_ms();
    h2o_http1_upgrade(req, &first, 1, on_upgraded, s);
}

void *ad_sse_start(h2o_req_t *req, size_t size, const struct ad_sse_callbacks *cb, int64_t retry_ms)
{
    int raw = ad_http1_socket(req) != NULL;
    struct ad_sse *s = raw ? ad_malloc(size) : h2o_mem_alloc_pool(&req->pool, size);
    memset(s, 0, size);
    if (!raw)
        *(struct ad_sse **)h2o_mem_alloc_shared(&req->pool, sizeof(s), on_dispose) = s;
    s->gen.proceed = on_proceed;
    s->gen.stop = on_stop;
    s->req = req;
    s->cb = cb;
    queue_init(&s->out);
    queue_init(&s->sent);
    h2o_linklist_insert(&streams, &s->all);
    nstreams++;
    if (!ad_timer_armed(&heartbeat_timer)) {
        heartbeat_timer.cb = heartbeat_fire;
        ad_timer_arm(&heartbeat_timer, ad_mono_ms() + heartbeat_ms / 4);
    }
    req->res.status = 200;
    req->res.reason = "OK";
    req->res.content_length = SIZE_MAX;
    add_headers(req);
    s->last_write = ad_mono_ms();
    if (raw) {
        start_raw(s, req, retry_ms);
        return s;
    }
    s->charge = ad_http_charge_stream(req);
    h2o_start_response(req, &s->gen);
    queue_retry(s, retry_ms);
    flush(s);
    return s;
}

/* Drop the backlog and end the stream with a retry hint: the client resumes from the last whole event. */
static void cut_off(struct ad_sse *s)
{
    queue_clear(&s->out);
    ad_sse_close(s, cutoff_retry);
}

int ad_sse_write_chunk(struct ad_sse *s, struct ad_sse_chunk *c)
{
    if (s->closing || gone(s))
        return -1;
    /* One chunk always fits, however large: a cap below the biggest event must not cut a stream forever. */
    if (s->out.n != 0 && s->out.bytes + c->len > backlog_max) {
        cut_off(s);
        return -1;
    }
    /* Past its connection's share or the total's it stops growing: it ends after what it holds, whole events. */
    if (s->charge != NULL && ad_http_charge_set(s->charge, (size_t)s->out.bytes + s->sent.bytes + c->len) != 0) {
        ad_sse_close(s, cutoff_retry);
        return -1;
    }
    if (c->refs != UINT32_MAX)
        c->refs++;
    queue_push(&s->out, c);
    s->last_write = ad_mono_ms();
    if (!s->in_proceed)
        flush(s);
    return 0;
}

/* ---- fan-out: direct writes ---- */

/* The socket of s when a chunk may go straight to it: HTTP/1.1 (chunked; an HTTP/1.0 body is not) without
 * TLS, nothing in flight or queued. */
static h2o_socket_t *direct_socket(const struct ad_sse *s)
{
    if (s->sock == NULL || !s->chunked || s->sending || s->closing || s->in_proceed || s->out.n != 0)
        return NULL;
    return s->sock->ssl == NULL ? s->sock : NULL;
}

/* Each writing thread's io_uring for direct writes: 0 not set up yet, 1 ready, -1 not used (send() then). */
static __thread struct io_uring ring;
static __thread int ring_state;

static int ring_ready(void)
{
    if (ring_state == 0) {
        static int said; /* atomic: the loop and the sender thread both set up a ring */
        int rc = ring_wanted ? io_uring_queue_init(AD_SSE_RING, &ring, 0) : -1;
        ring_state = rc == 0 ? 1 : -1;
        if (!__atomic_exchange_n(&said, 1, __ATOMIC_RELAXED)) {
            if (rc == 0)
                ad_info("sse: fan-out writes go through io_uring");
            else if (rc < -1)
                ad_warn("sse: io_uring is not available (%s); fan-out writes use send()", strerror(-rc));
        }
    }
    return ring_state == 1;
}

/* Write buf to fds[from, to) without blocking; res[i] = bytes taken (0 on any error: h2o meets it later).
 * With io_uring, AD_SSE_RING sends cost one system call: on a VM entering and leaving the kernel is a good
 * part of a small send(). A send submitted to the ring must never be made again with send(): only those the
 * kernel did not take fall back. */
static void send_range(const int *fds, size_t *res, size_t from, size_t to, const char *buf, size_t len)
{
    size_t i = from;
    while (i < to && ring_ready()) {
        size_t first = i;
        for (; i < to && i - first < AD_SSE_RING; i++) {
            struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);
            io_uring_prep_send(sqe, fds[i], buf, len, MSG_DONTWAIT | MSG_NOSIGNAL);
            sqe->user_data = i;
        }
        int taken = io_uring_submit_and_wait(&ring, (unsigned)(i - first));
        if (taken < 0)
            taken = 0;
        if ((size_t)taken < i - first) {
            /* What the kernel did not take stays in the ring, which is not entered again. */
            ad_warn("sse: io_uring took %d of %zu writes; fan-out writes use send() from now on", taken, i - first);
            ring_state = -1;
            i = first + (size_t)taken;
        }
        for (int k = 0; k < taken; k++) {
            struct io_uring_cqe *cqe;
            int rc;
            while ((rc = io_uring_wait_cqe(&ring, &cqe)) == -EINTR)
                ;
            if (rc != 0) {
                /* Only a broken ring gets here; what it holds can be neither reaped nor written again. */
                ad_error("sse: io_uring_wait_cqe: %s", strerror(-rc));
                abort();
            }
            res[cqe->user_data] = cqe->res > 0 ? (size_t)cqe->res : 0;
            io_uring_cqe_seen(&ring, cqe);
        }
    }
    for (; i < to; i++) {
        ssize_t w = send(fds[i], buf, len, MSG_DONTWAIT | MSG_NOSIGNAL);
        res[i] = w > 0 ? (size_t)w : 0;
    }
}

/* The sender thread: one job at a time, handed over and waited for by the loop thread. */
static struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int started, busy;
    const int *fds;
    size_t *res;
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
        send_range(sender.fds, sender.res, sender.from, sender.to, sender.buf, sender.len);
        pthread_mutex_lock(&sender.mu);
        sender.busy = 0;
        pthread_cond_broadcast(&sender.cv);
    }
    return NULL;
}

/* Hand fds[from, to) to the sender thread; 0, or -1 when it cannot run (the caller writes them itself). */
static int sender_start(const int *fds, size_t *res, size_t from, size_t to, const char *buf, size_t len)
{
    pthread_mutex_lock(&sender.mu);
    if (!sender.started) {
        pthread_t t;
        if (pthread_create(&t, NULL, sender_main, NULL) != 0) {
            pthread_mutex_unlock(&sender.mu);
            return -1;
        }
        pthread_setname_np(t, "acceptd-sse");
        pthread_detach(t);
        sender.started = 1;
    }
    sender.fds = fds;
    sender.res = res;
    sender.from = from;
    sender.to = to;
    sender.buf = buf;
    sender.len = len;
    sender.busy = 1;
    pthread_cond_broadcast(&sender.cv);
    pthread_mutex_unlock(&sender.mu);
    return 0;
}

static void sender_wait(void)
{
    pthread_mutex_lock(&sender.mu);
    while (sender.busy)
        pthread_cond_wait(&sender.cv, &sender.mu);
    pthread_mutex_unlock(&sender.mu);
}

static void on_tail_writable(h2o_socket_t *sock, const char *err);

/* The tail was written, or the socket failed (failed != 0): back to h2o's writes. On failure a heartbeat is
 * queued if nothing else is, so that h2o's write fails too and it disposes of the request. */
static void tail_end(struct ad_sse *s, int failed)
{
    ad_sse_chunk_release(s->tail);
    s->tail = NULL;
    s->sending = 0;
    if (failed && !s->closing && s->out.n == 0)
        queue_push(&s->out, &heartbeat_chunk);
    flush(s);
}

static void tail_wait(struct ad_sse *s)
{
    s->send_at = ad_mono_ms();
    h2o_socket_notify_write(s->sock, on_tail_writable);
}

static void on_tail_writable(h2o_socket_t *sock, const char *err)
{
    struct ad_sse *s = sock->data;
    if (err != NULL) {
        tail_end(s, 1);
        return;
    }
    ssize_t w = send(h2o_socket_get_fd(sock), s->tail->data + s->tail_off, s->tail->len - s->tail_off,
                     MSG_DONTWAIT | MSG_NOSIGNAL);
    if (w > 0)
        s->tail_off += (uint32_t)w;
    if (w > 0 ? s->tail_off < s->tail->len : errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
        tail_wait(s);
    else
        tail_end(s, w <= 0);
}

void ad_sse_write_many(struct ad_sse *const *v, size_t n, struct ad_sse_chunk *c)
{
    /* Reused from one fan-out to the next: they only grow to the most streams ever written at once. */
    static struct ad_sse **dv;
    static int *dfd;
    static size_t *dres, cap;
    if (n > cap) {
        cap = n;
        dv = ad_realloc(dv, cap * sizeof(*dv));
        dfd = ad_realloc(dfd, cap * sizeof(*dfd));
        dres = ad_realloc(dres, cap * sizeof(*dres));
    }
    size_t nd = 0;
    for (size_t i = 0; i < n; i++) {
        h2o_socket_t *sock = direct_socket(v[i]);
        if (sock == NULL) {
            ad_sse_write_chunk(v[i], c);
            continue;
        }
        dv[nd] = v[i];
        dfd[nd] = h2o_socket_get_fd(sock);
        nd++;
    }
    if (nd == 0)
        return;
    /* h2o's chunked framing: size in hex, CRLF, the data, CRLF. */
    char *buf = ad_malloc((size_t)c->len + 24);
    size_t len = (size_t)snprintf(buf, 24, "%x\r\n", (unsigned)c->len);
    memcpy(buf + len, c->data, c->len);
    len += c->len;
    memcpy(buf + len, "\r\n", 2);
    len += 2;
    size_t split = nd >= AD_SSE_SPLIT_MIN ? nd / 2 : nd;
    if (split < nd && sender_start(dfd, dres, split, nd, buf, len) != 0)
        split = nd;
    send_range(dfd, dres, 0, split, buf, len);
    if (split < nd)
        sender_wait();
    int64_t now = ad_mono_ms();
    for (size_t i = 0; i < nd; i++) {
        struct ad_sse *s = dv[i];
        if (dres[i] == len) {
            s->last_write = now;
        } else if (dres[i] == 0) {
            ad_sse_write_chunk(s, c);
        } else {
            s->tail = ad_sse_chunk_new(buf + dres[i], len - dres[i]);
            s->tail_off = 0;
            s->sending = 1;
            s->last_write = now;
            tail_wait(s);
        }
    }
    free(buf);
}

int ad_sse_write(struct ad_sse *s, const char *frame, size_t len)
{
    struct ad_sse_chunk *c = ad_sse_chunk_new(frame, len);
    int rc = ad_sse_write_chunk(s, c);
    ad_sse_chunk_release(c);
    return rc;
}

int ad_sse_event(struct ad_sse *s, int64_t id, const char *name, const char *data, size_t len)
{
    struct ad_buf b;
    ad_buf_init(&b, SIZE_MAX);
    ad_sse_frame(&b, id, name, data, len);
    int rc = ad_sse_write(s, b.data, b.len);
    ad_buf_free(&b);
    return rc;
}

void ad_sse_close(struct ad_sse *s, int64_t retry_ms)
{
    if (s->closing)
        return;
    s->closing = 1;
    if (retry_ms > 0)
        queue_retry(s, retry_ms);
    end(s);
    if (!s->in_proceed)
        flush(s);
}

int ad_sse_refuse(h2o_req_t *req, int64_t retry_ms)
{
    char line[48];
    int n = retry_line(line, sizeof(line), retry_ms);
    req->res.status = 200;
    req->res.reason = "OK";
    req->res.content_length = (size_t)n;
    add_headers(req);
    h2o_send_inline(req, line, (size_t)n);
    return 0;
}

void ad_sse_close_all(int64_t retry_ms)
{
    h2o_linklist_t *node = streams.next;
    while (node != &streams) {
        struct ad_sse *s = H2O_STRUCT_FROM_MEMBER(struct ad_sse, all, node);
        node = node->next;
        uint32_t r;
        ad_random_bytes((uint8_t *)&r, sizeof(r));
        ad_sse_close(s, retry_ms + (int64_t)(r % (uint32_t)(retry_ms + 1)));
    }
}

/* A client that has not taken a write for this long is not coming back for it. */
static void kill_stalled(struct ad_sse *s)
{
    if (s->sock != NULL) {
        raw_free(s);
        return;
    }
    h2o_socket_t *sock = ad_http1_socket(s->req);
    if (sock != NULL)
        shutdown(h2o_socket_get_fd(sock), SHUT_RDWR);
}

static void heartbeat_fire(struct ad_timer *t)
{
    int64_t now = ad_mono_ms(), tick = heartbeat_ms / 4;
    h2o_linklist_t *node = streams.next;
    while (node != &streams) {
        struct ad_sse *s = H2O_STRUCT_FROM_MEMBER(struct ad_sse, all, node);
        node = node->next;
        if (s->sending && now - s->send_at >= 2 * heartbeat_ms)
            kill_stalled(s);
        else if (!s->sending && !s->closing && s->out.n == 0 && now - s->last_write >= heartbeat_ms - tick)
            ad_sse_write_chunk(s, &heartbeat_chunk);
    }
    if (!h2o_linklist_is_empty(&streams))
        ad_timer_arm(&heartbeat_timer, now + tick);
}
