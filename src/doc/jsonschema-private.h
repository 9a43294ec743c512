/* jsonschema-private: the compiled schema tree that jsonschema-parse.c
 * builds and jsonschema.c checks. Not part of the public doc interface. */
#ifndef ATOMDB_JSONSCHEMA_PRIVATE_H
#define ATOMDB_JSONSCHEMA_PRIVATE_H

#include <bson/bson.h>
#include <stdbool.h>
#include <stdint.h>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "doc/jsonschema.h"

/* Schemas nested deeper than this are refused (as filters are). */
#define JS_MAX_DEPTH 100

/* The keywords mongod knows, in its alphabetical table order: X(tag, name)
 * for each, generating js_keyword_t and jsonschema_keyword_names. */
#define JSONSCHEMA_KEYWORDS(X)                         \
    X(K_ADDITIONAL_ITEMS, "additionalItems")           \
    X(K_ADDITIONAL_PROPERTIES, "additionalProperties") \
    X(K_ALL_OF, "allOf")                               \
    X(K_ANY_OF, "anyOf")                               \
    X(K_BSON_TYPE, "bsonType")                         \
    X(K_DEPENDENCIES, "dependencies")                  \
    X(K_DESCRIPTION, "description")                    \
    X(K_ENCRYPT, "encrypt")                            \
    X(K_ENCRYPT_METADATA, "encryptMetadata")           \
    X(K_ENUM, "enum")                                  \
    X(K_EXCLUSIVE_MAXIMUM, "exclusiveMaximum")         \
    X(K_EXCLUSIVE_MINIMUM, "exclusiveMinimum")         \
    X(K_ITEMS, "items")                                \
    X(K_MAX_ITEMS, "maxItems")                         \
    X(K_MAX_LENGTH, "maxLength")                       \
    X(K_MAX_PROPERTIES, "maxProperties")               \
    X(K_MAXIMUM, "maximum")                            \
    X(K_MIN_ITEMS, "minItems")                         \
    X(K_MIN_LENGTH, "minLength")                       \
    X(K_MIN_PROPERTIES, "minProperties")               \
    X(K_MINIMUM, "minimum")                            \
    X(K_MULTIPLE_OF, "multipleOf")                     \
    X(K_NOT, "not")                                    \
    X(K_ONE_OF, "oneOf")                               \
    X(K_PATTERN, "pattern")                            \
    X(K_PATTERN_PROPERTIES, "patternProperties")       \
    X(K_PROPERTIES, "properties")                      \
    X(K_REQUIRED, "required")                          \
    X(K_TITLE, "title")                                \
    X(K_TYPE, "type")                                  \
    X(K_UNIQUE_ITEMS, "uniqueItems")

typedef enum {
#define JS_KEYWORD_TAG(tag, name) tag,
    JSONSCHEMA_KEYWORDS(JS_KEYWORD_TAG)
#undef JS_KEYWORD_TAG
    K_COUNT
} js_keyword_t;

/* Each keyword's name, indexed by js_keyword_t. */
extern const char *const jsonschema_keyword_names[K_COUNT];

typedef struct js_node js_node_t;

/* A property name and its position in the schema, in a list sorted by
 * name so a document's fields are looked up in one pass. */
typedef struct js_name_ref {
    const char *name; /* borrowed from the schema's copy */
    size_t idx;
} js_name_ref_t;

/* A compiled `pattern` or patternProperties key (code NULL: none). */
typedef struct js_regex {
    pcre2_code *code;
    pcre2_match_data *md; /* reused: checks run on one thread */
    const char *source;   /* borrowed from the schema's copy */
} js_regex_t;

/* One entry of properties, patternProperties or dependencies. */
typedef struct js_entry {
    const char *name;      /* property name or pattern (borrowed) */
    js_node_t *schema;     /* subschema, or NULL for a property dependency */
    js_regex_t re;         /* patternProperties */
    const char **props;    /* property dependency: names that must exist */
    js_name_ref_t *props_index; /* ... sorted by name */
    size_t nprops;
} js_entry_t;

/* A list of subschemas (items array, allOf, anyOf, oneOf). */
typedef struct js_list {
    js_node_t **v;
    size_t n;
} js_list_t;

typedef enum { JS_ABSENT, JS_TRUE, JS_FALSE, JS_SCHEMA } js_flag_t;

/* One schema object; keyword fields are unset when the keyword is absent. */
struct js_node {
    /* the schema object's bytes, in the schema's copy (a bson_t needs 128-byte
     * alignment, which a heap node does not give it) */
    const uint8_t *spec_data;
    uint32_t spec_len;
    const char *title, *description;
    js_keyword_t type_kw;      /* K_TYPE or K_BSON_TYPE when has_type */
    bool has_type;
    uint64_t types;            /* bit (type & 63); MinKey 62, MaxKey 63 */
    bool type_number;          /* the "number" alias */
    const char **required;
    size_t nrequired;
    js_entry_t *props;
    size_t nprops;
    js_name_ref_t *prop_index; /* props by name (strcmp order) */
    js_name_ref_t *required_index; /* required by name (required is sorted too) */
    js_entry_t *patterns;
    size_t npatterns;
    js_flag_t addl_props;
    js_node_t *addl_props_schema;
    int64_t min_props, max_props, min_len, max_len, min_items, max_items; /* -1: absent */
    const bson_value_t *enums; /* borrowed values, nenums of them */
    bson_value_t *enum_vals;
    size_t nenums;
    bool has_min, has_max, excl_min, excl_max, has_mult, unique;
    bson_value_t minimum, maximum, mult; /* borrowed */
    js_regex_t pattern;
    js_node_t *items;          /* items as one schema */
    js_list_t items_list;      /* items as an array of schemas */
    bool items_is_list;
    js_flag_t addl_items;
    js_node_t *addl_items_schema;
    js_entry_t *deps;
    size_t ndeps;
    js_list_t all_of, any_of, one_of;
    js_node_t *not_schema;
};

struct jsonschema {
    uint8_t *copy; /* the $jsonSchema document: every node's spec and borrowed
                    * string points in here */
    uint32_t copy_len;
    js_node_t *root;
};

/* Compiles one schema object met at nesting `depth` (its strings borrowed
 * from `spec`, which must outlive the node). NULL with `err` set. */
js_node_t *jsonschema_node_parse(const bson_t *spec, int depth, dberr_t *err);

/* Frees a node and its subschemas (accepts NULL). */
void jsonschema_node_destroy(js_node_t *n);

/* Equality for enum and uniqueItems: numbers by value, documents with the
 * same fields in any order (mongod's unordered-fields comparison). */
bool jsonschema_equal(const bson_value_t *a, const bson_value_t *b);

/* Leaves `dup` on the first element of the array `arr` (of `count`) equal
 * (jsonschema_equal) to an earlier one; false when there is none. Sorts
 * normalized copies, which `store` (initialised by the caller, destroyed
 * by the caller) receives, so a long array costs n log n. */
bool jsonschema_first_duplicate(const bson_t *arr, uint32_t count, bson_t *store,
                                bson_iter_t *dup);

/* True when the compiled regex finds a match in s[0..len). */
bool jsonschema_regex_test(const js_regex_t *r, const char *s, size_t len);

#endif
