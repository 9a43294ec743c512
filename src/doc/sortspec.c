/* sortspec: a compiled `sort` document and the document comparator it
 * defines — missing sorts as null, an empty array below null, and an array
 * by its smallest element ascending or its largest descending (as mongod). */
#include "doc/sortspec.h"

#include <string.h>

#include "doc/collation.h"
#include "doc/compare.h"
#include "doc/fts.h"
#include "doc/matcher.h"
#include "doc/path.h"

typedef struct sortkey {
    char *path;
    int direction; /* 1 or -1 */
    bool meta;     /* {$meta: "textScore"}: by the $text score, highest first */
} sortkey_t;

struct sortspec {
    sortkey_t *keys;
    int nkeys;
    collation_t *coll; /* owned reference; NULL is simple */
    matcher_t *text; /* a reference to the filter whose $text gives the scores, or NULL */
};

void sortspec_destroy(sortspec_t *s)
{
    if (!s)
        return;
    for (int i = 0; i < s->nkeys; i++)
        bson_free(s->keys[i].path);
    bson_free(s->keys);
    collation_destroy(s->coll);
    matcher_destroy(s->text);
    bson_free(s);
}

sortspec_t *sortspec_new(const bson_t *spec, dberr_t *err)
{
    sortspec_t *s = bson_malloc0(sizeof *s);
    bson_iter_t it;
    if (!bson_iter_init(&it, spec)) {
        dberr_set(err, DBERR_BAD_VALUE, "invalid sort specification");
        goto cleanup;
    }
    while (bson_iter_next(&it)) {
        const char *key = bson_iter_key(&it);
        const bson_value_t *v = bson_iter_value(&it);
        sortkey_t k = {NULL, 1, false};
        if (key[0] == '\0') {
            dberr_set(err, DBERR_BAD_VALUE, "FieldPath cannot be constructed with empty string");
            goto cleanup;
        }
        if (v->value_type == BSON_TYPE_DOCUMENT) {
            bson_iter_t m;
            if (!bson_iter_recurse(&it, &m) || !bson_iter_next(&m) ||
                strcmp(bson_iter_key(&m), "$meta") != 0 || !BSON_ITER_HOLDS_UTF8(&m)) {
                dberr_set(err, DBERR_BAD_VALUE, "Illegal key in $sort specification: %s: %s",
                          key, "expected {$meta: <string>}");
                goto cleanup;
            }
            const char *name = bson_iter_utf8(&m, NULL);
            if (strcmp(name, "textScore")) {
                if (!strcmp(name, "searchScore") || !strcmp(name, "randVal"))
                    dberr_set(err, DBERR_NOT_IMPLEMENTED,
                              "atomdb does not support sorting by {$meta: \"%s\"} (textScore "
                              "only)",
                              name);
                else
                    dberr_set(err, 31138, "Illegal $meta sort: $meta: \"%s\"", name);
                goto cleanup;
            }
            k.meta = true;
            k.direction = -1;
        } else if (compare_is_number(v)) {
            double d = compare_to_double(v);
            if (d != 1 && d != -1) {
                dberr_set(err, DBERR_BAD_VALUE,
                          "$sort key ordering must be 1 (for ascending) or -1 (for descending)");
                goto cleanup;
            }
            k.direction = d > 0 ? 1 : -1;
        } else {
            dberr_set(err, DBERR_BAD_VALUE,
                      "$sort key ordering must be 1 (for ascending) or -1 (for descending)");
            goto cleanup;
        }
        for (int i = 0; i < s->nkeys; i++) {
            if (strcmp(s->keys[i].path, key) == 0) {
                dberr_set(err, DBERR_BAD_VALUE, "sort key '%s' appears twice", key);
                goto cleanup;
            }
        }
        k.path = bson_strdup(key);
        s->keys = bson_realloc(s->keys, (size_t)(s->nkeys + 1) * sizeof *s->keys);
        s->keys[s->nkeys++] = k;
    }
    return s;
cleanup: /* reached only on failure */
    sortspec_destroy(s);
    return NULL;
}

/* The sort key of one document for one path. */
typedef struct keyval {
    int direction;
    bool have;
    bool empty_array; /* sorts below null (above MinKey) */
    bson_value_t v;   /* borrows from the document */
} keyval_t;

/* Orders two extracted keys ascending. */
static int keyval_cmp(const keyval_t *a, const keyval_t *b, const collation_t *coll)
{
    if (a->empty_array || b->empty_array) {
        if (a->empty_array && b->empty_array)
            return 0;
        const keyval_t *other = a->empty_array ? b : a;
        int sign = a->empty_array ? -1 : 1;
        if (other->v.value_type == BSON_TYPE_MINKEY)
            return -sign;
        return sign;
    }
    return compare_values_coll(&a->v, &b->v, coll);
}

static void keyval_offer(keyval_t *k, const keyval_t *cand, const collation_t *coll)
{
    int c = k->have ? keyval_cmp(cand, k, coll) : 0;
    if (!k->have || (k->direction > 0 && c < 0) || (k->direction < 0 && c > 0)) {
        int dir = k->direction;
        *k = *cand;
        k->direction = dir;
        k->have = true;
    }
}

typedef struct keywalk {
    keyval_t best;
    bool saw_empty_array;
    bool saw_value;
    const collation_t *coll;
} keywalk_t;

static bool key_hit(const path_hit_t *hit, void *ctx)
{
    keywalk_t *kw = ctx;
    keyval_t cand;
    memset(&cand, 0, sizeof cand);
    if (hit->whole_leaf_array) {
        bson_t arr;
        if (bson_init_static(&arr, hit->value->value.v_doc.data, hit->value->value.v_doc.data_len) &&
            bson_empty(&arr))
            kw->saw_empty_array = true;
        return true;
    }
    kw->saw_value = true;
    if (hit->value->value_type == BSON_TYPE_EOD)
        cand.v.value_type = BSON_TYPE_NULL;
    else
        cand.v = *hit->value;
    keyval_offer(&kw->best, &cand, kw->coll);
    return true;
}

static void extract(const sortkey_t *k, const bson_t *doc, const collation_t *coll,
                    keyval_t *out)
{
    keywalk_t kw;
    memset(&kw, 0, sizeof kw);
    kw.coll = coll;
    kw.best.direction = k->direction;
    path_walk(doc, k->path, true, key_hit, &kw);
    if (kw.saw_empty_array) {
        keyval_t cand;
        memset(&cand, 0, sizeof cand);
        cand.empty_array = true;
        keyval_offer(&kw.best, &cand, coll);
    }
    if (!kw.best.have) {
        kw.best.have = true;
        kw.best.v.value_type = BSON_TYPE_NULL;
    }
    *out = kw.best;
}

int sortspec_compare(const sortspec_t *s, const bson_t *a, const bson_t *b)
{
    for (int i = 0; i < s->nkeys; i++) {
        const sortkey_t *k = &s->keys[i];
        if (k->meta) {
            const fts_query_t *q = s->text ? matcher_text(s->text) : NULL;
            double sa = q ? fts_query_score(q, a) : 0;
            double sb = q ? fts_query_score(q, b) : 0;
            if (sa != sb)
                return sa > sb ? -1 : 1;
            continue;
        }
        keyval_t ka, kb;
        extract(k, a, s->coll, &ka);
        extract(k, b, s->coll, &kb);
        int c = keyval_cmp(&ka, &kb, s->coll);
        if (c)
            return c < 0 ? -k->direction : k->direction;
    }
    return 0;
}

int sortspec_nkeys(const sortspec_t *s)
{
    return s->nkeys;
}

const char *sortspec_key(const sortspec_t *s, int i, int *direction)
{
    if (i < 0 || i >= s->nkeys)
        return NULL;
    if (direction)
        *direction = s->keys[i].direction;
    return s->keys[i].path;
}

void sortspec_set_collation(sortspec_t *s, collation_t *coll)
{
    collation_t *old = s->coll;
    s->coll = collation_ref(coll);
    collation_destroy(old);
}

const collation_t *sortspec_collation(const sortspec_t *s)
{
    return s->coll;
}

bool sortspec_uses_text_score(const sortspec_t *s)
{
    for (int i = 0; s && i < s->nkeys; i++)
        if (s->keys[i].meta)
            return true;
    return false;
}

void sortspec_set_text(sortspec_t *s, matcher_t *m)
{
    matcher_destroy(s->text);
    s->text = matcher_ref(m);
}
