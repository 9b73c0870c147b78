/*
 * store_pg.c - the cluster store: several acceptd nodes share one PostgreSQL database through libpq.
 *
 * One global write order. Every writer transaction starts by taking one transaction-scoped advisory lock, so
 * write batches of all nodes run one after another and commit in seq order; each batch then reads the seq
 * counter (acceptd_counter), hands out seqs from it locally and writes it back at commit if it moved. A
 * reader that has seen seq n has therefore seen every change up to n (the changes feed and event ids never
 * skip a late commit), and rows swept away never make seq go back. An advisory lock writes nothing, so a
 * batch that changed nothing (an idle sweep, a lease request that found no job) commits without a WAL flush.
 *
 * One round trip per batch. Every connection is in libpq pipeline mode. Inside a transaction a write is only
 * sent; its result is checked when the next read, or the commit, collects the results in order. begin only
 * sends the lock and the counter read: the batch's first read, or its first seq, collects them. A database
 * error anywhere in a batch poisons it: the commit then rolls back and reports the error. Outside a
 * transaction each statement is sent with a sync and awaited, which is plain synchronous execution.
 * A batch's operations have no savepoints (pg_changes): the store counts the writes it sends, as SQLite counts
 * rows changed. The reads a batch must wait for are few: the jobs its operations load are read ahead, all in
 * one go (pg_job_prefetch), and its leases take from the head of the queue that its first lease read (struct
 * pg_pool), so a batch of submits, completes and leases waits about three times: reads ahead, queue, commit.
 *
 * Fairness among groups (docs/protocol.md "Groups and fairness"): the server gives each job its turn in the
 * insert itself (PG_TURN_EXPR), under the write lock, so every node counts the same turns and no node keeps any
 * state beyond its transaction (the next inserts of a group in one transaction take the turns after it, pg_turn.c);
 * the lease reads the queue by priority, turn, cseq. A turn is not known here until read back,
 * so an insert into the queue a pool holds drops the pool (pool_note).
 *
 * The feed. Each store has a random node id; a commit that changed jobs announces them with NOTIFY
 * acceptd_changes "<node>\n<id>\n<id>\t<tenant>\t<type>..." (tenant and type for the jobs that are queued
 * now), and a node's feed connection LISTENs and passes on what the other nodes announced.
 *
 * Like store_sqlite.c, this file decides nothing about jobs and never logs parameter values (payloads,
 * results, secrets): only the statement's purpose and the server's primary message.
 *
 * This file holds the store operations: transactions, jobs, idempotency records, attempts and job events, and
 * the ops table. What they stand on is elsewhere, one job a file (store_pg_int.h declares what they share):
 * pg_conn.c the connection and its pipeline, pg_schema.c the statements and the migrations, pg_webhook.c
 * the endpoints and the outbox, pg_queue.c the queue settings, pg_turn.c the turns of inserts, pg_artifact.c the
 * artifact rows, pg_feed.c the listening side of the feed.
 */
#include "store/store_pg_int.h"
#include "common/metrics.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- transactions ---- */

static void ids_clear(struct ad_conn *c)
{
    for (size_t i = 0; i < c->nids; i++)
        free(c->ids[i]);
    c->nids = c->ids_savepoint = 0;
}

/* Forget the jobs read ahead: every one (id NULL, a sweep or the transaction's end) or id's, written. */
static void prefetch_drop(struct ad_conn *c, const char *id)
{
    for (size_t i = 0; i < c->npre; i++) {
        struct pg_prefetch *pf = &c->pre[i];
        if (pf->state == PRE_STALE || (id != NULL && strcmp(pf->id, id) != 0))
            continue;
        PQclear(pf->res);
        pf->res = NULL;
        pf->state = PRE_STALE;
    }
}

void ad_pg_prefetch_drop(struct ad_conn *c, const char *id)
{
    prefetch_drop(c, id);
}

static void pool_drop(struct pg_pool *pl)
{
    for (size_t i = 0; i < pl->n; i++)
        ad_job_free(pl->rows[i]);
    for (size_t i = 0; i < pl->ntypes; i++)
        free(pl->type[i]);
    free(pl->type);
    free(pl->tenant);
    free(pl->types);
    struct ad_job **rows = pl->rows;
    size_t cap = pl->cap;
    *pl = (struct pg_pool){.rows = rows, .cap = cap};
}

static void tx_end(struct ad_conn *c)
{
    pool_drop(&c->pool);
    prefetch_drop(c, NULL);
    for (size_t i = 0; i < c->npre; i++)
        free(c->pre[i].id);
    c->npre = 0;
    c->in_tx = 0;
    c->auto_tx = 0;
    c->poison = AD_E_OK;
    ids_clear(c);
    ad_hook_cache_drop(&c->hooks);
    ad_pg_queues_forget(c);
    ad_pg_turns_forget(c, NULL, NULL);
}

/*
 * BEGIN, take the global write lock and read the counter, all only sent: the batch's first read collects
 * them with its own result (one round trip), and the first seq handed out waits for the counter (next_seq).
 */
static ad_err begin_once(struct ad_conn *c)
{
    c->in_tx = 1;
    c->poison = AD_E_OK;
    c->seq_known = 0;
    c->seq_begin = c->seq;
    ad_err e = ad_pg_send_stmt(c, ST_BEGIN, 0, NULL, CHECK_NONE, "begin");
    if (e == AD_E_OK)
        e = ad_pg_send_stmt(c, ST_WRITE_LOCK, 0, NULL, CHECK_NONE, "take the write lock");
    if (e == AD_E_OK)
        e = ad_pg_send_stmt(c, ST_COUNTER_LOCK, 0, NULL, CHECK_SEQ, "read the seq counter");
    if (e == AD_E_OK)
        e = ad_pg_send_flush(c);
    if (e != AD_E_OK) {
        ad_pg_rollback_wire(c);
        tx_end(c);
    }
    return e;
}

/* The next seq of the open batch, once begin's counter read is in. */
static ad_err next_seq(struct ad_conn *c, int64_t *seq)
{
    if (!c->seq_known) {
        ad_err e = c->poison != AD_E_OK ? c->poison : ad_pg_send_flush(c);
        if (e == AD_E_OK)
            e = ad_pg_drain(c, 0);
        if (e == AD_E_OK && !c->seq_known)
            e = AD_E_INTERNAL;
        if (e != AD_E_OK) {
            if (c->poison == AD_E_OK)
                c->poison = e;
            return e;
        }
    }
    *seq = ++c->seq;
    return AD_E_OK;
}

static ad_err pg_begin(struct ad_conn *c)
{
    if (c->in_tx) {
        ad_error("store: begin inside a transaction");
        return AD_E_INTERNAL;
    }
    tx_end(c);
    /* A server that restarted has closed this connection: notice it now, while the batch can still go to a
     * fresh connection (begin waits for nothing, so it would notice too late). Non-blocking reads: the first
     * may only take the server's goodbye message, the second then sees the end of the stream. */
    for (int i = 0; i < 2 && !c->broken && c->npend == 0; i++)
        if (!PQconsumeInput(c->pg) || PQstatus(c->pg) != CONNECTION_OK)
            c->broken = 1;
    if (ad_pg_revive(c) != 0)
        return AD_E_UNAVAILABLE;
    ad_err e = begin_once(c);
    /* A server restart is only noticed on the first use after it: one more try on a fresh connection. */
    if (e == AD_E_UNAVAILABLE && (c->broken || PQstatus(c->pg) != CONNECTION_OK)) {
        if (ad_pg_revive(c) != 0)
            return AD_E_UNAVAILABLE;
        e = begin_once(c);
    }
    return e;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Announce the changed jobs: "<node>\n<entry>\n<entry>..." (ids_add), in as many notifications as the size limit
 * needs. */
static ad_err send_announcements(struct ad_conn *c)
{
    if (c->nids == 0)
        return AD_E_OK;
    qsort(c->ids, c->nids, sizeof(*c->ids), cmp_str);
    struct ad_buf b;
    ad_buf_init(&b, SIZE_MAX);
    ad_err e = AD_E_OK;
    size_t head = strlen(c->s->node);
    for (size_t i = 0; i <= c->nids && e == AD_E_OK; i++) {
        size_t len = i < c->nids ? strlen(c->ids[i]) : 0;
        if (i < c->nids && ((i > 0 && strcmp(c->ids[i], c->ids[i - 1]) == 0) || head + 1 + len > PG_NOTIFY_MAX))
            continue; /* a repeat, or an id that could never fit (ids are short) */
        if (b.len > 0 && (i == c->nids || b.len + 1 + len > PG_NOTIFY_MAX)) {
            struct pg_params p = {0};
            ad_pg_param_TEXT(&p, b.data);
            e = ad_pg_send_write(c, ST_NOTIFY, &p, CHECK_NONE, "announce changes");
            b.len = 0;
        }
        if (i < c->nids) {
            if (b.len == 0)
                ad_buf_append(&b, c->s->node, head);
            AD_BUF_LIT(&b, "\n");
            ad_buf_append(&b, c->ids[i], len);
        }
    }
    ad_buf_free(&b);
    return e;
}

/*
 * Everything left goes out at once: the new counter, the announcements, COMMIT and a sync; then every
 * pending result is collected. Any error on the way (including one that poisoned the batch earlier) means
 * nothing was committed: the transaction is rolled back and the error returned.
 */
static ad_err pg_commit(struct ad_conn *c)
{
    if (!c->in_tx) {
        ad_error("store: commit outside a transaction");
        return AD_E_INTERNAL;
    }
    ad_err e = c->poison;
    if (e == AD_E_OK && c->seq != c->seq_begin) {
        struct pg_params p = {0};
        ad_pg_param_INT64(&p, c->seq);
        e = ad_pg_send_write(c, ST_COUNTER_SET, &p, CHECK_ROW, "advance the counter");
    }
    if (e == AD_E_OK)
        e = send_announcements(c);
    if (e == AD_E_OK)
        e = ad_pg_send_stmt(c, ST_COMMIT, 0, NULL, CHECK_COMMIT, "commit");
    if (e == AD_E_OK)
        e = ad_pg_send_sync(c);
    if (e == AD_E_OK && PQflush(c->pg) != 0)
        e = ad_pg_fail_conn(c, "commit");
    if (e == AD_E_OK) {
        e = ad_pg_drain(c, 0);
        if (e == AD_E_OK && c->poison != AD_E_OK)
            e = c->poison;
    }
    if (e != AD_E_OK)
        ad_pg_rollback_wire(c);
    tx_end(c);
    return e;
}

static void pg_rollback(struct ad_conn *c)
{
    if (!c->in_tx)
        return;
    ad_pg_rollback_wire(c);
    tx_end(c);
}

static ad_err tx_stmt(struct ad_conn *c, enum pg_stmt id, const char *what)
{
    if (!c->in_tx) {
        ad_error("store: %s outside a transaction", what);
        return AD_E_INTERNAL;
    }
    struct pg_params p = {0};
    return ad_pg_send_write(c, id, &p, CHECK_NONE, what);
}

/*
 * The writes sent on c so far, whether or not their results are in. With it the writer needs no savepoint per
 * operation: an operation that fails before sending a write leaves nothing to undo, and a write's own failure
 * poisons the whole batch anyway (a pipeline skips everything after an error until its sync), so a savepoint
 * could undo nothing the batch would keep. It saved two statements and a subtransaction per operation.
 */
static int64_t pg_changes(struct ad_conn *c)
{
    return c->writes;
}

static ad_err pg_savepoint(struct ad_conn *c)
{
    ad_err e = tx_stmt(c, ST_SAVEPOINT, "savepoint");
    if (e == AD_E_OK)
        c->ids_savepoint = c->nids;
    return e;
}

static ad_err pg_release(struct ad_conn *c)
{
    return tx_stmt(c, ST_RELEASE, "release");
}

static void pg_rollback_to(struct ad_conn *c)
{
    /* ROLLBACK TO keeps the savepoint open; release it so the next operation's savepoint is not nested. */
    if (tx_stmt(c, ST_ROLLBACK_TO, "rollback to savepoint") == AD_E_OK)
        tx_stmt(c, ST_RELEASE, "release after rollback");
    while (c->nids > c->ids_savepoint)
        free(c->ids[--c->nids]);
    /* A webhook or queue written by the undone operation may be in a remembered lookup. */
    ad_hook_cache_drop(&c->hooks);
    ad_pg_queues_forget(c);
    ad_pg_turns_forget(c, NULL, NULL);
}

/*
 * Out of space (AD_E_STORAGE_FULL, SQLSTATE class 53): the server's room is its own, so there is nothing to give
 * back, and there is room again once a write that needs a new page goes through. A row in a page the table already
 * has would fit in the room the failed batches left behind and say yes too soon: the probe gives acceptd_space a
 * new, empty file (TRUNCATE) and writes a row, which extends it by a page, in the tablespace where the other tables
 * grow. Under the write lock like any write; its failures are not logged: the writer tries again and again while
 * the server is full.
 */
static ad_err pg_reclaim(struct ad_conn *c)
{
    c->quiet = 1;
    int own;
    ad_err e = ad_pg_auto_begin(c, &own);
    if (e == AD_E_OK) {
        struct pg_params p = {0};
        e = ad_pg_send_write(c, ST_SPACE_CLEAR, &p, CHECK_NONE, "probe for space");
        if (e == AD_E_OK)
            e = ad_pg_send_write(c, ST_SPACE_PROBE, &p, CHECK_NONE, "probe for space");
        e = ad_pg_auto_end(c, own, e);
    }
    c->quiet = 0;
    return e;
}

/* A write outside begin/commit is a transaction of its own (as SQLite's autocommit): it takes the write
 * lock and hands out seqs like any batch. *own tells ad_pg_auto_end whether to end it. */
ad_err ad_pg_auto_begin(struct ad_conn *c, int *own)
{
    *own = !c->in_tx;
    if (!*own)
        return AD_E_OK;
    ad_err e = pg_begin(c);
    if (e == AD_E_OK)
        c->auto_tx = 1;
    return e;
}

ad_err ad_pg_auto_end(struct ad_conn *c, int own, ad_err e)
{
    if (!own)
        return e;
    if (e == AD_E_OK)
        return pg_commit(c);
    pg_rollback(c);
    return e;
}

/* One pipelined write, in its own transaction when none is open. */
ad_err ad_pg_write1(struct ad_conn *c, enum pg_stmt id, const struct pg_params *p, enum pg_check check,
                    const char *what)
{
    int own;
    ad_err e = ad_pg_auto_begin(c, &own);
    if (e != AD_E_OK)
        return e;
    return ad_pg_auto_end(c, own, ad_pg_send_write(c, id, p, check, what));
}

/* ---- jobs ---- */

/* Remember a changed job for the commit's announcement: "<id>", or "<id>\t<tenant>\t<type>" while it is queued
 * (tenants and types hold no control characters). A later change of the same job in the batch replaces it. */
static void ids_add(struct ad_conn *c, const struct ad_job *job)
{
    char *entry =
        job->status == AD_QUEUED ? ad_asprintf("%s\t%s\t%s", job->id, job->tenant, job->type) : ad_strdup(job->id);
    size_t idlen = strlen(job->id);
    for (size_t i = c->nids; i > c->ids_savepoint && i + 8 > c->nids; i--) {
        char *prev = c->ids[i - 1];
        if (strncmp(prev, job->id, idlen) == 0 && (prev[idlen] == '\0' || prev[idlen] == '\t')) {
            free(prev);
            c->ids[i - 1] = entry;
            return;
        }
    }
    ad_pg_announce(c, entry);
}

void ad_pg_announce(struct ad_conn *c, char *entry)
{
    if (c->nids == c->ids_cap) {
        c->ids_cap = c->ids_cap ? c->ids_cap * 2 : 64;
        c->ids = ad_realloc(c->ids, c->ids_cap * sizeof(*c->ids));
    }
    c->ids[c->nids++] = entry;
}

/* Start the write of a row that takes the next seq: in the open batch, or in a transaction of its own (*own,
 * ended with ad_pg_auto_end). */
ad_err ad_pg_begin_seq_write(struct ad_conn *c, int *own, int64_t *seq)
{
    ad_err e = ad_pg_auto_begin(c, own);
    if (e != AD_E_OK)
        return e;
    e = next_seq(c, seq);
    return e != AD_E_OK ? ad_pg_auto_end(c, *own, e) : AD_E_OK;
}

/*
 * Keep the pool exact after job was written: its old row leaves the pool, and if it is now a queued job the
 * pool's lease query would find, it goes in at its place, unless it ranks after the pool's last job and the
 * pool does not hold the whole queue (it is then beyond the head the pool holds, as the rows never read are).
 * A job just inserted has its turn from the server (PG_TURN_EXPR), not known here. It ranks after every job of a
 * higher priority and, its turn being past its group's last, after every job of its own group at its priority:
 * when the pool holds only such jobs (one group, the common case), the new job is beyond the pool's head. Otherwise
 * its place is not known, so the pool is dropped, and the next lease reads the head again.
 */
static int inserted_after_pool(const struct pg_pool *pl, const struct ad_job *job)
{
    for (size_t i = 0; i < pl->n; i++) {
        const struct ad_job *r = pl->rows[i];
        int same_group =
            r->group == NULL ? job->group == NULL : job->group != NULL && strcmp(r->group, job->group) == 0;
        if (r->priority < job->priority || (r->priority == job->priority && !same_group))
            return 0;
    }
    return 1;
}

static void pool_note(struct ad_conn *c, const struct ad_job *job, int insert)
{
    struct pg_pool *pl = &c->pool;
    if (!pl->valid)
        return;
    for (size_t i = 0; i < pl->n; i++)
        if (strcmp(pl->rows[i]->id, job->id) == 0) {
            ad_job_free(pl->rows[i]);
            memmove(pl->rows + i, pl->rows + i + 1, (pl->n - i - 1) * sizeof(*pl->rows));
            pl->n--;
            break;
        }
    if (job->status != AD_QUEUED || job->deps > 0 || strcmp(job->tenant, pl->tenant) != 0 ||
        (job->run_at != 0 && job->run_at > pl->horizon))
        return;
    size_t t = 0;
    while (t < pl->ntypes && strcmp(pl->type[t], job->type) != 0)
        t++;
    if (t == pl->ntypes)
        return;
    if (insert) {
        if (pl->exhaustive || !inserted_after_pool(pl, job))
            pool_drop(pl);
        return;
    }
    size_t at = pl->n;
    while (at > 0 && ad_lease_before(job, pl->rows[at - 1]))
        at--;
    if (at == pl->n && !pl->exhaustive)
        return;
    if (pl->n == pl->cap) {
        pl->cap = pl->cap ? pl->cap * 2 : 64;
        pl->rows = ad_realloc(pl->rows, pl->cap * sizeof(*pl->rows));
    }
    memmove(pl->rows + at + 1, pl->rows + at, (pl->n - at) * sizeof(*pl->rows));
    pl->rows[at] = ad_job_dup(job);
    pl->n++;
}

/* Insert (ST_INSERT) or update (ST_UPDATE) every column of job with the batch's next seq, and remember it for
 * the commit's announcement. seq and cseq come from the counter: cseq is the seq of the insert. */
static ad_err write_job(struct ad_conn *c, struct ad_job *job, enum pg_stmt id)
{
    int own;
    int64_t seq;
    ad_err e = ad_pg_begin_seq_write(c, &own, &seq);
    if (e != AD_E_OK)
        return e;
    struct pg_params p = {0};
    ad_pg_param_job(&p, job, seq);
    int insert = id == ST_INSERT;
    prefetch_drop(c, job->id);
    int64_t started = job->started_seq == AD_SEQ_OF_THIS_WRITE ? seq : job->started_seq;
    if (!insert)
        ad_pg_param_TIME(&p, started); /* $33 */
    else
        ad_pg_param_TEXT(&p, job->group != NULL ? job->group : ""); /* $33 */
    ad_pg_param_INT(&p, job->deps);                                 /* $34 */
    if (insert) {
        ad_pg_param_TEXT(&p, job->depends_on);  /* $35 */
        ad_pg_param_INT(&p, job->dep_run);      /* $36 */
        ad_pg_param_TEXT(&p, job->batch_id);    /* $37 */
        ad_pg_param_TEXT(&p, job->traceparent); /* $38 */
        ad_pg_param_TEXT(&p, job->tracestate);  /* $39 */
        ad_pg_param_TEXT(&p, job->schedule);    /* $40 */
    }
    int64_t turn = 0; /* pg_turn.c: one past the group's last insert in the transaction, when that is known */
    int given = insert && ad_pg_turn_next(c, job, seq, &turn);
    if (given)
        ad_pg_param_INT64(&p, turn); /* $41 */
    else if (!insert)
        ad_pg_turns_forget(c, job->tenant, job->type);
    e = ad_pg_send_write(c, given ? ST_INSERT_TURN : id, &p, insert ? (given ? CHECK_NONE : CHECK_TURN) : CHECK_ROW,
                         insert ? "insert job" : "update job");
    if (e == AD_E_OK && insert && !given)
        ad_pg_turn_sent(c, job, seq);
    if (e == AD_E_OK)
        ids_add(c, job);
    e = ad_pg_auto_end(c, own, e);
    if (e == AD_E_OK) {
        job->seq = seq;
        if (insert)
            job->cseq = job->created_seq = seq, job->turn = given ? turn : job->turn;
        else
            job->started_seq = started;
        if (c->in_tx)
            pool_note(c, job, insert);
    }
    return e;
}

static ad_err pg_job_insert(struct ad_conn *c, struct ad_job *job)
{
    return write_job(c, job, ST_INSERT);
}

/*
 * Inside a batch the update is only sent, so a missing row is found at the next collection: it poisons the
 * batch with AD_E_NOT_FOUND. Every caller has read the job in the same transaction, under the write lock,
 * so the row cannot be missing; outside a transaction the answer is AD_E_NOT_FOUND as in SQLite.
 */
static ad_err pg_job_update(struct ad_conn *c, struct ad_job *job)
{
    return write_job(c, job, ST_UPDATE);
}

/*
 * Run statement id and read every row of its result into a new array of elem-byte elements at *items (read
 * fills one from a row), *n of them. The array has room for one more, so it is never empty.
 */
ad_err ad_pg_fetch_rows(struct ad_conn *c, enum pg_stmt id, const struct pg_params *p, void *items, size_t *n,
                        size_t elem, void (*read)(const PGresult *r, int row, void *slot), const char *what)
{
    PGresult *r;
    ad_err e = ad_pg_query(c, id, p, &r, what);
    if (e != AD_E_OK)
        return e;
    int rows = PQntuples(r);
    char *arr = ad_calloc((size_t)rows + 1, elem); /* the caller's array: its type is the caller's own */
    for (int i = 0; i < rows; i++)
        read(r, i, arr + (size_t)i * elem);
    memcpy(items, &arr, sizeof(arr));
    *n = (size_t)rows;
    PQclear(r);
    return AD_E_OK;
}

static void read_job_slot(const PGresult *r, int row, void *slot)
{
    *(struct ad_job **)slot = ad_pg_read_job(r, row);
}

/* Run a PG_SELECT_JOB statement into out. */
static ad_err fetch_jobs(struct ad_conn *c, enum pg_stmt id, const struct pg_params *p, struct ad_job_list *out,
                         const char *what)
{
    *out = (struct ad_job_list){0};
    return ad_pg_fetch_rows(c, id, p, &out->items, &out->n, sizeof(*out->items), read_job_slot, what);
}

/*
 * Read job id ahead, inside the open batch: the read is only sent, and a job_get of id later in the batch takes
 * its result, unless the job has been written since. The writer sends the reads of a whole chunk of operations
 * at once, before applying any of them, so that they cost one round trip instead of one each.
 */
static void pg_job_prefetch(struct ad_conn *c, const char *id)
{
    if (!c->in_tx || c->poison != AD_E_OK || c->broken || c->npre >= PG_MAX_PREFETCH)
        return;
    for (size_t i = c->npre; i-- > 0;)
        if (c->pre[i].state != PRE_STALE && strcmp(c->pre[i].id, id) == 0)
            return;
    if (c->npend >= PG_MAX_PENDING && (ad_pg_send_flush(c) != AD_E_OK || ad_pg_drain(c, 0) != AD_E_OK))
        return;
    const char *v[2] = {id, NULL};
    if (ad_pg_send_stmt(c, ST_GET, 2, v, CHECK_PREFETCH, "read a job ahead") != AD_E_OK) {
        if (c->poison == AD_E_OK)
            c->poison = AD_E_UNAVAILABLE;
        return;
    }
    if (c->npre == c->pre_cap) {
        c->pre_cap = c->pre_cap ? c->pre_cap * 2 : 64;
        c->pre = ad_realloc(c->pre, c->pre_cap * sizeof(*c->pre));
    }
    c->pre[c->npre] = (struct pg_prefetch){.id = ad_strdup(id), .state = PRE_SENT};
    c->pend[c->head + c->npend - 1].stmt = (int)c->npre++;
}

/* job_get from a read sent ahead: 1 with *e set when one answers it, 0 when none does. */
static int prefetched_get(struct ad_conn *c, const char *tenant, const char *id, struct ad_job **out, ad_err *e)
{
    struct pg_prefetch *pf = NULL;
    for (size_t i = c->npre; i-- > 0 && pf == NULL;)
        if (c->pre[i].state != PRE_STALE && strcmp(c->pre[i].id, id) == 0)
            pf = &c->pre[i];
    if (pf == NULL || c->poison != AD_E_OK)
        return 0;
    if (pf->state == PRE_SENT) {
        /* Its result comes after those of everything sent before it: collect up to it. */
        *e = ad_pg_send_flush(c);
        while (*e == AD_E_OK && pf->state == PRE_SENT && c->npend > 0)
            *e = ad_pg_collect(c, NULL);
        if (*e != AD_E_OK)
            return 1;
        if (pf->state != PRE_READY)
            return 0;
    }
    if (PQntuples(pf->res) == 0) {
        *e = AD_E_NOT_FOUND;
        return 1;
    }
    struct ad_job *j = ad_pg_read_job(pf->res, 0);
    if (tenant != NULL && strcmp(j->tenant, tenant) != 0) {
        ad_job_free(j);
        *e = AD_E_NOT_FOUND;
        return 1;
    }
    *out = j;
    *e = AD_E_OK;
    return 1;
}

static ad_err pg_job_get(struct ad_conn *c, const char *tenant, const char *id, struct ad_job **out)
{
    *out = NULL;
    ad_err pe;
    if (c->in_tx && prefetched_get(c, tenant, id, out, &pe))
        return pe;
    struct pg_params p = {0};
    ad_pg_param_TEXT(&p, id);
    ad_pg_param_TEXT(&p, tenant);
    struct ad_job_list l;
    ad_err e = fetch_jobs(c, ST_GET, &p, &l, "get job");
    return ad_job_list_one(&l, e, out);
}

static ad_err pg_job_list(struct ad_conn *c, const struct ad_list_query *q, struct ad_job_list *out)
{
    *out = (struct ad_job_list){0};
    if (q->tenant == NULL) {
        ad_error("store: job_list without a tenant");
        return AD_E_INTERNAL;
    }
    int variant = (q->has_status ? PG_LIST_STATUS : 0) | (q->type != NULL ? PG_LIST_TYPE : 0) |
                  (q->updated_after != 0 ? PG_LIST_UPDATED : 0);
    /* Every variant numbers its parameters alike (their types are declared), so all are passed. */
    struct pg_params p = {0};
    ad_pg_param_TEXT(&p, q->tenant);
    ad_pg_param_INT64(&p, q->before_cseq > 0 ? q->before_cseq : INT64_MAX);
    ad_pg_param_INT(&p, (int)q->status);
    ad_pg_param_TEXT(&p, q->type);
    ad_pg_param_INT64(&p, q->updated_after);
    ad_pg_param_INT(&p, q->limit);
    return fetch_jobs(c, (enum pg_stmt)(ST_LIST + variant), &p, out, "list jobs");
}

static ad_err pg_job_changes(struct ad_conn *c, const char *tenant, int64_t since, int limit, struct ad_job_list *out)
{
    struct pg_params p = {0};
    if (tenant != NULL)
        ad_pg_param_TEXT(&p, tenant);
    ad_pg_param_INT64(&p, since);
    ad_pg_param_INT(&p, limit);
    return fetch_jobs(c, tenant != NULL ? ST_CHANGES : ST_CHANGES_ALL, &p, out, "job changes");
}

/* One query for all the types, each type's head in its own order; the jobs it returns stay locked until the
 * transaction ends. */
static ad_err lease_read(struct ad_conn *c, const char *tenant, const char *const *types, size_t ntypes, int64_t now,
                         int limit, struct ad_job_list *out);
/*
 * Serve a lease from the pool when it answers it exactly: it holds the head of the same queue, due by now, and
 * limit jobs due by now are in it, or it holds the whole queue. 1 with *out filled (the jobs leave the pool),
 * else 0.
 */
static int pool_take(struct pg_pool *pl, const char *tenant, const char *arr, int64_t now, int limit,
                     struct ad_job_list *out)
{
    if (!pl->valid || now > pl->horizon || strcmp(pl->tenant, tenant) != 0 || strcmp(pl->types, arr) != 0)
        return 0;
    size_t due = 0;
    for (size_t i = 0; i < pl->n && due < (size_t)limit; i++)
        due += pl->rows[i]->run_at == 0 || pl->rows[i]->run_at <= now;
    if (due < (size_t)limit && !pl->exhaustive)
        return 0;
    out->items = ad_calloc(due + 1, sizeof(*out->items));
    out->n = 0;
    size_t keep = 0;
    for (size_t i = 0; i < pl->n; i++) {
        struct ad_job *j = pl->rows[i];
        if (out->n < due && (j->run_at == 0 || j->run_at <= now))
            out->items[out->n++] = j;
        else
            pl->rows[keep++] = j;
    }
    pl->n = keep;
    return 1;
}

/*
 * Inside a batch, the first lease reads the head of the queue, beyond what it takes, into the pool (locked like
 * the jobs it takes), and the leases after it take from the pool, which every write of a job keeps exact: one
 * round trip for the batch's leases of one queue instead of one each. Outside a batch, or when the pool cannot
 * answer, a lease reads what it takes.
 */
static ad_err pg_job_leasable(struct ad_conn *c, const char *tenant, const char *const *types, size_t ntypes,
                              int64_t now, int limit, struct ad_job_list *out)
{
    const char **uniq = ad_calloc(ntypes + 1, sizeof(*uniq));
    size_t nuniq = 0;
    for (size_t i = 0; i < ntypes; i++) {
        size_t k = 0;
        while (k < nuniq && strcmp(uniq[k], types[i]) != 0)
            k++;
        if (k == nuniq)
            uniq[nuniq++] = types[i];
    }
    ad_err e = lease_read(c, tenant, uniq, nuniq, now, limit, out);
    free(uniq);
    if (e == AD_E_OK && nuniq > 1)
        ad_lease_merge(out, limit);
    return e;
}

/* pg_job_leasable of distinct types. Only a lease of one type keeps a pool: the merged order of several is not one
 * that a job written later can be placed in. */
static ad_err lease_read(struct ad_conn *c, const char *tenant, const char *const *types, size_t ntypes, int64_t now,
                         int limit, struct ad_job_list *out)
{
    char *arr = ad_pg_text_array(types, ntypes);
    int pool = c->in_tx && limit > 0 && ntypes == 1;
    if (pool && pool_take(&c->pool, tenant, arr, now, limit, out)) {
        free(arr);
        return AD_E_OK;
    }
    int want = limit > 0 ? limit : 0;
    int64_t until = now;
    if (pool) {
        want = limit + PG_POOL_ROWS;
        until = now + PG_POOL_HORIZON_MS;
    }
    struct pg_params p = {0};
    ad_pg_param_TEXT(&p, tenant);
    ad_pg_param_TEXT(&p, arr);
    ad_pg_param_INT64(&p, until);
    ad_pg_param_INT(&p, want);
    struct ad_job_list got;
    ad_err e = fetch_jobs(c, ST_LEASABLE, &p, pool ? &got : out, "leasable jobs");
    if (e != AD_E_OK || !pool) {
        free(arr);
        return e;
    }
    struct pg_pool *pl = &c->pool;
    pool_drop(pl);
    pl->valid = 1;
    pl->tenant = ad_strdup(tenant);
    pl->types = arr;
    pl->type = ad_calloc(ntypes + 1, sizeof(*pl->type));
    for (size_t i = 0; i < ntypes; i++)
        pl->type[i] = ad_strdup(types[i]);
    pl->ntypes = ntypes;
    pl->horizon = until;
    pl->exhaustive = got.n < (size_t)want;
    if (pl->cap < got.n) {
        pl->cap = got.n;
        pl->rows = ad_realloc(pl->rows, pl->cap * sizeof(*pl->rows));
    }
    if (got.n > 0) /* an empty queue: rows and items may both be NULL, which memcpy may not be given */
        memcpy(pl->rows, got.items, got.n * sizeof(*got.items));
    pl->n = got.n;
    got.n = 0;
    ad_job_list_free(&got);
    if (pool_take(pl, tenant, pl->types, now, limit, out))
        return AD_E_OK;
    /* Jobs due later than now fill the head the pool holds: read just what this lease takes. */
    pool_drop(pl);
    arr = ad_pg_text_array(types, ntypes);
    p = (struct pg_params){0};
    ad_pg_param_TEXT(&p, tenant);
    ad_pg_param_TEXT(&p, arr);
    ad_pg_param_INT64(&p, now);
    ad_pg_param_INT(&p, limit);
    e = fetch_jobs(c, ST_LEASABLE, &p, out, "leasable jobs");
    free(arr);
    return e;
}

/* Never from the pool: it holds the head of the queue with every group, and the jobs a lease of a group-limited type
 * leaves there must stay in it. The jobs read are locked, the skipped groups' are not. */
static ad_err pg_job_leasable_except(struct ad_conn *c, const char *tenant, const char *type, int64_t now,
                                     const char *const *except, size_t nexcept, int walk, int limit,
                                     struct ad_job_list *out)
{
    char *arr = ad_pg_text_array(except, nexcept);
    struct pg_params p = {0};
    ad_pg_param_TEXT(&p, tenant);
    ad_pg_param_TEXT(&p, type);
    ad_pg_param_INT64(&p, now);
    ad_pg_param_INT(&p, limit);
    ad_pg_param_TEXT(&p, arr);
    ad_pg_param_INT(&p, walk);
    ad_err e = fetch_jobs(c, ST_LEASABLE_EXCEPT, &p, out, "leasable jobs");
    free(arr);
    return e;
}

static ad_err pg_job_running(struct ad_conn *c, struct ad_job_list *out)
{
    struct pg_params p = {0};
    return fetch_jobs(c, ST_RUNNING, &p, out, "running jobs");
}

static ad_err pg_job_scheduled(struct ad_conn *c, int64_t run_at, int64_t cseq, int limit, struct ad_job_list *out)
{
    struct pg_params p = {0};
    ad_pg_param_INT64(&p, run_at);
    ad_pg_param_INT64(&p, cseq);
    ad_pg_param_INT(&p, limit);
    return fetch_jobs(c, ST_SCHEDULED, &p, out, "scheduled jobs");
}

/* The single bigint of statement id's one row (NULL reads 0) into *out. */
static ad_err query_int64(struct ad_conn *c, enum pg_stmt id, const struct pg_params *p, int64_t *out, const char *what)
{
    PGresult *r;
    *out = 0;
    ad_err e = ad_pg_query(c, id, p, &r, what);
    if (e == AD_E_OK && PQntuples(r) == 1 && !PQgetisnull(r, 0, 0))
        *out = ad_pg_col_INT64(r, 0, 0);
    PQclear(r);
    return e;
}

static ad_err pg_job_bulk_page(struct ad_conn *c, const struct ad_bulk_query *q, int64_t after, int64_t *upto,
                               int limit, struct ad_job_list *out, int64_t *next)
{
    *out = (struct ad_job_list){0};
    *next = 0;
    struct pg_params p = {0};
    ad_pg_param_TEXT(&p, q->tenant);
    ad_pg_param_TEXT(&p, q->type);
    ad_err e = AD_E_OK;
    if (*upto == 0 && ((e = query_int64(c, ST_BULK_END, &p, upto, "bulk walk end")) != AD_E_OK || *upto == 0))
        return e;
    ad_pg_param_INT64(&p, after);
    ad_pg_param_INT64(&p, *upto);
    ad_pg_param_INT(&p, limit);
    int64_t hi;
    if ((e = query_int64(c, ST_BULK_SPAN, &p, &hi, "bulk walk span")) != AD_E_OK || hi == 0)
        return e;
    p = (struct pg_params){0};
    ad_pg_param_TEXT(&p, q->tenant);
    ad_pg_param_TEXT(&p, q->type);
    ad_pg_param_INT64(&p, after);
    ad_pg_param_INT64(&p, hi);
    ad_pg_param_INT64(&p, q->now);
    ad_pg_param_INT(&p, (int)q->statuses);
    ad_pg_param_INT64(&p, q->created_before);
    ad_pg_param_INT64(&p, q->created_after);
    ad_pg_param_TEXT(&p, q->group);
    e = fetch_jobs(c, ST_BULK_PAGE, &p, out, "bulk walk page");
    if (e == AD_E_OK)
        *next = hi;
    return e;
}

static ad_err pg_job_unique(struct ad_conn *c, const char *tenant, const char *type, const char *key,
                            struct ad_job **out)
{
    *out = NULL;
    struct pg_params p = {0};
    ad_pg_param_TEXT(&p, tenant);
    ad_pg_param_TEXT(&p, type);
    ad_pg_param_TEXT(&p, key);
    struct ad_job_list l;
    ad_err e = fetch_jobs(c, ST_UNIQUE, &p, &l, "job by unique key");
    return ad_job_list_one(&l, e, out);
}

static ad_err pg_job_set_payload(struct ad_conn *c, const char *id, const char *payload)
{
    prefetch_drop(c, id);
    struct pg_params p = {0};
    ad_pg_param_TEXT(&p, id);
    ad_pg_param_TEXT(&p, payload);
    return ad_pg_write1(c, ST_SET_PAYLOAD, &p, CHECK_ROW, "set payload");
}

/* Run a sweep statement with (cutoff, limit) and wait for it: the caller needs the count. Adds it to *n. */
static ad_err sweep_step(struct ad_conn *c, enum pg_stmt id, int64_t cutoff, int limit, int *n, const char *what)
{
    struct pg_params p = {0};
    ad_pg_param_INT64(&p, cutoff);
    ad_pg_param_INT(&p, limit);
    PGresult *r;
    ad_err e = ad_pg_query(c, id, &p, &r, what);
    if (e == AD_E_OK)
        *n += (int)strtol(PQcmdTuples(r), NULL, 10);
    PQclear(r);
    return e;
}

/* One sweep statement, in the open batch or in a transaction of its own; *done_out = rows deleted. */
ad_err ad_pg_sweep_alone(struct ad_conn *c, enum pg_stmt id, int64_t before, int limit, int *done_out, const char *what)
{
    *done_out = 0;
    int own;
    ad_err e = ad_pg_auto_begin(c, &own);
    if (e != AD_E_OK)
        return e;
    int n = 0;
    e = ad_pg_auto_end(c, own, sweep_step(c, id, before, limit, &n, what));
    if (e == AD_E_OK)
        *done_out = n;
    return e;
}

/* The trigger jobs_tombstone_events empties the event logs of the jobs tombstoned here; foreign keys take
 * attempts and events away with the deleted jobs. acceptd_counter keeps seq above the deleted rows. */
static ad_err pg_sweep(struct ad_conn *c, int64_t now, int64_t tombstone_ms, int limit, int *done_out)
{
    *done_out = 0;
    int own;
    ad_err e = ad_pg_auto_begin(c, &own);
    if (e != AD_E_OK)
        return e;
    int tombstoned = 0, deleted = 0;
    prefetch_drop(c, NULL);
    pool_drop(&c->pool);
    ad_pg_turns_forget(c, NULL, NULL);
    e = sweep_step(c, ST_TOMBSTONE, now, limit, &tombstoned, "tombstone expired jobs");
    if (e == AD_E_OK)
        e = sweep_step(c, ST_DELETE, now - tombstone_ms, limit, &deleted, "delete tombstones");
    e = ad_pg_auto_end(c, own, e);
    if (e == AD_E_OK)
        *done_out = tombstoned + deleted;
    return e;
}

/* The counter: inside a batch, what it will be at commit. */
static ad_err pg_max_seq(struct ad_conn *c, int64_t *out)
{
    *out = 0;
    if (c->in_tx) {
        *out = c->seq;
        return AD_E_OK;
    }
    struct pg_params p = {0};
    PGresult *r;
    ad_err e = ad_pg_query(c, ST_MAX_SEQ, &p, &r, "max seq");
    if (e == AD_E_OK && PQntuples(r) == 1)
        *out = ad_pg_col_INT64(r, 0, 0);
    PQclear(r);
    return e;
}

static void pg_disconnect(struct ad_conn *c)
{
    if (c == NULL)
        return;
    PQfinish(c->pg);
    ids_clear(c);
    ad_hook_cache_drop(&c->hooks);
    tx_end(c);
    free(c->pool.rows);
    free(c->pre);
    free(c->ids);
    free(c->pend);
    free(c);
}

static struct ad_conn *pg_connect(struct ad_store *s, char *err, size_t errlen)
{
    struct pg_store *ps = (struct pg_store *)s;
    PGconn *pg = ad_pg_dial(ps, err, errlen);
    if (pg == NULL)
        return NULL;
    if (!PQenterPipelineMode(pg)) {
        snprintf(err, errlen, "enter pipeline mode: %s", PQerrorMessage(pg));
        PQfinish(pg);
        return NULL;
    }
    struct ad_conn *c = ad_calloc(1, sizeof(*c));
    c->s = ps;
    c->pg = pg;
    return c;
}

/* ---- opening ---- */

static void pg_close(struct ad_store *s)
{
    struct pg_store *ps = (struct pg_store *)s;
    if (ps == NULL)
        return;
    free(ps->url);
    free(ps);
}

static const struct ad_store_ops pg_ops = {
    .name = "postgresql",
    .tx_blocks_others = 1,
    .reads_may_block = 1,
    .connect = pg_connect,
    .disconnect = pg_disconnect,
    .begin = pg_begin,
    .commit = pg_commit,
    .rollback = pg_rollback,
    .reclaim = pg_reclaim,
    .changes = pg_changes,
    .savepoint = pg_savepoint,
    .release = pg_release,
    .rollback_to = pg_rollback_to,
    .job_insert = pg_job_insert,
    .job_update = pg_job_update,
    .job_get = pg_job_get,
    .job_prefetch = pg_job_prefetch,
    .job_list = pg_job_list,
    .job_changes = pg_job_changes,
    .job_leasable = pg_job_leasable,
    .job_leasable_except = pg_job_leasable_except,
    .job_running = pg_job_running,
    .job_scheduled = pg_job_scheduled,
    .job_bulk_page = pg_job_bulk_page,
    .job_unique = pg_job_unique,
    .job_set_payload = pg_job_set_payload,
    .sweep = pg_sweep,
    .max_seq = pg_max_seq,
    .job_counts = ad_pg_job_counts,
    .artifact_write = ad_pg_artifact_write,
    .artifact_progress = ad_pg_artifact_progress,
    .artifact_view = ad_pg_artifact_view,
    .artifact_read = ad_pg_artifact_read,
    .artifact_gc = ad_pg_artifact_gc,
    .attempt_add = ad_pg_attempt_add,
    .attempt_list = ad_pg_attempt_list,
    .idem_get = ad_pg_idem_get,
    .idem_put = ad_pg_idem_put,
    .idem_sweep = ad_pg_idem_sweep,
    .event_append = ad_pg_event_append,
    .events_after = ad_pg_events_after,
    .snapshot_begin = ad_pg_snapshot_begin,
    .snapshot_end = ad_pg_snapshot_end,
    .queue_get = ad_pg_queue_get,
    .queue_put = ad_pg_queue_put,
    .queue_list = ad_pg_queue_list,
    .queue_counts = ad_pg_queue_counts,
    .queue_running = ad_pg_queue_running,
    .queue_group_running = ad_pg_queue_group_running,
    .queue_group_window = ad_pg_queue_group_window,
    .queue_group_took = ad_pg_queue_group_took,
    .webhook_put = ad_pg_webhook_put,
    .webhook_get = ad_pg_webhook_get,
    .webhook_list = ad_pg_webhook_list,
    .webhook_delete = ad_pg_webhook_delete,
    .delivery_insert = ad_pg_delivery_insert,
    .delivery_update = ad_pg_delivery_update,
    .delivery_get = ad_pg_delivery_get,
    .delivery_due = ad_pg_delivery_due,
    .delivery_list = ad_pg_delivery_list,
    .delivery_abandon = ad_pg_delivery_abandon,
    .delivery_sweep = ad_pg_delivery_sweep,
    .delivery_claim = ad_pg_delivery_claim,
    .delivery_release = ad_pg_delivery_release,
    .feed_open = ad_pg_feed_open,
    .feed_wait = ad_pg_feed_wait,
    .feed_close = ad_pg_feed_close,
    .close = pg_close,
    .queue_group_queued = ad_pg_queue_group_queued,
    .dep_add = ad_pg_dep_add,
    .dep_take = ad_pg_dep_take,
    .batch_insert = ad_pg_batch_insert,
    .batch_update = ad_pg_batch_update,
    .batch_get = ad_pg_batch_get,
    .batch_sweep = ad_pg_batch_sweep,
    .batch_jobs = ad_pg_batch_jobs,
    .schedule_put = ad_pg_schedule_put,
    .schedule_get = ad_pg_schedule_get,
    .schedule_list = ad_pg_schedule_list,
    .schedule_delete = ad_pg_schedule_delete,
    .schedule_due = ad_pg_schedule_due,
};

struct ad_store *ad_store_pg_open(const char *url, char *err, size_t errlen)
{
    struct pg_store *s = ad_calloc(1, sizeof(*s));
    s->base.ops = &pg_ops;
    s->url = ad_strdup(url);
    uint8_t raw[8];
    ad_random_bytes(raw, sizeof(raw));
    ad_hex_encode(raw, sizeof(raw), s->node);
    PGconn *pg = ad_pg_dial(s, err, errlen);
    if (pg == NULL || ad_pg_migrate(pg, err, errlen) != 0) {
        PQfinish(pg);
        pg_close(&s->base);
        return NULL;
    }
    PQfinish(pg);
    return &s->base;
}
