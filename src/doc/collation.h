/* collation: MongoDB collations ({locale: "fr", strength: 2, ...}) through
 * ICU. A parsed collation orders and equates strings the way mongod's ICU
 * collator does, and gives the ICU sort key that collated indexes store in
 * their keystrings. The simple collation ({locale: "simple"}, or none) is
 * represented by NULL everywhere: bytewise comparison. */
#ifndef ATOMDB_COLLATION_H
#define ATOMDB_COLLATION_H

#include <bson/bson.h>
#include <stdbool.h>
#include <stddef.h>

#include "util/buf.h"
#include "util/dberr.h"

typedef struct collation collation_t;

/* Parses a collation spec with mongod's validation: *out is NULL for the
 * simple collation, else a new collation the caller owns. Errors as
 * mongod: FailedToParse 9 (unknown field, bad strength/caseFirst/alternate/
 * maxVariable, simple with other fields), BadValue 2 (unknown locale,
 * backwards at strength 1, caseFirst without caseLevel below strength 3),
 * TypeMismatch 14, NoSuchKey 4 (no locale), IncompatibleCollationVersion 12. */
bool collation_parse(const bson_t *spec, collation_t **out, dberr_t *err);

/* Like collation_parse for the value under `it` (a command's `collation`
 * field): TypeMismatch 14 unless it is a document. */
bool collation_parse_iter(const bson_iter_t *it, collation_t **out, dberr_t *err);

/* Adds a reference and returns `c` (NULL stays NULL). */
collation_t *collation_ref(collation_t *c);

/* Drops a reference; frees with the last (accepts NULL). */
void collation_destroy(collation_t *c);

/* Compares two UTF-8 strings under `c` (NULL: bytewise): <0, 0, >0. */
int collation_compare(const collation_t *c, const char *a, size_t alen, const char *b,
                      size_t blen);

/* Appends the ICU sort key of the UTF-8 string `s` under `c` (non-NULL) to
 * `out`, without the terminating zero byte. memcmp order of two keys is
 * collation_compare order; equal strings give equal keys. */
void collation_sort_key(const collation_t *c, const char *s, size_t len, buf_t *out);

/* Appends the fully resolved spec (every option, as mongod's listIndexes
 * and listCollections show it) as document `key` of `out`. */
void collation_append(const collation_t *c, bson_t *out, const char *key);

/* The fully resolved spec into `out` (initialised by the caller). */
void collation_to_bson(const collation_t *c, bson_t *out);

/* True when `a` and `b` order every string alike (NULL is simple). */
bool collation_same(const collation_t *a, const collation_t *b);

#endif
