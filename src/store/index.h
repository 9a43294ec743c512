/* index: one index of a collection — an ordered map from key strings
 * (keystring encoding of the indexed fields, so memcmp order is MongoDB's
 * order) to records. Handles compound and multikey keys, unique, sparse and
 * partial indexes, and TTL options. */
#ifndef ATOMDB_INDEX_H
#define ATOMDB_INDEX_H

#include <bson/bson.h>
#include <stdbool.h>

#include "doc/collation.h"
#include "doc/matcher.h"
#include "geo/geo.h"
#include "store/record.h"
#include "util/buf.h"
#include "util/dberr.h"
#include "util/btree.h"
#include "util/omap.h"

#define INDEX_MAX_FIELDS 32

/* Index keys generated for one document. */
typedef struct index_keys {
    buf_t *keys;  /* each an encoded key (without the _id suffix) */
    size_t len;
    size_t cap;
    bool skip;    /* sparse / partial: the document is not in the index */
} index_keys_t;

typedef struct textindex textindex_t;
typedef struct wildcard wildcard_t;

typedef struct index {
    char *name;                  /* "_id_", "a_1_b_-1", ... */
    bson_t key;                  /* key pattern, e.g. {a: 1, b: -1} */
    bson_t spec;                 /* the spec listIndexes returns */
    int nfields;
    char *paths[INDEX_MAX_FIELDS];
    int dirs[INDEX_MAX_FIELDS];  /* 1 or -1 */
    int hashed;                  /* the field keyed by its hash ({f: "hashed"}), or -1 */
    bool sphere[INDEX_MAX_FIELDS]; /* a "2dsphere" field: keys are S2 cells */
    bool is_2dsphere;            /* some field is "2dsphere" (planned: store/geoscan.h) */
    geo2d_params_t *geo2d;       /* a "2d" index's plane (owned), or NULL: its first
                                  * field's keys are geohash cells (store/index2d.c) */
    bool is_id;                  /* the _id index */
    bool unique;
    bool sparse;
    matcher_t *partial;          /* partialFilterExpression, or NULL */
    bool hidden;                 /* kept up to date but never planned or hinted */
    collation_t *collation;      /* the index's collation (owned), NULL: simple */
    int64_t expire_after_s;      /* TTL seconds, or -1 */
    bool multikey;               /* some document gave more than one key */
    btree_t *map;                /* key (+ _id key unless unique) → record_t* (borrowed) */
    textindex_t *text;           /* a text index's spec (owned; store/textindex.h), or NULL;
                                  * then nfields is 0: the planner uses it for $text only */
    wildcard_t *wildcard;        /* a wildcard index's paths (owned; store/wildcard.h), or
                                  * NULL; then nfields is 0: keys are (path, value) pairs */
} index_t;

/* Builds an index from a createIndexes spec ({key, name, unique, ...}).
 * NULL with err (CannotCreateIndex 67, BadValue 2, InvalidIndexSpecificationOption 197). */
index_t *index_new(const bson_t *spec, dberr_t *err);
/* The _id index. */
index_t *index_new_id(void);

/* Gives the (empty) _id index `ix` the collation `coll` (NULL: simple;
 * `ix` takes its own reference): a collection's default collation, which
 * mongod gives its _id index too. Its spec shows the resolved collation. */
void index_set_id_collation(index_t *ix, collation_t *coll);
/* Frees the index (accepts NULL); records are not touched. */
void index_destroy(index_t *ix);

/* Generates the keys of `doc` for `ix` into `out` (initialised by
 * index_keys_init). False with CannotIndexParallelArrays 171 when two
 * indexed fields are arrays, 16766 when the hashed field meets an array. */
bool index_keys_of(index_t *ix, const bson_t *doc, index_keys_t *out, dberr_t *err);
void index_keys_init(index_keys_t *k);

/* index_keys_of for a 2d index (store/index2d.c): a key per location of
 * the geo field, none (skip) without one; mongod's 13026 / 13027 / 13067 /
 * 13068 / 16804 with " :: caused by :: <doc>". */
bool index2d_keys_of(index_t *ix, const bson_t *doc, index_keys_t *out, dberr_t *err);
void index_keys_destroy(index_keys_t *k);

/* The full map key for `key` of the document whose _id is `id`. */
void index_map_key(const index_t *ix, const buf_t *key, const bson_value_t *id, buf_t *out);

/* The record that already holds `key` in a unique index, other than
 * `self`; NULL when none. */
record_t *index_unique_conflict(const index_t *ix, const buf_t *key, const record_t *self);

/* Fills err with mongod's duplicate-key error for `key` of `doc` in `ix`:
 * "E11000 duplicate key error collection: <ns> index: <name> dup key: { ... }"
 * with keyPattern/keyValue available through index_dup_info. */
bool index_dup_error(const index_t *ix, const char *ns, const bson_t *doc, dberr_t *err);

/* Appends keyPattern and keyValue for a duplicate of `doc` in `ix` to `out`. */
void index_dup_info(const index_t *ix, const bson_t *doc, bson_t *out);

/* Shows or hides `ix` from the planner and records it in its spec (the
 * `hidden` field listIndexes shows; absent when false, as mongod). */
void index_set_hidden(index_t *ix, bool hidden);

/* Appends the key part field `f` of `ix` gives the value `v`: its hash
 * (an int64) for the hashed field, else `v` under the index's direction and
 * collation. */
void index_append_key_part(const index_t *ix, int f, const bson_value_t *v, buf_t *key);

/* Appends to `lo` the scan's start for the range `b` puts on field `f` of
 * `ix` after `prefix`, and to `hi` its end when it has one (returns true
 * then): the bounds swap on a descending field, and a multikey index keeps
 * only the start of a two-sided range (different elements may meet the two). */
bool index_append_range(const index_t *ix, int f, const matcher_bounds_t *b, const buf_t *prefix,
                        buf_t *lo, buf_t *hi);

/* True when some field of the key pattern (`key`) of the createIndexes
 * spec `spec` satisfies `is_kind`; false when it has no key document. */
bool index_spec_has_field(const bson_t *spec, bool (*is_kind)(const bson_iter_t *field));

/* True when the spec's key pattern equals `key`. */
bool index_key_equals(const index_t *ix, const bson_t *key);

#endif
