/* updater: MongoDB updates — an operator document ({$set, $inc, $push, ...}),
 * a replacement document, or an aggregation pipeline ([{$set: ...}, ...]) —
 * parsed once and applied to documents, producing a new document (records
 * are immutable; the caller swaps the result in). */
#ifndef ATOMDB_UPDATER_H
#define ATOMDB_UPDATER_H

#include <bson/bson.h>
#include <stdbool.h>

#include "util/dberr.h"

typedef struct updater updater_t;

/* The kind of update an updater holds. */
typedef enum updater_kind {
    UPDATER_OPERATORS,   /* {$set: ..., $inc: ...} */
    UPDATER_REPLACEMENT, /* {a: 1, b: 2} */
    UPDATER_PIPELINE,    /* [{$set: ...}, {$unset: ...}] */
} updater_kind_t;

/* Parses the update under `spec` (a document or an array) with optional
 * `array_filters` (the `arrayFilters` array, or NULL). NULL with `err` set
 * as mongod would answer: FailedToParse 9 for an unknown modifier or an
 * empty operator document, ConflictingUpdateOperators 40 for overlapping
 * paths, DollarPrefixedFieldName 52 for `{$set: {$inc: ...}}`, BadValue 2 /
 * FailedToParse 9 for bad arrayFilters. */
updater_t *updater_new(const bson_iter_t *spec, const bson_t *array_filters, dberr_t *err);

/* Like updater_new, with the command's `let` variables (or NULL) for a
 * pipeline-style update. */
updater_t *updater_new_let(const bson_iter_t *spec, const bson_t *array_filters, const bson_t *let,
                           dberr_t *err);

/* Makes the strings `u` compares — its arrayFilters, $min/$max, $addToSet,
 * $pull, $pullAll, $push's $sort and a pipeline update's expressions —
 * compare by `coll` (NULL: simple; `u` takes its own reference). */
typedef struct collation collation_t;
void updater_set_collation(updater_t *u, collation_t *coll);

/* Frees `u` (accepts NULL). */
void updater_destroy(updater_t *u);

/* The kind of update `u` holds. */
updater_kind_t updater_kind(const updater_t *u);

/* True when `u` has a positional `$` path, the only use updater_apply
 * makes of `positional`: callers need not work out the matched array
 * index otherwise (as projection_is_positional). */
bool updater_is_positional(const updater_t *u);

/* Applies `u` to `old_doc`, writing the whole new document to `out`
 * (initialised by the caller with bson_init, and left empty on failure).
 * `is_insert` is true when the document is being created by an upsert
 * ($setOnInsert applies). `positional` is the array index the query
 * matched, for `$`, or -1 (then a `$` path fails with BadValue 2, as mongod).
 * `*changed` tells whether `out` differs from `old_doc`. `_id` stays first
 * and may not change (ImmutableField 66); $inc on a non-number is
 * TypeMismatch 14; int32 results that overflow become int64 as in mongod;
 * a stored field name starting with `$` is DollarPrefixedFieldName 52. */
bool updater_apply(const updater_t *u, const bson_t *old_doc, bool is_insert, int positional,
                   bson_t *out, bool *changed, dberr_t *err);

#endif
