/* geoscan: candidates of a geospatial predicate from a 2dsphere index's
 * S2 cell keys (geo_pred_index_ranges gives the ranges, as mongod's
 * ExpressionMapping) or a 2d index's geohash cells (geo_pred_2d_ranges),
 * under the bounds of the fields before the geometry in a compound 2dsphere
 * index, de-duplicated (a geometry has many cells, a document many
 * locations). */
#include "store/geoscan.h"

#include <stdlib.h>
#include <string.h>

#include "doc/collation.h"
#include "doc/keystring.h"
#include "store/collection-private.h"

/* The key ranges of `ix` for `p` at `radius` (see geoscan_candidates_in):
 * S2 cells for a 2dsphere index, geohash cells for a 2d one. */
static bool geoscan_ranges(const index_t *ix, const geo_pred_t *p, double radius, int64_t **ranges,
                           size_t *n)
{
    if (ix->geo2d)
        return geo_pred_2d_ranges(p, ix->geo2d, radius, ranges, n);
    return geo_pred_index_ranges(p, radius, ranges, n);
}

bool geoscan_bounded(const index_t *ix, const geo_pred_t *p)
{
    if (geo_pred_is_near(p)) {
        geo_near_units_t u = geo_pred_near_units(p);
        return u == GEO_NEAR_RADIANS || u == (ix->geo2d ? GEO_NEAR_FLAT : GEO_NEAR_METRES);
    }
    int64_t *r = NULL;
    size_t n;
    bool ok = geoscan_ranges(ix, p, -1, &r, &n);
    bson_free(r);
    return ok;
}

double geoscan_near_whole(const index_t *ix, const geo_pred_t *p)
{
    return ix->geo2d ? geo_pred_2d_whole(p, ix->geo2d) : geo_pred_near_whole(p);
}

typedef struct geoscan_ent {
    record_t *rec;
    size_t pos;
} geoscan_ent_t;

static int geoscan_ent_cmp(const void *a, const void *b)
{
    const geoscan_ent_t *x = a, *y = b;
    if (x->rec != y->rec)
        return (uintptr_t)x->rec < (uintptr_t)y->rec ? -1 : 1;
    return x->pos < y->pos ? -1 : x->pos > y->pos;
}

static int geoscan_pos_cmp(const void *a, const void *b)
{
    const geoscan_ent_t *x = a, *y = b;
    return x->pos < y->pos ? -1 : x->pos > y->pos;
}

/* Keeps the first of each record appended after `first`, in scan order
 * (index order: by cell, then _id, as mongod's ties). */
static void geoscan_dedupe(recvec_t *v, size_t first)
{
    size_t cnt = v->len - first;
    if (cnt < 2)
        return;
    record_t **items = v->items + first;
    geoscan_ent_t *e = bson_malloc(cnt * sizeof *e);
    for (size_t i = 0; i < cnt; i++)
        e[i] = (geoscan_ent_t){items[i], i};
    if (cnt > 1) /* else nothing to sort, and e may be NULL (qsort must not get it) */
        qsort(e, cnt, sizeof *e, geoscan_ent_cmp);
    size_t w = 1;
    for (size_t r = 1; r < cnt; r++) {
        if (e[r].rec == e[w - 1].rec)
            record_unref(e[r].rec);
        else
            e[w++] = e[r];
    }
    if (w > 1) /* else nothing to sort, and e may be NULL (qsort must not get it) */
        qsort(e, w, sizeof *e, geoscan_pos_cmp);
    for (size_t i = 0; i < w; i++)
        items[i] = e[i].rec;
    v->len = first + w;
    bson_free(e);
}

int geoscan_geo_field(const index_t *ix)
{
    if (ix->geo2d) /* always its first field (16801) */
        return 0;
    for (int f = 0; ix->is_2dsphere && f < ix->nfields; f++)
        if (ix->sphere[f])
            return f;
    return -1;
}

bool geoscan_relevant(const index_t *ix, const matcher_t *m)
{
    int g = geoscan_geo_field(ix);
    return g == 0 || (g > 0 && matcher_path_sargable(m, ix->paths[0]));
}

/* The values one leading field `f` is bound to (equality, else $in),
 * usable as index points: none an array or regex, strings only under the
 * index's collation. False when it has no such bound. */
static bool geoscan_field_points(const index_t *ix, int f, const matcher_t *m, bool same_coll,
                                 const bson_value_t **vals, size_t *n, bson_value_t *one)
{
    matcher_bounds_t b;
    if (matcher_bounds(m, ix->paths[f], &b) && b.has_eq) {
        *one = b.eq;
        *vals = one;
        *n = 1;
    } else if (!matcher_in_values(m, ix->paths[f], vals, n)) {
        return false;
    }
    for (size_t i = 0; i < *n; i++) {
        bson_type_t t = (*vals)[i].value_type;
        if (t == BSON_TYPE_ARRAY || t == BSON_TYPE_REGEX ||
            (!same_coll && collection_value_has_string(&(*vals)[i])))
            return false;
    }
    return true;
}

/* Range mode: the equalities of the leading fields, then a range on the
 * next one (mongod's bounds, read whole: the cells are not bounded). */
static void geoscan_bounds_range(geoscan_bounds_t *b, const index_t *ix, const matcher_t *m,
                                 bool same_coll)
{
    for (int f = 0; f < b->geo; f++) {
        matcher_bounds_t mb;
        if (!matcher_bounds(m, ix->paths[f], &mb))
            break;
        if (mb.has_eq && mb.eq.value_type != BSON_TYPE_ARRAY &&
            mb.eq.value_type != BSON_TYPE_REGEX &&
            (same_coll || !collection_value_has_string(&mb.eq))) {
            index_append_key_part(ix, f, &mb.eq, &b->prefix);
            continue;
        }
        bool strings = (mb.has_lower && collection_value_has_string(&mb.lower)) ||
                       (mb.has_upper && collection_value_has_string(&mb.upper));
        if (f == ix->hashed || (!same_coll && strings)) /* a hash has no ranges */
            break;
        b->has_hi = index_append_range(ix, f, &mb, &b->prefix, &b->lo, &b->hi);
        return;
    }
    buf_append(&b->lo, b->prefix.data, b->prefix.len);
}

void geoscan_bounds_init(geoscan_bounds_t *b, const index_t *ix, const matcher_t *m)
{
    memset(b, 0, sizeof *b);
    buf_init(&b->lo);
    buf_init(&b->prefix);
    buf_init(&b->hi);
    b->geo = geoscan_geo_field(ix);
    bool same_coll = collation_same(ix->collation, matcher_collation(m));
    /* points: the product of each leading field's values */
    buf_t *pts = bson_malloc(sizeof *pts);
    size_t np = 1;
    buf_init(&pts[0]);
    for (int f = 0; f < b->geo; f++) {
        const bson_value_t *vals;
        bson_value_t one;
        size_t n;
        if (!geoscan_field_points(ix, f, m, same_coll, &vals, &n, &one) ||
            np * n > GEOSCAN_MAX_POINTS) {
            for (size_t i = 0; i < np; i++)
                buf_destroy(&pts[i]);
            bson_free(pts);
            geoscan_bounds_range(b, ix, m, same_coll);
            return;
        }
        size_t cnt = np * n;
        buf_t *next = bson_malloc((cnt > 0 ? cnt : 1) * sizeof *next);
        size_t k = 0;
        for (size_t i = 0; i < np; i++) {
            for (size_t j = 0; j < n; j++) {
                buf_init(&next[k]);
                buf_append(&next[k], pts[i].data, pts[i].len);
                index_append_key_part(ix, f, &vals[j], &next[k++]);
            }
            buf_destroy(&pts[i]);
        }
        bson_free(pts);
        pts = next;
        np = k;
    }
    /* one scan per distinct prefix, in index order */
    b->points = pts;
    b->npoints = buf_sort_unique(pts, np);
}

void geoscan_bounds_destroy(geoscan_bounds_t *b)
{
    for (size_t i = 0; i < b->npoints; i++)
        buf_destroy(&b->points[i]);
    bson_free(b->points);
    b->points = NULL;
    b->npoints = 0;
    buf_destroy(&b->lo);
    buf_destroy(&b->prefix);
    buf_destroy(&b->hi);
}

bool geoscan_candidates_in(const index_t *ix, const geoscan_bounds_t *b, const geo_pred_t *p,
                           double radius, recvec_t *cand, size_t *keys)
{
    size_t first = cand->len;
    if (!b->points) /* range mode: the caller reads it as an index scan */
        return false;
    int64_t *ranges = NULL;
    size_t n = 0;
    if (!geoscan_ranges(ix, p, radius, &ranges, &n))
        return false;
    buf_t lo, hi;
    buf_init(&lo);
    buf_init(&hi);
    for (size_t pt = 0; pt < b->npoints; pt++) {
        const buf_t *pre = &b->points[pt];
        for (size_t i = 0; i < n; i++) {
            bson_value_t v = {.value_type = BSON_TYPE_INT64};
            lo.len = hi.len = 0;
            buf_append(&lo, pre->data, pre->len);
            buf_append(&hi, pre->data, pre->len);
            v.value.v_int64 = ranges[2 * i];
            index_append_key_part(ix, b->geo, &v, &lo);
            v.value.v_int64 = ranges[2 * i + 1];
            index_append_key_part(ix, b->geo, &v, &hi);
            btree_pos_t nd;
            for (bool more = btree_seek(ix->map, lo.data, lo.len, &nd); more;
                 more = btree_next(&nd)) {
                size_t klen;
                const uint8_t *key = btree_pos_key(&nd, &klen);
                if (memcmp(key, hi.data, klen < hi.len ? klen : hi.len) > 0)
                    break;
                (*keys)++;
                recvec_push_ref(cand, btree_pos_value(&nd));
            }
        }
    }
    buf_destroy(&lo);
    buf_destroy(&hi);
    bson_free(ranges);
    geoscan_dedupe(cand, first);
    return true;
}
