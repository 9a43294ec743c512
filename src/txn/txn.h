/* txn: one multi-document transaction — its snapshot for reads, its write
 * set (changes buffered until commit, so nobody else sees them), the
 * document locks it holds, and commit, which applies the whole write set
 * to the store at once (one log record) or nothing. */
#ifndef ATOMDB_TXN_H
#define ATOMDB_TXN_H

#include <bson/bson.h>
#include <stdbool.h>
#include <stdint.h>

#include "store/catalog.h"
#include "store/record.h"
#include "util/buf.h"
#include "util/dberr.h"

typedef struct txn txn_t;
struct matcher;

/* How strongly a transaction is isolated (docs/concurrency.md). */
typedef enum txn_isolation {
    TXN_SNAPSHOT,     /* snapshot isolation, as mongod: reads from a snapshot,
                       * first committer wins on write-write conflicts */
    TXN_SERIALIZABLE, /* also: commit fails when a change committed since the
                       * snapshot touched anything the transaction read */
} txn_isolation_t;

/* One buffered change: the document's new version, or a delete. */
typedef struct txn_change {
    char *db;
    char *coll;
    bson_value_t id;    /* owned copy */
    record_t *doc;      /* the new version (a reference), or NULL: deleted */
    bool existed;       /* the document was in the store when first touched */
} txn_change_t;

/* Starts a transaction reading at a new snapshot. `age` orders
 * transactions for deadlock victims (larger = younger). */
txn_t *txn_new(uint64_t age, int64_t now_ms);

/* Ends the transaction without applying anything (accepts NULL): releases
 * its locks (waking waiters) and its snapshot, and frees it. */
void txn_destroy(txn_t *t);

/* "snapshot" / "serializable" to a level and back; false for another name. */
bool txn_parse_isolation(const char *name, txn_isolation_t *out);
const char *txn_isolation_name(txn_isolation_t level);

/* Moves a transaction that has seen and written nothing yet (its first
 * statement waited for a lock and runs again) to a new snapshot, and
 * forgets its reads. Does nothing once it has changes. */
void txn_renew_snapshot(txn_t *t);

/* Sets the isolation level (before the first statement runs). */
void txn_set_isolation(txn_t *t, txn_isolation_t level);
txn_isolation_t txn_isolation(const txn_t *t);

/* Remembers a read of `db`.`coll` (mvcc collection id `coll_id`, 0 when
 * it did not exist) through `m` (a reference is taken), for the
 * serializable level's commit check. Does nothing at TXN_SNAPSHOT. */
void txn_note_read(txn_t *t, const char *db, const char *coll, uint64_t coll_id,
                   struct matcher *m);

/* The serializable check: false with WriteConflict (112) in `err` when a
 * change committed since the snapshot inserted, changed or deleted a
 * document that one of the transaction's reads matched (before or after
 * the change), or the read's collection was dropped or created since.
 * True at TXN_SNAPSHOT. */
bool txn_validate_reads(const txn_t *t, catalog_t *cat, dberr_t *err);

/* Counters since start, for serverStatus's transactions section. */
typedef struct txn_stats {
    uint64_t started, committed, aborted;
    uint64_t write_conflicts;        /* writes refused: changed since the snapshot */
    uint64_t serialization_failures; /* serializable commits refused */
    uint64_t deadlocks;              /* wait-for cycles found (a victim was aborted) */
} txn_stats_t;
const txn_stats_t *txn_get_stats(void);
/* Counts a write refused by the first-committer-wins rule. */
void txn_count_write_conflict(void);

/* Fault injection for the isolation checkers (tests/scenarios): the
 * broken variants they must catch. "txnSkipWriteConflictCheck" lets writes
 * of documents changed since the snapshot through (lost updates),
 * "txnSkipReadValidation" commits serializable transactions unchecked
 * (write skew). `on` sets or clears the point; false for another name.
 * Always false in builds without ATOMDB_FAULT_INJECTION. */
bool txn_inject_fault(const char *point, bool on);
/* True while "txnSkipWriteConflictCheck" is set. */
bool txn_fault_skip_write_check(void);

/* The snapshot sequence number reads use. */
uint64_t txn_snapshot(const txn_t *t);
/* When it started (wall clock ms) and its age stamp. */
int64_t txn_started_ms(const txn_t *t);
uint64_t txn_age(const txn_t *t);

/* The buffered change for a document, or NULL. Borrowed. */
txn_change_t *txn_lookup(const txn_t *t, const char *db, const char *coll, const bson_value_t *id);

/* Records the new version `doc` (NULL: deleted) of a document; `existed`
 * says whether it is in the store. Takes a reference to `doc`. */
void txn_put(txn_t *t, const char *db, const char *coll, const bson_value_t *id, record_t *doc,
             bool existed);

/* Calls `fn` for every buffered change of `db`.`coll`. */
void txn_foreach(const txn_t *t, const char *db, const char *coll,
                 void (*fn)(txn_change_t *ch, void *ctx), void *ctx);

/* A savepoint: changes recorded after it can be undone (a command that
 * must wait for a lock runs again from its start). */
size_t txn_savepoint(const txn_t *t);
void txn_rollback_to(txn_t *t, size_t savepoint);

/* Applies the write set to `cat` in one go (counted as committed; a
 * transaction destroyed without a successful commit counts as aborted). On any failure (a unique index
 * would be broken) everything already applied is undone and err says why. */
bool txn_commit(txn_t *t, catalog_t *cat, dberr_t *err);

/* A stand-in for collection `db`.`coll`, which does not exist yet: the
 * transaction's writes to it stay invisible until commit creates it.
 * Owned by the transaction. */
collection_t *txn_scratch_collection(txn_t *t, const char *db, const char *coll);

/* The stand-in for `db`.`coll` if the transaction made one, or NULL. */
collection_t *txn_find_scratch(const txn_t *t, const char *db, const char *coll);

/* Number of buffered changes. */
size_t txn_nchanges(const txn_t *t);

/* -- for the lock manager -- */
void txn_note_lock(txn_t *t, const buf_t *key);
const buf_t *txn_locks(const txn_t *t, size_t *n);
void txn_set_waiting_for(txn_t *t, txn_t *holder);
/* The lock waiter of the request this transaction has parked, or NULL; a
 * transaction aborted while waiting wakes it so it can report the abort. */
struct lock_waiter;
void txn_set_waiter(txn_t *t, struct lock_waiter *w);
txn_t *txn_waiting_for(const txn_t *t);

/* The youngest transaction on the wait-for cycle that `t` waiting for
 * `holder` would close, or NULL when there is no cycle. */
txn_t *txn_deadlock_victim(txn_t *t, txn_t *holder);

/* What the transaction belongs to (the session layer's pointer). */
void txn_set_owner(txn_t *t, void *owner);
void *txn_owner(const txn_t *t);

#endif
