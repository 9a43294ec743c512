/* bsoncheck: the strict BSON check (see bsoncheck.h). */
#include "util/bsoncheck.h"

#include <string.h>

/* Whether the `n` bytes at `s` are UTF-8: plain ASCII (the keys and strings
 * of nearly every request) is answered by a word-at-a-time scan, anything
 * else by libbson's validator. A NUL byte is ASCII: it is allowed here only
 * when `allow_nul` (keys come through strlen, so they hold none). */
static bool bsoncheck_utf8(const char *s, size_t n, bool allow_nul)
{
    size_t i = 0;
    uint64_t high = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, s + i, 8);
        high |= w;
    }
    for (; i < n; i++)
        high |= (uint8_t)s[i];
    if (!(high & 0x8080808080808080ull) && (allow_nul || !memchr(s, 0, n)))
        return true;
    return bson_utf8_validate(s, n, allow_nul);
}

bsoncheck_fault_t bsoncheck_doc(const bson_t *doc, uint32_t *at)
{
    /* bson_iter_t is over-aligned, so it cannot be an array element itself. */
    struct level {
        bson_iter_t it;
    } stack[BSONCHECK_MAX_DEPTH];
    int top = 0;

    *at = 0;
    /* bson_iter_init(_from_data) checks the length but not the terminating
     * NUL, and bson_iter_next stops at the last byte whatever it holds */
    if (doc->len < 5 || bson_get_data(doc)[doc->len - 1] != 0 ||
        !bson_iter_init(&stack[0].it, doc))
        return BSONCHECK_CORRUPT;
    while (top >= 0) {
        bson_iter_t *it = &stack[top].it;
        if (!bson_iter_next(it)) {
            if (it->err_off) {
                *at = it->err_off;
                return BSONCHECK_CORRUPT;
            }
            top--;
            continue;
        }
        *at = it->off;
        const char *key = bson_iter_key(it);
        /* the key's length is where its NUL is: no NUL inside to look for */
        if (!bsoncheck_utf8(key, bson_iter_key_len(it), true))
            return BSONCHECK_BAD_UTF8;

        const uint8_t *sub = NULL;
        uint32_t sublen = 0, n = 0;
        const char *str = NULL, *str2 = NULL;
        switch (bson_iter_type(it)) {
        case BSON_TYPE_UTF8:
            str = bson_iter_utf8(it, &n);
            break;
        case BSON_TYPE_CODE:
            str = bson_iter_code(it, &n);
            break;
        case BSON_TYPE_SYMBOL:
            str = bson_iter_symbol(it, &n);
            break;
        case BSON_TYPE_REGEX:
            str = bson_iter_regex(it, &str2);
            n = (uint32_t)strlen(str);
            break;
        case BSON_TYPE_DBPOINTER: {
            const bson_oid_t *oid;
            bson_iter_dbpointer(it, &n, &str, &oid);
            break;
        }
        case BSON_TYPE_CODEWSCOPE:
            str = bson_iter_codewscope(it, &n, &sublen, &sub);
            break;
        case BSON_TYPE_DOCUMENT:
            bson_iter_document(it, &sublen, &sub);
            break;
        case BSON_TYPE_ARRAY:
            bson_iter_array(it, &sublen, &sub);
            break;
        case BSON_TYPE_BOOL:
            if (it->raw[it->d1] > 1)
                return BSONCHECK_BAD_BOOL;
            break;
        default:
            break;
        }
        if (str && !bsoncheck_utf8(str, n, true))
            return BSONCHECK_BAD_UTF8;
        if (str2 && !bsoncheck_utf8(str2, strlen(str2), false))
            return BSONCHECK_BAD_UTF8;
        if (!sub)
            continue;
        if (top + 1 >= BSONCHECK_MAX_DEPTH)
            return BSONCHECK_TOO_DEEP;
        if (sublen < 5 || sub[sublen - 1] != 0 ||
            !bson_iter_init_from_data(&stack[top + 1].it, sub, sublen))
            return BSONCHECK_CORRUPT;
        top++;
    }
    return BSONCHECK_OK;
}
