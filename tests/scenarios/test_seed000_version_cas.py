"""Seeds 000 (Spring Data @Version) and 001 (CAS with version + bounded
retry): a writer reads {version: v, counter: c}, then updates
{_id, version: v} -> {$set: {counter: c + 1, ...}, $inc: {version: 1}}; when
that matches nothing (nModified 0) another writer got there first, so it backs
off and retries, up to a bound. No update is lost: the final counter and
version both equal the number of successful attempts. The naive
read-then-$set version (no version check) loses updates."""

import random
import time

from scenario_lib import N_OPS, N_PROCS, demonstrate_race, new_client, read_collection, run_workers, seed_collection

PERSON = "daenerys"
MAX_ATTEMPTS = 40          # per logical update, then the writer gives up
BACKOFF_BASE_S = 0.0001    # jittered exponential backoff, capped
BACKOFF_CAP_S = 0.004


def person():
    return {"_id": PERSON, "firstname": "Daenerys", "lastname": "Targaryen",
            "version": 0, "counter": 0, "lastWriter": None}


def cas_worker(db, index, coll_name, ops):
    """ops logical increments with version CAS and bounded retry. Returns a
    dict: successes, retries, gave_up, most attempts one update needed, and
    any (n, nModified) reply outside {(0,0), (1,1)}."""
    coll = db[coll_name]
    rng = random.Random(7000 + index)
    user = "user%02d" % index
    stats = {"successes": 0, "retries": 0, "gave_up": 0, "max_attempts": 0, "odd_replies": []}
    for _ in range(ops):
        for attempt in range(1, MAX_ATTEMPTS + 1):
            doc = coll.find_one({"_id": PERSON})
            r = coll.update_one({"_id": PERSON, "version": doc["version"]},
                                {"$set": {"counter": doc["counter"] + 1, "lastWriter": user},
                                 "$inc": {"version": 1}})
            reply = (r.matched_count, r.modified_count)
            if reply not in ((0, 0), (1, 1)) and len(stats["odd_replies"]) < 5:
                stats["odd_replies"].append(reply)
            if r.modified_count == 1:
                stats["successes"] += 1
                stats["max_attempts"] = max(stats["max_attempts"], attempt)
                break
            stats["retries"] += 1
            time.sleep(rng.uniform(0, min(BACKOFF_CAP_S, BACKOFF_BASE_S * 2 ** attempt)))
        else:
            stats["gave_up"] += 1
            stats["max_attempts"] = MAX_ATTEMPTS
    return stats


def naive_worker(db, index, coll_name, ops, sleep_s):
    """Reads the counter and writes counter + 1 back with $set, ignoring
    the version; every write that matches 'succeeds' as far as the client
    can tell (nModified is 0 when it rewrites the value already there)."""
    coll = db[coll_name]
    successes = 0
    for _ in range(ops):
        doc = coll.find_one({"_id": PERSON})
        if sleep_s:
            time.sleep(sleep_s)
        r = coll.update_one({"_id": PERSON}, {"$set": {"counter": doc["counter"] + 1}})
        successes += r.matched_count
    return {"successes": successes}


def check_no_lost_update(uri, coll_name, results, bump_version=True):
    """Violations of 'final counter == successful attempts' (and version
    likewise, when the writers bump it)."""
    successes = sum(r["successes"] for r in results)
    docs = read_collection(uri, coll_name)
    if len(docs) != 1:
        return ["expected one document, found %d" % len(docs)]
    doc = docs[0]
    violations = []
    if doc["counter"] != successes:
        violations.append("counter is %r after %d successful updates (%d lost)"
                          % (doc["counter"], successes, successes - doc["counter"]))
    if bump_version and doc["version"] != successes:
        violations.append("version is %r after %d successful updates" % (doc["version"], successes))
    return violations


def test_version_cas_with_bounded_retry_loses_no_update(atomdb_uri, record_property):
    seed_collection(atomdb_uri, "person", [person()])
    results, _ = run_workers(atomdb_uri, cas_worker, ("person", N_OPS))
    total = {k: sum(r[k] for r in results) for k in ("successes", "retries", "gave_up")}
    most = max(r["max_attempts"] for r in results)
    odd = [r["odd_replies"] for r in results if r["odd_replies"]]
    summary = ("%d procs x %d updates: %d succeeded, %d gave up after %d attempts, %d retries "
               "(%.2f per update), most attempts for one update %d"
               % (N_PROCS, N_OPS, total["successes"], total["gave_up"], MAX_ATTEMPTS,
                  total["retries"], total["retries"] / (N_PROCS * N_OPS), most))
    print("version CAS:", summary)
    for k, v in total.items():
        record_property(k, v)
    assert not odd, "update replies (n, nModified) outside {(0,0),(1,1)}: %r" % odd
    assert total["successes"] + total["gave_up"] == N_PROCS * N_OPS, \
        "every logical update must end as a success or a give-up: %s" % summary
    violations = check_no_lost_update(atomdb_uri, "person", results)
    assert not violations, "version CAS lost updates: %s; %s" % (violations, summary)
    assert total["retries"] > 0, ("no CAS ever conflicted, so the retry path was never exercised "
                                  "and the test proves nothing: %s" % summary)


def test_a_save_with_a_stale_version_matches_nothing(atomdb_uri):
    """The seed 000 walk-through: insert at version 0, read a copy, save the
    original (version -> 1), then save the stale copy: it must match nothing."""
    client = new_client(atomdb_uri)
    try:
        coll = client.scenarios.person_stale
        coll.drop()
        coll.insert_one(person())
        tmp = coll.find_one({"_id": PERSON})
        r1 = coll.update_one({"_id": PERSON, "version": 0},
                             {"$set": {"lastname": "Stormborn"}, "$inc": {"version": 1}})
        assert (r1.matched_count, r1.modified_count) == (1, 1), \
            "first save at version 0 should match and modify: %r" % r1.raw_result
        r2 = coll.update_one({"_id": PERSON, "version": tmp["version"]},
                             {"$set": {"lastname": "Unburnt"}, "$inc": {"version": 1}})
        assert (r2.matched_count, r2.modified_count) == (0, 0), \
            "a save with stale version %r must match nothing: %r" % (tmp["version"], r2.raw_result)
        final = coll.find_one({"_id": PERSON})
        assert (final["lastname"], final["version"]) == ("Stormborn", 1), \
            "the stale save must not change the document: %r" % final
    finally:
        client.close()


def test_naive_read_then_set_without_version_loses_updates_and_the_check_catches_it(atomdb_uri):
    def run_round(sleep_s, ops, round_no):
        name = "person_naive_%d" % round_no
        seed_collection(atomdb_uri, name, [person()])
        results, _ = run_workers(atomdb_uri, naive_worker, (name, ops, sleep_s))
        return check_no_lost_update(atomdb_uri, name, results, bump_version=False)

    violations, log = demonstrate_race(run_round, "update without a version check")
    assert violations, "the naive version must lose updates; rounds: %s" % log
    print("naive version CAS:", "; ".join(log), "->", violations)
