/* strategy.c: the seven strategies of seed 001, written once on top of each
 * engine's primitives (driver_t), plus the scenario/strategy/engine names and
 * the clock helpers shared by the bench. */
#include "bench.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

/* Retry bounds: an operation gives up after this many conflicts / lock waits. */
#define CAS_MAX_ATTEMPTS 30
#define TXN_MAX_ATTEMPTS 30
#define LOCK_MAX_ATTEMPTS 2000

/* ---- names ---- */

static const char *const scen_names[SCEN_COUNT] = {
    "counter", "flash_sale_1", "flash_sale_1000", "seats", "helpdesk", "play_counter"};
static const char *const strat_names[STRAT_COUNT] = {
    "naive",       "in_process_mutex", "atomic",    "conditional",
    "version_cas", "pessimistic",      "lease_lock", "snapshot_txn"};
static const char *const eng_names[ENG_COUNT] = {"atomdb", "redis", "postgres"};

const char *scen_name(scen_t s)
{
    return scen_names[s];
}

const char *strat_name(strat_t s)
{
    return strat_names[s];
}

const char *eng_name(eng_kind_t k)
{
    return eng_names[k];
}

int scen_slots(scen_t s)
{
    switch (s) {
    case SCEN_SEATS:
        return SEATS;
    case SCEN_HELPDESK:
        return AGENTS;
    case SCEN_PLAY_COUNTER:
        return PLAY_IDS;
    default:
        return 1;
    }
}

int64_t scen_initial(scen_t s)
{
    switch (s) {
    case SCEN_FLASH_SALE_1:
        return 1;
    case SCEN_FLASH_SALE_1000:
        return 1000;
    default:
        return 0;
    }
}

void scen_seat_key(int k, char *buf)
{
    snprintf(buf, 8, "r%02dc%02d", k / SEAT_COLS + 1, k % SEAT_COLS + 1);
}

const char *strat_na_for_scenario(scen_t sc, strat_t st)
{
    bool counterlike = sc == SCEN_COUNTER || sc == SCEN_PLAY_COUNTER;
    if (st == STRAT_ATOMIC && !counterlike)
        return "a bare atomic operator cannot refuse a sale/booking; see conditional";
    if (st == STRAT_CONDITIONAL && counterlike)
        return "a counter has no precondition to check; see atomic";
    return NULL;
}

bool bench_wire_client = false;

const driver_t *driver_for(eng_kind_t k)
{
    switch (k) {
    case ENG_ATOMDB:
        return bench_wire_client ? &drv_wire : &drv_mongo;
    case ENG_REDIS:
        return &drv_redis;
    default:
        return &drv_pg;
    }
}

/* ---- time ---- */

int64_t bench_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

void bench_sleep_us(long us)
{
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
    nanosleep(&ts, NULL);
}

int bench_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* ---- strategies ---- */

/* One mutex per client process: seed 001's "synchronized", which cannot see
 * the other processes. */
static pthread_mutex_t strategy_mutex = PTHREAD_MUTEX_INITIALIZER;

/* xorshift64* random number. */
static uint64_t client_rand(client_t *cl)
{
    uint64_t x = cl->rng;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    cl->rng = x;
    return x * 0x2545F4914F6CDD1DULL;
}

/* Sleeps an exponential, jittered backoff for the attempt-th retry. */
static void backoff(client_t *cl, int attempt)
{
    long base = 50L << (attempt < 7 ? attempt : 7); /* 50 us .. 6.4 ms */
    long us = base / 2 + (long)(client_rand(cl) % (uint64_t)base);
    bench_sleep_us(us);
}

/* Picks the slot an operation touches. */
static int pick_slot(client_t *cl, scen_t s)
{
    switch (s) {
    case SCEN_SEATS:
        return (int)(client_rand(cl) % SEATS);
    case SCEN_HELPDESK:
        return (int)(client_rand(cl) % AGENTS);
    case SCEN_PLAY_COUNTER: {
        double u = (double)(client_rand(cl) >> 11) / 9007199254740992.0;
        int lo = 0, hi = PLAY_IDS - 1;
        while (lo < hi) {
            int mid = (lo + hi) / 2;
            if (cl->zipf_cdf[mid] < u)
                lo = mid + 1;
            else
                hi = mid;
        }
        return lo;
    }
    default:
        return 0;
    }
}

/* The scenario's check on the value read: may the step happen? */
static bool step_allowed(scen_t s, int64_t v)
{
    switch (s) {
    case SCEN_FLASH_SALE_1:
    case SCEN_FLASH_SALE_1000:
        return v >= 1;
    case SCEN_SEATS:
        return v == 0;
    case SCEN_HELPDESK:
        return v < AGENT_CAPACITY;
    default:
        return true;
    }
}

/* The value the step writes after reading v. */
static int64_t step_value(scen_t s, int64_t v, int64_t token)
{
    switch (s) {
    case SCEN_FLASH_SALE_1:
    case SCEN_FLASH_SALE_1000:
        return v - 1;
    case SCEN_SEATS:
        return token;
    default:
        return v + 1;
    }
}

/* Outcome of one strategy body. */
typedef enum { OUT_SUCCESS, OUT_REFUSED, OUT_GAVE_UP, OUT_ERROR } outcome_t;

/* Read, check, blind write: the naive body, also run under the mutex and the
 * lease lock. *newv gets the value written. */
static outcome_t naive_body(const driver_t *d, void *c, scen_t s, int slot, int64_t token,
                            int64_t *newv, char *err)
{
    slot_read_t r;
    if (!d->read(c, s, slot, false, &r, err))
        return OUT_ERROR;
    if (!step_allowed(s, r.value))
        return OUT_REFUSED;
    *newv = step_value(s, r.value, token);
    if (!d->write(c, s, slot, *newv, err))
        return OUT_ERROR;
    return OUT_SUCCESS;
}

void strategy_op(const driver_t *d, void *c, client_t *cl, scen_t s, strat_t st,
                 client_stats_t *stats, rec_t *recs, uint64_t rec_cap)
{
    char err[ERRLEN] = "";
    int slot = pick_slot(cl, s);
    int64_t token = ((int64_t)(cl->id + 1) << 32) | (int64_t)(cl->seq & 0xffffffff);
    int64_t newv = 0;
    outcome_t out = OUT_ERROR;
    int64_t t0 = bench_now_ns();
    cl->seq++;

    switch (st) {
    case STRAT_NAIVE:
        out = naive_body(d, c, s, slot, token, &newv, err);
        break;
    case STRAT_MUTEX:
        pthread_mutex_lock(&strategy_mutex);
        out = naive_body(d, c, s, slot, token, &newv, err);
        pthread_mutex_unlock(&strategy_mutex);
        break;
    case STRAT_ATOMIC:
        out = d->atomic(c, s, slot, &newv, err) ? OUT_SUCCESS : OUT_ERROR;
        break;
    case STRAT_CONDITIONAL: {
        bool won = false;
        if (!d->conditional(c, s, slot, token, &won, err))
            out = OUT_ERROR;
        else
            out = won ? OUT_SUCCESS : OUT_REFUSED;
        newv = token;
        break;
    }
    case STRAT_VERSION_CAS:
        out = OUT_GAVE_UP;
        for (int attempt = 0; attempt < CAS_MAX_ATTEMPTS; attempt++) {
            slot_read_t r;
            bool won = false;
            if (!d->read(c, s, slot, false, &r, err)) {
                out = OUT_ERROR;
                break;
            }
            if (!step_allowed(s, r.value)) {
                out = OUT_REFUSED;
                break;
            }
            newv = step_value(s, r.value, token);
            if (!d->cas(c, s, slot, &r, newv, &won, err)) {
                out = OUT_ERROR;
                break;
            }
            if (won) {
                out = OUT_SUCCESS;
                break;
            }
            stats->retries++;
            backoff(cl, attempt);
        }
        break;
    case STRAT_PESSIMISTIC:
    case STRAT_SNAPSHOT_TXN:
        out = OUT_GAVE_UP;
        for (int attempt = 0; attempt < TXN_MAX_ATTEMPTS; attempt++) {
            slot_read_t r;
            bool retry = false;
            bool snapshot = st == STRAT_SNAPSHOT_TXN;
            if (!d->txn_begin(c, snapshot, err)) {
                out = OUT_ERROR;
                break;
            }
            /* pessimistic: lock while reading (FOR UPDATE); snapshot: a plain
             * read, the write is refused if someone committed in between */
            if (!d->read(c, s, slot, !snapshot, &r, err)) {
                d->txn_abort(c);
                if (d->last_transient(c)) {
                    stats->retries++;
                    backoff(cl, attempt);
                    continue;
                }
                out = OUT_ERROR;
                break;
            }
            bool allowed = step_allowed(s, r.value);
            if (allowed) {
                newv = step_value(s, r.value, token);
                if (!d->write(c, s, slot, newv, err)) {
                    d->txn_abort(c);
                    if (d->last_transient(c)) {
                        stats->retries++;
                        backoff(cl, attempt);
                        continue;
                    }
                    out = OUT_ERROR;
                    break;
                }
            }
            if (!d->txn_commit(c, &retry, err)) {
                if (retry) {
                    stats->retries++;
                    backoff(cl, attempt);
                    continue;
                }
                out = OUT_ERROR;
                break;
            }
            out = allowed ? OUT_SUCCESS : OUT_REFUSED;
            break;
        }
        break;
    case STRAT_LEASE_LOCK: {
        char name[48];
        snprintf(name, sizeof name, "%s:%d", scen_name(s), slot);
        out = OUT_GAVE_UP;
        for (int attempt = 0; attempt < LOCK_MAX_ATTEMPTS; attempt++) {
            bool got = false;
            if (!d->lock(c, name, cl->id, &got, err)) {
                out = OUT_ERROR;
                break;
            }
            if (!got) {
                stats->retries++;
                backoff(cl, attempt < 3 ? attempt : 3);
                continue;
            }
            out = naive_body(d, c, s, slot, token, &newv, err);
            char uerr[ERRLEN];
            if (!d->unlock(c, name, uerr) && out != OUT_ERROR) {
                memcpy(err, uerr, ERRLEN);
                out = OUT_ERROR;
            }
            break;
        }
        break;
    }
    default:
        break;
    }

    if (out == OUT_ERROR) {
        stats->errors++;
        if (!stats->error[0])
            snprintf(stats->error, sizeof stats->error, "%s", err[0] ? err : "unknown error");
        return;
    }
    hist_add(&stats->hist, (uint64_t)((bench_now_ns() - t0) / 1000));
    stats->ops++;
    if (out == OUT_GAVE_UP) {
        stats->gave_up++;
        return;
    }
    if (out != OUT_SUCCESS)
        return;
    stats->successes++;
    if (s == SCEN_HELPDESK)
        stats->agent_succ[slot]++;
    if ((s == SCEN_SEATS || s == SCEN_PLAY_COUNTER) && stats->nrec < rec_cap) {
        recs[stats->nrec].key = slot;
        recs[stats->nrec].value = newv;
        stats->nrec++;
    }
}
