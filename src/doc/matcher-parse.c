/* matcher-parse: compiles a MongoDB query filter into matcher.c's tree of
 * predicates — field operators, $and/$or/$nor/$not, $elemMatch, $all,
 * $expr, $jsonSchema, $text and the geo operators — with mongod's errors. */
#include "doc/matcher-private.h"

#include <math.h>
#include <string.h>

#include "doc/compare.h"
#include "doc/path.h"
#include "util/bsonview.h"
#include "util/shellfmt.h"

static bool starts_dollar(const char *s)
{
    return s[0] == '$';
}

/* A DBRef's field names: $ref, $id, $db. */
static bool is_dbref_field(const char *k)
{
    return !strcmp(k, "$ref") || !strcmp(k, "$id") || !strcmp(k, "$db");
}

/* mongod's isDBRefDocument: the document under `it` has $ref and $id, or
 * (`incomplete`) any one of $ref, $id, $db. */
static bool is_dbref_doc(const bson_iter_t *it, bool incomplete)
{
    bson_iter_t child;
    bool ref = false, id = false, db = false;
    if (!bson_iter_recurse(it, &child))
        return false;
    while (bson_iter_next(&child)) {
        const char *k = bson_iter_key(&child);
        ref = ref || !strcmp(k, "$ref");
        id = id || !strcmp(k, "$id");
        db = db || !strcmp(k, "$db");
    }
    return incomplete ? ref || id || db : ref && id;
}

/* mongod's isExpressionDocument: a non-empty document whose first field
 * starts with '$' and that is not a DBRef (`incomplete`: any DBRef field
 * makes it one). */
static bool is_expression_doc(const bson_iter_t *it, bool incomplete)
{
    if (bson_iter_type(it) != BSON_TYPE_DOCUMENT)
        return false;
    bson_iter_t child;
    if (!bson_iter_recurse(it, &child) || !bson_iter_next(&child))
        return false;
    return starts_dollar(bson_iter_key(&child)) && !is_dbref_doc(it, incomplete);
}

bool matcher_is_operator_doc(const bson_iter_t *it)
{
    return is_expression_doc(it, false);
}

static bool is_unsupported_field_op(const char *op)
{
    static const char *const ops[] = {
        "$near",   "$nearSphere",  "$geoWithin",   "$geoIntersects", "$within",
        "$geometry", "$maxDistance", "$minDistance", "$box",         "$center",
        "$centerSphere", "$polygon", "$where", "$text", NULL};
    for (int i = 0; ops[i]; i++) {
        if (strcmp(op, ops[i]) == 0)
            return true;
    }
    return false;
}

/* Parses the $type argument (a code, an alias, or an array of either). */
static bool parse_type_entry(mnode_t *n, const bson_value_t *v, dberr_t *err)
{
    int code;
    if (v->value_type == BSON_TYPE_UTF8) {
        if (strcmp(v->value.v_utf8.str, "number") == 0) {
            n->type_number = true;
            return true;
        }
        bson_type_t t;
        if (!shellfmt_type_from_name(v->value.v_utf8.str, &t))
            return dberr_set(err, DBERR_BAD_VALUE, "Unknown type name alias: %s",
                             v->value.v_utf8.str);
        code = t == BSON_TYPE_MINKEY ? -1 : (int)t;
    } else if (compare_is_number(v)) {
        double d = compare_to_double(v);
        if (d != floor(d) || !((d >= 1 && d <= 19) || d == -1 || d == 127))
            return dberr_set(err, DBERR_BAD_VALUE, "Invalid numerical type code: %g", d);
        code = (int)d;
    } else {
        return dberr_set(err, DBERR_TYPE_MISMATCH,
                         "type must be represented as a number or a string");
    }
    if (code == -1)
        n->types |= UINT64_C(1) << 62;
    else if (code == 127)
        n->types |= UINT64_C(1) << 63;
    else
        n->types |= UINT64_C(1) << code;
    return true;
}

static bool parse_type(mnode_t *n, const bson_iter_t *it, dberr_t *err)
{
    if (bson_iter_type(it) != BSON_TYPE_ARRAY)
        return parse_type_entry(n, bson_iter_value((bson_iter_t *)it), err);
    bson_iter_t child;
    if (!bson_iter_recurse(it, &child))
        return dberr_set(err, DBERR_BAD_VALUE, "invalid $type array");
    while (bson_iter_next(&child)) {
        if (!parse_type_entry(n, bson_iter_value(&child), err))
            return false;
    }
    return true;
}

static bool parse_mod(mnode_t *n, const bson_iter_t *it, dberr_t *err)
{
    if (bson_iter_type(it) != BSON_TYPE_ARRAY)
        return dberr_set(err, DBERR_BAD_VALUE, "malformed mod, needs to be an array");
    bson_iter_t child;
    bson_value_t vals[2];
    int count = 0;
    if (!bson_iter_recurse(it, &child))
        return dberr_set(err, DBERR_BAD_VALUE, "malformed mod, needs to be an array");
    while (bson_iter_next(&child)) {
        if (count == 2)
            return dberr_set(err, DBERR_BAD_VALUE, "malformed mod, too many elements");
        vals[count++] = *bson_iter_value(&child);
    }
    if (count < 2)
        return dberr_set(err, DBERR_BAD_VALUE, "malformed mod, not enough elements");
    if (!compare_is_number(&vals[0]))
        return dberr_set(err, DBERR_BAD_VALUE, "malformed mod, divisor not a number");
    if (!compare_is_number(&vals[1]))
        return dberr_set(err, DBERR_BAD_VALUE, "malformed mod, remainder not a number");
    double dd = compare_to_double(&vals[0]), dr = compare_to_double(&vals[1]);
    if (isnan(dd) || isinf(dd))
        return dberr_set(err, DBERR_BAD_VALUE, "malformed mod, divisor value is invalid");
    if (isnan(dr) || isinf(dr))
        return dberr_set(err, DBERR_BAD_VALUE, "malformed mod, remainder value is invalid");
    n->mod_div = matcher_to_int64_trunc(&vals[0]);
    n->mod_rem = matcher_to_int64_trunc(&vals[1]);
    if (n->mod_div == 0)
        return dberr_set(err, DBERR_BAD_VALUE, "divisor cannot be 0");
    return true;
}

/* Builds the $in / $nin list; regex entries match by pattern. */
static bool parse_in(mnode_t *n, const char *op, const bson_iter_t *it, dberr_t *err)
{
    if (bson_iter_type(it) != BSON_TYPE_ARRAY)
        return dberr_set(err, DBERR_BAD_VALUE, "%s needs an array", op);
    bson_iter_t child;
    if (!bson_iter_recurse(it, &child))
        return dberr_set(err, DBERR_BAD_VALUE, "%s needs an array", op);
    while (bson_iter_next(&child)) {
        if (matcher_is_operator_doc(&child))
            return dberr_set(err, DBERR_BAD_VALUE, "cannot nest $ under %s", op);
        n->list = bson_realloc(n->list, (n->nlist + 1) * sizeof *n->list);
        n->list_re = bson_realloc(n->list_re, (n->nlist + 1) * sizeof *n->list_re);
        const bson_value_t *v = bson_iter_value(&child);
        n->list_re[n->nlist] = NULL;
        bson_value_copy(v, &n->list[n->nlist]);
        n->nlist++;
        if (v->value_type == BSON_TYPE_REGEX) {
            n->list_re[n->nlist - 1] = matcher_regex_from_value(v, err);
            if (!n->list_re[n->nlist - 1])
                return false;
        }
    }
    return true;
}

static bool parse_ops(const char *path, const bson_iter_t *ops, mnode_t *and_node, int depth,
                      dberr_t *err);

/* {$elemMatch: {...}}: value form when the first key is an operator other
 * than a logical one, object form otherwise. */
static mnode_t *parse_elem_match(const char *path, const bson_iter_t *it, int depth,
                                 dberr_t *err)
{
    if (bson_iter_type(it) != BSON_TYPE_DOCUMENT) {
        dberr_set(err, DBERR_BAD_VALUE, "$elemMatch needs an Object");
        return NULL;
    }
    bson_iter_t child;
    bool value_form = false;
    /* as mongod: a document with a DBRef field ($ref, $id, $db) is the
     * object form, whatever its other fields */
    if (is_expression_doc(it, true) && bson_iter_recurse(it, &child) && bson_iter_next(&child)) {
        const char *k = bson_iter_key(&child);
        value_form = strcmp(k, "$and") != 0 && strcmp(k, "$or") != 0 &&
                     strcmp(k, "$nor") != 0 && strcmp(k, "$expr") != 0 &&
                     strcmp(k, "$where") != 0 && strcmp(k, "$text") != 0 &&
                     strcmp(k, "$comment") != 0 && strcmp(k, "$alwaysTrue") != 0 &&
                     strcmp(k, "$alwaysFalse") != 0;
    }
    mnode_t *n = matcher_node_new(value_form ? MN_ELEM_VAL : MN_ELEM_OBJ, path);
    if (value_form) {
        mnode_t *and_node = matcher_node_add_new(n, MN_AND, NULL);
        if (!parse_ops(NULL, it, and_node, depth + 1, err))
            goto cleanup;
    } else {
        bson_t sub;
        if (!bsonview_iter(it, &sub)) {
            dberr_set(err, DBERR_BAD_VALUE, "$elemMatch needs an Object");
            goto cleanup;
        }
        n->sub = bson_malloc0(sizeof *n->sub);
        n->sub->refs = 1;
        n->sub->st = matcher_state_new();
        n->sub->root = matcher_node_new(MN_AND, NULL);
        if (!matcher_parse_filter(&sub, n->sub->root, depth + 1, false, err))
            goto cleanup;
    }
    return n;
cleanup: /* reached only on failure */
    matcher_node_destroy(n);
    return NULL;
}

/* {$all: [...]}: an AND of equalities (regexes match by pattern) or of
 * $elemMatch predicates; an empty list matches nothing. */
static bool parse_all(const char *path, const bson_iter_t *it, mnode_t *and_node, int depth,
                      dberr_t *err)
{
    if (bson_iter_type(it) != BSON_TYPE_ARRAY)
        return dberr_set(err, DBERR_BAD_VALUE, "$all needs an array");
    bson_iter_t child;
    if (!bson_iter_recurse(it, &child))
        return dberr_set(err, DBERR_BAD_VALUE, "$all needs an array");
    mnode_t *all = matcher_node_add_new(and_node, MN_AND, NULL);
    int count = 0, elem_matches = 0;
    while (bson_iter_next(&child)) {
        count++;
        mnode_t *n = NULL;
        if (matcher_is_operator_doc(&child)) {
            bson_iter_t inner;
            bson_iter_recurse(&child, &inner);
            bson_iter_next(&inner);
            if (strcmp(bson_iter_key(&inner), "$elemMatch") != 0)
                return dberr_set(err, DBERR_BAD_VALUE, "no $ expressions in $all");
            elem_matches++;
            n = parse_elem_match(path, &inner, depth, err);
            if (!n)
                return false;
            matcher_node_add(all, n);
        } else if (bson_iter_type(&child) == BSON_TYPE_REGEX) {
            n = matcher_node_add_new(all, MN_REGEX, path);
            n->re = matcher_regex_from_value(bson_iter_value(&child), err);
            if (!n->re)
                return false;
        } else {
            matcher_node_set_arg(matcher_node_add_new(all, MN_EQ, path), bson_iter_value(&child));
        }
    }
    if (elem_matches && elem_matches != count)
        return dberr_set(err, DBERR_BAD_VALUE, "$all/$elemMatch has to be consistent");
    if (count == 0)
        all->kind = MN_FALSE;
    return true;
}

/* Set by matcher_new_near: $near / $nearSphere compile (find orders by
 * them); elsewhere they fail as mongod's planner fails without a geo index. */
__thread bool matcher_parse_allow_near;

static bool ops_has_near(const bson_iter_t *ops)
{
    bson_iter_t it;
    if (!bson_iter_recurse(ops, &it))
        return false;
    while (bson_iter_next(&it)) {
        if (strcmp(bson_iter_key(&it), "$near") == 0 ||
            strcmp(bson_iter_key(&it), "$nearSphere") == 0)
            return true;
    }
    return false;
}

/* Where a predicate goes: under a new $not in `and_node` when `negate`
 * ($ne, $nin, {$exists: false}), else in `and_node` itself. */
static mnode_t *negated(mnode_t *and_node, bool negate)
{
    return negate ? matcher_node_add_new(and_node, MN_NOT, NULL) : and_node;
}

/* The operators of one path ({$gt: 1, $lt: 5}), added to `and_node`.
 * `path` is NULL inside a value-form $elemMatch. */
static bool parse_ops(const char *path, const bson_iter_t *ops, mnode_t *and_node, int depth,
                      dberr_t *err)
{
    if (depth > MATCHER_MAX_DEPTH)
        return dberr_set(err, DBERR_BAD_VALUE, "exceeded depth limit of %d when parsing",
                         MATCHER_MAX_DEPTH);
    bson_iter_t it;
    if (!bson_iter_recurse(ops, &it))
        return dberr_set(err, DBERR_BAD_VALUE, "invalid operator document");
    const bson_value_t *regex_arg = NULL;
    bson_value_t regex_copy;
    const char *options = NULL;
    bool have_options = false;
    while (bson_iter_next(&it)) {
        const char *op = bson_iter_key(&it);
        const bson_value_t *v = bson_iter_value(&it);
        mnode_t *n;
        if (strcmp(op, "$eq") == 0 || strcmp(op, "$ne") == 0) {
            if (op[1] == 'n' && v->value_type == BSON_TYPE_REGEX)
                return dberr_set(err, DBERR_BAD_VALUE, "Can't have regex as arg to $ne.");
            n = matcher_node_add_new(negated(and_node, op[1] == 'n'), MN_EQ, path);
            matcher_node_set_arg(n, v);
        } else if (strcmp(op, "$gt") == 0 || strcmp(op, "$gte") == 0 ||
                   strcmp(op, "$lt") == 0 || strcmp(op, "$lte") == 0) {
            mkind_t k = op[1] == 'g' ? (op[3] ? MN_GTE : MN_GT) : (op[3] ? MN_LTE : MN_LT);
            if (v->value_type == BSON_TYPE_REGEX)
                return dberr_set(err, DBERR_BAD_VALUE, "Can't have RegEx as arg to predicate over field '%s'.", path ? path : "");
            matcher_node_set_arg(matcher_node_add_new(and_node, k, path), v);
        } else if (strcmp(op, "$in") == 0 || strcmp(op, "$nin") == 0) {
            n = matcher_node_add_new(negated(and_node, op[1] == 'n'), MN_IN, path);
            if (!parse_in(n, op, &it, err))
                return false;
        } else if (strcmp(op, "$exists") == 0) {
            matcher_node_add_new(negated(and_node, !expr_truthy(v)), MN_EXISTS, path);
        } else if (strcmp(op, "$type") == 0) {
            if (!parse_type(matcher_node_add_new(and_node, MN_TYPE, path), &it, err))
                return false;
        } else if (strcmp(op, "$mod") == 0) {
            if (!parse_mod(matcher_node_add_new(and_node, MN_MOD, path), &it, err))
                return false;
        } else if (strcmp(op, "$regex") == 0) {
            if (v->value_type != BSON_TYPE_UTF8 && v->value_type != BSON_TYPE_REGEX)
                return dberr_set(err, DBERR_BAD_VALUE, "$regex has to be a string");
            regex_copy = *v;
            regex_arg = &regex_copy;
        } else if (strcmp(op, "$options") == 0) {
            if (v->value_type != BSON_TYPE_UTF8)
                return dberr_set(err, DBERR_BAD_VALUE, "$options has to be a string");
            options = v->value.v_utf8.str;
            have_options = true;
        } else if (strcmp(op, "$size") == 0) {
            if (!compare_is_number(v))
                return dberr_set(err, DBERR_BAD_VALUE, "$size needs a number");
            double d = compare_to_double(v);
            if (d < 0)
                return dberr_set(err, DBERR_BAD_VALUE, "$size may not be negative");
            n = matcher_node_add_new(and_node, MN_SIZE, path);
            n->size = (d == floor(d) && d <= 2147483647.0) ? (int64_t)d : -1;
        } else if (strcmp(op, "$elemMatch") == 0) {
            n = parse_elem_match(path, &it, depth, err);
            if (!n)
                return false;
            matcher_node_add(and_node, n);
        } else if (strcmp(op, "$all") == 0) {
            if (!parse_all(path, &it, and_node, depth, err))
                return false;
        } else if (strcmp(op, "$not") == 0) {
            mnode_t *not = matcher_node_add_new(and_node, MN_NOT, NULL);
            if (v->value_type == BSON_TYPE_REGEX) {
                n = matcher_node_add_new(not, MN_REGEX, path);
                n->re = matcher_regex_from_value(v, err);
                if (!n->re)
                    return false;
            } else if (v->value_type == BSON_TYPE_DOCUMENT) {
                bson_iter_t probe;
                if (!bson_iter_recurse(&it, &probe) || !bson_iter_next(&probe))
                    return dberr_set(err, DBERR_BAD_VALUE, "$not cannot be empty");
                mnode_t *inner = matcher_node_add_new(not, MN_AND, NULL);
                if (!parse_ops(path, &it, inner, depth + 1, err))
                    return false;
            } else {
                return dberr_set(err, DBERR_BAD_VALUE, "$not needs a regex or a document");
            }
        } else if (bits_is_operator(op)) {
            n = matcher_node_add_new(and_node, MN_BITS, path);
            n->bits = bits_new(op, v, err);
            if (!n->bits)
                return false;
        } else if (strcmp(op, "$near") == 0 || strcmp(op, "$nearSphere") == 0) {
            if (!matcher_parse_allow_near)
                return dberr_set(err, 291, "error processing query: planner returned error :: "
                                           "caused by :: unable to find index for $geoNear query");
            bson_t whole;
            bsonview_iter(ops, &whole);
            n = matcher_node_add_new(and_node, MN_GEO, path);
            n->geo = geo_pred_new_near(op, &whole, err);
            if (!n->geo)
                return false;
        } else if ((strcmp(op, "$maxDistance") == 0 || strcmp(op, "$minDistance") == 0) &&
                   ops_has_near(ops)) {
            /* read by $near / $nearSphere */
        } else if (geo_pred_is_operator(op)) {
            n = matcher_node_add_new(and_node, MN_GEO, path);
            n->geo = geo_pred_new(op, v, err);
            if (!n->geo)
                return false;
        } else if (strcmp(op, "$comment") == 0) {
            /* matches everything */
        } else if (is_unsupported_field_op(op)) {
            return dberr_set(err, DBERR_BAD_VALUE, "%s is not supported by atomdb", op);
        } else {
            return dberr_set(err, DBERR_BAD_VALUE, "unknown operator: %s", op);
        }
    }
    if (have_options && !regex_arg)
        return dberr_set(err, DBERR_BAD_VALUE, "$options needs a $regex");
    if (regex_arg) {
        mregex_t *re;
        if (regex_arg->value_type == BSON_TYPE_REGEX) {
            const char *p, *flags;
            matcher_regex_parts(regex_arg, &p, &flags);
            if (have_options && flags[0])
                return dberr_set(err, 51074, "options set in both $regex and $options");
            re = matcher_regex_new(p, strlen(p), have_options ? options : flags, err);
        } else {
            re = matcher_regex_new(regex_arg->value.v_utf8.str, regex_arg->value.v_utf8.len,
                           have_options ? options : "", err);
        }
        if (!re)
            return false;
        matcher_node_add_new(and_node, MN_REGEX, path)->re = re;
    }
    return true;
}

/* $and / $or / $nor: a non-empty array of filter documents. */
static bool parse_logical(const char *op, const bson_iter_t *it, mnode_t *and_node, int depth,
                          bool top, dberr_t *err)
{
    if (bson_iter_type(it) != BSON_TYPE_ARRAY)
        return dberr_set(err, DBERR_BAD_VALUE, "%s must be an array", op);
    mkind_t kind = op[1] == 'a' ? MN_AND : op[1] == 'o' ? MN_OR : MN_NOR;
    mnode_t *n = matcher_node_add_new(and_node, kind, NULL);
    bson_iter_t child;
    if (!bson_iter_recurse(it, &child))
        return dberr_set(err, DBERR_BAD_VALUE, "%s must be an array", op);
    while (bson_iter_next(&child)) {
        if (bson_iter_type(&child) != BSON_TYPE_DOCUMENT)
            return dberr_set(err, DBERR_BAD_VALUE, "$or/$and/$nor entries need to be full objects");
        bson_t sub;
        if (!bsonview_iter(&child, &sub))
            return dberr_set(err, DBERR_BAD_VALUE, "$or/$and/$nor entries need to be full objects");
        mnode_t *clause = matcher_node_add_new(n, MN_AND, NULL);
        if (!matcher_parse_filter(&sub, clause, depth + 1, top, err))
            return false;
    }
    if (n->nkids == 0)
        return dberr_set(err, DBERR_BAD_VALUE, "$and/$or/$nor must be a nonempty array");
    return true;
}

/* While parsing: a $text here would be ANDed with the whole filter (top
 * level, or under $and only); matcher_new sets it. */
__thread bool matcher_parse_text_ok;

/* A whole filter document, its predicates added to `and_node`. */
bool matcher_parse_filter(const bson_t *filter, mnode_t *and_node, int depth, bool top,
                         dberr_t *err)
{
    bson_iter_t it;
    if (!matcher_iter_filter(filter, depth, &it, err))
        return false;
    while (bson_iter_next(&it)) {
        const char *key = bson_iter_key(&it);
        if (starts_dollar(key)) {
            if (strcmp(key, "$and") == 0 || strcmp(key, "$or") == 0 || strcmp(key, "$nor") == 0) {
                bool text_ok = matcher_parse_text_ok; /* $text stays allowed through $and only */
                matcher_parse_text_ok = text_ok && key[1] == 'a';
                bool ok = parse_logical(key, &it, and_node, depth, top, err);
                matcher_parse_text_ok = text_ok;
                if (!ok)
                    return false;
            } else if (strcmp(key, "$expr") == 0) {
                if (!top)
                    return dberr_set(err, DBERR_BAD_VALUE,
                                     "$expr can only be applied to the top-level document");
                mnode_t *n = matcher_node_add_new(and_node, MN_EXPR, NULL);
                n->expr = expr_new(&it, err);
                if (!n->expr)
                    return false;
            } else if (strcmp(key, "$text") == 0) {
                if (!top || (depth != 0 && !matcher_parse_text_ok))
                    return dberr_set(err, DBERR_NOT_IMPLEMENTED,
                                     "atomdb supports $text only at the top level of a filter "
                                     "or inside top-level $and (not inside $or, $nor or "
                                     "$elemMatch)");
                mnode_t *n = matcher_node_add_new(and_node, MN_TEXT, NULL);
                n->text = fts_query_new(bson_iter_value(&it), err);
                if (!n->text)
                    return false;
            } else if (strcmp(key, "$jsonSchema") == 0) {
                bson_t spec;
                if (!BSON_ITER_HOLDS_DOCUMENT(&it) || !bsonview_iter(&it, &spec))
                    return dberr_set(err, DBERR_TYPE_MISMATCH, "$jsonSchema must be an object");
                mnode_t *n = matcher_node_add_new(and_node, MN_SCHEMA, NULL);
                if (!(n->schema = jsonschema_new(&spec, depth + 1, err)))
                    return false;
            } else if (strcmp(key, "$comment") == 0) {
                continue;
            } else if (strcmp(key, "$alwaysTrue") == 0 || strcmp(key, "$alwaysFalse") == 0) {
                matcher_node_add_new(and_node, key[7] == 'T' ? MN_TRUE : MN_FALSE, NULL);
            } else if (is_dbref_field(key)) {
                /* as mongod's parseDBRef: equality on the field itself
                 * ($id under the collation, $ref and $db bytewise) */
                mnode_t *n = matcher_node_add_new(and_node, MN_EQ, key);
                matcher_node_set_arg(n, bson_iter_value(&it));
                n->bytewise = strcmp(key, "$id") != 0;
            } else if (is_unsupported_field_op(key)) {
                return dberr_set(err, DBERR_BAD_VALUE, "%s is not supported by atomdb", key);
            } else {
                return dberr_set(err, DBERR_BAD_VALUE, "unknown top level operator: %s", key);
            }
            continue;
        }
        if (matcher_is_operator_doc(&it)) {
            if (!parse_ops(key, &it, and_node, depth + 1, err))
                return false;
        } else if (bson_iter_type(&it) == BSON_TYPE_REGEX) {
            mnode_t *n = matcher_node_add_new(and_node, MN_REGEX, key);
            n->re = matcher_regex_from_value(bson_iter_value(&it), err);
            if (!n->re)
                return false;
        } else {
            matcher_node_set_arg(matcher_node_add_new(and_node, MN_EQ, key), bson_iter_value(&it));
        }
    }
    return true;
}
