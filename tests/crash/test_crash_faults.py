"""Injected WAL failures: a short write, an fsync error, a full disk.

Needs a build configured with -DFAULT_INJECTION=ON (build-asan/ is): there the
admin command {atomdbFault: KIND, times: N} makes the next N WAL writes fail
that way. Elsewhere the command is CommandNotFound and these tests skip.

Each test: acknowledged writes, then the fault, then a write that must get an
error (ok:0 or a writeConcernError) while reads keep working; writes may be
refused while the server retries the failed log write, then must succeed
again; finally kill -9 and restart (without --repair): every acknowledged
write is there, and nothing appears that was never written (a write that got
an error may or may not be there: docs/durability.md says LogWriteFailed means
"applied but could not be made durable", and the retry may make it durable).
"""

import time

import pytest
from pymongo import WriteConcern
from pymongo.errors import AutoReconnect, OperationFailure

from crashlib import ServerProblem

FAULTS = ["wal_short_write", "wal_fsync_error", "wal_enospc"]
# (journal mode, write concern the client asks for): in "write" mode only a
# j:true write waits for the fsync, so that is the one an fsync error reaches.
MODES = {
    "fsync-w1": (["--journal", "fsync"], WriteConcern(w=1)),
    "write-j": (["--journal", "write"], WriteConcern(w=1, j=True)),
}
FLAGS = ["--snapshot-interval", "0", "--snapshot-wal-mb", "4096"]
TIMES = 2
RECOVER_S = 15.0


def start_or_fail(server, what):
    try:
        server.start()
    except ServerProblem as e:
        pytest.fail("%s: %s" % (what, e), pytrace=False)


def arm(client, fault, times):
    """Arms the fault, or skips the test when the build has no fault injection."""
    try:
        reply = client.admin.command({"atomdbFault": fault, "times": times})
    except OperationFailure as e:
        if e.code == 59:
            pytest.skip("atomdbFault is CommandNotFound: this atomdb (%s) was built without "
                        "-DFAULT_INJECTION=ON; run with ATOMDB_BIN=build-asan/atomdb" % e.details)
        raise
    assert reply.get("ok") == 1, "{atomdbFault: %r, times: %d} answers ok:1 (got %r)" % (fault, times, reply)


def try_insert(coll, doc):
    """Returns None when acknowledged, else the error text."""
    try:
        coll.insert_one(doc)
        return None
    except AutoReconnect as e:
        pytest.fail("a write during an injected WAL failure gets an error reply, not a dropped "
                    "connection (%s)" % e, pytrace=False)
    except OperationFailure as e:
        return "%s: %s" % (type(e).__name__, e)


@pytest.mark.parametrize("mode", sorted(MODES))
@pytest.mark.parametrize("fault", FAULTS)
def test_an_injected_wal_failure_fails_the_write_and_loses_nothing_acknowledged(crash_server, fault, mode):
    args, wc = MODES[mode]
    server = crash_server(*(args + FLAGS))
    start_or_fail(server, "first start")
    acked = []
    failed = []
    with server.client(retryWrites=False) as c:
        coll = c.crash.get_collection("faults", write_concern=wc)
        for i in range(20):
            coll.insert_one({"_id": "a%02d" % i, "v": i})
            acked.append("a%02d" % i)
        c.crash.get_collection("counter", write_concern=wc).insert_one({"_id": "c", "n": 0})

        arm(c, fault, TIMES)
        err = try_insert(coll, {"_id": "f00", "v": "during the fault"})
        assert err is not None, "the first write after arming %s gets an error" % fault
        failed.append("f00")

        assert coll.find_one({"_id": "a00"}) == {"_id": "a00", "v": 0}, \
            "reads keep working after a %s (%s)" % (fault, err)
        assert coll.count_documents({"_id": {"$in": acked}}) == len(acked), \
            "every acknowledged document is still readable after a %s" % fault

        # The server may refuse writes until its retries have used up the
        # injected failures; then writes must succeed again, and keep succeeding.
        deadline = time.monotonic() + RECOVER_S
        i = 0
        while True:
            i += 1
            _id = "f%02d" % i
            e = try_insert(coll, {"_id": _id, "v": "after the fault"})
            if e is None:
                acked.append(_id)
                break
            failed.append(_id)
            assert time.monotonic() < deadline, \
                "writes succeed again within %.0f s once the %d injected %s failures are used up " \
                "(last error: %s)" % (RECOVER_S, TIMES, fault, e)
            time.sleep(0.05)
        for j in range(5):
            _id = "g%02d" % j
            e = try_insert(coll, {"_id": _id, "v": "well after the fault"})
            assert e is None, "once writes succeed again after a %s they keep succeeding (%s)" % (fault, e)
            acked.append(_id)

        counter = c.crash.get_collection("counter", write_concern=wc)
        for _ in range(10):
            counter.update_one({"_id": "c"}, {"$inc": {"n": 1}})
        assert c.admin.command("ping")["ok"] == 1, "the server is up after a %s" % fault
    assert server.alive(), "the server stays up after a %s:\n%s" % (fault, server.log_tail())

    server.kill9()
    start_or_fail(server, "restart (without --repair) after a %s and later writes" % fault)
    with server.client() as c:
        present = {d["_id"] for d in c.crash.faults.find()}
        n = (c.crash.counter.find_one({"_id": "c"}) or {}).get("n")
    lost = [i for i in acked if i not in present]
    assert not lost, "no acknowledged write is lost after a %s and kill -9 (lost %r)" % (fault, lost)
    assert present <= set(acked) | set(failed), \
        "no document appears that was never written (extra %r)" % sorted(present - set(acked) - set(failed))
    assert n == 10, "the ten acknowledged $inc after the %s survive (n = %r)" % (fault, n)
