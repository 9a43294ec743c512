/* compare: MongoDB's total order over BSON values — the cross-type order
 * MinKey < null < numbers < strings/symbols < objects < arrays < binData <
 * ObjectId < bool < date < timestamp < regex < MaxKey — with numbers compared
 * by value across int32/int64/double/decimal128. Strings compare as bytes, or
 * under a collation (collation.h) with the _coll variants. Used by the matcher, sort, $min/$max and index keys. */
#ifndef ATOMDB_COMPARE_H
#define ATOMDB_COMPARE_H

#include <bson/bson.h>
#include <stdbool.h>

#include "doc/num.h"

typedef struct collation collation_t;

/* The rank of `type` in the cross-type order (numbers share one rank, as do
 * string and symbol; undefined ranks with null). */
int compare_type_rank(bson_type_t type);

/* Compares two values: <0, 0 or >0. Documents compare field by field (type
 * rank, then name, then value), arrays element by element, as mongod does. */
int compare_values(const bson_value_t *a, const bson_value_t *b);

/* compare_values with strings (also inside documents and arrays, field
 * names excepted) ordered by `coll`; NULL is the simple collation. */
int compare_values_coll(const bson_value_t *a, const bson_value_t *b, const collation_t *coll);

/* Compares the values under two iterators without copying them. */
int compare_iters(const bson_iter_t *a, const bson_iter_t *b);

/* Compares two whole documents as objects. */
int compare_docs(const bson_t *a, const bson_t *b);

/* True when the two values are equal in this order (1 == 1.0 == 1L). */
bool compare_equal(const bson_value_t *a, const bson_value_t *b);

/* True when `v` is a number (int32, int64, double, decimal128): num_is_number. */
static inline bool compare_is_number(const bson_value_t *v)
{
    return num_is_number(v);
}

/* `v` as a double (decimal128 approximated); 0 for non-numbers: num_to_double. */
static inline double compare_to_double(const bson_value_t *v)
{
    return num_to_double(v);
}

#endif
