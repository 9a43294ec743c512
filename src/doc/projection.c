/* projection: find projections and the aggregation $project / $addFields
 * stages. A spec is parsed into a tree of path nodes (include, exclude,
 * computed, $slice, $elemMatch, positional) and applied per document. */
#include "doc/collation.h"
#include "doc/projection.h"

#include <string.h>
#include <sys/time.h>

#include "doc/expr.h"
#include "doc/fts.h"
#include "doc/matcher.h"
#include "doc/path.h"
#include "doc/projection-private.h"
#include "util/bsonview.h"
#include "util/strjoin.h"

typedef enum pn_kind {
    PN_TRUE,       /* include the field */
    PN_FALSE,      /* exclude the field */
    PN_TREE,       /* sub-projection of a document (or each document of an array) */
    PN_EXPR,       /* computed value */
    PN_SLICE,      /* find $slice */
    PN_ELEMMATCH,  /* find $elemMatch */
    PN_POSITIONAL, /* find "a.$" */
} pn_kind_t;

typedef struct pnode pnode_t;

struct pnode {
    char *name;
    pn_kind_t kind;
    pnode_t **kids; /* PN_TREE children, in spec order */
    size_t nkids;
    expr_t *expr;    /* PN_EXPR */
    bool has_skip;   /* PN_SLICE: [skip, limit] form */
    int32_t skip;    /* PN_SLICE */
    int32_t limit;   /* PN_SLICE */
    matcher_t *em;   /* PN_ELEMMATCH: {name: {$elemMatch: ...}} */
    bool computes;   /* this subtree holds PN_EXPR nodes */
    bool positional; /* this subtree holds the PN_POSITIONAL node */
    bool meta_text;  /* PN_EXPR {$meta: "textScore"} (expr is NULL) */
};

struct projection {
    pnode_t root;
    projection_policy_t policy;
    bool inclusion;  /* inclusion (true) or exclusion (false) projection */
    bool positional; /* holds "a.$" */
    bool empty;      /* {}: documents pass through unchanged */
    bool meta_text;  /* holds {$meta: "textScore"} */
    matcher_t *text; /* a reference to the filter whose $text gives textScore, or NULL */
    collation_t *coll; /* owned reference: how strings compare; NULL: simple */
};

/* ----------------------------------------------------------------- values */

/* An ordered list of output fields, so a computed field can replace an
 * included one in place. */
typedef struct flist {
    char **names;
    bson_value_t *vals; /* owned */
    size_t n, cap;
} flist_t;

static void flist_init(flist_t *l)
{
    memset(l, 0, sizeof *l);
}

static void flist_destroy(flist_t *l)
{
    for (size_t i = 0; i < l->n; i++) {
        bson_free(l->names[i]);
        bson_value_destroy(&l->vals[i]);
    }
    bson_free(l->names);
    bson_free(l->vals);
    flist_init(l);
}

/* Sets `name` to `v` (stolen): replaces an existing field in place or appends. */
static void flist_set(flist_t *l, const char *name, bson_value_t *v)
{
    for (size_t i = 0; i < l->n; i++)
        if (strcmp(l->names[i], name) == 0) {
            bson_value_destroy(&l->vals[i]);
            l->vals[i] = *v;
            return;
        }
    if (l->n == l->cap) {
        l->cap = l->cap ? l->cap * 2 : 8;
        l->names = bson_realloc(l->names, l->cap * sizeof *l->names);
        l->vals = bson_realloc(l->vals, l->cap * sizeof *l->vals);
    }
    l->names[l->n] = bson_strdup(name);
    l->vals[l->n++] = *v;
}

/* Appends the copied value of `it` under its key (no duplicate check). */
static void flist_add_iter(flist_t *l, const bson_iter_t *it)
{
    bson_value_t v;
    bson_value_copy(bson_iter_value((bson_iter_t *)it), &v);
    if (l->n == l->cap) {
        l->cap = l->cap ? l->cap * 2 : 8;
        l->names = bson_realloc(l->names, l->cap * sizeof *l->names);
        l->vals = bson_realloc(l->vals, l->cap * sizeof *l->vals);
    }
    l->names[l->n] = bson_strdup(bson_iter_key(it));
    l->vals[l->n++] = v;
}

static bool flist_has(const flist_t *l, const char *name)
{
    for (size_t i = 0; i < l->n; i++)
        if (strcmp(l->names[i], name) == 0)
            return true;
    return false;
}

static void flist_write(const flist_t *l, bson_t *out)
{
    for (size_t i = 0; i < l->n; i++)
        bson_append_value(out, l->names[i], -1, &l->vals[i]);
}

static void array_key(uint32_t i, char *buf, const char **key)
{
    bson_uint32_to_string(i, key, buf, 16);
}

/* ------------------------------------------------------------------ parse */

static void pnode_free(pnode_t *n)
{
    if (!n)
        return;
    for (size_t i = 0; i < n->nkids; i++) {
        pnode_free(n->kids[i]);
        bson_free(n->kids[i]);
    }
    bson_free(n->kids);
    bson_free(n->name);
    expr_destroy(n->expr);
    matcher_destroy(n->em);
}

static pnode_t *pnode_child(const pnode_t *n, const char *name, size_t len)
{
    for (size_t i = 0; i < n->nkids; i++)
        if (strlen(n->kids[i]->name) == len && memcmp(n->kids[i]->name, name, len) == 0)
            return n->kids[i];
    return NULL;
}

static pnode_t *pnode_add(pnode_t *parent, const char *name, size_t len)
{
    pnode_t *k = bson_malloc0(sizeof *k);
    k->name = bson_strndup(name, len);
    k->kind = PN_TREE;
    parent->kids = bson_realloc(parent->kids, (parent->nkids + 1) * sizeof *parent->kids);
    parent->kids[parent->nkids++] = k;
    return k;
}

/* Makes `n` a computed field: the expression under `it` (false with `err`
 * when it does not parse). */
static bool node_set_expr(pnode_t *n, const bson_iter_t *it, dberr_t *err)
{
    n->kind = PN_EXPR;
    n->expr = expr_new(it, err);
    return n->expr != NULL;
}

/* Finds or creates the node for dotted `path` under `root`; the leaf must
 * not exist yet (31250) and inner nodes must be sub-projections (31249). */
static pnode_t *node_at(pnode_t *root, const char *path, const char *full, dberr_t *err)
{
    char **parts;
    size_t n, off = 0;
    pnode_t *cur = root, *leaf = NULL;
    if (!path_split_field(path, &parts, &n, err))
        return NULL;
    for (size_t i = 0; i < n; i++) {
        size_t len = strlen(parts[i]);
        pnode_t *k = pnode_child(cur, parts[i], len);
        off += len + 1;
        if (i + 1 == n) {
            if (k)
                dberr_set(err, 31250, "Path collision at %s", full);
            else
                leaf = pnode_add(cur, parts[i], len);
            break;
        }
        if (k && k->kind != PN_TREE) {
            dberr_set(err, 31249, "Path collision at %s remaining portion %s", full, path + off);
            break;
        }
        cur = k ? k : pnode_add(cur, parts[i], len);
    }
    path_free(parts, n);
    return leaf;
}

/* Parse state shared by the whole spec. */
typedef struct pctx {
    projection_policy_t policy;
    int type; /* 0 unknown, 1 inclusion, -1 exclusion */
    bool id_included, id_excluded, id_specified;
    bool has_slice, has_elemmatch, positional;
    bool meta_text; /* a {$meta: "textScore"} field */
} pctx_t;

static bool parse_obj(pctx_t *pc, pnode_t *parent, const bson_t *obj, const char *prefix,
                      dberr_t *err);

static bool is_incl_excl_type(bson_type_t t)
{
    return t == BSON_TYPE_BOOL || t == BSON_TYPE_INT32 || t == BSON_TYPE_INT64 ||
           t == BSON_TYPE_DOUBLE || t == BSON_TYPE_DECIMAL128;
}

static bool iter_truthy(const bson_iter_t *it)
{
    return expr_truthy(bson_iter_value((bson_iter_t *)it));
}

static bool set_inclusion(pctx_t *pc, const char *key, dberr_t *err)
{
    if (pc->type < 0)
        return dberr_set(err, 31253, "Cannot do inclusion on field %s in exclusion projection",
                         key);
    pc->type = 1;
    return true;
}

/* Parses a find $slice argument into `n`. */
static bool parse_slice(pnode_t *n, const bson_iter_t *arg, dberr_t *err)
{
    const bson_value_t *v = bson_iter_value((bson_iter_t *)arg);
    if (is_incl_excl_type(v->value_type) && v->value_type != BSON_TYPE_BOOL) {
        n->kind = PN_SLICE;
        n->limit = (int32_t)bson_iter_as_int64(arg);
        return true;
    }
    if (v->value_type == BSON_TYPE_ARRAY) {
        bson_iter_t a;
        bson_iter_t s, l;
        bson_iter_recurse(arg, &a);
        int count = 0;
        while (bson_iter_next(&a)) {
            if (count == 0)
                s = a;
            else if (count == 1)
                l = a;
            count++;
        }
        if (count != 2)
            return dberr_set(err, 31272, "$slice array argument should be of form [skip, limit]");
        if (!is_incl_excl_type(bson_iter_type(&s)) || BSON_ITER_HOLDS_BOOL(&s))
            return dberr_set(err, 31257, "$slice expects the skip argument to be a number, got %d",
                             (int)bson_iter_type(&s));
        if (!is_incl_excl_type(bson_iter_type(&l)) || BSON_ITER_HOLDS_BOOL(&l))
            return dberr_set(err, 31258, "$slice expects the limit argument to be a number, got %d",
                             (int)bson_iter_type(&l));
        int64_t lim = bson_iter_as_int64(&l);
        if (lim <= 0)
            return dberr_set(err, 31259, "$slice limit must be positive, got %lld", (long long)lim);
        n->kind = PN_SLICE;
        n->has_skip = true;
        n->skip = (int32_t)bson_iter_as_int64(&s);
        n->limit = lim > INT32_MAX ? INT32_MAX : (int32_t)lim;
        return true;
    }
    return dberr_set(err, 31273, "$slice only supports numbers and [skip, limit] arrays");
}

/* {field: {$meta: "textScore"}}: 1 when `it` is such a spec (parsed into a
 * node), 0 when it is not a $meta, -1 on error. */
static int parse_meta(pctx_t *pc, pnode_t *parent, const bson_iter_t *it, const char *key,
                      const char *full, dberr_t *err)
{
    bson_iter_t f;
    if (!BSON_ITER_HOLDS_DOCUMENT(it) || !bson_iter_recurse(it, &f) || !bson_iter_next(&f) ||
        strcmp(bson_iter_key(&f), "$meta"))
        return 0;
    bson_iter_t more = f;
    if (bson_iter_next(&more) || !BSON_ITER_HOLDS_UTF8(&f)) {
        dberr_set(err, 17308, "Unsupported argument to $meta");
        return -1;
    }
    const char *name = bson_iter_utf8(&f, NULL);
    if (strcmp(name, "textScore")) {
        if (!strcmp(name, "searchScore") || !strcmp(name, "searchHighlights") ||
            !strcmp(name, "indexKey") || !strcmp(name, "recordId") ||
            !strcmp(name, "sortKey") || !strcmp(name, "randVal") ||
            !strcmp(name, "searchScoreDetails") || !strcmp(name, "geoNearDistance") ||
            !strcmp(name, "geoNearPoint") || !strcmp(name, "searchSequenceToken"))
            dberr_set(err, DBERR_NOT_IMPLEMENTED,
                      "atomdb does not support {$meta: \"%s\"} (textScore only)", name);
        else
            dberr_set(err, 17308, "Unsupported argument to $meta: %s", name);
        return -1;
    }
    pnode_t *n = node_at(parent, key, full, err);
    if (!n)
        return -1;
    n->kind = PN_EXPR;
    n->meta_text = true;
    pc->meta_text = true;
    if (pc->policy == PROJECTION_AGGREGATE && pc->type == 0)
        pc->type = 1; /* $project: a computed field makes an inclusion */
    return 1;
}

/* Parses one element `it` of the spec (key relative to `parent`). */
static bool parse_elem(pctx_t *pc, pnode_t *parent, bson_iter_t *it, const char *prefix,
                       dberr_t *err)
{
    const char *key = bson_iter_key(it);
    bool top_id = parent->name == NULL && strcmp(key, "_id") == 0;
    size_t klen = strlen(key);
    bool positional = klen >= 2 && strcmp(key + klen - 2, ".$") == 0;
    char full[512];
    strjoin3(full, sizeof full, prefix, *prefix ? "." : "", key);

    if (klen == 0)
        return dberr_set(err, 15998, "FieldPath field names may not be empty strings.");
    if (klen >= 3 && strcmp(key + klen - 3, ".$.") == 0)
        return dberr_set(err, 31270, "Path cannot end with '.$.'");
    if (strstr(key, ".$."))
        return dberr_set(err, DBERR_NOT_IMPLEMENTED,
                         "atomdb does not support a path after the positional operator: %s", key);
    int meta = parse_meta(pc, parent, it, key, full, err);
    if (meta)
        return meta > 0;

    if (pc->policy == PROJECTION_ADD_FIELDS) {
        /* every value is an expression; nested documents that are not
         * operators are sub-documents of expressions */
        if (BSON_ITER_HOLDS_DOCUMENT(it)) {
            bson_t sub;
            bsonview_iter(it, &sub);
            bson_iter_t f;
            bool is_op = false;
            if (bson_iter_init(&f, &sub) && bson_iter_next(&f))
                is_op = bson_iter_key(&f)[0] == '$';
            if (!is_op && !bson_empty(&sub)) {
                pnode_t *n = node_at(parent, key, full, err);
                if (!n)
                    return false;
                return parse_obj(pc, n, &sub, full, err);
            }
        }
        pnode_t *n = node_at(parent, key, full, err);
        if (!n)
            return false;
        return node_set_expr(n, it, err);
    }

    if (BSON_ITER_HOLDS_DOCUMENT(it)) {
        bson_t sub;
        bson_iter_t f;
        bsonview_iter(it, &sub);
        if (positional)
            return dberr_set(
                err, 31271,
                "positional projection cannot be used with an expression or sub object");
        if (bson_empty(&sub))
            return dberr_set(
                err, 51270,
                "An empty sub-projection is not a valid value. Found empty object at path");
        bson_iter_init(&f, &sub);
        bson_iter_next(&f);
        const char *op = bson_iter_key(&f);
        if (bson_count_keys(&sub) == 1 && op[0] == '$') {
            if (pc->policy == PROJECTION_FIND && strcmp(op, "$slice") == 0) {
                pnode_t *n = node_at(parent, key, full, err);
                if (!n)
                    return false;
                if (parse_slice(n, &f, err)) {
                    pc->has_slice = true;
                    return true;
                }
                if (!BSON_ITER_HOLDS_ARRAY(&f) || pc->type < 0 ||
                    (err && err->code != 31257 && err->code != 31272))
                    return false;
                dberr_clear(err);
                /* not the find form: the $slice expression ({$slice: ["$a", 2]}) */
                if (!node_set_expr(n, it, err))
                    return false;
                pc->type = 1;
                return true;
            }
            if (strcmp(op, "$elemMatch") == 0) {
                if (pc->policy != PROJECTION_FIND)
                    return dberr_set(err, DBERR_INVALID_PIPELINE_OPERATOR,
                                     "Cannot use $elemMatch in this context");
                if (!BSON_ITER_HOLDS_DOCUMENT(&f))
                    return dberr_set(err, 31274,
                                     "elemMatch: Invalid argument, object required, but got %s",
                                     "a non-object");
                if (pc->positional)
                    return dberr_set(err, 31255,
                                     "Cannot specify positional operator and $elemMatch.");
                if (parent->name != NULL || strchr(key, '.'))
                    return dberr_set(err, 31275,
                                     "Cannot use $elemMatch projection on a nested field.");
                pnode_t *n = node_at(parent, key, full, err);
                if (!n)
                    return false;
                bson_t filter = BSON_INITIALIZER, em;
                bson_append_document_begin(&filter, key, -1, &em);
                bson_append_value(&em, "$elemMatch", -1, bson_iter_value(&f));
                bson_append_document_end(&filter, &em);
                n->kind = PN_ELEMMATCH;
                n->em = matcher_new(&filter, err);
                bson_destroy(&filter);
                pc->has_elemmatch = true;
                return n->em != NULL;
            }
            /* a generic expression: inclusion */
            if (pc->type < 0)
                return dberr_set(err, 31252,
                                 "Cannot use expression other than $meta in exclusion projection");
            pnode_t *n = node_at(parent, key, full, err);
            if (!n)
                return false;
            if (!node_set_expr(n, it, err)) {
                if (err && err->code == DBERR_INVALID_PIPELINE_OPERATOR && strstr(err->msg, op) &&
                    !strchr(op, '.'))
                    dberr_set(err, 31325, "Unknown expression %s", op);
                return false;
            }
            pc->type = 1;
            return true;
        }
        pnode_t *n = node_at(parent, key, full, err);
        if (!n)
            return false;
        return parse_obj(pc, n, &sub, full, err);
    }

    if (is_incl_excl_type(bson_iter_type(it))) {
        if (iter_truthy(it)) {
            if (positional) {
                if (pc->positional)
                    return dberr_set(
                        err, 31276,
                        "Cannot specify more than one positional projection per query.");
                if (pc->has_elemmatch)
                    return dberr_set(err, 31256,
                                     "Cannot specify positional operator and $elemMatch.");
                if (pc->policy != PROJECTION_FIND)
                    return dberr_set(err, 31324,
                                     "Cannot use positional projection in aggregation projection");
                char *path = bson_strndup(key, klen - 2);
                pnode_t *n = node_at(parent, path, full, err);
                bson_free(path);
                if (!n)
                    return false;
                n->kind = PN_POSITIONAL;
                pc->positional = true;
            } else {
                pnode_t *n = node_at(parent, key, full, err);
                if (!n)
                    return false;
                n->kind = PN_TRUE;
                if (top_id)
                    pc->id_included = true;
            }
            if (!top_id)
                return set_inclusion(pc, full, err);
            return true;
        }
        pnode_t *n = node_at(parent, key, full, err);
        if (!n)
            return false;
        n->kind = PN_FALSE;
        if (top_id) {
            pc->id_excluded = true;
            return true;
        }
        if (pc->type > 0)
            return dberr_set(err, 31254, "Cannot do exclusion on field %s in inclusion projection",
                             full);
        pc->type = -1;
        return true;
    }

    /* a literal or field path: a computed field */
    if (positional)
        return dberr_set(err, 31308, "positional projection cannot be used with a literal");
    if (pc->type < 0)
        return dberr_set(err, 31310, "Cannot use an expression %s in an exclusion projection",
                         full);
    pnode_t *n = node_at(parent, key, full, err);
    if (!n)
        return false;
    if (!node_set_expr(n, it, err))
        return false;
    pc->type = 1;
    return true;
}

static bool parse_obj(pctx_t *pc, pnode_t *parent, const bson_t *obj, const char *prefix,
                      dberr_t *err)
{
    bson_iter_t it;
    if (!bson_iter_init(&it, obj))
        return dberr_set(err, DBERR_INVALID_BSON, "invalid projection document");
    while (bson_iter_next(&it))
        if (!parse_elem(pc, parent, &it, prefix, err))
            return false;
    return true;
}

/* Marks subtrees that compute values or hold the positional node. */
static void mark(pnode_t *n)
{
    n->computes = n->kind == PN_EXPR;
    n->positional = n->kind == PN_POSITIONAL;
    for (size_t i = 0; i < n->nkids; i++) {
        mark(n->kids[i]);
        n->computes |= n->kids[i]->computes;
        n->positional |= n->kids[i]->positional;
    }
}

static void remove_child(pnode_t *n, const char *name)
{
    for (size_t i = 0; i < n->nkids; i++)
        if (strcmp(n->kids[i]->name, name) == 0) {
            pnode_free(n->kids[i]);
            bson_free(n->kids[i]);
            memmove(&n->kids[i], &n->kids[i + 1], (n->nkids - i - 1) * sizeof *n->kids);
            n->nkids--;
            return;
        }
}

projection_t *projection_new_policy(const bson_t *spec, projection_policy_t policy, dberr_t *err)
{
    projection_t *p = bson_malloc0(sizeof *p);
    pctx_t pc;
    bson_iter_t it;
    memset(&pc, 0, sizeof pc);
    pc.policy = policy;
    p->policy = policy;
    dberr_clear(err);

    if (bson_empty(spec)) {
        if (policy == PROJECTION_AGGREGATE) {
            dberr_set(err, 51272,
                      "Invalid $project :: caused by :: projection specification must have at "
                      "least one field");
            goto fail;
        }
        p->empty = true;
        return p;
    }
    if (bson_iter_init(&it, spec))
        while (bson_iter_next(&it)) {
            const char *k = bson_iter_key(&it);
            if (strcmp(k, "_id") == 0 || strncmp(k, "_id.", 4) == 0)
                pc.id_specified = true;
        }
    if (!parse_obj(&pc, &p->root, spec, "", err))
        goto fail;

    if (policy == PROJECTION_ADD_FIELDS) {
        p->inclusion = false;
    } else {
        if (pc.type == 0) {
            if (pc.has_slice)
                pc.type = pc.id_included ? 1 : -1;
            else if (pc.has_elemmatch)
                pc.type = 1;
            else if (pc.id_included)
                pc.type = 1;
            else
                pc.type = -1;
        }
        p->inclusion = pc.type > 0;
        if (p->inclusion && !pc.id_specified) {
            pnode_t *n = pnode_add(&p->root, "_id", 3);
            n->kind = PN_TRUE;
            /* _id comes first in spec order so it is output where the document has it */
            memmove(&p->root.kids[1], &p->root.kids[0], (p->root.nkids - 1) * sizeof *p->root.kids);
            p->root.kids[0] = n;
        }
        if (!p->inclusion && pc.id_included)
            remove_child(&p->root, "_id");
    }
    p->positional = pc.positional;
    p->meta_text = pc.meta_text;
    mark(&p->root);
    return p;
fail:
    projection_destroy(p);
    return NULL;
}

projection_t *projection_new(const bson_t *spec, dberr_t *err)
{
    return projection_new_policy(spec, PROJECTION_FIND, err);
}

void projection_destroy(projection_t *p)
{
    if (!p)
        return;
    pnode_free(&p->root);
    matcher_destroy(p->text);
    collation_destroy(p->coll);
    bson_free(p);
}

bool projection_uses_text_score(const projection_t *p)
{
    return p && p->meta_text;
}

void projection_set_text(projection_t *p, matcher_t *m)
{
    matcher_destroy(p->text);
    p->text = matcher_ref(m);
}

/* Points the $elemMatch matchers under `n` at `coll`. */
static void pnode_set_collation(pnode_t *n, collation_t *coll)
{
    if (n->em)
        matcher_set_collation(n->em, coll);
    for (size_t i = 0; i < n->nkids; i++)
        pnode_set_collation(n->kids[i], coll);
}

void projection_set_collation(projection_t *p, collation_t *coll)
{
    collation_t *old = p->coll;
    p->coll = collation_ref(coll);
    collation_destroy(old);
    pnode_set_collation(&p->root, p->coll);
}

bool projection_is_positional(const projection_t *p)
{
    return p && p->positional;
}

/* ------------------------------------------------------------------ apply */

typedef struct actx {
    const projection_t *p;
    const expr_ctx_t *ectx; /* root = the whole input document */
    int positional;         /* array index for "$", consumed by the first array */
    bool pos_used;
} actx_t;

static bool apply_doc(actx_t *ac, const pnode_t *t, const bson_t *doc, bson_t *out, dberr_t *err);

/* apply_doc on a nested document, the result as a document value in out
 * (owned by the caller). */
static bool apply_subdoc(actx_t *ac, const pnode_t *t, const bson_t *sub, bson_value_t *out,
                         dberr_t *err)
{
    bson_t r;
    bson_init(&r);
    if (!apply_doc(ac, t, sub, &r, err)) {
        bson_destroy(&r);
        return false;
    }
    expr_value_take_bson(out, &r, BSON_TYPE_DOCUMENT);
    return true;
}

/* Applies `t` to each element of an array (the elements that are
 * documents; other elements are kept in exclusion mode and dropped in
 * inclusion mode unless the subtree computes values). */
static bool apply_array(actx_t *ac, const pnode_t *t, const bson_value_t *arr, bson_value_t *out,
                        dberr_t *err)
{
    bson_t a, res;
    bson_iter_t it;
    uint32_t idx = 0, pos = 0;
    bool keep_scalars = !ac->p->inclusion && ac->p->policy != PROJECTION_ADD_FIELDS;
    bool only_pos = false;
    if (t->positional && !ac->pos_used) {
        if (ac->positional < 0)
            return dberr_set(err, 51246,
                             "Executor error during find command :: caused by :: positional "
                             "operator '.$' couldn't find a matching element in the array");
        only_pos = true;
        ac->pos_used = true;
    }
    bson_init_static(&a, arr->value.v_doc.data, arr->value.v_doc.data_len);
    bson_init(&res);
    bson_iter_init(&it, &a);
    while (bson_iter_next(&it)) {
        char buf[16];
        const char *key;
        if (only_pos && pos++ != (uint32_t)ac->positional)
            continue;
        bson_value_t r;
        bool made;
        bool is_doc = BSON_ITER_HOLDS_DOCUMENT(&it), is_array = BSON_ITER_HOLDS_ARRAY(&it);
        if (is_doc || (!is_array && !keep_scalars && t->computes)) {
            /* a scalar becomes a document of the computed fields */
            bson_t sub = BSON_INITIALIZER;
            if (is_doc)
                bsonview_iter(&it, &sub);
            made = apply_subdoc(ac, t, &sub, &r, err);
        } else if (is_array) {
            made = apply_array(ac, t, bson_iter_value(&it), &r, err);
        } else {
            if (keep_scalars) {
                array_key(idx++, buf, &key);
                bson_append_value(&res, key, -1, bson_iter_value(&it));
            }
            continue;
        }
        if (!made) {
            bson_destroy(&res);
            return false;
        }
        array_key(idx++, buf, &key);
        bson_append_value(&res, key, -1, &r);
        bson_value_destroy(&r);
    }
    expr_value_take_bson(out, &res, BSON_TYPE_ARRAY);
    return true;
}

/* The find $slice of array `arr`. */
static void slice_array(const pnode_t *n, const bson_value_t *arr, bson_value_t *out)
{
    bson_t a, res;
    bson_iter_t it;
    bson_init_static(&a, arr->value.v_doc.data, arr->value.v_doc.data_len);
    int64_t len = bson_count_keys(&a), from, count;
    if (n->has_skip) {
        from = n->skip < 0 ? len + n->skip : n->skip;
        if (from < 0)
            from = 0;
        count = n->limit;
    } else if (n->limit >= 0) {
        from = 0;
        count = n->limit;
    } else {
        from = len + n->limit;
        if (from < 0)
            from = 0;
        count = len;
    }
    bson_init(&res);
    bson_iter_init(&it, &a);
    uint32_t idx = 0;
    for (int64_t i = 0; bson_iter_next(&it); i++) {
        if (i < from || i >= from + count)
            continue;
        char buf[16];
        const char *key;
        array_key(idx++, buf, &key);
        bson_append_value(&res, key, -1, bson_iter_value(&it));
    }
    expr_value_take_bson(out, &res, BSON_TYPE_ARRAY);
}

/* The $elemMatch projection: [first matching element], or false if none. */
static bool elemmatch_array(const pnode_t *n, const bson_value_t *arr, bson_value_t *out)
{
    bson_t a;
    bson_iter_t it;
    bson_init_static(&a, arr->value.v_doc.data, arr->value.v_doc.data_len);
    bson_iter_init(&it, &a);
    while (bson_iter_next(&it)) {
        bson_t probe = BSON_INITIALIZER, inner;
        bson_append_array_begin(&probe, n->name, -1, &inner);
        bson_append_value(&inner, "0", 1, bson_iter_value(&it));
        bson_append_array_end(&probe, &inner);
        bool hit = matcher_matches(n->em, &probe, NULL);
        bson_destroy(&probe);
        if (hit) {
            bson_t res = BSON_INITIALIZER;
            bson_append_value(&res, "0", 1, bson_iter_value(&it));
            expr_value_take_bson(out, &res, BSON_TYPE_ARRAY);
            return true;
        }
    }
    return false;
}

/* Evaluates a computed node into `out`; false on error. Missing → EOD. */
static bool compute(actx_t *ac, const pnode_t *n, bson_value_t *out, dberr_t *err)
{
    if (n->meta_text) {
        const fts_query_t *q = ac->p->text ? matcher_text(ac->p->text) : NULL;
        if (!q)
            return dberr_set(err, 40218,
                             "query requires text score metadata, but it is not available");
        out->value_type = BSON_TYPE_DOUBLE;
        out->value.v_double = fts_query_score(q, ac->ectx->root);
        return true;
    }
    return expr_eval(n->expr, ac->ectx, out, err);
}

/* Computes a subtree for a field the document lacks (or holds a scalar). */
static bool compute_missing_tree(actx_t *ac, const pnode_t *k, bson_value_t *out, dberr_t *err)
{
    bson_t empty = BSON_INITIALIZER, r;
    bson_init(&r);
    if (!apply_doc(ac, k, &empty, &r, err)) {
        bson_destroy(&r);
        return false;
    }
    expr_value_take_bson(out, &r, BSON_TYPE_DOCUMENT);
    return true;
}

static bool apply_doc(actx_t *ac, const pnode_t *t, const bson_t *doc, bson_t *out, dberr_t *err)
{
    const projection_t *p = ac->p;
    bool incl = p->inclusion && p->policy != PROJECTION_ADD_FIELDS;
    bool addf = p->policy == PROJECTION_ADD_FIELDS;
    flist_t fl;
    bson_iter_t it;
    bool ok = true;
    flist_init(&fl);

    if (!bson_iter_init(&it, doc))
        goto cleanup;
    while (bson_iter_next(&it)) {
        const char *key = bson_iter_key(&it);
        pnode_t *k = pnode_child(t, key, strlen(key));
        bson_value_t v;
        if (!k) {
            if (!incl)
                flist_add_iter(&fl, &it);
            continue;
        }
        switch (k->kind) {
        case PN_TRUE:
            flist_add_iter(&fl, &it);
            break;
        case PN_FALSE:
            break;
        case PN_EXPR:
            if (addf) {
                /* keep the position; the value is computed below */
                flist_add_iter(&fl, &it);
            }
            break;
        case PN_TREE:
            if (BSON_ITER_HOLDS_DOCUMENT(&it)) {
                bson_t sub;
                bsonview_iter(&it, &sub);
                if (!apply_subdoc(ac, k, &sub, &v, err)) {
                    ok = false;
                    goto cleanup;
                }
                flist_set(&fl, key, &v);
            } else if (BSON_ITER_HOLDS_ARRAY(&it)) {
                if (!apply_array(ac, k, bson_iter_value(&it), &v, err)) {
                    ok = false;
                    goto cleanup;
                }
                flist_set(&fl, key, &v);
            } else if (!incl && !addf) {
                flist_add_iter(&fl, &it);
            } else if (addf) {
                /* a scalar is replaced by a document of the computed fields */
                flist_add_iter(&fl, &it);
            }
            break;
        case PN_SLICE:
            if (BSON_ITER_HOLDS_ARRAY(&it)) {
                slice_array(k, bson_iter_value(&it), &v);
                flist_set(&fl, key, &v);
            } else {
                flist_add_iter(&fl, &it);
            }
            break;
        case PN_ELEMMATCH:
            break; /* computed below, appended */
        case PN_POSITIONAL:
            if (BSON_ITER_HOLDS_ARRAY(&it) && !ac->pos_used) {
                bson_t a;
                bson_iter_t ai;
                bool found = false;
                ac->pos_used = true;
                if (ac->positional < 0) {
                    ok = dberr_set(err, 51246,
                                   "Executor error during find command :: caused by :: positional "
                                   "operator '.$' couldn't find a matching element in the array");
                    goto cleanup;
                }
                bson_init_static(&a, bson_iter_value(&it)->value.v_doc.data,
                                 bson_iter_value(&it)->value.v_doc.data_len);
                bson_iter_init(&ai, &a);
                for (int i = 0; bson_iter_next(&ai); i++)
                    if (i == ac->positional) {
                        bson_t res = BSON_INITIALIZER;
                        bson_append_value(&res, "0", 1, bson_iter_value(&ai));
                        expr_value_take_bson(&v, &res, BSON_TYPE_ARRAY);
                        flist_set(&fl, key, &v);
                        found = true;
                        break;
                    }
                if (!found) {
                    ok = dberr_set(err, 51246,
                                   "Executor error during find command :: caused by :: positional "
                                   "operator '.$' element mismatch");
                    goto cleanup;
                }
            } else {
                flist_add_iter(&fl, &it);
            }
            break;
        }
    }

    /* computed fields, in spec order */
    for (size_t i = 0; i < t->nkids; i++) {
        pnode_t *k = t->kids[i];
        bson_value_t v;
        if (k->kind == PN_EXPR) {
            if (!compute(ac, k, &v, err)) {
                ok = false;
                goto cleanup;
            }
            if (v.value_type == BSON_TYPE_EOD) {
                /* $$REMOVE or a missing path: the field is absent */
                if (addf && flist_has(&fl, k->name)) {
                    for (size_t j = 0; j < fl.n; j++)
                        if (strcmp(fl.names[j], k->name) == 0) {
                            bson_free(fl.names[j]);
                            bson_value_destroy(&fl.vals[j]);
                            memmove(&fl.names[j], &fl.names[j + 1],
                                    (fl.n - j - 1) * sizeof *fl.names);
                            memmove(&fl.vals[j], &fl.vals[j + 1], (fl.n - j - 1) * sizeof *fl.vals);
                            fl.n--;
                            break;
                        }
                }
                continue;
            }
            flist_set(&fl, k->name, &v);
        } else if (k->kind == PN_TREE && k->computes) {
            bson_iter_t f;
            bool present = bson_iter_init_find(&f, doc, k->name);
            if (present && (BSON_ITER_HOLDS_DOCUMENT(&f) || BSON_ITER_HOLDS_ARRAY(&f)))
                continue; /* handled in the first pass */
            if (!compute_missing_tree(ac, k, &v, err)) {
                ok = false;
                goto cleanup;
            }
            flist_set(&fl, k->name, &v);
        } else if (k->kind == PN_ELEMMATCH) {
            bson_iter_t f;
            if (bson_iter_init_find(&f, doc, k->name) && BSON_ITER_HOLDS_ARRAY(&f) &&
                elemmatch_array(k, bson_iter_value(&f), &v))
                flist_set(&fl, k->name, &v);
        }
    }
    flist_write(&fl, out);
cleanup:
    flist_destroy(&fl);
    return ok;
}

bool projection_apply_ctx(const projection_t *p, const bson_t *doc, int positional,
                          const expr_ctx_t *ctx, bson_t *out, dberr_t *err)
{
    if (p->empty) {
        bson_concat(out, doc);
        return true;
    }
    expr_ctx_t ectx = *ctx;
    ectx.root = doc;
    actx_t ac = {.p = p, .ectx = &ectx, .positional = positional, .pos_used = false};
    if (!apply_doc(&ac, &p->root, doc, out, err)) {
        bson_reinit(out);
        return false;
    }
    return true;
}

bool projection_apply(const projection_t *p, const bson_t *doc, int positional, bson_t *out,
                      dberr_t *err)
{
    struct timeval tv;
    gettimeofday(&tv, NULL);
    expr_ctx_t ctx = {
        .root = doc, .now_ms = (int64_t)tv.tv_sec * 1000 + tv.tv_usec / 1000, .vars = NULL,
        .coll = p->coll};
    return projection_apply_ctx(p, doc, positional, &ctx, out, err);
}
