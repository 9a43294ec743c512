/* stats: what every command costs — counts by command and outcome, latency
 * histograms, per-namespace read/write time for the `top` command, and the
 * slow-operation log's settings (slowms, sampleRate, profiling level).
 * Touched by the loop thread only; the metrics endpoint reads it there too. */
#ifndef ATOMDB_STATS_H
#define ATOMDB_STATS_H

#include <bson/bson.h>
#include <stdbool.h>
#include <stdint.h>

/* Upper bounds, in seconds, of the latency histogram's buckets (Prometheus
 * `le`); one more bucket, +Inf, follows them. */
#define STATS_BUCKETS 16
extern const double stats_bucket_bounds[STATS_BUCKETS];

/* One command's figures since start. */
typedef struct stats_cmd {
    int64_t ok;                          /* replied ok: 1 */
    int64_t failed;                      /* replied ok: 0 */
    int64_t buckets[STATS_BUCKETS + 1];  /* per bucket (not cumulative), last +Inf */
    uint64_t sum_ns;                     /* total latency */
} stats_cmd_t;

/* What finished commands read, summed (the metrics' documents figures). */
typedef struct stats_docs {
    int64_t keys_examined;
    int64_t docs_examined;
    int64_t returned;
    int64_t slow_ops;     /* operations logged as slow */
} stats_docs_t;
extern stats_docs_t stats_docs;

/* Counts one finished command of `ns` nanoseconds into `s`. */
void stats_cmd_record(stats_cmd_t *s, bool ok, uint64_t ns);

/* Which of top's per-namespace counters an operation goes to. */
typedef enum stats_top_kind {
    STATS_TOP_QUERIES,
    STATS_TOP_GETMORE,
    STATS_TOP_INSERT,
    STATS_TOP_UPDATE,
    STATS_TOP_REMOVE,
    STATS_TOP_COMMANDS,
} stats_top_kind_t;

/* Adds one operation on namespace `ns` ("db.coll") of `micros` to top's
 * totals, as a write (writeLock) or a read (readLock). */
void stats_top_record(const char *ns, stats_top_kind_t kind, bool write, int64_t micros);

/* Appends top's `totals` document fields (note, then one per namespace) to
 * `totals`. */
void stats_top_append(bson_t *totals);

/* The slow-operation log's settings (mongod's slowms, slowOpSampleRate). */
typedef struct stats_slow {
    int32_t slowms;       /* log operations slower than this; default 100 */
    double sample_rate;   /* fraction of slow operations logged; default 1.0 */
} stats_slow_t;

/* The settings (from --slowms, --slowOpSampleRate, `profile`). */
extern stats_slow_t stats_slow;

/* Whether an operation of `ms` milliseconds is logged as slow (draws the
 * sample when sampleRate < 1). */
bool stats_slow_should_log(int64_t ms);

/* One operation that was logged as slow, for the status page. */
typedef struct stats_slow_op {
    int64_t at_ms;        /* when it finished, ms since the epoch */
    int64_t millis;       /* how long it took */
    int64_t wait_millis;  /* of which parked on a lock or lease */
    char ns[120];
    char command[32];
    char plan[48];
} stats_slow_op_t;

#define STATS_SLOW_RECENT 16

/* Remembers a slow operation (the oldest of STATS_SLOW_RECENT is dropped). */
void stats_slow_remember(const stats_slow_op_t *op);

/* Calls `fn` for each remembered slow operation, newest first. */
void stats_slow_foreach(void (*fn)(const stats_slow_op_t *op, void *arg), void *arg);

/* Releases top's table (at exit). */
void stats_destroy(void);

#endif
