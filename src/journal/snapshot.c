/* snapshot: the whole catalog in one file — written by a forked child (or
 * at shutdown) to a temporary file, fsynced, renamed; loaded at start-up.
 * Entries are [u8 tag][u32 length][u32 crc32c][BSON]: 'C' a collection
 * (db, name, options, index specs), 'D' one of its documents, 'H' one
 * commit of the change history (journal/history.h), 'E' the end (lsn,
 * counts, and the history's horizon). A file without a valid 'E' entry is
 * not a snapshot. */
#include "journal/journal-private.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "journal/history.h"
#include "util/bsonview.h"
#include "util/crc32c.h"

#define SNAPSHOT_FLUSH (1u << 20)

/* Writer state (child-safe: plain write(2), no logging). */
typedef struct snapshot_writer {
    int fd;
    buf_t buf;
    bool ok;
    int64_t docs;
    int64_t colls;
} snapshot_writer_t;

static void snapshot_flush(snapshot_writer_t *w)
{
    size_t off = 0;
    while (w->ok && off < w->buf.len) {
        ssize_t n = write(w->fd, w->buf.data + off, w->buf.len - off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            w->ok = false;
        else
            off += (size_t)n;
    }
    w->buf.len = 0;
}

static void snapshot_entry(snapshot_writer_t *w, char tag, const bson_t *doc)
{
    uint32_t crc = crc32c(bson_get_data(doc), doc->len);
    buf_push(&w->buf, (uint8_t)tag);
    buf_append_i32le(&w->buf, (int32_t)doc->len);
    buf_append_i32le(&w->buf, (int32_t)crc);
    buf_append(&w->buf, bson_get_data(doc), doc->len);
    if (w->buf.len >= SNAPSHOT_FLUSH)
        snapshot_flush(w);
}

static bool snapshot_write_doc(const bson_t *doc, void *ctx)
{
    snapshot_writer_t *w = ctx;
    snapshot_entry(w, 'D', doc);
    w->docs++;
    return w->ok;
}

static void snapshot_write_coll(collection_t *c, void *ctx)
{
    snapshot_writer_t *w = ctx;
    bson_t head = BSON_INITIALIZER, arr;
    char key[16];
    const char *k;
    BSON_APPEND_UTF8(&head, "db", collection_db(c));
    BSON_APPEND_UTF8(&head, "name", collection_name(c));
    BSON_APPEND_DOCUMENT(&head, "options", collection_options(c));
    bson_append_binary(&head, "ui", 2, BSON_SUBTYPE_UUID, collection_uuid(c), 16);
    bson_append_array_begin(&head, "indexes", -1, &arr);
    for (int i = 1; i < collection_nindexes(c); i++) {
        bson_uint32_to_string((uint32_t)(i - 1), &k, key, sizeof key);
        bson_append_document(&arr, k, -1, &collection_index(c, i)->spec);
    }
    bson_append_array_end(&head, &arr);
    BSON_APPEND_INT64(&head, "count", (int64_t)collection_count(c));
    snapshot_entry(w, 'C', &head);
    bson_destroy(&head);
    w->colls++;
    collection_foreach(c, snapshot_write_doc, w);
}

bool snapshot_write(const catalog_t *cat, const char *dir, uint64_t lsn)
{
    char tmp[4200], path[4200];
    snprintf(path, sizeof path, "%s/snapshot-%016" PRIx64 ".adb", dir, lsn);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    snapshot_writer_t w = {0};
    w.ok = true;
    buf_init(&w.buf);
    w.fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (w.fd < 0)
        return false;
    uint8_t header[16];
    memcpy(header, SNAPSHOT_MAGIC, 8);
    buf_put_le(header + 8, 8, lsn);
    buf_append(&w.buf, header, sizeof header);
    catalog_foreach_all(cat, snapshot_write_coll, &w);
    /* the change history, so that resume tokens outlive a restart */
    for (size_t i = 0; i < history_len() && w.ok; i++) {
        bson_t h = BSON_INITIALIZER;
        history_entry_doc(i, &h);
        snapshot_entry(&w, 'H', &h);
        bson_destroy(&h);
    }
    bson_t end = BSON_INITIALIZER;
    clock_ts_t horizon = history_horizon();
    BSON_APPEND_TIMESTAMP(&end, "historyHorizon", horizon.t, horizon.i);
    BSON_APPEND_INT64(&end, "lsn", (int64_t)lsn);
    clock_ts_t ts = clock_now(); /* the cluster time of record `lsn` */
    BSON_APPEND_TIMESTAMP(&end, "ts", ts.t, ts.i);
    BSON_APPEND_INT64(&end, "collections", w.colls);
    BSON_APPEND_INT64(&end, "documents", w.docs);
    snapshot_entry(&w, 'E', &end);
    bson_destroy(&end);
    snapshot_flush(&w);
    buf_destroy(&w.buf);
    if (w.ok && fsync(w.fd) != 0)
        w.ok = false;
    close(w.fd);
    if (!w.ok || rename(tmp, path) != 0) {
        unlink(tmp);
        return false;
    }
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        fsync(dfd);
        close(dfd);
    }
    return true;
}

bool snapshot_load(const char *path, catalog_t *cat, uint64_t *lsn, dberr_t *err)
{
    bool ok = false, checking = false;
    snapcheck_t check;
    uint8_t *map = MAP_FAILED;
    struct stat st;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return dberr_set(err, DBERR_INTERNAL_ERROR, "cannot open %s: %s", path, strerror(errno));
    if (fstat(fd, &st) != 0 || st.st_size < 16) {
        dberr_set(err, DBERR_INTERNAL_ERROR, "%s is not a snapshot (too short)", path);
        goto cleanup;
    }
    size_t size = (size_t)st.st_size;
    map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (map == MAP_FAILED) {
        dberr_set(err, DBERR_INTERNAL_ERROR, "cannot map %s: %s", path, strerror(errno));
        goto cleanup;
    }
    if (memcmp(map, SNAPSHOT_MAGIC, 8) != 0) {
        dberr_set(err, DBERR_INTERNAL_ERROR, "%s is not a snapshot (bad magic)", path);
        goto cleanup;
    }
    uint64_t file_lsn = buf_get_le(map + 8, 8);
    size_t off = 16;
    collection_t *cur = NULL;
    bool ended = false;
    /* every entry is checked (framing, checksum, strict BSON) on another
     * thread ahead of this loop, which takes it only once it passed */
    snapcheck_start(&check, path, map, size, 16, false);
    checking = true;
    while (off < size && !ended) {
        if (!snapcheck_wait(&check, off, err))
            goto cleanup;
        char tag = (char)map[off];
        uint32_t len = (uint32_t)buf_get_le(map + off + 1, 4);
        const uint8_t *data = map + off + 9;
        bson_t doc;
        bson_init_static(&doc, data, len);
        bson_iter_t it;
        if (tag == 'C') {
            const char *db = NULL, *name = NULL;
            bson_t options = BSON_INITIALIZER, idx;
            if (bson_iter_init_find(&it, &doc, "db") && BSON_ITER_HOLDS_UTF8(&it))
                db = bson_iter_utf8(&it, NULL);
            if (bson_iter_init_find(&it, &doc, "name") && BSON_ITER_HOLDS_UTF8(&it))
                name = bson_iter_utf8(&it, NULL);
            bson_t given;
            if (bsonview_field(&doc, "options", &given)) {
                bson_destroy(&options);
                options = given;
            }
            const uint8_t *uuid = NULL; /* snapshots before UUIDs were kept have none */
            uint32_t ulen = 0;
            bson_subtype_t ust;
            if (bson_iter_init_find(&it, &doc, "ui") && BSON_ITER_HOLDS_BINARY(&it)) {
                bson_iter_binary(&it, &ust, &ulen, &uuid);
                if (ulen != 16)
                    uuid = NULL;
            }
            if (!db || !name ||
                !(cur = catalog_create_uuid(cat, db, name, &options, uuid, err))) {
                dberr_set(err, DBERR_INTERNAL_ERROR, "%s: bad collection entry at offset %zu", path,
                          off);
                goto cleanup;
            }
            if (bson_iter_init_find(&it, &doc, "indexes") && BSON_ITER_HOLDS_ARRAY(&it)) {
                bson_iter_t el;
                bson_iter_recurse(&it, &el);
                while (bson_iter_next(&el)) {
                    bool created;
                    if (!BSON_ITER_HOLDS_DOCUMENT(&el) || !bsonview_iter(&el, &idx))
                        continue;
                    if (!collection_create_index(cur, &idx, &created, err)) {
                        char why[512];
                        snprintf(why, sizeof why, "%s", err->msg);
                        dberr_set(err, DBERR_INTERNAL_ERROR,
                                  "%s: bad index in the collection entry at offset %zu: %s", path,
                                  off, why);
                        goto cleanup;
                    }
                }
            }
        } else if (tag == 'D') {
            /* a capped collection may hold more than a lowered bound until
             * its next insert: load exactly what was written */
            collection_set_capped_trim(false);
            bool loaded = cur && collection_insert(cur, &doc, err);
            collection_set_capped_trim(true);
            if (!loaded) {
                if (cur)
                    dberr_set(err, DBERR_INTERNAL_ERROR,
                              "%s: cannot load document at offset "
                              "%zu: %s",
                              path, off, err->msg);
                else
                    dberr_set(err, DBERR_INTERNAL_ERROR, "%s: document before any collection",
                              path);
                goto cleanup;
            }
        } else if (tag == 'H') {
            if (!history_load_entry(&doc)) {
                dberr_set(err, DBERR_INTERNAL_ERROR, "%s: bad history entry at offset %zu", path,
                          off);
                goto cleanup;
            }
        } else if (tag == 'E') {
            bson_iter_t ts;
            clock_ts_t t = {0, 0};
            if (bson_iter_init_find(&ts, &doc, "ts") && BSON_ITER_HOLDS_TIMESTAMP(&ts)) {
                bson_iter_timestamp(&ts, &t.t, &t.i);
                clock_advance_to(t);
            }
            /* a snapshot without history: changes before it are gone */
            if (bson_iter_init_find(&ts, &doc, "historyHorizon") &&
                BSON_ITER_HOLDS_TIMESTAMP(&ts))
                bson_iter_timestamp(&ts, &t.t, &t.i);
            history_set_horizon(t);
            ended = true;
        } else {
            dberr_set(err, DBERR_INTERNAL_ERROR, "%s: unknown entry at offset %zu", path, off);
            goto cleanup;
        }
        off += 9 + len;
    }
    if (!ended) {
        dberr_set(err, DBERR_INTERNAL_ERROR, "%s has no end entry (incomplete snapshot)", path);
        goto cleanup;
    }
    *lsn = file_lsn;
    ok = true;
cleanup:
    if (checking)
        snapcheck_finish(&check);
    if (map != MAP_FAILED)
        munmap(map, (size_t)st.st_size);
    close(fd);
    return ok;
}
