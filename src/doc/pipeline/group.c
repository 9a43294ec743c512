/* pipeline/group: the $group stage — documents grouped by the key
 * expression in a hash table (util/hash.h), first-seen order kept — and its
 * accumulators, one row each in the accumulator table. */
#include "doc/pipeline/window-private.h"
#include "util/fiber.h"

#include <string.h>

#include "doc/compare.h"
#include "doc/keystring.h"
#include "doc/num.h"
#include "util/buf.h"
#include "util/hash.h"
#include "util/table.h"

typedef struct acc_def acc_def_t;

/* One `field: {$acc: expr}` of a $group. */
typedef struct accum {
    char *field;
    const acc_def_t *def;
    expr_t *arg; /* NULL for $count */
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
    char buf[16];
    const char *key;
    if (v->value_type == BSON_TYPE_EOD)
        return;
    bson_uint32_to_string(a->nlist++, &key, buf, sizeof buf);
    bson_append_value(a->list, key, -1, v);
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

static const acc_def_t accumulators[] = {
    {"$sum", false, sum_update, sum_emit, 0},
    {"$avg", false, sum_update, avg_emit, 0},
    {"$min", false, minmax_update, val_emit, 0},
    {"$max", false, minmax_update, val_emit, 1},
    {"$first", false, first_update, val_emit, 0},
    {"$last", false, last_update, val_emit, 0},
    {"$push", false, push_update, list_emit, 0},
    {"$addToSet", false, add_to_set_update, list_emit, 0},
    {"$count", true, count_update, count_emit, 0},
    {NULL, false, NULL, NULL, 0},
};

static const acc_def_t *find_accumulator(const char *name)
{
    const void *tables[] = {accumulators};
    return table_find(tables, 1, sizeof(acc_def_t), name);
}

/* ---- parse ---- */

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
    if (acc->def->no_arg) {
        bson_t empty;
        if (!BSON_ITER_HOLDS_DOCUMENT(&a) || (pipeline_borrow_doc(&a, &empty), !bson_empty(&empty)))
            return dberr_set(err, DBERR_TYPE_MISMATCH, "$count takes no arguments, i.e. $count:{}");
    } else {
        if (BSON_ITER_HOLDS_ARRAY(&a))
            return dberr_set(err, 40237, "The %s accumulator is a unary operator", op);
        if (!(acc->arg = expr_new(&a, err)))
            return false;
    }
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
        accum_t acc = {NULL, NULL, NULL};
        bool ok = parse_accum(&it, &acc, err);
        if (!ok) {
            expr_destroy(acc.arg);
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
        if (!expr_check_vars(g->accs[i].arg, let, err))
            return false;
    return true;
}

static void group_free(stage_t *s)
{
    group_spec_t *g = s->u.group;
    if (!g)
        return;
    expr_destroy(g->id);
    for (size_t i = 0; i < g->naccs; i++) {
        bson_free(g->accs[i].field);
        expr_destroy(g->accs[i].arg);
    }
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
        if (HASH_COUNT(groups) != before)
            mem += (int64_t)(sizeof *g + g->kbytes.len * 2 + spec->naccs * sizeof *g->st);
        for (size_t a = 0; a < spec->naccs; a++) {
            uint32_t had = g->st[a].list->len;
            bson_value_t v;
            memset(&v, 0, sizeof v);
            v.value_type = BSON_TYPE_EOD;
            if (spec->accs[a].arg && !expr_eval(spec->accs[a].arg, &ctx, &v, err)) {
                ok = false;
                break;
            }
            spec->accs[a].def->update(&spec->accs[a], &g->st[a], &v);
            if (v.value_type != BSON_TYPE_EOD)
                bson_value_destroy(&v);
            mem += (int64_t)g->st[a].list->len - had;
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
    accum_t spec;
    acc_state_t st;
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

void pipeline_acc_destroy(pipeline_acc_t *a)
{
    if (!a)
        return;
    if (a->st.val.value_type != BSON_TYPE_EOD)
        bson_value_destroy(&a->st.val);
    bson_destroy(a->st.list);
    bson_free(a);
}
