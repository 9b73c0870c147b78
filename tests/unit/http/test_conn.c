/*
 * test_conn.c - unit tests for src/http/conn.c: the pending-request guard, the connection budget, the held
 * reading of a waiting request (on a real evloop socket, one end of a socketpair), the count of framing
 * fields and the charge of answers not yet taken. conn.c is included for its static parts.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sys/socket.h>
#include <unistd.h>

#include "http/conn.c"

struct fake {
    h2o_req_t req;
};

static int setup(void **state)
{
    struct fake *f = calloc(1, sizeof(*f));
    h2o_mem_init_pool(&f->req.pool);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fake *f = *state;
    h2o_mem_clear_pool(&f->req.pool);
    free(f);
    return 0;
}

static int gone_calls;
static void count_gone(struct ad_pending *p)
{
    gone_calls++;
    assert_null(p->req); /* detached before on_gone runs */
    assert_null(ad_pending_take(p));
}

static void test_pending_guard(void **state)
{
    struct fake *f = *state;
    int owner;
    gone_calls = 0;
    struct ad_pending *p = ad_pending_new(&f->req, &owner, count_gone);
    assert_ptr_equal(p->req, &f->req);
    assert_ptr_equal(p->owner, &owner);
    /* The client goes away: the request's pool is released, on_gone runs once (and frees p). */
    h2o_mem_clear_pool(&f->req.pool);
    assert_int_equal(gone_calls, 1);

    /* Taken before the pool goes: on_gone never runs. */
    p = ad_pending_new(&f->req, &owner, count_gone);
    assert_ptr_equal(ad_pending_take(p), &f->req);
    h2o_mem_clear_pool(&f->req.pool);
    assert_int_equal(gone_calls, 1);

    /* No callback: the owner still holds p after the client left, and reads req safely (ASan checks). */
    p = ad_pending_new(&f->req, NULL, NULL);
    h2o_mem_clear_pool(&f->req.pool);
    assert_null(p->req);
    assert_null(ad_pending_take(p));
    assert_int_equal(gone_calls, 1);
}

/* A connection as the budget sees it: a socket whose on_close.data is the budget, and h2o's stream limit. */
static h2o_socket_t budget_sock;
static h2o_socket_t *budget_get_socket(h2o_conn_t *conn)
{
    return &budget_sock;
}
static const h2o_conn_callbacks_t budget_callbacks = {.get_socket = budget_get_socket};

static int take_calls;
static void take_gone(struct ad_pending *p)
{
    take_calls++;
    ad_pending_take(p);
}

/* A request's pending counts against its connection's stream limit until its work ends, whether the client
 * stayed or not; past AD_HTTP_RESET_BUDGET requests abandoned with work outstanding (less those answered
 * since) the connection's GOAWAY is armed. One abandoned with nothing left to run (on_gone takes it) costs
 * nothing. */
static void test_pending_budget(void **state)
{
    (void)state;
    static h2o_globalconf_t gconf;
    static h2o_context_t ctx;
    gconf.http2.max_concurrent_requests_per_connection = 100;
    ctx.globalconf = &gconf;
    h2o_linklist_init_anchor(&ctx.http2._conns);
    h2o_conn_t conn = {.ctx = &ctx, .callbacks = &budget_callbacks};
    struct ad_http_budget *b = ad_http_conn_open(&budget_sock);
    budget_sock.on_close.data = b;

    enum { N = AD_HTTP_RESET_BUDGET + 2 };
    h2o_req_t *reqs = calloc(N, sizeof(*reqs));
    struct ad_pending *p[N];
    for (int i = 0; i < N; i++) {
        h2o_mem_init_pool(&reqs[i].pool);
        reqs[i].conn = &conn;
        reqs[i].version = 0x200;
    }
    for (int i = 0; i < 100; i++) {
        assert_false(ad_http_conn_full(&reqs[i]));
        p[i] = ad_pending_new(&reqs[i], NULL, NULL);
    }
    assert_true(ad_http_conn_full(&reqs[0]));
    /* Reset with work outstanding: still counted. */
    size_t timers = ad_timers_count();
    for (int i = 0; i < 100; i++)
        h2o_mem_clear_pool(&reqs[i].pool);
    assert_true(ad_http_conn_full(&reqs[100]));
    assert_int_equal(b->resets, 100);
    /* One ends: room for one more, which its owner lets go of at once when reset: not counted. */
    assert_null(ad_pending_take(p[0]));
    assert_false(ad_http_conn_full(&reqs[100]));
    take_calls = 0;
    p[100] = ad_pending_new(&reqs[100], NULL, take_gone);
    h2o_mem_clear_pool(&reqs[100].pool);
    assert_int_equal(take_calls, 1);
    assert_int_equal(b->resets, 100);
    assert_int_equal(ad_timers_count(), timers);
    /* One more with work outstanding is past the budget: the GOAWAY is armed. */
    p[101] = ad_pending_new(&reqs[101], NULL, NULL);
    h2o_mem_clear_pool(&reqs[101].pool);
    assert_int_equal(ad_timers_count(), timers + 1);
    for (int i = 1; i < 100; i++)
        assert_null(ad_pending_take(p[i]));
    assert_null(ad_pending_take(p[101]));
    assert_int_equal(b->outstanding, 0);
    /* Closing cancels the GOAWAY and frees the budget (ASan checks). */
    ad_http_conn_closed(b);
    assert_int_equal(ad_timers_count(), timers);
    free(reqs);
}

static int read_calls;
static void count_read(h2o_socket_t *sock, const char *err)
{
    read_calls++;
}

static void run_loop(h2o_loop_t *loop)
{
    for (int i = 0; i < 3; i++)
        h2o_evloop_run(loop, 5);
}

static void test_held_reading(void **state)
{
    int fds[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, fds), 0);
    h2o_loop_t *loop = h2o_evloop_create();
    h2o_socket_t *sock = h2o_evloop_socket_create(loop, fds[0], 0);

    /* Not reading, as h2o leaves a socket whose request is handled. Held, it is polled but never read: what
     * the peer sends stays in the kernel, and then the socket is not polled any more either. */
    hold_reading(sock);
    assert_true(h2o_socket_is_reading(sock));
    run_loop(loop);
    assert_true(h2o_socket_is_reading(sock)); /* nothing came: still polled */
    assert_int_equal(write(fds[1], "GET / HTTP/1.1\r\n", 16), 16);
    run_loop(loop);
    assert_int_equal(sock->input->size, 0);
    assert_false(h2o_socket_is_reading(sock));
    release_reading(sock); /* already stopped: nothing to undo */
    assert_false(h2o_socket_is_reading(sock));

    /* Held and released before the answer: h2o's next read_start reads as it always does. */
    hold_reading(sock);
    release_reading(sock);
    assert_false(h2o_socket_is_reading(sock));
    read_calls = 0;
    h2o_socket_read_start(sock, count_read);
    run_loop(loop);
    assert_true(read_calls >= 1);
    assert_int_equal(sock->input->size, 16);

    h2o_socket_close(sock);
    close(fds[1]);
    run_loop(loop);
    h2o_evloop_destroy(loop);
}

/* The framing fields of a request head are counted as libh2o's parser saw them. */
static void test_count_framing_fields(void **state)
{
    static const struct {
        const char *head;
        int ncl, nte;
    } cases[] = {
        {"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\n", 1, 0},
        {"POST / HTTP/1.1\r\nContent-Length: 5\r\ncontent-length: 5\r\n\r\n", 2, 0},
        {"POST / HTTP/1.1\r\nTRANSFER-ENCODING: chunked\r\nContent-Length: 9\r\n\r\n", 1, 1},
        {"POST / HTTP/1.1\nTransfer-Encoding: chunked\nTransfer-Encoding: chunked\n\n", 0, 2},
        /* an empty line before the request line, as the parser allows */
        {"\r\nPOST / HTTP/1.1\r\nContent-Length: 1\r\n\r\n", 1, 0},
        /* a folded line continues its field; names only count before the colon */
        {"POST / HTTP/1.1\r\nX-A: b\r\n Content-Length: 3\r\nX-B: content-length: 4\r\n\r\n", 0, 0},
        /* the request line is never a field */
        {"POST /content-length:1 HTTP/1.1\r\n\r\n", 0, 0},
        {"POST / HTTP/1.1\r\nContent-Lengthy: 3\r\nTransfer-Encodin: chunked\r\n\r\n", 0, 0},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        int ncl = 0, nte = 0;
        count_framing_fields(cases[i].head, cases[i].head + strlen(cases[i].head), &ncl, &nte);
        assert_int_equal(ncl, cases[i].ncl);
        assert_int_equal(nte, cases[i].nte);
    }
}

static h2o_socket_t *unsent_sock;
static h2o_socket_t *unsent_get_socket(h2o_conn_t *conn)
{
    (void)conn;
    return unsent_sock;
}
static const h2o_conn_callbacks_t unsent_callbacks = {.get_socket = unsent_get_socket};
static void unsent_closed(void *data)
{
    ad_http_conn_closed(data);
}
/* What an answer holds is charged to its connection and to the total until its request ends; a connection over
 * its share is shut down at its next request, which gets a bare 503 without reaching the handler. */
static void test_unsent_charge(void **state)
{
    (void)state;
    int fds[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, fds), 0);
    h2o_loop_t *loop = h2o_evloop_create();
    h2o_socket_t *sock = h2o_evloop_socket_create(loop, fds[0], 0);
    static h2o_context_t ctx;
    static h2o_globalconf_t gconf;
    ctx.globalconf = &gconf;
    ctx.loop = loop;
    unsent_sock = sock;
    h2o_conn_t conn = {.ctx = &ctx, .callbacks = &unsent_callbacks};
    struct ad_http_budget *b = ad_http_conn_open(sock);
    sock->on_close.data = b;

    size_t total0 = ad_http_unsent_bytes();
    h2o_req_t a = {0}, c = {0}, e = {0};
    h2o_mem_init_pool(&a.pool);
    h2o_mem_init_pool(&c.pool);
    h2o_mem_init_pool(&e.pool);
    a.conn = c.conn = e.conn = &conn;
    a.version = c.version = e.version = 0x200;
    assert_int_equal(ad_http_charge_answer(&a, 200, 1000), 0);
    assert_int_equal(ad_http_charge_answer(&c, 200, unsent_conn_max / 2), 0);
    assert_true(b->unsent > unsent_conn_max / 2 + 1000);
    assert_int_equal(ad_http_unsent_bytes() - total0, b->unsent);
    h2o_mem_clear_pool(&c.pool);
    assert_true(b->unsent > 1000 && b->unsent < 4096);
    h2o_mem_clear_pool(&a.pool);
    assert_int_equal(b->unsent, 0);
    assert_int_equal(ad_http_unsent_bytes(), total0);
    assert_true(h2o_linklist_is_empty(&holding));
    assert_int_equal(b->cut, 0);

    /* An answer that would pass the connection's share is refused (charged as a bare 503), and the connection
     * shut down: its peer end sees the end; every later answer is refused too. */
    h2o_mem_init_pool(&c.pool);
    assert_int_equal(ad_http_charge_answer(&c, 200, unsent_conn_max), -1);
    assert_int_equal(b->cut, 1);
    assert_true(b->unsent < 4096);
    char byte;
    assert_int_equal(recv(fds[1], &byte, 1, 0), 0);
    assert_int_equal(ad_http_charge_answer(&e, 200, 10), -1);
    h2o_mem_clear_pool(&c.pool);
    h2o_mem_clear_pool(&e.pool);
    assert_int_equal(b->unsent, 0);

    sock->on_close.cb = unsent_closed;
    h2o_socket_close(sock);
    close(fds[1]);
    unsent_sock = NULL;
}

/* A stream's charge follows what it holds; more is refused past its connection's share (which shuts the
 * connection down) or while the total is past its limit, as configured. */
static void test_unsent_stream(void **state)
{
    (void)state;
    int fds[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, fds), 0);
    h2o_loop_t *loop = h2o_evloop_create();
    h2o_socket_t *sock = h2o_evloop_socket_create(loop, fds[0], 0);
    static h2o_context_t ctx;
    static h2o_globalconf_t gconf;
    ctx.globalconf = &gconf;
    ctx.loop = loop;
    unsent_sock = sock;
    h2o_conn_t conn = {.ctx = &ctx, .callbacks = &unsent_callbacks};
    struct ad_http_budget *b = ad_http_conn_open(sock);
    sock->on_close.data = b;
    size_t total0 = ad_http_unsent_bytes();
    ad_http_configure_unsent(1 << 20, total0 + (3 << 20) / 2, 10000);

    h2o_req_t a = {0}, c = {0};
    h2o_mem_init_pool(&a.pool);
    h2o_mem_init_pool(&c.pool);
    a.conn = c.conn = &conn;
    a.version = c.version = 0x200;
    struct ad_http_charge *ca = ad_http_charge_stream(&a), *cc = ad_http_charge_stream(&c);
    assert_non_null(ca);
    assert_int_equal(b->unsent, 0);
    assert_true(h2o_linklist_is_empty(&holding));
    assert_int_equal(ad_http_charge_set(ca, 1000), 0);
    assert_int_equal(ad_http_charge_set(cc, 500), 0);
    assert_int_equal(b->unsent, 1500);
    assert_false(h2o_linklist_is_empty(&holding));
    assert_int_equal(ad_http_charge_set(ca, 0), 0); /* its write went */
    assert_int_equal(b->unsent, 500);
    assert_int_equal(ad_http_charge_set(cc, 0), 0);
    assert_true(h2o_linklist_is_empty(&holding));

    /* Past the total (another connection holds most of it): refused, the connection left open. */
    unsent_total += 1 << 20;
    assert_int_equal(ad_http_charge_set(ca, 600 << 10), 0); /* passes the total: admitted, as the guard's */
    assert_int_equal(ad_http_charge_set(cc, 10), -1);
    assert_int_equal(b->cut, 0);
    unsent_total -= 1 << 20;
    assert_int_equal(ad_http_charge_set(cc, 10), 0);
    /* Past the connection's share: refused, the connection shut down. */
    assert_int_equal(ad_http_charge_set(cc, 1 << 20), -1);
    assert_int_equal(b->cut, 1);
    assert_int_equal(b->unsent, (600 << 10) + 10);
    char byte;
    assert_int_equal(recv(fds[1], &byte, 1, 0), 0);
    h2o_mem_clear_pool(&a.pool);
    h2o_mem_clear_pool(&c.pool);
    assert_int_equal(b->unsent, 0);
    assert_int_equal(ad_http_unsent_bytes(), total0);
    ad_http_configure_unsent(8 << 20, 128 << 20, 10000);

    sock->on_close.cb = unsent_closed;
    h2o_socket_close(sock);
    close(fds[1]);
    unsent_sock = NULL;
}

int main(void)
{
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(test_pending_guard),        T(test_pending_budget), T(test_held_reading),
        T(test_count_framing_fields), T(test_unsent_charge),  T(test_unsent_stream),
    };
#undef T
    return cmocka_run_group_tests(tests, NULL, NULL);
}
