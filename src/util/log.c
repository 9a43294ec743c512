/* log: stderr logging with levels and an in-memory ring of recent lines for
 * getLog. Loop-thread only except log_write, which other threads may call
 * (guarded by a mutex). */
#include "util/log.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

#define LOG_RING 1024
#define LOG_LINE 512
#define LOG_STARTUP_MAX 32

static log_level_t log_level = LOG_INFO;
static pthread_mutex_t log_mutex = PTHREAD_MUTEX_INITIALIZER;
static char log_ring[LOG_RING][LOG_LINE];
static unsigned log_ring_next;
static unsigned log_ring_count;
static char log_startup[LOG_STARTUP_MAX][LOG_LINE];
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

static void log_vformat(char *line, size_t size, log_level_t level, const char *component,
                        const char *fmt, va_list ap)
{
    static const char letters[] = "DIWE";
    struct timeval tv;
    gettimeofday(&tv, NULL);
    struct tm tm;
    gmtime_r(&tv.tv_sec, &tm);
    int n = snprintf(line, size, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ %c %-8s ",
                     tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
                     tm.tm_sec, (int)(tv.tv_usec / 1000), letters[level], component);
    if (n > 0 && (size_t)n < size)
        vsnprintf(line + n, size - (size_t)n, fmt, ap);
}

void log_write(log_level_t level, const char *component, const char *fmt, ...)
{
    if (level < log_level)
        return;
    char line[LOG_LINE];
    va_list ap;
    va_start(ap, fmt);
    log_vformat(line, sizeof line, level, component, fmt, ap);
    va_end(ap);
    pthread_mutex_lock(&log_mutex);
    fprintf(stderr, "%s\n", line);
    memcpy(log_ring[log_ring_next], line, LOG_LINE);
    log_ring_next = (log_ring_next + 1) % LOG_RING;
    if (log_ring_count < LOG_RING)
        log_ring_count++;
    pthread_mutex_unlock(&log_mutex);
}

void log_startup_warning(const char *fmt, ...)
{
    char msg[LOG_LINE - 64];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    log_write(LOG_WARN, "CONTROL", "%s", msg);
    pthread_mutex_lock(&log_mutex);
    if (log_startup_count < LOG_STARTUP_MAX)
        snprintf(log_startup[log_startup_count++], LOG_LINE, "%s", msg);
    pthread_mutex_unlock(&log_mutex);
}

int log_append_recent(bson_t *array, bool startup)
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
    } else {
        unsigned first = (log_ring_next + LOG_RING - log_ring_count) % LOG_RING;
        for (unsigned i = 0; i < log_ring_count; i++, n++) {
            bson_uint32_to_string((uint32_t)n, &k, key, sizeof key);
            bson_append_utf8(array, k, -1, log_ring[(first + i) % LOG_RING], -1);
        }
    }
    pthread_mutex_unlock(&log_mutex);
    return n;
}
