/* pipeline: aggregation pipelines — $documents $match $group $sort $skip
 * $limit $project $addFields/$set $unset $unwind $count $replaceRoot
 * $replaceWith, the joins $lookup $unionWith $graphLookup (through a
 * pipeline_source_t), and a terminal $out/$merge that the caller performs —
 * run over a list of documents. Also used for pipeline-style updates. */
#ifndef ATOMDB_PIPELINE_H
#define ATOMDB_PIPELINE_H

#include <bson/bson.h>
#include <stdbool.h>
#include <stddef.h>

#include "geo/geo.h"
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
 * `let` holds the command's user variables or NULL: each value is evaluated
 * once, here, as an expression against an empty document (see
 * expr_eval_let) and then visible as $$name to every stage, $match's $expr
 * included. NULL with `err` set: an unknown stage is Location40324
 * "Unrecognized pipeline stage name: '$foo'", a stage not allowed in `mode`
 * InvalidOptions, $out/$merge not last Location40601 "$out can only be the
 * final stage in the pipeline", $documents not first Location40602, an
 * undefined $$variable in $match/$group/$replaceRoot/$documents
 * Location17276, as mongod. */
pipeline_t *pipeline_new(const bson_iter_t *stages, pipeline_mode_t mode, const bson_t *let,
                         dberr_t *err);

/* Frees `p` (accepts NULL). */
void pipeline_destroy(pipeline_t *p);

/* Runs `p` over `docs` in place: on success `docs` holds the output. A
 * leading $documents replaces whatever `docs` held. A terminal $out/$merge
 * is not performed: `docs` then holds the documents to write (see
 * pipeline_output). Errors from $expr inside $match fail the run. */
bool pipeline_run(const pipeline_t *p, doclist_t *docs, dberr_t *err);

/* Like pipeline_run with extra variables: the fields of `vars` (values,
 * not expressions; NULL for none) are bound on top of the pipeline's let.
 * Used to run a $merge whenMatched pipeline with $$new (see
 * pipeline_merge_vars). */
bool pipeline_run_vars(const pipeline_t *p, const bson_t *vars, doclist_t *docs, dberr_t *err);

/* $merge whenMatched: what to do with an output document whose `on` fields
 * match a document of the target collection. */
typedef enum pipeline_when_matched {
    PIPELINE_WHEN_MATCHED_MERGE,         /* "merge" (default): set the new document's
                                          * top-level fields on the existing one */
    PIPELINE_WHEN_MATCHED_REPLACE,       /* "replace": replace the existing document */
    PIPELINE_WHEN_MATCHED_KEEP_EXISTING, /* "keepExisting": leave the existing one */
    PIPELINE_WHEN_MATCHED_FAIL,          /* "fail": fail with DuplicateKey 11000 */
    PIPELINE_WHEN_MATCHED_PIPELINE,      /* an update pipeline: when_matched_pipeline */
} pipeline_when_matched_t;

/* $merge whenNotMatched: what to do with an output document matching none. */
typedef enum pipeline_when_not_matched {
    PIPELINE_WHEN_NOT_MATCHED_INSERT,  /* "insert" (default) */
    PIPELINE_WHEN_NOT_MATCHED_DISCARD, /* "discard" */
    PIPELINE_WHEN_NOT_MATCHED_FAIL,    /* "fail": mongod answers Location13113 "$merge could
                                        * not find a matching document in the target
                                        * collection for at least one document in the
                                        * source collection" */
} pipeline_when_not_matched_t;

/* A terminal $out or $merge stage, parsed. Owned by its pipeline. */
typedef struct pipeline_output {
    bool is_merge;           /* $merge; false for $out */
    char db[128];            /* target database; "" when not given (the aggregate's own) */
    char coll[256];          /* target collection, never empty */
    const bson_t *merge_spec; /* $merge: its argument as a document (the string form
                              * becomes {into: "coll"}); NULL for $out */
    /* -- $merge only -- */
    char **on;               /* fields identifying the target document (dotted paths) */
    size_t non;              /* entries in `on`; {"_id"} when not given */
    bool on_given;           /* `on` was explicit: mongod then requires a unique index
                              * on exactly those fields (Location51183 otherwise) */
    pipeline_when_matched_t when_matched;
    pipeline_t *when_matched_pipeline; /* PIPELINE_WHEN_MATCHED_PIPELINE: an update-mode
                                        * pipeline; run it on the matched target document
                                        * with pipeline_run_vars and pipeline_merge_vars */
    pipeline_when_not_matched_t when_not_matched;
} pipeline_output_t;

/* The terminal $out/$merge of `p` (borrowed from `p`), or NULL. pipeline_run
 * never performs it: it leaves the documents to write in `docs`. */
const pipeline_output_t *pipeline_output(const pipeline_t *p);

/* The variables a $merge whenMatched pipeline sees for one output document
 * `new_doc`: its `let` (default {new: "$$ROOT"}) evaluated against
 * `new_doc`, appended to `vars` (initialised by the caller). Pass them to
 * pipeline_run_vars(o->when_matched_pipeline, vars, {the target doc}). */
bool pipeline_merge_vars(const pipeline_output_t *o, const bson_t *new_doc, bson_t *vars,
                         dberr_t *err);

/* Memory limits of one run's blocking stages, in bytes, under mongod's
 * setParameter names (all 100 MB by default, as mongod). Past the limit a
 * stage fails: $sort and $group with QueryExceededMemoryLimitNoDiskUseAllowed
 * (292), $push/$addToSet with ExceededMemoryLimit (146). atomdb cannot
 * spill to disk, so allowDiskUse: true changes only the message. */
typedef struct pipeline_limits {
    int64_t sort_bytes;       /* internalQueryMaxBlockingSortMemoryUsageBytes */
    int64_t group_bytes;      /* internalDocumentSourceGroupMaxMemoryBytes */
    int64_t push_bytes;       /* internalQueryMaxPushBytes */
    int64_t add_to_set_bytes; /* internalQueryMaxAddToSetBytes */
    int64_t window_bytes;     /* internalDocumentSourceSetWindowFieldsMaxMemoryBytes:
                               * $setWindowFields and $fill, Location5414201 past it */
    int64_t densify_docs;     /* internalQueryMaxAllowedDensifyDocs (500,000 documents
                               * $densify may generate; Location5897900 past it) */
} pipeline_limits_t;
extern pipeline_limits_t pipeline_limits;

typedef struct collation collation_t;

/* The aggregate's collation (NULL: simple; `p` takes its own reference):
 * $match and $sort stages, $group keys and accumulators, and every
 * expression's comparisons ($eq, $in, $min, ...) order strings by it. */
void pipeline_set_collation(pipeline_t *p, collation_t *coll);

/* The aggregate's allowDiskUse (default false). */
void pipeline_set_allow_disk_use(pipeline_t *p, bool allow);

/* True when the first stage is $documents: the pipeline makes its own input
 * (the caller runs it with an empty list, as for {aggregate: 1}). */
bool pipeline_is_collectionless(const pipeline_t *p);

/* Where the stages that read other collections ($lookup, $unionWith,
 * $graphLookup) get their documents: the command layer sets one on each
 * pipeline it runs (src/cmd/view.c); this layer never sees the store. */
typedef struct pipeline_source {
    /* Appends to `out` (owned copies) the documents of collection `coll`
     * of the command's database that match the query `filter` (its $expr
     * sees the variables `vars`, evaluated values, or none when NULL),
     * using the collection's indexes and resolving views, inside the
     * command's snapshot or transaction. Strings compare by `collation`
     * (the run's, NULL: simple) in the filter and the index choice. A
     * missing collection reads as empty. */
    bool (*read)(void *ctx, const char *coll, const bson_t *filter, const bson_t *vars,
                 const collation_t *collation, doclist_t *out, dberr_t *err);
    void *ctx; /* passed to read */
} pipeline_source_t;

/* Gives `p` its source (borrowed: it must outlive every run of `p`); the
 * pipelines nested in its stages use it too. Without one, a stage that
 * reads another collection fails when it runs (InternalError). */
void pipeline_set_source(pipeline_t *p, const pipeline_source_t *src);

/* True when some stage of `p` reads another collection (the caller then
 * holds one snapshot for the whole run). */
bool pipeline_reads_others(const pipeline_t *p);

/* True when stage i of `p` reads another collection. */
bool pipeline_stage_reads(const pipeline_t *p, size_t i);

/* Number of stages of `p`. */
size_t pipeline_nstages(const pipeline_t *p);

/* pipeline_run for explain's executionStats: stage by stage (nothing
 * streamed), recording for each stage i the documents it returned
 * (nreturned[i]) and the milliseconds it took (millis[i]); both arrays
 * hold pipeline_nstages(p) entries. `after` (may be NULL) is called with
 * `after_ctx` once stage i is done (the caller reads its source's
 * counters there). */
bool pipeline_run_explain(const pipeline_t *p, doclist_t *docs, int64_t *nreturned,
                          int64_t *millis, void (*after)(void *ctx, size_t i), void *after_ctx,
                          dberr_t *err);
/* A leading $geoNear stage (borrowed from `p`), or NULL. The caller checks
 * the collection's 2dsphere index (mongod's IndexNotFound / 291) and names
 * the geometry path with pipeline_geonear_set_key when `key` was not given
 * (pipeline_geonear_key is NULL); the stage runs over the collection. */
typedef struct geonear_spec geonear_spec_t;
geonear_spec_t *pipeline_leading_geonear(const pipeline_t *p);
const char *pipeline_geonear_key(const geonear_spec_t *g);
void pipeline_geonear_set_key(geonear_spec_t *g, const char *path);
/* The units of the stage's distances: metres (a GeoJSON near), radians (a
 * legacy pair with spherical: true) or flat (spherical: false: a 2d index). */
geo_near_units_t pipeline_geonear_units(const geonear_spec_t *g);
/* The filter the collection read under a leading $geoNear runs with (for
 * matcher_new_near): the `query`'s predicates (unless it has $text) and
 * {key: {$nearSphere: .., $minDistance, $maxDistance}} ($near for a flat
 * one), so the planner scans the geo index over the distance range (under
 * the bounds the query puts on a compound 2dsphere index's leading
 * fields); the stage still filters and orders. `out` is initialized here. */
void pipeline_geonear_source_filter(const geonear_spec_t *g, bson_t *out);

/* The filter of a leading $match stage (borrowed from `p`), or NULL; the
 * caller may use it to pick an index, the stage still runs. */
const bson_t *pipeline_leading_match(const pipeline_t *p);

typedef struct fts_query fts_query_t;

/* The $text query of a leading $match (borrowed from `p`), or NULL. The
 * caller binds it to the collection's text index (fts_query_bind) before
 * running: an unbound $text fails its $match with 17313. */
fts_query_t *pipeline_text(const pipeline_t *p);

#endif
