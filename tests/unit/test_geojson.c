/* test_geojson: GeoJSON and legacy-point parsing/validation (mongod's
 * GeoParser rules and messages) and the $geoWithin/$geoIntersects
 * predicates, driven by cases/geojson.json; legacy 2d index parameters,
 * geohash keys and coverings, driven by cases/geo2d.json. */
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

/* The 2d plane of a case's "spec" (defaults when absent); false with
 * the parse error in `err`. */
static bool case_params(const bson_t *c, geo2d_params_t *p, dberr_t *err)
{
    bson_iter_t it;
    bson_t spec = BSON_INITIALIZER;
    if (bson_iter_init_find(&it, c, "spec") && BSON_ITER_HOLDS_DOCUMENT(&it)) {
        uint32_t len;
        const uint8_t *data;
        bson_iter_document(&it, &len, &data);
        bson_destroy(&spec);
        bson_init_static(&spec, data, len);
    }
    bool ok = geo2d_params_parse(&spec, p, err);
    bson_destroy(&spec);
    return ok;
}

/* True when `got` holds `want_code` and starts with `want`. */
static bool case_error(const bson_t *c, const dberr_t *got, const char *name)
{
    bson_iter_t code, msg;
    bool ok =
        bson_iter_init_find(&code, c, "code") && got->code == bson_iter_as_int64(&code) &&
        bson_iter_init_find(&msg, c, "error") &&
        strncmp(got->msg, bson_iter_utf8(&msg, NULL), strlen(bson_iter_utf8(&msg, NULL))) == 0;
    if (!ok)
        fprintf(stderr, "  %s: got %d \"%s\"\n", name, got->code, got->msg);
    return ok;
}

/* geo2d.json "params": {name, spec, ok | code + error}. */
static int run_2d_params_case(const bson_t *c, const char *name)
{
    geo2d_params_t p;
    dberr_t err;
    bson_iter_t it;
    bool parsed = case_params(c, &p, &err);
    if (bson_iter_init_find(&it, c, "code"))
        return !parsed && case_error(c, &err, name);
    if (!parsed)
        fprintf(stderr, "  %s: refused: %s\n", name, err.msg);
    return parsed;
}

/* geo2d.json "keys": {name, spec, value, keys (how many) | code + error};
 * with "same_as", the keys equal those of that value. */
static int run_2d_keys_case(const bson_t *c, const char *name)
{
    geo2d_params_t p;
    dberr_t err;
    bson_iter_t v, it;
    int64_t keys[16], other[16];
    size_t n = 0, m = 0;
    if (!case_params(c, &p, &err) || !bson_iter_init_find(&v, c, "value"))
        return 0;
    bool ok = geo2d_keys(&p, bson_iter_value(&v), keys, 16, &n, &err);
    if (bson_iter_init_find(&it, c, "code"))
        return !ok && case_error(c, &err, name);
    if (!ok || !bson_iter_init_find(&it, c, "keys") || (int64_t)n != bson_iter_as_int64(&it)) {
        fprintf(stderr, "  %s: %s, %zu keys\n", name, ok ? "accepted" : err.msg, n);
        return 0;
    }
    if (bson_iter_init_find(&it, c, "same_as")) {
        if (!geo2d_keys(&p, bson_iter_value(&it), other, 16, &m, &err) || m != n ||
            memcmp(keys, other, n * sizeof *keys) != 0) {
            fprintf(stderr, "  %s: keys differ from same_as\n", name);
            return 0;
        }
    }
    if (bson_iter_init_find(&it, c, "differs_from")) {
        if (!geo2d_keys(&p, bson_iter_value(&it), other, 16, &m, &err) ||
            (m == n && memcmp(keys, other, n * sizeof *keys) == 0)) {
            fprintf(stderr, "  %s: keys equal differs_from's\n", name);
            return 0;
        }
    }
    return 1;
}

/* geo2d.json "predicates": as geojson.json's, and a match's 2d keys lie in
 * the predicate's 2d ranges (or the 2d index does not bound it: "bounded":
 * false). */
static int run_2d_pred_case(const bson_t *c, const char *name)
{
    geo2d_params_t p;
    dberr_t err;
    if (!case_params(c, &p, &err) || !run_pred_case(c, name))
        return 0;
    bson_iter_t op, arg, v, e, b;
    geo_pred_t *pr;
    if (bson_iter_init_find(&e, c, "error"))
        return 1;
    bson_iter_init_find(&op, c, "op");
    bson_iter_init_find(&arg, c, "arg");
    if (bson_iter_init_find(&e, c, "near")) {
        bson_t ops;
        uint32_t len;
        const uint8_t *data;
        bson_iter_document(&arg, &len, &data);
        bson_init_static(&ops, data, len);
        pr = geo_pred_new_near(bson_iter_utf8(&op, NULL), &ops, &err);
    } else {
        pr = geo_pred_new(bson_iter_utf8(&op, NULL), bson_iter_value(&arg), &err);
    }
    int64_t *ranges = NULL, keys[16];
    size_t n = 0, nk = 0;
    bool want_bounded = !bson_iter_init_find(&b, c, "bounded") || bson_iter_as_bool(&b);
    bool bounded = geo_pred_2d_ranges(pr, &p, -1, &ranges, &n);
    int ok = bounded == want_bounded;
    if (!ok)
        fprintf(stderr, "  %s: bounded by a 2d index: %d\n", name, bounded);
    bson_iter_init_find(&v, c, "value");
    if (ok && bounded && geo_pred_test(pr, bson_iter_value(&v)) &&
        geo2d_keys(&p, bson_iter_value(&v), keys, 16, &nk, &err)) {
        bool found = false;
        for (size_t i = 0; i < nk && i < 16 && !found; i++)
            for (size_t r = 0; r < n && !found; r++)
                found = ranges[2 * r] <= keys[i] && keys[i] <= ranges[2 * r + 1];
        if (!found) {
            fprintf(stderr, "  %s: a match outside the 2d ranges\n", name);
            ok = 0;
        }
    }
    bson_free(ranges);
    geo_pred_destroy(pr);
    return ok;
}

/* Random points and boxes / circles: every match's key lies in the 2d
 * covering's ranges, and the covering stays small. */
static void test_2d_coverings_hold_every_match(void)
{
    geo2d_params_t p;
    dberr_t err;
    bson_t empty = BSON_INITIALIZER;
    CHECK(geo2d_params_parse(&empty, &p, &err), "the default plane parses");
    unsigned seed = 12345;
    int missed = 0, big = 0;
    for (int q = 0; q < 200; q++) {
        seed = seed * 1103515245u + 12345u;
        double cx = (double)(seed % 36000) / 100 - 180;
        seed = seed * 1103515245u + 12345u;
        double cy = (double)(seed % 18000) / 100 - 90;
        seed = seed * 1103515245u + 12345u;
        double r = (double)(seed % 5000) / 100 + 0.001;
        bson_t arg = BSON_INITIALIZER, inner, c, pt;
        if (q % 2) {
            BSON_APPEND_ARRAY_BEGIN(&arg, "$center", &c);
            BSON_APPEND_ARRAY_BEGIN(&c, "0", &pt);
            BSON_APPEND_DOUBLE(&pt, "0", cx);
            BSON_APPEND_DOUBLE(&pt, "1", cy);
            bson_append_array_end(&c, &pt);
            BSON_APPEND_DOUBLE(&c, "1", r);
            bson_append_array_end(&arg, &c);
        } else {
            BSON_APPEND_ARRAY_BEGIN(&arg, "$box", &c);
            BSON_APPEND_ARRAY_BEGIN(&c, "0", &pt);
            BSON_APPEND_DOUBLE(&pt, "0", cx);
            BSON_APPEND_DOUBLE(&pt, "1", cy);
            bson_append_array_end(&c, &pt);
            BSON_APPEND_ARRAY_BEGIN(&c, "1", &inner);
            BSON_APPEND_DOUBLE(&inner, "0", fmin(cx + r, 180));
            BSON_APPEND_DOUBLE(&inner, "1", fmin(cy + r / 2, 90));
            bson_append_array_end(&c, &inner);
            bson_append_array_end(&arg, &c);
        }
        bson_value_t av = {.value_type = BSON_TYPE_DOCUMENT};
        av.value.v_doc.data = (uint8_t *)bson_get_data(&arg);
        av.value.v_doc.data_len = arg.len;
        geo_pred_t *pr = geo_pred_new("$geoWithin", &av, &err);
        int64_t *ranges = NULL;
        size_t n = 0;
        if (!pr || !geo_pred_2d_ranges(pr, &p, -1, &ranges, &n)) {
            missed++;
            bson_destroy(&arg);
            geo_pred_destroy(pr);
            continue;
        }
        if (n > 64)
            big++;
        for (int i = 0; i < 200; i++) {
            seed = seed * 1103515245u + 12345u;
            double x = cx + ((double)(seed % 20000) / 10000 - 1) * r * 1.2;
            seed = seed * 1103515245u + 12345u;
            double y = cy + ((double)(seed % 20000) / 10000 - 1) * r * 1.2;
            if (x < -180 || x > 180 || y < -180 || y > 180)
                continue;
            bson_t doc = BSON_INITIALIZER;
            BSON_APPEND_DOUBLE(&doc, "0", x);
            BSON_APPEND_DOUBLE(&doc, "1", y);
            bson_value_t v = {.value_type = BSON_TYPE_ARRAY};
            v.value.v_doc.data = (uint8_t *)bson_get_data(&doc);
            v.value.v_doc.data_len = doc.len;
            int64_t key;
            size_t nk;
            if (geo_pred_test(pr, &v) && geo2d_keys(&p, &v, &key, 1, &nk, &err)) {
                bool found = false;
                for (size_t k = 0; k < n && !found; k++)
                    found = ranges[2 * k] <= key && key <= ranges[2 * k + 1];
                if (!found)
                    missed++;
            }
            bson_destroy(&doc);
        }
        bson_free(ranges);
        geo_pred_destroy(pr);
        bson_destroy(&arg);
    }
    CHECK(missed == 0, "every match of a random $box / $center has its key in the covering");
    CHECK(big == 0, "a covering has at most 64 ranges");
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
    UNIT_RUN(test_2d_coverings_hold_every_match);
    file = unit_load_json("cases/geo2d.json");
    const char *sections2[] = {"params", "keys", "predicates"};
    int (*runs[])(const bson_t *, const char *) = {run_2d_params_case, run_2d_keys_case,
                                                   run_2d_pred_case};
    n = 0;
    for (int s = 0; s < 3; s++) {
        bson_iter_t it, c;
        if (!bson_iter_init_find(&it, file, sections2[s]) || !bson_iter_recurse(&it, &c))
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
            unit_case(nm, runs[s](&one, nm));
            n++;
        }
    }
    unit_case("geo2d.json holds at least 25 cases", n >= 25);
    bson_destroy(file);
    return unit_finish();
}
