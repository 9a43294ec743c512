/* pipeline/group: the $group stage — documents grouped by the key
 * expression in a hash table (util/hash.h), first-seen order kept — and its
 * accumulators, one row each in the accumulator table: $sum $avg $min $max
 * $first $last $push $addToSet $count $stdDevPop $stdDevSamp $mergeObjects
 * $firstN $lastN $maxN $minN $top $bottom $topN $bottomN $median
 * $percentile. */
#include "doc/pipeline/window-private.h"
#include "util/fiber.h"

#include <math.h>
#include <string.h>

#include "doc/compare.h"
#include "doc/keystring.h"
#include "doc/num.h"
#include "doc/sortspec.h"
#include "util/buf.h"
#include "util/shellfmt.h"
#include "util/hash.h"
#include "util/table.h"

typedef struct acc_def acc_def_t;

/* One `field: {$acc: expr}` of a $group. */
typedef struct accum {
    char *field;
    const acc_def_t *def;
    expr_t *arg;      /* NULL for $count; the input or output of the object forms */
    expr_t *n;        /* $firstN & co., $topN $bottomN: the n expression */
    sortspec_t *sort; /* $top $bottom $topN $bottomN: sortBy */
    double *ps;       /* $percentile: the p values ($median: 0.5) */
    size_t nps;
    const collation_t *coll; /* $min/$max/$addToSet: how strings compare (borrowed) */
} accum_t;

struct group_spec {
    expr_t *id; /* the group key */
    accum_t *accs;
    size_t naccs;
};

/* The running state of one accumulator for one group. */
typedef struct acc_state {
    num_sum_t sum;    /* $sum, $avg; sum.count for $count */
    bson_value_t val; /* $min/$max/$first/$last: EOD until set */
    bool seen;        /* $first: a value was taken */
    bson_t *list;     /* $push/$addToSet elements (array; heap: bson_t is over-aligned) */
    uint32_t nlist;
    /* -- the accumulators that fold with acc_def_t.fold -- */
    int64_t n;          /* the group's n (0 until evaluated) */
    bson_value_t *vals; /* $firstN & co.: kept values (owned); $top*: outputs */
    bson_t **docs;      /* $top*: the sort document of each kept value */
    double *nums;       /* $median $percentile: the numbers seen */
    size_t nnums, numcap;
    size_t head, nvals, cap;
    double mean, m2; /* $stdDev*: Welford's running mean and sum of squares */
    int64_t bytes;   /* memory held by vals/docs/nums */
} acc_state_t;

/* One row of the accumulator table. */
struct acc_def {
    const char *name; /* "$sum"; NULL ends the table */
    bool no_arg;      /* takes {} ($count) */
    /* Folds the value of the argument expression (EOD when missing) in. */
    void (*update)(const accum_t *spec, acc_state_t *a, const bson_value_t *v);
    /* Appends the result as field spec->field. */
    void (*emit)(const accum_t *spec, const acc_state_t *a, bson_t *out);
    int aux; /* a per-row constant: 1 for $max */
    /* Set for the accumulators whose argument is an object ({n, input},
     * {sortBy, output}, {input, p, method}): reads it into `acc`. */
    bool (*parse)(accum_t *acc, const bson_t *args, dberr_t *err);
    /* Set instead of `update` when folding can fail or needs the document
     * (ctx->root): folds `v` in. */
    bool (*fold)(const accum_t *spec, acc_state_t *a, const bson_value_t *v, const expr_ctx_t *ctx,
                 dberr_t *err);
};

/* ---- the accumulators ---- */

static bool nullish(const bson_value_t *v)
{
    return v->value_type == BSON_TYPE_EOD || v->value_type == BSON_TYPE_NULL ||
           v->value_type == BSON_TYPE_UNDEFINED;
}

static void sum_update(const accum_t *spec, acc_state_t *a, const bson_value_t *v)
{
    num_sum_add(&a->sum, v);
}

static void sum_emit(const accum_t *spec, const acc_state_t *a, bson_t *out)
{
    bson_value_t r;
    num_sum_value(&a->sum, &r);
    bson_append_value(out, spec->field, -1, &r);
}

static void avg_emit(const accum_t *spec, const acc_state_t *a, bson_t *out)
{
    bson_value_t r;
    num_avg_value(&a->sum, &r);
    bson_append_value(out, spec->field, -1, &r);
}

static void count_update(const accum_t *spec, acc_state_t *a, const bson_value_t *v)
{
    a->sum.count++;
}

static void count_emit(const accum_t *spec, const acc_state_t *a, bson_t *out)
{
    if (a->sum.count <= INT32_MAX)
        bson_append_int32(out, spec->field, -1, (int32_t)a->sum.count);
    else
        bson_append_int64(out, spec->field, -1, a->sum.count);
}

static void set_val(acc_state_t *a, const bson_value_t *v)
{
    if (a->val.value_type != BSON_TYPE_EOD)
        bson_value_destroy(&a->val);
    memset(&a->val, 0, sizeof a->val);
    if (v->value_type != BSON_TYPE_EOD)
        bson_value_copy(v, &a->val);
}

static void minmax_update(const accum_t *spec, acc_state_t *a, const bson_value_t *v)
{
    if (nullish(v))
        return;
    int c = a->val.value_type == BSON_TYPE_EOD ? 0 : compare_values_coll(v, &a->val, spec->coll);
    if (a->val.value_type == BSON_TYPE_EOD || (spec->def->aux && c > 0) ||
        (!spec->def->aux && c < 0))
        set_val(a, v);
}

static void first_update(const accum_t *spec, acc_state_t *a, const bson_value_t *v)
{
    if (!a->seen) {
        a->seen = true;
        set_val(a, v);
    }
}

static void last_update(const accum_t *spec, acc_state_t *a, const bson_value_t *v)
{
    set_val(a, v);
}

static void val_emit(const accum_t *spec, const acc_state_t *a, bson_t *out)
{
    if (a->val.value_type == BSON_TYPE_EOD)
        bson_append_null(out, spec->field, -1);
    else
        bson_append_value(out, spec->field, -1, &a->val);
}

static bool list_contains(const accum_t *spec, const acc_state_t *a, const bson_value_t *v)
{
    bson_iter_t it;
    if (bson_iter_init(&it, a->list))
        while (bson_iter_next(&it))
            if (compare_values_coll(bson_iter_value(&it), v, spec->coll) == 0)
                return true;
    return false;
}

static void push_update(const accum_t *spec, acc_state_t *a, const bson_value_t *v)
{
    if (v->value_type == BSON_TYPE_EOD)
        return;
    pipeline_array_append_value(a->list, a->nlist++, v);
}

static void add_to_set_update(const accum_t *spec, acc_state_t *a, const bson_value_t *v)
{
    if (v->value_type != BSON_TYPE_EOD && !list_contains(spec, a, v))
        push_update(spec, a, v);
}

static void list_emit(const accum_t *spec, const acc_state_t *a, bson_t *out)
{
    bson_append_array(out, spec->field, -1, a->list);
}

/* ---- $stdDevPop $stdDevSamp ---- */

static void stddev_update(const accum_t *spec, acc_state_t *a, const bson_value_t *v)
{
    if (!num_is_number(v))
        return;
    double x = num_to_double(v);
    a->sum.count++;
    double d = x - a->mean;
    a->mean += d / (double)a->sum.count;
    a->m2 += d * (x - a->mean);
}

/* aux 0: population, 1: sample; null with too few numbers. */
static void stddev_emit(const accum_t *spec, const acc_state_t *a, bson_t *out)
{
    int64_t n = a->sum.count, denom = n - spec->def->aux;
    if (denom <= 0)
        bson_append_null(out, spec->field, -1);
    else
        bson_append_double(out, spec->field, -1, sqrt(a->m2 / (double)denom));
}

/* ---- $mergeObjects ---- */

static bool merge_fold(const accum_t *spec, acc_state_t *a, const bson_value_t *v,
                       const expr_ctx_t *ctx, dberr_t *err)
{
    bson_t old, add, merged;
    if (nullish(v))
        return true;
    if (v->value_type != BSON_TYPE_DOCUMENT) {
        char *sv = shellfmt_value(v);
        bool r = dberr_set(err, 40400,
                           "$mergeObjects requires object inputs, but input %s is of type %s", sv,
                           shellfmt_type_name(v->value_type));
        bson_free(sv);
        return r;
    }
    bson_init_static(&add, v->value.v_doc.data, v->value.v_doc.data_len);
    if (a->val.value_type == BSON_TYPE_EOD) {
        bson_value_copy(v, &a->val);
        return true;
    }
    bson_init_static(&old, a->val.value.v_doc.data, a->val.value.v_doc.data_len);
    expr_merge_docs(&old, &add, &merged);
    bson_value_destroy(&a->val);
    expr_value_take_bson(&a->val, &merged, BSON_TYPE_DOCUMENT);
    if (a->val.value.v_doc.data_len > EXPR_MAX_VALUE_BYTES)
        return dberr_set(err, DBERR_BSON_OBJECT_TOO_LARGE,
                         "$mergeObjects would build a document over the %d bytes (16 MB) a value "
                         "may hold",
                         EXPR_MAX_VALUE_BYTES);
    return true;
}

/* The merged document; {} when every input was null or missing. */
static void merge_emit(const accum_t *spec, const acc_state_t *a, bson_t *out)
{
    if (a->val.value_type == BSON_TYPE_EOD) {
        bson_t empty = BSON_INITIALIZER;
        bson_append_document(out, spec->field, -1, &empty);
    } else {
        bson_append_value(out, spec->field, -1, &a->val);
    }
}

/* ---- the N accumulators: kept values ---- */

/* Bytes a kept value holds. */
static int64_t value_bytes(const bson_value_t *v)
{
    switch (v->value_type) {
    case BSON_TYPE_UTF8:
        return (int64_t)sizeof *v + v->value.v_utf8.len;
    case BSON_TYPE_DOCUMENT:
    case BSON_TYPE_ARRAY:
        return (int64_t)sizeof *v + v->value.v_doc.data_len;
    case BSON_TYPE_BINARY:
        return (int64_t)sizeof *v + v->value.v_binary.data_len;
    default:
        return (int64_t)sizeof *v;
    }
}

/* Inserts a copy of `v` (missing kept as null) at `at` of the live range
 * [head, head + nvals), with its sort document `doc` (taken) when not NULL. */
static void kept_insert(acc_state_t *a, size_t at, const bson_value_t *v, bson_t *doc)
{
    if (a->head + a->nvals == a->cap) {
        if (a->head > 0) {
            memmove(a->vals, a->vals + a->head, a->nvals * sizeof *a->vals);
            if (a->docs)
                memmove(a->docs, a->docs + a->head, a->nvals * sizeof *a->docs);
            at -= a->head;
            a->head = 0;
        } else {
            a->cap = a->cap ? a->cap * 2 : 8;
            a->vals = bson_realloc(a->vals, a->cap * sizeof *a->vals);
            if (doc || a->docs)
                a->docs = bson_realloc(a->docs, a->cap * sizeof *a->docs);
        }
    }
    size_t end = a->head + a->nvals;
    memmove(a->vals + at + 1, a->vals + at, (end - at) * sizeof *a->vals);
    if (doc) {
        memmove(a->docs + at + 1, a->docs + at, (end - at) * sizeof *a->docs);
        a->docs[at] = doc;
        a->bytes += doc->len;
    }
    if (v->value_type == BSON_TYPE_EOD)
        a->vals[at] = (bson_value_t){.value_type = BSON_TYPE_NULL};
    else
        bson_value_copy(v, &a->vals[at]);
    a->bytes += value_bytes(&a->vals[at]);
    a->nvals++;
}

/* Drops the kept value at `at` (the first or the last of the live range). */
static void kept_drop(acc_state_t *a, size_t at)
{
    a->bytes -= value_bytes(&a->vals[at]);
    bson_value_destroy(&a->vals[at]);
    if (a->docs) {
        a->bytes -= a->docs[at]->len;
        bson_destroy(a->docs[at]);
    }
    if (at == a->head)
        a->head++;
    a->nvals--;
}

static void kept_free(acc_state_t *a)
{
    for (size_t i = a->head; i < a->head + a->nvals; i++) {
        bson_value_destroy(&a->vals[i]);
        if (a->docs)
            bson_destroy(a->docs[i]);
    }
    bson_free(a->vals);
    bson_free(a->docs);
    bson_free(a->nums);
}

/* The kept values, in order, as an array field. */
static void kept_emit(const accum_t *spec, const acc_state_t *a, bson_t *out)
{
    bson_t arr;
    uint32_t idx = 0;
    bson_append_array_begin(out, spec->field, -1, &arr);
    for (size_t i = a->head; i < a->head + a->nvals; i++)
        pipeline_array_append_value(&arr, idx++, &a->vals[i]);
    bson_append_array_end(out, &arr);
}

/* $firstN (aux 0), $lastN (aux 1): nulls and missing values kept as null. */
static bool firstlast_n_fold(const accum_t *spec, acc_state_t *a, const bson_value_t *v,
                             const expr_ctx_t *ctx, dberr_t *err)
{
    if (!spec->def->aux && (int64_t)a->nvals >= a->n)
        return true;
    kept_insert(a, a->head + a->nvals, v, NULL);
    if ((int64_t)a->nvals > a->n)
        kept_drop(a, a->head);
    return true;
}

/* $maxN (aux 1), $minN (aux 0): the n largest / smallest, best first;
 * null and missing are skipped. */
static bool minmax_n_fold(const accum_t *spec, acc_state_t *a, const bson_value_t *v,
                          const expr_ctx_t *ctx, dberr_t *err)
{
    int dir = spec->def->aux ? -1 : 1;
    if (nullish(v))
        return true;
    size_t lo = a->head, hi = a->head + a->nvals;
    while (lo < hi) { /* after the equal ones: the first seen stays ahead */
        size_t mid = lo + (hi - lo) / 2;
        if (dir * compare_values(&a->vals[mid], v) <= 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    if ((int64_t)a->nvals >= a->n && lo == a->head + a->nvals)
        return true;
    kept_insert(a, lo, v, NULL);
    if ((int64_t)a->nvals > a->n)
        kept_drop(a, a->head + a->nvals - 1);
    return true;
}

/* The values of the sortBy paths of the document, as a document the
 * sortspec compares. */
static bson_t *sort_doc(const accum_t *spec, const expr_ctx_t *ctx)
{
    bson_t *d = bson_new();
    for (int i = 0; i < sortspec_nkeys(spec->sort); i++) {
        int dir;
        const char *path = sortspec_key(spec->sort, i, &dir);
        bson_iter_t it, f;
        if (ctx->root && bson_iter_init(&it, ctx->root) && bson_iter_find_descendant(&it, path, &f))
            bson_append_value(d, path, -1, bson_iter_value(&f));
    }
    return d;
}

/* Compares sort documents whose keys are the sortBy paths themselves. */
static int sort_doc_cmp(const accum_t *spec, const bson_t *x, const bson_t *y)
{
    int c = 0;
    for (int i = 0; c == 0 && i < sortspec_nkeys(spec->sort); i++) {
        int dir;
        const char *path = sortspec_key(spec->sort, i, &dir);
        bson_iter_t ix, iy;
        bson_value_t nul = {.value_type = BSON_TYPE_NULL};
        const bson_value_t *vx = bson_iter_init_find(&ix, x, path) ? bson_iter_value(&ix) : &nul;
        const bson_value_t *vy = bson_iter_init_find(&iy, y, path) ? bson_iter_value(&iy) : &nul;
        c = dir * compare_values(vx, vy);
    }
    return c;
}

/* $top $topN (aux 0) and $bottom $bottomN (aux 1): the outputs of the n
 * documents first / last under sortBy, kept in sort order. */
static bool topbottom_fold(const accum_t *spec, acc_state_t *a, const bson_value_t *v,
                           const expr_ctx_t *ctx, dberr_t *err)
{
    bool bottom = spec->def->aux;
    bson_t *d = sort_doc(spec, ctx);
    size_t lo = a->head, hi = a->head + a->nvals;
    while (lo < hi) { /* stable: after the equal ones */
        size_t mid = lo + (hi - lo) / 2;
        if (sort_doc_cmp(spec, a->docs[mid], d) <= 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (!bottom && (int64_t)a->nvals >= a->n && lo == a->head + a->nvals) {
        bson_destroy(d);
        return true;
    }
    if (!a->docs && a->cap)
        a->docs = bson_malloc0(a->cap * sizeof *a->docs);
    kept_insert(a, lo, v, d);
    if ((int64_t)a->nvals > a->n)
        kept_drop(a, bottom ? a->head : a->head + a->nvals - 1);
    return true;
}

/* $top / $bottom: the one output (null when there was none). */
static void top1_emit(const accum_t *spec, const acc_state_t *a, bson_t *out)
{
    if (a->nvals)
        bson_append_value(out, spec->field, -1, &a->vals[a->head]);
    else
        bson_append_null(out, spec->field, -1);
}

/* ---- $median $percentile ---- */

static bool quantile_fold(const accum_t *spec, acc_state_t *a, const bson_value_t *v,
                          const expr_ctx_t *ctx, dberr_t *err)
{
    if (!num_is_number(v))
        return true;
    double x = num_to_double(v);
    if (isnan(x))
        return true;
    if (a->nnums == a->numcap) {
        a->numcap = a->numcap ? a->numcap * 2 : 16;
        a->nums = bson_realloc(a->nums, a->numcap * sizeof *a->nums);
    }
    a->nums[a->nnums++] = x;
    a->bytes += (int64_t)sizeof x;
    return true;
}

static int double_cmp(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return a < b ? -1 : a > b;
}

/* The value at rank ceil(p * n) of the sorted numbers (null when none). */
static void quantile_append(const acc_state_t *a, double p, const char *key, bson_t *out)
{
    if (!a->nnums) {
        bson_append_null(out, key, -1);
        return;
    }
    double r = ceil(p * (double)a->nnums) - 1;
    size_t i = r < 0 ? 0 : r >= (double)a->nnums ? a->nnums - 1 : (size_t)r;
    bson_append_double(out, key, -1, a->nums[i]);
}

/* $median (aux 0): one number; $percentile (aux 1): one per p. */
static void quantile_emit(const accum_t *spec, const acc_state_t *a, bson_t *out)
{
    if (a->nnums > 1) /* no numbers: nums may be NULL, which qsort must not see */
        qsort(a->nums, a->nnums, sizeof *a->nums, double_cmp);
    if (!spec->def->aux) {
        quantile_append(a, 0.5, spec->field, out);
        return;
    }
    bson_t arr;
    bson_append_array_begin(out, spec->field, -1, &arr);
    for (size_t i = 0; i < spec->nps; i++) {
        char buf[16];
        const char *k;
        bson_uint32_to_string((uint32_t)i, &k, buf, sizeof buf);
        quantile_append(a, spec->ps[i], k, &arr);
    }
    bson_append_array_end(out, &arr);
}

/* ---- parsing the object forms ---- */

/* $accumulator: user JavaScript, which atomdb does not run. */
static bool parse_refused(accum_t *acc, const bson_t *args, dberr_t *err)
{
    return dberr_set(err, DBERR_NOT_IMPLEMENTED,
                     "%s is not implemented by atomdb (no server-side JavaScript)", acc->def->name);
}

/* Parses the expression of field `key` of `args` into *out. */
static bool parse_field_expr(const bson_t *args, const char *key, expr_t **out, dberr_t *err)
{
    bson_iter_t it;
    if (!bson_iter_init_find(&it, args, key))
        return true;
    return (*out = expr_new(&it, err)) != NULL;
}

/* {n, input} of $firstN $lastN $maxN $minN. */
static bool parse_n_input(accum_t *acc, const bson_t *args, dberr_t *err)
{
    bson_iter_t it;
    bson_iter_init(&it, args);
    while (bson_iter_next(&it))
        if (strcmp(bson_iter_key(&it), "n") && strcmp(bson_iter_key(&it), "input"))
            return dberr_set(err, 5787901, "Unknown argument for 'n' operator: %s",
                             bson_iter_key(&it));
    if (!bson_has_field(args, "n"))
        return dberr_set(err, 5787906, "Missing value for 'n'");
    if (!bson_has_field(args, "input"))
        return dberr_set(err, 5787907, "Missing value for 'input'");
    return parse_field_expr(args, "n", &acc->n, err) &&
           parse_field_expr(args, "input", &acc->arg, err);
}

/* {sortBy, output} of $top $bottom, with n for $topN $bottomN. */
static bool parse_top_bottom(accum_t *acc, const bson_t *args, dberr_t *err)
{
    bool has_n = acc->def->name[strlen(acc->def->name) - 1] == 'N';
    bson_iter_t it;
    bson_iter_init(&it, args);
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (strcmp(k, "sortBy") && strcmp(k, "output") && (!has_n || strcmp(k, "n")))
            return dberr_set(err, 5788002, "Unknown argument to %s '%s'", acc->def->name, k);
    }
    if (has_n && !bson_has_field(args, "n"))
        return dberr_set(err, 5788003, "Missing value for 'n'");
    if (!bson_has_field(args, "output"))
        return dberr_set(err, 5788004, "Missing value for 'output'");
    if (!bson_iter_init_find(&it, args, "sortBy"))
        return dberr_set(err, 5788005, "Missing value for 'sortBy'");
    if (!BSON_ITER_HOLDS_DOCUMENT(&it))
        return dberr_set(err, DBERR_FAILED_TO_PARSE,
                         "expected an object for the sortBy of %s, found %s", acc->def->name,
                         shellfmt_type_name(bson_iter_type(&it)));
    bson_t sb;
    pipeline_borrow_doc(&it, &sb);
    if (!(acc->sort = sortspec_new(&sb, err)))
        return false;
    return (!has_n || parse_field_expr(args, "n", &acc->n, err)) &&
           parse_field_expr(args, "output", &acc->arg, err);
}

/* {input, method, p} of $percentile, {input, method} of $median (checked
 * as the expressions check them). */
static bool parse_quantile(accum_t *acc, const bson_t *args, dberr_t *err)
{
    bson_iter_t input, p, e;
    if (!expr_check_quantile(args, acc->def->name, acc->def->aux, &input, &p, err))
        return false;
    if (acc->def->aux) {
        uint32_t np = 0;
        bson_iter_recurse(&p, &e);
        while (bson_iter_next(&e))
            np++;
        acc->ps = bson_malloc(np * sizeof *acc->ps);
        bson_iter_recurse(&p, &e);
        while (bson_iter_next(&e))
            acc->ps[acc->nps++] = num_to_double(bson_iter_value(&e));
    }
    return parse_field_expr(args, "input", &acc->arg, err);
}

/* One row per accumulator; the fields a row leaves out are zero. */
static const acc_def_t accumulators[] = {
    {"$sum", .update = sum_update, .emit = sum_emit},
    {"$avg", .update = sum_update, .emit = avg_emit},
    {"$min", .update = minmax_update, .emit = val_emit},
    {"$max", .update = minmax_update, .emit = val_emit, .aux = 1},
    {"$first", .update = first_update, .emit = val_emit},
    {"$last", .update = last_update, .emit = val_emit},
    {"$push", .update = push_update, .emit = list_emit},
    {"$addToSet", .update = add_to_set_update, .emit = list_emit},
    {"$count", .no_arg = true, .update = count_update, .emit = count_emit},
    {"$stdDevPop", .update = stddev_update, .emit = stddev_emit},
    {"$stdDevSamp", .update = stddev_update, .emit = stddev_emit, .aux = 1},
    {"$mergeObjects", .emit = merge_emit, .fold = merge_fold},
    {"$firstN", .emit = kept_emit, .parse = parse_n_input, .fold = firstlast_n_fold},
    {"$lastN", .emit = kept_emit, .aux = 1, .parse = parse_n_input, .fold = firstlast_n_fold},
    {"$maxN", .emit = kept_emit, .aux = 1, .parse = parse_n_input, .fold = minmax_n_fold},
    {"$minN", .emit = kept_emit, .parse = parse_n_input, .fold = minmax_n_fold},
    {"$top", .emit = top1_emit, .parse = parse_top_bottom, .fold = topbottom_fold},
    {"$bottom", .emit = top1_emit, .aux = 1, .parse = parse_top_bottom, .fold = topbottom_fold},
    {"$topN", .emit = kept_emit, .parse = parse_top_bottom, .fold = topbottom_fold},
    {"$bottomN", .emit = kept_emit, .aux = 1, .parse = parse_top_bottom, .fold = topbottom_fold},
    {"$median", .emit = quantile_emit, .parse = parse_quantile, .fold = quantile_fold},
    {"$percentile", .emit = quantile_emit, .aux = 1, .parse = parse_quantile,
     .fold = quantile_fold},
    {"$accumulator", .emit = val_emit, .parse = parse_refused, .fold = merge_fold},
    {NULL},
};

static const acc_def_t *find_accumulator(const char *name)
{
    const void *tables[] = {accumulators};
    return table_find(tables, 1, sizeof(acc_def_t), name);
}

/* ---- parse ---- */

/* Frees what `acc` holds (not `acc`). */
static void accum_free(accum_t *acc)
{
    bson_free(acc->field);
    expr_destroy(acc->arg);
    expr_destroy(acc->n);
    sortspec_destroy(acc->sort);
    bson_free(acc->ps);
}

/* The argument of accumulator acc->def under `a` into `acc` (its
 * expression, or the object form's fields). */
static bool parse_accum_arg(bson_iter_t *a, accum_t *acc, dberr_t *err)
{
    const char *op = acc->def->name;
    if (acc->def->no_arg) {
        bson_t empty;
        if (!BSON_ITER_HOLDS_DOCUMENT(a) || (pipeline_borrow_doc(a, &empty), !bson_empty(&empty)))
            return dberr_set(err, DBERR_TYPE_MISMATCH, "$count takes no arguments, i.e. $count:{}");
    } else if (acc->def->parse) {
        bson_t args;
        if (!BSON_ITER_HOLDS_DOCUMENT(a) && acc->def->parse == parse_refused)
            return parse_refused(acc, NULL, err);
        if (!BSON_ITER_HOLDS_DOCUMENT(a)) {
            char *sv = shellfmt_value(bson_iter_value(a));
            int code = acc->def->parse == parse_n_input      ? 5787900
                       : acc->def->parse == parse_top_bottom ? 5788001
                                                             : 7429703;
            bool r = dberr_set(err, code, "specification must be an object; found %s: %s", op, sv);
            bson_free(sv);
            return r;
        }
        pipeline_borrow_doc(a, &args);
        if (!acc->def->parse(acc, &args, err))
            return false;
    } else {
        if (BSON_ITER_HOLDS_ARRAY(a))
            return dberr_set(err, 40237, "The %s accumulator is a unary operator", op);
        if (!(acc->arg = expr_new(a, err)))
            return false;
    }
    return true;
}

/* One `field: {$acc: expr}` into `acc`. */
static bool parse_accum(bson_iter_t *it, accum_t *acc, dberr_t *err)
{
    const char *k = bson_iter_key(it);
    if (k[0] == '$')
        return dberr_set(err, 40236, "The field name '%s' cannot be an operator name", k);
    if (strchr(k, '.'))
        return dberr_set(err, 40235, "The field name '%s' cannot contain '.'", k);
    if (!BSON_ITER_HOLDS_DOCUMENT(it))
        return dberr_set(err, 40234, "The field '%s' must be an accumulator object", k);
    bson_t spec;
    bson_iter_t a;
    pipeline_borrow_doc(it, &spec);
    if (bson_count_keys(&spec) != 1)
        return dberr_set(err, 40238, "The field '%s' must specify one accumulator", k);
    bson_iter_init(&a, &spec);
    bson_iter_next(&a);
    const char *op = bson_iter_key(&a);
    if (!(acc->def = find_accumulator(op)))
        return dberr_set(err, 15952, "unknown group operator '%s'", op);
    if (!parse_accum_arg(&a, acc, err))
        return false;
    acc->field = bson_strdup(k);
    return true;
}

static bool group_parse(stage_t *s, bson_iter_t *arg, const bson_t *let, dberr_t *err)
{
    bson_iter_t it;
    bool have_id = false;
    if (!BSON_ITER_HOLDS_DOCUMENT(arg))
        return dberr_set(err, 15947, "a group's fields must be specified in an object");
    group_spec_t *g = s->u.group = bson_malloc0(sizeof *g);
    bson_iter_recurse(arg, &it);
    while (bson_iter_next(&it)) {
        if (strcmp(bson_iter_key(&it), "_id") == 0) {
            if (have_id)
                return dberr_set(err, 16414, "$group: _id specified more than once");
            have_id = true;
            if (!(g->id = expr_new(&it, err)))
                return false;
            continue;
        }
        accum_t acc;
        memset(&acc, 0, sizeof acc);
        bool ok = parse_accum(&it, &acc, err);
        if (!ok) {
            accum_free(&acc);
            return false;
        }
        g->accs = bson_realloc(g->accs, (g->naccs + 1) * sizeof *g->accs);
        g->accs[g->naccs++] = acc;
    }
    if (!have_id)
        return dberr_set(err, 15955, "a group specification must include an _id");
    return true;
}

static bool group_check_vars(stage_t *s, const bson_t *let, dberr_t *err)
{
    const group_spec_t *g = s->u.group;
    if (!expr_check_vars(g->id, let, err))
        return false;
    for (size_t i = 0; i < g->naccs; i++)
        if (!expr_check_vars(g->accs[i].arg, let, err) || !expr_check_vars(g->accs[i].n, let, err))
            return false;
    return true;
}

static void group_free(stage_t *s)
{
    group_spec_t *g = s->u.group;
    if (!g)
        return;
    expr_destroy(g->id);
    for (size_t i = 0; i < g->naccs; i++)
        accum_free(&g->accs[i]);
    bson_free(g->accs);
    bson_free(g);
}

/* ---- run ---- */

/* One group: its key, the key's index encoding (the hash key) and the
 * accumulator states. */
typedef struct group {
    bson_value_t key;
    buf_t kbytes;
    acc_state_t *st;
    UT_hash_handle hh;
} group_t;

static group_t *group_new(const group_spec_t *spec, bson_value_t *key, buf_t *kb)
{
    group_t *g = bson_malloc0(sizeof *g);
    g->key = *key;
    g->kbytes = *kb;
    g->st = bson_malloc0((spec->naccs ? spec->naccs : 1) * sizeof *g->st);
    for (size_t a = 0; a < spec->naccs; a++) {
        num_sum_init(&g->st[a].sum);
        g->st[a].list = bson_new();
    }
    return g;
}

static void group_destroy(const group_spec_t *spec, group_t *g)
{
    bson_value_destroy(&g->key);
    buf_destroy(&g->kbytes);
    for (size_t a = 0; a < spec->naccs; a++) {
        if (g->st[a].val.value_type != BSON_TYPE_EOD)
            bson_value_destroy(&g->st[a].val);
        bson_destroy(g->st[a].list);
        kept_free(&g->st[a]);
    }
    bson_free(g->st);
    bson_free(g);
}

/* The group of the document under `ctx`, added to `groups` when new. */
static bool group_of(const group_spec_t *spec, const expr_ctx_t *ctx, group_t **groups,
                     group_t **out, dberr_t *err)
{
    bson_value_t key;
    buf_t kb;
    if (!expr_eval(spec->id, ctx, &key, err))
        return false;
    if (key.value_type == BSON_TYPE_EOD)
        key.value_type = BSON_TYPE_NULL;
    buf_init(&kb);
    keystring_append_coll(&kb, &key, false, ctx->coll);
    HASH_FIND(hh, *groups, kb.data, kb.len, *out);
    if (*out) {
        buf_destroy(&kb);
        bson_value_destroy(&key);
        return true;
    }
    group_t *g = group_new(spec, &key, &kb);
    HASH_ADD_KEYPTR(hh, *groups, g->kbytes.data, g->kbytes.len, g);
    *out = g;
    return true;
}

/* Evaluates the n of each N accumulator for the new group `g`, against
 * {_id: <group key>} as mongod does (n may read only the key). */
static bool group_eval_n(const group_spec_t *spec, const expr_ctx_t *base, group_t *g, dberr_t *err)
{
    bool ok = true;
    for (size_t a = 0; ok && a < spec->naccs; a++) {
        g->st[a].n = 1;
        if (!spec->accs[a].n)
            continue;
        bson_t doc;
        bson_value_t nv;
        expr_ctx_t ctx = *base;
        bson_init(&doc);
        bson_append_value(&doc, "_id", 3, &g->key);
        ctx.root = &doc;
        ctx.current = NULL;
        ok = expr_eval(spec->accs[a].n, &ctx, &nv, err) && expr_check_n(&nv, &g->st[a].n, err);
        if (nv.value_type != BSON_TYPE_EOD)
            bson_value_destroy(&nv);
        bson_destroy(&doc);
    }
    return ok;
}

/* A $push/$addToSet list within its limit (pipeline_limits); also never
 * past the 16 MB a document can hold. */
static bool group_list_within(const accum_t *acc, const acc_state_t *st, dberr_t *err)
{
    bool push = acc->def->update == push_update;
    if (!push && acc->def->update != add_to_set_update)
        return true;
    int64_t limit = push ? pipeline_limits.push_bytes : pipeline_limits.add_to_set_bytes;
    if ((int64_t)st->list->len <= limit && st->list->len <= EXPR_MAX_VALUE_BYTES)
        return true;
    if ((int64_t)st->list->len > limit)
        return dberr_set(err, DBERR_EXCEEDED_MEMORY_LIMIT,
                         "%s used too much memory and cannot spill to disk. Used: %u bytes. "
                         "Memory limit: %lld bytes",
                         acc->def->name, st->list->len, (long long)limit);
    return dberr_set(err, DBERR_BSON_OBJECT_TOO_LARGE,
                     "%s would build an array of %u bytes, over the %d bytes a value can hold",
                     acc->def->name, st->list->len, EXPR_MAX_VALUE_BYTES);
}

static bool group_run(const stage_t *s, const expr_ctx_t *base, doclist_t *in, doclist_t *out,
                      dberr_t *err)
{
    const group_spec_t *spec = s->u.group;
    group_t *groups = NULL, *g, *tmp;
    bool ok = true;
    int64_t mem = 0; /* keys and accumulator states, as mongod counts them */
    for (size_t i = 0; ok && i < in->len; i++) {
        if (!(ok = fiber_check(err)))
            break;
        expr_ctx_t ctx = *base;
        ctx.root = in->docs[i];
        unsigned before = HASH_COUNT(groups);
        if (!(ok = group_of(spec, &ctx, &groups, &g, err)))
            break;
        if (HASH_COUNT(groups) != before) {
            mem += (int64_t)(sizeof *g + g->kbytes.len * 2 + spec->naccs * sizeof *g->st);
            if (!(ok = group_eval_n(spec, base, g, err)))
                break;
        }
        for (size_t a = 0; a < spec->naccs; a++) {
            uint32_t had = g->st[a].list->len;
            int64_t had_bytes = g->st[a].bytes;
            bson_value_t v;
            memset(&v, 0, sizeof v);
            v.value_type = BSON_TYPE_EOD;
            if (spec->accs[a].arg && !expr_eval(spec->accs[a].arg, &ctx, &v, err)) {
                ok = false;
                break;
            }
            if (spec->accs[a].def->fold)
                ok = spec->accs[a].def->fold(&spec->accs[a], &g->st[a], &v, &ctx, err);
            else
                spec->accs[a].def->update(&spec->accs[a], &g->st[a], &v);
            if (v.value_type != BSON_TYPE_EOD)
                bson_value_destroy(&v);
            if (!ok)
                break;
            mem += (int64_t)g->st[a].list->len - had + g->st[a].bytes - had_bytes;
            if (!(ok = group_list_within(&spec->accs[a], &g->st[a], err)))
                break;
        }
        if (ok && mem > pipeline_limits.group_bytes)
            ok = dberr_set(err, DBERR_QUERY_EXCEEDED_MEMORY_NO_DISK,
                           base->allow_disk_use
                               ? "Exceeded memory limit for $group (%lld bytes), and atomdb cannot "
                                 "spill to disk: allowDiskUse is not implemented (raise "
                                 "internalDocumentSourceGroupMaxMemoryBytes)"
                               : "Exceeded memory limit for $group, but didn't allow external "
                                 "sort. Pass allowDiskUse:true to opt in.",
                           (long long)pipeline_limits.group_bytes);
    }
    /* HASH_ITER visits groups in insertion order: first seen first */
    HASH_ITER(hh, groups, g, tmp)
    {
        if (ok) {
            bson_t *d = bson_new();
            bson_append_value(d, "_id", 3, &g->key);
            for (size_t a = 0; a < spec->naccs; a++)
                spec->accs[a].def->emit(&spec->accs[a], &g->st[a], d);
            doclist_push(out, d);
        }
        HASH_DEL(groups, g);
        group_destroy(spec, g);
    }
    return ok;
}

void pipeline_group_set_collation(group_spec_t *g, const collation_t *coll)
{
    for (size_t a = 0; a < g->naccs; a++)
        g->accs[a].coll = coll;
}

const stage_def_t pipeline_group_stages[] = {
    {"$group", group_parse, group_run, group_check_vars, group_free, 0},
    {NULL, NULL, NULL, NULL, NULL, 0},
};

/* ---- one accumulator on its own, for window functions (window-private.h) ---- */

struct pipeline_acc {
    accum_t spec; /* field "v"; owns its n/sort/ps only in a parsed template */
    acc_state_t st;
    bool owns_spec; /* a template from pipeline_acc_parse */
};

pipeline_acc_t *pipeline_acc_new(const char *name)
{
    const acc_def_t *def = find_accumulator(name);
    if (!def)
        return NULL;
    pipeline_acc_t *a = bson_malloc0(sizeof *a);
    a->spec.field = (char *)"v";
    a->spec.def = def;
    num_sum_init(&a->st.sum);
    a->st.list = bson_new();
    return a;
}

void pipeline_acc_add(pipeline_acc_t *a, const bson_value_t *v)
{
    a->spec.def->update(&a->spec, &a->st, v);
}

void pipeline_acc_value(const pipeline_acc_t *a, bson_value_t *out)
{
    bson_t tmp = BSON_INITIALIZER;
    bson_iter_t it;
    a->spec.def->emit(&a->spec, &a->st, &tmp);
    if (bson_iter_init_find(&it, &tmp, "v"))
        bson_value_copy(bson_iter_value(&it), out);
    else
        out->value_type = BSON_TYPE_NULL;
    bson_destroy(&tmp);
}

uint32_t pipeline_acc_list_bytes(const pipeline_acc_t *a)
{
    return a->st.list->len;
}

bool pipeline_acc_is_list(const pipeline_acc_t *a, bool *is_push)
{
    *is_push = a->spec.def->update == push_update;
    return *is_push || a->spec.def->update == add_to_set_update;
}

pipeline_acc_t *pipeline_acc_parse(const char *name, bson_iter_t *arg, expr_t **input,
                                   dberr_t *err)
{
    pipeline_acc_t *a = bson_malloc0(sizeof *a);
    a->owns_spec = true;
    a->st.list = bson_new();
    *input = NULL;
    if (!(a->spec.def = find_accumulator(name)) || !a->spec.def->fold) {
        dberr_set(err, DBERR_INTERNAL_ERROR, "%s is not an object-form accumulator", name);
        goto fail;
    }
    if (!parse_accum_arg(arg, &a->spec, err))
        goto fail;
    *input = a->spec.arg; /* the caller evaluates it per document */
    a->spec.arg = NULL;
    return a;
fail:
    pipeline_acc_destroy(a);
    return NULL;
}

pipeline_acc_t *pipeline_acc_start(const pipeline_acc_t *tmpl, const expr_ctx_t *ctx,
                                   dberr_t *err)
{
    pipeline_acc_t *a = bson_malloc0(sizeof *a);
    a->spec = tmpl->spec;
    a->spec.field = (char *)"v";
    num_sum_init(&a->st.sum);
    a->st.list = bson_new();
    a->st.n = 1;
    if (tmpl->spec.n) { /* n sees no document, as mongod's window functions evaluate it */
        bson_t empty = BSON_INITIALIZER;
        bson_value_t nv;
        expr_ctx_t nctx = *ctx;
        nctx.root = &empty;
        nctx.current = NULL;
        bool ok = expr_eval(tmpl->spec.n, &nctx, &nv, err) && expr_check_n(&nv, &a->st.n, err);
        if (nv.value_type != BSON_TYPE_EOD)
            bson_value_destroy(&nv);
        if (!ok) {
            pipeline_acc_destroy(a);
            return NULL;
        }
    }
    return a;
}

bool pipeline_acc_fold(pipeline_acc_t *a, const bson_value_t *v, const expr_ctx_t *ctx,
                       dberr_t *err)
{
    return a->spec.def->fold(&a->spec, &a->st, v, ctx, err);
}

int64_t pipeline_acc_bytes(const pipeline_acc_t *a)
{
    return a->st.bytes;
}

void pipeline_acc_destroy(pipeline_acc_t *a)
{
    if (!a)
        return;
    if (a->st.val.value_type != BSON_TYPE_EOD)
        bson_value_destroy(&a->st.val);
    bson_destroy(a->st.list);
    kept_free(&a->st);
    if (a->owns_spec)
        accum_free(&a->spec);
    bson_free(a);
}
