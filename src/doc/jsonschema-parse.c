/* jsonschema-parse: compiles $jsonSchema documents into schema nodes,
 * refusing what mongod refuses with its codes and messages (unknown and
 * unsupported keywords, wrong argument types, duplicates). */
#include <math.h>
#include <stdlib.h>
#include <stddef.h>
#include <string.h>

#include "doc/compare.h"
#include "doc/jsonschema-private.h"
#include "doc/regexp.h"
#include "util/bsonview.h"
#include "util/shellfmt.h"

const char *const jsonschema_keyword_names[K_COUNT] = {
#define JS_KEYWORD_NAME(tag, name) name,
    JSONSCHEMA_KEYWORDS(JS_KEYWORD_NAME)
#undef JS_KEYWORD_NAME
};

/* A keyword's element in the schema being parsed (raw NULL: absent); a
 * struct so that an array of them keeps bson_iter_t's alignment. */
typedef struct js_kw {
    bson_iter_t it;
} js_kw_t;

/* Keywords mongod names as unsupported rather than unknown. */
static const char *const js_unsupported[] = {"$ref", "$schema", "default", "definitions",
                                             "format", "id", NULL};

/* -- freeing -- */

/* Frees what `r` holds (nothing when it holds no pattern). */
static void js_regex_clear(js_regex_t *r)
{
    pcre2_match_data_free(r->md);
    pcre2_code_free(r->code);
}


static void js_list_destroy(js_list_t *l)
{
    for (size_t i = 0; i < l->n; i++)
        jsonschema_node_destroy(l->v[i]);
    bson_free(l->v);
}

static void js_entries_destroy(js_entry_t *e, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        jsonschema_node_destroy(e[i].schema);
        js_regex_clear(&e[i].re);
        bson_free(e[i].props);
        bson_free(e[i].props_index);
    }
    bson_free(e);
}

/* Frees what `n` owns: the properties and the required names, each with
 * its index, then the rest in the order js_node_t declares it. */
void jsonschema_node_destroy(js_node_t *n)
{
    if (!n)
        return;
    js_entries_destroy(n->props, n->nprops);
    bson_free(n->prop_index);
    bson_free(n->required);
    bson_free(n->required_index);
    js_entries_destroy(n->patterns, n->npatterns);
    jsonschema_node_destroy(n->addl_props_schema);
    bson_free(n->enum_vals);
    js_regex_clear(&n->pattern);
    jsonschema_node_destroy(n->items);
    js_list_destroy(&n->items_list);
    jsonschema_node_destroy(n->addl_items_schema);
    js_entries_destroy(n->deps, n->ndeps);
    js_list_destroy(&n->all_of);
    js_list_destroy(&n->any_of);
    js_list_destroy(&n->one_of);
    jsonschema_node_destroy(n->not_schema);
    bson_free(n);
}

void jsonschema_destroy(jsonschema_t *s)
{
    if (!s)
        return;
    jsonschema_node_destroy(s->root);
    bson_free(s->copy);
    bson_free(s);
}

static int js_ref_sort_cmp(const void *a, const void *b)
{
    return strcmp(((const js_name_ref_t *)a)->name, ((const js_name_ref_t *)b)->name);
}

/* -- parsing -- */


static const char *js_type_name(bson_type_t t)
{
    return shellfmt_type_name(t);
}

/* A nested schema held by iterator `it` (already checked to be a document). */
static js_node_t *js_parse_iter(const bson_iter_t *it, int depth, dberr_t *err)
{
    bson_t sub;
    if (!bsonview_iter(it, &sub)) {
        dberr_set(err, DBERR_BAD_VALUE, "invalid $jsonSchema document");
        return NULL;
    }
    return jsonschema_node_parse(&sub, depth + 1, err);
}

/* Compiles pattern[0, len) into `r` (cleared by js_regex_clear). */
static bool js_regex_compile(js_regex_t *r, const char *pattern, size_t len, dberr_t *err)
{
    r->code = regexp_compile_query(pattern, len, "", err);
    if (!r->code)
        return false;
    r->md = pcre2_match_data_create_from_pattern(r->code, NULL);
    r->source = pattern;
    return true;
}

bool jsonschema_regex_test(const js_regex_t *r, const char *s, size_t len)
{
    return pcre2_match(r->code, (PCRE2_SPTR)s, len, 0, 0, r->md, NULL) >= 0;
}

/* "minLength: -1" as mongod prints an element in parse errors. */
static char *js_render_element(const bson_iter_t *it)
{
    bson_string_t *s = bson_string_new(NULL);
    shellfmt_append_element(s, bson_iter_key(it), bson_iter_value((bson_iter_t *)it));
    return bson_string_free(s, false);
}

/* Reads a keyword that is a boolean or a schema (additionalItems,
 * additionalProperties; the caller refuses any other type): *flag gets
 * JS_TRUE / JS_FALSE, or JS_SCHEMA with the parsed schema in *schema.
 * False with the schema's parse error. */
static bool js_parse_flag_or_schema(const bson_iter_t *it, int depth, js_flag_t *flag,
                                    js_node_t **schema, dberr_t *err)
{
    if (BSON_ITER_HOLDS_BOOL(it)) {
        *flag = bson_iter_bool(it) ? JS_TRUE : JS_FALSE;
        return true;
    }
    *flag = JS_SCHEMA;
    return (*schema = js_parse_iter(it, depth, err)) != NULL;
}

/* mongod's parseIntegerElementToNonNegativeLong. */
static bool js_parse_count(const bson_iter_t *it, int64_t *out, dberr_t *err)
{
    const bson_value_t *v = bson_iter_value((bson_iter_t *)it);
    char *shown = js_render_element(it);
    bool ok = false;
    if (!compare_is_number(v)) {
        dberr_set(err, DBERR_FAILED_TO_PARSE, "Expected a number in: %s", shown);
        goto cleanup;
    }
    double d = compare_to_double(v);
    if (v->value_type == BSON_TYPE_INT32 || v->value_type == BSON_TYPE_INT64) {
        *out = bson_iter_as_int64((bson_iter_t *)it);
    } else if (isnan(d) || d != floor(d)) {
        dberr_set(err, DBERR_FAILED_TO_PARSE, "Expected an integer: %s", shown);
        goto cleanup;
    } else if (d >= 9223372036854775808.0 || d < -9223372036854775808.0) {
        dberr_set(err, DBERR_FAILED_TO_PARSE, "Cannot represent as a 64-bit integer: %s", shown);
        goto cleanup;
    } else {
        *out = (int64_t)d;
    }
    if (*out < 0) {
        dberr_set(err, DBERR_FAILED_TO_PARSE, "Expected a positive number in: %s", shown);
        goto cleanup;
    }
    ok = true;
cleanup:
    bson_free(shown);
    return ok;
}

/* One alias of `type` (JSON types) or `bsonType` (BSON aliases). */
static bool js_add_type(js_node_t *n, const char *alias, bool json, dberr_t *err)
{
    static const struct {
        const char *name;
        bson_type_t type;
    } json_aliases[] = {
        {"array", BSON_TYPE_ARRAY}, {"boolean", BSON_TYPE_BOOL},  {"null", BSON_TYPE_NULL},
        {"object", BSON_TYPE_DOCUMENT}, {"string", BSON_TYPE_UTF8},
    };
    bson_type_t t = BSON_TYPE_EOD;
    if (strcmp(alias, "integer") == 0)
        return dberr_set(err, DBERR_FAILED_TO_PARSE,
                         "$jsonSchema type 'integer' is not currently supported.");
    if (strcmp(alias, "number") == 0) {
        n->type_number = true;
        return true;
    }
    if (json) {
        for (size_t i = 0; i < sizeof json_aliases / sizeof json_aliases[0]; i++)
            if (strcmp(alias, json_aliases[i].name) == 0)
                t = json_aliases[i].type;
    } else if (!shellfmt_type_from_name(alias, &t)) {
        t = BSON_TYPE_EOD;
    }
    if (t == BSON_TYPE_EOD)
        return dberr_set(err, DBERR_BAD_VALUE, "Unknown type name alias: %s", alias);
    n->types |= t == BSON_TYPE_MINKEY   ? UINT64_C(1) << 62
                : t == BSON_TYPE_MAXKEY ? UINT64_C(1) << 63
                                        : UINT64_C(1) << t;
    return true;
}

static bool js_parse_type(js_node_t *n, js_keyword_t kw, const bson_iter_t *it, dberr_t *err)
{
    const char *name = jsonschema_keyword_names[kw];
    n->has_type = true;
    n->type_kw = kw;
    if (BSON_ITER_HOLDS_UTF8(it))
        return js_add_type(n, bson_iter_utf8(it, NULL), kw == K_TYPE, err);
    if (!BSON_ITER_HOLDS_ARRAY(it))
        return dberr_set(err, DBERR_TYPE_MISMATCH,
                         "$jsonSchema keyword '%s' must be either a string or an array of strings",
                         name);
    bson_iter_t child, seen;
    bson_iter_recurse(it, &child);
    int count = 0;
    while (bson_iter_next(&child)) {
        if (!BSON_ITER_HOLDS_UTF8(&child))
            return dberr_set(err, DBERR_TYPE_MISMATCH,
                             "$jsonSchema keyword '%s' array elements must be strings", name);
        const char *alias = bson_iter_utf8(&child, NULL);
        if (strcmp(alias, "integer") == 0)
            return js_add_type(n, alias, kw == K_TYPE, err);
        bson_iter_recurse(it, &seen);
        for (int i = 0; i < count && bson_iter_next(&seen); i++)
            if (strcmp(bson_iter_utf8(&seen, NULL), alias) == 0)
                return dberr_set(err, DBERR_FAILED_TO_PARSE,
                                 "$jsonSchema keyword '%s' has duplicate value: %s", name, alias);
        count++;
        if (!js_add_type(n, alias, kw == K_TYPE, err))
            return false;
    }
    if (count == 0)
        return dberr_set(err, DBERR_FAILED_TO_PARSE,
                         "$jsonSchema keyword '%s' must name at least one type", name);
    return true;
}

static bool js_number_arg(const bson_iter_t *it, const char *kw, dberr_t *err)
{
    if (!compare_is_number(bson_iter_value((bson_iter_t *)it)))
        return dberr_set(err, DBERR_TYPE_MISMATCH, "$jsonSchema keyword '%s' must be a number",
                         kw);
    return true;
}

static bool js_bool_arg(const bson_iter_t *it, const char *kw, bool *out, dberr_t *err)
{
    if (!BSON_ITER_HOLDS_BOOL(it))
        return dberr_set(err, DBERR_TYPE_MISMATCH, "$jsonSchema keyword '%s' must be a boolean",
                         kw);
    *out = bson_iter_bool(it);
    return true;
}

/* Scalar keywords: pattern, maxLength, minLength, multipleOf, maximum,
 * exclusiveMaximum, minimum, exclusiveMinimum. */
static bool js_parse_scalar(js_node_t *n, js_kw_t *kw, dberr_t *err)
{
    if (kw[K_PATTERN].it.raw) {
        if (!BSON_ITER_HOLDS_UTF8(&kw[K_PATTERN].it))
            return dberr_set(err, DBERR_TYPE_MISMATCH,
                             "$jsonSchema keyword 'pattern' must be a string");
        uint32_t len;
        const char *p = bson_iter_utf8(&kw[K_PATTERN].it, &len);
        if (!js_regex_compile(&n->pattern, p, len, err))
            return false;
    }
    if (kw[K_MAX_LENGTH].it.raw && !js_parse_count(&kw[K_MAX_LENGTH].it, &n->max_len, err))
        return false;
    if (kw[K_MIN_LENGTH].it.raw && !js_parse_count(&kw[K_MIN_LENGTH].it, &n->min_len, err))
        return false;
    if (kw[K_MULTIPLE_OF].it.raw) {
        if (!js_number_arg(&kw[K_MULTIPLE_OF].it, "multipleOf", err))
            return false;
        n->mult = *bson_iter_value(&kw[K_MULTIPLE_OF].it);
        double d = compare_to_double(&n->mult);
        if (!(d > 0))
            return dberr_set(err, DBERR_FAILED_TO_PARSE,
                             "$jsonSchema keyword 'multipleOf' must have a positive value");
        n->has_mult = true;
    }
    static const struct {
        js_keyword_t kw, excl;
        const char *name, *excl_name;
    } bounds[] = {{K_MAXIMUM, K_EXCLUSIVE_MAXIMUM, "maximum", "exclusiveMaximum"},
                  {K_MINIMUM, K_EXCLUSIVE_MINIMUM, "minimum", "exclusiveMinimum"}};
    for (int i = 0; i < 2; i++) {
        bool excl = false;
        if (!kw[bounds[i].kw].it.raw) {
            if (kw[bounds[i].excl].it.raw)
                return dberr_set(err, DBERR_FAILED_TO_PARSE,
                                 "$jsonSchema keyword '%s' must be a present if %s is present",
                                 bounds[i].name, bounds[i].excl_name);
            continue;
        }
        if (kw[bounds[i].excl].it.raw && !js_bool_arg(&kw[bounds[i].excl].it, bounds[i].excl_name,
                                                    &excl, err))
            return false;
        if (!js_number_arg(&kw[bounds[i].kw].it, bounds[i].name, err))
            return false;
        if (i == 0) {
            n->has_max = true, n->excl_max = excl;
            n->maximum = *bson_iter_value(&kw[K_MAXIMUM].it);
        } else {
            n->has_min = true, n->excl_min = excl;
            n->minimum = *bson_iter_value(&kw[K_MINIMUM].it);
        }
    }
    return true;
}

/* The array `v` of `n` elements of `size` bytes with room for one more:
 * it keeps no capacity but doubles whenever `n` is 0 or a power of two. */
static void *js_grow(void *v, size_t n, size_t size)
{
    if ((n & (n - 1)) == 0)
        v = bson_realloc(v, (n ? 2 * n : 1) * size);
    return v;
}

/* The elements or fields of keyword `name`'s value `it` into `child` when it
 * has `type` (an array or a document); otherwise false with TypeMismatch
 * "$jsonSchema keyword '<name>' must be an array" (or "an object"). */
static bool js_recurse(const bson_iter_t *it, bson_type_t type, const char *name,
                       bson_iter_t *child, dberr_t *err)
{
    if (bson_iter_type(it) != type)
        return dberr_set(err, DBERR_TYPE_MISMATCH, "$jsonSchema keyword '%s' must be %s", name,
                         type == BSON_TYPE_ARRAY ? "an array" : "an object");
    bson_iter_recurse(it, child);
    return true;
}

/* True when keyword `name`'s value `it` has `type` (an array or a
 * document); otherwise false with TypeMismatch "$jsonSchema keyword
 * '<name>' must be an array (an object), but found an element of type ...". */
static bool js_keyword_is(const bson_iter_t *it, bson_type_t type, const char *name,
                          dberr_t *err)
{
    if (bson_iter_type(it) == type)
        return true;
    return dberr_set(err, DBERR_TYPE_MISMATCH,
                     "$jsonSchema keyword '%s' must be %s, but found an element of type %s", name,
                     type == BSON_TYPE_ARRAY ? "an array" : "an object",
                     js_type_name(bson_iter_type(it)));
}

/* True when the element `it` has `type`; otherwise false with TypeMismatch
 * and `fmt` (two %s: `name`, then the name of the type found). */
static bool js_element_is(const bson_iter_t *it, bson_type_t type, const char *fmt,
                          const char *name, dberr_t *err)
{
    if (bson_iter_type(it) == type)
        return true;
    return dberr_set(err, DBERR_TYPE_MISMATCH, fmt, name, js_type_name(bson_iter_type(it)));
}

/* Appends the strings of the array `it` to *v (*n of them); false with
 * js_element_is's error (`fmt`, `name`) at an element of another type. */
static bool js_strings(const bson_iter_t *it, const char ***v, size_t *n, const char *fmt,
                       const char *name, dberr_t *err)
{
    bson_iter_t child;
    bson_iter_recurse(it, &child);
    while (bson_iter_next(&child)) {
        if (!js_element_is(&child, BSON_TYPE_UTF8, fmt, name, err))
            return false;
        *v = js_grow(*v, *n, sizeof **v);
        (*v)[(*n)++] = bson_iter_utf8(&child, NULL);
    }
    return true;
}

/* An array of subschemas (allOf, anyOf, oneOf, items). */
static bool js_parse_list(js_list_t *l, const bson_iter_t *it, const char *name, int depth,
                          dberr_t *err)
{
    bson_iter_t child;
    if (!js_recurse(it, BSON_TYPE_ARRAY, name, &child, err))
        return false;
    while (bson_iter_next(&child)) {
        if (!js_element_is(&child, BSON_TYPE_DOCUMENT,
                           "$jsonSchema keyword '%s' must be an array of objects, but found an "
                           "element of type %s",
                           name, err))
            return false;
        js_node_t *sub = js_parse_iter(&child, depth, err);
        if (!sub)
            return false;
        l->v = js_grow(l->v, l->n, sizeof *l->v);
        l->v[l->n++] = sub;
    }
    return true;
}

/* Array keywords: minItems, maxItems, uniqueItems, items, additionalItems. */
static bool js_parse_array(js_node_t *n, js_kw_t *kw, int depth, dberr_t *err)
{
    if (kw[K_MIN_ITEMS].it.raw && !js_parse_count(&kw[K_MIN_ITEMS].it, &n->min_items, err))
        return false;
    if (kw[K_MAX_ITEMS].it.raw && !js_parse_count(&kw[K_MAX_ITEMS].it, &n->max_items, err))
        return false;
    if (kw[K_UNIQUE_ITEMS].it.raw && !js_bool_arg(&kw[K_UNIQUE_ITEMS].it, "uniqueItems", &n->unique,
                                               err))
        return false;
    if (kw[K_ITEMS].it.raw) {
        bson_iter_t *it = &kw[K_ITEMS].it;
        if (BSON_ITER_HOLDS_ARRAY(it)) {
            n->items_is_list = true;
            bson_iter_t child;
            bson_iter_recurse(it, &child);
            while (bson_iter_next(&child))
                if (!BSON_ITER_HOLDS_DOCUMENT(&child))
                    return dberr_set(err, DBERR_TYPE_MISMATCH,
                                     "$jsonSchema keyword 'items' requires that each element of "
                                     "the array is an object, but found a %s",
                                     js_type_name(bson_iter_type(&child)));
            if (!js_parse_list(&n->items_list, it, "items", depth, err))
                return false;
        } else if (BSON_ITER_HOLDS_DOCUMENT(it)) {
            if (!(n->items = js_parse_iter(it, depth, err)))
                return false;
        } else {
            return dberr_set(err, DBERR_TYPE_MISMATCH,
                             "$jsonSchema keyword 'items' must be an array or an object, not %s",
                             js_type_name(bson_iter_type(it)));
        }
    }
    if (kw[K_ADDITIONAL_ITEMS].it.raw) {
        bson_iter_t *it = &kw[K_ADDITIONAL_ITEMS].it;
        if (!BSON_ITER_HOLDS_BOOL(it) && !BSON_ITER_HOLDS_DOCUMENT(it))
            return dberr_set(err, DBERR_TYPE_MISMATCH,
                             "$jsonSchema keyword 'additionalItems' must be either an object or a "
                             "boolean, but got a %s",
                             js_type_name(bson_iter_type(it)));
        if (!js_parse_flag_or_schema(it, depth, &n->addl_items, &n->addl_items_schema, err))
            return false;
        if (!n->items_is_list) /* only an items array leaves items over */
            n->addl_items = JS_ABSENT;
    }
    return true;
}

static int js_strcmp(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The names of `props` with their positions, sorted by name. */
static js_name_ref_t *js_name_index(const js_entry_t *props, size_t n)
{
    js_name_ref_t *refs = bson_malloc((n + 1) * sizeof *refs);
    for (size_t i = 0; i < n; i++)
        refs[i] = (js_name_ref_t){props[i].name, i};
    qsort(refs, n, sizeof *refs, js_ref_sort_cmp);
    return refs;
}

/* required: a non-empty array of distinct strings. */
static bool js_parse_required(js_node_t *n, const bson_iter_t *it, dberr_t *err)
{
    if (!js_keyword_is(it, BSON_TYPE_ARRAY, "required", err) ||
        !js_strings(it, &n->required, &n->nrequired,
                    "$jsonSchema keyword '%s' must be an array of strings, but found an element "
                    "of type: %s",
                    "required", err))
        return false;
    if (n->nrequired == 0)
        return dberr_set(err, DBERR_FAILED_TO_PARSE,
                         "$jsonSchema keyword 'required' cannot be an empty array");
    /* mongod checks (and reports missing) properties in sorted order; sorted,
     * duplicates sit side by side */
    qsort(n->required, n->nrequired, sizeof *n->required, js_strcmp);
    for (size_t i = 1; i < n->nrequired; i++)
        if (strcmp(n->required[i - 1], n->required[i]) == 0)
            return dberr_set(err, DBERR_FAILED_TO_PARSE,
                             "$jsonSchema keyword 'required' array cannot contain duplicate "
                             "values");
    n->required_index = bson_malloc(n->nrequired * sizeof *n->required_index);
    for (size_t i = 0; i < n->nrequired; i++)
        n->required_index[i] = (js_name_ref_t){n->required[i], i};
    return true;
}

static js_entry_t *js_entry_add(js_entry_t **v, size_t *n, const char *name)
{
    *v = js_grow(*v, *n, sizeof **v);
    js_entry_t *e = &(*v)[(*n)++];
    memset(e, 0, sizeof *e);
    e->name = name;
    return e;
}

/* dependencies: {name: <schema> | [names]}. */
static bool js_parse_dependencies(js_node_t *n, const bson_iter_t *it, int depth, dberr_t *err)
{
    bson_iter_t dep;
    if (!js_recurse(it, BSON_TYPE_DOCUMENT, "dependencies", &dep, err))
        return false;
    while (bson_iter_next(&dep)) {
        const char *name = bson_iter_key(&dep);
        if (BSON_ITER_HOLDS_DOCUMENT(&dep)) {
            js_entry_t *e = js_entry_add(&n->deps, &n->ndeps, name);
            if (!(e->schema = js_parse_iter(&dep, depth, err)))
                return false;
            continue;
        }
        if (!BSON_ITER_HOLDS_ARRAY(&dep))
            return dberr_set(err, DBERR_TYPE_MISMATCH,
                             "property '%s' in $jsonSchema keyword 'dependencies' must be either "
                             "an object or an array",
                             name);
        js_entry_t *e = js_entry_add(&n->deps, &n->ndeps, name);
        if (!js_strings(&dep, &e->props, &e->nprops,
                        "array '%s' in $jsonSchema keyword 'dependencies' can only contain "
                        "strings, but found element of type: %s",
                        name, err))
            return false;
        if (e->nprops == 0)
            return dberr_set(err, DBERR_FAILED_TO_PARSE,
                             "property '%s' in $jsonSchema keyword 'dependencies' cannot be an "
                             "empty array",
                             name);
        /* sorted by name: duplicates side by side, and a one-pass lookup */
        e->props_index = bson_malloc(e->nprops * sizeof *e->props_index);
        for (size_t i = 0; i < e->nprops; i++)
            e->props_index[i] = (js_name_ref_t){e->props[i], i};
        if (e->nprops > 1) /* else nothing to sort, and e->props_index may be NULL (qsort must not get it) */
            qsort(e->props_index, e->nprops, sizeof *e->props_index, js_ref_sort_cmp);
        for (size_t i = 1; i < e->nprops; i++)
            if (strcmp(e->props_index[i - 1].name, e->props_index[i].name) == 0)
                return dberr_set(err, DBERR_FAILED_TO_PARSE,
                                 "array '%s' in $jsonSchema keyword 'dependencies' contains "
                                 "duplicate element: %s",
                                 name, e->props_index[i].name);
    }
    return true;
}

/* Object keywords: required, properties, patternProperties,
 * additionalProperties, minProperties, maxProperties, dependencies. */
static bool js_parse_object(js_node_t *n, js_kw_t *kw, int depth, dberr_t *err)
{
    if (kw[K_REQUIRED].it.raw && !js_parse_required(n, &kw[K_REQUIRED].it, err))
        return false;
    if (kw[K_PROPERTIES].it.raw) {
        bson_iter_t p;
        if (!js_recurse(&kw[K_PROPERTIES].it, BSON_TYPE_DOCUMENT, "properties", &p, err))
            return false;
        while (bson_iter_next(&p)) {
            if (!BSON_ITER_HOLDS_DOCUMENT(&p))
                return dberr_set(err, DBERR_TYPE_MISMATCH,
                                 "Nested schema for $jsonSchema property '%s' must be an object",
                                 bson_iter_key(&p));
            js_entry_t *e = js_entry_add(&n->props, &n->nprops, bson_iter_key(&p));
            if (!(e->schema = js_parse_iter(&p, depth, err)))
                return false;
        }
        n->prop_index = js_name_index(n->props, n->nprops);
    }
    if (kw[K_PATTERN_PROPERTIES].it.raw) {
        bson_iter_t p;
        if (!js_recurse(&kw[K_PATTERN_PROPERTIES].it, BSON_TYPE_DOCUMENT, "patternProperties", &p,
                        err))
            return false;
        while (bson_iter_next(&p)) {
            uint32_t klen = bson_iter_key_len(&p);
            if (!BSON_ITER_HOLDS_DOCUMENT(&p))
                return dberr_set(err, DBERR_TYPE_MISMATCH,
                                 "$jsonSchema keyword 'patternProperties' has property '%s' which "
                                 "is not an object",
                                 bson_iter_key(&p));
            js_entry_t *e = js_entry_add(&n->patterns, &n->npatterns, bson_iter_key(&p));
            if (!(e->schema = js_parse_iter(&p, depth, err)) ||
                !js_regex_compile(&e->re, e->name, klen, err))
                return false;
        }
    }
    if (kw[K_ADDITIONAL_PROPERTIES].it.raw) {
        bson_iter_t *it = &kw[K_ADDITIONAL_PROPERTIES].it;
        if (!BSON_ITER_HOLDS_BOOL(it) && !BSON_ITER_HOLDS_DOCUMENT(it))
            return dberr_set(err, DBERR_TYPE_MISMATCH,
                             "$jsonSchema keyword 'additionalProperties' must be an object or a "
                             "boolean");
        if (!js_parse_flag_or_schema(it, depth, &n->addl_props, &n->addl_props_schema, err))
            return false;
    }
    if (kw[K_MIN_PROPERTIES].it.raw && !js_parse_count(&kw[K_MIN_PROPERTIES].it, &n->min_props, err))
        return false;
    if (kw[K_MAX_PROPERTIES].it.raw && !js_parse_count(&kw[K_MAX_PROPERTIES].it, &n->max_props, err))
        return false;
    if (kw[K_DEPENDENCIES].it.raw && !js_parse_dependencies(n, &kw[K_DEPENDENCIES].it, depth, err))
        return false;
    return true;
}

/* Logical keywords: allOf, anyOf, oneOf, not, enum. */
static bool js_parse_logical(js_node_t *n, js_kw_t *kw, int depth, dberr_t *err)
{
    static const struct {
        js_keyword_t kw;
        size_t off;
    } lists[] = {{K_ALL_OF, offsetof(js_node_t, all_of)},
                 {K_ANY_OF, offsetof(js_node_t, any_of)},
                 {K_ONE_OF, offsetof(js_node_t, one_of)}};
    for (int i = 0; i < 3; i++) {
        if (!kw[lists[i].kw].it.raw)
            continue;
        const char *name = jsonschema_keyword_names[lists[i].kw];
        js_list_t *l = (js_list_t *)((char *)n + lists[i].off);
        if (!js_parse_list(l, &kw[lists[i].kw].it, name, depth, err))
            return false;
        if (l->n == 0)
            return dberr_set(err, DBERR_BAD_VALUE,
                             "$jsonSchema keyword '%s' must be a non-empty array", name);
    }
    if (kw[K_NOT].it.raw && (!js_keyword_is(&kw[K_NOT].it, BSON_TYPE_DOCUMENT, "not", err) ||
                             !(n->not_schema = js_parse_iter(&kw[K_NOT].it, depth, err))))
        return false;
    if (kw[K_ENUM].it.raw) {
        if (!js_keyword_is(&kw[K_ENUM].it, BSON_TYPE_ARRAY, "enum", err))
            return false;
        bson_iter_t e;
        bson_iter_recurse(&kw[K_ENUM].it, &e);
        while (bson_iter_next(&e)) {
            n->enum_vals = js_grow(n->enum_vals, n->nenums, sizeof *n->enum_vals);
            n->enum_vals[n->nenums++] = *bson_iter_value(&e);
        }
        if (n->nenums == 0)
            return dberr_set(err, DBERR_FAILED_TO_PARSE,
                             "$jsonSchema keyword 'enum' cannot be an empty array");
        /* duplicates found by sorting, as mongod's set finds them */
        const bson_value_t *arg = bson_iter_value(&kw[K_ENUM].it);
        bson_t arr, store = BSON_INITIALIZER;
        bson_iter_t dup;
        bool has_dup = bson_init_static(&arr, arg->value.v_doc.data, arg->value.v_doc.data_len) &&
                       jsonschema_first_duplicate(&arr, (uint32_t)n->nenums, &store, &dup);
        bson_destroy(&store);
        if (has_dup)
            return dberr_set(err, DBERR_FAILED_TO_PARSE,
                             "$jsonSchema keyword 'enum' array cannot contain duplicate values.");
        n->enums = n->enum_vals;
    }
    return true;
}

js_node_t *jsonschema_node_parse(const bson_t *spec, int depth, dberr_t *err)
{
    if (depth > JS_MAX_DEPTH) {
        dberr_set(err, DBERR_BAD_VALUE, "exceeded depth limit of %d when parsing", JS_MAX_DEPTH);
        return NULL;
    }
    js_node_t *n = bson_malloc0(sizeof *n);
    n->min_props = n->max_props = n->min_len = n->max_len = n->min_items = n->max_items = -1;
    js_kw_t kw[K_COUNT];
    memset(kw, 0, sizeof kw);
    bson_iter_t it;
    n->spec_data = bson_get_data(spec);
    n->spec_len = spec->len;
    if (!bson_iter_init(&it, spec)) {
        dberr_set(err, DBERR_BAD_VALUE, "invalid $jsonSchema document");
        goto fail;
    }
    while (bson_iter_next(&it)) {
        const char *key = bson_iter_key(&it);
        int k;
        for (k = 0; k < K_COUNT; k++)
            if (strcmp(key, jsonschema_keyword_names[k]) == 0)
                break;
        if (k == K_COUNT) {
            for (int u = 0; js_unsupported[u]; u++)
                if (strcmp(key, js_unsupported[u]) == 0) {
                    dberr_set(err, DBERR_FAILED_TO_PARSE,
                              "$jsonSchema keyword '%s' is not currently supported", key);
                    goto fail;
                }
            dberr_set(err, DBERR_FAILED_TO_PARSE, "Unknown $jsonSchema keyword: %s", key);
            goto fail;
        }
        if (kw[k].it.raw) {
            dberr_set(err, DBERR_FAILED_TO_PARSE, "Duplicate $jsonSchema keyword: %s", key);
            goto fail;
        }
        kw[k].it = it;
    }
    if (kw[K_DESCRIPTION].it.raw) {
        if (!BSON_ITER_HOLDS_UTF8(&kw[K_DESCRIPTION].it)) {
            dberr_set(err, DBERR_TYPE_MISMATCH,
                      "$jsonSchema keyword 'description' must be of type string");
            goto fail;
        }
        n->description = bson_iter_utf8(&kw[K_DESCRIPTION].it, NULL);
    }
    if (kw[K_TITLE].it.raw) {
        if (!BSON_ITER_HOLDS_UTF8(&kw[K_TITLE].it)) {
            dberr_set(err, DBERR_TYPE_MISMATCH, "$jsonSchema keyword 'title' must be of type string");
            goto fail;
        }
        n->title = bson_iter_utf8(&kw[K_TITLE].it, NULL);
    }
    if (kw[K_TYPE].it.raw && kw[K_BSON_TYPE].it.raw) {
        dberr_set(err, DBERR_FAILED_TO_PARSE,
                  "Cannot specify both $jsonSchema keywords 'type' and 'bsonType'");
        goto fail;
    }
    if (kw[K_ENCRYPT].it.raw || kw[K_ENCRYPT_METADATA].it.raw) {
        /* mongod accepts these for queryable/client-side field level
         * encryption, which atomdb does not implement */
        dberr_set(err, DBERR_NOT_IMPLEMENTED,
                  "$jsonSchema keyword '%s' is not supported by atomdb (no field level "
                  "encryption)",
                  kw[K_ENCRYPT].it.raw ? "encrypt" : "encryptMetadata");
        goto fail;
    }
    if (kw[K_TYPE].it.raw && !js_parse_type(n, K_TYPE, &kw[K_TYPE].it, err))
        goto fail;
    if (kw[K_BSON_TYPE].it.raw && !js_parse_type(n, K_BSON_TYPE, &kw[K_BSON_TYPE].it, err))
        goto fail;
    if (!js_parse_scalar(n, kw, err) || !js_parse_array(n, kw, depth, err) ||
        !js_parse_object(n, kw, depth, err) || !js_parse_logical(n, kw, depth, err))
        goto fail;
    return n;
fail:
    jsonschema_node_destroy(n);
    return NULL;
}

jsonschema_t *jsonschema_new(const bson_t *spec, int depth, dberr_t *err)
{
    jsonschema_t *s = bson_malloc0(sizeof *s);
    bson_t view;
    s->copy = bson_malloc(spec->len);
    s->copy_len = spec->len;
    memcpy(s->copy, bson_get_data(spec), spec->len);
    if (!bson_init_static(&view, s->copy, s->copy_len)) {
        dberr_set(err, DBERR_BAD_VALUE, "invalid $jsonSchema document");
        jsonschema_destroy(s);
        return NULL;
    }
    s->root = jsonschema_node_parse(&view, depth, err);
    if (!s->root) {
        jsonschema_destroy(s);
        return NULL;
    }
    return s;
}


bool jsonschema_rejects_id(const bson_t *spec)
{
    bson_iter_t it, child;
    if (!bson_iter_init_find(&it, spec, "additionalProperties") || !BSON_ITER_HOLDS_BOOL(&it) ||
        bson_iter_bool(&it))
        return false;
    if (bson_iter_init_find(&it, spec, "required") && BSON_ITER_HOLDS_ARRAY(&it) &&
        bson_iter_recurse(&it, &child))
        while (bson_iter_next(&child))
            if (BSON_ITER_HOLDS_UTF8(&child) && strcmp(bson_iter_utf8(&child, NULL), "_id") == 0)
                return false;
    if (bson_iter_init_find(&it, spec, "patternProperties") && BSON_ITER_HOLDS_DOCUMENT(&it) &&
        bson_iter_recurse(&it, &child)) {
        while (bson_iter_next(&child)) {
            int code;
            PCRE2_SIZE off;
            pcre2_code *re = pcre2_compile((PCRE2_SPTR)bson_iter_key(&child),
                                           bson_iter_key_len(&child), PCRE2_UTF, &code, &off, NULL);
            if (!re)
                continue;
            pcre2_match_data *md = pcre2_match_data_create_from_pattern(re, NULL);
            bool whole = pcre2_match(re, (PCRE2_SPTR) "_id", 3, 0,
                                     PCRE2_ANCHORED | PCRE2_ENDANCHORED, md, NULL) >= 0;
            pcre2_match_data_free(md);
            pcre2_code_free(re);
            if (whole)
                return false;
        }
    }
    return true;
}
