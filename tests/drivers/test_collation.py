"""Collation through ICU (issue 19), through pymongo: collated indexes keep
ICU sort keys, so a case-insensitive unique index (strength 2) refuses a
second spelling of the same address; bad collation specs fail with mongod's
codes; the resolved spec comes back in listIndexes; a query without the
index's collation does not use it for string bounds; updates with `sort`
are refused as mongod 7 refuses them; find, count, distinct, aggregate,
update, delete and findAndModify take a collation (and then use a collated
index); a collection's default collation (create) applies to every
operation without its own, is inherited by its indexes and survives a
restart; a view's collation cannot be overridden."""

import pytest
from bson.son import SON
from pymongo import MongoClient
from pymongo.errors import DuplicateKeyError

from atomdb_clients import fails, per_test_client
from atomdb_testlib import restart, stop_all


client = per_test_client("")


def create_index(db, spec):
    return db.command(SON([("createIndexes", "t"), ("indexes", [spec])]))


def test_case_insensitive_unique_index_refuses_other_case(client):
    db = client.coll_ci
    create_index(db, {"key": {"email": 1}, "name": "email_ci", "unique": True,
                      "collation": {"locale": "en", "strength": 2}})
    db.t.insert_one({"email": "Bob@x.io"})
    with pytest.raises(DuplicateKeyError) as ei:
        db.t.insert_one({"email": "bob@X.IO"})
    assert ei.value.code == 11000
    db.t.insert_one({"email": "alice@x.io"})
    assert db.t.count_documents({}) == 2


def test_simple_unique_index_still_bytewise(client):
    db = client.coll_simple
    create_index(db, {"key": {"email": 1}, "name": "email_1", "unique": True})
    db.t.insert_one({"email": "Bob@x.io"})
    db.t.insert_one({"email": "bob@X.IO"})
    assert db.t.count_documents({}) == 2


def test_list_indexes_shows_resolved_collation(client):
    db = client.coll_list
    create_index(db, {"key": {"a": 1}, "name": "a_fr", "collation": {"locale": "fr", "strength": 1}})
    create_index(db, {"key": {"b": 1}, "name": "b_1", "collation": {"locale": "simple"}})
    specs = {ix["name"]: ix for ix in db.t.list_indexes()}
    c = specs["a_fr"]["collation"]
    assert c["locale"] == "fr" and c["strength"] == 1 and c["caseLevel"] is False
    assert c["alternate"] == "non-ignorable" and c["maxVariable"] == "punct"
    assert c["numericOrdering"] is False and c["backwards"] is False and "version" in c
    assert "collation" not in specs["b_1"], "the simple collation is not shown, as mongod"


@pytest.mark.parametrize("coll,code", [
    ({"locale": "en", "strength": 6}, 9),
    ({"locale": "en", "strength": "2"}, 14),
    ({"locale": "en", "caseFirst": "sideways"}, 9),
    ({"locale": "en", "alternate": "bogus"}, 9),
    ({"locale": "en", "maxVariable": "bogus"}, 9),
    ({"locale": "en", "bogus": 1}, 9),
    ({"locale": "simple", "strength": 2}, 9),
    ({"locale": "xx_bogus"}, 2),
    ({"locale": "en-US"}, 2),
    ({"locale": ""}, 2),
    ({"locale": 5}, 14),
    ({"strength": 2}, 4),
    ({"locale": "fr", "strength": 1, "backwards": True}, 2),
    ({"locale": "en", "strength": 2, "caseFirst": "upper"}, 2),
    ({"locale": "en", "version": "1.0"}, 12),
])
def test_bad_collation_specs_fail_as_mongod(client, coll, code):
    fails(code, lambda: create_index(client.coll_bad, {"key": {"a": 1}, "name": "a_x",
                                                       "collation": coll}),
          "collation %r" % (coll,))


def test_query_without_index_collation_does_not_use_it_for_strings(client):
    db = client.coll_plan
    create_index(db, {"key": {"name": 1}, "name": "name_ci",
                      "collation": {"locale": "en", "strength": 2}})
    db.t.insert_many([{"name": n, "n": i} for i, n in enumerate(["Ann", "ann", "Bob", "bob"])])
    plan = db.t.find({"name": "ann"}).explain()["queryPlanner"]["winningPlan"]
    assert plan["stage"] == "COLLSCAN", "simple-collation string bounds skip a collated index: %s" % plan
    assert sorted(d["name"] for d in db.t.find({"name": "ann"})) == ["ann"]
    # the hinted collated index gives the bytewise answer still (the filter decides)
    assert sorted(d["name"] for d in db.t.find({"name": "ann"}).hint("name_ci")) == ["ann"]


CI = {"locale": "en", "strength": 2}


def test_find_and_count_with_a_collation(client):
    db = client.coll_q
    db.t.insert_many([{"_id": i, "a": a} for i, a in enumerate(["x", "X", "y", "\u00e9", "e"])])
    assert sorted(d["_id"] for d in db.t.find({"a": "X"}, collation=CI)) == [0, 1]
    assert sorted(d["_id"] for d in db.t.find({"a": "X"})) == [1], "no collation: bytewise"
    assert db.command(SON([("count", "t"), ("query", {"a": "x"}), ("collation", CI)]))["n"] == 2
    # strength 1 ignores the accent too
    assert sorted(d["_id"] for d in db.t.find({"a": "e"}, collation={"locale": "en", "strength": 1})) == [3, 4]
    # sort by the collation: accents and case fold into the alphabet (e, \u00e9, x, X, y)
    got = [d["a"] for d in db.t.find({}, sort=[("a", 1), ("_id", 1)], collation=CI)]
    assert got == ["e", "\u00e9", "x", "X", "y"], got
    assert [d["a"] for d in db.t.find({}, sort=[("a", 1)])] == ["X", "e", "x", "y", "\u00e9"]
    # the projection's $elemMatch and expressions compare by it too
    db.p.insert_one({"_id": 1, "tags": [{"t": "Red"}, {"t": "blue"}], "name": "Ann"})
    doc = db.p.find_one({}, {"tags": {"$elemMatch": {"t": "red"}}, "is": {"$eq": ["$name", "ann"]}},
                        collation=CI)
    assert doc["tags"] == [{"t": "Red"}] and doc["is"] is True, doc
    doc = db.p.find_one({}, {"tags": {"$elemMatch": {"t": "red"}}, "is": {"$eq": ["$name", "ann"]}})
    assert "tags" not in doc and doc["is"] is False, doc


def test_collated_query_uses_the_collated_index(client):
    db = client.coll_ix
    create_index(db, {"key": {"email": 1}, "name": "email_ci", "unique": True, "collation": CI})
    db.t.insert_many([{"email": "user%d@x.io" % i} for i in range(50)])
    db.t.insert_one({"email": "Bob@X.io"})
    cur = db.t.find({"email": "bob@x.IO"}, collation=CI)
    assert [d["email"] for d in cur] == ["Bob@X.io"]
    plan = db.t.find({"email": "bob@x.IO"}, collation=CI).explain()["queryPlanner"]["winningPlan"]
    assert "IXSCAN" in str(plan) and "email_ci" in str(plan), plan


def test_bad_query_collation_and_view_override_refused(client):
    db = client.coll_qbad
    db.t.insert_one({"a": "x"})
    fails(2, lambda: list(db.t.find({}, collation={"locale": "xx_nope"})), "unknown locale")
    db.command("create", "v", viewOn="t", pipeline=[])
    fails(167, lambda: list(db.v.find({}, collation=CI)), "a view's collation cannot be overridden")


def test_update_with_sort_refused_as_mongod_7(client):
    db = client.coll_upd
    db.t.insert_many([{"_id": 1, "a": 1}, {"_id": 2, "a": 1}])
    e = fails(40415, lambda: db.command(SON([
        ("update", "t"), ("updates", [{"q": {"a": 1}, "u": {"$set": {"b": 1}}, "sort": {"_id": -1}}])])),
        "update statement with sort")
    assert "update.updates.sort" in str(e)
    assert db.t.count_documents({"b": 1}) == 0
    # findAndModify keeps its sort
    doc = db.t.find_one_and_update({"a": 1}, {"$set": {"b": 2}}, sort=[("_id", -1)])
    assert doc["_id"] == 2


# The documentation's example collection (Collation, "Use Collation"):
# category "café", "cafe", "cafE"
CAFE = [{"_id": 1, "category": "caf\u00e9", "status": "A"},
        {"_id": 2, "category": "cafe", "status": "a"},
        {"_id": 3, "category": "cafE", "status": "a"}]
FR1 = {"locale": "fr", "strength": 1}


def test_distinct_deduplicates_by_the_collation(client):
    db = client.coll_distinct
    db.t.insert_many(CAFE)
    assert sorted(db.t.distinct("category")) == ["cafE", "cafe", "caf\u00e9"], "bytewise: three"
    got = db.command(SON([("distinct", "t"), ("key", "category"), ("collation", FR1)]))["values"]
    assert len(got) == 1 and got[0].lower().startswith("caf"), "strength 1: one value, got %r" % got
    got = db.command(SON([("distinct", "t"), ("key", "status"), ("collation", CI)]))["values"]
    assert len(got) == 1, "A and a are one status under strength 2: %r" % got
    got = db.command(SON([("distinct", "t"), ("key", "status"), ("query", {"category": "CAFE"}),
                          ("collation", CI)]))["values"]
    assert got == ["a"], "the query is collated too: %r" % got


def test_aggregate_match_sort_group_and_expressions_use_the_collation(client):
    db = client.coll_agg
    db.t.insert_many(CAFE)
    docs = list(db.t.aggregate([{"$match": {"category": "cafe"}}], collation=FR1))
    assert sorted(d["_id"] for d in docs) == [1, 2, 3], "$match compares by strength 1"
    docs = list(db.t.aggregate([{"$match": {"category": "cafe"}}]))
    assert [d["_id"] for d in docs] == [2], "without a collation: bytewise"
    groups = list(db.t.aggregate([{"$group": {"_id": "$status", "n": {"$sum": 1}}}], collation=CI))
    assert len(groups) == 1 and groups[0]["n"] == 3, "A and a group together: %r" % groups
    groups = list(db.t.aggregate([{"$group": {"_id": "$status", "n": {"$sum": 1}}}]))
    assert len(groups) == 2, "bytewise: two groups"
    out = list(db.t.aggregate([{"$sort": {"_id": 1}},
                               {"$project": {"eq": {"$eq": ["$category", "CAFE"]},
                                             "in": {"$in": ["$status", ["a"]]},
                                             "cmp": {"$cmp": ["$category", "cafe"]}}}],
                              collation=FR1))
    assert [d["eq"] for d in out] == [True, True, True], out
    assert [d["in"] for d in out] == [True, True, True], out
    assert [d["cmp"] for d in out] == [0, 0, 0], out
    out = list(db.t.aggregate([{"$sort": {"_id": 1}},
                               {"$project": {"eq": {"$eq": ["$category", "CAFE"]}}}]))
    assert [d["eq"] for d in out] == [False, False, False]
    # $sort orders by the collation; $max / $addToSet compare by it
    db.s.insert_many([{"_id": i, "w": w} for i, w in enumerate(["b", "A", "a", "B"])])
    out = [d["w"] for d in db.s.aggregate([{"$sort": {"w": 1, "_id": 1}}], collation=CI)]
    assert out == ["A", "a", "b", "B"], out
    out = list(db.s.aggregate([{"$group": {"_id": None, "set": {"$addToSet": "$w"},
                                           "mx": {"$max": "$w"}}}], collation=CI))
    assert len(out[0]["set"]) == 2 and out[0]["mx"].lower() == "b", out


def test_update_delete_and_find_and_modify_take_a_statement_collation(client):
    db = client.coll_write
    db.t.insert_many(CAFE)
    r = db.command(SON([("update", "t"), ("updates", [
        {"q": {"category": "cafe"}, "u": {"$set": {"seen": True}}, "multi": True, "collation": FR1},
        {"q": {"status": "a"}, "u": {"$set": {"bytewise": True}}, "multi": True}])]))
    assert r["n"] == 3 + 2 and r["nModified"] == 5, r
    assert db.t.count_documents({"seen": True}) == 3
    assert db.t.count_documents({"bytewise": True}) == 2, "the second statement has no collation"
    res = db.t.update_many({"status": "A"}, {"$set": {"up": 1}}, collation=CI)
    assert res.matched_count == 3
    doc = db.t.find_one_and_update({"category": "CAFE"}, {"$set": {"fam": 1}},
                                   sort=[("_id", -1)], collation=FR1)
    assert doc["_id"] == 3, "findAndModify's query is collated"
    doc = db.t.find_one_and_delete({"category": "CAF\u00c9"}, collation=FR1, sort=[("_id", 1)])
    assert doc["_id"] == 1
    res = db.t.delete_many({"status": "A"}, collation=CI)
    assert res.deleted_count == 2
    assert db.t.count_documents({}) == 0
    # arrayFilters are collated too
    db.a.insert_one({"_id": 1, "tags": ["Red", "blue"]})
    db.a.update_one({"_id": 1}, {"$set": {"tags.$[t]": "RED!"}},
                    array_filters=[{"t": "red"}], collation=CI)
    assert db.a.find_one()["tags"] == ["RED!", "blue"]
    # update operators compare by it: $addToSet, $pull, $min and $push's $sort
    db.o.insert_one({"_id": 1, "tags": ["Red"], "name": "b", "list": ["b", "a", "C"]})
    db.o.update_one({"_id": 1}, {"$addToSet": {"tags": {"$each": ["red", "RED", "blue"]}},
                                 "$min": {"name": "B"}}, collation=CI)
    doc = db.o.find_one()
    assert doc["tags"] == ["Red", "blue"], "red is already there under strength 2: %r" % doc
    assert doc["name"] == "b", "B is not less than b under strength 2"
    db.o.update_one({"_id": 1}, {"$pull": {"tags": "BLUE"},
                                 "$push": {"list": {"$each": [], "$sort": 1}}}, collation=CI)
    doc = db.o.find_one()
    assert doc["tags"] == ["Red"] and doc["list"] == ["a", "b", "C"], doc
    db.o.update_one({"_id": 1}, {"$addToSet": {"tags": "red"}})
    assert db.o.find_one()["tags"] == ["Red", "red"], "without a collation: bytewise"
    fails(2, lambda: db.t.delete_many({}, collation={"locale": "xx_nope"}), "bad delete collation")
    fails(9, lambda: db.t.update_one({}, {"$set": {"a": 1}}, collation={"locale": "en", "x": 1}),
          "bad update collation")


def test_collection_default_collation(client):
    db = client.coll_default
    db.command(SON([("create", "t"), ("collation", FR1)]))
    info = list(db.list_collections(filter={"name": "t"}))[0]
    c = info["options"]["collation"]
    assert c["locale"] == "fr" and c["strength"] == 1 and "version" in c, info
    db.t.insert_many(CAFE)
    assert db.t.count_documents({"category": "cafe"}) == 3, "the default applies to count"
    assert len(list(db.t.find({"category": "cafe"}))) == 3, "and to find"
    assert len(db.t.distinct("category")) == 1, "and to distinct"
    assert len(list(db.t.aggregate([{"$match": {"category": "cafe"}}]))) == 3, "and to aggregate"
    assert db.command(SON([("count", "t"), ("query", {"category": "cafe"}), ("collation", {})]))["n"] == 3, \
        "an empty collation is none at all (mongod): the default applies"
    # the simple collation overrides the default
    assert [d["_id"] for d in db.t.find({"category": "cafe"}, collation={"locale": "simple"})] == [2]
    # an index without its own collation inherits the default, as mongod
    db.t.create_index("category", name="cat_1")
    db.t.create_index("status", name="st_simple", collation={"locale": "simple"})
    specs = {ix["name"]: ix for ix in db.t.list_indexes()}
    assert specs["cat_1"]["collation"]["locale"] == "fr", specs["cat_1"]
    assert "collation" not in specs["st_simple"], specs["st_simple"]
    plan = db.t.find({"category": "cafe"}).explain()["queryPlanner"]["winningPlan"]
    assert "cat_1" in str(plan), "the default-collated query uses the inherited index: %s" % plan
    # writes use it too
    assert db.t.update_many({"category": "CAFE"}, {"$set": {"u": 1}}).modified_count == 3
    assert db.t.delete_many({"category": "cafe"}).deleted_count == 3
    # the _id index takes the default too (as mongod): _id strings are unique under it
    db.command(SON([("create", "ids"), ("collation", CI)]))
    assert db.ids.index_information()["_id_"]["collation"]["strength"] == 2
    db.ids.insert_one({"_id": "bob", "n": 1})
    with pytest.raises(DuplicateKeyError):
        db.ids.insert_one({"_id": "BOB", "n": 2})
    assert db.ids.find_one({"_id": "Bob"})["n"] == 1, "an _id lookup under the default"
    assert db.ids.find_one({"_id": "Bob"}, collation={"locale": "simple"}) is None
    assert db.ids.update_one({"_id": "BOB"}, {"$set": {"n": 3}}).modified_count == 1
    assert db.ids.replace_one({"_id": "bob"}, {"n": 4}).modified_count == 1
    assert db.ids.find_one()["n"] == 4 and db.ids.delete_one({"_id": "bOb"}).deleted_count == 1
    fails(2, lambda: db.command(SON([("create", "bad"), ("collation", {"locale": "xx_nope"})])),
          "create with an unknown locale")
    assert "bad" not in db.list_collection_names()


@pytest.mark.parametrize("kill", [False, True], ids=["clean stop (snapshot)", "kill -9 (log replay)"])
def test_default_collation_survives_a_restart(atomdb, kill):
    c = MongoClient(atomdb.uri(), serverSelectionTimeoutMS=10000)
    db = c.coll_restart
    db.command(SON([("create", "t"), ("collation", CI)]))
    db.t.insert_many([{"_id": 1, "a": "X"}, {"_id": 2, "a": "x"}, {"_id": "key", "a": "k"}])
    db.t.create_index("a", name="a_1")
    c.close()
    servers = []
    try:
        s2 = restart(atomdb, kill=kill)
        servers.append(s2)
        c = MongoClient(s2.uri(), serverSelectionTimeoutMS=10000)
        db = c.coll_restart
        info = list(db.list_collections(filter={"name": "t"}))[0]
        assert info["options"]["collation"]["strength"] == 2, info
        assert db.t.count_documents({"a": "x"}) == 2, "the default still applies after a restart"
        assert db.t.find_one({"_id": "KEY"})["a"] == "k", "string _ids are keyed by it"
        with pytest.raises(DuplicateKeyError):
            db.t.insert_one({"_id": "Key"})
        specs = {ix["name"]: ix for ix in db.t.list_indexes()}
        assert specs["a_1"]["collation"]["strength"] == 2
        assert specs["_id_"]["collation"]["strength"] == 2, "the _id index keeps it too"
        assert db.t.find_one({"_id": 1})["a"] == "X"
        c.close()
    finally:
        stop_all(servers)


def test_views_have_a_default_collation_that_cannot_be_overridden(client):
    db = client.coll_views
    db.t.insert_many(CAFE)
    db.command(SON([("create", "v"), ("viewOn", "t"), ("pipeline", [{"$match": {"category": "cafe"}}]),
                    ("collation", FR1)]))
    info = list(db.list_collections(filter={"name": "v"}))[0]
    assert info["options"]["collation"]["locale"] == "fr", info
    assert sorted(d["_id"] for d in db.v.find()) == [1, 2, 3], "the view's pipeline is collated"
    assert db.v.count_documents({"status": "a"}) == 3, "the query over the view takes its collation"
    assert len(list(db.v.find({}, collation=FR1))) == 3, "the view's own collation is allowed"
    fails(167, lambda: list(db.v.find({}, collation=CI)), "find with another collation")
    fails(167, lambda: db.command(SON([("count", "v"), ("collation", CI)])), "count")
    fails(167, lambda: db.command(SON([("distinct", "v"), ("key", "a"), ("collation", CI)])),
          "distinct")
    fails(167, lambda: list(db.v.aggregate([], collation={"locale": "simple"})),
          "aggregate with the simple collation over a collated view")
    db.command(SON([("create", "plain"), ("viewOn", "t"), ("pipeline", [])]))
    fails(167, lambda: list(db.plain.find({}, collation=CI)), "a view without collation is simple")


def test_view_on_a_view_keeps_its_collation_and_change_streams_refuse_one(client):
    db = client.coll_views2
    db.t.insert_many(CAFE)
    db.command(SON([("create", "v1"), ("viewOn", "t"), ("pipeline", []), ("collation", FR1)]))
    fails(167, lambda: db.command(SON([("create", "v2"), ("viewOn", "v1"), ("pipeline", [])])),
          "a view on a collated view without its collation")
    db.command(SON([("create", "v3"), ("viewOn", "v1"), ("pipeline", []), ("collation", FR1)]))
    assert db.v3.count_documents({"category": "CAFE"}) == 3
    fails(238, lambda: db.command(SON([("aggregate", "t"), ("pipeline", [{"$changeStream": {}}]),
                                       ("cursor", {}), ("collation", CI)])),
          "a change stream with a collation is refused, not ignored")
