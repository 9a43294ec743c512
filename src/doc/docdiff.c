/* docdiff: recursive comparison of two documents with the same shape,
 * collecting the changed leaves as dotted $set paths. */
#include "doc/docdiff.h"

#include <string.h>

#define DOCDIFF_MAX_DEPTH 32

/* True when `key` can be one component of a dotted path. */
static bool docdiff_plain_key(const char *key)
{
    return key[0] != '\0' && key[0] != '$' && !strchr(key, '.');
}

/* True when both elements hold the same type and the same value bytes. */
static bool docdiff_same_value(const bson_iter_t *a, const bson_iter_t *b)
{
    if (bson_iter_type(a) != bson_iter_type(b))
        return false;
    uint32_t alen = a->next_off - a->d1, blen = b->next_off - b->d1;
    return alen == blen && memcmp(a->raw + a->d1, b->raw + b->d1, alen) == 0;
}

/* Walks both documents in step; false when their field lists differ. */
static bool docdiff_walk(bson_iter_t *a, bson_iter_t *b, char *prefix, size_t plen,
                         bson_t *set, int depth)
{
    if (depth > DOCDIFF_MAX_DEPTH)
        return false;
    for (;;) {
        bool na = bson_iter_next(a), nb = bson_iter_next(b);
        if (na != nb)
            return false;
        if (!na)
            return true;
        const char *ka = bson_iter_key(a);
        if (strcmp(ka, bson_iter_key(b)) != 0 || !docdiff_plain_key(ka))
            return false;
        if (docdiff_same_value(a, b))
            continue;
        size_t klen = strlen(ka);
        if (plen + klen + 2 > 1024)
            return false;
        if (plen)
            prefix[plen] = '.';
        memcpy(prefix + plen + (plen ? 1 : 0), ka, klen + 1);
        size_t nlen = plen + (plen ? 1 : 0) + klen;
        if (BSON_ITER_HOLDS_DOCUMENT(a) && BSON_ITER_HOLDS_DOCUMENT(b)) {
            bson_iter_t ca, cb;
            if (!bson_iter_recurse(a, &ca) || !bson_iter_recurse(b, &cb) ||
                !docdiff_walk(&ca, &cb, prefix, nlen, set, depth + 1))
                return false;
        } else {
            bson_append_value(set, prefix, (int)nlen, bson_iter_value(b));
        }
        prefix[plen] = '\0';
    }
}

bool docdiff_compute(const bson_t *old_doc, const bson_t *new_doc, bson_t *diff)
{
    bson_iter_t a, b;
    char prefix[1024] = "";
    bson_t set = BSON_INITIALIZER;
    bool ok = bson_iter_init(&a, old_doc) && bson_iter_init(&b, new_doc) &&
              docdiff_walk(&a, &b, prefix, 0, &set, 0);
    if (ok)
        BSON_APPEND_DOCUMENT(diff, "$set", &set);
    bson_destroy(&set);
    return ok;
}
