/* test_bsoncheck: the strict BSON check (src/util/bsoncheck.c) refuses what
 * libbson 1.23's iterator and bson_validate let through — a nested document
 * whose terminating byte is not NUL, found by fuzz_matcher — as well as
 * bad lengths, deep nesting, bad UTF-8 and bad booleans. */
#include <string.h>

#include "unit.h"
#include "util/bsoncheck.h"

static bsoncheck_fault_t check_bytes(const uint8_t *data, size_t len)
{
    bson_t doc;
    uint32_t at;
    if (!bson_init_static(&doc, data, len))
        return BSONCHECK_CORRUPT;
    return bsoncheck_doc(&doc, &at);
}

static void test_a_well_formed_document_passes(void)
{
    bson_t *doc = BCON_NEW("a", BCON_INT32(1), "s", BCON_UTF8("x\xc3\xa9"), "d", "{", "b",
                           BCON_BOOL(true), "}", "arr", "[", BCON_INT64(2), BCON_NULL, "]");
    uint32_t at;
    CHECK(bsoncheck_doc(doc, &at) == BSONCHECK_OK, "a well-formed document passes");
    bson_destroy(doc);
}

/* {"a.b": 1, "a": {"b": 2, <0x07 instead of the NUL terminator>}}: libbson's
 * iterator stops at the last byte whatever it holds, so the nested document
 * looked complete; $getField then read garbage (fuzz_matcher). */
static void test_a_nested_terminator_that_is_not_nul_is_corrupt(void)
{
    static const uint8_t bad[] = {0x1d, 0, 0, 0, 0x10, 'a', '.', 'b', 0, 1, 0, 0, 0,
                                  0x03, 'a',  0, 0x0c, 0, 0, 0, 0x10, 'b', 0, 2, 0,
                                  0,    0,    0x07, 0};
    CHECK(sizeof bad == 0x1d, "the test document is 29 bytes");
    CHECK(check_bytes(bad, sizeof bad) == BSONCHECK_CORRUPT, "nested terminator 0x07: corrupt");
    uint8_t good[sizeof bad];
    memcpy(good, bad, sizeof bad);
    good[27] = 0;
    CHECK(check_bytes(good, sizeof good) == BSONCHECK_OK, "with a NUL terminator it passes");
    uint8_t top[sizeof bad];
    memcpy(top, good, sizeof good);
    top[28] = 0x07;
    CHECK(check_bytes(top, sizeof top) == BSONCHECK_CORRUPT, "top-level terminator 0x07: corrupt");
}

static void test_deep_nesting_is_too_deep_not_a_crash(void)
{
    bson_t *levels[BSONCHECK_MAX_DEPTH + 2];
    levels[0] = bson_new();
    BSON_APPEND_INT32(levels[0], "x", 1);
    for (int i = 1; i < BSONCHECK_MAX_DEPTH + 2; i++) {
        levels[i] = bson_new();
        BSON_APPEND_DOCUMENT(levels[i], "d", levels[i - 1]);
    }
    uint32_t at;
    CHECK(bsoncheck_doc(levels[BSONCHECK_MAX_DEPTH - 2], &at) == BSONCHECK_OK,
          "just under the depth limit passes");
    CHECK(bsoncheck_doc(levels[BSONCHECK_MAX_DEPTH + 1], &at) == BSONCHECK_TOO_DEEP,
          "past the depth limit is too deep");
    for (int i = 0; i < BSONCHECK_MAX_DEPTH + 2; i++)
        bson_destroy(levels[i]);
}

static void test_bad_utf8_and_booleans_are_refused(void)
{
    bson_t *doc = BCON_NEW("k", BCON_UTF8("ok"), "b", BCON_BOOL(true));
    uint8_t *p = bson_malloc(doc->len);
    memcpy(p, bson_get_data(doc), doc->len);
    uint8_t *s = memmem(p, doc->len, "ok", 3);
    s[0] = 0xff;
    CHECK(check_bytes(p, doc->len) == BSONCHECK_BAD_UTF8, "a string that is not UTF-8");
    s[0] = 'o';
    uint8_t *b = memmem(p, doc->len, "b\0\x01", 3);
    b[2] = 2;
    bsoncheck_fault_t f = check_bytes(p, doc->len);
    CHECK(f == BSONCHECK_BAD_BOOL || f == BSONCHECK_CORRUPT, "a boolean byte 2 (got %d)", (int)f);
    bson_free(p);
    bson_destroy(doc);
}

int main(void)
{
    UNIT_RUN(test_a_well_formed_document_passes);
    UNIT_RUN(test_a_nested_terminator_that_is_not_nul_is_corrupt);
    UNIT_RUN(test_deep_nesting_is_too_deep_not_a_crash);
    UNIT_RUN(test_bad_utf8_and_booleans_are_refused);
    return unit_finish();
}
