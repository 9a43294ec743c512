/* expr/var: variables — $let (with its scope rule: the bindings read the
 * outer scope, the body sees them all), $literal, and a command's `let`
 * evaluated once into $$name values. */
#include "doc/expr/expr-private.h"

#include <string.h>

static bool op_literal(const expr_t *e, const expr_ctx_t *ctx, bson_value_t *out, dberr_t *err)
{
    (void)ctx;
    (void)err;
    bson_value_copy(&e->cval, out);
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
        if (!expr_eval_node(e->args[i], ctx, &v, err)) {
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
        expr_val_free(&v);
    }
    {
        expr_ctx_t inner = *ctx;
        inner.vars = &vars;
        ok = expr_eval_node(e->args[nvars], &inner, out, err);
    }
cleanup:
    bson_destroy(&vars);
    return ok;
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
        if (!expr_valid_var_name(name))
            return dberr_set(
                err, 16867, "'%s' starts with an invalid character for a user variable name", name);
        expr_t *e = expr_parse(&it, err);
        if (!e)
            return false;
        expr_ctx_t ctx = {.root = &empty, .now_ms = now_ms, .vars = out};
        bson_value_t v;
        bool ok = expr_check_scope(e, NULL, out, err) && expr_eval(e, &ctx, &v, err);
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
        expr_val_free(&v);
    }
    return true;
}

bool expr_parse_let(expr_t *e, bson_iter_t *arg, dberr_t *err)
{
    bson_iter_t child, vars;
    bool have_vars = false, have_in = false;
    expr_t *body = NULL;
    if (!BSON_ITER_HOLDS_DOCUMENT(arg)) {
        dberr_set(err, 16874, "$let only supports an object as its argument");
        return false;
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
            body = expr_parse(&child, err);
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
        if (!expr_valid_var_name(name)) {
            dberr_set(err, 16867, "'%s' starts with an invalid character for a user variable name",
                      name);
            goto let_fail;
        }
        expr_t *a = expr_parse(&child, err);
        if (!a)
            goto let_fail;
        expr_add_arg(e, a, name);
    }
    expr_add_arg(e, body, "");
    return true;
let_fail:
    expr_destroy(body);
    return false;
}

/* $let: each binding is read in the enclosing scope, the body in all. */
static bool let_scope(const expr_t *e, const var_scope_t *scope, const bson_t *vars, dberr_t *err)
{
    size_t nvars = e->nargs - 1;
    var_scope_t *chain = bson_malloc((nvars ? nvars : 1) * sizeof *chain);
    const var_scope_t *inner = scope;
    bool ok = true;
    for (size_t i = 0; i < nvars && ok; i++) {
        ok = expr_check_scope(e->args[i], scope, vars, err);
        chain[i].name = e->names[i];
        chain[i].up = inner;
        inner = &chain[i];
    }
    ok = ok && expr_check_scope(e->args[nvars], inner, vars, err);
    bson_free(chain);
    return ok;
}

const expr_op_t expr_var_ops[] = {
    {"$let", .fn = op_let, .parse = OPP_LET, .scope = let_scope},
    {"$const", .fn = op_literal, .parse = OPP_LITERAL},
    {"$literal", .fn = op_literal, .parse = OPP_LITERAL},
    {NULL},
};
