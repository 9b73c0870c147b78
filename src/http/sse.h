/*
 * sse.h - Server-Sent Events on h2o: the wire framing, one stream per request, a bounded backlog per stream
 * and comment heartbeats.
 *
 * A stream is a 200 text/event-stream answer that stays open (chunked on HTTP/1.1, a long-lived stream on
 * HTTP/2). What is queued on a stream waits in its backlog while the previous write is in flight; a backlog
 * that would pass its cap cuts the stream off: what was queued is dropped, a "retry:" hint is sent and the
 * stream closes, so the client reconnects and resumes from the last id it received. Events are only ever
 * dropped whole, so that id is exact.
 *
 * Queued data lives in reference-counted chunks, so one event fanned out to many streams is rendered and
 * stored once (ad_sse_chunk_new, ad_sse_write_chunk). An idle stream holds no buffer.
 *
 * This file knows nothing of jobs, tenants or stores: what to send and when is the caller's (api_events.c).
 * Event loop thread only.
 */
#ifndef AD_SSE_H
#define AD_SSE_H

#include <h2o.h>
#include "common/util.h"

struct ad_sse;

/* Bytes queued on streams, shared by every stream they are queued on. */
struct ad_sse_chunk {
    uint32_t refs; /* UINT32_MAX: static, never freed */
    uint32_t len;
    const char *data;
};

struct ad_sse_callbacks {
    /* The stream ended: closed by its owner, cut off, or the client went away. Called once; the owner unlinks
     * the stream from whatever it hangs on. The memory stays valid until the request is disposed. */
    void (*on_close)(struct ad_sse *s);
    /* The backlog was handed to the connection and is empty: a good time to queue more (paging through a
     * replay). May be NULL. */
    void (*on_drain)(struct ad_sse *s);
};

#define AD_SSE_INLINE 4

/* A stream's list of chunks, with room for a few in place (an idle or fast stream never allocates). */
struct ad_sse_queue {
    struct ad_sse_chunk **v;
    uint32_t n, cap;
    size_t bytes;
    struct ad_sse_chunk *inl[AD_SSE_INLINE];
};

struct ad_sse {
    h2o_generator_t gen;
    h2o_req_t *req; /* NULL once the request is gone (on HTTP/1, once the connection is taken over: sock) */
    /* HTTP/1: the connection, taken from h2o once the headers are out (ad_sse_start); NULL before and on
     * HTTP/2. The stream then frames and writes its bytes itself and is freed when the socket closes. */
    h2o_socket_t *sock;
    const struct ad_sse_callbacks *cb;
    struct ad_sse_queue out;  /* queued, not yet handed to h2o */
    struct ad_sse_queue sent; /* handed to h2o, must stay valid until proceed */
    char *wbuf;               /* on sock: the framed bytes of the write in flight */
    uint8_t sending;          /* a write is in flight: wait for proceed before the next */
    uint8_t closing;          /* no more events: the final write follows the backlog */
    uint8_t ended;            /* on_close ran */
    uint8_t in_proceed;
    uint8_t raw;        /* HTTP/1: the connection is (being) taken over from h2o */
    uint8_t chunked;    /* on sock: HTTP/1.1, chunked framing (HTTP/1.0 bodies end with the connection) */
    uint8_t final;      /* on sock: the write in flight is the last */
    int64_t last_write; /* monotonic ms of the last write queued */
    int64_t send_at;    /* monotonic ms when the write in flight was handed to h2o */
    h2o_linklist_t all; /* every stream, for heartbeats and shutdown */
    /* The rest of a chunk that a direct write (ad_sse_write_many) put only partly on the socket: it goes out
     * raw, before anything else, when the socket is writable again. NULL when there is none. */
    struct ad_sse_chunk *tail;
    uint32_t tail_off;
    struct ad_sse_kept *kept; /* ad_sse_strdup's copies */
    /* HTTP/2: out and sent, charged to the connection's budget of answers not yet taken (http.h); NULL on HTTP/1
     * and once the request is gone. */
    struct ad_http_charge *charge;
};

/* Settings for every stream: comment heartbeat period, backlog cap in bytes, the retry hint a stream that is
 * cut off ends with, and whether fan-out writes go through io_uring (when the kernel allows it). */
void ad_sse_configure(int64_t heartbeat_ms, size_t backlog_bytes, int64_t cutoff_retry_ms, int io_uring);

/* Start a 200 text/event-stream answer on req whose first line is "retry: <retry_ms>". The stream object is
 * size bytes (a caller's struct starting with struct ad_sse), zeroed. It outlives the request on HTTP/1 (the
 * connection is taken over from h2o and the request disposed as soon as the headers are out), so the caller
 * keeps nothing that lives in the request's pool: copy what the stream needs (ad_sse_strdup). */
void *ad_sse_start(h2o_req_t *req, size_t size, const struct ad_sse_callbacks *cb, int64_t retry_ms);

/* A copy of str that lives as long as stream s (freed after its on_close), or NULL for NULL. Right after
 * ad_sse_start only: an HTTP/2 stream's copy goes to its request's pool. */
const char *ad_sse_strdup(struct ad_sse *s, const char *str);

/* A chunk holding a copy of data, with one reference (the caller's): release it when done queueing it. */
struct ad_sse_chunk *ad_sse_chunk_new(const char *data, size_t len);
void ad_sse_chunk_release(struct ad_sse_chunk *c);

/* Queue a chunk of whole events (taking a reference). Returns 0, or -1 when the stream is closing or was
 * cut off because the backlog would pass its cap (on_close has run then). */
int ad_sse_write_chunk(struct ad_sse *s, struct ad_sse_chunk *c);
/* Queue c on each of the n streams of v, as ad_sse_write_chunk does one by one (a stream may be cut off).
 * A fan-out's fast path: an idle HTTP/1.1 cleartext stream gets c written straight to its socket, with the
 * chunked framing h2o would add, and with many such streams a second thread writes half of them. */
void ad_sse_write_many(struct ad_sse *const *v, size_t n, struct ad_sse_chunk *c);
/* Queue a copy of bytes (whole events); as ad_sse_write_chunk. */
int ad_sse_write(struct ad_sse *s, const char *frame, size_t len);
/* Frame and queue one event; as ad_sse_write_chunk. */
int ad_sse_event(struct ad_sse *s, int64_t id, const char *name, const char *data, size_t len);
/* Close the stream after what is queued, with a "retry:" hint first when retry_ms > 0. The stream must not
 * be used afterwards. */
void ad_sse_close(struct ad_sse *s, int64_t retry_ms);

/* Bytes queued on s and not yet handed to the connection. */
static inline size_t ad_sse_backlog(const struct ad_sse *s)
{
    return s->out.bytes;
}

/* Append an event to b: "id: <id>\n" (when id >= 0), "event: <name>\n" (when name != NULL), then one "data:"
 * line per line of data and a blank line. Returns 0, or -1 when b's cap is hit. */
int ad_sse_frame(struct ad_buf *b, int64_t id, const char *name, const char *data, size_t len);

/* Answer req with an SSE body that only says when to come back ("retry: <retry_ms>") and ends: how an
 * overloaded or stopping server turns a client away without a 5xx (EventSource gives up on those). */
int ad_sse_refuse(h2o_req_t *req, int64_t retry_ms);

/* Close every open stream, each with a retry hint of retry_ms plus up to as much again at random (so that
 * clients do not all come back at once). For shutdown. */
void ad_sse_close_all(int64_t retry_ms);

/* Open streams. */
size_t ad_sse_count(void);

#endif
