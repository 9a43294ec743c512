"""Transaction statements and retryable write batches run in slices (issue
13, docs/concurrency.md "Transactions in slices"): a hot counter keeps
completing requests while a transaction reads or updates 200k documents;
the transaction still reads its snapshot and meets write conflicts; what
ends a session or its transaction while a statement is suspended (killOp,
endSessions, killSessions, transactionLifetimeLimitSeconds) ends the
statement with its code and leaves nothing it wrote; a commit or a second
statement of the same session waits for the running one; a retryable
update or delete batch yields between statements and a retry — after a
stop or a kill -9 — runs only what is left and answers as one run.

Every assertion is on correctness or on progress (work done while another
operation was running), never on how long something took."""

import sys
import threading
import time
from pathlib import Path

import pytest
from bson import SON, Int64
from pymongo.errors import OperationFailure, PyMongoError

import wireproto
from atomdb_clients import connect
from hot_counter import LosslessCounter, OpSpans

sys.path.insert(0, str(Path(__file__).parent))

INTERRUPTED = 11601
WRITE_CONFLICT = 112
NO_SUCH_TRANSACTION = 251
LIFETIME_EXCEEDED = 290
MAX_TIME_MS_EXPIRED = 50
DOCS = 200_000
TTE = "TransientTransactionError"

# A statement that runs for seconds: 200k documents unwound 200 times.
ENDLESS = [{"$project": {"r": {"$range": [0, 200]}}}, {"$unwind": "$r"}, {"$count": "n"}]


@pytest.fixture(scope="module")
def loaded(atomdb_module):
    c = connect(atomdb_module)
    for start in range(0, DOCS, 20_000):
        c.t.docs.insert_many([{"_id": i, "g": i % 100, "s": "name%d" % i, "bal": 10}
                              for i in range(start, start + 20_000)])
    yield atomdb_module, c
    c.close()


def raw(server, doc, timeout=120.0):
    """One command on a connection of its own, sent as is (pymongo would
    put its own lsid on it)."""
    sock = wireproto.connect(server.host, server.port, timeout=timeout)
    try:
        return wireproto.command(sock, doc)
    finally:
        sock.close()


def in_thread(fn):
    """Runs fn() in a thread; returns (thread, box): box gets "r" or "e"."""
    box = {}

    def run():
        try:
            box["r"] = fn()
        except Exception as e:  # noqa: BLE001 - handed to the test
            box["e"] = e
        box["t"] = time.monotonic()

    th = threading.Thread(target=run)
    th.start()
    return th, box


def find_op(admin, comment):
    for _ in range(1000):
        ops = admin.command({"currentOp": 1, "command.comment": comment})["inprog"]
        if ops:
            return ops[0]
        time.sleep(0.005)
    raise AssertionError("currentOp never showed the operation with comment %r running "
                         "(a transaction's statement that never yields is never seen)" % comment)


def txn_fields(s):
    return [("lsid", s.session_id), ("txnNumber", Int64(s._server_session.transaction_id)),
            ("autocommit", False)]


def code_of(e):
    return getattr(e, "code", None)


# ---- the loop is not held ----

def test_a_hot_counter_keeps_completing_requests_while_a_transaction_reads_and_updates_200k(
        loaded):
    server, c = loaded
    db = c.t
    counter = LosslessCounter(server, c)
    spans = OpSpans()
    timed = spans.timed

    with c.start_session() as s:
        s.start_transaction()
        found = timed("find (regex scan)", lambda: list(
            db.docs.find({"s": {"$regex": "99999$"}}, session=s)))
        assert [d["_id"] for d in found] == [99999, 199999], "the scan found both names"
        groups = timed("aggregate $group", lambda: list(db.docs.aggregate(
            [{"$group": {"_id": "$g", "n": {"$sum": 1}}}], session=s)))
        assert len(groups) == 100 and sum(g["n"] for g in groups) == DOCS
        res = timed("updateMany", lambda: db.docs.update_many(
            {}, {"$inc": {"u": 1}}, session=s))
        assert res.modified_count == DOCS, "the transaction's updateMany changed every document"
        assert db.docs.count_documents({"u": 1}, session=s) == DOCS, \
            "the transaction reads its own writes"
        assert db.docs.count_documents({"u": 1}) == 0, "nobody else sees them before commit"
        s.abort_transaction()
    counter.finish()
    for name, t0, t1 in spans:
        n, p99 = counter.during(t0, t1)
        print("counter during the transaction's %s: %d ops in %.3f s, p99 gap %.1f ms"
              % (name, n, t1 - t0, p99 * 1000))
        assert n >= 5, ("the counter completed requests while the transaction's %s ran "
                        "(%d inside it)" % (name, n))
    assert db.docs.count_documents({"u": 1}) == 0, "the aborted transaction left nothing"


def test_the_transaction_reads_its_snapshot_across_slices_and_still_meets_write_conflicts(
        loaded):
    server, c = loaded
    db = c.t
    running = threading.Event()
    running.set()
    writes = []

    def writer():
        wc = connect(server)
        k = 0
        while running.is_set():
            wc.t.docs.update_one({"_id": k % DOCS}, {"$inc": {"bal": 1}})
            writes.append(time.monotonic())
            k += 7919
        wc.close()

    with c.start_session() as s:
        s.start_transaction()
        assert db.docs.find_one({"_id": 0}, session=s)["bal"] == 10  # the snapshot is taken
        th = threading.Thread(target=writer)
        th.start()
        while len(writes) < 5:
            time.sleep(0.005)
        t0 = time.monotonic()
        total = list(db.docs.aggregate([{"$group": {"_id": None, "t": {"$sum": "$bal"}}}],
                                       session=s))[0]["t"]
        t1 = time.monotonic()
        during = sum(1 for w in writes if t0 < w < t1)
        running.clear()
        th.join()
        assert during >= 5, "outside writes committed while the transaction's $group ran (%d)" % during
        assert total == 10 * DOCS, \
            "the $group read the transaction's snapshot: %d, not %d" % (total, 10 * DOCS)
        changed = db.docs.find_one({"bal": {"$gt": 10}})
        assert changed, "the writer changed documents"
        assert db.docs.find_one({"_id": changed["_id"]}, session=s)["bal"] == 10, \
            "a document changed by an outside write after the snapshot reads as it was"
        with pytest.raises(OperationFailure) as e:
            db.docs.update_one({"_id": changed["_id"]}, {"$set": {"x": 1}}, session=s)
        assert e.value.code == WRITE_CONFLICT and TTE in e.value.details.get("errorLabels", []), \
            "writing it is a WriteConflict with TransientTransactionError (%r)" % e.value.details
    db.docs.update_many({"bal": {"$ne": 10}}, {"$set": {"bal": 10}})


# ---- what ends a suspended statement ----

def start_suspended(server, c, comment):
    """A transaction that inserted a document, then runs an endless
    aggregate (found in currentOp by `comment`). Returns (session,
    thread, box, op)."""
    db = c.t
    db.marks.delete_many({})
    s = c.start_session()
    s.start_transaction()
    db.marks.insert_one({"_id": comment}, session=s)
    th, box = in_thread(lambda: list(db.docs.aggregate(ENDLESS, session=s, comment=comment)))
    op = find_op(c.admin, comment)
    assert op["numYields"] >= 0 and "lsid" in op["command"], op
    return s, th, box, op


def assert_ended(server, c, s, th, box, code, comment):
    th.join(120)
    assert "e" in box, "the suspended statement did not complete: %r" % box.get("r")
    assert code_of(box["e"]) == code, \
        "the suspended statement ends with %d (got %r)" % (code, box["e"])
    assert c.t.marks.find_one({"_id": comment}) is None, "nothing the transaction wrote is visible"
    reply = raw(server, SON([("commitTransaction", 1), ("$db", "admin")] + txn_fields(s)))
    assert reply["ok"] == 0 and reply["code"] == NO_SUCH_TRANSACTION, \
        "a commit of the ended transaction gets NoSuchTransaction (%r)" % reply
    s._server_session.mark_dirty()
    s.end_session()


def test_killop_of_a_suspended_transaction_statement_ends_it_and_aborts_the_transaction(loaded):
    server, c = loaded
    s, th, box, op = start_suspended(server, c, "tx-killop")
    c.admin.command("killOp", op=op["opid"])
    assert_ended(server, c, s, th, box, INTERRUPTED, "tx-killop")


@pytest.mark.parametrize("how", ["endSessions", "killSessions"])
def test_ending_the_session_of_a_suspended_statement_interrupts_it(loaded, how):
    server, c = loaded
    comment = "tx-" + how
    s, th, box, op = start_suspended(server, c, comment)
    reply = raw(server, SON([(how, [s.session_id]), ("$db", "admin")]))
    assert reply["ok"] == 1, reply
    assert_ended(server, c, s, th, box, INTERRUPTED, comment)


def test_the_lifetime_limit_ends_a_suspended_statement_with_290(loaded):
    server, c = loaded
    c.admin.command("setParameter", 1, transactionLifetimeLimitSeconds=1)
    try:
        s, th, box, op = start_suspended(server, c, "tx-lifetime")
        assert_ended(server, c, s, th, box, LIFETIME_EXCEEDED, "tx-lifetime")
    finally:
        c.admin.command("setParameter", 1, transactionLifetimeLimitSeconds=60)


def test_a_commit_from_another_connection_waits_for_the_running_statement(loaded):
    server, c = loaded
    db = c.t
    db.marks.delete_many({})
    with c.start_session() as s:
        s.start_transaction()
        db.marks.insert_one({"_id": "commit-elsewhere"}, session=s)
        th, box = in_thread(lambda: raw(server, SON(
            [("update", "docs"), ("updates", [{"q": {}, "u": {"$inc": {"w": 1}}, "multi": True}]),
             ("$db", "t"), ("comment", "tx-commit")] + txn_fields(s))))
        find_op(c.admin, "tx-commit")
        cth, cbox = in_thread(lambda: raw(server, SON(
            [("commitTransaction", 1), ("$db", "admin"), ("comment", "the-commit")] +
            txn_fields(s))))
        op = find_op(c.admin, "the-commit")
        assert op["command"]["commitTransaction"] == 1, "the commit is waiting"
        th.join(120)
        cth.join(120)
        assert "r" in box and box["r"]["nModified"] == DOCS, box
        assert cbox["r"]["ok"] == 1, "the commit succeeded once the statement ended: %r" % cbox
        assert cbox["t"] >= box["t"], "the commit completed after the statement"
        s._server_session.mark_dirty()
    assert db.marks.find_one({"_id": "commit-elsewhere"}), "the transaction's insert committed"
    assert db.docs.count_documents({"w": 1}) == DOCS, "and its updateMany, whole"
    db.docs.update_many({}, {"$unset": {"w": 1}})


def test_a_second_statement_of_the_same_transaction_waits_for_the_first(loaded):
    server, c = loaded
    db = c.t
    with c.start_session() as s:
        s.start_transaction()
        db.docs.find_one({"_id": 1}, session=s)
        th, box = in_thread(lambda: raw(server, SON(
            [("update", "docs"), ("updates", [{"q": {}, "u": {"$set": {"z": 1}}, "multi": True}]),
             ("$db", "t"), ("comment", "tx-first")] + txn_fields(s))))
        find_op(c.admin, "tx-first")
        second = raw(server, SON([("aggregate", "docs"),
                                  ("pipeline", [{"$match": {"z": 1}}, {"$count": "n"}]),
                                  ("cursor", {}), ("$db", "t")] + txn_fields(s)))
        th.join(120)
        assert "r" in box and box["r"]["nModified"] == DOCS, box
        assert second["ok"] == 1 and second["cursor"]["firstBatch"] == [{"n": DOCS}], \
            "the second statement ran after the first, seeing all its writes (%r)" % second
        s.abort_transaction()
    assert db.docs.count_documents({"z": 1}) == 0


def test_a_client_that_disconnects_mid_statement_aborts_its_transaction(loaded):
    server, c = loaded
    db = c.t
    db.marks.delete_many({})
    with c.start_session() as s:
        s.start_transaction()
        db.marks.insert_one({"_id": "disconnect"}, session=s)
        sock = wireproto.connect(server.host, server.port)
        wireproto.send(sock, wireproto.op_msg(SON(
            [("aggregate", "docs"), ("pipeline", ENDLESS), ("cursor", {}), ("$db", "t"),
             ("comment", "tx-disconnect")] + txn_fields(s))))
        find_op(c.admin, "tx-disconnect")
        sock.close()
        for _ in range(1000):
            if not c.admin.command({"currentOp": 1, "command.comment": "tx-disconnect"})["inprog"]:
                break
            time.sleep(0.01)
        with pytest.raises(PyMongoError) as e:
            db.marks.insert_one({"_id": "after"}, session=s)
        assert code_of(e.value) == NO_SUCH_TRANSACTION, \
            "the interrupted statement aborted the transaction (%r)" % e.value
        s._server_session.mark_dirty()
    assert db.marks.count_documents({}) == 0, "nothing the transaction wrote is visible"


# ---- retryable update and delete batches ----

def retry_cmd(kind, coll, stmts, txn, extra=()):
    key = {"update": "updates", "delete": "deletes"}[kind]
    return SON([(kind, coll), (key, stmts), ("txnNumber", Int64(txn))] + list(extra))


def update_stmts(n):
    """n statements: $inc one document each; every 10th an upsert of a
    new document."""
    return [{"q": {"_id": i}, "u": {"$inc": {"n": 1}}} if i % 10 else
            {"q": {"_id": "new%d" % i}, "u": {"$inc": {"n": 1}}, "upsert": True}
            for i in range(n)]


def check_update_reply(r, n):
    ups = n // 10
    assert r["n"] == n and r["nModified"] == n - ups and "writeErrors" not in r, \
        "the retry answers as one uninterrupted run (%r)" % {k: r[k] for k in r if k != "upserted"}
    assert [u["index"] for u in r["upserted"]] == list(range(0, n, 10)) and \
        [u["_id"] for u in r["upserted"]] == ["new%d" % i for i in range(0, n, 10)], \
        "every upsert is reported once, at its statement's index"


def test_a_retryable_update_batch_stopped_part_way_is_finished_exactly_by_its_retry(loaded):
    server, c = loaded
    db = c.t
    n = 50_000
    stmts = update_stmts(n)
    stopped = None
    with c.start_session() as s:
        s._server_session.mark_dirty()
        for txn in range(10**9, 10**9 + 8):
            db.drop_collection("ru")
            db.ru.insert_many([{"_id": i} for i in range(n)])
            try:
                db.command(retry_cmd("update", "ru", stmts, txn, [("maxTimeMS", 5)]), session=s)
            except OperationFailure as e:
                assert e.code == MAX_TIME_MS_EXPIRED, e
                done = db.ru.count_documents({"n": 1})
                if 0 < done < n:
                    stopped = txn
                    break
        assert stopped, "a retryable update batch of 50,000 statements was stopped part-way"
        r = db.command(retry_cmd("update", "ru", stmts, stopped), session=s)
        check_update_reply(r, n)
        assert db.ru.count_documents({"n": 1}) == n and db.ru.count_documents({}) == n + n // 10, \
            "each statement was applied exactly once"
        r2 = db.command(retry_cmd("update", "ru", stmts, stopped), session=s)
        check_update_reply(r2, n)
        assert db.ru.count_documents({"n": 2}) == 0, "a retry of the finished batch changes nothing"
    db.drop_collection("ru")


def test_a_retryable_delete_batch_stopped_part_way_is_finished_exactly_by_its_retry(loaded):
    server, c = loaded
    db = c.t
    n = 50_000
    stmts = [{"q": {"_id": i}, "limit": 1} for i in range(n)]
    stopped = None
    with c.start_session() as s:
        s._server_session.mark_dirty()
        for txn in range(10**9, 10**9 + 8):
            db.drop_collection("rd")
            db.rd.insert_many([{"_id": i} for i in range(n)])
            try:
                db.command(retry_cmd("delete", "rd", stmts, txn, [("maxTimeMS", 5)]), session=s)
            except OperationFailure as e:
                assert e.code == MAX_TIME_MS_EXPIRED, e
                left = db.rd.count_documents({})
                if 0 < left < n:
                    stopped = txn
                    break
        assert stopped, "a retryable delete batch of 50,000 statements was stopped part-way"
        db.rd.insert_one({"_id": 0})  # deleted by the first run: its retry must not delete it again
        r = db.command(retry_cmd("delete", "rd", stmts, stopped), session=s)
        assert r["n"] == n and "writeErrors" not in r, r
        assert [d["_id"] for d in db.rd.find()] == [0], \
            "the retry ran only the statements not yet run"
    db.drop_collection("rd")


def test_a_retryable_update_batch_yields_between_statements(loaded):
    server, c = loaded
    db = c.t
    n = 100_000
    db.drop_collection("ry")
    db.ry.insert_many([{"_id": i} for i in range(n)])
    stmts = [{"q": {"_id": i}, "u": {"$set": {"a": 1}}} for i in range(n)]
    counter = LosslessCounter(server, c)
    seen = []  # (time, documents the batch had updated), read by another client
    running = threading.Event()
    running.set()

    def poll():
        pc = connect(server)
        while running.is_set():
            k = pc.t.ry.count_documents({"a": 1})
            seen.append((time.monotonic(), k))
        pc.close()

    th = threading.Thread(target=poll)
    th.start()
    with c.start_session() as s:
        s._server_session.mark_dirty()
        r = db.command(retry_cmd("update", "ry", stmts, 10**9), session=s)
    running.clear()
    th.join()
    counter.finish()
    assert r["n"] == n and r["nModified"] == n, r
    partial = [(t, k) for t, k in seen if 0 < k < n]
    assert len({k for _, k in partial}) >= 2, \
        "another client read the batch's progress part-way several times (%r)" % partial[:5]
    t0, t1 = partial[0][0], partial[-1][0]
    inside, p99 = counter.during(t0, t1)
    print("counter while a retryable update of %d statements ran: %d ops in %.3f s, "
          "p99 gap %.1f ms" % (n, inside, t1 - t0, p99 * 1000))
    assert inside >= 5, "the counter completed requests while the batch ran (%d)" % inside
    db.drop_collection("ry")


def test_a_retryable_update_batch_killed_by_kill_9_mid_way_is_finished_by_its_retry(atomdb):
    from atomdb_testlib import restart
    server = atomdb
    c = connect(server)
    db = c.t
    n = 100_000
    db.ru.insert_many([{"_id": i} for i in range(n)])
    stmts = update_stmts(n)
    lsid = {"id": c.start_session().session_id["id"]}
    cmd = retry_cmd("update", "ru", stmts, 7, [("lsid", lsid), ("$db", "t")])
    sock = wireproto.connect(server.host, server.port)
    wireproto.send(sock, wireproto.op_msg(cmd))
    partial = 0
    for _ in range(20000):
        partial = db.ru.count_documents({"n": 1}, hint="_id_")
        if partial:
            break
    assert 0 < partial < n, \
        "the batch was seen part-way (%d of %d statements applied)" % (partial, n)
    c.close()
    sock.close()
    server2 = restart(server, kill=True)
    server.proc = server2.proc  # the fixture stops whatever now runs
    server.port = server2.port
    c = connect(server2)
    db = c.t
    recovered = db.ru.count_documents({"n": 1})
    print("after kill -9: %d of %d statements had been applied" % (recovered, n))
    r = raw(server2, cmd)
    assert r["ok"] == 1, r
    check_update_reply(r, n)
    assert db.ru.count_documents({"n": 1}) == n and db.ru.count_documents({"n": {"$gt": 1}}) == 0, \
        "each statement was applied exactly once across the crash"
    assert db.ru.count_documents({}) == n + n // 10
    c.close()


def test_statement_ids_are_checked_as_mongod_and_only_index_numbering_is_taken(loaded):
    server, c = loaded
    db = c.t
    db.drop_collection("sid")
    lsid = {"id": c.start_session().session_id["id"]}
    two = [{"q": {"_id": 1}, "u": {"$inc": {"n": 1}}, "upsert": True},
           {"q": {"_id": 2}, "u": {"$inc": {"n": 1}}, "upsert": True}]

    def upd(txn, extra):
        return raw(server, SON([("update", "sid"), ("updates", two), ("lsid", lsid),
                                ("txnNumber", Int64(txn)), ("$db", "t")] + extra))

    r = upd(1, [("stmtIds", [0])])
    assert r["ok"] == 0 and r["code"] == 16 and "Number of statement ids" in r["errmsg"], r
    r = upd(2, [("stmtIds", [0, 1]), ("stmtId", 0)])
    assert r["ok"] == 0 and r["code"] == 72, r
    r = upd(3, [("stmtIds", [7, 9])])
    assert r["ok"] == 0 and r["code"] == 238 and "stmtIds" in r["errmsg"], \
        "a numbering other than the statements' indexes is refused, not ignored (%r)" % r
    assert db.sid.count_documents({}) == 0, "nothing was written by the refused commands"
    r = upd(4, [("stmtIds", [0, 1])])
    assert r["ok"] == 1 and r["n"] == 2, r
    assert upd(4, [("stmtIds", [0, 1])])["n"] == 2 and \
        db.sid.count_documents({"n": 1}) == 2, "its retry is answered, nothing applied twice"
    db.drop_collection("sid")


def test_waiting_for_a_session_in_use_is_bounded_by_max_time_ms(loaded):
    server, c = loaded
    s, th, box, op = start_suspended(server, c, "tx-busy")
    r = raw(server, SON([("find", "docs"), ("filter", {"_id": 1}), ("maxTimeMS", 200),
                         ("$db", "t")] + txn_fields(s)))
    assert r["ok"] == 0 and r["code"] == MAX_TIME_MS_EXPIRED, \
        "a statement waiting for its session in use gives up at its maxTimeMS (%r)" % r
    c.admin.command("killOp", op=op["opid"])
    assert_ended(server, c, s, th, box, INTERRUPTED, "tx-busy")
