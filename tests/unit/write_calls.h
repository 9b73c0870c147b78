/*
 * write_calls.h - for unit tests: how many write system calls this process has made (pwrite and writev
 * count), from /proc/self/io. Tests read it before and after an action to count the action's writes.
 */
#ifndef AD_TEST_WRITE_CALLS_H
#define AD_TEST_WRITE_CALLS_H

#include <stdio.h>

static inline long write_calls(void)
{
    FILE *fp = fopen("/proc/self/io", "r");
    assert_non_null(fp);
    char line[128];
    long n = -1;
    while (fgets(line, sizeof(line), fp) != NULL)
        if (sscanf(line, "syscw: %ld", &n) == 1)
            break;
    fclose(fp);
    assert_true(n >= 0);
    return n;
}

#endif
