/* jsonschema: MongoDB's $jsonSchema (draft 4 subset plus bsonType), compiled
 * once and checked against documents, for the query operator and collection
 * validators; explains a failure as mongod 7's errInfo.details does. */
#ifndef ATOMDB_JSONSCHEMA_H
#define ATOMDB_JSONSCHEMA_H

#include <bson/bson.h>
#include <stdbool.h>

#include "util/dberr.h"

typedef struct jsonschema jsonschema_t;

/* Compiles the $jsonSchema argument `spec` (must be a document). NULL with
 * `err` set as mongod: FailedToParse 9 "Unknown $jsonSchema keyword: x",
 * TypeMismatch 14 for a keyword of the wrong type, ... The schema keeps its
 * own copy of `spec`. `depth` is the nesting of the filter it appears in. */
jsonschema_t *jsonschema_new(const bson_t *spec, int depth, dberr_t *err);

/* True when the top-level schema `spec` of a collection validator can
 * accept no document: additionalProperties false while `required` does not
 * name _id and no patternProperties pattern matches "_id" whole (mongod
 * warns, log id 3216000). */
bool jsonschema_rejects_id(const bson_t *spec);

/* Frees `s` (accepts NULL). */
void jsonschema_destroy(jsonschema_t *s);

/* True when the document `doc` satisfies the schema. */
bool jsonschema_matches(const jsonschema_t *s, const bson_t *doc);

/* Appends to `out` the fields of mongod 7's error details for a document
 * that fails the schema: operatorName "$jsonSchema", title and description
 * when given, and schemaRulesNotSatisfied (one entry per failing keyword,
 * nested as mongod's doc_validation_error does). `brief` leaves out
 * specifiedAs and considered values, as mongod does when the full error
 * would be too large. */
void jsonschema_explain(const jsonschema_t *s, const bson_t *doc, bool brief, bson_t *out);

#endif
