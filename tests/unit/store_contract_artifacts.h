/*
 * store_contract_artifacts.h - the store contract's tests (store_contract.h) of result artifacts: parts, offsets,
 * digests, views, reads and collection. Included by store_contract.h only, after its helpers.
 */
#ifndef AD_STORE_CONTRACT_ARTIFACTS_H
#define AD_STORE_CONTRACT_ARTIFACTS_H

/* ---- result artifacts ---- */

static struct ad_artifact_part sc_part(const char *job, const char *lease, const char *data, int fresh, uint64_t off,
                                       int last)
{
    struct ad_artifact_part p = {.job_id = job,
                                 .lease_id = lease,
                                 .fresh = fresh,
                                 .offset = off,
                                 .ctype = "text/plain",
                                 .data = data,
                                 .len = strlen(data),
                                 .last = last,
                                 .max_bytes = 1 << 20};
    return p;
}

/* Parts append at their offset only, the last one makes the view, reads give the bytes back from any offset; an
 * upload no job names is the collector's, and the ones a job names (its live lease's, its artifact's) stay. */
static void sc_test_artifacts(void **state)
{
    struct fx *f = *state;
    const struct ad_store_ops *ops = f->s->ops;
    uint64_t off = 99;
    char *view = NULL;
    int done = 1;
    assert_int_equal(ops->artifact_progress(f->c, "art1", "L1", &off, &done), AD_E_NOT_FOUND);
    struct ad_artifact_part p = sc_part("art1", "L1", "hello ", 1, 0, 0);
    assert_int_equal(ops->artifact_write(f->c, &p, &off, &view), AD_E_OK);
    assert_int_equal(off, 6);
    assert_null(view);
    /* A part that is not where the upload is: refused, with where it is. */
    p = sc_part("art1", "L1", "world", 0, 3, 1);
    assert_int_equal(ops->artifact_write(f->c, &p, &off, &view), AD_E_UPLOAD_OFFSET);
    assert_int_equal(off, 6);
    assert_int_equal(ops->artifact_progress(f->c, "art1", "L1", &off, &done), AD_E_OK);
    assert_int_equal(off, 6);
    assert_int_equal(done, 0);
    assert_int_equal(ops->artifact_view(f->c, "art1", "L1", &view), AD_E_NOT_FOUND);
    /* A part whose Content-Digest is wrong is not kept. */
    p = sc_part("art1", "L1", "world", 0, 6, 1);
    p.has_part_digest = 1;
    assert_int_equal(ops->artifact_write(f->c, &p, &off, &view), AD_E_DIGEST_MISMATCH);
    ad_sha256("world", 5, p.part_sha);
    assert_int_equal(ops->artifact_write(f->c, &p, &off, &view), AD_E_OK);
    assert_int_equal(off, 11);
    assert_non_null(view);
    /* sha-256("hello world") */
    assert_non_null(strstr(view, "\"size\":11,\"contentType\":\"text/plain\",\"digest\":\"sha-256=:"
                                 "uU0nuZNNPgilLlLX2n2r+sSE7+N6U4DukIj3rOLvzek=:\""));
    char *again = NULL;
    assert_int_equal(ops->artifact_view(f->c, "art1", "L1", &again), AD_E_OK);
    assert_string_equal(again, view);
    free(again);
    free(view);
    assert_int_equal(ops->artifact_progress(f->c, "art1", "L1", &off, &done), AD_E_OK);
    assert_int_equal(done, 1);
    char buf[32];
    size_t n = 0;
    assert_int_equal(ops->artifact_read(f->c, "art1", "L1", 4, buf, sizeof(buf), &n), AD_E_OK);
    /* A read may end early at a part's end (PostgreSQL reads one part at a time): read on until the end. */
    size_t got = n;
    while (n > 0 && got < 7) {
        assert_int_equal(ops->artifact_read(f->c, "art1", "L1", 4 + got, buf + got, sizeof(buf) - got, &n), AD_E_OK);
        got += n;
    }
    assert_int_equal(got, 7);
    assert_memory_equal(buf, "o world", 7);
    /* The whole artifact's digest is checked too: a wrong one drops the upload. */
    p = sc_part("art2", "L2", "abc", 1, 0, 1);
    p.has_repr_digest = 1;
    assert_int_equal(ops->artifact_write(f->c, &p, &off, &view), AD_E_DIGEST_MISMATCH);
    assert_int_equal(ops->artifact_progress(f->c, "art2", "L2", &off, &done), AD_E_NOT_FOUND);
    /* Past the cap. */
    p = sc_part("art2", "L2", "abc", 1, 0, 1);
    p.max_bytes = 2;
    assert_int_equal(ops->artifact_write(f->c, &p, &off, &view), AD_E_PAYLOAD_TOO_LARGE);

    /* The collector: art1's job names L1 as its artifact, art3's runs under L3; the rest goes. */
    struct ad_job *j = new_job("art1", "t1", "a", AD_SUCCEEDED, AD_PRIO_NORMAL);
    j->artifact = ad_strdup("L1 {}");
    sc_insert(f, j);
    ad_job_free(j);
    j = new_job("art3", "t1", "a", AD_RUNNING, AD_PRIO_NORMAL);
    j->lease_id = ad_strdup("L3");
    sc_insert(f, j);
    ad_job_free(j);
    const char *const uploads[][2] = {{"art1", "L0"}, {"art3", "L3"}, {"art3", "L4"}, {"gone", "L5"}};
    for (size_t i = 0; i < sizeof(uploads) / sizeof(uploads[0]); i++) {
        p = sc_part(uploads[i][0], uploads[i][1], "x", 1, 0, 0);
        assert_int_equal(ops->artifact_write(f->c, &p, &off, &view), AD_E_OK);
    }
    int removed = -1;
    assert_int_equal(ops->artifact_gc(f->c, &removed), AD_E_OK);
    assert_int_equal(removed, 3); /* art1's L0, art3's L4, gone's L5 */
    assert_int_equal(ops->artifact_progress(f->c, "art1", "L1", &off, &done), AD_E_OK);
    assert_int_equal(ops->artifact_progress(f->c, "art3", "L3", &off, &done), AD_E_OK);
    assert_int_equal(ops->artifact_progress(f->c, "art1", "L0", &off, &done), AD_E_NOT_FOUND);
    assert_int_equal(ops->artifact_progress(f->c, "art3", "L4", &off, &done), AD_E_NOT_FOUND);
    assert_int_equal(ops->artifact_progress(f->c, "gone", "L5", &off, &done), AD_E_NOT_FOUND);
    assert_int_equal(ops->artifact_gc(f->c, &removed), AD_E_OK);
    assert_int_equal(removed, 0);
}

#endif
