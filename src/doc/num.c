/* num: the number model (see num.h). Integers and doubles follow mongod's
 * widening rules; Decimal128 arithmetic goes through Intel's decimal
 * library (libbid, what mongod's Decimal128 wraps), libbson encodes it. */
#include "doc/num.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DECIMAL_CALL_BY_REFERENCE 0
#define DECIMAL_GLOBAL_ROUNDING 0
#define DECIMAL_GLOBAL_EXCEPTION_FLAGS 0
#include <bid_conf.h>
#include <bid_functions.h>

#include "util/shellfmt.h"

/* ---- Decimal128 through libbid (little-endian word order) ---- */

static BID_UINT128 bid_of(bson_decimal128_t d)
{
    BID_UINT128 x;
    x.w[0] = d.low;
    x.w[1] = d.high;
    return x;
}

static bson_decimal128_t dec_of(BID_UINT128 x)
{
    bson_decimal128_t d;
    d.low = x.w[0];
    d.high = x.w[1];
    return d;
}

/* a (op) b, rounded half to even as mongod's Decimal128 does. */
typedef BID_UINT128 (*dec_op_t)(BID_UINT128, BID_UINT128, _IDEC_round, _IDEC_flags *);

static bson_decimal128_t dec_apply(dec_op_t op, bson_decimal128_t a, bson_decimal128_t b)
{
    _IDEC_flags f = 0;
    return dec_of(op(bid_of(a), bid_of(b), BID_ROUNDING_TO_NEAREST, &f));
}

#define dec_add(a, b) dec_apply(bid128_add, a, b)
#define dec_sub(a, b) dec_apply(bid128_sub, a, b)
#define dec_mul(a, b) dec_apply(bid128_mul, a, b)
#define dec_div(a, b) dec_apply(bid128_div, a, b)

static bson_decimal128_t dec_from_int64(int64_t i)
{
    return dec_of(bid128_from_int64(i));
}

bson_decimal128_t num_decimal_from_double(double d, int digits)
{
    _IDEC_flags f = 0;
    if (digits >= 34 || d == 0 || !isfinite(d))
        return dec_of(binary64_to_bid128(d, BID_ROUNDING_TO_NEAREST, &f));
    /* exactly `digits` significant digits, the exact binary value rounded
     * half to even (glibc's printf is exact), trailing zeros kept */
    char buf[64];
    bson_decimal128_t r;
    snprintf(buf, sizeof buf, "%.*e", digits - 1, d);
    if (!bson_decimal128_from_string(buf, &r))
        return dec_of(binary64_to_bid128(d, BID_ROUNDING_TO_NEAREST, &f));
    return r;
}

bson_decimal128_t num_to_decimal(const bson_value_t *v)
{
    switch (v->value_type) {
    case BSON_TYPE_INT32:
        return dec_from_int64(v->value.v_int32);
    case BSON_TYPE_INT64:
        return dec_from_int64(v->value.v_int64);
    case BSON_TYPE_DOUBLE:
        return num_decimal_from_double(v->value.v_double, 15);
    case BSON_TYPE_DECIMAL128:
        return v->value.v_decimal128;
    default:
        return dec_from_int64(0);
    }
}

static bool dec_is_zero(bson_decimal128_t d)
{
    return bid128_isZero(bid_of(d)) != 0;
}

/* ---- values ---- */

void num_to_value(const num_t *n, bson_value_t *out)
{
    memset(out, 0, sizeof *out);
    out->value_type = n->type == BSON_TYPE_EOD ? BSON_TYPE_NULL : n->type;
    if (n->type != BSON_TYPE_EOD)
        memcpy(&out->value, &n->v, sizeof n->v);
}

void num_value_decimal(bson_value_t *out, bson_decimal128_t d)
{
    memset(out, 0, sizeof *out);
    out->value_type = BSON_TYPE_DECIMAL128;
    out->value.v_decimal128 = d;
}

void num_value_double(bson_value_t *out, double d)
{
    memset(out, 0, sizeof *out);
    out->value_type = BSON_TYPE_DOUBLE;
    out->value.v_double = d;
}

static void value_int(bson_value_t *out, int64_t l, bool wide)
{
    memset(out, 0, sizeof *out);
    if (!wide && l >= INT32_MIN && l <= INT32_MAX) {
        out->value_type = BSON_TYPE_INT32;
        out->value.v_int32 = (int32_t)l;
    } else {
        out->value_type = BSON_TYPE_INT64;
        out->value.v_int64 = l;
    }
}

static bool value_is_int(const bson_value_t *v, int64_t *out)
{
    if (v->value_type == BSON_TYPE_INT32) {
        *out = v->value.v_int32;
        return true;
    }
    if (v->value_type == BSON_TYPE_INT64) {
        *out = v->value.v_int64;
        return true;
    }
    return false;
}

/* ---- valuation and order ---- */

long double num_to_ld(const bson_value_t *v)
{
    switch (v->value_type) {
    case BSON_TYPE_DOUBLE:
        return (long double)v->value.v_double;
    case BSON_TYPE_INT32:
        return (long double)v->value.v_int32;
    case BSON_TYPE_INT64:
        return (long double)v->value.v_int64;
    case BSON_TYPE_DECIMAL128: {
        char s[BSON_DECIMAL128_STRING];
        bson_decimal128_to_string(&v->value.v_decimal128, s);
        long double x = strtold(s, NULL);
        if (isnan(x) || isinf(x) || x == 0)
            return isnan(x) ? NAN : x;
        /* Round to a 64-bit mantissa so that targets with a wider long
         * double (quad) still agree with the key encoding. */
        int e;
        long double m = frexpl(x, &e);
        m = truncl(ldexpl(m, 64));
        return ldexpl(m, e - 64);
    }
    default:
        return 0;
    }
}

int num_compare(const bson_value_t *a, const bson_value_t *b)
{
    int64_t ia, ib;
    if (value_is_int(a, &ia) && value_is_int(b, &ib))
        return ia < ib ? -1 : ia > ib ? 1 : 0;
    long double x = num_to_ld(a);
    long double y = num_to_ld(b);
    bool nx = isnan(x), ny = isnan(y);
    if (nx || ny)
        return nx && ny ? 0 : nx ? -1 : 1;
    return x < y ? -1 : x > y ? 1 : 0;
}

int64_t num_saturate_int64(double d)
{
    if (isnan(d))
        return 0;
    if (d >= 9223372036854775807.0)
        return INT64_MAX;
    if (d <= -9223372036854775808.0)
        return INT64_MIN;
    return (int64_t)d;
}

bool num_to_int64_whole(const bson_value_t *v, int64_t *out)
{
    switch (v->value_type) {
    case BSON_TYPE_INT32:
    case BSON_TYPE_INT64:
        return value_is_int(v, out);
    case BSON_TYPE_DOUBLE: {
        double d = v->value.v_double;
        if (!(d >= -9223372036854775808.0 && d < 9223372036854775808.0) || d != floor(d))
            return false;
        *out = (int64_t)d;
        return true;
    }
    case BSON_TYPE_DECIMAL128: {
        _IDEC_flags f = 0;
        int64_t i = bid128_to_int64_xrnint(bid_of(v->value.v_decimal128), &f);
        if (f != 0)
            return false;
        *out = i;
        return true;
    }
    default:
        return false;
    }
}

/* ---- SafeNum ---- */

static int64_t num_int(const num_t *n)
{
    return n->type == BSON_TYPE_INT32 ? n->v.i32 : n->v.i64;
}

static double num_dbl(const num_t *n)
{
    switch (n->type) {
    case BSON_TYPE_INT32:
        return n->v.i32;
    case BSON_TYPE_INT64:
        return (double)n->v.i64;
    case BSON_TYPE_DOUBLE:
        return n->v.d;
    default:
        return 0;
    }
}

static bson_decimal128_t num_dec(const num_t *n)
{
    bson_value_t v;
    num_to_value(n, &v);
    return num_to_decimal(&v);
}

static bool safe_arith(const num_t *a, const num_t *b, bool multiply, num_t *out)
{
    out->type = BSON_TYPE_EOD;
    if (a->type == BSON_TYPE_EOD || b->type == BSON_TYPE_EOD)
        return false;
    if (a->type == BSON_TYPE_DECIMAL128 || b->type == BSON_TYPE_DECIMAL128) {
        bson_decimal128_t x = num_dec(a), y = num_dec(b);
        out->type = BSON_TYPE_DECIMAL128;
        out->v.dec = multiply ? dec_mul(x, y) : dec_add(x, y);
        return true;
    }
    if (a->type == BSON_TYPE_DOUBLE || b->type == BSON_TYPE_DOUBLE) {
        double x = num_dbl(a), y = num_dbl(b);
        out->type = BSON_TYPE_DOUBLE;
        out->v.d = multiply ? x * y : x + y;
        return true;
    }
    if (a->type == BSON_TYPE_INT32 && b->type == BSON_TYPE_INT32) {
        int64_t w = multiply ? (int64_t)a->v.i32 * b->v.i32 : (int64_t)a->v.i32 + b->v.i32;
        if (w >= INT32_MIN && w <= INT32_MAX) {
            out->type = BSON_TYPE_INT32;
            out->v.i32 = (int32_t)w;
        } else {
            out->type = BSON_TYPE_INT64;
            out->v.i64 = w;
        }
        return true;
    }
    int64_t w, x = num_int(a), y = num_int(b);
    if (multiply ? __builtin_mul_overflow(x, y, &w) : __builtin_add_overflow(x, y, &w))
        return false;
    out->type = BSON_TYPE_INT64;
    out->v.i64 = w;
    return true;
}

bool num_safe_add(const num_t *a, const num_t *b, num_t *out)
{
    return safe_arith(a, b, false, out);
}

bool num_safe_mul(const num_t *a, const num_t *b, num_t *out)
{
    return safe_arith(a, b, true, out);
}

bool num_identical(const num_t *a, const num_t *b)
{
    if (a->type != b->type)
        return false;
    switch (a->type) {
    case BSON_TYPE_INT32:
        return a->v.i32 == b->v.i32;
    case BSON_TYPE_INT64:
        return a->v.i64 == b->v.i64;
    case BSON_TYPE_DOUBLE:
        return a->v.d == b->v.d || (isnan(a->v.d) && isnan(b->v.d));
    case BSON_TYPE_DECIMAL128: {
        _IDEC_flags f = 0;
        return memcmp(&a->v.dec, &b->v.dec, sizeof a->v.dec) == 0 ||
               bid128_quiet_equal(bid_of(a->v.dec), bid_of(b->v.dec), &f);
    }
    default:
        return false;
    }
}

void num_append_debug(bson_string_t *s, const num_t *n)
{
    static const char *const tags[] = {"(NumberInt)", "(NumberLong)", "(NumberDouble)",
                                       "(NumberDecimal)"};
    int t = n->type == BSON_TYPE_INT32        ? 0
            : n->type == BSON_TYPE_INT64      ? 1
            : n->type == BSON_TYPE_DOUBLE     ? 2
            : n->type == BSON_TYPE_DECIMAL128 ? 3
                                              : -1;
    if (t < 0) {
        bson_string_append(s, "(EOO)");
        return;
    }
    bson_value_t v;
    bson_string_append(s, tags[t]);
    num_to_value(n, &v);
    shellfmt_append_value(s, &v);
}

/* ---- aggregation arithmetic ---- */

void num_acc_init(num_acc_t *a, int32_t start)
{
    a->type = BSON_TYPE_INT32;
    a->l = start;
    a->d = start;
    a->dec = dec_from_int64(0);
}

/* The running total or product as a decimal (it was not one yet). */
static bson_decimal128_t acc_widen(const num_acc_t *a)
{
    return a->type == BSON_TYPE_DOUBLE ? num_decimal_from_double(a->d, 34) : dec_from_int64(a->l);
}

/* Folds `v` into an accumulator that is, or becomes, decimal; false when
 * neither is a decimal (the integer/double path applies). */
static bool acc_decimal(num_acc_t *a, const bson_value_t *v, bool multiply)
{
    if (a->type != BSON_TYPE_DECIMAL128 && v->value_type != BSON_TYPE_DECIMAL128)
        return false;
    if (a->type != BSON_TYPE_DECIMAL128) {
        a->dec = acc_widen(a);
        a->type = BSON_TYPE_DECIMAL128;
    }
    bson_decimal128_t x = num_to_decimal(v);
    a->dec = multiply ? dec_mul(a->dec, x) : dec_add(a->dec, x);
    return true;
}

static void acc_fold(num_acc_t *a, const bson_value_t *v, bool multiply)
{
    if (acc_decimal(a, v, multiply))
        return;
    double x = num_to_double(v);
    a->d = multiply ? a->d * x : a->d + x;
    if (a->type == BSON_TYPE_DOUBLE)
        return;
    int64_t i;
    if (!value_is_int(v, &i)) {
        a->type = BSON_TYPE_DOUBLE;
        return;
    }
    if (v->value_type == BSON_TYPE_INT64)
        a->type = BSON_TYPE_INT64;
    if (multiply ? __builtin_mul_overflow(a->l, i, &a->l) : __builtin_add_overflow(a->l, i, &a->l))
        a->type = BSON_TYPE_DOUBLE;
}

void num_acc_add(num_acc_t *a, const bson_value_t *v)
{
    acc_fold(a, v, false);
}

void num_acc_mul(num_acc_t *a, const bson_value_t *v)
{
    acc_fold(a, v, true);
}

void num_acc_value(const num_acc_t *a, bson_value_t *out)
{
    if (a->type == BSON_TYPE_DECIMAL128)
        num_value_decimal(out, a->dec);
    else if (a->type == BSON_TYPE_DOUBLE)
        num_value_double(out, a->d);
    else
        value_int(out, a->l, a->type == BSON_TYPE_INT64);
}

int64_t num_acc_millis(const num_acc_t *a)
{
    if (a->type == BSON_TYPE_DECIMAL128) {
        _IDEC_flags f = 0;
        return bid128_to_int64_rnint(bid_of(a->dec), &f);
    }
    if (a->type == BSON_TYPE_DOUBLE)
        return (int64_t)llround(a->d);
    return a->l;
}

void num_subtract(const bson_value_t *a, const bson_value_t *b, bson_value_t *out)
{
    int64_t x, y, r;
    if (a->value_type == BSON_TYPE_DECIMAL128 || b->value_type == BSON_TYPE_DECIMAL128) {
        num_value_decimal(out, dec_sub(num_to_decimal(a), num_to_decimal(b)));
        return;
    }
    if (!value_is_int(a, &x) || !value_is_int(b, &y) || __builtin_sub_overflow(x, y, &r)) {
        num_value_double(out, num_to_double(a) - num_to_double(b));
        return;
    }
    value_int(out, r, a->value_type == BSON_TYPE_INT64 || b->value_type == BSON_TYPE_INT64);
}

bool num_divide(const bson_value_t *a, const bson_value_t *b, bson_value_t *out)
{
    if (a->value_type == BSON_TYPE_DECIMAL128 || b->value_type == BSON_TYPE_DECIMAL128) {
        bson_decimal128_t den = num_to_decimal(b);
        if (dec_is_zero(den))
            return false;
        num_value_decimal(out, dec_div(num_to_decimal(a), den));
        return true;
    }
    if (num_to_double(b) == 0.0)
        return false;
    num_value_double(out, num_to_double(a) / num_to_double(b));
    return true;
}

/* ---- $sum / $avg ---- */

void num_sum_init(num_sum_t *s)
{
    num_acc_init(&s->nondec, 0);
    s->dec = dec_from_int64(0);
    s->has_dec = false;
    s->count = 0;
}

void num_sum_add(num_sum_t *s, const bson_value_t *v)
{
    if (!num_is_number(v))
        return;
    s->count++;
    if (v->value_type == BSON_TYPE_DECIMAL128) {
        s->dec = s->has_dec ? dec_add(s->dec, v->value.v_decimal128) : v->value.v_decimal128;
        s->has_dec = true;
        return;
    }
    num_acc_add(&s->nondec, v);
}

/* Everything added, as a decimal: the decimal total plus the others. */
static bson_decimal128_t sum_decimal(const num_sum_t *s)
{
    return dec_add(s->dec, acc_widen(&s->nondec));
}

void num_sum_value(const num_sum_t *s, bson_value_t *out)
{
    if (s->has_dec)
        num_value_decimal(out, sum_decimal(s));
    else
        num_acc_value(&s->nondec, out);
}

void num_avg_value(const num_sum_t *s, bson_value_t *out)
{
    if (s->count == 0) {
        memset(out, 0, sizeof *out);
        out->value_type = BSON_TYPE_NULL;
    } else if (s->has_dec) {
        num_value_decimal(out, dec_div(sum_decimal(s), dec_from_int64(s->count)));
    } else {
        num_value_double(out, s->nondec.d / (double)s->count);
    }
}

/* ---- Decimal128 transcendental functions (expr/trig.c) ---- */

typedef BID_UINT128 (*dec_fn1_t)(BID_UINT128, _IDEC_round, _IDEC_flags *);

static const dec_fn1_t dec_fns[] = {
    [NUM_DEC_SIN] = bid128_sin,     [NUM_DEC_COS] = bid128_cos,     [NUM_DEC_TAN] = bid128_tan,
    [NUM_DEC_ASIN] = bid128_asin,   [NUM_DEC_ACOS] = bid128_acos,   [NUM_DEC_ATAN] = bid128_atan,
    [NUM_DEC_SINH] = bid128_sinh,   [NUM_DEC_COSH] = bid128_cosh,   [NUM_DEC_TANH] = bid128_tanh,
    [NUM_DEC_ASINH] = bid128_asinh, [NUM_DEC_ACOSH] = bid128_acosh, [NUM_DEC_ATANH] = bid128_atanh,
    [NUM_DEC_LN] = bid128_log,
};

bson_decimal128_t num_decimal_math(num_dec_fn_t fn, bson_decimal128_t x)
{
    _IDEC_flags f = 0;
    return dec_of(dec_fns[fn](bid_of(x), BID_ROUNDING_TO_NEAREST, &f));
}

bson_decimal128_t num_decimal_atan2(bson_decimal128_t y, bson_decimal128_t x)
{
    _IDEC_flags f = 0;
    return dec_of(bid128_atan2(bid_of(y), bid_of(x), BID_ROUNDING_TO_NEAREST, &f));
}

bson_decimal128_t num_decimal_div(bson_decimal128_t a, bson_decimal128_t b)
{
    return dec_div(a, b);
}

bson_decimal128_t num_decimal_mul(bson_decimal128_t a, bson_decimal128_t b)
{
    return dec_mul(a, b);
}

bson_decimal128_t num_decimal_add(bson_decimal128_t a, bson_decimal128_t b)
{
    return dec_add(a, b);
}

bson_decimal128_t num_decimal_sub(bson_decimal128_t a, bson_decimal128_t b)
{
    return dec_sub(a, b);
}

bson_decimal128_t num_decimal_sqrt(bson_decimal128_t x)
{
    _IDEC_flags f = 0;
    return dec_of(bid128_sqrt(bid_of(x), BID_ROUNDING_TO_NEAREST, &f));
}

int num_decimal_cmp(bson_decimal128_t a, bson_decimal128_t b)
{
    _IDEC_flags f = 0;
    if (bid128_quiet_less(bid_of(a), bid_of(b), &f))
        return -1;
    return bid128_quiet_greater(bid_of(a), bid_of(b), &f) ? 1 : 0;
}

bool num_decimal_is_nan(bson_decimal128_t x)
{
    return bid128_isNaN(bid_of(x)) != 0;
}
