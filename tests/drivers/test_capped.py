"""Capped collections and tailable cursors (issue 20) through pymongo against
a real atomdb, with mongod 7's semantics: create's size/max checks, the
oldest documents removed by an insert past size or max, insertion (natural)
order kept across updates, a clean restart and kill -9, convertToCapped,
tailable and awaitData cursors (a document inserted by another client
arrives within the await time), CappedPositionLost and the error codes."""

import threading
import time

import pytest
from bson.son import SON
from pymongo import CursorType
from pymongo.errors import OperationFailure

from atomdb_clients import connect, per_test_client
from atomdb_testlib import discard, restart, stop_all

INVALID_OPTIONS = 72
BAD_VALUE = 2
FAILED_TO_PARSE = 9
CAPPED_POSITION_LOST = 136
NOT_IN_TXN = 263


client = per_test_client()


def cmd_error(db, command):
    with pytest.raises(OperationFailure) as e:
        db.command(command)
    return e.value


def ids(coll, **kw):
    return [d["_id"] for d in coll.find({}, **kw)]


def test_create_stores_capped_options_as_mongod(client):
    db = client.capped
    db.command(SON([("create", "log"), ("capped", True), ("size", 1000), ("max", 5)]))
    info = list(db.list_collections(filter={"name": "log"}))[0]
    # mongod 7.0 rounds size up to a multiple of 256
    assert info["options"] == {"capped": True, "size": 1024, "max": 5}, info
    stats = db.command("collStats", "log")
    assert stats["capped"] is True and stats["maxSize"] == 1024 and stats["max"] == 5, stats
    assert db.log.options() == {"capped": True, "size": 1024, "max": 5}
    assert db.command("collStats", "log")["capped"] is True
    db.create_collection("plain")
    assert db.command("collStats", "plain")["capped"] is False


def test_create_errors_match_mongod(client):
    db = client.capped
    e = cmd_error(db, SON([("create", "a"), ("capped", True)]))
    assert e.code == INVALID_OPTIONS
    assert "the 'size' field is required when 'capped' is true" in str(e)
    e = cmd_error(db, SON([("create", "b"), ("capped", True), ("max", 3)]))
    assert e.code == INVALID_OPTIONS
    e = cmd_error(db, SON([("create", "c"), ("size", 4096)]))
    assert e.code == INVALID_OPTIONS
    assert "the 'capped' field needs to be true" in str(e)
    e = cmd_error(db, SON([("create", "d"), ("capped", True), ("size", 0)]))
    assert e.code == 51024 and "BSON field 'size' value must be >= 1" in str(e)
    e = cmd_error(db, SON([("create", "e"), ("capped", True), ("size", "big")]))
    assert e.code == 14
    assert db.list_collection_names() == [], "nothing was created"


def test_max_removes_the_oldest_in_insertion_order(client):
    db = client.capped
    db.create_collection("log", capped=True, size=100000, max=3)
    # _ids out of order: the natural order is insertion order, not _id order
    for i in [5, 1, 4, 2, 3]:
        db.log.insert_one({"_id": i})
    assert ids(db.log) == [4, 2, 3], "the two oldest were removed, order kept"
    assert [d["_id"] for d in db.log.aggregate([{"$match": {}}])] == [4, 2, 3], \
        "aggregate reads in natural order too"
    assert db.log.count_documents({}) == 3
    # an update keeps the document's place, even when it grows (mongod >= 6.0)
    db.log.update_one({"_id": 2}, {"$set": {"pad": "x" * 100}})
    db.log.insert_one({"_id": 9})
    assert ids(db.log) == [2, 3, 9]
    # deletes are allowed (mongod >= 5.0)
    assert db.log.delete_one({"_id": 3}).deleted_count == 1
    assert ids(db.log) == [2, 9]
    # an index keeps working on a capped collection
    db.log.create_index("k")
    db.log.insert_many([{"_id": 10, "k": 1}, {"_id": 11, "k": 2}])
    assert ids(db.log) == [9, 10, 11]
    assert [d["_id"] for d in db.log.find({"k": 2})] == [11]


def test_size_removes_the_oldest(client):
    db = client.capped
    db.create_collection("log", capped=True, size=256)  # 256 bytes of BSON
    doc_len = 50  # {_id: int32, s: 30 chars} = 4+ (1+4+4) + (1+2+4+31) + 1 = 52
    for i in range(20):
        db.log.insert_one({"_id": i, "s": "y" * 30})
    got = ids(db.log)
    stats = db.command("collStats", "log")
    assert stats["size"] <= 256, stats
    assert got == list(range(20 - len(got), 20)), "the newest survive in order: %r" % got
    assert len(got) == 256 // (doc_len + 2), got
    # a document larger than the whole collection is refused
    with pytest.raises(OperationFailure) as e:
        db.log.insert_one({"_id": "big", "s": "z" * 300})
    assert e.value.code == BAD_VALUE
    assert ids(db.log) == got


def test_restart_and_kill_keep_order_and_bound(atomdb):
    c = connect(atomdb)
    db = c.capped
    db.create_collection("log", capped=True, size=4096, max=4)
    for i in [7, 3, 9, 1, 8, 2]:
        db.log.insert_one({"_id": i})
    assert ids(db.log) == [9, 1, 8, 2]
    c.close()
    server = restart(atomdb)
    try:
        c = connect(server)
        db = c.capped
        assert ids(db.log) == [9, 1, 8, 2], "a snapshot keeps the natural order"
        assert db.log.options() == {"capped": True, "size": 4096, "max": 4}
        db.log.insert_one({"_id": 0})
        db.log.insert_one({"_id": 5})
        assert ids(db.log) == [8, 2, 0, 5]
        c.close()
        server2 = restart(server, kill=True)
    finally:
        discard(server)
    try:
        c = connect(server2)
        db = c.capped
        assert ids(db.log) == [8, 2, 0, 5], "the log's removals replay as they happened"
        db.log.insert_one({"_id": 6})
        assert ids(db.log) == [2, 0, 5, 6], "the bound holds after recovery"
        c.close()
    finally:
        stop_all([server2])


def test_capped_writes_refused_in_transactions(client):
    db = client.capped
    db.create_collection("log", capped=True, size=4096)
    db.log.insert_one({"_id": 1})
    with client.start_session() as s:
        with pytest.raises(OperationFailure) as e:
            with s.start_transaction():
                db.log.insert_one({"_id": 2}, session=s)
        assert e.value.code == NOT_IN_TXN
    assert ids(db.log) == [1]


def test_tailable_errors(client):
    db = client.capped
    db.create_collection("plain")
    db.plain.insert_one({"_id": 1})
    e = cmd_error(db, SON([("find", "plain"), ("tailable", True)]))
    assert e.code == BAD_VALUE
    assert "tailable cursor requested on non capped collection" in str(e)
    assert str(e).startswith("error processing query: ")
    e = cmd_error(db, SON([("find", "plain"), ("awaitData", True)]))
    assert e.code == FAILED_TO_PARSE
    assert "Cannot set 'awaitData' without also setting 'tailable'" in str(e)
    db.create_collection("log", capped=True, size=4096)
    db.log.insert_one({"_id": 1})
    e = cmd_error(db, SON([("find", "log"), ("tailable", True), ("sort", {"_id": 1})]))
    assert e.code == BAD_VALUE and "{$natural: 1}" in str(e)
    e = cmd_error(db, SON([("find", "log"), ("tailable", True), ("singleBatch", True)]))
    assert e.code == BAD_VALUE
    db.command(SON([("create", "v"), ("viewOn", "log"), ("pipeline", [])]))
    e = cmd_error(db, SON([("find", "v"), ("tailable", True)]))
    assert e.code == 168 and "Option tailable not supported in aggregation." in str(e)
    # a plain tailable cursor refuses a getMore maxTimeMS, as mongod
    r = db.command(SON([("find", "log"), ("tailable", True)]))
    cid = r["cursor"]["id"]
    assert cid != 0 and [d["_id"] for d in r["cursor"]["firstBatch"]] == [1]
    e = cmd_error(db, SON([("getMore", cid), ("collection", "log"), ("maxTimeMS", 10)]))
    assert e.code == BAD_VALUE and "non-awaitData" in str(e)


def test_tailable_cursor_returns_later_inserts(client):
    db = client.capped
    db.create_collection("log", capped=True, size=100000)
    # an empty capped collection: mongod keeps no tailable cursor
    r = db.command(SON([("find", "log"), ("tailable", True)]))
    assert r["cursor"]["id"] == 0
    db.log.insert_many([{"_id": i, "even": i % 2 == 0} for i in range(3)])
    cur = db.log.find({"even": True}, cursor_type=CursorType.TAILABLE)
    assert [d["_id"] for d in cur] == [0, 2]
    assert cur.alive, "a tailable cursor stays open at the end of the data"
    db.log.insert_many([{"_id": i, "even": i % 2 == 0} for i in range(3, 7)])
    assert [d["_id"] for d in cur] == [4, 6], "only later matching documents"
    assert cur.alive
    cur.close()


def test_await_data_receives_insert_from_another_client(atomdb, client):
    db = client.capped
    db.create_collection("log", capped=True, size=100000)
    db.log.insert_one({"_id": 0})
    cur = db.log.find({}, cursor_type=CursorType.TAILABLE_AWAIT).max_await_time_ms(5000)
    assert cur.next()["_id"] == 0

    def writer():
        time.sleep(0.3)
        w = connect(atomdb)
        w.capped.log.insert_one({"_id": 1, "from": "writer"})
        w.close()

    t = threading.Thread(target=writer)
    t0 = time.monotonic()
    t.start()
    doc = cur.next()  # the getMore parks until the writer's insert commits
    waited = time.monotonic() - t0
    t.join()
    assert doc == {"_id": 1, "from": "writer"}
    assert 0.2 < waited < 4.0, "woken by the insert, not by maxTimeMS: %.2fs" % waited
    # with nothing inserted the getMore answers empty after its maxTimeMS
    r = db.command(SON([("find", "log"), ("tailable", True), ("awaitData", True)]))
    cid = r["cursor"]["id"]
    t0 = time.monotonic()
    r = db.command(SON([("getMore", cid), ("collection", "log"), ("maxTimeMS", 300)]))
    waited = time.monotonic() - t0
    assert r["cursor"]["nextBatch"] == [] and r["cursor"]["id"] == cid
    assert 0.25 < waited < 2.5, waited
    cur.close()


def test_capped_position_lost(client):
    db = client.capped
    db.create_collection("log", capped=True, size=100000, max=3)
    db.log.insert_many([{"_id": i} for i in range(3)])
    r = db.command(SON([("find", "log"), ("tailable", True), ("batchSize", 1)]))
    cid = r["cursor"]["id"]
    assert [d["_id"] for d in r["cursor"]["firstBatch"]] == [0]
    db.log.insert_many([{"_id": i} for i in range(3, 6)])  # removes 0, 1, 2
    e = cmd_error(db, SON([("getMore", cid), ("collection", "log")]))
    assert e.code == CAPPED_POSITION_LOST
    assert e.details["codeName"] == "CappedPositionLost"
    e = cmd_error(db, SON([("getMore", cid), ("collection", "log")]))
    assert e.code == 43, "the cursor died"


def test_convert_to_capped_keeps_the_newest(client):
    db = client.capped
    db.events.insert_many([{"_id": i, "s": "x" * 40} for i in range(10)])
    db.events.create_index("s")
    db.command(SON([("create", "v"), ("viewOn", "events"), ("pipeline", [])]))
    e = cmd_error(db, SON([("convertToCapped", "events")]))
    assert e.code == 40414 and "size" in str(e)
    e = cmd_error(db, SON([("convertToCapped", "missing"), ("size", 1000)]))
    assert e.code == 26
    e = cmd_error(db, SON([("convertToCapped", "v"), ("size", 1000)]))
    assert e.code == 166
    e = cmd_error(db, SON([("convertToCapped", "events"), ("size", 1000), ("max", 2)]))
    assert e.code == 40415
    db.command(SON([("convertToCapped", "events"), ("size", 200)]))  # 256 after rounding
    assert db.events.options() == {"capped": True, "size": 256}
    got = ids(db.events)
    assert got == list(range(10 - len(got), 10)) and 0 < len(got) < 10, got
    assert [ix["name"] for ix in db.events.list_indexes()] == ["_id_"], \
        "as mongod, only the _id index survives"
    db.events.insert_one({"_id": 10, "s": "x" * 40})
    assert ids(db.events)[-1] == 10 and len(ids(db.events)) == len(got)


def test_clone_collection_as_capped(client):
    db = client.capped
    db.src.insert_many([{"_id": i} for i in range(50)])
    e = cmd_error(db, SON([("cloneCollectionAsCapped", "nosuch"), ("toCollection", "x"),
                           ("size", 1000)]))
    assert e.code == 26
    db.command(SON([("cloneCollectionAsCapped", "src"), ("toCollection", "dst"),
                    ("size", 256)]))
    assert db.src.count_documents({}) == 50 and not db.src.options().get("capped")
    assert db.dst.options() == {"capped": True, "size": 256}
    got = ids(db.dst)
    assert got == list(range(50 - len(got), 50)) and len(got) == 256 // 14, got
    e = cmd_error(db, SON([("cloneCollectionAsCapped", "src"), ("toCollection", "dst"),
                           ("size", 1000)]))
    assert e.code == 48


def test_coll_mod_keeps_natural_order(client):
    db = client.capped
    db.create_collection("log", capped=True, size=4096, max=5)
    for i in [3, 1, 2]:
        db.log.insert_one({"_id": i})
    db.command(SON([("collMod", "log"), ("validator", {"_id": {"$gte": 0}})]))
    assert ids(db.log) == [3, 1, 2], "collMod leaves the insertion order alone"


def test_coll_mod_capped_size_and_max(client):
    # mongod's jstests/core/capped_resize.js, scaled down
    db = client.capped
    db.create_collection("log", capped=True, size=4096, max=2)
    db.log.insert_many([{"_id": i} for i in range(5)])
    assert ids(db.log) == [3, 4]
    db.command(SON([("collMod", "log"), ("cappedMax", 4)]))
    stats = db.command("collStats", "log")
    assert stats["max"] == 4 and stats["maxSize"] == 4096
    db.log.insert_many([{"_id": i} for i in range(5, 9)])
    assert ids(db.log) == [5, 6, 7, 8], "the larger bound holds four"
    # a smaller bound removes the excess at the next insert, as mongod
    db.command(SON([("collMod", "log"), ("cappedMax", 2), ("cappedSize", 8192)]))
    assert db.log.count_documents({}) == 4
    db.log.insert_one({"_id": 9})
    assert ids(db.log) == [8, 9]
    assert db.log.options() == {"capped": True, "size": 8192, "max": 2}
    db.command(SON([("collMod", "log"), ("cappedMax", 0)]))
    assert db.command("collStats", "log")["max"] == 0x7fffffff, "<= 0: no bound"
    for bad in [0, -1, 0x4000000000000 + 1]:
        e = cmd_error(db, SON([("collMod", "log"), ("cappedSize", bad)]))
        assert e.code == 51024, bad
    db.create_collection("plain")
    e = cmd_error(db, SON([("collMod", "plain"), ("cappedSize", 8192)]))
    assert e.code == INVALID_OPTIONS
    assert db.plain.options() == {}


def test_natural_sort_and_hint(client):
    db = client.capped
    db.create_collection("log", capped=True, size=4096)
    for i in [3, 1, 2]:
        db.log.insert_one({"_id": i})
    assert ids(db.log, sort=[("$natural", -1)]) == [2, 1, 3], "newest first"
    assert ids(db.log, sort=[("$natural", 1)], limit=2) == [3, 1]
    assert [d["_id"] for d in db.log.find().hint([("$natural", -1)])] == [2, 1, 3]
    plan = db.log.find().sort("$natural", -1).explain()["queryPlanner"]["winningPlan"]
    assert plan["stage"] == "COLLSCAN" and plan["direction"] == "backward", plan
    # not capped: atomdb's natural order is its storage (_id) order
    db.plain.insert_many([{"_id": i} for i in [2, 3, 1]])
    assert ids(db.plain, sort=[("$natural", -1)]) == [3, 2, 1]
    with pytest.raises(OperationFailure) as e:
        list(db.log.find(sort=[("$natural", 1), ("x", 1)]))
    assert e.value.code == 238, "refused, not ignored"


def test_db_hash_lists_capped_collections(client):
    db = client.capped
    db.create_collection("log", capped=True, size=4096)
    db.plain.insert_one({"_id": 1})
    for i in [2, 1]:
        db.log.insert_one({"_id": i})
    r = db.command("dbHash")
    assert r["capped"] == ["log"] and set(r["collections"]) == {"log", "plain"}
    before = r["collections"]["log"]
    db.log2.insert_many([{"_id": 1}, {"_id": 2}])  # same documents, _id order
    db.command(SON([("convertToCapped", "log2"), ("size", 4096)]))
    r = db.command("dbHash")
    assert r["capped"] == ["log", "log2"]
    assert r["collections"]["log2"] != before, "hashed in natural order, as mongod"


def test_a_lowered_bound_survives_snapshot_and_log_replay(atomdb):
    # collMod lowers max; the excess stays until the next insert, across a
    # clean restart (snapshot) and then kill -9 (log replay of the removals)
    c = connect(atomdb)
    db = c.capped
    db.create_collection("log", capped=True, size=4096, max=5)
    db.log.insert_many([{"_id": i} for i in range(5)])
    db.command(SON([("collMod", "log"), ("cappedMax", 2)]))
    c.close()
    server = restart(atomdb)
    try:
        c = connect(server)
        assert ids(c.capped.log) == [0, 1, 2, 3, 4], "the snapshot loads what was there"
        c.capped.log.insert_one({"_id": 5})
        assert ids(c.capped.log) == [4, 5]
        c.close()
        server2 = restart(server, kill=True)
    finally:
        discard(server)
    try:
        c = connect(server2)
        assert ids(c.capped.log) == [4, 5]
        c.close()
    finally:
        stop_all([server2])


def test_out_refuses_a_capped_target(client):
    db = client.capped
    db.create_collection("log", capped=True, size=4096)
    db.log.insert_one({"_id": "kept"})
    db.src.insert_one({"_id": 1})
    with pytest.raises(OperationFailure) as e:
        list(db.src.aggregate([{"$out": "log"}]))
    assert e.value.code == 17152 and "is capped so it can't be used for $out" in str(e.value)
    assert ids(db.log) == ["kept"], "nothing written"


def test_change_stream_sees_inserts_and_capping_deletes(client):
    db = client.capped
    db.create_collection("log", capped=True, size=4096, max=2)
    with db.log.watch(max_await_time_ms=200) as cs:
        db.log.insert_many([{"_id": i} for i in range(3)])
        got = [(ev["operationType"], ev["documentKey"]["_id"]) for ev in
               (cs.next() for _ in range(4))]
    # mongod >= 5.0 replicates a capped collection's removals as deletes
    assert got == [("insert", 0), ("insert", 1), ("insert", 2), ("delete", 0)], got
