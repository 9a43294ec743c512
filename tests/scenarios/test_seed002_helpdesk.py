"""Seed 002, helpdesk capacity: a client is assigned to an agent only while
the agent has room, {_id: agent, clientCount: {$lt: max}} ->
{$inc: {clientCount: 1}}. No agent ever goes above max, and exactly max
assignments per agent succeed. The naive read-check-$set version exceeds
capacity. Also: the seed's literal {'$set': {'$inc': ...}} is rejected with
code 52 and writes nothing."""

import random
import time

import pytest
from pymongo.errors import WriteError

from scenario_lib import N_OPS, demonstrate_race, new_client, read_collection, run_workers, seed_collection

# agent -> maxClientLimit; the sum is far below N_PROCS * ops for every round
AGENTS = {"agent-a": 5, "agent-b": 20, "agent-c": 50, "agent-d": 100}


def assign_worker(db, index, coll_name, ops):
    """ops times: picks a random agent and tries to assign a client;
    returns [(agent, n, nModified)]."""
    coll = db[coll_name]
    rng = random.Random(3000 + index)
    names = sorted(AGENTS)
    out = []
    for _ in range(ops):
        agent = rng.choice(names)
        r = coll.update_one({"_id": agent, "clientCount": {"$lt": AGENTS[agent]}},
                            {"$inc": {"clientCount": 1}})
        out.append((agent, r.matched_count, r.modified_count))
    return out


def naive_worker(db, index, coll_name, ops, sleep_s):
    """Reads clientCount; if below max, writes clientCount + 1 with $set and
    believes the client was assigned."""
    coll = db[coll_name]
    rng = random.Random(4000 + index)
    names = sorted(AGENTS)
    out = []
    for _ in range(ops):
        agent = rng.choice(names)
        doc = coll.find_one({"_id": agent})
        if doc["clientCount"] >= AGENTS[agent]:
            out.append((agent, 0, 0))
            continue
        if sleep_s:
            time.sleep(sleep_s)
        r = coll.update_one({"_id": agent}, {"$set": {"clientCount": doc["clientCount"] + 1}})
        out.append((agent, r.matched_count, 1 if r.matched_count == 1 else 0))
    return out


def watch_agents(db, stop, coll_name):
    """Polls every agent while the workers run; returns (reads, highest
    clientCount seen per agent)."""
    coll = db[coll_name]
    highest = {a: 0 for a in AGENTS}
    reads = 0
    while True:  # at least one read, even if the workers finish first
        done = stop.is_set()
        for doc in coll.find({}):
            highest[doc["_id"]] = max(highest[doc["_id"]], doc["clientCount"])
        reads += 1
        if done:
            break
    return reads, highest


def agents():
    return [{"_id": a, "maxClientLimit": m, "clientCount": 0} for a, m in sorted(AGENTS.items())]


def check_capacity(uri, coll_name, results):
    """Violations of: clientCount never above max, final clientCount == max,
    successful assignments per agent == max."""
    violations = []
    won = {a: 0 for a in AGENTS}
    for index, attempts in enumerate(results):
        for agent, n, n_modified in attempts:
            if (n, n_modified) not in ((0, 0), (1, 1)):
                violations.append("process %d, %s: (n, nModified) = (%r, %r)" % (index, agent, n, n_modified))
            won[agent] += n_modified
    final = {d["_id"]: d["clientCount"] for d in read_collection(uri, coll_name)}
    for agent, limit in sorted(AGENTS.items()):
        if won[agent] != limit:
            violations.append("%s (max %d): %d assignments were reported successful"
                              % (agent, limit, won[agent]))
        if final.get(agent) != limit:
            violations.append("%s (max %d): final clientCount %r" % (agent, limit, final.get(agent)))
    return violations


def test_conditional_inc_never_exceeds_agent_capacity(atomdb_uri):
    seed_collection(atomdb_uri, "helpdesk", agents())
    results, (reads, highest) = run_workers(atomdb_uri, assign_worker, ("helpdesk", N_OPS),
                                            observer=watch_agents, observer_args=("helpdesk",))
    over = {a: h for a, h in highest.items() if h > AGENTS[a]}
    assert not over, "observer (%d polls) saw clientCount above max: %r, max %r" % (reads, over, AGENTS)
    violations = check_capacity(atomdb_uri, "helpdesk", results)
    assert not violations, "helpdesk capacity broke: %s" % violations


def test_naive_read_then_set_exceeds_capacity_and_the_check_catches_it(atomdb_uri):
    def run_round(sleep_s, ops, round_no):
        name = "helpdesk_naive_%d" % round_no
        seed_collection(atomdb_uri, name, agents())
        results, _ = run_workers(atomdb_uri, naive_worker, (name, ops, sleep_s))
        return check_capacity(atomdb_uri, name, results)

    violations, log = demonstrate_race(run_round, "helpdesk assignment")
    assert violations, "the naive version must exceed capacity; rounds: %s" % log
    print("naive helpdesk:", "; ".join(log), "->", violations[:4])


# The three update statements of seed 002 exactly as printed: each nests $inc
# inside $set, which stores a field named "$inc" and must be refused.
SEED_002_LITERALS = [
    ("helpdesk", {"_id": "desk-1", "clientCount": 0},
     {"_id": "desk-1", "clientCount": {"$lt": 10}}, {"$set": {"$inc": {"clientCount": 1}}}),
    ("product", {"_id": "prod-1", "avaliableCount": 10},
     {"_id": "prod-1", "avaliableCount": {"$gte": 2}}, {"$set": {"$inc": {"avaliableCount": -2}}}),
    ("product", {"_id": "prod-2", "saledCount": 0},
     {"_id": "prod-2", "saledCount": {"$lte": 10 - 2}}, {"$set": {"$inc": {"saledCount": 2}}}),
]


@pytest.mark.parametrize("coll_name,doc,query,update", SEED_002_LITERALS,
                         ids=["clientCount", "avaliableCount", "saledCount"])
def test_seed_002_set_wrapping_inc_fails_with_code_52_and_writes_nothing(atomdb_uri, coll_name, doc, query, update):
    client = new_client(atomdb_uri)
    try:
        coll = client.scenarios["literal_" + coll_name]
        coll.drop()
        coll.insert_one(doc)
        with pytest.raises(WriteError) as info:
            coll.update_one(query, update)
        err = info.value
        assert err.code == 52, ("update_one(%r, %r) should fail with code 52 "
                                "(DollarPrefixedFieldName); got code %r: %r"
                                % (query, update, err.code, err.details))
        assert "$inc" in str(err), "the error message should name the offending field '$inc': %r" % str(err)
        assert list(coll.find({})) == [doc], \
            "a rejected update must write nothing; collection now %r" % list(coll.find({}))

        # The mongo shell sends the raw update command; the reply carries the
        # error in writeErrors with n = nModified = 0.
        reply = client.scenarios.command({"update": coll.name, "updates": [{"q": query, "u": update}]})
        errors = reply.get("writeErrors", [])
        assert reply.get("n") == 0 and reply.get("nModified") == 0, \
            "raw update command reply should report n=0, nModified=0: %r" % reply
        assert len(errors) == 1 and errors[0].get("code") == 52, \
            "raw update command should carry one writeError with code 52: %r" % reply
        assert list(coll.find({})) == [doc], \
            "the raw update command wrote something: %r" % list(coll.find({}))

        # With upsert and no matching document, mongod 5.0+ validates the new
        # document as an insert, and inserts may hold $-prefixed field names
        # (manual: "Dollar-Prefixed Field Names", upserts): the same nesting
        # then stores a field literally named "$inc" -- the seed's bug writes
        # a wrong document instead of failing, exactly as on mongod 7.
        upsert_query = {"_id": doc["_id"] + "-new"}
        res = coll.update_one(upsert_query, update, upsert=True)
        assert res.upserted_id == upsert_query["_id"], "the upsert inserted: %r" % res.raw_result
        stored = coll.find_one(upsert_query)
        assert stored == dict(upsert_query, **update["$set"]), \
            "the inserted document holds the literal '$inc' field: %r" % stored
        assert coll.find_one({"_id": doc["_id"]}) == doc, "the existing document is untouched"
    finally:
        client.close()
