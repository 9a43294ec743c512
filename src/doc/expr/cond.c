/* expr/cond: comparison ($cmp $eq $ne $gt $gte $lt $lte), logic ($and $or
 * $not), the conditionals ($cond $ifNull) and $min/$max over arguments. */
#include "doc/expr/expr-private.h"

#include <string.h>

#include "doc/compare.h"

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

const expr_op_t expr_cond_ops[] = {
    {"$and", op_and_or, OPP_ARGS, 0, -1, {0}, 1, NULL},
    {"$cmp", compare_op, OPP_ARGS, 2, 2, {0}, CMP_CMP, NULL, NULL},
    {"$cond", op_cond, OPP_COND, 3, 3, {0}, 0, NULL},
    {"$eq", compare_op, OPP_ARGS, 2, 2, {0}, CMP_EQ, NULL, NULL},
    {"$gt", compare_op, OPP_ARGS, 2, 2, {0}, CMP_GT, NULL, NULL},
    {"$gte", compare_op, OPP_ARGS, 2, 2, {0}, CMP_GTE, NULL, NULL},
    {"$ifNull", op_ifnull, OPP_ARGS, 2, -1, {0}, 0, NULL},
    {"$lt", compare_op, OPP_ARGS, 2, 2, {0}, CMP_LT, NULL, NULL},
    {"$lte", compare_op, OPP_ARGS, 2, 2, {0}, CMP_LTE, NULL, NULL},
    {"$max", op_minmax, OPP_ARGS, 1, -1, {0}, 1, NULL},
    {"$min", op_minmax, OPP_ARGS, 1, -1, {0}, 0, NULL},
    {"$ne", compare_op, OPP_ARGS, 2, 2, {0}, CMP_NE, NULL, NULL},
    {"$not", NULL, OPP_ARGS, 1, 1, {0}, 0, NULL, op_not},
    {"$or", op_and_or, OPP_ARGS, 0, -1, {0}, 0, NULL},
    {NULL, NULL, OPP_ARGS, 0, 0, {0}, 0, NULL},
};
