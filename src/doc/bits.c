/* bits: $bitsAllSet and friends, with mongod's argument parsing and its
 * bit semantics (positions past bit 63 of a number read its sign bit;
 * positions past the end of BinData read as clear). */
#include "doc/bits.h"

#include <string.h>

#include "doc/num.h"
#include "util/shellfmt.h"

typedef enum { BITS_ALL_SET, BITS_ANY_SET, BITS_ALL_CLEAR, BITS_ANY_CLEAR } bits_kind_t;

struct bits {
    bits_kind_t kind;
    uint32_t *pos; /* bit positions to test */
    size_t npos;
};

/* shellfmt_value of `v` into `buf` (for error messages). */
static const char *bits_show(const bson_value_t *v, char *buf, size_t size)
{
    char *s = shellfmt_value(v);
    bson_strncpy(buf, s, size);
    bson_free(s);
    return buf;
}

static const struct bits_op {
    const char *name;
    bits_kind_t kind;
} bits_ops[] = {
    {"$bitsAllSet", BITS_ALL_SET},
    {"$bitsAnySet", BITS_ANY_SET},
    {"$bitsAllClear", BITS_ALL_CLEAR},
    {"$bitsAnyClear", BITS_ANY_CLEAR},
};

/* The row of bits_ops named `op`, or NULL. */
static const struct bits_op *bits_op_find(const char *op)
{
    for (size_t i = 0; i < sizeof bits_ops / sizeof bits_ops[0]; i++)
        if (strcmp(op, bits_ops[i].name) == 0)
            return &bits_ops[i];
    return NULL;
}

bool bits_is_operator(const char *op)
{
    return bits_op_find(op) != NULL;
}

static void bits_add(bits_t *b, uint32_t p)
{
    b->pos = bson_realloc(b->pos, (b->npos + 1) * sizeof *b->pos);
    b->pos[b->npos++] = p;
}

static void bits_add_mask(bits_t *b, const uint8_t *bytes, size_t len)
{
    for (size_t i = 0; i < len; i++)
        for (int j = 0; j < 8; j++)
            if (bytes[i] & (1u << j))
                bits_add(b, (uint32_t)(i * 8 + (size_t)j));
}

void bits_destroy(bits_t *b)
{
    if (!b)
        return;
    bson_free(b->pos);
    bson_free(b);
}

bits_t *bits_new(const char *op, const bson_value_t *arg, dberr_t *err)
{
    char shown[256];
    bits_t *b = bson_malloc0(sizeof *b);
    b->kind = bits_op_find(op)->kind;
    if (num_is_number(arg)) {
        int64_t mask;
        if (!num_to_int64_whole(arg, &mask)) {
            dberr_set(err, DBERR_FAILED_TO_PARSE, "Expected an integer: %s: %s", op,
                      bits_show(arg, shown, sizeof shown));
            goto fail;
        }
        if (mask < 0) {
            dberr_set(err, DBERR_FAILED_TO_PARSE, "Expected a positive number in: %s: %s", op,
                      bits_show(arg, shown, sizeof shown));
            goto fail;
        }
        for (uint32_t p = 0; p < 64; p++)
            if ((uint64_t)mask & (UINT64_C(1) << p))
                bits_add(b, p);
    } else if (arg->value_type == BSON_TYPE_BINARY) {
        bits_add_mask(b, arg->value.v_binary.data, arg->value.v_binary.data_len);
    } else if (arg->value_type == BSON_TYPE_ARRAY) {
        bson_iter_t it;
        if (!bson_iter_init_from_data(&it, arg->value.v_doc.data, arg->value.v_doc.data_len)) {
            dberr_set(err, DBERR_BAD_VALUE, "%s: invalid array", op);
            goto fail;
        }
        while (bson_iter_next(&it)) {
            const bson_value_t *e = bson_iter_value(&it);
            int64_t p;
            if (!num_is_number(e) || !num_to_int64_whole(e, &p) || p > INT32_MAX) {
                dberr_set(err, DBERR_BAD_VALUE,
                          "bit positions must be an integer but got: %s: %s", bson_iter_key(&it),
                          bits_show(e, shown, sizeof shown));
                goto fail;
            }
            if (p < 0) {
                dberr_set(err, DBERR_BAD_VALUE, "bit positions must be >= 0 but got: %s: %s",
                          bson_iter_key(&it), bits_show(e, shown, sizeof shown));
                goto fail;
            }
            bits_add(b, (uint32_t)p);
        }
    } else {
        dberr_set(err, DBERR_BAD_VALUE,
                  "%s takes an Array, a number, or a BinData but received: %s: %s", op, op,
                  bits_show(arg, shown, sizeof shown));
        goto fail;
    }
    return b;
fail:
    bits_destroy(b);
    return NULL;
}

/* Combines the per-position answers the way `kind` asks. */
static bool bits_result(const bits_t *b, bool (*is_set)(const void *, uint32_t), const void *v)
{
    bool want_set = b->kind == BITS_ALL_SET || b->kind == BITS_ANY_SET;
    bool all = b->kind == BITS_ALL_SET || b->kind == BITS_ALL_CLEAR;
    for (size_t i = 0; i < b->npos; i++) {
        bool hit = is_set(v, b->pos[i]) == want_set;
        if (all && !hit)
            return false;
        if (!all && hit)
            return true;
    }
    return all;
}

static bool bits_num_set(const void *v, uint32_t p)
{
    int64_t x = *(const int64_t *)v;
    return p >= 64 ? x < 0 : ((uint64_t)x >> p) & 1;
}

static bool bits_bin_set(const void *v, uint32_t p)
{
    const bson_value_t *bin = v;
    if (p / 8 >= bin->value.v_binary.data_len)
        return false;
    return (bin->value.v_binary.data[p / 8] >> (p % 8)) & 1;
}

bool bits_test(const bits_t *b, const bson_value_t *v)
{
    if (v->value_type == BSON_TYPE_BINARY)
        return bits_result(b, bits_bin_set, v);
    if (v->value_type != BSON_TYPE_INT32 && v->value_type != BSON_TYPE_INT64 &&
        v->value_type != BSON_TYPE_DOUBLE && v->value_type != BSON_TYPE_DECIMAL128)
        return false;
    int64_t x;
    if (!num_to_int64_whole(v, &x))
        return false;
    return bits_result(b, bits_num_set, &x);
}
