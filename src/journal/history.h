/* history: the ordered, bounded history of committed changes that change
 * streams read — one entry per commit (a command, a transaction, a batch
 * of TTL deletes), in commit order, each with its cluster time, wall time,
 * log record and operations (documents before and after, catalog changes).
 * Kept for --change-stream-history seconds and at most
 * --change-stream-history-mb; rebuilt at start-up from the snapshot (which
 * carries the entries) and the log replayed after it. Loop thread only;
 * a forked snapshot writer reads it. See docs/change-streams.md. */
#ifndef ATOMDB_HISTORY_H
#define ATOMDB_HISTORY_H

#include <bson/bson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "store/clock.h"

/* One commit. `ops` is an array of operations, each
 *   {o: "i", db, c, ui, doc}        insert
 *   {o: "u", db, c, ui, old, doc}   update (operators or a pipeline)
 *   {o: "r", db, c, ui, old, doc}   replacement
 *   {o: "d", db, c, ui, old}        delete
 * (ui: the collection's UUID)
 *   {o: "c", db, cmd}               catalog change (the observer's ddl doc)
 * and `doc` may carry lsid and txnNumber (a transaction's commit). */
typedef struct history_entry {
    clock_ts_t ts;        /* the commit's cluster time */
    int64_t wall_ms;      /* its wall-clock time */
    uint64_t lsn;         /* its log record; 0: not logged or already durable */
    uint32_t nops;        /* operations in the document's ops */
    uint32_t len;         /* bytes of the document */
    const uint8_t *data;  /* {ops: [...], lsid?, txnNumber?} (BSON), in the history's arena */
    void *chunk;          /* the arena chunk holding `data` (history.c's own) */
} history_entry_t;

/* The entry's document, borrowed as `e` is. */
void history_entry_view(const history_entry_t *e, bson_t *out);

/* Retention: entries older than `seconds` or beyond `bytes` in all are
 * dropped, oldest first (0 = no bound of that kind). */
void history_configure(int64_t seconds, int64_t bytes);

/* The size bound (0: none), as the oplog view reports its capped size. */
int64_t history_max_bytes(void);

/* Operations of the commit being built (called by the journal's observer
 * as changes happen). Documents are copied. Changes to admin, config and
 * local are not kept: no change stream can see them. */
void history_op_insert(const char *db, const char *coll, const uint8_t *uuid, const bson_t *doc);
void history_op_update(const char *db, const char *coll, const uint8_t *uuid,
                       const bson_t *old_doc, const bson_t *new_doc, bool replacement);
void history_op_remove(const char *db, const char *coll, const uint8_t *uuid,
                       const bson_t *old_doc);
void history_op_ddl(const char *db, const bson_t *cmd);

/* The commit being built belongs to transaction `txn_number` of session
 * `lsid` (a document {id: UUID, ...}). */
void history_set_txn(const bson_t *lsid, int64_t txn_number);

/* Seals the operations built since the last call into an entry; nothing
 * when there are none. Then applies retention. */
void history_commit(clock_ts_t ts, int64_t wall_ms, uint64_t lsn);

/* Appends an entry read back from a snapshot ({ts, wall, ops, lsid?,
 * txnNumber?}); false when it is malformed. */
bool history_load_entry(const bson_t *e);
/* Writes entry `i` as a snapshot would load it into `out` (initialised). */
void history_entry_doc(size_t i, bson_t *out);

/* Entries retained, and entry `i` (0 = oldest), borrowed until the next
 * commit. */
size_t history_len(void);
const history_entry_t *history_at(size_t i);

/* The index of the first entry whose cluster time is >= ts (history_len()
 * when none). */
size_t history_seek(clock_ts_t ts);

/* Every commit after this time is retained (entries before it were
 * dropped by retention, or predate what the files hold); {0, 0} when the
 * history is complete from the beginning. */
clock_ts_t history_horizon(void);
void history_set_horizon(clock_ts_t ts);

/* Bytes held, for serverStatus. */
size_t history_bytes(void);

/* Drops everything (recovery starting over, tests). */
void history_clear(void);

#endif
