/* jsonschema: checks values against a compiled $jsonSchema with JSON
 * Schema's rules (a restriction applies only to values of its own type);
 * the same walk, asked to explain, builds mongod 7's schemaRulesNotSatisfied. */
#include "doc/jsonschema.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "doc/compare.h"
#include "doc/jsonschema-private.h"
#include "util/shellfmt.h"

/* -- checking -- */

static void js_normalize(const bson_value_t *v, bson_t *into, const char *key);

bool jsonschema_equal(const bson_value_t *a, const bson_value_t *b)
{
    bool adoc = a->value_type == BSON_TYPE_DOCUMENT, bdoc = b->value_type == BSON_TYPE_DOCUMENT;
    bool aarr = a->value_type == BSON_TYPE_ARRAY, barr = b->value_type == BSON_TYPE_ARRAY;
    if (adoc != bdoc || aarr != barr)
        return false;
    if (!adoc && !aarr)
        return compare_values(a, b) == 0;
    /* containers: compared with every document's fields sorted (n log n) */
    bson_t na = BSON_INITIALIZER, nb = BSON_INITIALIZER;
    js_normalize(a, &na, "v");
    js_normalize(b, &nb, "v");
    bool same = compare_docs(&na, &nb) == 0;
    bson_destroy(&na);
    bson_destroy(&nb);
    return same;
}

static bool js_type_in(uint64_t types, bool number, bson_type_t t)
{
    if (number && (t == BSON_TYPE_INT32 || t == BSON_TYPE_INT64 || t == BSON_TYPE_DOUBLE ||
                   t == BSON_TYPE_DECIMAL128))
        return true;
    if (t == BSON_TYPE_MINKEY)
        return types & (UINT64_C(1) << 62);
    if (t == BSON_TYPE_MAXKEY)
        return types & (UINT64_C(1) << 63);
    return types & (UINT64_C(1) << (t & 63));
}

/* Where a check writes its failures: a BSON array being built, or nothing
 * (NULL: only the verdict is wanted, so the first failure ends the walk). */
typedef struct js_out {
    bson_t *arr;
    uint32_t n;
    bool brief; /* leave out specifiedAs and considered values (too large) */
} js_out_t;

static void js_out_begin(js_out_t *o, bson_t *child)
{
    const char *key;
    char buf[16];
    bson_uint32_to_string(o->n++, &key, buf, sizeof buf);
    bson_append_document_begin(o->arr, key, -1, child);
}

/* Starts one failing rule {operatorName, specifiedAs: {kw: <its argument>}}. */
static void js_rule_begin(js_out_t *o, const js_node_t *n, const char *kw, bool specified,
                          bson_t *rule)
{
    js_out_begin(o, rule);
    BSON_APPEND_UTF8(rule, "operatorName", kw);
    bson_iter_t it;
    bson_t spec;
    if (specified && !o->brief && bson_init_static(&spec, n->spec_data, n->spec_len) &&
        bson_iter_init_find(&it, &spec, kw)) {
        bson_t sa;
        bson_append_document_begin(rule, "specifiedAs", -1, &sa);
        bson_append_value(&sa, kw, -1, bson_iter_value(&it));
        /* an exclusive bound shows its flag beside it, as mongod's annotation */
        if ((strcmp(kw, "minimum") == 0 && n->excl_min) ||
            (strcmp(kw, "maximum") == 0 && n->excl_max))
            BSON_APPEND_BOOL(&sa, kw[1] == 'i' ? "exclusiveMinimum" : "exclusiveMaximum", true);
        bson_append_document_end(rule, &sa);
    }
}

/* Appends `v` as `field` of a rule unless the output is brief. */
static void js_considered(const js_out_t *o, bson_t *rule, const char *field, const bson_value_t *v)
{
    if (!o->brief)
        bson_append_value(rule, field, -1, v);
}

static void js_rule_end(js_out_t *o, bson_t *rule)
{
    bson_append_document_end(o->arr, rule);
}

/* A failing rule with a reason and the value it considered. */
static void js_fail_value(js_out_t *o, const js_node_t *n, const char *kw, const char *reason,
                          const bson_value_t *v)
{
    bson_t rule;
    js_rule_begin(o, n, kw, true, &rule);
    BSON_APPEND_UTF8(&rule, "reason", reason);
    js_considered(o, &rule, "consideredValue", v);
    js_rule_end(o, &rule);
}

/* A failing rule that lists what failed in it ({operatorName, <list>:
 * [...]}): opened at the first failure, ended once after the last. */
typedef struct js_list_rule {
    bson_t rule, arr;
    js_out_t list; /* appends the list's entries to arr */
    bool open;
} js_list_rule_t;

/* The list of `l`, opening `l` as the rule `kw` with its list `field` at
 * the first failure. */
static js_out_t *js_list_rule_open(js_out_t *o, const js_node_t *n, const char *kw, bool specified,
                                   const char *field, js_list_rule_t *l)
{
    if (!l->open) {
        js_rule_begin(o, n, kw, specified, &l->rule);
        bson_append_array_begin(&l->rule, field, -1, &l->arr);
        l->list = (js_out_t){&l->arr, 0, o->brief};
        l->open = true;
    }
    return &l->list;
}

/* Appends the name `name` to the list of `l`, opening it as
 * js_list_rule_open does. */
static void js_list_rule_add_name(js_out_t *o, const js_node_t *n, const char *kw, bool specified,
                                  const char *field, js_list_rule_t *l, const char *name)
{
    js_out_t *list = js_list_rule_open(o, n, kw, specified, field, l);
    const char *key;
    char buf[16];
    bson_uint32_to_string(list->n++, &key, buf, sizeof buf);
    BSON_APPEND_UTF8(list->arr, key, name);
}

/* Ends `l` when it was opened. */
static void js_list_rule_end(js_out_t *o, js_list_rule_t *l)
{
    if (!l->open)
        return;
    bson_append_array_end(&l->rule, &l->arr);
    js_rule_end(o, &l->rule);
}

/* Whether `count` (a string's length, an array's items, an object's
 * fields) keeps the bound of count keyword `kw`: at least `bound` when
 * `at_least`, else at most (a negative bound: none). When not, and `o` is
 * given, reports it with `reason`, the value `v` when given and the count
 * as `count_field` when given. */
static bool js_check_count(js_out_t *o, const js_node_t *n, const char *kw, int64_t bound,
                           bool at_least, uint64_t count, const char *reason,
                           const bson_value_t *v, const char *count_field)
{
    if (bound < 0 || (at_least ? count >= (uint64_t)bound : count <= (uint64_t)bound))
        return true;
    if (!o)
        return false;
    bson_t rule;
    js_rule_begin(o, n, kw, true, &rule);
    BSON_APPEND_UTF8(&rule, "reason", reason);
    if (v)
        js_considered(o, &rule, "consideredValue", v);
    if (count_field)
        BSON_APPEND_INT32(&rule, count_field, (int32_t)count);
    js_rule_end(o, &rule);
    return false;
}

static bool js_check(const js_node_t *n, const bson_value_t *v, js_out_t *out);

/* Checks `v` against `n`, writing its failures as a "details" array of
 * `parent` when explaining. */
static bool js_check_into(const js_out_t *ctx, const js_node_t *n, const bson_value_t *v,
                          bson_t *parent, const char *field)
{
    bson_t arr;
    bson_append_array_begin(parent, field, -1, &arr);
    js_out_t o = {&arr, 0, ctx->brief};
    bool ok = js_check(n, v, &o);
    bson_append_array_end(parent, &arr);
    return ok;
}

static void js_append_annotations(const js_node_t *n, bson_t *doc)
{
    if (n->title)
        BSON_APPEND_UTF8(doc, "title", n->title);
    if (n->description)
        BSON_APPEND_UTF8(doc, "description", n->description);
}

static bool js_view(const bson_value_t *v, bson_t *doc)
{
    return bson_init_static(doc, v->value.v_doc.data, v->value.v_doc.data_len);
}

/* One field of a document being normalized (borrowed from it). */
typedef struct js_field {
    const char *key;
    bson_value_t value;
} js_field_t;

static int js_field_cmp(const void *a, const void *b)
{
    return strcmp(((const js_field_t *)a)->key, ((const js_field_t *)b)->key);
}

static size_t js_utf8_length(const char *s, uint32_t len)
{
    size_t n = 0;
    for (uint32_t i = 0; i < len; i++)
        n += ((unsigned char)s[i] & 0xC0) != 0x80;
    return n;
}

/* mongod's $_internalSchemaFmod with a zero remainder. */
static bool js_multiple_of(const bson_value_t *v, const bson_value_t *m)
{
    if ((v->value_type == BSON_TYPE_INT32 || v->value_type == BSON_TYPE_INT64) &&
        (m->value_type == BSON_TYPE_INT32 || m->value_type == BSON_TYPE_INT64)) {
        int64_t a = v->value_type == BSON_TYPE_INT32 ? v->value.v_int32 : v->value.v_int64;
        int64_t b = m->value_type == BSON_TYPE_INT32 ? m->value.v_int32 : m->value.v_int64;
        return b == -1 || a % b == 0;
    }
    double a = compare_to_double(v), b = compare_to_double(m);
    if (isnan(a) || isinf(a))
        return false;
    return fmod(a, b) == 0;
}

static bool js_check_scalar(const js_node_t *n, const bson_value_t *v, js_out_t *out)
{
    bool ok = true;
    if (v->value_type == BSON_TYPE_UTF8) {
        if (n->pattern.code &&
            !jsonschema_regex_test(&n->pattern, v->value.v_utf8.str, v->value.v_utf8.len)) {
            if (!out)
                return false;
            ok = false;
            js_fail_value(out, n, "pattern", "regular expression did not match", v);
        }
        size_t len = js_utf8_length(v->value.v_utf8.str, v->value.v_utf8.len);
        static const char *const reason = "specified string length was not satisfied";
        if (!js_check_count(out, n, "maxLength", n->max_len, false, len, reason, v, NULL)) {
            if (!out)
                return false;
            ok = false;
        }
        if (!js_check_count(out, n, "minLength", n->min_len, true, len, reason, v, NULL)) {
            if (!out)
                return false;
            ok = false;
        }
    }
    if (compare_is_number(v)) {
        if (n->has_mult && !js_multiple_of(v, &n->mult)) {
            if (!out)
                return false;
            ok = false;
            js_fail_value(out, n, "multipleOf",
                          "considered value is not a multiple of the specified value", v);
        }
        if (n->has_max) {
            int c = compare_values(v, &n->maximum);
            if (n->excl_max ? c >= 0 : c > 0) {
                if (!out)
                    return false;
                ok = false;
                js_fail_value(out, n, "maximum", "comparison failed", v);
            }
        }
        if (n->has_min) {
            int c = compare_values(v, &n->minimum);
            if (n->excl_min ? c <= 0 : c < 0) {
                if (!out)
                    return false;
                ok = false;
                js_fail_value(out, n, "minimum", "comparison failed", v);
            }
        }
    }
    return ok;
}

/* Appends `v` to `into` as `key` with every document's fields sorted by
 * name (recursively), so that compare_values finds two values equal
 * exactly when jsonschema_equal does. */
static void js_normalize(const bson_value_t *v, bson_t *into, const char *key)
{
    bson_t in, child;
    bson_iter_t it;
    if ((v->value_type != BSON_TYPE_DOCUMENT && v->value_type != BSON_TYPE_ARRAY) ||
        !js_view(v, &in) || !bson_iter_init(&it, &in)) {
        bson_append_value(into, key, -1, v);
        return;
    }
    if (v->value_type == BSON_TYPE_ARRAY) {
        bson_append_array_begin(into, key, -1, &child);
        while (bson_iter_next(&it))
            js_normalize(bson_iter_value(&it), &child, bson_iter_key(&it));
        bson_append_array_end(into, &child);
        return;
    }
    size_t n = 0, cap = 8;
    js_field_t *fields = bson_malloc(cap * sizeof *fields);
    while (bson_iter_next(&it)) {
        if (n == cap)
            fields = bson_realloc(fields, (cap *= 2) * sizeof *fields);
        fields[n].key = bson_iter_key(&it);
        fields[n++].value = *bson_iter_value(&it);
    }
    if (n > 1) /* else nothing to sort, and fields may be NULL (qsort must not get it) */
        qsort(fields, n, sizeof *fields, js_field_cmp);
    bson_append_document_begin(into, key, -1, &child);
    for (size_t i = 0; i < n; i++)
        js_normalize(&fields[i].value, &child, fields[i].key);
    bson_append_document_end(into, &child);
    bson_free(fields);
}

/* One array element by its normalized value, for uniqueItems. */
typedef struct js_item {
    bson_value_t norm; /* borrowed from the normalized copy */
    uint32_t idx;
} js_item_t;

static int js_item_cmp(const void *a, const void *b)
{
    const js_item_t *x = a, *y = b;
    int c = compare_values(&x->norm, &y->norm);
    return c ? c : (x->idx > y->idx) - (x->idx < y->idx);
}

bool jsonschema_first_duplicate(const bson_t *arr, uint32_t count, bson_t *store,
                                bson_iter_t *dup)
{
    bson_iter_t it;
    if (count < 2 || !bson_iter_init(&it, arr))
        return false;
    while (bson_iter_next(&it))
        js_normalize(bson_iter_value(&it), store, bson_iter_key(&it));
    js_item_t *items = bson_malloc(count * sizeof *items);
    uint32_t n = 0;
    bson_iter_init(&it, store);
    while (n < count && bson_iter_next(&it)) {
        items[n].norm = *bson_iter_value(&it);
        items[n].idx = n;
        n++;
    }
    if (n > 1) /* else nothing to sort, and items may be NULL (qsort must not get it) */
        qsort(items, n, sizeof *items, js_item_cmp);
    uint32_t first = UINT32_MAX;
    for (uint32_t i = 1; i < n; i++) /* runs are sorted by index: i is a later twin */
        if (compare_values(&items[i].norm, &items[i - 1].norm) == 0 && items[i].idx < first)
            first = items[i].idx;
    bson_free(items);
    if (first == UINT32_MAX || !bson_iter_init(dup, arr))
        return false;
    for (uint32_t i = 0; bson_iter_next(dup); i++)
        if (i == first)
            return true;
    return false;
}

/* The array keywords over the array `v`. */
static bool js_check_array(const js_node_t *n, const bson_value_t *v, js_out_t *out)
{
    bson_t arr;
    if (!js_view(v, &arr))
        return false;
    bool ok = true;
    uint32_t count = bson_count_keys(&arr);
    static const char *const kws[2] = {"minItems", "maxItems"};
    for (int i = 0; i < 2; i++) {
        if (js_check_count(out, n, kws[i], i == 0 ? n->min_items : n->max_items, i == 0, count,
                           "array did not match specified length", v, "numberOfItems"))
            continue;
        if (!out)
            return false;
        ok = false;
    }
    bson_iter_t a;
    if (n->unique) {
        bson_t store = BSON_INITIALIZER;
        bson_iter_t dup;
        if (jsonschema_first_duplicate(&arr, count, &store, &dup)) {
            if (!out) {
                bson_destroy(&store);
                return false;
            }
            ok = false;
            bson_t rule;
            js_rule_begin(out, n, "uniqueItems", true, &rule);
            BSON_APPEND_UTF8(&rule, "reason", "found a duplicate item");
            js_considered(out, &rule, "consideredValue", v);
            js_considered(out, &rule, "duplicatedValue", bson_iter_value(&dup));
            js_rule_end(out, &rule);
        }
        bson_destroy(&store);
    }
    /* items (one schema for all, or one per position), then additionalItems
     * past the positions */
    uint32_t idx = 0;
    bson_t rule;
    if (n->items_is_list && bson_iter_init(&a, &arr)) {
        js_list_rule_t items = {.open = false};
        for (idx = 0; idx < n->items_list.n && bson_iter_next(&a); idx++) {
            if (js_check(n->items_list.v[idx], bson_iter_value(&a), NULL))
                continue;
            if (!out)
                return false;
            ok = false;
            js_out_t *list = js_list_rule_open(out, n, "items", false, "details", &items);
            bson_t entry;
            js_out_begin(list, &entry);
            BSON_APPEND_INT64(&entry, "itemIndex", idx);
            js_check_into(out, n->items_list.v[idx], bson_iter_value(&a), &entry, "details");
            bson_append_document_end(list->arr, &entry);
        }
        js_list_rule_end(out, &items);
    }
    struct {
        const char *kw;
        const js_node_t *schema;
        uint32_t from;
    } each[2] = {{"items", n->items, 0},
                 {"additionalItems", n->addl_items == JS_SCHEMA ? n->addl_items_schema : NULL,
                  (uint32_t)n->items_list.n}};
    for (int k = 0; k < 2; k++) {
        if (!each[k].schema || !bson_iter_init(&a, &arr))
            continue;
        for (uint32_t i = 0; bson_iter_next(&a); i++) {
            if (i < each[k].from || js_check(each[k].schema, bson_iter_value(&a), NULL))
                continue;
            if (!out)
                return false;
            ok = false;
            js_rule_begin(out, n, each[k].kw, false, &rule);
            js_append_annotations(each[k].schema, &rule);
            BSON_APPEND_UTF8(&rule, "reason", "At least one item did not match the sub-schema");
            BSON_APPEND_INT64(&rule, "itemIndex", i);
            js_check_into(out, each[k].schema, bson_iter_value(&a), &rule, "details");
            js_rule_end(out, &rule);
            break;
        }
    }
    if (n->addl_items == JS_FALSE && count > n->items_list.n) {
        if (!out)
            return false;
        ok = false;
        js_rule_begin(out, n, "additionalItems", true, &rule);
        BSON_APPEND_UTF8(&rule, "reason", "found additional items");
        bson_t extra;
        bson_append_array_begin(&rule, "additionalItems", -1, &extra);
        uint32_t i = 0, k = 0;
        bson_iter_init(&a, &arr);
        while (bson_iter_next(&a)) {
            if (i++ < n->items_list.n)
                continue;
            const char *key;
            char buf[16];
            bson_uint32_to_string(k++, &key, buf, sizeof buf);
            bson_append_value(&extra, key, -1, bson_iter_value(&a));
        }
        bson_append_array_end(&rule, &extra);
        js_rule_end(out, &rule);
    }
    return ok;
}

static int js_ref_cmp(const void *key, const void *elem)
{
    return strcmp(key, ((const js_name_ref_t *)elem)->name);
}

/* True when `properties` names `name` (a binary search). */
static bool js_has_prop(const js_node_t *n, const char *name)
{
    return n->nprops &&
           bsearch(name, n->prop_index, n->nprops, sizeof *n->prop_index, js_ref_cmp);
}

/* Up to this many names are looked up one by one; past it, in one pass
 * over the document, so a wide schema over a wide document costs
 * fields x log(names), not fields x names. */
#define JS_LOOKUP_DIRECT 8

/* The first value of each name of `refs` (sorted by name, `count` of them)
 * in `obj`, found in one pass: present[idx], vals[idx] (borrowed). */
static void js_lookup(const bson_t *obj, const js_name_ref_t *refs, size_t count, bool *present,
                      bson_value_t *vals)
{
    memset(present, 0, count * sizeof *present);
    bson_iter_t it;
    if (!bson_iter_init(&it, obj))
        return;
    while (bson_iter_next(&it)) {
        const js_name_ref_t *r = bsearch(bson_iter_key(&it), refs, count, sizeof *refs, js_ref_cmp);
        if (r && !present[r->idx]) {
            present[r->idx] = true;
            if (vals)
                vals[r->idx] = *bson_iter_value(&it);
        }
    }
}

/* properties, patternProperties and additionalProperties over `obj`. */
static bool js_check_properties(const js_node_t *n, const bson_t *obj, js_out_t *out)
{
    bool ok = true;
    bson_iter_t it;
    js_list_rule_t props = {.open = false};
    bool direct = n->nprops <= JS_LOOKUP_DIRECT;
    bool *present = NULL;
    bson_value_t *vals = NULL;
    if (!direct) {
        present = bson_malloc(n->nprops * sizeof *present);
        vals = bson_malloc(n->nprops * sizeof *vals);
        js_lookup(obj, n->prop_index, n->nprops, present, vals);
    }
    for (size_t i = 0; i < n->nprops; i++) {
        const bson_value_t *v;
        if (direct) {
            if (!bson_iter_init_find(&it, obj, n->props[i].name))
                continue;
            v = bson_iter_value(&it);
        } else {
            if (!present[i])
                continue;
            v = &vals[i];
        }
        if (js_check(n->props[i].schema, v, NULL))
            continue;
        ok = false;
        if (!out)
            break;
        js_out_t *list =
            js_list_rule_open(out, n, "properties", false, "propertiesNotSatisfied", &props);
        bson_t entry;
        js_out_begin(list, &entry);
        BSON_APPEND_UTF8(&entry, "propertyName", n->props[i].name);
        js_append_annotations(n->props[i].schema, &entry);
        js_check_into(out, n->props[i].schema, v, &entry, "details");
        bson_append_document_end(list->arr, &entry);
    }
    bson_free(present);
    bson_free(vals);
    if (!ok && !out)
        return false;
    js_list_rule_end(out, &props);
    if (n->addl_props == JS_ABSENT && n->npatterns == 0)
        return ok;
    /* additionalProperties first, then patternProperties, as mongod lists them */
    bson_t pattern_arr = BSON_INITIALIZER;
    js_out_t pattern_out = {&pattern_arr, 0, out && out->brief};
    bool addl_schema_done = false;
    js_list_rule_t addl = {.open = false};
    bson_t addl_rule;
    if (!bson_iter_init(&it, obj))
        return false;
    while (bson_iter_next(&it)) {
        const char *name = bson_iter_key(&it);
        uint32_t nlen = bson_iter_key_len(&it);
        bool patterned = false;
        for (size_t p = 0; p < n->npatterns; p++) {
            if (!jsonschema_regex_test(&n->patterns[p].re, name, nlen))
                continue;
            patterned = true;
            if (js_check(n->patterns[p].schema, bson_iter_value(&it), NULL))
                continue;
            if (!out)
                goto fail_fast;
            ok = false;
            bson_t entry;
            js_out_begin(&pattern_out, &entry);
            BSON_APPEND_UTF8(&entry, "propertyName", name);
            BSON_APPEND_UTF8(&entry, "regexMatched", n->patterns[p].name);
            js_check_into(out, n->patterns[p].schema, bson_iter_value(&it), &entry, "details");
            bson_append_document_end(&pattern_arr, &entry);
        }
        if (patterned || js_has_prop(n, name))
            continue;
        if (n->addl_props == JS_FALSE) {
            if (!out)
                goto fail_fast;
            ok = false;
            js_list_rule_add_name(out, n, "additionalProperties", true, "additionalProperties",
                                  &addl, name);
        } else if (n->addl_props == JS_SCHEMA && !addl_schema_done &&
                   !js_check(n->addl_props_schema, bson_iter_value(&it), NULL)) {
            if (!out)
                goto fail_fast;
            ok = false;
            addl_schema_done = true;
            js_rule_begin(out, n, "additionalProperties", false, &addl_rule);
            js_append_annotations(n->addl_props_schema, &addl_rule);
            BSON_APPEND_UTF8(&addl_rule, "reason",
                             "at least one additional property did not match the subschema");
            BSON_APPEND_UTF8(&addl_rule, "failingProperty", name);
            js_check_into(out, n->addl_props_schema, bson_iter_value(&it), &addl_rule, "details");
            js_rule_end(out, &addl_rule);
        }
    }
    js_list_rule_end(out, &addl);
    if (pattern_out.n) {
        bson_t prule;
        js_rule_begin(out, n, "patternProperties", false, &prule);
        bson_append_array(&prule, "details", -1, &pattern_arr);
        js_rule_end(out, &prule);
    }
    bson_destroy(&pattern_arr);
    return ok;
fail_fast:
    bson_destroy(&pattern_arr);
    return false;
}

/* The object keywords over the document `v`. */
static bool js_check_object(const js_node_t *n, const bson_value_t *v, js_out_t *out)
{
    bson_t obj;
    if (!js_view(v, &obj))
        return false;
    bool ok = js_check_properties(n, &obj, out);
    if (!ok && !out)
        return false;
    bson_iter_t it;
    js_list_rule_t missing = {.open = false};
    bool direct = n->nrequired <= JS_LOOKUP_DIRECT;
    bool *present = NULL;
    if (!direct) {
        present = bson_malloc(n->nrequired * sizeof *present);
        js_lookup(&obj, n->required_index, n->nrequired, present, NULL);
    }
    for (size_t i = 0; i < n->nrequired; i++) {
        if (direct ? bson_iter_init_find(&it, &obj, n->required[i]) : present[i])
            continue;
        ok = false;
        if (!out)
            break;
        js_list_rule_add_name(out, n, "required", true, "missingProperties", &missing,
                              n->required[i]);
    }
    bson_free(present);
    if (!ok && !out)
        return false;
    js_list_rule_end(out, &missing);
    uint32_t nfields = bson_count_keys(&obj);
    static const char *const kws[2] = {"minProperties", "maxProperties"};
    for (int i = 0; i < 2; i++) {
        if (js_check_count(out, n, kws[i], i == 0 ? n->min_props : n->max_props, i == 0, nfields,
                           "specified number of properties was not satisfied", NULL,
                           "numberOfProperties"))
            continue;
        if (!out)
            return false;
        ok = false;
    }
    js_list_rule_t deps = {.open = false};
    for (size_t d = 0; d < n->ndeps; d++) {
        const js_entry_t *e = &n->deps[d];
        if (!bson_iter_init_find(&it, &obj, e->name))
            continue;
        bool dep_ok = true, *have = NULL;
        if (e->schema) {
            dep_ok = js_check(e->schema, v, NULL);
        } else {
            have = bson_malloc(e->nprops * sizeof *have);
            if (e->nprops <= JS_LOOKUP_DIRECT)
                for (size_t p = 0; p < e->nprops; p++)
                    have[p] = bson_iter_init_find(&it, &obj, e->props[p]);
            else
                js_lookup(&obj, e->props_index, e->nprops, have, NULL);
            for (size_t p = 0; p < e->nprops && dep_ok; p++)
                dep_ok = have[p];
        }
        if (dep_ok || !out) {
            bson_free(have);
            if (dep_ok)
                continue;
            return false;
        }
        ok = false;
        js_out_t *list =
            js_list_rule_open(out, n, "dependencies", false, "failingDependencies", &deps);
        bson_t entry;
        js_out_begin(list, &entry);
        BSON_APPEND_UTF8(&entry, "conditionalProperty", e->name);
        if (e->schema) {
            js_check_into(out, e->schema, v, &entry, "details");
        } else {
            bson_t m;
            uint32_t k = 0;
            bson_append_array_begin(&entry, "missingProperties", -1, &m);
            for (size_t p = 0; p < e->nprops; p++) {
                if (have[p])
                    continue;
                const char *key;
                char buf[16];
                bson_uint32_to_string(k++, &key, buf, sizeof buf);
                BSON_APPEND_UTF8(&m, key, e->props[p]);
            }
            bson_append_array_end(&entry, &m);
        }
        bson_free(have);
        bson_append_document_end(list->arr, &entry);
    }
    js_list_rule_end(out, &deps);
    return ok;
}

/* allOf / anyOf / oneOf: {operatorName, schemasNotSatisfied: [{index, details}]}. */
static void js_explain_list(js_out_t *out, const js_node_t *n, const char *kw,
                            const js_list_t *l, const bson_value_t *v)
{
    bson_t rule, arr;
    js_rule_begin(out, n, kw, false, &rule);
    bson_append_array_begin(&rule, "schemasNotSatisfied", -1, &arr);
    js_out_t list = {&arr, 0, out && out->brief};
    for (size_t i = 0; i < l->n; i++) {
        if (js_check(l->v[i], v, NULL))
            continue;
        bson_t entry;
        js_out_begin(&list, &entry);
        BSON_APPEND_INT32(&entry, "index", (int32_t)i);
        js_check_into(out, l->v[i], v, &entry, "details");
        bson_append_document_end(&arr, &entry);
    }
    bson_append_array_end(&rule, &arr);
    js_rule_end(out, &rule);
}

static bool js_check_logical(const js_node_t *n, const bson_value_t *v, js_out_t *out)
{
    bool ok = true;
    for (size_t i = 0; i < n->all_of.n; i++) {
        if (js_check(n->all_of.v[i], v, NULL))
            continue;
        if (!out)
            return false;
        ok = false;
        js_explain_list(out, n, "allOf", &n->all_of, v);
        break;
    }
    if (n->any_of.n) {
        bool any = false;
        for (size_t i = 0; i < n->any_of.n && !any; i++)
            any = js_check(n->any_of.v[i], v, NULL);
        if (!any) {
            if (!out)
                return false;
            ok = false;
            js_explain_list(out, n, "anyOf", &n->any_of, v);
        }
    }
    if (n->one_of.n) {
        size_t matched = 0;
        for (size_t i = 0; i < n->one_of.n; i++)
            matched += js_check(n->one_of.v[i], v, NULL);
        if (matched != 1) {
            if (!out)
                return false;
            ok = false;
            if (matched == 0) {
                js_explain_list(out, n, "oneOf", &n->one_of, v);
            } else {
                bson_t rule, arr;
                js_rule_begin(out, n, "oneOf", false, &rule);
                BSON_APPEND_UTF8(&rule, "reason", "more than one subschema matched");
                bson_append_array_begin(&rule, "matchingSchemaIndexes", -1, &arr);
                uint32_t k = 0;
                for (size_t i = 0; i < n->one_of.n; i++) {
                    if (!js_check(n->one_of.v[i], v, NULL))
                        continue;
                    const char *key;
                    char buf[16];
                    bson_uint32_to_string(k++, &key, buf, sizeof buf);
                    BSON_APPEND_INT32(&arr, key, (int32_t)i);
                }
                bson_append_array_end(&rule, &arr);
                js_rule_end(out, &rule);
            }
        }
    }
    if (n->not_schema && js_check(n->not_schema, v, NULL)) {
        if (!out)
            return false;
        ok = false;
        bson_t rule;
        js_rule_begin(out, n, "not", false, &rule);
        BSON_APPEND_UTF8(&rule, "reason", "child expression matched");
        js_rule_end(out, &rule);
    }
    if (n->nenums) {
        bool found = false;
        for (size_t i = 0; i < n->nenums && !found; i++)
            found = jsonschema_equal(&n->enums[i], v);
        if (!found) {
            if (!out)
                return false;
            ok = false;
            js_fail_value(out, n, "enum", "value was not found in enum", v);
        }
    }
    return ok;
}

/* Checks `v` against `n` (the whole document at the top). Failures are
 * appended to `out` when it is not NULL. */
static bool js_check(const js_node_t *n, const bson_value_t *v, js_out_t *out)
{
    bool ok = js_check_scalar(n, v, out);
    if (!ok && !out)
        return false;
    if (v->value_type == BSON_TYPE_ARRAY && !js_check_array(n, v, out)) {
        if (!out)
            return false;
        ok = false;
    }
    if (v->value_type == BSON_TYPE_DOCUMENT && !js_check_object(n, v, out)) {
        if (!out)
            return false;
        ok = false;
    }
    if (!js_check_logical(n, v, out)) {
        if (!out)
            return false;
        ok = false;
    }
    if (n->has_type && !js_type_in(n->types, n->type_number, v->value_type)) {
        if (!out)
            return false;
        ok = false;
        bson_t rule;
        js_rule_begin(out, n, jsonschema_keyword_names[n->type_kw], true, &rule);
        BSON_APPEND_UTF8(&rule, "reason", "type did not match");
        js_considered(out, &rule, "consideredValue", v);
        BSON_APPEND_UTF8(&rule, "consideredType", shellfmt_type_name(v->value_type));
        js_rule_end(out, &rule);
    }
    return ok;
}

static void js_doc_value(const bson_t *doc, bson_value_t *v)
{
    memset(v, 0, sizeof *v);
    v->value_type = BSON_TYPE_DOCUMENT;
    v->value.v_doc.data = (uint8_t *)bson_get_data(doc);
    v->value.v_doc.data_len = doc->len;
}

bool jsonschema_matches(const jsonschema_t *s, const bson_t *doc)
{
    bson_value_t v;
    js_doc_value(doc, &v);
    return js_check(s->root, &v, NULL);
}

void jsonschema_explain(const jsonschema_t *s, const bson_t *doc, bool brief, bson_t *out)
{
    bson_value_t v;
    js_doc_value(doc, &v);
    BSON_APPEND_UTF8(out, "operatorName", "$jsonSchema");
    const js_node_t *root = s->root;
    if (root->has_type && !js_type_in(root->types, false, BSON_TYPE_DOCUMENT)) {
        /* a top-level type other than object: mongod's always-false node */
        if (!brief) {
            bson_t sa;
            bson_append_document_begin(out, "specifiedAs", -1, &sa);
            bson_t spec;
            if (bson_init_static(&spec, s->copy, s->copy_len))
                BSON_APPEND_DOCUMENT(&sa, "$jsonSchema", &spec);
            bson_append_document_end(out, &sa);
        }
        BSON_APPEND_UTF8(out, "reason", "expression always evaluates to false");
        return;
    }
    js_append_annotations(root, out);
    bson_t arr;
    bson_append_array_begin(out, "schemaRulesNotSatisfied", -1, &arr);
    js_out_t o = {&arr, 0, brief};
    js_check(root, &v, &o);
    bson_append_array_end(out, &arr);
}
