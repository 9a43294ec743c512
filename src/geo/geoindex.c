/* geoindex: the keys a 2dsphere index holds for a stored geometry — S2
 * cells covering it, with mongod's default S2IndexingParams (finest level
 * ~500 m, coarsest ~100 km, at most 50 cells). */
#include "geo/geo-private.h"

void geo_index_levels(int *coarsest, int *finest)
{
    static int fine = -1, coarse = -1;
    if (fine < 0) {
        fine = s2shim_level_for_metres(500.0, GEO_EARTH_RADIUS_M);
        coarse = s2shim_level_for_metres(100 * 1000.0, GEO_EARTH_RADIUS_M);
    }
    *coarsest = coarse;
    *finest = fine;
}

bool geo_index_cells(const bson_value_t *v, int64_t *out, size_t cap, size_t *n, dberr_t *err)
{
    int coarsest, finest;
    geo_index_levels(&coarsest, &finest);
    geo_shape_t *s = geo_shape_from_stored(v, err);
    if (!s)
        return false;
    bool ok = false;
    if (s->crs == GEO_CRS_STRICT) {
        dberr_set(err, DBERR_BAD_VALUE, "can't index geometry with strict winding order");
        goto cleanup;
    }
    if (!s->s2) {
        dberr_set(err, DBERR_BAD_VALUE, "Longitude/latitude is out of bounds, lng: %g lat: %g",
                  s->x, s->y);
        goto cleanup;
    }
    /* the ids are written in place, then mapped to int64 order */
    *n = s2shim_geom_cover(s->s2, coarsest, finest, GEO_INDEX_MAX_CELLS, (uint64_t *)out, cap);
    for (size_t i = 0; i < *n && i < cap; i++)
        out[i] = (int64_t)((uint64_t)out[i] ^ UINT64_C(0x8000000000000000));
    ok = true;
cleanup:
    geo_shape_destroy(s);
    return ok;
}
