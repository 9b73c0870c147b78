/*
 * version.h - the version of acceptd, for `acceptd --version`, the clients' User-Agent and /metrics.
 *
 * The commit it was built from is AD_COMMIT, which the Makefile defines (git describe, or "unknown").
 */
#ifndef AD_VERSION_H
#define AD_VERSION_H

#define AD_VERSION "0.1.0"

#ifndef AD_COMMIT
#define AD_COMMIT "unknown"
#endif

#endif
