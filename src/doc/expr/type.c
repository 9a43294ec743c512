/* expr/type: types and conversions — $type $isNumber $toInt $toLong
 * $toDouble $toString $toBool ($convert without onError). */
#include "doc/expr/expr-private.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util/shellfmt.h"

static bool op_type(const expr_t *e, const bson_value_t *v, bson_value_t *out, dberr_t *err)
{
    const char *tn = shellfmt_type_name(v->value_type);
    expr_val_string(out, tn, strlen(tn));
    return true;
}

static bool op_isnumber(const expr_t *e, const bson_value_t *v, bson_value_t *out, dberr_t *err)
{
    expr_val_bool(out, num_is_number(v));
    return true;
}

/* Parses a whole base-10 integer string; false when not a whole number. */
static bool parse_long(const char *s, int64_t *out)
{
    char *end;
    if (!*s || isspace((unsigned char)*s))
        return false;
    errno = 0;
    long long x = strtoll(s, &end, 10);
    if (*end || errno)
        return false;
    *out = x;
    return true;
}

/* $toInt / $toLong / $toDouble / $toString / $toBool ($convert with no onError). */
static bool convert_to(const bson_value_t *v, bson_type_t to, bson_value_t *out, dberr_t *err)
{
    char buf[64];
    if (expr_is_nullish(v)) {
        expr_val_null(out);
        return true;
    }
    if (to == BSON_TYPE_UTF8) {
        char *s;
        size_t len;
        if (v->value_type == BSON_TYPE_BOOL) {
            const char *b = v->value.v_bool ? "true" : "false";
            expr_val_string(out, b, strlen(b));
            return true;
        }
        if (v->value_type == BSON_TYPE_OID) {
            bson_oid_to_string(&v->value.v_oid, buf);
            expr_val_string(out, buf, strlen(buf));
            return true;
        }
        if (v->value_type == BSON_TYPE_TIMESTAMP || !expr_coerce_string(v, &s, &len))
            return dberr_set(
                err, 241,
                "Unsupported conversion from %s to string in $convert with no onError value",
                shellfmt_type_name(v->value_type));
        expr_val_string(out, s, len);
        bson_free(s);
        return true;
    }
    if (to == BSON_TYPE_BOOL) {
        expr_val_bool(out, expr_truthy(v));
        return true;
    }
    double d = 0;
    int64_t l = 0;
    bool is_int = false;
    switch (v->value_type) {
    case BSON_TYPE_INT32:
        l = v->value.v_int32, is_int = true;
        break;
    case BSON_TYPE_INT64:
        l = v->value.v_int64, is_int = true;
        break;
    case BSON_TYPE_DOUBLE:
    case BSON_TYPE_DECIMAL128:
        d = num_to_double(v);
        break;
    case BSON_TYPE_BOOL:
        l = v->value.v_bool, is_int = true;
        break;
    case BSON_TYPE_DATE_TIME:
        if (to == BSON_TYPE_INT32)
            return dberr_set(
                err, 241,
                "Unsupported conversion from date to int in $convert with no onError value");
        l = v->value.v_datetime, is_int = true;
        break;
    case BSON_TYPE_UTF8:
        if (to != BSON_TYPE_DOUBLE) {
            if (!parse_long(v->value.v_utf8.str, &l))
                return dberr_set(err, 241,
                                 "Failed to parse number '%s' in $convert with no onError value: "
                                 "Did not consume whole string.",
                                 v->value.v_utf8.str);
            is_int = true;
        } else {
            char *end;
            const char *s = v->value.v_utf8.str;
            if (!*s || isspace((unsigned char)*s))
                return dberr_set(
                    err, 241,
                    "Failed to parse number '%s' in $convert with no onError value: Empty string",
                    s);
            d = strtod(s, &end);
            if (*end)
                return dberr_set(err, 241,
                                 "Failed to parse number '%s' in $convert with no onError value: "
                                 "Did not consume whole string.",
                                 s);
        }
        break;
    default:
        return dberr_set(err, 241,
                         "Unsupported conversion from %s to %s in $convert with no onError value",
                         shellfmt_type_name(v->value_type), shellfmt_type_name(to));
    }
    if (to == BSON_TYPE_DOUBLE) {
        expr_val_double(out, is_int ? (double)l : d);
        return true;
    }
    if (!is_int) {
        if (isnan(d) || isinf(d))
            return dberr_set(
                err, 241,
                "Attempt to convert %s value to integer type in $convert with no onError value",
                isnan(d) ? "NaN" : "infinity");
        d = trunc(d);
        double lim = to == BSON_TYPE_INT32 ? 2147483648.0 : 9223372036854775808.0;
        if (d >= lim || d < -lim) {
            expr_double_to_string(num_to_double(v), buf, sizeof buf);
            return dberr_set(
                err, 241,
                "Conversion would overflow target type in $convert with no onError value: %s", buf);
        }
        l = (int64_t)d;
    }
    if (to == BSON_TYPE_INT32) {
        if (l < INT32_MIN || l > INT32_MAX)
            return dberr_set(
                err, 241,
                "Conversion would overflow target type in $convert with no onError value: %lld",
                (long long)l);
        expr_val_int32(out, (int32_t)l);
    } else {
        expr_val_int64(out, l);
    }
    return true;
}

/* $toInt $toLong $toDouble $toString $toBool: aux is the target type. */
static bool convert_op(const expr_t *e, const bson_value_t *v, bson_value_t *out, dberr_t *err)
{
    bson_type_t to = (bson_type_t)e->op->aux;
    bool ok = convert_to(v, to, out, err);
    return ok;
}

const expr_op_t expr_type_ops[] = {
    {"$isNumber", NULL, OPP_ARGS, 1, 1, {0}, 0, NULL, op_isnumber},
    {"$toBool", NULL, OPP_ARGS, 1, 1, {0}, BSON_TYPE_BOOL, NULL, convert_op},
    {"$toDouble", NULL, OPP_ARGS, 1, 1, {0}, BSON_TYPE_DOUBLE, NULL, convert_op},
    {"$toInt", NULL, OPP_ARGS, 1, 1, {0}, BSON_TYPE_INT32, NULL, convert_op},
    {"$toLong", NULL, OPP_ARGS, 1, 1, {0}, BSON_TYPE_INT64, NULL, convert_op},
    {"$toString", NULL, OPP_ARGS, 1, 1, {0}, BSON_TYPE_UTF8, NULL, convert_op},
    {"$type", NULL, OPP_ARGS, 1, 1, {0}, 0, NULL, op_type},
    {NULL, NULL, OPP_ARGS, 0, 0, {0}, 0, NULL},
};
