/* geoscan: the planner's scans of a 2dsphere or 2d index — the key ranges
 * over the S2 (or geohash) covering of a $geoWithin / $geoIntersects region
 * or of a $near cap, each candidate fetched once, then matched by the
 * caller. */
#ifndef ATOMDB_GEOSCAN_H
#define ATOMDB_GEOSCAN_H

#include "geo/geo.h"
#include "store/index.h"
#include "store/record.h"

/* True when `ix` is a 2dsphere index whose first field is `path`'s S2
 * cells, or a 2d index: the shapes geoscan scans. */
bool geoscan_usable(const index_t *ix);

/* True when the geoscan_usable `ix` bounds `p`: a $near in its units
 * (2dsphere: metres or radians; 2d: flat or radians), a region it covers
 * (2dsphere: on the sphere; 2d: $box $center $polygon $centerSphere). */
bool geoscan_bounds(const index_t *ix, const geo_pred_t *p);

/* A $near predicate's radius that reaches every document `ix` holds. */
double geoscan_near_whole(const index_t *ix, const geo_pred_t *p);

/* Appends to `cand` (once each, in no order) every record of `ix` holding
 * a key in the index ranges of `p` (geo_pred_index_ranges with `radius`),
 * adding the keys read to `*keys`. False when `p` gives no ranges. */
bool geoscan_candidates(const index_t *ix, const geo_pred_t *p, double radius, recvec_t *cand,
                        size_t *keys);

#endif
