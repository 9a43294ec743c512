/* update/field: the field operators — $set $unset $inc $mul $min $max
 * $rename $setOnInsert $currentDate $bit — one row each in
 * update_field_ops: how the argument is read, and how it applies to an
 * existing field or creates a missing one. */
#include "doc/update/update-private.h"

#include <string.h>

#include "doc/compare.h"
#include "doc/path.h"
#include "util/shellfmt.h"

/* ---- shared pieces ---- */

/* Creates the missing path holding the operator's argument. */
static bool create_arg(update_apply_t *c, const unode_t *leaf, doctree_t *e)
{
    return update_create(c, e, doctree_from_value(&leaf->arg));
}

/* Creates the missing path holding the number `n`. */
static bool create_num(update_apply_t *c, doctree_t *e, const num_t *n)
{
    bson_value_t v;
    num_to_value(n, &v);
    return update_create(c, e, doctree_from_value(&v));
}

/* Sets an existing element to the number `n` unless it is identical. */
static void set_num(update_apply_t *c, doctree_t *e, const num_t *orig, const num_t *n)
{
    if (num_identical(n, orig))
        return;
    bson_value_t v;
    num_to_value(n, &v);
    update_note_id_path(c);
    doctree_set_value(e, &v);
}

static const num_t num_zero = {.type = BSON_TYPE_INT32, .v.i32 = 0};

/* ---- $set, $setOnInsert ---- */

static bool set_existing(update_apply_t *c, const unode_t *leaf, doctree_t *e)
{
    if (!doctree_binary_equal(e, &leaf->arg)) {
        update_note_id_path(c);
        doctree_set_value(e, &leaf->arg);
    }
    return true;
}

/* ---- $unset ---- */

static bool unset_existing(update_apply_t *c, const unode_t *leaf, doctree_t *e)
{
    update_note_id_path(c);
    if (e->parent && e->parent->type == BSON_TYPE_ARRAY)
        doctree_clear_value(e);
    else if (e->parent)
        doctree_remove(e);
    return true;
}

/* ---- $inc, $mul ---- */

static bool arith_parse(unode_t *leaf, dberr_t *err)
{
    if (num_is_number(&leaf->arg))
        return true;
    bson_string_t *s = bson_string_new(NULL);
    bson_string_append_printf(s, "Cannot %s with non-numeric argument: {",
                              strcmp(leaf->op->name, "$inc") == 0 ? "increment" : "multiply");
    shellfmt_append_element(s, leaf->spec_name, &leaf->arg);
    bson_string_append(s, "}");
    dberr_set(err, DBERR_TYPE_MISMATCH, "%s", s->str);
    bson_string_free(s, true);
    return false;
}

static bool arith_existing(update_apply_t *c, const unode_t *leaf, doctree_t *e, bool multiply)
{
    char buf[24];
    num_t orig, arg, r;
    if (!num_from_value(&e->v, &orig) || doctree_is_container(e)) {
        bson_string_t *s = bson_string_new(NULL);
        bson_string_append_printf(s, "Cannot apply %s to a value of non-numeric type. {",
                                  leaf->op->name);
        update_append_id(c, s, false);
        bson_string_append_printf(s, "} has the field '%s' of non-numeric type %s",
                                  doctree_field_name(e, buf, sizeof buf),
                                  shellfmt_type_name(e->type));
        return update_fail(c, DBERR_TYPE_MISMATCH, s);
    }
    num_from_value(&leaf->arg, &arg);
    bool ok = multiply ? num_safe_mul(&arg, &orig, &r) : num_safe_add(&arg, &orig, &r);
    if (!ok) {
        bson_string_t *s = bson_string_new(NULL);
        bson_string_append_printf(s, "Failed to apply %s operations to current value (",
                                  leaf->op->name);
        num_append_debug(s, &orig);
        bson_string_append(s, ") for document {");
        update_append_id(c, s, false);
        bson_string_append(s, "}");
        return update_fail(c, DBERR_BAD_VALUE, s);
    }
    set_num(c, e, &orig, &r);
    return true;
}

static bool inc_existing(update_apply_t *c, const unode_t *leaf, doctree_t *e)
{
    return arith_existing(c, leaf, e, false);
}

static bool mul_existing(update_apply_t *c, const unode_t *leaf, doctree_t *e)
{
    return arith_existing(c, leaf, e, true);
}

/* $mul on a missing field stores 0 of the argument's type. */
static bool mul_missing(update_apply_t *c, const unode_t *leaf, doctree_t *e)
{
    num_t arg, r;
    num_from_value(&leaf->arg, &arg);
    num_safe_mul(&arg, &num_zero, &r);
    return create_num(c, e, &r);
}

/* ---- $min, $max ---- */

static bool minmax_existing(update_apply_t *c, const unode_t *leaf, doctree_t *e, bool is_max)
{
    /* compareVal is element vs value: $min sets when element > value. */
    int cmp = doctree_compare_value_coll(e, &leaf->arg, c->u->coll);
    if (cmp == 0 || is_max == (cmp > 0))
        return true;
    update_note_id_path(c);
    doctree_set_value(e, &leaf->arg);
    return true;
}

static bool min_existing(update_apply_t *c, const unode_t *leaf, doctree_t *e)
{
    return minmax_existing(c, leaf, e, false);
}

static bool max_existing(update_apply_t *c, const unode_t *leaf, doctree_t *e)
{
    return minmax_existing(c, leaf, e, true);
}

/* ---- $currentDate ---- */

static bool current_date_fail(dberr_t *err)
{
    return dberr_set(err, DBERR_BAD_VALUE,
                     "The '$type' string field is required to be 'date' or 'timestamp': "
                     "{$currentDate: {field : {$type: 'date'}}}");
}

static bool current_date_parse(unode_t *leaf, dberr_t *err)
{
    const bson_value_t *v = &leaf->arg;
    if (v->value_type == BSON_TYPE_BOOL)
        return true;
    if (v->value_type != BSON_TYPE_DOCUMENT)
        return dberr_set(
            err, DBERR_BAD_VALUE,
            "%s is not valid type for $currentDate. Please use a boolean ('true') or a $type "
            "expression ({$type: 'timestamp/date'}).",
            shellfmt_type_name(v->value_type));
    bson_t obj;
    bson_iter_t it;
    bool found = false;
    bson_init_static(&obj, v->value.v_doc.data, v->value.v_doc.data_len);
    bson_iter_init(&it, &obj);
    while (bson_iter_next(&it)) {
        if (strcmp(bson_iter_key(&it), "$type") != 0)
            return dberr_set(err, DBERR_BAD_VALUE, "Unrecognized $currentDate option: %s",
                             bson_iter_key(&it));
        const char *t = BSON_ITER_HOLDS_UTF8(&it) ? bson_iter_utf8(&it, NULL) : "";
        if (strcmp(t, "date") != 0 && strcmp(t, "timestamp") != 0)
            return current_date_fail(err);
        leaf->u.timestamp = strcmp(t, "timestamp") == 0;
        found = true;
    }
    return found || current_date_fail(err);
}

static void current_date_value(const update_apply_t *c, const unode_t *leaf, bson_value_t *v)
{
    memset(v, 0, sizeof *v);
    if (leaf->u.timestamp) {
        v->value_type = BSON_TYPE_TIMESTAMP;
        v->value.v_timestamp.timestamp = (uint32_t)(c->now_ms / 1000);
        v->value.v_timestamp.increment = 1;
    } else {
        v->value_type = BSON_TYPE_DATE_TIME;
        v->value.v_datetime = c->now_ms;
    }
}

static bool current_date_existing(update_apply_t *c, const unode_t *leaf, doctree_t *e)
{
    bson_value_t v;
    current_date_value(c, leaf, &v);
    update_note_id_path(c);
    doctree_set_value(e, &v);
    return true;
}

static bool current_date_missing(update_apply_t *c, const unode_t *leaf, doctree_t *e)
{
    bson_value_t v;
    current_date_value(c, leaf, &v);
    return update_create(c, e, doctree_from_value(&v));
}

/* ---- $bit ---- */

/* "<prefix>'<k>'<middle>{k: v}" for the $bit argument errors. */
static bool bit_fail(dberr_t *err, const char *prefix, const char *what, const char *middle,
                     const char *k, const bson_value_t *v)
{
    bson_string_t *s = bson_string_new(prefix);
    bson_string_append_printf(s, "%s%s{", what, middle);
    shellfmt_append_element(s, k, v);
    bson_string_append(s, "}");
    dberr_set(err, DBERR_BAD_VALUE, "%s", s->str);
    bson_string_free(s, true);
    return false;
}

static bool bit_parse(unode_t *leaf, dberr_t *err)
{
    bson_t obj;
    bson_iter_t it;
    if (leaf->arg.value_type != BSON_TYPE_DOCUMENT)
        return dberr_set(
            err, DBERR_BAD_VALUE,
            "The $bit modifier is not compatible with a %s. You must pass in an embedded "
            "document: {$bit: {field: {and/or/xor: #}}",
            shellfmt_type_name(leaf->arg.value_type));
    bson_init_static(&obj, leaf->arg.value.v_doc.data, leaf->arg.value.v_doc.data_len);
    size_t n = bson_count_keys(&obj);
    leaf->u.bit.ops = bson_malloc0((n ? n : 1) * sizeof *leaf->u.bit.ops);
    bson_iter_init(&it, &obj);
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        const bson_value_t *v = bson_iter_value(&it);
        char op = strcmp(k, "and") == 0   ? 'a'
                  : strcmp(k, "or") == 0  ? 'o'
                  : strcmp(k, "xor") == 0 ? 'x'
                                          : 0;
        if (!op)
            return bit_fail(err, "The $bit modifier only supports 'and', 'or', and 'xor', not '", k,
                            "' which is an unknown operator: ", k, v);
        if (v->value_type != BSON_TYPE_INT32 && v->value_type != BSON_TYPE_INT64)
            return bit_fail(err, "The $bit modifier field must be an Integer(32/64 bit); a '",
                            shellfmt_type_name(v->value_type), "' is not supported here: ", k, v);
        bitop_t *b = &leaf->u.bit.ops[leaf->u.bit.n++];
        b->op = op;
        num_from_value(v, &b->operand);
    }
    if (leaf->u.bit.n == 0)
        return dberr_set(err, DBERR_BAD_VALUE,
                         "You must pass in at least one bitwise operation. The format is: "
                         "{$bit: {field: {and/or/xor: #}}");
    return true;
}

static void bit_free(unode_t *leaf)
{
    bson_free(leaf->u.bit.ops);
}

static num_t bit_apply(const unode_t *leaf, num_t v)
{
    for (size_t i = 0; i < leaf->u.bit.n; i++) {
        const bitop_t *b = &leaf->u.bit.ops[i];
        bool wide = v.type == BSON_TYPE_INT64 || b->operand.type == BSON_TYPE_INT64;
        int64_t x = v.type == BSON_TYPE_INT32 ? v.v.i32 : v.v.i64;
        int64_t y = b->operand.type == BSON_TYPE_INT32 ? b->operand.v.i32 : b->operand.v.i64;
        int64_t r = b->op == 'a' ? (x & y) : b->op == 'o' ? (x | y) : (x ^ y);
        if (wide) {
            v.type = BSON_TYPE_INT64;
            v.v.i64 = r;
        } else {
            v.type = BSON_TYPE_INT32;
            v.v.i32 = (int32_t)r;
        }
    }
    return v;
}

static bool bit_existing(update_apply_t *c, const unode_t *leaf, doctree_t *e)
{
    if (e->type != BSON_TYPE_INT32 && e->type != BSON_TYPE_INT64) {
        char buf[24];
        bson_string_t *s = bson_string_new("Cannot apply $bit to a value of non-integral type.");
        update_append_id(c, s, false);
        bson_string_append_printf(s, " has the field %s of non-integer type %s",
                                  doctree_field_name(e, buf, sizeof buf),
                                  shellfmt_type_name(e->type));
        return update_fail(c, DBERR_BAD_VALUE, s);
    }
    num_t orig;
    num_from_value(&e->v, &orig);
    num_t r = bit_apply(leaf, orig);
    set_num(c, e, &orig, &r);
    return true;
}

static bool bit_missing(update_apply_t *c, const unode_t *leaf, doctree_t *e)
{
    num_t r = bit_apply(leaf, num_zero);
    return create_num(c, e, &r);
}

/* ---- $rename ---- */

/* True when a component of `path` is `$` or `$[...]`. */
static bool path_is_dynamic(const char *path)
{
    size_t n;
    bool dynamic = false;
    char **parts = path_split(path, &n);
    for (size_t i = 0; i < n; i++)
        dynamic = dynamic || strcmp(parts[i], "$") == 0 || update_is_array_filter_ident(parts[i]);
    path_free(parts, n);
    return dynamic;
}

/* Checks `from` (the spec name) against `to` (the path): RenameNode::init. */
static bool rename_parse(unode_t *leaf, dberr_t *err)
{
    const char *from = leaf->spec_name, *to = leaf->path;
    if (strcmp(from, to) == 0)
        return update_err_spec(err, DBERR_BAD_VALUE,
                               "The source and target field for $rename must differ: ", from,
                               &leaf->arg, "");
    size_t lf = strlen(from), lt = strlen(to);
    if ((lf < lt && strncmp(from, to, lf) == 0 && to[lf] == '.') ||
        (lt < lf && strncmp(from, to, lt) == 0 && from[lt] == '.'))
        return update_err_spec(
            err, DBERR_BAD_VALUE,
            "The source and target field for $rename must not be on the same path: ", from,
            &leaf->arg, "");
    if (path_is_dynamic(from))
        return dberr_set(err, DBERR_BAD_VALUE,
                         "The source field for $rename may not be dynamic: %s", from);
    if (path_is_dynamic(to))
        return dberr_set(err, DBERR_BAD_VALUE,
                         "The destination field for $rename may not be dynamic: %s", to);
    leaf->u.rename_from = bson_strdup(from);
    return true;
}

static void rename_free(unode_t *leaf)
{
    bson_free(leaf->u.rename_from);
}

/* {$rename: {from: "to"}}: the source path is occupied by a do-nothing
 * leaf (so other operators on it conflict), the leaf at "to" moves it. */
static bool rename_merge(update_parse_t *p, const update_op_t *op, const char *field,
                         const bson_value_t *v, dberr_t *err)
{
    if (!update_merge_path(p, &update_rename_source_op, field, field, v, err))
        return false;
    if (v->value_type != BSON_TYPE_UTF8)
        return update_err_spec(err, DBERR_BAD_VALUE,
                               "The 'to' field for $rename must be a string: ", field, v, "");
    return update_merge_path(p, op, field, v->value.v_utf8.str, v, err);
}

/* Finds the $rename source in the current document (findLongestPrefix). */
static bool rename_find_source(update_apply_t *c, const char *from, doctree_t **out)
{
    size_t n;
    char **parts = path_split(from, &n);
    doctree_t *cur = c->root;
    bool ok = true;
    *out = NULL;
    for (size_t i = 0; i < n; i++) {
        size_t idx;
        if (cur->type != BSON_TYPE_DOCUMENT &&
            !(cur->type == BSON_TYPE_ARRAY && doctree_parse_index(parts[i], &idx))) {
            bson_string_t *s = bson_string_new(NULL);
            char buf[24];
            bson_string_append_printf(s,
                                      "cannot use the part (%s of %s) to traverse the element ({",
                                      i > 0 ? parts[i - 1] : parts[i], from);
            doctree_append_element(s, doctree_field_name(cur, buf, sizeof buf), cur);
            bson_string_append(s, "})");
            ok = update_fail(c, DBERR_PATH_NOT_VIABLE, s);
            break;
        }
        doctree_t *next = doctree_child(cur, parts[i]);
        if (!next)
            break;
        cur = next;
        if (i == n - 1)
            *out = cur;
    }
    path_free(parts, n);
    return ok;
}

static bool array_ancestor_error(update_apply_t *c, const char *which, const char *path,
                                 const doctree_t *arr)
{
    bson_string_t *s = bson_string_new(NULL);
    char buf[24];
    bson_string_append_printf(s, "The %s field cannot be an array element, '%s' in doc with ",
                              which, path);
    update_append_id(c, s, true);
    bson_string_append_printf(s, " has an array field called '%s'",
                              doctree_field_name(arr, buf, sizeof buf));
    return update_fail(c, DBERR_BAD_VALUE, s);
}

/* The first array among `p` and its ancestors below the root, or NULL. */
static const doctree_t *array_ancestor(const update_apply_t *c, const doctree_t *p)
{
    for (; p && p != c->root; p = p->parent)
        if (p->type == BSON_TYPE_ARRAY)
            return p;
    return NULL;
}

static bool rename_apply(update_apply_t *c, const unode_t *leaf, doctree_t *element)
{
    doctree_t *from;
    const doctree_t *arr;
    if (!rename_find_source(c, leaf->u.rename_from, &from))
        return false;
    if (!from)
        return true; /* nothing to rename */
    if ((arr = array_ancestor(c, from->parent)))
        return array_ancestor_error(c, "source", leaf->u.rename_from, arr);
    if ((arr = array_ancestor(c, c->create.n == 0 ? element->parent : element)))
        return array_ancestor_error(c, "destination", leaf->path, arr);
    if (c->create.n == 0) {
        bson_value_t fv;
        bson_t *tmp;
        doctree_value(from, &fv, &tmp);
        if (doctree_compare_value(element, &fv) != 0) {
            update_note_id_path(c);
            doctree_set_value(element, &fv);
        }
        bson_destroy(tmp);
    } else if (!update_create(c, element, doctree_clone(from, NULL))) {
        return false;
    }
    /* Remove the source; creating the destination never moves it. */
    if (strcmp(leaf->u.rename_from, "_id") == 0 || strncmp(leaf->u.rename_from, "_id.", 4) == 0)
        c->id_by_rename = true;
    doctree_remove(from);
    return true;
}

/* ---- the table ---- */

const update_op_t update_rename_source_op = {
    "$rename", NULL, update_apply_noop, update_apply_noop, NULL, NULL, 0};

const update_op_t update_field_ops[] = {
    {"$set", NULL, set_existing, create_arg, NULL, NULL, UPDATE_OP_CREATES | UPDATE_OP_INPLACE_SET},
    {"$unset", NULL, unset_existing, update_apply_noop, NULL, NULL, 0},
    {"$inc", arith_parse, inc_existing, create_arg, NULL, NULL,
     UPDATE_OP_CREATES | UPDATE_OP_INPLACE_INC},
    {"$mul", arith_parse, mul_existing, mul_missing, NULL, NULL, UPDATE_OP_CREATES},
    {"$min", NULL, min_existing, create_arg, NULL, NULL, UPDATE_OP_CREATES},
    {"$max", NULL, max_existing, create_arg, NULL, NULL, UPDATE_OP_CREATES},
    {"$rename", rename_parse, rename_apply, rename_apply, rename_free, rename_merge,
     UPDATE_OP_CREATES},
    {"$setOnInsert", NULL, set_existing, create_arg, NULL, NULL,
     UPDATE_OP_INSERT_ONLY | UPDATE_OP_INPLACE_SET},
    {"$currentDate", current_date_parse, current_date_existing, current_date_missing, NULL, NULL,
     UPDATE_OP_CREATES},
    {"$bit", bit_parse, bit_existing, bit_missing, bit_free, NULL, UPDATE_OP_CREATES},
    {NULL, NULL, NULL, NULL, NULL, NULL, 0},
};
