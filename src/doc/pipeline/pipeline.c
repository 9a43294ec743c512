/* pipeline: aggregation pipelines over an in-memory list of documents — each
 * stage is parsed once by its row in a stage table and run as a
 * transformation from one doclist to the next. A terminal $out/$merge is
 * parsed for the caller to perform. Also runs pipeline-style updates. */
#include "doc/pipeline/pipeline-private.h"

#include <string.h>
#include <sys/time.h>

#include "doc/fts.h"
#include "doc/collation.h"
#include "doc/path.h"
#include "util/bsonview.h"
#include "util/fiber.h"
#include "util/shellfmt.h"
#include "util/table.h"
#include "util/vec.h"

/* ---------------------------------------------------------------- doclist */

void doclist_init(doclist_t *l)
{
    l->docs = NULL;
    l->len = l->cap = 0;
}

void doclist_push(doclist_t *l, bson_t *doc)
{
    VEC_RESERVE_ONE(l->docs, l->len, l->cap, 16);
    l->docs[l->len++] = doc;
}

void doclist_destroy(doclist_t *l)
{
    if (!l)
        return;
    for (size_t i = 0; i < l->len; i++) {
        if ((i & 1023) == 1023)
            fiber_tick(); /* a large list is freed in slices too */
        bson_destroy(l->docs[i]);
    }
    bson_free(l->docs);
    doclist_init(l);
}

/* ---------------------------------------------------------------- helpers */

void pipeline_borrow_doc(const bson_iter_t *it, bson_t *out)
{
    if (!BSON_ITER_HOLDS_DOCUMENT(it) || !bsonview_iter(it, out))
        bson_init(out);
}

bool pipeline_field_type_ok(const bson_iter_t *it, bson_type_t type, const char *stage,
                            const char *field, bool say_found, dberr_t *err)
{
    char found[32] = "";
    if (bson_iter_type(it) == type)
        return true;
    if (say_found)
        bson_snprintf(found, sizeof found, " '%s'", shellfmt_type_name(bson_iter_type(it)));
    return dberr_set(err, DBERR_TYPE_MISMATCH,
                     "BSON field '%s.%s' is the wrong type%s, expected type '%s'", stage, field,
                     found, shellfmt_type_name(type));
}

void pipeline_array_append_value(bson_t *arr, uint32_t i, const bson_value_t *v)
{
    char buf[16];
    const char *key;
    bson_uint32_to_string(i, &key, buf, sizeof buf);
    bson_append_value(arr, key, -1, v);
}

void pipeline_array_append_doc(bson_t *arr, uint32_t i, const bson_t *doc)
{
    char buf[16];
    const char *key;
    bson_uint32_to_string(i, &key, buf, sizeof buf);
    bson_append_document(arr, key, -1, doc);
}

bool pipeline_field_string(const bson_iter_t *it, const char *stage, const char *field,
                           bool say_found, char **dst, dberr_t *err)
{
    if (!pipeline_field_type_ok(it, BSON_TYPE_UTF8, stage, field, say_found, err))
        return false;
    bson_free(*dst);
    *dst = bson_strdup(bson_iter_utf8(it, NULL));
    return true;
}

int pipeline_fields_pick(const bson_iter_t *obj, const char *const *names, size_t n,
                         bson_iter_t *const *found)
{
    bson_iter_t it;
    int nfields = 0;
    for (size_t i = 0; i < n; i++)
        memset(found[i], 0, sizeof *found[i]);
    if (!bson_iter_recurse(obj, &it))
        return 0;
    while (bson_iter_next(&it)) {
        nfields++;
        for (size_t i = 0; i < n; i++)
            if (!strcmp(bson_iter_key(&it), names[i]))
                *found[i] = it;
    }
    return nfields;
}

bool pipeline_options_parse(const bson_t *obj, const pipeline_option_t *rows, int unknown_code,
                            const char *unknown_fmt, void *args, dberr_t *err)
{
    bson_iter_t it;
    if (!bson_iter_init(&it, obj))
        return true;
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        const pipeline_option_t *row = rows;
        while (row->name && strcmp(row->name, k) != 0)
            row++;
        if (!row->name)
            return dberr_set(err, unknown_code, unknown_fmt, k);
        if (!row->parse(args, &it, err))
            return false;
    }
    return true;
}

bool pipeline_split_path(const char *s, char ***out, size_t *n)
{
    *out = path_split(s, n);
    for (size_t i = 0; i < *n; i++)
        if ((*out)[i][0] == '\0')
            return false;
    return true;
}

void pipeline_pass_all(doclist_t *in, doclist_t *out)
{
    for (size_t i = 0; i < in->len; i++) {
        doclist_push(out, in->docs[i]);
        in->docs[i] = NULL;
    }
}

int64_t pipeline_now_ms(void)
{
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (int64_t)tv.tv_sec * 1000 + tv.tv_usec / 1000;
}

/* ----------------------------------------------------------------- stages */

struct pipeline {
    stage_t *stages;
    size_t n;
    bson_t *let; /* user variables, already evaluated, or NULL */
    bool allow_disk_use;
    const pipeline_source_t *source; /* borrowed, or NULL */
    collation_t *coll; /* owned reference; NULL: the simple collation */
};

pipeline_limits_t pipeline_limits = {100 * 1024 * 1024, 100 * 1024 * 1024, 100 * 1024 * 1024,
                                     100 * 1024 * 1024, 100 * 1024 * 1024, 500000};

void pipeline_set_allow_disk_use(pipeline_t *p, bool allow)
{
    p->allow_disk_use = allow;
}

void pipeline_set_collation(pipeline_t *p, collation_t *coll)
{
    collation_t *old = p->coll;
    p->coll = collation_ref(coll);
    collation_destroy(old);
    for (size_t i = 0; i < p->n; i++) {
        stage_t *s = &p->stages[i];
        if (!strcmp(s->def->name, "$match"))
            matcher_set_collation(s->u.match.matcher, p->coll);
        else if (!strcmp(s->def->name, "$sort"))
            sortspec_set_collation(s->u.sort, p->coll);
        else if (!strcmp(s->def->name, "$group"))
            pipeline_group_set_collation(s->u.group, p->coll);
    }
}

/* Every stage family; a stage is one row in its family's table. */
static const stage_def_t *const stage_families[] = {
    pipeline_filter_stages,
    pipeline_shape_stages,
    pipeline_group_stages,
    pipeline_output_stages,
    pipeline_facet_stages,
    pipeline_bucket_stages,
    pipeline_sample_stages,
    pipeline_redact_stages,
    pipeline_window_stages,
    pipeline_densify_stages,
    pipeline_join_stages,
    pipeline_geonear_stages,
};

static const stage_def_t *find_stage(const char *name)
{
    return table_find((const void *const *)stage_families,
                      sizeof stage_families / sizeof stage_families[0], sizeof(stage_def_t), name);
}

/* Stages atomdb knows of but does not run. */
static const char *const unsupported[] = {
    "$collStats",
    "$indexStats",
    "$currentOp",
    "$listSessions",
    "$listLocalSessions",
    "$changeStream",
    "$search",
    "$searchMeta",
    "$planCacheStats",
    "$listSearchIndexes",
    "$shardedDataDistribution",
    NULL,
};

static void stage_free(stage_t *s)
{
    if (s->def && s->def->free)
        s->def->free(s);
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
    collation_destroy(p->coll);
    bson_free(p);
}

/* Parses one stage document `doc` into `s`; `let` holds the pipeline's
 * evaluated variables (NULL: none). */
static bool parse_stage(stage_t *s, const bson_t *doc, pipeline_mode_t mode, const bson_t *let,
                        dberr_t *err)
{
    bson_iter_t it;
    if (bson_count_keys(doc) != 1 || !bson_iter_init(&it, doc) || !bson_iter_next(&it))
        return dberr_set(err, 40323,
                         "A pipeline stage specification object must contain exactly one field.");
    const char *name = bson_iter_key(&it);
    const stage_def_t *def = find_stage(name);
    if (!def) {
        for (int i = 0; unsupported[i]; i++)
            if (strcmp(unsupported[i], name) == 0)
                return dberr_set(err, DBERR_NOT_IMPLEMENTED,
                                 "atomdb does not support the %s aggregation stage yet", name);
        return dberr_set(err, 40324, "Unrecognized pipeline stage name: '%s'", name);
    }
    if (mode == PIPELINE_UPDATE && !(def->flags & STAGE_IN_UPDATE))
        return dberr_set(err, DBERR_INVALID_OPTIONS,
                         "%s is not allowed to be used within an update", name);
    s->def = def;
    s->name = def->name;
    return def->parse(s, &it, let, err) && (!def->check_vars || def->check_vars(s, let, err));
}

pipeline_t *pipeline_new(const bson_iter_t *stages, pipeline_mode_t mode, const bson_t *let,
                         dberr_t *err)
{
    bson_t *vars = NULL;
    dberr_clear(err);
    if (let) {
        vars = bson_new();
        if (!expr_eval_let(let, pipeline_now_ms(), vars, err)) {
            bson_destroy(vars);
            return NULL;
        }
    }
    return pipeline_build(stages, mode, vars, err);
}

/* $text and {$meta: "textScore"}: $text only in a leading $match (17313);
 * each textScore use gets that query (none: 40218). atomdb computes the
 * score from the document, so a use after a stage that reshapes documents
 * is refused rather than answered wrong. */
static bool pipeline_link_text(pipeline_t *p, dberr_t *err)
{
    fts_query_t *q = pipeline_text(p);
    matcher_t *m = q ? p->stages[0].u.match.matcher : NULL;
    bool reshaped = false;
    for (size_t i = 0; i < p->n; i++) {
        stage_t *s = &p->stages[i];
        bool is_sort = !strcmp(s->name, "$sort");
        bool is_proj = !strcmp(s->name, "$project") || !strcmp(s->name, "$addFields") ||
                       !strcmp(s->name, "$set");
        if (i > 0 && (s->def->flags & STAGE_MATCH) && matcher_text(s->u.match.matcher))
            return dberr_set(err, 17313,
                             "$match with $text is only allowed as the first pipeline stage");
        bool uses = (is_sort && sortspec_uses_text_score(s->u.sort)) ||
                    (is_proj && projection_uses_text_score(s->u.proj));
        if (uses && !q)
            return dberr_set(err, 40218,
                             "query requires text score metadata, but it is not available");
        if (uses && reshaped)
            return dberr_set(err, DBERR_NOT_IMPLEMENTED,
                             "atomdb computes textScore from the matched document: "
                             "{$meta: \"textScore\"} in %s must come before any stage that "
                             "reshapes documents",
                             s->name);
        if (uses && is_sort)
            sortspec_set_text(s->u.sort, m);
        else if (uses)
            projection_set_text(s->u.proj, m);
        if (!(s->def->flags & STAGE_MATCH) && !is_sort && strcmp(s->name, "$skip") &&
            strcmp(s->name, "$limit"))
            reshaped = true;
    }
    return true;
}

fts_query_t *pipeline_text(const pipeline_t *p)
{
    if (!p || p->n == 0 || !(p->stages[0].def->flags & STAGE_MATCH))
        return NULL;
    return matcher_text(p->stages[0].u.match.matcher);
}

pipeline_t *pipeline_build(const bson_iter_t *stages, pipeline_mode_t mode, bson_t *let,
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
            dberr_set(err, DBERR_TYPE_MISMATCH,
                      "Each element of the 'pipeline' array must be an object");
            goto fail;
        }
        pipeline_borrow_doc(&it, &doc);
        if (p->n > 0 && (p->stages[p->n - 1].def->flags & STAGE_LAST)) {
            dberr_set(err, 40601, "%s can only be the final stage in the pipeline",
                      p->stages[p->n - 1].name);
            goto fail;
        }
        p->stages = bson_realloc(p->stages, (p->n + 1) * sizeof *p->stages);
        memset(&p->stages[p->n], 0, sizeof p->stages[p->n]);
        p->n++;
        stage_t *s = &p->stages[p->n - 1];
        if (!parse_stage(s, &doc, mode, p->let, err))
            goto fail;
        if ((s->def->flags & (STAGE_FIRST | STAGE_LEADS)) && p->n > 1) {
            dberr_set(err, 40602, "%s is only valid as the first stage in a pipeline", s->name);
            goto fail;
        }
    }
    if (!pipeline_link_text(p, err))
        goto fail;
    return p;
fail:
    pipeline_destroy(p);
    return NULL;
}

const pipeline_output_t *pipeline_output(const pipeline_t *p)
{
    if (!p || p->n == 0 || !(p->stages[p->n - 1].def->flags & STAGE_LAST))
        return NULL;
    return &p->stages[p->n - 1].u.output->pub;
}

void pipeline_set_source(pipeline_t *p, const pipeline_source_t *src)
{
    p->source = src;
}

bool pipeline_reads_others(const pipeline_t *p)
{
    for (size_t i = 0; p && i < p->n; i++)
        if (p->stages[i].def->flags & STAGE_READS)
            return true;
    return false;
}

bool pipeline_stage_reads(const pipeline_t *p, size_t i)
{
    return p && i < p->n && (p->stages[i].def->flags & STAGE_READS);
}

bool pipeline_is_collectionless(const pipeline_t *p)
{
    return p && p->n > 0 && (p->stages[0].def->flags & STAGE_FIRST);
}

geonear_spec_t *pipeline_leading_geonear(const pipeline_t *p)
{
    if (!p || p->n == 0 || !(p->stages[0].def->flags & STAGE_LEADS))
        return NULL;
    return p->stages[0].u.geonear;
}

const bson_t *pipeline_leading_match(const pipeline_t *p)
{
    if (!p || p->n == 0 || !(p->stages[0].def->flags & STAGE_MATCH))
        return NULL;
    return p->stages[0].u.match.filter;
}

/* ------------------------------------------------------------------ run */

/* Streaming: a run of two or more stages that look at one document at a
 * time ($match, $project, $unwind..., with $skip, $limit and $count) is run
 * document by document, so nothing between them is materialized — a
 * $range/$unwind that makes millions of documents only to $count them
 * holds one input document's worth at a time. */
typedef struct stream {
    const pipeline_t *p;
    const expr_ctx_t *ctx;
    size_t end;     /* the run is [first, end) */
    int64_t *seen;  /* per stage: documents passed ($skip, $limit) or counted ($count) */
    doclist_t *out; /* what leaves the run */
    size_t steps;
} stream_t;

/* Sends doc (owned: always consumed) through stages i.. of the run. */
static bool stream_push(stream_t *st, size_t i, bson_t *doc, dberr_t *err)
{
    if ((++st->steps & 255) == 0 && !fiber_check(err)) {
        bson_destroy(doc);
        return false;
    }
    if (i == st->end) {
        doclist_push(st->out, doc);
        return true;
    }
    const stage_t *s = &st->p->stages[i];
    const char *name = s->def->name;
    bool is_skip = !strcmp(name, "$skip");
    if (is_skip || !strcmp(name, "$limit")) {
        bool under = st->seen[i] < s->u.n;
        if (under)
            st->seen[i]++;
        if (is_skip == under) { /* skipped, or past the limit */
            bson_destroy(doc);
            return true;
        }
        return stream_push(st, i + 1, doc, err);
    }
    if (!strcmp(name, "$count")) { /* always ends a run: emitted by stream_run */
        st->seen[i]++;
        bson_destroy(doc);
        return true;
    }
    doclist_t one, res;
    doclist_init(&one);
    doclist_init(&res);
    doclist_push(&one, doc);
    bool ok = s->def->run(s, st->ctx, &one, &res, err);
    if (one.docs[0])
        bson_destroy(one.docs[0]);
    bson_free(one.docs);
    size_t j = 0;
    for (; ok && j < res.len; j++) {
        ok = stream_push(st, i + 1, res.docs[j], err);
        res.docs[j] = NULL;
    }
    for (; j < res.len; j++)
        bson_destroy(res.docs[j]);
    bson_free(res.docs);
    return ok;
}

/* Where the streamed run that starts at stage i ends (exclusive): past
 * its $count, or before the first stage that needs all its input. */
static size_t stream_end(const pipeline_t *p, size_t i)
{
    size_t end = i;
    while (end < p->n && (p->stages[end].def->flags & STAGE_STREAM)) {
        if (!strcmp(p->stages[end++].def->name, "$count"))
            break;
    }
    return end;
}

/* Runs stages [first, end) over docs (consumed) into out. */
static bool stream_run(const pipeline_t *p, const expr_ctx_t *ctx, size_t first, size_t end,
                       doclist_t *docs, doclist_t *out, dberr_t *err)
{
    stream_t st = {p, ctx, end, bson_malloc0(p->n * sizeof(int64_t)), out, 0};
    bool ok = true;
    for (size_t j = 0; j < docs->len; j++) {
        bson_t *d = docs->docs[j];
        docs->docs[j] = NULL;
        if (ok)
            ok = stream_push(&st, first, d, err);
        else
            bson_destroy(d);
    }
    const stage_t *last = &p->stages[end - 1];
    if (ok && !strcmp(last->def->name, "$count") && st.seen[end - 1] > 0) {
        bson_t *d = bson_new();
        if (st.seen[end - 1] <= INT32_MAX)
            bson_append_int32(d, last->u.count_field, -1, (int32_t)st.seen[end - 1]);
        else
            bson_append_int64(d, last->u.count_field, -1, st.seen[end - 1]);
        doclist_push(out, d);
    }
    bson_free(st.seen);
    return ok;
}

/* Moves on from a stage's input `docs` to its output `next`: what the stage
 * did not move out of `docs` (those it moved are NULL) is freed. When the
 * stage failed (!ok) its output is freed as well. Returns ok. */
static bool docs_advance(doclist_t *docs, doclist_t *next, bool ok)
{
    for (size_t j = 0; j < docs->len; j++) {
        if ((j & 1023) == 1023)
            fiber_tick();
        if (docs->docs[j])
            bson_destroy(docs->docs[j]);
    }
    bson_free(docs->docs);
    *docs = *next;
    if (!ok)
        doclist_destroy(docs);
    return ok;
}

/* Runs the stages of `p` over `docs` under `ctx`. */
static bool run_stages(const pipeline_t *p, const expr_ctx_t *ctx, doclist_t *docs, dberr_t *err)
{
    for (size_t i = 0; i < p->n; i++) {
        doclist_t next;
        doclist_init(&next);
        const stage_t *s = &p->stages[i];
        size_t end = stream_end(p, i);
        bool ok;
        if (end > i + 1) {
            ok = stream_run(p, ctx, i, end, docs, &next, err);
            i = end - 1;
        } else {
            ok = s->def->run(s, ctx, docs, &next, err);
        }
        if (!docs_advance(docs, &next, ok))
            return false;
    }
    return true;
}

bool pipeline_run(const pipeline_t *p, doclist_t *docs, dberr_t *err)
{
    return pipeline_run_vars(p, NULL, docs, err);
}

/* Runs `p` with `vars` bound on top of its let; $$NOW, allowDiskUse and the
 * source come from the enclosing run `outer` when there is one. */
static bool run_with_vars(const pipeline_t *p, const bson_t *vars, const expr_ctx_t *outer,
                          doclist_t *docs, dberr_t *err)
{
    bson_t merged = BSON_INITIALIZER;
    bool ok = true;
    expr_ctx_t ctx = {.root = NULL, .now_ms = outer ? outer->now_ms : pipeline_now_ms(),
                      .vars = p->let,
                      .allow_disk_use = outer ? outer->allow_disk_use : p->allow_disk_use,
                      .source = outer && outer->source ? outer->source : p->source,
                      .coll = outer && outer->coll ? outer->coll : p->coll};
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

bool pipeline_run_vars(const pipeline_t *p, const bson_t *vars, doclist_t *docs, dberr_t *err)
{
    return run_with_vars(p, vars, NULL, docs, err);
}

bool pipeline_run_nested(const pipeline_t *p, const expr_ctx_t *outer, doclist_t *docs,
                         dberr_t *err)
{
    return run_with_vars(p, outer->vars, outer, docs, err);
}

bool pipeline_run_sub(const pipeline_t *p, const expr_ctx_t *outer, doclist_t *docs,
                      dberr_t *err)
{
    expr_ctx_t ctx = {.root = NULL, .now_ms = outer->now_ms, .vars = p->let,
                      .allow_disk_use = outer->allow_disk_use, .source = outer->source,
                      .coll = outer->coll};
    return run_stages(p, &ctx, docs, err);
}

size_t pipeline_nstages(const pipeline_t *p)
{
    return p ? p->n : 0;
}

bool pipeline_run_explain(const pipeline_t *p, doclist_t *docs, int64_t *nreturned,
                          int64_t *millis, void (*after)(void *ctx, size_t i), void *after_ctx,
                          dberr_t *err)
{
    expr_ctx_t ctx = {.root = NULL, .now_ms = pipeline_now_ms(), .vars = p->let,
                      .allow_disk_use = p->allow_disk_use, .source = p->source, .coll = p->coll};
    dberr_clear(err);
    for (size_t i = 0; i < p->n; i++) {
        const stage_t *s = &p->stages[i];
        doclist_t next;
        doclist_init(&next);
        struct timeval a, b;
        gettimeofday(&a, NULL);
        bool ok = s->def->run(s, &ctx, docs, &next, err);
        gettimeofday(&b, NULL);
        if (!docs_advance(docs, &next, ok))
            return false;
        nreturned[i] = (int64_t)docs->len;
        millis[i] = ((int64_t)b.tv_sec - a.tv_sec) * 1000 + (b.tv_usec - a.tv_usec) / 1000;
        if (after)
            after(after_ctx, i);
    }
    return true;
}
