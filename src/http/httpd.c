/* httpd: libmicrohttpd driven by the libuv loop — MHD in epoll mode with no
 * thread of its own; its epoll descriptor is watched by a uv_poll and its
 * timeouts by a uv_timer, so every request is answered on the loop thread.
 * Routes: GET /metrics (Prometheus), GET / (the status page); with --auth
 * both need HTTP Basic credentials (http/basicauth.c). */
#include "http/http.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "cmd/cmd.h"
#include "cmd/stats.h"
#include "http/http-private.h"
#include "util/log.h"

#define HTTP_MAX_CONNECTIONS 32
#define HTTP_CONNECTION_TIMEOUT_S 10

static struct {
    struct MHD_Daemon *daemon;
    uv_poll_t poll;
    uv_timer_t timer;   /* MHD's own timeouts */
    uv_timer_t sampler; /* once a second: the sparklines' history */
    bool running;
    http_sample_t history[HTTP_HISTORY];
    int nhistory, next;
    int64_t last_commands;
    uint64_t last_ns;
} http;

void http_printf(buf_t *b, const char *fmt, ...)
{
    char small[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if ((size_t)n < sizeof small) {
        buf_append(b, small, (size_t)n);
        return;
    }
    buf_reserve(b, (size_t)n + 1);
    va_start(ap, fmt);
    vsnprintf((char *)b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

void http_puts(buf_t *b, const char *s)
{
    buf_append(b, s, strlen(s));
}

void http_html_escape(buf_t *b, const char *s)
{
    for (; s && *s; s++) {
        switch (*s) {
        case '&': buf_append(b, "&amp;", 5); break;
        case '<': buf_append(b, "&lt;", 4); break;
        case '>': buf_append(b, "&gt;", 4); break;
        case '"': buf_append(b, "&quot;", 6); break;
        case '\'': buf_append(b, "&#39;", 5); break;
        default: buf_push(b, (uint8_t)*s);
        }
    }
}

/* ---- the sparklines' history ---- */

static void http_sum_commands(const char *name, const struct stats_cmd *s, void *arg)
{
    int64_t *acc = arg;
    acc[0] += s->ok + s->failed;
    acc[1] += (int64_t)s->sum_ns;
}

static void http_on_sample(uv_timer_t *t)
{
    int64_t acc[2] = {0, 0};
    cmd_stats_foreach(http_sum_commands, acc);
    int64_t n = acc[0] - http.last_commands;
    uint64_t ns = (uint64_t)acc[1] - http.last_ns;
    http.last_commands = acc[0];
    http.last_ns = (uint64_t)acc[1];
    http.history[http.next] = (http_sample_t){n, n > 0 ? (double)ns / 1e9 / (double)n : 0.0};
    http.next = (http.next + 1) % HTTP_HISTORY;
    if (http.nhistory < HTTP_HISTORY)
        http.nhistory++;
}

int http_history(http_sample_t *out)
{
    int first = (http.next + HTTP_HISTORY - http.nhistory) % HTTP_HISTORY;
    for (int i = 0; i < http.nhistory; i++)
        out[i] = http.history[(first + i) % HTTP_HISTORY];
    return http.nhistory;
}

/* ---- requests ---- */

static enum MHD_Result http_send(struct MHD_Connection *conn, unsigned status, const char *type,
                                 buf_t *body, int64_t retry_ms)
{
    struct MHD_Response *r =
        MHD_create_response_from_buffer(body->len, body->data, MHD_RESPMEM_MUST_COPY);
    if (!r)
        return MHD_NO;
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
    if (status == MHD_HTTP_METHOD_NOT_ALLOWED)
        MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
    if (status == MHD_HTTP_UNAUTHORIZED)
        MHD_add_response_header(r, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Basic realm=\"atomdb\"");
    if (status == MHD_HTTP_TOO_MANY_REQUESTS) {
        char secs[32];
        snprintf(secs, sizeof secs, "%lld", (long long)((retry_ms + 999) / 1000));
        MHD_add_response_header(r, MHD_HTTP_HEADER_RETRY_AFTER, secs);
    }
    enum MHD_Result rc = MHD_queue_response(conn, status, r);
    MHD_destroy_response(r);
    return rc;
}

static enum MHD_Result http_on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                       const char *method, const char *version,
                                       const char *upload_data, size_t *upload_data_size,
                                       void **con_cls)
{
    buf_t body;
    buf_init(&body);
    enum MHD_Result rc;
    int64_t retry_ms = 0;
    const char *text = "text/plain; charset=utf-8";
    switch (basicauth_check(conn, &retry_ms)) {
    case BASICAUTH_OK:
        break;
    case BASICAUTH_UNAUTHENTICATED:
        http_puts(&body, "the metrics port needs the credentials of a user with the serverStatus "
                         "action on the cluster (e.g. the clusterMonitor role)\n");
        rc = http_send(conn, MHD_HTTP_UNAUTHORIZED, text, &body, 0);
        goto done;
    case BASICAUTH_FORBIDDEN:
        http_puts(&body, "this user may not read the metrics port: it needs the serverStatus "
                         "action on the cluster (e.g. the clusterMonitor role)\n");
        rc = http_send(conn, MHD_HTTP_FORBIDDEN, text, &body, 0);
        goto done;
    case BASICAUTH_BACKOFF:
        http_puts(&body, "too many failed logins from this address: try again later\n");
        rc = http_send(conn, MHD_HTTP_TOO_MANY_REQUESTS, text, &body, retry_ms);
        goto done;
    }
    if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 && strcmp(method, MHD_HTTP_METHOD_HEAD) != 0) {
        http_printf(&body, "the metrics port is read-only: %s is not allowed\n", method);
        rc = http_send(conn, MHD_HTTP_METHOD_NOT_ALLOWED, text, &body, 0);
    } else if (strcmp(url, "/metrics") == 0) {
        metrics_render(&body);
        rc = http_send(conn, MHD_HTTP_OK, "text/plain; version=0.0.4; charset=utf-8", &body, 0);
    } else if (strcmp(url, "/") == 0) {
        statuspage_render(&body);
        rc = http_send(conn, MHD_HTTP_OK, "text/html; charset=utf-8", &body, 0);
    } else {
        http_printf(&body, "no such page: %s (try / or /metrics)\n", url);
        rc = http_send(conn, MHD_HTTP_NOT_FOUND, text, &body, 0);
    }
done:
    buf_destroy(&body);
    return rc;
}

/* ---- driving MHD from the loop ---- */

static void http_on_timer(uv_timer_t *t);

/* Runs MHD's pending work and arms the timer for its next timeout. */
static void http_run(void)
{
    MHD_run(http.daemon);
    MHD_UNSIGNED_LONG_LONG ms;
    if (MHD_get_timeout(http.daemon, &ms) == MHD_YES)
        uv_timer_start(&http.timer, http_on_timer, (uint64_t)ms, 0);
    else
        uv_timer_stop(&http.timer);
}

static void http_on_timer(uv_timer_t *t)
{
    http_run();
}

static void http_on_poll(uv_poll_t *p, int status, int events)
{
    http_run();
}

static void http_on_mhd_log(void *cls, const char *fmt, va_list ap)
{
    char msg[512];
    vsnprintf(msg, sizeof msg, fmt, ap);
    size_t n = strlen(msg);
    while (n && msg[n - 1] == '\n')
        msg[--n] = '\0';
    log_warn("NETWORK", "metrics port: %s", msg);
}

bool http_start(uv_loop_t *loop, const char *bind, int port, dberr_t *err)
{
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof ss);
    unsigned flags = MHD_USE_EPOLL | MHD_USE_ERROR_LOG;
    if (strchr(bind, ':')) {
        struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&ss;
        a6->sin6_family = AF_INET6;
        a6->sin6_port = htons((uint16_t)port);
        if (inet_pton(AF_INET6, bind, &a6->sin6_addr) != 1)
            return dberr_set(err, DBERR_BAD_VALUE, "--metrics-bind %s is not an IP address", bind);
        flags |= MHD_USE_IPv6;
    } else {
        struct sockaddr_in *a4 = (struct sockaddr_in *)&ss;
        a4->sin_family = AF_INET;
        a4->sin_port = htons((uint16_t)port);
        if (inet_pton(AF_INET, bind, &a4->sin_addr) != 1)
            return dberr_set(err, DBERR_BAD_VALUE, "--metrics-bind %s is not an IP address", bind);
    }
    http.daemon = MHD_start_daemon(
        flags, (uint16_t)port, NULL, NULL, http_on_request, NULL, MHD_OPTION_SOCK_ADDR, &ss,
        MHD_OPTION_CONNECTION_LIMIT, (unsigned)HTTP_MAX_CONNECTIONS,
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)HTTP_CONNECTION_TIMEOUT_S,
        MHD_OPTION_EXTERNAL_LOGGER, http_on_mhd_log, NULL, MHD_OPTION_END);
    if (!http.daemon)
        return dberr_set(err, DBERR_INTERNAL_ERROR,
                         "cannot listen on the metrics port %s:%d (in use, or not an address of "
                         "this machine)",
                         bind, port);
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(http.daemon, MHD_DAEMON_INFO_EPOLL_FD);
    if (!info) {
        MHD_stop_daemon(http.daemon);
        http.daemon = NULL;
        return dberr_set(err, DBERR_INTERNAL_ERROR, "libmicrohttpd has no epoll descriptor");
    }
    uv_poll_init(loop, &http.poll, info->epoll_fd);
    uv_poll_start(&http.poll, UV_READABLE, http_on_poll);
    uv_timer_init(loop, &http.timer);
    uv_timer_init(loop, &http.sampler);
    uv_timer_start(&http.sampler, http_on_sample, 1000, 1000);
    http.running = true;
    http_run();
    return true;
}

void http_stop(void)
{
    if (!http.running)
        return;
    http.running = false;
    uv_poll_stop(&http.poll);
    uv_close((uv_handle_t *)&http.poll, NULL);
    uv_timer_stop(&http.timer);
    uv_close((uv_handle_t *)&http.timer, NULL);
    uv_timer_stop(&http.sampler);
    uv_close((uv_handle_t *)&http.sampler, NULL);
    MHD_stop_daemon(http.daemon);
    http.daemon = NULL;
}
