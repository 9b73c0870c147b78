/*
 * artifact.h - the files of result artifacts on the embedded store: what a worker uploads under its lease, kept
 * in the data directory next to the database, in <data>/artifacts/<job id>/:
 *
 *   <lease id>.part   the bytes received so far (an upload in progress)
 *   <lease id>.state  how far it got: the offset, the running SHA-256 and the content type (resumes after a restart)
 *   <lease id>        the finished artifact, fsync'd
 *   <lease id>.meta   its JSON view {"size", "contentType", "digest", "href"}, fsync'd with it
 *
 * A finished file is visible only once the job row names its lease (job.h, artifact): completing the job is the
 * one commit that publishes it, so a crash at any point leaves either no artifact or a whole one. Files that no
 * job row names (a lease that ended otherwise, a job swept by retention) are the collector's (ad_artifact_gc).
 * The functions here do blocking file I/O: api_artifacts.c runs them on a thread of their own.
 */
#ifndef AD_ARTIFACT_H
#define AD_ARTIFACT_H

#include <stddef.h>
#include <stdint.h>
#include "store/store.h"

/*
 * What every backend shares: an upload's state between parts (the offset, the running SHA-256, saved as plain bytes
 * so that an upload resumes across a restart without reading back what it received) and the artifact's view.
 */
#define AD_ARTIFACT_CTYPE_MAX 256
struct ad_artifact_state {
    uint64_t magic;
    uint64_t offset;
    unsigned char sha[128]; /* a SHA256_CTX */
    char ctype[AD_ARTIFACT_CTYPE_MAX];
};
void ad_artifact_state_init(struct ad_artifact_state *st, const char *ctype);
/* 1 when st holds a saved state (what ad_artifact_state_init made, updated). */
int ad_artifact_state_valid(const struct ad_artifact_state *st);
void ad_artifact_state_update(struct ad_artifact_state *st, const void *data, size_t len);
void ad_artifact_state_final(struct ad_artifact_state *st, uint8_t md[32]);
/* The JSON view of a finished artifact (heap): {"size", "contentType", "digest", "href"}. */
char *ad_artifact_render_view(const char *job_id, uint64_t size, const char *ctype, const uint8_t md[32]);
/* 0 when p carries no Content-Digest or its data matches it, else AD_E_DIGEST_MISMATCH. */
ad_err ad_artifact_check_part(const struct ad_artifact_part *p);

/* 1 when job j (NULL: there is none) keeps the files of the upload under lease_id: its live lease's (an upload in
 * progress) or its artifact's. */
int ad_artifact_kept(const struct ad_job *j, const char *lease_id);

/* The files backend (SQLite). Set the data directory and create <data>/artifacts: 0, or -1 with err filled. */
int ad_artifact_init(const char *data_dir, char *err, size_t errlen);
/* ad_store_ops.artifact_write, _progress, _view and _read over the files. */
ad_err ad_artifact_write(const struct ad_artifact_part *p, uint64_t *offset, char **view);
ad_err ad_artifact_progress(const char *job_id, const char *lease_id, uint64_t *offset, int *done);
ad_err ad_artifact_view(const char *job_id, const char *lease_id, char **view);
ad_err ad_artifact_read(const char *job_id, const char *lease_id, uint64_t off, void *buf, size_t len, size_t *n);
/*
 * The collector: for each job directory, keep(arg, job id, lease ids, n, keep) says which of its leases' files stay
 * (it sets keep[i] for each; it returns -1 when it cannot say, and nothing of that job goes); the others, and a
 * directory left empty, are removed. Returns how many leases' files went.
 */
typedef int (*ad_artifact_keep_fn)(void *arg, const char *job_id, char *const *leases, size_t n, int *keep);
int ad_artifact_gc(ad_artifact_keep_fn keep, void *arg);

#endif
