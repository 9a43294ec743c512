/* query: the read commands — find (and its cursor replies), getMore,
 * killCursors, count, distinct and explain; aggregate is in aggregate.c. */
#include "cmd/cmd-private.h"
#include "cmd/memory.h"
#include "cmd/op.h"
#include "cmd/access.h"
#include "cmd/changestream.h"
#include "cmd/tailable.h"
#include "cmd/oplog.h"
#include "cmd/plancache.h"
#include "cmd/view.h"
#include "cmd/query-private.h"

#include <string.h>

#include "doc/bsonhash.h"
#include "doc/collation.h"
#include "doc/compare.h"
#include "doc/fts.h"
#include "doc/matcher.h"
#include "doc/path.h"
#include "doc/pipeline.h"
#include "doc/projection.h"
#include "doc/sortspec.h"
#include "store/catalog.h"
#include "store/cursor.h"
#include "store/geoscan.h"
#include "store/clock.h"
#include "store/index.h"
#include "store/mvcc.h"
#include "store/observer.h"
#include "txn/session.h"
#include "util/fiber.h"
#include "util/namelist.h"
#include "util/strjoin.h"
#include "util/vec.h"

#define QUERY_DEFAULT_BATCH 101

#define QUERY_MAX_BATCH_BYTES (16 * 1024 * 1024)

/* Appends the next batch of `c` as array `field` of `reply`; returns false
 * with err when a projection fails. */
static bool query_fill_batch(cursor_t *c, bson_t *cursor_doc, const char *field,
                             int64_t batch_size, dberr_t *err)
{
    bson_t arr;
    char key[16];
    uint32_t n = 0;
    size_t bytes = 0;
    bool ok = true;
    bson_append_array_begin(cursor_doc, field, -1, &arr);
    while (c->pos < c->recs.len) {
        if (batch_size > 0 && n >= batch_size)
            break;
        record_t *r = c->recs.items[c->pos];
        bson_t doc;
        record_view(r, &doc);
        bson_t projected = BSON_INITIALIZER;
        const bson_t *out = &doc;
        if (c->projection) {
            int pos = -1;
            if (c->matcher && projection_is_positional(c->projection))
                matcher_matches(c->matcher, &doc, &pos);
            if (!projection_apply(c->projection, &doc, pos, &projected, err)) {
                bson_destroy(&projected);
                ok = false;
                break;
            }
            out = &projected;
        }
        if (n > 0 && bytes + out->len > QUERY_MAX_BATCH_BYTES) {
            bson_destroy(&projected);
            break;
        }
        bytes += out->len;
        bson_append_document(&arr, cmd_index_key(n, key, sizeof key), -1, out);
        bson_destroy(&projected);
        n++;
        c->pos++;
        record_unref(r);
        c->recs.items[c->pos - 1] = NULL;
    }
    bson_append_array_end(cursor_doc, &arr);
    return ok;
}

bool cmd_reply_cursor(cmd_ctx_t *ctx, const char *ns, recvec_t *recs, projection_t *projection,
                      matcher_t *matcher, int64_t batch_size, bool single_batch, dberr_t *err)
{
    bool ok =
        cmd_reply_cursor_lend(ctx, ns, recs, &projection, &matcher, batch_size, single_batch, err);
    projection_destroy(projection);
    matcher_destroy(matcher);
    return ok;
}

bool cmd_reply_cursor_lend(cmd_ctx_t *ctx, const char *ns, recvec_t *recs,
                           projection_t **projection, matcher_t **matcher, int64_t batch_size,
                           bool single_batch, dberr_t *err)
{
    /* a single batch never becomes a cursor a client can name: it is
     * filled from a cursor on the stack, not one registered and closed */
    cursor_t local;
    cursor_t *c;
    if (single_batch) {
        memset(&local, 0, sizeof local);
        c = &local;
    } else {
        c = cursors_open(server.cursors, ns, server_now_ms());
    }
    c->recs = *recs;
    recvec_init(recs);
    c->projection = *projection;
    c->matcher = *matcher;
    *projection = NULL;
    *matcher = NULL;
    c->conn_id = ctx->client->id;
    c->owner = access_owner(ctx->client);
    c->no_timeout = ctx->cursor_no_timeout;
    bson_t cur;
    bson_append_document_begin(ctx->reply, "cursor", -1, &cur);
    bool ok;
    if (batch_size == 0) { /* a cursor opened cheaply: nothing returned yet */
        bson_t empty;
        bson_append_array_begin(&cur, "firstBatch", -1, &empty);
        bson_append_array_end(&cur, &empty);
        ok = true;
    } else {
        ok = query_fill_batch(c, &cur, "firstBatch",
                              batch_size < 0 ? QUERY_DEFAULT_BATCH : batch_size, err);
    }
    ctx->view->nreturned += (int64_t)c->pos;
    bool done = !ok || single_batch || c->pos >= c->recs.len;
    BSON_APPEND_INT64(&cur, "id", done ? 0 : c->id);
    BSON_APPEND_UTF8(&cur, "ns", ns);
    if (!ctx->in_txn && !strcmp(ctx->rc.level, "snapshot")) {
        clock_ts_t at = clock_now(); /* the time the snapshot read saw */
        BSON_APPEND_TIMESTAMP(&cur, "atClusterTime", at.t, at.i);
    }
    bson_append_document_end(ctx->reply, &cur);
    if (done) { /* no cursor stays open: the compiled objects go back */
        *projection = c->projection;
        *matcher = c->matcher;
        c->projection = NULL;
        c->matcher = NULL;
        if (c == &local)
            recvec_destroy(&local.recs);
        else
            cursors_close(server.cursors, c->id);
    }
    return ok;
}

bool cmd_get_more(cmd_ctx_t *ctx, dberr_t *err)
{
    if (!BSON_ITER_HOLDS_INT64(&ctx->arg) && !BSON_ITER_HOLDS_INT32(&ctx->arg))
        return cmd_wrong_type(err, &ctx->arg, "type 'long'", "getMore.getMore");
    int64_t id = bson_iter_as_int64(&ctx->arg);
    bson_iter_t it;
    if (!cmd_find(ctx, "collection", &it) || !BSON_ITER_HOLDS_UTF8(&it))
        return cmd_missing_field(err, "getMore.collection");
    int64_t batch_size = 0;
    if (!cmd_opt_int64(ctx, "batchSize", &batch_size, err))
        return false;
    bson_iter_t mt;
    if (batch_size < 0)
        return dberr_set(err, DBERR_BAD_VALUE, "Batch size for getMore must be non-negative, "
                                               "but received: %lld",
                         (long long)batch_size);
    cursor_t *c = cursors_get(server.cursors, id);
    if (!c)
        return dberr_set(err, DBERR_CURSOR_NOT_FOUND, "cursor id %lld not found", (long long)id);
    if (server.auth && c->owner != access_owner(ctx->client))
        return dberr_set(err, DBERR_UNAUTHORIZED,
                         "cursor id %lld was not created by the authenticated user",
                         (long long)id);
    char ns[512];
    snprintf(ns, sizeof ns, "%s.%s", ctx->db, bson_iter_utf8(&it, NULL));
    if (strcmp(ns, c->ns) != 0)
        return dberr_set(err, DBERR_UNAUTHORIZED,
                         "Requested getMore on namespace '%s', but cursor belongs to a different "
                         "namespace %s",
                         ns, c->ns);
    if (c->stream) /* a change stream: awaitData, maxTimeMS is its wait */
        return changestream_get_more(ctx, c, batch_size, err);
    if (c->tail) /* a tailable cursor: reads on from its position */
        return tailable_get_more(ctx, c, batch_size, err);
    if (cmd_find(ctx, "maxTimeMS", &mt))
        return dberr_set(err, DBERR_BAD_VALUE,
                         "cannot set maxTimeMS on getMore command for a non-awaitData cursor");
    c->last_used_ms = server_now_ms();
    bson_t cur;
    bson_append_document_begin(ctx->reply, "cursor", -1, &cur);
    size_t before = c->pos;
    bool ok = query_fill_batch(c, &cur, "nextBatch", batch_size, err);
    ctx->view->nreturned += (int64_t)(c->pos - before);
    bool done = !ok || c->pos >= c->recs.len;
    BSON_APPEND_INT64(&cur, "id", done ? 0 : c->id);
    BSON_APPEND_UTF8(&cur, "ns", c->ns);
    bson_append_document_end(ctx->reply, &cur);
    if (done)
        cursors_close(server.cursors, id);
    return ok;
}

bool cmd_kill_cursors(cmd_ctx_t *ctx, dberr_t *err)
{
    const char *coll;
    if (!cmd_collection_name(ctx, &coll, err))
        return false;
    bson_iter_t it, el;
    if (!cmd_find(ctx, "cursors", &it) || !BSON_ITER_HOLDS_ARRAY(&it))
        return cmd_missing_field(err, "killCursors.cursors");
    bson_t killed = BSON_INITIALIZER, missing = BSON_INITIALIZER;
    uint32_t nk = 0, nm = 0;
    char key[16];
    bool ok = false;
    bson_iter_recurse(&it, &el);
    while (bson_iter_next(&el)) {
        if (!BSON_ITER_HOLDS_INT64(&el) && !BSON_ITER_HOLDS_INT32(&el))
            continue;
        int64_t id = bson_iter_as_int64(&el);
        cursor_t *cur = cursors_get(server.cursors, id);
        if (cur && server.auth && cur->owner != access_owner(ctx->client)) {
            dberr_set(err, DBERR_UNAUTHORIZED, "not authorized to kill cursor on %s", cur->ns);
            goto cleanup;
        }
        if (cursors_close(server.cursors, id))
            bson_append_int64(&killed, cmd_index_key(nk++, key, sizeof key), -1, id);
        else
            bson_append_int64(&missing, cmd_index_key(nm++, key, sizeof key), -1, id);
    }
    BSON_APPEND_ARRAY(ctx->reply, "cursorsKilled", &killed);
    BSON_APPEND_ARRAY(ctx->reply, "cursorsNotFound", &missing);
    bson_t empty = BSON_INITIALIZER;
    BSON_APPEND_ARRAY(ctx->reply, "cursorsAlive", &empty);
    BSON_APPEND_ARRAY(ctx->reply, "cursorsUnknown", &empty);
    ok = true;
cleanup:
    bson_destroy(&killed);
    bson_destroy(&missing);
    return ok;
}


/* find's own fields (mongod's find_command.idl) that atomdb honours;
 * the others it refuses by name. */
static bool query_find_field_known(const char *k)
{
    static const char *known[] = {"filter", "sort", "projection", "hint", "skip", "limit",
                                  "batchSize", "singleBatch", "min", "max", "returnKey",
                                  "noCursorTimeout", "allowPartialResults", "let", "allowDiskUse",
                                  "tailable", "awaitData", "collation", "showRecordId",
                                  "oplogReplay", "readOnce", "maxScan", "snapshot"};
    return namelist_has(known, NAMELIST_COUNT(known), k);
}

static bool query_parse_find(cmd_ctx_t *ctx, query_find_t *q, dberr_t *err)
{
    bool present;
    memset(q, 0, sizeof *q);
    q->batch_size = -1;
    bson_init(&q->filter);
    bson_iter_t it;
    bson_iter_init(&it, ctx->cmd);
    bson_iter_next(&it);
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (!cmd_is_generic_arg(k) && !query_find_field_known(k))
            return dberr_set(err, 40415, "BSON field 'find.%s' is an unknown field.", k);
    }
    if (!cmd_opt_doc(ctx, "filter", &q->filter, &present, err) ||
        !cmd_opt_doc(ctx, "sort", &q->sort, &q->has_sort, err) ||
        !cmd_opt_doc(ctx, "projection", &q->projection, &q->has_projection, err) ||
        !cmd_opt_doc(ctx, "min", &q->min, &q->has_min, err) ||
        !cmd_opt_doc(ctx, "max", &q->max, &q->has_max, err))
        return false;
    if (!present)
        bson_init(&q->filter);
    if (cmd_find(ctx, "hint", &it)) {
        if (BSON_ITER_HOLDS_UTF8(&it))
            q->hint_name = bson_iter_utf8(&it, NULL);
        else if (cmd_iter_doc(&it, &q->hint))
            q->has_hint = true;
        else
            return dberr_set(err, DBERR_FAILED_TO_PARSE, "hint must be either a string or nested "
                                                         "object");
    }
    bool partial = false, show_record_id = false, disk = false;
    if (!cmd_opt_int64(ctx, "skip", &q->skip, err) ||
        !cmd_opt_int64(ctx, "limit", &q->limit, err) ||
        !cmd_opt_int64(ctx, "batchSize", &q->batch_size, err) ||
        !cmd_opt_bool(ctx, "singleBatch", &q->single_batch, err) ||
        !cmd_opt_bool(ctx, "returnKey", &q->return_key, err) ||
        !cmd_opt_bool(ctx, "noCursorTimeout", &q->no_cursor_timeout, err) ||
        !cmd_opt_bool(ctx, "allowPartialResults", &partial, err) ||
        !cmd_opt_bool(ctx, "showRecordId", &show_record_id, err) ||
        !cmd_opt_bool(ctx, "allowDiskUse", &disk, err))
        return false;
    q->allow_disk_use = disk;
    if (q->skip < 0)
        return dberr_set(err, 51024, "BSON field 'skip' value must be >= 0, actual value '%lld'",
                         (long long)q->skip);
    if (q->limit < 0) {
        /* a negative limit (legacy) means one batch of that size */
        q->limit = -q->limit;
        q->single_batch = true;
    }
    bool has_bs = cmd_find(ctx, "batchSize", &it);
    if (has_bs && q->batch_size < 0)
        return dberr_set(err, 51024,
                         "BSON field 'batchSize' value must be >= 0, actual value '%lld'",
                         (long long)q->batch_size);
    if (!has_bs)
        q->batch_size = -1;
    if ((q->has_min || q->has_max) && !q->has_hint && !q->hint_name)
        return dberr_set(err, 51173,
                         "When using min()/max() a hint of which index to use must be provided");
    if (show_record_id)
        return dberr_set(err, DBERR_NOT_IMPLEMENTED,
                         "atomdb has no record ids: showRecordId is not supported");
    if (!cmd_opt_bool(ctx, "tailable", &q->tailable, err) ||
        !cmd_opt_bool(ctx, "awaitData", &q->await_data, err))
        return false;
    if (!tailable_check_find(q->tailable, q->await_data, q->has_sort ? &q->sort : NULL,
                             q->single_batch, err))
        return false;
    if (q->tailable && (q->limit > 0 || q->has_min || q->has_max || q->return_key))
        return dberr_set(err, DBERR_NOT_IMPLEMENTED, "atomdb's tailable cursors do not support "
                                                     "limit, min, max or returnKey yet");
    if (q->tailable)
        q->has_sort = false; /* {$natural: 1}: the order a tailable cursor reads in */
    if ((cmd_find(ctx, "readOnce", &it) && bson_iter_as_bool(&it)) ||
        (cmd_find(ctx, "oplogReplay", &it) && bson_iter_as_bool(&it)) ||
        cmd_find(ctx, "maxScan", &it) || cmd_find(ctx, "snapshot", &it))
        return dberr_set(err, DBERR_NOT_IMPLEMENTED, "atomdb does not support the find option "
                                                     "'%s'",
                         bson_iter_key(&it));
    /* allowPartialResults: one node holds all the data, so every result is
     * complete; allowDiskUse: atomdb cannot spill, so an in-memory sort past
     * its cap fails either way (query_run), with a message that says so */
    q->has_coll_field = cmd_find(ctx, "collation", &q->coll_field);
    return true;
}

/* q->coll: the command's collation, else the default of `c` (a view
 * refuses another one: 167), as cmd_collation_resolve. */
bool query_resolve_collation(query_find_t *q, collection_t *c, dberr_t *err)
{
    return cmd_collation_resolve(c, q->has_coll_field ? &q->coll_field : NULL, &q->coll, err);
}

/* The find's collation on its matcher and sort (what they compare strings
 * by, and which indexes may serve them). */
void query_apply_collation(const query_find_t *q, matcher_t *m, sortspec_t *s)
{
    if (!q->coll)
        return;
    if (m)
        matcher_set_collation(m, q->coll);
    if (s)
        sortspec_set_collation(s, q->coll);
}

/* The values of `doc` for the fields of index key `pattern`, as the
 * document {field: value, ...} returnKey and min/max work with (a missing
 * field is null, an array's first element stands for it). */
static void query_index_key_of(const bson_t *pattern, const bson_t *doc, bson_t *out)
{
    bson_iter_t it;
    bson_iter_init(&it, pattern);
    while (bson_iter_next(&it)) {
        const char *f = bson_iter_key(&it);
        bson_iter_t v, el;
        if (BSON_ITER_HOLDS_UTF8(&it) && !strcmp(bson_iter_utf8(&it, NULL), "hashed")) {
            /* a hashed field's key is the hash of its value (null when missing) */
            bson_value_t null = {.value_type = BSON_TYPE_NULL};
            BSON_APPEND_INT64(out, f, bsonhash_value(path_get(doc, f, &v) ? bson_iter_value(&v)
                                                                          : &null));
        } else if (!path_get(doc, f, &v))
            bson_append_null(out, f, -1);
        else if (BSON_ITER_HOLDS_ARRAY(&v) && bson_iter_recurse(&v, &el) && bson_iter_next(&el))
            bson_append_value(out, f, -1, bson_iter_value(&el));
        else
            bson_append_value(out, f, -1, bson_iter_value(&v));
    }
}

/* -1/0/1: the index key `key` against the bound `b` in the index's order
 * (`pattern`'s directions); fields missing from `b` compare equal. */
static int query_key_cmp(const bson_t *pattern, const bson_t *key, const bson_t *b)
{
    bson_iter_t p, k, x;
    bson_iter_init(&p, pattern);
    bson_iter_init(&k, key);
    while (bson_iter_next(&p) && bson_iter_next(&k)) {
        if (!bson_iter_init_find(&x, b, bson_iter_key(&p)))
            return 0;
        int c = compare_values(bson_iter_value(&k), bson_iter_value(&x));
        bool desc = BSON_ITER_HOLDS_NUMBER(&p) && bson_iter_as_double(&p) < 0;
        if (c)
            return desc ? -c : c;
    }
    return 0;
}

/* The key pattern of the index a find's hint names, or NULL. */
static const bson_t *query_hinted_pattern(collection_t *c, const query_find_t *q)
{
    for (int i = 0; c && i < collection_nindexes(c); i++) {
        index_t *ix = collection_index(c, i);
        if ((q->hint_name && !strcmp(ix->name, q->hint_name)) ||
            (q->has_hint && index_key_equals(ix, &q->hint)))
            return &ix->key;
    }
    return NULL;
}

/* min/max (the hinted index's range, min inclusive, max exclusive) and
 * returnKey (the documents become their index keys), applied to the
 * records of a find. */
static bool query_apply_key_options(collection_t *c, const query_find_t *q,
                                    const collection_plan_t *plan, recvec_t *recs, dberr_t *err)
{
    if (!q->has_min && !q->has_max && !q->return_key)
        return true;
    const bson_t *pattern = query_hinted_pattern(c, q);
    if (!pattern && plan->index)
        pattern = &plan->index->key;
    bson_t wc_pattern = BSON_INITIALIZER; /* a wildcard scan's {path: 1} */
    const char *wc_path = plan->index && plan->index->wildcard ? plan->wildcard_path : NULL;
    if (wc_path) {
        if (q->has_min || q->has_max)
            return dberr_set(err, DBERR_NOT_IMPLEMENTED,
                             "atomdb does not support min/max with a wildcard index yet");
        BSON_APPEND_INT32(&wc_pattern, wc_path, 1);
        pattern = &wc_pattern;
    }
    if ((q->has_min || q->has_max) && pattern) {
        const bson_t *bounds[2] = {q->has_min ? &q->min : NULL, q->has_max ? &q->max : NULL};
        for (int b = 0; b < 2; b++) {
            if (!bounds[b])
                continue;
            bson_iter_t x, p;
            bson_iter_init(&x, bounds[b]);
            bson_iter_init(&p, pattern);
            while (bson_iter_next(&x)) {
                if (!bson_iter_next(&p) || strcmp(bson_iter_key(&x), bson_iter_key(&p)))
                    return dberr_set(err, 51174,
                                     "The index chosen is not consistent with min/max");
            }
        }
    }
    size_t keep = 0;
    for (size_t i = 0; i < recs->len; i++) {
        record_t *r = recs->items[i];
        bson_t doc, key = BSON_INITIALIZER;
        record_view(r, &doc);
        if (wc_path) /* as mongod: {$_path: "a.b", "a.b": value} */
            BSON_APPEND_UTF8(&key, "$_path", wc_path);
        if (pattern)
            query_index_key_of(pattern, &doc, &key);
        bool in = !pattern || ((!q->has_min || query_key_cmp(pattern, &key, &q->min) >= 0) &&
                               (!q->has_max || query_key_cmp(pattern, &key, &q->max) < 0));
        if (!in) {
            record_unref(r);
        } else if (q->return_key) {
            record_unref(r);
            recs->items[keep++] = record_new(&key);
        } else {
            recs->items[keep++] = r;
        }
        bson_destroy(&key);
    }
    recs->len = keep;
    bson_destroy(&wc_pattern);
    return true;
}

/* Sets *out to the index a find's hint (not $natural) names among those
 * the planner sees (not hidden), NULL when there is no such hint; BadValue
 * when it names none, as mongod's planner checks the hint before the
 * $near's index. */
static bool query_near_hinted(collection_t *c, const query_find_t *q, const index_t **out,
                              dberr_t *err)
{
    *out = NULL;
    bson_iter_t it;
    const bson_t *key = q && q->has_hint && !bson_empty(&q->hint) ? &q->hint : NULL;
    if (key && bson_iter_init(&it, key) && bson_iter_next(&it) &&
        strcmp(bson_iter_key(&it), "$natural") == 0)
        key = NULL; /* a collection scan: left to the query */
    if (!key && !(q && q->hint_name))
        return true;
    for (int i = 0; i < collection_nindexes(c); i++) {
        const index_t *ix = collection_index(c, i);
        if (!ix->hidden && ((q->hint_name && strcmp(ix->name, q->hint_name) == 0) ||
                            (key && index_key_equals(ix, key)))) {
            *out = ix;
            return true;
        }
    }
    return dberr_set(err, DBERR_BAD_VALUE,
                     "error processing query: ns=%s planner returned error :: caused by :: hint "
                     "provided does not correspond to an existing index",
                     collection_ns(c));
}

/* A $near needs a geo index on its path, as mongod's planner (291): a
 * 2dsphere one for a GeoJSON point, a 2d one for a flat legacy $near,
 * either for a legacy $nearSphere; never a hidden one (the planner does
 * not see those); with a hint of `q` (NULL: none), only the hinted index;
 * with the filter `m` (NULL: any such index), one the planner finds
 * relevant (its geometry first, or a predicate on its first field). */
static bool query_near_index(collection_t *c, const query_find_t *q, const matcher_t *m,
                             const char *path, geo_near_units_t units, dberr_t *err)
{
    const index_t *hinted;
    if (!query_near_hinted(c, q, &hinted, err))
        return false;
    for (int i = 0; i < collection_nindexes(c); i++) {
        const index_t *ix = collection_index(c, i);
        int g = geoscan_geo_field(ix);
        if (ix->hidden || (hinted && ix != hinted) || g < 0 || strcmp(ix->paths[g], path) != 0 ||
            units == (ix->geo2d ? GEO_NEAR_METRES : GEO_NEAR_FLAT))
            continue;
        if (!m || hinted || geoscan_relevant(ix, m))
            return true;
    }
    return dberr_set(err, 291,
                     "error processing query: ns=%s planner returned error :: caused by :: "
                     "unable to find index for $geoNear query",
                     collection_ns(c));
}

/* A leading $geoNear (NULL: none) runs on the geo index of `key`, or on
 * the collection's only 2d index, else its only 2dsphere one (mongod's
 * extractGeoNearFieldFromIndexes: IndexNotFound 27 otherwise). As 7.0's,
 * that choice counts hidden indexes too; the planner then refuses a field
 * only a hidden index serves (query_near_index: 291). */
bool query_geonear_key(collection_t *c, geonear_spec_t *g, dberr_t *err)
{
    if (!g)
        return true;
    if (collection_is_view(c))
        return dberr_set(err, DBERR_NOT_IMPLEMENTED, "atomdb does not run $geoNear on a view yet");
    const char *key = pipeline_geonear_key(g);
    if (key)
        return query_near_index(c, NULL, NULL, key, pipeline_geonear_units(g), err);
    const char *found = NULL;
    int count = 0;
    for (int i = 0; i < collection_nindexes(c); i++) { /* 2d indexes first */
        const index_t *ix = collection_index(c, i);
        if (ix->geo2d) {
            found = ix->paths[0];
            count++;
        }
    }
    if (count > 1)
        return dberr_set(err, DBERR_INDEX_NOT_FOUND,
                         "There is more than one 2d index on %s; unsure which to use for $geoNear",
                         collection_ns(c));
    if (count == 1) {
        pipeline_geonear_set_key(g, found);
        return true;
    }
    for (int i = 0; i < collection_nindexes(c); i++) {
        const index_t *ix = collection_index(c, i);
        for (int f = 0; ix->is_2dsphere && f < ix->nfields; f++) {
            if (ix->sphere[f]) {
                found = ix->paths[f];
                count++;
                break;
            }
        }
    }
    if (count == 0)
        return dberr_set(err, DBERR_INDEX_NOT_FOUND,
                         "$geoNear requires a 2d or 2dsphere index, but none were found");
    if (count > 1)
        return dberr_set(err, DBERR_INDEX_NOT_FOUND,
                         "There is more than one 2dsphere index on %s; unsure which to use for "
                         "$geoNear",
                         collection_ns(c));
    pipeline_geonear_set_key(g, found);
    return true;
}

typedef struct query_near_ent {
    double dist;
    size_t pos; /* keeps equal distances in scan order */
    record_t *rec;
} query_near_ent_t;

static int query_near_cmp(const void *a, const void *b)
{
    const query_near_ent_t *x = a, *y = b;
    if (x->dist != y->dist)
        return x->dist < y->dist ? -1 : 1;
    return x->pos < y->pos ? -1 : x->pos > y->pos;
}

/* Orders the records of `out` by their distance from the $near point. */
static bool query_near_order(const matcher_t *m, recvec_t *out, dberr_t *err)
{
    query_near_ent_t *e = bson_malloc((out->len ? out->len : 1) * sizeof *e);
    for (size_t i = 0; i < out->len; i++) {
        if ((i & 1023) == 1023 && !fiber_check(err)) {
            bson_free(e);
            return false;
        }
        bson_t doc;
        record_view(out->items[i], &doc);
        e[i] = (query_near_ent_t){matcher_near_distance(m, &doc), i, out->items[i]};
    }
    qsort(e, out->len, sizeof *e, query_near_cmp);
    for (size_t i = 0; i < out->len; i++)
        out->items[i] = e[i].rec;
    bson_free(e);
    return true;
}

/* Runs a parsed find over `c` (may be NULL: no collection) named `coll`,
 * through the command's view (a transaction's snapshot and write set). */
bool query_run(cmd_ctx_t *ctx, collection_t *c, const char *coll, const query_find_t *q,
                      matcher_t *m, sortspec_t *s, recvec_t *out, collection_plan_t *plan,
                      dberr_t *err)
{
    if (!c && !ctx->view->txn) {
        memcpy(ctx->view->plan_stage, "EOF", 4);
        return true;
    }
    const char *near = matcher_near_path(m);
    if (near && s)
        return dberr_set(err, DBERR_NOT_IMPLEMENTED,
                         "atomdb does not combine $near / $nearSphere with a sort yet");
    if (near && c && !collection_is_view(c) &&
        !query_near_index(c, q, m, near, geo_pred_near_units(matcher_geo_on(m, near)), err))
        return false;
    collection_query_opts_t o = {0};
    o.matcher = m;
    o.sort = s;
    o.hint = q->has_hint ? &q->hint : NULL;
    o.hint_name = q->hint_name;
    bool ranged = q->has_min || q->has_max || near; /* $near: skip/limit after ordering */
    o.skip = ranged ? 0 : q->skip;
    o.limit = ranged ? 0 : q->limit;
    /* the nearest skip+limit suffice (not in a transaction: its own
     * writes may replace some of them) */
    if (near && !q->has_min && !q->has_max && q->limit > 0 && !ctx->view->txn)
        o.near_want = q->skip + q->limit;
    /* a blocking sort is bounded as mongod's (doc/pipeline.h's limits) */
    o.sort_max_bytes = pipeline_limits.sort_bytes;
    o.allow_disk_use = q->allow_disk_use;
    collection_plan_t local;
    if (!plan)
        plan = &local;
    memset(plan, 0, sizeof *plan);
    if (!view_query(ctx->view, c, coll, &o, false, out, plan, err))
        return false;
    if (matcher_take_error(m, err)) /* a $expr that failed fails the query */
        return false;
    if (!query_apply_key_options(c, q, plan, out, err))
        return false;
    if (near && !query_near_order(m, out, err))
        return false;
    if (ranged)
        recvec_skip_limit(out, 0, q->skip, q->limit);
    return true;
}

bool cmd_text_meta(matcher_t *m, sortspec_t *s, projection_t *p, dberr_t *err)
{
    bool s_meta = sortspec_uses_text_score(s), p_meta = projection_uses_text_score(p);
    if (!s_meta && !p_meta)
        return true;
    if (!matcher_text(m))
        return dberr_set(err, 40218, "query requires text score metadata, but it is not "
                                     "available");
    if (s_meta)
        sortspec_set_text(s, m);
    if (p_meta)
        projection_set_text(p, m);
    return true;
}

bool cmd_find_cmd(cmd_ctx_t *ctx, dberr_t *err)
{
    const char *coll;
    query_find_t q;
    matcher_t *m = NULL;
    sortspec_t *s = NULL;
    projection_t *p = NULL;
    recvec_t recs;
    bool ok = false;
    bool cacheable = false; /* until the collation is known: cleanup frees */
    recvec_init(&recs);
    if (!cmd_collection_name(ctx, &coll, err))
        return false;
    if (oplog_is_ns(ctx->db, coll)) /* the oplog view (cmd/oplog.c) */
        return oplog_find(ctx, err);
    if (!query_parse_find(ctx, &q, err))
        return false;
    if (!catalog_valid_coll_name(ctx->db, coll, err))
        return false;
    collection_t *c = catalog_get(server.catalog, ctx->db, coll);
    if (!query_resolve_collation(&q, c, err))
        goto cleanup;
    /* the filter and projection compile the same every time without let
     * or a collation: taken from (and put back into) the plan cache */
    bson_iter_t let;
    cacheable = !q.coll && !cmd_find(ctx, "let", &let);
    m = cacheable ? plancache_take_find_matcher(&q.filter) : NULL;
    if (!m && !(m = cmd_matcher_new_near(ctx, &q.filter, err)))
        goto cleanup;
    if (q.has_sort && !(s = sortspec_new(&q.sort, err)))
        goto cleanup;
    query_apply_collation(&q, m, s);
    bool has_projection = q.has_projection && !bson_empty(&q.projection);
    if (has_projection && cacheable)
        p = plancache_take_projection(&q.projection);
    if (has_projection && !p && !(p = projection_new(&q.projection, err)))
        goto cleanup;
    if (!cmd_text_meta(m, s, p, err))
        goto cleanup;
    if (p && q.coll)
        projection_set_collation(p, q.coll);
    char ns[512];
    strjoin3(ns, sizeof ns, ctx->db, ".", coll);
    if (q.tailable && c && collection_is_view(c)) { /* a view's find is an aggregate */
        dberr_set(err, DBERR_INVALID_PIPELINE_OPERATOR,
                  "Option tailable not supported in aggregation.");
        goto cleanup;
    }
    if (q.tailable && c) {
        ctx->cursor_no_timeout = q.no_cursor_timeout;
        ok = tailable_find(ctx, c, ns, m, p, q.await_data, q.skip, q.batch_size, err);
        m = NULL; /* the cursor took both */
        p = NULL;
        goto cleanup;
    }
    if (!query_run(ctx, c, coll, &q, m, s, &recs, NULL, err))
        goto cleanup;
    bool positional = p && projection_is_positional(p);
    if (q.return_key) { /* the keys are the result: no projection */
        projection_destroy(p);
        p = NULL;
        positional = false;
    }
    ctx->cursor_no_timeout = q.no_cursor_timeout;
    matcher_t *lent = positional ? m : NULL;
    if (positional)
        m = NULL;
    /* both come back unless a cursor stays open and keeps them */
    ok = cmd_reply_cursor_lend(
        ctx, ns, &recs, &p, &lent, q.batch_size,
        q.single_batch || (q.limit > 0 && q.batch_size < 0 && q.limit <= QUERY_DEFAULT_BATCH), err);
    if (positional)
        m = lent;
cleanup:
    sortspec_destroy(s); /* before the matcher it may point at */
    s = NULL;
    if (cacheable && m && !matcher_text(m) && !matcher_near_path(m)) {
        plancache_put_find_matcher(&q.filter, m);
        plancache_put_projection(&q.projection, p);
    } else {
        matcher_destroy(m);
        projection_destroy(p);
    }
    recvec_destroy(&recs);
    collation_destroy(q.coll);
    return ok;
}

/* The `query` filter of count and distinct (borrowed), {} when absent. */
static bool query_filter_opt(cmd_ctx_t *ctx, bson_t *filter, dberr_t *err)
{
    bool present;
    if (!cmd_opt_doc(ctx, "query", filter, &present, err))
        return false;
    if (!present)
        bson_init(filter);
    return true;
}

bool cmd_count(cmd_ctx_t *ctx, dberr_t *err)
{
    const char *coll;
    if (!cmd_collection_name(ctx, &coll, err))
        return false;
    static const char *const known[] = {"query", "limit", "skip", "hint", "collation", "fields"};
    if (!cmd_only_fields(ctx, known, sizeof known / sizeof known[0], err))
        return false;
    bson_t filter;
    if (!query_filter_opt(ctx, &filter, err))
        return false;
    query_find_t q = {0};
    bson_iter_t it;
    if (!cmd_opt_int64(ctx, "skip", &q.skip, err) || !cmd_opt_int64(ctx, "limit", &q.limit, err))
        return false;
    if (q.skip < 0)
        return dberr_set(err, DBERR_BAD_VALUE, "skip value is negative in count query");
    if (q.limit < 0)
        q.limit = -q.limit;
    if (cmd_find(ctx, "hint", &it)) {
        if (BSON_ITER_HOLDS_UTF8(&it))
            q.hint_name = bson_iter_utf8(&it, NULL);
        else if (cmd_iter_doc(&it, &q.hint))
            q.has_hint = !bson_empty(&q.hint);
    }
    collection_t *c = catalog_get(server.catalog, ctx->db, coll);
    int64_t n = 0;
    q.has_coll_field = cmd_find(ctx, "collation", &q.coll_field);
    if (!query_resolve_collation(&q, c, err))
        return false;
    if (c && bson_empty(&filter) && !q.has_hint && !q.hint_name && !ctx->view->txn &&
        !collection_is_view(c)) {
        n = (int64_t)collection_count(c) - q.skip;
        if (n < 0)
            n = 0;
        if (q.limit > 0 && n > q.limit)
            n = q.limit;
    } else if (c || ctx->view->txn) {
        matcher_t *m = matcher_new(&filter, err);
        if (!m) {
            collation_destroy(q.coll);
            return false;
        }
        query_apply_collation(&q, m, NULL);
        recvec_t recs;
        recvec_init(&recs);
        bool ok = query_run(ctx, c, coll, &q, m, NULL, &recs, NULL, err);
        n = (int64_t)recs.len;
        recvec_destroy(&recs);
        matcher_destroy(m);
        if (!ok) {
            collation_destroy(q.coll);
            return false;
        }
    }
    collation_destroy(q.coll);
    BSON_APPEND_INT32(ctx->reply, "n", (int32_t)n);
    return true;
}

/* distinct's accumulator: values seen, kept unique under the collation. */
typedef struct query_distinct {
    bson_value_t *vals;
    size_t len, cap;
    const collation_t *coll; /* NULL: simple */
} query_distinct_t;

static bool query_distinct_add(const bson_value_t *v, void *ctx)
{
    query_distinct_t *d = ctx;
    if (v->value_type == BSON_TYPE_ARRAY)
        return true; /* distinct reports an array's elements, visited next */
    for (size_t i = 0; i < d->len; i++)
        if (d->vals[i].value_type == v->value_type &&
            compare_values_coll(&d->vals[i], v, d->coll) == 0)
            return true;
    VEC_RESERVE_ONE(d->vals, d->len, d->cap, 16);
    bson_value_copy(v, &d->vals[d->len++]);
    return true;
}

static int query_value_cmp(const void *a, const void *b, void *coll)
{
    return compare_values_coll(a, b, coll);
}

bool cmd_distinct(cmd_ctx_t *ctx, dberr_t *err)
{
    const char *coll;
    if (!cmd_collection_name(ctx, &coll, err))
        return false;
    bson_iter_t it;
    if (!cmd_required(ctx, "key", BSON_TYPE_UTF8, &it, err))
        return false;
    const char *key = bson_iter_utf8(&it, NULL);
    static const char *const known[] = {"key", "query", "collation"};
    if (!cmd_only_fields(ctx, known, sizeof known / sizeof known[0], err))
        return false;
    bson_t filter;
    if (!query_filter_opt(ctx, &filter, err))
        return false;
    collection_t *c = catalog_get(server.catalog, ctx->db, coll);
    query_find_t q = {0};
    q.has_coll_field = cmd_find(ctx, "collation", &q.coll_field);
    if (!query_resolve_collation(&q, c, err))
        return false;
    matcher_t *m = matcher_new(&filter, err);
    if (!m) {
        collation_destroy(q.coll);
        return false;
    }
    query_apply_collation(&q, m, NULL);
    query_distinct_t d = {0};
    d.coll = q.coll;
    recvec_t recs;
    recvec_init(&recs);
    bool ok = query_run(ctx, c, coll, &q, m, NULL, &recs, NULL, err);
    for (size_t i = 0; ok && i < recs.len; i++) {
        if (!(ok = fiber_check(err)))
            break;
        bson_t doc;
        record_view(recs.items[i], &doc);
        path_visit(&doc, key, query_distinct_add, &d);
    }
    if (ok) {
        if (d.len > 1) /* qsort(NULL, 0) is undefined */
            qsort_r(d.vals, d.len, sizeof *d.vals, query_value_cmp, q.coll);
        bson_t arr;
        char k[16];
        bson_append_array_begin(ctx->reply, "values", -1, &arr);
        for (size_t i = 0; i < d.len; i++)
            bson_append_value(&arr, cmd_index_key((uint32_t)i, k, sizeof k), -1, &d.vals[i]);
        bson_append_array_end(ctx->reply, &arr);
        if (!ctx->in_txn && !strcmp(ctx->rc.level, "snapshot")) {
            clock_ts_t at = clock_now();
            BSON_APPEND_TIMESTAMP(ctx->reply, "atClusterTime", at.t, at.i);
        }
    }
    for (size_t i = 0; i < d.len; i++)
        bson_value_destroy(&d.vals[i]);
    bson_free(d.vals);
    recvec_destroy(&recs);
    matcher_destroy(m);
    collation_destroy(q.coll);
    return ok;
}

bool cmd_explain(cmd_ctx_t *ctx, dberr_t *err)
{
    bson_t inner;
    if (!cmd_iter_doc(&ctx->arg, &inner) || !BSON_ITER_HOLDS_DOCUMENT(&ctx->arg))
        return dberr_set(err, DBERR_TYPE_MISMATCH, "explain command requires a nested object");
    cmd_ctx_t sub = *ctx;
    sub.cmd = &inner;
    cmd_ctx_index(&sub);
    if (!bson_iter_init(&sub.arg, &inner) || !bson_iter_next(&sub.arg))
        return dberr_set(err, DBERR_FAILED_TO_PARSE, "explain command requires a nested object");
    sub.name = bson_iter_key(&sub.arg);
    const char *coll;
    query_find_t q;
    if (strcmp(sub.name, "aggregate") == 0) {
        /* mongod's verbosities; allPlansExecution is executionStats here:
         * atomdb's planner keeps no rejected plans to run */
        const char *verbosity = "allPlansExecution";
        bson_iter_t v;
        if (cmd_find(ctx, "verbosity", &v)) {
            if (!BSON_ITER_HOLDS_UTF8(&v))
                return cmd_wrong_type(err, &v, "type 'string'", "explain.verbosity");
            verbosity = bson_iter_utf8(&v, NULL);
        }
        if (strcmp(verbosity, "queryPlanner") && strcmp(verbosity, "executionStats") &&
            strcmp(verbosity, "allPlansExecution"))
            return dberr_set(err, DBERR_BAD_VALUE,
                             "Enumeration value '%s' for field 'explain.verbosity' is not a "
                             "valid value.",
                             verbosity);
        return aggregate_run(&sub, verbosity, err);
    }
    if (!cmd_collection_name(&sub, &coll, err))
        return false;
    if (strcmp(sub.name, "find") == 0) {
        if (!query_parse_find(&sub, &q, err))
            return false;
    } else if (strcmp(sub.name, "count") == 0 || strcmp(sub.name, "distinct") == 0) {
        memset(&q, 0, sizeof q);
        if (!query_filter_opt(&sub, &q.filter, err))
            return false;
        q.has_coll_field = cmd_find(&sub, "collation", &q.coll_field);
    } else {
        return dberr_set(err, DBERR_NOT_IMPLEMENTED,
                         "atomdb explains find, count and distinct; not '%s' yet", sub.name);
    }
    collection_t *c = catalog_get(server.catalog, ctx->db, coll);
    if (!query_resolve_collation(&q, c, err))
        return false;
    /* a find may hold $near (ordered by query_run); count and distinct not */
    matcher_t *m = strcmp(sub.name, "find") == 0 ? matcher_new_near(&q.filter, err)
                                                 : matcher_new(&q.filter, err);
    if (!m) {
        collation_destroy(q.coll);
        return false;
    }
    sortspec_t *s = NULL;
    if (q.has_sort && !(s = sortspec_new(&q.sort, err))) {
        matcher_destroy(m);
        collation_destroy(q.coll);
        return false;
    }
    query_apply_collation(&q, m, s);
    if (!cmd_text_meta(m, s, NULL, err)) {
        matcher_destroy(m);
        sortspec_destroy(s);
        collation_destroy(q.coll);
        return false;
    }
    recvec_t recs;
    recvec_init(&recs);
    collection_plan_t plan = {0};
    bool ok = query_run(ctx, c, coll, &q, m, s, &recs, &plan, err);
    if (ok) {
        char ns[512];
        snprintf(ns, sizeof ns, "%s.%s", ctx->db, coll);
        bson_t qp, es;
        bson_append_document_begin(ctx->reply, "queryPlanner", -1, &qp);
        BSON_APPEND_UTF8(&qp, "namespace", ns);
        BSON_APPEND_DOCUMENT(&qp, "parsedQuery", &q.filter);
        explain_append_plan_filtered(&qp, &plan, c != NULL, &q.filter);
        bson_t rejected = BSON_INITIALIZER;
        BSON_APPEND_ARRAY(&qp, "rejectedPlans", &rejected);
        bson_destroy(&rejected);
        bson_append_document_end(ctx->reply, &qp);
        bson_append_document_begin(ctx->reply, "executionStats", -1, &es);
        BSON_APPEND_INT64(&es, "nReturned", (int64_t)recs.len);
        BSON_APPEND_INT64(&es, "totalKeysExamined", (int64_t)plan.keys_examined);
        BSON_APPEND_INT64(&es, "totalDocsExamined", (int64_t)plan.docs_examined);
        bson_append_document_end(ctx->reply, &es);
        explain_append_server_info(ctx->reply);
    }
    recvec_destroy(&recs);
    matcher_destroy(m);
    sortspec_destroy(s);
    collation_destroy(q.coll);
    return ok;
}
