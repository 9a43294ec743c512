/* update-private: what the files of src/doc/update/ share — the parsed
 * update tree, the operator table (one row per operator: how its argument
 * is read and how it applies to an existing or a missing path, as
 * Tarantool's xrow_update_op_meta), array filters and the apply context. */
#ifndef ATOMDB_UPDATE_PRIVATE_H
#define ATOMDB_UPDATE_PRIVATE_H

#include <bson/bson.h>
#include <stdbool.h>
#include <stdint.h>

#include "doc/matcher.h"
#include "doc/num.h"
#include "doc/pipeline.h"
#include "doc/update/doctree.h"
#include "doc/updater.h"

/* mongod refuses to pad an array by more than this many nulls. */
#define UPD_MAX_PADDING 1500000
/* Upper bound on path components we accept in one update path. */
#define UPD_MAX_DEPTH 200
/* mongod's limit on the nesting depth of stored documents. */
#define UPD_MAX_STORED_DEPTH 180
/* Inputs nested deeper than this are refused before any recursive walk. */
#define UPD_MAX_INPUT_DEPTH 200

typedef struct unode unode_t;
typedef struct update_op update_op_t;
typedef struct update_parse update_parse_t;
typedef struct update_apply update_apply_t;

/* ---- the parsed update: internal nodes (object / array) and leaves ---- */

typedef enum unode_kind { UN_OBJECT, UN_ARRAY, UN_LEAF } unode_kind_t;

/* A child of an internal node. */
typedef struct uchild {
    char *name; /* field name (object), or array filter identifier ("" for $[]) */
    unode_t *node;
} uchild_t;

/* Values an operator holds in order ($push/$addToSet/$pullAll), borrowed
 * from the leaf's `arg`. */
typedef struct update_values {
    bson_value_t *v;
    size_t n;
} update_values_t;

/* How $push sorts: not at all, whole values, or by a pattern document. */
typedef enum push_sort { PUSH_SORT_NONE, PUSH_SORT_VALUE, PUSH_SORT_PATTERN } push_sort_t;

/* How a $pull condition matches an element. */
typedef enum pull_kind { PULL_EQUAL, PULL_OBJECT, PULL_WRAPPED } pull_kind_t;

/* One operation of $bit. */
typedef struct bitop {
    char op; /* 'a' and, 'o' or, 'x' xor */
    num_t operand;
} bitop_t;

struct unode {
    unode_kind_t kind;
    /* -- UN_OBJECT / UN_ARRAY -- */
    uchild_t *kids; /* sorted by update_cmp_field_names */
    size_t nkids;
    size_t cap;
    unode_t *positional; /* UN_OBJECT: the child under "$" */
    /* -- UN_LEAF -- */
    const update_op_t *op;
    char *path;       /* the path as written, for messages */
    char *spec_name;  /* the field name in the operator document */
    bson_value_t arg; /* owned copy of the operator argument */
    union {           /* what the operator's parse read from `arg` */
        struct {
            update_values_t each;
            bool has_slice;
            int64_t slice;
            int64_t position;
            push_sort_t sort;
            int sort_dir;         /* PUSH_SORT_VALUE: 1 or -1 */
            bson_t *sort_pattern; /* PUSH_SORT_PATTERN */
        } push;
        update_values_t each; /* $addToSet, $pullAll */
        struct {
            pull_kind_t kind;
            matcher_t *matcher;
        } pull;
        bool pop_front; /* $pop: -1 */
        bool timestamp; /* $currentDate: {$type: "timestamp"} */
        struct {
            bitop_t *ops;
            size_t n;
        } bit;
        char *rename_from; /* $rename: the source path (the leaf sits at the target) */
    } u;
};

/* ---- the operator table ---- */

/* Reads the argument of a new leaf into leaf->u (leaf->arg is set); false
 * with `err` on a bad argument. */
typedef bool (*update_op_parse_fn)(unode_t *leaf, dberr_t *err);

/* Applies a leaf. apply_existing: the path exists and `e` is its element.
 * apply_missing: it does not; `e` is the deepest existing ancestor and the
 * context's `create` stack holds the rest of the path. */
typedef bool (*update_op_apply_fn)(update_apply_t *c, const unode_t *leaf, doctree_t *e);

/* Frees what parse put in leaf->u. */
typedef void (*update_op_free_fn)(unode_t *leaf);

/* Adds the entry `field: v` of the operator's document to the update tree
 * (NULL: one leaf at `field`, update_merge_path). */
typedef bool (*update_op_merge_fn)(update_parse_t *p, const update_op_t *op, const char *field,
                                   const bson_value_t *v, dberr_t *err);

/* Behaviour flags of an operator. */
enum {
    UPDATE_OP_CREATES = 1,     /* may create the path it names */
    UPDATE_OP_INSERT_ONLY = 2, /* applies only when an upsert inserts ($setOnInsert) */
    UPDATE_OP_INPLACE_SET = 4, /* the in-place path may apply it as $set (inplace.c) */
    UPDATE_OP_INPLACE_INC = 8, /* the in-place path may apply it as $inc */
};

/* One row: an operator and its behaviour. */
struct update_op {
    const char *name; /* "$inc"; NULL ends a table */
    update_op_parse_fn parse;
    update_op_apply_fn apply_existing;
    update_op_apply_fn apply_missing;
    update_op_free_fn free_arg;
    update_op_merge_fn merge;
    unsigned flags;
};

/* The operator families: field operators ($set $unset $inc $mul $min $max
 * $rename $setOnInsert $currentDate $bit) and array operators ($push
 * $addToSet $pop $pull $pullAll). */
extern const update_op_t update_field_ops[];
extern const update_op_t update_array_ops[];

/* What occupies the source path of a $rename: it does nothing. */
extern const update_op_t update_rename_source_op;

/* ---- array filters ---- */

typedef struct afilter {
    char *id; /* the identifier, "x" for $[x] */
    matcher_t *m;
} afilter_t;

/* Parses `arrayFilters` into u->filters; false with `err` (mongod's codes). */
bool afilter_parse_all(updater_t *u, const bson_t *array_filters, dberr_t *err);

/* The filter for identifier `id`, or NULL. */
const afilter_t *afilter_find(const updater_t *u, const char *id);

/* True when the array element `elem` satisfies `f`. */
bool afilter_matches(const afilter_t *f, const doctree_t *elem);

/* Frees the filters of `u`. */
void afilter_free_all(updater_t *u);

/* ---- the updater and parsing ---- */

struct updater {
    updater_kind_t kind;
    unode_t *root;        /* UPDATER_OPERATORS */
    bson_t *replacement;  /* UPDATER_REPLACEMENT */
    pipeline_t *pipeline; /* UPDATER_PIPELINE */
    afilter_t *filters;
    size_t nfilters;
    /* the first path an operator would create under a '$'-prefixed top-level
     * field ("$hotel"), and that field: allowed when an upsert inserts,
     * DollarPrefixedFieldName 52 when the update changes a stored document
     * (mongod's storage validation); NULL when none */
    char *dollar_path;
    char *dollar_field;
    collation_t *coll; /* owned reference: how $min/$max, $addToSet, $pull, $pullAll
                        * and $push's $sort compare strings; NULL: simple */
    bool positional;   /* some path has a positional `$` (set at parse) */
    bool inplace;      /* every path is top-level $set/$inc/$setOnInsert, not _id:
                        * update_inplace_apply may try it (set at parse) */
};

/* State of parsing one operator document. */
struct update_parse {
    updater_t *u;
    bool *used; /* per array filter: named by some path */
};

/* Adds a leaf for `path` applying `op` (the entry `spec_name: v`) to the
 * tree (mongod's UpdateObjectNode::parseAndMerge). */
bool update_merge_path(update_parse_t *p, const update_op_t *op, const char *spec_name,
                       const char *path, const bson_value_t *v, dberr_t *err);

/* Frees a tree node (accepts NULL). */
void unode_free(unode_t *n);

/* mongod's cmpPathsAndArrayIndexes: numbers (no leading zero) compare as
 * numbers, everything else as bytes. */
int update_cmp_field_names(const char *a, const char *b);

/* True for "$[...]" path components. */
bool update_is_array_filter_ident(const char *s);

/* Fails with `code` and "<prefix>name: <value><suffix>". Returns false. */
bool update_err_spec(dberr_t *err, int code, const char *prefix, const char *name,
                     const bson_value_t *v, const char *suffix);

/* An integer argument as parseIntegerElementToLong reads it. */
bool update_integer_arg(const bson_value_t *v, int64_t *out);

/* ---- the in-place path (inplace.c) ---- */

/* Sets u->inplace: whether the parsed update is one the in-place path may
 * take (top-level $set/$inc/$setOnInsert leaves only, no positional, array
 * filters, '$'-prefixed or _id target, at most 8 paths). */
void update_inplace_plan(updater_t *u);

/* Applies `u` to `old_doc` by copying its bytes into `out` (empty) and
 * overwriting the targets' values, when every applying target exists,
 * holds a fixed-width scalar and keeps its type, and the general path
 * would write every other byte back unchanged. True with `out` holding the
 * byte-identical result of the general path; false with `out` left empty
 * when the general path must run (it also reports every error). */
bool update_inplace_apply(const updater_t *u, const bson_t *old_doc, bool is_insert, bson_t *out);

/* ---- applying ---- */

/* A stack of path components (mongod's pathTaken / pathToCreate). */
typedef struct pcomp {
    const char *s; /* borrowed, or NULL to use num */
    char num[24];
} pcomp_t;

typedef struct pstack {
    pcomp_t *v;
    size_t n;
    size_t cap;
} pstack_t;

void pstack_push(pstack_t *ps, const char *s);
void pstack_push_index(pstack_t *ps, size_t idx);
const char *pstack_at(const pstack_t *ps, size_t i);
/* Appends components from..n joined by '.'. */
void pstack_join(bson_string_t *s, const pstack_t *ps, size_t from);

/* The state of applying an operator update to one document. */
struct update_apply {
    const updater_t *u;
    doctree_t *root;
    bool is_insert;
    const char *matched; /* positional match as a field name, or NULL */
    char matched_buf[24];
    int64_t now_ms;
    pstack_t taken;    /* path components that exist */
    pstack_t create;   /* path components still to be created */
    char *id_path;     /* first update path that touched _id (for the error message) */
    bool id_by_rename; /* _id was the source of a $rename */
    dberr_t *err;
};

/* Records the current path when it is under _id (before a change). */
void update_note_id_path(update_apply_t *c);

/* Appends "_id: <value>" of the document (or "no id" when `no_id_text`). */
void update_append_id(update_apply_t *c, bson_string_t *s, bool no_id_text);

/* Creates the `create` path under `element` holding `value` (stolen):
 * mongod's createPathAt. */
bool update_create_path(update_apply_t *c, doctree_t *element, doctree_t *value);

/* note_id_path, then update_create_path. */
bool update_create(update_apply_t *c, doctree_t *element, doctree_t *value);

/* UpdateLeafNode::checkViability for modifiers that never create. */
bool update_check_viability(update_apply_t *c, doctree_t *element);

/* Nothing to do. */
bool update_apply_noop(update_apply_t *c, const unode_t *leaf, doctree_t *e);

/* Fails with `code` and the message built in `s` (freed). Returns false. */
bool update_fail(update_apply_t *c, int code, bson_string_t *s);

/* A new message for update_fail: `before`, the path taken so far, then
 * `fmt` formatted as printf does. */
bson_string_t *update_path_msg(const update_apply_t *c, const char *before, const char *fmt, ...)
    BSON_GNUC_PRINTF(3, 4);

/* Checks a stored document's top level: `_id` type, and — unless
 * `allow_dollar` (pipeline updates, which may create $-prefixed fields with
 * $setField as mongod 5.0+ allows) — $-prefixed names. */
bool update_check_top_level(const bson_t *doc, bool allow_dollar, dberr_t *err);

/* True when the document at `data` nests containers deeper than `limit`
 * levels (top-level fields are level 1). */
bool update_depth_exceeds(const uint8_t *data, uint32_t len, int level, int limit);

#endif
