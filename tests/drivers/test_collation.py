"""Collation through ICU (issue 19), through pymongo: collated indexes keep
ICU sort keys, so a case-insensitive unique index (strength 2) refuses a
second spelling of the same address; bad collation specs fail with mongod's
codes; the resolved spec comes back in listIndexes; a query without the
index's collation does not use it for string bounds; updates with `sort`
are refused as mongod 7 refuses them; find and count take a collation (and
then use a collated index); the other commands still refuse it by name
(NotImplemented), never ignore it."""

import pytest
from bson.son import SON
from pymongo import MongoClient
from pymongo.errors import DuplicateKeyError, OperationFailure


@pytest.fixture
def client(atomdb):
    c = MongoClient(atomdb.uri(), serverSelectionTimeoutMS=10000)
    yield c
    c.close()


def fails(code, fn, what):
    with pytest.raises(OperationFailure) as ei:
        fn()
    assert ei.value.code == code, "%s: code %s, got %s %s" % (what, code, ei.value.code, ei.value)
    return ei.value


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


def test_collmod_hidden_refused_not_ignored(client):
    db = client.coll_hid
    create_index(db, {"key": {"a": 1}, "name": "a_1"})
    fails(238, lambda: db.command(SON([("collMod", "t"), ("index", {"name": "a_1", "hidden": True})])),
          "collMod index.hidden")
