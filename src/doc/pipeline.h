/* pipeline: aggregation pipelines — $match $group $sort $skip $limit
 * $project $addFields/$set $unset $unwind $count $replaceRoot $replaceWith —
 * run over a list of documents. Also used for pipeline-style updates. */
#ifndef ATOMDB_PIPELINE_H
#define ATOMDB_PIPELINE_H

#include <bson/bson.h>
#include <stdbool.h>
#include <stddef.h>

#include "util/dberr.h"

typedef struct pipeline pipeline_t;

/* A list of heap-owned documents. */
typedef struct doclist {
    bson_t **docs; /* each owned by the list (bson_destroy) */
    size_t len;
    size_t cap;
} doclist_t;

/* doclist lifecycle: init empty, push (steals `doc`), destroy (frees all). */
void doclist_init(doclist_t *l);
void doclist_push(doclist_t *l, bson_t *doc);
void doclist_destroy(doclist_t *l);

/* Which stages a pipeline may hold. */
typedef enum pipeline_mode {
    PIPELINE_AGGREGATE, /* every supported stage */
    PIPELINE_UPDATE,    /* only $addFields/$set, $project, $unset, $replaceRoot/$replaceWith */
} pipeline_mode_t;

/* Parses an array of stage documents (`stages` points at the array field).
 * `let` holds user variables or NULL. NULL with `err` set: an unknown stage
 * is Location40324 "Unrecognized pipeline stage name: '$foo'", a stage not
 * allowed in `mode` InvalidOptions / Location, as mongod. */
pipeline_t *pipeline_new(const bson_iter_t *stages, pipeline_mode_t mode, const bson_t *let,
                         dberr_t *err);

/* Frees `p` (accepts NULL). */
void pipeline_destroy(pipeline_t *p);

/* Runs `p` over `docs` in place: on success `docs` holds the output. */
bool pipeline_run(const pipeline_t *p, doclist_t *docs, dberr_t *err);

/* The filter of a leading $match stage (borrowed from `p`), or NULL; the
 * caller may use it to pick an index, the stage still runs. */
const bson_t *pipeline_leading_match(const pipeline_t *p);

#endif
