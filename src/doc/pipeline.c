/* pipeline: aggregation pipelines over an in-memory list of documents — each
 * stage is parsed once into a tagged struct and run as a transformation from
 * one doclist to the next. A terminal $out/$merge is parsed for the caller to
 * perform. Also runs pipeline-style updates (PIPELINE_UPDATE). */
#include "doc/pipeline.h"

#include <string.h>
#include <sys/time.h>

#include "doc/compare.h"
#include "doc/expr.h"
#include "doc/keystring.h"
#include "doc/matcher.h"
#include "doc/projection-private.h"
#include "doc/sortspec.h"
#include "util/buf.h"
#include "util/shellfmt.h"

/* ---------------------------------------------------------------- doclist */

void doclist_init(doclist_t *l)
{
    l->docs = NULL;
    l->len = l->cap = 0;
}

void doclist_push(doclist_t *l, bson_t *doc)
{
    if (l->len == l->cap) {
        l->cap = l->cap ? l->cap * 2 : 16;
        l->docs = bson_realloc(l->docs, l->cap * sizeof *l->docs);
    }
    l->docs[l->len++] = doc;
}

void doclist_destroy(doclist_t *l)
{
    if (!l)
        return;
    for (size_t i = 0; i < l->len; i++)
        bson_destroy(l->docs[i]);
    bson_free(l->docs);
    doclist_init(l);
}

/* ----------------------------------------------------------------- stages */

typedef enum stage_kind {
    ST_MATCH,
    ST_GROUP,
    ST_SORT,
    ST_SKIP,
    ST_LIMIT,
    ST_PROJECT,   /* $project, $addFields/$set and $unset: a projection */
    ST_UNWIND,
    ST_COUNT,
    ST_REPLACE,   /* $replaceRoot / $replaceWith */
    ST_DOCUMENTS, /* $documents: replaces the input */
    ST_OUTPUT,    /* $out / $merge: passes documents through for the caller */
} stage_kind_t;

/* A parsed $out/$merge: the public part first, so pipeline_merge_vars can
 * get back to the rest. */
typedef struct output_stage {
    pipeline_output_t pub;
    bson_t *spec;            /* pub.merge_spec */
    char **let_names;        /* $merge let (whenMatched pipeline only) */
    expr_t **let_exprs;
    size_t nlet;
    const bson_t *outer_let; /* the pipeline's evaluated let (borrowed), or NULL */
} output_stage_t;

typedef enum acc_op {
    ACC_SUM,
    ACC_AVG,
    ACC_MIN,
    ACC_MAX,
    ACC_FIRST,
    ACC_LAST,
    ACC_PUSH,
    ACC_ADDTOSET,
    ACC_COUNT,
} acc_op_t;

/* One `field: {$acc: expr}` of a $group. */
typedef struct accum {
    char *field;
    acc_op_t op;
    expr_t *arg; /* NULL for $count */
} accum_t;

typedef struct stage {
    stage_kind_t kind;
    const char *name;     /* the stage name, for errors */
    matcher_t *matcher;   /* ST_MATCH */
    bson_t *filter;       /* ST_MATCH: the filter, for pipeline_leading_match */
    sortspec_t *sort;     /* ST_SORT */
    int64_t n;            /* ST_SKIP / ST_LIMIT */
    projection_t *proj;   /* ST_PROJECT */
    char **path;          /* ST_UNWIND: the path's components */
    size_t npath;
    char **index_path;    /* ST_UNWIND: includeArrayIndex components, or NULL */
    size_t nindex;
    bool preserve;        /* ST_UNWIND: preserveNullAndEmptyArrays */
    char *field;          /* ST_COUNT */
    expr_t *expr;         /* ST_REPLACE: newRoot; ST_GROUP: _id; ST_DOCUMENTS */
    accum_t *accs;        /* ST_GROUP */
    size_t naccs;
    output_stage_t *output; /* ST_OUTPUT */
} stage_t;

struct pipeline {
    stage_t *stages;
    size_t n;
    bson_t *let; /* user variables, already evaluated, or NULL */
};

static void output_free(output_stage_t *o)
{
    if (!o)
        return;
    if (o->spec)
        bson_destroy(o->spec);
    for (size_t i = 0; i < o->pub.non; i++)
        bson_free(o->pub.on[i]);
    bson_free(o->pub.on);
    pipeline_destroy(o->pub.when_matched_pipeline);
    for (size_t i = 0; i < o->nlet; i++) {
        bson_free(o->let_names[i]);
        expr_destroy(o->let_exprs[i]);
    }
    bson_free(o->let_names);
    bson_free(o->let_exprs);
    bson_free(o);
}

static void stage_free(stage_t *s)
{
    matcher_destroy(s->matcher);
    if (s->filter)
        bson_destroy(s->filter);
    sortspec_destroy(s->sort);
    projection_destroy(s->proj);
    for (size_t i = 0; i < s->npath; i++)
        bson_free(s->path[i]);
    bson_free(s->path);
    for (size_t i = 0; i < s->nindex; i++)
        bson_free(s->index_path[i]);
    bson_free(s->index_path);
    bson_free(s->field);
    expr_destroy(s->expr);
    for (size_t i = 0; i < s->naccs; i++) {
        bson_free(s->accs[i].field);
        expr_destroy(s->accs[i].arg);
    }
    bson_free(s->accs);
    output_free(s->output);
}

void pipeline_destroy(pipeline_t *p)
{
    if (!p)
        return;
    for (size_t i = 0; i < p->n; i++)
        stage_free(&p->stages[i]);
    bson_free(p->stages);
    if (p->let)
        bson_destroy(p->let);
    bson_free(p);
}

/* Borrows the document under `it` into `out`. */
static void borrow_doc(const bson_iter_t *it, bson_t *out)
{
    const uint8_t *d;
    uint32_t n;
    bson_iter_document(it, &n, &d);
    if (!bson_init_static(out, d, n))
        bson_init(out);
}

/* Splits dotted `s` into components; false on an empty component. */
static bool split_path(const char *s, char ***out, size_t *n)
{
    *out = NULL;
    *n = 0;
    for (;;) {
        const char *dot = strchr(s, '.');
        size_t len = dot ? (size_t)(dot - s) : strlen(s);
        if (len == 0)
            return false;
        *out = bson_realloc(*out, (*n + 1) * sizeof **out);
        (*out)[(*n)++] = bson_strndup(s, len);
        if (!dot)
            return true;
        s = dot + 1;
    }
}

/* Reads a whole non-negative number stage argument ($skip/$limit). */
static bool whole_number(const bson_iter_t *it, int64_t *out)
{
    switch (bson_iter_type(it)) {
    case BSON_TYPE_INT32: *out = bson_iter_int32(it); return true;
    case BSON_TYPE_INT64: *out = bson_iter_int64(it); return true;
    case BSON_TYPE_DOUBLE: {
        double d = bson_iter_double(it);
        if (d != (double)(int64_t)d)
            return false;
        *out = (int64_t)d;
        return true;
    }
    case BSON_TYPE_DECIMAL128: {
        double d = compare_to_double(bson_iter_value((bson_iter_t *)it));
        if (d != (double)(int64_t)d)
            return false;
        *out = (int64_t)d;
        return true;
    }
    default: return false;
    }
}

static bool parse_group(stage_t *s, bson_iter_t *arg, dberr_t *err)
{
    bson_iter_t it;
    bool have_id = false;
    if (!BSON_ITER_HOLDS_DOCUMENT(arg))
        return dberr_set(err, 15947, "a group's fields must be specified in an object");
    bson_iter_recurse(arg, &it);
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (strcmp(k, "_id") == 0) {
            if (have_id)
                return dberr_set(err, 16414, "$group: _id specified more than once");
            have_id = true;
            s->expr = expr_new(&it, err);
            if (!s->expr)
                return false;
            continue;
        }
        if (k[0] == '$')
            return dberr_set(err, 40236, "The field name '%s' cannot be an operator name", k);
        if (strchr(k, '.'))
            return dberr_set(err, 40235, "The field name '%s' cannot contain '.'", k);
        if (!BSON_ITER_HOLDS_DOCUMENT(&it))
            return dberr_set(err, 40234, "The field '%s' must be an accumulator object", k);
        bson_t spec;
        bson_iter_t a;
        borrow_doc(&it, &spec);
        if (bson_count_keys(&spec) != 1)
            return dberr_set(err, 40238, "The field '%s' must specify one accumulator", k);
        bson_iter_init(&a, &spec);
        bson_iter_next(&a);
        const char *op = bson_iter_key(&a);
        accum_t acc = {NULL, ACC_SUM, NULL};
        if (strcmp(op, "$sum") == 0) acc.op = ACC_SUM;
        else if (strcmp(op, "$avg") == 0) acc.op = ACC_AVG;
        else if (strcmp(op, "$min") == 0) acc.op = ACC_MIN;
        else if (strcmp(op, "$max") == 0) acc.op = ACC_MAX;
        else if (strcmp(op, "$first") == 0) acc.op = ACC_FIRST;
        else if (strcmp(op, "$last") == 0) acc.op = ACC_LAST;
        else if (strcmp(op, "$push") == 0) acc.op = ACC_PUSH;
        else if (strcmp(op, "$addToSet") == 0) acc.op = ACC_ADDTOSET;
        else if (strcmp(op, "$count") == 0) acc.op = ACC_COUNT;
        else
            return dberr_set(err, 15952, "unknown group operator '%s'", op);
        if (acc.op == ACC_COUNT) {
            bson_t empty;
            if (!BSON_ITER_HOLDS_DOCUMENT(&a) || (borrow_doc(&a, &empty), !bson_empty(&empty)))
                return dberr_set(err, DBERR_TYPE_MISMATCH, "$count takes no arguments, i.e. $count:{}");
        } else {
            if (BSON_ITER_HOLDS_ARRAY(&a))
                return dberr_set(err, 40237, "The %s accumulator is a unary operator", op);
            acc.arg = expr_new(&a, err);
            if (!acc.arg)
                return false;
        }
        acc.field = bson_strdup(k);
        s->accs = bson_realloc(s->accs, (s->naccs + 1) * sizeof *s->accs);
        s->accs[s->naccs++] = acc;
    }
    if (!have_id)
        return dberr_set(err, 15955, "a group specification must include an _id");
    return true;
}

static bool parse_unwind(stage_t *s, bson_iter_t *arg, dberr_t *err)
{
    const char *path = NULL;
    const char *index = NULL;
    if (BSON_ITER_HOLDS_UTF8(arg)) {
        path = bson_iter_utf8(arg, NULL);
    } else if (BSON_ITER_HOLDS_DOCUMENT(arg)) {
        bson_iter_t it;
        bson_iter_recurse(arg, &it);
        while (bson_iter_next(&it)) {
            const char *k = bson_iter_key(&it);
            if (strcmp(k, "path") == 0) {
                if (!BSON_ITER_HOLDS_UTF8(&it))
                    return dberr_set(err, 28808, "expected a string as the path for $unwind stage, got %s",
                                     shellfmt_type_name(bson_iter_type(&it)));
                path = bson_iter_utf8(&it, NULL);
            } else if (strcmp(k, "includeArrayIndex") == 0) {
                if (!BSON_ITER_HOLDS_UTF8(&it) || bson_iter_utf8(&it, NULL)[0] == '\0')
                    return dberr_set(err, 28809, "expected a non-empty string for the includeArrayIndex option to $unwind stage");
                index = bson_iter_utf8(&it, NULL);
                if (index[0] == '$')
                    return dberr_set(err, 28822, "includeArrayIndex option to $unwind stage should not be prefixed with a '$': %s",
                                     index);
            } else if (strcmp(k, "preserveNullAndEmptyArrays") == 0) {
                if (!BSON_ITER_HOLDS_BOOL(&it))
                    return dberr_set(err, 28810, "expected a boolean for the preserveNullAndEmptyArrays option to $unwind stage, got %s",
                                     shellfmt_type_name(bson_iter_type(&it)));
                s->preserve = bson_iter_bool(&it);
            } else {
                return dberr_set(err, 28811, "unrecognized option to $unwind stage: %s", k);
            }
        }
        if (!path)
            return dberr_set(err, 28812, "no path specified to $unwind stage");
    } else {
        return dberr_set(err, 15981, "expected either a string or an object as specification for $unwind stage, got %s",
                         shellfmt_type_name(bson_iter_type(arg)));
    }
    if (path[0] != '$')
        return dberr_set(err, 28818, "path option to $unwind stage should be prefixed with a '$': %s", path);
    if (path[1] == '\0' || path[1] == '$' || !split_path(path + 1, &s->path, &s->npath))
        return dberr_set(err, 15998, "FieldPath field names may not be empty strings.");
    if (index && !split_path(index, &s->index_path, &s->nindex))
        return dberr_set(err, 15998, "FieldPath field names may not be empty strings.");
    return true;
}

/* $unset: "a" or ["a", "b.c"] → the exclusion projection {a: 0, "b.c": 0}. */
static bool parse_unset(stage_t *s, bson_iter_t *arg, dberr_t *err)
{
    bson_t spec = BSON_INITIALIZER;
    bool ok = true;
    if (BSON_ITER_HOLDS_UTF8(arg)) {
        bson_append_int32(&spec, bson_iter_utf8(arg, NULL), -1, 0);
    } else if (BSON_ITER_HOLDS_ARRAY(arg)) {
        bson_iter_t it;
        bson_iter_recurse(arg, &it);
        while (bson_iter_next(&it)) {
            if (!BSON_ITER_HOLDS_UTF8(&it)) {
                ok = dberr_set(err, 31120, "$unset specification must be a string or an array containing only string values");
                goto cleanup;
            }
            bson_append_int32(&spec, bson_iter_utf8(&it, NULL), -1, 0);
        }
        if (bson_empty(&spec)) {
            ok = dberr_set(err, 31119, "$unset specification must be a string or an array with at least one field");
            goto cleanup;
        }
    } else {
        ok = dberr_set(err, 31002, "$unset specification must be a string or an array");
        goto cleanup;
    }
    s->proj = projection_new_policy(&spec, PROJECTION_AGGREGATE, err);
    ok = s->proj != NULL;
cleanup:
    bson_destroy(&spec);
    return ok;
}

/* Stages atomdb knows of but does not run. */
static const char *const unsupported[] = {
    "$lookup", "$facet", "$bucket", "$bucketAuto", "$graphLookup",
    "$geoNear", "$sample", "$collStats", "$indexStats", "$currentOp", "$listSessions",
    "$listLocalSessions", "$redact", "$sortByCount", "$unionWith", "$densify", "$fill",
    "$setWindowFields", "$changeStream", "$search", "$searchMeta",
    "$planCacheStats", "$listSearchIndexes", "$shardedDataDistribution", NULL,
};

static pipeline_t *pipeline_build(const bson_iter_t *stages, pipeline_mode_t mode, bson_t *let,
                                  dberr_t *err);

/* Copies a namespace part into `dst` (`cap` bytes); false when empty, too
 * long or holding a character mongod refuses there. */
static bool copy_ns_part(char *dst, size_t cap, const char *src, uint32_t len, bool is_db)
{
    if (len == 0 || len >= cap || strlen(src) != len)
        return false;
    if (strpbrk(src, is_db ? "/\\. \"$" : "$"))
        return false;
    memcpy(dst, src, len + 1);
    return true;
}

/* The `{db, coll}` form of $out and of $merge's `into`. */
static bool parse_ns_doc(output_stage_t *o, bson_iter_t *it, const char *field, dberr_t *err)
{
    bson_iter_t f;
    bool have_db = false, have_coll = false;
    bson_iter_recurse(it, &f);
    while (bson_iter_next(&f)) {
        const char *k = bson_iter_key(&f);
        bool is_db = strcmp(k, "db") == 0;
        if (!is_db && strcmp(k, "coll") != 0) {
            if (!o->pub.is_merge && strcmp(k, "timeseries") == 0)
                return dberr_set(err, DBERR_NOT_IMPLEMENTED,
                                 "atomdb does not support $out to a time-series collection");
            return dberr_set(err, 40415, "BSON field '%s.%s' is an unknown field.", field, k);
        }
        if (!BSON_ITER_HOLDS_UTF8(&f))
            return dberr_set(err, DBERR_TYPE_MISMATCH,
                             "BSON field '%s.%s' is the wrong type '%s', expected type 'string'",
                             field, k, shellfmt_type_name(bson_iter_type(&f)));
        uint32_t len;
        const char *v = bson_iter_utf8(&f, &len);
        if (is_db) {
            if (!copy_ns_part(o->pub.db, sizeof o->pub.db, v, len, true))
                return dberr_set(err, DBERR_INVALID_NAMESPACE, "Invalid %s target database: '%s'",
                                 o->pub.is_merge ? "$merge" : "$out", v);
            have_db = true;
        } else {
            if (len == 0 && o->pub.is_merge)
                return dberr_set(err, 5786801, "$merge 'into' field must specify a 'coll' that "
                                               "is not empty, null or undefined");
            if (!copy_ns_part(o->pub.coll, sizeof o->pub.coll, v, len, false))
                return dberr_set(err, DBERR_INVALID_NAMESPACE,
                                 "Invalid %s target namespace: '%s'",
                                 o->pub.is_merge ? "$merge" : "$out", v);
            have_coll = true;
        }
    }
    if (!have_coll)
        return o->pub.is_merge
                   ? dberr_set(err, 5786801, "$merge 'into' field must specify a 'coll' that is "
                                             "not empty, null or undefined")
                   : dberr_set(err, 40414, "BSON field '$out.coll' is missing but a required field");
    if (!have_db && !o->pub.is_merge)
        return dberr_set(err, 40414, "BSON field '$out.db' is missing but a required field");
    return true;
}

/* $out: "coll" or {db, coll}. */
static bool parse_out(output_stage_t *o, bson_iter_t *it, dberr_t *err)
{
    if (BSON_ITER_HOLDS_UTF8(it)) {
        uint32_t len;
        const char *v = bson_iter_utf8(it, &len);
        if (!copy_ns_part(o->pub.coll, sizeof o->pub.coll, v, len, false))
            return dberr_set(err, DBERR_INVALID_NAMESPACE, "Invalid $out target namespace: '%s'",
                             v);
        return true;
    }
    if (BSON_ITER_HOLDS_DOCUMENT(it))
        return parse_ns_doc(o, it, "$out", err);
    return dberr_set(err, 16990, "$out only supports a string or object argument, but found %s",
                     shellfmt_type_name(bson_iter_type(it)));
}

static void add_on_field(output_stage_t *o, const char *f)
{
    o->pub.on = bson_realloc(o->pub.on, (o->pub.non + 1) * sizeof *o->pub.on);
    o->pub.on[o->pub.non++] = bson_strdup(f);
}

/* $merge `let`: each variable an expression evaluated per output document
 * (default {new: "$$ROOT"}); `new`, when given, must be "$$ROOT". */
static bool parse_merge_let(output_stage_t *o, const bson_iter_t *let_it, dberr_t *err)
{
    bool have_new = false;
    if (let_it) {
        bson_iter_t f;
        bson_iter_recurse(let_it, &f);
        while (bson_iter_next(&f)) {
            const char *k = bson_iter_key(&f);
            if (strcmp(k, "new") == 0) {
                if (!BSON_ITER_HOLDS_UTF8(&f) || strcmp(bson_iter_utf8(&f, NULL), "$$ROOT") != 0)
                    return dberr_set(err, 51273, "'let' may not define a value for the reserved "
                                                 "'new' variable other than '$$ROOT'");
                have_new = true;
            }
            expr_t *e = expr_new(&f, err);
            if (!e)
                return false;
            o->let_names = bson_realloc(o->let_names, (o->nlet + 1) * sizeof *o->let_names);
            o->let_exprs = bson_realloc(o->let_exprs, (o->nlet + 1) * sizeof *o->let_exprs);
            o->let_names[o->nlet] = bson_strdup(k);
            o->let_exprs[o->nlet++] = e;
            if (!expr_check_vars(e, o->outer_let, err))
                return false;
        }
    }
    if (!have_new) {
        bson_t *d = BCON_NEW("new", BCON_UTF8("$$ROOT"));
        bson_iter_t f;
        bson_iter_init(&f, d);
        bson_iter_next(&f);
        expr_t *e = expr_new(&f, err);
        bson_destroy(d);
        if (!e)
            return false;
        o->let_names = bson_realloc(o->let_names, (o->nlet + 1) * sizeof *o->let_names);
        o->let_exprs = bson_realloc(o->let_exprs, (o->nlet + 1) * sizeof *o->let_exprs);
        o->let_names[o->nlet] = bson_strdup("new");
        o->let_exprs[o->nlet++] = e;
    }
    return true;
}

static const char *when_matched_name(pipeline_when_matched_t m)
{
    switch (m) {
    case PIPELINE_WHEN_MATCHED_MERGE: return "merge";
    case PIPELINE_WHEN_MATCHED_REPLACE: return "replace";
    case PIPELINE_WHEN_MATCHED_KEEP_EXISTING: return "keepExisting";
    case PIPELINE_WHEN_MATCHED_FAIL: return "fail";
    case PIPELINE_WHEN_MATCHED_PIPELINE: return "pipeline";
    }
    return "?";
}

static const char *when_not_matched_name(pipeline_when_not_matched_t m)
{
    switch (m) {
    case PIPELINE_WHEN_NOT_MATCHED_INSERT: return "insert";
    case PIPELINE_WHEN_NOT_MATCHED_DISCARD: return "discard";
    case PIPELINE_WHEN_NOT_MATCHED_FAIL: return "fail";
    }
    return "?";
}

/* $merge: "coll" or {into, on, whenMatched, whenNotMatched, let}. */
static bool parse_merge(output_stage_t *o, bson_iter_t *it, dberr_t *err)
{
    bson_iter_t f, wm_pipeline, let_it;
    bool have_into = false, have_let = false;
    o->pub.is_merge = true;
    if (BSON_ITER_HOLDS_UTF8(it)) {
        o->spec = BCON_NEW("into", BCON_UTF8(bson_iter_utf8(it, NULL)));
    } else if (BSON_ITER_HOLDS_DOCUMENT(it)) {
        bson_t d;
        borrow_doc(it, &d);
        o->spec = bson_copy(&d);
    } else {
        return dberr_set(err, 51182, "$merge only supports a string or object argument, not %s",
                         shellfmt_type_name(bson_iter_type(it)));
    }
    o->pub.merge_spec = o->spec;
    bson_iter_init(&f, o->spec);
    while (bson_iter_next(&f)) {
        const char *k = bson_iter_key(&f);
        if (strcmp(k, "into") == 0) {
            have_into = true;
            if (BSON_ITER_HOLDS_UTF8(&f)) {
                uint32_t len;
                const char *v = bson_iter_utf8(&f, &len);
                if (len == 0)
                    return dberr_set(err, 5786800, "$merge 'into' field cannot be an empty string");
                if (!copy_ns_part(o->pub.coll, sizeof o->pub.coll, v, len, false))
                    return dberr_set(err, DBERR_INVALID_NAMESPACE,
                                     "Invalid $merge target namespace: '%s'", v);
            } else if (BSON_ITER_HOLDS_DOCUMENT(&f)) {
                if (!parse_ns_doc(o, &f, "$merge.into", err))
                    return false;
            } else {
                return dberr_set(err, 51178, "$merge 'into' field  must be either a string or an "
                                             "object, but found %s",
                                 shellfmt_type_name(bson_iter_type(&f)));
            }
        } else if (strcmp(k, "on") == 0) {
            for (size_t i = 0; i < o->pub.non; i++)
                bson_free(o->pub.on[i]);
            o->pub.non = 0;
            o->pub.on_given = true;
            if (BSON_ITER_HOLDS_UTF8(&f)) {
                add_on_field(o, bson_iter_utf8(&f, NULL));
            } else if (BSON_ITER_HOLDS_ARRAY(&f)) {
                bson_iter_t a;
                bson_iter_recurse(&f, &a);
                while (bson_iter_next(&a)) {
                    if (!BSON_ITER_HOLDS_UTF8(&a))
                        return dberr_set(err, 51134, "$merge 'on' array elements must be strings, "
                                                     "but found %s",
                                         shellfmt_type_name(bson_iter_type(&a)));
                    add_on_field(o, bson_iter_utf8(&a, NULL));
                }
                if (o->pub.non == 0)
                    return dberr_set(err, 51187, "If explicitly specifying $merge 'on', must "
                                                 "include at least one field");
            } else {
                return dberr_set(err, 51186, "$merge 'on' field  must be either a string or an "
                                             "array of strings, but found %s",
                                 shellfmt_type_name(bson_iter_type(&f)));
            }
        } else if (strcmp(k, "whenMatched") == 0) {
            if (BSON_ITER_HOLDS_ARRAY(&f)) {
                o->pub.when_matched = PIPELINE_WHEN_MATCHED_PIPELINE;
                wm_pipeline = f;
            } else if (BSON_ITER_HOLDS_UTF8(&f)) {
                const char *v = bson_iter_utf8(&f, NULL);
                if (strcmp(v, "merge") == 0)
                    o->pub.when_matched = PIPELINE_WHEN_MATCHED_MERGE;
                else if (strcmp(v, "replace") == 0)
                    o->pub.when_matched = PIPELINE_WHEN_MATCHED_REPLACE;
                else if (strcmp(v, "keepExisting") == 0)
                    o->pub.when_matched = PIPELINE_WHEN_MATCHED_KEEP_EXISTING;
                else if (strcmp(v, "fail") == 0)
                    o->pub.when_matched = PIPELINE_WHEN_MATCHED_FAIL;
                else
                    return dberr_set(err, DBERR_BAD_VALUE, "Enumeration value '%s' for field "
                                                           "'whenMatched' is not a valid value.",
                                     v);
            } else {
                return dberr_set(err, 51191, "$merge 'whenMatched' field  must be either a string "
                                             "or an array, but found %s",
                                 shellfmt_type_name(bson_iter_type(&f)));
            }
        } else if (strcmp(k, "whenNotMatched") == 0) {
            if (!BSON_ITER_HOLDS_UTF8(&f))
                return dberr_set(err, DBERR_TYPE_MISMATCH, "BSON field '$merge.whenNotMatched' is "
                                                           "the wrong type '%s', expected type "
                                                           "'string'",
                                 shellfmt_type_name(bson_iter_type(&f)));
            const char *v = bson_iter_utf8(&f, NULL);
            if (strcmp(v, "insert") == 0)
                o->pub.when_not_matched = PIPELINE_WHEN_NOT_MATCHED_INSERT;
            else if (strcmp(v, "discard") == 0)
                o->pub.when_not_matched = PIPELINE_WHEN_NOT_MATCHED_DISCARD;
            else if (strcmp(v, "fail") == 0)
                o->pub.when_not_matched = PIPELINE_WHEN_NOT_MATCHED_FAIL;
            else
                return dberr_set(err, DBERR_BAD_VALUE, "Enumeration value '%s' for field "
                                                       "'whenNotMatched' is not a valid value.",
                                 v);
        } else if (strcmp(k, "let") == 0) {
            if (!BSON_ITER_HOLDS_DOCUMENT(&f))
                return dberr_set(err, DBERR_TYPE_MISMATCH, "BSON field '$merge.let' is the wrong "
                                                           "type '%s', expected type 'object'",
                                 shellfmt_type_name(bson_iter_type(&f)));
            have_let = true;
            let_it = f;
        } else {
            return dberr_set(err, 40415, "BSON field '$merge.%s' is an unknown field.", k);
        }
    }
    if (!have_into)
        return dberr_set(err, 40414, "BSON field '$merge.into' is missing but a required field");
    if (o->pub.non == 0)
        add_on_field(o, "_id");
    pipeline_when_matched_t wm = o->pub.when_matched;
    pipeline_when_not_matched_t wnm = o->pub.when_not_matched;
    if ((wm == PIPELINE_WHEN_MATCHED_KEEP_EXISTING || wm == PIPELINE_WHEN_MATCHED_FAIL) &&
        wnm != PIPELINE_WHEN_NOT_MATCHED_INSERT)
        return dberr_set(err, 51189, "Combination of $merge modes 'whenMatched: %s' and "
                                     "'whenNotMatched: %s' is not supported",
                         when_matched_name(wm), when_not_matched_name(wnm));
    if (wm != PIPELINE_WHEN_MATCHED_PIPELINE) {
        if (have_let)
            return dberr_set(err, 51199, "Cannot use 'let' variables with 'whenMatched: %s' mode",
                             when_matched_name(wm));
        return true;
    }
    if (!parse_merge_let(o, have_let ? &let_it : NULL, err))
        return false;
    /* the whenMatched pipeline sees the command's let and $merge's own */
    bson_t *names = o->outer_let ? bson_copy(o->outer_let) : bson_new();
    for (size_t i = 0; i < o->nlet; i++)
        if (!bson_has_field(names, o->let_names[i]))
            bson_append_null(names, o->let_names[i], -1);
    o->pub.when_matched_pipeline = pipeline_build(&wm_pipeline, PIPELINE_UPDATE, names, err);
    return o->pub.when_matched_pipeline != NULL;
}

/* Checks the $$variables of a parsed stage against the pipeline's let; a
 * $match gets the let values. */
static bool stage_check_vars(stage_t *s, const bson_t *let, dberr_t *err)
{
    switch (s->kind) {
    case ST_MATCH:
        if (let)
            matcher_set_vars(s->matcher, let);
        return !matcher_take_error(s->matcher, err);
    case ST_REPLACE:
    case ST_DOCUMENTS: return expr_check_vars(s->expr, let, err);
    case ST_GROUP:
        if (!expr_check_vars(s->expr, let, err))
            return false;
        for (size_t i = 0; i < s->naccs; i++)
            if (!expr_check_vars(s->accs[i].arg, let, err))
                return false;
        return true;
    default: return true;
    }
}

/* Parses one stage document `doc` into `s`; `let` holds the pipeline's
 * evaluated variables (NULL: none). */
static bool parse_stage(stage_t *s, const bson_t *doc, pipeline_mode_t mode, const bson_t *let,
                        dberr_t *err)
{
    bson_iter_t it;
    if (bson_count_keys(doc) != 1 || !bson_iter_init(&it, doc) || !bson_iter_next(&it))
        return dberr_set(err, 40323, "A pipeline stage specification object must contain exactly one field.");
    const char *name = bson_iter_key(&it);
    static const char *const known[] = {"$match", "$group", "$sort", "$skip", "$limit",
                                        "$project", "$addFields", "$set", "$unset",
                                        "$unwind", "$count", "$replaceRoot", "$replaceWith",
                                        "$documents", "$out", "$merge", NULL};
    const char *canon = NULL;
    for (int i = 0; known[i]; i++)
        if (strcmp(known[i], name) == 0)
            canon = known[i];
    if (!canon) {
        for (int i = 0; unsupported[i]; i++)
            if (strcmp(unsupported[i], name) == 0)
                return dberr_set(err, DBERR_NOT_IMPLEMENTED,
                                 "atomdb does not support the %s aggregation stage yet", name);
        return dberr_set(err, 40324, "Unrecognized pipeline stage name: '%s'", name);
    }
    s->name = canon;
    if (mode == PIPELINE_UPDATE && strcmp(name, "$addFields") != 0 && strcmp(name, "$set") != 0 &&
        strcmp(name, "$project") != 0 && strcmp(name, "$unset") != 0 &&
        strcmp(name, "$replaceRoot") != 0 && strcmp(name, "$replaceWith") != 0)
        return dberr_set(err, DBERR_INVALID_OPTIONS, "%s is not allowed to be used within an update",
                         name);

    if (strcmp(name, "$match") == 0) {
        bson_t f;
        if (!BSON_ITER_HOLDS_DOCUMENT(&it))
            return dberr_set(err, 15959, "the match filter must be an expression in an object");
        borrow_doc(&it, &f);
        s->kind = ST_MATCH;
        s->filter = bson_copy(&f);
        s->matcher = matcher_new(&f, err);
        return s->matcher != NULL;
    }
    if (strcmp(name, "$documents") == 0) {
        s->kind = ST_DOCUMENTS;
        s->expr = expr_new(&it, err);
        return s->expr != NULL;
    }
    if (strcmp(name, "$out") == 0 || strcmp(name, "$merge") == 0) {
        s->kind = ST_OUTPUT;
        s->output = bson_malloc0(sizeof *s->output);
        s->output->outer_let = let;
        if (name[1] == 'o')
            return parse_out(s->output, &it, err);
        return parse_merge(s->output, &it, err);
    }
    if (strcmp(name, "$group") == 0) {
        s->kind = ST_GROUP;
        return parse_group(s, &it, err);
    }
    if (strcmp(name, "$sort") == 0) {
        bson_t f;
        if (!BSON_ITER_HOLDS_DOCUMENT(&it))
            return dberr_set(err, 15973, "the $sort key specification must be an object");
        borrow_doc(&it, &f);
        if (bson_empty(&f))
            return dberr_set(err, 15976, "$sort stage must have at least one sort key");
        s->kind = ST_SORT;
        s->sort = sortspec_new(&f, err);
        return s->sort != NULL;
    }
    if (strcmp(name, "$skip") == 0) {
        s->kind = ST_SKIP;
        if (!whole_number(&it, &s->n))
            return dberr_set(err, 15972, "Argument to $skip must be a number");
        if (s->n < 0)
            return dberr_set(err, 15956, "Argument to $skip cannot be negative");
        return true;
    }
    if (strcmp(name, "$limit") == 0) {
        s->kind = ST_LIMIT;
        if (!whole_number(&it, &s->n))
            return dberr_set(err, 15957, "the limit must be specified as a number");
        if (s->n <= 0)
            return dberr_set(err, 15958, "the limit must be positive");
        return true;
    }
    if (strcmp(name, "$project") == 0) {
        bson_t f;
        if (!BSON_ITER_HOLDS_DOCUMENT(&it))
            return dberr_set(err, 15969, "$project specification must be an object");
        borrow_doc(&it, &f);
        s->kind = ST_PROJECT;
        s->proj = projection_new_policy(&f, PROJECTION_AGGREGATE, err);
        return s->proj != NULL;
    }
    if (strcmp(name, "$addFields") == 0 || strcmp(name, "$set") == 0) {
        bson_t f;
        if (!BSON_ITER_HOLDS_DOCUMENT(&it))
            return dberr_set(err, 40272, "%s specification stage must be an object, got %s", name,
                             shellfmt_type_name(bson_iter_type(&it)));
        borrow_doc(&it, &f);
        s->kind = ST_PROJECT;
        s->proj = projection_new_policy(&f, PROJECTION_ADD_FIELDS, err);
        return s->proj != NULL;
    }
    if (strcmp(name, "$unset") == 0) {
        s->kind = ST_PROJECT;
        return parse_unset(s, &it, err);
    }
    if (strcmp(name, "$unwind") == 0) {
        s->kind = ST_UNWIND;
        return parse_unwind(s, &it, err);
    }
    if (strcmp(name, "$count") == 0) {
        s->kind = ST_COUNT;
        if (!BSON_ITER_HOLDS_UTF8(&it) || bson_iter_utf8(&it, NULL)[0] == '\0')
            return dberr_set(err, 40156, "the count field must be a non-empty string");
        const char *f = bson_iter_utf8(&it, NULL);
        if (f[0] == '$')
            return dberr_set(err, 40158, "the count field cannot be a $-prefixed path");
        if (strchr(f, '.'))
            return dberr_set(err, 40160, "the count field cannot contain '.'");
        s->field = bson_strdup(f);
        return true;
    }
    if (strcmp(name, "$replaceRoot") == 0) {
        bson_iter_t f;
        s->kind = ST_REPLACE;
        if (!BSON_ITER_HOLDS_DOCUMENT(&it))
            return dberr_set(err, 40229, "expected an object as specification for $replaceRoot stage, got %s",
                             shellfmt_type_name(bson_iter_type(&it)));
        bson_iter_recurse(&it, &f);
        while (bson_iter_next(&f)) {
            if (strcmp(bson_iter_key(&f), "newRoot") != 0)
                return dberr_set(err, 40415, "BSON field '$replaceRoot.%s' is an unknown field.",
                                 bson_iter_key(&f));
            expr_destroy(s->expr);
            s->expr = expr_new(&f, err);
            if (!s->expr)
                return false;
        }
        if (!s->expr)
            return dberr_set(err, 40414, "BSON field '$replaceRoot.newRoot' is missing but a required field");
        return true;
    }
    /* $replaceWith */
    s->kind = ST_REPLACE;
    s->expr = expr_new(&it, err);
    return s->expr != NULL;
}

static int64_t wall_ms(void)
{
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (int64_t)tv.tv_sec * 1000 + tv.tv_usec / 1000;
}

pipeline_t *pipeline_new(const bson_iter_t *stages, pipeline_mode_t mode, const bson_t *let,
                         dberr_t *err)
{
    bson_t *vars = NULL;
    dberr_clear(err);
    if (let) {
        vars = bson_new();
        if (!expr_eval_let(let, wall_ms(), vars, err)) {
            bson_destroy(vars);
            return NULL;
        }
    }
    return pipeline_build(stages, mode, vars, err);
}

/* pipeline_new with an evaluated `let` (owned by the result, also on
 * failure; NULL for none). */
static pipeline_t *pipeline_build(const bson_iter_t *stages, pipeline_mode_t mode, bson_t *let,
                                  dberr_t *err)
{
    pipeline_t *p = bson_malloc0(sizeof *p);
    bson_iter_t it;
    p->let = let;
    if (!BSON_ITER_HOLDS_ARRAY(stages)) {
        dberr_set(err, DBERR_TYPE_MISMATCH, "'pipeline' option must be specified as an array");
        goto fail;
    }
    bson_iter_recurse(stages, &it);
    while (bson_iter_next(&it)) {
        bson_t doc;
        if (!BSON_ITER_HOLDS_DOCUMENT(&it)) {
            dberr_set(err, DBERR_TYPE_MISMATCH, "Each element of the 'pipeline' array must be an object");
            goto fail;
        }
        borrow_doc(&it, &doc);
        if (p->n > 0 && p->stages[p->n - 1].kind == ST_OUTPUT) {
            dberr_set(err, 40601, "%s can only be the final stage in the pipeline",
                      p->stages[p->n - 1].output->pub.is_merge ? "$merge" : "$out");
            goto fail;
        }
        p->stages = bson_realloc(p->stages, (p->n + 1) * sizeof *p->stages);
        memset(&p->stages[p->n], 0, sizeof p->stages[p->n]);
        p->n++;
        stage_t *s = &p->stages[p->n - 1];
        if (!parse_stage(s, &doc, mode, p->let, err) || !stage_check_vars(s, p->let, err))
            goto fail;
        if (s->kind == ST_DOCUMENTS && p->n > 1) {
            dberr_set(err, 40602, "$documents is only valid as the first stage in a pipeline");
            goto fail;
        }
    }
    return p;
fail:
    pipeline_destroy(p);
    return NULL;
}

const pipeline_output_t *pipeline_output(const pipeline_t *p)
{
    if (!p || p->n == 0 || p->stages[p->n - 1].kind != ST_OUTPUT)
        return NULL;
    return &p->stages[p->n - 1].output->pub;
}

bool pipeline_is_collectionless(const pipeline_t *p)
{
    return p && p->n > 0 && p->stages[0].kind == ST_DOCUMENTS;
}

bool pipeline_merge_vars(const pipeline_output_t *o, const bson_t *new_doc, bson_t *vars,
                         dberr_t *err)
{
    const output_stage_t *os = (const output_stage_t *)o; /* pub is the first member */
    expr_ctx_t ctx = {.root = new_doc, .now_ms = wall_ms(), .vars = os->outer_let};
    for (size_t i = 0; i < os->nlet; i++) {
        bson_value_t v;
        if (!expr_eval(os->let_exprs[i], &ctx, &v, err))
            return false;
        if (v.value_type == BSON_TYPE_EOD) {
            bson_append_undefined(vars, os->let_names[i], -1);
        } else {
            bson_append_value(vars, os->let_names[i], -1, &v);
            bson_value_destroy(&v);
        }
    }
    return true;
}

const bson_t *pipeline_leading_match(const pipeline_t *p)
{
    if (!p || p->n == 0 || p->stages[0].kind != ST_MATCH)
        return NULL;
    return p->stages[0].filter;
}

/* ------------------------------------------------------------------ run */

/* Reads nested `path` without array traversal (as $unwind does). */
static bool get_nested(const bson_t *doc, char *const *path, size_t n, bson_iter_t *out)
{
    bson_iter_t it;
    if (!bson_iter_init_find(&it, doc, path[0]))
        return false;
    for (size_t i = 1; i < n; i++) {
        bson_iter_t child;
        if (!BSON_ITER_HOLDS_DOCUMENT(&it) || !bson_iter_recurse(&it, &child))
            return false;
        if (!bson_iter_find(&child, path[i]))
            return false;
        it = child;
    }
    *out = it;
    return true;
}

/* Appends to `out` a nested document for path[0..n) holding `v`. */
static void append_nested(bson_t *out, char *const *path, size_t n, const bson_value_t *v)
{
    if (n == 1) {
        bson_append_value(out, path[0], -1, v);
        return;
    }
    bson_t child;
    bson_append_document_begin(out, path[0], -1, &child);
    append_nested(&child, path + 1, n - 1, v);
    bson_append_document_end(out, &child);
}

/* Copies `doc` to `out` with dotted `path` set to `v` (replacing in place,
 * creating documents as needed) or removed when `v` is NULL. */
static void set_path(const bson_t *doc, char *const *path, size_t n, const bson_value_t *v,
                     bson_t *out)
{
    bson_iter_t it;
    bool found = false;
    if (bson_iter_init(&it, doc))
        while (bson_iter_next(&it)) {
            const char *k = bson_iter_key(&it);
            if (found || strcmp(k, path[0]) != 0) {
                bson_append_value(out, k, -1, bson_iter_value(&it));
                continue;
            }
            found = true;
            if (n == 1) {
                if (v)
                    bson_append_value(out, k, -1, v);
            } else if (BSON_ITER_HOLDS_DOCUMENT(&it)) {
                bson_t sub, child;
                borrow_doc(&it, &sub);
                bson_append_document_begin(out, k, -1, &child);
                set_path(&sub, path + 1, n - 1, v, &child);
                bson_append_document_end(out, &child);
            } else if (v) {
                bson_t child;
                bson_append_document_begin(out, k, -1, &child);
                append_nested(&child, path + 1, n - 1, v);
                bson_append_document_end(out, &child);
            } else {
                bson_append_value(out, k, -1, bson_iter_value(&it));
            }
        }
    if (!found && v)
        append_nested(out, path, n, v);
}

static bool run_unwind(const stage_t *s, doclist_t *in, doclist_t *out, dberr_t *err)
{
    for (size_t i = 0; i < in->len; i++) {
        const bson_t *doc = in->docs[i];
        bson_iter_t it;
        bool present = get_nested(doc, s->path, s->npath, &it);
        bson_value_t nullv = {.value_type = BSON_TYPE_NULL};
        if (present && BSON_ITER_HOLDS_ARRAY(&it)) {
            bson_iter_t el;
            bson_value_t arr;
            int64_t idx = 0;
            bson_value_copy(bson_iter_value(&it), &arr);
            bson_t a;
            bson_init_static(&a, arr.value.v_doc.data, arr.value.v_doc.data_len);
            bson_iter_init(&el, &a);
            while (bson_iter_next(&el)) {
                bson_t *d = bson_new();
                set_path(doc, s->path, s->npath, bson_iter_value(&el), d);
                if (s->index_path) {
                    bson_value_t iv = {.value_type = BSON_TYPE_INT64};
                    iv.value.v_int64 = idx;
                    bson_t *d2 = bson_new();
                    set_path(d, s->index_path, s->nindex, &iv, d2);
                    bson_destroy(d);
                    d = d2;
                }
                doclist_push(out, d);
                idx++;
            }
            if (idx == 0 && s->preserve) {
                bson_t *d = bson_new();
                set_path(doc, s->path, s->npath, NULL, d);
                if (s->index_path) {
                    bson_t *d2 = bson_new();
                    set_path(d, s->index_path, s->nindex, &nullv, d2);
                    bson_destroy(d);
                    d = d2;
                }
                doclist_push(out, d);
            }
            bson_value_destroy(&arr);
            continue;
        }
        bool nullish = !present || BSON_ITER_HOLDS_NULL(&it) || BSON_ITER_HOLDS_UNDEFINED(&it);
        if (nullish && !s->preserve)
            continue;
        /* a non-array value is unwound as itself; index null */
        bson_t *d = bson_copy(doc);
        if (s->index_path) {
            bson_t *d2 = bson_new();
            set_path(d, s->index_path, s->nindex, &nullv, d2);
            bson_destroy(d);
            d = d2;
        }
        doclist_push(out, d);
    }
    (void)err;
    return true;
}

/* ---- $group */

/* The running state of one accumulator for one group. */
typedef struct acc_state {
    bson_type_t sum_type; /* INT32 / INT64 / DOUBLE */
    int64_t sum_l;
    double sum_d;
    int64_t count;
    bson_value_t val;  /* $min/$max/$first/$last: EOD until set */
    bool seen;         /* $first: a value was taken */
    bson_t *list;      /* $push/$addToSet elements (array; heap: bson_t is over-aligned) */
    uint32_t nlist;
} acc_state_t;

typedef struct group {
    bson_value_t key;
    buf_t kbytes;
    acc_state_t *st;
    struct group *next; /* hash chain */
} group_t;

static void sum_add(acc_state_t *a, const bson_value_t *v)
{
    if (!compare_is_number(v))
        return;
    a->count++;
    a->sum_d += compare_to_double(v);
    if (a->sum_type == BSON_TYPE_DOUBLE)
        return;
    if (v->value_type == BSON_TYPE_DOUBLE || v->value_type == BSON_TYPE_DECIMAL128) {
        a->sum_type = BSON_TYPE_DOUBLE;
        return;
    }
    int64_t x = v->value_type == BSON_TYPE_INT32 ? v->value.v_int32 : v->value.v_int64;
    if (v->value_type == BSON_TYPE_INT64)
        a->sum_type = BSON_TYPE_INT64;
    if (__builtin_add_overflow(a->sum_l, x, &a->sum_l))
        a->sum_type = BSON_TYPE_DOUBLE;
}

static bool list_contains(const acc_state_t *a, const bson_value_t *v)
{
    bson_iter_t it;
    if (bson_iter_init(&it, a->list))
        while (bson_iter_next(&it))
            if (compare_values(bson_iter_value(&it), v) == 0)
                return true;
    return false;
}

static void list_push(acc_state_t *a, const bson_value_t *v)
{
    char buf[16];
    const char *key;
    bson_uint32_to_string(a->nlist++, &key, buf, sizeof buf);
    bson_append_value(a->list, key, -1, v);
}

static void acc_update(const accum_t *spec, acc_state_t *a, const bson_value_t *v)
{
    bool missing = v->value_type == BSON_TYPE_EOD;
    bool nullish = missing || v->value_type == BSON_TYPE_NULL || v->value_type == BSON_TYPE_UNDEFINED;
    switch (spec->op) {
    case ACC_SUM:
    case ACC_AVG: sum_add(a, v); break;
    case ACC_COUNT: a->count++; break;
    case ACC_MIN:
    case ACC_MAX:
        if (nullish)
            break;
        if (a->val.value_type == BSON_TYPE_EOD) {
            bson_value_copy(v, &a->val);
        } else {
            int c = compare_values(v, &a->val);
            if ((spec->op == ACC_MAX && c > 0) || (spec->op == ACC_MIN && c < 0)) {
                bson_value_destroy(&a->val);
                bson_value_copy(v, &a->val);
            }
        }
        break;
    case ACC_FIRST:
        if (!a->seen) {
            a->seen = true;
            if (!missing)
                bson_value_copy(v, &a->val);
        }
        break;
    case ACC_LAST:
        if (a->val.value_type != BSON_TYPE_EOD)
            bson_value_destroy(&a->val);
        memset(&a->val, 0, sizeof a->val);
        if (!missing)
            bson_value_copy(v, &a->val);
        break;
    case ACC_PUSH:
        if (!missing)
            list_push(a, v);
        break;
    case ACC_ADDTOSET:
        if (!missing && !list_contains(a, v))
            list_push(a, v);
        break;
    }
}

static void acc_emit(const accum_t *spec, const acc_state_t *a, bson_t *out)
{
    switch (spec->op) {
    case ACC_SUM:
        if (a->sum_type == BSON_TYPE_DOUBLE)
            bson_append_double(out, spec->field, -1, a->sum_d);
        else if (a->sum_type == BSON_TYPE_INT32 && a->sum_l >= INT32_MIN && a->sum_l <= INT32_MAX)
            bson_append_int32(out, spec->field, -1, (int32_t)a->sum_l);
        else
            bson_append_int64(out, spec->field, -1, a->sum_l);
        break;
    case ACC_AVG:
        if (a->count == 0)
            bson_append_null(out, spec->field, -1);
        else
            bson_append_double(out, spec->field, -1, a->sum_d / (double)a->count);
        break;
    case ACC_COUNT:
        if (a->count <= INT32_MAX)
            bson_append_int32(out, spec->field, -1, (int32_t)a->count);
        else
            bson_append_int64(out, spec->field, -1, a->count);
        break;
    case ACC_MIN:
    case ACC_MAX:
    case ACC_FIRST:
    case ACC_LAST:
        if (a->val.value_type == BSON_TYPE_EOD)
            bson_append_null(out, spec->field, -1);
        else
            bson_append_value(out, spec->field, -1, &a->val);
        break;
    case ACC_PUSH:
    case ACC_ADDTOSET: bson_append_array(out, spec->field, -1, a->list); break;
    }
}

static uint64_t hash_bytes(const uint8_t *p, size_t n)
{
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 1099511628211ULL;
    }
    return h;
}

static bool run_group(const stage_t *s, const expr_ctx_t *base, doclist_t *in, doclist_t *out,
                      dberr_t *err)
{
    size_t nbuckets = 64, ngroups = 0;
    group_t **buckets = bson_malloc0(nbuckets * sizeof *buckets);
    group_t **order = NULL; /* groups in first-seen order */
    size_t order_cap = 0;
    bool ok = true;

    for (size_t i = 0; i < in->len; i++) {
        expr_ctx_t ctx = *base;
        bson_value_t key;
        ctx.root = in->docs[i];
        if (!expr_eval(s->expr, &ctx, &key, err)) {
            ok = false;
            goto cleanup;
        }
        if (key.value_type == BSON_TYPE_EOD)
            key.value_type = BSON_TYPE_NULL;
        buf_t kb;
        buf_init(&kb);
        keystring_append(&kb, &key, false);
        uint64_t h = hash_bytes(kb.data, kb.len);
        group_t *g = buckets[h % nbuckets];
        while (g && !(g->kbytes.len == kb.len && memcmp(g->kbytes.data, kb.data, kb.len) == 0))
            g = g->next;
        if (g) {
            buf_destroy(&kb);
            bson_value_destroy(&key);
        } else {
            g = bson_malloc0(sizeof *g);
            g->key = key;
            g->kbytes = kb;
            g->st = bson_malloc0((s->naccs ? s->naccs : 1) * sizeof *g->st);
            for (size_t a = 0; a < s->naccs; a++) {
                g->st[a].sum_type = BSON_TYPE_INT32;
                g->st[a].list = bson_new();
            }
            g->next = buckets[h % nbuckets];
            buckets[h % nbuckets] = g;
            if (ngroups == order_cap) {
                order_cap = order_cap ? order_cap * 2 : 16;
                order = bson_realloc(order, order_cap * sizeof *order);
            }
            order[ngroups++] = g;
            if (ngroups > nbuckets * 2) {
                /* grow the table */
                size_t nb = nbuckets * 4;
                group_t **b2 = bson_malloc0(nb * sizeof *b2);
                for (size_t j = 0; j < ngroups; j++) {
                    group_t *x = order[j];
                    uint64_t hx = hash_bytes(x->kbytes.data, x->kbytes.len);
                    x->next = b2[hx % nb];
                    b2[hx % nb] = x;
                }
                bson_free(buckets);
                buckets = b2;
                nbuckets = nb;
            }
        }
        for (size_t a = 0; a < s->naccs; a++) {
            bson_value_t v;
            memset(&v, 0, sizeof v);
            v.value_type = BSON_TYPE_EOD;
            if (s->accs[a].arg && !expr_eval(s->accs[a].arg, &ctx, &v, err)) {
                ok = false;
                goto cleanup;
            }
            acc_update(&s->accs[a], &g->st[a], &v);
            if (v.value_type != BSON_TYPE_EOD)
                bson_value_destroy(&v);
        }
    }
    for (size_t i = 0; i < ngroups; i++) {
        bson_t *d = bson_new();
        bson_append_value(d, "_id", 3, &order[i]->key);
        for (size_t a = 0; a < s->naccs; a++)
            acc_emit(&s->accs[a], &order[i]->st[a], d);
        doclist_push(out, d);
    }
cleanup:
    for (size_t i = 0; i < ngroups; i++) {
        group_t *g = order[i];
        bson_value_destroy(&g->key);
        buf_destroy(&g->kbytes);
        for (size_t a = 0; a < s->naccs; a++) {
            if (g->st[a].val.value_type != BSON_TYPE_EOD)
                bson_value_destroy(&g->st[a].val);
            bson_destroy(g->st[a].list);
        }
        bson_free(g->st);
        bson_free(g);
    }
    bson_free(order);
    bson_free(buckets);
    return ok;
}

/* ---- $sort: a stable merge sort */

static void merge_sort(bson_t **a, bson_t **tmp, size_t n, const sortspec_t *s)
{
    if (n < 2)
        return;
    size_t mid = n / 2;
    merge_sort(a, tmp, mid, s);
    merge_sort(a + mid, tmp, n - mid, s);
    size_t i = 0, j = mid, k = 0;
    while (i < mid && j < n)
        tmp[k++] = sortspec_compare(s, a[j], a[i]) < 0 ? a[j++] : a[i++];
    while (i < mid)
        tmp[k++] = a[i++];
    while (j < n)
        tmp[k++] = a[j++];
    memcpy(a, tmp, n * sizeof *a);
}

/* Appends `v` to `out` as a document; Location40228 when it is not one. */
static bool push_new_root(bson_value_t *v, doclist_t *out, dberr_t *err)
{
    if (v->value_type != BSON_TYPE_DOCUMENT)
        return dberr_set(err, 40228,
                         "'newRoot' expression must evaluate to an object, but resulting value "
                         "was of type: %s",
                         shellfmt_type_name(v->value_type));
    bson_t *d = bson_new_from_data(v->value.v_doc.data, v->value.v_doc.data_len);
    if (!d)
        return dberr_set(err, DBERR_INVALID_BSON, "invalid document from newRoot");
    doclist_push(out, d);
    return true;
}

/* $documents: the expression, evaluated against an empty document, unwound
 * (null or missing gives nothing) into documents, as mongod's desugaring
 * into $project/$unwind/$replaceRoot does. */
static bool run_documents(const stage_t *s, const expr_ctx_t *ctx, doclist_t *out, dberr_t *err)
{
    bson_t empty = BSON_INITIALIZER;
    expr_ctx_t c = *ctx;
    bson_value_t v;
    bool ok = true;
    c.root = &empty;
    if (!expr_eval(s->expr, &c, &v, err))
        return false;
    if (v.value_type == BSON_TYPE_ARRAY) {
        bson_t arr;
        bson_iter_t it;
        if (bson_init_static(&arr, v.value.v_doc.data, v.value.v_doc.data_len) &&
            bson_iter_init(&it, &arr))
            while (ok && bson_iter_next(&it)) {
                bson_value_t ev = *bson_iter_value(&it);
                ok = push_new_root(&ev, out, err);
            }
    } else if (v.value_type != BSON_TYPE_EOD && v.value_type != BSON_TYPE_NULL &&
               v.value_type != BSON_TYPE_UNDEFINED) {
        ok = push_new_root(&v, out, err);
    }
    if (v.value_type != BSON_TYPE_EOD)
        bson_value_destroy(&v);
    return ok;
}

/* Runs one stage from `in` (consumed: its documents end up freed or moved)
 * into `out`. */
static bool run_stage(const stage_t *s, const expr_ctx_t *ctx, doclist_t *in, doclist_t *out,
                      dberr_t *err)
{
    switch (s->kind) {
    case ST_MATCH:
        for (size_t i = 0; i < in->len; i++) {
            if (matcher_matches(s->matcher, in->docs[i], NULL)) {
                doclist_push(out, in->docs[i]);
                in->docs[i] = NULL;
            }
        }
        return !matcher_take_error(s->matcher, err);
    case ST_OUTPUT:
        for (size_t i = 0; i < in->len; i++) {
            doclist_push(out, in->docs[i]);
            in->docs[i] = NULL;
        }
        return true;
    case ST_DOCUMENTS: return run_documents(s, ctx, out, err);
    case ST_SORT: {
        bson_t **tmp = bson_malloc((in->len ? in->len : 1) * sizeof *tmp);
        merge_sort(in->docs, tmp, in->len, s->sort);
        bson_free(tmp);
        for (size_t i = 0; i < in->len; i++) {
            doclist_push(out, in->docs[i]);
            in->docs[i] = NULL;
        }
        return true;
    }
    case ST_SKIP:
    case ST_LIMIT:
        for (size_t i = 0; i < in->len; i++) {
            bool keep = s->kind == ST_SKIP ? (int64_t)i >= s->n : (int64_t)i < s->n;
            if (keep) {
                doclist_push(out, in->docs[i]);
                in->docs[i] = NULL;
            }
        }
        return true;
    case ST_PROJECT:
        for (size_t i = 0; i < in->len; i++) {
            bson_t *d = bson_new();
            if (!projection_apply_ctx(s->proj, in->docs[i], -1, ctx, d, err)) {
                bson_destroy(d);
                return false;
            }
            doclist_push(out, d);
        }
        return true;
    case ST_UNWIND: return run_unwind(s, in, out, err);
    case ST_COUNT:
        if (in->len > 0) {
            bson_t *d = bson_new();
            if (in->len <= INT32_MAX)
                bson_append_int32(d, s->field, -1, (int32_t)in->len);
            else
                bson_append_int64(d, s->field, -1, (int64_t)in->len);
            doclist_push(out, d);
        }
        return true;
    case ST_REPLACE:
        for (size_t i = 0; i < in->len; i++) {
            expr_ctx_t c = *ctx;
            bson_value_t v;
            c.root = in->docs[i];
            if (!expr_eval(s->expr, &c, &v, err))
                return false;
            if (v.value_type != BSON_TYPE_DOCUMENT) {
                const char *tn = shellfmt_type_name(v.value_type);
                if (v.value_type != BSON_TYPE_EOD)
                    bson_value_destroy(&v);
                return dberr_set(err, 40228,
                                 "'newRoot' expression must evaluate to an object, but resulting value was of type: %s",
                                 tn);
            }
            bson_t *d = bson_new_from_data(v.value.v_doc.data, v.value.v_doc.data_len);
            bson_value_destroy(&v);
            if (!d)
                return dberr_set(err, DBERR_INVALID_BSON, "invalid document from newRoot");
            doclist_push(out, d);
        }
        return true;
    case ST_GROUP: return run_group(s, ctx, in, out, err);
    }
    return dberr_set(err, DBERR_INTERNAL_ERROR, "unknown stage");
}

static bool run_stages(const pipeline_t *p, const expr_ctx_t *c, doclist_t *docs, dberr_t *err);

bool pipeline_run(const pipeline_t *p, doclist_t *docs, dberr_t *err)
{
    return pipeline_run_vars(p, NULL, docs, err);
}

bool pipeline_run_vars(const pipeline_t *p, const bson_t *vars, doclist_t *docs, dberr_t *err)
{
    bson_t merged = BSON_INITIALIZER;
    bool ok = true;
    expr_ctx_t ctx = {.root = NULL, .now_ms = wall_ms(), .vars = p->let};
    dberr_clear(err);
    if (vars && !bson_empty(vars)) {
        bson_iter_t it;
        if (p->let && bson_iter_init(&it, p->let))
            while (bson_iter_next(&it))
                if (!bson_has_field(vars, bson_iter_key(&it)))
                    bson_append_value(&merged, bson_iter_key(&it), -1, bson_iter_value(&it));
        bson_concat(&merged, vars);
        ctx.vars = &merged;
    }
    ok = run_stages(p, &ctx, docs, err);
    bson_destroy(&merged);
    return ok;
}

/* Runs the stages of `p` over `docs` under `ctx`. */
static bool run_stages(const pipeline_t *p, const expr_ctx_t *c, doclist_t *docs, dberr_t *err)
{
    expr_ctx_t ctx = *c;
    for (size_t i = 0; i < p->n; i++) {
        doclist_t next;
        doclist_init(&next);
        bool ok = run_stage(&p->stages[i], &ctx, docs, &next, err);
        /* documents moved to `next` were nulled in `docs` */
        for (size_t j = 0; j < docs->len; j++)
            if (docs->docs[j])
                bson_destroy(docs->docs[j]);
        bson_free(docs->docs);
        *docs = next;
        if (!ok) {
            doclist_destroy(docs);
            return false;
        }
    }
    return true;
}
