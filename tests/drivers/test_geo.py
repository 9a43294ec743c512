"""Geospatial queries through pymongo: $geoWithin ($geometry, $centerSphere,
$box, $center, $polygon) and $geoIntersects by full scan, as mongod permits
without an index, on MongoDB's documentation examples; GeoJSON validation
errors as mongod's; what needs a geo index ($near, $nearSphere, $geoNear,
2dsphere indexes) refused with mongod's code or a clear error; 2d indexes
are test_geo2d.py's."""

import pytest
from bson.son import SON
from pymongo import MongoClient
from pymongo.errors import OperationFailure

from atomdb_clients import per_test_client

MILES = 3963.2  # the documentation's earth radius in miles for $centerSphere


client = per_test_client("")


@pytest.fixture
def db(client):
    return client.geo


# The $geoNear documentation page's `places` collection.
GEONEAR_PLACES = [
    {"_id": 1, "name": "Central Park", "category": "Parks",
     "location": {"type": "Point", "coordinates": [-73.97, 40.77]}},
    {"_id": 2, "name": "Sara D. Roosevelt Park", "category": "Parks",
     "location": {"type": "Point", "coordinates": [-73.9928, 40.7193]}},
    {"_id": 3, "name": "Polo Grounds", "category": "Stadiums",
     "location": {"type": "Point", "coordinates": [-73.9375, 40.8303]}},
]


def ids(cur):
    return sorted(d["_id"] for d in cur)


@pytest.fixture
def places(db):
    # the $geoNear page's `places`, plus legacy pairs and non-point shapes
    t = db.places
    t.insert_many(GEONEAR_PLACES + [
        {"_id": 4, "name": "legacy pair", "location": [-73.97, 40.77]},
        {"_id": 5, "name": "a street", "location": {
            "type": "LineString", "coordinates": [[-74.0, 40.70], [-73.90, 40.80]]}},
        {"_id": 6, "name": "no location"},
        {"_id": 7, "name": "not a geometry", "location": "here"},
    ])
    return t


# Lower Manhattan up to 40.79 N: holds Central Park and Sara D. Roosevelt Park
MANHATTAN = {"type": "Polygon", "coordinates": [[
    [-74.02, 40.70], [-73.95, 40.70], [-73.95, 40.79], [-74.02, 40.79], [-74.02, 40.70]]]}


def test_geowithin_polygon_holds_points_and_legacy_pairs(places):
    got = ids(places.find({"location": {"$geoWithin": {"$geometry": MANHATTAN}}}))
    assert got == [1, 2, 4], "points (GeoJSON and legacy) inside; the street leaves it"
    assert ids(places.find({"location": {"$within": {"$geometry": MANHATTAN}}})) == [1, 2, 4], \
        "$within is the deprecated spelling of $geoWithin"


def test_geointersects_polygon_meets_points_and_crossing_line(places):
    got = ids(places.find({"location": {"$geoIntersects": {"$geometry": MANHATTAN}}}))
    assert got == [1, 2, 4, 5], "the street crosses the polygon"
    far = {"type": "Polygon", "coordinates": [[[0, 0], [3, 6], [6, 1], [0, 0]]]}
    assert ids(places.find({"location": {"$geoIntersects": {"$geometry": far}}})) == []


def test_geointersects_with_a_point_finds_the_neighborhood_holding_it(db):
    # the tutorial: which neighborhood is the user in?
    n = db.neighborhoods
    n.insert_many([
        {"_id": 1, "name": "West", "geometry": {"type": "Polygon", "coordinates": [[
            [-74.0, 40.80], [-73.94, 40.80], [-73.94, 40.84], [-74.0, 40.84], [-74.0, 40.80]]]}},
        {"_id": 2, "name": "East", "geometry": {"type": "Polygon", "coordinates": [[
            [-73.94, 40.80], [-73.90, 40.80], [-73.90, 40.84], [-73.94, 40.84], [-73.94, 40.80]]]}},
    ])
    user = {"type": "Point", "coordinates": [-73.93414657, 40.82302903]}
    got = list(n.find({"geometry": {"$geoIntersects": {"$geometry": user}}}))
    assert [d["name"] for d in got] == ["East"]


def test_centersphere_selects_within_miles(places):
    # Central Park to Polo Grounds is about 4.5 miles, to Sara D. Roosevelt Park about 3.9
    near = {"$centerSphere": [[-73.97, 40.77], 1 / MILES]}
    assert ids(places.find({"location": {"$geoWithin": near}})) == [1, 4]
    wide = {"$centerSphere": [[-73.97, 40.77], 4.2 / MILES]}
    assert ids(places.find({"location": {"$geoWithin": wide}})) == [1, 2, 4]
    wider = {"$centerSphere": [[-73.97, 40.77], 5.5 / MILES]}  # the street ends 5.1 miles away
    assert ids(places.find({"location": {"$geoWithin": wider}})) == [1, 2, 3, 4, 5]


def test_centersphere_documentation_example(db):
    # $centerSphere page: within 10 miles of (-88, 30)
    t = db.docs_cs
    t.insert_many([{"_id": 1, "loc": [-88, 30]}, {"_id": 2, "loc": [-88.1, 30.1]},
                   {"_id": 3, "loc": [-88, 30.2]}, {"_id": 4, "loc": [-87, 30]}])
    got = ids(t.find({"loc": {"$geoWithin": {"$centerSphere": [[-88, 30], 10 / MILES]}}}))
    assert got == [1, 2], "13.8 miles (0.2 degrees of latitude) is outside, 6.6 miles inside"


def test_legacy_flat_shapes(db):
    t = db.legacy
    t.insert_many([{"_id": 1, "loc": [1, 1]}, {"_id": 2, "loc": [50, 50]},
                   {"_id": 3, "loc": [150, 50]}, {"_id": 4, "loc": {"x": 2, "y": 1}},
                   {"_id": 5, "loc": [-70, 45]}, {"_id": 6, "loc": [-60, 45]},
                   {"_id": 7, "loc": {"type": "Point", "coordinates": [3, 2]}}])
    assert ids(t.find({"loc": {"$geoWithin": {"$box": [[0, 0], [100, 100]]}}})) == [1, 2, 4, 7]
    assert ids(t.find({"loc": {"$geoWithin": {"$center": [[-74, 40.74], 10]}}})) == [5]
    assert ids(t.find({"loc": {"$geoWithin": {"$polygon": [[0, 0], [3, 6], [6, 0]]}}})) == [1, 4, 7]


def test_geo_operators_in_count_and_elemmatch(places, db):
    assert places.count_documents({"location": {"$geoWithin": {"$geometry": MANHATTAN}}}) == 3
    t = db.multi
    t.insert_many([{"_id": 1, "stops": [[1, 1], [50, 50]]}, {"_id": 2, "stops": [[150, 50]]}])
    q = {"stops": {"$geoWithin": {"$box": [[40, 40], [60, 60]]}}}
    assert ids(t.find(q)) == [1], "an array of legacy pairs matches through any element"


@pytest.mark.parametrize("geometry,msg", [
    ({"type": "Polygon", "coordinates": [[[0, 0], [1, 1], [0, 1]]]},
     "Loop is not closed, first vertex does not equal last vertex: [ [ 0, 0 ], [ 1, 1 ], [ 0, 1 ] ]"),
    ({"type": "Polygon", "coordinates": [[[0, 0], [1, 1], [0, 1], [1, 0], [0, 0]]]},
     "Loop is not valid: [ [ 0, 0 ], [ 1, 1 ], [ 0, 1 ], [ 1, 0 ], [ 0, 0 ] ] "),
    ({"type": "Polygon", "coordinates": [[[0, 0], [10, 0], [10, 10], [0, 10], [0, 0]],
                                         [[20, 20], [21, 20], [21, 21], [20, 20]]]},
     "Secondary loops not contained by first exterior loop - secondary loops must be holes"),
    ({"type": "Point", "coordinates": [181, 0]},
     "Longitude/latitude is out of bounds, lng: 181 lat: 0"),
    ({"type": "LineString", "coordinates": [[1, 1]]},
     "GeoJSON LineString must have at least 2 vertices, instead got 1 vertices"),
    ({"type": "Triangle", "coordinates": [1, 2]}, "unknown GeoJSON type: "),
])
def test_invalid_query_geometry_is_bad_value(places, geometry, msg):
    with pytest.raises(OperationFailure) as e:
        list(places.find({"location": {"$geoIntersects": {"$geometry": geometry}}}))
    assert e.value.code == 2 and e.value.details["codeName"] == "BadValue"
    assert e.value.details["errmsg"].startswith(msg), e.value.details["errmsg"]


def test_bad_geo_operator_arguments(places):
    cases = [
        ({"$geoWithin": {"$geometry": {"type": "Point", "coordinates": [1, 2]}}},
         "$within not supported with provided geometry: "),
        ({"$geoIntersects": {"$box": [[0, 0], [1, 1]]}}, "$geoIntersect not supported"),
        ({"$geoWithin": {"$circle": [[0, 0], 1]}}, "unknown geo specifier: $circle: [ [ 0, 0 ], 1 ]"),
        ({"$geoWithin": {}}, "geo query doesn't have any geometry"),
        ({"$geoWithin": {"$centerSphere": [[0, 0], -1]}}, "Radius must be a non-negative number"),
    ]
    for op, msg in cases:
        with pytest.raises(OperationFailure) as e:
            list(places.find({"location": op}))
        assert e.value.code == 2, op
        assert e.value.details["errmsg"].startswith(msg), e.value.details["errmsg"]


def test_near_without_a_geo_index_is_291_as_mongod(places, db):
    places.create_index([("other", 1)])
    for op in ("$near", "$nearSphere"):
        with pytest.raises(OperationFailure) as e:
            list(places.find({"location": {op: {"$geometry": {
                "type": "Point", "coordinates": [-73.97, 40.77]}, "$maxDistance": 1000}}}))
        assert e.value.code == 291 and e.value.details["codeName"] == "NoQueryExecutionPlans"
        assert "unable to find index for $geoNear query" in e.value.details["errmsg"]


def test_2dsphere_index_spec_and_listindexes_as_mongod(places, db):
    places.delete_one({"_id": 7})  # not a geometry: the build would refuse it (16755)
    assert places.create_index([("location", "2dsphere")]) == "location_2dsphere"
    assert places.create_index([("location", "2dsphere"), ("category", 1)]) == \
        "location_2dsphere_category_1"
    specs = {i["name"]: i for i in places.list_indexes()}
    assert dict(specs["location_2dsphere"]) == {
        "v": 2, "key": {"location": "2dsphere"}, "name": "location_2dsphere",
        "2dsphereIndexVersion": 3}, "mongod adds the version it built"
    assert list(specs["location_2dsphere_category_1"]["key"].items()) == \
        [("location", "2dsphere"), ("category", 1)]
    # the queries still answer (by full scan) with the index present
    assert ids(places.find({"location": {"$geoWithin": {"$geometry": MANHATTAN}}})) == [1, 2, 4]
    with pytest.raises(OperationFailure) as e:
        db.command(SON([("createIndexes", "places"), ("indexes", [
            {"key": {"x": "2dsphere"}, "name": "x", "2dsphereIndexVersion": 1}])]))
    assert e.value.code == 238


def test_2dsphere_index_refuses_what_is_not_a_geometry_16755(places, db):
    # the fixture's "not a geometry" string is already there: the build fails as mongod's
    with pytest.raises(OperationFailure) as e:
        places.create_index([("location", "2dsphere")])
    assert "Can't extract geo keys" in str(e.value)
    assert [i["name"] for i in places.list_indexes()] == ["_id_"], "no index was left behind"
    places.delete_one({"_id": 7})
    places.create_index([("location", "2dsphere")])
    bad = [
        ({"_id": 10, "location": {"type": "Point", "coordinates": [200, 1]}},
         "Longitude/latitude is out of bounds, lng: 200 lat: 1"),
        ({"_id": 11, "location": {"type": "Polygon", "coordinates": [[[0, 0], [1, 1], [0, 1]]]}},
         "Loop is not closed"),
        ({"_id": 12, "location": [1, "a"]}, "Point must only contain numeric elements"),
    ]
    for doc, why in bad:
        with pytest.raises(OperationFailure) as e:
            places.insert_one(doc)
        assert e.value.code == 16755
        assert e.value.details["errmsg"].startswith("Can't extract geo keys: { _id: %d" % doc["_id"])
        assert why in e.value.details["errmsg"]
    with pytest.raises(OperationFailure) as e:
        places.update_one({"_id": 1}, {"$set": {"location": "x"}})
    assert e.value.code == 16755
    assert places.find_one({"_id": 1})["location"]["coordinates"] == [-73.97, 40.77], \
        "nothing was written"
    assert places.count_documents({}) == 6
    # documents without the field are not indexed, and are accepted
    places.insert_one({"_id": 13, "name": "still no location"})
    places.insert_one({"_id": 14, "location": None})


def test_2dsphere_index_is_rebuilt_on_restart(atomdb):
    from atomdb_testlib import restart, stop_all
    c = MongoClient(atomdb.uri())
    c.geo.r.insert_one({"_id": 1, "loc": {"type": "Point", "coordinates": [1, 2]}})
    c.geo.r.create_index([("loc", "2dsphere")])
    c.close()
    server = restart(atomdb)
    try:
        c = MongoClient(server.uri())
        assert "loc_2dsphere" in [i["name"] for i in c.geo.r.list_indexes()]
        with pytest.raises(OperationFailure) as e:
            c.geo.r.insert_one({"_id": 2, "loc": {"type": "Point", "coordinates": [1, 95]}})
        assert e.value.code == 16755, "the rebuilt index still validates"
        c.close()
    finally:
        stop_all([server])


NEAR_DOCS = {"type": "Point", "coordinates": [-73.9667, 40.78]}  # the $near page's point


def test_near_orders_by_distance_with_min_and_max_in_metres(places):
    places.delete_one({"_id": 7})
    places.create_index([("location", "2dsphere")])
    # the $near page: between 1000 and 5000 metres of (-73.9667, 40.78)
    q = {"location": {"$near": {"$geometry": NEAR_DOCS,
                                "$minDistance": 1000, "$maxDistance": 5000}}}
    assert [d["name"] for d in places.find(q)] == ["Central Park", "legacy pair", "a street"], \
        "Central Park 1.1 km away (its legacy twin in insertion order), the street 3.6 km"
    everything = list(places.find({"location": {"$near": {"$geometry": NEAR_DOCS}}}))
    assert [d["_id"] for d in everything] == [1, 4, 5, 3, 2], \
        "then Polo Grounds (6.1 km) and Sara D. Roosevelt Park (7.1 km)"
    nearest = places.find({"location": {"$nearSphere": {"$geometry": NEAR_DOCS}}}).limit(2)
    assert [d["_id"] for d in nearest] == [1, 4]
    page = places.find({"location": {"$nearSphere": {"$geometry": NEAR_DOCS}}}).skip(3).limit(1)
    assert [d["_id"] for d in page] == [3], "skip and limit apply after the ordering"
    parks = places.find({"category": "Parks",
                         "location": {"$near": {"$geometry": NEAR_DOCS}}})
    assert [d["name"] for d in parks] == ["Central Park", "Sara D. Roosevelt Park"]


def test_legacy_nearsphere_measures_radians(places):
    places.delete_one({"_id": 7})
    places.create_index([("location", "2dsphere")])
    q = {"location": {"$nearSphere": [-73.99279, 40.719296], "$maxDistance": 0.0015}}
    got = [d["_id"] for d in places.find(q)]
    assert got == [2, 5, 1, 4], "within 9.6 km; Polo Grounds (13 km) is not"


def test_near_must_be_top_level(places):
    places.delete_one({"_id": 7})
    places.create_index([("location", "2dsphere")])
    with pytest.raises(OperationFailure) as e:
        list(places.find({"$or": [{"location": {"$near": {"$geometry": NEAR_DOCS}}},
                                  {"name": "x"}]}))
    assert e.value.code == 2 and "geoNear must be top-level expr" in e.value.details["errmsg"]


def test_what_the_geo_index_does_not_serve_yet_is_refused_clearly(places, db):
    places.delete_one({"_id": 7})
    places.create_index([("location", "2dsphere")])
    with pytest.raises(OperationFailure) as e:
        list(places.find({"location": {"$nearSphere": [-73.97, 40.77]}}).sort("name", 1))
    assert e.value.code == 238 and "$near" in e.value.details["errmsg"]
    with pytest.raises(OperationFailure) as e:  # no geo predicate bounds it: as mongod
        list(places.find({"name": "a street"}).hint("location_2dsphere"))
    assert e.value.code == 2 and "hint provided does not correspond" in e.value.details["errmsg"]
    with pytest.raises(OperationFailure) as e:  # flat regions are not on the sphere's cells
        list(places.find({"location": {"$geoWithin": {"$box": [[0, 0], [1, 1]]}}})
             .hint("location_2dsphere"))
    assert e.value.code == 2
    with pytest.raises(OperationFailure) as e:
        db.command(SON([("createIndexes", "places"),
                        ("indexes", [{"key": {"location": "2d"}, "name": "g"}])]))
    # a 2d index takes legacy pairs only: GeoJSON documents fail its build, as mongod's
    assert e.value.code == 16804 and "location object expected" in e.value.details["errmsg"]
    with pytest.raises(OperationFailure) as e:
        list(places.aggregate([{"$geoNear": {"near": [-73.97, 40.77], "distanceField": "d"}}]))
    assert e.value.code == 291 and "unable to find index" in e.value.details["errmsg"], \
        "a flat legacy $geoNear needs a 2d index (test_geo2d.py has them)"
    assert places.count_documents({}) == 6, "nothing was written"


GEONEAR_POINT = {"type": "Point", "coordinates": [-73.99279, 40.719296]}  # the $geoNear page


def test_geonear_documentation_examples(places):
    places.delete_one({"_id": 7})
    with pytest.raises(OperationFailure) as e:
        list(places.aggregate([{"$geoNear": {"near": GEONEAR_POINT, "distanceField": "d"}}]))
    assert e.value.code == 27
    assert e.value.details["errmsg"] == \
        "$geoNear requires a 2d or 2dsphere index, but none were found"
    places.create_index([("location", "2dsphere")])
    # "Maximum Distance": parks within 2 metres, with dist.calculated and dist.location
    got = list(places.aggregate([{"$geoNear": {
        "near": GEONEAR_POINT, "distanceField": "dist.calculated", "maxDistance": 2,
        "query": {"category": "Parks"}, "includeLocs": "dist.location", "spherical": True}}]))
    assert [d["name"] for d in got] == ["Sara D. Roosevelt Park"]
    assert got[0]["dist"]["calculated"] == pytest.approx(0.9539931676365992, rel=1e-12), \
        "the documentation's distance"
    assert got[0]["dist"]["location"] == {"type": "Point", "coordinates": [-73.9928, 40.7193]}
    # "Minimum Distance": parks at least 2 metres away
    got = list(places.aggregate([{"$geoNear": {
        "near": GEONEAR_POINT, "distanceField": "dist.calculated", "minDistance": 2,
        "query": {"category": "Parks"}, "includeLocs": "dist.location", "spherical": True}}]))
    assert [d["name"] for d in got] == ["Central Park"]
    assert got[0]["dist"]["calculated"] == pytest.approx(5962.6, abs=0.1)


def test_geonear_orders_everything_with_multiplier_and_key(places):
    places.delete_one({"_id": 7})
    places.create_index([("location", "2dsphere")])
    # legacy point, spherical: radians; times 6378.1 gives kilometres
    got = list(places.aggregate([
        {"$geoNear": {"near": [-73.99279, 40.719296], "distanceField": "km", "spherical": True,
                      "distanceMultiplier": 6378.1, "key": "location"}},
        {"$project": {"km": 1}}]))
    assert [d["_id"] for d in got] == [2, 5, 1, 4, 3], "nearest first; the street passes nearer than Central Park"
    assert got[2]["km"] == pytest.approx(5.9626, abs=1e-3)
    assert all(a["km"] <= b["km"] for a, b in zip(got, got[1:]))


def test_geonear_errors(places, db):
    places.delete_one({"_id": 7})
    places.create_index([("location", "2dsphere")])
    cases = [
        ([{"$match": {}}, {"$geoNear": {"near": GEONEAR_POINT, "distanceField": "d"}}], 40602),
        ([{"$geoNear": {"near": GEONEAR_POINT, "distanceField": "d", "key": "other"}}], 291),
        ([{"$geoNear": {"near": GEONEAR_POINT, "distanceField": "d", "foo": 1}}], 2),
        ([{"$geoNear": {"near": GEONEAR_POINT}}], 2),
        ([{"$geoNear": {"near": GEONEAR_POINT, "distanceField": "d", "maxDistance": -1}}], 2),
        ([{"$geoNear": {"near": {"type": "Point", "coordinates": [500, 0]},
                        "distanceField": "d"}}], 2),
    ]
    for pipeline, code in cases:
        with pytest.raises(OperationFailure) as e:
            list(places.aggregate(pipeline))
        assert e.value.code == code, (pipeline, e.value.details)
    places.create_index([("location", "2dsphere"), ("category", 1)])
    with pytest.raises(OperationFailure) as e:
        list(places.aggregate([{"$geoNear": {"near": GEONEAR_POINT, "distanceField": "d"}}]))
    assert e.value.code == 27 and "more than one 2dsphere index" in e.value.details["errmsg"]
    got = list(places.aggregate([{"$geoNear": {"near": GEONEAR_POINT, "distanceField": "d",
                                               "key": "location"}}]))
    assert len(got) == 5, "naming the key picks one"


# -- the planner on a 2dsphere index: same documents as a full scan --------

def _random_docs(n_points=2500, n_shapes=500, seed=20):
    import random
    rnd = random.Random(seed)
    docs = []
    for i in range(n_points):
        if i % 10 == 0:  # some spread over the whole sphere
            lng, lat = rnd.uniform(-180, 180), rnd.uniform(-89, 89)
        else:  # most around western Europe
            lng, lat = rnd.uniform(-10, 20), rnd.uniform(35, 60)
        loc = {"type": "Point", "coordinates": [lng, lat]} if i % 3 else [lng, lat]
        docs.append({"_id": i, "loc": loc, "k": i % 7})
    for j in range(n_shapes):
        lng, lat = rnd.uniform(-10, 20), rnd.uniform(35, 60)
        d = rnd.uniform(0.01, 1.5)
        if j % 2:
            loc = {"type": "Polygon", "coordinates": [[
                [lng, lat], [lng + d, lat], [lng + d, lat + d], [lng, lat + d], [lng, lat]]]}
        else:
            loc = {"type": "LineString", "coordinates": [[lng, lat], [lng + d, lat + d / 2]]}
        docs.append({"_id": n_points + j, "loc": loc, "k": j % 7})
    docs.append({"_id": -1, "k": 0})  # no geometry: never in the index
    return docs


def _box(lng, lat, w, h):
    return {"type": "Polygon", "coordinates": [[
        [lng, lat], [lng + w, lat], [lng + w, lat + h], [lng, lat + h], [lng, lat]]]}


REGION_QUERIES = [
    {"loc": {"$geoWithin": {"$geometry": _box(0, 45, 2, 2)}}},
    {"loc": {"$geoWithin": {"$geometry": _box(-9.5, 36, 25, 20)}}},
    {"loc": {"$geoWithin": {"$geometry": {"type": "Polygon", "coordinates": [
        [[-5, 40], [10, 40], [10, 55], [-5, 55], [-5, 40]],
        [[0, 45], [5, 45], [5, 50], [0, 50], [0, 45]]]}}}},  # with a hole
    {"loc": {"$geoWithin": {"$centerSphere": [[2.35, 48.85], 300 / 6378.1]}}},
    {"loc": {"$geoWithin": {"$centerSphere": [[100, 0], 0.5]}}},
    {"loc": {"$geoIntersects": {"$geometry": _box(5, 50, 0.7, 0.5)}}},
    {"loc": {"$geoIntersects": {"$geometry": {
        "type": "LineString", "coordinates": [[-8, 38], [18, 58]]}}}},
    {"loc": {"$geoIntersects": {"$geometry": {
        "type": "MultiPolygon", "coordinates": [_box(1, 41, 1, 1)["coordinates"],
                                                _box(12, 52, 3, 1)["coordinates"]]}}}},
    {"loc": {"$geoWithin": {"$geometry": _box(-1, 44, 6, 6)}}, "k": {"$in": [1, 2]}},
]

NEAR_POINT = {"type": "Point", "coordinates": [4.9, 52.37]}


def _near_queries():
    return [
        ({"loc": {"$near": {"$geometry": NEAR_POINT, "$maxDistance": 150000}}}, 0),
        ({"loc": {"$nearSphere": {"$geometry": NEAR_POINT, "$minDistance": 50000,
                                  "$maxDistance": 400000}}}, 0),
        ({"loc": {"$near": {"$geometry": NEAR_POINT}}}, 20),
        ({"loc": {"$near": {"$geometry": {"type": "Point", "coordinates": [-170, -60]}}}}, 5),
        ({"loc": {"$nearSphere": [4.9, 52.37], "$maxDistance": 0.02}}, 0),
        ({"loc": {"$nearSphere": [4.9, 52.37]}, "k": 3}, 25),
    ]


@pytest.fixture
def geo_pair(db):
    """The same random documents in an indexed and an unindexed collection."""
    docs = _random_docs()
    db.plain.insert_many(docs)
    db.indexed.create_index([("loc", "2dsphere")])
    db.indexed.insert_many(docs)
    return db.plain, db.indexed


def _same_results(plain, indexed, nonempty=True):
    for q in REGION_QUERIES:
        want = ids(plain.find(q))
        assert want or not nonempty, q
        assert ids(indexed.find(q)) == want, q
        assert ids(indexed.find(q).hint("loc_2dsphere")) == want, q
        assert ids(indexed.find(q).hint([("loc", "2dsphere")])) == want, q
    for q, limit in _near_queries():
        full = [d["_id"] for d in indexed.find(q).hint([("$natural", 1)])]  # a full scan
        want = full[:limit] if limit else full
        got = [d["_id"] for d in indexed.find(q).limit(limit)]
        assert want and got == want, q
        assert [d["_id"] for d in indexed.find(q).skip(3).limit(limit)] == \
            (full[3:3 + limit] if limit else full[3:]), q


def test_2dsphere_index_gives_the_full_scans_documents(geo_pair):
    plain, indexed = geo_pair
    _same_results(plain, indexed)


def test_2dsphere_index_kept_right_through_updates_and_deletes(geo_pair):
    plain, indexed = geo_pair
    for t in (plain, indexed):
        t.update_many({"_id": {"$lt": 600, "$mod": [4, 0]}},
                      {"$set": {"loc": {"type": "Point", "coordinates": [1.0, 46.0]}}})
        t.update_many({"_id": {"$gte": 2500, "$lt": 2700}}, [{"$set": {"loc": "$$REMOVE"}}])
        t.delete_many({"_id": {"$mod": [5, 1]}})
        t.insert_one({"_id": 9000, "loc": {"type": "Point", "coordinates": [4.91, 52.36]}})
        t.replace_one({"_id": 3}, {"loc": [4.9, 52.37]})
        # writes whose filter is geospatial (planned on the index where there is one)
        t.update_many({"loc": {"$geoWithin": {"$geometry": _box(0, 45, 2, 2)}}},
                      {"$set": {"k": 99}})
        t.delete_many({"loc": {"$geoIntersects": {"$geometry": _box(10, 50, 1, 1)}}})
    assert indexed.count_documents({"k": 99}) == plain.count_documents({"k": 99}) > 0
    assert ids(indexed.find({})) == ids(plain.find({}))
    _same_results(plain, indexed, nonempty=False)
    q = {"loc": {"$near": {"$geometry": NEAR_POINT}}}
    assert [d["_id"] for d in indexed.find(q).limit(2)] == [3, 9000]
    assert indexed.count_documents({"loc": {"$geoWithin": {"$geometry": _box(0.9, 45.9, .2, .2)}}}) \
        == plain.count_documents({"loc": {"$geoWithin": {"$geometry": _box(0.9, 45.9, .2, .2)}}}) > 50


def test_geonear_on_the_index_matches_the_full_scan(geo_pair):
    plain, indexed = geo_pair
    stage = {"$geoNear": {"near": NEAR_POINT, "distanceField": "d", "maxDistance": 200000,
                          "query": {"k": {"$ne": 2}}}}
    got = list(indexed.aggregate([stage, {"$limit": 50}]))
    assert len(got) == 50
    assert all(got[i]["d"] <= got[i + 1]["d"] <= 200000 for i in range(49))
    full = [d for d in indexed.find({"loc": {"$near": {"$geometry": NEAR_POINT,
                                                       "$maxDistance": 200000}},
                                     "k": {"$ne": 2}}).hint([("$natural", 1)])]
    assert [d["_id"] for d in got] == [d["_id"] for d in full[:50]]
    everything = list(indexed.aggregate([{"$geoNear": {"near": NEAR_POINT, "distanceField": "d"}}]))
    assert len(everything) == indexed.count_documents({"loc": {"$exists": True}})


def test_explain_shows_the_2dsphere_index(geo_pair):
    plain, indexed = geo_pair
    q = REGION_QUERIES[0]
    ex = indexed.find(q).explain()
    wp = ex["queryPlanner"]["winningPlan"]
    assert wp["stage"] == "FETCH" and wp["inputStage"]["stage"] == "IXSCAN"
    assert wp["inputStage"]["keyPattern"] == {"loc": "2dsphere"}
    assert wp["inputStage"]["indexName"] == "loc_2dsphere"
    stats = ex["executionStats"]
    n = stats["nReturned"]
    assert 0 < n <= stats["totalDocsExamined"] < 600, "only the covering's candidates are read"
    assert plain.find(q).explain()["queryPlanner"]["winningPlan"]["stage"] == "COLLSCAN"
    near = indexed.find({"loc": {"$near": {"$geometry": NEAR_POINT}}}).limit(20).explain()
    assert near["queryPlanner"]["winningPlan"]["inputStage"]["indexName"] == "loc_2dsphere"
    assert near["executionStats"]["totalDocsExamined"] < 1000


def test_compound_2dsphere_index(db):
    docs = _random_docs(1500, 100, seed=7)
    db.plain.insert_many(docs)
    lead = db.lead
    lead.create_index([("loc", "2dsphere"), ("k", 1)])
    lead.insert_many(docs)
    trail = db.trail
    trail.create_index([("k", 1), ("loc", "2dsphere")])
    trail.insert_many(docs)
    q = {"loc": {"$geoWithin": {"$geometry": _box(-1, 44, 6, 6)}}, "k": 3}
    want = ids(db.plain.find(q))
    assert want and ids(lead.find(q)) == want and ids(trail.find(q)) == want
    assert lead.find(q).explain()["queryPlanner"]["winningPlan"]["inputStage"]["indexName"] \
        == "loc_2dsphere_k_1"
    near = {"loc": {"$near": {"$geometry": NEAR_POINT}}, "k": 3}
    assert [d["_id"] for d in lead.find(near).limit(10)] == \
        [d["_id"] for d in trail.find(near).limit(10)]
    # the geometry after other keys: scanned too (tests/drivers/test_geo_compound.py)
    assert ids(trail.find(q).hint("k_1_loc_2dsphere")) == want
    assert trail.find(q).explain()["queryPlanner"]["winningPlan"]["inputStage"]["indexName"] \
        == "k_1_loc_2dsphere"


def test_large_geometries_are_indexed_whole(db):
    # a country-sized polygon covers hundreds of cells at the coarsest level:
    # every one is a key (as mongod), so the index finds it from any point
    big = [
        {"_id": 1, "loc": _box(0, 40, 20, 15)},
        {"_id": 2, "loc": {"type": "MultiPolygon", "coordinates": [
            _box(-20, -10, 30, 25)["coordinates"], _box(60, 10, 15, 15)["coordinates"]]}},
        {"_id": 3, "loc": {"type": "LineString", "coordinates": [[-100, 30], [-60, 50]]}},
        {"_id": 4, "loc": {"type": "Point", "coordinates": [5.5, 45.5]}},
    ]
    db.plain.insert_many(big)
    db.indexed.create_index([("loc", "2dsphere")])
    db.indexed.insert_many(big)
    queries = [
        {"loc": {"$geoIntersects": {"$geometry": {"type": "Point", "coordinates": [5.5, 45.5]}}}},
        {"loc": {"$geoIntersects": {"$geometry": {"type": "Point", "coordinates": [19.9, 54.9]}}}},
        {"loc": {"$geoIntersects": {"$geometry": _box(65, 20, 0.1, 0.1)}}},
        {"loc": {"$geoIntersects": {"$geometry": {
            "type": "LineString", "coordinates": [[-80, 20], [-80, 60]]}}}},
        {"loc": {"$geoWithin": {"$geometry": _box(-30, -20, 120, 80)}}},
    ]
    for q in queries:
        want = ids(db.plain.find(q))
        assert want and ids(db.indexed.find(q)) == want, q
    near = {"loc": {"$near": {"$geometry": {"type": "Point", "coordinates": [70, 20]}}}}
    assert [d["_id"] for d in db.indexed.find(near).limit(1)] == [2]
    db.indexed.update_one({"_id": 1}, {"$set": {"loc": _box(100, 0, 1, 1)}})
    assert ids(db.indexed.find(queries[1])) == []
