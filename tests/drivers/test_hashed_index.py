"""Hashed indexes (issue 20) through pymongo: single-field and compound
with one hashed field, keys equal to mongod's hash (returnKey shows
NumberLong hashes; mongod's start-up check value for 42, and an independent
re-statement of hasher.cpp's MD5 for other types), equality queries planned
on them (explain), ranges and sorts not, and mongod's refusals: arrays in
the hashed field (16766), two hashed fields (31303), unique (16764)."""

import hashlib
import struct

import pytest
from bson.int64 import Int64
from bson.objectid import ObjectId
from bson.son import SON
from pymongo import MongoClient
from pymongo.errors import WriteError

from atomdb_clients import fails, per_test_client


client = per_test_client("")


def mongod_hash(value):
    """hasher.cpp for the scalar types used here: MD5(seed 0, canonical type,
    value bytes), first 8 bytes little-endian."""
    if isinstance(value, (int, float)):
        body = struct.pack("<i", 10) + struct.pack("<q", int(value))
    elif isinstance(value, str):
        raw = value.encode()
        body = struct.pack("<i", 15) + struct.pack("<i", len(raw) + 1) + raw + b"\0"
    elif isinstance(value, ObjectId):
        body = struct.pack("<i", 35) + value.binary
    elif value is None:
        body = struct.pack("<i", 5)
    else:
        raise TypeError(value)
    return struct.unpack("<q", hashlib.md5(struct.pack("<i", 0) + body).digest()[:8])[0]


def test_return_key_shows_mongods_hashes(client):
    c = client.h.t
    c.create_index([("a", "hashed")])
    oid = ObjectId("5b2be413c06d924ab26ff9ca")
    c.insert_many([{"_id": 1, "a": 42}, {"_id": 2, "a": "hello"}, {"_id": 3, "a": oid},
                   {"_id": 4}, {"_id": 5, "a": 42.7}])
    got = list(c.find({}, sort=[("_id", 1)], return_key=True).hint("a_hashed"))
    hashes = [d["a"] for d in got]
    assert hashes[0] == -944302157085130861  # mongod's own start-up check value
    assert all(isinstance(h, Int64) for h in hashes)
    assert sorted(hashes) == sorted([mongod_hash(42), mongod_hash("hello"), mongod_hash(oid),
                                     mongod_hash(None), mongod_hash(42)])


def test_equality_uses_the_hashed_index(client):
    c = client.h.eq
    c.create_index([("email", "hashed")])
    c.insert_many([{"_id": i, "email": "u%d@x.io" % i} for i in range(200)])
    assert [d["_id"] for d in c.find({"email": "u17@x.io"})] == [17]
    plan = c.find({"email": "u17@x.io"}).explain()["queryPlanner"]["winningPlan"]
    assert plan["stage"] == "FETCH", plan
    assert plan["inputStage"]["stage"] == "IXSCAN"
    assert plan["inputStage"]["keyPattern"] == {"email": "hashed"}
    assert plan["inputStage"]["indexName"] == "email_hashed"
    # numbers equal by value share a hash; the filter still decides
    c.insert_many([{"_id": "one", "email": 1}, {"_id": "onefive", "email": 1.5}])
    assert sorted(d["_id"] for d in c.find({"email": 1.0})) == ["one"]
    # a range or a sort cannot use a hash
    plan = c.find({"email": {"$gt": "u5"}}).explain()["queryPlanner"]["winningPlan"]
    assert plan["stage"] == "COLLSCAN", plan
    assert c.count_documents({"email": {"$gt": "u5"}}) == 55  # u5@..., u50-u59, u6-u99


def test_compound_with_one_hashed_field(client):
    c = client.h.comp
    c.create_index([("tenant", 1), ("user", "hashed")])
    names = [ix["name"] for ix in c.list_indexes()]
    assert "tenant_1_user_hashed" in names
    c.insert_many([{"tenant": t, "user": u, "tags": [t, u]} for t in range(5) for u in range(20)])
    got = list(c.find({"tenant": 3, "user": 7}))
    assert len(got) == 1 and got[0]["tags"] == [3, 7]
    plan = c.find({"tenant": 3, "user": 7}).explain()["queryPlanner"]["winningPlan"]
    assert plan["inputStage"]["keyPattern"] == {"tenant": 1, "user": "hashed"}
    assert c.count_documents({"tenant": 3}) == 20


def test_missing_field_is_indexed_as_null(client):
    c = client.h.miss
    c.create_index([("a", "hashed")])
    c.insert_many([{"_id": 1}, {"_id": 2, "a": None}, {"_id": 3, "a": 0}])
    assert sorted(d["_id"] for d in c.find({"a": None})) == [1, 2]
    assert c.find({"a": None}).explain()["queryPlanner"]["winningPlan"]["stage"] == "FETCH"


def test_arrays_are_refused_in_the_hashed_field(client):
    c = client.h.arr
    c.create_index([("a.b", "hashed")])
    with pytest.raises(WriteError) as ei:
        c.insert_one({"a": [{"b": 1}]})
    assert ei.value.code == 16766
    assert "Found array at path: a" in str(ei.value)
    with pytest.raises(WriteError) as ei:
        c.insert_one({"a": {"b": [1]}})
    assert "Found array at path: a.b" in str(ei.value)
    assert c.count_documents({}) == 0
    c.insert_one({"_id": 1, "a": {"b": 1}})
    with pytest.raises(WriteError):
        c.update_one({"_id": 1}, {"$set": {"a.b": [2]}})
    assert c.find_one({"_id": 1})["a"] == {"b": 1}
    # an existing array stops the build
    d = client.h.arr2
    d.insert_one({"x": [1, 2]})
    fails(16766, lambda: d.create_index([("x", "hashed")]), "build over an array")


def test_refusals_as_mongod(client):
    db = client.h
    e = fails(31303, lambda: db.command(SON([("createIndexes", "r"), ("indexes", [
        {"key": {"a": "hashed", "b": "hashed"}, "name": "ab"}])])), "two hashed fields")
    assert "A maximum of one index field is allowed to be hashed but found 2" in str(e)
    fails(16764, lambda: db.command(SON([("createIndexes", "r"), ("indexes", [
        {"key": {"a": "hashed"}, "name": "a", "unique": True}])])), "unique hashed")
    fails(238, lambda: db.command(SON([("createIndexes", "r"), ("indexes", [
        {"key": {"a": "hashed"}, "name": "a", "collation": {"locale": "fr"}}])])),
        "collation on a hashed index")
    e = fails(67, lambda: db.command(SON([("createIndexes", "r"), ("indexes", [
        {"key": {"a": "hashed", "b": "text"}, "name": "t"}])])), "hashed beside text")
    assert "more than one index plugin" in str(e), "mongod's message: %s" % e


def test_hashed_index_and_schema_validator_survive_restarts(atomdb):
    from atomdb_testlib import discard, restart, stop_all
    c = MongoClient(atomdb.uri(), serverSelectionTimeoutMS=10000)
    c.r.t.create_index([("k", "hashed")])
    c.r.command(SON([("create", "v"), ("validator", {"$jsonSchema": {"required": ["k"]}})]))
    c.r.t.insert_many([{"_id": i, "k": "key%d" % i} for i in range(20)])
    c.close()
    server = restart(atomdb, kill=True)  # rebuilt from the log
    try:
        c = MongoClient(server.uri(), serverSelectionTimeoutMS=10000)
        got = list(c.r.t.find({"k": "key7"}))
        assert [d["_id"] for d in got] == [7]
        plan = c.r.t.find({"k": "key7"}).explain()["queryPlanner"]["winningPlan"]
        assert plan["inputStage"]["keyPattern"] == {"k": "hashed"}
        key = list(c.r.t.find({"_id": 3}, return_key=True).hint("k_hashed"))
        assert key == [{"k": mongod_hash("key3")}]
        with pytest.raises(WriteError) as ei:
            c.r.v.insert_one({"_id": 1})
        assert ei.value.details["errInfo"]["details"]["operatorName"] == "$jsonSchema"
        c.close()
        server2 = restart(server)  # from the snapshot taken at shutdown
    finally:
        discard(server)
    try:
        c = MongoClient(server2.uri(), serverSelectionTimeoutMS=10000)
        assert [d["_id"] for d in c.r.t.find({"k": "key9"})] == [9]
        with pytest.raises(WriteError):
            c.r.v.insert_one({"_id": 2})
        c.close()
    finally:
        stop_all([server2])


def test_values_sharing_a_hash_are_told_apart(client):
    """1, 1.0 and 1.5 share a hash (numbers are truncated to int64 first):
    every command that plans on the index still filters the documents."""
    c = client.h.collide
    c.create_index([("a", "hashed")])
    c.insert_many([{"a": 1}, {"a": 1.5}, {"a": 1.0}, {"a": "1"}])
    assert c.count_documents({"a": 1}) == 2
    assert c.count_documents({"a": 1.5}) == 1
    assert c.distinct("a", {"a": 1.5}) == [1.5]
    assert list(c.aggregate([{"$match": {"a": 1.5}}, {"$count": "n"}])) == [{"n": 1}]
    assert c.update_many({"a": 1}, {"$set": {"b": 1}}).modified_count == 2
    assert c.delete_many({"a": 1.5}).deleted_count == 1
    assert sorted(str(d["a"]) for d in c.find()) == ["1", "1", "1.0"]


def winning(cursor):
    return cursor.explain()["queryPlanner"]["winningPlan"]


def ids(cursor):
    return sorted(d["_id"] for d in cursor)


def test_in_uses_the_hashed_index_one_point_per_value(client):
    c = client.h.inlist
    c.create_index([("a", "hashed")])
    c.insert_many([{"_id": i, "a": i % 50} for i in range(500)])
    q = {"a": {"$in": [1, 2, 3]}}
    assert ids(c.find(q)) == ids(c.find(q).hint([("$natural", 1)]))
    assert len(ids(c.find(q))) == 30
    plan = winning(c.find(q))
    assert plan["stage"] == "FETCH", plan
    assert plan["inputStage"]["stage"] == "IXSCAN", plan
    assert plan["inputStage"]["keyPattern"] == {"a": "hashed"}
    # hashes collide: FETCH re-applies the predicate, as mongod's explain shows
    assert plan["filter"] == {"a": {"$in": [1, 2, 3]}}, plan
    stats = c.find(q).explain()["executionStats"]
    # three points of ten keys each: not the whole index
    assert stats["totalKeysExamined"] == 30, stats
    assert stats["totalDocsExamined"] == 30, stats
    # values hashing alike (1, 1.0, Int64(1)) are one point, scanned once
    q = {"a": {"$in": [1, 1.0, Int64(1)]}}
    assert c.find(q).explain()["executionStats"]["totalKeysExamined"] == 10
    assert ids(c.find(q)) == list(range(1, 500, 50))
    # an empty list matches nothing and reads nothing
    assert list(c.find({"a": {"$in": []}})) == []


def test_in_with_null_matches_missing_through_the_hash_of_null(client):
    c = client.h.innull
    c.create_index([("a", "hashed")])
    c.insert_many([{"_id": 1, "a": None}, {"_id": 2}, {"_id": 3, "a": 7}, {"_id": 4, "a": "x"},
                   {"_id": 5, "a": {"b": 1}}])
    q = {"a": {"$in": [None, 7]}}
    assert ids(c.find(q)) == [1, 2, 3]
    assert winning(c.find(q))["inputStage"]["stage"] == "IXSCAN"
    q = {"a": {"$in": [{"b": 1}, "x"]}}
    assert ids(c.find(q)) == [4, 5]
    assert winning(c.find(q))["inputStage"]["stage"] == "IXSCAN"
    # an array in the list: no hashed-field value can equal or hold it
    q = {"a": {"$in": [[7], 7]}}
    assert ids(c.find(q)) == ids(c.find(q).hint([("$natural", 1)])) == [3]
    assert winning(c.find(q))["inputStage"]["stage"] == "IXSCAN"


def test_in_with_a_regex_is_not_planned_on_a_hashed_index(client):
    c = client.h.inregex
    c.create_index([("a", "hashed")])
    c.insert_many([{"_id": 1, "a": "apple"}, {"_id": 2, "a": "banana"}, {"_id": 3, "a": 3}])
    import re
    q = {"a": {"$in": [re.compile("^ap"), 3]}}
    assert ids(c.find(q)) == [1, 3]
    assert winning(c.find(q))["stage"] == "COLLSCAN"
    # as mongod: the hinted hashed index still answers it (a full index scan)
    assert ids(c.find(q).hint("a_hashed")) == [1, 3]


def test_in_on_compound_hashed_indexes_in_any_position(client):
    import random
    rnd = random.Random(20)
    for name, keys in [("lead", [("h", "hashed"), ("b", 1)]),
                       ("mid", [("a", 1), ("h", "hashed"), ("b", -1)]),
                       ("last", [("a", 1), ("b", 1), ("h", "hashed")])]:
        c = client.h["cmp_" + name]
        c.create_index(keys)
        docs = []
        for i in range(600):
            d = {"_id": i, "a": rnd.randrange(4), "b": rnd.randrange(6)}
            if rnd.random() < 0.9:
                d["h"] = rnd.choice([rnd.randrange(20), "s%d" % rnd.randrange(5), None, 2.5])
            docs.append(d)
        c.insert_many(docs)
        queries = [
            {"h": {"$in": [1, 2, "s1", None]}},
            {"h": {"$in": [3, 4.0]}, "b": 2},
            {"h": {"$in": [5, 6, 7]}, "b": {"$gte": 3}},
            {"a": 1, "h": {"$in": [1, "s2"]}},
            {"a": 2, "h": {"$in": [8, 9]}, "b": {"$lt": 3}},
            {"a": 3, "b": 4, "h": {"$in": [None, 10, 11]}},
            {"a": {"$gt": 1}, "h": {"$in": [1, 2]}},
        ]
        for q in queries:
            want = ids(c.find(q).hint([("$natural", 1)]))
            assert ids(c.find(q)) == want, (name, q)
            assert ids(c.find(q).hint(keys)) == want, (name, q)
        # the points of the hashed field combine with the other fields' bounds
        q = {"a": 1, "b": 2, "h": {"$in": [1, 2, 3]}}
        plan = winning(c.find(q))
        assert plan["stage"] == "FETCH" and plan["inputStage"]["stage"] == "IXSCAN", (name, plan)
        assert plan["inputStage"]["keyPattern"] == SON(keys), (name, plan)
        bound = [f for f, _ in keys]
        # 2.5 hashes as 2 does (mongod truncates doubles): its keys are read too
        in_keys = [d for d in docs if isinstance(d.get("h"), (int, float)) and
                   int(d["h"]) in (1, 2, 3) and
                   ("a" not in bound or d["a"] == 1) and d["b"] == 2]
        keys_read = c.find(q).explain()["executionStats"]["totalKeysExamined"]
        assert keys_read == len(in_keys), (name, keys_read, len(in_keys))


def test_an_in_scan_that_yields_reads_one_snapshot_across_its_points(client):
    """The points of an $in scan are read in slices: documents moved from
    one point to another meanwhile are returned once each (in the version
    the scan's snapshot holds or the new one), none missing."""
    import threading
    c = client.h.inyield
    c.create_index([("a", "hashed")])
    n = 60000
    for start in range(0, n, 10000):
        c.insert_many([{"_id": i, "a": i % 3, "pad": "x" * 100}
                       for i in range(start, start + 10000)])
    want = sorted(i for i in range(n) if i % 3 in (1, 2))
    stop = threading.Event()
    moved = [0]

    def mover():
        import random
        rnd = random.Random(5)
        while not stop.is_set():
            i = rnd.randrange(n)
            if i % 3:  # between the two points the query reads: it matches either way
                c.update_one({"_id": i}, {"$set": {"a": 3 - (i % 3)}})
                moved[0] += 1

    t = threading.Thread(target=mover)
    t.start()
    try:
        rounds = 0
        while rounds < 6 or moved[0] < 50:
            got = [d["_id"] for d in c.find({"a": {"$in": [1, 2]}}, {"_id": 1}, batch_size=n)]
            assert len(got) == len(set(got)), "a document returned twice"
            assert sorted(got) == want, "a document missing"
            rounds += 1
            assert rounds < 60, "the mover made no progress while scans ran"
    finally:
        stop.set()
        t.join()
    assert moved[0] >= 50
