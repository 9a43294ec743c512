/* collation: parses MongoDB collation specs with mongod's validation into an
 * ICU collator (Debian's libicu), compares strings and makes sort keys with
 * it. The option order and messages follow mongod's ICU collator factory. */
#include "doc/collation.h"

#include <string.h>

#include <unicode/ucol.h>
#include <unicode/uloc.h>
#include <unicode/ustring.h>
#include <unicode/uvernum.h>

#include "util/shellfmt.h"

#define COLLATION_INCOMPATIBLE_VERSION 12

struct collation {
    UCollator *ucol;
    char locale[ULOC_FULLNAME_CAPACITY];
    bool case_level;
    const char *case_first; /* "upper", "lower", "off" */
    int strength;           /* 1..5 */
    bool numeric_ordering;
    const char *alternate;  /* "non-ignorable", "shifted" */
    const char *max_variable; /* "punct", "space" */
    bool normalization;
    bool backwards;
    unsigned refs;
};

static bool collation_type_error(const char *field, const bson_iter_t *it, const char *want,
                                 dberr_t *err)
{
    return dberr_set(err, DBERR_TYPE_MISMATCH, "\"%s\" had the wrong type. Expected %s, found %s",
                     field, want, shellfmt_type_name(bson_iter_type(it)));
}

/* The spec in shell form for messages. */
static void collation_spec_text(const bson_t *spec, char *out, size_t cap)
{
    char *s = shellfmt_doc(spec);
    snprintf(out, cap, "%s", s ? s : "{}");
    bson_free(s);
}

static UColAttributeValue collation_onoff(bool on)
{
    return on ? UCOL_ON : UCOL_OFF;
}

/* Sets one attribute; OperationFailed 96 when ICU refuses it. */
static bool collation_set(collation_t *c, UColAttribute attr, UColAttributeValue v,
                          const char *field, dberr_t *err)
{
    UErrorCode st = U_ZERO_ERROR;
    ucol_setAttribute(c->ucol, attr, v, &st);
    if (U_FAILURE(st))
        return dberr_set(err, DBERR_OPERATION_FAILED, "Failed to set '%s' attribute: %s", field,
                         u_errorName(st));
    return true;
}

static bool collation_get_bool(const collation_t *c, UColAttribute attr)
{
    UErrorCode st = U_ZERO_ERROR;
    return ucol_getAttribute(c->ucol, attr, &st) == UCOL_ON;
}

/* Fills every option left out of the spec from the locale's defaults. */
static void collation_defaults(collation_t *c)
{
    UErrorCode st = U_ZERO_ERROR;
    c->case_level = collation_get_bool(c, UCOL_CASE_LEVEL);
    UColAttributeValue cf = ucol_getAttribute(c->ucol, UCOL_CASE_FIRST, &st);
    c->case_first = cf == UCOL_UPPER_FIRST ? "upper" : cf == UCOL_LOWER_FIRST ? "lower" : "off";
    UColAttributeValue s = ucol_getAttribute(c->ucol, UCOL_STRENGTH, &st);
    c->strength = s == UCOL_PRIMARY     ? 1
                  : s == UCOL_SECONDARY ? 2
                  : s == UCOL_QUATERNARY ? 4
                  : s == UCOL_IDENTICAL ? 5
                                        : 3;
    c->numeric_ordering = collation_get_bool(c, UCOL_NUMERIC_COLLATION);
    c->alternate = ucol_getAttribute(c->ucol, UCOL_ALTERNATE_HANDLING, &st) == UCOL_SHIFTED
                       ? "shifted"
                       : "non-ignorable";
    c->max_variable = ucol_getMaxVariable(c->ucol) == UCOL_REORDER_CODE_SPACE ? "space" : "punct";
    c->normalization = collation_get_bool(c, UCOL_NORMALIZATION_MODE);
    c->backwards = collation_get_bool(c, UCOL_FRENCH_COLLATION);
}

/* Option `field` of the spec into `it` (*found false when absent): one
 * more in *nparsed when it has `type` (bool or string), TypeMismatch when
 * it has another. */
static bool collation_opt_find(const bson_t *spec, const char *field, bson_type_t type,
                               bson_iter_t *it, bool *found, int *nparsed, dberr_t *err)
{
    *found = bson_iter_init_find(it, spec, field);
    if (!*found)
        return true;
    if (bson_iter_type(it) != type)
        return collation_type_error(field, it, type == BSON_TYPE_BOOL ? "bool" : "string", err);
    (*nparsed)++;
    return true;
}

/* A boolean option: absent leaves the default. */
static bool collation_opt_bool(collation_t *c, const bson_t *spec, const char *field,
                               UColAttribute attr, int *nparsed, dberr_t *err)
{
    bson_iter_t it;
    bool found;
    return collation_opt_find(spec, field, BSON_TYPE_BOOL, &it, &found, nparsed, err) &&
           (!found || collation_set(c, attr, collation_onoff(bson_iter_bool(&it)), field, err));
}

/* A string option: absent gives NULL and true. */
static bool collation_opt_str(const bson_t *spec, const char *field, const char **out,
                              int *nparsed, dberr_t *err)
{
    bson_iter_t it;
    bool found;
    *out = NULL;
    if (!collation_opt_find(spec, field, BSON_TYPE_UTF8, &it, &found, nparsed, err))
        return false;
    if (found)
        *out = bson_iter_utf8(&it, NULL);
    return true;
}

/* One value a string option accepts and the ICU value it stands for. */
typedef struct collation_choice {
    const char *name;
    int32_t value;
} collation_choice_t;

/* A string option that takes one of `choices` (n of them): *chosen is its
 * row, or NULL when the option is absent; another string fails with
 * FailedToParse and `msg` (one %s: the string given). */
static bool collation_opt_choice(const bson_t *spec, const char *field,
                                 const collation_choice_t *choices, size_t n, const char *msg,
                                 const collation_choice_t **chosen, int *nparsed, dberr_t *err)
{
    const char *s;
    *chosen = NULL;
    if (!collation_opt_str(spec, field, &s, nparsed, err))
        return false;
    for (size_t i = 0; s && i < n; i++)
        if (!strcmp(s, choices[i].name)) {
            *chosen = &choices[i];
            return true;
        }
    return !s || dberr_set(err, DBERR_FAILED_TO_PARSE, msg, s);
}

static bool collation_options(collation_t *c, const bson_t *spec, dberr_t *err)
{
    static const collation_choice_t case_first[] = {
        {"upper", UCOL_UPPER_FIRST}, {"lower", UCOL_LOWER_FIRST}, {"off", UCOL_OFF}};
    static const collation_choice_t alternate[] = {{"non-ignorable", UCOL_NON_IGNORABLE},
                                                   {"shifted", UCOL_SHIFTED}};
    static const collation_choice_t max_variable[] = {{"punct", UCOL_REORDER_CODE_PUNCTUATION},
                                                      {"space", UCOL_REORDER_CODE_SPACE}};
    const collation_choice_t *ch;
    int nparsed = 1; /* locale */
    const char *s;
    bson_iter_t it;
    if (!collation_opt_bool(c, spec, "caseLevel", UCOL_CASE_LEVEL, &nparsed, err))
        return false;
    if (!collation_opt_choice(spec, "caseFirst", case_first, 3,
                              "Field 'caseFirst' must be 'upper', 'lower', or 'off'. Got: %s", &ch,
                              &nparsed, err) ||
        (ch && !collation_set(c, UCOL_CASE_FIRST, ch->value, "caseFirst", err)))
        return false;
    if (bson_iter_init_find(&it, spec, "strength")) {
        if (!BSON_ITER_HOLDS_NUMBER(&it) && !BSON_ITER_HOLDS_DECIMAL128(&it))
            return dberr_set(err, DBERR_TYPE_MISMATCH,
                             "Expected field \"strength\" to have numeric type, but found %s",
                             shellfmt_type_name(bson_iter_type(&it)));
        double d = BSON_ITER_HOLDS_DOUBLE(&it) ? bson_iter_double(&it)
                                               : (double)bson_iter_as_int64(&it);
        int64_t n = (int64_t)d;
        if ((double)n != d)
            return dberr_set(err, DBERR_BAD_VALUE,
                             "Expected field \"strength\" to have a value exactly representable "
                             "as a 64-bit integer, but found strength: %g",
                             d);
        static const UColAttributeValue levels[] = {UCOL_PRIMARY, UCOL_SECONDARY, UCOL_TERTIARY,
                                                    UCOL_QUATERNARY, UCOL_IDENTICAL};
        if (n < 1 || n > 5)
            return dberr_set(err, DBERR_FAILED_TO_PARSE,
                             "Field 'strength' must be an integer 1 through 5. Got: %lld",
                             (long long)n);
        nparsed++;
        if (!collation_set(c, UCOL_STRENGTH, levels[n - 1], "strength", err))
            return false;
    }
    if (!collation_opt_bool(c, spec, "numericOrdering", UCOL_NUMERIC_COLLATION, &nparsed, err))
        return false;
    if (!collation_opt_choice(spec, "alternate", alternate, 2,
                              "Field 'alternate' must be 'non-ignorable' or 'shifted'. Got: %s",
                              &ch, &nparsed, err) ||
        (ch && !collation_set(c, UCOL_ALTERNATE_HANDLING, ch->value, "alternate", err)))
        return false;
    if (!collation_opt_choice(spec, "maxVariable", max_variable, 2,
                              "Field 'maxVariable' must be 'punct' or 'space'. Got: %s", &ch,
                              &nparsed, err))
        return false;
    if (ch) {
        UErrorCode st = U_ZERO_ERROR;
        ucol_setMaxVariable(c->ucol, ch->value, &st);
        if (U_FAILURE(st))
            return dberr_set(err, DBERR_OPERATION_FAILED,
                             "Failed to set 'maxVariable' attribute: %s", u_errorName(st));
    }
    if (!collation_opt_bool(c, spec, "normalization", UCOL_NORMALIZATION_MODE, &nparsed, err))
        return false;
    if (!collation_opt_bool(c, spec, "backwards", UCOL_FRENCH_COLLATION, &nparsed, err))
        return false;
    if (!collation_opt_str(spec, "version", &s, &nparsed, err))
        return false;
    char text[400];
    if (s && strcmp(s, U_ICU_VERSION) != 0) {
        collation_spec_text(spec, text, sizeof text);
        return dberr_set(err, COLLATION_INCOMPATIBLE_VERSION,
                         "Requested collation version %s but the only available collator version "
                         "was %s. Requested collation spec: %s",
                         s, U_ICU_VERSION, text);
    }
    if (nparsed < (int)bson_count_keys(spec)) {
        collation_spec_text(spec, text, sizeof text);
        return dberr_set(err, DBERR_FAILED_TO_PARSE,
                         "Collation spec contains unknown field. Collation spec: %s", text);
    }
    collation_defaults(c);
    return true;
}

/* mongod's checks of option combinations. */
static bool collation_validate(const collation_t *c, dberr_t *err)
{
    bson_t b = BSON_INITIALIZER;
    char text[400];
    bool ok = true;
    if (c->backwards && c->strength == 1) {
        collation_to_bson(c, &b);
        collation_spec_text(&b, text, sizeof text);
        ok = dberr_set(err, DBERR_BAD_VALUE, "'backwards' is invalid with 'strength' of 1 in: %s",
                       text);
    } else if (strcmp(c->case_first, "off") != 0 && !c->case_level && c->strength <= 2) {
        collation_to_bson(c, &b);
        collation_spec_text(&b, text, sizeof text);
        ok = dberr_set(err, DBERR_BAD_VALUE,
                       "'caseFirst' is invalid unless 'caseLevel' is on or 'strength' is greater "
                       "than 2 in: %s",
                       text);
    }
    bson_destroy(&b);
    return ok;
}

/* Opens the locale's collator and checks ICU knows the locale exactly. */
static bool collation_open(collation_t *c, const bson_t *spec, const char *id, dberr_t *err)
{
    char text[400];
    UErrorCode st = U_ZERO_ERROR;
    uloc_getName(id, c->locale, sizeof c->locale, &st);
    if (U_FAILURE(st) || st == U_STRING_NOT_TERMINATED_WARNING) {
        collation_spec_text(spec, text, sizeof text);
        return dberr_set(err, DBERR_BAD_VALUE, "Field 'locale' is not valid in: %s", text);
    }
    st = U_ZERO_ERROR;
    c->ucol = ucol_open(c->locale, &st);
    if (U_FAILURE(st) || !c->ucol)
        return dberr_set(err, DBERR_OPERATION_FAILED, "Failed to create collator: %s",
                         u_errorName(st));
    if (!*id) {
        collation_spec_text(spec, text, sizeof text);
        return dberr_set(err, DBERR_BAD_VALUE, "Field 'locale' cannot be the empty string in: %s",
                         text);
    }
    st = U_ZERO_ERROR;
    const char *valid = ucol_getLocaleByType(c->ucol, ULOC_VALID_LOCALE, &st);
    if (U_FAILURE(st) || !valid)
        return dberr_set(err, DBERR_OPERATION_FAILED, "Failed to get locale from icu::Collator");
    if (strcmp(id, valid) != 0) {
        collation_spec_text(spec, text, sizeof text);
        if (*valid && strcmp(valid, "root") != 0)
            return dberr_set(err, DBERR_BAD_VALUE,
                             "Field 'locale' is invalid in: %s. Did you mean '%s'?", text, valid);
        return dberr_set(err, DBERR_BAD_VALUE, "Field 'locale' is invalid in: %s", text);
    }
    return true;
}

bool collation_parse(const bson_t *spec, collation_t **out, dberr_t *err)
{
    bson_iter_t it;
    char text[400];
    *out = NULL;
    if (!bson_iter_init_find(&it, spec, "locale"))
        return dberr_set(err, DBERR_NO_SUCH_KEY, "Missing expected field \"locale\"");
    if (!BSON_ITER_HOLDS_UTF8(&it))
        return collation_type_error("locale", &it, "string", err);
    uint32_t len;
    const char *id = bson_iter_utf8(&it, &len);
    if (strlen(id) != len) {
        collation_spec_text(spec, text, sizeof text);
        return dberr_set(err, DBERR_BAD_VALUE,
                         "Field 'locale' cannot contain null byte. Collation spec: %s", text);
    }
    if (strcmp(id, "simple") == 0) {
        if (bson_count_keys(spec) > 1) {
            collation_spec_text(spec, text, sizeof text);
            return dberr_set(err, DBERR_FAILED_TO_PARSE,
                             "If locale=simple, no other fields should be present in: %s", text);
        }
        return true;
    }
    collation_t *c = bson_malloc0(sizeof *c);
    c->refs = 1;
    if (!collation_open(c, spec, id, err) || !collation_options(c, spec, err) ||
        !collation_validate(c, err)) {
        collation_destroy(c);
        return false;
    }
    *out = c;
    return true;
}

bool collation_parse_iter(const bson_iter_t *it, collation_t **out, dberr_t *err)
{
    *out = NULL;
    if (!BSON_ITER_HOLDS_DOCUMENT(it))
        return dberr_set(err, DBERR_TYPE_MISMATCH,
                         "BSON field 'collation' is the wrong type '%s', expected type 'object'",
                         shellfmt_type_name(bson_iter_type(it)));
    uint32_t len;
    const uint8_t *data;
    bson_iter_document(it, &len, &data);
    bson_t spec;
    if (!bson_init_static(&spec, data, len))
        return dberr_set(err, DBERR_FAILED_TO_PARSE, "invalid collation document");
    return collation_parse(&spec, out, err);
}

collation_t *collation_ref(collation_t *c)
{
    if (c)
        c->refs++;
    return c;
}

void collation_destroy(collation_t *c)
{
    if (!c || --c->refs > 0)
        return;
    if (c->ucol)
        ucol_close(c->ucol);
    bson_free(c);
}

int collation_compare(const collation_t *c, const char *a, size_t alen, const char *b,
                      size_t blen)
{
    if (!c) {
        size_t n = alen < blen ? alen : blen;
        int r = n ? memcmp(a, b, n) : 0;
        if (r)
            return r < 0 ? -1 : 1;
        return alen < blen ? -1 : alen > blen ? 1 : 0;
    }
    UErrorCode st = U_ZERO_ERROR;
    UCollationResult r = ucol_strcollUTF8(c->ucol, a, (int32_t)alen, b, (int32_t)blen, &st);
    return r == UCOL_LESS ? -1 : r == UCOL_GREATER ? 1 : 0;
}

void collation_sort_key(const collation_t *c, const char *s, size_t len, buf_t *out)
{
    UChar small[256];
    UChar *u = small;
    int32_t ulen = 0;
    UErrorCode st = U_ZERO_ERROR;
    u_strFromUTF8WithSub(u, 256, &ulen, s, (int32_t)len, 0xFFFD, NULL, &st);
    if (st == U_BUFFER_OVERFLOW_ERROR || ulen > 256) {
        u = bson_malloc(sizeof(UChar) * ((size_t)ulen + 1));
        st = U_ZERO_ERROR;
        u_strFromUTF8WithSub(u, ulen + 1, &ulen, s, (int32_t)len, 0xFFFD, NULL, &st);
    }
    if (U_FAILURE(st))
        ulen = 0;
    buf_reserve(out, 64);
    int32_t n = ucol_getSortKey(c->ucol, u, ulen, out->data + out->len,
                                (int32_t)(out->cap - out->len));
    if (n > (int32_t)(out->cap - out->len)) {
        buf_reserve(out, (size_t)n);
        n = ucol_getSortKey(c->ucol, u, ulen, out->data + out->len,
                            (int32_t)(out->cap - out->len));
    }
    if (n > 0)
        out->len += (size_t)n - 1; /* without the terminating zero */
    if (u != small)
        bson_free(u);
}

void collation_to_bson(const collation_t *c, bson_t *out)
{
    if (!c) {
        BSON_APPEND_UTF8(out, "locale", "simple");
        return;
    }
    BSON_APPEND_UTF8(out, "locale", c->locale);
    BSON_APPEND_BOOL(out, "caseLevel", c->case_level);
    BSON_APPEND_UTF8(out, "caseFirst", c->case_first);
    BSON_APPEND_INT32(out, "strength", c->strength);
    BSON_APPEND_BOOL(out, "numericOrdering", c->numeric_ordering);
    BSON_APPEND_UTF8(out, "alternate", c->alternate);
    BSON_APPEND_UTF8(out, "maxVariable", c->max_variable);
    BSON_APPEND_BOOL(out, "normalization", c->normalization);
    BSON_APPEND_BOOL(out, "backwards", c->backwards);
    BSON_APPEND_UTF8(out, "version", U_ICU_VERSION);
}

void collation_append(const collation_t *c, bson_t *out, const char *key)
{
    bson_t sub;
    bson_append_document_begin(out, key, -1, &sub);
    collation_to_bson(c, &sub);
    bson_append_document_end(out, &sub);
}

bool collation_same(const collation_t *a, const collation_t *b)
{
    if (a == b)
        return true;
    if (!a || !b)
        return false;
    return strcmp(a->locale, b->locale) == 0 && a->case_level == b->case_level &&
           strcmp(a->case_first, b->case_first) == 0 && a->strength == b->strength &&
           a->numeric_ordering == b->numeric_ordering &&
           strcmp(a->alternate, b->alternate) == 0 &&
           strcmp(a->max_variable, b->max_variable) == 0 &&
           a->normalization == b->normalization && a->backwards == b->backwards;
}
