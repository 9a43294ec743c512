"""Sessions, retryable writes and multi-document transactions (issue 5,
docs/concurrency.md) through pymongo 3.11 and raw OP_MSG against a real
atomdb: concurrent bank transfers and "select for update" stock sales in
`with_transaction` from many processes, lock waits against lock timeouts,
deadlock detection, retryable writes applied once (also across a restart),
abandoned transactions, isolation, and the errors and labels drivers act on.

Raw sockets are used wherever the test must choose `lsid` and `txnNumber`
itself: pymongo 3.11 replaces any `lsid` given to `db.command` with its own
implicit session."""

import multiprocessing
import random
import subprocess
import sys
import textwrap
import threading
import time
import traceback
import uuid

import pytest
from bson.binary import Binary
from bson.int64 import Int64
from bson.son import SON
from pymongo import MongoClient, ReturnDocument
from pymongo.errors import OperationFailure

import wireproto as w
import atomdb_clients
from atomdb_testlib import AtomdbServer, restart, stop_all

NO_SUCH_TRANSACTION = 251
TRANSACTION_TOO_OLD = 225
WRITE_CONFLICT = 112
NOT_SUPPORTED_IN_TXN = 263
TTE = "TransientTransactionError"


def connect(server):
    return atomdb_clients.connect(server, connectTimeoutMS=10000)


client = atomdb_clients.per_test_client(connectTimeoutMS=10000)


def set_parameter(client, **params):
    cmd = SON([("setParameter", 1)])
    cmd.update(params)
    reply = client.admin.command(cmd)
    assert reply["ok"] == 1.0, "setParameter %r accepted" % (params,)


def new_lsid():
    return {"id": Binary(uuid.uuid4().bytes, 4)}


def raw(server, doc):
    """Sends one command on a fresh connection and returns the reply document."""
    sock = w.connect(server.host, server.port)
    try:
        return w.command(sock, doc)
    finally:
        sock.close()


def txn_cmd(lsid, txn_number, body, start=False, db="test"):
    """A command inside transaction `txn_number` of session `lsid`."""
    doc = SON(body)
    doc["lsid"] = lsid
    doc["txnNumber"] = Int64(txn_number)
    doc["autocommit"] = False
    if start:
        doc["startTransaction"] = True
    doc["$db"] = db
    return doc


def comparable(reply):
    """A reply without the fields that depend on when it was sent."""
    return {k: v for k, v in reply.items() if k not in ("$clusterTime", "operationTime")}


# --- worker processes ---------------------------------------------------------

# Each worker is a forked process with its own MongoClient (made after the
# fork). It returns a dict of counts. `attempts - transactions` is the number of
# times with_transaction ran the callback again after a TransientTransactionError.

class SoldOut(Exception):
    pass


def bank_worker(uri, seed, n):
    rng = random.Random(seed)
    client = MongoClient(uri, serverSelectionTimeoutMS=10000)
    accounts = client.txntest.accounts
    stats = {"attempts": 0, "transactions": 0, "moved": 0, "refused": 0}
    for _ in range(n):
        src, dst = rng.sample(range(10), 2)
        amount = rng.randint(1, 400)

        def transfer(session):
            stats["attempts"] += 1
            debit = accounts.update_one({"_id": src, "balance": {"$gte": amount}},
                                        {"$inc": {"balance": -amount}}, session=session)
            if debit.modified_count == 0:
                return False
            accounts.update_one({"_id": dst}, {"$inc": {"balance": amount}}, session=session)
            return True

        with client.start_session() as s:
            done = s.with_transaction(transfer)
        stats["transactions"] += 1
        stats["moved" if done else "refused"] += 1
    client.close()
    return stats


def stock_worker(uri, seed, _n):
    client = MongoClient(uri, serverSelectionTimeoutMS=10000)
    db = client.txntest
    stats = {"attempts": 0, "transactions": 0, "bought": 0, "sold_out": 0}

    def buy(session):
        stats["attempts"] += 1
        # SELECT ... FOR UPDATE: the decrement locks the item until commit.
        item = db.stock.find_one_and_update({"_id": "widget"}, {"$inc": {"stock": -1}},
                                            return_document=ReturnDocument.AFTER,
                                            session=session)
        if item["stock"] < 0:
            raise SoldOut()  # with_transaction aborts: the decrement is undone
        # the application's own work while it holds the row (payment check):
        # longer than the default 5 ms lock wait, so the contention does not
        # depend on how fast the server is
        time.sleep(0.01)
        db.orders.insert_one({"buyer": seed, "stock_after": item["stock"]}, session=session)

    while True:
        with client.start_session() as s:
            try:
                s.with_transaction(buy)
            except SoldOut:
                stats["sold_out"] += 1
                break
        stats["transactions"] += 1
        stats["bought"] += 1
    client.close()
    return stats


def _worker_main(fn, uri, seed, n, queue):
    try:
        queue.put((seed, fn(uri, seed, n)))
    except BaseException:
        queue.put((seed, {"error": traceback.format_exc()}))


def run_workers(server, fn, count, n=0):
    """Forks `count` workers running fn(uri, seed, n) at once."""
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    uri = server.uri("directConnection=true")
    procs = [ctx.Process(target=_worker_main, args=(fn, uri, i + 1, n, queue), daemon=True)
             for i in range(count)]
    for p in procs:
        p.start()
    return procs, queue


def running(workers):
    return any(p.is_alive() for p in workers[0])


def collect(workers, timeout=120):
    procs, queue = workers
    results = []
    try:
        for _ in procs:
            seed, stats = queue.get(timeout=timeout)
            assert "error" not in stats, "worker %d failed:\n%s" % (seed, stats["error"])
            results.append(stats)
    finally:
        for p in procs:
            p.join(10)
            if p.is_alive():
                p.kill()
                p.join()
    return results


# --- bank transfers ---------------------------------------------------------

def test_concurrent_transfers_keep_the_total_and_never_overdraw(atomdb, client):
    db = client.txntest
    db.accounts.insert_many([{"_id": i, "balance": 1000} for i in range(10)])
    total = 10 * 1000
    workers = run_workers(atomdb, bank_worker, 8, n=500)
    seen_totals, seen_negative, samples = set(), [], 0
    try:
        while running(workers):
            # A snapshot read inside a transaction, then a plain read: both must
            # see whole transfers only.
            with client.start_session() as s:
                with s.start_transaction():
                    docs = list(db.accounts.find({}, session=s))
            plain = list(db.accounts.find({}))
            for view in (docs, plain):
                seen_totals.add(sum(d["balance"] for d in view))
                seen_negative += [d for d in view if d["balance"] < 0]
            samples += 1
            time.sleep(0.02)
    finally:
        results = collect(workers)
    final = list(db.accounts.find({}))
    assert len(final) == 10, "still ten accounts"
    assert sum(d["balance"] for d in final) == total, \
        "the total is unchanged after 4000 transfers (final balances %r)" % final
    assert seen_totals <= {total}, \
        "every read during the run saw the same total (saw %r in %d samples)" % (seen_totals, samples)
    assert samples > 0, "the run was sampled at least once while workers ran"
    assert not seen_negative and all(d["balance"] >= 0 for d in final), \
        "no guarded balance ever went negative (%r, final %r)" % (seen_negative, final)
    assert sum(r["transactions"] for r in results) == 8 * 500, "every transfer finished"
    moved = sum(r["moved"] for r in results)
    refused = sum(r["refused"] for r in results)
    assert moved > 0 and refused > 0, \
        "some transfers moved money (%d) and the $gte guard refused some (%d)" % (moved, refused)


# --- select for update --------------------------------------------------------

def _sell_out(server, client, stock):
    db = client.txntest
    db.orders.drop()
    db.stock.drop()
    db.stock.insert_one({"_id": "widget", "stock": stock})
    start = time.monotonic()
    results = collect(run_workers(server, stock_worker, 16))
    elapsed = time.monotonic() - start
    final = db.stock.find_one({"_id": "widget"})
    orders = db.orders.count_documents({})
    after = sorted(o["stock_after"] for o in db.orders.find({}))
    retries = sum(r["attempts"] - r["transactions"] - r["sold_out"] for r in results)
    return final, orders, after, results, retries, elapsed


def test_select_for_update_never_oversells_and_a_raised_lock_timeout_waits_instead(atomdb, client):
    stock = 100
    final, orders, after, results, retries_default, t1 = _sell_out(atomdb, client, stock)
    assert final["stock"] == 0, "the stock ends at exactly 0, not below (got %r)" % final
    assert orders == stock, "exactly %d orders for %d items (got %d)" % (stock, stock, orders)
    assert after == list(range(stock)), "each unit was sold exactly once (stock_after values)"
    assert all(r["sold_out"] == 1 for r in results), "every buyer eventually saw the item sold out"

    set_parameter(client, maxTransactionLockRequestTimeoutMillis=1000)
    final, orders, after, results, retries_raised, t2 = _sell_out(atomdb, client, stock)
    assert final["stock"] == 0 and orders == stock and after == list(range(stock)), \
        "with the raised lock timeout: never oversold either (stock %r, %d orders)" % (final, orders)
    print("TransientTransactionError retries: %d with 5 ms (%.1fs), %d with 1000 ms (%.1fs)"
          % (retries_default, t1, retries_raised, t2))
    assert retries_default >= 10, \
        "16 buyers of one item with the 5 ms lock timeout hit WriteConflict retries (got %d)" \
        % retries_default
    assert retries_raised * 5 <= retries_default, \
        "with a 1000 ms lock timeout buyers wait instead of aborting: %d retries vs %d at 5 ms" \
        % (retries_raised, retries_default)


# --- deadlocks --------------------------------------------------------------

@pytest.mark.parametrize("closer", ["younger", "older"])
def test_a_deadlock_is_broken_within_100_ms_by_aborting_the_youngest(atomdb, closer):
    """A then B against B then A. `closer` is the transaction whose request
    closes the cycle; the youngest transaction is the one aborted either way."""
    setup = connect(atomdb)
    set_parameter(setup, maxTransactionLockRequestTimeoutMillis=10000)
    setup.test.d.insert_many([{"_id": "A", "v": 0}, {"_id": "B", "v": 0}])
    c_old, c_young = connect(atomdb), connect(atomdb)
    try:
        s_old, s_young = c_old.start_session(), c_young.start_session()
        s_old.start_transaction()
        c_old.test.d.update_one({"_id": "A"}, {"$inc": {"v": 1}}, session=s_old)
        time.sleep(0.01)
        s_young.start_transaction()
        c_young.test.d.update_one({"_id": "B"}, {"$inc": {"v": 10}}, session=s_young)
        first = (c_old, s_old, "B") if closer == "younger" else (c_young, s_young, "A")
        second = (c_young, s_young, "A") if closer == "younger" else (c_old, s_old, "B")
        outcome = {}

        def write(name, c, s, target):
            try:
                c.test.d.update_one({"_id": target}, {"$inc": {"v": 100}}, session=s)
                outcome[name] = ("ok", time.monotonic())
            except OperationFailure as e:
                outcome[name] = (e, time.monotonic())

        waiter = threading.Thread(target=write, args=("waiter",) + first)
        waiter.start()
        time.sleep(0.2)
        assert "waiter" not in outcome, "the first cross write waits for the lock (no cycle yet)"
        closed_at = time.monotonic()
        write("closer", *second)
        waiter.join(10)
        assert not waiter.is_alive(), "the waiting transaction got an answer"
        victim_name = "closer" if closer == "younger" else "waiter"
        survivor_name = "waiter" if closer == "younger" else "closer"
        victim, victim_t = outcome[victim_name]
        survivor, survivor_t = outcome[survivor_name]
        assert isinstance(victim, OperationFailure), \
            "the youngest transaction (%s) is aborted (got %r)" % (victim_name, victim)
        assert victim.has_error_label(TTE), \
            "the deadlock victim's error has TransientTransactionError (%r)" % victim.details
        assert victim.code in (WRITE_CONFLICT, NO_SUCH_TRANSACTION), \
            "the victim gets WriteConflict or NoSuchTransaction (%r)" % victim.details
        assert victim_t - closed_at < 0.1, \
            "the deadlock is broken within 100 ms (victim answered after %.0f ms)" \
            % ((victim_t - closed_at) * 1000)
        assert survivor == "ok", "the older transaction's write goes through (%r)" % (survivor,)
        assert survivor_t - closed_at < 0.1, \
            "the survivor's write completes within 100 ms (%.0f ms)" % ((survivor_t - closed_at) * 1000)
        s_old.commit_transaction()
        with pytest.raises(OperationFailure) as aborted:
            s_young.commit_transaction()
        assert aborted.value.code == NO_SUCH_TRANSACTION, \
            "the victim's commit gets NoSuchTransaction (%r)" % aborted.value.details
        docs = {d["_id"]: d["v"] for d in setup.test.d.find()}
        assert docs == {"A": 1, "B": 100}, \
            "only the older transaction's writes are applied (got %r)" % docs
    finally:
        for c in (c_old, c_young, setup):
            c.close()


# --- lock waits ---------------------------------------------------------------

def test_a_write_outside_any_transaction_waits_for_the_lock_holder(atomdb, client):
    db = client.test
    db.w.insert_one({"_id": 1, "v": "start"})
    other = connect(atomdb)
    try:
        s = client.start_session()
        s.start_transaction()
        db.w.update_one({"_id": 1}, {"$set": {"v": "txn"}}, session=s)
        done = {}

        def plain():
            other.test.w.update_one({"_id": 1}, {"$set": {"v": "plain"}})
            done["t"] = time.monotonic()

        t = threading.Thread(target=plain)
        t.start()
        time.sleep(0.3)
        assert "t" not in done, "the plain write is still waiting after 300 ms"
        assert client.admin.command("ping")["ok"] == 1.0, \
            "the server answers others while the write is parked"
        committed = time.monotonic()
        s.commit_transaction()
        t.join(10)
        assert "t" in done and done["t"] - committed < 1.0, \
            "the plain write completes once the holder commits"
        assert db.w.find_one({"_id": 1})["v"] == "plain", \
            "the plain write ran after the transaction's write"
    finally:
        other.close()


def test_a_transaction_waits_up_to_the_lock_timeout_then_gets_write_conflict(atomdb, client):
    db = client.test
    db.w.insert_many([{"_id": 1, "v": 0}, {"_id": 2, "v": 0}])
    set_parameter(client, maxTransactionLockRequestTimeoutMillis=300)
    holder, other = client.start_session(), client.start_session()
    holder.start_transaction()
    db.w.update_one({"_id": 1}, {"$inc": {"v": 1}}, session=holder)
    other.start_transaction()
    db.w.update_one({"_id": 2}, {"$inc": {"v": 1}}, session=other)
    start = time.monotonic()
    with pytest.raises(OperationFailure) as conflict:
        db.w.update_one({"_id": 1}, {"$inc": {"v": 1}}, session=other)
    waited = time.monotonic() - start
    assert conflict.value.code == WRITE_CONFLICT, "WriteConflict (%r)" % conflict.value.details
    assert conflict.value.has_error_label(TTE), "WriteConflict carries TransientTransactionError"
    assert 0.25 <= waited < 2.0, "it waited about the 300 ms lock timeout (%.3fs)" % waited
    with pytest.raises(OperationFailure) as gone:
        other.commit_transaction()
    assert gone.value.code == NO_SUCH_TRANSACTION, \
        "the conflicting transaction was aborted: commit gets NoSuchTransaction (%r)" \
        % gone.value.details
    holder.commit_transaction()
    docs = {d["_id"]: d["v"] for d in db.w.find()}
    assert docs == {1: 1, 2: 0}, "only the holder's write is applied (got %r)" % docs


def test_a_first_statement_that_waits_for_a_lock_gets_it_when_the_holder_commits(atomdb, client):
    """The statement carrying startTransaction waits and then runs (it must
    not be treated as a second start of the same transaction)."""
    db = client.test
    db.w.insert_one({"_id": 1, "v": 0})
    set_parameter(client, maxTransactionLockRequestTimeoutMillis=5000)
    holder, waiter = client.start_session(), client.start_session()
    holder.start_transaction()
    db.w.update_one({"_id": 1}, {"$inc": {"v": 1}}, session=holder)
    timer = threading.Timer(0.2, holder.commit_transaction)
    timer.start()
    waiter.start_transaction()
    try:
        r = db.w.update_one({"_id": 1}, {"$inc": {"v": 10}}, session=waiter)
        assert r.modified_count == 1, "the waiting first statement updated the document"
        waiter.commit_transaction()
    finally:
        timer.join()
    assert db.w.find_one({"_id": 1})["v"] == 11, "both transactions' increments are applied"


def test_a_first_statement_that_times_out_on_a_lock_gets_write_conflict(atomdb, client):
    db = client.test
    db.w.insert_one({"_id": 1, "v": 0})
    holder, other = client.start_session(), client.start_session()
    holder.start_transaction()
    db.w.update_one({"_id": 1}, {"$inc": {"v": 1}}, session=holder)
    other.start_transaction()
    with pytest.raises(OperationFailure) as conflict:
        db.w.update_one({"_id": 1}, {"$inc": {"v": 1}}, session=other)
    assert conflict.value.code == WRITE_CONFLICT and conflict.value.has_error_label(TTE), \
        "WriteConflict with TransientTransactionError (%r)" % conflict.value.details
    with pytest.raises(OperationFailure) as gone:
        other.commit_transaction()
    assert gone.value.code == NO_SUCH_TRANSACTION, \
        "commit after the conflict gets NoSuchTransaction (%r)" % gone.value.details
    holder.abort_transaction()


# --- retryable writes ----------------------------------------------------------

RETRYABLE = [
    ("insert", lambda: SON([("insert", "r"), ("documents", [{"_id": 2, "n": 0}])])),
    ("update-inc", lambda: SON([("update", "r"),
                                ("updates", [{"q": {"_id": 1}, "u": {"$inc": {"n": 1}}}])])),
    ("findAndModify", lambda: SON([("findAndModify", "r"), ("query", {"_id": 1}),
                                   ("update", {"$inc": {"n": 1}}), ("new", True)])),
]


def retryable(lsid, txn_number, body):
    doc = SON(body)
    doc["lsid"] = lsid
    doc["txnNumber"] = Int64(txn_number)
    doc["$db"] = "test"
    return doc


def _state(client):
    return sorted(client.test.r.find({}), key=lambda d: d["_id"])


@pytest.mark.parametrize("name,body", RETRYABLE, ids=[r[0] for r in RETRYABLE])
def test_a_retried_write_is_applied_once_and_gets_the_same_reply(atomdb, client, name, body):
    client.test.r.insert_one({"_id": 1, "n": 0})
    lsid = new_lsid()
    first = raw(atomdb, retryable(lsid, 1, body()))
    assert first["ok"] == 1.0, "the write succeeds (%r)" % first
    after_first = _state(client)
    second = raw(atomdb, retryable(lsid, 1, body()))
    assert comparable(second) == comparable(first), \
        "the retry on a new connection gets the original reply (%r vs %r)" % (second, first)
    assert _state(client) == after_first, "the retry applied nothing (%r)" % _state(client)
    expected = {"insert": [{"_id": 1, "n": 0}, {"_id": 2, "n": 0}]}.get(
        name, [{"_id": 1, "n": 1}])
    assert after_first == expected, "the write was applied exactly once (%r)" % after_first
    third = raw(atomdb, retryable(lsid, 2, body()))
    if name != "insert":
        assert third["ok"] == 1.0 and _state(client) == [{"_id": 1, "n": 2}], \
            "a new txnNumber is a new write and is applied (%r, %r)" % (third, _state(client))
    old = raw(atomdb, retryable(lsid, 1, body()))
    assert old.get("code") == TRANSACTION_TOO_OLD, \
        "a txnNumber older than the session's latest gets TransactionTooOld (%r)" % old


def test_a_retried_no_op_write_gets_its_original_reply(atomdb, client):
    """A retryable write that changed nothing (a sold-out sale) is remembered
    in memory, not logged; its retry must still get the first reply, even
    when running it again would now succeed."""
    client.test.r.insert_one({"_id": 1, "stock": 0})
    lsid = new_lsid()
    buy = lambda: SON([("update", "r"), ("updates", [
        {"q": {"_id": 1, "stock": {"$gte": 1}}, "u": {"$inc": {"stock": -1}}}])])
    first = raw(atomdb, retryable(lsid, 1, buy()))
    assert first["ok"] == 1.0 and first["n"] == 0, "sold out: nothing bought (%r)" % first
    client.test.r.update_one({"_id": 1}, {"$set": {"stock": 1}})
    again = raw(atomdb, retryable(lsid, 1, buy()))
    assert comparable(again) == comparable(first), \
        "the retry gets the original no-op reply (%r vs %r)" % (again, first)
    assert client.test.r.find_one({"_id": 1})["stock"] == 1, "the retry bought nothing"
    second = raw(atomdb, retryable(lsid, 2, buy()))
    assert second["ok"] == 1.0 and second["n"] == 1, "a new txnNumber buys (%r)" % second
    assert client.test.r.find_one({"_id": 1})["stock"] == 0
    old = raw(atomdb, retryable(lsid, 1, buy()))
    assert old.get("code") == TRANSACTION_TOO_OLD, "the no-op is now too old (%r)" % old


@pytest.mark.parametrize("kill", [False, True], ids=["clean-stop", "kill-9"])
def test_retried_writes_are_recognised_after_a_restart(kill):
    s1 = AtomdbServer()
    s1.start()
    servers = [s1]
    try:
        c = connect(s1)
        c.test.r.insert_one({"_id": 1, "n": 0})
        c.close()
        lsid = new_lsid()
        replies = [raw(s1, retryable(lsid, i + 1, body())) for i, (_, body) in enumerate(RETRYABLE)]
        assert all(r["ok"] == 1.0 for r in replies), "the writes succeed (%r)" % replies
        s2 = restart(s1, kill)
        servers.append(s2)
        c = connect(s2)
        before = _state(c)
        assert before == [{"_id": 1, "n": 2}, {"_id": 2, "n": 0}], \
            "the writes survived the restart (%r)" % before
        for i, (name, body) in enumerate(RETRYABLE):
            again = raw(s2, retryable(lsid, i + 1, body()))
            if i + 1 == len(RETRYABLE):
                assert comparable(again) == comparable(replies[i]), \
                    "%s retried after the restart gets the original reply (%r vs %r)" % (
                        name, again, replies[i])
            else:
                assert again.get("code") == TRANSACTION_TOO_OLD, \
                    "an older txnNumber is still too old after the restart (%r)" % again
        assert _state(c) == before, "no retry after the restart applied anything (%r)" % _state(c)
        c.close()
    finally:
        stop_all(servers)


@pytest.mark.parametrize("kill", [False, True], ids=["clean-stop", "kill-9"])
def test_each_retryable_write_kind_is_recognised_after_a_restart(kill):
    """One session per write kind, so each one is the latest of its session."""
    s1 = AtomdbServer()
    s1.start()
    servers = [s1]
    try:
        c = connect(s1)
        c.test.r.insert_one({"_id": 1, "n": 0})
        c.close()
        sent = []
        for name, body in RETRYABLE:
            lsid = new_lsid()
            sent.append((name, lsid, body, raw(s1, retryable(lsid, 7, body()))))
        s2 = restart(s1, kill)
        servers.append(s2)
        c = connect(s2)
        before = _state(c)
        for name, lsid, body, reply in sent:
            again = raw(s2, retryable(lsid, 7, body()))
            assert comparable(again) == comparable(reply), \
                "%s retried after the restart gets the original reply (%r vs %r)" % (
                    name, again, reply)
        assert _state(c) == before == [{"_id": 1, "n": 2}, {"_id": 2, "n": 0}], \
            "each write was applied once, before the restart only (%r)" % _state(c)
        c.close()
    finally:
        stop_all(servers)


# --- abandoned transactions -------------------------------------------------------

ABANDONER = textwrap.dedent("""
    import sys, time
    from pymongo import MongoClient
    c = MongoClient(sys.argv[1], serverSelectionTimeoutMS=10000)
    s = c.start_session()
    s.start_transaction()
    c.test.ab.update_one({"_id": 1}, {"$set": {"v": "abandoned"}}, session=s)
    print("locked", flush=True)
    time.sleep(600)
""")


def test_an_abandoned_transaction_holds_its_locks_no_longer_than_the_lifetime_limit(atomdb, client):
    limit = 2
    set_parameter(client, transactionLifetimeLimitSeconds=limit)
    db = client.test
    db.ab.insert_one({"_id": 1, "v": "start"})
    child = subprocess.Popen([sys.executable, "-c", ABANDONER, atomdb.uri("directConnection=true")],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = child.stdout.readline().strip()
        started = time.monotonic()  # the lock was taken just before this
        assert line == "locked", "the abandoning client locked the document (%r, %s)" % (
            line, child.stderr.read() if child.poll() is not None else "")
    finally:
        child.kill()
        child.wait()
        child.stdout.close()
        child.stderr.close()
    r = db.ab.update_one({"_id": 1}, {"$set": {"v": "mine"}})
    waited = time.monotonic() - started
    assert r.modified_count == 1, "the other writer updated the document"
    assert waited < limit + 1.5, \
        "the abandoned transaction's lock was freed within the %ds limit + 1.5 s (took %.2fs)" % (
            limit, waited)
    assert db.ab.find_one({"_id": 1})["v"] == "mine", \
        "the abandoned transaction's write was never applied"


def test_ending_or_killing_a_session_aborts_its_transaction_and_frees_its_locks(atomdb, client):
    db = client.test
    db.k.insert_many([{"_id": i, "v": 0} for i in range(3)])
    for i, how in enumerate(["endSessions", "killSessions", "killAllSessions"]):
        lsid = new_lsid()
        r = raw(atomdb, txn_cmd(lsid, 1, [("update", "k"),
                                          ("updates", [{"q": {"_id": i}, "u": {"$set": {"v": how}}}])],
                                start=True))
        assert r["ok"] == 1.0 and r["nModified"] == 1, "the transaction locked doc %d (%r)" % (i, r)
        arg = [] if how == "killAllSessions" else [lsid]
        assert raw(atomdb, SON([(how, arg), ("$db", "admin")]))["ok"] == 1.0, "%s answers ok" % how
        start = time.monotonic()
        db.k.update_one({"_id": i}, {"$set": {"plain": True}})
        assert time.monotonic() - start < 1.0, "after %s the document is free at once" % how
        doc = db.k.find_one({"_id": i})
        assert doc == {"_id": i, "v": 0, "plain": True}, \
            "%s aborted the transaction: its write is not applied (%r)" % (how, doc)
        commit = raw(atomdb, txn_cmd(lsid, 1, [("commitTransaction", 1)], db="admin"))
        assert commit["ok"] == 0.0, "the ended transaction cannot commit (%r)" % commit
    refreshed = raw(atomdb, SON([("refreshSessions", [new_lsid()]), ("$db", "admin")]))
    assert refreshed["ok"] == 1.0, "refreshSessions answers ok (%r)" % refreshed


# --- isolation ------------------------------------------------------------------

def test_uncommitted_writes_are_invisible_outside_and_commit_applies_them_all(client):
    db1, db2 = client.iso1, client.iso2
    db1.a.insert_one({"_id": 1, "v": 0})
    db2.b.insert_one({"_id": 1, "v": 0})
    s = client.start_session()
    s.start_transaction()
    db1.a.update_one({"_id": 1}, {"$set": {"v": 1}}, session=s)
    db1.a.insert_one({"_id": 2, "v": 1}, session=s)
    db2.b.delete_one({"_id": 1}, session=s)
    db2.b.insert_one({"_id": 3}, session=s)
    assert list(db1.a.find({}, sort=[("_id", 1)])) == [{"_id": 1, "v": 0}], \
        "outside the transaction the update and insert are invisible"
    assert list(db2.b.find({})) == [{"_id": 1, "v": 0}], \
        "outside the transaction the delete and insert in another database are invisible"
    assert db1.a.count_documents({}) == 1, "count outside does not see the uncommitted insert"
    s.commit_transaction()
    assert list(db1.a.find({}, sort=[("_id", 1)])) == [{"_id": 1, "v": 1}, {"_id": 2, "v": 1}], \
        "after commit all writes in the first database are visible"
    assert list(db2.b.find({})) == [{"_id": 3}], \
        "after commit all writes in the second database are visible"


def test_a_transaction_reads_one_snapshot_plus_its_own_writes(client):
    db = client.test
    db.snap.insert_many([{"_id": i, "v": 0} for i in range(1, 4)])
    s = client.start_session()
    s.start_transaction()
    first = list(db.snap.find({}, sort=[("_id", 1)], session=s))
    assert [d["v"] for d in first] == [0, 0, 0], "the first read sees the committed data"
    db.snap.update_one({"_id": 2}, {"$set": {"v": 99}})
    db.snap.insert_one({"_id": 4, "v": 0})
    db.snap.delete_one({"_id": 3})
    again = list(db.snap.find({}, sort=[("_id", 1)], session=s))
    assert again == first, \
        "later reads in the transaction see the same snapshot, not others' commits (%r)" % again
    agg = list(db.snap.aggregate([{"$sort": {"_id": 1}}], session=s))
    assert agg == first, "aggregate in the transaction reads the same snapshot (%r)" % agg
    db.snap.update_one({"_id": 1}, {"$set": {"v": 5}}, session=s)
    db.snap.insert_one({"_id": 10, "v": 10}, session=s)
    own = list(db.snap.find({}, sort=[("_id", 1)], session=s))
    assert own == [{"_id": 1, "v": 5}, {"_id": 2, "v": 0}, {"_id": 3, "v": 0},
                   {"_id": 10, "v": 10}], "the transaction sees its own writes (%r)" % own
    assert db.snap.find_one({"_id": 1}, session=s) == {"_id": 1, "v": 5}, \
        "find_one in the transaction sees its own update"
    s.commit_transaction()
    final = list(db.snap.find({}, sort=[("_id", 1)]))
    assert final == [{"_id": 1, "v": 5}, {"_id": 2, "v": 99}, {"_id": 4, "v": 0},
                     {"_id": 10, "v": 10}], "after commit both histories are combined (%r)" % final


def test_an_aborted_transaction_leaves_nothing_behind(client):
    db = client.test
    db.ab2.insert_one({"_id": 1, "v": 0})
    s = client.start_session()
    s.start_transaction()
    db.ab2.update_one({"_id": 1}, {"$inc": {"v": 1}}, session=s)
    db.ab2.insert_one({"_id": 2}, session=s)
    db.other_coll.insert_one({"_id": 1}, session=s)
    s.abort_transaction()
    assert list(db.ab2.find({})) == [{"_id": 1, "v": 0}], "the aborted writes are discarded"
    assert db.other_coll.count_documents({}) == 0, "the aborted insert elsewhere is discarded"
    db.ab2.update_one({"_id": 1}, {"$inc": {"v": 1}})
    assert db.ab2.find_one({"_id": 1})["v"] == 1, "the aborted transaction's lock was released"


# --- errors and labels --------------------------------------------------------

def test_statements_after_an_abort_get_no_such_transaction(atomdb, client):
    client.test.e.insert_one({"_id": 0})
    lsid = new_lsid()
    r = raw(atomdb, txn_cmd(lsid, 1, [("insert", "e"), ("documents", [{"_id": 1}])], start=True))
    assert r["ok"] == 1.0, "the transaction's insert succeeds (%r)" % r
    r = raw(atomdb, txn_cmd(lsid, 1, [("abortTransaction", 1)], db="admin"))
    assert r["ok"] == 1.0, "abortTransaction answers ok (%r)" % r
    for body, db in ([("insert", "e"), ("documents", [{"_id": 2}])], "test"), \
                    ([("find", "e")], "test"), \
                    ([("commitTransaction", 1)], "admin"):
        r = raw(atomdb, txn_cmd(lsid, 1, body, db=db))
        assert r.get("code") == NO_SUCH_TRANSACTION, \
            "%s after abortTransaction gets NoSuchTransaction (%r)" % (body[0][0], r)
        if body[0][0] != "commitTransaction":
            assert TTE in r.get("errorLabels", []), \
                "%s after the abort is labelled TransientTransactionError (%r)" % (body[0][0], r)
    assert list(client.test.e.find({})) == [{"_id": 0}], "nothing of the aborted transaction was applied"
    r = raw(atomdb, txn_cmd(new_lsid(), 1, [("commitTransaction", 1)], db="admin"))
    assert r.get("code") == NO_SUCH_TRANSACTION, \
        "committing a transaction that never started gets NoSuchTransaction (%r)" % r


def test_an_older_txn_number_gets_transaction_too_old(atomdb):
    lsid = new_lsid()
    r = raw(atomdb, txn_cmd(lsid, 5, [("insert", "old"), ("documents", [{"_id": 1}])], start=True))
    assert r["ok"] == 1.0, "transaction 5 starts (%r)" % r
    r = raw(atomdb, txn_cmd(lsid, 4, [("insert", "old"), ("documents", [{"_id": 2}])], start=True))
    assert r.get("code") == TRANSACTION_TOO_OLD, "starting transaction 4 after 5 is too old (%r)" % r
    r = raw(atomdb, txn_cmd(lsid, 5, [("commitTransaction", 1)], db="admin"))
    assert r["ok"] == 1.0, "transaction 5 still commits (%r)" % r


def test_commit_can_be_retried_and_applies_once(atomdb, client):
    client.test.cr.insert_one({"_id": 1, "n": 0})
    lsid = new_lsid()
    r = raw(atomdb, txn_cmd(lsid, 1, [("update", "cr"),
                                      ("updates", [{"q": {"_id": 1}, "u": {"$inc": {"n": 1}}}])],
                            start=True))
    assert r["ok"] == 1.0, "the update succeeds (%r)" % r
    first = raw(atomdb, txn_cmd(lsid, 1, [("commitTransaction", 1)], db="admin"))
    second = raw(atomdb, txn_cmd(lsid, 1, [("commitTransaction", 1)], db="admin"))
    assert first["ok"] == 1.0 and second["ok"] == 1.0, \
        "commitTransaction and its retry both answer ok (%r, %r)" % (first, second)
    assert client.test.cr.find_one({"_id": 1})["n"] == 1, "the transaction was applied once"
    r = raw(atomdb, txn_cmd(lsid, 1, [("abortTransaction", 1)], db="admin"))
    assert r["ok"] == 0.0, "a committed transaction cannot be aborted (%r)" % r
    # pymongo's own retry of commit_transaction
    s = client.start_session()
    s.start_transaction()
    client.test.cr.update_one({"_id": 1}, {"$inc": {"n": 1}}, session=s)
    s.commit_transaction()
    s.commit_transaction()
    assert client.test.cr.find_one({"_id": 1})["n"] == 2, "pymongo's commit retry applied nothing more"


@pytest.mark.parametrize("command", [
    [("count", "na")],
    [("listCollections", 1)],
    [("drop", "na")],
    [("dropDatabase", 1)],
], ids=lambda c: c[0][0])
def test_operations_not_allowed_in_a_transaction_get_263(client, command):
    db = client.test
    db.na.insert_one({"_id": 1})
    s = client.start_session()
    s.start_transaction()
    db.na.insert_one({"_id": 2}, session=s)
    with pytest.raises(OperationFailure) as e:
        db.command(SON(command), session=s)
    assert e.value.code == NOT_SUPPORTED_IN_TXN, \
        "%s in a transaction is OperationNotSupportedInTransaction (%r)" % (
            command[0][0], e.value.details)
    s.abort_transaction()
    assert db.list_collection_names() and db.na.count_documents({}) == 1, \
        "the refused command changed nothing"
