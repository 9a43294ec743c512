/* bsonhash: mongod's hash of a BSON value (BSONElementHasher::hash64, seed
 * 0), the key of hashed indexes and convertShardKeyToHashed: the first 8
 * bytes, little-endian, of an MD5 over the value's canonical type and bytes,
 * numbers squashed to 64-bit integers. */
#ifndef ATOMDB_BSONHASH_H
#define ATOMDB_BSONHASH_H

#include <bson/bson.h>
#include <stdint.h>

/* The hash of `v` as mongod computes it (hash64({check: 42}.check) is
 * -944302157085130861). */
int64_t bsonhash_value(const bson_value_t *v);

#endif
