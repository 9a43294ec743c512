"""Compound 2dsphere indexes whose geometry is not the first field
({k: 1, loc: "2dsphere"}) through pymongo: planned as mongod's relevant
indexes (a predicate on the first field), the leading fields' equalities
and $in combined with the S2 covering's cells, ranges on them read whole;
$near / $nearSphere / $geoNear on them; every result equal to a full scan
(hint {$natural: 1}) over random data, explain showing the index, and
mongod's 291 for a $near whose only index has an unbound first field."""

import random

import pytest
from bson.son import SON
from pymongo.errors import OperationFailure


@pytest.fixture(scope="module")
def db(client):
    return client.geoc


def ids(cur):
    return sorted(d["_id"] for d in cur)


def _box(lng, lat, w, h):
    return {"type": "Polygon", "coordinates": [[
        [lng, lat], [lng + w, lat], [lng + w, lat + h], [lng, lat + h], [lng, lat]]]}


CATS = ["park", "cafe", "shop", "museum", "bar"]


def _docs(n=3000, seed=21):
    rnd = random.Random(seed)
    docs = []
    for i in range(n):
        d = {"_id": i, "cat": rnd.choice(CATS), "stars": rnd.randrange(1, 6),
             "tags": rnd.sample(["a", "b", "c", "d"], rnd.randrange(0, 3))}
        r = rnd.random()
        if r < 0.9:
            lng, lat = rnd.uniform(-10, 20), rnd.uniform(35, 60)
            if i % 5 == 0:
                w = rnd.uniform(0.01, 0.8)
                d["loc"] = _box(lng, lat, w, w)
            else:
                d["loc"] = {"type": "Point", "coordinates": [lng, lat]} if i % 2 else [lng, lat]
        elif r < 0.95:
            d["loc"] = {"type": "Point", "coordinates": [rnd.uniform(-180, 180),
                                                         rnd.uniform(-89, 89)]}
        if i % 17 == 0:
            del d["cat"]  # a missing leading field is indexed as null
        docs.append(d)
    return docs


INDEXES = {
    "one": [("cat", 1), ("loc", "2dsphere")],
    "two": [("cat", 1), ("stars", -1), ("loc", "2dsphere"), ("tags", 1)],
    "multikey": [("tags", 1), ("loc", "2dsphere")],
}


@pytest.fixture(scope="module")
def colls(db):
    docs = _docs()
    out = {}
    for name, keys in INDEXES.items():
        db[name].create_index(keys)
        db[name].insert_many(docs)
        out[name] = db[name]
    return out


REGIONS = [
    {"$geoWithin": {"$geometry": _box(-1, 44, 8, 8)}},
    {"$geoWithin": {"$centerSphere": [[2.35, 48.85], 400 / 6378.1]}},
    {"$geoIntersects": {"$geometry": _box(5, 50, 2, 1.5)}},
    {"$geoIntersects": {"$geometry": {"type": "LineString",
                                      "coordinates": [[-8, 38], [18, 58]]}}},
]

LEADING = [
    {"cat": "park"},
    {"cat": {"$in": ["cafe", "bar"]}},
    {"cat": None},
    {"cat": {"$gte": "museum"}},
    {"cat": {"$exists": True}},
    {"cat": "shop", "stars": 3},
    {"cat": {"$in": ["shop", "park"]}, "stars": {"$in": [1, 5]}},
    {"cat": "park", "stars": {"$gt": 3}},
    {"cat": "cafe", "stars": {"$lte": 2}, "tags": "a"},
    {"tags": "b"},
    {"tags": {"$in": ["a", "d"]}},
    {"$or": [{"cat": "bar"}, {"stars": 4}]},
]


def plan_of(cursor):
    return cursor.explain()["queryPlanner"]["winningPlan"]


def test_regions_on_compound_indexes_equal_a_full_scan(colls):
    used = 0
    for name, c in colls.items():
        first = INDEXES[name][0][0]
        for lead in LEADING:
            for region in REGIONS:
                q = dict(lead, loc=region)
                want = ids(c.find(q).hint([("$natural", 1)]))
                assert ids(c.find(q)) == want, (name, q)
                assert ids(c.find(q).hint(INDEXES[name])) == want, (name, q)
                plan = plan_of(c.find(q))
                if first in str(lead) and "$or" not in lead or first in str(lead.get("$or", "")):
                    assert plan["stage"] == "FETCH", (name, q, plan)
                    assert plan["inputStage"]["keyPattern"] == SON(INDEXES[name]), (name, q)
                    used += 1
                else:  # as mongod: no predicate on the first field, the index is not relevant
                    assert plan["stage"] == "COLLSCAN", (name, q, plan)
    assert used > 60


def test_equality_prefix_reads_only_the_coverings_cells(colls):
    c = colls["one"]
    q = {"cat": "park", "loc": REGIONS[0]}
    stats = c.find(q).explain()["executionStats"]
    n = stats["nReturned"]
    assert n > 20
    # the cells of one category, not every park nor every document in the region
    parks = c.count_documents({"cat": "park", "loc": {"$exists": True}})
    assert n <= stats["totalDocsExamined"] < parks, stats
    # a range on the leading field reads that range of the index whole
    q = {"cat": {"$gte": "shop"}, "loc": REGIONS[0]}
    stats = c.find(q).explain()["executionStats"]
    assert stats["totalDocsExamined"] == c.count_documents(
        {"cat": {"$gte": "shop"}, "loc": {"$exists": True}}), stats


NEAR = {"type": "Point", "coordinates": [4.9, 52.37]}


def test_near_on_compound_indexes_equals_a_full_scan(colls):
    nears = [
        ({"$near": {"$geometry": NEAR, "$maxDistance": 300000}}, 0),
        ({"$near": {"$geometry": NEAR}}, 15),
        ({"$nearSphere": {"$geometry": NEAR, "$minDistance": 100000}}, 30),
        ({"$nearSphere": [4.9, 52.37], "$maxDistance": 0.05}, 0),
        ({"$near": {"$geometry": {"type": "Point", "coordinates": [-170, -60]}}}, 4),
    ]
    for name, c in colls.items():
        first = INDEXES[name][0][0]
        for lead in LEADING:
            if first not in str(lead):
                continue
            for near, limit in nears:
                q = dict(lead, loc=near)
                full = [d["_id"] for d in c.find(q).hint([("$natural", 1)])]
                want = full[:limit] if limit else full
                got = [d["_id"] for d in c.find(q).limit(limit)]
                assert got == want, (name, q)
                assert [d["_id"] for d in c.find(q).skip(2).limit(limit)] == \
                    (full[2:2 + limit] if limit else full[2:]), (name, q)
                plan = plan_of(c.find(q).limit(limit))
                assert plan["inputStage"]["keyPattern"] == SON(INDEXES[name]), (name, q, plan)


def test_geonear_stage_on_a_compound_index(colls):
    c = colls["two"]
    stage = {"$geoNear": {"near": NEAR, "distanceField": "d", "maxDistance": 500000,
                          "query": {"cat": {"$in": ["park", "bar"]}, "stars": 4}}}
    got = list(c.aggregate([stage, {"$limit": 40}]))
    assert len(got) >= 20
    assert all(got[i]["d"] <= got[i + 1]["d"] <= 500000 for i in range(len(got) - 1))
    full = [d["_id"] for d in c.find({"loc": {"$near": {"$geometry": NEAR,
                                                        "$maxDistance": 500000}},
                                      "cat": {"$in": ["park", "bar"]}, "stars": 4})
            .hint([("$natural", 1)])]
    assert [d["_id"] for d in got] == full[:40]
    plan = c.database.command(SON([("aggregate", c.name), ("pipeline", [stage]),
                                   ("explain", True)]))
    plan = plan.get("queryPlanner") or plan["stages"][0]["$cursor"]["queryPlanner"]
    assert plan["winningPlan"]["inputStage"]["indexName"] == "cat_1_stars_-1_loc_2dsphere_tags_1"


def test_near_needs_a_relevant_index_291_as_mongod(colls):
    c = colls["one"]
    with pytest.raises(OperationFailure) as e:  # nothing on "cat": the index is not relevant
        list(c.find({"loc": {"$near": {"$geometry": NEAR}}, "stars": 3}).limit(3))
    assert e.value.code == 291 and "unable to find index for $geoNear query" in \
        e.value.details["errmsg"]
    with pytest.raises(OperationFailure) as e:
        list(c.aggregate([{"$geoNear": {"near": NEAR, "distanceField": "d"}}]))
    assert e.value.code == 291
    # a geometry-first index next to it serves
    c2 = c.database.both
    c2.insert_many([{"_id": i, "cat": CATS[i % 5],
                     "loc": [i % 30 * 0.1, 45 + i % 7 * 0.1]} for i in range(200)])
    c2.create_index(INDEXES["one"])
    c2.create_index([("loc", "2dsphere")])
    q = {"loc": {"$near": {"$geometry": NEAR}}, "stars": 3}
    assert [d["_id"] for d in c2.find({"loc": {"$near": {"$geometry": NEAR}}}).limit(5)] == \
        [d["_id"] for d in c2.find({"loc": {"$near": {"$geometry": NEAR}}})
         .hint([("$natural", 1)]).limit(5)]
    assert list(c2.find(q)) == []


def test_hint_to_a_compound_index_without_a_geo_predicate_is_bad_value(colls):
    c = colls["one"]
    with pytest.raises(OperationFailure) as e:
        list(c.find({"cat": "park"}).hint("cat_1_loc_2dsphere"))
    assert e.value.code == 2 and "hint provided does not correspond" in e.value.details["errmsg"]
    # with one, the hinted index is read even with no bound on its first field
    q = {"loc": REGIONS[2]}
    assert ids(c.find(q).hint("cat_1_loc_2dsphere")) == ids(c.find(q).hint([("$natural", 1)]))


def test_compound_index_kept_right_through_writes(colls):
    c = colls["one"]
    c.update_many({"cat": "cafe", "stars": 2}, {"$set": {"cat": "park"}})
    c.update_many({"stars": 5, "loc": {"$exists": True}},
                  {"$set": {"loc": {"type": "Point", "coordinates": [4.91, 52.36]}}})
    c.delete_many({"stars": 1, "cat": "bar"})
    for lead in LEADING[:6]:
        for region in REGIONS[:2]:
            q = dict(lead, loc=region)
            assert ids(c.find(q)) == ids(c.find(q).hint([("$natural", 1)])), q
    q = {"cat": "park", "loc": {"$near": {"$geometry": NEAR}}}
    assert [d["_id"] for d in c.find(q).limit(10)] == \
        [d["_id"] for d in c.find(q).hint([("$natural", 1)]).limit(10)]


def _mixed(db):
    """One collection with a 2d index (other fields after its location), a
    compound 2dsphere index (its geometry after `cat`) and a hashed one."""
    c = db.mixed
    c.drop()
    rnd = random.Random(5)
    docs = []
    for i in range(2000):
        x, y = rnd.uniform(-50, 50), rnd.uniform(-50, 50)
        docs.append({"_id": i, "cat": rnd.choice("abc"), "p": [x, y],
                     "g": {"type": "Point", "coordinates": [x, y]}, "h": i % 7})
    c.insert_many(docs)
    assert c.create_index([("p", "2d"), ("cat", 1)]) == "p_2d_cat_1"
    assert c.create_index([("cat", 1), ("g", "2dsphere")]) == "cat_1_g_2dsphere"
    assert c.create_index([("h", "hashed")]) == "h_hashed"
    return c


def test_2d_and_compound_2dsphere_indexes_planned_side_by_side(db):
    c = _mixed(db)
    # the 2d index: flat $near (its own stage) and $box, its trailing field filtered
    q = {"p": {"$near": [1, 2], "$maxDistance": 10}, "cat": "a"}
    got = [d["_id"] for d in c.find(q)]
    assert len(got) > 5 and sorted(got) == ids(c.find(
        {"p": {"$geoWithin": {"$center": [[1, 2], 10]}}, "cat": "a"}).hint([("$natural", 1)]))
    assert plan_of(c.find(q))["stage"] == "GEO_NEAR_2D"
    q = {"p": {"$geoWithin": {"$box": [[0, 0], [10, 10]]}}, "cat": {"$in": ["a", "b"]}}
    assert ids(c.find(q)) == ids(c.find(q).hint([("$natural", 1)]))
    assert plan_of(c.find(q))["inputStage"]["indexName"] == "p_2d_cat_1"
    assert ids(c.find(q).hint("p_2d_cat_1")) == ids(c.find(q).hint([("$natural", 1)]))
    # the compound 2dsphere index: its leading field bound, metres
    q = {"cat": "b", "g": {"$geoWithin": {"$centerSphere": [[1, 2], 0.1]}}}
    assert ids(c.find(q)) == ids(c.find(q).hint([("$natural", 1)]))
    assert plan_of(c.find(q))["inputStage"]["indexName"] == "cat_1_g_2dsphere"
    q = {"cat": "b", "g": {"$near": {"$geometry": {"type": "Point", "coordinates": [1, 2]},
                                     "$maxDistance": 900000}}}
    got = [d["_id"] for d in c.find(q)]
    assert len(got) > 5 and got == [d["_id"] for d in c.find(q).hint([("$natural", 1)])]
    # each index in its own units only (mongod: 291)
    for bad in ({"p": {"$near": {"$geometry": {"type": "Point", "coordinates": [1, 2]}}}},
                {"cat": "a", "g": {"$near": [1, 2]}},
                {"g": {"$nearSphere": [1, 2]}}):  # no predicate on cat: not relevant
        with pytest.raises(OperationFailure) as e:
            list(c.find(bad))
        assert e.value.code == 291, bad
    # a hashed $in beside them
    q = {"h": {"$in": [1, 3]}}
    assert ids(c.find(q)) == ids(c.find(q).hint([("$natural", 1)]))
    assert plan_of(c.find(q))["inputStage"]["indexName"] == "h_hashed"


def test_geonear_picks_the_2d_index_or_the_keyed_compound_one(db):
    c = _mixed(db)
    r = list(c.aggregate([{"$geoNear": {"near": [1, 2], "distanceField": "d",
                                        "spherical": False, "query": {"cat": "c"},
                                        "maxDistance": 5}}]))
    assert r and all(x["cat"] == "c" and x["d"] <= 5 for x in r)
    assert [x["d"] for x in r] == sorted(x["d"] for x in r)
    near = {"type": "Point", "coordinates": [1, 2]}
    r = list(c.aggregate([{"$geoNear": {"near": near, "distanceField": "d", "key": "g",
                                        "query": {"cat": "c"}, "maxDistance": 900000}}]))
    assert [x["_id"] for x in r] == [d["_id"] for d in c.find(
        {"cat": "c", "g": {"$near": {"$geometry": near, "$maxDistance": 900000}}})
        .hint([("$natural", 1)])]
    assert len(r) > 5
    with pytest.raises(OperationFailure) as e:  # the compound index needs a bound on cat
        list(c.aggregate([{"$geoNear": {"near": near, "distanceField": "d", "key": "g"}}]))
    assert e.value.code == 291
