"""Seed 003, video play counter: every play is
findAndModify({key: vid}, {$inc: {count: 1}}, upsert: true, new: true), with
no document existing at the start, so the first plays of each vid race to
create it. For each vid the counts handed back are exactly 1..N with no
duplicates and exactly one document exists. Runs with the vid as _id (the
seed's final form) and as a plain `vid` field with no index (the seed's first
form). The naive read-then-$set (upsert) version hands out duplicate counts."""

import random
import time
from collections import Counter, defaultdict

import pytest
from pymongo import ReturnDocument

from scenario_lib import N_OPS, demonstrate_race, read_collection, run_workers, seed_collection

VIDS = ["10086", "10087", "10088", "10089", "10090"]


def play_worker(db, index, coll_name, key, ops):
    """ops plays of random vids; returns [(vid, count returned)]."""
    coll = db[coll_name]
    rng = random.Random(5000 + index)
    out = []
    for _ in range(ops):
        vid = rng.choice(VIDS)
        doc = coll.find_one_and_update({key: vid}, {"$inc": {"count": 1}}, upsert=True,
                                       return_document=ReturnDocument.AFTER)
        out.append((vid, None if doc is None else doc.get("count")))
    return out


def naive_worker(db, index, coll_name, key, ops, sleep_s):
    """Reads the vid's count (0 when missing), writes count + 1 back with
    $set and upsert, and hands count + 1 to the caller."""
    coll = db[coll_name]
    rng = random.Random(6000 + index)
    out = []
    for _ in range(ops):
        vid = rng.choice(VIDS)
        doc = coll.find_one({key: vid})
        count = doc["count"] if doc else 0
        if sleep_s:
            time.sleep(sleep_s)
        coll.update_one({key: vid}, {"$set": {"count": count + 1}}, upsert=True)
        out.append((vid, count + 1))
    return out


def check_counts(uri, coll_name, key, results):
    """Violations of: per vid, returned counts are exactly 1..N; one
    document per vid holding count N; no other documents."""
    violations = []
    returned = defaultdict(list)
    for attempts in results:
        for vid, count in attempts:
            returned[vid].append(count)
    docs = read_collection(uri, coll_name)
    for vid in VIDS:
        values = returned.get(vid, [])
        n = len(values)
        if sorted(values, key=lambda v: (v is None, v)) != list(range(1, n + 1)):
            dupes = sorted((v for v, c in Counter(values).items() if c > 1), key=lambda v: (v is None, v))
            violations.append("vid %s: %d plays but returned counts are not 1..%d (duplicates %s%s; "
                              "missing %s)" % (vid, n, n, dupes[:10], "..." if len(dupes) > 10 else "",
                                               sorted(set(range(1, n + 1)) - set(values))[:10]))
        mine = [d for d in docs if d.get(key) == vid]
        if len(mine) != 1:
            violations.append("vid %s: %d documents (%r), expected exactly one"
                              % (vid, len(mine), mine[:3]))
        elif mine[0].get("count") != n:
            violations.append("vid %s: document count %r after %d plays" % (vid, mine[0].get("count"), n))
    strays = [d for d in docs if d.get(key) not in VIDS]
    if strays:
        violations.append("documents for no vid: %r" % strays[:3])
    return violations


@pytest.mark.parametrize("key", ["_id", "vid"])
def test_upsert_find_and_modify_returns_every_count_exactly_once(atomdb_uri, key):
    name = "vv_stat_" + key.strip("_")
    seed_collection(atomdb_uri, name, [])
    results, _ = run_workers(atomdb_uri, play_worker, (name, key, N_OPS))
    violations = check_counts(atomdb_uri, name, key, results)
    assert not violations, ("findAndModify upsert + $inc keyed by %s broke (%d violations): %s"
                            % (key, len(violations), violations))


def test_naive_read_then_set_hands_out_duplicate_counts_and_the_check_catches_it(atomdb_uri):
    def run_round(sleep_s, ops, round_no):
        name = "vv_stat_naive_%d" % round_no
        seed_collection(atomdb_uri, name, [])
        results, _ = run_workers(atomdb_uri, naive_worker, (name, "_id", ops, sleep_s))
        return check_counts(atomdb_uri, name, "_id", results)

    violations, log = demonstrate_race(run_round, "play counter")
    assert violations, "the naive version must hand out duplicate counts; rounds: %s" % log
    print("naive play counter:", "; ".join(log), "->", violations[:3])
