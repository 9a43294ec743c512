/* path: dotted field paths ("a.b.0.c") over documents, with and without
 * MongoDB's implicit array traversal. */
#ifndef ATOMDB_PATH_H
#define ATOMDB_PATH_H

#include <bson/bson.h>
#include <stdbool.h>

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

#endif
