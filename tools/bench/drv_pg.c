/* drv_pg.c: the bench's primitives for PostgreSQL through libpq — one table
 * per scenario (id int primary key, v bigint, ver bigint), prepared
 * statements, SELECT ... FOR UPDATE for the pessimistic strategy and
 * pg_advisory_lock for the lease. */
#include "bench.h"

#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Prepared statement kinds (one set per scenario table). */
enum { PQ_READ, PQ_READ_LOCK, PQ_WRITE, PQ_ATOMIC, PQ_COND, PQ_CAS, PQ_INSERT, PQ_ENSURE, PQ_KINDS };

/* One client's connection. */
typedef struct {
    PGconn *conn;                          /* one backend */
    bool prepared[SCEN_COUNT][PQ_KINDS];   /* statements prepared on this backend */
    bool transient;                        /* last failure was a serialization/deadlock */
    int64_t lock_key;                      /* advisory lock held */
} pconn_t;

static const char *const pg_tables[SCEN_COUNT] = {"counters", "items", "items",
                                                  "seats",    "agents", "plays"};

/* SQL of a statement kind for scenario s into buf; false when it has none. */
static bool pg_sql(scen_t s, int kind, char *buf, size_t len)
{
    const char *t = pg_tables[s];
    switch (kind) {
    case PQ_READ:
        snprintf(buf, len, "SELECT v, ver FROM %s WHERE id = $1", t);
        return true;
    case PQ_READ_LOCK:
        snprintf(buf, len, "SELECT v, ver FROM %s WHERE id = $1 FOR UPDATE", t);
        return true;
    case PQ_WRITE:
        if (s == SCEN_PLAY_COUNTER)
            snprintf(buf, len,
                     "INSERT INTO %s (id, v, ver) VALUES ($1, $2, 1) ON CONFLICT (id) DO "
                     "UPDATE SET v = EXCLUDED.v, ver = %s.ver + 1",
                     t, t);
        else
            snprintf(buf, len, "UPDATE %s SET v = $2, ver = ver + 1 WHERE id = $1", t);
        return true;
    case PQ_ATOMIC:
        if (s == SCEN_PLAY_COUNTER)
            snprintf(buf, len,
                     "INSERT INTO %s (id, v, ver) VALUES ($1, 1, 0) ON CONFLICT (id) DO "
                     "UPDATE SET v = %s.v + 1 RETURNING v",
                     t, t);
        else
            snprintf(buf, len, "UPDATE %s SET v = v + 1 WHERE id = $1", t);
        return true;
    case PQ_COND:
        if (s == SCEN_SEATS)
            snprintf(buf, len, "UPDATE %s SET v = $2 WHERE id = $1 AND v = 0", t);
        else if (s == SCEN_HELPDESK)
            snprintf(buf, len, "UPDATE %s SET v = v + 1 WHERE id = $1 AND v < %d", t,
                     AGENT_CAPACITY);
        else
            snprintf(buf, len, "UPDATE %s SET v = v - 1 WHERE id = $1 AND v >= 1", t);
        return true;
    case PQ_CAS:
        snprintf(buf, len, "UPDATE %s SET v = $2, ver = ver + 1 WHERE id = $1 AND ver = $3", t);
        return true;
    case PQ_INSERT:
        snprintf(buf, len,
                 "INSERT INTO %s (id, v, ver) VALUES ($1, $2, 1) ON CONFLICT (id) DO NOTHING", t);
        return true;
    case PQ_ENSURE:
        snprintf(buf, len,
                 "INSERT INTO %s (id, v, ver) VALUES ($1, 0, 0) ON CONFLICT (id) DO NOTHING", t);
        return true;
    default:
        return false;
    }
}

/* Records a failed result into err and the transient flag; frees res. */
static bool pg_fail(pconn_t *p, PGresult *res, char *err)
{
    const char *state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
    p->transient = state && (!strcmp(state, "40001") || !strcmp(state, "40P01"));
    snprintf(err, ERRLEN, "postgres: %s", PQerrorMessage(p->conn));
    char *nl = strchr(err, '\n');
    if (nl)
        *nl = 0;
    PQclear(res);
    return false;
}

/* Executes prepared statement kind of scenario s with text params. Returns the
 * result (caller clears) or NULL with err filled. */
static PGresult *pg_exec(pconn_t *p, scen_t s, int kind, int n, const char *const *params,
                         char *err)
{
    char name[32];
    snprintf(name, sizeof name, "s%d_%d", (int)s, kind);
    if (!p->prepared[s][kind]) {
        char sql[300];
        pg_sql(s, kind, sql, sizeof sql);
        PGresult *r = PQprepare(p->conn, name, sql, n, NULL);
        if (PQresultStatus(r) != PGRES_COMMAND_OK)
            return (pg_fail(p, r, err), NULL);
        PQclear(r);
        p->prepared[s][kind] = true;
    }
    PGresult *r = PQexecPrepared(p->conn, name, n, params, NULL, NULL, 0);
    ExecStatusType st = PQresultStatus(r);
    if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK)
        return (pg_fail(p, r, err), NULL);
    return r;
}

/* Runs a plain SQL command; false with err filled on failure. */
static bool pg_simple(pconn_t *p, const char *sql, char *err)
{
    PGresult *r = PQexec(p->conn, sql);
    ExecStatusType st = PQresultStatus(r);
    if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK)
        return pg_fail(p, r, err);
    PQclear(r);
    return true;
}

static void pg_notice_quiet(void *arg, const char *message)
{
    (void)arg;
    (void)message; /* "table does not exist, skipping" */
}

PGconn *pg_connect_side(const engine_t *e, char *err)
{
    char info[200];
    snprintf(info, sizeof info, "host=127.0.0.1 port=%d user=postgres dbname=postgres", e->port);
    PGconn *pg = PQconnectdb(info);
    for (int i = 0; i < 100 && PQstatus(pg) != CONNECTION_OK; i++) { /* still starting up */
        PQfinish(pg);
        bench_sleep_us(100000);
        pg = PQconnectdb(info);
    }
    if (PQstatus(pg) != CONNECTION_OK) {
        snprintf(err, ERRLEN, "postgres: %s", PQerrorMessage(pg));
        PQfinish(pg);
        return NULL;
    }
    PQsetNoticeProcessor(pg, pg_notice_quiet, NULL);
    return pg;
}

static void *pg_connect(const engine_t *eng, const char *durability, char *err)
{
    char info[300];
    snprintf(info, sizeof info,
             "host=127.0.0.1 port=%d user=postgres dbname=postgres connect_timeout=60 "
             "options='-c synchronous_commit=%s -c statement_timeout=30000 -c client_min_messages=warning'",
             eng->port, !strcmp(durability, "sync_on") ? "on" : "off");
    PGconn *conn = PQconnectdb(info);
    if (PQstatus(conn) != CONNECTION_OK) {
        snprintf(err, ERRLEN, "postgres connect: %s", PQerrorMessage(conn));
        for (char *nl = strchr(err, '\n'); nl; nl = strchr(nl, '\n'))
            *nl = ' ';
        PQfinish(conn);
        return NULL;
    }
    pconn_t *p = calloc(1, sizeof *p);
    p->conn = conn;
    return p;
}

static void pg_disconnect(void *c)
{
    pconn_t *p = c;
    if (!p)
        return;
    PQfinish(p->conn);
    free(p);
}

static bool pg_setup(void *c, scen_t s, char *err)
{
    pconn_t *p = c;
    char sql[400];
    const char *t = pg_tables[s];
    snprintf(sql, sizeof sql,
             "DROP TABLE IF EXISTS %s; CREATE TABLE %s (id int PRIMARY KEY, v bigint NOT NULL, "
             "ver bigint NOT NULL DEFAULT 0)",
             t, t);
    if (!pg_simple(p, sql, err))
        return false;
    if (s != SCEN_PLAY_COUNTER) {
        snprintf(sql, sizeof sql,
                 "INSERT INTO %s (id, v) SELECT g, %lld FROM generate_series(0, %d) g", t,
                 (long long)scen_initial(s), scen_slots(s) - 1);
        if (!pg_simple(p, sql, err))
            return false;
    }
    /* Statements prepared against the dropped table must be prepared again. */
    memset(p->prepared, 0, sizeof p->prepared);
    return pg_simple(p, "DEALLOCATE ALL", err);
}

static bool pg_read(void *c, scen_t s, int slot, bool lock, slot_read_t *out, char *err)
{
    pconn_t *p = c;
    char id[16];
    snprintf(id, sizeof id, "%d", slot);
    const char *params[] = {id};
    if (lock && s == SCEN_PLAY_COUNTER) {
        /* FOR UPDATE cannot lock a missing row: create it first. */
        PGresult *r = pg_exec(p, s, PQ_ENSURE, 1, params, err);
        if (!r)
            return false;
        PQclear(r);
    }
    PGresult *r = pg_exec(p, s, lock ? PQ_READ_LOCK : PQ_READ, 1, params, err);
    if (!r)
        return false;
    out->exists = PQntuples(r) > 0;
    out->value = out->exists ? strtoll(PQgetvalue(r, 0, 0), NULL, 10) : 0;
    out->version = out->exists ? strtoll(PQgetvalue(r, 0, 1), NULL, 10) : 0;
    PQclear(r);
    return true;
}

static bool pg_write(void *c, scen_t s, int slot, int64_t value, char *err)
{
    pconn_t *p = c;
    char id[16], v[24];
    snprintf(id, sizeof id, "%d", slot);
    snprintf(v, sizeof v, "%lld", (long long)value);
    const char *params[] = {id, v};
    PGresult *r = pg_exec(p, s, PQ_WRITE, 2, params, err);
    bool ok = r != NULL;
    PQclear(r);
    return ok;
}

static bool pg_atomic(void *c, scen_t s, int slot, int64_t *out, char *err)
{
    pconn_t *p = c;
    char id[16];
    snprintf(id, sizeof id, "%d", slot);
    const char *params[] = {id};
    PGresult *r = pg_exec(p, s, PQ_ATOMIC, 1, params, err);
    if (!r)
        return false;
    if (s == SCEN_PLAY_COUNTER && PQntuples(r) > 0)
        *out = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
    PQclear(r);
    return true;
}

static bool pg_conditional(void *c, scen_t s, int slot, int64_t token, bool *won, char *err)
{
    pconn_t *p = c;
    char id[16], v[24];
    snprintf(id, sizeof id, "%d", slot);
    snprintf(v, sizeof v, "%lld", (long long)token);
    const char *params[] = {id, v};
    PGresult *r = pg_exec(p, s, PQ_COND, s == SCEN_SEATS ? 2 : 1, params, err);
    if (!r)
        return false;
    *won = atoi(PQcmdTuples(r)) > 0;
    PQclear(r);
    return true;
}

static bool pg_cas(void *c, scen_t s, int slot, const slot_read_t *seen, int64_t value, bool *won,
                   char *err)
{
    pconn_t *p = c;
    char id[16], v[24], ver[24];
    snprintf(id, sizeof id, "%d", slot);
    snprintf(v, sizeof v, "%lld", (long long)value);
    snprintf(ver, sizeof ver, "%lld", (long long)seen->version);
    const char *params[] = {id, v, ver};
    PGresult *r = pg_exec(p, s, seen->exists ? PQ_CAS : PQ_INSERT, seen->exists ? 3 : 2, params,
                          err);
    if (!r)
        return false;
    *won = atoi(PQcmdTuples(r)) > 0;
    PQclear(r);
    return true;
}

static bool pg_txn_begin(void *c, bool snapshot, char *err)
{
    /* REPEATABLE READ is PostgreSQL's snapshot isolation: a write to a row
     * changed since the snapshot fails with 40001 */
    return pg_simple(c, snapshot ? "BEGIN ISOLATION LEVEL REPEATABLE READ" : "BEGIN", err);
}

static bool pg_txn_commit(void *c, bool *retry, char *err)
{
    pconn_t *p = c;
    bool ok = pg_simple(p, "COMMIT", err);
    *retry = !ok && p->transient;
    return ok;
}

static void pg_txn_abort(void *c)
{
    char err[ERRLEN];
    pg_simple(c, "ROLLBACK", err);
}

/* FNV-1a of a lock name: the advisory lock key. */
static int64_t pg_lock_key(const char *name)
{
    uint64_t h = 1469598103934665603ULL;
    for (const char *s = name; *s; s++)
        h = (h ^ (uint8_t)*s) * 1099511628211ULL;
    return (int64_t)(h >> 1);
}

/* SELECT fn(key) for the advisory lock functions. */
static bool pg_advisory(pconn_t *p, const char *fn, int64_t key, char *err)
{
    char sql[96];
    snprintf(sql, sizeof sql, "SELECT %s(%lld)", fn, (long long)key);
    return pg_simple(p, sql, err);
}

static bool pg_lock(void *c, const char *name, int client, bool *got, char *err)
{
    pconn_t *p = c;
    p->lock_key = pg_lock_key(name);
    *got = pg_advisory(p, "pg_advisory_lock", p->lock_key, err);
    return *got;
}

static bool pg_unlock(void *c, const char *name, char *err)
{
    pconn_t *p = c;
    return pg_advisory(p, "pg_advisory_unlock", p->lock_key, err);
}

static bool pg_final_state(void *c, scen_t s, int64_t *vals, int nslots, char *err)
{
    pconn_t *p = c;
    char sql[96];
    snprintf(sql, sizeof sql, "SELECT id, v FROM %s", pg_tables[s]);
    memset(vals, 0, sizeof *vals * (size_t)nslots);
    PGresult *r = PQexec(p->conn, sql);
    if (PQresultStatus(r) != PGRES_TUPLES_OK)
        return pg_fail(p, r, err);
    for (int i = 0; i < PQntuples(r); i++) {
        int id = atoi(PQgetvalue(r, i, 0));
        if (id >= 0 && id < nslots)
            vals[id] = strtoll(PQgetvalue(r, i, 1), NULL, 10);
    }
    PQclear(r);
    return true;
}

static void pg_probe(void *c, engine_t *eng)
{
}

static bool pg_last_transient(void *c)
{
    return ((pconn_t *)c)->transient;
}

const driver_t drv_pg = {
    .name = "postgres",
    .client = "libpq",
    .connect = pg_connect,
    .disconnect = pg_disconnect,
    .setup = pg_setup,
    .read = pg_read,
    .write = pg_write,
    .atomic = pg_atomic,
    .conditional = pg_conditional,
    .cas = pg_cas,
    .txn_begin = pg_txn_begin,
    .txn_commit = pg_txn_commit,
    .txn_abort = pg_txn_abort,
    .lock = pg_lock,
    .unlock = pg_unlock,
    .final_state = pg_final_state,
    .probe = pg_probe,
    .last_transient = pg_last_transient,
};
