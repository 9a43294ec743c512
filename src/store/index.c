/* index: key generation (compound, multikey, sparse, partial), the ordered
 * map of keys, unique checks and mongod's duplicate-key error. */
#include "store/index.h"

#include <stdio.h>
#include <string.h>

#include "doc/bsonhash.h"
#include "doc/keystring.h"
#include "store/textindex.h"
#include "store/wildcard.h"
#include "doc/path.h"
#include "geo/geo.h"
#include "util/bsonview.h"
#include "util/shellfmt.h"
#include "util/vec.h"

void index_keys_init(index_keys_t *k)
{
    k->keys = NULL;
    k->len = k->cap = 0;
    k->skip = false;
}

void index_keys_destroy(index_keys_t *k)
{
    for (size_t i = 0; i < k->len; i++)
        buf_destroy(&k->keys[i]);
    bson_free(k->keys);
    index_keys_init(k);
}

static buf_t *index_keys_add(index_keys_t *k)
{
    VEC_RESERVE_ONE(k->keys, k->len, k->cap, 4);
    buf_init(&k->keys[k->len]);
    return &k->keys[k->len++];
}

/* Values one indexed path yields for a document. */
typedef struct index_vals {
    bson_value_t v[64]; /* borrowed from the document */
    int n;
    bool overflow;      /* more than fit: treated as an error */
    bson_value_t *ext;  /* a 2dsphere field's cells instead of v (as many as the
                         * coverings give), or NULL */
} index_vals_t;

/* The i-th value of `vals`. */
static const bson_value_t *index_vals_at(const index_vals_t *vals, int i)
{
    return vals->ext ? &vals->ext[i] : &vals->v[i];
}

static void index_vals_push(index_vals_t *vals, const bson_value_t *v)
{
    if (vals->n == (int)(sizeof vals->v / sizeof vals->v[0])) {
        vals->overflow = true;
        return;
    }
    vals->v[vals->n++] = *v;
}

static bool index_is_digits(const char *s, size_t n)
{
    if (n == 0)
        return false;
    for (size_t i = 0; i < n; i++)
        if (s[i] < '0' || s[i] > '9')
            return false;
    return true;
}

/* Collects the values `path` reaches in the container `it` iterates:
 * arrays met on the way are expanded, as mongod's multikey indexes do. */
static void index_collect(bson_iter_t *container, const char *path, bool is_array,
                          index_vals_t *vals, bool *array_seen)
{
    const char *dot = strchr(path, '.');
    size_t clen = dot ? (size_t)(dot - path) : strlen(path);
    bson_iter_t it = *container;
    if (is_array) {
        /* each document element continues the path; a numeric component
         * also indexes the array */
        bool numeric = index_is_digits(path, clen);
        while (bson_iter_next(&it)) {
            if (BSON_ITER_HOLDS_DOCUMENT(&it)) {
                bson_iter_t child;
                if (bson_iter_recurse(&it, &child)) {
                    bson_iter_t again = child;
                    (void)again;
                    index_collect(&child, path, false, vals, array_seen);
                }
            }
            if (numeric && strlen(bson_iter_key(&it)) == clen &&
                memcmp(bson_iter_key(&it), path, clen) == 0) {
                bson_iter_t one = it;
                if (!dot) {
                    index_vals_push(vals, bson_iter_value(&one));
                } else if (BSON_ITER_HOLDS_DOCUMENT(&one) || BSON_ITER_HOLDS_ARRAY(&one)) {
                    bson_iter_t child;
                    if (bson_iter_recurse(&one, &child))
                        index_collect(&child, dot + 1, BSON_ITER_HOLDS_ARRAY(&one), vals,
                                      array_seen);
                }
            }
        }
        return;
    }
    while (bson_iter_next(&it)) {
        const char *key = bson_iter_key(&it);
        if (strlen(key) != clen || memcmp(key, path, clen) != 0)
            continue;
        if (!dot) {
            if (BSON_ITER_HOLDS_ARRAY(&it)) {
                *array_seen = true;
                bson_iter_t child;
                int before = vals->n;
                if (bson_iter_recurse(&it, &child))
                    while (bson_iter_next(&child))
                        index_vals_push(vals, bson_iter_value(&child));
                if (vals->n == before) {
                    bson_value_t undef = {.value_type = BSON_TYPE_UNDEFINED};
                    index_vals_push(vals, &undef);
                }
            } else {
                index_vals_push(vals, bson_iter_value(&it));
            }
        } else if (BSON_ITER_HOLDS_DOCUMENT(&it) || BSON_ITER_HOLDS_ARRAY(&it)) {
            bool arr = BSON_ITER_HOLDS_ARRAY(&it);
            if (arr)
                *array_seen = true;
            bson_iter_t child;
            if (bson_iter_recurse(&it, &child))
                index_collect(&child, dot + 1, arr, vals, array_seen);
        }
        return;
    }
}

static int index_buf_cmp(const void *a, const void *b)
{
    const buf_t *x = a, *y = b;
    size_t n = x->len < y->len ? x->len : y->len;
    int c = n ? memcmp(x->data, y->data, n) : 0;
    return c ? c : (x->len < y->len ? -1 : x->len > y->len);
}

/* mongod's 16766 for a hashed field that meets an array: names the path
 * up to the first array on it. */
static bool index_hashed_array_error(const bson_t *doc, const char *path, dberr_t *err)
{
    char prefix[1024];
    size_t len = strlen(path);
    snprintf(prefix, sizeof prefix, "%s", path);
    for (size_t end = 0; end <= len && end < sizeof prefix; end++) {
        if (path[end] != '.' && path[end] != '\0')
            continue;
        memcpy(prefix, path, end);
        prefix[end] = '\0';
        bson_iter_t it, found;
        if (bson_iter_init(&it, doc) && bson_iter_find_descendant(&it, prefix, &found) &&
            BSON_ITER_HOLDS_ARRAY(&found))
            break;
    }
    return dberr_set(err, 16766,
                     "Error: hashed indexes do not currently support array values. Found array "
                     "at path: %s",
                     prefix);
}

void index_append_key_part(const index_t *ix, int f, const bson_value_t *v, buf_t *key)
{
    if (f == ix->hashed) {
        bson_value_t h = {.value_type = BSON_TYPE_INT64};
        h.value.v_int64 = bsonhash_value(v);
        keystring_append(key, &h, false);
        return;
    }
    keystring_append_coll(key, v, ix->dirs[f] < 0, ix->collation);
}

bool index_spec_has_field(const bson_t *spec, bool (*is_kind)(const bson_iter_t *field))
{
    bson_iter_t it, k;
    if (!bson_iter_init_find(&it, spec, "key") || !BSON_ITER_HOLDS_DOCUMENT(&it) ||
        !bson_iter_recurse(&it, &k))
        return false;
    while (bson_iter_next(&k))
        if (is_kind(&k))
            return true;
    return false;
}

bool index_append_range(const index_t *ix, int f, const matcher_bounds_t *b, const buf_t *prefix,
                        buf_t *lo, buf_t *hi)
{
    const bson_value_t *low = b->has_lower ? &b->lower : NULL;
    const bson_value_t *high = b->has_upper ? &b->upper : NULL;
    if (ix->dirs[f] < 0) {
        const bson_value_t *t = low;
        low = high;
        high = t;
    }
    if (ix->multikey && high && low) /* bounds may be met by different elements */
        high = NULL;
    buf_append(lo, prefix->data, prefix->len);
    if (low)
        index_append_key_part(ix, f, low, lo);
    if (!high)
        return false;
    buf_append(hi, prefix->data, prefix->len);
    index_append_key_part(ix, f, high, hi);
    return true;
}

/* The geometries one 2dsphere path reaches (a trailing array is one
 * geometry, a legacy pair; arrays on the way are expanded). */
/* Per field, the cells of a 2dsphere field (a large polygon covers
 * hundreds of cells at the coarsest level: mongod indexes them all). */
typedef struct index_geo_buf {
    bson_value_t *v;
    size_t len, cap;
} index_geo_buf_t;

typedef struct index_geo_walk {
    index_geo_buf_t *buf;
    const bson_value_t *bad; /* the first value that is not a geometry */
    dberr_t *err;
} index_geo_walk_t;

static bool index_geo_hit(const path_hit_t *hit, void *ctx)
{
    index_geo_walk_t *w = ctx;
    bson_type_t t = hit->value->value_type;
    if (t == BSON_TYPE_EOD || t == BSON_TYPE_NULL || t == BSON_TYPE_UNDEFINED)
        return true;
    int64_t small[64], *cells = small;
    size_t n;
    if (!geo_index_cells(hit->value, cells, 64, &n, w->err)) {
        w->bad = hit->value;
        return false;
    }
    if (n > 64) { /* again, with room for all */
        cells = bson_malloc(n * sizeof *cells);
        size_t again;
        geo_index_cells(hit->value, cells, n, &again, w->err);
    }
    index_geo_buf_t *b = w->buf;
    if (b->len + n > b->cap) {
        b->cap = (b->len + n) * 2;
        b->v = bson_realloc(b->v, b->cap * sizeof *b->v);
    }
    for (size_t i = 0; i < n; i++) {
        b->v[b->len].value_type = BSON_TYPE_INT64;
        b->v[b->len++].value.v_int64 = cells[i];
    }
    if (cells != small)
        bson_free(cells);
    return true;
}

/* Collects the S2 cells of the 2dsphere field `f`: mongod's 16755 when a
 * value there is not a geometry. */
static bool index_geo_collect(const index_t *ix, int f, const bson_t *doc, index_vals_t *vals,
                              dberr_t *err)
{
    static __thread index_geo_buf_t bufs[INDEX_MAX_FIELDS];
    dberr_t why;
    bufs[f].len = 0;
    index_geo_walk_t w = {&bufs[f], NULL, &why};
    path_walk(doc, ix->paths[f], false, index_geo_hit, &w);
    if (bufs[f].len) {
        vals->ext = bufs[f].v;
        vals->n = (int)bufs[f].len;
    }
    if (w.bad) {
        char *shown = shellfmt_doc(doc);
        dberr_set(err, 16755, "Can't extract geo keys: %s  %s", shown, why.msg);
        bson_free(shown);
        return false;
    }
    return true;
}

/* The most keys one document may give a 2dsphere index (a polygon's
 * hundreds of cells times the elements of arrays in other fields). */
#define INDEX_MAX_GEO_KEYS 100000

/* A 2dsphere index's keys, as mongod's S2 key generation: the cartesian
 * product of every field's values (its cells for a 2dsphere field, the
 * elements of an array elsewhere), so arrays beside a geometry are no
 * parallel arrays. */
static bool index_keys_product(const index_t *ix, const index_vals_t *vals, index_keys_t *out,
                               dberr_t *err)
{
    size_t total = 1;
    for (int f = 0; f < ix->nfields; f++) {
        total *= (size_t)vals[f].n;
        if (total > INDEX_MAX_GEO_KEYS)
            return dberr_set(err, DBERR_CANNOT_CREATE_INDEX,
                             "atomdb indexes at most %d 2dsphere keys per document (the "
                             "geometry's cells times the elements of the other fields' arrays); "
                             "this document gives more",
                             INDEX_MAX_GEO_KEYS);
    }
    int at[INDEX_MAX_FIELDS] = {0};
    for (size_t k = 0; k < total; k++) {
        buf_t *key = index_keys_add(out);
        for (int f = 0; f < ix->nfields; f++)
            index_append_key_part(ix, f, index_vals_at(&vals[f], at[f]), key);
        for (int f = ix->nfields - 1; f >= 0; f--) { /* the next combination */
            if (++at[f] < vals[f].n)
                break;
            at[f] = 0;
        }
    }
    return true;
}

bool index_keys_of(index_t *ix, const bson_t *doc, index_keys_t *out, dberr_t *err)
{
    bool any_geo = false;
    static __thread index_vals_t vals[INDEX_MAX_FIELDS];
    int multi_field = -1;
    bool any_present = false;
    if (ix->partial && !matcher_matches(ix->partial, doc, NULL)) {
        out->skip = true;
        return true;
    }
    if (ix->geo2d)
        return index2d_keys_of(ix, doc, out, err);
    if (ix->text) {
        if (!textindex_keys_of(ix->text, doc, out, err))
            return false;
        goto distinct;
    }
    if (ix->wildcard) {
        if (!wildcard_keys_of(ix->wildcard, ix->collation, doc, out, &ix->multikey, err))
            return false;
        goto distinct;
    }
    for (int f = 0; f < ix->nfields; f++) {
        vals[f].n = 0;
        vals[f].overflow = false;
        vals[f].ext = NULL;
        bool array_seen = false;
        bson_iter_t it;
        if (ix->sphere[f]) {
            if (!index_geo_collect(ix, f, doc, &vals[f], err))
                return false;
            any_geo = any_geo || vals[f].n > 0;
        } else if (bson_iter_init(&it, doc)) {
            index_collect(&it, ix->paths[f], false, &vals[f], &array_seen);
        }
        if (vals[f].overflow)
            return dberr_set(err, DBERR_CANNOT_CREATE_INDEX,
                             "atomdb indexes at most 64 array elements per field; field '%s' "
                             "has more",
                             ix->paths[f]);
        if (f == ix->hashed && array_seen)
            return index_hashed_array_error(doc, ix->paths[f], err);
        if (vals[f].n > 0)
            any_present = true;
        if (vals[f].n == 0) {
            bson_value_t null = {.value_type = BSON_TYPE_NULL};
            index_vals_push(&vals[f], &null);
        }
        if (ix->is_2dsphere && (vals[f].n > 1 || array_seen)) {
            ix->multikey = true; /* keys are the product of the fields' values */
        } else if (vals[f].n > 1 || array_seen) {
            if (multi_field >= 0 && vals[f].n > 1 && vals[multi_field].n > 1)
                return dberr_set(err, 171, "cannot index parallel arrays [%s] [%s]",
                                 ix->paths[f], ix->paths[multi_field]);
            if (vals[f].n > 1 || multi_field < 0)
                multi_field = f;
            ix->multikey = true;
        }
    }
    if (ix->is_2dsphere && !any_geo) { /* as mongod's 2dsphere v2+: no geometry, no entry */
        out->skip = true;
        return true;
    }
    if (ix->sparse && !any_present) {
        out->skip = true;
        return true;
    }
    if (ix->is_2dsphere) {
        if (!index_keys_product(ix, vals, out, err))
            return false;
        goto distinct;
    }
    int n = multi_field >= 0 ? vals[multi_field].n : 1;
    for (int i = 0; i < n; i++) {
        buf_t *key = index_keys_add(out);
        for (int f = 0; f < ix->nfields; f++) {
            const bson_value_t *v = index_vals_at(&vals[f], f == multi_field ? i : 0);
            index_append_key_part(ix, f, v, key);
        }
    }
distinct:
    if (out->len > 1) { /* one entry per distinct key */
        qsort(out->keys, out->len, sizeof *out->keys, index_buf_cmp);
        size_t w = 1;
        for (size_t r = 1; r < out->len; r++) {
            if (index_buf_cmp(&out->keys[r], &out->keys[w - 1]) == 0)
                buf_destroy(&out->keys[r]);
            else
                out->keys[w++] = out->keys[r];
        }
        out->len = w;
    }
    return true;
}

void index_map_key(const index_t *ix, const buf_t *key, const bson_value_t *id, buf_t *out)
{
    out->len = 0;
    buf_append(out, key->data, key->len);
    if (!ix->unique)
        keystring_append(out, id, false);
}

record_t *index_unique_conflict(const index_t *ix, const buf_t *key, const record_t *self)
{
    record_t *r = btree_get(ix->map, key->data, key->len);
    return r == self ? NULL : r;
}

static void index_key_value(const index_t *ix, const bson_t *doc, bson_t *out)
{
    for (int f = 0; f < ix->nfields; f++) {
        bson_iter_t it;
        bson_iter_t found;
        if (bson_iter_init(&it, doc) && bson_iter_find_descendant(&it, ix->paths[f], &found))
            bson_append_value(out, ix->paths[f], -1, bson_iter_value(&found));
        else
            bson_append_null(out, ix->paths[f], -1);
    }
}

void index_dup_info(const index_t *ix, const bson_t *doc, bson_t *out)
{
    bson_t kv;
    bson_append_document(out, "keyPattern", -1, &ix->key);
    bson_append_document_begin(out, "keyValue", -1, &kv);
    index_key_value(ix, doc, &kv);
    bson_append_document_end(out, &kv);
}

bool index_dup_error(const index_t *ix, const char *ns, const bson_t *doc, dberr_t *err)
{
    bson_t kv = BSON_INITIALIZER;
    index_key_value(ix, doc, &kv);
    char *shown = shellfmt_doc(&kv);
    dberr_set(err, DBERR_DUPLICATE_KEY, "E11000 duplicate key error collection: %s index: %s dup key: %s",
              ns, ix->name, shown);
    bson_free(shown);
    bson_destroy(&kv);
    bson_t extra = BSON_INITIALIZER;
    index_dup_info(ix, doc, &extra);
    dberr_set_extra(err, bson_get_data(&extra), extra.len);
    bson_destroy(&extra);
    return false;
}

void index_set_hidden(index_t *ix, bool hidden)
{
    bson_t spec = BSON_INITIALIZER;
    bson_iter_t it;
    bool placed = false;
    bson_iter_init(&it, &ix->spec);
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (strcmp(k, "hidden") == 0)
            continue;
        bson_append_value(&spec, k, -1, bson_iter_value(&it));
        if (strcmp(k, "name") == 0 && hidden && !placed) {
            BSON_APPEND_BOOL(&spec, "hidden", true);
            placed = true;
        }
    }
    bson_destroy(&ix->spec);
    bson_steal(&ix->spec, &spec);
    ix->hidden = hidden;
}

bool index_key_equals(const index_t *ix, const bson_t *key)
{
    return bson_equal(&ix->key, key);
}

static index_t *index_alloc(void)
{
    index_t *ix = bson_malloc0(sizeof *ix);
    bson_init(&ix->key);
    bson_init(&ix->spec);
    ix->expire_after_s = -1;
    ix->hashed = -1;
    ix->map = btree_new();
    return ix;
}

void index_destroy(index_t *ix)
{
    if (!ix)
        return;
    bson_free(ix->name);
    bson_destroy(&ix->key);
    bson_destroy(&ix->spec);
    matcher_destroy(ix->partial);
    collation_destroy(ix->collation);
    textindex_destroy(ix->text);
    wildcard_destroy(ix->wildcard);
    bson_free(ix->geo2d);
    btree_destroy(ix->map, NULL);
    for (int i = 0; i < ix->nfields; i++)
        bson_free(ix->paths[i]);
    bson_free(ix);
}

index_t *index_new_id(void)
{
    index_t *ix = index_alloc();
    ix->name = bson_strdup("_id_");
    BSON_APPEND_INT32(&ix->key, "_id", 1);
    ix->nfields = 1;
    ix->paths[0] = bson_strdup("_id");
    ix->dirs[0] = 1;
    ix->is_id = true;
    ix->unique = true;
    BSON_APPEND_INT32(&ix->spec, "v", 2);
    BSON_APPEND_DOCUMENT(&ix->spec, "key", &ix->key);
    BSON_APPEND_UTF8(&ix->spec, "name", "_id_");
    return ix;
}

void index_set_id_collation(index_t *ix, collation_t *coll)
{
    collation_t *old = ix->collation;
    ix->collation = collation_ref(coll);
    collation_destroy(old);
    bson_reinit(&ix->spec);
    BSON_APPEND_INT32(&ix->spec, "v", 2);
    BSON_APPEND_DOCUMENT(&ix->spec, "key", &ix->key);
    BSON_APPEND_UTF8(&ix->spec, "name", "_id_");
    if (ix->collation)
        collation_append(ix->collation, &ix->spec, "collation");
}

/* A 2d index's options (mongod's GeoHashConverter parameters) and what
 * atomdb does not combine with it. */
static bool index_2d_check(index_t *ix, const bson_t *spec, int nhashed, dberr_t *err)
{
    if (ix->is_2dsphere || nhashed > 0 || ix->wildcard || ix->text)
        return dberr_set(err, DBERR_CANNOT_CREATE_INDEX,
                         "Can't use more than one index plugin for a single index.");
    if (ix->collation) { /* as mongod, naming the resolved collation */
        bson_t wrap = BSON_INITIALIZER;
        bson_iter_t it;
        char *shown = NULL;
        collation_append(ix->collation, &wrap, "c");
        if (bson_iter_init_find(&it, &wrap, "c"))
            shown = shellfmt_value(bson_iter_value(&it));
        dberr_set(err, DBERR_CANNOT_CREATE_INDEX, "Index type '2d' does not support collation: %s",
                  shown ? shown : "{}");
        bson_free(shown);
        bson_destroy(&wrap);
        return false;
    }
    if (ix->unique)
        return dberr_set(err, DBERR_NOT_IMPLEMENTED, "atomdb does not support unique 2d indexes");
    return geo2d_params_parse(spec, ix->geo2d, err);
}

index_t *index_new(const bson_t *spec, dberr_t *err)
{
    index_t *ix = index_alloc();
    bson_iter_t it;
    bool have_key = false;
    int nhashed = 0;
    bool have_sphere_version = false;
    bool have_2d_option = false;
    bson_t text_opts = BSON_INITIALIZER; /* a text index's resolved options */
    bool is_text = textindex_is_text_spec(spec);
    bool is_wild = wildcard_is_spec(spec);
    int version = 2;
    if (is_text && is_wild) { /* {"a.$**": 1, b: "text"}: as mongod */
        dberr_set(err, DBERR_CANNOT_CREATE_INDEX,
                  "Can't use more than one index plugin for a single index.");
        goto fail;
    }
    if (!bson_iter_init(&it, spec))
        goto bad;
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (strcmp(k, "key") == 0 && is_text) {
            ix->text = textindex_new(spec, &ix->key, &text_opts, err);
            if (!ix->text)
                goto fail;
            have_key = true;
            ix->multikey = true; /* a document has a key per term, as mongod reports */
        } else if (is_text && textindex_is_text_option(k)) {
            /* parsed with the key (textindex_new) */
        } else if (strcmp(k, "key") == 0 && is_wild) {
            ix->wildcard = wildcard_new(spec, &ix->key, err);
            if (!ix->wildcard)
                goto fail;
            have_key = true;
        } else if (strcmp(k, "wildcardProjection") == 0) {
            if (!is_wild) {
                dberr_set(err, DBERR_BAD_VALUE,
                          "The field 'wildcardProjection' is only allowed in an 'wildcard' index");
                goto fail;
            }
            /* parsed with the key (wildcard_new) */
        } else if (strcmp(k, "key") == 0) {
            if (!BSON_ITER_HOLDS_DOCUMENT(&it)) {
                dberr_set(err, DBERR_TYPE_MISMATCH, "The 'key' field must be an object");
                goto fail;
            }
            bson_t key;
            bsonview_iter(&it, &key);
            bson_iter_t kit;
            bson_iter_init(&kit, &key);
            while (bson_iter_next(&kit)) {
                if (ix->nfields == INDEX_MAX_FIELDS) {
                    dberr_set(err, DBERR_CANNOT_CREATE_INDEX,
                              "Index key pattern has more than 32 fields");
                    goto fail;
                }
                const char *path = bson_iter_key(&kit);
                double d = 0;
                if (BSON_ITER_HOLDS_NUMBER(&kit))
                    d = bson_iter_as_double(&kit);
                if (BSON_ITER_HOLDS_UTF8(&kit) && strcmp(bson_iter_utf8(&kit, NULL), "hashed") == 0 &&
                    path[0] != '\0' && path[0] != '$') {
                    nhashed++;
                    ix->hashed = ix->nfields;
                    ix->paths[ix->nfields] = bson_strdup(path);
                    ix->dirs[ix->nfields] = 1;
                    ix->nfields++;
                    continue;
                }
                if (BSON_ITER_HOLDS_UTF8(&kit) && strcmp(bson_iter_utf8(&kit, NULL), "2d") == 0 &&
                    path[0] != '\0' && path[0] != '$') {
                    if (ix->is_2dsphere || nhashed > 0) { /* mongod's validateKeyPattern */
                        dberr_set(err, DBERR_CANNOT_CREATE_INDEX,
                                  "Can't use more than one index plugin for a single index.");
                        goto fail;
                    }
                    if (ix->geo2d || ix->nfields > 0) { /* as mongod's parseTwoDParams */
                        dberr_set(err, ix->geo2d ? 16800 : 16801,
                                  ix->geo2d ? "can't have 2 geo fields"
                                            : "2d has to be first in index");
                        goto fail;
                    }
                    ix->geo2d = bson_malloc0(sizeof *ix->geo2d);
                    ix->paths[ix->nfields] = bson_strdup(path);
                    ix->dirs[ix->nfields] = 1;
                    ix->nfields++;
                    continue;
                }
                if (BSON_ITER_HOLDS_UTF8(&kit) &&
                    strcmp(bson_iter_utf8(&kit, NULL), "2dsphere") == 0 && path[0] != '\0' &&
                    path[0] != '$') {
                    ix->paths[ix->nfields] = bson_strdup(path);
                    ix->dirs[ix->nfields] = 1;
                    ix->sphere[ix->nfields] = true;
                    ix->is_2dsphere = true;
                    ix->nfields++;
                    continue;
                }
                if (BSON_ITER_HOLDS_UTF8(&kit)) {
                    dberr_set(err, DBERR_CANNOT_CREATE_INDEX,
                              "atomdb does not support '%s' indexes yet",
                              bson_iter_utf8(&kit, NULL));
                    goto fail;
                }
                if (d == 0 || path[0] == '\0' || path[0] == '$') {
                    dberr_set(err, DBERR_CANNOT_CREATE_INDEX,
                              "Error in specification %s :: caused by :: Values in the index key "
                              "pattern must be non-zero numbers",
                              "key");
                    goto fail;
                }
                ix->paths[ix->nfields] = bson_strdup(path);
                ix->dirs[ix->nfields] = d > 0 ? 1 : -1;
                ix->nfields++;
            }
            bson_copy_to(&key, &ix->key) ;
            have_key = ix->nfields > 0;
            if (nhashed > 1) {
                char *shown = shellfmt_doc(&key);
                dberr_set(err, 31303,
                          "A maximum of one index field is allowed to be hashed but found %d for "
                          "'key' %s",
                          nhashed, shown);
                bson_free(shown);
                goto fail;
            }
        } else if (strcmp(k, "name") == 0) {
            if (!BSON_ITER_HOLDS_UTF8(&it)) {
                dberr_set(err, DBERR_TYPE_MISMATCH, "The field 'name' must be a string, but got %s",
                          shellfmt_type_name(bson_iter_type(&it)));
                goto fail;
            }
            ix->name = bson_strdup(bson_iter_utf8(&it, NULL));
        } else if (strcmp(k, "unique") == 0) {
            ix->unique = bson_iter_as_bool(&it);
        } else if (strcmp(k, "sparse") == 0) {
            ix->sparse = bson_iter_as_bool(&it);
        } else if (strcmp(k, "expireAfterSeconds") == 0) {
            if (!BSON_ITER_HOLDS_NUMBER(&it) || bson_iter_as_int64(&it) < 0) {
                dberr_set(err, DBERR_CANNOT_CREATE_INDEX,
                          "TTL index 'expireAfterSeconds' option must be a non-negative number");
                goto fail;
            }
            ix->expire_after_s = bson_iter_as_int64(&it);
        } else if (strcmp(k, "partialFilterExpression") == 0) {
            if (!BSON_ITER_HOLDS_DOCUMENT(&it)) {
                dberr_set(err, DBERR_TYPE_MISMATCH,
                          "The field 'partialFilterExpression' must be an object");
                goto fail;
            }
            bson_t pf;
            bsonview_iter(&it, &pf);
            ix->partial = matcher_new(&pf, err);
            if (!ix->partial)
                goto fail;
        } else if (strcmp(k, "hidden") == 0) {
            if (!BSON_ITER_HOLDS_BOOL(&it)) {
                dberr_set(err, DBERR_TYPE_MISMATCH, "The field 'hidden' must be a boolean");
                goto fail;
            }
            ix->hidden = bson_iter_bool(&it);
        } else if (strcmp(k, "v") == 0) {
            if (!BSON_ITER_HOLDS_NUMBER(&it) ||
                (bson_iter_as_int64(&it) != 1 && bson_iter_as_int64(&it) != 2)) {
                dberr_set(err, DBERR_CANNOT_CREATE_INDEX,
                          "Invalid index specification: index version must be 1 or 2");
                goto fail;
            }
            version = (int)bson_iter_as_int64(&it);
        } else if (strcmp(k, "collation") == 0) {
            if (!collation_parse_iter(&it, &ix->collation, err))
                goto fail;
        } else if (strcmp(k, "background") == 0 || strcmp(k, "ns") == 0) {
            /* mongod 7 accepts and ignores both (every build is online);
             * background stays in the spec, ns does not */
        } else if (textindex_is_text_option(k)) {
            dberr_set(err, DBERR_CANNOT_CREATE_INDEX,
                      "the index option '%s' is for text indexes only", k);
            goto fail;
        } else if (strcmp(k, "2dsphereIndexVersion") == 0) {
            if (!BSON_ITER_HOLDS_NUMBER(&it) || bson_iter_as_double(&it) != 3) {
                dberr_set(err, DBERR_NOT_IMPLEMENTED,
                          "atomdb supports 2dsphereIndexVersion 3 only");
                goto fail;
            }
            have_sphere_version = true;
        } else if (geo2d_is_option(k)) {
            have_2d_option = true; /* read with the whole spec below */
        } else if (strcmp(k, "finestIndexedLevel") == 0 || strcmp(k, "coarsestIndexedLevel") == 0 ||
                   strcmp(k, "storageEngine") == 0 || strcmp(k, "prepareUnique") == 0 ||
                   strcmp(k, "clustered") == 0) {
            dberr_set(err, DBERR_NOT_IMPLEMENTED,
                      "atomdb does not support the index option '%s' yet", k);
            goto fail;
        } else {
            dberr_set(err, DBERR_INVALID_INDEX_SPECIFICATION_OPTION,
                      "The field '%s' is not valid for an index specification. Specification: %s",
                      k, "index spec");
            goto fail;
        }
    }
    /* mongod 7.0's validateIndexSpec: key, then name, are required (it
     * does not make up a name; drivers and shells send one) */
    if (!have_key || !ix->name) {
        char *shown = shellfmt_doc(spec);
        dberr_set(err, DBERR_FAILED_TO_PARSE,
                  "Error in specification %s :: caused by :: The '%s' field is a required "
                  "property of an index specification",
                  shown, have_key ? "name" : "key");
        bson_free(shown);
        goto fail;
    }
    if (ix->name[0] == '\0') { /* IndexCatalogImpl::_isSpecOk, on the spec with its v */
        char *shown = shellfmt_doc(spec);
        size_t len = strlen(shown);
        bool add_v = !bson_has_field(spec, "v") && len >= 2;
        dberr_set(err, DBERR_CANNOT_CREATE_INDEX,
                  "Error in specification %.*s%s :: caused by :: index name cannot be empty",
                  (int)(add_v ? len - 2 : len), shown, add_v ? ", v: 2 }" : "");
        bson_free(shown);
        goto fail;
    }
    if (ix->wildcard && (ix->sparse || ix->unique || ix->expire_after_s >= 0 || version < 2)) {
        /* as mongod's IndexCatalogImpl::_isSpecOk, in its order */
        if (ix->sparse || ix->unique)
            dberr_set(err, DBERR_CANNOT_CREATE_INDEX,
                      "Index type 'wildcard' does not support the %s option",
                      ix->sparse ? "sparse" : "unique");
        else if (ix->expire_after_s >= 0)
            dberr_set(err, DBERR_CANNOT_CREATE_INDEX, "Index type 'wildcard' cannot be a TTL index");
        else
            dberr_set(err, DBERR_CANNOT_CREATE_INDEX,
                      "Index version v=%d does not support the key type '$**'; wildcard indexes "
                      "need v=2",
                      version);
        goto fail;
    }
    if (ix->geo2d && !index_2d_check(ix, spec, nhashed, err))
        goto fail;
    if (!ix->geo2d && have_2d_option) {
        dberr_set(err, DBERR_NOT_IMPLEMENTED,
                  "atomdb takes the index options 'bits', 'min' and 'max' on 2d indexes only");
        goto fail;
    }
    if (ix->wildcard && wildcard_is_compound(ix->wildcard)) {
        /* a valid compound wildcard index (mongod 7.0): not built yet;
         * what mongod does is in docs/compound-wildcard.md */
        dberr_set(err, DBERR_NOT_IMPLEMENTED,
                  "atomdb does not support compound wildcard indexes yet (a '$**' field with "
                  "other fields in one key pattern)");
        goto fail;
    }
    if (ix->hashed >= 0 && ix->unique) {
        dberr_set(err, 16764,
                  "Currently hashed indexes cannot guarantee uniqueness. Use a regular index.");
        goto fail;
    }
    if (ix->hashed >= 0 && ix->collation) {
        /* mongod hashes a string's collation key; atomdb does not yet */
        dberr_set(err, DBERR_NOT_IMPLEMENTED,
                  "atomdb does not support a collation on a hashed index yet");
        goto fail;
    }
    if (ix->text && (ix->unique || ix->collation || ix->expire_after_s >= 0)) {
        dberr_set(err, DBERR_CANNOT_CREATE_INDEX,
                  "atomdb does not support the option '%s' on a text index",
                  ix->unique ? "unique" : ix->collation ? "collation" : "expireAfterSeconds");
        goto fail;
    }
    if (ix->nfields == 1 && strcmp(ix->paths[0], "_id") == 0 && !ix->partial && !ix->sparse &&
        ix->hashed < 0) {
        ix->is_id = true;
        ix->unique = true;
    }
    if (ix->is_id && ix->hidden) {
        dberr_set(err, DBERR_BAD_VALUE, "can't hide _id index");
        goto fail;
    }
    if (ix->partial)
        matcher_set_collation(ix->partial, ix->collation);
    BSON_APPEND_INT32(&ix->spec, "v", 2);
    BSON_APPEND_DOCUMENT(&ix->spec, "key", &ix->key);
    BSON_APPEND_UTF8(&ix->spec, "name", ix->name);
    bson_iter_init(&it, spec);
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (strcmp(k, "v") && strcmp(k, "key") && strcmp(k, "name") && strcmp(k, "ns") &&
            strcmp(k, "collation") && (strcmp(k, "hidden") || ix->hidden) &&
            !(ix->text && textindex_is_text_option(k)))
            bson_append_value(&ix->spec, k, -1, bson_iter_value(&it));
    }
    bson_concat(&ix->spec, &text_opts); /* empty unless a text index */
    bson_destroy(&text_opts);
    if (ix->is_2dsphere && !have_sphere_version) /* as mongod: the version it built */
        BSON_APPEND_INT32(&ix->spec, "2dsphereIndexVersion", 3);
    if (ix->collation) /* as mongod: the resolved spec; the simple collation is not shown */
        collation_append(ix->collation, &ix->spec, "collation");
    return ix;
bad:
    dberr_set(err, DBERR_INVALID_BSON, "invalid index spec");
fail:
    bson_destroy(&text_opts);
    index_destroy(ix);
    return NULL;
}
