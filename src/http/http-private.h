/* http-private: what the HTTP server's files share — a text buffer with
 * printf, the metrics renderer, the status page renderer and the history
 * the page's sparklines draw. */
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

/* One second of history: commands finished and their total latency. */
#define HTTP_HISTORY 120
typedef struct http_sample {
    int64_t commands;
    double latency_s; /* mean over that second, 0 when none */
} http_sample_t;

/* The last HTTP_HISTORY seconds, oldest first; returns how many. */
int http_history(http_sample_t *out);

#endif
