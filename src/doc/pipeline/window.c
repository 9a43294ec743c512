/* pipeline/window: the $setWindowFields stage (and the run of $fill, which
 * fill.c parses into the same shape) — documents partitioned by an
 * expression, sorted within each partition, and each output field computed
 * by a window function (window-ops.c) over a window of documents or of
 * sortBy values around each document. */
#include "doc/pipeline/window-private.h"

#include <string.h>

#include "doc/compare.h"
#include "doc/path.h"
#include "util/fiber.h"
#include "util/msort.h"
#include "util/shellfmt.h"

/* What one document may hold (mongod's BSONObjMaxUserSize). */
#define BSON_MAX_SIZE_USER (16 * 1024 * 1024)

/* ------------------------------------------------------------- helpers */

void window_set_path(const bson_t *doc, char *const *path, size_t n, const bson_value_t *v,
                     bson_t *out)
{
    bson_iter_t it;
    bool done = false;
    if (doc && bson_iter_init(&it, doc))
        while (bson_iter_next(&it)) {
            const char *k = bson_iter_key(&it);
            if (strcmp(k, path[0]) != 0) {
                bson_append_iter(out, k, -1, &it);
                continue;
            }
            done = true;
            if (n == 1) {
                bson_append_value(out, k, -1, v);
                continue;
            }
            bson_t child, sub;
            bson_append_document_begin(out, k, -1, &child);
            if (BSON_ITER_HOLDS_DOCUMENT(&it)) {
                pipeline_borrow_doc(&it, &sub);
                window_set_path(&sub, path + 1, n - 1, v, &child);
            } else {
                window_set_path(NULL, path + 1, n - 1, v, &child);
            }
            bson_append_document_end(out, &child);
        }
    if (done)
        return;
    if (n == 1) {
        bson_append_value(out, path[0], -1, v);
    } else {
        bson_t child;
        bson_append_document_begin(out, path[0], -1, &child);
        window_set_path(NULL, path + 1, n - 1, v, &child);
        bson_append_document_end(out, &child);
    }
}

int64_t window_unit_ms(const char *unit)
{
    static const struct {
        const char *name;
        int64_t ms;
    } units[] = {
        {"year", 0},         {"quarter", 0},    {"month", 0},
        {"week", 604800000}, {"day", 86400000}, {"hour", 3600000},
        {"minute", 60000},   {"second", 1000},  {"millisecond", 1},
    };
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
        if (!strcmp(units[i].name, unit))
            return units[i].ms;
    return -1;
}

expr_t *window_date_add_new(void)
{
    bson_t *d = BCON_NEW("x", "{", "$dateAdd", "{", "startDate", BCON_UTF8("$$d"), "unit",
                         BCON_UTF8("$$u"), "amount", BCON_UTF8("$$n"), "}", "}");
    bson_iter_t it;
    dberr_t e;
    bson_iter_init_find(&it, d, "x");
    expr_t *x = expr_new(&it, &e);
    bson_destroy(d);
    return x;
}

bool window_date_add(const expr_t *date_add, const expr_ctx_t *ctx, int64_t ms, const char *unit,
                     int64_t amount, int64_t *out, dberr_t *err)
{
    int64_t fixed = window_unit_ms(unit);
    if (fixed > 0) {
        if (__builtin_mul_overflow(amount, fixed, &amount) ||
            __builtin_add_overflow(ms, amount, out))
            return dberr_set(err, DBERR_OVERFLOW, "date overflow in window bounds");
        return true;
    }
    /* calendar units: mongod's dateAdd (month ends clamp) */
    bson_t vars = BSON_INITIALIZER;
    bson_value_t r;
    BSON_APPEND_DATE_TIME(&vars, "d", ms);
    BSON_APPEND_INT64(&vars, "n", amount);
    BSON_APPEND_UTF8(&vars, "u", unit);
    bson_t empty = BSON_INITIALIZER;
    expr_ctx_t c = *ctx;
    c.root = &empty;
    c.vars = &vars;
    bool ok = expr_eval(date_add, &c, &r, err);
    bson_destroy(&vars);
    if (!ok)
        return false;
    if (r.value_type != BSON_TYPE_DATE_TIME) {
        bson_value_destroy(&r);
        return dberr_set(err, DBERR_OVERFLOW, "date overflow in window bounds");
    }
    *out = r.value.v_datetime;
    return true;
}

bool window_charge(const window_part_t *p, int64_t bytes, dberr_t *err)
{
    *p->mem += bytes;
    if (*p->mem <= pipeline_limits.window_bytes)
        return true;
    return dberr_set(err, 5414201,
                     p->ctx->allow_disk_use
                         ? "Exceeded memory limit in DocumentSourceSetWindowFields, used %lld "
                           "bytes but max allowed is %lld (atomdb cannot spill to disk: raise "
                           "internalDocumentSourceSetWindowFieldsMaxMemoryBytes)"
                         : "Exceeded memory limit in DocumentSourceSetWindowFields, used %lld "
                           "bytes but max allowed is %lld",
                     (long long)*p->mem, (long long)pipeline_limits.window_bytes);
}

/* ------------------------------------------------------------- bounds */

/* One end of a window under `it`; `range` for range windows. */
static bool bound_parse(const bson_value_t *v, bool range, bool with_unit, window_bound_t *b,
                        dberr_t *err)
{
    if (v->value_type == BSON_TYPE_UTF8) {
        if (!strcmp(v->value.v_utf8.str, "unbounded"))
            b->kind = WB_UNBOUNDED;
        else if (!strcmp(v->value.v_utf8.str, "current"))
            b->kind = WB_CURRENT;
        else
            return dberr_set(err, DBERR_FAILED_TO_PARSE,
                             "Window bounds must be 'unbounded', 'current', or a number.");
        return true;
    }
    if (!num_is_number(v))
        return dberr_set(err, DBERR_FAILED_TO_PARSE,
                         range && !with_unit ? "Range-based bounds expression must be a number"
                                             : "Window bounds must be 'unbounded', 'current', "
                                               "or a number.");
    b->kind = WB_VALUE;
    if (!range || with_unit) {
        if (!num_to_int64_whole(v, &b->n) || b->n < INT32_MIN || b->n > INT32_MAX)
            return dberr_set(err, DBERR_FAILED_TO_PARSE,
                             range ? "With 'unit', range-based bounds must be an integer"
                                   : "Numeric document-based bounds must be an integer");
        b->x = (long double)b->n;
    } else {
        b->x = num_to_ld(v);
    }
    return true;
}

/* The 2-element array under `it` into lo/hi. */
static bool bounds_pair(bson_iter_t *it, bool range, bool with_unit, window_bounds_t *b,
                        dberr_t *err)
{
    bson_iter_t a;
    bson_value_t v[2];
    int n = 0;
    if (BSON_ITER_HOLDS_ARRAY(it) && bson_iter_recurse(it, &a))
        while (bson_iter_next(&a)) {
            if (n < 2)
                v[n] = *bson_iter_value(&a);
            n++;
        }
    if (n != 2)
        return dberr_set(err, DBERR_FAILED_TO_PARSE, "Window bounds must be a 2-element array: %s",
                         bson_iter_key(it));
    if (!bound_parse(&v[0], range, with_unit, &b->lo, err) ||
        !bound_parse(&v[1], range, with_unit, &b->hi, err))
        return false;
    long double lo = b->lo.kind == WB_VALUE ? b->lo.x : 0,
                hi = b->hi.kind == WB_VALUE ? b->hi.x : 0;
    if (b->lo.kind != WB_UNBOUNDED && b->hi.kind != WB_UNBOUNDED && lo > hi)
        return dberr_set(err, 5339900, "Lower bound must not exceed upper bound: [%Lg, %Lg]", lo,
                         hi);
    return true;
}

bool window_bounds_parse(bson_iter_t *it, const window_spec_t *w, window_bounds_t *b, dberr_t *err)
{
    static const char *const names[] = {"documents", "range", "unit"};
    bson_iter_t docs, range, unit;
    bson_iter_t *const found[] = {&docs, &range, &unit};
    memset(b, 0, sizeof *b);
    b->lo.kind = b->hi.kind = WB_UNBOUNDED;
    if (!BSON_ITER_HOLDS_DOCUMENT(it))
        return dberr_set(err, DBERR_FAILED_TO_PARSE, "'window' field must be an object");
    int nfields = pipeline_fields_pick(it, names, 3, found);
    bool has_docs = docs.raw, has_range = range.raw, has_unit = unit.raw;
    if (has_docs && has_range)
        return dberr_set(err, DBERR_FAILED_TO_PARSE,
                         "Window bounds can specify either 'documents' or 'unit', not both.");
    if (!has_range && has_unit)
        return dberr_set(err, DBERR_FAILED_TO_PARSE,
                         "Window bounds can only specify 'unit' with range-based bounds.");
    if (!has_range && !has_docs) {
        if (nfields)
            return dberr_set(err, DBERR_FAILED_TO_PARSE,
                             "'window' field can only contain 'documents' as the only argument "
                             "or 'range' with an optional 'unit' field");
        return true;
    }
    if (has_docs) {
        if (nfields != 1)
            return dberr_set(err, DBERR_FAILED_TO_PARSE,
                             "'window' field that specifies documents cannot have other fields");
        if (!bounds_pair(&docs, false, false, b, err))
            return false;
        if (!(b->lo.kind == WB_UNBOUNDED && b->hi.kind == WB_UNBOUNDED) && !w->sort)
            return dberr_set(err, 5339901, "Document-based bounds require a sortBy");
        return true;
    }
    b->range = true;
    if (has_unit) {
        if (nfields != 2)
            return dberr_set(err, DBERR_FAILED_TO_PARSE,
                             "'window' field that specifies unit cannot have other fields "
                             "besides 'range'");
        if (!BSON_ITER_HOLDS_UTF8(&unit))
            return dberr_set(err, DBERR_FAILED_TO_PARSE, "'unit' must be a string");
        const char *u = bson_iter_utf8(&unit, NULL);
        if (window_unit_ms(u) < 0)
            return dberr_set(err, DBERR_FAILED_TO_PARSE, "unknown time unit value: %s", u);
        bson_strncpy(b->unit, u, sizeof b->unit);
    } else if (nfields != 1) {
        return dberr_set(err, DBERR_FAILED_TO_PARSE,
                         "'window' field that specifies range cannot have other fields besides "
                         "'unit'");
    }
    if (!bounds_pair(&range, true, has_unit, b, err))
        return false;
    if (!w->sort || w->nsort != 1)
        return dberr_set(err, 5339902, "Range-based bounds require sortBy a single field");
    if (w->sort_dir < 0)
        return dberr_set(err, 8947401, "Range-based bounds require an ascending sortBy");
    return true;
}

/* Binary search: the first j in [0, n) whose key is >= x (strict: > x). */
static size_t keys_search(const long double *k, size_t n, long double x, bool strict)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (strict ? k[mid] <= x : k[mid] < x)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* The sortBy keys of `p` as numbers (ms for dates), checked for a range
 * window (5429413 / 5429414 / 5429513 as mongod); owned by the caller. */
static long double *range_keys(const window_fn_t *f, const window_part_t *p, dberr_t *err)
{
    long double *k = bson_malloc((p->n ? p->n : 1) * sizeof *k);
    for (size_t j = 0; j < p->n; j++) {
        const bson_value_t *v = &p->keys[j];
        if (f->win.unit[0]) {
            if (v->value_type != BSON_TYPE_DATE_TIME) {
                dberr_set(err, 5429513,
                          "Invalid range: Expected the sortBy field to be a Date, but it was %s",
                          shellfmt_type_name(v->value_type));
                bson_free(k);
                return NULL;
            }
            k[j] = (long double)v->value.v_datetime;
        } else {
            if (v->value_type == BSON_TYPE_DATE_TIME) {
                dberr_set(err, 5429413,
                          "Invalid range: For windows that involve date or time ranges, a unit "
                          "must be provided.");
                bson_free(k);
                return NULL;
            }
            if (!num_is_number(v)) {
                dberr_set(err, 5429414,
                          "Invalid range: Expected the sortBy field to be a number, but it was %s",
                          shellfmt_type_name(v->value_type));
                bson_free(k);
                return NULL;
            }
            k[j] = num_to_ld(v);
        }
    }
    return k;
}

/* One end of a range window of document i as a key value. */
static bool range_end(const window_fn_t *f, const window_part_t *p, long double key,
                      const window_bound_t *b, long double *out, dberr_t *err)
{
    if (b->kind == WB_CURRENT || (b->kind == WB_VALUE && b->x == 0)) {
        *out = key;
        return true;
    }
    if (!f->win.unit[0]) {
        *out = key + b->x;
        return true;
    }
    int64_t ms;
    if (!window_date_add(p->w->date_add, p->ctx, (int64_t)key, f->win.unit, b->n, &ms, err))
        return false;
    *out = (long double)ms;
    return true;
}

/* Range windows of every document of `p`: lo[i], hi[i]. */
static bool range_windows(const window_fn_t *f, const window_part_t *p, size_t *lo, size_t *hi,
                          dberr_t *err)
{
    long double *k = range_keys(f, p, err);
    bool ok = k != NULL;
    for (size_t i = 0; ok && i < p->n; i++) {
        long double x;
        if ((i & 1023) == 1023 && !(ok = fiber_check(err)))
            break;
        if (f->win.lo.kind == WB_UNBOUNDED)
            lo[i] = 0;
        else if ((ok = range_end(f, p, k[i], &f->win.lo, &x, err)))
            lo[i] = keys_search(k, p->n, x, false);
        if (!ok)
            break;
        if (f->win.hi.kind == WB_UNBOUNDED)
            hi[i] = p->n;
        else if ((ok = range_end(f, p, k[i], &f->win.hi, &x, err)))
            hi[i] = keys_search(k, p->n, x, true);
        if (ok && hi[i] < lo[i])
            hi[i] = lo[i];
    }
    bson_free(k);
    return ok;
}

bool window_ranges(const window_fn_t *f, const window_part_t *p, size_t *lo, size_t *hi,
                   dberr_t *err)
{
    const window_bounds_t *b = &f->win;
    if (b->range)
        return range_windows(f, p, lo, hi, err);
    int64_t n = (int64_t)p->n;
    for (int64_t i = 0; i < n; i++) {
        int64_t l, h;
        l = b->lo.kind == WB_UNBOUNDED ? 0 : i + (b->lo.kind == WB_VALUE ? b->lo.n : 0);
        h = b->hi.kind == WB_UNBOUNDED ? n : i + (b->hi.kind == WB_VALUE ? b->hi.n : 0) + 1;
        l = l < 0 ? 0 : l > n ? n : l;
        h = h < 0 ? 0 : h > n ? n : h;
        lo[i] = (size_t)l;
        hi[i] = (size_t)(h < l ? l : h);
    }
    return true;
}

/* ---------------------------------------------------------------- parse */

static void window_free(stage_t *s)
{
    window_spec_t *w = s->u.window;
    if (!w)
        return;
    for (size_t i = 0; i < w->nfns; i++) {
        window_fn_t *f = &w->fns[i];
        path_free(f->path, f->npath);
        expr_destroy(f->arg);
        expr_destroy(f->arg2);
        pipeline_acc_destroy(f->acc_tmpl);
        if (f->dflt.value_type != BSON_TYPE_EOD)
            bson_value_destroy(&f->dflt);
    }
    bson_free(w->fns);
    expr_destroy(w->partition_by);
    sortspec_destroy(w->sort);
    bson_free(w->sort_field);
    for (size_t i = 0; i < w->nfills; i++) {
        path_free(w->fills[i].path, w->fills[i].npath);
        expr_destroy(w->fills[i].value);
    }
    bson_free(w->fills);
    expr_destroy(w->date_add);
    bson_free(w);
    s->u.window = NULL;
}

window_spec_t *window_spec_new(const char *stage)
{
    window_spec_t *w = bson_malloc0(sizeof *w);
    w->stage = stage;
    w->date_add = window_date_add_new();
    return w;
}

bool window_sort_parse(window_spec_t *w, bson_iter_t *it, dberr_t *err)
{
    bson_t doc;
    if (!pipeline_field_type_ok(it, BSON_TYPE_DOCUMENT, w->stage, "sortBy", false, err))
        return false;
    pipeline_borrow_doc(it, &doc);
    if (bson_empty(&doc))
        return dberr_set(err, 15976, "$sort stage must have at least one sort key");
    if (!(w->sort = sortspec_new(&doc, err)))
        return false;
    w->nsort = sortspec_nkeys(w->sort);
    const char *k = sortspec_key(w->sort, 0, &w->sort_dir);
    w->sort_field = bson_strdup(k ? k : "");
    return true;
}

/* One output `k: {$fn: arg, window: {...}}` of $setWindowFields. */
static bool output_parse(window_spec_t *w, bson_iter_t *it, dberr_t *err)
{
    const char *k = bson_iter_key(it);
    window_fn_t *f;
    bson_iter_t a, fn_it, win_it;
    bool has_fn = false, has_win = false;
    w->fns = bson_realloc(w->fns, (w->nfns + 1) * sizeof *w->fns);
    f = &w->fns[w->nfns++];
    memset(f, 0, sizeof *f);
    f->dflt.value_type = BSON_TYPE_EOD;
    f->win.lo.kind = f->win.hi.kind = WB_UNBOUNDED;
    if (!path_split_field(k, &f->path, &f->npath, err))
        return false;
    if (!BSON_ITER_HOLDS_DOCUMENT(it))
        return dberr_set(err, DBERR_FAILED_TO_PARSE, "The field '%s' must be an object", k);
    bson_iter_recurse(it, &a);
    const char *first = NULL;
    while (bson_iter_next(&a)) {
        const char *name = bson_iter_key(&a);
        if (!first)
            first = name;
        if (!strcmp(name, "window")) {
            if (has_win)
                return dberr_set(err, DBERR_FAILED_TO_PARSE,
                                 "saw multiple 'window' fields in '%s' expression", k);
            has_win = true;
            win_it = a;
        } else if (name[0] == '$' && !has_fn) {
            if (!(f->def = window_fn_find(name)))
                return dberr_set(err, DBERR_FAILED_TO_PARSE, "Unrecognized window function, %s",
                                 name);
            has_fn = true;
            fn_it = a;
        } else if (has_fn) {
            return dberr_set(err, DBERR_FAILED_TO_PARSE, "%s got unexpected argument: %s",
                             f->def->name, name);
        }
    }
    if (!has_fn)
        return dberr_set(err, DBERR_FAILED_TO_PARSE, "Expected a $-prefixed window function%s%s",
                         first ? ", " : "", first ? first : "");
    /* the function's own checks come before its window's, as mongod's parsers */
    unsigned fl = f->def->flags;
    if (has_win && (fl & WFN_RANK))
        return dberr_set(err, 5371601, "Rank style window functions take no other arguments");
    if (has_win && !(fl & WFN_WINDOW))
        return dberr_set(err, DBERR_FAILED_TO_PARSE, "'window' field is not allowed in '%s'",
                         f->def->name);
    if ((fl & WFN_RANK) && (!w->sort || w->nsort != 1))
        return dberr_set(err, 5371602,
                         "%s must be specified with a top level sortBy expression with exactly "
                         "one element",
                         f->def->name);
    if ((fl & WFN_NEEDS_SORT) && !w->sort)
        return dberr_set(err, DBERR_FAILED_TO_PARSE, "%s requires an explicit 'sortBy'",
                         f->def->name);
    if ((fl & WFN_SINGLE_SORT) && (!w->sort || w->nsort != 1))
        return !strcmp(f->def->name, "$linearFill")
                   ? dberr_set(err, 605001,
                               "$linearFill must be specified with a top level sortBy expression "
                               "with exactly one element")
                   : dberr_set(err, DBERR_FAILED_TO_PARSE,
                               "%s requires a sortBy with a single field", f->def->name);
    if ((fl & WFN_NEEDS_WINDOW) && !has_win)
        return dberr_set(err, DBERR_FAILED_TO_PARSE, "%s requires explicit window bounds",
                         f->def->name);
    if (has_win) {
        if (!window_bounds_parse(&win_it, w, &f->win, err))
            return false;
        f->explicit_window = true;
    }
    return f->def->parse(f, &fn_it, w, err);
}

bool window_partition_parse(window_spec_t *w, bson_iter_t *it, dberr_t *err)
{
    return (w->partition_by = expr_new(it, err)) != NULL;
}

bool window_fields_parse(window_spec_t *w, const bson_iter_t *arg, bool fill, window_fields_t *f,
                         dberr_t *err)
{
    bson_iter_t it, part;
    bool has_part = false, has_out = false;
    f->has_partition_fields = false;
    bson_iter_recurse(arg, &it);
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (!strcmp(k, "partitionBy")) {
            part = it;
            has_part = true;
        } else if (fill && !strcmp(k, "partitionByFields")) {
            f->partition_fields = it;
            f->has_partition_fields = true;
        } else if (!strcmp(k, "sortBy")) {
            if (!window_sort_parse(w, &it, err))
                return false;
        } else if (!strcmp(k, "output")) {
            if (!pipeline_field_type_ok(&it, BSON_TYPE_DOCUMENT, w->stage, "output", false, err))
                return false;
            f->output = it;
            has_out = true;
        } else {
            return dberr_set(err, 40415, "BSON field '%s.%s' is an unknown field.", w->stage, k);
        }
    }
    if (!has_out)
        return dberr_set(err, 40414, "BSON field '%s.output' is missing but a required field",
                         w->stage);
    if (has_part && f->has_partition_fields)
        return dberr_set(err, 6050204,
                         "Maximum one of 'partitionBy' and 'partitionByFields can be specified in "
                         "'%s'",
                         w->stage);
    return !has_part || window_partition_parse(w, &part, err);
}

static bool swf_parse(stage_t *s, bson_iter_t *arg, const bson_t *let, dberr_t *err)
{
    window_fields_t f;
    if (!BSON_ITER_HOLDS_DOCUMENT(arg))
        return dberr_set(err, DBERR_FAILED_TO_PARSE,
                         "the $setWindowFields stage specification must be an object");
    window_spec_t *w = s->u.window = window_spec_new("$setWindowFields");
    if (!window_fields_parse(w, arg, false, &f, err))
        return false;
    bson_iter_t o;
    bson_iter_recurse(&f.output, &o);
    while (bson_iter_next(&o))
        if (!output_parse(w, &o, err))
            return false;
    return true;
}

static bool window_check_vars(stage_t *s, const bson_t *let, dberr_t *err)
{
    const window_spec_t *w = s->u.window;
    if (w->partition_by && !expr_check_vars(w->partition_by, let, err))
        return false;
    for (size_t i = 0; i < w->nfns; i++)
        if (!expr_check_vars(w->fns[i].arg, let, err) || !expr_check_vars(w->fns[i].arg2, let, err))
            return false;
    for (size_t i = 0; i < w->nfills; i++)
        if (!expr_check_vars(w->fills[i].value, let, err))
            return false;
    return true;
}

/* ------------------------------------------------------------------ run */

/* The sort of the stage: partition key, then sortBy. */
typedef struct order {
    const window_spec_t *w;
    bson_t **docs;
    bson_value_t *pkeys;
} order_t;

/* msort order of document indexes: partition key, then sortBy (`ctx`: the order_t). */
static int order_cmp(const void *pa, const void *pb, void *ctx)
{
    const order_t *o = ctx;
    size_t a = *(const size_t *)pa, b = *(const size_t *)pb;
    if (o->pkeys) {
        int c = compare_values(&o->pkeys[a], &o->pkeys[b]);
        if (c)
            return c;
    }
    return o->w->sort ? sortspec_compare(o->w->sort, o->docs[a], o->docs[b]) : 0;
}

static void values_free(bson_value_t *v, size_t n)
{
    if (!v)
        return;
    for (size_t i = 0; i < n; i++)
        if (v[i].value_type != BSON_TYPE_EOD)
            bson_value_destroy(&v[i]);
    bson_free(v);
}

static bson_value_t *values_new(size_t n)
{
    bson_value_t *v = bson_malloc0((n ? n : 1) * sizeof *v);
    for (size_t i = 0; i < n; i++)
        v[i].value_type = BSON_TYPE_EOD;
    return v;
}

static int64_t value_bytes(const bson_value_t *v)
{
    switch (v->value_type) {
    case BSON_TYPE_UTF8:
        return 16 + v->value.v_utf8.len;
    case BSON_TYPE_DOCUMENT:
    case BSON_TYPE_ARRAY:
        return 16 + v->value.v_doc.data_len;
    case BSON_TYPE_BINARY:
        return 16 + v->value.v_binary.data_len;
    default:
        return 16;
    }
}

/* Evaluates `e` on every document of `p` into a new array (EOD: missing). */
static bson_value_t *eval_all(const expr_t *e, const window_part_t *p, dberr_t *err)
{
    bson_value_t *v = values_new(p->n);
    int64_t bytes = 0;
    if (!e)
        return v;
    for (size_t i = 0; i < p->n; i++) {
        expr_ctx_t c = *p->ctx;
        c.root = p->docs[i];
        if (((i & 255) == 255 && !fiber_check(err)) || !expr_eval(e, &c, &v[i], err)) {
            values_free(v, p->n);
            return NULL;
        }
        bytes += value_bytes(&v[i]);
    }
    if (!window_charge(p, bytes, err)) {
        values_free(v, p->n);
        return NULL;
    }
    return v;
}

/* Runs every output of `w` over one partition and writes the results into
 * its documents (replaced in place in p->docs). */
static bool run_partition(const window_spec_t *w, window_part_t *p, dberr_t *err)
{
    bson_value_t **res = bson_malloc0((w->nfns ? w->nfns : 1) * sizeof *res);
    bool ok = true;
    if (w->sort) { /* the first sortBy field: ranks, range windows, calculus */
        p->keys = values_new(p->n);
        for (size_t i = 0; i < p->n; i++) {
            bson_iter_t it;
            if (path_get(p->docs[i], w->sort_field, &it))
                bson_value_copy(bson_iter_value(&it), &p->keys[i]);
        }
    }
    for (size_t j = 0; ok && j < w->nfns; j++) {
        const window_fn_t *f = &w->fns[j];
        bson_value_t *vals = NULL, *vals2 = NULL;
        if (!(vals = eval_all(f->arg, p, err)) || !(vals2 = eval_all(f->arg2, p, err))) {
            values_free(vals, p->n);
            ok = false;
            break;
        }
        res[j] = values_new(p->n);
        ok = f->def->run(f, p, vals, vals2, res[j], err);
        values_free(vals, p->n);
        values_free(vals2, p->n);
        if (ok) {
            int64_t bytes = 0;
            for (size_t i = 0; i < p->n; i++)
                bytes += value_bytes(&res[j][i]);
            ok = window_charge(p, bytes, err);
        }
    }
    for (size_t i = 0; ok && i < p->n; i++) {
        if ((i & 255) == 255 && !(ok = fiber_check(err)))
            break;
        bson_t *cur = p->docs[i];
        for (size_t j = 0; j < w->nfns; j++) {
            bson_value_t nul = {.value_type = BSON_TYPE_NULL};
            const bson_value_t *v = res[j][i].value_type == BSON_TYPE_EOD ? &nul : &res[j][i];
            bson_t *next = bson_new();
            window_set_path(cur, w->fns[j].path, w->fns[j].npath, v, next);
            bson_destroy(cur);
            cur = next;
        }
        for (size_t j = 0; ok && j < w->nfills; j++) {
            const window_fill_t *fl = &w->fills[j];
            bson_iter_t it;
            char *dotted = NULL;
            for (size_t c = 0; c < fl->npath; c++) {
                char *d2 = dotted ? bson_strdup_printf("%s.%s", dotted, fl->path[c])
                                  : bson_strdup(fl->path[c]);
                bson_free(dotted);
                dotted = d2;
            }
            bool present = path_get(cur, dotted, &it) && !BSON_ITER_HOLDS_NULL(&it) &&
                           !BSON_ITER_HOLDS_UNDEFINED(&it);
            bson_free(dotted);
            if (present)
                continue;
            expr_ctx_t c = *p->ctx;
            bson_value_t v;
            c.root = cur;
            if (!(ok = expr_eval(fl->value, &c, &v, err)))
                break;
            if (v.value_type == BSON_TYPE_EOD)
                continue;
            bson_t *next = bson_new();
            window_set_path(cur, fl->path, fl->npath, &v, next);
            bson_value_destroy(&v);
            bson_destroy(cur);
            cur = next;
        }
        p->docs[i] = cur;
        if (ok && cur->len > BSON_MAX_SIZE_USER)
            ok = dberr_set(err, DBERR_BSON_OBJECT_TOO_LARGE,
                           "BSONObj size: %u (0x%X) is invalid. Size must be between 0 and "
                           "16793600(16MB)",
                           cur->len, cur->len);
    }
    for (size_t j = 0; j < w->nfns; j++)
        values_free(res[j], p->n);
    bson_free(res);
    return ok;
}

static bool window_run(const stage_t *s, const expr_ctx_t *ctx, doclist_t *in, doclist_t *out,
                       dberr_t *err)
{
    const window_spec_t *w = s->u.window;
    size_t n = in->len;
    int64_t mem = 0;
    bool ok = true;
    size_t *idx = bson_malloc((n ? n : 1) * sizeof *idx);
    order_t o = {w, in->docs, NULL};
    window_part_t p = {NULL, 0, NULL, w, ctx, &mem};
    p.docs = bson_malloc((n ? n : 1) * sizeof *p.docs);
    for (size_t i = 0; i < n; i++) {
        idx[i] = i;
        mem += (int64_t)in->docs[i]->len + (int64_t)sizeof(bson_t);
    }
    int64_t base = mem; /* the stage holds all its input (it cannot spill) */
    if (!(ok = window_charge(&p, 0, err)))
        goto cleanup;
    if (w->partition_by) {
        o.pkeys = values_new(n);
        for (size_t i = 0; ok && i < n; i++) {
            expr_ctx_t c = *ctx;
            c.root = in->docs[i];
            if ((i & 255) == 255 && !(ok = fiber_check(err)))
                break;
            if (!(ok = expr_eval(w->partition_by, &c, &o.pkeys[i], err)))
                break;
            if (o.pkeys[i].value_type == BSON_TYPE_ARRAY)
                ok = dberr_set(err, DBERR_TYPE_MISMATCH,
                               "Cannot 'partitionBy' an expression of type array");
            else if (o.pkeys[i].value_type == BSON_TYPE_EOD)
                o.pkeys[i].value_type = BSON_TYPE_NULL;
        }
        if (!ok)
            goto cleanup;
    }
    if (w->partition_by || w->sort) {
        if (!(ok = msort(idx, n, sizeof *idx, order_cmp, &o, err)))
            goto cleanup;
    }
    for (size_t start = 0; ok && start < n;) {
        size_t end = o.pkeys ? start + 1 : n; /* no partitionBy: one partition */
        while (end < n && compare_values(&o.pkeys[idx[start]], &o.pkeys[idx[end]]) == 0)
            end++;
        p.n = end - start;
        for (size_t i = 0; i < p.n; i++) {
            p.docs[i] = in->docs[idx[start + i]];
            in->docs[idx[start + i]] = NULL;
        }
        p.keys = NULL;
        ok = run_partition(w, &p, err);
        values_free(p.keys, p.n);
        p.keys = NULL;
        for (size_t i = 0; i < p.n; i++)
            doclist_push(out, p.docs[i]);
        mem = base; /* what one partition computed is gone once written */
        start = end;
    }
cleanup:
    values_free(o.pkeys, n);
    bson_free(idx);
    bson_free(p.docs);
    return ok;
}

const stage_def_t pipeline_window_stages[] = {
    {"$setWindowFields", swf_parse, window_run, window_check_vars, window_free, 0},
    {"$fill", window_fill_parse, window_run, window_check_vars, window_free, 0},
    {NULL, NULL, NULL, NULL, NULL, 0},
};
