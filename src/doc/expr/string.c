/* expr/string: the string operators — $concat $toLower $toUpper
 * $strLenBytes $strLenCP $substr $substrBytes $strcasecmp $split — and the
 * string coercion they share with $toString. */
#include "doc/expr/expr-private.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "util/shellfmt.h"

/* Renders a date (ms since the epoch) as mongod's ISO-8601 form. */
static void format_date(int64_t ms, char *buf, size_t n)
{
    int64_t secs = ms / 1000;
    int64_t rem = ms % 1000;
    if (rem < 0) {
        rem += 1000;
        secs -= 1;
    }
    time_t t = (time_t)secs;
    struct tm tm;
    gmtime_r(&t, &tm);
    snprintf(buf, n, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1,
             tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (int)rem);
}

/* Formats a double the way mongod's string conversions do. */
void expr_double_to_string(double d, char *buf, size_t n)
{
    if (isnan(d))
        snprintf(buf, n, "NaN");
    else if (isinf(d))
        snprintf(buf, n, d > 0 ? "Infinity" : "-Infinity");
    else {
        /* shortest representation that round-trips */
        for (int p = 1; p <= 17; p++) {
            snprintf(buf, n, "%.*g", p, d);
            if (strtod(buf, NULL) == d)
                break;
        }
    }
}

/* Coerces `v` to a string as $concat-free string operators do ($toLower,
 * $substr): null → "", numbers and dates print. False for other types. */
bool expr_coerce_string(const bson_value_t *v, char **s, size_t *len)
{
    char buf[64];
    switch (v->value_type) {
    case BSON_TYPE_UTF8:
        *s = bson_strndup(v->value.v_utf8.str, v->value.v_utf8.len);
        *len = v->value.v_utf8.len;
        return true;
    case BSON_TYPE_SYMBOL:
        *s = bson_strndup(v->value.v_symbol.symbol, v->value.v_symbol.len);
        *len = v->value.v_symbol.len;
        return true;
    case BSON_TYPE_EOD:
    case BSON_TYPE_NULL:
    case BSON_TYPE_UNDEFINED:
        buf[0] = '\0';
        break;
    case BSON_TYPE_INT32:
        snprintf(buf, sizeof buf, "%d", v->value.v_int32);
        break;
    case BSON_TYPE_INT64:
        snprintf(buf, sizeof buf, "%lld", (long long)v->value.v_int64);
        break;
    case BSON_TYPE_DOUBLE:
        expr_double_to_string(v->value.v_double, buf, sizeof buf);
        break;
    case BSON_TYPE_DECIMAL128:
        bson_decimal128_to_string(&v->value.v_decimal128, buf);
        break;
    case BSON_TYPE_DATE_TIME:
        format_date(v->value.v_datetime, buf, sizeof buf);
        break;
    case BSON_TYPE_TIMESTAMP:
        snprintf(buf, sizeof buf, "Timestamp(%u, %u)", v->value.v_timestamp.timestamp,
                 v->value.v_timestamp.increment);
        break;
    default:
        return false;
    }
    *len = strlen(buf);
    *s = bson_strndup(buf, *len);
    return true;
}

static bool op_concat(const expr_t *e, const expr_ctx_t *ctx, bson_value_t *out, dberr_t *err)
{
    bson_string_t *s = bson_string_new(NULL);
    bool ok = true, is_null = false;
    for (size_t i = 0; i < e->nargs; i++) {
        bson_value_t v;
        if (!expr_eval_node(e->args[i], ctx, &v, err)) {
            ok = false;
            goto cleanup;
        }
        if (expr_is_nullish(&v)) {
            is_null = true;
        } else if (v.value_type != BSON_TYPE_UTF8) {
            ok = dberr_set(err, 16702, "$concat only supports strings, not %s",
                           shellfmt_type_name(v.value_type));
            expr_val_free(&v);
            goto cleanup;
        } else if (!is_null) {
            bson_string_append_printf(s, "%.*s", (int)v.value.v_utf8.len, v.value.v_utf8.str);
        }
        expr_val_free(&v);
    }
    if (is_null)
        expr_val_null(out);
    else
        expr_val_string(out, s->str, s->len);
cleanup:
    bson_string_free(s, true);
    return ok;
}

/* $toLower and $toUpper (aux 1). */
static bool case_op(const expr_t *e, const bson_value_t *v, bson_value_t *out, dberr_t *err)
{
    bool upper = e->op->aux;
    char *s;
    size_t len;
    if (!expr_coerce_string(v, &s, &len)) {
        const char *tn = shellfmt_type_name(v->value_type);
        return dberr_set(err, 16007, "can't convert from BSON type %s to String", tn);
    }
    for (size_t i = 0; i < len; i++)
        s[i] = (char)(upper ? toupper((unsigned char)s[i]) : tolower((unsigned char)s[i]));
    expr_val_string(out, s, len);
    bson_free(s);
    return true;
}

static bool op_strlenbytes(const expr_t *e, const bson_value_t *v, bson_value_t *out, dberr_t *err)
{
    if (v->value_type != BSON_TYPE_UTF8) {
        const char *tn = shellfmt_type_name(v->value_type);
        return dberr_set(err, 34473, "$strLenBytes requires a string argument, found: %s", tn);
    }
    expr_val_int32(out, (int32_t)v->value.v_utf8.len);
    return true;
}

static bool op_strlencp(const expr_t *e, const bson_value_t *v, bson_value_t *out, dberr_t *err)
{
    if (v->value_type != BSON_TYPE_UTF8) {
        const char *tn = shellfmt_type_name(v->value_type);
        return dberr_set(err, 34471, "$strLenCP requires a string argument, found: %s", tn);
    }
    int32_t n = 0;
    for (uint32_t i = 0; i < v->value.v_utf8.len; i++)
        if (((unsigned char)v->value.v_utf8.str[i] & 0xc0) != 0x80)
            n++;
    expr_val_int32(out, n);
    return true;
}

static bool op_substr(const expr_t *e, const bson_value_t *v, bson_value_t *out, dberr_t *err)
{
    bool ok = true;
    char *s = NULL;
    size_t len;
    if (!expr_coerce_string(&v[0], &s, &len)) {
        ok = dberr_set(err, 16007, "can't convert from BSON type %s to String",
                       shellfmt_type_name(v[0].value_type));
        goto cleanup;
    }
    if (!num_is_number(&v[1])) {
        ok = dberr_set(err, 16034, "%s: starting index must be a numeric type (is BSON type %s)",
                       e->op->name, shellfmt_type_name(v[1].value_type));
        goto cleanup;
    }
    if (!num_is_number(&v[2])) {
        ok = dberr_set(err, 16035, "%s: length must be a numeric type (is BSON type %s)",
                       e->op->name, shellfmt_type_name(v[2].value_type));
        goto cleanup;
    }
    {
        double ds = num_to_double(&v[1]), dl = num_to_double(&v[2]);
        size_t start = ds < 0 ? len : ds > (double)len ? len : (size_t)ds;
        size_t n = (dl < 0 || dl > (double)(len - start)) ? len - start : (size_t)dl;
        if (start < len && ((unsigned char)s[start] & 0xc0) == 0x80) {
            ok = dberr_set(err, 28656,
                           "%s:  Invalid range, starting index is a UTF-8 continuation byte.",
                           e->op->name);
            goto cleanup;
        }
        if (start + n < len && ((unsigned char)s[start + n] & 0xc0) == 0x80) {
            ok =
                dberr_set(err, 28657,
                          "%s:  Invalid range, ending index is in the middle of a UTF-8 character.",
                          e->op->name);
            goto cleanup;
        }
        expr_val_string(out, s + start, n);
    }
cleanup:
    bson_free(s);
    return ok;
}

static bool op_strcasecmp(const expr_t *e, const bson_value_t *v, bson_value_t *out, dberr_t *err)
{
    char *a = NULL, *b = NULL;
    size_t al, bl;
    bool ok = true;
    if (!expr_coerce_string(&v[0], &a, &al) || !expr_coerce_string(&v[1], &b, &bl)) {
        ok = dberr_set(err, 16007, "can't convert from BSON type %s to String",
                       shellfmt_type_name(a ? v[1].value_type : v[0].value_type));
        goto cleanup;
    }
    {
        int c = strcasecmp(a, b);
        expr_val_int32(out, c < 0 ? -1 : c > 0 ? 1 : 0);
    }
cleanup:
    bson_free(a);
    bson_free(b);
    return ok;
}

static bool op_split(const expr_t *e, const bson_value_t *v, bson_value_t *out, dberr_t *err)
{
    bool ok = true;
    if (expr_is_nullish(&v[0])) {
        expr_val_null(out);
        goto cleanup;
    }
    if (!expr_check_type(&v[0], BSON_TYPE_UTF8, 40085,
                         "$split requires an expression that evaluates to a string as a first "
                         "argument, found: %s",
                         err) ||
        !expr_check_type(&v[1], BSON_TYPE_UTF8, 40086,
                         "$split requires an expression that evaluates to a string as a second "
                         "argument, found: %s",
                         err)) {
        ok = false;
        goto cleanup;
    }
    if (v[1].value.v_utf8.len == 0) {
        ok = dberr_set(err, 40087, "$split requires a non-empty separator");
        goto cleanup;
    }
    {
        bson_t arr;
        const char *s = v[0].value.v_utf8.str, *end = s + v[0].value.v_utf8.len;
        const char *sep = v[1].value.v_utf8.str;
        size_t seplen = v[1].value.v_utf8.len;
        uint32_t idx = 0;
        bson_init(&arr);
        for (;;) {
            const char *hit = NULL;
            for (const char *p = s; p + seplen <= end; p++)
                if (memcmp(p, sep, seplen) == 0) {
                    hit = p;
                    break;
                }
            char key[16];
            const char *k;
            bson_uint32_to_string(idx++, &k, key, sizeof key);
            bson_append_utf8(&arr, k, -1, s, (int)((hit ? hit : end) - s));
            if (!hit)
                break;
            s = hit + seplen;
        }
        expr_value_take_bson(out, &arr, BSON_TYPE_ARRAY);
    }
cleanup:
    return ok;
}

const expr_op_t expr_string_ops[] = {
    {"$concat", op_concat, OPP_ARGS, 0, -1, {0}, 0, NULL},
    {"$split", NULL, OPP_ARGS, 2, 2, {0}, 0, NULL, op_split},
    {"$strLenBytes", NULL, OPP_ARGS, 1, 1, {0}, 0, NULL, op_strlenbytes},
    {"$strLenCP", NULL, OPP_ARGS, 1, 1, {0}, 0, NULL, op_strlencp},
    {"$strcasecmp", NULL, OPP_ARGS, 2, 2, {0}, 0, NULL, op_strcasecmp},
    {"$substr", NULL, OPP_ARGS, 3, 3, {0}, 0, NULL, op_substr},
    {"$substrBytes", NULL, OPP_ARGS, 3, 3, {0}, 0, NULL, op_substr},
    {"$toLower", NULL, OPP_ARGS, 1, 1, {0}, 0, NULL, case_op},
    {"$toUpper", NULL, OPP_ARGS, 1, 1, {0}, 1, NULL, case_op},
    {NULL, NULL, OPP_ARGS, 0, 0, {0}, 0, NULL},
};
