/*
 * h2o_check.h - the libh2o this HTTP layer was written and checked against, refused at build time when it is
 * another.
 *
 * acceptd builds on libh2o 2.2.5, Debian's, which has had no upstream release since 2019. Where h2o's public API
 * cannot do something, conn.c reaches into its private parts (the HTTP/2 connection's state, write buffer and
 * the context's list of connections, h2o/http2_internal.h; the socket callbacks left pending outside the loop)
 * and sse.c takes sockets over from it; a struct whose layout moved in another release would be written wrongly
 * without a word. So a libh2o whose version is not the one checked stops the build here, naming the version it
 * found. To move to another release: read the private reaches again against it (grep http2_internal and _write
 * in src/http/), run the tests that cover them (tests/blackbox/sse.test.mjs, sse_h2.test.mjs,
 * sse_mass_close.test.mjs, h2_unsent.test.mjs, rapid_reset.test.mjs, shutdown_goaway.test.mjs,
 * tests/unit/http/), then change AD_H2O_CHECKED_* below.
 */
#ifndef AD_H2O_CHECK_H
#define AD_H2O_CHECK_H

#include <h2o/version.h>

#define AD_H2O_CHECKED_MAJOR 2
#define AD_H2O_CHECKED_MINOR 2
#define AD_H2O_CHECKED_PATCH 5
#define AD_H2O_CHECKED "2.2.5"

#if !defined(H2O_VERSION_MAJOR) || !defined(H2O_VERSION_MINOR) || !defined(H2O_VERSION_PATCH) || !defined(H2O_VERSION)
#error "no H2O_VERSION_* in h2o/version.h: acceptd is checked against libh2o 2.2.5 (src/http/h2o_check.h)"
#elif H2O_VERSION_MAJOR != AD_H2O_CHECKED_MAJOR || H2O_VERSION_MINOR != AD_H2O_CHECKED_MINOR ||                        \
    H2O_VERSION_PATCH != AD_H2O_CHECKED_PATCH
/* #error cannot print a macro's value; a failed assertion's message, joined from string literals, can. */
_Static_assert(0, "found libh2o " H2O_VERSION ", but acceptd is checked against libh2o " AD_H2O_CHECKED
                  " only: its private structs may differ (src/http/h2o_check.h says what to check)");
#error "libh2o version mismatch (see the message above)"
#endif

#endif
