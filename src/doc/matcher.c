/* matcher: compiles a MongoDB query filter into a tree of predicates and runs
 * it against documents with mongod's array traversal and type-bracketing
 * rules; also extracts index bounds and the seed document of an upsert. */
#include "doc/matcher.h"

#include <math.h>
#include <string.h>
#include <time.h>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "doc/bits.h"
#include "doc/collation.h"
#include "doc/compare.h"
#include "doc/expr.h"
#include "doc/fts.h"
#include "doc/jsonschema.h"
#include "doc/matcher-private.h"
#include "doc/num.h"
#include "doc/path.h"
#include "doc/regexp.h"
#include "geo/geo.h"
#include "util/bsonview.h"

/* A node walked along its path: leaf_hit stops at the first value the
 * node's test passes and keeps the array position it matched through in
 * `pos`; near_hit keeps the least distance of any value in `best`. */
typedef struct node_walk {
    const mnode_t *node;
    int pos;
    double best;
} node_walk_t;

/* A clear error state; not zeroed whole (a dberr_t is over a kilobyte). */
matcher_state_t *matcher_state_new(void)
{
    matcher_state_t *st = bson_malloc(sizeof *st);
    st->has_error = false;
    dberr_clear(&st->error);
    return st;
}

/* -- regular expressions -- */

mregex_t *matcher_regex_new(const char *pattern, size_t len, const char *flags, dberr_t *err)
{
    pcre2_code *re = regexp_compile_query(pattern, len, flags, err);
    if (!re)
        return NULL;
    mregex_t *r = bson_malloc0(sizeof *r);
    r->code = re;
    r->md = pcre2_match_data_create_from_pattern(re, NULL);
    r->pattern = bson_strdup(pattern);
    r->flags = bson_strdup(flags);
    return r;
}

void matcher_regex_parts(const bson_value_t *v, const char **pattern, const char **flags)
{
    *pattern = v->value.v_regex.regex ? v->value.v_regex.regex : "";
    *flags = v->value.v_regex.options ? v->value.v_regex.options : "";
}

mregex_t *matcher_regex_from_value(const bson_value_t *v, dberr_t *err)
{
    const char *p, *f;
    matcher_regex_parts(v, &p, &f);
    return matcher_regex_new(p, strlen(p), f, err);
}

static void regex_destroy(mregex_t *r)
{
    if (!r)
        return;
    pcre2_match_data_free(r->md);
    pcre2_code_free(r->code);
    bson_free(r->pattern);
    bson_free(r->flags);
    bson_free(r);
}

/* A regex matches strings and symbols by pattern, and BSON regexes with the
 * same pattern and flags. */
static bool regex_test(const mregex_t *r, const bson_value_t *v)
{
    const char *s;
    size_t len;
    if (v->value_type == BSON_TYPE_UTF8) {
        s = v->value.v_utf8.str, len = v->value.v_utf8.len;
    } else if (v->value_type == BSON_TYPE_SYMBOL) {
        s = v->value.v_symbol.symbol, len = v->value.v_symbol.len;
    } else if (v->value_type == BSON_TYPE_REGEX) {
        const char *p, *f;
        matcher_regex_parts(v, &p, &f);
        return strcmp(p, r->pattern) == 0 && strcmp(f, r->flags) == 0;
    } else {
        return false;
    }
    return pcre2_match(r->code, (PCRE2_SPTR)s, len, 0, 0, r->md, NULL) >= 0;
}

/* -- nodes -- */

mnode_t *matcher_node_new(mkind_t kind, const char *path)
{
    mnode_t *n = bson_malloc0(sizeof *n);
    n->kind = kind;
    n->path = path ? bson_strdup(path) : NULL;
    return n;
}

void matcher_node_destroy(mnode_t *n)
{
    if (!n)
        return;
    for (size_t i = 0; i < n->nkids; i++)
        matcher_node_destroy(n->kids[i]);
    bson_free(n->kids);
    bson_value_destroy(&n->arg);
    for (size_t i = 0; i < n->nlist; i++) {
        bson_value_destroy(&n->list[i]);
        regex_destroy(n->list_re[i]);
    }
    bson_free(n->list);
    bson_free(n->list_re);
    regex_destroy(n->re);
    matcher_destroy(n->sub);
    expr_destroy(n->expr);
    bits_destroy(n->bits);
    fts_query_destroy(n->text);
    jsonschema_destroy(n->schema);
    geo_pred_destroy(n->geo);
    bson_free(n->path);
    bson_free(n);
}

void matcher_node_add(mnode_t *parent, mnode_t *kid)
{
    parent->kids = bson_realloc(parent->kids, (parent->nkids + 1) * sizeof *parent->kids);
    parent->kids[parent->nkids++] = kid;
}

mnode_t *matcher_node_add_new(mnode_t *parent, mkind_t kind, const char *path)
{
    mnode_t *kid = matcher_node_new(kind, path);
    matcher_node_add(parent, kid);
    return kid;
}

void matcher_node_set_arg(mnode_t *n, const bson_value_t *v)
{
    bson_value_copy(v, &n->arg);
}

/* -- single-value tests -- */

static bool is_nan_number(const bson_value_t *v)
{
    return compare_is_number(v) && v->value_type != BSON_TYPE_INT32 &&
           v->value_type != BSON_TYPE_INT64 && isnan(compare_to_double(v));
}

/* {path: arg}: null also matches a missing value; otherwise equal in the
 * comparison order within the same type bracket. */
static bool eq_test(const bson_value_t *arg, const bson_value_t *v, const collation_t *coll)
{
    if (arg->value_type == BSON_TYPE_NULL)
        return v->value_type == BSON_TYPE_NULL || v->value_type == BSON_TYPE_EOD;
    if (v->value_type == BSON_TYPE_EOD)
        return false;
    if (compare_type_rank(arg->value_type) != compare_type_rank(v->value_type))
        return false;
    return compare_values_coll(v, arg, coll) == 0;
}

/* $gt/$gte/$lt/$lte with type bracketing, NaN and MinKey/MaxKey rules. */
static bool cmp_test(mkind_t kind, const bson_value_t *arg, const bson_value_t *v,
                     const collation_t *coll)
{
    bool inclusive = kind == MN_GTE || kind == MN_LTE;
    if (v->value_type == BSON_TYPE_EOD)
        return inclusive && arg->value_type == BSON_TYPE_NULL;
    if (compare_type_rank(arg->value_type) != compare_type_rank(v->value_type)) {
        if (arg->value_type == BSON_TYPE_MINKEY)
            return kind == MN_GT || kind == MN_GTE;
        if (arg->value_type == BSON_TYPE_MAXKEY)
            return kind == MN_LT || kind == MN_LTE;
        return false;
    }
    if (compare_is_number(arg) && (is_nan_number(arg) || is_nan_number(v)))
        return inclusive && is_nan_number(arg) && is_nan_number(v);
    int c = compare_values_coll(v, arg, coll);
    switch (kind) {
    case MN_GT:
        return c > 0;
    case MN_GTE:
        return c >= 0;
    case MN_LT:
        return c < 0;
    default:
        return c <= 0;
    }
}

static bool type_test(const mnode_t *n, const bson_value_t *v)
{
    bson_type_t t = v->value_type;
    if (t == BSON_TYPE_EOD)
        return false;
    if (n->type_number && compare_is_number(v))
        return true;
    if (t == BSON_TYPE_MINKEY)
        return (n->types >> 62) & 1;
    if (t == BSON_TYPE_MAXKEY)
        return (n->types >> 63) & 1;
    return ((unsigned)t < 62) && ((n->types >> (unsigned)t) & 1);
}

/* mongod truncates doubles toward zero (saturating) for $mod. */
int64_t matcher_to_int64_trunc(const bson_value_t *v)
{
    if (v->value_type == BSON_TYPE_INT32)
        return v->value.v_int32;
    if (v->value_type == BSON_TYPE_INT64)
        return v->value.v_int64;
    return num_saturate_int64(compare_to_double(v));
}

static bool mod_test(const mnode_t *n, const bson_value_t *v)
{
    if (!compare_is_number(v))
        return false;
    double d = compare_to_double(v);
    if (isnan(d) || isinf(d))
        return false;
    int64_t x = matcher_to_int64_trunc(v);
    int64_t r = n->mod_div == -1 ? 0 : x % n->mod_div;
    return r == n->mod_rem;
}

static bool eval(const matcher_t *m, const mnode_t *n, const bson_t *doc, int *pos);
static bool eval_value(const mnode_t *n, const bson_value_t *v);

/* Runs the predicates of `m` on document `doc`. */
static bool matcher_run(const matcher_t *m, const bson_t *doc, int *pos)
{
    return eval(m, m->root, doc, pos);
}

/* Records `err` as the matcher's error unless one is already pending. */
static void matcher_note_error(const matcher_t *m, const dberr_t *err)
{
    if (m->st->has_error)
        return;
    m->st->has_error = true;
    m->st->error = *err;
}

/* A leaf predicate against one value; when an $elemMatch form matches,
 * `elem_pos` receives the element index (it is left alone otherwise). */
static bool leaf_test(const mnode_t *n, const bson_value_t *v, int *elem_pos)
{
    switch (n->kind) {
    case MN_EQ:
        return eq_test(&n->arg, v, n->coll);
    case MN_GT:
    case MN_GTE:
    case MN_LT:
    case MN_LTE:
        return cmp_test(n->kind, &n->arg, v, n->coll);
    case MN_IN:
        for (size_t i = 0; i < n->nlist; i++) {
            if (n->list_re[i] ? regex_test(n->list_re[i], v) : eq_test(&n->list[i], v, n->coll))
                return true;
        }
        return false;
    case MN_EXISTS:
        return v->value_type != BSON_TYPE_EOD;
    case MN_TYPE:
        return type_test(n, v);
    case MN_MOD:
        return mod_test(n, v);
    case MN_REGEX:
        return regex_test(n->re, v);
    case MN_BITS:
        return bits_test(n->bits, v);
    case MN_GEO:
        return geo_pred_test(n->geo, v);
    case MN_SIZE: {
        if (v->value_type != BSON_TYPE_ARRAY || n->size < 0)
            return false;
        bson_t arr;
        if (!bson_init_static(&arr, v->value.v_doc.data, v->value.v_doc.data_len))
            return false;
        return (int64_t)bson_count_keys(&arr) == n->size;
    }
    case MN_ELEM_OBJ:
    case MN_ELEM_VAL: {
        if (v->value_type != BSON_TYPE_ARRAY)
            return false;
        bson_iter_t it;
        if (!bson_iter_init_from_data(&it, v->value.v_doc.data, v->value.v_doc.data_len))
            return false;
        int i = 0;
        while (bson_iter_next(&it)) {
            const bson_value_t *ev = bson_iter_value(&it);
            bool ok = false;
            if (n->kind == MN_ELEM_VAL) {
                ok = eval_value(n->kids[0], ev);
            } else if (ev->value_type == BSON_TYPE_DOCUMENT || ev->value_type == BSON_TYPE_ARRAY) {
                bson_t sub;
                if (bson_init_static(&sub, ev->value.v_doc.data, ev->value.v_doc.data_len))
                    ok = matcher_run(n->sub, &sub, NULL);
            }
            if (ok) {
                if (elem_pos)
                    *elem_pos = i;
                return true;
            }
            i++;
        }
        return false;
    }
    default:
        return false;
    }
}

/* Value-form evaluation inside {$elemMatch: {$gt: 1, ...}}. */
static bool eval_value(const mnode_t *n, const bson_value_t *v)
{
    switch (n->kind) {
    case MN_AND:
        for (size_t i = 0; i < n->nkids; i++) {
            if (!eval_value(n->kids[i], v))
                return false;
        }
        return true;
    case MN_NOT:
        return !eval_value(n->kids[0], v);
    case MN_TRUE:
        return true;
    case MN_FALSE:
        return false;
    default:
        return leaf_test(n, v, NULL);
    }
}

static bool leaf_hit(const path_hit_t *hit, void *ctx)
{
    node_walk_t *w = ctx;
    if (!leaf_test(w->node, hit->value, &w->pos)) /* sets pos only on a match */
        return true;
    if (hit->array_pos >= 0)
        w->pos = hit->array_pos;
    return false;
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Evaluates `n` on `doc`; on a match `*pos` (when not NULL and still -1)
 * receives the array position the predicate matched through. */
static bool eval(const matcher_t *m, const mnode_t *n, const bson_t *doc, int *pos)
{
    switch (n->kind) {
    case MN_AND:
        for (size_t i = 0; i < n->nkids; i++) {
            if (!eval(m, n->kids[i], doc, pos))
                return false;
        }
        return true;
    case MN_OR:
        for (size_t i = 0; i < n->nkids; i++) {
            if (eval(m, n->kids[i], doc, pos))
                return true;
        }
        return false;
    case MN_NOR:
        for (size_t i = 0; i < n->nkids; i++) {
            if (eval(m, n->kids[i], doc, NULL))
                return false;
        }
        return true;
    case MN_NOT:
        return !eval(m, n->kids[0], doc, NULL);
    case MN_TRUE:
        return true;
    case MN_FALSE:
        return false;
    case MN_TEXT:
        return fts_query_matches(n->text, doc);
                    return false;
    case MN_SCHEMA:
        return jsonschema_matches(n->schema, doc);
    case MN_EXPR: {
        expr_ctx_t ctx = {.root = doc, .now_ms = now_ms(), .vars = m->let, .coll = m->coll};
        bson_value_t out;
        dberr_t err;
        if (!expr_eval(n->expr, &ctx, &out, &err)) {
            matcher_note_error(m, &err);
            return false;
        }
        bool t = expr_truthy(&out);
        bson_value_destroy(&out);
        return t;
    }
    default: {
        bool expand = n->kind != MN_SIZE && n->kind != MN_ELEM_OBJ && n->kind != MN_ELEM_VAL;
        node_walk_t w = {n, -1, -1};
        bool matched = !path_walk(doc, n->path, expand, leaf_hit, &w);
        if (matched && pos && *pos < 0)
            *pos = w.pos;
        return matched;
    }
    }
}

/* -- parsing -- */

/* `top`: the filter applies to the whole document (not inside $elemMatch),
 * where $expr is allowed. */

/* Checks the variables of every top-level $expr against the let names. */
static bool check_expr_vars(const mnode_t *n, const bson_t *let, dberr_t *err)
{
    if (n->kind == MN_EXPR)
        return expr_check_vars(n->expr, let, err);
    if (n->kind != MN_AND && n->kind != MN_OR && n->kind != MN_NOR && n->kind != MN_NOT)
        return true;
    for (size_t i = 0; i < n->nkids; i++)
        if (!check_expr_vars(n->kids[i], let, err))
            return false;
    return true;
}

static bool has_expr(const mnode_t *n)
{
    if (n->kind == MN_EXPR)
        return true;
    for (size_t i = 0; i < n->nkids; i++)
        if (has_expr(n->kids[i]))
            return true;
    return false;
}

/* Re-validates the $expr variables against the current let, leaving any
 * failure as the pending error. */
static void matcher_validate(matcher_t *m)
{
    dberr_t err;
    dberr_clear(&err);
    if (m->has_expr && !check_expr_vars(m->root, m->let, &err))
        matcher_note_error(m, &err);
}

bool matcher_has_expr(const matcher_t *m)
{
    return m->has_expr;
}

/* Counts the $text nodes ANDed with the whole filter (*first: the first). */
static void text_nodes(const mnode_t *n, const mnode_t **first, int *count)
{
    if (n->kind == MN_TEXT) {
        if (first && !*first)
            *first = n;
        (*count)++;
    } else if (n->kind == MN_AND) {
        for (size_t i = 0; i < n->nkids; i++)
            text_nodes(n->kids[i], first, count);
    }
}

matcher_t *matcher_new(const bson_t *filter, dberr_t *err)
{
    matcher_t *m = bson_malloc0(sizeof *m);
    m->refs = 1;
    m->root = matcher_node_new(MN_AND, NULL);
    m->st = matcher_state_new();
    bool text_ok = matcher_parse_text_ok; /* matcher_new may run inside another's parse */
    matcher_parse_text_ok = true;
    bool parsed = !filter || matcher_parse_filter(filter, m->root, 0, true, err);
    matcher_parse_text_ok = text_ok;
    if (!parsed) {
        matcher_destroy(m);
        return NULL;
    }
    int ntext = 0;
    text_nodes(m->root, NULL, &ntext);
    if (ntext > 1) {
        dberr_set(err, DBERR_BAD_VALUE, "Too many text expressions");
        matcher_destroy(m);
        return NULL;
    }
    m->has_expr = has_expr(m->root);
    matcher_validate(m);
    return m;
}

/* Counts the $near nodes under `n`; `top` is set false for any not a
 * direct child of the root AND. */
static int near_count(const mnode_t *n, bool direct, bool *top)
{
    int c = 0;
    if (n->kind == MN_GEO && geo_pred_is_near(n->geo)) {
        if (!direct)
            *top = false;
        c++;
    }
    for (size_t i = 0; i < n->nkids; i++)
        c += near_count(n->kids[i], false, top);
    if (n->sub)
        c += near_count(n->sub->root, false, top);
    return c;
}

matcher_t *matcher_new_near(const bson_t *filter, dberr_t *err)
{
    matcher_parse_allow_near = true;
    matcher_t *m = matcher_new(filter, err);
    matcher_parse_allow_near = false;
    if (!m)
        return NULL;
    bool top = true;
    int count = 0;
    for (size_t i = 0; i < m->root->nkids; i++)
        count += near_count(m->root->kids[i], true, &top);
    if (!top || count > 1) {
        dberr_set(err, DBERR_BAD_VALUE,
                  top ? "Too many geoNear expressions" : "geoNear must be top-level expr");
        matcher_destroy(m);
        return NULL;
    }
    return m;
}

/* The top-level $near node of `m`, or NULL. */
static const mnode_t *near_node(const matcher_t *m)
{
    for (size_t i = 0; i < m->root->nkids; i++) {
        const mnode_t *n = m->root->kids[i];
        if (n->kind == MN_GEO && geo_pred_is_near(n->geo))
            return n;
    }
    return NULL;
}

const char *matcher_near_path(const matcher_t *m)
{
    const mnode_t *n = near_node(m);
    return n ? n->path : NULL;
}

const geo_pred_t *matcher_geo_on(const matcher_t *m, const char *path)
{
    const mnode_t *n = near_node(m);
    if (n)
        return strcmp(n->path, path) == 0 ? n->geo : NULL;
    for (size_t i = 0; i < m->root->nkids; i++) {
        n = m->root->kids[i];
        if (n->kind == MN_GEO && strcmp(n->path, path) == 0)
            return n->geo;
    }
    return NULL;
}

static bool near_hit(const path_hit_t *hit, void *ctx)
{
    node_walk_t *w = ctx;
    double d = geo_pred_distance(w->node->geo, hit->value);
    if (d >= 0 && (w->best < 0 || d < w->best))
        w->best = d;
    return true;
}

double matcher_near_distance(const matcher_t *m, const bson_t *doc)
{
    const mnode_t *n = near_node(m);
    if (!n)
        return -1;
    node_walk_t w = {n, -1, -1};
    path_walk(doc, n->path, true, near_hit, &w);
    return w.best;
}

/* Drops the let variables and any pending error. */
static void matcher_reset_vars(matcher_t *m)
{
    if (m->let)
        bson_destroy(m->let);
    m->let = NULL;
    m->st->has_error = false;
    dberr_clear(&m->st->error);
}

void matcher_set_let(matcher_t *m, const bson_t *let)
{
    dberr_t err;
    matcher_reset_vars(m);
    if (let && !bson_empty(let)) {
        m->let = bson_new();
        dberr_clear(&err);
        if (!expr_eval_let(let, now_ms(), m->let, &err)) {
            matcher_note_error(m, &err);
            return;
        }
    }
    matcher_validate(m);
}

void matcher_set_vars(matcher_t *m, const bson_t *vars)
{
    matcher_reset_vars(m);
    if (vars && !bson_empty(vars))
        m->let = bson_copy(vars);
    matcher_validate(m);
}

bool matcher_take_error(matcher_t *m, dberr_t *err)
{
    if (!m || !m->st->has_error)
        return false;
    if (err)
        *err = m->st->error;
    m->st->has_error = false;
    dberr_clear(&m->st->error);
    return true;
}

matcher_t *matcher_ref(matcher_t *m)
{
    m->refs++;
    return m;
}

void matcher_destroy(matcher_t *m)
{
    if (!m || --m->refs > 0)
        return;
    matcher_node_destroy(m->root);
    if (m->let)
        bson_destroy(m->let);
    bson_free(m->st);
    collation_destroy(m->coll);
    bson_free(m);
}

bool matcher_matches(const matcher_t *m, const bson_t *doc, int *array_pos)
{
    int pos = -1;
    bool ok = false;
    /* a pending error fails the operation: match nothing until it is taken */
    if (!(m->has_expr && m->st->has_error)) {
        ok = matcher_run(m, doc, &pos);
        /* an error inside $not/$nor must not turn into a match */
        if (ok && m->has_expr && m->st->has_error)
            ok = false;
    }
    if (array_pos)
        *array_pos = ok ? pos : -1;
    return ok;
}

fts_query_t *matcher_text(const matcher_t *m)
{
    const mnode_t *n = NULL;
    int count = 0;
    if (m)
        text_nodes(m->root, &n, &count);
    return n ? n->text : NULL;
}

bool matcher_is_empty(const matcher_t *m)
{
    return m->root->nkids == 0;
}

/* -- bounds -- */

static void bounds_collect(const mnode_t *n, const char *path, matcher_bounds_t *out)
{
    if (n->kind == MN_AND) {
        for (size_t i = 0; i < n->nkids; i++)
            bounds_collect(n->kids[i], path, out);
        return;
    }
    if (!n->path || strcmp(n->path, path) != 0)
        return;
    switch (n->kind) {
    case MN_EQ:
        if (!out->has_eq) {
            out->has_eq = true;
            out->eq = n->arg;
        }
        break;
    case MN_GT:
    case MN_GTE: {
        bool incl = n->kind == MN_GTE;
        int c = out->has_lower ? compare_values_coll(&n->arg, &out->lower, n->coll) : 1;
        if (c > 0 || (c == 0 && !incl)) {
            out->has_lower = true;
            out->lower = n->arg;
            out->lower_inclusive = incl;
        }
        break;
    }
    case MN_LT:
    case MN_LTE: {
        bool incl = n->kind == MN_LTE;
        int c = out->has_upper ? compare_values_coll(&n->arg, &out->upper, n->coll) : -1;
        if (c < 0 || (c == 0 && !incl)) {
            out->has_upper = true;
            out->upper = n->arg;
            out->upper_inclusive = incl;
        }
        break;
    }
    default:
        break;
    }
}

bool matcher_bounds(const matcher_t *m, const char *path, matcher_bounds_t *out)
{
    memset(out, 0, sizeof *out);
    bounds_collect(m->root, path, out);
    return out->has_eq || out->has_lower || out->has_upper;
}

static void bound_paths_collect(const mnode_t *n, const char **out, int cap, int *len)
{
    if (n->kind == MN_AND) {
        for (size_t i = 0; i < n->nkids; i++)
            bound_paths_collect(n->kids[i], out, cap, len);
        return;
    }
    if (!n->path || *len >= cap)
        return;
    switch (n->kind) {
    case MN_EQ:
    case MN_GT:
    case MN_GTE:
    case MN_LT:
    case MN_LTE:
        for (int i = 0; i < *len; i++)
            if (strcmp(out[i], n->path) == 0)
                return;
        out[(*len)++] = n->path;
        break;
    default:
        break;
    }
}

int matcher_bound_paths(const matcher_t *m, const char **out, int cap)
{
    int len = 0;
    if (m->root)
        bound_paths_collect(m->root, out, cap, &len);
    return len;
}

static const mnode_t *in_node_find(const mnode_t *n, const char *path)
{
    if (n->kind == MN_AND) {
        for (size_t i = 0; i < n->nkids; i++) {
            const mnode_t *f = in_node_find(n->kids[i], path);
            if (f)
                return f;
        }
        return NULL;
    }
    return n->kind == MN_IN && n->path && strcmp(n->path, path) == 0 ? n : NULL;
}

bool matcher_in_values(const matcher_t *m, const char *path, const bson_value_t **vals,
                       size_t *n)
{
    const mnode_t *in = m->root ? in_node_find(m->root, path) : NULL;
    if (!in)
        return false;
    for (size_t i = 0; i < in->nlist; i++)
        if (in->list_re[i])
            return false;
    *vals = in->list;
    *n = in->nlist;
    return true;
}

static bool sargable_find(const mnode_t *n, const char *path)
{
    switch (n->kind) {
    case MN_AND:
    case MN_OR:
    case MN_NOT:
        for (size_t i = 0; i < n->nkids; i++)
            if (sargable_find(n->kids[i], path))
                return true;
        return false;
    case MN_EQ:
    case MN_GT:
    case MN_GTE:
    case MN_LT:
    case MN_LTE:
    case MN_IN:
    case MN_REGEX:
    case MN_EXISTS:
    case MN_TYPE:
    case MN_MOD:
    case MN_GEO:
    case MN_ELEM_VAL:
        return n->path && strcmp(n->path, path) == 0;
    default:
        return false;
    }
}

bool matcher_path_sargable(const matcher_t *m, const char *path)
{
    return m->root && sargable_find(m->root, path);
}

bool matcher_iter_filter(const bson_t *filter, int depth, bson_iter_t *it, dberr_t *err)
{
    if (depth > MATCHER_MAX_DEPTH)
        return dberr_set(err, DBERR_BAD_VALUE, "exceeded depth limit of %d when parsing",
                         MATCHER_MAX_DEPTH);
    if (!bson_iter_init(it, filter))
        return dberr_set(err, DBERR_BAD_VALUE, "invalid filter document");
    return true;
}

/* Points every node (sub-matchers of $elemMatch included) at `coll`. */
static void node_set_collation(mnode_t *n, collation_t *coll)
{
    if (!n)
        return;
    n->coll = n->bytewise ? NULL : coll;
    for (size_t i = 0; i < n->nkids; i++)
        node_set_collation(n->kids[i], coll);
    if (n->sub)
        matcher_set_collation(n->sub, coll);
}

void matcher_set_collation(matcher_t *m, collation_t *coll)
{
    collation_t *old = m->coll;
    m->coll = collation_ref(coll);
    node_set_collation(m->root, m->coll);
    collation_destroy(old);
}

const collation_t *matcher_collation(const matcher_t *m)
{
    return m->coll;
}
