/* pipeline/output: the terminal stages $out and $merge — parsed here (the
 * target namespace, $merge's on / whenMatched / whenNotMatched / let and its
 * whenMatched pipeline), performed by the caller (see pipeline_output). */
#include "doc/pipeline/pipeline-private.h"

#include <string.h>

#include "util/shellfmt.h"

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
    letvars_destroy(&o->let);
    bson_free(o);
}

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
static bool parse_ns_doc(output_stage_t *o, const bson_iter_t *it, const char *field, dberr_t *err)
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
        if (!pipeline_field_type_ok(&f, BSON_TYPE_UTF8, field, k, true, err))
            return false;
        uint32_t len;
        const char *v = bson_iter_utf8(&f, &len);
        if (is_db) {
            if (!copy_ns_part(o->pub.db, sizeof o->pub.db, v, len, true))
                return dberr_set(err, DBERR_INVALID_NAMESPACE, "Invalid %s target database: '%s'",
                                 o->pub.is_merge ? "$merge" : "$out", v);
            have_db = true;
        } else {
            if (len == 0 && o->pub.is_merge)
                return dberr_set(err, 5786801,
                                 "$merge 'into' field must specify a 'coll' that "
                                 "is not empty, null or undefined");
            if (!copy_ns_part(o->pub.coll, sizeof o->pub.coll, v, len, false))
                return dberr_set(err, DBERR_INVALID_NAMESPACE, "Invalid %s target namespace: '%s'",
                                 o->pub.is_merge ? "$merge" : "$out", v);
            have_coll = true;
        }
    }
    if (!have_coll)
        return o->pub.is_merge
                   ? dberr_set(err, 5786801,
                               "$merge 'into' field must specify a 'coll' that is "
                               "not empty, null or undefined")
                   : dberr_set(err, 40414,
                               "BSON field '$out.coll' is missing but a required field");
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
                    return dberr_set(err, 51273,
                                     "'let' may not define a value for the reserved "
                                     "'new' variable other than '$$ROOT'");
                have_new = true;
            }
            if (!letvars_add(&o->let, k, &f, o->outer_let, err))
                return false;
        }
    }
    if (!have_new) {
        bson_t *d = BCON_NEW("new", BCON_UTF8("$$ROOT"));
        bson_iter_t f;
        bson_iter_init(&f, d);
        bson_iter_next(&f);
        bool ok = letvars_add(&o->let, "new", &f, o->outer_let, err);
        bson_destroy(d);
        if (!ok)
            return false;
    }
    return true;
}

/* The names of the whenMatched and whenNotMatched modes, by enum value. */
static const char *const when_matched_names[] = {"merge", "replace",  "keepExisting",
                                                 "fail",  "pipeline", NULL};
static const char *const when_not_matched_names[] = {"insert", "discard", "fail", NULL};

/* The mode named `v` among `names` (the last, "pipeline", only by form);
 * BadValue naming `field` otherwise. */
static bool parse_mode(const char *const *names, size_t nnames, const char *v, const char *field,
                       int *out, dberr_t *err)
{
    for (size_t i = 0; i < nnames; i++) {
        if (strcmp(names[i], v) == 0) {
            *out = (int)i;
            return true;
        }
    }
    return dberr_set(err, DBERR_BAD_VALUE,
                     "Enumeration value '%s' for field '%s' is not a valid value.", v, field);
}

/* Fails with `code`: $merge's `field` must be either a string or `other`,
 * naming the type under `it`. */
static bool merge_either_error(dberr_t *err, int code, const char *field, const char *other,
                               const bson_iter_t *it)
{
    return dberr_set(err, code, "$merge '%s' field  must be either a string or %s, but found %s",
                     field, other, shellfmt_type_name(bson_iter_type(it)));
}

/* What $merge's option rows read into. */
struct merge_args {
    output_stage_t *o;
    bool have_into, have_let;
    bson_iter_t wm_pipeline, let;
};

static bool merge_opt_into(void *args, const bson_iter_t *f, dberr_t *err)
{
    struct merge_args *a = args;
    output_stage_t *o = a->o;
    a->have_into = true;
    if (BSON_ITER_HOLDS_DOCUMENT(f))
        return parse_ns_doc(o, f, "$merge.into", err);
    if (!BSON_ITER_HOLDS_UTF8(f))
        return merge_either_error(err, 51178, "into", "an object", f);
    uint32_t len;
    const char *v = bson_iter_utf8(f, &len);
    if (len == 0)
        return dberr_set(err, 5786800, "$merge 'into' field cannot be an empty string");
    if (!copy_ns_part(o->pub.coll, sizeof o->pub.coll, v, len, false))
        return dberr_set(err, DBERR_INVALID_NAMESPACE, "Invalid $merge target namespace: '%s'", v);
    return true;
}

static bool merge_opt_on(void *args, const bson_iter_t *f, dberr_t *err)
{
    output_stage_t *o = ((struct merge_args *)args)->o;
    for (size_t i = 0; i < o->pub.non; i++)
        bson_free(o->pub.on[i]);
    o->pub.non = 0;
    o->pub.on_given = true;
    if (BSON_ITER_HOLDS_UTF8(f)) {
        add_on_field(o, bson_iter_utf8(f, NULL));
        return true;
    }
    if (!BSON_ITER_HOLDS_ARRAY(f))
        return merge_either_error(err, 51186, "on", "an array of strings", f);
    bson_iter_t a;
    bson_iter_recurse(f, &a);
    while (bson_iter_next(&a)) {
        if (!BSON_ITER_HOLDS_UTF8(&a))
            return dberr_set(err, 51134, "$merge 'on' array elements must be strings, but found %s",
                             shellfmt_type_name(bson_iter_type(&a)));
        add_on_field(o, bson_iter_utf8(&a, NULL));
    }
    if (o->pub.non == 0)
        return dberr_set(err, 51187,
                         "If explicitly specifying $merge 'on', must include at least one field");
    return true;
}

static bool merge_opt_when_matched(void *args, const bson_iter_t *f, dberr_t *err)
{
    struct merge_args *a = args;
    int m = 0;
    if (BSON_ITER_HOLDS_ARRAY(f)) {
        a->o->pub.when_matched = PIPELINE_WHEN_MATCHED_PIPELINE;
        a->wm_pipeline = *f;
        return true;
    }
    if (!BSON_ITER_HOLDS_UTF8(f))
        return merge_either_error(err, 51191, "whenMatched", "an array", f);
    if (!parse_mode(when_matched_names, 4, bson_iter_utf8(f, NULL), "whenMatched", &m, err))
        return false;
    a->o->pub.when_matched = (pipeline_when_matched_t)m;
    return true;
}

static bool merge_opt_when_not_matched(void *args, const bson_iter_t *f, dberr_t *err)
{
    output_stage_t *o = ((struct merge_args *)args)->o;
    int m = 0;
    if (!pipeline_field_type_ok(f, BSON_TYPE_UTF8, "$merge", "whenNotMatched", true, err) ||
        !parse_mode(when_not_matched_names, 3, bson_iter_utf8(f, NULL), "whenNotMatched", &m, err))
        return false;
    o->pub.when_not_matched = (pipeline_when_not_matched_t)m;
    return true;
}

static bool merge_opt_let(void *args, const bson_iter_t *f, dberr_t *err)
{
    struct merge_args *a = args;
    if (!pipeline_field_type_ok(f, BSON_TYPE_DOCUMENT, "$merge", "let", true, err))
        return false;
    a->have_let = true;
    a->let = *f;
    return true;
}

static const pipeline_option_t merge_options[] = {
    {"into", merge_opt_into},
    {"on", merge_opt_on},
    {"whenMatched", merge_opt_when_matched},
    {"whenNotMatched", merge_opt_when_not_matched},
    {"let", merge_opt_let},
    {NULL, NULL},
};

/* $merge: "coll" or {into, on, whenMatched, whenNotMatched, let}. */
static bool parse_merge(output_stage_t *o, bson_iter_t *it, dberr_t *err)
{
    struct merge_args a = {.o = o};
    o->pub.is_merge = true;
    if (BSON_ITER_HOLDS_UTF8(it)) {
        o->spec = BCON_NEW("into", BCON_UTF8(bson_iter_utf8(it, NULL)));
    } else if (BSON_ITER_HOLDS_DOCUMENT(it)) {
        bson_t d;
        pipeline_borrow_doc(it, &d);
        o->spec = bson_copy(&d);
    } else {
        return dberr_set(err, 51182, "$merge only supports a string or object argument, not %s",
                         shellfmt_type_name(bson_iter_type(it)));
    }
    o->pub.merge_spec = o->spec;
    if (!pipeline_options_parse(o->spec, merge_options, 40415,
                                "BSON field '$merge.%s' is an unknown field.", &a, err))
        return false;
    if (!a.have_into)
        return dberr_set(err, 40414, "BSON field '$merge.into' is missing but a required field");
    if (o->pub.non == 0)
        add_on_field(o, "_id");
    pipeline_when_matched_t wm = o->pub.when_matched;
    pipeline_when_not_matched_t wnm = o->pub.when_not_matched;
    if ((wm == PIPELINE_WHEN_MATCHED_KEEP_EXISTING || wm == PIPELINE_WHEN_MATCHED_FAIL) &&
        wnm != PIPELINE_WHEN_NOT_MATCHED_INSERT)
        return dberr_set(err, 51189,
                         "Combination of $merge modes 'whenMatched: %s' and "
                         "'whenNotMatched: %s' is not supported",
                         when_matched_names[wm], when_not_matched_names[wnm]);
    if (wm != PIPELINE_WHEN_MATCHED_PIPELINE) {
        if (a.have_let)
            return dberr_set(err, 51199, "Cannot use 'let' variables with 'whenMatched: %s' mode",
                             when_matched_names[wm]);
        return true;
    }
    if (!parse_merge_let(o, a.have_let ? &a.let : NULL, err))
        return false;
    /* the whenMatched pipeline sees the command's let and $merge's own */
    bson_t *names = letvars_scope(&o->let, o->outer_let);
    o->pub.when_matched_pipeline = pipeline_build(&a.wm_pipeline, PIPELINE_UPDATE, names, err);
    return o->pub.when_matched_pipeline != NULL;
}

bool pipeline_merge_vars(const pipeline_output_t *o, const bson_t *new_doc, bson_t *vars,
                         dberr_t *err)
{
    const output_stage_t *os = (const output_stage_t *)o; /* pub is the first member */
    expr_ctx_t ctx = {.root = new_doc, .now_ms = pipeline_now_ms(), .vars = os->outer_let};
    return letvars_eval(&os->let, &ctx, vars, err);
}

static bool out_parse(stage_t *s, bson_iter_t *it, const bson_t *let, dberr_t *err)
{
    s->u.output = bson_malloc0(sizeof *s->u.output);
    s->u.output->outer_let = let;
    return parse_out(s->u.output, it, err);
}

static bool merge_parse(stage_t *s, bson_iter_t *it, const bson_t *let, dberr_t *err)
{
    s->u.output = bson_malloc0(sizeof *s->u.output);
    s->u.output->outer_let = let;
    return parse_merge(s->u.output, it, err);
}

static void output_stage_free(stage_t *s)
{
    output_free(s->u.output);
}

/* Passes the documents through for the caller to write. */
static bool output_run(const stage_t *s, const expr_ctx_t *ctx, doclist_t *in, doclist_t *out,
                       dberr_t *err)
{
    pipeline_pass_all(in, out);
    return true;
}

const stage_def_t pipeline_output_stages[] = {
    {"$out", out_parse, output_run, NULL, output_stage_free, STAGE_LAST},
    {"$merge", merge_parse, output_run, NULL, output_stage_free, STAGE_LAST},
    {NULL, NULL, NULL, NULL, NULL, 0},
};
