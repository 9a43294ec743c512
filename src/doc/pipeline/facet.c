/* pipeline/facet: the $facet stage — several named sub-pipelines run over
 * the same input documents, their outputs gathered as arrays into the one
 * document the stage emits. */
#include "doc/pipeline/pipeline-private.h"

#include <string.h>

#include "util/fiber.h"
#include "util/shellfmt.h"

/* The largest document $facet may build: what a document can hold. mongod
 * builds up to internalQueryFacetMaxOutputDocSizeBytes (100 MB) in memory
 * but cannot return more than 16 MB either; atomdb keeps every value within
 * 16 MB, so it stops here with mongod's code and wording. */
#define FACET_MAX_OUTPUT_BYTES (16 * 1024 * 1024)

/* A parsed $facet: one sub-pipeline per output field, in spec order. */
struct facet_spec {
    size_t n;
    struct facet_out {
        char *name;       /* the output field */
        pipeline_t *pipe; /* its sub-pipeline */
    } outs[];             /* n of them, one allocation with the spec */
};

/* The stages mongod refuses inside $facet (FacetRequirement::kNotAllowed). */
static const char *const facet_forbidden[] = {
    "$collStats",
    "$facet",
    "$geoNear",
    "$indexStats",
    "$out",
    "$merge",
    "$planCacheStats",
    "$search",
    "$searchMeta",
    "$vectorSearch",
    "$changeStream",
    "$changeStreamSplitLargeEvent",
    "$documents",
    "$currentOp",
    "$listLocalSessions",
    "$listSessions",
    "$listSearchIndexes",
    "$shardedDataDistribution",
    NULL,
};

/* A facet name as mongod's FieldPath::validateFieldName checks it. */
static bool facet_check_name(const char *name, dberr_t *err)
{
    static const char ctx[] = "$facet pipeline names must follow the naming rules of field path "
                              "expressions. :: caused by :: ";
    if (!*name)
        return dberr_set(err, 15998, "%sFieldPath field names may not be empty strings.", ctx);
    if (name[0] == '$')
        return dberr_set(err, 16410,
                         "%sFieldPath field names may not start with '$'. Consider using "
                         "$getField or $setField.",
                         ctx);
    if (strchr(name, '.'))
        return dberr_set(err, 16412, "%sFieldPath field names may not contain '.'.", ctx);
    return true;
}

/* Checks that the elements of the facet array under `it` are documents
 * (40171). */
static bool facet_check_elements(const char *name, const bson_iter_t *it, dberr_t *err)
{
    bson_iter_t el;
    bson_iter_recurse(it, &el);
    while (bson_iter_next(&el)) {
        if (!BSON_ITER_HOLDS_DOCUMENT(&el)) {
            char *v = shellfmt_value(bson_iter_value(&el));
            dberr_set(err, 40171,
                      "elements of arrays in $facet spec must be non-empty objects, %s argument "
                      "contained an element of type %s: %s",
                      name, shellfmt_type_name(bson_iter_type(&el)), v);
            bson_free(v);
            return false;
        }
    }
    return true;
}

/* Checks that the facet array under `it` holds no stage $facet refuses
 * (40600). */
static bool facet_check_stages(const bson_iter_t *it, dberr_t *err)
{
    bson_iter_t el;
    bson_iter_recurse(it, &el);
    while (bson_iter_next(&el)) {
        bson_t st;
        bson_iter_t f;
        pipeline_borrow_doc(&el, &st);
        if (!bson_iter_init(&f, &st) || !bson_iter_next(&f))
            continue; /* an empty stage fails as in any pipeline (40323) */
        for (int i = 0; facet_forbidden[i]; i++)
            if (!strcmp(bson_iter_key(&f), facet_forbidden[i]))
                return dberr_set(err, 40600, "%s is not allowed to be used within a $facet stage",
                                 facet_forbidden[i]);
    }
    return true;
}

static bool facet_parse(stage_t *s, bson_iter_t *arg, const bson_t *let, dberr_t *err)
{
    bson_iter_t it;
    bson_t spec;
    if (BSON_ITER_HOLDS_DOCUMENT(arg))
        pipeline_borrow_doc(arg, &spec);
    if (!BSON_ITER_HOLDS_DOCUMENT(arg) || bson_empty(&spec)) {
        char *v = shellfmt_value(bson_iter_value(arg));
        dberr_set(err, 40169, "the $facet specification must be a non-empty object, but found: %s",
                  v);
        bson_free(v);
        return false;
    }
    size_t n = bson_count_keys(&spec);
    struct facet_spec *f = s->u.facet = bson_malloc0(sizeof *f + n * sizeof f->outs[0]);
    /* every facet's shape first, then the pipelines, as mongod */
    bson_iter_init(&it, &spec);
    while (bson_iter_next(&it)) {
        const char *name = bson_iter_key(&it);
        if (!facet_check_name(name, err))
            return false;
        if (!BSON_ITER_HOLDS_ARRAY(&it))
            return dberr_set(err, 40170, "arguments to $facet must be arrays, %s is type %s", name,
                             shellfmt_type_name(bson_iter_type(&it)));
        if (!facet_check_elements(name, &it, err))
            return false;
    }
    bson_iter_init(&it, &spec);
    while (bson_iter_next(&it)) {
        if (!facet_check_stages(&it, err))
            return false;
        struct facet_out *o = &f->outs[f->n++];
        o->name = bson_strdup(bson_iter_key(&it));
        o->pipe = pipeline_build(&it, PIPELINE_AGGREGATE, let ? bson_copy(let) : NULL, err);
        if (!o->pipe)
            return false;
    }
    return true;
}

static void facet_free(stage_t *s)
{
    struct facet_spec *f = s->u.facet;
    if (!f)
        return;
    for (size_t i = 0; i < f->n; i++) {
        bson_free(f->outs[i].name);
        pipeline_destroy(f->outs[i].pipe);
    }
    bson_free(f);
}

/* Appends the documents of `docs` as array `name` of `out`, within the
 * output limit. */
static bool facet_append(bson_t *out, const char *name, const doclist_t *docs, dberr_t *err)
{
    bson_t arr;
    bson_append_array_begin(out, name, -1, &arr);
    for (size_t i = 0; i < docs->len; i++) {
        size_t used = (size_t)out->len + arr.len + docs->docs[i]->len;
        if (used > FACET_MAX_OUTPUT_BYTES) {
            bson_append_array_end(out, &arr);
            return dberr_set(err, 4031700,
                             "document constructed by $facet is %zu bytes, which exceeds the "
                             "limit of %d bytes",
                             used, FACET_MAX_OUTPUT_BYTES);
        }
        pipeline_array_append_doc(&arr, (uint32_t)i, docs->docs[i]);
    }
    bson_append_array_end(out, &arr);
    return true;
}

static bool facet_run(const stage_t *s, const expr_ctx_t *ctx, doclist_t *in, doclist_t *out,
                      dberr_t *err)
{
    const struct facet_spec *f = s->u.facet;
    bson_t *res = bson_new();
    bool ok = true;
    for (size_t i = 0; ok && i < f->n; i++) {
        /* each facet gets its own copy of the input; the last takes the
         * originals, so at most one copy is alive at a time */
        bool last = i + 1 == f->n;
        doclist_t docs;
        doclist_init(&docs);
        for (size_t j = 0; ok && j < in->len; j++) {
            if ((j & 1023) == 1023)
                ok = fiber_check(err);
            if (last) {
                doclist_push(&docs, in->docs[j]);
                in->docs[j] = NULL;
            } else {
                doclist_push(&docs, bson_copy(in->docs[j]));
            }
        }
        ok = ok && pipeline_run_nested(f->outs[i].pipe, ctx, &docs, err) &&
             facet_append(res, f->outs[i].name, &docs, err);
        doclist_destroy(&docs);
    }
    if (ok)
        doclist_push(out, res);
    else
        bson_destroy(res);
    return ok;
}

const stage_def_t pipeline_facet_stages[] = {
    {"$facet", facet_parse, facet_run, NULL, facet_free, 0},
    {NULL, NULL, NULL, NULL, NULL, 0},
};
