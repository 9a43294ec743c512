/* geojson: GeoJSON objects and legacy coordinate pairs parsed and validated
 * with mongod's GeoParser rules and messages; the sphere side (loops,
 * polygons, lines) is built through s2shim. */
#include <math.h>
#include <string.h>

#include "geo/geo-private.h"
#include "util/bsonview.h"
#include "util/shellfmt.h"

/* One growing array of (lng, lat) pairs. */
typedef struct coords {
    double *v;
    size_t n, cap; /* pairs */
} coords_t;

static void coords_push(coords_t *c, double x, double y)
{
    if (c->n == c->cap) {
        c->cap = c->cap ? c->cap * 2 : 8;
        c->v = bson_realloc(c->v, c->cap * 2 * sizeof *c->v);
    }
    c->v[2 * c->n] = x;
    c->v[2 * c->n + 1] = y;
    c->n++;
}

static const char *type_name_at(const bson_iter_t *it)
{
    return shellfmt_type_name(it ? bson_iter_type(it) : BSON_TYPE_EOD);
}

bool geo_value_iter(const bson_value_t *v, bson_iter_t *it)
{
    return (v->value_type == BSON_TYPE_ARRAY || v->value_type == BSON_TYPE_DOCUMENT) &&
           bson_iter_init_from_data(it, v->value.v_doc.data, v->value.v_doc.data_len);
}

geo_shape_t *geo_flat_point_new(double x, double y)
{
    geo_shape_t *s = bson_malloc0(sizeof *s);
    s->type = GEO_POINT;
    s->crs = GEO_CRS_FLAT;
    s->x = x;
    s->y = y;
    if (geo_valid_lnglat(x, y)) {
        s->s2 = s2shim_geom_new();
        s2shim_geom_add_point(s->s2, x, y);
    }
    return s;
}

bool geo_number(const bson_iter_t *it, double *d)
{
    switch (bson_iter_type(it)) {
    case BSON_TYPE_INT32:
    case BSON_TYPE_INT64:
    case BSON_TYPE_DOUBLE:
        *d = bson_iter_as_double(it);
        return true;
    case BSON_TYPE_DECIMAL128: {
        bson_decimal128_t dec;
        char buf[BSON_DECIMAL128_STRING];
        bson_iter_decimal128(it, &dec);
        bson_decimal128_to_string(&dec, buf);
        *d = strtod(buf, NULL);
        return true;
    }
    default:
        return false;
    }
}

bool geo_valid_lnglat(double lng, double lat)
{
    return lat >= -90 && lat <= 90 && lng >= -180 && lng <= 180;
}

bool geo_flat_point(const bson_iter_t *it, bool allow_extra, double *x, double *y, dberr_t *err)
{
    bson_type_t t = it ? bson_iter_type(it) : BSON_TYPE_EOD;
    bson_iter_t c;
    if ((t != BSON_TYPE_ARRAY && t != BSON_TYPE_DOCUMENT) || !bson_iter_recurse(it, &c))
        return dberr_set(err, DBERR_BAD_VALUE,
                         "Point must be an array or object, instead got type %s", type_name_at(it));
    double *out[2] = {x, y};
    for (int i = 0; i < 2; i++) {
        bool more = bson_iter_next(&c);
        if (!more || !geo_number(&c, out[i]))
            return dberr_set(err, DBERR_BAD_VALUE,
                             "Point must only contain numeric elements, instead got type %s",
                             more ? type_name_at(&c) : "missing");
    }
    if (!allow_extra && bson_iter_next(&c))
        return dberr_set(err, DBERR_BAD_VALUE, "Point must only contain two numeric elements");
    if (!isfinite(*x) || !isfinite(*y))
        return dberr_set(err, DBERR_BAD_VALUE, "Point coordinates must be finite numbers");
    return true;
}

/* One GeoJSON position ([lng, lat, ...]) appended to `out`. */
static bool parse_position(const bson_iter_t *it, coords_t *out, dberr_t *err)
{
    if (bson_iter_type(it) != BSON_TYPE_ARRAY)
        return dberr_set(err, DBERR_BAD_VALUE,
                         "GeoJSON coordinates must be an array, instead got type %s",
                         type_name_at(it));
    double x, y;
    if (!geo_flat_point(it, true, &x, &y, err))
        return false;
    if (!geo_valid_lnglat(x, y))
        return dberr_set(err, DBERR_BAD_VALUE,
                         "Longitude/latitude is out of bounds, lng: %g lat: %g", x, y);
    coords_push(out, x, y);
    return true;
}

/* An array of positions ("coordinates" of a LineString or one loop). */
static bool parse_positions(const bson_iter_t *it, coords_t *out, dberr_t *err)
{
    bson_iter_t c;
    if (!it || bson_iter_type(it) != BSON_TYPE_ARRAY || !bson_iter_recurse(it, &c))
        return dberr_set(err, DBERR_BAD_VALUE,
                         "GeoJSON coordinates must be an array of coordinates, instead got type %s",
                         type_name_at(it));
    while (bson_iter_next(&c)) {
        if (!parse_position(&c, out, err))
            return false;
    }
    return true;
}

/* What an S2 refusal's message shows besides mongod's words. */
typedef enum {
    S2_PART_NONE,  /* nothing */
    S2_PART_WHOLE, /* the whole geometry */
    S2_PART_LOOP,  /* the offending loop */
    S2_PART_FIRST, /* the polygon's first loop */
    S2_PART_TEXT,  /* S2's own explanation */
    S2_PART_COUNT, /* the vertex or loop count S2 gave */
    S2_NPARTS
} s2_part_t;

/* mongod's message for each S2 refusal: a format whose only conversions
 * are up to two %s, filled with parts a and b. */
static const struct {
    const char *fmt;
    s2_part_t a, b;
} s2_messages[] = {
    [S2SHIM_LINE_TOO_FEW] = {"GeoJSON LineString must have at least 2 vertices, instead got %s "
                             "vertices: %s",
                             S2_PART_COUNT, S2_PART_WHOLE},
    [S2SHIM_LINE_INVALID] = {"GeoJSON LineString is not valid: %s %s", S2_PART_TEXT, S2_PART_WHOLE},
    [S2SHIM_LOOP_EMPTY] = {"Loop has no vertices: %s", S2_PART_LOOP, S2_PART_NONE},
    [S2SHIM_LOOP_NOT_CLOSED] = {"Loop is not closed, first vertex does not equal last vertex: %s",
                                S2_PART_LOOP, S2_PART_NONE},
    [S2SHIM_LOOP_TOO_FEW] = {"Loop must have at least 3 different vertices, %s unique vertices "
                             "were provided: %s",
                             S2_PART_COUNT, S2_PART_LOOP},
    [S2SHIM_LOOP_INVALID] = {"Loop is not valid: %s %s", S2_PART_LOOP, S2_PART_TEXT},
    [S2SHIM_LOOP_NOT_HOLE] = {"Secondary loops not contained by first exterior loop - secondary "
                              "loops must be holes: %s first loop: %s",
                              S2_PART_LOOP, S2_PART_FIRST},
    [S2SHIM_POLYGON_INVALID] = {"Polygon isn't valid: %s %s", S2_PART_TEXT, S2_PART_WHOLE},
    [S2SHIM_NOT_NORMALIZED] = {"Loop shares more than one vertex with its parent loop: %s",
                               S2_PART_WHOLE, S2_PART_NONE},
    [S2SHIM_MULTI_EXTERIOR] = {"Only one exterior polygon loop is allowed: %s", S2_PART_WHOLE,
                               S2_PART_NONE},
    [S2SHIM_NESTED] = {"Polygon interior loops cannot be nested: %s", S2_PART_WHOLE, S2_PART_NONE},
    [S2SHIM_BIG_LOOPS] = {"Only one simple loop is allowed in a big polygon, instead provided %s "
                          "loops: %s",
                          S2_PART_COUNT, S2_PART_WHOLE},
};

/* The value at `it` in the shell's notation; "" without one. */
static char *shown_at(const bson_iter_t *it)
{
    return it ? shellfmt_value(bson_iter_value((bson_iter_t *)it)) : bson_strdup("");
}

static bool s2_refused(const s2shim_error_t *e, const bson_iter_t *whole, const bson_iter_t *loop,
                       dberr_t *err)
{
    size_t st = (size_t)e->status;
    if (st >= sizeof s2_messages / sizeof s2_messages[0] || !s2_messages[st].fmt)
        return dberr_set(err, DBERR_INTERNAL_ERROR, "geometry refused by S2");
    bson_iter_t first;
    bool has_first = bson_iter_recurse(whole, &first) && bson_iter_next(&first);
    char *parts[S2_NPARTS] = {
        [S2_PART_NONE] = bson_strdup(""),
        [S2_PART_WHOLE] = shown_at(whole),
        [S2_PART_LOOP] = shown_at(loop),
        [S2_PART_FIRST] = shown_at(has_first ? &first : NULL),
        [S2_PART_TEXT] = bson_strdup(e->text),
        [S2_PART_COUNT] = bson_strdup_printf("%zu", e->detail),
    };
    dberr_set(err, DBERR_BAD_VALUE, s2_messages[st].fmt, parts[s2_messages[st].a],
              parts[s2_messages[st].b]);
    for (int i = 0; i < S2_NPARTS; i++)
        bson_free(parts[i]);
    return false;
}

/* A LineString's coordinates added to `g`. */
static bool parse_line(const bson_iter_t *it, s2shim_geom_t *g, dberr_t *err)
{
    coords_t c = {0};
    s2shim_error_t e;
    bool ok = parse_positions(it, &c, err);
    if (ok && !s2shim_geom_add_line(g, c.v, c.n, &e))
        ok = s2_refused(&e, it, NULL, err);
    bson_free(c.v);
    return ok;
}

/* A Polygon's coordinates (an array of loops) added to `g`. */
static bool parse_polygon(const bson_iter_t *it, bool strict, s2shim_geom_t *g, dberr_t *err)
{
    bson_iter_t loops;
    coords_t *rings = NULL;
    size_t n = 0;
    bool ok = false;
    if (!it || bson_iter_type(it) != BSON_TYPE_ARRAY || !bson_iter_recurse(it, &loops)) {
        dberr_set(err, DBERR_BAD_VALUE, "Polygon coordinates must be an array, instead got type %s",
                  type_name_at(it));
        goto cleanup;
    }
    while (bson_iter_next(&loops)) {
        rings = bson_realloc(rings, (n + 1) * sizeof *rings);
        memset(&rings[n], 0, sizeof rings[n]);
        n++;
        if (!parse_positions(&loops, &rings[n - 1], err))
            goto cleanup;
    }
    if (n == 0) {
        dberr_set(err, DBERR_BAD_VALUE, "Polygon has no loops.");
        goto cleanup;
    }
    const double **v = bson_malloc(n * sizeof *v);
    size_t *counts = bson_malloc(n * sizeof *counts);
    for (size_t i = 0; i < n; i++) {
        v[i] = rings[i].v;
        counts[i] = rings[i].n;
    }
    s2shim_error_t e;
    ok = s2shim_geom_add_polygon(g, v, counts, n, strict, &e);
    bson_free(v);
    bson_free(counts);
    if (!ok) {
        bson_iter_t bad;
        bool found = bson_iter_recurse(it, &bad);
        for (size_t i = 0; found && i <= e.loop; i++)
            found = bson_iter_next(&bad);
        s2_refused(&e, it, found ? &bad : NULL, err);
    }
cleanup:
    for (size_t i = 0; i < n; i++)
        bson_free(rings[i].v);
    bson_free(rings);
    return ok;
}

/* "crs": absent, EPSG:4326 / CRS84, or (for polygons) the strict winding. */
static bool parse_crs(const bson_t *obj, bool allow_strict, geo_crs_t *crs, dberr_t *err)
{
    bson_iter_t it, c;
    *crs = GEO_CRS_SPHERE;
    if (!bson_iter_init_find(&it, obj, "crs"))
        return true;
    if (!BSON_ITER_HOLDS_DOCUMENT(&it) && !BSON_ITER_HOLDS_ARRAY(&it))
        return dberr_set(err, DBERR_BAD_VALUE, "GeoJSON CRS must be an object, instead got type %s",
                         type_name_at(&it));
    if (!bson_iter_recurse(&it, &c) || !bson_iter_find(&c, "type") || !BSON_ITER_HOLDS_UTF8(&c) ||
        strcmp(bson_iter_utf8(&c, NULL), "name") != 0)
        return dberr_set(err, DBERR_BAD_VALUE, "GeoJSON CRS must have field \"type\": \"name\"");
    bson_iter_t p, name;
    if (!bson_iter_recurse(&it, &p) || !bson_iter_find(&p, "properties") ||
        (!BSON_ITER_HOLDS_DOCUMENT(&p) && !BSON_ITER_HOLDS_ARRAY(&p)))
        return dberr_set(
            err, DBERR_BAD_VALUE,
            "CRS must have field \"properties\" which is an object, instead got type %s",
            bson_iter_recurse(&it, &p) && bson_iter_find(&p, "properties") ? type_name_at(&p)
                                                                           : "missing");
    if (!bson_iter_recurse(&p, &name) || !bson_iter_find(&name, "name") ||
        !BSON_ITER_HOLDS_UTF8(&name))
        return dberr_set(err, DBERR_BAD_VALUE,
                         "In CRS, \"properties.name\" must be a string, instead got type %s",
                         bson_iter_recurse(&p, &name) && bson_iter_find(&name, "name")
                             ? type_name_at(&name)
                             : "missing");
    const char *s = bson_iter_utf8(&name, NULL);
    if (strcmp(s, "urn:ogc:def:crs:OGC:1.3:CRS84") == 0 || strcmp(s, "EPSG:4326") == 0)
        return true;
    if (strcmp(s, "urn:x-mongodb:crs:strictwinding:EPSG:4326") == 0) {
        if (!allow_strict)
            return dberr_set(err, DBERR_BAD_VALUE,
                             "Strict winding order CRS is only supported by polygon");
        *crs = GEO_CRS_STRICT;
        return true;
    }
    return dberr_set(err, DBERR_BAD_VALUE, "Unknown CRS name: %s", s);
}

static const char *const type_names[] = {
    [GEO_POINT] = "Point",
    [GEO_LINESTRING] = "LineString",
    [GEO_POLYGON] = "Polygon",
    [GEO_MULTIPOINT] = "MultiPoint",
    [GEO_MULTILINESTRING] = "MultiLineString",
    [GEO_MULTIPOLYGON] = "MultiPolygon",
    [GEO_COLLECTION] = "GeometryCollection",
};

/* The "type" of a GeoJSON object, or -1 (mongod's GEOJSON_UNKNOWN). */
static int parse_type(const bson_t *obj)
{
    bson_iter_t it;
    if (!bson_iter_init_find(&it, obj, "type") || !BSON_ITER_HOLDS_UTF8(&it))
        return -1;
    const char *s = bson_iter_utf8(&it, NULL);
    for (int i = 0; i <= GEO_COLLECTION; i++) {
        if (strcmp(s, type_names[i]) == 0)
            return i;
    }
    return -1;
}

static bool unknown_type(const bson_t *obj, const char *prefix, dberr_t *err)
{
    char *s = shellfmt_doc(obj);
    dberr_set(err, DBERR_BAD_VALUE, "%s%s", prefix, s);
    bson_free(s);
    return false;
}

/* Adds the GeoJSON object `obj` of kind `type` to `shape` (its s2 set).
 * `nested`: inside a GeometryCollection. */
static bool add_geojson(geo_shape_t *shape, const bson_t *obj, int type, bool allow_strict,
                        dberr_t *err)
{
    geo_crs_t crs;
    bson_iter_t coords, c;
    bool has_coords = bson_iter_init_find(&coords, obj, "coordinates");
    s2shim_geom_t *g = shape->s2;
    if (!parse_crs(obj, allow_strict && type == GEO_POLYGON, &crs, err))
        return false;
    if (crs == GEO_CRS_STRICT)
        shape->crs = GEO_CRS_STRICT;
    switch (type) {
    case GEO_POINT: {
        double x, y;
        if (!geo_flat_point(has_coords ? &coords : NULL, true, &x, &y, err))
            return false;
        if (!geo_valid_lnglat(x, y))
            return dberr_set(err, DBERR_BAD_VALUE,
                             "Longitude/latitude is out of bounds, lng: %g lat: %g", x, y);
        shape->x = x;
        shape->y = y;
        s2shim_geom_add_point(g, x, y);
        return true;
    }
    case GEO_LINESTRING:
        return parse_line(has_coords ? &coords : NULL, g, err);
    case GEO_POLYGON:
        return parse_polygon(has_coords ? &coords : NULL, crs == GEO_CRS_STRICT, g, err);
    case GEO_MULTIPOINT: {
        coords_t pts = {0};
        bool ok = parse_positions(has_coords ? &coords : NULL, &pts, err);
        if (ok && pts.n == 0)
            ok = dberr_set(err, DBERR_BAD_VALUE,
                           "MultiPoint coordinates must have at least 1 element");
        for (size_t i = 0; ok && i < pts.n; i++)
            s2shim_geom_add_point(g, pts.v[2 * i], pts.v[2 * i + 1]);
        bson_free(pts.v);
        return ok;
    }
    case GEO_MULTILINESTRING:
    case GEO_MULTIPOLYGON: {
        const char *what = type == GEO_MULTIPOLYGON ? "MultiPolygon" : "MultiLineString";
        if (!has_coords || !BSON_ITER_HOLDS_ARRAY(&coords) || !bson_iter_recurse(&coords, &c))
            return dberr_set(err, DBERR_BAD_VALUE,
                             "%s coordinates must be an array, instead got type %s", what,
                             has_coords ? type_name_at(&coords) : "missing");
        size_t n = 0;
        while (bson_iter_next(&c)) {
            n++;
            if (type == GEO_MULTIPOLYGON ? !parse_polygon(&c, false, g, err)
                                         : !parse_line(&c, g, err))
                return false;
        }
        if (n == 0)
            return dberr_set(err, DBERR_BAD_VALUE, "%s coordinates must have at least 1 element",
                             what);
        return true;
    }
    case GEO_COLLECTION: {
        bson_iter_t geoms;
        if (!bson_iter_init_find(&geoms, obj, "geometries") || !BSON_ITER_HOLDS_ARRAY(&geoms) ||
            !bson_iter_recurse(&geoms, &c))
            return dberr_set(err, DBERR_BAD_VALUE,
                             "GeometryCollection geometries must be an array, instead got type %s",
                             bson_iter_init_find(&geoms, obj, "geometries") ? type_name_at(&geoms)
                                                                            : "missing");
        size_t i = 0;
        for (; bson_iter_next(&c); i++) {
            bson_t sub;
            if (!BSON_ITER_HOLDS_DOCUMENT(&c)) {
                char *s = shellfmt_value(bson_iter_value(&c));
                dberr_set(err, DBERR_BAD_VALUE,
                          "Element %zu of \"geometries\" must be an object, instead got type %s: "
                          "%s",
                          i, type_name_at(&c), s);
                bson_free(s);
                return false;
            }
            if (!bsonview_iter(&c, &sub))
                return dberr_set(err, DBERR_BAD_VALUE, "invalid GeometryCollection element");
            int t = parse_type(&sub);
            if (t < 0)
                return unknown_type(&sub, "Unknown GeoJSON type: ", err);
            if (t == GEO_COLLECTION)
                return unknown_type(&sub, "GeometryCollections cannot be nested: ", err);
            if (!add_geojson(shape, &sub, t, false, err))
                return false;
        }
        if (i == 0)
            return dberr_set(err, DBERR_BAD_VALUE,
                             "GeometryCollection geometries must have at least 1 element");
        return true;
    }
    default:
        return dberr_set(err, DBERR_INTERNAL_ERROR, "unknown GeoJSON type");
    }
}

geo_shape_t *geo_shape_from_geojson(const bson_t *obj, bool allow_strict, dberr_t *err)
{
    int type = parse_type(obj);
    if (type < 0) {
        unknown_type(obj, "unknown GeoJSON type: ", err);
        return NULL;
    }
    geo_shape_t *s = bson_malloc0(sizeof *s);
    s->type = (geo_type_t)type;
    s->crs = GEO_CRS_SPHERE;
    s->s2 = s2shim_geom_new();
    if (!add_geojson(s, obj, type, allow_strict, err)) {
        geo_shape_destroy(s);
        return NULL;
    }
    return s;
}

geo_shape_t *geo_collection_areas(const bson_t *obj)
{
    bson_iter_t geoms, c;
    if (!bson_iter_init_find(&geoms, obj, "geometries") || !BSON_ITER_HOLDS_ARRAY(&geoms) ||
        !bson_iter_recurse(&geoms, &c))
        return NULL;
    geo_shape_t *s = bson_malloc0(sizeof *s);
    s->type = GEO_MULTIPOLYGON;
    s->crs = GEO_CRS_SPHERE;
    s->s2 = s2shim_geom_new();
    size_t added = 0;
    while (bson_iter_next(&c)) {
        bson_t sub;
        dberr_t err;
        if (!BSON_ITER_HOLDS_DOCUMENT(&c) || !bsonview_iter(&c, &sub))
            continue;
        int t = parse_type(&sub);
        if ((t == GEO_POLYGON || t == GEO_MULTIPOLYGON) && add_geojson(s, &sub, t, false, &err))
            added++;
    }
    if (added == 0) {
        geo_shape_destroy(s);
        return NULL;
    }
    return s;
}

geo_shape_t *geo_shape_from_stored(const bson_value_t *v, dberr_t *err)
{
    if (v->value_type != BSON_TYPE_ARRAY && v->value_type != BSON_TYPE_DOCUMENT) {
        char *s = shellfmt_value(v);
        dberr_set(err, DBERR_BAD_VALUE, "geo element must be an array or object: %s", s);
        bson_free(s);
        return NULL;
    }
    bson_t obj;
    bson_iter_t it;
    if (!bson_init_static(&obj, v->value.v_doc.data, v->value.v_doc.data_len) ||
        !bson_iter_init(&it, &obj)) {
        dberr_set(err, DBERR_BAD_VALUE, "geo element is not valid BSON");
        return NULL;
    }
    double d;
    bool first_number = bson_iter_next(&it) && geo_number(&it, &d);
    if (v->value_type == BSON_TYPE_ARRAY || first_number) {
        /* a legacy point: [x, y] or {x: .., y: ..} */
        bson_iter_t whole;
        double x, y;
        bson_t wrap = BSON_INITIALIZER;
        BSON_APPEND_VALUE(&wrap, "p", v);
        bool ok =
            bson_iter_init_find(&whole, &wrap, "p") && geo_flat_point(&whole, true, &x, &y, err);
        bson_destroy(&wrap);
        return ok ? geo_flat_point_new(x, y) : NULL;
    }
    return geo_shape_from_geojson(&obj, false, err);
}

void geo_shape_destroy(geo_shape_t *s)
{
    if (!s)
        return;
    s2shim_geom_destroy(s->s2);
    bson_free(s);
}

geo_type_t geo_shape_type(const geo_shape_t *s)
{
    return s->type;
}
