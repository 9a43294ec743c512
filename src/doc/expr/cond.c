/* expr/cond: comparison ($cmp $eq $ne $gt $gte $lt $lte), logic ($and $or
 * $not), the conditionals ($cond $ifNull $switch) and $min/$max over
 * arguments. */
#include "doc/expr/expr-private.h"

#include <string.h>

#include "doc/compare.h"
#include "util/shellfmt.h"

/* Which comparison a row of compare_op asks for. */
enum { CMP_CMP, CMP_EQ, CMP_NE, CMP_GT, CMP_GTE, CMP_LT, CMP_LTE };

/* $cmp $eq $ne $gt $gte $lt $lte: the aggregation order, strings by the
 * context's collation (aux: CMP_*). */
static bool compare_op(const expr_t *e, const expr_ctx_t *ctx, bson_value_t *out, dberr_t *err)
{
    bson_value_t v[2];
    if (!expr_eval_args(e, ctx, v, err))
        return false;
    int c = expr_agg_compare_coll(&v[0], &v[1], ctx->coll);
    expr_free_args(v, e->nargs);
    switch (e->op->aux) {
    case CMP_CMP:
        expr_val_int32(out, c < 0 ? -1 : c > 0 ? 1 : 0);
        break;
    case CMP_EQ:
        expr_val_bool(out, c == 0);
        break;
    case CMP_NE:
        expr_val_bool(out, c != 0);
        break;
    case CMP_GT:
        expr_val_bool(out, c > 0);
        break;
    case CMP_GTE:
        expr_val_bool(out, c >= 0);
        break;
    case CMP_LT:
        expr_val_bool(out, c < 0);
        break;
    default:
        expr_val_bool(out, c <= 0);
        break;
    }
    return true;
}

static bool op_and_or(const expr_t *e, const expr_ctx_t *ctx, bson_value_t *out, dberr_t *err)
{
    bool is_and = e->op->aux;
    for (size_t i = 0; i < e->nargs; i++) {
        bson_value_t v;
        if (!expr_eval_node(e->args[i], ctx, &v, err))
            return false;
        bool t = expr_truthy(&v);
        expr_val_free(&v);
        if (is_and && !t) {
            expr_val_bool(out, false);
            return true;
        }
        if (!is_and && t) {
            expr_val_bool(out, true);
            return true;
        }
    }
    expr_val_bool(out, is_and);
    return true;
}

static bool op_not(const expr_t *e, const bson_value_t *v, bson_value_t *out, dberr_t *err)
{
    bool t = expr_truthy(v);
    expr_val_bool(out, !t);
    return true;
}

static bool op_cond(const expr_t *e, const expr_ctx_t *ctx, bson_value_t *out, dberr_t *err)
{
    bson_value_t v;
    if (!expr_eval_arg(e, 0, ctx, &v, err))
        return false;
    bool t = expr_truthy(&v);
    expr_val_free(&v);
    return expr_eval_arg(e, t ? 1 : 2, ctx, out, err);
}

static bool op_ifnull(const expr_t *e, const expr_ctx_t *ctx, bson_value_t *out, dberr_t *err)
{
    for (size_t i = 0; i < e->nargs; i++) {
        if (!expr_eval_node(e->args[i], ctx, out, err))
            return false;
        if (i + 1 == e->nargs || !expr_is_nullish(out))
            return true;
        expr_val_free(out);
    }
    return true;
}

typedef struct minmax_st {
    const collation_t *coll; /* the context's: how strings compare */
    bool is_max;
    bson_value_t best; /* EOD until a non-null value is seen */
} minmax_st_t;

static void minmax_fn(const bson_value_t *v, void *p)
{
    minmax_st_t *st = p;
    if (expr_is_nullish(v))
        return;
    if (st->best.value_type == BSON_TYPE_EOD) {
        bson_value_copy(v, &st->best);
        return;
    }
    int c = compare_values_coll(v, &st->best, st->coll);
    if ((st->is_max && c > 0) || (!st->is_max && c < 0)) {
        expr_val_free(&st->best);
        bson_value_copy(v, &st->best);
    }
}

static bool op_minmax(const expr_t *e, const expr_ctx_t *ctx, bson_value_t *out, dberr_t *err)
{
    minmax_st_t st;
    st.is_max = e->op->aux;
    st.coll = ctx->coll;
    expr_val_missing(&st.best);
    if (!expr_for_operands(e, ctx, minmax_fn, &st, err)) {
        expr_val_free(&st.best);
        return false;
    }
    if (st.best.value_type == BSON_TYPE_EOD)
        expr_val_null(out);
    else
        *out = st.best;
    return true;
}

/* One {case, then} of a $switch's branches into `e` (two arguments). */
static bool parse_switch_branch(expr_t *e, bson_iter_t *it, dberr_t *err)
{
    static const expr_parts_spec_t branch_parts = {
        {"case", "then"},
        40063,
        "$switch found an unknown argument to a branch: %s",
        {40064, 40065},
        {"$switch requires each branch have a 'case' expression",
         "$switch requires each branch have a 'then' expression."},
    };
    expr_t *parts[2] = {NULL, NULL};
    bson_iter_t child;
    if (!expr_recurse_object(it, &child, 40062,
                             "$switch expected each branch to be an object, found: %s", err) ||
        !expr_parse_parts(&child, &branch_parts, parts, err))
        return false;
    expr_add_arg(e, parts[0], NULL);
    expr_add_arg(e, parts[1], NULL);
    return true;
}

/* {$switch: {branches: [{case, then}...], default}} into e->args: case and
 * then of each branch in turn, then the default (NULL when absent). */
static bool parse_switch(expr_t *e, bson_iter_t *arg, dberr_t *err)
{
    bson_iter_t child, br;
    expr_t *dflt = NULL;
    if (!expr_recurse_object(arg, &child, 40060,
                             "$switch requires an object as an argument, found: %s", err))
        return false;
    while (bson_iter_next(&child)) {
        const char *k = bson_iter_key(&child);
        if (!strcmp(k, "branches")) {
            if (!BSON_ITER_HOLDS_ARRAY(&child)) {
                expr_destroy(dflt);
                return dberr_set(err, 40061, "$switch expected an array for 'branches', found: %s",
                                 shellfmt_type_name(bson_iter_type(&child)));
            }
            bson_iter_recurse(&child, &br);
            while (bson_iter_next(&br))
                if (!parse_switch_branch(e, &br, err)) {
                    expr_destroy(dflt);
                    return false;
                }
        } else if (!strcmp(k, "default")) {
            expr_destroy(dflt);
            if (!(dflt = expr_parse(&child, err)))
                return false;
        } else {
            expr_destroy(dflt);
            return dberr_set(err, 40067, "$switch found an unknown argument: %s", k);
        }
    }
    if (e->nargs == 0) {
        expr_destroy(dflt);
        return dberr_set(err, 40068, "$switch requires at least one branch.");
    }
    expr_add_arg(e, dflt, NULL);
    return true;
}

static bool op_switch(const expr_t *e, const expr_ctx_t *ctx, bson_value_t *out, dberr_t *err)
{
    size_t nbranch = (e->nargs - 1) / 2;
    for (size_t i = 0; i < nbranch; i++) {
        bson_value_t v;
        if (!expr_eval_node(e->args[2 * i], ctx, &v, err))
            return false;
        bool t = expr_truthy(&v);
        expr_val_free(&v);
        if (t)
            return expr_eval_node(e->args[2 * i + 1], ctx, out, err);
    }
    if (!e->args[e->nargs - 1])
        return dberr_set(err, 40066,
                         "$switch could not find a matching branch for an input, and no default "
                         "was specified.");
    return expr_eval_node(e->args[e->nargs - 1], ctx, out, err);
}

const expr_op_t expr_cond_ops[] = {
    {"$and", .fn = op_and_or, .max_args = -1, .aux = 1},
    {"$cmp", .fn = compare_op, .min_args = 2, .max_args = 2, .aux = CMP_CMP},
    {"$cond", .fn = op_cond, .parse = OPP_COND, .min_args = 3, .max_args = 3},
    {"$eq", .fn = compare_op, .min_args = 2, .max_args = 2, .aux = CMP_EQ},
    {"$gt", .fn = compare_op, .min_args = 2, .max_args = 2, .aux = CMP_GT},
    {"$gte", .fn = compare_op, .min_args = 2, .max_args = 2, .aux = CMP_GTE},
    {"$ifNull", .fn = op_ifnull, .min_args = 2, .max_args = -1},
    {"$lt", .fn = compare_op, .min_args = 2, .max_args = 2, .aux = CMP_LT},
    {"$lte", .fn = compare_op, .min_args = 2, .max_args = 2, .aux = CMP_LTE},
    {"$max", .fn = op_minmax, .min_args = 1, .max_args = -1, .aux = 1},
    {"$min", .fn = op_minmax, .min_args = 1, .max_args = -1, .aux = 0},
    {"$ne", .fn = compare_op, .min_args = 2, .max_args = 2, .aux = CMP_NE},
    {"$not", .eager = op_not, .min_args = 1, .max_args = 1},
    {"$or", .fn = op_and_or, .max_args = -1, .aux = 0},
    {"$switch", .fn = op_switch, .parse = OPP_CUSTOM, .parse_fn = parse_switch},
    {NULL},
};
