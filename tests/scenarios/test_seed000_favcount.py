"""Seed 000, course favCount: many processes add 1 to one course's favCount.
With $inc every increment is counted; the naive read-then-$set loses some."""

import time

from scenario_lib import N_OPS, N_PROCS, demonstrate_race, read_collection, run_workers, seed_collection

COURSE = "course-mongodb-101"


def inc_worker(db, index, coll_name, ops):
    """$inc favCount by 1, ops times; returns the nModified values seen."""
    coll = db[coll_name]
    modified = []
    for _ in range(ops):
        r = coll.update_one({"_id": COURSE}, {"$inc": {"favCount": 1}})
        modified.append((r.matched_count, r.modified_count))
    return modified


def naive_worker(db, index, coll_name, ops, sleep_s):
    """Reads favCount, then writes favCount + 1 back with $set (the seed's
    findById / setFavCount / save version)."""
    coll = db[coll_name]
    for _ in range(ops):
        doc = coll.find_one({"_id": COURSE})
        if sleep_s:
            time.sleep(sleep_s)
        coll.update_one({"_id": COURSE}, {"$set": {"favCount": doc["favCount"] + 1}})
    return ops


def check_counter(uri, coll_name, total):
    """Violations of 'final favCount == number of increments'."""
    docs = read_collection(uri, coll_name)
    if len(docs) != 1:
        return ["expected exactly one course document, found %d: %r" % (len(docs), docs[:3])]
    final = docs[0]["favCount"]
    if final != total:
        return ["favCount is %r after %d increments (%d lost)" % (final, total, total - final)]
    return []


def test_concurrent_inc_never_loses_an_increment(atomdb_uri):
    seed_collection(atomdb_uri, "course", [{"_id": COURSE, "courseName": "MongoDB", "favCount": 0}])
    results, _ = run_workers(atomdb_uri, inc_worker, ("course", N_OPS))
    for index, modified in enumerate(results):
        bad = [m for m in modified if m != (1, 1)]
        assert not bad, ("process %d: update_one({_id}, {$inc: {favCount: 1}}) should report "
                         "n=1, nModified=1 every time; got (n, nModified) %r" % (index, bad[:5]))
    violations = check_counter(atomdb_uri, "course", N_PROCS * N_OPS)
    assert not violations, "atomic $inc lost increments: %s" % violations


def test_naive_read_then_set_loses_increments_and_the_check_catches_it(atomdb_uri):
    def run_round(sleep_s, ops, round_no):
        name = "course_naive_%d" % round_no
        seed_collection(atomdb_uri, name, [{"_id": COURSE, "courseName": "MongoDB", "favCount": 0}])
        run_workers(atomdb_uri, naive_worker, (name, ops, sleep_s))
        return check_counter(atomdb_uri, name, N_PROCS * ops)

    violations, log = demonstrate_race(run_round, "favCount increment")
    assert violations, "the naive version must lose increments; rounds: %s" % log
    print("naive favCount:", "; ".join(log), "->", violations)
