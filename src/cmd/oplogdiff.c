/* oplogdiff: mongod 7's update diff ($v: 2) between a document's versions,
 * for the oplog view's update entries: {d: {f: false}, u: {f: v},
 * i: {f: v}, s<f>: sub-diff} for documents, {a: true, l: n, u<k>: v,
 * s<k>: sub-diff} for arrays. */
#include "cmd/oplog.h"

#include <stdio.h>
#include <string.h>

#include "util/bsonview.h"

#define OPLOGDIFF_DEPTH 100

/* True when the two elements hold the same type and bytes. */
static bool oplogdiff_same(const bson_iter_t *a, const bson_iter_t *b)
{
    if (bson_iter_type(a) != bson_iter_type(b))
        return false;
    uint32_t la = a->next_off - a->d1, lb = b->next_off - b->d1;
    return la == lb && memcmp(a->raw + a->d1, b->raw + b->d1, la) == 0;
}

/* Exact field lookup (a dotted name is one field here). */
static bool oplogdiff_has(const bson_t *doc, const char *key)
{
    bson_iter_t it;
    return bson_iter_init_find(&it, doc, key);
}

static bool oplogdiff_nested(const bson_iter_t *a)
{
    return BSON_ITER_HOLDS_DOCUMENT(a) || BSON_ITER_HOLDS_ARRAY(a);
}

static bool oplogdiff_object(const bson_t *old_doc, const bson_t *new_doc, bson_t *out, int depth);
static void oplogdiff_array(const bson_t *old_arr, const bson_t *new_arr, bson_t *out, int depth);

/* Appends the sub-diff of two documents or two arrays as `skey`; false
 * (nothing appended) when no diff says the change: the caller sets the
 * whole new value. */
static bool oplogdiff_sub(const bson_iter_t *o, const bson_iter_t *n, bson_t *out, const char *skey,
                          int depth)
{
    bson_t od, nd, sub = BSON_INITIALIZER;
    if (bson_iter_type(o) != bson_iter_type(n) || depth >= OPLOGDIFF_DEPTH ||
        !bsonview_iter(o, &od) || !bsonview_iter(n, &nd)) {
        bson_destroy(&sub);
        return false;
    }
    bool ok = true;
    if (BSON_ITER_HOLDS_ARRAY(n))
        oplogdiff_array(&od, &nd, &sub, depth + 1);
    else
        ok = oplogdiff_object(&od, &nd, &sub, depth + 1);
    if (ok)
        bson_append_document(out, skey, -1, &sub);
    bson_destroy(&sub);
    return ok;
}

static void oplogdiff_array(const bson_t *old_arr, const bson_t *new_arr, bson_t *out, int depth)
{
    bson_iter_t o, n;
    uint32_t olen = bson_count_keys(old_arr), nlen = bson_count_keys(new_arr), k = 0;
    char key[24];
    BSON_APPEND_BOOL(out, "a", true);
    if (nlen < olen)
        BSON_APPEND_INT32(out, "l", (int32_t)nlen);
    bson_iter_init(&o, old_arr);
    bson_iter_init(&n, new_arr);
    bool more_old = true;
    while (bson_iter_next(&n)) {
        more_old = more_old && bson_iter_next(&o);
        if (more_old && oplogdiff_same(&o, &n)) {
            k++;
            continue;
        }
        snprintf(key, sizeof key, "s%u", k);
        if (!(more_old && oplogdiff_nested(&n) && oplogdiff_sub(&o, &n, out, key, depth))) {
            snprintf(key, sizeof key, "u%u", k);
            bson_append_value(out, key, -1, bson_iter_value(&n));
        }
        k++;
    }
}

/* Fills `out` with the document diff; false when the fields both versions
 * share are not in the same order, or a new field comes before a shared
 * one (a diff's inserts go last). */
static bool oplogdiff_object(const bson_t *old_doc, const bson_t *new_doc, bson_t *out, int depth)
{
    bson_iter_t o, n, f;
    bson_t d = BSON_INITIALIZER, u = BSON_INITIALIZER, i = BSON_INITIALIZER, s = BSON_INITIALIZER;
    bool ok = false, seen_new = false;
    /* shared fields, in the new document's order, must follow the old one's */
    bson_iter_init(&o, old_doc);
    bson_iter_init(&n, new_doc);
    while (bson_iter_next(&n)) {
        const char *k = bson_iter_key(&n);
        if (!bson_iter_init_find(&f, old_doc, k)) {
            seen_new = true;
            bson_append_value(&i, k, -1, bson_iter_value(&n));
            continue;
        }
        if (seen_new)
            goto cleanup;
        bool found = false;
        while (bson_iter_next(&o)) {
            if (!strcmp(bson_iter_key(&o), k)) {
                found = true;
                break;
            }
            if (oplogdiff_has(new_doc, bson_iter_key(&o)))
                goto cleanup; /* a shared field the new document put later */
        }
        if (!found)
            goto cleanup;
        if (oplogdiff_same(&o, &n))
            continue;
        char skey[1100];
        snprintf(skey, sizeof skey, "s%s", k);
        if (!(oplogdiff_nested(&n) && strlen(k) < 1000 && oplogdiff_sub(&o, &n, &s, skey, depth)))
            bson_append_value(&u, k, -1, bson_iter_value(&n));
    }
    bson_iter_init(&o, old_doc);
    while (bson_iter_next(&o))
        if (!oplogdiff_has(new_doc, bson_iter_key(&o)))
            BSON_APPEND_BOOL(&d, bson_iter_key(&o), false);
    if (!bson_empty(&d))
        BSON_APPEND_DOCUMENT(out, "d", &d);
    if (!bson_empty(&u))
        BSON_APPEND_DOCUMENT(out, "u", &u);
    if (!bson_empty(&i))
        BSON_APPEND_DOCUMENT(out, "i", &i);
    bson_concat(out, &s);
    ok = true;
cleanup:
    bson_destroy(&d);
    bson_destroy(&u);
    bson_destroy(&i);
    bson_destroy(&s);
    return ok;
}

bool oplogdiff_compute(const bson_t *old_doc, const bson_t *new_doc, bson_t *diff)
{
    bson_t inner = BSON_INITIALIZER;
    bool ok = oplogdiff_object(old_doc, new_doc, &inner, 0);
    if (ok) {
        BSON_APPEND_INT32(diff, "$v", 2);
        BSON_APPEND_DOCUMENT(diff, "diff", &inner);
    }
    bson_destroy(&inner);
    return ok;
}
