/* s2shim: the C face of Google S2 (libs2), the only C++ in atomdb. A
 * geometry is a set of points, polylines and polygons on the sphere, built
 * with mongod's validation rules and tested with S2's boolean operations. */
#ifndef ATOMDB_GEO_S2SHIM_H
#define ATOMDB_GEO_S2SHIM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Why a line or polygon was refused (geojson.c words the message). */
typedef enum {
    S2SHIM_OK = 0,
    S2SHIM_LINE_TOO_FEW,    /* fewer than 2 distinct vertices; detail: count */
    S2SHIM_LINE_INVALID,    /* S2Polyline validation failed; text */
    S2SHIM_LOOP_EMPTY,      /* a loop without vertices */
    S2SHIM_LOOP_NOT_CLOSED, /* first vertex is not the last */
    S2SHIM_LOOP_TOO_FEW,    /* fewer than 3 distinct vertices; detail: count */
    S2SHIM_LOOP_INVALID,    /* S2Loop validation failed; text */
    S2SHIM_LOOP_NOT_HOLE,   /* a secondary loop outside the first */
    S2SHIM_POLYGON_INVALID, /* S2Polygon validation failed; text */
    S2SHIM_NOT_NORMALIZED,  /* a hole shares more than one vertex with its shell */
    S2SHIM_MULTI_EXTERIOR,  /* more than one exterior loop */
    S2SHIM_NESTED,          /* holes nested in holes */
    S2SHIM_BIG_LOOPS,       /* a strict-winding polygon with other than one loop */
} s2shim_status_t;

/* A refusal: its kind, the loop it concerns, a count and S2's own words. */
typedef struct s2shim_error {
    s2shim_status_t status;
    size_t loop;    /* index of the offending loop */
    size_t detail;  /* a vertex count where the status needs one */
    char text[256]; /* S2's explanation, or "" */
} s2shim_error_t;

/* One geometry: points, polylines and polygons indexed together. */
typedef struct s2shim_geom s2shim_geom_t;

/* An empty geometry; never NULL. */
s2shim_geom_t *s2shim_geom_new(void);
/* Frees `g`; accepts NULL. */
void s2shim_geom_destroy(s2shim_geom_t *g);

/* Adds a point (degrees, already range-checked by the caller). */
void s2shim_geom_add_point(s2shim_geom_t *g, double lng, double lat);
/* Adds a polyline of `n` (lng, lat) pairs; false with `err` filled when
 * mongod would refuse it. */
bool s2shim_geom_add_line(s2shim_geom_t *g, const double *lnglat, size_t n, s2shim_error_t *err);
/* Adds a polygon of `nloops` loops, loop i holding `counts[i]` (lng, lat)
 * pairs at `loops[i]` (closed: last == first). `strict`: the one loop's
 * winding order is kept (the big-polygon CRS) instead of normalized. */
bool s2shim_geom_add_polygon(s2shim_geom_t *g, const double *const *loops, const size_t *counts,
                             size_t nloops, bool strict, s2shim_error_t *err);

/* True when `a` and `b` share a point. */
bool s2shim_geom_intersects(const s2shim_geom_t *a, const s2shim_geom_t *b);
/* True when `region` (polygons) contains all of `g`. */
bool s2shim_geom_contains(const s2shim_geom_t *region, const s2shim_geom_t *g);
/* True when every vertex of `g` lies within `radians` of (lng, lat), as
 * mongod tests a $centerSphere. */
bool s2shim_cap_contains(double lng, double lat, double radians, const s2shim_geom_t *g);
/* The S2 cell ids an index holds for `g` (mongod's S2IndexingParams): a
 * geometry of points alone gives each point's cell at `finest_level`;
 * others the region coverer's cells between the two levels, at most
 * `max_cells`. Writes up to `cap` ids into `out`; returns how many there
 * are (may exceed `cap`). */
size_t s2shim_geom_cover(const s2shim_geom_t *g, int coarsest_level, int finest_level,
                         int max_cells, uint64_t *out, size_t cap);
/* The key ranges a 2dsphere index (cells from `coarsest_level` to
 * `finest_level`) is scanned over for a query region: the region
 * coverer's cells (at most about `max_cells`), each one's descendants and
 * ancestors, sorted and merged. Sets `*out` (malloc'd; the caller frees it)
 * to (min, max) cell-id pairs and returns how many pairs. */
size_t s2shim_geom_ranges(const s2shim_geom_t *g, int coarsest_level, int finest_level,
                          int max_cells, uint64_t **out);
/* The same for the spherical cap of `radians` around (lng, lat). */
size_t s2shim_cap_ranges(double lng, double lat, double radians, int coarsest_level,
                         int finest_level, int max_cells, uint64_t **out);
/* The S2 level whose average cell edge is closest to `metres` on mongod's
 * earth. */
int s2shim_level_for_metres(double metres, double earth_radius);

/* Shortest distance in radians between the point (lng, lat) and `g`. */
double s2shim_geom_distance(const s2shim_geom_t *g, double lng, double lat);

#ifdef __cplusplus
}
#endif

#endif
