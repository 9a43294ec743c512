/* pipeline/filter: the stages that choose, order or count documents —
 * $match $sort $skip $limit $count — one row each in pipeline_filter_stages. */
#include "doc/pipeline/pipeline-private.h"
#include "doc/fts.h"
#include "util/fiber.h"
#include "util/msort.h"

#include <string.h>

#include "doc/num.h"

/* ---- $match ---- */

static bool match_parse(stage_t *s, bson_iter_t *it, const bson_t *let, dberr_t *err)
{
    bson_t f;
    if (!BSON_ITER_HOLDS_DOCUMENT(it))
        return dberr_set(err, 15959, "the match filter must be an expression in an object");
    pipeline_borrow_doc(it, &f);
    s->u.match.filter = bson_copy(&f);
    s->u.match.matcher = matcher_new(&f, err);
    return s->u.match.matcher != NULL;
}

/* A $match gets the let values; its $expr variables are checked then. */
static bool match_check_vars(stage_t *s, const bson_t *let, dberr_t *err)
{
    if (let)
        matcher_set_vars(s->u.match.matcher, let);
    return !matcher_take_error(s->u.match.matcher, err);
}

static bool match_run(const stage_t *s, const expr_ctx_t *ctx, doclist_t *in, doclist_t *out,
                      dberr_t *err)
{
    const fts_query_t *text = matcher_text(s->u.match.matcher);
    if (text && in->len && !fts_query_spec(text)) /* not bound to a text index */
        return dberr_set(err, 17313,
                         "$match with $text is only allowed as the first pipeline stage");
    for (size_t i = 0; i < in->len; i++) {
        if (!fiber_check(err))
            return false;
        if (matcher_matches(s->u.match.matcher, in->docs[i], NULL)) {
            doclist_push(out, in->docs[i]);
            in->docs[i] = NULL;
        }
    }
    return !matcher_take_error(s->u.match.matcher, err);
}

static void match_free(stage_t *s)
{
    matcher_destroy(s->u.match.matcher);
    if (s->u.match.filter)
        bson_destroy(s->u.match.filter);
}

/* ---- $sort: a stable merge sort ---- */

static bool sort_parse(stage_t *s, bson_iter_t *it, const bson_t *let, dberr_t *err)
{
    bson_t f;
    if (!BSON_ITER_HOLDS_DOCUMENT(it))
        return dberr_set(err, 15973, "the $sort key specification must be an object");
    pipeline_borrow_doc(it, &f);
    if (bson_empty(&f))
        return dberr_set(err, 15976, "$sort stage must have at least one sort key");
    s->u.sort = sortspec_new(&f, err);
    return s->u.sort != NULL;
}

/* msort order of documents (bson_t *) by the sortspec `ctx`. */
static int doc_cmp(const void *a, const void *b, void *ctx)
{
    return sortspec_compare(ctx, *(bson_t *const *)a, *(bson_t *const *)b);
}

static bool sort_run(const stage_t *s, const expr_ctx_t *ctx, doclist_t *in, doclist_t *out,
                     dberr_t *err)
{
    /* a blocking stage: bounded as mongod's (pipeline_limits) */
    int64_t bytes = 0;
    for (size_t i = 0; i < in->len; i++)
        bytes += (int64_t)in->docs[i]->len + (int64_t)sizeof(bson_t);
    if (bytes > pipeline_limits.sort_bytes)
        return dberr_set(err, DBERR_QUERY_EXCEEDED_MEMORY_NO_DISK,
                         ctx->allow_disk_use
                             ? "Sort exceeded memory limit of %lld bytes, and atomdb cannot sort "
                               "externally: allowDiskUse is not implemented (raise "
                               "internalQueryMaxBlockingSortMemoryUsageBytes)"
                             : "Sort exceeded memory limit of %lld bytes, but did not opt in to "
                               "external sorting.",
                         (long long)pipeline_limits.sort_bytes);
    bool ok = msort(in->docs, in->len, sizeof *in->docs, doc_cmp, s->u.sort, err);
    pipeline_pass_all(in, out);
    return ok;
}

static void sort_free(stage_t *s)
{
    sortspec_destroy(s->u.sort);
}

/* ---- $skip, $limit ---- */

static bool skip_parse(stage_t *s, bson_iter_t *it, const bson_t *let, dberr_t *err)
{
    if (!num_to_int64_whole(bson_iter_value(it), &s->u.n))
        return dberr_set(err, 15972, "Argument to $skip must be a number");
    if (s->u.n < 0)
        return dberr_set(err, 15956, "Argument to $skip cannot be negative");
    return true;
}

static bool limit_parse(stage_t *s, bson_iter_t *it, const bson_t *let, dberr_t *err)
{
    if (!num_to_int64_whole(bson_iter_value(it), &s->u.n))
        return dberr_set(err, 15957, "the limit must be specified as a number");
    if (s->u.n <= 0)
        return dberr_set(err, 15958, "the limit must be positive");
    return true;
}

/* Keeps the documents at positions [from, to). */
static void keep_range(doclist_t *in, doclist_t *out, int64_t from, int64_t to)
{
    for (size_t i = 0; i < in->len; i++) {
        if ((int64_t)i >= from && (int64_t)i < to) {
            doclist_push(out, in->docs[i]);
            in->docs[i] = NULL;
        }
    }
}

static bool skip_run(const stage_t *s, const expr_ctx_t *ctx, doclist_t *in, doclist_t *out,
                     dberr_t *err)
{
    keep_range(in, out, s->u.n, INT64_MAX);
    return true;
}

static bool limit_run(const stage_t *s, const expr_ctx_t *ctx, doclist_t *in, doclist_t *out,
                      dberr_t *err)
{
    keep_range(in, out, 0, s->u.n);
    return true;
}

/* ---- $count ---- */

static bool count_parse(stage_t *s, bson_iter_t *it, const bson_t *let, dberr_t *err)
{
    if (!BSON_ITER_HOLDS_UTF8(it) || bson_iter_utf8(it, NULL)[0] == '\0')
        return dberr_set(err, 40156, "the count field must be a non-empty string");
    const char *f = bson_iter_utf8(it, NULL);
    if (f[0] == '$')
        return dberr_set(err, 40158, "the count field cannot be a $-prefixed path");
    if (strchr(f, '.'))
        return dberr_set(err, 40160, "the count field cannot contain '.'");
    s->u.count_field = bson_strdup(f);
    return true;
}

static void count_free(stage_t *s)
{
    bson_free(s->u.count_field);
}

static bool count_run(const stage_t *s, const expr_ctx_t *ctx, doclist_t *in, doclist_t *out,
                      dberr_t *err)
{
    if (in->len > 0) {
        bson_t *d = bson_new();
        if (in->len <= INT32_MAX)
            bson_append_int32(d, s->u.count_field, -1, (int32_t)in->len);
        else
            bson_append_int64(d, s->u.count_field, -1, (int64_t)in->len);
        doclist_push(out, d);
    }
    return true;
}

const stage_def_t pipeline_filter_stages[] = {
    {"$match", match_parse, match_run, match_check_vars, match_free, STAGE_MATCH | STAGE_STREAM},
    {"$sort", sort_parse, sort_run, NULL, sort_free, 0},
    {"$skip", skip_parse, skip_run, NULL, NULL, STAGE_STREAM},
    {"$limit", limit_parse, limit_run, NULL, NULL, STAGE_STREAM},
    {"$count", count_parse, count_run, NULL, count_free, STAGE_STREAM},
    {NULL, NULL, NULL, NULL, NULL, 0},
};
