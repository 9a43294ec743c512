/* expr/trig: $log and the trigonometric operators — $sin … $atanh, $atan2,
 * $degreesToRadians, $radiansToDegrees. Doubles through libm, Decimal128
 * kept exact through Intel's decimal library (num.h), as mongod does. */
#include "doc/expr/expr-private.h"

#include <math.h>
#include <stdio.h>

#include "util/shellfmt.h"

/* The domain an operator accepts. */
typedef enum trig_bounds {
    TB_ANY,      /* every number (NaN and the infinities too) */
    TB_FINITE,   /* (-inf,inf) */
    TB_UNIT,     /* [-1,1] */
    TB_ATLEAST1, /* [1,inf] */
} trig_bounds_t;

/* The operators op_trig evaluates (a row's aux), in trig_fns' order. */
typedef enum trig_fn {
    TRIG_SIN,
    TRIG_COS,
    TRIG_TAN,
    TRIG_ASIN,
    TRIG_ACOS,
    TRIG_ATAN,
    TRIG_SINH,
    TRIG_COSH,
    TRIG_TANH,
    TRIG_ASINH,
    TRIG_ACOSH,
    TRIG_ATANH,
} trig_fn_t;

/* One operator's functions and domain, indexed by trig_fn_t. */
static const struct {
    double (*fn)(double);
    num_dec_fn_t dec;
    trig_bounds_t bounds;
} trig_fns[] = {
    {sin, NUM_DEC_SIN, TB_FINITE},       {cos, NUM_DEC_COS, TB_FINITE},
    {tan, NUM_DEC_TAN, TB_FINITE},       {asin, NUM_DEC_ASIN, TB_UNIT},
    {acos, NUM_DEC_ACOS, TB_UNIT},       {atan, NUM_DEC_ATAN, TB_ANY},
    {sinh, NUM_DEC_SINH, TB_ANY},        {cosh, NUM_DEC_COSH, TB_ANY},
    {tanh, NUM_DEC_TANH, TB_ANY},        {asinh, NUM_DEC_ASINH, TB_ANY},
    {acosh, NUM_DEC_ACOSH, TB_ATLEAST1}, {atanh, NUM_DEC_ATANH, TB_UNIT},
};

static const char *const bounds_text[] = {"", "(-inf,inf)", "[-1,1]", "[1,inf]"};

/* True when `x` (NaN always is) lies in `b`. */
static bool in_bounds(double x, trig_bounds_t b)
{
    if (isnan(x))
        return true;
    switch (b) {
    case TB_ANY:
        return true;
    case TB_FINITE:
        return isfinite(x);
    case TB_UNIT:
        return x >= -1 && x <= 1;
    case TB_ATLEAST1:
        return x >= 1;
    }
    return false;
}

/* The value as mongod prints it in a bounds error. */
static void print_number(const bson_value_t *v, char *buf, size_t n)
{
    if (v->value_type == BSON_TYPE_DECIMAL128)
        bson_decimal128_to_string(&v->value.v_decimal128, buf);
    else if (v->value_type == BSON_TYPE_INT32)
        snprintf(buf, n, "%d", v->value.v_int32);
    else if (v->value_type == BSON_TYPE_INT64)
        snprintf(buf, n, "%lld", (long long)v->value.v_int64);
    else if (isinf(v->value.v_double))
        snprintf(buf, n, v->value.v_double > 0 ? "inf" : "-inf");
    else
        expr_double_to_string(v->value.v_double, buf, n);
}

/* $sin … $atanh: null for null, double for the binary numbers, Decimal128
 * for a Decimal128. */
static bool op_trig(const expr_t *e, const bson_value_t *v, bson_value_t *out, dberr_t *err)
{
    char buf[BSON_DECIMAL128_STRING + 8];
    int r = expr_one_number(e, v, out, err);
    if (r <= 0)
        return r == 0;
    double x = num_to_double(v);
    trig_bounds_t b = trig_fns[e->op->aux].bounds;
    if (!in_bounds(x, b)) {
        print_number(v, buf, sizeof buf);
        return dberr_set(err, 50989, "cannot apply %s to %s, value must be in %s", e->op->name, buf,
                         bounds_text[b]);
    }
    if (v->value_type == BSON_TYPE_DECIMAL128)
        num_value_decimal(out, num_decimal_math(trig_fns[e->op->aux].dec, v->value.v_decimal128));
    else
        expr_val_double(out, trig_fns[e->op->aux].fn(x));
    return true;
}

static bool op_atan2(const expr_t *e, const bson_value_t *v, bson_value_t *out, dberr_t *err)
{
    if (expr_is_nullish(&v[0]) || expr_is_nullish(&v[1])) {
        expr_val_null(out);
        return true;
    }
    for (int i = 0; i < 2; i++)
        if (!num_is_number(&v[i]))
            return dberr_set(err, i ? 51045 : 51044, "$atan2 only supports numeric types, not %s",
                             shellfmt_type_name(v[i].value_type));
    if (v[0].value_type == BSON_TYPE_DECIMAL128 || v[1].value_type == BSON_TYPE_DECIMAL128)
        num_value_decimal(out, num_decimal_atan2(num_to_decimal(&v[0]), num_to_decimal(&v[1])));
    else
        expr_val_double(out, atan2(num_to_double(&v[0]), num_to_double(&v[1])));
    return true;
}

/* mongod's Decimal128 kPiOver180 and k180OverPi: pi/180 and 180/pi to 34
 * digits. */
static bson_decimal128_t angle_factor(bool to_deg)
{
    bson_decimal128_t k;
    bson_decimal128_from_string(to_deg ? "57.29577951308232087679815481410517"
                                       : "0.01745329251994329576923690768488613",
                                &k);
    return k;
}

/* $degreesToRadians (aux 0) and $radiansToDegrees (aux 1). */
static bool op_angle(const expr_t *e, const bson_value_t *v, bson_value_t *out, dberr_t *err)
{
    bool to_deg = e->op->aux;
    int r = expr_one_number(e, v, out, err);
    if (r <= 0)
        return r == 0;
    if (v->value_type == BSON_TYPE_DECIMAL128) {
        num_value_decimal(out, num_decimal_mul(v->value.v_decimal128, angle_factor(to_deg)));
    } else {
        double x = num_to_double(v);
        expr_val_double(out, to_deg ? x * (180.0 / M_PI) : x * (M_PI / 180.0));
    }
    return true;
}

/* {$log: [number, base]}: double, or Decimal128 when either is one. */
static bool op_log(const expr_t *e, const bson_value_t *v, bson_value_t *out, dberr_t *err)
{
    char buf[BSON_DECIMAL128_STRING + 8];
    if (expr_is_nullish(&v[0]) || expr_is_nullish(&v[1])) {
        expr_val_null(out);
        return true;
    }
    if (!num_is_number(&v[0]))
        return dberr_set(err, 28756, "$log's argument must be numeric, not %s",
                         shellfmt_type_name(v[0].value_type));
    if (!num_is_number(&v[1]))
        return dberr_set(err, 28757, "$log's base must be numeric, not %s",
                         shellfmt_type_name(v[1].value_type));
    double x = num_to_double(&v[0]), b = num_to_double(&v[1]);
    if (!(x > 0) && !isnan(x)) {
        print_number(&v[0], buf, sizeof buf);
        return dberr_set(err, 28758, "$log's argument must be a positive number, but is %s", buf);
    }
    if ((!(b > 0) || b == 1) && !isnan(b)) {
        print_number(&v[1], buf, sizeof buf);
        return dberr_set(err, 28759,
                         "$log's base must be a positive number not equal to 1, but is %s", buf);
    }
    if (v[0].value_type == BSON_TYPE_DECIMAL128 || v[1].value_type == BSON_TYPE_DECIMAL128)
        num_value_decimal(out,
                          num_decimal_div(num_decimal_math(NUM_DEC_LN, num_to_decimal(&v[0])),
                                          num_decimal_math(NUM_DEC_LN, num_to_decimal(&v[1]))));
    else
        expr_val_double(out, log(x) / log(b));
    return true;
}

/* $sin … $atanh: one number through trig_fns[which]. */
#define TRIG_ROW(name, which) {name, .eager = op_trig, .min_args = 1, .max_args = 1, .aux = which}

const expr_op_t expr_trig_ops[] = {
    TRIG_ROW("$acos", TRIG_ACOS),
    TRIG_ROW("$acosh", TRIG_ACOSH),
    TRIG_ROW("$asin", TRIG_ASIN),
    TRIG_ROW("$asinh", TRIG_ASINH),
    TRIG_ROW("$atan", TRIG_ATAN),
    {"$atan2", .eager = op_atan2, .min_args = 2, .max_args = 2},
    TRIG_ROW("$atanh", TRIG_ATANH),
    TRIG_ROW("$cos", TRIG_COS),
    TRIG_ROW("$cosh", TRIG_COSH),
    {"$degreesToRadians", .eager = op_angle, .min_args = 1, .max_args = 1, .aux = 0},
    {"$log", .eager = op_log, .min_args = 2, .max_args = 2},
    {"$radiansToDegrees", .eager = op_angle, .min_args = 1, .max_args = 1, .aux = 1},
    TRIG_ROW("$sin", TRIG_SIN),
    TRIG_ROW("$sinh", TRIG_SINH),
    TRIG_ROW("$tan", TRIG_TAN),
    TRIG_ROW("$tanh", TRIG_TANH),
    {NULL},
};
