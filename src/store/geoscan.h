/* geoscan: the planner's scans of a 2dsphere index — the key ranges over
 * the S2 covering of a $geoWithin / $geoIntersects region or of a $near
 * cap, each candidate document fetched once, then matched by the caller. */
#ifndef ATOMDB_GEOSCAN_H
#define ATOMDB_GEOSCAN_H

#include "geo/geo.h"
#include "store/index.h"
#include "store/record.h"

/* True when `ix` is a 2dsphere index whose first field is `path`'s S2
 * cells: the only shape geoscan scans. */
bool geoscan_usable(const index_t *ix);

/* Appends to `cand` (once each, in no order) every record of `ix` holding
 * a key in the index ranges of `p` (geo_pred_index_ranges with `radius`),
 * adding the keys read to `*keys`. False when `p` gives no ranges. */
bool geoscan_candidates(const index_t *ix, const geo_pred_t *p, double radius, recvec_t *cand,
                        size_t *keys);

#endif
