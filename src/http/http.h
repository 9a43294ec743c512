/* http: the operations endpoint — Prometheus metrics at GET /metrics and a
 * live status page at GET / on --metrics-port, served by libmicrohttpd from
 * the libuv loop thread (no thread of its own: it reads the same state the
 * commands change, between them). docs/operations.md describes both. */
#ifndef ATOMDB_HTTP_H
#define ATOMDB_HTTP_H

#include <stdbool.h>
#include <uv.h>

#include "util/dberr.h"

/* Listens on `bind`:`port` (loopback unless told otherwise) on `loop`.
 * False with `err` when the address cannot be bound. */
bool http_start(uv_loop_t *loop, const char *bind, int port, dberr_t *err);

/* Stops listening and closes every HTTP connection; safe without a start. */
void http_stop(void);

#endif
