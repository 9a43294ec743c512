/* measure.c: `atomdb-bench measure-server` — issue 3's server CPU per find and
 * per $inc by _id and memory per document, and issue 4's start-up time,
 * restart time with many documents and the cost of --journal write against
 * --journal none on the hot counter. Server CPU comes from /proc/PID/stat
 * (utime + stime of all the server's threads). */
#include "bench.h"

#include <fcntl.h>
#include <mongoc/mongoc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* Server CPU time (user + system, all threads) in seconds, -1 on error;
 * with `children`, also that of its exited, reaped children (PostgreSQL's
 * backends). */
double measure_cpu_total_s(pid_t pid, bool children)
{
    char path[64], buf[2048];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    char *p = strrchr(buf, ')');
    if (!p)
        return -1;
    unsigned long long ut = 0, st = 0, cut = 0, cst = 0;
    /* fields after ")": state(3) ... utime(14) stime(15) cutime(16) cstime(17) */
    if (sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %llu %llu", &ut, &st,
               &cut, &cst) != 4)
        return -1;
    if (children)
        ut += cut + cst;
    return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

static double measure_cpu_s(pid_t pid)
{
    return measure_cpu_total_s(pid, false);
}

/* Resident set size in bytes, -1 on error. */
static long measure_rss(pid_t pid)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    long kb = -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "VmRSS: %ld kB", &kb) == 1)
            break;
    fclose(f);
    return kb < 0 ? -1 : kb * 1024;
}

/* A libmongoc client for an engine (caller destroys), NULL on failure. */
static mongoc_client_t *measure_client(const engine_t *e)
{
    char uri[160];
    snprintf(uri, sizeof uri,
             "mongodb://127.0.0.1:%d/?directConnection=true&serverSelectionTimeoutMS=30000"
             "&socketTimeoutMS=120000",
             e->port);
    mongoc_client_t *c = mongoc_client_new(uri);
    if (c)
        mongoc_client_set_error_api(c, MONGOC_ERROR_API_VERSION_2);
    return c;
}

/* Runs ping; true when the server answered. */
static bool measure_ping(mongoc_client_t *c)
{
    bson_t *cmd = BCON_NEW("ping", BCON_INT32(1));
    bson_error_t e;
    bool ok = mongoc_client_command_simple(c, "admin", cmd, NULL, NULL, &e);
    bson_destroy(cmd);
    return ok;
}

/* The ~100-byte document number i (its BSON size goes to *size). */
static bson_t *measure_doc(long i, size_t *size)
{
    bson_oid_t oid;
    bson_oid_init(&oid, NULL);
    char name[32];
    snprintf(name, sizeof name, "user%08ld", i);
    bson_t *d = BCON_NEW("_id", BCON_OID(&oid), "name", BCON_UTF8(name), "city",
                         BCON_UTF8("Hangzhou"), "score", BCON_INT64(i), "favCount",
                         BCON_INT32(0), "active", BCON_BOOL(true), "note",
                         BCON_UTF8("0123456789"));
    if (size)
        *size = d->len;
    return d;
}

/* Inserts n documents in batches of 1,000; returns the total BSON bytes or -1. */
static long measure_insert(mongoc_client_t *c, const char *coll_name, long n)
{
    mongoc_collection_t *coll = mongoc_client_get_collection(c, "bench", coll_name);
    bson_t *docs[1000];
    long bytes = 0;
    bool ok = true;
    for (long base = 0; base < n && ok && !engine_interrupted; base += 1000) {
        int k = (int)(n - base < 1000 ? n - base : 1000);
        for (int i = 0; i < k; i++) {
            size_t sz;
            docs[i] = measure_doc(base + i, &sz);
            bytes += (long)sz;
        }
        bson_t *opts = BCON_NEW("ordered", BCON_BOOL(false));
        bson_error_t e;
        ok = mongoc_collection_insert_many(coll, (const bson_t **)docs, (size_t)k, opts, NULL, &e);
        if (!ok)
            fprintf(stderr, "insert: %s\n", e.message);
        bson_destroy(opts);
        for (int i = 0; i < k; i++)
            bson_destroy(docs[i]);
    }
    mongoc_collection_destroy(coll);
    return ok ? bytes : -1;
}

/* Counts the documents of a collection (count command, estimated = from the
 * collection's metadata), -1 on error. */
static int64_t measure_count(mongoc_client_t *c, const char *coll_name)
{
    mongoc_collection_t *coll = mongoc_client_get_collection(c, "bench", coll_name);
    bson_error_t e;
    int64_t n = mongoc_collection_estimated_document_count(coll, NULL, NULL, NULL, &e);
    mongoc_collection_destroy(coll);
    return n;
}

/* Issue 4: empty start-up, five times; prints each and the median. */
static void measure_startup(const char *atomdb)
{
    double ms[5];
    eng_conf_t conf = {ENG_ATOMDB, "write", 0};
    printf("\n## start-up, empty --dbpath, --journal write (target < 50 ms)\n");
    for (int i = 0; i < 5 && !engine_interrupted; i++) {
        engine_t e;
        char err[256];
        int64_t t0 = bench_now_ns();
        if (!engine_start(&e, &conf, atomdb, err, sizeof err)) {
            printf("  start failed: %s\n", err);
            return;
        }
        int64_t t1 = bench_now_ns();
        mongoc_client_t *c = measure_client(&e);
        bool ok = c && measure_ping(c);
        int64_t t2 = bench_now_ns();
        mongoc_client_destroy(c);
        engine_stop(&e, false);
        ms[i] = (double)(t1 - t0) / 1e6;
        printf("  run %d: accepting connections after %.1f ms, first ping answered after %.1f "
               "ms%s\n",
               i + 1, ms[i], (double)(t2 - t0) / 1e6, ok ? "" : " (ping failed)");
    }
    for (int a = 0; a < 5; a++)
        for (int b = a + 1; b < 5; b++)
            if (ms[b] < ms[a]) {
                double t = ms[a];
                ms[a] = ms[b];
                ms[b] = t;
            }
    printf("  median: %.1f ms -> %s\n", ms[2], ms[2] < 50 ? "met" : "NOT MET");
}

/* Directory for perf profiles of the CPU phase (measure-server --perf DIR). */
static const char *measure_perf_dir;

/* Starts `perf record -g` on pid into DIR/perf-NAME.data; returns its pid or 0. */
static pid_t measure_perf_start(pid_t pid, const char *name)
{
    if (!measure_perf_dir)
        return 0;
    char target[32], out[512];
    snprintf(target, sizeof target, "%d", (int)pid);
    snprintf(out, sizeof out, "%s/perf-%s.data", measure_perf_dir, name);
    pid_t p = fork();
    if (p == 0) {
        int fd = open("/dev/null", O_WRONLY);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
        }
        execlp("perf", "perf", "record", "-F", "4000", "-g", "-p", target, "-o", out,
               (char *)NULL);
        _exit(127);
    }
    bench_sleep_us(300000);
    return p > 0 ? p : 0;
}

/* Stops a perf started by measure_perf_start and waits for it to write. */
static void measure_perf_stop(pid_t p)
{
    if (p <= 0)
        return;
    kill(p, SIGINT);
    int64_t deadline = bench_now_ns() + 30LL * 1000000000;
    while (waitpid(p, NULL, WNOHANG) != p && bench_now_ns() < deadline)
        bench_sleep_us(10000);
}

/* Issue 3: server CPU per find by _id and per $inc by _id, one client, then
 * the $inc under 16 clients; journal is "write" or "none". */
static void measure_cpu(const char *atomdb, long n, const char *journal)
{
    eng_conf_t conf = {ENG_ATOMDB, journal, !strcmp(journal, "none") ? 2 : 0};
    engine_t e;
    char err[256];
    printf("\n## server CPU per operation, --journal %s, one client, %ld ops each "
           "(target < 5 us)\n",
           journal, n);
    if (!engine_start(&e, &conf, atomdb, err, sizeof err)) {
        printf("  start failed: %s\n", err);
        return;
    }
    mongoc_client_t *c = measure_client(&e);
    const long ndocs = 10000;
    mongoc_collection_t *coll = mongoc_client_get_collection(c, "bench", "cpu");
    bson_t *docs[1000];
    for (long base = 0; base < ndocs; base += 1000) {
        for (int i = 0; i < 1000; i++)
            docs[i] = BCON_NEW("_id", BCON_INT64(base + i), "n", BCON_INT64(0), "name",
                               BCON_UTF8("some user name"));
        mongoc_collection_insert_many(coll, (const bson_t **)docs, 1000, NULL, NULL, NULL);
        for (int i = 0; i < 1000; i++)
            bson_destroy(docs[i]);
    }
    for (int kind = 0; kind < 2 && !engine_interrupted; kind++) {
        char pname[32];
        snprintf(pname, sizeof pname, "%s-%s", kind == 0 ? "find" : "inc", journal);
        pid_t perf = measure_perf_start(e.pid, pname);
        double cpu0 = measure_cpu_s(e.pid);
        int64_t t0 = bench_now_ns();
        long done = 0, errors = 0;
        for (long i = 0; i < n && !engine_interrupted; i++) {
            bson_t *filter = BCON_NEW("_id", BCON_INT64((i * 7919) % ndocs));
            bson_error_t be;
            if (kind == 0) {
                bson_t *opts = BCON_NEW("limit", BCON_INT64(1), "singleBatch", BCON_BOOL(true));
                mongoc_cursor_t *cur = mongoc_collection_find_with_opts(coll, filter, opts, NULL);
                const bson_t *doc;
                if (!mongoc_cursor_next(cur, &doc))
                    errors++;
                mongoc_cursor_destroy(cur);
                bson_destroy(opts);
            } else {
                bson_t *upd = BCON_NEW("$inc", "{", "n", BCON_INT32(1), "}");
                if (!mongoc_collection_update_one(coll, filter, upd, NULL, NULL, &be))
                    errors++;
                bson_destroy(upd);
            }
            bson_destroy(filter);
            done++;
        }
        double wall = (double)(bench_now_ns() - t0) / 1e9;
        double cpu = measure_cpu_s(e.pid) - cpu0;
        measure_perf_stop(perf);
        double per = cpu / (double)done * 1e6;
        printf("  %-14s %ld ops in %.2f s (%.0f ops/s), server CPU %.2f s = %.2f us/op -> %s%s\n",
               kind == 0 ? "find by _id" : "$inc by _id", done, wall, (double)done / wall, cpu,
               per, per < 5 ? "met" : "NOT MET", errors ? " (errors!)" : "");
    }
    mongoc_collection_destroy(coll);
    mongoc_client_destroy(c);

    /* The same $inc under 16 concurrent clients (group commit, batched wakeups). */
    char derr[ERRLEN];
    void *parent = drv_mongo.connect(&e, journal, derr);
    if (parent) {
        cell_t cell = {&e, SCEN_COUNTER, STRAT_ATOMIC, 16, 3.0, 0};
        row_t row;
        memset(&row, 0, sizeof row);
        char pname[32];
        snprintf(pname, sizeof pname, "inc16-%s", journal);
        pid_t perf = measure_perf_start(e.pid, pname);
        double cpu0 = measure_cpu_s(e.pid);
        runner_run(&cell, parent, &row, NULL);
        double cpu = measure_cpu_s(e.pid) - cpu0;
        measure_perf_stop(perf);
        printf("  %-14s %llu ops at 16 clients (%.0f ops/s), server CPU %.2f s = %.2f us/op%s\n",
               "$inc (hot doc)", (unsigned long long)row.ops, row.ops_per_sec, cpu,
               row.ops ? cpu / (double)row.ops * 1e6 : 0.0,
               row.violations ? " (violations!)" : "");
        drv_mongo.disconnect(parent);
    }
    engine_stop(&e, false);
}

/* Issue 3: RSS growth per document against its BSON size (--journal none),
 * twice: with the server's defaults, where the change streams' history
 * (--change-stream-history-mb, 64 MiB by default: a bounded buffer, not a
 * per-document cost) fills up along the way, and with that history bounded
 * to 1 MiB, which leaves the store's own cost per document (issue 17). */
static void measure_memory(const char *atomdb, long n)
{
    size_t one;
    bson_destroy(measure_doc(0, &one));
    printf("\n## memory per document, --journal none, %ld documents of %zu bytes BSON "
           "(target <= BSON + 64 including the _id index entry)\n",
           n, one);
    for (int bounded = 0; bounded < 2 && !engine_interrupted; bounded++) {
        eng_conf_t conf = {ENG_ATOMDB, "none", 2};
        engine_t e;
        char err[256];
        bench_history_mb = bounded ? "1" : NULL;
        bool started = engine_start(&e, &conf, atomdb, err, sizeof err);
        bench_history_mb = NULL;
        if (!started) {
            printf("  start failed: %s\n", err);
            return;
        }
        mongoc_client_t *c = measure_client(&e);
        measure_ping(c);
        long rss0 = measure_rss(e.pid);
        int64_t t0 = bench_now_ns();
        long bytes = measure_insert(c, "mem", n);
        double secs = (double)(bench_now_ns() - t0) / 1e9;
        long rss1 = measure_rss(e.pid);
        if (bytes > 0) {
            double per = (double)(rss1 - rss0) / (double)n;
            double bson = (double)bytes / (double)n;
            double over = per - bson;
            printf("  %s\n    inserted in %.1f s (%.0f docs/s); RSS %.1f MiB -> %.1f MiB\n",
                   bounded ? "--change-stream-history-mb 1 (the store alone):"
                           : "defaults (the change streams' history, up to 64 MiB, included):",
                   secs, (double)n / secs, rss0 / 1048576.0, rss1 / 1048576.0);
            printf("    RSS growth per document %.1f bytes = BSON %.0f + %.1f overhead%s\n", per,
                   bson, over,
                   bounded ? over <= 64 ? " (record + _id index entry) -> met"
                                        : " (record + _id index entry) -> NOT MET"
                           : "");
        }
        mongoc_client_destroy(c);
        engine_stop(&e, false);
    }
}

/* Issue 4: restart with n documents, after a clean shutdown (snapshot) and
 * after kill -9 (recovery from the log). Only the start is timed. */
static void measure_restart(const char *atomdb, long n)
{
    printf("\n## restart with %ld documents of ~100 bytes, --journal write (target < 3 s)\n", n);
    for (int crash = 0; crash < 2 && !engine_interrupted; crash++) {
        eng_conf_t conf = {ENG_ATOMDB, "write", 0};
        engine_t e;
        char err[256];
        if (!engine_start(&e, &conf, atomdb, err, sizeof err)) {
            printf("  start failed: %s\n", err);
            return;
        }
        mongoc_client_t *c = measure_client(&e);
        measure_insert(c, "restart", n);
        mongoc_client_destroy(c);
        kill(e.pid, crash ? SIGKILL : SIGTERM);
        int64_t stop_deadline = bench_now_ns() + 300LL * 1000000000;
        while (waitpid(e.pid, NULL, WNOHANG) != e.pid && bench_now_ns() < stop_deadline)
            bench_sleep_us(5000);
        e.pid = 0;
        int64_t t0 = bench_now_ns();
        bool ok = engine_restart(&e, atomdb, 0, err, sizeof err);
        int64_t t1 = bench_now_ns();
        if (!ok) {
            printf("  restart failed: %s\n", err);
            engine_stop(&e, true);
            return;
        }
        c = measure_client(&e);
        measure_ping(c);
        int64_t count = measure_count(c, "restart");
        int64_t t2 = bench_now_ns();
        mongoc_client_destroy(c);
        printf("  %-32s accepting connections after %.2f s, count = %lld answered after %.2f s "
               "-> %s\n",
               crash ? "after kill -9 (log replay):" : "after clean shutdown (snapshot):",
               (double)(t1 - t0) / 1e9, (long long)count, (double)(t2 - t0) / 1e9,
               (double)(t2 - t0) / 1e9 < 3 && count == n ? "met" : "NOT MET");
        engine_stop(&e, false);
    }
}

/* Issue 4: hot counter, 16 clients, --journal write against none. */
static void measure_journal_cost(const char *atomdb, double secs)
{
    printf("\n## --journal write vs none: hot counter ($inc), 16 clients, %.0f s each, "
           "alternating, best of 2 (target: write costs <= 15%%)\n",
           secs);
    const char *modes[2] = {"none", "write"};
    double best[2] = {0, 0};
    for (int round = 0; round < 2 && !engine_interrupted; round++) {
        for (int m = 0; m < 2 && !engine_interrupted; m++) {
            eng_conf_t conf = {ENG_ATOMDB, modes[m], m == 0 ? 2 : 0};
            engine_t e;
            char err[256];
            if (!engine_start(&e, &conf, atomdb, err, sizeof err)) {
                printf("  start failed: %s\n", err);
                return;
            }
            void *parent = drv_mongo.connect(&e, modes[m], err);
            if (parent) {
                cell_t cell = {&e, SCEN_COUNTER, STRAT_ATOMIC, 16, secs, 0};
                row_t row;
                memset(&row, 0, sizeof row);
                runner_run(&cell, parent, &row, NULL);
                printf("  --journal %-5s round %d: %.0f ops/s, p50 %.0f us, p99 %.0f us%s\n",
                       modes[m], round + 1, row.ops_per_sec, row.p50_us, row.p99_us,
                       row.violations ? " (violations!)" : "");
                if (row.ops_per_sec > best[m])
                    best[m] = row.ops_per_sec;
                drv_mongo.disconnect(parent);
            }
            engine_stop(&e, false);
        }
    }
    if (best[0] > 0) {
        double cost = 1 - best[1] / best[0];
        printf("  best: none %.0f ops/s, write %.0f ops/s: write costs %.1f%% -> %s\n", best[0],
               best[1], cost * 100, cost <= 0.15 ? "met" : "NOT MET");
    }
}

int measure_server(const char *atomdb_path, bool quick, long docs, const char *perf_dir,
                   const char *only)
{
    measure_perf_dir = perf_dir;
    if (docs <= 0)
        docs = quick ? 100000 : 1000000;
    printf("atomdb-bench measure-server: atomdb = %s, %ld documents%s\n", atomdb_path, docs,
           quick ? " (quick)" : "");
    if (!only || strstr(only, "startup"))
        measure_startup(atomdb_path);
    if (!only || strstr(only, "cpu"))
        measure_cpu(atomdb_path, quick ? 20000 : 200000, "none");
    if (!only || strstr(only, "cpu"))
        measure_cpu(atomdb_path, quick ? 20000 : 200000, "write");
    if (!only || strstr(only, "memory"))
        measure_memory(atomdb_path, docs);
    if (!only || strstr(only, "restart"))
        measure_restart(atomdb_path, docs);
    if (!only || strstr(only, "journal"))
        measure_journal_cost(atomdb_path, quick ? 1.0 : 3.0);
    if (!only || strstr(only, "mms"))
        measure_mms(atomdb_path);
    if (!only || strstr(only, "connect"))
        measure_connect(atomdb_path, quick ? 1.0 : 3.0);
    return engine_interrupted ? 130 : 0;
}
