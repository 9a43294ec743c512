/* update/apply: applies an updater to a document — an operator update walks
 * the parsed path tree over the document tree (mongod's UpdateNode::apply),
 * a replacement or pipeline update builds the new document — then checks
 * what would be stored (_id first and unchanged, depth, field names). */
#include "doc/update/update-private.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "doc/compare.h"
#include "util/shellfmt.h"
#include "util/vec.h"

/* ---- path stacks ---- */

void pstack_push(pstack_t *ps, const char *s)
{
    VEC_RESERVE_ONE(ps->v, ps->n, ps->cap, 16);
    ps->v[ps->n].s = s;
    ps->n++;
}

void pstack_push_index(pstack_t *ps, size_t idx)
{
    pstack_push(ps, NULL);
    snprintf(ps->v[ps->n - 1].num, sizeof ps->v[ps->n - 1].num, "%zu", idx);
}

const char *pstack_at(const pstack_t *ps, size_t i)
{
    return ps->v[i].s ? ps->v[i].s : ps->v[i].num;
}

void pstack_join(bson_string_t *s, const pstack_t *ps, size_t from)
{
    for (size_t i = from; i < ps->n; i++) {
        if (i > from)
            bson_string_append_c(s, '.');
        bson_string_append(s, pstack_at(ps, i));
    }
}

/* Appends taken, then create, joined by '.'. */
static void append_full_path(bson_string_t *s, const update_apply_t *c)
{
    pstack_join(s, &c->taken, 0);
    if (c->create.n) {
        if (c->taken.n)
            bson_string_append_c(s, '.');
        pstack_join(s, &c->create, 0);
    }
}

/* ---- helpers for the operators ---- */

bool update_fail(update_apply_t *c, int code, bson_string_t *s)
{
    dberr_set(c->err, code, "%s", s->str);
    bson_string_free(s, true);
    return false;
}

bson_string_t *update_path_msg(const update_apply_t *c, const char *before, const char *fmt, ...)
{
    va_list ap;
    bson_string_t *s = bson_string_new(before);
    pstack_join(s, &c->taken, 0);
    va_start(ap, fmt);
    char *after = bson_strdupv_printf(fmt, ap);
    va_end(ap);
    bson_string_append(s, after);
    bson_free(after);
    return s;
}

void update_note_id_path(update_apply_t *c)
{
    if (c->id_path)
        return;
    const char *first =
        c->taken.n ? pstack_at(&c->taken, 0) : (c->create.n ? pstack_at(&c->create, 0) : "");
    if (strcmp(first, "_id") != 0)
        return;
    bson_string_t *s = bson_string_new(NULL);
    append_full_path(s, c);
    c->id_path = bson_string_free(s, false);
}

void update_append_id(update_apply_t *c, bson_string_t *s, bool no_id_text)
{
    doctree_t *id = doctree_find(c->root, "_id");
    if (id)
        doctree_append_element(s, "_id", id);
    else if (no_id_text)
        bson_string_append(s, "no id");
}

bool update_apply_noop(update_apply_t *c, const unode_t *leaf, doctree_t *e)
{
    return true;
}

bool update_create_path(update_apply_t *c, doctree_t *element, doctree_t *value)
{
    const char *first = pstack_at(&c->create, 0);
    char buf[24];
    size_t idx = 0;
    if (element->type != BSON_TYPE_DOCUMENT &&
        !(element->type == BSON_TYPE_ARRAY && doctree_parse_index(first, &idx))) {
        bson_string_t *s = bson_string_new(NULL);
        bson_string_append_printf(s, "Cannot create field '%s' in element {", first);
        doctree_append_element(s, doctree_field_name(element, buf, sizeof buf), element);
        bson_string_append(s, "}");
        doctree_free(value);
        return update_fail(c, DBERR_PATH_NOT_VIABLE, s);
    }
    doctree_t *cur = element;
    size_t i = 0;
    if (element->type == BSON_TYPE_ARRAY) {
        if (idx > element->nkids && idx - element->nkids > UPD_MAX_PADDING) {
            doctree_free(value);
            return dberr_set(c->err, DBERR_BAD_VALUE, "can't backfill more than %d elements",
                             UPD_MAX_PADDING);
        }
        while (element->nkids < idx)
            doctree_append(element, doctree_new(NULL));
        if (c->create.n == 1) {
            bson_free(value->name);
            value->name = NULL;
            doctree_append(element, value);
            return true;
        }
        doctree_t *obj = doctree_new(NULL);
        obj->type = BSON_TYPE_DOCUMENT;
        doctree_append(element, obj);
        cur = obj;
        i = 1;
    }
    for (; i + 1 < c->create.n; i++) {
        doctree_t *obj = doctree_new(pstack_at(&c->create, i));
        obj->type = BSON_TYPE_DOCUMENT;
        doctree_append(cur, obj);
        cur = obj;
    }
    bson_free(value->name);
    value->name = bson_strdup(pstack_at(&c->create, c->create.n - 1));
    doctree_append(cur, value);
    return true;
}

bool update_create(update_apply_t *c, doctree_t *element, doctree_t *value)
{
    update_note_id_path(c);
    return update_create_path(c, element, value);
}

bool update_check_viability(update_apply_t *c, doctree_t *element)
{
    size_t idx;
    if (element->type == BSON_TYPE_DOCUMENT ||
        (element->type == BSON_TYPE_ARRAY && doctree_parse_index(pstack_at(&c->create, 0), &idx)))
        return true;
    bson_string_t *s = bson_string_new(NULL);
    bson_string_append_printf(s, "Cannot use the part (%s) of (", pstack_at(&c->create, 0));
    pstack_join(s, &c->taken, 0);
    bson_string_append_c(s, '.');
    pstack_join(s, &c->create, 0);
    bson_string_append(s, ") to traverse the element ({");
    char buf[24];
    doctree_append_element(s, doctree_field_name(element, buf, sizeof buf), element);
    bson_string_append(s, "})");
    return update_fail(c, DBERR_PATH_NOT_VIABLE, s);
}

/* ---- walking the update tree ---- */

static bool apply_nodes(update_apply_t *c, unode_t **nodes, size_t k, doctree_t *element);

/* ModifierNode::apply: `element` is the target when c->create is empty, else
 * the deepest existing ancestor. */
static bool apply_leaf(update_apply_t *c, const unode_t *leaf, doctree_t *element)
{
    if ((leaf->op->flags & UPDATE_OP_INSERT_ONLY) && !c->is_insert)
        return true;
    if (c->create.n == 0)
        return leaf->op->apply_existing(c, leaf, element);
    return leaf->op->apply_missing(c, leaf, element);
}

static bool conflict_error(update_apply_t *c, const char *field)
{
    bson_string_t *s = bson_string_new(NULL);
    append_full_path(s, c);
    if (s->len)
        bson_string_append_c(s, '.');
    bson_string_append(s, field);
    dberr_set(c->err, DBERR_CONFLICTING_UPDATE_OPERATORS, "Update created a conflict at '%s'",
              s->str);
    bson_string_free(s, true);
    return false;
}

/* Merged nodes may only be internal nodes of one kind. */
static bool check_mergeable(update_apply_t *c, unode_t **nodes, size_t k, const char *field)
{
    for (size_t i = 0; k > 1 && i < k; i++)
        if (nodes[i]->kind == UN_LEAF || nodes[i]->kind != nodes[0]->kind)
            return conflict_error(c, field);
    return true;
}

/* After a child was applied: follow what now exists of the path below
 * *element (taken components it added, or a path it created). */
static void follow_path(update_apply_t *c, size_t taken_before, doctree_t **element)
{
    if (c->taken.n > taken_before) {
        for (size_t i = taken_before; i < c->taken.n; i++) {
            doctree_t *next = doctree_child(*element, pstack_at(&c->taken, i));
            if (!next)
                break;
            *element = next;
        }
        return;
    }
    if (c->create.n == 0)
        return;
    doctree_t *cur = *element;
    if (!doctree_child(cur, pstack_at(&c->create, 0)))
        return;
    /* The path was fully created: move it from create to taken. */
    for (size_t i = 0; i < c->create.n; i++) {
        doctree_t *step = doctree_child(cur, pstack_at(&c->create, i));
        if (!step)
            break;
        cur = step;
        pstack_push(&c->taken, c->create.v[i].s);
        if (!c->create.v[i].s)
            memcpy(c->taken.v[c->taken.n - 1].num, c->create.v[i].num, sizeof c->create.v[i].num);
    }
    c->create.n = 0;
    *element = cur;
}

/* applyChild: applies the merged `nodes` to the child `field` of *element. */
static bool apply_child(update_apply_t *c, unode_t **nodes, size_t k, const char *field,
                        doctree_t **element)
{
    size_t taken_before = c->taken.n;
    doctree_t *child = NULL;
    if (!check_mergeable(c, nodes, k, field))
        return false;
    if (c->create.n == 0)
        child = doctree_child(*element, field);
    if (child) {
        pstack_push(&c->taken, field);
    } else {
        child = *element;
        pstack_push(&c->create, field);
    }
    bool ok = apply_nodes(c, nodes, k, child);
    if (c->create.n > 0)
        c->create.n--;
    else
        c->taken.n--;
    if (ok)
        follow_path(c, taken_before, element);
    return ok;
}

/* The smallest next child name among the merged nodes, or NULL. */
static const char *next_name(unode_t **nodes, size_t k, const size_t *cursor)
{
    const char *name = NULL;
    for (size_t i = 0; i < k; i++) {
        if (cursor[i] < nodes[i]->nkids) {
            const char *n = nodes[i]->kids[cursor[i]].name;
            if (!name || update_cmp_field_names(n, name) < 0)
                name = n;
        }
    }
    return name;
}

/* Applies merged object nodes (UpdateObjectNode::apply). */
static bool apply_object(update_apply_t *c, unode_t **nodes, size_t k, doctree_t *element)
{
    unode_t *posbuf[8];
    unode_t **pos = k <= 8 ? posbuf : bson_malloc(k * sizeof *pos);
    size_t npos = 0;
    size_t *cursor = bson_malloc0(k * sizeof *cursor);
    unode_t **group = bson_malloc((k + k) * sizeof *group);
    bool ok = true;

    for (size_t i = 0; i < k; i++)
        if (nodes[i]->positional)
            pos[npos++] = nodes[i]->positional;
    if (npos > 0 && !c->matched) {
        ok = dberr_set(c->err, DBERR_BAD_VALUE,
                       "The positional operator did not find the match needed from the query.");
        goto cleanup;
    }
    bool positional_pending = npos > 0;
    for (;;) {
        const char *name = next_name(nodes, k, cursor);
        if (positional_pending && (!name || update_cmp_field_names(c->matched, name) < 0)) {
            positional_pending = false;
            if (!(ok = apply_child(c, pos, npos, c->matched, &element)))
                goto cleanup;
            continue;
        }
        if (!name)
            break;
        size_t g = 0;
        for (size_t i = 0; i < k; i++) {
            if (cursor[i] < nodes[i]->nkids && strcmp(nodes[i]->kids[cursor[i]].name, name) == 0) {
                group[g++] = nodes[i]->kids[cursor[i]].node;
                cursor[i]++;
            }
        }
        if (positional_pending && strcmp(c->matched, name) == 0) {
            positional_pending = false;
            for (size_t i = 0; i < npos; i++)
                group[g++] = pos[i];
        }
        if (!(ok = apply_child(c, group, g, name, &element)))
            goto cleanup;
    }

cleanup:
    if (pos != posbuf)
        bson_free(pos);
    bson_free(cursor);
    bson_free(group);
    return ok;
}

/* Checks that array updates ($[] and $[id]) have an existing array. */
static bool check_array_target(update_apply_t *c, doctree_t *element)
{
    bson_string_t *s;
    if (c->create.n > 0) {
        s = bson_string_new("The path '");
        append_full_path(s, c);
        bson_string_append(s, "' must exist in the document in order to apply array updates.");
        return update_fail(c, DBERR_BAD_VALUE, s);
    }
    if (element->type != BSON_TYPE_ARRAY) {
        char buf[24];
        s = bson_string_new("Cannot apply array updates to non-array element ");
        doctree_append_element(s, doctree_field_name(element, buf, sizeof buf), element);
        return update_fail(c, DBERR_BAD_VALUE, s);
    }
    return true;
}

/* Applies merged array nodes ($[] and $[id], UpdateArrayNode::apply). */
static bool apply_array(update_apply_t *c, unode_t **nodes, size_t k, doctree_t *element)
{
    if (!check_array_target(c, element))
        return false;
    size_t total = 0;
    for (size_t i = 0; i < k; i++)
        total += nodes[i]->nkids;
    size_t n = element->nkids;
    /* Decide every element's updates before applying any (as mongod does). */
    unode_t ***match = bson_malloc0((n ? n : 1) * sizeof *match);
    size_t *nmatch = bson_malloc0((n ? n : 1) * sizeof *nmatch);
    bool ok = true;
    for (size_t e = 0; e < n; e++) {
        match[e] = bson_malloc((total ? total : 1) * sizeof **match);
        for (size_t i = 0; i < k; i++) {
            for (size_t j = 0; j < nodes[i]->nkids; j++) {
                const char *id = nodes[i]->kids[j].name;
                const afilter_t *f = *id ? afilter_find(c->u, id) : NULL;
                if (!*id || (f && afilter_matches(f, element->kids[e])))
                    match[e][nmatch[e]++] = nodes[i]->kids[j].node;
            }
        }
    }
    for (size_t e = 0; e < n && ok; e++) {
        if (nmatch[e] == 0)
            continue;
        char buf[24];
        snprintf(buf, sizeof buf, "%zu", e);
        if (!(ok = check_mergeable(c, match[e], nmatch[e], buf)))
            break;
        pstack_push_index(&c->taken, e);
        ok = apply_nodes(c, match[e], nmatch[e], element->kids[e]);
        c->create.n = 0;
        c->taken.n--;
    }
    for (size_t e = 0; e < n; e++)
        bson_free(match[e]);
    bson_free(match);
    bson_free(nmatch);
    return ok;
}

static bool apply_nodes(update_apply_t *c, unode_t **nodes, size_t k, doctree_t *element)
{
    switch (nodes[0]->kind) {
    case UN_LEAF:
        return apply_leaf(c, nodes[0], element);
    case UN_OBJECT:
        return apply_object(c, nodes, k, element);
    case UN_ARRAY:
        return apply_array(c, nodes, k, element);
    }
    return false;
}

/* ---- finishing: _id first, immutability, storage checks ---- */

static bool id_value(const bson_t *doc, bson_value_t *out)
{
    bson_iter_t it;
    if (bson_iter_init_find(&it, doc, "_id")) {
        *out = *bson_iter_value(&it);
        return true;
    }
    return false;
}

/* Writes `root` to `out` with `_id` first. */
static void write_id_first(bson_t *out, const doctree_t *root)
{
    doctree_t *id = doctree_find(root, "_id");
    if (id)
        doctree_write(out, "_id", id);
    for (size_t i = 0; i < root->nkids; i++)
        if (root->kids[i] != id)
            doctree_write(out, root->kids[i]->name, root->kids[i]);
}

bool update_depth_exceeds(const uint8_t *data, uint32_t len, int level, int limit)
{
    bson_t b;
    bson_iter_t it;
    if (!bson_init_static(&b, data, len) || !bson_iter_init(&it, &b))
        return false;
    while (bson_iter_next(&it)) {
        if (BSON_ITER_HOLDS_DOCUMENT(&it) || BSON_ITER_HOLDS_ARRAY(&it)) {
            uint32_t sublen;
            const uint8_t *sub;
            if (level + 1 > limit)
                return true;
            if (BSON_ITER_HOLDS_DOCUMENT(&it))
                bson_iter_document(&it, &sublen, &sub);
            else
                bson_iter_array(&it, &sublen, &sub);
            if (update_depth_exceeds(sub, sublen, level + 1, limit))
                return true;
        }
    }
    return false;
}

bool update_check_top_level(const bson_t *doc, bool allow_dollar, dberr_t *err)
{
    bson_iter_t it;
    if (!bson_iter_init(&it, doc))
        return dberr_set(err, DBERR_INVALID_BSON, "invalid replacement document");
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (k[0] == '$' && !allow_dollar)
            return dberr_set(
                err, DBERR_DOLLAR_PREFIXED_FIELD_NAME,
                "The dollar ($) prefixed field '%s' in '%s' is not allowed in the context of "
                "an update's replacement document. Consider using an aggregation pipeline "
                "with $replaceWith.",
                k, k);
        if (strcmp(k, "_id") == 0) {
            bson_type_t t = bson_iter_type(&it);
            if (t == BSON_TYPE_ARRAY || t == BSON_TYPE_REGEX || t == BSON_TYPE_UNDEFINED)
                return dberr_set(err, DBERR_INVALID_ID_FIELD,
                                 "The '_id' value cannot be of type %s", shellfmt_type_name(t));
        }
    }
    return true;
}

/* Checks a document about to be stored: nesting depth, then its top level. */
static bool check_new_doc(const bson_t *doc, bool allow_dollar, dberr_t *err)
{
    if (update_depth_exceeds(bson_get_data(doc), doc->len, 1, UPD_MAX_STORED_DEPTH))
        return dberr_set(err, DBERR_OVERFLOW, "Document exceeds maximum nesting depth of %d",
                         UPD_MAX_STORED_DEPTH);
    return update_check_top_level(doc, allow_dollar, err);
}

static int64_t wall_ms(void)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_REALTIME, &ts) == 0)
        return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
    return (int64_t)time(NULL) * 1000;
}

/* The new document must keep the old `_id` (ImmutableField 66). */
static bool check_id_kept(const update_apply_t *c, const bson_t *old_doc, dberr_t *err)
{
    bson_value_t old_id;
    /* every change under _id records its path first: none, nothing to check */
    if ((!c->id_path && !c->id_by_rename) || !id_value(old_doc, &old_id))
        return true;
    doctree_t *nid = doctree_find(c->root, "_id");
    if (nid && doctree_binary_equal(nid, &old_id))
        return true;
    if (c->id_by_rename && !c->id_path)
        return dberr_set(err, DBERR_IMMUTABLE_FIELD,
                         "Unsetting the path '_id' using $rename would modify the immutable field "
                         "'_id'");
    return dberr_set(err, DBERR_IMMUTABLE_FIELD,
                     "Performing an update on the path '%s' would modify the immutable field "
                     "'_id'",
                     c->id_path ? c->id_path : "_id");
}

static bool apply_operators(const updater_t *u, const bson_t *old_doc, bool is_insert,
                            int positional, bson_t *out, dberr_t *err)
{
    update_apply_t c;
    bool ok = false;
    memset(&c, 0, sizeof c);
    c.u = u;
    c.is_insert = is_insert;
    c.err = err;
    c.now_ms = wall_ms();
    if (positional >= 0) {
        snprintf(c.matched_buf, sizeof c.matched_buf, "%d", positional);
        c.matched = c.matched_buf;
    }
    if (update_depth_exceeds(bson_get_data(old_doc), old_doc->len, 1, UPD_MAX_INPUT_DEPTH)) {
        dberr_set(err, DBERR_OVERFLOW, "Document exceeds maximum nesting depth of %d",
                  UPD_MAX_STORED_DEPTH);
        goto cleanup;
    }
    if (u->dollar_path && !is_insert) {
        /* as mongod 5.0+: an upsert's insert may create it, an update may not */
        dberr_set(err, DBERR_DOLLAR_PREFIXED_FIELD_NAME,
                  "The dollar ($) prefixed field '%s' in '%s' is not allowed in the context of an "
                  "update's replacement document. Consider using an aggregation pipeline with "
                  "$replaceWith.",
                  u->dollar_field, u->dollar_path);
        goto cleanup;
    }
    c.root = doctree_from_doc(old_doc);
    unode_t *root = u->root;
    if (!apply_nodes(&c, &root, 1, c.root) || !check_id_kept(&c, old_doc, err))
        goto cleanup;
    write_id_first(out, c.root);
    /* a stored '$'-prefixed field may stay (mongod validates what changed:
     * the paths an operator creates, checked above) */
    ok = check_new_doc(out, true, err);

cleanup:
    doctree_free(c.root);
    bson_free(c.taken.v);
    bson_free(c.create.v);
    bson_free(c.id_path);
    return ok;
}

/* Stores `repl` in place of `old_doc`, keeping the old `_id` first
 * (ObjectReplaceExecutor). */
static bool apply_replacement_doc(const bson_t *old_doc, const bson_t *repl, bool allow_dollar,
                                  bson_t *out, dberr_t *err)
{
    bson_value_t old_id, new_id;
    bool has_old = id_value(old_doc, &old_id);
    bool has_new = id_value(repl, &new_id);
    if (has_old && has_new && compare_values(&old_id, &new_id) != 0) {
        bson_string_t *s = bson_string_new("After applying the update, the (immutable) field '_id' "
                                           "was found to have been altered to _id: ");
        shellfmt_append_value(s, &new_id);
        dberr_set(err, DBERR_IMMUTABLE_FIELD, "%s", s->str);
        bson_string_free(s, true);
        return false;
    }
    if (has_new)
        bson_append_value(out, "_id", 3, &new_id);
    else if (has_old)
        bson_append_value(out, "_id", 3, &old_id);
    bson_iter_t it;
    bson_iter_init(&it, repl);
    while (bson_iter_next(&it))
        if (strcmp(bson_iter_key(&it), "_id") != 0)
            bson_append_value(out, bson_iter_key(&it), -1, bson_iter_value(&it));
    return check_new_doc(out, allow_dollar, err);
}

static bool apply_pipeline(const updater_t *u, const bson_t *old_doc, bson_t *out, dberr_t *err)
{
    doclist_t docs;
    bool ok = false;
    doclist_init(&docs);
    doclist_push(&docs, bson_copy(old_doc));
    if (!pipeline_run(u->pipeline, &docs, err))
        goto cleanup;
    if (docs.len != 1) {
        dberr_set(err, DBERR_BAD_VALUE,
                  "pipeline-style update must produce exactly one document, got %zu", docs.len);
        goto cleanup;
    }
    ok = apply_replacement_doc(old_doc, docs.docs[0], true, out, err);

cleanup:
    doclist_destroy(&docs);
    return ok;
}

bool updater_apply(const updater_t *u, const bson_t *old_doc, bool is_insert, int positional,
                   bson_t *out, bool *changed, dberr_t *err)
{
    bool ok = false;
    *changed = false;
    if (!u || !old_doc)
        return dberr_set(err, DBERR_INTERNAL_ERROR, "updater_apply: missing update or document");
    switch (u->kind) {
    case UPDATER_OPERATORS:
        ok = update_inplace_apply(u, old_doc, is_insert, out) ||
             apply_operators(u, old_doc, is_insert, positional, out, err);
        break;
    case UPDATER_REPLACEMENT:
        ok = apply_replacement_doc(old_doc, u->replacement, false, out, err);
        break;
    case UPDATER_PIPELINE:
        ok = apply_pipeline(u, old_doc, out, err);
        break;
    }
    if (!ok) {
        bson_reinit(out);
        return false;
    }
    *changed = out->len != old_doc->len ||
               memcmp(bson_get_data(out), bson_get_data(old_doc), out->len) != 0;
    return true;
}
