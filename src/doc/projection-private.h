/* projection-private: the projection engine's entry points for the
 * aggregation stages ($project, $addFields/$set) in pipeline.c, which parse
 * with different rules than find and evaluate with the pipeline's variables.
 * Not part of the public doc interface. */
#ifndef ATOMDB_PROJECTION_PRIVATE_H
#define ATOMDB_PROJECTION_PRIVATE_H

#include "doc/expr.h"
#include "doc/projection.h"

/* Which rules a projection spec is parsed under. */
typedef enum projection_policy {
    PROJECTION_FIND,       /* find/findAndModify: $slice, $elemMatch, positional `$` */
    PROJECTION_AGGREGATE,  /* $project: no find-only features, empty spec rejected */
    PROJECTION_ADD_FIELDS, /* $addFields/$set: every value is an expression, all fields kept */
} projection_policy_t;

/* Parses `spec` under `policy`; NULL with `err` set on failure. */
projection_t *projection_new_policy(const bson_t *spec, projection_policy_t policy, dberr_t *err);

/* Like projection_apply, with expressions evaluated under `ctx` (whose root
 * is ignored: expressions see `doc` as $$ROOT). */
bool projection_apply_ctx(const projection_t *p, const bson_t *doc, int positional,
                          const expr_ctx_t *ctx, bson_t *out, dberr_t *err);

#endif
