/* indexbuild: createIndexes on an existing collection, built in slices.
 * The build scans the records in _id order and gives the loop back
 * between slices; meanwhile the write path keeps the new index current
 * for the records the scan has passed (indexbuild_note_*), so at the end
 * it holds exactly the keys of every document. See docs/design.md
 * ("Long operations"). */
#include <string.h>

#include "doc/keystring.h"
#include "store/collection-private.h"
#include "store/textindex.h"
#include "store/wildcard.h"
#include "util/buf.h"
#include "util/fiber.h"
#include "util/omap.h"

/* mongod's codes for a build stopped from outside, and for a second build
 * of an index already being built. */
#define INDEXBUILD_ABORTED 276
#define INDEXBUILD_ALREADY_IN_PROGRESS 325

struct indexbuild {
    index_t *ix;      /* the index being built (owned until it is added) */
    buf_t cursor;     /* keystring of the _id the scan reached */
    bool scanned_any; /* cursor is set */
    bool failed;      /* a write, a drop or dropIndexes stopped it: err says why */
    dberr_t err;
    indexbuild_t *next; /* the collection's other builds */
};

static void indexbuild_fail(indexbuild_t *b, const dberr_t *why)
{
    if (b->failed)
        return;
    b->failed = true;
    b->err = *why;
}

/* True when the scan of `b` has passed the record whose _id key is `idkey`:
 * its keys are the write path's to maintain. */
static bool indexbuild_behind(const indexbuild_t *b, const buf_t *idkey)
{
    return b->scanned_any &&
           omap_keycmp(idkey->data, idkey->len, b->cursor.data, b->cursor.len) <= 0;
}

/* The _id keystring of `doc` into `out`; false when it has no _id. */
static bool indexbuild_id_key(const bson_t *doc, bson_value_t *id, buf_t *out)
{
    if (!collection_doc_id(doc, id))
        return false;
    keystring_append(out, id, false);
    return true;
}

/* Adds the keys of `r` (document `doc`, _id `id`) to the index of `b`; a
 * key another record holds in a unique index fails the build. */
static bool indexbuild_add(indexbuild_t *b, const char *ns, const bson_t *doc,
                           const bson_value_t *id, record_t *r, dberr_t *err)
{
    index_t *ix = b->ix;
    index_keys_t keys;
    bool ok = false;
    index_keys_init(&keys);
    if (!index_keys_of(ix, doc, &keys, err))
        goto cleanup;
    if (ix->unique && !keys.skip)
        for (size_t k = 0; k < keys.len; k++)
            if (index_unique_conflict(ix, &keys.keys[k], r)) {
                index_dup_error(ix, ns, doc, err);
                goto cleanup;
            }
    collection_index_put(ix, &keys, id, r);
    ok = true;
cleanup:
    index_keys_destroy(&keys);
    return ok;
}

void indexbuild_note_insert(collection_t *c, const bson_t *doc, record_t *r)
{
    if (!c->builds)
        return;
    buf_t idkey;
    bson_value_t id;
    buf_init(&idkey);
    if (indexbuild_id_key(doc, &id, &idkey))
        for (indexbuild_t *b = c->builds; b; b = b->next) {
            dberr_t err;
            if (!b->failed && indexbuild_behind(b, &idkey) &&
                !indexbuild_add(b, c->ns, doc, &id, r, &err))
                indexbuild_fail(b, &err);
        }
    buf_destroy(&idkey);
}

void indexbuild_note_remove(collection_t *c, const bson_t *old_doc, record_t *old)
{
    if (!c->builds)
        return;
    buf_t idkey, mk;
    bson_value_t id;
    buf_init(&idkey);
    buf_init(&mk);
    if (indexbuild_id_key(old_doc, &id, &idkey))
        for (indexbuild_t *b = c->builds; b; b = b->next) {
            if (b->failed || !indexbuild_behind(b, &idkey))
                continue;
            index_keys_t keys;
            dberr_t err;
            index_keys_init(&keys);
            if (index_keys_of(b->ix, old_doc, &keys, &err) && !keys.skip)
                for (size_t k = 0; k < keys.len; k++) {
                    index_map_key(b->ix, &keys.keys[k], &id, &mk);
                    /* a unique key is the record's only if it is the one
                     * holding it */
                    if (btree_get(b->ix->map, mk.data, mk.len) == old)
                        btree_remove(b->ix->map, mk.data, mk.len);
                }
            index_keys_destroy(&keys);
        }
    buf_destroy(&idkey);
    buf_destroy(&mk);
}

void indexbuild_abort_all(collection_t *c, const char *why)
{
    for (indexbuild_t *b = c->builds; b; b = b->next) {
        dberr_t err;
        dberr_set(&err, INDEXBUILD_ABORTED, "Index build aborted: %s: %s", b->ix->name, why);
        indexbuild_fail(b, &err);
    }
}

static indexbuild_t *indexbuild_find(const collection_t *c, const char *name)
{
    for (indexbuild_t *b = c->builds; b; b = b->next)
        if (!b->failed && strcmp(b->ix->name, name) == 0)
            return b;
    return NULL;
}

bool indexbuild_running(const collection_t *c, const char *name)
{
    return indexbuild_find(c, name) != NULL;
}

bool indexbuild_abort(collection_t *c, const char *name)
{
    indexbuild_t *b = indexbuild_find(c, name);
    if (!b)
        return false;
    dberr_t err;
    dberr_set(&err, INDEXBUILD_ABORTED,
              "Index build aborted: %s: Index build aborted due to dropIndexes command on %s", name,
              c->ns);
    indexbuild_fail(b, &err);
    return true;
}

/* The checks before a build: an identical index exists (true, *exists),
 * or a conflicting one (false with err). */
static bool indexbuild_check(collection_t *c, const index_t *ix, bool *exists, dberr_t *err)
{
    *exists = false;
    for (int i = 0; i < c->nindexes; i++) {
        index_t *old = c->indexes[i];
        /* as mongod, a wildcardProjection is part of what an index is */
        bool same_key = bson_equal(&old->key, &ix->key) &&
                        wildcard_same(old->wildcard, ix->wildcard);
        bool same_name = strcmp(old->name, ix->name) == 0;
        if (same_key && same_name) {
            bool same_opts = old->unique == ix->unique && old->sparse == ix->sparse &&
                             old->expire_after_s == ix->expire_after_s &&
                             !old->partial == !ix->partial;
            if (old->text && ix->text && !textindex_same(old->text, ix->text))
                same_opts = false;
            if (old->geo2d && ix->geo2d && /* a 2d index's plane is part of it */
                (old->geo2d->bits != ix->geo2d->bits || old->geo2d->min != ix->geo2d->min ||
                 old->geo2d->max != ix->geo2d->max))
                same_opts = false;
            if (!same_opts && !old->is_id)
                return dberr_set(err, DBERR_INDEX_OPTIONS_CONFLICT,
                                 "An existing index has the same name as the requested index. "
                                 "When index names are not specified, they are auto generated "
                                 "and can cause conflicts. Please refer to our documentation. "
                                 "Requested index: %s, existing index: %s",
                                 old->name, old->name);
            *exists = true;
            return true;
        }
        if (same_name)
            return dberr_set(err, DBERR_INDEX_KEY_SPECS_CONFLICT,
                             "An existing index has the same name as the requested index. When "
                             "index names are not specified, they are auto generated and can "
                             "cause conflicts. Please refer to our documentation. Requested "
                             "index: %s, existing index: %s",
                             ix->name, old->name);
        if (same_key && !old->partial && !ix->partial)
            return dberr_set(err, DBERR_INDEX_OPTIONS_CONFLICT,
                             "Index already exists with a different name: %s", old->name);
    }
    for (int i = 0; ix->text && i < c->nindexes; i++)
        if (c->indexes[i]->text)
            return dberr_set(err, DBERR_CANNOT_CREATE_INDEX,
                             "only one text index per collection allowed, found existing text "
                             "index \"%s\"",
                             c->indexes[i]->name);
    for (indexbuild_t *b = c->builds; ix->text && b; b = b->next)
        if (!b->failed && b->ix->text && strcmp(b->ix->name, ix->name) != 0)
            return dberr_set(err, DBERR_CANNOT_CREATE_INDEX,
                             "only one text index per collection allowed, found existing text "
                             "index \"%s\"",
                             b->ix->name);
    for (indexbuild_t *b = c->builds; b; b = b->next)
        if (!b->failed && (strcmp(b->ix->name, ix->name) == 0 ||
                           (bson_equal(&b->ix->key, &ix->key) && !b->ix->partial && !ix->partial)))
            return dberr_set(err, INDEXBUILD_ALREADY_IN_PROGRESS,
                             "Index build already in progress: index %s on %s", b->ix->name, c->ns);
    if (c->nindexes == COLLECTION_MAX_INDEXES)
        return dberr_set(err, DBERR_CANNOT_CREATE_INDEX,
                         "add index fails, too many indexes for %s key:%s", c->ns, "...");
    return true;
}

static void indexbuild_unlink(collection_t *c, indexbuild_t *b)
{
    for (indexbuild_t **p = &c->builds; *p; p = &(*p)->next)
        if (*p == b) {
            *p = b->next;
            return;
        }
}

/* Scans the records of `c` in _id order into the index of `b`, a slice at
 * a time; between slices the write path maintains what the scan passed. */
static bool indexbuild_scan(collection_t *c, indexbuild_t *b, dberr_t *err)
{
    btree_pos_t n;
    bool more = btree_seek(c->indexes[0]->map, NULL, 0, &n);
    while (more) {
        record_t *r = btree_pos_value(&n);
        bson_t doc;
        bson_value_t id;
        size_t klen;
        const uint8_t *key = btree_pos_key(&n, &klen);
        record_view(r, &doc);
        collection_doc_id(&doc, &id);
        if (!indexbuild_add(b, c->ns, &doc, &id, r, err))
            return false;
        b->cursor.len = 0;
        buf_append(&b->cursor, key, klen);
        b->scanned_any = true;
        uint64_t yields = fiber_yields(fiber_current());
        if (!fiber_check(err))
            return false;
        if (b->failed) {
            *err = b->err;
            return false;
        }
        if (fiber_yields(fiber_current()) == yields) {
            more = btree_next(&n);
            continue;
        }
        /* others ran: `n` may be gone; go on after the cursor */
        more = collection_seek_after(c, &b->cursor, &n);
    }
    return true;
}

bool collection_create_index(collection_t *c, const bson_t *spec, bool *created, dberr_t *err)
{
    *created = false;
    bool exists;
    index_t *ix = index_new(spec, err);
    if (!ix)
        return false;
    if (!indexbuild_check(c, ix, &exists, err) || exists) {
        index_destroy(ix);
        return exists;
    }
    indexbuild_t *b = bson_malloc0(sizeof *b);
    b->ix = ix;
    buf_init(&b->cursor);
    b->next = c->builds;
    c->builds = b;
    bool ok = indexbuild_scan(c, b, err);
    indexbuild_unlink(c, b);
    if (ok && b->failed) { /* stopped by the last write before the end */
        *err = b->err;
        ok = false;
    }
    if (ok && c->nindexes == COLLECTION_MAX_INDEXES) /* others finished meanwhile */
        ok = dberr_set(err, DBERR_CANNOT_CREATE_INDEX,
                       "add index fails, too many indexes for %s key:%s", c->ns, "...");
    if (ok) {
        c->indexes[c->nindexes++] = ix;
        *created = true;
        collection_emit_ddl(c, "createIndex", &ix->spec, NULL);
    } else {
        collection_index_free(ix);
    }
    buf_destroy(&b->cursor);
    bson_free(b);
    return ok;
}
