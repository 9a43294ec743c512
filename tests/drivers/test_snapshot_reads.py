"""Reads at one snapshot whose scans yield (issue 13, docs/concurrency.md
"Reads across slices"): a transaction's find, aggregate and countDocuments,
a readConcern "snapshot" find and a $lookup aggregate (which opens a
snapshot) read a large collection in many slices while another client
updates, moves (changes the indexed field the plan scans), deletes and
inserts documents ahead of and behind the scan. Each read returns every
document of its snapshot exactly once, in the snapshot's version, and
nothing inserted after it.

Every assertion is on correctness; the writer's progress during the read
is asserted so that the interleavings did happen."""

import collections
import random
import threading
import time

import pytest
from pymongo import ASCENDING
from pymongo.read_concern import ReadConcern

from atomdb_clients import connect

N = 100_000
BIG = 10 * N


@pytest.fixture(scope="module")
def server(atomdb_module):
    c = connect(atomdb_module)
    # short slices: every long read below yields hundreds of times
    old = c.admin.command("getParameter", 1, atomdbYieldPeriodMicros=1)["atomdbYieldPeriodMicros"]
    c.admin.command("setParameter", 1, atomdbYieldPeriodMicros=20)
    yield atomdb_module
    c.admin.command("setParameter", 1, atomdbYieldPeriodMicros=old)
    c.close()


@pytest.fixture
def col(server):
    """A fresh collection: {_id: i, k: i, v: 0, one: 1} for i < N, indexed on k."""
    c = connect(server)
    db = c.snapread
    db.docs.drop()
    for start in range(0, N, 20_000):
        db.docs.insert_many([{"_id": i, "k": i, "v": 0, "one": 1}
                             for i in range(start, min(N, start + 20_000))])
    db.docs.create_index([("k", ASCENDING)])
    yield db.docs
    c.close()


class Writer:
    """Another client changing random documents in a loop: $inc of v,
    moves in the k index (to before every key, behind an ascending scan, or
    past every key, ahead of it), deletes, inserts of new _ids with k
    inside the scanned range, re-inserts of deleted _ids, and updates of
    documents inserted since."""

    def __init__(self, server, wait_for_comment=None):
        self.client = connect(server)
        self.col = self.client.snapread.docs
        self.stop_ev = threading.Event()
        self.wait_for_comment = wait_for_comment
        self.done = 0
        self.error = None
        self.rnd = random.Random(1313)
        self.next_id = N
        self.deleted = []
        self.thread = threading.Thread(target=self.run)

    def one(self):
        i = self.rnd.randrange(N)
        op = self.done % 7
        if op == 0:
            self.col.update_one({"_id": i}, {"$inc": {"v": 1}})
        elif op == 1:
            self.col.update_one({"_id": i}, {"$set": {"k": -1 - i, "v": 2}})  # moves behind
        elif op == 2:
            self.col.update_one({"_id": i}, {"$set": {"k": BIG + i, "v": 3}})  # moves ahead
        elif op == 3:
            if self.col.delete_one({"_id": i}).deleted_count:
                self.deleted.append(i)
        elif op == 4:
            self.col.insert_one({"_id": self.next_id, "k": self.rnd.randrange(N), "v": 4,
                                 "one": 1})
            self.next_id += 1
        elif op == 5 and self.deleted:  # back with another version
            self.col.insert_one({"_id": self.deleted.pop(), "k": self.rnd.randrange(N), "v": 5,
                                 "one": 1})
        elif op == 6 and self.next_id > N:
            self.col.update_one({"_id": self.rnd.randrange(N, self.next_id)},
                                {"$set": {"k": self.rnd.randrange(N), "v": 6}})
        self.done += 1

    def burst(self, n):
        for _ in range(n):
            self.one()

    def running(self, comment):
        ops = self.client.admin.command("currentOp", 1)["inprog"]
        return any(op.get("command", {}).get("comment") == comment for op in ops)

    def run(self):
        try:
            if self.wait_for_comment:
                deadline = time.monotonic() + 30
                while not self.running(self.wait_for_comment):
                    if self.stop_ev.is_set() or time.monotonic() > deadline:
                        return
            while not self.stop_ev.is_set():
                self.one()
        except Exception as e:  # reported by stop()
            self.error = e

    def start(self):
        self.thread.start()

    def stop(self):
        self.stop_ev.set()
        self.thread.join()
        self.client.close()
        if self.error:
            raise self.error


def assert_snapshot_docs(docs, what):
    """`docs` are exactly the N documents as first inserted, once each."""
    ids = collections.Counter(d["_id"] for d in docs)
    twice = sorted(i for i, n in ids.items() if n > 1)
    assert not twice, "%s listed %d documents more than once, e.g. %s" % (what, len(twice),
                                                                         twice[:5])
    new = sorted(i for i in ids if i >= N)
    assert not new, "%s listed documents inserted after its snapshot: %s" % (what, new[:5])
    missing = sorted(set(range(N)) - set(ids))
    assert not missing, "%s missed %d documents, e.g. %s" % (what, len(missing), missing[:5])
    changed = [d for d in docs if d["v"] != 0 or d["k"] != d["_id"]]
    assert not changed, "%s returned versions made after its snapshot: %s" % (what, changed[:3])


def in_txn(server, col, read):
    """Runs `read(session)` in a transaction whose snapshot is taken
    before the writer starts; the writer changes documents after the
    snapshot and before the read, then keeps going alongside it. (A
    transaction's statement does not yield today, dispatch.c pins it; these
    tests keep the snapshot rule should that change.)"""
    c = connect(server)
    w = Writer(server)
    try:
        with c.start_session() as s:
            with s.start_transaction():
                tcol = c.snapread.docs
                assert tcol.find_one({"_id": 0}, session=s)["v"] == 0  # the snapshot is taken
                w.burst(25)  # changed between the snapshot and the read
                before = w.done
                w.start()
                while w.done < before + 5:
                    time.sleep(0.001)
                result = read(tcol, s)
                during = w.done - before
    finally:
        w.stop()
        c.close()
    assert during > 5, "the writer ran alongside the transaction"
    return result


PLANS = {
    "collscan": ({}, None, None),
    "ixscan on the moved field": ({"k": {"$gte": -BIG, "$lt": 2 * BIG}}, "k_1", None),
    "sorted by the index": ({}, None, [("k", ASCENDING)]),
}


@pytest.mark.parametrize("plan", sorted(PLANS))
def test_a_transaction_find_returns_each_snapshot_document_once(server, col, plan):
    flt, hint, sort = PLANS[plan]

    def read(tcol, s):
        cur = tcol.find(flt, {"k": 1, "v": 1}, session=s, batch_size=200_000)
        if hint:
            cur = cur.hint(hint)
        if sort:
            cur = cur.sort(sort)
        return list(cur)

    docs = in_txn(server, col, read)
    assert_snapshot_docs(docs, "find in a transaction (%s)" % plan)
    if sort:
        assert [d["k"] for d in docs] == list(range(N)), "in the snapshot's k order"


def test_a_transaction_aggregate_and_count_see_the_snapshot_once(server, col):
    def read(tcol, s):
        grp = list(tcol.aggregate([{"$match": {"k": {"$gte": -BIG}}},
                                   {"$group": {"_id": None, "n": {"$sum": 1},
                                               "ids": {"$sum": "$_id"}, "v": {"$sum": "$v"}}}],
                                  session=s))
        return grp, tcol.count_documents({"one": 1}, session=s)

    grp, count = in_txn(server, col, read)
    assert grp == [{"_id": None, "n": N, "ids": N * (N - 1) // 2, "v": 0}]
    assert count == N


def test_a_read_concern_snapshot_find_returns_each_document_once(server, col):
    w = Writer(server, wait_for_comment="snapread-rc")
    w.start()
    try:
        docs = list(col.with_options(read_concern=ReadConcern("snapshot"))
                    .find({"k": {"$gte": -BIG}}, {"k": 1, "v": 1}, comment="snapread-rc",
                          batch_size=200_000).hint("k_1"))
        during = w.done
    finally:
        w.stop()
    assert during > 0, "the writer ran while the read did"
    assert_snapshot_docs(docs, "readConcern snapshot find")


def test_a_lookup_aggregate_reads_one_snapshot_in_every_lookup(server, col):
    db = col.database
    db.two.drop()
    db.two.insert_many([{"_id": x, "one": 1} for x in range(3)])
    w = Writer(server, wait_for_comment="snapread-lookup")
    w.start()
    try:
        out = list(db.two.aggregate(
            [{"$lookup": {"from": "docs", "localField": "one", "foreignField": "one",
                          "as": "all"}},
             {"$project": {"all": {"_id": 1, "k": 1, "v": 1}}}],
            comment="snapread-lookup"))
        during = w.done
    finally:
        w.stop()
    assert during > 0, "the writer ran while the lookups did"
    assert [d["_id"] for d in out] == [0, 1, 2]
    for d in out:
        assert_snapshot_docs(d["all"], "$lookup for local document %d" % d["_id"])


def test_two_union_with_stages_read_one_snapshot(server, col):
    """The second $unionWith reads after the first one's slices let the
    writer change documents: it must still read the aggregate's snapshot."""
    db = col.database
    db.empty.drop()
    db.create_collection("empty")
    w = Writer(server, wait_for_comment="snapread-union")
    w.start()
    try:
        out = list(db.empty.aggregate(
            [{"$unionWith": {"coll": "docs", "pipeline": [{"$project": {"k": 1, "v": 1}}]}},
             {"$unionWith": {"coll": "docs", "pipeline": [{"$project": {"k": 1, "v": 1}}]}}],
            comment="snapread-union", batchSize=300_000))
        during = w.done
    finally:
        w.stop()
    assert during > 0, "the writer ran while the aggregate did"
    assert len(out) == 2 * N
    assert_snapshot_docs(out[:N], "the first $unionWith")
    assert_snapshot_docs(out[N:], "the second $unionWith")
