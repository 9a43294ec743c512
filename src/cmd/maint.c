/* maint: maintenance commands — renameCollection (within and across
 * databases, one log record), validate (documents and indexes
 * cross-checked, src/store/check.c), dbHash (an MD5 per collection over its
 * documents in _id order), fsync lock / fsyncUnlock, and mapReduce, which
 * atomdb refuses because it runs no JavaScript. */
#include "cmd/cmd-private.h"
#include "cmd/oplog.h"

#include <openssl/evp.h>
#include <string.h>

#include "journal/journal.h"
#include "store/catalog.h"
#include "store/check.h"
#include "util/namelist.h"

/* Splits "db.coll" into its parts (the collection may contain dots). */
static bool maint_split_ns(const char *ns, char *db, size_t dbsize, const char **coll,
                           const char *what, dberr_t *err)
{
    const char *dot = strchr(ns, '.');
    if (!dot || dot == ns || !dot[1] || (size_t)(dot - ns) >= dbsize)
        return dberr_set(err, DBERR_INVALID_NAMESPACE, "Invalid %s namespace: %s", what, ns);
    memcpy(db, ns, (size_t)(dot - ns));
    db[dot - ns] = '\0';
    *coll = dot + 1;
    return true;
}

bool cmd_rename_collection(cmd_ctx_t *ctx, dberr_t *err)
{
    static const char *const known[] = {"to", "dropTarget", "stayTemp"};
    bson_iter_t it;
    if (!cmd_only_fields(ctx, known, 3, err))
        return false;
    if (!BSON_ITER_HOLDS_UTF8(&ctx->arg))
        return cmd_wrong_type(err, &ctx->arg, "type 'string'", "renameCollection.renameCollection");
    if (!cmd_required(ctx, "to", BSON_TYPE_UTF8, &it, err))
        return false;
    bool drop_target = false, stay_temp = false;
    if (!cmd_opt_bool(ctx, "dropTarget", &drop_target, err) ||
        !cmd_opt_bool(ctx, "stayTemp", &stay_temp, err))
        return false;
    char db[128], to_db[128];
    const char *coll = NULL, *to_coll = NULL;
    if (!maint_split_ns(bson_iter_utf8(&ctx->arg, NULL), db, sizeof db, &coll, "source", err) ||
        !maint_split_ns(bson_iter_utf8(&it, NULL), to_db, sizeof to_db, &to_coll, "target", err))
        return false;
    if (!catalog_valid_db_name(to_db, err))
        return false;
    collection_t *c = catalog_get(server.catalog, db, coll);
    if (c && collection_is_view(c))
        return dberr_set(err, 166, "cannot rename view %s.%s", db, coll);
    collection_t *target = catalog_get(server.catalog, to_db, to_coll);
    if (target && drop_target && collection_is_view(target))
        return dberr_set(err, 166, "cannot drop view %s.%s with renameCollection", to_db, to_coll);
    return catalog_rename(server.catalog, db, coll, to_db, to_coll, drop_target, err);
}

/* The validate command's own fields. */
static bool maint_validate_fields(const cmd_ctx_t *ctx, bool *full, dberr_t *err)
{
    /* validate's options; background and checkBSONConformity change
     * nothing: every check runs at once on the loop, BSON is always checked */
    static const char *const known[] = {"full",       "background", "checkBSONConformity",
                                        "repair",     "metadata",   "enforceFastCount",
                                        "fixMultikey"};
    /* ... of them, those atomdb implements only as false */
    static const char *const refused[] = {"repair", "metadata", "enforceFastCount", "fixMultikey"};
    bson_iter_t it;
    bson_iter_init(&it, ctx->cmd);
    bson_iter_next(&it);
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (cmd_is_generic_arg(k))
            continue;
        if (!strcmp(k, "full"))
            *full = bson_iter_as_bool(&it);
        else if (namelist_has(refused, NAMELIST_COUNT(refused), k) && bson_iter_as_bool(&it))
            return dberr_set(err, DBERR_NOT_IMPLEMENTED, "atomdb's validate does not support '%s'",
                             k);
        else if (!namelist_has(known, NAMELIST_COUNT(known), k))
            return dberr_set(err, 40415, "BSON field 'validate.%s' is an unknown field.", k);
    }
    return true;
}

bool cmd_validate(cmd_ctx_t *ctx, dberr_t *err)
{
    const char *coll;
    bool full = false;
    if (!cmd_collection_name(ctx, &coll, err) || !maint_validate_fields(ctx, &full, err))
        return false;
    if (oplog_is_ns(ctx->db, coll)) /* a view of the change history */
        return oplog_validate(ctx->reply);
    collection_t *c = catalog_get(server.catalog, ctx->db, coll);
    if (!c)
        return dberr_set(err, DBERR_NAMESPACE_NOT_FOUND, "Collection '%s.%s' does not exist to "
                                                         "validate.",
                         ctx->db, coll);
    if (collection_is_view(c))
        return dberr_set(err, 166, "Cannot validate a view: %s.%s", ctx->db, coll);
    check_result_t r;
    bool valid = check_collection(c, full, &r);
    const uint8_t *u = collection_uuid(c);
    BSON_APPEND_UTF8(ctx->reply, "ns", collection_ns(c));
    bson_append_binary(ctx->reply, "uuid", 4, BSON_SUBTYPE_UUID, u, 16);
    BSON_APPEND_INT64(ctx->reply, "nInvalidDocuments", r.invalid_docs);
    BSON_APPEND_INT64(ctx->reply, "nNonCompliantDocuments", r.invalid_docs);
    BSON_APPEND_INT64(ctx->reply, "nrecords", r.nrecords);
    BSON_APPEND_INT32(ctx->reply, "nIndexes", r.nindexes);
    bson_t keys, details, d, arr;
    char k[16];
    bson_append_document_begin(ctx->reply, "keysPerIndex", -1, &keys);
    for (int i = 0; i < r.nindexes; i++)
        BSON_APPEND_INT64(&keys, collection_index(c, i)->name, r.keys[i]);
    bson_append_document_end(ctx->reply, &keys);
    bson_append_document_begin(ctx->reply, "indexDetails", -1, &details);
    for (int i = 0; i < r.nindexes; i++) {
        bson_append_document_begin(&details, collection_index(c, i)->name, -1, &d);
        BSON_APPEND_BOOL(&d, "valid", r.missing[i] == 0 && r.extra[i] <= 0);
        bson_append_document_end(&details, &d);
    }
    bson_append_document_end(ctx->reply, &details);
    BSON_APPEND_BOOL(ctx->reply, "valid", valid);
    BSON_APPEND_BOOL(ctx->reply, "repaired", false);
    bson_t empty = BSON_INITIALIZER;
    BSON_APPEND_ARRAY(ctx->reply, "warnings", &empty);
    bson_append_array_begin(ctx->reply, "errors", -1, &arr);
    for (int i = 0; i < r.nerrors; i++)
        bson_append_utf8(&arr, cmd_index_key((uint32_t)i, k, sizeof k), -1, r.errors[i], -1);
    bson_append_array_end(ctx->reply, &arr);
    BSON_APPEND_ARRAY(ctx->reply, "extraIndexEntries", &empty);
    BSON_APPEND_ARRAY(ctx->reply, "missingIndexEntries", &empty);
    BSON_APPEND_ARRAY(ctx->reply, "corruptRecords", &empty);
    return true;
}

/* ---- dbHash ---- */

typedef struct maint_hash {
    EVP_MD_CTX *md;
} maint_hash_t;

static bool maint_hash_doc(const bson_t *doc, void *ctx)
{
    maint_hash_t *h = ctx;
    EVP_DigestUpdate(h->md, bson_get_data(doc), doc->len);
    return true;
}

/* Finishes `md` (and frees it) into lowercase hex in `out`. */
static void maint_md5_hex(EVP_MD_CTX *md, char out[2 * EVP_MAX_MD_SIZE + 1])
{
    static const char hex[] = "0123456789abcdef";
    unsigned char d[EVP_MAX_MD_SIZE];
    unsigned n = 0;
    EVP_DigestFinal_ex(md, d, &n);
    EVP_MD_CTX_free(md);
    for (unsigned i = 0; i < n; i++) {
        out[2 * i] = hex[d[i] >> 4];
        out[2 * i + 1] = hex[d[i] & 15];
    }
    out[2 * n] = '\0';
}

typedef struct maint_dbhash {
    const bson_t *only;   /* the collections asked for, or NULL: all */
    bson_t *hashes, *uuids;
    EVP_MD_CTX *all;
    bson_t *capped;       /* the capped collections' names (hashed in natural order) */
    uint32_t ncapped;
} maint_dbhash_t;

static bool maint_wanted(const bson_t *only, const char *name)
{
    if (!only)
        return true;
    bson_iter_t it;
    bson_iter_init(&it, only);
    while (bson_iter_next(&it))
        if (BSON_ITER_HOLDS_UTF8(&it) && !strcmp(bson_iter_utf8(&it, NULL), name))
            return true;
    return false;
}

static void maint_hash_coll(collection_t *c, void *ctx)
{
    maint_dbhash_t *d = ctx;
    const char *name = collection_name(c);
    if (collection_is_view(c) || !maint_wanted(d->only, name) ||
        !strncmp(name, "system.", 7))
        return;
    maint_hash_t h = {EVP_MD_CTX_new()};
    EVP_DigestInit_ex(h.md, EVP_md5(), NULL);
    collection_foreach(c, maint_hash_doc, &h);
    char hex[2 * EVP_MAX_MD_SIZE + 1];
    maint_md5_hex(h.md, hex);
    BSON_APPEND_UTF8(d->hashes, name, hex);
    if (collection_is_capped(c)) {
        char key[16];
        const char *k = cmd_index_key(d->ncapped++, key, sizeof key);
        BSON_APPEND_UTF8(d->capped, k, name);
    }
    bson_append_binary(d->uuids, name, -1, BSON_SUBTYPE_UUID, collection_uuid(c), 16);
    EVP_DigestUpdate(d->all, hex, strlen(hex));
}

bool cmd_db_hash(cmd_ctx_t *ctx, dberr_t *err)
{
    bson_iter_t it;
    bson_t only;
    bool has_only = false;
    bson_iter_init(&it, ctx->cmd);
    bson_iter_next(&it);
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (!strcmp(k, "collections")) {
            if (!BSON_ITER_HOLDS_ARRAY(&it) || !cmd_iter_doc(&it, &only))
                return dberr_set(err, DBERR_TYPE_MISMATCH, "collections must be an array");
            has_only = true;
        } else if (!cmd_is_generic_arg(k)) {
            return dberr_set(err, 40415, "BSON field 'dbHash.%s' is an unknown field.", k);
        }
    }
    int64_t t0 = server_now_ms();
    bson_t hashes = BSON_INITIALIZER, uuids = BSON_INITIALIZER, capped = BSON_INITIALIZER;
    maint_dbhash_t d = {has_only ? &only : NULL, &hashes, &uuids, EVP_MD_CTX_new(), &capped, 0};
    EVP_DigestInit_ex(d.all, EVP_md5(), NULL);
    catalog_foreach_coll(server.catalog, ctx->db, maint_hash_coll, &d);
    char hex[2 * EVP_MAX_MD_SIZE + 1];
    maint_md5_hex(d.all, hex);
    BSON_APPEND_UTF8(ctx->reply, "host", server.config.advertise);
    BSON_APPEND_DOCUMENT(ctx->reply, "collections", &hashes);
    bson_t empty = BSON_INITIALIZER;
    BSON_APPEND_ARRAY(ctx->reply, "capped", &capped);
    bson_destroy(&capped);
    BSON_APPEND_DOCUMENT(ctx->reply, "uuids", &uuids);
    BSON_APPEND_UTF8(ctx->reply, "md5", hex);
    BSON_APPEND_INT64(ctx->reply, "timeMillis", server_now_ms() - t0);
    BSON_APPEND_ARRAY(ctx->reply, "fromCache", &empty);
    bson_destroy(&hashes);
    bson_destroy(&uuids);
    return true;
}

/* ---- fsync lock ---- */

static int maint_fsync_locks; /* fsync lock: true calls not yet unlocked */

bool cmd_fsync_locked_check(dberr_t *err)
{
    if (maint_fsync_locks > 0)
        return dberr_set(err, DBERR_ILLEGAL_OPERATION,
                         "the server is locked by fsync {lock: true}: writes are refused until "
                         "db.fsyncUnlock() (lockCount %d)",
                         maint_fsync_locks);
    return true;
}

bool cmd_fsync(cmd_ctx_t *ctx, dberr_t *err)
{
    bool lock = false;
    if (!cmd_opt_bool(ctx, "lock", &lock, err))
        return false;
    if (!journal_snapshot_now(err))
        return false;
    ctx->wait_sync = true;
    BSON_APPEND_INT32(ctx->reply, "numFiles", 1);
    if (lock) {
        maint_fsync_locks++;
        BSON_APPEND_UTF8(ctx->reply, "info", "now locked against writes, use db.fsyncUnlock() to "
                                             "unlock");
        BSON_APPEND_INT32(ctx->reply, "lockCount", maint_fsync_locks);
        BSON_APPEND_UTF8(ctx->reply, "seeAlso",
                         "http://dochub.mongodb.org/core/fsynccommand");
    }
    return true;
}

bool cmd_fsync_unlock(cmd_ctx_t *ctx, dberr_t *err)
{
    if (maint_fsync_locks == 0)
        return dberr_set(err, DBERR_ILLEGAL_OPERATION, "fsyncUnlock called when not locked");
    maint_fsync_locks--;
    BSON_APPEND_UTF8(ctx->reply, "info", "fsyncUnlock completed");
    BSON_APPEND_INT32(ctx->reply, "lockCount", maint_fsync_locks);
    return true;
}

bool cmd_map_reduce(cmd_ctx_t *ctx, dberr_t *err)
{
    return dberr_set(err, DBERR_COMMAND_NOT_SUPPORTED,
                     "atomdb runs no JavaScript, so mapReduce is not supported; an aggregation "
                     "pipeline ($group, then $out or $merge) computes the same results");
}
