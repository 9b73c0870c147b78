/*
 * store_contract_retention.h - the store contract's tests (store_contract.h) of unique keys, then retention: the sweep,
 * job events, attempts and idempotency records. Included by store_contract.h only, after its helpers.
 */
#ifndef AD_STORE_CONTRACT_RETENTION_H
#define AD_STORE_CONTRACT_RETENTION_H

/* ---- unique keys ---- */

static struct ad_job *sc_unique(struct fx *f, const char *tenant, const char *type, const char *key, ad_err want)
{
    struct ad_job *j = (struct ad_job *)1;
    ad_err e = f->s->ops->job_unique(f->c, tenant, type, key, &j);
    if (e != want)
        fail_msg("job_unique %s/%s/%s: %s, want %s", tenant, type, key, ad_err_code(e), ad_err_code(want));
    if (want != AD_E_OK)
        assert_null(j);
    return j;
}

static void sc_insert_keyed(struct fx *f, const char *id, const char *tenant, const char *type, enum ad_status status,
                            const char *key)
{
    struct ad_job *j = new_job(id, tenant, type, status, AD_PRIO_NORMAL);
    ad_job_set(&j->unique_key, key);
    sc_insert(f, j);
    ad_job_free(j);
}

/* job_unique finds the live (queued or running) job of a tenant, type and key, the oldest of several; ended jobs,
 * other tenants, types and keys are not it. */
static void sc_test_unique_key_finds_the_live_job(void **state)
{
    struct fx *f = *state;
    const struct ad_store_ops *ops = f->s->ops;
    sc_insert_keyed(f, "done", "t1", "a", AD_SUCCEEDED, "k");
    sc_insert_keyed(f, "failed", "t1", "a", AD_FAILED, "k");
    sc_insert_keyed(f, "queued", "t1", "a", AD_QUEUED, "k");
    sc_insert_keyed(f, "later", "t1", "a", AD_QUEUED, "k");
    sc_insert_keyed(f, "running", "t1", "b", AD_RUNNING, "k");
    sc_insert_keyed(f, "other", "t2", "a", AD_QUEUED, "k");
    sc_insert_keyed(f, "nokey", "t1", "c", AD_QUEUED, NULL);
    struct ad_job *j = sc_unique(f, "t1", "a", "k", AD_E_OK);
    assert_string_equal(j->id, "queued");
    assert_string_equal(j->unique_key, "k");
    /* Ended, the oldest live job gives way to the next. */
    j->status = AD_CANCELLED;
    assert_int_equal(ops->job_update(f->c, j), AD_E_OK);
    ad_job_free(j);
    j = sc_unique(f, "t1", "a", "k", AD_E_OK);
    assert_string_equal(j->id, "later");
    ad_job_free(j);
    j = sc_unique(f, "t1", "b", "k", AD_E_OK);
    assert_string_equal(j->id, "running");
    ad_job_free(j);
    j = sc_unique(f, "t2", "a", "k", AD_E_OK);
    assert_string_equal(j->id, "other");
    ad_job_free(j);
    sc_unique(f, "t1", "a", "K", AD_E_NOT_FOUND);
    sc_unique(f, "t1", "c", "k", AD_E_NOT_FOUND);
    sc_unique(f, "t3", "a", "k", AD_E_NOT_FOUND);
    j = sc_get(f, f->c, "t1", "later");
    j->status = AD_SUCCEEDED;
    assert_int_equal(ops->job_update(f->c, j), AD_E_OK);
    ad_job_free(j);
    sc_unique(f, "t1", "a", "k", AD_E_NOT_FOUND);
}

/* job_set_payload replaces the payload that job_update leaves alone, and a read in the same transaction sees it. */
static void sc_test_set_payload(void **state)
{
    struct fx *f = *state;
    const struct ad_store_ops *ops = f->s->ops;
    sc_insert_keyed(f, "deb", "t1", "a", AD_QUEUED, "k");
    assert_int_equal(ops->begin(f->c), AD_E_OK);
    struct ad_job *j = sc_get(f, f->c, "t1", "deb");
    j->run_at = T0 + 1000;
    assert_int_equal(ops->job_update(f->c, j), AD_E_OK); /* a backend may remember the row it wrote */
    assert_int_equal(ops->job_set_payload(f->c, "deb", "{\"v\":2}"), AD_E_OK);
    ad_job_set(&j->payload, "{\"v\":2}");
    j->run_at = T0 + 2000;
    assert_int_equal(ops->job_update(f->c, j), AD_E_OK);
    struct ad_job *g = sc_get(f, f->c, "t1", "deb");
    assert_string_equal(g->payload, "{\"v\":2}");
    assert_int_equal(g->run_at, T0 + 2000);
    ad_job_free(g);
    assert_int_equal(ops->job_set_payload(f->c, "deb", "{\"v\":3}"), AD_E_OK);
    g = sc_get(f, f->c, "t1", "deb");
    assert_string_equal(g->payload, "{\"v\":3}");
    ad_job_free(g);
    assert_int_equal(ops->commit(f->c), AD_E_OK);
    assert_int_equal(ops->job_set_payload(f->c, "nope", "{}"), AD_E_NOT_FOUND);
    struct ad_conn *r = sc_connect(f->s);
    g = sc_get(f, r, "t1", "deb");
    assert_string_equal(g->payload, "{\"v\":3}");
    assert_int_equal(g->run_at, T0 + 2000);
    assert_int_equal(g->seq, j->seq);
    ad_job_free(g);
    ops->disconnect(r);
    ad_job_free(j);
}

/* ---- retention ---- */

static void sc_test_sweep_tombstones_then_deletes(void **state)
{
    struct fx *f = *state;
    const int64_t tomb = 1000;
    sc_insert_expiring(f, "e1", T0 - 10);
    sc_insert_expiring(f, "e2", T0 - 5);
    sc_insert_expiring(f, "e3", T0);
    sc_insert_expiring(f, "live", T0 + tomb);
    sc_insert_new(f, "forever", "t1", "a", AD_QUEUED, AD_PRIO_NORMAL, 0);

    int n = -1;
    assert_int_equal(f->s->ops->sweep(f->c, T0, tomb, 2, &n), AD_E_OK);
    assert_int_equal(n, 2);
    assert_int_equal(f->s->ops->sweep(f->c, T0, tomb, 2, &n), AD_E_OK);
    assert_int_equal(n, 1);
    assert_int_equal(f->s->ops->sweep(f->c, T0, tomb, 2, &n), AD_E_OK);
    assert_int_equal(n, 0);

    const char *gone[] = {"e1", "e2", "e3"};
    for (int i = 0; i < 3; i++) {
        struct ad_job *g = sc_get(f, f->c, "t1", gone[i]);
        assert_int_equal(g->tombstoned, 1);
        assert_string_equal(g->payload, "{}");
        assert_null(g->result);
        assert_null(g->error);
        assert_null(g->message);
        ad_job_free(g);
    }
    struct ad_job *g = sc_get(f, f->c, "t1", "live");
    assert_int_equal(g->tombstoned, 0);
    assert_string_equal(g->result, "{\"big\":true}");
    assert_string_equal(g->payload, "{\"n\":1}");
    ad_job_free(g);
    g = sc_get(f, f->c, "t1", "forever");
    assert_int_equal(g->tombstoned, 0);
    ad_job_free(g);

    /* At T0 + tomb - 5, e1 and e2 are past their tombstone period, e3 is not, live has not expired. */
    assert_int_equal(f->s->ops->sweep(f->c, T0 + tomb - 5, tomb, 1, &n), AD_E_OK);
    assert_int_equal(n, 1);
    assert_int_equal(f->s->ops->sweep(f->c, T0 + tomb - 5, tomb, 10, &n), AD_E_OK);
    assert_int_equal(n, 1);
    sc_assert_not_found(f, f->c, NULL, "e1");
    sc_assert_not_found(f, f->c, NULL, "e2");
    g = sc_get(f, f->c, "t1", "e3");
    assert_int_equal(g->tombstoned, 1);
    ad_job_free(g);
    g = sc_get(f, f->c, "t1", "live");
    assert_int_equal(g->tombstoned, 0);
    ad_job_free(g);

    /* live expires and is tombstoned, and e3 is deleted, in one call. */
    assert_int_equal(f->s->ops->sweep(f->c, T0 + tomb + 1, tomb, 10, &n), AD_E_OK);
    assert_int_equal(n, 2);
    sc_assert_not_found(f, f->c, NULL, "e3");
    g = sc_get(f, f->c, "t1", "live");
    assert_int_equal(g->tombstoned, 1);
    ad_job_free(g);
}

/* The event log: rows come back by seq after a cursor, a page at a time, one per seq; tombstoning a job empties
 * its log (a done event must not outlive the result) and deleting the job removes it; other jobs keep theirs. */
static void sc_test_job_events(void **state)
{
    struct fx *f = *state;
    const struct ad_store_ops *ops = f->s->ops;
    const int64_t tomb = 1000;
    sc_insert_expiring(f, "ev", T0);
    sc_insert_new(f, "other", "t1", "a", AD_QUEUED, AD_PRIO_NORMAL, 0);
    assert_int_equal(ops->event_append(f->c, "ev", 10, "status", "{\"s\":1}"), AD_E_OK);
    assert_int_equal(ops->event_append(f->c, "other", 11, "status", "{\"o\":1}"), AD_E_OK);
    assert_int_equal(ops->event_append(f->c, "ev", 12, "progress", "{\"p\":5}"), AD_E_OK);
    assert_int_equal(ops->event_append(f->c, "ev", 13, "done", NULL), AD_E_OK);
    assert_int_not_equal(ops->event_append(f->c, "ev", 12, "progress", "{}"), AD_E_OK); /* one event per seq */

    sc_events(f, "ev", 0, 100, "10:status:{\"s\":1} 12:progress:{\"p\":5} 13:done:-");
    sc_events(f, "ev", 10, 1, "12:progress:{\"p\":5}");
    sc_events(f, "ev", 12, 100, "13:done:-");
    sc_events(f, "ev", 13, 100, "");
    sc_events(f, "nope", 0, 100, "");

    int n;
    assert_int_equal(ops->sweep(f->c, T0, tomb, 10, &n), AD_E_OK); /* tombstones ev */
    sc_events(f, "ev", 0, 100, "");
    sc_events(f, "other", 0, 100, "11:status:{\"o\":1}");
    assert_int_equal(ops->event_append(f->c, "ev", 14, "status", "{}"), AD_E_OK);
    assert_int_equal(ops->sweep(f->c, T0 + tomb, tomb, 10, &n), AD_E_OK); /* deletes ev */
    sc_assert_not_found(f, f->c, NULL, "ev");
    sc_events(f, "ev", 0, 100, "");
    sc_events(f, "other", 0, 100, "11:status:{\"o\":1}");
}

/* The attempt history: rows oldest first, with their worker (or none), times and outcome; deleted with the job. */
static void sc_test_attempts(void **state)
{
    struct fx *f = *state;
    const struct ad_store_ops *ops = f->s->ops;
    const int64_t tomb = 1000;
    sc_insert_expiring(f, "e1", T0 - 10);
    sc_insert_new(f, "other", "t1", "a", AD_QUEUED, AD_PRIO_NORMAL, 0);
    struct ad_attempt_list al;
    assert_int_equal(ops->attempt_list(f->c, "e1", &al), AD_E_OK);
    assert_int_equal(al.n, 0);
    ad_attempt_list_free(&al);

    struct ad_job a1 = {.id = "e1", .attempt = 1, .worker = "w1", .started_at = T0 - 100};
    struct ad_job a2 = {.id = "e1", .attempt = 2, .started_at = T0 - 80};
    struct ad_job o1 = {.id = "other", .attempt = 1, .worker = "w9", .started_at = T0 - 50};
    assert_int_equal(ops->attempt_add(f->c, &a1, T0 - 90, "retrying"), AD_E_OK);
    assert_int_equal(ops->attempt_add(f->c, &o1, T0 - 40, "released"), AD_E_OK);
    assert_int_equal(ops->attempt_add(f->c, &a2, T0 - 70, "failed"), AD_E_OK);
    assert_int_equal(ops->attempt_list(f->c, "e1", &al), AD_E_OK);
    assert_int_equal(al.n, 2);
    assert_int_equal(al.items[0].attempt, 1);
    assert_string_equal(al.items[0].worker, "w1");
    assert_int_equal(al.items[0].started_at, T0 - 100);
    assert_int_equal(al.items[0].ended_at, T0 - 90);
    assert_string_equal(al.items[0].outcome, "retrying");
    assert_int_equal(al.items[1].attempt, 2);
    assert_null(al.items[1].worker);
    assert_int_equal(al.items[1].started_at, T0 - 80);
    assert_int_equal(al.items[1].ended_at, T0 - 70);
    assert_string_equal(al.items[1].outcome, "failed");
    ad_attempt_list_free(&al);

    /* Tombstoned, the job keeps its history; deleted, it goes with it. */
    int n;
    assert_int_equal(ops->sweep(f->c, T0, tomb, 10, &n), AD_E_OK);
    assert_int_equal(ops->attempt_list(f->c, "e1", &al), AD_E_OK);
    assert_int_equal(al.n, 2);
    ad_attempt_list_free(&al);
    assert_int_equal(ops->sweep(f->c, T0 + tomb, tomb, 10, &n), AD_E_OK);
    sc_assert_not_found(f, f->c, NULL, "e1");
    assert_int_equal(ops->attempt_list(f->c, "e1", &al), AD_E_OK);
    assert_int_equal(al.n, 0);
    ad_attempt_list_free(&al);
    assert_int_equal(ops->attempt_list(f->c, "other", &al), AD_E_OK);
    assert_int_equal(al.n, 1);
    assert_string_equal(al.items[0].worker, "w9");
    ad_attempt_list_free(&al);
}

static void sc_test_idempotency_records(void **state)
{
    struct fx *f = *state;
    const struct ad_store_ops *ops = f->s->ops;
    const char *fp1 = "0000000000000000000000000000000000000000000000000000000000000001";
    const char *fp2 = "ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff";
    assert_int_equal(ops->idem_put(f->c, "t1", "k1", fp1, "job_1", T0), AD_E_OK);
    assert_int_equal(ops->idem_put(f->c, "t2", "k1", fp2, "job_2", T0 + 10), AD_E_OK);
    assert_int_equal(ops->idem_put(f->c, "t1", "k3", fp2, "job_3", T0 + 20), AD_E_OK);

    struct ad_idem r;
    assert_int_equal(ops->idem_get(f->c, "t1", "k1", &r), AD_E_OK);
    assert_string_equal(r.fingerprint, fp1);
    assert_string_equal(r.job_id, "job_1");
    assert_int_equal(r.created_at, T0);
    free(r.job_id);
    assert_int_equal(ops->idem_get(f->c, "t2", "k1", &r), AD_E_OK);
    assert_string_equal(r.fingerprint, fp2);
    assert_string_equal(r.job_id, "job_2");
    free(r.job_id);
    assert_int_equal(ops->idem_get(f->c, "t3", "k1", &r), AD_E_NOT_FOUND);
    assert_null(r.job_id);
    assert_int_equal(ops->idem_get(f->c, "t1", "k2", &r), AD_E_NOT_FOUND);

    /* A put on an existing key replaces the record. */
    assert_int_equal(ops->idem_put(f->c, "t1", "k1", fp2, "job_9", T0 + 30), AD_E_OK);
    assert_int_equal(ops->idem_get(f->c, "t1", "k1", &r), AD_E_OK);
    assert_string_equal(r.fingerprint, fp2);
    assert_string_equal(r.job_id, "job_9");
    assert_int_equal(r.created_at, T0 + 30);
    free(r.job_id);

    /* Now t2/k1 (T0 + 10) and t1/k3 (T0 + 20) are older than T0 + 21; t1/k1 (T0 + 30) is not. */
    int n = -1;
    assert_int_equal(ops->idem_sweep(f->c, T0 + 21, 1, &n), AD_E_OK);
    assert_int_equal(n, 1);
    assert_int_equal(ops->idem_sweep(f->c, T0 + 21, 10, &n), AD_E_OK);
    assert_int_equal(n, 1);
    assert_int_equal(ops->idem_sweep(f->c, T0 + 21, 10, &n), AD_E_OK);
    assert_int_equal(n, 0);
    assert_int_equal(ops->idem_get(f->c, "t2", "k1", &r), AD_E_NOT_FOUND);
    assert_int_equal(ops->idem_get(f->c, "t1", "k3", &r), AD_E_NOT_FOUND);
    assert_int_equal(ops->idem_get(f->c, "t1", "k1", &r), AD_E_OK);
    free(r.job_id);
}

#endif
