"""Geo indexes the planner may not use, and $geoNear's query on its key,
as mongod 7.0: a hidden 2dsphere/2d index is invisible to the planner, so
a $near/$nearSphere find and a $geoNear fail with 291 NoQueryExecutionPlans
("unable to find index for $geoNear query") when it is the only geo index
(the $geoNear key is still taken from it, as 7.0's
extractGeoNearFieldFromIndexes reads every ready index), and a hint of it
is BadValue; unhiding it makes them work again. A $geoNear `query` on the
`key` field is ANDed with the near predicate."""

import pytest
from bson.son import SON
from pymongo.errors import OperationFailure

from atomdb_clients import per_test_client
from test_geo import GEONEAR_PLACES


client = per_test_client("")


@pytest.fixture
def db(client):
    return client.geohidden


@pytest.fixture
def places(db):
    t = db.places
    t.insert_many([dict(d) for d in GEONEAR_PLACES])
    return t


POINT = {"type": "Point", "coordinates": [-73.99279, 40.719296]}  # the $geoNear page
NEAR = {"location": {"$near": {"$geometry": POINT}}}
GEONEAR = {"$geoNear": {"near": POINT, "distanceField": "d"}}


def hide(db, name, hidden):
    r = db.command(SON([("collMod", "places"), ("index", {"name": name, "hidden": hidden})]))
    assert r["hidden_new"] is hidden, r


def assert_no_geo_index(e):
    assert e.value.code == 291, e.value.details
    assert e.value.details["codeName"] == "NoQueryExecutionPlans"
    assert "unable to find index for $geoNear query" in e.value.details["errmsg"]


def test_a_hidden_2dsphere_index_is_not_used_by_near_or_geonear(places, db):
    places.create_index([("location", "2dsphere")])
    assert [d["_id"] for d in places.find(NEAR)] == [2, 1, 3]
    hide(db, "location_2dsphere", True)
    for op in ("$near", "$nearSphere"):
        with pytest.raises(OperationFailure) as e:
            list(places.find({"location": {op: {"$geometry": POINT}}}))
        assert_no_geo_index(e)
    for stage in (GEONEAR, {"$geoNear": {"near": POINT, "distanceField": "d",
                                         "key": "location"}}):
        with pytest.raises(OperationFailure) as e:
            list(places.aggregate([stage]))
        assert_no_geo_index(e)
    for hint in ("location_2dsphere", [("location", "2dsphere")]):  # the hint is checked first
        with pytest.raises(OperationFailure) as e:
            list(places.find(NEAR).hint(hint))
        assert e.value.code == 2, e.value.details
        assert "hint provided does not correspond to an existing index" in \
            e.value.details["errmsg"]
    hide(db, "location_2dsphere", False)
    assert [d["_id"] for d in places.find(NEAR)] == [2, 1, 3], "unhidden: planned again"
    assert [d["_id"] for d in places.find(NEAR).hint("location_2dsphere")] == [2, 1, 3]
    assert [d["_id"] for d in places.aggregate([GEONEAR])] == [2, 1, 3]
    # a visible compound 2dsphere index serves while the plain one is hidden
    places.create_index([("location", "2dsphere"), ("category", 1)], name="compound")
    hide(db, "location_2dsphere", True)
    r = db.command(SON([("explain", SON([("find", "places"), ("filter", NEAR)])),
                        ("verbosity", "queryPlanner")]))
    assert "compound" in str(r["queryPlanner"]["winningPlan"]), r["queryPlanner"]
    assert [d["_id"] for d in places.find(NEAR)] == [2, 1, 3]
    places.drop_index("compound")
    with pytest.raises(OperationFailure) as e:
        list(places.find(NEAR))
    assert_no_geo_index(e)


def test_a_hidden_2d_index_is_not_used(db):
    t = db.places
    t.insert_many([{"_id": i, "pt": [i, i]} for i in range(4)])
    t.create_index([("pt", "2d")])
    hide(db, "pt_2d", True)
    with pytest.raises(OperationFailure) as e:
        list(t.find({"pt": {"$near": [3, 3]}}))
    assert_no_geo_index(e)
    with pytest.raises(OperationFailure) as e:  # 7.0 takes the key from the hidden index
        list(t.aggregate([{"$geoNear": {"near": [3, 3], "distanceField": "d"}}]))
    assert_no_geo_index(e)
    hide(db, "pt_2d", False)
    assert [d["_id"] for d in t.find({"pt": {"$near": [3, 3]}})] == [3, 2, 1, 0]
    assert [d["_id"] for d in t.aggregate([
        {"$geoNear": {"near": [3, 3], "distanceField": "d"}}])] == [3, 2, 1, 0]


def test_a_hint_of_a_non_geo_index_leaves_near_without_its_index(places, db):
    places.create_index([("location", "2dsphere")])
    places.create_index([("category", 1)])
    with pytest.raises(OperationFailure) as e:  # mongod: only the hinted index is planned
        list(places.find(NEAR).hint("category_1"))
    assert_no_geo_index(e)


def test_geonear_query_on_its_key_field_is_anded(places, db):
    # the documents a query on the key gives; that the filter atomdb builds
    # for it names the key once is test_pipeline.c's
    # test_geonear_source_filter_names_each_field_once
    places.create_index([("location", "2dsphere")])
    # Central Park and Roosevelt Park are inside; the Polo Grounds (40.83 N) not
    box = {"type": "Polygon", "coordinates": [[
        [-74.02, 40.70], [-73.95, 40.70], [-73.95, 40.79], [-74.02, 40.79], [-74.02, 40.70]]]}
    for key in ({}, {"key": "location"}):
        got = list(places.aggregate([{"$geoNear": dict(
            near=POINT, distanceField="d",
            query={"location": {"$geoWithin": {"$geometry": box}}}, **key)}]))
        assert [d["_id"] for d in got] == [2, 1], got
        got = list(places.aggregate([{"$geoNear": dict(
            near=POINT, distanceField="d", query={"location.type": "Point",
                                                  "location": {"$exists": True}}, **key)}]))
        assert [d["_id"] for d in got] == [2, 1, 3], got
    got = list(places.aggregate([{"$geoNear": {
        "near": POINT, "distanceField": "d", "maxDistance": 6000,
        "query": {"location": {"$geoWithin": {"$geometry": box}}, "category": "Parks"}}}]))
    assert [d["_id"] for d in got] == [2, 1]
    got = list(places.aggregate([{"$geoNear": {
        "near": POINT, "distanceField": "d",
        "query": {"location": {"$not": {"$geoWithin": {"$geometry": box}}}}}}]))
    assert [d["_id"] for d in got] == [3]
