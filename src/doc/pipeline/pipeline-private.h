/* pipeline-private: what the files of src/doc/pipeline/ share — a parsed
 * stage, the stage table row (one per stage: parse, run, variable check,
 * where it may stand) and the helpers the stage families use. */
#ifndef ATOMDB_PIPELINE_PRIVATE_H
#define ATOMDB_PIPELINE_PRIVATE_H

#include <bson/bson.h>
#include <stdbool.h>
#include <stdint.h>

#include "doc/expr.h"
#include "doc/matcher.h"
#include "doc/pipeline.h"
#include "doc/projection-private.h"
#include "doc/sortspec.h"

typedef struct stage stage_t;
typedef struct stage_def stage_def_t;
typedef struct group_spec group_spec_t;

/* A stage's `let` (letvars.c): variable names and their expressions,
 * parallel arrays of n owned entries; zeroed is empty. */
typedef struct letvars {
    char **names;
    expr_t **exprs;
    size_t n;
} letvars_t;

/* Compiles the expression under `it` as variable `name` of `lv`, then
 * checks the variables it reads against `scope` (NULL: none). On failure
 * `lv` keeps what it holds; free it with letvars_destroy. */
bool letvars_add(letvars_t *lv, const char *name, const bson_iter_t *it, const bson_t *scope,
                 dberr_t *err);

/* Whether `lv` defines `name`. */
bool letvars_has(const letvars_t *lv, const char *name);

/* The variables a sub-pipeline under `lv` may read: a copy of `outer`
 * (NULL: none) with each variable of `lv` it lacks added as null, for
 * pipeline_build's variable checks. Free it with bson_destroy. */
bson_t *letvars_scope(const letvars_t *lv, const bson_t *outer);

/* Appends each variable of `lv`, evaluated in `ctx`, to `vars` (a missing
 * value as undefined). */
bool letvars_eval(const letvars_t *lv, const expr_ctx_t *ctx, bson_t *vars, dberr_t *err);

/* Frees what `lv` holds (the struct itself is the caller's). */
void letvars_destroy(letvars_t *lv);

/* A parsed $out/$merge: the public part first, so pipeline_merge_vars can
 * get back to the rest. */
typedef struct output_stage {
    pipeline_output_t pub;
    bson_t *spec;            /* pub.merge_spec */
    letvars_t let;           /* $merge let (whenMatched pipeline only) */
    const bson_t *outer_let; /* the pipeline's evaluated let (borrowed), or NULL */
} output_stage_t;

/* One parsed stage: its row and what its parse read (one member per stage). */
struct stage {
    const stage_def_t *def;
    const char *name; /* the stage name as the row spells it, for errors */
    union {
        struct {
            matcher_t *matcher;
            bson_t *filter; /* for pipeline_leading_match */
        } match;
        sortspec_t *sort;
        int64_t n;          /* $skip, $limit */
        projection_t *proj; /* $project, $addFields/$set, $unset */
        struct {
            char **path; /* the path's components */
            size_t npath;
            char **index_path; /* includeArrayIndex components, or NULL */
            size_t nindex;
            bool preserve; /* preserveNullAndEmptyArrays */
        } unwind;
        char *count_field;      /* $count */
        expr_t *expr;           /* $replaceRoot/$replaceWith newRoot, $documents */
        group_spec_t *group;    /* $group */
        output_stage_t *output; /* $out, $merge */
        struct facet_spec *facet;   /* $facet (facet.c) */
        struct bucket_spec *bucket; /* $bucket $bucketAuto $sortByCount (bucket.c) */
        struct window_spec *window;   /* $setWindowFields, $fill (window-private.h) */
        struct densify_spec *densify; /* $densify (densify.c) */
        struct join_spec *join; /* $lookup, $unionWith, $graphLookup (join.c) */
        struct geonear_spec *geonear; /* $geoNear (geonear.c) */
    } u;
};

/* Where a stage may stand and what the pipeline reads off it. */
enum {
    STAGE_IN_UPDATE = 1, /* allowed in a pipeline-style update */
    STAGE_FIRST = 2,     /* only first ($documents: makes its own input) */
    STAGE_LAST = 4,      /* only last ($out, $merge: the caller writes) */
    STAGE_MATCH = 8,     /* a filter the planner may use when it leads */
    STAGE_STREAM = 16,   /* looks at one document at a time: runs streamed (pipeline.c) */
    STAGE_READS = 32,    /* reads other collections through the pipeline's source */
    STAGE_LEADS = 64,    /* only first, over the collection ($geoNear) */
};

/* One row of a stage table. */
struct stage_def {
    const char *name; /* "$match"; NULL ends a table */
    /* Reads the stage's argument under `it` into s->u; `let` holds the
     * pipeline's evaluated variables (NULL: none). */
    bool (*parse)(stage_t *s, bson_iter_t *it, const bson_t *let, dberr_t *err);
    /* Runs the stage from `in` (its documents end up freed, moved to `out`
     * with in->docs[i] set to NULL, or kept) into `out`. */
    bool (*run)(const stage_t *s, const expr_ctx_t *ctx, doclist_t *in, doclist_t *out,
                dberr_t *err);
    /* Checks the stage's $$variables against the pipeline's let (NULL: none). */
    bool (*check_vars)(stage_t *s, const bson_t *let, dberr_t *err);
    /* Frees what parse put in s->u (NULL: nothing). */
    void (*free)(stage_t *s);
    unsigned flags;
};

/* The stage families: filter.c ($match $sort $skip $limit $count), shape.c
 * ($project $addFields $set $unset $replaceRoot $replaceWith $unwind
 * $documents), group.c ($group), output.c ($out $merge). */
extern const stage_def_t pipeline_filter_stages[];
extern const stage_def_t pipeline_shape_stages[];
extern const stage_def_t pipeline_group_stages[];
extern const stage_def_t pipeline_output_stages[];
extern const stage_def_t pipeline_facet_stages[];  /* $facet (facet.c) */
extern const stage_def_t pipeline_bucket_stages[]; /* $bucket $bucketAuto $sortByCount (bucket.c) */
extern const stage_def_t pipeline_sample_stages[]; /* $sample (sample.c) */
extern const stage_def_t pipeline_redact_stages[]; /* $redact (redact.c) */
/* window.c ($setWindowFields $fill), densify.c ($densify) */
extern const stage_def_t pipeline_window_stages[];
extern const stage_def_t pipeline_densify_stages[];
/* join.c: $lookup $unionWith $graphLookup. */
extern const stage_def_t pipeline_join_stages[];

/* Makes the $group `g` compare its keys and its $min/$max/$addToSet values
 * by `coll` (borrowed: the pipeline holds the reference). */
void pipeline_group_set_collation(group_spec_t *g, const collation_t *coll);
extern const stage_def_t pipeline_geonear_stages[]; /* $geoNear (geonear.c) */

/* Borrows the document under `it` into `out`. */
void pipeline_borrow_doc(const bson_iter_t *it, bson_t *out);

/* Whether the field under `it` holds `type`; else TypeMismatch in mongod's
 * IDL words, "BSON field '<stage>.<field>' is the wrong type, expected type
 * '<type>'", naming the type found too when `say_found` (as the stage's
 * mongod message does or not). */
bool pipeline_field_type_ok(const bson_iter_t *it, bson_type_t type, const char *stage,
                            const char *field, bool say_found, dberr_t *err);

/* Appends `v` (or the document `doc`) to the array `arr` as its element
 * `i` (the caller counts). */
void pipeline_array_append_value(bson_t *arr, uint32_t i, const bson_value_t *v);
void pipeline_array_append_doc(bson_t *arr, uint32_t i, const bson_t *doc);

/* Replaces the owned string *dst with a copy of the string under `it`;
 * false (*dst kept) with pipeline_field_type_ok's error when it holds
 * anything else. */
bool pipeline_field_string(const bson_iter_t *it, const char *stage, const char *field,
                           bool say_found, char **dst, dberr_t *err);

/* Looks up the fields `names` (n of them) in the object under `obj`:
 * *found[i] is the last field named names[i], or has raw NULL when there
 * is none. Returns how many fields the object has, named or not. */
int pipeline_fields_pick(const bson_iter_t *obj, const char *const *names, size_t n,
                         bson_iter_t *const *found);

/* One field a stage's argument object may hold: its name and what reads
 * it into the stage's parse state `args` (each stage its own struct). */
typedef struct pipeline_option {
    const char *name; /* NULL ends a table */
    bool (*parse)(void *args, const bson_iter_t *it, dberr_t *err);
} pipeline_option_t;

/* Reads each field of `obj`, in order, through its row of `rows`; a field
 * with no row fails with `unknown_code` and `unknown_fmt` (its one %s the
 * field's name). */
bool pipeline_options_parse(const bson_t *obj, const pipeline_option_t *rows, int unknown_code,
                            const char *unknown_fmt, void *args, dberr_t *err);

/* Splits dotted `s` into owned components (free with path_free, also on
 * failure); false on an empty component. */
bool pipeline_split_path(const char *s, char ***out, size_t *n);

/* Moves every document of `in` to `out` unchanged. */
void pipeline_pass_all(doclist_t *in, doclist_t *out);

/* pipeline_new with an evaluated `let` (owned by the result, also on
 * failure; NULL for none). */
pipeline_t *pipeline_build(const bson_iter_t *stages, pipeline_mode_t mode, bson_t *let,
                           dberr_t *err);

/* Copies `doc` to `out` with dotted `path` (n components) set to `v`
 * (replacing in place, creating documents as needed) or removed when `v`
 * is NULL. */
void pipeline_set_path(const bson_t *doc, char *const *path, size_t n, const bson_value_t *v,
                       bson_t *out);

/* Runs `p` (a sub-pipeline of $facet, $bucket, $sortByCount) over `docs`
 * with the variables, source, $$NOW and allowDiskUse of the enclosing run
 * `outer`, so a $lookup inside a $facet reads as the outer pipeline does. */
bool pipeline_run_nested(const pipeline_t *p, const expr_ctx_t *outer, doclist_t *docs,
                         dberr_t *err);

/* Runs `p` (a sub-pipeline: $lookup's, $unionWith's) over `docs` with the
 * source, $$NOW and allowDiskUse of the enclosing run `outer`; its
 * variables are its own let (built with every variable it may read). */
bool pipeline_run_sub(const pipeline_t *p, const expr_ctx_t *outer, doclist_t *docs,
                      dberr_t *err);

/* The wall clock in milliseconds ($$NOW). */
int64_t pipeline_now_ms(void);

#endif
