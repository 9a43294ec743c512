/* test_compare: MongoDB's cross-type order (cases/compare.json lists values
 * in order, grouped by equality) plus named checks of the number, document
 * and array rules in compare.c. */
#include <math.h>
#include <string.h>

#include "doc/compare.h"
#include "unit.h"

static int sign(int c)
{
    return c < 0 ? -1 : c > 0 ? 1 : 0;
}

static bson_value_t v_i32(int32_t x)
{
    bson_value_t v = {.value_type = BSON_TYPE_INT32};
    v.value.v_int32 = x;
    return v;
}

static bson_value_t v_i64(int64_t x)
{
    bson_value_t v = {.value_type = BSON_TYPE_INT64};
    v.value.v_int64 = x;
    return v;
}

static bson_value_t v_dbl(double x)
{
    bson_value_t v = {.value_type = BSON_TYPE_DOUBLE};
    v.value.v_double = x;
    return v;
}

static bson_value_t v_str(const char *s)
{
    bson_value_t v = {.value_type = BSON_TYPE_UTF8};
    v.value.v_utf8.str = (char *)s;
    v.value.v_utf8.len = (uint32_t)strlen(s);
    return v;
}

static void test_case_file_groups_are_in_order(void)
{
    bson_t *file = unit_load_json("cases/compare.json");
    bson_iter_t groups, gi;
    CHECK(bson_iter_init_find(&groups, file, "groups") && BSON_ITER_HOLDS_ARRAY(&groups),
          "compare.json has a groups array");
    bson_iter_recurse(&groups, &gi);
    int g = 0, checked = 0;
    while (bson_iter_next(&gi)) {
        bson_iter_t gj = gi;
        int h = g;
        do {
            bson_iter_t a, b;
            bson_iter_recurse(&gi, &a);
            while (bson_iter_next(&a)) {
                bson_iter_recurse(&gj, &b);
                while (bson_iter_next(&b)) {
                    int want = g == h ? 0 : -1;
                    int got = sign(compare_iters(&a, &b));
                    int back = sign(compare_iters(&b, &a));
                    checked++;
                    CHECK(got == want && back == -want,
                          "group %d value %s vs group %d value %s: want %d got %d (reverse %d)",
                          g, bson_iter_key(&a), h, bson_iter_key(&b), want, got, back);
                }
            }
            h++;
        } while (bson_iter_next(&gj));
        g++;
    }
    CHECK(g > 50 && checked > 1000, "the case file has many groups (%d, %d pairs)", g, checked);
    bson_destroy(file);
}

static void test_int32_int64_and_double_compare_equal_by_value(void)
{
    bson_value_t a = v_i32(7), b = v_i64(7), c = v_dbl(7.0);
    CHECK(compare_equal(&a, &b), "int32 7 == int64 7");
    CHECK(compare_equal(&a, &c), "int32 7 == double 7.0");
    CHECK(compare_equal(&b, &c), "int64 7 == double 7.0");
    bson_value_t d = v_dbl(7.5);
    CHECK(compare_values(&a, &d) < 0, "int32 7 < double 7.5");
}

static void test_int64_beyond_double_precision_compares_exactly(void)
{
    bson_value_t big = v_i64(INT64_C(9007199254740993)); /* 2^53 + 1 */
    bson_value_t dbl = v_dbl(9007199254740992.0);        /* 2^53 */
    CHECK(compare_values(&big, &dbl) > 0, "2^53+1 (int64) > 2^53 (double)");
    bson_value_t max = v_i64(INT64_MAX), two63 = v_dbl(9223372036854775808.0);
    CHECK(compare_values(&max, &two63) < 0, "INT64_MAX < 2^63 as a double");
}

static void test_nan_equals_nan_and_sorts_below_all_numbers(void)
{
    bson_value_t nan = v_dbl(NAN), nan2 = v_dbl(-NAN), ninf = v_dbl(-INFINITY), min = v_i64(INT64_MIN);
    CHECK(compare_values(&nan, &nan2) == 0, "NaN == NaN");
    CHECK(compare_values(&nan, &ninf) < 0, "NaN < -Infinity");
    CHECK(compare_values(&nan, &min) < 0, "NaN < INT64_MIN");
    bson_value_t null = {.value_type = BSON_TYPE_NULL};
    CHECK(compare_values(&null, &nan) < 0, "null < NaN (numbers rank above null)");
}

static void test_negative_zero_equals_zero(void)
{
    bson_value_t nz = v_dbl(-0.0), z = v_i32(0);
    CHECK(compare_equal(&nz, &z), "-0.0 == 0");
}

static void test_numbers_sort_before_strings(void)
{
    bson_value_t n = v_dbl(1e308), s = v_str("");
    CHECK(compare_values(&n, &s) < 0, "any number < any string");
    CHECK(compare_type_rank(BSON_TYPE_SYMBOL) == compare_type_rank(BSON_TYPE_UTF8),
          "symbol ranks with string");
    CHECK(compare_type_rank(BSON_TYPE_UNDEFINED) == compare_type_rank(BSON_TYPE_NULL),
          "undefined ranks with null");
}

static void test_documents_compare_type_then_name_then_value(void)
{
    bson_t *a = BCON_NEW("a", BCON_UTF8("x"));
    bson_t *b = BCON_NEW("b", BCON_INT32(1));
    CHECK(compare_docs(a, b) > 0, "{a:'x'} > {b:1}: element type rank is compared before the name");
    bson_t *c = BCON_NEW("a", BCON_INT32(5));
    CHECK(compare_docs(c, b) < 0, "{a:5} < {b:1}: same rank, name decides");
    bson_t *d = BCON_NEW("a", BCON_INT32(5), "b", BCON_INT32(0));
    CHECK(compare_docs(c, d) < 0, "a document that is a prefix of another is smaller");
    bson_destroy(a);
    bson_destroy(b);
    bson_destroy(c);
    bson_destroy(d);
}

static void test_arrays_compare_element_by_element(void)
{
    bson_t *a = BCON_NEW("v", "[", BCON_INT32(1), BCON_INT32(2), "]");
    bson_t *b = BCON_NEW("v", "[", BCON_INT32(1), BCON_DOUBLE(3.0), "]");
    bson_iter_t ia, ib;
    bson_iter_init_find(&ia, a, "v");
    bson_iter_init_find(&ib, b, "v");
    CHECK(compare_iters(&ia, &ib) < 0, "[1,2] < [1,3.0]");
    bson_destroy(a);
    bson_destroy(b);
}

static void test_decimal128_compares_with_doubles(void)
{
    bson_value_t d = {.value_type = BSON_TYPE_DECIMAL128};
    bson_decimal128_from_string("2.5", &d.value.v_decimal128);
    bson_value_t x = v_dbl(2.5), y = v_i32(3);
    CHECK(compare_equal(&d, &x), "decimal 2.5 == double 2.5");
    CHECK(compare_values(&d, &y) < 0, "decimal 2.5 < int 3");
    CHECK(compare_to_double(&d) == 2.5, "compare_to_double(decimal 2.5) == 2.5");
}

static void test_timestamps_compare_unsigned(void)
{
    bson_value_t a = {.value_type = BSON_TYPE_TIMESTAMP}, b = a;
    a.value.v_timestamp.timestamp = 0x80000000u;
    b.value.v_timestamp.timestamp = 1;
    CHECK(compare_values(&a, &b) > 0, "timestamp t=2^31 > t=1 (unsigned)");
}

int main(void)
{
    UNIT_RUN(test_case_file_groups_are_in_order);
    UNIT_RUN(test_int32_int64_and_double_compare_equal_by_value);
    UNIT_RUN(test_int64_beyond_double_precision_compares_exactly);
    UNIT_RUN(test_nan_equals_nan_and_sorts_below_all_numbers);
    UNIT_RUN(test_negative_zero_equals_zero);
    UNIT_RUN(test_numbers_sort_before_strings);
    UNIT_RUN(test_documents_compare_type_then_name_then_value);
    UNIT_RUN(test_arrays_compare_element_by_element);
    UNIT_RUN(test_decimal128_compares_with_doubles);
    UNIT_RUN(test_timestamps_compare_unsigned);
    return unit_finish();
}
