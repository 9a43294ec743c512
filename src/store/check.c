/* check: documents and index entries cross-checked for validate. */
#include "store/check.h"

#include <string.h>

#include "store/index.h"

static void check_error(check_result_t *out, const char *fmt, const char *index_name,
                        int64_t n)
{
    if (out->nerrors < CHECK_MAX_ERRORS)
        snprintf(out->errors[out->nerrors++], sizeof out->errors[0], fmt, index_name,
                 (long long)n);
}

/* The _id of a stored document (every record has one). */
static bool check_doc_id(const bson_t *doc, bson_value_t *id)
{
    bson_iter_t it;
    if (!bson_iter_init_find(&it, doc, "_id"))
        return false;
    *id = *bson_iter_value(&it);
    return true;
}

bool check_collection(collection_t *c, bool full, check_result_t *out)
{
    memset(out, 0, sizeof *out);
    out->nindexes = collection_nindexes(c);
    index_t *id_ix = collection_index(c, 0);
    for (int i = 0; i < out->nindexes; i++)
        out->keys[i] = (int64_t)btree_count(collection_index(c, i)->map);
    int64_t expected[COLLECTION_MAX_INDEXES] = {0};
    buf_t mk;
    buf_init(&mk);
    btree_pos_t n;
    for (bool more = btree_seek(id_ix->map, NULL, 0, &n); more; more = btree_next(&n)) {
        record_t *r = btree_pos_value(&n);
        bson_t doc;
        record_view(r, &doc);
        out->nrecords++;
        size_t off;
        if (!bson_validate(&doc, BSON_VALIDATE_NONE, &off)) {
            out->invalid_docs++;
            continue;
        }
        bson_value_t id;
        if (!full || !check_doc_id(&doc, &id))
            continue;
        for (int i = 0; i < out->nindexes; i++) {
            index_t *ix = collection_index(c, i);
            index_keys_t keys;
            index_keys_init(&keys);
            dberr_t e;
            if (index_keys_of(ix, &doc, &keys, &e) && !keys.skip) {
                for (size_t k = 0; k < keys.len; k++) {
                    mk.len = 0;
                    index_map_key(ix, &keys.keys[k], &id, &mk);
                    if (btree_get(ix->map, mk.data, mk.len) == r)
                        expected[i]++;
                    else
                        out->missing[i]++;
                }
            }
            index_keys_destroy(&keys);
        }
    }
    buf_destroy(&mk);
    if (out->invalid_docs)
        check_error(out, "%s: %lld documents are not valid BSON", "collection",
                    out->invalid_docs);
    if (full) {
        for (int i = 0; i < out->nindexes; i++) {
            const char *name = collection_index(c, i)->name;
            out->extra[i] = out->keys[i] - expected[i];
            if (out->missing[i])
                check_error(out, "index %s is missing %lld entries that its documents generate",
                            name, out->missing[i]);
            if (out->extra[i] > 0)
                check_error(out, "index %s has %lld entries no current document generates",
                            name, out->extra[i]);
        }
    } else if (out->keys[0] != out->nrecords) {
        check_error(out, "index %s holds %lld entries for a different number of documents",
                    id_ix->name, out->keys[0]);
    }
    return out->nerrors == 0;
}
