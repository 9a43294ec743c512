/* test_capped: capped collections in the store — create's options checked
 * and stored as mongod 7.0 (tests/unit/cases/capped.json), insertion order
 * kept through replaces and removes, and an insert past size or max
 * removing the oldest documents. */
#include <string.h>

#include "doc/matcher.h"
#include "store/capped.h"
#include "store/collection.h"
#include "unit.h"

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

static void run_option_case(const bson_t *c)
{
    bson_iter_t it, f;
    bson_t input, want;
    const uint8_t *data;
    uint32_t len;
    const char *name = bson_iter_init_find(&it, c, "name") ? bson_iter_utf8(&it, NULL) : "?";
    bson_iter_init_find(&it, c, "input");
    bson_iter_document(&it, &len, &data);
    bson_init_static(&input, data, len);
    bson_iter_t capped, size, max;
    bool has_c = bson_iter_init_find(&capped, &input, "capped");
    bool has_s = bson_iter_init_find(&size, &input, "size");
    bool has_m = bson_iter_init_find(&max, &input, "max");
    bson_t out = BSON_INITIALIZER;
    dberr_t err;
    memset(&err, 0, sizeof err);
    bool ok = capped_parse_options(has_c ? &capped : NULL, has_s ? &size : NULL,
                                   has_m ? &max : NULL, &out, &err);
    bool pass;
    if (bson_iter_init_find(&f, c, "code")) {
        pass = !ok && err.code == bson_iter_as_int64(&f);
        if (!pass)
            fprintf(stderr, "  %s: wanted code %lld, got ok=%d code %d (%s)\n", name,
                    (long long)bson_iter_as_int64(&f), ok, err.code, err.msg);
    } else {
        bson_iter_init_find(&f, c, "stored");
        bson_iter_document(&f, &len, &data);
        bson_init_static(&want, data, len);
        pass = ok && bson_equal(&out, &want);
        if (!pass) {
            char *got = bson_as_canonical_extended_json(&out, NULL);
            fprintf(stderr, "  %s: got %s (%s)\n", name, got, ok ? "ok" : err.msg);
            bson_free(got);
        }
    }
    unit_case(name, pass);
    bson_destroy(&out);
}

static void test_options_follow_the_case_file(void)
{
    bson_t *file = unit_load_json("cases/capped.json");
    bson_iter_t it, el;
    bson_iter_init_find(&it, file, "cases");
    bson_iter_recurse(&it, &el);
    while (bson_iter_next(&el)) {
        const uint8_t *data;
        uint32_t len;
        bson_t c;
        bson_iter_document(&el, &len, &data);
        bson_init_static(&c, data, len);
        run_option_case(&c);
    }
    bson_destroy(file);
}

/* The _ids of `c` in natural order, as "3,1,2". */
static void natural_ids(const collection_t *c, char *buf, size_t size)
{
    uint64_t pos = 0;
    record_t *r;
    buf[0] = 0;
    while ((r = collection_natural_next(c, pos, &pos))) {
        bson_t doc;
        bson_iter_t it;
        record_view(r, &doc);
        if (bson_iter_init_find(&it, &doc, "_id"))
            snprintf(buf + strlen(buf), size - strlen(buf), "%s%d", buf[0] ? "," : "",
                     bson_iter_int32(&it));
    }
}

static void insert(collection_t *c, const char *doc)
{
    bson_t *d = json(doc);
    dberr_t err;
    CHECK(collection_insert(c, d, &err), "insert %s: %s", doc, err.msg);
    bson_destroy(d);
}

static void test_inserts_past_max_remove_the_oldest_in_insertion_order(void)
{
    bson_t *opts = json("{\"capped\": true, \"size\": 4096, \"max\": 3}");
    collection_t *c = collection_new("t", "log", opts);
    char ids[128];
    CHECK(collection_is_capped(c) && collection_capped_max(c) == 3, "capped with max 3");
    insert(c, "{\"_id\": 5}");
    insert(c, "{\"_id\": 1}");
    insert(c, "{\"_id\": 4}");
    natural_ids(c, ids, sizeof ids);
    CHECK(!strcmp(ids, "5,1,4"), "insertion order, not _id order: %s", ids);
    /* a replace keeps the place */
    bson_value_t id = {.value_type = BSON_TYPE_INT32, .value.v_int32 = 1};
    bson_t *bigger = json("{\"_id\": 1, \"pad\": \"xxxxxxxxxxxxxxxxxxxx\"}");
    dberr_t err;
    CHECK(collection_replace(c, collection_find_id(c, &id), bigger, &err), "replace: %s", err.msg);
    bson_destroy(bigger);
    insert(c, "{\"_id\": 2}");
    natural_ids(c, ids, sizeof ids);
    CHECK(!strcmp(ids, "1,4,2"), "5 removed, the replaced 1 kept its place: %s", ids);
    CHECK(collection_count(c) == 3, "three documents");
    /* a remove leaves a hole a tailable position can detect */
    uint64_t pos = 0;
    collection_natural_next(c, 0, &pos);
    CHECK(collection_natural_holds(c, pos), "the first position holds a document");
    id.value.v_int32 = 1;
    collection_remove(c, collection_find_id(c, &id));
    CHECK(!collection_natural_holds(c, pos), "its removal is seen");
    natural_ids(c, ids, sizeof ids);
    CHECK(!strcmp(ids, "4,2"), "order after a remove: %s", ids);
    collection_destroy(c);
    bson_destroy(opts);
}

static void test_inserts_past_size_keep_the_bytes_within_it(void)
{
    bson_t *opts = json("{\"capped\": true, \"size\": 256}");
    collection_t *c = collection_new("t", "log", opts);
    char doc[64];
    for (int i = 0; i < 40; i++) {
        snprintf(doc, sizeof doc, "{\"_id\": %d}", i); /* 14 bytes each */
        insert(c, doc);
        CHECK(collection_data_size(c) <= 256, "within 256 bytes after insert %d", i);
    }
    CHECK(collection_count(c) == 256 / 14, "%zu documents fit", collection_count(c));
    bson_t *big =
        json("{\"_id\": 99, \"s\": \"" /* 300 bytes */
             "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
             "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
             "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
             "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"}");
    dberr_t err;
    size_t before = collection_count(c);
    CHECK(!collection_insert(c, big, &err) && err.code == 2,
          "a document larger than the collection is refused (2)");
    CHECK(collection_count(c) == before, "and nothing was removed for it");
    bson_destroy(big);
    collection_destroy(c);
    bson_destroy(opts);
}

int main(void)
{
    UNIT_RUN(test_options_follow_the_case_file);
    UNIT_RUN(test_inserts_past_max_remove_the_oldest_in_insertion_order);
    UNIT_RUN(test_inserts_past_size_keep_the_bytes_within_it);
    return unit_finish();
}
