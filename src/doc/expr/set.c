/* expr/set: the set operators — $setEquals $setIntersection $setUnion
 * $setDifference $setIsSubset $anyElementTrue $allElementsTrue — arrays
 * taken as sets of distinct values under the aggregation comparison. */
#include "doc/expr/expr-private.h"

#include <stdlib.h>

#include "doc/compare.h"
#include "util/fiber.h"
#include "util/shellfmt.h"

bool expr_array_values(const bson_value_t *arr, bson_value_t **vals, size_t *n, dberr_t *err)
{
    bson_t b;
    bson_iter_t it;
    size_t cap = 16;
    *n = 0;
    *vals = bson_malloc(cap * sizeof **vals);
    expr_bson_of(arr, &b);
    if (!bson_iter_init(&it, &b))
        return true;
    while (bson_iter_next(&it)) {
        if ((*n & 0x3ff) == 0x3ff && !fiber_check(err)) {
            bson_free(*vals);
            *vals = NULL;
            return false;
        }
        if (*n == cap)
            *vals = bson_realloc(*vals, (cap *= 2) * sizeof **vals);
        (*vals)[(*n)++] = *bson_iter_value(&it);
    }
    return true;
}

static int value_cmp(const void *a, const void *b)
{
    return compare_values(a, b);
}

/* Sorts `vals` and drops duplicates: the ordered set mongod builds. */
static size_t sort_unique(bson_value_t *vals, size_t n)
{
    size_t k = 0;
    if (n > 1) /* else nothing to sort, and vals may be NULL (qsort must not get it) */
        qsort(vals, n, sizeof *vals, value_cmp);
    for (size_t i = 0; i < n; i++)
        if (k == 0 || compare_values(&vals[k - 1], &vals[i]) != 0)
            vals[k++] = vals[i];
    return k;
}

/* True when the sorted set `set` of `n` values holds `v`. */
static bool set_has(const bson_value_t *set, size_t n, const bson_value_t *v)
{
    return n && bsearch(v, set, n, sizeof *set, value_cmp) != NULL;
}

/* $setUnion (aux 0) and $setIntersection (aux 1): null when an operand is
 * nullish, the result sorted as mongod's ordered ValueSet. */
static bool op_union_inter(const expr_t *e, const expr_ctx_t *ctx, bson_value_t *out, dberr_t *err)
{
    bool inter = e->op->aux, ok = true, null = false;
    bson_value_t *args = bson_malloc0((e->nargs + 1) * sizeof *args);
    bson_value_t *acc = NULL, *vals = NULL;
    size_t nacc = 0, n;
    for (size_t i = 0; i < e->nargs; i++)
        expr_val_missing(&args[i]);
    for (size_t i = 0; ok && !null && i < e->nargs; i++) {
        if (!(ok = expr_eval_node(e->args[i], ctx, &args[i], err)))
            break;
        if (expr_is_nullish(&args[i]))
            null = true;
        else if (args[i].value_type != BSON_TYPE_ARRAY)
            ok = dberr_set(err, inter ? 17047 : 17043,
                           "All operands of %s must be arrays. One argument is of type: %s",
                           e->op->name, shellfmt_type_name(args[i].value_type));
    }
    if (!ok || null)
        goto cleanup;
    for (size_t i = 0; ok && i < e->nargs; i++) {
        if (!(ok = expr_array_values(&args[i], &vals, &n, err)))
            break;
        n = sort_unique(vals, n);
        if (i == 0) {
            acc = vals, nacc = n, vals = NULL;
        } else if (inter) {
            size_t k = 0;
            for (size_t j = 0; j < nacc; j++)
                if (set_has(vals, n, &acc[j]))
                    acc[k++] = acc[j];
            nacc = k;
        } else {
            acc = bson_realloc(acc, (nacc + n + 1) * sizeof *acc);
            memcpy(acc + nacc, vals, n * sizeof *vals);
            nacc = sort_unique(acc, nacc + n);
        }
        bson_free(vals);
        vals = NULL;
    }
    if (ok)
        expr_values_to_array(acc, nacc, out);
cleanup:
    if (ok && null)
        expr_val_null(out);
    expr_free_args(args, e->nargs);
    bson_free(args);
    bson_free(acc);
    bson_free(vals);
    return ok;
}

/* A sorted set of the array `v`. */
static bool to_set(const bson_value_t *v, bson_value_t **vals, size_t *n, dberr_t *err)
{
    if (!expr_array_values(v, vals, n, err))
        return false;
    *n = sort_unique(*vals, *n);
    return true;
}

/* Both operands of $setDifference / $setIsSubset arrays, else mongod's
 * `first_code` or `second_code`. */
static bool both_arrays(const expr_t *e, const bson_value_t *v, int first_code, int second_code,
                        dberr_t *err)
{
    for (int i = 0; i < 2; i++)
        if (v[i].value_type != BSON_TYPE_ARRAY)
            return dberr_set(err, i ? second_code : first_code,
                             "both operands of %s must be arrays. %s argument is of type: %s",
                             e->op->name, i ? "Second" : "First",
                             shellfmt_type_name(v[i].value_type));
    return true;
}

static bool op_setdifference(const expr_t *e, const bson_value_t *v, bson_value_t *out,
                             dberr_t *err)
{
    bson_value_t *a = NULL, *b = NULL;
    size_t na, nb;
    bool ok = true;
    if (expr_is_nullish(&v[0]) || expr_is_nullish(&v[1])) {
        expr_val_null(out);
        return true;
    }
    if (!both_arrays(e, v, 17048, 17049, err))
        return false;
    if (!(ok = expr_array_values(&v[0], &a, &na, err) && to_set(&v[1], &b, &nb, err)))
        goto cleanup;
    {
        /* first-seen order of the first array, each value once */
        bson_t arr;
        uint32_t idx = 0;
        bson_init(&arr);
        for (size_t i = 0; i < na; i++) {
            bool dup = set_has(b, nb, &a[i]);
            for (size_t j = 0; !dup && j < i; j++)
                dup = compare_values(&a[j], &a[i]) == 0;
            if (!dup)
                expr_array_append(&arr, &idx, &a[i]);
        }
        expr_value_take_bson(out, &arr, BSON_TYPE_ARRAY);
    }
cleanup:
    bson_free(a);
    bson_free(b);
    return ok;
}

static bool op_setissubset(const expr_t *e, const bson_value_t *v, bson_value_t *out, dberr_t *err)
{
    bson_value_t *a = NULL, *b = NULL;
    size_t na, nb;
    bool ok;
    if (!both_arrays(e, v, 17046, 17042, err))
        return false;
    if ((ok = expr_array_values(&v[0], &a, &na, err) && to_set(&v[1], &b, &nb, err))) {
        bool sub = true;
        for (size_t i = 0; sub && i < na; i++)
            sub = set_has(b, nb, &a[i]);
        expr_val_bool(out, sub);
    }
    bson_free(a);
    bson_free(b);
    return ok;
}

static bool op_setequals(const expr_t *e, const expr_ctx_t *ctx, bson_value_t *out, dberr_t *err)
{
    bson_value_t first, v, *a = NULL, *b = NULL;
    size_t na = 0, nb;
    bool ok = true, eq = true;
    expr_val_missing(&first);
    for (size_t i = 0; ok && i < e->nargs; i++) {
        bson_value_t *cur = i == 0 ? &first : &v;
        if (!(ok = expr_eval_node(e->args[i], ctx, cur, err)))
            break;
        if (cur->value_type != BSON_TYPE_ARRAY) {
            ok = dberr_set(err, 17044,
                           "All operands of $setEquals must be arrays. %zu-th argument is of "
                           "type: %s",
                           i + 1, shellfmt_type_name(cur->value_type));
        } else if (i == 0) {
            ok = to_set(cur, &a, &na, err);
        } else if ((ok = to_set(cur, &b, &nb, err))) {
            bool same = nb == na;
            for (size_t j = 0; same && j < na; j++)
                same = compare_values(&a[j], &b[j]) == 0;
            eq = eq && same;
            bson_free(b);
            b = NULL;
        }
        if (i > 0)
            expr_val_free(&v);
    }
    bson_free(a);
    expr_val_free(&first);
    if (ok)
        expr_val_bool(out, eq);
    return ok;
}

/* $anyElementTrue (aux 0) and $allElementsTrue (aux 1). */
static bool op_any_all(const expr_t *e, const bson_value_t *v, bson_value_t *out, dberr_t *err)
{
    bool all = e->op->aux;
    bson_t b;
    bson_iter_t it;
    if (v->value_type != BSON_TYPE_ARRAY)
        return dberr_set(err, all ? 17040 : 17041, "%s's argument must be an array, but is %s",
                         e->op->name, shellfmt_type_name(v->value_type));
    expr_bson_of(v, &b);
    bool res = all;
    if (bson_iter_init(&it, &b))
        while (bson_iter_next(&it))
            if (expr_truthy(bson_iter_value(&it)) != all) {
                res = !all;
                break;
            }
    expr_val_bool(out, res);
    return true;
}

const expr_op_t expr_set_ops[] = {
    {"$allElementsTrue", .eager = op_any_all, .min_args = 1, .max_args = 1, .aux = 1},
    {"$anyElementTrue", .eager = op_any_all, .min_args = 1, .max_args = 1, .aux = 0},
    {"$setDifference", .eager = op_setdifference, .min_args = 2, .max_args = 2},
    {"$setEquals", .fn = op_setequals, .min_args = 2, .max_args = -1},
    {"$setIntersection", .fn = op_union_inter, .max_args = -1, .aux = 1},
    {"$setIsSubset", .eager = op_setissubset, .min_args = 2, .max_args = 2},
    {"$setUnion", .fn = op_union_inter, .max_args = -1, .aux = 0},
    {NULL},
};
