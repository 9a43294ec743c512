/* pipeline/join: the stages that read other collections — $lookup (equality,
 * let + pipeline, and both), $unionWith and $graphLookup — one row each in
 * pipeline_join_stages. They read through the run's pipeline_source_t. */
#include "doc/pipeline/pipeline-private.h"

#include <string.h>

#include "doc/expr/expr-private.h"
#include "doc/keystring.h"
#include "doc/path.h"
#include "util/buf.h"
#include "util/fiber.h"
#include "util/omap.h"
#include "util/shellfmt.h"

/* mongod's limits: nested sub-pipelines (MaxSubPipelineDepthExceeded 232),
 * one $lookup's matches (internalLookupStageIntermediateDocumentMaxSizeBytes,
 * 4568), one output document (BSONObjectTooLarge 10334), $graphLookup's
 * visited documents (internalDocumentSourceGraphLookupMaxMemoryBytes). */
#define JOIN_MAX_DEPTH 20
#define JOIN_MAX_MATCH_BYTES (100 * 1024 * 1024)
#define JOIN_MAX_DOC_BYTES (16 * 1024 * 1024 + 16 * 1024)
#define JOIN_MAX_GRAPH_BYTES (100 * 1024 * 1024)

/* A parsed $lookup, $unionWith or $graphLookup. */
typedef struct join_spec {
    char *from; /* the foreign collection; NULL: the pipeline starts with $documents */
    char **as;  /* the output field's components ($lookup, $graphLookup) */
    size_t nas;
    char *local;      /* $lookup localField, or NULL */
    char *foreign;    /* $lookup foreignField, or NULL */
    bson_t *pipeline; /* {pipeline: [...]}: the sub-pipeline to build per run, or NULL */
    bool pipeline_first_documents; /* its first stage is $documents */
    bson_t *lead_match;            /* the filter of its leading $match, or NULL: $lookup reads
                                    * only the foreign documents it matches (mongod's pushdown) */
    letvars_t let;                 /* $lookup let */
    /* -- $graphLookup -- */
    expr_t *start_with;
    char *connect_from, *connect_to;
    char **depth_field; /* components, or NULL */
    size_t ndepth;
    int64_t max_depth;       /* -1: none */
    bson_t *restrict_filter; /* restrictSearchWithMatch, or NULL */
} join_spec_t;

/* A new empty spec for `s` from its argument `it`: an object, or also a
 * string when `string_ok` (else FailedToParse naming `stage`). */
static join_spec_t *join_spec_new(stage_t *s, const bson_iter_t *it, const char *stage,
                                  bool string_ok, dberr_t *err)
{
    if (!BSON_ITER_HOLDS_DOCUMENT(it) && !(string_ok && BSON_ITER_HOLDS_UTF8(it))) {
        dberr_set(err, DBERR_FAILED_TO_PARSE,
                  "the %s stage specification must be an object%s, but found %s", stage,
                  string_ok ? " or string" : "", shellfmt_type_name(bson_iter_type(it)));
        return NULL;
    }
    join_spec_t *j = s->u.join = bson_malloc0(sizeof *j);
    j->max_depth = -1;
    return j;
}

/* Nesting of sub-pipelines being parsed now (parsing never yields). */
static int join_parse_depth;

static void join_spec_free(join_spec_t *j)
{
    if (!j)
        return;
    bson_free(j->from);
    path_free(j->as, j->nas);
    bson_free(j->local);
    bson_free(j->foreign);
    if (j->pipeline)
        bson_destroy(j->pipeline);
    if (j->lead_match)
        bson_destroy(j->lead_match);
    letvars_destroy(&j->let);
    expr_destroy(j->start_with);
    bson_free(j->connect_from);
    bson_free(j->connect_to);
    path_free(j->depth_field, j->ndepth);
    if (j->restrict_filter)
        bson_destroy(j->restrict_filter);
    bson_free(j);
}

static void join_free(stage_t *s)
{
    join_spec_free(s->u.join);
}

/* Checks a field path argument as mongod's FieldPath does. */
static bool join_check_path(const char *p, dberr_t *err)
{
    if (p[0] == '$')
        return dberr_set(err, 16410,
                         "FieldPath field names may not start with '$'. Consider "
                         "using $getField or $setField.");
    char **parts;
    size_t n;
    bool ok = pipeline_split_path(p, &parts, &n), dollar = false;
    for (size_t i = 0; ok && i < n; i++)
        dollar = dollar || parts[i][0] == '$';
    path_free(parts, n);
    if (dollar)
        return dberr_set(err, 16410,
                         "FieldPath field names may not start with '$'. Consider "
                         "using $getField or $setField.");
    if (!ok || n == 0)
        return dberr_set(err, n == 0 ? 40352 : 15998,
                         n == 0 ? "FieldPath cannot be constructed with empty string"
                                : "FieldPath field names may not be empty strings.");
    return true;
}

/* Keeps the sub-pipeline under `it` (an array) as {pipeline: [...]}. */
static bool join_keep_pipeline(join_spec_t *j, const bson_iter_t *it, const char *stage,
                               dberr_t *err)
{
    if (!BSON_ITER_HOLDS_ARRAY(it))
        return dberr_set(err, DBERR_FAILED_TO_PARSE,
                         "%s pipeline must be specified as an array, found %s", stage,
                         shellfmt_type_name(bson_iter_type(it)));
    bson_iter_t arr = *it, el, st;
    j->pipeline = bson_new();
    bson_append_value(j->pipeline, "pipeline", -1, bson_iter_value(&arr));
    if (bson_iter_recurse(&arr, &el) && bson_iter_next(&el) && BSON_ITER_HOLDS_DOCUMENT(&el) &&
        bson_iter_recurse(&el, &st) && bson_iter_next(&st)) {
        j->pipeline_first_documents = strcmp(bson_iter_key(&st), "$documents") == 0;
        if (!strcmp(bson_iter_key(&st), "$match") && BSON_ITER_HOLDS_DOCUMENT(&st)) {
            bson_t m;
            pipeline_borrow_doc(&st, &m);
            j->lead_match = bson_copy(&m);
        }
    }
    return true;
}

/* Builds the sub-pipeline of `j` with variables `vars` (copied; NULL:
 * none). A $out/$merge inside is refused as mongod refuses it. */
static pipeline_t *join_build(const join_spec_t *j, const char *stage, const bson_t *vars,
                              dberr_t *err)
{
    bson_iter_t it;
    bson_iter_init_find(&it, j->pipeline, "pipeline");
    pipeline_t *p = pipeline_build(&it, PIPELINE_AGGREGATE, vars ? bson_copy(vars) : NULL, err);
    const pipeline_output_t *o = pipeline_output(p);
    if (o) {
        dberr_set(err, strcmp(stage, "$lookup") == 0 ? 51047 : 31441,
                  "%s is not allowed within a %s's sub-pipeline", o->is_merge ? "$merge" : "$out",
                  stage);
        pipeline_destroy(p);
        return NULL;
    }
    return p;
}

/* Parses the sub-pipeline once, so its errors come when the aggregate is
 * parsed (as mongod); `names` holds every variable it may read. */
static bool join_validate(const join_spec_t *j, const char *stage, const bson_t *names,
                          dberr_t *err)
{
    if (join_parse_depth >= JOIN_MAX_DEPTH)
        return dberr_set(err, 232, "Maximum number of nested sub-pipelines exceeded. Limit is %d",
                         JOIN_MAX_DEPTH);
    join_parse_depth++;
    pipeline_t *p = join_build(j, stage, names, err);
    join_parse_depth--;
    pipeline_destroy(p);
    return p != NULL;
}

/* ---- reading the foreign collection ---- */

/* Appends the documents of `coll` matching `filter` (with variables
 * `vars`, or none) to `out`, strings compared by the run's collation. */
static bool join_read(const expr_ctx_t *ctx, const char *stage, const char *coll,
                      const bson_t *filter, const bson_t *vars, doclist_t *out, dberr_t *err)
{
    if (!ctx->source)
        return dberr_set(err, DBERR_INTERNAL_ERROR, "%s cannot read collection '%s' here", stage,
                         coll);
    return ctx->source->read(ctx->source->ctx, coll, filter, vars, ctx->coll, out, err);
}

/* Values `path` reaches in `doc`, arrays expanded one level (mongod's
 * visitAllValuesAtPath), appended to array `vals` from index *n. */
typedef struct join_values {
    bson_t *arr;
    uint32_t n;
    bool has_regex;
} join_values_t;

static bool join_value_hit(const path_hit_t *hit, void *ctx)
{
    join_values_t *v = ctx;
    if (hit->value->value_type == BSON_TYPE_EOD || hit->whole_leaf_array)
        return true;
    pipeline_array_append_value(v->arr, v->n++, hit->value);
    v->has_regex = v->has_regex || hit->value->value_type == BSON_TYPE_REGEX;
    return true;
}

/* The foreign filter of one $lookup input document, as mongod builds it:
 * {foreign: {$eq: v}} for one value (a missing one is null), {foreign:
 * {$in: [...]}} for several, {$or: [{foreign: {$eq: v}}, ...]} when one is
 * a regular expression. */
static void join_eq_filter(const join_spec_t *j, const bson_t *doc, bson_t *filter)
{
    bson_t vals = BSON_INITIALIZER, op;
    join_values_t v = {&vals, 0, false};
    path_walk(doc, j->local, true, join_value_hit, &v);
    if (v.n == 0) { /* a missing value joins as null */
        bson_append_null(&vals, "0", 1);
        v.n = 1;
    }
    bson_iter_t it;
    bson_iter_init(&it, &vals);
    if (v.n == 1) {
        bson_iter_next(&it);
        bson_append_document_begin(filter, j->foreign, -1, &op);
        bson_append_value(&op, "$eq", 3, bson_iter_value(&it));
        bson_append_document_end(filter, &op);
    } else if (!v.has_regex) {
        bson_append_document_begin(filter, j->foreign, -1, &op);
        bson_append_array(&op, "$in", 3, &vals);
        bson_append_document_end(filter, &op);
    } else {
        bson_t arr, one, eq;
        char key[16];
        const char *k;
        uint32_t i = 0;
        bson_append_array_begin(filter, "$or", 3, &arr);
        while (bson_iter_next(&it)) {
            bson_uint32_to_string(i++, &k, key, sizeof key);
            bson_append_document_begin(&arr, k, -1, &one);
            bson_append_document_begin(&one, j->foreign, -1, &eq);
            bson_append_value(&eq, "$eq", 3, bson_iter_value(&it));
            bson_append_document_end(&one, &eq);
            bson_append_document_end(&arr, &one);
        }
        bson_append_array_end(filter, &arr);
    }
    bson_destroy(&vals);
}

/* The variables a sub-pipeline sees: the enclosing run's, then the stage's
 * own let evaluated against `doc` (NULL: none). */
static bool join_vars(const join_spec_t *j, const expr_ctx_t *ctx, const bson_t *doc, bson_t *vars,
                      dberr_t *err)
{
    expr_ctx_t local = *ctx;
    local.root = doc;
    bson_iter_t it;
    if (ctx->vars && bson_iter_init(&it, ctx->vars))
        while (bson_iter_next(&it))
            if (!letvars_has(&j->let, bson_iter_key(&it)))
                bson_append_value(vars, bson_iter_key(&it), -1, bson_iter_value(&it));
    return letvars_eval(&j->let, &local, vars, err);
}

/* Appends copies of `from` to `to`; false when the operation was killed
 * or timed out part-way (util/fiber.h). */
static bool join_copy_all(const doclist_t *from, doclist_t *to, dberr_t *err)
{
    for (size_t i = 0; i < from->len; i++) {
        if ((i & 1023) == 1023 && !fiber_check(err))
            return false;
        doclist_push(to, bson_copy(from->docs[i]));
    }
    return true;
}

/* Runs the sub-pipeline of `j` over `docs` with `vars`. */
static bool join_run_pipeline(const join_spec_t *j, const char *stage, const expr_ctx_t *ctx,
                              const bson_t *vars, doclist_t *docs, dberr_t *err)
{
    pipeline_t *p = join_build(j, stage, vars, err);
    if (p && ctx->coll) /* its $match and $sort compare by the run's collation */
        pipeline_set_collation(p, (collation_t *)ctx->coll);
    bool ok = p && pipeline_run_sub(p, ctx, docs, err);
    pipeline_destroy(p);
    return ok;
}

/* Sets `as` of `doc` to the array of `docs` into a new document. */
static bool join_set_as(char *const *as, size_t nas, const bson_t *doc, const doclist_t *docs,
                        const char *coll, bson_t **out, dberr_t *err)
{
    bson_t arr = BSON_INITIALIZER;
    int64_t bytes = 0;
    for (size_t i = 0; i < docs->len; i++) {
        bytes += docs->docs[i]->len;
        if (bytes > JOIN_MAX_MATCH_BYTES) {
            bson_destroy(&arr);
            return dberr_set(err, 4568,
                             "Total size of documents in %s matching pipeline's $lookup stage "
                             "exceeds %d bytes",
                             coll, JOIN_MAX_MATCH_BYTES);
        }
        pipeline_array_append_doc(&arr, (uint32_t)i, docs->docs[i]);
    }
    bson_value_t v = {.value_type = BSON_TYPE_ARRAY};
    v.value.v_doc.data = (uint8_t *)bson_get_data(&arr);
    v.value.v_doc.data_len = arr.len;
    *out = bson_new();
    pipeline_set_path(doc, as, nas, &v, *out);
    bson_destroy(&arr);
    if ((*out)->len > JOIN_MAX_DOC_BYTES) {
        uint32_t len = (*out)->len;
        bson_destroy(*out);
        *out = NULL;
        return dberr_set(err, DBERR_BSON_OBJECT_TOO_LARGE,
                         "BSONObj size: %u (0x%X) is invalid. Size must be between 0 and "
                         "16793600(16MB)",
                         len, len);
    }
    return true;
}

/* ---- $lookup ---- */

static bool lookup_parse(stage_t *s, bson_iter_t *it, const bson_t *let, dberr_t *err)
{
    join_spec_t *j = join_spec_new(s, it, "$lookup", false, err);
    if (!j)
        return false;
    bson_iter_t f, let_it;
    bool has_let = false;
    const char *as = NULL;
    bson_iter_recurse(it, &f);
    while (bson_iter_next(&f)) {
        const char *k = bson_iter_key(&f);
        if (!strcmp(k, "pipeline")) {
            if (!join_keep_pipeline(j, &f, "$lookup", err))
                return false;
            continue;
        }
        if (!strcmp(k, "let")) {
            if (!BSON_ITER_HOLDS_DOCUMENT(&f))
                return dberr_set(err, DBERR_FAILED_TO_PARSE,
                                 "$lookup argument 'let' must be an object, is type %s",
                                 shellfmt_type_name(bson_iter_type(&f)));
            let_it = f;
            has_let = true;
            continue;
        }
        if (!strcmp(k, "from")) {
            if (BSON_ITER_HOLDS_DOCUMENT(&f)) {
                bson_iter_t ns;
                const char *db = "", *coll = "";
                bson_iter_recurse(&f, &ns);
                while (bson_iter_next(&ns))
                    if (BSON_ITER_HOLDS_UTF8(&ns) && !strcmp(bson_iter_key(&ns), "db"))
                        db = bson_iter_utf8(&ns, NULL);
                    else if (BSON_ITER_HOLDS_UTF8(&ns) && !strcmp(bson_iter_key(&ns), "coll"))
                        coll = bson_iter_utf8(&ns, NULL);
                if ((!strcmp(db, "local") && !strcmp(coll, "oplog.rs")) ||
                    (!strcmp(db, "config") && !strncmp(coll, "cache.chunks.", 13)))
                    return dberr_set(err, DBERR_NOT_IMPLEMENTED,
                                     "atomdb does not support $lookup from %s.%s", db, coll);
                return dberr_set(err, DBERR_FAILED_TO_PARSE,
                                 "$lookup with syntax {from: {db:<>, coll:<>},..} is not "
                                 "supported for db: %s and coll: %s",
                                 db, coll);
            }
            if (!BSON_ITER_HOLDS_UTF8(&f))
                return dberr_set(err, DBERR_FAILED_TO_PARSE,
                                 "$lookup 'from' field must be a string, but found %s",
                                 shellfmt_type_name(bson_iter_type(&f)));
            const char *from = bson_iter_utf8(&f, NULL);
            if (!from[0] || strchr(from, '$') || from[0] == '.')
                return dberr_set(err, DBERR_INVALID_NAMESPACE, "invalid $lookup namespace: %s",
                                 from);
            bson_free(j->from);
            j->from = bson_strdup(from);
            continue;
        }
        if (!BSON_ITER_HOLDS_UTF8(&f))
            return dberr_set(err, DBERR_FAILED_TO_PARSE,
                             "$lookup argument '%s' must be a string, found %s", k,
                             shellfmt_type_name(bson_iter_type(&f)));
        const char *v = bson_iter_utf8(&f, NULL);
        if (!strcmp(k, "as")) {
            as = v;
        } else if (!strcmp(k, "localField")) {
            bson_free(j->local);
            j->local = bson_strdup(v);
        } else if (!strcmp(k, "foreignField")) {
            bson_free(j->foreign);
            j->foreign = bson_strdup(v);
        } else {
            return dberr_set(err, DBERR_FAILED_TO_PARSE, "unknown argument to $lookup: %s", k);
        }
    }
    if (!j->from) {
        if (!j->pipeline)
            return dberr_set(err, DBERR_FAILED_TO_PARSE,
                             "must specify 'pipeline' when 'from' is empty");
        if (!j->pipeline_first_documents)
            return dberr_set(err, DBERR_FAILED_TO_PARSE,
                             "$lookup stage without explicit collection must have a pipeline "
                             "with $documents as first stage");
    }
    if (!as || !as[0])
        return dberr_set(err, DBERR_FAILED_TO_PARSE, "must specify 'as' field for a $lookup");
    bool has_local = j->local && j->local[0], has_foreign = j->foreign && j->foreign[0];
    if (j->pipeline && (has_local || has_foreign) && !(has_local && has_foreign))
        return dberr_set(err, DBERR_FAILED_TO_PARSE,
                         "$lookup requires both or neither of 'localField' and 'foreignField' to "
                         "be specified");
    if (!j->pipeline && !(has_local && has_foreign))
        return dberr_set(err, DBERR_FAILED_TO_PARSE,
                         "$lookup requires either 'pipeline' or both 'localField' and "
                         "'foreignField' to be specified");
    if (!j->pipeline && has_let)
        return dberr_set(err, DBERR_FAILED_TO_PARSE,
                         "$lookup with a 'let' argument must also specify 'pipeline'");
    if (!join_check_path(as, err) || (has_local && !join_check_path(j->local, err)) ||
        (has_foreign && !join_check_path(j->foreign, err)))
        return false;
    if (!has_local) {
        bson_free(j->local);
        bson_free(j->foreign);
        j->local = j->foreign = NULL;
    }
    pipeline_split_path(as, &j->as, &j->nas);
    if (has_let) {
        bson_iter_recurse(&let_it, &f);
        while (bson_iter_next(&f)) {
            const char *name = bson_iter_key(&f);
            if (!expr_valid_var_name(name))
                return dberr_set(err, 16867,
                                 "'%s' starts with an invalid character for a user variable "
                                 "name",
                                 name);
            if (!letvars_add(&j->let, name, &f, let, err))
                return false;
        }
    }
    if (!j->pipeline)
        return true;
    /* the sub-pipeline sees the enclosing variables and the stage's own */
    bson_t *names = letvars_scope(&j->let, let);
    bool ok = join_validate(j, "$lookup", names, err);
    bson_destroy(names);
    return ok;
}

/* The sub-pipeline of a collectionless $lookup with localField: its
 * $documents, then the equality as a $match, then the rest (as mongod). */
static void lookup_documents_pipeline(const join_spec_t *j, const bson_t *filter, join_spec_t *tmp)
{
    bson_iter_t it, el;
    bson_t arr;
    char key[16];
    const char *k;
    uint32_t n = 0;
    memset(tmp, 0, sizeof *tmp);
    tmp->pipeline = bson_new();
    bson_append_array_begin(tmp->pipeline, "pipeline", -1, &arr);
    bson_iter_init_find(&it, j->pipeline, "pipeline");
    bson_iter_recurse(&it, &el);
    while (bson_iter_next(&el)) {
        pipeline_array_append_value(&arr, n++, bson_iter_value(&el));
        if (n == 1) {
            bson_t m;
            bson_uint32_to_string(n++, &k, key, sizeof key);
            bson_append_document_begin(&arr, k, -1, &m);
            bson_append_document(&m, "$match", -1, filter);
            bson_append_document_end(&arr, &m);
        }
    }
    bson_append_array_end(tmp->pipeline, &arr);
}

/* The foreign collection of a pipeline-only $lookup that no leading
 * $match narrows, read once per run (unless it is too big to keep). */
typedef struct lookup_cache {
    doclist_t docs;
    bool read;    /* docs holds the collection */
    bool too_big; /* past JOIN_MAX_MATCH_BYTES: read per input document */
} lookup_cache_t;

/* The whole foreign collection into `found`, through the cache. */
static bool lookup_all(const join_spec_t *j, const expr_ctx_t *ctx, lookup_cache_t *cache,
                       doclist_t *found, dberr_t *err)
{
    bson_t empty = BSON_INITIALIZER;
    if (cache->too_big)
        return join_read(ctx, "$lookup", j->from, &empty, NULL, found, err);
    if (!cache->read) {
        if (!join_read(ctx, "$lookup", j->from, &empty, NULL, &cache->docs, err))
            return false;
        cache->read = true;
        int64_t bytes = 0;
        for (size_t i = 0; i < cache->docs.len; i++)
            bytes += cache->docs.docs[i]->len;
        if (bytes > JOIN_MAX_MATCH_BYTES) {
            doclist_destroy(&cache->docs);
            cache->too_big = true;
            return join_read(ctx, "$lookup", j->from, &empty, NULL, found, err);
        }
    }
    return join_copy_all(&cache->docs, found, err);
}

/* The matches of one input document `doc` into `found`. */
static bool lookup_one(const join_spec_t *j, const expr_ctx_t *ctx, const bson_t *doc,
                       lookup_cache_t *cache, doclist_t *found, dberr_t *err)
{
    bson_t filter = BSON_INITIALIZER, vars = BSON_INITIALIZER;
    bool ok = !j->pipeline || join_vars(j, ctx, doc, &vars, err);
    join_spec_t tmp;
    const join_spec_t *run = j;
    tmp.pipeline = NULL;
    if (!ok) {
        /* nothing to read */
    } else if (j->local) {
        join_eq_filter(j, doc, &filter);
        if (j->from) {
            ok = join_read(ctx, "$lookup", j->from, &filter, NULL, found, err);
        } else {
            lookup_documents_pipeline(j, &filter, &tmp);
            run = &tmp;
        }
    } else if (j->from && j->lead_match) {
        ok = join_read(ctx, "$lookup", j->from, j->lead_match, &vars, found, err);
    } else if (j->from) {
        ok = lookup_all(j, ctx, cache, found, err);
    }
    if (ok && j->pipeline)
        ok = join_run_pipeline(run, "$lookup", ctx, &vars, found, err);
    if (tmp.pipeline)
        bson_destroy(tmp.pipeline);
    bson_destroy(&filter);
    bson_destroy(&vars);
    return ok;
}

static bool lookup_run(const stage_t *s, const expr_ctx_t *ctx, doclist_t *in, doclist_t *out,
                       dberr_t *err)
{
    const join_spec_t *j = s->u.join;
    lookup_cache_t cache = {{0}, false, false};
    bool ok = true;
    doclist_init(&cache.docs);
    for (size_t i = 0; ok && i < in->len; i++) {
        if (!(ok = fiber_check(err)))
            break;
        doclist_t found;
        doclist_init(&found);
        bson_t *d = NULL;
        ok = lookup_one(j, ctx, in->docs[i], &cache, &found, err) &&
             join_set_as(j->as, j->nas, in->docs[i], &found, j->from ? j->from : "$documents", &d,
                         err);
        doclist_destroy(&found);
        if (ok)
            doclist_push(out, d);
    }
    doclist_destroy(&cache.docs);
    return ok;
}

/* ---- $unionWith ---- */

static bool union_opt_coll(void *args, const bson_iter_t *it, dberr_t *err)
{
    return pipeline_field_string(it, "$unionWith", "coll", true, &((join_spec_t *)args)->from, err);
}

static bool union_opt_pipeline(void *args, const bson_iter_t *it, dberr_t *err)
{
    join_spec_t *j = args;
    if (!pipeline_field_type_ok(it, BSON_TYPE_ARRAY, "$unionWith", "pipeline", true, err))
        return false;
    if (j->pipeline) {
        bson_destroy(j->pipeline);
        j->pipeline = NULL;
    }
    return join_keep_pipeline(j, it, "$unionWith", err);
}

static const pipeline_option_t union_options[] = {
    {"coll", union_opt_coll},
    {"pipeline", union_opt_pipeline},
    {NULL, NULL},
};

static bool union_parse(stage_t *s, bson_iter_t *it, const bson_t *let, dberr_t *err)
{
    join_spec_t *j = join_spec_new(s, it, "$unionWith", true, err);
    if (!j)
        return false;
    if (BSON_ITER_HOLDS_UTF8(it)) {
        j->from = bson_strdup(bson_iter_utf8(it, NULL));
    } else {
        bson_t spec;
        pipeline_borrow_doc(it, &spec);
        if (!pipeline_options_parse(&spec, union_options, 40415,
                                    "BSON field '$unionWith.%s' is an unknown field.", j, err))
            return false;
        if (!j->from && (!j->pipeline || !j->pipeline_first_documents))
            return dberr_set(err, DBERR_FAILED_TO_PARSE,
                             "$unionWith stage without explicit collection must have a pipeline "
                             "with $documents as first stage");
    }
    if (j->from && (!j->from[0] || strchr(j->from, '$') || j->from[0] == '.'))
        return dberr_set(err, DBERR_INVALID_NAMESPACE, "Invalid $unionWith namespace: %s", j->from);
    return !j->pipeline || join_validate(j, "$unionWith", let, err);
}

static bool union_run(const stage_t *s, const expr_ctx_t *ctx, doclist_t *in, doclist_t *out,
                      dberr_t *err)
{
    const join_spec_t *j = s->u.join;
    pipeline_pass_all(in, out);
    doclist_t docs;
    doclist_init(&docs);
    bson_t empty = BSON_INITIALIZER;
    bool ok = (!j->from || join_read(ctx, "$unionWith", j->from, &empty, NULL, &docs, err)) &&
              (!j->pipeline || join_run_pipeline(j, "$unionWith", ctx, ctx->vars, &docs, err));
    if (ok)
        pipeline_pass_all(&docs, out);
    doclist_destroy(&docs);
    return ok;
}

/* ---- $graphLookup ---- */

static bool graph_parse(stage_t *s, bson_iter_t *it, const bson_t *let, dberr_t *err)
{
    join_spec_t *j = join_spec_new(s, it, "$graphLookup", false, err);
    if (!j)
        return false;
    const char *as = NULL, *depth = NULL;
    bson_iter_t f;
    bson_iter_recurse(it, &f);
    while (bson_iter_next(&f)) {
        const char *k = bson_iter_key(&f);
        if (!strcmp(k, "startWith")) {
            expr_destroy(j->start_with);
            if (!(j->start_with = expr_new(&f, err)) || !expr_check_vars(j->start_with, let, err))
                return false;
            continue;
        }
        if (!strcmp(k, "maxDepth")) {
            if (!BSON_ITER_HOLDS_NUMBER(&f))
                return dberr_set(err, 40100, "maxDepth must be numeric, found type: %s",
                                 shellfmt_type_name(bson_iter_type(&f)));
            double d = bson_iter_as_double(&f);
            if (BSON_ITER_HOLDS_DOUBLE(&f) && !(d > -9.2e18 && d < 9.2e18)) /* NaN, inf too */
                return dberr_set(err, d < 0 ? 40101 : 40102,
                                 d < 0 ? "maxDepth requires a nonnegative argument, found: %g"
                                       : "maxDepth could not be represented as a long long: %g",
                                 d);
            int64_t n = bson_iter_as_int64(&f);
            if (d < 0 || n < 0)
                return dberr_set(err, 40101,
                                 "maxDepth requires a nonnegative argument, found: "
                                 "%lld",
                                 (long long)n);
            if ((double)n != d)
                return dberr_set(err, 40102,
                                 "maxDepth could not be represented as a long long: %lld",
                                 (long long)n);
            j->max_depth = n;
            continue;
        }
        if (!strcmp(k, "restrictSearchWithMatch")) {
            if (!BSON_ITER_HOLDS_DOCUMENT(&f))
                return dberr_set(err, 40185, "restrictSearchWithMatch must be an object, found %s",
                                 shellfmt_type_name(bson_iter_type(&f)));
            bson_t m;
            pipeline_borrow_doc(&f, &m);
            matcher_t *check = matcher_new(&m, err);
            if (!check) {
                char msg[sizeof err->msg];
                snprintf(msg, sizeof msg, "%s", err->msg);
                return dberr_set(err, err->code,
                                 "Failed to parse 'restrictSearchWithMatch' option to "
                                 "$graphLookup :: caused by :: %s",
                                 msg);
            }
            matcher_destroy(check);
            if (j->restrict_filter)
                bson_destroy(j->restrict_filter);
            j->restrict_filter = bson_copy(&m);
            continue;
        }
        bool known = !strcmp(k, "from") || !strcmp(k, "as") || !strcmp(k, "connectFromField") ||
                     !strcmp(k, "connectToField") || !strcmp(k, "depthField");
        if (!known)
            return dberr_set(err, 40104, "Unknown argument to $graphLookup: %s", k);
        if (!strcmp(k, "from") && BSON_ITER_HOLDS_DOCUMENT(&f))
            return dberr_set(err, DBERR_FAILED_TO_PARSE,
                             "$graphLookup with syntax {from: {db:<>, coll:<>},..} is not "
                             "supported");
        if (!BSON_ITER_HOLDS_UTF8(&f))
            return dberr_set(err, 40103, "expected string as argument for %s, found: %s", k,
                             shellfmt_type_name(bson_iter_type(&f)));
        const char *v = bson_iter_utf8(&f, NULL);
        char **slot = !strcmp(k, "from")               ? &j->from
                      : !strcmp(k, "connectFromField") ? &j->connect_from
                      : !strcmp(k, "connectToField")   ? &j->connect_to
                                                       : NULL;
        if (slot) {
            bson_free(*slot);
            *slot = bson_strdup(v);
        } else if (!strcmp(k, "as")) {
            as = v;
        } else {
            depth = v;
        }
    }
    if (!j->from || !j->from[0] || !as || !as[0] || !j->start_with || !j->connect_from ||
        !j->connect_from[0] || !j->connect_to || !j->connect_to[0])
        return dberr_set(err, 40105,
                         "$graphLookup requires 'from', 'as', 'startWith', "
                         "'connectFromField', and 'connectToField' to be specified.");
    if (strchr(j->from, '$') || j->from[0] == '.')
        return dberr_set(err, DBERR_INVALID_NAMESPACE, "invalid $graphLookup namespace: %s",
                         j->from);
    if (!join_check_path(as, err) || !join_check_path(j->connect_from, err) ||
        !join_check_path(j->connect_to, err) || (depth && !join_check_path(depth, err)))
        return false;
    pipeline_split_path(as, &j->as, &j->nas);
    if (depth)
        pipeline_split_path(depth, &j->depth_field, &j->ndepth);
    return true;
}

/* One $graphLookup search: documents found so far by _id, values queried. */
typedef struct graph_state {
    omap_t *visited; /* keystring(_id) → 1 */
    omap_t *queried; /* keystring(value) → 1 */
    doclist_t found; /* in the order found, each with its depth field set */
    int64_t bytes;
} graph_state_t;

/* True the first time `v` is seen in map `m`. */
static bool graph_first(omap_t *m, const bson_value_t *v)
{
    buf_t key;
    buf_init(&key);
    keystring_append(&key, v, false);
    bool first = !omap_get(m, key.data, key.len);
    if (first)
        omap_insert(m, key.data, key.len, (void *)1);
    buf_destroy(&key);
    return first;
}

/* Reads the foreign documents whose connectToField equals `v`, adding the
 * new ones at `depth` and their connectFromField values to `next`. */
static bool graph_step(const join_spec_t *j, const expr_ctx_t *ctx, graph_state_t *g,
                       const bson_value_t *v, int64_t depth, join_values_t *next, dberr_t *err)
{
    bson_t filter = BSON_INITIALIZER, eq, *target = &filter, arr, one;
    if (j->restrict_filter) {
        bson_append_array_begin(&filter, "$and", 4, &arr);
        bson_append_document(&arr, "0", 1, j->restrict_filter);
        bson_append_document_begin(&arr, "1", 1, &one);
        target = &one;
    }
    bson_append_document_begin(target, j->connect_to, -1, &eq);
    bson_append_value(&eq, "$eq", 3, v);
    bson_append_document_end(target, &eq);
    if (j->restrict_filter) {
        bson_append_document_end(&arr, &one);
        bson_append_array_end(&filter, &arr);
    }
    doclist_t docs;
    doclist_init(&docs);
    bool ok = join_read(ctx, "$graphLookup", j->from, &filter, NULL, &docs, err);
    bson_destroy(&filter);
    for (size_t i = 0; ok && i < docs.len; i++) {
        bson_iter_t id;
        bson_t *d = docs.docs[i];
        if (bson_iter_init_find(&id, d, "_id") && !graph_first(g->visited, bson_iter_value(&id)))
            continue;
        path_walk(d, j->connect_from, true, join_value_hit, next);
        if (j->depth_field) {
            bson_value_t dv = {.value_type = BSON_TYPE_INT64};
            dv.value.v_int64 = depth;
            bson_t *with = bson_new();
            pipeline_set_path(d, j->depth_field, j->ndepth, &dv, with);
            bson_destroy(d);
            d = with;
        }
        docs.docs[i] = NULL;
        g->bytes += d->len;
        doclist_push(&g->found, d);
        if (g->bytes > JOIN_MAX_GRAPH_BYTES)
            ok = dberr_set(err, DBERR_EXCEEDED_MEMORY_LIMIT,
                           "$graphLookup reached maximum memory consumption");
    }
    doclist_destroy(&docs);
    return ok;
}

/* The documents reachable from one input document into g->found. */
static bool graph_search(const join_spec_t *j, const expr_ctx_t *ctx, const bson_t *doc,
                         graph_state_t *g, dberr_t *err)
{
    expr_ctx_t local = *ctx;
    local.root = doc;
    bson_value_t start;
    if (!expr_eval(j->start_with, &local, &start, err))
        return false;
    bson_t *frontier = bson_new();
    join_values_t fv = {frontier, 0, false};
    if (start.value_type == BSON_TYPE_ARRAY) {
        bson_t a;
        bson_iter_t el;
        if (bson_init_static(&a, start.value.v_doc.data, start.value.v_doc.data_len) &&
            bson_iter_init(&el, &a))
            while (bson_iter_next(&el)) {
                path_hit_t hit = {bson_iter_value(&el), -1, false};
                join_value_hit(&hit, &fv);
            }
    } else if (start.value_type != BSON_TYPE_EOD) {
        path_hit_t hit = {&start, -1, false};
        join_value_hit(&hit, &fv);
    }
    bson_value_destroy(&start);
    bool ok = true;
    for (int64_t depth = 0; ok && fv.n > 0 && (j->max_depth < 0 || depth <= j->max_depth);
         depth++) {
        bson_t *next = bson_new();
        join_values_t nv = {next, 0, false};
        bson_iter_t it;
        bson_iter_init(&it, frontier);
        while (ok && bson_iter_next(&it)) {
            if (!(ok = fiber_check(err)))
                break;
            if (graph_first(g->queried, bson_iter_value(&it)))
                ok = graph_step(j, ctx, g, bson_iter_value(&it), depth, &nv, err);
        }
        bson_destroy(frontier);
        frontier = next;
        fv = nv;
    }
    bson_destroy(frontier);
    return ok;
}

static bool graph_run(const stage_t *s, const expr_ctx_t *ctx, doclist_t *in, doclist_t *out,
                      dberr_t *err)
{
    const join_spec_t *j = s->u.join;
    bool ok = true;
    for (size_t i = 0; ok && i < in->len; i++) {
        if (!(ok = fiber_check(err)))
            break;
        graph_state_t g = {omap_new(), omap_new(), {0}, 0};
        doclist_init(&g.found);
        bson_t *d = NULL;
        ok = graph_search(j, ctx, in->docs[i], &g, err) &&
             join_set_as(j->as, j->nas, in->docs[i], &g.found, j->from, &d, err);
        if (ok)
            doclist_push(out, d);
        doclist_destroy(&g.found);
        omap_destroy(g.visited, NULL);
        omap_destroy(g.queried, NULL);
    }
    return ok;
}

const stage_def_t pipeline_join_stages[] = {
    {"$lookup", lookup_parse, lookup_run, NULL, join_free, STAGE_READS},
    {"$unionWith", union_parse, union_run, NULL, join_free, STAGE_READS},
    {"$graphLookup", graph_parse, graph_run, NULL, join_free, STAGE_READS},
    {NULL, NULL, NULL, NULL, NULL, 0},
};
