/* projection: find/findAndModify `projection` documents — inclusion,
 * exclusion, `_id` handling, `$slice`, `$elemMatch`, positional `$`, and
 * aggregation expressions in inclusion projections. */
#ifndef ATOMDB_PROJECTION_H
#define ATOMDB_PROJECTION_H

#include <bson/bson.h>
#include <stdbool.h>

#include "util/dberr.h"

typedef struct projection projection_t;

/* Parses `spec`. NULL with `err` set as mongod answers (e.g. Location31254
 * "Cannot do exclusion on field x in inclusion projection"). */
projection_t *projection_new(const bson_t *spec, dberr_t *err);

/* Frees `p` (accepts NULL). */
void projection_destroy(projection_t *p);

typedef struct matcher matcher_t;

/* True when the projection holds {$meta: "textScore"}; the score is then
 * computed for the $text query of filter `m` (doc/matcher.h, bound before
 * the projection runs), which the projection keeps a reference to (a
 * cursor's later batches use it). Without one, applying fails with 40218. */
bool projection_uses_text_score(const projection_t *p);
void projection_set_text(projection_t *p, matcher_t *m);
/* Makes $elemMatch and expressions compare strings by `coll` (NULL:
 * simple; `p` takes its own reference), as a find's collation asks. */
typedef struct collation collation_t;
void projection_set_collation(projection_t *p, collation_t *coll);

/* True when the projection needs the matcher's `positional` array index. */
bool projection_is_positional(const projection_t *p);

/* Writes the projected `doc` to `out` (initialised by the caller).
 * `positional` is the array index the query matched for `$`, or -1. */
bool projection_apply(const projection_t *p, const bson_t *doc, int positional, bson_t *out,
                      dberr_t *err);

#endif
