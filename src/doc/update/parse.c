/* update/parse: reads an update — operator document, replacement or
 * pipeline — into the updater, building the path tree of an operator update
 * the way mongod's UpdateObjectNode::parseAndMerge does. */
#include "doc/update/update-private.h"
#include "doc/collation.h"

#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "doc/path.h"
#include "util/shellfmt.h"
#include "util/table.h"
#include "util/vec.h"

/* ---- paths and names ---- */

bool update_is_array_filter_ident(const char *s)
{
    size_t n = strlen(s);
    return n >= 3 && s[0] == '$' && s[1] == '[' && s[n - 1] == ']';
}

/* True when `s` is all digits with no leading zero. */
static bool is_plain_number(const char *s, size_t len)
{
    if (len == 0 || (s[0] == '0' && len > 1))
        return false;
    for (size_t i = 0; i < len; i++)
        if (s[i] < '0' || s[i] > '9')
            return false;
    return true;
}

int update_cmp_field_names(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la != lb && is_plain_number(a, la) && is_plain_number(b, lb))
        return la < lb ? -1 : 1;
    return strcmp(a, b);
}

bool update_err_spec(dberr_t *err, int code, const char *prefix, const char *name,
                     const bson_value_t *v, const char *suffix)
{
    bson_string_t *s = bson_string_new(prefix);
    shellfmt_append_element(s, name, v);
    bson_string_append(s, suffix);
    dberr_set(err, code, "%s", s->str);
    bson_string_free(s, true);
    return false;
}

bool update_integer_arg(const bson_value_t *v, int64_t *out)
{
    return num_to_int64_whole(v, out);
}

/* ---- the tree ---- */

static unode_t *unode_new(unode_kind_t kind)
{
    unode_t *n = bson_malloc0(sizeof *n);
    n->kind = kind;
    return n;
}

void unode_free(unode_t *n)
{
    if (!n)
        return;
    for (size_t i = 0; i < n->nkids; i++) {
        bson_free(n->kids[i].name);
        unode_free(n->kids[i].node);
    }
    bson_free(n->kids);
    unode_free(n->positional);
    bson_free(n->path);
    bson_free(n->spec_name);
    if (n->kind == UN_LEAF) {
        if (n->op && n->op->free_arg)
            n->op->free_arg(n);
        bson_value_destroy(&n->arg);
    }
    bson_free(n);
}

static unode_t *unode_get(const unode_t *n, const char *name)
{
    if (n->kind == UN_OBJECT && strcmp(name, "$") == 0)
        return n->positional;
    for (size_t i = 0; i < n->nkids; i++)
        if (strcmp(n->kids[i].name, name) == 0)
            return n->kids[i].node;
    return NULL;
}

static void unode_set(unode_t *n, const char *name, unode_t *child)
{
    if (n->kind == UN_OBJECT && strcmp(name, "$") == 0) {
        n->positional = child;
        return;
    }
    size_t at = 0;
    while (at < n->nkids && update_cmp_field_names(n->kids[at].name, name) < 0)
        at++;
    VEC_RESERVE_ONE(n->kids, n->nkids, n->cap, 4);
    memmove(n->kids + at + 1, n->kids + at, (n->nkids - at) * sizeof *n->kids);
    n->kids[at].name = bson_strdup(name);
    n->kids[at].node = child;
    n->nkids++;
}

/* Builds the leaf for one operator entry (the modifier's init()). */
static unode_t *make_leaf(const update_op_t *op, const char *spec_name, const char *path,
                          const bson_value_t *v, dberr_t *err)
{
    unode_t *leaf = unode_new(UN_LEAF);
    leaf->op = op;
    leaf->path = bson_strdup(path);
    leaf->spec_name = bson_strdup(spec_name);
    bson_value_copy(v, &leaf->arg);
    if (op->parse && !op->parse(leaf, err)) {
        unode_free(leaf);
        return NULL;
    }
    return leaf;
}

/* Identifier of "$[id]" into `out` (owned), validating it
 * (parseArrayFilterIdentifier). */
static bool parse_filter_ident(update_parse_t *p, const char *comp, size_t pos, const char *path,
                               char **out, dberr_t *err)
{
    if (pos == 0)
        return dberr_set(
            err, DBERR_BAD_VALUE,
            "Cannot have array filter identifier (i.e. '$[<id>]') element in the first "
            "position in path '%s'",
            path);
    char *id = bson_strndup(comp + 2, strlen(comp) - 3);
    if (*id) {
        const afilter_t *f = afilter_find(p->u, id);
        if (!f) {
            dberr_set(err, DBERR_BAD_VALUE,
                      "No array filter found for identifier '%s' in path '%s'", id, path);
            bson_free(id);
            return false;
        }
        p->used[f - p->u->filters] = true;
    }
    *out = id;
    return true;
}

/* The name of tree child for path component `comp` at `pos` into `out`. */
static bool child_name(update_parse_t *p, char **parts, size_t pos, const char *path, char **out,
                       dberr_t *err)
{
    *out = NULL;
    if (update_is_array_filter_ident(parts[pos]))
        return parse_filter_ident(p, parts[pos], pos, path, out, err);
    *out = bson_strdup(parts[pos]);
    return true;
}

/* Checks the components of `path`: none empty, not too deep, at most one
 * positional `$` and not first. */
static bool check_path(char **parts, size_t n, const char *path, dberr_t *err)
{
    size_t npos = 0, first_pos = 0;
    for (size_t i = 0; i < n; i++) {
        if (!*parts[i])
            return dberr_set(err, DBERR_EMPTY_FIELD_NAME,
                             "The update path '%s' contains an empty field name, which is not "
                             "allowed.",
                             path);
        if (strcmp(parts[i], "$") == 0 && npos++ == 0)
            first_pos = i;
    }
    if (n > UPD_MAX_DEPTH)
        return dberr_set(err, DBERR_BAD_VALUE, "The update path '%s' is too deep", path);
    if (npos > 1)
        return dberr_set(err, DBERR_BAD_VALUE,
                         "Too many positional (i.e. '$') elements found in path '%s'", path);
    if (npos == 1 && first_pos == 0)
        return dberr_set(err, DBERR_BAD_VALUE,
                         "Cannot have positional (i.e. '$') element in the first position in "
                         "path '%s'",
                         path);
    return true;
}

bool update_merge_path(update_parse_t *p, const update_op_t *op, const char *spec_name,
                       const char *path, const bson_value_t *v, dberr_t *err)
{
    size_t n = 0;
    char **parts = NULL;
    unode_t *leaf = NULL;
    char *name = NULL;
    bool ok = false;

    if (!*path) {
        dberr_set(err, DBERR_EMPTY_FIELD_NAME, "An empty update path is not valid.");
        goto cleanup;
    }
    parts = path_split(path, &n);
    if (!check_path(parts, n, path, err) || !(leaf = make_leaf(op, spec_name, path, v, err)))
        goto cleanup;
    unode_t *cur = p->u->root;
    for (size_t i = 0; i + 1 < n; i++) {
        bson_free(name);
        if (!child_name(p, parts, i, path, &name, err))
            goto cleanup;
        unode_t *child = unode_get(cur, name);
        unode_kind_t want = update_is_array_filter_ident(parts[i + 1]) ? UN_ARRAY : UN_OBJECT;
        if (child && child->kind != want) {
            bson_string_t *s = bson_string_new(NULL);
            for (size_t j = 0; j <= i; j++) {
                if (j)
                    bson_string_append_c(s, '.');
                bson_string_append(s, parts[j]);
            }
            dberr_set(err, DBERR_CONFLICTING_UPDATE_OPERATORS,
                      "Updating the path '%s' would create a conflict at '%s'", path, s->str);
            bson_string_free(s, true);
            goto cleanup;
        }
        if (!child) {
            child = unode_new(want);
            unode_set(cur, name, child);
        }
        cur = child;
    }
    bson_free(name);
    if (!child_name(p, parts, n - 1, path, &name, err))
        goto cleanup;
    if (unode_get(cur, name)) {
        dberr_set(err, DBERR_CONFLICTING_UPDATE_OPERATORS,
                  "Updating the path '%s' would create a conflict at '%s'", path, path);
        goto cleanup;
    }
    if ((op->flags & UPDATE_OP_CREATES) && !(op->flags & UPDATE_OP_INSERT_ONLY) &&
        parts[0][0] == '$' && !p->u->dollar_path) {
        /* refused when applied to a stored document; an upsert's insert takes it */
        p->u->dollar_path = bson_strdup(path);
        p->u->dollar_field = bson_strdup(parts[0]);
    }
    unode_set(cur, name, leaf);
    leaf = NULL;
    ok = true;

cleanup:
    bson_free(name);
    unode_free(leaf);
    path_free(parts, n);
    return ok;
}

/* ---- operator documents ---- */

static const update_op_t *const update_op_families[] = {update_field_ops, update_array_ops};

/* The operator `name`; NULL with mongod's FailedToParse for an unknown one. */
static const update_op_t *find_op(const char *name, dberr_t *err)
{
    const update_op_t *op =
        table_find((const void *const *)update_op_families,
                   sizeof update_op_families / sizeof update_op_families[0], sizeof(update_op_t),
                   name);
    if (!op)
        dberr_set(err, DBERR_FAILED_TO_PARSE,
                  "Unknown modifier: %s. Expected a valid update modifier or pipeline-style "
                  "update specified as an array",
                  name);
    return op;
}

/* The operator document `{$op: {field: v, ...}}` of one modifier. */
static bool parse_modifier(update_parse_t *p, bson_iter_t *it, dberr_t *err)
{
    const char *opname = bson_iter_key(it);
    const update_op_t *op = find_op(opname, err);
    if (!op)
        return false;
    if (!BSON_ITER_HOLDS_DOCUMENT(it)) {
        bson_string_t *s = bson_string_new(NULL);
        bson_string_append_printf(s,
                                  "Modifiers operate on fields but we found type %s instead. For "
                                  "example: {$mod: {<field>: ...}} not {",
                                  shellfmt_type_name(bson_iter_type(it)));
        shellfmt_append_element(s, opname, bson_iter_value(it));
        bson_string_append(s, "}");
        dberr_set(err, DBERR_FAILED_TO_PARSE, "%s", s->str);
        bson_string_free(s, true);
        return false;
    }
    bson_iter_t fi;
    bson_iter_recurse(it, &fi);
    while (bson_iter_next(&fi)) {
        const char *field = bson_iter_key(&fi);
        const bson_value_t *v = bson_iter_value(&fi);
        bool ok = op->merge ? op->merge(p, op, field, v, err)
                            : update_merge_path(p, op, field, field, v, err);
        if (!ok)
            return false;
    }
    return true;
}

/* Frees what an operator update (UPDATER_OPERATORS) holds: the path tree,
 * the '$'-prefixed path it would create and the array filters. */
static void updater_free_operators(updater_t *u)
{
    unode_free(u->root);
    bson_free(u->dollar_path);
    bson_free(u->dollar_field);
    afilter_free_all(u);
}

static bool parse_operators(updater_t *u, const bson_t *spec, dberr_t *err)
{
    bson_iter_t it;
    update_parse_t p = {u, bson_malloc0((u->nfilters ? u->nfilters : 1) * sizeof(bool))};
    bool ok = false;

    u->root = unode_new(UN_OBJECT);
    bson_iter_init(&it, spec);
    while (bson_iter_next(&it))
        if (!parse_modifier(&p, &it, err))
            goto cleanup;
    for (size_t i = 0; i < u->nfilters; i++) {
        if (!p.used[i]) {
            bson_string_t *s = bson_string_new(NULL);
            shellfmt_append_doc(s, spec);
            dberr_set(err, DBERR_FAILED_TO_PARSE,
                      "The array filter for identifier '%s' was not used in the update %s",
                      u->filters[i].id, s->str);
            bson_string_free(s, true);
            goto cleanup;
        }
    }
    ok = true;

cleanup:
    bson_free(p.used);
    return ok;
}

/* ---- the updater ---- */

void updater_destroy(updater_t *u)
{
    if (!u)
        return;
    updater_free_operators(u);
    bson_destroy(u->replacement);
    pipeline_destroy(u->pipeline);
    collation_destroy(u->coll);
    bson_free(u);
}

/* True when `n` or a node below it has a positional `$` child. */
static bool unode_has_positional(const unode_t *n)
{
    if (!n || n->kind == UN_LEAF)
        return false;
    if (n->positional)
        return true;
    for (size_t i = 0; i < n->nkids; i++)
        if (unode_has_positional(n->kids[i].node))
            return true;
    return false;
}

updater_t *updater_new(const bson_iter_t *spec, const bson_t *array_filters, dberr_t *err)
{
    return updater_new_let(spec, array_filters, NULL, err);
}

updater_t *updater_new_let(const bson_iter_t *spec, const bson_t *array_filters, const bson_t *let,
                           dberr_t *err)
{
    updater_t *u = bson_malloc0(sizeof *u);
    bson_t doc;
    uint32_t len;
    const uint8_t *data;

    if (BSON_ITER_HOLDS_ARRAY(spec)) {
        u->kind = UPDATER_PIPELINE;
        if (array_filters && bson_count_keys(array_filters) > 0) {
            dberr_set(err, DBERR_FAILED_TO_PARSE,
                      "arrayFilters may not be specified for pipeline-syle updates");
            goto fail;
        }
        if (!(u->pipeline = pipeline_new(spec, PIPELINE_UPDATE, let, err)))
            goto fail;
        return u;
    }
    if (!BSON_ITER_HOLDS_DOCUMENT(spec)) {
        dberr_set(err, DBERR_FAILED_TO_PARSE,
                  "Update argument must be either an object or an array");
        goto fail;
    }
    bson_iter_document(spec, &len, &data);
    if (!bson_init_static(&doc, data, len)) {
        dberr_set(err, DBERR_INVALID_BSON, "invalid update document");
        goto fail;
    }
    if (update_depth_exceeds(data, len, 1, UPD_MAX_INPUT_DEPTH)) {
        dberr_set(err, DBERR_OVERFLOW, "Document exceeds maximum nesting depth of %d",
                  UPD_MAX_STORED_DEPTH);
        goto fail;
    }
    bson_iter_t first;
    if (bson_iter_init(&first, &doc) && bson_iter_next(&first) && bson_iter_key(&first)[0] == '$') {
        u->kind = UPDATER_OPERATORS;
        if ((array_filters && !afilter_parse_all(u, array_filters, err)) ||
            !parse_operators(u, &doc, err))
            goto fail;
        u->positional = unode_has_positional(u->root);
        update_inplace_plan(u);
        return u;
    }
    u->kind = UPDATER_REPLACEMENT;
    if (!update_check_top_level(&doc, false, err))
        goto fail;
    u->replacement = bson_copy(&doc);
    return u;

fail:
    updater_destroy(u);
    return NULL;
}

updater_kind_t updater_kind(const updater_t *u)
{
    return u->kind;
}

bool updater_is_positional(const updater_t *u)
{
    return u->positional;
}
