"""Change streams (issue 18, docs/change-streams.md) through pymongo's
watch() against a real atomdb: event shapes, 4 writer processes x 500 $inc
seen as exactly 2,000 updates in order, resume from the 1,000th token
(also after a clean restart and after kill -9), database- and
cluster-level streams, following stages, updateLookup, pre- and
post-images, transactions, invalidate, history lost and bad tokens, and an
idle stream's getMore count."""

import multiprocessing
import os
import sys
import threading
import time

import pytest
from bson.son import SON
from bson.timestamp import Timestamp
from pymongo import MongoClient
from pymongo.errors import OperationFailure

from atomdb_clients import connect, per_test_client
from atomdb_testlib import discard, restart, stop_all

HISTORY_LOST = 286
INVALID_RESUME_TOKEN = 260
FATAL = 280
NO_MATCHING_DOCUMENT = 47


client = per_test_client()


def next_events(stream, n):
    """The next n events of `stream` (each next() waits for one)."""
    return [stream.next() for _ in range(n)]


def raw_stream(db, coll, spec, pipeline=(), batch_size=None):
    """Opens a stream with a raw aggregate (for options pymongo 3.11's
    watch() lacks); returns the reply."""
    cursor = {} if batch_size is None else {"batchSize": batch_size}
    return db.command(SON([("aggregate", coll if coll else 1),
                           ("pipeline", [{"$changeStream": spec}] + list(pipeline)),
                           ("cursor", cursor)]))


def get_more(db, reply, max_time_ms=500, batch_size=None):
    cur = reply["cursor"]
    coll = cur["ns"].split(".", 1)[1]
    cmd = SON([("getMore", cur["id"]), ("collection", coll), ("maxTimeMS", max_time_ms)])
    if batch_size:
        cmd["batchSize"] = batch_size
    return db.command(cmd)


def test_events_have_mongod_shapes(client):
    db = client.cs
    db.create_collection("shapes")
    with db.shapes.watch() as s:
        db.shapes.insert_one({"_id": 1, "a": 1, "arr": [1, 2, 3], "sub": {"x": 1, "y": 2}})
        db.shapes.update_one({"_id": 1}, {"$set": {"sub.x": 5, "b": "new"}, "$unset": {"a": 1},
                                          "$pop": {"arr": 1}})
        db.shapes.replace_one({"_id": 1}, {"r": True})
        db.shapes.delete_one({"_id": 1})
        ins, upd, rep, dele = next_events(s, 4)
    assert ins["operationType"] == "insert", ins
    assert ins["fullDocument"] == {"_id": 1, "a": 1, "arr": [1, 2, 3], "sub": {"x": 1, "y": 2}}
    assert ins["ns"] == {"db": "cs", "coll": "shapes"} and ins["documentKey"] == {"_id": 1}
    assert isinstance(ins["clusterTime"], Timestamp), "clusterTime is the commit's Timestamp"
    assert "wallTime" in ins and set(ins["_id"]) == {"_data"}, ins
    assert upd["operationType"] == "update" and "fullDocument" not in upd, upd
    ud = upd["updateDescription"]
    assert ud["updatedFields"] == {"sub.x": 5, "b": "new"}, ud
    assert ud["removedFields"] == ["a"], ud
    assert ud["truncatedArrays"] == [{"field": "arr", "newSize": 2}], ud
    assert rep["operationType"] == "replace" and rep["fullDocument"] == {"_id": 1, "r": True}
    assert dele["operationType"] == "delete" and dele["documentKey"] == {"_id": 1}
    assert "fullDocument" not in dele
    toks = [e["_id"]["_data"] for e in (ins, upd, rep, dele)]
    assert toks == sorted(toks), "resume tokens sort in commit order: %r" % toks
    times = [e["clusterTime"] for e in (ins, upd, rep, dele)]
    assert times == sorted(times) and len(set(times)) == 4, times


def _writer(uri, n):
    c = MongoClient(uri)
    for _ in range(n):
        c.cs.counter.update_one({"_id": "hot"}, {"$inc": {"n": 1}})
    c.close()


def _check_tail(server, token, expect_from, expect_to):
    """Resuming after `token` yields exactly updates n = expect_from..expect_to."""
    c = connect(server)
    with c.cs.counter.watch(resume_after=token, max_await_time_ms=200) as s:
        got = [e["updateDescription"]["updatedFields"]["n"]
               for e in next_events(s, expect_to - expect_from + 1)]
        assert got == list(range(expect_from, expect_to + 1)), got[:10]
        assert s.try_next() is None, "nothing after the last update"
    c.close()


def test_four_writers_2000_incs_resume_restart_and_kill9(atomdb):
    c = connect(atomdb)
    c.cs.counter.insert_one({"_id": "hot", "n": 0})
    s = c.cs.counter.watch()
    uri = atomdb.uri("directConnection=true")
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(uri, 500)) for _ in range(4)]
    for p in procs:
        p.start()
    events = next_events(s, 2000)
    for p in procs:
        p.join()
        assert p.exitcode == 0, "writer process failed"
    assert s.try_next() is None, "exactly 2,000 events"
    s.close()
    ns = [e["updateDescription"]["updatedFields"]["n"] for e in events]
    assert ns == list(range(1, 2001)), "updatedFields.n is 1..2000 in order"
    assert all(e["operationType"] == "update" for e in events)
    token = events[999]["_id"]
    _check_tail(atomdb, token, 1001, 2000)
    c.close()
    # a clean restart: the tokens still resume (the snapshot keeps the history)
    server = restart(atomdb)
    try:
        _check_tail(server, token, 1001, 2000)
        c = connect(server)
        c.cs.counter.update_one({"_id": "hot"}, {"$inc": {"n": 1}})
        c.close()
        # kill -9: the journaled updates are rebuilt from the log
        server2 = restart(server, kill=True)
    finally:
        discard(server)
    try:
        _check_tail(server2, token, 1001, 2001)
    finally:
        stop_all([server2])


def test_database_and_cluster_streams(client):
    db = client.csdb
    with db.watch(max_await_time_ms=200) as ds, client.watch(max_await_time_ms=200) as cs:
        db.one.insert_one({"_id": 1})
        client.otherdb.two.insert_one({"_id": 2})
        db.one.delete_one({"_id": 1})
        d = next_events(ds, 2)
        assert [(e["operationType"], e["ns"]["coll"]) for e in d] == \
            [("insert", "one"), ("delete", "one")], d
        assert ds.try_next() is None, "the database stream sees only its database"
        cl = next_events(cs, 3)
        assert [e["ns"] for e in cl] == [{"db": "csdb", "coll": "one"},
                                         {"db": "otherdb", "coll": "two"},
                                         {"db": "csdb", "coll": "one"}], cl


def test_match_and_project_follow_the_change_stream(client):
    coll = client.cs.filtered
    pipeline = [{"$match": {"operationType": "insert", "fullDocument.keep": True}},
                {"$project": {"fullDocument.secret": 0}}]
    with coll.watch(pipeline, max_await_time_ms=200) as s:
        coll.insert_many([{"_id": 1, "keep": False}, {"_id": 2, "keep": True, "secret": "x"}])
        coll.update_one({"_id": 2}, {"$set": {"keep": True, "z": 1}})
        e = s.next()
        assert e["fullDocument"] == {"_id": 2, "keep": True}, e
        assert s.try_next() is None, "the $match filters out the other events"


def test_stages_mongod_refuses_and_an_id_change_are_errors(client):
    coll = client.cs.refused
    with pytest.raises(OperationFailure) as e:
        coll.watch([{"$group": {"_id": None}}])
    assert e.value.code == 20 and "$group" in str(e.value), e.value
    with coll.watch([{"$project": {"_id": 0}}], max_await_time_ms=200) as s:
        coll.insert_one({"_id": 1})
        with pytest.raises(OperationFailure) as e:
            s.next()
    assert e.value.code == FATAL, e.value


def test_update_lookup_returns_the_current_document(client):
    coll = client.cs.lookup
    coll.insert_one({"_id": 1, "v": 0})
    with coll.watch(full_document="updateLookup") as s:
        coll.update_one({"_id": 1}, {"$set": {"v": 1}})
        coll.update_one({"_id": 1}, {"$set": {"v": 2}})
        coll.delete_one({"_id": 1})
        a, b, _ = next_events(s, 3)
    # both updates are read after the delete: the document is gone
    assert a["fullDocument"] is None and b["fullDocument"] is None, (a, b)
    with coll.watch(full_document="updateLookup") as s:
        coll.insert_one({"_id": 2, "v": 0})
        coll.update_one({"_id": 2}, {"$set": {"v": 7}})
        _, u = next_events(s, 2)
    assert u["fullDocument"] == {"_id": 2, "v": 7}, u


def test_pre_and_post_images(client):
    db = client.cs
    db.command({"create": "images", "changeStreamPreAndPostImages": {"enabled": True}})
    db.create_collection("noimages")
    for name in ("images", "noimages"):
        db[name].insert_one({"_id": 1, "v": 1})
    opened = {name: raw_stream(db, name, {"fullDocument": "whenAvailable",
                                          "fullDocumentBeforeChange": "whenAvailable"})
              for name in ("images", "noimages")}
    for name in ("images", "noimages"):
        db[name].update_one({"_id": 1}, {"$set": {"v": 2}})
        db[name].delete_one({"_id": 1})
    ev = get_more(db, opened["images"])["cursor"]["nextBatch"]
    assert [e["operationType"] for e in ev] == ["update", "delete"], ev
    assert ev[0]["fullDocument"] == {"_id": 1, "v": 2}, ev[0]
    assert ev[0]["fullDocumentBeforeChange"] == {"_id": 1, "v": 1}, ev[0]
    assert ev[1]["fullDocumentBeforeChange"] == {"_id": 1, "v": 2}, ev[1]
    ev = get_more(db, opened["noimages"])["cursor"]["nextBatch"]
    assert ev[0]["fullDocument"] is None and ev[0]["fullDocumentBeforeChange"] is None, ev
    req = raw_stream(db, "noimages", {"fullDocumentBeforeChange": "required"})
    db.noimages.insert_one({"_id": 3})
    db.noimages.delete_one({"_id": 3})
    with pytest.raises(OperationFailure) as e:
        get_more(db, req)
    assert e.value.code == NO_MATCHING_DOCUMENT, e.value
    with pytest.raises(OperationFailure) as e:
        db.command({"collMod": "noimages", "changeStreamPreAndPostImages": {"enabled": 1}})
    assert e.value.code == 14, "enabled must be a bool"


def test_transaction_events_are_together_with_lsid_and_txn_number(client):
    coll = client.cs.txn
    coll.insert_one({"_id": 0})
    with coll.watch(max_await_time_ms=200) as s:
        with client.start_session() as session:
            with session.start_transaction():
                coll.insert_one({"_id": 1}, session=session)
                coll.update_one({"_id": 0}, {"$set": {"t": 1}}, session=session)
                coll.insert_one({"_id": 2}, session=session)
        coll.insert_one({"_id": 3})
        evs = next_events(s, 4)
    txn = evs[:3]
    assert [e["documentKey"]["_id"] for e in txn] == [1, 0, 2], "the transaction's order"
    assert len({e["clusterTime"] for e in txn}) == 1, "one commit, one cluster time"
    assert all("lsid" in e and e["txnNumber"] == txn[0]["txnNumber"] for e in txn), txn
    assert "lsid" not in evs[3] and "txnNumber" not in evs[3], evs[3]


def test_a_transaction_reports_every_operation_in_its_order(client):
    """mongod gives one event per operation of a transaction, even when
    several change one document, in the transaction's order."""
    coll = client.cs.txn2
    coll.insert_one({"_id": 0, "n": 0})
    with coll.watch(max_await_time_ms=200) as s:
        with client.start_session() as session:
            with session.start_transaction():
                coll.insert_one({"_id": 1, "n": 10}, session=session)
                coll.update_one({"_id": 0}, {"$inc": {"n": 1}}, session=session)
                coll.update_one({"_id": 1}, {"$inc": {"n": 1}}, session=session)
                coll.update_one({"_id": 0}, {"$inc": {"n": 1}}, session=session)
                coll.replace_one({"_id": 0}, {"r": True}, session=session)
                coll.delete_one({"_id": 1}, session=session)
        evs = next_events(s, 6)
        assert s.try_next() is None, "exactly six events"
    assert [(e["operationType"], e["documentKey"]["_id"]) for e in evs] == [
        ("insert", 1), ("update", 0), ("update", 1), ("update", 0), ("replace", 0),
        ("delete", 1)], evs
    assert evs[0]["fullDocument"] == {"_id": 1, "n": 10}
    assert [e["updateDescription"]["updatedFields"] for e in evs[1:4]] == [
        {"n": 1}, {"n": 11}, {"n": 2}]
    assert evs[4]["fullDocument"] == {"_id": 0, "r": True}
    assert len({e["clusterTime"] for e in evs}) == 1, "one commit, one cluster time"
    assert all("lsid" in e and e["txnNumber"] == evs[0]["txnNumber"] for e in evs), evs
    assert coll.find_one({"_id": 0}) == {"_id": 0, "r": True}
    assert coll.find_one({"_id": 1}) is None


def _uuids(c):
    return {i["name"]: i["info"]["uuid"] for i in c.cs.list_collections()}


def _expanded_event_uuid(server, token):
    """collectionUUID of the first event after `token` (showExpandedEvents)."""
    c = connect(server)
    try:
        reply = raw_stream(c.cs, "keep", {"resumeAfter": token, "showExpandedEvents": True})
        batch = reply["cursor"]["firstBatch"] or get_more(c.cs, reply)["cursor"]["nextBatch"]
        return batch[0]["collectionUUID"]
    finally:
        c.close()


def test_collection_uuids_survive_clean_restart_and_kill9(atomdb):
    c = connect(atomdb)
    c.cs.keep.insert_one({"_id": 0})
    reply = raw_stream(c.cs, "keep", {})
    token = reply["cursor"]["postBatchResumeToken"]
    c.cs.keep.insert_one({"_id": 1})
    before = _uuids(c)
    assert _expanded_event_uuid(atomdb, token) == before["keep"]
    c.close()
    server = restart(atomdb)  # the snapshot keeps the UUID
    try:
        c = connect(server)
        assert _uuids(c) == before
        assert _expanded_event_uuid(server, token) == before["keep"]
        c.cs.later.insert_one({"_id": 0})  # created after the snapshot: only the log has it
        before = _uuids(c)
        assert set(before) == {"keep", "later"} and before["keep"] != before["later"]
        c.close()
        server2 = restart(server, kill=True)
    finally:
        discard(server)
    try:
        c = connect(server2)
        assert _uuids(c) == before, "the log's create keeps the UUID"
        assert _expanded_event_uuid(server2, token) == before["keep"]
        c.cs.new.insert_one({"_id": 0})
        assert _uuids(c)["new"] not in (before["keep"], before["later"])
        c.close()
    finally:
        stop_all([server2])


def test_drop_invalidates_and_start_after_goes_on(client):
    coll = client.cs.dropped
    coll.insert_one({"_id": 0})
    with coll.watch(max_await_time_ms=200) as s:
        coll.drop()
        drop, inval = next_events(s, 2)
        assert drop["operationType"] == "drop" and drop["ns"] == {"db": "cs", "coll": "dropped"}
        assert inval["operationType"] == "invalidate", inval
        assert not s.alive, "the cursor ends after the invalidate"
    with pytest.raises(OperationFailure) as e:
        coll.watch(resume_after=inval["_id"])
    assert e.value.code == INVALID_RESUME_TOKEN, e.value
    coll.insert_one({"_id": 1})
    with coll.watch(start_after=inval["_id"], max_await_time_ms=200) as s:
        e = s.next()
    assert e["operationType"] == "insert" and e["documentKey"] == {"_id": 1}, e


def test_rename_and_drop_database_events(client):
    db = client.csren
    db.a.insert_one({"_id": 1})
    with db.watch(max_await_time_ms=200) as s:
        db.a.rename("b")
        client.drop_database("csren")
        evs = next_events(s, 4)
    assert evs[0]["operationType"] == "rename" and evs[0]["to"] == {"db": "csren", "coll": "b"}
    assert [e["operationType"] for e in evs[1:]] == ["drop", "dropDatabase", "invalidate"], evs


def test_expanded_events(client):
    db = client.cs
    reply = raw_stream(db, None, {"showExpandedEvents": True})
    db.create_collection("expanded")
    db.expanded.create_index("k")
    got = get_more(db, reply)["cursor"]["nextBatch"]
    types = [e["operationType"] for e in got]
    assert types == ["create", "createIndexes"], got
    assert got[1]["operationDescription"]["indexes"][0]["key"] == {"k": 1}, got[1]


def test_start_at_operation_time_includes_that_commit(client):
    coll = client.cs.at
    coll.insert_one({"_id": 1})
    with client.start_session() as session:
        coll.insert_one({"_id": 2}, session=session)
        op_time = session.operation_time  # the insert's commit
    coll.insert_one({"_id": 3})
    with coll.watch(start_at_operation_time=op_time, max_await_time_ms=200) as s:
        a, b = next_events(s, 2)
    assert a["documentKey"] == {"_id": 2} and a["clusterTime"] == op_time, a
    assert b["documentKey"] == {"_id": 3}, b


def test_history_lost_and_bad_tokens(atomdb_factory):
    server = atomdb_factory("--change-stream-history-mb", "1")
    c = connect(server)
    coll = c.cs.lost
    with coll.watch() as s:
        coll.insert_one({"_id": 0})
        first = s.next()["_id"]
    big = "x" * 100000
    for i in range(1, 30):
        coll.insert_one({"_id": i, "pad": big})
    with pytest.raises(OperationFailure) as e:
        coll.watch(resume_after=first)
    assert e.value.code == HISTORY_LOST, e.value
    assert "NonResumableChangeStreamError" in (e.value.details.get("errorLabels") or []), \
        e.value.details
    with pytest.raises(OperationFailure) as e:
        coll.watch(resume_after={"_data": "not-a-token"})
    assert e.value.code == INVALID_RESUME_TOKEN, e.value
    with pytest.raises(OperationFailure) as e:
        coll.watch(resume_after={"nope": 1})
    assert e.value.code == INVALID_RESUME_TOKEN, e.value
    c.close()


def test_bad_arguments_are_refused_as_mongod(client):
    with pytest.raises(OperationFailure) as e:
        client.admin.command({"aggregate": 1, "pipeline": [{"$changeStream": {}}], "cursor": {}})
    assert e.value.code == 73, "admin needs allChangesForCluster"
    with pytest.raises(OperationFailure) as e:
        raw_stream(client.cs, "x", {"bogus": 1})
    assert e.value.code == 40415, e.value
    with pytest.raises(OperationFailure) as e:
        raw_stream(client.cs, "x", {"fullDocument": "sometimes"})
    assert e.value.code == 2, e.value
    with pytest.raises(OperationFailure) as e:
        raw_stream(client.cs, "x", {"showSystemEvents": True})
    assert e.value.code == 238 and "showSystemEvents" in str(e.value), e.value
    client.cs.x.insert_one({})
    with client.start_session() as session:
        session.start_transaction()
        with pytest.raises(OperationFailure) as e:
            client.cs.x.watch(session=session)
        session.abort_transaction()
    assert e.value.code == 263, e.value


def test_every_batch_has_a_post_batch_resume_token(client):
    db = client.cs
    reply = raw_stream(db, "pbrt", {})
    first = reply["cursor"]["postBatchResumeToken"]
    db.pbrt.insert_one({"_id": 1})
    more = get_more(db, reply)
    ev = more["cursor"]["nextBatch"]
    assert len(ev) == 1 and more["cursor"]["postBatchResumeToken"] == ev[0]["_id"], more
    assert first["_data"] < ev[0]["_id"]["_data"], "tokens move forward"
    empty = get_more(db, reply, max_time_ms=50)
    assert empty["cursor"]["nextBatch"] == [] and "postBatchResumeToken" in empty["cursor"]


def test_idle_stream_getmores_wait_their_max_await_time(client):
    """An idle stream's getMores park: about one per maxAwaitTimeMS, not a
    busy loop (counted by serverStatus opcounters.getmore)."""
    with client.cs.idle.watch(max_await_time_ms=200) as s:
        before = client.admin.command("serverStatus")["opcounters"]["getmore"]
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline:
            assert s.try_next() is None
        after = client.admin.command("serverStatus")["opcounters"]["getmore"]
    assert 1 <= after - before <= 8, "getMores in 1 s at maxAwaitTimeMS 200: %d" % (after - before)


def test_a_waiting_getmore_wakes_for_a_write(client):
    """A parked getMore is answered by the commit, not by its maxAwaitTimeMS:
    the event comes in the getMore that was waiting (one getMore)."""
    coll = client.cs.wake
    got = []
    with coll.watch(max_await_time_ms=60000) as s:
        before = client.admin.command("serverStatus")["opcounters"]["getmore"]
        t = threading.Thread(target=lambda: got.append(s.next()))
        t.start()
        time.sleep(0.2)  # let the getMore park
        coll.insert_one({"_id": 1})
        t.join(30)
        after = client.admin.command("serverStatus")["opcounters"]["getmore"]
    assert got and got[0]["documentKey"] == {"_id": 1}, got
    assert after - before == 1, "the event came in the parked getMore: %d getMores" % (
        after - before)


def test_under_auth_a_stream_belongs_to_its_user_and_needs_its_privileges(atomdb_factory):
    server = atomdb_factory("--auth")
    MongoClient(server.uri(), directConnection=True).admin.command(
        "createUser", "root", pwd="pw", roles=["root"])  # the localhost exception
    root = MongoClient(server.uri(), directConnection=True, username="root", password="pw")
    root.app.command("createUser", "rw", pwd="pw", roles=["readWrite"])
    root.app.command("createUser", "other", pwd="pw", roles=["readWrite"])
    rw = MongoClient(server.uri(), directConnection=True, username="rw", password="pw",
                     authSource="app")
    # its own getMores work (the cursor records who opened it)
    with rw.app.c.watch(max_await_time_ms=500) as s:
        rw.app.c.insert_one({"x": 1})
        assert s.try_next()["operationType"] == "insert"
    with rw.app.watch(max_await_time_ms=500) as s:
        rw.app.c.insert_one({"x": 2})
        assert s.try_next()["operationType"] == "insert"
    # the whole deployment needs more than readWrite on one database
    with pytest.raises(OperationFailure) as e:
        rw.watch(max_await_time_ms=200).try_next()
    assert e.value.code == 13
    # another user cannot read someone else's stream
    cur = rw.app.command("aggregate", "c", pipeline=[{"$changeStream": {}}], cursor={})
    other = MongoClient(server.uri(), directConnection=True, username="other", password="pw",
                        authSource="app")
    with pytest.raises(OperationFailure) as e:
        other.app.command("getMore", cur["cursor"]["id"], collection="c")
    assert e.value.code == 13
    for c in (root, rw, other):
        c.close()
