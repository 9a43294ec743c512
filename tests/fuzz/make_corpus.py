#!/usr/bin/python3
"""Writes the seed corpora of the libFuzzer targets (tests/fuzz/fuzz_*.c)
into OUT/<target>/ and the dictionaries into OUT/<target>.dict. Every seed
is generated here from atomdb's own test case files (tests/unit/cases/*.json)
and from lists below; nothing is copied from elsewhere. The `recovery` seeds
are real log segments and snapshots written by an atomdb binary (ATOMDB_BIN,
optional: without it the recovery seeds are built from the documented record
format alone).

usage: make_corpus.py OUT [ATOMDB_BIN]
"""
import hashlib
import json
import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "tests", "drivers"))

import bson  # noqa: E402
from bson import json_util  # noqa: E402

import wireproto  # noqa: E402


def _case_object(pairs):
    """Extended JSON as json_util reads it, except that a document holding
    $ref (a DBRef-shaped value or a partial one the matcher cases use) stays
    a plain document: json_util would turn it into a DBRef, or fail on one
    without $id."""
    doc = dict(pairs)
    if "$ref" in doc:
        return doc
    return json_util.object_hook(doc)


def load_cases(name):
    with open(os.path.join(REPO, "tests", "unit", "cases", name + ".json")) as f:
        return json.loads(f.read(), object_pairs_hook=_case_object)


def enc(doc):
    return bson.encode(doc)


class Corpus:
    def __init__(self, out, target):
        self.dir = os.path.join(out, target)
        os.makedirs(self.dir, exist_ok=True)
        self.n = 0

    def add(self, data):
        name = hashlib.sha1(data).hexdigest()
        with open(os.path.join(self.dir, name), "wb") as f:
            f.write(data)
        self.n += 1


FIXED_DOCS = [
    {"_id": 1, "a": 1, "b": "x", "c": [1, 2, {"d": 3}]},
    {"_id": 2, "a": [1, 2, 3], "b": {"c": "y"}, "s": "Hello"},
]


def seed_matcher(out):
    c = Corpus(out, "matcher")
    d = load_cases("matcher")
    for case in d["cases"]:
        try:
            c.add(enc(case["filter"]) + enc(case.get("doc", {})))
        except Exception:
            pass
    return c.n


def seed_updater(out):
    c = Corpus(out, "updater")
    for case in load_cases("updater")["cases"]:
        spec = {"u": case["update"]}
        if "arrayFilters" in case:
            spec["arrayFilters"] = case["arrayFilters"]
        try:
            c.add(enc(spec) + enc(case.get("doc", {})))
        except Exception:
            pass
    return c.n


def seed_pipeline(out):
    c = Corpus(out, "pipeline")
    for case in load_cases("pipeline")["cases"]:
        spec = {"pipeline": case["pipeline"]}
        if "let" in case:
            spec["let"] = case["let"]
        try:
            c.add(enc(spec) + b"".join(enc(x) for x in case.get("input", [])[:6]))
        except Exception:
            pass
    # expressions, each as an $addFields stage
    for case in load_cases("expr")["cases"]:
        try:
            c.add(enc({"pipeline": [{"$addFields": {"r": case["spec"]}}]})
                  + enc(case.get("input", {})))
        except Exception:
            pass
    return c.n


def seed_keystring(out):
    c = Corpus(out, "keystring")
    import json
    with open(os.path.join(REPO, "tests", "unit", "cases", "compare.json")) as f:
        raw = json.load(f)["groups"]
    groups = []
    for g in raw:  # values pymongo 3.11 cannot hold (dates past 9999) are left out
        vals = []
        for v in g:
            try:
                vals.append(json_util.loads(json.dumps({"v": v}))["v"])
            except (OverflowError, ValueError):
                pass
        groups.append(vals)
    flat = [v for g in groups for v in g]
    for i in range(0, len(flat), 12):
        c.add(enc({str(k): v for k, v in enumerate(flat[i:i + 12])}))
    for g in groups:
        c.add(enc({str(k): v for k, v in enumerate(g[:12])}))
    return c.n


COMMANDS = [
    [{"insert": "c", "documents": [{"_id": 1, "a": 1}, {"_id": 2, "a": [1, 2], "b": "x"}]},
     {"find": "c", "filter": {"a": {"$gte": 1}}, "sort": {"a": -1}, "projection": {"b": 1}}],
    [{"insert": "c", "documents": [{"a": i} for i in range(5)]},
     {"find": "c", "batchSize": 2}, {"getMore": bson.Int64(1), "collection": "c"}],
    [{"createIndexes": "c", "indexes": [{"key": {"a": 1}, "name": "a_1", "unique": True}]},
     {"insert": "c", "documents": [{"a": 1}, {"a": 1}]}, {"listIndexes": "c"}],
    [{"insert": "c", "documents": [{"_id": 1, "n": 0}]},
     {"update": "c", "updates": [{"q": {"_id": 1}, "u": {"$inc": {"n": 1}}, "upsert": True}]},
     {"findAndModify": "c", "query": {"_id": 1}, "update": {"$set": {"x": 1}}, "new": True}],
    [{"insert": "c", "documents": [{"a": 1}]},
     {"delete": "c", "deletes": [{"q": {"a": 1}, "limit": 0}]}, {"count": "c"}],
    [{"insert": "c", "documents": [{"g": 1, "v": 2}, {"g": 1, "v": 3}, {"g": 2, "v": 5}]},
     {"aggregate": "c", "pipeline": [{"$group": {"_id": "$g", "s": {"$sum": "$v"}}},
                                     {"$sort": {"_id": 1}}], "cursor": {}}],
    [{"aggregate": 1, "pipeline": [{"$documents": [{"a": 1}]}, {"$set": {"b": {"$add": ["$a", 1]}}}],
      "cursor": {}}],
    [{"insert": "c", "documents": [{"a": 1}]},
     {"aggregate": "c", "pipeline": [{"$merge": {"into": "d"}}], "cursor": {}},
     {"aggregate": "c", "pipeline": [{"$out": "e"}], "cursor": {}}],
    [{"create": "v", "viewOn": "c", "pipeline": [{"$match": {"a": 1}}]}, {"find": "v"}],
    [{"create": "capped", "capped": True, "size": 4096}, {"collMod": "capped"},
     {"renameCollection": "test.capped", "to": "test.other", "$db": "admin"}],
    [{"distinct": "c", "key": "a", "query": {}}, {"dbStats": 1}, {"collStats": "c"},
     {"validate": "c"}, {"dbHash": 1}],
    [{"insert": "c", "documents": [{"a": 1}],
      "lsid": {"id": bson.Binary(b"0123456789abcdef", 4)}, "txnNumber": bson.Int64(1),
      "startTransaction": True, "autocommit": False},
     {"find": "c", "lsid": {"id": bson.Binary(b"0123456789abcdef", 4)},
      "txnNumber": bson.Int64(1), "autocommit": False},
     {"commitTransaction": 1, "lsid": {"id": bson.Binary(b"0123456789abcdef", 4)},
      "txnNumber": bson.Int64(1), "autocommit": False, "$db": "admin"}],
    [{"acquireLock": "k", "ttlMS": 1000}, {"lockInfo": "k"}, {"listLocks": 1}, {"releaseLock": "k"}],
    [{"hello": 1}, {"isMaster": 1, "helloOk": True}, {"ping": 1}, {"buildInfo": 1},
     {"serverStatus": 1}, {"listCommands": 1}, {"hostInfo": 1}, {"connectionStatus": 1}],
    [{"getParameter": "*", "$db": "admin"}, {"listDatabases": 1, "$db": "admin"},
     {"getCmdLineOpts": 1, "$db": "admin"}, {"replSetGetStatus": 1, "$db": "admin"},
     {"getLog": "global", "$db": "admin"}],
    [{"explain": {"find": "c", "filter": {"a": 1}}, "verbosity": "executionStats"}],
    [{"startSession": 1}, {"endSessions": [], "$db": "admin"}, {"refreshSessions": []}],
    [{"fsync": 1, "lock": True, "$db": "admin"}, {"fsyncUnlock": 1, "$db": "admin"}],
    [{"insert": "c", "documents": [{"a": 1}], "writeConcern": {"w": "majority", "j": True}},
     {"find": "c", "readConcern": {"level": "snapshot"}, "maxTimeMS": 100}],
    [{"drop": "c"}, {"dropDatabase": 1}, {"listCollections": 1, "filter": {"name": "c"}}],
    [{"mapReduce": "c", "map": "function(){}", "reduce": "function(){}", "out": "x"}],
]


def seed_command(out):
    c = Corpus(out, "command")
    for seq in COMMANDS:
        c.add(b"".join(enc(x) for x in seq))
        for x in seq:
            c.add(enc(x))
    return c.n


def seed_frame(out):
    c = Corpus(out, "frame")
    cmds = [x for seq in COMMANDS for x in seq][:20]
    for i, cmd in enumerate(cmds):
        doc = dict(cmd)
        doc.setdefault("$db", "test")
        c.add(wireproto.op_msg(doc, request_id=i + 1))
    docs = [{"_id": i} for i in range(3)]
    c.add(wireproto.op_msg({"insert": "c", "$db": "test"},
                           extra_sections=[wireproto.section_kind1("documents", docs)],
                           request_id=99))
    c.add(wireproto.op_msg({"ping": 1, "$db": "admin"}, flags=1, request_id=100))
    c.add(wireproto.op_msg({"ping": 1, "$db": "admin"}, flags=2, request_id=101))
    c.add(wireproto.op_query("admin.$cmd", {"isMaster": 1}, request_id=102))
    c.add(wireproto.op_query("test.$cmd", {"$query": {"find": "c"}, "$readPreference":
                                            {"mode": "secondaryPreferred"}}, request_id=103))
    c.add(wireproto.op_query("test.c", {"a": 1}, request_id=104))
    inner = wireproto.op_msg({"find": "c", "filter": {"a": "x" * 64}, "$db": "test"},
                             request_id=105)
    for cid in (wireproto.COMPRESSOR_NOOP, wireproto.COMPRESSOR_SNAPPY,
                wireproto.COMPRESSOR_ZLIB, wireproto.COMPRESSOR_ZSTD):
        try:
            c.add(wireproto.op_compressed(inner, cid))
        except ImportError:
            pass
    return c.n


CONFIGS = [
    "net:\n  port: 27018\n  bindIp: 127.0.0.1\nstorage:\n  dbPath: /tmp/x\n",
    "storage:\n  journal:\n    enabled: true\nsystemLog:\n  destination: file\n"
    "  path: /tmp/atomdb.log\n  logAppend: true\n",
    "replication:\n  replSetName: rs0\nprocessManagement:\n  fork: false\n",
    "setParameter:\n  transactionLifetimeLimitSeconds: 30\n",
    "atomdb:\n  journal: fsync\n",
    "net: {port: 1, maxIncomingConnections: 10}\n",
    "security:\n  authorization: enabled\n",
    "- a\n- b\n",
    "",
]
ARGVS = [
    ["--port", "27018", "--dbpath", "/tmp/x", "--journal", "fsync"],
    ["--bind_ip", "localhost,127.0.0.1", "--ipv6", "--quiet", "-vvv"],
    ["--replSet", "rs0", "--setParameter", "transactionLifetimeLimitSeconds=5"],
    ["--logpath", "/tmp/l", "--logappend", "--fork", "--pidfilepath", "/tmp/p"],
    ["--version"], ["--help"], ["--nojournal"], ["--storageEngine", "inMemory"],
    ["--max-conns", "10", "--advertise", "h:1", "--txn-isolation", "snapshot"],
]


def seed_config(out):
    c = Corpus(out, "config")
    for text in CONFIGS:
        c.add(b"\x00" + text.encode())
    for argv in ARGVS:
        c.add(b"\x01" + b"\x00".join(a.encode() for a in argv))
    return c.n


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def seed_recovery(out, atomdb):
    """Real files: a workload against atomdb --journal fsync, then SIGKILL
    (the log segment as it is), then a clean stop (a snapshot)."""
    c = Corpus(out, "recovery")
    # from the format alone: a segment header and one record of one insert
    payload = enc({"ops": [{"op": "i", "db": "test", "c": "c", "doc": {"_id": 1}}]})
    head = b"ATOMDBW1" + b"\x00" * 8
    rec = struct.pack("<IIQ", len(payload), 0, 1) + payload
    for flags in (0, 1, 2, 3):
        c.add(bytes([flags]) + head + rec)
    c.add(b"\x01" + b"ATOMDBS1" + struct.pack("<Q", 0))
    if not atomdb:
        return c.n
    import pymongo
    tmp = tempfile.mkdtemp(prefix="atomdb-corpus-")
    p = None
    try:
        port = free_port()
        args = [atomdb, "--port", str(port), "--dbpath", tmp, "--journal", "fsync", "--quiet"]
        env = dict(os.environ, ASAN_OPTIONS="detect_leaks=0")
        p = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
        cl = pymongo.MongoClient("127.0.0.1", port, serverSelectionTimeoutMS=20000)
        db = cl.test
        db.c.insert_many([{"_id": i, "a": i, "s": "x" * i} for i in range(5)])
        db.c.create_index([("a", 1)], unique=True)
        db.c.update_one({"_id": 1}, {"$set": {"b.c": [1, 2]}, "$inc": {"a": 10}})
        db.c.replace_one({"_id": 2}, {"z": 1})
        db.c.delete_one({"_id": 3})
        db.create_collection("v", viewOn="c", pipeline=[{"$match": {"a": 1}}])
        db.d.insert_one({"_id": "k"})
        db.d.drop()
        cl.close()
        p.send_signal(signal.SIGKILL)
        p.wait()
        for name in sorted(os.listdir(tmp)):
            if name.startswith("wal-"):
                data = open(os.path.join(tmp, name), "rb").read()
                for flags in (0, 2):
                    c.add(bytes([flags]) + data)
                c.add(b"\x00" + data[:len(data) - 7])  # a torn tail
        p = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
        cl = pymongo.MongoClient("127.0.0.1", port, serverSelectionTimeoutMS=20000)
        cl.test.c.insert_one({"_id": 9, "a": 99})
        cl.close()
        p.send_signal(signal.SIGTERM)
        p.wait(timeout=60)
        for name in sorted(os.listdir(tmp)):
            if name.startswith("snapshot-"):
                data = open(os.path.join(tmp, name), "rb").read()
                c.add(b"\x00" + data)
                c.add(b"\x01" + data)
    finally:
        if p and p.poll() is None:
            p.kill()
            p.wait()
        shutil.rmtree(tmp, ignore_errors=True)
    return c.n


def write_dicts(out):
    """Command and operator names as libFuzzer dictionaries."""
    names = set()
    for root, _, files in os.walk(os.path.join(REPO, "src")):
        for f in files:
            if f.endswith(".c"):
                text = open(os.path.join(root, f), errors="replace").read()
                names.update(re.findall(r'"(\$[A-Za-z][A-Za-z0-9]*)"', text))
    cmds = set(re.findall(r'\{"([A-Za-z]+)", cmd_',
                          open(os.path.join(REPO, "src", "cmd", "dispatch.c")).read()))
    fields = ["filter", "documents", "updates", "deletes", "q", "u", "upsert", "multi",
              "pipeline", "cursor", "batchSize", "sort", "projection", "limit", "skip",
              "arrayFilters", "let", "collation", "hint", "lsid", "txnNumber", "autocommit",
              "startTransaction", "writeConcern", "readConcern", "indexes", "key", "name",
              "unique", "partialFilterExpression", "expireAfterSeconds", "viewOn", "_id"]
    lines = ['"%s"' % n for n in sorted(names)]
    for k in sorted(cmds) + fields:
        lines.append('"%s"' % k)
        lines.append('"%s\\x00"' % k)  # as a BSON key (NUL-terminated)
    text = "\n".join(lines) + "\n"
    for t in ("command", "matcher", "updater", "pipeline", "frame"):
        with open(os.path.join(out, t + ".dict"), "w") as f:
            f.write(text)
    with open(os.path.join(out, "config.dict"), "w") as f:
        for w in ["net:", "storage:", "systemLog:", "replication:", "setParameter:",
                  "security:", "processManagement:", "operationProfiling:", "atomdb:",
                  "port:", "bindIp:", "dbPath:", "journal:", "enabled:", "--port", "--dbpath",
                  "--config", "--journal", "--bind_ip", "--setParameter", "--replSet"]:
            f.write('"%s"\n' % w)


def main():
    out = sys.argv[1]
    atomdb = sys.argv[2] if len(sys.argv) > 2 else None
    os.makedirs(out, exist_ok=True)
    counts = {
        "frame": seed_frame(out), "command": seed_command(out), "matcher": seed_matcher(out),
        "updater": seed_updater(out), "pipeline": seed_pipeline(out),
        "keystring": seed_keystring(out), "config": seed_config(out),
        "recovery": seed_recovery(out, atomdb),
    }
    write_dicts(out)
    for t, n in counts.items():
        print("corpus %s: %d seeds" % (t, n))


if __name__ == "__main__":
    main()
