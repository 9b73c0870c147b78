/*
 * api_batch_events.c - GET /v1/batches/{id}/events: a batch's Server-Sent Events stream (CONTRACT.md section 13).
 *
 * The stream carries the batch's state, not a log: a "batch" event with the batch's representation whenever one of
 * its jobs changes, then a "done" event with its final state, and the stream ends. An event's id is the number of
 * the batch's jobs that have ended (it only grows), and done's is total + 1. A stream that resumes (Last-Event-ID)
 * gets the state as it is now first, so nothing it missed is lost; one that resumes past done is answered 204, as a
 * job's stream is. Nothing polls: a change of a job of the batch, published on this node or heard from another
 * (the hub's event listener, ad_api_batch_events_changed), has the batch read again for the streams that watch it.
 *
 * A stream is an ad_sse (http/sse.h), which may be freed once it has closed; what outlives it is its watch, on
 * the list of watches, freed when the stream has closed and no read of it is in flight.
 */
#include "api/api_int.h"
#include "common/json.h"
#include "core/batches.h"
#include "http/sse.h"
#include "hub/hub.h"

#include <stdlib.h>
#include <string.h>

struct watch;

struct batch_stream {
    struct ad_sse sse;
    struct watch *w;
};

/* What follows a batch for one stream, on the event loop. */
struct watch {
    char *id, *tenant;
    struct batch_stream *s; /* NULL once the stream closed */
    int reading;            /* a read of the batch is in flight */
    int again;              /* a change came while it was: read once more */
    uint8_t sent[32];       /* the SHA-256 of the last state sent */
    struct watch *next;
};
static struct watch *watches;

static void watch_unlink(struct watch *w)
{
    for (struct watch **p = &watches; *p != NULL; p = &(*p)->next) {
        if (*p == w) {
            *p = w->next;
            return;
        }
    }
}

static void watch_free(struct watch *w)
{
    free(w->id);
    free(w->tenant);
    free(w);
}

static void stream_closed(struct ad_sse *s)
{
    struct watch *w = ((struct batch_stream *)s)->w;
    w->s = NULL;
    watch_unlink(w);
    if (!w->reading)
        watch_free(w);
}

static const struct ad_sse_callbacks callbacks = {.on_close = stream_closed};

/* Send batch b on w's stream, unless it is the state sent last; done (and the end) once it is final. */
static void send_state(struct watch *w, const struct ad_batch *b)
{
    struct ad_buf body;
    ad_buf_init(&body, SIZE_MAX);
    ad_batch_render(b, &body);
    uint8_t md[AD_SHA256_LEN];
    ad_sha256(body.data, body.len, md);
    int final = ad_batch_status(b) != AD_RUNNING;
    if (memcmp(md, w->sent, sizeof(md)) != 0 || final) {
        memcpy(w->sent, md, sizeof(md));
        int ended = b->total - b->n[AD_QUEUED] - b->n[AD_RUNNING];
        if (ad_sse_event(&w->s->sse, final ? b->total + 1 : ended, final ? "done" : "batch", body.data, body.len) ==
                0 &&
            final)
            ad_sse_close(&w->s->sse, 0);
    }
    ad_buf_free(&body);
}

/* A read of a watched batch. */
struct watch_read {
    struct ad_op op;
    struct watch *w;
    struct ad_batch *b;
};

static ad_err watch_read_apply(struct ad_op *op, struct ad_conn *c)
{
    struct watch_read *x = (struct watch_read *)op;
    return ad_hub.store->ops->batch_get(c, x->w->tenant, x->w->id, &x->b);
}

static void watch_read_start(struct watch *w);

static void watch_read_done(struct ad_op *op)
{
    struct watch_read *x = (struct watch_read *)op;
    struct watch *w = x->w;
    /* Still reading while it sends: a stream that closes meanwhile (its done, or cut off) leaves w to this. */
    if (w->s != NULL && op->err == AD_E_OK)
        send_state(w, x->b);
    w->reading = 0;
    ad_op_free(op);
    if (w->s == NULL) {
        watch_free(w);
    } else if (w->again) {
        w->again = 0;
        watch_read_start(w);
    }
}

static void watch_read_destroy(struct ad_op *op)
{
    struct watch_read *x = (struct watch_read *)op;
    ad_batch_free(x->b);
    free(x);
}

static void watch_read_start(struct watch *w)
{
    struct watch_read *x = ad_calloc(1, sizeof(*x));
    x->w = w;
    x->op.apply = watch_read_apply;
    x->op.done = watch_read_done;
    x->op.destroy = watch_read_destroy;
    w->reading = 1;
    ad_hub_read(&x->op);
}

void ad_api_batch_events_changed(const struct ad_job *j)
{
    /* A read answered inline (SQLite) may end w's stream and free w: its next is taken first. */
    for (struct watch *w = watches, *next; w != NULL; w = next) {
        next = w->next;
        if (j->batch_id == NULL || w->s == NULL || strcmp(w->id, j->batch_id) != 0)
            continue;
        if (w->reading)
            w->again = 1;
        else
            watch_read_start(w);
    }
}

/* ---- the request ---- */

struct open_read {
    struct ad_api_read rd;
    char *tenant, *id;
    struct ad_batch *b;
};

static ad_err open_apply(struct ad_op *op, struct ad_conn *c)
{
    struct open_read *x = (struct open_read *)op;
    return ad_hub.store->ops->batch_get(c, x->tenant, x->id, &x->b);
}

static void open_answer(struct ad_api_read *rd, struct ad_request *r)
{
    struct open_read *x = (struct open_read *)rd;
    const struct ad_batch *b = x->b;
    int64_t last = -1;
    const char *v = r != NULL ? ad_http_get_str(r->req, "last-event-id") : NULL;
    long long n;
    if (rd->op.err == AD_E_OK)
        rd->op.err = ad_api_batch_expiry_state(b);
    if (r == NULL) {
        /* the client went away */
    } else if (rd->op.err == AD_E_GONE) {
        ad_http_problemf(r->req, AD_E_GONE, "batch %s expired", b->id);
    } else if (rd->op.err == AD_E_NOT_FOUND) {
        ad_http_problem(r->req, AD_E_NOT_FOUND, "this tenant has no batch with this id", NULL);
    } else if (rd->op.err != AD_E_OK) {
        ad_api_fail(r, rd->op.err);
    } else if (v != NULL && v[0] != '\0' && ad_parse_int(v, strlen(v), 0, INT64_MAX, &n) != 0) {
        ad_http_problem(r->req, AD_E_INVALID_REQUEST, "Last-Event-ID must be an event id this server sent", NULL);
    } else if ((last = v != NULL && v[0] != '\0' ? n : -1) > b->total && ad_batch_status(b) != AD_RUNNING) {
        ad_http_empty(r->req, 204); /* it saw done: nothing more will come */
    } else if (ad_hub.shutting_down) {
        ad_sse_refuse(r->req, ad_hub.cfg->sse.overload_retry_ms);
    } else {
        struct batch_stream *s = ad_sse_start(r->req, sizeof(*s), &callbacks, ad_hub.cfg->sse.retry_ms);
        struct watch *w = ad_calloc(1, sizeof(*w));
        w->id = ad_strdup(b->id);
        w->tenant = ad_strdup(b->tenant);
        w->s = s;
        s->w = w;
        w->next = watches;
        watches = w;
        send_state(w, b);
    }
    ad_batch_free(x->b);
    free(x->tenant);
    free(x->id);
}

int ad_api_batch_events(struct ad_request *r)
{
    struct open_read *x = ad_calloc(1, sizeof(*x));
    x->tenant = ad_strdup(r->tenant != NULL ? r->tenant : "default");
    x->id = ad_strdup(r->id);
    x->rd.op.apply = open_apply;
    x->rd.answer = open_answer;
    return ad_api_read(r, &x->rd);
}
