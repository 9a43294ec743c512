"""The TTL monitor's pass runs in slices (issue 13): over 200,000 expired
documents every one is removed, a counter client keeps completing requests
while the pass runs, a document whose date moves into the future during the
pass is kept, change streams see each removal as a delete, and a collection
dropped during a pass stops that collection's scan without harm.

Progress is asserted by counts (work done while the pass ran), never by
how long anything took."""
import datetime
import threading
import time

import pytest

from atomdb_clients import connect
from atomdb_testlib import restart, wait_for

N = 200_000
PAST = datetime.datetime(2000, 1, 1)
FUTURE = datetime.datetime(2999, 1, 1)


@pytest.fixture(scope="module")
def client(atomdb_module):
    c = connect(atomdb_module)
    yield atomdb_module, c
    c.close()


def ttl_monitor(c, on):
    c.admin.command({"setParameter": 1, "ttlMonitorEnabled": on, "ttlMonitorSleepSecs": 1})


def fill_expired(coll, n=N):
    for s in range(0, n, 20_000):
        coll.insert_many([{"_id": i, "at": PAST, "v": i} for i in range(s, min(n, s + 20_000))])


def wait_until(fn, what, timeout=120):
    """wait_for with the TTL passes' longer default timeout."""
    wait_for(fn, timeout, what)


class Counter:
    """A client of its own in a thread, $inc on one document until stopped;
    `inside(t0, t1)` counts the increments acknowledged between two instants."""

    def __init__(self, server):
        self.c = connect(server)
        self.c.hot.counter.replace_one({"_id": 1}, {"_id": 1, "n": 0}, upsert=True)
        self.acks = []
        self.running = threading.Event()
        self.running.set()
        self.th = threading.Thread(target=self.loop)
        self.th.start()
        wait_until(lambda: len(self.acks) > 10, "the counter runs")

    def loop(self):
        col = self.c.hot.counter
        while self.running.is_set():
            col.update_one({"_id": 1}, {"$inc": {"n": 1}})
            self.acks.append(time.monotonic())

    def finish(self):
        self.running.clear()
        self.th.join()
        assert self.c.hot.counter.find_one({"_id": 1})["n"] == len(self.acks), \
            "no increment was lost"
        self.c.close()

    def inside(self, t0, t1):
        return sum(1 for t in self.acks if t0 < t < t1)


def test_a_pass_over_200k_expired_documents_runs_in_slices_and_keeps_a_moved_date(client):
    server, c = client
    db = c.ttl
    ttl_monitor(c, False)
    db.drop_collection("big")
    db.big.create_index("at", expireAfterSeconds=0, name="at_ttl")
    fill_expired(db.big)
    last = N - 1  # the scan goes in _id order: the last document is reached last
    counter = Counter(server)
    ttl_monitor(c, True)
    wait_until(lambda: db.big.estimated_document_count() < N, "the TTL pass starts")
    t0 = time.monotonic()
    moved = db.big.update_one({"_id": last}, {"$set": {"at": FUTURE}})
    left_when_moved = db.big.estimated_document_count()
    assert moved.matched_count == 1, \
        "the pass had not reached the last document when its date moved (the pass is sliced)"
    wait_until(lambda: db.big.estimated_document_count() == 1, "the TTL pass removed the rest")
    t1 = time.monotonic()
    counter.finish()
    during = counter.inside(t0, t1)
    print("left when the date moved: %d; counter during the pass: %d ops in %.3f s"
          % (left_when_moved, during, t1 - t0))
    assert left_when_moved > 1, "the date moved while the pass still had documents to remove"
    assert during >= 5, "the counter made progress while the pass ran (%d)" % during
    assert list(db.big.find()) == [{"_id": last, "at": FUTURE, "v": last}], \
        "every expired document went; the one whose date moved into the future stayed"
    time.sleep(2.5)  # later passes (one a second) keep it too
    assert db.big.count_documents({}) == 1
    v = db.command("validate", "big", full=True)
    assert v["valid"] is True and v["keysPerIndex"]["at_ttl"] == 1, v


def test_change_streams_see_each_ttl_removal_as_a_delete(client):
    server, c = client
    db = c.ttl
    ttl_monitor(c, False)
    db.drop_collection("cs")
    db.cs.create_index("at", expireAfterSeconds=0)
    fill_expired(db.cs, 50)
    db.cs.insert_one({"_id": "keep", "at": FUTURE})
    with db.cs.watch(max_await_time_ms=200) as stream:
        ttl_monitor(c, True)
        seen = []
        end = time.monotonic() + 30
        while len(seen) < 50 and time.monotonic() < end:
            ch = stream.try_next()
            if ch is not None:
                seen.append(ch)
    assert [ch["operationType"] for ch in seen] == ["delete"] * 50, seen[:3]
    assert sorted(ch["documentKey"]["_id"] for ch in seen) == list(range(50))
    assert [d["_id"] for d in db.cs.find()] == ["keep"]


def test_a_collection_dropped_during_a_pass_stops_its_scan_and_the_others_are_reaped(client):
    server, c = client
    db = c.ttl
    ttl_monitor(c, False)
    db.drop_collection("a_dropped")
    db.drop_collection("z_after")
    db.a_dropped.create_index("at", expireAfterSeconds=0)
    db.z_after.create_index("at", expireAfterSeconds=0)
    fill_expired(db.a_dropped)
    fill_expired(db.z_after, 1000)
    ttl_monitor(c, True)
    wait_until(lambda: db.a_dropped.estimated_document_count() < N, "the TTL pass starts")
    db.drop_collection("a_dropped")
    assert "a_dropped" not in db.list_collection_names()
    wait_until(lambda: db.z_after.estimated_document_count() == 0,
               "the other collection's expired documents are removed")
    db.a_dropped.insert_one({"_id": 1, "at": FUTURE})  # a new collection of the same name
    assert db.a_dropped.count_documents({}) == 1
    assert c.admin.command("ping")["ok"] == 1


@pytest.mark.parametrize("kill", [False, True], ids=["sigterm", "kill9"])
def test_a_stop_during_a_pass_ends_it_cleanly_and_the_restart_reaps_the_rest(atomdb, kill):
    c = connect(atomdb)
    db = c.ttl
    ttl_monitor(c, False)
    db.big.create_index("at", expireAfterSeconds=0, name="at_ttl")
    fill_expired(db.big)
    db.big.insert_one({"_id": "keep", "at": FUTURE})
    ttl_monitor(c, True)
    wait_until(lambda: db.big.estimated_document_count() <= N, "the TTL pass starts")
    c.close()
    server = restart(atomdb, kill=kill)  # a clean stop reports no problem (sanitizers included)
    try:
        c = connect(server)
        db = c.ttl
        left = db.big.estimated_document_count()
        assert 1 <= left <= N + 1, left
        v = db.command("validate", "big", full=True)
        assert v["valid"] is True and v["keysPerIndex"]["at_ttl"] == v["nrecords"], v
        wait_until(lambda: db.big.estimated_document_count() == 1,
                   "the restarted server's TTL monitor removes the rest")
        assert [d["_id"] for d in db.big.find()] == ["keep"]
        c.close()
    finally:
        problems = server.stop()
        server.cleanup()
    assert problems == [], problems
