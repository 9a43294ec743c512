/* expr: aggregation expressions. A spec is parsed once into a tree of nodes
 * (constants, field paths, variables, operators, documents and arrays of
 * expressions) and evaluated per document into owned bson_value_t results. */
#include "doc/expr.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "doc/compare.h"
#include "util/shellfmt.h"

typedef enum expr_kind {
    EK_CONST, /* a literal value */
    EK_PATH,  /* "$a.b" or "$$var.a.b" */
    EK_OP,    /* {$op: args} */
    EK_DOC,   /* {a: <expr>, b: <expr>} */
    EK_ARRAY, /* [<expr>, <expr>] */
} expr_kind_t;

/* How an operator's argument is parsed. */
typedef enum op_parse {
    OPP_ARGS,    /* an array of expressions, or one expression */
    OPP_LITERAL, /* the argument is taken as is */
    OPP_COND,    /* [if, then, else] or {if, then, else} */
    OPP_LET,     /* {vars: {...}, in: expr} */
    OPP_NAMED,   /* a document of named parameters (see op_def.params) */
    OPP_FIELD,   /* $getField/$setField/$unsetField: {field, input, value} */
    OPP_NOARGS,  /* {} (or []): no arguments, as $rand */
} op_parse_t;

typedef struct op_def op_def_t;

typedef bool (*op_fn)(const expr_t *e, const expr_ctx_t *ctx, bson_value_t *out, dberr_t *err);

struct op_def {
    const char *name;
    op_fn fn;
    op_parse_t parse;
    int min_args; /* OPP_ARGS: argument count bounds (-1 = unbounded) */
    int max_args;
    const char *params[5]; /* OPP_NAMED: parameter names; '!' prefix = required */
};

struct expr {
    expr_kind_t kind;
    bson_value_t cval;  /* EK_CONST */
    char *var;          /* EK_PATH: variable name, NULL for $$CURRENT */
    char **path;        /* EK_PATH: components after the variable */
    size_t npath;
    const op_def_t *op; /* EK_OP */
    expr_t **args;      /* EK_OP arguments / EK_DOC values / EK_ARRAY elements */
    size_t nargs;
    char **names;       /* EK_DOC field names / $let variable names */
};

/* ------------------------------------------------------------------ values */

static void val_null(bson_value_t *out)
{
    memset(out, 0, sizeof *out);
    out->value_type = BSON_TYPE_NULL;
}

static void val_missing(bson_value_t *out)
{
    memset(out, 0, sizeof *out);
    out->value_type = BSON_TYPE_EOD;
}

static void val_bool(bson_value_t *out, bool b)
{
    memset(out, 0, sizeof *out);
    out->value_type = BSON_TYPE_BOOL;
    out->value.v_bool = b;
}

static void val_int32(bson_value_t *out, int32_t i)
{
    memset(out, 0, sizeof *out);
    out->value_type = BSON_TYPE_INT32;
    out->value.v_int32 = i;
}

static void val_int64(bson_value_t *out, int64_t i)
{
    memset(out, 0, sizeof *out);
    out->value_type = BSON_TYPE_INT64;
    out->value.v_int64 = i;
}

static void val_double(bson_value_t *out, double d)
{
    memset(out, 0, sizeof *out);
    out->value_type = BSON_TYPE_DOUBLE;
    out->value.v_double = d;
}

static void val_date(bson_value_t *out, int64_t ms)
{
    memset(out, 0, sizeof *out);
    out->value_type = BSON_TYPE_DATE_TIME;
    out->value.v_datetime = ms;
}

static void val_string(bson_value_t *out, const char *s, size_t len)
{
    memset(out, 0, sizeof *out);
    out->value_type = BSON_TYPE_UTF8;
    out->value.v_utf8.str = bson_malloc(len + 1);
    memcpy(out->value.v_utf8.str, s, len);
    out->value.v_utf8.str[len] = '\0';
    out->value.v_utf8.len = (uint32_t)len;
}

/* Moves the bytes of `b` into `out` as a document or array value; destroys `b`. */
static void val_from_bson(bson_value_t *out, bson_t *b, bson_type_t type)
{
    memset(out, 0, sizeof *out);
    out->value_type = type;
    out->value.v_doc.data_len = b->len;
    out->value.v_doc.data = bson_malloc(b->len);
    memcpy(out->value.v_doc.data, bson_get_data(b), b->len);
    bson_destroy(b);
}

static void val_free(bson_value_t *v)
{
    if (v->value_type != BSON_TYPE_EOD)
        bson_value_destroy(v);
    val_missing(v);
}

static bool is_nullish(const bson_value_t *v)
{
    return v->value_type == BSON_TYPE_NULL || v->value_type == BSON_TYPE_EOD ||
           v->value_type == BSON_TYPE_UNDEFINED;
}

static bool is_number(const bson_value_t *v)
{
    return v->value_type == BSON_TYPE_INT32 || v->value_type == BSON_TYPE_INT64 ||
           v->value_type == BSON_TYPE_DOUBLE || v->value_type == BSON_TYPE_DECIMAL128;
}

static double num_double(const bson_value_t *v)
{
    return compare_to_double(v);
}

/* Initialises `b` over the bytes of a document or array value (borrowed). */
static void bson_of(const bson_value_t *v, bson_t *b)
{
    if (!bson_init_static(b, v->value.v_doc.data, v->value.v_doc.data_len))
        bson_init(b);
}

/* Aggregation comparison: like compare_values, except that missing and
 * undefined sort below null (so {$eq: ["$nope", null]} is false). */
static int agg_compare(const bson_value_t *a, const bson_value_t *b)
{
    bool am = a->value_type == BSON_TYPE_EOD || a->value_type == BSON_TYPE_UNDEFINED;
    bool bm = b->value_type == BSON_TYPE_EOD || b->value_type == BSON_TYPE_UNDEFINED;
    if (am || bm) {
        if (am && bm)
            return 0;
        if (am)
            return b->value_type == BSON_TYPE_MINKEY ? 1 : -1;
        return a->value_type == BSON_TYPE_MINKEY ? -1 : 1;
    }
    return compare_values(a, b);
}

bool expr_truthy(const bson_value_t *v)
{
    switch (v->value_type) {
    case BSON_TYPE_EOD:
    case BSON_TYPE_NULL:
    case BSON_TYPE_UNDEFINED: return false;
    case BSON_TYPE_BOOL: return v->value.v_bool;
    case BSON_TYPE_INT32: return v->value.v_int32 != 0;
    case BSON_TYPE_INT64: return v->value.v_int64 != 0;
    case BSON_TYPE_DOUBLE: return v->value.v_double != 0.0;
    case BSON_TYPE_DECIMAL128: return compare_to_double(v) != 0.0;
    default: return true;
    }
}

/* ------------------------------------------------------------- evaluation */

static bool eval(const expr_t *e, const expr_ctx_t *ctx, bson_value_t *out, dberr_t *err);

/* Follows `path` from `cur` the way aggregation field paths do: a document
 * descends by name, an array applies the rest of the path to each element
 * and yields an array of what was found. */
static void walk_path(const bson_value_t *cur, char *const *path, size_t n, bson_value_t *out)
{
    if (n == 0) {
        bson_value_copy(cur, out);
        return;
    }
    if (cur->value_type == BSON_TYPE_DOCUMENT) {
        bson_t b;
        bson_iter_t it;
        bson_of(cur, &b);
        if (!bson_iter_init_find(&it, &b, path[0])) {
            val_missing(out);
            return;
        }
        walk_path(bson_iter_value(&it), path + 1, n - 1, out);
        return;
    }
    if (cur->value_type == BSON_TYPE_ARRAY) {
        bson_t b, arr;
        bson_iter_t it;
        uint32_t idx = 0;
        bson_of(cur, &b);
        bson_init(&arr);
        bson_iter_init(&it, &b);
        while (bson_iter_next(&it)) {
            const bson_value_t *ev = bson_iter_value(&it);
            if (ev->value_type != BSON_TYPE_DOCUMENT && ev->value_type != BSON_TYPE_ARRAY)
                continue;
            bson_value_t sub;
            walk_path(ev, path, n, &sub);
            if (sub.value_type != BSON_TYPE_EOD) {
                char key[16];
                const char *k;
                bson_uint32_to_string(idx++, &k, key, sizeof key);
                bson_append_value(&arr, k, -1, &sub);
            }
            val_free(&sub);
        }
        val_from_bson(out, &arr, BSON_TYPE_ARRAY);
        return;
    }
    val_missing(out);
}

static bool eval_path(const expr_t *e, const expr_ctx_t *ctx, bson_value_t *out, dberr_t *err)
{
    bson_value_t base;
    bson_iter_t it;
    if (!e->var || strcmp(e->var, "ROOT") == 0 || strcmp(e->var, "CURRENT") == 0) {
        if (!ctx->root) {
            val_missing(out);
            return true;
        }
        memset(&base, 0, sizeof base);
        base.value_type = BSON_TYPE_DOCUMENT;
        base.value.v_doc.data = (uint8_t *)bson_get_data(ctx->root);
        base.value.v_doc.data_len = ctx->root->len;
        walk_path(&base, e->path, e->npath, out);
        return true;
    }
    if (strcmp(e->var, "REMOVE") == 0) {
        val_missing(out);
        return true;
    }
    if (strcmp(e->var, "NOW") == 0) {
        val_date(&base, ctx->now_ms);
        walk_path(&base, e->path, e->npath, out);
        return true;
    }
    if (ctx->vars && bson_iter_init_find(&it, ctx->vars, e->var)) {
        walk_path(bson_iter_value(&it), e->path, e->npath, out);
        return true;
    }
    return dberr_set(err, 17276, "Use of undefined variable: %s", e->var);
}

static bool eval_doc(const expr_t *e, const expr_ctx_t *ctx, bson_value_t *out, dberr_t *err)
{
    bson_t b;
    bson_init(&b);
    for (size_t i = 0; i < e->nargs; i++) {
        bson_value_t v;
        if (!eval(e->args[i], ctx, &v, err)) {
            bson_destroy(&b);
            return false;
        }
        if (v.value_type != BSON_TYPE_EOD)
            bson_append_value(&b, e->names[i], -1, &v);
        val_free(&v);
    }
    val_from_bson(out, &b, BSON_TYPE_DOCUMENT);
    return true;
}

static bool eval_array(const expr_t *e, const expr_ctx_t *ctx, bson_value_t *out, dberr_t *err)
{
    bson_t b;
    bson_init(&b);
    for (size_t i = 0; i < e->nargs; i++) {
        bson_value_t v;
        char key[16];
        const char *k;
        if (!eval(e->args[i], ctx, &v, err)) {
            bson_destroy(&b);
            return false;
        }
        bson_uint32_to_string((uint32_t)i, &k, key, sizeof key);
        if (v.value_type == BSON_TYPE_EOD)
            bson_append_null(&b, k, -1);
        else
            bson_append_value(&b, k, -1, &v);
        val_free(&v);
    }
    val_from_bson(out, &b, BSON_TYPE_ARRAY);
    return true;
}

static bool eval(const expr_t *e, const expr_ctx_t *ctx, bson_value_t *out, dberr_t *err)
{
    switch (e->kind) {
    case EK_CONST:
        if (e->cval.value_type == BSON_TYPE_EOD)
            val_missing(out);
        else
            bson_value_copy(&e->cval, out);
        return true;
    case EK_PATH: return eval_path(e, ctx, out, err);
    case EK_OP: return e->op->fn(e, ctx, out, err);
    case EK_DOC: return eval_doc(e, ctx, out, err);
    case EK_ARRAY: return eval_array(e, ctx, out, err);
    }
    return dberr_set(err, DBERR_INTERNAL_ERROR, "bad expression node");
}

bool expr_eval(const expr_t *e, const expr_ctx_t *ctx, bson_value_t *out, dberr_t *err)
{
    val_missing(out);
    if (!e)
        return true;
    return eval(e, ctx, out, err);
}

/* Evaluates every argument of `e` into `vals` (e->nargs owned values). On
 * failure nothing is left to free. */
static bool eval_args(const expr_t *e, const expr_ctx_t *ctx, bson_value_t *vals, dberr_t *err)
{
    for (size_t i = 0; i < e->nargs; i++) {
        if (!e->args[i]) {
            val_missing(&vals[i]);
            continue;
        }
        if (!eval(e->args[i], ctx, &vals[i], err)) {
            for (size_t j = 0; j < i; j++)
                val_free(&vals[j]);
            return false;
        }
    }
    return true;
}

static void free_args(bson_value_t *vals, size_t n)
{
    for (size_t i = 0; i < n; i++)
        val_free(&vals[i]);
}

/* Evaluates argument `i` (missing when absent). */
static bool eval_arg(const expr_t *e, size_t i, const expr_ctx_t *ctx, bson_value_t *out,
                     dberr_t *err)
{
    val_missing(out);
    if (i >= e->nargs || !e->args[i])
        return true;
    return eval(e->args[i], ctx, out, err);
}

/* ------------------------------------------------------------- arithmetic */

/* A running numeric result with mongod's widening: int32 → int64 → double. */
typedef struct num_acc {
    bson_type_t type; /* widest type so far: INT32, INT64 or DOUBLE */
    int64_t l;        /* exact integer value while type is INT32/INT64 */
    double d;         /* the value as a double (always kept) */
} num_acc_t;

static void acc_init(num_acc_t *a, int64_t start)
{
    a->type = BSON_TYPE_INT32;
    a->l = start;
    a->d = (double)start;
}

static void acc_add(num_acc_t *a, const bson_value_t *v)
{
    a->d += num_double(v);
    if (a->type == BSON_TYPE_DOUBLE)
        return;
    if (v->value_type == BSON_TYPE_DOUBLE || v->value_type == BSON_TYPE_DECIMAL128) {
        a->type = BSON_TYPE_DOUBLE;
        return;
    }
    int64_t x = v->value_type == BSON_TYPE_INT32 ? v->value.v_int32 : v->value.v_int64;
    if (v->value_type == BSON_TYPE_INT64)
        a->type = BSON_TYPE_INT64;
    if (__builtin_add_overflow(a->l, x, &a->l))
        a->type = BSON_TYPE_DOUBLE;
}

static void acc_mul(num_acc_t *a, const bson_value_t *v)
{
    a->d *= num_double(v);
    if (a->type == BSON_TYPE_DOUBLE)
        return;
    if (v->value_type == BSON_TYPE_DOUBLE || v->value_type == BSON_TYPE_DECIMAL128) {
        a->type = BSON_TYPE_DOUBLE;
        return;
    }
    int64_t x = v->value_type == BSON_TYPE_INT32 ? v->value.v_int32 : v->value.v_int64;
    if (v->value_type == BSON_TYPE_INT64)
        a->type = BSON_TYPE_INT64;
    if (__builtin_mul_overflow(a->l, x, &a->l))
        a->type = BSON_TYPE_DOUBLE;
}

static void acc_result(const num_acc_t *a, bson_value_t *out)
{
    if (a->type == BSON_TYPE_DOUBLE)
        val_double(out, a->d);
    else if (a->type == BSON_TYPE_INT32 && a->l >= INT32_MIN && a->l <= INT32_MAX)
        val_int32(out, (int32_t)a->l);
    else
        val_int64(out, a->l);
}

static bool op_add(const expr_t *e, const expr_ctx_t *ctx, bson_value_t *out, dberr_t *err)
{
    num_acc_t acc;
    bool have_date = false;
    int64_t date = 0;
    acc_init(&acc, 0);
    for (size_t i = 0; i < e->nargs; i++) {
        bson_value_t v;
        if (!eval(e->args[i], ctx, &v, err))
            return false;
        if (is_nullish(&v)) {
            val_free(&v);
            val_null(out);
            return true;
        }
        if (is_number(&v)) {
            acc_add(&acc, &v);
        } else if (v.value_type == BSON_TYPE_DATE_TIME) {
            if (have_date) {
                val_free(&v);
                return dberr_set(err, 16612, "only one date allowed in an $add expression");
            }
            have_date = true;
            date = v.value.v_datetime;
        } else {
            const char *tn = shellfmt_type_name(v.value_type);
            val_free(&v);
            return dberr_set(err, DBERR_LOCATION_16554,
                             "$add only supports numeric or date types, not %s", tn);
        }
        val_free(&v);
    }
    if (have_date) {
        int64_t delta = acc.type == BSON_TYPE_DOUBLE ? (int64_t)llround(acc.d) : acc.l;
        val_date(out, date + delta);
        return true;
    }
    acc_result(&acc, out);
    return true;
}

static bool op_multiply(const expr_t *e, const expr_ctx_t *ctx, bson_value_t *out, dberr_t *err)
{
    num_acc_t acc;
    acc_init(&acc, 1);
    for (size_t i = 0; i < e->nargs; i++) {
        bson_value_t v;
        if (!eval(e->args[i], ctx, &v, err))
            return false;
        if (is_nullish(&v)) {
            val_free(&v);
            val_null(out);
            return true;
        }
        if (!is_number(&v)) {
            const char *tn = shellfmt_type_name(v.value_type);
            val_free(&v);
            return dberr_set(err, 16555, "$multiply only supports numeric types, not %s", tn);
        }
        acc_mul(&acc, &v);
        val_free(&v);
    }
    acc_result(&acc, out);
    return true;
}

static bool op_subtract(const expr_t *e, const expr_ctx_t *ctx, bson_value_t *out, dberr_t *err)
{
    bson_value_t v[2];
    bool ok = true;
    if (!eval_args(e, ctx, v, err))
        return false;
    if (is_nullish(&v[0]) || is_nullish(&v[1])) {
        val_null(out);
    } else if (is_number(&v[0]) && is_number(&v[1])) {
        bool ints = (v[0].value_type == BSON_TYPE_INT32 || v[0].value_type == BSON_TYPE_INT64) &&
                    (v[1].value_type == BSON_TYPE_INT32 || v[1].value_type == BSON_TYPE_INT64);
        int64_t a = ints ? (v[0].value_type == BSON_TYPE_INT32 ? v[0].value.v_int32 : v[0].value.v_int64) : 0;
        int64_t b = ints ? (v[1].value_type == BSON_TYPE_INT32 ? v[1].value.v_int32 : v[1].value.v_int64) : 0;
        int64_t r;
        if (!ints || __builtin_sub_overflow(a, b, &r))
            val_double(out, num_double(&v[0]) - num_double(&v[1]));
        else if (v[0].value_type == BSON_TYPE_INT32 && v[1].value_type == BSON_TYPE_INT32 &&
                 r >= INT32_MIN && r <= INT32_MAX)
            val_int32(out, (int32_t)r);
        else
            val_int64(out, r);
    } else if (v[0].value_type == BSON_TYPE_DATE_TIME && v[1].value_type == BSON_TYPE_DATE_TIME) {
        val_int64(out, v[0].value.v_datetime - v[1].value.v_datetime);
    } else if (v[0].value_type == BSON_TYPE_DATE_TIME && is_number(&v[1])) {
        int64_t d = v[1].value_type == BSON_TYPE_INT32   ? v[1].value.v_int32
                    : v[1].value_type == BSON_TYPE_INT64 ? v[1].value.v_int64
                                                         : (int64_t)llround(num_double(&v[1]));
        val_date(out, v[0].value.v_datetime - d);
    } else {
        ok = dberr_set(err, DBERR_TYPE_MISMATCH, "can't $subtract %s from %s",
                       shellfmt_type_name(v[1].value_type), shellfmt_type_name(v[0].value_type));
    }
    free_args(v, 2);
    return ok;
}

static bool op_divide(const expr_t *e, const expr_ctx_t *ctx, bson_value_t *out, dberr_t *err)
{
    bson_value_t v[2];
    bool ok = true;
    if (!eval_args(e, ctx, v, err))
        return false;
    if (is_nullish(&v[0]) || is_nullish(&v[1])) {
        val_null(out);
    } else if (!is_number(&v[0]) || !is_number(&v[1])) {
        ok = dberr_set(err, 16609, "$divide only supports numeric types, not %s and %s",
                       shellfmt_type_name(v[0].value_type), shellfmt_type_name(v[1].value_type));
    } else if (num_double(&v[1]) == 0.0) {
        ok = dberr_set(err, 16608, "can't $divide by zero");
    } else {
        val_double(out, num_double(&v[0]) / num_double(&v[1]));
    }
    free_args(v, 2);
    return ok;
}

static bool op_mod(const expr_t *e, const expr_ctx_t *ctx, bson_value_t *out, dberr_t *err)
{
    bson_value_t v[2];
    bool ok = true;
    if (!eval_args(e, ctx, v, err))
        return false;
    if (is_nullish(&v[0]) || is_nullish(&v[1])) {
        val_null(out);
    } else if (!is_number(&v[0]) || !is_number(&v[1])) {
        ok = dberr_set(err, 16611, "$mod only supports numeric types, not %s and %s",
                       shellfmt_type_name(v[0].value_type), shellfmt_type_name(v[1].value_type));
    } else if (num_double(&v[1]) == 0.0) {
        ok = dberr_set(err, 16610, "can't $mod by 0");
    } else if (v[0].value_type == BSON_TYPE_DOUBLE || v[1].value_type == BSON_TYPE_DOUBLE ||
               v[0].value_type == BSON_TYPE_DECIMAL128 || v[1].value_type == BSON_TYPE_DECIMAL128) {
        val_double(out, fmod(num_double(&v[0]), num_double(&v[1])));
    } else {
        int64_t a = v[0].value_type == BSON_TYPE_INT32 ? v[0].value.v_int32 : v[0].value.v_int64;
        int64_t b = v[1].value_type == BSON_TYPE_INT32 ? v[1].value.v_int32 : v[1].value.v_int64;
        int64_t r = (b == -1) ? 0 : a % b;
        if (v[0].value_type == BSON_TYPE_INT32 && v[1].value_type == BSON_TYPE_INT32)
            val_int32(out, (int32_t)r);
        else
            val_int64(out, r);
    }
    free_args(v, 2);
    return ok;
}

/* Evaluates the single numeric argument of $abs/$ceil/$floor etc.; *done is
 * set when `out` already holds the answer (null). */
static bool one_number(const expr_t *e, const expr_ctx_t *ctx, bson_value_t *v, bool *done,
                       bson_value_t *out, dberr_t *err)
{
    *done = false;
    if (!eval_arg(e, 0, ctx, v, err))
        return false;
    if (is_nullish(v)) {
        val_free(v);
        val_null(out);
        *done = true;
        return true;
    }
    if (!is_number(v)) {
        const char *tn = shellfmt_type_name(v->value_type);
        val_free(v);
        return dberr_set(err, 28765, "%s only supports numeric types, not %s", e->op->name, tn);
    }
    return true;
}

static bool op_abs(const expr_t *e, const expr_ctx_t *ctx, bson_value_t *out, dberr_t *err)
{
    bson_value_t v;
    bool done;
    if (!one_number(e, ctx, &v, &done, out, err))
        return false;
    if (done)
        return true;
    switch (v.value_type) {
    case BSON_TYPE_INT32:
        if (v.value.v_int32 == INT32_MIN)
            val_int64(out, -(int64_t)INT32_MIN);
        else
            val_int32(out, v.value.v_int32 < 0 ? -v.value.v_int32 : v.value.v_int32);
        break;
    case BSON_TYPE_INT64:
        if (v.value.v_int64 == INT64_MIN)
            return dberr_set(err, 28680, "can't take $abs of long long min");
        val_int64(out, v.value.v_int64 < 0 ? -v.value.v_int64 : v.value.v_int64);
        break;
    default: val_double(out, fabs(num_double(&v))); break;
    }
    return true;
}

static bool op_rounding(const expr_t *e, const expr_ctx_t *ctx, bson_value_t *out, dberr_t *err,
                        double (*fn)(double))
{
    bson_value_t v;
    bool done;
    if (!one_number(e, ctx, &v, &done, out, err))
        return false;
    if (done)
        return true;
    if (v.value_type == BSON_TYPE_INT32 || v.value_type == BSON_TYPE_INT64)
        *out = v;
    else
        val_double(out, fn(num_double(&v)));
    return true;
}

static bool op_ceil(const expr_t *e, const expr_ctx_t *ctx, bson_value_t *out, dberr_t *err)
{
    return op_rounding(e, ctx, out, err, ceil);
}

static bool op_floor(const expr_t *e, const expr_ctx_t *ctx, bson_value_t *out, dberr_t *err)
{
    return op_rounding(e, ctx, out, err, floor);
}

/* Rounds half to even, as $round does. */
static double round_even(double x)
{
    return nearbyint(x);
}

/* $round and $trunc: [number, place]. */
static bool round_trunc(const expr_t *e, const expr_ctx_t *ctx, bson_value_t *out, dberr_t *err,
                        bool is_round)
{
    bson_value_t v[2];
    bool ok = true;
    if (!eval_args(e, ctx, v, err))
        return false;
    long place = 0;
    if (is_nullish(&v[0]) || (e->nargs > 1 && is_nullish(&v[1]))) {
        val_null(out);
        goto cleanup;
    }
    if (!is_number(&v[0])) {
        ok = dberr_set(err, 51081, "%s only supports numeric types, not %s", e->op->name,
                       shellfmt_type_name(v[0].value_type));
        goto cleanup;
    }
    if (e->nargs > 1) {
        double p = is_number(&v[1]) ? num_double(&v[1]) : NAN;
        if (!is_number(&v[1]) || p != floor(p)) {
            ok = dberr_set(err, 51082, "precision argument to %s must be a integral value",
                           e->op->name);
            goto cleanup;
        }
        if (p < -20 || p > 100) {
            ok = dberr_set(err, 51083, "cannot apply %s with precision value %g value must be in [-20, 100]",
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
        double r = is_round ? round_even((double)x / scale) * scale : trunc((double)x / scale) * scale;
        if (v[0].value_type == BSON_TYPE_INT32 && r >= INT32_MIN && r <= INT32_MAX)
            val_int32(out, (int32_t)r);
        else if (r >= -9.2e18 && r <= 9.2e18)
            val_int64(out, (int64_t)r);
        else
            val_double(out, r);
        goto cleanup;
    }
    {
        double x = num_double(&v[0]), r;
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
        val_double(out, r);
    }
cleanup:
    free_args(v, e->nargs);
    return ok;
}

static bool op_round(const expr_t *e, const expr_ctx_t *ctx, bson_value_t *out, dberr_t *err)
{
    return round_trunc(e, ctx, out, err, true);
}

static bool op_trunc(const expr_t *e, const expr_ctx_t *ctx, bson_value_t *out, dberr_t *err)
{
    return round_trunc(e, ctx, out, err, false);
}

/* $sqrt / $exp / $ln / $log10: double results, null on null. */
static bool math1(const expr_t *e, const expr_ctx_t *ctx, bson_value_t *out, dberr_t *err,
                  double (*fn)(double), bool need_nonneg, bool need_pos)
{
    bson_value_t v;
    bool done;
    if (!one_number(e, ctx, &v, &done, out, err))
        return false;
    if (done)
        return true;
    double x = num_double(&v);
    val_free(&v);
    if (need_nonneg && x < 0)
        return dberr_set(err, 28714, "%s's argument must be greater than or equal to 0",
                         e->op->name);
    if (need_pos && !(x > 0))
        return dberr_set(err, 28766, "%s's argument must be a positive number, but is %g",
                         e->op->name, x);
    val_double(out, fn(x));
    return true;
}

static bool op_sqrt(const expr_t *e, const expr_ctx_t *ctx, bson_value_t *out, dberr_t *err)
{
    return math1(e, ctx, out, err, sqrt, true, false);
}

static bool op_exp(const expr_t *e, const expr_ctx_t *ctx, bson_value_t *out, dberr_t *err)
{
    return math1(e, ctx, out, err, exp, false, false);
}

static bool op_ln(const expr_t *e, const expr_ctx_t *ctx, bson_value_t *out, dberr_t *err)
{
    return math1(e, ctx, out, err, log, false, true);
}

static bool op_log10(const expr_t *e, const expr_ctx_t *ctx, bson_value_t *out, dberr_t *err)
{
    return math1(e, ctx, out, err, log10, false, true);
}

static bool op_pow(const expr_t *e, const expr_ctx_t *ctx, bson_value_t *out, dberr_t *err)
{
    bson_value_t v[2];
    bool ok = true;
    if (!eval_args(e, ctx, v, err))
        return false;
    if (is_nullish(&v[0]) || is_nullish(&v[1])) {
        val_null(out);
    } else if (!is_number(&v[0])) {
        ok = dberr_set(err, 28762, "$pow's base must be numeric, not %s", shellfmt_type_name(v[0].value_type));
    } else if (!is_number(&v[1])) {
        ok = dberr_set(err, 28763, "$pow's exponent must be numeric, not %s",
                       shellfmt_type_name(v[1].value_type));
    } else {
        double b = num_double(&v[0]), x = num_double(&v[1]);
        if (b == 0 && x < 0) {
            ok = dberr_set(err, 28764, "$pow cannot take a base of 0 and a negative exponent");
        } else if ((v[0].value_type == BSON_TYPE_INT32 || v[0].value_type == BSON_TYPE_INT64) &&
                   (v[1].value_type == BSON_TYPE_INT32 || v[1].value_type == BSON_TYPE_INT64) &&
                   x >= 0) {
            num_acc_t acc;
            acc_init(&acc, 1);
            int64_t n = v[1].value_type == BSON_TYPE_INT32 ? v[1].value.v_int32 : v[1].value.v_int64;
            int64_t base = v[0].value_type == BSON_TYPE_INT32 ? v[0].value.v_int32 : v[0].value.v_int64;
            if (base >= -1 && base <= 1) {
                /* |base| <= 1 never overflows: answer directly, no loop */
                acc.l = base == 0 ? (n == 0 ? 1 : 0) : base == 1 ? 1 : (n % 2 ? -1 : 1);
                acc.d = (double)acc.l;
            } else {
                for (int64_t i = 0; i < n && acc.type != BSON_TYPE_DOUBLE; i++)
                    acc_mul(&acc, &v[0]);
            }
            if (acc.type == BSON_TYPE_DOUBLE)
                acc.d = pow(b, x);
            if (v[0].value_type == BSON_TYPE_INT64 || v[1].value_type == BSON_TYPE_INT64)
                if (acc.type == BSON_TYPE_INT32)
                    acc.type = BSON_TYPE_INT64;
            acc_result(&acc, out);
        } else {
            val_double(out, pow(b, x));
        }
    }
    free_args(v, 2);
    return ok;
}

/* ------------------------------------------------------ comparison, logic */

static bool compare_op(const expr_t *e, const expr_ctx_t *ctx, bson_value_t *out, dberr_t *err)
{
    bson_value_t v[2];
    if (!eval_args(e, ctx, v, err))
        return false;
    int c = agg_compare(&v[0], &v[1]);
    const char *n = e->op->name;
    free_args(v, 2);
    if (strcmp(n, "$cmp") == 0)
        val_int32(out, c < 0 ? -1 : c > 0 ? 1 : 0);
    else if (strcmp(n, "$eq") == 0)
        val_bool(out, c == 0);
    else if (strcmp(n, "$ne") == 0)
        val_bool(out, c != 0);
    else if (strcmp(n, "$gt") == 0)
        val_bool(out, c > 0);
    else if (strcmp(n, "$gte") == 0)
        val_bool(out, c >= 0);
    else if (strcmp(n, "$lt") == 0)
        val_bool(out, c < 0);
    else
        val_bool(out, c <= 0);
    return true;
}

static bool op_and_or(const expr_t *e, const expr_ctx_t *ctx, bson_value_t *out, dberr_t *err)
{
    bool is_and = strcmp(e->op->name, "$and") == 0;
    for (size_t i = 0; i < e->nargs; i++) {
        bson_value_t v;
        if (!eval(e->args[i], ctx, &v, err))
            return false;
        bool t = expr_truthy(&v);
        val_free(&v);
        if (is_and && !t) {
            val_bool(out, false);
            return true;
        }
        if (!is_and && t) {
            val_bool(out, true);
            return true;
        }
    }
    val_bool(out, is_and);
    return true;
}

static bool op_not(const expr_t *e, const expr_ctx_t *ctx, bson_value_t *out, dberr_t *err)
{
    bson_value_t v;
    if (!eval_arg(e, 0, ctx, &v, err))
        return false;
    bool t = expr_truthy(&v);
    val_free(&v);
    val_bool(out, !t);
    return true;
}

static bool op_literal(const expr_t *e, const expr_ctx_t *ctx, bson_value_t *out, dberr_t *err)
{
    (void)ctx;
    (void)err;
    bson_value_copy(&e->cval, out);
    return true;
}

static bool op_cond(const expr_t *e, const expr_ctx_t *ctx, bson_value_t *out, dberr_t *err)
{
    bson_value_t v;
    if (!eval_arg(e, 0, ctx, &v, err))
        return false;
    bool t = expr_truthy(&v);
    val_free(&v);
    return eval_arg(e, t ? 1 : 2, ctx, out, err);
}

static bool op_ifnull(const expr_t *e, const expr_ctx_t *ctx, bson_value_t *out, dberr_t *err)
{
    for (size_t i = 0; i < e->nargs; i++) {
        if (!eval(e->args[i], ctx, out, err))
            return false;
        if (i + 1 == e->nargs || !is_nullish(out))
            return true;
        val_free(out);
    }
    return true;
}

static bool op_let(const expr_t *e, const expr_ctx_t *ctx, bson_value_t *out, dberr_t *err)
{
    bson_t vars;
    bool ok = true;
    size_t nvars = e->nargs - 1;
    bson_init(&vars);
    if (ctx->vars)
        bson_concat(&vars, ctx->vars);
    for (size_t i = 0; i < nvars; i++) {
        bson_value_t v;
        if (!eval(e->args[i], ctx, &v, err)) {
            ok = false;
            goto cleanup;
        }
        /* a later binding of the same name wins: drop earlier ones first */
        if (bson_has_field(&vars, e->names[i])) {
            bson_t tmp;
            bson_init(&tmp);
            bson_copy_to_excluding_noinit(&vars, &tmp, e->names[i], NULL);
            bson_destroy(&vars);
            bson_steal(&vars, &tmp);
        }
        if (v.value_type == BSON_TYPE_EOD)
            bson_append_undefined(&vars, e->names[i], -1);
        else
            bson_append_value(&vars, e->names[i], -1, &v);
        val_free(&v);
    }
    {
        expr_ctx_t inner = *ctx;
        inner.vars = &vars;
        ok = eval(e->args[nvars], &inner, out, err);
    }
cleanup:
    bson_destroy(&vars);
    return ok;
}

/* Binds `name` to `v` on top of `base` into `vars` (initialised here). */
static void bind_var(bson_t *vars, const bson_t *base, const char *name, const bson_value_t *v)
{
    bson_init(vars);
    if (base)
        bson_copy_to_excluding_noinit(base, vars, name, NULL);
    bson_append_value(vars, name, -1, v);
}

/* ----------------------------------------------------------------- strings */

/* Renders a date (ms since the epoch) as mongod's ISO-8601 form. */
static void format_date(int64_t ms, char *buf, size_t n)
{
    int64_t secs = ms / 1000;
    int64_t rem = ms % 1000;
    if (rem < 0) {
        rem += 1000;
        secs -= 1;
    }
    time_t t = (time_t)secs;
    struct tm tm;
    gmtime_r(&t, &tm);
    snprintf(buf, n, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1,
             tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (int)rem);
}

/* Formats a double the way mongod's string conversions do. */
static void format_double(double d, char *buf, size_t n)
{
    if (isnan(d))
        snprintf(buf, n, "NaN");
    else if (isinf(d))
        snprintf(buf, n, d > 0 ? "Infinity" : "-Infinity");
    else {
        /* shortest representation that round-trips */
        for (int p = 1; p <= 17; p++) {
            snprintf(buf, n, "%.*g", p, d);
            if (strtod(buf, NULL) == d)
                break;
        }
    }
}

/* Coerces `v` to a string as $concat-free string operators do ($toLower,
 * $substr): null → "", numbers and dates print. False for other types. */
static bool coerce_string(const bson_value_t *v, char **s, size_t *len)
{
    char buf[64];
    switch (v->value_type) {
    case BSON_TYPE_UTF8:
        *s = bson_strndup(v->value.v_utf8.str, v->value.v_utf8.len);
        *len = v->value.v_utf8.len;
        return true;
    case BSON_TYPE_SYMBOL:
        *s = bson_strndup(v->value.v_symbol.symbol, v->value.v_symbol.len);
        *len = v->value.v_symbol.len;
        return true;
    case BSON_TYPE_EOD:
    case BSON_TYPE_NULL:
    case BSON_TYPE_UNDEFINED: buf[0] = '\0'; break;
    case BSON_TYPE_INT32: snprintf(buf, sizeof buf, "%d", v->value.v_int32); break;
    case BSON_TYPE_INT64: snprintf(buf, sizeof buf, "%lld", (long long)v->value.v_int64); break;
    case BSON_TYPE_DOUBLE: format_double(v->value.v_double, buf, sizeof buf); break;
    case BSON_TYPE_DECIMAL128: bson_decimal128_to_string(&v->value.v_decimal128, buf); break;
    case BSON_TYPE_DATE_TIME: format_date(v->value.v_datetime, buf, sizeof buf); break;
    case BSON_TYPE_TIMESTAMP:
        snprintf(buf, sizeof buf, "Timestamp(%u, %u)", v->value.v_timestamp.timestamp,
                 v->value.v_timestamp.increment);
        break;
    default: return false;
    }
    *len = strlen(buf);
    *s = bson_strndup(buf, *len);
    return true;
}

static bool op_concat(const expr_t *e, const expr_ctx_t *ctx, bson_value_t *out, dberr_t *err)
{
    bson_string_t *s = bson_string_new(NULL);
    bool ok = true, is_null = false;
    for (size_t i = 0; i < e->nargs; i++) {
        bson_value_t v;
        if (!eval(e->args[i], ctx, &v, err)) {
            ok = false;
            goto cleanup;
        }
        if (is_nullish(&v)) {
            is_null = true;
        } else if (v.value_type != BSON_TYPE_UTF8) {
            ok = dberr_set(err, 16702, "$concat only supports strings, not %s",
                           shellfmt_type_name(v.value_type));
            val_free(&v);
            goto cleanup;
        } else if (!is_null) {
            bson_string_append_printf(s, "%.*s", (int)v.value.v_utf8.len, v.value.v_utf8.str);
        }
        val_free(&v);
    }
    if (is_null)
        val_null(out);
    else
        val_string(out, s->str, s->len);
cleanup:
    bson_string_free(s, true);
    return ok;
}

static bool case_op(const expr_t *e, const expr_ctx_t *ctx, bson_value_t *out, dberr_t *err,
                    bool upper)
{
    bson_value_t v;
    char *s;
    size_t len;
    if (!eval_arg(e, 0, ctx, &v, err))
        return false;
    if (!coerce_string(&v, &s, &len)) {
        const char *tn = shellfmt_type_name(v.value_type);
        val_free(&v);
        return dberr_set(err, 16007, "can't convert from BSON type %s to String", tn);
    }
    val_free(&v);
    for (size_t i = 0; i < len; i++)
        s[i] = (char)(upper ? toupper((unsigned char)s[i]) : tolower((unsigned char)s[i]));
    val_string(out, s, len);
    bson_free(s);
    return true;
}

static bool op_tolower(const expr_t *e, const expr_ctx_t *ctx, bson_value_t *out, dberr_t *err)
{
    return case_op(e, ctx, out, err, false);
}

static bool op_toupper(const expr_t *e, const expr_ctx_t *ctx, bson_value_t *out, dberr_t *err)
{
    return case_op(e, ctx, out, err, true);
}

static bool op_strlenbytes(const expr_t *e, const expr_ctx_t *ctx, bson_value_t *out,
                           dberr_t *err)
{
    bson_value_t v;
    if (!eval_arg(e, 0, ctx, &v, err))
        return false;
    if (v.value_type != BSON_TYPE_UTF8) {
        const char *tn = shellfmt_type_name(v.value_type);
        val_free(&v);
        return dberr_set(err, 34473, "$strLenBytes requires a string argument, found: %s", tn);
    }
    val_int32(out, (int32_t)v.value.v_utf8.len);
    val_free(&v);
    return true;
}

static bool op_strlencp(const expr_t *e, const expr_ctx_t *ctx, bson_value_t *out, dberr_t *err)
{
    bson_value_t v;
    if (!eval_arg(e, 0, ctx, &v, err))
        return false;
    if (v.value_type != BSON_TYPE_UTF8) {
        const char *tn = shellfmt_type_name(v.value_type);
        val_free(&v);
        return dberr_set(err, 34471, "$strLenCP requires a string argument, found: %s", tn);
    }
    int32_t n = 0;
    for (uint32_t i = 0; i < v.value.v_utf8.len; i++)
        if (((unsigned char)v.value.v_utf8.str[i] & 0xc0) != 0x80)
            n++;
    val_int32(out, n);
    val_free(&v);
    return true;
}

static bool op_substr(const expr_t *e, const expr_ctx_t *ctx, bson_value_t *out, dberr_t *err)
{
    bson_value_t v[3];
    bool ok = true;
    char *s = NULL;
    size_t len;
    if (!eval_args(e, ctx, v, err))
        return false;
    if (!coerce_string(&v[0], &s, &len)) {
        ok = dberr_set(err, 16007, "can't convert from BSON type %s to String",
                       shellfmt_type_name(v[0].value_type));
        goto cleanup;
    }
    if (!is_number(&v[1])) {
        ok = dberr_set(err, 16034, "%s: starting index must be a numeric type (is BSON type %s)",
                       e->op->name, shellfmt_type_name(v[1].value_type));
        goto cleanup;
    }
    if (!is_number(&v[2])) {
        ok = dberr_set(err, 16035, "%s: length must be a numeric type (is BSON type %s)",
                       e->op->name, shellfmt_type_name(v[2].value_type));
        goto cleanup;
    }
    {
        double ds = num_double(&v[1]), dl = num_double(&v[2]);
        size_t start = ds < 0 ? len : ds > (double)len ? len : (size_t)ds;
        size_t n = (dl < 0 || dl > (double)(len - start)) ? len - start : (size_t)dl;
        if (start < len && ((unsigned char)s[start] & 0xc0) == 0x80) {
            ok = dberr_set(err, 28656,
                           "%s:  Invalid range, starting index is a UTF-8 continuation byte.",
                           e->op->name);
            goto cleanup;
        }
        if (start + n < len && ((unsigned char)s[start + n] & 0xc0) == 0x80) {
            ok = dberr_set(err, 28657,
                           "%s:  Invalid range, ending index is in the middle of a UTF-8 character.",
                           e->op->name);
            goto cleanup;
        }
        val_string(out, s + start, n);
    }
cleanup:
    bson_free(s);
    free_args(v, 3);
    return ok;
}

static bool op_strcasecmp(const expr_t *e, const expr_ctx_t *ctx, bson_value_t *out,
                          dberr_t *err)
{
    bson_value_t v[2];
    char *a = NULL, *b = NULL;
    size_t al, bl;
    bool ok = true;
    if (!eval_args(e, ctx, v, err))
        return false;
    if (!coerce_string(&v[0], &a, &al) || !coerce_string(&v[1], &b, &bl)) {
        ok = dberr_set(err, 16007, "can't convert from BSON type %s to String",
                       shellfmt_type_name(a ? v[1].value_type : v[0].value_type));
        goto cleanup;
    }
    {
        int c = strcasecmp(a, b);
        val_int32(out, c < 0 ? -1 : c > 0 ? 1 : 0);
    }
cleanup:
    bson_free(a);
    bson_free(b);
    free_args(v, 2);
    return ok;
}

static bool op_split(const expr_t *e, const expr_ctx_t *ctx, bson_value_t *out, dberr_t *err)
{
    bson_value_t v[2];
    bool ok = true;
    if (!eval_args(e, ctx, v, err))
        return false;
    if (is_nullish(&v[0])) {
        val_null(out);
        goto cleanup;
    }
    if (v[0].value_type != BSON_TYPE_UTF8) {
        ok = dberr_set(err, 40085, "$split requires an expression that evaluates to a string as a first argument, found: %s",
                       shellfmt_type_name(v[0].value_type));
        goto cleanup;
    }
    if (v[1].value_type != BSON_TYPE_UTF8) {
        ok = dberr_set(err, 40086, "$split requires an expression that evaluates to a string as a second argument, found: %s",
                       shellfmt_type_name(v[1].value_type));
        goto cleanup;
    }
    if (v[1].value.v_utf8.len == 0) {
        ok = dberr_set(err, 40087, "$split requires a non-empty separator");
        goto cleanup;
    }
    {
        bson_t arr;
        const char *s = v[0].value.v_utf8.str, *end = s + v[0].value.v_utf8.len;
        const char *sep = v[1].value.v_utf8.str;
        size_t seplen = v[1].value.v_utf8.len;
        uint32_t idx = 0;
        bson_init(&arr);
        for (;;) {
            const char *hit = NULL;
            for (const char *p = s; p + seplen <= end; p++)
                if (memcmp(p, sep, seplen) == 0) {
                    hit = p;
                    break;
                }
            char key[16];
            const char *k;
            bson_uint32_to_string(idx++, &k, key, sizeof key);
            bson_append_utf8(&arr, k, -1, s, (int)((hit ? hit : end) - s));
            if (!hit)
                break;
            s = hit + seplen;
        }
        val_from_bson(out, &arr, BSON_TYPE_ARRAY);
    }
cleanup:
    free_args(v, 2);
    return ok;
}

/* ------------------------------------------------------------------ arrays */

static bool op_size(const expr_t *e, const expr_ctx_t *ctx, bson_value_t *out, dberr_t *err)
{
    bson_value_t v;
    if (!eval_arg(e, 0, ctx, &v, err))
        return false;
    if (v.value_type != BSON_TYPE_ARRAY) {
        const char *tn = shellfmt_type_name(v.value_type);
        val_free(&v);
        return dberr_set(err, 17124, "The argument to $size must be an array. Type of argument: %s",
                         tn);
    }
    bson_t b;
    bson_of(&v, &b);
    val_int32(out, (int32_t)bson_count_keys(&b));
    val_free(&v);
    return true;
}

/* Reads a number that must be a whole 32-bit integer. */
static bool as_int32(const bson_value_t *v, int32_t *out)
{
    if (!is_number(v))
        return false;
    double d = num_double(v);
    if (d != floor(d) || d < INT32_MIN || d > INT32_MAX)
        return false;
    *out = (int32_t)d;
    return true;
}

static bool op_arrayelemat(const expr_t *e, const expr_ctx_t *ctx, bson_value_t *out,
                           dberr_t *err)
{
    bson_value_t v[2];
    bool ok = true;
    int32_t idx;
    if (!eval_args(e, ctx, v, err))
        return false;
    if (is_nullish(&v[0]) || is_nullish(&v[1])) {
        val_null(out);
    } else if (v[0].value_type != BSON_TYPE_ARRAY) {
        ok = dberr_set(err, 28689, "$arrayElemAt's first argument must be an array, but is %s",
                       shellfmt_type_name(v[0].value_type));
    } else if (!is_number(&v[1])) {
        ok = dberr_set(err, 28690, "$arrayElemAt's second argument must be a numeric value, but is %s",
                       shellfmt_type_name(v[1].value_type));
    } else if (!as_int32(&v[1], &idx)) {
        ok = dberr_set(err, 28691,
                       "$arrayElemAt's second argument must be representable as a 32-bit integer: %g",
                       num_double(&v[1]));
    } else {
        bson_t b;
        bson_iter_t it;
        bson_of(&v[0], &b);
        int32_t n = (int32_t)bson_count_keys(&b);
        int64_t i = idx < 0 ? (int64_t)n + idx : idx;
        val_missing(out);
        if (i >= 0 && i < n && bson_iter_init(&it, &b)) {
            for (int64_t j = 0; bson_iter_next(&it); j++)
                if (j == i) {
                    bson_value_copy(bson_iter_value(&it), out);
                    break;
                }
        }
    }
    free_args(v, 2);
    return ok;
}

/* $slice: [array, n] or [array, position, n]. */
static bool op_slice(const expr_t *e, const expr_ctx_t *ctx, bson_value_t *out, dberr_t *err)
{
    bson_value_t v[3];
    bool ok = true;
    int32_t a = 0, b = 0;
    if (!eval_args(e, ctx, v, err))
        return false;
    bool nul = false;
    for (size_t i = 0; i < e->nargs; i++)
        nul |= is_nullish(&v[i]);
    if (nul) {
        val_null(out);
        goto cleanup;
    }
    if (v[0].value_type != BSON_TYPE_ARRAY) {
        ok = dberr_set(err, 28724, "First argument to $slice must be an array, but is of type: %s",
                       shellfmt_type_name(v[0].value_type));
        goto cleanup;
    }
    if (!as_int32(&v[1], &a) || (e->nargs == 3 && !as_int32(&v[2], &b))) {
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
        bson_of(&v[0], &arr);
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
        val_from_bson(out, &res, BSON_TYPE_ARRAY);
    }
cleanup:
    free_args(v, e->nargs);
    return ok;
}

/* $first / $last (array expression form). */
static bool op_first_last(const expr_t *e, const expr_ctx_t *ctx, bson_value_t *out,
                          dberr_t *err)
{
    bson_value_t v;
    bool first = strcmp(e->op->name, "$first") == 0;
    if (!eval_arg(e, 0, ctx, &v, err))
        return false;
    if (is_nullish(&v)) {
        val_free(&v);
        val_null(out);
        return true;
    }
    if (v.value_type != BSON_TYPE_ARRAY) {
        const char *tn = shellfmt_type_name(v.value_type);
        val_free(&v);
        return dberr_set(err, 28689, "%s's argument must be an array, but is %s", e->op->name,
                         tn);
    }
    bson_t b;
    bson_iter_t it;
    bson_of(&v, &b);
    val_missing(out);
    if (bson_iter_init(&it, &b)) {
        while (bson_iter_next(&it)) {
            val_free(out);
            bson_value_copy(bson_iter_value(&it), out);
            if (first)
                break;
        }
    }
    val_free(&v);
    return true;
}

static bool op_in(const expr_t *e, const expr_ctx_t *ctx, bson_value_t *out, dberr_t *err)
{
    bson_value_t v[2];
    bool ok = true;
    if (!eval_args(e, ctx, v, err))
        return false;
    if (v[1].value_type != BSON_TYPE_ARRAY) {
        ok = dberr_set(err, 40081, "$in requires an array as a second argument, found: %s",
                       shellfmt_type_name(v[1].value_type));
    } else {
        bson_t b;
        bson_iter_t it;
        bool found = false;
        bson_of(&v[1], &b);
        if (bson_iter_init(&it, &b))
            while (!found && bson_iter_next(&it))
                found = agg_compare(&v[0], bson_iter_value(&it)) == 0;
        val_bool(out, found);
    }
    free_args(v, 2);
    return ok;
}

static bool op_indexofarray(const expr_t *e, const expr_ctx_t *ctx, bson_value_t *out,
                            dberr_t *err)
{
    bson_value_t v[4];
    bool ok = true;
    int32_t start = 0, end = INT32_MAX;
    if (!eval_args(e, ctx, v, err))
        return false;
    if (is_nullish(&v[0])) {
        val_null(out);
        goto cleanup;
    }
    if (v[0].value_type != BSON_TYPE_ARRAY) {
        ok = dberr_set(err, 40090, "$indexOfArray requires an array as a first argument, found: %s",
                       shellfmt_type_name(v[0].value_type));
        goto cleanup;
    }
    if ((e->nargs > 2 && (!as_int32(&v[2], &start) || start < 0)) ||
        (e->nargs > 3 && (!as_int32(&v[3], &end) || end < 0))) {
        ok = dberr_set(err, 40097, "$indexOfArray requires a non-negative integral index");
        goto cleanup;
    }
    {
        bson_t b;
        bson_iter_t it;
        int32_t found = -1;
        bson_of(&v[0], &b);
        if (bson_iter_init(&it, &b))
            for (int32_t i = 0; bson_iter_next(&it) && i < end; i++)
                if (i >= start && agg_compare(&v[1], bson_iter_value(&it)) == 0) {
                    found = i;
                    break;
                }
        val_int32(out, found);
    }
cleanup:
    free_args(v, e->nargs);
    return ok;
}

static bool op_isarray(const expr_t *e, const expr_ctx_t *ctx, bson_value_t *out, dberr_t *err)
{
    bson_value_t v;
    if (!eval_arg(e, 0, ctx, &v, err))
        return false;
    val_bool(out, v.value_type == BSON_TYPE_ARRAY);
    val_free(&v);
    return true;
}

static bool op_concatarrays(const expr_t *e, const expr_ctx_t *ctx, bson_value_t *out,
                            dberr_t *err)
{
    bson_t arr;
    uint32_t idx = 0;
    bool is_null = false;
    bson_init(&arr);
    for (size_t i = 0; i < e->nargs; i++) {
        bson_value_t v;
        if (!eval(e->args[i], ctx, &v, err)) {
            bson_destroy(&arr);
            return false;
        }
        if (is_nullish(&v)) {
            is_null = true;
        } else if (v.value_type != BSON_TYPE_ARRAY) {
            const char *tn = shellfmt_type_name(v.value_type);
            val_free(&v);
            bson_destroy(&arr);
            return dberr_set(err, 28664, "$concatArrays only supports arrays, not %s", tn);
        } else if (!is_null) {
            bson_t b;
            bson_iter_t it;
            bson_of(&v, &b);
            if (bson_iter_init(&it, &b))
                while (bson_iter_next(&it)) {
                    char key[16];
                    const char *k;
                    bson_uint32_to_string(idx++, &k, key, sizeof key);
                    bson_append_value(&arr, k, -1, bson_iter_value(&it));
                }
        }
        val_free(&v);
    }
    if (is_null) {
        bson_destroy(&arr);
        val_null(out);
    } else {
        val_from_bson(out, &arr, BSON_TYPE_ARRAY);
    }
    return true;
}

static bool op_reversearray(const expr_t *e, const expr_ctx_t *ctx, bson_value_t *out,
                            dberr_t *err)
{
    bson_value_t v;
    if (!eval_arg(e, 0, ctx, &v, err))
        return false;
    if (is_nullish(&v)) {
        val_free(&v);
        val_null(out);
        return true;
    }
    if (v.value_type != BSON_TYPE_ARRAY) {
        const char *tn = shellfmt_type_name(v.value_type);
        val_free(&v);
        return dberr_set(err, 34435, "The argument to $reverseArray must be an array, but was of type: %s",
                         tn);
    }
    bson_t b, arr;
    bson_iter_t it;
    size_t n = 0;
    bson_of(&v, &b);
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
    free_args(copies, n);
    bson_free(copies);
    val_free(&v);
    val_from_bson(out, &arr, BSON_TYPE_ARRAY);
    return true;
}

static bool op_range(const expr_t *e, const expr_ctx_t *ctx, bson_value_t *out, dberr_t *err)
{
    bson_value_t v[3];
    int32_t a, b, step = 1;
    bool ok = true;
    if (!eval_args(e, ctx, v, err))
        return false;
    if (!as_int32(&v[0], &a) || !as_int32(&v[1], &b) ||
        (e->nargs > 2 && !as_int32(&v[2], &step))) {
        ok = dberr_set(err, 34443, "$range requires numeric arguments representable as 32-bit integers");
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
                free_args(v, e->nargs);
                return dberr_set(err, 548, "$range would use too much memory");
            }
        }
        val_from_bson(out, &arr, BSON_TYPE_ARRAY);
    }
    free_args(v, e->nargs);
    return ok;
}

/* $map {input, as, in} and $filter {input, as, cond, limit}. */
static bool map_filter(const expr_t *e, const expr_ctx_t *ctx, bson_value_t *out, dberr_t *err,
                       bool is_map)
{
    bson_value_t input, asv;
    bool ok = true;
    const char *as = "this";
    int64_t limit = -1;
    bson_t arr;
    bson_init(&arr);
    if (!eval_arg(e, 0, ctx, &input, err)) {
        bson_destroy(&arr);
        return false;
    }
    val_missing(&asv);
    if (e->args[1]) {
        if (!eval(e->args[1], ctx, &asv, err)) {
            ok = false;
            goto cleanup;
        }
        if (asv.value_type == BSON_TYPE_UTF8)
            as = asv.value.v_utf8.str;
    }
    if (!is_map && e->nargs > 3 && e->args[3]) {
        bson_value_t lv;
        int32_t l;
        if (!eval(e->args[3], ctx, &lv, err)) {
            ok = false;
            goto cleanup;
        }
        if (!is_nullish(&lv)) {
            if (!as_int32(&lv, &l) || l < 1) {
                val_free(&lv);
                ok = dberr_set(err, 327391, "$filter: limit must be greater than 0");
                goto cleanup;
            }
            limit = l;
        }
        val_free(&lv);
    }
    if (is_nullish(&input)) {
        val_null(out);
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
        bson_of(&input, &b);
        if (bson_iter_init(&it, &b))
            while (bson_iter_next(&it) && (limit < 0 || idx < limit)) {
                bson_value_t elem, r;
                bson_t vars;
                bson_value_copy(bson_iter_value(&it), &elem);
                bind_var(&vars, ctx->vars, as, &elem);
                expr_ctx_t inner = *ctx;
                inner.vars = &vars;
                ok = eval(e->args[2], &inner, &r, err);
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
                    val_free(&r);
                }
                val_free(&elem);
                if (!ok)
                    goto cleanup;
            }
        val_from_bson(out, &arr, BSON_TYPE_ARRAY);
        bson_init(&arr);
    }
cleanup:
    bson_destroy(&arr);
    val_free(&input);
    val_free(&asv);
    return ok;
}

static bool op_map(const expr_t *e, const expr_ctx_t *ctx, bson_value_t *out, dberr_t *err)
{
    return map_filter(e, ctx, out, err, true);
}

static bool op_filter(const expr_t *e, const expr_ctx_t *ctx, bson_value_t *out, dberr_t *err)
{
    return map_filter(e, ctx, out, err, false);
}

/* $reduce {input, initialValue, in} with $$value and $$this. */
static bool op_reduce(const expr_t *e, const expr_ctx_t *ctx, bson_value_t *out, dberr_t *err)
{
    bson_value_t input, acc;
    bool ok = true;
    if (!eval_arg(e, 0, ctx, &input, err))
        return false;
    if (!eval_arg(e, 1, ctx, &acc, err)) {
        val_free(&input);
        return false;
    }
    if (is_nullish(&input)) {
        val_null(out);
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
        bson_of(&input, &b);
        if (bson_iter_init(&it, &b))
            while (bson_iter_next(&it)) {
                bson_t vars, tmp;
                bson_value_t r, nul;
                val_null(&nul);
                bind_var(&tmp, ctx->vars, "this", bson_iter_value(&it));
                bind_var(&vars, &tmp, "value", acc.value_type == BSON_TYPE_EOD ? &nul : &acc);
                bson_destroy(&tmp);
                expr_ctx_t inner = *ctx;
                inner.vars = &vars;
                ok = eval(e->args[2], &inner, &r, err);
                bson_destroy(&vars);
                if (!ok)
                    goto cleanup;
                val_free(&acc);
                acc = r;
            }
        *out = acc;
        val_missing(&acc);
    }
cleanup:
    val_free(&input);
    val_free(&acc);
    return ok;
}

/* ----------------------------------------------------- $min $max $sum $avg */

/* Collects the operands of $min/$max/$sum/$avg: the elements of a single
 * array argument, or the arguments themselves. Calls fn for each. */
typedef void (*operand_fn)(const bson_value_t *v, void *st);

static bool for_operands(const expr_t *e, const expr_ctx_t *ctx, operand_fn fn, void *st,
                         dberr_t *err)
{
    for (size_t i = 0; i < e->nargs; i++) {
        bson_value_t v;
        if (!eval(e->args[i], ctx, &v, err))
            return false;
        if (e->nargs == 1 && v.value_type == BSON_TYPE_ARRAY) {
            bson_t b;
            bson_iter_t it;
            bson_of(&v, &b);
            if (bson_iter_init(&it, &b))
                while (bson_iter_next(&it))
                    fn(bson_iter_value(&it), st);
        } else {
            fn(&v, st);
        }
        val_free(&v);
    }
    return true;
}

typedef struct minmax_st {
    bool is_max;
    bson_value_t best; /* EOD until a non-null value is seen */
} minmax_st_t;

static void minmax_fn(const bson_value_t *v, void *p)
{
    minmax_st_t *st = p;
    if (is_nullish(v))
        return;
    if (st->best.value_type == BSON_TYPE_EOD) {
        bson_value_copy(v, &st->best);
        return;
    }
    int c = compare_values(v, &st->best);
    if ((st->is_max && c > 0) || (!st->is_max && c < 0)) {
        val_free(&st->best);
        bson_value_copy(v, &st->best);
    }
}

static bool op_minmax(const expr_t *e, const expr_ctx_t *ctx, bson_value_t *out, dberr_t *err)
{
    minmax_st_t st;
    st.is_max = strcmp(e->op->name, "$max") == 0;
    val_missing(&st.best);
    if (!for_operands(e, ctx, minmax_fn, &st, err)) {
        val_free(&st.best);
        return false;
    }
    if (st.best.value_type == BSON_TYPE_EOD)
        val_null(out);
    else
        *out = st.best;
    return true;
}

typedef struct sum_st {
    num_acc_t acc;
    int64_t count;
} sum_st_t;

static void sum_fn(const bson_value_t *v, void *p)
{
    sum_st_t *st = p;
    if (!is_number(v))
        return;
    acc_add(&st->acc, v);
    st->count++;
}

static bool op_sum_avg(const expr_t *e, const expr_ctx_t *ctx, bson_value_t *out, dberr_t *err)
{
    sum_st_t st;
    acc_init(&st.acc, 0);
    st.count = 0;
    if (!for_operands(e, ctx, sum_fn, &st, err))
        return false;
    if (strcmp(e->op->name, "$avg") == 0) {
        if (st.count == 0)
            val_null(out);
        else
            val_double(out, st.acc.d / (double)st.count);
    } else {
        acc_result(&st.acc, out);
    }
    return true;
}

/* ------------------------------------------------------- types, documents */

static bool op_type(const expr_t *e, const expr_ctx_t *ctx, bson_value_t *out, dberr_t *err)
{
    bson_value_t v;
    if (!eval_arg(e, 0, ctx, &v, err))
        return false;
    const char *tn = shellfmt_type_name(v.value_type);
    val_string(out, tn, strlen(tn));
    val_free(&v);
    return true;
}

static bool op_isnumber(const expr_t *e, const expr_ctx_t *ctx, bson_value_t *out, dberr_t *err)
{
    bson_value_t v;
    if (!eval_arg(e, 0, ctx, &v, err))
        return false;
    val_bool(out, is_number(&v));
    val_free(&v);
    return true;
}

/* Parses a whole base-10 integer string; false when not a whole number. */
static bool parse_long(const char *s, int64_t *out)
{
    char *end;
    if (!*s || isspace((unsigned char)*s))
        return false;
    errno = 0;
    long long x = strtoll(s, &end, 10);
    if (*end || errno)
        return false;
    *out = x;
    return true;
}

/* $toInt / $toLong / $toDouble / $toString / $toBool ($convert with no onError). */
static bool convert_to(const bson_value_t *v, bson_type_t to, bson_value_t *out, dberr_t *err)
{
    char buf[64];
    if (is_nullish(v)) {
        val_null(out);
        return true;
    }
    if (to == BSON_TYPE_UTF8) {
        char *s;
        size_t len;
        if (v->value_type == BSON_TYPE_BOOL) {
            const char *b = v->value.v_bool ? "true" : "false";
            val_string(out, b, strlen(b));
            return true;
        }
        if (v->value_type == BSON_TYPE_OID) {
            bson_oid_to_string(&v->value.v_oid, buf);
            val_string(out, buf, strlen(buf));
            return true;
        }
        if (v->value_type == BSON_TYPE_TIMESTAMP || !coerce_string(v, &s, &len))
            return dberr_set(err, 241, "Unsupported conversion from %s to string in $convert with no onError value",
                             shellfmt_type_name(v->value_type));
        val_string(out, s, len);
        bson_free(s);
        return true;
    }
    if (to == BSON_TYPE_BOOL) {
        val_bool(out, expr_truthy(v));
        return true;
    }
    double d = 0;
    int64_t l = 0;
    bool is_int = false;
    switch (v->value_type) {
    case BSON_TYPE_INT32: l = v->value.v_int32, is_int = true; break;
    case BSON_TYPE_INT64: l = v->value.v_int64, is_int = true; break;
    case BSON_TYPE_DOUBLE:
    case BSON_TYPE_DECIMAL128: d = num_double(v); break;
    case BSON_TYPE_BOOL: l = v->value.v_bool, is_int = true; break;
    case BSON_TYPE_DATE_TIME:
        if (to == BSON_TYPE_INT32)
            return dberr_set(err, 241, "Unsupported conversion from date to int in $convert with no onError value");
        l = v->value.v_datetime, is_int = true;
        break;
    case BSON_TYPE_UTF8:
        if (to != BSON_TYPE_DOUBLE) {
            if (!parse_long(v->value.v_utf8.str, &l))
                return dberr_set(err, 241, "Failed to parse number '%s' in $convert with no onError value: Did not consume whole string.",
                                 v->value.v_utf8.str);
            is_int = true;
        } else {
            char *end;
            const char *s = v->value.v_utf8.str;
            if (!*s || isspace((unsigned char)*s))
                return dberr_set(err, 241, "Failed to parse number '%s' in $convert with no onError value: Empty string",
                                 s);
            d = strtod(s, &end);
            if (*end)
                return dberr_set(err, 241, "Failed to parse number '%s' in $convert with no onError value: Did not consume whole string.",
                                 s);
        }
        break;
    default:
        return dberr_set(err, 241, "Unsupported conversion from %s to %s in $convert with no onError value",
                         shellfmt_type_name(v->value_type), shellfmt_type_name(to));
    }
    if (to == BSON_TYPE_DOUBLE) {
        val_double(out, is_int ? (double)l : d);
        return true;
    }
    if (!is_int) {
        if (isnan(d) || isinf(d))
            return dberr_set(err, 241, "Attempt to convert %s value to integer type in $convert with no onError value",
                             isnan(d) ? "NaN" : "infinity");
        d = trunc(d);
        double lim = to == BSON_TYPE_INT32 ? 2147483648.0 : 9223372036854775808.0;
        if (d >= lim || d < -lim) {
            format_double(num_double(v), buf, sizeof buf);
            return dberr_set(err, 241, "Conversion would overflow target type in $convert with no onError value: %s",
                             buf);
        }
        l = (int64_t)d;
    }
    if (to == BSON_TYPE_INT32) {
        if (l < INT32_MIN || l > INT32_MAX)
            return dberr_set(err, 241, "Conversion would overflow target type in $convert with no onError value: %lld",
                             (long long)l);
        val_int32(out, (int32_t)l);
    } else {
        val_int64(out, l);
    }
    return true;
}

static bool convert_op(const expr_t *e, const expr_ctx_t *ctx, bson_value_t *out, dberr_t *err,
                       bson_type_t to)
{
    bson_value_t v;
    if (!eval_arg(e, 0, ctx, &v, err))
        return false;
    bool ok = convert_to(&v, to, out, err);
    val_free(&v);
    return ok;
}

static bool op_toint(const expr_t *e, const expr_ctx_t *ctx, bson_value_t *out, dberr_t *err)
{
    return convert_op(e, ctx, out, err, BSON_TYPE_INT32);
}

static bool op_tolong(const expr_t *e, const expr_ctx_t *ctx, bson_value_t *out, dberr_t *err)
{
    return convert_op(e, ctx, out, err, BSON_TYPE_INT64);
}

static bool op_todouble(const expr_t *e, const expr_ctx_t *ctx, bson_value_t *out, dberr_t *err)
{
    return convert_op(e, ctx, out, err, BSON_TYPE_DOUBLE);
}

static bool op_tostring(const expr_t *e, const expr_ctx_t *ctx, bson_value_t *out, dberr_t *err)
{
    return convert_op(e, ctx, out, err, BSON_TYPE_UTF8);
}

static bool op_tobool(const expr_t *e, const expr_ctx_t *ctx, bson_value_t *out, dberr_t *err)
{
    return convert_op(e, ctx, out, err, BSON_TYPE_BOOL);
}

static bool op_mergeobjects(const expr_t *e, const expr_ctx_t *ctx, bson_value_t *out,
                            dberr_t *err)
{
    bson_t acc;
    bson_init(&acc);
    for (size_t i = 0; i < e->nargs; i++) {
        bson_value_t v;
        if (!eval(e->args[i], ctx, &v, err)) {
            bson_destroy(&acc);
            return false;
        }
        if (is_nullish(&v))
            continue;
        if (v.value_type != BSON_TYPE_DOCUMENT) {
            const char *tn = shellfmt_type_name(v.value_type);
            val_free(&v);
            bson_destroy(&acc);
            return dberr_set(err, 40400, "$mergeObjects requires object inputs, but input is of type %s",
                             tn);
        }
        bson_t b, merged;
        bson_iter_t it;
        bson_of(&v, &b);
        bson_init(&merged);
        /* keep acc's field order, replacing values, then append new fields */
        if (bson_iter_init(&it, &acc))
            while (bson_iter_next(&it)) {
                bson_iter_t f;
                if (bson_iter_init_find(&f, &b, bson_iter_key(&it)))
                    bson_append_value(&merged, bson_iter_key(&it), -1, bson_iter_value(&f));
                else
                    bson_append_value(&merged, bson_iter_key(&it), -1, bson_iter_value(&it));
            }
        if (bson_iter_init(&it, &b))
            while (bson_iter_next(&it))
                if (!bson_has_field(&acc, bson_iter_key(&it)))
                    bson_append_value(&merged, bson_iter_key(&it), -1, bson_iter_value(&it));
        bson_destroy(&acc);
        bson_steal(&acc, &merged);
        val_free(&v);
    }
    val_from_bson(out, &acc, BSON_TYPE_DOCUMENT);
    return true;
}

static bool op_objecttoarray(const expr_t *e, const expr_ctx_t *ctx, bson_value_t *out,
                             dberr_t *err)
{
    bson_value_t v;
    if (!eval_arg(e, 0, ctx, &v, err))
        return false;
    if (is_nullish(&v)) {
        val_free(&v);
        val_null(out);
        return true;
    }
    if (v.value_type != BSON_TYPE_DOCUMENT) {
        const char *tn = shellfmt_type_name(v.value_type);
        val_free(&v);
        return dberr_set(err, 40390, "$objectToArray requires a document input, found: %s", tn);
    }
    bson_t b, arr;
    bson_iter_t it;
    uint32_t idx = 0;
    bson_of(&v, &b);
    bson_init(&arr);
    if (bson_iter_init(&it, &b))
        while (bson_iter_next(&it)) {
            bson_t kv;
            char key[16];
            const char *k;
            bson_uint32_to_string(idx++, &k, key, sizeof key);
            bson_append_document_begin(&arr, k, -1, &kv);
            bson_append_utf8(&kv, "k", 1, bson_iter_key(&it), -1);
            bson_append_value(&kv, "v", 1, bson_iter_value(&it));
            bson_append_document_end(&arr, &kv);
        }
    val_free(&v);
    val_from_bson(out, &arr, BSON_TYPE_ARRAY);
    return true;
}

static bool op_arraytoobject(const expr_t *e, const expr_ctx_t *ctx, bson_value_t *out,
                             dberr_t *err)
{
    bson_value_t v;
    bool ok = true;
    if (!eval_arg(e, 0, ctx, &v, err))
        return false;
    if (is_nullish(&v)) {
        val_free(&v);
        val_null(out);
        return true;
    }
    if (v.value_type != BSON_TYPE_ARRAY) {
        const char *tn = shellfmt_type_name(v.value_type);
        val_free(&v);
        return dberr_set(err, 40386, "$arrayToObject requires an array input, found: %s", tn);
    }
    bson_t b, doc;
    bson_iter_t it;
    bson_of(&v, &b);
    bson_init(&doc);
    if (bson_iter_init(&it, &b))
        while (ok && bson_iter_next(&it)) {
            const char *key = NULL;
            bson_iter_t kv, f;
            const bson_value_t *val = NULL;
            bson_value_t valcopy;
            val_missing(&valcopy);
            if (BSON_ITER_HOLDS_DOCUMENT(&it) && bson_iter_recurse(&it, &kv)) {
                bson_iter_t kv2 = kv;
                if (bson_iter_find(&kv, "k") && BSON_ITER_HOLDS_UTF8(&kv) &&
                    bson_iter_find(&kv2, "v")) {
                    key = bson_iter_utf8(&kv, NULL);
                    bson_value_copy(bson_iter_value(&kv2), &valcopy);
                    val = &valcopy;
                }
            } else if (BSON_ITER_HOLDS_ARRAY(&it) && bson_iter_recurse(&it, &kv)) {
                f = kv;
                if (bson_iter_next(&kv) && BSON_ITER_HOLDS_UTF8(&kv)) {
                    f = kv;
                    if (bson_iter_next(&f)) {
                        key = bson_iter_utf8(&kv, NULL);
                        bson_value_copy(bson_iter_value(&f), &valcopy);
                        val = &valcopy;
                    }
                }
            }
            if (!key || !val) {
                ok = dberr_set(err, 40398,
                               "$arrayToObject requires an array of key-value pairs or of {k, v} documents");
            } else {
                if (bson_has_field(&doc, key)) {
                    bson_t tmp;
                    bson_init(&tmp);
                    bson_copy_to_excluding_noinit(&doc, &tmp, key, NULL);
                    bson_destroy(&doc);
                    bson_steal(&doc, &tmp);
                }
                bson_append_value(&doc, key, -1, val);
            }
            val_free(&valcopy);
        }
    val_free(&v);
    if (ok)
        val_from_bson(out, &doc, BSON_TYPE_DOCUMENT);
    else
        bson_destroy(&doc);
    return ok;
}

/* ------------------------------------------- $getField $setField $unsetField */

/* args[0] is `input` (NULL for $$CURRENT), args[1] `value` ($setField only);
 * cval holds the constant field name, taken literally (dots and dollars are
 * part of the name). */

static bool field_input(const expr_t *e, const expr_ctx_t *ctx, bson_value_t *out, dberr_t *err)
{
    if (e->args[0])
        return eval(e->args[0], ctx, out, err);
    val_missing(out);
    if (!ctx->root)
        return true;
    out->value_type = BSON_TYPE_DOCUMENT;
    out->value.v_doc.data_len = ctx->root->len;
    out->value.v_doc.data = bson_malloc(ctx->root->len);
    memcpy(out->value.v_doc.data, bson_get_data(ctx->root), ctx->root->len);
    return true;
}

/* $getField: null for a nullish input, missing for a non-document one. */
static bool op_getfield(const expr_t *e, const expr_ctx_t *ctx, bson_value_t *out, dberr_t *err)
{
    bson_value_t in;
    if (!field_input(e, ctx, &in, err))
        return false;
    if (is_nullish(&in)) {
        val_null(out);
    } else if (in.value_type == BSON_TYPE_DOCUMENT) {
        bson_t b;
        bson_iter_t it;
        bson_of(&in, &b);
        if (bson_iter_init_find(&it, &b, e->cval.value.v_utf8.str))
            bson_value_copy(bson_iter_value(&it), out);
    }
    val_free(&in);
    return true;
}

/* $setField / $unsetField: a copy of `input` with the field replaced in
 * place, appended, or removed when the value is missing ($$REMOVE). */
static bool op_setfield(const expr_t *e, const expr_ctx_t *ctx, bson_value_t *out, dberr_t *err)
{
    bson_value_t in, v;
    bool ok = true;
    val_missing(&v);
    if (!field_input(e, ctx, &in, err))
        return false;
    if (is_nullish(&in)) {
        val_null(out);
        goto cleanup;
    }
    if (in.value_type != BSON_TYPE_DOCUMENT) {
        ok = dberr_set(err, 4161105, "%s requires 'input' to evaluate to type Object",
                       e->op->name);
        goto cleanup;
    }
    if (e->nargs > 1 && e->args[1] && !eval(e->args[1], ctx, &v, err)) {
        ok = false;
        goto cleanup;
    }
    {
        const char *name = e->cval.value.v_utf8.str;
        bool placed = false;
        bson_t b, res;
        bson_iter_t it;
        bson_of(&in, &b);
        bson_init(&res);
        if (bson_iter_init(&it, &b))
            while (bson_iter_next(&it)) {
                if (strcmp(bson_iter_key(&it), name) != 0) {
                    bson_append_value(&res, bson_iter_key(&it), -1, bson_iter_value(&it));
                } else if (!placed && v.value_type != BSON_TYPE_EOD) {
                    bson_append_value(&res, name, -1, &v);
                    placed = true;
                }
            }
        if (!placed && v.value_type != BSON_TYPE_EOD)
            bson_append_value(&res, name, -1, &v);
        val_from_bson(out, &res, BSON_TYPE_DOCUMENT);
    }
cleanup:
    val_free(&in);
    val_free(&v);
    return ok;
}

static bool op_unsetfield(const expr_t *e, const expr_ctx_t *ctx, bson_value_t *out, dberr_t *err)
{
    return op_setfield(e, ctx, out, err);
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
    val_double(out, (double)(state >> 11) / 9007199254740992.0);
    return true;
}

/* ------------------------------------------------------------- op table */

static const op_def_t ops[] = {
    {"$abs", op_abs, OPP_ARGS, 1, 1, {0}},
    {"$add", op_add, OPP_ARGS, 0, -1, {0}},
    {"$and", op_and_or, OPP_ARGS, 0, -1, {0}},
    {"$arrayElemAt", op_arrayelemat, OPP_ARGS, 2, 2, {0}},
    {"$arrayToObject", op_arraytoobject, OPP_ARGS, 1, 1, {0}},
    {"$avg", op_sum_avg, OPP_ARGS, 0, -1, {0}},
    {"$ceil", op_ceil, OPP_ARGS, 1, 1, {0}},
    {"$cmp", compare_op, OPP_ARGS, 2, 2, {0}},
    {"$concat", op_concat, OPP_ARGS, 0, -1, {0}},
    {"$concatArrays", op_concatarrays, OPP_ARGS, 0, -1, {0}},
    {"$cond", op_cond, OPP_COND, 3, 3, {0}},
    {"$divide", op_divide, OPP_ARGS, 2, 2, {0}},
    {"$eq", compare_op, OPP_ARGS, 2, 2, {0}},
    {"$exp", op_exp, OPP_ARGS, 1, 1, {0}},
    {"$filter", op_filter, OPP_NAMED, 0, 0, {"!input", "as", "!cond", "limit", NULL}},
    {"$first", op_first_last, OPP_ARGS, 1, 1, {0}},
    {"$floor", op_floor, OPP_ARGS, 1, 1, {0}},
    {"$getField", op_getfield, OPP_FIELD, 0, 0, {0}},
    {"$gt", compare_op, OPP_ARGS, 2, 2, {0}},
    {"$gte", compare_op, OPP_ARGS, 2, 2, {0}},
    {"$ifNull", op_ifnull, OPP_ARGS, 2, -1, {0}},
    {"$in", op_in, OPP_ARGS, 2, 2, {0}},
    {"$indexOfArray", op_indexofarray, OPP_ARGS, 2, 4, {0}},
    {"$isArray", op_isarray, OPP_ARGS, 1, 1, {0}},
    {"$isNumber", op_isnumber, OPP_ARGS, 1, 1, {0}},
    {"$last", op_first_last, OPP_ARGS, 1, 1, {0}},
    {"$let", op_let, OPP_LET, 0, 0, {0}},
    {"$literal", op_literal, OPP_LITERAL, 0, 0, {0}},
    {"$ln", op_ln, OPP_ARGS, 1, 1, {0}},
    {"$log10", op_log10, OPP_ARGS, 1, 1, {0}},
    {"$lt", compare_op, OPP_ARGS, 2, 2, {0}},
    {"$lte", compare_op, OPP_ARGS, 2, 2, {0}},
    {"$map", op_map, OPP_NAMED, 0, 0, {"!input", "as", "!in", NULL}},
    {"$max", op_minmax, OPP_ARGS, 1, -1, {0}},
    {"$mergeObjects", op_mergeobjects, OPP_ARGS, 0, -1, {0}},
    {"$min", op_minmax, OPP_ARGS, 1, -1, {0}},
    {"$mod", op_mod, OPP_ARGS, 2, 2, {0}},
    {"$multiply", op_multiply, OPP_ARGS, 0, -1, {0}},
    {"$ne", compare_op, OPP_ARGS, 2, 2, {0}},
    {"$not", op_not, OPP_ARGS, 1, 1, {0}},
    {"$objectToArray", op_objecttoarray, OPP_ARGS, 1, 1, {0}},
    {"$or", op_and_or, OPP_ARGS, 0, -1, {0}},
    {"$pow", op_pow, OPP_ARGS, 2, 2, {0}},
    {"$rand", op_rand, OPP_NOARGS, 0, 0, {0}},
    {"$range", op_range, OPP_ARGS, 2, 3, {0}},
    {"$reduce", op_reduce, OPP_NAMED, 0, 0, {"!input", "!initialValue", "!in", NULL}},
    {"$reverseArray", op_reversearray, OPP_ARGS, 1, 1, {0}},
    {"$round", op_round, OPP_ARGS, 1, 2, {0}},
    {"$setField", op_setfield, OPP_FIELD, 0, 0, {0}},
    {"$size", op_size, OPP_ARGS, 1, 1, {0}},
    {"$slice", op_slice, OPP_ARGS, 2, 3, {0}},
    {"$split", op_split, OPP_ARGS, 2, 2, {0}},
    {"$sqrt", op_sqrt, OPP_ARGS, 1, 1, {0}},
    {"$strLenBytes", op_strlenbytes, OPP_ARGS, 1, 1, {0}},
    {"$strLenCP", op_strlencp, OPP_ARGS, 1, 1, {0}},
    {"$strcasecmp", op_strcasecmp, OPP_ARGS, 2, 2, {0}},
    {"$substr", op_substr, OPP_ARGS, 3, 3, {0}},
    {"$substrBytes", op_substr, OPP_ARGS, 3, 3, {0}},
    {"$subtract", op_subtract, OPP_ARGS, 2, 2, {0}},
    {"$sum", op_sum_avg, OPP_ARGS, 0, -1, {0}},
    {"$toBool", op_tobool, OPP_ARGS, 1, 1, {0}},
    {"$toDouble", op_todouble, OPP_ARGS, 1, 1, {0}},
    {"$toInt", op_toint, OPP_ARGS, 1, 1, {0}},
    {"$toLong", op_tolong, OPP_ARGS, 1, 1, {0}},
    {"$toLower", op_tolower, OPP_ARGS, 1, 1, {0}},
    {"$toString", op_tostring, OPP_ARGS, 1, 1, {0}},
    {"$toUpper", op_toupper, OPP_ARGS, 1, 1, {0}},
    {"$trunc", op_trunc, OPP_ARGS, 1, 2, {0}},
    {"$type", op_type, OPP_ARGS, 1, 1, {0}},
    {"$unsetField", op_unsetfield, OPP_FIELD, 0, 0, {0}},
};

static const op_def_t *find_op(const char *name)
{
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
        if (strcmp(ops[i].name, name) == 0)
            return &ops[i];
    return NULL;
}

/* ------------------------------------------------------------------ parse */

static expr_t *parse(bson_iter_t *it, dberr_t *err);

static expr_t *node_new(expr_kind_t kind)
{
    expr_t *e = bson_malloc0(sizeof *e);
    e->kind = kind;
    val_missing(&e->cval);
    return e;
}

void expr_destroy(expr_t *e)
{
    if (!e)
        return;
    val_free(&e->cval);
    bson_free(e->var);
    for (size_t i = 0; i < e->npath; i++)
        bson_free(e->path[i]);
    bson_free(e->path);
    for (size_t i = 0; i < e->nargs; i++) {
        expr_destroy(e->args[i]);
        if (e->names)
            bson_free(e->names[i]);
    }
    bson_free(e->args);
    bson_free(e->names);
    bson_free(e);
}

static void add_arg(expr_t *e, expr_t *arg, const char *name)
{
    e->args = bson_realloc(e->args, (e->nargs + 1) * sizeof *e->args);
    if (name || e->names) {
        e->names = bson_realloc(e->names, (e->nargs + 1) * sizeof *e->names);
        e->names[e->nargs] = name ? bson_strdup(name) : NULL;
    }
    e->args[e->nargs++] = arg;
}

/* True when `name` is a valid user variable name (starts with a lowercase
 * letter or a non-ASCII byte, then letters, digits, '_'). */
static bool valid_var_name(const char *name)
{
    if (!*name)
        return false;
    unsigned char c = (unsigned char)name[0];
    if (!(islower(c) || c >= 0x80))
        return false;
    for (const char *p = name; *p; p++) {
        c = (unsigned char)*p;
        if (!(isalnum(c) || c == '_' || c >= 0x80))
            return false;
    }
    return true;
}

/* "$a.b" / "$$var.a.b" → EK_PATH. */
static expr_t *parse_path(const char *s, dberr_t *err)
{
    expr_t *e = node_new(EK_PATH);
    const char *p = s + 1;
    if (*p == '$') {
        p++;
        const char *dot = strchr(p, '.');
        size_t n = dot ? (size_t)(dot - p) : strlen(p);
        e->var = bson_strndup(p, n);
        if (n == 0) {
            dberr_set(err, 16869, "empty variable name");
            goto fail;
        }
        if (strcmp(e->var, "CURRENT") == 0 || strcmp(e->var, "ROOT") == 0) {
            /* same as a plain field path */
        } else if (strcmp(e->var, "REMOVE") != 0 && strcmp(e->var, "NOW") != 0 &&
                   !valid_var_name(e->var)) {
            if (isupper((unsigned char)e->var[0]))
                dberr_set(err, 17276, "Use of undefined variable: %s", e->var);
            else
                dberr_set(err, 16870, "'%s' starts with an invalid character for a user variable name",
                          e->var);
            goto fail;
        }
        p += n;
        if (*p == '.')
            p++;
        else
            return e;
    } else if (*p == '\0') {
        dberr_set(err, 16872, "'$' by itself is not a valid FieldPath");
        goto fail;
    }
    for (;;) {
        const char *dot = strchr(p, '.');
        size_t n = dot ? (size_t)(dot - p) : strlen(p);
        if (n == 0) {
            dberr_set(err, 15998, "FieldPath field names may not be empty strings.");
            goto fail;
        }
        if (*p == '$') {
            dberr_set(err, 16410, "FieldPath field names may not start with '$'. Consider using $getField or $setField.");
            goto fail;
        }
        e->path = bson_realloc(e->path, (e->npath + 1) * sizeof *e->path);
        e->path[e->npath++] = bson_strndup(p, n);
        if (!dot)
            break;
        p = dot + 1;
    }
    return e;
fail:
    expr_destroy(e);
    return NULL;
}

/* Reads the `field` argument of $getField/$setField/$unsetField into
 * e->cval: a string constant, or {$literal: "..."} / {$const: "..."}. */
static bool parse_field_name(expr_t *e, const bson_iter_t *f, dberr_t *err)
{
    bool get = strcmp(e->op->name, "$getField") == 0;
    bson_iter_t self = *f, child; /* `v` points into one of them */
    const bson_value_t *v = bson_iter_value(&self);
    if (v->value_type == BSON_TYPE_DOCUMENT) {
        bson_iter_recurse(f, &child);
        const char *k = bson_iter_next(&child) ? bson_iter_key(&child) : "";
        bson_iter_t rest = child;
        if ((strcmp(k, "$literal") == 0 || strcmp(k, "$const") == 0) && !bson_iter_next(&rest)) {
            v = bson_iter_value(&child);
        } else {
            return dberr_set(err, get ? 5654601 : 4161106,
                             "%s requires 'field' to evaluate to a constant, but got a "
                             "non-constant argument",
                             e->op->name);
        }
    } else if (v->value_type == BSON_TYPE_ARRAY) {
        return dberr_set(err, get ? 5654601 : 4161106,
                         "%s requires 'field' to evaluate to a constant, but got a non-constant "
                         "argument",
                         e->op->name);
    } else if (v->value_type == BSON_TYPE_UTF8 && v->value.v_utf8.str[0] == '$') {
        return dberr_set(err, get ? 5654600 : 4161108,
                         "'%s' is a field path reference which is not allowed in this context. "
                         "Did you mean {$literal: '%s'}?",
                         v->value.v_utf8.str, v->value.v_utf8.str);
    }
    if (v->value_type != BSON_TYPE_UTF8)
        return dberr_set(err, get ? 5654602 : 4161107,
                         "%s requires 'field' to evaluate to type String, but got %s",
                         e->op->name, shellfmt_type_name(v->value_type));
    if (strlen(v->value.v_utf8.str) != v->value.v_utf8.len)
        return dberr_set(err, get ? 5654602 : 4161107,
                         "%s requires 'field' to be a string without null bytes", e->op->name);
    val_free(&e->cval);
    bson_value_copy(v, &e->cval);
    return true;
}

/* {$getField: {field, input}} (or the shorthand {$getField: "name"}),
 * {$setField: {field, input, value}}, {$unsetField: {field, input}}. */
static bool parse_field_op(expr_t *e, bson_iter_t *arg, dberr_t *err)
{
    const char *name = e->op->name;
    bool get = strcmp(name, "$getField") == 0, set = strcmp(name, "$setField") == 0;
    bson_iter_t field, input, value;
    bool have_field = false, have_input = false, have_value = false;
    bool shorthand = !BSON_ITER_HOLDS_DOCUMENT(arg);
    if (!shorthand) {
        bson_iter_t probe;
        bson_iter_recurse(arg, &probe);
        shorthand = bson_iter_next(&probe) && bson_iter_key(&probe)[0] == '$';
    }
    e->args = bson_malloc0(2 * sizeof *e->args);
    e->nargs = 2;
    if (shorthand) {
        if (!get)
            return dberr_set(err, 4161100, "%s only supports an object as its argument", name);
        field = *arg;
        have_field = true;
    } else {
        bson_iter_t child;
        bson_iter_recurse(arg, &child);
        while (bson_iter_next(&child)) {
            const char *k = bson_iter_key(&child);
            if (strcmp(k, "field") == 0) {
                field = child;
                have_field = true;
            } else if (strcmp(k, "input") == 0) {
                input = child;
                have_input = true;
            } else if (set && strcmp(k, "value") == 0) {
                value = child;
                have_value = true;
            } else {
                return dberr_set(err, get ? 3041701 : 4161101, "%s found an unknown argument: %s",
                                 name, k);
            }
        }
        if (!have_field)
            return dberr_set(err, get ? 3041702 : 4161102, "%s requires 'field' to be specified",
                             name);
        if (set && !have_value)
            return dberr_set(err, 4161103, "$setField requires 'value' to be specified");
        if (!have_input && !get)
            return dberr_set(err, 4161109, "%s requires 'input' to be specified", name);
    }
    if (!parse_field_name(e, &field, err))
        return false;
    if (have_input && !(e->args[0] = parse(&input, err)))
        return false;
    if (have_value && !(e->args[1] = parse(&value, err)))
        return false;
    return true;
}

/* Parses an operator's argument per its definition. */
static expr_t *parse_op(const op_def_t *op, bson_iter_t *arg, dberr_t *err)
{
    expr_t *e = node_new(EK_OP);
    e->op = op;
    switch (op->parse) {
    case OPP_LITERAL: bson_value_copy(bson_iter_value(arg), &e->cval); return e;
    case OPP_ARGS:
        if (BSON_ITER_HOLDS_ARRAY(arg)) {
            bson_iter_t child;
            bson_iter_recurse(arg, &child);
            while (bson_iter_next(&child)) {
                expr_t *a = parse(&child, err);
                if (!a)
                    goto fail;
                add_arg(e, a, NULL);
            }
        } else {
            expr_t *a = parse(arg, err);
            if (!a)
                goto fail;
            add_arg(e, a, NULL);
        }
        if (op->min_args == op->max_args && (int)e->nargs != op->min_args) {
            dberr_set(err, 16020, "Expression %s takes exactly %d arguments. %zu were passed in.",
                      op->name, op->min_args, e->nargs);
            goto fail;
        }
        if ((int)e->nargs < op->min_args || (op->max_args >= 0 && (int)e->nargs > op->max_args)) {
            if (op->max_args < 0)
                dberr_set(err, 16020, "Expression %s takes at least %d arguments, and %zu were passed in.",
                          op->name, op->min_args, e->nargs);
            else
                dberr_set(err, 16020, "Expression %s takes at least %d arguments, and at most %d, but %zu were passed in.",
                          op->name, op->min_args, op->max_args, e->nargs);
            goto fail;
        }
        return e;
    case OPP_COND:
        if (BSON_ITER_HOLDS_DOCUMENT(arg)) {
            expr_t *parts[3] = {NULL, NULL, NULL};
            bson_iter_t child;
            bson_iter_recurse(arg, &child);
            while (bson_iter_next(&child)) {
                const char *k = bson_iter_key(&child);
                int slot = strcmp(k, "if") == 0 ? 0 : strcmp(k, "then") == 0 ? 1 : strcmp(k, "else") == 0 ? 2 : -1;
                if (slot < 0) {
                    dberr_set(err, 17083, "Unrecognized parameter to $cond: %s", k);
                    goto cond_fail;
                }
                expr_t *a = parse(&child, err);
                if (!a)
                    goto cond_fail;
                expr_destroy(parts[slot]);
                parts[slot] = a;
            }
            if (!parts[0]) {
                dberr_set(err, 17080, "Missing 'if' parameter to $cond");
                goto cond_fail;
            }
            if (!parts[1]) {
                dberr_set(err, 17081, "Missing 'then' parameter to $cond");
                goto cond_fail;
            }
            if (!parts[2]) {
                dberr_set(err, 17082, "Missing 'else' parameter to $cond");
                goto cond_fail;
            }
            for (int i = 0; i < 3; i++)
                add_arg(e, parts[i], NULL);
            return e;
        cond_fail:
            for (int i = 0; i < 3; i++)
                expr_destroy(parts[i]);
            goto fail;
        } else {
            static const op_def_t cond_args = {"$cond", op_cond, OPP_ARGS, 3, 3, {0}};
            expr_t *inner = parse_op(&cond_args, arg, err);
            if (!inner)
                goto fail;
            inner->op = op;
            expr_destroy(e);
            return inner;
        }
    case OPP_LET: {
        bson_iter_t child, vars;
        bool have_vars = false, have_in = false;
        expr_t *body = NULL;
        if (!BSON_ITER_HOLDS_DOCUMENT(arg)) {
            dberr_set(err, 16874, "$let only supports an object as its argument");
            goto fail;
        }
        bson_iter_recurse(arg, &child);
        while (bson_iter_next(&child)) {
            const char *k = bson_iter_key(&child);
            if (strcmp(k, "vars") == 0) {
                if (!BSON_ITER_HOLDS_DOCUMENT(&child)) {
                    dberr_set(err, 10065, "invalid parameter: expected an object (vars)");
                    goto let_fail;
                }
                have_vars = true;
                vars = child;
            } else if (strcmp(k, "in") == 0) {
                have_in = true;
                expr_destroy(body);
                body = parse(&child, err);
                if (!body)
                    goto let_fail;
            } else {
                dberr_set(err, 16875, "Unrecognized parameter to $let: %s", k);
                goto let_fail;
            }
        }
        if (!have_vars) {
            dberr_set(err, 16876, "Missing 'vars' parameter to $let");
            goto let_fail;
        }
        if (!have_in) {
            dberr_set(err, 16877, "Missing 'in' parameter to $let");
            goto let_fail;
        }
        bson_iter_recurse(&vars, &child);
        while (bson_iter_next(&child)) {
            const char *name = bson_iter_key(&child);
            if (!valid_var_name(name)) {
                dberr_set(err, 16867, "'%s' starts with an invalid character for a user variable name",
                          name);
                goto let_fail;
            }
            expr_t *a = parse(&child, err);
            if (!a)
                goto let_fail;
            add_arg(e, a, name);
        }
        add_arg(e, body, "");
        return e;
    let_fail:
        expr_destroy(body);
        goto fail;
    }
    case OPP_NAMED: {
        size_t np = 0;
        while (np < 5 && op->params[np])
            np++;
        e->args = bson_malloc0(np * sizeof *e->args);
        e->nargs = np;
        if (!BSON_ITER_HOLDS_DOCUMENT(arg)) {
            dberr_set(err, 28646, "%s only supports an object as its argument", op->name);
            goto fail;
        }
        bson_iter_t child;
        bson_iter_recurse(arg, &child);
        while (bson_iter_next(&child)) {
            const char *k = bson_iter_key(&child);
            size_t i;
            for (i = 0; i < np; i++) {
                const char *pn = op->params[i][0] == '!' ? op->params[i] + 1 : op->params[i];
                if (strcmp(pn, k) == 0)
                    break;
            }
            if (i == np) {
                dberr_set(err, 16879, "Unrecognized parameter to %s: %s", op->name, k);
                goto fail;
            }
            expr_destroy(e->args[i]);
            e->args[i] = parse(&child, err);
            if (!e->args[i])
                goto fail;
        }
        for (size_t i = 0; i < np; i++)
            if (op->params[i][0] == '!' && !e->args[i]) {
                dberr_set(err, 16880, "Missing '%s' parameter to %s", op->params[i] + 1, op->name);
                goto fail;
            }
        return e;
    }
    case OPP_FIELD:
        if (!parse_field_op(e, arg, err))
            goto fail;
        return e;
    case OPP_NOARGS: {
        bson_iter_t child;
        if ((!BSON_ITER_HOLDS_DOCUMENT(arg) && !BSON_ITER_HOLDS_ARRAY(arg)) ||
            (bson_iter_recurse(arg, &child) && bson_iter_next(&child))) {
            dberr_set(err, 10065, "%s does not take any arguments", op->name);
            goto fail;
        }
        return e;
    }
    }
fail:
    expr_destroy(e);
    return NULL;
}

/* A document: an operator {$op: args} or a document of expressions. */
static expr_t *parse_document(bson_iter_t *it, dberr_t *err)
{
    bson_iter_t child;
    bson_iter_recurse(it, &child);
    uint32_t n = 0;
    bool first_dollar = false;
    {
        bson_iter_t c2 = child;
        while (bson_iter_next(&c2)) {
            if (n == 0)
                first_dollar = bson_iter_key(&c2)[0] == '$';
            n++;
        }
    }
    if (first_dollar) {
        bson_iter_next(&child);
        const char *name = bson_iter_key(&child);
        if (n != 1) {
            dberr_set(err, 15983, "an expression specification must contain exactly one field, the name of the expression. Found %u fields",
                      n);
            return NULL;
        }
        const op_def_t *op = find_op(name);
        if (!op) {
            dberr_set(err, DBERR_INVALID_PIPELINE_OPERATOR, "Unrecognized expression '%s'", name);
            return NULL;
        }
        return parse_op(op, &child, err);
    }
    expr_t *e = node_new(EK_DOC);
    e->names = bson_malloc0(sizeof *e->names);
    while (bson_iter_next(&child)) {
        const char *k = bson_iter_key(&child);
        if (k[0] == '$') {
            dberr_set(err, 16410, "FieldPath field names may not start with '$'. Consider using $getField or $setField.");
            goto fail;
        }
        if (k[0] == '\0') {
            dberr_set(err, 15998, "FieldPath field names may not be empty strings.");
            goto fail;
        }
        if (strchr(k, '.')) {
            dberr_set(err, 16412, "FieldPath field names may not contain '.'. Consider using $getField or $setField.");
            goto fail;
        }
        expr_t *a = parse(&child, err);
        if (!a)
            goto fail;
        add_arg(e, a, k);
    }
    return e;
fail:
    expr_destroy(e);
    return NULL;
}

static expr_t *parse(bson_iter_t *it, dberr_t *err)
{
    switch (bson_iter_type(it)) {
    case BSON_TYPE_UTF8: {
        const char *s = bson_iter_utf8(it, NULL);
        if (s[0] == '$')
            return parse_path(s, err);
        break;
    }
    case BSON_TYPE_DOCUMENT: return parse_document(it, err);
    case BSON_TYPE_ARRAY: {
        bson_iter_t child;
        expr_t *e = node_new(EK_ARRAY);
        bson_iter_recurse(it, &child);
        while (bson_iter_next(&child)) {
            expr_t *a = parse(&child, err);
            if (!a) {
                expr_destroy(e);
                return NULL;
            }
            add_arg(e, a, NULL);
        }
        return e;
    }
    default: break;
    }
    expr_t *e = node_new(EK_CONST);
    bson_value_copy(bson_iter_value(it), &e->cval);
    return e;
}

expr_t *expr_new(const bson_iter_t *spec, dberr_t *err)
{
    bson_iter_t it = *spec;
    dberr_clear(err);
    return parse(&it, err);
}

/* ------------------------------------------------------------ variables */

/* A chain of names bound by enclosing $let/$map/$filter/$reduce. */
typedef struct var_scope {
    const char *name;
    const struct var_scope *up;
} var_scope_t;

static bool scope_has(const var_scope_t *s, const char *name)
{
    for (; s; s = s->up)
        if (strcmp(s->name, name) == 0)
            return true;
    return false;
}

static bool check_vars(const expr_t *e, const var_scope_t *scope, const bson_t *vars,
                       dberr_t *err)
{
    if (!e)
        return true;
    switch (e->kind) {
    case EK_CONST: return true;
    case EK_PATH:
        if (!e->var || strcmp(e->var, "ROOT") == 0 || strcmp(e->var, "CURRENT") == 0 ||
            strcmp(e->var, "REMOVE") == 0 || strcmp(e->var, "NOW") == 0 ||
            scope_has(scope, e->var) || (vars && bson_has_field(vars, e->var)))
            return true;
        return dberr_set(err, 17276, "Use of undefined variable: %s", e->var);
    case EK_DOC:
    case EK_ARRAY: break;
    case EK_OP:
        if (e->op->fn == op_let) {
            /* vars are read in the outer scope, the body sees them all */
            size_t nvars = e->nargs - 1;
            var_scope_t *chain = bson_malloc((nvars ? nvars : 1) * sizeof *chain);
            const var_scope_t *inner = scope;
            bool ok = true;
            for (size_t i = 0; i < nvars && ok; i++) {
                ok = check_vars(e->args[i], scope, vars, err);
                chain[i].name = e->names[i];
                chain[i].up = inner;
                inner = &chain[i];
            }
            ok = ok && check_vars(e->args[nvars], inner, vars, err);
            bson_free(chain);
            return ok;
        }
        if (e->op->fn == op_map || e->op->fn == op_filter) {
            /* args: input, as, in/cond, limit */
            var_scope_t as = {"this", scope};
            const expr_t *asx = e->args[1];
            if (asx && asx->kind == EK_CONST && asx->cval.value_type == BSON_TYPE_UTF8)
                as.name = asx->cval.value.v_utf8.str;
            for (size_t i = 0; i < e->nargs; i++)
                if (!check_vars(e->args[i], i == 2 ? &as : scope, vars, err))
                    return false;
            return true;
        }
        if (e->op->fn == op_reduce) {
            var_scope_t this_s = {"this", scope}, value_s = {"value", &this_s};
            for (size_t i = 0; i < e->nargs; i++)
                if (!check_vars(e->args[i], i == 2 ? &value_s : scope, vars, err))
                    return false;
            return true;
        }
        break;
    }
    for (size_t i = 0; i < e->nargs; i++)
        if (!check_vars(e->args[i], scope, vars, err))
            return false;
    return true;
}

bool expr_check_vars(const expr_t *e, const bson_t *vars, dberr_t *err)
{
    return check_vars(e, NULL, vars, err);
}

bool expr_eval_let(const bson_t *let, int64_t now_ms, bson_t *out, dberr_t *err)
{
    bson_iter_t it;
    bson_t empty = BSON_INITIALIZER;
    if (!let)
        return true;
    if (!bson_iter_init(&it, let))
        return dberr_set(err, DBERR_BAD_VALUE, "invalid let document");
    while (bson_iter_next(&it)) {
        const char *name = bson_iter_key(&it);
        if (!valid_var_name(name))
            return dberr_set(err, 16867,
                             "'%s' starts with an invalid character for a user variable name",
                             name);
        expr_t *e = parse(&it, err);
        if (!e)
            return false;
        expr_ctx_t ctx = {.root = &empty, .now_ms = now_ms, .vars = out};
        bson_value_t v;
        bool ok = check_vars(e, NULL, out, err) && expr_eval(e, &ctx, &v, err);
        expr_destroy(e);
        if (!ok)
            return false;
        if (bson_has_field(out, name)) {
            bson_t tmp;
            bson_init(&tmp);
            bson_copy_to_excluding_noinit(out, &tmp, name, NULL);
            bson_reinit(out);
            bson_concat(out, &tmp);
            bson_destroy(&tmp);
        }
        if (v.value_type == BSON_TYPE_EOD)
            bson_append_undefined(out, name, -1);
        else
            bson_append_value(out, name, -1, &v);
        val_free(&v);
    }
    return true;
}
