/* aggregate: the aggregate command — a pipeline over a collection's
 * documents (read through the find machinery of query.c, on one snapshot
 * when a stage reads other collections), $listLocalSessions and
 * $currentOp as inputs, and the $out / $merge writes, in slices. */
#include "cmd/query-private.h"
#include "cmd/memory.h"
#include "cmd/op.h"
#include "cmd/access.h"
#include "cmd/changestream.h"
#include "cmd/view.h"

#include <string.h>

#include "doc/fts.h"
#include "doc/projection.h"
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

/* $listLocalSessions: one document per live session. */
static void aggregate_session_doc(const session_t *s, void *ctx)
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
static void aggregate_out_tmp_name(char *out, size_t size)
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
static bool aggregate_write_out(collection_t *target, const char *db, const char *coll,
                            doclist_t *docs, dberr_t *err)
{
    char tmp_name[64];
    aggregate_out_tmp_name(tmp_name, sizeof tmp_name);
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
static bool aggregate_merge_find(collection_t *target, const pipeline_output_t *o, const bson_t *doc,
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
static bool aggregate_write_merge(collection_t *target, const char *db, const pipeline_output_t *o,
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
        bool ok = aggregate_merge_find(target, o, &doc, &found, err);
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
static bool aggregate_current_op_args(const cmd_ctx_t *ctx, const bson_iter_t *stage, bool *all_users,
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
    return aggregate_run(ctx, explain ? "queryPlanner" : NULL, err);
}

/* aggregate; `verbosity` non-NULL: explain it at that verbosity. */
bool aggregate_run(cmd_ctx_t *ctx, const char *verbosity, dberr_t *err)
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
        if (ops && !aggregate_current_op_args(ctx, &first, &all_users, &idle_conns, err))
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
        session_foreach(aggregate_session_doc, &docs);
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
        if (!(out->is_merge ? aggregate_write_merge(target, db, out, &docs, err)
                            : aggregate_write_out(target, db, out->coll, &docs, err)))
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
