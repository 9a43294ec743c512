/* geopred: the $geoWithin / $geoIntersects query predicates (mongod's
 * GeoExpression and GeoMatchExpression): the query region is parsed once,
 * each stored value is parsed as mongod's parseFromStorage and tested. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "geo/geo-private.h"
#include "util/bsonview.h"
#include "util/shellfmt.h"

bool geo_pred_is_operator(const char *op)
{
    return strcmp(op, "$geoWithin") == 0 || strcmp(op, "$within") == 0 ||
           strcmp(op, "$geoIntersects") == 0;
}

/* Frees the region of `p`, leaving it with none. */
static void geo_pred_clear_region(geo_pred_t *p)
{
    geo_shape_destroy(p->shape);
    p->shape = NULL;
    geo_shape_destroy(p->area);
    p->area = NULL;
    bson_free(p->poly);
    p->poly = NULL;
    p->npoly = 0;
}

void geo_pred_destroy(geo_pred_t *p)
{
    if (!p)
        return;
    geo_pred_clear_region(p);
    bson_free(p);
}

static bool bad_element(dberr_t *err, const char *prefix, const bson_iter_t *it)
{
    bson_string_t *s = bson_string_new(prefix);
    shellfmt_append_element(s, bson_iter_key(it), bson_iter_value((bson_iter_t *)it));
    dberr_set(err, DBERR_BAD_VALUE, "%s", s->str);
    bson_string_free(s, true);
    return false;
}

/* The circle of $center / $centerSphere: [[x, y], radius]. */
static bool parse_circle(geo_pred_t *p, const bson_iter_t *spec, dberr_t *err)
{
    bson_iter_t c;
    if (!bson_iter_recurse(spec, &c) || !bson_iter_next(&c))
        return dberr_set(err, DBERR_BAD_VALUE,
                         "Point must be an array or object, instead got type missing");
    if (!geo_flat_point(&c, false, &p->cx, &p->cy, err))
        return false;
    if (p->kind == REGION_CENTER_SPHERE && !geo_valid_lnglat(p->cx, p->cy))
        return dberr_set(err, DBERR_BAD_VALUE,
                         "Longitude/latitude is out of bounds, lng: %g lat: %g", p->cx, p->cy);
    bool more = bson_iter_next(&c);
    if (!more || !geo_number(&c, &p->r) || !(p->r >= 0)) {
        char *s = more ? shellfmt_value(bson_iter_value(&c)) : bson_strdup("EOO");
        dberr_set(err, DBERR_BAD_VALUE, "Radius must be a non-negative number: %s", s);
        bson_free(s);
        return false;
    }
    if (bson_iter_next(&c))
        return dberr_set(err, DBERR_BAD_VALUE,
                         "Only 2 fields allowed for circular region, but more were provided");
    return true;
}

static bool parse_box(geo_pred_t *p, const bson_iter_t *spec, dberr_t *err)
{
    bson_iter_t c;
    double a[4];
    if (!bson_iter_recurse(spec, &c))
        return dberr_set(err, DBERR_BAD_VALUE, "invalid $box");
    for (int i = 0; i < 2; i++) {
        bool more = bson_iter_next(&c);
        if (!geo_flat_point(more ? &c : NULL, false, &a[2 * i], &a[2 * i + 1], err))
            return false;
    }
    p->box[0] = fmin(a[0], a[2]);
    p->box[1] = fmin(a[1], a[3]);
    p->box[2] = fmax(a[0], a[2]);
    p->box[3] = fmax(a[1], a[3]);
    return true;
}

static bool parse_flat_polygon(geo_pred_t *p, const bson_iter_t *spec, dberr_t *err)
{
    bson_iter_t c;
    if (!bson_iter_recurse(spec, &c))
        return dberr_set(err, DBERR_BAD_VALUE, "invalid $polygon");
    while (bson_iter_next(&c)) {
        double x, y;
        if (!geo_flat_point(&c, false, &x, &y, err))
            return false;
        p->poly = bson_realloc(p->poly, (p->npoly + 1) * 2 * sizeof *p->poly);
        p->poly[2 * p->npoly] = x;
        p->poly[2 * p->npoly + 1] = y;
        p->npoly++;
    }
    if (p->npoly < 3)
        return dberr_set(err, DBERR_BAD_VALUE,
                         "Polygon must have at least 3 points, instead got %zu vertices", p->npoly);
    return true;
}

/* $geometry: GeoJSON, or a legacy point ([x, y] or {x: .., y: ..}). */
static bool parse_geometry(geo_pred_t *p, const bson_iter_t *spec, dberr_t *err)
{
    bson_iter_t first;
    double d;
    bool legacy = BSON_ITER_HOLDS_ARRAY(spec) || (bson_iter_recurse(spec, &first) &&
                                                  bson_iter_next(&first) && geo_number(&first, &d));
    if (legacy) {
        double x, y;
        if (!geo_flat_point(spec, false, &x, &y, err))
            return false;
        p->shape = geo_flat_point_new(x, y);
        return true;
    }
    bson_t obj;
    if (!bsonview_iter(spec, &obj))
        return dberr_set(err, DBERR_BAD_VALUE, "invalid $geometry");
    p->shape = geo_shape_from_geojson(&obj, true, err);
    if (p->shape && p->shape->type == GEO_COLLECTION)
        p->area = geo_collection_areas(&obj);
    return p->shape != NULL;
}

/* The geo specifiers of $geoWithin / $geoIntersects by the region each
 * gives: its name and its parser. */
static const struct {
    const char *name;
    bool (*parse)(geo_pred_t *p, const bson_iter_t *spec, dberr_t *err);
} geo_specifiers[] = {
    [REGION_SHAPE] = {"$geometry", parse_geometry},
    [REGION_CENTER_SPHERE] = {"$centerSphere", parse_circle},
    [REGION_BOX] = {"$box", parse_box},
    [REGION_CENTER] = {"$center", parse_circle},
    [REGION_POLYGON] = {"$polygon", parse_flat_polygon},
};

/* One geo specifier ($geometry, $box, ...) of the operator's object; a
 * later one replaces an earlier one's region. */
static bool parse_specifier(geo_pred_t *p, const bson_iter_t *spec, dberr_t *err)
{
    const char *k = bson_iter_key(spec);
    bool is_obj = BSON_ITER_HOLDS_DOCUMENT(spec) || BSON_ITER_HOLDS_ARRAY(spec);
    for (size_t i = 0; is_obj && i < sizeof geo_specifiers / sizeof geo_specifiers[0]; i++) {
        if (strcmp(k, geo_specifiers[i].name) == 0) {
            geo_pred_clear_region(p);
            p->kind = (region_kind_t)i;
            return geo_specifiers[i].parse(p, spec, err);
        }
    }
    return bad_element(err, "unknown geo specifier: ", spec);
}

geo_pred_t *geo_pred_new(const char *op, const bson_value_t *arg, dberr_t *err)
{
    geo_pred_t *p = bson_malloc0(sizeof *p);
    p->within = strcmp(op, "$geoIntersects") != 0;
    bson_t wrap = BSON_INITIALIZER;
    bson_iter_t whole, it;
    bool found = false;
    BSON_APPEND_VALUE(&wrap, op, arg);
    bson_iter_init_find(&whole, &wrap, op);
    if (arg->value_type != BSON_TYPE_DOCUMENT) {
        bad_element(err, "geo query should be an object: ", &whole);
        goto fail;
    }
    if (!geo_value_iter(arg, &it)) {
        dberr_set(err, DBERR_BAD_VALUE, "invalid %s", op);
        goto fail;
    }
    while (bson_iter_next(&it)) {
        if (strcmp(bson_iter_key(&it), "$uniqueDocs") == 0)
            continue; /* deprecated and a no-op in mongod as well */
        if (!parse_specifier(p, &it, err))
            goto fail;
        found = true;
    }
    if (!found) {
        dberr_set(err, DBERR_BAD_VALUE, "geo query doesn't have any geometry");
        goto fail;
    }
    bool flat = p->kind == REGION_BOX || p->kind == REGION_CENTER || p->kind == REGION_POLYGON;
    /* as mongod's supportsContains: a collection with a polygon member too */
    bool shape_area = p->kind == REGION_SHAPE && (p->shape->type == GEO_POLYGON ||
                                                  p->shape->type == GEO_MULTIPOLYGON || p->area);
    bool sphere = p->kind == REGION_CENTER_SPHERE || (p->kind == REGION_SHAPE && p->shape->s2);
    if (p->within && !(flat || p->kind == REGION_CENTER_SPHERE || shape_area)) {
        char *s = shellfmt_value(arg);
        dberr_set(err, DBERR_BAD_VALUE, "$within not supported with provided geometry: %s", s);
        bson_free(s);
        goto fail;
    }
    if (!p->within && !sphere) {
        char *s = shellfmt_value(arg);
        dberr_set(err, DBERR_BAD_VALUE, "$geoIntersect not supported with provided geometry: %s",
                  s);
        bson_free(s);
        goto fail;
    }
    bson_destroy(&wrap);
    return p;
fail:
    bson_destroy(&wrap);
    geo_pred_destroy(p);
    return NULL;
}

/* Point in a flat polygon by crossings; points on an edge are outside, as
 * mongod's Polygon::contains leaves them. */
static bool flat_polygon_contains(const double *v, size_t n, double x, double y)
{
    bool in = false;
    for (size_t i = 0, j = n - 1; i < n; j = i++) {
        double xi = v[2 * i], yi = v[2 * i + 1], xj = v[2 * j], yj = v[2 * j + 1];
        double cross = (xj - xi) * (y - yi) - (yj - yi) * (x - xi);
        if (cross == 0 && x >= fmin(xi, xj) && x <= fmax(xi, xj) && y >= fmin(yi, yj) &&
            y <= fmax(yi, yj))
            return false;
        if ((yi > y) != (yj > y) && x < (xj - xi) * (y - yi) / (yj - yi) + xi)
            in = !in;
    }
    return in;
}

static bool test_shape(const geo_pred_t *p, const geo_shape_t *s)
{
    switch (p->kind) {
    case REGION_BOX:
        return s->type == GEO_POINT && s->x >= p->box[0] && s->x <= p->box[2] &&
               s->y >= p->box[1] && s->y <= p->box[3];
    case REGION_CENTER:
        return s->type == GEO_POINT && hypot(s->x - p->cx, s->y - p->cy) <= p->r;
    case REGION_POLYGON:
        return s->type == GEO_POINT && flat_polygon_contains(p->poly, p->npoly, s->x, s->y);
    case REGION_CENTER_SPHERE:
        if (!s->s2)
            return false;
        if (p->within)
            return s2shim_cap_contains(p->cx, p->cy, p->r, s->s2);
        return s2shim_geom_distance(s->s2, p->cx, p->cy) <= p->r;
    case REGION_SHAPE:
        if (!s->s2 || !p->shape->s2)
            return false;
        return p->within ? s2shim_geom_contains(p->area ? p->area->s2 : p->shape->s2, s->s2)
                         : s2shim_geom_intersects(p->shape->s2, s->s2);
    }
    return false;
}

/* A stored legacy pair ([x, y, ...] or {a: x, b: y, ...}) read without
 * building its sphere side: what geo_shape_from_stored reads as a flat
 * point. False for anything else (GeoJSON included). */
static bool stored_flat_point(const bson_value_t *v, double *x, double *y)
{
    bson_iter_t it;
    if (!geo_value_iter(v, &it) || !bson_iter_next(&it) || !geo_number(&it, x) ||
        !bson_iter_next(&it) || !geo_number(&it, y))
        return false;
    return isfinite(*x) && isfinite(*y);
}

bool geo_pred_test(const geo_pred_t *p, const bson_value_t *v)
{
    if (p->near) {
        double d = geo_pred_distance(p, v);
        return d >= 0 && d >= p->min_dist && d <= p->max_dist;
    }
    if (v->value_type != BSON_TYPE_ARRAY && v->value_type != BSON_TYPE_DOCUMENT)
        return false;
    geo_shape_t flat = {.type = GEO_POINT, .crs = GEO_CRS_FLAT};
    if ((p->kind == REGION_BOX || p->kind == REGION_CENTER || p->kind == REGION_POLYGON) &&
        stored_flat_point(v, &flat.x, &flat.y))
        return test_shape(p, &flat); /* the plane needs no sphere side */
    dberr_t err;
    geo_shape_t *s = geo_shape_from_stored(v, &err);
    if (!s)
        return false;
    bool ok = s->crs != GEO_CRS_STRICT && test_shape(p, s);
    geo_shape_destroy(s);
    return ok;
}

/* -- $near / $nearSphere -- */

static bool near_distance_arg(const bson_iter_t *it, const char *name, double *out, int code_type,
                              dberr_t *err)
{
    if (!geo_number(it, out))
        return dberr_set(err, code_type, "%s must be a number", name);
    if (!(*out >= 0))
        return dberr_set(err, code_type + 1, "%s must be non-negative", name);
    return true;
}

/* {$geometry: Point, $minDistance, $maxDistance}: mongod's parseNewQuery. */
static bool near_parse_new(geo_pred_t *p, const bson_iter_t *near, const bson_t *ops, dberr_t *err)
{
    bson_iter_t it, e;
    bool have_point = false;
    bson_iter_init(&it, ops);
    bson_iter_next(&it);
    if (bson_iter_next(&it))
        return bad_element(err,
                           "geo near accepts just one argument when querying for a GeoJSON "
                           "point. Extra field found: ",
                           &it);
    if (!BSON_ITER_HOLDS_DOCUMENT(near))
        return dberr_set(err, DBERR_BAD_VALUE, "%s must be an object", bson_iter_key(near));
    bson_iter_recurse(near, &e);
    while (bson_iter_next(&e)) {
        const char *k = bson_iter_key(&e);
        if (strcmp(k, "$geometry") == 0 && BSON_ITER_HOLDS_DOCUMENT(&e)) {
            bson_t obj;
            if (!bsonview_iter(&e, &obj))
                return dberr_set(err, DBERR_BAD_VALUE, "invalid $geometry");
            dberr_t why;
            geo_shape_t *s = geo_shape_from_geojson(&obj, false, &why);
            if (!s || s->type != GEO_POINT) {
                char *shown = shellfmt_doc(&obj);
                if (s)
                    dberr_set(err, 16681, "$near requires geojson point, given %s", shown);
                else
                    dberr_set(err, DBERR_BAD_VALUE,
                              "invalid point in geo near query $geometry argument: %s  %s", shown,
                              why.msg);
                bson_free(shown);
                geo_shape_destroy(s);
                return false;
            }
            p->cx = s->x;
            p->cy = s->y;
            geo_shape_destroy(s);
            have_point = true;
        } else if (strcmp(k, "$minDistance") == 0) {
            if (!near_distance_arg(&e, "$minDistance", &p->min_dist, 16897, err))
                return false;
        } else if (strcmp(k, "$maxDistance") == 0) {
            if (!near_distance_arg(&e, "$maxDistance", &p->max_dist, 16899, err))
                return false;
        }
    }
    if (!have_point) {
        char *shown = shellfmt_doc(ops);
        dberr_set(err, DBERR_BAD_VALUE, "$near requires a point, given %s", shown);
        bson_free(shown);
        return false;
    }
    return true;
}

geo_pred_t *geo_pred_new_near(const char *op, const bson_t *ops, dberr_t *err)
{
    geo_pred_t *p = bson_malloc0(sizeof *p);
    bson_iter_t it, near;
    p->near = true;
    p->kind = REGION_CENTER_SPHERE;
    p->max_dist = INFINITY;
    if (!bson_iter_init_find(&near, ops, op)) {
        dberr_set(err, DBERR_BAD_VALUE, "invalid %s", op);
        goto fail;
    }
    bson_iter_t first;
    double d;
    bool legacy = BSON_ITER_HOLDS_ARRAY(&near) ||
                  (BSON_ITER_HOLDS_DOCUMENT(&near) && bson_iter_recurse(&near, &first) &&
                   bson_iter_next(&first) && geo_number(&first, &d));
    if (!legacy) {
        if (!near_parse_new(p, &near, ops, err))
            goto fail;
        return p;
    }
    /* legacy: {$nearSphere: [x, y], $maxDistance: r, $minDistance: r} on the
     * sphere (radians), {$near: [x, y], ...} on the plane (a 2d index's) */
    double three[3];
    int nnum = 0;
    bson_iter_t e3;
    if (bson_iter_recurse(&near, &e3)) { /* [x, y, maxDistance]: parsePointWithMaxDistance */
        while (bson_iter_next(&e3) && nnum < 4 && (nnum == 3 || geo_number(&e3, &three[nnum])))
            nnum++;
    }
    if (nnum == 3) {
        p->cx = three[0];
        p->cy = three[1];
        p->max_dist = three[2];
        if (!(three[2] >= 0)) {
            dberr_set(err, 18522, "max distance must be non-negative");
            goto fail;
        }
    } else if (!geo_flat_point(&near, false, &p->cx, &p->cy, err)) {
        goto fail;
    }
    if (strcmp(op, "$near") == 0) {
        p->flat = true;
        p->kind = REGION_CENTER;
    } else if (!geo_valid_lnglat(p->cx, p->cy)) {
        dberr_set(err, 17444, "Legacy point is out of bounds for spherical query");
        goto fail;
    } else {
        p->radians = true;
    }
    bson_iter_init(&it, ops);
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        /* mongod's parseLegacyQuery codes */
        if (strcmp(k, "$minDistance") == 0) {
            if (!near_distance_arg(&it, "$minDistance", &p->min_dist, 16893, err))
                goto fail;
        } else if (strcmp(k, "$maxDistance") == 0) {
            if (!near_distance_arg(&it, "$maxDistance", &p->max_dist, 16895, err))
                goto fail;
        }
    }
    return p;
fail:
    geo_pred_destroy(p);
    return NULL;
}

/* The distance to `v` as one geometry; -1 when it is none. */
static double distance_one(const geo_pred_t *p, const bson_value_t *v)
{
    if (v->value_type != BSON_TYPE_ARRAY && v->value_type != BSON_TYPE_DOCUMENT)
        return -1;
    double x, y;
    if (p->flat) /* a 2d index holds legacy pairs only: so does the plane */
        return stored_flat_point(v, &x, &y) ? hypot(x - p->cx, y - p->cy) : -1;
    dberr_t err;
    geo_shape_t *s = geo_shape_from_stored(v, &err);
    double d = -1;
    if (s && s->s2 && s->crs != GEO_CRS_STRICT) {
        d = s2shim_geom_distance(s->s2, p->cx, p->cy);
        if (!p->radians)
            d *= GEO_EARTH_RADIUS_M;
    }
    geo_shape_destroy(s);
    return d;
}

double geo_pred_distance(const geo_pred_t *p, const bson_value_t *v)
{
    return geo_pred_distance_at(p, v, NULL);
}

double geo_pred_distance_at(const geo_pred_t *p, const bson_value_t *v, bson_value_t *loc)
{
    double d = distance_one(p, v);
    if (loc)
        *loc = *v;
    if (d >= 0 || !(p->flat || p->radians))
        return d;
    /* a legacy $near measures to each location of a 2d index's
     * multi-location value ({home: [x, y], work: [x, y]}), as mongod's
     * GeoNear2DStage does with get2DKeys's locations */
    bson_iter_t it;
    if (!geo_value_iter(v, &it))
        return -1;
    bson_iter_t all = it;
    while (bson_iter_next(&all)) { /* get2DKeys's grammar: locations only */
        if (!BSON_ITER_HOLDS_ARRAY(&all) && !BSON_ITER_HOLDS_DOCUMENT(&all))
            return -1;
    }
    while (bson_iter_next(&it)) {
        double one = distance_one(p, bson_iter_value(&it));
        if (one >= 0 && (d < 0 || one < d)) {
            d = one;
            if (loc) /* borrowed from v, as the iterator's value is */
                *loc = *bson_iter_value(&it);
        }
    }
    return d;
}

bool geo_pred_is_near(const geo_pred_t *p)
{
    return p->near;
}

geo_near_units_t geo_pred_near_units(const geo_pred_t *p)
{
    return p->flat ? GEO_NEAR_FLAT : p->radians ? GEO_NEAR_RADIANS : GEO_NEAR_METRES;
}

double geo_pred_near_whole(const geo_pred_t *p)
{
    if (p->flat)
        return INFINITY; /* the plane's extent is the 2d index's (geo_pred_2d_whole) */
    return p->radians ? M_PI : M_PI * GEO_EARTH_RADIUS_M;
}

bool geo_pred_index_ranges(const geo_pred_t *p, double radius, int64_t **ranges, size_t *n)
{
    int coarsest, finest;
    geo_index_levels(&coarsest, &finest);
    uint64_t *cells = NULL;
    size_t count;
    if (p->near && p->flat) {
        return false; /* the plane is a 2d index's (geo_pred_2d_ranges) */
    } else if (p->near) {
        double r = radius >= 0 ? radius : p->max_dist;
        if (!isfinite(r))
            return false;
        if (!p->radians)
            r /= GEO_EARTH_RADIUS_M;
        count = s2shim_cap_ranges(p->cx, p->cy, r, coarsest, finest, GEO_QUERY_MAX_CELLS, &cells);
    } else if (p->kind == REGION_CENTER_SPHERE) {
        count = s2shim_cap_ranges(p->cx, p->cy, p->r, coarsest, finest, GEO_QUERY_MAX_CELLS,
                                  &cells);
    } else if (p->kind == REGION_SHAPE && p->shape->s2 && p->shape->crs != GEO_CRS_FLAT) {
        const geo_shape_t *region = p->within && p->area ? p->area : p->shape;
        count = s2shim_geom_ranges(region->s2, coarsest, finest, GEO_QUERY_MAX_CELLS, &cells);
    } else {
        return false;
    }
    *ranges = bson_malloc((2 * count + 2) * sizeof **ranges);
    for (size_t i = 0; i < 2 * count; i++)
        (*ranges)[i] = GEO_CELL_KEY(cells[i]);
    *n = count;
    free(cells);
    return true;
}
