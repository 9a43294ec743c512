/* pipeline/redact: the $redact stage — its expression decides, level by
 * level, whether a document or subdocument is kept whole ($$KEEP), dropped
 * ($$PRUNE) or kept with each of its fields decided the same way
 * ($$DESCEND), with $$CURRENT moving into the subdocuments. */
#include "doc/pipeline/pipeline-private.h"

#include <string.h>

#include "util/fiber.h"
#include "util/shellfmt.h"

/* The values the variables $redact defines stand for (mongod's too). */
static const char *const redact_vars[][2] = {
    {"DESCEND", "descend"},
    {"PRUNE", "prune"},
    {"KEEP", "keep"},
};

/* `base` (NULL: none) plus $$DESCEND, $$PRUNE and $$KEEP, into `vars`. */
static void redact_bind(const bson_t *base, bson_t *vars)
{
    bson_init(vars);
    if (base)
        bson_concat(vars, base);
    for (size_t i = 0; i < sizeof redact_vars / sizeof redact_vars[0]; i++)
        bson_append_utf8(vars, redact_vars[i][0], -1, redact_vars[i][1], -1);
}

static bool redact_parse(stage_t *s, bson_iter_t *arg, const bson_t *let, dberr_t *err)
{
    return (s->u.expr = expr_new(arg, err)) != NULL;
}

static bool redact_check_vars(stage_t *s, const bson_t *let, dberr_t *err)
{
    bson_t vars;
    redact_bind(let, &vars);
    bool ok = expr_check_vars(s->u.expr, &vars, err);
    bson_destroy(&vars);
    return ok;
}

static void redact_free(stage_t *s)
{
    expr_destroy(s->u.expr);
}

typedef enum { REDACT_PRUNED, REDACT_KEPT } redact_result_t;

/* Borrows the array under `it` into `out`. */
static void redact_borrow_array(const bson_iter_t *it, bson_t *out)
{
    const uint8_t *d;
    uint32_t n;
    bson_iter_array(it, &n, &d);
    if (!bson_init_static(out, d, n))
        bson_init(out);
}

static bool redact_object(const expr_t *e, const expr_ctx_t *ctx, const bson_t *cur, bson_t *out,
                          redact_result_t *res, dberr_t *err);

/* The elements of array `arr` into `out`: documents and arrays redacted
 * (a pruned document dropped), other values kept. */
static bool redact_array(const expr_t *e, const expr_ctx_t *ctx, const bson_t *arr, bson_t *out,
                         dberr_t *err)
{
    bson_iter_t it;
    uint32_t idx = 0;
    bson_iter_init(&it, arr);
    while (bson_iter_next(&it)) {
        char key[16];
        const char *k;
        bson_t sub, child;
        bson_uint32_to_string(idx, &k, key, sizeof key);
        if (BSON_ITER_HOLDS_DOCUMENT(&it)) {
            redact_result_t r;
            pipeline_borrow_doc(&it, &sub);
            bson_init(&child);
            if (!redact_object(e, ctx, &sub, &child, &r, err)) {
                bson_destroy(&child);
                return false;
            }
            if (r == REDACT_KEPT) {
                bson_append_document(out, k, -1, &child);
                idx++;
            }
            bson_destroy(&child);
        } else if (BSON_ITER_HOLDS_ARRAY(&it)) {
            redact_borrow_array(&it, &sub);
            bson_init(&child);
            if (!redact_array(e, ctx, &sub, &child, err)) {
                bson_destroy(&child);
                return false;
            }
            bson_append_array(out, k, -1, &child);
            bson_destroy(&child);
            idx++;
        } else {
            bson_append_iter(out, k, -1, &it);
            idx++;
        }
    }
    return true;
}

/* Redacts the (sub)document `cur` into `out` (initialised by the caller);
 * *res says whether it was kept. */
static bool redact_object(const expr_t *e, const expr_ctx_t *ctx, const bson_t *cur, bson_t *out,
                          redact_result_t *res, dberr_t *err)
{
    expr_ctx_t c = *ctx;
    bson_value_t v;
    c.current = cur;
    if (!expr_eval(e, &c, &v, err))
        return false;
    const char *s = v.value_type == BSON_TYPE_UTF8 ? v.value.v_utf8.str : "";
    bool ok = true;
    if (!strcmp(s, "keep")) {
        bson_concat(out, cur);
        *res = REDACT_KEPT;
    } else if (!strcmp(s, "prune")) {
        *res = REDACT_PRUNED;
    } else if (!strcmp(s, "descend")) {
        bson_iter_t it;
        *res = REDACT_KEPT;
        bson_iter_init(&it, cur);
        while (ok && bson_iter_next(&it)) {
            bson_t sub, child;
            if (BSON_ITER_HOLDS_DOCUMENT(&it)) {
                redact_result_t r;
                pipeline_borrow_doc(&it, &sub);
                bson_init(&child);
                ok = redact_object(e, ctx, &sub, &child, &r, err);
                if (ok && r == REDACT_KEPT)
                    bson_append_document(out, bson_iter_key(&it), -1, &child);
                bson_destroy(&child);
            } else if (BSON_ITER_HOLDS_ARRAY(&it)) {
                redact_borrow_array(&it, &sub);
                bson_init(&child);
                ok = redact_array(e, ctx, &sub, &child, err);
                if (ok)
                    bson_append_array(out, bson_iter_key(&it), -1, &child);
                bson_destroy(&child);
            } else {
                bson_append_iter(out, NULL, 0, &it);
            }
        }
    } else {
        char *r = v.value_type == BSON_TYPE_EOD ? bson_strdup("MISSING") : shellfmt_value(&v);
        ok = dberr_set(err, 17053,
                       "$redact's expression should not return anything aside from the variables "
                       "$$KEEP, $$DESCEND, and $$PRUNE, but returned %s",
                       r);
        bson_free(r);
    }
    if (v.value_type != BSON_TYPE_EOD)
        bson_value_destroy(&v);
    return ok;
}

static bool redact_run(const stage_t *s, const expr_ctx_t *base, doclist_t *in, doclist_t *out,
                       dberr_t *err)
{
    bson_t vars;
    bool ok = true;
    redact_bind(base->vars, &vars);
    for (size_t i = 0; ok && i < in->len; i++) {
        if (!(ok = fiber_check(err)))
            break;
        expr_ctx_t ctx = *base;
        redact_result_t r;
        ctx.root = in->docs[i];
        ctx.vars = &vars;
        bson_t *d = bson_new();
        ok = redact_object(s->u.expr, &ctx, in->docs[i], d, &r, err);
        if (ok && r == REDACT_KEPT)
            doclist_push(out, d);
        else
            bson_destroy(d);
    }
    bson_destroy(&vars);
    return ok;
}

const stage_def_t pipeline_redact_stages[] = {
    {"$redact", redact_parse, redact_run, redact_check_vars, redact_free, STAGE_STREAM},
    {NULL, NULL, NULL, NULL, NULL, 0},
};
