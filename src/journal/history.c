/* history: the in-memory, retention-bounded list of committed changes that
 * change streams read, oldest first, built by the journal's observer and
 * trimmed by age and size. */
#include "journal/history.h"
#include "journal/journal-private.h"

#include "util/buf.h"

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
    /* the commit being built: its ops array's elements, raw BSON */
    buf_t ops;
    uint32_t nops;
    journal_txn_tag_t txn; /* the commit's transaction, if any */
} hist;

void history_configure(int64_t seconds, int64_t bytes)
{
    hist.keep_s = seconds;
    hist.keep_bytes = bytes;
}

int64_t history_max_bytes(void)
{
    return hist.keep_bytes;
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

/* True for the databases no change stream can watch (admin, config —
 * sessions' config.transactions records — and local): their changes are
 * not kept. */
static bool history_hidden_db(const char *db)
{
    switch (db[0]) {
    case 'a':
        return !strcmp(db, "admin");
    case 'c':
        return !strcmp(db, "config");
    case 'l':
        return !strcmp(db, "local");
    default:
        return false;
    }
}

/* The operations are written as raw BSON (a type byte, the key, the
 * value) in one pass, not through libbson's builder: this runs for every
 * change, so it reserves once and copies each piece once. */

static uint8_t *history_put_key(uint8_t *w, uint8_t type, const char *key, size_t klen)
{
    *w++ = type;
    memcpy(w, key, klen + 1);
    return w + klen + 1;
}

static uint8_t *history_put_str(uint8_t *w, const char *key, size_t klen, const char *v,
                                size_t vlen)
{
    w = history_put_key(w, BSON_TYPE_UTF8, key, klen);
    buf_put_le(w, 4, vlen + 1);
    memcpy(w + 4, v, vlen + 1);
    return w + 4 + vlen + 1;
}

/* Appends operation {o: kind, db, c?, ui?, <k1>: d1?, <k2>: d2?} as element
 * "<nops>" of the ops array. */
static void history_op(const char *kind, const char *db, const char *coll, const uint8_t *uuid,
                       const char *k1, const bson_t *d1, const char *k2, const bson_t *d2)
{
    char key[16];
    const char *k;
    bson_uint32_to_string(hist.nops++, &k, key, sizeof key);
    size_t lk = strlen(k), ldb = strlen(db), lc = coll ? strlen(coll) : 0;
    size_t l1 = d1 ? strlen(k1) : 0, l2 = d2 ? strlen(k2) : 0;
    size_t doc = 4 + (1 + 2 + 4 + 2) + (1 + 3 + 4 + ldb + 1) + (coll ? 1 + 2 + 4 + lc + 1 : 0) +
                 (uuid ? 1 + 3 + 4 + 1 + 16 : 0) + (d1 ? 1 + l1 + 1 + d1->len : 0) +
                 (d2 ? 1 + l2 + 1 + d2->len : 0) + 1;
    buf_reserve(&hist.ops, 1 + lk + 1 + doc);
    uint8_t *w = hist.ops.data + hist.ops.len;
    w = history_put_key(w, BSON_TYPE_DOCUMENT, k, lk);
    buf_put_le(w, 4, doc);
    w += 4;
    w = history_put_str(w, "o", 1, kind, 1);
    w = history_put_str(w, "db", 2, db, ldb);
    if (coll)
        w = history_put_str(w, "c", 1, coll, lc);
    if (uuid) {
        w = history_put_key(w, BSON_TYPE_BINARY, "ui", 2);
        buf_put_le(w, 4, 16);
        w[4] = BSON_SUBTYPE_UUID;
        memcpy(w + 5, uuid, 16);
        w += 21;
    }
    if (d1) {
        w = history_put_key(w, BSON_TYPE_DOCUMENT, k1, l1);
        memcpy(w, bson_get_data(d1), d1->len);
        w += d1->len;
    }
    if (d2) {
        w = history_put_key(w, BSON_TYPE_DOCUMENT, k2, l2);
        memcpy(w, bson_get_data(d2), d2->len);
        w += d2->len;
    }
    *w++ = 0;
    hist.ops.len = (size_t)(w - hist.ops.data);
}

void history_op_insert(const char *db, const char *coll, const uint8_t *uuid, const bson_t *doc)
{
    if (!history_hidden_db(db))
        history_op("i", db, coll, uuid, "doc", doc, NULL, NULL);
}

void history_op_update(const char *db, const char *coll, const uint8_t *uuid,
                       const bson_t *old_doc, const bson_t *new_doc, bool replacement)
{
    if (!history_hidden_db(db))
        history_op(replacement ? "r" : "u", db, coll, uuid, "old", old_doc, "doc", new_doc);
}

void history_op_remove(const char *db, const char *coll, const uint8_t *uuid,
                       const bson_t *old_doc)
{
    if (!history_hidden_db(db))
        history_op("d", db, coll, uuid, "old", old_doc, NULL, NULL);
}

void history_op_ddl(const char *db, const bson_t *cmd)
{
    if (!history_hidden_db(db))
        history_op("c", db, NULL, NULL, "cmd", cmd, NULL, NULL);
}

void history_set_txn(const bson_t *lsid, int64_t txn_number)
{
    journal_txn_tag_set(&hist.txn, lsid, txn_number);
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

/* Appends an entry; its document is `doc` or, when NULL, {ops: [the
 * operations built], lsid?, txnNumber?} written straight into the arena. */
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
    size_t arr = 4 + hist.ops.len + 1;
    size_t txn = hist.txn.set ? 1 + 5 + hist.txn.lsid.len + 1 + 10 + 8 : 0;
    uint32_t len = doc ? doc->len : (uint32_t)(4 + 5 + arr + txn + 1);
    uint8_t *p = history_alloc(len, &c);
    if (doc) {
        memcpy(p, bson_get_data(doc), len);
    } else { /* [len] 0x04 "ops" [array] (0x03 "lsid" [doc] 0x12 "txnNumber" [i64]) 0x00 */
        uint8_t *w = p;
        buf_put_le(w, 4, len);
        memcpy(w + 4, "\x04ops", 5);
        w += 9;
        buf_put_le(w, 4, arr);
        memcpy(w + 4, hist.ops.data, hist.ops.len);
        w[4 + hist.ops.len] = 0;
        w += arr;
        if (hist.txn.set) {
            memcpy(w, "\x03lsid", 6);
            memcpy(w + 6, bson_get_data(&hist.txn.lsid), hist.txn.lsid.len);
            w += 6 + hist.txn.lsid.len;
            memcpy(w, "\x12txnNumber", 11);
            buf_put_le(w + 11, 8, (uint64_t)hist.txn.number);
            w += 19;
        }
        *w = 0;
    }
    *history_slot(hist.len++) = (history_entry_t){
        .ts = ts, .wall_ms = wall_ms, .lsn = lsn, .nops = nops, .len = len, .data = p, .chunk = c};
    hist.bytes += len + HISTORY_ENTRY_OVERHEAD;
}

void history_commit(clock_ts_t ts, int64_t wall_ms, uint64_t lsn)
{
    if (hist.nops > 0)
        history_push(ts, wall_ms, lsn, hist.nops, NULL);
    journal_txn_tag_clear(&hist.txn);
    if (hist.nops == 0)
        return;
    hist.ops.len = 0;
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
    hist.ops.len = 0;
    hist.nops = 0;
    journal_txn_tag_clear(&hist.txn);
}
