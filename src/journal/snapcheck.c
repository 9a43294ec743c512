/* snapcheck: checks a snapshot file's entries (framing, CRC-32C, strict
 * BSON), or a log segment's records' BSON, on a thread of its own, ahead of
 * the loader, so loading a large file costs the checking or the building
 * of the store, whichever is longer, instead of both. The loader takes an
 * entry only once it was checked, so a damaged file is refused exactly as
 * before. */
#include "journal/journal-private.h"

#include <stdio.h>
#include <string.h>

#include "util/bsoncheck.h"
#include "util/buf.h"
#include "util/crc32c.h"

/* Entries checked between two reports to the loader. */
#define SNAPCHECK_BATCH 64

/* Checks the log record at `off` (a segment): its payload's BSON when
 * the record is whole with a good checksum; anything else ends the check
 * there (*end), the loader telling a torn tail from damage itself. */
static bool snapcheck_record(snapcheck_t *k, size_t off, size_t *next, bool *end)
{
    walrec_t rec;
    if (walrec_decode(k->map + off, k->size - off, &rec) != WALREC_OK) {
        *next = off;
        *end = true;
        return true;
    }
    bson_t doc;
    uint32_t bad_at;
    if (!bson_init_static(&doc, k->map + off + WAL_RECORD_HEADER, rec.len) ||
        bsoncheck_doc(&doc, &bad_at) != BSONCHECK_OK) {
        snprintf(k->why, sizeof k->why, "invalid BSON in the log record");
        return false;
    }
    *next = off + WAL_RECORD_HEADER + rec.len;
    *end = false;
    return true;
}

/* Checks the entry at `off`; false with `why` set when it is damaged.
 * *next gets the offset after it, *end whether it is the end entry. */
static bool snapcheck_entry(snapcheck_t *k, size_t off, size_t *next, bool *end)
{
    if (k->log)
        return snapcheck_record(k, off, next, end);
    const uint8_t *map = k->map;
    size_t size = k->size;
    char *why = k->why;
    if (size - off < 9) {
        snprintf(why, sizeof k->why, "%s: truncated entry at offset %zu", k->path, off);
        return false;
    }
    uint32_t len = (uint32_t)buf_get_le(map + off + 1, 4),
             crc = (uint32_t)buf_get_le(map + off + 5, 4);
    if (len < 5 || len > size - off - 9) {
        snprintf(why, sizeof k->why, "%s: bad entry length at offset %zu", k->path, off);
        return false;
    }
    const uint8_t *data = map + off + 9;
    bson_t doc;
    if (crc32c(data, len) != crc || !bson_init_static(&doc, data, len)) {
        snprintf(why, sizeof k->why, "%s: checksum mismatch at offset %zu", k->path, off);
        return false;
    }
    uint32_t bad_at;
    if (bsoncheck_doc(&doc, &bad_at) != BSONCHECK_OK) {
        snprintf(why, sizeof k->why, "%s: invalid BSON at offset %zu", k->path,
                 off + 9 + bad_at);
        return false;
    }
    *next = off + 9 + len;
    *end = map[off] == 'E';
    return true;
}

/* Publishes progress (and the final state) to the loader. */
static void snapcheck_report(snapcheck_t *k, size_t done, int state)
{
    pthread_mutex_lock(&k->mu);
    k->done = done;
    k->state = state;
    pthread_cond_signal(&k->cond);
    pthread_mutex_unlock(&k->mu);
}

static void *snapcheck_main(void *arg)
{
    snapcheck_t *k = arg;
    size_t off = k->start;
    bool end = false;
    int n = 0;
    while (off < k->size && !end) {
        if (atomic_load_explicit(&k->stop, memory_order_relaxed))
            break;
        size_t next;
        if (!snapcheck_entry(k, off, &next, &end)) {
            snapcheck_report(k, off, SNAPCHECK_FAILED);
            return NULL;
        }
        off = next;
        if (++n % SNAPCHECK_BATCH == 0)
            snapcheck_report(k, off, SNAPCHECK_RUNNING);
    }
    snapcheck_report(k, off, SNAPCHECK_FINISHED);
    return NULL;
}

void snapcheck_start(snapcheck_t *k, const char *path, const uint8_t *map, size_t size,
                     size_t start, bool log)
{
    *k = (snapcheck_t){.path = path,
                       .map = map,
                       .size = size,
                       .start = start,
                       .log = log,
                       .done = start,
                       .state = SNAPCHECK_RUNNING};
    atomic_init(&k->stop, false);
    pthread_mutex_init(&k->mu, NULL);
    pthread_cond_init(&k->cond, NULL);
    k->threaded = pthread_create(&k->thread, NULL, snapcheck_main, k) == 0;
    if (!k->threaded) /* no thread to be had: check it all first */
        snapcheck_main(k);
}

bool snapcheck_wait(snapcheck_t *k, size_t off, dberr_t *err)
{
    if (off < k->seen)
        return true;
    pthread_mutex_lock(&k->mu);
    while (k->done <= off && k->state == SNAPCHECK_RUNNING)
        pthread_cond_wait(&k->cond, &k->mu);
    k->seen = k->done;
    bool ok = k->done > off;
    int state = k->state;
    pthread_mutex_unlock(&k->mu);
    if (!ok && state == SNAPCHECK_FAILED)
        dberr_set(err, DBERR_INTERNAL_ERROR, "%s", k->why);
    else if (!ok)
        dberr_set(err, DBERR_INTERNAL_ERROR, "%s: truncated entry at offset %zu", k->path, off);
    return ok;
}

void snapcheck_finish(snapcheck_t *k)
{
    atomic_store(&k->stop, true);
    if (k->threaded)
        pthread_join(k->thread, NULL);
    pthread_mutex_destroy(&k->mu);
    pthread_cond_destroy(&k->cond);
}
