/* expr/object: the document operators — $mergeObjects $objectToArray
 * $arrayToObject, $getField $setField $unsetField with their literal field
 * names, and the sizes of values: $bsonSize $binarySize. */
#include "doc/expr/expr-private.h"

#include <string.h>

#include "util/shellfmt.h"

void expr_merge_docs(const bson_t *old, const bson_t *add, bson_t *out)
{
    bson_iter_t it, f;
    bson_init(out);
    if (bson_iter_init(&it, old))
        while (bson_iter_next(&it)) {
            /* a field already there keeps its place and takes the new value */
            bson_iter_t *from = bson_iter_init_find(&f, add, bson_iter_key(&it)) ? &f : &it;
            bson_append_value(out, bson_iter_key(&it), -1, bson_iter_value(from));
        }
    if (bson_iter_init(&it, add))
        while (bson_iter_next(&it))
            if (!bson_has_field(old, bson_iter_key(&it)))
                bson_append_value(out, bson_iter_key(&it), -1, bson_iter_value(&it));
}

/* One $mergeObjects input merged into `acc`: its fields replace acc's in
 * place, new ones are appended; null inputs are skipped. */
static bool merge_one(const expr_t *e, size_t i, const bson_value_t *v, bson_t *acc, void *st,
                      dberr_t *err)
{
    if (expr_is_nullish(v))
        return true;
    if (!expr_check_type(v, BSON_TYPE_DOCUMENT, 40400,
                         "$mergeObjects requires object inputs, but input is of type %s", err))
        return false;
    bson_t b, merged;
    expr_bson_of(v, &b);
    expr_merge_docs(acc, &b, &merged);
    bson_destroy(acc);
    bson_steal(acc, &merged);
    return true;
}

static bool op_mergeobjects(const expr_t *e, const expr_ctx_t *ctx, bson_value_t *out, dberr_t *err)
{
    return expr_fold_into(e, ctx, merge_one, BSON_TYPE_DOCUMENT, out, err);
}

static bool op_objecttoarray(const expr_t *e, const bson_value_t *v, bson_value_t *out,
                             dberr_t *err)
{
    bson_t b, arr;
    bson_iter_t it;
    uint32_t idx = 0;
    expr_bson_of(v, &b);
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
    expr_value_take_bson(out, &arr, BSON_TYPE_ARRAY);
    return true;
}

static bool op_arraytoobject(const expr_t *e, const bson_value_t *v, bson_value_t *out,
                             dberr_t *err)
{
    bool ok = true;
    bson_t b, doc;
    bson_iter_t it;
    expr_bson_of(v, &b);
    bson_init(&doc);
    if (bson_iter_init(&it, &b))
        while (ok && bson_iter_next(&it)) {
            const char *key = NULL;
            bson_iter_t kv, f;
            const bson_value_t *val = NULL;
            bson_value_t valcopy;
            expr_val_missing(&valcopy);
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
                ok = dberr_set(
                    err, 40398,
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
            expr_val_free(&valcopy);
        }
    if (ok)
        expr_value_take_bson(out, &doc, BSON_TYPE_DOCUMENT);
    else
        bson_destroy(&doc);
    return ok;
}

static bool field_input(const expr_t *e, const expr_ctx_t *ctx, bson_value_t *out, dberr_t *err)
{
    if (e->args[0])
        return expr_eval_node(e->args[0], ctx, out, err);
    expr_val_missing(out);
    const bson_t *cur = ctx->current ? ctx->current : ctx->root; /* $$CURRENT */
    if (!cur)
        return true;
    out->value_type = BSON_TYPE_DOCUMENT;
    out->value.v_doc.data_len = cur->len;
    out->value.v_doc.data = bson_malloc(cur->len);
    memcpy(out->value.v_doc.data, bson_get_data(cur), cur->len);
    return true;
}

/* $getField, as mongod's ExpressionGetField::evaluate: null for a null or
 * undefined input; missing for a missing or non-document one (a number, a
 * string, an array) and for a field the document does not have. */
static bool op_getfield(const expr_t *e, const expr_ctx_t *ctx, bson_value_t *out, dberr_t *err)
{
    bson_value_t in;
    expr_val_missing(out);
    if (!field_input(e, ctx, &in, err))
        return false;
    if (in.value_type == BSON_TYPE_NULL || in.value_type == BSON_TYPE_UNDEFINED) {
        expr_val_null(out);
    } else if (in.value_type == BSON_TYPE_DOCUMENT) {
        bson_t b;
        bson_iter_t it;
        expr_bson_of(&in, &b);
        if (bson_iter_init_find(&it, &b, e->cval.value.v_utf8.str))
            bson_value_copy(bson_iter_value(&it), out);
    }
    expr_val_free(&in);
    return true;
}

/* $setField / $unsetField: a copy of `input` with the field replaced in
 * place, appended, or removed when the value is missing ($$REMOVE). */
static bool op_setfield(const expr_t *e, const expr_ctx_t *ctx, bson_value_t *out, dberr_t *err)
{
    bson_value_t in, v;
    bool ok = true;
    expr_val_missing(&v);
    if (!field_input(e, ctx, &in, err))
        return false;
    if (expr_is_nullish(&in)) {
        expr_val_null(out);
        goto cleanup;
    }
    if (in.value_type != BSON_TYPE_DOCUMENT) {
        /* mongod names $setField here for $unsetField too (its kExpressionName) */
        ok = dberr_set(err, 4161105, "$setField requires 'input' to evaluate to type Object");
        goto cleanup;
    }
    if (e->nargs > 1 && e->args[1] && !expr_eval_node(e->args[1], ctx, &v, err)) {
        ok = false;
        goto cleanup;
    }
    {
        const char *name = e->cval.value.v_utf8.str;
        bool placed = false;
        bson_t b, res;
        bson_iter_t it;
        expr_bson_of(&in, &b);
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
        expr_value_take_bson(out, &res, BSON_TYPE_DOCUMENT);
    }
cleanup:
    expr_val_free(&in);
    expr_val_free(&v);
    return ok;
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
                         "%s requires 'field' to evaluate to type String, but got %s", e->op->name,
                         shellfmt_type_name(v->value_type));
    if (strlen(v->value.v_utf8.str) != v->value.v_utf8.len)
        return dberr_set(err, get ? 5654602 : 4161107,
                         "%s requires 'field' to be a string without null bytes", e->op->name);
    expr_val_free(&e->cval);
    bson_value_copy(v, &e->cval);
    return true;
}

/* {$getField: {field, input}} (or the shorthand {$getField: "name"}),
 * {$setField: {field, input, value}}, {$unsetField: {field, input}}. */
bool expr_parse_field_op(expr_t *e, bson_iter_t *arg, dberr_t *err)
{
    const char *name = e->op->name;
    bool get = strcmp(name, "$getField") == 0, set = strcmp(name, "$setField") == 0;
    bson_iter_t field, input, value;
    bool have_field = false, have_input = false, have_value = false;
    /* only $getField has the shorthand: a document whose first key starts
     * with '$' is the field's expression; $setField/$unsetField read that
     * key as an unknown argument (4161101), as mongod */
    bool shorthand = !BSON_ITER_HOLDS_DOCUMENT(arg);
    if (!shorthand && get) {
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
        if (!have_input) /* only the shorthand reads $$CURRENT */
            return dberr_set(err, get ? 3041703 : 4161109, "%s requires 'input' to be specified",
                             name);
    }
    if (!parse_field_name(e, &field, err))
        return false;
    if (have_input && !(e->args[0] = expr_parse(&input, err)))
        return false;
    if (have_value && !(e->args[1] = expr_parse(&value, err)))
        return false;
    return true;
}

/* {$bsonSize: doc}: the bytes of the document as BSON. */
static bool op_bsonsize(const expr_t *e, const bson_value_t *v, bson_value_t *out, dberr_t *err)
{
    expr_val_int32(out, (int32_t)v->value.v_doc.data_len);
    return true;
}

/* {$binarySize: string or binData}: its bytes. */
static bool op_binarysize(const expr_t *e, const bson_value_t *v, bson_value_t *out, dberr_t *err)
{
    if (expr_is_nullish(v))
        expr_val_null(out);
    else if (v->value_type == BSON_TYPE_UTF8)
        expr_val_int32(out, (int32_t)v->value.v_utf8.len);
    else if (v->value_type == BSON_TYPE_BINARY)
        expr_val_int32(out, (int32_t)v->value.v_binary.data_len);
    else
        return dberr_set(err, 51276, "$binarySize requires a string or BinData argument, found: %s",
                         shellfmt_type_name(v->value_type));
    return true;
}

const expr_op_t expr_object_ops[] = {
    {"$arrayToObject", .eager = op_arraytoobject, .min_args = 1, .max_args = 1,
     .input = {BSON_TYPE_ARRAY, 40386, "$arrayToObject requires an array input, found: %s"}},
    {"$binarySize", .eager = op_binarysize, .min_args = 1, .max_args = 1},
    {"$bsonSize", .eager = op_bsonsize, .min_args = 1, .max_args = 1,
     .input = {BSON_TYPE_DOCUMENT, 31393, "$bsonSize requires a document input, found: %s"}},
    {"$getField", .fn = op_getfield, .parse = OPP_FIELD},
    {"$mergeObjects", .fn = op_mergeobjects, .max_args = -1},
    {"$objectToArray", .eager = op_objecttoarray, .min_args = 1, .max_args = 1,
     .input = {BSON_TYPE_DOCUMENT, 40390, "$objectToArray requires a document input, found: %s"}},
    {"$setField", .fn = op_setfield, .parse = OPP_FIELD},
    {"$unsetField", .fn = op_setfield, .parse = OPP_FIELD},
    {NULL},
};
