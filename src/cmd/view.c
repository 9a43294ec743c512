/* view: merges a transaction's write set into query results, routes
 * changes into the write set, and checks document locks. */
#include "cmd/view.h"

#include <stdio.h>
#include <string.h>

#include "cmd/cmd-private.h"
#include "doc/pipeline.h"
#include "doc/sortspec.h"
#include "store/catalog.h"
#include "store/index.h"
#include "txn/lockmgr.h"
#include "util/fiber.h"

void view_init(view_t *v, const char *db, txn_t *txn)
{
    v->txn = txn;
    v->db = db;
    buf_init_fixed(&v->blocked_key, v->blocked_key_room, sizeof v->blocked_key_room);
    v->blocked_by = NULL;
    v->bypass_validation = false;
    v->depth = 0;
    v->snapshot = 0;
    v->keys_examined = v->docs_examined = v->nreturned = 0;
    v->source_collscans = 0;
    v->plan_stage[0] = '\0';
    v->plan_key_len = 0;
}

void view_destroy(view_t *v)
{
    buf_destroy(&v->blocked_key);
}

static bool view_doc_id(const bson_t *doc, bson_value_t *id)
{
    bson_iter_t it;
    if (!bson_iter_init_find(&it, doc, "_id"))
        return false;
    *id = *bson_iter_value(&it);
    return true;
}

/* Overlay state while merging. */
typedef struct view_merge {
    const collection_query_opts_t *o;
    recvec_t *out;
} view_merge_t;

static void view_add_change(txn_change_t *ch, void *ctx)
{
    view_merge_t *m = ctx;
    if (!ch->doc)
        return;
    bson_t doc;
    record_view(ch->doc, &doc);
    if (matcher_matches(m->o->matcher, &doc, NULL))
        recvec_push_ref(m->out, ch->doc);
}

static int view_sort_cmp(const void *a, const void *b, void *ctx)
{
    bson_t x, y;
    record_view(*(record_t *const *)a, &x);
    record_view(*(record_t *const *)b, &y);
    return sortspec_compare(ctx, &x, &y);
}

/* Sorts the records after `first` (within the sort's memory cap), then
 * applies skip and limit. */
static bool view_finish(recvec_t *out, size_t first, const collection_query_opts_t *o,
                        dberr_t *err)
{
    size_t n = out->len - first;
    record_t **items = n ? out->items + first : NULL; /* items may be NULL when empty */
    if (o->sort && n > 1) {
        qsort_r(items, n, sizeof *items, view_sort_cmp, (void *)o->sort);
        if (!collection_sort_memory_check(out, first, o, err))
            return false;
    }
    recvec_skip_limit(out, first, o->skip, o->limit);
    return true;
}

/* Runs a query against a MongoDB view: its pipeline over its source, then
 * the query's filter, sort, skip and limit. */
static bool view_query_view(view_t *v, collection_t *c, const collection_query_opts_t *o,
                            recvec_t *out, collection_plan_t *plan, dberr_t *err)
{
    bson_iter_t it;
    const char *source = NULL;
    if (bson_iter_init_find(&it, collection_options(c), "viewOn") && BSON_ITER_HOLDS_UTF8(&it))
        source = bson_iter_utf8(&it, NULL);
    if (!source)
        return dberr_set(err, DBERR_INTERNAL_ERROR, "view without viewOn");
    if (matcher_text(o->matcher)) /* the view's pipeline comes first */
        return dberr_set(err, 17313, "$match with $text is only allowed as the first pipeline "
                                     "stage");
    if (v->depth >= 20)
        return dberr_set(err, 165, "View depth too deep or view cycle detected. Maximum depth is "
                                   "20");
    bool ok = false;
    pipeline_t *p = NULL;
    doclist_t docs;
    doclist_init(&docs);
    recvec_t base;
    recvec_init(&base);
    matcher_t *all = matcher_new(NULL, err);
    collection_query_opts_t so = {.matcher = all};
    v->depth++;
    collection_t *src = catalog_get(server.catalog, v->db, source);
    ok = view_query(v, src, source, &so, false, &base, plan, err);
    v->depth--;
    if (!ok)
        goto cleanup;
    ok = false;
    for (size_t i = 0; i < base.len; i++) {
        bson_t doc;
        record_view(base.items[i], &doc);
        doclist_push(&docs, bson_copy(&doc));
    }
    if (bson_iter_init_find(&it, collection_options(c), "pipeline")) {
        pipeline_source_t joins;
        view_source(v, &joins);
        if (!(p = pipeline_new(&it, PIPELINE_AGGREGATE, NULL, err)))
            goto cleanup;
        pipeline_set_source(p, &joins);
        pipeline_set_collation(p, collection_collation(c)); /* the view's default */
        if (!pipeline_run(p, &docs, err))
            goto cleanup;
    }
    size_t first = out->len;
    for (size_t i = 0; i < docs.len; i++) {
        if (!matcher_matches(o->matcher, docs.docs[i], NULL))
            continue;
        record_t *r = record_new(docs.docs[i]);
        recvec_push_ref(out, r);
        record_unref(r);
    }
    ok = view_finish(out, first, o, err);
    strcpy(plan->stage, "COLLSCAN");
cleanup:
    matcher_destroy(all);
    pipeline_destroy(p);
    doclist_destroy(&docs);
    recvec_destroy(&base);
    return ok;
}

static bool view_query_run(view_t *v, collection_t *c, const char *coll,
                           const collection_query_opts_t *o, recvec_t *out,
                           collection_plan_t *plan, dberr_t *err);

/* Records what a query did for the slow-operation log: its stage and
 * index (formatted as mongod's planSummary only when the operation is
 * logged: this runs on every query) and the keys and documents examined. */
static void view_note_plan(view_t *v, const collection_plan_t *plan)
{
    v->keys_examined += (int64_t)plan->keys_examined;
    v->docs_examined += (int64_t)plan->docs_examined;
    v->plan_key_len = 0;
    if (!plan->stage[0]) {
        memcpy(v->plan_stage, "EOF", 4);
        return;
    }
    memcpy(v->plan_stage, plan->stage, sizeof v->plan_stage);
    v->plan_stage[sizeof v->plan_stage - 1] = '\0';
    if (plan->index && plan->index->wildcard && plan->wildcard_path[0]) {
        /* as mongod's planSummary: IXSCAN { $_path: 1, a.b: 1 } */
        bson_t kp = BSON_INITIALIZER;
        BSON_APPEND_INT32(&kp, "$_path", 1);
        BSON_APPEND_INT32(&kp, plan->wildcard_path, 1);
        if (kp.len <= sizeof v->plan_key) {
            memcpy(v->plan_key, bson_get_data(&kp), kp.len);
            v->plan_key_len = kp.len;
        }
        bson_destroy(&kp);
    } else if (plan->index && strcmp(plan->stage, "IDHACK") != 0 &&
               plan->index->key.len <= sizeof v->plan_key) {
        memcpy(v->plan_key, bson_get_data(&plan->index->key), plan->index->key.len);
        v->plan_key_len = plan->index->key.len;
    }
}

bool view_query(view_t *v, collection_t *c, const char *coll, const collection_query_opts_t *o,
                bool for_write, recvec_t *out, collection_plan_t *plan, dberr_t *err)
{
    collection_plan_t local;
    if (!plan) {
        memset(&local, 0, sizeof local);
        plan = &local;
    }
    bool ok = view_query_run(v, c, coll, o, out, plan, err);
    if (v->depth == 0) /* a MongoDB view's source query is counted once, here */
        view_note_plan(v, plan);
    return ok;
}

static bool view_query_run(view_t *v, collection_t *c, const char *coll,
                           const collection_query_opts_t *o, recvec_t *out,
                           collection_plan_t *plan, dberr_t *err)
{
    if (c && collection_is_view(c))
        return view_query_view(v, c, o, out, plan, err);
    if (!v->txn) {
        if (!c)
            return true;
        if (!v->snapshot)
            return collection_query(c, o, out, plan, err);
        collection_query_opts_t at = *o;
        at.snapshot = v->snapshot;
        return collection_query(c, &at, out, plan, err);
    }
    /* everything that matches, from the store and from the write set,
     * then sort, skip and limit over the union */
    collection_query_opts_t all = *o;
    all.skip = 0;
    all.limit = 0;
    all.sort = NULL;
    all.snapshot = txn_snapshot(v->txn);
    bool real = c && txn_find_scratch(v->txn, v->db, coll) != c;
    txn_note_read(v->txn, v->db, coll, real ? collection_id(c) : 0, (matcher_t *)o->matcher);
    recvec_t base;
    recvec_init(&base);
    if (c && !collection_query(c, &all, &base, plan, err)) {
        recvec_destroy(&base);
        return false;
    }
    size_t first = out->len;
    for (size_t i = 0; i < base.len; i++) {
        bson_t doc;
        bson_value_t id;
        record_view(base.items[i], &doc);
        if (view_doc_id(&doc, &id) && txn_lookup(v->txn, v->db, coll, &id))
            continue; /* the write set has this document's version */
        recvec_push_ref(out, base.items[i]);
    }
    recvec_destroy(&base);
    view_merge_t m = {o, out};
    txn_foreach(v->txn, v->db, coll, view_add_change, &m);
    return view_finish(out, first, o, err);
}

/* The value `v` of a filter that is exactly {_id: {$eq: v}} with a
 * scalar v ($lookup's join on _id), so the read can go straight to the
 * _id index; false for any other filter. */
static bool view_id_equality(const bson_t *filter, bson_value_t *v)
{
    bson_iter_t it, op;
    if (bson_count_keys(filter) != 1 || !bson_iter_init_find(&it, filter, "_id") ||
        !BSON_ITER_HOLDS_DOCUMENT(&it) || !bson_iter_recurse(&it, &op) || !bson_iter_next(&op) ||
        strcmp(bson_iter_key(&op), "$eq") != 0)
        return false;
    *v = *bson_iter_value(&op);
    bool scalar = v->value_type != BSON_TYPE_ARRAY && v->value_type != BSON_TYPE_REGEX &&
                  v->value_type != BSON_TYPE_DOCUMENT && v->value_type != BSON_TYPE_NULL &&
                  v->value_type != BSON_TYPE_UNDEFINED;
    return scalar && !bson_iter_next(&op);
}

/* The _id fast path of view_source_read: outside a transaction, on a
 * collection (not a view), when the version found is the one the read's
 * snapshot sees. False when it does not apply (the caller reads the
 * general way). */
static bool view_source_by_id(view_t *v, collection_t *c, const bson_t *filter,
                              const collation_t *collation, doclist_t *out)
{
    bson_value_t id;
    if (v->txn || !c || collection_is_view(c) || !view_id_equality(filter, &id))
        return false;
    if (collation && (id.value_type == BSON_TYPE_UTF8 || id.value_type == BSON_TYPE_SYMBOL))
        return false; /* "a" may equal "A": the general read compares by the collation */
    record_t *r = collection_find_id(c, &id);
    if (v->snapshot && (r ? record_seq(r) > v->snapshot : collection_changed_since(c, &id, v->snapshot)))
        return false; /* changed since the snapshot: its older version is in the window */
    v->keys_examined++;
    if (r) {
        bson_t doc;
        record_view(r, &doc);
        v->docs_examined++;
        doclist_push(out, bson_copy(&doc));
    }
    return true;
}

/* pipeline_source_t.read over a view_t: the matching documents of `coll`,
 * copied (the records may change once the read yields). */
static bool view_source_read(void *ctx, const char *coll, const bson_t *filter,
                             const bson_t *vars, const collation_t *collation, doclist_t *out,
                             dberr_t *err)
{
    view_t *v = ctx;
    if (v->depth >= 20)
        return dberr_set(err, 165, "View depth too deep or view cycle detected. Maximum depth is "
                                   "20");
    collection_t *c = catalog_get(server.catalog, v->db, coll);
    if (view_source_by_id(v, c, filter, collation, out))
        return true;
    matcher_t *m = matcher_new(filter, err);
    if (!m)
        return false;
    if (collation) /* the index choice follows the matcher's collation */
        matcher_set_collation(m, (collation_t *)collation);
    if (vars)
        matcher_set_vars(m, vars);
    if (matcher_take_error(m, err)) {
        matcher_destroy(m);
        return false;
    }
    collection_query_opts_t o = {.matcher = m};
    collection_plan_t plan;
    memset(&plan, 0, sizeof plan);
    recvec_t recs;
    recvec_init(&recs);
    v->depth++;
    bool ok = view_query_run(v, c, coll, &o, &recs, &plan, err) && !matcher_take_error(m, err);
    v->depth--;
    v->keys_examined += (int64_t)plan.keys_examined;
    v->docs_examined += (int64_t)plan.docs_examined;
    if (c && !strcmp(plan.stage, "COLLSCAN"))
        v->source_collscans++;
    for (size_t i = 0; ok && i < recs.len; i++) {
        bson_t doc;
        if ((i & 1023) == 1023 && !(ok = fiber_check(err)))
            break;
        record_view(recs.items[i], &doc);
        doclist_push(out, bson_copy(&doc));
    }
    recvec_destroy(&recs);
    matcher_destroy(m);
    return ok;
}

void view_source(view_t *v, pipeline_source_t *src)
{
    src->read = view_source_read;
    src->ctx = v;
}

bool view_lock(view_t *v, collection_t *c, const bson_t *doc, dberr_t *err)
{
    bson_value_t id;
    const char *coll = collection_name(c);
    if (v->txn && collection_is_capped(c)) /* as mongod 7: capped writes are not transactional */
        return dberr_set(err, DBERR_OPERATION_NOT_SUPPORTED_IN_TRANSACTION,
                         "Collection '%s' is a capped collection. Writes in transactions are "
                         "not allowed on capped collections.",
                         collection_ns(c));
    if (!v->txn && !lockmgr_any()) /* no transaction holds any document */
        return true;
    if (!view_doc_id(doc, &id))
        return true;
    lockmgr_key(v->db, coll, &id, &v->blocked_key);
    txn_t *holder = NULL;
    if (!lockmgr_acquire(&v->blocked_key, v->txn, &holder)) {
        v->blocked_by = holder;
        return dberr_set(err, VIEW_BLOCKED_CODE, "document is locked by a transaction");
    }
    /* first committer wins: the document must be as the snapshot saw it
     * (a collection the transaction creates is new to everyone) */
    if (v->txn && txn_find_scratch(v->txn, v->db, coll) != c &&
        !txn_lookup(v->txn, v->db, coll, &id) && !txn_fault_skip_write_check() &&
        collection_changed_since(c, &id, txn_snapshot(v->txn))) {
        txn_count_write_conflict();
        dberr_set(err, DBERR_WRITE_CONFLICT,
                  "Caused by :: Write conflict during plan execution and yielding is disabled. :: "
                  "Please retry your operation or multi-document transaction. (the document was "
                  "changed by a commit after this transaction's snapshot)");
        err->labels |= DBERR_LABEL_TRANSIENT_TXN;
        return false;
    }
    return true;
}

bool view_insert(view_t *v, collection_t *c, const bson_t *doc, dberr_t *err)
{
    if (!v->bypass_validation && !collection_validate(c, doc, NULL, err))
        return false;
    if (!v->txn)
        return collection_insert(c, doc, err);
    bson_value_t id;
    if (!view_doc_id(doc, &id))
        return dberr_set(err, DBERR_INTERNAL_ERROR, "document to insert has no _id");
    txn_change_t *ch = txn_lookup(v->txn, v->db, collection_name(c), &id);
    record_t *cur = collection_find_id(c, &id);
    if ((ch && ch->doc) || (!ch && cur))
        return index_dup_error(collection_index(c, 0), collection_ns(c), doc, err);
    record_t *r = record_new(doc);
    txn_put(v->txn, v->db, collection_name(c), &id, r, cur != NULL);
    record_unref(r);
    return true;
}

bool view_replace(view_t *v, collection_t *c, record_t *old, const bson_t *doc, dberr_t *err)
{
    if (!v->bypass_validation) {
        bson_t old_doc;
        record_view(old, &old_doc);
        if (!collection_validate(c, doc, &old_doc, err))
            return false;
    }
    if (!v->txn)
        return collection_replace(c, old, doc, err);
    bson_value_t id;
    if (!view_doc_id(doc, &id))
        return dberr_set(err, DBERR_INTERNAL_ERROR, "document has no _id");
    record_t *r = record_new(doc);
    txn_put(v->txn, v->db, collection_name(c), &id, r, collection_find_id(c, &id) != NULL);
    record_unref(r);
    return true;
}

void view_remove(view_t *v, collection_t *c, record_t *old)
{
    if (!v->txn) {
        collection_remove(c, old);
        return;
    }
    bson_t doc;
    bson_value_t id;
    record_view(old, &doc);
    if (view_doc_id(&doc, &id))
        txn_put(v->txn, v->db, collection_name(c), &id, NULL, collection_find_id(c, &id) != NULL);
}
