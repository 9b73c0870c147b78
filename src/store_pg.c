/*
 * store_pg.c - the cluster store on PostgreSQL (libpq). Being written.
 */
#include "store.h"

#include <stdio.h>

struct ad_store *ad_store_pg_open(const char *url, char *err, size_t errlen)
{
    snprintf(err, errlen, "PostgreSQL store not built yet");
    return NULL;
}
