/* keystring: an encoding of BSON values whose byte order (memcmp) equals
 * compare_values() order, so indexes are ordered maps over plain bytes.
 * Equal values (1, 1.0, 1L) encode to equal bytes. A descending key part is
 * the bitwise complement of the ascending one, and every part is
 * self-delimiting so compound keys concatenate. */
#ifndef ATOMDB_KEYSTRING_H
#define ATOMDB_KEYSTRING_H

#include <bson/bson.h>
#include <stdbool.h>

#include "util/buf.h"

/* Appends the encoding of `v` to `out`; `descending` inverts it. */
void keystring_append(buf_t *out, const bson_value_t *v, bool descending);

typedef struct collation collation_t;

/* keystring_append with strings (also inside documents and arrays) encoded
 * as their ICU sort keys under `coll` (NULL: as bytes), so the byte order is
 * compare_values_coll order: the keys of a collated index. */
void keystring_append_coll(buf_t *out, const bson_value_t *v, bool descending,
                           const collation_t *coll);

/* Appends the encoding of a missing field (sorts like null for indexes). */
void keystring_append_null(buf_t *out, bool descending);

#endif
