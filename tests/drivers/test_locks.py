"""Lease locks with fencing tokens (issue 6, docs/locks.md) through pymongo
3.11 against a real atomdb: acquireLock / renewLock / releaseLock /
lockInfo / listLocks, fenced writes, mutual exclusion across processes,
a paused holder, FIFO hand-over, session end and disconnect release, and
tokens that keep increasing across a restart."""

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest
from bson.int64 import Int64
from pymongo.errors import OperationFailure

import atomdb_clients
from atomdb_testlib import AtomdbServer, restart, stop_all, wait_for, without_cluster_time

STALE = 900000001  # StaleFencingToken


def connect(server):
    return atomdb_clients.connect(server, connectTimeoutMS=10000)


client = atomdb_clients.per_test_client(connectTimeoutMS=10000)


def acquire(db, name, owner, lease_ms=30000, wait_ms=0, **extra):
    cmd = {"acquireLock": name, "owner": owner, "leaseMs": lease_ms, "waitMs": wait_ms}
    cmd.update(extra)
    return db.command(cmd)


def info(db, name):
    return db.command({"lockInfo": name})


# --- commands, replies and errors -----------------------------------------

def test_acquire_answers_token_and_expiry_and_a_second_owner_is_refused(client):
    db = client.test
    r = acquire(db, "shape", "p1", lease_ms=5000)
    assert r["ok"] == 1.0 and r["acquired"] is True, "a free lock is acquired at once"
    assert isinstance(r["token"], Int64) and r["token"] >= 1, "the token is a positive int64"
    assert "expiresAt" in r and r["expiresAt"].year >= 2024, "expiresAt is a date"
    busy = acquire(db, "shape", "p2", wait_ms=0)
    assert without_cluster_time(busy) == {"acquired": False, "ok": 1.0}, "waitMs 0 answers acquired: false at once"
    again = acquire(db, "shape", "p1", lease_ms=5000)
    assert again["acquired"] and again["token"] == r["token"], \
        "the holder's own retry gets the same token"
    i = info(db, "shape")
    assert i["held"] is True and i["owner"] == "p1" and i["token"] == r["token"], \
        "lockInfo shows the holder and its token"
    assert i["waiting"] == 0, "lockInfo counts waiters"
    listed = db.command({"listLocks": 1})["locks"]
    assert [l["lock"] for l in listed] == ["shape"], "listLocks lists the held lock"


def test_stale_release_and_renew_are_errors_and_change_nothing(client):
    db = client.test
    t1 = acquire(db, "stale", "a", lease_ms=200)["token"]
    time.sleep(0.3)
    t2 = acquire(db, "stale", "b", lease_ms=30000)["token"]
    assert t2 > t1, "a new holder after expiry gets a larger token"
    for cmd in ({"releaseLock": "stale", "token": t1},
                {"renewLock": "stale", "token": t1, "leaseMs": 60000}):
        with pytest.raises(OperationFailure) as e:
            db.command(cmd)
        assert e.value.code == STALE, "%s with a stale token fails" % list(cmd)[0]
        assert e.value.details["codeName"] == "StaleFencingToken", "codeName StaleFencingToken"
    i = info(db, "stale")
    assert i["held"] and i["owner"] == "b" and i["token"] == t2, \
        "the stale release/renew left the new holder in place"
    r = db.command({"renewLock": "stale", "token": t2, "leaseMs": 60000})
    assert r["token"] == t2 and r["expiresAt"] > i["expiresAt"], "the holder renews"
    assert db.command({"releaseLock": "stale", "token": t2})["released"] is True, "holder releases"
    assert info(db, "stale")["held"] is False, "a released lock is free"
    with pytest.raises(OperationFailure) as e:
        db.command({"releaseLock": "stale", "token": t2})
    assert e.value.code == STALE, "releasing twice is an error"


@pytest.mark.parametrize("cmd,code", [
    ({"acquireLock": 1, "owner": "o", "leaseMs": 10}, 14),
    ({"acquireLock": "x", "leaseMs": 10}, 9),
    ({"acquireLock": "x", "owner": 5, "leaseMs": 10}, 14),
    ({"acquireLock": "x", "owner": "o"}, 9),
    ({"acquireLock": "x", "owner": "o", "leaseMs": 0}, 2),
    ({"acquireLock": "x", "owner": "o", "leaseMs": "10"}, 14),
    ({"acquireLock": "x", "owner": "o", "leaseMs": 10, "waitMs": -1}, 2),
    ({"acquireLock": "", "owner": "o", "leaseMs": 10}, 2),
    ({"renewLock": "x", "leaseMs": 10}, 9),
    ({"releaseLock": "x", "token": "1"}, 14),
    ({"lockInfo": {}}, 14),
    ({"insert": "c", "documents": [{}], "fence": 1}, 14),
    ({"insert": "c", "documents": [{}], "fence": {"token": 1}}, 9),
    ({"insert": "c", "documents": [{}], "fence": {"lock": "x"}}, 9),
    ({"insert": "c", "documents": [{}], "fence": {"lock": "x", "token": 1.5}}, 2),
])
def test_bad_arguments_get_mongod_style_errors(client, cmd, code):
    with pytest.raises(OperationFailure) as e:
        client.test.command(cmd)
    assert e.value.code == code, "%r fails with code %d" % (cmd, code)
    assert client.test.command("ping")["ok"] == 1.0, "the server is still up"


def test_fenced_writes_are_refused_with_nothing_written(client):
    db = client.test
    t = acquire(db, "f", "me")["token"]
    fence = {"lock": "f", "token": t}
    db.command({"insert": "fw", "documents": [{"_id": 1, "v": 0}], "fence": fence})
    db.command({"update": "fw", "updates": [{"q": {"_id": 1}, "u": {"$inc": {"v": 1}}}],
                "fence": fence})
    db.command({"findAndModify": "fw", "query": {"_id": 1}, "update": {"$inc": {"v": 1}},
                "fence": fence})
    assert db.fw.find_one({"_id": 1})["v"] == 2, "writes under the current token apply"
    stale = {"lock": "f", "token": t - 1}
    never = {"lock": "f", "token": t + 5}
    unknown = {"lock": "no-such-lock", "token": 1}
    for f in (stale, never, unknown):
        for cmd in ({"insert": "fw", "documents": [{"_id": 2}]},
                    {"update": "fw", "updates": [{"q": {"_id": 1}, "u": {"$set": {"v": 99}}}]},
                    {"delete": "fw", "deletes": [{"q": {}, "limit": 0}]},
                    {"findAndModify": "fw", "query": {"_id": 1}, "remove": True}):
            cmd["fence"] = f
            with pytest.raises(OperationFailure) as e:
                db.command(cmd)
            assert e.value.code == STALE, "%s with fence %r is refused" % (list(cmd)[0], f)
    assert list(db.fw.find()) == [{"_id": 1, "v": 2}], "the refused writes changed nothing"
    db.command({"releaseLock": "f", "token": t})
    with pytest.raises(OperationFailure) as e:
        db.command({"insert": "fw", "documents": [{"_id": 3}], "fence": fence})
    assert e.value.code == STALE, "after release the token no longer fences"
    assert db.fw.count_documents({}) == 1, "nothing was written"


# --- waiting: FIFO, expiry, timeouts --------------------------------------

def test_waiters_acquire_in_arrival_order_one_per_release(atomdb, client):
    db = client.test
    holder = acquire(db, "fifo", "holder")["token"]
    n = 5
    got = []          # (index, token) in acquisition order
    got_lock = threading.Lock()
    release_evt = [threading.Event() for _ in range(n)]
    clients = [connect(atomdb) for _ in range(n)]

    def waiter(i):
        r = acquire(clients[i].test, "fifo", "w%d" % i, wait_ms=60000)
        with got_lock:
            got.append((i, r["acquired"], r["token"]))
        release_evt[i].wait(30)
        clients[i].test.command({"releaseLock": "fifo", "token": r["token"]})

    threads = []
    for i in range(n):
        t = threading.Thread(target=waiter, args=(i,))
        t.start()
        threads.append(t)
        wait_for(lambda: info(db, "fifo")["waiting"] == i + 1, what="waiter %d queued" % i)
    assert got == [], "no waiter acquires while the holder holds"
    db.command({"releaseLock": "fifo", "token": holder})
    for k in range(n):
        wait_for(lambda: len(got) == k + 1, what="wake-up %d" % k)
        time.sleep(0.3)
        assert len(got) == k + 1, "one release woke exactly one waiter (release %d)" % k
        assert got[k][0] == k and got[k][1] is True, "waiter %d acquired in arrival order" % k
        assert info(db, "fifo")["waiting"] == n - k - 1, "the others still wait"
        release_evt[k].set()
    for t in threads:
        t.join(30)
    tokens = [g[2] for g in got]
    assert tokens == sorted(tokens) and len(set(tokens)) == n and tokens[0] > holder, \
        "each hand-over issued a larger token"
    for c in clients:
        c.close()


def test_expired_lease_wakes_the_next_waiter(client):
    db = client.test
    t1 = acquire(db, "exp", "slow", lease_ms=300)["token"]
    start = time.monotonic()
    r = acquire(db, "exp", "next", wait_ms=10000)
    waited = time.monotonic() - start
    assert r["acquired"] and r["token"] == t1 + 1, "the waiter got the lock with the next token"
    assert 0.15 < waited < 5, "it was woken by the expiry, not by its own deadline (%.3fs)" % waited


def test_waiter_gets_acquired_false_when_its_wait_passes(client):
    db = client.test
    acquire(db, "to", "holder")
    start = time.monotonic()
    r = acquire(db, "to", "waiter", wait_ms=300)
    waited = time.monotonic() - start
    assert without_cluster_time(r) == {"acquired": False, "ok": 1.0}, "a wait that runs out answers acquired: false"
    assert 0.25 < waited < 5, "after about waitMs (%.3fs)" % waited
    assert info(db, "to")["waiting"] == 0, "the timed-out waiter left the queue"


# --- many processes --------------------------------------------------------

WORKER = textwrap.dedent("""
    import sys, time
    from pymongo import MongoClient
    uri, owner, n, use_lock = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4] == "1"
    db = MongoClient(uri, serverSelectionTimeoutMS=10000).test
    for _ in range(n):
        token = None
        if use_lock:
            r = db.command({"acquireLock": "counter", "owner": owner, "leaseMs": 30000,
                            "waitMs": 600000, "releaseOnDisconnect": True})
            assert r["acquired"], r
            token = r["token"]
        v = db.counter.find_one({"_id": 1})["v"]      # read ...
        time.sleep(0.0005)                              # ... think ...
        cmd = {"update": "counter", "updates": [{"q": {"_id": 1}, "u": {"$set": {"v": v + 1}}}]}
        if use_lock:
            cmd["fence"] = {"lock": "counter", "token": token}
        db.command(cmd)                                 # ... write back (not atomic)
        if use_lock:
            db.command({"releaseLock": "counter", "token": token})
    print("done")
""")


def run_counter(server, use_lock, procs=16, each=200):
    c = connect(server)
    c.test.counter.insert_one({"_id": 1, "v": 0})
    workers = [subprocess.Popen([sys.executable, "-c", WORKER,
                                 server.uri("directConnection=true"), "p%d" % i, str(each),
                                 "1" if use_lock else "0"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
               for i in range(procs)]
    try:
        for w in workers:
            out, err = w.communicate(timeout=800)
            assert w.returncode == 0 and b"done" in out, "worker failed: %s" % err.decode()[-2000:]
    finally:
        for w in workers:
            if w.poll() is None:
                w.kill()
                w.wait()
    v = c.test.counter.find_one({"_id": 1})["v"]
    c.close()
    return v


# 3200 lock hand-overs take ~30 s on an idle machine with a sanitizer build;
# a loaded CI machine needs far more than pytest.ini's 180 s. The server logs
# at info level: debug lines for 13000 commands only slow the test down.
@pytest.mark.timeout(900)
def test_lock_gives_mutual_exclusion_across_16_processes(atomdb_factory):
    server = atomdb_factory("--log-level", "info")
    assert run_counter(server, use_lock=True) == 16 * 200, \
        "16 processes x 200 locked read-modify-writes lose no update"


@pytest.mark.timeout(900)
def test_without_the_lock_the_same_workload_loses_updates(atomdb_factory):
    server = atomdb_factory("--log-level", "info")
    v = run_counter(server, use_lock=False)
    assert v < 16 * 200, "unlocked read-modify-writes lose updates (got %d), so the test can fail" % v


# --- a paused holder -------------------------------------------------------

PAUSED = textwrap.dedent("""
    import sys, time
    from pymongo import MongoClient
    from pymongo.errors import OperationFailure
    db = MongoClient(sys.argv[1], serverSelectionTimeoutMS=10000).test
    r = db.command({"acquireLock": "job", "owner": "paused", "leaseMs": 2000})
    print("token", r["token"], flush=True)
    time.sleep(1.0)          # the work, well within the lease; SIGSTOP lands here
                             # (a GC pause) and outlasts the lease
    try:
        db.command({"insert": "out", "documents": [{"by": "paused"}],
                    "fence": {"lock": "job", "token": r["token"]}})
        print("written", flush=True)
    except OperationFailure as e:
        print("refused", e.code, e.details.get("codeName"), flush=True)
""")


def test_a_holder_paused_past_its_lease_is_fenced_off(atomdb, client):
    db = client.test
    p = subprocess.Popen([sys.executable, "-c", PAUSED, atomdb.uri("directConnection=true")],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        line = p.stdout.readline().decode()
        assert line.startswith("token "), "the holder acquired: %r" % line
        os.kill(p.pid, signal.SIGSTOP)
        old = int(line.split()[1])
        r = acquire(db, "job", "new", wait_ms=10000)
        assert r["acquired"] and r["token"] > old, "the lease ran out and a new holder took over"
        db.command({"insert": "out", "documents": [{"by": "new"}],
                    "fence": {"lock": "job", "token": r["token"]}})
        os.kill(p.pid, signal.SIGCONT)
        out, err = p.communicate(timeout=30)
    finally:
        if p.poll() is None:
            os.kill(p.pid, signal.SIGCONT)
            p.kill()
    assert "refused %d StaleFencingToken" % STALE in out.decode(), \
        "the resumed holder's fenced write was refused: %r %r" % (out, err[-1000:])
    assert [d["by"] for d in db.out.find()] == ["new"], "only the new holder's write is stored"


# --- session end and disconnect --------------------------------------------

def uuid_bytes(v):
    """The 16 bytes of a UUID or a Binary."""
    return v.bytes if hasattr(v, "bytes") else bytes(v)


def test_ending_the_session_releases_its_locks(atomdb, client):
    db = client.test
    a = connect(atomdb)
    with a.start_session() as s:
        r = a.test.command({"acquireLock": "sess", "owner": "a", "leaseMs": 60000}, session=s)
        assert r["acquired"], "acquired under an explicit session"
        assert uuid_bytes(info(db, "sess")["lsid"]["id"]) == uuid_bytes(s.session_id["id"]), \
            "lockInfo shows the session"
        db.command({"endSessions": [s.session_id]})
    assert info(db, "sess")["held"] is False, "endSessions released the session's lock"
    # an implicit session: MongoClient.close() ends the client's sessions
    r = a.test.command({"acquireLock": "sess2", "owner": "a", "leaseMs": 60000})
    assert r["acquired"] and info(db, "sess2")["held"], "acquired under an implicit session"
    a.close()
    wait_for(lambda: info(db, "sess2")["held"] is False, what="release at client close")


HOLD = textwrap.dedent("""
    import sys, time
    from pymongo import MongoClient
    db = MongoClient(sys.argv[1], serverSelectionTimeoutMS=10000).test
    name, rod, wait = sys.argv[2], sys.argv[3] == "1", int(sys.argv[4])
    owner = "child-%s-%s" % (name, wait)
    r = db.command({"acquireLock": name, "owner": owner, "leaseMs": 60000, "waitMs": wait,
                    "releaseOnDisconnect": rod})
    print("acquired" if r["acquired"] else "not", flush=True)
    time.sleep(600)
""")


def test_a_dead_process_releases_only_releaseOnDisconnect_locks(atomdb, client):
    db = client.test
    uri = atomdb.uri("directConnection=true")
    kids = []
    try:
        for name, rod in (("rod", "1"), ("keep", "0")):
            p = subprocess.Popen([sys.executable, "-c", HOLD, uri, name, rod, "0"],
                                 stdout=subprocess.PIPE)
            kids.append(p)
            assert p.stdout.readline().strip() == b"acquired", "child acquired %s" % name
        assert info(db, "rod")["releaseOnDisconnect"] is True, "lockInfo shows the flag"
        for p in kids:
            p.kill()   # SIGKILL: connections close, no endSessions
            p.wait()
        wait_for(lambda: info(db, "rod")["held"] is False, what="disconnect release")
        assert info(db, "keep")["held"] is True, \
            "a lock without releaseOnDisconnect outlives its holder's connection (until its lease)"
        # a parked waiter that disconnects leaves the queue
        p = subprocess.Popen([sys.executable, "-c", HOLD, uri, "keep", "0", "60000"],
                             stdout=subprocess.PIPE)
        kids.append(p)
        wait_for(lambda: info(db, "keep")["waiting"] == 1, what="child queued")
        p.kill()
        p.wait()
        wait_for(lambda: info(db, "keep")["waiting"] == 0, what="queue emptied by disconnect")
    finally:
        for p in kids:
            if p.poll() is None:
                p.kill()
                p.wait()


# --- restarts ---------------------------------------------------------------

@pytest.mark.parametrize("kill", [False, True], ids=["clean-stop", "kill-9"])
def test_tokens_keep_increasing_across_a_restart(kill):
    s1 = AtomdbServer()
    s1.start()
    servers = [s1]
    try:
        c = connect(s1)
        last = 0
        for _ in range(3):
            r = acquire(c.test, "durable", "a", lease_ms=100000)
            c.test.command({"releaseLock": "durable", "token": r["token"]})
            last = r["token"]
        holder = acquire(c.test, "durable", "h")["token"]
        # a waiter woken by a release: its token is written outside its command
        got = {}
        c2 = connect(s1)
        t = threading.Thread(target=lambda: got.update(
            acquire(c2.test, "durable", "w", wait_ms=30000)))
        t.start()
        wait_for(lambda: info(c.test, "durable")["waiting"] == 1, what="waiter queued")
        c.test.command({"releaseLock": "durable", "token": holder})
        t.join(30)
        assert got.get("acquired") and got["token"] == holder + 1 > last, "waiter got its token"
        last = got["token"]
        c.close()
        c2.close()
        s2 = restart(s1, kill=kill)
        servers.append(s2)
        c = connect(s2)
        i = info(c.test, "durable")
        assert i["held"] is False, "a restart ends every lease"
        assert i["token"] == last, "the last token issued survived the restart"
        r = acquire(c.test, "durable", "b")
        assert r["token"] > last, "the first token after the restart is larger (%d > %d)" % (
            r["token"], last)
        c.close()
    finally:
        stop_all(servers)


def test_a_fenced_commitTransaction_with_a_stale_token_commits_nothing(client):
    db = client.test
    db.create_collection("tx")
    old = acquire(db, "txlock", "a", lease_ms=200)["token"]
    time.sleep(0.3)
    new = acquire(db, "txlock", "b")["token"]
    with client.start_session() as s:
        s.start_transaction()
        db.command({"insert": "tx", "documents": [{"_id": 1}]}, session=s)
        with pytest.raises(OperationFailure) as e:
            client.admin.command({"commitTransaction": 1,
                                  "fence": {"lock": "txlock", "token": old}}, session=s)
        assert e.value.code == STALE, "a commit fenced with a stale token is refused"
        s.abort_transaction()
    assert db.tx.count_documents({}) == 0, "the refused commit wrote nothing"
    with client.start_session() as s:
        s.start_transaction()
        db.command({"insert": "tx", "documents": [{"_id": 2}]}, session=s)
        client.admin.command({"commitTransaction": 1,
                              "fence": {"lock": "txlock", "token": new}}, session=s)
        # pymongo still counts the transaction as open; ending the session
        # sends an abortTransaction that the server refuses (already committed)
    assert [d["_id"] for d in db.tx.find()] == [2], "a commit under the current token applies"
