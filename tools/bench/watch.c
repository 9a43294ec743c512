/* watch.c: `atomdb-bench watch` — issue 18's change stream targets. The hot
 * counter ($inc on one document, plus $set of the writer's send time) from
 * 16 writer processes while 0, 1 and 16 processes watch the collection
 * through libmongoc's mongoc_collection_watch: writer ops/s with 16 streams
 * against none (target >= 90%), and write-to-event latency (the send time
 * carried in updatedFields.t against the time the stream returned the
 * event; target p99 <= 10 ms). Every stream must see every update, in
 * order. Besides the server's CPU per update it reports the writers' own
 * CPU per update and a watcher's CPU per event, so whose cost limits the
 * cell is visible. Medians of `rounds` runs per cell. */
#include "bench.h"

#include <mongoc/mongoc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define WATCH_WRITERS 16
#define WATCH_MAX_STREAMS 16

/* What the forked processes hand back (shared memory). */
typedef struct {
    volatile int ready;            /* streams whose aggregate was answered */
    volatile int writers_done;     /* set by the parent when every writer exited */
    volatile uint64_t total;       /* updates the writers made (valid once done) */
    uint64_t writer_ops[WATCH_WRITERS];
    char writer_error[WATCH_WRITERS][ERRLEN];
    uint64_t events[WATCH_MAX_STREAMS];
    uint64_t out_of_order[WATCH_MAX_STREAMS];
    char stream_error[WATCH_MAX_STREAMS][ERRLEN];
    hist_t hist[WATCH_MAX_STREAMS]; /* write-to-event latency, us */
    double writer_cpu_us[WATCH_WRITERS];      /* each writer process's CPU (user + sys) */
    double stream_cpu_us[WATCH_MAX_STREAMS];  /* each watcher's CPU from its first event on */
} watch_shm_t;

static int64_t watch_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* This process's CPU time so far (user + system), us. */
static double watch_cpu_us(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e6 +
           (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
}

static mongoc_client_t *watch_client(int port)
{
    char uri[160];
    snprintf(uri, sizeof uri,
             "mongodb://127.0.0.1:%d/?directConnection=true&serverSelectionTimeoutMS=30000", port);
    mongoc_client_t *c = mongoc_client_new(uri);
    if (c)
        mongoc_client_set_error_api(c, MONGOC_ERROR_API_VERSION_2);
    return c;
}

static void watch_writer(int port, int id, int64_t deadline_ns, watch_shm_t *shm)
{
    mongoc_client_t *c = watch_client(port);
    mongoc_collection_t *coll = mongoc_client_get_collection(c, "bench", "watch");
    bson_t *sel = BCON_NEW("_id", BCON_UTF8("hot"));
    double cpu0 = watch_cpu_us();
    while (watch_now_ns() < deadline_ns) {
        bson_t *upd = BCON_NEW("$inc", "{", "n", BCON_INT64(1), "}", "$set", "{", "t",
                               BCON_INT64(watch_now_ns()), "}");
        bson_error_t e;
        bool ok = mongoc_collection_update_one(coll, sel, upd, NULL, NULL, &e);
        bson_destroy(upd);
        if (!ok) {
            snprintf(shm->writer_error[id], ERRLEN, "%s", e.message);
            break;
        }
        shm->writer_ops[id]++;
    }
    shm->writer_cpu_us[id] = watch_cpu_us() - cpu0;
    bson_destroy(sel);
    mongoc_collection_destroy(coll);
    mongoc_client_destroy(c);
}

/* Watches until it has seen every update or 10 s after the writers ended. */
static void watch_stream(int port, int id, watch_shm_t *shm)
{
    mongoc_client_t *c = watch_client(port);
    mongoc_collection_t *coll = mongoc_client_get_collection(c, "bench", "watch");
    bson_t *pipeline = bson_new();
    bson_t *opts = BCON_NEW("maxAwaitTimeMS", BCON_INT64(1000));
    mongoc_change_stream_t *cs = mongoc_collection_watch(coll, pipeline, opts);
    const bson_t *err_doc;
    bson_error_t e;
    if (mongoc_change_stream_error_document(cs, &e, &err_doc)) {
        snprintf(shm->stream_error[id], ERRLEN, "watch: %s", e.message);
        __sync_fetch_and_add(&shm->ready, 1);
        goto cleanup;
    }
    __sync_fetch_and_add(&shm->ready, 1);
    int64_t last_n = 0, done_at = 0;
    double cpu0 = -1;
    for (;;) {
        const bson_t *ev;
        if (mongoc_change_stream_next(cs, &ev)) {
            int64_t now = watch_now_ns();
            if (cpu0 < 0) /* the set-up and the idle wait before the writers are not counted */
                cpu0 = watch_cpu_us();
            /* updatedFields {n, t} in one pass: every event is checked, and
             * the check costs the watcher as little as it can */
            bson_iter_t it, ud, f;
            bool has_n = false;
            if (bson_iter_init_find(&it, ev, "updateDescription") &&
                BSON_ITER_HOLDS_DOCUMENT(&it) && bson_iter_recurse(&it, &ud) &&
                bson_iter_find(&ud, "updatedFields") && BSON_ITER_HOLDS_DOCUMENT(&ud) &&
                bson_iter_recurse(&ud, &f)) {
                while (bson_iter_next(&f)) {
                    const char *k = bson_iter_key(&f);
                    if (k[0] == 't' && !k[1]) {
                        int64_t t = bson_iter_as_int64(&f);
                        hist_add(&shm->hist[id], (uint64_t)(now > t ? (now - t) / 1000 : 0));
                    } else if (k[0] == 'n' && !k[1]) {
                        int64_t n = bson_iter_as_int64(&f);
                        if (n != last_n + 1)
                            shm->out_of_order[id]++;
                        last_n = n;
                        has_n = true;
                    }
                }
            }
            if (!has_n)
                shm->out_of_order[id]++; /* not the update event this bench makes */
            shm->events[id]++;
        } else if (mongoc_change_stream_error_document(cs, &e, &err_doc)) {
            snprintf(shm->stream_error[id], ERRLEN, "next: %s", e.message);
            break;
        }
        if (shm->writers_done) {
            if (shm->events[id] >= shm->total)
                break;
            if (!done_at)
                done_at = watch_now_ns();
            else if (watch_now_ns() - done_at > 10 * 1000000000LL)
                break;
        }
    }
    if (cpu0 >= 0)
        shm->stream_cpu_us[id] = watch_cpu_us() - cpu0;
cleanup:
    mongoc_change_stream_destroy(cs);
    bson_destroy(opts);
    bson_destroy(pipeline);
    mongoc_collection_destroy(coll);
    mongoc_client_destroy(c);
}

/* One cell's outcome. */
typedef struct {
    double ops_per_sec, p50_us, p99_us, max_us;
    double srv_us_per_op; /* server CPU per update, delivering to every stream included */
    double wr_us_per_op;  /* the writer processes' own CPU per update (libmongoc, kernel) */
    double watch_us_per_ev; /* a watcher process's CPU per event it received */
    uint64_t ops, missing, out_of_order;
    char error[ERRLEN];
} watch_row_t;

static bool watch_run(const char *atomdb, int streams, double secs, watch_row_t *row)
{
    memset(row, 0, sizeof *row);
    eng_conf_t conf = {ENG_ATOMDB, "write", 0};
    engine_t eng;
    char err[256];
    if (!engine_start(&eng, &conf, atomdb, err, sizeof err)) {
        snprintf(row->error, ERRLEN, "start: %s", err);
        return false;
    }
    mongoc_client_t *c = watch_client(eng.port);
    mongoc_collection_t *coll = mongoc_client_get_collection(c, "bench", "watch");
    bson_t *doc = BCON_NEW("_id", BCON_UTF8("hot"), "n", BCON_INT64(0), "t", BCON_INT64(0));
    bson_error_t e;
    bool ok = mongoc_collection_insert_one(coll, doc, NULL, NULL, &e);
    bson_destroy(doc);
    mongoc_collection_destroy(coll);
    mongoc_client_destroy(c);
    if (!ok) {
        snprintf(row->error, ERRLEN, "setup: %s", e.message);
        engine_stop(&eng, false);
        return false;
    }
    watch_shm_t *shm = mmap(NULL, sizeof *shm, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                            -1, 0);
    memset(shm, 0, sizeof *shm);
    pid_t spids[WATCH_MAX_STREAMS], wpids[WATCH_WRITERS];
    for (int i = 0; i < streams; i++) {
        if ((spids[i] = fork()) == 0) {
            watch_stream(eng.port, i, shm);
            _exit(0);
        }
    }
    while (shm->ready < streams && !engine_interrupted)
        usleep(1000);
    double cpu0 = engine_cpu_s(eng.pid, false);
    int64_t t0 = watch_now_ns(), deadline = t0 + (int64_t)(secs * 1e9);
    for (int i = 0; i < WATCH_WRITERS; i++) {
        if ((wpids[i] = fork()) == 0) {
            watch_writer(eng.port, i, deadline, shm);
            _exit(0);
        }
    }
    for (int i = 0; i < WATCH_WRITERS; i++)
        waitpid(wpids[i], NULL, 0);
    double elapsed = (double)(watch_now_ns() - t0) / 1e9;
    double wr_cpu = 0, st_cpu = 0;
    uint64_t st_events = 0;
    for (int i = 0; i < WATCH_WRITERS; i++) {
        row->ops += shm->writer_ops[i];
        wr_cpu += shm->writer_cpu_us[i];
        if (shm->writer_error[i][0] && !row->error[0])
            snprintf(row->error, ERRLEN, "writer: %s", shm->writer_error[i]);
    }
    shm->total = row->ops;
    __sync_synchronize();
    shm->writers_done = 1;
    for (int i = 0; i < streams; i++)
        waitpid(spids[i], NULL, 0);
    double cpu1 = engine_cpu_s(eng.pid, false);
    if (row->ops && cpu0 >= 0 && cpu1 >= cpu0)
        row->srv_us_per_op = (cpu1 - cpu0) * 1e6 / (double)row->ops;
    hist_t all;
    memset(&all, 0, sizeof all);
    for (int i = 0; i < streams; i++) {
        hist_merge(&all, &shm->hist[i]);
        if (shm->events[i] < row->ops)
            row->missing += row->ops - shm->events[i];
        row->out_of_order += shm->out_of_order[i];
        st_cpu += shm->stream_cpu_us[i];
        st_events += shm->events[i];
        if (shm->stream_error[i][0] && !row->error[0])
            snprintf(row->error, ERRLEN, "stream: %s", shm->stream_error[i]);
    }
    row->ops_per_sec = (double)row->ops / elapsed;
    if (row->ops)
        row->wr_us_per_op = wr_cpu / (double)row->ops;
    if (st_events)
        row->watch_us_per_ev = st_cpu / (double)st_events;
    row->p50_us = hist_quantile(&all, 0.5);
    row->p99_us = hist_quantile(&all, 0.99);
    row->max_us = hist_quantile(&all, 1.0);
    munmap(shm, sizeof *shm);
    engine_stop(&eng, false);
    return true;
}

static int watch_cmp(const void *a, const void *b)
{
    double x = ((const watch_row_t *)a)->ops_per_sec, y = ((const watch_row_t *)b)->ops_per_sec;
    return x < y ? -1 : x > y;
}

int watch_bench(const char *atomdb, double secs, int rounds, int only)
{
    static const int cells[] = {0, 1, 16};
    double median_ops[3] = {0, 0, 0};
    int bad = 0;
    printf("atomdb-bench watch: atomdb = %s, %d writers ($inc + $set t), %.1f s per run, "
           "median of %d\n",
           atomdb, WATCH_WRITERS, secs, rounds);
    printf("%-8s %10s %10s %10s %10s %10s %10s %10s %8s %8s  %s\n", "streams", "ops/s",
           "srv us/op", "wr us/op", "wat us/ev", "ev p50us", "ev p99us", "ev maxus", "missing",
           "order", "note");
    for (int k = 0; k < 3 && !engine_interrupted; k++) {
        if (only >= 0 && cells[k] != only)
            continue;
        watch_row_t runs[9];
        int n = 0;
        for (int r = 0; r < rounds && r < 9 && !engine_interrupted; r++) {
            if (!watch_run(atomdb, cells[k], secs, &runs[n])) {
                printf("%-8d failed: %s\n", cells[k], runs[n].error);
                bad++;
                continue;
            }
            n++;
        }
        if (n == 0)
            continue;
        qsort(runs, (size_t)n, sizeof runs[0], watch_cmp);
        watch_row_t *m = &runs[n / 2];
        median_ops[k] = m->ops_per_sec;
        if (m->missing || m->out_of_order || m->error[0])
            bad++;
        printf("%-8d %10.0f %10.1f %10.1f %10.2f %10.0f %10.0f %10.0f %8llu %8llu  %s\n",
               cells[k], m->ops_per_sec, m->srv_us_per_op, m->wr_us_per_op, m->watch_us_per_ev,
               cells[k] ? m->p50_us : 0, cells[k] ? m->p99_us : 0, cells[k] ? m->max_us : 0,
               (unsigned long long)m->missing, (unsigned long long)m->out_of_order, m->error);
        if (cells[k] == 16)
            printf("  event delivery p99 with 16 streams: %.1f ms (target <= 10 ms) -> %s\n",
                   m->p99_us / 1000, m->p99_us <= 10000 ? "met" : "NOT MET");
    }
    if (median_ops[0] > 0 && median_ops[2] > 0) {
        double ratio = median_ops[2] / median_ops[0];
        printf("  writer ops/s with 16 streams: %.1f%% of with none (target >= 90%%) -> %s\n",
               ratio * 100, ratio >= 0.9 ? "met" : "NOT MET");
    }
    return bad ? 1 : 0;
}
