/*
 * conn.c - what a connection holds and leaves behind: its budget of abandoned work (rapid reset), requests
 * answered later (ad_pending) and the held reading of their HTTP/1 sockets, the refusal of ambiguous HTTP/1
 * framing, the lingering close after an error answer, and the pipelined requests of a client that has gone.
 *
 * It knows connections and sockets, not routes or jobs. Event loop thread only.
 */
#include "http/http.h"
#include "http/http_int.h"
#include "common/timer.h"

#include <h2o/http2.h>
#include <h2o/http2_internal.h>

#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

struct ad_http_budget {
    size_t refs;          /* 1 while the socket is open, plus one per ad_pending of the connection */
    size_t outstanding;   /* its ad_pending: requests answered later whose work has not ended */
    size_t resets;        /* requests abandoned with work outstanding, less those answered since */
    h2o_socket_t *sock;   /* NULL once closed */
    h2o_context_t *ctx;   /* of its requests, to find its HTTP/2 connection */
    struct ad_timer calm; /* sends the GOAWAY from the loop, outside h2o's handling of a stream */
    int calmed;           /* GOAWAY sent or on its way: nothing more to count */
    size_t unsent;        /* what its answers still hold (ad_http_charge_answer), until their requests end */
    int64_t moved_at;     /* monotonic ms when unsent was last 0 or an answer of it ended */
    int cut;              /* shut down for its unsent answers: refuse the rest at once */
    size_t nurgent;       /* its answers to header blocks past the limit that have not ended */
    int64_t due;          /* monotonic ms by which the first of them must have ended; 0 when there is none */
    h2o_linklist_t held;  /* in holding while unsent != 0 */
};

static void linger_start(void *data);
static void trim_soon(void);

static struct ad_http_budget *budget_of(h2o_req_t *req)
{
    if (req == NULL || req->conn == NULL || req->conn->callbacks->get_socket == NULL)
        return NULL;
    h2o_socket_t *sock = req->conn->callbacks->get_socket(req->conn);
    /* A connection set to linger after its last answer (below) has the lingering state as its on_close data. */
    if (sock == NULL || sock->on_close.cb == linger_start)
        return NULL;
    struct ad_http_budget *b = sock->on_close.data;
    if (b != NULL)
        b->ctx = req->conn->ctx;
    return b;
}

static void budget_unref(struct ad_http_budget *b)
{
    if (--b->refs == 0)
        free(b);
}

/*
 * GOAWAY(ENHANCE_YOUR_CALM) and close, the way h2o ends a connection on a protocol error (lib/http2/connection.c
 * enqueue_goaway and close_connection): the frame is queued and a write requested, then IS_CLOSING makes h2o
 * stop reading and close the connection once the write has gone, closing its streams (their requests' on_gone
 * run then). Run from a timer, never inside h2o: while h2o is closing a stream or the whole connection (whose
 * streams' disposal brings us here), touching the connection could leave a write linked on a freed one.
 */
static void calm_fire(struct ad_timer *t)
{
    struct ad_http_budget *b = H2O_STRUCT_FROM_MEMBER(struct ad_http_budget, calm, t);
    /* Only h2o's list of live HTTP/2 connections says whether the one on this socket is still there. */
    for (h2o_linklist_t *l = b->ctx->http2._conns.next; b->sock != NULL && l != &b->ctx->http2._conns; l = l->next) {
        h2o_http2_conn_t *conn = H2O_STRUCT_FROM_MEMBER(h2o_http2_conn_t, _conns, l);
        if (conn->sock != b->sock || conn->state >= H2O_HTTP2_CONN_STATE_IS_CLOSING)
            continue;
        ad_warn("closing an HTTP/2 connection that abandoned %zu requests with work outstanding", b->resets);
        h2o_http2_encode_goaway_frame(&conn->_write.buf, conn->pull_stream_ids.max_open,
                                      H2O_HTTP2_ERROR_ENHANCE_YOUR_CALM, h2o_iovec_init(H2O_STRLIT("too many resets")));
        h2o_http2_conn_request_write(conn);
        conn->state = H2O_HTTP2_CONN_STATE_IS_CLOSING;
        break;
    }
    budget_unref(b); /* the timer's */
}

/* As calm_fire, h2o's list of live HTTP/2 connections (libh2o 2.2.5's h2o_context_t, read only) is the only
 * place that says whether any is left. */
int ad_http_http2_idle(h2o_context_t *ctx)
{
    return h2o_linklist_is_empty(&ctx->http2._conns);
}

static void budget_reset(struct ad_http_budget *b)
{
    if (b->calmed || ++b->resets <= AD_HTTP_RESET_BUDGET || b->sock == NULL || b->ctx == NULL)
        return;
    b->calmed = 1;
    b->refs++; /* held by the armed timer */
    ad_timer_arm(&b->calm, ad_mono_ms());
}

struct ad_http_budget *ad_http_conn_open(h2o_socket_t *sock)
{
    struct ad_http_budget *b = ad_calloc(1, sizeof(*b));
    b->refs = 1;
    b->sock = sock;
    b->calm.cb = calm_fire;
    return b;
}

void ad_http_conn_closed(struct ad_http_budget *b)
{
    if (b == NULL)
        return;
    b->sock = NULL;
    if (b->cut) /* what it held goes back now: the allocator may return it */
        trim_soon();
    if (ad_timer_armed(&b->calm)) {
        ad_timer_cancel(&b->calm);
        b->refs--; /* the timer's: the socket's, dropped below, is still held */
    }
    budget_unref(b);
}

int ad_http_conn_full(h2o_req_t *req)
{
    struct ad_http_budget *b = budget_of(req);
    return b != NULL && b->outstanding >= req->conn->ctx->globalconf->http2.max_concurrent_requests_per_connection;
}

struct ad_pending_link {
    struct ad_pending *p;
};

static void pending_dispose(void *arg)
{
    struct ad_pending_link *link = arg;
    struct ad_pending *p = link->p;
    if (p == NULL)
        return;
    p->link = NULL;
    p->req = NULL;
    struct ad_http_budget *b = p->budget;
    if (b == NULL) {
        if (p->on_gone != NULL)
            p->on_gone(p);
        return;
    }
    /* A request whose owner lets go of it here costs nothing more; one whose work runs on (a writer operation,
     * a lease op in flight) is a reset that counts. b is held across on_gone, whose take may drop its last
     * other reference. */
    b->refs++;
    size_t before = b->outstanding;
    if (p->on_gone != NULL)
        p->on_gone(p);
    if (b->outstanding == before)
        budget_reset(b);
    budget_unref(b);
}

h2o_socket_t *ad_http1_socket(h2o_req_t *req)
{
    return req != NULL && req->version < 0x200 && req->conn != NULL ? req->conn->callbacks->get_socket(req->conn)
                                                                    : NULL;
}

/*
 * libh2o 2.2 stops reading an HTTP/1 connection while its request is handled and starts again when the answer
 * has gone. When the answer comes in a later turn of the loop, as every write's does (it waits for its
 * commit), its evloop makes that an epoll_ctl DEL now and an ADD later: two of the four system calls of a
 * durable submit. So while a request waits here its socket stays polled but is not read (h2o_socket_dont_read):
 * no byte moves in the input buffer that h2o's request points into. Should the peer send more or close
 * meanwhile, held_readable stops polling, which is where h2o left it. Both are undone before the answer
 * (ad_pending_take), so h2o finds the socket as it expects.
 */
static void held_readable(h2o_socket_t *sock, const char *err)
{
    h2o_socket_dont_read(sock, 0);
    h2o_socket_read_stop(sock);
}

/* sock: an HTTP/1 socket whose request is being handled, or NULL. */
static void hold_reading(h2o_socket_t *sock)
{
    if (sock != NULL && !h2o_socket_is_reading(sock)) {
        h2o_socket_dont_read(sock, 1);
        h2o_socket_read_start(sock, held_readable);
    }
}

/* While its request is handled, only hold_reading makes an HTTP/1 socket read. */
static void release_reading(h2o_socket_t *sock)
{
    if (sock != NULL && h2o_socket_is_reading(sock))
        held_readable(sock, NULL);
}

struct ad_pending *ad_pending_new(h2o_req_t *req, void *owner, void (*on_gone)(struct ad_pending *p))
{
    hold_reading(ad_http1_socket(req));
    struct ad_pending *p = ad_calloc(1, sizeof(*p));
    p->req = req;
    p->owner = owner;
    p->on_gone = on_gone;
    p->budget = budget_of(req);
    if (p->budget != NULL) {
        p->budget->refs++;
        p->budget->outstanding++;
    }
    p->link = h2o_mem_alloc_shared(&req->pool, sizeof(*p->link), pending_dispose);
    p->link->p = p;
    return p;
}

int ad_pending_gone(const struct ad_pending *p)
{
    h2o_req_t *req = p->req;
    if (req == NULL)
        return 1;
    /* libh2o 2.2 stops reading an HTTP/1 connection while its request is handled, so it has not seen a
     * client that left: look at the socket. An HTTP/2 connection is always read, and h2o notices there. */
    h2o_socket_t *sock = ad_http1_socket(req);
    if (sock == NULL)
        return 0;
    char c;
    ssize_t n = recv(h2o_socket_get_fd(sock), &c, 1, MSG_PEEK | MSG_DONTWAIT);
    return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

h2o_req_t *ad_pending_take(struct ad_pending *p)
{
    h2o_req_t *req = p->req;
    release_reading(ad_http1_socket(req));
    if (p->link != NULL)
        p->link->p = NULL;
    struct ad_http_budget *b = p->budget;
    if (b != NULL) {
        b->outstanding--;
        if (req != NULL && b->resets > 0)
            b->resets--; /* an answered request earns back a reset */
        budget_unref(b);
    }
    free(p);
    return req;
}

/*
 * Request framing (RFC 9112 §6.1, §6.3). libh2o 2.2 frames an HTTP/1 body by the first Content-Length field, or
 * by Transfer-Encoding: chunked whenever one is present, and then serves whatever follows as the next request on
 * the connection. It keeps neither field in req->headers, so the handler cannot ask for them; but the head it
 * parsed is still at the start of the socket's input buffer, right before the body (the entity points into the
 * same buffer, and a chunked body is decoded in place after the head), and is read here again. A request whose
 * framing another parser may read otherwise (a proxy in front, for one) is refused, and its connection closed
 * after the answer, so that the bytes behind it are never taken for a request.
 */

/* Count the Content-Length and Transfer-Encoding fields of the request head [p, end), which libh2o's parser
 * (picohttpparser) has accepted: one empty line may come before the request line; each field is a line of its
 * own, its name everything before the first colon; a line that starts with SP or HT continues the one before. */
static void count_framing_fields(const char *p, const char *end, int *ncl, int *nte)
{
    if (p < end && *p == '\r')
        p++;
    if (p < end && *p == '\n')
        p++;
    const char *nl = memchr(p, '\n', end - p); /* the request line */
    for (p = nl != NULL ? nl + 1 : end; p < end; p = nl != NULL ? nl + 1 : end) {
        nl = memchr(p, '\n', end - p);
        const char *eol = nl != NULL ? nl : end;
        const char *colon = memchr(p, ':', eol - p);
        if (colon == NULL || *p == ' ' || *p == '\t')
            continue;
        if (h2o_lcstris(p, colon - p, H2O_STRLIT("content-length")))
            (*ncl)++;
        else if (h2o_lcstris(p, colon - p, H2O_STRLIT("transfer-encoding")))
            (*nte)++;
    }
}

int ad_http1_refuse_framing(h2o_req_t *req)
{
    h2o_socket_t *sock = ad_http1_socket(req);
    /* No body, no framing fields: libh2o makes an entity of every request that has one. */
    if (sock == NULL || req->entity.base == NULL)
        return 0;
    const char *head = sock->input->bytes;
    if (req->entity.base < head || req->entity.base > head + sock->input->size)
        return 0;
    int ncl = 0, nte = 0;
    count_framing_fields(head, req->entity.base, &ncl, &nte);
    const char *detail = NULL;
    /* Identical repeated values are refused too (RFC 9110 §8.6 allows either), as nginx does: no client of
     * this API sends two, and what the fields say is then never in question. */
    if (ncl > 1)
        detail = "the request has more than one Content-Length field";
    else if (ncl != 0 && nte != 0)
        detail = "the request has both Content-Length and Transfer-Encoding";
    else if (nte > 1)
        detail = "the request has more than one Transfer-Encoding field";
    else if (nte != 0 && req->version < 0x101)
        detail = "an HTTP/1.0 request cannot use Transfer-Encoding";
    if (detail == NULL)
        return 0;
    req->http1_is_persistent = 0;
    ad_http_problem(req, AD_E_INVALID_REQUEST, detail, NULL);
    return 1;
}

/*
 * Lingering close, as nginx's lingering_close. An HTTP/1 answer that closes its connection may be sent before
 * the client has sent all of its body: libh2o's own 413 when Content-Length is over its limit or a chunked body
 * grows past it, its 400 for a broken body framing and 417, and the 400 above. libh2o then closes the socket at
 * once, with the rest of the body still arriving; the kernel answers those bytes with a reset, and a client
 * still writing (Node's http module, fetch) fails with EPIPE or ECONNRESET before it has read the answer.
 *
 * libh2o 2.2 offers no hook between "answer written" and close(), so the descriptor is duplicated when such an
 * answer starts: libh2o's close() then no longer ends the TCP connection (its evloop removes its own descriptor
 * from epoll explicitly, so the duplicate is not polled on its behalf). The socket's on_close, which libh2o calls
 * after that close() once the answer has been handed to the kernel, shuts the duplicate down for writing (a FIN
 * after the answer) and reads and discards what still comes until the client closes too, AD_LINGER_MS have
 * passed or AD_LINGER_BYTES were read; then it closes it. The connection stays counted against
 * limits.maxConnections until then (the on_close it replaced runs at the end).
 *
 * HTTP/2 needs none of this: a stream answered early is reset (RST_STREAM) and flow control stops its body,
 * while the connection stays open.
 */
#define AD_LINGER_MS 2000
#define AD_LINGER_BYTES (64 * 1024 * 1024)

struct lingering_conn {
    struct ad_timer timer;
    h2o_linklist_t link; /* in lingering: what is lingering stays reachable, also at exit */
    h2o_loop_t *loop;
    int fd;             /* the duplicate, until lingering starts */
    h2o_socket_t *sock; /* on that descriptor, while lingering */
    size_t discarded;
    void (*prev_cb)(void *data); /* the socket's on_close before ours */
    void *prev_data;
};

static h2o_linklist_t lingering = {&lingering, &lingering};

static void linger_end(struct lingering_conn *l)
{
    ad_timer_cancel(&l->timer);
    if (l->sock != NULL)
        h2o_socket_close(l->sock);
    else if (l->fd >= 0)
        close(l->fd);
    h2o_linklist_unlink(&l->link);
    if (l->prev_cb != NULL)
        l->prev_cb(l->prev_data);
    free(l);
}

static void linger_on_timeout(struct ad_timer *t)
{
    linger_end((struct lingering_conn *)((char *)t - offsetof(struct lingering_conn, timer)));
}

static void linger_on_read(h2o_socket_t *sock, const char *err)
{
    struct lingering_conn *l = sock->data;
    if (err == NULL) {
        l->discarded += sock->input->size;
        h2o_buffer_consume(&sock->input, sock->input->size);
        if (l->discarded < AD_LINGER_BYTES)
            return;
    }
    linger_end(l);
}

/* libh2o has closed its descriptor, after the answer was written. */
static void linger_start(void *data)
{
    struct lingering_conn *l = data;
    if (shutdown(l->fd, SHUT_WR) != 0) {
        linger_end(l);
        return;
    }
    l->sock = h2o_evloop_socket_create(l->loop, l->fd, 0);
    l->fd = -1;
    l->sock->data = l;
    h2o_socket_read_start(l->sock, linger_on_read);
    l->timer.cb = linger_on_timeout;
    ad_timer_arm(&l->timer, ad_mono_ms() + AD_LINGER_MS);
}

void ad_http_linger_arm(h2o_req_t *req)
{
    h2o_socket_t *sock = ad_http1_socket(req);
    if (sock == NULL || req->http1_is_persistent || req->res.status < 400 || sock->on_close.cb == linger_start)
        return;
    int fd = fcntl(h2o_socket_get_fd(sock), F_DUPFD_CLOEXEC, 0);
    if (fd < 0)
        return; /* then it closes at once, as libh2o would */
    struct lingering_conn *l = ad_calloc(1, sizeof(*l));
    l->loop = req->conn->ctx->loop;
    l->fd = fd;
    l->prev_cb = sock->on_close.cb;
    l->prev_data = sock->on_close.data;
    h2o_linklist_insert(&lingering, &l->link);
    sock->on_close.cb = linger_start;
    sock->on_close.data = l;
}

/*
 * libh2o runs a socket's write callback from its loop (h2o_evloop_run): a write that completes at once is
 * queued as pending and its callback runs before h2o_evloop_run returns, and h2o_evloop_run's first step,
 * before it polls, takes each socket's wish to be polled for writing from whether a callback is still set.
 * Code of ours that writes outside h2o_evloop_run (the writer's completions, our timers: SSE heartbeats, long
 * polls that time out) leaves such a callback pending past that step: the socket is then polled for writing with
 * no write in flight once the callback has run, and the next time it is writable libh2o 2.2.5 aborts
 * (evloop.c.h write_pending: "sock->super._cb.write != NULL"); a socket closed meanwhile is freed while still
 * queued. So after such code the pending callbacks are run here, as h2o runs them after each of its own timeouts:
 * h2o_timeout_run on a timeout of our own, whose one entry is due at once, ends by running them. Checked against
 * libh2o 2.2.5; tests/blackbox/sse_mass_close.test.mjs fails (the daemon aborts) when this stops working.
 */
static void settle_noop(h2o_timeout_entry_t *e)
{
    (void)e;
}

void ad_http_run_pending(struct ad_loop *l)
{
    h2o_loop_t *loop = ad_loop_h2o(l);
    static h2o_timeout_t settle;
    static h2o_timeout_entry_t entry = {.cb = settle_noop};
    static h2o_loop_t *settle_loop;
    if (settle_loop != loop) {
        h2o_timeout_init(loop, &settle, 0);
        settle_loop = loop;
    }
    h2o_timeout_link(loop, &settle, &entry);
    h2o_timeout_run(loop, &settle, h2o_now(loop));
}

/*
 * The pipelined requests of a client that has gone. libh2o 2.2 reads an HTTP/1 connection only between requests:
 * what a client pipelined waits in the socket's input buffer, and each request is handled as soon as the answer
 * before it has been written, without the socket being read again; a failed write does not stop that either
 * (lib/http1.c on_send_complete ignores its error). A client that sends thousands of requests and leaves would
 * have every one of them answered for nobody, the loop busy with them all along. So before a request with more
 * requests behind it in the buffer is handled, the connection's TCP state is asked (one getsockopt, only then):
 * once the peer has reset it (TCP_CLOSE: it closed with answers unread, or our first write after its FIN met a
 * closed socket), the request is answered 499 with nothing rendered and the connection closed after it, which
 * drops the rest. A peer that only half-closed (TCP_CLOSE_WAIT) may still read, and is served.
 */
#define AD_HTTP_GONE_STATUS 499

/* Whether the input buffer of sock holds more than req, the request at its start. */
static int pipelined(h2o_socket_t *sock, h2o_req_t *req)
{
    const char *head = sock->input->bytes, *end = head + sock->input->size, *req_end;
    if (req->entity.base != NULL) {
        if (req->entity.base < head || req->entity.base > end)
            return 0;
        req_end = req->entity.base + req->entity.len;
    } else {
        req_end = memmem(head, sock->input->size, "\r\n\r\n", 4);
        if (req_end == NULL)
            return 0;
        req_end += 4;
    }
    return req_end < end;
}

static int peer_reset(h2o_socket_t *sock)
{
    struct tcp_info ti;
    socklen_t len = sizeof(ti);
    return getsockopt(h2o_socket_get_fd(sock), IPPROTO_TCP, TCP_INFO, &ti, &len) == 0 && ti.tcpi_state == TCP_CLOSE;
}

/*
 * Answers that have not left. An answer's body, and the request's memory with it (its decoded headers: an HPACK
 * table entry referenced thousands of times decodes into a vector of thousands of them), stay until the request
 * ends: on HTTP/1 once the answer is written, on HTTP/2 once its stream is done. An HTTP/2 SSE stream's backlog
 * (sse.c) stays until h2o takes it. A client that does not read (an HTTP/2 flow-control window left at 0, an
 * HTTP/1 pipeline never read) keeps them as long as it likes. So what each answer holds is charged to its
 * connection's budget and to a total until its request ends (an SSE stream's charge follows its backlog), and,
 * with the limits of ad_http_configure_unsent (limits.maxUnsentBytesPerConnection, maxUnsentBytes, unsentStall):
 * - a connection holding more than its share is shut down at its next request or answer (its streams end with
 *   it, and their memory goes back); the requests it still sends meanwhile, and the answers that were to pass
 *   that limit (rendered later, off the loop), get a bare 503 instead; an SSE stream that was to pass it stops
 *   growing as its connection goes;
 * - while the total is over its limit every other request but the health checks and metrics gets 503 with
 *   Retry-After instead of an answer that would add to it, and an SSE stream whose backlog would add to it ends
 *   after what it holds, with a retry hint (its client resumes later, and meets the 503 while the total is over);
 *   the total passes its limit by what was admitted before (each answer, each stream's one write), no more;
 * - a connection holding answers of which none has ended (nor an SSE stream's write gone) for the stall time is
 *   shut down too, and one holding an answer to a header block past the limit (a 431) that has not ended
 *   within AD_HTTP_ERROR_DUE_MS: an error that cannot leave (a 431 behind a closed window) does not keep its
 *   request's memory (an HPACK bomb's decoded headers) for longer than that. libh2o 2.2.5 can neither send an
 *   answer that needs no window (it ends every stream with a DATA frame, which waits for one, even an empty
 *   one) nor reset one stream through its public API, so the connection is what goes.
 * Shutting the socket down is how: libh2o reads the end of it and closes the connection as if the client had.
 * Once a connection shut down for this has ended, or what all held has mostly gone again after a peak of
 * AD_HTTP_TRIM_PEAK or more, the allocator is asked (a moment later, once) to give its free memory back
 * (trim_fire): otherwise the allocator keeps the heap it grew to, and an attack's peak would stay the daemon's size.
 */
#define AD_HTTP_STALL_TICK_MS 1000
#define AD_HTTP_ERROR_DUE_MS 1000
#define AD_HTTP_TRIM_PEAK (32 * 1024 * 1024)
#define AD_HTTP_TRIM_DELAY_MS 500 /* once the rest of a storm has ended too */

/* The limits' defaults (config_override.c) until ad_http_configure_unsent. */
static size_t unsent_conn_max = 8 * 1024 * 1024, unsent_max = 128 * 1024 * 1024;
static int64_t stall_ms = 10000;
static size_t unsent_total, unsent_peak;
static h2o_linklist_t holding = {&holding, &holding};
static struct ad_timer stall_timer, trim_timer;

struct ad_http_charge {
    struct ad_http_budget *b;
    size_t bytes;
    int urgent; /* counted in b->nurgent */
};

void ad_http_configure_unsent(size_t per_connection, size_t total, int64_t stall)
{
    unsent_conn_max = per_connection;
    unsent_max = total;
    stall_ms = stall;
}

size_t ad_http_unsent_bytes(void)
{
    return unsent_total;
}

static void budget_cut(struct ad_http_budget *b, const char *why)
{
    if (b->cut || b->sock == NULL)
        return;
    b->cut = 1;
    ad_warn("closing a connection holding %zu bytes of answers its client has not taken: %s", b->unsent, why);
    shutdown(h2o_socket_get_fd(b->sock), SHUT_RDWR);
}

static void stall_fire(struct ad_timer *t)
{
    int64_t now = ad_mono_ms();
    for (h2o_linklist_t *l = holding.next; l != &holding; l = l->next) {
        struct ad_http_budget *b = H2O_STRUCT_FROM_MEMBER(struct ad_http_budget, held, l);
        if (now - b->moved_at >= stall_ms)
            budget_cut(b, "none of them has left for limits.unsentStall");
        else if (b->due != 0 && now >= b->due)
            budget_cut(b, "an answer to headers past the limit has not left");
    }
    if (!h2o_linklist_is_empty(&holding))
        ad_timer_arm(t, now + AD_HTTP_STALL_TICK_MS);
}

/* tcmalloc's (docs/operations.md, "Memory allocator"), when the daemon is linked with it; glibc's otherwise (the
 * sanitizer builds). */
extern void MallocExtension_ReleaseFreeMemory(void) __attribute__((weak));

static void trim_fire(struct ad_timer *t)
{
    (void)t;
    if (MallocExtension_ReleaseFreeMemory != NULL)
        MallocExtension_ReleaseFreeMemory();
    else
        malloc_trim(0);
}

static void trim_soon(void)
{
    unsent_peak = 0;
    if (!ad_timer_armed(&trim_timer)) {
        trim_timer.cb = trim_fire;
        ad_timer_arm(&trim_timer, ad_mono_ms() + AD_HTTP_TRIM_DELAY_MS);
    }
}

static void budget_add(struct ad_http_budget *b, size_t bytes)
{
    if (bytes == 0)
        return;
    if (b->unsent == 0) {
        b->moved_at = ad_mono_ms();
        h2o_linklist_insert(&holding, &b->held);
    }
    b->unsent += bytes;
    unsent_total += bytes;
    if (unsent_total > unsent_peak)
        unsent_peak = unsent_total;
    if (!ad_timer_armed(&stall_timer)) {
        stall_timer.cb = stall_fire;
        ad_timer_arm(&stall_timer, ad_mono_ms() + AD_HTTP_STALL_TICK_MS);
    }
}

/* bytes of what b holds have left (or their request ended): progress. */
static void budget_sub(struct ad_http_budget *b, size_t bytes)
{
    if (bytes == 0)
        return;
    b->unsent -= bytes;
    unsent_total -= bytes;
    b->moved_at = ad_mono_ms();
    if (b->unsent == 0)
        h2o_linklist_unlink(&b->held);
    if (unsent_peak >= AD_HTTP_TRIM_PEAK && unsent_total < unsent_peak / 8)
        trim_soon();
}

static void charge_end(void *p)
{
    struct ad_http_charge *c = p;
    if (c->urgent && --c->b->nurgent == 0)
        c->b->due = 0;
    budget_sub(c->b, c->bytes);
    budget_unref(c->b);
}

/* A charge of bytes to req's connection b, until req ends. */
static struct ad_http_charge *charge_new(h2o_req_t *req, struct ad_http_budget *b, size_t bytes)
{
    struct ad_http_charge *c = h2o_mem_alloc_shared(&req->pool, sizeof(*c), charge_end);
    c->b = b;
    c->bytes = bytes;
    b->refs++;
    budget_add(b, bytes);
    return c;
}

int ad_http_charge_answer(h2o_req_t *req, int status, size_t body_len)
{
    struct ad_http_budget *b = budget_of(req);
    if (b == NULL)
        return 0;
    /* The request's headers: their vector, and the smaller ones it grew out of (in the pool until the end); per
     * field, libh2o 2.2.5's HPACK decoder links the table entry's name and value into the pool and h2o_add_header
     * may allocate the name (lib/http2/hpack.c decode_header, h2o_hpack_parse_headers): 1.7 MB measured for
     * 16,000 references to one table entry, ~110 bytes a field. */
    size_t held = 2 * req->headers.capacity * sizeof(h2o_header_t) + req->headers.size * 48 + req->path.len + 1024;
    /* An answer that comes later (a read off the loop, a commit) was not refused as its request arrived. */
    int refuse = b->cut || b->unsent + held + body_len > unsent_conn_max;
    struct ad_http_charge *c = charge_new(req, b, held + (refuse ? 0 : body_len));
    if (refuse)
        budget_cut(b, "over its limit");
    if (status == 431) {
        c->urgent = 1;
        if (b->nurgent++ == 0)
            b->due = ad_mono_ms() + AD_HTTP_ERROR_DUE_MS;
    }
    return refuse ? -1 : 0;
}

struct ad_http_charge *ad_http_charge_stream(h2o_req_t *req)
{
    struct ad_http_budget *b = budget_of(req);
    return b != NULL ? charge_new(req, b, 0) : NULL;
}

int ad_http_charge_set(struct ad_http_charge *c, size_t bytes)
{
    if (bytes <= c->bytes) {
        budget_sub(c->b, c->bytes - bytes);
        c->bytes = bytes;
        return 0;
    }
    struct ad_http_budget *b = c->b;
    size_t more = bytes - c->bytes;
    if (b->cut || b->unsent + more > unsent_conn_max) {
        budget_cut(b, "over its limit");
        return -1;
    }
    if (unsent_total > unsent_max) /* as the guard: past it, nothing more (the write that passed it went) */
        return -1;
    budget_add(b, more);
    c->bytes = bytes;
    return 0;
}

/* The health checks and metrics, small and what an operator looks at while the total is over: answered anyway. */
static int is_probe(h2o_req_t *req)
{
    size_t len = req->query_at != SIZE_MAX ? req->query_at : req->path.len;
    return h2o_memis(req->path.base, len, H2O_STRLIT("/healthz")) ||
           h2o_memis(req->path.base, len, H2O_STRLIT("/readyz")) ||
           h2o_memis(req->path.base, len, H2O_STRLIT("/metrics"));
}

static int guard_on_req(h2o_handler_t *self, h2o_req_t *req)
{
    (void)self;
    struct ad_http_budget *b = budget_of(req);
    if (b != NULL && (b->cut || b->unsent > unsent_conn_max)) {
        budget_cut(b, "over its limit");
        req->http1_is_persistent = 0;
        return ad_http_empty(req, 503);
    }
    if (unsent_total > unsent_max && !is_probe(req))
        return ad_http_problem(req, AD_E_UNAVAILABLE, "too many answers are waiting for their clients to take them",
                               NULL);
    h2o_socket_t *sock = ad_http1_socket(req);
    if (sock == NULL || !pipelined(sock, req) || !peer_reset(sock))
        return -1;
    struct ad_request *r = h2o_mem_alloc_pool(&req->pool, sizeof(*r));
    memset(r, 0, sizeof(*r));
    r->req = req;
    ad_http_note_route(r, AD_HTTP_GONE_ROUTE);
    req->http1_is_persistent = 0;
    return ad_http_empty(req, AD_HTTP_GONE_STATUS);
}

void ad_http_register_guard(h2o_pathconf_t *conf)
{
    h2o_handler_t *h = h2o_create_handler(conf, sizeof(*h));
    h->on_req = guard_on_req;
}
