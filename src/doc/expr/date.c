/* expr/date: the date operators that read or do arithmetic on dates —
 * $year $month $dayOfMonth $hour $minute $second $millisecond $dayOfWeek
 * $dayOfYear $week $isoWeek $isoWeekYear $isoDayOfWeek, $dateToParts
 * $dateFromParts, $dateAdd $dateSubtract $dateDiff $dateTrunc, $tsSecond
 * $tsIncrement — in any time zone: Olson names come from ICU's copy of the
 * tz database (ucal), fixed offsets are read here. Calendar arithmetic is
 * proleptic Gregorian, as mongod's. Formatting and parsing: datefmt.c. */
#include "doc/expr/date-private.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unicode/ucal.h>
#include <unicode/ustring.h>

#include "util/shellfmt.h"

const char *const date_month_names[12] = {"January", "February", "March",     "April",
                                          "May",     "June",     "July",      "August",
                                          "September", "October", "November", "December"};

/* ------------------------------------------------------------ calendar */

int64_t date_floordiv(int64_t a, int64_t b)
{
    int64_t q = a / b;
    if ((a % b != 0) && ((a < 0) != (b < 0)))
        q--;
    return q;
}

/* Howard Hinnant's days_from_civil / civil_from_days. */
int64_t date_days_from_civil(int64_t y, int64_t m, int64_t d)
{
    y += date_floordiv(m - 1, 12);
    m = m - 12 * date_floordiv(m - 1, 12);
    y -= m <= 2;
    int64_t era = date_floordiv(y, 400);
    int64_t yoe = y - era * 400;
    int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

static void civil_from_days(int64_t z, int64_t *y, int *m, int *d)
{
    z += 719468;
    int64_t era = date_floordiv(z, 146097);
    int64_t doe = z - era * 146097;
    int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    int64_t mp = (5 * doy + 2) / 153;
    *d = (int)(doy - (153 * mp + 2) / 5 + 1);
    *m = (int)(mp < 10 ? mp + 3 : mp - 9);
    *y = yoe + era * 400 + (*m <= 2);
}

/* The ISO week-numbering year and week of the day `days` (since the epoch). */
static void iso_week_of(int64_t days, int64_t *iso_year, int *iso_week)
{
    int dow = (int)(date_floordiv(days + 4, 7) * -7 + days + 4); /* 0 = Sunday */
    int iso_dow = dow == 0 ? 7 : dow;
    int64_t thursday = days + (4 - iso_dow);
    int64_t y;
    int m, d;
    civil_from_days(thursday, &y, &m, &d);
    *iso_year = y;
    *iso_week = (int)((thursday - date_days_from_civil(y, 1, 1)) / 7 + 1);
}

void date_split(int64_t utc_ms, const date_tz_t *tz, date_parts_t *p)
{
    p->off_ms = date_tz_offset(tz, utc_ms);
    int64_t local = utc_ms + p->off_ms;
    int64_t days = date_floordiv(local, DATE_MS_PER_DAY);
    int64_t rem = local - days * DATE_MS_PER_DAY;
    civil_from_days(days, &p->year, &p->month, &p->day);
    p->hour = (int)(rem / 3600000);
    p->minute = (int)(rem / 60000 % 60);
    p->second = (int)(rem / 1000 % 60);
    p->millis = (int)(rem % 1000);
    p->dow = (int)(days + 4 - date_floordiv(days + 4, 7) * 7);
    p->yday = (int)(days - date_days_from_civil(p->year, 1, 1) + 1);
    p->iso_dow = p->dow == 0 ? 7 : p->dow;
    iso_week_of(days, &p->iso_year, &p->iso_week);
}

bool date_coerce(const bson_value_t *v, int64_t *ms)
{
    switch (v->value_type) {
    case BSON_TYPE_DATE_TIME:
        *ms = v->value.v_datetime;
        return true;
    case BSON_TYPE_TIMESTAMP:
        *ms = (int64_t)v->value.v_timestamp.timestamp * 1000;
        return true;
    case BSON_TYPE_OID:
        *ms = (int64_t)bson_oid_get_time_t(&v->value.v_oid) * 1000;
        return true;
    default:
        return false;
    }
}

/* ---------------------------------------------------------- time zones */

void date_tz_utc(date_tz_t *tz)
{
    tz->fixed = true;
    tz->off_ms = 0;
    tz->cal = NULL;
}

/* One thread's open ICU calendars by zone name (ucal is not thread-safe;
 * a zone is opened once per thread). */
#define TZ_CACHE 16
static __thread struct {
    char name[64];
    UCalendar *cal;
} tz_cache[TZ_CACHE];
static __thread unsigned tz_cache_next;

/* "+hh", "-hh", "+hhmm", "+hh:mm": true with the offset. */
static bool parse_offset(const char *s, int64_t *off)
{
    size_t n = strlen(s);
    if (n < 3 || (s[0] != '+' && s[0] != '-') || !isdigit((unsigned char)s[1]) ||
        !isdigit((unsigned char)s[2]))
        return false;
    int h = (s[1] - '0') * 10 + (s[2] - '0'), m = 0;
    const char *r = s + 3;
    if (*r == ':')
        r++;
    if (*r) {
        if (strlen(r) != 2 || !isdigit((unsigned char)r[0]) || !isdigit((unsigned char)r[1]))
            return false;
        m = (r[0] - '0') * 10 + (r[1] - '0');
    } else if (r != s + 3) {
        return false;
    }
    *off = (int64_t)(h * 60 + m) * 60000 * (s[0] == '-' ? -1 : 1);
    return true;
}

bool date_tz_from_value(const bson_value_t *v, date_tz_t *tz, dberr_t *err)
{
    if (v->value_type != BSON_TYPE_UTF8)
        return dberr_set(err, 40517, "timezone must evaluate to a string, found %s",
                         shellfmt_type_name(v->value_type));
    const char *s = v->value.v_utf8.str;
    date_tz_utc(tz);
    if (parse_offset(s, &tz->off_ms))
        return true;
    if (strlen(s) >= sizeof tz_cache[0].name)
        return dberr_set(err, 40485, "unrecognized time zone identifier: \"%s\"", s);
    for (unsigned i = 0; i < TZ_CACHE; i++)
        if (tz_cache[i].cal && strcmp(tz_cache[i].name, s) == 0) {
            tz->fixed = false;
            tz->cal = tz_cache[i].cal;
            return true;
        }
    UChar zid[64], canon[128];
    UBool is_system = 0;
    UErrorCode st = U_ZERO_ERROR;
    u_uastrncpy(zid, s, 63);
    zid[63] = 0;
    ucal_getCanonicalTimeZoneID(zid, -1, canon, 128, &is_system, &st);
    if (U_FAILURE(st) || !is_system || strcmp(s, "Etc/Unknown") == 0)
        return dberr_set(err, 40485, "unrecognized time zone identifier: \"%s\"", s);
    UCalendar *cal = ucal_open(zid, -1, "en_US_POSIX", UCAL_GREGORIAN, &st);
    if (U_FAILURE(st) || !cal)
        return dberr_set(err, 40485, "unrecognized time zone identifier: \"%s\"", s);
    unsigned slot = tz_cache_next++ % TZ_CACHE;
    if (tz_cache[slot].cal)
        ucal_close(tz_cache[slot].cal);
    tz_cache[slot].cal = cal;
    snprintf(tz_cache[slot].name, sizeof tz_cache[slot].name, "%s", s);
    tz->fixed = false;
    tz->cal = cal;
    return true;
}

int64_t date_tz_offset(const date_tz_t *tz, int64_t utc_ms)
{
    if (tz->fixed)
        return tz->off_ms;
    UErrorCode st = U_ZERO_ERROR;
    UCalendar *cal = tz->cal;
    ucal_setMillis(cal, (UDate)utc_ms, &st);
    int32_t z = ucal_get(cal, UCAL_ZONE_OFFSET, &st);
    int32_t d = ucal_get(cal, UCAL_DST_OFFSET, &st);
    return U_FAILURE(st) ? 0 : (int64_t)z + d;
}

int64_t date_tz_to_utc(const date_tz_t *tz, int64_t local_ms)
{
    int64_t o1 = date_tz_offset(tz, local_ms);
    int64_t u = local_ms - o1;
    int64_t o2 = date_tz_offset(tz, u);
    if (o2 != o1 && date_tz_offset(tz, local_ms - o2) == o2)
        u = local_ms - o2;
    return u;
}

/* ------------------------------------------------------------ arguments */

bool date_parse_named(expr_t *e, bson_iter_t *arg, const char *const *params, size_t nparams,
                      int code_obj, int code_unknown, dberr_t *err)
{
    e->args = bson_malloc0(nparams * sizeof *e->args);
    e->nargs = nparams;
    if (!BSON_ITER_HOLDS_DOCUMENT(arg))
        return dberr_set(err, code_obj, "%s only supports an object as its argument",
                         e->op->name);
    bson_iter_t child;
    bson_iter_recurse(arg, &child);
    while (bson_iter_next(&child)) {
        const char *k = bson_iter_key(&child);
        size_t i;
        for (i = 0; i < nparams; i++)
            if (strcmp(params[i], k) == 0)
                break;
        if (i == nparams)
            return dberr_set(err, code_unknown, "Unrecognized argument to %s: %s", e->op->name,
                             k);
        expr_destroy(e->args[i]);
        if (!(e->args[i] = expr_parse(&child, err)))
            return false;
    }
    return true;
}

bool date_parse_row(expr_t *e, bson_iter_t *arg, dberr_t *err)
{
    const expr_op_t *op = e->op;
    const char *names[5];
    size_t n = 0;
    for (; n < 5 && op->params[n]; n++)
        names[n] = op->params[n] + (op->params[n][0] == '!');
    if (!date_parse_named(e, arg, names, n, op->named_codes[0], op->named_codes[1], err))
        return false;
    for (size_t i = 0; i < n; i++)
        if (op->params[i][0] == '!' && !e->args[i])
            return dberr_set(err, op->missing_codes[i], "Missing '%s' parameter to %s", names[i],
                             op->name);
    return true;
}

bool date_eval_tz(const expr_t *e, size_t i, const expr_ctx_t *ctx, date_tz_t *tz, bool *is_null,
                  dberr_t *err)
{
    bson_value_t v;
    *is_null = false;
    date_tz_utc(tz);
    if (i >= e->nargs || !e->args[i])
        return true;
    if (!expr_eval_node(e->args[i], ctx, &v, err))
        return false;
    bool ok = true;
    if (expr_is_nullish(&v))
        *is_null = true;
    else
        ok = date_tz_from_value(&v, tz, err);
    expr_val_free(&v);
    return ok;
}

/* Evaluates argument `i` as a date: *is_null for null/missing, `code`
 * and `fmt` (one %s: the type) for another type. */
static bool eval_date_arg(const expr_t *e, size_t i, const expr_ctx_t *ctx, int64_t *ms,
                          bool *is_null, int code, const char *fmt, dberr_t *err)
{
    bson_value_t v;
    *is_null = false;
    if (!expr_eval_arg(e, i, ctx, &v, err))
        return false;
    bool ok = true;
    if (expr_is_nullish(&v))
        *is_null = true;
    else if (!date_coerce(&v, ms))
        ok = dberr_set(err, code, fmt, shellfmt_type_name(v.value_type));
    expr_val_free(&v);
    return ok;
}

/* ---------------------------------------------------------- date parts */

enum { PART_YEAR, PART_MONTH, PART_DAY, PART_HOUR, PART_MINUTE, PART_SECOND, PART_MS,
       PART_DOW, PART_DOY, PART_WEEK, PART_ISO_WEEK, PART_ISO_YEAR, PART_ISO_DOW };

/* $year & co.: an expression, [expression], or {date, timezone}. */
static bool parse_part(expr_t *e, bson_iter_t *arg, dberr_t *err)
{
    static const char *const params[] = {"date", "timezone"};
    if (BSON_ITER_HOLDS_DOCUMENT(arg)) {
        bson_iter_t c;
        bson_iter_recurse(arg, &c);
        if (bson_iter_next(&c) && bson_iter_key(&c)[0] != '$') {
            bson_iter_t c2;
            bson_iter_recurse(arg, &c2);
            e->args = bson_malloc0(2 * sizeof *e->args);
            e->nargs = 2;
            while (bson_iter_next(&c2)) {
                const char *k = bson_iter_key(&c2);
                int i = !strcmp(k, params[0]) ? 0 : !strcmp(k, params[1]) ? 1 : -1;
                if (i < 0)
                    return dberr_set(err, 40535, "unrecognized option to %s: \"%s\"",
                                     e->op->name, k);
                expr_destroy(e->args[i]);
                if (!(e->args[i] = expr_parse(&c2, err)))
                    return false;
            }
            if (!e->args[0])
                return dberr_set(err, 40539, "missing 'date' argument to %s, provided: %s",
                                 e->op->name, "{...}");
            return true;
        }
    }
    if (BSON_ITER_HOLDS_ARRAY(arg)) {
        bson_iter_t c;
        uint32_t n = 0;
        bson_iter_recurse(arg, &c);
        while (bson_iter_next(&c))
            n++;
        if (n != 1)
            return dberr_set(err, 40536,
                             "%s accepts exactly one argument if given an array, but was given %u",
                             e->op->name, n);
        bson_iter_recurse(arg, &c);
        bson_iter_next(&c);
        expr_t *a = expr_parse(&c, err);
        if (!a)
            return false;
        expr_add_arg(e, a, NULL);
        return true;
    }
    expr_t *a = expr_parse(arg, err);
    if (!a)
        return false;
    expr_add_arg(e, a, NULL);
    return true;
}

static bool op_part(const expr_t *e, const expr_ctx_t *ctx, bson_value_t *out, dberr_t *err)
{
    int64_t ms = 0;
    bool null_date, null_tz;
    date_tz_t tz;
    if (!eval_date_arg(e, 0, ctx, &ms, &null_date, 16006,
                       "can't convert from BSON type %s to Date", err) ||
        !date_eval_tz(e, 1, ctx, &tz, &null_tz, err))
        return false;
    if (null_date || null_tz) {
        expr_val_null(out);
        return true;
    }
    date_parts_t p;
    date_split(ms, &tz, &p);
    int64_t v = 0;
    switch (e->op->aux) {
    case PART_YEAR: v = p.year; break;
    case PART_MONTH: v = p.month; break;
    case PART_DAY: v = p.day; break;
    case PART_HOUR: v = p.hour; break;
    case PART_MINUTE: v = p.minute; break;
    case PART_SECOND: v = p.second; break;
    case PART_MS: v = p.millis; break;
    case PART_DOW: v = p.dow + 1; break;
    case PART_DOY: v = p.yday; break;
    case PART_WEEK: v = (p.yday - 1 + 7 - p.dow) / 7; break;
    case PART_ISO_WEEK: v = p.iso_week; break;
    case PART_ISO_YEAR: v = p.iso_year; break;
    case PART_ISO_DOW: v = p.iso_dow; break;
    }
    if (e->op->aux == PART_ISO_YEAR)
        expr_val_int64(out, v);
    else
        expr_val_int32(out, (int32_t)v);
    return true;
}

/* ---------------------------------------------------------- $dateToParts */

static bool op_to_parts(const expr_t *e, const expr_ctx_t *ctx, bson_value_t *out, dberr_t *err)
{
    int64_t ms = 0;
    bool null_date, null_tz, iso = false;
    date_tz_t tz;
    bson_value_t v;
    if (!eval_date_arg(e, 0, ctx, &ms, &null_date, 16006,
                       "can't convert from BSON type %s to Date", err) ||
        !date_eval_tz(e, 1, ctx, &tz, &null_tz, err) || !expr_eval_arg(e, 2, ctx, &v, err))
        return false;
    if (v.value_type == BSON_TYPE_BOOL) {
        iso = v.value.v_bool;
    } else if (expr_is_nullish(&v)) {
        null_tz = null_tz || v.value_type != BSON_TYPE_EOD;
    } else {
        dberr_set(err, 40521, "iso8601 must evaluate to a bool, found %s",
                  shellfmt_type_name(v.value_type));
        expr_val_free(&v);
        return false;
    }
    expr_val_free(&v);
    if (null_date || null_tz) {
        expr_val_null(out);
        return true;
    }
    date_parts_t p;
    date_split(ms, &tz, &p);
    bson_t d = BSON_INITIALIZER;
    if (iso) {
        BSON_APPEND_INT32(&d, "isoWeekYear", (int32_t)p.iso_year);
        BSON_APPEND_INT32(&d, "isoWeek", p.iso_week);
        BSON_APPEND_INT32(&d, "isoDayOfWeek", p.iso_dow);
    } else {
        BSON_APPEND_INT32(&d, "year", (int32_t)p.year);
        BSON_APPEND_INT32(&d, "month", p.month);
        BSON_APPEND_INT32(&d, "day", p.day);
    }
    BSON_APPEND_INT32(&d, "hour", p.hour);
    BSON_APPEND_INT32(&d, "minute", p.minute);
    BSON_APPEND_INT32(&d, "second", p.second);
    BSON_APPEND_INT32(&d, "millisecond", p.millis);
    expr_value_take_bson(out, &d, BSON_TYPE_DOCUMENT);
    return true;
}

/* -------------------------------------------------------- $dateFromParts */

static const char *const from_parts_params[] = {
    "year",        "month",        "day",    "hour",   "minute",      "second",
    "millisecond", "isoWeekYear",  "isoWeek", "isoDayOfWeek", "timezone"};

static bool parse_from_parts(expr_t *e, bson_iter_t *arg, dberr_t *err)
{
    if (!date_parse_named(e, arg, from_parts_params, 11, 40519, 40518, err))
        return false;
    bool natural = e->args[0] || e->args[1] || e->args[2];
    bool iso = e->args[7] || e->args[8] || e->args[9];
    if (natural && iso)
        return dberr_set(err, 40489,
                         "$dateFromParts does not allow mixing natural dates with ISO dates");
    if (!e->args[0] && !e->args[7])
        return dberr_set(err, 40516,
                         "$dateFromParts requires either 'year' or 'isoWeekYear' to be present");
    return true;
}

/* Reads part `i` into *x (default `dflt` when absent); *is_null when null. */
static bool eval_int_part(const expr_t *e, size_t i, const expr_ctx_t *ctx, int64_t dflt,
                          int64_t *x, bool *is_null, dberr_t *err)
{
    bson_value_t v;
    *x = dflt;
    if (!expr_eval_arg(e, i, ctx, &v, err))
        return false;
    if (v.value_type == BSON_TYPE_EOD)
        return true;
    bool ok = true;
    const char *name = from_parts_params[i];
    if (expr_is_nullish(&v)) {
        *is_null = true;
    } else if (!num_is_number(&v)) {
        ok = dberr_set(err, 40515, "'%s' must evaluate to an integer, found %s", name,
                       shellfmt_type_name(v.value_type));
    } else {
        double d = num_to_double(&v);
        if (d != floor(d) || isnan(d) || fabs(d) > 9e15) {
            char buf[64];
            expr_double_to_string(d, buf, sizeof buf);
            ok = dberr_set(err, 40515, "'%s' must evaluate to an integer, found %s with value %s",
                           name, shellfmt_type_name(v.value_type), buf);
        } else {
            *x = (int64_t)d;
            bool year = i == 0 || i == 7;
            if (year && (*x < 1 || *x > 9999))
                ok = dberr_set(err, i == 0 ? 40523 : 31095,
                               "'%s' must evaluate to an integer in the range 1 to 9999, found "
                               "%lld",
                               name, (long long)*x);
            else if (!year && (*x < -32768 || *x > 32767))
                ok = dberr_set(err, 31034,
                               "'%s' must evaluate to a value in the range [-32768, 32767]; "
                               "value %lld is not in range",
                               name, (long long)*x);
        }
    }
    expr_val_free(&v);
    return ok;
}

static bool op_from_parts(const expr_t *e, const expr_ctx_t *ctx, bson_value_t *out, dberr_t *err)
{
    int64_t v[10];
    bool is_null = false, null_tz;
    date_tz_t tz;
    bool iso = e->args[7] != NULL;
    for (size_t i = 0; i < 10; i++) {
        int64_t dflt = (i == 1 || i == 2 || i == 8 || i == 9) ? 1 : 0;
        if (!eval_int_part(e, i, ctx, dflt, &v[i], &is_null, err))
            return false;
    }
    if (!date_eval_tz(e, 10, ctx, &tz, &null_tz, err))
        return false;
    if (is_null || null_tz) {
        expr_val_null(out);
        return true;
    }
    int64_t days;
    if (iso) {
        int64_t jan4 = date_days_from_civil(v[7], 1, 4);
        int dow = (int)(jan4 + 4 - date_floordiv(jan4 + 4, 7) * 7);
        int64_t monday = jan4 - ((dow == 0 ? 7 : dow) - 1);
        days = monday + (v[8] - 1) * 7 + (v[9] - 1);
    } else {
        days = date_days_from_civil(v[0], v[1], 1) + (v[2] - 1);
    }
    int64_t local = days * DATE_MS_PER_DAY + v[3] * 3600000 + v[4] * 60000 + v[5] * 1000 + v[6];
    expr_val_date(out, date_tz_to_utc(&tz, local));
    return true;
}

/* ------------------------------------------------- units, add, diff, trunc */

typedef enum unit {
    U_YEAR, U_QUARTER, U_MONTH, U_WEEK, U_DAY, U_HOUR, U_MINUTE, U_SECOND, U_MS, U_NONE
} unit_t;

static const char *const unit_names[] = {"year", "quarter", "month",  "week",       "day",
                                         "hour", "minute",  "second", "millisecond"};
static const int64_t unit_ms[] = {0, 0, 0, 7 * DATE_MS_PER_DAY, DATE_MS_PER_DAY, 3600000, 60000,
                                  1000, 1};

/* Evaluates argument `i` as a unit: *is_null for null; `code` when it is
 * not a string; FailedToParse for an unknown unit, as mongod. */
static bool eval_unit(const expr_t *e, size_t i, const expr_ctx_t *ctx, unit_t *u, bool *is_null,
                      int code, dberr_t *err)
{
    bson_value_t v;
    if (!expr_eval_arg(e, i, ctx, &v, err))
        return false;
    bool ok = true;
    if (expr_is_nullish(&v)) {
        *is_null = true;
    } else if (v.value_type != BSON_TYPE_UTF8) {
        ok = dberr_set(err, code, "%s requires 'unit' to be a string, but got %s", e->op->name,
                       shellfmt_type_name(v.value_type));
    } else {
        *u = U_NONE;
        for (int k = 0; k < 9; k++)
            if (strcmp(unit_names[k], v.value.v_utf8.str) == 0)
                *u = (unit_t)k;
        if (*u == U_NONE)
            ok = dberr_set(err, DBERR_FAILED_TO_PARSE, "unknown time unit value: %s",
                           v.value.v_utf8.str);
    }
    expr_val_free(&v);
    return ok;
}

/* Evaluates argument `i` as a day of the week (default Sunday = 0). */
static bool eval_start_of_week(const expr_t *e, size_t i, const expr_ctx_t *ctx, int *dow,
                               bool *is_null, dberr_t *err)
{
    static const char *const full[] = {"sunday",   "monday", "tuesday", "wednesday",
                                       "thursday", "friday", "saturday"};
    bson_value_t v;
    *dow = 0;
    if (!expr_eval_arg(e, i, ctx, &v, err))
        return false;
    bool ok = true;
    if (v.value_type == BSON_TYPE_EOD) {
        /* Sunday */
    } else if (expr_is_nullish(&v)) {
        *is_null = true;
    } else if (v.value_type != BSON_TYPE_UTF8) {
        ok = dberr_set(err, e->op->aux == 1 ? 5439015 : 5439019,
                       "%s requires 'startOfWeek' to be a string, but got %s", e->op->name,
                       shellfmt_type_name(v.value_type));
    } else {
        *dow = -1;
        for (int k = 0; k < 7; k++)
            if (strcasecmp(full[k], v.value.v_utf8.str) == 0 ||
                (strlen(v.value.v_utf8.str) == 3 && strncasecmp(full[k], v.value.v_utf8.str, 3) == 0))
                *dow = k;
        if (*dow < 0)
            ok = dberr_set(err, e->op->aux == 1 ? 5439016 : 5439020,
                           "%s parameter 'startOfWeek' value cannot be recognized as a day of a "
                           "week: %s",
                           e->op->name, v.value.v_utf8.str);
    }
    expr_val_free(&v);
    return ok;
}

static int days_in_month(int64_t y, int m)
{
    return (int)(date_days_from_civil(y, m + 1, 1) - date_days_from_civil(y, m, 1));
}

/* `ms` moved by `amount` units in `tz`; false on overflow. */
static bool date_add(int64_t ms, unit_t u, int64_t amount, const date_tz_t *tz, int64_t *out)
{
    if (u >= U_HOUR) {
        if (__builtin_mul_overflow(amount, unit_ms[u], &amount) ||
            __builtin_add_overflow(ms, amount, out))
            return false;
        return true;
    }
    if (amount > 1000000000LL || amount < -1000000000LL)
        return false;
    date_parts_t p;
    date_split(ms, tz, &p);
    int64_t local_time = ((int64_t)p.hour * 3600 + p.minute * 60 + p.second) * 1000 + p.millis;
    int64_t days;
    if (u == U_WEEK || u == U_DAY) {
        days = date_days_from_civil(p.year, p.month, p.day) + amount * (u == U_WEEK ? 7 : 1);
    } else {
        int64_t months = amount * (u == U_YEAR ? 12 : u == U_QUARTER ? 3 : 1);
        int64_t idx = p.year * 12 + (p.month - 1) + months;
        int64_t y = date_floordiv(idx, 12);
        int m = (int)(idx - y * 12) + 1;
        int d = p.day;
        if (d > days_in_month(y, m))
            d = days_in_month(y, m);
        days = date_days_from_civil(y, m, d);
    }
    if (days > 3000000000LL || days < -3000000000LL)
        return false;
    *out = date_tz_to_utc(tz, days * DATE_MS_PER_DAY + local_time);
    return true;
}

static bool parse_add(expr_t *e, bson_iter_t *arg, dberr_t *err)
{
    static const char *const params[] = {"startDate", "unit", "amount", "timezone"};
    if (!BSON_ITER_HOLDS_DOCUMENT(arg))
        return dberr_set(err, 5166400, "%s expects an object as its argument", e->op->name);
    if (!date_parse_named(e, arg, params, 4, 5166400, 5166401, err))
        return false;
    if (!e->args[0] || !e->args[1] || !e->args[2])
        return dberr_set(err, 5166402, "%s requires startDate, unit, and amount to be present",
                         e->op->name);
    return true;
}

/* $dateAdd (aux 0) and $dateSubtract (aux 1). */
static bool op_add(const expr_t *e, const expr_ctx_t *ctx, bson_value_t *out, dberr_t *err)
{
    int64_t ms = 0, amount = 0;
    bool is_null = false, null_tz;
    unit_t u = U_DAY;
    date_tz_t tz;
    bson_value_t a;
    bool nd;
    if (!eval_date_arg(e, 0, ctx, &ms, &nd, 5166403, "%s", err)) {
        if (err->code == 5166403)
            dberr_set(err, 5166403, "%s requires startDate to be convertible to a date",
                      e->op->name);
        return false;
    }
    is_null = nd;
    if (!eval_unit(e, 1, ctx, &u, &is_null, 5166404, err) || !expr_eval_arg(e, 2, ctx, &a, err))
        return false;
    bool ok = true;
    if (expr_is_nullish(&a)) {
        is_null = true;
    } else {
        double d = num_is_number(&a) ? num_to_double(&a) : NAN;
        if (!num_is_number(&a) || d != floor(d) || fabs(d) > 9.2e18)
            ok = dberr_set(err, 5166405, "%s expects integer amount of time units", e->op->name);
        else
            amount = a.value_type == BSON_TYPE_INT64 ? a.value.v_int64 : (int64_t)d;
    }
    expr_val_free(&a);
    if (!ok || !date_eval_tz(e, 3, ctx, &tz, &null_tz, err))
        return false;
    if (is_null || null_tz) {
        expr_val_null(out);
        return true;
    }
    if (e->op->aux == 1) {
        if (amount == INT64_MIN)
            return dberr_set(err, 6045000, "invalid %s 'amount' parameter value", e->op->name);
        amount = -amount;
    }
    int64_t r;
    if (!date_add(ms, u, amount, &tz, &r))
        return dberr_set(err, 5166406, "%s overflowed", e->op->name);
    expr_val_date(out, r);
    return true;
}

/* The count of `u` boundaries (in `tz`, weeks starting on `sow`) before `ms`. */
static int64_t unit_index(int64_t ms, unit_t u, const date_tz_t *tz, int sow)
{
    date_parts_t p;
    date_split(ms, tz, &p);
    int64_t local = ms + p.off_ms;
    switch (u) {
    case U_YEAR:
        return p.year;
    case U_QUARTER:
        return p.year * 4 + (p.month - 1) / 3;
    case U_MONTH:
        return p.year * 12 + p.month - 1;
    case U_WEEK: {
        int64_t days = date_floordiv(local, DATE_MS_PER_DAY);
        /* 1970-01-04 was a Sunday */
        return date_floordiv(days - 3 - sow, 7);
    }
    default:
        return date_floordiv(local, unit_ms[u]);
    }
}

static bool op_diff(const expr_t *e, const expr_ctx_t *ctx, bson_value_t *out, dberr_t *err)
{
    int64_t a = 0, b = 0;
    bool na, nb, nu = false, nt, ns = false;
    unit_t u = U_DAY;
    int sow = 0;
    date_tz_t tz;
    if (!eval_date_arg(e, 0, ctx, &a, &na, 5166307, "$dateDiff requires 'startDate' to be a date, "
                                                    "but got %s",
                       err) ||
        !eval_date_arg(e, 1, ctx, &b, &nb, 5166308,
                       "$dateDiff requires 'endDate' to be a date, but got %s", err) ||
        !eval_unit(e, 2, ctx, &u, &nu, 5439013, err) || !date_eval_tz(e, 3, ctx, &tz, &nt, err) ||
        !eval_start_of_week(e, 4, ctx, &sow, &ns, err))
        return false;
    if (na || nb || nu || nt || (ns && u == U_WEEK)) {
        expr_val_null(out);
        return true;
    }
    if (u >= U_HOUR) /* fixed-length units count on the UTC timeline */
        expr_val_int64(out, date_floordiv(b, unit_ms[u]) - date_floordiv(a, unit_ms[u]));
    else
        expr_val_int64(out, unit_index(b, u, &tz, sow) - unit_index(a, u, &tz, sow));
    return true;
}

static bool op_trunc(const expr_t *e, const expr_ctx_t *ctx, bson_value_t *out, dberr_t *err)
{
    int64_t ms = 0, bin = 1;
    bool nd, nu = false, nt, ns = false, nb = false;
    unit_t u = U_DAY;
    int sow = 0;
    date_tz_t tz;
    bson_value_t b;
    if (!eval_date_arg(e, 0, ctx, &ms, &nd, 5439012,
                       "$dateTrunc requires 'date' to be a date, but got %s", err) ||
        !eval_unit(e, 1, ctx, &u, &nu, 5439013, err) || !expr_eval_arg(e, 2, ctx, &b, err))
        return false;
    bool ok = true;
    if (b.value_type != BSON_TYPE_EOD) {
        double d = num_is_number(&b) ? num_to_double(&b) : NAN;
        if (expr_is_nullish(&b))
            nb = true;
        else if (!num_is_number(&b) || d != floor(d) || fabs(d) > 9.2e18)
            ok = dberr_set(err, 5439017,
                           "$dateTrunc requires 'binSize' to be a 64-bit integer, but got value "
                           "of type %s",
                           shellfmt_type_name(b.value_type));
        else if ((bin = (int64_t)d) <= 0)
            ok = dberr_set(err, 5439018,
                           "$dateTrunc requires 'binSize' to be greater than 0, but got value %lld",
                           (long long)bin);
    }
    expr_val_free(&b);
    if (!ok || !date_eval_tz(e, 3, ctx, &tz, &nt, err) ||
        !eval_start_of_week(e, 4, ctx, &sow, &ns, err))
        return false;
    if (nd || nu || nt || nb || (ns && u == U_WEEK)) {
        expr_val_null(out);
        return true;
    }
    date_parts_t p;
    date_split(ms, &tz, &p);
    int64_t local = ms + p.off_ms;
    int64_t ref = date_days_from_civil(2000, 1, 1) * DATE_MS_PER_DAY; /* mongod's reference */
    int64_t res;
    if (u == U_YEAR || u == U_QUARTER || u == U_MONTH) {
        int64_t per = u == U_YEAR ? 12 : u == U_QUARTER ? 3 : 1;
        int64_t months = (p.year - 2000) * 12 + (p.month - 1);
        int64_t step = per * bin;
        int64_t m0 = date_floordiv(months, step) * step;
        res = date_days_from_civil(2000, 1 + m0, 1) * DATE_MS_PER_DAY;
    } else {
        if (u == U_WEEK) { /* the first `sow` day on or after 2000-01-01 (a Saturday) */
            ref += (int64_t)((sow - 6 + 7) % 7) * DATE_MS_PER_DAY;
        }
        int64_t step;
        if (__builtin_mul_overflow(unit_ms[u], bin, &step))
            step = INT64_MAX;
        if (u >= U_HOUR) { /* fixed-length units: on the UTC timeline */
            res = ref + date_floordiv(ms - ref, step) * step;
            expr_val_date(out, res);
            return true;
        }
        res = ref + date_floordiv(local - ref, step) * step;
    }
    expr_val_date(out, date_tz_to_utc(&tz, res));
    return true;
}

/* ------------------------------------------------------------ timestamps */

/* $tsSecond (aux 0) and $tsIncrement (aux 1). */
static bool op_ts(const expr_t *e, const bson_value_t *v, bson_value_t *out, dberr_t *err)
{
    expr_val_int64(out, e->op->aux ? v->value.v_timestamp.increment
                                   : v->value.v_timestamp.timestamp);
    return true;
}

#define PART_ROW(name, part)                                                                       \
    {name, .fn = op_part, .parse = OPP_CUSTOM, .parse_fn = parse_part, .aux = part}

const expr_op_t expr_date_ops[] = {
    PART_ROW("$year", PART_YEAR),
    PART_ROW("$month", PART_MONTH),
    PART_ROW("$dayOfMonth", PART_DAY),
    PART_ROW("$hour", PART_HOUR),
    PART_ROW("$minute", PART_MINUTE),
    PART_ROW("$second", PART_SECOND),
    PART_ROW("$millisecond", PART_MS),
    PART_ROW("$dayOfWeek", PART_DOW),
    PART_ROW("$dayOfYear", PART_DOY),
    PART_ROW("$week", PART_WEEK),
    PART_ROW("$isoWeek", PART_ISO_WEEK),
    PART_ROW("$isoWeekYear", PART_ISO_YEAR),
    PART_ROW("$isoDayOfWeek", PART_ISO_DOW),
    {"$dateToParts", .fn = op_to_parts, .parse = OPP_CUSTOM, .parse_fn = date_parse_row,
     .params = {"!date", "timezone", "iso8601"}, .named_codes = {40524, 40520},
     .missing_codes = {40522}},
    {"$dateFromParts", .fn = op_from_parts, .parse = OPP_CUSTOM, .parse_fn = parse_from_parts},
    {"$dateAdd", .fn = op_add, .parse = OPP_CUSTOM, .parse_fn = parse_add, .aux = 0},
    {"$dateSubtract", .fn = op_add, .parse = OPP_CUSTOM, .parse_fn = parse_add, .aux = 1},
    {"$dateDiff", .fn = op_diff, .parse = OPP_CUSTOM, .parse_fn = date_parse_row,
     .params = {"!startDate", "!endDate", "!unit", "timezone", "startOfWeek"},
     .named_codes = {5166301, 5166302}, .missing_codes = {5166303, 5166304, 5166305}, .aux = 1},
    {"$dateTrunc", .fn = op_trunc, .parse = OPP_CUSTOM, .parse_fn = date_parse_row,
     .params = {"!date", "!unit", "binSize", "timezone", "startOfWeek"},
     .named_codes = {5439007, 5439008}, .missing_codes = {5439009, 5439010}, .aux = 2},
    {"$tsSecond", .eager = op_ts, .min_args = 1, .max_args = 1, .aux = 0,
     .input = {BSON_TYPE_TIMESTAMP, 5687301,
               "Argument to $tsSecond must be a timestamp, but is %s"}},
    {"$tsIncrement", .eager = op_ts, .min_args = 1, .max_args = 1, .aux = 1,
     .input = {BSON_TYPE_TIMESTAMP, 5687302,
               "Argument to $tsIncrement must be a timestamp, but is %s"}},
    {NULL},
};
