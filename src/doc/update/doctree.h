/* doctree: the mutable document an update edits — a tree of named nodes
 * (documents and arrays hold children, scalars an owned value) built from
 * BSON, changed in place, and written back as BSON. Private to update/. */
#ifndef ATOMDB_DOCTREE_H
#define ATOMDB_DOCTREE_H

#include <bson/bson.h>
#include <stdbool.h>
#include <stddef.h>

typedef struct doctree doctree_t;

/* One node: the root document, a field, or an array element. */
struct doctree {
    char *name;       /* owned field name; NULL for array elements and the root */
    bson_type_t type; /* BSON type of the value */
    bson_value_t v;   /* owned scalar value (unused for documents and arrays) */
    doctree_t **kids; /* documents and arrays: children in order */
    size_t nkids;
    size_t cap;
    doctree_t *parent; /* NULL for the root or a detached node */
};

/* A detached null node named `name` (copied; NULL for none). */
doctree_t *doctree_new(const char *name);

/* The tree of a whole document (a DOCUMENT root with no name). */
doctree_t *doctree_from_doc(const bson_t *doc);

/* A detached node holding a copy of `v`. */
doctree_t *doctree_from_value(const bson_value_t *v);

/* A deep copy of `src` named `name`. */
doctree_t *doctree_clone(const doctree_t *src, const char *name);

/* Frees `n` and its children (accepts NULL). `n` must be detached. */
void doctree_free(doctree_t *n);

/* True for documents and arrays. */
bool doctree_is_container(const doctree_t *n);

/* Replaces the value of `n` with null, keeping its name and place. */
void doctree_clear_value(doctree_t *n);

/* Replaces the value of `n` with a copy of `v`, keeping its name and place. */
void doctree_set_value(doctree_t *n, const bson_value_t *v);

/* Inserts the detached `kid` at position `at` (clamped to the end). */
void doctree_insert(doctree_t *parent, size_t at, doctree_t *kid);

/* Appends the detached `kid`. */
void doctree_append(doctree_t *parent, doctree_t *kid);

/* Detaches and returns the child at `at` (not freed). */
doctree_t *doctree_take(doctree_t *parent, size_t at);

/* Detaches `kid` from its parent and frees it. */
void doctree_remove(doctree_t *kid);

/* The position of `kid` among the children of `parent` (nkids if absent). */
size_t doctree_index_of(const doctree_t *parent, const doctree_t *kid);

/* The field `name` of a document node, or NULL. */
doctree_t *doctree_find(const doctree_t *n, const char *name);

/* The child a path component names: a document's field, or an array's
 * element at a decimal index. NULL when there is none. */
doctree_t *doctree_child(const doctree_t *n, const char *component);

/* Writes `n` into `out` as field `key`. */
void doctree_write(bson_t *out, const char *key, const doctree_t *n);

/* Writes the children of a container `n` into `out` (array keys 0, 1, ...). */
void doctree_write_kids(bson_t *out, const doctree_t *n);

/* The value of `n`; for containers the bytes live in `*tmp`, which the
 * caller destroys (NULL otherwise). */
void doctree_value(const doctree_t *n, bson_value_t *out, bson_t **tmp);

/* compare_values(value of n, v). */
int doctree_compare_value(const doctree_t *n, const bson_value_t *v);

/* doctree_compare_value with strings ordered by `coll` (NULL: simple). */
typedef struct collation collation_t;
int doctree_compare_value_coll(const doctree_t *n, const bson_value_t *v,
                               const collation_t *coll);

/* True when `n` holds exactly `v` (same type and bytes). */
bool doctree_binary_equal(const doctree_t *n, const bson_value_t *v);

/* The name of `n` as its parent sees it ("3" for an array element), using
 * `buf` for numbers. */
const char *doctree_field_name(const doctree_t *n, char *buf, size_t bufsz);

/* Appends "name: value" for `n` as mongod prints an element. */
void doctree_append_element(bson_string_t *s, const char *name, const doctree_t *n);

/* Digits only: an array index as mongod's parseUnsignedBase10Integer reads it. */
bool doctree_parse_index(const char *s, size_t *out);

#endif
