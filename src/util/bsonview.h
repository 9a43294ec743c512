/* bsonview: read-only views of BSON held inside other BSON. A view borrows
 * the outer buffer: it is never destroyed and lives as long as the outer
 * document does. One helper instead of the iter/document/init_static triple
 * every layer used to spell out. */
#ifndef ATOMDB_BSONVIEW_H
#define ATOMDB_BSONVIEW_H

#include <bson/bson.h>
#include <stdbool.h>

/* The document or array at it, as a bson_t in out; false (out untouched)
 * when it holds anything else. */
bool bsonview_iter(const bson_iter_t *it, bson_t *out);

/* The document under key in doc; false when key is missing or holds
 * anything else (an array included). */
bool bsonview_field(const bson_t *doc, const char *key, bson_t *out);

#endif
