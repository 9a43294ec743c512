/* geo.c: `atomdb-bench geo` — issue 20's geospatial target. Loads N
 * points (uniform over the contiguous United States) as GeoJSON under a
 * 2dsphere index and as legacy pairs under a 2d index, then times `$near`
 * returning the nearest 20 on each index (growing caps / circles of cells)
 * against the same query forced to a full collection scan (hint
 * {$natural: 1}: every document measured and sorted) from a set of query
 * points, and checks both return the same documents in the same order.
 * Target: the index at least 50x faster (median ms per query). */
#include "bench.h"

#include <mongoc/mongoc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define GEO_QUERIES 15
#define GEO_NEAREST 20

static double geo_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static double geo_uniform(double lo, double hi)
{
    return lo + (hi - lo) * ((double)rand() / RAND_MAX);
}

/* Runs the $near of `filter` with `opts` on coll, writing the _ids it
 * returned into ids (at most GEO_NEAREST); *ms the round trip. The count,
 * -1 on error. */
static int geo_run(mongoc_collection_t *coll, const bson_t *filter, const bson_t *opts,
                   int32_t *ids, double *ms)
{
    double t0 = geo_now_ms();
    mongoc_cursor_t *cur = mongoc_collection_find_with_opts(coll, filter, opts, NULL);
    const bson_t *doc;
    int n = 0;
    while (mongoc_cursor_next(cur, &doc)) {
        bson_iter_t it;
        if (n < GEO_NEAREST && bson_iter_init_find(&it, doc, "_id"))
            ids[n] = bson_iter_int32(&it);
        n++;
    }
    bson_error_t e;
    if (mongoc_cursor_error(cur, &e)) {
        fprintf(stderr, "geo bench: %s\n", e.message);
        n = -1;
    }
    mongoc_cursor_destroy(cur);
    *ms = geo_now_ms() - t0;
    return n;
}

/* One row: GEO_QUERIES $near queries on the 2dsphere index (`flat`
 * false: GeoJSON points) or the 2d index (legacy pairs, flat distances),
 * each against the full scan; medians into *mi, *ms. False when the two
 * disagree. */
static bool geo_row(mongoc_collection_t *coll, bool flat, double *mi, double *ms)
{
    double idx_ms[GEO_QUERIES], scan_ms[GEO_QUERIES];
    bool agree = true;
    bson_t *iopts = BCON_NEW("limit", BCON_INT64(GEO_NEAREST));
    bson_t *sopts =
        BCON_NEW("limit", BCON_INT64(GEO_NEAREST), "hint", "{", "$natural", BCON_INT32(1), "}");
    int q = 0;
    for (; q < GEO_QUERIES && !engine_interrupted; q++) {
        double lng = geo_uniform(-124.5, -67.0), lat = geo_uniform(25.0, 49.0);
        bson_t *f =
            flat ? BCON_NEW("flat", "{", "$near", "[", BCON_DOUBLE(lng), BCON_DOUBLE(lat), "]", "}")
                 : BCON_NEW("loc", "{", "$near", "{", "$geometry", "{", "type", BCON_UTF8("Point"),
                            "coordinates", "[", BCON_DOUBLE(lng), BCON_DOUBLE(lat), "]", "}", "}",
                            "}");
        int32_t a_ids[GEO_NEAREST], b_ids[GEO_NEAREST];
        int a = geo_run(coll, f, iopts, a_ids, &idx_ms[q]);
        int b = geo_run(coll, f, sopts, b_ids, &scan_ms[q]);
        bson_destroy(f);
        if (a != GEO_NEAREST || b != GEO_NEAREST || memcmp(a_ids, b_ids, sizeof a_ids) != 0) {
            printf("  query (%.3f, %.3f): the index and the scan disagree -> MISMATCH\n", lng, lat);
            agree = false;
        }
    }
    bson_destroy(iopts);
    bson_destroy(sopts);
    if (q == 0)
        return false;
    qsort(idx_ms, (size_t)q, sizeof idx_ms[0], bench_cmp_double);
    qsort(scan_ms, (size_t)q, sizeof scan_ms[0], bench_cmp_double);
    *mi = idx_ms[q / 2];
    *ms = scan_ms[q / 2];
    return agree;
}

int geo_bench(const char *atomdb, int npoints)
{
    eng_conf_t conf = {ENG_ATOMDB, "write", 0};
    engine_t eng;
    char err[256];
    int rc = 1;
    if (!engine_start(&eng, &conf, atomdb, err, sizeof err)) {
        fprintf(stderr, "geo bench: start: %s\n", err);
        return 1;
    }
    char uri[160];
    snprintf(uri, sizeof uri,
             "mongodb://127.0.0.1:%d/?directConnection=true&serverSelectionTimeoutMS=30000",
             eng.port);
    mongoc_client_t *c = mongoc_client_new(uri);
    mongoc_collection_t *coll = mongoc_client_get_collection(c, "bench", "geo");
    bson_error_t e;
    srand(20);
    printf("atomdb-bench geo: atomdb = %s, %d points, $near returning the nearest %d\n", atomdb,
           npoints, GEO_NEAREST);
    bson_t *cmd =
        BCON_NEW("createIndexes", BCON_UTF8("geo"), "indexes", "[", "{", "key", "{", "loc",
                 BCON_UTF8("2dsphere"), "}", "name", BCON_UTF8("loc_2dsphere"), "}", "{", "key",
                 "{", "flat", BCON_UTF8("2d"), "}", "name", BCON_UTF8("flat_2d"), "}", "]");
    bool ok = mongoc_collection_command_simple(coll, cmd, NULL, NULL, &e);
    bson_destroy(cmd);
    if (!ok) {
        fprintf(stderr, "geo bench: createIndexes: %s\n", e.message);
        goto cleanup;
    }
    /* load in batches, the index kept as they go */
    double t0 = geo_now_ms();
    for (int i = 0; i < npoints && !engine_interrupted;) {
        bson_t **docs = bson_malloc(1000 * sizeof *docs);
        int n = 0;
        for (; n < 1000 && i < npoints; n++, i++) {
            double lng = geo_uniform(-124.5, -67.0), lat = geo_uniform(25.0, 49.0);
            docs[n] = BCON_NEW("_id", BCON_INT32(i), "loc", "{", "type", BCON_UTF8("Point"),
                               "coordinates", "[", BCON_DOUBLE(lng), BCON_DOUBLE(lat), "]", "}",
                               "flat", "[", BCON_DOUBLE(lng), BCON_DOUBLE(lat), "]");
        }
        ok = mongoc_collection_insert_many(coll, (const bson_t **)docs, (size_t)n, NULL, NULL,
                                           &e);
        for (int k = 0; k < n; k++)
            bson_destroy(docs[k]);
        bson_free(docs);
        if (!ok) {
            fprintf(stderr, "geo bench: insert: %s\n", e.message);
            goto cleanup;
        }
    }
    printf("  load with the 2dsphere and 2d indexes %.0f ms\n", geo_now_ms() - t0);
    double mi, ms, fi, fs;
    bool agree = geo_row(coll, false, &mi, &ms);
    bool fagree = geo_row(coll, true, &fi, &fs);
    double ratio = mi > 0 ? ms / mi : 0, fratio = fi > 0 ? fs / fi : 0;
    printf("  %d query points per row, the same %d documents in the same order from both: %s\n",
           GEO_QUERIES, GEO_NEAREST, agree && fagree ? "yes" : "NO");
    printf("  $near on 2dsphere (IXSCAN)      median %8.3f ms/query\n", mi);
    printf("  full scan ($natural hint)       median %8.3f ms/query\n", ms);
    printf("  index is %.0fx faster (target >= 50x) -> %s\n", ratio,
           ratio >= 50 && agree ? "met" : "NOT MET");
    printf("  legacy $near on 2d (GEO_NEAR_2D) median %8.3f ms/query\n", fi);
    printf("  full scan ($natural hint)       median %8.3f ms/query\n", fs);
    printf("  2d index is %.0fx faster (target >= 50x) -> %s\n", fratio,
           fratio >= 50 && fagree ? "met" : "NOT MET");
    rc = ratio >= 50 && agree && fratio >= 50 && fagree ? 0 : 1;
cleanup:
    mongoc_collection_destroy(coll);
    mongoc_client_destroy(c);
    engine_stop(&eng, false);
    return rc;
}
