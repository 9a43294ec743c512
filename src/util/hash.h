/* hash: atomdb's one hash table — uthash (Debian's uthash-dev), intrusive
 * and keyed by bytes, set up once here to allocate through libbson. Include
 * this instead of <uthash.h>; see uthash's documentation for HASH_FIND,
 * HASH_ADD_KEYPTR, HASH_DEL and HASH_ITER (which visits in insertion order). */
#ifndef ATOMDB_HASH_H
#define ATOMDB_HASH_H

#include <bson/bson.h>

#define uthash_malloc(sz) bson_malloc(sz)
#define uthash_free(ptr, sz) bson_free(ptr)

#include <uthash.h>

#endif
