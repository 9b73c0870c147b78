/*
 * http.h - the HTTP layer: the route table, request context, and every kind of response
 * (JSON, RFC 9457 problems, empty), plus a guard for requests answered later.
 *
 * HTTP status codes live here and in the api_*.c handlers; the layers below return ad_err.
 */
#ifndef AD_HTTP_H
#define AD_HTTP_H

#include <h2o.h>
#include "core/config.h"
#include "http/loop.h"
#include "common/error.h"
#include "common/util.h"

/* One request as the handlers see it. Allocated in req->pool. */
struct ad_request {
    h2o_req_t *req;
    const char *tenant;
    int roles;                    /* AD_ROLE_* bits the caller holds */
    h2o_iovec_t path;             /* without the query string */
    h2o_iovec_t query;            /* after '?', may be empty */
    char *id;                     /* the {id} path segment, NUL-terminated, or NULL */
    const struct ad_route *route; /* the configured business route, or NULL */
    int64_t started_ns;           /* monotonic, when the handler was first called: the submit latency's start */
};

typedef int (*ad_handler)(struct ad_request *r);

/*
 * The route table (api.c). pattern segments: literal text, "{id}" (an id: [A-Za-z0-9_-]{1,64}), and an
 * optional ":verb" suffix on the id segment ("/v1/jobs/{id}:cancel"). roles: which AD_ROLE_* bits may call
 * it; 0 = no authentication at all (health checks).
 */
struct ad_route_def {
    const char *method;
    const char *pattern;
    ad_handler handler;
    int roles;
};

/* Find the handler for a request; returns AD_E_OK, AD_E_NOT_FOUND or AD_E_METHOD_NOT_ALLOWED (with allowed
 * methods written to allow, a comma-separated list in the request pool). */
ad_err ad_http_match(h2o_req_t *req, const struct ad_route_def *table, size_t n, h2o_iovec_t path,
                     const struct ad_route_def **out, char **id, h2o_iovec_t *allow);

/* Responses. Each sends the whole answer and returns 0. */
int ad_http_send(struct ad_request *r, int status, const char *content_type, const char *body, size_t len);
int ad_http_json(struct ad_request *r, int status, const char *body, size_t len);
int ad_http_empty(h2o_req_t *req, int status);
/* A problem for err; detail may be NULL (the title is used). extra: additional members as JSON text starting
 * with a comma (",\"errors\":[...]") or NULL. */
int ad_http_problem(h2o_req_t *req, ad_err err, const char *detail, const char *extra);
int ad_http_problemf(h2o_req_t *req, ad_err err, const char *fmt, ...) AD_PRINTF(3, 4);
/* Append the problem document ad_http_problem would send for err to b, without sending anything (the per-job
 * problems of a batch answer). */
void ad_http_problem_render(h2o_req_t *req, struct ad_buf *b, ad_err err, const char *detail, const char *extra);
/* Turn h2o's own plain-text error answers on conf into problem documents; a 413's names body_limit (a request
 * body's) and part_limit (a part of a result artifact's). */
void ad_http_register_problem_filter(h2o_pathconf_t *conf, size_t body_limit, size_t part_limit);
/* A stored problem document (a failed job's error) with its own status. */
int ad_http_problem_doc(h2o_req_t *req, const char *json, int status);

/* Add a response header (value copied into the pool). */
void ad_http_header(h2o_req_t *req, const h2o_token_t *token, const char *value);
void ad_http_headerf(h2o_req_t *req, const h2o_token_t *token, const char *fmt, ...) AD_PRINTF(3, 4);
/* The same without printf, for the answers every poll and submit gets: a number, and three strings joined. */
void ad_http_header_int(h2o_req_t *req, const h2o_token_t *token, int64_t value);
void ad_http_header_cat(h2o_req_t *req, const h2o_token_t *token, const char *a, const char *b, const char *c);
void ad_http_header_str(h2o_req_t *req, const char *name, const char *value);

/* Run the socket callbacks that writes and closes made outside h2o_evloop_run left pending (conn.c says why):
 * after every turn of code of ours that runs outside it, before the loop polls again. */
void ad_http_run_pending(struct ad_loop *loop);

/* Before the handlers of conf (register it first), what a request's connection allows (conn.c): a request
 * pipelined on an HTTP/1 connection whose client has reset it is not handled but answered 499, and the
 * connection closed, dropping the requests behind it (counted under the route AD_HTTP_GONE_ROUTE); a connection
 * holding too many answers its client has not taken is closed; while all of them hold too much, 503. */
#define AD_HTTP_GONE_ROUTE "{client gone}"
void ad_http_register_guard(h2o_pathconf_t *conf);
/* The limits of what answers not yet taken may hold (conn.c): per connection, in all, and how long a connection
 * may hold some without any of them leaving (limits.maxUnsentBytesPerConnection, maxUnsentBytes, unsentStall). */
void ad_http_configure_unsent(size_t per_connection, size_t total, int64_t stall_ms);
/* Charge an answer of status and body_len bytes, with the memory of its request, to its connection until the
 * request ends (send_body, for every answer); a 431's must end within a second. -1 when its connection is over
 * its share and shut down: send a bare 503 instead (it was charged as one). */
int ad_http_charge_answer(h2o_req_t *req, int status, size_t body_len);
/* A charge to req's connection that follows what an answer produced bit by bit holds (an HTTP/2 SSE stream's
 * backlog), 0 bytes at first; it ends with req (it lives in req's pool: not to be used once req is gone). NULL
 * when req's connection has no budget. */
struct ad_http_charge *ad_http_charge_stream(h2o_req_t *req);
/* Make c hold bytes. Less is progress; more is refused with -1 when it would pass the connection's share (the
 * connection is then shut down) or the total's: the answer should then stop growing. */
int ad_http_charge_set(struct ad_http_charge *c, size_t bytes);
/* What the answers not yet taken by their clients hold, in bytes. */
size_t ad_http_unsent_bytes(void);

/* The socket of an HTTP/1.x request (it has the connection to itself); NULL for HTTP/2 or none. */
h2o_socket_t *ad_http1_socket(h2o_req_t *req);
/* The headers the filters add to every answer (X-Request-Id), for one that does not pass them: an HTTP/1
 * connection taken over from h2o with h2o_http1_upgrade (sse.c). */
void ad_http_takeover_headers(h2o_req_t *req);
/* Refuse an HTTP/1 request whose body framing is ambiguous (two Content-Length fields, Content-Length with
 * Transfer-Encoding, Transfer-Encoding on HTTP/1.0) with 400 and a closed connection: returns 1 when it answered. */
int ad_http1_refuse_framing(h2o_req_t *req);

/* A request header's value or NULL (value NUL-terminated in the pool); a field sent more than once is its
 * values joined with ", " (RFC 9110 §5.3). */
const char *ad_http_get(h2o_req_t *req, const h2o_token_t *token);
const char *ad_http_get_str(h2o_req_t *req, const char *name);
/* A query parameter's percent-decoded value (in the request pool), or NULL when absent. Names are compared
 * decoded too: "lim%69t" is limit. */
const char *ad_http_query(struct ad_request *r, const char *name);
/* The decoded name of a parameter the query gives more than once (in the request pool), or NULL: a request
 * that repeats one is refused before any handler reads it. Parameters without a name ("&&", "=x") are not
 * counted. */
const char *ad_http_query_repeated(struct ad_request *r);

/*
 * Request ids and the access log. Every answer carries X-Request-Id: the request's own when it is sane (1 to 64
 * characters of [A-Za-z0-9._-]), else one made here (16 characters from the CSPRNG); a problem document has it as
 * its "requestId" member. When a request is disposed, a logger counts it under its route template and status
 * (common/metrics.h) and, with log.accessLog, writes its access line.
 */
#define AD_REQUEST_ID_MAX 64
/* The request's id (in the request's pool), made on first use. */
const char *ad_http_request_id(h2o_req_t *req);
/* What the access log and the request counter know of r: its route template once it is routed (a literal that
 * outlives the request; NULL leaves it as it was) and r itself, whose tenant they read when the request ends.
 * Called first as the request arrives, which starts the clock of its logged duration. */
void ad_http_note_route(struct ad_request *r, const char *route);
/* Count (and, with access_log, log) every request of conf when it ends. */
void ad_http_register_logger(h2o_pathconf_t *conf, int access_log);

/* Parse "Prefer" into its parts: respond_async (0/1) and wait (-1 when absent). */
void ad_http_prefer(h2o_req_t *req, int *respond_async, int *wait);
/* Prefer: return=minimal | representation (RFC 7240 §4.2): the last one given, or 0 when neither is. */
#define AD_PREFER_MINIMAL 1
#define AD_PREFER_REPRESENTATION 2
int ad_http_prefer_return(h2o_req_t *req);
/* 1 when the request prefers return=minimal, after adding Preference-Applied: return=minimal to its answer. */
int ad_http_prefer_minimal(h2o_req_t *req);

/*
 * A request answered later (writer completions, long polls, parked leases). It lives on the heap, not in
 * the request's pool, so its owner can always look at it: when the client goes away first, h2o disposes
 * the request, req becomes NULL and on_gone (if set) runs. Whoever finishes with it calls ad_pending_take
 * exactly once: on_gone, or the code that answers.
 */
struct ad_pending {
    h2o_req_t *req; /* NULL once the client is gone */
    void *owner;
    void (*on_gone)(struct ad_pending *p);
    struct ad_pending_link *link;  /* in the request's pool while the request lives */
    struct ad_http_budget *budget; /* of the request's connection, or NULL */
};
/* While it waits, the request's HTTP/1 socket stays polled without being read (see http.c). */
struct ad_pending *ad_pending_new(h2o_req_t *req, void *owner, void (*on_gone)(struct ad_pending *p));
/* Whether the client of a pending request has gone, as far as can be told without reading: h2o disposed of
 * the request, or its HTTP/1 peer closed its side of the connection. */
int ad_pending_gone(const struct ad_pending *p);
/* Free p and return the request to answer, or NULL when the client went away. */
h2o_req_t *ad_pending_take(struct ad_pending *p);

/*
 * What a connection may leave behind. A client that resets an HTTP/2 stream frees its place under h2o's stream
 * limit at once, while the work its request started (a writer operation, a parked lease's) runs on; resetting
 * streams as fast as it opens them (CVE-2023-44487, "rapid reset") it could queue work without end. So each
 * accepted connection has a budget, the data of its socket's on_close (server.c): its pending requests, answered
 * or not, count against its stream limit until their work ends (ad_http_conn_full), and a connection that
 * abandons more than AD_HTTP_RESET_BUDGET requests with work outstanding, less one for each request answered
 * since, gets GOAWAY with ENHANCE_YOUR_CALM and is closed.
 */
#define AD_HTTP_RESET_BUDGET 100
/* The budget of a newly accepted sock, to be its on_close.data; ad_http_conn_closed(it) when sock closes. */
struct ad_http_budget *ad_http_conn_open(h2o_socket_t *sock);
void ad_http_conn_closed(struct ad_http_budget *b);
/* 1 when no HTTP/2 connection of ctx is left: after h2o_context_request_shutdown, its GOAWAYs have done. */
int ad_http_http2_idle(h2o_context_t *ctx);
/* 1 when req's connection has as many requests outstanding as it may have streams: refuse more work on it. */
int ad_http_conn_full(h2o_req_t *req);

#endif
