/*
 * http_int.h - what the files of src/http/ share and no other layer uses.
 */
#ifndef AD_HTTP_INT_H
#define AD_HTTP_INT_H

#include <h2o.h>

/* Called as every answer starts (the problem filter, http.c): an error answer that closes an HTTP/1
 * connection lingers (conn.c). */
void ad_http_linger_arm(h2o_req_t *req);

#endif
