/* collection: records plus indexes kept in step (inserts, replaces,
 * removes, unique checks, validation, capped bounds, index drops and TTL);
 * the planner and queries are in collection-query.c. */
#include "store/collection.h"
#include "store/collection-private.h"

#include <stdlib.h>
#include <string.h>

#include "doc/collation.h"
#include "doc/compare.h"
#include "doc/docvalidation.h"
#include "doc/keystring.h"
#include "store/capped.h"
#include "store/geoscan.h"
#include "store/mvcc.h"
#include "store/textindex.h"
#include "store/wildcard.h"
#include "store/observer.h"
#include "store/reaper.h"
#include "util/bsonview.h"
#include "util/fiber.h"
#include "util/hash.h"
#include "util/log.h"
#include "util/omap.h"
#include "util/shellfmt.h"


static bool collection_no_table_scan; /* setParameter notablescan */
static bool collection_no_capped_trim; /* journal replay: the log holds the deletes */

void collection_set_notablescan(bool on)
{
    collection_no_table_scan = on;
}

bool collection_notablescan(void)
{
    return collection_no_table_scan;
}

void collection_set_capped_trim(bool on)
{
    collection_no_capped_trim = !on;
}

/* Follows the options: a capped collection keeps its order and takes the
 * new bounds; one that became capped (convertToCapped) takes its documents
 * in their current (_id) order; one no longer capped forgets it. */
static void collection_capped_reset(collection_t *c)
{
    capped_t *now = capped_new(&c->options);
    if (c->capped && now) {
        capped_set_bounds(c->capped, now);
        capped_destroy(now);
        return;
    }
    capped_destroy(c->capped);
    c->capped = now;
    if (!c->capped)
        return;
    btree_pos_t n;
    for (bool more = btree_seek(c->indexes[0]->map, NULL, 0, &n); more; more = btree_next(&n)) {
        record_t *r = btree_pos_value(&n);
        bson_t doc;
        bson_iter_t it;
        record_view(r, &doc);
        if (bson_iter_init_find(&it, &doc, "_id"))
            capped_append(c->capped, bson_iter_value(&it), r);
    }
}

/* Removes the oldest documents (never `keep`, the one just inserted)
 * until the collection is within its bounds; each removal is reported to
 * the observer, so the log holds it. */
static void collection_capped_trim(collection_t *c, const record_t *keep)
{
    int64_t size = capped_size(c->capped), max = capped_max(c->capped);
    while ((int64_t)c->data_size > size || (max > 0 && (int64_t)c->count > max)) {
        uint64_t pos;
        record_t *oldest = capped_next(c->capped, 0, &pos);
        if (!oldest || oldest == keep)
            break;
        collection_remove(c, oldest);
    }
}

void collection_capped_trim_now(collection_t *c)
{
    if (c->capped)
        collection_capped_trim(c, NULL);
}

bool collection_is_capped(const collection_t *c)
{
    return c->capped != NULL;
}

int64_t collection_capped_size(const collection_t *c)
{
    return c->capped ? capped_size(c->capped) : 0;
}

int64_t collection_capped_max(const collection_t *c)
{
    return c->capped ? capped_max(c->capped) : 0;
}

record_t *collection_natural_next(const collection_t *c, uint64_t after, uint64_t *pos)
{
    return c->capped ? capped_next(c->capped, after, pos) : NULL;
}

bool collection_natural_holds(const collection_t *c, uint64_t pos)
{
    return c->capped && capped_holds(c->capped, pos);
}

collection_t *collection_new(const char *db, const char *name, const bson_t *options)
{
    collection_t *c = bson_malloc0(sizeof *c);
    c->db = bson_strdup(db);
    c->name = bson_strdup(name);
    c->ns = bson_strdup_printf("%s.%s", db, name);
    if (options)
        bson_copy_to(options, &c->options);
    else
        bson_init(&c->options);
    for (int i = 0; i < 16; i++)
        c->uuid[i] = (uint8_t)(rand() & 0xff);
    c->uuid[6] = (c->uuid[6] & 0x0f) | 0x40; /* version 4 */
    c->uuid[8] = (c->uuid[8] & 0x3f) | 0x80;
    c->indexes[0] = index_new_id();
    c->nindexes = 1;
    c->id = mvcc_new_collection_id();
    index_set_id_collation(c->indexes[0], collection_collation(c)); /* as mongod */
    c->capped = capped_new(&c->options);
    return c;
}

static void collection_unref_value(void *r)
{
    record_unref(r);
}

static void collection_free(void *p)
{
    collection_t *c = p;
    /* the records and index entries go a slice at a time (store/reaper.h) */
    reaper_add(c->indexes[0]->map, collection_unref_value);
    c->indexes[0]->map = NULL;
    for (int i = 0; i < c->nindexes; i++)
        collection_index_free(c->indexes[i]);
    matcher_destroy(c->validator);
    collation_destroy(c->collation);
    capped_destroy(c->capped);
    bson_destroy(&c->options);
    bson_free(c->db);
    bson_free(c->name);
    bson_free(c->ns);
    bson_free(c);
}

void collection_index_free(index_t *ix)
{
    reaper_add(ix->map, NULL);
    ix->map = NULL;
    index_destroy(ix);
}

static void collection_free_index(void *ix)
{
    collection_index_free(ix);
}

void collection_destroy(collection_t *c)
{
    if (!c)
        return;
    c->dropped = true;
    indexbuild_abort_all(c, "collection dropped");
    /* a suspended scan may still read it (util/fiber.h) */
    fiber_defer_free(collection_free, c);
}

void collection_set_options(collection_t *c, const bson_t *options)
{
    bson_destroy(&c->options);
    bson_copy_to(options, &c->options);
    matcher_destroy(c->validator);
    c->validator = NULL;
    c->validator_compiled = false;
    collation_destroy(c->collation);
    c->collation = NULL;
    c->collation_parsed = false;
    if (c->count == 0 && !collation_same(c->indexes[0]->collation, collection_collation(c)))
        index_set_id_collation(c->indexes[0], collection_collation(c)); /* a new collection */
    collection_capped_reset(c);
    const store_observer_t *obs = c->quiet ? NULL : store_observer_get();
    if (obs && obs->ddl) {
        bson_t op = BSON_INITIALIZER;
        BSON_APPEND_UTF8(&op, "collMod", c->name);
        BSON_APPEND_DOCUMENT(&op, "options", &c->options);
        obs->ddl(c->db, &op, obs->ctx);
        bson_destroy(&op);
    }
}

collation_t *collection_collation(collection_t *c)
{
    if (!c->collation_parsed) {
        bson_iter_t it;
        dberr_t ignore; /* checked when the options were set (create) */
        c->collation_parsed = true;
        if (bson_iter_init_find(&it, &c->options, "collation") &&
            !collation_parse_iter(&it, &c->collation, &ignore))
            c->collation = NULL;
    }
    return c->collation;
}

void collection_set_quiet(collection_t *c)
{
    c->quiet = true;
}

bool collection_dropped(const collection_t *c)
{
    return c->dropped;
}

bool collection_is_view(const collection_t *c)
{
    return bson_has_field(&c->options, "viewOn");
}

static const char *collection_opt_str(const collection_t *c, const char *key, const char *dflt)
{
    bson_iter_t it;
    if (bson_iter_init_find(&it, &c->options, key) && BSON_ITER_HOLDS_UTF8(&it))
        return bson_iter_utf8(&it, NULL);
    return dflt;
}

bool collection_validate(collection_t *c, const bson_t *doc, const bson_t *old_doc, dberr_t *err)
{
    if (!c->validator_compiled) {
        bson_t v;
        c->validator_compiled = true;
        if (bsonview_field(&c->options, "validator", &v)) {
            dberr_t ignore;
            if (!bson_empty(&v))
                c->validator = matcher_new(&v, &ignore);
        }
    }
    if (!c->validator || strcmp(collection_opt_str(c, "validationLevel", "strict"), "off") == 0)
        return true;
    if (matcher_matches(c->validator, doc, NULL))
        return true;
    if (old_doc && strcmp(collection_opt_str(c, "validationLevel", "strict"), "moderate") == 0 &&
        !matcher_matches(c->validator, old_doc, NULL))
        return true; /* moderate: an invalid document may stay invalid */
    bson_t validator, extra = BSON_INITIALIZER;
    bsonview_field(&c->options, "validator", &validator);
    /* in full, else without specifiedAs and values, else the id alone:
     * the error's extra fields have a fixed room (dberr_t) */
    for (int form = 0; form < 3; form++) {
        bson_t info, details;
        bson_iter_t id;
        bson_reinit(&extra);
        bson_append_document_begin(&extra, "errInfo", -1, &info);
        if (bson_iter_init_find(&id, doc, "_id"))
            bson_append_value(&info, "failingDocumentId", -1, bson_iter_value(&id));
        if (form < 2) {
            bson_append_document_begin(&info, "details", -1, &details);
            docvalidation_explain(&validator, doc, form == 1, &details);
            bson_append_document_end(&info, &details);
        }
        bson_append_document_end(&extra, &info);
        if (extra.len <= sizeof err->extra)
            break;
    }
    bool warn = strcmp(collection_opt_str(c, "validationAction", "error"), "warn") == 0;
    if (warn) {
        /* mongod's log line 20294; the write goes ahead */
        bson_t shown;
        bsonview_field(&extra, "errInfo", &shown);
        log_event(LOG_WARN, "STORAGE", 20294, "Document would fail validation",
                  LOG_STR("namespace", c->ns), LOG_DOC("document", doc),
                  LOG_DOC("errInfo", &shown));
    } else {
        dberr_set(err, 121, "Document failed validation");
        dberr_set_extra(err, bson_get_data(&extra), extra.len);
    }
    bson_destroy(&extra);
    return warn;
}

void collection_foreach(const collection_t *c, bool (*fn)(const bson_t *doc, void *ctx),
                        void *ctx)
{
    if (c->capped) { /* in natural order, so a snapshot keeps it */
        uint64_t pos = 0;
        record_t *r;
        while ((r = capped_next(c->capped, pos, &pos))) {
            bson_t doc;
            record_view(r, &doc);
            if (!fn(&doc, ctx))
                return;
        }
        return;
    }
    btree_pos_t n;
    for (bool more = btree_seek(c->indexes[0]->map, NULL, 0, &n); more; more = btree_next(&n)) {
        bson_t doc;
        record_view(btree_pos_value(&n), &doc);
        if (!fn(&doc, ctx))
            return;
    }
}

bool collection_seek_after(const collection_t *c, const buf_t *cursor, btree_pos_t *n)
{
    if (!btree_seek(c->indexes[0]->map, cursor->data, cursor->len, n))
        return false;
    size_t klen;
    const uint8_t *key = btree_pos_key(n, &klen);
    if (omap_keycmp(key, klen, cursor->data, cursor->len) != 0)
        return true;
    return btree_next(n);
}

const char *collection_db(const collection_t *c)
{
    return c->db;
}

void collection_rename(collection_t *c, const char *db, const char *name)
{
    bson_free(c->db);
    bson_free(c->name);
    bson_free(c->ns);
    c->db = bson_strdup(db);
    c->name = bson_strdup(name);
    c->ns = bson_strdup_printf("%s.%s", db, name);
}

uint64_t collection_id(const collection_t *c)
{
    return c->id;
}

const char *collection_ns(const collection_t *c)
{
    return c->ns;
}

const char *collection_name(const collection_t *c)
{
    return c->name;
}

const bson_t *collection_options(const collection_t *c)
{
    return &c->options;
}

const uint8_t *collection_uuid(const collection_t *c)
{
    return c->uuid;
}

void collection_set_uuid(collection_t *c, const uint8_t *uuid)
{
    memcpy(c->uuid, uuid, 16);
}

size_t collection_count(const collection_t *c)
{
    return c->count;
}

size_t collection_data_size(const collection_t *c)
{
    return c->data_size;
}

int collection_nindexes(const collection_t *c)
{
    return c->nindexes;
}

index_t *collection_index(const collection_t *c, int i)
{
    return i >= 0 && i < c->nindexes ? c->indexes[i] : NULL;
}

bool collection_doc_id(const bson_t *doc, bson_value_t *id)
{
    bson_iter_t it;
    if (!bson_iter_init_find(&it, doc, "_id"))
        return false;
    *id = *bson_iter_value(&it);
    return true;
}

record_t *collection_find_id(const collection_t *c, const bson_value_t *id)
{
    buf_t key;
    uint8_t key_room[64];
    buf_init_fixed(&key, key_room, sizeof key_room);
    keystring_append_coll(&key, id, false, c->indexes[0]->collation);
    record_t *r = btree_get(c->indexes[0]->map, key.data, key.len);
    buf_destroy(&key);
    return r;
}

/* Index keys of one document for every index. */
typedef struct collection_keys {
    index_keys_t per[COLLECTION_MAX_INDEXES];
    int n;
} collection_keys_t;

static void collection_keys_destroy(collection_keys_t *k)
{
    for (int i = 0; i < k->n; i++)
        index_keys_destroy(&k->per[i]);
    k->n = 0;
}

static bool collection_keys_of(collection_t *c, const bson_t *doc, collection_keys_t *out,
                               dberr_t *err)
{
    out->n = 0;
    for (int i = 0; i < c->nindexes; i++) {
        index_keys_init(&out->per[i]);
        out->n++;
        if (!index_keys_of(c->indexes[i], doc, &out->per[i], err))
            return false;
    }
    return true;
}

/* Checks every unique index for a key held by a record other than `self`. */
static bool collection_check_unique(collection_t *c, const bson_t *doc,
                                    const collection_keys_t *keys, const record_t *self,
                                    dberr_t *err)
{
    for (int i = 0; i < c->nindexes; i++) {
        index_t *ix = c->indexes[i];
        if (!ix->unique || keys->per[i].skip)
            continue;
        for (size_t k = 0; k < keys->per[i].len; k++)
            if (index_unique_conflict(ix, &keys->per[i].keys[k], self))
                return index_dup_error(ix, c->ns, doc, err);
    }
    return true;
}

void collection_index_put(index_t *ix, const index_keys_t *keys, const bson_value_t *id,
                          record_t *r)
{
    if (keys->skip)
        return;
    buf_t mk;
    uint8_t mk_room[128];
    buf_init_fixed(&mk, mk_room, sizeof mk_room);
    for (size_t k = 0; k < keys->len; k++) {
        index_map_key(ix, &keys->keys[k], id, &mk);
        if (r)
            btree_insert(ix->map, mk.data, mk.len, r);
        else
            btree_remove(ix->map, mk.data, mk.len);
    }
    buf_destroy(&mk);
}

bool collection_insert(collection_t *c, const bson_t *doc, dberr_t *err)
{
    bson_value_t id;
    bool ok = false;
    collection_keys_t keys = {0};
    if (!collection_doc_id(doc, &id))
        return dberr_set(err, DBERR_INTERNAL_ERROR, "document to insert has no _id");
    if (c->capped && (int64_t)doc->len > capped_size(c->capped)) {
        dberr_set(err, DBERR_BAD_VALUE, "object to insert exceeds cappedMaxSize");
        goto cleanup;
    }
    if (!collection_keys_of(c, doc, &keys, err))
        goto cleanup;
    if (!collection_check_unique(c, doc, &keys, NULL, err))
        goto cleanup;
    record_t *r = record_new(doc);
    mvcc_stamp(r);
    mvcc_inserted(c->id, r);
    for (int i = 0; i < c->nindexes; i++)
        collection_index_put(c->indexes[i], &keys.per[i], &id, r);
    indexbuild_note_insert(c, doc, r);
    c->count++;
    c->data_size += doc->len;
    const store_observer_t *obs = c->quiet ? NULL : store_observer_get();
    if (obs && obs->insert)
        obs->insert(c->db, c->name, c->uuid, doc, obs->ctx);
    if (c->capped) {
        capped_append(c->capped, &id, r);
        if (!collection_no_capped_trim)
            collection_capped_trim(c, r);
    }
    ok = true;
cleanup:
    collection_keys_destroy(&keys);
    return ok;
}

static bool collection_same_keys(const index_keys_t *a, const index_keys_t *b)
{
    if (a->skip != b->skip || a->len != b->len)
        return false;
    for (size_t i = 0; i < a->len; i++)
        if (a->keys[i].len != b->keys[i].len ||
            memcmp(a->keys[i].data, b->keys[i].data, a->keys[i].len) != 0)
            return false;
    return true;
}

/* True when `a` and `b` are the same value in the same encoding, so their
 * index keys are equal without encoding both; false also for the types
 * not told apart here (then the keys are compared). */
static bool collection_id_identical(const bson_value_t *a, const bson_value_t *b)
{
    if (a->value_type != b->value_type)
        return false;
    switch (a->value_type) {
    case BSON_TYPE_INT32:
        return a->value.v_int32 == b->value.v_int32;
    case BSON_TYPE_INT64:
        return a->value.v_int64 == b->value.v_int64;
    case BSON_TYPE_OID:
        return memcmp(&a->value.v_oid, &b->value.v_oid, sizeof a->value.v_oid) == 0;
    case BSON_TYPE_UTF8:
        return a->value.v_utf8.len == b->value.v_utf8.len &&
               memcmp(a->value.v_utf8.str, b->value.v_utf8.str, a->value.v_utf8.len) == 0;
    case BSON_TYPE_BINARY:
        return a->value.v_binary.subtype == b->value.v_binary.subtype &&
               a->value.v_binary.data_len == b->value.v_binary.data_len &&
               memcmp(a->value.v_binary.data, b->value.v_binary.data, a->value.v_binary.data_len) ==
                   0;
    default:
        return false;
    }
}

/* Puts `doc` in place of `old` behind `n`, the _id index entry of both
 * (the collection's only index, no index build running): no key sets to
 * build or unique check to make. `old_doc` views `old`, `id` is its _id. */
static void collection_swap_id_only(collection_t *c, btree_pos_t *n, record_t *old,
                                    const bson_t *old_doc, const bson_value_t *id,
                                    const bson_t *doc)
{
    record_t *r = record_new(doc);
    mvcc_stamp(r);
    mvcc_replaced(c->id, r, old);
    btree_pos_set_value(n, r);
    if (c->capped)
        capped_replace(c->capped, id, r);
    c->data_size += doc->len;
    c->data_size -= record_len(old);
    const store_observer_t *obs = c->quiet ? NULL : store_observer_get();
    if (obs && obs->update)
        obs->update(c->db, c->name, c->uuid, old_doc, doc, obs->ctx);
    record_unref(old); /* the collection's reference */
}

/* The common case of collection_replace: only the _id index, and the new
 * document's _id has the same key: one lookup repoints the entry, no key
 * sets to build or unique check to make. False (nothing done) otherwise. */
static bool collection_replace_id_only(collection_t *c, record_t *old, const bson_t *old_doc,
                                       const bson_value_t *id, const bson_t *doc)
{
    bson_value_t new_id;
    if (!collection_doc_id(doc, &new_id))
        return false;
    buf_t key, new_key;
    uint8_t key_room[64], new_key_room[64];
    buf_init_fixed(&key, key_room, sizeof key_room);
    buf_init_fixed(&new_key, new_key_room, sizeof new_key_room);
    keystring_append_coll(&key, id, false, c->indexes[0]->collation);
    bool same = collection_id_identical(id, &new_id);
    if (!same) {
        keystring_append_coll(&new_key, &new_id, false, c->indexes[0]->collation);
        same = key.len == new_key.len && memcmp(key.data, new_key.data, key.len) == 0;
    }
    btree_pos_t n;
    bool found = same && btree_find(c->indexes[0]->map, key.data, key.len, &n);
    buf_destroy(&key);
    buf_destroy(&new_key);
    if (!found)
        return false;
    collection_swap_id_only(c, &n, old, old_doc, id, doc);
    return true;
}

bool collection_put(collection_t *c, const bson_t *doc, dberr_t *err)
{
    bson_value_t id, old_id;
    bson_t old_doc;
    if (!collection_doc_id(doc, &id))
        return dberr_set(err, DBERR_INTERNAL_ERROR, "document to store has no _id");
    buf_t key;
    uint8_t key_room[64];
    buf_init_fixed(&key, key_room, sizeof key_room);
    keystring_append_coll(&key, &id, false, c->indexes[0]->collation);
    btree_pos_t n;
    bool found = btree_find(c->indexes[0]->map, key.data, key.len, &n);
    buf_destroy(&key);
    if (!found)
        return collection_insert(c, doc, err);
    record_t *old = btree_pos_value(&n);
    if (c->nindexes > 1 || c->builds)
        return collection_replace(c, old, doc, err);
    record_view(old, &old_doc);
    if (!collection_doc_id(&old_doc, &old_id))
        return dberr_set(err, DBERR_INTERNAL_ERROR, "stored document has no _id");
    collection_swap_id_only(c, &n, old, &old_doc, &old_id, doc);
    return true;
}

bool collection_replace(collection_t *c, record_t *old, const bson_t *doc, dberr_t *err)
{
    bson_t old_doc;
    bson_value_t id;
    bool ok = false;
    collection_keys_t old_keys = {0}, new_keys = {0};
    record_view(old, &old_doc);
    if (!collection_doc_id(&old_doc, &id))
        return dberr_set(err, DBERR_INTERNAL_ERROR, "stored document has no _id");
    if (c->nindexes == 1 && !c->builds && collection_replace_id_only(c, old, &old_doc, &id, doc))
        return true;
    if (!collection_keys_of(c, &old_doc, &old_keys, err) ||
        !collection_keys_of(c, doc, &new_keys, err))
        goto cleanup;
    if (!collection_check_unique(c, doc, &new_keys, old, err))
        goto cleanup;
    record_t *r = record_new(doc);
    mvcc_stamp(r);
    mvcc_replaced(c->id, r, old);
    buf_t mk;
    uint8_t mk_room[128];
    buf_init_fixed(&mk, mk_room, sizeof mk_room);
    for (int i = 0; i < c->nindexes; i++) {
        index_t *ix = c->indexes[i];
        if (collection_same_keys(&old_keys.per[i], &new_keys.per[i])) {
            if (old_keys.per[i].skip)
                continue;
            for (size_t k = 0; k < new_keys.per[i].len; k++) {
                index_map_key(ix, &new_keys.per[i].keys[k], &id, &mk);
                btree_pos_t n;
                if (btree_find(ix->map, mk.data, mk.len, &n))
                    btree_pos_set_value(&n, r);
            }
        } else {
            collection_index_put(ix, &old_keys.per[i], &id, NULL);
            collection_index_put(ix, &new_keys.per[i], &id, r);
        }
    }
    buf_destroy(&mk);
    indexbuild_note_remove(c, &old_doc, old);
    indexbuild_note_insert(c, doc, r);
    if (c->capped)
        capped_replace(c->capped, &id, r);
    c->data_size += doc->len;
    c->data_size -= record_len(old);
    const store_observer_t *obs = c->quiet ? NULL : store_observer_get();
    if (obs && obs->update)
        obs->update(c->db, c->name, c->uuid, &old_doc, doc, obs->ctx);
    record_unref(old); /* the collection's reference */
    ok = true;
cleanup:
    collection_keys_destroy(&old_keys);
    collection_keys_destroy(&new_keys);
    return ok;
}

void collection_remove(collection_t *c, record_t *old)
{
    bson_t old_doc;
    bson_value_t id;
    collection_keys_t keys = {0};
    record_view(old, &old_doc);
    if (!collection_doc_id(&old_doc, &id))
        return;
    dberr_t err;
    if (collection_keys_of(c, &old_doc, &keys, &err)) {
        for (int i = 0; i < c->nindexes; i++)
            collection_index_put(c->indexes[i], &keys.per[i], &id, NULL);
    } else {
        /* keys could always be generated when the record went in */
        buf_t key;
        buf_init(&key);
        keystring_append_coll(&key, &id, false, c->indexes[0]->collation);
        btree_remove(c->indexes[0]->map, key.data, key.len);
        buf_destroy(&key);
    }
    collection_keys_destroy(&keys);
    indexbuild_note_remove(c, &old_doc, old);
    if (c->capped)
        capped_remove(c->capped, &id);
    c->count--;
    c->data_size -= record_len(old);
    const store_observer_t *obs = c->quiet ? NULL : store_observer_get();
    if (obs && obs->remove)
        obs->remove(c->db, c->name, c->uuid, &old_doc, obs->ctx);
    mvcc_deleted(c->id, old);
    record_unref(old);
}

void collection_emit_ddl(const collection_t *c, const char *op, const bson_t *spec,
                         const char *name)
{
    const store_observer_t *obs = c->quiet ? NULL : store_observer_get();
    if (!obs || !obs->ddl)
        return;
    bson_t doc = BSON_INITIALIZER;
    BSON_APPEND_UTF8(&doc, op, c->name);
    if (spec)
        BSON_APPEND_DOCUMENT(&doc, "spec", spec);
    if (name)
        BSON_APPEND_UTF8(&doc, "name", name);
    obs->ddl(c->db, &doc, obs->ctx);
    bson_destroy(&doc);
}

bool collection_set_index_hidden(collection_t *c, const char *name, bool hidden)
{
    for (int i = 0; i < c->nindexes; i++) {
        if (strcmp(c->indexes[i]->name, name))
            continue;
        index_set_hidden(c->indexes[i], hidden);
        const store_observer_t *obs = c->quiet ? NULL : store_observer_get();
        if (obs && obs->ddl) {
            bson_t op = BSON_INITIALIZER, ix;
            BSON_APPEND_UTF8(&op, "collMod", c->name);
            bson_append_document_begin(&op, "index", -1, &ix);
            BSON_APPEND_UTF8(&ix, "name", name);
            BSON_APPEND_BOOL(&ix, "hidden", hidden);
            bson_append_document_end(&op, &ix);
            obs->ddl(c->db, &op, obs->ctx);
            bson_destroy(&op);
        }
        return true;
    }
    return false;
}

static void collection_drop_at(collection_t *c, int i)
{
    collection_emit_ddl(c, "dropIndex", NULL, c->indexes[i]->name);
    fiber_defer_free(collection_free_index, c->indexes[i]);
    memmove(&c->indexes[i], &c->indexes[i + 1], (size_t)(c->nindexes - i - 1) * sizeof(index_t *));
    c->nindexes--;
}

/* The position of the index named `name` that may be dropped; -1 with err. */
static int collection_droppable(const collection_t *c, const char *name, dberr_t *err)
{
    if (strcmp(name, "_id_") == 0) {
        dberr_set(err, DBERR_INVALID_OPTIONS, "cannot drop _id index");
        return -1;
    }
    for (int i = 1; i < c->nindexes; i++)
        if (strcmp(c->indexes[i]->name, name) == 0)
            return i;
    dberr_set(err, DBERR_INDEX_NOT_FOUND, "index not found with name [%s]", name);
    return -1;
}

bool collection_can_drop_index(const collection_t *c, const char *name, dberr_t *err)
{
    return indexbuild_running(c, name) || collection_droppable(c, name, err) > 0;
}

bool collection_drop_index(collection_t *c, const char *name, dberr_t *err)
{
    if (indexbuild_abort(c, name)) /* dropping an index being built stops the build (mongod) */
        return true;
    int i = collection_droppable(c, name, err);
    if (i < 0)
        return false;
    collection_drop_at(c, i);
    return true;
}

bool collection_drop_index_by_key(collection_t *c, const bson_t *key, dberr_t *err)
{
    int matches = 0; /* wildcard indexes of other projections share a key pattern */
    for (int i = 0; i < c->nindexes; i++)
        matches += index_key_equals(c->indexes[i], key);
    if (matches > 1) {
        char *shown = shellfmt_doc(key);
        dberr_set(err, 119 /* AmbiguousIndexKeyPattern */,
                  "%d indexes found for key: %s, identify by name instead.", matches, shown);
        bson_free(shown);
        return false;
    }
    for (int i = 0; i < c->nindexes; i++) {
        if (index_key_equals(c->indexes[i], key)) {
            if (i == 0)
                return dberr_set(err, DBERR_INVALID_OPTIONS, "cannot drop _id index");
            collection_drop_at(c, i);
            return true;
        }
    }
    char *shown = shellfmt_doc(key);
    dberr_set(err, DBERR_INDEX_NOT_FOUND, "can't find index with key: %s", shown);
    bson_free(shown);
    return false;
}

void collection_drop_all_indexes(collection_t *c)
{
    while (c->nindexes > 1)
        collection_drop_at(c, c->nindexes - 1);
}
