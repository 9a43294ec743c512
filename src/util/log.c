/* log: mongod's JSON log lines (or atomdb's text lines) on stdout or a file,
 * with levels, --quiet, and an in-memory ring of recent lines for getLog.
 * Any thread may log (a mutex guards output and the ring). */
#include "util/log.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

#define LOG_RING 1024
#define LOG_MSG 1024
#define LOG_STARTUP_MAX 32
/* ids of atomdb's own printf-style lines: above mongod's (at most 8 digits) */
#define LOG_OWN_ID_BASE 900000000

static log_level_t log_level = LOG_INFO;
static log_format_t log_format = LOG_FORMAT_JSON;
static bool log_is_quiet;
static FILE *log_out;
static __thread const char *log_thread_ctx;
static pthread_mutex_t log_mutex = PTHREAD_MUTEX_INITIALIZER;
static char *log_ring[LOG_RING];
static unsigned log_ring_next;
static unsigned log_ring_count;
static int64_t log_total;
static char *log_startup[LOG_STARTUP_MAX];
static int log_startup_count;

void log_set_level(log_level_t level)
{
    log_level = level;
}

log_level_t log_get_level(void)
{
    return log_level;
}

bool log_parse_level(const char *name, log_level_t *out)
{
    static const char *names[] = {"debug", "info", "warn", "error"};
    for (int i = 0; i < 4; i++) {
        if (strcmp(name, names[i]) == 0) {
            *out = (log_level_t)i;
            return true;
        }
    }
    return false;
}

void log_set_format(log_format_t format)
{
    log_format = format;
}

bool log_parse_format(const char *name, log_format_t *out)
{
    if (strcmp(name, "json") == 0)
        *out = LOG_FORMAT_JSON;
    else if (strcmp(name, "text") == 0)
        *out = LOG_FORMAT_TEXT;
    else
        return false;
    return true;
}

void log_set_quiet(bool quiet)
{
    log_is_quiet = quiet;
}

bool log_quiet(void)
{
    return log_is_quiet;
}

void log_set_output(FILE *out)
{
    pthread_mutex_lock(&log_mutex);
    log_out = out;
    pthread_mutex_unlock(&log_mutex);
}

void log_set_ctx(const char *ctx)
{
    log_thread_ctx = ctx;
}

/* ---- JSON rendering ---- */

/* The JSON escapes of the characters that need a short one. */
static const char *const log_json_escapes[128] = {
    ['"'] = "\\\"", ['\\'] = "\\\\", ['\n'] = "\\n", ['\r'] = "\\r", ['\t'] = "\\t",
};

static void log_json_str(bson_string_t *out, const char *s, size_t len)
{
    bson_string_append_c(out, '"');
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        const char *esc = c < 128 ? log_json_escapes[c] : NULL;
        if (esc)
            bson_string_append(out, esc);
        else if (c < 0x20)
            bson_string_append_printf(out, "\\u%04x", c);
        else
            bson_string_append_c(out, (char)c);
    }
    bson_string_append_c(out, '"');
}

/* ISO-8601 UTC with milliseconds, mongod's "+00:00" form. */
static void log_iso_date(char *buf, size_t size, int64_t ms)
{
    time_t secs = (time_t)(ms / 1000);
    struct tm tm;
    gmtime_r(&secs, &tm);
    snprintf(buf, size, "%04d-%02d-%02dT%02d:%02d:%02d.%03d+00:00", tm.tm_year + 1900,
             tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (int)(ms % 1000));
}

static void log_json_value(bson_string_t *out, const bson_iter_t *it)
{
    char buf[64];
    switch (bson_iter_type(it)) {
    case BSON_TYPE_UTF8: {
        uint32_t len;
        const char *s = bson_iter_utf8(it, &len);
        log_json_str(out, s, len);
        break;
    }
    case BSON_TYPE_INT32:
        bson_string_append_printf(out, "%d", bson_iter_int32(it));
        break;
    case BSON_TYPE_INT64:
        bson_string_append_printf(out, "%lld", (long long)bson_iter_int64(it));
        break;
    case BSON_TYPE_DOUBLE:
        bson_string_append_printf(out, "%.17g", bson_iter_double(it));
        break;
    case BSON_TYPE_BOOL:
        bson_string_append(out, bson_iter_bool(it) ? "true" : "false");
        break;
    case BSON_TYPE_NULL:
        bson_string_append(out, "null");
        break;
    case BSON_TYPE_DOCUMENT:
    case BSON_TYPE_ARRAY: {
        uint32_t len;
        const uint8_t *data;
        bool array = BSON_ITER_HOLDS_ARRAY(it);
        if (array)
            bson_iter_array(it, &len, &data);
        else
            bson_iter_document(it, &len, &data);
        bson_t sub;
        if (bson_init_static(&sub, data, len))
            log_json_doc(out, &sub, array);
        else
            bson_string_append(out, "null");
        break;
    }
    case BSON_TYPE_OID:
        bson_oid_to_string(bson_iter_oid(it), buf);
        bson_string_append_printf(out, "{\"$oid\":\"%s\"}", buf);
        break;
    case BSON_TYPE_DATE_TIME:
        log_iso_date(buf, sizeof buf, bson_iter_date_time(it));
        bson_string_append_printf(out, "{\"$date\":\"%s\"}", buf);
        break;
    case BSON_TYPE_TIMESTAMP: {
        uint32_t t, i;
        bson_iter_timestamp(it, &t, &i);
        bson_string_append_printf(out, "{\"$timestamp\":{\"t\":%u,\"i\":%u}}", t, i);
        break;
    }
    default:
        /* binary, regex, decimal128, …: their type, not their bytes */
        bson_string_append_printf(out, "{\"$type\":%d}", (int)bson_iter_type(it));
        break;
    }
}

void log_json_doc(bson_string_t *out, const bson_t *doc, bool array)
{
    bson_iter_t it;
    bson_string_append_c(out, array ? '[' : '{');
    bool first = true;
    if (bson_iter_init(&it, doc)) {
        while (bson_iter_next(&it)) {
            if (!first)
                bson_string_append_c(out, ',');
            first = false;
            if (!array) {
                log_json_str(out, bson_iter_key(&it), bson_iter_key_len(&it));
                bson_string_append_c(out, ':');
            }
            log_json_value(out, &it);
        }
    }
    bson_string_append_c(out, array ? ']' : '}');
}

static void log_json_attrs(bson_string_t *out, const log_attr_t *attrs, size_t n)
{
    bson_string_append_c(out, '{');
    for (size_t i = 0; i < n; i++) {
        if (i)
            bson_string_append_c(out, ',');
        log_json_str(out, attrs[i].key, strlen(attrs[i].key));
        bson_string_append_c(out, ':');
        switch (attrs[i].type) {
        case LOG_ATTR_STR:
            log_json_str(out, attrs[i].s ? attrs[i].s : "", attrs[i].s ? strlen(attrs[i].s) : 0);
            break;
        case LOG_ATTR_INT:
            bson_string_append_printf(out, "%lld", (long long)attrs[i].i);
            break;
        case LOG_ATTR_BOOL:
            bson_string_append(out, attrs[i].i ? "true" : "false");
            break;
        case LOG_ATTR_DOC:
            log_json_doc(out, attrs[i].doc, false);
            break;
        }
    }
    bson_string_append_c(out, '}');
}

/* ---- writing ---- */

/* Keeps `line` (taking ownership) in the ring, and in the start-up warnings
 * when asked, then prints it. Called with the mutex held. */
static void log_emit_locked(char *line, bool startup_warning)
{
    FILE *out = log_out ? log_out : stdout;
    fputs(line, out);
    fputc('\n', out);
    fflush(out);
    if (startup_warning && log_startup_count < LOG_STARTUP_MAX)
        log_startup[log_startup_count++] = bson_strdup(line);
    bson_free(log_ring[log_ring_next]);
    log_ring[log_ring_next] = line;
    log_ring_next = (log_ring_next + 1) % LOG_RING;
    if (log_ring_count < LOG_RING)
        log_ring_count++;
    log_total++;
}

static const char *log_severity(log_level_t level)
{
    static const char *const names[] = {"D1", "I", "W", "E"};
    return names[level];
}

/* Builds and writes one line. `text_msg` is the already formatted message;
 * `attrs` follow it (JSON: in "attr"; text: as a JSON object after it). */
static void log_line(log_level_t level, const char *component, const log_line_opts_t *o,
                     const char *text_msg, const log_attr_t *attrs, size_t nattrs)
{
    struct timeval tv;
    gettimeofday(&tv, NULL);
    int64_t ms = (int64_t)tv.tv_sec * 1000 + tv.tv_usec / 1000;
    bson_string_t *s = bson_string_new(NULL);
    if (log_format == LOG_FORMAT_TEXT) {
        static const char letters[] = "DIWE";
        struct tm tm;
        time_t secs = tv.tv_sec;
        gmtime_r(&secs, &tm);
        bson_string_append_printf(s, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ %c %-8s %s",
                                  tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
                                  tm.tm_min, tm.tm_sec, (int)(tv.tv_usec / 1000), letters[level],
                                  component, text_msg);
        if (nattrs) {
            bson_string_append_c(s, ' ');
            log_json_attrs(s, attrs, nattrs);
        }
    } else {
        char date[48];
        log_iso_date(date, sizeof date, ms);
        const char *sev = log_severity(level);
        const char *ctx = o->ctx ? o->ctx : log_thread_ctx ? log_thread_ctx : "main";
        /* mongod pads severity, component and id so the columns line up:
         * {"t":…,"s":"I",  "c":"NETWORK",  "id":23016,   "ctx":… */
        char idbuf[16];
        int sevlen = (int)strlen(sev), complen = (int)strlen(component);
        int idlen = snprintf(idbuf, sizeof idbuf, "%d", o->id);
        bson_string_append_printf(s, "{\"t\":{\"$date\":\"%s\"},\"s\":\"%s\",%*s\"c\":\"%s\",%*s"
                                     "\"id\":%s,%*s\"ctx\":",
                                  date, sev, sevlen < 3 ? 3 - sevlen : 0, "", component,
                                  complen < 9 ? 9 - complen : 0, "", idbuf,
                                  idlen < 8 ? 8 - idlen : 0, "");
        log_json_str(s, ctx, strlen(ctx));
        bson_string_append(s, ",\"msg\":");
        log_json_str(s, text_msg, strlen(text_msg));
        if (nattrs) {
            bson_string_append(s, ",\"attr\":");
            log_json_attrs(s, attrs, nattrs);
        }
        if (o->startup_warning)
            bson_string_append(s, ",\"tags\":[\"startupWarnings\"]");
        bson_string_append_c(s, '}');
    }
    char *line = bson_string_free(s, false);
    pthread_mutex_lock(&log_mutex);
    log_emit_locked(line, o->startup_warning);
    pthread_mutex_unlock(&log_mutex);
}

void log_event_n(log_level_t level, const char *component, const log_line_opts_t *opts,
                 const char *msg, const log_attr_t *attrs, size_t nattrs)
{
    if (level < log_level || (opts->routine && log_is_quiet))
        return;
    log_line(level, component, opts, msg, attrs, nattrs);
}

/* A stable id for a printf-style statement: FNV-1a of its format. */
static int log_own_id(const char *fmt)
{
    uint32_t h = 2166136261u;
    for (const unsigned char *p = (const unsigned char *)fmt; *p; p++)
        h = (h ^ *p) * 16777619u;
    return LOG_OWN_ID_BASE + (int)(h % 1000000u);
}

/* Formats a printf-style statement and writes it under its own id. */
static void log_vwrite(log_level_t level, const char *component, bool startup_warning,
                       const char *fmt, va_list ap)
{
    char msg[LOG_MSG];
    vsnprintf(msg, sizeof msg, fmt, ap);
    log_line_opts_t o = {.id = log_own_id(fmt), .startup_warning = startup_warning};
    log_line(level, component, &o, msg, NULL, 0);
}

void log_write(log_level_t level, const char *component, const char *fmt, ...)
{
    if (level < log_level)
        return;
    va_list ap;
    va_start(ap, fmt);
    log_vwrite(level, component, false, fmt, ap);
    va_end(ap);
}

void log_startup_warning(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    log_vwrite(LOG_WARN, "CONTROL", true, fmt, ap);
    va_end(ap);
}

int log_append_recent(bson_t *array, bool startup, int64_t *total)
{
    char key[16];
    const char *k;
    int n = 0;
    pthread_mutex_lock(&log_mutex);
    if (startup) {
        for (int i = 0; i < log_startup_count; i++, n++) {
            bson_uint32_to_string((uint32_t)n, &k, key, sizeof key);
            bson_append_utf8(array, k, -1, log_startup[i], -1);
        }
        if (total)
            *total = log_startup_count;
    } else {
        unsigned first = (log_ring_next + LOG_RING - log_ring_count) % LOG_RING;
        for (unsigned i = 0; i < log_ring_count; i++, n++) {
            bson_uint32_to_string((uint32_t)n, &k, key, sizeof key);
            bson_append_utf8(array, k, -1, log_ring[(first + i) % LOG_RING], -1);
        }
        if (total)
            *total = log_total;
    }
    pthread_mutex_unlock(&log_mutex);
    return n;
}
