/* mvcc: the store's change sequence and transaction snapshots. Every
 * stored version carries the sequence number of the change that made it.
 * While any snapshot is open, every change (insert, replace, delete) is
 * kept in a change window, oldest first, with the versions before and
 * after it; a transaction reads the data as of its snapshot by taking the
 * current versions made before it and, for the documents changed since,
 * the version each change replaced. The same window answers "was this
 * document changed since my snapshot?" (first-committer-wins) and "did a
 * change since my snapshot touch what I read?" (serializable validation).
 * Changes no open snapshot can need are dropped; with no snapshot open
 * nothing is kept. See docs/concurrency.md. Loop thread only. */
#ifndef ATOMDB_MVCC_H
#define ATOMDB_MVCC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "store/record.h"

/* One committed change, kept while a snapshot older than it is open. */
typedef struct mvcc_change {
    uint64_t coll_id; /* the collection (mvcc_new_collection_id) */
    uint64_t seq;     /* the change's sequence number */
    record_t *before; /* the version replaced or deleted (a reference); NULL: an insert */
    record_t *after;  /* the new version (a reference); NULL: a delete */
} mvcc_change_t;

/* The sequence number of the newest change. */
uint64_t mvcc_current_seq(void);

/* Stamps `r` as made by a new change. */
void mvcc_stamp(record_t *r);

/* Opens a snapshot of the current state and returns its sequence number;
 * close it with mvcc_snapshot_close. */
uint64_t mvcc_snapshot_open(void);
void mvcc_snapshot_close(uint64_t snapshot);

/* True while any snapshot is open. */
bool mvcc_active(void);

/* Record a change of collection `coll_id` in the window (nothing happens
 * while no snapshot is open). `r` and `newer` must already be stamped;
 * mvcc_deleted stamps the delete itself. */
void mvcc_inserted(uint64_t coll_id, record_t *r);
void mvcc_replaced(uint64_t coll_id, record_t *newer, record_t *old);
void mvcc_deleted(uint64_t coll_id, record_t *old);

/* The changes made after `snapshot` (which must be open), oldest first:
 * *n entries from the returned pointer (NULL when none was ever made),
 * borrowed until the next change or snapshot close. */
const mvcc_change_t *mvcc_changes_after(uint64_t snapshot, size_t *n);

/* True when some change after `snapshot` deleted a document (a cheap
 * test before searching the window for one). */
bool mvcc_deletes_after(uint64_t snapshot);

/* Number of changes in the window, for serverStatus. */
size_t mvcc_window_len(void);

/* A new collection id (never reused, unlike addresses). */
uint64_t mvcc_new_collection_id(void);

#endif
