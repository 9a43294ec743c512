/* runner.c: runs one measured cell — resets the scenario's data, forks one
 * client process per connection, starts them together, gathers their counters
 * and latencies from shared memory, and checks the scenario's invariant
 * against the engine's final state. */
#include "bench.h"

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

/* Records kept for the invariant checks, over all clients of a cell. */
#define RUNNER_REC_TOTAL (2u << 20)
/* Zipf exponent of the play counter's video popularity. */
#define RUNNER_ZIPF_S 1.0

/* Commands from the parent to its pool of clients, in shared memory. */
typedef struct {
    volatile int gen;    /* bumped by the parent to start a cell (release) */
    volatile int quit;   /* 1: clients disconnect and exit */
    scen_t scen;         /* the cell to run */
    strat_t strat;
    long ops_per_client; /* 0: duration only */
    int64_t start_ns;    /* common start time */
    int64_t deadline_ns; /* clients stop issuing operations at this time */
} runner_ctl_t;

/* Per-client slot in shared memory: the stats plus the generation done. */
typedef struct {
    client_stats_t st;     /* counters of the current cell */
    volatile int done_gen; /* last generation finished */
    volatile int alive;    /* connected and waiting for commands */
    volatile int failed;   /* could not connect; st.error says why */
} runner_slot_t;

/* A pool of connected client processes, reused by every cell of one engine
 * and client count (so connection set-up is not paid per cell). */
struct runner_pool {
    engine_t *eng;        /* engine the clients are connected to */
    int n;                /* client processes */
    pid_t *pids;          /* their pids (0 once reaped) */
    void *shm;            /* shared region */
    size_t shm_size;      /* its size */
    runner_ctl_t *ctl;    /* commands */
    runner_slot_t *slots; /* one per client */
    rec_t *recs;          /* success records, rec_cap per client */
    uint64_t rec_cap;     /* records per client */
};

static double runner_zipf_cdf[PLAY_IDS];
static bool runner_zipf_ready;

/* Fills the cumulative Zipf(s) distribution over the play counter's ids. */
static void runner_zipf_init(void)
{
    if (runner_zipf_ready)
        return;
    double h = 0;
    for (int i = 0; i < PLAY_IDS; i++) {
        h += 1.0 / pow(i + 1, RUNNER_ZIPF_S);
        runner_zipf_cdf[i] = h;
    }
    for (int i = 0; i < PLAY_IDS; i++)
        runner_zipf_cdf[i] /= h;
    runner_zipf_ready = true;
}

/* CPU time of this process in microseconds. */
static int64_t runner_self_cpu_us(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000LL + ru.ru_utime.tv_usec +
           ru.ru_stime.tv_usec;
}

/* Body of one forked client process: connects, then runs each cell the
 * parent starts until told to quit; never returns. */
static void runner_client(runner_pool_t *pool, int id, pid_t parent)
{
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    signal(SIGHUP, SIG_DFL);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent)
        _exit(1);
    runner_slot_t *slot = &pool->slots[id];
    rec_t *recs = pool->recs + pool->rec_cap * (uint64_t)id;
    runner_ctl_t *ctl = pool->ctl;
    const driver_t *d = driver_for(pool->eng->conf.kind);
    char err[ERRLEN] = "";
    void *c = NULL;
    /* A loaded machine can make a connection time out: try three times. */
    for (int attempt = 0; attempt < 3 && !c; attempt++) {
        if (attempt)
            bench_sleep_us(1000000);
        c = d->connect(pool->eng, pool->eng->conf.durability, err);
    }
    if (!c) {
        snprintf(slot->st.error, sizeof slot->st.error, "%s", err);
        __atomic_store_n(&slot->failed, 1, __ATOMIC_RELEASE);
        _exit(1);
    }
    __atomic_store_n(&slot->alive, 1, __ATOMIC_RELEASE);
    client_t cl = {.id = id,
                   .rng = 0x9E3779B97F4A7C15ULL * (uint64_t)(id + 1) ^ (uint64_t)bench_now_ns(),
                   .zipf_cdf = runner_zipf_cdf};
    if (cl.rng == 0)
        cl.rng = 1;
    int my_gen = 0;
    /* Idle bound: a parent that stops sending cells for 30 minutes is gone. */
    int64_t idle_until = bench_now_ns() + 1800LL * 1000000000;
    for (;;) {
        int gen = __atomic_load_n(&ctl->gen, __ATOMIC_ACQUIRE);
        if (ctl->quit || getppid() != parent || bench_now_ns() > idle_until)
            break;
        if (gen == my_gen) {
            bench_sleep_us(200);
            continue;
        }
        my_gen = gen;
        client_stats_t *st = &slot->st;
        while (bench_now_ns() < ctl->start_ns)
            ;
        int64_t cpu0 = runner_self_cpu_us();
        for (;;) {
            if (bench_now_ns() >= ctl->deadline_ns)
                break;
            if (ctl->ops_per_client > 0 && (long)(st->ops + st->errors) >= ctl->ops_per_client)
                break;
            if (pool->rec_cap > 0 && st->nrec >= pool->rec_cap)
                break;
            if (st->errors > 1000)
                break;
            strategy_op(d, c, &cl, ctl->scen, ctl->strat, st, recs, pool->rec_cap);
        }
        st->end_ns = bench_now_ns();
        st->cpu_us = runner_self_cpu_us() - cpu0;
        __atomic_store_n(&slot->done_gen, gen, __ATOMIC_RELEASE);
        idle_until = bench_now_ns() + 1800LL * 1000000000;
    }
    d->disconnect(c);
    _exit(0);
}

/* Reaps exited clients; returns how many are still running. */
static int runner_reap(runner_pool_t *pool)
{
    int alive = 0;
    for (int i = 0; i < pool->n; i++) {
        if (pool->pids[i] > 0 && waitpid(pool->pids[i], NULL, WNOHANG) == pool->pids[i])
            pool->pids[i] = 0;
        alive += pool->pids[i] > 0;
    }
    return alive;
}

void runner_pool_stop(runner_pool_t *pool)
{
    if (!pool)
        return;
    pool->ctl->quit = 1;
    __atomic_add_fetch(&pool->ctl->gen, 1, __ATOMIC_RELEASE);
    int64_t deadline = bench_now_ns() + 20LL * 1000000000;
    while (runner_reap(pool) > 0) {
        if (bench_now_ns() > deadline || engine_interrupted) {
            for (int i = 0; i < pool->n; i++)
                if (pool->pids[i] > 0)
                    kill(pool->pids[i], SIGKILL);
            deadline = INT64_MAX;
        }
        bench_sleep_us(2000);
    }
    munmap(pool->shm, pool->shm_size);
    free(pool->pids);
    free(pool);
}

runner_pool_t *runner_pool_start(engine_t *eng, int clients, char *err, size_t errlen)
{
    runner_zipf_init();
    runner_pool_t *pool = calloc(1, sizeof *pool);
    pool->eng = eng;
    pool->n = clients;
    pool->pids = calloc((size_t)clients, sizeof *pool->pids);
    pool->rec_cap = RUNNER_REC_TOTAL / (uint64_t)clients;
    size_t ctl_size = 4096;
    size_t slots_size = sizeof(runner_slot_t) * (size_t)clients;
    pool->shm_size = ctl_size + slots_size + sizeof(rec_t) * pool->rec_cap * (size_t)clients;
    pool->shm = mmap(NULL, pool->shm_size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                     -1, 0);
    if (pool->shm == MAP_FAILED) {
        snprintf(err, errlen, "mmap: %s", strerror(errno));
        free(pool->pids);
        free(pool);
        return NULL;
    }
    pool->ctl = pool->shm;
    pool->slots = (runner_slot_t *)((char *)pool->shm + ctl_size);
    pool->recs = (rec_t *)((char *)pool->shm + ctl_size + slots_size);
    fflush(stdout);
    fflush(stderr);
    pid_t parent = getpid();
    for (int i = 0; i < clients; i++) {
        pid_t pid = fork();
        if (pid == 0)
            runner_client(pool, i, parent);
        if (pid < 0) {
            snprintf(err, errlen, "fork: %s", strerror(errno));
            runner_pool_stop(pool);
            return NULL;
        }
        pool->pids[i] = pid;
    }
    /* Wait until every client is connected (bounded). */
    int64_t deadline = bench_now_ns() + 120LL * 1000000000;
    for (;;) {
        int ready = 0;
        for (int i = 0; i < clients; i++) {
            if (__atomic_load_n(&pool->slots[i].failed, __ATOMIC_ACQUIRE)) {
                snprintf(err, errlen, "client %d: %s", i, pool->slots[i].st.error);
                runner_pool_stop(pool);
                return NULL;
            }
            ready += __atomic_load_n(&pool->slots[i].alive, __ATOMIC_ACQUIRE);
        }
        if (ready == clients)
            return pool;
        if (engine_interrupted || bench_now_ns() > deadline || runner_reap(pool) < clients) {
            snprintf(err, errlen, "clients did not connect");
            runner_pool_stop(pool);
            return NULL;
        }
        bench_sleep_us(1000);
    }
}

/* Sorts records by key, then value. */
static int runner_rec_cmp(const void *a, const void *b)
{
    const rec_t *x = a, *y = b;
    if (x->key != y->key)
        return x->key < y->key ? -1 : 1;
    return x->value < y->value ? -1 : x->value > y->value;
}

static uint64_t runner_absdiff(int64_t a, int64_t b)
{
    return (uint64_t)(a > b ? a - b : b - a);
}

/* Compares the final state with what the clients were told; returns the
 * number of invariant violations. recs: all success records, sorted. */
static uint64_t runner_check(scen_t s, const int64_t *vals, const row_t *row,
                             const uint64_t *agent_succ, rec_t *recs, uint64_t nrec)
{
    uint64_t v = 0;
    int64_t succ = (int64_t)row->successes;
    switch (s) {
    case SCEN_COUNTER: /* lost increments */
        return runner_absdiff(succ, vals[0]);
    case SCEN_FLASH_SALE_1:
    case SCEN_FLASH_SALE_1000: { /* units sold that stock did not cover */
        int64_t taken = scen_initial(s) - vals[0];
        v = runner_absdiff(succ, taken);
        if (vals[0] < 0)
            v += (uint64_t)-vals[0];
        return v;
    }
    case SCEN_HELPDESK: /* assignments above capacity or lost */
        for (int k = 0; k < AGENTS; k++) {
            int64_t sk = (int64_t)agent_succ[k], fk = vals[k];
            if (sk > AGENT_CAPACITY)
                v += (uint64_t)(sk - AGENT_CAPACITY);
            if (fk > AGENT_CAPACITY)
                v += (uint64_t)(fk - AGENT_CAPACITY);
            if (sk <= AGENT_CAPACITY && fk <= AGENT_CAPACITY)
                v += runner_absdiff(sk, fk);
        }
        return v;
    case SCEN_SEATS: { /* seats told "yours" to more than one client, or owners lost */
        qsort(recs, nrec, sizeof *recs, runner_rec_cmp);
        uint64_t i = 0;
        for (int k = 0; k < SEATS; k++) {
            uint64_t claims = 0;
            bool owner_claimed = false;
            for (; i < nrec && recs[i].key == k; i++) {
                claims++;
                owner_claimed |= recs[i].value == vals[k];
            }
            if (claims > 1)
                v += claims - 1;
            if (claims >= 1 && !owner_claimed)
                v++;
            if (claims == 0 && vals[k] != 0)
                v++;
        }
        return v;
    }
    case SCEN_PLAY_COUNTER: { /* duplicate counts returned, or plays lost */
        qsort(recs, nrec, sizeof *recs, runner_rec_cmp);
        uint64_t i = 0;
        for (int k = 0; k < PLAY_IDS; k++) {
            uint64_t n = 0, dups = 0;
            for (; i < nrec && recs[i].key == k; i++) {
                if (n > 0 && recs[i].value == recs[i - 1].value)
                    dups++;
                n++;
            }
            uint64_t lost = runner_absdiff((int64_t)n, vals[k]);
            v += dups > lost ? dups : lost;
        }
        return v;
    }
    default:
        return 0;
    }
}

void runner_run(const cell_t *cell, void *parent, row_t *row, const char *progress)
{
    char err[256];
    runner_pool_t *pool = runner_pool_start(cell->eng, cell->clients, err, sizeof err);
    if (!pool) {
        row->errors = 1;
        snprintf(row->note, sizeof row->note, "%s", err);
        return;
    }
    runner_run_in(pool, cell, parent, row, progress);
    runner_pool_stop(pool);
}

bool runner_run_in(runner_pool_t *pool, const cell_t *cell, void *parent, row_t *row,
                   const char *progress)
{
    const driver_t *d = driver_for(cell->eng->conf.kind);
    int n = pool->n;
    char err[ERRLEN] = "";
    bool need_recs = cell->scen == SCEN_SEATS || cell->scen == SCEN_PLAY_COUNTER;
    int64_t *vals = calloc((size_t)scen_slots(cell->scen), sizeof *vals);
    rec_t *all = NULL;
    hist_t *h = calloc(1, sizeof *h);
    runner_ctl_t *ctl = pool->ctl;
    bool healthy = true;

    if (!d->setup(parent, cell->scen, err)) {
        row->errors = 1;
        snprintf(row->note, sizeof row->note, "setup: %s", err);
        free(vals);
        free(h);
        return true;
    }
    for (int i = 0; i < n; i++)
        memset(&pool->slots[i].st, 0, sizeof pool->slots[i].st);
    ctl->scen = cell->scen;
    ctl->strat = cell->strat;
    ctl->ops_per_client = cell->ops_per_client;
    bool pg = cell->eng->conf.kind == ENG_POSTGRES;
    double srv0 = engine_cpu_s(cell->eng->pid, pg);
    ctl->start_ns = bench_now_ns() + 2000000;
    ctl->deadline_ns = ctl->start_ns + (int64_t)(cell->duration_s * 1e9);
    int gen = __atomic_add_fetch(&ctl->gen, 1, __ATOMIC_RELEASE);

    /* Wait for the clients; give up on the pool if they overrun by a minute. */
    int64_t kill_at = ctl->deadline_ns + 60LL * 1000000000;
    int64_t next_progress = bench_now_ns() + 250000000;
    for (;;) {
        int done = 0;
        for (int i = 0; i < n; i++)
            done += __atomic_load_n(&pool->slots[i].done_gen, __ATOMIC_ACQUIRE) == gen;
        if (done == n)
            break;
        int64_t now = bench_now_ns();
        if (engine_interrupted || now > kill_at || runner_reap(pool) < n) {
            healthy = false;
            if (!engine_interrupted)
                snprintf(row->note, sizeof row->note,
                         "clients overran or died and were killed: an operation in flight "
                         "may count as a violation");
            for (int i = 0; i < n; i++)
                if (pool->pids[i] > 0)
                    kill(pool->pids[i], SIGKILL);
            break;
        }
        if (progress && now >= next_progress) {
            uint64_t ops = 0, retries = 0;
            for (int i = 0; i < n; i++) {
                ops += pool->slots[i].st.ops;
                retries += pool->slots[i].st.retries;
            }
            double el = (double)(now - ctl->start_ns) / 1e9;
            fprintf(stderr, "\r\033[K%s  %.1fs  %llu ops  %.0f ops/s  %llu retries", progress, el,
                    (unsigned long long)ops, el > 0 ? (double)ops / el : 0.0,
                    (unsigned long long)retries);
            next_progress = now + 250000000;
        }
        bench_sleep_us(1000);
    }
    double srv1 = engine_cpu_s(cell->eng->pid, pg);

    /* Merge the clients' counters. */
    int64_t end = ctl->start_ns;
    uint64_t agent_succ[AGENTS] = {0};
    uint64_t nrec = 0;
    const char *first_error = NULL;
    bool truncated = false;
    int64_t cpu_us = 0;
    for (int i = 0; i < n; i++) {
        client_stats_t *st = &pool->slots[i].st;
        row->ops += st->ops;
        row->successes += st->successes;
        row->retries += st->retries;
        row->gave_up += st->gave_up;
        row->errors += st->errors;
        for (int k = 0; k < AGENTS; k++)
            agent_succ[k] += st->agent_succ[k];
        nrec += st->nrec;
        cpu_us += st->cpu_us;
        truncated |= need_recs && st->nrec >= pool->rec_cap;
        if (st->end_ns > end)
            end = st->end_ns;
        if (!first_error && st->error[0])
            first_error = st->error;
        hist_merge(h, &st->hist);
    }
    double elapsed = (double)(end - ctl->start_ns) / 1e9;
    row->ops_per_sec = elapsed > 0 ? (double)row->ops / elapsed : 0;
    row->p50_us = hist_quantile(h, 0.50);
    row->p99_us = hist_quantile(h, 0.99);
    if (row->ops > 0) {
        row->client_cpu_us = (double)cpu_us / (double)row->ops;
        if (srv0 >= 0 && srv1 >= srv0)
            row->server_cpu_us = (srv1 - srv0) * 1e6 / (double)row->ops;
    }
    if (need_recs && nrec > 0) {
        all = malloc(sizeof *all * nrec);
        uint64_t j = 0;
        for (int i = 0; i < n; i++) {
            memcpy(all + j, pool->recs + pool->rec_cap * (uint64_t)i,
                   sizeof *all * pool->slots[i].st.nrec);
            j += pool->slots[i].st.nrec;
        }
    }
    if (d->final_state(parent, cell->scen, vals, scen_slots(cell->scen), err))
        row->violations = runner_check(cell->scen, vals, row, agent_succ, all, nrec);
    else
        snprintf(row->note, sizeof row->note, "final state: %s", err);
    if (!row->note[0]) {
        char *p = row->note;
        size_t left = sizeof row->note;
        if (row->gave_up) {
            int w = snprintf(p, left, "gave up %llu; ", (unsigned long long)row->gave_up);
            p += w;
            left -= (size_t)w;
        }
        if (row->errors) {
            int w = snprintf(p, left, "errors %llu: %s; ", (unsigned long long)row->errors,
                             first_error ? first_error : "");
            w = w < (int)left ? w : (int)left - 1;
            p += w;
            left -= (size_t)w;
        }
        if (truncated && left > 1)
            snprintf(p, left, "records truncated; ");
    }
    free(all);
    free(vals);
    free(h);
    return healthy;
}
