/*
 * loop.h - the event loop of core/loop.h as the HTTP layer sees it: a libh2o evloop (http/loop.c defines the
 * functions core/loop.h declares), and the one place the libh2o version is checked (http/h2o_check.h).
 */
#ifndef AD_HTTP_LOOP_H
#define AD_HTTP_LOOP_H

#include <h2o.h>
#include "core/loop.h"
#include "http/h2o_check.h"

/* The libh2o loop that loop runs, for the sockets and contexts of the HTTP layer. */
h2o_loop_t *ad_loop_h2o(struct ad_loop *loop);

#endif
