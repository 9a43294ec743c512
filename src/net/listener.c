/* listener: the TCP listener, the list of open connections, and stopping
 * them all at shutdown. */
#include "net/net-private.h"

#include <string.h>

#include "cmd/server.h"
#include "util/log.h"

static uv_tcp_t net_listener;
static bool net_listening;
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

bool net_listen(uv_loop_t *loop, const char *bind, int port, int max_conns, dberr_t *err)
{
    struct sockaddr_storage sa;
    memset(&sa, 0, sizeof sa);
    if (uv_ip4_addr(bind, port, (struct sockaddr_in *)&sa) != 0 &&
        uv_ip6_addr(bind, port, (struct sockaddr_in6 *)&sa) != 0)
        return dberr_set(err, DBERR_BAD_VALUE, "--bind %s is not an IP address", bind);
    uv_tcp_init(loop, &net_listener);
    int rc = uv_tcp_bind(&net_listener, (const struct sockaddr *)&sa, 0);
    if (rc == 0)
        rc = uv_listen((uv_stream_t *)&net_listener, 511, net_on_connection);
    if (rc != 0) {
        uv_close((uv_handle_t *)&net_listener, NULL);
        return dberr_set(err, DBERR_INTERNAL_ERROR, "cannot listen on %s:%d: %s", bind, port,
                         uv_strerror(rc));
    }
    net_listening = true;
    net_max_conns = max_conns;
    return true;
}

void net_stop(void)
{
    if (net_listening) {
        net_listening = false;
        uv_close((uv_handle_t *)&net_listener, NULL);
    }
    while (net_conns)
        conn_close(net_conns, NULL);
}
