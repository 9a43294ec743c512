/* window-private: what the window files of src/doc/pipeline/ share — the
 * parsed $setWindowFields / $fill stage (window.c), its window functions
 * (one row each in window-ops.c), the partition they run over, and the
 * $group accumulators (group.c) the windowed $sum, $avg... fold through. */
#ifndef ATOMDB_WINDOW_PRIVATE_H
#define ATOMDB_WINDOW_PRIVATE_H

#include "doc/pipeline/pipeline-private.h"

/* ---- one $group accumulator on its own (group.c) ---- */

typedef struct pipeline_acc pipeline_acc_t;

/* A fresh state of the $group accumulator `name` ("$sum"), or NULL when
 * there is none by that name. */
pipeline_acc_t *pipeline_acc_new(const char *name);
/* Folds `v` (EOD when missing) in, as $group does. */
void pipeline_acc_add(pipeline_acc_t *a, const bson_value_t *v);
/* The result so far as an owned value ($group's: null for no $min...). */
void pipeline_acc_value(const pipeline_acc_t *a, bson_value_t *out);
/* Bytes of the $push / $addToSet list so far (0 for the others). */
uint32_t pipeline_acc_list_bytes(const pipeline_acc_t *a);
/* True for $push and $addToSet (and *is_push tells which). */
bool pipeline_acc_is_list(const pipeline_acc_t *a, bool *is_push);
/* The object-form accumulator `name` ($topN $bottomN $top $bottom $firstN
 * $lastN $minN $maxN $median $percentile) with its argument under `arg`,
 * parsed with $group's checks into a template for pipeline_acc_start;
 * *input gets its input/output expression (the caller's to evaluate and
 * free). NULL on error. */
pipeline_acc_t *pipeline_acc_parse(const char *name, bson_iter_t *arg, expr_t **input,
                                   dberr_t *err);
/* A fresh state of template `tmpl` (borrowed: it must outlive the state),
 * its n evaluated against an empty document. NULL on error. */
pipeline_acc_t *pipeline_acc_start(const pipeline_acc_t *tmpl, const expr_ctx_t *ctx,
                                   dberr_t *err);
/* Folds `v` (EOD when missing) of document ctx->root into a started state
 * ($top & co. read their sortBy off ctx->root). */
bool pipeline_acc_fold(pipeline_acc_t *a, const bson_value_t *v, const expr_ctx_t *ctx,
                       dberr_t *err);
/* Bytes the state's kept values hold. */
int64_t pipeline_acc_bytes(const pipeline_acc_t *a);
/* Frees `a` (accepts NULL). */
void pipeline_acc_destroy(pipeline_acc_t *a);

/* ---- windows ---- */

/* One end of a window: "unbounded", "current" or a value. */
typedef struct window_bound {
    enum { WB_UNBOUNDED, WB_CURRENT, WB_VALUE } kind;
    int64_t n;     /* documents: the offset */
    long double x; /* range: the offset (a number, or a count of `unit`) */
} window_bound_t;

/* A window: documents [lo, hi] around the current one, or the documents
 * whose sortBy value lies in [value + lo, value + hi]. */
typedef struct window_bounds {
    bool range;    /* range-based (sortBy values), else document-based */
    char unit[16]; /* range over dates: "day"...; "" for numbers */
    window_bound_t lo, hi;
} window_bounds_t;

typedef struct window_fn_def window_fn_def_t;
typedef struct window_spec window_spec_t;

/* One output field of $setWindowFields: its function and arguments. */
typedef struct window_fn {
    const window_fn_def_t *def;
    char **path; /* the output field's components */
    size_t npath;
    expr_t *arg;             /* the input expression (NULL for $count and the ranks) */
    expr_t *arg2;            /* $covariance*: the second input */
    bson_value_t dflt;       /* $shift default (null unless given) */
    int64_t by;              /* $shift by */
    bool explicit_window;    /* a `window` was given */
    window_bounds_t win;     /* [unbounded, unbounded] unless given */
    int64_t unit_ms;         /* $derivative / $integral unit in ms; 0 for none */
    bson_decimal128_t alpha; /* $expMovingAvg weight of the new value */
    const char *acc_name;    /* the $group accumulator behind it, or NULL */
    pipeline_acc_t *acc_tmpl; /* $topN & co.: the parsed object-form accumulator (owned) */
} window_fn_t;

/* A value-filled output of $fill ({field: {value: expr}}). */
typedef struct window_fill {
    char **path;
    size_t npath;
    expr_t *value;
} window_fill_t;

/* A parsed $setWindowFields or $fill. */
struct window_spec {
    const char *stage;    /* "$setWindowFields" or "$fill", for errors */
    expr_t *partition_by; /* NULL: one partition */
    sortspec_t *sort;     /* NULL: no sortBy */
    char *sort_field;     /* the first sortBy field */
    int sort_dir;         /* its direction */
    int nsort;            /* sortBy keys */
    window_fn_t *fns;
    size_t nfns;
    window_fill_t *fills; /* $fill value outputs, applied after fns */
    size_t nfills;
    expr_t *date_add; /* $dateAdd of $$d by $$n $$u (range windows with a unit) */
};

/* The documents of one partition in window order, with what the
 * functions read off them. */
typedef struct window_part {
    bson_t **docs;
    size_t n;
    bson_value_t *keys; /* the sortBy field per document (EOD: missing); NULL
                         * without sortBy */
    const window_spec_t *w;
    const expr_ctx_t *ctx;
    int64_t *mem; /* bytes held by the stage so far (pipeline_limits) */
} window_part_t;

enum {
    WFN_WINDOW = 1,        /* takes a `window` */
    WFN_NEEDS_SORT = 2,    /* needs a sortBy (FailedToParse without) */
    WFN_SINGLE_SORT = 4,   /* needs a sortBy of one field */
    WFN_RANK = 8,          /* $rank & co.: {} argument, one sortBy field (5371601-3) */
    WFN_NEEDS_WINDOW = 16, /* needs an explicit window ($derivative) */
};

/* One row of the window function table (window-ops.c). */
struct window_fn_def {
    const char *name; /* "$sum"; NULL ends the table */
    unsigned flags;   /* WFN_* */
    /* Reads the function's argument under `it` into `f`. */
    bool (*parse)(window_fn_t *f, bson_iter_t *it, const window_spec_t *w, dberr_t *err);
    /* Computes out[0..p->n) (owned values; EOD for "leave unset") from the
     * input values vals[] (and vals2[] for two-input functions). */
    bool (*run)(const window_fn_t *f, const window_part_t *p, const bson_value_t *vals,
                const bson_value_t *vals2, bson_value_t *out, dberr_t *err);
};

/* ---- window.c, for fill.c ---- */

/* A new empty spec for the stage `stage` (its $dateAdd helper made). */
window_spec_t *window_spec_new(const char *stage);
/* The sortBy document under `it` into `w` (TypeMismatch when not one). */
bool window_sort_parse(window_spec_t *w, bson_iter_t *it, dberr_t *err);
/* The partitionBy expression under `it` into `w`. */
bool window_partition_parse(window_spec_t *w, bson_iter_t *it, dberr_t *err);

/* What window_fields_parse leaves to its stage. */
typedef struct window_fields {
    bson_iter_t output;           /* the output document */
    bson_iter_t partition_fields; /* $fill's partitionByFields, when given */
    bool has_partition_fields;
} window_fields_t;

/* The fields $setWindowFields and $fill share in the document `arg`
 * (partitionBy, sortBy, output; with `fill` also partitionByFields):
 * partitionBy and sortBy go into `w`, the rest into `f`. Errors name w's
 * stage, as mongod's IDL does. */
bool window_fields_parse(window_spec_t *w, const bson_iter_t *arg, bool fill, window_fields_t *f,
                         dberr_t *err);
/* $fill's parse (fill.c): into s->u.window. */
bool window_fill_parse(stage_t *s, bson_iter_t *arg, const bson_t *let, dberr_t *err);

/* The window function named `name`, or NULL. */
const window_fn_def_t *window_fn_find(const char *name);

/* The windows of every document i of `p` under `f`'s bounds:
 * [lo[i], hi[i]) (arrays of p->n). Range windows check the sortBy values
 * (5429413 / 5429414 / 5429513 as mongod). */
bool window_ranges(const window_fn_t *f, const window_part_t *p, size_t *lo, size_t *hi,
                   dberr_t *err);

/* Parses `window: {...}` under `it` into `b` (FailedToParse, 5339900-2 as
 * mongod). */
bool window_bounds_parse(bson_iter_t *it, const window_spec_t *w, window_bounds_t *b, dberr_t *err);

/* Counts `bytes` against the stage's memory limit (5414201 past it). */
bool window_charge(const window_part_t *p, int64_t bytes, dberr_t *err);

/* Copies `doc` (NULL: empty) into `out` with the field at `path` set to
 * `v` (in place when present, appended otherwise; a non-document on the
 * way is replaced by a document, as $addFields does). */
void window_set_path(const bson_t *doc, char *const *path, size_t n, const bson_value_t *v,
                     bson_t *out);

/* Milliseconds in a fixed-length time unit ("week" and shorter); 0 for
 * "month", "quarter", "year"; -1 for an unknown unit. */
int64_t window_unit_ms(const char *unit);

/* A new {$dateAdd: {startDate: "$$d", unit: "$$u", amount: "$$n"}} for
 * window_date_add (free with expr_destroy). */
expr_t *window_date_add_new(void);

/* `ms` moved by `amount` of `unit` (calendar units through `date_add`, a
 * window_date_add_new expression, so months clamp as $dateAdd's). */
bool window_date_add(const expr_t *date_add, const expr_ctx_t *ctx, int64_t ms, const char *unit,
                     int64_t amount, int64_t *out, dberr_t *err);

#endif
