/* query: the read commands — find (and its cursor replies), getMore,
 * killCursors, count, distinct, aggregate and explain. */
#include "cmd/cmd-private.h"
#include "cmd/memory.h"
#include "cmd/op.h"
#include "cmd/access.h"
#include "cmd/changestream.h"
#include "cmd/tailable.h"
#include "cmd/view.h"

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
#include "store/clock.h"
#include "store/index.h"
#include "store/mvcc.h"
#include "store/observer.h"
#include "txn/session.h"
#include "util/fiber.h"
#include "util/strjoin.h"
#include "util/vec.h"

#define QUERY_DEFAULT_BATCH 101

static bool query_aggregate(cmd_ctx_t *ctx, const char *verbosity, dberr_t *err);
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
    cursor_t *c = cursors_open(server.cursors, ns, server_now_ms());
    c->recs = *recs;
    recvec_init(recs);
    c->projection = projection;
    c->matcher = matcher;
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
    if (done)
        cursors_close(server.cursors, c->id);
    return ok;
}

bool cmd_get_more(cmd_ctx_t *ctx, dberr_t *err)
{
    if (!BSON_ITER_HOLDS_INT64(&ctx->arg) && !BSON_ITER_HOLDS_INT32(&ctx->arg))
        return dberr_set(err, DBERR_TYPE_MISMATCH,
                         "BSON field 'getMore.getMore' is the wrong type '%s', expected type "
                         "'long'",
                         shellfmt_type_name(bson_iter_type(&ctx->arg)));
    int64_t id = bson_iter_as_int64(&ctx->arg);
    bson_iter_t it;
    if (!cmd_find(ctx, "collection", &it) || !BSON_ITER_HOLDS_UTF8(&it))
        return dberr_set(err, DBERR_FAILED_TO_PARSE,
                         "BSON field 'getMore.collection' is missing but a required field");
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
        return dberr_set(err, DBERR_FAILED_TO_PARSE,
                         "BSON field 'killCursors.cursors' is missing but a required field");
    bson_t killed = BSON_INITIALIZER, missing = BSON_INITIALIZER;
    uint32_t nk = 0, nm = 0;
    char key[16];
    bson_iter_recurse(&it, &el);
    while (bson_iter_next(&el)) {
        if (!BSON_ITER_HOLDS_INT64(&el) && !BSON_ITER_HOLDS_INT32(&el))
            continue;
        int64_t id = bson_iter_as_int64(&el);
        cursor_t *cur = cursors_get(server.cursors, id);
        if (cur && server.auth && cur->owner != access_owner(ctx->client))
            return dberr_set(err, DBERR_UNAUTHORIZED,
                             "not authorized to kill cursor on %s", cur->ns);
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
    bson_destroy(&killed);
    bson_destroy(&missing);
    return true;
}

/* The parsed options of a find (or the find inside explain). */
typedef struct query_find {
    bson_t filter, sort, projection, hint, min, max;
    bool has_sort, has_projection, has_hint, has_min, has_max;
    const char *hint_name;
    int64_t skip, limit, batch_size;
    bool single_batch;
    bool return_key;
    bool no_cursor_timeout;
    bool allow_disk_use;
    bson_iter_t coll_field; /* the command's `collation` (has_coll_field) */
    bool has_coll_field;
    bool tailable, await_data; /* cmd/tailable.c */
    collation_t *coll; /* owned, from query_resolve_collation; NULL: simple */
} query_find_t;

/* find's own fields (mongod's find_command.idl) that atomdb honours;
 * the others it refuses by name. */
static bool query_find_field_known(const char *k)
{
    static const char *known[] = {"filter", "sort", "projection", "hint", "skip", "limit",
                                  "batchSize", "singleBatch", "min", "max", "returnKey",
                                  "noCursorTimeout", "allowPartialResults", "let", "allowDiskUse",
                                  "tailable", "awaitData", "collation", "showRecordId",
                                  "oplogReplay", "readOnce", "maxScan", "snapshot"};
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        if (!strcmp(k, known[i]))
            return true;
    return false;
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
static bool query_resolve_collation(query_find_t *q, collection_t *c, dberr_t *err)
{
    return cmd_collation_resolve(c, q->has_coll_field ? &q->coll_field : NULL, &q->coll, err);
}

/* The find's collation on its matcher and sort (what they compare strings
 * by, and which indexes may serve them). */
static void query_apply_collation(const query_find_t *q, matcher_t *m, sortspec_t *s)
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

/* find's matcher: as cmd_matcher_new, with $near / $nearSphere allowed. */
static matcher_t *query_find_matcher(cmd_ctx_t *ctx, const bson_t *filter, dberr_t *err)
{
    matcher_t *m = matcher_new_near(filter, err);
    bson_iter_t it;
    bson_t let;
    if (m && cmd_find(ctx, "let", &it) && BSON_ITER_HOLDS_DOCUMENT(&it) && cmd_iter_doc(&it, &let))
        matcher_set_let(m, &let);
    return m;
}

/* A $near needs a 2dsphere index on its path, as mongod's planner (291). */
static bool query_near_index(collection_t *c, const char *path, dberr_t *err)
{
    for (int i = 0; i < collection_nindexes(c); i++) {
        const index_t *ix = collection_index(c, i);
        for (int f = 0; ix->is_2dsphere && f < ix->nfields; f++) {
            if (ix->sphere[f] && strcmp(ix->paths[f], path) == 0)
                return true;
        }
    }
    return dberr_set(err, 291,
                     "error processing query: ns=%s planner returned error :: caused by :: "
                     "unable to find index for $geoNear query",
                     collection_ns(c));
}

/* A leading $geoNear (NULL: none) runs on the 2dsphere index of `key`,
 * or on the collection's only one (mongod's IndexNotFound 27 otherwise). */
static bool query_geonear_key(collection_t *c, geonear_spec_t *g, dberr_t *err)
{
    if (!g)
        return true;
    if (collection_is_view(c))
        return dberr_set(err, DBERR_NOT_IMPLEMENTED, "atomdb does not run $geoNear on a view yet");
    const char *key = pipeline_geonear_key(g);
    if (key)
        return query_near_index(c, key, err);
    const char *found = NULL;
    int count = 0;
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
static bool query_run(cmd_ctx_t *ctx, collection_t *c, const char *coll, const query_find_t *q,
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
    if (near && c && !collection_is_view(c) && !query_near_index(c, near, err))
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
    recvec_init(&recs);
    if (!cmd_collection_name(ctx, &coll, err) || !query_parse_find(ctx, &q, err))
        return false;
    if (!catalog_valid_coll_name(ctx->db, coll, err))
        return false;
    collection_t *c = catalog_get(server.catalog, ctx->db, coll);
    if (!query_resolve_collation(&q, c, err))
        goto cleanup;
    m = query_find_matcher(ctx, &q.filter, err);
    if (!m)
        goto cleanup;
    if (q.has_sort && !(s = sortspec_new(&q.sort, err)))
        goto cleanup;
    query_apply_collation(&q, m, s);
    if (q.has_projection && !bson_empty(&q.projection) &&
        !(p = projection_new(&q.projection, err)))
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
    ok = cmd_reply_cursor(ctx, ns, &recs, p, positional ? m : NULL, q.batch_size,
                          q.single_batch || (q.limit > 0 && q.batch_size < 0 &&
                                             q.limit <= QUERY_DEFAULT_BATCH),
                          err);
    if (positional)
        m = NULL; /* the cursor owns both now */
    p = NULL;
cleanup:
    matcher_destroy(m);
    sortspec_destroy(s);
    projection_destroy(p);
    recvec_destroy(&recs);
    collation_destroy(q.coll);
    return ok;
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
    bool present;
    if (!cmd_opt_doc(ctx, "query", &filter, &present, err))
        return false;
    if (!present)
        bson_init(&filter);
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
    bool present;
    if (!cmd_opt_doc(ctx, "query", &filter, &present, err))
        return false;
    if (!present)
        bson_init(&filter);
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

/* $listLocalSessions: one document per live session. */
static void query_session_doc(const session_t *s, void *ctx)
{
    doclist_t *docs = ctx;
    bson_t *doc = bson_new(), id;
    static const uint8_t no_user[32] = {0xe3, 0xb0, 0xc4, 0x42, 0x98, 0xfc, 0x1c, 0x14,
                                        0x9a, 0xfb, 0xf4, 0xc8, 0x99, 0x6f, 0xb9, 0x24,
                                        0x27, 0xae, 0x41, 0xe4, 0x64, 0x9b, 0x93, 0x4c,
                                        0xa4, 0x95, 0x99, 0x1b, 0x78, 0x52, 0xb8, 0x55};
    bson_append_document_begin(doc, "_id", 3, &id);
    bson_append_binary(&id, "id", 2, BSON_SUBTYPE_UUID, s->id, 16);
    bson_append_binary(&id, "uid", 3, BSON_SUBTYPE_BINARY, no_user, 32);
    bson_append_document_end(doc, &id);
    BSON_APPEND_DATE_TIME(doc, "lastUse", s->last_used_ms);
    doclist_push(docs, doc);
}

/* The name of a fresh temporary collection for $out, as mongod names
 * them ("tmp.agg_out.<UUID>"). */
static void query_out_tmp_name(char *out, size_t size)
{
    uint8_t u[16];
    for (int i = 0; i < 16; i++)
        u[i] = (uint8_t)(rand() & 0xff);
    u[6] = (u[6] & 0x0f) | 0x40;
    u[8] = (u[8] & 0x3f) | 0x80;
    snprintf(out, size,
             "tmp.agg_out.%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
             u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12],
             u[13], u[14], u[15]);
}

/* Replaces the documents of `target` by `docs` ($out), as mongod does: the
 * documents go into a temporary collection with the target's options and
 * indexes, a slice at a time (others run between slices and see the old
 * target whole), which is then renamed over the target in one step; a
 * duplicate key or an interruption drops the temporary collection and
 * leaves the target as it was. */
static bool query_write_out(collection_t *target, const char *db, const char *coll,
                            doclist_t *docs, dberr_t *err)
{
    char tmp_name[64];
    query_out_tmp_name(tmp_name, sizeof tmp_name);
    collection_t *tmp = catalog_create(server.catalog, db, tmp_name, collection_options(target), err);
    if (!tmp)
        return false;
    bool ok = true;
    for (int i = 1; ok && i < collection_nindexes(target); i++) {
        bool created;
        ok = collection_create_index(tmp, &collection_index(target, i)->spec, &created, err);
    }
    for (size_t i = 0; ok && i < docs->len; i++) {
        bson_t prepared = BSON_INITIALIZER;
        ok = cmd_prepare_insert_doc(docs->docs[i], &prepared, err) &&
             collection_insert(tmp, &prepared, err) && fiber_check(err);
        bson_destroy(&prepared);
        if (ok && collection_dropped(tmp)) /* by someone else, between slices */
            ok = dberr_set(err, DBERR_NAMESPACE_NOT_FOUND,
                           "$out's temporary collection %s.%s was dropped", db, tmp_name);
    }
    if (ok)
        ok = catalog_rename(server.catalog, db, tmp_name, db, coll, true, err);
    if (!ok && !collection_dropped(tmp))
        catalog_drop(server.catalog, db, tmp_name);
    return ok;
}

/* Finds the target document of one $merge output document. */
static bool query_merge_find(collection_t *target, const pipeline_output_t *o, const bson_t *doc,
                             record_t **found, dberr_t *err)
{
    *found = NULL;
    bson_t filter = BSON_INITIALIZER;
    bool ok = true;
    for (size_t i = 0; i < o->non && ok; i++) {
        bson_iter_t it, v;
        if (!bson_iter_init(&it, doc) || !bson_iter_find_descendant(&it, o->on[i], &v) ||
            BSON_ITER_HOLDS_NULL(&v) || BSON_ITER_HOLDS_UNDEFINED(&v) || BSON_ITER_HOLDS_ARRAY(&v))
            ok = dberr_set(err, 51132,
                           "$merge write error: 'on' field cannot be missing, null, undefined or "
                           "an array");
        else
            bson_append_value(&filter, o->on[i], -1, bson_iter_value(&v));
    }
    if (ok) {
        matcher_t *m = matcher_new(&filter, err);
        recvec_t recs;
        recvec_init(&recs);
        collection_query_opts_t q = {0};
        q.matcher = m;
        q.limit = 1;
        ok = m && collection_query(target, &q, &recs, NULL, err);
        if (ok && recs.len)
            *found = recs.items[0];
        recvec_destroy(&recs);
        matcher_destroy(m);
    }
    bson_destroy(&filter);
    return ok;
}

/* Writes `docs` into the target of a $merge (`db`.`o->coll`), one
 * document at a time, each atomic, with other requests running between
 * slices (mongod's $merge is not isolated either). */
static bool query_write_merge(collection_t *target, const char *db, const pipeline_output_t *o,
                              doclist_t *docs, dberr_t *err)
{
    for (size_t i = 0; i < docs->len; i++) {
        if (i > 0 && !fiber_check(err))
            return false;
        if (collection_dropped(target)) {
            /* dropped between slices: the next write creates it again */
            target = catalog_get_or_create(server.catalog, db, o->coll, err);
            if (!target)
                return false;
        }
        bson_t doc = BSON_INITIALIZER;
        if (!cmd_prepare_insert_doc(docs->docs[i], &doc, err)) {
            bson_destroy(&doc);
            return false;
        }
        record_t *found;
        bool ok = query_merge_find(target, o, &doc, &found, err);
        if (ok && !found) {
            if (o->when_not_matched == PIPELINE_WHEN_NOT_MATCHED_INSERT)
                ok = collection_insert(target, &doc, err);
            else if (o->when_not_matched == PIPELINE_WHEN_NOT_MATCHED_FAIL)
                ok = dberr_set(err, 13113,
                               "$merge could not find a matching document in the target "
                               "collection for at least one document in the source collection");
        } else if (ok) {
            bson_t old, out = BSON_INITIALIZER;
            bson_iter_t it, oid;
            record_view(found, &old);
            bson_iter_init_find(&oid, &old, "_id");
            switch (o->when_matched) {
            case PIPELINE_WHEN_MATCHED_KEEP_EXISTING:
                break;
            case PIPELINE_WHEN_MATCHED_FAIL:
                ok = index_dup_error(collection_index(target, 0), collection_ns(target), &doc,
                                     err);
                break;
            case PIPELINE_WHEN_MATCHED_REPLACE:
                bson_append_value(&out, "_id", 3, bson_iter_value(&oid));
                bson_iter_init(&it, &doc);
                while (bson_iter_next(&it))
                    if (strcmp(bson_iter_key(&it), "_id"))
                        bson_append_value(&out, bson_iter_key(&it), -1, bson_iter_value(&it));
                ok = collection_replace(target, found, &out, err);
                break;
            case PIPELINE_WHEN_MATCHED_MERGE:
                bson_iter_init(&it, &old);
                while (bson_iter_next(&it)) {
                    bson_iter_t nv;
                    const char *k = bson_iter_key(&it);
                    if (strcmp(k, "_id") && bson_iter_init_find(&nv, &doc, k))
                        bson_append_value(&out, k, -1, bson_iter_value(&nv));
                    else
                        bson_append_value(&out, k, -1, bson_iter_value(&it));
                }
                bson_iter_init(&it, &doc);
                while (bson_iter_next(&it))
                    if (!bson_has_field(&old, bson_iter_key(&it)))
                        bson_append_value(&out, bson_iter_key(&it), -1, bson_iter_value(&it));
                ok = collection_replace(target, found, &out, err);
                break;
            case PIPELINE_WHEN_MATCHED_PIPELINE: {
                bson_t vars = BSON_INITIALIZER;
                doclist_t one;
                doclist_init(&one);
                doclist_push(&one, bson_copy(&old));
                ok = pipeline_merge_vars(o, &doc, &vars, err) &&
                     pipeline_run_vars(o->when_matched_pipeline, &vars, &one, err);
                if (ok && one.len == 1)
                    ok = collection_replace(target, found, one.docs[0], err);
                doclist_destroy(&one);
                bson_destroy(&vars);
                break;
            }
            }
            bson_destroy(&out);
        }
        bson_destroy(&doc);
        if (!ok)
            return false;
    }
    return true;
}

/* Checks a leading {$currentOp: {...}} (under `stage`): on admin, with
 * {aggregate: 1}, and only the options mongod knows. */
static bool query_current_op_args(const cmd_ctx_t *ctx, const bson_iter_t *stage, bool *all_users,
                                  unsigned *idle, dberr_t *err)
{
    *all_users = false; /* mongod's default: the caller's own operations */
    *idle = OP_LIST_IDLE_SESSIONS; /* idleSessions defaults to true */
    if (strcmp(ctx->db, "admin") != 0)
        return dberr_set(err, DBERR_INVALID_NAMESPACE,
                         "$currentOp must be run against the 'admin' database with "
                         "{aggregate: 1}");
    bson_t st, args;
    bson_iter_t it;
    cmd_iter_doc(stage, &st);
    if (!bson_iter_init_find(&it, &st, "$currentOp") || !BSON_ITER_HOLDS_DOCUMENT(&it))
        return dberr_set(err, DBERR_FAILED_TO_PARSE,
                         "$currentOp options must be specified in an object, but found: %s",
                         shellfmt_type_name(bson_iter_type(&it)));
    cmd_iter_doc(&it, &args);
    static const char *const known[] = {"allUsers",     "idleConnections", "idleCursors",
                                        "idleSessions", "localOps",        "truncateOps",
                                        "backtrace",    "targetAllNodes"};
    bson_iter_init(&it, &args);
    while (bson_iter_next(&it)) {
        size_t i = 0;
        while (i < sizeof known / sizeof known[0] && strcmp(known[i], bson_iter_key(&it)))
            i++;
        if (i == sizeof known / sizeof known[0])
            return dberr_set(err, DBERR_FAILED_TO_PARSE,
                             "Unrecognized option '%s' in $currentOp stage.", bson_iter_key(&it));
        if (!BSON_ITER_HOLDS_BOOL(&it))
            return dberr_set(err, DBERR_FAILED_TO_PARSE,
                             "The '%s' parameter of the $currentOp stage must be a boolean "
                             "value, but found: %s",
                             bson_iter_key(&it), shellfmt_type_name(bson_iter_type(&it)));
        const char *k = bson_iter_key(&it);
        bool on = bson_iter_as_bool(&it);
        if (!strcmp(k, "allUsers"))
            *all_users = on;
        else if (!strcmp(k, "idleConnections"))
            *idle = on ? *idle | OP_LIST_IDLE_CONNECTIONS : *idle & ~OP_LIST_IDLE_CONNECTIONS;
        else if (!strcmp(k, "idleSessions"))
            *idle = on ? *idle | OP_LIST_IDLE_SESSIONS : *idle & ~OP_LIST_IDLE_SESSIONS;
        else if (on && (!strcmp(k, "idleCursors") ||
                        !strcmp(k, "truncateOps") || !strcmp(k, "backtrace")))
            return dberr_set(err, DBERR_NOT_IMPLEMENTED,
                             "$currentOp option '%s: true' is not supported by atomdb: it lists "
                             "the operations in progress and the connections only",
                             k);
        else if (on && !strcmp(k, "targetAllNodes"))
            return dberr_set(err, DBERR_FAILED_TO_PARSE,
                             "$currentOp supports targetAllNodes parameter only for sharded "
                             "clusters");
        /* localOps (one node: always local) changes nothing here */
    }
    return true;
}

bool cmd_aggregate(cmd_ctx_t *ctx, dberr_t *err)
{
    bson_iter_t e;
    bool explain = cmd_find(ctx, "explain", &e) && bson_iter_as_bool(&e);
    return query_aggregate(ctx, explain ? "queryPlanner" : NULL, err);
}

/* aggregate; `verbosity` non-NULL: explain it at that verbosity. */
static bool query_aggregate(cmd_ctx_t *ctx, const char *verbosity, dberr_t *err)
{
    const char *coll = NULL;
    bson_iter_t it, stages;
    pipeline_t *p = NULL;
    matcher_t *m = NULL;
    recvec_t recs;
    doclist_t docs;
    bson_t rest = BSON_INITIALIZER;
    bool ok = false;
    bool sessions = false, current_ops = false, all_users = false;
    unsigned idle_conns = 0; /* OP_LIST_IDLE_* */
    pipeline_source_t source;
    uint64_t snap = 0;
    recvec_init(&recs);
    doclist_init(&docs);
    if (BSON_ITER_HOLDS_UTF8(&ctx->arg))
        coll = bson_iter_utf8(&ctx->arg, NULL);
    else if (!BSON_ITER_HOLDS_NUMBER(&ctx->arg) || bson_iter_as_int64(&ctx->arg) != 1)
        return dberr_set(err, DBERR_FAILED_TO_PARSE,
                         "Invalid command format: the 'aggregate' field must specify a "
                         "collection name or 1");
    if (!cmd_find(ctx, "pipeline", &it) || !BSON_ITER_HOLDS_ARRAY(&it))
        return dberr_set(err, DBERR_TYPE_MISMATCH,
                         "'pipeline' option must be specified as an array");
    bool explain = verbosity != NULL;
    bson_iter_t cur;
    int64_t batch_size = -1;
    if (!explain) {
        if (!cmd_find(ctx, "cursor", &cur))
            return dberr_set(err, DBERR_FAILED_TO_PARSE,
                             "The 'cursor' option is required, except for aggregate with the "
                             "explain argument");
        bson_t cdoc;
        bson_iter_t bs;
        if (!cmd_iter_doc(&cur, &cdoc) || !BSON_ITER_HOLDS_DOCUMENT(&cur))
            return dberr_set(err, DBERR_TYPE_MISMATCH,
                             "cursor field must be missing or an object");
        if (bson_iter_init_find(&bs, &cdoc, "batchSize")) {
            if (!BSON_ITER_HOLDS_NUMBER(&bs) || bson_iter_as_int64(&bs) < 0)
                return dberr_set(err, DBERR_BAD_VALUE, "cursor.batchSize must be a "
                                                       "non-negative number");
            batch_size = bson_iter_as_int64(&bs);
        }
    }
    static const char *const known[] = {"pipeline", "explain", "cursor", "allowDiskUse", "let",
                                        "hint", "bypassDocumentValidation", "collation"};
    if (!cmd_only_fields(ctx, known, sizeof known / sizeof known[0], err))
        return false;
    bson_iter_t f;
    /* {$changeStream: {...}} first: a change stream (changestream.c) */
    bson_iter_t cs_first;
    bson_t cs_stage;
    if (!explain && bson_iter_recurse(&it, &cs_first) && bson_iter_next(&cs_first) &&
        cmd_iter_doc(&cs_first, &cs_stage) && BSON_ITER_HOLDS_DOCUMENT(&cs_first) &&
        bson_has_field(&cs_stage, "$changeStream")) {
        /* a change stream's filters compare bytewise: another collation is
         * refused, not ignored */
        collation_t *cs_coll = NULL;
        bson_iter_t cf;
        if (cmd_find(ctx, "collation", &cf) && !collation_parse_iter(&cf, &cs_coll, err))
            return false;
        bool collated = cs_coll != NULL;
        collation_destroy(cs_coll);
        if (collated)
            return dberr_set(err, DBERR_NOT_IMPLEMENTED,
                             "atomdb does not support a collation on a change stream yet");
        return changestream_aggregate(ctx, coll, &it, batch_size, err);
    }
    query_find_t hq = {0};
    if (cmd_find(ctx, "hint", &f)) {
        if (BSON_ITER_HOLDS_UTF8(&f))
            hq.hint_name = bson_iter_utf8(&f, NULL);
        else if (BSON_ITER_HOLDS_DOCUMENT(&f) && cmd_iter_doc(&f, &hq.hint))
            hq.has_hint = !bson_empty(&hq.hint);
        else
            return dberr_set(err, DBERR_FAILED_TO_PARSE,
                             "hint must be a string or an object");
    }
    bson_t let;
    bool has_let;
    if (!cmd_opt_doc(ctx, "let", &let, &has_let, err))
        return false;
    /* {aggregate: 1, pipeline: [{$listLocalSessions: {}}, ...]}: the sessions
     * are the input of the remaining stages */
    bson_iter_t first;
    if (!coll && bson_iter_recurse(&it, &first) && bson_iter_next(&first) &&
        BSON_ITER_HOLDS_DOCUMENT(&first)) {
        bson_t st;
        cmd_iter_doc(&first, &st);
        bool ops = bson_has_field(&st, "$currentOp");
        if (ops && !query_current_op_args(ctx, &first, &all_users, &idle_conns, err))
            goto cleanup;
        if (ops)
            current_ops = true;
        if (bson_has_field(&st, "$listLocalSessions") || ops) {
            sessions = !ops;
            bson_t arr;
            char key[16];
            uint32_t n = 0;
            bson_append_array_begin(&rest, "pipeline", -1, &arr);
            while (bson_iter_next(&first))
                bson_append_value(&arr, cmd_index_key(n++, key, sizeof key), -1,
                                  bson_iter_value(&first));
            bson_append_array_end(&rest, &arr);
            bson_iter_init_find(&it, &rest, "pipeline");
        }
    }
    p = pipeline_new(&it, PIPELINE_AGGREGATE, has_let ? &let : NULL, err);
    if (!p)
        goto cleanup;
    stages = it;
    /* $lookup, $unionWith, $graphLookup read through the command's view,
     * all at one snapshot (a transaction has its own) */
    view_source(ctx->view, &source);
    pipeline_set_source(p, &source);
    if (pipeline_reads_others(p) && !ctx->view->txn && !ctx->view->snapshot) {
        snap = mvcc_snapshot_open();
        ctx->view->snapshot = snap;
    }
    bool disk = false;
    if (!cmd_opt_bool(ctx, "allowDiskUse", &disk, err))
        goto cleanup;
    pipeline_set_allow_disk_use(p, disk);
    const pipeline_output_t *out = pipeline_output(p);
    if (!coll && !sessions && !current_ops && !pipeline_is_collectionless(p)) {
        dberr_set(err, DBERR_INVALID_NAMESPACE,
                  "{aggregate: 1} is not valid for this pipeline; a collection is required.");
        goto cleanup;
    }
    bson_iter_t rc, level;
    bson_t rcdoc;
    if (out && cmd_find(ctx, "readConcern", &rc) && cmd_iter_doc(&rc, &rcdoc) &&
        bson_iter_init_find(&level, &rcdoc, "level") && BSON_ITER_HOLDS_UTF8(&level) &&
        strcmp(bson_iter_utf8(&level, NULL), "linearizable") == 0) {
        dberr_set(err, DBERR_INVALID_OPTIONS,
                  "{readConcern: {level: \"linearizable\"}} cannot be used with $out or $merge");
        goto cleanup;
    }
    if (out && ctx->in_txn) {
        dberr_set(err, DBERR_OPERATION_NOT_SUPPORTED_IN_TRANSACTION,
                  "$out and $merge cannot be used in a transaction");
        goto cleanup;
    }
    collection_t *c = coll ? catalog_get(server.catalog, ctx->db, coll) : NULL;
    hq.has_coll_field = cmd_find(ctx, "collation", &hq.coll_field);
    if (!query_resolve_collation(&hq, c, err))
        goto cleanup;
    pipeline_set_collation(p, hq.coll);
    if (c && !query_geonear_key(c, pipeline_leading_geonear(p), err))
        goto cleanup;
    collection_plan_t plan = {0};
    if (sessions) {
        session_foreach(query_session_doc, &docs);
    } else if (current_ops) {
        bson_t all = BSON_INITIALIZER;
        bson_iter_t op;
        op_append_current(&all, idle_conns, all_users ? NULL : ctx->client);
        if (bson_iter_init(&op, &all))
            while (bson_iter_next(&op)) {
                bson_t d;
                if (cmd_iter_doc(&op, &d))
                    doclist_push(&docs, bson_copy(&d));
            }
        bson_destroy(&all);
    } else if (coll) {
        const bson_t *lead = pipeline_leading_match(p);
        bson_t empty = BSON_INITIALIZER, near;
        geonear_spec_t *g = pipeline_leading_geonear(p);
        if (g && c && !collection_is_view(c)) { /* read on the 2dsphere index */
            pipeline_geonear_source_filter(g, &near);
            m = matcher_new_near(&near, err);
            bson_destroy(&near);
        } else {
            m = matcher_new(lead ? lead : &empty, err);
        }
        if (!m)
            goto cleanup;
        if (has_let)
            matcher_set_let(m, &let);
        query_apply_collation(&hq, m, NULL);
        if (!query_run(ctx, c, coll, &hq, m, NULL, &recs, &plan, err) ||
            matcher_take_error(m, err))
            goto cleanup;
        /* the leading $match runs again in the pipeline: same text index */
        fts_query_t *text = pipeline_text(p);
        if (text && matcher_text(m) && fts_query_spec(matcher_text(m)) &&
            !fts_query_bind(text, fts_query_spec(matcher_text(m)), err))
            goto cleanup;
    }
    for (size_t i = 0; i < recs.len; i++) {
        if (!fiber_check(err))
            goto cleanup;
        bson_t doc;
        record_view(recs.items[i], &doc);
        doclist_push(&docs, bson_copy(&doc));
    }
    recvec_destroy(&recs);
    if (explain) {
        ok = explain_aggregate(ctx, coll, c, p, &stages, &plan, verbosity, &docs, err);
        goto cleanup;
    }
    if (!pipeline_run(p, &docs, err))
        goto cleanup;
    char ns[512];
    if (out) {
        const char *db = out->db[0] ? out->db : ctx->db;
        if (!memory_check(out->is_merge ? "$merge" : "$out", err))
            goto cleanup;
        collection_t *target = catalog_get_or_create(server.catalog, db, out->coll, err);
        if (!target)
            goto cleanup;
        if (collection_is_view(target)) {
            dberr_set(err, 166, "Namespace %s.%s is a view, not a collection", db, out->coll);
            goto cleanup;
        }
        if (!out->is_merge && collection_is_capped(target)) { /* as mongod 7 */
            dberr_set(err, 17152, "namespace '%s.%s' is capped so it can't be used for $out", db,
                      out->coll);
            goto cleanup;
        }
        if (!(out->is_merge ? query_write_merge(target, db, out, &docs, err)
                            : query_write_out(target, db, out->coll, &docs, err)))
            goto cleanup;
        doclist_destroy(&docs);
        doclist_init(&docs);
    }
    for (size_t i = 0; i < docs.len; i++) {
        record_t *r = record_new(docs.docs[i]);
        recvec_push_ref(&recs, r);
        record_unref(r);
    }
    if (coll)
        snprintf(ns, sizeof ns, "%s.%s", ctx->db, coll);
    else
        snprintf(ns, sizeof ns, "%s.$cmd.aggregate", ctx->db);
    ok = cmd_reply_cursor(ctx, ns, &recs, NULL, NULL, batch_size, false, err);
cleanup:
    pipeline_destroy(p);
    matcher_destroy(m);
    recvec_destroy(&recs);
    doclist_destroy(&docs);
    bson_destroy(&rest);
    collation_destroy(hq.coll);
    if (snap) {
        ctx->view->snapshot = 0;
        mvcc_snapshot_close(snap);
    }
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
                return dberr_set(err, DBERR_TYPE_MISMATCH,
                                 "BSON field 'explain.verbosity' is the wrong type '%s', "
                                 "expected type 'string'",
                                 shellfmt_type_name(bson_iter_type(&v)));
            verbosity = bson_iter_utf8(&v, NULL);
        }
        if (strcmp(verbosity, "queryPlanner") && strcmp(verbosity, "executionStats") &&
            strcmp(verbosity, "allPlansExecution"))
            return dberr_set(err, DBERR_BAD_VALUE,
                             "Enumeration value '%s' for field 'explain.verbosity' is not a "
                             "valid value.",
                             verbosity);
        return query_aggregate(&sub, verbosity, err);
    }
    if (!cmd_collection_name(&sub, &coll, err))
        return false;
    if (strcmp(sub.name, "find") == 0) {
        if (!query_parse_find(&sub, &q, err))
            return false;
    } else if (strcmp(sub.name, "count") == 0 || strcmp(sub.name, "distinct") == 0) {
        bool present;
        memset(&q, 0, sizeof q);
        if (!cmd_opt_doc(&sub, "query", &q.filter, &present, err))
            return false;
        if (!present)
            bson_init(&q.filter);
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
        explain_append_plan(&qp, &plan, c != NULL);
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
