/* expr-private: what the files of src/doc/expr/ share — the parsed
 * expression node, the operator table row (one per operator: name,
 * evaluator, how its arguments are parsed, how it scopes variables), value
 * helpers and the evaluation entry points the operator families call. */
#ifndef ATOMDB_EXPR_PRIVATE_H
#define ATOMDB_EXPR_PRIVATE_H

#include <bson/bson.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "doc/expr.h"
#include "doc/num.h"

typedef enum expr_kind {
    EK_CONST, /* a literal value */
    EK_PATH,  /* "$a.b" or "$$var.a.b" */
    EK_OP,    /* {$op: args} */
    EK_DOC,   /* {a: <expr>, b: <expr>} */
    EK_ARRAY, /* [<expr>, <expr>] */
} expr_kind_t;

/* How an operator's argument is parsed. */
typedef enum op_parse {
    OPP_ARGS,    /* an array of expressions, or one expression */
    OPP_LITERAL, /* the argument is taken as is */
    OPP_COND,    /* [if, then, else] or {if, then, else} */
    OPP_LET,     /* {vars: {...}, in: expr} */
    OPP_NAMED,   /* a document of named parameters (see expr_op_t.params) */
    OPP_FIELD,   /* $getField/$setField/$unsetField: {field, input, value} */
    OPP_NOARGS,  /* {} (or []): no arguments, as $rand */
    OPP_CUSTOM,  /* the row's own parse_fn reads the argument (the date operators) */
} op_parse_t;

typedef struct expr_op expr_op_t;

/* A chain of names bound by enclosing $let/$map/$filter/$reduce. */
typedef struct var_scope {
    const char *name;
    const struct var_scope *up;
} var_scope_t;

/* Evaluates the operator node `e` into `out` (owned). */
typedef bool (*expr_op_fn)(const expr_t *e, const expr_ctx_t *ctx, bson_value_t *out, dberr_t *err);

/* Evaluates an operator whose arguments were evaluated first, into `args`
 * (e->nargs owned values, freed by the caller). */
typedef bool (*expr_eager_fn)(const expr_t *e, const bson_value_t *args, bson_value_t *out,
                              dberr_t *err);

/* Checks the variables of an operator that binds some ($let, $map, ...). */
typedef bool (*expr_scope_fn)(const expr_t *e, const var_scope_t *scope, const bson_t *vars,
                              dberr_t *err);

/* One row of an operator table. */
struct expr_op {
    const char *name; /* "$add"; NULL ends a table */
    expr_op_fn fn;
    op_parse_t parse;
    int min_args; /* OPP_ARGS: argument count bounds (-1 = unbounded) */
    int max_args;
    const char *params[5]; /* OPP_NAMED (and date_parse_row): parameter names;
                            * '!' prefix = required */
    int aux;               /* a per-row constant the shared evaluator reads
                            * ($eq vs $lt, $first vs $last, a target type) */
    expr_scope_fn scope;   /* NULL: arguments see the enclosing scope */
    expr_eager_fn eager;   /* set instead of `fn` for OPP_ARGS operators of at
                            * most EXPR_EAGER_MAX arguments that need them all */
    /* OPP_CUSTOM: reads the argument under `arg` into e->args (false with `err`). */
    bool (*parse_fn)(expr_t *e, bson_iter_t *arg, dberr_t *err);
    /* OPP_NAMED (and date_parse_row): mongod's codes when the argument is
     * not an object and for an unknown parameter (0: 28646 and 16879), and
     * for each missing required parameter, by position in `params` (0: 16880). */
    int named_codes[2];
    int missing_codes[5];
    /* An `eager` operator of one argument that answers null for a nullish
     * argument and takes only `input.type` (0: no such check): another type
     * fails with `input.code` and `input.fmt` (one %s: the name mongod gives
     * that type) before `eager` runs. */
    struct {
        bson_type_t type;
        int code;
        const char *fmt;
    } input;
};

/* The most arguments an eager operator takes. */
#define EXPR_EAGER_MAX 4

struct expr {
    expr_kind_t kind;
    bson_value_t cval; /* EK_CONST; the field name of $getField & co. */
    char *var;         /* EK_PATH: variable name, NULL for $$CURRENT */
    char **path;       /* EK_PATH: components after the variable */
    size_t npath;
    const expr_op_t *op; /* EK_OP */
    expr_t **args;       /* EK_OP arguments / EK_DOC values / EK_ARRAY elements */
    size_t nargs;
    char **names; /* EK_DOC field names / $let variable names */
};

/* The operator families, one table each (see expr.c for the registry). */
extern const expr_op_t expr_arith_ops[];  /* arithmetic, $sum $avg, $rand */
extern const expr_op_t expr_cond_ops[];   /* comparison, logic, $cond $ifNull, $min $max */
extern const expr_op_t expr_string_ops[]; /* strings */
extern const expr_op_t expr_array_ops[];  /* arrays, $map $filter $reduce */
extern const expr_op_t expr_type_ops[];   /* $type and conversions */
extern const expr_op_t expr_object_ops[]; /* documents, $getField $setField $unsetField */
extern const expr_op_t expr_var_ops[];    /* $let, $literal */
extern const expr_op_t expr_date_ops[];   /* date parts, $dateAdd & co. (date.c) */
extern const expr_op_t expr_datefmt_ops[]; /* $dateToString $dateFromString $toDate (datefmt.c) */
extern const expr_op_t expr_set_ops[];     /* $setUnion & co., $anyElementTrue (set.c) */
extern const expr_op_t expr_trig_ops[];    /* $log, $sin & co., $degreesToRadians (trig.c) */
extern const expr_op_t expr_regex_ops[];   /* $regexMatch $regexFind $regexFindAll (regex.c) */
extern const expr_op_t expr_nelem_ops[];   /* $firstN & co., $sortArray, $zip (nelem.c) */

/* ---- values ---- */

void expr_val_null(bson_value_t *out);
void expr_val_missing(bson_value_t *out);

/* expr_val_bool(out, b) and friends: `out` set to one scalar value. */
#define EXPR_VAL_SETTER(fn, ctype, btype, member)                                                  \
    static inline void fn(bson_value_t *out, ctype x)                                              \
    {                                                                                              \
        memset(out, 0, sizeof *out);                                                               \
        out->value_type = btype;                                                                   \
        out->value.member = x;                                                                     \
    }
EXPR_VAL_SETTER(expr_val_bool, bool, BSON_TYPE_BOOL, v_bool)
EXPR_VAL_SETTER(expr_val_int32, int32_t, BSON_TYPE_INT32, v_int32)
EXPR_VAL_SETTER(expr_val_int64, int64_t, BSON_TYPE_INT64, v_int64)
EXPR_VAL_SETTER(expr_val_double, double, BSON_TYPE_DOUBLE, v_double)
EXPR_VAL_SETTER(expr_val_date, int64_t, BSON_TYPE_DATE_TIME, v_datetime)

/* A copy of the `len` bytes at `s` as a string value. */
void expr_val_string(bson_value_t *out, const char *s, size_t len);
/* Frees an owned value (missing needs nothing) and leaves it missing. */
void expr_val_free(bson_value_t *v);
/* null, undefined or missing. */
bool expr_is_nullish(const bson_value_t *v);
/* Initialises `b` over the bytes of a document or array value (borrowed). */
void expr_bson_of(const bson_value_t *v, bson_t *b);
/* Aggregation comparison: like compare_values, except that missing and
 * undefined sort below null (so {$eq: ["$nope", null]} is false). */
int expr_agg_compare(const bson_value_t *a, const bson_value_t *b);
/* expr_agg_compare with strings ordered by `coll` (NULL: simple). */
int expr_agg_compare_coll(const bson_value_t *a, const bson_value_t *b, const collation_t *coll);
/* True when `v` has type `want`; otherwise false with `code` and `fmt`
 * (one %s: the name mongod gives the type `v` has). */
bool expr_check_type(const bson_value_t *v, bson_type_t want, int code, const char *fmt,
                     dberr_t *err);
/* The named parts of an object argument ({if, then, else} of $cond,
 * {case, then} of a $switch branch): each a required expression. */
typedef struct expr_parts_spec {
    const char *names[3];        /* NULL after the last */
    int unknown_code;            /* another name: this code and... */
    const char *unknown_fmt;     /* ...this message (one %s: the name) */
    int missing_codes[3];        /* an absent part: its code and... */
    const char *missing_msgs[3]; /* ...its message */
} expr_parts_spec_t;

/* Parses the fields of an object (`fields` iterates them) into parts[i],
 * by spec->names[i]; false with `err` and every part NULL on failure. */
bool expr_parse_parts(bson_iter_t *fields, const expr_parts_spec_t *spec, expr_t **parts,
                      dberr_t *err);
/* The fields of the object `it` holds, into `child`; false with `code` and
 * `fmt` (one %s: the name mongod gives the type found) for another type. */
bool expr_recurse_object(const bson_iter_t *it, bson_iter_t *child, int code, const char *fmt,
                         dberr_t *err);
/* The elements of the array value `arr` into *vals (bson_malloc'd, *n of
 * them, each borrowing `arr`'s bytes); false with `err` when the loop was
 * stopped (fiber_check). */
bool expr_array_values(const bson_value_t *arr, bson_value_t **vals, size_t *n, dberr_t *err);
/* The one argument `v` of $abs $ceil … $sqrt and $sin … $atanh: 0 when
 * `out` is already the answer (null for a nullish argument), -1 with
 * Location28765 when it is not a number, 1 to go on. */
int expr_one_number(const expr_t *e, const bson_value_t *v, bson_value_t *out, dberr_t *err);
/* A number that is a whole 32-bit integer. */
bool expr_as_int32(const bson_value_t *v, int32_t *out);
/* Binds `name` to `v` on top of `base` into `vars` (initialised here). */
void expr_bind_var(bson_t *vars, const bson_t *base, const char *name, const bson_value_t *v);
/* Appends `v` to the array `arr` under the next index `*idx`. */
void expr_array_append(bson_t *arr, uint32_t *idx, const bson_value_t *v);
/* The `n` values `vals` as an array value into `out` (owned). */
void expr_values_to_array(const bson_value_t *vals, size_t n, bson_value_t *out);

/* ---- evaluation ---- */

/* Evaluates any node. */
bool expr_eval_node(const expr_t *e, const expr_ctx_t *ctx, bson_value_t *out, dberr_t *err);
/* Evaluates every argument of `e` into `vals` (e->nargs owned values); on
 * failure nothing is left to free. */
bool expr_eval_args(const expr_t *e, const expr_ctx_t *ctx, bson_value_t *vals, dberr_t *err);
/* Frees `n` evaluated arguments. */
void expr_free_args(bson_value_t *vals, size_t n);
/* Evaluates argument `i` (missing when absent). */
bool expr_eval_arg(const expr_t *e, size_t i, const expr_ctx_t *ctx, bson_value_t *out,
                   dberr_t *err);
/* The answer of a conversion for a nullish input: argument `i` (its
 * onNull) when given, else null. */
bool expr_eval_on_null(const expr_t *e, size_t i, const expr_ctx_t *ctx, bson_value_t *out,
                       dberr_t *err);
/* The answer of a conversion that failed with `err`: argument `i` (its
 * onError) when `err` is a ConversionFailure and the argument was given;
 * otherwise false with `err` kept. */
bool expr_eval_on_error(const expr_t *e, size_t i, const expr_ctx_t *ctx, bson_value_t *out,
                        dberr_t *err);

/* Folds argument `i`'s value `v` into `acc` (false with `err` to fail). */
typedef bool (*expr_fold_fn)(const expr_t *e, size_t i, const bson_value_t *v, bson_t *acc,
                             void *st, dberr_t *err);

/* Evaluates the arguments of `e` in order, folding each into `acc`
 * (initialised here); on failure `acc` is destroyed and false returned. */
bool expr_fold_args(const expr_t *e, const expr_ctx_t *ctx, expr_fold_fn fn, void *st, bson_t *acc,
                    dberr_t *err);

/* expr_fold_args with no state, its result moved into `out` as a value of
 * `type` (a document or an array). */
bool expr_fold_into(const expr_t *e, const expr_ctx_t *ctx, expr_fold_fn fn, bson_type_t type,
                    bson_value_t *out, dberr_t *err);

/* Called for each operand of $min/$max/$sum/$avg. */
typedef void (*operand_fn)(const bson_value_t *v, void *st);

/* Calls `fn` for each operand: the elements of a single array argument, or
 * the arguments themselves. */
bool expr_for_operands(const expr_t *e, const expr_ctx_t *ctx, operand_fn fn, void *st,
                       dberr_t *err);

/* ---- parsing and variables ---- */

/* Parses the expression under `it`. */
expr_t *expr_parse(bson_iter_t *it, dberr_t *err);
/* A new node of `kind`. */
expr_t *expr_node_new(expr_kind_t kind);
/* Adds `arg` to `e` (with a name for $let variables and documents). */
void expr_add_arg(expr_t *e, expr_t *arg, const char *name);
/* A valid user variable name: a lowercase letter or a non-ASCII byte, then
 * letters, digits, '_'. */
bool expr_valid_var_name(const char *name);
/* {$let: {vars, in}} into `e`. */
bool expr_parse_let(expr_t *e, bson_iter_t *arg, dberr_t *err);
/* {$getField/$setField/$unsetField: ...} into `e`. */
bool expr_parse_field_op(expr_t *e, bson_iter_t *arg, dberr_t *err);
/* Checks the variables `e` reads under `scope` and the command's `vars`. */
bool expr_check_scope(const expr_t *e, const var_scope_t *scope, const bson_t *vars, dberr_t *err);

/* $toDate (and $convert to date) of `v` into `out`: a date, timestamp,
 * ObjectId, number of milliseconds or a date string (read free-form, as
 * mongod's); null stays null. ConversionFailure 241 otherwise. */
bool expr_to_date(const bson_value_t *v, bson_value_t *out, dberr_t *err);

/* ---- strings (shared with conversions) ---- */

/* Coerces `v` to a string as the string operators do: null → "", numbers
 * and dates print; an owned copy in *s. False for other types. */
bool expr_coerce_string(const bson_value_t *v, char **s, size_t *len);
/* A double converted to a string as $toString does (shortest form that
 * reads back as the same double; NaN, Infinity). */
void expr_double_to_string(double d, char *buf, size_t n);

#endif
