/* connect.c: `atomdb-bench measure-server --only connect` — connection set-up
 * with SCRAM-SHA-256 (issue 14): one client opening, logging in, pinging and
 * closing connections back to back (rate and server CPU per connection), against atomdb --auth (libmongoc, which
 * sends speculativeAuthenticate in its first hello) and PostgreSQL with a
 * scram-sha-256 pg_hba rule (libpq), in the same run; atomdb without --auth
 * too, for what the login itself costs. */
#include "bench.h"

#include <libpq-fe.h>
#include <mongoc/mongoc.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double connect_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* One measured series: connections per second (one client, back to back)
 * and server CPU per connection (ms). */
typedef struct connect_rate {
    double per_s;
    double cpu_ms;
} connect_rate_t;

/* Connections to atomdb over `secs`: a new libmongoc client (so a new
 * connection, hello with speculativeAuthenticate, the SCRAM proof) per
 * ping. libmongoc derives the salted password anew for every client (15,000
 * PBKDF2 rounds, on the client's CPU), so the rate is the client's; the
 * server's cost is its CPU per connection. */
static connect_rate_t connect_atomdb(const engine_t *eng, bool login, double secs)
{
    connect_rate_t r = {-1, -1};
    char uri[300];
    snprintf(uri, sizeof uri,
             "mongodb://%s127.0.0.1:%d/?directConnection=true&serverSelectionTimeoutMS=10000%s",
             login ? BENCH_AUTH_USER ":" BENCH_AUTH_PWD "@" : "", eng->port,
             login ? "&authSource=admin&authMechanism=SCRAM-SHA-256" : "");
    long n = 0;
    double cpu0 = measure_cpu_total_s(eng->pid, false);
    double t0 = connect_now(), end = t0 + secs;
    bool ok = true;
    while (ok && connect_now() < end && !engine_interrupted) {
        mongoc_client_t *c = mongoc_client_new(uri);
        bson_t ping = BSON_INITIALIZER, reply;
        BSON_APPEND_INT32(&ping, "ping", 1);
        bson_error_t e;
        ok = c && mongoc_client_command_simple(c, "admin", &ping, NULL, &reply, &e);
        if (c)
            bson_destroy(&reply);
        bson_destroy(&ping);
        mongoc_client_destroy(c);
        if (!ok)
            fprintf(stderr, "atomdb-bench: connect: %s\n", c ? e.message : "bad uri");
        n++;
    }
    double t = connect_now() - t0;
    if (ok && n > 0) {
        r.per_s = n / t;
        r.cpu_ms = (measure_cpu_total_s(eng->pid, false) - cpu0) * 1000.0 / n;
    }
    return r;
}

/* Runs one SQL statement on `c`; false (and a message) on error. */
static bool connect_sql(PGconn *c, const char *sql)
{
    PGresult *r = PQexec(c, sql);
    bool ok = PQresultStatus(r) == PGRES_COMMAND_OK || PQresultStatus(r) == PGRES_TUPLES_OK;
    if (!ok)
        fprintf(stderr, "atomdb-bench: %s: %s", sql, PQerrorMessage(c));
    PQclear(r);
    return ok;
}

/* Makes a scram-sha-256 login role and a pg_hba rule for it. */
static bool connect_pg_setup(const engine_t *e)
{
    char info[200], hba[400];
    snprintf(info, sizeof info, "host=127.0.0.1 port=%d user=postgres dbname=postgres", e->port);
    PGconn *c = NULL;
    for (int i = 0; i < 100; i++) { /* "the database system is starting up" */
        c = PQconnectdb(info);
        if (PQstatus(c) == CONNECTION_OK)
            break;
        PQfinish(c);
        c = NULL;
        usleep(100000);
    }
    if (!c) {
        fprintf(stderr, "atomdb-bench: cannot connect to PostgreSQL as postgres\n");
        return false;
    }
    bool ok =
              connect_sql(c, "SET password_encryption = 'scram-sha-256'") &&
              connect_sql(c, "CREATE ROLE benchscram LOGIN PASSWORD '" BENCH_AUTH_PWD "'");
    snprintf(hba, sizeof hba, "%s/pg_hba.conf", e->pgdata);
    FILE *f = ok ? fopen(hba, "r") : NULL;
    char old[65536];
    size_t n = f ? fread(old, 1, sizeof old - 1, f) : 0;
    if (f)
        fclose(f);
    old[n] = 0;
    f = ok ? fopen(hba, "w") : NULL;
    if (f) {
        /* first match wins: the scram rule goes before initdb's trust rules */
        fprintf(f, "host all benchscram 127.0.0.1/32 scram-sha-256\n%s", old);
        fclose(f);
    }
    ok = ok && f && connect_sql(c, "SELECT pg_reload_conf()");
    PQfinish(c);
    usleep(300000); /* the postmaster re-reads pg_hba.conf on SIGHUP */
    return ok;
}

/* Connections to PostgreSQL as the scram role (libpq derives the salted
 * password on every connection: PostgreSQL's clients keep nothing). */
static connect_rate_t connect_pg(const engine_t *e, double secs)
{
    connect_rate_t r = {-1, -1};
    char info[300];
    snprintf(info, sizeof info,
             "host=127.0.0.1 port=%d user=benchscram password=%s dbname=postgres "
             "sslmode=disable",
             e->port, BENCH_AUTH_PWD);
    long n = 0;
    double cpu0 = measure_cpu_total_s(e->pid, true);
    double t0 = connect_now(), end = t0 + secs;
    while (connect_now() < end && !engine_interrupted) {
        PGconn *c = PQconnectdb(info);
        bool ok = PQstatus(c) == CONNECTION_OK && PQconnectionUsedPassword(c) &&
                  connect_sql(c, "SELECT 1");
        if (!ok)
            fprintf(stderr, "atomdb-bench: PostgreSQL scram login: %s", PQerrorMessage(c));
        PQfinish(c);
        if (!ok)
            return r;
        n++;
    }
    double t = connect_now() - t0;
    usleep(200000); /* the last backends exit and are reaped */
    r.per_s = n / t;
    r.cpu_ms = (measure_cpu_total_s(e->pid, true) - cpu0) * 1000.0 / n;
    return r;
}

void measure_connect(const char *atomdb, double secs)
{
    char err[512];
    engine_t e;
    eng_conf_t conf = {ENG_ATOMDB, "none", 2};
    connect_rate_t rate[3] = {{-1, -1}, {-1, -1}, {-1, -1}};
    bool was = bench_auth;
    bench_auth = true;
    if (engine_start(&e, &conf, atomdb, err, sizeof err)) {
        rate[0] = connect_atomdb(&e, true, secs);
        engine_stop(&e, false);
    } else {
        fprintf(stderr, "atomdb-bench: atomdb --auth: %s\n", err);
    }
    bench_auth = false;
    if (engine_start(&e, &conf, atomdb, err, sizeof err)) {
        rate[1] = connect_atomdb(&e, false, secs);
        engine_stop(&e, false);
    }
    bench_auth = was;
    eng_conf_t pg = {ENG_POSTGRES, "sync_off", 0};
    if (engine_start(&e, &pg, atomdb, err, sizeof err)) {
        if (connect_pg_setup(&e))
            rate[2] = connect_pg(&e, secs);
        engine_stop(&e, false);
    } else {
        fprintf(stderr, "atomdb-bench: PostgreSQL: %s\n", err);
    }
    printf("\nConnection set-up, one client, connect + login + ping/SELECT 1, %.1f s each:\n",
           secs);
    static const char *const names[] = {"atomdb --auth, SCRAM-SHA-256 (speculative)",
                                        "atomdb without --auth",
                                        "PostgreSQL, scram-sha-256 (pg_hba)"};
    for (int i = 0; i < 3; i++)
        printf("  %-44s %8.0f connections/s  server CPU %6.2f ms/connection\n", names[i],
               rate[i].per_s, rate[i].cpu_ms);
}
