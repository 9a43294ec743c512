/* expr/array: the array operators — $size $arrayElemAt $slice $first
 * $last $in $indexOfArray $isArray $concatArrays $reverseArray $range, and
 * the ones that bind $$this: $map $filter $reduce. */
#include "doc/expr/expr-private.h"

#include <string.h>

#include "util/fiber.h"
#include "util/shellfmt.h"

static bool op_size(const expr_t *e, const bson_value_t *v, bson_value_t *out, dberr_t *err)
{
    if (v->value_type != BSON_TYPE_ARRAY) {
        const char *tn = shellfmt_type_name(v->value_type);
        return dberr_set(err, 17124, "The argument to $size must be an array. Type of argument: %s",
                         tn);
    }
    bson_t b;
    expr_bson_of(v, &b);
    expr_val_int32(out, (int32_t)bson_count_keys(&b));
    return true;
}

static bool op_arrayelemat(const expr_t *e, const bson_value_t *v, bson_value_t *out, dberr_t *err)
{
    bool ok = true;
    int32_t idx;
    if (expr_is_nullish(&v[0]) || expr_is_nullish(&v[1])) {
        expr_val_null(out);
    } else if (v[0].value_type != BSON_TYPE_ARRAY) {
        ok = dberr_set(err, 28689, "$arrayElemAt's first argument must be an array, but is %s",
                       shellfmt_type_name(v[0].value_type));
    } else if (!num_is_number(&v[1])) {
        ok = dberr_set(err, 28690,
                       "$arrayElemAt's second argument must be a numeric value, but is %s",
                       shellfmt_type_name(v[1].value_type));
    } else if (!expr_as_int32(&v[1], &idx)) {
        ok = dberr_set(
            err, 28691,
            "$arrayElemAt's second argument must be representable as a 32-bit integer: %g",
            num_to_double(&v[1]));
    } else {
        bson_t b;
        bson_iter_t it;
        expr_bson_of(&v[0], &b);
        int32_t n = (int32_t)bson_count_keys(&b);
        int64_t i = idx < 0 ? (int64_t)n + idx : idx;
        expr_val_missing(out);
        if (i >= 0 && i < n && bson_iter_init(&it, &b)) {
            for (int64_t j = 0; bson_iter_next(&it); j++)
                if (j == i) {
                    bson_value_copy(bson_iter_value(&it), out);
                    break;
                }
        }
    }
    return ok;
}

/* $slice: [array, n] or [array, position, n]. */
static bool op_slice(const expr_t *e, const bson_value_t *v, bson_value_t *out, dberr_t *err)
{
    bool ok = true;
    int32_t a = 0, b = 0;
    bool nul = false;
    for (size_t i = 0; i < e->nargs; i++)
        nul |= expr_is_nullish(&v[i]);
    if (nul) {
        expr_val_null(out);
        goto cleanup;
    }
    if (!expr_check_type(&v[0], BSON_TYPE_ARRAY, 28724,
                         "First argument to $slice must be an array, but is of type: %s", err))
        return false;
    if (!expr_as_int32(&v[1], &a) || (e->nargs == 3 && !expr_as_int32(&v[2], &b))) {
        ok = dberr_set(err, 28725, "Second argument to $slice must be a numeric value");
        goto cleanup;
    }
    if (e->nargs == 3 && b <= 0) {
        ok = dberr_set(err, 28729, "Third argument to $slice must be positive: %d", b);
        goto cleanup;
    }
    {
        bson_t arr, res;
        bson_iter_t it;
        expr_bson_of(&v[0], &arr);
        int64_t len = bson_count_keys(&arr), from, count;
        if (e->nargs == 2) {
            if (a >= 0) {
                from = 0;
                count = a;
            } else {
                from = len + a < 0 ? 0 : len + a;
                count = len;
            }
        } else {
            from = a >= 0 ? a : (len + a < 0 ? 0 : len + a);
            count = b;
        }
        bson_init(&res);
        uint32_t idx = 0;
        if (bson_iter_init(&it, &arr))
            for (int64_t i = 0; bson_iter_next(&it); i++)
                if (i >= from && i < from + count) {
                    char key[16];
                    const char *k;
                    bson_uint32_to_string(idx++, &k, key, sizeof key);
                    bson_append_value(&res, k, -1, bson_iter_value(&it));
                }
        expr_value_take_bson(out, &res, BSON_TYPE_ARRAY);
    }
cleanup:
    return ok;
}

/* $first / $last (array expression form). */
static bool op_first_last(const expr_t *e, const bson_value_t *v, bson_value_t *out, dberr_t *err)
{
    bool first = e->op->aux;
    bson_t b;
    bson_iter_t it;
    expr_bson_of(v, &b);
    expr_val_missing(out);
    if (bson_iter_init(&it, &b)) {
        while (bson_iter_next(&it)) {
            expr_val_free(out);
            bson_value_copy(bson_iter_value(&it), out);
            if (first)
                break;
        }
    }
    return true;
}

/* $in: strings compare by the context's collation. */
static bool op_in(const expr_t *e, const expr_ctx_t *ctx, bson_value_t *out, dberr_t *err)
{
    bson_value_t v[2];
    if (!expr_eval_args(e, ctx, v, err))
        return false;
    bool ok = true;
    if (v[1].value_type != BSON_TYPE_ARRAY) {
        ok = dberr_set(err, 40081, "$in requires an array as a second argument, found: %s",
                       shellfmt_type_name(v[1].value_type));
    } else {
        bson_t b;
        bson_iter_t it;
        bool found = false;
        expr_bson_of(&v[1], &b);
        if (bson_iter_init(&it, &b))
            while (!found && bson_iter_next(&it))
                found = expr_agg_compare_coll(&v[0], bson_iter_value(&it), ctx->coll) == 0;
        expr_val_bool(out, found);
    }
    expr_free_args(v, e->nargs);
    return ok;
}

/* $indexOfArray: strings compare by the context's collation. */
static bool indexofarray(const expr_t *e, const bson_value_t *v, const collation_t *coll,
                         bson_value_t *out, dberr_t *err)
{
    bool ok = true;
    int32_t start = 0, end = INT32_MAX;
    if (expr_is_nullish(&v[0])) {
        expr_val_null(out);
        goto cleanup;
    }
    if (!expr_check_type(&v[0], BSON_TYPE_ARRAY, 40090,
                         "$indexOfArray requires an array as a first argument, found: %s", err))
        return false;
    if ((e->nargs > 2 && (!expr_as_int32(&v[2], &start) || start < 0)) ||
        (e->nargs > 3 && (!expr_as_int32(&v[3], &end) || end < 0))) {
        ok = dberr_set(err, 40097, "$indexOfArray requires a non-negative integral index");
        goto cleanup;
    }
    {
        bson_t b;
        bson_iter_t it;
        int32_t found = -1;
        expr_bson_of(&v[0], &b);
        if (bson_iter_init(&it, &b))
            for (int32_t i = 0; bson_iter_next(&it) && i < end; i++)
                if (i >= start && expr_agg_compare_coll(&v[1], bson_iter_value(&it), coll) == 0) {
                    found = i;
                    break;
                }
        expr_val_int32(out, found);
    }
cleanup:
    return ok;
}

static bool op_indexofarray(const expr_t *e, const expr_ctx_t *ctx, bson_value_t *out,
                            dberr_t *err)
{
    bson_value_t v[4];
    if (!expr_eval_args(e, ctx, v, err))
        return false;
    bool ok = indexofarray(e, v, ctx->coll, out, err);
    expr_free_args(v, e->nargs);
    return ok;
}

static bool op_isarray(const expr_t *e, const bson_value_t *v, bson_value_t *out, dberr_t *err)
{
    expr_val_bool(out, v->value_type == BSON_TYPE_ARRAY);
    return true;
}

/* One $concatArrays input appended to `acc` (a null input makes the
 * result null; *is_null in `st`). */
static bool concat_one(const expr_t *e, size_t i, const bson_value_t *v, bson_t *acc, void *st,
                       dberr_t *err)
{
    bool *is_null = st;
    if (expr_is_nullish(v)) {
        *is_null = true;
        return true;
    }
    if (!expr_check_type(v, BSON_TYPE_ARRAY, 28664, "$concatArrays only supports arrays, not %s",
                         err))
        return false;
    bson_t b;
    bson_iter_t it;
    uint32_t idx = bson_count_keys(acc);
    expr_bson_of(v, &b);
    if (!*is_null && bson_iter_init(&it, &b))
        while (bson_iter_next(&it))
            expr_array_append(acc, &idx, bson_iter_value(&it));
    return true;
}

static bool op_concatarrays(const expr_t *e, const expr_ctx_t *ctx, bson_value_t *out, dberr_t *err)
{
    bson_t arr;
    bool is_null = false;
    if (!expr_fold_args(e, ctx, concat_one, &is_null, &arr, err))
        return false;
    if (is_null) {
        bson_destroy(&arr);
        expr_val_null(out);
    } else {
        expr_value_take_bson(out, &arr, BSON_TYPE_ARRAY);
    }
    return true;
}

static bool op_reversearray(const expr_t *e, const bson_value_t *v, bson_value_t *out, dberr_t *err)
{
    bson_t b, arr;
    bson_iter_t it;
    size_t n = 0;
    expr_bson_of(v, &b);
    n = bson_count_keys(&b);
    bson_value_t *copies = bson_malloc0((n ? n : 1) * sizeof *copies);
    size_t j = 0;
    if (bson_iter_init(&it, &b))
        while (j < n && bson_iter_next(&it))
            bson_value_copy(bson_iter_value(&it), &copies[j++]);
    n = j;
    bson_init(&arr);
    for (size_t i = 0; i < n; i++) {
        char key[16];
        const char *k;
        bson_uint32_to_string((uint32_t)i, &k, key, sizeof key);
        bson_append_value(&arr, k, -1, &copies[n - 1 - i]);
    }
    expr_free_args(copies, n);
    bson_free(copies);
    expr_value_take_bson(out, &arr, BSON_TYPE_ARRAY);
    return true;
}

static bool op_range(const expr_t *e, const bson_value_t *v, bson_value_t *out, dberr_t *err)
{
    int32_t a, b, step = 1;
    bool ok = true;
    if (!expr_as_int32(&v[0], &a) || !expr_as_int32(&v[1], &b) ||
        (e->nargs > 2 && !expr_as_int32(&v[2], &step))) {
        ok = dberr_set(err, 34443,
                       "$range requires numeric arguments representable as 32-bit integers");
    } else if (step == 0) {
        ok = dberr_set(err, 34449, "$range requires a non-zero step value");
    } else {
        bson_t arr;
        uint32_t idx = 0;
        bson_init(&arr);
        for (int64_t i = a; step > 0 ? i < b : i > b; i += step) {
            char key[16];
            const char *k;
            bson_uint32_to_string(idx++, &k, key, sizeof key);
            bson_append_int32(&arr, k, -1, (int32_t)i);
            if (idx >= 1000000) {
                bson_destroy(&arr);
                return dberr_set(err, 548, "$range would use too much memory");
            }
        }
        expr_value_take_bson(out, &arr, BSON_TYPE_ARRAY);
    }
    return ok;
}

/* $map {input, as, in} and $filter {input, as, cond, limit}. */
static bool map_filter(const expr_t *e, const expr_ctx_t *ctx, bson_value_t *out, dberr_t *err)
{
    bool is_map = e->op->aux;
    bson_value_t input, asv;
    bool ok = true;
    const char *as = "this";
    int64_t limit = -1;
    bson_t arr;
    bson_init(&arr);
    if (!expr_eval_arg(e, 0, ctx, &input, err)) {
        bson_destroy(&arr);
        return false;
    }
    expr_val_missing(&asv);
    if (e->args[1]) {
        if (!expr_eval_node(e->args[1], ctx, &asv, err)) {
            ok = false;
            goto cleanup;
        }
        if (asv.value_type == BSON_TYPE_UTF8)
            as = asv.value.v_utf8.str;
    }
    if (!is_map && e->nargs > 3 && e->args[3]) {
        bson_value_t lv;
        int32_t l;
        if (!expr_eval_node(e->args[3], ctx, &lv, err)) {
            ok = false;
            goto cleanup;
        }
        if (!expr_is_nullish(&lv)) {
            if (!expr_as_int32(&lv, &l) || l < 1) {
                expr_val_free(&lv);
                ok = dberr_set(err, 327391, "$filter: limit must be greater than 0");
                goto cleanup;
            }
            limit = l;
        }
        expr_val_free(&lv);
    }
    if (expr_is_nullish(&input)) {
        expr_val_null(out);
        goto cleanup;
    }
    if (input.value_type != BSON_TYPE_ARRAY) {
        ok = dberr_set(err, is_map ? 16883 : 28651, "input to %s must be an array not %s",
                       e->op->name, shellfmt_type_name(input.value_type));
        goto cleanup;
    }
    {
        bson_t b;
        bson_iter_t it;
        uint32_t idx = 0;
        expr_bson_of(&input, &b);
        if (bson_iter_init(&it, &b))
            while (bson_iter_next(&it) && (limit < 0 || idx < limit)) {
                bson_value_t elem, r;
                bson_t vars;
                bson_value_copy(bson_iter_value(&it), &elem);
                expr_bind_var(&vars, ctx->vars, as, &elem);
                expr_ctx_t inner = *ctx;
                inner.vars = &vars;
                ok = expr_eval_node(e->args[2], &inner, &r, err);
                bson_destroy(&vars);
                if (ok) {
                    char key[16];
                    const char *k;
                    if (is_map) {
                        bson_uint32_to_string(idx++, &k, key, sizeof key);
                        if (r.value_type == BSON_TYPE_EOD)
                            bson_append_null(&arr, k, -1);
                        else
                            bson_append_value(&arr, k, -1, &r);
                    } else if (expr_truthy(&r)) {
                        bson_uint32_to_string(idx++, &k, key, sizeof key);
                        bson_append_value(&arr, k, -1, &elem);
                    }
                    expr_val_free(&r);
                    if (arr.len > EXPR_MAX_VALUE_BYTES)
                        ok = dberr_set(err, DBERR_BSON_OBJECT_TOO_LARGE,
                                       "%s would build a value of more than %d bytes (16 MB)",
                                       e->op->name, EXPR_MAX_VALUE_BYTES);
                    else
                        ok = fiber_alive(err); /* maxTimeMS, killOp */
                }
                expr_val_free(&elem);
                if (!ok)
                    goto cleanup;
            }
        expr_value_take_bson(out, &arr, BSON_TYPE_ARRAY);
        bson_init(&arr);
    }
cleanup:
    bson_destroy(&arr);
    expr_val_free(&input);
    expr_val_free(&asv);
    return ok;
}

/* $reduce {input, initialValue, in} with $$value and $$this. */
static bool op_reduce(const expr_t *e, const expr_ctx_t *ctx, bson_value_t *out, dberr_t *err)
{
    bson_value_t input, acc;
    bool ok = true;
    if (!expr_eval_arg(e, 0, ctx, &input, err))
        return false;
    if (!expr_eval_arg(e, 1, ctx, &acc, err)) {
        expr_val_free(&input);
        return false;
    }
    if (expr_is_nullish(&input)) {
        expr_val_null(out);
        goto cleanup;
    }
    if (input.value_type != BSON_TYPE_ARRAY) {
        ok = dberr_set(err, 40080, "$reduce requires that 'input' be an array, found: %s",
                       shellfmt_type_name(input.value_type));
        goto cleanup;
    }
    {
        bson_t b;
        bson_iter_t it;
        expr_bson_of(&input, &b);
        if (bson_iter_init(&it, &b))
            while (bson_iter_next(&it)) {
                bson_t vars, tmp;
                bson_value_t r, nul;
                expr_val_null(&nul);
                expr_bind_var(&tmp, ctx->vars, "this", bson_iter_value(&it));
                expr_bind_var(&vars, &tmp, "value", acc.value_type == BSON_TYPE_EOD ? &nul : &acc);
                bson_destroy(&tmp);
                expr_ctx_t inner = *ctx;
                inner.vars = &vars;
                ok = expr_eval_node(e->args[2], &inner, &r, err);
                if (ok && !fiber_alive(err)) { /* maxTimeMS, killOp */
                    expr_val_free(&r);
                    ok = false;
                }
                bson_destroy(&vars);
                if (!ok)
                    goto cleanup;
                expr_val_free(&acc);
                acc = r;
            }
        *out = acc;
        expr_val_missing(&acc);
    }
cleanup:
    expr_val_free(&input);
    expr_val_free(&acc);
    return ok;
}

/* $map / $filter: `in`/`cond` (argument 2) sees $$<as> (default this). */
static bool map_scope(const expr_t *e, const var_scope_t *scope, const bson_t *vars, dberr_t *err)
{
    var_scope_t as = {"this", scope};
    const expr_t *asx = e->args[1];
    if (asx && asx->kind == EK_CONST && asx->cval.value_type == BSON_TYPE_UTF8)
        as.name = asx->cval.value.v_utf8.str;
    for (size_t i = 0; i < e->nargs; i++)
        if (!expr_check_scope(e->args[i], i == 2 ? &as : scope, vars, err))
            return false;
    return true;
}

/* $reduce: `in` (argument 2) sees $$this and $$value. */
static bool reduce_scope(const expr_t *e, const var_scope_t *scope, const bson_t *vars,
                         dberr_t *err)
{
    var_scope_t this_s = {"this", scope}, value_s = {"value", &this_s};
    for (size_t i = 0; i < e->nargs; i++)
        if (!expr_check_scope(e->args[i], i == 2 ? &value_s : scope, vars, err))
            return false;
    return true;
}

const expr_op_t expr_array_ops[] = {
    {"$arrayElemAt", .eager = op_arrayelemat, .min_args = 2, .max_args = 2},
    {"$concatArrays", .fn = op_concatarrays, .max_args = -1},
    {"$filter", .fn = map_filter, .parse = OPP_NAMED, .params = {"!input", "as", "!cond", "limit"},
     .scope = map_scope},
    {"$first", .eager = op_first_last, .min_args = 1, .max_args = 1, .aux = 1,
     .input = {BSON_TYPE_ARRAY, 28689, "$first's argument must be an array, but is %s"}},
    {"$in", .fn = op_in, .min_args = 2, .max_args = 2},
    {"$indexOfArray", .fn = op_indexofarray, .min_args = 2, .max_args = 4},
    {"$isArray", .eager = op_isarray, .min_args = 1, .max_args = 1},
    {"$last", .eager = op_first_last, .min_args = 1, .max_args = 1, .aux = 0,
     .input = {BSON_TYPE_ARRAY, 28689, "$last's argument must be an array, but is %s"}},
    {"$map", .fn = map_filter, .parse = OPP_NAMED, .params = {"!input", "as", "!in", NULL},
     .aux = 1, .scope = map_scope},
    {"$range", .eager = op_range, .min_args = 2, .max_args = 3},
    {"$reduce", .fn = op_reduce, .parse = OPP_NAMED, .params = {"!input", "!initialValue", "!in"},
     .scope = reduce_scope},
    {"$reverseArray", .eager = op_reversearray, .min_args = 1, .max_args = 1,
     .input = {BSON_TYPE_ARRAY, 34435,
               "The argument to $reverseArray must be an array, but was of type: %s"}},
    {"$size", .eager = op_size, .min_args = 1, .max_args = 1},
    {"$slice", .eager = op_slice, .min_args = 2, .max_args = 3},
    {NULL},
};
