/* pipeline/bucket: the stages that group documents into buckets —
 * $bucket (given boundaries), $bucketAuto (evenly filled buckets, optionally
 * on a preferred-number granularity) and $sortByCount — computing their
 * output fields with $group's accumulators (group.c) through an inner
 * pipeline, as mongod builds them from $group. */
#include "doc/pipeline/pipeline-private.h"

#include <math.h>
#include <string.h>

#include "doc/compare.h"
#include "doc/num.h"
#include "util/fiber.h"
#include "util/msort.h"
#include "util/shellfmt.h"

/* A preferred-number series for $bucketAuto's granularity. */
typedef struct granularity {
    const char *name;
    const double *series; /* ascending; NULL for POWERSOF2 */
    size_t n;
} granularity_t;

/* A parsed $bucket, $bucketAuto or $sortByCount. */
struct bucket_spec {
    expr_t *group_by;     /* $bucket, $bucketAuto: the groupBy expression */
    bson_value_t *bounds; /* $bucket: the boundaries, ascending */
    size_t nbounds;
    bson_value_t def;          /* $bucket: the default bucket's _id (EOD: none) */
    int32_t nbuckets;          /* $bucketAuto: buckets */
    const granularity_t *gran; /* $bucketAuto: granularity, or NULL */
    /* $bucket/$bucketAuto: [{$group: {_id: null, <output>}}], run once per
     * bucket; $sortByCount: [{$group: {_id: <expr>, count: {$sum: 1}}},
     * {$sort: {count: -1}}] */
    pipeline_t *inner;
};

/* ------------------------------------------------------------ the series */

/* The series of mongod's granularity rounders (Renard, 1-2-5 and E series,
 * as mongod lists them: its R40 has no 335). */
static const double r5[] = {10, 16, 25, 40, 63};
static const double r10[] = {100, 125, 160, 200, 250, 315, 400, 500, 630, 800};
static const double r20[] = {100, 112, 125, 140, 160, 180, 200, 224, 250, 280,
                             315, 355, 400, 450, 500, 560, 630, 710, 800, 900};
static const double r40[] = {100, 106, 112, 118, 125, 132, 140, 150, 160, 170, 180, 190, 200,
                             212, 224, 236, 250, 265, 280, 300, 315, 355, 375, 400, 425, 450,
                             475, 500, 530, 560, 600, 630, 670, 710, 750, 800, 850, 900, 950};
static const double r80[] = {103, 109, 115, 122, 128, 136, 145, 155, 165, 175, 185, 195, 206, 218,
                             230, 243, 258, 272, 290, 307, 325, 345, 365, 387, 412, 437, 462, 487,
                             515, 545, 575, 615, 650, 690, 730, 775, 825, 875, 925, 975};
static const double s125[] = {10, 20, 50};
static const double e6[] = {10, 15, 22, 33, 47, 68};
static const double e12[] = {10, 12, 15, 18, 22, 27, 33, 39, 47, 56, 68, 82};
static const double e24[] = {10, 11, 12, 13, 15, 16, 18, 20, 22, 24, 27, 30,
                             33, 36, 39, 43, 47, 51, 56, 62, 68, 75, 82, 91};
static const double e48[] = {100, 105, 110, 115, 121, 127, 133, 140, 147, 154, 162, 169,
                             178, 187, 196, 205, 215, 226, 237, 249, 261, 274, 287, 301,
                             316, 332, 348, 365, 383, 402, 422, 442, 464, 487, 511, 536,
                             562, 590, 619, 649, 681, 715, 750, 787, 825, 866, 909, 953};
static const double e96[] = {100, 102, 105, 107, 110, 113, 115, 118, 121, 124, 127, 130, 133, 137,
                             140, 143, 147, 150, 154, 158, 162, 165, 169, 174, 178, 182, 187, 191,
                             196, 200, 205, 210, 215, 221, 226, 232, 237, 243, 249, 255, 261, 267,
                             274, 280, 287, 294, 301, 309, 316, 324, 332, 340, 348, 357, 365, 374,
                             383, 392, 402, 412, 422, 432, 442, 453, 464, 475, 487, 499, 511, 523,
                             536, 549, 562, 576, 590, 604, 619, 634, 649, 665, 681, 698, 715, 732,
                             750, 768, 787, 806, 825, 845, 866, 887, 909, 931, 953, 976};
static const double e192[] = {
    100, 101, 102, 104, 105, 106, 107, 109, 110, 111, 113, 114, 115, 117, 118, 120, 121, 123,
    124, 126, 127, 129, 130, 132, 133, 135, 137, 138, 140, 142, 143, 145, 147, 149, 150, 152,
    154, 156, 158, 160, 162, 164, 165, 167, 169, 172, 174, 176, 178, 180, 182, 184, 187, 189,
    191, 193, 196, 198, 200, 203, 205, 208, 210, 213, 215, 218, 221, 223, 226, 229, 232, 234,
    237, 240, 243, 246, 249, 252, 255, 258, 261, 264, 267, 271, 274, 277, 280, 284, 287, 291,
    294, 298, 301, 305, 309, 312, 316, 320, 324, 328, 332, 336, 340, 344, 348, 352, 357, 361,
    365, 370, 374, 379, 383, 388, 392, 397, 402, 407, 412, 417, 422, 427, 432, 437, 442, 448,
    453, 459, 464, 470, 475, 481, 487, 493, 499, 505, 511, 517, 523, 530, 536, 542, 549, 556,
    562, 569, 576, 583, 590, 597, 604, 612, 619, 626, 634, 642, 649, 657, 665, 673, 681, 690,
    698, 706, 715, 723, 732, 741, 750, 759, 768, 777, 787, 796, 806, 816, 825, 835, 845, 856,
    866, 876, 887, 898, 909, 920, 931, 942, 953, 965, 976, 988};

#define SERIES(name, arr)                                                                          \
    {                                                                                              \
        name, arr, sizeof arr / sizeof arr[0]                                                      \
    }
static const granularity_t granularities[] = {
    SERIES("R5", r5),       SERIES("R10", r10),    SERIES("R20", r20), SERIES("R40", r40),
    SERIES("R80", r80),     SERIES("1-2-5", s125), SERIES("E6", e6),   SERIES("E12", e12),
    SERIES("E24", e24),     SERIES("E48", e48),    SERIES("E96", e96), SERIES("E192", e192),
    {"POWERSOF2", NULL, 0},
};

/* ------------------------------------------------------------- rounding */

/* a * b through the number model (exact for decimals, as Decimal128::multiply). */
static void num_mul(const bson_value_t *a, const bson_value_t *b, bson_value_t *out)
{
    num_acc_t acc;
    num_acc_init(&acc, 1);
    num_acc_mul(&acc, a);
    num_acc_mul(&acc, b);
    num_acc_value(&acc, out);
}

/* What a rounder accepts: a non-negative number (mongod's codes differ
 * between the two rounder kinds). */
static bool gran_check(const granularity_t *g, const bson_value_t *v, dberr_t *err)
{
    bool p2 = g->series == NULL;
    if (!num_is_number(v))
        return dberr_set(err, p2 ? 40265 : 40262,
                         "A granularity rounder can only round numeric values, but found type: %s",
                         shellfmt_type_name(v->value_type));
    double d = num_to_double(v);
    if (isnan(d))
        return dberr_set(err, p2 ? 40266 : 40263, "A granularity rounder cannot round NaN");
    if (d < 0)
        return dberr_set(err, p2 ? 40267 : 40268,
                         "A granularity rounder can only round non-negative numbers");
    return true;
}

/* series[i] * m, as a double or as a decimal (the series as Decimal128(double)). */
static void series_at(const granularity_t *g, size_t i, const bson_value_t *m, bson_value_t *out)
{
    if (m->value_type == BSON_TYPE_DOUBLE) {
        num_value_double(out, g->series[i] * m->value.v_double);
        return;
    }
    bson_value_t s;
    num_value_decimal(&s, num_decimal_from_double(g->series[i], 15));
    num_mul(&s, m, out);
}

/* m * 10 or m / 10. */
static void scale(bson_value_t *m, bool up)
{
    if (m->value_type == BSON_TYPE_DOUBLE) {
        m->value.v_double = up ? m->value.v_double * 10.0 : m->value.v_double / 10.0;
        return;
    }
    bson_value_t ten, r;
    bson_decimal128_t d;
    bson_decimal128_from_string("10", &d);
    num_value_decimal(&ten, d);
    if (up)
        num_mul(m, &ten, &r);
    else
        num_divide(m, &ten, &r);
    *m = r;
}

/* GranularityRounderPreferredNumbers: `v` (positive, finite) rounded up to
 * the next series value strictly above it, or down to the one strictly
 * below, scaled by a power of ten; a decimal stays decimal. */
static void round_series(const granularity_t *g, const bson_value_t *v, bool up, bson_value_t *out)
{
    bson_value_t m, t, prev;
    size_t n = g->n, i;
    if (v->value_type == BSON_TYPE_DECIMAL128) {
        bson_decimal128_t one;
        bson_decimal128_from_string("1", &one);
        num_value_decimal(&m, one);
    } else
        num_value_double(&m, 1.0);
    bson_value_t num = *v;
    if (v->value_type != BSON_TYPE_DECIMAL128)
        num_value_double(&num, num_to_double(v));
    if (up) {
        for (series_at(g, n - 1, &m, &t); num_compare(&num, &t) >= 0; series_at(g, n - 1, &m, &t))
            scale(&m, true);
        for (series_at(g, 0, &m, &t); num_compare(&num, &t) < 0; series_at(g, 0, &m, &t)) {
            prev = t;
            scale(&m, false);
            series_at(g, n - 1, &m, &t);
            if (num_compare(&num, &t) >= 0) {
                *out = prev; /* between the previous min and this max */
                return;
            }
        }
        for (i = 0; i < n; i++) { /* the first series value above */
            series_at(g, i, &m, &t);
            if (num_compare(&num, &t) < 0)
                break;
        }
        *out = t;
        return;
    }
    for (series_at(g, 0, &m, &t); num_compare(&num, &t) <= 0; series_at(g, 0, &m, &t))
        scale(&m, false);
    for (series_at(g, n - 1, &m, &t); num_compare(&num, &t) > 0; series_at(g, n - 1, &m, &t)) {
        prev = t;
        scale(&m, true);
        series_at(g, 0, &m, &t);
        if (num_compare(&num, &t) <= 0) {
            *out = prev;
            return;
        }
    }
    for (i = 1; i < n; i++) { /* the last series value below */
        series_at(g, i, &m, &t);
        if (num_compare(&t, &num) >= 0)
            break;
    }
    series_at(g, i - 1, &m, out);
}

/* 2^e as mongod's $pow(2, e) gives it: int32, int64, then double for an
 * integer exponent, double for a negative one; Decimal128 when `dec`. */
static void pow2(int e, bool dec, bson_value_t *out)
{
    if (dec) {
        char buf[64];
        if (e >= 0 && e <= 62)
            snprintf(buf, sizeof buf, "%lld", (long long)(1LL << e));
        else if (e < 0 && e >= -40)
            snprintf(buf, sizeof buf, "%.*f", -e, ldexp(1.0, e));
        else
            snprintf(buf, sizeof buf, "%.33e", ldexp(1.0, e));
        bson_decimal128_t d;
        bson_decimal128_from_string(buf, &d);
        num_value_decimal(out, d);
    } else if (e >= 0 && e <= 30) {
        memset(out, 0, sizeof *out);
        out->value_type = BSON_TYPE_INT32;
        out->value.v_int32 = (int32_t)1 << e;
    } else if (e >= 0 && e <= 62) {
        memset(out, 0, sizeof *out);
        out->value_type = BSON_TYPE_INT64;
        out->value.v_int64 = (int64_t)1 << e;
    } else {
        num_value_double(out, ldexp(1.0, e));
    }
}

/* GranularityRounderPowersOfTwo: the next power of two above `v` (up) or
 * the last one below it. */
static void round_pow2(const bson_value_t *v, bool up, bson_value_t *out)
{
    int e;
    if (v->value_type == BSON_TYPE_DOUBLE || v->value_type == BSON_TYPE_DECIMAL128) {
        double l = log2(num_to_double(v));
        e = (int)(up ? floor(l) + 1.0 : ceil(l) - 1.0);
    } else {
        uint64_t n = v->value_type == BSON_TYPE_INT32 ? (uint64_t)v->value.v_int32
                                                      : (uint64_t)v->value.v_int64;
        int lz = __builtin_clzll(n), tz = __builtin_ctzll(n);
        e = up ? 64 - lz : (lz + tz == 63 ? 62 - lz : 63 - lz);
    }
    pow2(e, v->value_type == BSON_TYPE_DECIMAL128, out);
}

/* Rounds `v` up or down on `g` into `out` (a number, never owned memory). */
static bool gran_round(const granularity_t *g, const bson_value_t *v, bool up, bson_value_t *out,
                       dberr_t *err)
{
    if (!gran_check(g, v, err))
        return false;
    double d = num_to_double(v);
    if (d == 0.0 || isinf(d)) { /* zero rounds to itself; infinity has no next value */
        *out = *v;
        return true;
    }
    if (g->series)
        round_series(g, v, up, out);
    else
        round_pow2(v, up, out);
    return true;
}

/* ----------------------------------------------------------- the parsing */

/* Builds the inner pipeline holding the stages of array `stages`. */
static pipeline_t *bucket_inner(const bson_t *stages, const bson_t *let, dberr_t *err)
{
    bson_t wrap = BSON_INITIALIZER;
    bson_iter_t it;
    BSON_APPEND_ARRAY(&wrap, "p", stages);
    bson_iter_init_find(&it, &wrap, "p");
    pipeline_t *p = pipeline_build(&it, PIPELINE_AGGREGATE, let ? bson_copy(let) : NULL, err);
    bson_destroy(&wrap);
    return p;
}

/* The per-bucket pipeline [{$group: {_id: null, <output>}}] (output NULL:
 * {count: {$sum: 1}}). */
static pipeline_t *bucket_group_inner(const bson_t *output, const bson_t *let, dberr_t *err)
{
    bson_t stages = BSON_INITIALIZER, st, g, c;
    bson_append_document_begin(&stages, "0", 1, &st);
    bson_append_document_begin(&st, "$group", -1, &g);
    bson_append_null(&g, "_id", 3);
    if (output) {
        bson_iter_t it;
        bson_iter_init(&it, output);
        while (bson_iter_next(&it))
            bson_append_iter(&g, NULL, 0, &it);
    } else {
        bson_append_document_begin(&g, "count", -1, &c);
        bson_append_int32(&c, "$sum", -1, 1);
        bson_append_document_end(&g, &c);
    }
    bson_append_document_end(&st, &g);
    bson_append_document_end(&stages, &st);
    pipeline_t *p = bucket_inner(&stages, let, err);
    bson_destroy(&stages);
    return p;
}

/* A groupBy as mongod accepts one: a "$path" (at least one character after
 * the '$' when `need_name`) or an operator object. */
static bool group_by_ok(const bson_iter_t *it, bool need_name)
{
    if (BSON_ITER_HOLDS_UTF8(it)) {
        const char *s = bson_iter_utf8(it, NULL);
        return s[0] == '$' && (!need_name || s[1] != '\0');
    }
    if (BSON_ITER_HOLDS_DOCUMENT(it)) {
        bson_t d;
        bson_iter_t f;
        pipeline_borrow_doc(it, &d);
        return bson_iter_init(&f, &d) && bson_iter_next(&f) && bson_iter_key(&f)[0] == '$';
    }
    return false;
}

/* The value of the constant expression under `it` into `out` (owned): 1;
 * 0 when it is not constant (the caller sets the error); -1 with `err`
 * when it does not parse or fails. */
static int constant_of(const bson_iter_t *it, bson_value_t *out, dberr_t *err)
{
    expr_t *e = expr_new(it, err);
    if (!e)
        return -1;
    int r = 0;
    if (expr_is_constant(e)) {
        expr_ctx_t ctx = {.root = NULL, .now_ms = 0, .vars = NULL};
        r = expr_eval(e, &ctx, out, err) ? 1 : -1;
    }
    expr_destroy(e);
    return r;
}

/* Sets `err` to `code` with `fmt` (one %s: the type of the value under
 * `it`). */
static bool fail_type(dberr_t *err, int code, const char *fmt, const bson_iter_t *it)
{
    return dberr_set(err, code, fmt, shellfmt_type_name(bson_iter_type(it)));
}

/* Sets `err` to `code` with `fmt` (one %s: the value under `it`). */
static bool fail_value(dberr_t *err, int code, const char *fmt, const bson_iter_t *it)
{
    char *v = shellfmt_value(bson_iter_value((bson_iter_t *)it));
    dberr_set(err, code, fmt, v);
    bson_free(v);
    return false;
}

/* The `output` field under `it` into *output (borrowed): an object, else
 * `code` with `fmt` (its %s the type found). */
static bool bucket_output_parse(const bson_iter_t *it, int code, const char *fmt, bson_t *output,
                                dberr_t *err)
{
    if (!BSON_ITER_HOLDS_DOCUMENT(it))
        return fail_type(err, code, fmt, it);
    pipeline_borrow_doc(it, output);
    return true;
}

static bool bucket_parse_bounds(struct bucket_spec *b, const bson_iter_t *arg, dberr_t *err)
{
    bson_iter_t el;
    if (!BSON_ITER_HOLDS_ARRAY(arg))
        return fail_type(err, 40200,
                         "The $bucket 'boundaries' field must be an array, but found type: %s.",
                         arg);
    bson_iter_recurse(arg, &el);
    while (bson_iter_next(&el)) {
        b->bounds = bson_realloc(b->bounds, (b->nbounds + 1) * sizeof *b->bounds);
        int r = constant_of(&el, &b->bounds[b->nbounds], err);
        if (r < 0)
            return false;
        if (r == 0)
            return fail_value(err, 40191,
                              "The $bucket 'boundaries' field must be an array of constant "
                              "values, but found value: %s.",
                              &el);
        b->nbounds++;
    }
    if (b->nbounds < 2)
        return dberr_set(err, 40192,
                         "The $bucket 'boundaries' field must have at least 2 values, but found "
                         "%zu value(s).",
                         b->nbounds);
    for (size_t i = 1; i < b->nbounds; i++) {
        const bson_value_t *lo = &b->bounds[i - 1], *hi = &b->bounds[i];
        if (compare_type_rank(lo->value_type) != compare_type_rank(hi->value_type))
            return dberr_set(err, 40193,
                             "All values in the the 'boundaries' option to $bucket must have the "
                             "same type. Found conflicting types %s and %s.",
                             shellfmt_type_name(lo->value_type),
                             shellfmt_type_name(hi->value_type));
        if (compare_values(lo, hi) >= 0) {
            char *l = shellfmt_value(lo), *h = shellfmt_value(hi);
            dberr_set(err, 40194,
                      "The 'boundaries' option to $bucket must be sorted, but elements %zu and %zu "
                      "are not in ascending order (%s is not less than %s).",
                      i - 1, i, l, h);
            bson_free(l);
            bson_free(h);
            return false;
        }
    }
    return true;
}

/* What $bucket's and $bucketAuto's option rows read into. */
struct bucket_args {
    struct bucket_spec *b;
    bson_iter_t group_by; /* $bucket: compiled after the checks */
    bool have_group_by, have_buckets, have_output;
    bson_t output; /* borrowed */
};

/* What tells $bucket and $bucketAuto apart while parsing: the error for a
 * non-object argument, the option rows, the error for an unknown option. */
struct bucket_kind {
    int not_object_code;
    const char *not_object_fmt; /* its %s the type found */
    const pipeline_option_t *options;
    int unknown_code;
    const char *unknown_fmt; /* its %s the option's name */
};

/* Reads the argument `arg` of `s` through the rows of `kind` into `a`,
 * with a->b the new spec. */
static bool bucket_args_parse(stage_t *s, const bson_iter_t *arg, const struct bucket_kind *kind,
                              struct bucket_args *a, dberr_t *err)
{
    bson_t spec;
    if (!BSON_ITER_HOLDS_DOCUMENT(arg))
        return fail_type(err, kind->not_object_code, kind->not_object_fmt, arg);
    a->b = s->u.bucket = bson_malloc0(sizeof *a->b);
    a->b->def.value_type = BSON_TYPE_EOD;
    pipeline_borrow_doc(arg, &spec);
    return pipeline_options_parse(&spec, kind->options, kind->unknown_code, kind->unknown_fmt, a,
                                  err);
}

static bool bucket_opt_group_by(void *args, const bson_iter_t *it, dberr_t *err)
{
    struct bucket_args *a = args;
    if (!group_by_ok(it, false))
        return fail_value(err, 40202,
                          "The $bucket 'groupBy' field must be defined as a $-prefixed path or an "
                          "expression, but found: %s.",
                          it);
    a->group_by = *it;
    a->have_group_by = true;
    return true;
}

static bool bucket_opt_boundaries(void *args, const bson_iter_t *it, dberr_t *err)
{
    return bucket_parse_bounds(((struct bucket_args *)args)->b, it, err);
}

static bool bucket_opt_default(void *args, const bson_iter_t *it, dberr_t *err)
{
    struct bucket_spec *b = ((struct bucket_args *)args)->b;
    if (b->def.value_type != BSON_TYPE_EOD)
        bson_value_destroy(&b->def);
    b->def.value_type = BSON_TYPE_EOD;
    int r = constant_of(it, &b->def, err);
    if (r < 0)
        return false;
    if (r == 0)
        return fail_value(err, 40195,
                          "The $bucket 'default' field must be a constant expression, but found: "
                          "%s.",
                          it);
    return true;
}

static bool bucket_opt_output(void *args, const bson_iter_t *it, dberr_t *err)
{
    struct bucket_args *a = args;
    a->have_output = true;
    return bucket_output_parse(it, 40196,
                               "The $bucket 'output' field must be an object, but found type: %s.",
                               &a->output, err);
}

static const struct bucket_kind bucket_kind = {
    .not_object_code = 40201,
    .not_object_fmt = "Argument to $bucket stage must be an object, but found type: %s.",
    .options = (const pipeline_option_t[]){{"groupBy", bucket_opt_group_by},
                                           {"boundaries", bucket_opt_boundaries},
                                           {"default", bucket_opt_default},
                                           {"output", bucket_opt_output},
                                           {NULL, NULL}},
    .unknown_code = 40197,
    .unknown_fmt = "Unrecognized option to $bucket: %s.",
};

static bool bucket_parse(stage_t *s, bson_iter_t *arg, const bson_t *let, dberr_t *err)
{
    struct bucket_args a = {0};
    if (!bucket_args_parse(s, arg, &bucket_kind, &a, err))
        return false;
    struct bucket_spec *b = a.b;
    if (!a.have_group_by || b->nbounds == 0)
        return dberr_set(err, 40198,
                         "$bucket requires 'groupBy' and 'boundaries' to be specified.");
    const bson_value_t *lo = &b->bounds[0], *hi = &b->bounds[b->nbounds - 1];
    if (b->def.value_type != BSON_TYPE_EOD &&
        compare_type_rank(b->def.value_type) == compare_type_rank(lo->value_type) &&
        !(compare_values(&b->def, lo) < 0 || compare_values(&b->def, hi) >= 0))
        return dberr_set(err, 40199,
                         "The $bucket 'default' field must be less than the lowest boundary or "
                         "greater than or equal to the highest boundary.");
    if (!(b->group_by = expr_new(&a.group_by, err)))
        return false;
    return (b->inner = bucket_group_inner(a.have_output ? &a.output : NULL, let, err)) != NULL;
}

static bool bucket_auto_opt_group_by(void *args, const bson_iter_t *it, dberr_t *err)
{
    struct bucket_spec *b = ((struct bucket_args *)args)->b;
    if (!group_by_ok(it, true))
        return fail_value(err, 40239,
                          "The $bucketAuto 'groupBy' field must be defined as a $-prefixed path or "
                          "an expression object, but found: %s",
                          it);
    expr_destroy(b->group_by);
    return (b->group_by = expr_new(it, err)) != NULL;
}

static bool bucket_auto_opt_buckets(void *args, const bson_iter_t *it, dberr_t *err)
{
    struct bucket_args *a = args;
    const bson_value_t *v = bson_iter_value((bson_iter_t *)it);
    int64_t n;
    if (!num_is_number(v))
        return dberr_set(err, 40241,
                         "The $bucketAuto 'buckets' field must be a numeric value, but found "
                         "type: %s",
                         shellfmt_type_name(v->value_type));
    if (!num_to_int64_whole(v, &n) || n < INT32_MIN || n > INT32_MAX)
        return fail_value(err, 40242,
                          "The $bucketAuto 'buckets' field must be representable as a 32-bit "
                          "integer, but found %s",
                          it);
    a->b->nbuckets = (int32_t)n;
    a->have_buckets = true;
    return true;
}

static bool bucket_auto_opt_output(void *args, const bson_iter_t *it, dberr_t *err)
{
    struct bucket_args *a = args;
    a->have_output = true;
    return bucket_output_parse(
        it, 40244, "The $bucketAuto 'output' field must be an object, but found type: %s",
        &a->output, err);
}

static bool bucket_auto_opt_granularity(void *args, const bson_iter_t *it, dberr_t *err)
{
    struct bucket_spec *b = ((struct bucket_args *)args)->b;
    if (!BSON_ITER_HOLDS_UTF8(it))
        return fail_type(err, 40261,
                         "The $bucketAuto 'granularity' field must be a string, but found type: %s",
                         it);
    const char *g = bson_iter_utf8(it, NULL);
    b->gran = NULL;
    for (size_t i = 0; i < sizeof granularities / sizeof granularities[0]; i++)
        if (!strcmp(granularities[i].name, g))
            b->gran = &granularities[i];
    if (!b->gran)
        return dberr_set(err, 40257, "Unknown rounding granularity '%s'", g);
    return true;
}

static const struct bucket_kind bucket_auto_kind = {
    .not_object_code = 40240,
    .not_object_fmt = "The argument to $bucketAuto must be an object, but found type: %s",
    .options = (const pipeline_option_t[]){{"groupBy", bucket_auto_opt_group_by},
                                           {"buckets", bucket_auto_opt_buckets},
                                           {"output", bucket_auto_opt_output},
                                           {"granularity", bucket_auto_opt_granularity},
                                           {NULL, NULL}},
    .unknown_code = 40245,
    .unknown_fmt = "Unrecognized option to $bucketAuto: %s",
};

static bool bucket_auto_parse(stage_t *s, bson_iter_t *arg, const bson_t *let, dberr_t *err)
{
    struct bucket_args a = {0};
    if (!bucket_args_parse(s, arg, &bucket_auto_kind, &a, err))
        return false;
    struct bucket_spec *b = a.b;
    if (!b->group_by || !a.have_buckets)
        return dberr_set(err, 40246,
                         "$bucketAuto requires 'groupBy' and 'buckets' to be specified");
    if (b->nbuckets <= 0)
        return dberr_set(err, 40243,
                         "The $bucketAuto 'buckets' field must be greater than 0, but found: %d",
                         b->nbuckets);
    return (b->inner = bucket_group_inner(a.have_output ? &a.output : NULL, let, err)) != NULL;
}

static bool sort_by_count_parse(stage_t *s, bson_iter_t *arg, const bson_t *let, dberr_t *err)
{
    static const char msg[] = "the sortByCount field must be defined as a $-prefixed path or an "
                              "expression inside an object";
    if (BSON_ITER_HOLDS_DOCUMENT(arg)) {
        if (!group_by_ok(arg, false))
            return dberr_set(err, 40147, msg);
    } else if (BSON_ITER_HOLDS_UTF8(arg)) {
        if (!group_by_ok(arg, false))
            return dberr_set(err, 40148, msg);
    } else {
        return dberr_set(err, 40149,
                         "the sortByCount field must be specified as a string or as an object");
    }
    struct bucket_spec *b = s->u.bucket = bson_malloc0(sizeof *b);
    b->def.value_type = BSON_TYPE_EOD;
    bson_t stages = BSON_INITIALIZER, st, g, c, so;
    bson_append_document_begin(&stages, "0", 1, &st);
    bson_append_document_begin(&st, "$group", -1, &g);
    bson_append_value(&g, "_id", 3, bson_iter_value(arg));
    bson_append_document_begin(&g, "count", -1, &c);
    bson_append_int32(&c, "$sum", -1, 1);
    bson_append_document_end(&g, &c);
    bson_append_document_end(&st, &g);
    bson_append_document_end(&stages, &st);
    bson_append_document_begin(&stages, "1", 1, &st);
    bson_append_document_begin(&st, "$sort", -1, &so);
    bson_append_int32(&so, "count", -1, -1);
    bson_append_document_end(&st, &so);
    bson_append_document_end(&stages, &st);
    b->inner = bucket_inner(&stages, let, err);
    bson_destroy(&stages);
    return b->inner != NULL;
}

static bool bucket_check_vars(stage_t *s, const bson_t *let, dberr_t *err)
{
    return expr_check_vars(s->u.bucket->group_by, let, err);
}

static void bucket_free(stage_t *s)
{
    struct bucket_spec *b = s->u.bucket;
    if (!b)
        return;
    expr_destroy(b->group_by);
    for (size_t i = 0; i < b->nbounds; i++)
        if (b->bounds[i].value_type != BSON_TYPE_EOD)
            bson_value_destroy(&b->bounds[i]);
    bson_free(b->bounds);
    if (b->def.value_type != BSON_TYPE_EOD)
        bson_value_destroy(&b->def);
    pipeline_destroy(b->inner);
    bson_free(b);
}

/* ------------------------------------------------------------- running */

/* Runs the per-bucket $group over `docs` (consumed) and emits its result
 * with `id` as _id. `used` sums what the buckets emitted: mongod groups
 * every bucket in one $group, so together they stay within its limit. */
static bool bucket_emit(const struct bucket_spec *b, const expr_ctx_t *ctx, doclist_t *docs,
                        const bson_value_t *id, int64_t *used, doclist_t *out, dberr_t *err)
{
    bool ok = pipeline_run_nested(b->inner, ctx, docs, err);
    if (ok && docs->len == 1 &&
        (*used += (int64_t)docs->docs[0]->len) > pipeline_limits.group_bytes)
        ok = dberr_set(err, DBERR_QUERY_EXCEEDED_MEMORY_NO_DISK,
                       ctx->allow_disk_use
                           ? "Exceeded memory limit for $group (%lld bytes), and atomdb cannot "
                             "spill to disk: allowDiskUse is not implemented (raise "
                             "internalDocumentSourceGroupMaxMemoryBytes)"
                           : "Exceeded memory limit for $group, but didn't allow external sort. "
                             "Pass allowDiskUse:true to opt in.",
                       (long long)pipeline_limits.group_bytes);
    if (ok && docs->len == 1) {
        bson_t *d = bson_new();
        bson_iter_t it;
        bson_append_value(d, "_id", 3, id);
        bson_iter_init(&it, docs->docs[0]);
        while (bson_iter_next(&it))
            if (strcmp(bson_iter_key(&it), "_id") != 0)
                bson_append_iter(d, NULL, 0, &it);
        doclist_push(out, d);
    }
    doclist_destroy(docs);
    return ok;
}

/* The $bucket a value falls in: the index of its lower boundary, or -1. */
static long bucket_find(const struct bucket_spec *b, const bson_value_t *v)
{
    if (v->value_type == BSON_TYPE_EOD || v->value_type == BSON_TYPE_UNDEFINED ||
        compare_values(v, &b->bounds[0]) < 0 || compare_values(v, &b->bounds[b->nbounds - 1]) >= 0)
        return -1;
    size_t lo = 0, hi = b->nbounds - 1; /* bounds[lo] <= v < bounds[hi] */
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (compare_values(v, &b->bounds[mid]) >= 0)
            lo = mid;
        else
            hi = mid;
    }
    return (long)lo;
}

static bool bucket_run(const stage_t *s, const expr_ctx_t *base, doclist_t *in, doclist_t *out,
                       dberr_t *err)
{
    const struct bucket_spec *b = s->u.bucket;
    size_t nb = b->nbounds - 1; /* lists[nb]: the default bucket */
    doclist_t *lists = bson_malloc0((nb + 1) * sizeof *lists);
    bool ok = true;
    for (size_t i = 0; ok && i < in->len; i++) {
        if (!(ok = fiber_check(err)))
            break;
        expr_ctx_t ctx = *base;
        ctx.root = in->docs[i];
        bson_value_t v;
        if (!(ok = expr_eval(b->group_by, &ctx, &v, err)))
            break;
        long k = bucket_find(b, &v);
        if (v.value_type != BSON_TYPE_EOD)
            bson_value_destroy(&v);
        if (k < 0 && b->def.value_type == BSON_TYPE_EOD) {
            ok = dberr_set(err, 40066,
                           "$switch could not find a matching branch for an input, "
                           "and no default was specified.");
            break;
        }
        doclist_push(&lists[k < 0 ? nb : (size_t)k], in->docs[i]);
        in->docs[i] = NULL;
    }
    /* output sorted by _id: the default goes first when it sorts first */
    bool def_first =
        b->def.value_type != BSON_TYPE_EOD && compare_values(&b->def, &b->bounds[0]) < 0;
    int64_t used = 0;
    if (ok && def_first && lists[nb].len)
        ok = bucket_emit(b, base, &lists[nb], &b->def, &used, out, err);
    for (size_t k = 0; ok && k < nb; k++)
        if (lists[k].len)
            ok = bucket_emit(b, base, &lists[k], &b->bounds[k], &used, out, err);
    if (ok && !def_first && lists[nb].len)
        ok = bucket_emit(b, base, &lists[nb], &b->def, &used, out, err);
    for (size_t k = 0; k <= nb; k++)
        doclist_destroy(&lists[k]);
    bson_free(lists);
    return ok;
}

/* One document of a $bucketAuto with its groupBy value. */
typedef struct auto_entry {
    bson_value_t key; /* owned */
    bson_t *doc;      /* owned until moved into a bucket */
} auto_entry_t;

/* msort order of auto_entry_t by key. */
static int auto_entry_cmp(const void *a, const void *b, void *ctx)
{
    (void)ctx;
    return compare_values(&((const auto_entry_t *)a)->key, &((const auto_entry_t *)b)->key);
}

/* Evaluates the groupBy of every input document into `e` (documents moved
 * there), within the stage's memory limit. */
static bool auto_keys(const struct bucket_spec *b, const expr_ctx_t *base, doclist_t *in,
                      auto_entry_t *e, size_t *n, dberr_t *err)
{
    int64_t bytes = 0;
    for (size_t i = 0; i < in->len; i++) {
        if (!fiber_check(err))
            return false;
        expr_ctx_t ctx = *base;
        ctx.root = in->docs[i];
        bson_value_t *k = &e[*n].key;
        if (!expr_eval(b->group_by, &ctx, k, err))
            return false;
        e[*n].doc = in->docs[i];
        in->docs[i] = NULL;
        (*n)++;
        if (b->gran) {
            bool bad = !num_is_number(k) || isnan(num_to_double(k)) || num_to_double(k) < 0;
            if (!num_is_number(k))
                dberr_set(err, 40258,
                          "$bucketAuto can specify a 'granularity' with numeric boundaries only, "
                          "but found a value with type: %s",
                          shellfmt_type_name(k->value_type));
            else if (isnan(num_to_double(k)))
                dberr_set(err, 40259,
                          "$bucketAuto can specify a 'granularity' with numeric "
                          "boundaries only, but found a NaN");
            else if (bad)
                dberr_set(err, 40260,
                          "$bucketAuto can specify a 'granularity' with non-negative "
                          "numbers only, but found a negative number");
            if (bad)
                return false;
        }
        if (k->value_type == BSON_TYPE_EOD) /* missing groups as null, as $group */
            k->value_type = BSON_TYPE_NULL;
        bytes += (int64_t)(e[*n - 1].doc->len + sizeof *e);
        if (bytes > pipeline_limits.group_bytes)
            return dberr_set(err, DBERR_QUERY_EXCEEDED_MEMORY_NO_DISK,
                             "$bucketAuto exceeded its memory limit of %lld bytes "
                             "(internalDocumentSourceGroupMaxMemoryBytes)%s",
                             (long long)pipeline_limits.group_bytes,
                             base->allow_disk_use ? ", and atomdb cannot spill to disk"
                                                  : ", but didn't allow external sort. Pass "
                                                    "allowDiskUse:true to opt in.");
    }
    return true;
}

/* Emits the bucket of entries [from, to) with bounds {min, max}. */
static bool auto_emit(const struct bucket_spec *b, const expr_ctx_t *ctx, auto_entry_t *e,
                      size_t from, size_t to, const bson_value_t *min, const bson_value_t *max,
                      int64_t *used, doclist_t *out, dberr_t *err)
{
    doclist_t docs;
    bson_t id = BSON_INITIALIZER;
    bson_value_t idv;
    doclist_init(&docs);
    for (size_t i = from; i < to; i++) {
        doclist_push(&docs, e[i].doc);
        e[i].doc = NULL;
    }
    bson_append_value(&id, "min", 3, min);
    bson_append_value(&id, "max", 3, max);
    memset(&idv, 0, sizeof idv);
    idv.value_type = BSON_TYPE_DOCUMENT;
    idv.value.v_doc.data = (uint8_t *)bson_get_data(&id);
    idv.value.v_doc.data_len = id.len;
    bool ok = bucket_emit(b, ctx, &docs, &idv, used, out, err);
    bson_destroy(&id);
    return ok;
}

/* mongod's DocumentSourceBucketAuto over the sorted entries: each bucket
 * takes round(n / buckets) documents (the last takes the rest), then every
 * following document with the same key (or, with a granularity, below the
 * rounded-up boundary); a bucket's max is the next bucket's min. */
static bool auto_buckets(const struct bucket_spec *b, const expr_ctx_t *ctx, auto_entry_t *e,
                         size_t n, doclist_t *out, dberr_t *err)
{
    int64_t approx = llround((double)n / (double)b->nbuckets);
    bson_value_t prev_max, min, max;
    bool have_prev = false;
    int64_t used = 0;
    size_t i = 0;
    if (approx < 1)
        approx = 1;
    for (int32_t num = 1; num <= b->nbuckets && i < n; num++) {
        size_t from = i;
        const bson_value_t *last = &e[i++].key;
        bool is_last = num == b->nbuckets;
        for (int64_t c = 1; i < n && (c < approx || is_last); c++)
            last = &e[i++].key;
        if (!b->gran) {
            while (i < n && compare_values(&e[i].key, last) == 0)
                last = &e[i++].key;
            min = e[from].key;
            max = i < n ? e[i].key : *last;
        } else {
            bson_value_t bound;
            if (!gran_round(b->gran, last, true, &bound, err))
                return false;
            while (i < n &&
                   (compare_values(&bound, &e[i].key) > 0 || compare_values(last, &e[i].key) == 0))
                last = &e[i++].key;
            if (num_to_double(&bound) == 0.0 && i < n) {
                if (!gran_round(b->gran, &e[i].key, false, &max, err))
                    return false;
            } else {
                max = bound;
            }
            if (have_prev)
                min = prev_max;
            else if (!gran_round(b->gran, &e[from].key, false, &min, err))
                return false;
            prev_max = max; /* rounded values are scalars: no owned memory */
            have_prev = true;
        }
        /* min/max may point into keys of the bucket: emit before freeing */
        if (!auto_emit(b, ctx, e, from, i, &min, &max, &used, out, err))
            return false;
    }
    return true;
}

static bool bucket_auto_run(const stage_t *s, const expr_ctx_t *ctx, doclist_t *in, doclist_t *out,
                            dberr_t *err)
{
    const struct bucket_spec *b = s->u.bucket;
    size_t n = 0;
    auto_entry_t *e = bson_malloc0((in->len ? in->len : 1) * sizeof *e);
    bool ok =
        auto_keys(b, ctx, in, e, &n, err) && msort(e, n, sizeof *e, auto_entry_cmp, NULL, err);
    ok = ok && auto_buckets(b, ctx, e, n, out, err);
    for (size_t i = 0; i < n; i++) {
        if (e[i].key.value_type != BSON_TYPE_EOD)
            bson_value_destroy(&e[i].key);
        if (e[i].doc)
            bson_destroy(e[i].doc);
    }
    bson_free(e);
    return ok;
}

static bool sort_by_count_run(const stage_t *s, const expr_ctx_t *ctx, doclist_t *in,
                              doclist_t *out, dberr_t *err)
{
    doclist_t docs;
    doclist_init(&docs);
    pipeline_pass_all(in, &docs);
    bool ok = pipeline_run_nested(s->u.bucket->inner, ctx, &docs, err);
    if (ok)
        pipeline_pass_all(&docs, out);
    doclist_destroy(&docs);
    return ok;
}

const stage_def_t pipeline_bucket_stages[] = {
    {"$bucket", bucket_parse, bucket_run, bucket_check_vars, bucket_free, 0},
    {"$bucketAuto", bucket_auto_parse, bucket_auto_run, bucket_check_vars, bucket_free, 0},
    {"$sortByCount", sort_by_count_parse, sort_by_count_run, NULL, bucket_free, 0},
    {NULL, NULL, NULL, NULL, NULL, 0},
};
