/* expr/type: types and conversions — $type $isNumber $toInt $toLong
 * $toDouble $toDecimal $toString $toBool $toObjectId, and $convert (with
 * onError and onNull) to those types and to date. */
#include "doc/expr/expr-private.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

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

static bool convert_to_decimal(const bson_value_t *v, bson_value_t *out, dberr_t *err);
static bool convert_to_oid(const bson_value_t *v, bson_value_t *out, dberr_t *err);

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

/* `v` (not nullish) as Decimal128: integers exactly, a double to 15
 * significant digits (mongod's Decimal128(double)), a string parsed. */
static bool convert_to_decimal(const bson_value_t *v, bson_value_t *out, dberr_t *err)
{
    bson_decimal128_t d;
    switch (v->value_type) {
    case BSON_TYPE_INT32:
    case BSON_TYPE_INT64:
    case BSON_TYPE_DOUBLE:
    case BSON_TYPE_DECIMAL128:
        d = num_to_decimal(v);
        break;
    case BSON_TYPE_BOOL:
    case BSON_TYPE_DATE_TIME: {
        bson_value_t l;
        expr_val_int64(&l, v->value_type == BSON_TYPE_BOOL ? v->value.v_bool : v->value.v_datetime);
        d = num_to_decimal(&l);
        break;
    }
    case BSON_TYPE_UTF8: {
        const char *s = v->value.v_utf8.str;
        if (!*s || strlen(s) != v->value.v_utf8.len || isspace((unsigned char)*s) ||
            !bson_decimal128_from_string(s, &d) ||
            (d.high == 0x7c00000000000000ull && d.low == 0 && strcasecmp(s, "nan") != 0 &&
             strcasecmp(s, "-nan") != 0))
            return dberr_set(err, 241,
                             "Failed to parse number '%s' in $convert with no onError value: "
                             "Failed to parse string to decimal",
                             s);
        break;
    }
    default:
        return dberr_set(err, 241,
                         "Unsupported conversion from %s to decimal in $convert with no onError "
                         "value",
                         shellfmt_type_name(v->value_type));
    }
    memset(out, 0, sizeof *out);
    out->value_type = BSON_TYPE_DECIMAL128;
    out->value.v_decimal128 = d;
    return true;
}

/* `v` (not nullish) as an ObjectId: an ObjectId, or 24 hex digits. */
static bool convert_to_oid(const bson_value_t *v, bson_value_t *out, dberr_t *err)
{
    if (v->value_type == BSON_TYPE_OID) {
        bson_value_copy(v, out);
        return true;
    }
    if (v->value_type != BSON_TYPE_UTF8)
        return dberr_set(err, 241,
                         "Unsupported conversion from %s to objectId in $convert with no onError "
                         "value",
                         shellfmt_type_name(v->value_type));
    const char *s = v->value.v_utf8.str;
    if (v->value.v_utf8.len != 24)
        return dberr_set(err, 241,
                         "Failed to parse objectId '%s' in $convert with no onError value: Invalid "
                         "string length for parsing to OID, expected 24 but found %u",
                         s, v->value.v_utf8.len);
    for (int i = 0; i < 24; i++)
        if (!isxdigit((unsigned char)s[i]))
            return dberr_set(err, 241,
                             "Failed to parse objectId '%s' in $convert with no onError value: "
                             "Invalid character found in hex string: '%c'",
                             s, s[i]);
    memset(out, 0, sizeof *out);
    out->value_type = BSON_TYPE_OID;
    bson_oid_init_from_string(&out->value.v_oid, s);
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
    if (to == BSON_TYPE_DECIMAL128)
        return convert_to_decimal(v, out, err);
    if (to == BSON_TYPE_OID)
        return convert_to_oid(v, out, err);
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

/* $convert's arguments, in e->args. */
enum { CONV_INPUT, CONV_TO, CONV_ON_ERROR, CONV_ON_NULL, CONV_N };

static bool parse_convert(expr_t *e, bson_iter_t *arg, dberr_t *err)
{
    static const char *const params[] = {"input", "to", "onError", "onNull"};
    e->args = bson_malloc0(CONV_N * sizeof *e->args);
    e->nargs = CONV_N;
    bson_iter_t child;
    if (!expr_recurse_object(arg, &child, DBERR_FAILED_TO_PARSE,
                             "$convert expects an object of named arguments but found: %s", err))
        return false;
    while (bson_iter_next(&child)) {
        const char *k = bson_iter_key(&child);
        size_t i = 0;
        while (i < CONV_N && strcmp(params[i], k))
            i++;
        if (i == CONV_N)
            return dberr_set(err, DBERR_FAILED_TO_PARSE, "$convert found an unknown argument: %s",
                             k);
        expr_destroy(e->args[i]);
        if (!(e->args[i] = expr_parse(&child, err)))
            return false;
    }
    if (!e->args[CONV_INPUT])
        return dberr_set(err, DBERR_FAILED_TO_PARSE, "Missing 'input' parameter to $convert");
    if (!e->args[CONV_TO])
        return dberr_set(err, DBERR_FAILED_TO_PARSE, "Missing 'to' parameter to $convert");
    return true;
}

/* The BSON type $convert's `to` names (a type name or number), as mongod
 * reads it: BadValue 2 for an unknown name, FailedToParse 9 otherwise. */
static bool convert_target(const bson_value_t *to, bson_type_t *out, dberr_t *err)
{
    if (to->value_type == BSON_TYPE_UTF8) {
        if (shellfmt_type_from_name(to->value.v_utf8.str, out))
            return true;
        return dberr_set(err, DBERR_BAD_VALUE, "Unknown type name: %s", to->value.v_utf8.str);
    }
    if (!num_is_number(to))
        return dberr_set(err, DBERR_FAILED_TO_PARSE,
                         "$convert's 'to' argument must be a string or number, but is %s",
                         shellfmt_type_name(to->value_type));
    int32_t code;
    if (!expr_as_int32(to, &code))
        return dberr_set(err, DBERR_FAILED_TO_PARSE,
                         "In $convert, numeric 'to' argument is not an integer");
    if ((code >= BSON_TYPE_DOUBLE && code <= BSON_TYPE_DECIMAL128) || code == BSON_TYPE_MAXKEY ||
        code == -1) {
        *out = code == -1 ? BSON_TYPE_MINKEY : (bson_type_t)code;
        return true;
    }
    return dberr_set(err, DBERR_FAILED_TO_PARSE,
                     "In $convert, numeric value for 'to' does not correspond to a BSON type: %d",
                     code);
}

/* `in` (not nullish) converted to `target` into `out`; ConversionFailure
 * (241) for a conversion mongod does not make. */
static bool convert_value(const bson_value_t *in, bson_type_t target, bson_value_t *out,
                          dberr_t *err)
{
    switch (target) {
    case BSON_TYPE_DOUBLE:
    case BSON_TYPE_UTF8:
    case BSON_TYPE_BOOL:
    case BSON_TYPE_INT32:
    case BSON_TYPE_INT64:
    case BSON_TYPE_OID:
    case BSON_TYPE_DECIMAL128:
        return convert_to(in, target, out, err);
    case BSON_TYPE_DATE_TIME:
        return expr_to_date(in, out, err);
    default:
        return dberr_set(err, DBERR_CONVERSION_FAILURE,
                         "Unsupported conversion from %s to %s in $convert with no onError value",
                         shellfmt_type_name(in->value_type), shellfmt_type_name(target));
    }
}

/* $convert in mongod's order: `to` and `input` evaluated, then `to`
 * checked; a nullish input gives onNull (or null), a nullish `to` null; a
 * ConversionFailure (241) becomes onError when given. */
static bool op_convert(const expr_t *e, const expr_ctx_t *ctx, bson_value_t *out, dberr_t *err)
{
    bson_value_t in, to;
    bson_type_t target = BSON_TYPE_EOD;
    expr_val_missing(&in);
    if (!expr_eval_arg(e, CONV_TO, ctx, &to, err))
        return false;
    bool ok = expr_eval_arg(e, CONV_INPUT, ctx, &in, err) &&
              (expr_is_nullish(&to) || convert_target(&to, &target, err));
    expr_val_free(&to);
    if (ok && expr_is_nullish(&in))
        ok = expr_eval_on_null(e, CONV_ON_NULL, ctx, out, err);
    else if (ok && target == BSON_TYPE_EOD)
        expr_val_null(out);
    else if (ok)
        ok = convert_value(&in, target, out, err) ||
             expr_eval_on_error(e, CONV_ON_ERROR, ctx, out, err);
    expr_val_free(&in);
    return ok;
}

const expr_op_t expr_type_ops[] = {
    {"$convert", .fn = op_convert, .parse = OPP_CUSTOM, .parse_fn = parse_convert},
    {"$isNumber", .eager = op_isnumber, .min_args = 1, .max_args = 1},
    {"$toBool", .eager = convert_op, .min_args = 1, .max_args = 1, .aux = BSON_TYPE_BOOL},
    {"$toDecimal", .eager = convert_op, .min_args = 1, .max_args = 1, .aux = BSON_TYPE_DECIMAL128},
    {"$toDouble", .eager = convert_op, .min_args = 1, .max_args = 1, .aux = BSON_TYPE_DOUBLE},
    {"$toInt", .eager = convert_op, .min_args = 1, .max_args = 1, .aux = BSON_TYPE_INT32},
    {"$toLong", .eager = convert_op, .min_args = 1, .max_args = 1, .aux = BSON_TYPE_INT64},
    {"$toObjectId", .eager = convert_op, .min_args = 1, .max_args = 1, .aux = BSON_TYPE_OID},
    {"$toString", .eager = convert_op, .min_args = 1, .max_args = 1, .aux = BSON_TYPE_UTF8},
    {"$type", .eager = op_type, .min_args = 1, .max_args = 1},
    {NULL},
};
