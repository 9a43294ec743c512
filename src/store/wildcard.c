/* wildcard: the wildcard ($**) index kind — spec parsing with mongod's
 * errors, the wildcardProjection applied to each document, and its keys:
 * one (path, value) pair per leaf, as mongod's wildcard_key_generator. */
#include "store/wildcard.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "doc/keystring.h"
#include "store/textindex.h"
#include "util/bsonview.h"
#include "util/hash.h"
#include "util/vec.h"

/* A path some document had an array at (mongod's multikey metadata keys). */
typedef struct wc_multikey {
    char *path;
    UT_hash_handle hh;
} wc_multikey_t;

struct wildcard {
    char *root;      /* "a.b" of {"a.b.$**": 1}, or NULL for {"$**": 1} */
    bool inclusion;  /* `paths` are the kept subtrees (else the dropped ones) */
    char **paths;    /* dotted paths, _id resolved (excluded unless asked for) */
    size_t npaths;
    size_t cap;
    wc_multikey_t *multikey; /* paths found multikey; never cleared, as mongod */
    bool compound;   /* other fields beside the wildcard one (index_new refuses it) */
};

/* How the projection treats a path. */
typedef enum wc_status {
    WC_OUT,     /* dropped with its subtree */
    WC_IN,      /* kept with its subtree */
    WC_THROUGH, /* an ancestor of a listed path: its children decide */
} wc_status_t;

static const char *wc_suffix = ".$**";

static bool wc_is_wild_field(const char *f)
{
    size_t n = strlen(f), s = strlen(wc_suffix);
    return strcmp(f, "$**") == 0 || (n > s && strcmp(f + n - s, wc_suffix) == 0);
}

/* A "$**" or "path.$**" key pattern field that is not a text index's. */
static bool wc_is_wild_key(const bson_iter_t *field)
{
    return wc_is_wild_field(bson_iter_key(field)) && !textindex_is_text_field(field);
}

bool wildcard_is_spec(const bson_t *spec)
{
    return index_spec_has_field(spec, wc_is_wild_key);
}

/* 0: a == b; 1: a is an ancestor of b; -1: b is an ancestor of a; 2: neither. */
static int wc_path_rel(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    size_t n = la < lb ? la : lb;
    if (memcmp(a, b, n) != 0)
        return 2;
    if (la == lb)
        return 0;
    if (la < lb)
        return b[la] == '.' ? 1 : 2;
    return a[lb] == '.' ? -1 : 2;
}

static wc_status_t wc_status(const wildcard_t *w, const char *path)
{
    bool through = false;
    for (size_t i = 0; i < w->npaths; i++) {
        int rel = wc_path_rel(w->paths[i], path);
        if (rel == 0 || rel == 1)
            return w->inclusion ? WC_IN : WC_OUT;
        if (rel == -1)
            through = true;
    }
    if (through)
        return WC_THROUGH;
    return w->inclusion ? WC_OUT : WC_IN;
}

static void wc_add_path(wildcard_t *w, const char *path)
{
    VEC_RESERVE_ONE(w->paths, w->npaths, w->cap, 8);
    w->paths[w->npaths++] = bson_strdup(path);
}

/* Orders paths with '.' before every other byte, so a path's descendants
 * directly follow it. */
static int wc_path_cmp(const void *a, const void *b)
{
    const unsigned char *x = *(const unsigned char *const *)a;
    const unsigned char *y = *(const unsigned char *const *)b;
    for (;; x++, y++) {
        unsigned cx = *x == '.' ? 1 : *x, cy = *y == '.' ? 1 : *y;
        if (cx != cy || cx == 0)
            return (int)cx - (int)cy;
    }
}

/* Flattens the projection document into dotted paths; `mode` is 1 for
 * inclusion, 0 for exclusion, -1 undecided. `id` gets _id's own value
 * (-1: not named). */
static bool wc_flatten(wildcard_t *w, bson_iter_t *it, const char *prefix, int *mode, int *id,
                       int depth, dberr_t *err)
{
    if (depth > 100)
        return dberr_set(err, DBERR_BAD_VALUE, "wildcardProjection is nested too deeply");
    while (bson_iter_next(it)) {
        const char *k = bson_iter_key(it);
        char *path = prefix ? bson_strdup_printf("%s.%s", prefix, k) : bson_strdup(k);
        bool ok = true;
        if (k[0] == '$') {
            ok = dberr_set(err, 51271,
                           "Bad projection specification, cannot use computed fields when "
                           "parsing a spec in kBanComputedFields mode");
        } else if (BSON_ITER_HOLDS_DOCUMENT(it)) {
            bson_iter_t child;
            bson_t sub;
            bsonview_iter(it, &sub);
            if (bson_empty(&sub))
                ok = dberr_set(err, 51270,
                               "An empty sub-projection is not a valid value. Found empty "
                               "object at path");
            else
                ok = bson_iter_recurse(it, &child) &&
                     wc_flatten(w, &child, path, mode, id, depth + 1, err);
        } else if (BSON_ITER_HOLDS_NUMBER(it) || BSON_ITER_HOLDS_BOOL(it)) {
            int incl = bson_iter_as_bool(it) ? 1 : 0;
            if (strcmp(path, "_id") == 0) {
                *id = incl;
            } else if (*mode >= 0 && *mode != incl) {
                ok = incl ? dberr_set(err, 31253,
                                      "Cannot do inclusion on field %s in exclusion projection",
                                      path)
                          : dberr_set(err, 31254,
                                      "Cannot do exclusion on field %s in inclusion projection",
                                      path);
            } else {
                *mode = incl;
                wc_add_path(w, path);
            }
        } else {
            ok = dberr_set(err, 51271,
                           "Bad projection specification, cannot use computed fields when "
                           "parsing a spec in kBanComputedFields mode");
        }
        bson_free(path);
        if (!ok)
            return false;
    }
    return true;
}

static bool wc_parse_projection(wildcard_t *w, const bson_t *proj, dberr_t *err)
{
    int mode = -1, id = -1;
    bson_iter_t it;
    if (!bson_iter_init(&it, proj) || !wc_flatten(w, &it, NULL, &mode, &id, 0, err))
        return false;
    if (mode < 0) /* only _id named */
        mode = id == 1 ? 1 : 0;
    w->inclusion = mode == 1;
    if (w->inclusion ? id == 1 : id != 1) /* _id is left out unless asked for */
        wc_add_path(w, "_id");
    if (w->npaths > 1) {
        qsort(w->paths, w->npaths, sizeof *w->paths, wc_path_cmp);
        for (size_t i = 1; i < w->npaths; i++) {
            int rel = wc_path_rel(w->paths[i - 1], w->paths[i]);
            if (rel == 0 || rel == 1)
                return dberr_set(err, 31249, "Path collision at %s remaining portion %s",
                                 w->paths[i], w->paths[i] + strlen(w->paths[i - 1]) +
                                                  (rel == 1 ? 1 : 0));
        }
    }
    return true;
}

static bool wc_check_root(const char *root, dberr_t *err)
{
    const char *p = root;
    for (;;) {
        const char *dot = strchr(p, '.');
        size_t n = dot ? (size_t)(dot - p) : strlen(p);
        if (n == 0)
            return dberr_set(err, DBERR_CANNOT_CREATE_INDEX,
                             "Index keys cannot contain an empty field.");
        if (p[0] == '$')
            return dberr_set(err, DBERR_CANNOT_CREATE_INDEX,
                             "Index key contains an illegal field name: field name starts with "
                             "'$'.");
        if (!dot)
            return true;
        p = dot + 1;
    }
}

/* mongod 7.0's checks of a compound wildcard key pattern (its wildcard
 * field `wild`), as its validateWildcardIndex (wildcard_validation.cpp):
 * the other fields plain ascending/descending ones (no other index
 * plugin, 67), none at or under the wildcard field's subtree (7246204; a
 * field above it, {a: 1, "a.b.$**": 1}, is allowed), and {"$**": ..} with
 * other fields only with a wildcardProjection (67). */
static bool wc_check_compound(const bson_t *key, const char *wild, const bson_t *spec,
                              dberr_t *err)
{
    bson_iter_t kit, it;
    size_t root_len = strcmp(wild, "$**") == 0 ? 0 : strlen(wild) - strlen(wc_suffix);
    bson_iter_init(&kit, key);
    while (bson_iter_next(&kit)) {
        const char *f = bson_iter_key(&kit);
        if (f == wild || !strcmp(f, wild))
            continue;
        if (!BSON_ITER_HOLDS_NUMBER(&kit))
            return dberr_set(err, DBERR_CANNOT_CREATE_INDEX,
                             "Can't use more than one index plugin for a single index.");
        if (root_len) {
            char *root = bson_strndup(wild, root_len);
            int rel = wc_path_rel(root, f);
            bson_free(root);
            if (rel == 0 || rel == 1)
                return dberr_set(err, 7246204,
                                 "A wildcard index field should not overlap with and index key "
                                 "fields if wildcard projection is empty, however '%s' is "
                                 "overlapping with the wildcard index field.",
                                 f);
        }
    }
    if (!root_len && !bson_iter_init_find(&it, spec, "wildcardProjection"))
        return dberr_set(err, DBERR_CANNOT_CREATE_INDEX,
                         "A compound wildcard index on all fields ('$**') requires a "
                         "'wildcardProjection' that leaves out its other fields");
    return true;
}

/* A sorted list of dotted paths (borrowed strings), in mongod's FieldRef
 * order (component by component: wc_path_cmp). */
typedef struct wc_pathlist {
    const char **v;
    size_t n, cap;
} wc_pathlist_t;

static void wc_pathlist_add(wc_pathlist_t *l, const char *path)
{
    VEC_RESERVE_ONE(l->v, l->n, l->cap, 8);
    l->v[l->n++] = path;
}

/* 7246200 when two paths of the sorted list `l` overlap. */
static bool wc_pathlist_disjoint(const wc_pathlist_t *l, dberr_t *err)
{
    for (size_t i = 1; i < l->n; i++) {
        int rel = wc_path_rel(l->v[i - 1], l->v[i]);
        if (rel != 2) /* mongod's message ends without the closing quote */
            return dberr_set(err, 7246200,
                             "Fields in Wildcard Projection cannot overlap, however '%s' is "
                             "overlapped with '%s",
                             l->v[i - 1], l->v[i]);
    }
    return true;
}

/* True when `a` equals `b` or is one of its ancestors (FieldRef's
 * isPrefixOfOrEqualTo). */
static bool wc_prefix_or_equal(const char *a, const char *b)
{
    int rel = wc_path_rel(a, b);
    return rel == 0 || rel == 1;
}

/* mongod's checks of a compound {"$**": ..} index's wildcardProjection
 * against its other fields (validateWildcardProjection,
 * src/mongo/db/index/wildcard_validation.cpp), made on the projection's
 * top-level names before the projection itself is parsed: included paths
 * must not overlap each other, nor excluded ones (7246200); inclusion and
 * exclusion do not mix but for _id (7246211); in an inclusion projection
 * no included path (_id too) may be a regular field or its ancestor
 * (7246208); an exclusion projection must exclude every regular field
 * (_id too), reporting the first one left in (7246209, or 7246210 once no
 * excluded path sorts after it). {_id: 1} alone is an inclusion, {_id: 0}
 * alone an exclusion. The order of the checks and the _id cases follow
 * jstests/core/index/wildcard/compound_wildcard_index_validation.js,
 * whose expectations the stored sources of that file differ on. */
static bool wc_check_compound_projection(const bson_t *key, const bson_t *proj, dberr_t *err)
{
    wc_pathlist_t fields = {0}, incl = {0}, excl = {0};
    size_t incl_other = 0, excl_other = 0; /* paths other than _id */
    bool ok = false;
    bson_iter_t it;
    bson_iter_init(&it, key);
    while (bson_iter_next(&it))
        if (!wc_is_wild_field(bson_iter_key(&it)))
            wc_pathlist_add(&fields, bson_iter_key(&it));
    bson_iter_init(&it, proj);
    while (bson_iter_next(&it)) {
        bool is_id = strcmp(bson_iter_key(&it), "_id") == 0;
        if (bson_iter_as_bool(&it)) { /* mongod's trueValue(): documents and strings too */
            wc_pathlist_add(&incl, bson_iter_key(&it));
            incl_other += !is_id;
        } else {
            wc_pathlist_add(&excl, bson_iter_key(&it));
            excl_other += !is_id;
        }
    }
    if (fields.n > 1)
        qsort(fields.v, fields.n, sizeof *fields.v, wc_path_cmp);
    if (incl.n > 1)
        qsort(incl.v, incl.n, sizeof *incl.v, wc_path_cmp);
    if (excl.n > 1)
        qsort(excl.v, excl.n, sizeof *excl.v, wc_path_cmp);
    if (!wc_pathlist_disjoint(&incl, err) || !wc_pathlist_disjoint(&excl, err))
        goto cleanup;
    if (incl_other && excl_other) {
        dberr_set(err, 7246211,
                  "Inclusion and exclusion statements cannot combine in the wildcardProjection "
                  "with an exception of explicitly including _id field");
        goto cleanup;
    }
    bool inclusion = incl_other || !excl.n;
    for (size_t f = 0, p = 0; inclusion && f < fields.n && p < incl.n;) {
        if (wc_prefix_or_equal(incl.v[p], fields.v[f])) {
            dberr_set(err, 7246208,
                      "Index Key and Wildcard Projection cannot contain overlapping fields, "
                      "however '%s' index field is ovverlapping with '%s' wildcardProjection "
                      "path.",
                      fields.v[f], incl.v[p]);
            goto cleanup;
        }
        if (wc_path_cmp(&incl.v[p], &fields.v[f]) < 0)
            p++;
        else
            f++;
    }
    if (!inclusion) {
        size_t f = 0, p = 0;
        while (f < fields.n && p < excl.n) {
            if (wc_prefix_or_equal(excl.v[p], fields.v[f])) {
                f++;
            } else if (wc_path_cmp(&excl.v[p], &fields.v[f]) < 0) {
                p++;
            } else {
                dberr_set(err, 7246209,
                          "wildcardProjection paths must exclude all regular index fields, "
                          "however '%s'is not excluded.",
                          fields.v[f]);
                goto cleanup;
            }
        }
        if (f < fields.n) {
            dberr_set(err, 7246210,
                      "wildcardProjection paths must exclude all regular index fields, however "
                      "'%s'is not excluded.",
                      fields.v[f]);
            goto cleanup;
        }
    }
    ok = true;
cleanup:
    bson_free(fields.v);
    bson_free(incl.v);
    bson_free(excl.v);
    return ok;
}

bool wildcard_is_compound(const wildcard_t *w)
{
    return w->compound;
}

bool wildcard_same(const wildcard_t *a, const wildcard_t *b)
{
    if (!a || !b)
        return !a && !b;
    if (a->inclusion != b->inclusion || a->npaths != b->npaths)
        return false;
    for (size_t i = 0; i < a->npaths; i++)
        if (strcmp(a->paths[i], b->paths[i]) != 0)
            return false;
    return true;
}

void wildcard_destroy(wildcard_t *w)
{
    if (!w)
        return;
    bson_free(w->root);
    for (size_t i = 0; i < w->npaths; i++)
        bson_free(w->paths[i]);
    bson_free(w->paths);
    wc_multikey_t *e, *tmp;
    HASH_ITER(hh, w->multikey, e, tmp)
    {
        HASH_DEL(w->multikey, e);
        bson_free(e->path);
        bson_free(e);
    }
    bson_free(w);
}

wildcard_t *wildcard_new(const bson_t *spec, bson_t *key_out, dberr_t *err)
{
    wildcard_t *w = bson_malloc0(sizeof *w);
    bson_iter_t it, kit;
    bson_t key;
    if (!bson_iter_init_find(&it, spec, "key") || !BSON_ITER_HOLDS_DOCUMENT(&it)) {
        dberr_set(err, DBERR_TYPE_MISMATCH, "The 'key' field must be an object");
        goto fail;
    }
    bsonview_iter(&it, &key);
    int nfields = 0, nwild = 0;
    const char *field = NULL;
    bson_iter_init(&kit, &key);
    while (bson_iter_next(&kit)) {
        nfields++;
        if (wc_is_wild_field(bson_iter_key(&kit))) {
            nwild++;
            field = bson_iter_key(&kit);
            if (!BSON_ITER_HOLDS_NUMBER(&kit)) {
                dberr_set(err, DBERR_CANNOT_CREATE_INDEX,
                          "Index key pattern field '%s' of a wildcard index takes a positive "
                          "number, not '%s'",
                          field, BSON_ITER_HOLDS_UTF8(&kit) ? bson_iter_utf8(&kit, NULL) : "non-number");
                goto fail;
            }
            /* a compound wildcard field may descend (mongod 7.0); alone it may not */
            if (bson_iter_as_double(&kit) == 0 ||
                (bson_iter_as_double(&kit) < 0 && bson_count_keys(&key) == 1)) {
                dberr_set(err, DBERR_CANNOT_CREATE_INDEX,
                          "A numeric value in a $** index key pattern must be positive.");
                goto fail;
            }
        }
    }
    if (nwild > 1) {
        dberr_set(err, 7246201, "Index Key can contain only one wildcard index field");
        goto fail;
    }
    if (nfields > 1 && !wc_check_compound(&key, field, spec, err))
        goto fail;
    if (strcmp(field, "$**") != 0) {
        w->root = bson_strndup(field, strlen(field) - strlen(wc_suffix));
        if (!wc_check_root(w->root, err))
            goto fail;
    }
    if (bson_iter_init_find(&it, spec, "wildcardProjection")) {
        if (!BSON_ITER_HOLDS_DOCUMENT(&it)) {
            dberr_set(err, DBERR_TYPE_MISMATCH,
                      "The field 'wildcardProjection' must be a non-empty object, but got %s",
                      BSON_ITER_HOLDS_UTF8(&it) ? "string" : "another type");
            goto fail;
        }
        if (w->root) {
            dberr_set(err, DBERR_FAILED_TO_PARSE,
                      "The field 'wildcardProjection' is only allowed when 'key' is {\"$**\": ±1}");
            goto fail;
        }
        bson_t proj;
        bsonview_iter(&it, &proj);
        if (bson_empty(&proj)) {
            dberr_set(err, DBERR_FAILED_TO_PARSE,
                      "The 'wildcardProjection' field can't be an empty object");
            goto fail;
        }
        if (nfields > 1 && !wc_check_compound_projection(&key, &proj, err))
            goto fail;
        if (!wc_parse_projection(w, &proj, err))
            goto fail;
    } else if (w->root) {
        w->inclusion = true;
        wc_add_path(w, w->root);
    } else {
        w->inclusion = false; /* mongod's default projection {_id: 0} */
        wc_add_path(w, "_id");
    }
    w->compound = nfields > 1;
    bson_concat(key_out, &key);
    return w;
fail:
    wildcard_destroy(w);
    return NULL;
}

/* ---- projection ---- */

/* A dotted path being built (NUL-terminated in data). */
typedef struct wc_path {
    buf_t b;
} wc_path_t;

static size_t wc_path_push(wc_path_t *p, const char *component)
{
    size_t saved = p->b.len;
    if (p->b.len)
        buf_push(&p->b, '.');
    buf_append(&p->b, component, strlen(component));
    buf_push(&p->b, '\0');
    p->b.len--;
    return saved;
}

static void wc_path_pop(wc_path_t *p, size_t saved)
{
    p->b.len = saved;
    buf_push(&p->b, '\0');
    p->b.len--;
}

static const char *wc_path_str(const wc_path_t *p)
{
    return p->b.len ? (const char *)p->b.data : "";
}

/* Appends to `out` what the projection keeps of the container `it`
 * iterates (at `path`; `in_array` when it is an array, whose elements
 * share the array's path). */
static void wc_project(const wildcard_t *w, bson_iter_t *it, bool in_array, wc_path_t *path,
                       bson_t *out)
{
    uint32_t n = 0;
    while (bson_iter_next(it)) {
        const char *k = bson_iter_key(it);
        size_t saved = path->b.len;
        wc_status_t st = WC_THROUGH;
        if (!in_array) {
            saved = wc_path_push(path, k);
            st = wc_status(w, wc_path_str(path));
        }
        char idx[16];
        const char *outk = k;
        if (in_array) {
            bson_uint32_to_string(n, &outk, idx, sizeof idx);
        }
        bool doc = BSON_ITER_HOLDS_DOCUMENT(it), arr = BSON_ITER_HOLDS_ARRAY(it);
        bson_iter_t child;
        if (st == WC_IN) {
            bson_append_value(out, outk, -1, bson_iter_value(it));
            n++;
        } else if (st == WC_THROUGH && (doc || arr) && bson_iter_recurse(it, &child)) {
            bson_t sub;
            if (doc)
                bson_append_document_begin(out, outk, -1, &sub);
            else
                bson_append_array_begin(out, outk, -1, &sub);
            wc_project(w, &child, arr, path, &sub);
            if (doc)
                bson_append_document_end(out, &sub);
            else
                bson_append_array_end(out, &sub);
            n++;
        } else if (st == WC_THROUGH && !w->inclusion) {
            /* a scalar where only some descendant path is excluded */
            bson_append_value(out, outk, -1, bson_iter_value(it));
            n++;
        }
        if (!in_array)
            wc_path_pop(path, saved);
    }
}

/* ---- keys ---- */

typedef struct wc_keys {
    wildcard_t *w;
    const collation_t *coll;
    index_keys_t *out;
    bool *multikey;
} wc_keys_t;

static void wc_mark_multikey(wildcard_t *w, const char *path)
{
    wc_multikey_t *e;
    size_t len = strlen(path);
    HASH_FIND(hh, w->multikey, path, len, e);
    if (e)
        return;
    e = bson_malloc0(sizeof *e);
    e->path = bson_strdup(path);
    HASH_ADD_KEYPTR(hh, w->multikey, e->path, len, e);
}

bool wildcard_path_multikey(const wildcard_t *w, const char *path)
{
    size_t len = strlen(path);
    for (size_t end = 1; end <= len; end++) {
        if (end < len && path[end] != '.')
            continue;
        wc_multikey_t *e;
        HASH_FIND(hh, w->multikey, path, end, e);
        if (e)
            return true;
    }
    return false;
}

void wildcard_append_path(buf_t *key, const char *path)
{
    bson_value_t p = {.value_type = BSON_TYPE_UTF8};
    p.value.v_utf8.str = (char *)path;
    p.value.v_utf8.len = (uint32_t)strlen(path);
    keystring_append(key, &p, false);
}

static void wc_add_key(wc_keys_t *k, const char *path, const bson_value_t *v)
{
    VEC_RESERVE_ONE(k->out->keys, k->out->len, k->out->cap, 4);
    buf_t *key = &k->out->keys[k->out->len++];
    buf_init(key);
    wildcard_append_path(key, path);
    keystring_append_coll(key, v, false, k->coll);
}

static void wc_traverse(wc_keys_t *k, bson_iter_t *it, bool is_array, wc_path_t *path)
{
    while (bson_iter_next(it)) {
        const char *f = bson_iter_key(it);
        if (strchr(f, '.')) /* not queryable: mongod skips it */
            continue;
        size_t saved = path->b.len;
        if (!is_array)
            saved = wc_path_push(path, f);
        const bson_value_t *v = bson_iter_value(it);
        bson_iter_t child;
        if (BSON_ITER_HOLDS_ARRAY(it) && is_array) {
            wc_add_key(k, wc_path_str(path), v); /* a nested array is a value */
        } else if (BSON_ITER_HOLDS_ARRAY(it) || BSON_ITER_HOLDS_DOCUMENT(it)) {
            bool arr = BSON_ITER_HOLDS_ARRAY(it);
            if (arr) {
                *k->multikey = true;
                wc_mark_multikey(k->w, wc_path_str(path));
            }
            bson_t sub;
            bsonview_iter(it, &sub);
            if (bson_empty(&sub)) {
                /* an empty document is its own key, an empty array undefined */
                bson_value_t undef = {.value_type = BSON_TYPE_UNDEFINED};
                wc_add_key(k, wc_path_str(path), arr ? &undef : v);
            } else if (bson_iter_recurse(it, &child)) {
                wc_traverse(k, &child, arr, path);
            }
        } else {
            wc_add_key(k, wc_path_str(path), v);
        }
        if (!is_array)
            wc_path_pop(path, saved);
    }
}

bool wildcard_keys_of(wildcard_t *w, const collation_t *coll, const bson_t *doc,
                      index_keys_t *out, bool *multikey, dberr_t *err)
{
    (void)err;
    wc_path_t path;
    buf_init(&path.b);
    bson_t projected = BSON_INITIALIZER;
    bson_iter_t it;
    if (bson_iter_init(&it, doc))
        wc_project(w, &it, false, &path, &projected);
    wc_keys_t k = {.w = w, .coll = coll, .out = out, .multikey = multikey};
    wc_path_pop(&path, 0);
    if (bson_iter_init(&it, &projected))
        wc_traverse(&k, &it, false, &path);
    bson_destroy(&projected);
    buf_destroy(&path.b);
    return true;
}

bool wildcard_covers(const wildcard_t *w, const char *path)
{
    if (!path[0] || wc_status(w, path) != WC_IN)
        return false;
    const char *p = path;
    for (;;) {
        const char *dot = strchr(p, '.');
        size_t n = dot ? (size_t)(dot - p) : strlen(p);
        if (n == 0 || p[0] == '$')
            return false;
        bool digits = true;
        for (size_t i = 0; i < n; i++)
            if (p[i] < '0' || p[i] > '9')
                digits = false;
        if (digits) /* positional: the key path omits array positions */
            return false;
        if (!dot)
            return true;
        p = dot + 1;
    }
}
