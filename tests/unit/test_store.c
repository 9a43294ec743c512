/* test_store: collections (src/store/collection.c) keep their records and
 * every index in step through inserts, replaces and removes, refuse what a
 * unique index forbids without changing anything, and the planner picks the
 * plan mongod would (_id lookup, an index's equality prefix, index order for
 * a sort, a hint, else a collection scan); a query whose scan yields
 * (run on a fiber, with documents changed between its slices) returns each
 * document of its snapshot once, in the snapshot's version; an index built
 * in slices holds exactly the keys of documents written between its slices,
 * and a duplicate written meanwhile fails a unique build; a dropped
 * collection's records are freed by the reaper a slice at a time. */
#include <string.h>

#include "doc/matcher.h"
#include "doc/sortspec.h"
#include "store/collection.h"
#include "store/mvcc.h"
#include "store/reaper.h"
#include "unit.h"
#include "util/fiber.h"

static bson_t *json(const char *s)
{
    bson_error_t e;
    bson_t *b = bson_new_from_json((const uint8_t *)s, -1, &e);
    if (!b) {
        fprintf(stderr, "bad test JSON %s: %s\n", s, e.message);
        exit(2);
    }
    return b;
}

static void insert(collection_t *c, const char *doc)
{
    bson_t *d = json(doc);
    dberr_t err;
    CHECK(collection_insert(c, d, &err), "insert %s: %s", doc, err.msg);
    bson_destroy(d);
}

static void index_on(collection_t *c, const char *spec)
{
    bson_t *s = json(spec);
    dberr_t err;
    bool created;
    CHECK(collection_create_index(c, s, &created, &err) && created, "index %s: %s", spec, err.msg);
    bson_destroy(s);
}

/* Runs `filter` (sorted by `sort`, hinted by `hint`, each may be NULL):
 * the number of results, the plan in `plan`. */
static size_t query(collection_t *c, const char *filter, const char *sort, const char *hint,
                    collection_plan_t *plan)
{
    bson_t *f = json(filter), *s = sort ? json(sort) : NULL, *h = hint ? json(hint) : NULL;
    dberr_t err;
    matcher_t *m = matcher_new(f, &err);
    sortspec_t *ss = s ? sortspec_new(s, &err) : NULL;
    recvec_t out;
    recvec_init(&out);
    collection_query_opts_t o = {0};
    o.matcher = m;
    o.sort = ss;
    o.hint = h;
    memset(plan, 0, sizeof *plan);
    CHECK(collection_query(c, &o, &out, plan, &err), "query %s: %s", filter, err.msg);
    size_t n = out.len;
    recvec_destroy(&out);
    sortspec_destroy(ss);
    matcher_destroy(m);
    bson_destroy(f);
    if (s)
        bson_destroy(s);
    if (h)
        bson_destroy(h);
    return n;
}

static collection_t *people(void)
{
    collection_t *c = collection_new("db", "people", NULL);
    index_on(c, "{\"key\": {\"city\": 1}, \"name\": \"city_1\"}");
    insert(c, "{\"_id\": 1, \"city\": \"Oslo\", \"age\": 30}");
    insert(c, "{\"_id\": 2, \"city\": \"Rome\", \"age\": 40}");
    insert(c, "{\"_id\": 3, \"city\": \"Oslo\", \"age\": 50}");
    return c;
}

static void test_indexes_follow_inserts_replaces_and_removes(void)
{
    collection_t *c = people();
    collection_plan_t plan;
    CHECK(query(c, "{\"city\": \"Oslo\"}", NULL, NULL, &plan) == 2 &&
              strcmp(plan.stage, "IXSCAN") == 0,
          "two Oslo people through the city index");
    bson_value_t id = {.value_type = BSON_TYPE_INT32};
    id.value.v_int32 = 1;
    record_t *r = collection_find_id(c, &id);
    bson_t *moved = json("{\"_id\": 1, \"city\": \"Rome\", \"age\": 31}");
    dberr_t err;
    CHECK(r && collection_replace(c, r, moved, &err), "replace _id 1: %s", err.msg);
    bson_destroy(moved);
    CHECK(query(c, "{\"city\": \"Oslo\"}", NULL, NULL, &plan) == 1, "the index forgot 1's old key");
    CHECK(query(c, "{\"city\": \"Rome\"}", NULL, NULL, &plan) == 2, "and knows its new one");
    id.value.v_int32 = 2;
    collection_remove(c, collection_find_id(c, &id));
    CHECK(query(c, "{\"city\": \"Rome\"}", NULL, NULL, &plan) == 1,
          "a removed record leaves the index");
    CHECK(collection_count(c) == 2, "two records remain");
    collection_destroy(c);
}

static void test_a_unique_index_refuses_a_duplicate_and_changes_nothing(void)
{
    collection_t *c = collection_new("db", "u", NULL);
    index_on(c, "{\"key\": {\"email\": 1}, \"name\": \"email_1\", \"unique\": true}");
    insert(c, "{\"_id\": 1, \"email\": \"a@x\"}");
    bson_t *dup = json("{\"_id\": 2, \"email\": \"a@x\"}");
    dberr_t err;
    CHECK(!collection_insert(c, dup, &err) && err.code == 11000,
          "a second a@x is DuplicateKey 11000");
    bson_destroy(dup);
    collection_plan_t plan;
    CHECK(collection_count(c) == 1, "nothing was inserted");
    CHECK(query(c, "{\"_id\": 2}", NULL, NULL, &plan) == 0, "no record 2 in the _id index");
    CHECK(query(c, "{\"email\": \"a@x\"}", NULL, NULL, &plan) == 1, "one a@x in the email index");
    collection_destroy(c);
}

static void test_the_planner_picks_mongods_plans(void)
{
    collection_t *c = people();
    collection_plan_t plan;
    query(c, "{\"_id\": 2}", NULL, NULL, &plan);
    CHECK(strcmp(plan.stage, "IDHACK") == 0, "_id equality is an _id lookup, got %s", plan.stage);
    query(c, "{\"city\": \"Rome\"}", NULL, NULL, &plan);
    CHECK(strcmp(plan.stage, "IXSCAN") == 0 && plan.keys_examined == 1,
          "an equality on an indexed field scans one key, got %s/%zu", plan.stage,
          plan.keys_examined);
    query(c, "{\"age\": {\"$gt\": 35}}", NULL, NULL, &plan);
    CHECK(strcmp(plan.stage, "COLLSCAN") == 0 && plan.docs_examined == 3,
          "no index on age: a collection scan of all 3, got %s/%zu", plan.stage,
          plan.docs_examined);
    query(c, "{}", "{\"city\": -1}", NULL, &plan);
    CHECK(strcmp(plan.stage, "IXSCAN") == 0 && plan.sorted_by_index && plan.direction == -1,
          "a sort on city reads the city index backwards, got %s", plan.stage);
    query(c, "{\"age\": 30}", NULL, "{\"city\": 1}", &plan);
    CHECK(strcmp(plan.stage, "IXSCAN") == 0, "a hint forces the city index, got %s", plan.stage);
    collection_destroy(c);
}


/* ---- reads whose scans yield ---- */

enum { SLICED_DOCS = 2000 };

static void sliced_set(collection_t *c, int id, const char *doc)
{
    bson_value_t v = {.value_type = BSON_TYPE_INT32, .value.v_int32 = id};
    record_t *old = collection_find_id(c, &v);
    bson_t *d = json(doc);
    dberr_t err;
    CHECK(old && collection_replace(c, old, d, &err), "replace %d with %s", id, doc);
    bson_destroy(d);
}

static void sliced_remove(collection_t *c, int id)
{
    bson_value_t v = {.value_type = BSON_TYPE_INT32, .value.v_int32 = id};
    record_t *old = collection_find_id(c, &v);
    CHECK(old != NULL, "document %d is there to remove", id);
    if (old)
        collection_remove(c, old);
}

/* A query on a fiber, resumed by the test between its slices. */
typedef struct sliced_read {
    collection_t *c;
    const char *filter;
    const char *hint;
    uint64_t snapshot;
    recvec_t out;
    bool ok;
} sliced_read_t;

static void sliced_read_body(void *arg)
{
    sliced_read_t *r = arg;
    bson_t *f = json(r->filter), *h = r->hint ? json(r->hint) : NULL;
    dberr_t err;
    matcher_t *m = matcher_new(f, &err);
    collection_query_opts_t o = {0};
    o.matcher = m;
    o.hint = h;
    o.snapshot = r->snapshot;
    r->ok = collection_query(r->c, &o, &r->out, NULL, &err);
    matcher_destroy(m);
    bson_destroy(f);
    if (h)
        bson_destroy(h);
}

/* {_id: i, k: i, v: 0} for i < SLICED_DOCS, indexed on k. */
static collection_t *sliced_docs(void)
{
    collection_t *c = collection_new("db", "sliced", NULL);
    index_on(c, "{\"key\": {\"k\": 1}, \"name\": \"k_1\"}");
    char doc[64];
    for (int i = 0; i < SLICED_DOCS; i++) {
        snprintf(doc, sizeof doc, "{\"_id\": %d, \"k\": %d, \"v\": 0}", i, i);
        insert(c, doc);
    }
    return c;
}

/* Runs `filter` (hinted by `hint`) at `snapshot` (0: the latest) on a
 * fiber whose slices are used up at once; after its third slice (about
 * 750 keys into the k index) updates, moves (in k), deletes and inserts
 * documents behind and ahead of it. Returns how many results; `seen`
 * counts each _id's results and `changed` those not as first inserted. */
static size_t sliced_read(collection_t *c, const char *filter, const char *hint,
                          uint64_t snapshot, int *seen, int *changed)
{
    sliced_read_t r = {.c = c, .filter = filter, .hint = hint, .snapshot = snapshot};
    recvec_init(&r.out);
    fiber_set_slice_us(0);
    fiber_t *f = fiber_new(sliced_read_body, &r);
    int resumes = 0;
    bool done = false;
    while (!done && resumes < 3) { /* a slice is at least 256 keys */
        done = fiber_resume(f);
        resumes++;
    }
    CHECK(!done, "the scan yielded before its end");
    sliced_set(c, 400, "{\"_id\": 400, \"k\": 400, \"v\": 1}");    /* behind: updated */
    sliced_set(c, 1500, "{\"_id\": 1500, \"k\": 1500, \"v\": 1}"); /* ahead: updated */
    sliced_set(c, 500, "{\"_id\": 500, \"k\": 5000, \"v\": 2}");   /* behind, moves ahead */
    sliced_set(c, 1600, "{\"_id\": 1600, \"k\": -5, \"v\": 2}");   /* ahead, moves behind */
    sliced_remove(c, 300);                                           /* behind: deleted */
    sliced_remove(c, 1700);                                          /* ahead: deleted */
    insert(c, "{\"_id\": 9000, \"k\": 1800, \"v\": 3}");             /* ahead: inserted */
    insert(c, "{\"_id\": 9001, \"k\": 200, \"v\": 3}");              /* behind: inserted */
    sliced_set(c, 0, "{\"_id\": 0, \"k\": 0, \"v\": 4}");            /* changed again */
    while (!done)
        done = fiber_resume(f);
    fiber_destroy(f);
    fiber_set_slice_us(1000);
    CHECK(r.ok, "the read succeeded");
    memset(seen, 0, sizeof(int) * SLICED_DOCS);
    *changed = 0;
    for (size_t i = 0; i < r.out.len; i++) {
        bson_t doc;
        bson_iter_t it;
        record_view(r.out.items[i], &doc);
        int id = bson_iter_init_find(&it, &doc, "_id") ? bson_iter_int32(&it) : -1;
        int k = bson_iter_init_find(&it, &doc, "k") ? bson_iter_int32(&it) : -1;
        int v = bson_iter_init_find(&it, &doc, "v") ? bson_iter_int32(&it) : -1;
        if (id >= 0 && id < SLICED_DOCS)
            seen[id]++;
        if (id >= SLICED_DOCS || k != id || v != 0)
            (*changed)++;
    }
    size_t n = r.out.len;
    recvec_destroy(&r.out);
    return n;
}

static void sliced_check(const char *what, size_t n, const int *seen, int changed)
{
    int twice = 0, missing = 0;
    for (int i = 0; i < SLICED_DOCS; i++) {
        twice += seen[i] > 1;
        missing += seen[i] == 0;
    }
    CHECK(twice == 0 && missing == 0 && changed == 0 && n == SLICED_DOCS,
          "%s: %zu results, %d listed twice, %d missing, %d not the snapshot's version", what,
          n, twice, missing, changed);
}

static void test_a_yielding_scan_reads_the_store_as_it_started(void)
{
    int seen[SLICED_DOCS], changed;
    const char *plans[][2] = {{"{\"k\": {\"$gte\": -1000}}", "{\"k\": 1}"}, {"{}", NULL}};
    for (size_t p = 0; p < 2; p++) {
        collection_t *c = sliced_docs();
        size_t n = sliced_read(c, plans[p][0], plans[p][1], 0, seen, &changed);
        sliced_check(plans[p][0], n, seen, changed);
        collection_destroy(c);
    }
}

static void test_a_yielding_read_at_an_older_snapshot_lists_each_document_once(void)
{
    int seen[SLICED_DOCS], changed;
    const char *plans[][2] = {{"{\"k\": {\"$gte\": -1000}}", "{\"k\": 1}"}, {"{}", NULL}};
    for (size_t p = 0; p < 2; p++) {
        collection_t *c = sliced_docs();
        uint64_t snap = mvcc_snapshot_open();
        /* changed after the snapshot, before the read: the read takes the
         * snapshot's path, and these come from the change window */
        sliced_set(c, 0, "{\"_id\": 0, \"k\": 0, \"v\": 1}");
        sliced_set(c, 1900, "{\"_id\": 1900, \"k\": -3, \"v\": 1}");
        sliced_remove(c, 1000);
        insert(c, "{\"_id\": 9002, \"k\": 900, \"v\": 3}");
        size_t n = sliced_read(c, plans[p][0], plans[p][1], snap, seen, &changed);
        sliced_check(plans[p][0], n, seen, changed);
        mvcc_snapshot_close(snap);
        collection_destroy(c);
    }
}

/* An index build running on a fiber that yields every few records. */
typedef struct build_run {
    collection_t *c;
    const char *spec;
    bool ok;
    dberr_t err;
} build_run_t;

static void build_body(void *arg)
{
    build_run_t *b = arg;
    bson_t *s = json(b->spec);
    bool created;
    b->ok = collection_create_index(b->c, s, &created, &b->err);
    bson_destroy(s);
}

static void put(collection_t *c, int id, int a)
{
    char doc[80];
    snprintf(doc, sizeof doc, "{\"_id\": %d, \"a\": %d}", id, a);
    bson_value_t v = {.value_type = BSON_TYPE_INT32};
    v.value.v_int32 = id;
    record_t *old = collection_find_id(c, &v);
    bson_t *d = json(doc);
    dberr_t err;
    CHECK(old ? collection_replace(c, old, d, &err) : collection_insert(c, d, &err), "put %s: %s",
          doc, err.msg);
    bson_destroy(d);
}

static void drop_id(collection_t *c, int id)
{
    bson_value_t v = {.value_type = BSON_TYPE_INT32};
    v.value.v_int32 = id;
    record_t *r = collection_find_id(c, &v);
    if (r)
        collection_remove(c, r);
}

/* Builds `spec` on `c` in slices, writing between slices: before and
 * behind the scan, ahead of it, changing and deleting. Returns the run. */
static build_run_t build_with_writes(collection_t *c, const char *spec, int dup_a)
{
    build_run_t b = {.c = c, .spec = spec};
    fiber_set_slice_us(0); /* a yield at every clock read */
    fiber_t *f = fiber_new(build_body, &b);
    int k = 0, yields = 0;
    while (!fiber_resume(f)) {
        yields++;
        put(c, -1 - k, dup_a >= 0 ? dup_a : 5000 + k); /* behind the scan */
        put(c, 100000 + k, 6000 + k);                  /* ahead of it */
        put(c, (k * 37) % 2000, 7000 + k);             /* a change, either side */
        drop_id(c, (k * 53 + 11) % 2000);              /* a delete, either side */
        k++;
    }
    fiber_destroy(f);
    fiber_set_slice_us(1000);
    CHECK(yields > (dup_a >= 0 ? 0 : 10), "the build gave the loop back between slices (%d times)",
          yields);
    return b;
}

static void test_an_index_built_in_slices_holds_the_writes_made_between_them(void)
{
    collection_t *c = collection_new("db", "slices", NULL);
    for (int i = 0; i < 2000; i++)
        put(c, i, i % 50);
    build_run_t b = build_with_writes(c, "{\"key\": {\"a\": 1}, \"name\": \"a_1\"}", -1);
    CHECK(b.ok, "the build succeeded: %s", b.err.msg);
    CHECK(collection_nindexes(c) == 2, "the index was added");
    collection_plan_t plan;
    size_t all = collection_count(c);
    CHECK(query(c, "{\"a\": {\"$gte\": 0}}", NULL, "{\"a\": 1}", &plan) == all,
          "the index holds every document (%zu)", all);
    CHECK(btree_count(collection_index(c, 1)->map) == all, "and exactly one key each");
    for (int a = 0; a < 8000; a += 997) {
        char f[64];
        snprintf(f, sizeof f, "{\"a\": %d}", a);
        size_t by_index = query(c, f, NULL, "{\"a\": 1}", &plan);
        size_t by_scan = query(c, f, NULL, "{\"_id\": 1}", &plan);
        CHECK(by_index == by_scan, "a = %d: the index finds what a scan finds (%zu, %zu)", a,
              by_index, by_scan);
    }
    collection_destroy(c);
    CHECK(reaper_pending() > 0, "the dropped records wait for the reaper");
    while (reaper_step(100000))
        ;
    CHECK(reaper_pending() == 0, "the reaper freed them all");
}

static void test_a_duplicate_written_between_slices_fails_a_unique_build(void)
{
    collection_t *c = collection_new("db", "uslices", NULL);
    for (int i = 0; i < 2000; i++)
        put(c, i, i);
    build_run_t b = build_with_writes(c, "{\"key\": {\"a\": 1}, \"name\": \"a_u\", "
                                         "\"unique\": true}",
                                      0);
    CHECK(!b.ok && b.err.code == 11000, "the unique build failed with 11000 (%d %s)", b.err.code,
          b.err.msg);
    CHECK(collection_nindexes(c) == 1, "and left no index");
    collection_destroy(c);
    reaper_drain();
}

int main(void)
{
    UNIT_RUN(test_an_index_built_in_slices_holds_the_writes_made_between_them);
    UNIT_RUN(test_a_duplicate_written_between_slices_fails_a_unique_build);
    UNIT_RUN(test_indexes_follow_inserts_replaces_and_removes);
    UNIT_RUN(test_a_unique_index_refuses_a_duplicate_and_changes_nothing);
    UNIT_RUN(test_the_planner_picks_mongods_plans);
    UNIT_RUN(test_a_yielding_scan_reads_the_store_as_it_started);
    UNIT_RUN(test_a_yielding_read_at_an_older_snapshot_lists_each_document_once);
    return unit_finish();
}
