/* expr: aggregation expressions ($add, $cond, "$field.path", $$NOW, ...),
 * parsed once and evaluated per document. Used by $expr in queries, the
 * aggregation stages and pipeline-style updates. */
#ifndef ATOMDB_EXPR_H
#define ATOMDB_EXPR_H

#include <bson/bson.h>
#include <stdbool.h>
#include <stdint.h>

#include "util/dberr.h"

typedef struct expr expr_t;
typedef struct collation collation_t;

/* What an expression is evaluated against. */
/* The largest string, array, document or binary value an expression may
 * build: what one BSON document can hold (16 MB, mongod's
 * BSONObjMaxUserSize). Past it the operator fails with BSONObjectTooLarge
 * (10334) naming itself, before the value grows further. */
#define EXPR_MAX_VALUE_BYTES (16 * 1024 * 1024)

typedef struct expr_ctx {
    const bson_t *root;   /* $$ROOT and $$CURRENT */
    int64_t now_ms;       /* $$NOW, milliseconds since the epoch */
    const bson_t *vars;   /* user variables ($$name) from `let`, or NULL */
    bool allow_disk_use;  /* the aggregate's allowDiskUse (what a blocking stage's
                           * memory-limit error says) */
    const bson_t *current; /* $$CURRENT and "$field" paths when not NULL (a $redact
                            * descending into a subdocument); NULL: `root` */
    const struct pipeline_source *source; /* where $lookup and the other joins read
                                           * (doc/pipeline.h), or NULL */
    const collation_t *coll; /* how strings compare ($eq, $in, $min, ...); NULL: simple */
} expr_ctx_t;

/* Parses the expression under `spec` (any BSON value: a literal, a "$path",
 * a "$$var", an operator document {$op: args} or a document of
 * expressions). NULL with `err` set (InvalidPipelineOperator 168 for an
 * unknown operator, as mongod) on failure. */
expr_t *expr_new(const bson_iter_t *spec, dberr_t *err);

/* Evaluates `e`. On success `out` holds an owned value (free it with
 * bson_value_destroy); a missing result is BSON_TYPE_EOD. */
bool expr_eval(const expr_t *e, const expr_ctx_t *ctx, bson_value_t *out, dberr_t *err);

/* Frees `e` (accepts NULL). */
void expr_destroy(expr_t *e);

/* True when `e` reads no field path, no variable and nothing random: its
 * value is the same for every document (mongod's ExpressionConstant after
 * optimize), as $bucket's boundaries and default must be. */
bool expr_is_constant(const expr_t *e);

/* Checks that every user variable `e` reads ($$name) is defined: by a field
 * of `vars` (NULL: none) or by an enclosing $let, $map, $filter or $reduce.
 * $$ROOT, $$CURRENT, $$REMOVE and $$NOW are always defined. False with
 * Location17276 "Use of undefined variable: name" otherwise, as mongod
 * answers when it parses. */
bool expr_check_vars(const expr_t *e, const bson_t *vars, dberr_t *err);

/* Evaluates a command's `let` document: each field's value is an expression
 * evaluated once against an empty $$ROOT (with $$NOW = `now_ms`), in order,
 * so a value may read the variables before it; {x: {$add: [1, 2]}} gives
 * {x: 3}. Appends the results to `out` (initialised by the caller; a missing
 * result is stored as undefined). `let` may be NULL. False with `err` set
 * on a bad variable name (Location16867), a parse or an evaluation error. */
bool expr_eval_let(const bson_t *let, int64_t now_ms, bson_t *out, dberr_t *err);

/* Moves the bytes of `b` into `out` as an owned document or array value
 * (`type`), then destroys `b`. */
void expr_value_take_bson(bson_value_t *out, bson_t *b, bson_type_t type);

/* The `n` of $firstN & co. (expressions and accumulators): a whole
 * positive number into *n, else false with mongod's 5787902 / 5787903 /
 * 5787908. */
bool expr_check_n(const bson_value_t *v, int64_t *n, dberr_t *err);

/* $mergeObjects's merge of `add` onto `old` into `out` (initialised here):
 * old's fields in their place, taking add's value where add has one, then
 * add's other fields (expressions and accumulators). */
void expr_merge_docs(const bson_t *old, const bson_t *add, bson_t *out);

/* The {input, p, method} of $percentile (`want_p`) or {input, method} of
 * $median named `op` (expressions and accumulators): no other field, all
 * present, p a non-empty array of numbers in [0, 1], method "approximate";
 * else false with mongod's codes. On success *input is at the input field
 * and, for $percentile, *p at the p array. */
bool expr_check_quantile(const bson_t *args, const char *op, bool want_p, bson_iter_t *input,
                         bson_iter_t *p, dberr_t *err);

/* True when the value is "truthy" for $cond / $expr: not false, null,
 * undefined, missing or numeric zero. */
bool expr_truthy(const bson_value_t *v);

#endif
