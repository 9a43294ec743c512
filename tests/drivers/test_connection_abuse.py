"""Connection abuse (issue 23, docs/reliability.md): thousands of idle
connections, slowloris, huge declared lengths, clients that never read
their replies, half-open connections, and clients that vanish mid-
transaction, mid-getMore or while parked on a lock. The server must keep
serving the others, keep its memory bounded, and hold nothing for the
client that left. Memory figures are printed (pytest -s) for the docs."""

import os
import resource
import socket
import struct
import subprocess
import time
import uuid

import bson
import pytest
from bson.son import SON
from pymongo import MongoClient

import wireproto as w

IDLE = int(os.environ.get("ATOMDB_IDLE_CONNS", "10000"))


def rss_kib(server):
    with open("/proc/%d/status" % server.proc.pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")


def client(server, **kw):
    return MongoClient(server.host, server.port, serverSelectionTimeoutMS=10000,
                       directConnection=True, **kw)


def wait_closed(sock, timeout):
    """True when the server closes `sock` within `timeout` (reading and
    discarding whatever it sends)."""
    sock.settimeout(1.0)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if sock.recv(65536) == b"":
                return True
        except socket.timeout:
            continue
        except (ConnectionResetError, BrokenPipeError):
            return True
    return False


@pytest.fixture
def many_fds():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    need = IDLE + 1000
    if hard < need:
        pytest.fail("RLIMIT_NOFILE hard limit %d is below the %d this test needs" % (hard, need),
                    pytrace=False)
    resource.setrlimit(resource.RLIMIT_NOFILE, (need, hard))  # the server inherits it
    yield
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_idle_connections_cost_bounded_memory_and_do_not_block_others(many_fds, atomdb_factory):
    server = atomdb_factory("--log-level", "warn")
    with client(server) as c:
        c.test.abuse.insert_one({"_id": 0})
        before = rss_kib(server)
        socks = []
        try:
            hello = w.op_msg(SON([("hello", 1), ("$db", "admin")]))
            for i in range(IDLE):
                s = socket.create_connection((server.host, server.port), timeout=30)
                socks.append(s)
                s.sendall(hello)
                w.read_reply(s)  # each has used its read buffer once
            time.sleep(2.5)  # the once-a-second sweep gives idle buffers back
            after = rss_kib(server)
            per_conn = (after - before) * 1024 / IDLE
            print("\n%d idle connections: RSS %d -> %d KiB, %.0f bytes each" % (
                IDLE, before, after, per_conn))
            assert per_conn < 16 * 1024, \
                "an idle connection costs %.0f bytes of RSS (at most 16 KiB)" % per_conn
            # an active client is served as usual meanwhile
            for i in range(1, 51):
                c.test.abuse.insert_one({"_id": i})
            assert c.test.abuse.count_documents({}) == 51
            status = c.admin.command("serverStatus")
            assert status["connections"]["current"] >= IDLE
        finally:
            for s in socks:
                s.close()


def test_slowloris_is_dropped_after_the_frame_timeout(atomdb_factory):
    server = atomdb_factory("--setParameter", "atomdbFrameTimeoutSecs=2")
    with client(server) as c:
        assert c.admin.command("getParameter", 1, atomdbFrameTimeoutSecs=1)[
            "atomdbFrameTimeoutSecs"] == 2
        frame = w.op_msg(SON([("ping", 1), ("$db", "admin")]))
        slow = socket.create_connection((server.host, server.port))
        closed = False
        try:
            for b in frame[:-1]:  # one byte at a time, never the last
                slow.sendall(bytes([b]))
                assert c.admin.command("ping")["ok"] == 1  # the others are served
                time.sleep(0.25)
                slow.settimeout(0.01)
                try:
                    if slow.recv(1) == b"":
                        closed = True
                        break
                except socket.timeout:
                    pass
                except ConnectionResetError:
                    closed = True
                    break
            assert closed or wait_closed(slow, 30), \
                "a client sending one byte at a time is dropped after atomdbFrameTimeoutSecs"
        finally:
            slow.close()
        log = server.log()
        assert "atomdbFrameTimeoutSecs" in log, "the drop is logged with its reason"


def test_a_huge_declared_length_costs_only_what_arrives_and_times_out(atomdb_factory):
    server = atomdb_factory("--setParameter", "atomdbFrameTimeoutSecs=2", "--log-level", "warn")
    before = rss_kib(server)
    socks = []
    try:
        for i in range(20):  # each declares a 47 MB message and sends its header only
            s = socket.create_connection((server.host, server.port))
            s.sendall(struct.pack("<iiii", 47_000_000, 1, 0, w.OP_MSG) + b"\0" * 100)
            socks.append(s)
        time.sleep(0.5)
        during = rss_kib(server)
        print("\n20 connections declaring 47 MB each: RSS %d -> %d KiB" % (before, during))
        assert during - before < 64 * 1024, "declared lengths are not allocated up front"
        for s in socks:
            assert wait_closed(s, 30), "the unfinished frames are dropped after the timeout"
        with client(server) as c:
            assert c.admin.command("ping")["ok"] == 1
    finally:
        for s in socks:
            s.close()


def test_a_client_that_never_reads_its_replies_is_bounded(atomdb_factory):
    server = atomdb_factory("--log-level", "warn")
    with client(server) as c:
        c.test.big.insert_one({"_id": 1, "pad": "x" * (1 << 20)})
        before = rss_kib(server)
        s = socket.create_connection((server.host, server.port))
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        try:
            find = w.op_msg(SON([("find", "big"), ("filter", {}), ("$db", "test")]))
            s.settimeout(5)
            sent = 0
            try:
                for i in range(400):  # 400 MB of replies, none read
                    s.sendall(find)
                    sent += 1
            except socket.timeout:
                pass  # the server stopped reading from us: that is the bound working
            time.sleep(1.0)
            after = rss_kib(server)
            print("\n%d unread 1 MB replies requested: RSS %d -> %d KiB" % (sent, before, after))
            assert after - before < 160 * 1024, \
                "unsent replies stop at the 64 MiB high-water mark (grew %d KiB)" % (after - before)
            assert c.admin.command("ping")["ok"] == 1, "the others are served meanwhile"
            assert c.test.big.count_documents({}) == 1
        finally:
            s.close()


def test_connections_probe_half_open_peers_with_tcp_keepalive(atomdb):
    s = socket.create_connection((atomdb.host, atomdb.port))
    try:
        s.sendall(w.op_msg(SON([("ping", 1), ("$db", "admin")])))
        w.read_reply(s)
        out = subprocess.run(["ss", "-tnoH", "state", "established",
                              "( sport = :%d )" % atomdb.port],
                             stdout=subprocess.PIPE, check=True).stdout.decode()
        lines = [l for l in out.splitlines() if l.strip()]
        assert lines and all("keepalive" in l for l in lines), \
            "the server's end of every connection has a keepalive timer:\n" + out
    finally:
        s.close()


def test_a_client_gone_while_parked_on_a_lock_is_not_granted_it(atomdb):
    with client(atomdb) as c:
        r = c.admin.command({"acquireLock": "abuse-L", "owner": "A", "leaseMs": 60000})
        assert r["acquired"]
        s = socket.create_connection((atomdb.host, atomdb.port))
        w.send(s, w.op_msg(SON([("acquireLock", "abuse-L"), ("owner", "B"), ("leaseMs", 60000),
                                ("waitMs", 60000), ("$db", "admin")])))
        time.sleep(0.3)  # parked on the server
        s.close()
        time.sleep(0.3)
        c.admin.command({"releaseLock": "abuse-L", "token": r["token"]})
        got = c.admin.command({"acquireLock": "abuse-L", "owner": "C", "leaseMs": 1000})
        assert got["acquired"], "the vanished waiter was not handed the lock: %r" % (got,)


def test_a_client_gone_mid_transaction_holds_nothing_after_the_lifetime(atomdb_factory):
    server = atomdb_factory("--setParameter", "transactionLifetimeLimitSeconds=2")
    with client(server) as c:
        c.test.t.insert_one({"_id": 1, "n": 0})
        s = socket.create_connection((server.host, server.port))
        lsid = {"id": bson.Binary(uuid.uuid4().bytes, 4)}
        reply = w.command(s, SON([("update", "t"), ("updates", [{"q": {"_id": 1},
                                                                "u": {"$inc": {"n": 1}}}]),
                                  ("lsid", lsid), ("txnNumber", bson.Int64(1)),
                                  ("startTransaction", True), ("autocommit", False),
                                  ("$db", "test")]))
        assert reply["ok"] == 1
        s.close()  # gone, neither committed nor aborted
        deadline = time.monotonic() + 30
        done = False
        while time.monotonic() < deadline and not done:
            try:
                c.test.t.update_one({"_id": 1}, {"$inc": {"n": 10}})
                done = True
            except Exception:
                time.sleep(0.2)
        assert done, "the abandoned transaction's write lock is released when it expires"
        assert c.test.t.find_one({"_id": 1})["n"] == 10, "its uncommitted write is gone"


def test_a_client_gone_mid_getmore_blocks_nothing(atomdb):
    with client(atomdb) as c:
        c.test.g.insert_many([{"_id": i} for i in range(10)])
        s = socket.create_connection((atomdb.host, atomdb.port))
        reply = w.command(s, SON([("find", "g"), ("batchSize", 1), ("$db", "test")]))
        assert reply["cursor"]["id"] != 0
        s.close()
        c.test.g.insert_one({"_id": 99})
        c.test.g.drop()
        assert "g" not in c.test.list_collection_names()
