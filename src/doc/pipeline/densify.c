/* pipeline/densify: the $densify stage — documents sorted by their
 * partition fields and the densified field, and the missing steps of the
 * field's sequence (numbers, or dates stepped by a unit) added as new
 * documents, over the whole range ("full"), each partition's own range
 * ("partition") or explicit [lo, hi) bounds, as mongod's. */
#include "doc/pipeline/window-private.h"

#include <string.h>

#include "doc/compare.h"
#include "doc/path.h"
#include "util/fiber.h"
#include "util/msort.h"
#include "util/hash.h"

typedef enum densify_bounds { DENSIFY_FULL, DENSIFY_PARTITION, DENSIFY_EXPLICIT } densify_bounds_t;

struct densify_spec {
    char *field; /* dotted */
    char **path; /* its components */
    size_t npath;
    char **parts; /* partitionByFields, dotted */
    size_t nparts;
    bson_value_t step;
    char unit[16]; /* "" for numbers */
    densify_bounds_t bounds;
    bson_value_t lo, hi; /* DENSIFY_EXPLICIT: [lo, hi) */
    expr_t *date_add;
};

/* ---------------------------------------------------------------- parse */

static void densify_free(stage_t *s)
{
    struct densify_spec *d = s->u.densify;
    if (!d)
        return;
    bson_free(d->field);
    path_free(d->path, d->npath);
    for (size_t i = 0; i < d->nparts; i++)
        bson_free(d->parts[i]);
    bson_free(d->parts);
    expr_destroy(d->date_add);
    bson_free(d);
    s->u.densify = NULL;
}

static bool range_parse(struct densify_spec *d, bson_iter_t *it, dberr_t *err)
{
    bson_iter_t r, bounds;
    bool has_step = false, has_bounds = false;
    if (!pipeline_field_type_ok(it, BSON_TYPE_DOCUMENT, "$densify", "range", false, err))
        return false;
    bson_iter_recurse(it, &r);
    while (bson_iter_next(&r)) {
        const char *k = bson_iter_key(&r);
        if (!strcmp(k, "step")) {
            if (!num_is_number(bson_iter_value(&r)))
                return dberr_set(err, DBERR_TYPE_MISMATCH,
                                 "BSON field '$densify.range.step' is the wrong type, expected "
                                 "types '[int, decimal, double, long']");
            d->step = *bson_iter_value(&r);
            has_step = true;
        } else if (!strcmp(k, "bounds")) {
            bounds = r;
            has_bounds = true;
        } else if (!strcmp(k, "unit")) {
            if (!pipeline_field_type_ok(&r, BSON_TYPE_UTF8, "$densify", "range.unit", false, err))
                return false;
            const char *u = bson_iter_utf8(&r, NULL);
            if (window_unit_ms(u) < 0)
                return dberr_set(err, DBERR_FAILED_TO_PARSE, "unknown time unit value: %s", u);
            bson_strncpy(d->unit, u, sizeof d->unit);
        } else {
            return dberr_set(err, 40415, "BSON field '$densify.range.%s' is an unknown field.", k);
        }
    }
    if (!has_step)
        return dberr_set(err, 40414,
                         "BSON field '$densify.range.step' is missing but a required field");
    if (!has_bounds)
        return dberr_set(err, 40414,
                         "BSON field '$densify.range.bounds' is missing but a required field");
    bson_value_t zero = {.value_type = BSON_TYPE_INT32};
    if (num_compare(&d->step, &zero) <= 0 || num_to_ld(&d->step) != num_to_ld(&d->step))
        return dberr_set(err, 5733401,
                         "The step parameter in a range statement must be a strictly positive "
                         "numeric value");
    int64_t whole;
    if (d->unit[0] && !num_to_int64_whole(&d->step, &whole))
        return dberr_set(err, 6586400,
                         "The step parameter in a range statement must be a whole number when "
                         "densifying a date range");
    if (BSON_ITER_HOLDS_UTF8(&bounds)) {
        const char *b = bson_iter_utf8(&bounds, NULL);
        if (!strcmp(b, "full"))
            d->bounds = DENSIFY_FULL;
        else if (!strcmp(b, "partition"))
            d->bounds = DENSIFY_PARTITION;
        else
            return dberr_set(err, 5946802, "Bounds string must either be 'full' or 'partition'");
        return true;
    }
    if (!BSON_ITER_HOLDS_ARRAY(&bounds))
        return dberr_set(err, 5733404,
                         "The bounds in a range statement must be the string 'full', "
                         "'partition', or an ascending array of two numbers or two dates");
    bson_iter_t a;
    int n = 0;
    bson_iter_recurse(&bounds, &a);
    while (bson_iter_next(&a)) {
        if (n == 0)
            d->lo = *bson_iter_value(&a);
        if (n == 1)
            d->hi = *bson_iter_value(&a);
        n++;
    }
    if (n != 2)
        return dberr_set(err, 5733403,
                         "A bounding array in a range statement must have exactly two elements");
    if (compare_values(&d->lo, &d->hi) > 0)
        return dberr_set(err, 5733402,
                         "A bounding array must be an ascending array of either two dates or two "
                         "numbers");
    d->bounds = DENSIFY_EXPLICIT;
    if (num_is_number(&d->lo)) {
        if (d->unit[0])
            return dberr_set(err, 5733409, "Numeric bounds may not have unit parameter");
        if (!num_is_number(&d->hi))
            return dberr_set(err, 5733406,
                             "A bounding array must contain either both dates or both numeric "
                             "types");
        if (d->lo.value_type != d->hi.value_type || d->lo.value_type != d->step.value_type)
            return dberr_set(err, 5876900,
                             "Upper bound, lower bound, and step must all have the same type");
        return true;
    }
    if (d->lo.value_type == BSON_TYPE_DATE_TIME) {
        if (d->hi.value_type != BSON_TYPE_DATE_TIME)
            return dberr_set(err, 5733405,
                             "A bounding array must contain either both dates or both numeric "
                             "types");
        if (!d->unit[0])
            return dberr_set(err, 5733410, "A bounding array of dates must specify a unit");
        return true;
    }
    return dberr_set(err, 5946800, "Explicit bounds must be numeric or dates");
}

/* What $densify's option rows read into: range and partitionByFields are
 * read once field is known (raw NULL: not given). */
struct densify_args {
    struct densify_spec *d;
    bson_iter_t range, parts;
};

static bool densify_opt_field(void *args, const bson_iter_t *it, dberr_t *err)
{
    struct densify_spec *d = ((struct densify_args *)args)->d;
    return pipeline_field_string(it, "$densify", "field", false, &d->field, err);
}

static bool densify_opt_range(void *args, const bson_iter_t *it, dberr_t *err)
{
    ((struct densify_args *)args)->range = *it;
    return true;
}

static bool densify_opt_partition_by_fields(void *args, const bson_iter_t *it, dberr_t *err)
{
    ((struct densify_args *)args)->parts = *it;
    return true;
}

static const pipeline_option_t densify_options[] = {
    {"field", densify_opt_field},
    {"range", densify_opt_range},
    {"partitionByFields", densify_opt_partition_by_fields},
    {NULL, NULL},
};

static bool densify_parse(stage_t *s, bson_iter_t *arg, const bson_t *let, dberr_t *err)
{
    struct densify_args a = {0};
    bson_t spec;
    if (!BSON_ITER_HOLDS_DOCUMENT(arg))
        return dberr_set(err, DBERR_FAILED_TO_PARSE,
                         "The $densify stage specification must be an object");
    struct densify_spec *d = a.d = s->u.densify = bson_malloc0(sizeof *d);
    d->date_add = window_date_add_new();
    pipeline_borrow_doc(arg, &spec);
    if (!pipeline_options_parse(&spec, densify_options, 40415,
                                "BSON field '$densify.%s' is an unknown field.", &a, err))
        return false;
    if (!d->field)
        return dberr_set(err, 40414, "BSON field '$densify.field' is missing but a required field");
    if (!a.range.raw)
        return dberr_set(err, 40414, "BSON field '$densify.range' is missing but a required field");
    if (!path_split_field(d->field, &d->path, &d->npath, err) || !range_parse(d, &a.range, err))
        return false;
    if (a.parts.raw) {
        bson_iter_t el;
        if (!pipeline_field_type_ok(&a.parts, BSON_TYPE_ARRAY, "$densify", "partitionByFields",
                                    false, err))
            return false;
        bson_iter_recurse(&a.parts, &el);
        while (bson_iter_next(&el)) {
            char **pp;
            size_t np;
            if (!BSON_ITER_HOLDS_UTF8(&el))
                return dberr_set(err, DBERR_TYPE_MISMATCH,
                                 "BSON field '$densify.partitionByFields.%s' is the wrong type, "
                                 "expected type 'string'",
                                 bson_iter_key(&el));
            const char *p = bson_iter_utf8(&el, NULL);
            if (!path_split_field(p, &pp, &np, err))
                return false;
            path_free(pp, np);
            size_t fl = strlen(d->field), pl = strlen(p);
            if (!strncmp(p, d->field, fl) && (p[fl] == '\0' || p[fl] == '.'))
                return dberr_set(err, 8993000,
                                 "partitionByFields '%s' cannot include field '%s' that is being "
                                 "densified.",
                                 p, d->field);
            if (!strncmp(d->field, p, pl) && d->field[pl] == '.')
                return dberr_set(err, 9554500,
                                 "field '%s' that is being densified cannot include "
                                 "partitionByFields '%s'.",
                                 d->field, p);
            d->parts = bson_realloc(d->parts, (d->nparts + 1) * sizeof *d->parts);
            d->parts[d->nparts++] = bson_strdup(p);
        }
    }
    if (d->bounds == DENSIFY_PARTITION && d->nparts == 0)
        return dberr_set(err, 5733408,
                         "One cannot specify the bounds as 'partition' without specifying a "
                         "non-empty array of partitionByFields. You may have meant to specify "
                         "'full' bounds.");
    return true;
}

/* ------------------------------------------------------------------ run */

/* One input document with its densify value and partition key. */
typedef struct item {
    bson_t *doc;
    bson_value_t val; /* borrowed from doc; NULL type for null/missing */
    bson_t *pkey;     /* the partition fields' values as a document */
} item_t;

/* One partition: the next value of its sequence. */
typedef struct part {
    bson_t *pkey; /* borrowed from an item */
    bson_value_t next;
    UT_hash_handle hh;
    struct part *order; /* first-seen order */
} part_t;

typedef struct densify_run {
    const struct densify_spec *d;
    const expr_ctx_t *ctx;
    doclist_t *out;
    int64_t made;
    bool have_minmax;
    bson_value_t gmin, gmax; /* "full": the smallest and largest value */
} densify_run_t;

/* msort order of item_t: partition, then value (run `r`). */
static int item_cmp(const void *pa, const void *pb, void *ctx)
{
    const densify_run_t *r = ctx;
    const item_t *a = pa, *b = pb;
    if (r->d->bounds != DENSIFY_FULL) {
        int c = compare_docs(a->pkey, b->pkey);
        if (c)
            return c;
    }
    return compare_values(&a->val, &b->val);
}

/* v + step. */
static bool step_of(densify_run_t *r, const bson_value_t *v, bson_value_t *out, dberr_t *err)
{
    if (v->value_type == BSON_TYPE_DATE_TIME) {
        int64_t amount, ms;
        num_to_int64_whole(&r->d->step, &amount);
        if (!window_date_add(r->d->date_add, r->ctx, v->value.v_datetime, r->d->unit, amount, &ms,
                             err))
            return false;
        out->value_type = BSON_TYPE_DATE_TIME;
        out->value.v_datetime = ms;
        return true;
    }
    num_acc_t a;
    num_acc_init(&a, 0);
    num_acc_add(&a, v);
    num_acc_add(&a, &r->d->step);
    num_acc_value(&a, out);
    return true;
}

/* Emits the generated document {partition fields..., field: v}. */
static bool emit(densify_run_t *r, const bson_t *pkey, const bson_value_t *v, dberr_t *err)
{
    if (++r->made > pipeline_limits.densify_docs)
        return dberr_set(err, 5897900,
                         "Generated %lld documents in $densify, which is over the limit of %lld. "
                         "Increase the 'internalQueryMaxAllowedDensifyDocs' parameter to allow "
                         "more generated documents",
                         (long long)r->made, (long long)pipeline_limits.densify_docs);
    if ((r->made & 255) == 0 && !fiber_check(err))
        return false;
    bson_t *doc = bson_new();
    window_set_path(pkey, r->d->path, r->d->npath, v, doc);
    doclist_push(r->out, doc);
    return true;
}

/* Generates the values of `p` below `v` (or up to it when `inclusive`),
 * then steps past `v` when the sequence meets it. `limit` (may be NULL)
 * stops generation at or past it. */
static bool fill_to(densify_run_t *r, part_t *p, const bson_value_t *v, bool inclusive,
                    const bson_value_t *limit, dberr_t *err)
{
    for (;;) {
        int c = compare_values(&p->next, v);
        if (limit && compare_values(&p->next, limit) >= 0)
            return true;
        if (c > 0 || (c == 0 && !inclusive)) {
            if (c == 0 && !step_of(r, &p->next, &p->next, err))
                return false;
            return true;
        }
        if (!emit(r, p->pkey, &p->next, err) || !step_of(r, &p->next, &p->next, err))
            return false;
    }
}

/* The value of `doc`'s field checked as mongod's (5733201, 6053600). */
static bool item_value(const struct densify_spec *d, item_t *it, dberr_t *err)
{
    bson_iter_t f;
    it->val.value_type = BSON_TYPE_NULL;
    if (!path_get(it->doc, d->field, &f) || BSON_ITER_HOLDS_NULL(&f) ||
        BSON_ITER_HOLDS_UNDEFINED(&f))
        return true;
    const bson_value_t *v = bson_iter_value(&f);
    if (!num_is_number(v) && v->value_type != BSON_TYPE_DATE_TIME)
        return dberr_set(err, 5733201, "Densify field type must be numeric or a date");
    if (num_is_number(v) && d->unit[0])
        return dberr_set(err, 6053600,
                         "Encountered numeric densify value in collection when step has a date "
                         "unit.");
    if (!num_is_number(v) && !d->unit[0])
        return dberr_set(err, 6053600,
                         "Encountered date densify value in collection when step does not have "
                         "a date unit.");
    it->val = *v;
    return true;
}

static bool densify_run(const stage_t *s, const expr_ctx_t *ctx, doclist_t *in, doclist_t *out,
                        dberr_t *err)
{
    const struct densify_spec *d = s->u.densify;
    size_t n = in->len;
    item_t *items = bson_malloc0((n ? n : 1) * sizeof *items);
    part_t *parts = NULL, *first = NULL, **tail = &first, *p, *ptmp;
    densify_run_t r = {d, ctx, out, 0, false};
    bson_t empty = BSON_INITIALIZER;
    bool ok = true;
    int64_t bytes = 0;
    for (size_t i = 0; ok && i < n; i++) {
        items[i].doc = in->docs[i];
        in->docs[i] = NULL;
        bytes += (int64_t)items[i].doc->len + (int64_t)sizeof(bson_t);
        items[i].pkey = bson_new();
        for (size_t j = 0; j < d->nparts; j++) {
            bson_iter_t f;
            if (!path_get(items[i].doc, d->parts[j], &f))
                continue;
            char **pp;
            size_t np;
            bson_t *next = bson_new();
            pp = path_split(d->parts[j], &np);
            window_set_path(items[i].pkey, pp, np, bson_iter_value(&f), next);
            path_free(pp, np);
            bson_destroy(items[i].pkey);
            items[i].pkey = next;
        }
        ok = item_value(d, &items[i], err);
    }
    if (ok && bytes > pipeline_limits.sort_bytes)
        ok = dberr_set(err, DBERR_QUERY_EXCEEDED_MEMORY_NO_DISK,
                       "Sort exceeded memory limit of %lld bytes, but did not opt in to external "
                       "sorting.",
                       (long long)pipeline_limits.sort_bytes);
    ok = ok && msort(items, n, sizeof *items, item_cmp, &r, err);
    if (ok && d->bounds == DENSIFY_EXPLICIT && d->nparts == 0) {
        /* unpartitioned explicit bounds make documents even with no input */
        p = bson_malloc0(sizeof *p);
        p->pkey = &empty;
        p->next = d->lo;
        HASH_ADD_KEYPTR(hh, parts, bson_get_data(&empty), empty.len, p);
        *tail = p, tail = &p->order;
    }
    for (size_t i = 0; ok && i < n; i++) {
        item_t *it = &items[i];
        if (it->val.value_type != BSON_TYPE_NULL) {
            if (!r.have_minmax)
                r.gmin = it->val, r.have_minmax = true;
            r.gmax = it->val;
            const uint8_t *key = bson_get_data(it->pkey);
            HASH_FIND(hh, parts, key, it->pkey->len, p);
            if (!p) {
                p = bson_malloc0(sizeof *p);
                p->pkey = it->pkey;
                p->next = d->bounds == DENSIFY_EXPLICIT ? d->lo
                          : d->bounds == DENSIFY_FULL   ? r.gmin
                                                        : it->val;
                HASH_ADD_KEYPTR(hh, parts, key, it->pkey->len, p);
                *tail = p, tail = &p->order;
            }
            ok =
                fill_to(&r, p, &it->val, false, d->bounds == DENSIFY_EXPLICIT ? &d->hi : NULL, err);
        }
        if (ok) {
            doclist_push(out, it->doc);
            it->doc = NULL;
        }
    }
    /* the rest of each sequence: to hi (explicit), to the largest value (full) */
    for (p = first; ok && p; p = p->order) {
        if (d->bounds == DENSIFY_EXPLICIT)
            ok = fill_to(&r, p, &d->hi, false, &d->hi, err);
        else if (d->bounds == DENSIFY_FULL && r.have_minmax)
            ok = fill_to(&r, p, &r.gmax, true, NULL, err);
    }
    HASH_ITER(hh, parts, p, ptmp)
    {
        HASH_DEL(parts, p);
        bson_free(p);
    }
    for (size_t i = 0; i < n; i++) {
        if (items[i].doc)
            bson_destroy(items[i].doc);
        if (items[i].pkey)
            bson_destroy(items[i].pkey);
    }
    bson_free(items);
    return ok;
}

const stage_def_t pipeline_densify_stages[] = {
    {"$densify", densify_parse, densify_run, NULL, densify_free, 0},
    {NULL, NULL, NULL, NULL, NULL, 0},
};
