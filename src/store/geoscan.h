/* geoscan: the planner's scans of a 2dsphere index — the key ranges over
 * the S2 covering of a $geoWithin / $geoIntersects region or of a $near
 * cap (under the bounds of the fields before the geometry in a compound
 * index), each candidate document fetched once, then matched by the
 * caller. */
#ifndef ATOMDB_GEOSCAN_H
#define ATOMDB_GEOSCAN_H

#include "doc/matcher.h"
#include "geo/geo.h"
#include "store/index.h"
#include "store/record.h"
#include "util/buf.h"

/* True when `ix` is a 2dsphere index whose first field is `path`'s S2
 * cells: the only shape geoscan scans. */
bool geoscan_usable(const index_t *ix);

/* Appends to `cand` (once each, in no order) every record of `ix` holding
 * a key in the index ranges of `p` (geo_pred_index_ranges with `radius`),
 * adding the keys read to `*keys`. False when `p` gives no ranges. */
bool geoscan_candidates(const index_t *ix, const geo_pred_t *p, double radius, recvec_t *cand,
                        size_t *keys);

/* The first 2dsphere field of `ix`, or -1. */
int geoscan_geo_field(const index_t *ix);

/* True when the planner uses the 2dsphere index `ix` for the filter `m`
 * (with a geospatial predicate on its geometry, which the caller checks):
 * its geometry is its first field, or, as mongod's relevant indexes, the
 * filter has a predicate on its first field (matcher_path_sargable). */
bool geoscan_relevant(const index_t *ix, const matcher_t *m);

/* What the fields before the geometry of a 2dsphere index bound, as
 * mongod's compound 2dsphere bounds: when each of them has an equality or
 * an $in (not a regex; strings only under the index's collation), one key
 * prefix per combination of values (`points`, at most GEOSCAN_MAX_POINTS),
 * each then followed by the covering's cell ranges; otherwise (range
 * mode) the keys from `lo` while they start with `prefix` (and are <= hi
 * when has_hi): the equalities of the leading fields and a range on the
 * next one, every key in it read (its cells are not bounded). A
 * geometry-first index has one empty point. */
typedef struct geoscan_bounds {
    int geo;         /* the index's first 2dsphere field */
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

/* geoscan_candidates under `b`: each point's cell ranges of `p`; false
 * when `p` gives no ranges at `radius`, or in range mode (no points),
 * whose range the caller reads as an ordinary index scan (it yields). */
bool geoscan_candidates_in(const index_t *ix, const geoscan_bounds_t *b, const geo_pred_t *p,
                           double radius, recvec_t *cand, size_t *keys);

#endif
