/* test_num: drives src/doc/num.c (the number model) from
 * tests/unit/cases/num.json — mongod's results for mixed types, overflow
 * to long and double, and exact Decimal128 — plus the conversions the case
 * file cannot express. */
#include <string.h>

#include "doc/num.h"
#include "unit.h"

/* True when the two values are the same type and the same bytes. */
static bool same_value(const bson_value_t *a, const bson_value_t *b)
{
    bson_t x = BSON_INITIALIZER, y = BSON_INITIALIZER;
    bson_append_value(&x, "v", 1, a);
    bson_append_value(&y, "v", 1, b);
    bool same = x.len == y.len && memcmp(bson_get_data(&x), bson_get_data(&y), x.len) == 0;
    bson_destroy(&x);
    bson_destroy(&y);
    return same;
}

/* Runs `op` over `args` (n values); false when the operation fails. */
static bool run_op(const char *op, const bson_value_t *args, size_t n, bson_value_t *out)
{
    if (strcmp(op, "safe_add") == 0 || strcmp(op, "safe_mul") == 0) {
        num_t a, b, r;
        num_from_value(&args[0], &a);
        num_from_value(&args[1], &b);
        bool ok = op[5] == 'a' ? num_safe_add(&a, &b, &r) : num_safe_mul(&a, &b, &r);
        num_to_value(&r, out);
        return ok;
    }
    if (strcmp(op, "add") == 0 || strcmp(op, "multiply") == 0) {
        num_acc_t acc;
        num_acc_init(&acc, op[0] == 'a' ? 0 : 1);
        for (size_t i = 0; i < n; i++)
            (op[0] == 'a' ? num_acc_add : num_acc_mul)(&acc, &args[i]);
        num_acc_value(&acc, out);
        return true;
    }
    if (strcmp(op, "subtract") == 0) {
        num_subtract(&args[0], &args[1], out);
        return true;
    }
    if (strcmp(op, "divide") == 0)
        return num_divide(&args[0], &args[1], out);
    if (strcmp(op, "sum") == 0 || strcmp(op, "avg") == 0) {
        num_sum_t s;
        num_sum_init(&s);
        for (size_t i = 0; i < n; i++)
            num_sum_add(&s, &args[i]);
        (op[0] == 's' ? num_sum_value : num_avg_value)(&s, out);
        return true;
    }
    memset(out, 0, sizeof *out);
    out->value_type = BSON_TYPE_INT32;
    out->value.v_int32 = num_compare(&args[0], &args[1]);
    return true;
}

static int run_case(bson_iter_t *case_it)
{
    bson_t c;
    bson_iter_t it, ai;
    uint32_t len;
    const uint8_t *data;
    bson_value_t args[8], out;
    size_t n = 0;
    bson_iter_document(case_it, &len, &data);
    bson_init_static(&c, data, len);
    bson_iter_init_find(&it, &c, "name");
    const char *name = bson_iter_utf8(&it, NULL);
    bson_iter_init_find(&it, &c, "op");
    const char *op = bson_iter_utf8(&it, NULL);
    bson_iter_init_find(&it, &c, "args");
    bson_iter_recurse(&it, &ai);
    while (n < 8 && bson_iter_next(&ai))
        args[n++] = *bson_iter_value(&ai);
    bool want_error = bson_iter_init_find(&it, &c, "error") && bson_iter_as_bool(&it);
    bool ok = run_op(op, args, n, &out);
    if (want_error) {
        if (ok)
            fprintf(stderr, "  %s: expected a failure\n", name);
        return !ok;
    }
    if (!ok) {
        fprintf(stderr, "  %s: failed\n", name);
        return 0;
    }
    bson_iter_init_find(&it, &c, "result");
    if (!same_value(&out, bson_iter_value(&it))) {
        bson_t got = BSON_INITIALIZER;
        bson_append_value(&got, "got", 3, &out);
        char *j = bson_as_canonical_extended_json(&got, NULL);
        fprintf(stderr, "  %s: %s\n", name, j);
        bson_free(j);
        bson_destroy(&got);
        return 0;
    }
    return 1;
}

static void test_cases_from_json_file(void)
{
    bson_t *file = unit_load_json("cases/num.json");
    bson_iter_t it, cases;
    CHECK(bson_iter_init_find(&it, file, "cases") && BSON_ITER_HOLDS_ARRAY(&it),
          "num.json has a cases array");
    bson_iter_recurse(&it, &cases);
    while (bson_iter_next(&cases)) {
        bson_iter_t c;
        bson_iter_recurse(&cases, &c);
        const char *name = bson_iter_find(&c, "name") ? bson_iter_utf8(&c, NULL) : "?";
        unit_case(name, run_case(&cases));
    }
    bson_destroy(file);
}

static void test_decimal_from_double_keeps_15_digits(void)
{
    char s[BSON_DECIMAL128_STRING];
    bson_decimal128_t d = num_decimal_from_double(0.1, 15);
    bson_decimal128_to_string(&d, s);
    CHECK(strcmp(s, "0.100000000000000") == 0, "0.1 to 15 digits is 0.100000000000000, got %s", s);
    d = num_decimal_from_double(0.1, 34);
    bson_decimal128_to_string(&d, s);
    CHECK(strcmp(s, "0.1000000000000000055511151231257827") == 0,
          "0.1 to 34 digits is the nearest decimal128, got %s", s);
}

static void test_whole_int64_accepts_integral_numbers_only(void)
{
    bson_value_t v = {.value_type = BSON_TYPE_DOUBLE};
    int64_t out;
    v.value.v_double = 3.0;
    CHECK(num_to_int64_whole(&v, &out) && out == 3, "3.0 is the whole number 3");
    v.value.v_double = 2.5;
    CHECK(!num_to_int64_whole(&v, &out), "2.5 is not whole");
    v.value.v_double = 9223372036854775808.0;
    CHECK(!num_to_int64_whole(&v, &out), "2^63 does not fit an int64");
    v.value_type = BSON_TYPE_DECIMAL128;
    bson_decimal128_from_string("42.000", &v.value.v_decimal128);
    CHECK(num_to_int64_whole(&v, &out) && out == 42, "Decimal128 42.000 is the whole number 42");
    bson_decimal128_from_string("4.2", &v.value.v_decimal128);
    CHECK(!num_to_int64_whole(&v, &out), "Decimal128 4.2 is not whole");
}

int main(void)
{
    UNIT_RUN(test_cases_from_json_file);
    UNIT_RUN(test_decimal_from_double_keeps_15_digits);
    UNIT_RUN(test_whole_int64_accepts_integral_numbers_only);
    return unit_finish();
}
