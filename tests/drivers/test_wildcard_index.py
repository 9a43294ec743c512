"""Wildcard indexes (issue 20) through pymongo, on the MongoDB manual's
examples: {"product_attributes.$**": 1}, {"$**": 1} with an inclusion or
exclusion wildcardProjection; the planner uses them for equality and
ranges on one covered path (explain shows IXSCAN over {$_path: 1, path: 1})
and never for what mongod will not answer from them ($exists: false, $ne,
null, sort-only, non-empty documents, positional paths), with results equal
to a collection scan; keys kept on insert/update/delete and rebuilt on
restart; mongod's refusals (unique, sparse, TTL, bad projections)."""

import pytest
from bson.son import SON
from pymongo import MongoClient

from atomdb_clients import fails, per_test_client

# The manual's "Wildcard Indexes" sample collection.
PRODUCTS = [
    {"_id": 1, "product_name": "Spy Coat",
     "product_attributes": {"material": ["Tweed", "Wool", "Leather"],
                            "size": {"length": 72, "units": "inches"}}},
    {"_id": 2, "product_name": "Spy Pen",
     "product_attributes": {"colors": ["Blue", "Black"],
                            "secret_feature": {"name": "laser", "power": "1000",
                                               "units": "watts"}}},
    {"_id": 3, "product_name": "Spy Book"},
]

# The manual's wildcardProjection example collection.
ELEMENTS = [
    {"_id": 1, "product_name": "Blaster Gun",
     "product_attributes": {"elements": {"fire": 10, "ice": 0}, "resistance": 5}},
    {"_id": 2, "product_name": "Flame Sword",
     "product_attributes": {"elements": {"fire": 30}, "resistance": 2}},
    {"_id": 3, "product_name": "Ice Shield",
     "product_attributes": {"elements": {"ice": 25}, "resistance": 9}},
]


client = per_test_client("")


def scan(coll, q):
    return coll.find(q).explain()["queryPlanner"]["winningPlan"]


def ixscan_path(coll, q):
    """The path the wildcard IXSCAN bounds, or None for a collection scan."""
    plan = scan(coll, q)
    if plan["stage"] == "COLLSCAN":
        return None
    assert plan["stage"] == "FETCH", plan
    ix = plan["inputStage"]
    assert ix["stage"] == "IXSCAN", plan
    kp = list(ix["keyPattern"].items())
    assert kp[0] == ("$_path", 1), kp
    assert len(kp) == 2 and kp[1][1] == 1, kp
    return kp[1][0]


def ids(cursor):
    return sorted(d["_id"] for d in cursor)


def same_as_scan(client, docs, index, q, opts=None):
    """The indexed collection and an unindexed copy answer `q` alike."""
    a, b = client.w.indexed, client.w.plain
    a.drop()
    b.drop()
    a.create_index(index, **(opts or {}))
    a.insert_many(docs)
    b.insert_many(docs)
    got, want = ids(a.find(q)), ids(b.find(q))
    assert got == want, (q, got, want)
    return got


def test_subtree_index_from_the_manual(client):
    c = client.w.products
    assert c.create_index([("product_attributes.$**", 1)]) == "product_attributes.$**_1"
    c.insert_many(PRODUCTS)
    spec = [i for i in c.list_indexes() if i["name"] == "product_attributes.$**_1"][0]
    assert dict(spec) == {"v": 2, "key": {"product_attributes.$**": 1},
                          "name": "product_attributes.$**_1"}
    q = {"product_attributes.size.length": {"$gt": 60}}
    assert ids(c.find(q)) == [1]
    assert ixscan_path(c, q) == "product_attributes.size.length"
    q = {"product_attributes.material": "Wool"}  # an array element
    assert ids(c.find(q)) == [1]
    assert ixscan_path(c, q) == "product_attributes.material"
    plan = scan(c, q)
    assert plan["inputStage"]["indexName"] == "product_attributes.$**_1"
    assert plan["inputStage"]["isMultiKey"] is True
    # multikey is tracked per path, as mongod's metadata keys
    plan = scan(c, {"product_attributes.size.length": {"$gt": 60}})
    assert plan["inputStage"]["isMultiKey"] is False
    q = {"product_attributes.secret_feature.name": "laser"}
    assert ids(c.find(q)) == [2]
    assert ixscan_path(c, q) == "product_attributes.secret_feature.name"
    # a path outside the subtree is not in the index
    assert ixscan_path(c, {"product_name": "Spy Pen"}) is None
    assert ids(c.find({"product_name": "Spy Pen"})) == [2]


def test_inclusion_projection_from_the_manual(client):
    c = client.w.incl
    proj = {"product_attributes.elements": 1, "product_attributes.resistance": 1}
    c.create_index([("$**", 1)], wildcardProjection=proj)
    c.insert_many(ELEMENTS)
    spec = [i for i in c.list_indexes() if i["name"] == "$**_1"][0]
    assert spec["key"] == {"$**": 1}
    assert spec["wildcardProjection"] == proj
    q = {"product_attributes.elements.fire": {"$gte": 10}}
    assert ids(c.find(q)) == [1, 2]
    assert ixscan_path(c, q) == "product_attributes.elements.fire"
    q = {"product_attributes.resistance": {"$lt": 6}}
    assert ids(c.find(q)) == [1, 2]
    assert ixscan_path(c, q) == "product_attributes.resistance"
    # not projected: a collection scan
    assert ixscan_path(c, {"product_name": "Ice Shield"}) is None
    assert ids(c.find({"product_name": "Ice Shield"})) == [3]


def test_exclusion_projection_from_the_manual(client):
    c = client.w.excl
    c.create_index([("$**", 1)], wildcardProjection={"product_attributes.elements": 0})
    c.insert_many(ELEMENTS)
    q = {"product_name": "Flame Sword"}
    assert ids(c.find(q)) == [2]
    assert ixscan_path(c, q) == "product_name"
    q = {"product_attributes.resistance": 9}
    assert ids(c.find(q)) == [3]
    assert ixscan_path(c, q) == "product_attributes.resistance"
    # the excluded subtree is not in the index
    q = {"product_attributes.elements.ice": 25}
    assert ixscan_path(c, q) is None
    assert ids(c.find(q)) == [3]


def test_queries_it_cannot_answer_fall_back_to_a_scan(client):
    c = client.w.refuse
    c.create_index([("$**", 1)])
    docs = [{"_id": 1, "a": 1, "o": {"x": 1}}, {"_id": 2, "a": None},
            {"_id": 3}, {"_id": 4, "a": [5, 6]}, {"_id": 5, "o": {}}]
    c.insert_many(docs)
    for q, want in [({"a": {"$exists": False}}, [3, 5]), ({"a": {"$ne": 1}}, [2, 3, 4, 5]),
                    ({"a": None}, [2, 3, 5]), ({"o": {"x": 1}}, [1]), ({"a.0": 5}, [4]),
                    ({"$or": [{"a": 1}, {"a": 5}]}, [1, 4]),
                    ({"a": {"$not": {"$gt": 2}}}, [1, 2, 3, 5])]:
        assert ixscan_path(c, q) is None, q
        assert ids(c.find(q)) == want, q
    # sort-only: the index has no order for one field
    plan = c.find({}).sort("a", 1).explain()["queryPlanner"]["winningPlan"]
    assert "IXSCAN" not in str(plan), plan
    assert [d["_id"] for d in c.find({}).sort([("a", 1), ("_id", 1)])] == [2, 3, 5, 1, 4]  # null and missing sort alike
    # {} is indexed as itself, so equality to it is answered
    assert ixscan_path(c, {"o": {}}) == "o"
    assert ids(c.find({"o": {}})) == [5]
    # _id is left out of a {"$**": 1} index (its own index answers it)
    assert scan(c, {"_id": 1})["stage"] == "IDHACK"
    rk = list(c.find({"a": 1}, return_key=True))
    assert rk == [{"$_path": "a", "a": 1}]


@pytest.mark.parametrize("q", [
    {"a": 5}, {"a": {"$gt": 3, "$lt": 5}}, {"a": {"$gte": 1}}, {"a": {"$lt": "m"}},
    {"a.b": 2}, {"a.b": {"$in": [2, 3]}}, {"a": {}}, {"a": "x"}, {"a": {"$lte": 10}},
    {"a.b.c": True}, {"n": [1, 2]}, {"n": 1},
])
def test_results_equal_a_collection_scan(client, q):
    docs = [{"_id": 1, "a": [1, 10]}, {"_id": 2, "a": 5}, {"_id": 3, "a": {"b": 2}},
            {"_id": 4, "a": [{"b": 3}, {"b": [2, 9]}]}, {"_id": 5, "a": {}},
            {"_id": 6, "a": []}, {"_id": 7, "a": "x"}, {"_id": 8, "a": {"b": {"c": True}}},
            {"_id": 9, "a": [[5]]}, {"_id": 10, "n": [[1, 2], 1]}, {"_id": 11, "a": 4.5},
            {"_id": 12, "a": [{}]}, {"_id": 13, "n": [1, 2]}]
    same_as_scan(client, docs, [("$**", 1)], q)


def test_range_on_an_array_meets_each_bound_separately(client):
    c = client.w.multi
    c.create_index([("$**", 1)])
    c.insert_many([{"_id": 1, "a": [1, 10]}, {"_id": 2, "a": 4}, {"_id": 3, "a": 7}])
    q = {"a": {"$gt": 3, "$lt": 5}}
    assert ixscan_path(c, q) == "a"
    assert ids(c.find(q)) == [1, 2]


def test_range_on_a_path_without_arrays_uses_both_bounds(client):
    c = client.w.bounded
    c.create_index([("$**", 1)])
    c.insert_many([{"_id": i, "x": i, "arr": [i, i + 100]} for i in range(200)])
    q = {"x": {"$gt": 10, "$lt": 20}}
    assert ids(c.find(q)) == list(range(11, 20))
    stats = c.find(q).explain()["executionStats"]
    assert stats["totalKeysExamined"] <= 11, stats
    # on an array path one element may meet each bound: the scan runs on
    q = {"arr": {"$gt": 10, "$lt": 20}}
    assert ids(c.find(q)) == list(range(20))  # i < 20 and i + 100 > 10
    assert c.find(q).explain()["queryPlanner"]["winningPlan"]["inputStage"]["isMultiKey"] is True


def test_keys_follow_inserts_updates_and_deletes(client):
    c = client.w.maint
    c.create_index([("attrs.$**", 1)])
    c.insert_one({"_id": 1, "attrs": {"color": "red", "tags": ["a", "b"]}})
    assert ids(c.find({"attrs.color": "red"})) == [1]
    c.update_one({"_id": 1}, {"$set": {"attrs.color": "blue"}, "$push": {"attrs.tags": "z"}})
    assert ids(c.find({"attrs.color": "red"})) == []
    assert ids(c.find({"attrs.color": "blue"})) == [1]
    assert ids(c.find({"attrs.tags": "z"})) == [1]
    assert ixscan_path(c, {"attrs.tags": "z"}) == "attrs.tags"
    c.replace_one({"_id": 1}, {"attrs": {"size": 3}})
    assert ids(c.find({"attrs.color": "blue"})) == []
    assert ids(c.find({"attrs.size": 3})) == [1]
    c.delete_one({"_id": 1})
    assert ids(c.find({"attrs.size": 3})) == []
    stats = c.find({"attrs.size": 3}).explain()["executionStats"]
    assert stats["totalKeysExamined"] == 0


def test_hint_by_name_and_by_key(client):
    c = client.w.hint
    c.create_index([("$**", 1)], name="wc")
    c.create_index([("a", 1)])
    c.insert_many([{"_id": i, "a": i, "b": i % 3} for i in range(30)])
    q = {"a": 7, "b": 1}
    cur = c.find(q).hint("wc")
    assert ids(cur) == [7]
    plan = c.find(q).hint("wc").explain()["queryPlanner"]["winningPlan"]
    assert plan["inputStage"]["indexName"] == "wc"
    assert plan["inputStage"]["keyPattern"]["$_path"] == 1
    assert ids(c.find({"b": 2}).hint([("$**", 1)])) == [i for i in range(30) if i % 3 == 2]
    # nothing the index can answer: mongod's planner finds no plan for the hint
    fails(2, lambda: list(c.find({"a": {"$exists": False}}).hint("wc")), "hint, no predicate")
    fails(2, lambda: list(c.find({}).hint("wc")), "hint, empty filter")


def test_return_key_shows_the_path(client):
    c = client.w.rk
    c.create_index([("$**", 1)])
    c.insert_many([{"_id": 1, "a": {"b": 5}}, {"_id": 2, "a": {"b": 6}}])
    got = list(c.find({"a.b": 6}, return_key=True))
    assert got == [{"$_path": "a.b", "a.b": 6}]


def test_collation_of_the_index(client):
    c = client.w.coll
    c.create_index([("$**", 1)], collation={"locale": "en", "strength": 2})
    c.insert_many([{"_id": 1, "name": "Alpha"}, {"_id": 2, "name": "beta"}])
    q = {"name": "ALPHA"}
    cur = c.find(q).collation({"locale": "en", "strength": 2})
    assert ids(cur) == [1]
    plan = c.find(q).collation({"locale": "en", "strength": 2}).explain()
    assert plan["queryPlanner"]["winningPlan"]["stage"] == "FETCH"
    # another collation cannot use string bounds of this index
    assert ixscan_path(c, q) is None
    assert ids(c.find(q)) == []


def test_partial_wildcard_index(client):
    c = client.w.partial
    c.create_index([("$**", 1)], partialFilterExpression={"qty": {"$gt": 0}})
    c.insert_many([{"_id": 1, "qty": 5, "c": "x"}, {"_id": 2, "qty": 0, "c": "x"}])
    assert ixscan_path(c, {"c": "x", "qty": {"$gt": 1}}) in ("c", "qty")
    assert ids(c.find({"c": "x", "qty": {"$gt": 1}})) == [1]
    assert ixscan_path(c, {"c": "x"}) is None  # would miss qty 0
    assert ids(c.find({"c": "x"})) == [1, 2]


def test_two_projections_of_one_key_pattern(client):
    c = client.w.twice
    c.create_index([("$**", 1)], wildcardProjection={"a": 1}, name="wa")
    c.create_index([("$**", 1)], wildcardProjection={"b": 1}, name="wb")
    names = sorted(i["name"] for i in c.list_indexes())
    assert names == ["_id_", "wa", "wb"]
    # the same name with another projection is another index under a taken name
    fails(86, lambda: c.create_index([("$**", 1)], wildcardProjection={"c": 1}, name="wa"),
          "same name, other projection")
    # an identical request is a no-op
    c.create_index([("$**", 1)], wildcardProjection={"a": 1}, name="wa")
    c.insert_many([{"_id": 1, "a": 1, "b": 2}, {"_id": 2, "a": 3, "b": 4}])
    # a hint by the shared key pattern: whichever covers the filter serves
    plan = c.find({"b": 4}).hint([("$**", 1)]).explain()["queryPlanner"]["winningPlan"]
    assert plan["inputStage"]["indexName"] == "wb", plan
    assert ids(c.find({"b": 4}).hint([("$**", 1)])) == [2]
    assert ids(c.find({"a": 1}).hint([("$**", 1)])) == [1]
    fails(2, lambda: list(c.find({"z": 1}).hint([("$**", 1)])), "hint, neither covers")
    # dropping by the shared key pattern is ambiguous, as mongod
    drop = SON([("dropIndexes", "twice"), ("index", {"$**": 1})])
    fails(119, lambda: client.w.command(drop), "drop by shared key")
    c.drop_index("wb")
    client.w.command(drop)
    assert sorted(i["name"] for i in c.list_indexes()) == ["_id_"]


def create(client, key, **opts):
    spec = SON([("key", SON(key)), ("name", "w")])
    spec.update(opts)
    return client.w.command(SON([("createIndexes", "errs"), ("indexes", [spec])]))


@pytest.mark.parametrize("key,opts,code,msg", [
    ([("$**", 1)], {"unique": True}, 67, "Index type 'wildcard' does not support the unique option"),
    ([("$**", 1)], {"sparse": True}, 67, "Index type 'wildcard' does not support the sparse option"),
    ([("$**", 1)], {"expireAfterSeconds": 10}, 67, "Index type 'wildcard' cannot be a TTL index"),
    ([("$**", 1)], {"v": 1}, 67, None),
    ([("$**", 0)], {}, 67, "A numeric value in a $** index key pattern must be positive."),
    ([("$**", -1)], {}, 67, "A numeric value in a $** index key pattern must be positive."),
    ([("$**", "hashed")], {}, 67, None),
    ([("$**", "2dsphere")], {}, 67, None),
    ([("a.$**.$**", 1)], {}, 67, None),
    ([("$**.$**", 1)], {}, 67, None),
    ([("$**", 1)], {"wildcardProjection": {"a": 1, "b": 0}}, 31254,
     "Cannot do exclusion on field b in inclusion projection"),
    ([("$**", 1)], {"wildcardProjection": {"a": 0, "b": 1}}, 31253,
     "Cannot do inclusion on field b in exclusion projection"),
    ([("$**", 1)], {"wildcardProjection": {"a": 1, "b": "string"}}, 51271, None),
    ([("$**", 1)], {"wildcardProjection": {}}, 9,
     "The 'wildcardProjection' field can't be an empty object"),
    ([("$**", 1)], {"wildcardProjection": {"a": 1, "a.b": 1}}, 31249, None),
    ([("a", 1)], {"wildcardProjection": {"a": 1}}, 2,
     "The field 'wildcardProjection' is only allowed in an 'wildcard' index"),
    ([("a.$**", 1)], {"wildcardProjection": "string"}, 14, None),
    ([("a.$**", 1)], {"wildcardProjection": {"a": 1}}, 9, None),
    ([("a.$**", 1)], {"wildcardProjection": {"b": 0}}, 9, None),
    ([("a.$**", 1), ("b.$**", 1)], {}, 7246201, None),
    # compound wildcard indexes (mongod 7.0): bad specs get mongod's errors
    # (jstests/core/compound_wildcard_index_validation.js)...
    ([("a.$**", 1), ("b", "text")], {}, 67,
     "Can't use more than one index plugin for a single index."),
    ([("a.$**", 1), ("b", "hashed")], {}, 67, None),
    ([("a.$**", 1), ("b", "2dsphere")], {}, 67, None),
    ([("a", 1), ("a.$**", 1)], {}, 7246204, None),
    ([("a.b.c", 1), ("a.b.$**", 1)], {}, 7246204, None),
    ([("$**", 1), ("c", 1)], {"wildcardProjection": {"a.b": 1, "a.b.c": 1}}, 7246200, None),
    ([("a", 1), ("$**", 1)], {}, 67, None),
    ([("st", 1), ("$**", 1)], {"wildcardProjection": {"a": "something"}}, 51271, None),
    ([("$**", 1), ("a", 1)], {"wildcardProjection": {"a": 1}}, 7246208, None),
    ([("a", 1), ("$**", 1), ("b", 1)], {"wildcardProjection": {"a": 1, "b": 1}}, 7246208, None),
    ([("_id", 1), ("$**", 1)], {"wildcardProjection": {"_id": 1}}, 7246208, None),
    ([("a", 1), ("$**", 1)], {"wildcardProjection": {"_id": 0, "a": 1}}, 7246208, None),
    # an exclusion must drop every regular field: mongod's validateWildcardProjection
    # reports the first one left in with 7246209, or 7246210 when no excluded path
    # sorts after it (src/mongo/db/index/wildcard_validation.cpp)
    ([("$**", 1), ("a", 1)], {"wildcardProjection": {"b": 0}}, 7246209, None),
    ([("$**", 1), ("a", 1)], {"wildcardProjection": {"a.x": 0}}, 7246209, None),
    ([("$**", 1), ("d", 1)], {"wildcardProjection": {"_id": 1, "e": 0}}, 7246209,
     "wildcardProjection paths must exclude all regular index fields, however 'd'is not "
     "excluded."),
    ([("a", 1), ("b", 1), ("$**", 1)], {"wildcardProjection": {"b": 0}}, 7246209, None),
    ([("a", 1), ("_id", 1), ("$**", 1)], {"wildcardProjection": {"a": 0}}, 7246209, None),
    ([("$**", 1), ("_id", 1), ("e", 1)], {"wildcardProjection": {"_id": 1, "e": 0}}, 7246209,
     None),
    ([("_id", 1), ("a", 1), ("$**", 1)], {"wildcardProjection": {"_id": 0, "a.b": 0}}, 7246209,
     None),
    ([("$**", 1), ("e.c", 1)], {"wildcardProjection": {"_id": 1, "e.b": 0}}, 7246210, None),
    ([("b", 1), ("$**", 1)], {"wildcardProjection": {"_id": 0, "a": 0}}, 7246210, None),
    ([("a", 1), ("$**", 1)], {"wildcardProjection": {"_id": 0}}, 7246210, None),
    ([("_id", 1), ("$**", 1), ("a", 1)], {"wildcardProjection": {"_id": 0}}, 7246210, None),
    # inclusion and exclusion mixed (but for _id): 7246211, before the projection parser
    ([("$**", 1), ("c", 1)], {"wildcardProjection": {"_id": 0, "a": 0, "b": 1}}, 7246211,
     "Inclusion and exclusion statements cannot combine in the wildcardProjection with an "
     "exception of explicitly including _id field"),
    ([("$**", 1), ("c", 1)], {"wildcardProjection": {"_id": 1, "a": 0, "b": 1}}, 7246211, None),
    ([("a.$**", 1), ("b", 1)], {"unique": True}, 67, None),
    ([("a.$**", 1), ("b", 1)], {"sparse": True}, 67, None),
    # ...and valid ones are not implemented: refused, nothing created
    ([("$**", 1), ("a", 1)], {"wildcardProjection": {"a": 0}}, 238, None),
    ([("a", 1), ("b.$**", 1)], {}, 238, None),
    ([("a", 1), ("b.$**", -1), ("c", 1)], {}, 238, None),
    ([("$**", 1), ("other", 1)], {"wildcardProjection": {"_id": 0, "a": 1}}, 238, None),
    ([("$**", 1), ("another", 1)], {"wildcardProjection": {"_id": 1, "a": 0, "another": 0}},
     238, None),
    ([("$**", 1), ("yetAnother", 1)], {"wildcardProjection": {"_id": 1}}, 238, None),
    ([("$**", 1), ("d", 1)], {"wildcardProjection": {"a": {"b": 1, "c": 1}}}, 238, None),
    ([("$**", 1), ("c", 1)], {"wildcardProjection": {"_id": 0, "b": 1}}, 238, None),
    ([("$**", 1), ("e", 1)], {"wildcardProjection": {"_id": 1, "e": 0}}, 238, None),
    ([("_id", 1), ("$**", 1)], {"wildcardProjection": {"_id": 0}}, 238, None),
    ([("_id", 1), ("a", 1), ("$**", 1)], {"wildcardProjection": {"_id": 0, "a": 0}}, 238, None),
    ([("e", 1), ("$**", 1)], {"wildcardProjection": {"_id": 1, "f": 1}}, 238, None),
    ([("_id", 1), ("a.b", 1), ("$**", 1)], {"wildcardProjection": {"_id": 0, "a": 0}}, 238, None),
    ([("$**", 1), ("e.b", 1)], {"wildcardProjection": {"_id": 1, "e": 0}}, 238, None),
    ([("b.d", 1), ("$**", 1)], {"wildcardProjection": {"_id": 0, "a.b": 1}}, 238, None),
    # a field above the wildcard subtree is no overlap (only at or under it: 7246204)
    ([("a", 1), ("a.b.$**", 1)], {}, 238, None),
])
def test_refusals_as_mongod(client, key, opts, code, msg):
    e = fails(code, lambda: create(client, key, **opts), "%s %s" % (key, opts))
    if msg:
        assert e.details["errmsg"] == msg
    names = [i["name"] for i in client.w.errs.list_indexes()] if "errs" in \
        client.w.list_collection_names() else []
    assert "w" not in names


def test_accepted_specs_as_mongod(client):
    for key, opts in [([("$**", 1)], {"wildcardProjection": {"_id": 1, "a": 0}}),
                      ([("$**", 1)], {"wildcardProjection": {"_id": 0, "a": 1}}),
                      ([("$**", 1)], {"wildcardProjection": {"a": {"b": 1, "c": True}}}),
                      ([("$**", 1)], {"partialFilterExpression": {"a": {"$gt": 0}}}),
                      ([("$**", 1)], {"collation": {"locale": "fr"}}),
                      ([("$**", 1)], {"hidden": True}),
                      ([("a.$**", 1)], {})]:
        client.w.ok.drop_indexes()
        create_ok = client.w.command(SON([("createIndexes", "ok"), ("indexes", [
            SON([("key", SON(key)), ("name", "w")] + list(opts.items()))])]))
        assert create_ok["ok"] == 1, (key, opts)


def test_id_included_by_projection_is_indexed(client):
    c = client.w.idp
    c.create_index([("$**", 1)], wildcardProjection={"_id": 1, "a": 0})
    c.insert_many([{"_id": {"k": 1}, "a": 1, "b": 2}, {"_id": {"k": 2}, "b": 3}])
    assert ixscan_path(c, {"_id.k": 2}) == "_id.k"
    assert [d["_id"] for d in c.find({"_id.k": 2})] == [{"k": 2}]
    assert ixscan_path(c, {"a": 1}) is None
    assert ixscan_path(c, {"b": 3}) == "b"


def test_wildcard_index_survives_restarts(atomdb):
    from atomdb_testlib import discard, restart, stop_all
    c = MongoClient(atomdb.uri(), serverSelectionTimeoutMS=10000)
    c.r.p.create_index([("$**", 1)], wildcardProjection={"product_attributes": 1})
    c.r.p.insert_many(PRODUCTS)
    c.close()
    server = restart(atomdb, kill=True)  # rebuilt from the log
    try:
        c = MongoClient(server.uri(), serverSelectionTimeoutMS=10000)
        q = {"product_attributes.size.units": "inches"}
        assert ids(c.r.p.find(q)) == [1]
        assert ixscan_path(c.r.p, q) == "product_attributes.size.units"
        assert ixscan_path(c.r.p, {"product_name": "Spy Book"}) is None
        spec = [i for i in c.r.p.list_indexes() if i["name"] == "$**_1"][0]
        assert spec["wildcardProjection"] == {"product_attributes": 1}
        c.r.p.insert_one({"_id": 4, "product_attributes": {"size": {"units": "cm"}}})
        c.close()
        server2 = restart(server)  # from the snapshot taken at shutdown
    finally:
        discard(server)
    try:
        c = MongoClient(server2.uri(), serverSelectionTimeoutMS=10000)
        q = {"product_attributes.size.units": "cm"}
        assert ids(c.r.p.find(q)) == [4]
        assert ixscan_path(c.r.p, q) == "product_attributes.size.units"
        c.close()
    finally:
        stop_all([server2])


def test_slow_query_plan_summary_names_the_path(atomdb_factory):
    import json
    server = atomdb_factory("--slowms", "-1")
    c = MongoClient(server.uri(), serverSelectionTimeoutMS=10000)
    c.w.s.create_index([("$**", 1)])
    c.w.s.insert_many([{"_id": i, "a": {"b": i % 5}} for i in range(20)])
    assert len(list(c.w.s.find({"a.b": 3}).comment("wc"))) == 4
    c.close()
    lines = [json.loads(l) for l in server.log().splitlines() if '"Slow query"' in l]
    found = [l["attr"] for l in lines if l["attr"].get("command", {}).get("comment") == "wc"]
    assert found, "the find is logged"
    assert found[0]["planSummary"] == "IXSCAN { $_path: 1, a.b: 1 }", found[0]
    assert found[0]["keysExamined"] == 4 and found[0]["docsExamined"] == 4, found[0]
