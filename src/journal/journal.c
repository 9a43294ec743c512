/* journal: start-up recovery, the change observer that turns store changes
 * into log records (whole documents for inserts and replacements,
 * field-level diffs for in-place updates, _ids for deletes), snapshot
 * scheduling, and shutdown. */
#include "journal/journal-private.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "doc/docdiff.h"
#include "journal/history.h"
#include "doc/updater.h"
#include "store/clock.h"
#include "store/observer.h"
#include "util/bsonview.h"
#include "util/log.h"

#define JOURNAL_MAX_FILES 4096

static struct {
    journal_options_t opts;
    char dbpath[4096];
    uv_loop_t *loop;
    catalog_t *cat;
    int lock_fd;
    bool open;
    bson_t ops;              /* changes of the current command, keys "0".. */
    uint32_t nops;
    uv_timer_t tick;         /* snapshot triggers and child polling */
    pid_t child;             /* snapshot writer, or 0 */
    uint64_t child_lsn;
    uint64_t child_started_ms;
    uint64_t last_snapshot_ms;
    int64_t snapshot_took_ms;  /* the last snapshot's duration, -1 when none */
    uint64_t snapshots;        /* written since start */
    clock_ts_t commit_ts;    /* the cluster time of the last sealed commit */
    journal_txn_tag_t txn;   /* the pending commit's transaction, if any */
    void (*commit_hook)(uint64_t lsn); /* told of every sealed commit */
} journal = {.lock_fd = -1, .snapshot_took_ms = -1};

bool journal_parse_mode(const char *name, journal_mode_t *out)
{
    if (strcmp(name, "none") == 0)
        *out = JOURNAL_NONE;
    else if (strcmp(name, "write") == 0)
        *out = JOURNAL_WRITE;
    else if (strcmp(name, "fsync") == 0)
        *out = JOURNAL_FSYNC;
    else
        return false;
    return true;
}

journal_mode_t journal_mode(void)
{
    return journal.open ? journal.opts.mode : JOURNAL_NONE;
}

static uint64_t journal_now_ms(void)
{
    return uv_hrtime() / 1000000;
}

/* ---- the change observer ---- */

/* Updated documents up to this size are logged whole ("r"), not diffed. */
#define JOURNAL_WHOLE_DOC_MAX 128

/* True when the journal is open and the caller logs the operation (with
 * journal_op_begin); a closed journal only counts it. */
static bool journal_op_logged(void)
{
    if (journal.open)
        return true;
    journal.nops++;
    return false;
}

static bson_t *journal_op_begin(bson_t *op, const char *kind, const char *db, const char *coll)
{
    char key[16];
    const char *k;
    bson_uint32_to_string(journal.nops++, &k, key, sizeof key);
    bson_append_document_begin(&journal.ops, k, -1, op);
    BSON_APPEND_UTF8(op, "op", kind);
    BSON_APPEND_UTF8(op, "db", db);
    if (coll)
        BSON_APPEND_UTF8(op, "c", coll);
    return op;
}

static void journal_append_id(bson_t *op, const bson_t *doc)
{
    bson_iter_t it;
    if (bson_iter_init_find(&it, doc, "_id"))
        bson_append_value(op, "id", 2, bson_iter_value(&it));
}

/* Logs an operation that carries one whole document under `field`. */
static void journal_log_doc(const char *kind, const char *db, const char *coll,
                            const char *field, const bson_t *doc)
{
    bson_t op;
    if (!journal_op_logged())
        return;
    journal_op_begin(&op, kind, db, coll);
    BSON_APPEND_DOCUMENT(&op, field, doc);
    bson_append_document_end(&journal.ops, &op);
}

static void journal_on_insert(const char *db, const char *coll, const uint8_t *uuid,
                              const bson_t *doc, void *ctx)
{
    history_op_insert(db, coll, uuid, doc);
    journal_log_doc("i", db, coll, "doc", doc);
}

static void journal_on_update(const char *db, const char *coll, const uint8_t *uuid,
                              const bson_t *old_doc, const bson_t *new_doc, void *ctx)
{
    bool replacing = store_observer_replacing();
    history_op_update(db, coll, uuid, old_doc, new_doc, replacing);
    if (!journal_op_logged())
        return;
    bson_t op, diff = BSON_INITIALIZER;
    /* a small document costs no more logged whole than as a diff, and
     * computing the diff is the dearer part */
    if (new_doc->len > JOURNAL_WHOLE_DOC_MAX && docdiff_compute(old_doc, new_doc, &diff)) {
        journal_op_begin(&op, "u", db, coll);
        journal_append_id(&op, new_doc);
        BSON_APPEND_DOCUMENT(&op, "diff", &diff);
    } else {
        journal_op_begin(&op, "r", db, coll);
        BSON_APPEND_DOCUMENT(&op, "doc", new_doc);
    }
    if (replacing) /* so that replay rebuilds the history's "replace" */
        BSON_APPEND_BOOL(&op, "rp", true);
    bson_append_document_end(&journal.ops, &op);
    bson_destroy(&diff);
}

static void journal_on_remove(const char *db, const char *coll, const uint8_t *uuid,
                              const bson_t *old_doc, void *ctx)
{
    bson_t op;
    history_op_remove(db, coll, uuid, old_doc);
    if (!journal_op_logged())
        return;
    journal_op_begin(&op, "d", db, coll);
    journal_append_id(&op, old_doc);
    bson_append_document_end(&journal.ops, &op);
}

static void journal_on_ddl(const char *db, const bson_t *cmd, void *ctx)
{
    history_op_ddl(db, cmd);
    journal_log_doc("ddl", db, NULL, "cmd", cmd);
}

/* The wall clock in ms for a commit's wallTime: the loop's cached time
 * (no clock read per commit; reading the clock source is a system call on
 * some virtual machines) offset from the wall clock read once. */
static int64_t journal_wall_ms(void)
{
    static int64_t base_wall;
    static uint64_t base_loop;
    if (!journal.loop)
        return (int64_t)time(NULL) * 1000;
    uint64_t now = uv_now(journal.loop);
    if (!base_wall || now - base_loop > 60000) { /* re-anchored every minute */
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        base_wall = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
        base_loop = now;
    }
    return base_wall + (int64_t)(now - base_loop);
}

void journal_txn_tag_set(journal_txn_tag_t *t, const bson_t *lsid, int64_t number)
{
    journal_txn_tag_clear(t);
    bson_copy_to(lsid, &t->lsid);
    t->number = number;
    t->set = true;
}

void journal_txn_tag_clear(journal_txn_tag_t *t)
{
    if (t->set)
        bson_destroy(&t->lsid);
    t->set = false;
}

void journal_note_txn(const bson_t *lsid, int64_t txn_number)
{
    journal_txn_tag_set(&journal.txn, lsid, txn_number);
    history_set_txn(lsid, txn_number);
}

void journal_set_commit_hook(void (*hook)(uint64_t lsn))
{
    journal.commit_hook = hook;
}

uint64_t journal_seal(void)
{
    if (journal.nops == 0) {
        journal_txn_tag_clear(&journal.txn);
        history_commit(journal.commit_ts, 0, 0); /* drops a stray lsid */
        return 0;
    }
    journal.commit_ts = clock_tick();
    int64_t wall = journal_wall_ms();
    uint64_t lsn = 0;
    if (journal.open) {
        bson_t payload = BSON_INITIALIZER;
        BSON_APPEND_TIMESTAMP(&payload, "ts", journal.commit_ts.t, journal.commit_ts.i);
        BSON_APPEND_DATE_TIME(&payload, "wall", wall);
        bson_append_array(&payload, "ops", 3, &journal.ops);
        if (journal.txn.set) { /* replay rebuilds the events' lsid/txnNumber */
            BSON_APPEND_DOCUMENT(&payload, "lsid", &journal.txn.lsid);
            BSON_APPEND_INT64(&payload, "txnNumber", journal.txn.number);
        }
        lsn = wal_append(&payload);
        bson_destroy(&payload);
        bson_reinit(&journal.ops);
    }
    journal_txn_tag_clear(&journal.txn);
    journal.nops = 0;
    history_commit(journal.commit_ts, wall, lsn);
    if (journal.commit_hook)
        journal.commit_hook(lsn);
    return lsn;
}

bool journal_pending(void)
{
    return journal.nops > 0;
}

clock_ts_t journal_commit_ts(void)
{
    return journal.commit_ts;
}

bool journal_writable(dberr_t *err)
{
    char why[256];
    if (journal.open && wal_failing(why, sizeof why))
        return dberr_set(err, 42, "the write-ahead log cannot be written (%s); writes are refused "
                                  "until it can",
                         why);
    return true;
}

bool journal_is_durable(uint64_t lsn, bool sync)
{
    return wal_is_durable(lsn, sync);
}

void journal_wait(journal_waiter_t *w)
{
    wal_wait(w);
}

void journal_cancel(journal_waiter_t *w)
{
    wal_cancel(w);
}

bool journal_inject_fault(const char *point, int times, dberr_t *err)
{
    return wal_inject_fault(point, times, err);
}

/* ---- replay ---- */

static const char *journal_str_field(const bson_t *op, const char *key)
{
    bson_iter_t it;
    if (!bson_iter_init_find(&it, op, key) || !BSON_ITER_HOLDS_UTF8(&it))
        return NULL;
    return bson_iter_utf8(&it, NULL);
}

/* Applies one logged operation to the catalog. */
static bool journal_apply_op(catalog_t *cat, const bson_t *op, dberr_t *err)
{
    const char *kind = journal_str_field(op, "op");
    const char *db = journal_str_field(op, "db");
    const char *coll = journal_str_field(op, "c");
    bson_t doc;
    bson_iter_t id;
    if (!kind || !db)
        return dberr_set(err, DBERR_INTERNAL_ERROR, "log operation without op/db");
    if (strcmp(kind, "ddl") == 0) {
        bson_t cmd;
        if (!bsonview_field(op, "cmd", &cmd))
            return dberr_set(err, DBERR_INTERNAL_ERROR, "ddl without cmd");
        const char *name;
        bson_t spec;
        if ((name = journal_str_field(&cmd, "create"))) {
            bson_t options;
            if (!bsonview_field(&cmd, "options", &options))
                bson_init(&options);
            bson_iter_t ui;
            const uint8_t *uuid = NULL;
            uint32_t ulen = 0;
            bson_subtype_t st;
            if (bson_iter_init_find(&ui, &cmd, "ui") && BSON_ITER_HOLDS_BINARY(&ui)) {
                bson_iter_binary(&ui, &st, &ulen, &uuid);
                if (ulen != 16)
                    uuid = NULL; /* logs before UUIDs were kept have none */
            }
            if (!catalog_get(cat, db, name) &&
                !catalog_create_uuid(cat, db, name, &options, uuid, err))
                return false;
        } else if ((name = journal_str_field(&cmd, "drop"))) {
            catalog_drop(cat, db, name);
        } else if (bson_has_field(&cmd, "dropDatabase")) {
            catalog_drop_db(cat, db);
        } else if ((name = journal_str_field(&cmd, "rename"))) {
            const char *to_db = journal_str_field(&cmd, "toDb");
            const char *to_coll = journal_str_field(&cmd, "toColl");
            if (!to_db || !to_coll ||
                !catalog_rename(cat, db, name, to_db, to_coll, false, err))
                return to_db && to_coll ? false
                                        : dberr_set(err, DBERR_INTERNAL_ERROR, "bad rename");
        } else if ((name = journal_str_field(&cmd, "createIndex")) &&
                   bsonview_field(&cmd, "spec", &spec)) {
            collection_t *c = catalog_get(cat, db, name);
            bool created;
            if (!c || !collection_create_index(c, &spec, &created, err))
                return c ? false : dberr_set(err, DBERR_INTERNAL_ERROR, "index on a missing "
                                                                        "collection");
        } else if ((name = journal_str_field(&cmd, "collMod"))) {
            collection_t *c = catalog_get(cat, db, name);
            bson_t options, ix;
            bson_iter_t hid;
            const char *iname;
            if (c && bsonview_field(&cmd, "options", &options))
                collection_set_options(c, &options);
            if (c && bsonview_field(&cmd, "index", &ix) && (iname = journal_str_field(&ix, "name")) &&
                bson_iter_init_find(&hid, &ix, "hidden"))
                collection_set_index_hidden(c, iname, bson_iter_as_bool(&hid));
        } else if ((name = journal_str_field(&cmd, "dropIndex"))) {
            collection_t *c = catalog_get(cat, db, name);
            const char *iname = journal_str_field(&cmd, "name");
            if (c && iname)
                collection_drop_index(c, iname, err);
        } else {
            return dberr_set(err, DBERR_INTERNAL_ERROR, "unknown ddl in the log");
        }
        return true;
    }
    if (!coll)
        return dberr_set(err, DBERR_INTERNAL_ERROR, "log operation without collection");
    collection_t *c = catalog_get_or_create(cat, db, coll, err);
    if (!c)
        return false;
    if (strcmp(kind, "i") == 0) {
        if (!bsonview_field(op, "doc", &doc))
            return dberr_set(err, DBERR_INTERNAL_ERROR, "insert without doc");
        collection_set_capped_trim(false); /* the log's next ops remove what it removed */
        bool ok = collection_insert(c, &doc, err);
        collection_set_capped_trim(true);
        return ok;
    }
    if (strcmp(kind, "r") == 0) {
        if (!bsonview_field(op, "doc", &doc) || !bson_iter_init_find(&id, &doc, "_id"))
            return dberr_set(err, DBERR_INTERNAL_ERROR, "replace without doc");
        record_t *r = collection_find_id(c, bson_iter_value(&id));
        if (!r)
            return dberr_set(err, DBERR_INTERNAL_ERROR, "replace of a missing document");
        store_observer_set_replacing(bson_has_field(op, "rp"));
        bool ok = collection_replace(c, r, &doc, err);
        store_observer_set_replacing(false);
        return ok;
    }
    if (!bson_iter_init_find(&id, op, "id"))
        return dberr_set(err, DBERR_INTERNAL_ERROR, "log operation without id");
    record_t *r = collection_find_id(c, bson_iter_value(&id));
    if (!r)
        return dberr_set(err, DBERR_INTERNAL_ERROR, "%s of a missing document", kind);
    if (strcmp(kind, "d") == 0) {
        collection_remove(c, r);
        return true;
    }
    if (strcmp(kind, "u") == 0) {
        bson_iter_t spec;
        if (!bson_iter_init_find(&spec, op, "diff"))
            return dberr_set(err, DBERR_INTERNAL_ERROR, "update without diff");
        updater_t *u = updater_new(&spec, NULL, err);
        if (!u)
            return false;
        bson_t old, out = BSON_INITIALIZER;
        bool changed;
        record_view(r, &old);
        store_observer_set_replacing(bson_has_field(op, "rp"));
        bool ok = updater_apply(u, &old, false, -1, &out, &changed, err) &&
                  (!changed || collection_replace(c, r, &out, err));
        store_observer_set_replacing(false);
        bson_destroy(&out);
        updater_destroy(u);
        return ok;
    }
    return dberr_set(err, DBERR_INTERNAL_ERROR, "unknown log operation '%s'", kind);
}

/* Applies one log record whose BSON was checked (journal/snapcheck.c). */
static bool journal_apply_record(catalog_t *cat, const uint8_t *payload, uint32_t len,
                                 dberr_t *err)
{
    bson_t rec;
    bson_iter_t it, el;
    clock_ts_t ts = {0, 0};
    int64_t wall = 0;
    if (!bson_init_static(&rec, payload, len))
        return dberr_set(err, DBERR_INTERNAL_ERROR, "invalid BSON in the log record");
    if (bson_iter_init_find(&it, &rec, "ts") &&
        BSON_ITER_HOLDS_TIMESTAMP(&it)) {
        /* records before cluster time existed have none */
        bson_iter_timestamp(&it, &ts.t, &ts.i);
        clock_advance_to(ts);
    }
    if (bson_iter_init_find(&it, &rec, "wall") && BSON_ITER_HOLDS_DATE_TIME(&it))
        wall = bson_iter_date_time(&it);
    bson_t lsid;
    if (bsonview_field(&rec, "lsid", &lsid) && bson_iter_init_find(&it, &rec, "txnNumber"))
        history_set_txn(&lsid, bson_iter_as_int64(&it));
    if (!bson_init_static(&rec, payload, len) || !bson_iter_init_find(&it, &rec, "ops") ||
        !BSON_ITER_HOLDS_ARRAY(&it) || !bson_iter_recurse(&it, &el))
        return dberr_set(err, DBERR_INTERNAL_ERROR, "malformed log record");
    while (bson_iter_next(&el)) {
        bson_t op;
        if (!BSON_ITER_HOLDS_DOCUMENT(&el) || !bsonview_iter(&el, &op))
            return dberr_set(err, DBERR_INTERNAL_ERROR, "malformed log operation");
        if (!journal_apply_op(cat, &op, err)) {
            history_clear();
            return false;
        }
    }
    if (ts.t == 0) /* no cluster time: no change stream can name it */
        ts = clock_tick();
    history_commit(ts, wall, 0);
    return true;
}

/* ---- files ---- */

typedef struct journal_file {
    uint64_t lsn;
    char name[64];
} journal_file_t;

static int journal_file_cmp(const void *a, const void *b)
{
    const journal_file_t *x = a, *y = b;
    return x->lsn < y->lsn ? -1 : x->lsn > y->lsn;
}

/* Lists files named prefix<16 hex>suffix in the dbpath, sorted by LSN. */
static int journal_list(const char *prefix, const char *suffix, journal_file_t *out, int max)
{
    DIR *d = opendir(journal.dbpath);
    int n = 0;
    if (!d)
        return 0;
    struct dirent *e;
    size_t pl = strlen(prefix), sl = strlen(suffix);
    while ((e = readdir(d)) && n < max) {
        size_t len = strlen(e->d_name);
        if (len != pl + 16 + sl || strncmp(e->d_name, prefix, pl) != 0 ||
            strcmp(e->d_name + pl + 16, suffix) != 0)
            continue;
        char hex[17];
        memcpy(hex, e->d_name + pl, 16);
        hex[16] = '\0';
        char *end;
        out[n].lsn = strtoull(hex, &end, 16);
        if (*end)
            continue;
        snprintf(out[n].name, sizeof out[n].name, "%s", e->d_name);
        n++;
    }
    closedir(d);
    qsort(out, (size_t)n, sizeof *out, journal_file_cmp);
    return n;
}

static bool journal_copy_file(const char *from, const char *to)
{
    int in = open(from, O_RDONLY | O_CLOEXEC), out = -1;
    bool ok = false;
    char buf[65536];
    if (in < 0)
        return false;
    out = open(to, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (out < 0)
        goto cleanup;
    for (;;) {
        ssize_t n = read(in, buf, sizeof buf);
        if (n == 0)
            break;
        if (n < 0 || write(out, buf, (size_t)n) != n)
            goto cleanup;
    }
    ok = fsync(out) == 0;
cleanup:
    if (out >= 0)
        close(out);
    close(in);
    return ok;
}

/* Keeps a copy of every log and snapshot file before --repair changes any. */
static bool journal_backup(dberr_t *err)
{
    char dir[4300];
    snprintf(dir, sizeof dir, "%s/repair-backup-%lld", journal.dbpath, (long long)time(NULL));
    if (mkdir(dir, 0755) != 0 && errno != EEXIST)
        return dberr_set(err, DBERR_INTERNAL_ERROR, "cannot create %s: %s", dir, strerror(errno));
    static journal_file_t files[JOURNAL_MAX_FILES];
    const char *kinds[2][2] = {{"wal-", ".log"}, {"snapshot-", ".adb"}};
    for (int k = 0; k < 2; k++) {
        int n = journal_list(kinds[k][0], kinds[k][1], files, JOURNAL_MAX_FILES);
        for (int i = 0; i < n; i++) {
            char from[4300], to[4400];
            snprintf(from, sizeof from, "%s/%s", journal.dbpath, files[i].name);
            snprintf(to, sizeof to, "%s/%s", dir, files[i].name);
            if (!journal_copy_file(from, to))
                return dberr_set(err, DBERR_INTERNAL_ERROR, "cannot copy %s to %s", from, to);
        }
    }
    log_warn("JOURNAL", "--repair: copies of the original files are in %s", dir);
    return true;
}

/* Replays segment `name` into `cat`, applying records after *applied.
 * `last` is true for the newest segment, whose torn tail is dropped.
 * *damaged_at gets the offset of damage (or -1). */
static bool journal_replay_segment(const char *name, bool last, catalog_t *cat,
                                   uint64_t *applied, bool *backed_up, bool *truncate_rest,
                                   dberr_t *err)
{
    char path[4300];
    snprintf(path, sizeof path, "%s/%s", journal.dbpath, name);
    int fd = open(path, O_RDWR | O_CLOEXEC);
    bool ok = false, checking = false;
    snapcheck_t check;
    uint8_t *map = MAP_FAILED;
    struct stat st;
    if (fd < 0)
        return dberr_set(err, DBERR_INTERNAL_ERROR, "cannot open %s: %s", path, strerror(errno));
    if (fstat(fd, &st) != 0) {
        dberr_set(err, DBERR_INTERNAL_ERROR, "cannot stat %s", path);
        goto cleanup;
    }
    size_t size = (size_t)st.st_size;
    if (size < WAL_HEADER_SIZE) {
        if (last) { /* a segment torn while being created */
            log_warn("JOURNAL", "%s: torn header (%zu bytes) dropped", path, size);
            ok = true;
        } else {
            dberr_set(err, DBERR_INTERNAL_ERROR, "%s: damaged at offset 0 (short header)", path);
        }
        goto cleanup;
    }
    map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (map == MAP_FAILED) {
        dberr_set(err, DBERR_INTERNAL_ERROR, "cannot map %s", path);
        goto cleanup;
    }
    size_t off = 0;
    const char *damage = NULL;
    if (memcmp(map, WAL_MAGIC, 8) != 0) {
        damage = "bad segment header";
    } else {
        off = WAL_HEADER_SIZE;
        /* the records' BSON is checked on another thread ahead of this loop */
        snapcheck_start(&check, path, map, size, off, true);
        checking = true;
        while (off < size) {
            walrec_t rec;
            walrec_status_t rs = walrec_decode(map + off, size - off, &rec);
            bool torn = last && (rs == WALREC_SHORT_HEADER || rs == WALREC_TRUNCATED ||
                                 (rs == WALREC_BAD_CHECKSUM && off + rec.size == size));
            if (torn) {
                log_warn("JOURNAL", "%s: torn last record at offset %zu%s dropped", path, off,
                         rs == WALREC_BAD_CHECKSUM ? " (checksum)" : "");
                break;
            }
            if (rs != WALREC_OK) {
                damage = rs == WALREC_SHORT_HEADER  ? "truncated record header"
                         : rs == WALREC_BAD_CHECKSUM ? "checksum mismatch"
                                                     : "bad record length";
                break;
            }
            uint64_t lsn = rec.lsn;
            uint32_t len = rec.len;
            if (lsn > *applied) {
                if (lsn != *applied + 1) { /* a missing segment or snapshot */
                    dberr_set(err, DBERR_INTERNAL_ERROR,
                              "%s: log records %" PRIu64 "..%" PRIu64 " are missing (offset %zu)",
                              path, *applied + 1, lsn - 1, off);
                    goto cleanup;
                }
                if (!snapcheck_wait(&check, off, err) ||
                    !journal_apply_record(cat, map + off + WAL_RECORD_HEADER, len, err)) {
                    char msg[512];
                    snprintf(msg, sizeof msg, "%s: cannot replay record %" PRIu64
                                              " at offset %zu: %s",
                             path, lsn, off, err->msg);
                    dberr_set(err, DBERR_INTERNAL_ERROR, "%s", msg);
                    goto cleanup;
                }
                *applied = lsn;
            }
            off += WAL_RECORD_HEADER + len;
        }
        snapcheck_finish(&check); /* before the file may be truncated */
        checking = false;
    }
    if (damage) {
        if (!journal.opts.repair) {
            dberr_set(err, DBERR_INTERNAL_ERROR,
                      "%s is damaged at offset %zu (%s); acknowledged data may follow it, so "
                      "atomdb will not start. Restart with --repair to keep a copy of the files "
                      "and truncate the log there",
                      path, off, damage);
            goto cleanup;
        }
        if (!*backed_up && !journal_backup(err))
            goto cleanup;
        *backed_up = true;
        log_warn("JOURNAL", "--repair: truncating %s at offset %zu (%s)", path, off, damage);
        *truncate_rest = true;
    }
    if (off < size && (damage || last)) {
        if (ftruncate(fd, (off_t)(damage && off < WAL_HEADER_SIZE ? 0 : off)) != 0) {
            dberr_set(err, DBERR_INTERNAL_ERROR, "cannot truncate %s: %s", path, strerror(errno));
            goto cleanup;
        }
        fsync(fd);
    }
    ok = true;
cleanup:
    if (checking)
        snapcheck_finish(&check);
    if (map != MAP_FAILED)
        munmap(map, size);
    close(fd);
    return ok;
}

/* Loads the newest valid snapshot, then replays the log after it. */
static bool journal_recover(catalog_t *cat, uint64_t *last_lsn, dberr_t *err)
{
    static journal_file_t snaps[JOURNAL_MAX_FILES], segs[JOURNAL_MAX_FILES];
    int ns = journal_list("snapshot-", ".adb", snaps, JOURNAL_MAX_FILES);
    int nw = journal_list("wal-", ".log", segs, JOURNAL_MAX_FILES);
    uint64_t applied = 0;
    uint64_t t0 = journal_now_ms();
    dberr_t bad = {0}; /* the newest snapshot that could not be loaded */
    uint64_t bad_lsn = 0;
    for (int i = ns - 1; i >= 0; i--) {
        char path[4300];
        snprintf(path, sizeof path, "%s/%s", journal.dbpath, snaps[i].name);
        dberr_t e = {0};
        uint64_t lsn;
        if (snapshot_load(path, cat, &lsn, &e)) {
            applied = lsn;
            log_info("JOURNAL", "loaded snapshot %s (lsn %" PRIu64 ")", snaps[i].name, lsn);
            break;
        }
        log_warn("JOURNAL", "skipping snapshot: %s", e.msg);
        if (!bad_lsn) {
            bad = e;
            bad_lsn = snaps[i].lsn;
        }
        catalog_clear(cat); /* start again from an empty catalog */
        history_clear();
    }
    /* the replayed changes rebuild the change history after the snapshot's */
    store_observer_t hobs = {journal_on_insert, journal_on_update, journal_on_remove,
                             journal_on_ddl, NULL};
    store_observer_set(&hobs);
    bool backed_up = false, truncate_rest = false;
    for (int i = 0; i < nw; i++) {
        char path[4300];
        snprintf(path, sizeof path, "%s/%s", journal.dbpath, segs[i].name);
        if (truncate_rest) {
            log_warn("JOURNAL", "--repair: removing %s (after the damage)", path);
            unlink(path);
            continue;
        }
        /* a segment wholly before the snapshot holds nothing to replay */
        if (i + 1 < nw && segs[i + 1].lsn <= applied + 1)
            continue;
        if (!journal_replay_segment(segs[i].name, i == nw - 1, cat, &applied, &backed_up,
                                    &truncate_rest, err)) {
            store_observer_set(NULL);
            return false;
        }
    }
    store_observer_set(NULL);
    if (applied < bad_lsn) /* the log after the older state does not reach it: data is gone */
        return dberr_set(err, DBERR_INTERNAL_ERROR,
                         "%s; the older snapshots and the log reach only lsn %" PRIu64
                         " of its %" PRIu64 ", so atomdb will not start without the data it "
                         "held (restore the file, or move it away to start from what is left)",
                         bad.msg, applied, bad_lsn);
    *last_lsn = applied;
    log_info("JOURNAL", "recovered to lsn %" PRIu64 " in %" PRIu64 " ms", applied,
             journal_now_ms() - t0);
    return true;
}

/* Recovery alone, without the lock, the log thread or the observer: the
 * fuzz_recovery target and scripts/powerloss.py's checker use it. */
bool journal_recover_dir(const char *dbpath, bool repair, catalog_t *cat, uint64_t *last_lsn,
                         dberr_t *err)
{
    snprintf(journal.dbpath, sizeof journal.dbpath, "%s", dbpath);
    journal.opts.dbpath = journal.dbpath;
    journal.opts.repair = repair;
    return journal_recover(cat, last_lsn, err);
}

/* ---- snapshots ---- */

/* Removes snapshots older than `lsn` and segments wholly covered by it. */
static void journal_prune(uint64_t lsn)
{
    static journal_file_t files[JOURNAL_MAX_FILES];
    char path[4300];
    int n = journal_list("snapshot-", ".adb", files, JOURNAL_MAX_FILES);
    for (int i = 0; i < n; i++) {
        if (files[i].lsn < lsn) {
            snprintf(path, sizeof path, "%s/%s", journal.dbpath, files[i].name);
            unlink(path);
        }
    }
    n = journal_list("wal-", ".log", files, JOURNAL_MAX_FILES);
    for (int i = 0; i + 1 < n; i++) {
        /* segment i holds records [files[i].lsn, files[i+1].lsn) */
        if (files[i + 1].lsn <= lsn + 1) {
            snprintf(path, sizeof path, "%s/%s", journal.dbpath, files[i].name);
            unlink(path);
        }
    }
}

bool journal_snapshot_now(dberr_t *err)
{
    if (!journal.open || journal.opts.mode == JOURNAL_NONE)
        return true;
    if (journal.child)
        return true;
    journal_seal();
    uint64_t lsn = wal_last_lsn();
    wal_rotate_after(lsn);
    pid_t pid = fork();
    if (pid < 0)
        return dberr_set(err, DBERR_INTERNAL_ERROR, "cannot fork the snapshot writer: %s",
                         strerror(errno));
    if (pid == 0) {
        signal(SIGINT, SIG_IGN);
        signal(SIGTERM, SIG_DFL);
        _exit(snapshot_write(journal.cat, journal.dbpath, lsn) ? 0 : 1);
    }
    journal.child = pid;
    journal.child_lsn = lsn;
    journal.child_started_ms = journal_now_ms();
    journal.last_snapshot_ms = journal.child_started_ms;
    wal_reset_growth();
    log_info("JOURNAL", "snapshot at lsn %" PRIu64 " started (pid %d)", lsn, (int)pid);
    return true;
}

static void journal_on_tick(uv_timer_t *t)
{
    if (journal.child) {
        int status;
        pid_t r = waitpid(journal.child, &status, WNOHANG);
        if (r == journal.child) {
            journal.child = 0;
            if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
                journal.snapshot_took_ms = (int64_t)(journal_now_ms() - journal.child_started_ms);
                journal.snapshots++;
                log_info("JOURNAL", "snapshot at lsn %" PRIu64 " written in %" PRIu64 " ms",
                         journal.child_lsn, journal_now_ms() - journal.child_started_ms);
                journal_prune(journal.child_lsn);
            } else {
                log_error("JOURNAL", "snapshot at lsn %" PRIu64 " failed; the log is kept",
                          journal.child_lsn);
            }
        }
        return;
    }
    bool by_size = journal.opts.snapshot_wal_bytes > 0 &&
                   wal_growth() >= (uint64_t)journal.opts.snapshot_wal_bytes;
    bool by_time = journal.opts.snapshot_interval_s > 0 && wal_growth() > 0 &&
                   journal_now_ms() - journal.last_snapshot_ms >=
                       (uint64_t)journal.opts.snapshot_interval_s * 1000;
    if (by_size || by_time) {
        dberr_t err = {0};
        if (!journal_snapshot_now(&err))
            log_error("JOURNAL", "%s", err.msg);
    }
}

/* ---- open / close ---- */

static bool journal_lock(dberr_t *err)
{
    char path[4300];
    snprintf(path, sizeof path, "%s/atomdb.lock", journal.dbpath);
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0)
        return dberr_set(err, 98, "cannot open %s: %s", path, strerror(errno));
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        close(fd);
        return dberr_set(err, 98,
                         "another atomdb is already using --dbpath %s (%s is locked); stop it "
                         "or choose another directory",
                         journal.dbpath, path);
    }
    char pid[32];
    int n = snprintf(pid, sizeof pid, "%d\n", (int)getpid());
    if (ftruncate(fd, 0) != 0 || write(fd, pid, (size_t)n) != n) {
        /* the lock itself is what matters */
    }
    journal.lock_fd = fd;
    return true;
}

bool journal_open(uv_loop_t *loop, const journal_options_t *opts, catalog_t *cat, dberr_t *err)
{
    journal.opts = *opts;
    snprintf(journal.dbpath, sizeof journal.dbpath, "%s", opts->dbpath);
    journal.opts.dbpath = journal.dbpath;
    journal.loop = loop;
    journal.cat = cat;
    if (!journal_lock(err))
        return false;
    clock_init();
    history_configure(opts->history_s, opts->history_bytes);
    if (opts->mode == JOURNAL_NONE) {
        /* nothing is logged, but commits still get cluster times and the
         * change history */
        store_observer_t count = {journal_on_insert, journal_on_update, journal_on_remove,
                                  journal_on_ddl, NULL};
        store_observer_set(&count);
        return true;
    }
    uint64_t last = 0;
    if (!journal_recover(cat, &last, err))
        return false;
    if (!wal_start(loop, journal.dbpath, opts->mode, last + 1, err))
        return false;
    bson_init(&journal.ops);
    journal.nops = 0;
    store_observer_t obs = {journal_on_insert, journal_on_update, journal_on_remove,
                            journal_on_ddl, NULL};
    store_observer_set(&obs);
    journal.open = true;
    journal.last_snapshot_ms = journal_now_ms();
    uv_timer_init(loop, &journal.tick);
    uv_timer_start(&journal.tick, journal_on_tick, 50, 50);
    return true;
}

void journal_close(void)
{
    if (journal.open) {
        journal_seal();
        store_observer_set(NULL);
        uv_timer_stop(&journal.tick);
        if (!uv_is_closing((uv_handle_t *)&journal.tick))
            uv_close((uv_handle_t *)&journal.tick, NULL);
        if (journal.child) {
            int status;
            waitpid(journal.child, &status, 0);
            journal.child = 0;
        }
        wal_stop();
        uint64_t lsn = wal_last_lsn();
        if (snapshot_write(journal.cat, journal.dbpath, lsn)) {
            journal_prune(lsn);
            log_info("JOURNAL", "final snapshot at lsn %" PRIu64 " written", lsn);
        } else {
            log_error("JOURNAL", "final snapshot failed; the log is kept and replays at start");
        }
        bson_destroy(&journal.ops);
        journal.open = false;
    }
    if (journal.lock_fd >= 0) {
        close(journal.lock_fd);
        journal.lock_fd = -1;
    }
}

void journal_get_stats(journal_stats_t *out)
{
    memset(out, 0, sizeof *out);
    out->mode = journal.opts.mode;
    if (journal.opts.mode != JOURNAL_NONE && journal.open)
        wal_get_stats(out);
    out->snapshots = journal.snapshots;
    out->snapshot_last_ms = journal.snapshot_took_ms;
    out->snapshot_age_ms = journal.last_snapshot_ms
                               ? (int64_t)(journal_now_ms() - journal.last_snapshot_ms)
                               : -1;
    out->snapshot_running = journal.child != 0;
}
