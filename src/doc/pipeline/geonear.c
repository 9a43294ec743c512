/* geonear: the $geoNear stage (first stage only) — documents ordered by
 * their distance from a point, with distanceField, includeLocs, query,
 * min/maxDistance, distanceMultiplier; the caller (cmd/query.c) checks
 * the collection's 2dsphere index and names `key` when it is not given. */
#include <math.h>
#include <string.h>

#include "doc/path.h"
#include "doc/pipeline/pipeline-private.h"
#include "geo/geo.h"
#include "util/fiber.h"
#include "util/shellfmt.h"

struct geonear_spec {
    bson_t *near_ops; /* {$nearSphere | $near: point, ...} for geo_pred_new_near */
    geo_pred_t *near; /* the point and the distance range */
    char *key;        /* the geometry path; NULL until the caller names it */
    char *distance_field;
    char *include_locs; /* or NULL */
    matcher_t *query;   /* or NULL */
    bson_t *query_doc;  /* the query as given (owned), or NULL */
    double multiplier;  /* distanceMultiplier, 1 when not given */
};

static void geonear_free(stage_t *s)
{
    geonear_spec_t *g = s->u.geonear;
    if (!g)
        return;
    if (g->near_ops)
        bson_destroy(g->near_ops);
    geo_pred_destroy(g->near);
    bson_free(g->key);
    bson_free(g->distance_field);
    bson_free(g->include_locs);
    matcher_destroy(g->query);
    if (g->query_doc)
        bson_destroy(g->query_doc);
    bson_free(g);
    s->u.geonear = NULL;
}

static bool geonear_number(const bson_iter_t *it, const char *name, double *out, dberr_t *err)
{
    if (!BSON_ITER_HOLDS_NUMBER(it) && !BSON_ITER_HOLDS_DECIMAL128(it))
        return dberr_set(err, DBERR_TYPE_MISMATCH, "%s must be a number", name);
    *out = bson_iter_as_double(it);
    if (!(*out >= 0))
        return dberr_set(err, DBERR_BAD_VALUE, "%s must be nonnegative", name);
    return true;
}

static bool geonear_string(const bson_iter_t *it, const char *name, char **out, dberr_t *err)
{
    if (!BSON_ITER_HOLDS_UTF8(it))
        return dberr_set(err, DBERR_TYPE_MISMATCH,
                         "$geoNear parameter '%s' must be of type string but found type: %s", name,
                         shellfmt_type_name(bson_iter_type(it)));
    const char *v = bson_iter_utf8(it, NULL);
    if (!v[0])
        return dberr_set(err, DBERR_BAD_VALUE, "$geoNear parameter '%s' cannot be the empty string",
                         name);
    if (v[0] == '$')
        return dberr_set(
            err, 16410,
            "FieldPath field names may not start with '$'. Consider using $getField or $setField.");
    bson_free(*out);
    *out = bson_strdup(v);
    return true;
}

static bool geonear_parse(stage_t *s, bson_iter_t *it, const bson_t *let, dberr_t *err)
{
    bson_iter_t c;
    bool spherical = false, have_min = false, have_max = false;
    double min_d = 0, max_d = 0;
    const bson_value_t *near = NULL;
    if (!BSON_ITER_HOLDS_DOCUMENT(it) || !bson_iter_recurse(it, &c))
        return dberr_set(err, 10065, "invalid parameter: expected an object ($geoNear)");
    geonear_spec_t *g = s->u.geonear = bson_malloc0(sizeof *g);
    g->multiplier = 1;
    while (bson_iter_next(&c)) {
        const char *k = bson_iter_key(&c);
        if (strcmp(k, "near") == 0) {
            if (!BSON_ITER_HOLDS_DOCUMENT(&c) && !BSON_ITER_HOLDS_ARRAY(&c))
                return dberr_set(err, DBERR_TYPE_MISMATCH,
                                 "$geoNear requires near argument to be a GeoJSON object or a "
                                 "legacy point(array)");
            near = bson_iter_value(&c);
        } else if (strcmp(k, "distanceField") == 0) {
            if (!geonear_string(&c, k, &g->distance_field, err))
                return false;
        } else if (strcmp(k, "includeLocs") == 0) {
            if (!geonear_string(&c, k, &g->include_locs, err))
                return false;
        } else if (strcmp(k, "key") == 0) {
            if (!geonear_string(&c, k, &g->key, err))
                return false;
        } else if (strcmp(k, "spherical") == 0) {
            spherical = bson_iter_as_bool(&c);
        } else if (strcmp(k, "minDistance") == 0) {
            if (!geonear_number(&c, "minDistance", &min_d, err))
                return false;
            have_min = true;
        } else if (strcmp(k, "maxDistance") == 0) {
            if (!geonear_number(&c, "maxDistance", &max_d, err))
                return false;
            have_max = true;
        } else if (strcmp(k, "distanceMultiplier") == 0) {
            if (!geonear_number(&c, "distanceMultiplier", &g->multiplier, err))
                return false;
        } else if (strcmp(k, "query") == 0) {
            if (!BSON_ITER_HOLDS_DOCUMENT(&c))
                return dberr_set(err, DBERR_TYPE_MISMATCH, "query must be an object");
            bson_t q;
            pipeline_borrow_doc(&c, &q);
            if (!(g->query = matcher_new(&q, err)))
                return false;
            g->query_doc = bson_copy(&q);
            if (let)
                matcher_set_let(g->query, let);
        } else if (strcmp(k, "uniqueDocs") == 0) {
            /* deprecated and a no-op in mongod as well */
        } else {
            return dberr_set(err, DBERR_BAD_VALUE, "Unknown argument to $geoNear: %s", k);
        }
    }
    if (!near)
        return dberr_set(err, DBERR_BAD_VALUE, "$geoNear requires a 'near' argument");
    if (!g->distance_field)
        return dberr_set(err, DBERR_BAD_VALUE, "$geoNear requires a 'distanceField' argument");
    /* as a $near (GeoJSON point: metres), a legacy $nearSphere (radians) or
     * a flat legacy $near (spherical: false, on a 2d index) */
    bool geojson = near->value_type == BSON_TYPE_DOCUMENT;
    bson_t pt;
    bson_iter_t first;
    if (geojson && bson_init_static(&pt, near->value.v_doc.data, near->value.v_doc.data_len) &&
        bson_iter_init(&first, &pt) && bson_iter_next(&first) &&
        (BSON_ITER_HOLDS_NUMBER(&first) || BSON_ITER_HOLDS_DECIMAL128(&first)))
        geojson = false; /* {x: .., y: ..} */
    g->near_ops = bson_new();
    if (geojson) {
        bson_t inner;
        BSON_APPEND_DOCUMENT_BEGIN(g->near_ops, "$nearSphere", &inner);
        BSON_APPEND_VALUE(&inner, "$geometry", near);
        if (have_min)
            BSON_APPEND_DOUBLE(&inner, "$minDistance", min_d);
        if (have_max)
            BSON_APPEND_DOUBLE(&inner, "$maxDistance", max_d);
        bson_append_document_end(g->near_ops, &inner);
    } else {
        BSON_APPEND_VALUE(g->near_ops, spherical ? "$nearSphere" : "$near", near);
        if (have_min)
            BSON_APPEND_DOUBLE(g->near_ops, "$minDistance", min_d);
        if (have_max)
            BSON_APPEND_DOUBLE(g->near_ops, "$maxDistance", max_d);
    }
    g->near = geo_pred_new_near(geojson || spherical ? "$nearSphere" : "$near", g->near_ops, err);
    return g->near != NULL;
}

/* One candidate: its distance and the location that gave it. */
typedef struct geonear_ent {
    double dist;
    size_t pos;
    bson_t *doc;
    bson_value_t loc; /* borrowed from doc */
} geonear_ent_t;

typedef struct geonear_walk {
    const geo_pred_t *near;
    double best;
    bson_value_t loc;
} geonear_walk_t;

static bool geonear_hit(const path_hit_t *hit, void *ctx)
{
    geonear_walk_t *w = ctx;
    bson_value_t loc;
    double d = geo_pred_distance_at(w->near, hit->value, &loc);
    if (d >= 0 && (w->best < 0 || d < w->best)) {
        w->best = d;
        w->loc = loc;
    }
    return true;
}

static int geonear_cmp(const void *a, const void *b)
{
    const geonear_ent_t *x = a, *y = b;
    if (x->dist != y->dist)
        return x->dist < y->dist ? -1 : 1;
    return x->pos < y->pos ? -1 : x->pos > y->pos;
}

/* `doc` with distanceField (and includeLocs) set, as $addFields would. */
static bool geonear_annotate(const geonear_spec_t *g, const geonear_ent_t *e, const expr_ctx_t *ctx,
                             bson_t *out, dberr_t *err)
{
    bson_t spec = BSON_INITIALIZER, lit;
    BSON_APPEND_DOCUMENT_BEGIN(&spec, g->distance_field, &lit);
    BSON_APPEND_DOUBLE(&lit, "$literal", e->dist * g->multiplier);
    bson_append_document_end(&spec, &lit);
    if (g->include_locs) {
        BSON_APPEND_DOCUMENT_BEGIN(&spec, g->include_locs, &lit);
        BSON_APPEND_VALUE(&lit, "$literal", &e->loc);
        bson_append_document_end(&spec, &lit);
    }
    projection_t *p = projection_new_policy(&spec, PROJECTION_ADD_FIELDS, err);
    bson_destroy(&spec);
    if (!p)
        return false;
    bool ok = projection_apply_ctx(p, e->doc, -1, ctx, out, err);
    projection_destroy(p);
    return ok;
}

static bool geonear_run(const stage_t *s, const expr_ctx_t *ctx, doclist_t *in, doclist_t *out,
                        dberr_t *err)
{
    const geonear_spec_t *g = s->u.geonear;
    geonear_ent_t *ents = bson_malloc((in->len ? in->len : 1) * sizeof *ents);
    size_t n = 0;
    int64_t bytes = 0;
    bool ok = false;
    if (!g->key && in->len > 0) {
        dberr_set(err, DBERR_INTERNAL_ERROR, "$geoNear ran without its index key");
        goto cleanup;
    }
    for (size_t i = 0; i < in->len; i++) {
        if ((i & 1023) == 1023 && !fiber_check(err))
            goto cleanup;
        bson_t *doc = in->docs[i];
        if (g->query && !matcher_matches(g->query, doc, NULL))
            continue;
        geonear_walk_t w = {g->near, -1, {0}};
        path_walk(doc, g->key, true, geonear_hit, &w);
        if (w.best < 0 || !geo_pred_test(g->near, &w.loc))
            continue;
        bytes += (int64_t)doc->len + (int64_t)sizeof(bson_t);
        if (bytes > pipeline_limits.sort_bytes) {
            dberr_set(err, DBERR_QUERY_EXCEEDED_MEMORY_NO_DISK,
                      "$geoNear exceeded the memory limit of %lld bytes for sorting by distance",
                      (long long)pipeline_limits.sort_bytes);
            goto cleanup;
        }
        ents[n++] = (geonear_ent_t){w.best, i, doc, w.loc};
    }
    if (g->query && matcher_take_error(g->query, err))
        goto cleanup;
    if (n > 1) /* else nothing to sort, and ents may be NULL (qsort must not get it) */
        qsort(ents, n, sizeof *ents, geonear_cmp);
    for (size_t i = 0; i < n; i++) {
        bson_t *o = bson_new();
        if (!geonear_annotate(g, &ents[i], ctx, o, err)) {
            bson_destroy(o);
            goto cleanup;
        }
        doclist_push(out, o);
    }
    ok = true;
cleanup:
    bson_free(ents);
    return ok;
}

const stage_def_t pipeline_geonear_stages[] = {
    {"$geoNear", geonear_parse, geonear_run, NULL, geonear_free, STAGE_LEADS},
    {NULL},
};

const char *pipeline_geonear_key(const geonear_spec_t *g)
{
    return g->key;
}

geo_near_units_t pipeline_geonear_units(const geonear_spec_t *g)
{
    return geo_pred_near_units(g->near);
}

void pipeline_geonear_set_key(geonear_spec_t *g, const char *path)
{
    bson_free(g->key);
    g->key = bson_strdup(path);
}

/* Appends to the array `and` (at *n) the query's predicates on the key
 * and the clauses of its own $and, so the source filter names each once. */
static void geonear_and_clauses(const geonear_spec_t *g, bson_t *and, uint32_t *n)
{
    bson_iter_t it, sub;
    bson_iter_init(&it, g->query_doc);
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it), *ik;
        char buf[16];
        if (strcmp(k, "$and") == 0 && bson_iter_recurse(&it, &sub)) {
            while (bson_iter_next(&sub)) {
                bson_uint32_to_string((*n)++, &ik, buf, sizeof buf);
                bson_append_iter(and, ik, -1, &sub);
            }
        } else if (g->key && strcmp(k, g->key) == 0) {
            bson_t clause;
            bson_uint32_to_string((*n)++, &ik, buf, sizeof buf);
            BSON_APPEND_DOCUMENT_BEGIN(and, ik, &clause);
            bson_append_iter(&clause, NULL, 0, &it);
            bson_append_document_end(and, &clause);
        }
    }
}

void pipeline_geonear_source_filter(const geonear_spec_t *g, bson_t *out)
{
    bson_init(out);
    /* the query's predicates too (not a $text one: it needs its own
     * index), so the planner finds the compound 2dsphere indexes they
     * make relevant and bounds their leading fields, as mongod's; those
     * on the key itself are ANDed with the near predicate under $and
     * (with the query's own $and clauses), as mongod ANDs them, so no
     * field is named twice */
    bool query = g->query_doc && !matcher_text(g->query);
    bool and_needed = false;
    bson_iter_t it;
    if (query && bson_iter_init(&it, g->query_doc)) {
        while (bson_iter_next(&it)) {
            const char *k = bson_iter_key(&it);
            if (strcmp(k, "$and") == 0 || (g->key && strcmp(k, g->key) == 0))
                and_needed = true;
            else
                bson_append_iter(out, NULL, 0, &it);
        }
    }
    if (g->key)
        BSON_APPEND_DOCUMENT(out, g->key, g->near_ops);
    if (and_needed) {
        bson_t and;
        uint32_t n = 0;
        BSON_APPEND_ARRAY_BEGIN(out, "$and", &and);
        geonear_and_clauses(g, &and, &n);
        bson_append_array_end(out, &and);
    }
}
