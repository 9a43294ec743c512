/* num: atomdb's one number model, mongod's — int32 → int64 → double
 * promotion with overflow as SafeNum and the aggregation arithmetic do it,
 * and Decimal128 kept exact (Intel's decimal library, the one mongod uses).
 * Used by the update operators, arithmetic expressions, $sum/$avg and the
 * comparison order, so a number means the same everywhere. */
#ifndef ATOMDB_NUM_H
#define ATOMDB_NUM_H

#include <bson/bson.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

/* A value of one of the four BSON number types. */
typedef struct num {
    bson_type_t type; /* INT32, INT64, DOUBLE or DECIMAL128; EOD when there is no
                       * number (not numeric, or an int64 result overflowed) */
    union {
        int32_t i32;
        int64_t i64;
        double d;
        bson_decimal128_t dec;
    } v;
} num_t;

/* True when `v` is an int32, int64, double or decimal128. */
static inline bool num_is_number(const bson_value_t *v)
{
    return v->value_type == BSON_TYPE_INT32 || v->value_type == BSON_TYPE_INT64 ||
           v->value_type == BSON_TYPE_DOUBLE || v->value_type == BSON_TYPE_DECIMAL128;
}

/* `v` as a num; type EOD (and false) when `v` is not a number. */
static inline bool num_from_value(const bson_value_t *v, num_t *out)
{
    if (!num_is_number(v)) {
        out->type = BSON_TYPE_EOD;
        return false;
    }
    /* the four number members share the start of both unions */
    out->type = v->value_type;
    memcpy(&out->v, &v->value, sizeof out->v);
    return true;
}

/* `n` as a BSON value (null for a num of type EOD). */
void num_to_value(const num_t *n, bson_value_t *out);

/* `out` set to the double `d` / the Decimal128 `d` (nothing to free). */
void num_value_double(bson_value_t *out, double d);
void num_value_decimal(bson_value_t *out, bson_decimal128_t d);

/* ---- valuation and order ---- */

/* `v` (a number) as a long double: int32/int64/double exactly, decimal128
 * rounded to a 64-bit mantissa. compare_values and the index key encoding
 * both order numbers by this value, so they always agree. */
long double num_to_ld(const bson_value_t *v);

/* `v` as a double (decimal128 approximated through num_to_ld); 0 for
 * non-numbers. */
static inline double num_to_double(const bson_value_t *v)
{
    switch (v->value_type) {
    case BSON_TYPE_DOUBLE: return v->value.v_double;
    case BSON_TYPE_INT32: return v->value.v_int32;
    case BSON_TYPE_INT64: return (double)v->value.v_int64;
    case BSON_TYPE_DECIMAL128: return (double)num_to_ld(v);
    default: return 0;
    }
}

/* Orders two numbers by value (1 == 1L == 1.0 == Decimal128("1.00")); NaN
 * equals NaN and sorts below every other number. */
int num_compare(const bson_value_t *a, const bson_value_t *b);

/* `v` as a whole int64 (mongod's parseIntegerElementToLong): an int32 or
 * int64, or a double / decimal128 with no fractional part in [-2^63, 2^63).
 * False otherwise. */
bool num_to_int64_whole(const bson_value_t *v, int64_t *out);

/* `d` as an int64 the way mongod's safeNumberLong casts: truncated toward
 * zero, saturated at the int64 range, NaN as 0. */
int64_t num_saturate_int64(double d);

/* `v` (a number) as Decimal128 the way mongod coerces an operand: integers
 * exactly, a double rounded to 15 significant digits. */
bson_decimal128_t num_to_decimal(const bson_value_t *v);

/* A double as Decimal128 rounded to `digits` significant digits (15: what
 * mongod's Decimal128(double) gives; 34: the nearest decimal128). */
bson_decimal128_t num_decimal_from_double(double d, int digits);

/* ---- update operators (mongod's SafeNum) ---- */

/* a + b and a * b with SafeNum's rules: decimal128 when either side is one
 * (a double operand rounded to 15 digits), else double when either is one,
 * else int32 while it fits, then int64. False, with out->type EOD, when an
 * int64 result overflows or a side is not a number. */
bool num_safe_add(const num_t *a, const num_t *b, num_t *out);
bool num_safe_mul(const num_t *a, const num_t *b, num_t *out);

/* SafeNum::isIdentical: the same type and the same value (NaN is NaN). */
bool num_identical(const num_t *a, const num_t *b);

/* SafeNum::debugString into `s`: "(NumberLong)9223372036854775807". */
void num_append_debug(bson_string_t *s, const num_t *n);

/* ---- aggregation arithmetic ($add, $multiply, $subtract, $divide) ---- */

/* A running $add sum or $multiply product: the widest type seen so far, an
 * exact integer while it is INT32/INT64, the double of every operand, and an
 * exact decimal once a decimal128 operand appeared (the total so far is
 * converted then: integers exactly, a double to 34 digits, as mongod). */
typedef struct num_acc {
    bson_type_t type;      /* INT32, INT64, DOUBLE or DECIMAL128 */
    int64_t l;             /* the exact integer while type is INT32/INT64 */
    double d;              /* the double result (always kept before a decimal) */
    bson_decimal128_t dec; /* the result once type is DECIMAL128 */
} num_acc_t;

/* Starts a sum (`start` 0) or a product (`start` 1) as an int32. */
void num_acc_init(num_acc_t *a, int32_t start);

/* Adds / multiplies the number `v` in; int64 overflow moves to double. */
void num_acc_add(num_acc_t *a, const bson_value_t *v);
void num_acc_mul(num_acc_t *a, const bson_value_t *v);

/* The result: int32 when it fits and no int64 was seen, int64, double or
 * decimal128. */
void num_acc_value(const num_acc_t *a, bson_value_t *out);

/* The result as whole milliseconds to add to a date (doubles rounded to
 * nearest, decimals half to even). */
int64_t num_acc_millis(const num_acc_t *a);

/* a - b for two numbers: decimal128 when either is one, int32 / int64 while
 * exact, else double. */
void num_subtract(const bson_value_t *a, const bson_value_t *b, bson_value_t *out);

/* a / b for two numbers: decimal128 when either is one, else double. False
 * (out untouched) when b is zero. */
bool num_divide(const bson_value_t *a, const bson_value_t *b, bson_value_t *out);

/* ---- the $sum / $avg accumulator ---- */

/* mongod's AccumulatorSum / AccumulatorAvg: the non-decimal operands summed
 * as $add sums them, decimal128 operands in their own exact total. */
typedef struct num_sum {
    num_acc_t nondec;      /* int32/int64/double operands */
    bson_decimal128_t dec; /* decimal128 operands */
    bool has_dec;          /* a decimal128 operand was seen */
    int64_t count;         /* numbers added (for $avg) */
} num_sum_t;

/* Starts an empty sum (0, int32). */
void num_sum_init(num_sum_t *s);

/* Adds `v` when it is a number; anything else is ignored, as mongod does. */
void num_sum_add(num_sum_t *s, const bson_value_t *v);

/* $sum: the total (decimal128 when any operand was one). */
void num_sum_value(const num_sum_t *s, bson_value_t *out);

/* $avg: the mean (decimal128 when any operand was one, else double); null
 * when no number was added. */
void num_avg_value(const num_sum_t *s, bson_value_t *out);

/* ---- Decimal128 math, exact to 34 digits as mongod's Decimal128 ---- */

/* The one-argument functions num_decimal_math computes. */
typedef enum num_dec_fn {
    NUM_DEC_SIN,
    NUM_DEC_COS,
    NUM_DEC_TAN,
    NUM_DEC_ASIN,
    NUM_DEC_ACOS,
    NUM_DEC_ATAN,
    NUM_DEC_SINH,
    NUM_DEC_COSH,
    NUM_DEC_TANH,
    NUM_DEC_ASINH,
    NUM_DEC_ACOSH,
    NUM_DEC_ATANH,
    NUM_DEC_LN,
} num_dec_fn_t;

/* fn(x), rounded half to even. */
bson_decimal128_t num_decimal_math(num_dec_fn_t fn, bson_decimal128_t x);
/* atan2(y, x). */
bson_decimal128_t num_decimal_atan2(bson_decimal128_t y, bson_decimal128_t x);
/* a / b, a * b, a + b, a - b, sqrt(x). */
bson_decimal128_t num_decimal_div(bson_decimal128_t a, bson_decimal128_t b);
bson_decimal128_t num_decimal_mul(bson_decimal128_t a, bson_decimal128_t b);
bson_decimal128_t num_decimal_add(bson_decimal128_t a, bson_decimal128_t b);
bson_decimal128_t num_decimal_sub(bson_decimal128_t a, bson_decimal128_t b);
bson_decimal128_t num_decimal_sqrt(bson_decimal128_t x);
/* -1, 0 or 1 (0 when either is NaN). */
int num_decimal_cmp(bson_decimal128_t a, bson_decimal128_t b);
bool num_decimal_is_nan(bson_decimal128_t x);

#endif
