/* bench.h: shared types of atomdb-bench — the seed scenarios, the strategies
 * against lost updates and overselling, the engines that run them, and the
 * per-client statistics the forked client processes hand back to the parent. */
#ifndef ATOMDB_BENCH_H
#define ATOMDB_BENCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* ---- scenarios ---- */

/* One of the seed scenarios (see docs/benchmarks.md for their invariants). */
typedef enum {
    SCEN_COUNTER,         /* one hot key, +1 per op; invariant: no lost increment */
    SCEN_FLASH_SALE_1,    /* one item, stock 1, each buyer wants 1; no overselling */
    SCEN_FLASH_SALE_1000, /* one item, stock 1,000 */
    SCEN_SEATS,           /* a 10 x 20 hall; one owner per seat */
    SCEN_HELPDESK,        /* 5 agents x capacity 3; never above capacity */
    SCEN_PLAY_COUNTER,    /* upsert + return the new count, 10,000 Zipf ids; no duplicates */
    SCEN_COUNT
} scen_t;

/* ---- strategies ---- */

/* One way of making a read-check-write safe (or not). */
typedef enum {
    STRAT_NAIVE,       /* read, decide, blind write: loses updates under concurrency */
    STRAT_MUTEX,       /* naive inside a pthread mutex of the client process */
    STRAT_ATOMIC,      /* one atomic operator ($inc / INCR / SET n = n + 1) */
    STRAT_CONDITIONAL, /* the check inside the write (filter / Lua / WHERE) */
    STRAT_VERSION_CAS, /* read version, write if unchanged, bounded retry + backoff */
    STRAT_PESSIMISTIC, /* lock the row/document inside a transaction */
    STRAT_LEASE_LOCK,  /* a lease lock around the naive body */
    STRAT_SNAPSHOT_TXN, /* read, check, write in a snapshot-isolated transaction;
                         * retried on a write conflict / serialization failure */
    STRAT_COUNT
} strat_t;

/* ---- engines ---- */

/* A database product. */
typedef enum { ENG_ATOMDB, ENG_REDIS, ENG_POSTGRES, ENG_COUNT } eng_kind_t;

/* One engine started with one durability setting. */
typedef struct {
    eng_kind_t kind;        /* product */
    const char *durability; /* "write", "fsync", "none", "everysec", "always", "sync_off", "sync_on" */
    int dclass;             /* durability class: 0 = OS-buffered, 1 = fsync per commit, 2 = none */
} eng_conf_t;

/* A running engine. Owned by engine.c; fields valid until engine_stop. */
typedef struct {
    eng_conf_t conf;     /* what was started */
    int port;            /* 127.0.0.1 port it listens on */
    pid_t pid;           /* server process (postmaster, redis-server, atomdb) */
    char dir[256];       /* temporary directory holding its data and log */
    char pgdata[300];    /* PostgreSQL data directory (postgres only) */
    /* Strategies found unsupported at run time; reason text, "" if supported. */
    char na[STRAT_COUNT][160];
} engine_t;

/* --auth: atomdb runs with access control and every client logs in with
 * SCRAM-SHA-256 as the user the bench creates (engine.c, drv_mongo.c). */
extern bool bench_auth;
/* When set, atomdb is started with --change-stream-history-mb this (a
 * measurement of the store apart from the change streams' history). */
extern const char *bench_history_mb;
#define BENCH_AUTH_USER "bench"
#define BENCH_AUTH_PWD "bench-Pa55word"
/* Creates the bench's root user on the atomdb at `port` through the
 * localhost exception (drv_mongo.c). */
bool drv_mongo_create_user(int port, char *err, size_t errlen);

/* Connection set-up rates with SCRAM-SHA-256: atomdb --auth, atomdb
 * without, PostgreSQL scram-sha-256 (connect.c; measure-server --only connect). */
void measure_connect(const char *atomdb, double secs);
/* CPU seconds of `pid` (all threads; with `children` its reaped children
 * too), -1 on error (measure.c). */
double measure_cpu_total_s(pid_t pid, bool children);

/* ---- one measured cell ---- */

/* What one run measures: engine x scenario x strategy x clients. */
typedef struct {
    engine_t *eng;      /* running engine */
    scen_t scen;        /* scenario */
    strat_t strat;      /* strategy */
    int clients;        /* number of client processes */
    double duration_s;  /* run length (each client stops at the deadline) */
    long ops_per_client; /* 0 = bounded by duration only */
} cell_t;

/* The result row of one cell (one table line, one JSON object). */
typedef struct {
    eng_conf_t conf;     /* engine and durability */
    const char *client;  /* client library that ran the cell (driver_t.client) */
    scen_t scen;         /* scenario */
    strat_t strat;       /* strategy */
    int clients;         /* client processes */
    bool na;             /* not applicable / not available */
    char note[200];      /* n/a reason, or errors / gave-up counts */
    double ops_per_sec;  /* completed operations per second, all clients */
    double p50_us;       /* median latency of one operation (retries included) */
    double p99_us;       /* 99th percentile latency */
    uint64_t ops;        /* completed operations */
    uint64_t successes;  /* operations that incremented / bought / booked / assigned */
    uint64_t retries;    /* CAS conflicts, lock waits, transaction retries */
    uint64_t gave_up;    /* operations abandoned after the retry bound */
    uint64_t errors;     /* operations that failed with an error */
    uint64_t violations; /* invariant violations found in the final state */
    double server_cpu_us; /* server CPU per operation (all threads/processes), 0 unknown */
    double client_cpu_us; /* client process CPU per operation (driver + bench) */
} row_t;

/* ---- latency histogram ---- */

#define HIST_BUCKETS 3072

/* A log-linear latency histogram in microseconds (1 us resolution below 1 ms,
 * 1/64 of a power of two above). Plain data: lives in shared memory. */
typedef struct {
    uint64_t b[HIST_BUCKETS];
} hist_t;

/* Adds one sample of us microseconds. */
void hist_add(hist_t *h, uint64_t us);
/* Adds all samples of src into dst. */
void hist_merge(hist_t *dst, const hist_t *src);
/* Returns the q-quantile (0..1) in microseconds, 0 when empty. */
double hist_quantile(const hist_t *h, double q);

/* ---- what a client process reports (shared memory) ---- */

#define AGENTS 5
#define AGENT_CAPACITY 3
#define SEAT_ROWS 10
#define SEAT_COLS 20
#define SEATS (SEAT_ROWS * SEAT_COLS)
#define PLAY_IDS 10000

/* One success record: seat won (key = seat, value = owner token) or a play
 * count returned (key = video id, value = returned count). */
typedef struct {
    int32_t key;
    int64_t value;
} rec_t;

/* Counters of one client process, written only by that process. */
typedef struct {
    uint64_t ops;       /* completed operations */
    uint64_t successes; /* operations that changed the data as intended */
    uint64_t retries;   /* conflicts retried / lock waits */
    uint64_t gave_up;   /* operations abandoned after the retry bound */
    uint64_t errors;    /* operations that failed with an error */
    uint64_t agent_succ[AGENTS]; /* helpdesk: successful assignments per agent */
    uint64_t nrec;      /* records used */
    int64_t end_ns;     /* CLOCK_MONOTONIC when the client stopped */
    int64_t cpu_us;     /* CPU the client process used while running operations */
    char error[160];    /* first error message */
    hist_t hist;        /* latency of each operation */
} client_stats_t;

/* ---- per-operation interface to a driver ---- */

/* The state one client process keeps between operations. */
typedef struct {
    int id;              /* client number, 0..clients-1 */
    uint64_t rng;        /* xorshift state */
    uint64_t seq;        /* operations issued so far */
    const double *zipf_cdf; /* play counter: cumulative Zipf distribution over ids */
} client_t;

/* Result of one primitive read. */
typedef struct {
    bool exists;  /* the record exists (play counter ids start missing) */
    int64_t value; /* counter / stock / clientCount / seat owner (0 = free) / count */
    int64_t version; /* version field for optimistic CAS */
} slot_read_t;

/* Primitives each engine implements; the strategies in strategy.c are built
 * on them. All return false on error after filling err (size ERRLEN). A slot
 * is the record one operation touches: the counter, the item, one seat, one
 * agent, one video id. */
#define ERRLEN 160
typedef struct driver driver_t;
struct driver {
    const char *name;   /* "atomdb", "redis", "postgres" */
    const char *client; /* the client library: "libmongoc", "wire", "hiredis", "libpq" */
    /* Connects one client to eng; returns a connection or NULL. */
    void *(*connect)(const engine_t *eng, const char *durability, char *err);
    /* Closes a connection (accepts NULL). */
    void (*disconnect)(void *c);
    /* Drops and creates the scenario's data: stock, seats, agents, counters. */
    bool (*setup)(void *c, scen_t s, char *err);
    /* Reads a slot (lock=true: inside a transaction, locking it). */
    bool (*read)(void *c, scen_t s, int slot, bool lock, slot_read_t *out, char *err);
    /* Writes value unconditionally (upserting); bumps the version. */
    bool (*write)(void *c, scen_t s, int slot, int64_t value, char *err);
    /* Atomic +1; *out gets the new value (play counter) or is untouched. */
    bool (*atomic)(void *c, scen_t s, int slot, int64_t *out, char *err);
    /* Conditional update: applies the scenario's step only if its check holds.
     * *won is true when it changed the record. token: seat owner to set. */
    bool (*conditional)(void *c, scen_t s, int slot, int64_t token, bool *won, char *err);
    /* Writes value if the version is still seen.version (or the record is still
     * missing); *won is false on a conflict. */
    bool (*cas)(void *c, scen_t s, int slot, const slot_read_t *seen, int64_t value, bool *won,
                char *err);
    /* Transactions: begin (snapshot: snapshot isolation, PostgreSQL's
     * REPEATABLE READ; otherwise the engine's default), commit (conflict =>
     * *retry), abort. */
    bool (*txn_begin)(void *c, bool snapshot, char *err);
    bool (*txn_commit)(void *c, bool *retry, char *err);
    void (*txn_abort)(void *c);
    /* Lease lock on a name: *got false when not acquired within the wait. */
    bool (*lock)(void *c, const char *name, int client, bool *got, char *err);
    bool (*unlock)(void *c, const char *name, char *err);
    /* Reads the whole final state: vals[slot] for every slot of the scenario
     * (nslots of them); missing records read as 0. */
    bool (*final_state)(void *c, scen_t s, int64_t *vals, int nslots, char *err);
    /* Checks at run time which strategies the engine has; fills eng->na. */
    void (*probe)(void *c, engine_t *eng);
    /* The error of the last failed call is transient (write conflict...). */
    bool (*last_transient)(void *c);
};

extern const driver_t drv_mongo;
/* libmongoc reads through mongo_stream.c's blocking stream (--mongoc-stream
 * blocking; default false: libmongoc as shipped). */
extern bool drv_mongo_blocking_stream;
/* atomdb through the minimal wire client of drv_wire.c (--client wire). */
extern const driver_t drv_wire;
/* --client wire: driver_for(ENG_ATOMDB) is drv_wire (default false: libmongoc). */
extern bool bench_wire_client;
extern const driver_t drv_redis;
extern const driver_t drv_pg;
/* A plain libpq connection to the bench's PostgreSQL `e` for the side
 * scenarios (joins, collation): retried while the server starts, notices
 * silenced. NULL with `err` set when it cannot connect. */
struct pg_conn *pg_connect_side(const engine_t *e, char *err); /* libpq's PGconn */

/* ---- names ---- */

const char *scen_name(scen_t s);
const char *strat_name(strat_t s);
const char *eng_name(eng_kind_t k);
/* Number of slots of a scenario (1, 1, 1, 200, 5, 10000). */
int scen_slots(scen_t s);
/* Initial value of a slot (stock, 0, ...). */
int64_t scen_initial(scen_t s);
/* Seat key "rRRcCC" for slot k into buf (size >= 8). */
void scen_seat_key(int k, char *buf);
/* Why a strategy makes no sense for a scenario (any engine), or NULL. */
const char *strat_na_for_scenario(scen_t sc, strat_t st);
/* The driver for an engine kind. */
const driver_t *driver_for(eng_kind_t k);

/* ---- strategy layer (strategy.c) ---- */

/* Runs one operation of cell's scenario with its strategy; updates st. */
void strategy_op(const driver_t *d, void *c, client_t *cl, scen_t s, strat_t st,
                 client_stats_t *stats, rec_t *recs, uint64_t rec_cap);

/* ---- engines (engine.c) ---- */

/* Starts an engine in a fresh temp dir on a free 127.0.0.1 port. atomdb_path
 * is the server binary. Returns false with err filled. */
bool engine_start(engine_t *e, const eng_conf_t *conf, const char *atomdb_path, char *err,
                  size_t errlen);
/* Stops the server (SIGTERM/SIGINT, then SIGKILL after 10 s) and removes its
 * directory unless keep. Safe to call twice. */
void engine_stop(engine_t *e, bool keep);
/* Stops the server with sig (SIGTERM: clean, SIGKILL: crash), then starts it
 * again on the same directory and port and waits until it listens. atomdb only. */
bool engine_restart(engine_t *e, const char *atomdb_path, int sig, char *err, size_t errlen);
/* Stops every engine still running (atexit and signal path). */
void engine_stop_all(void);
/* Waits until a TCP connection to port succeeds; false after timeout_ms. */
bool engine_wait_port(int port, int timeout_ms);
/* CPU seconds used by the server process pid: its threads, plus (children =
 * true, PostgreSQL) its backends, live and exited. -1 on error. */
double engine_cpu_s(pid_t pid, bool children);
/* Returns a currently free TCP port on 127.0.0.1. */
int engine_free_port(void);
/* Set by the SIGINT/SIGTERM handler. */
extern volatile int engine_interrupted;

/* ---- `atomdb-bench watch` (watch.c) ---- */

/* Runs the change stream cells (0, 1 and 16 streams, or only `only` when
 * it is >= 0); returns 0 when every stream saw every update in order. */
int watch_bench(const char *atomdb, double secs, int rounds, int only);
/* ---- `atomdb-bench text` (textsearch.c) ---- */

/* Times a one-word $text search on a text index against the same search as
 * a full scan over `ndocs` short documents; 0 when the index is >= 50x
 * faster and both find the same documents. */
int text_bench(const char *atomdb, int ndocs);

/* ---- `atomdb-bench geo` (geo.c) ---- */

/* Times $near returning the nearest 20 of `npoints` points on a 2dsphere
 * index against the same query as a full scan; 0 when the index is >= 50x
 * faster and both return the same documents in the same order. */
int geo_bench(const char *atomdb, int npoints);

/* Installs the signal handlers that stop every engine on Ctrl-C. */
void engine_install_signals(void);

/* ---- runner (runner.c) ---- */

/* A pool of connected client processes for one engine and client count. */
typedef struct runner_pool runner_pool_t;
/* Forks clients processes, each connecting to eng; NULL with err on failure. */
runner_pool_t *runner_pool_start(engine_t *eng, int clients, char *err, size_t errlen);
/* Tells the clients to exit and reaps them (kills them after 20 s). Accepts NULL. */
void runner_pool_stop(runner_pool_t *pool);
/* Runs one cell on a pool: sets up the data, starts every client at once,
 * measures, checks the invariant against the final state (parent is the
 * parent's own connection). Returns false when the pool is no longer usable. */
bool runner_run_in(runner_pool_t *pool, const cell_t *cell, void *parent, row_t *row,
                   const char *progress);
/* runner_run_in on a pool of cell->clients started and stopped for this cell. */
void runner_run(const cell_t *cell, void *parent, row_t *row, const char *progress);

/* ---- report (report.c) ---- */

/* Prints the table's column names (stdout). */
void report_table_header(void);
/* Prints one table line; flattens newlines in r->note first. */
void report_table_row(row_t *r);
/* Writes rows as a JSON array (keys of issue 7, plus na_reason on n/a rows);
 * false when the file cannot be written. */
bool report_json(const char *path, const row_t *rows, int n);
/* Writes an SVG chart: ops/s against clients, a panel per scenario and
 * engine/durability, a line per strategy (dashed when it broke an invariant). */
bool report_svg(const char *path, const row_t *rows, int n);

/* ---- server measurements (measure.c) ---- */

/* Runs issue 3/4 measurements (only: comma list of startup,cpu,memory,restart,
 * journal, or NULL for all; perf_dir: record perf profiles of the CPU phase
 * there, or NULL); returns the process exit status. */
/* mongodb-memory-server create() -> first insert, server and one-member
 * replica set, median of 10 (tools/bench/mms.c). */
void measure_mms(const char *atomdb);
int measure_server(const char *atomdb_path, bool quick, long docs, const char *perf_dir,
                   const char *only);

/* ---- mixed (mixed.c) ---- */

/* `atomdb-bench mixed`: `clients` hot-counter processes alone and with one
 * reporter looping `report` over `docs` rows ("group": a $group / GROUP BY,
 * "index": createIndexes + dropIndexes / CREATE + DROP INDEX, "out": an
 * $out / CREATE TABLE AS), on atomdb and/or PostgreSQL; medians of `repeat`
 * runs of `duration_s`; `yield_us` >= 0 sets atomdb's
 * atomdbYieldPeriodMicros first. Exit status. */
int mixed_main(const char *atomdb, int clients, double duration_s, long docs, int repeat,
               bool atomdb_on, bool pg_on, long yield_us, const char *report);

/* ---- joins (joins.c) ---- */

/* `atomdb-bench joins`: a $lookup of `orders` orders to `items` items by
 * _id on atomdb and the same LEFT JOIN on PostgreSQL, `repeat` timed runs
 * each; prints ms per query. Exit status. */
int joins_main(const char *atomdb, long orders, long items, int repeat, bool atomdb_on,
               bool pg_on);

/* ---- collation (collation.c) ---- */

/* `atomdb-bench collation`: `queries` case-insensitive finds among `docs`
 * documents through a strength-2 collated index on atomdb and a lower()
 * expression index on PostgreSQL; prints ms per query. Exit status. */
int collation_main(const char *atomdb, long docs, int queries, bool atomdb_on, bool pg_on);

/* ---- time ---- */

/* CLOCK_MONOTONIC in nanoseconds. */
int64_t bench_now_ns(void);
/* Sleeps us microseconds. */
void bench_sleep_us(long us);
/* qsort's comparison of two doubles, ascending (for medians). */
int bench_cmp_double(const void *a, const void *b);

#endif
