/* textindex: the `text` index kind — spec parsing with mongod's checks,
 * one key per document term (prefix values, term, score, suffix values,
 * then the _id the index map adds), and the term scans behind $text. */
#include "store/textindex.h"

#include <stdio.h>
#include <string.h>

#include "doc/keystring.h"
#include "util/fiber.h"
#include "util/hash.h"
#include "util/vec.h"

/* Key pattern fields beside the text ones, in order. */
typedef struct textindex_fields {
    char **paths;
    int *dirs; /* 1 or -1 */
    int n;
} textindex_fields_t;

struct textindex {
    fts_spec_t spec;
    textindex_fields_t before; /* prefix fields (equality needed to use the index) */
    textindex_fields_t after;  /* suffix fields */
    bson_t *resolved; /* key pattern + resolved options, for textindex_same (a bson_t
                       * inside a malloc'd struct would be misaligned) */
};

bool textindex_is_text_field(const bson_iter_t *field)
{
    return BSON_ITER_HOLDS_UTF8(field) && !strcmp(bson_iter_utf8(field, NULL), "text");
}

bool textindex_is_text_spec(const bson_t *spec)
{
    return index_spec_has_field(spec, textindex_is_text_field);
}

bool textindex_is_text_option(const char *f)
{
    return !strcmp(f, "weights") || !strcmp(f, "default_language") ||
           !strcmp(f, "language_override") || !strcmp(f, "textIndexVersion");
}

static void textindex_fields_push(textindex_fields_t *l, const char *path, int dir)
{
    l->paths = bson_realloc(l->paths, (size_t)(l->n + 1) * sizeof *l->paths);
    l->dirs = bson_realloc(l->dirs, (size_t)(l->n + 1) * sizeof *l->dirs);
    l->paths[l->n] = bson_strdup(path);
    l->dirs[l->n++] = dir;
}

/* Appends the fields to the key pattern `key`. */
static void textindex_fields_append(const textindex_fields_t *l, bson_t *key)
{
    for (int i = 0; i < l->n; i++)
        BSON_APPEND_INT32(key, l->paths[i], l->dirs[i]);
}

static void textindex_fields_destroy(textindex_fields_t *l)
{
    for (int i = 0; i < l->n; i++)
        bson_free(l->paths[i]);
    bson_free(l->paths);
    bson_free(l->dirs);
}

void textindex_destroy(textindex_t *t)
{
    if (!t)
        return;
    fts_spec_destroy(&t->spec);
    textindex_fields_destroy(&t->before);
    textindex_fields_destroy(&t->after);
    if (t->resolved)
        bson_destroy(t->resolved);
    bson_free(t);
}

textindex_t *textindex_new(const bson_t *spec, bson_t *key_out, bson_t *resolved_out,
                           dberr_t *err)
{
    textindex_t *t = bson_malloc0(sizeof *t);
    t->resolved = bson_new();
    bson_iter_t it, k;
    /* 0: prefix fields, 1: in the text fields, 2: suffix fields */
    int part = 0;
    if (!bson_iter_init_find(&it, spec, "key") || !bson_iter_recurse(&it, &k))
        goto bad_key;
    while (bson_iter_next(&k)) {
        const char *f = bson_iter_key(&k);
        bool is_text = textindex_is_text_field(&k);
        if (!strcmp(f, "_fts")) {
            if (!is_text) {
                dberr_set(err, 17271, "expecting _fts:\"text\"");
                goto fail;
            }
            if (!bson_iter_next(&k) || strcmp(bson_iter_key(&k), "_ftsx")) {
                dberr_set(err, 17274, "expected _ftsx after _fts");
                goto fail;
            }
            if (!BSON_ITER_HOLDS_NUMBER(&k) || bson_iter_as_int64(&k) != 1) {
                dberr_set(err, 17272, "expecting _ftsx:1");
                goto fail;
            }
            if (part == 2) {
                dberr_set(err, 17389, "'text' fields in index must all be adjacent");
                goto fail;
            }
            part = 2;
            continue;
        }
        if (!strcmp(f, "_ftsx")) {
            dberr_set(err, 17288, "expected _ftsx after _fts");
            goto fail;
        }
        if (is_text) {
            if (part == 2) {
                dberr_set(err, 17389, "'text' fields in index must all be adjacent");
                goto fail;
            }
            part = 1;
            continue;
        }
        if (BSON_ITER_HOLDS_UTF8(&k)) {
            dberr_set(err, DBERR_CANNOT_CREATE_INDEX,
                      "Can't use more than one index plugin for a single index.");
            goto fail;
        }
        if (!BSON_ITER_HOLDS_NUMBER(&k) ||
            (bson_iter_as_double(&k) != 1 && bson_iter_as_double(&k) != -1)) {
            dberr_set(err, 17273, "expected value 1 or -1 for non-text key in compound index");
            goto fail;
        }
        int dir = bson_iter_as_double(&k) > 0 ? 1 : -1;
        if (part == 1)
            part = 2;
        textindex_fields_push(part == 0 ? &t->before : &t->after, f, dir);
    }
    if (part == 0)
        goto bad_key;
    textindex_fields_append(&t->before, key_out);
    BSON_APPEND_UTF8(key_out, "_fts", "text");
    BSON_APPEND_INT32(key_out, "_ftsx", 1);
    textindex_fields_append(&t->after, key_out);
    if (!fts_spec_init(&t->spec, spec, resolved_out, err))
        goto fail;
    BSON_APPEND_DOCUMENT(t->resolved, "key", key_out);
    bson_concat(t->resolved, resolved_out);
    return t;
bad_key:
    dberr_set(err, DBERR_CANNOT_CREATE_INDEX, "text index key pattern is not valid");
fail:
    textindex_destroy(t);
    return NULL;
}

const fts_spec_t *textindex_spec(const textindex_t *t)
{
    return &t->spec;
}

bool textindex_same(const textindex_t *a, const textindex_t *b)
{
    return bson_equal(a->resolved, b->resolved);
}

/* Appends the key parts of the fields in `doc` (null where missing);
 * arrays are refused as mongod does. */
static bool textindex_fields_key(const textindex_fields_t *l, const bson_t *doc, buf_t *out,
                                 dberr_t *err)
{
    for (int i = 0; i < l->n; i++) {
        bson_iter_t it, found;
        bool desc = l->dirs[i] < 0;
        if (!bson_iter_init(&it, doc) || !bson_iter_find_descendant(&it, l->paths[i], &found)) {
            keystring_append_null(out, desc);
            continue;
        }
        if (BSON_ITER_HOLDS_ARRAY(&found))
            return dberr_set(err, 16675, "cannot have a multi-key as a prefix to a text index");
        keystring_append(out, bson_iter_value(&found), desc);
    }
    return true;
}

bool textindex_keys_of(const textindex_t *t, const bson_t *doc, index_keys_t *out, dberr_t *err)
{
    fts_term_score_t *terms = NULL;
    size_t n = 0;
    bool ok = false;
    buf_t pre, post;
    buf_init(&pre);
    buf_init(&post);
    if (!textindex_fields_key(&t->before, doc, &pre, err) ||
        !textindex_fields_key(&t->after, doc, &post, err))
        goto cleanup;
    if (!fts_spec_terms(&t->spec, doc, &terms, &n, err))
        goto cleanup;
    for (size_t i = 0; i < n; i++) {
        VEC_RESERVE_ONE(out->keys, out->len, out->cap, 8);
        buf_t *key = &out->keys[out->len++];
        buf_init(key);
        buf_append(key, pre.data, pre.len);
        bson_value_t term = {.value_type = BSON_TYPE_UTF8};
        term.value.v_utf8.str = terms[i].term;
        term.value.v_utf8.len = (uint32_t)strlen(terms[i].term);
        keystring_append(key, &term, false);
        bson_value_t score = {.value_type = BSON_TYPE_DOUBLE};
        score.value.v_double = terms[i].score;
        keystring_append(key, &score, false);
        buf_append(key, post.data, post.len);
    }
    out->skip = n == 0; /* as mongod: a document without terms is not in the index */
    ok = true;
cleanup:
    fts_terms_free(terms, n);
    buf_destroy(&pre);
    buf_destroy(&post);
    return ok;
}

typedef struct textindex_seen {
    const void *rec;
    UT_hash_handle hh;
} textindex_seen_t;

bool textindex_scan(const index_t *ix, const fts_query_t *q, const matcher_t *m, recvec_t *out,
                    size_t *keys_examined, dberr_t *err)
{
    const textindex_t *t = ix->text;
    textindex_seen_t *seen = NULL, *e, *tmp;
    bool ok = true;
    buf_t pre;
    buf_init(&pre);
    for (int i = 0; i < t->before.n; i++) {
        matcher_bounds_t b;
        if (!matcher_bounds(m, t->before.paths[i], &b) || !b.has_eq ||
            b.eq.value_type == BSON_TYPE_ARRAY || b.eq.value_type == BSON_TYPE_REGEX) {
            ok = dberr_set(err, DBERR_BAD_VALUE,
                           "error processing query: planner returned error :: caused by :: "
                           "failed to use text index to satisfy $text query (if text index is "
                           "compound, are equality predicates given for all prefix fields?)");
            goto cleanup;
        }
        keystring_append(&pre, &b.eq, t->before.dirs[i] < 0);
    }
    size_t plen = pre.len;
    for (size_t i = 0; i < fts_query_nindex_terms(q); i++) {
        pre.len = plen;
        const char *term = fts_query_index_term(q, i);
        bson_value_t v = {.value_type = BSON_TYPE_UTF8};
        v.value.v_utf8.str = (char *)term;
        v.value.v_utf8.len = (uint32_t)strlen(term);
        keystring_append(&pre, &v, false);
        btree_pos_t n;
        for (bool more = btree_seek(ix->map, pre.data, pre.len, &n); more; more = btree_next(&n)) {
            size_t klen;
            const uint8_t *key = btree_pos_key(&n, &klen);
            if (klen < pre.len || memcmp(key, pre.data, pre.len) != 0)
                break;
            (*keys_examined)++;
            if ((*keys_examined & 1023) == 0 && !fiber_alive(err)) {
                ok = false;
                goto cleanup;
            }
            record_t *r = btree_pos_value(&n);
            HASH_FIND_PTR(seen, &r, e);
            if (e)
                continue;
            e = bson_malloc(sizeof *e);
            e->rec = r;
            HASH_ADD_PTR(seen, rec, e);
            recvec_push_ref(out, r);
        }
    }
cleanup:
    HASH_ITER(hh, seen, e, tmp)
    {
        HASH_DEL(seen, e);
        bson_free(e);
    }
    buf_destroy(&pre);
    return ok;
}
