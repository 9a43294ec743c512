/* main.c: atomdb-bench's command line — picks the engines, scenarios,
 * strategies and client counts, runs every cell (n/a ones are reported with
 * their reason), prints the table and writes --json / --svg; the subcommand
 * `measure-server` runs the per-op CPU, memory and start-up measurements. */
#include "bench.h"

#include <libgen.h>
#include <limits.h>
#include <mongoc/mongoc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_CLIENT_COUNTS 16
#define MAX_ROWS 4096

/* Every engine configuration the bench knows, in run order. */
static const eng_conf_t main_confs[] = {
    {ENG_ATOMDB, "write", 0},      {ENG_REDIS, "everysec", 0}, {ENG_POSTGRES, "sync_off", 0},
    {ENG_ATOMDB, "fsync", 1},      {ENG_REDIS, "always", 1},   {ENG_POSTGRES, "sync_on", 1},
    {ENG_ATOMDB, "none", 2},
};
#define MAIN_NCONFS (int)(sizeof main_confs / sizeof main_confs[0])

/* Parsed command line. */
typedef struct {
    bool quick;
    bool keep;
    double duration_s;
    long ops;
    int clients[MAX_CLIENT_COUNTS];
    int nclients;
    bool conf_on[MAIN_NCONFS];
    bool scen_on[SCEN_COUNT];
    bool strat_on[STRAT_COUNT];
    const char *json;
    const char *svg;
    char atomdb[PATH_MAX];
} opts_t;

static void main_usage(FILE *f)
{
    fprintf(f,
            "Usage: atomdb-bench [options]\n"
            "       atomdb-bench measure-server [--quick] [--docs N] [--atomdb PATH]\n"
            "                    [--only startup,cpu,memory,restart,journal,mms,connect] [--perf DIR]\n"
            "       atomdb-bench mixed [--clients 16] [--duration 3] [--docs 300000] [--repeat 3]\n"
            "                    [--engines atomdb,postgres] [--yield-us N] [--atomdb PATH]\n"
            "                    [--report group|index|out]\n"
            "       atomdb-bench joins [--orders 10000] [--items 1000] [--repeat 20]\n"
            "                    [--engines atomdb,postgres] [--atomdb PATH]\n"
            "                    ($lookup by _id beside PostgreSQL's LEFT JOIN)\n"
            "       atomdb-bench collation [--docs 100000] [--queries 1000]\n"
            "                    [--engines atomdb,postgres] [--atomdb PATH]\n"
            "                    (a case-insensitive find: collated index vs lower() index)\n"
            "       atomdb-bench watch [--duration S] [--rounds N] [--streams 0|1|16] [--atomdb PATH]\n"
            "                    (change streams: hot counter with 0, 1, 16 open streams)\n"
            "       atomdb-bench text [--docs 100000] [--atomdb PATH]\n"
            "                    ($text on a text index against a full scan, target >= 50x)\n"
            "       atomdb-bench geo [--points 100000] [--atomdb PATH]\n"
            "                    ($near nearest 20 on a 2dsphere index against a full scan,\n"
            "                     target >= 50x)\n"
            "Runs the seed scenarios x strategies against atomdb, Redis and PostgreSQL, each\n"
            "started by the bench on 127.0.0.1, and checks every invariant.\n\n"
            "  --quick               clients 4,16; 0.2 s per cell; OS-buffered durability only\n"
            "  --clients LIST        client process counts (default 1,4,16,64)\n"
            "  --duration S          seconds per cell (default 0.5)\n"
            "  --ops N               also stop each client after N operations\n"
            "  --engines LIST        atomdb,redis,postgres (default all)\n"
            "  --durability LIST     buffered (atomdb write, redis everysec, postgres sync_off),\n"
            "                        fsync (atomdb fsync, redis always, postgres sync_on),\n"
            "                        none (atomdb --journal none); default buffered,fsync\n"
            "  --scenarios LIST      counter,flash_sale_1,flash_sale_1000,seats,helpdesk,"
            "play_counter\n"
            "  --strategies LIST     naive,in_process_mutex,atomic,conditional,version_cas,\n"
            "                        pessimistic,lease_lock,snapshot_txn\n"
            "  --atomdb PATH         server binary (default: the build dir's atomdb)\n"
            "  --mongoc-stream KIND  default (libmongoc's own non-blocking socket: recv, EAGAIN,\n"
            "                        poll, recv, recv per reply) or blocking (one blocking\n"
            "                        buffered recv per reply, as hiredis reads)\n"
            "  --client KIND         atomdb's client: driver (libmongoc, default) or wire (a\n"
            "                        minimal C client: prebuilt OP_MSG frames patched per\n"
            "                        request, one send, one buffered recv); Redis and\n"
            "                        PostgreSQL keep hiredis and libpq in both modes\n"
            "  --json PATH           write the rows as a JSON array\n"
            "  --svg PATH            write a chart of ops/s against clients\n"
            "  --keep                keep the engines' temporary directories\n"
            "  --auth                atomdb with --auth; clients log in (SCRAM-SHA-256) as a\n"
            "                        root user the bench creates (docs/security.md)\n"
            "  --help                this text\n"
            "Environment: BENCH_PG_BIN (default /usr/lib/postgresql/15/bin), BENCH_PG_USER\n"
            "(when root; default postgres), BENCH_REDIS (default /usr/bin/redis-server).\n");
}

/* libmongoc log handler: keeps errors, drops the warnings a benchmark provokes
 * on purpose (aborting a transaction the server already aborted). */
static void main_mongoc_log(mongoc_log_level_t level, const char *domain, const char *message,
                            void *user_data)
{
    if (level <= MONGOC_LOG_LEVEL_ERROR)
        fprintf(stderr, "libmongoc %s: %s\n", domain, message);
}

/* Finds the atomdb binary next to the bench's build directory. */
static void main_default_atomdb(char *out, size_t len)
{
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    snprintf(out, len, "build/atomdb");
    if (n <= 0)
        return;
    exe[n] = 0;
    char *dir = dirname(exe);
    const char *rel[] = {"/atomdb", "/../../atomdb", "/../atomdb", "/../../build/atomdb"};
    for (size_t i = 0; i < sizeof rel / sizeof rel[0]; i++) {
        char cand[PATH_MAX];
        snprintf(cand, sizeof cand, "%s%s", dir, rel[i]);
        if (access(cand, X_OK) == 0) {
            if (!realpath(cand, out))
                snprintf(out, len, "%s", cand);
            return;
        }
    }
}

/* Splits a comma list, marking names found in names[] in on[]. */
static bool main_parse_list(const char *arg, const char *(*name)(int), int count, bool *on)
{
    char buf[512];
    snprintf(buf, sizeof buf, "%s", arg);
    for (int i = 0; i < count; i++)
        on[i] = false;
    for (char *save, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        int found = -1;
        for (int i = 0; i < count; i++)
            if (!strcmp(tok, name(i)))
                found = i;
        if (found < 0) {
            fprintf(stderr, "atomdb-bench: unknown name '%s'\n", tok);
            return false;
        }
        on[found] = true;
    }
    return true;
}

static const char *main_scen_name(int i)
{
    return scen_name((scen_t)i);
}

static const char *main_strat_name(int i)
{
    return strat_name((strat_t)i);
}

static const char *main_eng_name(int i)
{
    return eng_name((eng_kind_t)i);
}

static const char *main_class_name(int i)
{
    static const char *const names[] = {"buffered", "fsync", "none"};
    return names[i];
}

static bool main_parse(int argc, char **argv, opts_t *o)
{
    bool eng_on[ENG_COUNT] = {true, true, true};
    bool class_on[3] = {true, true, false};
    bool clients_set = false, duration_set = false;
    memset(o, 0, sizeof *o);
    for (int i = 0; i < SCEN_COUNT; i++)
        o->scen_on[i] = true;
    for (int i = 0; i < STRAT_COUNT; i++)
        o->strat_on[i] = true;
    main_default_atomdb(o->atomdb, sizeof o->atomdb);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        bool takes = strcmp(a, "--quick") && strcmp(a, "--keep") && strcmp(a, "--help") &&
                     strcmp(a, "--auth");
        if (takes && !v) {
            fprintf(stderr, "atomdb-bench: %s needs a value\n", a);
            return false;
        }
        if (!strcmp(a, "--quick")) {
            o->quick = true;
        } else if (!strcmp(a, "--auth")) {
            bench_auth = true;
        } else if (!strcmp(a, "--keep")) {
            o->keep = true;
        } else if (!strcmp(a, "--help")) {
            main_usage(stdout);
            exit(0);
        } else if (!strcmp(a, "--clients")) {
            char buf[256];
            snprintf(buf, sizeof buf, "%s", v);
            o->nclients = 0;
            for (char *save, *t = strtok_r(buf, ",", &save); t && o->nclients < MAX_CLIENT_COUNTS;
                 t = strtok_r(NULL, ",", &save)) {
                int c = atoi(t);
                if (c < 1 || c > 1024) {
                    fprintf(stderr, "atomdb-bench: bad client count '%s'\n", t);
                    return false;
                }
                o->clients[o->nclients++] = c;
            }
            clients_set = true;
        } else if (!strcmp(a, "--duration")) {
            o->duration_s = atof(v);
            duration_set = o->duration_s > 0;
        } else if (!strcmp(a, "--ops")) {
            o->ops = atol(v);
        } else if (!strcmp(a, "--engines")) {
            if (!main_parse_list(v, main_eng_name, ENG_COUNT, eng_on))
                return false;
        } else if (!strcmp(a, "--durability")) {
            if (!main_parse_list(v, main_class_name, 3, class_on))
                return false;
        } else if (!strcmp(a, "--scenarios")) {
            if (!main_parse_list(v, main_scen_name, SCEN_COUNT, o->scen_on))
                return false;
        } else if (!strcmp(a, "--strategies")) {
            if (!main_parse_list(v, main_strat_name, STRAT_COUNT, o->strat_on))
                return false;
        } else if (!strcmp(a, "--atomdb")) {
            snprintf(o->atomdb, sizeof o->atomdb, "%s", v);
        } else if (!strcmp(a, "--mongoc-stream")) {
            if (strcmp(v, "blocking") && strcmp(v, "default")) {
                fprintf(stderr, "atomdb-bench: --mongoc-stream is blocking or default\n");
                return false;
            }
            drv_mongo_blocking_stream = !strcmp(v, "blocking");
        } else if (!strcmp(a, "--client")) {
            if (strcmp(v, "driver") && strcmp(v, "wire")) {
                fprintf(stderr, "atomdb-bench: --client is driver or wire\n");
                return false;
            }
            bench_wire_client = !strcmp(v, "wire");
        } else if (!strcmp(a, "--json")) {
            o->json = v;
        } else if (!strcmp(a, "--svg")) {
            o->svg = v;
        } else {
            fprintf(stderr, "atomdb-bench: unknown option %s\n", a);
            main_usage(stderr);
            return false;
        }
        if (takes)
            i++;
    }
    if (o->quick) {
        if (!clients_set) {
            o->clients[0] = 4;
            o->clients[1] = 16;
            o->nclients = 2;
        }
        if (!duration_set)
            o->duration_s = 0.2;
        class_on[1] = false;
    }
    if (o->nclients == 0) {
        int def[] = {1, 4, 16, 64};
        memcpy(o->clients, def, sizeof def);
        o->nclients = 4;
    }
    if (o->duration_s <= 0)
        o->duration_s = 0.5;
    for (int i = 0; i < MAIN_NCONFS; i++)
        o->conf_on[i] = eng_on[main_confs[i].kind] && class_on[main_confs[i].dclass];
    return true;
}

/* The client library atomdb's cells use. */
static const char *main_atomdb_client(void)
{
    return driver_for(ENG_ATOMDB)->client;
}

/* Connects the parent to a started engine, retrying while it warms up. */
static void *main_connect_parent(engine_t *e, char *err)
{
    const driver_t *d = driver_for(e->conf.kind);
    for (int attempt = 0; attempt < 100 && !engine_interrupted; attempt++) {
        void *c = d->connect(e, e->conf.durability, err);
        if (c)
            return c;
        bench_sleep_us(100000);
    }
    return NULL;
}

/* Finds a row's ops/s, or -1. */
static double main_find(const row_t *rows, int n, eng_kind_t k, const char *dur, scen_t s,
                        strat_t st, int clients)
{
    for (int i = 0; i < n; i++)
        if (rows[i].conf.kind == k && !strcmp(rows[i].conf.durability, dur) &&
            rows[i].scen == s && rows[i].strat == st && rows[i].clients == clients &&
            !rows[i].na && rows[i].violations == 0)
            return rows[i].ops_per_sec;
    return -1;
}

/* Prints issue 7's target ratios for the rows present. */
static void main_targets(const row_t *rows, int n)
{
    struct {
        scen_t s;
        strat_t st;
    } w[] = {{SCEN_COUNTER, STRAT_ATOMIC},
             {SCEN_FLASH_SALE_1, STRAT_CONDITIONAL},
             {SCEN_FLASH_SALE_1000, STRAT_CONDITIONAL}};
    struct {
        eng_kind_t other;
        const char *dur;
        int clients;
        double want;
    } t[] = {{ENG_REDIS, "everysec", 16, 0.8},
             {ENG_POSTGRES, "sync_off", 16, 2.0},
             {ENG_POSTGRES, "sync_off", 64, 5.0}};
    bool header = false;
    for (size_t i = 0; i < sizeof w / sizeof w[0]; i++) {
        for (size_t j = 0; j < sizeof t / sizeof t[0]; j++) {
            double a = main_find(rows, n, ENG_ATOMDB, "write", w[i].s, w[i].st, t[j].clients);
            double b = main_find(rows, n, t[j].other, t[j].dur, w[i].s, w[i].st, t[j].clients);
            if (a < 0 || b <= 0)
                continue;
            if (!header) {
                printf("\nTargets (issue 7), atomdb --journal write vs the same durability "
                       "class:\n");
                header = true;
            }
            printf("  %-15s %-11s %2d clients: atomdb %8.0f / %-8s %-8s %8.0f = %5.2fx "
                   "(target >= %.1fx) %s\n",
                   scen_name(w[i].s), strat_name(w[i].st), t[j].clients, a, eng_name(t[j].other),
                   t[j].dur, b, a / b, t[j].want, a / b >= t[j].want ? "met" : "NOT MET");
        }
    }
}

/* The options the side scenarios share: --atomdb PATH and --engines LIST
 * (atomdb, postgres; without `on_pg` the scenario runs atomdb only). True
 * when argv[*i] was one of them, consumed. */
static bool main_side_opt(int argc, char **argv, int *i, char *atomdb, size_t size,
                          bool *on_atomdb, bool *on_pg)
{
    if (!strcmp(argv[*i], "--atomdb") && *i + 1 < argc) {
        snprintf(atomdb, size, "%s", argv[++*i]);
        return true;
    }
    if (on_pg && !strcmp(argv[*i], "--engines") && *i + 1 < argc) {
        const char *l = argv[++*i];
        *on_atomdb = strstr(l, "atomdb") != NULL;
        *on_pg = strstr(l, "postgres") != NULL;
        return true;
    }
    return false;
}

/* libmongoc and the signal handlers around one side scenario; the end
 * stops every engine it started and hands back its exit code. */
static void main_side_begin(void)
{
    mongoc_init();
    mongoc_log_set_handler(main_mongoc_log, NULL);
    engine_install_signals();
}

static int main_side_end(int rc)
{
    engine_stop_all();
    mongoc_cleanup();
    return rc;
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "watch")) { /* issue 18: change streams */
        double secs = 3;
        int rounds = 3, only = -1;
        char atomdb[PATH_MAX];
        main_default_atomdb(atomdb, sizeof atomdb);
        for (int i = 2; i < argc; i++) {
            if (!strcmp(argv[i], "--duration") && i + 1 < argc)
                secs = atof(argv[++i]);
            else if (!strcmp(argv[i], "--rounds") && i + 1 < argc)
                rounds = atoi(argv[++i]);
            else if (!strcmp(argv[i], "--streams") && i + 1 < argc)
                only = atoi(argv[++i]);
            else if (!main_side_opt(argc, argv, &i, atomdb, sizeof atomdb, NULL, NULL)) {
                main_usage(stderr);
                return 2;
            }
        }
        main_side_begin();
        return main_side_end(watch_bench(atomdb, secs, rounds, only));
    }
    if (argc > 1 && !strcmp(argv[1], "joins")) {
        long orders = 10000, items = 1000;
        int repeat = 20;
        bool on_atomdb = true, on_pg = true;
        char atomdb[PATH_MAX];
        main_default_atomdb(atomdb, sizeof atomdb);
        for (int i = 2; i < argc; i++) {
            if (!strcmp(argv[i], "--orders") && i + 1 < argc)
                orders = atol(argv[++i]);
            else if (!strcmp(argv[i], "--items") && i + 1 < argc)
                items = atol(argv[++i]);
            else if (!strcmp(argv[i], "--repeat") && i + 1 < argc)
                repeat = atoi(argv[++i]);
            else if (!main_side_opt(argc, argv, &i, atomdb, sizeof atomdb, &on_atomdb, &on_pg)) {
                main_usage(stderr);
                return 2;
            }
        }
        main_side_begin();
        return main_side_end(joins_main(atomdb, orders, items, repeat, on_atomdb, on_pg));
    }
    if (argc > 1 && !strcmp(argv[1], "collation")) {
        long docs = 100000;
        int queries = 1000;
        bool on_atomdb = true, on_pg = true;
        char atomdb[PATH_MAX];
        main_default_atomdb(atomdb, sizeof atomdb);
        for (int i = 2; i < argc; i++) {
            if (!strcmp(argv[i], "--docs") && i + 1 < argc)
                docs = atol(argv[++i]);
            else if (!strcmp(argv[i], "--queries") && i + 1 < argc)
                queries = atoi(argv[++i]);
            else if (!main_side_opt(argc, argv, &i, atomdb, sizeof atomdb, &on_atomdb, &on_pg)) {
                main_usage(stderr);
                return 2;
            }
        }
        main_side_begin();
        return main_side_end(collation_main(atomdb, docs, queries, on_atomdb, on_pg));
    }
    if (argc > 1 && !strcmp(argv[1], "text")) { /* issue 20: text search */
        int docs = 100000;
        char atomdb[PATH_MAX];
        main_default_atomdb(atomdb, sizeof atomdb);
        for (int i = 2; i < argc; i++) {
            if (!strcmp(argv[i], "--docs") && i + 1 < argc)
                docs = atoi(argv[++i]);
            else if (!main_side_opt(argc, argv, &i, atomdb, sizeof atomdb, NULL, NULL)) {
                main_usage(stderr);
                return 2;
            }
        }
        main_side_begin();
        return main_side_end(text_bench(atomdb, docs));
    }
    if (argc > 1 && !strcmp(argv[1], "geo")) { /* issue 20: $near on a 2dsphere index */
        int points = 100000;
        char atomdb[PATH_MAX];
        main_default_atomdb(atomdb, sizeof atomdb);
        for (int i = 2; i < argc; i++) {
            if (!strcmp(argv[i], "--points") && i + 1 < argc)
                points = atoi(argv[++i]);
            else if (!main_side_opt(argc, argv, &i, atomdb, sizeof atomdb, NULL, NULL)) {
                main_usage(stderr);
                return 2;
            }
        }
        main_side_begin();
        return main_side_end(geo_bench(atomdb, points));
    }
    if (argc > 1 && !strcmp(argv[1], "mixed")) {
        int clients = 16, repeat = 3;
        double duration = 3.0;
        long docs = 300000, yield_us = -1;
        bool on_atomdb = true, on_pg = true;
        const char *report = "group";
        char atomdb[PATH_MAX];
        main_default_atomdb(atomdb, sizeof atomdb);
        for (int i = 2; i < argc; i++) {
            if (!strcmp(argv[i], "--clients") && i + 1 < argc)
                clients = atoi(argv[++i]);
            else if (!strcmp(argv[i], "--duration") && i + 1 < argc)
                duration = atof(argv[++i]);
            else if (!strcmp(argv[i], "--docs") && i + 1 < argc)
                docs = atol(argv[++i]);
            else if (!strcmp(argv[i], "--repeat") && i + 1 < argc)
                repeat = atoi(argv[++i]);
            else if (!strcmp(argv[i], "--yield-us") && i + 1 < argc)
                yield_us = atol(argv[++i]);
            else if (!strcmp(argv[i], "--report") && i + 1 < argc)
                report = argv[++i];
            else if (!main_side_opt(argc, argv, &i, atomdb, sizeof atomdb, &on_atomdb, &on_pg)) {
                main_usage(stderr);
                return 2;
            }
        }
        mongoc_init();
        mongoc_log_set_handler(main_mongoc_log, NULL);
        engine_install_signals();
        int rc = mixed_main(atomdb, clients, duration, docs, repeat, on_atomdb, on_pg,
                            yield_us, report);
        engine_stop_all();
        mongoc_cleanup();
        return rc;
    }
    if (argc > 1 && !strcmp(argv[1], "measure-server")) {
        bool quick = false;
        long docs = 0;
        const char *perf_dir = NULL, *only = NULL;
        char atomdb[PATH_MAX];
        main_default_atomdb(atomdb, sizeof atomdb);
        for (int i = 2; i < argc; i++) {
            if (!strcmp(argv[i], "--quick"))
                quick = true;
            else if (!strcmp(argv[i], "--docs") && i + 1 < argc)
                docs = atol(argv[++i]);
            else if (!strcmp(argv[i], "--atomdb") && i + 1 < argc)
                snprintf(atomdb, sizeof atomdb, "%s", argv[++i]);
            else if (!strcmp(argv[i], "--perf") && i + 1 < argc)
                perf_dir = argv[++i];
            else if (!strcmp(argv[i], "--only") && i + 1 < argc)
                only = argv[++i];
            else {
                main_usage(stderr);
                return 2;
            }
        }
        main_side_begin();
        return main_side_end(measure_server(atomdb, quick, docs, perf_dir, only));
    }

    opts_t o;
    if (!main_parse(argc, argv, &o))
        return 2;
    if (bench_wire_client && bench_auth) {
        fprintf(stderr, "atomdb-bench: --client wire does not log in (no SCRAM); use --client "
                        "driver with --auth\n");
        return 2;
    }
    mongoc_init();
    mongoc_log_set_handler(main_mongoc_log, NULL);
    engine_install_signals();
    row_t *rows = calloc(MAX_ROWS, sizeof *rows);
    int nrows = 0;
    int total = 0, done = 0, failures = 0;
    for (int c = 0; c < MAIN_NCONFS; c++)
        if (o.conf_on[c])
            for (int s = 0; s < SCEN_COUNT; s++)
                for (int st = 0; st < STRAT_COUNT; st++)
                    if (o.scen_on[s] && o.strat_on[st])
                        total += o.nclients;
    int64_t t0 = bench_now_ns();
    printf("atomdb-bench: %d cells, %.2f s each, clients", total, o.duration_s);
    for (int i = 0; i < o.nclients; i++)
        printf("%s%d", i ? "," : " ", o.clients[i]);
    printf("; atomdb = %s; atomdb client = %s\n\n", o.atomdb, main_atomdb_client());
    report_table_header();

    for (int c = 0; c < MAIN_NCONFS && !engine_interrupted; c++) {
        if (!o.conf_on[c])
            continue;
        engine_t *eng = calloc(1, sizeof *eng);
        char err[256] = "";
        void *parent = NULL;
        bool up = engine_start(eng, &main_confs[c], o.atomdb, err, sizeof err);
        if (up && !(parent = main_connect_parent(eng, err)))
            up = false;
        if (up)
            driver_for(eng->conf.kind)->probe(parent, eng);
        for (int k = 0; k < o.nclients && !engine_interrupted; k++) {
            runner_pool_t *pool = NULL;
            char perr[256] = "";
            for (int s = 0; s < SCEN_COUNT && !engine_interrupted; s++) {
                for (int st = 0; st < STRAT_COUNT && !engine_interrupted; st++) {
                    if (!o.scen_on[s] || !o.strat_on[st])
                        continue;
                    row_t *r = &rows[nrows < MAX_ROWS ? nrows : MAX_ROWS - 1];
                    memset(r, 0, sizeof *r);
                    r->conf = main_confs[c];
                    r->client = driver_for(main_confs[c].kind)->client;
                    r->scen = (scen_t)s;
                    r->strat = (strat_t)st;
                    r->clients = o.clients[k];
                    const char *why = strat_na_for_scenario((scen_t)s, (strat_t)st);
                    done++;
                    if (!up) {
                        r->na = true;
                        snprintf(r->note, sizeof r->note, "engine did not start: %s", err);
                    } else if (why || eng->na[st][0]) {
                        r->na = true;
                        snprintf(r->note, sizeof r->note, "%s", why ? why : eng->na[st]);
                    } else {
                        cell_t cell = {eng, (scen_t)s, (strat_t)st, o.clients[k], o.duration_s,
                                       o.ops};
                        char progress[200];
                        snprintf(progress, sizeof progress, "[%d/%d %.0fs] %s/%s %s %s x%d", done,
                                 total, (double)(bench_now_ns() - t0) / 1e9,
                                 eng_name(eng->conf.kind), eng->conf.durability, scen_name(s),
                                 strat_name(st), o.clients[k]);
                        bool tty = isatty(2);
                        if (tty)
                            fprintf(stderr, "\r\033[K%s", progress);
                        if (!pool)
                            pool = runner_pool_start(eng, o.clients[k], perr, sizeof perr);
                        if (!pool) {
                            r->errors = 1;
                            snprintf(r->note, sizeof r->note, "%s", perr);
                        } else if (!runner_run_in(pool, &cell, parent, r, tty ? progress : NULL)) {
                            runner_pool_stop(pool);
                            pool = NULL;
                        }
                        if (tty)
                            fprintf(stderr, "\r\033[K");
                        failures += r->errors > 0;
                    }
                    report_table_row(r);
                    if (nrows < MAX_ROWS)
                        nrows++;
                }
            }
            runner_pool_stop(pool);
        }
        driver_for(main_confs[c].kind)->disconnect(parent);
        engine_stop(eng, o.keep);
        free(eng);
    }
    main_targets(rows, nrows);
    printf("\n%d rows in %.0f s%s\n", nrows, (double)(bench_now_ns() - t0) / 1e9,
           engine_interrupted ? " (interrupted)" : "");
    int rc = engine_interrupted ? 130 : 0;
    if (o.json && !report_json(o.json, rows, nrows)) {
        fprintf(stderr, "atomdb-bench: cannot write %s\n", o.json);
        rc = 1;
    }
    if (o.svg && !report_svg(o.svg, rows, nrows)) {
        fprintf(stderr, "atomdb-bench: cannot write %s\n", o.svg);
        rc = 1;
    }
    if (failures)
        fprintf(stderr, "atomdb-bench: %d cells had operation errors (see notes)\n", failures);
    free(rows);
    mongoc_cleanup();
    return rc;
}
