"""The oplog view local.oplog.rs (issue 18, docs/change-streams.md) through
pymongo against a real atomdb: entry shapes for inserts, updates ($v: 2
diffs), replacements, deletes, transactions (applyOps) and catalog
commands, compared field by field with mongod 7's format; ts order equal
to change-stream order; find filters, sorts, projection, limit and
getMore; a tailable awaitData cursor receiving another client's insert;
a position lost to retention; writes refused; listCollections, collStats
and replSetGetStatus optimes."""

import datetime
import threading
import time

import pytest
from bson.int64 import Int64
from bson.son import SON
from bson.timestamp import Timestamp
from pymongo import CursorType
from pymongo.errors import OperationFailure

from atomdb_clients import connect, per_test_client

ENTRY_KEYS = ["op", "ns", "ui", "o", "o2", "ts", "t", "v", "wall"]


client = per_test_client()


def newest(client):
    """The newest entry, as tools read it."""
    return list(client.local.oplog.rs.find({}).sort("$natural", -1).limit(1))[0]


def entries_after(client, ts, **filt):
    q = {"ts": {"$gt": ts}}
    q.update(filt)
    return list(client.local.oplog.rs.find(q))


def next_or_none(cursor):
    """One round trip of a tailable cursor: a document, or None when its
    batch came back empty (pymongo 3.11's Cursor has no try_next)."""
    try:
        return cursor.next()
    except StopIteration:
        return None


def uuid_of(db, name):
    return next(db.list_collections(filter={"name": name}))["info"]["uuid"]


def test_document_entries_have_mongod_shape(client):
    db = client.op
    db.create_collection("docs")
    ui = uuid_of(db, "docs")
    start = newest(client)["ts"]
    coll = db.docs
    coll.insert_one({"_id": 1, "a": 1, "b": {"c": 1}, "arr": [1, 2, 3]})
    coll.update_one({"_id": 1}, {"$set": {"a": 2}})
    coll.update_one({"_id": 1}, {"$set": {"b.c": 2}})
    coll.update_one({"_id": 1}, {"$push": {"arr": 4}})
    coll.update_one({"_id": 1}, {"$set": {"n": 1}})
    coll.update_one({"_id": 1}, {"$unset": {"a": ""}})
    coll.update_one({"_id": 1}, {"$pop": {"arr": 1}})
    coll.replace_one({"_id": 1}, {"z": 1})
    coll.delete_one({"_id": 1})
    es = entries_after(client, start)
    assert [e["op"] for e in es] == ["i", "u", "u", "u", "u", "u", "u", "u", "d"], es
    ins = es[0]
    assert list(ins.keys()) == ENTRY_KEYS, ins
    assert ins["ns"] == "op.docs" and ins["ui"] == ui
    assert ins["o"] == {"_id": 1, "a": 1, "b": {"c": 1}, "arr": [1, 2, 3]}
    assert ins["o2"] == {"_id": 1}
    assert ins["t"] == 1 and isinstance(ins["t"], Int64)
    assert ins["v"] == 2 and isinstance(ins["v"], Int64)
    assert isinstance(ins["ts"], Timestamp) and isinstance(ins["wall"], datetime.datetime)
    diffs = [e["o"] for e in es[1:7]]
    assert diffs == [
        {"$v": 2, "diff": {"u": {"a": 2}}},
        {"$v": 2, "diff": {"sb": {"u": {"c": 2}}}},
        {"$v": 2, "diff": {"sarr": {"a": True, "u3": 4}}},
        {"$v": 2, "diff": {"i": {"n": 1}}},
        {"$v": 2, "diff": {"d": {"a": False}}},
        {"$v": 2, "diff": {"sarr": {"a": True, "l": 3}}},
    ], diffs
    for e in es[1:8]:
        assert e["o2"] == {"_id": 1} and e["ns"] == "op.docs" and e["ui"] == ui, e
    assert es[7]["o"] == {"_id": 1, "z": 1}, "a replacement carries the document"
    dele = es[8]
    assert dele["o"] == {"_id": 1} and "o2" not in dele, dele
    assert [e["ts"] for e in es] == sorted(e["ts"] for e in es)
    assert len({e["ts"] for e in es}) == len(es), "ts is unique"


def test_transaction_is_one_apply_ops_entry(client):
    db = client.op
    db.create_collection("txn")
    db.txn.insert_one({"_id": 0, "n": 0})
    ui = uuid_of(db, "txn")
    start = newest(client)["ts"]
    with client.start_session() as s:
        with s.start_transaction():
            db.txn.insert_one({"_id": 1}, session=s)
            db.txn.update_one({"_id": 0}, {"$inc": {"n": 1}}, session=s)
            db.txn.delete_one({"_id": 1}, session=s)
        lsid = s.session_id
    es = entries_after(client, start)
    assert len(es) == 1, es
    e = es[0]
    assert list(e.keys()) == ["lsid", "txnNumber", "op", "ns", "o", "ts", "t", "v", "wall",
                              "prevOpTime"], e
    assert e["lsid"]["id"].bytes == bytes(lsid["id"]) and isinstance(e["txnNumber"], Int64)
    assert e["op"] == "c" and e["ns"] == "admin.$cmd"
    assert e["prevOpTime"] == {"ts": Timestamp(0, 0), "t": -1}
    ops = e["o"]["applyOps"]
    assert ops == [
        {"op": "i", "ns": "op.txn", "ui": ui, "o": {"_id": 1}, "o2": {"_id": 1}},
        {"op": "u", "ns": "op.txn", "ui": ui, "o": {"$v": 2, "diff": {"u": {"n": 1}}},
         "o2": {"_id": 0}},
        {"op": "d", "ns": "op.txn", "ui": ui, "o": {"_id": 1}},
    ], ops


def test_catalog_commands(client):
    db = client.opc
    start = newest(client)["ts"] if client.local.oplog.rs.find_one() else Timestamp(0, 0)
    db.create_collection("x")
    ui = uuid_of(db, "x")
    db.x.create_index("a")
    db.x.drop_index("a_1")
    db.x.rename("y")
    db.y.drop()
    db.create_collection("z")
    client.drop_database("opc")
    es = entries_after(client, start, op="c")
    os_ = [e["o"] for e in es]
    assert os_[0] == {"create": "x", "idIndex": {"v": 2, "key": {"_id": 1}, "name": "_id_"}}
    assert es[0]["ns"] == "opc.$cmd" and es[0]["ui"] == ui, es[0]
    assert os_[1] == {"createIndexes": "x", "v": 2, "key": {"a": 1}, "name": "a_1"}, os_[1]
    assert os_[2] == {"dropIndexes": "x", "index": "a_1"}, os_[2]
    assert os_[3] == {"renameCollection": "opc.x", "to": "opc.y", "stayTemp": False}, os_[3]
    assert os_[4] == {"drop": "y"}, os_[4]
    assert os_[5]["create"] == "z"
    assert os_[6] == {"dropDatabase": 1}, os_[6]
    assert all(e["ns"] == "opc.$cmd" for e in es), es


def test_ts_order_is_change_stream_order(client):
    db = client.order
    db.create_collection("a")
    db.create_collection("b")
    start = newest(client)["ts"]
    with client.watch(start_at_operation_time=start, max_await_time_ms=300) as stream:
        for i in range(20):
            (db.a if i % 2 else db.b).insert_one({"_id": i})
            if i % 5 == 0:
                db.a.update_many({}, {"$inc": {"k": 1}})
        events = []
        while True:
            ev = stream.try_next()
            if ev is None:
                break
            events.append(ev)
    times = []
    for ev in events:
        if ev["clusterTime"] > start and (not times or times[-1] != ev["clusterTime"]):
            times.append(ev["clusterTime"])
    es = entries_after(client, start)
    assert [e["ts"] for e in es] == times
    # an update of several documents is one commit: one applyOps entry
    multi = [e for e in es if e["op"] == "c"]
    assert multi and all("applyOps" in e["o"] for e in multi), multi


def test_find_filters_sort_projection_limit_get_more(client):
    db = client.opf
    db.create_collection("f")
    start = newest(client)["ts"]
    for i in range(30):
        db.f.insert_one({"_id": i})
    oplog = client.local.oplog.rs
    es = list(oplog.find({"ts": {"$gt": start}}))
    assert len(es) == 30
    mid = es[10]["ts"]
    assert [e["o"]["_id"] for e in oplog.find({"ts": {"$gte": mid}, "ns": "opf.f"})] == \
        list(range(10, 30))
    assert [e["o"]["_id"] for e in oplog.find({"ts": {"$gt": start, "$lt": mid}})] == \
        list(range(10))
    assert [e["o"]["_id"] for e in oplog.find({"ts": {"$gt": start, "$lte": mid}})] == \
        list(range(11))
    assert oplog.count_documents is not None
    assert [e["o"]["_id"] for e in oplog.find({"ts": {"$gt": start}, "op": "i"})
            .sort("$natural", -1).limit(3)] == [29, 28, 27]
    assert list(oplog.find({"ts": {"$gt": start}, "op": "d"})) == []
    proj = list(oplog.find({"ts": {"$gt": start}}, {"op": 1, "ns": 1, "_id": 0}).limit(2))
    assert proj == [{"op": "i", "ns": "opf.f"}] * 2, proj
    # batchSize 4 over 30 entries: getMores continue where the batch ended
    got = [e["o"]["_id"] for e in oplog.find({"ts": {"$gt": start}}).batch_size(4)]
    assert got == list(range(30))
    with pytest.raises(OperationFailure) as e:
        list(oplog.find({}).sort("op", 1))
    assert e.value.code == 238 and "natural" in str(e.value), e.value


def test_tailable_await_receives_another_clients_insert(client, atomdb):
    db = client.opt
    db.create_collection("t")
    start = newest(client)["ts"]
    cursor = client.local.oplog.rs.find({"ts": {"$gt": start}, "ns": "opt.t"},
                                        cursor_type=CursorType.TAILABLE_AWAIT)
    cursor.max_await_time_ms(5000)
    assert cursor.alive

    def write():
        time.sleep(0.5)
        other = connect(atomdb)
        other.opt.t.insert_one({"_id": "late"})
        other.close()

    th = threading.Thread(target=write)
    th.start()
    t0 = time.monotonic()
    entry = next_or_none(cursor)  # the find: nothing yet
    assert entry is None and cursor.alive
    t1 = time.monotonic()
    entry = next_or_none(cursor)  # a getMore that parks until the insert commits
    elapsed = time.monotonic() - t1
    th.join()
    assert entry is not None and entry["op"] == "i" and entry["o"] == {"_id": "late"}, entry
    assert 0.2 < elapsed < 4.5 and time.monotonic() - t0 < 4.5, elapsed
    assert cursor.alive
    # an awaitData getMore with nothing new waits its maxTimeMS, then returns empty
    reply = client.local.command(SON([("getMore", cursor.cursor_id), ("collection", "oplog.rs"),
                                      ("maxTimeMS", 300)]))
    assert reply["cursor"]["nextBatch"] == [] and reply["cursor"]["id"] == cursor.cursor_id
    cursor.close()
    # a tailable cursor without awaitData answers at once and stays open
    plain = client.local.command(SON([("find", "oplog.rs"), ("filter", {"ts": {"$gt": start}}),
                                      ("tailable", True)]))
    cid = plain["cursor"]["id"]
    assert cid != 0
    with pytest.raises(OperationFailure) as e:
        client.local.command(SON([("getMore", cid), ("collection", "oplog.rs"),
                                  ("maxTimeMS", 100)]))
    assert e.value.code == 2, e.value
    client.local.command("killCursors", "oplog.rs", cursors=[cid])
    with pytest.raises(OperationFailure) as e:
        client.local.command(SON([("find", "oplog.rs"), ("awaitData", True)]))
    assert e.value.code == 9, e.value
    with pytest.raises(OperationFailure) as e:
        client.local.command(SON([("find", "oplog.rs"), ("tailable", True),
                                  ("sort", {"$natural": -1})]))
    assert e.value.code == 2, e.value


def test_position_lost_to_retention(atomdb_factory):
    server = atomdb_factory("--change-stream-history-mb", "1")
    c = connect(server)
    c.lost.c.insert_one({"_id": 0})
    reply = c.local.command(SON([("find", "oplog.rs"), ("tailable", True), ("batchSize", 1)]))
    assert len(reply["cursor"]["firstBatch"]) == 1
    cid = reply["cursor"]["id"]
    big = "x" * 100000
    for i in range(1, 30):
        c.lost.c.insert_one({"_id": i, "pad": big})
    with pytest.raises(OperationFailure) as e:
        c.local.command(SON([("getMore", cid), ("collection", "oplog.rs")]))
    assert e.value.code == 136, e.value
    assert "CappedPositionLost" in str(e.value.details.get("codeName")), e.value.details
    # a find from an older ts starts at the oldest entry retained
    es = list(c.local.oplog.rs.find({"ts": {"$gte": Timestamp(1, 0)}}))
    assert es and es[-1]["o"]["_id"] == 29
    c.close()


def test_writes_and_other_commands_are_refused(client):
    client.op.w.insert_one({"_id": 1})
    oplog = client.local.oplog.rs
    before = oplog.count_documents if False else len(list(oplog.find({})))
    for fn in (lambda: oplog.insert_one({"op": "n"}),
               lambda: oplog.delete_many({}),
               lambda: oplog.update_one({}, {"$set": {"x": 1}}),
               lambda: client.local.drop_collection("oplog.rs"),
               lambda: oplog.create_index("ts")):
        with pytest.raises(OperationFailure) as e:
            fn()
        assert e.value.code == 73 and "cannot write to 'local.oplog.rs'" in str(e.value), e.value
    assert len(list(oplog.find({}))) == before
    for cmd in (SON([("aggregate", "oplog.rs"), ("pipeline", []), ("cursor", {})]),
                SON([("count", "oplog.rs")]),
                SON([("distinct", "oplog.rs"), ("key", "op")])):
        with pytest.raises(OperationFailure) as e:
            client.local.command(cmd)
        assert e.value.code == 238 and "local.oplog.rs" in str(e.value), e.value
    with client.start_session() as s:
        s.start_transaction()
        with pytest.raises(OperationFailure) as e:
            list(oplog.find({}, session=s))
        s.abort_transaction()
    assert e.value.code == 263, e.value
    with pytest.raises(OperationFailure) as e:
        list(oplog.find({}, collation={"locale": "fr"}))
    assert e.value.code == 238 and "collation" in str(e.value), e.value


def test_list_collections_stats_and_repl_status(client):
    client.op.s.insert_one({"_id": 0})  # creates op.s: create and insert, one commit
    implicit = newest(client)
    assert implicit["op"] == "c" and [o["op"] for o in implicit["o"]["applyOps"]] == ["c", "i"]
    assert implicit["o"]["applyOps"][0]["o"]["create"] == "s", implicit
    client.op.s.insert_one({"_id": 1})
    info = next(client.local.list_collections(filter={"name": "oplog.rs"}))
    assert info["type"] == "collection" and info["options"]["capped"] is True, info
    assert "oplog.rs" in client.local.list_collection_names()
    stats = client.local.command("collStats", "oplog.rs")
    assert stats["capped"] is True and stats["count"] >= 1 and stats["ns"] == "local.oplog.rs"
    assert stats["maxSize"] == 64 * 1024 * 1024 == info["options"]["size"], stats
    dbstats = client.local.command("dbStats")
    assert dbstats["collections"] >= 1 and dbstats["objects"] >= 1
    # validate, as tools (and tests/crash) run it on every listed collection
    v = client.local.command("validate", "oplog.rs", full=True)
    assert v["valid"] is True and v["ns"] == "local.oplog.rs" and v["errors"] == [], v
    assert v["nrecords"] == stats["count"], (v["nrecords"], stats["count"])
    last = newest(client)
    assert last["o"] == {"_id": 1} and last["ns"] == "op.s"
    time.sleep(0.1)  # the commit's log record becomes durable
    st = client.admin.command("replSetGetStatus")
    opt = st["optimes"]
    for k in ("lastCommittedOpTime", "appliedOpTime", "durableOpTime"):
        assert opt[k] == {"ts": last["ts"], "t": 1}, (k, opt[k], last["ts"])
    assert st["members"][0]["optime"] == {"ts": last["ts"], "t": 1}


def test_mongosh_reads_the_newest_entry_and_optimes(atomdb, tmp_path):
    """mongosh as an operator would: the newest entry and rs.status()."""
    import json
    import os
    import subprocess
    from atomdb_testlib import REPO, require_installed
    mongosh = REPO / "tests" / "drivers" / "node" / "node_modules" / ".bin" / "mongosh"
    require_installed(mongosh.exists(), "mongosh (%s, npm ci in tests/drivers/node)" % mongosh)
    home = tmp_path / "home"
    (home / ".mongodb" / "mongosh").mkdir(parents=True)
    (home / ".mongodb" / "mongosh" / "config").write_text('{"enableTelemetry": false}')
    env = dict(os.environ, HOME=str(home), DO_NOT_TRACK="1", MONGOSH_NO_UPDATE_CHECK="1")
    script = r"""
db.getSiblingDB("opsh").createCollection("c");
db.getSiblingDB("opsh").c.insertOne({_id: "sh"});
const e = db.getSiblingDB("local").oplog.rs.find().sort({$natural: -1}).limit(1).next();
sleep(100);
const s = rs.status();
print("RESULT " + JSON.stringify({op: e.op, ns: e.ns, o: e.o, t: Number(e.t), v: Number(e.v),
  same: s.optimes.appliedOpTime.ts.equals(e.ts) && s.optimes.durableOpTime.ts.equals(e.ts)}));
"""
    p = subprocess.run([str(mongosh), atomdb.uri("directConnection=true"), "--quiet", "--norc",
                        "--eval", script], capture_output=True, text=True, timeout=240, env=env)
    line = [l for l in p.stdout.splitlines() if l.startswith("RESULT ")]
    assert p.returncode == 0 and line, p.stdout + p.stderr
    got = json.loads(line[0][7:])
    assert got == {"op": "i", "ns": "opsh.c", "o": {"_id": "sh"}, "t": 1, "v": 2,
                   "same": True}, got
