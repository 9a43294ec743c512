/* update/inplace: the in-place path of an operator update — top-level $set,
 * $inc (and $setOnInsert) on existing fixed-width scalars that keep their
 * type: the new document is the old BSON copied and patched with libbson's
 * bson_iter_overwrite_*, with no document tree. Whatever it cannot do
 * byte-identically to the general path (apply.c) it leaves to that path. */
#include "doc/update/update-private.h"

#include <string.h>

/* Most top-level targets the in-place path takes (kept on the stack). */
#define INPLACE_MAX_TARGETS 8

void update_inplace_plan(updater_t *u)
{
    const unode_t *root = u->root;
    u->inplace = false;
    if (u->kind != UPDATER_OPERATORS || !root || root->kind != UN_OBJECT || root->positional ||
        u->nfilters > 0 || u->dollar_path || root->nkids == 0 || root->nkids > INPLACE_MAX_TARGETS)
        return;
    for (size_t i = 0; i < root->nkids; i++) {
        const unode_t *k = root->kids[i].node;
        /* a leaf right under the root is a one-component path */
        if (k->kind != UN_LEAF || !(k->op->flags & (UPDATE_OP_INPLACE_SET | UPDATE_OP_INPLACE_INC)))
            return;
        if (strcmp(root->kids[i].name, "_id") == 0) /* ImmutableField checks: general path */
            return;
    }
    u->inplace = true;
}

/* True when libbson writes these regex options back unchanged: known flags,
 * each once, in the order bson_append_regex sorts them ("ilmsux"). */
static bool inplace_regex_options_sorted(const char *options)
{
    static const char order[] = "ilmsux";
    const char *at = order;
    for (const char *o = options; *o; o++) {
        const char *p = strchr(at, *o);
        if (!p)
            return false;
        at = p + 1;
    }
    return true;
}

/* True when the value under `it` is written back byte for byte when the
 * general path rebuilds the document from its tree, and nests no deeper
 * than the stored-depth limit (`level`: the value's own level). */
static bool inplace_value_canonical(const bson_iter_t *it, int level);

/* The same for every element of the container `data` at `level`. */
static bool inplace_container_canonical(const uint8_t *data, uint32_t len, bool is_array, int level)
{
    bson_t b;
    bson_iter_t it;
    uint32_t idx = 0;
    if (!bson_init_static(&b, data, len) || !bson_iter_init(&it, &b))
        return false;
    while (bson_iter_next(&it)) {
        if (is_array) { /* the tree renumbers array keys */
            char buf[16];
            const char *key;
            bson_uint32_to_string(idx++, &key, buf, sizeof buf);
            if (strcmp(key, bson_iter_key(&it)) != 0)
                return false;
        }
        if (!inplace_value_canonical(&it, level))
            return false;
    }
    return it.err_off == 0;
}

static bool inplace_value_canonical(const bson_iter_t *it, int level)
{
    uint32_t len;
    const uint8_t *data;
    switch (bson_iter_type(it)) {
    case BSON_TYPE_DOCUMENT:
    case BSON_TYPE_ARRAY:
        if (level + 1 > UPD_MAX_STORED_DEPTH)
            return false;
        if (BSON_ITER_HOLDS_DOCUMENT(it))
            bson_iter_document(it, &len, &data);
        else
            bson_iter_array(it, &len, &data);
        return inplace_container_canonical(data, len, BSON_ITER_HOLDS_ARRAY(it), level + 1);
    case BSON_TYPE_REGEX: {
        const char *options;
        bson_iter_regex(it, &options);
        return inplace_regex_options_sorted(options ? options : "");
    }
    case BSON_TYPE_BINARY: {
        bson_subtype_t sub;
        bson_iter_binary(it, &sub, &len, &data);
        return sub != BSON_SUBTYPE_BINARY_DEPRECATED;
    }
    default:
        return true;
    }
}

/* True for the types $set may overwrite in place: same width for every
 * value of the type. */
static bool inplace_fixed_width(bson_type_t t)
{
    switch (t) {
    case BSON_TYPE_DOUBLE:
    case BSON_TYPE_OID:
    case BSON_TYPE_BOOL:
    case BSON_TYPE_DATE_TIME:
    case BSON_TYPE_NULL:
    case BSON_TYPE_INT32:
    case BSON_TYPE_TIMESTAMP:
    case BSON_TYPE_INT64:
    case BSON_TYPE_DECIMAL128:
    case BSON_TYPE_MINKEY:
    case BSON_TYPE_MAXKEY:
        return true;
    default:
        return false;
    }
}

/* Writes `v` (of the type `it` holds) over the value under `it`. */
static void inplace_overwrite(bson_iter_t *it, const bson_value_t *v)
{
    switch (v->value_type) {
    case BSON_TYPE_DOUBLE:
        bson_iter_overwrite_double(it, v->value.v_double);
        break;
    case BSON_TYPE_OID:
        bson_iter_overwrite_oid(it, &v->value.v_oid);
        break;
    case BSON_TYPE_BOOL:
        bson_iter_overwrite_bool(it, v->value.v_bool);
        break;
    case BSON_TYPE_DATE_TIME:
        bson_iter_overwrite_date_time(it, v->value.v_datetime);
        break;
    case BSON_TYPE_INT32:
        bson_iter_overwrite_int32(it, v->value.v_int32);
        break;
    case BSON_TYPE_TIMESTAMP:
        bson_iter_overwrite_timestamp(it, v->value.v_timestamp.timestamp,
                                      v->value.v_timestamp.increment);
        break;
    case BSON_TYPE_INT64:
        bson_iter_overwrite_int64(it, v->value.v_int64);
        break;
    case BSON_TYPE_DECIMAL128:
        bson_iter_overwrite_decimal128(it, &v->value.v_decimal128);
        break;
    default: /* null, minKey, maxKey: nothing to write */
        break;
    }
}

/* Applies one leaf to the element under `it` (in `out`'s bytes). False:
 * the general path must do it (type change, overflow, error). */
static bool inplace_apply_leaf(const unode_t *leaf, bson_iter_t *it)
{
    bson_type_t t = bson_iter_type(it);
    const bson_value_t *cur = bson_iter_value(it);
    if (leaf->op->flags & UPDATE_OP_INPLACE_SET) {
        /* set_existing: writes the argument unless its encoding is the same,
         * and writing the same bytes changes nothing either */
        if (leaf->arg.value_type != t || !inplace_fixed_width(t))
            return false;
        inplace_overwrite(it, &leaf->arg);
        return true;
    }
    /* $inc: arith_existing's number model, kept only when the type stays */
    num_t orig, arg, r;
    bson_value_t v;
    if (!num_from_value(cur, &orig) || !num_from_value(&leaf->arg, &arg) ||
        !num_safe_add(&arg, &orig, &r))
        return false;
    if (num_identical(&r, &orig)) /* set_num leaves the element as it was */
        return true;
    num_to_value(&r, &v);
    if (v.value_type != t)
        return false;
    inplace_overwrite(it, &v);
    return true;
}

bool update_inplace_apply(const updater_t *u, const bson_t *old_doc, bool is_insert, bson_t *out)
{
    const unode_t *root = u->root;
    /* where each target's element starts in `out` (bson_iter_t is
     * over-aligned, so no array of them) */
    uint32_t at_off[INPLACE_MAX_TARGETS], at_keylen[INPLACE_MAX_TARGETS];
    bool found[INPLACE_MAX_TARGETS] = {false};
    bson_iter_t it;
    bool first = true;
    if (!u->inplace || out->len != 5)
        return false;
    if (!bson_concat(out, old_doc) || !bson_iter_init(&it, out))
        goto fallback;
    while (bson_iter_next(&it)) {
        const char *key = bson_iter_key(&it);
        if (strcmp(key, "_id") == 0) {
            /* the general path moves _id first and refuses these types */
            bson_type_t t = bson_iter_type(&it);
            if (!first || t == BSON_TYPE_ARRAY || t == BSON_TYPE_REGEX || t == BSON_TYPE_UNDEFINED)
                goto fallback;
        }
        first = false;
        for (size_t i = 0; i < root->nkids; i++) {
            if (strcmp(key, root->kids[i].name) != 0)
                continue;
            if (found[i]) /* a repeated name: leave it to the tree */
                goto fallback;
            found[i] = true;
            at_off[i] = bson_iter_offset(&it);
            at_keylen[i] = bson_iter_key_len(&it);
        }
        if (!inplace_value_canonical(&it, 1))
            goto fallback;
    }
    if (it.err_off != 0)
        goto fallback;
    for (size_t i = 0; i < root->nkids; i++) {
        const unode_t *leaf = root->kids[i].node;
        if ((leaf->op->flags & UPDATE_OP_INSERT_ONLY) && !is_insert)
            continue;
        if (!found[i]) /* creating a field grows the document */
            goto fallback;
        bson_iter_t target;
        if (!bson_iter_init_from_data_at_offset(&target, bson_get_data(out), out->len, at_off[i],
                                                at_keylen[i]) ||
            !inplace_apply_leaf(leaf, &target))
            goto fallback;
    }
    return true;

fallback:
    bson_reinit(out);
    return false;
}
