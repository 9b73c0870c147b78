/*
 * core_test.h - the fixture of the unit tests of src/core/: the core over a real SQLite store in a throwaway
 * directory, with no writer thread. An operation is applied as the writer applies it (core_fx_apply: begin,
 * op->apply, then commit, or rollback on an error). Included by tests/unit/core/test_*.c.
 */
#ifndef AD_CORE_TEST_H
#define AD_CORE_TEST_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "tmpdir.h"

struct fx {
    char dir[64];
    char data[128];
    struct ad_config cfg;
    struct ad_store *s;
    struct ad_conn *c;
};

/* A fresh store in a directory named for what, the configuration's defaults and then yaml (NULL: none), both handed
 * to the core: *state is the fixture. 0, or -1 with the reason printed. */
static inline int core_fx_open(void **state, const char *what, const char *yaml)
{
    struct fx *f = calloc(1, sizeof(*f));
    *state = f;
    if (tmpdir_make(f->dir, sizeof(f->dir), what) != 0)
        return -1;
    snprintf(f->data, sizeof(f->data), "%s/data", f->dir);
    ad_config_defaults(&f->cfg);
    char err[256] = "";
    if (yaml != NULL && ad_config_load_string(&f->cfg, yaml, strlen(yaml), err, sizeof(err)) != 0) {
        fprintf(stderr, "config: %s\n", err);
        return -1;
    }
    f->s = ad_store_open(f->data, err, sizeof(err));
    if (f->s == NULL || (f->c = f->s->ops->connect(f->s, err, sizeof(err))) == NULL) {
        fprintf(stderr, "store: %s\n", err);
        return -1;
    }
    ad_core_init(&f->cfg, f->s);
    return 0;
}

static inline int core_fx_close(void **state)
{
    struct fx *f = *state;
    f->s->ops->disconnect(f->c);
    f->s->ops->close(f->s);
    ad_config_free(&f->cfg);
    tmpdir_remove(f->dir);
    free(f);
    return 0;
}

/* One operation in its own transaction, as the writer would run it: committed on success, else rolled back. */
static inline ad_err core_fx_apply(struct fx *f, struct ad_op *op)
{
    assert_int_equal(f->s->ops->begin(f->c), AD_E_OK);
    ad_err e = op->apply(op, f->c);
    if (e == AD_E_OK)
        assert_int_equal(f->s->ops->commit(f->c), AD_E_OK);
    else
        f->s->ops->rollback(f->c);
    return e;
}

#endif
