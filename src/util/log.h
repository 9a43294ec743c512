/* log: one line per event on stderr ("2026-11-30T14:16:40.123Z I NETWORK
 * listening on 127.0.0.1:27017"), filtered by level, with the most recent
 * lines kept in memory for the getLog command. */
#ifndef ATOMDB_LOG_H
#define ATOMDB_LOG_H

#include <bson/bson.h>

/* Severity, most verbose first. */
typedef enum log_level {
    LOG_DEBUG = 0,
    LOG_INFO = 1,
    LOG_WARN = 2,
    LOG_ERROR = 3,
} log_level_t;

/* Sets the lowest level that is printed. */
void log_set_level(log_level_t level);
/* The current level. */
log_level_t log_get_level(void);
/* Parses "debug"/"info"/"warn"/"error"; false when unknown. */
bool log_parse_level(const char *name, log_level_t *out);

/* Logs one line of `component` (e.g. "NETWORK", "COMMAND") at `level`. */
void log_write(log_level_t level, const char *component, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#define log_debug(comp, ...) log_write(LOG_DEBUG, comp, __VA_ARGS__)
#define log_info(comp, ...) log_write(LOG_INFO, comp, __VA_ARGS__)
#define log_warn(comp, ...) log_write(LOG_WARN, comp, __VA_ARGS__)
#define log_error(comp, ...) log_write(LOG_ERROR, comp, __VA_ARGS__)

/* Records a start-up warning (also logged at WARN), shown by
 * getLog: "startupWarnings". */
void log_startup_warning(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Appends the kept lines as strings to the array being built in `array`:
 * `startup` selects the start-up warnings, otherwise the recent global log.
 * Returns the number of lines appended. */
int log_append_recent(bson_t *array, bool startup);

#endif
