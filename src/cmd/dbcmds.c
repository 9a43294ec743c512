/* dbcmds: database and collection management — listDatabases,
 * listCollections, create, drop, dropDatabase, dbStats, collStats and the
 * index commands createIndexes, listIndexes and dropIndexes. */
#include "cmd/cmd-private.h"
#include "cmd/access.h"

#include <stdlib.h>
#include <string.h>

#include "doc/collation.h"
#include "doc/jsonschema.h"
#include "doc/matcher.h"
#include "doc/pipeline.h"
#include "cmd/view.h"
#include "cmd/oplog.h"
#include "txn/txn.h"
#include "store/capped.h"
#include "store/catalog.h"
#include "store/cursor.h"
#include "store/index.h"
#include "util/bsonview.h"
#include "util/log.h"
#include "util/vec.h"

/* ---- listDatabases ---- */

typedef struct dbcmds_dbsize {
    int64_t bytes;
    int64_t colls;
} dbcmds_dbsize_t;

static void dbcmds_add_size(collection_t *c, void *ctx)
{
    dbcmds_dbsize_t *s = ctx;
    s->bytes += (int64_t)collection_data_size(c);
    s->colls++;
}

typedef struct dbcmds_listdb {
    bson_t arr;
    uint32_t n;
    int64_t total;
    bool name_only;
    matcher_t *filter;
} dbcmds_listdb_t;

/* The databases every replica-set member has (users and server data,
 * sessions, the oplog): listed even before anything is stored in them. */
static bool dbcmds_builtin_db(const char *db)
{
    return !strcmp(db, "admin") || !strcmp(db, "config") || !strcmp(db, "local");
}

static void dbcmds_list_one_db(const char *db, void *ctx)
{
    dbcmds_listdb_t *l = ctx;
    dbcmds_dbsize_t size = {0};
    catalog_foreach_coll(server.catalog, db, dbcmds_add_size, &size);
    bson_t entry = BSON_INITIALIZER;
    BSON_APPEND_UTF8(&entry, "name", db);
    if (!l->name_only) {
        BSON_APPEND_INT64(&entry, "sizeOnDisk", size.bytes);
        BSON_APPEND_BOOL(&entry, "empty", size.bytes == 0 && !dbcmds_builtin_db(db));
    }
    if (!l->filter || matcher_matches(l->filter, &entry, NULL)) {
        char key[16];
        bson_append_document(&l->arr, cmd_index_key(l->n++, key, sizeof key), -1, &entry);
        l->total += size.bytes;
    }
    bson_destroy(&entry);
}

typedef struct dbcmds_names {
    char **v;
    size_t n, cap;
} dbcmds_names_t;

static void dbcmds_collect_name(const char *db, void *ctx)
{
    dbcmds_names_t *names = ctx;
    VEC_RESERVE_ONE(names->v, names->n, names->cap, 16);
    names->v[names->n++] = bson_strdup(db);
}

static int dbcmds_name_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

bool cmd_list_databases(cmd_ctx_t *ctx, dberr_t *err)
{
    dbcmds_listdb_t l = {0};
    bson_t filter;
    bool has_filter;
    if (!cmd_opt_bool(ctx, "nameOnly", &l.name_only, err) ||
        !cmd_opt_doc(ctx, "filter", &filter, &has_filter, err))
        return false;
    if (has_filter && !(l.filter = matcher_new(&filter, err)))
        return false;
    bson_append_array_begin(ctx->reply, "databases", -1, &l.arr);
    dbcmds_names_t names = {0};
    catalog_foreach_db(server.catalog, dbcmds_collect_name, &names);
    static const char *builtin[] = {"admin", "config", "local"};
    for (size_t i = 0; i < 3; i++) {
        bool have = false;
        for (size_t k = 0; k < names.n && !have; k++)
            have = !strcmp(names.v[k], builtin[i]);
        if (!have)
            dbcmds_collect_name(builtin[i], &names);
    }
    qsort(names.v, names.n, sizeof *names.v, dbcmds_name_cmp);
    for (size_t k = 0; k < names.n; k++) {
        if (access_db_visible(ctx, names.v[k]))
            dbcmds_list_one_db(names.v[k], &l);
        bson_free(names.v[k]);
    }
    bson_free(names.v);
    bson_append_array_end(ctx->reply, &l.arr);
    if (!l.name_only) {
        BSON_APPEND_INT64(ctx->reply, "totalSize", l.total);
        BSON_APPEND_INT64(ctx->reply, "totalSizeMb", l.total / (1024 * 1024));
    }
    matcher_destroy(l.filter);
    return true;
}

/* ---- listCollections ---- */

typedef struct dbcmds_listcoll {
    recvec_t recs;
    bool name_only;
    matcher_t *filter;
} dbcmds_listcoll_t;

static void dbcmds_list_one_coll(collection_t *c, void *ctx)
{
    dbcmds_listcoll_t *l = ctx;
    bson_t entry = BSON_INITIALIZER, info;
    BSON_APPEND_UTF8(&entry, "name", collection_name(c));
    BSON_APPEND_UTF8(&entry, "type", collection_is_view(c) ? "view" : "collection");
    if (!l->name_only && collection_is_view(c)) {
        BSON_APPEND_DOCUMENT(&entry, "options", collection_options(c));
        bson_append_document_begin(&entry, "info", -1, &info);
        BSON_APPEND_BOOL(&info, "readOnly", true);
        bson_append_document_end(&entry, &info);
    } else if (!l->name_only) {
        BSON_APPEND_DOCUMENT(&entry, "options", collection_options(c));
        bson_append_document_begin(&entry, "info", -1, &info);
        BSON_APPEND_BOOL(&info, "readOnly", false);
        bson_append_binary(&info, "uuid", -1, BSON_SUBTYPE_UUID, collection_uuid(c), 16);
        bson_append_document_end(&entry, &info);
        cmd_append_id_index(&entry);
    }
    if (!l->filter || matcher_matches(l->filter, &entry, NULL)) {
        record_t *r = record_new(&entry);
        recvec_push_ref(&l->recs, r);
        record_unref(r);
    }
    bson_destroy(&entry);
}

/* The cursor.batchSize of listCollections and listIndexes: -1 (all) unless
 * a number is given. */
static int64_t dbcmds_cursor_batch_size(const cmd_ctx_t *ctx)
{
    bson_iter_t it, bs;
    bson_t cur;
    if (cmd_find(ctx, "cursor", &it) && cmd_iter_doc(&it, &cur) &&
        bson_iter_init_find(&bs, &cur, "batchSize") && BSON_ITER_HOLDS_NUMBER(&bs))
        return bson_iter_as_int64(&bs);
    return -1;
}

bool cmd_list_collections(cmd_ctx_t *ctx, dberr_t *err)
{
    dbcmds_listcoll_t l = {0};
    bson_t filter;
    bool has_filter;
    int64_t batch_size = dbcmds_cursor_batch_size(ctx);
    recvec_init(&l.recs);
    if (!cmd_opt_bool(ctx, "nameOnly", &l.name_only, err) ||
        !cmd_opt_doc(ctx, "filter", &filter, &has_filter, err))
        return false;
    if (has_filter && !(l.filter = matcher_new(&filter, err)))
        return false;
    catalog_foreach_coll(server.catalog, ctx->db, dbcmds_list_one_coll, &l);
    if (!strcmp(ctx->db, "local")) { /* the oplog view (cmd/oplog.c) */
        bson_t entry = BSON_INITIALIZER;
        oplog_collection_info(&entry, l.name_only);
        if (!l.filter || matcher_matches(l.filter, &entry, NULL)) {
            record_t *r = record_new(&entry);
            recvec_push_ref(&l.recs, r);
            record_unref(r);
        }
        bson_destroy(&entry);
    }
    matcher_destroy(l.filter);
    char ns[256];
    snprintf(ns, sizeof ns, "%s.$cmd.listCollections", ctx->db);
    return cmd_reply_cursor(ctx, ns, &l.recs, NULL, NULL, batch_size, false, err);
}

/* ---- create / drop ---- */

/* Checks the validator and view parts of collection options. */
static bool dbcmds_check_options(const bson_t *options, dberr_t *err)
{
    bson_iter_t it;
    if (bson_iter_init_find(&it, options, "validator")) {
        bson_t v;
        if (!BSON_ITER_HOLDS_DOCUMENT(&it) || !cmd_iter_doc(&it, &v))
            return dberr_set(err, DBERR_TYPE_MISMATCH, "'validator' must be an object");
        matcher_t *m = matcher_new(&v, err);
        if (!m)
            return false;
        matcher_destroy(m);
        bson_t schema;
        if (bsonview_field(&v, "$jsonSchema", &schema) && jsonschema_rejects_id(&schema))
            log_event(LOG_WARN, "QUERY", 3216000,
                      "$jsonSchema validator does not allow '_id' field. This validator will "
                      "reject all documents, consider adding '_id' to the allowed fields.");
    }
    if (bson_iter_init_find(&it, options, "validationLevel")) {
        const char *l = BSON_ITER_HOLDS_UTF8(&it) ? bson_iter_utf8(&it, NULL) : "";
        if (strcmp(l, "off") && strcmp(l, "strict") && strcmp(l, "moderate"))
            return dberr_set(err, DBERR_BAD_VALUE,
                             "Enumeration value '%s' for field 'validationLevel' is not a valid "
                             "value.",
                             l);
    }
    if (bson_iter_init_find(&it, options, "validationAction")) {
        const char *a = BSON_ITER_HOLDS_UTF8(&it) ? bson_iter_utf8(&it, NULL) : "";
        if (strcmp(a, "error") && strcmp(a, "warn"))
            return dberr_set(err, DBERR_BAD_VALUE,
                             "Enumeration value '%s' for field 'validationAction' is not a valid "
                             "value.",
                             a);
    }
    if (bson_iter_init_find(&it, options, "changeStreamPreAndPostImages")) {
        /* mongod's {enabled: <bool>} (change streams' pre- and post-images) */
        bson_t v;
        bson_iter_t en;
        if (!BSON_ITER_HOLDS_DOCUMENT(&it) || !cmd_iter_doc(&it, &v))
            return cmd_wrong_type(err, &it, "type 'object'", "changeStreamPreAndPostImages");
        if (!bson_iter_init_find(&en, &v, "enabled"))
            return dberr_set(err, 40414, "BSON field 'changeStreamPreAndPostImages.enabled' is "
                                         "missing but a required field");
        if (!BSON_ITER_HOLDS_BOOL(&en))
            return cmd_wrong_type(err, &en, "type 'bool'", "changeStreamPreAndPostImages.enabled");
        bson_iter_init(&en, &v);
        while (bson_iter_next(&en))
            if (strcmp(bson_iter_key(&en), "enabled"))
                return dberr_set(err, 40415, "BSON field 'changeStreamPreAndPostImages.%s' is an "
                                             "unknown field.",
                                 bson_iter_key(&en));
    }
    bool has_view = bson_iter_init_find(&it, options, "viewOn");
    if (has_view && !BSON_ITER_HOLDS_UTF8(&it))
        return dberr_set(err, DBERR_TYPE_MISMATCH, "'viewOn' must be a string");
    if (bson_iter_init_find(&it, options, "pipeline")) {
        if (!has_view)
            return dberr_set(err, DBERR_BAD_VALUE, "'pipeline' requires 'viewOn' to also be "
                                                   "specified");
        pipeline_t *p = pipeline_new(&it, PIPELINE_AGGREGATE, NULL, err);
        if (!p)
            return false;
        bool bad = pipeline_output(p) != NULL;
        pipeline_destroy(p);
        if (bad)
            return dberr_set(err, DBERR_INVALID_OPTIONS,
                             "$out and $merge cannot be used in a view definition");
    }
    return true;
}

bool cmd_create(cmd_ctx_t *ctx, dberr_t *err)
{
    const char *coll;
    if (!cmd_collection_name(ctx, &coll, err))
        return false;
    bson_t options = BSON_INITIALIZER, rest = BSON_INITIALIZER;
    bson_iter_t it, capped_it, size_it, max_it;
    bson_iter_init(&it, ctx->cmd);
    bson_iter_next(&it);
    bool ok = true, has_capped = false, has_size = false, has_max = false;
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (k[0] == '$' || !strcmp(k, "lsid") || !strcmp(k, "txnNumber") ||
            !strcmp(k, "writeConcern") || !strcmp(k, "comment") || !strcmp(k, "maxTimeMS") ||
            !strcmp(k, "autocommit") || !strcmp(k, "startTransaction") ||
            !strcmp(k, "apiVersion") || !strcmp(k, "apiStrict") ||
            !strcmp(k, "apiDeprecationErrors"))
            continue;
        /* capped, size and max: checked together, stored first (store/capped.h) */
        if (!strcmp(k, "capped") || !strcmp(k, "size") || !strcmp(k, "max")) {
            bool *has = k[0] == 'c' ? &has_capped : k[0] == 's' ? &has_size : &has_max;
            *has = true;
            *(k[0] == 'c' ? &capped_it : k[0] == 's' ? &size_it : &max_it) = it;
            continue;
        }
        if (!strcmp(k, "timeseries") ||
            !strcmp(k, "clusteredIndex") || !strcmp(k, "encryptedFields")) {
            ok = dberr_set(err, DBERR_NOT_IMPLEMENTED,
                           "atomdb does not support the create option '%s' yet", k);
            break;
        }
        if (!strcmp(k, "collation")) {
            /* the default collation, kept resolved as mongod shows it
             * (listCollections); the simple one is no option at all */
            collation_t *dflt;
            if (!(ok = collation_parse_iter(&it, &dflt, err)))
                break;
            if (dflt)
                collation_append(dflt, &rest, "collation");
            collation_destroy(dflt);
            continue;
        }
        bson_append_value(&rest, k, -1, bson_iter_value(&it));
    }
    if (ok)
        ok = capped_parse_options(has_capped ? &capped_it : NULL, has_size ? &size_it : NULL,
                                  has_max ? &max_it : NULL, &options, err);
    bson_concat(&options, &rest);
    bson_destroy(&rest);
    if (ok)
        ok = dbcmds_check_options(&options, err);
    bson_iter_t von, vcoll;
    collection_t *source = NULL;
    if (ok && bson_iter_init_find(&von, &options, "viewOn") && BSON_ITER_HOLDS_UTF8(&von))
        source = catalog_get(server.catalog, ctx->db, bson_iter_utf8(&von, NULL));
    if (source && collection_is_view(source)) {
        /* as mongod: a view on a view has that view's collation */
        collation_t *mine = NULL;
        if (bson_iter_init_find(&vcoll, &options, "collation"))
            ok = collation_parse_iter(&vcoll, &mine, err);
        if (ok && !collation_same(mine, collection_collation(source)))
            ok = dberr_set(err, 167, "View %s.%s has conflicting collation with view %s.%s",
                           ctx->db, coll, ctx->db, bson_iter_utf8(&von, NULL));
        collation_destroy(mine);
    }
    collection_t *existing = ok ? catalog_get(server.catalog, ctx->db, coll) : NULL;
    if (ok && ctx->view->txn && existing) {
        /* mongod 7: inside a transaction, only a new collection */
        ok = dberr_set(err, DBERR_NAMESPACE_EXISTS, "Collection %s.%s already exists.", ctx->db,
                       coll);
    } else if (ok && ctx->view->txn) {
        /* created when the transaction commits */
        if (txn_find_scratch(ctx->view->txn, ctx->db, coll)) {
            ok = dberr_set(err, DBERR_NAMESPACE_EXISTS, "Collection %s.%s already exists.",
                           ctx->db, coll);
        } else if (catalog_valid_coll_name(ctx->db, coll, err)) {
            collection_set_options(txn_scratch_collection(ctx->view->txn, ctx->db, coll),
                                   &options);
        } else {
            ok = false;
        }
    } else if (existing) {
        /* mongod 7.0: creating an existing collection with the same options
         * succeeds; with other options it is NamespaceExists */
        if (!bson_equal(collection_options(existing), &options))
            ok = dberr_set(err, DBERR_NAMESPACE_EXISTS,
                           "namespace %s.%s already exists, but with different options", ctx->db,
                           coll);
    } else if (ok && !catalog_create(server.catalog, ctx->db, coll, &options, err)) {
        ok = false;
    }
    bson_destroy(&options);
    return ok;
}

/* ---- collMod ---- */

/* collMod cappedSize / cappedMax (mongod >= 6.0): a capped collection's
 * new bound into *out; cappedMax <= 0 means no bound (2^31 - 1). The
 * documents past a smaller bound go at the next insert, as mongod. */
static bool dbcmds_capped_bound(const collection_t *c, const bson_iter_t *it, int64_t *out,
                                dberr_t *err)
{
    const char *k = bson_iter_key(it);
    if (!collection_is_capped(c))
        return dberr_set(err, DBERR_INVALID_OPTIONS,
                         "Cannot set '%s' on a collection that is not capped: %s", k,
                         collection_ns(c));
    if (!BSON_ITER_HOLDS_NUMBER(it))
        return cmd_wrong_type(err, it, "types '[long, int, decimal, double]'", "collMod.%s", k);
    int64_t v = bson_iter_as_int64(it);
    if (k[6] == 'S' && v <= 0)
        return dberr_set(err, 51024, "BSON field 'cappedSize' value must be > 0, actual value "
                                     "'%lld'",
                         (long long)v);
    if (k[6] == 'S' && v > CAPPED_MAX_SIZE)
        return dberr_set(err, 51024, "BSON field 'cappedSize' value must be <= %lld, actual "
                                     "value '%lld'",
                         (long long)CAPPED_MAX_SIZE, (long long)v);
    if (k[6] == 'M' && v >= (1LL << 31))
        return dberr_set(err, DBERR_BAD_VALUE,
                         "max in a capped collection has to be < 2^31 or not set");
    *out = k[6] == 'M' && v <= 0 ? 0x7fffffff : v;
    return true;
}

/* Appends {capped: true, size, max} with the new bounds (-1: unchanged). */
static void dbcmds_capped_head(const collection_t *c, int64_t size, int64_t max, bson_t *out)
{
    bson_iter_t it;
    BSON_APPEND_BOOL(out, "capped", true);
    if (size < 0)
        size = collection_capped_size(c);
    if (max < 0 && bson_iter_init_find(&it, collection_options(c), "max"))
        max = bson_iter_as_int64(&it);
    if (size <= INT32_MAX)
        BSON_APPEND_INT32(out, "size", (int32_t)size);
    else
        BSON_APPEND_INT64(out, "size", size);
    if (max >= 0)
        BSON_APPEND_INT32(out, "max", (int32_t)max);
}

bool cmd_coll_mod(cmd_ctx_t *ctx, dberr_t *err)
{
    const char *coll;
    if (!cmd_collection_name(ctx, &coll, err))
        return false;
    collection_t *c = catalog_get(server.catalog, ctx->db, coll);
    if (!c)
        return dberr_set(err, DBERR_NAMESPACE_NOT_FOUND, "ns does not exist: %s.%s", ctx->db,
                         coll);
    bson_t options = BSON_INITIALIZER;
    bson_iter_t it;
    /* start from the current options, then apply the command's */
    bson_iter_init(&it, collection_options(c));
    bson_t changes = BSON_INITIALIZER;
    bson_iter_t cit;
    index_t *hide_ix = NULL; /* collMod index.hidden: which index, and to what */
    bool hide = false;
    bson_iter_init(&cit, ctx->cmd);
    bson_iter_next(&cit);
    bool ok = true;
    int64_t capped_size = -1, capped_max = -1; /* cappedSize / cappedMax given */
    while (bson_iter_next(&cit)) {
        const char *k = bson_iter_key(&cit);
        if (k[0] == '$' || !strcmp(k, "lsid") || !strcmp(k, "txnNumber") ||
            !strcmp(k, "writeConcern") || !strcmp(k, "comment") || !strcmp(k, "maxTimeMS"))
            continue;
        if (!strcmp(k, "cappedSize") || !strcmp(k, "cappedMax")) {
            if (!(ok = dbcmds_capped_bound(c, &cit, k[6] == 'S' ? &capped_size : &capped_max,
                                           err)))
                break;
        } else if (!strcmp(k, "validator") || !strcmp(k, "validationLevel") ||
            !strcmp(k, "validationAction") || !strcmp(k, "viewOn") || !strcmp(k, "pipeline") ||
            !strcmp(k, "changeStreamPreAndPostImages")) {
            bson_append_value(&changes, k, -1, bson_iter_value(&cit));
        } else if (!strcmp(k, "index")) {
            bson_t spec;
            bson_iter_t f;
            index_t *ix = NULL;
            if (!cmd_iter_doc(&cit, &spec)) {
                ok = dberr_set(err, DBERR_TYPE_MISMATCH, "collMod index must be an object");
                break;
            }
            for (int i = 0; i < collection_nindexes(c); i++) {
                index_t *x = collection_index(c, i);
                if ((bson_iter_init_find(&f, &spec, "name") && BSON_ITER_HOLDS_UTF8(&f) &&
                     !strcmp(bson_iter_utf8(&f, NULL), x->name)))
                    ix = x;
                bson_t key;
                if (bson_iter_init_find(&f, &spec, "keyPattern") && cmd_iter_doc(&f, &key) &&
                    index_key_equals(x, &key))
                    ix = x;
            }
            if (!ix) {
                ok = dberr_set(err, DBERR_INDEX_NOT_FOUND, "cannot find index for collMod");
                break;
            }
            if (bson_iter_init_find(&f, &spec, "hidden")) {
                if (!BSON_ITER_HOLDS_BOOL(&f)) {
                    ok = cmd_wrong_type(err, &f, "type 'bool'", "collMod.index.hidden");
                    break;
                }
                if (ix->is_id) {
                    ok = dberr_set(err, DBERR_BAD_VALUE, "can't hide _id index");
                    break;
                }
                hide_ix = ix; /* applied once the whole command is checked */
                hide = bson_iter_bool(&f);
            }
            bson_iter_init(&f, &spec);
            while (bson_iter_next(&f)) {
                const char *ik = bson_iter_key(&f);
                if (strcmp(ik, "name") && strcmp(ik, "keyPattern") && strcmp(ik, "hidden") &&
                    strcmp(ik, "expireAfterSeconds")) {
                    ok = dberr_set(err, DBERR_NOT_IMPLEMENTED,
                                   "atomdb's collMod does not support 'index.%s'", ik);
                    break;
                }
            }
            if (!ok)
                break;
            if (bson_iter_init_find(&f, &spec, "expireAfterSeconds") && BSON_ITER_HOLDS_NUMBER(&f))
                ix->expire_after_s = bson_iter_as_int64(&f);
        } else {
            ok = dberr_set(err, DBERR_INVALID_OPTIONS, "atomdb's collMod does not support '%s' yet",
                           k);
            break;
        }
    }
    if (ok) {
        if (capped_size >= 0 || capped_max >= 0) /* capped, size, max first, as create */
            dbcmds_capped_head(c, capped_size, capped_max, &options);
        while (bson_iter_next(&it))
            if (!bson_has_field(&changes, bson_iter_key(&it)) &&
                !((capped_size >= 0 || capped_max >= 0) && bson_has_field(&options,
                                                                          bson_iter_key(&it))))
                bson_append_value(&options, bson_iter_key(&it), -1, bson_iter_value(&it));
        bson_concat(&options, &changes);
        ok = dbcmds_check_options(&options, err);
    }
    if (ok && (!bson_empty(&changes) || !hide_ix)) /* an index alone changes no option */
        collection_set_options(c, &options);
    if (ok && hide_ix && hide_ix->hidden != hide) {
        /* as mongod: a change is reported, a no-op is not */
        BSON_APPEND_BOOL(ctx->reply, "hidden_old", hide_ix->hidden);
        BSON_APPEND_BOOL(ctx->reply, "hidden_new", hide);
        collection_set_index_hidden(c, hide_ix->name, hide);
    }
    bson_destroy(&changes);
    bson_destroy(&options);
    return ok;
}

bool cmd_drop(cmd_ctx_t *ctx, dberr_t *err)
{
    cmd_target_t t;
    if (!cmd_target(ctx, &t, err) || !catalog_valid_coll_name(ctx->db, t.coll, err))
        return false;
    if (t.c)
        BSON_APPEND_INT32(ctx->reply, "nIndexesWas", collection_nindexes(t.c));
    catalog_drop(server.catalog, ctx->db, t.coll);
    BSON_APPEND_UTF8(ctx->reply, "ns", t.ns);
    return true;
}

bool cmd_drop_database(cmd_ctx_t *ctx, dberr_t *err)
{
    if (!catalog_valid_db_name(ctx->db, err))
        return false;
    catalog_drop_db(server.catalog, ctx->db);
    return true;
}

/* ---- statistics ---- */

typedef struct dbcmds_stats {
    int64_t colls, objects, data, indexes;
} dbcmds_stats_t;

static void dbcmds_stat_one(collection_t *c, void *ctx)
{
    dbcmds_stats_t *s = ctx;
    s->colls++;
    s->objects += (int64_t)collection_count(c);
    s->data += (int64_t)collection_data_size(c);
    s->indexes += collection_nindexes(c);
}

bool cmd_db_stats(cmd_ctx_t *ctx, dberr_t *err)
{
    if (!catalog_valid_db_name(ctx->db, err))
        return false;
    dbcmds_stats_t s = {0};
    catalog_foreach_coll(server.catalog, ctx->db, dbcmds_stat_one, &s);
    if (!strcmp(ctx->db, "local")) { /* the oplog view (cmd/oplog.c) */
        s.colls++;
        s.objects += (int64_t)history_len();
        s.data += (int64_t)history_bytes();
    }
    BSON_APPEND_UTF8(ctx->reply, "db", ctx->db);
    BSON_APPEND_INT64(ctx->reply, "collections", s.colls);
    BSON_APPEND_INT64(ctx->reply, "views", 0);
    BSON_APPEND_INT64(ctx->reply, "objects", s.objects);
    BSON_APPEND_DOUBLE(ctx->reply, "avgObjSize", s.objects ? (double)s.data / s.objects : 0.0);
    BSON_APPEND_DOUBLE(ctx->reply, "dataSize", (double)s.data);
    BSON_APPEND_DOUBLE(ctx->reply, "storageSize", (double)s.data);
    BSON_APPEND_INT64(ctx->reply, "indexes", s.indexes);
    BSON_APPEND_DOUBLE(ctx->reply, "indexSize", 0.0);
    BSON_APPEND_DOUBLE(ctx->reply, "totalSize", (double)s.data);
    BSON_APPEND_INT32(ctx->reply, "scaleFactor", 1);
    return true;
}

bool cmd_coll_stats(cmd_ctx_t *ctx, dberr_t *err)
{
    cmd_target_t t;
    if (!cmd_target(ctx, &t, err))
        return false;
    if (!strcmp(t.ns, "local.oplog.rs")) /* the oplog view (cmd/oplog.c) */
        return oplog_coll_stats(ctx->reply);
    if (!t.c)
        return dberr_set(err, DBERR_NAMESPACE_NOT_FOUND, "Collection [%s] not found.", t.ns);
    collection_t *c = t.c;
    int64_t count = (int64_t)collection_count(c), size = (int64_t)collection_data_size(c);
    BSON_APPEND_UTF8(ctx->reply, "ns", t.ns);
    BSON_APPEND_INT64(ctx->reply, "size", size);
    BSON_APPEND_INT64(ctx->reply, "count", count);
    if (count)
        BSON_APPEND_INT64(ctx->reply, "avgObjSize", size / count);
    BSON_APPEND_INT64(ctx->reply, "storageSize", size);
    BSON_APPEND_INT32(ctx->reply, "nindexes", collection_nindexes(c));
    BSON_APPEND_INT64(ctx->reply, "totalIndexSize", 0);
    bson_t sizes;
    bson_append_document_begin(ctx->reply, "indexSizes", -1, &sizes);
    for (int i = 0; i < collection_nindexes(c); i++)
        BSON_APPEND_INT64(&sizes, collection_index(c, i)->name, 0);
    bson_append_document_end(ctx->reply, &sizes);
    BSON_APPEND_INT32(ctx->reply, "scaleFactor", 1);
    BSON_APPEND_BOOL(ctx->reply, "capped", collection_is_capped(c));
    if (collection_is_capped(c)) {
        BSON_APPEND_INT64(ctx->reply, "max", collection_capped_max(c));
        BSON_APPEND_INT64(ctx->reply, "maxSize", collection_capped_size(c));
    }
    return true;
}

/* ---- indexes ---- */

/* Parses every spec of `indexes` without building anything: mongod checks
 * them all before it creates a missing collection, so a bad one leaves no
 * collection behind. */
static bool dbcmds_check_index_specs(const bson_iter_t *indexes, dberr_t *err)
{
    bson_iter_t el;
    int specs = 0;
    bson_iter_recurse(indexes, &el);
    while (bson_iter_next(&el)) {
        bson_t spec;
        if (!BSON_ITER_HOLDS_DOCUMENT(&el) || !cmd_iter_doc(&el, &spec))
            return dberr_set(err, DBERR_TYPE_MISMATCH, "index specification must be an object");
        index_t *ix = index_new(&spec, err);
        if (!ix)
            return false;
        index_destroy(ix);
        specs++;
    }
    if (specs == 0)
        return dberr_set(err, DBERR_BAD_VALUE, "Must specify at least one index to create");
    return true;
}

bool cmd_create_indexes(cmd_ctx_t *ctx, dberr_t *err)
{
    cmd_target_t t;
    bson_iter_t it, el;
    if (!cmd_target(ctx, &t, err) || !cmd_required(ctx, "indexes", BSON_TYPE_ARRAY, &it, err))
        return false;
    bool existed = t.c != NULL;
    collection_t *c = NULL;
    if (existed && ctx->view->txn)
        return dberr_set(err, DBERR_OPERATION_NOT_SUPPORTED_IN_TRANSACTION,
                         "Cannot create new indexes on existing collection %s.%s in a "
                         "multi-document transaction.",
                         ctx->db, t.coll);
    if (!existed && !dbcmds_check_index_specs(&it, err))
        return false;
    bool made_before = false; /* by an earlier statement of the transaction */
    if (!existed && ctx->view->txn) {
        if (!catalog_valid_coll_name(ctx->db, t.coll, err))
            return false;
        made_before = txn_find_scratch(ctx->view->txn, ctx->db, t.coll) != NULL;
        c = txn_scratch_collection(ctx->view->txn, ctx->db, t.coll);
    } else {
        c = catalog_get_or_create(server.catalog, ctx->db, t.coll, err);
    }
    if (!c)
        return false;
    int before = collection_nindexes(c);
    bson_iter_recurse(&it, &el);
    int specs = 0;
    while (bson_iter_next(&el)) {
        bson_t spec;
        if (!BSON_ITER_HOLDS_DOCUMENT(&el) || !cmd_iter_doc(&el, &spec))
            return dberr_set(err, DBERR_TYPE_MISMATCH, "index specification must be an object");
        bool created;
        bson_t inherited = BSON_INITIALIZER;
        collation_t *dflt = collection_collation(c);
        if (dflt && !bson_has_field(&spec, "collation")) {
            /* as mongod: an index without its own collation takes the
             * collection's default */
            bson_concat(&inherited, &spec);
            collation_append(dflt, &inherited, "collation");
        }
        bool ok = collection_create_index(c, bson_empty(&inherited) ? &spec : &inherited,
                                          &created, err);
        bson_destroy(&inherited);
        if (!ok)
            return false;
        specs++;
    }
    if (specs == 0)
        return dberr_set(err, DBERR_BAD_VALUE, "Must specify at least one index to create");
    BSON_APPEND_INT32(ctx->reply, "numIndexesBefore", before);
    BSON_APPEND_INT32(ctx->reply, "numIndexesAfter", collection_nindexes(c));
    if (before == collection_nindexes(c))
        BSON_APPEND_UTF8(ctx->reply, "note", "all indexes already exist");
    BSON_APPEND_BOOL(ctx->reply, "createdCollectionAutomatically", !existed && !made_before);
    return true;
}

/* The existing collection an index command names, or NULL with `err`
 * set: NamespaceNotFound worded as `missing` followed by the namespace. */
static collection_t *dbcmds_index_target(const cmd_ctx_t *ctx, cmd_target_t *t, const char *missing,
                                         dberr_t *err)
{
    if (!cmd_target(ctx, t, err))
        return NULL;
    if (!t->c)
        dberr_set(err, DBERR_NAMESPACE_NOT_FOUND, "%s%s", missing, t->ns);
    return t->c;
}

bool cmd_list_indexes(cmd_ctx_t *ctx, dberr_t *err)
{
    cmd_target_t t;
    recvec_t recs;
    collection_t *c = dbcmds_index_target(ctx, &t, "ns does not exist: ", err);
    if (!c)
        return false;
    recvec_init(&recs);
    for (int i = 0; i < collection_nindexes(c); i++) {
        record_t *r = record_new(&collection_index(c, i)->spec);
        recvec_push_ref(&recs, r);
        record_unref(r);
    }
    return cmd_reply_cursor(ctx, t.ns, &recs, NULL, NULL, dbcmds_cursor_batch_size(ctx), false,
                            err);
}

/* Checks every name of a dropIndexes array before any is dropped, so a
 * bad name drops nothing (as mongod). */
static bool dbcmds_check_index_names(collection_t *c, const bson_iter_t *names, dberr_t *err)
{
    bson_iter_t el;
    bson_iter_recurse(names, &el);
    while (bson_iter_next(&el)) {
        if (!BSON_ITER_HOLDS_UTF8(&el))
            return dberr_set(err, DBERR_TYPE_MISMATCH, "index names must be strings");
        if (!collection_can_drop_index(c, bson_iter_utf8(&el, NULL), err))
            return false;
    }
    return true;
}

bool cmd_drop_indexes(cmd_ctx_t *ctx, dberr_t *err)
{
    cmd_target_t t;
    collection_t *c = dbcmds_index_target(ctx, &t, "ns not found ", err);
    if (!c)
        return false;
    bson_iter_t it;
    if (!cmd_find(ctx, "index", &it))
        return cmd_missing_field(err, "dropIndexes.index");
    int was = collection_nindexes(c);
    if (BSON_ITER_HOLDS_UTF8(&it)) {
        const char *name = bson_iter_utf8(&it, NULL);
        if (strcmp(name, "*") == 0)
            collection_drop_all_indexes(c);
        else if (!collection_drop_index(c, name, err))
            return false;
    } else if (BSON_ITER_HOLDS_ARRAY(&it)) {
        if (!dbcmds_check_index_names(c, &it, err))
            return false;
        bson_iter_t el;
        bson_iter_recurse(&it, &el);
        while (bson_iter_next(&el))
            if (!collection_drop_index(c, bson_iter_utf8(&el, NULL), err))
                return false;
    } else if (BSON_ITER_HOLDS_DOCUMENT(&it)) {
        bson_t key;
        cmd_iter_doc(&it, &key);
        if (!collection_drop_index_by_key(c, &key, err))
            return false;
    } else {
        return dberr_set(err, DBERR_TYPE_MISMATCH,
                         "BSON field 'dropIndexes.index' is the wrong type '%s'",
                         shellfmt_type_name(bson_iter_type(&it)));
    }
    BSON_APPEND_INT32(ctx->reply, "nIndexesWas", was);
    return true;
}
