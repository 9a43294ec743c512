/* bsoncheck: a strict, iterative check that bytes are one well-formed BSON
 * document, used wherever atomdb takes documents it did not build itself
 * (wire frames, snapshot and log files on recovery). libbson 1.23's
 * bson_validate recurses once per level (deep input overflows the stack),
 * lets invalid UTF-8 in string values through, and misses some corrupt
 * nested elements (tests/fuzz/regressions/), so it is not used for that. */
#ifndef ATOMDB_BSONCHECK_H
#define ATOMDB_BSONCHECK_H

#include <bson/bson.h>
#include <stdint.h>

/* mongod's BSONDepth::kDefaultMaxAllowableDepth. */
#define BSONCHECK_MAX_DEPTH 200

/* Why bsoncheck_doc rejected a document. */
typedef enum bsoncheck_fault {
    BSONCHECK_OK,
    BSONCHECK_CORRUPT,  /* lengths, terminators or element types are wrong */
    BSONCHECK_TOO_DEEP, /* nested deeper than BSONCHECK_MAX_DEPTH */
    BSONCHECK_BAD_UTF8, /* a key or string is not UTF-8 */
    BSONCHECK_BAD_BOOL, /* a boolean byte other than 0 or 1 */
} bsoncheck_fault_t;

/* Checks every element of `doc` without recursion: structure, nesting
 * depth (BSONCHECK_MAX_DEPTH), UTF-8 of keys and strings (embedded NULs
 * allowed in strings), boolean bytes. `*at` is set to the failing element's
 * offset in its document. */
bsoncheck_fault_t bsoncheck_doc(const bson_t *doc, uint32_t *at);

#endif
