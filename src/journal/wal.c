/* wal: the write-ahead log writer. The loop thread appends records to a
 * buffer; once per loop iteration (a uv_check handle) the buffer is
 * written in one piece — group commit. When nothing else is in flight the
 * loop thread write()s it itself (and in fsync mode fdatasync()s it) and
 * releases the replies waiting for it at once; otherwise (a batch still in
 * flight, a failing disk, a rotation, an injected fault) the buffer goes to
 * the writer thread, which write()s it, fdatasync()s it when asked (fsync
 * mode, j:true) or every 100 ms in write mode, and reports progress back
 * through a uv_async handle. A failed write keeps its bytes and is
 * retried, in order, until it succeeds. */
#include "journal/journal-private.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "util/dlist.h"
#include "util/log.h"

#define WAL_BACKGROUND_SYNC_MS 100
#define WAL_RETRY_MS 200

typedef struct wal {
    /* -- loop thread -- */
    uv_loop_t *loop;
    uv_check_t check;
    uv_async_t async;
    journal_mode_t mode;
    buf_t pending;              /* records appended this iteration */
    uint64_t pending_first;     /* LSN of the first of them */
    uint64_t next_lsn;          /* LSN of the next record */
    uint64_t growth;            /* bytes since wal_reset_growth */
    journal_waiter_t *waiters;  /* replies waiting for durability */
    uint64_t stat_bytes;        /* bytes appended since start */
    uint64_t stat_records;
    uint64_t stat_batches;      /* group commits written */
    uint64_t stat_batch_records;
    uint64_t stat_batch_buckets[JOURNAL_BATCH_BUCKETS + 1];
    uint64_t seen_written;      /* progress last read from the writer */
    uint64_t seen_synced;
    uint64_t seen_failed_upto;  /* records up to here failed at least once */
    bool seen_failing;

    /* -- shared, under mu -- */
    pthread_mutex_t mu;
    pthread_cond_t cond;
    buf_t queue;                /* records handed to the writer */
    uint64_t queue_last_lsn;
    uint64_t sync_target;       /* a waiter needs fdatasync up to here */
    uint64_t rotate_after;      /* start a new segment after this LSN (0 = none) */
    uint64_t written_lsn;       /* all records up to here are in the OS */
    uint64_t synced_lsn;        /* ... and on disk */
    uint64_t failed_upto;       /* highest LSN whose write failed */
    bool failing;               /* the last attempt failed */
    char failure[256];
    bool stop;
    bool writer_idle;           /* the writer sleeps with nothing to sync */
    uint64_t stat_syncs;        /* fdatasync calls that succeeded (either thread) */
    uint64_t stat_sync_ns;
    uint64_t stat_sync_buckets[JOURNAL_SYNC_BUCKETS + 1];
    int fault_point;            /* 0 none, 1 short write, 2 fsync error, 3 ENOSPC */
    int fault_times;

    /* -- whoever holds io: the writer thread, or the loop thread's
     * direct write (write mode) -- */
    pthread_mutex_t io;
    int fd;
    uint64_t seg_offset;        /* bytes in the current segment */

    /* -- writer thread -- */
    pthread_t thread;
    char dir[4096];
    buf_t retry;                /* bytes whose write failed, written first */
    uint64_t retry_last_lsn;
} wal_t;

static wal_t wal;
static bool wal_started;

const double journal_sync_bounds[JOURNAL_SYNC_BUCKETS] = {
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0};
const double journal_batch_bounds[JOURNAL_BATCH_BUCKETS] = {1, 2, 4, 8, 16, 32, 64, 128};

/* Counts one batch of `n` records handed to the log (loop thread). */
static void wal_count_batch(uint64_t n)
{
    int b = 0;
    while (b < JOURNAL_BATCH_BUCKETS && (double)n > journal_batch_bounds[b])
        b++;
    wal.stat_batch_buckets[b]++;
    wal.stat_batches++;
    wal.stat_batch_records += n;
}

void wal_segment_name(char *out, size_t size, const char *dir, uint64_t lsn)
{
    snprintf(out, size, "%s/wal-%016" PRIx64 ".log", dir, lsn);
}

/* Opens a new segment whose first record is `lsn` (writer thread). */
static bool wal_open_segment(uint64_t lsn, char *why, size_t size)
{
    char path[4200];
    wal_segment_name(path, sizeof path, wal.dir, lsn);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        snprintf(why, size, "cannot create %s: %s", path, strerror(errno));
        return false;
    }
    uint8_t header[WAL_HEADER_SIZE];
    memcpy(header, WAL_MAGIC, 8);
    buf_put_le(header + 8, 8, lsn);
    if (write(fd, header, sizeof header) != (ssize_t)sizeof header || fdatasync(fd) != 0) {
        snprintf(why, size, "cannot write %s: %s", path, strerror(errno));
        close(fd);
        unlink(path);
        return false;
    }
    int dfd = open(wal.dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        fsync(dfd);
        close(dfd);
    }
    if (wal.fd >= 0) {
        fdatasync(wal.fd);
        close(wal.fd);
    }
    wal.fd = fd;
    wal.seg_offset = WAL_HEADER_SIZE;
    return true;
}

/* Writes `n` bytes at the end of the segment; on failure truncates back
 * so the segment ends on a record boundary (writer thread). */
static bool wal_write_all(const uint8_t *p, size_t n, char *why, size_t size)
{
    size_t done = 0;
    int fault = 0;
    pthread_mutex_lock(&wal.mu);
    if (wal.fault_times > 0 && (wal.fault_point == 1 || wal.fault_point == 3)) {
        fault = wal.fault_point;
        wal.fault_times--;
    }
    pthread_mutex_unlock(&wal.mu);
    while (done < n) {
        size_t chunk = n - done;
        if (fault == 1)
            chunk = chunk > 1 ? chunk / 2 : chunk; /* a short write, then failure */
        ssize_t w = fault == 3 ? (errno = ENOSPC, -1) : write(wal.fd, p + done, chunk);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0 || fault == 1) {
            if (w > 0)
                done += (size_t)w;
            snprintf(why, size, "write to the log failed: %s",
                     fault == 1 ? "short write (injected)" : strerror(w < 0 ? errno : EIO));
            if (ftruncate(wal.fd, (off_t)wal.seg_offset) != 0 ||
                lseek(wal.fd, (off_t)wal.seg_offset, SEEK_SET) < 0)
                snprintf(why, size, "write to the log failed and truncating it back failed: %s",
                         strerror(errno));
            return false;
        }
        done += (size_t)w;
    }
    wal.seg_offset += n;
    return true;
}

static bool wal_sync(char *why, size_t size)
{
    bool fail = false;
    pthread_mutex_lock(&wal.mu);
    if (wal.fault_times > 0 && wal.fault_point == 2) {
        fail = true;
        wal.fault_times--;
    }
    pthread_mutex_unlock(&wal.mu);
    uint64_t t0 = uv_hrtime();
    if (fail || fdatasync(wal.fd) != 0) {
        snprintf(why, size, "fdatasync of the log failed: %s",
                 fail ? "I/O error (injected)" : strerror(errno));
        return false;
    }
    uint64_t ns = uv_hrtime() - t0;
    int b = 0;
    while (b < JOURNAL_SYNC_BUCKETS && (double)ns / 1e9 > journal_sync_bounds[b])
        b++;
    pthread_mutex_lock(&wal.mu);
    wal.stat_syncs++;
    wal.stat_sync_ns += ns;
    wal.stat_sync_buckets[b]++;
    pthread_mutex_unlock(&wal.mu);
    return true;
}

/* Writes `b` (whole records). When `rotate_after` falls inside it, the
 * records up to it go to the current segment and the rest to a new one
 * (writer thread). */
static bool wal_write_records(const buf_t *b, uint64_t rotate_after, bool *rotated, char *why,
                              size_t size)
{
    size_t off = 0;
    if (rotate_after && !*rotated) {
        while (off + WAL_RECORD_HEADER <= b->len &&
               buf_get_le(b->data + off + 8, 8) <= rotate_after)
            off += WAL_RECORD_HEADER + (uint32_t)buf_get_le(b->data + off, 4);
        if (off > 0 && !wal_write_all(b->data, off, why, size))
            return false;
        if (off < b->len) {
            if (!wal_open_segment(rotate_after + 1, why, size))
                return false;
            *rotated = true;
        }
    }
    return off >= b->len || wal_write_all(b->data + off, b->len - off, why, size);
}

static void *wal_thread_main(void *arg)
{
    buf_t local;
    buf_init(&local);
    uint64_t last_sync_ms = 0;
    for (;;) {
        pthread_mutex_lock(&wal.mu);
        while (!wal.stop && wal.queue.len == 0 && wal.retry.len == 0 &&
               wal.sync_target <= wal.synced_lsn && wal.rotate_after == 0 &&
               !(wal.mode == JOURNAL_WRITE && wal.synced_lsn < wal.written_lsn)) {
            wal.writer_idle = true;
            pthread_cond_wait(&wal.cond, &wal.mu);
            wal.writer_idle = false;
        }
        if (wal.retry.len == 0 && wal.queue.len == 0 && wal.rotate_after == 0 &&
            wal.sync_target <= wal.synced_lsn && wal.mode == JOURNAL_WRITE &&
            wal.synced_lsn < wal.written_lsn && !wal.stop) {
            /* background sync: wait out the interval unless woken */
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            ts.tv_nsec += WAL_BACKGROUND_SYNC_MS * 1000000L;
            if (ts.tv_nsec >= 1000000000L) {
                ts.tv_sec++;
                ts.tv_nsec -= 1000000000L;
            }
            pthread_cond_timedwait(&wal.cond, &wal.mu, &ts);
        }
        bool stop = wal.stop;
        buf_t tmp = local;
        local = wal.queue;
        wal.queue = tmp;
        wal.queue.len = 0;
        uint64_t batch_last = wal.queue_last_lsn;
        uint64_t rotate_after = wal.rotate_after;
        uint64_t sync_target = wal.sync_target;
        uint64_t written = wal.written_lsn;
        pthread_mutex_unlock(&wal.mu);

        char why[256] = "";
        bool ok = true;
        bool rotated = false;
        pthread_mutex_lock(&wal.io);
        /* earlier failed bytes go first, in order */
        if (wal.retry.len) {
            ok = wal_write_records(&wal.retry, rotate_after, &rotated, why, sizeof why);
            if (ok) {
                written = wal.retry_last_lsn;
                wal.retry.len = 0;
            }
        }
        if (ok && local.len) {
            ok = wal_write_records(&local, rotate_after, &rotated, why, sizeof why);
            if (ok)
                written = batch_last;
        }
        if (!ok && local.len) {
            buf_append(&wal.retry, local.data, local.len);
            wal.retry_last_lsn = batch_last;
        }
        local.len = 0;
        if (ok && rotate_after && !rotated && written >= rotate_after)
            ok = wal_open_segment(rotate_after + 1, why, sizeof why), rotated = ok;
        pthread_mutex_unlock(&wal.io);
        uint64_t synced = 0;
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        uint64_t now_ms = (uint64_t)now.tv_sec * 1000 + (uint64_t)now.tv_nsec / 1000000;
        bool want_sync = wal.mode == JOURNAL_FSYNC || sync_target > 0 || stop ||
                         now_ms - last_sync_ms >= WAL_BACKGROUND_SYNC_MS;
        if (ok && want_sync && written > 0) {
            if (wal_sync(why, sizeof why)) {
                synced = written;
                last_sync_ms = now_ms;
            } else {
                ok = false;
            }
        }
        pthread_mutex_lock(&wal.mu);
        if (rotated && wal.rotate_after == rotate_after)
            wal.rotate_after = 0;
        if (written > wal.written_lsn)
            wal.written_lsn = written;
        if (synced > wal.synced_lsn)
            wal.synced_lsn = synced;
        if (wal.sync_target <= wal.synced_lsn)
            wal.sync_target = 0;
        wal.failing = !ok;
        if (!ok) {
            snprintf(wal.failure, sizeof wal.failure, "%s", why);
            uint64_t upto = wal.retry.len ? wal.retry_last_lsn : batch_last;
            if (upto > wal.failed_upto)
                wal.failed_upto = upto;
            if (wal.failed_upto < sync_target)
                wal.failed_upto = sync_target;
        }
        bool done = stop && ok;
        if (stop && !ok)
            done = true; /* give up at shutdown; the loop logs it */
        pthread_mutex_unlock(&wal.mu);
        uv_async_send(&wal.async);
        if (done)
            break;
        if (!ok) {
            struct timespec ts = {0, WAL_RETRY_MS * 1000000L};
            nanosleep(&ts, NULL);
        }
    }
    buf_destroy(&local);
    return NULL;
}

/* Hands the iteration's records to the writer (loop thread). */
static void wal_flush_pending(void)
{
    if (wal.pending.len == 0)
        return;
    wal_count_batch(wal.next_lsn - wal.pending_first);
    pthread_mutex_lock(&wal.mu);
    buf_append(&wal.queue, wal.pending.data, wal.pending.len);
    wal.queue_last_lsn = wal.next_lsn - 1;
    pthread_cond_signal(&wal.cond);
    pthread_mutex_unlock(&wal.mu);
    wal.pending.len = 0;
}

static void wal_release_waiters(void);

/* Writes the iteration's records from the loop thread when nothing else
 * is in flight — and in fsync mode fdatasync()s them there too, as Redis's
 * appendfsync always does — saving the hand-off to the writer thread and
 * back. The requests that arrive meanwhile wait in their sockets and make
 * the next batch, so one fdatasync covers every client that was waiting.
 * False when the writer thread must do it. */
static bool wal_write_direct(void)
{
    if (pthread_mutex_trylock(&wal.io) != 0)
        return false;
    pthread_mutex_lock(&wal.mu);
    bool clear = wal.queue.len == 0 && wal.retry.len == 0 && wal.rotate_after == 0 &&
                 !wal.failing && wal.fault_times == 0 && !wal.stop;
    pthread_mutex_unlock(&wal.mu);
    char why[256];
    bool ok = clear && wal_write_all(wal.pending.data, wal.pending.len, why, sizeof why);
    bool synced = ok && wal.mode == JOURNAL_FSYNC && wal_sync(why, sizeof why);
    pthread_mutex_unlock(&wal.io);
    if (!ok)
        return false; /* the writer retries the same bytes and reports */
    uint64_t last = wal.next_lsn - 1;
    pthread_mutex_lock(&wal.mu);
    if (last > wal.written_lsn)
        wal.written_lsn = last;
    if (synced && last > wal.synced_lsn)
        wal.synced_lsn = last;
    if (wal.sync_target <= wal.synced_lsn)
        wal.sync_target = 0;
    /* write mode: the writer schedules the background fdatasync; fsync
     * mode after a failed fdatasync: it retries and reports */
    bool wake = wal.mode == JOURNAL_FSYNC ? !synced : wal.writer_idle;
    if (!synced && wal.mode == JOURNAL_FSYNC && wal.sync_target < last)
        wal.sync_target = last;
    if (wake)
        pthread_cond_signal(&wal.cond);
    pthread_mutex_unlock(&wal.mu);
    wal_count_batch(wal.next_lsn - wal.pending_first);
    wal.pending.len = 0;
    wal.seen_written = last;
    if (synced)
        wal.seen_synced = last;
    return true;
}

static void wal_on_check(uv_check_t *h)
{
    /* a released reply lets its connection run the next request, which
     * may append again: write until nothing is left */
    for (;;) {
        journal_seal(); /* changes made outside any command (TTL monitor) */
        if (wal.pending.len == 0)
            return;
        if (!wal_write_direct()) {
            wal_flush_pending();
            return;
        }
        wal_release_waiters();
    }
}

static void wal_unlink(journal_waiter_t *w)
{
    if (!w->linked)
        return;
    DLIST_UNLINK(wal.waiters, w, prev, next);
    w->linked = false;
}

static void wal_on_async(uv_async_t *h)
{
    char why[256];
    pthread_mutex_lock(&wal.mu);
    wal.seen_written = wal.written_lsn;
    wal.seen_synced = wal.synced_lsn;
    wal.seen_failed_upto = wal.failed_upto;
    bool was_failing = wal.seen_failing;
    wal.seen_failing = wal.failing;
    snprintf(why, sizeof why, "%s", wal.failure);
    pthread_mutex_unlock(&wal.mu);
    if (wal.seen_failing && !was_failing)
        log_error("JOURNAL", "%s; writes are refused until the log can be written again", why);
    if (!wal.seen_failing && was_failing)
        log_info("JOURNAL", "the log is writable again");
    wal_release_waiters();
}

/* Answers the waiters whose records are durable, or failed (loop thread). */
static void wal_release_waiters(void)
{
    char why[256] = "";
    journal_waiter_t *w = wal.waiters;
    while (w) {
        journal_waiter_t *next = w->next;
        bool durable = w->sync ? wal.seen_synced >= w->lsn : wal.seen_written >= w->lsn;
        if (durable) {
            wal_unlink(w);
            w->done(w, true, NULL);
        } else if (w->lsn <= wal.seen_failed_upto) {
            if (!why[0]) {
                pthread_mutex_lock(&wal.mu);
                snprintf(why, sizeof why, "%s", wal.failure);
                pthread_mutex_unlock(&wal.mu);
            }
            wal_unlink(w);
            w->done(w, false, why);
        }
        w = next;
    }
}

bool wal_start(uv_loop_t *loop, const char *dir, journal_mode_t mode, uint64_t next_lsn,
               dberr_t *err)
{
    memset(&wal, 0, sizeof wal);
    wal.loop = loop;
    wal.mode = mode;
    wal.fd = -1;
    wal.next_lsn = next_lsn;
    wal.written_lsn = wal.synced_lsn = next_lsn - 1;
    wal.seen_written = wal.seen_synced = next_lsn - 1;
    snprintf(wal.dir, sizeof wal.dir, "%s", dir);
    buf_init(&wal.pending);
    buf_init(&wal.queue);
    buf_init(&wal.retry);
    char why[256];
    if (!wal_open_segment(next_lsn, why, sizeof why))
        return dberr_set(err, 42, "%s", why);
    pthread_mutex_init(&wal.mu, NULL);
    pthread_mutex_init(&wal.io, NULL);
    pthread_cond_init(&wal.cond, NULL);
    uv_check_init(loop, &wal.check);
    uv_check_start(&wal.check, wal_on_check);
    uv_async_init(loop, &wal.async, wal_on_async);
    if (pthread_create(&wal.thread, NULL, wal_thread_main, NULL) != 0)
        return dberr_set(err, DBERR_INTERNAL_ERROR, "cannot start the log thread");
    wal_started = true;
    return true;
}

void wal_stop(void)
{
    if (!wal_started)
        return;
    wal_flush_pending();
    pthread_mutex_lock(&wal.mu);
    wal.stop = true;
    pthread_cond_signal(&wal.cond);
    pthread_mutex_unlock(&wal.mu);
    pthread_join(wal.thread, NULL);
    if (wal.retry.len)
        log_error("JOURNAL", "%zu bytes of log records could not be written before shutdown",
                  wal.retry.len);
    if (wal.fd >= 0) {
        fdatasync(wal.fd);
        close(wal.fd);
        wal.fd = -1;
    }
    if (!uv_is_closing((uv_handle_t *)&wal.check))
        uv_close((uv_handle_t *)&wal.check, NULL);
    if (!uv_is_closing((uv_handle_t *)&wal.async))
        uv_close((uv_handle_t *)&wal.async, NULL);
    buf_destroy(&wal.pending);
    buf_destroy(&wal.queue);
    buf_destroy(&wal.retry);
    wal_started = false;
}

uint64_t wal_append(const bson_t *payload)
{
    uint64_t lsn = wal.next_lsn++;
    if (wal.pending.len == 0)
        wal.pending_first = lsn;
    walrec_encode(&wal.pending, lsn, bson_get_data(payload), payload->len);
    wal.growth += WAL_RECORD_HEADER + payload->len;
    wal.stat_bytes += WAL_RECORD_HEADER + payload->len;
    wal.stat_records++;
    return lsn;
}

void wal_get_stats(journal_stats_t *out)
{
    out->wal_bytes = wal.stat_bytes;
    out->records = wal.stat_records;
    out->last_lsn = wal.next_lsn ? wal.next_lsn - 1 : 0;
    out->batches = wal.stat_batches;
    out->batch_records = wal.stat_batch_records;
    memcpy(out->batch_buckets, wal.stat_batch_buckets, sizeof out->batch_buckets);
    if (!wal_started)
        return;
    pthread_mutex_lock(&wal.mu);
    out->written_lsn = wal.written_lsn;
    out->synced_lsn = wal.synced_lsn;
    out->failing = wal.failing;
    out->syncs = wal.stat_syncs;
    out->sync_ns = wal.stat_sync_ns;
    memcpy(out->sync_buckets, wal.stat_sync_buckets, sizeof out->sync_buckets);
    pthread_mutex_unlock(&wal.mu);
}

uint64_t wal_last_lsn(void)
{
    return wal.next_lsn - 1;
}

uint64_t wal_growth(void)
{
    return wal.growth;
}

void wal_reset_growth(void)
{
    wal.growth = 0;
}

void wal_rotate_after(uint64_t lsn)
{
    wal_flush_pending();
    pthread_mutex_lock(&wal.mu);
    wal.rotate_after = lsn;
    pthread_cond_signal(&wal.cond);
    pthread_mutex_unlock(&wal.mu);
}

bool wal_is_durable(uint64_t lsn, bool sync)
{
    if (!wal_started || lsn == 0)
        return true;
    return sync ? wal.seen_synced >= lsn : wal.seen_written >= lsn;
}

void wal_wait(journal_waiter_t *w)
{
    if (w->sync) {
        pthread_mutex_lock(&wal.mu);
        if (w->lsn > wal.sync_target)
            wal.sync_target = w->lsn;
        /* fsync mode: this iteration's check writes and syncs, or hands
         * the batch over (which wakes the writer) */
        if (wal.mode != JOURNAL_FSYNC || wal.pending.len == 0 || w->lsn < wal.pending_first)
            pthread_cond_signal(&wal.cond);
        pthread_mutex_unlock(&wal.mu);
    }
    w->prev = NULL;
    w->next = wal.waiters;
    if (wal.waiters)
        wal.waiters->prev = w;
    wal.waiters = w;
    w->linked = true;
}

void wal_cancel(journal_waiter_t *w)
{
    wal_unlink(w);
}

bool wal_failing(char *why, size_t size)
{
    if (!wal_started)
        return false;
    if (wal.seen_failing) {
        pthread_mutex_lock(&wal.mu);
        snprintf(why, size, "%s", wal.failure);
        pthread_mutex_unlock(&wal.mu);
    }
    return wal.seen_failing;
}

bool wal_inject_fault(const char *point, int times, dberr_t *err)
{
    int p = strcmp(point, "wal_short_write") == 0   ? 1
            : strcmp(point, "wal_fsync_error") == 0 ? 2
            : strcmp(point, "wal_enospc") == 0      ? 3
                                                    : 0;
    if (!p)
        return dberr_set(err, DBERR_BAD_VALUE, "unknown fault point '%s'", point);
    if (!wal_started)
        return dberr_set(err, DBERR_ILLEGAL_OPERATION, "the journal is off (--journal none)");
    pthread_mutex_lock(&wal.mu);
    wal.fault_point = p;
    wal.fault_times = times;
    pthread_mutex_unlock(&wal.mu);
    return true;
}
