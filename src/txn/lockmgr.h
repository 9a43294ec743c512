/* lockmgr: exclusive document locks held by transactions until they commit
 * or abort. A request that finds a document locked by another transaction
 * waits (parked, never blocking the loop): a transaction up to
 * maxTransactionLockRequestTimeoutMillis, a write outside any transaction
 * until the holder finishes. Releasing a lock wakes its waiters, which run
 * their command again. Deadlocks are found when a wait would close a cycle
 * in the wait-for graph. See docs/concurrency.md. */
#ifndef ATOMDB_LOCKMGR_H
#define ATOMDB_LOCKMGR_H

#include <bson/bson.h>
#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "util/buf.h"

struct txn;

/* A parked request waiting for a lock. Embedded in its owner. */
typedef struct lock_waiter {
    struct lock_waiter *prev, *next; /* in the lock's queue */
    struct lockmgr_entry *entry;     /* the lock waited for, NULL when not waiting */
    struct txn *txn;                 /* the waiting transaction, or NULL */
    uv_timer_t *timer;               /* deadline, or NULL for none */
    uint64_t since;                  /* uv_hrtime() when it was queued */
    /* Called once on the loop thread: the lock was released (timed_out
     * false) or the deadline passed (true). The waiter is unlinked first. */
    void (*wake)(struct lock_waiter *w, bool timed_out);
} lock_waiter_t;

/* The key of document `id` in `db`.`coll`, written to `out`. */
void lockmgr_key(const char *db, const char *coll, const bson_value_t *id, buf_t *out);

/* True when the table holds any lock (or a waiter's entry): a write
 * outside every transaction, which only checks, has nothing to check
 * otherwise and need not build its key. */
bool lockmgr_any(void);

/* Takes the lock on `key` for `owner` (or confirms it already holds it).
 * False when another transaction holds it; *holder then names it. */
bool lockmgr_acquire(const buf_t *key, struct txn *owner, struct txn **holder);

/* The transaction holding `key`, or NULL. */
struct txn *lockmgr_holder(const buf_t *key);

/* Queues `w` on the lock `key` (which must be held), with a deadline in ms
 * (< 0: none). */
void lockmgr_wait(lock_waiter_t *w, const buf_t *key, int64_t timeout_ms, uv_loop_t *loop);

/* Takes `w` off its queue without waking it (its owner is going away). */
void lockmgr_cancel(lock_waiter_t *w);

/* Releases every lock `owner` holds and wakes their waiters. */
void lockmgr_release_all(struct txn *owner);

/* Number of locks held, for serverStatus. */
size_t lockmgr_count(void);

/* Lock-wait figures since start, for serverStatus and the metrics. */
typedef struct lockmgr_stats {
    int64_t waiting;      /* requests queued now */
    int64_t waits;        /* requests that were queued */
    int64_t timeouts;     /* ... whose deadline passed */
    uint64_t wait_ns;     /* time spent queued by the waits that ended */
} lockmgr_stats_t;
const lockmgr_stats_t *lockmgr_get_stats(void);

/* Calls `fn` for every locked document: its key (lockmgr_key's bytes),
 * holder, and the transactions queued on it (`nwaiters`, oldest first, in
 * `waiters`, borrowed for the call). */
typedef void (*lockmgr_entry_fn)(const buf_t *key, struct txn *holder, struct txn *const *waiters,
                                 size_t nwaiters, void *arg);
void lockmgr_foreach(lockmgr_entry_fn fn, void *arg);

#endif
