/* expr/arith: the arithmetic operators — $add $subtract $multiply $divide
 * $mod $abs $ceil $floor $round $trunc $sqrt $exp $ln $log10 $pow, $sum
 * $avg $stdDevPop $stdDevSamp over arguments, $rand, and the bitwise
 * $bitAnd $bitOr $bitXor $bitNot — through the number model (num.h). */
#include "doc/expr/expr-private.h"

#include <math.h>
#include <string.h>
#include <time.h>

#include "util/shellfmt.h"

/* $add (aux 0: numbers, and at most one date the sum is added to) and
 * $multiply (aux 1): through the number model, null for a nullish operand. */
static bool op_add_mul(const expr_t *e, const expr_ctx_t *ctx, bson_value_t *out, dberr_t *err)
{
    bool mul = e->op->aux;
    num_acc_t acc;
    bool have_date = false;
    int64_t date = 0;
    num_acc_init(&acc, mul ? 1 : 0);
    for (size_t i = 0; i < e->nargs; i++) {
        bson_value_t v;
        bool ok = true;
        if (!expr_eval_node(e->args[i], ctx, &v, err))
            return false;
        if (expr_is_nullish(&v)) {
            expr_val_free(&v);
            expr_val_null(out);
            return true;
        }
        if (num_is_number(&v))
            (mul ? num_acc_mul : num_acc_add)(&acc, &v);
        else if (!mul && v.value_type == BSON_TYPE_DATE_TIME && !have_date)
            have_date = true, date = v.value.v_datetime;
        else if (!mul && v.value_type == BSON_TYPE_DATE_TIME)
            ok = dberr_set(err, 16612, "only one date allowed in an $add expression");
        else if (mul)
            ok = dberr_set(err, 16555, "$multiply only supports numeric types, not %s",
                           shellfmt_type_name(v.value_type));
        else
            ok = dberr_set(err, DBERR_LOCATION_16554,
                           "$add only supports numeric or date types, not %s",
                           shellfmt_type_name(v.value_type));
        expr_val_free(&v);
        if (!ok)
            return false;
    }
    if (have_date)
        expr_val_date(out, date + num_acc_millis(&acc));
    else
        num_acc_value(&acc, out);
    return true;
}

static bool op_subtract(const expr_t *e, const bson_value_t *v, bson_value_t *out, dberr_t *err)
{
    bool ok = true;
    if (expr_is_nullish(&v[0]) || expr_is_nullish(&v[1])) {
        expr_val_null(out);
    } else if (num_is_number(&v[0]) && num_is_number(&v[1])) {
        num_subtract(&v[0], &v[1], out);
    } else if (v[0].value_type == BSON_TYPE_DATE_TIME && v[1].value_type == BSON_TYPE_DATE_TIME) {
        expr_val_int64(out, v[0].value.v_datetime - v[1].value.v_datetime);
    } else if (v[0].value_type == BSON_TYPE_DATE_TIME && num_is_number(&v[1])) {
        int64_t d = v[1].value_type == BSON_TYPE_INT32   ? v[1].value.v_int32
                    : v[1].value_type == BSON_TYPE_INT64 ? v[1].value.v_int64
                                                         : (int64_t)llround(num_to_double(&v[1]));
        expr_val_date(out, v[0].value.v_datetime - d);
    } else {
        ok = dberr_set(err, DBERR_TYPE_MISMATCH, "can't $subtract %s from %s",
                       shellfmt_type_name(v[1].value_type), shellfmt_type_name(v[0].value_type));
    }
    return ok;
}

/* The two arguments of $divide/$mod: true with *done when `out` is already
 * the answer (null for a nullish argument); false with `code` unless both
 * are numbers. */
static bool two_numbers(const expr_t *e, const bson_value_t *v, int code, bson_value_t *out,
                        bool *done, dberr_t *err)
{
    *done = expr_is_nullish(&v[0]) || expr_is_nullish(&v[1]);
    if (*done)
        expr_val_null(out);
    else if (!num_is_number(&v[0]) || !num_is_number(&v[1]))
        return dberr_set(err, code, "%s only supports numeric types, not %s and %s", e->op->name,
                         shellfmt_type_name(v[0].value_type), shellfmt_type_name(v[1].value_type));
    return true;
}

static bool op_divide(const expr_t *e, const bson_value_t *v, bson_value_t *out, dberr_t *err)
{
    bool done;
    if (!two_numbers(e, v, 16609, out, &done, err))
        return false;
    return done || num_divide(&v[0], &v[1], out) || dberr_set(err, 16608, "can't $divide by zero");
}

static bool op_mod(const expr_t *e, const bson_value_t *v, bson_value_t *out, dberr_t *err)
{
    bool ok = true, done;
    if (!two_numbers(e, v, 16611, out, &done, err)) {
        ok = false;
    } else if (done) {
    } else if (num_to_double(&v[1]) == 0.0) {
        ok = dberr_set(err, 16610, "can't $mod by 0");
    } else if (v[0].value_type == BSON_TYPE_DOUBLE || v[1].value_type == BSON_TYPE_DOUBLE ||
               v[0].value_type == BSON_TYPE_DECIMAL128 || v[1].value_type == BSON_TYPE_DECIMAL128) {
        expr_val_double(out, fmod(num_to_double(&v[0]), num_to_double(&v[1])));
    } else {
        int64_t a = v[0].value_type == BSON_TYPE_INT32 ? v[0].value.v_int32 : v[0].value.v_int64;
        int64_t b = v[1].value_type == BSON_TYPE_INT32 ? v[1].value.v_int32 : v[1].value.v_int64;
        int64_t r = (b == -1) ? 0 : a % b;
        if (v[0].value_type == BSON_TYPE_INT32 && v[1].value_type == BSON_TYPE_INT32)
            expr_val_int32(out, (int32_t)r);
        else
            expr_val_int64(out, r);
    }
    return ok;
}

int expr_one_number(const expr_t *e, const bson_value_t *v, bson_value_t *out, dberr_t *err)
{
    if (expr_is_nullish(v)) {
        expr_val_null(out);
        return 0;
    }
    if (!num_is_number(v)) {
        dberr_set(err, 28765, "%s only supports numeric types, not %s", e->op->name,
                  shellfmt_type_name(v->value_type));
        return -1;
    }
    return 1;
}

static bool op_abs(const expr_t *e, const bson_value_t *v, bson_value_t *out, dberr_t *err)
{
    int go = expr_one_number(e, v, out, err);
    if (go <= 0)
        return go == 0;
    switch (v->value_type) {
    case BSON_TYPE_INT32:
        if (v->value.v_int32 == INT32_MIN)
            expr_val_int64(out, -(int64_t)INT32_MIN);
        else
            expr_val_int32(out, v->value.v_int32 < 0 ? -v->value.v_int32 : v->value.v_int32);
        break;
    case BSON_TYPE_INT64:
        if (v->value.v_int64 == INT64_MIN)
            return dberr_set(err, 28680, "can't take $abs of long long min");
        expr_val_int64(out, v->value.v_int64 < 0 ? -v->value.v_int64 : v->value.v_int64);
        break;
    default:
        expr_val_double(out, fabs(num_to_double(v)));
        break;
    }
    return true;
}

/* $ceil (aux 1) and $floor. */
static bool op_rounding(const expr_t *e, const bson_value_t *v, bson_value_t *out, dberr_t *err)
{
    double (*fn)(double) = e->op->aux ? ceil : floor;
    int go = expr_one_number(e, v, out, err);
    if (go <= 0)
        return go == 0;
    if (v->value_type == BSON_TYPE_INT32 || v->value_type == BSON_TYPE_INT64)
        bson_value_copy(v, out);
    else
        expr_val_double(out, fn(num_to_double(v)));
    return true;
}

/* Rounds half to even, as $round does. */
static double round_even(double x)
{
    return nearbyint(x);
}

/* $round and $trunc: [number, place]. */
static bool round_trunc(const expr_t *e, const bson_value_t *v, bson_value_t *out, dberr_t *err)
{
    bool is_round = e->op->aux;
    bool ok = true;
    long place = 0;
    if (expr_is_nullish(&v[0]) || (e->nargs > 1 && expr_is_nullish(&v[1]))) {
        expr_val_null(out);
        goto cleanup;
    }
    if (!num_is_number(&v[0])) {
        ok = dberr_set(err, 51081, "%s only supports numeric types, not %s", e->op->name,
                       shellfmt_type_name(v[0].value_type));
        goto cleanup;
    }
    if (e->nargs > 1) {
        double p = num_is_number(&v[1]) ? num_to_double(&v[1]) : NAN;
        if (!num_is_number(&v[1]) || p != floor(p)) {
            ok = dberr_set(err, 51082, "precision argument to %s must be a integral value",
                           e->op->name);
            goto cleanup;
        }
        if (p < -20 || p > 100) {
            ok = dberr_set(err, 51083,
                           "cannot apply %s with precision value %g value must be in [-20, 100]",
                           e->op->name, p);
            goto cleanup;
        }
        place = (long)p;
    }
    if (v[0].value_type == BSON_TYPE_INT32 || v[0].value_type == BSON_TYPE_INT64) {
        int64_t x = v[0].value_type == BSON_TYPE_INT32 ? v[0].value.v_int32 : v[0].value.v_int64;
        if (place >= 0) {
            bson_value_copy(&v[0], out);
            goto cleanup;
        }
        double scale = pow(10.0, (double)-place);
        double r =
            is_round ? round_even((double)x / scale) * scale : trunc((double)x / scale) * scale;
        if (v[0].value_type == BSON_TYPE_INT32 && r >= INT32_MIN && r <= INT32_MAX)
            expr_val_int32(out, (int32_t)r);
        else if (r >= -9.2e18 && r <= 9.2e18)
            expr_val_int64(out, (int64_t)r);
        else
            expr_val_double(out, r);
        goto cleanup;
    }
    {
        double x = num_to_double(&v[0]), r;
        if (!isfinite(x)) {
            r = x;
        } else if (place >= 0) {
            double scale = pow(10.0, (double)place);
            double y = x * scale;
            if (!isfinite(y))
                r = x;
            else
                r = (is_round ? round_even(y) : trunc(y)) / scale;
        } else {
            double scale = pow(10.0, (double)-place);
            r = (is_round ? round_even(x / scale) : trunc(x / scale)) * scale;
        }
        expr_val_double(out, r);
    }
cleanup:
    return ok;
}

/* $sqrt / $exp / $ln / $log10: double results, null on null. */
/* The functions of $sqrt $exp $ln $log10 (aux indexes them), and which
 * arguments they refuse. */
static const struct {
    double (*fn)(double);
    bool need_nonneg, need_pos;
} math1_fns[] = {
    {sqrt, true, false}, {exp, false, false}, {log, false, true}, {log10, false, true}};

static bool math1(const expr_t *e, const bson_value_t *v, bson_value_t *out, dberr_t *err)
{
    double (*fn)(double) = math1_fns[e->op->aux].fn;
    bool need_nonneg = math1_fns[e->op->aux].need_nonneg, need_pos = math1_fns[e->op->aux].need_pos;
    int go = expr_one_number(e, v, out, err);
    if (go <= 0)
        return go == 0;
    double x = num_to_double(v);
    if (need_nonneg && x < 0)
        return dberr_set(err, 28714, "%s's argument must be greater than or equal to 0",
                         e->op->name);
    if (need_pos && !(x > 0))
        return dberr_set(err, 28766, "%s's argument must be a positive number, but is %g",
                         e->op->name, x);
    expr_val_double(out, fn(x));
    return true;
}

static bool op_pow(const expr_t *e, const bson_value_t *v, bson_value_t *out, dberr_t *err)
{
    bool ok = true;
    if (expr_is_nullish(&v[0]) || expr_is_nullish(&v[1])) {
        expr_val_null(out);
    } else if (!num_is_number(&v[0])) {
        ok = dberr_set(err, 28762, "$pow's base must be numeric, not %s",
                       shellfmt_type_name(v[0].value_type));
    } else if (!num_is_number(&v[1])) {
        ok = dberr_set(err, 28763, "$pow's exponent must be numeric, not %s",
                       shellfmt_type_name(v[1].value_type));
    } else {
        double b = num_to_double(&v[0]), x = num_to_double(&v[1]);
        if (b == 0 && x < 0) {
            ok = dberr_set(err, 28764, "$pow cannot take a base of 0 and a negative exponent");
        } else if ((v[0].value_type == BSON_TYPE_INT32 || v[0].value_type == BSON_TYPE_INT64) &&
                   (v[1].value_type == BSON_TYPE_INT32 || v[1].value_type == BSON_TYPE_INT64) &&
                   x >= 0) {
            num_acc_t acc;
            num_acc_init(&acc, 1);
            int64_t n =
                v[1].value_type == BSON_TYPE_INT32 ? v[1].value.v_int32 : v[1].value.v_int64;
            int64_t base =
                v[0].value_type == BSON_TYPE_INT32 ? v[0].value.v_int32 : v[0].value.v_int64;
            if (base >= -1 && base <= 1) {
                /* |base| <= 1 never overflows: answer directly, no loop */
                acc.l = base == 0 ? (n == 0 ? 1 : 0) : base == 1 ? 1 : (n % 2 ? -1 : 1);
                acc.d = (double)acc.l;
            } else {
                for (int64_t i = 0; i < n && acc.type != BSON_TYPE_DOUBLE; i++)
                    num_acc_mul(&acc, &v[0]);
            }
            if (acc.type == BSON_TYPE_DOUBLE)
                acc.d = pow(b, x);
            if (v[0].value_type == BSON_TYPE_INT64 || v[1].value_type == BSON_TYPE_INT64)
                if (acc.type == BSON_TYPE_INT32)
                    acc.type = BSON_TYPE_INT64;
            num_acc_value(&acc, out);
        } else {
            expr_val_double(out, pow(b, x));
        }
    }
    return ok;
}

static void sum_fn(const bson_value_t *v, void *p)
{
    num_sum_add(p, v);
}

/* $sum and $avg (aux 1) over the operands, as the accumulators. */
static bool op_sum_avg(const expr_t *e, const expr_ctx_t *ctx, bson_value_t *out, dberr_t *err)
{
    num_sum_t st;
    num_sum_init(&st);
    if (!expr_for_operands(e, ctx, sum_fn, &st, err))
        return false;
    if (e->op->aux)
        num_avg_value(&st, out);
    else
        num_sum_value(&st, out);
    return true;
}

/* Welford's running count, mean and sum of squared deviations. */
typedef struct stddev_st {
    int64_t n;
    double mean, m2;
} stddev_st_t;

static void stddev_fn(const bson_value_t *v, void *p)
{
    stddev_st_t *st = p;
    if (!num_is_number(v))
        return;
    double x = num_to_double(v), d = x - st->mean;
    st->n++;
    st->mean += d / (double)st->n;
    st->m2 += d * (x - st->mean);
}

/* $stdDevPop (aux 0) and $stdDevSamp (aux 1) over the numeric operands;
 * null when there are too few. */
static bool op_stddev(const expr_t *e, const expr_ctx_t *ctx, bson_value_t *out, dberr_t *err)
{
    stddev_st_t st = {0, 0, 0};
    if (!expr_for_operands(e, ctx, stddev_fn, &st, err))
        return false;
    int64_t denom = st.n - e->op->aux;
    if (denom <= 0)
        expr_val_null(out);
    else
        expr_val_double(out, sqrt(st.m2 / (double)denom));
    return true;
}

/* $bitAnd (aux 0), $bitOr (1), $bitXor (2): int while every operand is
 * one, else long; null for a nullish operand. */
static bool op_bitwise(const expr_t *e, const expr_ctx_t *ctx, bson_value_t *out, dberr_t *err)
{
    int64_t acc = e->op->aux == 0 ? -1 : 0;
    bool is_long = false, null = false;
    for (size_t i = 0; i < e->nargs; i++) {
        bson_value_t v;
        if (!expr_eval_node(e->args[i], ctx, &v, err))
            return false;
        if (expr_is_nullish(&v)) {
            null = true;
        } else if (v.value_type != BSON_TYPE_INT32 && v.value_type != BSON_TYPE_INT64) {
            expr_val_free(&v);
            return dberr_set(err, DBERR_TYPE_MISMATCH, "%s only supports int and long operands.",
                             e->op->name);
        } else {
            int64_t x = v.value_type == BSON_TYPE_INT32 ? v.value.v_int32 : v.value.v_int64;
            is_long |= v.value_type == BSON_TYPE_INT64;
            acc = e->op->aux == 0 ? acc & x : e->op->aux == 1 ? acc | x : acc ^ x;
        }
        expr_val_free(&v);
    }
    if (null)
        expr_val_null(out);
    else if (is_long)
        expr_val_int64(out, acc);
    else
        expr_val_int32(out, (int32_t)acc);
    return true;
}

static bool op_bitnot(const expr_t *e, const bson_value_t *v, bson_value_t *out, dberr_t *err)
{
    if (expr_is_nullish(v))
        expr_val_null(out);
    else if (v->value_type == BSON_TYPE_INT32)
        expr_val_int32(out, ~v->value.v_int32);
    else if (v->value_type == BSON_TYPE_INT64)
        expr_val_int64(out, ~v->value.v_int64);
    else
        return dberr_set(err, DBERR_TYPE_MISMATCH, "$bitNot only supports int and long operands.");
    return true;
}

/* $rand: a double in [0, 1). */
static bool op_rand(const expr_t *e, const expr_ctx_t *ctx, bson_value_t *out, dberr_t *err)
{
    static uint64_t state;
    (void)e;
    (void)ctx;
    (void)err;
    if (state == 0) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        state = ((uint64_t)ts.tv_sec * 1000000007u) ^ (uint64_t)ts.tv_nsec ^
                (uint64_t)(uintptr_t)&state;
        if (state == 0)
            state = 88172645463325252ULL;
    }
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    expr_val_double(out, (double)(state >> 11) / 9007199254740992.0);
    return true;
}

const expr_op_t expr_arith_ops[] = {
    {"$abs", .eager = op_abs, .min_args = 1, .max_args = 1},
    {"$add", .fn = op_add_mul, .max_args = -1, .aux = 0},
    {"$avg", .fn = op_sum_avg, .max_args = -1, .aux = 1},
    {"$bitAnd", .fn = op_bitwise, .max_args = -1, .aux = 0},
    {"$bitNot", .eager = op_bitnot, .min_args = 1, .max_args = 1},
    {"$bitOr", .fn = op_bitwise, .max_args = -1, .aux = 1},
    {"$bitXor", .fn = op_bitwise, .max_args = -1, .aux = 2},
    {"$ceil", .eager = op_rounding, .min_args = 1, .max_args = 1, .aux = 1},
    {"$divide", .eager = op_divide, .min_args = 2, .max_args = 2},
    {"$exp", .eager = math1, .min_args = 1, .max_args = 1, .aux = 1},
    {"$floor", .eager = op_rounding, .min_args = 1, .max_args = 1, .aux = 0},
    {"$ln", .eager = math1, .min_args = 1, .max_args = 1, .aux = 2},
    {"$log10", .eager = math1, .min_args = 1, .max_args = 1, .aux = 3},
    {"$mod", .eager = op_mod, .min_args = 2, .max_args = 2},
    {"$multiply", .fn = op_add_mul, .max_args = -1, .aux = 1},
    {"$pow", .eager = op_pow, .min_args = 2, .max_args = 2},
    {"$rand", .fn = op_rand, .parse = OPP_NOARGS},
    {"$round", .eager = round_trunc, .min_args = 1, .max_args = 2, .aux = 1},
    {"$sqrt", .eager = math1, .min_args = 1, .max_args = 1, .aux = 0},
    {"$stdDevPop", .fn = op_stddev, .max_args = -1, .aux = 0},
    {"$stdDevSamp", .fn = op_stddev, .max_args = -1, .aux = 1},
    {"$subtract", .eager = op_subtract, .min_args = 2, .max_args = 2},
    {"$sum", .fn = op_sum_avg, .max_args = -1, .aux = 0},
    {"$trunc", .eager = round_trunc, .min_args = 1, .max_args = 2, .aux = 0},
    {NULL},
};
