/* keystring: memcmp-ordered, self-delimiting encoding of BSON values that
 * follows compare_values() exactly (numbers by value, documents by rank, name,
 * value). Layout: one type-rank byte, then a type-specific body. */
#include "doc/keystring.h"

#include <math.h>
#include <string.h>

#include "doc/bsontext.h"
#include "doc/collation.h"
#include "doc/compare.h"
#include "doc/num.h"

/* Number body classes, in order. */
enum { KS_NUM_NAN = 1, KS_NUM_NEG = 2, KS_NUM_ZERO = 3, KS_NUM_POS = 4 };

/* Bytes with 0x00 escaped as 0x00 0xFF, closed by 0x00 0x00: prefix-free,
 * and a shorter string orders before any extension of it. */
static void put_escaped(buf_t *out, const char *s, size_t len)
{
    const uint8_t *p = (const uint8_t *)s;
    size_t run = 0;
    for (size_t i = 0; i < len; i++) {
        if (p[i] == 0) {
            buf_append(out, p + run, i - run);
            buf_push(out, 0x00);
            buf_push(out, 0xFF);
            run = i + 1;
        }
    }
    buf_append(out, p + run, len - run);
    buf_push(out, 0x00);
    buf_push(out, 0x00);
}

/* Magnitude of a positive finite-or-infinite number: biased binary exponent
 * then the 64-bit mantissa, so larger magnitudes give larger bytes. */
static void put_magnitude(buf_t *out, long double x)
{
    if (isinf(x)) {
        buf_append_be(out, 2, 0xFFFF);
        buf_append_be(out, 8, 0);
        return;
    }
    int e;
    long double m = frexpl(x, &e); /* m in [0.5, 1) */
    uint64_t mant = (uint64_t)ldexpl(m, 64);
    buf_append_be(out, 2, (uint16_t)(e + 32768));
    buf_append_be(out, 8, mant);
}

static void put_number(buf_t *out, const bson_value_t *v)
{
    long double x = num_to_ld(v);
    if (isnan(x)) {
        buf_push(out, KS_NUM_NAN);
    } else if (x == 0) {
        buf_push(out, KS_NUM_ZERO);
    } else if (x > 0) {
        buf_push(out, KS_NUM_POS);
        put_magnitude(out, x);
    } else {
        buf_push(out, KS_NUM_NEG);
        size_t start = out->len;
        put_magnitude(out, -x);
        for (size_t i = start; i < out->len; i++)
            out->data[i] = (uint8_t)~out->data[i];
    }
}

static void put_value(buf_t *out, const bson_value_t *v, const collation_t *coll);

/* Document or array body: per element its rank byte, (documents) its
 * escaped name, then its value; 0x00 ends the list (ranks are >= 1). */
static void put_doc(buf_t *out, const uint8_t *data, uint32_t len, bool names,
                    const collation_t *coll)
{
    bson_t b;
    bson_iter_t it;
    if (bson_init_static(&b, data, len) && bson_iter_init(&it, &b)) {
        while (bson_iter_next(&it)) {
            const bson_value_t *ev = bson_iter_value(&it);
            if (names) {
                buf_push(out, (uint8_t)compare_type_rank(ev->value_type));
                put_escaped(out, bson_iter_key(&it), bson_iter_key_len(&it));
            }
            put_value(out, ev, coll);
        }
    }
    buf_push(out, 0x00);
}

/* A string or symbol: its bytes, or under a collation its ICU sort key
 * (which holds no zero byte, so the escaping leaves it as it is). */
static void put_string(buf_t *out, const bson_value_t *v, const collation_t *coll)
{
    uint32_t len;
    const char *s = bsontext_of(v, &len);
    if (!coll) {
        put_escaped(out, s, len);
        return;
    }
    buf_t key;
    buf_init(&key);
    collation_sort_key(coll, s, len, &key);
    put_escaped(out, (const char *)key.data, key.len);
    buf_destroy(&key);
}

static void put_value(buf_t *out, const bson_value_t *v, const collation_t *coll)
{
    buf_push(out, (uint8_t)compare_type_rank(v->value_type));
    switch (v->value_type) {
    case BSON_TYPE_DOUBLE:
    case BSON_TYPE_INT32:
    case BSON_TYPE_INT64:
    case BSON_TYPE_DECIMAL128:
        put_number(out, v);
        break;
    case BSON_TYPE_UTF8:
    case BSON_TYPE_SYMBOL:
        put_string(out, v, coll);
        break;
    case BSON_TYPE_DOCUMENT:
        put_doc(out, v->value.v_doc.data, v->value.v_doc.data_len, true, coll);
        break;
    case BSON_TYPE_ARRAY:
        put_doc(out, v->value.v_doc.data, v->value.v_doc.data_len, false, coll);
        break;
    case BSON_TYPE_BINARY:
        buf_append_be(out, 4, v->value.v_binary.data_len);
        buf_push(out, (uint8_t)v->value.v_binary.subtype);
        buf_append(out, v->value.v_binary.data, v->value.v_binary.data_len);
        break;
    case BSON_TYPE_OID:
        buf_append(out, v->value.v_oid.bytes, 12);
        break;
    case BSON_TYPE_BOOL:
        buf_push(out, v->value.v_bool ? 1 : 0);
        break;
    case BSON_TYPE_DATE_TIME:
        buf_append_be(out, 8, (uint64_t)v->value.v_datetime ^ (UINT64_C(1) << 63));
        break;
    case BSON_TYPE_TIMESTAMP:
        buf_append_be(out, 4, v->value.v_timestamp.timestamp);
        buf_append_be(out, 4, v->value.v_timestamp.increment);
        break;
    case BSON_TYPE_REGEX: {
        const char *re = v->value.v_regex.regex ? v->value.v_regex.regex : "";
        const char *op = v->value.v_regex.options ? v->value.v_regex.options : "";
        put_escaped(out, re, strlen(re));
        put_escaped(out, op, strlen(op));
        break;
    }
    case BSON_TYPE_DBPOINTER:
        put_escaped(out, v->value.v_dbpointer.collection, v->value.v_dbpointer.collection_len);
        buf_append(out, v->value.v_dbpointer.oid.bytes, 12);
        break;
    case BSON_TYPE_CODE:
        put_escaped(out, v->value.v_code.code, v->value.v_code.code_len);
        break;
    case BSON_TYPE_CODEWSCOPE:
        put_escaped(out, v->value.v_codewscope.code, v->value.v_codewscope.code_len);
        put_doc(out, v->value.v_codewscope.scope_data, v->value.v_codewscope.scope_len, true,
                NULL);
        break;
    default:
        /* MinKey, MaxKey, null, undefined, missing: the rank says it all. */
        break;
    }
}

void keystring_append(buf_t *out, const bson_value_t *v, bool descending)
{
    keystring_append_coll(out, v, descending, NULL);
}

void keystring_append_coll(buf_t *out, const bson_value_t *v, bool descending,
                           const collation_t *coll)
{
    size_t start = out->len;
    put_value(out, v, coll);
    if (descending) {
        for (size_t i = start; i < out->len; i++)
            out->data[i] = (uint8_t)~out->data[i];
    }
}

void keystring_append_null(buf_t *out, bool descending)
{
    bson_value_t v;
    v.value_type = BSON_TYPE_NULL;
    keystring_append(out, &v, descending);
}
