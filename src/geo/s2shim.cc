// s2shim: builds and tests S2 geometries for atomdb's C code (s2shim.h).
// Kept small on purpose: validation rules follow mongod's geoparser, the
// rest is S2's MutableS2ShapeIndex and S2BooleanOperation.
#include "geo/s2shim.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <memory>
#include <vector>

#include <s2/mutable_s2shape_index.h>
#include <s2/s2boolean_operation.h>
#include <s2/s2cap.h>
#include <s2/s2closest_edge_query.h>
#include <s2/s2error.h>
#include <s2/s2metrics.h>
#include <s2/s2region_coverer.h>
#include <s2/s2shape_index_region.h>
#include <s2/s2latlng.h>
#include <s2/s2loop.h>
#include <s2/s2point_vector_shape.h>
#include <s2/s2polygon.h>
#include <s2/s2polyline.h>

struct s2shim_geom {
    MutableS2ShapeIndex index;
    std::vector<S2Point> points;   // the points alone
    std::vector<S2Point> vertices; // every vertex, for cap containment
    std::vector<std::unique_ptr<S2Polyline>> lines;
    std::vector<std::unique_ptr<S2Polygon>> polygons;
};

static S2Point to_point(double lng, double lat)
{
    return S2LatLng::FromDegrees(lat, lng).Normalized().ToPoint();
}

static bool fail(s2shim_error_t *err, s2shim_status_t st, size_t loop, size_t detail,
                 const S2Error *e)
{
    err->status = st;
    err->loop = loop;
    err->detail = detail;
    std::snprintf(err->text, sizeof err->text, "%s", e ? e->text().c_str() : "");
    return false;
}

// The vertices of (lng, lat) pairs with adjacent duplicates erased.
static std::vector<S2Point> to_points(const double *lnglat, size_t n)
{
    std::vector<S2Point> pts;
    for (size_t i = 0; i < n; i++) {
        S2Point p = to_point(lnglat[2 * i], lnglat[2 * i + 1]);
        if (pts.empty() || pts.back() != p)
            pts.push_back(p);
    }
    return pts;
}

extern "C" s2shim_geom_t *s2shim_geom_new(void)
{
    return new s2shim_geom();
}

extern "C" void s2shim_geom_destroy(s2shim_geom_t *g)
{
    delete g;
}

extern "C" void s2shim_geom_add_point(s2shim_geom_t *g, double lng, double lat)
{
    S2Point p = to_point(lng, lat);
    g->vertices.push_back(p);
    g->points.push_back(p);
    g->index.Add(std::make_unique<S2PointVectorShape>(std::vector<S2Point>{p}));
}

extern "C" bool s2shim_geom_add_line(s2shim_geom_t *g, const double *lnglat, size_t n,
                                     s2shim_error_t *err)
{
    std::vector<S2Point> pts = to_points(lnglat, n);
    if (pts.size() < 2)
        return fail(err, S2SHIM_LINE_TOO_FEW, 0, pts.size(), nullptr);
    auto line = std::make_unique<S2Polyline>(pts, S2Debug::DISABLE);
    S2Error e;
    if (line->FindValidationError(&e))
        return fail(err, S2SHIM_LINE_INVALID, 0, 0, &e);
    g->vertices.insert(g->vertices.end(), pts.begin(), pts.end());
    g->index.Add(std::make_unique<S2Polyline::Shape>(line.get()));
    g->lines.push_back(std::move(line));
    return true;
}

extern "C" bool s2shim_geom_add_polygon(s2shim_geom_t *g, const double *const *loops,
                                        const size_t *counts, size_t nloops, bool strict,
                                        s2shim_error_t *err)
{
    std::vector<std::unique_ptr<S2Loop>> built;
    std::vector<S2Point> all;
    S2Error e;
    if (strict && nloops != 1)
        return fail(err, S2SHIM_BIG_LOOPS, 0, nloops, nullptr);
    for (size_t i = 0; i < nloops; i++) {
        if (counts[i] == 0)
            return fail(err, S2SHIM_LOOP_EMPTY, i, 0, nullptr);
        if (to_point(loops[i][0], loops[i][1]) !=
            to_point(loops[i][2 * counts[i] - 2], loops[i][2 * counts[i] - 1]))
            return fail(err, S2SHIM_LOOP_NOT_CLOSED, i, 0, nullptr);
        std::vector<S2Point> pts = to_points(loops[i], counts[i]);
        pts.pop_back();
        if (pts.size() < 3)
            return fail(err, S2SHIM_LOOP_TOO_FEW, i, pts.size(), nullptr);
        auto loop = std::make_unique<S2Loop>(pts, S2Debug::DISABLE);
        if (loop->FindValidationError(&e))
            return fail(err, S2SHIM_LOOP_INVALID, i, 0, &e);
        if (!strict)
            loop->Normalize();
        if (i > 0 && !built[0]->Contains(*loop))
            return fail(err, S2SHIM_LOOP_NOT_HOLE, i, 0, nullptr);
        all.insert(all.end(), pts.begin(), pts.end());
        built.push_back(std::move(loop));
    }
    auto poly = std::make_unique<S2Polygon>();
    poly->set_s2debug_override(S2Debug::DISABLE);
    poly->InitNested(std::move(built));
    if (poly->FindValidationError(&e))
        return fail(err, S2SHIM_POLYGON_INVALID, 0, 0, &e);
    if (!poly->IsNormalized())
        return fail(err, S2SHIM_NOT_NORMALIZED, 0, 0, nullptr);
    if (poly->num_loops() > 0 && poly->GetLastDescendant(0) < poly->num_loops() - 1)
        return fail(err, S2SHIM_MULTI_EXTERIOR, 0, 0, nullptr);
    for (int i = 0; i < poly->num_loops(); i++) {
        if (poly->loop(i)->depth() > 1)
            return fail(err, S2SHIM_NESTED, 0, 0, nullptr);
    }
    g->vertices.insert(g->vertices.end(), all.begin(), all.end());
    g->index.Add(std::make_unique<S2Polygon::Shape>(poly.get()));
    g->polygons.push_back(std::move(poly));
    return true;
}

extern "C" bool s2shim_geom_intersects(const s2shim_geom_t *a, const s2shim_geom_t *b)
{
    return S2BooleanOperation::Intersects(a->index, b->index);
}

extern "C" bool s2shim_geom_contains(const s2shim_geom_t *region, const s2shim_geom_t *g)
{
    S2BooleanOperation::Options opts;
    opts.set_polygon_model(S2BooleanOperation::PolygonModel::CLOSED);
    opts.set_polyline_model(S2BooleanOperation::PolylineModel::CLOSED);
    return S2BooleanOperation::Contains(region->index, g->index, opts);
}

extern "C" bool s2shim_cap_contains(double lng, double lat, double radians, const s2shim_geom_t *g)
{
    S2Cap cap(to_point(lng, lat), S1Angle::Radians(radians));
    for (const S2Point &p : g->vertices) {
        if (!cap.Contains(p))
            return false;
    }
    return !g->vertices.empty();
}

extern "C" double s2shim_geom_distance(const s2shim_geom_t *g, double lng, double lat)
{
    S2Point target_point = to_point(lng, lat);
    double best = -1;
    for (const S2Point &p : g->points) { // exact angles, as mongod measures points
        double d = S1Angle(target_point, p).radians();
        if (best < 0 || d < best)
            best = d;
    }
    if (g->lines.empty() && g->polygons.empty())
        return best;
    S2ClosestEdgeQuery q(&g->index);
    q.mutable_options()->set_include_interiors(true);
    S2ClosestEdgeQuery::PointTarget target(to_point(lng, lat));
    return q.GetDistance(&target).ToAngle().radians();
}

extern "C" size_t s2shim_geom_cover(const s2shim_geom_t *g, int coarsest_level, int finest_level,
                                    int max_cells, uint64_t *out, size_t cap)
{
    std::vector<S2CellId> cells;
    if (g->lines.empty() && g->polygons.empty()) {
        for (const S2Point &p : g->points)
            cells.push_back(S2CellId(p).parent(finest_level));
        std::sort(cells.begin(), cells.end());
        cells.erase(std::unique(cells.begin(), cells.end()), cells.end());
    } else {
        S2RegionCoverer::Options opts;
        opts.set_min_level(coarsest_level);
        opts.set_max_level(finest_level);
        opts.set_max_cells(max_cells);
        S2RegionCoverer coverer(opts);
        MutableS2ShapeIndex &index = const_cast<MutableS2ShapeIndex &>(g->index);
        S2CellUnion u = coverer.GetCovering(MakeS2ShapeIndexRegion(&index));
        cells = u.cell_ids();
    }
    for (size_t i = 0; i < cells.size() && i < cap; i++)
        out[i] = cells[i].id();
    return cells.size();
}

extern "C" int s2shim_level_for_metres(double metres, double earth_radius)
{
    return S2::kAvgEdge.GetClosestLevel(metres / earth_radius);
}

// The key ranges of a 2dsphere index (cells between the two levels) that
// hold every cell meeting `region`'s covering: each covering cell's
// descendants and its ancestors down to the coarsest level, as mongod's
// ExpressionMapping; sorted and merged.
static size_t cover_ranges(const S2Region &region, int coarsest_level, int finest_level,
                           int max_cells, uint64_t **out)
{
    S2RegionCoverer::Options opts;
    opts.set_min_level(coarsest_level);
    opts.set_max_level(finest_level);
    opts.set_max_cells(max_cells);
    S2RegionCoverer coverer(opts);
    S2CellUnion u = coverer.GetCovering(region);
    std::vector<std::pair<uint64_t, uint64_t>> r;
    for (const S2CellId &c : u.cell_ids()) {
        r.emplace_back(c.range_min().id(), c.range_max().id());
        for (int l = c.level() - 1; l >= coarsest_level; l--) {
            uint64_t a = c.parent(l).id();
            r.emplace_back(a, a);
        }
    }
    std::sort(r.begin(), r.end());
    std::vector<std::pair<uint64_t, uint64_t>> merged;
    for (const auto &p : r) {
        // leaf ids are odd: the id between two adjacent ranges is a common
        // ancestor's, which may join them (a superset: matches are re-checked)
        if (!merged.empty() && p.first <= merged.back().second + 2)
            merged.back().second = std::max(merged.back().second, p.second);
        else
            merged.push_back(p);
    }
    *out = static_cast<uint64_t *>(std::malloc(2 * (merged.size() + 1) * sizeof(uint64_t)));
    for (size_t i = 0; i < merged.size(); i++) {
        (*out)[2 * i] = merged[i].first;
        (*out)[2 * i + 1] = merged[i].second;
    }
    return merged.size();
}

extern "C" size_t s2shim_geom_ranges(const s2shim_geom_t *g, int coarsest_level,
                                     int finest_level, int max_cells, uint64_t **out)
{
    MutableS2ShapeIndex &index = const_cast<MutableS2ShapeIndex &>(g->index);
    return cover_ranges(MakeS2ShapeIndexRegion(&index), coarsest_level, finest_level, max_cells,
                        out);
}

extern "C" size_t s2shim_cap_ranges(double lng, double lat, double radians, int coarsest_level,
                                    int finest_level, int max_cells, uint64_t **out)
{
    S2Cap cap(to_point(lng, lat), S1Angle::Radians(std::min(radians, M_PI)));
    return cover_ranges(cap, coarsest_level, finest_level, max_cells, out);
}
