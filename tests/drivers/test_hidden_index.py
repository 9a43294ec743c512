"""Hidden indexes (issue 19) through pymongo, after the documentation's
examples (db.restaurants.createIndex({borough: 1, ratings: 1}, {hidden:
true}), hideIndex / unhideIndex, which are collMod {index: {name |
keyPattern, hidden}}): a hidden index is kept up to date (a unique one still
refuses duplicates) but never planned or hinted (BadValue 2, as mongod);
listIndexes shows `hidden: true`; collMod reports hidden_old/hidden_new;
the state survives a restart."""

import pytest
from bson.son import SON
from pymongo import MongoClient
from pymongo.errors import DuplicateKeyError

from atomdb_clients import fails, per_test_client
from atomdb_testlib import restart, stop_all


client = per_test_client("")


KEY = SON([("borough", 1), ("ratings", 1)])


def plan_of(coll, filt):
    return str(coll.find(filt).explain()["queryPlanner"]["winningPlan"])


def specs(coll):
    return {ix["name"]: ix for ix in coll.list_indexes()}


def load(db):
    db.restaurants.insert_many([{"_id": i, "borough": b, "ratings": [i % 5]}
                                for i, b in enumerate(["Bronx", "Queens", "Manhattan"] * 20)])
    db.command(SON([("createIndexes", "restaurants"),
                    ("indexes", [{"key": KEY, "name": "borough_1_ratings_1", "hidden": True}])]))


def test_a_hidden_index_is_listed_but_never_planned_or_hinted(client):
    db = client.hid_plan
    load(db)
    ix = specs(db.restaurants)["borough_1_ratings_1"]
    assert ix.get("hidden") is True, ix
    assert "COLLSCAN" in plan_of(db.restaurants, {"borough": "Bronx"})
    assert db.restaurants.count_documents({"borough": "Bronx"}) == 20
    fails(2, lambda: list(db.restaurants.find({"borough": "Bronx"}).hint("borough_1_ratings_1")),
          "hint by name on a hidden index")
    fails(2, lambda: list(db.restaurants.find({"borough": "Bronx"}).hint(list(KEY.items()))),
          "hint by key pattern on a hidden index")


def test_collmod_unhides_and_hides_by_name_or_key_pattern(client):
    db = client.hid_mod
    load(db)
    r = db.command(SON([("collMod", "restaurants"),
                        ("index", {"name": "borough_1_ratings_1", "hidden": False})]))
    assert r["hidden_old"] is True and r["hidden_new"] is False, r
    assert "hidden" not in specs(db.restaurants)["borough_1_ratings_1"]
    assert "borough_1_ratings_1" in plan_of(db.restaurants, {"borough": "Bronx"})
    assert len(list(db.restaurants.find({"borough": "Bronx"}).hint("borough_1_ratings_1"))) == 20
    r = db.command(SON([("collMod", "restaurants"), ("index", {"keyPattern": KEY, "hidden": True})]))
    assert r["hidden_old"] is False and r["hidden_new"] is True, r
    assert specs(db.restaurants)["borough_1_ratings_1"]["hidden"] is True
    assert "COLLSCAN" in plan_of(db.restaurants, {"borough": "Bronx"})
    # hiding a hidden index changes nothing and reports no change, as mongod
    r = db.command(SON([("collMod", "restaurants"),
                        ("index", {"name": "borough_1_ratings_1", "hidden": True})]))
    assert "hidden_old" not in r and "hidden_new" not in r, r


def test_a_hidden_unique_index_still_refuses_duplicates(client):
    db = client.hid_unique
    db.command(SON([("createIndexes", "t"),
                    ("indexes", [{"key": {"email": 1}, "name": "email_1", "unique": True}])]))
    db.t.insert_one({"email": "a@x.io"})
    db.command(SON([("collMod", "t"), ("index", {"name": "email_1", "hidden": True})]))
    with pytest.raises(DuplicateKeyError):
        db.t.insert_one({"email": "a@x.io"})
    assert "COLLSCAN" in plan_of(db.t, {"email": "a@x.io"})
    # kept up to date while hidden: unhidden, it answers for documents written meanwhile
    db.t.insert_one({"email": "b@x.io"})
    db.command(SON([("collMod", "t"), ("index", {"name": "email_1", "hidden": False})]))
    assert [d["email"] for d in db.t.find({"email": "b@x.io"}).hint("email_1")] == ["b@x.io"]


def test_bad_collmod_index_requests_fail_as_mongod(client):
    db = client.hid_bad
    db.command(SON([("createIndexes", "t"), ("indexes", [{"key": {"a": 1}, "name": "a_1"}])]))
    fails(2, lambda: db.command(SON([("collMod", "t"), ("index", {"name": "_id_", "hidden": True})])),
          "the _id index cannot be hidden")
    fails(2, lambda: db.command(SON([("createIndexes", "t"), ("indexes", [
        {"key": {"_id": 1}, "name": "_id_", "hidden": True}])])), "createIndexes cannot hide _id either")
    fails(14, lambda: db.command(SON([("collMod", "t"), ("index", {"name": "a_1", "hidden": 1})])),
          "hidden must be a bool")
    fails(27, lambda: db.command(SON([("collMod", "t"), ("index", {"name": "nope", "hidden": True})])),
          "no such index")
    fails(238, lambda: db.command(SON([("collMod", "t"),
                                       ("index", {"name": "a_1", "hidden": True, "prepareUnique": True})])),
          "an index option atomdb's collMod does not change is refused, not ignored")
    assert "hidden" not in specs(db.t)["a_1"], "a refused collMod changed nothing"


@pytest.mark.parametrize("kill", [False, True], ids=["clean stop (snapshot)", "kill -9 (log replay)"])
def test_hidden_state_survives_a_restart(atomdb, kill):
    c = MongoClient(atomdb.uri(), serverSelectionTimeoutMS=10000)
    db = c.hid_restart
    load(db)
    db.command(SON([("createIndexes", "restaurants"),
                    ("indexes", [{"key": {"borough": 1}, "name": "borough_1"}])]))
    db.command(SON([("collMod", "restaurants"), ("index", {"name": "borough_1", "hidden": True})]))
    db.command(SON([("collMod", "restaurants"),
                    ("index", {"name": "borough_1_ratings_1", "hidden": False})]))
    c.close()
    servers = []
    try:
        s2 = restart(atomdb, kill=kill)
        servers.append(s2)
        c = MongoClient(s2.uri(), serverSelectionTimeoutMS=10000)
        got = specs(c.hid_restart.restaurants)
        assert got["borough_1"].get("hidden") is True, got
        assert "hidden" not in got["borough_1_ratings_1"], got
        assert "borough_1_ratings_1" in plan_of(c.hid_restart.restaurants, {"borough": "Bronx"})
        c.close()
    finally:
        stop_all(servers)
