/* geo: geometries (GeoJSON and legacy coordinate pairs) parsed and validated
 * as mongod's GeoParser does, and the geospatial query predicates
 * ($geoWithin, $geoIntersects) the matcher runs; S2 does the sphere. */
#ifndef ATOMDB_GEO_H
#define ATOMDB_GEO_H

#include <bson/bson.h>
#include <stdbool.h>

#include "util/dberr.h"

/* mongod's earth radius in metres (kRadiusOfEarthInMeters). */
#define GEO_EARTH_RADIUS_M 6378100.0

/* The kinds of geometry. */
typedef enum {
    GEO_POINT,
    GEO_LINESTRING,
    GEO_POLYGON,
    GEO_MULTIPOINT,
    GEO_MULTILINESTRING,
    GEO_MULTIPOLYGON,
    GEO_COLLECTION,
} geo_type_t;

/* A parsed geometry; opaque. */
typedef struct geo_shape geo_shape_t;

/* Parses a stored location as mongod's parseFromStorage: a legacy point
 * ([x, y] or {x, y}, extra fields allowed) or a GeoJSON object. NULL with
 * BadValue in `err` (mongod's wording) when it is not a valid geometry. */
geo_shape_t *geo_shape_from_stored(const bson_value_t *v, dberr_t *err);

/* Parses the GeoJSON object `obj` (the value of a query's $geometry);
 * `allow_strict`: the strict-winding CRS (a big polygon) is accepted. */
geo_shape_t *geo_shape_from_geojson(const bson_t *obj, bool allow_strict, dberr_t *err);

/* Frees `s`; accepts NULL. */
void geo_shape_destroy(geo_shape_t *s);

/* The shape's kind. */
geo_type_t geo_shape_type(const geo_shape_t *s);

/* -- 2dsphere index keys (geoindex.c) -- */

/* Most cells one geometry gives a 2dsphere index (mongod's
 * maxCellsInCovering). */
#define GEO_INDEX_MAX_CELLS 50

/* The 2dsphere index keys of the stored value `v`: its S2 cells (levels
 * and cell counts as mongod's S2IndexingParams), each as an int64 whose
 * order is the cells' order. Writes up to `cap` into `out` and their number
 * (which may exceed `cap`) into `*n`. False with BadValue when `v` is not a geometry a 2dsphere
 * index takes (the caller words mongod's 16755). */
bool geo_index_cells(const bson_value_t *v, int64_t *out, size_t cap, size_t *n, dberr_t *err);

/* -- query predicates (geopred.c) -- */

/* A compiled $geoWithin / $geoIntersects argument; opaque. */
typedef struct geo_pred geo_pred_t;

/* True for the field operators geo_pred_new compiles ($geoWithin,
 * $within, $geoIntersects); $near / $nearSphere go to geo_pred_new_near. */
bool geo_pred_is_operator(const char *op);

/* Compiles {op: arg} ($geoWithin, $within, $geoIntersects); NULL with
 * mongod's error in `err`. */
geo_pred_t *geo_pred_new(const char *op, const bson_value_t *arg, dberr_t *err);

/* Compiles $near / $nearSphere from the path's whole operator document
 * `ops` (siblings $maxDistance / $minDistance included), as mongod's
 * GeoNearExpression: {$geometry: Point, $minDistance, $maxDistance} in
 * metres, or a legacy $nearSphere: [x, y] in radians. A legacy $near
 * (flat, needing a 2d index) fails with 291. */
geo_pred_t *geo_pred_new_near(const char *op, const bson_t *ops, dberr_t *err);

/* True for a $near / $nearSphere predicate. */
bool geo_pred_is_near(const geo_pred_t *p);

/* A near predicate's distance to the stored value `v` (metres, or radians
 * for a legacy $nearSphere); -1 when `v` is not a geometry. */
double geo_pred_distance(const geo_pred_t *p, const bson_value_t *v);

/* geo_pred_distance, and in `*loc` the part of `v` it measured to: `v`
 * itself, or for a legacy near the nearest location of a 2d multi-location
 * value ({home: [x, y], work: [x, y]}); borrowed from `v`. */
double geo_pred_distance_at(const geo_pred_t *p, const bson_value_t *v, bson_value_t *loc);

/* True when the stored value `v` (one value the path reaches) satisfies
 * the predicate; values that are not geometries never match. */
bool geo_pred_test(const geo_pred_t *p, const bson_value_t *v);

/* Most cells a query region's covering has (mongod's
 * internalQueryS2GeoMaxCells). */
#define GEO_QUERY_MAX_CELLS 20

/* The key ranges of a 2dsphere index that hold every document `p` can
 * match: (min, max) int64 key pairs, sorted, disjoint, in `*ranges`
 * (bson_malloc'd; the caller frees it) and their number in `*n`. For a
 * $near, `radius` (>= 0, in the predicate's units: metres, or radians for
 * a legacy $nearSphere) bounds the search instead of its $maxDistance.
 * False when the region is not one the index bounds: flat $box / $center /
 * $polygon, a $near with neither $maxDistance nor `radius`. */
bool geo_pred_index_ranges(const geo_pred_t *p, double radius, int64_t **ranges, size_t *n);

/* A $near predicate's radius (its units) that reaches the whole sphere. */
double geo_pred_near_whole(const geo_pred_t *p);

/* The units of a $near predicate's distances. */
typedef enum {
    GEO_NEAR_METRES,  /* a GeoJSON point: on the sphere, in metres (2dsphere) */
    GEO_NEAR_RADIANS, /* a legacy $nearSphere: on the sphere, in radians (2d or 2dsphere) */
    GEO_NEAR_FLAT,    /* a legacy $near: on the plane, in coordinate units (2d) */
} geo_near_units_t;

/* A $near predicate's units. */
geo_near_units_t geo_pred_near_units(const geo_pred_t *p);

/* -- legacy 2d indexes (geo2d.c) -- */

/* A 2d index's plane: [min, max] on both axes cut into 2^bits cells per
 * axis, as mongod's GeoHashConverter parameters. */
typedef struct geo2d_params {
    int bits;        /* 1..32 (default 26) */
    double min, max; /* default -180, 180 */
    double scaling;  /* 2^32 / (max - min) */
    double error;    /* one finest cell's diagonal (+ epsilon): mongod's _error */
} geo2d_params_t;

/* True for the index options a 2d index takes (bits, min, max). */
bool geo2d_is_option(const char *name);

/* Reads bits / min / max from the index spec `spec` (defaults where
 * absent); TypeMismatch 14 / InvalidOptions 72 with mongod's words. */
bool geo2d_params_parse(const bson_t *spec, geo2d_params_t *p, dberr_t *err);

/* The geohash keys of one value a 2d path reaches (a trailing array is one
 * value), as mongod's get2DKeys: a pair [x, y] / {a: x, b: y}, or an
 * array / document of pairs; anything that is no array or document, and
 * empty ones, give no key. Each key is an int64 whose order is the
 * geohash's. Writes up to `cap` into `out`, their number into `*n` (may
 * exceed `cap`). False with mongod's code and message (13026, 13027,
 * 13067, 13068, 16804) without the " :: caused by :: <doc>" the caller
 * adds. */
bool geo2d_keys(const geo2d_params_t *p, const bson_value_t *v, int64_t *out, size_t cap, size_t *n,
                dberr_t *err);

/* The key ranges of a 2d index that hold every document `pr` can match:
 * (min, max) int64 pairs, sorted and disjoint, in `*ranges` (bson_malloc'd)
 * and their number in `*n`; for a $near, `radius` (>= 0, its units) bounds
 * the search instead of $maxDistance. False when a 2d index does not bound
 * `pr`: $geoIntersects, a $geometry region, a GeoJSON $near, a $near with
 * neither $maxDistance nor `radius`. */
bool geo_pred_2d_ranges(const geo_pred_t *pr, const geo2d_params_t *p, double radius,
                        int64_t **ranges, size_t *n);

/* A $near predicate's radius (its units) that reaches every point of the
 * 2d plane `p`. */
double geo_pred_2d_whole(const geo_pred_t *pr, const geo2d_params_t *p);

/* Frees `p`; accepts NULL. */
void geo_pred_destroy(geo_pred_t *p);

#endif
