/* hash: atomdb's one hash table — uthash (Debian's uthash-dev), intrusive
 * and keyed by bytes, set up once here to allocate through libbson. Include
 * this instead of <uthash.h>; see uthash's documentation for HASH_FIND,
 * HASH_ADD_KEYPTR, HASH_DEL and HASH_ITER (which visits in insertion order). */
#ifndef ATOMDB_HASH_H
#define ATOMDB_HASH_H

#include <bson/bson.h>

#include <stdint.h>
#include <string.h>

/* The hash of `len` bytes: eight at a time, multiply and fold (keys here
 * are short BSON documents, index keys and pointers; uthash's default
 * byte-at-a-time Jenkins hash costs several times more on them). */
static inline unsigned hash_bytes(const void *key, size_t len)
{
    const uint8_t *p = key;
    uint64_t h = 0x9E3779B97F4A7C15ull ^ len;
    for (; len >= 8; p += 8, len -= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        h = (h ^ w) * 0xFF51AFD7ED558CCDull;
        h ^= h >> 32;
    }
    if (len) {
        uint64_t w = 0;
        memcpy(&w, p, len);
        h = (h ^ w) * 0xC4CEB9FE1A85EC53ull;
    }
    h ^= h >> 29;
    return (unsigned)h;
}

#define HASH_FUNCTION(keyptr, keylen, hashv) ((hashv) = hash_bytes((keyptr), (keylen)))
#define uthash_malloc(sz) bson_malloc(sz)
#define uthash_free(ptr, sz) bson_free(ptr)

#include <uthash.h>

#endif
