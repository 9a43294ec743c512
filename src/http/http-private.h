/* http-private: what the HTTP server's files share — a text buffer with
 * printf, the metrics renderer, the status page renderer, the history
 * the page's sparklines draw, and the access check under --auth. */
#ifndef ATOMDB_HTTP_PRIVATE_H
#define ATOMDB_HTTP_PRIVATE_H

#include <stdint.h>

#include "util/buf.h"

/* Appends printf-formatted text to `b`. */
void http_printf(buf_t *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Appends the string `s` to `b`. */
void http_puts(buf_t *b, const char *s);

/* Appends `s` to `b` with &, <, >, " and ' escaped for HTML. */
void http_html_escape(buf_t *b, const char *s);

/* Appends the Prometheus text exposition (format 0.0.4) of every metric. */
void metrics_render(buf_t *out);

/* Appends the status page's HTML. */
void statuspage_render(buf_t *out);

/* What the metrics port's access check decided (http/basicauth.c). */
typedef enum basicauth_result {
    BASICAUTH_OK,              /* access control off, or a user holding serverStatus */
    BASICAUTH_UNAUTHENTICATED, /* no or wrong credentials: 401 */
    BASICAUTH_FORBIDDEN,       /* a user without serverStatus on the cluster: 403 */
    BASICAUTH_BACKOFF,         /* too many failures from this address: 429 */
} basicauth_result_t;

struct MHD_Connection;
/* With --auth: checks the request's HTTP Basic credentials; *retry_ms is
 * how long to wait when BASICAUTH_BACKOFF. Without --auth: BASICAUTH_OK. */
basicauth_result_t basicauth_check(struct MHD_Connection *conn, int64_t *retry_ms);

/* One second of history: commands finished and their total latency. */
#define HTTP_HISTORY 120
typedef struct http_sample {
    int64_t commands;
    double latency_s; /* mean over that second, 0 when none */
} http_sample_t;

/* The last HTTP_HISTORY seconds, oldest first; returns how many. */
int http_history(http_sample_t *out);

#endif
