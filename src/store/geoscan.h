/* geoscan: the planner's scans of a 2dsphere or 2d index — the key ranges
 * over the S2 (or geohash) covering of a $geoWithin / $geoIntersects region
 * or of a $near cap (under the bounds of the fields before the geometry in
 * a compound 2dsphere index), each candidate fetched once, then matched by
 * the caller. */
#ifndef ATOMDB_GEOSCAN_H
#define ATOMDB_GEOSCAN_H

#include "doc/matcher.h"
#include "geo/geo.h"
#include "store/index.h"
#include "store/record.h"
#include "util/buf.h"

/* The geometry field of `ix`: its first 2dsphere field, a 2d index's first
 * field; -1 when it has none (not a geo index geoscan scans). */
int geoscan_geo_field(const index_t *ix);

/* True when the geo index `ix` bounds `p` (a predicate on its geometry): a
 * $near in its units (2dsphere: metres or radians; 2d: flat or radians), a
 * region it covers (2dsphere: on the sphere; 2d: $box $center $polygon
 * $centerSphere). */
bool geoscan_bounded(const index_t *ix, const geo_pred_t *p);

/* A $near predicate's radius that reaches every document `ix` holds. */
double geoscan_near_whole(const index_t *ix, const geo_pred_t *p);

/* True when the planner uses the geo index `ix` for the filter `m` (with a
 * geospatial predicate on its geometry, which the caller checks): its
 * geometry is its first field (always so for a 2d index), or, as mongod's
 * relevant indexes, the filter has a predicate on its first field
 * (matcher_path_sargable). */
bool geoscan_relevant(const index_t *ix, const matcher_t *m);

/* What the fields before the geometry of a 2dsphere index bound, as
 * mongod's compound 2dsphere bounds: when each of them has an equality or
 * an $in (not a regex; strings only under the index's collation), one key
 * prefix per combination of values (`points`, at most GEOSCAN_MAX_POINTS),
 * each then followed by the covering's cell ranges; otherwise (range
 * mode) the keys from `lo` while they start with `prefix` (and are <= hi
 * when has_hi): the equalities of the leading fields and a range on the
 * next one, every key in it read (its cells are not bounded). A
 * geometry-first index (every 2d index) has one empty point. */
typedef struct geoscan_bounds {
    int geo;         /* the index's geometry field (geoscan_geo_field) */
    buf_t *points;   /* owned; NULL in range mode */
    size_t npoints;  /* may be 0: an empty $in, nothing to read */
    buf_t lo, prefix, hi;
    bool has_hi;
} geoscan_bounds_t;

#define GEOSCAN_MAX_POINTS 256

/* Works out the bounds of `m` on the fields of `ix` before its geometry,
 * under the filter's collation (matcher_collation). */
void geoscan_bounds_init(geoscan_bounds_t *b, const index_t *ix, const matcher_t *m);
void geoscan_bounds_destroy(geoscan_bounds_t *b);

/* Appends to `cand` (once each, in scan order) every record of `ix`
 * holding a key in the cell ranges of `p` at `radius` (-1: the predicate's
 * own region) under each point of `b`, adding the keys read to `*keys`.
 * False when `p` gives no ranges at `radius`, or in range mode (no
 * points), whose range the caller reads as an ordinary index scan (it
 * yields). */
bool geoscan_candidates_in(const index_t *ix, const geoscan_bounds_t *b, const geo_pred_t *p,
                           double radius, recvec_t *cand, size_t *keys);

#endif
