/* docvalidation: the errInfo.details of DocumentValidationFailure (121),
 * explaining why a document fails a collection validator as mongod 7's
 * doc_validation_error does for the common shapes. */
#ifndef ATOMDB_DOCVALIDATION_H
#define ATOMDB_DOCVALIDATION_H

#include <bson/bson.h>

/* Appends to `out` (initialised by the caller) the details for `doc`, which
 * fails `validator`: the $jsonSchema details when the validator is
 * {$jsonSchema: ...} alone, a single clause's details when it has one
 * clause, else {operatorName: "$and", clausesNotSatisfied: [{index,
 * details}]} over the failing top-level clauses. A query-operator clause is
 * described by its operator, specifiedAs, a reason and the considered value
 * of a top-level field. `brief` leaves out specifiedAs and considered
 * values (mongod's truncated form, for errors too large to send whole). */
void docvalidation_explain(const bson_t *validator, const bson_t *doc, bool brief, bson_t *out);

#endif
