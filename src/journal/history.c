/* history: the in-memory, retention-bounded list of committed changes that
 * change streams read, oldest first, built by the journal's observer and
 * trimmed by age and size. */
#include "journal/history.h"

#include <string.h>
#include <time.h>

#define HISTORY_ENTRY_OVERHEAD 64

static struct {
    history_entry_t *items; /* items[head .. head+len) are live */
    size_t head, len, cap;
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

static bson_t *history_op_begin(bson_t *op, const char *kind, const char *db, const char *coll)
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
    return op;
}

void history_op_insert(const char *db, const char *coll, const bson_t *doc)
{
    bson_t op;
    history_op_begin(&op, "i", db, coll);
    BSON_APPEND_DOCUMENT(&op, "doc", doc);
    bson_append_document_end(&hist.ops, &op);
}

void history_op_update(const char *db, const char *coll, const bson_t *old_doc,
                       const bson_t *new_doc, bool replacement)
{
    bson_t op;
    history_op_begin(&op, replacement ? "r" : "u", db, coll);
    BSON_APPEND_DOCUMENT(&op, "old", old_doc);
    BSON_APPEND_DOCUMENT(&op, "doc", new_doc);
    bson_append_document_end(&hist.ops, &op);
}

void history_op_remove(const char *db, const char *coll, const bson_t *old_doc)
{
    bson_t op;
    history_op_begin(&op, "d", db, coll);
    BSON_APPEND_DOCUMENT(&op, "old", old_doc);
    bson_append_document_end(&hist.ops, &op);
}

void history_op_ddl(const char *db, const bson_t *cmd)
{
    bson_t op;
    history_op_begin(&op, "c", db, NULL);
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
    history_entry_t *e = &hist.items[hist.head];
    hist.horizon = e->ts;
    hist.bytes -= e->doc->len + HISTORY_ENTRY_OVERHEAD;
    bson_destroy(e->doc);
    hist.head++;
    hist.len--;
    if (hist.len == 0)
        hist.head = 0;
}

static void history_trim(void)
{
    int64_t cutoff = hist.keep_s > 0 ? (int64_t)time(NULL) * 1000 - hist.keep_s * 1000 : 0;
    while (hist.len > 1 &&
           ((hist.keep_bytes > 0 && hist.bytes > (size_t)hist.keep_bytes) ||
            (hist.keep_s > 0 && hist.items[hist.head].wall_ms < cutoff)))
        history_pop();
}

static void history_push(clock_ts_t ts, int64_t wall_ms, uint64_t lsn, uint32_t nops,
                         bson_t *doc)
{
    if (hist.head + hist.len == hist.cap) {
        if (hist.head > hist.cap / 2) { /* reuse the front */
            memmove(hist.items, hist.items + hist.head, hist.len * sizeof *hist.items);
            hist.head = 0;
        } else {
            hist.cap = hist.cap ? hist.cap * 2 : 1024;
            hist.items = bson_realloc(hist.items, hist.cap * sizeof *hist.items);
        }
    }
    history_entry_t *e = &hist.items[hist.head + hist.len++];
    e->ts = ts;
    e->wall_ms = wall_ms;
    e->lsn = lsn;
    e->nops = nops;
    e->doc = doc;
    hist.bytes += doc->len + HISTORY_ENTRY_OVERHEAD;
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
    bson_t *doc = bson_sized_new(hist.ops.len + 64);
    BSON_APPEND_ARRAY(doc, "ops", &hist.ops);
    if (hist.has_txn) {
        BSON_APPEND_DOCUMENT(doc, "lsid", &hist.lsid);
        BSON_APPEND_INT64(doc, "txnNumber", hist.txn_number);
        bson_destroy(&hist.lsid);
        hist.has_txn = false;
    }
    history_push(ts, wall_ms, lsn, hist.nops, doc);
    bson_reinit(&hist.ops);
    hist.nops = 0;
    history_trim();
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
    if (nops == 0 || (hist.len > 0 &&
                      clock_cmp(ts, hist.items[hist.head + hist.len - 1].ts) <= 0)) {
        bson_destroy(doc);
        return false;
    }
    history_push(ts, wall, 0, nops, doc);
    return true;
}

void history_entry_doc(size_t i, bson_t *out)
{
    const history_entry_t *e = history_at(i);
    bson_iter_t it;
    BSON_APPEND_TIMESTAMP(out, "ts", e->ts.t, e->ts.i);
    BSON_APPEND_DATE_TIME(out, "wall", e->wall_ms);
    bson_iter_init(&it, e->doc);
    while (bson_iter_next(&it))
        bson_append_value(out, bson_iter_key(&it), -1, bson_iter_value(&it));
}

size_t history_len(void)
{
    return hist.len;
}

const history_entry_t *history_at(size_t i)
{
    return i < hist.len ? &hist.items[hist.head + i] : NULL;
}

size_t history_seek(clock_ts_t ts)
{
    size_t lo = 0, hi = hist.len;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (clock_cmp(hist.items[hist.head + mid].ts, ts) < 0)
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
