/* expr/string: the string operators — $concat $toLower $toUpper
 * $strLenBytes $strLenCP $substr $substrBytes $substrCP $strcasecmp $split
 * $indexOfBytes $indexOfCP $trim $ltrim $rtrim $replaceOne $replaceAll —
 * and the string coercion they share with $toString. */
#include "doc/expr/expr-private.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "util/buf.h"
#include "util/fiber.h"
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

/* The length of the UTF-8 character starting with byte `c`. */
static size_t utf8_len(unsigned char c)
{
    return c < 0x80 ? 1 : c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc0 ? 2 : 1;
}

/* A starting or ending index of $indexOfBytes/$indexOfCP: a whole,
 * non-negative number (40096, 40097 as mongod). */
static bool index_arg(const expr_t *e, const bson_value_t *v, const char *what, int64_t *out,
                      dberr_t *err)
{
    char *s = NULL;
    bool ok = true;
    if (!num_to_int64_whole(v, out)) {
        s = shellfmt_value(v);
        ok = dberr_set(err, 40096,
                       "%s requires an integral %s, found a value of type: %s, with value: %s",
                       e->op->name, what, shellfmt_type_name(v->value_type), s);
    } else if (*out < 0) {
        s = shellfmt_value(v);
        ok = dberr_set(err, 40097, "%s requires a nonnegative %s, found: %s", e->op->name,
                       !strcmp(what, "starting index") ? "start index" : "ending index", s);
    }
    bson_free(s);
    return ok;
}

/* $indexOfBytes (aux 0) and $indexOfCP (aux 1): [string, substring, start,
 * end], offsets in bytes or code points. */
static bool op_indexof(const expr_t *e, const bson_value_t *v, bson_value_t *out, dberr_t *err)
{
    bool cp = e->op->aux;
    int64_t start = 0, end = INT64_MAX;
    if (expr_is_nullish(&v[0])) {
        expr_val_null(out);
        return true;
    }
    if (v[0].value_type != BSON_TYPE_UTF8)
        return dberr_set(err, cp ? 40093 : 40091,
                         "%s requires a string as the first argument, found: %s", e->op->name,
                         shellfmt_type_name(v[0].value_type));
    if (v[1].value_type != BSON_TYPE_UTF8)
        return dberr_set(err, cp ? 40094 : 40092,
                         "%s requires a string as the second argument, found: %s", e->op->name,
                         shellfmt_type_name(v[1].value_type));
    if (e->nargs > 2 && !index_arg(e, &v[2], "starting index", &start, err))
        return false;
    if (e->nargs > 3 && !index_arg(e, &v[3], "ending index", &end, err))
        return false;
    const char *s = v[0].value.v_utf8.str, *t = v[1].value.v_utf8.str;
    size_t len = v[0].value.v_utf8.len, tlen = v[1].value.v_utf8.len;
    /* walk by bytes or by characters, counting positions */
    int64_t pos = 0;
    size_t i = 0;
    while (pos < start && i < len) {
        i += cp ? utf8_len((unsigned char)s[i]) : 1;
        pos++;
    }
    if (pos < start || start > end) {
        expr_val_int32(out, -1);
        return true;
    }
    /* the match must end by `end`: its byte offset, found once */
    size_t limit = len;
    if (!cp && end < (int64_t)len) {
        limit = (size_t)end;
    } else if (cp) {
        size_t j = i;
        for (int64_t k = pos; k < end && j < len; k++)
            j += utf8_len((unsigned char)s[j]);
        limit = j < len ? j : len;
    }
    for (; pos < end && i + tlen <= limit; pos++) {
        if ((pos & 0xffff) == 0xffff && !fiber_check(err))
            return false;
        if (memcmp(s + i, t, tlen) == 0) {
            if (pos > INT32_MAX)
                expr_val_int64(out, pos);
            else
                expr_val_int32(out, (int32_t)pos);
            return true;
        }
        if (i >= len)
            break;
        i += cp ? utf8_len((unsigned char)s[i]) : 1;
    }
    expr_val_int32(out, -1);
    return true;
}

/* {$substrCP: [string, index, count]} in code points. */
static bool op_substrcp(const expr_t *e, const bson_value_t *v, bson_value_t *out, dberr_t *err)
{
    char *s = NULL;
    size_t len;
    int32_t start, count;
    bool ok = true;
    if (!expr_coerce_string(&v[0], &s, &len))
        return dberr_set(err, 16007, "can't convert from BSON type %s to String",
                         shellfmt_type_name(v[0].value_type));
    if (!num_is_number(&v[1])) {
        ok = dberr_set(err, 34450,
                       "$substrCP: starting index must be a numeric type (is BSON type %s)",
                       shellfmt_type_name(v[1].value_type));
    } else if (!expr_as_int32(&v[1], &start)) {
        ok = dberr_set(err, 34451,
                       "$substrCP: starting index cannot be represented as a 32-bit integral "
                       "value: %g",
                       num_to_double(&v[1]));
    } else if (!num_is_number(&v[2])) {
        ok = dberr_set(err, 34452, "$substrCP: length must be a numeric type (is BSON type %s)",
                       shellfmt_type_name(v[2].value_type));
    } else if (!expr_as_int32(&v[2], &count)) {
        ok = dberr_set(err, 34453,
                       "$substrCP: length cannot be represented as a 32-bit integral value: %g",
                       num_to_double(&v[2]));
    } else if (start < 0) {
        ok = dberr_set(err, 34454, "$substrCP: the starting index must be nonnegative integer.");
    } else if (count < 0) {
        ok = dberr_set(err, 34455, "$substrCP: length must be a nonnegative integer.");
    } else {
        size_t i = 0, j;
        for (int32_t k = 0; k < start && i < len; k++)
            i += utf8_len((unsigned char)s[i]);
        j = i;
        for (int32_t k = 0; k < count && j < len; k++)
            j += utf8_len((unsigned char)s[j]);
        expr_val_string(out, s + (i < len ? i : len), (j < len ? j : len) - (i < len ? i : len));
    }
    bson_free(s);
    return ok;
}

/* The code points $trim removes by default: mongod's whitespace set. */
static const uint32_t trim_default[] = {0x0000, 0x0020, 0x0009, 0x000A, 0x000B, 0x000C, 0x000D,
                                        0x00A0, 0x1680, 0x2000, 0x2001, 0x2002, 0x2003, 0x2004,
                                        0x2005, 0x2006, 0x2007, 0x2008, 0x2009, 0x200A, 0x2028,
                                        0x2029, 0x202F, 0x205F, 0x3000};

/* The code point at s[i] (of `n` bytes). */
static uint32_t utf8_decode(const char *s, size_t i, size_t n)
{
    const unsigned char *u = (const unsigned char *)s + i;
    uint32_t c = u[0];
    if (n == 2)
        c = ((c & 0x1f) << 6) | (u[1] & 0x3f);
    else if (n == 3)
        c = ((c & 0x0f) << 12) | ((uint32_t)(u[1] & 0x3f) << 6) | (u[2] & 0x3f);
    else if (n == 4)
        c = ((c & 0x07) << 18) | ((uint32_t)(u[1] & 0x3f) << 12) | ((uint32_t)(u[2] & 0x3f) << 6) |
            (u[3] & 0x3f);
    return c;
}

/* True when the code point `c` is one of `set` (`chars` when not NULL). */
static bool trim_has(const char *chars, size_t clen, uint32_t c)
{
    if (!chars) {
        for (size_t i = 0; i < sizeof trim_default / sizeof *trim_default; i++)
            if (trim_default[i] == c)
                return true;
        return false;
    }
    for (size_t i = 0; i < clen;) {
        size_t n = utf8_len((unsigned char)chars[i]);
        if (i + n > clen)
            n = clen - i;
        if (utf8_decode(chars, i, n) == c)
            return true;
        i += n;
    }
    return false;
}

/* $trim (aux 3: both ends), $ltrim (1), $rtrim (2): {input, chars}. */
static bool op_trim(const expr_t *e, const expr_ctx_t *ctx, bson_value_t *out, dberr_t *err)
{
    int ends = e->op->aux;
    bson_value_t v[2];
    bool ok = true;
    if (!expr_eval_args(e, ctx, v, err))
        return false;
    if (expr_is_nullish(&v[0]) || (e->args[1] && expr_is_nullish(&v[1]))) {
        expr_val_null(out);
        goto cleanup;
    }
    for (int i = 0; i < 2; i++)
        if ((i == 0 || e->args[1]) && v[i].value_type != BSON_TYPE_UTF8) {
            char *sv = shellfmt_value(&v[i]);
            ok = dberr_set(err, i ? 50700 : 50699,
                           "%s requires %s to be a string, got %s (of type %s) instead.",
                           e->op->name, i ? "'chars'" : "its input", sv,
                           shellfmt_type_name(v[i].value_type));
            bson_free(sv);
            goto cleanup;
        }
    {
        const char *s = v[0].value.v_utf8.str;
        const char *chars = e->args[1] ? v[1].value.v_utf8.str : NULL;
        size_t clen = e->args[1] ? v[1].value.v_utf8.len : 0;
        size_t len = v[0].value.v_utf8.len, from = 0, to = len;
        if (ends & 1)
            while (from < len) {
                size_t n = utf8_len((unsigned char)s[from]);
                if (from + n > len || !trim_has(chars, clen, utf8_decode(s, from, n)))
                    break;
                from += n;
            }
        if (ends & 2)
            while (to > from) {
                size_t b = to - 1;
                while (b > from && ((unsigned char)s[b] & 0xc0) == 0x80)
                    b--;
                if (!trim_has(chars, clen, utf8_decode(s, b, to - b)))
                    break;
                to = b;
            }
        expr_val_string(out, s + from, to - from);
    }
cleanup:
    expr_free_args(v, e->nargs);
    return ok;
}

/* $replaceOne (aux 0) and $replaceAll (aux 1): {input, find, replacement}. */
static bool op_replace(const expr_t *e, const expr_ctx_t *ctx, bson_value_t *out, dberr_t *err)
{
    static const char *const names[] = {"input", "find", "replacement"};
    bool all = e->op->aux, ok = true, null = false;
    bson_value_t v[3];
    buf_t r;
    buf_init(&r);
    if (!expr_eval_args(e, ctx, v, err))
        return false;
    for (int i = 0; ok && i < 3; i++) {
        if (expr_is_nullish(&v[i]))
            null = true;
        else if (v[i].value_type != BSON_TYPE_UTF8)
            ok = dberr_set(err, 51746 - i, "%s requires that '%s' be a string, found: %s",
                           e->op->name, names[i], shellfmt_type_name(v[i].value_type));
    }
    if (!ok || null) {
        if (ok)
            expr_val_null(out);
        goto cleanup;
    }
    {
        const char *s = v[0].value.v_utf8.str, *f = v[1].value.v_utf8.str;
        const char *rep = v[2].value.v_utf8.str;
        size_t len = v[0].value.v_utf8.len, flen = v[1].value.v_utf8.len;
        size_t rlen = v[2].value.v_utf8.len, i = 0, done = 0;
        bool replaced = false;
        while (i <= len) {
            if ((i & 0xffff) == 0xffff && !(ok = fiber_check(err)))
                goto cleanup;
            if ((!replaced || all) && i + flen <= len && memcmp(s + i, f, flen) == 0) {
                buf_append(&r, s + done, i - done);
                buf_append(&r, rep, rlen);
                replaced = true;
                if (r.len > EXPR_MAX_VALUE_BYTES) {
                    ok = dberr_set(err, DBERR_BSON_OBJECT_TOO_LARGE,
                                   "%s would build a string over the %d bytes (16 MB) a value "
                                   "may hold",
                                   e->op->name, EXPR_MAX_VALUE_BYTES);
                    goto cleanup;
                }
                if (flen == 0) {
                    /* an empty `find` matches before every character */
                    if (i == len)
                        break;
                    size_t n = utf8_len((unsigned char)s[i]);
                    buf_append(&r, s + i, n);
                    i += n;
                    done = i;
                    continue;
                }
                i += flen;
                done = i;
                continue;
            }
            if (i == len)
                break;
            i++;
        }
        buf_append(&r, s + done, len - done);
        expr_val_string(out, (const char *)r.data, r.len);
    }
cleanup:
    buf_destroy(&r);
    expr_free_args(v, e->nargs);
    return ok;
}

const expr_op_t expr_string_ops[] = {
    {"$concat", .fn = op_concat, .max_args = -1},
    {"$indexOfBytes", .eager = op_indexof, .min_args = 2, .max_args = 4, .aux = 0},
    {"$indexOfCP", .eager = op_indexof, .min_args = 2, .max_args = 4, .aux = 1},
    {"$ltrim", .fn = op_trim, .parse = OPP_NAMED, .params = {"!input", "chars"}, .aux = 1,
     .named_codes = {50696, 50694}, .missing_codes = {50695}},
    {"$replaceAll", .fn = op_replace, .parse = OPP_NAMED,
     .params = {"!input", "!find", "!replacement"}, .aux = 1, .named_codes = {51751, 51750},
     .missing_codes = {51749, 51748, 51747}},
    {"$replaceOne", .fn = op_replace, .parse = OPP_NAMED,
     .params = {"!input", "!find", "!replacement"}, .named_codes = {51751, 51750},
     .missing_codes = {51749, 51748, 51747}},
    {"$rtrim", .fn = op_trim, .parse = OPP_NAMED, .params = {"!input", "chars"}, .aux = 2,
     .named_codes = {50696, 50694}, .missing_codes = {50695}},
    {"$split", .eager = op_split, .min_args = 2, .max_args = 2},
    {"$strLenBytes", .eager = op_strlenbytes, .min_args = 1, .max_args = 1},
    {"$strLenCP", .eager = op_strlencp, .min_args = 1, .max_args = 1},
    {"$strcasecmp", .eager = op_strcasecmp, .min_args = 2, .max_args = 2},
    {"$substr", .eager = op_substr, .min_args = 3, .max_args = 3},
    {"$substrBytes", .eager = op_substr, .min_args = 3, .max_args = 3},
    {"$substrCP", .eager = op_substrcp, .min_args = 3, .max_args = 3},
    {"$toLower", .eager = case_op, .min_args = 1, .max_args = 1, .aux = 0},
    {"$toUpper", .eager = case_op, .min_args = 1, .max_args = 1, .aux = 1},
    {"$trim", .fn = op_trim, .parse = OPP_NAMED, .params = {"!input", "chars"}, .aux = 3,
     .named_codes = {50696, 50694}, .missing_codes = {50695}},
    {NULL},
};
