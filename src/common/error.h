/*
 * error.h - the project's error codes, one list for every layer.
 *
 * The core and the store return these codes; only the HTTP layer turns them into a status and an
 * RFC 9457 problem. Each entry: enum name, stable machine code (also the last path segment of the
 * problem `type` URI), HTTP status, problem title. Add new codes at the end of a group, never reuse one.
 * The first entry of each status is its generic code: the one an error h2o answers itself is given.
 */
#ifndef AD_ERROR_H
#define AD_ERROR_H

#define AD_PROBLEM_BASE "https://acceptd.dev/problems/"

#define AD_ERRNO_MAP(XX)                                                                                               \
    XX(OK, "ok", 200, "OK")                                                                                            \
    XX(INVALID_REQUEST, "invalid-request", 400, "Invalid request")                                                     \
    XX(MALFORMED_JSON, "malformed-json", 400, "Malformed JSON")                                                        \
    XX(DIGEST_MISMATCH, "digest-mismatch", 400, "Digest does not match the content")                                   \
    XX(IDEMPOTENCY_KEY_MISSING, "idempotency-key-missing", 400, "Idempotency-Key required")                            \
    XX(IDEMPOTENCY_KEY_INVALID, "idempotency-key-invalid", 400, "Invalid Idempotency-Key")                             \
    XX(UNAUTHORIZED, "unauthorized", 401, "Authentication required")                                                   \
    XX(FORBIDDEN, "forbidden", 403, "Not allowed for this key's role")                                                 \
    XX(NOT_FOUND, "not-found", 404, "Not found")                                                                       \
    XX(RESULT_NOT_READY, "result-not-ready", 404, "The job has no result yet")                                         \
    XX(METHOD_NOT_ALLOWED, "method-not-allowed", 405, "Method not allowed")                                            \
    XX(NOT_ACCEPTABLE, "not-acceptable", 406, "Not acceptable")                                                        \
    XX(ILLEGAL_TRANSITION, "illegal-transition", 409, "Illegal state transition")                                      \
    XX(IDEMPOTENCY_IN_FLIGHT, "idempotency-key-in-flight", 409, "A request with this Idempotency-Key is in progress")  \
    XX(STALE_LEASE, "stale-lease", 409, "Lease is not current")                                                        \
    XX(UPLOAD_OFFSET, "upload-offset-mismatch", 409, "Upload-Offset is not where the upload is")                       \
    XX(ARTIFACT_INCOMPLETE, "artifact-incomplete", 409, "No finished artifact under this lease")                       \
    XX(JOB_CANCELLED, "job-cancelled", 409, "The job was cancelled")                                                   \
    XX(ALREADY_EXISTS, "already-exists", 409, "A resource with this id exists")                                        \
    XX(CONFLICT, "conflict", 409, "Changed meanwhile")                                                                 \
    XX(GONE, "gone", 410, "Expired")                                                                                   \
    XX(PAYLOAD_TOO_LARGE, "payload-too-large", 413, "Request body too large")                                          \
    XX(UNSUPPORTED_MEDIA_TYPE, "unsupported-media-type", 415, "Unsupported media type")                                \
    XX(RANGE_NOT_SATISFIABLE, "range-not-satisfiable", 416, "Range not satisfiable")                                   \
    XX(VALIDATION_FAILED, "validation-failed", 422, "Validation failed")                                               \
    XX(UNKNOWN_TYPE, "unknown-type", 422, "Unknown job type")                                                          \
    XX(IDEMPOTENCY_KEY_REUSED, "idempotency-key-reused", 422, "Idempotency-Key reused with a different request")       \
    XX(CALLBACK_SECRET_MISSING, "callback-secret-missing", 422, "No callback secret has been shown")                   \
    XX(RATE_LIMITED, "rate-limited", 429, "Too many requests")                                                         \
    XX(HEADERS_TOO_LARGE, "headers-too-large", 431, "Request header fields too large")                                 \
    XX(INTERNAL, "internal", 500, "Internal error")                                                                    \
    XX(UNAVAILABLE, "unavailable", 503, "Service unavailable")                                                         \
    XX(STORAGE_FULL, "storage-full", 503, "Storage full")                                                              \
    XX(DEPENDENCY_UNKNOWN, "dependency-unknown", 422, "Unknown dependency")

typedef enum ad_err {
#define AD_ERR_ENUM(e, code, status, title) AD_E_##e,
    AD_ERRNO_MAP(AD_ERR_ENUM)
#undef AD_ERR_ENUM
        AD_E__COUNT
} ad_err;

/* Stable machine code for an error ("validation-failed"). Static storage. */
const char *ad_err_code(ad_err e);
/* HTTP status an error maps to. */
int ad_err_status(ad_err e);
/* Short human title. Static storage. */
const char *ad_err_title(ad_err e);

#endif
