/*
 * api.h - the HTTP API as the daemon sees it: start it, hand it every request, stop it.
 *
 * What the handlers share among themselves is api_int.h's, for api/ alone. The route table and one file of
 * handlers per resource live behind ad_api_on_req.
 */
#ifndef AD_API_H
#define AD_API_H

#include "http/http.h"

/* At start: register what the API does with published changes (hub.h) and set up signed URLs and SSE.
 * 0, or -1 with err filled. */
int ad_api_init(char *err, size_t errlen);

/* The h2o handler for every request: auth, routing, then the route's handler. */
int ad_api_on_req(h2o_handler_t *self, h2o_req_t *req);

/* At SIGTERM, once new requests are refused: close every event stream with a retry hint. */
void ad_api_shutdown(void);

#endif
