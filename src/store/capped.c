/* capped: the bounds and natural (insertion) order of a capped collection —
 * an ordered map from an insertion number to the record, and from _id to
 * that number so an update keeps the document's place. */
#include "store/capped.h"

#include <string.h>

#include "doc/keystring.h"
#include "util/buf.h"
#include "util/omap.h"
#include "util/shellfmt.h"

struct capped {
    int64_t size;     /* bytes of BSON the collection may hold */
    int64_t max;      /* documents it may hold, 0: no bound */
    omap_t *order;    /* 8-byte big-endian position → record_t* (borrowed) */
    omap_t *position; /* _id keystring → position (as a pointer-sized integer) */
    uint64_t next;    /* the position the next insert takes */
};

static bool capped_number(const bson_iter_t *it, const char *field, int64_t *out, dberr_t *err)
{
    if (!BSON_ITER_HOLDS_NUMBER(it))
        return dberr_set(err, DBERR_TYPE_MISMATCH,
                         "BSON field 'create.%s' is the wrong type '%s', expected types '[long, "
                         "int, decimal, double]'",
                         field, shellfmt_type_name(bson_iter_type(it)));
    *out = bson_iter_as_int64(it);
    return true;
}

static void capped_append_number(bson_t *out, const char *key, int64_t v)
{
    if (v >= INT32_MIN && v <= INT32_MAX)
        BSON_APPEND_INT32(out, key, (int32_t)v);
    else
        BSON_APPEND_INT64(out, key, v);
}

bool capped_parse_options(const bson_iter_t *capped, const bson_iter_t *size,
                          const bson_iter_t *max, bson_t *out, dberr_t *err)
{
    bool is_capped = false;
    if (capped && !BSON_ITER_HOLDS_NULL(capped)) {
        if (!BSON_ITER_HOLDS_BOOL(capped) && !BSON_ITER_HOLDS_NUMBER(capped))
            return dberr_set(err, DBERR_TYPE_MISMATCH,
                             "BSON field 'create.capped' is the wrong type '%s', expected types "
                             "'[bool, long, int, decimal, double]'",
                             shellfmt_type_name(bson_iter_type(capped)));
        is_capped = bson_iter_as_bool(capped);
    }
    if (size && BSON_ITER_HOLDS_NULL(size))
        size = NULL;
    if (max && BSON_ITER_HOLDS_NULL(max))
        max = NULL;
    int64_t sz = 0, mx = 0;
    if (size && !capped_number(size, "size", &sz, err))
        return false;
    if (max && !capped_number(max, "max", &mx, err))
        return false;
    if (size && sz < 1)
        return dberr_set(err, 51024, "BSON field 'size' value must be >= 1, actual value '%lld'",
                         (long long)sz);
    if (size && sz > CAPPED_MAX_SIZE)
        return dberr_set(err, 51024, "BSON field 'size' value must be <= %lld, actual value '%lld'",
                         (long long)CAPPED_MAX_SIZE, (long long)sz);
    if (is_capped && !size)
        return dberr_set(err, DBERR_INVALID_OPTIONS,
                         "the 'size' field is required when 'capped' is true");
    if ((size || max) && !is_capped)
        return dberr_set(err, DBERR_INVALID_OPTIONS,
                         "the 'capped' field needs to be true when either the 'size' or 'max' "
                         "fields are present");
    if (!is_capped)
        return true;
    if (max && mx >= (1LL << 31))
        return dberr_set(err, DBERR_BAD_VALUE,
                         "max in a capped collection has to be < 2^31 or not set");
    BSON_APPEND_BOOL(out, "capped", true);
    /* mongod 7.0 (CollectionOptions) rounds the size up to 256 bytes and
     * reads a max <= 0 as "no bound" (2^31 - 1) */
    capped_append_number(out, "size", (sz + 0xff) & ~(int64_t)0xff);
    if (max)
        capped_append_number(out, "max", mx <= 0 ? 0x7fffffff : mx);
    return true;
}

capped_t *capped_new(const bson_t *options)
{
    bson_iter_t it;
    if (!options || !bson_iter_init_find(&it, options, "capped") || !bson_iter_as_bool(&it))
        return NULL;
    capped_t *cap = bson_malloc0(sizeof *cap);
    if (bson_iter_init_find(&it, options, "size") && BSON_ITER_HOLDS_NUMBER(&it))
        cap->size = bson_iter_as_int64(&it);
    if (bson_iter_init_find(&it, options, "max") && BSON_ITER_HOLDS_NUMBER(&it))
        cap->max = bson_iter_as_int64(&it);
    if (cap->size <= 0)
        cap->size = CAPPED_MAX_SIZE;
    if (cap->max < 0)
        cap->max = 0;
    cap->order = omap_new();
    cap->position = omap_new();
    cap->next = 1;
    return cap;
}

void capped_destroy(capped_t *cap)
{
    if (!cap)
        return;
    omap_destroy(cap->order, NULL);
    omap_destroy(cap->position, NULL);
    bson_free(cap);
}

void capped_set_bounds(capped_t *cap, const capped_t *from)
{
    cap->size = from->size;
    cap->max = from->max;
}

int64_t capped_size(const capped_t *cap)
{
    return cap->size;
}

int64_t capped_max(const capped_t *cap)
{
    return cap->max;
}

/* The position key of `pos`: 8 bytes big-endian, so memcmp order is
 * numeric order. */
static void capped_pos_key(uint64_t pos, uint8_t key[8])
{
    for (int i = 7; i >= 0; i--, pos >>= 8)
        key[i] = (uint8_t)(pos & 0xff);
}

void capped_append(capped_t *cap, const bson_value_t *id, record_t *r)
{
    uint8_t key[8];
    uint64_t pos = cap->next++;
    capped_pos_key(pos, key);
    omap_insert(cap->order, key, sizeof key, r);
    buf_t idk;
    buf_init(&idk);
    keystring_append(&idk, id, false);
    omap_insert(cap->position, idk.data, idk.len, (void *)(uintptr_t)pos);
    buf_destroy(&idk);
}

/* The position of _id `id`, 0 when it has none. */
static uint64_t capped_position_of(const capped_t *cap, const bson_value_t *id, bool remove)
{
    buf_t idk;
    buf_init(&idk);
    keystring_append(&idk, id, false);
    void *v = remove ? omap_remove(cap->position, idk.data, idk.len)
                     : omap_get(cap->position, idk.data, idk.len);
    buf_destroy(&idk);
    return (uint64_t)(uintptr_t)v;
}

void capped_replace(capped_t *cap, const bson_value_t *id, record_t *r)
{
    uint64_t pos = capped_position_of(cap, id, false);
    uint8_t key[8];
    capped_pos_key(pos, key);
    omap_node_t *n = pos ? omap_find(cap->order, key, sizeof key) : NULL;
    if (n)
        omap_node_set_value(n, r);
}

void capped_remove(capped_t *cap, const bson_value_t *id)
{
    uint64_t pos = capped_position_of(cap, id, true);
    uint8_t key[8];
    capped_pos_key(pos, key);
    if (pos)
        omap_remove(cap->order, key, sizeof key);
}

record_t *capped_next(const capped_t *cap, uint64_t after, uint64_t *pos)
{
    uint8_t key[8];
    capped_pos_key(after + 1, key);
    omap_node_t *n = omap_seek(cap->order, key, sizeof key);
    if (!n)
        return NULL;
    size_t klen;
    const uint8_t *k = omap_node_key(n, &klen);
    uint64_t v = 0;
    for (size_t i = 0; i < 8 && i < klen; i++)
        v = v << 8 | k[i];
    *pos = v;
    return omap_node_value(n);
}

bool capped_holds(const capped_t *cap, uint64_t pos)
{
    uint8_t key[8];
    capped_pos_key(pos, key);
    return omap_find(cap->order, key, sizeof key) != NULL;
}
