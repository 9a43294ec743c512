/* expr: aggregation expressions. A spec is parsed once into a tree of nodes
 * (constants, field paths, variables, operators, documents and arrays of
 * expressions) and evaluated per document into owned bson_value_t results.
 * This file holds the nodes, evaluation, parsing and the registry of the
 * operator families (arith.c, cond.c, string.c, array.c, type.c, object.c,
 * var.c, date.c, datefmt.c: one table row and one function per operator). */
#include "doc/expr/expr-private.h"

#include <ctype.h>
#include <math.h>
#include <string.h>

#include "doc/compare.h"
#include "doc/path.h"
#include "util/shellfmt.h"
#include "util/table.h"

/* ------------------------------------------------------------------ values */

void expr_val_null(bson_value_t *out)
{
    memset(out, 0, sizeof *out);
    out->value_type = BSON_TYPE_NULL;
}

void expr_val_missing(bson_value_t *out)
{
    memset(out, 0, sizeof *out);
    out->value_type = BSON_TYPE_EOD;
}

void expr_val_string(bson_value_t *out, const char *s, size_t len)
{
    memset(out, 0, sizeof *out);
    out->value_type = BSON_TYPE_UTF8;
    out->value.v_utf8.str = bson_malloc(len + 1);
    memcpy(out->value.v_utf8.str, s, len);
    out->value.v_utf8.str[len] = '\0';
    out->value.v_utf8.len = (uint32_t)len;
}

/* Moves the bytes of `b` into `out` as a document or array value; destroys `b`. */
void expr_value_take_bson(bson_value_t *out, bson_t *b, bson_type_t type)
{
    memset(out, 0, sizeof *out);
    out->value_type = type;
    out->value.v_doc.data_len = b->len;
    out->value.v_doc.data = bson_malloc(b->len);
    memcpy(out->value.v_doc.data, bson_get_data(b), b->len);
    bson_destroy(b);
}

void expr_val_free(bson_value_t *v)
{
    if (v->value_type != BSON_TYPE_EOD)
        bson_value_destroy(v);
    expr_val_missing(v);
}

bool expr_is_nullish(const bson_value_t *v)
{
    return v->value_type == BSON_TYPE_NULL || v->value_type == BSON_TYPE_EOD ||
           v->value_type == BSON_TYPE_UNDEFINED;
}

/* Initialises `b` over the bytes of a document or array value (borrowed). */
void expr_bson_of(const bson_value_t *v, bson_t *b)
{
    if (!bson_init_static(b, v->value.v_doc.data, v->value.v_doc.data_len))
        bson_init(b);
}

/* Aggregation comparison: like compare_values, except that missing and
 * undefined sort below null (so {$eq: ["$nope", null]} is false). */
int expr_agg_compare(const bson_value_t *a, const bson_value_t *b)
{
    return expr_agg_compare_coll(a, b, NULL);
}

int expr_agg_compare_coll(const bson_value_t *a, const bson_value_t *b, const collation_t *coll)
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
    return compare_values_coll(a, b, coll);
}

bool expr_truthy(const bson_value_t *v)
{
    switch (v->value_type) {
    case BSON_TYPE_EOD:
    case BSON_TYPE_NULL:
    case BSON_TYPE_UNDEFINED:
        return false;
    case BSON_TYPE_BOOL:
        return v->value.v_bool;
    case BSON_TYPE_INT32:
        return v->value.v_int32 != 0;
    case BSON_TYPE_INT64:
        return v->value.v_int64 != 0;
    case BSON_TYPE_DOUBLE:
        return v->value.v_double != 0.0;
    case BSON_TYPE_DECIMAL128:
        return compare_to_double(v) != 0.0;
    default:
        return true;
    }
}

/* ------------------------------------------------------------- evaluation */

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
        expr_bson_of(cur, &b);
        if (!bson_iter_init_find(&it, &b, path[0])) {
            expr_val_missing(out);
            return;
        }
        walk_path(bson_iter_value(&it), path + 1, n - 1, out);
        return;
    }
    if (cur->value_type == BSON_TYPE_ARRAY) {
        bson_t b, arr;
        bson_iter_t it;
        uint32_t idx = 0;
        expr_bson_of(cur, &b);
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
            expr_val_free(&sub);
        }
        expr_value_take_bson(out, &arr, BSON_TYPE_ARRAY);
        return;
    }
    expr_val_missing(out);
}

static bool eval_path(const expr_t *e, const expr_ctx_t *ctx, bson_value_t *out, dberr_t *err)
{
    bson_value_t base;
    bson_iter_t it;
    if (!e->var || strcmp(e->var, "ROOT") == 0 || strcmp(e->var, "CURRENT") == 0) {
        /* $redact moves $$CURRENT into subdocuments; $$ROOT stays the document */
        const bson_t *doc = e->var && strcmp(e->var, "ROOT") == 0 ? ctx->root
                            : ctx->current                       ? ctx->current
                                                                 : ctx->root;
        if (!doc) {
            expr_val_missing(out);
            return true;
        }
        memset(&base, 0, sizeof base);
        base.value_type = BSON_TYPE_DOCUMENT;
        base.value.v_doc.data = (uint8_t *)bson_get_data(doc);
        base.value.v_doc.data_len = doc->len;
        walk_path(&base, e->path, e->npath, out);
        return true;
    }
    if (strcmp(e->var, "REMOVE") == 0) {
        expr_val_missing(out);
        return true;
    }
    if (strcmp(e->var, "NOW") == 0) {
        expr_val_date(&base, ctx->now_ms);
        walk_path(&base, e->path, e->npath, out);
        return true;
    }
    if (ctx->vars && bson_iter_init_find(&it, ctx->vars, e->var)) {
        walk_path(bson_iter_value(&it), e->path, e->npath, out);
        return true;
    }
    return dberr_set(err, 17276, "Use of undefined variable: %s", e->var);
}

bool expr_fold_args(const expr_t *e, const expr_ctx_t *ctx, expr_fold_fn fn, void *st, bson_t *acc,
                    dberr_t *err)
{
    bson_init(acc);
    for (size_t i = 0; i < e->nargs; i++) {
        bson_value_t v;
        expr_val_missing(&v); /* a failed evaluation may leave it untouched */
        bool ok = expr_eval_node(e->args[i], ctx, &v, err);
        ok = ok && fn(e, i, &v, acc, st, err);
        expr_val_free(&v);
        if (!ok) {
            bson_destroy(acc);
            return false;
        }
    }
    return true;
}

/* A document of expressions: each field that is not missing. */
static bool doc_field(const expr_t *e, size_t i, const bson_value_t *v, bson_t *acc, void *st,
                      dberr_t *err)
{
    if (v->value_type != BSON_TYPE_EOD)
        bson_append_value(acc, e->names[i], -1, v);
    return true;
}

bool expr_fold_into(const expr_t *e, const expr_ctx_t *ctx, expr_fold_fn fn, bson_type_t type,
                    bson_value_t *out, dberr_t *err)
{
    bson_t acc;
    if (!expr_fold_args(e, ctx, fn, NULL, &acc, err))
        return false;
    expr_value_take_bson(out, &acc, type);
    return true;
}

static bool eval_doc(const expr_t *e, const expr_ctx_t *ctx, bson_value_t *out, dberr_t *err)
{
    return expr_fold_into(e, ctx, doc_field, BSON_TYPE_DOCUMENT, out, err);
}

static bool eval_array(const expr_t *e, const expr_ctx_t *ctx, bson_value_t *out, dberr_t *err)
{
    bson_t b;
    bson_init(&b);
    for (size_t i = 0; i < e->nargs; i++) {
        bson_value_t v;
        char key[16];
        const char *k;
        if (!expr_eval_node(e->args[i], ctx, &v, err)) {
            bson_destroy(&b);
            return false;
        }
        bson_uint32_to_string((uint32_t)i, &k, key, sizeof key);
        if (v.value_type == BSON_TYPE_EOD)
            bson_append_null(&b, k, -1);
        else
            bson_append_value(&b, k, -1, &v);
        expr_val_free(&v);
    }
    expr_value_take_bson(out, &b, BSON_TYPE_ARRAY);
    return true;
}

/* The argument `v` of an operator row with an `input` type: 0 when `out`
 * is already the null a nullish `v` answers, -1 with the row's code and
 * message for another type than the row's, 1 to go on. */
static int eager_input(const expr_op_t *op, const bson_value_t *v, bson_value_t *out,
                       dberr_t *err)
{
    if (!op->input.type)
        return 1;
    if (expr_is_nullish(v)) {
        expr_val_null(out);
        return 0;
    }
    return expr_check_type(v, op->input.type, op->input.code, op->input.fmt, err) ? 1 : -1;
}

/* An eager operator: its arguments evaluated, then the operator. */
static bool eval_eager(const expr_t *e, const expr_ctx_t *ctx, bson_value_t *out, dberr_t *err)
{
    bson_value_t args[EXPR_EAGER_MAX];
    if (e->nargs > EXPR_EAGER_MAX)
        return dberr_set(err, DBERR_INTERNAL_ERROR, "%s: too many arguments", e->op->name);
    if (!expr_eval_args(e, ctx, args, err))
        return false;
    int go = eager_input(e->op, args, out, err);
    bool ok = go > 0 ? e->op->eager(e, args, out, err) : go == 0;
    expr_free_args(args, e->nargs);
    return ok;
}

/* The bytes a string, array, document or binary value holds (0 for the rest). */
static uint32_t expr_value_bytes(const bson_value_t *v)
{
    switch (v->value_type) {
    case BSON_TYPE_UTF8:
        return v->value.v_utf8.len;
    case BSON_TYPE_DOCUMENT:
    case BSON_TYPE_ARRAY:
        return v->value.v_doc.data_len;
    case BSON_TYPE_BINARY:
        return v->value.v_binary.data_len;
    default:
        return 0;
    }
}

/* Fails, freeing `out`, when the value `what` built is over
 * EXPR_MAX_VALUE_BYTES. */
static bool expr_within_limit(const char *what, bson_value_t *out, dberr_t *err)
{
    uint32_t n = expr_value_bytes(out);
    if (n <= EXPR_MAX_VALUE_BYTES)
        return true;
    expr_val_free(out);
    expr_val_missing(out);
    return dberr_set(err, DBERR_BSON_OBJECT_TOO_LARGE,
                     "%s would build a value of %u bytes, over the %d bytes (16 MB) a value may "
                     "hold",
                     what, n, EXPR_MAX_VALUE_BYTES);
}

bool expr_eval_node(const expr_t *e, const expr_ctx_t *ctx, bson_value_t *out, dberr_t *err)
{
    switch (e->kind) {
    case EK_CONST:
        if (e->cval.value_type == BSON_TYPE_EOD)
            expr_val_missing(out);
        else
            bson_value_copy(&e->cval, out);
        return true;
    case EK_PATH:
        return eval_path(e, ctx, out, err);
    case EK_OP:
        if (!(e->op->eager ? eval_eager(e, ctx, out, err) : e->op->fn(e, ctx, out, err)))
            return false;
        return expr_within_limit(e->op->name, out, err);
    case EK_DOC:
        return eval_doc(e, ctx, out, err) && expr_within_limit("an object expression", out, err);
    case EK_ARRAY:
        return eval_array(e, ctx, out, err) && expr_within_limit("an array expression", out, err);
    }
    return dberr_set(err, DBERR_INTERNAL_ERROR, "bad expression node");
}

bool expr_eval(const expr_t *e, const expr_ctx_t *ctx, bson_value_t *out, dberr_t *err)
{
    expr_val_missing(out);
    if (!e)
        return true;
    return expr_eval_node(e, ctx, out, err);
}

/* Evaluates every argument of `e` into `vals` (e->nargs owned values). On
 * failure nothing is left to free. */
bool expr_eval_args(const expr_t *e, const expr_ctx_t *ctx, bson_value_t *vals, dberr_t *err)
{
    for (size_t i = 0; i < e->nargs; i++) {
        if (!e->args[i]) {
            expr_val_missing(&vals[i]);
            continue;
        }
        if (!expr_eval_node(e->args[i], ctx, &vals[i], err)) {
            for (size_t j = 0; j < i; j++)
                expr_val_free(&vals[j]);
            return false;
        }
    }
    return true;
}

void expr_free_args(bson_value_t *vals, size_t n)
{
    for (size_t i = 0; i < n; i++)
        expr_val_free(&vals[i]);
}

/* Evaluates argument `i` (missing when absent). */
bool expr_eval_arg(const expr_t *e, size_t i, const expr_ctx_t *ctx, bson_value_t *out,
                   dberr_t *err)
{
    expr_val_missing(out);
    if (i >= e->nargs || !e->args[i])
        return true;
    return expr_eval_node(e->args[i], ctx, out, err);
}

bool expr_eval_on_null(const expr_t *e, size_t i, const expr_ctx_t *ctx, bson_value_t *out,
                       dberr_t *err)
{
    if (i < e->nargs && e->args[i])
        return expr_eval_arg(e, i, ctx, out, err);
    expr_val_null(out);
    return true;
}

bool expr_eval_on_error(const expr_t *e, size_t i, const expr_ctx_t *ctx, bson_value_t *out,
                        dberr_t *err)
{
    if (err->code != DBERR_CONVERSION_FAILURE || i >= e->nargs || !e->args[i])
        return false;
    dberr_clear(err);
    return expr_eval_arg(e, i, ctx, out, err);
}

/* ----------------------------------------------------- $min $max $sum $avg */

/* Collects the operands of $min/$max/$sum/$avg: the elements of a single
 * array argument, or the arguments themselves. Calls fn for each. */
bool expr_for_operands(const expr_t *e, const expr_ctx_t *ctx, operand_fn fn, void *st,
                       dberr_t *err)
{
    for (size_t i = 0; i < e->nargs; i++) {
        bson_value_t v;
        if (!expr_eval_node(e->args[i], ctx, &v, err))
            return false;
        if (e->nargs == 1 && v.value_type == BSON_TYPE_ARRAY) {
            bson_t b;
            bson_iter_t it;
            expr_bson_of(&v, &b);
            if (bson_iter_init(&it, &b))
                while (bson_iter_next(&it))
                    fn(bson_iter_value(&it), st);
        } else {
            fn(&v, st);
        }
        expr_val_free(&v);
    }
    return true;
}

/* ------------------------------------------------------------- op table */

/* The operators of mongod 7 that atomdb does not implement: each refused
 * when parsed with NotImplemented naming it, never taken for a document. */
static bool parse_refused(expr_t *e, bson_iter_t *arg, dberr_t *err)
{
    return dberr_set(err, DBERR_NOT_IMPLEMENTED, "%s is not implemented by atomdb (%s)",
                     e->op->name,
                     !strcmp(e->op->name, "$meta")               ? "no text or search scores"
                     : !strcmp(e->op->name, "$toHashedIndexKey") ? "no hashed indexes"
                                                                 : "no server-side JavaScript");
}

static const expr_op_t expr_refused_ops[] = {
    {"$accumulator", .parse = OPP_CUSTOM, .parse_fn = parse_refused},
    {"$function", .parse = OPP_CUSTOM, .parse_fn = parse_refused},
    {"$meta", .parse = OPP_CUSTOM, .parse_fn = parse_refused},
    {"$toHashedIndexKey", .parse = OPP_CUSTOM, .parse_fn = parse_refused},
    {NULL},
};

/* Every operator family; an operator is one row in its family's table. */
static const expr_op_t *const expr_op_families[] = {
    expr_arith_ops, expr_cond_ops,   expr_string_ops, expr_array_ops,
    expr_type_ops,  expr_object_ops, expr_var_ops,    expr_date_ops,
    expr_datefmt_ops, expr_set_ops,    expr_trig_ops,   expr_regex_ops,
    expr_nelem_ops,   expr_refused_ops,
};

static const expr_op_t *find_op(const char *name)
{
    return table_find((const void *const *)expr_op_families,
                      sizeof expr_op_families / sizeof expr_op_families[0], sizeof(expr_op_t),
                      name);
}

/* ------------------------------------------------------------------ parse */

expr_t *expr_node_new(expr_kind_t kind)
{
    expr_t *e = bson_malloc0(sizeof *e);
    e->kind = kind;
    expr_val_missing(&e->cval);
    return e;
}

void expr_destroy(expr_t *e)
{
    if (!e)
        return;
    expr_val_free(&e->cval);
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

void expr_add_arg(expr_t *e, expr_t *arg, const char *name)
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
bool expr_valid_var_name(const char *name)
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

/* The variables only $redact defines. */
static bool expr_redact_var(const char *name)
{
    return !strcmp(name, "DESCEND") || !strcmp(name, "PRUNE") || !strcmp(name, "KEEP");
}

/* "$a.b" / "$$var.a.b" → EK_PATH. */
static expr_t *parse_path(const char *s, dberr_t *err)
{
    expr_t *e = expr_node_new(EK_PATH);
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
                   !expr_redact_var(e->var) && !expr_valid_var_name(e->var)) {
            /* $$DESCEND/$$PRUNE/$$KEEP parse anywhere but are defined only
             * inside $redact (its stage binds them): elsewhere they fail the
             * variable check, or evaluation, with 17276 as in mongod */
            if (isupper((unsigned char)e->var[0]))
                dberr_set(err, 17276, "Use of undefined variable: %s", e->var);
            else
                dberr_set(err, 16870,
                          "'%s' starts with an invalid character for a user variable name", e->var);
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
    if (!path_split_field(p, &e->path, &e->npath, err))
        goto fail;
    return e;
fail:
    expr_destroy(e);
    return NULL;
}

/* The node of operator `op` with its argument `arg` read the way the
 * operator's table row says (`op->parse`: a literal, a list of arguments
 * checked against min_args/max_args, $cond's parts, ...); NULL with `err`
 * set when the argument does not fit. */
static expr_t *parse_op(const expr_op_t *op, bson_iter_t *arg, dberr_t *err)
{
    expr_t *e = expr_node_new(EK_OP);
    e->op = op;
    switch (op->parse) {
    case OPP_LITERAL:
        bson_value_copy(bson_iter_value(arg), &e->cval);
        return e;
    case OPP_ARGS:
        if (BSON_ITER_HOLDS_ARRAY(arg)) {
            bson_iter_t child;
            bson_iter_recurse(arg, &child);
            while (bson_iter_next(&child)) {
                expr_t *a = expr_parse(&child, err);
                if (!a)
                    goto fail;
                expr_add_arg(e, a, NULL);
            }
        } else {
            expr_t *a = expr_parse(arg, err);
            if (!a)
                goto fail;
            expr_add_arg(e, a, NULL);
        }
        if (op->min_args == op->max_args && (int)e->nargs != op->min_args) {
            dberr_set(err, 16020, "Expression %s takes exactly %d arguments. %zu were passed in.",
                      op->name, op->min_args, e->nargs);
            goto fail;
        }
        if ((int)e->nargs < op->min_args || (op->max_args >= 0 && (int)e->nargs > op->max_args)) {
            if (op->max_args < 0)
                dberr_set(err, 16020,
                          "Expression %s takes at least %d arguments, and %zu were passed in.",
                          op->name, op->min_args, e->nargs);
            else
                dberr_set(err, 16020,
                          "Expression %s takes at least %d arguments, and at most %d, but %zu were "
                          "passed in.",
                          op->name, op->min_args, op->max_args, e->nargs);
            goto fail;
        }
        return e;
    case OPP_COND:
        if (BSON_ITER_HOLDS_DOCUMENT(arg)) {
            static const expr_parts_spec_t cond_parts = {
                {"if", "then", "else"},
                17083,
                "Unrecognized parameter to $cond: %s",
                {17080, 17081, 17082},
                {"Missing 'if' parameter to $cond", "Missing 'then' parameter to $cond",
                 "Missing 'else' parameter to $cond"},
            };
            expr_t *parts[3] = {NULL, NULL, NULL};
            bson_iter_t child;
            bson_iter_recurse(arg, &child);
            if (!expr_parse_parts(&child, &cond_parts, parts, err))
                goto fail;
            for (int i = 0; i < 3; i++)
                expr_add_arg(e, parts[i], NULL);
            return e;
        } else {
            const expr_op_t cond_args = {op->name, .fn = op->fn, .min_args = 3, .max_args = 3};
            expr_t *inner = parse_op(&cond_args, arg, err);
            if (!inner)
                goto fail;
            inner->op = op;
            expr_destroy(e);
            return inner;
        }
    case OPP_LET:
        if (!expr_parse_let(e, arg, err))
            goto fail;
        return e;
    case OPP_NAMED: {
        size_t np = 0;
        while (np < 5 && op->params[np])
            np++;
        e->args = bson_malloc0(np * sizeof *e->args);
        e->nargs = np;
        if (!BSON_ITER_HOLDS_DOCUMENT(arg)) {
            dberr_set(err, op->named_codes[0] ? op->named_codes[0] : 28646,
                      "%s only supports an object as its argument, found: %s", op->name,
                      shellfmt_type_name(bson_iter_type(arg)));
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
                dberr_set(err, op->named_codes[1] ? op->named_codes[1] : 16879,
                          "Unrecognized parameter to %s: %s", op->name, k);
                goto fail;
            }
            expr_destroy(e->args[i]);
            e->args[i] = expr_parse(&child, err);
            if (!e->args[i])
                goto fail;
        }
        for (size_t i = 0; i < np; i++)
            if (op->params[i][0] == '!' && !e->args[i]) {
                dberr_set(err, op->missing_codes[i] ? op->missing_codes[i] : 16880,
                          "Missing '%s' parameter to %s", op->params[i] + 1, op->name);
                goto fail;
            }
        return e;
    }
    case OPP_FIELD:
        if (!expr_parse_field_op(e, arg, err))
            goto fail;
        return e;
    case OPP_CUSTOM:
        if (!op->parse_fn(e, arg, err))
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
            dberr_set(err, 15983,
                      "an expression specification must contain exactly one field, the name of the "
                      "expression. Found %u fields",
                      n);
            return NULL;
        }
        const expr_op_t *op = find_op(name);
        if (!op) {
            dberr_set(err, DBERR_INVALID_PIPELINE_OPERATOR, "Unrecognized expression '%s'", name);
            return NULL;
        }
        return parse_op(op, &child, err);
    }
    expr_t *e = expr_node_new(EK_DOC);
    e->names = bson_malloc0(sizeof *e->names);
    while (bson_iter_next(&child)) {
        const char *k = bson_iter_key(&child);
        if (k[0] == '$') {
            dberr_set(err, 16410,
                      "FieldPath field names may not start with '$'. Consider using $getField or "
                      "$setField.");
            goto fail;
        }
        if (k[0] == '\0') {
            dberr_set(err, 15998, "FieldPath field names may not be empty strings.");
            goto fail;
        }
        if (strchr(k, '.')) {
            dberr_set(err, 16412,
                      "FieldPath field names may not contain '.'. Consider using $getField or "
                      "$setField.");
            goto fail;
        }
        expr_t *a = expr_parse(&child, err);
        if (!a)
            goto fail;
        expr_add_arg(e, a, k);
    }
    return e;
fail:
    expr_destroy(e);
    return NULL;
}

expr_t *expr_parse(bson_iter_t *it, dberr_t *err)
{
    switch (bson_iter_type(it)) {
    case BSON_TYPE_UTF8: {
        const char *s = bson_iter_utf8(it, NULL);
        if (s[0] == '$')
            return parse_path(s, err);
        break;
    }
    case BSON_TYPE_DOCUMENT:
        return parse_document(it, err);
    case BSON_TYPE_ARRAY: {
        bson_iter_t child;
        expr_t *e = expr_node_new(EK_ARRAY);
        bson_iter_recurse(it, &child);
        while (bson_iter_next(&child)) {
            expr_t *a = expr_parse(&child, err);
            if (!a) {
                expr_destroy(e);
                return NULL;
            }
            expr_add_arg(e, a, NULL);
        }
        return e;
    }
    default:
        break;
    }
    expr_t *e = expr_node_new(EK_CONST);
    bson_value_copy(bson_iter_value(it), &e->cval);
    return e;
}

expr_t *expr_new(const bson_iter_t *spec, dberr_t *err)
{
    bson_iter_t it = *spec;
    dberr_clear(err);
    return expr_parse(&it, err);
}

/* ------------------------------------------------------------ variables */

static bool scope_has(const var_scope_t *s, const char *name)
{
    for (; s; s = s->up)
        if (strcmp(s->name, name) == 0)
            return true;
    return false;
}

bool expr_check_scope(const expr_t *e, const var_scope_t *scope, const bson_t *vars, dberr_t *err)
{
    if (!e)
        return true;
    switch (e->kind) {
    case EK_CONST:
        return true;
    case EK_PATH:
        if (!e->var || strcmp(e->var, "ROOT") == 0 || strcmp(e->var, "CURRENT") == 0 ||
            strcmp(e->var, "REMOVE") == 0 || strcmp(e->var, "NOW") == 0 ||
            scope_has(scope, e->var) || (vars && bson_has_field(vars, e->var)))
            return true;
        return dberr_set(err, 17276, "Use of undefined variable: %s", e->var);
    case EK_DOC:
    case EK_ARRAY:
        break;
    case EK_OP:
        if (e->op->scope)
            return e->op->scope(e, scope, vars, err);
        break;
    }
    for (size_t i = 0; i < e->nargs; i++)
        if (!expr_check_scope(e->args[i], scope, vars, err))
            return false;
    return true;
}

bool expr_is_constant(const expr_t *e)
{
    if (!e || e->kind == EK_CONST)
        return true;
    if (e->kind == EK_PATH)
        return false;
    if (e->kind == EK_OP && e->op->parse == OPP_LITERAL)
        return true;
    if (e->kind == EK_OP && !strcmp(e->op->name, "$rand"))
        return false;
    for (size_t i = 0; i < e->nargs; i++)
        if (!expr_is_constant(e->args[i]))
            return false;
    return true;
}

bool expr_check_vars(const expr_t *e, const bson_t *vars, dberr_t *err)
{
    return expr_check_scope(e, NULL, vars, err);
}

void expr_array_append(bson_t *arr, uint32_t *idx, const bson_value_t *v)
{
    char key[16];
    const char *k;
    bson_uint32_to_string((*idx)++, &k, key, sizeof key);
    bson_append_value(arr, k, -1, v);
}

void expr_values_to_array(const bson_value_t *vals, size_t n, bson_value_t *out)
{
    bson_t arr;
    uint32_t idx = 0;
    bson_init(&arr);
    for (size_t i = 0; i < n; i++)
        expr_array_append(&arr, &idx, &vals[i]);
    expr_value_take_bson(out, &arr, BSON_TYPE_ARRAY);
}

/* Reads a number that must be a whole 32-bit integer. */
bool expr_as_int32(const bson_value_t *v, int32_t *out)
{
    if (!num_is_number(v))
        return false;
    double d = num_to_double(v);
    if (d != floor(d) || d < INT32_MIN || d > INT32_MAX)
        return false;
    *out = (int32_t)d;
    return true;
}

/* Binds `name` to `v` on top of `base` into `vars` (initialised here). */
void expr_bind_var(bson_t *vars, const bson_t *base, const char *name, const bson_value_t *v)
{
    bson_init(vars);
    if (base)
        bson_copy_to_excluding_noinit(base, vars, name, NULL);
    bson_append_value(vars, name, -1, v);
}

bool expr_check_type(const bson_value_t *v, bson_type_t want, int code, const char *fmt,
                     dberr_t *err)
{
    if (v->value_type == want)
        return true;
    return dberr_set(err, code, fmt, shellfmt_type_name(v->value_type));
}

bool expr_parse_parts(bson_iter_t *fields, const expr_parts_spec_t *spec, expr_t **parts,
                      dberr_t *err)
{
    size_t n = 0;
    while (n < 3 && spec->names[n])
        n++;
    while (bson_iter_next(fields)) {
        const char *k = bson_iter_key(fields);
        size_t slot = 0;
        while (slot < n && strcmp(k, spec->names[slot]))
            slot++;
        if (slot == n) {
            dberr_set(err, spec->unknown_code, spec->unknown_fmt, k);
            goto fail;
        }
        expr_destroy(parts[slot]);
        if (!(parts[slot] = expr_parse(fields, err)))
            goto fail;
    }
    for (size_t i = 0; i < n; i++)
        if (!parts[i]) {
            dberr_set(err, spec->missing_codes[i], "%s", spec->missing_msgs[i]);
            goto fail;
        }
    return true;
fail:
    for (size_t i = 0; i < n; i++) {
        expr_destroy(parts[i]);
        parts[i] = NULL;
    }
    return false;
}

bool expr_recurse_object(const bson_iter_t *it, bson_iter_t *child, int code, const char *fmt,
                         dberr_t *err)
{
    if (!BSON_ITER_HOLDS_DOCUMENT(it))
        return dberr_set(err, code, fmt, shellfmt_type_name(bson_iter_type(it)));
    bson_iter_recurse(it, child);
    return true;
}

