/*
 * trace.h - W3C Trace Context (https://www.w3.org/TR/trace-context/): reading a traceparent and a tracestate that
 * came from outside, making acceptd's own span and trace ids, and writing the context acceptd hands on (a job's
 * lease, a webhook delivery). What it does not do: decide what is sampled or export spans (core/tracer.h), or know
 * where a context came from (api/ reads the headers).
 *
 * acceptd writes version 00 with only the sampled flag: a higher version that parses is continued as 00, and
 * flags this version does not define are not handed on. A tracestate is cleaned on the way in: members that are
 * not key=value as the specification writes them are dropped, at most AD_TRACESTATE_MEMBERS are kept, and members
 * are dropped from the right (the longest first past AD_TRACESTATE_LONG) until it fits AD_TRACESTATE_MAX bytes.
 */
#ifndef AD_TRACE_H
#define AD_TRACE_H

#include <stddef.h>
#include <stdint.h>

#define AD_TRACE_ID_HEX 32
#define AD_SPAN_ID_HEX 16
#define AD_TRACEPARENT_LEN 55 /* version 00: 2 + 1 + 32 + 1 + 16 + 1 + 2 */
#define AD_TRACESTATE_MEMBERS 32
#define AD_TRACESTATE_MAX 512 /* the size the specification asks every vendor to pass on */
#define AD_TRACESTATE_LONG 128
#define AD_TRACE_SAMPLED 0x01
/* acceptd's own key in a tracestate: its value is the span id it hands on. */
#define AD_TRACESTATE_KEY "acceptd"

struct ad_trace_ctx {
    char trace_id[AD_TRACE_ID_HEX + 1]; /* lowercase hex, not all zeros */
    char span_id[AD_SPAN_ID_HEX + 1];   /* the parent id of a traceparent: the span that handed it on */
    uint8_t flags;                      /* AD_TRACE_SAMPLED or 0 */
};

/* Parse a traceparent header value (NUL-terminated). 0 and *out filled, or -1 when the specification says to
 * ignore it: a wrong shape, uppercase hex, an all-zero trace or parent id, version ff, or a version 00 with
 * anything after the flags. */
int ad_traceparent_parse(const char *s, struct ad_trace_ctx *out);
/* Write t as a version 00 traceparent: out holds AD_TRACEPARENT_LEN + 1 bytes. */
void ad_traceparent_format(const struct ad_trace_ctx *t, char out[AD_TRACEPARENT_LEN + 1]);
/* A tracestate header value cleaned as above, or NULL when nothing is left. The caller frees. */
char *ad_tracestate_clean(const char *s);
/* The tracestate ts (cleaned, or NULL) with key=value at its left and any older member of key removed, at most
 * AD_TRACESTATE_MEMBERS members (the rightmost dropped). The caller frees. */
char *ad_tracestate_push(const char *ts, const char *key, const char *value);

/* New random ids from the CSPRNG that makes job ids (never all zeros), as lowercase hex. */
void ad_trace_new_trace_id(char out[AD_TRACE_ID_HEX + 1]);
void ad_trace_new_span_id(char out[AD_SPAN_ID_HEX + 1]);
/* The span id of a secret random id (a lease id): the first 8 bytes of its SHA-256, so that the span of an attempt
 * is known from its lease alone and reveals nothing of it. */
void ad_trace_span_of(const char *id, char out[AD_SPAN_ID_HEX + 1]);
/* Whether a trace id falls within ratio (0 to 1) by the rule of OpenTelemetry's TraceIdRatioBased sampler: its
 * last 8 bytes, read as a number, below ratio * 2^64 (the same trace is sampled alike on every node). */
int ad_trace_id_within(const char *trace_id, double ratio);

#endif
