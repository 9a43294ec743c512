/* csevent: change events — turns the history's commits (journal/history.h)
 * into mongod 7's change event documents for one stream (namespace
 * filter, updateDescription, pre- and post-images, invalidate), applies
 * the stream's following stages, and encodes resume tokens. */
#include "cmd/changestream.h"

#include <inttypes.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "doc/compare.h"
#include "journal/journal.h"
#include "store/catalog.h"
#include "store/collection.h"
#include "util/bsonview.h"

#define CS_MAX_BATCH_BYTES (16 * 1024 * 1024 - 64 * 1024)

int cs_pos_cmp(cs_pos_t a, cs_pos_t b)
{
    int c = clock_cmp(a.ts, b.ts);
    if (c)
        return c;
    if (a.k != b.k)
        return a.k < b.k ? -1 : 1;
    return a.kind < b.kind ? -1 : a.kind > b.kind;
}

/* ---- resume tokens: {_data: "82" + hex(t, i, k, kind)}, upper-case hex
 * of fixed width so that tokens sort as strings in commit order (as
 * mongod's KeyString-encoded ones do) ---- */

#define CS_TOKEN_LEN (2 + 8 + 8 + 16 + 2)

void cs_append_token(bson_t *out, const char *key, cs_pos_t pos)
{
    static const char digits[] = "0123456789ABCDEF";
    char hex[CS_TOKEN_LEN + 1];
    bson_t tok;
    uint64_t parts[4] = {pos.ts.t, pos.ts.i, pos.k, pos.kind};
    int widths[4] = {8, 8, 16, 2}, o = 2;
    hex[0] = '8';
    hex[1] = '2';
    for (int p = 0; p < 4; p++)
        for (int d = widths[p] - 1; d >= 0; d--)
            hex[o++] = digits[(parts[p] >> (4 * d)) & 0xf];
    hex[o] = 0;
    bson_append_document_begin(out, key, -1, &tok);
    BSON_APPEND_UTF8(&tok, "_data", hex);
    bson_append_document_end(out, &tok);
}

static bool cs_hex(const char *s, int n, uint64_t *out)
{
    uint64_t v = 0;
    for (int i = 0; i < n; i++) {
        char ch = s[i];
        int d = ch >= '0' && ch <= '9' ? ch - '0' : ch >= 'A' && ch <= 'F' ? ch - 'A' + 10 : -1;
        if (d < 0)
            return false;
        v = v << 4 | (uint64_t)d;
    }
    *out = v;
    return true;
}

bool cs_parse_token(const bson_iter_t *it, const char *field, cs_pos_t *out, dberr_t *err)
{
    bson_t doc;
    bson_iter_t d;
    uint64_t t, i, k, kind;
    if (!BSON_ITER_HOLDS_DOCUMENT(it) || !cmd_iter_doc(it, &doc))
        return cmd_wrong_type(err, it, "type 'object'", "$changeStream.%s", field);
    if (!bson_iter_init_find(&d, &doc, "_data"))
        return dberr_set(err, 260, "Bad resume token: _data of missing or of wrong type. "
                                   "Expected string, got %s",
                         "missing");
    if (!BSON_ITER_HOLDS_UTF8(&d))
        return dberr_set(err, 260, "Bad resume token: _data of missing or of wrong type. "
                                   "Expected string, got %s",
                         shellfmt_type_name(bson_iter_type(&d)));
    uint32_t len;
    const char *s = bson_iter_utf8(&d, &len);
    if (len != CS_TOKEN_LEN || strncmp(s, "82", 2) != 0 || !cs_hex(s + 2, 8, &t) ||
        !cs_hex(s + 10, 8, &i) || !cs_hex(s + 18, 16, &k) || !cs_hex(s + 34, 2, &kind) ||
        kind > 1)
        return dberr_set(err, 260, "Bad resume token: '%s' is not a resume token this server "
                                   "issued",
                         s);
    out->ts.t = (uint32_t)t;
    out->ts.i = (uint32_t)i;
    out->k = k;
    out->kind = (uint8_t)kind;
    return true;
}

bool cs_check_history(cs_pos_t pos, dberr_t *err)
{
    clock_ts_t h = history_horizon();
    cs_pos_t end = {h, CS_K_END, 1};
    if ((h.t || h.i) && cs_pos_cmp(pos, end) < 0) {
        dberr_set(err, 286, "Resume of change stream was not possible, as the resume point may "
                            "no longer be in the oplog. (the change history begins after "
                            "Timestamp(%u, %u); see --change-stream-history)",
                  h.t, h.i);
        err->labels |= DBERR_LABEL_NON_RESUMABLE_CS;
        return false;
    }
    return true;
}

/* ---- updateDescription ---- */

/* A path's components while diffing: field names and array indexes. */
typedef struct cs_comp {
    const char *key;
    bool index; /* an array element: key is its decimal index */
} cs_comp_t;

#define CS_DIFF_DEPTH 100

typedef struct cs_diff {
    bson_t updated, removed, truncated, disambiguated;
    uint32_t nremoved, ntruncated;
    bool expanded; /* showExpandedEvents: fill disambiguated */
    cs_comp_t comps[CS_DIFF_DEPTH];
    int depth;
} cs_diff_t;

static bool cs_same(const bson_iter_t *a, const bson_iter_t *b)
{
    if (bson_iter_type(a) != bson_iter_type(b))
        return false;
    const bson_value_t *va = bson_iter_value((bson_iter_t *)a);
    const bson_value_t *vb = bson_iter_value((bson_iter_t *)b);
    if (va->value_type == BSON_TYPE_DOCUMENT || va->value_type == BSON_TYPE_ARRAY)
        return va->value.v_doc.data_len == vb->value.v_doc.data_len &&
               memcmp(va->value.v_doc.data, vb->value.v_doc.data, va->value.v_doc.data_len) == 0;
    return compare_equal(va, vb);
}

static void cs_path(char *out, size_t size, const char *prefix, const char *key)
{
    size_t lp = strlen(prefix), lk = strlen(key);
    if (lp + 1 + lk + 1 > size) { /* too deep to name: cut, as mongod's paths are bounded */
        lp = lp < size - 1 ? lp : size - 1;
        lk = 0;
    }
    memcpy(out, prefix, lp);
    if (lp && lk)
        out[lp++] = '.';
    memcpy(out + lp, key, lk);
    out[lp + lk] = 0;
}

/* showExpandedEvents: a path whose dotted form is ambiguous (a field
 * name that is a number or holds a dot) is listed in disambiguatedPaths
 * with its components, array indexes as integers, as mongod 7 does. */
static void cs_note_path(cs_diff_t *d, const char *path)
{
    if (!d->expanded)
        return;
    bool ambiguous = false;
    for (int i = 0; i < d->depth && !ambiguous; i++) {
        const char *k = d->comps[i].key;
        if (d->comps[i].index)
            continue;
        bool digits = *k != 0;
        for (const char *p = k; *p; p++)
            digits = digits && *p >= '0' && *p <= '9';
        ambiguous = digits || strchr(k, '.');
    }
    if (!ambiguous)
        return;
    bson_t arr;
    char key[16];
    bson_append_array_begin(&d->disambiguated, path, -1, &arr);
    for (int i = 0; i < d->depth; i++) {
        if (d->comps[i].index)
            bson_append_int32(&arr, cmd_index_key((uint32_t)i, key, sizeof key), -1,
                              atoi(d->comps[i].key));
        else
            bson_append_utf8(&arr, cmd_index_key((uint32_t)i, key, sizeof key), -1,
                             d->comps[i].key, -1);
    }
    bson_append_array_end(&d->disambiguated, &arr);
}

static void cs_diff_docs(cs_diff_t *d, const bson_t *old_doc, const bson_t *new_doc,
                         const char *prefix, bool arrays);

static void cs_set(cs_diff_t *d, const char *path, const bson_iter_t *n)
{
    bson_append_value(&d->updated, path, -1, bson_iter_value((bson_iter_t *)n));
    cs_note_path(d, path);
}

/* One field present in both: the same, a nested change, or a new value. */
static void cs_diff_value(cs_diff_t *d, bson_iter_t *o, bson_iter_t *n, const char *path)
{
    if (cs_same(o, n))
        return;
    bson_t a, b;
    if (d->depth < CS_DIFF_DEPTH && BSON_ITER_HOLDS_DOCUMENT(o) && BSON_ITER_HOLDS_DOCUMENT(n) &&
        cmd_iter_doc(o, &a) && cmd_iter_doc(n, &b)) {
        cs_diff_docs(d, &a, &b, path, false);
        return;
    }
    if (d->depth < CS_DIFF_DEPTH && BSON_ITER_HOLDS_ARRAY(o) && BSON_ITER_HOLDS_ARRAY(n) &&
        cmd_iter_doc(o, &a) && cmd_iter_doc(n, &b)) {
        uint32_t na = bson_count_keys(&a), nb = bson_count_keys(&b);
        if (nb < na) {
            bson_t t;
            char key[16];
            bson_append_document_begin(&d->truncated, cmd_index_key(d->ntruncated++, key,
                                                                     sizeof key),
                                       -1, &t);
            BSON_APPEND_UTF8(&t, "field", path);
            BSON_APPEND_INT32(&t, "newSize", (int32_t)nb);
            bson_append_document_end(&d->truncated, &t);
        }
        cs_diff_docs(d, &a, &b, path, true);
        return;
    }
    cs_set(d, path, n);
}

static void cs_diff_docs(cs_diff_t *d, const bson_t *old_doc, const bson_t *new_doc,
                         const char *prefix, bool arrays)
{
    bson_iter_t n, o;
    char path[1024];
    int depth = d->depth++;
    bson_iter_init(&n, new_doc);
    while (bson_iter_next(&n)) {
        d->comps[depth] = (cs_comp_t){bson_iter_key(&n), arrays};
        cs_path(path, sizeof path, prefix, bson_iter_key(&n));
        if (bson_iter_init_find(&o, old_doc, bson_iter_key(&n)))
            cs_diff_value(d, &o, &n, path);
        else
            cs_set(d, path, &n);
    }
    if (!arrays) { /* removed array elements are in truncatedArrays */
        bson_iter_init(&o, old_doc);
        while (bson_iter_next(&o)) {
            if (bson_has_field(new_doc, bson_iter_key(&o)))
                continue;
            char key[16];
            d->comps[depth] = (cs_comp_t){bson_iter_key(&o), false};
            cs_path(path, sizeof path, prefix, bson_iter_key(&o));
            bson_append_utf8(&d->removed, cmd_index_key(d->nremoved++, key, sizeof key), -1,
                             path, -1);
            cs_note_path(d, path);
        }
    }
    d->depth = depth;
}

static void cs_append_update_description(bson_t *ev, const bson_t *old_doc,
                                         const bson_t *new_doc, bool expanded)
{
    cs_diff_t diff; /* on the stack: bson_t needs its 128-byte alignment */
    cs_diff_t *d = &diff;
    memset(d, 0, sizeof *d);
    bson_init(&d->updated);
    bson_init(&d->removed);
    bson_init(&d->truncated);
    bson_init(&d->disambiguated);
    d->expanded = expanded;
    cs_diff_docs(d, old_doc, new_doc, "", false);
    bson_t ud;
    bson_append_document_begin(ev, "updateDescription", -1, &ud);
    BSON_APPEND_DOCUMENT(&ud, "updatedFields", &d->updated);
    BSON_APPEND_ARRAY(&ud, "removedFields", &d->removed);
    BSON_APPEND_ARRAY(&ud, "truncatedArrays", &d->truncated);
    if (expanded)
        BSON_APPEND_DOCUMENT(&ud, "disambiguatedPaths", &d->disambiguated);
    bson_append_document_end(ev, &ud);
    bson_destroy(&d->updated);
    bson_destroy(&d->removed);
    bson_destroy(&d->truncated);
    bson_destroy(&d->disambiguated);
}

/* ---- events ---- */

static const char *cs_str(const bson_t *doc, const char *key)
{
    bson_iter_t it;
    if (!bson_iter_init_find(&it, doc, key) || !BSON_ITER_HOLDS_UTF8(&it))
        return NULL;
    return bson_iter_utf8(&it, NULL);
}

/* True when a change to db.coll is one `s` reports. */
static bool cs_watches(const cs_stream_t *s, const char *db, const char *coll)
{
    switch (s->level) {
    case CS_COLLECTION:
        return !strcmp(db, s->db) && coll && !strcmp(coll, s->coll);
    case CS_DATABASE:
        return !strcmp(db, s->db) && (!coll || strncmp(coll, "system.", 7) != 0);
    case CS_CLUSTER:
        return strcmp(db, "admin") && strcmp(db, "config") && strcmp(db, "local") &&
               (!coll || strncmp(coll, "system.", 7) != 0);
    }
    return false;
}

/* True when db.coll keeps pre- and post-images (changeStreamPreAndPostImages). */
static bool cs_images_enabled(const char *db, const char *coll)
{
    collection_t *c = catalog_get(server.catalog, db, coll);
    bson_iter_t it, en;
    bson_t v;
    return c && bson_iter_init_find(&it, collection_options(c), "changeStreamPreAndPostImages") &&
           cmd_iter_doc(&it, &v) && bson_iter_init_find(&en, &v, "enabled") &&
           bson_iter_as_bool(&en);
}

/* What cs_fill's callbacks share. */
typedef struct cs_emit {
    cs_stream_t *s;
    const history_entry_t *e;
    bson_t *batch;
    uint32_t *n;
    int64_t max;
    size_t bytes;
    cs_pos_t last; /* the last event appended */
    bool full;   /* the batch is full: stop */
    bool failed;
    dberr_t *err;
} cs_emit_t;

static void cs_head(bson_t *ev, const cs_emit_t *em, cs_pos_t pos, const char *type)
{
    cs_append_token(ev, "_id", pos);
    BSON_APPEND_UTF8(ev, "operationType", type);
    BSON_APPEND_TIMESTAMP(ev, "clusterTime", em->e->ts.t, em->e->ts.i);
    BSON_APPEND_DATE_TIME(ev, "wallTime", em->e->wall_ms);
}

/* showExpandedEvents: the collection's UUID, as the change recorded it
 * (`op`'s ui) or, for a catalog change, as the collection is now. */
static void cs_uuid(bson_t *ev, const cs_emit_t *em, const bson_t *op, const char *db,
                    const char *coll)
{
    bson_iter_t it;
    collection_t *c;
    if (!em->s->show_expanded)
        return;
    if (op && bson_iter_init_find(&it, op, "ui"))
        bson_append_value(ev, "collectionUUID", -1, bson_iter_value(&it));
    else if (coll && (c = catalog_get(server.catalog, db, coll)))
        bson_append_binary(ev, "collectionUUID", -1, BSON_SUBTYPE_UUID, collection_uuid(c), 16);
}

static void cs_ns(bson_t *ev, const char *key, const char *db, const char *coll)
{
    bson_t ns;
    bson_append_document_begin(ev, key, -1, &ns);
    BSON_APPEND_UTF8(&ns, "db", db);
    if (coll)
        BSON_APPEND_UTF8(&ns, "coll", coll);
    bson_append_document_end(ev, &ns);
}

static void cs_txn_fields(bson_t *ev, const cs_emit_t *em)
{
    bson_t lsid, doc;
    bson_iter_t it;
    history_entry_view(em->e, &doc);
    if (bsonview_field(&doc, "lsid", &lsid) && bson_iter_init_find(&it, &doc, "txnNumber")) {
        BSON_APPEND_DOCUMENT(ev, "lsid", &lsid);
        BSON_APPEND_INT64(ev, "txnNumber", bson_iter_as_int64(&it));
    }
}

/* Runs the stream's stages over `ev` and appends what comes out. */
static void cs_deliver(cs_emit_t *em, cs_pos_t pos, bson_t *ev)
{
    cs_stream_t *s = em->s;
    s->pos = pos;
    bson_t *out = ev;
    doclist_t docs;
    doclist_init(&docs);
    if (s->pipeline) {
        doclist_push(&docs, bson_copy(ev));
        if (!pipeline_run(s->pipeline, &docs, em->err)) {
            em->failed = true;
            goto cleanup;
        }
        if (docs.len == 0)
            goto cleanup; /* filtered out */
        out = docs.docs[0];
        bson_iter_t a, b;
        if (!bson_iter_init_find(&a, out, "_id") || !bson_iter_init_find(&b, ev, "_id") ||
            !cs_same(&a, &b)) {
            dberr_set(em->err, 280, "Encountered an event whose _id field, which contains the "
                                    "resume token, was modified by the pipeline. Modifying the "
                                    "_id field of an event makes it impossible to resume the "
                                    "stream from that point. Only transformations that retain "
                                    "the unmodified _id field are allowed.");
            em->err->labels |= DBERR_LABEL_NON_RESUMABLE_CS;
            em->failed = true;
            goto cleanup;
        }
    }
    char key[16];
    bson_append_document(em->batch, cmd_index_key((*em->n)++, key, sizeof key), -1, out);
    em->last = pos;
    em->bytes += out->len;
    if ((em->max > 0 && *em->n >= em->max) || em->bytes >= CS_MAX_BATCH_BYTES)
        em->full = true;
cleanup:
    doclist_destroy(&docs);
}

/* The image an event carries as `key` (fullDocument or
 * fullDocumentBeforeChange): `img` from the history, or null. */
static bool cs_image(cs_emit_t *em, bson_t *ev, const char *key, cs_image_t mode,
                     const char *db, const char *coll, const bson_t *img, const char *what)
{
    if (mode == CS_IMAGE_DEFAULT)
        return true;
    if (mode != CS_IMAGE_LOOKUP && img && cs_images_enabled(db, coll)) {
        BSON_APPEND_DOCUMENT(ev, key, img);
        return true;
    }
    if (mode == CS_IMAGE_REQUIRED) {
        dberr_set(em->err, 47, "Change stream was configured to require a %s for all update, "
                               "delete and replace events, but the %s was not found for event "
                               "on %s.%s (enable changeStreamPreAndPostImages on the "
                               "collection)",
                  what, what, db, coll);
        em->failed = true;
        return false;
    }
    BSON_APPEND_NULL(ev, key);
    return true;
}

/* Builds into `ev` (initialised) the event of a document change: insert,
 * update, replace or delete; false (em->failed set) when an image it
 * requires is missing. */
static bool cs_doc_event_build(cs_emit_t *em, cs_pos_t pos, const bson_t *op, const char *kind,
                               const char *db, const char *coll, bson_t *ev)
{
    cs_stream_t *s = em->s;
    bson_t doc, old, key = BSON_INITIALIZER;
    bool has_doc = bsonview_field(op, "doc", &doc), has_old = bsonview_field(op, "old", &old);
    bson_iter_t id;
    if ((has_doc && bson_iter_init_find(&id, &doc, "_id")) ||
        (has_old && bson_iter_init_find(&id, &old, "_id")))
        bson_append_value(&key, "_id", 3, bson_iter_value(&id));
    const char *type = kind[0] == 'i' ? "insert" : kind[0] == 'u' ? "update"
                                                  : kind[0] == 'r' ? "replace"
                                                                   : "delete";
    cs_head(ev, em, pos, type);
    cs_uuid(ev, em, op, db, coll);
    if ((kind[0] == 'i' || kind[0] == 'r') && has_doc)
        BSON_APPEND_DOCUMENT(ev, "fullDocument", &doc);
    cs_ns(ev, "ns", db, coll);
    BSON_APPEND_DOCUMENT(ev, "documentKey", &key);
    bool ok = true;
    if (kind[0] == 'u' && has_doc && has_old) {
        cs_append_update_description(ev, &old, &doc, s->show_expanded);
        if (s->full_document == CS_IMAGE_LOOKUP) {
            collection_t *c = catalog_get(server.catalog, db, coll);
            record_t *r = c && bson_iter_init_find(&id, &key, "_id")
                              ? collection_find_id(c, bson_iter_value(&id))
                              : NULL;
            bson_t now;
            if (r) {
                record_view(r, &now);
                BSON_APPEND_DOCUMENT(ev, "fullDocument", &now);
            } else {
                BSON_APPEND_NULL(ev, "fullDocument");
            }
        } else {
            ok = cs_image(em, ev, "fullDocument", s->full_document, db, coll, &doc,
                          "post-image");
        }
    }
    if (ok && kind[0] != 'i')
        ok = cs_image(em, ev, "fullDocumentBeforeChange", s->before_change, db, coll,
                      has_old ? &old : NULL, "pre-image");
    if (ok)
        cs_txn_fields(ev, em);
    bson_destroy(&key);
    return ok;
}

/* A document change's event, delivered to the stream. */
static void cs_doc_event(cs_emit_t *em, cs_pos_t pos, const bson_t *op, const char *kind,
                         const char *db, const char *coll)
{
    bson_t ev = BSON_INITIALIZER;
    if (cs_doc_event_build(em, pos, op, kind, db, coll, &ev))
        cs_deliver(em, pos, &ev);
    bson_destroy(&ev);
}

/* An event without a document: drop, rename, dropDatabase, create... */
static void cs_simple_event(cs_emit_t *em, cs_pos_t pos, const char *type, const char *db,
                            const char *coll, const bson_t *desc, const char *to_db,
                            const char *to_coll)
{
    bson_t ev = BSON_INITIALIZER;
    cs_head(&ev, em, pos, type);
    cs_uuid(&ev, em, NULL, db, to_db ? to_coll : coll);
    cs_ns(&ev, "ns", db, coll);
    if (to_db)
        cs_ns(&ev, "to", to_db, to_coll);
    if (desc && em->s->show_expanded)
        BSON_APPEND_DOCUMENT(&ev, "operationDescription", desc);
    cs_txn_fields(&ev, em);
    cs_deliver(em, pos, &ev);
    bson_destroy(&ev);
}

static void cs_invalidate(cs_emit_t *em, cs_pos_t pos)
{
    bson_t ev = BSON_INITIALIZER;
    pos.kind = 1;
    cs_head(&ev, em, pos, "invalidate");
    em->s->pos = pos;
    char key[16];
    /* the stages do not filter an invalidate (mongod runs them, but an
     * invalidate always ends the stream) */
    bson_append_document(em->batch, cmd_index_key((*em->n)++, key, sizeof key), -1, &ev);
    em->s->reader.ended = true; /* the invalidate was returned */
    em->full = true;
    bson_destroy(&ev);
}

/* Calls the event for sub-position `sub` of operation base `k` when it is
 * after the stream's position; true when the caller should go on. */
#define CS_AT(em, pos, base, sub) ((pos).k = (base) | (sub), (pos).kind = 0, \
                                   cs_pos_cmp((pos), (em)->s->pos) > 0)

/* The events of one catalog change. */
static void cs_ddl_events(cs_emit_t *em, cs_pos_t pos, uint64_t base, const char *db,
                          const bson_t *cmd)
{
    cs_stream_t *s = em->s;
    const char *name;
    bson_t sub;
    if ((name = cs_str(cmd, "drop"))) {
        if (cs_watches(s, db, name) && CS_AT(em, pos, base, 0))
            cs_simple_event(em, pos, "drop", db, name, NULL, NULL, NULL);
        if (s->level == CS_COLLECTION && cs_watches(s, db, name) && !em->full && !em->failed &&
            (pos.k = base, cs_pos_cmp((cs_pos_t){pos.ts, base, 1}, s->pos) > 0))
            cs_invalidate(em, pos);
    } else if ((name = cs_str(cmd, "rename"))) {
        const char *to_db = cs_str(cmd, "toDb"), *to_coll = cs_str(cmd, "toColl");
        if (!to_db || !to_coll || !cs_watches(s, db, name))
            return;
        bson_t desc = BSON_INITIALIZER, to;
        bson_append_document_begin(&desc, "to", -1, &to);
        BSON_APPEND_UTF8(&to, "db", to_db);
        BSON_APPEND_UTF8(&to, "coll", to_coll);
        bson_append_document_end(&desc, &to);
        bson_iter_t dt;
        if (bson_iter_init_find(&dt, cmd, "dropTarget"))
            bson_append_value(&desc, "dropTarget", -1, bson_iter_value(&dt));
        if (CS_AT(em, pos, base, 0))
            cs_simple_event(em, pos, "rename", db, name, &desc, to_db, to_coll);
        bson_destroy(&desc);
        if (s->level == CS_COLLECTION && !em->full && !em->failed &&
            (pos.k = base, cs_pos_cmp((cs_pos_t){pos.ts, base, 1}, s->pos) > 0))
            cs_invalidate(em, pos);
    } else if (bson_has_field(cmd, "dropDatabase")) {
        bson_iter_t it, el;
        uint64_t i = 0;
        if (bson_iter_init_find(&it, cmd, "colls") && BSON_ITER_HOLDS_ARRAY(&it) &&
            bson_iter_recurse(&it, &el)) {
            while (bson_iter_next(&el) && !em->full && !em->failed) {
                i++;
                const char *c = BSON_ITER_HOLDS_UTF8(&el) ? bson_iter_utf8(&el, NULL) : NULL;
                if (c && cs_watches(s, db, c) && CS_AT(em, pos, base, i))
                    cs_simple_event(em, pos, "drop", db, c, NULL, NULL, NULL);
                if (c && s->level == CS_COLLECTION && cs_watches(s, db, c) && !em->full &&
                    !em->failed && (pos.k = base | i,
                                    cs_pos_cmp((cs_pos_t){pos.ts, base | i, 1}, s->pos) > 0))
                    cs_invalidate(em, pos);
            }
        }
        if (s->level == CS_COLLECTION || em->full || em->failed || !cs_watches(s, db, NULL))
            return;
        i = (1u << 20) - 1;
        if (CS_AT(em, pos, base, i))
            cs_simple_event(em, pos, "dropDatabase", db, NULL, NULL, NULL, NULL);
        if (s->level == CS_DATABASE && !em->full && !em->failed &&
            (pos.k = base | i, cs_pos_cmp((cs_pos_t){pos.ts, base | i, 1}, s->pos) > 0))
            cs_invalidate(em, pos);
    } else if (s->show_expanded) {
        const char *type = NULL;
        bson_t desc = BSON_INITIALIZER;
        if ((name = cs_str(cmd, "create"))) {
            type = "create";
            cmd_append_create_options(&desc, cmd);
        } else if ((name = cs_str(cmd, "createIndex")) || (name = cs_str(cmd, "dropIndex"))) {
            type = bson_has_field(cmd, "createIndex") ? "createIndexes" : "dropIndexes";
            bson_t arr, one;
            bson_append_array_begin(&desc, "indexes", -1, &arr);
            if (bsonview_field(cmd, "spec", &sub)) {
                BSON_APPEND_DOCUMENT(&arr, "0", &sub);
            } else {
                bson_append_document_begin(&arr, "0", -1, &one);
                const char *iname = cs_str(cmd, "name");
                BSON_APPEND_UTF8(&one, "name", iname ? iname : "");
                bson_append_document_end(&arr, &one);
            }
            bson_append_array_end(&desc, &arr);
        } else if ((name = cs_str(cmd, "collMod"))) {
            type = "modify";
            if (bsonview_field(cmd, "options", &sub))
                bson_concat(&desc, &sub);
            if (bsonview_field(cmd, "index", &sub)) /* {name, hidden}: an index hidden */
                BSON_APPEND_DOCUMENT(&desc, "index", &sub);
        }
        if (type && cs_watches(s, db, name) && CS_AT(em, pos, base, 0))
            cs_simple_event(em, pos, type, db, name, &desc, NULL, NULL);
        bson_destroy(&desc);
    }
}

/* True when `s` sees document changes exactly as every stream without
 * options of its own does (its stages aside), so the events built for one
 * such stream serve them all (cscache.c). */
static bool cs_plain(const cs_stream_t *s)
{
    return s->full_document == CS_IMAGE_DEFAULT && s->before_change == CS_IMAGE_DEFAULT &&
           !s->show_expanded;
}

/* cs_entry_events for a plain stream, from the entry's cached form: each
 * document change's event is built once, for the first plain stream that
 * reports it, and copied into the batches of the others. */
static void cs_shared_events(cs_emit_t *em, cs_shared_entry_t *se)
{
    static const cs_stream_t plain; /* the options every plain stream has */
    cs_pos_t pos = {em->e->ts, 0, 0};
    for (uint32_t i = 0; i < se->nops && !em->full && !em->failed; i++) {
        cs_shared_op_t *o = &se->ops[i];
        uint64_t base = o->base;
        if (cs_pos_cmp((cs_pos_t){pos.ts, base | ((1u << 20) - 1), 1}, em->s->pos) <= 0)
            continue; /* wholly returned already */
        bson_t op, ev;
        if (o->kind == 'c') {
            bson_t cmd;
            bson_init_static(&op, o->op_data, o->op_len);
            if (bsonview_field(&op, "cmd", &cmd))
                cs_ddl_events(em, pos, base, o->db, &cmd);
            continue;
        }
        if (!o->coll || !cs_watches(em->s, o->db, o->coll) || !CS_AT(em, pos, base, 0))
            continue;
        if (o->event) {
            bson_init_static(&ev, o->event, o->event_len);
            cs_deliver(em, pos, &ev);
            continue;
        }
        cs_emit_t build = {.s = (cs_stream_t *)&plain, .e = em->e, .err = em->err};
        char kind[2] = {o->kind, 0};
        bson_init(&ev);
        bson_init_static(&op, o->op_data, o->op_len);
        if (cs_doc_event_build(&build, pos, &op, kind, o->db, o->coll, &ev)) {
            cscache_keep(se, i, &ev);
            cs_deliver(em, pos, &ev);
        } else {
            em->failed = true; /* not reached: a plain stream requires no image */
        }
        bson_destroy(&ev);
    }
}

/* The events of entry `e` after the stream's position. */
static void cs_entry_events(cs_emit_t *em)
{
    if (cs_plain(em->s)) {
        cs_shared_events(em, cscache_entry(em->e));
        return;
    }
    bson_iter_t it, el;
    bson_t doc;
    history_entry_view(em->e, &doc);
    if (!bson_iter_init_find(&it, &doc, "ops") || !bson_iter_recurse(&it, &el))
        return;
    uint64_t opi = 0;
    cs_pos_t pos = {em->e->ts, 0, 0};
    while (!em->full && !em->failed && bson_iter_next(&el)) {
        uint64_t base = ++opi << 20;
        if (cs_pos_cmp((cs_pos_t){pos.ts, base | ((1u << 20) - 1), 1}, em->s->pos) <= 0)
            continue; /* wholly returned already */
        bson_t op;
        if (!cmd_iter_doc(&el, &op))
            continue;
        const char *kind = cs_str(&op, "o"), *db = cs_str(&op, "db"), *coll = cs_str(&op, "c");
        if (!kind || !db)
            continue;
        if (kind[0] == 'c') {
            bson_t cmd;
            if (bsonview_field(&op, "cmd", &cmd))
                cs_ddl_events(em, pos, base, db, &cmd);
        } else if (coll && cs_watches(em->s, db, coll) && CS_AT(em, pos, base, 0)) {
            cs_doc_event(em, pos, &op, kind, db, coll);
        }
    }
}

bool cs_entry_visible(const history_entry_t *e)
{
    return e->lsn == 0 || journal_is_durable(e->lsn, journal_mode() == JOURNAL_FSYNC);
}

bool cs_fill(cs_stream_t *s, bson_t *batch, uint32_t *n, int64_t max, dberr_t *err)
{
    if (s->reader.ended)
        return true;
    if (!cs_check_history(s->pos, err))
        return false;
    cs_emit_t em = {.s = s, .batch = batch, .n = n, .max = max, .err = err};
    for (size_t i = history_seek(s->pos.ts); i < history_len(); i++) {
        em.e = history_at(i);
        if (!cs_entry_visible(em.e))
            break;
        cs_entry_events(&em);
        if (em.failed)
            return false;
        if (em.full)
            break;
        cs_pos_t end = {em.e->ts, CS_K_END, 0};
        if (cs_pos_cmp(end, s->pos) > 0)
            s->pos = end;
    }
    /* a batch with events ends at its last one (postBatchResumeToken is
     * that event's _id, as drivers expect); the entries scanned after it
     * are scanned again */
    if (*n > 0 && !s->reader.ended)
        s->pos = em.last;
    return true;
}

bool cs_pending(uint64_t *lsn)
{
    size_t len = history_len();
    if (len == 0)
        return false;
    const history_entry_t *last = history_at(len - 1);
    if (cs_entry_visible(last))
        return false;
    *lsn = last->lsn;
    return true;
}
