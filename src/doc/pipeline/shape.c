/* pipeline/shape: the stages that reshape each document — $project
 * $addFields/$set $unset $replaceRoot $replaceWith $unwind — and
 * $documents, which makes the input; one row each in pipeline_shape_stages. */
#include "doc/pipeline/pipeline-private.h"
#include "util/fiber.h"

#include <string.h>

#include "doc/path.h"
#include "util/shellfmt.h"

/* ---- $project, $addFields/$set, $unset: projections ---- */

static bool project_parse(stage_t *s, bson_iter_t *it, const bson_t *let, dberr_t *err)
{
    bson_t f;
    if (!BSON_ITER_HOLDS_DOCUMENT(it))
        return dberr_set(err, 15969, "$project specification must be an object");
    pipeline_borrow_doc(it, &f);
    s->u.proj = projection_new_policy(&f, PROJECTION_AGGREGATE, err);
    return s->u.proj != NULL;
}

static bool add_fields_parse(stage_t *s, bson_iter_t *it, const bson_t *let, dberr_t *err)
{
    bson_t f;
    if (!BSON_ITER_HOLDS_DOCUMENT(it))
        return dberr_set(err, 40272, "%s specification stage must be an object, got %s", s->name,
                         shellfmt_type_name(bson_iter_type(it)));
    pipeline_borrow_doc(it, &f);
    s->u.proj = projection_new_policy(&f, PROJECTION_ADD_FIELDS, err);
    return s->u.proj != NULL;
}

/* $unset: "a" or ["a", "b.c"] → the exclusion projection {a: 0, "b.c": 0}. */
static bool unset_parse(stage_t *s, bson_iter_t *arg, const bson_t *let, dberr_t *err)
{
    bson_t spec = BSON_INITIALIZER;
    bool ok = true;
    if (BSON_ITER_HOLDS_UTF8(arg)) {
        bson_append_int32(&spec, bson_iter_utf8(arg, NULL), -1, 0);
    } else if (BSON_ITER_HOLDS_ARRAY(arg)) {
        bson_iter_t it;
        bson_iter_recurse(arg, &it);
        while (bson_iter_next(&it)) {
            if (!BSON_ITER_HOLDS_UTF8(&it)) {
                ok = dberr_set(err, 31120,
                               "$unset specification must be a string or an array containing only "
                               "string values");
                goto cleanup;
            }
            bson_append_int32(&spec, bson_iter_utf8(&it, NULL), -1, 0);
        }
        if (bson_empty(&spec)) {
            ok = dberr_set(
                err, 31119,
                "$unset specification must be a string or an array with at least one field");
            goto cleanup;
        }
    } else {
        ok = dberr_set(err, 31002, "$unset specification must be a string or an array");
        goto cleanup;
    }
    s->u.proj = projection_new_policy(&spec, PROJECTION_AGGREGATE, err);
    ok = s->u.proj != NULL;
cleanup:
    bson_destroy(&spec);
    return ok;
}

/* What one input document becomes in a streamed stage of this file,
 * appended to `out`. */
typedef bool (*shape_one_fn)(const stage_t *s, const expr_ctx_t *ctx, const bson_t *doc,
                             doclist_t *out, dberr_t *err);

/* Runs `one` over each document of `in`, yielding between them
 * (util/fiber.h); stops at the first failure. */
static bool shape_each(const stage_t *s, const expr_ctx_t *ctx, const doclist_t *in, doclist_t *out,
                       shape_one_fn one, dberr_t *err)
{
    for (size_t i = 0; i < in->len; i++)
        if (!fiber_check(err) || !one(s, ctx, in->docs[i], out, err))
            return false;
    return true;
}

static bool project_one(const stage_t *s, const expr_ctx_t *ctx, const bson_t *doc, doclist_t *out,
                        dberr_t *err)
{
    bson_t *d = bson_new();
    if (!projection_apply_ctx(s->u.proj, doc, -1, ctx, d, err)) {
        bson_destroy(d);
        return false;
    }
    doclist_push(out, d);
    return true;
}

static bool project_run(const stage_t *s, const expr_ctx_t *ctx, doclist_t *in, doclist_t *out,
                        dberr_t *err)
{
    return shape_each(s, ctx, in, out, project_one, err);
}

static void project_free(stage_t *s)
{
    projection_destroy(s->u.proj);
}

/* ---- $replaceRoot, $replaceWith, $documents: a new root from an expression ---- */

static bool replace_root_opt_new_root(void *args, const bson_iter_t *it, dberr_t *err)
{
    stage_t *s = args;
    expr_destroy(s->u.expr);
    return (s->u.expr = expr_new(it, err)) != NULL;
}

static const pipeline_option_t replace_root_options[] = {
    {"newRoot", replace_root_opt_new_root},
    {NULL, NULL},
};

static bool replace_root_parse(stage_t *s, bson_iter_t *it, const bson_t *let, dberr_t *err)
{
    bson_t spec;
    if (!BSON_ITER_HOLDS_DOCUMENT(it))
        return dberr_set(err, 40229,
                         "expected an object as specification for $replaceRoot stage, got %s",
                         shellfmt_type_name(bson_iter_type(it)));
    pipeline_borrow_doc(it, &spec);
    if (!pipeline_options_parse(&spec, replace_root_options, 40415,
                                "BSON field '$replaceRoot.%s' is an unknown field.", s, err))
        return false;
    if (!s->u.expr)
        return dberr_set(err, 40414,
                         "BSON field '$replaceRoot.newRoot' is missing but a required field");
    return true;
}

/* $replaceWith and $documents: the argument is the expression. */
static bool expr_arg_parse(stage_t *s, bson_iter_t *it, const bson_t *let, dberr_t *err)
{
    s->u.expr = expr_new(it, err);
    return s->u.expr != NULL;
}

static bool expr_arg_check_vars(stage_t *s, const bson_t *let, dberr_t *err)
{
    return expr_check_vars(s->u.expr, let, err);
}

static void expr_arg_free(stage_t *s)
{
    expr_destroy(s->u.expr);
}

/* Appends `v` to `out` as a document; Location40228 when it is not one. */
static bool push_new_root(bson_value_t *v, doclist_t *out, dberr_t *err)
{
    if (v->value_type != BSON_TYPE_DOCUMENT)
        return dberr_set(err, 40228,
                         "'newRoot' expression must evaluate to an object, but resulting value "
                         "was of type: %s",
                         shellfmt_type_name(v->value_type));
    bson_t *d = bson_new_from_data(v->value.v_doc.data, v->value.v_doc.data_len);
    if (!d)
        return dberr_set(err, DBERR_INVALID_BSON, "invalid document from newRoot");
    doclist_push(out, d);
    return true;
}

/* $documents: the expression, evaluated against an empty document, unwound
 * (null or missing gives nothing) into documents, as mongod's desugaring
 * into $project/$unwind/$replaceRoot does. */
static bool documents_run(const stage_t *s, const expr_ctx_t *ctx, doclist_t *in, doclist_t *out,
                          dberr_t *err)
{
    bson_t empty = BSON_INITIALIZER;
    expr_ctx_t c = *ctx;
    bson_value_t v;
    bool ok = true;
    c.root = &empty;
    if (!expr_eval(s->u.expr, &c, &v, err))
        return false;
    if (v.value_type == BSON_TYPE_ARRAY) {
        bson_t arr;
        bson_iter_t it;
        if (bson_init_static(&arr, v.value.v_doc.data, v.value.v_doc.data_len) &&
            bson_iter_init(&it, &arr))
            while (ok && bson_iter_next(&it)) {
                bson_value_t ev = *bson_iter_value(&it);
                ok = push_new_root(&ev, out, err);
            }
    } else if (v.value_type != BSON_TYPE_EOD && v.value_type != BSON_TYPE_NULL &&
               v.value_type != BSON_TYPE_UNDEFINED) {
        ok = push_new_root(&v, out, err);
    }
    if (v.value_type != BSON_TYPE_EOD)
        bson_value_destroy(&v);
    return ok;
}

static bool replace_one(const stage_t *s, const expr_ctx_t *ctx, const bson_t *doc, doclist_t *out,
                        dberr_t *err)
{
    expr_ctx_t c = *ctx;
    bson_value_t v;
    c.root = doc;
    if (!expr_eval(s->u.expr, &c, &v, err))
        return false;
    bool ok = push_new_root(&v, out, err);
    if (v.value_type != BSON_TYPE_EOD)
        bson_value_destroy(&v);
    return ok;
}

static bool replace_run(const stage_t *s, const expr_ctx_t *ctx, doclist_t *in, doclist_t *out,
                        dberr_t *err)
{
    return shape_each(s, ctx, in, out, replace_one, err);
}

/* ---- $unwind ---- */

static bool unwind_parse(stage_t *s, bson_iter_t *arg, const bson_t *let, dberr_t *err)
{
    const char *path = NULL;
    const char *index = NULL;
    if (BSON_ITER_HOLDS_UTF8(arg)) {
        path = bson_iter_utf8(arg, NULL);
    } else if (BSON_ITER_HOLDS_DOCUMENT(arg)) {
        bson_iter_t it;
        bson_iter_recurse(arg, &it);
        while (bson_iter_next(&it)) {
            const char *k = bson_iter_key(&it);
            if (strcmp(k, "path") == 0) {
                if (!BSON_ITER_HOLDS_UTF8(&it))
                    return dberr_set(err, 28808,
                                     "expected a string as the path for $unwind stage, got %s",
                                     shellfmt_type_name(bson_iter_type(&it)));
                path = bson_iter_utf8(&it, NULL);
            } else if (strcmp(k, "includeArrayIndex") == 0) {
                if (!BSON_ITER_HOLDS_UTF8(&it) || bson_iter_utf8(&it, NULL)[0] == '\0')
                    return dberr_set(err, 28809,
                                     "expected a non-empty string for the includeArrayIndex option "
                                     "to $unwind stage");
                index = bson_iter_utf8(&it, NULL);
                if (index[0] == '$')
                    return dberr_set(err, 28822,
                                     "includeArrayIndex option to $unwind stage should not be "
                                     "prefixed with a '$': %s",
                                     index);
            } else if (strcmp(k, "preserveNullAndEmptyArrays") == 0) {
                if (!BSON_ITER_HOLDS_BOOL(&it))
                    return dberr_set(err, 28810,
                                     "expected a boolean for the preserveNullAndEmptyArrays option "
                                     "to $unwind stage, got %s",
                                     shellfmt_type_name(bson_iter_type(&it)));
                s->u.unwind.preserve = bson_iter_bool(&it);
            } else {
                return dberr_set(err, 28811, "unrecognized option to $unwind stage: %s", k);
            }
        }
        if (!path)
            return dberr_set(err, 28812, "no path specified to $unwind stage");
    } else {
        return dberr_set(
            err, 15981,
            "expected either a string or an object as specification for $unwind stage, got %s",
            shellfmt_type_name(bson_iter_type(arg)));
    }
    if (path[0] != '$')
        return dberr_set(err, 28818,
                         "path option to $unwind stage should be prefixed with a '$': %s", path);
    if (path[1] == '\0' || path[1] == '$' ||
        !pipeline_split_path(path + 1, &s->u.unwind.path, &s->u.unwind.npath))
        return dberr_set(err, 15998, "FieldPath field names may not be empty strings.");
    if (index && !pipeline_split_path(index, &s->u.unwind.index_path, &s->u.unwind.nindex))
        return dberr_set(err, 15998, "FieldPath field names may not be empty strings.");
    return true;
}

/* Reads nested `path` without array traversal (as $unwind does). */
static bool get_nested(const bson_t *doc, char *const *path, size_t n, bson_iter_t *out)
{
    bson_iter_t it;
    if (!bson_iter_init_find(&it, doc, path[0]))
        return false;
    for (size_t i = 1; i < n; i++) {
        bson_iter_t child;
        if (!BSON_ITER_HOLDS_DOCUMENT(&it) || !bson_iter_recurse(&it, &child))
            return false;
        if (!bson_iter_find(&child, path[i]))
            return false;
        it = child;
    }
    *out = it;
    return true;
}

/* Appends to `out` a nested document for path[0..n) holding `v`. */
static void append_nested(bson_t *out, char *const *path, size_t n, const bson_value_t *v)
{
    if (n == 1) {
        bson_append_value(out, path[0], -1, v);
        return;
    }
    bson_t child;
    bson_append_document_begin(out, path[0], -1, &child);
    append_nested(&child, path + 1, n - 1, v);
    bson_append_document_end(out, &child);
}

void pipeline_set_path(const bson_t *doc, char *const *path, size_t n, const bson_value_t *v,
                       bson_t *out)
{
    bson_iter_t it;
    bool found = false;
    if (bson_iter_init(&it, doc))
        while (bson_iter_next(&it)) {
            const char *k = bson_iter_key(&it);
            if (found || strcmp(k, path[0]) != 0) {
                bson_append_value(out, k, -1, bson_iter_value(&it));
                continue;
            }
            found = true;
            if (n == 1) {
                if (v)
                    bson_append_value(out, k, -1, v);
            } else if (BSON_ITER_HOLDS_DOCUMENT(&it)) {
                bson_t sub, child;
                pipeline_borrow_doc(&it, &sub);
                bson_append_document_begin(out, k, -1, &child);
                pipeline_set_path(&sub, path + 1, n - 1, v, &child);
                bson_append_document_end(out, &child);
            } else if (v) {
                bson_t child;
                bson_append_document_begin(out, k, -1, &child);
                append_nested(&child, path + 1, n - 1, v);
                bson_append_document_end(out, &child);
            } else {
                bson_append_value(out, k, -1, bson_iter_value(&it));
            }
        }
    if (!found && v)
        append_nested(out, path, n, v);
}

/* Pushes `d` (stolen) to `out`, with includeArrayIndex set to `iv` first
 * when the stage asks for it. */
static void push_with_index(const stage_t *s, bson_t *d, const bson_value_t *iv, doclist_t *out)
{
    if (s->u.unwind.index_path) {
        bson_t *d2 = bson_new();
        pipeline_set_path(d, s->u.unwind.index_path, s->u.unwind.nindex, iv, d2);
        bson_destroy(d);
        d = d2;
    }
    doclist_push(out, d);
}

static bool unwind_run(const stage_t *s, const expr_ctx_t *ctx, doclist_t *in, doclist_t *out,
                       dberr_t *err)
{
    for (size_t i = 0; i < in->len; i++) {
        if (!fiber_check(err))
            return false;
        const bson_t *doc = in->docs[i];
        bson_iter_t it;
        bool present = get_nested(doc, s->u.unwind.path, s->u.unwind.npath, &it);
        bson_value_t nullv = {.value_type = BSON_TYPE_NULL};
        if (present && BSON_ITER_HOLDS_ARRAY(&it)) {
            bson_iter_t el;
            bson_value_t arr;
            int64_t idx = 0;
            bson_value_copy(bson_iter_value(&it), &arr);
            bson_t a;
            bson_init_static(&a, arr.value.v_doc.data, arr.value.v_doc.data_len);
            bson_iter_init(&el, &a);
            while (bson_iter_next(&el)) {
                bson_t *d = bson_new();
                pipeline_set_path(doc, s->u.unwind.path, s->u.unwind.npath, bson_iter_value(&el),
                                  d);
                bson_value_t iv = {.value_type = BSON_TYPE_INT64};
                iv.value.v_int64 = idx++;
                push_with_index(s, d, &iv, out);
            }
            if (idx == 0 && s->u.unwind.preserve) {
                bson_t *d = bson_new();
                pipeline_set_path(doc, s->u.unwind.path, s->u.unwind.npath, NULL, d);
                push_with_index(s, d, &nullv, out);
            }
            bson_value_destroy(&arr);
            continue;
        }
        bool nullish = !present || BSON_ITER_HOLDS_NULL(&it) || BSON_ITER_HOLDS_UNDEFINED(&it);
        if (nullish && !s->u.unwind.preserve)
            continue;
        /* a non-array value is unwound as itself; index null */
        push_with_index(s, bson_copy(doc), &nullv, out);
    }
    (void)err;
    return true;
}

static void unwind_free(stage_t *s)
{
    path_free(s->u.unwind.path, s->u.unwind.npath);
    path_free(s->u.unwind.index_path, s->u.unwind.nindex);
}

const stage_def_t pipeline_shape_stages[] = {
    {"$project", project_parse, project_run, NULL, project_free, STAGE_IN_UPDATE | STAGE_STREAM},
    {"$addFields", add_fields_parse, project_run, NULL, project_free,
     STAGE_IN_UPDATE | STAGE_STREAM},
    {"$set", add_fields_parse, project_run, NULL, project_free, STAGE_IN_UPDATE | STAGE_STREAM},
    {"$unset", unset_parse, project_run, NULL, project_free, STAGE_IN_UPDATE | STAGE_STREAM},
    {"$replaceRoot", replace_root_parse, replace_run, expr_arg_check_vars, expr_arg_free,
     STAGE_IN_UPDATE | STAGE_STREAM},
    {"$replaceWith", expr_arg_parse, replace_run, expr_arg_check_vars, expr_arg_free,
     STAGE_IN_UPDATE | STAGE_STREAM},
    {"$documents", expr_arg_parse, documents_run, expr_arg_check_vars, expr_arg_free, STAGE_FIRST},
    {"$unwind", unwind_parse, unwind_run, NULL, unwind_free, STAGE_STREAM},
    {NULL, NULL, NULL, NULL, NULL, 0},
};
