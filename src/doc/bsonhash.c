/* bsonhash: mongod's hashed-index hash of a BSON value — MD5 (OpenSSL) over
 * seed, canonical type and value bytes, recursing into documents and arrays
 * with field names, as src/mongo/db/hasher.cpp does. */
#include "doc/bsonhash.h"

#include <math.h>
#include <string.h>

#include <bid_conf.h>
#include <bid_functions.h>
#include <openssl/evp.h>

#include "doc/bsontext.h"

/* mongod's canonicalizeBSONType: one number per comparison bracket. */
static int32_t bsonhash_canonical_type(bson_type_t t)
{
    switch (t) {
    case BSON_TYPE_MINKEY: return -1;
    case BSON_TYPE_MAXKEY: return 127;
    case BSON_TYPE_EOD:
    case BSON_TYPE_UNDEFINED: return 0;
    case BSON_TYPE_NULL: return 5;
    case BSON_TYPE_DOUBLE:
    case BSON_TYPE_INT32:
    case BSON_TYPE_INT64:
    case BSON_TYPE_DECIMAL128: return 10;
    case BSON_TYPE_UTF8:
    case BSON_TYPE_SYMBOL: return 15;
    case BSON_TYPE_DOCUMENT: return 20;
    case BSON_TYPE_ARRAY: return 25;
    case BSON_TYPE_BINARY: return 30;
    case BSON_TYPE_OID: return 35;
    case BSON_TYPE_BOOL: return 40;
    case BSON_TYPE_DATE_TIME: return 45;
    case BSON_TYPE_TIMESTAMP: return 47;
    case BSON_TYPE_REGEX: return 50;
    case BSON_TYPE_DBPOINTER: return 55;
    case BSON_TYPE_CODE: return 60;
    case BSON_TYPE_CODEWSCOPE: return 65;
    default: return 0;
    }
}

static void bsonhash_add(EVP_MD_CTX *md, const void *p, size_t n)
{
    EVP_DigestUpdate(md, p, n);
}

static void bsonhash_add_i32(EVP_MD_CTX *md, int32_t v)
{
    uint32_t le = BSON_UINT32_TO_LE((uint32_t)v);
    bsonhash_add(md, &le, sizeof le);
}

static void bsonhash_add_i64(EVP_MD_CTX *md, int64_t v)
{
    uint64_t le = BSON_UINT64_TO_LE((uint64_t)v);
    bsonhash_add(md, &le, sizeof le);
}

/* A BSON string value's bytes: int32 length (with the NUL), text, NUL. */
static void bsonhash_add_string(EVP_MD_CTX *md, const char *s, uint32_t len)
{
    bsonhash_add_i32(md, (int32_t)len + 1);
    bsonhash_add(md, s, len);
    bsonhash_add(md, "", 1);
}

/* A string, symbol or code value, hashed as a string. */
static void bsonhash_add_text(EVP_MD_CTX *md, const bson_value_t *v)
{
    uint32_t len;
    const char *text = bsontext_of(v, &len);
    bsonhash_add_string(md, text, len);
}

/* mongod's safeNumberLongForHash: NaN 0, saturated at the int64 range
 * (2^63 exactly wraps to -2^63, as older servers did), doubles truncated,
 * decimals rounded half to even. */
static int64_t bsonhash_number(const bson_value_t *v)
{
    switch (v->value_type) {
    case BSON_TYPE_INT32: return v->value.v_int32;
    case BSON_TYPE_INT64: return v->value.v_int64;
    case BSON_TYPE_DOUBLE: {
        double d = v->value.v_double;
        if (isnan(d))
            return 0;
        if (d == 9223372036854775808.0)
            return INT64_MIN;
        if (d > 9223372036854775808.0)
            return INT64_MAX;
        if (d < -9223372036854775808.0)
            return INT64_MIN;
        return (int64_t)d;
    }
    case BSON_TYPE_DECIMAL128: {
        BID_UINT128 x;
        x.w[BID_LOW_128W] = v->value.v_decimal128.low;
        x.w[BID_HIGH_128W] = v->value.v_decimal128.high;
        if (bid128_isNaN(x))
            return 0;
        _IDEC_flags f = 0;
        int64_t i = bid128_to_int64_rnint(x, &f);
        if (f & BID_INVALID_EXCEPTION)
            return bid128_isSigned(x) ? INT64_MIN : INT64_MAX;
        return i;
    }
    default: return 0;
    }
}

static void bsonhash_element(EVP_MD_CTX *md, const bson_value_t *v, const char *name,
                             size_t name_len);

/* The elements of an embedded document or array, then its end (EOO). */
static void bsonhash_elements(EVP_MD_CTX *md, const uint8_t *data, uint32_t len)
{
    bson_t doc;
    bson_iter_t it;
    if (bson_init_static(&doc, data, len) && bson_iter_init(&it, &doc))
        while (bson_iter_next(&it))
            bsonhash_element(md, bson_iter_value(&it), bson_iter_key(&it),
                             bson_iter_key_len(&it));
    bsonhash_add_i32(md, bsonhash_canonical_type(BSON_TYPE_EOD));
    bsonhash_add(md, "", 1); /* EOO's empty field name */
}

/* One element: canonical type, field name (with its NUL) when `name`, then
 * the value. */
static void bsonhash_element(EVP_MD_CTX *md, const bson_value_t *v, const char *name,
                             size_t name_len)
{
    bsonhash_add_i32(md, bsonhash_canonical_type(v->value_type));
    if (name)
        bsonhash_add(md, name, name_len + 1);
    switch (v->value_type) {
    case BSON_TYPE_DOUBLE:
    case BSON_TYPE_INT32:
    case BSON_TYPE_INT64:
    case BSON_TYPE_DECIMAL128:
        bsonhash_add_i64(md, bsonhash_number(v));
        break;
    case BSON_TYPE_UTF8:
    case BSON_TYPE_SYMBOL:
    case BSON_TYPE_CODE:
        bsonhash_add_text(md, v);
        break;
    case BSON_TYPE_DOCUMENT:
    case BSON_TYPE_ARRAY:
        bsonhash_elements(md, v->value.v_doc.data, v->value.v_doc.data_len);
        break;
    case BSON_TYPE_CODEWSCOPE: /* the code (with its NUL), then the scope's elements */
        bsonhash_add(md, v->value.v_codewscope.code, v->value.v_codewscope.code_len + 1);
        bsonhash_elements(md, v->value.v_codewscope.scope_data,
                          v->value.v_codewscope.scope_len);
        break;
    case BSON_TYPE_BINARY: {
        /* libbson strips subtype 2's inner length; the stored bytes have it */
        bool old = v->value.v_binary.subtype == BSON_SUBTYPE_BINARY_DEPRECATED;
        uint32_t len = v->value.v_binary.data_len;
        bsonhash_add_i32(md, (int32_t)(old ? len + 4 : len));
        uint8_t sub = (uint8_t)v->value.v_binary.subtype;
        bsonhash_add(md, &sub, 1);
        if (old)
            bsonhash_add_i32(md, (int32_t)len);
        bsonhash_add(md, v->value.v_binary.data, len);
        break;
    }
    case BSON_TYPE_OID:
        bsonhash_add(md, v->value.v_oid.bytes, 12);
        break;
    case BSON_TYPE_BOOL: {
        uint8_t b = v->value.v_bool ? 1 : 0;
        bsonhash_add(md, &b, 1);
        break;
    }
    case BSON_TYPE_DATE_TIME:
        bsonhash_add_i64(md, v->value.v_datetime);
        break;
    case BSON_TYPE_TIMESTAMP: /* increment, then seconds, as stored */
        bsonhash_add_i32(md, (int32_t)v->value.v_timestamp.increment);
        bsonhash_add_i32(md, (int32_t)v->value.v_timestamp.timestamp);
        break;
    case BSON_TYPE_REGEX: {
        const char *p = v->value.v_regex.regex ? v->value.v_regex.regex : "";
        const char *o = v->value.v_regex.options ? v->value.v_regex.options : "";
        bsonhash_add(md, p, strlen(p) + 1);
        bsonhash_add(md, o, strlen(o) + 1);
        break;
    }
    case BSON_TYPE_DBPOINTER:
        bsonhash_add_string(md, v->value.v_dbpointer.collection,
                            v->value.v_dbpointer.collection_len);
        bsonhash_add(md, v->value.v_dbpointer.oid.bytes, 12);
        break;
    default: /* null, undefined, MinKey, MaxKey: no value bytes */
        break;
    }
}

int64_t bsonhash_value(const bson_value_t *v)
{
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int n = 0;
    EVP_DigestInit_ex(md, EVP_md5(), NULL);
    bsonhash_add_i32(md, 0); /* the seed */
    bsonhash_element(md, v, NULL, 0);
    EVP_DigestFinal_ex(md, digest, &n);
    EVP_MD_CTX_free(md);
    uint64_t le;
    memcpy(&le, digest, sizeof le);
    return (int64_t)BSON_UINT64_FROM_LE(le);
}
