/* compare-private: helpers shared by compare.c and keystring.c so that the
 * comparison order and the key encoding agree on how numbers are valued.
 * Not part of the public doc interface. */
#ifndef ATOMDB_COMPARE_PRIVATE_H
#define ATOMDB_COMPARE_PRIVATE_H

#include <bson/bson.h>
#include <stdbool.h>

/* `v` (a number) as a long double. int32/int64/double convert exactly
 * (long double has at least a 64-bit mantissa on the supported targets);
 * decimal128 is parsed from its string form and rounded to a 64-bit
 * mantissa so that compare and keystring see the same value. */
long double compare_number_ld(const bson_value_t *v);

#endif
