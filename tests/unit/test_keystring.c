/* test_keystring: the key encoding orders exactly like compare_values —
 * checked on the ordered values of cases/compare.json and on many random
 * pairs (int64 extremes, doubles, NaN, -0.0, decimal128, nested documents). */
#include <math.h>
#include <string.h>

#include "doc/compare.h"
#include "doc/keystring.h"
#include "unit.h"

static int sign(int c)
{
    return c < 0 ? -1 : c > 0 ? 1 : 0;
}

/* memcmp order of two byte strings, shorter first on a common prefix. */
static int bytes_cmp(const buf_t *a, const buf_t *b)
{
    size_t n = a->len < b->len ? a->len : b->len;
    int c = n ? memcmp(a->data, b->data, n) : 0;
    if (c)
        return sign(c);
    return a->len < b->len ? -1 : a->len > b->len ? 1 : 0;
}

static int key_cmp(const bson_value_t *a, const bson_value_t *b, bool desc)
{
    buf_t ka, kb;
    buf_init(&ka);
    buf_init(&kb);
    keystring_append(&ka, a, desc);
    keystring_append(&kb, b, desc);
    int c = bytes_cmp(&ka, &kb);
    buf_destroy(&ka);
    buf_destroy(&kb);
    return c;
}

static void test_case_file_values_encode_in_order(void)
{
    bson_t *file = unit_load_json("cases/compare.json");
    bson_iter_t groups, gi;
    bson_iter_init_find(&groups, file, "groups");
    bson_iter_recurse(&groups, &gi);
    /* Flatten to an array of (group, value). */
    bson_value_t vals[512];
    int grp[512], n = 0, g = 0;
    while (bson_iter_next(&gi)) {
        bson_iter_t a;
        bson_iter_recurse(&gi, &a);
        while (bson_iter_next(&a) && n < 512) {
            bson_value_copy(bson_iter_value(&a), &vals[n]);
            grp[n++] = g;
        }
        g++;
    }
    int bad = 0;
    for (int i = 0; i < n; i++) {
        for (int j = 0; j < n; j++) {
            int want = grp[i] < grp[j] ? -1 : grp[i] > grp[j] ? 1 : 0;
            int asc = key_cmp(&vals[i], &vals[j], false);
            int desc = key_cmp(&vals[i], &vals[j], true);
            if (asc != want || desc != -want) {
                if (bad++ < 10)
                    CHECK(0, "values #%d (group %d) and #%d (group %d): want %d, key asc %d desc %d",
                          i, grp[i], j, grp[j], want, asc, desc);
            }
        }
    }
    CHECK(bad == 0, "every pair of case-file values orders by key as by compare (%d bad)", bad);
    CHECK(n > 100, "the case file holds many values (%d)", n);
    for (int i = 0; i < n; i++)
        bson_value_destroy(&vals[i]);
    bson_destroy(file);
}

static void test_equal_numbers_encode_to_equal_bytes(void)
{
    bson_value_t a = {.value_type = BSON_TYPE_INT32}, b = {.value_type = BSON_TYPE_INT64},
                 c = {.value_type = BSON_TYPE_DOUBLE};
    a.value.v_int32 = 1;
    b.value.v_int64 = 1;
    c.value.v_double = 1.0;
    buf_t ka, kb, kc;
    buf_init(&ka);
    buf_init(&kb);
    buf_init(&kc);
    keystring_append(&ka, &a, false);
    keystring_append(&kb, &b, false);
    keystring_append(&kc, &c, false);
    CHECK(ka.len == kb.len && memcmp(ka.data, kb.data, ka.len) == 0, "int32 1 and int64 1 encode alike");
    CHECK(ka.len == kc.len && memcmp(ka.data, kc.data, ka.len) == 0, "int32 1 and double 1.0 encode alike");
    buf_destroy(&ka);
    buf_destroy(&kb);
    buf_destroy(&kc);
}

static void test_missing_encodes_like_null(void)
{
    bson_value_t null = {.value_type = BSON_TYPE_NULL};
    buf_t a, b;
    buf_init(&a);
    buf_init(&b);
    keystring_append_null(&a, true);
    keystring_append(&b, &null, true);
    CHECK(bytes_cmp(&a, &b) == 0, "keystring_append_null(desc) equals a descending null");
    buf_destroy(&a);
    buf_destroy(&b);
}

/* -- random values -- */

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;

static uint64_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

static const int64_t int_edges[] = {INT64_MIN, INT64_MIN + 1, -9007199254740993LL, -9007199254740992LL,
                                    -1, 0, 1, 2, 9007199254740992LL, 9007199254740993LL,
                                    INT64_MAX - 1, INT64_MAX, INT32_MIN, INT32_MAX};
static const double dbl_edges[] = {0.0, -0.0, 1.0, -1.0, 0.5, 1e-310, -1e-310, 9007199254740992.0,
                                   9223372036854775808.0, -9223372036854775808.0, 1e300, -1e300,
                                   INFINITY, -INFINITY, NAN, 2.0, 1.0000000000000002};

static void append_random(bson_t *d, const char *key, int depth)
{
    switch (rnd() % (depth > 2 ? 9 : 11)) {
    case 0:
        BSON_APPEND_INT32(d, key, (int32_t)(rnd() % 7) - 3);
        break;
    case 1:
        BSON_APPEND_INT64(d, key, rnd() % 2 ? int_edges[rnd() % 14] : (int64_t)rnd());
        break;
    case 2: {
        double x;
        if (rnd() % 2) {
            x = dbl_edges[rnd() % (sizeof dbl_edges / sizeof dbl_edges[0])];
        } else {
            uint64_t bits = rnd();
            memcpy(&x, &bits, 8);
        }
        BSON_APPEND_DOUBLE(d, key, x);
        break;
    }
    case 3: {
        static const char *dec[] = {"1", "-1", "0", "-0", "2.5", "1E+400", "-1E+400", "NaN",
                                    "Infinity", "-Infinity", "9223372036854775807", "0.1",
                                    "1.0000000000000002", "3"};
        bson_decimal128_t v;
        bson_decimal128_from_string(dec[rnd() % 14], &v);
        BSON_APPEND_DECIMAL128(d, key, &v);
        break;
    }
    case 4: {
        char s[4];
        size_t n = rnd() % 4;
        for (size_t i = 0; i < n; i++)
            s[i] = "\0ab\x01\xff"[rnd() % 5];
        bson_append_utf8(d, key, -1, s, (int)n); /* may hold NULs and invalid UTF-8: fine for keys */
        break;
    }
    case 5:
        BSON_APPEND_BOOL(d, key, rnd() % 2);
        break;
    case 6:
        if (rnd() % 2)
            BSON_APPEND_NULL(d, key);
        else
            BSON_APPEND_DATE_TIME(d, key, (int64_t)(rnd() % 5) - 2);
        break;
    case 7:
        if (rnd() % 2)
            BSON_APPEND_MINKEY(d, key);
        else
            BSON_APPEND_MAXKEY(d, key);
        break;
    case 8: {
        uint8_t bin[2] = {(uint8_t)(rnd() % 2), 0};
        BSON_APPEND_BINARY(d, key, (bson_subtype_t)(rnd() % 2), bin, (uint32_t)(rnd() % 3));
        break;
    }
    case 9:
    case 10: {
        bson_t child;
        bool arr = rnd() % 2;
        if (arr)
            BSON_APPEND_ARRAY_BEGIN(d, key, &child);
        else
            BSON_APPEND_DOCUMENT_BEGIN(d, key, &child);
        int n = (int)(rnd() % 3);
        for (int i = 0; i < n; i++) {
            char k[12];
            if (arr)
                snprintf(k, sizeof k, "%d", i);
            else
                snprintf(k, sizeof k, "%c", "ab"[rnd() % 2]);
            append_random(&child, k, depth + 1);
        }
        if (arr)
            bson_append_array_end(d, &child);
        else
            bson_append_document_end(d, &child);
        break;
    }
    }
}

static void test_random_pairs_order_like_compare_values(void)
{
    int bad = 0, pairs = 0, equal = 0;
    for (int round = 0; round < 20000; round++) {
        bson_t d = BSON_INITIALIZER;
        append_random(&d, "x", 0);
        append_random(&d, "y", 0);
        bson_iter_t a, b;
        bson_iter_init_find(&a, &d, "x");
        bson_iter_init_find(&b, &d, "y");
        const bson_value_t *va = bson_iter_value(&a);
        const bson_value_t *vb = bson_iter_value(&b);
        int want = sign(compare_values(va, vb));
        int asc = key_cmp(va, vb, false), desc = key_cmp(va, vb, true);
        pairs++;
        equal += want == 0;
        if (asc != want || desc != -want) {
            if (bad++ < 10) {
                char *j = bson_as_canonical_extended_json(&d, NULL);
                CHECK(0, "%s: compare %d, key asc %d desc %d", j, want, asc, desc);
                bson_free(j);
            }
        }
        bson_destroy(&d);
    }
    CHECK(bad == 0, "random pairs: key order == compare order (%d of %d bad)", bad, pairs);
    CHECK(equal > 100, "the generator produces equal pairs too (%d)", equal);
}

static void test_compound_keys_order_part_by_part(void)
{
    int bad = 0;
    for (int round = 0; round < 5000; round++) {
        bson_t d = BSON_INITIALIZER;
        append_random(&d, "a1", 0);
        append_random(&d, "a2", 0);
        append_random(&d, "b1", 0);
        append_random(&d, "b2", 0);
        bson_iter_t it;
        bson_value_t v[4];
        int i = 0;
        bson_iter_init(&it, &d);
        while (bson_iter_next(&it))
            v[i++] = *bson_iter_value(&it);
        /* index {x: 1, y: -1} */
        int c1 = sign(compare_values(&v[0], &v[2]));
        int want = c1 ? c1 : -sign(compare_values(&v[1], &v[3]));
        buf_t ka, kb;
        buf_init(&ka);
        buf_init(&kb);
        keystring_append(&ka, &v[0], false);
        keystring_append(&ka, &v[1], true);
        keystring_append(&kb, &v[2], false);
        keystring_append(&kb, &v[3], true);
        if (bytes_cmp(&ka, &kb) != want)
            bad++;
        buf_destroy(&ka);
        buf_destroy(&kb);
        bson_destroy(&d);
    }
    CHECK(bad == 0, "compound {x:1, y:-1} keys order part by part (%d bad)", bad);
}

int main(void)
{
    UNIT_RUN(test_case_file_values_encode_in_order);
    UNIT_RUN(test_equal_numbers_encode_to_equal_bytes);
    UNIT_RUN(test_missing_encodes_like_null);
    UNIT_RUN(test_random_pairs_order_like_compare_values);
    UNIT_RUN(test_compound_keys_order_part_by_part);
    return unit_finish();
}
