"""Change events shared between streams (src/cmd/cscache.c) and paced
getMore replies (src/cmd/changestream.c): many streams with different
levels, options and following stages, open at once over the same writes,
each get exactly their own events — a stage in one stream never shows in
another, image and expanded-event options still apply, positions inside
a many-operation commit (batchSize 1, resumeAfter) still hold — and a
getMore that comes soon after one with results still returns what is
there by its maxTimeMS."""

import time

import bson
from bson.codec_options import CodecOptions
from bson.raw_bson import RawBSONDocument
from bson.son import SON

from atomdb_clients import connect, per_test_client

from test_change_streams import get_more, raw_stream


client = per_test_client()


_FIXED = {1: 8, 7: 12, 8: 1, 9: 8, 0x10: 4, 0x11: 8, 0x12: 8, 0x13: 16, 10: 0}


def top_level_keys(data):
    """The top-level field names of BSON bytes, duplicates kept (a decoder
    keeps only one of two fields of the same name; libmongoc reads the
    first, pymongo the last)."""
    keys, i = [], 4
    while data[i] != 0:
        t = data[i]
        end = data.index(b"\0", i + 1)
        keys.append(data[i + 1:end].decode())
        i = end + 1
        if t in _FIXED:
            i += _FIXED[t]
        elif t in (2, 13, 14):
            i += 4 + int.from_bytes(data[i:i + 4], "little")
        elif t in (3, 4):
            i += int.from_bytes(data[i:i + 4], "little")
        elif t == 5:
            i += 5 + int.from_bytes(data[i:i + 4], "little")
        else:
            raise AssertionError("unexpected BSON type %d in a reply" % t)
    return keys


def checked_get_more(db, reply, max_time_ms):
    """get_more, with the reply's bytes checked to hold each field once."""
    cur = reply["cursor"]
    cmd = SON([("getMore", cur["id"]), ("collection", cur["ns"].split(".", 1)[1]),
               ("maxTimeMS", max_time_ms)])
    raw = db.command(cmd, codec_options=CodecOptions(document_class=RawBSONDocument))
    keys = top_level_keys(raw.raw)
    assert len(keys) == len(set(keys)), "a field twice in one reply: %s" % keys
    return bson.decode(raw.raw)


def drain(db, reply, want, max_time_ms=500):
    """Events of the stream opened by `reply` until `want` arrived (or
    two empty batches in a row)."""
    events = list(reply["cursor"]["firstBatch"])
    empty = 0
    while len(events) < want and empty < 2:
        more = get_more(db, reply, max_time_ms=max_time_ms)
        batch = more["cursor"]["nextBatch"]
        empty = 0 if batch else empty + 1
        events += batch
        reply = {"cursor": dict(more["cursor"], firstBatch=[])}
    return events


def write_mix(client):
    """The writes every stream watches: single and many-operation commits
    on two collections, an update, a replace, a delete, a transaction."""
    db = client.shr
    db.a.insert_one({"_id": 1, "n": 0})
    db.a.insert_many([{"_id": 2}, {"_id": 3}, {"_id": 4}])
    db.b.insert_one({"_id": 1, "in": "b"})
    db.a.update_one({"_id": 1}, {"$inc": {"n": 5}, "$set": {"s": "x"}})
    db.a.replace_one({"_id": 2}, {"r": True})
    db.a.delete_one({"_id": 3})
    with client.start_session() as s:
        with s.start_transaction():
            db.a.update_one({"_id": 4}, {"$set": {"t": 1}}, session=s)
            db.b.insert_one({"_id": 2}, session=s)


def test_streams_with_different_stages_and_options_each_get_their_own_events(client):
    db = client.shr
    db.create_collection("a", changeStreamPreAndPostImages={"enabled": True})
    db.create_collection("b")
    streams = {
        "plain": raw_stream(db, "a", {}),
        "plain2": raw_stream(db, "a", {}),
        "match": raw_stream(db, "a", {}, [{"$match": {"operationType": "update"}}]),
        "tag": raw_stream(db, "a", {}, [{"$addFields": {"tag": "mine"}}]),
        "project": raw_stream(db, "a", {}, [{"$project": {"documentKey": 1}}]),
        "lookup": raw_stream(db, "a", {"fullDocument": "updateLookup"}),
        "images": raw_stream(db, "a", {"fullDocumentBeforeChange": "whenAvailable"}),
        "expanded": raw_stream(db, "a", {"showExpandedEvents": True}),
        "b": raw_stream(db, "b", {}),
        "database": raw_stream(db, None, {}),
    }
    write_mix(client)
    want = {"plain": 8, "plain2": 8, "match": 2, "tag": 8, "project": 8, "lookup": 8,
            "images": 8, "expanded": 8, "b": 2, "database": 10}
    got = {k: drain(db, r, want[k]) for k, r in streams.items()}
    for k, n in want.items():
        assert len(got[k]) == n, (k, len(got[k]), got[k])

    plain = got["plain"]
    kinds = [(e["operationType"], e["documentKey"]["_id"]) for e in plain]
    assert kinds == [("insert", 1), ("insert", 2), ("insert", 3), ("insert", 4), ("update", 1),
                     ("replace", 2), ("delete", 3), ("update", 4)], kinds
    assert plain[4]["updateDescription"]["updatedFields"] == {"n": 5, "s": "x"}, plain[4]
    tokens = [e["_id"]["_data"] for e in plain]
    assert tokens == sorted(tokens) and len(set(tokens)) == 8, "tokens in commit order"
    # two plain streams see the same events
    assert got["plain2"] == plain
    # a stage of one stream shows in that stream only
    assert all(e.get("tag") == "mine" for e in got["tag"])
    others = plain + got["plain2"] + got["match"] + got["lookup"] + got["database"]
    assert not any("tag" in e for e in others), "a stream's stage changed another's events"
    assert [e["_id"] for e in got["tag"]] == [e["_id"] for e in plain]
    assert [e["documentKey"]["_id"] for e in got["match"]] == [1, 4]
    assert all(set(e) == {"_id", "documentKey"} for e in got["project"]), got["project"]
    assert all(set(e) != {"_id", "documentKey"} for e in plain)
    # options still apply to the streams that have them, and only there
    upd = [e for e in got["lookup"] if e["operationType"] == "update"]
    assert upd[0]["fullDocument"] == {"_id": 1, "n": 5, "s": "x"}, upd
    assert not any("fullDocument" in e for e in plain if e["operationType"] == "update")
    rep = [e for e in got["images"] if e["operationType"] == "replace"][0]
    assert rep["fullDocumentBeforeChange"] == {"_id": 2}, rep
    assert not any("fullDocumentBeforeChange" in e for e in plain)
    assert all("collectionUUID" in e for e in got["expanded"]), got["expanded"]
    assert not any("collectionUUID" in e for e in plain)
    # the transaction's events carry its lsid and txnNumber in every stream
    txn = [e for e in got["database"] if "txnNumber" in e]
    assert [(e["ns"]["coll"], e["documentKey"]["_id"]) for e in txn] == [("a", 4), ("b", 2)], txn
    assert got["b"][1]["lsid"] == txn[0]["lsid"] and plain[7]["lsid"] == txn[0]["lsid"]
    assert "txnNumber" not in got["b"][0] and "txnNumber" not in plain[0]
    # the database stream sees both collections in commit order
    assert [(e["ns"]["coll"], e["documentKey"]["_id"]) for e in got["database"]] == [
        ("a", 1), ("a", 2), ("a", 3), ("a", 4), ("b", 1), ("a", 1), ("a", 2), ("a", 3),
        ("a", 4), ("b", 2)]
    assert [e["documentKey"]["_id"] for e in got["b"]] == [1, 2]


def test_batch_size_one_and_resume_inside_a_many_operation_commit(client):
    """One commit of five inserts read one event per getMore by several
    streams, and resumed after its second event, gives each event once."""
    db = client.shr
    r1 = raw_stream(db, "m", {}, batch_size=1)
    r2 = raw_stream(db, "m", {}, batch_size=1)
    db.m.insert_many([{"_id": i} for i in range(5)])
    seen1, seen2 = [], []
    for _ in range(5):
        for reply, seen in ((r1, seen1), (r2, seen2)):
            more = get_more(db, reply, batch_size=1)
            assert len(more["cursor"]["nextBatch"]) == 1, more
            seen += more["cursor"]["nextBatch"]
    assert [e["documentKey"]["_id"] for e in seen1] == [0, 1, 2, 3, 4]
    assert seen2 == seen1
    resumed = raw_stream(db, "m", {"resumeAfter": seen1[1]["_id"]})
    rest = drain(db, resumed, 3)
    assert [e["documentKey"]["_id"] for e in rest] == [2, 3, 4], rest
    assert [e["_id"] for e in rest] == [e["_id"] for e in seen1[2:]]


def test_many_streams_over_many_commits_each_see_every_event_in_order(client):
    """24 streams (plain, filtered, reshaped) over 300 commits: every
    stream gets exactly its events, in order."""
    db = client.shr
    specs = []
    for i in range(24):
        stages = [[], [{"$match": {"fullDocument.k": {"$mod": [3, 0]}}}],
                  [{"$set": {"i": i}}]][i % 3]
        specs.append((stages, raw_stream(db, "many", {}, stages)))
    for k in range(300):
        db.many.insert_one({"_id": k, "k": k})
    for i, (stages, reply) in enumerate(specs):
        want = 100 if i % 3 == 1 else 300
        events = drain(db, reply, want)
        ids = [e["documentKey"]["_id"] for e in events]
        expect = list(range(0, 300, 3)) if i % 3 == 1 else list(range(300))
        assert ids == expect, (i, ids[:10])
        if i % 3 == 2:
            assert all(e["i"] == i for e in events)
        else:
            assert not any("i" in e for e in events)


def test_a_getmore_soon_after_results_still_answers_by_its_max_time(client):
    """A stream that just returned results waits a few ms before its next
    batch (pacing), but never past the getMore's maxTimeMS: with maxTimeMS
    1 the waiting event comes in that reply, and with a long one it comes
    in well under a second."""
    db = client.shr
    reply = raw_stream(db, "pace", {})
    db.pace.insert_one({"_id": 1})
    first = get_more(db, reply, max_time_ms=5000)
    assert [e["documentKey"]["_id"] for e in first["cursor"]["nextBatch"]] == [1]
    db.pace.insert_one({"_id": 2})
    second = get_more(db, reply, max_time_ms=1)
    assert [e["documentKey"]["_id"] for e in second["cursor"]["nextBatch"]] == [2], second
    db.pace.insert_one({"_id": 3})
    t0 = time.monotonic()
    third = get_more(db, reply, max_time_ms=5000)
    took = time.monotonic() - t0
    assert [e["documentKey"]["_id"] for e in third["cursor"]["nextBatch"]] == [3], third
    assert took < 1.0, "the paced getMore waited %.3f s" % took
    assert third["cursor"]["postBatchResumeToken"] == third["cursor"]["nextBatch"][0]["_id"]


def test_streams_parked_together_are_woken_together_with_their_own_replies(atomdb):
    """Eight streams with getMores parked at once, woken by the same
    commits round after round (their replies are built side by side):
    each reply is its own stream's, with exactly the next events."""
    import threading
    clients = [connect(atomdb) for _ in range(9)]
    try:
        db = clients[0].shr
        db.create_collection("park")
        replies = [raw_stream(c.shr, "park", {}, [{"$set": {"who": i}}] if i % 2 else [])
                   for i, c in enumerate(clients[1:])]
        got = [[] for _ in replies]
        errors = []

        def watch(i):
            c, reply = clients[i + 1], replies[i]
            cid = reply["cursor"]["id"]
            try:
                while len(got[i]) < 40:
                    more = checked_get_more(c.shr, reply, 5000)
                    assert more["cursor"]["id"] == cid, (i, more["cursor"]["id"], cid)
                    got[i].extend(more["cursor"]["nextBatch"])
            except Exception as e:  # reported below
                errors.append((i, e))

        threads = [threading.Thread(target=watch, args=(i,)) for i in range(len(replies))]
        for t in threads:
            t.start()
        for k in range(40):
            db.park.insert_one({"_id": k})
            time.sleep(0.01 if k % 4 else 0.05)  # let the getMores park again
        for t in threads:
            t.join(60)
        assert not errors, errors
        for i, events in enumerate(got):
            assert [e["documentKey"]["_id"] for e in events] == list(range(40)), (i, events[:3])
            assert all(e.get("who") == (i if i % 2 else None) for e in events), i
    finally:
        for c in clients:
            c.close()


def test_a_stream_catching_up_in_small_batches_is_not_paced(client):
    """Pacing holds back only a stream that caught up: 300 waiting events
    read with batchSize 1 come one per getMore without the 4 ms pause
    between them (300 paced getMores would take at least 1.2 s)."""
    db = client.shr
    reply = raw_stream(db, "catchup", {}, batch_size=1)
    db.catchup.insert_many([{"_id": i} for i in range(300)])
    ids = []
    t0 = time.monotonic()
    for _ in range(300):
        more = get_more(db, reply, max_time_ms=5000, batch_size=1)
        ids += [e["documentKey"]["_id"] for e in more["cursor"]["nextBatch"]]
    took = time.monotonic() - t0
    assert ids == list(range(300)), ids[:5]
    assert took < 1.0, "300 getMores of a stream catching up took %.2f s" % took
