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
#include "common/error.h"
#include "common/util.h"

/* Set the data directory and create <data>/artifacts. 0, or -1 with err filled. */
int ad_artifact_init(const char *data_dir, char *err, size_t errlen);

/* One part of an upload. */
struct ad_artifact_part {
    const char *job_id, *lease_id;
    int fresh;         /* no offset given: start afresh, dropping what an earlier upload under the lease left */
    uint64_t offset;   /* where the part goes: must be the bytes received so far */
    const char *ctype; /* the content type, kept from the first part */
    const void *data;
    size_t len;
    int last;            /* the upload is complete with this part */
    uint64_t max_bytes;  /* cap on the whole artifact */
    int has_part_digest; /* Content-Digest: the part's SHA-256 must be part_sha */
    uint8_t part_sha[AD_SHA256_LEN];
    int has_repr_digest; /* Repr-Digest (last part): the whole artifact's SHA-256 must be repr_sha */
    uint8_t repr_sha[AD_SHA256_LEN];
};

/* Write a part. AD_E_OK with *offset the bytes received now, and, for the last part, *view the artifact's JSON view
 * (heap, caller frees). AD_E_UPLOAD_OFFSET (*offset: the bytes received so far), AD_E_DIGEST_MISMATCH (nothing kept
 * of the part; of the whole upload when the artifact's digest is wrong), AD_E_PAYLOAD_TOO_LARGE, AD_E_STORAGE_FULL
 * (the part is undone), AD_E_INTERNAL. */
ad_err ad_artifact_write(const struct ad_artifact_part *p, uint64_t *offset, char **view);

/* How far the upload under lease_id got: *offset, and *done 1 once it is finished. AD_E_NOT_FOUND when there is
 * none. */
ad_err ad_artifact_progress(const char *job_id, const char *lease_id, uint64_t *offset, int *done);

/* The JSON view of the finished upload under lease_id (heap), or NULL when it is not finished. */
char *ad_artifact_view(const char *job_id, const char *lease_id);

/* The path of the finished artifact under lease_id, into out. -1 when it does not fit. */
int ad_artifact_path(const char *job_id, const char *lease_id, char *out, size_t len);

/*
 * The collector: for each job directory, keep(arg, job id, lease ids, n) says which of its leases' files stay
 * (it sets keep[i] for each); the others, and a directory left empty, are removed. Returns how many files went.
 */
typedef void (*ad_artifact_keep_fn)(void *arg, const char *job_id, char *const *leases, size_t n, int *keep);
int ad_artifact_gc(ad_artifact_keep_fn keep, void *arg);

#endif
