"""Snapshots and the WAL together: a snapshot plus the WAL after it, the WAL
alone, and snapshot files that are missing, half-written or torn.

Every test compares a digest of all data (every non-system database and
collection, each document's exact BSON, and the index specs) taken before a
kill -9 with the digest after the restart.
"""

import datetime
import re
import shutil

import pytest
from bson.binary import Binary
from bson.decimal128 import Decimal128
from bson.int64 import Int64
from bson.objectid import ObjectId
from pymongo import ReturnDocument
from pymongo.errors import DuplicateKeyError

from crashlib import (
    ServerProblem, describe_difference, digest, dump, read_wal, snapshots, wait_for, wal_segments)

NO_AUTO_SNAPSHOT = ["--snapshot-interval", "0", "--snapshot-wal-mb", "4096"]
FIRST_MARKER = "first-write-of-the-test"


def start_or_fail(server, what):
    try:
        server.start()
    except ServerProblem as e:
        pytest.fail("%s: %s" % (what, e), pytrace=False)


def workload_a(client):
    """Builds varied data in two databases: many BSON types, indexes, and
    updates of every common kind."""
    db = client.crash_snap
    people = db.people
    people.insert_one({"_id": "first", "m": FIRST_MARKER})
    people.create_index("email", unique=True)
    people.create_index([("age", -1), ("name", 1)], name="age_name")
    base = datetime.datetime(2024, 1, 2, 3, 4, 5, 678000)
    people.insert_many([{
        "_id": i, "name": "person %03d" % i, "email": "p%03d@example.com" % i,
        "age": i % 90, "tags": ["t%d" % (i % 5), "t%d" % (i % 7)],
        "nested": {"a": {"b": i, "c": [i, {"d": str(i)}]}},
        "when": base + datetime.timedelta(minutes=i),
        "price": Decimal128("%d.%02d" % (i, i % 100)), "big": Int64(1 << 40 | i),
        "ratio": i / 7.0, "bin": Binary(bytes([i % 256]) * 5), "ref": ObjectId(),
        "flag": i % 2 == 0, "nothing": None,
    } for i in range(300)])
    people.update_many({"age": {"$lt": 10}}, {"$inc": {"nested.a.b": 1000}, "$set": {"young": True}})
    people.update_one({"_id": 5}, {"$push": {"tags": {"$each": ["x", "y"], "$position": 0}}})
    people.update_one({"_id": 6}, {"$unset": {"nested.a.c": ""}, "$rename": {"name": "fullName"}})
    people.replace_one({"_id": 7}, {"email": "seven@example.com", "replaced": True})
    people.delete_many({"age": {"$gte": 85}})
    orders = db.orders
    orders.insert_many([{"item": "i%d" % (i % 13), "qty": i, "seats": {str(s): "N" for s in range(20)}}
                        for i in range(200)])
    other = client.crash_snap_other
    other.events.insert_many([{"_id": "e%02d" % i, "n": i} for i in range(50)])
    other["dotted.name"].insert_one({"_id": 1, "x": "in a collection whose name has a dot"})


def workload_b(client):
    """Changes data that is in the snapshot and adds new data after it."""
    db = client.crash_snap
    people = db.people
    people.update_many({"flag": True}, {"$inc": {"big": 3}, "$mul": {"ratio": 2}})
    people.update_one({"_id": 11}, {"$set": {"nested.a.c.1.d": "changed"}, "$addToSet": {"tags": "new"}})
    people.update_one({"_id": 12}, {"$pull": {"tags": "t2"}, "$currentDate": {"touched": True}})
    people.update_one({"_id": 13}, {"$set": {"tags.$[t]": "T"}}, array_filters=[{"t": "t3"}])
    people.update_one({"_id": "new-upsert"}, {"$setOnInsert": {"made": "by upsert", "email": "upsert@example.com"},
                                               "$set": {"age": 1}},
                      upsert=True)
    people.find_one_and_update({"_id": 14}, {"$inc": {"age": 1}}, return_document=ReturnDocument.AFTER)
    people.find_one_and_delete({"_id": 15})
    people.delete_many({"age": {"$lt": 3}})
    people.insert_many([{"_id": 1000 + i, "email": "late%d@example.com" % i} for i in range(40)])
    people.drop_index("age_name")
    # Booking seats: one field of a large document changes per update.
    orders = db.orders
    for s in range(10):
        orders.update_one({"qty": s, "seats.%d" % s: "N"}, {"$set": {"seats.%d" % s: "Y:user%02d" % s}})
    orders.drop()
    db.orders2.insert_many([{"_id": i, "v": i * i} for i in range(30)])
    other = client.crash_snap_other
    other.events.update_many({}, {"$inc": {"n": 100}})
    client.crash_snap_gone.tmp.insert_one({"_id": 1})
    client.drop_database("crash_snap_gone")


def take_snapshot(client, server):
    """{fsync: 1}, then waits until a finished snapshot file exists."""
    had = set(snapshots(server.dbpath))
    reply = client.admin.command("fsync")
    assert reply.get("ok") == 1, "{fsync: 1} answers ok:1 (got %r)" % reply
    made = wait_for(lambda: set(snapshots(server.dbpath)) - had, timeout=20)
    assert made, "{fsync: 1} writes a new snapshot-<lsn>.adb in the dbpath (files: %r)" % (
        sorted(p.name for p in server.dbpath.iterdir()),)
    return sorted(made)[-1]


def assert_same(before, after, what):
    assert digest(before) == digest(after), "%s:\n%s" % (what, describe_difference(before, after))


def assert_unique_index_enforced(client, what):
    try:
        client.crash_snap.people.insert_one({"_id": "dup", "email": "p100@example.com"})
    except DuplicateKeyError:
        return
    pytest.fail("%s: the unique index on email still rejects a duplicate" % what)


def test_a_snapshot_plus_later_wal_replays_to_the_same_state(crash_server):
    server = crash_server("--journal", "write", *NO_AUTO_SNAPSHOT)
    start_or_fail(server, "first start")
    with server.client() as c:
        workload_a(c)
        mid = dump(c)
        take_snapshot(c, server)
        workload_b(c)
        before = dump(c)
    assert digest(mid) != digest(before), "the writes after the snapshot changed the data"
    server.kill9()

    start_or_fail(server, "restart from the snapshot plus the WAL after it")
    with server.client() as c:
        after = dump(c)
        assert_same(before, after, "snapshot + WAL after kill -9 gives the data as it was before the kill")
        assert_unique_index_enforced(c, "after recovery from snapshot + WAL")

    problems = server.stop()
    assert not problems, "clean stop after recovery:\n" + "\n".join(problems)
    start_or_fail(server, "start after the clean stop (which snapshots)")
    with server.client() as c:
        again = dump(c)
    assert_same(before, again, "the shutdown snapshot gives the same data again")


def test_a_server_that_never_took_a_snapshot_recovers_everything_from_the_wal(crash_server):
    server = crash_server("--journal", "write", *NO_AUTO_SNAPSHOT)
    start_or_fail(server, "first start")
    with server.client() as c:
        workload_a(c)
        workload_b(c)
        before = dump(c)
    server.kill9()
    assert not snapshots(server.dbpath), \
        "no snapshot was taken with --snapshot-interval 0 and a 4 GiB --snapshot-wal-mb (files: %r)" % (
            sorted(p.name for p in server.dbpath.iterdir()),)
    start_or_fail(server, "restart from the WAL alone")
    with server.client() as c:
        after = dump(c)
        assert_same(before, after, "the WAL alone restores all data after kill -9")
        assert_unique_index_enforced(c, "after recovery from the WAL alone")


def test_a_missing_snapshot_falls_back_to_the_wal(crash_server, tmp_path):
    # The server prunes the WAL a snapshot covers, so a copy of the segments
    # taken just before {fsync: 1} is put back afterwards: the WAL then holds
    # every write from the first on, as it would had pruning not happened yet.
    server = crash_server("--journal", "write", *NO_AUTO_SNAPSHOT)
    start_or_fail(server, "first start")
    saved = tmp_path / "saved-wal"
    saved.mkdir()
    with server.client() as c:
        workload_a(c)
        for seg in wal_segments(server.dbpath):
            shutil.copy2(seg, saved / seg.name)
        take_snapshot(c, server)
        workload_b(c)
        before = dump(c)
    server.kill9()
    for seg in saved.iterdir():
        if not (server.dbpath / seg.name).exists():
            shutil.copy2(seg, server.dbpath / seg.name)
    assert any(FIRST_MARKER.encode() in r.payload for r in read_wal(server.dbpath)), \
        "harness: the WAL in the dbpath holds the very first write again"
    for snap in snapshots(server.dbpath):
        snap.unlink()
    start_or_fail(server, "restart with the snapshot deleted while the WAL holds every write")
    with server.client() as c:
        after = dump(c)
    assert_same(before, after, "with its snapshot deleted the server rebuilds all data from the WAL")


def test_a_missing_snapshot_whose_wal_was_pruned_stops_start_up_instead_of_losing_data(crash_server):
    # Plain inserts with retryable writes off, so that nothing in the later WAL
    # happens to refer to data only the snapshot had.
    server = crash_server("--journal", "write", *NO_AUTO_SNAPSHOT)
    start_or_fail(server, "first start")
    with server.client(retryWrites=False) as c:
        for i in range(20):
            c.crash_snap.early.insert_one({"_id": i})
        take_snapshot(c, server)
        for i in range(5):
            c.crash_snap.late.insert_one({"_id": i})
    # Pruning follows the snapshot's completion; give it a moment.
    wait_for(lambda: not any(r.lsn == 1 for r in read_wal(server.dbpath)), timeout=5)
    server.kill9()
    if any(r.lsn == 1 for r in read_wal(server.dbpath)):
        pytest.skip("the server kept the WAL its snapshot covers; "
                    "test_a_missing_snapshot_falls_back_to_the_wal covers this case")
    for snap in snapshots(server.dbpath):
        snap.unlink()
    rc, out = server.start_expecting_refusal(timeout=6)
    assert rc is not None and rc != 0, \
        "with the snapshot gone and the WAL starting at LSN %d (the writes before it are nowhere), " \
        "start-up stops instead of silently serving only the later writes (exit %r):\n%s" % (
            min(r.lsn for r in read_wal(server.dbpath)), rc, out[-2000:])


def test_a_half_written_snapshot_file_is_ignored(crash_server):
    server = crash_server("--journal", "write", *NO_AUTO_SNAPSHOT)
    start_or_fail(server, "first start")
    with server.client() as c:
        workload_a(c)
        take_snapshot(c, server)
        workload_b(c)
        before = dump(c)
    server.kill9()
    # A crash while a snapshot was being written leaves its .tmp behind.
    (server.dbpath / ("snapshot-%016x.adb.tmp" % ((1 << 62) + 5))).write_bytes(b"\x00half a snapshot" * 100)
    start_or_fail(server, "restart next to a leftover snapshot .tmp file")
    with server.client() as c:
        after = dump(c)
    assert_same(before, after, "a leftover snapshot .tmp is not loaded")


def test_a_torn_newest_snapshot_is_skipped_for_an_older_valid_one(crash_server):
    server = crash_server("--journal", "write", *NO_AUTO_SNAPSHOT)
    start_or_fail(server, "first start")
    with server.client() as c:
        workload_a(c)
        snap = take_snapshot(c, server)
        workload_b(c)
        before = dump(c)
    server.kill9()
    m = re.match(r"snapshot-([0-9a-fA-F]{16})\.adb$", snap.name)
    data = snap.read_bytes()
    # A newer-named snapshot cut in half, as a copy on a broken disk would be,
    # at an LSN the WAL still reaches (a snapshot beyond the log's end would
    # hold writes that are nowhere else: start-up refuses that, see below).
    last = max(r.lsn for r in read_wal(server.dbpath))
    assert last > int(m.group(1), 16), "harness: workload_b wrote after the snapshot"
    newer = server.dbpath / ("snapshot-%016x.adb" % last)
    newer.write_bytes(data[:len(data) // 2])
    start_or_fail(server, "restart with a torn snapshot newer than the valid one")
    with server.client() as c:
        after = dump(c)
    assert_same(before, after, "a torn newest snapshot is skipped: the older valid snapshot plus the WAL "
                               "give the data as before the kill")


def test_a_damaged_only_snapshot_whose_wal_was_pruned_stops_start_up(crash_server):
    # Once a snapshot is written the WAL it covers is pruned, so the snapshot
    # alone holds the data: when it is damaged, starting empty would silently
    # lose everything (found while writing the recovery fuzz target, issue 23).
    server = crash_server("--journal", "fsync", *NO_AUTO_SNAPSHOT)
    start_or_fail(server, "first start")
    with server.client() as c:
        workload_a(c)
        snap = take_snapshot(c, server)
    wait_for(lambda: not any(r.lsn == 1 for r in read_wal(server.dbpath)), timeout=5)
    server.kill9()
    if any(r.lsn == 1 for r in read_wal(server.dbpath)):
        pytest.skip("the server kept the WAL its snapshot covers")
    data = bytearray(snap.read_bytes())
    data[len(data) // 2] ^= 0xFF  # one flipped byte: a checksum mismatch
    snap.write_bytes(bytes(data))
    rc, out = server.start_expecting_refusal(timeout=6)
    assert rc is not None and rc != 0, \
        "with the only snapshot damaged and its WAL pruned, start-up stops instead of " \
        "serving an empty database (exit %r):\n%s" % (rc, out[-2000:])
    assert snap.name in out, "the refusal names the damaged file:\n%s" % out[-2000:]
