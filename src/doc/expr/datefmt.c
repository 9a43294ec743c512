/* expr/datefmt: dates as text — $dateToString with mongod's format
 * specifiers, onNull and timezone; $dateFromString (format, timezone,
 * onError, onNull; the parsing is dateparse.c); and $toDate of dates,
 * timestamps, ObjectIds, numbers and date strings. */
#include "doc/expr/date-private.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "util/shellfmt.h"

/* Appends `ms` formatted by `fmt` in `tz` to `s`. */
static bool format_date(int64_t ms, const char *fmt, const date_tz_t *tz, bson_string_t *s,
                        dberr_t *err)
{
    date_parts_t p;
    date_split(ms, tz, &p);
    for (const char *c = fmt; *c; c++) {
        if (*c != '%') {
            bson_string_append_c(s, *c);
            continue;
        }
        c++;
        if (!*c)
            return dberr_set(err, 18535, "Unmatched '%%' at end of format string");
        int64_t off_min = p.off_ms / 60000;
        switch (*c) {
        case 'Y':
        case 'G': {
            int64_t y = *c == 'Y' ? p.year : p.iso_year;
            if (y < 0 || y > 9999)
                return dberr_set(err, 18537,
                                 "$dateToString is only defined on year 0-9999, tried to use "
                                 "year %lld",
                                 (long long)y);
            bson_string_append_printf(s, "%04lld", (long long)y);
            break;
        }
        case 'm': bson_string_append_printf(s, "%02d", p.month); break;
        case 'd': bson_string_append_printf(s, "%02d", p.day); break;
        case 'H': bson_string_append_printf(s, "%02d", p.hour); break;
        case 'M': bson_string_append_printf(s, "%02d", p.minute); break;
        case 'S': bson_string_append_printf(s, "%02d", p.second); break;
        case 'L': bson_string_append_printf(s, "%03d", p.millis); break;
        case 'j': bson_string_append_printf(s, "%03d", p.yday); break;
        case 'w': bson_string_append_printf(s, "%d", p.dow + 1); break;
        case 'u': bson_string_append_printf(s, "%d", p.iso_dow); break;
        case 'U': bson_string_append_printf(s, "%02d", (p.yday - 1 + 7 - p.dow) / 7); break;
        case 'V': bson_string_append_printf(s, "%02d", p.iso_week); break;
        case 'b': bson_string_append_printf(s, "%.3s", date_month_names[p.month - 1]); break;
        case 'B': bson_string_append(s, date_month_names[p.month - 1]); break;
        case 'z':
            bson_string_append_printf(s, "%c%02lld%02lld", off_min < 0 ? '-' : '+',
                                      (long long)(llabs(off_min) / 60),
                                      (long long)(llabs(off_min) % 60));
            break;
        case 'Z': bson_string_append_printf(s, "%lld", (long long)off_min); break;
        case '%': bson_string_append_c(s, '%'); break;
        default:
            return dberr_set(err, 18536, "Invalid format character '%%%c' in format string", *c);
        }
    }
    return true;
}

static bool op_to_string(const expr_t *e, const expr_ctx_t *ctx, bson_value_t *out, dberr_t *err)
{
    bson_value_t d, f;
    date_tz_t tz;
    bool null_tz;
    int64_t ms = 0;
    bool ok = false;
    expr_val_missing(&f);
    if (!expr_eval_arg(e, 0, ctx, &d, err))
        return false;
    if (expr_is_nullish(&d)) {
        expr_val_free(&d);
        if (e->args[3])
            return expr_eval_arg(e, 3, ctx, out, err);
        expr_val_null(out);
        return true;
    }
    if (!expr_eval_arg(e, 1, ctx, &f, err) || !date_eval_tz(e, 2, ctx, &tz, &null_tz, err))
        goto cleanup;
    if (f.value_type != BSON_TYPE_EOD && !expr_is_nullish(&f) && f.value_type != BSON_TYPE_UTF8) {
        dberr_set(err, 18533, "$dateToString requires that 'format' be a string, found: %s",
                  shellfmt_type_name(f.value_type));
        goto cleanup;
    }
    if (null_tz || (f.value_type != BSON_TYPE_EOD && expr_is_nullish(&f))) {
        expr_val_null(out);
        ok = true;
        goto cleanup;
    }
    if (!date_coerce(&d, &ms)) {
        dberr_set(err, 16006, "can't convert from BSON type %s to Date",
                  shellfmt_type_name(d.value_type));
        goto cleanup;
    }
    const char *fmt = f.value_type == BSON_TYPE_UTF8 ? f.value.v_utf8.str
                      : e->args[2]                   ? "%Y-%m-%dT%H:%M:%S.%L"
                                                     : "%Y-%m-%dT%H:%M:%S.%LZ";
    bson_string_t *s = bson_string_new(NULL);
    ok = format_date(ms, fmt, &tz, s, err);
    if (ok)
        expr_val_string(out, s->str, s->len);
    bson_string_free(s, true);
cleanup:
    expr_val_free(&d);
    expr_val_free(&f);
    return ok;
}

bool expr_to_date(const bson_value_t *v, bson_value_t *out, dberr_t *err)
{
    int64_t ms;
    if (expr_is_nullish(v)) {
        expr_val_null(out);
        return true;
    }
    if (date_coerce(v, &ms)) {
        expr_val_date(out, ms);
        return true;
    }
    if (v->value_type == BSON_TYPE_INT64) {
        expr_val_date(out, v->value.v_int64);
        return true;
    }
    if (v->value_type == BSON_TYPE_DOUBLE || v->value_type == BSON_TYPE_DECIMAL128) {
        double d = num_to_double(v);
        if (isnan(d) || isinf(d) || fabs(d) >= 9.2e18)
            return dberr_set(err, DBERR_CONVERSION_FAILURE,
                             "Conversion would overflow target type in $convert with no onError "
                             "value");
        expr_val_date(out, (int64_t)trunc(d));
        return true;
    }
    if (v->value_type == BSON_TYPE_UTF8) { /* free-form, in UTC, as mongod */
        date_tz_t utc;
        date_tz_utc(&utc);
        if (!date_from_string(v->value.v_utf8.str, NULL, &utc, false, &ms, err))
            return false;
        expr_val_date(out, ms);
        return true;
    }
    return dberr_set(err, DBERR_CONVERSION_FAILURE,
                     "Unsupported conversion from %s to date in $convert with no onError value",
                     shellfmt_type_name(v->value_type));
}

/* $toDate: a date, timestamp, ObjectId, number of milliseconds or date string. */
static bool op_to_date(const expr_t *e, const bson_value_t *v, bson_value_t *out, dberr_t *err)
{
    return expr_to_date(v, out, err);
}

/* $dateFromString's arguments, in e->args. */
enum { DFS_STRING, DFS_FORMAT, DFS_TZ, DFS_ON_ERROR, DFS_ON_NULL, DFS_N };

/* $dateFromString in mongod's order: the format's type and specifiers
 * (40684, 18535, 18536) and the timezone (40517, 40485) fail whatever the
 * input; a nullish dateString gives onNull (or null); then a dateString
 * that is no string or does not parse is ConversionFailure 241, which
 * onError replaces. */
static bool op_from_string(const expr_t *e, const expr_ctx_t *ctx, bson_value_t *out,
                           dberr_t *err)
{
    bson_value_t str, fmt;
    date_tz_t tz;
    bool null_tz = false, ok = false;
    expr_val_missing(&fmt);
    if (!expr_eval_arg(e, DFS_STRING, ctx, &str, err))
        return false;
    if (e->args[DFS_FORMAT]) {
        if (!expr_eval_arg(e, DFS_FORMAT, ctx, &fmt, err))
            goto cleanup;
        if (!expr_is_nullish(&fmt)) {
            if (fmt.value_type != BSON_TYPE_UTF8) {
                char *shown = shellfmt_value(&fmt);
                dberr_set(err, 40684,
                          "$dateFromString requires that 'format' be a string, found: %s with "
                          "value %s",
                          shellfmt_type_name(fmt.value_type), shown);
                bson_free(shown);
                goto cleanup;
            }
            if (!date_check_from_format(fmt.value.v_utf8.str, err))
                goto cleanup;
        }
    }
    if (!date_eval_tz(e, DFS_TZ, ctx, &tz, &null_tz, err))
        goto cleanup;
    if (expr_is_nullish(&str)) {
        ok = expr_eval_on_null(e, DFS_ON_NULL, ctx, out, err);
        goto cleanup;
    }
    int64_t ms = 0;
    bool parsed;
    if (str.value_type != BSON_TYPE_UTF8) {
        char *shown = shellfmt_value(&str);
        parsed = dberr_set(err, DBERR_CONVERSION_FAILURE,
                           "$dateFromString requires that 'dateString' be a string, found: %s "
                           "with value %s",
                           shellfmt_type_name(str.value_type), shown);
        bson_free(shown);
    } else if (null_tz || (e->args[DFS_FORMAT] && expr_is_nullish(&fmt))) {
        expr_val_null(out);
        ok = true;
        goto cleanup;
    } else {
        parsed = date_from_string(str.value.v_utf8.str,
                                  e->args[DFS_FORMAT] ? fmt.value.v_utf8.str : NULL, &tz,
                                  e->args[DFS_TZ] != NULL, &ms, err);
    }
    if (parsed) {
        expr_val_date(out, ms);
        ok = true;
    } else {
        ok = expr_eval_on_error(e, DFS_ON_ERROR, ctx, out, err);
    }
cleanup:
    expr_val_free(&str);
    expr_val_free(&fmt);
    return ok;
}

const expr_op_t expr_datefmt_ops[] = {
    {"$dateToString", .fn = op_to_string, .parse = OPP_CUSTOM, .parse_fn = date_parse_row,
     .params = {"!date", "format", "timezone", "onNull"}, .named_codes = {18629, 18534},
     .missing_codes = {18628}},
    /* params in DFS_* order */
    {"$dateFromString", .fn = op_from_string, .parse = OPP_CUSTOM, .parse_fn = date_parse_row,
     .params = {"!dateString", "format", "timezone", "onError", "onNull"},
     .named_codes = {40540, 40541}, .missing_codes = {40542}},
    {"$toDate", .eager = op_to_date, .min_args = 1, .max_args = 1},
    {NULL},
};
