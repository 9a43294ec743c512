"""One writer process of the kill -9 test; it lives for all the rounds.

    writer.py WRITER_ID SEED [j]

Reads one command per round on stdin:

    round URI ROUND LOG_FILE MAX_SECONDS

connects to URI, prints "ready", then writes as fast as it can until the
connection fails (the server was killed) or MAX_SECONDS pass, and prints
"done CODE" (0: the connection failed, as expected; 2: MAX_SECONDS passed
without a failure; 3: an unexpected error, whose traceback goes to stderr).
Exits at end of input. With "j" every write asks for j:true.

Before sending each write it appends "B <seq> <json op>" to LOG_FILE, and once
the server acknowledged it "A <seq>"; both lines are flushed before the next
step, so the log tells which writes were acknowledged and which one (at most)
was in flight when the server died.

Ops (collection crash.docs unless noted):
  insert   {_id: "i-R-W-N", w, n, pad}  (R round, W writer, N sequence number)
  many     insert_many of {_id: "m-R-W-N-K", w, n, k} for K in 0..2
  upsert   update_one({_id: "u-W-K"}, {$set: {v: N}}, upsert) with K in 0..19,
           so later upserts (also of later rounds) overwrite earlier ones
  inc      update_one({_id: "cK"}, {$inc: {n: AMT}}, upsert) on crash.counters
  fam      find_one_and_update({_id: "cK"}, {$inc: {n: AMT}}, upsert, new)
"""

import json
import random
import sys
import time
import traceback

from pymongo import MongoClient, ReturnDocument, WriteConcern
from pymongo.errors import ConnectionFailure

COUNTERS = 4
UPSERT_KEYS = 20


def one_round(wid, rng, journaled, uri, rnd, log_path, max_s):
    client = MongoClient(uri, serverSelectionTimeoutMS=500, connectTimeoutMS=2000,
                         socketTimeoutMS=10000)
    try:
        db = client.crash
        wc = WriteConcern(w=1, j=True) if journaled else WriteConcern(w=1)
        docs = db.get_collection("docs", write_concern=wc)
        counters = db.get_collection("counters", write_concern=wc)
        for _ in range(20):
            try:
                client.admin.command("ping")
                break
            except ConnectionFailure:
                time.sleep(0.1)
        with open(log_path, "a") as log:
            print("ready", flush=True)
            return write_until_failure(wid, rng, rnd, docs, counters, log, float(max_s))
    finally:
        client.close()


def write_until_failure(wid, rng, rnd, docs, counters, log, max_s):
    deadline = time.monotonic() + max_s
    seq = 0
    try:
        while time.monotonic() < deadline:
            seq += 1
            r = rng.random()
            if r < 0.30:
                op = {"op": "insert", "id": "i-%s-%d-%d" % (rnd, wid, seq), "n": seq,
                      "pad": rng.randrange(50, 600)}
            elif r < 0.40:
                op = {"op": "many", "ids": ["m-%s-%d-%d-%d" % (rnd, wid, seq, k) for k in range(3)], "n": seq}
            elif r < 0.60:
                op = {"op": "upsert", "id": "u-%d-%d" % (wid, rng.randrange(UPSERT_KEYS)), "v": seq}
            elif r < 0.90:
                op = {"op": "inc", "id": "c%d" % rng.randrange(COUNTERS), "amt": rng.randrange(1, 4)}
            else:
                op = {"op": "fam", "id": "c%d" % rng.randrange(COUNTERS), "amt": rng.randrange(1, 4)}
            log.write("B %d %s\n" % (seq, json.dumps(op)))
            log.flush()
            kind = op["op"]
            if kind == "insert":
                docs.insert_one({"_id": op["id"], "w": wid, "n": seq, "pad": "x" * op["pad"]})
            elif kind == "many":
                docs.insert_many([{"_id": i, "w": wid, "n": seq, "k": k}
                                  for k, i in enumerate(op["ids"])])
            elif kind == "upsert":
                docs.update_one({"_id": op["id"]}, {"$set": {"v": seq}}, upsert=True)
            elif kind == "inc":
                counters.update_one({"_id": op["id"]}, {"$inc": {"n": op["amt"]}}, upsert=True)
            else:
                after = counters.find_one_and_update(
                    {"_id": op["id"]}, {"$inc": {"n": op["amt"]}}, upsert=True,
                    return_document=ReturnDocument.AFTER)
                if after is None or after.get("n", 0) < op["amt"]:
                    raise AssertionError("findAndModify new:true returned %r for %r" % (after, op))
            log.write("A %d\n" % seq)
            log.flush()
    except ConnectionFailure as e:
        log.write("X connection failed: %s\n" % str(e).replace("\n", " "))
        return 0
    except Exception:  # anything else is a finding: report it
        traceback.print_exc()
        sys.stderr.flush()
        log.write("E unexpected error\n")
        return 3
    return 2


def main():
    wid = int(sys.argv[1])
    rng = random.Random(int(sys.argv[2]))
    journaled = len(sys.argv) > 3 and sys.argv[3] == "j"
    for line in sys.stdin:
        parts = line.split()
        if not parts:
            continue
        assert parts[0] == "round", "unknown command %r" % line
        try:
            code = one_round(wid, rng, journaled, *parts[1:])
        except Exception:
            traceback.print_exc()
            sys.stderr.flush()
            code = 3
        print("done %d" % code, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
