/* matcher-private: what matcher.c (running and inspecting a compiled
 * filter), matcher-parse.c (compiling it) and matcher-seed.c share — the
 * predicate tree and its helpers. Not part of the public doc interface. */
#ifndef ATOMDB_MATCHER_PRIVATE_H
#define ATOMDB_MATCHER_PRIVATE_H

#include <bson/bson.h>
#include <stdbool.h>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "doc/bits.h"
#include "doc/collation.h"
#include "doc/expr.h"
#include "doc/fts.h"
#include "doc/jsonschema.h"
#include "doc/matcher.h"
#include "geo/geo.h"
#include "util/dberr.h"

/* Filters nested deeper than this are refused. */
#define MATCHER_MAX_DEPTH 100

/* True when `it` holds an operator document ({$gt: 1}); {$ref, $id, $db}
 * documents are plain values. */
bool matcher_is_operator_doc(const bson_iter_t *it);

/* Starts iterating the filter document `filter` met at nesting `depth`;
 * BadValue when it is nested too deeply or is not valid BSON. */
bool matcher_iter_filter(const bson_t *filter, int depth, bson_iter_t *it, dberr_t *err);

/* The compiled filter: a tree of predicate nodes. */
typedef enum {
    MN_AND,
    MN_OR,
    MN_NOR,
    MN_NOT,
    MN_TRUE,
    MN_FALSE,
    MN_EXPR,
    MN_SCHEMA,
    /* leaves: tested against the values a path reaches */
    MN_EQ,
    MN_GT,
    MN_GTE,
    MN_LT,
    MN_LTE,
    MN_IN,
    MN_EXISTS,
    MN_TYPE,
    MN_MOD,
    MN_REGEX,
    MN_SIZE,
    MN_ELEM_OBJ,
    MN_ELEM_VAL,
    MN_BITS,
    MN_TEXT,
    MN_GEO,
} mkind_t;

/* A compiled regular expression and the BSON regex it came from. */
typedef struct mregex {
    pcre2_code *code;
    pcre2_match_data *md; /* reused: matching runs on one thread */
    char *pattern;
    char *flags;
} mregex_t;

typedef struct mnode {
    mkind_t kind;
    char *path;            /* leaves; NULL inside a value-form $elemMatch */
    struct mnode **kids;   /* AND/OR/NOR/NOT/ELEM_VAL */
    size_t nkids;
    bson_value_t arg;      /* EQ and comparisons: owned copy (EOD, owning
                              nothing, on other nodes) */
    bson_value_t *list;    /* IN: owned copies */
    mregex_t **list_re;    /* IN: compiled entry when the entry is a regex */
    size_t nlist;
    mregex_t *re;          /* REGEX */
    uint64_t types;        /* TYPE: bit (type & 63); MinKey/MaxKey use bits 62/63 */
    bool type_number;      /* TYPE: the "number" alias */
    int64_t mod_div, mod_rem;
    int64_t size;          /* SIZE: -1 matches nothing */
    matcher_t *sub;        /* ELEM_OBJ */
    expr_t *expr;          /* EXPR */
    bits_t *bits;          /* BITS */
    fts_query_t *text;     /* TEXT (doc/fts.h): bound to the text index by the planner */
    jsonschema_t *schema;  /* SCHEMA */
    geo_pred_t *geo;       /* GEO */
    const collation_t *coll; /* string order of EQ/IN/comparisons (the matcher's) */
    bool bytewise;           /* a DBRef's $ref/$db: never collated, as mongod */
} mnode_t;

/* What matching leaves behind for matcher_take_error; written by
 * matcher_matches, so it lives behind a pointer of the const matcher. */
typedef struct matcher_state {
    bool has_error;
    dberr_t error; /* the first error since the last take */
} matcher_state_t;

struct matcher {
    mnode_t *root;         /* an AND of the top-level predicates */
    bson_t *let;           /* evaluated let variables, or NULL */
    bool has_expr;         /* the filter holds $expr */
    matcher_state_t *st;   /* sticky error */
    uint32_t refs;         /* owners; matcher_destroy drops one */
    collation_t *coll;     /* owned reference; NULL is simple */
};

/* Node and regex lifecycle (matcher.c): a new node of `kind` on `path`
 * (copied; NULL inside a value-form $elemMatch), added under `parent`
 * (which owns it from then on: a failed parse leaves it to the tree's
 * destroy), a new node made and added in one step, given a copy of `v`,
 * freed with its subtree. */
mnode_t *matcher_node_new(mkind_t kind, const char *path);
void matcher_node_add(mnode_t *parent, mnode_t *kid);
mnode_t *matcher_node_add_new(mnode_t *parent, mkind_t kind, const char *path);
void matcher_node_set_arg(mnode_t *n, const bson_value_t *v);
void matcher_node_destroy(mnode_t *n);

/* A compiled $regex from a pattern and flags (BadValue 51091-style errors
 * for a bad pattern or flag), or from a BSON regex value. */
mregex_t *matcher_regex_new(const char *pattern, size_t len, const char *flags, dberr_t *err);
mregex_t *matcher_regex_from_value(const bson_value_t *v, dberr_t *err);
/* The pattern and flags of the BSON regex `v` ("" where one is missing). */
void matcher_regex_parts(const bson_value_t *v, const char **pattern, const char **flags);

/* A clear error state for a matcher (or an $elemMatch's sub-matcher). */
matcher_state_t *matcher_state_new(void);

/* mongod's truncation toward zero (saturating) of a $mod argument. */
int64_t matcher_to_int64_trunc(const bson_value_t *v);

/* matcher-parse.c: compiles the filter document `filter`, met at nesting
 * `depth` (`top`: the whole filter, not a $and/$or branch), into children
 * of `and_node`; false with mongod's error. */
bool matcher_parse_filter(const bson_t *filter, mnode_t *and_node, int depth, bool top,
                          dberr_t *err);

/* Parse-time switches of the thread running a parse: $near/$nearSphere
 * are compiled (matcher_new_near), $text is allowed (the top level and
 * $and branches). */
extern __thread bool matcher_parse_allow_near;
extern __thread bool matcher_parse_text_ok;

#endif
