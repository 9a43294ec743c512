/* updater: MongoDB update semantics (operator documents, replacements and
 * pipeline updates) modelled on mongod 7.0's UpdateNode tree: the update is
 * parsed into a path tree once, then applied to a mutable copy of a document. */
#include "doc/updater.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "doc/compare.h"
#include "doc/matcher.h"
#include "util/shellfmt.h"
#include "doc/path.h"
#include "doc/pipeline.h"

/* mongod refuses to pad an array by more than this many nulls. */
#define UPD_MAX_PADDING 1500000
/* Upper bound on path components we accept in one update path. */
#define UPD_MAX_DEPTH 200
/* mongod's limit on the nesting depth of stored documents. */
#define UPD_MAX_STORED_DEPTH 180
/* Inputs nested deeper than this are refused before any recursive walk. */
#define UPD_MAX_INPUT_DEPTH 200

static bool depth_exceeds(const uint8_t *data, uint32_t len, int level, int limit);

/* ------------------------------------------------------------------------
 * Small string helpers: mongod-style rendering of values ("a: 1", "{ b: 2 }")
 * ---------------------------------------------------------------------- */

static void fmt_value(bson_string_t *s, const bson_value_t *v);

static void fmt_double(bson_string_t *s, double d)
{
    char buf[64];
    if (isnan(d)) {
        bson_string_append(s, "nan");
    } else if (isinf(d)) {
        bson_string_append(s, d > 0 ? "inf" : "-inf");
    } else if (d == floor(d) && fabs(d) < 1e15) {
        snprintf(buf, sizeof buf, "%.1f", d);
        bson_string_append(s, buf);
    } else {
        snprintf(buf, sizeof buf, "%.15g", d);
        if (strtod(buf, NULL) != d) {
            snprintf(buf, sizeof buf, "%.17g", d);
        }
        bson_string_append(s, buf);
    }
}

static void fmt_container(bson_string_t *s, const uint8_t *data, uint32_t len, bool is_array)
{
    bson_t b;
    bson_iter_t it;
    bool first = true;
    if (!bson_init_static(&b, data, len) || !bson_iter_init(&it, &b)) {
        bson_string_append(s, is_array ? "[]" : "{}");
        return;
    }
    bson_string_append(s, is_array ? "[" : "{");
    while (bson_iter_next(&it)) {
        bson_string_append(s, first ? " " : ", ");
        first = false;
        if (!is_array) {
            bson_string_append(s, bson_iter_key(&it));
            bson_string_append(s, ": ");
        }
        fmt_value(s, bson_iter_value(&it));
    }
    bson_string_append(s, first ? (is_array ? "]" : "}") : (is_array ? " ]" : " }"));
}

static void fmt_value(bson_string_t *s, const bson_value_t *v)
{
    char buf[BSON_DECIMAL128_STRING + 32];
    switch (v->value_type) {
    case BSON_TYPE_DOUBLE:
        fmt_double(s, v->value.v_double);
        break;
    case BSON_TYPE_INT32:
        bson_string_append_printf(s, "%" PRId32, v->value.v_int32);
        break;
    case BSON_TYPE_INT64:
        bson_string_append_printf(s, "%" PRId64, v->value.v_int64);
        break;
    case BSON_TYPE_UTF8:
        bson_string_append_c(s, '"');
        bson_string_append(s, v->value.v_utf8.str);
        bson_string_append_c(s, '"');
        break;
    case BSON_TYPE_DOCUMENT:
    case BSON_TYPE_ARRAY:
        fmt_container(s, v->value.v_doc.data, v->value.v_doc.data_len,
                      v->value_type == BSON_TYPE_ARRAY);
        break;
    case BSON_TYPE_BOOL:
        bson_string_append(s, v->value.v_bool ? "true" : "false");
        break;
    case BSON_TYPE_NULL:
        bson_string_append(s, "null");
        break;
    case BSON_TYPE_UNDEFINED:
        bson_string_append(s, "undefined");
        break;
    case BSON_TYPE_OID:
        bson_oid_to_string(&v->value.v_oid, buf);
        bson_string_append_printf(s, "ObjectId('%s')", buf);
        break;
    case BSON_TYPE_DATE_TIME:
        bson_string_append_printf(s, "new Date(%" PRId64 ")", v->value.v_datetime);
        break;
    case BSON_TYPE_TIMESTAMP:
        bson_string_append_printf(s, "Timestamp(%" PRIu32 ", %" PRIu32 ")",
                                  v->value.v_timestamp.timestamp, v->value.v_timestamp.increment);
        break;
    case BSON_TYPE_DECIMAL128:
        bson_decimal128_to_string(&v->value.v_decimal128, buf);
        bson_string_append_printf(s, "NumberDecimal(\"%s\")", buf);
        break;
    case BSON_TYPE_REGEX:
        bson_string_append_printf(s, "/%s/%s", v->value.v_regex.regex,
                                  v->value.v_regex.options ? v->value.v_regex.options : "");
        break;
    case BSON_TYPE_MINKEY:
        bson_string_append(s, "MinKey");
        break;
    case BSON_TYPE_MAXKEY:
        bson_string_append(s, "MaxKey");
        break;
    case BSON_TYPE_BINARY:
        bson_string_append_printf(s, "BinData(%d, ...)", (int)v->value.v_binary.subtype);
        break;
    case BSON_TYPE_CODE:
        bson_string_append(s, v->value.v_code.code);
        break;
    case BSON_TYPE_SYMBOL:
        bson_string_append(s, v->value.v_symbol.symbol);
        break;
    default:
        bson_string_append(s, shellfmt_type_name(v->value_type));
        break;
    }
}

/* ------------------------------------------------------------------------
 * Mutable document: a tree the update edits in place, written back as BSON.
 * ---------------------------------------------------------------------- */

typedef struct mnode mnode_t;
struct mnode {
    char *name;       /* owned field name; NULL for array elements */
    bson_type_t type; /* BSON type of the value */
    bson_value_t v;   /* owned scalar value (not used for documents/arrays) */
    mnode_t **kids;   /* documents and arrays: children in order */
    size_t nkids;
    size_t cap;
    mnode_t *parent; /* NULL for the root */
};

static void mnode_free(mnode_t *n)
{
    if (!n) {
        return;
    }
    for (size_t i = 0; i < n->nkids; i++) {
        mnode_free(n->kids[i]);
    }
    bson_free(n->kids);
    if (n->type != BSON_TYPE_DOCUMENT && n->type != BSON_TYPE_ARRAY) {
        bson_value_destroy(&n->v);
    }
    bson_free(n->name);
    bson_free(n);
}

static bool mnode_is_container(const mnode_t *n)
{
    return n->type == BSON_TYPE_DOCUMENT || n->type == BSON_TYPE_ARRAY;
}

static void mnode_clear_value(mnode_t *n)
{
    for (size_t i = 0; i < n->nkids; i++) {
        mnode_free(n->kids[i]);
    }
    bson_free(n->kids);
    n->kids = NULL;
    n->nkids = n->cap = 0;
    if (!mnode_is_container(n)) {
        bson_value_destroy(&n->v);
    }
    memset(&n->v, 0, sizeof n->v);
    n->type = BSON_TYPE_NULL;
    n->v.value_type = BSON_TYPE_NULL;
}

static void mnode_insert(mnode_t *parent, size_t at, mnode_t *kid)
{
    if (parent->nkids == parent->cap) {
        parent->cap = parent->cap ? parent->cap * 2 : 4;
        parent->kids = bson_realloc(parent->kids, parent->cap * sizeof *parent->kids);
    }
    if (at > parent->nkids) {
        at = parent->nkids;
    }
    memmove(parent->kids + at + 1, parent->kids + at, (parent->nkids - at) * sizeof *parent->kids);
    parent->kids[at] = kid;
    parent->nkids++;
    kid->parent = parent;
}

static void mnode_append(mnode_t *parent, mnode_t *kid)
{
    mnode_insert(parent, parent->nkids, kid);
}

/* Removes (without freeing) the kid at `at`. */
static mnode_t *mnode_take(mnode_t *parent, size_t at)
{
    mnode_t *k = parent->kids[at];
    memmove(parent->kids + at, parent->kids + at + 1,
            (parent->nkids - at - 1) * sizeof *parent->kids);
    parent->nkids--;
    k->parent = NULL;
    return k;
}

static size_t mnode_index_of(const mnode_t *parent, const mnode_t *kid)
{
    for (size_t i = 0; i < parent->nkids; i++) {
        if (parent->kids[i] == kid) {
            return i;
        }
    }
    return parent->nkids;
}

static mnode_t *mnode_new(const char *name)
{
    mnode_t *n = bson_malloc0(sizeof *n);
    n->name = name ? bson_strdup(name) : NULL;
    n->type = BSON_TYPE_NULL;
    n->v.value_type = BSON_TYPE_NULL;
    return n;
}

static void mnode_fill_from_iter(mnode_t *n, bson_iter_t *it);

static void mnode_fill_container(mnode_t *n, bson_type_t type, const uint8_t *data, uint32_t len)
{
    bson_t b;
    bson_iter_t it;
    n->type = type;
    if (!bson_init_static(&b, data, len) || !bson_iter_init(&it, &b)) {
        return;
    }
    while (bson_iter_next(&it)) {
        mnode_t *k = mnode_new(type == BSON_TYPE_ARRAY ? NULL : bson_iter_key(&it));
        mnode_fill_from_iter(k, &it);
        mnode_append(n, k);
    }
}

static void mnode_fill_from_value(mnode_t *n, const bson_value_t *v)
{
    if (v->value_type == BSON_TYPE_DOCUMENT || v->value_type == BSON_TYPE_ARRAY) {
        mnode_fill_container(n, v->value_type, v->value.v_doc.data, v->value.v_doc.data_len);
    } else {
        n->type = v->value_type;
        bson_value_copy(v, &n->v);
    }
}

static void mnode_fill_from_iter(mnode_t *n, bson_iter_t *it)
{
    mnode_fill_from_value(n, bson_iter_value(it));
}

/* Replaces the value of `n` (keeping its name and place) with `v`. */
static void mnode_set_value(mnode_t *n, const bson_value_t *v)
{
    mnode_clear_value(n);
    mnode_fill_from_value(n, v);
}

static mnode_t *mnode_from_doc(const bson_t *doc)
{
    mnode_t *root = mnode_new(NULL);
    mnode_fill_container(root, BSON_TYPE_DOCUMENT, bson_get_data(doc), doc->len);
    return root;
}

static mnode_t *mnode_clone(const mnode_t *src, const char *name)
{
    mnode_t *n = mnode_new(name);
    n->type = src->type;
    if (mnode_is_container(src)) {
        for (size_t i = 0; i < src->nkids; i++) {
            mnode_append(n, mnode_clone(src->kids[i], src->kids[i]->name));
        }
    } else {
        bson_value_copy(&src->v, &n->v);
    }
    return n;
}

static void mnode_write_kids(bson_t *out, const mnode_t *n);

static void mnode_write(bson_t *out, const char *key, const mnode_t *n)
{
    bson_t child;
    if (n->type == BSON_TYPE_DOCUMENT) {
        bson_append_document_begin(out, key, -1, &child);
        mnode_write_kids(&child, n);
        bson_append_document_end(out, &child);
    } else if (n->type == BSON_TYPE_ARRAY) {
        bson_append_array_begin(out, key, -1, &child);
        mnode_write_kids(&child, n);
        bson_append_array_end(out, &child);
    } else {
        bson_append_value(out, key, -1, &n->v);
    }
}

static void mnode_write_kids(bson_t *out, const mnode_t *n)
{
    char buf[16];
    const char *key;
    for (size_t i = 0; i < n->nkids; i++) {
        if (n->type == BSON_TYPE_ARRAY) {
            bson_uint32_to_string((uint32_t)i, &key, buf, sizeof buf);
        } else {
            key = n->kids[i]->name;
        }
        mnode_write(out, key, n->kids[i]);
    }
}

/* The value of `n` as a bson_value_t. For containers the bytes live in
 * `*tmp` (caller destroys it). */
static void mnode_value(const mnode_t *n, bson_value_t *out, bson_t **tmp)
{
    *tmp = NULL;
    if (mnode_is_container(n)) {
        *tmp = bson_new();
        mnode_write_kids(*tmp, n);
        out->value_type = n->type;
        out->value.v_doc.data = (uint8_t *)bson_get_data(*tmp);
        out->value.v_doc.data_len = (*tmp)->len;
    } else {
        *out = n->v;
    }
}

static int mnode_compare_value(const mnode_t *n, const bson_value_t *v)
{
    bson_value_t nv;
    bson_t *tmp;
    mnode_value(n, &nv, &tmp);
    int c = compare_values(&nv, v);
    bson_destroy(tmp);
    return c;
}

/* True when `n` holds exactly `v` (same type and bytes). */
static bool mnode_binary_equal(const mnode_t *n, const bson_value_t *v)
{
    if (n->type != v->value_type) {
        return false;
    }
    bson_value_t nv;
    bson_t *tmp;
    bool eq;
    mnode_value(n, &nv, &tmp);
    bson_t a, b;
    switch (v->value_type) {
    case BSON_TYPE_DOCUMENT:
    case BSON_TYPE_ARRAY:
        eq = nv.value.v_doc.data_len == v->value.v_doc.data_len &&
             memcmp(nv.value.v_doc.data, v->value.v_doc.data, v->value.v_doc.data_len) == 0;
        break;
    default: {
        bson_init(&a);
        bson_init(&b);
        bson_append_value(&a, "", 0, &nv);
        bson_append_value(&b, "", 0, v);
        eq = a.len == b.len && memcmp(bson_get_data(&a), bson_get_data(&b), a.len) == 0;
        bson_destroy(&a);
        bson_destroy(&b);
        break;
    }
    }
    bson_destroy(tmp);
    return eq;
}

static mnode_t *mnode_find(const mnode_t *n, const char *name)
{
    if (n->type != BSON_TYPE_DOCUMENT) {
        return NULL;
    }
    for (size_t i = 0; i < n->nkids; i++) {
        if (strcmp(n->kids[i]->name, name) == 0) {
            return n->kids[i];
        }
    }
    return NULL;
}

/* "a: 1" for element `n` named `name`. */
static void fmt_mnode(bson_string_t *s, const char *name, const mnode_t *n)
{
    bson_value_t v;
    bson_t *tmp;
    mnode_value(n, &v, &tmp);
    bson_string_append(s, name);
    bson_string_append(s, ": ");
    fmt_value(s, &v);
    bson_destroy(tmp);
}

/* The field name of `n` as its parent sees it ("3" for array elements). */
static const char *mnode_field_name(const mnode_t *n, char *buf, size_t bufsz)
{
    if (n->name) {
        return n->name;
    }
    if (n->parent) {
        snprintf(buf, bufsz, "%zu", mnode_index_of(n->parent, n));
        return buf;
    }
    return "";
}

/* ------------------------------------------------------------------------
 * Paths
 * ---------------------------------------------------------------------- */

/* Splits "a.b.c" into owned components. */
static char **split_path(const char *path, size_t *n)
{
    size_t count = 1;
    for (const char *p = path; *p; p++) {
        count += *p == '.';
    }
    char **parts = bson_malloc0(count * sizeof *parts);
    const char *start = path;
    size_t i = 0;
    for (const char *p = path;; p++) {
        if (*p == '.' || *p == '\0') {
            parts[i++] = bson_strndup(start, (size_t)(p - start));
            if (*p == '\0') {
                break;
            }
            start = p + 1;
        }
    }
    *n = count;
    return parts;
}

static void free_parts(char **parts, size_t n)
{
    for (size_t i = 0; parts && i < n; i++) {
        bson_free(parts[i]);
    }
    bson_free(parts);
}

/* Digits only: an array index as mongod's parseUnsignedBase10Integer reads it. */
static bool parse_index(const char *s, size_t *out)
{
    size_t v = 0;
    if (!*s) {
        return false;
    }
    for (const char *p = s; *p; p++) {
        if (*p < '0' || *p > '9') {
            return false;
        }
        if (v > (SIZE_MAX - 9) / 10) {
            return false;
        }
        v = v * 10 + (size_t)(*p - '0');
    }
    *out = v;
    return true;
}

static bool is_array_filter_ident(const char *s)
{
    size_t n = strlen(s);
    return n >= 3 && s[0] == '$' && s[1] == '[' && s[n - 1] == ']';
}

/* mongod's cmpPathsAndArrayIndexes: numbers (no leading zero) compare as
 * numbers, everything else as bytes. */
static int cmp_field_names(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    bool na = la > 0 && a[0] >= '0' && a[0] <= '9' && !(a[0] == '0' && la > 1);
    bool nb = lb > 0 && b[0] >= '0' && b[0] <= '9' && !(b[0] == '0' && lb > 1);
    if (na && nb) {
        for (size_t i = 0; i < la; i++) {
            if (a[i] < '0' || a[i] > '9') {
                na = false;
            }
        }
        for (size_t i = 0; i < lb; i++) {
            if (b[i] < '0' || b[i] > '9') {
                nb = false;
            }
        }
        if (na && nb && la != lb) {
            return la < lb ? -1 : 1;
        }
    }
    return strcmp(a, b);
}

/* A stack of path components (`pathTaken` / `pathToCreate` in mongod). */
typedef struct pcomp {
    const char *s; /* borrowed, or NULL to use num */
    char num[24];
} pcomp_t;

typedef struct pstack {
    pcomp_t *v;
    size_t n;
    size_t cap;
} pstack_t;

static void ps_push(pstack_t *ps, const char *s)
{
    if (ps->n == ps->cap) {
        ps->cap = ps->cap ? ps->cap * 2 : 16;
        ps->v = bson_realloc(ps->v, ps->cap * sizeof *ps->v);
    }
    ps->v[ps->n].s = s;
    ps->n++;
}

static void ps_push_index(pstack_t *ps, size_t idx)
{
    ps_push(ps, NULL);
    snprintf(ps->v[ps->n - 1].num, sizeof ps->v[ps->n - 1].num, "%zu", idx);
}

static const char *ps_at(const pstack_t *ps, size_t i)
{
    return ps->v[i].s ? ps->v[i].s : ps->v[i].num;
}

static void ps_join(bson_string_t *s, const pstack_t *ps, size_t from)
{
    for (size_t i = from; i < ps->n; i++) {
        if (i > from) {
            bson_string_append_c(s, '.');
        }
        bson_string_append(s, ps_at(ps, i));
    }
}

/* ------------------------------------------------------------------------
 * Numbers: mongod's SafeNum arithmetic.
 * ---------------------------------------------------------------------- */

typedef struct snum {
    bson_type_t t; /* INT32, INT64, DOUBLE, DECIMAL128 or EOD (invalid) */
    int32_t i32;
    int64_t i64;
    double d;
    _Decimal128 dec;
} snum_t;

static snum_t snum_from(const bson_value_t *v)
{
    snum_t n;
    memset(&n, 0, sizeof n);
    n.t = v->value_type;
    switch (v->value_type) {
    case BSON_TYPE_INT32:
        n.i32 = v->value.v_int32;
        break;
    case BSON_TYPE_INT64:
        n.i64 = v->value.v_int64;
        break;
    case BSON_TYPE_DOUBLE:
        n.d = v->value.v_double;
        break;
    case BSON_TYPE_DECIMAL128:
        memcpy(&n.dec, &v->value.v_decimal128, sizeof n.dec);
        break;
    default:
        n.t = BSON_TYPE_EOD;
        break;
    }
    return n;
}

static void snum_to_value(const snum_t *n, bson_value_t *v)
{
    memset(v, 0, sizeof *v);
    v->value_type = n->t;
    switch (n->t) {
    case BSON_TYPE_INT32:
        v->value.v_int32 = n->i32;
        break;
    case BSON_TYPE_INT64:
        v->value.v_int64 = n->i64;
        break;
    case BSON_TYPE_DOUBLE:
        v->value.v_double = n->d;
        break;
    case BSON_TYPE_DECIMAL128:
        memcpy(&v->value.v_decimal128, &n->dec, sizeof n->dec);
        break;
    default:
        v->value_type = BSON_TYPE_NULL;
        break;
    }
}

static int64_t snum_i64(const snum_t *n)
{
    return n->t == BSON_TYPE_INT32 ? n->i32 : n->i64;
}

static double snum_double(const snum_t *n)
{
    switch (n->t) {
    case BSON_TYPE_INT32:
        return n->i32;
    case BSON_TYPE_INT64:
        return (double)n->i64;
    case BSON_TYPE_DOUBLE:
        return n->d;
    default:
        return 0;
    }
}

/* Decimal128 of `n`; doubles are rounded to 15 significant digits as
 * mongod's Decimal128(double) does. */
static _Decimal128 snum_dec(const snum_t *n)
{
    switch (n->t) {
    case BSON_TYPE_INT32:
        return (_Decimal128)n->i32;
    case BSON_TYPE_INT64:
        return (_Decimal128)n->i64;
    case BSON_TYPE_DECIMAL128:
        return n->dec;
    case BSON_TYPE_DOUBLE: {
        char buf[64];
        bson_decimal128_t d;
        _Decimal128 r;
        if (isnan(n->d)) {
            snprintf(buf, sizeof buf, "NaN");
        } else if (isinf(n->d)) {
            snprintf(buf, sizeof buf, n->d > 0 ? "Infinity" : "-Infinity");
        } else {
            snprintf(buf, sizeof buf, "%.14e", n->d);
        }
        if (!bson_decimal128_from_string(buf, &d)) {
            return (_Decimal128)0;
        }
        memcpy(&r, &d, sizeof r);
        return r;
    }
    default:
        return (_Decimal128)0;
    }
}

static snum_t snum_invalid(void)
{
    snum_t n;
    memset(&n, 0, sizeof n);
    n.t = BSON_TYPE_EOD;
    return n;
}

static snum_t snum_arith(const snum_t *a, const snum_t *b, bool multiply)
{
    snum_t r;
    memset(&r, 0, sizeof r);
    if (a->t == BSON_TYPE_EOD || b->t == BSON_TYPE_EOD) {
        return snum_invalid();
    }
    if (a->t == BSON_TYPE_DECIMAL128 || b->t == BSON_TYPE_DECIMAL128) {
        _Decimal128 x = snum_dec(a), y = snum_dec(b);
        r.t = BSON_TYPE_DECIMAL128;
        r.dec = multiply ? x * y : x + y;
        return r;
    }
    if (a->t == BSON_TYPE_DOUBLE || b->t == BSON_TYPE_DOUBLE) {
        double x = snum_double(a), y = snum_double(b);
        r.t = BSON_TYPE_DOUBLE;
        r.d = multiply ? x * y : x + y;
        return r;
    }
    if (a->t == BSON_TYPE_INT32 && b->t == BSON_TYPE_INT32) {
        int64_t w = multiply ? (int64_t)a->i32 * b->i32 : (int64_t)a->i32 + b->i32;
        if (w >= INT32_MIN && w <= INT32_MAX) {
            r.t = BSON_TYPE_INT32;
            r.i32 = (int32_t)w;
        } else {
            r.t = BSON_TYPE_INT64;
            r.i64 = w;
        }
        return r;
    }
    int64_t x = snum_i64(a), y = snum_i64(b), w;
    bool overflow = multiply ? __builtin_mul_overflow(x, y, &w) : __builtin_add_overflow(x, y, &w);
    if (overflow) {
        return snum_invalid();
    }
    r.t = BSON_TYPE_INT64;
    r.i64 = w;
    return r;
}

/* SafeNum::isIdentical: same type and same value. */
static bool snum_identical(const snum_t *a, const snum_t *b)
{
    if (a->t != b->t) {
        return false;
    }
    switch (a->t) {
    case BSON_TYPE_INT32:
        return a->i32 == b->i32;
    case BSON_TYPE_INT64:
        return a->i64 == b->i64;
    case BSON_TYPE_DOUBLE:
        return a->d == b->d || (isnan(a->d) && isnan(b->d));
    case BSON_TYPE_DECIMAL128:
        return memcmp(&a->dec, &b->dec, sizeof a->dec) == 0 || a->dec == b->dec;
    default:
        return false;
    }
}

/* SafeNum::debugString: "(NumberLong)9223372036854775807". */
static void snum_debug(bson_string_t *s, const snum_t *n)
{
    bson_value_t v;
    switch (n->t) {
    case BSON_TYPE_INT32:
        bson_string_append(s, "(NumberInt)");
        break;
    case BSON_TYPE_INT64:
        bson_string_append(s, "(NumberLong)");
        break;
    case BSON_TYPE_DOUBLE:
        bson_string_append(s, "(NumberDouble)");
        break;
    case BSON_TYPE_DECIMAL128:
        bson_string_append(s, "(NumberDecimal)");
        break;
    default:
        bson_string_append(s, "(EOO)");
        return;
    }
    snum_to_value(n, &v);
    if (n->t == BSON_TYPE_DECIMAL128) {
        char buf[BSON_DECIMAL128_STRING];
        bson_decimal128_to_string(&v.value.v_decimal128, buf);
        bson_string_append(s, buf);
    } else {
        fmt_value(s, &v);
    }
}

/* ------------------------------------------------------------------------
 * The parsed update: a tree of internal nodes (object / array) and leaves.
 * ---------------------------------------------------------------------- */

typedef enum upd_op {
    OP_SET,
    OP_UNSET,
    OP_INC,
    OP_MUL,
    OP_MIN,
    OP_MAX,
    OP_RENAME,
    OP_SET_ON_INSERT,
    OP_CURRENT_DATE,
    OP_PUSH,
    OP_ADD_TO_SET,
    OP_POP,
    OP_PULL,
    OP_PULL_ALL,
    OP_BIT,
    OP_PLACEHOLDER, /* the source path of a $rename: occupies the path, does nothing */
} upd_op_t;

static const struct {
    const char *name;
    upd_op_t op;
} upd_ops[] = {
    {"$set", OP_SET},
    {"$unset", OP_UNSET},
    {"$inc", OP_INC},
    {"$mul", OP_MUL},
    {"$min", OP_MIN},
    {"$max", OP_MAX},
    {"$rename", OP_RENAME},
    {"$setOnInsert", OP_SET_ON_INSERT},
    {"$currentDate", OP_CURRENT_DATE},
    {"$push", OP_PUSH},
    {"$addToSet", OP_ADD_TO_SET},
    {"$pop", OP_POP},
    {"$pull", OP_PULL},
    {"$pullAll", OP_PULL_ALL},
    {"$bit", OP_BIT},
};

typedef enum unode_kind { UN_OBJECT, UN_ARRAY, UN_LEAF } unode_kind_t;

typedef struct unode unode_t;

typedef struct uchild {
    char *name; /* field name (object) or array filter identifier ("" for $[]) */
    unode_t *node;
} uchild_t;

typedef enum pull_kind { PULL_EQUAL, PULL_OBJECT, PULL_WRAPPED } pull_kind_t;

typedef struct bitop {
    char op; /* 'a', 'o', 'x' */
    snum_t operand;
} bitop_t;

struct unode {
    unode_kind_t kind;
    /* -- UN_OBJECT / UN_ARRAY -- */
    uchild_t *kids; /* sorted by cmp_field_names */
    size_t nkids;
    size_t cap;
    unode_t *positional; /* UN_OBJECT: the child under "$" */
    /* -- UN_LEAF -- */
    upd_op_t op;
    char *path;         /* the path as written, for messages */
    char *spec_name;    /* the field name in the operator document */
    bson_value_t arg;   /* owned copy of the operator argument */
    bson_value_t *vals; /* $push/$addToSet/$pullAll values (borrowed from arg) */
    size_t nvals;
    bool has_slice;
    int64_t slice;
    int64_t position;
    int sort_mode; /* 0 none, 1 whole value, 2 by pattern */
    int sort_dir;  /* whole-value direction */
    bson_t *sort_pattern;
    bool pop_front;
    bool ts; /* $currentDate: timestamp instead of date */
    pull_kind_t pull_kind;
    matcher_t *matcher;
    bitop_t *bits;
    size_t nbits;
    char *rename_from;
};

typedef struct afilter {
    char *id;
    matcher_t *m;
} afilter_t;

struct updater {
    updater_kind_t kind;
    unode_t *root;        /* UPDATER_OPERATORS */
    bson_t *replacement;  /* UPDATER_REPLACEMENT */
    pipeline_t *pipeline; /* UPDATER_PIPELINE */
    afilter_t *filters;
    size_t nfilters;
};

static void unode_free(unode_t *n)
{
    if (!n) {
        return;
    }
    for (size_t i = 0; i < n->nkids; i++) {
        bson_free(n->kids[i].name);
        unode_free(n->kids[i].node);
    }
    bson_free(n->kids);
    unode_free(n->positional);
    bson_free(n->path);
    bson_free(n->spec_name);
    if (n->kind == UN_LEAF) {
        bson_value_destroy(&n->arg);
    }
    bson_free(n->vals);
    bson_destroy(n->sort_pattern);
    matcher_destroy(n->matcher);
    bson_free(n->bits);
    bson_free(n->rename_from);
    bson_free(n);
}

static unode_t *unode_new(unode_kind_t kind)
{
    unode_t *n = bson_malloc0(sizeof *n);
    n->kind = kind;
    return n;
}

static unode_t *unode_get(const unode_t *n, const char *name)
{
    if (n->kind == UN_OBJECT && strcmp(name, "$") == 0) {
        return n->positional;
    }
    for (size_t i = 0; i < n->nkids; i++) {
        if (strcmp(n->kids[i].name, name) == 0) {
            return n->kids[i].node;
        }
    }
    return NULL;
}

static void unode_set(unode_t *n, const char *name, unode_t *child)
{
    if (n->kind == UN_OBJECT && strcmp(name, "$") == 0) {
        n->positional = child;
        return;
    }
    size_t at = 0;
    while (at < n->nkids && cmp_field_names(n->kids[at].name, name) < 0) {
        at++;
    }
    if (n->nkids == n->cap) {
        n->cap = n->cap ? n->cap * 2 : 4;
        n->kids = bson_realloc(n->kids, n->cap * sizeof *n->kids);
    }
    memmove(n->kids + at + 1, n->kids + at, (n->nkids - at) * sizeof *n->kids);
    n->kids[at].name = bson_strdup(name);
    n->kids[at].node = child;
    n->nkids++;
}

/* "a: 1" for the operator's spec element. */
static void fmt_spec_elem(bson_string_t *s, const char *name, const bson_value_t *v)
{
    bson_string_append(s, name);
    bson_string_append(s, ": ");
    fmt_value(s, v);
}

static bool set_err_spec(dberr_t *err, int code, const char *prefix, const char *name,
                         const bson_value_t *v, const char *suffix)
{
    bson_string_t *s = bson_string_new(prefix);
    fmt_spec_elem(s, name, v);
    bson_string_append(s, suffix);
    dberr_set(err, code, "%s", s->str);
    bson_string_free(s, true);
    return false;
}

/* An integer argument as parseIntegerElementToLong reads it. */
static bool parse_integer_arg(const bson_value_t *v, int64_t *out)
{
    switch (v->value_type) {
    case BSON_TYPE_INT32:
        *out = v->value.v_int32;
        return true;
    case BSON_TYPE_INT64:
        *out = v->value.v_int64;
        return true;
    case BSON_TYPE_DOUBLE:
        if (v->value.v_double != floor(v->value.v_double) || v->value.v_double < -9.2e18 ||
            v->value.v_double > 9.2e18) {
            return false;
        }
        *out = (int64_t)v->value.v_double;
        return true;
    case BSON_TYPE_DECIMAL128: {
        _Decimal128 d;
        memcpy(&d, &v->value.v_decimal128, sizeof d);
        if (!(d == d) || d < (_Decimal128) - 9.2e18DL || d > (_Decimal128)9.2e18DL) {
            return false;
        }
        int64_t i = (int64_t)d;
        if ((_Decimal128)i != d) {
            return false;
        }
        *out = i;
        return true;
    }
    default:
        return false;
    }
}

/* Collects the elements of the array `arr` into leaf->vals (borrowed). */
static void collect_values(unode_t *leaf, const bson_value_t *arr)
{
    bson_t b;
    bson_iter_t it;
    size_t cap = 0;
    if (!bson_init_static(&b, arr->value.v_doc.data, arr->value.v_doc.data_len) ||
        !bson_iter_init(&it, &b)) {
        return;
    }
    while (bson_iter_next(&it)) {
        if (leaf->nvals == cap) {
            cap = cap ? cap * 2 : 4;
            leaf->vals = bson_realloc(leaf->vals, cap * sizeof *leaf->vals);
        }
        leaf->vals[leaf->nvals++] = *bson_iter_value(&it);
    }
}

static bool value_as_doc(const bson_value_t *v, bson_t *out)
{
    return (v->value_type == BSON_TYPE_DOCUMENT || v->value_type == BSON_TYPE_ARRAY) &&
           bson_init_static(out, v->value.v_doc.data, v->value.v_doc.data_len);
}

static bool parse_push(unode_t *leaf, dberr_t *err)
{
    bson_t obj;
    bson_iter_t it;
    bool has_each = false;
    leaf->position = INT64_MAX;
    if (leaf->arg.value_type == BSON_TYPE_DOCUMENT && value_as_doc(&leaf->arg, &obj) &&
        bson_iter_init_find(&it, &obj, "$each")) {
        has_each = true;
    }
    if (!has_each) {
        leaf->vals = bson_malloc(sizeof *leaf->vals);
        leaf->vals[0] = leaf->arg;
        leaf->nvals = 1;
        return true;
    }
    bool seen[4] = {false, false, false, false};
    static const char *const clauses[4] = {"$each", "$slice", "$sort", "$position"};
    bson_iter_init(&it, &obj);
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        int c = -1;
        for (int i = 0; i < 4; i++) {
            if (strcmp(k, clauses[i]) == 0) {
                c = i;
            }
        }
        if (c < 0) {
            return dberr_set(err, DBERR_BAD_VALUE, "Unrecognized clause in $push: %s", k);
        }
        if (seen[c]) {
            return dberr_set(err, DBERR_BAD_VALUE, "Only one %s is supported.", k);
        }
        seen[c] = true;
        const bson_value_t *v = bson_iter_value(&it);
        if (c == 0) {
            if (v->value_type != BSON_TYPE_ARRAY) {
                return dberr_set(
                    err, DBERR_BAD_VALUE,
                    "The argument to $each in $push must be an array but it was of type: %s",
                    shellfmt_type_name(v->value_type));
            }
            collect_values(leaf, v);
        } else if (c == 1) {
            if (!parse_integer_arg(v, &leaf->slice)) {
                return dberr_set(
                    err, DBERR_BAD_VALUE,
                    "The value for $slice must be an integer value but was given type: %s",
                    shellfmt_type_name(v->value_type));
            }
            leaf->has_slice = true;
        } else if (c == 2) {
            if (v->value_type == BSON_TYPE_DOCUMENT) {
                bson_t pat;
                bson_iter_t pi;
                if (!value_as_doc(v, &pat) || bson_count_keys(&pat) == 0) {
                    return dberr_set(
                        err, DBERR_BAD_VALUE,
                        "The $sort pattern is empty when it should be a set of fields.");
                }
                bson_iter_init(&pi, &pat);
                while (bson_iter_next(&pi)) {
                    const bson_value_t *pv = bson_iter_value(&pi);
                    double d = compare_is_number(pv) ? compare_to_double(pv) : 0;
                    if (d != 1 && d != -1) {
                        return dberr_set(err, DBERR_BAD_VALUE,
                                         "The $sort element value must be either 1 or -1");
                    }
                    const char *f = bson_iter_key(&pi);
                    if (!*f) {
                        return dberr_set(err, DBERR_BAD_VALUE, "The $sort field cannot be empty");
                    }
                    size_t fl = strlen(f);
                    if (f[0] == '.' || f[fl - 1] == '.' || strstr(f, "..")) {
                        return dberr_set(
                            err, DBERR_BAD_VALUE,
                            "The $sort field is a dotted field but has an empty part: %s", f);
                    }
                }
                leaf->sort_mode = 2;
                leaf->sort_pattern = bson_copy(&pat);
            } else if (compare_is_number(v)) {
                double d = compare_to_double(v);
                if (d != 1 && d != -1) {
                    return dberr_set(err, DBERR_BAD_VALUE,
                                     "The $sort element value must be either 1 or -1");
                }
                leaf->sort_mode = 1;
                leaf->sort_dir = d < 0 ? -1 : 1;
            } else {
                return dberr_set(err, DBERR_BAD_VALUE,
                                 "The $sort is invalid: use 1/-1 to sort the whole element, or "
                                 "{field:1/-1} to sort embedded fields");
            }
        } else {
            if (!parse_integer_arg(v, &leaf->position)) {
                return dberr_set(
                    err, DBERR_BAD_VALUE,
                    "The value for $position must be an integer value, not of type: %s",
                    shellfmt_type_name(v->value_type));
            }
        }
    }
    return true;
}

static bool parse_add_to_set(unode_t *leaf, dberr_t *err)
{
    bson_t obj;
    bson_iter_t it;
    if (leaf->arg.value_type == BSON_TYPE_DOCUMENT && value_as_doc(&leaf->arg, &obj) &&
        bson_iter_init(&it, &obj) && bson_iter_next(&it) &&
        strcmp(bson_iter_key(&it), "$each") == 0) {
        const bson_value_t *each = bson_iter_value(&it);
        if (each->value_type != BSON_TYPE_ARRAY) {
            return dberr_set(
                err, DBERR_TYPE_MISMATCH,
                "The argument to $each in $addToSet must be an array but it was of type %s",
                shellfmt_type_name(each->value_type));
        }
        if (bson_count_keys(&obj) > 1) {
            bson_string_t *s =
                bson_string_new("Found unexpected fields after $each in $addToSet: ");
            fmt_value(s, &leaf->arg);
            dberr_set(err, DBERR_BAD_VALUE, "%s", s->str);
            bson_string_free(s, true);
            return false;
        }
        collect_values(leaf, each);
        /* Deduplicate, keeping the first occurrence. */
        size_t out = 0;
        for (size_t i = 0; i < leaf->nvals; i++) {
            bool dup = false;
            for (size_t j = 0; j < out && !dup; j++) {
                dup = compare_values(&leaf->vals[j], &leaf->vals[i]) == 0;
            }
            if (!dup) {
                leaf->vals[out++] = leaf->vals[i];
            }
        }
        leaf->nvals = out;
        return true;
    }
    leaf->vals = bson_malloc(sizeof *leaf->vals);
    leaf->vals[0] = leaf->arg;
    leaf->nvals = 1;
    return true;
}

/* Query operators that take a path ({$gt: ...}); a $pull condition starting
 * with one is matched against each element wrapped as {x: element}. */
static bool is_path_accepting_keyword(const char *k)
{
    static const char *const kw[] = {
        "$eq",         "$gt",           "$gte",        "$lt",
        "$lte",        "$ne",           "$in",         "$nin",
        "$exists",     "$type",         "$mod",        "$regex",
        "$options",    "$size",         "$all",        "$elemMatch",
        "$not",        "$within",       "$geoWithin",  "$geoIntersects",
        "$near",       "$nearSphere",   "$bitsAllSet", "$bitsAllClear",
        "$bitsAnySet", "$bitsAnyClear", "$jsonSchema", "$_internalSchemaType",
    };
    for (size_t i = 0; i < sizeof kw / sizeof kw[0]; i++) {
        if (strcmp(k, kw[i]) == 0) {
            return true;
        }
    }
    return false;
}

static bool parse_pull(unode_t *leaf, dberr_t *err)
{
    bson_t obj;
    bson_iter_t it;
    if (leaf->arg.value_type == BSON_TYPE_DOCUMENT && value_as_doc(&leaf->arg, &obj)) {
        bool first_kw = bson_iter_init(&it, &obj) && bson_iter_next(&it) &&
                        is_path_accepting_keyword(bson_iter_key(&it));
        if (!first_kw) {
            leaf->pull_kind = PULL_OBJECT;
            leaf->matcher = matcher_new(&obj, err);
            return leaf->matcher != NULL;
        }
    }
    if (leaf->arg.value_type == BSON_TYPE_DOCUMENT || leaf->arg.value_type == BSON_TYPE_REGEX) {
        bson_t wrapped = BSON_INITIALIZER;
        bson_append_value(&wrapped, "x", 1, &leaf->arg);
        leaf->pull_kind = PULL_WRAPPED;
        leaf->matcher = matcher_new(&wrapped, err);
        bson_destroy(&wrapped);
        return leaf->matcher != NULL;
    }
    leaf->pull_kind = PULL_EQUAL;
    return true;
}

static bool parse_bit(unode_t *leaf, dberr_t *err)
{
    bson_t obj;
    bson_iter_t it;
    if (leaf->arg.value_type != BSON_TYPE_DOCUMENT || !value_as_doc(&leaf->arg, &obj)) {
        return dberr_set(
            err, DBERR_BAD_VALUE,
            "The $bit modifier is not compatible with a %s. You must pass in an embedded "
            "document: {$bit: {field: {and/or/xor: #}}",
            shellfmt_type_name(leaf->arg.value_type));
    }
    size_t n = bson_count_keys(&obj);
    leaf->bits = bson_malloc0((n ? n : 1) * sizeof *leaf->bits);
    bson_iter_init(&it, &obj);
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        const bson_value_t *v = bson_iter_value(&it);
        char op;
        if (strcmp(k, "and") == 0) {
            op = 'a';
        } else if (strcmp(k, "or") == 0) {
            op = 'o';
        } else if (strcmp(k, "xor") == 0) {
            op = 'x';
        } else {
            bson_string_t *s =
                bson_string_new("The $bit modifier only supports 'and', 'or', and 'xor', not '");
            bson_string_append_printf(s, "%s' which is an unknown operator: {", k);
            fmt_spec_elem(s, k, v);
            bson_string_append(s, "}");
            dberr_set(err, DBERR_BAD_VALUE, "%s", s->str);
            bson_string_free(s, true);
            return false;
        }
        if (v->value_type != BSON_TYPE_INT32 && v->value_type != BSON_TYPE_INT64) {
            bson_string_t *s =
                bson_string_new("The $bit modifier field must be an Integer(32/64 bit); a '");
            bson_string_append_printf(s, "%s' is not supported here: {",
                                      shellfmt_type_name(v->value_type));
            fmt_spec_elem(s, k, v);
            bson_string_append(s, "}");
            dberr_set(err, DBERR_BAD_VALUE, "%s", s->str);
            bson_string_free(s, true);
            return false;
        }
        leaf->bits[leaf->nbits].op = op;
        leaf->bits[leaf->nbits].operand = snum_from(v);
        leaf->nbits++;
    }
    if (leaf->nbits == 0) {
        return dberr_set(err, DBERR_BAD_VALUE,
                         "You must pass in at least one bitwise operation. The format is: "
                         "{$bit: {field: {and/or/xor: #}}");
    }
    return true;
}

static bool parse_current_date(unode_t *leaf, dberr_t *err)
{
    const bson_value_t *v = &leaf->arg;
    if (v->value_type == BSON_TYPE_BOOL) {
        leaf->ts = false;
        return true;
    }
    if (v->value_type == BSON_TYPE_DOCUMENT) {
        bson_t obj;
        bson_iter_t it;
        bool found = false;
        value_as_doc(v, &obj);
        bson_iter_init(&it, &obj);
        while (bson_iter_next(&it)) {
            if (strcmp(bson_iter_key(&it), "$type") == 0) {
                if (BSON_ITER_HOLDS_UTF8(&it)) {
                    const char *t = bson_iter_utf8(&it, NULL);
                    if (strcmp(t, "date") == 0) {
                        leaf->ts = false;
                        found = true;
                    } else if (strcmp(t, "timestamp") == 0) {
                        leaf->ts = true;
                        found = true;
                    }
                }
                if (!found) {
                    return dberr_set(
                        err, DBERR_BAD_VALUE,
                        "The '$type' string field is required to be 'date' or 'timestamp': "
                        "{$currentDate: {field : {$type: 'date'}}}");
                }
            } else {
                return dberr_set(err, DBERR_BAD_VALUE, "Unrecognized $currentDate option: %s",
                                 bson_iter_key(&it));
            }
        }
        if (!found) {
            return dberr_set(err, DBERR_BAD_VALUE,
                             "The '$type' string field is required to be 'date' or 'timestamp': "
                             "{$currentDate: {field : {$type: 'date'}}}");
        }
        return true;
    }
    return dberr_set(
        err, DBERR_BAD_VALUE,
        "%s is not valid type for $currentDate. Please use a boolean ('true') or a $type "
        "expression ({$type: 'timestamp/date'}).",
        shellfmt_type_name(v->value_type));
}

/* Checks `from`/`to` of a $rename (RenameNode::init). */
static bool parse_rename(unode_t *leaf, const char *from, const char *to, dberr_t *err)
{
    if (strcmp(from, to) == 0) {
        return set_err_spec(err, DBERR_BAD_VALUE,
                            "The source and target field for $rename must differ: ", from,
                            &leaf->arg, "");
    }
    size_t lf = strlen(from), lt = strlen(to);
    if ((lf < lt && strncmp(from, to, lf) == 0 && to[lf] == '.') ||
        (lt < lf && strncmp(from, to, lt) == 0 && from[lt] == '.')) {
        return set_err_spec(
            err, DBERR_BAD_VALUE,
            "The source and target field for $rename must not be on the same path: ", from,
            &leaf->arg, "");
    }
    size_t n;
    bool dynamic = false;
    char **parts = split_path(from, &n);
    for (size_t i = 0; i < n; i++) {
        dynamic = dynamic || strcmp(parts[i], "$") == 0 || is_array_filter_ident(parts[i]);
    }
    free_parts(parts, n);
    if (dynamic) {
        return dberr_set(err, DBERR_BAD_VALUE,
                         "The source field for $rename may not be dynamic: %s", from);
    }
    parts = split_path(to, &n);
    for (size_t i = 0; i < n; i++) {
        dynamic = dynamic || strcmp(parts[i], "$") == 0 || is_array_filter_ident(parts[i]);
    }
    free_parts(parts, n);
    if (dynamic) {
        return dberr_set(err, DBERR_BAD_VALUE,
                         "The destination field for $rename may not be dynamic: %s", to);
    }
    leaf->rename_from = bson_strdup(from);
    return true;
}

/* Builds the leaf for one operator entry (the modifier's init()). */
static unode_t *make_leaf(upd_op_t op, const char *spec_name, const char *path,
                          const bson_value_t *v, dberr_t *err)
{
    unode_t *leaf = unode_new(UN_LEAF);
    bool ok = true;
    leaf->op = op;
    leaf->path = bson_strdup(path);
    leaf->spec_name = bson_strdup(spec_name);
    bson_value_copy(v, &leaf->arg);
    switch (op) {
    case OP_INC:
    case OP_MUL:
        if (!compare_is_number(v)) {
            bson_string_t *s = bson_string_new(NULL);
            bson_string_append_printf(s, "Cannot %s with non-numeric argument: {",
                                      op == OP_INC ? "increment" : "multiply");
            fmt_spec_elem(s, spec_name, v);
            bson_string_append(s, "}");
            dberr_set(err, DBERR_TYPE_MISMATCH, "%s", s->str);
            bson_string_free(s, true);
            ok = false;
        }
        break;
    case OP_PUSH:
        ok = parse_push(leaf, err);
        break;
    case OP_ADD_TO_SET:
        ok = parse_add_to_set(leaf, err);
        break;
    case OP_PULL:
        ok = parse_pull(leaf, err);
        break;
    case OP_PULL_ALL:
        if (v->value_type != BSON_TYPE_ARRAY) {
            dberr_set(err, DBERR_BAD_VALUE,
                      "$pullAll requires an array argument but was given a %s",
                      shellfmt_type_name(v->value_type));
            ok = false;
        } else {
            collect_values(leaf, v);
        }
        break;
    case OP_POP: {
        int64_t p;
        if (!parse_integer_arg(v, &p)) {
            ok = set_err_spec(err, DBERR_FAILED_TO_PARSE, "Expected a number in: ", spec_name, v,
                              "");
        } else if (p != 1 && p != -1) {
            dberr_set(err, DBERR_FAILED_TO_PARSE, "$pop expects 1 or -1, found: %" PRId64, p);
            ok = false;
        }
        leaf->pop_front = ok && p < 0;
        break;
    }
    case OP_BIT:
        ok = parse_bit(leaf, err);
        break;
    case OP_CURRENT_DATE:
        ok = parse_current_date(leaf, err);
        break;
    case OP_RENAME:
        ok = parse_rename(leaf, spec_name, path, err);
        break;
    default:
        break;
    }
    if (!ok) {
        unode_free(leaf);
        return NULL;
    }
    return leaf;
}

/* Operators that may create the path they name (a top-level `$name` would be
 * stored and is refused as mongod refuses it on storage). */
static bool op_creates(upd_op_t op)
{
    switch (op) {
    case OP_SET:
    case OP_INC:
    case OP_MUL:
    case OP_MIN:
    case OP_MAX:
    case OP_RENAME:
    case OP_CURRENT_DATE:
    case OP_PUSH:
    case OP_ADD_TO_SET:
    case OP_BIT:
        return true;
    default:
        return false;
    }
}

static const afilter_t *find_filter(const updater_t *u, const char *id)
{
    for (size_t i = 0; i < u->nfilters; i++) {
        if (strcmp(u->filters[i].id, id) == 0) {
            return &u->filters[i];
        }
    }
    return NULL;
}

/* Identifier of "$[id]" into `out` (owned), validating it (parseArrayFilterIdentifier). */
static bool parse_filter_ident(const updater_t *u, const char *comp, size_t pos, const char *path,
                               bool *used, char **out, dberr_t *err)
{
    if (pos == 0) {
        return dberr_set(
            err, DBERR_BAD_VALUE,
            "Cannot have array filter identifier (i.e. '$[<id>]') element in the first "
            "position in path '%s'",
            path);
    }
    char *id = bson_strndup(comp + 2, strlen(comp) - 3);
    if (*id) {
        const afilter_t *f = find_filter(u, id);
        if (!f) {
            dberr_set(err, DBERR_BAD_VALUE,
                      "No array filter found for identifier '%s' in path '%s'", id, path);
            bson_free(id);
            return false;
        }
        used[f - u->filters] = true;
    }
    *out = id;
    return true;
}

/* UpdateObjectNode::parseAndMerge: adds the leaf for `path` to the tree. */
static bool parse_and_merge(updater_t *u, upd_op_t op, const char *spec_name, const char *path,
                            const bson_value_t *v, bool *used, dberr_t *err)
{
    size_t n = 0;
    char **parts = NULL;
    unode_t *leaf = NULL;
    char *child_name = NULL;
    bool ok = false;

    if (!*path) {
        dberr_set(err, DBERR_EMPTY_FIELD_NAME, "An empty update path is not valid.");
        goto cleanup;
    }
    parts = split_path(path, &n);
    for (size_t i = 0; i < n; i++) {
        if (!*parts[i]) {
            dberr_set(err, DBERR_EMPTY_FIELD_NAME,
                      "The update path '%s' contains an empty field name, which is not allowed.",
                      path);
            goto cleanup;
        }
    }
    if (n > UPD_MAX_DEPTH) {
        dberr_set(err, DBERR_BAD_VALUE, "The update path '%s' is too deep", path);
        goto cleanup;
    }
    size_t npos = 0, first_pos = 0;
    for (size_t i = 0; i < n; i++) {
        if (strcmp(parts[i], "$") == 0) {
            if (npos++ == 0) {
                first_pos = i;
            }
        }
    }
    if (npos > 1) {
        dberr_set(err, DBERR_BAD_VALUE,
                  "Too many positional (i.e. '$') elements found in path '%s'", path);
        goto cleanup;
    }
    if (npos == 1 && first_pos == 0) {
        dberr_set(err, DBERR_BAD_VALUE,
                  "Cannot have positional (i.e. '$') element in the first position in path '%s'",
                  path);
        goto cleanup;
    }
    leaf = make_leaf(op, spec_name, path, v, err);
    if (!leaf) {
        goto cleanup;
    }

    unode_t *cur = u->root;
    for (size_t i = 0; i + 1 < n; i++) {
        bson_free(child_name);
        child_name = NULL;
        if (is_array_filter_ident(parts[i])) {
            if (!parse_filter_ident(u, parts[i], i, path, used, &child_name, err)) {
                goto cleanup;
            }
        } else {
            child_name = bson_strdup(parts[i]);
        }
        unode_t *child = unode_get(cur, child_name);
        bool want_array = is_array_filter_ident(parts[i + 1]);
        if (child) {
            if ((want_array && child->kind != UN_ARRAY) ||
                (!want_array && child->kind != UN_OBJECT)) {
                bson_string_t *s = bson_string_new(NULL);
                for (size_t j = 0; j <= i; j++) {
                    if (j) {
                        bson_string_append_c(s, '.');
                    }
                    bson_string_append(s, parts[j]);
                }
                dberr_set(err, DBERR_CONFLICTING_UPDATE_OPERATORS,
                          "Updating the path '%s' would create a conflict at '%s'", path, s->str);
                bson_string_free(s, true);
                goto cleanup;
            }
        } else {
            child = unode_new(want_array ? UN_ARRAY : UN_OBJECT);
            unode_set(cur, child_name, child);
        }
        cur = child;
    }
    bson_free(child_name);
    child_name = NULL;
    if (is_array_filter_ident(parts[n - 1])) {
        if (!parse_filter_ident(u, parts[n - 1], n - 1, path, used, &child_name, err)) {
            goto cleanup;
        }
    } else {
        child_name = bson_strdup(parts[n - 1]);
    }
    if (unode_get(cur, child_name)) {
        dberr_set(err, DBERR_CONFLICTING_UPDATE_OPERATORS,
                  "Updating the path '%s' would create a conflict at '%s'", path, path);
        goto cleanup;
    }
    if (op_creates(op) && parts[0][0] == '$') {
        dberr_set(err, DBERR_DOLLAR_PREFIXED_FIELD_NAME,
                  "The dollar ($) prefixed field '%s' in '%s' is not allowed in the context of an "
                  "update's replacement document. Consider using an aggregation pipeline with "
                  "$replaceWith.",
                  parts[0], path);
        goto cleanup;
    }
    unode_set(cur, child_name, leaf);
    leaf = NULL;
    ok = true;

cleanup:
    bson_free(child_name);
    unode_free(leaf);
    free_parts(parts, n);
    return ok;
}

/* ------------------------------------------------------------------------
 * Array filters
 * ---------------------------------------------------------------------- */

/* Collects the identifiers (first path components) a filter names, looking
 * through $and/$or/$nor. */
static bool filter_idents(const bson_t *f, char **first, char **second)
{
    bson_iter_t it;
    if (!bson_iter_init(&it, f)) {
        return false;
    }
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (strcmp(k, "$and") == 0 || strcmp(k, "$or") == 0 || strcmp(k, "$nor") == 0) {
            bson_iter_t ai;
            if (BSON_ITER_HOLDS_ARRAY(&it) && bson_iter_recurse(&it, &ai)) {
                while (bson_iter_next(&ai)) {
                    bson_t sub;
                    uint32_t len;
                    const uint8_t *data;
                    if (!BSON_ITER_HOLDS_DOCUMENT(&ai)) {
                        continue;
                    }
                    bson_iter_document(&ai, &len, &data);
                    if (bson_init_static(&sub, data, len)) {
                        filter_idents(&sub, first, second);
                    }
                }
            }
            continue;
        }
        if (k[0] == '$') {
            continue;
        }
        const char *dot = strchr(k, '.');
        char *id = dot ? bson_strndup(k, (size_t)(dot - k)) : bson_strdup(k);
        if (!*first) {
            *first = id;
        } else if (strcmp(*first, id) != 0 && !*second) {
            *second = id;
        } else {
            bson_free(id);
        }
    }
    return true;
}

static bool valid_ident(const char *id)
{
    if (!(id[0] >= 'a' && id[0] <= 'z')) {
        return false;
    }
    for (const char *p = id; *p; p++) {
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9'))) {
            return false;
        }
    }
    return true;
}

static bool parse_array_filters(updater_t *u, const bson_t *array_filters, dberr_t *err)
{
    bson_iter_t it;
    size_t n = bson_count_keys(array_filters);
    u->filters = bson_malloc0((n ? n : 1) * sizeof *u->filters);
    if (!bson_iter_init(&it, array_filters)) {
        return dberr_set(err, DBERR_FAILED_TO_PARSE, "arrayFilters must be an array of documents");
    }
    while (bson_iter_next(&it)) {
        bson_t f;
        uint32_t len;
        const uint8_t *data;
        char *first = NULL, *second = NULL;
        if (!BSON_ITER_HOLDS_DOCUMENT(&it)) {
            return dberr_set(
                err, DBERR_TYPE_MISMATCH,
                "BSON field 'update.updates.arrayFilters' is the wrong type '%s', expected "
                "type 'object'",
                shellfmt_type_name(bson_iter_type(&it)));
        }
        bson_iter_document(&it, &len, &data);
        if (!bson_init_static(&f, data, len)) {
            return dberr_set(err, DBERR_FAILED_TO_PARSE, "invalid array filter");
        }
        filter_idents(&f, &first, &second);
        if (!first) {
            bson_free(second);
            return dberr_set(
                err, DBERR_FAILED_TO_PARSE,
                "Cannot use an expression without a top-level field name in arrayFilters");
        }
        if (second) {
            dberr_set(
                err, DBERR_FAILED_TO_PARSE,
                "Error parsing array filter :: caused by :: Expected a single top-level field "
                "name, found '%s' and '%s'",
                first, second);
            bson_free(first);
            bson_free(second);
            return false;
        }
        if (!valid_ident(first)) {
            dberr_set(
                err, DBERR_BAD_VALUE,
                "Error parsing array filter :: caused by :: The top-level field name must be an "
                "alphanumeric string beginning with a lowercase letter, found '%s'",
                first);
            bson_free(first);
            return false;
        }
        if (find_filter(u, first)) {
            dberr_set(err, DBERR_FAILED_TO_PARSE,
                      "Found multiple array filters with the same top-level field name %s", first);
            bson_free(first);
            return false;
        }
        u->filters[u->nfilters].id = first;
        u->filters[u->nfilters].m = matcher_new(&f, err);
        u->nfilters++;
        if (!u->filters[u->nfilters - 1].m) {
            return false;
        }
    }
    return true;
}

static bool filter_matches(const afilter_t *f, const mnode_t *elem)
{
    bson_t wrapped = BSON_INITIALIZER;
    mnode_write(&wrapped, f->id, elem);
    bool m = matcher_matches(f->m, &wrapped, NULL);
    bson_destroy(&wrapped);
    return m;
}

/* ------------------------------------------------------------------------
 * Parsing the update
 * ---------------------------------------------------------------------- */

static bool parse_operators(updater_t *u, const bson_t *spec, dberr_t *err)
{
    bson_iter_t it;
    bool *used = bson_malloc0((u->nfilters ? u->nfilters : 1) * sizeof *used);
    bool ok = false;

    u->root = unode_new(UN_OBJECT);
    bson_iter_init(&it, spec);
    while (bson_iter_next(&it)) {
        const char *opname = bson_iter_key(&it);
        int found = -1;
        for (size_t i = 0; i < sizeof upd_ops / sizeof upd_ops[0]; i++) {
            if (strcmp(opname, upd_ops[i].name) == 0) {
                found = (int)i;
            }
        }
        if (found < 0) {
            dberr_set(
                err, DBERR_FAILED_TO_PARSE,
                "Unknown modifier: %s. Expected a valid update modifier or pipeline-style update "
                "specified as an array",
                opname);
            goto cleanup;
        }
        if (!BSON_ITER_HOLDS_DOCUMENT(&it)) {
            bson_string_t *s = bson_string_new(NULL);
            bson_string_append_printf(
                s,
                "Modifiers operate on fields but we found type %s instead. For "
                "example: {$mod: {<field>: ...}} not {",
                shellfmt_type_name(bson_iter_type(&it)));
            fmt_spec_elem(s, opname, bson_iter_value(&it));
            bson_string_append(s, "}");
            dberr_set(err, DBERR_FAILED_TO_PARSE, "%s", s->str);
            bson_string_free(s, true);
            goto cleanup;
        }
        upd_op_t op = upd_ops[found].op;
        bson_iter_t fi;
        bson_iter_recurse(&it, &fi);
        while (bson_iter_next(&fi)) {
            const char *field = bson_iter_key(&fi);
            const bson_value_t *v = bson_iter_value(&fi);
            if (op == OP_RENAME) {
                if (!parse_and_merge(u, OP_PLACEHOLDER, field, field, v, used, err)) {
                    goto cleanup;
                }
                if (v->value_type != BSON_TYPE_UTF8) {
                    set_err_spec(err, DBERR_BAD_VALUE,
                                 "The 'to' field for $rename must be a string: ", field, v, "");
                    goto cleanup;
                }
                if (!parse_and_merge(u, OP_RENAME, field, v->value.v_utf8.str, v, used, err)) {
                    goto cleanup;
                }
            } else if (!parse_and_merge(u, op, field, field, v, used, err)) {
                goto cleanup;
            }
        }
    }
    for (size_t i = 0; i < u->nfilters; i++) {
        if (!used[i]) {
            bson_string_t *s = bson_string_new(NULL);
            bson_value_t sv;
            sv.value_type = BSON_TYPE_DOCUMENT;
            sv.value.v_doc.data = (uint8_t *)bson_get_data(spec);
            sv.value.v_doc.data_len = spec->len;
            fmt_value(s, &sv);
            dberr_set(err, DBERR_FAILED_TO_PARSE,
                      "The array filter for identifier '%s' was not used in the update %s",
                      u->filters[i].id, s->str);
            bson_string_free(s, true);
            goto cleanup;
        }
    }
    ok = true;

cleanup:
    bson_free(used);
    return ok;
}

static bool check_replacement(const bson_t *doc, dberr_t *err)
{
    bson_iter_t it;
    if (!bson_iter_init(&it, doc)) {
        return dberr_set(err, DBERR_INVALID_BSON, "invalid replacement document");
    }
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (k[0] == '$') {
            return dberr_set(
                err, DBERR_DOLLAR_PREFIXED_FIELD_NAME,
                "The dollar ($) prefixed field '%s' in '%s' is not allowed in the context of "
                "an update's replacement document. Consider using an aggregation pipeline "
                "with $replaceWith.",
                k, k);
        }
        if (strcmp(k, "_id") == 0) {
            bson_type_t t = bson_iter_type(&it);
            if (t == BSON_TYPE_ARRAY || t == BSON_TYPE_REGEX || t == BSON_TYPE_UNDEFINED) {
                return dberr_set(err, DBERR_INVALID_ID_FIELD,
                                 "The '_id' value cannot be of type %s", shellfmt_type_name(t));
            }
        }
    }
    return true;
}

updater_t *updater_new(const bson_iter_t *spec, const bson_t *array_filters, dberr_t *err)
{
    return updater_new_let(spec, array_filters, NULL, err);
}

updater_t *updater_new_let(const bson_iter_t *spec, const bson_t *array_filters, const bson_t *let,
                           dberr_t *err)
{
    updater_t *u = bson_malloc0(sizeof *u);
    bson_t doc;
    uint32_t len;
    const uint8_t *data;

    if (BSON_ITER_HOLDS_ARRAY(spec)) {
        u->kind = UPDATER_PIPELINE;
        if (array_filters && bson_count_keys(array_filters) > 0) {
            dberr_set(err, DBERR_FAILED_TO_PARSE,
                      "arrayFilters may not be specified for pipeline-syle updates");
            goto fail;
        }
        u->pipeline = pipeline_new(spec, PIPELINE_UPDATE, let, err);
        if (!u->pipeline) {
            goto fail;
        }
        return u;
    }
    if (!BSON_ITER_HOLDS_DOCUMENT(spec)) {
        dberr_set(err, DBERR_FAILED_TO_PARSE,
                  "Update argument must be either an object or an array");
        goto fail;
    }
    bson_iter_document(spec, &len, &data);
    if (!bson_init_static(&doc, data, len)) {
        dberr_set(err, DBERR_INVALID_BSON, "invalid update document");
        goto fail;
    }
    if (depth_exceeds(data, len, 1, UPD_MAX_INPUT_DEPTH)) {
        dberr_set(err, DBERR_OVERFLOW, "Document exceeds maximum nesting depth of %d",
                  UPD_MAX_STORED_DEPTH);
        goto fail;
    }
    bson_iter_t first;
    if (bson_iter_init(&first, &doc) && bson_iter_next(&first) && bson_iter_key(&first)[0] == '$') {
        u->kind = UPDATER_OPERATORS;
        if (array_filters && !parse_array_filters(u, array_filters, err)) {
            goto fail;
        }
        if (!parse_operators(u, &doc, err)) {
            goto fail;
        }
        return u;
    }
    u->kind = UPDATER_REPLACEMENT;
    if (!check_replacement(&doc, err)) {
        goto fail;
    }
    u->replacement = bson_copy(&doc);
    return u;

fail:
    updater_destroy(u);
    return NULL;
}

void updater_destroy(updater_t *u)
{
    if (!u) {
        return;
    }
    unode_free(u->root);
    bson_destroy(u->replacement);
    pipeline_destroy(u->pipeline);
    for (size_t i = 0; i < u->nfilters; i++) {
        bson_free(u->filters[i].id);
        matcher_destroy(u->filters[i].m);
    }
    bson_free(u->filters);
    bson_free(u);
}

updater_kind_t updater_kind(const updater_t *u)
{
    return u->kind;
}

/* ------------------------------------------------------------------------
 * Applying an operator update
 * ---------------------------------------------------------------------- */

typedef struct actx {
    const updater_t *u;
    mnode_t *root;
    bool is_insert;
    const char *matched; /* positional match as a field name, or NULL */
    char matched_buf[24];
    int64_t now_ms;
    pstack_t taken;    /* path components that exist */
    pstack_t create;   /* path components still to be created */
    char *id_path;     /* first update path that touched _id (for the error message) */
    bool id_by_rename; /* _id was the source of a $rename */
    dberr_t *err;
} actx_t;

static bool apply_nodes(actx_t *c, unode_t **nodes, size_t k, mnode_t *element);

static void note_id_path(actx_t *c)
{
    if (c->id_path) {
        return;
    }
    const char *first =
        c->taken.n ? ps_at(&c->taken, 0) : (c->create.n ? ps_at(&c->create, 0) : "");
    if (strcmp(first, "_id") != 0) {
        return;
    }
    bson_string_t *s = bson_string_new(NULL);
    ps_join(s, &c->taken, 0);
    if (c->create.n) {
        if (c->taken.n) {
            bson_string_append_c(s, '.');
        }
        ps_join(s, &c->create, 0);
    }
    c->id_path = bson_string_free(s, false);
}

static void id_string(actx_t *c, bson_string_t *s, bool no_id_text)
{
    mnode_t *id = mnode_find(c->root, "_id");
    if (id) {
        fmt_mnode(s, "_id", id);
    } else if (no_id_text) {
        bson_string_append(s, "no id");
    }
}

/* The value a creating modifier stores at a new path. Returns false on error;
 * sets *skip when nothing is created. `out` owns its data. */
static bool new_value(actx_t *c, const unode_t *leaf, bson_value_t *out, mnode_t **out_node);

static int sort_cmp_pattern(const bson_t *pattern, const mnode_t *a, const mnode_t *b)
{
    bson_t da = BSON_INITIALIZER, db = BSON_INITIALIZER;
    bson_t *pa = &da, *pb = &db;
    bson_t wa, wb;
    if (a->type == BSON_TYPE_DOCUMENT) {
        mnode_write_kids(&da, a);
    } else {
        bson_init(&wa);
        mnode_write(&wa, "", a);
        bson_destroy(&da);
        da = wa;
    }
    if (b->type == BSON_TYPE_DOCUMENT) {
        mnode_write_kids(&db, b);
    } else {
        bson_init(&wb);
        mnode_write(&wb, "", b);
        bson_destroy(&db);
        db = wb;
    }
    int result = 0;
    bson_iter_t pi;
    bson_iter_init(&pi, pattern);
    while (result == 0 && bson_iter_next(&pi)) {
        bson_iter_t ia, ib;
        bson_value_t null_v;
        null_v.value_type = BSON_TYPE_NULL;
        const bson_value_t *va =
            path_get(pa, bson_iter_key(&pi), &ia) ? bson_iter_value(&ia) : &null_v;
        const bson_value_t *vb =
            path_get(pb, bson_iter_key(&pi), &ib) ? bson_iter_value(&ib) : &null_v;
        int c = compare_values(va, vb);
        if (compare_to_double(bson_iter_value(&pi)) < 0) {
            c = -c;
        }
        result = c;
    }
    bson_destroy(&da);
    bson_destroy(&db);
    return result;
}

static int sort_cmp(const unode_t *leaf, const mnode_t *a, const mnode_t *b)
{
    if (leaf->sort_mode == 1) {
        bson_value_t vb;
        bson_t *tmp;
        mnode_value(b, &vb, &tmp);
        int c = mnode_compare_value(a, &vb);
        bson_destroy(tmp);
        return leaf->sort_dir < 0 ? -c : c;
    }
    return sort_cmp_pattern(leaf->sort_pattern, a, b);
}

/* Stable merge sort of the kids of `arr`. */
static void sort_kids(const unode_t *leaf, mnode_t *arr)
{
    size_t n = arr->nkids;
    if (n < 2) {
        return;
    }
    mnode_t **tmp = bson_malloc(n * sizeof *tmp);
    for (size_t width = 1; width < n; width *= 2) {
        for (size_t lo = 0; lo < n; lo += 2 * width) {
            size_t mid = lo + width < n ? lo + width : n;
            size_t hi = lo + 2 * width < n ? lo + 2 * width : n;
            size_t i = lo, j = mid, k = lo;
            while (i < mid && j < hi) {
                if (sort_cmp(leaf, arr->kids[j], arr->kids[i]) < 0) {
                    tmp[k++] = arr->kids[j++];
                } else {
                    tmp[k++] = arr->kids[i++];
                }
            }
            while (i < mid) {
                tmp[k++] = arr->kids[i++];
            }
            while (j < hi) {
                tmp[k++] = arr->kids[j++];
            }
        }
        memcpy(arr->kids, tmp, n * sizeof *tmp);
    }
    bson_free(tmp);
}

/* PushNode::performPush on an array node. */
static void perform_push(const unode_t *leaf, mnode_t *arr)
{
    int64_t size = (int64_t)arr->nkids;
    int64_t pos = leaf->position;
    size_t at;
    if (leaf->nvals > 0) {
        if (size == 0 || pos > size) {
            at = (size_t)size;
        } else if (pos > 0) {
            at = (size_t)pos;
        } else if (pos < 0 && -pos < size) {
            at = (size_t)(size + pos);
        } else {
            at = 0;
        }
        for (size_t i = 0; i < leaf->nvals; i++) {
            mnode_t *k = mnode_new(NULL);
            mnode_fill_from_value(k, &leaf->vals[i]);
            mnode_insert(arr, at + i, k);
        }
    }
    if (leaf->sort_mode) {
        sort_kids(leaf, arr);
    }
    if (leaf->has_slice) {
        uint64_t abs_slice = leaf->slice == INT64_MIN
                                 ? (uint64_t)INT64_MAX
                                 : (uint64_t)(leaf->slice < 0 ? -leaf->slice : leaf->slice);
        while ((uint64_t)arr->nkids > abs_slice) {
            mnode_free(mnode_take(arr, leaf->slice >= 0 ? arr->nkids - 1 : 0));
        }
    }
}

static bool pull_matches(const unode_t *leaf, const mnode_t *elem)
{
    if (leaf->pull_kind == PULL_EQUAL) {
        return mnode_compare_value(elem, &leaf->arg) == 0;
    }
    if (leaf->pull_kind == PULL_OBJECT) {
        if (elem->type != BSON_TYPE_DOCUMENT) {
            return false;
        }
        bson_t d = BSON_INITIALIZER;
        mnode_write_kids(&d, elem);
        bool m = matcher_matches(leaf->matcher, &d, NULL);
        bson_destroy(&d);
        return m;
    }
    bson_t w = BSON_INITIALIZER;
    mnode_write(&w, "x", elem);
    bool m = matcher_matches(leaf->matcher, &w, NULL);
    bson_destroy(&w);
    return m;
}

static snum_t apply_bits(const unode_t *leaf, snum_t v)
{
    for (size_t i = 0; i < leaf->nbits; i++) {
        const snum_t *o = &leaf->bits[i].operand;
        bool wide = v.t == BSON_TYPE_INT64 || o->t == BSON_TYPE_INT64;
        int64_t a = snum_i64(&v), b = snum_i64(o), r;
        switch (leaf->bits[i].op) {
        case 'a':
            r = a & b;
            break;
        case 'o':
            r = a | b;
            break;
        default:
            r = a ^ b;
            break;
        }
        if (wide) {
            v.t = BSON_TYPE_INT64;
            v.i64 = r;
        } else {
            v.t = BSON_TYPE_INT32;
            v.i32 = (int32_t)r;
        }
    }
    return v;
}

static void current_date_value(const actx_t *c, const unode_t *leaf, bson_value_t *v)
{
    memset(v, 0, sizeof *v);
    if (leaf->ts) {
        v->value_type = BSON_TYPE_TIMESTAMP;
        v->value.v_timestamp.timestamp = (uint32_t)(c->now_ms / 1000);
        v->value.v_timestamp.increment = 1;
    } else {
        v->value_type = BSON_TYPE_DATE_TIME;
        v->value.v_datetime = c->now_ms;
    }
}

/* Finds the $rename source in the current document (findLongestPrefix). */
static bool rename_find_source(actx_t *c, const char *from, mnode_t **out)
{
    size_t n;
    char **parts = split_path(from, &n);
    mnode_t *cur = c->root;
    bool ok = true;
    *out = NULL;
    for (size_t i = 0; i < n; i++) {
        mnode_t *next = NULL;
        size_t idx;
        if (cur->type == BSON_TYPE_DOCUMENT) {
            next = mnode_find(cur, parts[i]);
        } else if (cur->type == BSON_TYPE_ARRAY && parse_index(parts[i], &idx)) {
            next = idx < cur->nkids ? cur->kids[idx] : NULL;
        } else {
            bson_string_t *s = bson_string_new(NULL);
            char buf[24];
            bson_string_append_printf(s,
                                      "cannot use the part (%s of %s) to traverse the element ({",
                                      i > 0 ? parts[i - 1] : parts[i], from);
            fmt_mnode(s, mnode_field_name(cur, buf, sizeof buf), cur);
            bson_string_append(s, "})");
            dberr_set(c->err, DBERR_PATH_NOT_VIABLE, "%s", s->str);
            bson_string_free(s, true);
            ok = false;
            break;
        }
        if (!next) {
            break;
        }
        cur = next;
        if (i == n - 1) {
            *out = cur;
        }
    }
    free_parts(parts, n);
    return ok;
}

static bool array_ancestor_error(actx_t *c, const char *which, const char *path, const mnode_t *arr)
{
    bson_string_t *s = bson_string_new(NULL);
    char buf[24];
    bson_string_append_printf(s, "The %s field cannot be an array element, '%s' in doc with ",
                              which, path);
    id_string(c, s, true);
    bson_string_append_printf(s, " has an array field called '%s'",
                              mnode_field_name(arr, buf, sizeof buf));
    dberr_set(c->err, DBERR_BAD_VALUE, "%s", s->str);
    bson_string_free(s, true);
    return false;
}

/* Creates c->create under `element` (createPathAt) holding `value` (stolen). */
static bool create_path(actx_t *c, mnode_t *element, mnode_t *value)
{
    const char *first = ps_at(&c->create, 0);
    char buf[24];
    size_t idx = 0;
    if (element->type != BSON_TYPE_DOCUMENT &&
        !(element->type == BSON_TYPE_ARRAY && parse_index(first, &idx))) {
        bson_string_t *s = bson_string_new(NULL);
        bson_string_append_printf(s, "Cannot create field '%s' in element {", first);
        fmt_mnode(s, mnode_field_name(element, buf, sizeof buf), element);
        bson_string_append(s, "}");
        dberr_set(c->err, DBERR_PATH_NOT_VIABLE, "%s", s->str);
        bson_string_free(s, true);
        mnode_free(value);
        return false;
    }
    mnode_t *cur = element;
    size_t i = 0;
    if (element->type == BSON_TYPE_ARRAY) {
        if (idx > element->nkids && idx - element->nkids > UPD_MAX_PADDING) {
            mnode_free(value);
            return dberr_set(c->err, DBERR_BAD_VALUE, "can't backfill more than %d elements",
                             UPD_MAX_PADDING);
        }
        while (element->nkids < idx) {
            mnode_append(element, mnode_new(NULL));
        }
        if (c->create.n == 1) {
            bson_free(value->name);
            value->name = NULL;
            mnode_append(element, value);
            return true;
        }
        mnode_t *obj = mnode_new(NULL);
        obj->type = BSON_TYPE_DOCUMENT;
        mnode_append(element, obj);
        cur = obj;
        i = 1;
    }
    for (; i + 1 < c->create.n; i++) {
        mnode_t *obj = mnode_new(ps_at(&c->create, i));
        obj->type = BSON_TYPE_DOCUMENT;
        mnode_append(cur, obj);
        cur = obj;
    }
    bson_free(value->name);
    value->name = bson_strdup(ps_at(&c->create, c->create.n - 1));
    mnode_append(cur, value);
    return true;
}

/* UpdateLeafNode::checkViability for modifiers that never create. */
static bool check_viability(actx_t *c, mnode_t *element)
{
    size_t idx;
    if (element->type == BSON_TYPE_DOCUMENT ||
        (element->type == BSON_TYPE_ARRAY && parse_index(ps_at(&c->create, 0), &idx))) {
        return true;
    }
    bson_string_t *s = bson_string_new(NULL);
    bson_string_append_printf(s, "Cannot use the part (%s) of (", ps_at(&c->create, 0));
    ps_join(s, &c->taken, 0);
    bson_string_append_c(s, '.');
    ps_join(s, &c->create, 0);
    bson_string_append(s, ") to traverse the element ({");
    char buf[24];
    fmt_mnode(s, mnode_field_name(element, buf, sizeof buf), element);
    bson_string_append(s, "})");
    dberr_set(c->err, DBERR_PATH_NOT_VIABLE, "%s", s->str);
    bson_string_free(s, true);
    return false;
}

static bool apply_rename(actx_t *c, const unode_t *leaf, mnode_t *element)
{
    mnode_t *from;
    if (!rename_find_source(c, leaf->rename_from, &from)) {
        return false;
    }
    if (!from) {
        return true; /* nothing to rename */
    }
    for (mnode_t *p = from->parent; p && p != c->root; p = p->parent) {
        if (p->type == BSON_TYPE_ARRAY) {
            return array_ancestor_error(c, "source", leaf->rename_from, p);
        }
    }
    for (mnode_t *p = c->create.n == 0 ? element->parent : element; p && p != c->root;
         p = p->parent) {
        if (p->type == BSON_TYPE_ARRAY) {
            return array_ancestor_error(c, "destination", leaf->path, p);
        }
    }
    if (c->create.n == 0) {
        bson_value_t fv;
        bson_t *tmp;
        mnode_value(from, &fv, &tmp);
        if (mnode_compare_value(element, &fv) != 0) {
            note_id_path(c);
            mnode_set_value(element, &fv);
        }
        bson_destroy(tmp);
    } else {
        note_id_path(c);
        if (!create_path(c, element, mnode_clone(from, NULL))) {
            return false;
        }
    }
    /* Remove the source; creating the destination never moves it. */
    if (strcmp(leaf->rename_from, "_id") == 0 || strncmp(leaf->rename_from, "_id.", 4) == 0) {
        c->id_by_rename = true;
    }
    mnode_t *parent = from->parent;
    mnode_free(mnode_take(parent, mnode_index_of(parent, from)));
    return true;
}

/* ModifierNode::applyToExistingElement for one leaf. */
static bool apply_existing(actx_t *c, const unode_t *leaf, mnode_t *e)
{
    bson_string_t *s;
    char buf[24];
    switch (leaf->op) {
    case OP_SET_ON_INSERT:
    case OP_SET:
        if (!mnode_binary_equal(e, &leaf->arg)) {
            note_id_path(c);
            mnode_set_value(e, &leaf->arg);
        }
        return true;
    case OP_UNSET:
        note_id_path(c);
        if (e->parent && e->parent->type == BSON_TYPE_ARRAY) {
            mnode_clear_value(e);
        } else if (e->parent) {
            mnode_free(mnode_take(e->parent, mnode_index_of(e->parent, e)));
        }
        return true;
    case OP_INC:
    case OP_MUL: {
        if (e->type != BSON_TYPE_INT32 && e->type != BSON_TYPE_INT64 &&
            e->type != BSON_TYPE_DOUBLE && e->type != BSON_TYPE_DECIMAL128) {
            s = bson_string_new(NULL);
            bson_string_append_printf(s, "Cannot apply %s to a value of non-numeric type. {",
                                      leaf->op == OP_INC ? "$inc" : "$mul");
            id_string(c, s, false);
            bson_string_append_printf(s, "} has the field '%s' of non-numeric type %s",
                                      mnode_field_name(e, buf, sizeof buf), shellfmt_type_name(e->type));
            dberr_set(c->err, DBERR_TYPE_MISMATCH, "%s", s->str);
            bson_string_free(s, true);
            return false;
        }
        snum_t orig = snum_from(&e->v), arg = snum_from(&leaf->arg);
        snum_t r = snum_arith(&arg, &orig, leaf->op == OP_MUL);
        if (snum_identical(&r, &orig)) {
            return true;
        }
        if (r.t == BSON_TYPE_EOD) {
            s = bson_string_new(NULL);
            bson_string_append_printf(s, "Failed to apply %s operations to current value (",
                                      leaf->op == OP_INC ? "$inc" : "$mul");
            snum_debug(s, &orig);
            bson_string_append(s, ") for document {");
            id_string(c, s, false);
            bson_string_append(s, "}");
            dberr_set(c->err, DBERR_BAD_VALUE, "%s", s->str);
            bson_string_free(s, true);
            return false;
        }
        bson_value_t nv;
        snum_to_value(&r, &nv);
        note_id_path(c);
        mnode_set_value(e, &nv);
        return true;
    }
    case OP_MIN:
    case OP_MAX: {
        int cmp = mnode_compare_value(e, &leaf->arg);
        /* compareVal is element vs value: $min sets when element > value. */
        if (cmp == 0 || (leaf->op == OP_MAX) == (cmp > 0)) {
            return true;
        }
        note_id_path(c);
        mnode_set_value(e, &leaf->arg);
        return true;
    }
    case OP_CURRENT_DATE: {
        bson_value_t v;
        current_date_value(c, leaf, &v);
        note_id_path(c);
        mnode_set_value(e, &v);
        return true;
    }
    case OP_PUSH:
        if (e->type != BSON_TYPE_ARRAY) {
            s = bson_string_new("The field '");
            ps_join(s, &c->taken, 0);
            bson_string_append_printf(s, "' must be an array but is of type %s in document {",
                                      shellfmt_type_name(e->type));
            id_string(c, s, true);
            bson_string_append(s, "}");
            dberr_set(c->err, DBERR_BAD_VALUE, "%s", s->str);
            bson_string_free(s, true);
            return false;
        }
        note_id_path(c);
        perform_push(leaf, e);
        return true;
    case OP_ADD_TO_SET:
        if (e->type != BSON_TYPE_ARRAY) {
            return dberr_set(
                c->err, DBERR_BAD_VALUE,
                "Cannot apply $addToSet to non-array field. Field named '%s' has non-array type %s",
                mnode_field_name(e, buf, sizeof buf), shellfmt_type_name(e->type));
        }
        for (size_t i = 0; i < leaf->nvals; i++) {
            bool present = false;
            for (size_t j = 0; j < e->nkids && !present; j++) {
                present = mnode_compare_value(e->kids[j], &leaf->vals[i]) == 0;
            }
            if (!present) {
                mnode_t *k = mnode_new(NULL);
                mnode_fill_from_value(k, &leaf->vals[i]);
                note_id_path(c);
                mnode_append(e, k);
            }
        }
        return true;
    case OP_POP:
        if (e->type != BSON_TYPE_ARRAY) {
            s = bson_string_new("Path '");
            ps_join(s, &c->taken, 0);
            bson_string_append_printf(s, "' contains an element of non-array type '%s'",
                                      shellfmt_type_name(e->type));
            dberr_set(c->err, DBERR_TYPE_MISMATCH, "%s", s->str);
            bson_string_free(s, true);
            return false;
        }
        if (e->nkids > 0) {
            note_id_path(c);
            mnode_free(mnode_take(e, leaf->pop_front ? 0 : e->nkids - 1));
        }
        return true;
    case OP_PULL:
    case OP_PULL_ALL:
        if (e->type != BSON_TYPE_ARRAY) {
            return dberr_set(c->err, DBERR_BAD_VALUE, "Cannot apply %s to a non-array value",
                             leaf->op == OP_PULL ? "$pull" : "$pullAll");
        }
        for (size_t i = 0; i < e->nkids;) {
            bool hit = false;
            if (leaf->op == OP_PULL) {
                hit = pull_matches(leaf, e->kids[i]);
            } else {
                for (size_t j = 0; j < leaf->nvals && !hit; j++) {
                    hit = mnode_compare_value(e->kids[i], &leaf->vals[j]) == 0;
                }
            }
            if (hit) {
                note_id_path(c);
                mnode_free(mnode_take(e, i));
            } else {
                i++;
            }
        }
        return true;
    case OP_BIT: {
        if (e->type != BSON_TYPE_INT32 && e->type != BSON_TYPE_INT64) {
            s = bson_string_new("Cannot apply $bit to a value of non-integral type.");
            id_string(c, s, false);
            bson_string_append_printf(s, " has the field %s of non-integer type %s",
                                      mnode_field_name(e, buf, sizeof buf), shellfmt_type_name(e->type));
            dberr_set(c->err, DBERR_BAD_VALUE, "%s", s->str);
            bson_string_free(s, true);
            return false;
        }
        snum_t orig = snum_from(&e->v);
        snum_t r = apply_bits(leaf, orig);
        if (!snum_identical(&r, &orig)) {
            bson_value_t nv;
            snum_to_value(&r, &nv);
            note_id_path(c);
            mnode_set_value(e, &nv);
        }
        return true;
    }
    case OP_RENAME:
        return apply_rename(c, leaf, e);
    case OP_PLACEHOLDER:
        return true;
    }
    return true;
}

static bool new_value(actx_t *c, const unode_t *leaf, bson_value_t *out, mnode_t **out_node)
{
    *out_node = NULL;
    memset(out, 0, sizeof *out);
    switch (leaf->op) {
    case OP_SET:
    case OP_SET_ON_INSERT:
    case OP_MIN:
    case OP_MAX:
    case OP_INC:
        *out = leaf->arg;
        return true;
    case OP_MUL: {
        snum_t a = snum_from(&leaf->arg), zero;
        memset(&zero, 0, sizeof zero);
        zero.t = BSON_TYPE_INT32;
        snum_t r = snum_arith(&a, &zero, true);
        snum_to_value(&r, out);
        return true;
    }
    case OP_CURRENT_DATE:
        current_date_value(c, leaf, out);
        return true;
    case OP_BIT: {
        snum_t zero;
        memset(&zero, 0, sizeof zero);
        zero.t = BSON_TYPE_INT32;
        snum_t r = apply_bits(leaf, zero);
        snum_to_value(&r, out);
        return true;
    }
    case OP_PUSH:
    case OP_ADD_TO_SET: {
        mnode_t *arr = mnode_new(NULL);
        arr->type = BSON_TYPE_ARRAY;
        if (leaf->op == OP_PUSH) {
            perform_push(leaf, arr);
        } else {
            for (size_t i = 0; i < leaf->nvals; i++) {
                mnode_t *k = mnode_new(NULL);
                mnode_fill_from_value(k, &leaf->vals[i]);
                mnode_append(arr, k);
            }
        }
        *out_node = arr;
        return true;
    }
    default:
        return true;
    }
}

/* ModifierNode::apply: `element` is the target when c->create is empty, else
 * the deepest existing ancestor. */
static bool apply_leaf(actx_t *c, const unode_t *leaf, mnode_t *element)
{
    if (leaf->op == OP_SET_ON_INSERT && !c->is_insert) {
        return true;
    }
    if (leaf->op == OP_PLACEHOLDER) {
        return true;
    }
    if (c->create.n == 0) {
        return apply_existing(c, leaf, element);
    }
    switch (leaf->op) {
    case OP_UNSET:
        return true;
    case OP_RENAME:
        return apply_rename(c, leaf, element);
    case OP_PULL:
    case OP_PULL_ALL:
        return check_viability(c, element);
    case OP_POP: {
        size_t idx;
        if (c->taken.n == 0 || element->type == BSON_TYPE_DOCUMENT ||
            (element->type == BSON_TYPE_ARRAY && parse_index(ps_at(&c->create, 0), &idx))) {
            return true;
        }
        return check_viability(c, element);
    }
    default:
        break;
    }
    bson_value_t v;
    mnode_t *node;
    if (!new_value(c, leaf, &v, &node)) {
        return false;
    }
    if (!node) {
        node = mnode_new(NULL);
        mnode_fill_from_value(node, &v);
    }
    note_id_path(c);
    return create_path(c, element, node);
}

static bool conflict_error(actx_t *c, const char *field)
{
    bson_string_t *s = bson_string_new(NULL);
    ps_join(s, &c->taken, 0);
    if (c->create.n) {
        if (c->taken.n) {
            bson_string_append_c(s, '.');
        }
        ps_join(s, &c->create, 0);
    }
    if (s->len) {
        bson_string_append_c(s, '.');
    }
    bson_string_append(s, field);
    dberr_set(c->err, DBERR_CONFLICTING_UPDATE_OPERATORS, "Update created a conflict at '%s'",
              s->str);
    bson_string_free(s, true);
    return false;
}

/* applyChild: applies the merged `nodes` to the child `field` of *element. */
static bool apply_child(actx_t *c, unode_t **nodes, size_t k, const char *field, mnode_t **element)
{
    size_t taken_before = c->taken.n;
    mnode_t *child = NULL;
    bool ok;

    if (k > 1) {
        for (size_t i = 0; i < k; i++) {
            if (nodes[i]->kind == UN_LEAF || nodes[i]->kind != nodes[0]->kind) {
                return conflict_error(c, field);
            }
        }
    }
    if (c->create.n == 0) {
        size_t idx;
        if ((*element)->type == BSON_TYPE_DOCUMENT) {
            child = mnode_find(*element, field);
        } else if ((*element)->type == BSON_TYPE_ARRAY && parse_index(field, &idx)) {
            child = idx < (*element)->nkids ? (*element)->kids[idx] : NULL;
        }
    }
    if (child) {
        ps_push(&c->taken, field);
    } else {
        child = *element;
        ps_push(&c->create, field);
    }
    ok = apply_nodes(c, nodes, k, child);
    if (c->create.n > 0) {
        c->create.n--;
    } else {
        c->taken.n--;
    }
    if (!ok) {
        return false;
    }
    if (c->taken.n > taken_before) {
        for (size_t i = taken_before; i < c->taken.n; i++) {
            mnode_t *next = mnode_find(*element, ps_at(&c->taken, i));
            size_t idx;
            if (!next && (*element)->type == BSON_TYPE_ARRAY &&
                parse_index(ps_at(&c->taken, i), &idx) && idx < (*element)->nkids) {
                next = (*element)->kids[idx];
            }
            if (!next) {
                break;
            }
            *element = next;
        }
    } else if (c->create.n > 0) {
        mnode_t *cur = *element;
        size_t idx;
        mnode_t *next = mnode_find(cur, ps_at(&c->create, 0));
        if (!next && cur->type == BSON_TYPE_ARRAY && parse_index(ps_at(&c->create, 0), &idx) &&
            idx < cur->nkids) {
            next = cur->kids[idx];
        }
        if (next) {
            /* The path was fully created: move it from create to taken. */
            for (size_t i = 0; i < c->create.n; i++) {
                mnode_t *step = i == 0 ? next : mnode_find(cur, ps_at(&c->create, i));
                if (!step && cur->type == BSON_TYPE_ARRAY &&
                    parse_index(ps_at(&c->create, i), &idx) && idx < cur->nkids) {
                    step = cur->kids[idx];
                }
                if (!step) {
                    break;
                }
                cur = step;
                ps_push(&c->taken, c->create.v[i].s);
                if (!c->create.v[i].s) {
                    memcpy(c->taken.v[c->taken.n - 1].num, c->create.v[i].num,
                           sizeof c->create.v[i].num);
                }
            }
            c->create.n = 0;
            *element = cur;
        }
    }
    return true;
}

/* Applies merged object nodes (UpdateObjectNode::apply). */
static bool apply_object(actx_t *c, unode_t **nodes, size_t k, mnode_t *element)
{
    unode_t *posbuf[8];
    unode_t **pos = k <= 8 ? posbuf : bson_malloc(k * sizeof *pos);
    size_t npos = 0;
    size_t *cursor = bson_malloc0(k * sizeof *cursor);
    unode_t **group = bson_malloc((k + k) * sizeof *group);
    bool ok = true;

    for (size_t i = 0; i < k; i++) {
        if (nodes[i]->positional) {
            pos[npos++] = nodes[i]->positional;
        }
    }
    if (npos > 0 && !c->matched) {
        ok = dberr_set(c->err, DBERR_BAD_VALUE,
                       "The positional operator did not find the match needed from the query.");
        goto cleanup;
    }
    bool positional_pending = npos > 0;
    for (;;) {
        /* The smallest next child name among the merged nodes. */
        const char *name = NULL;
        for (size_t i = 0; i < k; i++) {
            if (cursor[i] < nodes[i]->nkids) {
                const char *n = nodes[i]->kids[cursor[i]].name;
                if (!name || cmp_field_names(n, name) < 0) {
                    name = n;
                }
            }
        }
        if (positional_pending && (!name || cmp_field_names(c->matched, name) < 0)) {
            positional_pending = false;
            ok = apply_child(c, pos, npos, c->matched, &element);
            if (!ok) {
                goto cleanup;
            }
            continue;
        }
        if (!name) {
            break;
        }
        size_t g = 0;
        for (size_t i = 0; i < k; i++) {
            if (cursor[i] < nodes[i]->nkids && strcmp(nodes[i]->kids[cursor[i]].name, name) == 0) {
                group[g++] = nodes[i]->kids[cursor[i]].node;
                cursor[i]++;
            }
        }
        if (positional_pending && strcmp(c->matched, name) == 0) {
            positional_pending = false;
            for (size_t i = 0; i < npos; i++) {
                group[g++] = pos[i];
            }
        }
        ok = apply_child(c, group, g, name, &element);
        if (!ok) {
            goto cleanup;
        }
    }

cleanup:
    if (pos != posbuf) {
        bson_free(pos);
    }
    bson_free(cursor);
    bson_free(group);
    return ok;
}

/* Applies merged array nodes ($[] and $[id], UpdateArrayNode::apply). */
static bool apply_array(actx_t *c, unode_t **nodes, size_t k, mnode_t *element)
{
    bson_string_t *s;
    if (c->create.n > 0) {
        s = bson_string_new("The path '");
        ps_join(s, &c->taken, 0);
        if (c->taken.n) {
            bson_string_append_c(s, '.');
        }
        ps_join(s, &c->create, 0);
        bson_string_append(s, "' must exist in the document in order to apply array updates.");
        dberr_set(c->err, DBERR_BAD_VALUE, "%s", s->str);
        bson_string_free(s, true);
        return false;
    }
    if (element->type != BSON_TYPE_ARRAY) {
        char buf[24];
        s = bson_string_new("Cannot apply array updates to non-array element ");
        fmt_mnode(s, mnode_field_name(element, buf, sizeof buf), element);
        dberr_set(c->err, DBERR_BAD_VALUE, "%s", s->str);
        bson_string_free(s, true);
        return false;
    }
    size_t total = 0;
    for (size_t i = 0; i < k; i++) {
        total += nodes[i]->nkids;
    }
    size_t n = element->nkids;
    /* Decide every element's updates before applying any (as mongod does). */
    unode_t ***match = bson_malloc0((n ? n : 1) * sizeof *match);
    size_t *nmatch = bson_malloc0((n ? n : 1) * sizeof *nmatch);
    bool ok = true;
    for (size_t e = 0; e < n; e++) {
        match[e] = bson_malloc((total ? total : 1) * sizeof **match);
        for (size_t i = 0; i < k; i++) {
            for (size_t j = 0; j < nodes[i]->nkids; j++) {
                const char *id = nodes[i]->kids[j].name;
                const afilter_t *f = *id ? find_filter(c->u, id) : NULL;
                if (!*id || (f && filter_matches(f, element->kids[e]))) {
                    match[e][nmatch[e]++] = nodes[i]->kids[j].node;
                }
            }
        }
    }
    for (size_t e = 0; e < n && ok; e++) {
        if (nmatch[e] == 0) {
            continue;
        }
        mnode_t *kid = element->kids[e];
        if (nmatch[e] > 1) {
            for (size_t i = 0; i < nmatch[e]; i++) {
                if (match[e][i]->kind == UN_LEAF || match[e][i]->kind != match[e][0]->kind) {
                    char buf[24];
                    snprintf(buf, sizeof buf, "%zu", e);
                    ok = conflict_error(c, buf);
                    break;
                }
            }
            if (!ok) {
                break;
            }
        }
        ps_push_index(&c->taken, e);
        ok = apply_nodes(c, match[e], nmatch[e], kid);
        if (c->create.n > 0) {
            c->create.n = 0;
        }
        c->taken.n--;
    }
    for (size_t e = 0; e < n; e++) {
        bson_free(match[e]);
    }
    bson_free(match);
    bson_free(nmatch);
    return ok;
}

static bool apply_nodes(actx_t *c, unode_t **nodes, size_t k, mnode_t *element)
{
    switch (nodes[0]->kind) {
    case UN_LEAF:
        return apply_leaf(c, nodes[0], element);
    case UN_OBJECT:
        return apply_object(c, nodes, k, element);
    case UN_ARRAY:
        return apply_array(c, nodes, k, element);
    }
    return false;
}

/* ------------------------------------------------------------------------
 * Finishing: _id first, immutability, storage checks
 * ---------------------------------------------------------------------- */

static bool id_value(const bson_t *doc, bson_value_t *out)
{
    bson_iter_t it;
    if (bson_iter_init_find(&it, doc, "_id")) {
        *out = *bson_iter_value(&it);
        return true;
    }
    return false;
}

/* Writes `root` to `out` with `_id` first. */
static void write_id_first(bson_t *out, const mnode_t *root)
{
    mnode_t *id = mnode_find(root, "_id");
    if (id) {
        mnode_write(out, "_id", id);
    }
    for (size_t i = 0; i < root->nkids; i++) {
        if (root->kids[i] != id) {
            mnode_write(out, root->kids[i]->name, root->kids[i]);
        }
    }
}

/* True when the document at `data` nests containers deeper than `limit`
 * levels (top-level fields are level 1). Recursion stops at `limit`. */
static bool depth_exceeds(const uint8_t *data, uint32_t len, int level, int limit)
{
    bson_t b;
    bson_iter_t it;
    if (!bson_init_static(&b, data, len) || !bson_iter_init(&it, &b)) {
        return false;
    }
    while (bson_iter_next(&it)) {
        if (BSON_ITER_HOLDS_DOCUMENT(&it) || BSON_ITER_HOLDS_ARRAY(&it)) {
            uint32_t sublen;
            const uint8_t *sub;
            if (level + 1 > limit) {
                return true;
            }
            if (BSON_ITER_HOLDS_DOCUMENT(&it)) {
                bson_iter_document(&it, &sublen, &sub);
            } else {
                bson_iter_array(&it, &sublen, &sub);
            }
            if (depth_exceeds(sub, sublen, level + 1, limit)) {
                return true;
            }
        }
    }
    return false;
}

/* Checks a stored document's top level: nesting depth, `_id` type, and —
 * unless `allow_dollar` (pipeline updates, which may create $-prefixed
 * fields with $setField as mongod 5.0+ allows) — $-prefixed names. */
static bool check_new_doc_opts(const bson_t *doc, bool allow_dollar, dberr_t *err);

static bool check_new_doc(const bson_t *doc, dberr_t *err)
{
    return check_new_doc_opts(doc, false, err);
}

static bool check_new_doc_opts(const bson_t *doc, bool allow_dollar, dberr_t *err)
{
    if (depth_exceeds(bson_get_data(doc), doc->len, 1, UPD_MAX_STORED_DEPTH)) {
        return dberr_set(err, DBERR_OVERFLOW, "Document exceeds maximum nesting depth of %d",
                         UPD_MAX_STORED_DEPTH);
    }
    bson_iter_t it;
    bson_iter_init(&it, doc);
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (k[0] == '$' && !allow_dollar) {
            return dberr_set(
                err, DBERR_DOLLAR_PREFIXED_FIELD_NAME,
                "The dollar ($) prefixed field '%s' in '%s' is not allowed in the context of "
                "an update's replacement document. Consider using an aggregation pipeline "
                "with $replaceWith.",
                k, k);
        }
        if (strcmp(k, "_id") == 0) {
            bson_type_t t = bson_iter_type(&it);
            if (t == BSON_TYPE_ARRAY || t == BSON_TYPE_REGEX || t == BSON_TYPE_UNDEFINED) {
                return dberr_set(err, DBERR_INVALID_ID_FIELD,
                                 "The '_id' value cannot be of type %s", shellfmt_type_name(t));
            }
        }
    }
    return true;
}

static bool apply_operators(const updater_t *u, const bson_t *old_doc, bool is_insert,
                            int positional, bson_t *out, dberr_t *err)
{
    actx_t c;
    bool ok = false;
    memset(&c, 0, sizeof c);
    c.u = u;
    c.is_insert = is_insert;
    c.err = err;
    c.now_ms = (int64_t)time(NULL) * 1000;
    {
        struct timespec ts;
        if (clock_gettime(CLOCK_REALTIME, &ts) == 0) {
            c.now_ms = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
        }
    }
    if (positional >= 0) {
        snprintf(c.matched_buf, sizeof c.matched_buf, "%d", positional);
        c.matched = c.matched_buf;
    }
    if (depth_exceeds(bson_get_data(old_doc), old_doc->len, 1, UPD_MAX_INPUT_DEPTH)) {
        dberr_set(err, DBERR_OVERFLOW, "Document exceeds maximum nesting depth of %d",
                  UPD_MAX_STORED_DEPTH);
        goto cleanup;
    }
    c.root = mnode_from_doc(old_doc);
    unode_t *root = u->root;
    if (!apply_nodes(&c, &root, 1, c.root)) {
        goto cleanup;
    }
    bson_value_t old_id;
    if (id_value(old_doc, &old_id)) {
        mnode_t *nid = mnode_find(c.root, "_id");
        if (!nid || !mnode_binary_equal(nid, &old_id)) {
            if (c.id_by_rename && !c.id_path) {
                dberr_set(err, DBERR_IMMUTABLE_FIELD,
                          "Unsetting the path '_id' using $rename would modify the immutable field "
                          "'_id'");
            } else {
                dberr_set(
                    err, DBERR_IMMUTABLE_FIELD,
                    "Performing an update on the path '%s' would modify the immutable field '_id'",
                    c.id_path ? c.id_path : "_id");
            }
            goto cleanup;
        }
    }
    write_id_first(out, c.root);
    if (!check_new_doc(out, err)) {
        goto cleanup;
    }
    ok = true;

cleanup:
    mnode_free(c.root);
    bson_free(c.taken.v);
    bson_free(c.create.v);
    bson_free(c.id_path);
    return ok;
}

/* Stores `repl` in place of `old_doc`, keeping the old `_id` first
 * (ObjectReplaceExecutor). */
static bool apply_replacement_doc(const bson_t *old_doc, const bson_t *repl, bool allow_dollar,
                                  bson_t *out, dberr_t *err)
{
    bson_value_t old_id, new_id;
    bool has_old = id_value(old_doc, &old_id);
    bool has_new = id_value(repl, &new_id);
    if (has_old && has_new && compare_values(&old_id, &new_id) != 0) {
        bson_string_t *s = bson_string_new("After applying the update, the (immutable) field '_id' "
                                           "was found to have been altered to _id: ");
        fmt_value(s, &new_id);
        dberr_set(err, DBERR_IMMUTABLE_FIELD, "%s", s->str);
        bson_string_free(s, true);
        return false;
    }
    if (has_new) {
        bson_append_value(out, "_id", 3, &new_id);
    } else if (has_old) {
        bson_append_value(out, "_id", 3, &old_id);
    }
    bson_iter_t it;
    bson_iter_init(&it, repl);
    while (bson_iter_next(&it)) {
        if (strcmp(bson_iter_key(&it), "_id") != 0) {
            bson_append_value(out, bson_iter_key(&it), -1, bson_iter_value(&it));
        }
    }
    return check_new_doc_opts(out, allow_dollar, err);
}

static bool apply_pipeline(const updater_t *u, const bson_t *old_doc, bson_t *out, dberr_t *err)
{
    doclist_t docs;
    bool ok = false;
    doclist_init(&docs);
    doclist_push(&docs, bson_copy(old_doc));
    if (!pipeline_run(u->pipeline, &docs, err)) {
        goto cleanup;
    }
    if (docs.len != 1) {
        dberr_set(err, DBERR_BAD_VALUE,
                  "pipeline-style update must produce exactly one document, got %zu", docs.len);
        goto cleanup;
    }
    ok = apply_replacement_doc(old_doc, docs.docs[0], true, out, err);

cleanup:
    doclist_destroy(&docs);
    return ok;
}

bool updater_apply(const updater_t *u, const bson_t *old_doc, bool is_insert, int positional,
                   bson_t *out, bool *changed, dberr_t *err)
{
    bool ok = false;
    *changed = false;
    if (!u || !old_doc) {
        return dberr_set(err, DBERR_INTERNAL_ERROR, "updater_apply: missing update or document");
    }
    switch (u->kind) {
    case UPDATER_OPERATORS:
        ok = apply_operators(u, old_doc, is_insert, positional, out, err);
        break;
    case UPDATER_REPLACEMENT:
        ok = apply_replacement_doc(old_doc, u->replacement, false, out, err);
        break;
    case UPDATER_PIPELINE:
        ok = apply_pipeline(u, old_doc, out, err);
        break;
    }
    if (!ok) {
        bson_reinit(out);
        return false;
    }
    *changed = out->len != old_doc->len ||
               memcmp(bson_get_data(out), bson_get_data(old_doc), out->len) != 0;
    return true;
}
