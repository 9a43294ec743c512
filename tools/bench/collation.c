/* collation.c: `atomdb-bench collation` (issue 19) — a case-insensitive find
 * through a strength-2 "en" collated index on N documents on atomdb beside
 * PostgreSQL's lower(email) expression index; each query looks up one value
 * in a different case; reports median, min and max ms per query. */
#include "bench.h"

#include <libpq-fe.h>
#include <mongoc/mongoc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define COLL_MAX_QUERIES 100000

/* The stored address of document i, and the same in upper case. */
static void coll_email(long i, bool upper, char *out, size_t size)
{
    snprintf(out, size, upper ? "USER%ld@EXAMPLE.COM" : "user%ld@example.com", i);
}

/* Loads people {_id: i, email, n} and builds the collated index. */
static bool coll_load_atomdb(mongoc_client_t *c, long docs, char *err)
{
    bson_error_t be;
    mongoc_collection_t *coll = mongoc_client_get_collection(c, "bench", "people");
    mongoc_collection_drop(coll, NULL);
    mongoc_bulk_operation_t *b = mongoc_collection_create_bulk_operation_with_opts(coll, NULL);
    for (long i = 0; i < docs; i++) {
        bson_t d = BSON_INITIALIZER;
        char email[64];
        coll_email(i, false, email, sizeof email);
        BSON_APPEND_INT64(&d, "_id", i);
        BSON_APPEND_UTF8(&d, "email", email);
        BSON_APPEND_INT32(&d, "n", (int32_t)(i % 100));
        mongoc_bulk_operation_insert(b, &d);
        bson_destroy(&d);
    }
    bool ok = mongoc_bulk_operation_execute(b, NULL, &be) != 0;
    mongoc_bulk_operation_destroy(b);
    if (ok) {
        bson_t *cmd = BCON_NEW("createIndexes", "people", "indexes", "[", "{", "key", "{", "email",
                               BCON_INT32(1), "}", "name", "email_ci", "collation", "{", "locale",
                               "en", "strength", BCON_INT32(2), "}", "}", "]");
        ok = mongoc_collection_write_command_with_opts(coll, cmd, NULL, NULL, &be);
        bson_destroy(cmd);
    }
    if (!ok)
        snprintf(err, ERRLEN, "atomdb load: %s", be.message);
    mongoc_collection_destroy(coll);
    return ok;
}

/* True when explain of the collated find names the email_ci index in an
 * IXSCAN of its winning plan. */
static bool coll_explain_atomdb(mongoc_client_t *c, char *err)
{
    bson_error_t be;
    bson_t reply;
    bson_t *cmd = BCON_NEW("explain", "{", "find", "people", "filter", "{", "email",
                           "USER7@EXAMPLE.COM", "}", "collation", "{", "locale", "en", "strength",
                           BCON_INT32(2), "}", "}", "verbosity", "queryPlanner");
    bool ok = mongoc_client_command_simple(c, "bench", cmd, NULL, &reply, &be);
    bson_destroy(cmd);
    if (!ok) {
        snprintf(err, ERRLEN, "atomdb explain: %s", be.message);
        bson_destroy(&reply);
        return false;
    }
    bson_iter_t it;
    char *json = NULL;
    if (bson_iter_init(&it, &reply) &&
        bson_iter_find_descendant(&it, "queryPlanner.winningPlan", &it) &&
        BSON_ITER_HOLDS_DOCUMENT(&it)) {
        uint32_t len;
        const uint8_t *data;
        bson_t plan;
        bson_iter_document(&it, &len, &data);
        if (bson_init_static(&plan, data, len))
            json = bson_as_relaxed_extended_json(&plan, NULL);
    }
    ok = json && strstr(json, "IXSCAN") && strstr(json, "email_ci");
    if (!ok)
        snprintf(err, ERRLEN, "explain does not show an IXSCAN of email_ci: %.300s",
                 json ? json : "(no winningPlan)");
    else
        printf("atomdb explain: winningPlan %s\n", json);
    bson_free(json);
    bson_destroy(&reply);
    return ok;
}

/* One find by the upper-case address of document i; *rows gets the count. */
static bool coll_query_atomdb(mongoc_client_t *c, long i, long *rows, char *err)
{
    char email[64];
    coll_email(i, true, email, sizeof email);
    mongoc_collection_t *coll = mongoc_client_get_collection(c, "bench", "people");
    bson_t *filter = BCON_NEW("email", BCON_UTF8(email));
    bson_t *opts = BCON_NEW("collation", "{", "locale", "en", "strength", BCON_INT32(2), "}");
    mongoc_cursor_t *cur = mongoc_collection_find_with_opts(coll, filter, opts, NULL);
    const bson_t *doc;
    bson_error_t be;
    *rows = 0;
    while (mongoc_cursor_next(cur, &doc))
        (*rows)++;
    bool ok = !mongoc_cursor_error(cur, &be);
    if (!ok)
        snprintf(err, ERRLEN, "atomdb find: %s", be.message);
    mongoc_cursor_destroy(cur);
    bson_destroy(opts);
    bson_destroy(filter);
    mongoc_collection_destroy(coll);
    return ok;
}

/* people(id, email, n) with an index on lower(email); checks that EXPLAIN
 * of the query uses it. */
static bool coll_load_pg(PGconn *pg, long docs, char *err)
{
    char sql[800];
    snprintf(sql, sizeof sql,
             "DROP TABLE IF EXISTS people; "
             "CREATE TABLE people (id bigint PRIMARY KEY, email text, n int); "
             "INSERT INTO people SELECT i, 'user' || i || '@example.com', i %% 100 "
             "FROM generate_series(0, %ld) i; "
             "CREATE INDEX people_email_ci ON people (lower(email)); ANALYZE people",
             docs - 1);
    PGresult *r = PQexec(pg, sql);
    bool ok = PQresultStatus(r) == PGRES_COMMAND_OK;
    if (!ok)
        snprintf(err, ERRLEN, "postgres load: %s", PQerrorMessage(pg));
    PQclear(r);
    if (!ok)
        return false;
    r = PQexec(pg, "EXPLAIN SELECT id, email, n FROM people "
                   "WHERE lower(email) = lower('USER7@EXAMPLE.COM')");
    ok = PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) > 0 &&
         strstr(PQgetvalue(r, 0, 0), "people_email_ci");
    if (ok)
        printf("postgres explain: %s\n", PQgetvalue(r, 0, 0));
    else
        snprintf(err, ERRLEN, "postgres EXPLAIN does not use people_email_ci");
    PQclear(r);
    return ok;
}

static bool coll_query_pg(PGconn *pg, long i, long *rows, char *err)
{
    char email[64];
    coll_email(i, true, email, sizeof email);
    const char *params[1] = {email};
    PGresult *r = PQexecParams(pg, "SELECT id, email, n FROM people WHERE lower(email) = lower($1)",
                               1, NULL, params, NULL, NULL, 0);
    bool ok = PQresultStatus(r) == PGRES_TUPLES_OK;
    if (ok)
        *rows = PQntuples(r);
    else
        snprintf(err, ERRLEN, "postgres select: %s", PQerrorMessage(pg));
    PQclear(r);
    return ok;
}

int collation_main(const char *atomdb, long docs, int queries, bool atomdb_on, bool pg_on)
{
    if (queries < 1 || queries > COLL_MAX_QUERIES || docs < 1) {
        fprintf(stderr, "atomdb-bench collation: --queries 1..%d, --docs >= 1\n", COLL_MAX_QUERIES);
        return 2;
    }
    printf("collation: case-insensitive find by email among %ld documents, one document "
           "per query; ms per query over %d queries (after 100 warm-ups)\n\n",
           docs, queries);
    eng_conf_t confs[] = {{ENG_ATOMDB, "write", 0}, {ENG_POSTGRES, "sync_off", 0}};
    double *ms = calloc((size_t)queries, sizeof *ms);
    char lines[2][200] = {"", ""};
    int rc = 0;
    for (int k = 0; k < 2 && ms; k++) {
        bool is_pg = confs[k].kind == ENG_POSTGRES;
        if ((is_pg && !pg_on) || (!is_pg && !atomdb_on))
            continue;
        engine_t e;
        char err[ERRLEN] = "";
        mongoc_client_t *c = NULL;
        PGconn *pg = NULL;
        bool ok = engine_start(&e, &confs[k], atomdb, err, sizeof err);
        if (ok && is_pg) {
            ok = (pg = pg_connect_side(&e, err)) && coll_load_pg(pg, docs, err);
        } else if (ok) {
            char uri[200];
            snprintf(uri, sizeof uri,
                     "mongodb://127.0.0.1:%d/?directConnection=true&socketTimeoutMS=600000",
                     e.port);
            c = mongoc_client_new(uri);
            ok = c && coll_load_atomdb(c, docs, err) && coll_explain_atomdb(c, err);
        }
        for (int q = -100; ok && q < queries && !engine_interrupted; q++) {
            long i = (long)(((unsigned long)(q + 100) * 2654435761u) % (unsigned long)docs);
            long rows = 0;
            int64_t t0 = bench_now_ns();
            ok = is_pg ? coll_query_pg(pg, i, &rows, err) : coll_query_atomdb(c, i, &rows, err);
            if (q >= 0)
                ms[q] = (double)(bench_now_ns() - t0) / 1e6;
            if (ok && rows != 1) {
                snprintf(err, ERRLEN, "document %ld: %ld rows, expected 1", i, rows);
                ok = false;
            }
        }
        const char *what = is_pg ? "lower(email) = lower($1), expression index"
                                 : "find, collation en/2, collated index";
        if (ok) {
            qsort(ms, (size_t)queries, sizeof *ms, bench_cmp_double);
            snprintf(lines[k], sizeof lines[k], "%-10s %-44s %8.3f %8.3f %8.3f",
                     eng_name(confs[k].kind), what, ms[queries / 2], ms[0], ms[queries - 1]);
        } else {
            snprintf(lines[k], sizeof lines[k], "%-10s %-44s FAILED: %s", eng_name(confs[k].kind),
                     what, err);
            rc = 1;
        }
        if (pg)
            PQfinish(pg);
        if (c)
            mongoc_client_destroy(c);
        engine_stop(&e, false);
    }
    free(ms);
    printf("\n%-10s %-44s %8s %8s %8s\n", "engine", "query", "median", "min", "max");
    for (int k = 0; k < 2; k++)
        if (lines[k][0])
            printf("%s\n", lines[k]);
    return rc;
}
