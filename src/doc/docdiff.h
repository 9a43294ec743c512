/* docdiff: the field-level difference between two versions of a document,
 * as {$set: {path: value}, $unset: {path: ""}}, for the write-ahead log.
 * Only in-place changes are expressed as a diff (so replaying it with the
 * updater reproduces the new document byte for byte); anything else asks
 * the caller to log the whole document. */
#ifndef ATOMDB_DOCDIFF_H
#define ATOMDB_DOCDIFF_H

#include <bson/bson.h>
#include <stdbool.h>

/* Appends to `diff` (initialised by the caller) a $set document with the
 * resolved values of every changed path of `new_doc` relative to
 * `old_doc`. Returns false when the change is not a pure in-place one —
 * fields added, removed or reordered, or names a path cannot carry — and
 * the whole document should be logged instead. */
bool docdiff_compute(const bson_t *old_doc, const bson_t *new_doc, bson_t *diff);

#endif
