/* compare: MongoDB's total order over BSON values (cross-type ranks, numbers
 * by value across int32/int64/double/decimal128, documents field by field).
 * Numbers are valued by the number model (num.h), which the key encoding in
 * keystring.c shares; it must agree with every rule here. */
#include "doc/compare.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "doc/collation.h"
#include "doc/num.h"

int compare_type_rank(bson_type_t type)
{
    switch (type) {
    case BSON_TYPE_MINKEY:
        return 1;
    case BSON_TYPE_EOD:
    case BSON_TYPE_UNDEFINED:
    case BSON_TYPE_NULL:
        return 5;
    case BSON_TYPE_DOUBLE:
    case BSON_TYPE_INT32:
    case BSON_TYPE_INT64:
    case BSON_TYPE_DECIMAL128:
        return 10;
    case BSON_TYPE_UTF8:
    case BSON_TYPE_SYMBOL:
        return 15;
    case BSON_TYPE_DOCUMENT:
        return 20;
    case BSON_TYPE_ARRAY:
        return 25;
    case BSON_TYPE_BINARY:
        return 30;
    case BSON_TYPE_OID:
        return 35;
    case BSON_TYPE_BOOL:
        return 40;
    case BSON_TYPE_DATE_TIME:
        return 45;
    case BSON_TYPE_TIMESTAMP:
        return 47;
    case BSON_TYPE_REGEX:
        return 50;
    case BSON_TYPE_DBPOINTER:
        return 55;
    case BSON_TYPE_CODE:
        return 60;
    case BSON_TYPE_CODEWSCOPE:
        return 65;
    case BSON_TYPE_MAXKEY:
        return 127;
    default:
        return 126; /* unknown types sort just below MaxKey */
    }
}

/* Bytewise, shorter first on a common prefix (strings may hold NULs). */
static int compare_bytes(const void *a, size_t alen, const void *b, size_t blen)
{
    size_t n = alen < blen ? alen : blen;
    int c = n ? memcmp(a, b, n) : 0;
    if (c)
        return c < 0 ? -1 : 1;
    return alen < blen ? -1 : alen > blen ? 1 : 0;
}

static int compare_cstr(const char *a, const char *b)
{
    int c = strcmp(a ? a : "", b ? b : "");
    return c < 0 ? -1 : c > 0 ? 1 : 0;
}

/* Documents (and arrays, whose names are equal position by position):
 * element by element, comparing type rank, then name, then value. */
static int compare_doc_bytes(const uint8_t *da, uint32_t la, const uint8_t *db, uint32_t lb,
                             bool compare_names, const collation_t *coll)
{
    bson_t ba, bb;
    bson_iter_t ia, ib;
    if (!bson_init_static(&ba, da, la) || !bson_init_static(&bb, db, lb) ||
        !bson_iter_init(&ia, &ba) || !bson_iter_init(&ib, &bb))
        return compare_bytes(da, la, db, lb); /* corrupt: any stable order */
    for (;;) {
        bool ha = bson_iter_next(&ia);
        bool hb = bson_iter_next(&ib);
        if (!ha || !hb)
            return ha ? 1 : hb ? -1 : 0;
        int ra = compare_type_rank(bson_iter_type(&ia));
        int rb = compare_type_rank(bson_iter_type(&ib));
        if (ra != rb)
            return ra < rb ? -1 : 1;
        if (compare_names) {
            int c = compare_bytes(bson_iter_key(&ia), bson_iter_key_len(&ia),
                                  bson_iter_key(&ib), bson_iter_key_len(&ib));
            if (c)
                return c;
        }
        int c = compare_values_coll(bson_iter_value(&ia), bson_iter_value(&ib), coll);
        if (c)
            return c;
    }
}

int compare_values(const bson_value_t *a, const bson_value_t *b)
{
    return compare_values_coll(a, b, NULL);
}

int compare_values_coll(const bson_value_t *a, const bson_value_t *b, const collation_t *coll)
{
    int ra = compare_type_rank(a->value_type);
    int rb = compare_type_rank(b->value_type);
    if (ra != rb)
        return ra < rb ? -1 : 1;

    switch (a->value_type) {
    case BSON_TYPE_EOD:
    case BSON_TYPE_UNDEFINED:
    case BSON_TYPE_NULL:
    case BSON_TYPE_MINKEY:
    case BSON_TYPE_MAXKEY:
        return 0;
    case BSON_TYPE_DOUBLE:
    case BSON_TYPE_INT32:
    case BSON_TYPE_INT64:
    case BSON_TYPE_DECIMAL128:
        return num_compare(a, b);
    case BSON_TYPE_UTF8:
    case BSON_TYPE_SYMBOL: {
        const char *sa, *sb;
        uint32_t la, lb;
        if (a->value_type == BSON_TYPE_UTF8) {
            sa = a->value.v_utf8.str, la = a->value.v_utf8.len;
        } else {
            sa = a->value.v_symbol.symbol, la = a->value.v_symbol.len;
        }
        if (b->value_type == BSON_TYPE_UTF8) {
            sb = b->value.v_utf8.str, lb = b->value.v_utf8.len;
        } else {
            sb = b->value.v_symbol.symbol, lb = b->value.v_symbol.len;
        }
        return collation_compare(coll, sa, la, sb, lb);
    }
    case BSON_TYPE_DOCUMENT:
    case BSON_TYPE_ARRAY:
        return compare_doc_bytes(a->value.v_doc.data, a->value.v_doc.data_len,
                                 b->value.v_doc.data, b->value.v_doc.data_len,
                                 a->value_type == BSON_TYPE_DOCUMENT, coll);
    case BSON_TYPE_BINARY: {
        uint32_t la = a->value.v_binary.data_len, lb = b->value.v_binary.data_len;
        if (la != lb)
            return la < lb ? -1 : 1;
        if (a->value.v_binary.subtype != b->value.v_binary.subtype)
            return a->value.v_binary.subtype < b->value.v_binary.subtype ? -1 : 1;
        return compare_bytes(a->value.v_binary.data, la, b->value.v_binary.data, lb);
    }
    case BSON_TYPE_OID:
        return compare_bytes(a->value.v_oid.bytes, 12, b->value.v_oid.bytes, 12);
    case BSON_TYPE_BOOL:
        return (int)a->value.v_bool - (int)b->value.v_bool;
    case BSON_TYPE_DATE_TIME: {
        int64_t x = a->value.v_datetime, y = b->value.v_datetime;
        return x < y ? -1 : x > y ? 1 : 0;
    }
    case BSON_TYPE_TIMESTAMP: {
        uint32_t ta = a->value.v_timestamp.timestamp, tb = b->value.v_timestamp.timestamp;
        if (ta != tb)
            return ta < tb ? -1 : 1;
        uint32_t xa = a->value.v_timestamp.increment, xb = b->value.v_timestamp.increment;
        return xa < xb ? -1 : xa > xb ? 1 : 0;
    }
    case BSON_TYPE_REGEX: {
        int c = compare_cstr(a->value.v_regex.regex, b->value.v_regex.regex);
        return c ? c : compare_cstr(a->value.v_regex.options, b->value.v_regex.options);
    }
    case BSON_TYPE_DBPOINTER: {
        int c = compare_bytes(a->value.v_dbpointer.collection, a->value.v_dbpointer.collection_len,
                              b->value.v_dbpointer.collection, b->value.v_dbpointer.collection_len);
        return c ? c
                 : compare_bytes(a->value.v_dbpointer.oid.bytes, 12,
                                 b->value.v_dbpointer.oid.bytes, 12);
    }
    case BSON_TYPE_CODE:
        return compare_bytes(a->value.v_code.code, a->value.v_code.code_len, b->value.v_code.code,
                             b->value.v_code.code_len);
    case BSON_TYPE_CODEWSCOPE: {
        int c = compare_bytes(a->value.v_codewscope.code, a->value.v_codewscope.code_len,
                              b->value.v_codewscope.code, b->value.v_codewscope.code_len);
        if (c)
            return c;
        return compare_doc_bytes(a->value.v_codewscope.scope_data,
                                 a->value.v_codewscope.scope_len,
                                 b->value.v_codewscope.scope_data,
                                 b->value.v_codewscope.scope_len, true, NULL);
    }
    default:
        return 0;
    }
}

int compare_iters(const bson_iter_t *a, const bson_iter_t *b)
{
    /* bson_iter_value borrows (no copy); it does not modify the iterator. */
    const bson_value_t *va = bson_iter_value((bson_iter_t *)a);
    const bson_value_t *vb = bson_iter_value((bson_iter_t *)b);
    return compare_values(va, vb);
}

int compare_docs(const bson_t *a, const bson_t *b)
{
    return compare_doc_bytes(bson_get_data(a), a->len, bson_get_data(b), b->len, true, NULL);
}

bool compare_equal(const bson_value_t *a, const bson_value_t *b)
{
    return compare_values(a, b) == 0;
}
