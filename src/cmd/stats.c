/* stats: per-command counts and latency histograms, the `top` command's
 * per-namespace totals, and the slow-operation log's settings. The
 * dispatcher records every finished command here (cmd_run). */
#include "cmd/stats.h"

#include <stdlib.h>
#include <string.h>

#include "util/hash.h"

const double stats_bucket_bounds[STATS_BUCKETS] = {
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
    0.05,   0.1,     0.25,   0.5,   1.0,    2.5,   5.0,  10.0};

stats_slow_t stats_slow = {.slowms = 100, .sample_rate = 1.0};
stats_docs_t stats_docs;

void stats_cmd_record(stats_cmd_t *s, bool ok, uint64_t ns)
{
    if (ok)
        s->ok++;
    else
        s->failed++;
    s->sum_ns += ns;
    double secs = (double)ns / 1e9;
    int b = 0;
    while (b < STATS_BUCKETS && secs > stats_bucket_bounds[b])
        b++;
    s->buckets[b]++;
}

/* ---- top ---- */

/* One time-and-count pair of top's reply. */
typedef struct stats_usage {
    int64_t time; /* microseconds */
    int64_t count;
} stats_usage_t;

/* A namespace's totals, as mongod's Top::UsageData. */
typedef struct stats_ns {
    char *ns;
    stats_usage_t total, read, write;
    stats_usage_t kinds[STATS_TOP_COMMANDS + 1];
    UT_hash_handle hh;
} stats_ns_t;

static stats_ns_t *stats_top;

static void stats_usage_add(stats_usage_t *u, int64_t micros)
{
    u->time += micros;
    u->count++;
}

void stats_top_record(const char *ns, stats_top_kind_t kind, bool write, int64_t micros)
{
    static stats_ns_t *last; /* the namespace of the previous call: usually the same */
    stats_ns_t *n = last;
    if (!n || strcmp(n->ns, ns) != 0) {
        HASH_FIND(hh, stats_top, ns, strlen(ns), n);
    }
    if (!n) {
        size_t len = strlen(ns);
        n = bson_malloc0(sizeof *n);
        n->ns = bson_strdup(ns);
        HASH_ADD_KEYPTR(hh, stats_top, n->ns, len, n);
    }
    last = n;
    stats_usage_add(&n->total, micros);
    stats_usage_add(write ? &n->write : &n->read, micros);
    stats_usage_add(&n->kinds[kind], micros);
}

static void stats_usage_append(bson_t *doc, const char *key, const stats_usage_t *u)
{
    bson_t d;
    bson_append_document_begin(doc, key, -1, &d);
    BSON_APPEND_INT64(&d, "time", u->time);
    BSON_APPEND_INT64(&d, "count", u->count);
    bson_append_document_end(doc, &d);
}

static int stats_ns_cmp(const void *a, const void *b)
{
    return strcmp((*(stats_ns_t *const *)a)->ns, (*(stats_ns_t *const *)b)->ns);
}

void stats_top_append(bson_t *totals)
{
    static const char *kind_names[] = {"queries", "getmore", "insert",
                                       "update",  "remove",  "commands"};
    BSON_APPEND_UTF8(totals, "note", "all times in microseconds");
    size_t n = HASH_COUNT(stats_top), i = 0;
    stats_ns_t **sorted = bson_malloc0((n + 1) * sizeof *sorted);
    stats_ns_t *e, *tmp;
    HASH_ITER(hh, stats_top, e, tmp)
        sorted[i++] = e;
    qsort(sorted, n, sizeof *sorted, stats_ns_cmp); /* mongod's map is ordered */
    for (i = 0; i < n; i++) {
        bson_t d;
        e = sorted[i];
        bson_append_document_begin(totals, e->ns, -1, &d);
        stats_usage_append(&d, "total", &e->total);
        stats_usage_append(&d, "readLock", &e->read);
        stats_usage_append(&d, "writeLock", &e->write);
        for (int k = 0; k <= STATS_TOP_COMMANDS; k++)
            stats_usage_append(&d, kind_names[k], &e->kinds[k]);
        bson_append_document_end(totals, &d);
    }
    bson_free(sorted);
}

bool stats_slow_should_log(int64_t ms)
{
    if (ms <= stats_slow.slowms)
        return false;
    if (stats_slow.sample_rate >= 1.0)
        return true;
    return (double)random() / ((double)RAND_MAX + 1.0) < stats_slow.sample_rate;
}

static stats_slow_op_t stats_recent[STATS_SLOW_RECENT];
static size_t stats_nrecent, stats_recent_next;

void stats_slow_remember(const stats_slow_op_t *op)
{
    stats_recent[stats_recent_next] = *op;
    stats_recent_next = (stats_recent_next + 1) % STATS_SLOW_RECENT;
    if (stats_nrecent < STATS_SLOW_RECENT)
        stats_nrecent++;
}

void stats_slow_foreach(void (*fn)(const stats_slow_op_t *op, void *arg), void *arg)
{
    for (size_t i = 0; i < stats_nrecent; i++)
        fn(&stats_recent[(stats_recent_next + STATS_SLOW_RECENT - 1 - i) % STATS_SLOW_RECENT], arg);
}

void stats_destroy(void)
{
    stats_ns_t *e, *tmp;
    HASH_ITER(hh, stats_top, e, tmp) {
        HASH_DEL(stats_top, e);
        bson_free(e->ns);
        bson_free(e);
    }
}
