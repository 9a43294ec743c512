/* record: reference-counted immutable documents and arrays of them. */
#include "store/record.h"

#include "util/fiber.h"

#include <string.h>

#include "util/vec.h"

record_t *record_new(const bson_t *doc)
{
    record_t *r = bson_malloc(sizeof *r + doc->len);
    r->refs = 1;
    record_set_seq(r, 0);
    memcpy(r->data, bson_get_data(doc), doc->len);
    return r;
}

record_t *record_ref(record_t *r)
{
    r->refs++;
    return r;
}

void record_unref(record_t *r)
{
    if (r && --r->refs == 0)
        bson_free(r);
}

void recvec_init(recvec_t *v)
{
    v->items = NULL;
    v->len = v->cap = 0;
}

void recvec_push_ref(recvec_t *v, record_t *r)
{
    VEC_RESERVE_ONE(v->items, v->len, v->cap, 16);
    v->items[v->len++] = record_ref(r);
}

void recvec_skip_limit(recvec_t *v, size_t first, int64_t skip, int64_t limit)
{
    if (v->len <= first)
        return; /* nothing to cut (and v->items may be NULL) */
    record_t **items = v->items + first;
    size_t n = v->len - first;
    size_t drop = skip > 0 ? (size_t)skip : 0;
    if (drop > n)
        drop = n;
    size_t keep = n - drop;
    if (limit > 0 && (size_t)limit < keep)
        keep = (size_t)limit;
    for (size_t i = 0; i < drop; i++)
        record_unref(items[i]);
    for (size_t i = drop + keep; i < n; i++)
        record_unref(items[i]);
    if (keep && drop)
        memmove(items, items + drop, keep * sizeof *items);
    v->len = first + keep;
}

void recvec_destroy(recvec_t *v)
{
    for (size_t i = 0; i < v->len; i++) {
        if ((i & 1023) == 1023)
            fiber_tick(); /* a large result is freed in slices too */
        record_unref(v->items[i]);
    }
    bson_free(v->items);
    recvec_init(v);
}
