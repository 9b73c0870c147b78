/*
 * tmpdir.h - for unit tests: a throwaway directory under /tmp, and its removal with everything in it.
 */
#ifndef AD_TEST_TMPDIR_H
#define AD_TEST_TMPDIR_H

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>

/* Create /tmp/acceptd-NAME-<6 random characters> and write its path into dir (n bytes). 0, or -1. */
static inline int tmpdir_make(char *dir, size_t n, const char *name)
{
    /* mkdtemp fills in the six X of its template. */
    int len = snprintf(dir, n, "/tmp/acceptd-%s-XXXXXX", name);
    if (len < 0 || (size_t)len >= n)
        return -1;
    return mkdtemp(dir) != NULL ? 0 : -1;
}

static inline int tmpdir_remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    return remove(path);
}

/* Remove dir and everything below it. */
static inline void tmpdir_remove(const char *dir)
{
    nftw(dir, tmpdir_remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

#endif
