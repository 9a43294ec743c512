/* journal-private: what the journal's files share — the log writer
 * (wal.c), snapshots (snapshot.c) and recovery/orchestration (journal.c). */
#ifndef ATOMDB_JOURNAL_PRIVATE_H
#define ATOMDB_JOURNAL_PRIVATE_H

#include <bson/bson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "journal/journal.h"
#include "store/catalog.h"
#include "util/buf.h"

/* Log segment: 16-byte header, then records. */
#define WAL_MAGIC "ATOMDBW1"
#define WAL_HEADER_SIZE 16
/* Record: [u32 payload length][u32 crc32c of lsn+payload][u64 lsn][payload]. */
#define WAL_RECORD_HEADER 16
#define WAL_MAX_RECORD (64u * 1024 * 1024)

/* Snapshot file: magic, u64 lsn, tagged entries, u32 crc32c of all before. */
#define SNAPSHOT_MAGIC "ATOMDBS1"

/* ---- journal.c: the transaction of the commit being built ---- */

/* The session and number of the transaction a commit being built belongs
 * to, kept by the journal (for the log record) and by history (for change
 * events). */
typedef struct journal_txn_tag {
    bool set;       /* false: the commit is no transaction's */
    bson_t lsid;    /* owned when set */
    int64_t number; /* txnNumber */
} journal_txn_tag_t;

/* Tags `t` with the session `lsid` (copied) and `number`, replacing any
 * previous tag. */
void journal_txn_tag_set(journal_txn_tag_t *t, const bson_t *lsid, int64_t number);
/* Drops the tag of `t`, if any. */
void journal_txn_tag_clear(journal_txn_tag_t *t);

/* ---- walrec.c (the record format) ---- */

/* Appends one record holding `payload` as log record `lsn` to `b`. */
void walrec_encode(buf_t *b, uint64_t lsn, const uint8_t *payload, uint32_t len);

/* What walrec_decode found at an offset of a segment. */
typedef enum walrec_status {
    WALREC_OK,           /* a whole record with a good checksum */
    WALREC_SHORT_HEADER, /* fewer bytes left than a record header */
    WALREC_TRUNCATED,    /* a plausible length that runs past the end (a torn write) */
    WALREC_BAD_LENGTH,   /* a length above WAL_MAX_RECORD */
    WALREC_BAD_CHECKSUM, /* the bytes are there but the checksum does not match */
} walrec_status_t;

/* One decoded record; `payload` borrows from the decoded bytes. */
typedef struct walrec {
    uint64_t lsn;
    const uint8_t *payload;
    uint32_t len;
    size_t size; /* header + payload: the offset of the next record */
} walrec_t;

/* Decodes the record at `data`, `left` bytes before the end of the
 * segment. `out` is filled as far as the header allows (for BAD_CHECKSUM,
 * out->size tells whether the record ends the segment: a torn tail). */
walrec_status_t walrec_decode(const uint8_t *data, size_t left, walrec_t *out);

/* ---- wal.c (log writer thread) ---- */

/* Starts the writer on `dir`, appending to a new segment whose first record
 * will be `next_lsn`. */
bool wal_start(uv_loop_t *loop, const char *dir, journal_mode_t mode, uint64_t next_lsn,
               dberr_t *err);
/* Writes what is queued, syncs, stops the thread, closes the segment. */
void wal_stop(void);
/* Appends one record with the next LSN; returns the LSN. */
uint64_t wal_append(const bson_t *payload);
/* The last LSN handed out. */
uint64_t wal_last_lsn(void);
/* Fills the log writer's part of `out` (wal bytes, batches, syncs). */
void wal_get_stats(journal_stats_t *out);
/* Bytes appended since the last call to wal_reset_growth(). */
uint64_t wal_growth(void);
void wal_reset_growth(void);
/* Hands everything appended so far to the writer and asks it to start a
 * new segment after record `lsn` (all records up to it are queued). */
void wal_rotate_after(uint64_t lsn);
/* Waiters and faults (see journal.h). */
bool wal_is_durable(uint64_t lsn, bool sync);
void wal_wait(journal_waiter_t *w);
void wal_cancel(journal_waiter_t *w);
bool wal_failing(char *why, size_t size);
bool wal_inject_fault(const char *point, int times, dberr_t *err);

/* Segment file name for the segment starting at `lsn`. */
void wal_segment_name(char *out, size_t size, const char *dir, uint64_t lsn);

/* ---- snapshot.c ---- */

/* Writes `cat` as snapshot `lsn` in `dir` (temporary file, fsync, rename,
 * fsync of the directory). Safe to call in a forked child: no logging, no
 * locks. False on any I/O error. */
bool snapshot_write(const catalog_t *cat, const char *dir, uint64_t lsn);
/* Loads the snapshot file `path` into `cat` (empty). *lsn gets its LSN.
 * False with err when the file is damaged. */
bool snapshot_load(const char *path, catalog_t *cat, uint64_t *lsn, dberr_t *err);

/* ---- snapcheck.c ---- */

enum { SNAPCHECK_RUNNING, SNAPCHECK_FINISHED, SNAPCHECK_FAILED };

/* The check of one mapped snapshot file or log segment, running ahead of
 * its loader. */
typedef struct snapcheck {
    const char *path;   /* for messages (borrowed) */
    const uint8_t *map; /* the file (borrowed) */
    size_t size;
    size_t start;       /* the first entry's offset */
    bool log;           /* a log segment (records), else a snapshot (entries) */
    size_t seen;        /* -- loader -- entries before this offset are known good */
    bool threaded;      /* the check runs on `thread` */
    pthread_t thread;
    atomic_bool stop;   /* the loader gave up: the checker stops */
    pthread_mutex_t mu; /* guards done, state and (once FAILED) why */
    pthread_cond_t cond;
    size_t done;        /* entries before this offset were checked and are good */
    int state;          /* SNAPCHECK_* */
    char why[512];      /* what is wrong at `done` (FAILED) */
} snapcheck_t;

/* Starts checking the entries from offset `start` of the snapshot (or with
 * `log` the log segment) mapped at `map` (`size` bytes, its header already
 * checked) on a thread of its own (or, without one, right now). A log's
 * check ends at the first record that is not whole with a good checksum. */
void snapcheck_start(snapcheck_t *k, const char *path, const uint8_t *map, size_t size,
                     size_t start, bool log);
/* Waits until the entry at `off` was checked: true when it is good, false
 * with err (the damage, named by file and offset) when it is not. */
bool snapcheck_wait(snapcheck_t *k, size_t off, dberr_t *err);
/* Stops the check (if still running) and joins its thread. */
void snapcheck_finish(snapcheck_t *k);

/* ---- journal.c ---- */

/* Recovers `cat` (empty) from the files in `dbpath` as journal_open does,
 * but starts nothing and takes no lock: *last_lsn gets the last record
 * applied. False with err naming the file and offset of the damage. */
bool journal_recover_dir(const char *dbpath, bool repair, catalog_t *cat, uint64_t *last_lsn,
                         dberr_t *err);

#endif
