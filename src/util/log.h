/* log: one line per event, as mongod's structured JSON log by default
 * ({"t":{"$date":…},"s":"I","c":"NETWORK","id":23016,"ctx":"listener",
 * "msg":"Waiting for connections","attr":{…}}) or atomdb's text format
 * ("2026-11-30T14:16:40.123Z I NETWORK  listening on …"), on stdout or a
 * file, filtered by level; the most recent lines are kept for getLog. */
#ifndef ATOMDB_LOG_H
#define ATOMDB_LOG_H

#include <bson/bson.h>
#include <stdio.h>

/* Severity, most verbose first. */
typedef enum log_level {
    LOG_DEBUG = 0,
    LOG_INFO = 1,
    LOG_WARN = 2,
    LOG_ERROR = 3,
} log_level_t;

/* How a line is written. */
typedef enum log_format {
    LOG_FORMAT_JSON = 0, /* mongod's structured log, one JSON object a line */
    LOG_FORMAT_TEXT = 1, /* atomdb's text lines, for people reading a terminal */
} log_format_t;

/* Sets the lowest level that is printed. */
void log_set_level(log_level_t level);
/* The current level. */
log_level_t log_get_level(void);
/* Parses "debug"/"info"/"warn"/"error"; false when unknown. */
bool log_parse_level(const char *name, log_level_t *out);
/* Sets the line format (JSON unless set). */
void log_set_format(log_format_t format);
/* Parses "json"/"text"; false when unknown. */
bool log_parse_format(const char *name, log_format_t *out);
/* --quiet: connection accepted/ended and other routine lines are left out. */
void log_set_quiet(bool quiet);
/* Whether --quiet is on. */
bool log_quiet(void);
/* Sends lines to `out` (stdout unless set). The stream is borrowed and must
 * stay open until the process ends or another is set. */
void log_set_output(FILE *out);
/* Sets the calling thread's context, the "ctx" of its lines ("initandlisten",
 * "listener", "conn12"); `ctx` must stay valid while it is set. */
void log_set_ctx(const char *ctx);

/* One attribute of a structured line. */
typedef struct log_attr {
    const char *key;
    enum { LOG_ATTR_STR, LOG_ATTR_INT, LOG_ATTR_BOOL, LOG_ATTR_DOC } type;
    const char *s;      /* LOG_ATTR_STR */
    int64_t i;          /* LOG_ATTR_INT; LOG_ATTR_BOOL when non-zero */
    const bson_t *doc;  /* LOG_ATTR_DOC: rendered as a JSON object */
} log_attr_t;

#define LOG_STR(k, v) ((log_attr_t){.key = (k), .type = LOG_ATTR_STR, .s = (v)})
#define LOG_INT(k, v) ((log_attr_t){.key = (k), .type = LOG_ATTR_INT, .i = (int64_t)(v)})
#define LOG_BOOL(k, v) ((log_attr_t){.key = (k), .type = LOG_ATTR_BOOL, .i = (v) ? 1 : 0})
#define LOG_DOC(k, v) ((log_attr_t){.key = (k), .type = LOG_ATTR_DOC, .doc = (v)})

/* Log-line options beyond level and component. */
typedef struct log_line_opts {
    int id;              /* mongod's log id for this statement */
    const char *ctx;     /* NULL: the thread's context */
    bool startup_warning;/* tagged "startupWarnings" and kept for getLog */
    bool routine;        /* left out under --quiet */
} log_line_opts_t;

/* Writes one structured line: `msg` is a constant message (mongod's, for
 * the lines tools wait for) and `attrs` its values. */
void log_event_n(log_level_t level, const char *component, const log_line_opts_t *opts,
                 const char *msg, const log_attr_t *attrs, size_t nattrs);

/* log_event(level, component, id, msg, attrs...): one structured line with
 * mongod's id `id`. */
#define log_event(level, comp, log_id, msg, ...)                                              \
    log_event_n((level), (comp), &(log_line_opts_t){.id = (log_id)}, (msg),                  \
                (const log_attr_t[]){__VA_ARGS__},                                           \
                sizeof((const log_attr_t[]){__VA_ARGS__}) / sizeof(log_attr_t))

/* Logs one line of `component` (e.g. "NETWORK", "COMMAND") at `level`, its
 * message formatted printf-style. In the JSON format its id is derived from
 * `fmt`, so one statement keeps one id. */
void log_write(log_level_t level, const char *component, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#define log_debug(comp, ...) log_write(LOG_DEBUG, comp, __VA_ARGS__)
#define log_info(comp, ...) log_write(LOG_INFO, comp, __VA_ARGS__)
#define log_warn(comp, ...) log_write(LOG_WARN, comp, __VA_ARGS__)
#define log_error(comp, ...) log_write(LOG_ERROR, comp, __VA_ARGS__)

/* Records a start-up warning (logged at WARN, tagged "startupWarnings"),
 * shown by getLog: "startupWarnings". */
void log_startup_warning(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Appends the kept lines, exactly as written, as strings to the array being
 * built in `array`: `startup` selects the start-up warnings, otherwise the
 * recent global log. Returns the number of lines appended; `*total` (when
 * not NULL) gets the number of lines written since start. */
int log_append_recent(bson_t *array, bool startup, int64_t *total);

/* Appends `doc` to `out` as compact JSON (mongod's log rendering: numbers
 * plain, ObjectIds and dates as {"$oid"} / {"$date"}). */
void log_json_doc(bson_string_t *out, const bson_t *doc, bool array);

#endif
