/* test_geojson: GeoJSON and legacy-point parsing/validation (mongod's
 * GeoParser rules and messages) and the $geoWithin/$geoIntersects
 * predicates, driven by cases/geojson.json. */
#include <math.h>
#include <string.h>

#include "geo/geo.h"
#include "unit.h"

/* {name, value, valid | error}: geo_shape_from_stored accepts `value`, or
 * refuses it with a message starting with `error`. */
static int run_shape_case(const bson_t *c, const char *name)
{
    bson_iter_t v, e;
    dberr_t err;
    if (!bson_iter_init_find(&v, c, "value"))
        return 0;
    geo_shape_t *s = geo_shape_from_stored(bson_iter_value(&v), &err);
    int ok;
    if (bson_iter_init_find(&e, c, "error")) {
        const char *want = bson_iter_utf8(&e, NULL);
        ok = !s && err.code == DBERR_BAD_VALUE && strncmp(err.msg, want, strlen(want)) == 0;
        if (!ok)
            fprintf(stderr, "  %s: wanted \"%s\", got %s\n", name, want, s ? "a shape" : err.msg);
    } else {
        ok = s != NULL;
        if (!ok)
            fprintf(stderr, "  %s: refused: %s\n", name, err.msg);
    }
    geo_shape_destroy(s);
    return ok;
}

/* True unless `v` matches `p` while none of its 2dsphere keys lies in the
 * index ranges of `p` (the planner's scan would then miss it). */
static bool pred_ranges_hold(const geo_pred_t *p, const bson_value_t *v, const char *name)
{
    int64_t *ranges = NULL, cells[64];
    size_t n = 0, ncells = 0;
    dberr_t err;
    if (!geo_pred_test(p, v) || !geo_index_cells(v, cells, 64, &ncells, &err))
        return true; /* not a match, or not a geometry a 2dsphere index takes */
    if (!geo_pred_index_ranges(p, -1, &ranges, &n))
        return true; /* a region the index does not bound: a full scan */
    bool found = false;
    for (size_t i = 0; i < ncells && i < 64 && !found; i++)
        for (size_t r = 0; r < n && !found; r++)
            found = ranges[2 * r] <= cells[i] && cells[i] <= ranges[2 * r + 1];
    bson_free(ranges);
    if (!found)
        fprintf(stderr, "  %s: a match outside the index ranges\n", name);
    return found;
}

/* {name, op, arg, value, match | error}: geo_pred_new(op, arg) then
 * geo_pred_test(value), or the compile error's message prefix; a match's
 * index keys lie in the predicate's index ranges. */
static int run_pred_case(const bson_t *c, const char *name)
{
    bson_iter_t op, arg, v, m, e, dist;
    dberr_t err;
    geo_pred_t *p;
    if (!bson_iter_init_find(&op, c, "op") || !bson_iter_init_find(&arg, c, "arg"))
        return 0;
    if (bson_iter_init_find(&e, c, "near")) { /* arg: the whole operator document */
        bson_t ops;
        uint32_t len;
        const uint8_t *data;
        bson_iter_document(&arg, &len, &data);
        bson_init_static(&ops, data, len);
        p = geo_pred_new_near(bson_iter_utf8(&op, NULL), &ops, &err);
    } else {
        p = geo_pred_new(bson_iter_utf8(&op, NULL), bson_iter_value(&arg), &err);
    }
    int ok;
    if (bson_iter_init_find(&e, c, "error")) {
        const char *want = bson_iter_utf8(&e, NULL);
        ok = !p && strncmp(err.msg, want, strlen(want)) == 0;
        if (!ok)
            fprintf(stderr, "  %s: wanted \"%s\", got %s\n", name, want,
                    p ? "a predicate" : err.msg);
    } else if (!p) {
        fprintf(stderr, "  %s: refused: %s\n", name, err.msg);
        ok = 0;
    } else {
        ok = bson_iter_init_find(&v, c, "value") && bson_iter_init_find(&m, c, "match") &&
             geo_pred_test(p, bson_iter_value(&v)) == bson_iter_bool(&m) &&
             pred_ranges_hold(p, bson_iter_value(&v), name);
        if (ok && bson_iter_init_find(&dist, c, "distance")) { /* within 1e-9 relative */
            double want = bson_iter_as_double(&dist),
                   got = geo_pred_distance(p, bson_iter_value(&v));
            ok = fabs(got - want) <= 1e-9 * (want > 1 ? want : 1);
            if (!ok)
                fprintf(stderr, "  %s: distance %.17g, wanted %.17g\n", name, got, want);
        }
    }
    geo_pred_destroy(p);
    return ok;
}

static void test_earth_radius_is_mongods(void)
{
    CHECK(GEO_EARTH_RADIUS_M == 6378100.0, "kRadiusOfEarthInMeters is 6378100");
}

int main(void)
{
    UNIT_RUN(test_earth_radius_is_mongods);
    bson_t *file = unit_load_json("cases/geojson.json");
    const char *sections[] = {"shapes", "predicates"};
    int n = 0;
    for (int s = 0; s < 2; s++) {
        bson_iter_t it, c;
        if (!bson_iter_init_find(&it, file, sections[s]) || !bson_iter_recurse(&it, &c))
            continue;
        while (bson_iter_next(&c)) {
            bson_t one;
            uint32_t len;
            const uint8_t *data;
            bson_iter_t name;
            bson_iter_document(&c, &len, &data);
            bson_init_static(&one, data, len);
            const char *nm = bson_iter_init_find(&name, &one, "name") ? bson_iter_utf8(&name, NULL)
                                                                      : "(unnamed)";
            unit_case(nm, s == 0 ? run_shape_case(&one, nm) : run_pred_case(&one, nm));
            n++;
        }
    }
    unit_case("geojson.json holds at least 40 cases", n >= 40);
    bson_destroy(file);
    return unit_finish();
}
