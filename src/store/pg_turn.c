/*
 * pg_turn.c - the turns of a batch's inserts (docs/protocol.md "Groups and fairness") without a lookup each.
 *
 * A job's turn is one past the last turn of its group's due queued jobs at its priority, or the turn of the queue's
 * next job when the group has none (PG_TURN_EXPR): the server reads it from jobs_group under the write lock. Read for
 * every insert, it doubled the server's time per submit (docs/benchmarks.md). But within one transaction, which
 * holds the cluster's write lock, the last due turn of a group changes only by what the transaction itself writes:
 * so the first insert of a group runs the expression and returns the turn it got (RETURNING, collected by
 * pg_conn.c as CHECK_TURN), and each next insert of the same tenant, type, priority and group, due at once, is sent
 * with one past the previous insert's turn as a parameter (ST_INSERT_TURN), which is what the expression would give:
 * the previous insert is then the group's last due queued job. Anything else that could change it forgets the
 * turns: an update of a job of the type (a lease, a job queued again with its own turn, a cancel), a sweep, an
 * operation undone, the transaction's end. A scheduled insert leaves them: it is not due, so it is no group's last
 * due job. The one change not seen is a scheduled job of the group coming due between two inserts of one batch
 * (milliseconds); the later insert may then go before it within its group, never past another group's turn.
 * Nothing here is kept across transactions: other nodes write in between.
 */
#include "store/store_pg_int.h"

#include <stdlib.h>
#include <string.h>

static int same_key(const struct pg_turn *t, const struct ad_job *job)
{
    const char *grp = job->group != NULL ? job->group : "";
    return t->priority == job->priority && strcmp(t->grp, grp) == 0 && strcmp(t->type, job->type) == 0 &&
           strcmp(t->tenant, job->tenant) == 0;
}

static void turn_free(struct pg_turn *t)
{
    free(t->tenant);
    free(t->type);
    free(t->grp);
}

void ad_pg_turns_forget(struct ad_conn *c, const char *tenant, const char *type)
{
    size_t keep = 0;
    for (size_t i = 0; i < c->nturns; i++) {
        struct pg_turn *t = &c->turns[i];
        if (tenant == NULL || (strcmp(t->tenant, tenant) == 0 && strcmp(t->type, type) == 0))
            turn_free(t);
        else
            c->turns[keep++] = *t;
    }
    c->nturns = keep;
}

/* Only a queued job due at once is its group's last due job once inserted. */
static int chained(const struct ad_conn *c, const struct ad_job *job)
{
    return c->in_tx && job->status == AD_QUEUED && job->run_at == 0;
}

int ad_pg_turn_next(struct ad_conn *c, const struct ad_job *job, int64_t cseq, int64_t *turn)
{
    if (!chained(c, job))
        return 0;
    struct pg_turn *t = NULL;
    for (size_t i = 0; i < c->nturns && t == NULL; i++)
        if (same_key(&c->turns[i], job))
            t = &c->turns[i];
    if (t == NULL)
        return 0;
    if (!t->known) {
        /* The previous insert's turn is still on its way: collect up to it (one wait for the batch's inserts). */
        if (c->poison != AD_E_OK || ad_pg_send_flush(c) != AD_E_OK)
            return 0;
        while (!t->known && c->npend > 0 && c->poison == AD_E_OK)
            if (ad_pg_collect(c, NULL) != AD_E_OK)
                return 0;
        if (!t->known)
            return 0;
    }
    *turn = ++t->turn;
    t->cseq = cseq;
    return 1;
}

void ad_pg_turn_sent(struct ad_conn *c, const struct ad_job *job, int64_t cseq)
{
    if (!chained(c, job))
        return;
    struct pg_turn *t = NULL;
    for (size_t i = 0; i < c->nturns && t == NULL; i++)
        if (same_key(&c->turns[i], job))
            t = &c->turns[i];
    if (t == NULL) {
        if (c->nturns == PG_TURNS)
            return;
        t = &c->turns[c->nturns++];
        t->tenant = ad_strdup(job->tenant);
        t->type = ad_strdup(job->type);
        t->grp = ad_strdup(job->group != NULL ? job->group : "");
        t->priority = job->priority;
    }
    t->known = 0;
    t->cseq = cseq;
}

void ad_pg_turn_returned(struct ad_conn *c, int64_t cseq, int64_t turn)
{
    for (size_t i = 0; i < c->nturns; i++)
        if (!c->turns[i].known && c->turns[i].cseq == cseq) {
            c->turns[i].turn = turn;
            c->turns[i].known = 1;
        }
}
