/* joins.c: `atomdb-bench joins` (issue 19) — a $lookup of N orders to M
 * items by _id on atomdb beside the same LEFT JOIN on PostgreSQL (primary
 * key on items.id), every joined row fetched by the client; reports the
 * median, min and max milliseconds per query over --repeat runs. */
#include "bench.h"

#include <libpq-fe.h>
#include <mongoc/mongoc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define JOINS_MAX_REPEAT 1000

/* Loads items {_id, name, price} and orders {_id, item: i % items, qty}. */
static bool joins_load_atomdb(mongoc_client_t *c, long orders, long items, char *err)
{
    bson_error_t be;
    bool ok = true;
    const char *names[2] = {"items", "orders"};
    long counts[2] = {items, orders};
    for (int t = 0; t < 2 && ok; t++) {
        mongoc_collection_t *coll = mongoc_client_get_collection(c, "bench", names[t]);
        mongoc_collection_drop(coll, NULL);
        mongoc_bulk_operation_t *b = mongoc_collection_create_bulk_operation_with_opts(coll, NULL);
        for (long i = 0; i < counts[t]; i++) {
            bson_t d = BSON_INITIALIZER;
            char name[32];
            BSON_APPEND_INT64(&d, "_id", i);
            if (t == 0) {
                snprintf(name, sizeof name, "item %ld", i);
                BSON_APPEND_UTF8(&d, "name", name);
                BSON_APPEND_INT32(&d, "price", (int32_t)(i % 97 + 1));
            } else {
                BSON_APPEND_INT64(&d, "item", i % items);
                BSON_APPEND_INT32(&d, "qty", (int32_t)(i % 5 + 1));
            }
            mongoc_bulk_operation_insert(b, &d);
            bson_destroy(&d);
        }
        ok = mongoc_bulk_operation_execute(b, NULL, &be) != 0;
        mongoc_bulk_operation_destroy(b);
        mongoc_collection_destroy(coll);
    }
    if (!ok)
        snprintf(err, ERRLEN, "atomdb load: %s", be.message);
    return ok;
}

/* One $lookup of every order to its item; the rows fetched go to *rows. */
static bool joins_query_atomdb(mongoc_client_t *c, long *rows, char *err)
{
    mongoc_collection_t *coll = mongoc_client_get_collection(c, "bench", "orders");
    bson_t *pipeline = BCON_NEW("pipeline", "[", "{", "$lookup", "{", "from", BCON_UTF8("items"),
                                "localField", BCON_UTF8("item"), "foreignField", BCON_UTF8("_id"),
                                "as", BCON_UTF8("item_doc"), "}", "}", "]");
    mongoc_cursor_t *cur =
        mongoc_collection_aggregate(coll, MONGOC_QUERY_NONE, pipeline, NULL, NULL);
    const bson_t *doc;
    bson_error_t be;
    *rows = 0;
    while (mongoc_cursor_next(cur, &doc)) {
        bson_iter_t it;
        if (bson_iter_init_find(&it, doc, "item_doc") && BSON_ITER_HOLDS_ARRAY(&it))
            (*rows)++;
    }
    bool ok = !mongoc_cursor_error(cur, &be);
    if (!ok)
        snprintf(err, ERRLEN, "atomdb $lookup: %s", be.message);
    mongoc_cursor_destroy(cur);
    bson_destroy(pipeline);
    mongoc_collection_destroy(coll);
    return ok;
}

static bool joins_load_pg(PGconn *pg, long orders, long items, char *err)
{
    char sql[800];
    snprintf(
        sql, sizeof sql,
        "DROP TABLE IF EXISTS orders; DROP TABLE IF EXISTS items; "
        "CREATE TABLE items (id bigint PRIMARY KEY, name text, price int); "
        "CREATE TABLE orders (id bigint PRIMARY KEY, item bigint, qty int); "
        "INSERT INTO items SELECT i, 'item ' || i, i %% 97 + 1 FROM generate_series(0, %ld) i; "
        "INSERT INTO orders SELECT i, i %% %ld, i %% 5 + 1 FROM generate_series(0, %ld) i; "
        "ANALYZE items; ANALYZE orders",
        items - 1, items, orders - 1);
    PGresult *r = PQexec(pg, sql);
    bool ok = PQresultStatus(r) == PGRES_COMMAND_OK;
    if (!ok)
        snprintf(err, ERRLEN, "postgres load: %s", PQerrorMessage(pg));
    PQclear(r);
    return ok;
}

static bool joins_query_pg(PGconn *pg, long *rows, char *err)
{
    PGresult *r = PQexec(pg, "SELECT o.id, o.item, o.qty, i.id, i.name, i.price FROM orders o "
                             "LEFT JOIN items i ON i.id = o.item");
    bool ok = PQresultStatus(r) == PGRES_TUPLES_OK;
    if (ok)
        *rows = PQntuples(r);
    else
        snprintf(err, ERRLEN, "postgres join: %s", PQerrorMessage(pg));
    PQclear(r);
    return ok;
}

int joins_main(const char *atomdb, long orders, long items, int repeat, bool atomdb_on, bool pg_on)
{
    if (repeat < 1 || repeat > JOINS_MAX_REPEAT || orders < 1 || items < 1) {
        fprintf(stderr, "atomdb-bench joins: --repeat 1..%d, --orders and --items >= 1\n",
                JOINS_MAX_REPEAT);
        return 2;
    }
    printf("joins: %ld orders joined to %ld items by _id / primary key, every row fetched; "
           "ms per query over %d runs (after 2 warm-ups)\n\n",
           orders, items, repeat);
    printf("%-10s %-44s %8s %8s %8s %7s\n", "engine", "query", "median", "min", "max", "rows");
    eng_conf_t confs[] = {{ENG_ATOMDB, "write", 0}, {ENG_POSTGRES, "sync_off", 0}};
    int rc = 0;
    for (int k = 0; k < 2; k++) {
        bool is_pg = confs[k].kind == ENG_POSTGRES;
        if ((is_pg && !pg_on) || (!is_pg && !atomdb_on))
            continue;
        engine_t e;
        char err[ERRLEN] = "";
        mongoc_client_t *c = NULL;
        PGconn *pg = NULL;
        bool ok = engine_start(&e, &confs[k], atomdb, err, sizeof err);
        if (ok && is_pg) {
            ok = (pg = pg_connect_side(&e, err)) && joins_load_pg(pg, orders, items, err);
        } else if (ok) {
            char uri[200];
            snprintf(uri, sizeof uri,
                     "mongodb://127.0.0.1:%d/?directConnection=true&socketTimeoutMS=600000",
                     e.port);
            c = mongoc_client_new(uri);
            ok = c && joins_load_atomdb(c, orders, items, err);
        }
        double ms[JOINS_MAX_REPEAT];
        long rows = 0;
        for (int r = -2; ok && r < repeat && !engine_interrupted; r++) {
            int64_t t0 = bench_now_ns();
            ok = is_pg ? joins_query_pg(pg, &rows, err) : joins_query_atomdb(c, &rows, err);
            if (r >= 0)
                ms[r] = (double)(bench_now_ns() - t0) / 1e6;
        }
        if (ok && rows != orders) {
            snprintf(err, ERRLEN, "%ld rows joined, expected %ld", rows, orders);
            ok = false;
        }
        const char *q = is_pg ? "SELECT ... FROM orders LEFT JOIN items"
                              : "aggregate $lookup "
                                "(items._id index)";
        if (ok) {
            qsort(ms, (size_t)repeat, sizeof *ms, bench_cmp_double);
            printf("%-10s %-44s %8.2f %8.2f %8.2f %7ld\n", eng_name(confs[k].kind), q,
                   ms[repeat / 2], ms[0], ms[repeat - 1], rows);
        } else {
            printf("%-10s %-44s FAILED: %s\n", eng_name(confs[k].kind), q, err);
            rc = 1;
        }
        if (pg)
            PQfinish(pg);
        if (c)
            mongoc_client_destroy(c);
        engine_stop(&e, false);
    }
    return rc;
}
