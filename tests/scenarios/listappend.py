"""An Elle-style list-append checker for atomdb's transactions.

Workload: N processes run random transactions over a few documents
{_id: k, v: [...]}; each operation appends a unique value to a document's
list ($push) or reads the whole list. Because every appended value is
unique and lists only grow, the final list of each document gives the
order of its versions, and every read names exactly the version it saw.
From that the checker infers, as Jepsen's Elle does (Kingsbury & Alvaro,
"Elle: Inferring Isolation Anomalies from Experimental Observations"):

  ww  T1 appended v_i, T2 appended v_(i+1) to the same list
  wr  T2 read a list whose last value T1 appended
  rw  T1 read a list ending at v_i (or empty), T2 appended v_(i+1)

and reports, over committed transactions:

  G0        a cycle of ww edges only (dirty write)
  G1a       a read saw a value of an aborted transaction
  G1b       a read saw a transaction's intermediate state of a list
  G1c       a cycle of ww and wr edges (circular information flow)
  G-single  a cycle with exactly one rw edge (read skew, lost update)
  G2        a cycle needing two or more rw edges (write skew)

plus non-cycle faults: a committed append missing from the final list (a
lost append), an aborted one present, a value appearing twice, a read that
is not a prefix of the final list, and a transaction not seeing its own
earlier appends. Snapshot isolation forbids everything but G2;
serializability forbids G2 too.

Run it as a library (tests/scenarios/test_txn_listappend.py) or by hand:
  /usr/bin/python3 tests/scenarios/listappend.py --uri mongodb://127.0.0.1:27017/ \\
      --procs 8 --seconds 30 [--level serializable] [--naive]
"""

import argparse
import json
import multiprocessing
import random
import sys
import time
from collections import defaultdict

import pymongo
from pymongo.errors import ConnectionFailure, OperationFailure, PyMongoError
from pymongo.read_concern import ReadConcern

DB_NAME = "listappend"
COLL_NAME = "lists"

_CTX = multiprocessing.get_context("fork")

# The anomalies each level forbids.
FORBIDDEN = {
    "snapshot": ("G0", "G1a", "G1b", "G1c", "G-single", "lost-append", "aborted-visible",
                 "duplicate", "not-prefix", "internal"),
}
FORBIDDEN["serializable"] = FORBIDDEN["snapshot"] + ("G2",)


# ---------------------------------------------------------------- workload

def _read_list(coll, key, session):
    doc = coll.find_one({"_id": key}, session=session)
    return list(doc["v"]) if doc else []


def _worker(uri, proc, seconds, keys, level, naive, seed, out_q):
    """One process: random transactions until the deadline. Puts its
    history (a list of transactions) on out_q."""
    rng = random.Random(seed)
    client = pymongo.MongoClient(uri, serverSelectionTimeoutMS=10000, socketTimeoutMS=30000)
    coll = client[DB_NAME][COLL_NAME]
    history = []
    counter = 0
    deadline = time.monotonic() + seconds
    try:
        with client.start_session() as session:
            while time.monotonic() < deadline:
                plan = []
                for _ in range(rng.randint(1, 4)):
                    key = rng.randrange(keys)
                    if rng.random() < 0.5:
                        counter += 1
                        plan.append(["append", key, proc * 10_000_000 + counter])
                    else:
                        plan.append(["r", key, None])
                txn = {"proc": proc, "ops": [], "status": "info"}
                history.append(txn)
                try:
                    if not naive:
                        session.start_transaction(
                            read_concern=ReadConcern(level) if level == "serializable" else None)
                    sess = None if naive else session
                    for f, key, val in plan:
                        if f == "append":
                            coll.update_one({"_id": key}, {"$push": {"v": val}}, session=sess)
                            txn["ops"].append([f, key, val])
                        else:
                            txn["ops"].append([f, key, _read_list(coll, key, sess)])
                    if not naive:
                        session.commit_transaction()
                    txn["status"] = "ok"
                except OperationFailure as e:
                    labels = (e.details or {}).get("errorLabels", [])
                    if "UnknownTransactionCommitResult" in labels:
                        txn["status"] = "info"
                    elif "TransientTransactionError" in labels or e.code == 251:
                        txn["status"] = "fail"
                    else:
                        raise
                    # the appends made before the failure are part of the record
                    # (an aborted transaction's appends must never be seen)
                    done = len(txn["ops"])
                    txn["ops"].extend(op for op in plan[done:done + 1] if op[0] == "append")
                    if not naive and session.in_transaction:
                        try:
                            session.abort_transaction()
                        except PyMongoError:
                            pass
                except ConnectionFailure:
                    txn["status"] = "info"
                    break
    finally:
        client.close()
    out_q.put((proc, history))


def run(uri, procs=8, seconds=10.0, keys=6, level="snapshot", naive=False, seed=None):
    """Resets the collection, runs the workload, and returns
    (history, final lists by key)."""
    seed = random.randrange(1 << 30) if seed is None else seed
    client = pymongo.MongoClient(uri, serverSelectionTimeoutMS=10000)
    coll = client[DB_NAME][COLL_NAME]
    coll.drop()
    coll.insert_many([{"_id": k, "v": []} for k in range(keys)])
    out_q = _CTX.Queue()
    ps = [_CTX.Process(target=_worker, args=(uri, i, seconds, keys, level, naive, seed + i, out_q))
          for i in range(procs)]
    for p in ps:
        p.start()
    history = []
    for _ in ps:
        _, h = out_q.get(timeout=seconds + 120)
        history.extend(h)
    for p in ps:
        p.join(30)
        if p.exitcode != 0:
            raise RuntimeError("a list-append worker exited with %s" % p.exitcode)
    final = {d["_id"]: list(d["v"]) for d in coll.find()}
    client.close()
    return history, final


# ---------------------------------------------------------------- checker

def _tarjan(nodes, succ):
    """Strongly connected components (iterative Tarjan); returns a map
    node -> component id."""
    index = {}
    low = {}
    comp = {}
    on_stack = set()
    stack = []
    counter = 0
    ncomp = 0
    for root in nodes:
        if root in index:
            continue
        work = [(root, iter(succ.get(root, ())))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, it = work[-1]
            advanced = False
            for nxt in it:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(succ.get(nxt, ()))))
                    advanced = True
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp[w] = ncomp
                    if w == node:
                        break
                ncomp += 1
    return comp


def _reaches(src, dst, succ, allowed):
    """True when dst is reachable from src through nodes in `allowed`."""
    seen = {src}
    todo = [src]
    while todo:
        n = todo.pop()
        if n == dst:
            return True
        for m in succ.get(n, ()):
            if m in allowed and m not in seen:
                seen.add(m)
                todo.append(m)
    return False


def check(history, final, max_cycle_checks=20000):
    """Returns {anomaly: count, ...} plus 'examples' (a few descriptions
    per anomaly) and 'stats'."""
    found = defaultdict(int)
    examples = defaultdict(list)

    def note(kind, what):
        found[kind] += 1
        if len(examples[kind]) < 5:
            examples[kind].append(what)

    # which transaction wrote each value; committed = ok, or info whose
    # appends are visible (it may have committed)
    writer = {}
    for t, txn in enumerate(history):
        for f, key, val in txn["ops"]:
            if f == "append":
                writer[(key, val)] = t
    final_pos = {}
    for key, lst in final.items():
        seen = set()
        for i, val in enumerate(lst):
            if val in seen:
                note("duplicate", "key %s value %s twice in the final list" % (key, val))
            seen.add(val)
            final_pos[(key, val)] = i
    committed = set()
    for t, txn in enumerate(history):
        if txn["status"] == "ok":
            committed.add(t)
        elif txn["status"] == "info":
            if any(f == "append" and (key, val) in final_pos for f, key, val in txn["ops"]):
                committed.add(t)
    for (key, val), t in writer.items():
        status = history[t]["status"]
        if status == "ok" and (key, val) not in final_pos:
            note("lost-append", "txn %d's committed append %s to key %s is missing" % (t, val, key))
        if status == "fail" and (key, val) in final_pos:
            note("aborted-visible", "aborted txn %d's append %s to key %s is in the final list"
                 % (t, val, key))

    # the last value each transaction appended to each key
    last_append = {}
    for t in committed:
        for f, key, val in history[t]["ops"]:
            if f == "append":
                last_append[(t, key)] = val

    edges = defaultdict(set)     # t -> {u}: every dependency
    ww_wr = defaultdict(set)     # the ww and wr edges only
    ww_only = defaultdict(set)
    rw_edges = set()

    def add(a, b, kind):
        if a == b or a not in committed or b not in committed:
            return
        edges[a].add(b)
        if kind == "rw":
            rw_edges.add((a, b))
        else:
            ww_wr[a].add(b)
            if kind == "ww":
                ww_only[a].add(b)

    for key, lst in final.items():
        for i in range(len(lst) - 1):
            a, b = writer.get((key, lst[i])), writer.get((key, lst[i + 1]))
            if a is not None and b is not None:
                add(a, b, "ww")

    for t, txn in enumerate(history):
        if t not in committed:
            continue
        mine = defaultdict(list)  # this transaction's appends so far, by key
        for f, key, val in txn["ops"]:
            if f == "append":
                mine[key].append(val)
                continue
            lst = val
            flst = final.get(key, [])
            if lst != flst[:len(lst)]:
                note("not-prefix", "txn %d read key %s = %s, not a prefix of the final %s..."
                     % (t, key, lst[-5:], flst[:len(lst)][-5:]))
                continue
            if mine[key] and lst[-len(mine[key]):] != mine[key]:
                note("internal", "txn %d appended %s to key %s but then read ...%s"
                     % (t, key, mine[key], lst[-5:]))
            for v in lst:
                w = writer.get((key, v))
                if w is not None and history[w]["status"] == "fail":
                    note("G1a", "txn %d read key %s value %s of aborted txn %d" % (t, key, v, w))
            # the version read: its last value, minus this transaction's own
            seen_len = len(lst) - len(mine[key]) if mine[key] else len(lst)
            if seen_len > 0:
                w = writer.get((key, lst[seen_len - 1]))
                if w is not None and w != t:
                    add(w, t, "wr")
                    if last_append.get((w, key)) != lst[seen_len - 1]:
                        note("G1b", "txn %d read key %s ending at %s, an intermediate append of "
                             "txn %d" % (t, key, lst[seen_len - 1], w))
            if seen_len < len(flst):
                w = writer.get((key, flst[seen_len]))
                if w is not None:
                    add(t, w, "rw")

    nodes = list(committed)
    # G0: cycles of ww edges
    comp0 = _tarjan(nodes, ww_only)
    for a in ww_only:
        for b in ww_only[a]:
            if comp0.get(a) == comp0.get(b):
                note("G0", "ww cycle through txns %d -> %d" % (a, b))
    # G1c: cycles of ww + wr edges (not already G0)
    comp1 = _tarjan(nodes, ww_wr)
    for a in ww_wr:
        for b in ww_wr[a]:
            if comp1.get(a) == comp1.get(b) and not (b in ww_only[a] and comp0.get(a) == comp0.get(b)):
                note("G1c", "ww/wr cycle through txns %d -> %d" % (a, b))
    # G-single / G2: rw edges on a cycle of the full graph
    comp = _tarjan(nodes, edges)
    members = defaultdict(set)
    for n, c in comp.items():
        members[c].add(n)
    checks = 0
    for a, b in sorted(rw_edges):
        if comp.get(a) != comp.get(b):
            continue
        checks += 1
        if checks > max_cycle_checks:
            found["cycle-checks-capped"] = 1
            break
        if _reaches(b, a, ww_wr, members[comp[a]]):
            note("G-single", "txn %d rw-> txn %d, which reaches it back by ww/wr edges" % (a, b))
        else:
            note("G2", "txn %d rw-> txn %d on a cycle with further rw edges" % (a, b))

    stats = {
        "transactions": len(history),
        "committed": len(committed),
        "aborted": sum(1 for t in history if t["status"] == "fail"),
        "unknown": sum(1 for t in history if t["status"] == "info"),
        "reads": sum(1 for t in history for op in t["ops"] if op[0] == "r"),
        "appends": sum(1 for t in history for op in t["ops"] if op[0] == "append"),
    }
    return {"anomalies": dict(found), "examples": dict(examples), "stats": stats}


def forbidden_found(result, level):
    """The anomalies of `result` that `level` forbids, with their counts."""
    return {k: v for k, v in result["anomalies"].items() if k in FORBIDDEN[level]}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--uri", default="mongodb://127.0.0.1:27017/")
    ap.add_argument("--procs", type=int, default=8)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--keys", type=int, default=6)
    ap.add_argument("--level", choices=("snapshot", "serializable"), default="snapshot",
                    help="the readConcern level of the transactions (serializable: atomdb's "
                         "extension)")
    ap.add_argument("--naive", action="store_true",
                    help="run the operations without transactions (a variant that must break)")
    ap.add_argument("--seed", type=int)
    args = ap.parse_args(argv)
    history, final = run(args.uri, args.procs, args.seconds, args.keys, args.level, args.naive,
                         args.seed)
    result = check(history, final)
    print(json.dumps({"stats": result["stats"], "anomalies": result["anomalies"]}, indent=1))
    for kind, ex in sorted(result["examples"].items()):
        for e in ex[:2]:
            print("  %s: %s" % (kind, e))
    bad = forbidden_found(result, args.level)
    print("forbidden under %s: %s" % (args.level, bad or "none"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
