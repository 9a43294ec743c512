/* oplog: local.oplog.rs, a read-only capped-style view over the change
 * history — one entry per commit, in commit (ts) order: a commit of one
 * operation is that operation's entry; a transaction, or a commit of
 * several operations, is one applyOps command entry (as mongod writes a
 * transaction and its batched writes). find, and tailable awaitData
 * getMores parked as change streams' are (changestream.c). */
#include "cmd/oplog.h"

#include <stdio.h>
#include <string.h>

#include "cmd/access.h"
#include "cmd/changestream.h"
#include "doc/matcher.h"
#include "doc/projection.h"
#include "store/catalog.h"
#include "store/collection.h"
#include "util/bsonview.h"
#include "util/fiber.h"
#include "util/namelist.h"

#define OPLOG_NS "local.oplog.rs"
#define OPLOG_DEFAULT_BATCH 101
#define OPLOG_MAX_BATCH_BYTES (16 * 1024 * 1024 - 64 * 1024)

bool oplog_is_ns(const char *db, const char *coll)
{
    return db && coll && !strcmp(db, "local") && !strcmp(coll, "oplog.rs");
}

/* ---- entries ---- */

static const char *oplog_str(const bson_t *doc, const char *key)
{
    bson_iter_t it;
    if (!bson_iter_init_find(&it, doc, key) || !BSON_ITER_HOLDS_UTF8(&it))
        return NULL;
    return bson_iter_utf8(&it, NULL);
}

static void oplog_ns(bson_t *out, const char *db, const char *coll)
{
    char ns[512];
    snprintf(ns, sizeof ns, "%s.%s", db, coll ? coll : "$cmd");
    BSON_APPEND_UTF8(out, "ns", ns);
}

/* The {_id} of a document. */
static void oplog_doc_key(bson_t *out, const char *key, const bson_t *doc)
{
    bson_t k;
    bson_iter_t id;
    bson_append_document_begin(out, key, -1, &k);
    if (bson_iter_init_find(&id, doc, "_id"))
        bson_append_value(&k, "_id", 3, bson_iter_value(&id));
    bson_append_document_end(out, &k);
}

/* The collection's UUID as it is now (a catalog change records none). */
static void oplog_ui_now(bson_t *out, const char *db, const char *coll)
{
    collection_t *c = coll ? catalog_get(server.catalog, db, coll) : NULL;
    if (c)
        bson_append_binary(out, "ui", 2, BSON_SUBTYPE_UUID, collection_uuid(c), 16);
}

/* A catalog change {create|drop|rename|dropDatabase|createIndex|dropIndex|
 * collMod ...} (the observer's document) as mongod's command entry
 * fields; false for one it does not know. */
static bool oplog_ddl(bson_t *out, const char *db, const bson_t *cmd)
{
    const char *name;
    bson_t o, sub;
    bson_iter_t it;
    if ((name = oplog_str(cmd, "create"))) {
        BSON_APPEND_UTF8(out, "op", "c");
        oplog_ns(out, db, NULL);
        if (bson_iter_init_find(&it, cmd, "ui"))
            bson_append_value(out, "ui", 2, bson_iter_value(&it));
        bson_append_document_begin(out, "o", 1, &o);
        BSON_APPEND_UTF8(&o, "create", name);
        cmd_append_create_options(&o, cmd);
        bson_append_document_end(out, &o);
        return true;
    }
    if ((name = oplog_str(cmd, "drop"))) {
        BSON_APPEND_UTF8(out, "op", "c");
        oplog_ns(out, db, NULL);
        bson_append_document_begin(out, "o", 1, &o);
        BSON_APPEND_UTF8(&o, "drop", name);
        bson_append_document_end(out, &o);
        return true;
    }
    if ((name = oplog_str(cmd, "rename"))) {
        const char *to_db = oplog_str(cmd, "toDb"), *to_coll = oplog_str(cmd, "toColl");
        if (!to_db || !to_coll)
            return false;
        char from[512], to[512];
        snprintf(from, sizeof from, "%s.%s", db, name);
        snprintf(to, sizeof to, "%s.%s", to_db, to_coll);
        BSON_APPEND_UTF8(out, "op", "c");
        oplog_ns(out, db, NULL);
        oplog_ui_now(out, to_db, to_coll);
        bson_append_document_begin(out, "o", 1, &o);
        BSON_APPEND_UTF8(&o, "renameCollection", from);
        BSON_APPEND_UTF8(&o, "to", to);
        BSON_APPEND_BOOL(&o, "stayTemp", false);
        if (bson_iter_init_find(&it, cmd, "dropTarget"))
            bson_append_value(&o, "dropTarget", -1, bson_iter_value(&it));
        bson_append_document_end(out, &o);
        return true;
    }
    if (bson_has_field(cmd, "dropDatabase")) {
        BSON_APPEND_UTF8(out, "op", "c");
        oplog_ns(out, db, NULL);
        bson_append_document_begin(out, "o", 1, &o);
        BSON_APPEND_INT32(&o, "dropDatabase", 1);
        bson_append_document_end(out, &o);
        return true;
    }
    bool create_index = (name = oplog_str(cmd, "createIndex")) != NULL;
    if (create_index || (name = oplog_str(cmd, "dropIndex"))) {
        BSON_APPEND_UTF8(out, "op", "c");
        oplog_ns(out, db, NULL);
        oplog_ui_now(out, db, name);
        bson_append_document_begin(out, "o", 1, &o);
        BSON_APPEND_UTF8(&o, create_index ? "createIndexes" : "dropIndexes", name);
        if (create_index && bsonview_field(cmd, "spec", &sub)) {
            bson_iter_init(&it, &sub);
            while (bson_iter_next(&it))
                if (strcmp(bson_iter_key(&it), "ns") != 0)
                    bson_append_value(&o, bson_iter_key(&it), -1, bson_iter_value(&it));
        } else if (!create_index) {
            const char *iname = oplog_str(cmd, "name");
            BSON_APPEND_UTF8(&o, "index", iname ? iname : "");
        }
        bson_append_document_end(out, &o);
        return true;
    }
    if ((name = oplog_str(cmd, "collMod"))) {
        BSON_APPEND_UTF8(out, "op", "c");
        oplog_ns(out, db, NULL);
        oplog_ui_now(out, db, name);
        bson_append_document_begin(out, "o", 1, &o);
        BSON_APPEND_UTF8(&o, "collMod", name);
        if (bsonview_field(cmd, "options", &sub))
            bson_concat(&o, &sub);
        if (bsonview_field(cmd, "index", &sub))
            BSON_APPEND_DOCUMENT(&o, "index", &sub);
        bson_append_document_end(out, &o);
        return true;
    }
    return false;
}

/* One history operation as an entry's op, ns, ui, o, o2; false when it
 * has none (an unknown catalog change). */
static bool oplog_op(bson_t *out, const bson_t *op)
{
    const char *kind = oplog_str(op, "o"), *db = oplog_str(op, "db"), *coll = oplog_str(op, "c");
    bson_t doc, old, cmd;
    bson_iter_t ui;
    if (!kind || !db)
        return false;
    if (kind[0] == 'c')
        return bsonview_field(op, "cmd", &cmd) && oplog_ddl(out, db, &cmd);
    if (!coll)
        return false;
    bool has_doc = bsonview_field(op, "doc", &doc), has_old = bsonview_field(op, "old", &old);
    BSON_APPEND_UTF8(out, "op", kind[0] == 'i' ? "i" : kind[0] == 'd' ? "d" : "u");
    oplog_ns(out, db, coll);
    if (bson_iter_init_find(&ui, op, "ui"))
        bson_append_value(out, "ui", 2, bson_iter_value(&ui));
    switch (kind[0]) {
    case 'i':
        BSON_APPEND_DOCUMENT(out, "o", has_doc ? &doc : &old);
        oplog_doc_key(out, "o2", has_doc ? &doc : &old);
        break;
    case 'd':
        oplog_doc_key(out, "o", has_old ? &old : &doc);
        break;
    default: { /* u: the $v: 2 diff; r (or a diff that cannot say it): the document */
        bson_t diff = BSON_INITIALIZER;
        if (kind[0] == 'u' && has_old && has_doc && oplogdiff_compute(&old, &doc, &diff))
            BSON_APPEND_DOCUMENT(out, "o", &diff);
        else
            BSON_APPEND_DOCUMENT(out, "o", &doc);
        bson_destroy(&diff);
        oplog_doc_key(out, "o2", has_doc ? &doc : &old);
        break;
    }
    }
    return true;
}

void oplog_entry_build(const history_entry_t *e, bson_t *out)
{
    bson_t doc, lsid, op, one = BSON_INITIALIZER;
    bson_iter_t it, el, txn;
    history_entry_view(e, &doc);
    bool is_txn =
        bsonview_field(&doc, "lsid", &lsid) && bson_iter_init_find(&txn, &doc, "txnNumber");
    uint32_t nops = 0;
    /* the operations that have an entry */
    bson_t ops = BSON_INITIALIZER;
    char key[16];
    if (bson_iter_init_find(&it, &doc, "ops") && bson_iter_recurse(&it, &el)) {
        while (bson_iter_next(&el)) {
            bson_t o, entry = BSON_INITIALIZER;
            if (cmd_iter_doc(&el, &o) && oplog_op(&entry, &o)) {
                bson_append_document(&ops, cmd_index_key(nops++, key, sizeof key), -1, &entry);
                if (nops == 1)
                    bson_concat(&one, &entry);
            }
            bson_destroy(&entry);
        }
    }
    if (is_txn) {
        BSON_APPEND_DOCUMENT(out, "lsid", &lsid);
        BSON_APPEND_INT64(out, "txnNumber", bson_iter_as_int64(&txn));
    }
    if (nops == 1 && !is_txn) {
        bson_concat(out, &one);
    } else if (nops == 0) { /* nothing it can say: a no-op keeps the time */
        BSON_APPEND_UTF8(out, "op", "n");
        BSON_APPEND_UTF8(out, "ns", "");
        bson_append_document_begin(out, "o", 1, &op);
        BSON_APPEND_UTF8(&op, "msg", "atomdb: a commit with no oplog operation");
        bson_append_document_end(out, &op);
    } else {
        BSON_APPEND_UTF8(out, "op", "c");
        BSON_APPEND_UTF8(out, "ns", "admin.$cmd");
        bson_append_document_begin(out, "o", 1, &op);
        BSON_APPEND_ARRAY(&op, "applyOps", &ops);
        bson_append_document_end(out, &op);
    }
    BSON_APPEND_TIMESTAMP(out, "ts", e->ts.t, e->ts.i);
    BSON_APPEND_INT64(out, "t", 1);
    BSON_APPEND_INT64(out, "v", 2);
    BSON_APPEND_DATE_TIME(out, "wall", e->wall_ms);
    if (is_txn) {
        bson_t prev;
        bson_append_document_begin(out, "prevOpTime", -1, &prev);
        BSON_APPEND_TIMESTAMP(&prev, "ts", 0, 0);
        BSON_APPEND_INT64(&prev, "t", -1);
        bson_append_document_end(out, &prev);
    }
    bson_destroy(&ops);
    bson_destroy(&one);
}

bool oplog_newest(bool durable, clock_ts_t *ts, int64_t *wall_ms)
{
    for (size_t i = history_len(); i > 0; i--) {
        const history_entry_t *e = history_at(i - 1);
        if (durable && !cs_entry_visible(e))
            continue; /* only the newest few wait for the log */
        *ts = e->ts;
        *wall_ms = e->wall_ms;
        return true;
    }
    return false;
}

/* ---- cursors ---- */

/* A find's cursor on the view (a cursor's `stream`). */
typedef struct oplog_cursor {
    cs_reader_t reader; /* first: changestream_get_more reads it */
    matcher_t *matcher;
    projection_t *projection;
    bool reverse; /* {$natural: -1}: newest first */
    bool tailable;
    clock_ts_t pos; /* forward: every entry up to here was scanned;
                     * reverse: every entry from here on */
    int64_t skip, limit, returned;
} oplog_cursor_t;

static void oplog_cursor_free(void *p)
{
    oplog_cursor_t *oc = p;
    matcher_destroy(oc->matcher);
    projection_destroy(oc->projection);
    bson_free(oc);
}

/* Fails with CappedPositionLost (136) when entries after a forward
 * scan's position were dropped by retention. */
static bool oplog_check_position(const oplog_cursor_t *oc, dberr_t *err)
{
    clock_ts_t h = history_horizon();
    if (oc->reverse || (!h.t && !h.i) || clock_cmp(oc->pos, h) >= 0)
        return true;
    return dberr_set(err, 136,
                     "CollectionScan died due to position in capped collection being "
                     "deleted. Last seen record id: Timestamp(%u, %u) (the change "
                     "history begins after Timestamp(%u, %u); see "
                     "--change-stream-history)",
                     oc->pos.t, oc->pos.i, h.t, h.i);
}

/* The next entry of the scan after (or, reverse, before) oc->pos (found
 * again at each step, so nothing points into the history between
 * batches). As in a
 * change stream, only entries whose log record is durable are shown (the
 * newest few may still wait for it), so no reader sees a change a crash
 * could take back; an acknowledged write's entry is always there. */
static const history_entry_t *oplog_next(const oplog_cursor_t *oc)
{
    size_t len = history_len(), i = history_seek(oc->pos);
    if (oc->reverse) {
        while (i > 0 && !cs_entry_visible(history_at(i - 1)))
            i--;
        return i > 0 ? history_at(i - 1) : NULL;
    }
    if (i < len && clock_cmp(history_at(i)->ts, oc->pos) == 0)
        i++;
    return i < len && cs_entry_visible(history_at(i)) ? history_at(i) : NULL;
}

/* Appends the next entries that match to `arr` (the cursor's reader fill). */
static bool oplog_fill(cursor_t *c, bson_t *arr, uint32_t *n, int64_t max, dberr_t *err)
{
    oplog_cursor_t *oc = c->stream;
    size_t bytes = 0;
    char key[16];
    while (!oc->reader.ended) {
        if (oc->limit > 0 && oc->returned >= oc->limit) {
            oc->reader.ended = true;
            break;
        }
        if ((max > 0 && *n >= max) || bytes >= OPLOG_MAX_BATCH_BYTES)
            break;
        /* kill and deadline checks, never a yield: the cursor (and its
         * batch being built) must not be closed by another request */
        if (!fiber_alive(err) || !oplog_check_position(oc, err))
            return false;
        const history_entry_t *e = oplog_next(oc);
        if (!e) {
            oc->reader.ended = oc->reverse || !oc->tailable;
            break;
        }
        oc->pos = e->ts;
        bson_t entry = BSON_INITIALIZER, projected = BSON_INITIALIZER;
        oplog_entry_build(e, &entry);
        bool ok = true;
        if (matcher_matches(oc->matcher, &entry, NULL)) {
            if (oc->skip > 0) {
                oc->skip--;
            } else {
                const bson_t *doc = &entry;
                if (oc->projection &&
                    (ok = projection_apply(oc->projection, &entry, -1, &projected, err)))
                    doc = &projected;
                if (ok) {
                    bson_append_document(arr, cmd_index_key((*n)++, key, sizeof key), -1, doc);
                    bytes += doc->len;
                    oc->returned++;
                }
            }
        }
        if (ok && matcher_take_error(oc->matcher, err))
            ok = false;
        bson_destroy(&entry);
        bson_destroy(&projected);
        if (!ok)
            return false;
    }
    return true;
}

/* ---- find ---- */

/* The direction of a sort or hint: {$natural: 1|-1} (or {ts: 1|-1}, the
 * same order); false when it is another. */
static bool oplog_direction(const bson_t *spec, bool *reverse)
{
    bson_iter_t it;
    if (bson_empty(spec))
        return true;
    if (!bson_iter_init(&it, spec) || !bson_iter_next(&it) ||
        (strcmp(bson_iter_key(&it), "$natural") && strcmp(bson_iter_key(&it), "ts")) ||
        !BSON_ITER_HOLDS_NUMBER(&it))
        return false;
    double d = bson_iter_as_double(&it);
    if (bson_iter_next(&it) || (d != 1 && d != -1))
        return false;
    *reverse = d < 0;
    return true;
}

/* The scan's start: after the filter's lower bound on ts, when it has one. */
static clock_ts_t oplog_start(const matcher_t *m)
{
    clock_ts_t pos = history_horizon();
    matcher_bounds_t b;
    if (matcher_bounds(m, "ts", &b) && b.has_lower && b.lower.value_type == BSON_TYPE_TIMESTAMP) {
        clock_ts_t lo = {b.lower.value.v_timestamp.timestamp, b.lower.value.v_timestamp.increment};
        if (b.lower_inclusive) { /* the entry at lo itself is wanted */
            if (lo.i > 0)
                lo.i--;
            else if (lo.t > 0)
                lo = (clock_ts_t){lo.t - 1, UINT32_MAX};
        }
        if (clock_cmp(lo, pos) > 0)
            pos = lo;
    }
    return pos;
}

static bool oplog_find_field_known(const char *k)
{
    static const char *known[] = {"filter",
                                  "sort",
                                  "projection",
                                  "hint",
                                  "skip",
                                  "limit",
                                  "batchSize",
                                  "singleBatch",
                                  "noCursorTimeout",
                                  "tailable",
                                  "awaitData",
                                  "oplogReplay",
                                  "allowPartialResults"};
    return namelist_has(known, NAMELIST_COUNT(known), k);
}

bool oplog_find(cmd_ctx_t *ctx, dberr_t *err)
{
    bson_t filter, sort, projection, hint;
    bool has_filter, has_sort, has_projection, has_hint, single_batch = false, flag;
    bool tailable = false, await_data = false, reverse = false, no_timeout = false;
    int64_t skip = 0, limit = 0, batch_size = -1;
    bson_iter_t it;
    oplog_cursor_t *oc = NULL;
    if (ctx->in_txn)
        return dberr_set(err, DBERR_OPERATION_NOT_SUPPORTED_IN_TRANSACTION,
                         "Cannot run command against the 'local' database in a transaction.");
    bson_iter_init(&it, ctx->cmd);
    bson_iter_next(&it);
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (cmd_is_generic_arg(k) || oplog_find_field_known(k))
            continue;
        if (!strcmp(k, "min") || !strcmp(k, "max") || !strcmp(k, "returnKey") ||
            !strcmp(k, "showRecordId") || !strcmp(k, "collation") || !strcmp(k, "let") ||
            !strcmp(k, "readOnce") || !strcmp(k, "allowDiskUse") || !strcmp(k, "maxScan") ||
            !strcmp(k, "snapshot"))
            return dberr_set(err, DBERR_NOT_IMPLEMENTED,
                             "atomdb does not support the find option '%s' on %s", k, OPLOG_NS);
        return dberr_set(err, 40415, "BSON field 'find.%s' is an unknown field.", k);
    }
    if (!cmd_opt_doc(ctx, "filter", &filter, &has_filter, err) ||
        !cmd_opt_doc(ctx, "sort", &sort, &has_sort, err) ||
        !cmd_opt_doc(ctx, "projection", &projection, &has_projection, err) ||
        !cmd_opt_int64(ctx, "skip", &skip, err) || !cmd_opt_int64(ctx, "limit", &limit, err) ||
        !cmd_opt_int64(ctx, "batchSize", &batch_size, err) ||
        !cmd_opt_bool(ctx, "singleBatch", &single_batch, err) ||
        !cmd_opt_bool(ctx, "noCursorTimeout", &no_timeout, err) ||
        !cmd_opt_bool(ctx, "tailable", &tailable, err) ||
        !cmd_opt_bool(ctx, "awaitData", &await_data, err) ||
        !cmd_opt_bool(ctx, "oplogReplay", &flag, err) ||
        !cmd_opt_bool(ctx, "allowPartialResults", &flag, err))
        return false;
    if (skip < 0)
        return dberr_set(err, 51024, "BSON field 'skip' value must be >= 0, actual value '%lld'",
                         (long long)skip);
    if (!cmd_find(ctx, "batchSize", &it))
        batch_size = -1;
    else if (batch_size < 0)
        return dberr_set(err, 51024,
                         "BSON field 'batchSize' value must be >= 0, actual value '%lld'",
                         (long long)batch_size);
    if (limit < 0) {
        limit = -limit;
        single_batch = true;
    }
    if (cmd_find(ctx, "hint", &it)) {
        has_hint = BSON_ITER_HOLDS_DOCUMENT(&it) && cmd_iter_doc(&it, &hint);
        if (!has_hint || !oplog_direction(&hint, &reverse))
            return dberr_set(err, DBERR_NOT_IMPLEMENTED,
                             "%s has no indexes: only the hint {$natural: 1|-1} is supported",
                             OPLOG_NS);
    }
    if (has_sort && !oplog_direction(&sort, &reverse))
        return dberr_set(err, DBERR_NOT_IMPLEMENTED,
                         "atomdb sorts %s only in its natural (ts) order: {$natural: 1|-1}",
                         OPLOG_NS);
    if (await_data && !tailable)
        return dberr_set(err, DBERR_FAILED_TO_PARSE,
                         "Cannot set 'awaitData' without also setting 'tailable'");
    if (tailable && reverse)
        return dberr_set(err, DBERR_BAD_VALUE,
                         "error processing query: cannot use tailable option with a sort other "
                         "than {$natural: 1}");
    if (tailable && single_batch)
        return dberr_set(err, DBERR_BAD_VALUE, "cannot use tailable option with singleBatch");
    oc = bson_malloc0(sizeof *oc);
    oc->reader.fill = oplog_fill;
    oc->reader.await_data = await_data;
    oc->reverse = reverse;
    oc->tailable = tailable;
    oc->skip = skip;
    oc->limit = limit;
    if (!has_filter)
        bson_init(&filter);
    if (!(oc->matcher = cmd_matcher_new(ctx, &filter, err)))
        goto fail;
    if (has_projection && !bson_empty(&projection) &&
        !(oc->projection = projection_new(&projection, err)))
        goto fail;
    oc->pos = reverse ? (clock_ts_t){UINT32_MAX, UINT32_MAX} : oplog_start(oc->matcher);
    cursor_t *c = cursors_open(server.cursors, OPLOG_NS, server_now_ms());
    c->conn_id = ctx->client->id;
    c->owner = access_owner(ctx->client);
    c->no_timeout = no_timeout || ctx->cursor_no_timeout;
    c->stream = oc;
    c->stream_free = oplog_cursor_free;
    int64_t id = c->id;
    bool ended = false;
    int64_t first = batch_size < 0 ? OPLOG_DEFAULT_BATCH : batch_size;
    bool ok = true;
    if (first == 0 && !single_batch) { /* an empty first batch: nothing read yet */
        bson_t cur, arr;
        bson_append_document_begin(ctx->reply, "cursor", -1, &cur);
        bson_append_array_begin(&cur, "firstBatch", -1, &arr);
        bson_append_array_end(&cur, &arr);
        BSON_APPEND_INT64(&cur, "id", id);
        BSON_APPEND_UTF8(&cur, "ns", OPLOG_NS);
        bson_append_document_end(ctx->reply, &cur);
    } else {
        if (single_batch) /* one batch: the cursor ends with it */
            oc->limit = oc->limit > 0 && oc->limit < first ? oc->limit : first;
        ok = cs_reader_reply(c, ctx->reply, "firstBatch", first, NULL, &ended, err);
    }
    if (!ok || ended)
        cursors_close(server.cursors, id);
    return ok;
fail:
    oplog_cursor_free(oc);
    return false;
}

/* ---- the rest of the namespace ---- */

bool oplog_check_command(const cmd_ctx_t *ctx, bool is_write, dberr_t *err)
{
    static const char *const served[] = {"find",      "getMore",         "killCursors",
                                         "collStats", "listCollections", "dbStats",
                                         "validate"};
    bson_iter_t it, inner;
    bson_t sub;
    const char *name = ctx->name;
    bson_iter_init(&it, ctx->cmd);
    if (!bson_iter_next(&it))
        return true;
    if (!strcmp(name, "explain") && cmd_iter_doc(&it, &sub) && bson_iter_init(&inner, &sub) &&
        bson_iter_next(&inner)) { /* explain {find: "oplog.rs"...} */
        name = bson_iter_key(&inner);
        it = inner;
    }
    if (!BSON_ITER_HOLDS_UTF8(&it))
        return true;
    const char *v = bson_iter_utf8(&it, NULL);
    if (!oplog_is_ns(ctx->db, v) && strcmp(v, OPLOG_NS) != 0)
        return true;
    if (is_write)
        return dberr_set(err, DBERR_INVALID_NAMESPACE,
                         "cannot write to '%s': atomdb's oplog is a read-only view of its change "
                         "history",
                         OPLOG_NS);
    if (name == ctx->name)
        for (size_t i = 0; i < sizeof served / sizeof served[0]; i++)
            if (!strcmp(name, served[i]))
                return true;
    return dberr_set(err, DBERR_NOT_IMPLEMENTED,
                     "atomdb serves %s to find, getMore, killCursors, collStats and validate; "
                     "'%s%s' is "
                     "not supported on it",
                     OPLOG_NS, name == ctx->name ? "" : "explain of ", name);
}

void oplog_collection_info(bson_t *out, bool name_only)
{
    bson_t opts, info;
    BSON_APPEND_UTF8(out, "name", "oplog.rs");
    BSON_APPEND_UTF8(out, "type", "collection");
    if (name_only)
        return;
    bson_append_document_begin(out, "options", -1, &opts);
    BSON_APPEND_BOOL(&opts, "capped", true);
    BSON_APPEND_INT64(&opts, "size", history_max_bytes());
    bson_append_document_end(out, &opts);
    bson_append_document_begin(out, "info", -1, &info);
    BSON_APPEND_BOOL(&info, "readOnly", false);
    bson_append_document_end(out, &info);
}

bool oplog_coll_stats(bson_t *reply)
{
    int64_t count = (int64_t)history_len(), size = (int64_t)history_bytes();
    BSON_APPEND_UTF8(reply, "ns", OPLOG_NS);
    BSON_APPEND_INT64(reply, "size", size);
    BSON_APPEND_INT64(reply, "count", count);
    if (count)
        BSON_APPEND_INT64(reply, "avgObjSize", size / count);
    BSON_APPEND_INT64(reply, "storageSize", size);
    BSON_APPEND_INT32(reply, "nindexes", 0);
    BSON_APPEND_INT64(reply, "totalIndexSize", 0);
    bson_t sizes = BSON_INITIALIZER;
    BSON_APPEND_DOCUMENT(reply, "indexSizes", &sizes);
    BSON_APPEND_INT32(reply, "scaleFactor", 1);
    BSON_APPEND_BOOL(reply, "capped", true);
    BSON_APPEND_INT64(reply, "maxSize", history_max_bytes());
    return true;
}

bool oplog_validate(bson_t *reply)
{
    /* every retained entry must build into valid BSON in cluster-time order */
    size_t n = history_len(), bad = 0;
    char first_error[160] = "";
    for (size_t i = 0; i < n; i++) {
        const history_entry_t *e = history_at(i);
        bson_t entry = BSON_INITIALIZER;
        oplog_entry_build(e, &entry);
        size_t off;
        bool ok = bson_validate(&entry, BSON_VALIDATE_NONE, &off);
        if (ok && i > 0 && clock_cmp(history_at(i - 1)->ts, e->ts) >= 0)
            ok = false;
        if (!ok && !bad++)
            snprintf(first_error, sizeof first_error,
                     "oplog entry %zu is malformed or out of cluster-time order", i);
        bson_destroy(&entry);
    }
    bson_t empty = BSON_INITIALIZER, keys = BSON_INITIALIZER, arr;
    BSON_APPEND_UTF8(reply, "ns", OPLOG_NS);
    BSON_APPEND_INT64(reply, "nInvalidDocuments", (int64_t)bad);
    BSON_APPEND_INT64(reply, "nNonCompliantDocuments", (int64_t)bad);
    BSON_APPEND_INT64(reply, "nrecords", (int64_t)n);
    BSON_APPEND_INT32(reply, "nIndexes", 0);
    BSON_APPEND_DOCUMENT(reply, "keysPerIndex", &keys);
    BSON_APPEND_DOCUMENT(reply, "indexDetails", &keys);
    BSON_APPEND_BOOL(reply, "valid", bad == 0);
    BSON_APPEND_BOOL(reply, "repaired", false);
    BSON_APPEND_ARRAY(reply, "warnings", &empty);
    bson_append_array_begin(reply, "errors", -1, &arr);
    if (bad)
        bson_append_utf8(&arr, "0", 1, first_error, -1);
    bson_append_array_end(reply, &arr);
    BSON_APPEND_ARRAY(reply, "extraIndexEntries", &empty);
    BSON_APPEND_ARRAY(reply, "missingIndexEntries", &empty);
    BSON_APPEND_ARRAY(reply, "corruptRecords", &empty);
    return true;
}
