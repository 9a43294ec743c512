/* mixed.c: `atomdb-bench mixed` (issue 13) — K hot-counter client processes
 * ($inc on one document / UPDATE ... SET n = n + 1) alone, then with one
 * more process running a reporting query over N rows in a loop (an
 * aggregate $group on atomdb, GROUP BY on PostgreSQL; or, with --report,
 * an index build or an $out over the same rows). Reports the
 * counter's ops/s, p50 and p99 with and without the reporter, medians of
 * --repeat runs, and how many reports completed. */
#include "bench.h"

#include <libpq-fe.h>
#include <mongoc/mongoc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define MIXED_MAX_CLIENTS 64
#define MIXED_MAX_REPEAT 9

/* Shared between the parent and its forked clients. */
typedef struct {
    volatile int go;                     /* clients start together */
    volatile int stop_reporter;          /* the reporter stops looping */
    int64_t deadline_ns;                 /* counter clients stop here */
    uint64_t reports;                    /* reports the reporter completed */
    char reporter_error[ERRLEN];
    client_stats_t st[MIXED_MAX_CLIENTS];
} mixed_shared_t;

/* Loads `docs` rows {_id/id, g: i % 100, v: i} into bench.docs / docs. */
static bool mixed_load(const engine_t *e, long docs, char *err)
{
    if (e->conf.kind == ENG_POSTGRES) {
        char info[200], sql[400];
        snprintf(info, sizeof info, "host=127.0.0.1 port=%d user=postgres dbname=postgres",
                 e->port);
        PGconn *pg = PQconnectdb(info);
        for (int i = 0; i < 100 && PQstatus(pg) != CONNECTION_OK; i++) { /* still starting up */
            PQfinish(pg);
            bench_sleep_us(100000);
            pg = PQconnectdb(info);
        }
        snprintf(sql, sizeof sql,
                 "DROP TABLE IF EXISTS docs; CREATE TABLE docs (id int PRIMARY KEY, g int, v "
                 "bigint); INSERT INTO docs SELECT i, i %% 100, i FROM generate_series(0, %ld) i; "
                 "ANALYZE docs",
                 docs - 1);
        PGresult *r = PQstatus(pg) == CONNECTION_OK ? PQexec(pg, sql) : NULL;
        bool ok = r && PQresultStatus(r) == PGRES_COMMAND_OK;
        if (!ok)
            snprintf(err, ERRLEN, "postgres load: %s", PQerrorMessage(pg));
        PQclear(r);
        PQfinish(pg);
        return ok;
    }
    char uri[200];
    snprintf(uri, sizeof uri, "mongodb://127.0.0.1:%d/?directConnection=true", e->port);
    mongoc_client_t *c = mongoc_client_new(uri);
    mongoc_collection_t *coll = mongoc_client_get_collection(c, "bench", "docs");
    bson_error_t be;
    mongoc_collection_drop(coll, NULL);
    bool ok = true;
    for (long start = 0; ok && start < docs; start += 10000) {
        mongoc_bulk_operation_t *b = mongoc_collection_create_bulk_operation_with_opts(coll, NULL);
        for (long i = start; i < docs && i < start + 10000; i++) {
            bson_t d = BSON_INITIALIZER;
            BSON_APPEND_INT64(&d, "_id", i);
            BSON_APPEND_INT32(&d, "g", (int32_t)(i % 100));
            BSON_APPEND_INT64(&d, "v", i);
            mongoc_bulk_operation_insert(b, &d);
            bson_destroy(&d);
        }
        ok = mongoc_bulk_operation_execute(b, NULL, &be) != 0;
        mongoc_bulk_operation_destroy(b);
    }
    if (!ok)
        snprintf(err, ERRLEN, "atomdb load: %s", be.message);
    mongoc_collection_destroy(coll);
    mongoc_client_destroy(c);
    return ok;
}

/* The long operation the reporter loops (--report). */
typedef enum {
    MIXED_GROUP, /* $group by g with a count and a sum / GROUP BY */
    MIXED_INDEX, /* createIndexes {v: 1} then dropIndexes / CREATE INDEX, DROP INDEX */
    MIXED_OUT,   /* $out of every row to bench.out / CREATE TABLE AS */
} mixed_kind_t;

static mixed_kind_t mixed_kind = MIXED_GROUP;
static const char *const mixed_kind_names[] = {"group", "index", "out"};

/* Runs an atomdb command on database bench; false with err. */
static bool mixed_command(mongoc_client_t *c, bson_t *cmd, char *err)
{
    bson_error_t be;
    bool ok = mongoc_client_command_simple(c, "bench", cmd, NULL, NULL, &be);
    if (!ok)
        snprintf(err, ERRLEN, "report: %s", be.message);
    bson_destroy(cmd);
    return ok;
}

/* One report over every row; false on error. */
static bool mixed_report(const engine_t *e, void *conn, mongoc_client_t *mc, char *err)
{
    if (e->conf.kind == ENG_POSTGRES) {
        static const char *const sql[] = {
            "SELECT g, count(*), sum(v) FROM docs GROUP BY g",
            "CREATE INDEX docs_v ON docs (v); DROP INDEX docs_v",
            "DROP TABLE IF EXISTS docs_out; CREATE TABLE docs_out AS SELECT id, g, v FROM docs"};
        PGresult *r = PQexec(conn, sql[mixed_kind]);
        bool ok = mixed_kind == MIXED_GROUP
                      ? PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 100
                      : PQresultStatus(r) == PGRES_COMMAND_OK ||
                            PQresultStatus(r) == PGRES_TUPLES_OK;
        if (!ok)
            snprintf(err, ERRLEN, "report: %s", PQerrorMessage(conn));
        PQclear(r);
        return ok;
    }
    if (mixed_kind == MIXED_INDEX)
        return mixed_command(mc,
                             BCON_NEW("createIndexes", BCON_UTF8("docs"), "indexes", "[", "{",
                                      "key", "{", "v", BCON_INT32(1), "}", "name",
                                      BCON_UTF8("v_1"), "}", "]"),
                             err) &&
               mixed_command(mc, BCON_NEW("dropIndexes", BCON_UTF8("docs"), "index",
                                          BCON_UTF8("v_1")),
                             err);
    bson_t *pipeline =
        mixed_kind == MIXED_OUT
            ? BCON_NEW("pipeline", "[", "{", "$project", "{", "g", BCON_INT32(1), "v",
                       BCON_INT32(1), "}", "}", "{", "$out", BCON_UTF8("out"), "}", "]")
            : BCON_NEW("pipeline", "[", "{", "$group", "{", "_id", BCON_UTF8("$g"), "n", "{",
                       "$sum", BCON_INT32(1), "}", "t", "{", "$sum", BCON_UTF8("$v"), "}", "}",
                       "}", "]");
    mongoc_cursor_t *cur = mongoc_collection_aggregate(conn, MONGOC_QUERY_NONE, pipeline, NULL,
                                                       NULL);
    const bson_t *doc;
    int n = 0;
    while (mongoc_cursor_next(cur, &doc))
        n++;
    bson_error_t be;
    int want = mixed_kind == MIXED_OUT ? 0 : 100;
    bool ok = !mongoc_cursor_error(cur, &be) && n == want;
    if (!ok)
        snprintf(err, ERRLEN, "report: %s (%d documents)", be.message, n);
    mongoc_cursor_destroy(cur);
    bson_destroy(pipeline);
    return ok;
}

static void mixed_reporter(const engine_t *e, mixed_shared_t *sh)
{
    char uri[200], err[ERRLEN] = "";
    void *conn = NULL;
    mongoc_client_t *mc = NULL;
    if (e->conf.kind == ENG_POSTGRES) {
        snprintf(uri, sizeof uri, "host=127.0.0.1 port=%d user=postgres dbname=postgres",
                 e->port);
        conn = PQconnectdb(uri);
    } else {
        snprintf(uri, sizeof uri, "mongodb://127.0.0.1:%d/?directConnection=true", e->port);
        mc = mongoc_client_new(uri);
        conn = mongoc_client_get_collection(mc, "bench", "docs");
    }
    while (!sh->go)
        bench_sleep_us(100);
    while (!sh->stop_reporter) {
        if (!mixed_report(e, conn, mc, err)) {
            snprintf(sh->reporter_error, ERRLEN, "%s", err);
            break;
        }
        __atomic_add_fetch(&sh->reports, 1, __ATOMIC_RELAXED);
    }
    if (mc) {
        mongoc_collection_destroy(conn);
        mongoc_client_destroy(mc);
    } else {
        PQfinish(conn);
    }
}

static void mixed_counter(const engine_t *e, mixed_shared_t *sh, int id)
{
    const driver_t *d = driver_for(e->conf.kind);
    client_stats_t *st = &sh->st[id];
    char err[ERRLEN];
    void *c = d->connect(e, e->conf.durability, err);
    if (!c) {
        snprintf(st->error, sizeof st->error, "%s", err);
        return;
    }
    while (!sh->go)
        bench_sleep_us(100);
    while (bench_now_ns() < sh->deadline_ns) {
        int64_t t0 = bench_now_ns();
        if (!d->atomic(c, SCEN_COUNTER, 0, NULL, err)) {
            st->errors++;
            if (!st->error[0])
                snprintf(st->error, sizeof st->error, "%s", err);
            continue;
        }
        hist_add(&st->hist, (uint64_t)((bench_now_ns() - t0) / 1000));
        st->ops++;
    }
    d->disconnect(c);
}

/* One run: `clients` counters for `duration_s`, with or without the
 * reporter. Fills ops/s, p50, p99 (us) and the reports completed. */
static bool mixed_run(const engine_t *e, int clients, double duration_s, bool reporter,
                      double *ops_s, double *p50, double *p99, uint64_t *reports, char *err)
{
    const driver_t *d = driver_for(e->conf.kind);
    void *parent = d->connect(e, e->conf.durability, err);
    if (!parent || !d->setup(parent, SCEN_COUNTER, err)) {
        d->disconnect(parent);
        return false;
    }
    mixed_shared_t *sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE,
                              MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    memset(sh, 0, sizeof *sh);
    pid_t pids[MIXED_MAX_CLIENTS + 1];
    int n = 0;
    for (int i = 0; i < clients + (reporter ? 1 : 0); i++) {
        pid_t p = fork();
        if (p == 0) {
            if (i == clients)
                mixed_reporter(e, sh);
            else
                mixed_counter(e, sh, i);
            _exit(0);
        }
        pids[n++] = p;
    }
    bench_sleep_us(300000); /* every client connected */
    sh->deadline_ns = bench_now_ns() + (int64_t)(duration_s * 1e9);
    sh->go = 1;
    for (int i = 0; i < clients; i++)
        waitpid(pids[i], NULL, 0);
    sh->stop_reporter = 1;
    if (reporter)
        waitpid(pids[clients], NULL, 0);
    hist_t all;
    memset(&all, 0, sizeof all);
    uint64_t ops = 0;
    bool ok = true;
    for (int i = 0; i < clients; i++) {
        hist_merge(&all, &sh->st[i].hist);
        ops += sh->st[i].ops;
        if (sh->st[i].error[0] && ok) {
            snprintf(err, ERRLEN, "client %d: %s", i, sh->st[i].error);
            ok = false;
        }
    }
    if (sh->reporter_error[0] && ok) {
        snprintf(err, ERRLEN, "%s", sh->reporter_error);
        ok = false;
    }
    /* the counter's final value: every acknowledged $inc is there */
    int64_t val = 0;
    if (ok && d->final_state(parent, SCEN_COUNTER, &val, 1, err) && (uint64_t)val != ops) {
        snprintf(err, ERRLEN, "counter is %lld after %llu increments", (long long)val,
                 (unsigned long long)ops);
        ok = false;
    }
    *ops_s = (double)ops / duration_s;
    *p50 = hist_quantile(&all, 0.50);
    *p99 = hist_quantile(&all, 0.99);
    *reports = sh->reports;
    munmap(sh, sizeof *sh);
    d->disconnect(parent);
    return ok;
}

static double mixed_median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, bench_cmp_double);
    return v[n / 2];
}

/* setParameter atomdbYieldPeriodMicros on the atomdb under test. */
static bool mixed_set_yield(const engine_t *e, long us, char *err)
{
    char uri[200];
    snprintf(uri, sizeof uri, "mongodb://127.0.0.1:%d/?directConnection=true", e->port);
    mongoc_client_t *c = mongoc_client_new(uri);
    bson_t *cmd = BCON_NEW("setParameter", BCON_INT32(1), "atomdbYieldPeriodMicros",
                           BCON_INT64(us));
    bson_error_t be;
    bool ok = mongoc_client_command_simple(c, "admin", cmd, NULL, NULL, &be);
    if (!ok)
        snprintf(err, ERRLEN, "setParameter: %s", be.message);
    bson_destroy(cmd);
    mongoc_client_destroy(c);
    return ok;
}

int mixed_main(const char *atomdb, int clients, double duration_s, long docs, int repeat,
               bool atomdb_on, bool pg_on, long yield_us, const char *report)
{
    bool known = false;
    for (int k = 0; k < 3; k++)
        if (!strcmp(report, mixed_kind_names[k])) {
            mixed_kind = (mixed_kind_t)k;
            known = true;
        }
    if (!known) {
        fprintf(stderr, "atomdb-bench mixed: --report group|index|out\n");
        return 2;
    }
    if (clients < 1 || clients > MIXED_MAX_CLIENTS || repeat < 1 || repeat > MIXED_MAX_REPEAT) {
        fprintf(stderr, "atomdb-bench mixed: --clients 1..%d, --repeat 1..%d\n",
                MIXED_MAX_CLIENTS, MIXED_MAX_REPEAT);
        return 2;
    }
    static const char *const what[] = {"a $group / GROUP BY",
                                       "createIndexes + dropIndexes / CREATE + DROP INDEX",
                                       "an $out / CREATE TABLE AS"};
    printf("mixed: %d hot-counter clients, %.1f s per run, median of %d runs; reporter: one "
           "client looping %s over %ld rows",
           clients, duration_s, repeat, what[mixed_kind], docs);
    if (yield_us >= 0)
        printf("; atomdb yields every %ld us", yield_us);
    printf("\n\n");
    printf("%-10s %-9s %10s %9s %9s %8s   %s\n", "engine", "reporter", "ops/s", "p50 us",
           "p99 us", "reports", "vs alone");
    int rc = 0;
    eng_conf_t confs[] = {{ENG_ATOMDB, "write", 0}, {ENG_POSTGRES, "sync_off", 0}};
    for (int k = 0; k < 2; k++) {
        if ((confs[k].kind == ENG_ATOMDB && !atomdb_on) ||
            (confs[k].kind == ENG_POSTGRES && !pg_on))
            continue;
        engine_t e;
        char err[ERRLEN] = "";
        if (!engine_start(&e, &confs[k], atomdb, err, sizeof err) || !mixed_load(&e, docs, err) ||
            (confs[k].kind == ENG_ATOMDB && yield_us >= 0 && !mixed_set_yield(&e, yield_us, err))) {
            printf("%-10s n/a: %s\n", eng_name(confs[k].kind), err);
            engine_stop(&e, false);
            rc = 1;
            continue;
        }
        double alone = 0;
        for (int with = 0; with < 2; with++) {
            double o[MIXED_MAX_REPEAT], p5[MIXED_MAX_REPEAT], p9[MIXED_MAX_REPEAT],
                rep[MIXED_MAX_REPEAT];
            bool ok = true;
            for (int r = 0; r < repeat && ok; r++) {
                uint64_t reports = 0;
                ok = mixed_run(&e, clients, duration_s, with, &o[r], &p5[r], &p9[r], &reports,
                               err);
                rep[r] = (double)reports;
            }
            if (!ok) {
                printf("%-10s %-9s FAILED: %s\n", eng_name(confs[k].kind), with ? "on" : "off",
                       err);
                rc = 1;
                continue;
            }
            double ops = mixed_median(o, repeat);
            if (!with)
                alone = ops;
            printf("%-10s %-9s %10.0f %9.0f %9.0f %8.0f   %s", eng_name(confs[k].kind),
                   with ? "on" : "off", ops, mixed_median(p5, repeat), mixed_median(p9, repeat),
                   mixed_median(rep, repeat), with ? "" : "-");
            if (with && alone > 0)
                printf("%.0f%%", 100.0 * ops / alone);
            printf("\n");
        }
        engine_stop(&e, false);
    }
    return rc;
}
