/* index2d: the keys of a legacy `2d` index — one per location of the
 * document's geo field (its geohash cell, geo/geo2d.c), followed by the
 * values of the index's other fields, as mongod's get2DKeys. */
#include <stdlib.h>
#include <string.h>

#include "doc/path.h"
#include "store/index.h"
#include "util/shellfmt.h"
#include "util/vec.h"

/* The walk over the geo field's values. */
typedef struct index2d_walk {
    const geo2d_params_t *params;
    int64_t *keys;
    size_t len, cap;
    dberr_t *err;
    bool failed;
} index2d_walk_t;

/* Makes room for `n` more keys. */
static void index2d_walk_reserve(index2d_walk_t *w, size_t n)
{
    if (w->cap - w->len >= n)
        return;
    w->cap = w->len + n > 2 * w->cap ? w->len + n : 2 * w->cap;
    w->keys = bson_realloc(w->keys, w->cap * sizeof *w->keys);
}

/* Adds the cells of one location value to the walk's keys, in place. */
static bool index2d_geo_hit(const path_hit_t *hit, void *ctx)
{
    index2d_walk_t *w = ctx;
    if (hit->value->value_type == BSON_TYPE_EOD)
        return true; /* missing: no location */
    size_t n;
    index2d_walk_reserve(w, 16);
    if (!geo2d_keys(w->params, hit->value, w->keys + w->len, w->cap - w->len, &n, w->err)) {
        w->failed = true;
        return false;
    }
    if (n > w->cap - w->len) { /* again, with room for all */
        index2d_walk_reserve(w, n);
        geo2d_keys(w->params, hit->value, w->keys + w->len, n, &n, w->err);
    }
    w->len += n;
    return true;
}

/* The values one of the other fields gives: mongod keys them as one value
 * (null when missing, an array of them when several). */
typedef struct index2d_vals {
    bson_t arr;
    size_t n;
    bson_value_t one;
} index2d_vals_t;

static bool index2d_other_hit(const path_hit_t *hit, void *ctx)
{
    index2d_vals_t *v = ctx;
    if (hit->value->value_type == BSON_TYPE_EOD || hit->whole_leaf_array)
        return true;
    char idx[16];
    const char *key;
    bson_uint32_to_string((uint32_t)v->n, &key, idx, sizeof idx);
    bson_append_value(&v->arr, key, -1, hit->value);
    if (v->n == 0)
        v->one = *hit->value;
    v->n++;
    return true;
}

static int index2d_key_cmp(const void *a, const void *b)
{
    const int64_t *x = a, *y = b;
    return *x < *y ? -1 : *x > *y;
}

bool index2d_keys_of(index_t *ix, const bson_t *doc, index_keys_t *out, dberr_t *err)
{
    dberr_t why;
    index2d_walk_t w = {ix->geo2d, NULL, 0, 0, &why, false};
    path_walk(doc, ix->paths[0], false, index2d_geo_hit, &w);
    if (w.failed) {
        char *shown = shellfmt_doc(doc);
        dberr_set(err, why.code, "%s :: caused by :: %s", why.msg, shown);
        bson_free(shown);
        bson_free(w.keys);
        return false;
    }
    if (w.len == 0) { /* no location: not in the index, as mongod's 2d */
        bson_free(w.keys);
        out->skip = true;
        return true;
    }
    if (w.len > 1) {
        qsort(w.keys, w.len, sizeof *w.keys, index2d_key_cmp);
        ix->multikey = true;
    }
    /* the other fields' part, the same for every location */
    buf_t rest;
    buf_init(&rest);
    for (int f = 1; f < ix->nfields; f++) {
        index2d_vals_t v = {.n = 0};
        bson_init(&v.arr);
        path_walk(doc, ix->paths[f], true, index2d_other_hit, &v);
        bson_value_t val = {.value_type = BSON_TYPE_NULL};
        if (v.n == 1) {
            val = v.one;
        } else if (v.n > 1) {
            val.value_type = BSON_TYPE_ARRAY;
            val.value.v_doc.data = (uint8_t *)bson_get_data(&v.arr);
            val.value.v_doc.data_len = v.arr.len;
        }
        index_append_key_part(ix, f, &val, &rest);
        bson_destroy(&v.arr);
    }
    for (size_t i = 0; i < w.len; i++) {
        if (i > 0 && w.keys[i] == w.keys[i - 1])
            continue; /* one entry per distinct key */
        VEC_RESERVE_ONE(out->keys, out->len, out->cap, 4);
        buf_t *key = &out->keys[out->len++];
        buf_init(key);
        bson_value_t h = {.value_type = BSON_TYPE_INT64};
        h.value.v_int64 = w.keys[i];
        index_append_key_part(ix, 0, &h, key);
        buf_append(key, rest.data, rest.len);
    }
    buf_destroy(&rest);
    bson_free(w.keys);
    return true;
}
