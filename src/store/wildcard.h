/* wildcard: mongod's wildcard index kind ({"$**": 1}, {"path.$**": 1}) —
 * its key pattern and wildcardProjection, its keys (one ($_path, value)
 * pair per leaf of the projected document, as mongod's
 * wildcard_key_generator) and which query paths it can answer. */
#ifndef ATOMDB_WILDCARD_H
#define ATOMDB_WILDCARD_H

#include <bson/bson.h>
#include <stdbool.h>

#include "doc/collation.h"
#include "store/index.h"
#include "util/dberr.h"

/* The longest query path the planner bounds on a wildcard index (explain
 * shows it in the scan's key pattern). */
#define WILDCARD_PATH_MAX 256

/* True when the `key` of the createIndexes spec `spec` has a "$**" or
 * "path.$**" field (a text index's "$**": "text" excepted). */
bool wildcard_is_spec(const bson_t *spec);

/* Parses a wildcard index's key pattern and wildcardProjection from
 * `spec`. Fills `key_out` with the key pattern. NULL with err as mongod:
 * CannotCreateIndex 67 (bad key), FailedToParse 9 / TypeMismatch 14 (bad
 * projection), 31253/31254 (mixed projection), 51271 (computed field),
 * 31249 (path collision), the compound checks (wildcard_is_compound). */
wildcard_t *wildcard_new(const bson_t *spec, bson_t *key_out, dberr_t *err);
/* Frees it (accepts NULL). */
void wildcard_destroy(wildcard_t *w);

/* True when the key pattern has other fields beside the wildcard one
 * (mongod 7.0's compound wildcard index): wildcard_new checks its spec as
 * mongod does (7246204 a field under the wildcard subtree; on the
 * projection's top-level paths 7246200 overlap, 7246208 inclusion reaching
 * another field, 7246209/7246210 exclusion leaving one in, 7246211 mixed;
 * 67 another index plugin or "$**" without a projection), index_new then
 * refuses it (NotImplemented 238). */
bool wildcard_is_compound(const wildcard_t *w);

/* True when both index the same paths (key pattern and projection). */
bool wildcard_same(const wildcard_t *a, const wildcard_t *b);

/* Appends the keys of `doc`: keystring(path) then keystring(value under
 * `coll`), one per distinct leaf; empty arrays give undefined, empty
 * documents themselves, arrays nested in arrays are values. Sets
 * *multikey, and records the path as multikey in `w`, when an array was
 * traversed. */
bool wildcard_keys_of(wildcard_t *w, const collation_t *coll, const bson_t *doc,
                      index_keys_t *out, bool *multikey, dberr_t *err);

/* True when some indexed document had an array at `path` or at one of its
 * prefixes (mongod's per-path multikey metadata): then two range bounds on
 * it may be met by different elements, and explain shows isMultiKey. */
bool wildcard_path_multikey(const wildcard_t *w, const char *path);

/* True when every value the query path `path` can match is in the index
 * under `path` itself: the projection keeps the path, and no component is
 * positional (numeric) or $-prefixed. */
bool wildcard_covers(const wildcard_t *w, const char *path);

/* Appends the key part for the path `path` (the scan prefix). */
void wildcard_append_path(buf_t *key, const char *path);

#endif
