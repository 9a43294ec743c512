/* geo2d: legacy `2d` indexes — the plane [min, max]² cut into 2^bits cells
 * per axis, a point keyed by its cell's geohash (x and y bits interleaved,
 * as mongod's GeoHash), and the key ranges of the cells covering a flat
 * query region (a quadtree covering in the spirit of mongod's R2 coverer). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "geo/geo-private.h"
#include "util/shellfmt.h"

/* Most cells one query region's covering has. */
#define GEO2D_MAX_CELLS 64

bool geo2d_is_option(const char *name)
{
    return strcmp(name, "bits") == 0 || strcmp(name, "min") == 0 || strcmp(name, "max") == 0;
}

/* The interleaved hash of the 32-bit cell coordinates (x, y), cut to
 * `bits` bits per axis: x's bit i at 63 - 2i, y's at 62 - 2i. */
static uint64_t geo2d_interleave(uint32_t x, uint32_t y, int bits)
{
    uint64_t h = 0;
    for (int i = 0; i < bits; i++) {
        h |= (uint64_t)((x >> (31 - i)) & 1) << (63 - 2 * i);
        h |= (uint64_t)((y >> (31 - i)) & 1) << (62 - 2 * i);
    }
    return h;
}

/* mongod's convertToHashScale: max itself moves half an error inside. */
static uint32_t geo2d_scale(const geo2d_params_t *p, double v)
{
    if (v == p->max)
        v -= p->error / 2;
    double d = (v - p->min) * p->scaling;
    if (d < 0)
        d = 0;
    if (d > 4294967295.0)
        d = 4294967295.0;
    return (uint32_t)d;
}

bool geo2d_params_parse(const bson_t *spec, geo2d_params_t *p, dberr_t *err)
{
    bson_iter_t it;
    p->bits = 26;
    p->min = -180;
    p->max = 180;
    if (bson_iter_init(&it, spec)) {
        while (bson_iter_next(&it)) {
            const char *k = bson_iter_key(&it);
            if (!geo2d_is_option(k))
                continue;
            if (!BSON_ITER_HOLDS_NUMBER(&it) && !BSON_ITER_HOLDS_DECIMAL128(&it))
                return dberr_set(err, DBERR_TYPE_MISMATCH,
                                 "The field '%s' must be a number, but got %s", k,
                                 shellfmt_type_name(bson_iter_type(&it)));
            double d;
            geo_number(&it, &d);
            if (k[0] == 'b')
                p->bits = d >= -2147483648.0 && d <= 2147483647.0 ? (int)d : -1;
            else if (strcmp(k, "min") == 0)
                p->min = d;
            else
                p->max = d;
        }
    }
    if (p->bits < 1 || p->bits > 32)
        return dberr_set(err, DBERR_INVALID_OPTIONS,
                         "bits for hash must be > 0 and <= 32, but %d bits were specified",
                         p->bits);
    if (!(p->min < p->max) || isinf(p->min) || isinf(p->max))
        return dberr_set(err, DBERR_INVALID_OPTIONS,
                         "region for hash must be valid and have positive area, but [%g, %g] "
                         "was specified",
                         p->min, p->max);
    p->scaling = 4294967296.0 / (p->max - p->min);
    if (!(p->scaling > 0) || isinf(p->scaling))
        return dberr_set(err, DBERR_INVALID_OPTIONS, "range [%g, %g] is too small.", p->min,
                         p->max);
    /* mongod's init(): the diagonal of one cell at `bits`, plus 1/1000 of a
     * hash unit */
    p->error = sqrt(2.0) * ldexp(1.0, 32 - p->bits) / p->scaling + 0.001 / p->scaling;
    return true;
}

/* The key of the pair at `pair` (an array or document of >= 2 values). */
static bool geo2d_key_of(const geo2d_params_t *p, const bson_value_t *pair, int64_t *key,
                         dberr_t *err)
{
    bson_iter_t it;
    double xy[2];
    if (!geo_value_iter(pair, &it) || !bson_iter_next(&it))
        return dberr_set(err, 13067, "geo field is empty");
    for (int i = 0; i < 2; i++) {
        if (i == 1 && !bson_iter_next(&it))
            return dberr_set(err, 13068, "geo field only has 1 element");
        if (!BSON_ITER_HOLDS_NUMBER(&it) && !BSON_ITER_HOLDS_DECIMAL128(&it))
            return dberr_set(err, 13026,
                             "geo values must be 'legacy coordinate pairs' for 2d indexes");
        geo_number(&it, &xy[i]);
    }
    for (int i = 0; i < 2; i++) {
        if (!(xy[i] <= p->max && xy[i] >= p->min))
            return dberr_set(err, 13027, "point not in interval of [ %g, %g ]", p->min, p->max);
    }
    uint64_t h = geo2d_interleave(geo2d_scale(p, xy[0]), geo2d_scale(p, xy[1]), p->bits);
    *key = (int64_t)(h ^ UINT64_C(0x8000000000000000));
    return true;
}

bool geo2d_keys(const geo2d_params_t *p, const bson_value_t *v, int64_t *out, size_t cap, size_t *n,
                dberr_t *err)
{
    *n = 0;
    bson_iter_t it;
    if (!geo_value_iter(v, &it) || !bson_iter_next(&it))
        return true; /* not a location, or empty: ignored, as mongod */
    double first;
    int64_t key;
    if (geo_number(&it, &first)) { /* one location */
        if (!geo2d_key_of(p, v, &key, err))
            return false;
        if (cap > 0)
            out[0] = key;
        *n = 1;
        return true;
    }
    do { /* an array or document of locations */
        if (!BSON_ITER_HOLDS_ARRAY(&it) && !BSON_ITER_HOLDS_DOCUMENT(&it))
            return dberr_set(err, 16804,
                             "location object expected, location array not in correct format");
        const bson_value_t *loc = bson_iter_value(&it);
        if (loc->value.v_doc.data_len <= 5)
            continue; /* an empty location */
        if (!geo2d_key_of(p, loc, &key, err))
            return false;
        if (*n < cap)
            out[*n] = key;
        (*n)++;
    } while (bson_iter_next(&it));
    return true;
}

/* -- coverings -- */

/* A flat box [x0, x1] × [y0, y1]. */
typedef struct geo2d_box {
    double x0, y0, x1, y1;
} geo2d_box_t;

/* How a cell lies against the query region. */
typedef enum { CELL_OUT, CELL_PART, CELL_IN } geo2d_rel_t;

/* The region a covering is for: a bounding box, and for circles and boxes
 * the exact shape (cells wholly inside need no subdividing). */
typedef struct geo2d_region {
    geo2d_box_t bound;
    bool circle; /* (cx, cy, r) */
    bool box;    /* bound is the region itself */
    double cx, cy, r;
} geo2d_region_t;

static geo2d_rel_t geo2d_relate(const geo2d_region_t *rg, const geo2d_box_t *cell)
{
    /* cells are widened a little: a point on a cell's edge may hash to
     * either side of it after rounding */
    double m = (cell->x1 - cell->x0) * 1e-6;
    geo2d_box_t c = {cell->x0 - m, cell->y0 - m, cell->x1 + m, cell->y1 + m};
    if (c.x1 < rg->bound.x0 || c.x0 > rg->bound.x1 || c.y1 < rg->bound.y0 || c.y0 > rg->bound.y1)
        return CELL_OUT;
    if (rg->circle) {
        double dx = fmax(fmax(c.x0 - rg->cx, 0), rg->cx - c.x1);
        double dy = fmax(fmax(c.y0 - rg->cy, 0), rg->cy - c.y1);
        if (hypot(dx, dy) > rg->r)
            return CELL_OUT;
        double fx = fmax(fabs(c.x0 - rg->cx), fabs(c.x1 - rg->cx));
        double fy = fmax(fabs(c.y0 - rg->cy), fabs(c.y1 - rg->cy));
        return hypot(fx, fy) <= rg->r ? CELL_IN : CELL_PART;
    }
    if (rg->box && c.x0 >= rg->bound.x0 && c.x1 <= rg->bound.x1 && c.y0 >= rg->bound.y0 &&
        c.y1 <= rg->bound.y1)
        return CELL_IN;
    return CELL_PART;
}

/* One quadtree cell: its geohash prefix and level (bits per axis). */
typedef struct geo2d_cell {
    uint64_t hash;
    int level;
} geo2d_cell_t;

static geo2d_box_t geo2d_cell_box(const geo2d_params_t *p, const geo2d_cell_t *c)
{
    uint32_t x = 0, y = 0;
    for (int i = 0; i < c->level; i++) {
        x |= (uint32_t)((c->hash >> (63 - 2 * i)) & 1) << (31 - i);
        y |= (uint32_t)((c->hash >> (62 - 2 * i)) & 1) << (31 - i);
    }
    double size = ldexp(p->max - p->min, -c->level);
    double x0 = p->min + (double)x / p->scaling, y0 = p->min + (double)y / p->scaling;
    return (geo2d_box_t){x0, y0, x0 + size, y0 + size};
}

static int geo2d_range_cmp(const void *a, const void *b)
{
    const int64_t *x = a, *y = b;
    return x[0] < y[0] ? -1 : x[0] > y[0];
}

/* The covering of `rg`: cells split level by level while the count stays
 * under GEO2D_MAX_CELLS, then their key ranges sorted and merged. */
static void geo2d_cover(const geo2d_params_t *p, const geo2d_region_t *rg, int64_t **ranges,
                        size_t *n)
{
    size_t cap = 4 * GEO2D_MAX_CELLS + 4;
    geo2d_cell_t *cur = bson_malloc(cap * sizeof *cur), *next = bson_malloc(cap * sizeof *next);
    geo2d_cell_t *done = bson_malloc(cap * sizeof *done);
    size_t ncur = 1, ndone = 0;
    cur[0] = (geo2d_cell_t){0, 0};
    while (ncur > 0) {
        size_t nnext = 0, npart = 0;
        for (size_t i = 0; i < ncur; i++) {
            geo2d_box_t b = geo2d_cell_box(p, &cur[i]);
            geo2d_rel_t rel = geo2d_relate(rg, &b);
            if (rel == CELL_OUT)
                continue;
            if (rel == CELL_IN || cur[i].level == p->bits)
                done[ndone++] = cur[i];
            else
                cur[npart++] = cur[i];
        }
        if (npart == 0)
            break;
        if (ndone + 4 * npart > GEO2D_MAX_CELLS) { /* no finer: keep these */
            for (size_t i = 0; i < npart; i++)
                done[ndone++] = cur[i];
            break;
        }
        for (size_t i = 0; i < npart; i++) {
            int l = cur[i].level;
            for (uint64_t q = 0; q < 4; q++)
                next[nnext++] = (geo2d_cell_t){cur[i].hash | (q << (62 - 2 * l)), l + 1};
        }
        geo2d_cell_t *t = cur;
        cur = next;
        next = t;
        ncur = nnext;
    }
    int64_t *r = bson_malloc((2 * ndone + 2) * sizeof *r);
    for (size_t i = 0; i < ndone; i++) {
        uint64_t low =
            done[i].level == 0 ? UINT64_MAX : (UINT64_C(1) << (64 - 2 * done[i].level)) - 1;
        r[2 * i] = (int64_t)(done[i].hash ^ UINT64_C(0x8000000000000000));
        r[2 * i + 1] = (int64_t)((done[i].hash | low) ^ UINT64_C(0x8000000000000000));
    }
    if (ndone > 1)
        qsort(r, ndone, 2 * sizeof *r, geo2d_range_cmp);
    size_t w = 0;
    for (size_t i = 0; i < ndone; i++) {
        if (w > 0 && r[2 * i] <= r[2 * (w - 1) + 1] + 1) {
            if (r[2 * i + 1] > r[2 * (w - 1) + 1])
                r[2 * (w - 1) + 1] = r[2 * i + 1];
        } else {
            r[2 * w] = r[2 * i];
            r[2 * w + 1] = r[2 * i + 1];
            w++;
        }
    }
    bson_free(cur);
    bson_free(next);
    bson_free(done);
    *ranges = r;
    *n = w;
}

/* The lng/lat box holding the spherical cap of `rad` radians around
 * (lng, lat), widened a little; the whole range where it wraps. */
static geo2d_box_t geo2d_cap_bound(double lng, double lat, double rad)
{
    double deg = rad * 180.0 / M_PI + 1e-9;
    geo2d_box_t b = {-180, fmax(lat - deg, -90), 180, fmin(lat + deg, 90)};
    if (rad >= M_PI || lat + deg >= 90 || lat - deg <= -90)
        return b;
    double s = sin(rad) / cos(lat * M_PI / 180.0);
    if (s >= 1)
        return b;
    double dl = asin(s) * 180.0 / M_PI + 1e-9;
    if (lng - dl < -180 || lng + dl > 180)
        return b;
    b.x0 = lng - dl;
    b.x1 = lng + dl;
    return b;
}

double geo_pred_2d_whole(const geo_pred_t *pr, const geo2d_params_t *p)
{
    if (!pr->flat)
        return M_PI;
    double dx = fmax(fabs(pr->cx - p->min), fabs(pr->cx - p->max));
    double dy = fmax(fabs(pr->cy - p->min), fabs(pr->cy - p->max));
    return hypot(dx, dy) * (1 + 1e-9);
}

bool geo_pred_2d_ranges(const geo_pred_t *pr, const geo2d_params_t *p, double radius,
                        int64_t **ranges, size_t *n)
{
    geo2d_region_t rg = {0};
    if (pr->near) {
        double r = radius >= 0 ? radius : pr->max_dist;
        if (!isfinite(r) || !(pr->flat || pr->radians))
            return false;
        if (pr->flat) {
            rg.circle = true;
            rg.cx = pr->cx;
            rg.cy = pr->cy;
            rg.r = r;
            rg.bound = (geo2d_box_t){pr->cx - r, pr->cy - r, pr->cx + r, pr->cy + r};
        } else {
            rg.bound = geo2d_cap_bound(pr->cx, pr->cy, r);
        }
    } else if (!pr->within) {
        return false;
    } else {
        switch (pr->kind) {
        case REGION_BOX:
            rg.box = true;
            rg.bound = (geo2d_box_t){pr->box[0], pr->box[1], pr->box[2], pr->box[3]};
            break;
        case REGION_CENTER:
            rg.circle = true;
            rg.cx = pr->cx;
            rg.cy = pr->cy;
            rg.r = pr->r;
            rg.bound =
                (geo2d_box_t){pr->cx - pr->r, pr->cy - pr->r, pr->cx + pr->r, pr->cy + pr->r};
            break;
        case REGION_POLYGON:
            rg.bound = (geo2d_box_t){INFINITY, INFINITY, -INFINITY, -INFINITY};
            for (size_t i = 0; i < pr->npoly; i++) {
                rg.bound.x0 = fmin(rg.bound.x0, pr->poly[2 * i]);
                rg.bound.x1 = fmax(rg.bound.x1, pr->poly[2 * i]);
                rg.bound.y0 = fmin(rg.bound.y0, pr->poly[2 * i + 1]);
                rg.bound.y1 = fmax(rg.bound.y1, pr->poly[2 * i + 1]);
            }
            break;
        case REGION_CENTER_SPHERE:
            rg.bound = geo2d_cap_bound(pr->cx, pr->cy, pr->r);
            break;
        default:
            return false; /* a $geometry: not on the plane (mongod's hasR2Region) */
        }
    }
    geo2d_cover(p, &rg, ranges, n);
    return true;
}
