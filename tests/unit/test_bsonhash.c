/* test_bsonhash: mongod's hashed-index hash. The anchor is mongod's own
 * start-up check (hasher.cpp: hash64 of {check: 42} is
 * -944302157085130861); the others pin properties mongod's hash has:
 * numbers squash to int64 (1, 1.0, NumberLong(1) and 1.9 hash alike),
 * strings and symbols share a type bracket, field order matters. */

#include "doc/bsonhash.h"
#include "unit.h"

static int64_t hash_of_json(const char *json)
{
    bson_error_t e;
    bson_t *doc = bson_new_from_json((const uint8_t *)json, -1, &e);
    bson_iter_t it;
    int64_t h = 0;
    if (doc && bson_iter_init(&it, doc) && bson_iter_next(&it))
        h = bsonhash_value(bson_iter_value(&it));
    bson_destroy(doc);
    return h;
}

static void test_hash_of_42_is_mongods_startup_check(void)
{
    CHECK(hash_of_json("{\"check\": 42}") == -944302157085130861LL,
          "hash64(42) is mongod's -944302157085130861, got %lld",
          (long long)hash_of_json("{\"check\": 42}"));
}

static void test_numbers_squash_to_int64(void)
{
    int64_t h = hash_of_json("{\"a\": 1}");
    CHECK(h == hash_of_json("{\"a\": 1.0}"), "1 and 1.0 hash alike");
    CHECK(h == hash_of_json("{\"a\": {\"$numberLong\": \"1\"}}"), "1 and NumberLong(1) hash alike");
    CHECK(h == hash_of_json("{\"a\": 1.9}"), "a double is truncated before hashing");
    CHECK(h == hash_of_json("{\"a\": {\"$numberDecimal\": \"1.0\"}}"), "decimal 1.0 hashes as 1");
    CHECK(h != hash_of_json("{\"a\": \"1\"}"), "the string \"1\" hashes differently");
    CHECK(hash_of_json("{\"a\": {\"$numberDouble\": \"NaN\"}}") == hash_of_json("{\"a\": 0}"),
          "NaN hashes as 0");
}

static void test_documents_hash_field_names_in_order(void)
{
    CHECK(hash_of_json("{\"a\": {\"x\": 1, \"y\": 2}}") !=
              hash_of_json("{\"a\": {\"y\": 2, \"x\": 1}}"),
          "field order changes a document's hash");
    CHECK(hash_of_json("{\"a\": {\"x\": 1}}") != hash_of_json("{\"a\": {\"z\": 1}}"),
          "field names are hashed");
    CHECK(hash_of_json("{\"a\": null}") != hash_of_json("{\"a\": {\"$undefined\": true}}"),
          "null and undefined are different brackets");
}

int main(void)
{
    UNIT_RUN(test_hash_of_42_is_mongods_startup_check);
    UNIT_RUN(test_numbers_squash_to_int64);
    UNIT_RUN(test_documents_hash_field_names_in_order);
    return unit_finish();
}
