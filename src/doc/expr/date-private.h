/* date-private: what date.c and datefmt.c share — time zones (Olson names
 * through ICU's tz data, or fixed UTC offsets), the proleptic Gregorian
 * calendar arithmetic mongod uses, and the named-argument parser of the
 * date operators. */
#ifndef ATOMDB_DATE_PRIVATE_H
#define ATOMDB_DATE_PRIVATE_H

#include "doc/expr/expr-private.h"

#define DATE_MS_PER_DAY 86400000LL

/* A time zone: a fixed offset, or an ICU zone (cached; borrowed). */
typedef struct date_tz {
    bool fixed;     /* a "+hh:mm" offset (or UTC when no timezone was given) */
    int64_t off_ms; /* fixed: the offset */
    void *cal;      /* !fixed: the UCalendar of the zone (a per-thread cache owns it) */
} date_tz_t;

/* Calendar fields of one instant in one zone. */
typedef struct date_parts {
    int64_t year;
    int month, day, hour, minute, second, millis;
    int dow;  /* 0 = Sunday */
    int yday; /* 1..366 */
    int64_t iso_year;
    int iso_week, iso_dow; /* iso_dow: 1 = Monday */
    int64_t off_ms;        /* the zone's offset from UTC at that instant */
} date_parts_t;

/* UTC time zone. */
void date_tz_utc(date_tz_t *tz);
/* Reads the value of a `timezone` argument (a string: an Olson name or
 * "+hh", "+hhmm", "+hh:mm"); false with 40517 (not a string) or 40485
 * (unknown zone) as mongod. */
bool date_tz_from_value(const bson_value_t *v, date_tz_t *tz, dberr_t *err);
/* The zone's offset from UTC at the UTC instant `utc_ms`. */
int64_t date_tz_offset(const date_tz_t *tz, int64_t utc_ms);
/* The UTC instant of the local wall-clock time `local_ms` in `tz`. */
int64_t date_tz_to_utc(const date_tz_t *tz, int64_t local_ms);

/* Days since 1970-01-01 of a proleptic Gregorian date (month may be any
 * value: it carries into the year). */
int64_t date_days_from_civil(int64_t y, int64_t m, int64_t d);
/* The fields of the instant `utc_ms` in `tz`. */
void date_split(int64_t utc_ms, const date_tz_t *tz, date_parts_t *p);
/* Floor division and its non-negative remainder. */
int64_t date_floordiv(int64_t a, int64_t b);

/* Reads `v` as a date the way mongod's date operators do: a date, a
 * timestamp or an ObjectId. False (nothing set) for other types. */
bool date_coerce(const bson_value_t *v, int64_t *ms);

/* Checks a $dateFromString format as mongod does before parsing: 18535
 * for a trailing '%', 18536 for a specifier other than %d %G %H %L %m %M
 * %S %u %V %Y %z %Z %%. */
bool date_check_from_format(const char *fmt, dberr_t *err);

/* Reads the date string `s` (up to its first NUL) as mongod does: with
 * `fmt` (checked by date_check_from_format) or, NULL, free-form (ISO 8601
 * and numeric forms; others refused). A local time is in `tz` unless the
 * string names an offset; `tz_given`: the caller passed a timezone, which
 * a string with its own offset may not have. *out: milliseconds since the
 * epoch. ConversionFailure 241 with mongod's wording otherwise ("Error
 * parsing date string '...'; pos: message", "an incomplete date/time
 * string has been found ..."), except free-form text with words atomdb
 * does not read (month names, zone abbreviations): NotImplemented 238. */
bool date_from_string(const char *s, const char *fmt, const date_tz_t *tz, bool tz_given,
                      int64_t *out, dberr_t *err);

/* Names of the months, "January" ... (index 0). */
extern const char *const date_month_names[12];

/* Parses a document of named parameters into e->args (one slot per
 * name of `params`, NULL when absent; `nparams` at most 12). Errors as
 * mongod words them for `e->op->name`: code_obj when `arg` is not a
 * document, code_unknown for an unknown name. */
bool date_parse_named(expr_t *e, bson_iter_t *arg, const char *const *params, size_t nparams,
                      int code_obj, int code_unknown, dberr_t *err);
/* date_parse_named by the operator's row: its params ('!' prefix:
 * required, "Missing '<name>' parameter to <op>" with its missing_codes
 * entry when absent) and named_codes {code_obj, code_unknown}. */
bool date_parse_row(expr_t *e, bson_iter_t *arg, dberr_t *err);

/* Evaluates the optional timezone argument `i` of `e`: UTC when absent;
 * *is_null when it is null (the operator then answers null). */
bool date_eval_tz(const expr_t *e, size_t i, const expr_ctx_t *ctx, date_tz_t *tz, bool *is_null,
                  dberr_t *err);

#endif
