/* query-private: what query.c (find, count, distinct, explain) and
 * aggregate.c share — a parsed find and the find machinery an aggregate's
 * collection read reuses. */
#ifndef ATOMDB_QUERY_PRIVATE_H
#define ATOMDB_QUERY_PRIVATE_H

#include "cmd/cmd-private.h"

#include "doc/collation.h"
#include "doc/matcher.h"
#include "doc/pipeline.h"
#include "doc/sortspec.h"
#include "store/collection.h"

/* The parsed options of a find (or the find inside explain). */
typedef struct query_find {
    bson_t filter, sort, projection, hint, min, max;
    bool has_sort, has_projection, has_hint, has_min, has_max;
    const char *hint_name;
    int64_t skip, limit, batch_size;
    bool single_batch;
    bool return_key;
    bool no_cursor_timeout;
    bool allow_disk_use;
    bson_iter_t coll_field; /* the command's `collation` (has_coll_field) */
    bool has_coll_field;
    bool tailable, await_data; /* cmd/tailable.c */
    collation_t *coll; /* owned, from query_resolve_collation; NULL: simple */
} query_find_t;

/* q->coll: the command's collation, else the default of `c` (a view
 * refuses another one: 167), as cmd_collation_resolve. */
bool query_resolve_collation(query_find_t *q, collection_t *c, dberr_t *err);

/* The find's collation on its matcher and sort (what they compare strings
 * by, and which indexes may serve them). */
void query_apply_collation(const query_find_t *q, matcher_t *m, sortspec_t *s);

/* A leading $geoNear (NULL: none) runs on the 2dsphere index of `key`,
 * or on the collection's only one (mongod's IndexNotFound 27 otherwise). */
bool query_geonear_key(collection_t *c, geonear_spec_t *g, dberr_t *err);

/* Runs a parsed find over `c` (may be NULL: no collection) named `coll`,
 * through the command's view (a transaction's snapshot and write set). */
bool query_run(cmd_ctx_t *ctx, collection_t *c, const char *coll, const query_find_t *q,
               matcher_t *m, sortspec_t *s, recvec_t *out, collection_plan_t *plan,
               dberr_t *err);

/* aggregate.c: runs the aggregate command in `ctx`; `verbosity` is NULL,
 * or the explain verbosity ("queryPlanner", "executionStats", ...). */
bool aggregate_run(cmd_ctx_t *ctx, const char *verbosity, dberr_t *err);

#endif
