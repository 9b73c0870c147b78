/*
 * khash.h - just enough of klib's khash for <h2o/http2_internal.h>, which includes it but which Debian's
 * libh2o-dev does not ship. http/http.c reads that header for h2o_http2_conn_t (to send GOAWAY: see calm_fire);
 * the header needs from khash the type of the connection's stream table, a pointer whose layout only h2o's
 * own code uses, and an inline lookup acceptd never calls.
 *
 * This is not a hash table: nothing here may be used to build, read or free one. Should a system header of
 * that name be installed next to h2o's, it is found first and this one is not read.
 */
#ifndef AD_KHASH_SHIM_H
#define AD_KHASH_SHIM_H

#include <stdint.h>

typedef uint32_t khint_t;
typedef khint_t khiter_t;

#define khash_t(name) kh_##name##_t
#define KHASH_MAP_INIT_INT64(name, khval_t)                                                                            \
    typedef struct kh_##name##_s {                                                                                     \
        khint_t n_buckets, size, n_occupied, upper_bound;                                                              \
        uint32_t *flags;                                                                                               \
        uint64_t *keys;                                                                                                \
        khval_t *vals;                                                                                                 \
    } kh_##name##_t;                                                                                                   \
    khint_t kh_get_##name(const kh_##name##_t *h, uint64_t key);
#define kh_get(name, h, k) kh_get_##name(h, k)
#define kh_end(h) ((h)->n_buckets)
#define kh_val(h, x) ((h)->vals[x])

#endif
