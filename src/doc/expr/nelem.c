/* expr/nelem: array operators that pick or order elements — $firstN $lastN
 * $maxN $minN over an array, $sortArray, $zip, and $median $percentile
 * over an array — with mongod 7's argument checks and error codes. */
#include "doc/expr/expr-private.h"

#include <math.h>
#include <stdlib.h>

#include "doc/compare.h"
#include "doc/sortspec.h"
#include "util/shellfmt.h"

/* Which of the N operators a row is (its aux). */
enum { NE_FIRST, NE_LAST, NE_MAX, NE_MIN };

bool expr_check_n(const bson_value_t *v, int64_t *n, dberr_t *err)
{
    char *s = NULL;
    bool ok = true;
    int64_t x = 0;
    if (!num_is_number(v)) {
        s = shellfmt_value(v);
        ok = dberr_set(err, 5787902, "Value for 'n' must be of integral type, but found %s", s);
    } else if (!num_to_int64_whole(v, &x)) {
        s = shellfmt_value(v);
        ok = dberr_set(err, 5787903, "Value for 'n' must be of integral type, but found %s", s);
    } else if (x <= 0) {
        ok = dberr_set(err, 5787908, "'n' must be greater than 0, found %lld", (long long)x);
    }
    bson_free(s);
    *n = x;
    return ok;
}

static int value_cmp(const void *a, const void *b)
{
    return compare_values(a, b);
}

static int value_cmp_desc(const void *a, const void *b)
{
    return compare_values(b, a);
}

/* {$firstN|$lastN|$maxN|$minN: {n, input}}. */
static bool op_nelem(const expr_t *e, const expr_ctx_t *ctx, bson_value_t *out, dberr_t *err)
{
    int kind = e->op->aux;
    bson_value_t v[2], *vals = NULL;
    size_t nv = 0;
    int64_t n;
    bool ok;
    if (!expr_eval_args(e, ctx, v, err))
        return false;
    if (!(ok = expr_check_n(&v[0], &n, err)))
        goto cleanup;
    if (expr_is_nullish(&v[1])) {
        expr_val_null(out);
        goto cleanup;
    }
    if (v[1].value_type != BSON_TYPE_ARRAY) {
        char *s = shellfmt_value(&v[1]);
        ok = dberr_set(err, 5788200, "Input must be an array, found %s", s);
        bson_free(s);
        goto cleanup;
    }
    if (!(ok = expr_array_values(&v[1], &vals, &nv, err)))
        goto cleanup;
    if (kind == NE_MAX || kind == NE_MIN) {
        size_t k = 0;
        for (size_t i = 0; i < nv; i++)
            if (!expr_is_nullish(&vals[i]))
                vals[k++] = vals[i];
        nv = k;
        /* a stable order among equal values is not promised by mongod */
        qsort(vals, nv, sizeof *vals, kind == NE_MAX ? value_cmp_desc : value_cmp);
    }
    {
        size_t take = (uint64_t)n < nv ? (size_t)n : nv;
        size_t from = kind == NE_LAST ? nv - take : 0;
        expr_values_to_array(take ? vals + from : NULL, take, out); /* vals: NULL when empty */
    }
cleanup:
    bson_free(vals);
    expr_free_args(v, e->nargs);
    return ok;
}

/* ---- $sortArray ---- */

/* {input, sortBy}: e->args[0] the input, e->cval the sortBy (1, -1 or a
 * sort document, checked here). */
static bool parse_sortarray(expr_t *e, bson_iter_t *arg, dberr_t *err)
{
    bson_iter_t child;
    if (!expr_recurse_object(arg, &child, 2942500,
                             "$sortArray requires an object as an argument, found: %s", err))
        return false;
    expr_add_arg(e, NULL, NULL);
    while (bson_iter_next(&child)) {
        const char *k = bson_iter_key(&child);
        if (!strcmp(k, "input")) {
            expr_destroy(e->args[0]);
            if (!(e->args[0] = expr_parse(&child, err)))
                return false;
        } else if (!strcmp(k, "sortBy")) {
            const bson_value_t *sv = bson_iter_value(&child);
            if (sv->value_type == BSON_TYPE_DOCUMENT) {
                bson_t doc;
                expr_bson_of(sv, &doc);
                sortspec_t *ss = bson_empty(&doc) ? NULL : sortspec_new(&doc, err);
                if (!ss)
                    return bson_empty(&doc)
                               ? dberr_set(err, 2942505,
                                           "$sortArray sortBy must not be an empty object")
                               : false;
                sortspec_destroy(ss);
            } else {
                double d = num_is_number(sv) ? num_to_double(sv) : 0;
                if (d != 1 && d != -1)
                    return dberr_set(err, 2942506,
                                     "$sortArray sortBy must be either 1, -1, or a sort "
                                     "specification object");
            }
            expr_val_free(&e->cval);
            bson_value_copy(sv, &e->cval);
        } else {
            return dberr_set(err, 2942501, "$sortArray found an unknown argument: %s", k);
        }
    }
    if (!e->args[0])
        return dberr_set(err, 2942502, "$sortArray requires 'input' to be specified");
    if (e->cval.value_type == BSON_TYPE_EOD)
        return dberr_set(err, 2942503, "$sortArray requires 'sortBy' to be specified");
    return true;
}

/* What qsort's comparator reads (qsort has no context argument). */
static _Thread_local struct {
    const sortspec_t *spec;
    int dir;
} sort_ctx;

/* Orders two elements by a sort document: documents by their fields,
 * anything else as a whole value. */
static int sortby_cmp(const void *pa, const void *pb)
{
    const bson_value_t *a = pa, *b = pb;
    if (sort_ctx.spec && a->value_type == BSON_TYPE_DOCUMENT &&
        b->value_type == BSON_TYPE_DOCUMENT) {
        bson_t da, db;
        expr_bson_of(a, &da);
        expr_bson_of(b, &db);
        return sortspec_compare(sort_ctx.spec, &da, &db);
    }
    return sort_ctx.dir * compare_values(a, b);
}

static bool op_sortarray(const expr_t *e, const expr_ctx_t *ctx, bson_value_t *out, dberr_t *err)
{
    bson_value_t in, *vals = NULL;
    size_t n;
    sortspec_t *spec = NULL;
    bool ok;
    if (!expr_eval_node(e->args[0], ctx, &in, err))
        return false;
    if (expr_is_nullish(&in)) {
        expr_val_null(out);
        ok = true;
        goto cleanup;
    }
    if (in.value_type != BSON_TYPE_ARRAY) {
        ok = dberr_set(err, 2942504,
                       "The input argument to $sortArray must be an array, but was of type: %s",
                       shellfmt_type_name(in.value_type));
        goto cleanup;
    }
    if (e->cval.value_type == BSON_TYPE_DOCUMENT) {
        bson_t doc;
        expr_bson_of(&e->cval, &doc);
        if (!(spec = sortspec_new(&doc, err))) {
            ok = false;
            goto cleanup;
        }
    }
    if (!(ok = expr_array_values(&in, &vals, &n, err)))
        goto cleanup;
    sort_ctx.spec = spec;
    sort_ctx.dir = spec ? 1 : num_to_double(&e->cval) > 0 ? 1 : -1;
    /* qsort is not stable: order equal elements by position with a merge
     * of runs would be needed; mongod's std::sort is not stable either */
    if (n > 1) /* else nothing to sort, and vals may be NULL (qsort must not get it) */
        qsort(vals, n, sizeof *vals, sortby_cmp);
    expr_values_to_array(vals, n, out);
cleanup:
    sortspec_destroy(spec);
    bson_free(vals);
    expr_val_free(&in);
    return ok;
}

/* ---- $zip ---- */

/* {inputs, useLongestLength, defaults}: e->args holds the inputs, then as
 * many defaults (NULL each when none); e->cval is useLongestLength. */
static bool parse_zip(expr_t *e, bson_iter_t *arg, dberr_t *err)
{
    bson_iter_t child, sub;
    bool have_inputs = false, have_defaults = false, longest = false;
    size_t ninputs = 0, ndefaults = 0;
    expr_t **defaults = NULL;
    bool ok = true;
    if (!expr_recurse_object(arg, &child, 34460,
                             "$zip only supports an object as an argument, found %s", err))
        return false;
    while (ok && bson_iter_next(&child)) {
        const char *k = bson_iter_key(&child);
        if (!strcmp(k, "inputs") || !strcmp(k, "defaults")) {
            bool inputs = k[0] == 'i';
            if (!BSON_ITER_HOLDS_ARRAY(&child)) {
                ok = dberr_set(err, inputs ? 34461 : 34462,
                               "%s must be an array of expressions, found %s", k,
                               shellfmt_type_name(bson_iter_type(&child)));
                break;
            }
            bson_iter_recurse(&child, &sub);
            while (ok && bson_iter_next(&sub)) {
                expr_t *a = expr_parse(&sub, err);
                if (!a) {
                    ok = false;
                } else if (inputs) {
                    expr_add_arg(e, a, NULL);
                    ninputs++;
                } else {
                    defaults = bson_realloc(defaults, (ndefaults + 1) * sizeof *defaults);
                    defaults[ndefaults++] = a;
                }
            }
            if (inputs)
                have_inputs = true;
            else
                have_defaults = true;
        } else if (!strcmp(k, "useLongestLength")) {
            if (!BSON_ITER_HOLDS_BOOL(&child)) {
                ok = dberr_set(err, 34463, "useLongestLength must be a bool, found %s",
                               shellfmt_type_name(bson_iter_type(&child)));
                break;
            }
            longest = bson_iter_bool(&child);
        } else {
            ok = dberr_set(err, 34464, "$zip found an unknown argument: %s", k);
        }
    }
    if (ok && (!have_inputs || ninputs == 0))
        ok = dberr_set(err, 34465, "$zip requires at least one input array");
    if (ok && have_defaults && !longest)
        ok = dberr_set(err, 34466, "cannot specify defaults unless useLongestLength is true");
    if (ok && have_defaults && ndefaults != ninputs)
        ok = dberr_set(err, 34467, "defaults and inputs must have the same length");
    for (size_t i = 0; ok && i < ninputs; i++)
        expr_add_arg(e, i < ndefaults ? defaults[i] : NULL, NULL);
    if (!ok)
        for (size_t i = 0; i < ndefaults; i++)
            expr_destroy(defaults[i]);
    bson_free(defaults);
    expr_val_bool(&e->cval, longest);
    return ok;
}

static bool op_zip(const expr_t *e, const expr_ctx_t *ctx, bson_value_t *out, dberr_t *err)
{
    size_t nin = e->nargs / 2, minlen = 0, maxlen = 0;
    bson_value_t *in = bson_malloc0((nin + 1) * sizeof *in);
    bson_value_t **vals = bson_malloc0((nin + 1) * sizeof *vals);
    bson_value_t *dflt = bson_malloc0((nin + 1) * sizeof *dflt);
    size_t *lens = bson_malloc0((nin + 1) * sizeof *lens);
    bool ok = true, null = false;
    for (size_t i = 0; i < nin; i++) {
        expr_val_missing(&in[i]);
        expr_val_null(&dflt[i]);
    }
    for (size_t i = 0; ok && !null && i < nin; i++) {
        if (!(ok = expr_eval_node(e->args[i], ctx, &in[i], err)))
            break;
        if (expr_is_nullish(&in[i])) {
            null = true;
        } else if (in[i].value_type != BSON_TYPE_ARRAY) {
            char *s = shellfmt_value(&in[i]);
            ok = dberr_set(err, 34468, "$zip found a non-array expression in input: %s", s);
            bson_free(s);
        } else if ((ok = expr_array_values(&in[i], &vals[i], &lens[i], err))) {
            minlen = i == 0 || lens[i] < minlen ? lens[i] : minlen;
            maxlen = lens[i] > maxlen ? lens[i] : maxlen;
        }
    }
    if (!ok || null)
        goto cleanup;
    if (minlen != maxlen)
        for (size_t i = 0; ok && i < nin; i++)
            if (e->args[nin + i]) {
                expr_val_free(&dflt[i]);
                ok = expr_eval_node(e->args[nin + i], ctx, &dflt[i], err);
            }
    if (!ok)
        goto cleanup;
    {
        size_t len = expr_truthy(&e->cval) ? maxlen : minlen;
        bson_t arr;
        uint32_t idx = 0;
        bson_init(&arr);
        for (size_t r = 0; r < len; r++) {
            bson_t row;
            uint32_t ri = 0;
            char key[16];
            const char *k;
            bson_uint32_to_string(idx++, &k, key, sizeof key);
            bson_append_array_begin(&arr, k, -1, &row);
            for (size_t i = 0; i < nin; i++)
                expr_array_append(&row, &ri, r < lens[i] ? &vals[i][r] : &dflt[i]);
            bson_append_array_end(&arr, &row);
            if (arr.len > EXPR_MAX_VALUE_BYTES)
                break; /* the caller's 16 MB check refuses it */
        }
        expr_value_take_bson(out, &arr, BSON_TYPE_ARRAY);
    }
cleanup:
    if (ok && null)
        expr_val_null(out);
    for (size_t i = 0; i < nin; i++) {
        bson_free(vals[i]);
        expr_val_free(&dflt[i]);
    }
    expr_free_args(in, nin);
    bson_free(in);
    bson_free(vals);
    bson_free(dflt);
    bson_free(lens);
    return ok;
}

/* ---- $median $percentile ---- */

/* The p array at `p` (a number in [0, 1] each, at least one), else false
 * with mongod's 7750301 / 7750302 / 7750303. */
static bool quantile_check_p(const bson_iter_t *p, dberr_t *err)
{
    static const char msg[] =
        "The $percentile 'p' field must be an array of numbers from [0.0, 1.0], but found: %s";
    const bson_value_t *bad = bson_iter_value((bson_iter_t *)p);
    int code = 7750301;
    uint32_t np = 0;
    bson_iter_t el;
    if (BSON_ITER_HOLDS_ARRAY(p) && bson_iter_recurse(p, &el))
        while (bson_iter_next(&el)) {
            const bson_value_t *pv = bson_iter_value(&el);
            double d = num_is_number(pv) ? num_to_double(pv) : NAN;
            if (!(d >= 0 && d <= 1)) {
                bad = pv;
                code = num_is_number(pv) ? 7750303 : 7750302;
                break;
            }
            np++;
        }
    if (code == 7750301 && np > 0)
        return true;
    char *s = shellfmt_value(bad);
    dberr_set(err, code, msg, s);
    bson_free(s);
    return false;
}

bool expr_check_quantile(const bson_t *args, const char *op, bool want_p, bson_iter_t *input,
                         bson_iter_t *p, dberr_t *err)
{
    static const char *const required[] = {"input", "p", "method"};
    bson_iter_t it;
    bson_iter_init(&it, args);
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (strcmp(k, "input") && strcmp(k, "method") && (!want_p || strcmp(k, "p")))
            return dberr_set(err, 40415, "BSON field '%s.%s' is an unknown field.", op, k);
    }
    for (int i = 0; i < 3; i++)
        if ((i != 1 || want_p) && !bson_has_field(args, required[i]))
            return dberr_set(err, 40414, "BSON field '%s.%s' is missing but a required field", op,
                             required[i]);
    if (want_p && !(bson_iter_init_find(p, args, "p") && quantile_check_p(p, err)))
        return false;
    bson_iter_init_find(&it, args, "method");
    if (!BSON_ITER_HOLDS_UTF8(&it) || strcmp(bson_iter_utf8(&it, NULL), "approximate"))
        return dberr_set(err, DBERR_BAD_VALUE,
                         "Currently only 'approximate' can be used as a percentile 'method'.");
    return bson_iter_init_find(input, args, "input");
}

/* {input, p, method} ($median: no p): e->args[0] the input, e->cval the p
 * array (checked here, as the accumulators check it). */
static bool parse_quantile(expr_t *e, bson_iter_t *arg, dberr_t *err)
{
    bool want_p = e->op->aux;
    const char *op = e->op->name;
    bson_t args;
    bson_iter_t it, p;
    if (!BSON_ITER_HOLDS_DOCUMENT(arg)) {
        char *s = shellfmt_value(bson_iter_value(arg));
        bool r = dberr_set(err, 7429703, "specification must be an object; found %s: %s", op, s);
        bson_free(s);
        return r;
    }
    expr_bson_of(bson_iter_value(arg), &args);
    if (!expr_check_quantile(&args, op, want_p, &it, &p, err))
        return false;
    if (want_p)
        bson_value_copy(bson_iter_value(&p), &e->cval);
    expr_t *in = expr_parse(&it, err);
    if (!in)
        return false;
    expr_add_arg(e, in, NULL);
    return true;
}

static int double_cmp(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return a < b ? -1 : a > b;
}

/* The number at rank ceil(p * n) of `nums` (sorted), or null. */
static void quantile_value(const double *nums, size_t n, double p, bson_value_t *out)
{
    if (n == 0) {
        expr_val_null(out);
        return;
    }
    double r = ceil(p * (double)n) - 1;
    expr_val_double(out, nums[r < 0 ? 0 : r >= (double)n ? n - 1 : (size_t)r]);
}

static bool op_quantile(const expr_t *e, const expr_ctx_t *ctx, bson_value_t *out, dberr_t *err)
{
    bson_value_t in, *vals = NULL;
    double *nums = NULL;
    size_t nv = 0, nn = 0;
    bool ok = true;
    if (!expr_eval_node(e->args[0], ctx, &in, err))
        return false;
    if (in.value_type == BSON_TYPE_ARRAY) {
        if (!(ok = expr_array_values(&in, &vals, &nv, err)))
            goto cleanup;
    } else if (num_is_number(&in)) {
        vals = bson_malloc(sizeof *vals);
        vals[0] = in;
        nv = 1;
    }
    nums = bson_malloc((nv + 1) * sizeof *nums);
    for (size_t i = 0; i < nv; i++)
        if (num_is_number(&vals[i]) && !isnan(num_to_double(&vals[i])))
            nums[nn++] = num_to_double(&vals[i]);
    qsort(nums, nn, sizeof *nums, double_cmp);
    if (!e->op->aux) {
        quantile_value(nums, nn, 0.5, out);
    } else {
        bson_t ps, arr;
        bson_iter_t it;
        uint32_t idx = 0;
        expr_bson_of(&e->cval, &ps);
        bson_init(&arr);
        if (bson_iter_init(&it, &ps))
            while (bson_iter_next(&it)) {
                bson_value_t q;
                quantile_value(nums, nn, num_to_double(bson_iter_value(&it)), &q);
                expr_array_append(&arr, &idx, &q);
            }
        expr_value_take_bson(out, &arr, BSON_TYPE_ARRAY);
    }
cleanup:
    bson_free(nums);
    bson_free(vals);
    expr_val_free(&in);
    return ok;
}

/* $firstN, $lastN, $maxN and $minN: {n, input}, evaluated by op_nelem for `which`. */
#define NELEM_ROW(name, which)                                                                     \
    {name, .fn = op_nelem, .parse = OPP_NAMED, .params = {"!n", "!input"}, .aux = which,           \
     .named_codes = {5787900, 5787901}, .missing_codes = {5787906, 5787907}}

const expr_op_t expr_nelem_ops[] = {
    NELEM_ROW("$firstN", NE_FIRST),
    NELEM_ROW("$lastN", NE_LAST),
    {"$median", .fn = op_quantile, .parse = OPP_CUSTOM, .parse_fn = parse_quantile},
    {"$percentile", .fn = op_quantile, .parse = OPP_CUSTOM, .parse_fn = parse_quantile, .aux = 1},
    NELEM_ROW("$maxN", NE_MAX),
    NELEM_ROW("$minN", NE_MIN),
    {"$sortArray", .fn = op_sortarray, .parse = OPP_CUSTOM, .parse_fn = parse_sortarray},
    {"$zip", .fn = op_zip, .parse = OPP_CUSTOM, .parse_fn = parse_zip},
    {NULL},
};
