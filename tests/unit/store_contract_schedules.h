/*
 * store_contract_schedules.h - the store contract's schedule rows (store.h, schedule_*), for both backends: a row
 * round-trips, lists by id in pages and by tenant, the due rows come soonest first without the paused (no next
 * fire time), and a fire's compare-and-set on next_at refuses a stale one: nothing of the refused write stays.
 * Included by store_contract.h.
 */

static void sc_sched(struct ad_schedule *s, const char *tenant, const char *id, int64_t next_at)
{
    *s = (struct ad_schedule){.tenant = (char *)tenant,
                              .id = (char *)id,
                              .spec = "{\"every\":\"1s\"}",
                              .tmpl = "{\"type\":\"a\"}",
                              .next_at = next_at,
                              .recent = "[]",
                              .created_at = T0,
                              .updated_at = T0,
                              .version = 1};
}

static void sc_test_schedules(void **state)
{
    struct fx *f = *state;
    const struct ad_store_ops *o = f->s->ops;
    struct ad_schedule s1, s2, s3, other, got;
    sc_sched(&s1, "t1", "b-second", T0 + 2000);
    sc_sched(&s2, "t1", "a-first", T0 + 1000);
    sc_sched(&s3, "t1", "c-paused", 0);
    sc_sched(&other, "t2", "a-first", T0 + 500);
    assert_int_equal(o->begin(f->c), AD_E_OK);
    assert_int_equal(o->schedule_put(f->c, &s1, 1, 0), AD_E_OK);
    assert_int_equal(o->schedule_put(f->c, &s2, 1, 0), AD_E_OK);
    assert_int_equal(o->schedule_put(f->c, &s3, 1, 0), AD_E_OK);
    assert_int_equal(o->schedule_put(f->c, &other, 1, 0), AD_E_OK);
    assert_int_equal(o->commit(f->c), AD_E_OK);

    assert_int_equal(o->schedule_get(f->c, "t1", "a-first", &got), AD_E_OK);
    assert_string_equal(got.spec, s2.spec);
    assert_string_equal(got.tmpl, s2.tmpl);
    assert_string_equal(got.recent, "[]");
    assert_null(got.last_job);
    assert_int_equal(got.next_at, T0 + 1000);
    assert_int_equal(got.created_at, T0);
    assert_int_equal(got.version, 1);
    ad_schedule_clear(&got);
    assert_int_equal(o->schedule_get(f->c, "t3", "a-first", &got), AD_E_NOT_FOUND);

    /* By id, in pages, one tenant only. */
    struct ad_schedule_list l;
    assert_int_equal(o->schedule_list(f->c, "t1", NULL, 2, &l), AD_E_OK);
    assert_int_equal(l.n, 2);
    assert_string_equal(l.items[0].id, "a-first");
    assert_string_equal(l.items[1].id, "b-second");
    ad_schedule_list_free(&l);
    assert_int_equal(o->schedule_list(f->c, "t1", "b-second", 2, &l), AD_E_OK);
    assert_int_equal(l.n, 1);
    assert_string_equal(l.items[0].id, "c-paused");
    ad_schedule_list_free(&l);

    /* Due: soonest first, up to the bound, every tenant, never a row without a next fire time. */
    assert_int_equal(o->schedule_due(f->c, T0 + 1500, 10, &l), AD_E_OK);
    assert_int_equal(l.n, 2);
    assert_string_equal(l.items[0].tenant, "t2");
    assert_string_equal(l.items[1].id, "a-first");
    ad_schedule_list_free(&l);
    assert_int_equal(o->schedule_due(f->c, INT64_MAX, 1, &l), AD_E_OK);
    assert_int_equal(l.n, 1);
    assert_int_equal(l.items[0].next_at, T0 + 500);
    ad_schedule_list_free(&l);

    /* The compare-and-set: a write that read the current next_at goes through... */
    s2.next_at = T0 + 3000;
    s2.last_job = "job_1";
    s2.recent = "[{\"jobId\":\"job_1\"}]";
    s2.fires = 1;
    s2.version = 2;
    assert_int_equal(o->begin(f->c), AD_E_OK);
    assert_int_equal(o->schedule_put(f->c, &s2, 0, T0 + 1000), AD_E_OK);
    assert_int_equal(o->commit(f->c), AD_E_OK);
    /* ...one that read a stale one does not: refused at once, or its commit fails (writes sent ahead). */
    struct ad_schedule stale = s2;
    stale.next_at = T0 + 9000;
    stale.fires = 7;
    assert_int_equal(o->begin(f->c), AD_E_OK);
    ad_err e = o->schedule_put(f->c, &stale, 0, T0 + 1000);
    if (e == AD_E_OK)
        assert_int_not_equal(o->commit(f->c), AD_E_OK);
    else {
        assert_int_equal(e, AD_E_NOT_FOUND);
        o->rollback(f->c);
    }
    assert_int_equal(o->schedule_get(f->c, "t1", "a-first", &got), AD_E_OK);
    assert_int_equal(got.next_at, T0 + 3000);
    assert_int_equal(got.fires, 1);
    assert_string_equal(got.last_job, "job_1");
    assert_string_equal(got.recent, s2.recent);
    ad_schedule_clear(&got);
    /* A row without a next fire time matches an expected 0. */
    s3.spec = "{\"every\":\"2s\"}";
    assert_int_equal(o->begin(f->c), AD_E_OK);
    assert_int_equal(o->schedule_put(f->c, &s3, 0, 0), AD_E_OK);
    assert_int_equal(o->commit(f->c), AD_E_OK);
    assert_int_equal(o->schedule_get(f->c, "t1", "c-paused", &got), AD_E_OK);
    assert_string_equal(got.spec, "{\"every\":\"2s\"}");
    ad_schedule_clear(&got);

    /* Delete: gone, the other tenant's row of the same id stays. */
    assert_int_equal(o->begin(f->c), AD_E_OK);
    assert_int_equal(o->schedule_delete(f->c, "t1", "a-first"), AD_E_OK);
    assert_int_equal(o->commit(f->c), AD_E_OK);
    assert_int_equal(o->schedule_get(f->c, "t1", "a-first", &got), AD_E_NOT_FOUND);
    assert_int_equal(o->schedule_get(f->c, "t2", "a-first", &got), AD_E_OK);
    ad_schedule_clear(&got);
}
