"""Transaction isolation through pymongo (issue 12, docs/concurrency.md):
snapshot isolation with first-committer-wins exactly as mongod — a
transaction that read a document and writes it after another commit
changed it gets WriteConflict (112) labelled TransientTransactionError and
is aborted, whatever wrote in between (another transaction, a plain write,
a delete, an insert of the same _id) — repeatable reads through indexes,
waits that end in success or a conflict depending on the holder, and
atomdb's serializable level, which also refuses write skew."""

import threading
import time

import pytest
from bson.son import SON
from pymongo.errors import OperationFailure
from pymongo.read_concern import ReadConcern

from atomdb_clients import connect, per_test_client

WRITE_CONFLICT = 112
NO_SUCH_TRANSACTION = 251
DUPLICATE_KEY = 11000
TTE = "TransientTransactionError"


client = per_test_client()


def assert_write_conflict(excinfo, what):
    e = excinfo.value
    assert e.code == WRITE_CONFLICT, "%s: WriteConflict (112), got %s %s" % (what, e.code, e)
    assert TTE in (e.details or {}).get("errorLabels", []), \
        "%s: labelled TransientTransactionError so drivers retry" % what


def assert_aborted(session, what):
    with pytest.raises(OperationFailure) as ei:
        session.commit_transaction()
    assert ei.value.code == NO_SUCH_TRANSACTION, \
        "%s: the conflict aborted the transaction (commit gets 251), got %s" % (what, ei.value)


def test_two_transactions_that_read_then_write_the_same_document_lose_no_update(client):
    col = client.iso.counter
    col.insert_one({"_id": 1, "n": 0})
    s1, s2 = client.start_session(), client.start_session()
    s1.start_transaction()
    s2.start_transaction()
    a = col.find_one({"_id": 1}, session=s1)["n"]
    b = col.find_one({"_id": 1}, session=s2)["n"]
    assert a == b == 0, "both read the same committed value"
    col.update_one({"_id": 1}, {"$set": {"n": a + 1}}, session=s1)
    s1.commit_transaction()
    with pytest.raises(OperationFailure) as ei:
        col.update_one({"_id": 1}, {"$set": {"n": b + 1}}, session=s2)
    assert_write_conflict(ei, "the second writer of a document read by both")
    assert_aborted(s2, "the second writer")
    assert col.find_one({"_id": 1})["n"] == 1, "exactly one increment is applied"


def test_a_plain_write_between_a_transactions_read_and_write_is_a_conflict(client):
    col = client.iso.counter
    col.insert_one({"_id": 1, "n": 0})
    s = client.start_session()
    s.start_transaction()
    n = col.find_one({"_id": 1}, session=s)["n"]
    col.update_one({"_id": 1}, {"$inc": {"n": 1}})  # outside any transaction
    with pytest.raises(OperationFailure) as ei:
        col.update_one({"_id": 1}, {"$set": {"n": n + 1}}, session=s)
    assert_write_conflict(ei, "a transactional write after a plain write to its snapshot's document")
    assert_aborted(s, "the transaction")
    assert col.find_one({"_id": 1})["n"] == 1, "the plain increment stays, the stale one is refused"


def test_a_conflict_also_comes_from_find_and_modify_and_delete(client):
    col = client.iso.c
    col.insert_many([{"_id": 1, "n": 0}, {"_id": 2, "n": 0}])
    for op in ("find_one_and_update", "delete_one"):
        s = client.start_session()
        s.start_transaction()
        col.find_one({"_id": 1}, session=s)  # the snapshot now exists
        col.update_one({"_id": 1}, {"$inc": {"n": 1}})
        with pytest.raises(OperationFailure) as ei:
            if op == "find_one_and_update":
                col.find_one_and_update({"_id": 1}, {"$inc": {"n": 10}}, session=s)
            else:
                col.delete_one({"_id": 1}, session=s)
        assert_write_conflict(ei, op + " of a document changed since the snapshot")
        s.end_session()
    assert col.find_one({"_id": 1})["n"] == 2, "only the two plain increments were applied"


def test_a_document_deleted_since_the_snapshot_cannot_be_written(client):
    col = client.iso.c
    col.insert_one({"_id": 1, "n": 0})
    s = client.start_session()
    s.start_transaction()
    assert col.find_one({"_id": 1}, session=s) is not None, "the snapshot holds the document"
    col.delete_one({"_id": 1})
    assert col.find_one({"_id": 1}, session=s) is not None, "still there in the snapshot"
    with pytest.raises(OperationFailure) as ei:
        col.update_one({"_id": 1}, {"$inc": {"n": 1}}, session=s)
    assert_write_conflict(ei, "an update of a document deleted after the snapshot")
    assert col.count_documents({}) == 0, "the delete stands and nothing was resurrected"


def test_an_insert_of_an_id_that_appeared_after_the_snapshot_is_a_conflict(client):
    col = client.iso.c
    col.insert_one({"_id": 0})
    s = client.start_session()
    s.start_transaction()
    assert col.find_one({"_id": 7}, session=s) is None, "not there at the snapshot"
    col.insert_one({"_id": 7, "by": "plain"})
    with pytest.raises(OperationFailure) as ei:
        col.insert_one({"_id": 7, "by": "txn"}, session=s)
    assert_write_conflict(ei, "an insert of an _id inserted after the snapshot (not DuplicateKey)")
    s.end_session()
    s = client.start_session()
    s.start_transaction()
    col.find_one({"_id": 0}, session=s)
    col.insert_one({"_id": 8, "by": "plain"})
    with pytest.raises(OperationFailure) as ei:
        col.update_one({"_id": 8}, {"$set": {"by": "upsert"}}, upsert=True, session=s)
    assert_write_conflict(ei, "an upsert of an _id inserted after the snapshot")
    s.end_session()
    assert col.find_one({"_id": 7})["by"] == "plain" and col.find_one({"_id": 8})["by"] == "plain", \
        "the first inserts stand"


def test_an_id_present_in_the_snapshot_is_still_a_duplicate_key(client):
    col = client.iso.c
    col.insert_one({"_id": 1})
    with client.start_session() as s:
        s.start_transaction()
        with pytest.raises(OperationFailure) as ei:
            col.insert_one({"_id": 1}, session=s)
        assert ei.value.code == DUPLICATE_KEY, "a duplicate the snapshot shows is 11000"


def test_reads_are_repeatable_through_indexes_whatever_commits_meanwhile(client):
    col = client.iso.grp
    col.create_index("g")
    col.insert_many([{"_id": i, "g": i % 3, "v": i} for i in range(30)])
    s = client.start_session()
    s.start_transaction()
    first = list(col.find({"g": 1}, session=s).sort("_id", 1))
    assert len(first) == 10
    col.update_one({"_id": 1}, {"$set": {"g": 2}})        # leaves the group
    col.update_one({"_id": 2}, {"$set": {"g": 1}})        # joins it
    col.update_one({"_id": 4}, {"$inc": {"v": 100}})      # changes in place
    col.delete_one({"_id": 7})
    col.insert_one({"_id": 100, "g": 1, "v": 100})
    again = list(col.find({"g": 1}, session=s).sort("_id", 1))
    assert again == first, "the same query returns the same answer inside the transaction"
    assert col.count_documents({"g": 1}, session=s) == 10, "count agrees with the snapshot"
    # read your own writes on top of the snapshot
    col.update_one({"_id": 10}, {"$set": {"v": -1}}, session=s)
    mine = col.find_one({"_id": 10}, session=s)
    assert mine["v"] == -1, "a transaction sees its own write"
    s.commit_transaction()
    assert col.find_one({"_id": 10})["v"] == -1 and col.find_one({"_id": 4})["v"] == 104, \
        "both the transaction's write and the plain ones are there after commit"


def _in_thread(fn):
    out = {}

    def run():
        try:
            out["value"] = fn()
        except Exception as e:  # reported to the test
            out["error"] = e

    t = threading.Thread(target=run)
    t.start()
    return t, out


def test_a_waiting_writer_proceeds_when_the_holder_aborts_and_conflicts_when_it_commits(atomdb,
                                                                                         client):
    client.admin.command(SON([("setParameter", 1),
                              ("maxTransactionLockRequestTimeoutMillis", 5000)]))
    col = client.iso.c
    col.insert_one({"_id": 1, "n": 0})
    other = connect(atomdb)
    for holder_commits in (False, True):
        col.update_one({"_id": 1}, {"$set": {"n": 0}})
        holder = client.start_session()
        holder.start_transaction()
        col.update_one({"_id": 1}, {"$inc": {"n": 1}}, session=holder)  # locks the document
        waiter = other.start_session()
        waiter.start_transaction()
        other.iso.c.find_one({"_id": 0}, session=waiter)  # the snapshot predates the holder's commit

        def write():
            other.iso.c.update_one({"_id": 1}, {"$inc": {"n": 10}}, session=waiter)
            waiter.commit_transaction()
        t, out = _in_thread(write)
        time.sleep(0.3)
        assert t.is_alive(), "the waiter waits for the lock instead of failing at once"
        if holder_commits:
            holder.commit_transaction()
        else:
            holder.abort_transaction()
        t.join(10)
        if holder_commits:
            e = out.get("error")
            assert isinstance(e, OperationFailure) and e.code == WRITE_CONFLICT and \
                TTE in e.details.get("errorLabels", []), \
                "the holder committed a change: the waiter gets a write conflict, got %r" % out
            assert col.find_one({"_id": 1})["n"] == 1, "only the holder's increment is applied"
        else:
            assert "error" not in out, "the holder aborted: the waiter proceeds (%r)" % out
            assert col.find_one({"_id": 1})["n"] == 10, "the waiter's increment is applied"
        holder.end_session()
        waiter.end_session()
    other.close()


def test_with_transaction_retries_read_then_write_increments_to_the_exact_total(atomdb):
    clients = [connect(atomdb) for _ in range(6)]
    clients[0].iso.counter.insert_one({"_id": 1, "n": 0})
    per_thread = 25
    attempts = []

    def work(c):
        col = c.iso.counter
        tries = 0
        for _ in range(per_thread):
            def cb(session):
                nonlocal tries
                tries += 1
                n = col.find_one({"_id": 1}, session=session)["n"]
                col.update_one({"_id": 1}, {"$set": {"n": n + 1}}, session=session)
            with c.start_session() as s:
                s.with_transaction(cb)
        attempts.append(tries)

    threads = [threading.Thread(target=work, args=(c,)) for c in clients]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    total = clients[0].iso.counter.find_one({"_id": 1})["n"]
    for c in clients:
        c.close()
    assert total == 6 * per_thread, "every read-then-write increment counted once, got %d" % total
    assert sum(attempts) > 6 * per_thread, "some attempts met a conflict and were retried"


def _write_skew(client, read_concern):
    """Two on-call doctors; each transaction takes one off call if at least
    two are on call. Returns how many commits succeeded."""
    col = client.iso.oncall
    col.delete_many({})
    col.insert_many([{"_id": "alice", "on": True}, {"_id": "bob", "on": True}])
    sessions = [client.start_session(), client.start_session()]
    for s in sessions:
        s.start_transaction(read_concern=read_concern)
    for s, who in zip(sessions, ("alice", "bob")):
        on = col.count_documents({"on": True}, session=s)
        assert on == 2, "each sees both on call"
        col.update_one({"_id": who}, {"$set": {"on": False}}, session=s)
    committed = 0
    for s in sessions:
        try:
            s.commit_transaction()
            committed += 1
        except OperationFailure as e:
            assert e.code == WRITE_CONFLICT and TTE in e.details.get("errorLabels", []), \
                "a serialization failure is a retryable WriteConflict: %s" % e
        s.end_session()
    return committed, col.count_documents({"on": True})


def test_snapshot_isolation_allows_write_skew_as_mongod_does(client):
    committed, on = _write_skew(client, None)
    assert committed == 2 and on == 0, "SI lets both commit: nobody is on call (write skew)"


def test_the_serializable_read_concern_level_refuses_write_skew(client):
    committed, on = _write_skew(client, ReadConcern("serializable"))
    assert committed == 1 and on == 1, "serializable: the second commit is refused, one stays on"


def test_the_serializable_server_level_and_its_parameter(atomdb_factory):
    server = atomdb_factory("--txn-isolation", "serializable")
    c = connect(server)
    p = c.admin.command("getParameter", 1, atomdbTransactionIsolation=1)
    assert p["atomdbTransactionIsolation"] == "serializable", "the flag sets the default level"
    committed, on = _write_skew(c, None)
    assert committed == 1 and on == 1, "transactions that choose no level are serializable"
    committed, on = _write_skew(c, ReadConcern("snapshot"))
    assert committed == 2 and on == 0, "readConcern level snapshot stays snapshot isolation"
    c.admin.command(SON([("setParameter", 1), ("atomdbTransactionIsolation", "snapshot")]))
    committed, on = _write_skew(c, None)
    assert committed == 2, "setParameter changes the default level"
    with pytest.raises(OperationFailure) as ei:
        c.admin.command(SON([("setParameter", 1), ("atomdbTransactionIsolation", "chaos")]))
    assert ei.value.code == 2, "an unknown level is BadValue"
    status = c.admin.command("serverStatus")["transactions"]
    assert status["serializationFailures"] >= 1 and status["totalCommitted"] >= 5, \
        "serverStatus counts commits and serialization failures: %s" % status
    c.close()


def test_a_bad_read_concern_level_in_a_transaction_is_refused(client):
    with client.start_session() as s:
        s.start_transaction(read_concern=ReadConcern("linearizable"))
        with pytest.raises(OperationFailure) as ei:
            client.iso.c.find_one({}, session=s)
        assert ei.value.code == 72, "InvalidOptions for a level transactions cannot use"


def test_versions_kept_for_snapshots_are_freed_as_transactions_end(client):
    col = client.iso.c
    col.insert_one({"_id": 1, "n": 0})
    status = lambda: client.admin.command("serverStatus")["transactions"]
    long_txn = client.start_session()
    long_txn.start_transaction()
    col.find_one({"_id": 1}, session=long_txn)
    for _ in range(200):
        col.update_one({"_id": 1}, {"$inc": {"n": 1}})
    assert status()["snapshotWindowChanges"] >= 200, "an open snapshot keeps the versions it may read"
    assert col.find_one({"_id": 1}, session=long_txn)["n"] == 0, "and reads the old one"
    # overlapping short transactions keep the window short once the long one ends
    long_txn.abort_transaction()
    for i in range(100):
        with client.start_session() as s:
            s.start_transaction()
            col.update_one({"_id": 1}, {"$inc": {"n": 1}}, session=s)
            s.commit_transaction()
    assert status()["snapshotWindowChanges"] == 0, "no open snapshot: nothing kept"
