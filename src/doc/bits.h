/* bits: the $bitsAllSet / $bitsAnySet / $bitsAllClear / $bitsAnyClear query
 * operators — a compiled set of bit positions and the test of one value
 * (an integral number in two's complement, or BinData little-endian). */
#ifndef ATOMDB_BITS_H
#define ATOMDB_BITS_H

#include <bson/bson.h>
#include <stdbool.h>

#include "util/dberr.h"

typedef struct bits bits_t;

/* True when `op` is one of the four $bits operators. */
bool bits_is_operator(const char *op);

/* Compiles `op` (one bits_is_operator accepts) with argument `arg`: a
 * non-negative integral number (a mask), an array of non-negative bit
 * positions, or BinData (a mask).
 * NULL with `err` set as mongod (BadValue 2 / FailedToParse 9). */
bits_t *bits_new(const char *op, const bson_value_t *arg, dberr_t *err);

/* Frees `b` (accepts NULL). */
void bits_destroy(bits_t *b);

/* True when value `v` passes the test. Numbers that are not integral or
 * not representable as a 64-bit integer, and other types, never pass. */
bool bits_test(const bits_t *b, const bson_value_t *v);

#endif
