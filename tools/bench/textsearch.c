/* textsearch.c: `atomdb-bench text` — issue 20's text search target. Loads
 * N short documents (eight words each from a 3,000-word vocabulary), builds
 * a text index, then times a one-word $text search (TEXT_MATCH on the
 * index) against the same search as a full collection scan ($regex on the
 * word, COLLSCAN) for a set of query words, and checks both find the same
 * documents. Target: the index at least 50x faster (median ms per query). */
#include "bench.h"

#include <mongoc/mongoc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define TEXT_VOCAB 3000
#define TEXT_WORDS_PER_DOC 8
#define TEXT_QUERIES 15

static double text_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* The i-th vocabulary word: three consonant-vowel syllables plus a final
 * consonant ("bakotun"), so no English stem or stop word changes it and
 * $regex and $text agree on which documents hold it. */
static void text_word(int i, char *out)
{
    static const char cons[] = "bdfgklmnprtvz";
    static const char vow[] = "aiou";
    int n = i;
    char *p = out;
    for (int s = 0; s < 3; s++) {
        *p++ = cons[n % 13];
        n /= 13;
        *p++ = vow[n % 4];
        n /= 4;
    }
    *p++ = cons[(i * 7) % 13];
    *p = '\0';
}

/* Runs `filter` on coll and returns how many documents came back; *ms the
 * round trip. -1 on error. */
static int64_t text_run(mongoc_collection_t *coll, const bson_t *filter, double *ms)
{
    double t0 = text_now_ms();
    mongoc_cursor_t *cur = mongoc_collection_find_with_opts(coll, filter, NULL, NULL);
    const bson_t *doc;
    int64_t n = 0;
    while (mongoc_cursor_next(cur, &doc))
        n++;
    bson_error_t e;
    if (mongoc_cursor_error(cur, &e)) {
        fprintf(stderr, "text bench: %s\n", e.message);
        n = -1;
    }
    mongoc_cursor_destroy(cur);
    *ms = text_now_ms() - t0;
    return n;
}

int text_bench(const char *atomdb, int ndocs)
{
    eng_conf_t conf = {ENG_ATOMDB, "write", 0};
    engine_t eng;
    char err[256];
    int rc = 1;
    if (!engine_start(&eng, &conf, atomdb, err, sizeof err)) {
        fprintf(stderr, "text bench: start: %s\n", err);
        return 1;
    }
    char uri[160];
    snprintf(uri, sizeof uri,
             "mongodb://127.0.0.1:%d/?directConnection=true&serverSelectionTimeoutMS=30000",
             eng.port);
    mongoc_client_t *c = mongoc_client_new(uri);
    mongoc_collection_t *coll = mongoc_client_get_collection(c, "bench", "text");
    bson_error_t e;
    srand(20);
    printf("atomdb-bench text: atomdb = %s, %d documents of %d words (vocabulary %d)\n", atomdb,
           ndocs, TEXT_WORDS_PER_DOC, TEXT_VOCAB);
    /* load in batches */
    double t0 = text_now_ms();
    for (int i = 0; i < ndocs && !engine_interrupted;) {
        bson_t **docs = bson_malloc(1000 * sizeof *docs);
        int n = 0;
        for (; n < 1000 && i < ndocs; n++, i++) {
            char body[TEXT_WORDS_PER_DOC * 12];
            body[0] = '\0';
            for (int w = 0; w < TEXT_WORDS_PER_DOC; w++) {
                char word[12];
                text_word(rand() % TEXT_VOCAB, word);
                strcat(body, w ? " " : "");
                strcat(body, word);
            }
            docs[n] = BCON_NEW("_id", BCON_INT32(i), "body", BCON_UTF8(body));
        }
        bool ok = mongoc_collection_insert_many(coll, (const bson_t **)docs, (size_t)n, NULL,
                                                NULL, &e);
        for (int k = 0; k < n; k++)
            bson_destroy(docs[k]);
        bson_free(docs);
        if (!ok) {
            fprintf(stderr, "text bench: insert: %s\n", e.message);
            goto cleanup;
        }
    }
    double load_ms = text_now_ms() - t0;
    t0 = text_now_ms();
    bson_t *cmd = BCON_NEW("createIndexes", BCON_UTF8("text"), "indexes", "[", "{", "key", "{",
                           "body", BCON_UTF8("text"), "}", "name", BCON_UTF8("body_text"), "}",
                           "]");
    bool ok = mongoc_collection_command_simple(coll, cmd, NULL, NULL, &e);
    bson_destroy(cmd);
    if (!ok) {
        fprintf(stderr, "text bench: createIndexes: %s\n", e.message);
        goto cleanup;
    }
    printf("  load %.0f ms, text index build %.0f ms\n", load_ms, text_now_ms() - t0);
    double idx_ms[TEXT_QUERIES], scan_ms[TEXT_QUERIES];
    int64_t hits = 0;
    bool agree = true;
    for (int q = 0; q < TEXT_QUERIES && !engine_interrupted; q++) {
        char word[12], pattern[40];
        text_word((q * 197) % TEXT_VOCAB, word);
        snprintf(pattern, sizeof pattern, "(^| )%s( |$)", word);
        bson_t *tf = BCON_NEW("$text", "{", "$search", BCON_UTF8(word), "}");
        bson_t *rf = BCON_NEW("body", "{", "$regex", BCON_UTF8(pattern), "}");
        int64_t a = text_run(coll, tf, &idx_ms[q]);
        int64_t b = text_run(coll, rf, &scan_ms[q]);
        bson_destroy(tf);
        bson_destroy(rf);
        if (a < 0 || b < 0 || a != b) {
            printf("  query '%s': $text found %lld, the scan %lld -> MISMATCH\n", word,
                   (long long)a, (long long)b);
            agree = false;
        }
        hits += a;
    }
    qsort(idx_ms, TEXT_QUERIES, sizeof idx_ms[0], bench_cmp_double);
    qsort(scan_ms, TEXT_QUERIES, sizeof scan_ms[0], bench_cmp_double);
    double mi = idx_ms[TEXT_QUERIES / 2], ms = scan_ms[TEXT_QUERIES / 2];
    double ratio = mi > 0 ? ms / mi : 0;
    printf("  %d one-word queries, %.1f hits each on average\n", TEXT_QUERIES,
           (double)hits / TEXT_QUERIES);
    printf("  $text (TEXT_MATCH)      median %8.3f ms/query\n", mi);
    printf("  full scan ($regex)      median %8.3f ms/query\n", ms);
    printf("  index is %.0fx faster (target >= 50x) -> %s\n", ratio,
           ratio >= 50 && agree ? "met" : "NOT MET");
    rc = ratio >= 50 && agree ? 0 : 1;
cleanup:
    mongoc_collection_destroy(coll);
    mongoc_client_destroy(c);
    engine_stop(&eng, false);
    return rc;
}
