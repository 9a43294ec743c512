"""Long operations never stall the loop, and memory is bounded (issue 13,
docs/design.md "Long operations", docs/concurrency.md): a hot-counter
client in another process keeps making progress while reports, an
$unwind/$count and an updateMany run; the reports read one snapshot while
transactions move money under them; maxTimeMS (50), killOp through
currentOp (11601), the blocking stages' memory caps (292, 146), the 16 MB
expression limit (10334) and --max-memory (146) answer with their codes.

Every assertion is on correctness or on progress (work done while another
operation was running), never on how long something took."""

import os
import random
import sys
import threading
import time
from pathlib import Path

import pytest
from pymongo import UpdateOne
from pymongo.errors import BulkWriteError, OperationFailure

from atomdb_clients import connect
from hot_counter import HotCounter, LosslessCounter, OpSpans

MAX_TIME_MS_EXPIRED = 50
INTERRUPTED = 11601
EXCEEDED_MEMORY_LIMIT = 146
NO_DISK_USE = 292
BSON_TOO_LARGE = 10334
DOCS = 300_000

def rss_bytes(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS for pid %d" % pid)


def fill(db, n=DOCS):
    for start in range(0, n, 20_000):
        db.docs.insert_many([{"_id": i, "g": i % 100, "s": "name%d" % i, "v": i, "bal": 10}
                             for i in range(start, min(n, start + 20_000))])


@pytest.fixture(scope="module")
def loaded(atomdb_module):
    c = connect(atomdb_module)
    fill(c.t)
    yield atomdb_module, c
    c.close()


def test_a_hot_counter_in_another_process_makes_progress_while_reports_run(loaded):
    server, c = loaded
    db = c.t
    c.hot.counter.replace_one({"_id": 1}, {"_id": 1, "n": 0}, upsert=True)
    counter = HotCounter(server)
    spans = OpSpans()
    timed = spans.timed

    for _ in range(2):
        groups = timed("$group", lambda: list(db.docs.aggregate(
            [{"$group": {"_id": "$g", "n": {"$sum": 1}, "t": {"$sum": "$v"}}}])))
        assert len(groups) == 100 and sum(g["n"] for g in groups) == DOCS, \
            "the $group saw every document once"
        n9 = timed("regex count", lambda: db.docs.count_documents({"s": {"$regex": "9$"}}))
        assert n9 == DOCS // 10, "the regex scan counted every name ending in 9"
    unwound = timed("$unwind/$count", lambda: list(db.docs.aggregate(
        [{"$match": {"_id": {"$lt": 100_000}}}, {"$project": {"r": {"$range": [0, 40]}}},
         {"$unwind": "$r"}, {"$count": "n"}])))
    assert unwound == [{"n": 4_000_000}], "the $unwind/$count counted 4,000,000 documents"
    res = timed("updateMany", lambda: db.docs.update_many({}, {"$inc": {"u": 1}}))
    assert res.matched_count == DOCS and res.modified_count == DOCS, \
        "updateMany changed every document once"
    total = counter.finish()

    assert c.hot.counter.find_one({"_id": 1})["n"] == total, \
        "no increment was lost: the counter equals the acknowledged increments"
    assert db.docs.count_documents({"u": 1}) == DOCS, "every document has u: 1 exactly"
    for name, t0, t1 in spans:
        n = counter.inside(t0, t1)
        assert n >= 5, ("the counter made progress while the %s ran (it completed %d "
                        "increments inside it)" % (name, n))


def test_a_report_reads_one_snapshot_while_transactions_move_money(loaded):
    """Transfers between random documents commit in transactions while
    $group reports sum every balance: each report sees the same total."""
    server, c = loaded
    db = c.t
    db.docs.update_many({}, {"$set": {"bal": 10}})
    stop = threading.Event()
    moved = [0]

    def transfers():
        tc = connect(server)
        col = tc.t.docs
        rnd = random.Random(13)
        while not stop.is_set():
            a, b = rnd.randrange(DOCS), rnd.randrange(DOCS)
            if a == b:
                continue
            with tc.start_session() as s:
                with s.start_transaction():
                    col.update_one({"_id": a}, {"$inc": {"bal": -1}}, session=s)
                    col.update_one({"_id": b}, {"$inc": {"bal": 1}}, session=s)
            moved[0] += 1
        tc.close()

    th = threading.Thread(target=transfers)
    th.start()
    try:
        totals = []
        for _ in range(4):
            r = list(db.docs.aggregate([{"$group": {"_id": None, "t": {"$sum": "$bal"},
                                                    "n": {"$sum": 1}}}]))
            totals.append((r[0]["t"], r[0]["n"]))
    finally:
        stop.set()
        th.join()
    assert moved[0] > 0, "transfers committed while the reports ran"
    assert totals == [(10 * DOCS, DOCS)] * 4, \
        "every report saw one snapshot: the total of all balances never changed"


def test_updatemany_and_a_concurrent_counter_on_the_same_documents_lose_nothing(loaded):
    """Each document is atomic: an updateMany that yields re-reads a target
    another client changed meanwhile, so neither's $inc is lost."""
    server, c = loaded
    db = c.t
    db.docs.update_many({}, {"$set": {"w": 0}})
    stop = threading.Event()
    hits = {}

    def poke():
        pc = connect(server)
        rnd = random.Random(7)
        while not stop.is_set():
            i = rnd.randrange(DOCS)
            pc.t.docs.update_one({"_id": i}, {"$inc": {"w": 1}})
            hits[i] = hits.get(i, 0) + 1
        pc.close()

    th = threading.Thread(target=poke)
    th.start()
    try:
        res = db.docs.update_many({}, {"$inc": {"w": 1000}})
    finally:
        stop.set()
        th.join()
    assert res.matched_count == DOCS, "updateMany matched every document"
    wrong = [d for d in db.docs.find({}, {"w": 1}) if d["w"] != 1000 + hits.get(d["_id"], 0)]
    assert not wrong, "every document has both updates: %r" % wrong[:3]


@pytest.mark.parametrize("what", ["find", "aggregate", "count", "distinct", "update", "delete",
                                  "findAndModify"])
def test_max_time_ms_stops_a_long_command_with_max_time_ms_expired(loaded, what):
    _, c = loaded
    db = c.t
    slow = {"s": {"$regex": "^(a|b|c)*x$"}}  # matches nothing, scans all
    cmds = {
        "find": lambda: list(db.docs.find(slow).max_time_ms(1)),
        "aggregate": lambda: list(db.docs.aggregate([{"$match": slow}], maxTimeMS=1)),
        "count": lambda: db.docs.count_documents(slow, maxTimeMS=1),
        "distinct": lambda: db.command("distinct", "docs", key="g", query=slow, maxTimeMS=1),
        "update": lambda: db.command("update", "docs", maxTimeMS=1,
                                     updates=[{"q": slow, "u": {"$set": {"x": 1}}, "multi": True}]),
        "delete": lambda: db.command("delete", "docs", maxTimeMS=1,
                                     deletes=[{"q": slow, "limit": 0}]),
        "findAndModify": lambda: db.command("findAndModify", "docs", query=slow,
                                            update={"$set": {"x": 1}}, maxTimeMS=1),
    }
    with pytest.raises(OperationFailure) as e:
        cmds[what]()
    assert e.value.code == MAX_TIME_MS_EXPIRED, \
        "%s with maxTimeMS: 1 fails with MaxTimeMSExpired (got %s)" % (what, e.value)
    assert db.docs.estimated_document_count() == DOCS, "nothing was deleted"


def find_op(admin, comment, via_stage):
    for _ in range(400):
        if via_stage:
            ops = list(admin.aggregate([{"$currentOp": {"allUsers": True}},
                                        {"$match": {"command.comment": comment}}]))
        else:
            ops = admin.command({"currentOp": 1, "command.comment": comment})["inprog"]
        if ops:
            return ops[0]
        time.sleep(0.01)
    raise AssertionError("currentOp never showed the operation with comment %r" % comment)


@pytest.mark.parametrize("via_stage", [False, True], ids=["command", "stage"])
def test_killop_interrupts_an_operation_found_by_its_comment(loaded, via_stage):
    server, c = loaded
    db = c.t
    result = {}
    comment = "report-%s" % via_stage
    # ~10 s of work per run if nothing stops it
    heavy = [{"$project": {"x": {"$reduce": {"input": {"$range": [0, 300]}, "initialValue": 0,
                                             "in": {"$add": ["$$value", "$$this"]}}}}},
             {"$group": {"_id": None, "t": {"$sum": "$x"}}}]

    def run():
        rc = connect(server)
        try:
            result["r"] = list(rc.t.docs.aggregate(heavy, comment=comment))
        except OperationFailure as e:
            result["e"] = e
        rc.close()

    th = threading.Thread(target=run)
    th.start()
    op = find_op(c.admin, comment, via_stage)
    assert op["ns"] == "t.docs" and op["active"] is True and isinstance(op["opid"], int), \
        "currentOp shows ns, active and opid (got %r)" % op
    assert op["command"]["comment"] == comment and "secs_running" in op and \
        "microsecs_running" in op and "client" in op, "currentOp shows the command and client"
    assert op["numYields"] >= 0 and op["waitingForLock"] is False
    assert c.admin.command("killOp", op=op["opid"])["ok"] == 1.0
    th.join(timeout=120)
    assert "e" in result, "the killed aggregate failed (got %r)" % result.get("r")
    assert result["e"].code == INTERRUPTED, "killOp interrupts with Interrupted (11601)"
    assert not c.admin.command({"currentOp": 1, "command.comment": comment})["inprog"], \
        "the killed operation is gone from currentOp"


def test_killop_interrupts_an_updatemany(loaded):
    server, c = loaded
    result = {}

    def run():
        rc = connect(server)
        try:
            rc.t.command("update", "docs", comment="um",
                         updates=[{"q": {"s": {"$regex": "^(a|b|c)*x$|"}},
                                   "u": {"$inc": {"k": 1}}, "multi": True}])
            result["r"] = True
        except OperationFailure as e:
            result["e"] = e
        rc.close()

    # many slices: a regex with an empty alternative matches every name
    for _ in range(3):
        th = threading.Thread(target=run)
        th.start()
        try:
            op = find_op(c.admin, "um", False)
        except AssertionError:
            th.join()
            continue  # it finished before it was seen: try again
        c.admin.command("killOp", op=op["opid"])
        th.join()
        if "e" in result:
            break
    assert "e" in result and result["e"].code == INTERRUPTED, \
        "a killed updateMany fails with Interrupted (11601)"
    k = c.t.docs.count_documents({"k": {"$exists": True}})
    assert 0 <= k <= DOCS, "documents updated before the kill keep their update"


def test_blocking_stages_stop_at_their_memory_limits(loaded):
    server, c = loaded
    db, admin = c.t, c.admin
    rss0 = rss_bytes(server.proc.pid)
    params = {"internalQueryMaxBlockingSortMemoryUsageBytes": 1_000_000,
              "internalDocumentSourceGroupMaxMemoryBytes": 2_000_000,
              "internalQueryMaxPushBytes": 500_000, "internalQueryMaxAddToSetBytes": 500_000}
    admin.command("setParameter", 1, **params)
    try:
        for name, getp in params.items():
            assert admin.command("getParameter", 1, **{name: 1})[name] == getp, \
                "getParameter reads %s back" % name
        cases = [
            ("$sort", [{"$sort": {"v": -1}}], NO_DISK_USE, "Sort exceeded memory limit"),
            ("$group", [{"$group": {"_id": "$_id"}}], NO_DISK_USE,
             "Exceeded memory limit for $group"),
            ("$push", [{"$group": {"_id": None, "a": {"$push": "$s"}}}], EXCEEDED_MEMORY_LIMIT,
             "$push used too much memory"),
            ("$addToSet", [{"$group": {"_id": None, "a": {"$addToSet": "$s"}}}],
             EXCEEDED_MEMORY_LIMIT, "$addToSet used too much memory"),
        ]
        for name, pipeline, code, text in cases:
            for disk in (False, True):
                with pytest.raises(OperationFailure) as e:
                    list(db.docs.aggregate(pipeline, allowDiskUse=disk))
                assert e.value.code == code and text in str(e.value), \
                    "%s over its limit (allowDiskUse %s) fails with %d: %s" % (
                        name, disk, code, e.value)
                if disk and code == NO_DISK_USE:
                    assert "allowDiskUse is not implemented" in str(e.value), \
                        "allowDiskUse: true says atomdb cannot spill"
    finally:
        admin.command("setParameter", 1, internalQueryMaxBlockingSortMemoryUsageBytes=104857600,
                      internalDocumentSourceGroupMaxMemoryBytes=104857600,
                      internalQueryMaxPushBytes=104857600, internalQueryMaxAddToSetBytes=104857600)
    assert len(list(db.docs.aggregate([{"$sort": {"v": -1}}, {"$limit": 3}]))) == 3, \
        "under the default 100 MB the same sort runs"
    assert rss_bytes(server.proc.pid) - rss0 < 512 * 1024 * 1024, \
        "the server's RSS stayed within 512 MB of where it started"


def test_streaming_stages_do_not_materialize_what_they_count(loaded):
    # 10 M documents made by $range/$unwind twice, only to be counted: the
    # streamed stages hold one input document's worth at a time, so the
    # server's memory does not grow with the count (materialized, this was
    # ~3 GB)
    server, c = loaded
    rss0 = rss_bytes(server.proc.pid)
    peak = [rss0]
    done = threading.Event()

    def watch():
        while not done.is_set():
            peak[0] = max(peak[0], rss_bytes(server.proc.pid))
            time.sleep(0.02)

    t = threading.Thread(target=watch, daemon=True)
    t.start()
    try:
        r = list(c.t.aggregate([
            {"$documents": [{}]}, {"$project": {"a": {"$range": [0, 10_000]}}},
            {"$unwind": "$a"}, {"$project": {"b": {"$range": [0, 1_000]}}},
            {"$unwind": "$b"}, {"$skip": 5}, {"$limit": 9_999_990}, {"$count": "n"}]))
    finally:
        done.set()
        t.join()
    assert r == [{"n": 9_999_990}], "every unwound document was counted, $skip and $limit applied"
    assert peak[0] - rss0 < 512 * 1024 * 1024, \
        "the server's RSS stayed within 512 MB of where it started (peak +%d MB)" % (
            (peak[0] - rss0) // (1024 * 1024))


@pytest.mark.parametrize("op,expr", [
    ("$concat", {"$reduce": {"input": {"$range": [0, 40]}, "initialValue": "ab",
                             "in": {"$concat": ["$$value", "$$value"]}}}),
    ("$concatArrays", {"$let": {"vars": {"a": {"$range": [0, 999_999]}},
                                "in": {"$concatArrays": ["$$a", "$$a", "$$a"]}}}),
    ("$map", {"$map": {"input": {"$range": [0, 900_000]}, "in": "abcdefghijklmnopqrstuvwxyz"}}),
])
def test_no_expression_builds_a_value_over_16_mb(loaded, op, expr):
    server, c = loaded
    rss0 = rss_bytes(server.proc.pid)
    with pytest.raises(OperationFailure) as e:
        list(c.t.aggregate([{"$documents": [{}]}, {"$project": {"x": expr}}]))
    assert e.value.code == BSON_TOO_LARGE and op in str(e.value), \
        "the 16 MB limit names %s (got %s)" % (op, e.value)
    assert rss_bytes(server.proc.pid) - rss0 < 512 * 1024 * 1024, \
        "the server's RSS stayed within 512 MB of where it started"


def test_max_memory_refuses_inserts_serves_reads_and_accepts_inserts_after_a_delete(
        atomdb_factory):
    server = atomdb_factory("--max-memory", "256MB")
    c = connect(server)
    col = c.t.m
    st = c.admin.command("serverStatus")["atomdbMemory"]
    assert st["limit"] == 256 * 1024 * 1024 and st["used"] > 0, \
        "serverStatus shows the limit and the use (got %r)" % st
    pad = "x" * 1000
    n, refused = 0, None
    while n < 2_000_000 and refused is None:
        try:
            col.insert_many([{"_id": n + i, "p": pad} for i in range(1000)])
            n += 1000
        except BulkWriteError as e:
            refused = e.details["writeErrors"][0] if e.details.get("writeErrors") else e.details
        except OperationFailure as e:
            refused = e
    assert isinstance(refused, OperationFailure) and refused.code == EXCEEDED_MEMORY_LIMIT, \
        "an insert past the limit fails with ExceededMemoryLimit (got %r)" % refused
    assert "268435456" in str(refused), "the error names the limit"
    assert n > 0 and col.count_documents({}) == n, "reads still work and see every document"
    assert col.find_one({"_id": n - 1})["_id"] == n - 1
    assert c.admin.command("serverStatus")["atomdbMemory"]["refusedWrites"] >= 1
    deleted = col.delete_many({"_id": {"$lt": n // 2}}).deleted_count
    assert deleted == n // 2, "deletes work past the limit"
    for _ in range(100):  # the use is sampled every few milliseconds
        try:
            col.insert_one({"_id": "again", "p": pad})
            break
        except OperationFailure:
            time.sleep(0.01)
    assert col.find_one({"_id": "again"}) is not None, "inserts are accepted again after a delete"
    c.t.drop_collection("m")  # drops work too (and the shutdown snapshot stays small)
    assert "m" not in c.t.list_collection_names(), "the collection was dropped"
    c.close()


def test_current_op_refuses_the_options_it_does_not_implement(loaded):
    # never accept and ignore: idle cursors are not listed, ops are not
    # truncated, and targetAllNodes is for mongos
    _, c = loaded
    for opt, code in [("idleCursors", 238), ("truncateOps", 238),
                      ("backtrace", 238), ("targetAllNodes", 9)]:
        with pytest.raises(OperationFailure) as e:
            list(c.admin.aggregate([{"$currentOp": {opt: True}}]))
        assert e.value.code == code and (opt in str(e.value)), (opt, e.value)
        # false is what atomdb does anyway
        list(c.admin.aggregate([{"$currentOp": {opt: False}}]))
    assert isinstance(c.admin.command("currentOp", {"$ownOps": True})["inprog"], list)


def test_current_op_all_lists_idle_connections(loaded):
    # db.currentOp(true): an idle connection is listed (active: false) with
    # $all / idleConnections, and not without
    server, c = loaded
    idle = connect(server)
    me = idle.admin.command("hello")["connectionId"]
    try:
        for ops in (c.admin.command({"currentOp": 1, "$all": True})["inprog"],
                    list(c.admin.aggregate([{"$currentOp": {"allUsers": True,
                                                            "idleConnections": True}}]))):
            mine = [o for o in ops if o.get("connectionId") == me]
            assert len(mine) == 1 and mine[0]["active"] is False and "client" in mine[0], \
                "the idle connection is listed, inactive (got %r)" % mine
        assert not [o for o in c.admin.command("currentOp")["inprog"]
                    if o.get("connectionId") == me], "without $all idle connections are not listed"
    finally:
        idle.close()


def test_find_in_memory_sort_stops_at_its_memory_limit(loaded):
    _, c = loaded
    admin, db = c.admin, c.t
    admin.command("setParameter", 1, internalQueryMaxBlockingSortMemoryUsageBytes=1_000_000)
    try:
        for disk in (False, True):
            with pytest.raises(OperationFailure) as e:
                list(db.docs.find({}).sort("v", -1).allow_disk_use(disk))
            assert e.value.code == NO_DISK_USE and "Sort exceeded memory limit" in str(e.value), \
                "find's blocking sort over its limit fails with 292 (got %s)" % e.value
            if disk:
                assert "allowDiskUse is not implemented" in str(e.value)
        assert len(list(db.docs.find({}).sort("v", -1).limit(3))) == 3, \
            "a top-3 sort holds 3 documents: under the limit"
        assert len(list(db.docs.find({}, {"_id": 1}).sort("_id", 1).limit(100_000))) == 100_000, \
            "a sort an index gives is not a blocking sort"
    finally:
        admin.command("setParameter", 1, internalQueryMaxBlockingSortMemoryUsageBytes=104857600)


def test_commit_transaction_honours_max_time_ms(loaded):
    server, c = loaded
    from pymongo.errors import PyMongoError
    c.t.drop_collection("txbig")
    c.t.create_collection("txbig")
    with c.start_session() as s:
        s.start_transaction(max_commit_time_ms=1)
        for start in range(0, 60_000, 10_000):
            c.t.txbig.insert_many([{"_id": i, "p": "x" * 20} for i in range(start, start + 10_000)],
                                  session=s)
        with pytest.raises(PyMongoError) as e:
            s.commit_transaction()
    assert getattr(e.value, "code", None) == MAX_TIME_MS_EXPIRED, \
        "a commit past its maxTimeMS fails with MaxTimeMSExpired (got %r)" % e.value
    assert c.t.txbig.count_documents({}) == 0, "the expired commit was undone whole"


def test_killop_ends_a_request_parked_on_a_document_lock(loaded):
    server, c = loaded
    c.t.locked.replace_one({"_id": 1}, {"_id": 1, "n": 0}, upsert=True)
    result = {}

    def run():
        rc = connect(server)
        try:
            rc.t.command("update", "locked", comment="parked",
                         updates=[{"q": {"_id": 1}, "u": {"$inc": {"n": 1}}}])
            result["r"] = True
        except OperationFailure as e:
            result["e"] = e
        rc.close()

    with c.start_session() as s:
        s.start_transaction()
        c.t.locked.update_one({"_id": 1}, {"$inc": {"n": 10}}, session=s)
        th = threading.Thread(target=run)
        th.start()
        op = find_op(c.admin, "parked", False)
        assert op["waitingForLock"] is True and op["waitingFor"]["type"] == "documentLock" and \
            op["waitingFor"]["ns"] == "t.locked", "the parked update waits on a document (%r)" % op
        c.admin.command("killOp", op=op["opid"])
        th.join(timeout=60)
        s.abort_transaction()
    assert "e" in result and result["e"].code == INTERRUPTED, \
        "the killed parked update fails with Interrupted (got %r)" % result
    assert c.t.locked.find_one({"_id": 1})["n"] == 0, "nothing was written"


def test_killop_ends_a_parked_acquire_lock(loaded):
    server, c = loaded
    c.admin.command("acquireLock", "kl", owner="a", leaseMs=60_000)
    result = {}

    def run():
        rc = connect(server)
        try:
            result["r"] = rc.admin.command("acquireLock", "kl", owner="b", leaseMs=1000,
                                           waitMs=60_000, comment="lease-wait")
        except OperationFailure as e:
            result["e"] = e
        rc.close()

    th = threading.Thread(target=run)
    th.start()
    op = find_op(c.admin, "lease-wait", False)
    assert op["waitingForLock"] is True and op["waitingFor"] == {
        "type": "lease", "name": "kl", "micros": op["waitingFor"]["micros"]}, op
    c.admin.command("killOp", op=op["opid"])
    th.join(timeout=60)
    assert "e" in result and result["e"].code == INTERRUPTED, result


# ---- index builds, drops and $out in slices (issue 13, second part) ----

class Spans:
    """Runs long operations while the hot counter runs in its own process,
    and prints what the counter did inside each (its ops and p99): timings
    are reported, never asserted; progress is asserted by counts."""

    def __init__(self, server, c):
        self.counter = LosslessCounter(server, c)
        self.spans = OpSpans()
        self.run = self.spans.timed

    def finish(self):
        self.counter.finish()
        for name, t0, t1 in self.spans:
            n, p99 = self.counter.during(t0, t1)
            print("counter during %s: %d ops in %.3f s, p99 gap %.1f ms"
                  % (name, n, t1 - t0, p99 * 1000))
            assert n >= 5, ("the counter made progress while the %s ran (it "
                            "completed %d increments inside it)" % (name, n))


def writer_during(server, fn_write, running):
    """A thread calling fn_write(db, k) for k = 0, 1, ... while `running`
    is set; returns (thread, done list) — done holds what was acknowledged."""
    done = []

    def loop():
        wc = connect(server)
        k = 0
        while running.is_set():
            done.append(fn_write(wc.t, k))
            k += 1
        wc.close()

    th = threading.Thread(target=loop)
    th.start()
    return th, done


def test_an_index_build_over_300k_documents_yields_and_indexes_writes_made_during_it(loaded):
    server, c = loaded
    db = c.t
    db.drop_collection("ib")
    fill_into = [{"_id": i, "a": i % 1000} for i in range(DOCS)]
    for s in range(0, DOCS, 20_000):
        db.ib.insert_many(fill_into[s:s + 20_000])
    spans = Spans(server, c)
    rng = random.Random(7)

    def write(wdb, k):
        # behind the scan (negative _ids come first), ahead of it, and
        # changes and deletes of documents the scan has or has not passed
        kind = k % 4
        if kind == 0:
            wdb.ib.insert_one({"_id": -1 - k, "a": 5000 + k})
        elif kind == 1:
            wdb.ib.insert_one({"_id": 10_000_000 + k, "a": 6000 + k})
        elif kind == 2:
            wdb.ib.update_one({"_id": rng.randrange(DOCS)}, {"$set": {"a": 7000 + k}})
        else:
            wdb.ib.delete_one({"_id": rng.randrange(DOCS)})
        return time.monotonic()

    running = threading.Event()
    running.set()
    th, done = writer_during(server, write, running)
    while len(done) < 20:
        time.sleep(0.01)
    t0 = time.monotonic()
    spans.run("createIndexes over 300k", lambda: db.ib.create_index("a", name="a_1"))
    t1 = time.monotonic()
    running.clear()
    th.join()
    spans.finish()
    during = sum(1 for t in done if t0 < t < t1)
    print("writes acknowledged during the build: %d" % during)
    assert during >= 5, "writes were served while the index was built (%d)" % during
    v = db.command("validate", "ib", full=True)
    n = db.ib.count_documents({})
    assert v["valid"] is True and v["keysPerIndex"]["a_1"] == n, \
        "the new index holds exactly one key per document, writes during the build included " \
        "(%r, %d documents)" % (v, n)
    for q in ({"a": {"$gte": 5000}}, {"a": {"$lt": 10}}, {"a": {"$gte": 7000}}):
        by_index = sorted(d["_id"] for d in db.ib.find(q, {"_id": 1}).hint("a_1"))
        by_scan = sorted(d["_id"] for d in db.ib.find(q, {"_id": 1}).hint("_id_"))
        assert by_index == by_scan, "the index finds exactly what a scan finds for %r" % q
    db.drop_collection("ib")


def test_a_unique_build_that_meets_a_duplicate_fails_with_11000_and_leaves_no_index(loaded):
    server, c = loaded
    db = c.t
    db.drop_collection("ub")
    for s in range(0, DOCS, 20_000):
        db.ub.insert_many([{"_id": i, "u": i} for i in range(s, min(DOCS, s + 20_000))])
    running = threading.Event()
    running.set()

    def write(wdb, k):
        # a document whose u another document already has: behind the scan
        # once it started, so only the write path can see the duplicate
        wdb.ub.insert_one({"_id": -1 - k, "u": k})
        return time.monotonic()

    th, done = writer_during(server, write, running)
    while not done:
        time.sleep(0.01)
    with pytest.raises(OperationFailure) as e:
        db.ub.create_index("u", unique=True, name="u_1")
    running.clear()
    th.join()
    assert e.value.code == 11000 and "E11000" in str(e.value), \
        "a unique build meeting a duplicate fails with DuplicateKey (got %s)" % e.value
    assert [ix["name"] for ix in db.ub.list_indexes()] == ["_id_"], "no index was left behind"
    assert db.command("validate", "ub", full=True)["valid"] is True
    # a write racing the build is never refused: every acknowledged one is there
    assert db.ub.count_documents({"_id": {"$lt": 0}}) == len(done)
    db.drop_collection("ub")


def test_dropping_a_300k_document_collection_and_its_database_frees_it_in_slices(loaded):
    server, c = loaded
    spans = Spans(server, c)
    for target in ("collection", "database"):
        d = c["dropme"]
        for s in range(0, DOCS, 20_000):
            d.big.insert_many([{"_id": i, "a": i, "s": "x%d" % i}
                               for i in range(s, min(DOCS, s + 20_000))])
        d.big.create_index("a")

        def drop():
            if target == "collection":
                d.drop_collection("big")
            else:
                c.drop_database("dropme")
            # the records go a slice at a time after the reply
            for _ in range(2000):
                st = c.admin.command("serverStatus")["atomdbOperations"]
                if st["droppedEntriesToFree"] == 0:
                    return
                time.sleep(0.005)
            raise AssertionError("the dropped records were never freed")

        spans.run("drop %s of 300k" % target, drop)
        assert "big" not in d.list_collection_names(), "the collection is gone"
        d.big.insert_one({"_id": 1})  # the name is free again at once
        assert d.big.count_documents({}) == 1
        c.drop_database("dropme")
    spans.finish()


def test_out_of_300k_documents_writes_in_slices_and_readers_see_the_old_or_the_new_whole(loaded):
    server, c = loaded
    db = c.t
    db.drop_collection("outc")
    db.outc.insert_many([{"_id": -i, "old": True} for i in range(1, 1001)])
    db.outc.create_index("v", name="v_1")
    spans = Spans(server, c)
    running = threading.Event()
    running.set()

    def read(wdb, k):
        return wdb.outc.count_documents({})

    th, seen = writer_during(server, read, running)
    while not seen:
        time.sleep(0.01)
    spans.run("$out of 300k", lambda: list(db.docs.aggregate(
        [{"$project": {"v": 1, "g": 1}}, {"$out": "outc"}])))
    running.clear()
    th.join()
    spans.finish()
    assert set(seen) <= {1000, DOCS}, \
        "readers saw the old target or the new one, never a mix (counts %r)" % sorted(set(seen))
    assert db.outc.count_documents({}) == DOCS and db.outc.count_documents({"old": True}) == 0, \
        "the target holds exactly the $out's documents"
    assert sorted(ix["name"] for ix in db.outc.list_indexes()) == ["_id_", "v_1"], \
        "the target keeps its indexes"
    v = db.command("validate", "outc", full=True)
    assert v["valid"] is True and v["keysPerIndex"]["v_1"] == DOCS, v
    assert not [n for n in db.list_collection_names() if n.startswith("tmp.agg_out")], \
        "no temporary collection is left"
    # a duplicate _id in the output: the target stays as it was
    with pytest.raises(OperationFailure) as e:
        list(db.docs.aggregate([{"$project": {"_id": {"$mod": ["$_id", 10]}}},
                                {"$out": "outc"}]))
    assert e.value.code == 11000, e.value
    assert db.outc.count_documents({}) == DOCS, "a failed $out leaves the target whole"
    assert not [n for n in db.list_collection_names() if n.startswith("tmp.agg_out")], \
        "the failed $out dropped its temporary collection"
    db.drop_collection("outc")


def test_merge_of_300k_documents_yields_between_documents(loaded):
    server, c = loaded
    db = c.t
    db.drop_collection("mrg")
    spans = Spans(server, c)
    spans.run("$merge of 300k", lambda: list(db.docs.aggregate(
        [{"$project": {"v": 1}},
         {"$merge": {"into": "mrg", "whenMatched": "merge", "whenNotMatched": "insert"}}])))
    spans.finish()
    assert db.mrg.count_documents({}) == DOCS and db.mrg.count_documents({"v": {"$gte": 0}}) == DOCS
    db.drop_collection("mrg")


def test_a_retryable_insert_many_yields_between_documents(loaded):
    # pymongo sends insert_many as retryable writes (lsid + txnNumber):
    # batches of up to 100,000 documents, each no longer one slice
    server, c = loaded
    db = c.t
    db.drop_collection("rins")
    spans = Spans(server, c)
    spans.run("retryable insertMany of 300k", lambda: db.rins.insert_many(
        [{"_id": i, "p": "x" * 20} for i in range(DOCS)]))
    spans.finish()
    assert db.rins.count_documents({}) == DOCS
    db.drop_collection("rins")


def test_a_retryable_insert_stopped_part_way_is_resumed_exactly_by_its_retry(loaded):
    from bson import SON, Int64
    server, c = loaded
    db = c.t
    n = 100_000
    docs = [{"_id": i, "p": "y" * 20} for i in range(n)]
    stopped = None
    with c.start_session() as s:
        # (the pooled session may have served numbered writes already)
        for txn in range(10**9, 10**9 + 5):  # maxTimeMS stops it part-way
            db.drop_collection("rpart")
            cmd = SON([("insert", "rpart"), ("documents", docs), ("txnNumber", Int64(txn))])
            try:
                db.command(SON(list(cmd.items()) + [("maxTimeMS", 5)]), session=s)
            except OperationFailure as e:
                assert e.code == MAX_TIME_MS_EXPIRED, e
                done = db.rpart.count_documents({})
                if 0 < done < n:
                    stopped = (txn, done)
                    break
        assert stopped, "a 100,000-document insert was stopped part-way by maxTimeMS: 5"
        txn, done = stopped
        print("the first run inserted %d of %d documents before maxTimeMS" % (done, n))
        # the retry (same lsid and txnNumber) runs only the statements not yet run
        r = db.command(SON([("insert", "rpart"), ("documents", docs), ("txnNumber", Int64(txn))]),
                       session=s)
        assert r["n"] == n and "writeErrors" not in r, \
            "the retry answers as one uninterrupted run: n = %d, no duplicate key errors (%r)" \
            % (n, {k: r[k] for k in r if k != "writeErrors"})
        assert db.rpart.count_documents({}) == n
        # a further retry is answered from the stored outcome and writes nothing
        db.rpart.delete_one({"_id": 0})
        r2 = db.command(SON([("insert", "rpart"), ("documents", docs), ("txnNumber", Int64(txn))]),
                        session=s)
        assert r2["n"] == n and db.rpart.count_documents({}) == n - 1, \
            "a retry of the finished write changes nothing"
        s._server_session.mark_dirty()  # its numbers are ahead of pymongo's: not pooled
    db.drop_collection("rpart")


def uuid_bytes(u):
    return u.bytes if hasattr(u, "bytes") else bytes(u)


def test_an_idle_transaction_is_listed_by_current_op_and_killop_aborts_it(loaded):
    from pymongo.errors import PyMongoError
    server, c = loaded
    db = c.t
    db.idletx.replace_one({"_id": 1}, {"_id": 1, "n": 0}, upsert=True)
    with c.start_session() as s:
        s.start_transaction()
        db.idletx.update_one({"_id": 1}, {"$inc": {"n": 1}}, session=s)
        lsid = s.session_id["id"]
        time.sleep(0.05)
        ops = c.admin.command({"currentOp": 1, "lsid.id": lsid})["inprog"]
        assert len(ops) == 1, "currentOp lists the idle transaction by its lsid (%r)" % ops
        op = ops[0]
        assert op["type"] == "idleSession" and op["active"] is False and \
            isinstance(op["opid"], int) and uuid_bytes(op["lsid"]["id"]) == uuid_bytes(lsid), op
        t = op["transaction"]
        assert t["parameters"]["autocommit"] is False and \
            t["parameters"]["txnNumber"] == s._server_session.transaction_id and \
            isinstance(t["parameters"]["readConcern"], dict), t
        assert t["timeOpenMicros"] == t["timeActiveMicros"] + t["timeInactiveMicros"] and \
            t["timeInactiveMicros"] > 0 and "expiryTime" in t, t
        staged = list(c.admin.aggregate([{"$currentOp": {"allUsers": True}},
                                         {"$match": {"lsid.id": lsid}}]))
        assert [o["opid"] for o in staged] == [op["opid"]], \
            "the $currentOp stage lists it too (idleSessions defaults to true)"
        assert not list(c.admin.aggregate([{"$currentOp": {"allUsers": True,
                                                           "idleSessions": False}},
                                           {"$match": {"lsid.id": lsid}}])), \
            "idleSessions: false leaves it out"
        assert c.admin.command("killOp", op=op["opid"])["ok"] == 1.0
        assert not c.admin.command({"currentOp": 1, "lsid.id": lsid})["inprog"], \
            "the killed transaction is no longer listed"
        with pytest.raises(PyMongoError) as e:
            db.idletx.update_one({"_id": 1}, {"$inc": {"n": 1}}, session=s)
        assert getattr(e.value, "code", None) == 251, \
            "its next statement gets NoSuchTransaction (got %r)" % e.value
        with pytest.raises(PyMongoError) as e:
            s.commit_transaction()
        assert getattr(e.value, "code", None) == 251, \
            "its commit gets NoSuchTransaction (got %r)" % e.value
    assert db.idletx.find_one({"_id": 1})["n"] == 0, "the killed transaction wrote nothing"


def test_after_a_kill_9_the_sliced_index_build_and_a_stopped_retryable_insert_recover_exactly(
        atomdb):
    from bson import SON, Int64
    sys.path.insert(0, str(Path(__file__).parent))
    from atomdb_testlib import restart
    server = atomdb
    c = connect(server)
    db = c.t
    for s in range(0, 100_000, 20_000):
        db.rk.insert_many([{"_id": i, "a": i % 500} for i in range(s, s + 20_000)])
    running = threading.Event()
    running.set()

    def write(wdb, k):
        if k % 2:
            wdb.rk.insert_one({"_id": -1 - k, "a": 9000 + k})
        else:
            wdb.rk.update_one({"_id": k * 7 % 100_000}, {"$set": {"a": 8000 + k}})
        return time.monotonic()

    th, done = writer_during(server, write, running)
    while len(done) < 10:
        time.sleep(0.01)
    db.rk.create_index("a", name="a_1")
    with pytest.raises(OperationFailure):
        db.rk.create_index("a", unique=True, name="a_u")  # duplicates: fails, not logged
    running.clear()
    th.join()
    docs = [{"_id": i} for i in range(100_000)]
    stopped = None
    with c.start_session() as s:
        lsid = s.session_id
        s._server_session.mark_dirty()
        for txn in range(10**9, 10**9 + 5):
            db.drop_collection("rr")
            try:
                db.command(SON([("insert", "rr"), ("documents", docs), ("txnNumber", Int64(txn)),
                                ("maxTimeMS", 5)]), session=s)
            except OperationFailure:
                if 0 < db.rr.count_documents({}) < len(docs):
                    stopped = txn
                    break
    assert stopped, "the insert was stopped part-way"
    c.close()
    server2 = restart(server, kill=True)
    server.proc = server2.proc  # the fixture stops whatever now runs
    server.port = server2.port
    c = connect(server2)
    db = c.t
    for _ in range(500):  # what recovery's replayed drops detached is freed too
        if c.admin.command("serverStatus")["atomdbOperations"]["droppedEntriesToFree"] == 0:
            break
        time.sleep(0.01)
    assert c.admin.command("serverStatus")["atomdbOperations"]["droppedEntriesToFree"] == 0, \
        "the reaper runs after a restart"
    v = db.command("validate", "rk", full=True)
    assert v["valid"] is True and v["keysPerIndex"].get("a_1") == db.rk.count_documents({}), \
        "after recovery the index holds exactly one key per document (%r)" % v
    assert sorted(ix["name"] for ix in db.rk.list_indexes()) == ["_id_", "a_1"], \
        "the failed unique build left nothing behind"
    with c.start_session() as s2:  # the same lsid as before the crash
        s2._server_session.session_id = lsid
        s2._server_session.mark_dirty()
        r = db.command(SON([("insert", "rr"), ("documents", docs),
                            ("txnNumber", Int64(stopped))]), session=s2)
    assert r["n"] == len(docs) and "writeErrors" not in r and \
        db.rr.count_documents({}) == len(docs), \
        "after recovery the retry runs only the statements not yet run (%r)" % {k: r[k] for k in r if k != "writeErrors"}
    c.close()


def test_an_insert_many_whose_collection_is_dropped_between_slices_recreates_it(loaded):
    # one batch of 100,000 documents (pymongo's maxWriteBatchSize); the
    # collection is dropped while the batch is still running: the rest of
    # the batch goes into the collection created again, none is lost
    server, c = loaded
    db = c.t
    n_docs = 100_000
    for _ in range(5):
        db.drop_collection("dropmid")
        done = {}

        def run():
            rc = connect(server)
            done["r"] = rc.t.dropmid.insert_many([{"_id": i} for i in range(n_docs)])
            rc.close()

        th = threading.Thread(target=run)
        th.start()
        while db.dropmid.estimated_document_count() < 1000 and th.is_alive():
            time.sleep(0.002)
        db.drop_collection("dropmid")
        mid_batch = th.is_alive()
        th.join()
        if mid_batch:
            break
    assert mid_batch, "the collection was dropped while the batch ran"
    assert len(done["r"].inserted_ids) == n_docs
    n = db.dropmid.count_documents({})
    first = db.dropmid.find_one(sort=[("_id", 1)])
    print("after the drop: %d documents from _id %r" % (n, first and first["_id"]))
    assert 0 < n < n_docs and first["_id"] == n_docs - n and \
        db.dropmid.find_one(sort=[("_id", -1)])["_id"] == n_docs - 1, \
        "the documents inserted after the drop are in the collection created again " \
        "(%d documents from %r)" % (n, first)
    db.drop_collection("dropmid")


def test_killop_and_max_time_ms_stop_an_index_build_and_leave_no_index(loaded):
    server, c = loaded
    db = c.t
    with pytest.raises(OperationFailure) as e:
        db.command("createIndexes", "docs", indexes=[{"key": {"s": 1}, "name": "s_1"}],
                   maxTimeMS=1)
    assert e.value.code == MAX_TIME_MS_EXPIRED, e.value
    assert "s_1" not in [ix["name"] for ix in db.docs.list_indexes()], \
        "an expired build leaves no index"
    result = {}

    def run():
        rc = connect(server)
        try:
            rc.t.command("createIndexes", "docs", indexes=[{"key": {"s": 1}, "name": "s_1"}],
                         comment="ixkill")
            result["r"] = True
        except OperationFailure as err:
            result["e"] = err
        rc.close()

    for _ in range(3):
        result.clear()
        th = threading.Thread(target=run)
        th.start()
        try:
            op = find_op(c.admin, "ixkill", False)
        except AssertionError:
            th.join()
            db.docs.drop_index("s_1")
            continue  # it finished before it was seen
        c.admin.command("killOp", op=op["opid"])
        th.join()
        if "e" in result:
            break
        db.docs.drop_index("s_1")
    assert "e" in result and result["e"].code == INTERRUPTED, \
        "a killed index build fails with Interrupted (got %r)" % result
    assert "s_1" not in [ix["name"] for ix in db.docs.list_indexes()], \
        "a killed build leaves no index"


def test_dropindexes_of_an_index_being_built_aborts_the_build_with_276(loaded):
    server, c = loaded
    db = c.t
    result = {}

    def run():
        rc = connect(server)
        try:
            rc.t.command("createIndexes", "docs", indexes=[{"key": {"s": -1}, "name": "s_-1"}],
                         comment="ixdrop")
            result["r"] = True
        except OperationFailure as err:
            result["e"] = err
        rc.close()

    for _ in range(3):
        result.clear()
        th = threading.Thread(target=run)
        th.start()
        try:
            find_op(c.admin, "ixdrop", False)
        except AssertionError:
            th.join()
            db.docs.drop_index("s_-1")
            continue
        try:
            db.command("dropIndexes", "docs", index="s_-1")
        except OperationFailure:
            pass  # it had finished: dropped as a complete index, try again
        th.join()
        if "e" in result:
            break
    assert "e" in result and result["e"].code == 276, \
        "dropIndexes aborts the build: IndexBuildAborted (got %r)" % result
    assert "s_-1" not in [ix["name"] for ix in db.docs.list_indexes()]


def test_a_temporary_out_collection_left_by_a_crash_is_dropped_at_start_up(atomdb):
    sys.path.insert(0, str(Path(__file__).parent))
    from atomdb_testlib import restart
    c = connect(atomdb)
    c.t["tmp.agg_out.0badf00d-0000-4000-8000-000000000000"].insert_one({"_id": 1})
    c.t.keep.insert_one({"_id": 1})
    c.close()
    server2 = restart(atomdb, kill=True)
    atomdb.proc = server2.proc
    atomdb.port = server2.port
    c = connect(server2)
    assert c.t.list_collection_names() == ["keep"], \
        "start-up dropped the $out leftover and kept the rest (%r)" % c.t.list_collection_names()
    c.close()
