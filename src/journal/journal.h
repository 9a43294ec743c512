/* journal: durability — a write-ahead log of committed changes written by
 * its own thread with group commit, snapshots written by a forked child,
 * and recovery at start-up (newest valid snapshot, then the log after it).
 * See docs/durability.md for the modes, guarantees and file formats. */
#ifndef ATOMDB_JOURNAL_H
#define ATOMDB_JOURNAL_H

#include <stdbool.h>
#include <bson/bson.h>
#include <stdint.h>
#include <uv.h>

#include "store/catalog.h"
#include "store/clock.h"
#include "util/dberr.h"

/* --journal modes. */
typedef enum journal_mode {
    JOURNAL_NONE,  /* no files: in memory only */
    JOURNAL_WRITE, /* ack once the record reached the OS; fdatasync every 100 ms */
    JOURNAL_FSYNC, /* ack once the record is fdatasync'ed */
} journal_mode_t;

/* Start-up options. */
typedef struct journal_options {
    const char *dbpath;
    journal_mode_t mode;
    bool repair;                   /* truncate at damage after keeping a copy */
    int64_t snapshot_interval_s;   /* 0 = no timed snapshots */
    int64_t snapshot_wal_bytes;    /* snapshot when the log since the last passes this */
    int64_t history_s;             /* change stream history kept (seconds; 0 = no bound) */
    int64_t history_bytes;         /* ... and at most this much (0 = no bound) */
} journal_options_t;

/* Parses "none"/"write"/"fsync". */
bool journal_parse_mode(const char *name, journal_mode_t *out);

/* Takes the lock file, recovers `cat` from the files in dbpath, starts the
 * log thread and the change observer. False with err (the caller logs it
 * and exits) when the dbpath is locked or the files are damaged. */
bool journal_open(uv_loop_t *loop, const journal_options_t *opts, catalog_t *cat, dberr_t *err);

/* Writes a final snapshot (when journaling), stops the thread, releases
 * the lock. */
void journal_close(void);

/* The journal mode in force. */
journal_mode_t journal_mode(void);

/* Seals the changes made since the last call into one commit: a new
 * cluster time (journal_commit_ts) and one log record, whose LSN it
 * returns; 0 when nothing changed (or the mode is none: the commit still
 * gets its cluster time). */
uint64_t journal_seal(void);

/* The commit being built is transaction `txn_number` of session `lsid`
 * ({id: UUID}): its log record and change events carry them. */
void journal_note_txn(const bson_t *lsid, int64_t txn_number);

/* `hook` (or NULL) is called after every commit journal_seal makes, with
 * its log record (0 when not logged); change streams use it to wake
 * their waiting getMores once that record is durable. */
void journal_set_commit_hook(void (*hook)(uint64_t lsn));

/* True when the running command has changed something (ops not sealed). */
bool journal_pending(void);

/* The cluster time of the last commit journal_seal made. */
clock_ts_t journal_commit_ts(void);

/* False with LogWriteFailed (42) while the log cannot be written (disk
 * full, I/O error): writes are refused until it recovers. */
bool journal_writable(dberr_t *err);

/* A reply waiting for its record to be durable. Embedded in the waiter's
 * owner; the journal links it until done() is called. */
typedef struct journal_waiter {
    struct journal_waiter *prev, *next;
    uint64_t lsn;
    bool sync;           /* wait for fdatasync, not only write */
    bool linked;
    /* Called on the loop thread; `ok` false when the record could not be
     * written (errmsg says why). */
    void (*done)(struct journal_waiter *w, bool ok, const char *errmsg);
} journal_waiter_t;

/* True when the record `lsn` is already as durable as asked. */
bool journal_is_durable(uint64_t lsn, bool sync);

/* Queues `w` until record w->lsn is written (or synced when w->sync). */
void journal_wait(journal_waiter_t *w);

/* Unlinks `w` without calling it (its owner is going away). */
void journal_cancel(journal_waiter_t *w);

/* Starts a snapshot now (the fsync command); false with err when one
 * cannot be started. A snapshot already running is not an error. */
bool journal_snapshot_now(dberr_t *err);

/* Upper bounds of the fdatasync latency histogram's buckets, in seconds
 * (+Inf follows), and of the group-commit batch-size one, in records. */
#define JOURNAL_SYNC_BUCKETS 12
extern const double journal_sync_bounds[JOURNAL_SYNC_BUCKETS];
#define JOURNAL_BATCH_BUCKETS 8
extern const double journal_batch_bounds[JOURNAL_BATCH_BUCKETS];

/* The log's figures since start, for serverStatus and the metrics. */
typedef struct journal_stats {
    journal_mode_t mode;
    uint64_t wal_bytes;      /* bytes appended to the log (headers included) */
    uint64_t records;        /* records (commits) appended */
    uint64_t last_lsn;       /* the newest record */
    uint64_t written_lsn;    /* records up to here reached the OS */
    uint64_t synced_lsn;     /* ... and were fdatasync'ed */
    bool failing;            /* the log cannot be written right now */
    uint64_t batches;        /* group commits: writes of one or more records */
    uint64_t batch_buckets[JOURNAL_BATCH_BUCKETS + 1]; /* records per batch, per bucket */
    uint64_t batch_records;  /* records in all batches */
    uint64_t syncs;          /* fdatasync calls that succeeded */
    uint64_t sync_buckets[JOURNAL_SYNC_BUCKETS + 1];    /* their latency, per bucket */
    uint64_t sync_ns;        /* their total latency */
    uint64_t snapshots;      /* snapshots written since start */
    int64_t snapshot_last_ms;      /* how long the last one took, -1 when none */
    int64_t snapshot_age_ms;       /* since the last one started (or start-up) */
    bool snapshot_running;
} journal_stats_t;

/* Fills `out` (loop thread). */
void journal_get_stats(journal_stats_t *out);

/* Fault injection (builds with FAULT_INJECTION): makes the next `times`
 * log writes fail as `point` says ("wal_short_write", "wal_fsync_error",
 * "wal_enospc"). */
bool journal_inject_fault(const char *point, int times, dberr_t *err);

#endif
