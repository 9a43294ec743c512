/* history: the in-memory, retention-bounded list of committed changes that
 * change streams read, oldest first, built by the journal's observer and
 * trimmed by age and size. */
#include "journal/history.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#define HISTORY_ENTRY_OVERHEAD ((size_t)sizeof(history_entry_t))
#define HISTORY_CHUNK (1u << 20)

/* Entries' documents are packed into chunks of HISTORY_CHUNK bytes (or one
 * entry's size when larger), oldest first; a chunk is freed (or kept as
 * the spare) when its last entry is dropped. No allocation per commit. */
typedef struct history_chunk {
    struct history_chunk *next;
    size_t used, cap;
    uint8_t data[];
} history_chunk_t;

static struct {
    history_entry_t *items; /* a ring: items[(head + i) & (cap - 1)] */
    size_t head, len, cap;
    history_chunk_t *first, *last, *spare;
    size_t bytes;
    int64_t keep_s, keep_bytes;
    clock_ts_t horizon;
    /* the commit being built */
    bson_t ops;
    uint32_t nops;
    bool ops_init;
    bool has_txn;
    bson_t lsid;
    int64_t txn_number;
} hist;

void history_configure(int64_t seconds, int64_t bytes)
{
    hist.keep_s = seconds;
    hist.keep_bytes = bytes;
}

static history_entry_t *history_slot(size_t i)
{
    return &hist.items[(hist.head + i) & (hist.cap - 1)];
}

void history_entry_view(const history_entry_t *e, bson_t *out)
{
    bson_init_static(out, e->data, e->len);
}

/* Memory for the arena and the index, mapped with its pages already
 * present: one system call instead of a page fault per 4 KiB while the
 * history grows (page faults are what a commit would otherwise pay, and
 * dearly on virtual machines). */
static void *history_map(size_t size)
{
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE,
                   -1, 0);
    if (p == MAP_FAILED)
        abort(); /* out of memory, as bson_malloc does */
    return p;
}

/* Room for `n` bytes at the end of the arena. */
static uint8_t *history_alloc(size_t n, history_chunk_t **chunk)
{
    history_chunk_t *c = hist.last;
    if (!c || c->cap - c->used < n) {
        if (hist.spare && hist.spare->cap >= n) {
            c = hist.spare;
            hist.spare = NULL;
        } else {
            size_t cap = n > HISTORY_CHUNK - sizeof *c ? n : HISTORY_CHUNK - sizeof *c;
            c = history_map(sizeof *c + cap);
            c->cap = cap;
        }
        c->next = NULL;
        c->used = 0;
        if (hist.last)
            hist.last->next = c;
        else
            hist.first = c;
        hist.last = c;
    }
    uint8_t *p = c->data + c->used;
    c->used += (n + 7) & ~(size_t)7;
    if (c->used > c->cap)
        c->used = c->cap;
    *chunk = c;
    return p;
}

static bson_t *history_op_begin(bson_t *op, const char *kind, const char *db, const char *coll,
                                const uint8_t *uuid)
{
    char key[16];
    const char *k;
    if (!hist.ops_init) {
        bson_init(&hist.ops);
        hist.ops_init = true;
    }
    bson_uint32_to_string(hist.nops++, &k, key, sizeof key);
    bson_append_document_begin(&hist.ops, k, -1, op);
    BSON_APPEND_UTF8(op, "o", kind);
    BSON_APPEND_UTF8(op, "db", db);
    if (coll)
        BSON_APPEND_UTF8(op, "c", coll);
    if (uuid)
        bson_append_binary(op, "ui", 2, BSON_SUBTYPE_UUID, uuid, 16);
    return op;
}

void history_op_insert(const char *db, const char *coll, const uint8_t *uuid, const bson_t *doc)
{
    bson_t op;
    history_op_begin(&op, "i", db, coll, uuid);
    BSON_APPEND_DOCUMENT(&op, "doc", doc);
    bson_append_document_end(&hist.ops, &op);
}

void history_op_update(const char *db, const char *coll, const uint8_t *uuid,
                       const bson_t *old_doc, const bson_t *new_doc, bool replacement)
{
    bson_t op;
    history_op_begin(&op, replacement ? "r" : "u", db, coll, uuid);
    BSON_APPEND_DOCUMENT(&op, "old", old_doc);
    BSON_APPEND_DOCUMENT(&op, "doc", new_doc);
    bson_append_document_end(&hist.ops, &op);
}

void history_op_remove(const char *db, const char *coll, const uint8_t *uuid,
                       const bson_t *old_doc)
{
    bson_t op;
    history_op_begin(&op, "d", db, coll, uuid);
    BSON_APPEND_DOCUMENT(&op, "old", old_doc);
    bson_append_document_end(&hist.ops, &op);
}

void history_op_ddl(const char *db, const bson_t *cmd)
{
    bson_t op;
    history_op_begin(&op, "c", db, NULL, NULL);
    BSON_APPEND_DOCUMENT(&op, "cmd", cmd);
    bson_append_document_end(&hist.ops, &op);
}

void history_set_txn(const bson_t *lsid, int64_t txn_number)
{
    if (hist.has_txn)
        bson_destroy(&hist.lsid);
    bson_copy_to(lsid, &hist.lsid);
    hist.txn_number = txn_number;
    hist.has_txn = true;
}

static void history_pop(void)
{
    history_entry_t *e = history_slot(0);
    hist.horizon = e->ts;
    hist.bytes -= e->len + HISTORY_ENTRY_OVERHEAD;
    history_chunk_t *c = e->chunk;
    hist.head = (hist.head + 1) & (hist.cap - 1);
    hist.len--;
    bool last_of_chunk = hist.len == 0 || history_slot(0)->chunk != c;
    if (last_of_chunk) { /* chunks go oldest first: c is hist.first */
        hist.first = c->next;
        if (!hist.first)
            hist.last = NULL;
        if (!hist.spare && c->cap == HISTORY_CHUNK - sizeof *c)
            hist.spare = c;
        else
            munmap(c, sizeof *c + c->cap);
    }
}

/* Drops what retention no longer keeps; `now_ms` is the newest commit's
 * wall time. */
static void history_trim(int64_t now_ms)
{
    int64_t cutoff = now_ms - hist.keep_s * 1000;
    while (hist.len > 1 &&
           ((hist.keep_bytes > 0 && hist.bytes > (size_t)hist.keep_bytes) ||
            (hist.keep_s > 0 && history_slot(0)->wall_ms < cutoff)))
        history_pop();
}

/* Appends an entry; its document is `doc` or, when NULL, {ops: hist.ops}
 * written straight into the arena (the common case: no copy through a
 * temporary document). */
static void history_push(clock_ts_t ts, int64_t wall_ms, uint64_t lsn, uint32_t nops,
                         const bson_t *doc)
{
    if (hist.len == hist.cap) {
        size_t cap = hist.cap ? hist.cap * 2 : 4096;
        history_entry_t *items = history_map(cap * sizeof *items);
        for (size_t i = 0; i < hist.len; i++)
            items[i] = *history_slot(i);
        if (hist.items)
            munmap(hist.items, hist.cap * sizeof *items);
        hist.items = items;
        hist.cap = cap;
        hist.head = 0;
    }
    history_chunk_t *c;
    uint32_t len = doc ? doc->len : 4 + 5 + hist.ops.len + 1;
    uint8_t *p = history_alloc(len, &c);
    if (doc) {
        memcpy(p, bson_get_data(doc), len);
    } else { /* [len] 0x04 "ops" [array] 0x00 */
        uint32_t le = BSON_UINT32_TO_LE(len);
        memcpy(p, &le, 4);
        memcpy(p + 4, "\x04ops", 5);
        memcpy(p + 9, bson_get_data(&hist.ops), hist.ops.len);
        p[len - 1] = 0;
    }
    history_entry_t *e = history_slot(hist.len++);
    e->ts = ts;
    e->wall_ms = wall_ms;
    e->lsn = lsn;
    e->nops = nops;
    e->len = len;
    e->data = p;
    e->chunk = c;
    hist.bytes += len + HISTORY_ENTRY_OVERHEAD;
}

void history_commit(clock_ts_t ts, int64_t wall_ms, uint64_t lsn)
{
    if (hist.nops == 0) {
        if (hist.has_txn) {
            bson_destroy(&hist.lsid);
            hist.has_txn = false;
        }
        return;
    }
    if (hist.has_txn) {
        bson_t doc = BSON_INITIALIZER;
        BSON_APPEND_ARRAY(&doc, "ops", &hist.ops);
        BSON_APPEND_DOCUMENT(&doc, "lsid", &hist.lsid);
        BSON_APPEND_INT64(&doc, "txnNumber", hist.txn_number);
        bson_destroy(&hist.lsid);
        hist.has_txn = false;
        history_push(ts, wall_ms, lsn, hist.nops, &doc);
        bson_destroy(&doc);
    } else {
        history_push(ts, wall_ms, lsn, hist.nops, NULL);
    }
    bson_reinit(&hist.ops);
    hist.nops = 0;
    history_trim(wall_ms);
}

bool history_load_entry(const bson_t *e)
{
    bson_iter_t it;
    clock_ts_t ts;
    int64_t wall = 0;
    uint32_t nops = 0;
    if (!bson_iter_init_find(&it, e, "ts") || !BSON_ITER_HOLDS_TIMESTAMP(&it))
        return false;
    bson_iter_timestamp(&it, &ts.t, &ts.i);
    if (bson_iter_init_find(&it, e, "wall") && BSON_ITER_HOLDS_DATE_TIME(&it))
        wall = bson_iter_date_time(&it);
    bson_t *doc = bson_new();
    bson_iter_init(&it, e);
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (!strcmp(k, "ts") || !strcmp(k, "wall"))
            continue;
        if (!strcmp(k, "ops")) {
            bson_iter_t el;
            if (!BSON_ITER_HOLDS_ARRAY(&it) || !bson_iter_recurse(&it, &el)) {
                bson_destroy(doc);
                return false;
            }
            while (bson_iter_next(&el))
                nops++;
        }
        bson_append_value(doc, k, -1, bson_iter_value(&it));
    }
    bool ok = nops > 0 && (hist.len == 0 || clock_cmp(ts, history_slot(hist.len - 1)->ts) > 0);
    if (ok)
        history_push(ts, wall, 0, nops, doc);
    bson_destroy(doc);
    return ok;
}

void history_entry_doc(size_t i, bson_t *out)
{
    const history_entry_t *e = history_at(i);
    bson_iter_t it;
    BSON_APPEND_TIMESTAMP(out, "ts", e->ts.t, e->ts.i);
    BSON_APPEND_DATE_TIME(out, "wall", e->wall_ms);
    bson_t doc;
    history_entry_view(e, &doc);
    bson_iter_init(&it, &doc);
    while (bson_iter_next(&it))
        bson_append_value(out, bson_iter_key(&it), -1, bson_iter_value(&it));
}

size_t history_len(void)
{
    return hist.len;
}

const history_entry_t *history_at(size_t i)
{
    return i < hist.len ? history_slot(i) : NULL;
}

size_t history_seek(clock_ts_t ts)
{
    size_t lo = 0, hi = hist.len;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (clock_cmp(history_slot(mid)->ts, ts) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

clock_ts_t history_horizon(void)
{
    return hist.horizon;
}

void history_set_horizon(clock_ts_t ts)
{
    if (clock_cmp(ts, hist.horizon) > 0)
        hist.horizon = ts;
}

size_t history_bytes(void)
{
    return hist.bytes;
}

void history_clear(void)
{
    while (hist.len > 0)
        history_pop();
    hist.horizon = (clock_ts_t){0, 0};
    if (hist.ops_init)
        bson_reinit(&hist.ops);
    hist.nops = 0;
    if (hist.has_txn) {
        bson_destroy(&hist.lsid);
        hist.has_txn = false;
    }
}
