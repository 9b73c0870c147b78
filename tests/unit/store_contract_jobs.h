/*
 * store_contract_jobs.h - the store contract's tests (store_contract.h) of jobs: every field, lists and keyset pages,
 * bulk walks, changes, the lease order (priority, groups' turns, per-group limits), running and scheduled jobs, counts,
 * queue settings. Included by store_contract.h only, after its helpers.
 */
#ifndef AD_STORE_CONTRACT_JOBS_H
#define AD_STORE_CONTRACT_JOBS_H

/* ---- jobs ---- */

static void sc_test_every_field_round_trips(void **state)
{
    struct fx *f = *state;
    const struct ad_store_ops *ops = f->s->ops;
    struct ad_job *j = new_full_job();
    sc_insert(f, j);
    assert_true(j->seq > 0);
    assert_true(j->cseq > 0);
    assert_int_equal(j->created_seq, j->seq);

    /* Read back on the writer's connection and through a second one: committed, and every column mapped. */
    struct ad_conn *r = sc_connect(f->s);
    struct ad_conn *conns[2] = {f->c, r};
    for (int i = 0; i < 2; i++) {
        struct ad_job *g = sc_get(f, conns[i], "t1", "job_full");
        assert_job_equal(g, j);
        assert_int_equal(g->seq, j->seq);
        assert_int_equal(g->cseq, j->cseq);
        assert_int_equal(g->created_seq, j->seq);
        ad_job_free(g);
    }

    /* Update: the changeable fields written, seq moves, cseq stays; NULLs written back as absent. */
    int64_t first = j->seq, cseq = j->cseq;
    j->status = AD_SUCCEEDED;
    j->progress = -1;
    ad_job_set(&j->result, NULL);
    ad_job_set(&j->message, NULL);
    ad_job_set(&j->lease_id, NULL);
    j->lease_expires_at = 0;
    j->finished_at = T0 + 50;
    assert_int_equal(ops->job_update(f->c, j), AD_E_OK);
    assert_true(j->seq > first);
    struct ad_job *g = sc_get(f, r, NULL, "job_full");
    assert_job_equal(g, j);
    assert_int_equal(g->progress, -1);
    assert_null(g->result);
    assert_null(g->message);
    assert_null(g->lease_id);
    assert_int_equal(g->lease_expires_at, 0);
    assert_int_equal(g->seq, j->seq);
    assert_int_equal(g->cseq, cseq);
    assert_int_equal(g->created_seq, first);
    ad_job_free(g);
    assert_int_equal(sc_max_seq(f, r), j->seq);
    sc_assert_not_found(f, r, "t2", "job_full");
    ops->disconnect(r);
    ad_job_free(j);
}

static void sc_test_absent_fields_read_back_absent(void **state)
{
    struct fx *f = *state;
    struct ad_job *j = ad_job_new();
    ad_job_set(&j->id, "job_min");
    ad_job_set(&j->tenant, "t1");
    ad_job_set(&j->type, "a");
    ad_job_set(&j->payload, "{}");
    sc_insert(f, j);
    ad_job_set(&j->id, "job_nopayload");
    ad_job_set(&j->payload, NULL);
    sc_insert(f, j);
    ad_job_free(j);

    struct ad_job *g = sc_get(f, f->c, "t1", "job_min");
    assert_job_minimal(g);
    assert_string_equal(g->payload, "{}");
    ad_job_free(g);
    g = sc_get(f, f->c, "t1", "job_nopayload");
    assert_job_minimal(g);
    assert_null(g->payload);
    ad_job_free(g);
}

static void sc_test_get_is_scoped_by_tenant(void **state)
{
    struct fx *f = *state;
    sc_insert_new(f, "job_a", "t1", "a", AD_QUEUED, AD_PRIO_NORMAL, 0);
    struct ad_job *g = sc_get(f, f->c, "t1", "job_a");
    assert_string_equal(g->tenant, "t1");
    ad_job_free(g);
    sc_assert_not_found(f, f->c, "t2", "job_a");
    sc_assert_not_found(f, f->c, "t1", "job_nope");
    g = sc_get(f, f->c, NULL, "job_a");
    assert_string_equal(g->id, "job_a");
    ad_job_free(g);
}

/* Outside begin/commit each write is a transaction of its own: a duplicate id fails and keeps the first job,
 * an update of a job that is not there is not found; failed writes leave gaps in seq, never repeats. */
static void sc_test_writes_outside_a_transaction(void **state)
{
    struct fx *f = *state;
    int64_t a = sc_insert_new(f, "job_a", "t1", "a", AD_QUEUED, AD_PRIO_NORMAL, 0);
    int64_t b = sc_insert_new(f, "job_b", "t1", "a", AD_QUEUED, AD_PRIO_NORMAL, 0);
    struct ad_job *j = new_job("job_a", "t2", "b", AD_QUEUED, AD_PRIO_NORMAL);
    j->seq = 0;
    assert_int_equal(f->s->ops->job_insert(f->c, j), AD_E_INTERNAL);
    assert_int_equal(j->seq, 0);
    ad_job_free(j);
    struct ad_job *g = sc_get(f, f->c, NULL, "job_a");
    assert_string_equal(g->tenant, "t1");
    ad_job_free(g);
    g = sc_get(f, f->c, NULL, "job_b");
    int64_t b_cseq = g->cseq;
    ad_job_free(g);

    struct ad_job *ghost = new_job("job_ghost", "t1", "a", AD_QUEUED, AD_PRIO_NORMAL);
    assert_int_equal(f->s->ops->job_update(f->c, ghost), AD_E_NOT_FOUND);
    assert_int_equal(ghost->seq, 0);
    sc_assert_not_found(f, f->c, NULL, "job_ghost");
    /* An update finds its row by id (and cseq where the backend keys on it): another job's cseq changes nothing. */
    ghost->cseq = b_cseq;
    ghost->status = AD_FAILED;
    assert_int_equal(f->s->ops->job_update(f->c, ghost), AD_E_NOT_FOUND);
    sc_assert_not_found(f, f->c, NULL, "job_ghost");
    g = sc_get(f, f->c, "t1", "job_b");
    assert_int_equal(g->status, AD_QUEUED);
    assert_int_equal(g->seq, b);
    ad_job_free(g);
    ad_job_free(ghost);
    int64_t c = sc_insert_new(f, "job_c", "t1", "a", AD_QUEUED, AD_PRIO_NORMAL, 0);
    assert_true(c > b && b > a);
}

static void sc_test_update_writes_fields_and_moves_seq(void **state)
{
    struct fx *f = *state;
    struct ad_job *a = new_job("job_a", "t1", "a", AD_QUEUED, AD_PRIO_NORMAL);
    struct ad_job *b = new_job("job_b", "t1", "a", AD_QUEUED, AD_PRIO_NORMAL);
    sc_insert(f, a);
    sc_insert(f, b);
    assert_true(b->seq > a->seq);
    assert_true(b->cseq > a->cseq);
    int64_t cseq = a->cseq;

    a->status = AD_SUCCEEDED;
    a->progress = 100;
    ad_job_set(&a->result, "{\"r\":2}");
    a->finished_at = T0 + 50;
    assert_int_equal(f->s->ops->job_update(f->c, a), AD_E_OK);
    assert_true(a->seq > b->seq);
    int64_t first = a->seq;
    assert_int_equal(f->s->ops->job_update(f->c, a), AD_E_OK);
    assert_true(a->seq > first);

    struct ad_job *g = sc_get(f, f->c, "t1", "job_a");
    assert_int_equal(g->status, AD_SUCCEEDED);
    assert_int_equal(g->progress, 100);
    assert_string_equal(g->result, "{\"r\":2}");
    assert_int_equal(g->finished_at, T0 + 50);
    assert_int_equal(g->seq, a->seq);
    assert_int_equal(g->cseq, cseq);
    ad_job_free(g);
    assert_int_equal(sc_max_seq(f, f->c), a->seq);
    g = sc_get(f, f->c, "t1", "job_b");
    assert_int_equal(g->status, AD_QUEUED);
    assert_int_equal(g->seq, b->seq);
    ad_job_free(g);
    ad_job_free(a);
    ad_job_free(b);
}

static void sc_test_list_order_filters_and_keyset(void **state)
{
    struct fx *f = *state;
    const char *types[] = {"a", "b", "a", "b", "a"};
    const enum ad_status statuses[] = {AD_QUEUED, AD_RUNNING, AD_RUNNING, AD_QUEUED, AD_SUCCEEDED};
    int64_t cseq[5];
    for (int i = 0; i < 5; i++) {
        char id[16];
        snprintf(id, sizeof(id), "j%d", i);
        struct ad_job *j = new_job(id, "t1", types[i], statuses[i], AD_PRIO_NORMAL);
        j->updated_at = T0 + i * 10;
        sc_insert(f, j);
        cseq[i] = j->cseq;
        ad_job_free(j);
    }
    sc_insert_new(f, "other", "t2", "a", AD_QUEUED, AD_PRIO_NORMAL, 0);

    struct ad_list_query q = {.tenant = "t1", .limit = 50};
    sc_list(f, &q, "j4,j3,j2,j1,j0");
    q.limit = 2;
    sc_list(f, &q, "j4,j3");
    q.before_cseq = cseq[3];
    sc_list(f, &q, "j2,j1");
    q.before_cseq = cseq[1];
    sc_list(f, &q, "j0");
    q.before_cseq = cseq[0];
    sc_list(f, &q, "");

    q = (struct ad_list_query){.tenant = "t1", .limit = 50, .has_status = 1, .status = AD_RUNNING};
    sc_list(f, &q, "j2,j1");
    q.status = AD_QUEUED;
    sc_list(f, &q, "j3,j0");
    q = (struct ad_list_query){.tenant = "t1", .limit = 50, .type = "a"};
    sc_list(f, &q, "j4,j2,j0");
    q.has_status = 1;
    q.status = AD_RUNNING;
    sc_list(f, &q, "j2");
    q = (struct ad_list_query){.tenant = "t1", .limit = 50, .updated_after = T0 + 20};
    sc_list(f, &q, "j4,j3");
    q.type = "b";
    sc_list(f, &q, "j3");
    q.has_status = 1;
    q.status = AD_QUEUED;
    sc_list(f, &q, "j3");
    q = (struct ad_list_query){.tenant = "t2", .limit = 50};
    sc_list(f, &q, "other");
    q = (struct ad_list_query){.tenant = "t3", .limit = 50};
    sc_list(f, &q, "");
}

/* A bulk walk's pages: "id,id|id|..." (pages joined by '|'), walking q with pages of limit; *upto as the walk left it.
 */
static void sc_bulk_walk(struct fx *f, const struct ad_bulk_query *q, int limit, int64_t *upto, const char *want)
{
    char got[512] = "";
    int64_t after = 0, next = 0;
    for (int page = 0;; page++) {
        struct ad_job_list l = {0};
        assert_int_equal(f->s->ops->job_bulk_page(f->c, q, after, upto, limit, &l, &next), AD_E_OK);
        if (next == 0) {
            assert_int_equal(l.n, 0);
            break;
        }
        assert_true(next > after);
        snprintf(got + strlen(got), sizeof(got) - strlen(got), "%s", page ? "|" : "");
        for (size_t i = 0; i < l.n; i++) {
            assert_true(l.items[i]->cseq > after && l.items[i]->cseq <= next);
            snprintf(got + strlen(got), sizeof(got) - strlen(got), "%s%s", i ? "," : "", l.items[i]->id);
        }
        ad_job_list_free(&l);
        after = next;
    }
    assert_str_eq(got, want, "bulk walk");
}

/* The bulk walk examines limit jobs of the tenant and type a page, whatever their status, returns those that match,
 * leaves out other tenants and types, tombstoned and expired jobs, and ends with the jobs there when it began. */
static void sc_test_bulk_page_walks_matching_jobs(void **state)
{
    struct fx *f = *state;
    const enum ad_status st[] = {AD_QUEUED, AD_RUNNING, AD_SUCCEEDED, AD_FAILED, AD_QUEUED, AD_CANCELLED};
    for (int i = 0; i < 6; i++) {
        char id[16];
        snprintf(id, sizeof(id), "b%d", i);
        struct ad_job *j = new_job(id, "t1", "a", st[i], AD_PRIO_NORMAL);
        j->created_at = T0 + i * 10;
        sc_insert(f, j);
        ad_job_free(j);
    }
    sc_insert_new(f, "other_tenant", "t2", "a", AD_QUEUED, AD_PRIO_NORMAL, 0);
    sc_insert_new(f, "other_type", "t1", "b", AD_QUEUED, AD_PRIO_NORMAL, 0);
    struct ad_job *gone = new_job("tomb", "t1", "a", AD_FAILED, AD_PRIO_NORMAL);
    gone->tombstoned = 1;
    gone->expires_at = T0 + 1000;
    sc_insert(f, gone);
    ad_job_free(gone);
    struct ad_job *old = new_job("expired", "t1", "a", AD_FAILED, AD_PRIO_NORMAL);
    old->expires_at = T0 - 1;
    sc_insert(f, old);
    ad_job_free(old);

    struct ad_bulk_query q = {.tenant = "t1", .type = "a", .now = T0};
    int64_t upto = 0;
    sc_bulk_walk(f, &q, 100, &upto, "b0,b1,b2,b3,b4,b5");
    assert_true(upto > 0);
    upto = 0;
    sc_bulk_walk(f, &q, 4, &upto, "b0,b1,b2,b3|b4,b5"); /* the last page examines tomb and expired */
    q.statuses = 1u << AD_QUEUED | 1u << AD_RUNNING;
    upto = 0;
    sc_bulk_walk(f, &q, 2, &upto, "b0,b1||b4|"); /* a page of no match still moves on */
    q.statuses = 1u << AD_FAILED | 1u << AD_CANCELLED;
    q.created_after = T0 + 10;
    q.created_before = T0 + 50;
    upto = 0;
    sc_bulk_walk(f, &q, 100, &upto, "b3");
    q = (struct ad_bulk_query){.tenant = "t1", .type = "a", .now = T0, .created_before = T0 + 15};
    upto = 0;
    sc_bulk_walk(f, &q, 100, &upto, "b0,b1");

    /* A job inserted after the walk's first page is beyond its end. */
    q = (struct ad_bulk_query){.tenant = "t1", .type = "a", .now = T0, .statuses = 1u << AD_QUEUED};
    upto = 0;
    struct ad_job_list l = {0};
    int64_t next = 0;
    assert_int_equal(f->s->ops->job_bulk_page(f->c, &q, 0, &upto, 100, &l, &next), AD_E_OK);
    assert_ids(&l, "b0,b4");
    ad_job_list_free(&l);
    sc_insert_new(f, "late", "t1", "a", AD_QUEUED, AD_PRIO_NORMAL, 0);
    assert_int_equal(f->s->ops->job_bulk_page(f->c, &q, next, &upto, 100, &l, &next), AD_E_OK);
    assert_int_equal(next, 0);
    assert_int_equal(l.n, 0);
    upto = 0;
    sc_bulk_walk(f, &q, 100, &upto, "b0,b4,late");
    q.tenant = "t3";
    upto = 0;
    sc_bulk_walk(f, &q, 100, &upto, "");
}

/* Jobs of t1 in cseq order, whose updated_at does not follow it (an operation reads its time before it is queued;
 * cluster nodes write with their own clocks), and a t2 job updated last. */
static void sc_insert_updated(struct fx *f, const char *const *ids, const int64_t *updated, int n, int64_t *cseq)
{
    for (int i = 0; i < n; i++) {
        struct ad_job *j =
            new_job(ids[i], "t1", i % 2 == 0 ? "a" : "b", i % 3 == 0 ? AD_RUNNING : AD_SUCCEEDED, AD_PRIO_NORMAL);
        j->updated_at = updated[i];
        sc_insert(f, j);
        cseq[i] = j->cseq;
        ad_job_free(j);
    }
    struct ad_job *j = new_job("u_other", "t2", "a", AD_RUNNING, AD_PRIO_NORMAL);
    j->updated_at = T0 + 1000;
    sc_insert(f, j);
    ad_job_free(j);
}

/* A list by updatedAfter returns exactly the jobs updated after the time, newest cseq first, with every filter and
 * page, whether few jobs match (read through the index of updated_at) or many (a walk by cseq: the SQLite store
 * switches at 10,000, SQ_LIST_FEW_MAX); a job updated after a later one counts by its own updated_at. */
static void sc_test_list_updated_after_exact(void **state)
{
    struct fx *f = *state;
    /* u0 was updated last though inserted first; u3 after the time though u4 (a later cseq) is not. */
    const char *ids[] = {"u0", "u1", "u2", "u3", "u4", "u5"};
    const int64_t updated[] = {T0 + 900, T0 + 10, T0 + 400, T0 + 300, T0 + 20, T0 + 500};
    int64_t cseq[6];
    for (int round = 0; round < 2; round++) {
        if (round == 1) {
            /* Many jobs updated after the time, all older than the u jobs. */
            sc_exec_behind(f, "DELETE FROM jobs");
            assert_int_equal(f->s->ops->begin(f->c), AD_E_OK);
            for (int i = 0; i < 10050; i++) {
                char id[32];
                snprintf(id, sizeof(id), "many_%05d", i);
                struct ad_job *j = new_job(id, "t1", "c", AD_QUEUED, AD_PRIO_NORMAL);
                j->updated_at = T0 + 200 + i % 7;
                sc_insert(f, j);
                ad_job_free(j);
            }
            assert_int_equal(f->s->ops->commit(f->c), AD_E_OK);
        }
        sc_insert_updated(f, ids, updated, 6, cseq);
        struct ad_list_query q = {.tenant = "t1", .limit = 4, .updated_after = T0 + 100};
        sc_list(f, &q, "u5,u3,u2,u0");
        q.limit = 2;
        sc_list(f, &q, "u5,u3");
        q.before_cseq = cseq[3];
        sc_list(f, &q, "u2,u0");
        q.before_cseq = cseq[0];
        sc_list(f, &q, round == 0 ? "" : "many_10049,many_10048");
        q = (struct ad_list_query){.tenant = "t1", .limit = 4, .updated_after = T0 + 300};
        sc_list(f, &q, "u5,u2,u0");
        q = (struct ad_list_query){
            .tenant = "t1", .limit = 4, .updated_after = T0 + 100, .has_status = 1, .status = AD_RUNNING};
        sc_list(f, &q, "u3,u0");
        q.limit = 1;
        q.before_cseq = cseq[3];
        sc_list(f, &q, "u0");
        q = (struct ad_list_query){.tenant = "t1", .limit = 4, .updated_after = T0 + 100, .type = "a"};
        sc_list(f, &q, "u2,u0");
        q.has_status = 1;
        q.status = AD_SUCCEEDED;
        sc_list(f, &q, "u2");
        q = (struct ad_list_query){.tenant = "t1", .limit = 4, .updated_after = T0 + 100, .type = "c"};
        sc_list(f, &q, round == 0 ? "" : "many_10049,many_10048,many_10047,many_10046");
        q = (struct ad_list_query){.tenant = "t1", .limit = 4, .updated_after = T0 + 900};
        sc_list(f, &q, "");
        q = (struct ad_list_query){.tenant = "t2", .limit = 4, .updated_after = T0 + 900};
        sc_list(f, &q, "u_other");
        sc_exec_behind(f, "DELETE FROM jobs WHERE id LIKE 'u%'");
    }
}

static void sc_test_changes_by_seq(void **state)
{
    struct fx *f = *state;
    struct ad_job *a = new_job("a", "t1", "x", AD_QUEUED, AD_PRIO_NORMAL);
    struct ad_job *b = new_job("b", "t1", "x", AD_QUEUED, AD_PRIO_NORMAL);
    sc_insert(f, a);
    sc_insert_new(f, "other", "t2", "x", AD_QUEUED, AD_PRIO_NORMAL, 0);
    sc_insert(f, b);
    sc_insert_new(f, "c", "t1", "x", AD_QUEUED, AD_PRIO_NORMAL, 0);
    a->status = AD_RUNNING;
    assert_int_equal(f->s->ops->job_update(f->c, a), AD_E_OK);

    sc_changes(f, "t1", 0, 50, "b,c,a");
    sc_changes(f, "t1", 0, 2, "b,c");
    sc_changes(f, "t1", 0, 1, "b");
    sc_changes(f, "t1", b->seq, 50, "c,a");
    sc_changes(f, "t1", a->seq, 50, "");
    sc_changes(f, "t2", 0, 50, "other");

    struct ad_job_list l = {0};
    assert_int_equal(f->s->ops->job_changes(f->c, "t1", b->seq, 50, &l), AD_E_OK);
    assert_int_equal(l.n, 2);
    assert_int_equal(l.items[1]->status, AD_RUNNING);
    assert_int_equal(l.items[1]->seq, a->seq);
    ad_job_list_free(&l);
    ad_job_free(a);
    ad_job_free(b);
}

static void sc_test_leasable_order_and_exclusions(void **state)
{
    struct fx *f = *state;
    sc_insert_new(f, "low_old", "t1", "a", AD_QUEUED, AD_PRIO_LOW, 0);
    sc_insert_new(f, "norm1", "t1", "a", AD_QUEUED, AD_PRIO_NORMAL, 0);
    sc_insert_new(f, "high1", "t1", "a", AD_QUEUED, AD_PRIO_HIGH, 0);
    sc_insert_new(f, "future_high", "t1", "a", AD_QUEUED, AD_PRIO_HIGH, T0 + 1);
    sc_insert_new(f, "due_norm", "t1", "a", AD_QUEUED, AD_PRIO_NORMAL, T0);
    sc_insert_new(f, "high2", "t1", "a", AD_QUEUED, AD_PRIO_HIGH, 0);
    sc_insert_new(f, "b_high", "t1", "b", AD_QUEUED, AD_PRIO_HIGH, 0);
    sc_insert_new(f, "b_norm", "t1", "b", AD_QUEUED, AD_PRIO_NORMAL, 0);
    sc_insert_new(f, "c_high", "t1", "c", AD_QUEUED, AD_PRIO_HIGH, 0);
    sc_insert_new(f, "t2_high", "t2", "a", AD_QUEUED, AD_PRIO_HIGH, 0);
    sc_insert_new(f, "running", "t1", "a", AD_RUNNING, AD_PRIO_HIGH, 0);
    sc_insert_new(f, "done", "t1", "a", AD_SUCCEEDED, AD_PRIO_HIGH, 0);

    const char *a[] = {"a"};
    sc_leasable(f, "t1", a, 1, T0, 10, "high1,high2,norm1,due_norm,low_old");
    sc_leasable(f, "t1", a, 1, T0, 2, "high1,high2");
    const char *ab[] = {"b", "a"};
    sc_leasable(f, "t1", ab, 2, T0, 10, "high1,high2,b_high,norm1,due_norm,b_norm,low_old");
    sc_leasable(f, "t1", ab, 2, T0, 4, "high1,high2,b_high,norm1");
    const char *bab[] = {"b", "a", "b"};
    sc_leasable(f, "t1", bab, 3, T0, 10, "high1,high2,b_high,norm1,due_norm,b_norm,low_old");
    const char *dup[] = {"a", "a"};
    sc_leasable(f, "t1", dup, 2, T0, 10, "high1,high2,norm1,due_norm,low_old");
    const char *none[] = {"zzz"};
    sc_leasable(f, "t1", none, 1, T0, 10, "");
    sc_leasable(f, "t2", a, 1, T0, 10, "t2_high");
    /* Once its runAt has passed, the scheduled job takes its place by priority and age. */
    sc_leasable(f, "t1", a, 1, T0 + 1, 3, "high1,future_high,high2");
    /* Inside a transaction too. */
    assert_int_equal(f->s->ops->begin(f->c), AD_E_OK);
    sc_leasable(f, "t1", a, 1, T0, 2, "high1,high2");
    assert_int_equal(f->s->ops->commit(f->c), AD_E_OK);
}

/* Insert a queued job of group (NULL: none) of type "g" at priority. */
static void sc_insert_grouped(struct fx *f, const char *id, const char *group, enum ad_priority priority)
{
    struct ad_job *j = new_job(id, "t1", "g", AD_QUEUED, priority);
    ad_job_set(&j->group, group);
    sc_insert(f, j);
    ad_job_free(j);
}

/* Take job id out of the queue, as a lease does. */
static void sc_run(struct fx *f, const char *id)
{
    struct ad_job *j = sc_get(f, f->c, "t1", id);
    j->status = AD_RUNNING;
    assert_int_equal(f->s->ops->job_update(f->c, j), AD_E_OK);
    ad_job_free(j);
}

/* Within a priority, a type's groups take turns (the jobs without a group are one group), each group's jobs oldest
 * first; a group that comes to a queue other groups have a backlog in joins the turn the queue is at. */
static void sc_test_leasable_groups_round_robin(void **state)
{
    struct fx *f = *state;
    const char *g[] = {"g"};
    for (int i = 1; i <= 5; i++) {
        char id[16];
        snprintf(id, sizeof(id), "a%d", i);
        sc_insert_grouped(f, id, "A", AD_PRIO_NORMAL);
    }
    sc_insert_grouped(f, "b1", "B", AD_PRIO_NORMAL);
    sc_insert_grouped(f, "b2", "B", AD_PRIO_NORMAL);
    sc_insert_grouped(f, "n1", NULL, AD_PRIO_NORMAL);
    sc_insert_grouped(f, "ah", "A", AD_PRIO_HIGH);
    struct ad_job *j = sc_get(f, f->c, "t1", "b1");
    assert_string_equal(j->group, "B");
    ad_job_free(j);
    j = sc_get(f, f->c, "t1", "n1");
    assert_null(j->group);
    ad_job_free(j);
    sc_leasable(f, "t1", g, 1, T0, 20, "ah,a1,b1,n1,a2,b2,a3,a4,a5");
    sc_leasable(f, "t1", g, 1, T0, 3, "ah,a1,b1");
    /* Leased jobs leave their turns: B's next job joins the turn the queue is at, not the one after B's last. */
    sc_run(f, "ah");
    sc_run(f, "a1");
    sc_run(f, "b1");
    sc_run(f, "n1");
    sc_run(f, "a2");
    sc_run(f, "b2");
    sc_insert_grouped(f, "b3", "B", AD_PRIO_NORMAL);
    sc_insert_grouped(f, "b4", "B", AD_PRIO_NORMAL);
    sc_insert_grouped(f, "c1", "C", AD_PRIO_NORMAL);
    sc_leasable(f, "t1", g, 1, T0, 20, "a3,b3,c1,a4,b4,a5");
    /* Inside a transaction, and with another type asked for too (each type keeps its own turns). */
    sc_insert_new(f, "other", "t1", "o", AD_QUEUED, AD_PRIO_NORMAL, 0);
    assert_int_equal(f->s->ops->begin(f->c), AD_E_OK);
    sc_leasable(f, "t1", g, 1, T0, 2, "a3,b3");
    sc_run(f, "a3");
    sc_insert_grouped(f, "a6", "A", AD_PRIO_NORMAL);
    sc_leasable(f, "t1", g, 1, T0, 20, "b3,c1,a4,b4,a5,a6");
    const char *go[] = {"g", "o"};
    sc_leasable(f, "t1", go, 2, T0, 3, "b3,c1,a4");
    assert_int_equal(f->s->ops->commit(f->c), AD_E_OK);
}

/* Many inserts in one transaction (a batch of submits) take the turns they would take one at a time, also after the
 * jobs of a group were leased in it: A's next job then joins the turn the queue is at. */
static void sc_test_turns_of_one_transaction(void **state)
{
    struct fx *f = *state;
    const char *g[] = {"g"};
    assert_int_equal(f->s->ops->begin(f->c), AD_E_OK);
    sc_insert_grouped(f, "n1", NULL, AD_PRIO_NORMAL);
    sc_insert_grouped(f, "a1", "A", AD_PRIO_NORMAL);
    sc_insert_grouped(f, "a2", "A", AD_PRIO_NORMAL);
    sc_insert_grouped(f, "a3", "A", AD_PRIO_NORMAL);
    sc_leasable(f, "t1", g, 1, T0, 20, "n1,a1,a2,a3");
    sc_run(f, "a1");
    sc_run(f, "a2");
    sc_run(f, "a3");
    sc_insert_grouped(f, "a4", "A", AD_PRIO_NORMAL);
    sc_insert_grouped(f, "n2", NULL, AD_PRIO_NORMAL);
    sc_insert_grouped(f, "a5", "A", AD_PRIO_NORMAL);
    sc_insert_grouped(f, "n3", NULL, AD_PRIO_NORMAL);
    sc_leasable(f, "t1", g, 1, T0, 20, "n1,a4,n2,a5,n3");
    assert_int_equal(f->s->ops->commit(f->c), AD_E_OK);
    sc_leasable(f, "t1", g, 1, T0, 20, "n1,a4,n2,a5,n3");
}

/* The due queued jobs of some groups of a queue, at every priority: not the scheduled, running, other queues' ones. */
static void sc_test_group_queued_counts(void **state)
{
    struct fx *f = *state;
    const struct ad_store_ops *o = f->s->ops;
    sc_insert_grouped(f, "a1", "A", AD_PRIO_NORMAL);
    sc_insert_grouped(f, "a2", "A", AD_PRIO_LOW);
    sc_insert_grouped(f, "a3", "A", AD_PRIO_HIGH);
    sc_insert_grouped(f, "b1", "B", AD_PRIO_NORMAL);
    sc_insert_grouped(f, "n1", NULL, AD_PRIO_NORMAL);
    sc_insert_grouped(f, "a4", "A", AD_PRIO_NORMAL);
    sc_run(f, "a4");
    struct ad_job *j = new_job("a5", "t1", "g", AD_QUEUED, AD_PRIO_NORMAL);
    ad_job_set(&j->group, "A");
    j->run_at = T0 + 60000;
    sc_insert(f, j);
    ad_job_free(j);
    j = new_job("x1", "t2", "g", AD_QUEUED, AD_PRIO_NORMAL);
    ad_job_set(&j->group, "A");
    sc_insert(f, j);
    ad_job_free(j);
    const char *a[] = {"A"}, *an[] = {"A", ""}, *bz[] = {"B", "Z"};
    int64_t n = -1;
    assert_int_equal(o->queue_group_queued(f->c, "t1", "g", T0, a, 1, &n), AD_E_OK);
    assert_int_equal(n, 3);
    assert_int_equal(o->queue_group_queued(f->c, "t1", "g", T0, an, 2, &n), AD_E_OK);
    assert_int_equal(n, 4);
    assert_int_equal(o->queue_group_queued(f->c, "t1", "g", T0, bz, 2, &n), AD_E_OK);
    assert_int_equal(n, 1);
    assert_int_equal(o->queue_group_queued(f->c, "t1", "g", T0 + 60000, a, 1, &n), AD_E_OK);
    assert_int_equal(n, 4); /* a5 is due by then */
}

/* The lease of a group-limited type without the skipped groups, bounded by its walk. */
static void sc_leasable_except(struct fx *f, const char *const *skip, size_t nskip, int walk, int limit,
                               const char *want)
{
    struct ad_job_list l = {0};
    assert_int_equal(f->s->ops->job_leasable_except(f->c, "t1", "g", T0, skip, nskip, walk, limit, &l), AD_E_OK);
    assert_ids(&l, want);
    ad_job_list_free(&l);
}

/* The group counts of a list, "group=n,..." in the list's order sorted by group, into buf. */
static const char *sc_group_counts(struct ad_group_count_list *l, char *buf, size_t size)
{
    for (size_t i = 0; i < l->n; i++)
        for (size_t k = i + 1; k < l->n; k++)
            if (strcmp(l->items[k].group, l->items[i].group) < 0) {
                struct ad_group_count t = l->items[i];
                l->items[i] = l->items[k];
                l->items[k] = t;
            }
    buf[0] = '\0';
    for (size_t i = 0; i < l->n; i++)
        snprintf(buf + strlen(buf), size - strlen(buf), "%s%s=%lld", i > 0 ? "," : "", l->items[i].group,
                 (long long)l->items[i].n);
    ad_group_count_list_free(l);
    return buf;
}

/* Per-group limits: running counts by group (at least min), the groups' rate windows (counted, and the older ones
 * forgotten at a count), and the lease that passes over skipped groups within a bounded walk. */
static void sc_test_group_limits(void **state)
{
    struct fx *f = *state;
    const struct ad_store_ops *o = f->s->ops;
    char buf[256];
    struct ad_group_count_list l;
    for (int i = 1; i <= 3; i++) {
        char id[16];
        snprintf(id, sizeof(id), "a%d", i);
        sc_insert_grouped(f, id, "A", AD_PRIO_NORMAL);
    }
    sc_insert_grouped(f, "b1", "B", AD_PRIO_NORMAL);
    sc_insert_grouped(f, "b2", "B", AD_PRIO_NORMAL);
    sc_insert_grouped(f, "n1", NULL, AD_PRIO_NORMAL);
    /* Lease order: a1,b1,n1,a2,b2,a3. */
    const char *none[] = {""};
    const char *a[] = {"A"};
    const char *ab[] = {"A", "B"};
    sc_leasable_except(f, a, 0, 100, 20, "a1,b1,n1,a2,b2,a3");
    sc_leasable_except(f, a, 1, 100, 20, "b1,n1,b2");
    sc_leasable_except(f, ab, 2, 100, 20, "n1");
    sc_leasable_except(f, none, 1, 100, 20, "a1,b1,a2,b2,a3");
    sc_leasable_except(f, a, 1, 100, 2, "b1,n1");
    /* The walk counts the skipped groups' jobs: the first 4 are a1,b1,n1,a2. */
    sc_leasable_except(f, a, 1, 4, 20, "b1,n1");
    sc_leasable_except(f, ab, 2, 2, 20, "");
    sc_insert_new(f, "x1", "t2", "g", AD_QUEUED, AD_PRIO_NORMAL, 0); /* another tenant's */
    sc_leasable_except(f, ab, 2, 100, 20, "n1");

    /* Running counts by group, the jobs without one as "". */
    sc_run(f, "a1");
    sc_run(f, "a2");
    sc_run(f, "b1");
    sc_run(f, "n1");
    sc_insert_new(f, "r1", "t2", "g", AD_RUNNING, AD_PRIO_NORMAL, 0);
    sc_insert_new(f, "r2", "t1", "o", AD_RUNNING, AD_PRIO_NORMAL, 0);
    assert_int_equal(o->queue_group_running(f->c, "t1", "g", 1, &l), AD_E_OK);
    assert_string_equal(sc_group_counts(&l, buf, sizeof(buf)), "=1,A=2,B=1");
    assert_int_equal(o->queue_group_running(f->c, "t1", "g", 2, &l), AD_E_OK);
    assert_string_equal(sc_group_counts(&l, buf, sizeof(buf)), "A=2");
    assert_int_equal(o->queue_group_running(f->c, "t1", "o", 1, &l), AD_E_OK);
    assert_string_equal(sc_group_counts(&l, buf, sizeof(buf)), "=1");
    assert_int_equal(o->queue_group_running(f->c, "t1", "nothing", 1, &l), AD_E_OK);
    assert_int_equal(l.n, 0);
    ad_group_count_list_free(&l);

    /* Rate windows: counts add up within a window; a count in a later window forgets the earlier ones. */
    assert_int_equal(o->begin(f->c), AD_E_OK);
    assert_int_equal(o->queue_group_took(f->c, "t1", "g", "A", T0, 2), AD_E_OK);
    assert_int_equal(o->queue_group_took(f->c, "t1", "g", "A", T0, 1), AD_E_OK);
    assert_int_equal(o->queue_group_took(f->c, "t1", "g", "", T0, 1), AD_E_OK);
    assert_int_equal(o->queue_group_took(f->c, "t2", "g", "A", T0, 5), AD_E_OK);
    /* Read in the writer's own transaction. */
    assert_int_equal(o->queue_group_window(f->c, "t1", "g", T0, 1, &l), AD_E_OK);
    assert_string_equal(sc_group_counts(&l, buf, sizeof(buf)), "=1,A=3");
    assert_int_equal(o->commit(f->c), AD_E_OK);
    assert_int_equal(o->queue_group_window(f->c, "t1", "g", T0, 2, &l), AD_E_OK);
    assert_string_equal(sc_group_counts(&l, buf, sizeof(buf)), "A=3");
    assert_int_equal(o->queue_group_window(f->c, "t1", "g", T0 + 1000, 1, &l), AD_E_OK);
    assert_int_equal(l.n, 0);
    ad_group_count_list_free(&l);
    assert_int_equal(o->begin(f->c), AD_E_OK);
    assert_int_equal(o->queue_group_took(f->c, "t1", "g", "B", T0 + 1000, 1), AD_E_OK);
    assert_int_equal(o->commit(f->c), AD_E_OK);
    assert_int_equal(o->queue_group_window(f->c, "t1", "g", T0, 1, &l), AD_E_OK);
    assert_int_equal(l.n, 0); /* forgotten */
    ad_group_count_list_free(&l);
    assert_int_equal(o->queue_group_window(f->c, "t1", "g", T0 + 1000, 1, &l), AD_E_OK);
    assert_string_equal(sc_group_counts(&l, buf, sizeof(buf)), "B=1");
    assert_int_equal(o->queue_group_window(f->c, "t2", "g", T0, 1, &l), AD_E_OK);
    assert_string_equal(sc_group_counts(&l, buf, sizeof(buf)), "A=5"); /* another tenant's queue is its own */
}

/* A group with a backlog holds back another group's job by one job: 100 jobs of A, then one of B. */
static void sc_test_leasable_group_backlog_does_not_starve(void **state)
{
    struct fx *f = *state;
    const char *g[] = {"g"};
    assert_int_equal(f->s->ops->begin(f->c), AD_E_OK);
    for (int i = 0; i < 100; i++) {
        char id[16];
        snprintf(id, sizeof(id), "a%d", i);
        sc_insert_grouped(f, id, "A", AD_PRIO_NORMAL);
    }
    sc_insert_grouped(f, "b", "B", AD_PRIO_NORMAL);
    assert_int_equal(f->s->ops->commit(f->c), AD_E_OK);
    sc_leasable(f, "t1", g, 1, T0, 3, "a0,b,a1");
    /* In one transaction, after a lease (PostgreSQL keeps the head it read for the leases that follow): a job of the
     * group read last goes behind its group, one of a new group takes its turn at the head. */
    assert_int_equal(f->s->ops->begin(f->c), AD_E_OK);
    sc_leasable(f, "t1", g, 1, T0, 1, "a0");
    sc_run(f, "a0");
    sc_insert_grouped(f, "a_late", "A", AD_PRIO_NORMAL);
    sc_insert_grouped(f, "c", "C", AD_PRIO_NORMAL);
    sc_leasable(f, "t1", g, 1, T0, 3, "b,c,a1");
    f->s->ops->rollback(f->c);
    /* Two backlogs alternate. */
    for (int i = 1; i < 50; i++) {
        char id[16];
        snprintf(id, sizeof(id), "b%d", i);
        sc_insert_grouped(f, id, "B", AD_PRIO_NORMAL);
    }
    struct ad_job_list l = {0};
    assert_int_equal(f->s->ops->job_leasable(f->c, "t1", g, 1, T0, 60, &l), AD_E_OK);
    assert_int_equal(l.n, 60);
    for (size_t i = 0; i < l.n; i++)
        if (strcmp(l.items[i]->group, i % 2 == 0 ? "A" : "B") != 0)
            fail_msg("lease %zu is %s of %s", i, l.items[i]->id, l.items[i]->group);
    ad_job_list_free(&l);
}

/* Type names are data, whatever characters they hold (PostgreSQL passes the list as one text[] literal, in which
 * quotes, backslashes, commas, braces, blanks and NULL are syntax). */
static void sc_test_leasable_types_with_special_chars(void **state)
{
    struct fx *f = *state;
    const char *types[] = {"plain", "with\"quote", "back\\slash", "com,ma", "{brace}", "sp ace", "NULL"};
    for (size_t i = 0; i < 7; i++)
        sc_insert_new(f, types[i], "t1", types[i], AD_QUEUED, AD_PRIO_NORMAL, 0);
    sc_insert_new(f, "not_asked", "t1", "other", AD_QUEUED, AD_PRIO_NORMAL, 0);
    const char *ask[] = {"NULL", "with\"quote", "absent", "back\\slash", "com,ma", "{brace}", "sp ace", "plain"};
    struct ad_job_list l = {0};
    assert_int_equal(f->s->ops->job_leasable(f->c, "t1", ask, 8, T0, 20, &l), AD_E_OK);
    sc_assert_id_set(&l, "NULL,back\\slash,com,ma,plain,sp ace,with\"quote,{brace}");
    ad_job_list_free(&l);
}

static void sc_test_running_jobs_by_lease_expiry(void **state)
{
    struct fx *f = *state;
    const char *ids[] = {"r_late", "q", "r_early", "done"};
    const enum ad_status st[] = {AD_RUNNING, AD_QUEUED, AD_RUNNING, AD_FAILED};
    const int64_t exp[] = {T0 + 100, 0, T0 + 10, 0};
    for (int i = 0; i < 4; i++) {
        struct ad_job *j = new_job(ids[i], i == 2 ? "t2" : "t1", "a", st[i], AD_PRIO_NORMAL);
        j->lease_expires_at = exp[i];
        sc_insert(f, j);
        ad_job_free(j);
    }
    struct ad_job_list l = {0};
    assert_int_equal(f->s->ops->job_running(f->c, &l), AD_E_OK);
    assert_ids(&l, "r_early,r_late");
    assert_int_equal(l.items[0]->lease_expires_at, T0 + 10);
    ad_job_list_free(&l);
}

/* The dashboard's counts: a tenant's jobs (or every tenant's) grouped by type then status, with the oldest's
 * created_at, and no more groups than asked for. */

/* Queue rows: absent until put, every field round-trips (a limit of 0 is none), a put replaces the row, a list is
 * the tenant's by type, the rows survive a reopen, and the counts split a queue's jobs by state and runAt. */
static void sc_test_queues(void **state)
{
    struct fx *f = *state;
    const struct ad_store_ops *o = f->s->ops;
    struct ad_queue q;
    assert_int_equal(o->queue_get(f->c, "t1", "b", &q), AD_E_NOT_FOUND);
    /* A rolled-back put leaves nothing, even for a read later in the same connection's next transaction. */
    struct ad_queue gone = {.tenant = "t1", .type = "b", .paused = 1};
    assert_int_equal(o->begin(f->c), AD_E_OK);
    assert_int_equal(o->queue_get(f->c, "t1", "b", &q), AD_E_NOT_FOUND);
    assert_int_equal(o->queue_put(f->c, &gone), AD_E_OK);
    assert_int_equal(o->queue_get(f->c, "t1", "b", &q), AD_E_OK);
    assert_int_equal(q.paused, 1);
    ad_queue_clear(&q);
    o->rollback(f->c);
    assert_int_equal(o->begin(f->c), AD_E_OK);
    assert_int_equal(o->queue_get(f->c, "t1", "b", &q), AD_E_NOT_FOUND);
    o->rollback(f->c);
    struct ad_queue w = {.tenant = "t1",
                         .type = "b",
                         .paused = 1,
                         .concurrency = 3,
                         .group_concurrency = 2,
                         .rate = {5, 1000},
                         .group_rate = {7, 60000},
                         .window_start = T0,
                         .window_count = 4};
    assert_int_equal(o->begin(f->c), AD_E_OK);
    assert_int_equal(o->queue_put(f->c, &w), AD_E_OK);
    struct ad_queue a = {.tenant = "t1", .type = "a"};
    assert_int_equal(o->queue_put(f->c, &a), AD_E_OK);
    struct ad_queue other = {.tenant = "t2", .type = "b", .concurrency = 1};
    assert_int_equal(o->queue_put(f->c, &other), AD_E_OK);
    /* The writer reads what it wrote in the same transaction. */
    assert_int_equal(o->queue_get(f->c, "t1", "b", &q), AD_E_OK);
    assert_int_equal(q.window_count, 4);
    ad_queue_clear(&q);
    assert_int_equal(o->commit(f->c), AD_E_OK);
    sc_reopen(f);
    o = f->s->ops;
    assert_int_equal(o->queue_get(f->c, "t1", "b", &q), AD_E_OK);
    assert_string_equal(q.tenant, "t1");
    assert_string_equal(q.type, "b");
    assert_int_equal(q.paused, 1);
    assert_int_equal(q.concurrency, 3);
    assert_int_equal(q.group_concurrency, 2);
    assert_int_equal(q.rate.limit, 5);
    assert_int_equal(q.rate.period_ms, 1000);
    assert_int_equal(q.group_rate.limit, 7);
    assert_int_equal(q.group_rate.period_ms, 60000);
    assert_int_equal(q.window_start, T0);
    assert_int_equal(q.window_count, 4);
    ad_queue_clear(&q);
    /* A put replaces every field: cleared limits read back as none. */
    w.paused = 0;
    w.concurrency = 0;
    w.rate = (struct ad_queue_rate){0, 0};
    assert_int_equal(o->begin(f->c), AD_E_OK);
    assert_int_equal(o->queue_put(f->c, &w), AD_E_OK);
    assert_int_equal(o->commit(f->c), AD_E_OK);
    assert_int_equal(o->queue_get(f->c, "t1", "b", &q), AD_E_OK);
    assert_int_equal(q.paused, 0);
    assert_int_equal(q.concurrency, 0);
    assert_int_equal(q.rate.limit, 0);
    assert_int_equal(q.group_concurrency, 2);
    ad_queue_clear(&q);
    struct ad_queue_list l;
    assert_int_equal(o->queue_list(f->c, "t1", &l), AD_E_OK);
    assert_int_equal(l.n, 2);
    assert_string_equal(l.items[0].type, "a");
    assert_string_equal(l.items[1].type, "b");
    ad_queue_list_free(&l);
    assert_int_equal(o->queue_list(f->c, "nobody", &l), AD_E_OK);
    assert_int_equal(l.n, 0);
    ad_queue_list_free(&l);

    sc_insert_new(f, "q1", "t1", "b", AD_QUEUED, AD_PRIO_NORMAL, 0);
    sc_insert_new(f, "q2", "t1", "b", AD_QUEUED, AD_PRIO_NORMAL, T0 - 1);
    sc_insert_new(f, "q3", "t1", "b", AD_QUEUED, AD_PRIO_NORMAL, T0 + 1000);
    sc_insert_new(f, "q4", "t1", "b", AD_RUNNING, AD_PRIO_NORMAL, 0);
    sc_insert_new(f, "q5", "t1", "b", AD_SUCCEEDED, AD_PRIO_NORMAL, 0);
    sc_insert_new(f, "q6", "t1", "a", AD_RUNNING, AD_PRIO_NORMAL, 0);
    sc_insert_new(f, "q7", "t2", "b", AD_RUNNING, AD_PRIO_NORMAL, 0);
    struct ad_queue_counts k;
    assert_int_equal(o->queue_counts(f->c, "t1", "b", T0, &k), AD_E_OK);
    assert_int_equal(k.queued, 2);
    assert_int_equal(k.running, 1);
    assert_int_equal(k.scheduled, 1);
    int64_t running = -1;
    assert_int_equal(o->queue_running(f->c, "t1", "b", &running), AD_E_OK);
    assert_int_equal(running, 1);
    assert_int_equal(o->queue_running(f->c, "t1", "c", &running), AD_E_OK);
    assert_int_equal(running, 0);
}

static void sc_test_job_counts_by_type_and_status(void **state)
{
    struct fx *f = *state;
    const struct {
        const char *id, *tenant, *type;
        enum ad_status st;
        int64_t created;
    } rows[] = {
        {"c1", "t1", "b", AD_QUEUED, T0 + 30}, {"c2", "t1", "b", AD_QUEUED, T0 + 10}, {"c3", "t1", "a", AD_FAILED, T0},
        {"c4", "t1", "b", AD_RUNNING, T0 + 5}, {"c5", "t2", "b", AD_QUEUED, T0 + 1},
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        struct ad_job *j = new_job(rows[i].id, rows[i].tenant, rows[i].type, rows[i].st, AD_PRIO_NORMAL);
        j->created_at = rows[i].created;
        sc_insert(f, j);
        ad_job_free(j);
    }
    struct ad_job_count_list l = {0};
    assert_int_equal(f->s->ops->job_counts(f->c, "t1", 100, &l), AD_E_OK);
    assert_int_equal(l.n, 3);
    assert_string_equal(l.items[0].type, "a");
    assert_int_equal(l.items[0].status, AD_FAILED);
    assert_int_equal(l.items[0].n, 1);
    assert_string_equal(l.items[1].type, "b");
    assert_int_equal(l.items[1].status, AD_QUEUED);
    assert_int_equal(l.items[1].n, 2);
    assert_int_equal(l.items[1].oldest, T0 + 10);
    assert_int_equal(l.items[2].status, AD_RUNNING);
    ad_job_count_list_free(&l);
    assert_int_equal(f->s->ops->job_counts(f->c, NULL, 100, &l), AD_E_OK);
    assert_int_equal(l.n, 3);
    assert_int_equal(l.items[1].n, 3);
    assert_int_equal(l.items[1].oldest, T0 + 1);
    ad_job_count_list_free(&l);
    assert_int_equal(f->s->ops->job_counts(f->c, "t1", 2, &l), AD_E_OK);
    assert_int_equal(l.n, 2);
    ad_job_count_list_free(&l);
    assert_int_equal(f->s->ops->job_counts(f->c, "nobody", 100, &l), AD_E_OK);
    assert_int_equal(l.n, 0);
    ad_job_count_list_free(&l);
}

static void sc_test_scheduled_soonest_first(void **state)
{
    struct fx *f = *state;
    const struct ad_store_ops *ops = f->s->ops;
    sc_insert_new(f, "later", "t1", "a", AD_QUEUED, AD_PRIO_NORMAL, T0 + 300);
    sc_insert_new(f, "due", "t1", "a", AD_QUEUED, AD_PRIO_NORMAL, T0);
    sc_insert_new(f, "soon", "t2", "a", AD_QUEUED, AD_PRIO_NORMAL, T0 + 100);
    sc_insert_new(f, "running", "t1", "a", AD_RUNNING, AD_PRIO_NORMAL, T0 + 50);
    sc_insert_new(f, "now", "t1", "a", AD_QUEUED, AD_PRIO_NORMAL, 0);
    sc_insert_new(f, "mid", "t1", "a", AD_QUEUED, AD_PRIO_NORMAL, T0 + 200);
    sc_insert_new(f, "tie", "t2", "a", AD_QUEUED, AD_PRIO_NORMAL, T0 + 200);

    struct ad_job_list l = {0};
    assert_int_equal(ops->job_scheduled(f->c, T0, INT64_MAX, 10, &l), AD_E_OK);
    assert_ids(&l, "soon,mid,tie,later");
    ad_job_list_free(&l);
    assert_int_equal(ops->job_scheduled(f->c, T0 - 1, INT64_MAX, 10, &l), AD_E_OK);
    assert_ids(&l, "due,soon,mid,tie,later");
    ad_job_list_free(&l);
    assert_int_equal(ops->job_scheduled(f->c, T0, INT64_MAX, 2, &l), AD_E_OK);
    assert_ids(&l, "soon,mid");
    /* The cursor is (run_at, cseq): a job is not after its own key, and is after one just before it; a cursor
     * between two jobs of the same run_at starts the next page with the second. */
    int64_t mid_cseq = l.items[1]->cseq;
    ad_job_list_free(&l);
    assert_int_equal(ops->job_scheduled(f->c, T0 + 200, mid_cseq, 10, &l), AD_E_OK);
    assert_ids(&l, "tie,later");
    ad_job_list_free(&l);
    assert_int_equal(ops->job_scheduled(f->c, T0 + 200, mid_cseq - 1, 10, &l), AD_E_OK);
    assert_ids(&l, "mid,tie,later");
    ad_job_list_free(&l);
    assert_int_equal(ops->job_scheduled(f->c, T0 + 200, INT64_MAX, 10, &l), AD_E_OK);
    assert_ids(&l, "later");
    ad_job_list_free(&l);
    assert_int_equal(ops->job_scheduled(f->c, T0 + 300, INT64_MAX, 10, &l), AD_E_OK);
    assert_ids(&l, "");
    ad_job_list_free(&l);
}

#endif
