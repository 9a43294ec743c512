/* sortspec: a `sort` document ({a: 1, b: -1}) compiled into a comparator
 * over documents with MongoDB's semantics (missing sorts as null; an array
 * sorts by its smallest element ascending, largest descending). */
#ifndef ATOMDB_SORTSPEC_H
#define ATOMDB_SORTSPEC_H

#include <bson/bson.h>
#include <stdbool.h>

#include "util/dberr.h"

typedef struct sortspec sortspec_t;

/* Parses `spec` (values 1/-1 or {$meta: ...}; BadValue 2 otherwise, as
 * mongod). NULL with `err` on failure. */
sortspec_t *sortspec_new(const bson_t *spec, dberr_t *err);

/* Frees `s` (accepts NULL). */
void sortspec_destroy(sortspec_t *s);

/* Compares two documents under `s`: <0, 0, >0. */
int sortspec_compare(const sortspec_t *s, const bson_t *a, const bson_t *b);

/* Number of keys and the i-th key's path and direction (1 or -1). */
int sortspec_nkeys(const sortspec_t *s);
const char *sortspec_key(const sortspec_t *s, int i, int *direction);

typedef struct collation collation_t;

/* Orders strings by `coll` (NULL: simple) from now on; `s` takes its own
 * reference. */
void sortspec_set_collation(sortspec_t *s, collation_t *coll);

/* The collation set on `s`, or NULL. */
const collation_t *sortspec_collation(const sortspec_t *s);

typedef struct matcher matcher_t;

/* True when a key is {$meta: "textScore"}; its scores come from the $text
 * query of filter `m` (bound before sorting), which `s` keeps a reference
 * to. */
bool sortspec_uses_text_score(const sortspec_t *s);
void sortspec_set_text(sortspec_t *s, matcher_t *m);

#endif
