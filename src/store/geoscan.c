/* geoscan: candidates of a geospatial predicate from a 2dsphere index's
 * S2 cell keys (geo_pred_index_ranges gives the ranges, as mongod's
 * ExpressionMapping), de-duplicated (a geometry has many cells). */
#include "store/geoscan.h"

#include <stdlib.h>
#include <string.h>

bool geoscan_usable(const index_t *ix)
{
    return ix->is_2dsphere && ix->nfields > 0 && ix->sphere[0];
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

bool geoscan_candidates(const index_t *ix, const geo_pred_t *p, double radius, recvec_t *cand,
                        size_t *keys)
{
    int64_t *ranges = NULL;
    size_t n = 0;
    if (!geo_pred_index_ranges(p, radius, &ranges, &n))
        return false;
    size_t first = cand->len;
    buf_t lo, hi;
    buf_init(&lo);
    buf_init(&hi);
    for (size_t i = 0; i < n; i++) {
        bson_value_t v = {.value_type = BSON_TYPE_INT64};
        lo.len = hi.len = 0;
        v.value.v_int64 = ranges[2 * i];
        index_append_key_part(ix, 0, &v, &lo);
        v.value.v_int64 = ranges[2 * i + 1];
        index_append_key_part(ix, 0, &v, &hi);
        btree_pos_t nd;
        for (bool more = btree_seek(ix->map, lo.data, lo.len, &nd); more; more = btree_next(&nd)) {
            size_t klen;
            const uint8_t *key = btree_pos_key(&nd, &klen);
            if (memcmp(key, hi.data, klen < hi.len ? klen : hi.len) > 0)
                break;
            (*keys)++;
            recvec_push_ref(cand, btree_pos_value(&nd));
        }
    }
    buf_destroy(&lo);
    buf_destroy(&hi);
    bson_free(ranges);
    geoscan_dedupe(cand, first);
    return true;
}
