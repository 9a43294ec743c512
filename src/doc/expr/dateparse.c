/* expr/dateparse: date strings read as mongod reads them ($dateFromString,
 * $toDate and $convert of a string) — with a format, timelib's
 * parse-from-format under mongod's specifier map (%d %G %H %L %m %M %S %u
 * %V %Y %z %Z %%); without one, the ISO 8601 and numeric forms of timelib's
 * free-form parser (other free-form text is refused, ConversionFailure). */
#include "doc/expr/date-private.h"

#include <ctype.h>
#include <string.h>

#define DP_UNSET INT64_MIN

/* What a parse found; DP_UNSET where the string said nothing. */
typedef struct dp_state {
    const char *s; /* the date string (up to its first NUL, as timelib reads it) */
    size_t len;
    size_t pos;
    int64_t y, m, d, h, i, sec, ms;
    int64_t iso_y, iso_w, iso_d;
    bool has_zone;   /* an offset or zone name in the string */
    int64_t zone_ms; /* its offset from UTC */
    const char *error; /* the first error (timelib's message), NULL while none */
    size_t error_pos;
    bool unreadable; /* free-form text atomdb does not read but mongod's timelib may */
} dp_state_t;

static void dp_init(dp_state_t *st, const char *s)
{
    memset(st, 0, sizeof *st);
    st->s = s;
    st->len = strlen(s);
    st->y = st->m = st->d = st->h = st->i = st->sec = st->ms = DP_UNSET;
    st->iso_y = st->iso_w = st->iso_d = DP_UNSET;
}

static void dp_fail(dp_state_t *st, const char *msg)
{
    if (!st->error) {
        st->error = msg;
        st->error_pos = st->pos;
    }
}

static char dp_peek(const dp_state_t *st)
{
    return st->pos < st->len ? st->s[st->pos] : '\0';
}

/* Reads 1..max digits (timelib_get_nr after its digit check); DP_UNSET
 * when none starts here. `ndigits` gets the count read. */
static int64_t dp_number(dp_state_t *st, int max, int *ndigits)
{
    int64_t v = 0;
    int n = 0;
    while (n < max && isdigit((unsigned char)dp_peek(st))) {
        v = v * 10 + (dp_peek(st) - '0');
        st->pos++;
        n++;
    }
    if (ndigits)
        *ndigits = n;
    return n ? v : DP_UNSET;
}

/* A zone: Z, UTC, GMT, GMT+hh[[:]mm], +hh, +hhmm, +hh:mm. False (nothing
 * read) when none starts here. */
static bool dp_zone(dp_state_t *st)
{
    size_t start = st->pos;
    const char *p = st->s + st->pos;
    size_t left = st->len - st->pos;
    bool named = false;
    if (left >= 3 && (!strncmp(p, "GMT", 3) || !strncmp(p, "UTC", 3))) {
        st->pos += 3;
        named = true;
    } else if (left >= 1 && p[0] == 'Z' && (left == 1 || !isalpha((unsigned char)p[1]))) {
        st->pos += 1;
        st->has_zone = true;
        st->zone_ms = 0;
        return true;
    }
    char c = dp_peek(st);
    if (c != '+' && c != '-') {
        if (named) {
            st->has_zone = true;
            st->zone_ms = 0;
            return true;
        }
        st->pos = start;
        return false;
    }
    int sign = c == '-' ? -1 : 1;
    st->pos++;
    int nd;
    int64_t hh = dp_number(st, 2, &nd), mm = 0;
    if (hh == DP_UNSET) {
        st->pos = start;
        return false;
    }
    if (nd == 2 && dp_peek(st) == ':')
        st->pos++;
    if (nd == 2 && isdigit((unsigned char)dp_peek(st))) {
        mm = dp_number(st, 2, &nd);
        if (nd != 2) {
            st->pos = start;
            return false;
        }
    }
    st->has_zone = true;
    st->zone_ms = sign * (hh * 3600000 + mm * 60000);
    return true;
}

/* ---- with a format (timelib_parse_from_format under mongod's map) ---- */

/* One numeric specifier: `max` digits into *field, or timelib's message. */
static void dp_spec_number(dp_state_t *st, int max, int64_t *field, const char *missing)
{
    if (!isdigit((unsigned char)dp_peek(st))) {
        dp_fail(st, "Unexpected data found.");
        return;
    }
    if ((*field = dp_number(st, max, NULL)) == DP_UNSET)
        dp_fail(st, missing);
}

static void dp_with_format(dp_state_t *st, const char *fmt)
{
    size_t fi = 0, flen = strlen(fmt);
    while (fi < flen && st->pos < st->len && !st->error) {
        if (fmt[fi] != '%' || fi + 1 >= flen) {
            if (fmt[fi] != dp_peek(st))
                dp_fail(st, "Format literal not found");
            else
                st->pos++;
            fi++;
            continue;
        }
        char spec = fmt[fi + 1];
        fi += 2;
        int nd;
        switch (spec) {
        case 'd': dp_spec_number(st, 2, &st->d, "A two digit day could not be found"); break;
        case 'm': dp_spec_number(st, 2, &st->m, "A two digit month could not be found"); break;
        case 'Y': dp_spec_number(st, 4, &st->y, "A four digit year could not be found"); break;
        case 'H': dp_spec_number(st, 2, &st->h, "A two digit hour could not be found"); break;
        case 'M': dp_spec_number(st, 2, &st->i, "A two digit minute could not be found"); break;
        case 'S': dp_spec_number(st, 2, &st->sec, "A two digit second could not be found"); break;
        case 'G':
            dp_spec_number(st, 4, &st->iso_y, "A four digit ISO year could not be found");
            break;
        case 'V': dp_spec_number(st, 2, &st->iso_w, "A two digit ISO week could not be found"); break;
        case 'u':
            dp_spec_number(st, 1, &st->iso_d, "A single digit day of week could not be found");
            break;
        case 'L':
            if (!isdigit((unsigned char)dp_peek(st))) {
                dp_fail(st, "Unexpected data found.");
                break;
            }
            st->ms = dp_number(st, 3, &nd);
            for (; nd < 3; nd++) /* "8" is 800 ms: a fraction of a second */
                st->ms *= 10;
            break;
        case 'z':
            if (!dp_zone(st))
                dp_fail(st, "The timezone could not be found in the database");
            break;
        case 'Z': {
            char c = dp_peek(st);
            int sign = c == '-' ? -1 : 1;
            if (c == '+' || c == '-')
                st->pos++;
            int64_t min = dp_number(st, 4, NULL);
            if (min == DP_UNSET) {
                dp_fail(st, "A valid timezone offset in minutes could not be found");
                break;
            }
            st->has_zone = true;
            st->zone_ms = sign * min * 60000;
            break;
        }
        case '%':
            if (dp_peek(st) != '%')
                dp_fail(st, "Format literal not found");
            else
                st->pos++;
            break;
        default: /* refused before parsing (date_check_from_format) */
            dp_fail(st, "Unexpected data found.");
            break;
        }
    }
    if (st->error)
        return;
    if (st->pos < st->len)
        dp_fail(st, "Trailing data");
    else if (fi < flen)
        dp_fail(st, "Data missing");
}

/* ---- without a format: ISO 8601 and numeric forms ---- */

/* Two-digit years as timelib reads them: 00-69 are 2000s, 70-99 1900s. */
static int64_t dp_year2(int64_t y, int nd)
{
    if (nd > 2)
        return y;
    return y < 70 ? 2000 + y : 1900 + y;
}

static void dp_free_form(dp_state_t *st)
{
    while (dp_peek(st) == ' ')
        st->pos++;
    size_t start = st->pos;
    int n1, n2, n3;
    int64_t a = dp_number(st, 4, &n1);
    char sep = dp_peek(st);
    bool date = false;
    if (a != DP_UNSET && n1 == 4 && (sep == '-' || sep == '/')) { /* Y-M-D, Y/M/D */
        st->pos++;
        int64_t b = dp_number(st, 2, &n2);
        if (b != DP_UNSET && dp_peek(st) == sep) {
            st->pos++;
            int64_t c = dp_number(st, 2, &n3);
            if (c != DP_UNSET) {
                st->y = a, st->m = b, st->d = c;
                date = true;
            }
        }
    } else if (a != DP_UNSET && n1 <= 2 && (sep == '/' || sep == '-')) {
        /* m/d/y (American), d-m-y */
        st->pos++;
        int64_t b = dp_number(st, 2, &n2);
        if (b != DP_UNSET && dp_peek(st) == sep) {
            st->pos++;
            int64_t c = dp_number(st, 4, &n3);
            if (c != DP_UNSET && (sep == '/' || n3 == 4)) {
                st->y = dp_year2(c, n3);
                st->m = sep == '/' ? a : b;
                st->d = sep == '/' ? b : a;
                date = true;
            }
        }
    }
    if (!date)
        st->pos = start;
    char c = dp_peek(st);
    bool time_next = false;
    if (date && (c == 'T' || c == 't')) {
        st->pos++;
        time_next = true;
    } else if (date && c == ' ') {
        while (dp_peek(st) == ' ')
            st->pos++;
        time_next = isdigit((unsigned char)dp_peek(st));
    } else if (!date) {
        time_next = isdigit((unsigned char)dp_peek(st));
    }
    if (time_next) { /* H[H]:MM[:SS|.SS][.fff] */
        size_t tstart = st->pos;
        int64_t h = dp_number(st, 2, NULL);
        if (h != DP_UNSET && dp_peek(st) == ':') {
            st->pos++;
            int64_t i = dp_number(st, 2, &n2);
            if (i != DP_UNSET && n2 == 2) {
                st->h = h, st->i = i;
                if ((dp_peek(st) == ':' || dp_peek(st) == '.') && st->pos + 1 < st->len &&
                    isdigit((unsigned char)st->s[st->pos + 1])) {
                    st->pos++;
                    st->sec = dp_number(st, 2, NULL);
                    if (dp_peek(st) == '.' || dp_peek(st) == ',') {
                        st->pos++;
                        int nd;
                        st->ms = dp_number(st, 3, &nd);
                        if (st->ms == DP_UNSET)
                            st->ms = 0, nd = 3;
                        for (; nd < 3; nd++)
                            st->ms *= 10;
                        while (isdigit((unsigned char)dp_peek(st))) /* past milliseconds */
                            st->pos++;
                    }
                }
            } else {
                st->pos = tstart;
            }
        } else {
            st->pos = tstart;
        }
    }
    while (dp_peek(st) == ' ')
        st->pos++;
    if (st->pos < st->len && (date || st->h != DP_UNSET))
        dp_zone(st);
    while (dp_peek(st) == ' ')
        st->pos++;
    if (st->pos < st->len || (!date && st->h == DP_UNSET)) {
        dp_fail(st, "atomdb reads date strings without a format in ISO 8601 "
                    "(YYYY-MM-DD[THH:MM[:SS[.mmm]]][Z|+hh:mm]) and numeric (m/d/y, d-m-y) "
                    "forms only; give a format for others");
        /* words (month names, am/pm, zone abbreviations) may be a date to
         * mongod: refused as not implemented, never taken as invalid */
        for (size_t k = 0; k < st->len; k++) {
            const char *w = st->s + k;
            if (!strncmp(w, "GMT", 3) || !strncmp(w, "UTC", 3))
                k += 2; /* zone names atomdb reads */
            else if (isalpha((unsigned char)*w) && !strchr("TtZz", *w))
                st->unreadable = true;
        }
    }
}

/* ---- both ---- */

static bool dp_valid_date(int64_t y, int64_t m, int64_t d)
{
    if (m < 1 || m > 12 || d < 1)
        return false;
    int64_t days = date_days_from_civil(y, m + 1, 1) - date_days_from_civil(y, m, 1);
    return d <= days;
}

/* The ISO year/week/day of `st` as a calendar date. */
static void dp_from_iso(dp_state_t *st)
{
    int64_t w = st->iso_w == DP_UNSET ? 1 : st->iso_w;
    int64_t dow = st->iso_d == DP_UNSET ? 1 : st->iso_d;
    int64_t jan4 = date_days_from_civil(st->iso_y, 1, 4);
    int64_t jan4_dow = jan4 + 3 - 7 * date_floordiv(jan4 + 3, 7) + 1; /* 1 = Monday */
    int64_t days = jan4 - (jan4_dow - 1) + (w - 1) * 7 + (dow - 1);
    date_tz_t utc;
    date_parts_t p;
    date_tz_utc(&utc);
    date_split(days * DATE_MS_PER_DAY, &utc, &p);
    st->y = p.year, st->m = p.month, st->d = p.day;
}

bool date_check_from_format(const char *fmt, dberr_t *err)
{
    for (const char *c = fmt; *c; c++) {
        if (*c != '%')
            continue;
        c++;
        if (!*c)
            return dberr_set(err, 18535, "Unmatched '%%' at end of format string");
        if (!strchr("dGHLmMSuVYzZ%", *c))
            return dberr_set(err, 18536, "Invalid format character '%%%c' in format string", *c);
    }
    return true;
}

bool date_from_string(const char *s, const char *fmt, const date_tz_t *tz, bool tz_given,
                      int64_t *out, dberr_t *err)
{
    dp_state_t st;
    dp_init(&st, s);
    if (fmt)
        dp_with_format(&st, fmt);
    else
        dp_free_form(&st);
    bool iso = st.iso_y != DP_UNSET || st.iso_w != DP_UNSET || st.iso_d != DP_UNSET;
    if (!st.error && iso) {
        if (st.y != DP_UNSET || st.m != DP_UNSET || st.d != DP_UNSET)
            dp_fail(&st, "Mixing of ISO dates with natural dates is not allowed");
        else if (st.iso_y == DP_UNSET || (st.iso_w != DP_UNSET && (st.iso_w < 1 || st.iso_w > 53)) ||
                 (st.iso_d != DP_UNSET && (st.iso_d < 1 || st.iso_d > 7)))
            dp_fail(&st, "The parsed date was invalid");
        else
            dp_from_iso(&st);
    }
    bool any_time = st.h != DP_UNSET || st.i != DP_UNSET || st.sec != DP_UNSET || st.ms != DP_UNSET;
    if (any_time) { /* timelib: a time given in part is zero elsewhere */
        st.h = st.h == DP_UNSET ? 0 : st.h;
        st.i = st.i == DP_UNSET ? 0 : st.i;
        st.sec = st.sec == DP_UNSET ? 0 : st.sec;
        st.ms = st.ms == DP_UNSET ? 0 : st.ms;
        if (!st.error && (st.h > 23 || st.i > 59 || st.sec > 59))
            dp_fail(&st, "The parsed time was invalid");
    }
    if (!st.error && st.y != DP_UNSET && st.m != DP_UNSET && st.d != DP_UNSET &&
        !dp_valid_date(st.y, st.m, st.d))
        dp_fail(&st, "The parsed date was invalid");
    if (st.error && st.unreadable)
        return dberr_set(err, DBERR_NOT_IMPLEMENTED,
                         "atomdb cannot read the date string '%s' without a format: it reads ISO "
                         "8601 (YYYY-MM-DD[THH:MM[:SS[.mmm]]][Z|+hh:mm]) and numeric (m/d/y, "
                         "d-m-y) forms; give a format",
                         s);
    if (st.error) {
        char c = st.error_pos < st.len ? st.s[st.error_pos] : '\0';
        if (c >= 32 && c <= 126)
            return dberr_set(err, DBERR_CONVERSION_FAILURE,
                             "Error parsing date string '%s'; %zu: %s '%c'", s, st.error_pos,
                             st.error, c);
        return dberr_set(err, DBERR_CONVERSION_FAILURE,
                         "Error parsing date string '%s'; %zu: %s [ASCII %d]", s, st.error_pos,
                         st.error, (int)(unsigned char)c);
    }
    if (!any_time) /* as mongod: a date alone is midnight */
        st.h = st.i = st.sec = st.ms = 0;
    if (st.y == DP_UNSET || st.m == DP_UNSET || st.d == DP_UNSET)
        return dberr_set(err, DBERR_CONVERSION_FAILURE,
                         "an incomplete date/time string has been found, with elements missing: "
                         "\"%s\"",
                         s);
    if (st.has_zone && tz_given && !(tz->fixed && tz->off_ms == 0))
        return dberr_set(err, DBERR_CONVERSION_FAILURE,
                         "you cannot pass in a date/time string with GMT offset together with a "
                         "timezone argument");
    int64_t local = date_days_from_civil(st.y, st.m, st.d) * DATE_MS_PER_DAY +
                    st.h * 3600000 + st.i * 60000 + st.sec * 1000 + st.ms;
    *out = st.has_zone ? local - st.zone_ms : date_tz_to_utc(tz, local);
    return true;
}
