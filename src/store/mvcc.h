/* mvcc: the store's change sequence and transaction snapshots. Every
 * stored version carries the sequence number of the change that made it;
 * while any snapshot is open, a replaced version stays linked behind its
 * successor and a deleted one stays in a graveyard, so a transaction reads
 * the data as of its snapshot. With no snapshot open nothing is kept. */
#ifndef ATOMDB_MVCC_H
#define ATOMDB_MVCC_H

#include <stdbool.h>
#include <stdint.h>

#include "store/record.h"

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

/* Records that `newer` replaced `old` (keeps `old` reachable while
 * snapshots are open). */
void mvcc_replaced(record_t *newer, record_t *old);

/* Records that `old` was deleted from collection `coll_id`. */
void mvcc_deleted(uint64_t coll_id, record_t *old);

/* The version of `r` visible at `snapshot`, or NULL (made later). */
static inline record_t *mvcc_visible(record_t *r, uint64_t snapshot)
{
    while (r && r->seq > snapshot)
        r = r->older;
    return r;
}

/* Calls `fn` with the visible version of every document of collection
 * `coll_id` deleted after `snapshot`. */
void mvcc_foreach_deleted(uint64_t coll_id, uint64_t snapshot, void (*fn)(record_t *r, void *ctx),
                          void *ctx);

/* A new collection id (never reused, unlike addresses). */
uint64_t mvcc_new_collection_id(void);

#endif
