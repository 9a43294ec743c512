/* textindex: mongod's `text` index kind — its spec (key {_fts: "text",
 * _ftsx: 1} between the prefix and suffix fields, weights, languages), its
 * keys (one per document term: prefix values, term, score, suffix values)
 * and the scan that finds a $text query's candidate documents. */
#ifndef ATOMDB_TEXTINDEX_H
#define ATOMDB_TEXTINDEX_H

#include <bson/bson.h>
#include <stdbool.h>

#include "doc/fts.h"
#include "doc/matcher.h"
#include "store/index.h"
#include "store/record.h"
#include "util/dberr.h"

/* True when the key pattern field `field` is a text one (f: "text"). */
bool textindex_is_text_field(const bson_iter_t *field);

/* True when the `key` of the createIndexes spec `spec` holds a "text"
 * field (or the resolved _fts: "text"). */
bool textindex_is_text_spec(const bson_t *spec);

/* True for the index spec fields only text indexes take (weights,
 * default_language, language_override, textIndexVersion). */
bool textindex_is_text_option(const char *field);

/* Parses a text index spec. Fills `key_out` with the resolved key pattern,
 * `resolved_out` with weights, default_language, language_override and
 * textIndexVersion. NULL with err as mongod (17271-17294, 17389...). */
textindex_t *textindex_new(const bson_t *spec, bson_t *key_out, bson_t *resolved_out,
                           dberr_t *err);
/* Frees it (accepts NULL). */
void textindex_destroy(textindex_t *t);

/* The weights and languages (borrowed for the index's life). */
const fts_spec_t *textindex_spec(const textindex_t *t);

/* True when the two text indexes index the same way (same weights,
 * languages and prefix/suffix fields). */
bool textindex_same(const textindex_t *a, const textindex_t *b);

/* The keys of `doc`: one per distinct term. False with 17261/17262 (bad
 * language override) or 16675 (an array in a prefix or suffix field). */
bool textindex_keys_of(const textindex_t *t, const bson_t *doc, index_keys_t *out, dberr_t *err);

/* Appends (referenced, each once) the records of `ix` (a text index) that
 * hold one of bound `q`'s index terms, under the equality values `m` gives
 * the prefix fields; counts keys into *keys_examined. Fails with BadValue 2
 * when a prefix field has no equality in `m`, or when killed (no yields:
 * the scan holds positions in the index). */
bool textindex_scan(const index_t *ix, const fts_query_t *q, const matcher_t *m, recvec_t *out,
                    size_t *keys_examined, dberr_t *err);

#endif
