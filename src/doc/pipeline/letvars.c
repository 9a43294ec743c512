/* pipeline/letvars: a stage's `let` — named expressions evaluated against
 * each document into a variables document, as $lookup (join.c) and $merge
 * (output.c) give to their sub-pipelines. */
#include "doc/pipeline/pipeline-private.h"

#include <string.h>

bool letvars_add(letvars_t *lv, const char *name, const bson_iter_t *it, const bson_t *scope,
                 dberr_t *err)
{
    expr_t *e = expr_new(it, err);
    if (!e)
        return false;
    lv->names = bson_realloc(lv->names, (lv->n + 1) * sizeof *lv->names);
    lv->exprs = bson_realloc(lv->exprs, (lv->n + 1) * sizeof *lv->exprs);
    lv->names[lv->n] = bson_strdup(name);
    lv->exprs[lv->n++] = e;
    return expr_check_vars(e, scope, err);
}

bool letvars_has(const letvars_t *lv, const char *name)
{
    for (size_t i = 0; i < lv->n; i++)
        if (strcmp(lv->names[i], name) == 0)
            return true;
    return false;
}

bson_t *letvars_scope(const letvars_t *lv, const bson_t *outer)
{
    bson_t *names = outer ? bson_copy(outer) : bson_new();
    for (size_t i = 0; i < lv->n; i++)
        if (!bson_has_field(names, lv->names[i]))
            bson_append_null(names, lv->names[i], -1);
    return names;
}

bool letvars_eval(const letvars_t *lv, const expr_ctx_t *ctx, bson_t *vars, dberr_t *err)
{
    for (size_t i = 0; i < lv->n; i++) {
        bson_value_t v;
        if (!expr_eval(lv->exprs[i], ctx, &v, err))
            return false;
        if (v.value_type == BSON_TYPE_EOD) {
            bson_append_undefined(vars, lv->names[i], -1);
        } else {
            bson_append_value(vars, lv->names[i], -1, &v);
            bson_value_destroy(&v);
        }
    }
    return true;
}

void letvars_destroy(letvars_t *lv)
{
    for (size_t i = 0; i < lv->n; i++) {
        bson_free(lv->names[i]);
        expr_destroy(lv->exprs[i]);
    }
    bson_free(lv->names);
    bson_free(lv->exprs);
}
