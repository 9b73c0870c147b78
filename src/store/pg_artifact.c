/*
 * pg_artifact.c - result artifacts in the PostgreSQL store (store.h, artifact_*), as rows every node reads.
 *
 * artifact_uploads has a row per upload (its size, the state that resumes it, and once finished its view);
 * artifact_chunks a row per part, keyed by its offset, stored uncompressed (STORAGE EXTERNAL) so that a read of a
 * range fetches only the pages it covers. A part is committed with its state in one transaction: what a client was
 * told is received is durable. These statements share the store's connections but leave the pipeline for their run
 * (art_begin): they carry megabytes as binary parameters and results, one at a time, on a connection that has
 * nothing else in flight. What is checked of a part (offsets, digests, sizes) is store/artifact.c's, shared with
 * SQLite's files.
 */
#include "store/store_pg_int.h"
#include "store/artifact.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Leave pipeline mode for a run of artifact statements. AD_E_OK, or AD_E_UNAVAILABLE when the connection is down. */
static ad_err art_begin(struct ad_conn *c)
{
    if (ad_pg_revive(c) != 0)
        return AD_E_UNAVAILABLE;
    if (c->npend != 0 || c->in_tx) {
        ad_error("store: artifact statement on a connection with writes in flight");
        return AD_E_INTERNAL;
    }
    if (PQpipelineStatus(c->pg) != PQ_PIPELINE_OFF && !PQexitPipelineMode(c->pg))
        return ad_pg_fail_conn(c, "exit pipeline mode");
    return AD_E_OK;
}

static void art_end(struct ad_conn *c)
{
    if (PQpipelineStatus(c->pg) == PQ_PIPELINE_OFF && PQstatus(c->pg) == CONNECTION_OK && !PQenterPipelineMode(c->pg))
        ad_pg_fail_conn(c, "enter pipeline mode");
}

/* Run sql with n parameters (lens/fmts NULL: all text); *out the result when wanted (caller clears). */
static ad_err art_exec(struct ad_conn *c, const char *sql, int n, const char *const *vals, const int *lens,
                       const int *fmts, int binary, PGresult **out, const char *what)
{
    PGresult *r = PQexecParams(c->pg, sql, n, NULL, vals, lens, fmts, binary);
    ExecStatusType st = PQresultStatus(r);
    if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK) {
        if (out != NULL)
            *out = r;
        else
            PQclear(r);
        return AD_E_OK;
    }
    ad_err e = r != NULL ? ad_pg_fail_result(c, r, what) : ad_pg_fail_conn(c, what);
    PQclear(r);
    return e;
}

static void art_rollback(struct ad_conn *c)
{
    PQclear(PQexec(c->pg, "ROLLBACK"));
}

ad_err ad_pg_artifact_write(struct ad_conn *c, const struct ad_artifact_part *p, uint64_t *offset, char **view)
{
    *view = NULL;
    ad_err err = ad_artifact_check_part(p);
    if (err != AD_E_OK)
        return err;
    if ((err = art_begin(c)) != AD_E_OK)
        return err;
    const char *key[2] = {p->job_id, p->lease_id};
    PGresult *r = NULL;
    struct ad_artifact_state st;
    err = art_exec(c, "BEGIN", 0, NULL, NULL, NULL, 0, NULL, "begin an artifact part");
    int fresh = p->fresh;
    if (err == AD_E_OK && !fresh) {
        err = art_exec(
            c, "SELECT state FROM artifact_uploads WHERE job_id = $1 AND lease_id = $2 AND view IS NULL FOR UPDATE", 2,
            key, NULL, NULL, 1, &r, "read an upload's state");
        int none = err == AD_E_OK && (PQntuples(r) != 1 || PQgetlength(r, 0, 0) != (int)sizeof(st));
        if (none && p->offset == 0)
            fresh = 1; /* offset 0 with nothing received: the start */
        else if (none)
            err = AD_E_UPLOAD_OFFSET; /* none in progress */
        else if (err == AD_E_OK)
            memcpy(&st, PQgetvalue(r, 0, 0), sizeof(st));
        *offset = 0;
        if (err == AD_E_OK && !fresh && (!ad_artifact_state_valid(&st) || st.offset != p->offset)) {
            *offset = st.offset;
            err = AD_E_UPLOAD_OFFSET;
        }
        PQclear(r);
    }
    if (err == AD_E_OK && fresh) {
        err = art_exec(c, "DELETE FROM artifact_chunks WHERE job_id = $1 AND lease_id = $2", 2, key, NULL, NULL, 0,
                       NULL, "drop an earlier upload");
        ad_artifact_state_init(&st, p->ctype);
    }
    if (err == AD_E_OK && st.offset + p->len > p->max_bytes)
        err = AD_E_PAYLOAD_TOO_LARGE;
    if (err == AD_E_OK && p->len > 0) {
        char off[24];
        snprintf(off, sizeof(off), "%llu", (unsigned long long)st.offset);
        const char *vals[4] = {p->job_id, p->lease_id, off, p->data};
        const int lens[4] = {0, 0, 0, (int)p->len}, fmts[4] = {0, 0, 0, 1};
        err = art_exec(c, "INSERT INTO artifact_chunks (job_id, lease_id, off, data) VALUES ($1, $2, $3, $4)", 4, vals,
                       lens, fmts, 0, NULL, "write an artifact part");
    }
    if (err == AD_E_OK)
        ad_artifact_state_update(&st, p->data, p->len);
    int mismatch = 0;
    if (err == AD_E_OK && p->last) {
        uint8_t md[32];
        ad_artifact_state_final(&st, md);
        mismatch = p->has_repr_digest && memcmp(md, p->repr_sha, sizeof(md)) != 0;
        if (!mismatch)
            *view = ad_artifact_render_view(p->job_id, st.offset, st.ctype, md);
    }
    if (err == AD_E_OK && mismatch) {
        err = art_exec(c, "DELETE FROM artifact_chunks WHERE job_id = $1 AND lease_id = $2", 2, key, NULL, NULL, 0,
                       NULL, "drop an upload");
        if (err == AD_E_OK)
            err = art_exec(c, "DELETE FROM artifact_uploads WHERE job_id = $1 AND lease_id = $2", 2, key, NULL, NULL, 0,
                           NULL, "drop an upload");
    } else if (err == AD_E_OK) {
        char size[24];
        snprintf(size, sizeof(size), "%llu", (unsigned long long)st.offset);
        const char *vals[5] = {p->job_id, p->lease_id, size, (const char *)&st, *view};
        const int lens[5] = {0, 0, 0, (int)sizeof(st), 0}, fmts[5] = {0, 0, 0, 1, 0};
        err = art_exec(c,
                       "INSERT INTO artifact_uploads (job_id, lease_id, size, state, view) VALUES ($1, $2, $3, $4, $5)"
                       " ON CONFLICT (job_id, lease_id) DO UPDATE SET size = $3, state = $4, view = $5",
                       5, vals, lens, fmts, 0, NULL, "write an upload's state");
    }
    if (err == AD_E_OK)
        err = art_exec(c, "COMMIT", 0, NULL, NULL, NULL, 0, NULL, "commit an artifact part");
    else
        art_rollback(c);
    art_end(c);
    if (err == AD_E_OK && mismatch)
        err = AD_E_DIGEST_MISMATCH;
    if (err == AD_E_OK)
        *offset = st.offset;
    else {
        free(*view);
        *view = NULL;
    }
    return err;
}

/* The row of the upload under lease_id: size and view (NULL while in progress). */
static ad_err art_row(struct ad_conn *c, const char *job_id, const char *lease_id, PGresult **r)
{
    ad_err err = art_begin(c);
    if (err != AD_E_OK)
        return err;
    const char *key[2] = {job_id, lease_id};
    err = art_exec(c, "SELECT size, view FROM artifact_uploads WHERE job_id = $1 AND lease_id = $2", 2, key, NULL, NULL,
                   0, r, "read an upload");
    art_end(c);
    if (err == AD_E_OK && PQntuples(*r) != 1) {
        PQclear(*r);
        *r = NULL;
        err = AD_E_NOT_FOUND;
    }
    return err;
}

ad_err ad_pg_artifact_progress(struct ad_conn *c, const char *job_id, const char *lease_id, uint64_t *offset, int *done)
{
    PGresult *r;
    ad_err err = art_row(c, job_id, lease_id, &r);
    if (err != AD_E_OK)
        return err;
    *offset = strtoull(PQgetvalue(r, 0, 0), NULL, 10);
    *done = !PQgetisnull(r, 0, 1);
    PQclear(r);
    return AD_E_OK;
}

ad_err ad_pg_artifact_view(struct ad_conn *c, const char *job_id, const char *lease_id, char **view)
{
    *view = NULL;
    PGresult *r;
    ad_err err = art_row(c, job_id, lease_id, &r);
    if (err != AD_E_OK)
        return err;
    if (!PQgetisnull(r, 0, 1))
        *view = ad_strdup(PQgetvalue(r, 0, 1));
    PQclear(r);
    return *view != NULL ? AD_E_OK : AD_E_NOT_FOUND;
}

ad_err ad_pg_artifact_read(struct ad_conn *c, const char *job_id, const char *lease_id, uint64_t off, void *buf,
                           size_t len, size_t *n)
{
    *n = 0;
    ad_err err = art_begin(c);
    if (err != AD_E_OK)
        return err;
    char o[24], l[24];
    snprintf(o, sizeof(o), "%llu", (unsigned long long)off);
    snprintf(l, sizeof(l), "%zu", len);
    const char *vals[4] = {job_id, lease_id, o, l};
    PGresult *r = NULL;
    /* The part holding off, from there: a range read of a TOASTed value fetches only the chunks it covers. */
    err = art_exec(c,
                   "SELECT substring(data from ($3::bigint - off + 1)::int for $4::int) FROM artifact_chunks"
                   " WHERE job_id = $1 AND lease_id = $2 AND off <= $3::bigint ORDER BY off DESC LIMIT 1",
                   4, vals, NULL, NULL, 1, &r, "read an artifact");
    art_end(c);
    if (err != AD_E_OK)
        return err;
    if (PQntuples(r) == 1) {
        size_t got = (size_t)PQgetlength(r, 0, 0);
        *n = got < len ? got : len;
        memcpy(buf, PQgetvalue(r, 0, 0), *n);
    }
    PQclear(r);
    return AD_E_OK;
}

ad_err ad_pg_artifact_gc(struct ad_conn *c, int *removed)
{
    *removed = 0;
    ad_err err = art_begin(c);
    if (err != AD_E_OK)
        return err;
    PGresult *r = NULL;
    /* Kept: a running job's upload under its live lease, and the artifact a job names ("<lease> <view>"). */
    err = art_exec(c,
                   "WITH dead AS (SELECT u.job_id, u.lease_id FROM artifact_uploads u WHERE NOT EXISTS ("
                   "SELECT 1 FROM jobs j WHERE j.id = u.job_id AND j.tombstoned = 0 AND ((j.status = 1 AND j.lease_id"
                   " = u.lease_id) OR left(j.artifact, length(u.lease_id) + 1) = u.lease_id || ' '))),"
                   " chunks AS (DELETE FROM artifact_chunks k USING dead d WHERE k.job_id = d.job_id AND k.lease_id ="
                   " d.lease_id)"
                   " DELETE FROM artifact_uploads u USING dead d WHERE u.job_id = d.job_id AND u.lease_id = d.lease_id",
                   0, NULL, NULL, NULL, 0, &r, "collect artifacts");
    art_end(c);
    if (err == AD_E_OK) {
        *removed = (int)strtol(PQcmdTuples(r), NULL, 10);
        PQclear(r);
    }
    return err;
}
