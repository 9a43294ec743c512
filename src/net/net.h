/* net: the libuv listener and client connections. Each connection owns a
 * read buffer and a queue of pending writes, so a slow reader never stalls
 * anyone else; requests on one connection run one at a time, in order. */
#ifndef ATOMDB_NET_H
#define ATOMDB_NET_H

#include <stdbool.h>
#include <uv.h>

#include "util/dberr.h"

/* Starts listening on each of the `naddrs` IP addresses in `addrs` at
 * `port` on `loop`. False with `err` set (and nothing listening) when an
 * address cannot be bound. */
bool net_listen(uv_loop_t *loop, const char *const *addrs, int naddrs, int port, int max_conns,
                dberr_t *err);

/* Stops accepting, closes every connection and the listener; the loop then
 * runs out of work once other timers are closed. Safe to call twice. */
void net_stop(void);

#endif
