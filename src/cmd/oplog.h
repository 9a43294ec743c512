/* oplog: the read-only view local.oplog.rs — mongod 7's oplog entries
 * ({ts, t, v, op, ns, ui, o, o2, wall}, applyOps for a transaction or a
 * commit of several operations) generated from the change history
 * (journal/history.h) that change streams read; find and tailable,
 * awaitData getMore on it, and what replSetGetStatus reports of it. See
 * docs/change-streams.md. Loop thread only. */
#ifndef ATOMDB_OPLOG_H
#define ATOMDB_OPLOG_H

#include <bson/bson.h>
#include <stdbool.h>
#include <stdint.h>

#include "cmd/cmd-private.h"
#include "journal/history.h"
#include "store/clock.h"

/* True for local.oplog.rs. */
bool oplog_is_ns(const char *db, const char *coll);

/* find on local.oplog.rs (query.c hands it over). */
bool oplog_find(cmd_ctx_t *ctx, dberr_t *err);

/* Refuses a command on local.oplog.rs other than those the view serves:
 * a write (is_write) with InvalidNamespace (73), others (aggregate,
 * count, distinct, explain...) with NotImplemented (238). */
bool oplog_check_command(const cmd_ctx_t *ctx, bool is_write, dberr_t *err);

/* listCollections' entry for oplog.rs (a capped collection) into `out`
 * (initialised). */
void oplog_collection_info(bson_t *out, bool name_only);

/* The newest entry's ts and wall time (durable: the newest whose log
 * record is durable); false when there is none. */
bool oplog_newest(bool durable, clock_ts_t *ts, int64_t *wall_ms);

/* collStats on local.oplog.rs: its entries (one per retained commit) and
 * the history's bytes. */
bool oplog_coll_stats(bson_t *reply);

/* validate on local.oplog.rs: every retained entry is built and checked
 * (valid BSON, cluster times increasing); the reply in validate's shape. */
bool oplog_validate(bson_t *reply);

/* Writes history entry `e` as an oplog entry into `out` (initialised). */
void oplog_entry_build(const history_entry_t *e, bson_t *out);

/* Appends to `diff` (initialised) mongod 7's update diff {$v: 2, diff:
 * {d, u, i, s<field>...}} turning `old_doc` into `new_doc`; false when
 * the change is not one a diff can say (fields reordered): the caller logs
 * the whole new document, as mongod does for a replacement. */
bool oplogdiff_compute(const bson_t *old_doc, const bson_t *new_doc, bson_t *diff);

#endif
