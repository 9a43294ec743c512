/* query: the read commands — find (and its cursor replies), getMore,
 * killCursors, count, distinct, aggregate and explain. */
#include "cmd/cmd-private.h"

#include <string.h>

#include "doc/compare.h"
#include "doc/matcher.h"
#include "doc/path.h"
#include "doc/pipeline.h"
#include "doc/projection.h"
#include "doc/sortspec.h"
#include "store/catalog.h"
#include "store/cursor.h"

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
    cursor_t *c = cursors_open(server.cursors, ns, server_now_ms());
    c->recs = *recs;
    recvec_init(recs);
    c->projection = projection;
    c->matcher = matcher;
    c->conn_id = ctx->client->id;
    bson_t cur;
    bson_append_document_begin(ctx->reply, "cursor", -1, &cur);
    bool ok = query_fill_batch(c, &cur, "firstBatch",
                               batch_size < 0 ? QUERY_DEFAULT_BATCH : batch_size, err);
    bool done = !ok || single_batch || c->pos >= c->recs.len;
    BSON_APPEND_INT64(&cur, "id", done ? 0 : c->id);
    BSON_APPEND_UTF8(&cur, "ns", ns);
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
                         cmd_type_name(bson_iter_type(&ctx->arg)));
    int64_t id = bson_iter_as_int64(&ctx->arg);
    bson_iter_t it;
    if (!cmd_find(ctx, "collection", &it) || !BSON_ITER_HOLDS_UTF8(&it))
        return dberr_set(err, DBERR_FAILED_TO_PARSE,
                         "BSON field 'getMore.collection' is missing but a required field");
    int64_t batch_size = 0;
    if (!cmd_opt_int64(ctx, "batchSize", &batch_size, err))
        return false;
    if (batch_size < 0)
        return dberr_set(err, DBERR_BAD_VALUE, "Batch size for getMore must be non-negative, "
                                               "but received: %lld",
                         (long long)batch_size);
    cursor_t *c = cursors_get(server.cursors, id);
    if (!c)
        return dberr_set(err, DBERR_CURSOR_NOT_FOUND, "cursor id %lld not found", (long long)id);
    char ns[512];
    snprintf(ns, sizeof ns, "%s.%s", ctx->db, bson_iter_utf8(&it, NULL));
    if (strcmp(ns, c->ns) != 0)
        return dberr_set(err, DBERR_UNAUTHORIZED,
                         "Requested getMore on namespace '%s', but cursor belongs to a different "
                         "namespace %s",
                         ns, c->ns);
    c->last_used_ms = server_now_ms();
    bson_t cur;
    bson_append_document_begin(ctx->reply, "cursor", -1, &cur);
    bool ok = query_fill_batch(c, &cur, "nextBatch", batch_size, err);
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
    bson_t filter, sort, projection, hint;
    bool has_sort, has_projection, has_hint;
    const char *hint_name;
    int64_t skip, limit, batch_size;
    bool single_batch;
} query_find_t;

static bool query_parse_find(cmd_ctx_t *ctx, query_find_t *q, dberr_t *err)
{
    bool present;
    memset(q, 0, sizeof *q);
    q->batch_size = -1;
    bson_init(&q->filter);
    if (!cmd_opt_doc(ctx, "filter", &q->filter, &present, err) ||
        !cmd_opt_doc(ctx, "sort", &q->sort, &q->has_sort, err) ||
        !cmd_opt_doc(ctx, "projection", &q->projection, &q->has_projection, err))
        return false;
    if (!present)
        bson_init(&q->filter);
    bson_iter_t it;
    if (cmd_find(ctx, "hint", &it)) {
        if (BSON_ITER_HOLDS_UTF8(&it))
            q->hint_name = bson_iter_utf8(&it, NULL);
        else if (cmd_iter_doc(&it, &q->hint))
            q->has_hint = true;
        else
            return dberr_set(err, DBERR_FAILED_TO_PARSE, "hint must be either a string or nested "
                                                         "object");
    }
    if (!cmd_opt_int64(ctx, "skip", &q->skip, err) ||
        !cmd_opt_int64(ctx, "limit", &q->limit, err) ||
        !cmd_opt_int64(ctx, "batchSize", &q->batch_size, err) ||
        !cmd_opt_bool(ctx, "singleBatch", &q->single_batch, err))
        return false;
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
    if (cmd_find(ctx, "tailable", &it) && bson_iter_as_bool(&it))
        return dberr_set(err, DBERR_BAD_VALUE, "atomdb does not support tailable cursors");
    if (cmd_find(ctx, "collation", &it))
        return dberr_set(err, DBERR_NOT_IMPLEMENTED, "atomdb does not support collation yet");
    return true;
}

/* Runs a parsed find over `c` (may be NULL: no collection). */
static bool query_run(collection_t *c, const query_find_t *q, matcher_t *m, sortspec_t *s,
                      recvec_t *out, collection_plan_t *plan, dberr_t *err)
{
    if (!c)
        return true;
    collection_query_opts_t o = {0};
    o.matcher = m;
    o.sort = s;
    o.hint = q->has_hint ? &q->hint : NULL;
    o.hint_name = q->hint_name;
    o.skip = q->skip;
    o.limit = q->limit;
    return collection_query(c, &o, out, plan, err);
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
    m = matcher_new(&q.filter, err);
    if (!m)
        goto cleanup;
    if (q.has_sort && !(s = sortspec_new(&q.sort, err)))
        goto cleanup;
    if (q.has_projection && !bson_empty(&q.projection) &&
        !(p = projection_new(&q.projection, err)))
        goto cleanup;
    collection_t *c = catalog_get(server.catalog, ctx->db, coll);
    if (!query_run(c, &q, m, s, &recs, NULL, err))
        goto cleanup;
    char ns[512];
    snprintf(ns, sizeof ns, "%s.%s", ctx->db, coll);
    ok = cmd_reply_cursor(ctx, ns, &recs, p, p && projection_is_positional(p) ? m : NULL,
                          q.batch_size, q.single_batch || (q.limit > 0 && q.batch_size < 0 &&
                                                           q.limit <= QUERY_DEFAULT_BATCH),
                          err);
    if (p && projection_is_positional(p))
        m = NULL; /* the cursor owns it now */
    p = NULL;
cleanup:
    matcher_destroy(m);
    sortspec_destroy(s);
    projection_destroy(p);
    recvec_destroy(&recs);
    return ok;
}

bool cmd_count(cmd_ctx_t *ctx, dberr_t *err)
{
    const char *coll;
    if (!cmd_collection_name(ctx, &coll, err))
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
    if (c && bson_empty(&filter) && !q.has_hint && !q.hint_name) {
        n = (int64_t)collection_count(c) - q.skip;
        if (n < 0)
            n = 0;
        if (q.limit > 0 && n > q.limit)
            n = q.limit;
    } else if (c) {
        matcher_t *m = matcher_new(&filter, err);
        if (!m)
            return false;
        recvec_t recs;
        recvec_init(&recs);
        bool ok = query_run(c, &q, m, NULL, &recs, NULL, err);
        n = (int64_t)recs.len;
        recvec_destroy(&recs);
        matcher_destroy(m);
        if (!ok)
            return false;
    }
    BSON_APPEND_INT32(ctx->reply, "n", (int32_t)n);
    return true;
}

/* distinct's accumulator: values seen, kept unique. */
typedef struct query_distinct {
    bson_value_t *vals;
    size_t len, cap;
} query_distinct_t;

static bool query_distinct_add(const bson_value_t *v, void *ctx)
{
    query_distinct_t *d = ctx;
    if (v->value_type == BSON_TYPE_ARRAY)
        return true; /* distinct reports an array's elements, visited next */
    for (size_t i = 0; i < d->len; i++)
        if (d->vals[i].value_type == v->value_type && compare_equal(&d->vals[i], v))
            return true;
    if (d->len == d->cap) {
        d->cap = d->cap ? d->cap * 2 : 16;
        d->vals = bson_realloc(d->vals, d->cap * sizeof *d->vals);
    }
    bson_value_copy(v, &d->vals[d->len++]);
    return true;
}

static int query_value_cmp(const void *a, const void *b)
{
    return compare_values(a, b);
}

bool cmd_distinct(cmd_ctx_t *ctx, dberr_t *err)
{
    const char *coll;
    if (!cmd_collection_name(ctx, &coll, err))
        return false;
    bson_iter_t it;
    if (!cmd_find(ctx, "key", &it))
        return dberr_set(err, DBERR_FAILED_TO_PARSE,
                         "BSON field 'distinct.key' is missing but a required field");
    if (!BSON_ITER_HOLDS_UTF8(&it))
        return dberr_set(err, DBERR_TYPE_MISMATCH,
                         "BSON field 'distinct.key' is the wrong type '%s', expected type "
                         "'string'",
                         cmd_type_name(bson_iter_type(&it)));
    const char *key = bson_iter_utf8(&it, NULL);
    bson_t filter;
    bool present;
    if (!cmd_opt_doc(ctx, "query", &filter, &present, err))
        return false;
    if (!present)
        bson_init(&filter);
    if (cmd_find(ctx, "collation", &it))
        return dberr_set(err, DBERR_NOT_IMPLEMENTED, "atomdb does not support collation yet");
    matcher_t *m = matcher_new(&filter, err);
    if (!m)
        return false;
    query_distinct_t d = {0};
    recvec_t recs;
    recvec_init(&recs);
    collection_t *c = catalog_get(server.catalog, ctx->db, coll);
    query_find_t q = {0};
    bool ok = query_run(c, &q, m, NULL, &recs, NULL, err);
    for (size_t i = 0; ok && i < recs.len; i++) {
        bson_t doc;
        record_view(recs.items[i], &doc);
        path_visit(&doc, key, query_distinct_add, &d);
    }
    if (ok) {
        qsort(d.vals, d.len, sizeof *d.vals, query_value_cmp);
        bson_t arr;
        char k[16];
        bson_append_array_begin(ctx->reply, "values", -1, &arr);
        for (size_t i = 0; i < d.len; i++)
            bson_append_value(&arr, cmd_index_key((uint32_t)i, k, sizeof k), -1, &d.vals[i]);
        bson_append_array_end(ctx->reply, &arr);
    }
    for (size_t i = 0; i < d.len; i++)
        bson_value_destroy(&d.vals[i]);
    bson_free(d.vals);
    recvec_destroy(&recs);
    matcher_destroy(m);
    return ok;
}

bool cmd_aggregate(cmd_ctx_t *ctx, dberr_t *err)
{
    const char *coll = NULL;
    bson_iter_t it, stages;
    pipeline_t *p = NULL;
    matcher_t *m = NULL;
    recvec_t recs;
    doclist_t docs;
    bool ok = false;
    recvec_init(&recs);
    doclist_init(&docs);
    if (BSON_ITER_HOLDS_UTF8(&ctx->arg))
        coll = bson_iter_utf8(&ctx->arg, NULL);
    else
        return dberr_set(err, DBERR_NOT_IMPLEMENTED,
                         "atomdb supports aggregate on a collection only, not {aggregate: 1}");
    if (!cmd_find(ctx, "pipeline", &it) || !BSON_ITER_HOLDS_ARRAY(&it))
        return dberr_set(err, DBERR_TYPE_MISMATCH,
                         "'pipeline' option must be specified as an array");
    bool explain = cmd_find(ctx, "explain", &stages) && bson_iter_as_bool(&stages);
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
    if (cmd_find(ctx, "collation", &cur))
        return dberr_set(err, DBERR_NOT_IMPLEMENTED, "atomdb does not support collation yet");
    bson_t let;
    bool has_let;
    if (!cmd_opt_doc(ctx, "let", &let, &has_let, err))
        return false;
    p = pipeline_new(&it, PIPELINE_AGGREGATE, has_let ? &let : NULL, err);
    if (!p)
        goto cleanup;
    const bson_t *lead = pipeline_leading_match(p);
    bson_t empty = BSON_INITIALIZER;
    m = matcher_new(lead ? lead : &empty, err);
    if (!m)
        goto cleanup;
    collection_t *c = catalog_get(server.catalog, ctx->db, coll);
    query_find_t q = {0};
    collection_plan_t plan;
    if (!query_run(c, &q, m, NULL, &recs, &plan, err))
        goto cleanup;
    if (explain) {
        bson_t qp, wp;
        bson_append_document_begin(ctx->reply, "queryPlanner", -1, &qp);
        BSON_APPEND_UTF8(&qp, "namespace", coll);
        bson_append_document_begin(&qp, "winningPlan", -1, &wp);
        BSON_APPEND_UTF8(&wp, "stage", c ? plan.stage : "EOF");
        bson_append_document_end(&qp, &wp);
        bson_append_document_end(ctx->reply, &qp);
        ok = true;
        goto cleanup;
    }
    for (size_t i = 0; i < recs.len; i++) {
        bson_t doc;
        record_view(recs.items[i], &doc);
        doclist_push(&docs, bson_copy(&doc));
    }
    recvec_destroy(&recs);
    if (!pipeline_run(p, &docs, err))
        goto cleanup;
    for (size_t i = 0; i < docs.len; i++) {
        record_t *r = record_new(docs.docs[i]);
        recvec_push_ref(&recs, r);
        record_unref(r);
    }
    char ns[512];
    snprintf(ns, sizeof ns, "%s.%s", ctx->db, coll);
    ok = cmd_reply_cursor(ctx, ns, &recs, NULL, NULL, batch_size, false, err);
cleanup:
    pipeline_destroy(p);
    matcher_destroy(m);
    recvec_destroy(&recs);
    doclist_destroy(&docs);
    return ok;
}

/* Appends an explain's winningPlan for `plan`. */
static void query_append_plan(bson_t *qp, const collection_plan_t *plan, bool exists)
{
    bson_t wp, in;
    bson_append_document_begin(qp, "winningPlan", -1, &wp);
    if (!exists) {
        BSON_APPEND_UTF8(&wp, "stage", "EOF");
    } else if (strcmp(plan->stage, "COLLSCAN") == 0) {
        BSON_APPEND_UTF8(&wp, "stage", "COLLSCAN");
        BSON_APPEND_UTF8(&wp, "direction", "forward");
    } else if (strcmp(plan->stage, "IDHACK") == 0) {
        BSON_APPEND_UTF8(&wp, "stage", "IDHACK");
    } else {
        BSON_APPEND_UTF8(&wp, "stage", "FETCH");
        bson_append_document_begin(&wp, "inputStage", -1, &in);
        BSON_APPEND_UTF8(&in, "stage", "IXSCAN");
        BSON_APPEND_DOCUMENT(&in, "keyPattern", &plan->index->key);
        BSON_APPEND_UTF8(&in, "indexName", plan->index->name);
        BSON_APPEND_BOOL(&in, "isMultiKey", plan->index->multikey);
        BSON_APPEND_BOOL(&in, "isUnique", plan->index->unique);
        BSON_APPEND_UTF8(&in, "direction", plan->direction < 0 ? "backward" : "forward");
        bson_append_document_end(&wp, &in);
    }
    bson_append_document_end(qp, &wp);
}

bool cmd_explain(cmd_ctx_t *ctx, dberr_t *err)
{
    bson_t inner;
    if (!cmd_iter_doc(&ctx->arg, &inner) || !BSON_ITER_HOLDS_DOCUMENT(&ctx->arg))
        return dberr_set(err, DBERR_TYPE_MISMATCH, "explain command requires a nested object");
    cmd_ctx_t sub = *ctx;
    sub.cmd = &inner;
    if (!bson_iter_init(&sub.arg, &inner) || !bson_iter_next(&sub.arg))
        return dberr_set(err, DBERR_FAILED_TO_PARSE, "explain command requires a nested object");
    sub.name = bson_iter_key(&sub.arg);
    const char *coll;
    query_find_t q;
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
    } else {
        return dberr_set(err, DBERR_NOT_IMPLEMENTED,
                         "atomdb explains find, count and distinct; not '%s' yet", sub.name);
    }
    matcher_t *m = matcher_new(&q.filter, err);
    if (!m)
        return false;
    sortspec_t *s = NULL;
    if (q.has_sort && !(s = sortspec_new(&q.sort, err))) {
        matcher_destroy(m);
        return false;
    }
    collection_t *c = catalog_get(server.catalog, ctx->db, coll);
    recvec_t recs;
    recvec_init(&recs);
    collection_plan_t plan = {0};
    bool ok = query_run(c, &q, m, s, &recs, &plan, err);
    if (ok) {
        char ns[512];
        snprintf(ns, sizeof ns, "%s.%s", ctx->db, coll);
        bson_t qp, es;
        bson_append_document_begin(ctx->reply, "queryPlanner", -1, &qp);
        BSON_APPEND_UTF8(&qp, "namespace", ns);
        BSON_APPEND_DOCUMENT(&qp, "parsedQuery", &q.filter);
        query_append_plan(&qp, &plan, c != NULL);
        bson_t rejected = BSON_INITIALIZER;
        BSON_APPEND_ARRAY(&qp, "rejectedPlans", &rejected);
        bson_destroy(&rejected);
        bson_append_document_end(ctx->reply, &qp);
        bson_append_document_begin(ctx->reply, "executionStats", -1, &es);
        BSON_APPEND_INT64(&es, "nReturned", (int64_t)recs.len);
        BSON_APPEND_INT64(&es, "totalKeysExamined", (int64_t)plan.keys_examined);
        BSON_APPEND_INT64(&es, "totalDocsExamined", (int64_t)plan.docs_examined);
        bson_append_document_end(ctx->reply, &es);
        bson_t si;
        bson_append_document_begin(ctx->reply, "serverInfo", -1, &si);
        BSON_APPEND_UTF8(&si, "version", SERVER_MONGODB_VERSION);
        BSON_APPEND_UTF8(&si, "atomdbVersion", ATOMDB_VERSION);
        bson_append_document_end(ctx->reply, &si);
    }
    recvec_destroy(&recs);
    matcher_destroy(m);
    sortspec_destroy(s);
    return ok;
}
