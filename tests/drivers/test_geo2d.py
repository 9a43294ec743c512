"""Legacy 2d indexes through pymongo, as mongod 7: the index spec (bits, min,
max) and its errors, geohash keys and the errors of documents that are not
legacy pairs, flat $near / $nearSphere / $geoWithin ($box $center $polygon
$centerSphere) planned on the index (explain GEO_NEAR_2D, FETCH over IXSCAN)
with results equal to a full scan over thousands of random points, the
$geoNear stage over a 2d index, and $geoWithin a GeometryCollection."""

import math
import random

import pytest
from bson.son import SON
from pymongo import MongoClient
from pymongo.errors import BulkWriteError, OperationFailure, WriteError

from atomdb_clients import per_test_client

NATURAL = [("$natural", 1)]


client = per_test_client("")


@pytest.fixture
def db(client):
    return client.geo2d


def ids(cur):
    return sorted(d["_id"] for d in cur)


def create(db, coll, spec):
    return db.command(SON([("createIndexes", coll), ("indexes", [spec])]))


def plan_of(db, coll, flt, **kw):
    cmd = SON([("find", coll), ("filter", flt)] + list(kw.items()))
    return db.command("explain", cmd, verbosity="executionStats")


@pytest.fixture
def places(db):
    # the 2d index page's legacy pairs (x, y) and the $near page's point
    t = db.places
    t.insert_many([
        {"_id": 1, "name": "Central Park", "loc": [-73.97, 40.77], "category": "Parks"},
        {"_id": 2, "name": "Sara D. Roosevelt Park", "loc": [-73.9928, 40.7193],
         "category": "Parks"},
        {"_id": 3, "name": "Polo Grounds", "loc": {"lng": -73.9375, "lat": 40.8303},
         "category": "Stadiums"},
        {"_id": 4, "name": "two locations", "loc": [[-73.98, 40.75], [10, 10]]},
        {"_id": 5, "name": "no location"},
        {"_id": 6, "name": "not a location", "loc": "here"},
    ])
    assert t.create_index([("loc", "2d")]) == "loc_2d"
    return t


def test_2d_index_spec_is_listed_as_given(db):
    assert create(db, "a", {"key": {"loc": "2d"}, "name": "loc_2d", "bits": 28, "min": -95,
                            "max": 95})["ok"] == 1
    assert db.a.create_index([("loc", "2d"), ("category", 1)]) == "loc_2d_category_1"
    specs = {i["name"]: dict(i) for i in db.a.list_indexes()}
    assert specs["loc_2d"] == {"v": 2, "key": {"loc": "2d"}, "name": "loc_2d", "bits": 28,
                               "min": -95, "max": 95}, "the spec as given, as mongod"
    assert list(specs["loc_2d_category_1"]["key"].items()) == [("loc", "2d"), ("category", 1)]
    assert "bits" not in specs["loc_2d_category_1"], "defaults are not written into the spec"
    assert create(db, "a", {"key": {"loc": "2d"}, "name": "loc_2d", "bits": 28, "min": -95,
                            "max": 95})["ok"] == 1, "the same index again: nothing to do"
    with pytest.raises(OperationFailure) as e:
        create(db, "a", {"key": {"loc": "2d"}, "name": "loc_2d", "bits": 20, "min": -95,
                         "max": 95})
    assert e.value.code == 85, "another plane under the same name conflicts, as mongod"


@pytest.mark.parametrize("spec,code,msg", [
    ({"key": {"p": "2d"}, "name": "x", "bits": 33}, 72,
     "bits for hash must be > 0 and <= 32, but 33 bits were specified"),
    ({"key": {"p": "2d"}, "name": "x", "bits": 0}, 72,
     "bits for hash must be > 0 and <= 32, but 0 bits were specified"),
    ({"key": {"p": "2d"}, "name": "x", "min": 10, "max": 10}, 72,
     "region for hash must be valid and have positive area, but [10, 10] was specified"),
    ({"key": {"p": "2d"}, "name": "x", "bits": "26"}, 14,
     "The field 'bits' must be a number, but got string"),
    ({"key": {"a": 1, "p": "2d"}, "name": "x"}, 16801, "2d has to be first in index"),
    ({"key": {"p": "2d", "q": "2d"}, "name": "x"}, 16800, "can't have 2 geo fields"),
    ({"key": {"p": "2d", "q": "2dsphere"}, "name": "x"}, 67,
     "Can't use more than one index plugin for a single index."),
    ({"key": {"q": "2dsphere", "p": "2d"}, "name": "x"}, 67,
     "Can't use more than one index plugin for a single index."),
    ({"key": {"p": "2d"}, "name": "x", "collation": {"locale": "fr"}}, 67,
     "Index type '2d' does not support collation"),
    ({"key": {"p": "2d"}, "name": "x", "unique": True}, 238, "unique 2d"),
    ({"key": {"p": 1}, "name": "x", "bits": 20}, 238, "on 2d indexes only"),
])
def test_2d_index_spec_errors_as_mongod(db, spec, code, msg):
    with pytest.raises(OperationFailure) as e:
        create(db, "b", spec)
    assert e.value.code == code, e.value.details
    assert msg in e.value.details["errmsg"]
    assert [i["name"] for i in db.b.list_indexes()] in ([], ["_id_"]), "no index was made"


@pytest.mark.parametrize("loc,code,msg", [
    ([200, 1], 13027, "point not in interval of [ -180, 180 ] :: caused by :: { _id: 9, loc: "
                      "[ 200, 1 ] }"),
    ([1, -180.5], 13027, "point not in interval of [ -180, 180 ]"),
    ([1], 13068, "geo field only has 1 element"),
    ({"x": 1, "y": "a"}, 13026, "geo values must be 'legacy coordinate pairs' for 2d indexes"),
    ({"type": "Point", "coordinates": [1, 2]}, 16804,
     "location object expected, location array not in correct format"),
    ([[1, 2], 5], 16804, "location object expected"),
])
def test_documents_that_are_not_legacy_pairs_are_refused(places, loc, code, msg):
    with pytest.raises(WriteError) as e:
        places.insert_one({"_id": 9, "loc": loc})
    assert e.value.code == code and msg in e.value.details["errmsg"], e.value.details
    assert places.count_documents({}) == 6, "nothing was written"
    with pytest.raises(WriteError) as e:
        places.update_one({"_id": 1}, {"$set": {"loc": loc}})
    assert e.value.code == code
    assert places.find_one({"_id": 1})["loc"] == [-73.97, 40.77], "the update was not applied"


def test_custom_plane_bounds_and_its_edges(db):
    create(db, "c", {"key": {"loc": "2d"}, "name": "loc_2d", "min": -95, "max": 95, "bits": 28})
    with pytest.raises(WriteError) as e:  # the ReactiveMongo driver's own test of this
        db.c.insert_one({"loc": [27.88, 97.21]})
    assert e.value.code == 13027 and "point not in interval of [ -95, 95 ]" in \
        e.value.details["errmsg"]
    db.c.insert_many([{"_id": 1, "loc": [95, 95]}, {"_id": 2, "loc": [-95, -95]},
                      {"_id": 3, "loc": [0, 0]}])
    assert ids(db.c.find({"loc": {"$geoWithin": {"$box": [[90, 90], [95, 95]]}}})) == [1], \
        "max itself is on the plane (mongod keeps it inside its last cell)"
    assert [d["_id"] for d in db.c.find({"loc": {"$near": [94, 94]}})] == [1, 3, 2]


def test_an_index_build_over_a_bad_document_fails_and_leaves_no_index(db):
    db.d.insert_many([{"_id": 1, "loc": [1, 2]}, {"_id": 2, "loc": [500, 2]}])
    with pytest.raises(OperationFailure) as e:
        db.d.create_index([("loc", "2d")])
    assert e.value.code == 13027
    assert [i["name"] for i in db.d.list_indexes()] == ["_id_"]


def test_near_orders_nearest_first_with_max_and_min_distance(places):
    got = [d["_id"] for d in places.find({"loc": {"$near": [-73.9667, 40.78]}})]
    assert got == [1, 4, 3, 2], "nearest first; a document is as near as its nearest location"
    got = [d["_id"] for d in places.find({"loc": {"$near": [-73.9667, 40.78],
                                                  "$maxDistance": 0.05}})]
    assert got == [1, 4], "the $near page's point: $maxDistance in coordinate units"
    got = [d["_id"] for d in places.find({"loc": {"$near": [-73.9667, 40.78],
                                                  "$minDistance": 0.02, "$maxDistance": 0.1}})]
    assert got == [4, 3, 2]
    got = [d["_id"] for d in places.find({"loc": {"$near": [-73.9667, 40.78]}}).skip(1).limit(2)]
    assert got == [4, 3], "skip and limit after the ordering"
    assert [d["_id"] for d in places.find({"loc": {"$near": {"x": 10, "y": 10}}}).limit(1)] == \
        [4], "the point as {x, y}"
    places.insert_one({"_id": 7, "loc": {"home": [20, 20], "work": [-73.9667, 40.7801]}})
    assert [d["_id"] for d in places.find({"loc": {"$near": [-73.9667, 40.78]}}).limit(2)] == \
        [7, 1], "named locations: the nearest of them counts, as mongod's GeoNear2DStage"


def test_near_explain_is_geo_near_2d(db, places):
    plan = plan_of(db, "places", {"loc": {"$near": [0, 0]}}, limit=2)
    wp = plan["queryPlanner"]["winningPlan"]
    assert wp["stage"] == "GEO_NEAR_2D" and wp["keyPattern"] == {"loc": "2d"}
    assert wp["indexName"] == "loc_2d"
    assert plan["executionStats"]["nReturned"] == 2
    plan = plan_of(db, "places", {"loc": {"$geoWithin": {"$box": [[-74, 40.7], [-73.9, 40.8]]}}})
    wp = plan["queryPlanner"]["winningPlan"]
    assert wp["stage"] == "FETCH" and wp["inputStage"]["stage"] == "IXSCAN"
    assert wp["inputStage"]["keyPattern"] == {"loc": "2d"}
    plan = plan_of(db, "places", {"loc": [-73.97, 40.77]})
    assert plan["queryPlanner"]["winningPlan"]["stage"] == "COLLSCAN", \
        "a 2d index holds geohashes: it answers no equality"


def test_near_needs_the_right_index_291(db):
    db.e.insert_one({"loc": [1, 1], "g": {"type": "Point", "coordinates": [1, 1]}})
    for flt in ({"loc": {"$near": [0, 0]}},
                {"loc": {"$nearSphere": [0, 0]}}):
        with pytest.raises(OperationFailure) as e:
            list(db.e.find(flt))
        assert e.value.code == 291 and "unable to find index for $geoNear query" in \
            e.value.details["errmsg"]
    db.e.create_index([("g", "2dsphere")])
    with pytest.raises(OperationFailure) as e:  # a 2dsphere index does not serve flat $near
        list(db.e.find({"g": {"$near": [0, 0]}}))
    assert e.value.code == 291
    db.e.create_index([("loc", "2d")])
    with pytest.raises(OperationFailure) as e:  # nor does a 2d index serve GeoJSON
        list(db.e.find({"loc": {"$near": {"$geometry": {"type": "Point", "coordinates": [0, 0]}}}}))
    assert e.value.code == 291
    assert len(list(db.e.find({"loc": {"$near": [0, 0]}}))) == 1


def test_nearsphere_on_a_2d_index_is_in_radians(db):
    db.s.insert_many([{"_id": i, "loc": [i, 0]} for i in range(5)])
    db.s.create_index([("loc", "2d")])
    deg = math.pi / 180
    got = [d["_id"] for d in db.s.find({"loc": {"$nearSphere": [0, 0], "$maxDistance": 2.5 * deg}})]
    assert got == [0, 1, 2]
    res = list(db.s.aggregate([{"$geoNear": {"near": [0, 0], "distanceField": "d",
                                             "spherical": True}}]))
    assert [round(d["d"] / deg, 9) for d in res] == [0, 1, 2, 3, 4], \
        "one equatorial degree is pi/180 radians"


def test_geowithin_shapes_on_the_index_equal_a_full_scan(places):
    shapes = [
        {"$box": [[-74, 40.7], [-73.95, 40.8]]},
        {"$center": [[-73.97, 40.77], 0.05]},
        {"$polygon": [[-74, 40.7], [-73.9, 40.7], [-73.95, 40.9]]},
        {"$centerSphere": [[-73.97, 40.77], 10 / 3963.2]},  # the page's 10 miles
        {"$box": [[0, 0], [100, 100]]},
    ]
    want = [[1, 2, 4], [1, 4], [1, 2, 3, 4], [1, 2, 3, 4], [4]]
    for shape, w in zip(shapes, want):
        flt = {"loc": {"$geoWithin": shape}}
        assert ids(places.find(flt)) == w, shape
        assert ids(places.find(flt).hint(NATURAL)) == w, shape
        assert ids(places.find(flt).hint("loc_2d")) == w, shape


def test_hint_to_a_2d_index_without_a_geo_predicate_is_refused(places):
    with pytest.raises(OperationFailure) as e:
        list(places.find({"name": "Central Park"}).hint("loc_2d"))
    assert e.value.code == 2 and "hint provided does not correspond" in e.value.details["errmsg"]


def test_updates_and_deletes_keep_the_index(places):
    places.update_one({"_id": 1}, {"$set": {"loc": [50, 50]}})
    assert ids(places.find({"loc": {"$geoWithin": {"$center": [[50, 50], 1]}}})) == [1]
    assert 1 not in ids(places.find({"loc": {"$geoWithin": {"$center": [[-73.97, 40.77], 0.01]}}}))
    places.delete_one({"_id": 1})
    assert ids(places.find({"loc": {"$geoWithin": {"$center": [[50, 50], 1]}}})) == []
    places.update_many({"loc": {"$geoWithin": {"$box": [[-75, 40], [-73, 41]]}}},
                       {"$set": {"seen": True}})
    assert ids(places.find({"seen": True})) == [2, 3, 4]
    places.delete_many({"loc": {"$geoWithin": {"$box": [[-75, 40], [-73, 41]]}}})
    assert ids(places.find({})) == [5, 6]


def test_2d_index_is_rebuilt_on_restart(atomdb):
    from atomdb_testlib import restart, stop_all
    c = MongoClient(atomdb.uri())
    c.geo2d.r.insert_many([{"_id": 1, "loc": [1, 2]}, {"_id": 2, "loc": [3, 4]}])
    create(c.geo2d, "r", {"key": {"loc": "2d"}, "name": "loc_2d", "min": -10, "max": 10})
    c.close()
    server = restart(atomdb)
    try:
        c = MongoClient(server.uri())
        spec = [dict(i) for i in c.geo2d.r.list_indexes() if i["name"] == "loc_2d"]
        assert spec and spec[0]["min"] == -10 and spec[0]["max"] == 10
        with pytest.raises(WriteError) as e:
            c.geo2d.r.insert_one({"_id": 3, "loc": [11, 0]})
        assert e.value.code == 13027, "the rebuilt index keeps its plane"
        assert [d["_id"] for d in c.geo2d.r.find({"loc": {"$near": [4, 4]}})] == [2, 1]
        c.close()
    finally:
        stop_all([server])


# -- $geoNear over a 2d index --

def test_geonear_stage_flat_distances(places):
    res = list(places.aggregate([{"$geoNear": {
        "near": [-73.9667, 40.78], "distanceField": "dist.calculated", "spherical": False,
        "maxDistance": 0.05, "includeLocs": "dist.location", "query": {"category": "Parks"},
        "distanceMultiplier": 100}}]))
    assert [d["_id"] for d in res] == [1]
    assert res[0]["dist"]["location"] == [-73.97, 40.77]
    assert res[0]["dist"]["calculated"] == pytest.approx(
        100 * math.hypot(-73.97 + 73.9667, 40.77 - 40.78), rel=1e-12)
    res = list(places.aggregate([{"$geoNear": {"near": [10, 10], "distanceField": "d",
                                               "includeLocs": "at", "key": "loc"}}]))
    assert res[0]["_id"] == 4 and res[0]["d"] == 0 and res[0]["at"] == [10, 10], \
        "the nearest of a document's locations, and that location"
    assert [d["_id"] for d in res] == [4, 3, 1, 2]
    res = list(places.aggregate([{"$geoNear": {"near": [-73.9667, 40.78], "distanceField": "d",
                                               "minDistance": 0.02}}]))
    assert [d["_id"] for d in res] == [4, 3, 2]


def test_geonear_prefers_the_2d_index_and_needs_key_among_several(db):
    db.n.insert_many([{"_id": 1, "a": [1, 1], "b": [5, 5],
                       "g": {"type": "Point", "coordinates": [1, 1]}}])
    db.n.create_index([("g", "2dsphere")])
    db.n.create_index([("a", "2d")])
    res = list(db.n.aggregate([{"$geoNear": {"near": [0, 0], "distanceField": "d"}}]))
    assert res[0]["d"] == pytest.approx(math.sqrt(2)), "the 2d index's field, flat"
    db.n.create_index([("b", "2d")])
    with pytest.raises(OperationFailure) as e:
        list(db.n.aggregate([{"$geoNear": {"near": [0, 0], "distanceField": "d"}}]))
    assert e.value.code == 27 and "There is more than one 2d index on geo2d.n; unsure which " \
        "to use for $geoNear" == e.value.details["errmsg"]
    res = list(db.n.aggregate([{"$geoNear": {"near": [0, 0], "distanceField": "d", "key": "b"}}]))
    assert res[0]["d"] == pytest.approx(math.sqrt(50))


# -- differential: the index against a full scan --

def random_docs(rng, n):
    docs = []
    for i in range(n):
        x, y = rng.uniform(-180, 180), rng.uniform(-180, 180)
        if i % 3 == 0:  # clustered, to get many near ties and small cells
            x, y = rng.uniform(-1, 1), rng.uniform(-1, 1)
        if i % 17 == 0:
            loc = {"lng": x, "lat": y}
        elif i % 23 == 0:
            loc = [[x, y], [rng.uniform(-180, 180), rng.uniform(-90, 90)]]
        elif i % 29 == 0:
            loc = [round(x), round(y)]
        else:
            loc = [x, y]
        docs.append({"_id": i, "loc": loc, "k": i % 5})
    docs.append({"_id": n, "loc": [180, 180]})
    docs.append({"_id": n + 1, "loc": [-180, -180]})
    docs.append({"_id": n + 2})
    return docs


def random_shape(rng):
    scale = rng.choice([0.01, 0.5, 5, 60])
    cx, cy = rng.uniform(-1, 1) if scale < 1 else rng.uniform(-170, 170), rng.uniform(-85, 85)
    kind = rng.randrange(4)
    if kind == 0:
        return {"$box": [[cx, cy], [cx + rng.uniform(0, scale), cy + rng.uniform(0, scale)]]}
    if kind == 1:
        return {"$center": [[cx, cy], rng.uniform(0, scale)]}
    if kind == 2:
        pts = []
        for j in range(rng.randrange(3, 8)):
            a = 2 * math.pi * j / 8 + rng.uniform(0, 0.5)
            r = rng.uniform(0.2, 1) * scale
            pts.append([cx + r * math.cos(a), cy + r * math.sin(a)])
        return {"$polygon": pts}
    return {"$centerSphere": [[max(min(cx, 180), -180), cy], rng.uniform(0, scale) * math.pi / 180]}


def test_random_shapes_and_nears_equal_a_full_scan(db):
    rng = random.Random(20)
    db.r.insert_many(random_docs(rng, 3000))
    db.r.create_index([("loc", "2d"), ("k", 1)])
    checked = nonempty = 0
    for _ in range(120):
        shape = random_shape(rng)
        flt = {"loc": {"$geoWithin": shape}}
        if rng.random() < 0.3:
            flt["k"] = rng.randrange(5)
        with_index = ids(db.r.find(flt))
        assert with_index == ids(db.r.find(flt).hint(NATURAL)), shape
        checked += 1
        nonempty += bool(with_index)
    assert checked == 120 and nonempty > 20, "the shapes met documents"
    for _ in range(40):
        p = [rng.uniform(-180, 180), rng.uniform(-180, 180)]
        if rng.random() < 0.5:
            p = [rng.uniform(-1, 1), rng.uniform(-1, 1)]
        flt = {"loc": {"$near": p}}
        if rng.random() < 0.5:
            flt["loc"]["$maxDistance"] = rng.choice([0.01, 0.3, 10, 100])
        lim = rng.choice([0, 1, 20, 100])
        a = list(db.r.find(flt).limit(lim))
        b = list(db.r.find(flt).hint(NATURAL).limit(lim))
        dist = lambda d: min(math.hypot(l[0] - p[0], l[1] - p[1]) for l in locations(d["loc"]))
        assert [round(dist(d), 12) for d in a] == [round(dist(d), 12) for d in b], flt
        da = [dist(d) for d in a]
        assert da == sorted(da), "nearest first"
    plan = plan_of(db, "r", {"loc": {"$geoWithin": {"$box": [[0, 0], [0.1, 0.1]]}}})
    assert plan["executionStats"]["totalDocsExamined"] < 100, "the index bounds the read"


def locations(loc):
    if isinstance(loc, dict):
        return [(loc["lng"], loc["lat"])]
    if isinstance(loc[0], list):
        return [tuple(l) for l in loc]
    return [tuple(loc)]


# -- $geoWithin a GeometryCollection (2dsphere) --

GC = {"type": "GeometryCollection", "geometries": [
    {"type": "Point", "coordinates": [50, 50]},
    {"type": "Polygon", "coordinates": [[[0, 0], [10, 0], [10, 10], [0, 10], [0, 0]]]},
    {"type": "MultiPolygon", "coordinates": [[[[20, 20], [30, 20], [30, 30], [20, 30],
                                               [20, 20]]]]}]}


def test_geowithin_a_geometry_collection_as_mongod(db):
    db.gc.insert_many([
        {"_id": 1, "g": {"type": "Point", "coordinates": [5, 5]}},
        {"_id": 2, "g": [25, 25]},
        {"_id": 3, "g": {"type": "Point", "coordinates": [50, 50]}},
        {"_id": 4, "g": {"type": "LineString", "coordinates": [[1, 1], [9, 9]]}},
        {"_id": 5, "g": {"type": "LineString", "coordinates": [[1, 1], [15, 15]]}},
        {"_id": 6, "g": {"type": "Polygon", "coordinates": [[[21, 21], [22, 21], [22, 22],
                                                              [21, 22], [21, 21]]]}},
    ])
    flt = {"g": {"$geoWithin": {"$geometry": GC}}}
    assert ids(db.gc.find(flt)) == [1, 2, 4, 6], \
        "inside a polygon member; the point member holds nothing"
    db.gc.create_index([("g", "2dsphere")])
    assert ids(db.gc.find(flt)) == [1, 2, 4, 6]
    assert plan_of(db, "gc", flt)["queryPlanner"]["winningPlan"]["inputStage"]["stage"] == \
        "IXSCAN"
    with pytest.raises(OperationFailure) as e:
        list(db.gc.find({"g": {"$geoWithin": {"$geometry": {
            "type": "GeometryCollection", "geometries": [
                {"type": "Point", "coordinates": [0, 0]}]}}}}))
    assert e.value.code == 2 and "$within not supported with provided geometry" in \
        e.value.details["errmsg"]


def test_bulk_insert_stops_at_the_bad_point(places):
    with pytest.raises(BulkWriteError) as e:
        places.insert_many([{"_id": 10, "loc": [1, 1]}, {"_id": 11, "loc": [1, 1000]},
                            {"_id": 12, "loc": [2, 2]}])
    assert e.value.details["writeErrors"][0]["code"] == 13027
    assert ids(places.find({"_id": {"$gte": 10}})) == [10]


def test_near_has_no_default_limit_as_mongod_7(db):
    # mongod 2.4 capped a 2d $near at 100 documents; mongod 7 returns all
    db.many.insert_many([{"_id": i, "loc": [i % 30, i // 30]} for i in range(250)])
    db.many.create_index([("loc", "2d")])
    got = [d["_id"] for d in db.many.find({"loc": {"$near": [0, 0]}}, batch_size=50)]
    assert len(got) == 250 and got[0] == 0, "every document, nearest first"
