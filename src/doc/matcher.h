/* matcher: MongoDB query filters ({a: 1, b: {$gt: 2}, $or: [...]}),
 * compiled once and run against documents. Also extracts what the planner
 * and upserts need from a filter. */
#ifndef ATOMDB_MATCHER_H
#define ATOMDB_MATCHER_H

#include <bson/bson.h>
#include <stdbool.h>
#include <stdint.h>

#include "util/dberr.h"

typedef struct matcher matcher_t;

/* Compiles `filter`. NULL with `err` set on a bad filter (BadValue 2 for an
 * unknown operator "unknown operator: $foo", as mongod). The matcher keeps
 * no pointer into `filter`. A NULL filter matches every document. */
matcher_t *matcher_new(const bson_t *filter, dberr_t *err);

/* Drops a reference to `m` and frees it with the last (accepts NULL). */
void matcher_destroy(matcher_t *m);

/* Adds a reference (a transaction keeps the filters it read through for
 * its serializable check); returns `m`. */
matcher_t *matcher_ref(matcher_t *m);

/* Gives $expr the user variables of a command's `let` (NULL: none): each
 * value is evaluated once, now, as an expression against an empty document
 * ({x: {$add: [1, 2]}} binds $$x to 3); the matcher keeps its own copy.
 * Clears any pending error, then re-checks the filter's $$variables against
 * the new names. A bad let (invalid name, evaluation error) or a variable
 * still undefined (Location17276 "Use of undefined variable: id") becomes the
 * pending error that matcher_take_error reports. */
void matcher_set_let(matcher_t *m, const bson_t *let);

/* Like matcher_set_let, for variables whose values are already evaluated
 * (pipeline_new passes its evaluated let to each $match this way): the
 * values of `vars` are bound as they are. */
void matcher_set_vars(matcher_t *m, const bson_t *vars);

typedef struct collation collation_t;

/* Compares strings under `coll` (NULL: simple, the default) in equality,
 * $in and range predicates, as mongod's collation does ($regex, field names
 * and $expr stay bytewise). The matcher takes its own reference. */
void matcher_set_collation(matcher_t *m, collation_t *coll);

/* The collation set on `m`, or NULL. */
const collation_t *matcher_collation(const matcher_t *m);

/* True when `doc` matches. When `array_pos` is not NULL it receives the index
 * of the array element that satisfied the first array-traversing predicate
 * (for the positional `$` operator), or -1. $expr sees $$NOW as the wall
 * clock at the call. A $expr evaluation error counts as no match and is kept
 * for matcher_take_error; while an error is pending every document fails to
 * match (the operation is going to fail anyway). */
bool matcher_matches(const matcher_t *m, const bson_t *doc, int *array_pos);

/* The first error raised since the last take: an undefined $$variable
 * (found when the filter is compiled, and again by matcher_set_let, so it is
 * reported even when no document was tested), a bad let, or a $expr
 * evaluation error in matcher_matches ({$divide: [1, 0]}). True with `err`
 * (may be NULL) filled, and the error cleared; false when there is none.
 * Call it after scanning and fail the command with `err`. */
bool matcher_take_error(matcher_t *m, dberr_t *err);

/* True when the filter holds $expr (its result may depend on let
 * variables and $$NOW, so a compiled copy must not be reused). */
bool matcher_has_expr(const matcher_t *m);

typedef struct fts_query fts_query_t;

/* The filter's top-level $text query (doc/fts.h), or NULL. It belongs to
 * the matcher; the planner binds it to the collection's text index before
 * any document is matched (unbound, it matches nothing). */
fts_query_t *matcher_text(const matcher_t *m);
/* Like matcher_new, but $near / $nearSphere compile (find runs them,
 * ordering by distance); BadValue when one is not top-level or there are
 * two. matcher_new refuses them with 291 as mongod's planner does. */
matcher_t *matcher_new_near(const bson_t *filter, dberr_t *err);

/* The path of the filter's top-level $near / $nearSphere, or NULL. */
const char *matcher_near_path(const matcher_t *m);

/* The distance of `doc` from the $near point: the smallest over the
 * geometries its path reaches (metres, radians for a legacy $nearSphere);
 * -1 when it reaches none. */
double matcher_near_distance(const matcher_t *m, const bson_t *doc);

typedef struct geo_pred geo_pred_t;

/* The geospatial predicate a 2dsphere index on `path` can bound: the
 * filter's $near when it has one (NULL when that is on another path), else
 * the first top-level $geoWithin / $geoIntersects on `path`; NULL if none. */
const geo_pred_t *matcher_geo_on(const matcher_t *m, const char *path);

/* True when the filter is empty (matches everything). */
bool matcher_is_empty(const matcher_t *m);

/* Bounds a filter puts on one top-level dotted path through its top-level
 * AND (never through $or/$nor/$not). Values are owned by the matcher. */
typedef struct matcher_bounds {
    bool has_eq;          /* {path: v} or {path: {$eq: v}} (v not a regex) */
    bson_value_t eq;
    bool has_lower;       /* $gt / $gte */
    bool lower_inclusive;
    bson_value_t lower;
    bool has_upper;       /* $lt / $lte */
    bool upper_inclusive;
    bson_value_t upper;
} matcher_bounds_t;

/* Fills `out` with the bounds on `path`; false when the filter constrains
 * it in no way the planner can use. */
bool matcher_bounds(const matcher_t *m, const char *path, matcher_bounds_t *out);

/* The distinct paths of the comparison predicates ($eq, $gt, $gte, $lt,
 * $lte) of the filter's top-level AND, in filter order, at most `cap` into
 * `out` (borrowed from the matcher); returns how many. A wildcard index
 * plans on one of them. */
int matcher_bound_paths(const matcher_t *m, const char **out, int cap);

/* The values of the first {path: {$in: [...]}} of the filter's top-level
 * AND (never through $or/$nor/$not), borrowed from the matcher, in filter
 * order; false when there is none or when its list holds a regex (which
 * no point bound answers). *n may be 0 ({$in: []} matches nothing). */
bool matcher_in_values(const matcher_t *m, const char *path, const bson_value_t **vals,
                       size_t *n);

/* True when the filter has a predicate on `path` an index on it could
 * bound (comparison, $in, $regex, $exists, $type, $mod, geo, value
 * $elemMatch) under its ANDs, ORs and NOTs (not $nor): mongod's
 * getFields, by which an index whose first field is `path` is relevant. */
bool matcher_path_sargable(const matcher_t *m, const char *path);

/* Builds the document an upsert starts from: the filter's equality
 * predicates (top level, under $and, {$eq: v}), dotted paths expanded into
 * nested documents, `_id` first when present. Operators other than equality
 * contribute nothing. Fails (NotSingleValueField 54 / ... as mongod) when two
 * predicates set the same path. `out` must be initialised by the caller. */
bool matcher_upsert_seed(const bson_t *filter, bson_t *out, dberr_t *err);

#endif
