/* test_path: dotted paths — plain lookup through documents and array
 * indexes (path_get), query-style traversal (path_visit) and the matcher's
 * walk with missing values and array positions (path_walk). */
#include <string.h>

#include "doc/path.h"
#include "unit.h"

static bson_t *doc_json(const char *json)
{
    bson_error_t e;
    bson_t *d = bson_new_from_json((const uint8_t *)json, -1, &e);
    if (!d) {
        fprintf(stderr, "bad JSON in test: %s\n", e.message);
        exit(2);
    }
    return d;
}

static bool count_value(const bson_value_t *v, void *ctx)
{
    (void)v;
    (*(int *)ctx)++;
    return true;
}

static void test_get_follows_documents_and_array_indexes(void)
{
    bson_t *d = doc_json("{\"a\": [{\"b\": 1}, {\"b\": [2, 3]}], \"x\": {\"y\": [5, {\"z\": 7}]}}");
    bson_iter_t it;
    CHECK(path_get(d, "a.1.b", &it) && BSON_ITER_HOLDS_ARRAY(&it), "a.1.b is the array [2,3]");
    CHECK(path_get(d, "x.y.1.z", &it) && bson_iter_as_int64(&it) == 7, "x.y.1.z is 7");
    CHECK(!path_get(d, "a.b", &it), "a.b does not expand arrays in path_get");
    CHECK(!path_get(d, "x.y.5", &it), "an index past the end is missing");
    CHECK(!path_get(d, "x.y.0.q", &it), "a field below a scalar is missing");
    bson_destroy(d);
}

static void test_visit_expands_arrays_like_a_query(void)
{
    bson_t *d = doc_json("{\"a\": [{\"b\": 1}, {\"b\": [2, 3]}, {\"c\": 1}, 4]}");
    int n = 0;
    size_t got = path_visit(d, "a.b", count_value, &n);
    CHECK(got == 4 && n == 4, "a.b reaches 1, [2,3], 2 and 3 (got %zu)", got);
    n = 0;
    CHECK(path_visit(d, "nope", count_value, &n) == 0 && n == 0, "a missing path visits nothing");
    n = 0;
    CHECK(path_visit(d, "a.3", count_value, &n) == 1, "a numeric component indexes the array");
    bson_destroy(d);
}

typedef struct walk_log {
    int hits, missing, last_pos;
} walk_log_t;

static bool log_hit(const path_hit_t *h, void *ctx)
{
    walk_log_t *w = ctx;
    w->hits++;
    if (h->value->value_type == BSON_TYPE_EOD)
        w->missing++;
    else if (h->value->value_type == BSON_TYPE_INT32 && h->value->value.v_int32 == 9)
        w->last_pos = h->array_pos;
    return true;
}

static void test_walk_reports_missing_and_positions(void)
{
    bson_t *d = doc_json("{\"a\": [{\"c\": 1}, 5, {\"b\": 9}]}");
    walk_log_t w = {0, 0, -5};
    path_walk(d, "a.b", true, log_hit, &w);
    CHECK(w.missing == 1, "the document without b is one missing hit; the scalar 5 is skipped");
    CHECK(w.last_pos == 2, "b:9 was reached through array position 2 (got %d)", w.last_pos);
    bson_destroy(d);
}

int main(void)
{
    UNIT_RUN(test_get_follows_documents_and_array_indexes);
    UNIT_RUN(test_visit_expands_arrays_like_a_query);
    UNIT_RUN(test_walk_reports_missing_and_positions);
    return unit_finish();
}
