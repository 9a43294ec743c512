/* tailable: find's tailable (and awaitData) cursors over capped
 * collections. A cursor remembers the natural position of the last
 * document it scanned, never a pointer, and reads on from there. */
#include "cmd/tailable.h"

#include <string.h>

#include "cmd/access.h"
#include "cmd/changestream.h"
#include "cmd/view.h"
#include "store/catalog.h"

#define TAILABLE_DEFAULT_BATCH 101
#define TAILABLE_MAX_BATCH_BYTES (16 * 1024 * 1024)
#define TAILABLE_DEFAULT_AWAIT_MS 1000

/* A tailable cursor's position (cursor_t.tail). */
struct tailable {
    char db[128];
    char coll[256];
    uint64_t coll_id; /* the collection it tails: another one by that name ends it */
    uint64_t last;    /* natural position of the last document scanned, 0: none yet */
    int64_t skip;     /* matching documents still to skip (the find's skip) */
    bool await_data;
};

bool tailable_check_find(bool tailable, bool await_data, const bson_t *sort, bool single_batch,
                         dberr_t *err)
{
    if (await_data && !tailable)
        return dberr_set(err, DBERR_FAILED_TO_PARSE,
                         "Cannot set 'awaitData' without also setting 'tailable'");
    if (!tailable)
        return true;
    if (sort && !bson_empty(sort)) {
        bson_iter_t s;
        bson_iter_init(&s, sort);
        bool natural = bson_iter_next(&s) && !strcmp(bson_iter_key(&s), "$natural") &&
                       BSON_ITER_HOLDS_NUMBER(&s) && bson_iter_as_int64(&s) == 1 &&
                       !bson_iter_next(&s);
        if (!natural)
            return dberr_set(err, DBERR_BAD_VALUE,
                             "cannot use tailable option with a sort other than {$natural: 1}");
    }
    if (single_batch)
        return dberr_set(err, DBERR_BAD_VALUE,
                         "cannot use tailable option with the 'singleBatch' option");
    return true;
}

/* Appends the documents after the cursor's position to array `arr`. */
static bool tailable_fill(cursor_t *c, bson_t *arr, int64_t batch_size, uint32_t *n, dberr_t *err)
{
    struct tailable *t = c->tail;
    collection_t *coll = catalog_get(server.catalog, t->db, t->coll);
    if (!coll || collection_id(coll) != t->coll_id || !collection_is_capped(coll))
        return dberr_set(err, 175, "collection dropped: the tailable cursor on %s.%s was killed",
                         t->db, t->coll);
    if (t->last && !collection_natural_holds(coll, t->last))
        return dberr_set(err, 136,
                         "CollectionScan died due to position in capped collection being "
                         "deleted. Last seen record id: RecordId(%llu)",
                         (unsigned long long)t->last);
    size_t bytes = 0;
    char key[16];
    uint64_t pos;
    record_t *r;
    if (batch_size <= 0)
        batch_size = TAILABLE_DEFAULT_BATCH;
    while (*n < batch_size && (r = collection_natural_next(coll, t->last, &pos))) {
        bson_t doc, projected = BSON_INITIALIZER;
        record_view(r, &doc);
        int at = -1;
        if (!matcher_matches(c->matcher, &doc, &at)) {
            t->last = pos;
            continue;
        }
        if (t->skip > 0) {
            t->skip--;
            t->last = pos;
            continue;
        }
        const bson_t *out = &doc;
        if (c->projection) {
            if (!projection_apply(c->projection, &doc, at, &projected, err)) {
                bson_destroy(&projected);
                return false;
            }
            out = &projected;
        }
        if (*n > 0 && bytes + out->len > TAILABLE_MAX_BATCH_BYTES) {
            bson_destroy(&projected);
            break; /* the next batch starts with it */
        }
        bytes += out->len;
        bson_append_document(arr, cmd_index_key(*n, key, sizeof key), -1, out);
        bson_destroy(&projected);
        (*n)++;
        t->last = pos;
    }
    return true;
}

/* Appends {cursor: {<field>: [...], id, ns}}; `id` 0 closes. */
static bool tailable_batch(bson_t *reply, cursor_t *c, const char *field, int64_t batch_size,
                           bool keep, uint32_t *n, dberr_t *err)
{
    bson_t cur, arr;
    uint32_t count = 0;
    bson_append_document_begin(reply, "cursor", -1, &cur);
    bson_append_array_begin(&cur, field, -1, &arr);
    bool ok = batch_size == 0 && !strcmp(field, "firstBatch")
                  ? true /* a cursor opened cheaply */
                  : tailable_fill(c, &arr, batch_size, &count, err);
    bson_append_array_end(&cur, &arr);
    BSON_APPEND_INT64(&cur, "id", keep ? c->id : 0);
    BSON_APPEND_UTF8(&cur, "ns", c->ns);
    bson_append_document_end(reply, &cur);
    if (n)
        *n = count;
    return ok;
}

bool tailable_find(cmd_ctx_t *ctx, collection_t *coll, const char *ns, matcher_t *m,
                   projection_t *p, bool await_data, int64_t skip, int64_t batch_size, dberr_t *err)
{
    if (!collection_is_capped(coll) || ctx->view->txn) {
        matcher_destroy(m);
        projection_destroy(p);
        if (ctx->view->txn)
            return dberr_set(err, DBERR_OPERATION_NOT_SUPPORTED_IN_TRANSACTION,
                             "Cannot run a tailable find in a multi-document transaction");
        return dberr_set(err, DBERR_BAD_VALUE,
                         "error processing query: ns=%s tailable cursor requested on non capped "
                         "collection",
                         ns);
    }
    cursor_t *c = cursors_open(server.cursors, ns, server_now_ms());
    c->matcher = m;
    c->projection = p;
    c->conn_id = ctx->client->id;
    c->owner = access_owner(ctx->client);
    c->no_timeout = ctx->cursor_no_timeout;
    struct tailable *t = bson_malloc0(sizeof *t);
    c->tail = t;
    snprintf(t->db, sizeof t->db, "%s", collection_db(coll));
    snprintf(t->coll, sizeof t->coll, "%s", collection_name(coll));
    t->coll_id = collection_id(coll);
    t->skip = skip;
    t->await_data = await_data;
    /* mongod keeps a tailable cursor unless the collection is empty */
    bool keep = collection_count(coll) > 0;
    uint32_t n = 0;
    bson_t reply = BSON_INITIALIZER;
    bool ok = tailable_batch(&reply, c, "firstBatch", batch_size, keep, &n, err);
    if (ok)
        bson_concat(ctx->reply, &reply);
    bson_destroy(&reply);
    ctx->view->nreturned += n;
    if (!ok || !keep)
        cursors_close(server.cursors, c->id);
    return ok;
}

bool tailable_reply(bson_t *reply, cursor_t *c, int64_t batch_size, uint32_t *n, dberr_t *err)
{
    c->last_used_ms = server_now_ms();
    return tailable_batch(reply, c, "nextBatch", batch_size, true, n, err);
}

bool tailable_get_more(cmd_ctx_t *ctx, cursor_t *c, int64_t batch_size, dberr_t *err)
{
    bson_iter_t it;
    int64_t await_ms = TAILABLE_DEFAULT_AWAIT_MS;
    if (cmd_find(ctx, "maxTimeMS", &it)) {
        if (!c->tail->await_data)
            return dberr_set(err, DBERR_BAD_VALUE,
                             "cannot set maxTimeMS on getMore command for a non-awaitData "
                             "cursor");
        await_ms = bson_iter_as_int64(&it);
    }
    int64_t id = c->id;
    bson_t reply = BSON_INITIALIZER;
    uint32_t n = 0;
    bool ok = tailable_reply(&reply, c, batch_size, &n, err);
    if (!ok) {
        bson_destroy(&reply);
        cursors_close(server.cursors, id);
        return false;
    }
    if (n > 0 || !c->tail->await_data || await_ms <= 0 || server.stopping) {
        bson_concat(ctx->reply, &reply);
        bson_destroy(&reply);
        ctx->view->nreturned += n;
        return true;
    }
    bson_destroy(&reply);
    changestream_park(ctx, c, batch_size, await_ms);
    return true;
}
