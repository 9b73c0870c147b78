/*
 * server.h - the running daemon: wiring only (server.c). The node's state and the path of committed changes
 * are in hub/hub.h.
 */
#ifndef AD_SERVER_H
#define AD_SERVER_H

#include "core/config.h"

/* Run the daemon with cfg until SIGTERM/SIGINT. Returns the process exit status. */
int ad_server_run(struct ad_config *cfg);

#endif
