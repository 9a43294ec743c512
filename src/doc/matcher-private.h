/* matcher-private: what matcher.c and matcher-seed.c share. Not part of
 * the public doc interface. */
#ifndef ATOMDB_MATCHER_PRIVATE_H
#define ATOMDB_MATCHER_PRIVATE_H

#include <bson/bson.h>
#include <stdbool.h>

#include "util/dberr.h"

/* Filters nested deeper than this are refused. */
#define MATCHER_MAX_DEPTH 100

/* True when `it` holds an operator document ({$gt: 1}); {$ref, $id, $db}
 * documents are plain values. */
bool matcher_is_operator_doc(const bson_iter_t *it);

/* Starts iterating the filter document `filter` met at nesting `depth`;
 * BadValue when it is nested too deeply or is not valid BSON. */
bool matcher_iter_filter(const bson_t *filter, int depth, bson_iter_t *it, dberr_t *err);

#endif
