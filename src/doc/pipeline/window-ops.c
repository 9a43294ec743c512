/* pipeline/window-ops: the window functions of $setWindowFields, one row
 * each in a table — the $group accumulators folded over each document's
 * window, the statistics ($stdDev*, $covariance*, $integral, $derivative),
 * the ranks, $shift, $expMovingAvg, and $locf / $linearFill for $fill. */
#include "doc/pipeline/window-private.h"

#include <math.h>
#include <string.h>

#include "doc/compare.h"
#include "util/fiber.h"
#include "util/shellfmt.h"
#include "util/table.h"

/* --------------------------------------------------------------- parse */

/* {$fn: expr} */
static bool parse_expr(window_fn_t *f, bson_iter_t *it, const window_spec_t *w, dberr_t *err)
{
    return (f->arg = expr_new(it, err)) != NULL;
}

/* A $group accumulator over a window; $count takes {}. */
static bool parse_acc(window_fn_t *f, bson_iter_t *it, const window_spec_t *w, dberr_t *err)
{
    f->acc_name = f->def->name;
    if (!strcmp(f->def->name, "$count")) {
        bson_t empty;
        if (!BSON_ITER_HOLDS_DOCUMENT(it) || (pipeline_borrow_doc(it, &empty), !bson_empty(&empty)))
            return dberr_set(err, DBERR_TYPE_MISMATCH, "$count takes no arguments, i.e. $count:{}");
        return true;
    }
    return parse_expr(f, it, w, err);
}

/* $topN $bottomN $top $bottom $firstN $lastN $minN $maxN $median
 * $percentile: their $group object form, checked as $group checks it. */
static bool parse_accx(window_fn_t *f, bson_iter_t *it, const window_spec_t *w, dberr_t *err)
{
    return (f->acc_tmpl = pipeline_acc_parse(f->def->name, it, &f->arg, err)) != NULL;
}

/* $rank, $denseRank, $documentNumber: {} */
static bool parse_rank(window_fn_t *f, bson_iter_t *it, const window_spec_t *w, dberr_t *err)
{
    bson_t empty;
    if (!BSON_ITER_HOLDS_DOCUMENT(it) || (pipeline_borrow_doc(it, &empty), !bson_empty(&empty)))
        return dberr_set(err, 5371603, "%s must be specified with '{}' as the value", f->def->name);
    return true;
}

/* $covariancePop / $covarianceSamp: [x, y] */
static bool parse_cov(window_fn_t *f, bson_iter_t *it, const window_spec_t *w, dberr_t *err)
{
    bson_iter_t a;
    int n = 0;
    if (BSON_ITER_HOLDS_ARRAY(it) && bson_iter_recurse(it, &a))
        while (bson_iter_next(&a)) {
            if (n == 0 && !(f->arg = expr_new(&a, err)))
                return false;
            if (n == 1 && !(f->arg2 = expr_new(&a, err)))
                return false;
            n++;
        }
    if (n != 2)
        return dberr_set(err, DBERR_FAILED_TO_PARSE,
                         "%s requires an array of exactly two expressions", f->def->name);
    return true;
}

/* The sub-document of a function taking named arguments, iterated. */
static bool named_args(const window_fn_t *f, bson_iter_t *it, bson_iter_t *out, dberr_t *err)
{
    if (!BSON_ITER_HOLDS_DOCUMENT(it))
        return dberr_set(err, DBERR_FAILED_TO_PARSE,
                         "%s must have exactly one argument that is an object", f->def->name);
    bson_iter_recurse(it, out);
    return true;
}

/* True when the expression under `it` reads no field or variable: no
 * string starting with '$' outside a $literal. */
static bool is_constant(const bson_iter_t *it)
{
    if (BSON_ITER_HOLDS_UTF8(it))
        return bson_iter_utf8(it, NULL)[0] != '$';
    if (!BSON_ITER_HOLDS_DOCUMENT(it) && !BSON_ITER_HOLDS_ARRAY(it))
        return true;
    bson_iter_t c;
    bson_iter_recurse(it, &c);
    while (bson_iter_next(&c))
        if (strcmp(bson_iter_key(&c), "$literal") != 0 && !is_constant(&c))
            return false;
    return true;
}

/* The value of a constant expression under `it` (evaluated against {}). */
static bool constant_of(bson_iter_t *it, bson_value_t *out, dberr_t *err)
{
    if (!is_constant(it))
        return dberr_set(err, DBERR_FAILED_TO_PARSE,
                         "'$shift:default' expression must yield a constant value.");
    expr_t *e = expr_new(it, err);
    if (!e)
        return false;
    bson_t empty = BSON_INITIALIZER;
    expr_ctx_t c = {.root = &empty};
    bool ok = expr_eval(e, &c, out, err);
    expr_destroy(e);
    return ok;
}

/* $shift: {output, by, default} */
static bool parse_shift(window_fn_t *f, bson_iter_t *it, const window_spec_t *w, dberr_t *err)
{
    bson_iter_t a;
    bool has_by = false;
    if (!named_args(f, it, &a, err))
        return false;
    while (bson_iter_next(&a)) {
        const char *k = bson_iter_key(&a);
        if (!strcmp(k, "output")) {
            if (!(f->arg = expr_new(&a, err)))
                return false;
        } else if (!strcmp(k, "by")) {
            if (!num_to_int64_whole(bson_iter_value(&a), &f->by) || f->by < INT32_MIN ||
                f->by > INT32_MAX) {
                char *shown = shellfmt_value(bson_iter_value(&a));
                dberr_set(err, DBERR_FAILED_TO_PARSE,
                          "'$shift:by' field must be an integer, but found by: %s", shown);
                bson_free(shown);
                return false;
            }
            has_by = true;
        } else if (!strcmp(k, "default")) {
            if (!constant_of(&a, &f->dflt, err))
                return false;
        } else {
            return dberr_set(err, DBERR_FAILED_TO_PARSE, "Unknown argument in $shift: %s", k);
        }
    }
    if (!f->arg)
        return dberr_set(err, DBERR_FAILED_TO_PARSE, "$shift requires an 'output' expression.");
    if (!has_by)
        return dberr_set(err, DBERR_FAILED_TO_PARSE, "$shift requires 'by' as an integer value.");
    return true;
}

/* $expMovingAvg: {input, N | alpha} */
static bool parse_ema(window_fn_t *f, bson_iter_t *it, const window_spec_t *w, dberr_t *err)
{
    static const char *const names[] = {"input", "N", "alpha"};
    bson_iter_t input, nv, av;
    bson_iter_t *const found[] = {&input, &nv, &av};
    if (!BSON_ITER_HOLDS_DOCUMENT(it))
        return dberr_set(err, DBERR_FAILED_TO_PARSE,
                         "$expMovingAvg must have exactly one argument that is an object");
    if (pipeline_fields_pick(it, names, 3, found) != 2 || !input.raw)
        return dberr_set(err, DBERR_FAILED_TO_PARSE,
                         "$expMovingAvg sub object must have exactly two fields: An 'input' "
                         "field, and either an 'N' field or an 'alpha' field");
    if (!(f->arg = expr_new(&input, err)))
        return false;
    if (nv.raw) {
        const bson_value_t *v = bson_iter_value(&nv);
        int64_t n;
        if (!num_is_number(v))
            return dberr_set(err, DBERR_FAILED_TO_PARSE,
                             "'N' field must be an integer, but found type %s",
                             shellfmt_type_name(v->value_type));
        if (!num_to_int64_whole(v, &n))
            return dberr_set(err, DBERR_FAILED_TO_PARSE,
                             "'N' field must be an integer, but found  N: %g. To use a "
                             "non-integer, use the 'alpha' argument instead",
                             num_to_double(v));
        if (n <= 0)
            return dberr_set(err, DBERR_FAILED_TO_PARSE, "'N' must be greater than zero. Got %lld",
                             (long long)n);
        bson_value_t two = {.value_type = BSON_TYPE_DECIMAL128},
                     np1 = {.value_type = BSON_TYPE_INT64}, r;
        bson_decimal128_from_string("2", &two.value.v_decimal128);
        np1.value.v_int64 = n + 1;
        num_divide(&two, &np1, &r);
        f->alpha = r.value.v_decimal128;
        return true;
    }
    if (av.raw) {
        const bson_value_t *v = bson_iter_value(&av);
        if (!num_is_number(v))
            return dberr_set(err, DBERR_FAILED_TO_PARSE, "'alpha' must be a number");
        long double x = num_to_ld(v);
        if (!(x > 0 && x < 1))
            return dberr_set(err, DBERR_FAILED_TO_PARSE,
                             "'alpha' must be between 0 and 1 (exclusive), found alpha: %Lg", x);
        f->alpha = num_to_decimal(v);
        return true;
    }
    return dberr_set(err, DBERR_FAILED_TO_PARSE,
                     "Got unrecognized field in $expMovingAvg$expMovingAvg sub object must have "
                     "exactly two fields: An 'input' field, and either an 'N' field or an "
                     "'alpha' field");
}

/* $derivative / $integral: {input, unit} */
static bool parse_calculus(window_fn_t *f, bson_iter_t *it, const window_spec_t *w, dberr_t *err)
{
    bson_iter_t a;
    if (!named_args(f, it, &a, err))
        return false;
    while (bson_iter_next(&a)) {
        const char *k = bson_iter_key(&a);
        if (!strcmp(k, "input")) {
            if (f->arg)
                return dberr_set(err, DBERR_FAILED_TO_PARSE, "%s got 'input' twice", f->def->name);
            if (!(f->arg = expr_new(&a, err)))
                return false;
        } else if (!strcmp(k, "unit")) {
            if (!BSON_ITER_HOLDS_UTF8(&a))
                return dberr_set(err, DBERR_FAILED_TO_PARSE, "%s 'unit' must be a string",
                                 f->def->name);
            const char *u = bson_iter_utf8(&a, NULL);
            int64_t ms = window_unit_ms(u);
            if (ms < 0)
                return dberr_set(err, DBERR_FAILED_TO_PARSE, "unknown time unit value: %s", u);
            if (ms == 0)
                return dberr_set(err, 5490704,
                                 "unit must be one of the following: week, day, hour, minute, "
                                 "second, millisecond");
            f->unit_ms = ms;
        } else {
            return dberr_set(err, DBERR_FAILED_TO_PARSE, "%s got unexpected argument: %s",
                             f->def->name, k);
        }
    }
    if (!f->arg)
        return dberr_set(err, DBERR_FAILED_TO_PARSE, "%s requires an 'input' expression",
                         f->def->name);
    return true;
}

/* --------------------------------------------------------------- folds */

/* A function folded over each document's window: grown while the window
 * keeps its start (["unbounded", ...] costs one pass), rebuilt otherwise. */
typedef struct fold fold_t;
struct fold {
    void (*reset)(fold_t *s);
    void (*add)(fold_t *s, size_t i);
    bool (*value)(fold_t *s, bson_value_t *out, dberr_t *err);
    const window_fn_t *f;
    const window_part_t *p;
    const bson_value_t *vals, *vals2;
    double *xs;           /* $integral: the sortBy values (ms for dates) */
    pipeline_acc_t *acc;  /* the $group accumulator */
    double n, mx, my, m2; /* Welford: count, means, second (co-)moment */
    bool has_prev;
    size_t prev;
    double sum;
    bool unordered; /* the result does not depend on the order values come in */
    bool has_dec;   /* $integral: a Decimal128 input was seen: dec_sum holds the total */
    num_acc_t dec_sum;
    bson_value_t last; /* $topN & co.: the value since the last add (EOD: none) */
    bool failed;       /* $topN & co.: an add failed; err holds why */
    dberr_t *err;
};

/* `x` as a number value: an int64 when whole (date spans in ms, integer
 * sort keys), so Decimal128 arithmetic with it stays exact. */
static void number_of(double x, bson_value_t *out)
{
    if (x == (double)(int64_t)x && x > -9e18 && x < 9e18) {
        out->value_type = BSON_TYPE_INT64;
        out->value.v_int64 = (int64_t)x;
    } else {
        out->value_type = BSON_TYPE_DOUBLE;
        out->value.v_double = x;
    }
}

/* (a + b) * dx / 2 as a number value: exact in Decimal128 when a or b is one. */
static void trapezoid(const bson_value_t *a, const bson_value_t *b, double dx, bson_value_t *out)
{
    num_acc_t t;
    bson_value_t sum, prod, d, half = {.value_type = BSON_TYPE_INT32};
    half.value.v_int32 = 2;
    number_of(dx, &d);
    num_acc_init(&t, 0);
    num_acc_add(&t, a);
    num_acc_add(&t, b);
    num_acc_value(&t, &sum);
    num_acc_init(&t, 1);
    num_acc_mul(&t, &sum);
    num_acc_mul(&t, &d);
    num_acc_value(&t, &prod);
    if (!num_divide(&prod, &half, out))
        *out = prod;
}

/* True when every window of `p` ends at the partition's end and their
 * starts never move back: ["current", "unbounded"] and the like. */
static bool windows_end_at_end(const size_t *lo, const size_t *hi, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (hi[i] != n || (i > 0 && lo[i] < lo[i - 1]))
            return false;
    return true;
}

/* Windows that all end at the partition's end, folded from the last
 * document back (each window grows to the left): one pass instead of one
 * per document, for the functions whose result ignores the order. */
static bool fold_backwards(fold_t *s, const size_t *lo, bson_value_t *out, dberr_t *err)
{
    size_t n = s->p->n, cl = n;
    uint64_t steps = 0;
    bool ok = true;
    s->reset(s);
    for (size_t i = n; ok && i-- > 0;) {
        while (ok && cl > lo[i]) {
            if ((++steps & 1023) == 0 && !(ok = fiber_check(err)))
                break;
            s->add(s, --cl);
        }
        if (ok)
            ok = s->value(s, &out[i], err);
    }
    return ok;
}

static bool fold_run(fold_t *s, bson_value_t *out, dberr_t *err)
{
    const window_part_t *p = s->p;
    size_t *lo = bson_malloc((p->n ? p->n : 1) * sizeof *lo);
    size_t *hi = bson_malloc((p->n ? p->n : 1) * sizeof *hi);
    bool ok = window_ranges(s->f, p, lo, hi, err), have = false;
    size_t cl = 0, ch = 0;
    uint64_t steps = 0;
    if (ok && s->unordered && p->n > 1 && lo[p->n - 1] > lo[0] &&
        windows_end_at_end(lo, hi, p->n)) {
        ok = fold_backwards(s, lo, out, err);
        goto done;
    }
    for (size_t i = 0; ok && i < p->n; i++) {
        size_t from = lo[i];
        if (!(have && lo[i] == cl && hi[i] >= ch)) {
            s->reset(s);
        } else {
            from = ch;
        }
        for (size_t j = from; j < hi[i]; j++) {
            if ((++steps & 1023) == 0 && !(ok = fiber_check(err)))
                break;
            s->add(s, j);
        }
        if (!ok)
            break;
        have = true;
        cl = lo[i];
        ch = hi[i];
        if ((++steps & 1023) == 0 && !(ok = fiber_check(err)))
            break;
        ok = s->value(s, &out[i], err);
    }
done:
    bson_free(lo);
    bson_free(hi);
    return ok;
}

static void acc_reset(fold_t *s)
{
    pipeline_acc_destroy(s->acc);
    s->acc = pipeline_acc_new(s->f->acc_name);
}

static void acc_add(fold_t *s, size_t i)
{
    pipeline_acc_add(s->acc, &s->vals[i]);
}

static bool acc_value(fold_t *s, bson_value_t *out, dberr_t *err)
{
    bool push;
    if (pipeline_acc_is_list(s->acc, &push)) {
        if (!fiber_check(err)) /* the result copies the whole list */
            return false;
        int64_t limit = push ? pipeline_limits.push_bytes : pipeline_limits.add_to_set_bytes;
        uint32_t len = pipeline_acc_list_bytes(s->acc);
        if ((int64_t)len > limit)
            return dberr_set(err, DBERR_EXCEEDED_MEMORY_LIMIT,
                             "%s used too much memory and cannot spill to disk. Used: %u bytes. "
                             "Memory limit: %lld bytes",
                             s->f->def->name, len, (long long)limit);
        if (len > EXPR_MAX_VALUE_BYTES)
            return dberr_set(err, DBERR_BSON_OBJECT_TOO_LARGE,
                             "%s would build an array of %u bytes, over the %d bytes a value can "
                             "hold",
                             s->f->def->name, len, EXPR_MAX_VALUE_BYTES);
    }
    pipeline_acc_value(s->acc, out);
    return true;
}

/* ---- $topN & co.: object-form accumulators started per window ---- */

static void accx_forget(fold_t *s)
{
    if (s->last.value_type != BSON_TYPE_EOD)
        bson_value_destroy(&s->last);
    s->last.value_type = BSON_TYPE_EOD;
}

static void accx_reset(fold_t *s)
{
    accx_forget(s);
    pipeline_acc_destroy(s->acc);
    s->acc = NULL;
    if (!s->failed && !(s->acc = pipeline_acc_start(s->f->acc_tmpl, s->p->ctx, s->err)))
        s->failed = true;
}

static void accx_add(fold_t *s, size_t i)
{
    if (s->failed)
        return;
    accx_forget(s);
    expr_ctx_t ctx = *s->p->ctx;
    ctx.root = s->p->docs[i];
    ctx.current = NULL;
    if (!pipeline_acc_fold(s->acc, &s->vals[i], &ctx, s->err))
        s->failed = true;
    else if (*s->p->mem + pipeline_acc_bytes(s->acc) > pipeline_limits.window_bytes)
        s->failed = !window_charge(s->p, pipeline_acc_bytes(s->acc), s->err); /* 5414201 */
}

/* The window's result; an unchanged window reuses the last one (a
 * [unbounded, unbounded] $median is not re-sorted per document). */
static bool accx_value(fold_t *s, bson_value_t *out, dberr_t *err)
{
    if (s->failed)
        return false;
    if (s->last.value_type == BSON_TYPE_EOD) {
        if (!fiber_check(err)) /* a result costs up to the window's size (a sort) */
            return false;
        pipeline_acc_value(s->acc, &s->last);
    }
    if ((s->last.value_type == BSON_TYPE_ARRAY || s->last.value_type == BSON_TYPE_DOCUMENT) &&
        s->last.value.v_doc.data_len > EXPR_MAX_VALUE_BYTES)
        return dberr_set(err, DBERR_BSON_OBJECT_TOO_LARGE,
                         "%s would build a value of %u bytes, over the %d bytes a value can hold",
                         s->f->def->name, s->last.value.v_doc.data_len, EXPR_MAX_VALUE_BYTES);
    bson_value_copy(&s->last, out);
    return true;
}

static void stat_reset(fold_t *s)
{
    s->n = s->mx = s->my = s->m2 = s->sum = 0;
    s->has_prev = s->has_dec = false;
    num_acc_init(&s->dec_sum, 0);
}

/* A number, or a date as milliseconds (covariance). */
static bool as_double(const bson_value_t *v, bool dates, double *out)
{
    if (num_is_number(v)) {
        *out = num_to_double(v);
        return true;
    }
    if (dates && v->value_type == BSON_TYPE_DATE_TIME) {
        *out = (double)v->value.v_datetime;
        return true;
    }
    return false;
}

static void stddev_add(fold_t *s, size_t i)
{
    double x;
    if (!as_double(&s->vals[i], false, &x))
        return;
    s->n++;
    double d = x - s->mx;
    s->mx += d / s->n;
    s->m2 += d * (x - s->mx);
}

/* The statistic `s` gathered: m2 over n, or over n - 1 for the sample
 * variant named `samp_name`, its square root when `root`; null with too
 * few values. */
static bool m2_value(const fold_t *s, const char *samp_name, bool root, bson_value_t *out)
{
    bool samp = !strcmp(s->f->def->name, samp_name);
    if (s->n == 0 || (samp && s->n < 2)) {
        out->value_type = BSON_TYPE_NULL;
        return true;
    }
    double v = s->m2 / (samp ? s->n - 1 : s->n);
    out->value_type = BSON_TYPE_DOUBLE;
    out->value.v_double = root ? sqrt(v) : v;
    return true;
}

static bool stddev_value(fold_t *s, bson_value_t *out, dberr_t *err)
{
    return m2_value(s, "$stdDevSamp", true, out);
}

static void cov_add(fold_t *s, size_t i)
{
    double x, y;
    if (!as_double(&s->vals[i], true, &x) || !as_double(&s->vals2[i], true, &y))
        return;
    s->n++;
    double dx = x - s->mx;
    s->mx += dx / s->n;
    s->my += (y - s->my) / s->n;
    s->m2 += dx * (y - s->my);
}

static bool cov_value(fold_t *s, bson_value_t *out, dberr_t *err)
{
    return m2_value(s, "$covarianceSamp", false, out);
}

static void integral_add(fold_t *s, size_t i)
{
    double y, yp;
    if (!as_double(&s->vals[i], false, &y))
        return;
    if (s->has_prev) {
        const bson_value_t *a = &s->vals[s->prev], *b = &s->vals[i];
        as_double(a, false, &yp);
        double dx = s->xs[i] - s->xs[s->prev];
        if (a->value_type == BSON_TYPE_DECIMAL128 || b->value_type == BSON_TYPE_DECIMAL128 ||
            s->has_dec) {
            bson_value_t term;
            if (!s->has_dec) { /* the double total so far moves to the decimal one */
                bson_value_t sofar = {.value_type = BSON_TYPE_DOUBLE};
                sofar.value.v_double = s->sum;
                num_acc_add(&s->dec_sum, &sofar);
                s->has_dec = true;
            }
            trapezoid(a, b, dx, &term);
            num_acc_add(&s->dec_sum, &term);
        } else {
            s->sum += (y + yp) * dx / 2;
        }
    }
    s->has_prev = true;
    s->prev = i;
}

static bool integral_value(fold_t *s, bson_value_t *out, dberr_t *err)
{
    if (!s->has_prev) {
        out->value_type = BSON_TYPE_NULL;
        return true;
    }
    if (s->has_dec) {
        bson_value_t total, unit = {.value_type = BSON_TYPE_INT64};
        num_acc_value(&s->dec_sum, &total);
        unit.value.v_int64 = s->f->unit_ms;
        if (!s->f->unit_ms || !num_divide(&total, &unit, out))
            *out = total;
        return true;
    }
    out->value_type = BSON_TYPE_DOUBLE;
    out->value.v_double = s->f->unit_ms ? s->sum / (double)s->f->unit_ms : s->sum;
    return true;
}

/* The sortBy values of `p` as x coordinates for $integral / $derivative /
 * $linearFill: numbers, or dates in ms (`unit_ms` then scales the result). */
static double *calculus_xs(const window_fn_t *f, const window_part_t *p, bool is_integral,
                           dberr_t *err)
{
    double *xs = bson_malloc((p->n ? p->n : 1) * sizeof *xs);
    for (size_t i = 0; i < p->n; i++) {
        const bson_value_t *k = &p->keys[i];
        bool date = k->value_type == BSON_TYPE_DATE_TIME;
        if (f->unit_ms && !date) {
            dberr_set(err, is_integral ? 5423901 : 5624900,
                      "%s with unit expects the sortBy field to be a Date", f->def->name);
        } else if (!f->unit_ms && date) {
            dberr_set(err, is_integral ? 5423902 : 5624901,
                      "%s where the sortBy is a Date requires an 'unit'", f->def->name);
        } else if (!date && !num_is_number(k)) {
            dberr_set(err, is_integral ? 5423900 : 5624902,
                      "%s (with no 'unit') expects the sortBy field to be numeric", f->def->name);
        } else {
            xs[i] = date ? (double)k->value.v_datetime : num_to_double(k);
            continue;
        }
        bson_free(xs);
        return NULL;
    }
    return xs;
}

static bool run_fold(const window_fn_t *f, const window_part_t *p, const bson_value_t *vals,
                     const bson_value_t *vals2, bson_value_t *out, dberr_t *err)
{
    fold_t s;
    memset(&s, 0, sizeof s);
    s.f = f;
    s.p = p;
    s.vals = vals;
    s.vals2 = vals2;
    const char *name = f->def->name;
    s.last.value_type = BSON_TYPE_EOD;
    s.err = err;
    if (f->acc_tmpl) {
        s.reset = accx_reset, s.add = accx_add, s.value = accx_value;
        s.unordered = !strcmp(name, "$median") || !strcmp(name, "$percentile");
    } else if (f->acc_name) {
        s.reset = acc_reset, s.add = acc_add, s.value = acc_value;
        s.unordered = !strcmp(name, "$sum") || !strcmp(name, "$avg") || !strcmp(name, "$min") ||
                      !strcmp(name, "$max") || !strcmp(name, "$count");
    } else if (!strncmp(name, "$stdDev", 7)) {
        s.reset = stat_reset, s.add = stddev_add, s.value = stddev_value;
        s.unordered = true;
    } else if (!strncmp(name, "$covariance", 11)) {
        s.reset = stat_reset, s.add = cov_add, s.value = cov_value;
        s.unordered = true;
    } else {
        s.reset = stat_reset, s.add = integral_add, s.value = integral_value;
        if (!(s.xs = calculus_xs(f, p, true, err)))
            return false;
    }
    bool ok = fold_run(&s, out, err);
    pipeline_acc_destroy(s.acc);
    if (s.last.value_type != BSON_TYPE_EOD)
        bson_value_destroy(&s.last);
    bson_free(s.xs);
    return ok;
}

/* --------------------------------------------------- per-document ones */

static bool run_derivative(const window_fn_t *f, const window_part_t *p, const bson_value_t *vals,
                           const bson_value_t *vals2, bson_value_t *out, dberr_t *err)
{
    double *xs = calculus_xs(f, p, false, err);
    size_t *lo = bson_malloc((p->n ? p->n : 1) * sizeof *lo);
    size_t *hi = bson_malloc((p->n ? p->n : 1) * sizeof *hi);
    bool ok = xs && window_ranges(f, p, lo, hi, err);
    for (size_t i = 0; ok && i < p->n; i++) {
        double y1, y2;
        out[i].value_type = BSON_TYPE_NULL;
        if (hi[i] - lo[i] < 2 || !as_double(&vals[lo[i]], false, &y1) ||
            !as_double(&vals[hi[i] - 1], false, &y2))
            continue;
        double dx = xs[hi[i] - 1] - xs[lo[i]];
        if (dx == 0)
            continue;
        const bson_value_t *a = &vals[lo[i]], *b = &vals[hi[i] - 1];
        if (a->value_type == BSON_TYPE_DECIMAL128 || b->value_type == BSON_TYPE_DECIMAL128) {
            /* exact: (y2 - y1) / dx * unit in Decimal128 */
            bson_value_t dy, q, run, unit = {.value_type = BSON_TYPE_INT64};
            number_of(dx, &run);
            unit.value.v_int64 = f->unit_ms ? f->unit_ms : 1;
            num_subtract(b, a, &dy);
            if (num_divide(&dy, &run, &q)) {
                num_acc_t m;
                num_acc_init(&m, 1);
                num_acc_mul(&m, &q);
                num_acc_mul(&m, &unit);
                num_acc_value(&m, &out[i]);
            }
            continue;
        }
        out[i].value_type = BSON_TYPE_DOUBLE;
        out[i].value.v_double = (y2 - y1) / dx * (f->unit_ms ? (double)f->unit_ms : 1);
    }
    bson_free(xs);
    bson_free(lo);
    bson_free(hi);
    return ok;
}

/* $first / $last: the value of the window's first / last document (null
 * for an empty window or a missing value, as the $group accumulators). */
static bool run_first_last(const window_fn_t *f, const window_part_t *p, const bson_value_t *vals,
                           const bson_value_t *vals2, bson_value_t *out, dberr_t *err)
{
    size_t *lo = bson_malloc((p->n ? p->n : 1) * sizeof *lo);
    size_t *hi = bson_malloc((p->n ? p->n : 1) * sizeof *hi);
    bool ok = window_ranges(f, p, lo, hi, err), last = !strcmp(f->def->name, "$last");
    for (size_t i = 0; ok && i < p->n; i++) {
        const bson_value_t *v = lo[i] < hi[i] ? &vals[last ? hi[i] - 1 : lo[i]] : NULL;
        if (v && v->value_type != BSON_TYPE_EOD)
            bson_value_copy(v, &out[i]);
        else
            out[i].value_type = BSON_TYPE_NULL;
    }
    bson_free(lo);
    bson_free(hi);
    return ok;
}

/* The sortBy value of document i, missing as null. */
static const bson_value_t *key_of(const window_part_t *p, size_t i)
{
    static const bson_value_t null_value = {.value_type = BSON_TYPE_NULL};
    return p->keys[i].value_type == BSON_TYPE_EOD ? &null_value : &p->keys[i];
}

static void set_int(bson_value_t *out, int64_t v)
{
    if (v <= INT32_MAX) {
        out->value_type = BSON_TYPE_INT32;
        out->value.v_int32 = (int32_t)v;
    } else {
        out->value_type = BSON_TYPE_INT64;
        out->value.v_int64 = v;
    }
}

static bool run_rank(const window_fn_t *f, const window_part_t *p, const bson_value_t *vals,
                     const bson_value_t *vals2, bson_value_t *out, dberr_t *err)
{
    const char *name = f->def->name;
    int64_t rank = 0, dense = 0;
    for (size_t i = 0; i < p->n; i++) {
        bool tie = i > 0 && compare_values(key_of(p, i), key_of(p, i - 1)) == 0;
        if (!tie) {
            rank = (int64_t)i + 1;
            dense++;
        }
        set_int(&out[i], !strcmp(name, "$documentNumber") ? (int64_t)i + 1
                         : !strcmp(name, "$rank")         ? rank
                                                          : dense);
    }
    return true;
}

static bool run_shift(const window_fn_t *f, const window_part_t *p, const bson_value_t *vals,
                      const bson_value_t *vals2, bson_value_t *out, dberr_t *err)
{
    for (size_t i = 0; i < p->n; i++) {
        int64_t j = (int64_t)i + f->by;
        const bson_value_t *v = j >= 0 && j < (int64_t)p->n ? &vals[j] : &f->dflt;
        if (v->value_type == BSON_TYPE_EOD)
            out[i].value_type = BSON_TYPE_NULL;
        else
            bson_value_copy(v, &out[i]);
    }
    return true;
}

static bool run_ema(const window_fn_t *f, const window_part_t *p, const bson_value_t *vals,
                    const bson_value_t *vals2, bson_value_t *out, dberr_t *err)
{
    bson_value_t alpha = {.value_type = BSON_TYPE_DECIMAL128},
                 one = {.value_type = BSON_TYPE_INT32};
    bson_value_t rest, last = {.value_type = BSON_TYPE_EOD};
    bool decimal = false;
    alpha.value.v_decimal128 = f->alpha;
    one.value.v_int32 = 1;
    num_subtract(&one, &alpha, &rest);
    for (size_t i = 0; i < p->n; i++) {
        const bson_value_t *v = &vals[i];
        if (num_is_number(v)) {
            decimal |= v->value_type == BSON_TYPE_DECIMAL128;
            if (last.value_type == BSON_TYPE_EOD) {
                last = *v;
            } else {
                num_acc_t a, b, sum;
                bson_value_t x, y;
                num_acc_init(&a, 1);
                num_acc_mul(&a, v);
                num_acc_mul(&a, &alpha);
                num_acc_value(&a, &x);
                num_acc_init(&b, 1);
                num_acc_mul(&b, &last);
                num_acc_mul(&b, &rest);
                num_acc_value(&b, &y);
                num_acc_init(&sum, 0);
                num_acc_add(&sum, &x);
                num_acc_add(&sum, &y);
                num_acc_value(&sum, &last);
            }
        }
        if (last.value_type == BSON_TYPE_EOD) {
            out[i].value_type = BSON_TYPE_NULL;
        } else if (decimal || last.value_type != BSON_TYPE_DECIMAL128) {
            out[i] = last;
        } else {
            out[i].value_type = BSON_TYPE_DOUBLE;
            out[i].value.v_double = num_to_double(&last);
        }
    }
    return true;
}

static bool nullish(const bson_value_t *v)
{
    return v->value_type == BSON_TYPE_EOD || v->value_type == BSON_TYPE_NULL ||
           v->value_type == BSON_TYPE_UNDEFINED;
}

static bool run_locf(const window_fn_t *f, const window_part_t *p, const bson_value_t *vals,
                     const bson_value_t *vals2, bson_value_t *out, dberr_t *err)
{
    const bson_value_t *last = NULL;
    for (size_t i = 0; i < p->n; i++) {
        if (!nullish(&vals[i]))
            last = &vals[i];
        if (last)
            bson_value_copy(last, &out[i]);
        else
            out[i].value_type = BSON_TYPE_NULL;
    }
    return true;
}

static bool run_linear(const window_fn_t *f, const window_part_t *p, const bson_value_t *vals,
                       const bson_value_t *vals2, bson_value_t *out, dberr_t *err)
{
    double *xs = bson_malloc((p->n ? p->n : 1) * sizeof *xs);
    bool ok = true, saw_date = false, saw_num = false;
    for (size_t i = 0; ok && i < p->n; i++) {
        const bson_value_t *k = &p->keys[i];
        if (k->value_type == BSON_TYPE_DATE_TIME)
            xs[i] = (double)k->value.v_datetime, saw_date = true;
        else if (num_is_number(k))
            xs[i] = num_to_double(k), saw_num = true;
        else
            ok = dberr_set(err, DBERR_TYPE_MISMATCH,
                           "$linearFill requires the sortBy field to be numeric or a date");
        if (ok && saw_date && saw_num)
            ok = dberr_set(err, DBERR_TYPE_MISMATCH,
                           "The sortBy field must be either numeric or a date, but not both");
        if (ok && i > 0 && compare_values(k, &p->keys[i - 1]) == 0)
            ok = dberr_set(err, 6050106,
                           "There can be no repeated values in the sort field in the same "
                           "partition");
        if (ok && !nullish(&vals[i]) && !num_is_number(&vals[i]))
            ok = dberr_set(err, DBERR_TYPE_MISMATCH,
                           "Value to be filled by $linearFill must be numeric or nullish");
    }
    size_t prev = SIZE_MAX;
    for (size_t i = 0; ok && i < p->n; i++) {
        if (!nullish(&vals[i])) {
            bson_value_copy(&vals[i], &out[i]);
            prev = i;
            continue;
        }
        out[i].value_type = BSON_TYPE_NULL;
        size_t next = i + 1;
        while (next < p->n && nullish(&vals[next]))
            next++;
        if (prev == SIZE_MAX || next == p->n)
            continue;
        /* y1 + (y2 - y1) * (x - x1) / (x2 - x1), exact for decimals */
        bson_value_t dy, num, frac, r;
        bson_value_t dx = {.value_type = BSON_TYPE_DOUBLE}, span = {.value_type = BSON_TYPE_DOUBLE};
        dx.value.v_double = xs[i] - xs[prev];
        span.value.v_double = xs[next] - xs[prev];
        num_acc_t a;
        num_subtract(&vals[next], &vals[prev], &dy);
        num_acc_init(&a, 1);
        num_acc_mul(&a, &dy);
        num_acc_mul(&a, &dx);
        num_acc_value(&a, &num);
        if (!num_divide(&num, &span, &frac))
            continue;
        num_acc_init(&a, 0);
        num_acc_add(&a, &vals[prev]);
        num_acc_add(&a, &frac);
        num_acc_value(&a, &r);
        out[i] = r;
    }
    bson_free(xs);
    return ok;
}

/* --------------------------------------------------------------- table */

static const window_fn_def_t window_fns[] = {
    {"$sum", WFN_WINDOW, parse_acc, run_fold},
    {"$avg", WFN_WINDOW, parse_acc, run_fold},
    {"$min", WFN_WINDOW, parse_acc, run_fold},
    {"$max", WFN_WINDOW, parse_acc, run_fold},
    {"$first", WFN_WINDOW, parse_expr, run_first_last},
    {"$last", WFN_WINDOW, parse_expr, run_first_last},
    {"$push", WFN_WINDOW, parse_acc, run_fold},
    {"$addToSet", WFN_WINDOW, parse_acc, run_fold},
    {"$count", WFN_WINDOW, parse_acc, run_fold},
    {"$topN", WFN_WINDOW, parse_accx, run_fold},
    {"$bottomN", WFN_WINDOW, parse_accx, run_fold},
    {"$top", WFN_WINDOW, parse_accx, run_fold},
    {"$bottom", WFN_WINDOW, parse_accx, run_fold},
    {"$firstN", WFN_WINDOW, parse_accx, run_fold},
    {"$lastN", WFN_WINDOW, parse_accx, run_fold},
    {"$minN", WFN_WINDOW, parse_accx, run_fold},
    {"$maxN", WFN_WINDOW, parse_accx, run_fold},
    {"$median", WFN_WINDOW, parse_accx, run_fold},
    {"$percentile", WFN_WINDOW, parse_accx, run_fold},
    {"$stdDevPop", WFN_WINDOW, parse_expr, run_fold},
    {"$stdDevSamp", WFN_WINDOW, parse_expr, run_fold},
    {"$covariancePop", WFN_WINDOW, parse_cov, run_fold},
    {"$covarianceSamp", WFN_WINDOW, parse_cov, run_fold},
    {"$integral", WFN_WINDOW | WFN_SINGLE_SORT, parse_calculus, run_fold},
    {"$derivative", WFN_WINDOW | WFN_SINGLE_SORT | WFN_NEEDS_WINDOW, parse_calculus,
     run_derivative},
    {"$rank", WFN_RANK, parse_rank, run_rank},
    {"$denseRank", WFN_RANK, parse_rank, run_rank},
    {"$documentNumber", WFN_RANK, parse_rank, run_rank},
    {"$shift", WFN_NEEDS_SORT, parse_shift, run_shift},
    {"$expMovingAvg", WFN_NEEDS_SORT, parse_ema, run_ema},
    {"$locf", 0, parse_expr, run_locf},
    {"$linearFill", WFN_SINGLE_SORT, parse_expr, run_linear},
    {NULL, 0, NULL, NULL},
};

const window_fn_def_t *window_fn_find(const char *name)
{
    const void *tables[] = {window_fns};
    return table_find(tables, 1, sizeof(window_fn_def_t), name);
}
