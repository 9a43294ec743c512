/* update/array: the array operators — $push (with $each $slice $sort
 * $position), $addToSet (with $each), $pop, $pull, $pullAll — one row each
 * in update_array_ops. */
#include "doc/update/update-private.h"

#include <string.h>

#include "doc/compare.h"
#include "doc/path.h"
#include "util/shellfmt.h"
#include "util/vec.h"

/* ---- shared pieces ---- */

/* Collects the elements of the array `arr` into `vals` (borrowed). */
static void collect_values(update_values_t *vals, const bson_value_t *arr)
{
    bson_t b;
    bson_iter_t it;
    size_t cap = 0;
    if (!bson_init_static(&b, arr->value.v_doc.data, arr->value.v_doc.data_len) ||
        !bson_iter_init(&it, &b))
        return;
    while (bson_iter_next(&it)) {
        VEC_RESERVE_ONE(vals->v, vals->n, cap, 4);
        vals->v[vals->n++] = *bson_iter_value(&it);
    }
}

/* The single value `v` as the value list. */
static void one_value(update_values_t *vals, const bson_value_t *v)
{
    vals->v = bson_malloc(sizeof *vals->v);
    vals->v[0] = *v;
    vals->n = 1;
}

static void values_free(unode_t *leaf)
{
    bson_free(leaf->u.each.v);
}

static bool value_as_doc(const bson_value_t *v, bson_t *out)
{
    return (v->value_type == BSON_TYPE_DOCUMENT || v->value_type == BSON_TYPE_ARRAY) &&
           bson_init_static(out, v->value.v_doc.data, v->value.v_doc.data_len);
}

/* Fails unless the existing element is an array (BadValue with `what`). */
static bool need_array(update_apply_t *c, const doctree_t *e, const char *op)
{
    if (e->type == BSON_TYPE_ARRAY)
        return true;
    return dberr_set(c->err, DBERR_BAD_VALUE, "Cannot apply %s to a non-array value", op);
}

static bool missing_not_viable(update_apply_t *c, const unode_t *leaf, doctree_t *e)
{
    return update_check_viability(c, e);
}

/* ---- $push ---- */

static bool push_parse_sort(unode_t *leaf, const bson_value_t *v, dberr_t *err)
{
    if (num_is_number(v)) {
        double d = num_to_double(v);
        if (d != 1 && d != -1)
            return dberr_set(err, DBERR_BAD_VALUE,
                             "The $sort element value must be either 1 or -1");
        leaf->u.push.sort = PUSH_SORT_VALUE;
        leaf->u.push.sort_dir = d < 0 ? -1 : 1;
        return true;
    }
    bson_t pat;
    bson_iter_t pi;
    if (v->value_type != BSON_TYPE_DOCUMENT)
        return dberr_set(err, DBERR_BAD_VALUE,
                         "The $sort is invalid: use 1/-1 to sort the whole element, or "
                         "{field:1/-1} to sort embedded fields");
    if (!value_as_doc(v, &pat) || bson_count_keys(&pat) == 0)
        return dberr_set(err, DBERR_BAD_VALUE,
                         "The $sort pattern is empty when it should be a set of fields.");
    bson_iter_init(&pi, &pat);
    while (bson_iter_next(&pi)) {
        const bson_value_t *pv = bson_iter_value(&pi);
        double d = num_is_number(pv) ? num_to_double(pv) : 0;
        if (d != 1 && d != -1)
            return dberr_set(err, DBERR_BAD_VALUE,
                             "The $sort element value must be either 1 or -1");
        const char *f = bson_iter_key(&pi);
        if (!*f)
            return dberr_set(err, DBERR_BAD_VALUE, "The $sort field cannot be empty");
        size_t fl = strlen(f);
        if (f[0] == '.' || f[fl - 1] == '.' || strstr(f, ".."))
            return dberr_set(err, DBERR_BAD_VALUE,
                             "The $sort field is a dotted field but has an empty part: %s", f);
    }
    leaf->u.push.sort = PUSH_SORT_PATTERN;
    leaf->u.push.sort_pattern = bson_copy(&pat);
    return true;
}

/* One clause of {$each, $slice, $sort, $position}. */
static bool push_parse_clause(unode_t *leaf, int c, const bson_value_t *v, dberr_t *err)
{
    switch (c) {
    case 0:
        if (v->value_type != BSON_TYPE_ARRAY)
            return dberr_set(err, DBERR_BAD_VALUE,
                             "The argument to $each in $push must be an array but it was of "
                             "type: %s",
                             shellfmt_type_name(v->value_type));
        collect_values(&leaf->u.push.each, v);
        return true;
    case 1:
        if (!update_integer_arg(v, &leaf->u.push.slice))
            return dberr_set(err, DBERR_BAD_VALUE,
                             "The value for $slice must be an integer value but was given type: %s",
                             shellfmt_type_name(v->value_type));
        leaf->u.push.has_slice = true;
        return true;
    case 2:
        return push_parse_sort(leaf, v, err);
    default:
        if (!update_integer_arg(v, &leaf->u.push.position))
            return dberr_set(err, DBERR_BAD_VALUE,
                             "The value for $position must be an integer value, not of type: %s",
                             shellfmt_type_name(v->value_type));
        return true;
    }
}

static bool push_parse(unode_t *leaf, dberr_t *err)
{
    static const char *const clauses[4] = {"$each", "$slice", "$sort", "$position"};
    bson_t obj;
    bson_iter_t it;
    leaf->u.push.position = INT64_MAX;
    if (leaf->arg.value_type != BSON_TYPE_DOCUMENT || !value_as_doc(&leaf->arg, &obj) ||
        !bson_iter_init_find(&it, &obj, "$each")) {
        one_value(&leaf->u.push.each, &leaf->arg);
        return true;
    }
    bool seen[4] = {false, false, false, false};
    bson_iter_init(&it, &obj);
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        int c = -1;
        for (int i = 0; i < 4; i++)
            if (strcmp(k, clauses[i]) == 0)
                c = i;
        if (c < 0)
            return dberr_set(err, DBERR_BAD_VALUE, "Unrecognized clause in $push: %s", k);
        if (seen[c])
            return dberr_set(err, DBERR_BAD_VALUE, "Only one %s is supported.", k);
        seen[c] = true;
        if (!push_parse_clause(leaf, c, bson_iter_value(&it), err))
            return false;
    }
    return true;
}

static void push_free(unode_t *leaf)
{
    bson_free(leaf->u.push.each.v);
    bson_destroy(leaf->u.push.sort_pattern);
}

/* `n` as a document for a $sort pattern: its fields, or {"": n}. */
static void sort_doc(const doctree_t *n, bson_t *out)
{
    bson_init(out);
    if (n->type == BSON_TYPE_DOCUMENT)
        doctree_write_kids(out, n);
    else
        doctree_write(out, "", n);
}

static int sort_cmp_pattern(const bson_t *pattern, const doctree_t *a, const doctree_t *b,
                            const collation_t *coll)
{
    bson_t da, db;
    bson_iter_t pi;
    int result = 0;
    sort_doc(a, &da);
    sort_doc(b, &db);
    bson_iter_init(&pi, pattern);
    while (result == 0 && bson_iter_next(&pi)) {
        bson_iter_t ia, ib;
        bson_value_t null_v;
        null_v.value_type = BSON_TYPE_NULL;
        const bson_value_t *va =
            path_get(&da, bson_iter_key(&pi), &ia) ? bson_iter_value(&ia) : &null_v;
        const bson_value_t *vb =
            path_get(&db, bson_iter_key(&pi), &ib) ? bson_iter_value(&ib) : &null_v;
        int c = compare_values_coll(va, vb, coll);
        result = num_to_double(bson_iter_value(&pi)) < 0 ? -c : c;
    }
    bson_destroy(&da);
    bson_destroy(&db);
    return result;
}

static int sort_cmp(const unode_t *leaf, const doctree_t *a, const doctree_t *b,
                    const collation_t *coll)
{
    if (leaf->u.push.sort == PUSH_SORT_VALUE) {
        bson_value_t vb;
        bson_t *tmp;
        doctree_value(b, &vb, &tmp);
        int c = doctree_compare_value_coll(a, &vb, coll);
        bson_destroy(tmp);
        return leaf->u.push.sort_dir < 0 ? -c : c;
    }
    return sort_cmp_pattern(leaf->u.push.sort_pattern, a, b, coll);
}

/* Stable merge sort of the kids of `arr`. */
static void sort_kids(const unode_t *leaf, doctree_t *arr, const collation_t *coll)
{
    size_t n = arr->nkids;
    if (n < 2)
        return;
    doctree_t **tmp = bson_malloc(n * sizeof *tmp);
    for (size_t width = 1; width < n; width *= 2) {
        for (size_t lo = 0; lo < n; lo += 2 * width) {
            size_t mid = lo + width < n ? lo + width : n;
            size_t hi = lo + 2 * width < n ? lo + 2 * width : n;
            size_t i = lo, j = mid, k = lo;
            while (i < mid && j < hi)
                tmp[k++] = sort_cmp(leaf, arr->kids[j], arr->kids[i], coll) < 0 ? arr->kids[j++]
                                                                          : arr->kids[i++];
            while (i < mid)
                tmp[k++] = arr->kids[i++];
            while (j < hi)
                tmp[k++] = arr->kids[j++];
        }
        memcpy(arr->kids, tmp, n * sizeof *tmp);
    }
    bson_free(tmp);
}

/* PushNode::performPush on an array node. */
static void perform_push(const unode_t *leaf, doctree_t *arr, const collation_t *coll)
{
    int64_t size = (int64_t)arr->nkids;
    int64_t pos = leaf->u.push.position;
    const update_values_t *each = &leaf->u.push.each;
    if (each->n > 0) {
        size_t at;
        if (size == 0 || pos > size)
            at = (size_t)size;
        else if (pos > 0)
            at = (size_t)pos;
        else if (pos < 0 && -pos < size)
            at = (size_t)(size + pos);
        else
            at = 0;
        for (size_t i = 0; i < each->n; i++)
            doctree_insert(arr, at + i, doctree_from_value(&each->v[i]));
    }
    if (leaf->u.push.sort != PUSH_SORT_NONE)
        sort_kids(leaf, arr, coll);
    if (leaf->u.push.has_slice) {
        int64_t slice = leaf->u.push.slice;
        uint64_t abs_slice =
            slice == INT64_MIN ? (uint64_t)INT64_MAX : (uint64_t)(slice < 0 ? -slice : slice);
        while ((uint64_t)arr->nkids > abs_slice)
            doctree_free(doctree_take(arr, slice >= 0 ? arr->nkids - 1 : 0));
    }
}

static bool push_existing(update_apply_t *c, const unode_t *leaf, doctree_t *e)
{
    if (e->type != BSON_TYPE_ARRAY) {
        bson_string_t *s = update_path_msg(c, "The field '",
                                           "' must be an array but is of type %s in document {",
                                           shellfmt_type_name(e->type));
        update_append_id(c, s, true);
        bson_string_append(s, "}");
        return update_fail(c, DBERR_BAD_VALUE, s);
    }
    update_note_id_path(c);
    perform_push(leaf, e, c->u->coll);
    return true;
}

/* A new array node for a missing path. */
static doctree_t *new_array(void)
{
    doctree_t *arr = doctree_new(NULL);
    arr->type = BSON_TYPE_ARRAY;
    return arr;
}

static bool push_missing(update_apply_t *c, const unode_t *leaf, doctree_t *e)
{
    doctree_t *arr = new_array();
    perform_push(leaf, arr, c->u->coll);
    return update_create(c, e, arr);
}

/* ---- $addToSet ---- */

static bool add_to_set_parse(unode_t *leaf, dberr_t *err)
{
    bson_t obj;
    bson_iter_t it;
    if (leaf->arg.value_type != BSON_TYPE_DOCUMENT || !value_as_doc(&leaf->arg, &obj) ||
        !bson_iter_init(&it, &obj) || !bson_iter_next(&it) ||
        strcmp(bson_iter_key(&it), "$each") != 0) {
        one_value(&leaf->u.each, &leaf->arg);
        return true;
    }
    const bson_value_t *each = bson_iter_value(&it);
    if (each->value_type != BSON_TYPE_ARRAY)
        return dberr_set(
            err, DBERR_TYPE_MISMATCH,
            "The argument to $each in $addToSet must be an array but it was of type %s",
            shellfmt_type_name(each->value_type));
    if (bson_count_keys(&obj) > 1) {
        bson_string_t *s = bson_string_new("Found unexpected fields after $each in $addToSet: ");
        shellfmt_append_value(s, &leaf->arg);
        dberr_set(err, DBERR_BAD_VALUE, "%s", s->str);
        bson_string_free(s, true);
        return false;
    }
    update_values_t *vals = &leaf->u.each;
    collect_values(vals, each);
    /* Deduplicate, keeping the first occurrence. */
    size_t out = 0;
    for (size_t i = 0; i < vals->n; i++) {
        bool dup = false;
        for (size_t j = 0; j < out && !dup; j++)
            dup = compare_values(&vals->v[j], &vals->v[i]) == 0;
        if (!dup)
            vals->v[out++] = vals->v[i];
    }
    vals->n = out;
    return true;
}

static bool add_to_set_existing(update_apply_t *c, const unode_t *leaf, doctree_t *e)
{
    char buf[24];
    if (e->type != BSON_TYPE_ARRAY)
        return dberr_set(
            c->err, DBERR_BAD_VALUE,
            "Cannot apply $addToSet to non-array field. Field named '%s' has non-array type %s",
            doctree_field_name(e, buf, sizeof buf), shellfmt_type_name(e->type));
    for (size_t i = 0; i < leaf->u.each.n; i++) {
        bool present = false;
        for (size_t j = 0; j < e->nkids && !present; j++)
            present = doctree_compare_value_coll(e->kids[j], &leaf->u.each.v[i], c->u->coll) == 0;
        if (!present) {
            update_note_id_path(c);
            doctree_append(e, doctree_from_value(&leaf->u.each.v[i]));
        }
    }
    return true;
}

static bool add_to_set_missing(update_apply_t *c, const unode_t *leaf, doctree_t *e)
{
    doctree_t *arr = new_array();
    for (size_t i = 0; i < leaf->u.each.n; i++)
        doctree_append(arr, doctree_from_value(&leaf->u.each.v[i]));
    return update_create(c, e, arr);
}

/* ---- $pop ---- */

static bool pop_parse(unode_t *leaf, dberr_t *err)
{
    int64_t p;
    if (!update_integer_arg(&leaf->arg, &p))
        return update_err_spec(err, DBERR_FAILED_TO_PARSE,
                               "Expected a number in: ", leaf->spec_name, &leaf->arg, "");
    if (p != 1 && p != -1)
        return dberr_set(err, DBERR_FAILED_TO_PARSE, "$pop expects 1 or -1, found: %lld",
                         (long long)p);
    leaf->u.pop_front = p < 0;
    return true;
}

static bool pop_existing(update_apply_t *c, const unode_t *leaf, doctree_t *e)
{
    if (e->type != BSON_TYPE_ARRAY)
        return update_fail(c, DBERR_TYPE_MISMATCH,
                           update_path_msg(c, "Path '",
                                           "' contains an element of non-array type '%s'",
                                           shellfmt_type_name(e->type)));
    if (e->nkids > 0) {
        update_note_id_path(c);
        doctree_free(doctree_take(e, leaf->u.pop_front ? 0 : e->nkids - 1));
    }
    return true;
}

static bool pop_missing(update_apply_t *c, const unode_t *leaf, doctree_t *e)
{
    size_t idx;
    if (c->taken.n == 0 || e->type == BSON_TYPE_DOCUMENT ||
        (e->type == BSON_TYPE_ARRAY && doctree_parse_index(pstack_at(&c->create, 0), &idx)))
        return true;
    return update_check_viability(c, e);
}

/* ---- $pull, $pullAll ---- */

/* Query operators that take a path ({$gt: ...}); a $pull condition starting
 * with one is matched against each element wrapped as {x: element}. */
static bool is_path_accepting_keyword(const char *k)
{
    static const char *const kw[] = {
        "$eq",         "$gt",           "$gte",        "$lt",
        "$lte",        "$ne",           "$in",         "$nin",
        "$exists",     "$type",         "$mod",        "$regex",
        "$options",    "$size",         "$all",        "$elemMatch",
        "$not",        "$within",       "$geoWithin",  "$geoIntersects",
        "$near",       "$nearSphere",   "$bitsAllSet", "$bitsAllClear",
        "$bitsAnySet", "$bitsAnyClear", "$jsonSchema", "$_internalSchemaType",
    };
    for (size_t i = 0; i < sizeof kw / sizeof kw[0]; i++)
        if (strcmp(k, kw[i]) == 0)
            return true;
    return false;
}

static bool pull_parse(unode_t *leaf, dberr_t *err)
{
    bson_t obj;
    bson_iter_t it;
    if (leaf->arg.value_type == BSON_TYPE_DOCUMENT && value_as_doc(&leaf->arg, &obj) &&
        !(bson_iter_init(&it, &obj) && bson_iter_next(&it) &&
          is_path_accepting_keyword(bson_iter_key(&it)))) {
        leaf->u.pull.kind = PULL_OBJECT;
        leaf->u.pull.matcher = matcher_new(&obj, err);
        return leaf->u.pull.matcher != NULL;
    }
    if (leaf->arg.value_type == BSON_TYPE_DOCUMENT || leaf->arg.value_type == BSON_TYPE_REGEX) {
        bson_t wrapped = BSON_INITIALIZER;
        bson_append_value(&wrapped, "x", 1, &leaf->arg);
        leaf->u.pull.kind = PULL_WRAPPED;
        leaf->u.pull.matcher = matcher_new(&wrapped, err);
        bson_destroy(&wrapped);
        return leaf->u.pull.matcher != NULL;
    }
    leaf->u.pull.kind = PULL_EQUAL;
    return true;
}

static void pull_free(unode_t *leaf)
{
    matcher_destroy(leaf->u.pull.matcher);
}

static bool pull_matches(const unode_t *leaf, const doctree_t *elem, const collation_t *coll)
{
    bson_t d = BSON_INITIALIZER;
    bool m;
    switch (leaf->u.pull.kind) {
    case PULL_EQUAL:
        return doctree_compare_value_coll(elem, &leaf->arg, coll) == 0;
    case PULL_OBJECT:
        if (elem->type != BSON_TYPE_DOCUMENT)
            return false;
        doctree_write_kids(&d, elem);
        break;
    default:
        doctree_write(&d, "x", elem);
        break;
    }
    m = matcher_matches(leaf->u.pull.matcher, &d, NULL);
    bson_destroy(&d);
    return m;
}

static bool pull_all_matches(const unode_t *leaf, const doctree_t *elem,
                             const collation_t *coll)
{
    for (size_t j = 0; j < leaf->u.each.n; j++)
        if (doctree_compare_value_coll(elem, &leaf->u.each.v[j], coll) == 0)
            return true;
    return false;
}

/* Removes the elements `hit` selects. */
static bool remove_matching(update_apply_t *c, const unode_t *leaf, doctree_t *e,
                            bool (*hit)(const unode_t *, const doctree_t *,
                                        const collation_t *))
{
    if (!need_array(c, e, leaf->op->name))
        return false;
    for (size_t i = 0; i < e->nkids;) {
        if (hit(leaf, e->kids[i], c->u->coll)) {
            update_note_id_path(c);
            doctree_free(doctree_take(e, i));
        } else {
            i++;
        }
    }
    return true;
}

static bool pull_existing(update_apply_t *c, const unode_t *leaf, doctree_t *e)
{
    return remove_matching(c, leaf, e, pull_matches);
}

static bool pull_all_parse(unode_t *leaf, dberr_t *err)
{
    if (leaf->arg.value_type != BSON_TYPE_ARRAY)
        return dberr_set(err, DBERR_BAD_VALUE,
                         "$pullAll requires an array argument but was given a %s",
                         shellfmt_type_name(leaf->arg.value_type));
    collect_values(&leaf->u.each, &leaf->arg);
    return true;
}

static bool pull_all_existing(update_apply_t *c, const unode_t *leaf, doctree_t *e)
{
    return remove_matching(c, leaf, e, pull_all_matches);
}

/* ---- the table ---- */

const update_op_t update_array_ops[] = {
    {"$push", push_parse, push_existing, push_missing, push_free, NULL, UPDATE_OP_CREATES},
    {"$addToSet", add_to_set_parse, add_to_set_existing, add_to_set_missing, values_free, NULL,
     UPDATE_OP_CREATES},
    {"$pop", pop_parse, pop_existing, pop_missing, NULL, NULL, 0},
    {"$pull", pull_parse, pull_existing, missing_not_viable, pull_free, NULL, 0},
    {"$pullAll", pull_all_parse, pull_all_existing, missing_not_viable, values_free, NULL, 0},
    {NULL, NULL, NULL, NULL, NULL, NULL, 0},
};
