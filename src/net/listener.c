/* listener: the TCP listener, the list of open connections, and stopping
 * them all at shutdown. */
#include "net/net-private.h"

#include <string.h>

#include "cmd/server.h"
#include "util/log.h"

#define NET_MAX_LISTENERS 8

static uv_tcp_t net_listeners[NET_MAX_LISTENERS];
static int net_nlisteners;
static int net_max_conns;
static conn_t *net_conns;

void conn_list_add(conn_t *c)
{
    c->prev = NULL;
    c->next = net_conns;
    if (net_conns)
        net_conns->prev = c;
    net_conns = c;
}

void conn_list_remove(conn_t *c)
{
    if (c->prev)
        c->prev->next = c->next;
    else if (net_conns == c)
        net_conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    c->prev = c->next = NULL;
}

static void net_on_connection(uv_stream_t *listener, int status)
{
    if (status < 0) {
        log_warn("NETWORK", "accept failed: %s", uv_strerror(status));
        return;
    }
    conn_t *c = conn_accept(listener);
    if (c && net_max_conns > 0 && server.connections_current > net_max_conns) {
        log_warn("NETWORK", "connection refused: %lld open, --max-conns is %d",
                 (long long)server.connections_current - 1, net_max_conns);
        conn_close(c, "too many connections");
    }
}

/* Binds and listens on one address. */
static bool net_listen_one(uv_loop_t *loop, const char *addr, int port, dberr_t *err)
{
    struct sockaddr_storage sa;
    memset(&sa, 0, sizeof sa);
    unsigned flags = 0;
    if (uv_ip4_addr(addr, port, (struct sockaddr_in *)&sa) != 0) {
        if (uv_ip6_addr(addr, port, (struct sockaddr_in6 *)&sa) != 0)
            return dberr_set(err, DBERR_BAD_VALUE, "--bind_ip %s is not an IP address", addr);
        flags = UV_TCP_IPV6ONLY; /* so :: and 0.0.0.0 can both be bound */
    }
    uv_tcp_t *l = &net_listeners[net_nlisteners];
    uv_tcp_init(loop, l);
    int rc = uv_tcp_bind(l, (const struct sockaddr *)&sa, flags);
    if (rc == 0)
        rc = uv_listen((uv_stream_t *)l, 511, net_on_connection);
    if (rc != 0) {
        uv_close((uv_handle_t *)l, NULL);
        return dberr_set(err, DBERR_INTERNAL_ERROR, "cannot listen on %s:%d: %s", addr, port,
                         uv_strerror(rc));
    }
    net_nlisteners++;
    return true;
}

static uv_timer_t net_sweep_timer;
static bool net_sweeping;

static void net_on_sweep(uv_timer_t *t)
{
    uint64_t now = uv_now(t->loop);
    conn_t *c = net_conns;
    while (c) {
        conn_t *next = c->next; /* conn_sweep may close (unlink) c */
        conn_sweep(c, now);
        c = next;
    }
}

bool net_listen(uv_loop_t *loop, const char *const *addrs, int naddrs, int port, int max_conns,
                dberr_t *err)
{
    if (naddrs < 1 || naddrs > NET_MAX_LISTENERS)
        return dberr_set(err, DBERR_BAD_VALUE, "--bind_ip takes 1 to %d addresses, got %d",
                         NET_MAX_LISTENERS, naddrs);
    for (int i = 0; i < naddrs; i++) {
        if (!net_listen_one(loop, addrs[i], port, err)) {
            net_stop();
            return false;
        }
    }
    net_max_conns = max_conns;
    uv_timer_init(loop, &net_sweep_timer);
    uv_timer_start(&net_sweep_timer, net_on_sweep, 1000, 1000);
    net_sweeping = true;
    return true;
}

void net_stop(void)
{
    if (net_sweeping) {
        uv_timer_stop(&net_sweep_timer);
        uv_close((uv_handle_t *)&net_sweep_timer, NULL);
        net_sweeping = false;
    }
    for (int i = 0; i < net_nlisteners; i++)
        uv_close((uv_handle_t *)&net_listeners[i], NULL);
    net_nlisteners = 0;
    while (net_conns)
        conn_close(net_conns, NULL);
}
