/* check: the validate command's self-check of one collection — every
 * document well-formed BSON, and (full) every index holding exactly the
 * keys its documents generate, each pointing at the document's current
 * version. atomdb keeps its own indexes in step with its records, so this
 * is the check that they really are. */
#ifndef ATOMDB_CHECK_H
#define ATOMDB_CHECK_H

#include <bson/bson.h>
#include <stdbool.h>
#include <stdint.h>

#include "store/collection.h"

#define CHECK_MAX_ERRORS 32

/* What check_collection found. */
typedef struct check_result {
    int64_t nrecords;                          /* documents */
    int64_t invalid_docs;                      /* documents that are not valid BSON */
    int nindexes;
    int64_t keys[COLLECTION_MAX_INDEXES];      /* entries in each index */
    int64_t missing[COLLECTION_MAX_INDEXES];   /* keys a document generates, absent (full) */
    int64_t extra[COLLECTION_MAX_INDEXES];     /* entries no document generates (full) */
    int nerrors;
    char errors[CHECK_MAX_ERRORS][200];        /* the first errors, as sentences */
} check_result_t;

/* Checks `c`; `full` also cross-checks every index entry against the
 * documents. True when nothing is wrong. */
bool check_collection(collection_t *c, bool full, check_result_t *out);

#endif
