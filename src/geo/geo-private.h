/* geo-private: what geojson.c and geopred.c share; not part of geo.h. */
#ifndef ATOMDB_GEO_PRIVATE_H
#define ATOMDB_GEO_PRIVATE_H

#include "geo/geo.h"
#include "geo/s2shim.h"

/* The coordinate reference system of a shape, as mongod's CRS. */
typedef enum {
    GEO_CRS_FLAT,   /* a legacy point: x, y on a plane */
    GEO_CRS_SPHERE, /* GeoJSON on the sphere */
    GEO_CRS_STRICT, /* a big polygon (strict winding order) */
} geo_crs_t;

struct geo_shape {
    geo_type_t type;
    geo_crs_t crs;
    double x, y;       /* a point's coordinates (legacy or GeoJSON) */
    s2shim_geom_t *s2; /* the shape on the sphere; NULL for a legacy point
                          outside the longitude/latitude range */
};

/* Reads a number (int, long, double, decimal) into `*d`; false otherwise. */
bool geo_number(const bson_iter_t *it, double *d);

/* Starts `it` on the array or document value `v`; false when `v` holds
 * another type or is not valid BSON. */
bool geo_value_iter(const bson_value_t *v, bson_iter_t *it);

/* A legacy point shape at (x, y), with its sphere side when (x, y) is a
 * valid longitude/latitude. */
geo_shape_t *geo_flat_point_new(double x, double y);

/* Parses a flat point ([x, y] or {x: .., y: ..}) at `it`; `allow_extra`:
 * more than two elements are allowed. BadValue as mongod's. */
bool geo_flat_point(const bson_iter_t *it, bool allow_extra, double *x, double *y, dberr_t *err);

/* True when (lng, lat) lies on the sphere's coordinate ranges. */
bool geo_valid_lnglat(double lng, double lat);

/* The S2 levels a 2dsphere index keys cells between (mongod's default
 * S2IndexingParams: coarsest ~100 km, finest ~500 m). */
void geo_index_levels(int *coarsest, int *finest);

/* The Polygon and MultiPolygon members of the (already validated)
 * GeometryCollection `obj` as one shape: what a $geoWithin of it tests
 * containment in, as mongod's GeometryContainer::contains; NULL when it has
 * none (mongod then refuses the $geoWithin). */
geo_shape_t *geo_collection_areas(const bson_t *obj);

/* A compiled geo predicate (geopred.c; geo2d.c reads its region). */
typedef enum {
    REGION_SHAPE,         /* $geometry: GeoJSON (or a legacy point) on the sphere */
    REGION_CENTER_SPHERE, /* $centerSphere: a spherical cap, radius in radians */
    REGION_BOX,           /* $box: flat */
    REGION_CENTER,        /* $center: flat circle */
    REGION_POLYGON,       /* $polygon: flat polygon */
} region_kind_t;

struct geo_pred {
    bool within; /* $geoWithin; otherwise $geoIntersects */
    region_kind_t kind;
    geo_shape_t *shape; /* REGION_SHAPE */
    geo_shape_t *area;  /* REGION_SHAPE of a GeometryCollection: its polygons alone
                           (what $geoWithin tests containment in), else NULL */
    double cx, cy, r;   /* the circles */
    double box[4];      /* REGION_BOX: min x, min y, max x, max y */
    double *poly;       /* REGION_POLYGON: (x, y) pairs */
    size_t npoly;
    bool near;    /* $near / $nearSphere: (cx, cy) and the distances */
    bool radians; /* a legacy $nearSphere: distances in radians */
    bool flat;    /* a legacy $near: flat distances (needs a 2d index) */
    double min_dist, max_dist;
};

/* An S2 cell id as the int64 a 2dsphere index key holds (same order). */
#define GEO_CELL_KEY(id) ((int64_t)((uint64_t)(id) ^ UINT64_C(0x8000000000000000)))

#endif
