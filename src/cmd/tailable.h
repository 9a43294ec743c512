/* tailable: find's tailable cursors over capped collections — the cursor
 * stays open at the end of the data and later getMores return what was
 * inserted since; with awaitData a getMore with nothing to return parks in
 * changestream.c's table until a commit or its maxTimeMS. Loop thread only.
 * See docs/capped.md. */
#ifndef ATOMDB_TAILABLE_H
#define ATOMDB_TAILABLE_H

#include <bson/bson.h>
#include <stdbool.h>
#include <stdint.h>

#include "cmd/cmd-private.h"
#include "doc/matcher.h"
#include "doc/projection.h"
#include "store/collection.h"
#include "store/cursor.h"

/* mongod's rules for find's tailable/awaitData: awaitData needs tailable
 * (FailedToParse 9); a tailable find takes no sort but {$natural: 1} and no
 * singleBatch (BadValue 2). `sort` may be NULL. */
bool tailable_check_find(bool tailable, bool await_data, const bson_t *sort, bool single_batch,
                         dberr_t *err);

/* Answers a tailable find over capped collection `c` (ns "db.coll"):
 * the first batch in natural order, after `skip` matching documents, and
 * a cursor left open unless the collection is empty. BadValue 2 when
 * `c` is not capped, OperationNotSupportedInTransaction 263 in a
 * transaction. Takes over `m` (the
 * filter) and `p` (the projection, may be NULL) in every case. */
bool tailable_find(cmd_ctx_t *ctx, collection_t *c, const char *ns, matcher_t *m, projection_t *p,
                   bool await_data, int64_t skip, int64_t batch_size, dberr_t *err);

/* getMore on a tailable cursor (query.c hands it over): the documents
 * after its position; with awaitData and none yet, parks up to maxTimeMS
 * (default 1000 ms). Fails with CappedPositionLost 136 when capping removed
 * the cursor's position, QueryPlanKilled 175 when the collection was
 * dropped; the cursor is closed then. */
bool tailable_get_more(cmd_ctx_t *ctx, cursor_t *c, int64_t batch_size, dberr_t *err);

/* Appends {cursor: {nextBatch, id, ns}} to `reply` with the documents after
 * the cursor's position (at most `batch_size`, 0: the default); *n gets
 * how many. False with err as tailable_get_more (the caller closes). */
bool tailable_reply(bson_t *reply, cursor_t *c, int64_t batch_size, uint32_t *n, dberr_t *err);

#endif
