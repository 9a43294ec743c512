/* path: dotted field paths ("a.b.0.c") over documents, with and without
 * MongoDB's implicit array traversal. */
#ifndef ATOMDB_PATH_H
#define ATOMDB_PATH_H

#include <bson/bson.h>
#include <stdbool.h>

#include "util/dberr.h"

/* Finds the value at dotted `path` with no array expansion: each component
 * names a field, or a numeric index into an array. Returns false when
 * missing. `out` borrows from `doc`. */
bool path_get(const bson_t *doc, const char *path, bson_iter_t *out);

/* Called for every value reached by `path` with array traversal. Return
 * false to stop early. */
typedef bool (*path_visit_fn)(const bson_value_t *value, void *ctx);

/* Visits every value `path` reaches in `doc` the way a query sees them: when
 * a component meets an array, the rest of the path applies to each element
 * (and a numeric component also indexes the array); an array at the end is
 * visited itself and then element by element. Returns the number of values
 * visited (0 = missing). Values borrow from `doc`. */
size_t path_visit(const bson_t *doc, const char *path, path_visit_fn fn, void *ctx);

/* One value reached by path_walk(), with how it was reached. */
typedef struct path_hit {
    const bson_value_t *value; /* BSON_TYPE_EOD where the path is missing */
    int array_pos;             /* index in the first array traversed, or -1 */
    bool whole_leaf_array;     /* an array at the path's end, visited whole */
} path_hit_t;

/* Called by path_walk() for each hit; return false to stop early. */
typedef bool (*path_hit_fn)(const path_hit_t *hit, void *ctx);

/* The matcher's view of `path` (MongoDB's element iteration): like
 * path_visit, but also reports "missing" hits (a document on the way lacks
 * the next field, or a non-document sits where a field was expected
 * outside an array; scalars inside traversed arrays are skipped), records
 * array positions, and expands an array at the end into its elements only
 * when `expand_leaf` (the whole array is always visited, before them).
 * Returns false when `fn` stopped the walk. Values borrow from `doc`. */
bool path_walk(const bson_t *doc, const char *path, bool expand_leaf, path_hit_fn fn, void *ctx);

/* Splits dotted `path` into owned components ("a..b" gives an empty one);
 * free them with path_free. */
char **path_split(const char *path, size_t *n);

/* Frees components from path_split / path_split_field (accepts NULL). */
void path_free(char **parts, size_t n);

/* Splits an aggregation field path ("a.b" of "$a.b") as mongod's FieldPath
 * checks it: no empty component (Location15998), none starting with '$'
 * (Location16410). False with `err` (and nothing to free) otherwise. */
bool path_split_field(const char *path, char ***parts, size_t *n, dberr_t *err);

#endif
