"""MongoDB's monitoring tools against atomdb (issue 22): the serverStatus
sections mongostat reads, with mongod's names and types; the `top` command
mongotop reads; the `profile` command, --slowms and the "Slow query" log
line; and mongostat/mongotop themselves, built from mongo-tools' sources
(a pinned tag, offline, with Debian's Go and the vendored modules) when
ATOMDB_MONGO_TOOLS_SRC names a checkout (docs/operations.md).
"""

import json
import os
import shutil
import subprocess
from pathlib import Path

import pymongo
import pytest
from bson.int64 import Int64
from pymongo.errors import OperationFailure

from atomdb_testlib import require_installed

INT_TYPES = (int, Int64)


def client(server):
    return pymongo.MongoClient(server.uri("directConnection=true"), serverSelectionTimeoutMS=10000)


# ---- serverStatus: what mongostat's status.ServerStatus decodes ----

# (section, field, accepted Python types): mongostat 100.8.0's
# mongostat/status/server_status.go decodes these into int64, string,
# time.Time or bool; a missing section is a nil pointer it dereferences.
MONGOSTAT_FIELDS = [
    (None, "host", (str,)),
    (None, "version", (str,)),
    (None, "process", (str,)),
    (None, "pid", INT_TYPES),
    (None, "uptime", (float,) + INT_TYPES),
    (None, "uptimeMillis", INT_TYPES),
    (None, "uptimeEstimate", INT_TYPES),
    ("connections", "current", INT_TYPES),
    ("connections", "available", INT_TYPES),
    ("connections", "totalCreated", INT_TYPES),
    ("network", "bytesIn", INT_TYPES),
    ("network", "bytesOut", INT_TYPES),
    ("network", "numRequests", INT_TYPES),
    ("opcounters", "insert", INT_TYPES),
    ("opcounters", "query", INT_TYPES),
    ("opcounters", "update", INT_TYPES),
    ("opcounters", "delete", INT_TYPES),
    ("opcounters", "getmore", INT_TYPES),
    ("opcounters", "command", INT_TYPES),
    ("opcountersRepl", "insert", INT_TYPES),
    ("opcountersRepl", "command", INT_TYPES),
    ("mem", "bits", INT_TYPES),
    ("mem", "resident", INT_TYPES),
    ("mem", "virtual", INT_TYPES),
    ("mem", "supported", (bool,)),
    ("globalLock", "totalTime", INT_TYPES),
    ("asserts", "regular", INT_TYPES),
    ("asserts", "warning", INT_TYPES),
    ("asserts", "msg", INT_TYPES),
    ("asserts", "user", INT_TYPES),
    ("asserts", "rollovers", INT_TYPES),
    ("extra_info", "page_faults", INT_TYPES),
    ("repl", "setName", (str,)),
    ("repl", "ismaster", (bool,)),
    ("repl", "secondary", (bool,)),
    ("repl", "me", (str,)),
    ("storageEngine", "name", (str,)),
]


@pytest.mark.parametrize("section,field,types", MONGOSTAT_FIELDS,
                         ids=["%s.%s" % (s or "", f) for s, f, _ in MONGOSTAT_FIELDS])
def test_server_status_has_what_mongostat_reads(atomdb_module, section, field, types):
    status = client(atomdb_module).admin.command("serverStatus")
    doc = status[section] if section else status
    assert field in doc, "serverStatus%s lacks %s" % ("." + section if section else "", field)
    assert isinstance(doc[field], types) and not (bool not in types and isinstance(doc[field], bool)), \
        "%s.%s is %r, a %s" % (section, field, doc[field], type(doc[field]).__name__)


def test_server_status_global_lock_queues_are_documents(atomdb_module):
    gl = client(atomdb_module).admin.command("serverStatus")["globalLock"]
    for part in ("currentQueue", "activeClients"):
        for k in ("total", "readers", "writers"):
            assert isinstance(gl[part][k], INT_TYPES), "globalLock.%s.%s is an integer" % (part, k)
    assert isinstance(client(atomdb_module).admin.command("serverStatus")["localTime"], object)


def test_network_counters_count_requests_and_bytes(atomdb_module):
    c = client(atomdb_module)
    before = c.admin.command("serverStatus")["network"]
    for _ in range(20):
        c.admin.command("ping")
    after = c.admin.command("serverStatus")["network"]
    # 20 pings plus the serverStatus that reads `after` (other connections,
    # the driver's monitor, may add hellos: hence at least)
    assert after["numRequests"] - before["numRequests"] >= 21, "every request is counted"
    assert after["bytesIn"] - before["bytesIn"] >= 20 * 40, "request bytes are counted"
    assert after["bytesOut"] - before["bytesOut"] >= 20 * 40, "reply bytes are counted"


def test_failed_commands_count_as_user_asserts(atomdb_module):
    c = client(atomdb_module)
    before = c.admin.command("serverStatus")["asserts"]["user"]
    for _ in range(3):
        with pytest.raises(OperationFailure):
            c.admin.command("noSuchCommandAtAll")
    after = c.admin.command("serverStatus")["asserts"]["user"]
    assert after - before == 3, "each ok: 0 reply is one user assert"


def test_global_lock_queue_counts_a_waiting_transaction(atomdb):
    c = client(atomdb)
    coll = c.t.q
    coll.insert_one({"_id": 1, "n": 0})
    s1, s2 = c.start_session(), c.start_session()
    s1.start_transaction()
    coll.update_one({"_id": 1}, {"$inc": {"n": 1}}, session=s1)
    c.admin.command("setParameter", 1, maxTransactionLockRequestTimeoutMillis=5000)
    import threading
    done = threading.Event()

    def waiter():
        s2.start_transaction()
        try:
            coll.update_one({"_id": 1}, {"$inc": {"n": 1}}, session=s2)
            s2.commit_transaction()
        finally:
            done.set()

    t = threading.Thread(target=waiter)
    t.start()
    seen = 0
    for _ in range(200):
        seen = c.admin.command("serverStatus")["globalLock"]["currentQueue"]["writers"]
        if seen == 1:
            break
        done.wait(0.02)
    s1.commit_transaction()
    t.join(10)
    assert seen == 1, "the parked transaction shows in globalLock.currentQueue.writers"
    assert c.admin.command("serverStatus")["globalLock"]["currentQueue"]["writers"] == 0, \
        "the queue is empty once the lock is free"
    assert coll.find_one({"_id": 1})["n"] == 2


# ---- top: what mongotop reads ----

def test_top_counts_operations_per_namespace(atomdb):
    c = client(atomdb)
    db = c.shop
    db.items.insert_one({"_id": 1})
    db.items.insert_one({"_id": 2})
    db.items.update_one({"_id": 1}, {"$set": {"a": 1}})
    db.items.delete_one({"_id": 2})
    list(db.items.find({}))
    db.other.insert_one({"x": 1})
    top = c.admin.command("top")
    totals = top["totals"]
    assert totals["note"] == "all times in microseconds", "mongod's note comes first"
    items = totals["shop.items"]
    assert items["insert"]["count"] == 2, "two insert commands"
    assert items["update"]["count"] == 1
    assert items["remove"]["count"] == 1
    assert items["queries"]["count"] == 1
    assert items["writeLock"]["count"] == 4, "inserts, update, delete are writes"
    assert items["readLock"]["count"] == 1, "the find is a read"
    assert items["total"]["count"] == 5
    for part in ("total", "readLock", "writeLock", "queries", "getmore", "insert", "update",
                 "remove", "commands"):
        assert isinstance(items[part]["time"], Int64) and isinstance(items[part]["count"], Int64), \
            "%s has time and count as NumberLong" % part
    assert items["total"]["time"] == items["readLock"]["time"] + items["writeLock"]["time"]
    assert totals["shop.other"]["insert"]["count"] == 1
    assert "admin.$cmd" not in totals, "commands on no collection are not in top"


def test_top_runs_only_against_admin(atomdb_module):
    with pytest.raises(OperationFailure) as e:
        client(atomdb_module).shop.command("top")
    assert e.value.code == 13, "top is an admin command (Unauthorized, as mongod)"


# ---- profile, --slowms and the slow-operation log ----

def slow_lines(server):
    lines = []
    for line in server.log().splitlines():
        if '"Slow query"' in line:
            lines.append(json.loads(line))
    return lines


def test_profile_reads_and_sets_slowms_and_sample_rate(atomdb):
    db = client(atomdb).shop
    r = db.command("profile", -1)
    assert (r["was"], r["slowms"], r["sampleRate"]) == (0, 100, 1.0), "mongod's defaults"
    r = db.command("profile", 0, slowms=20, sampleRate=0.5)
    assert (r["was"], r["slowms"], r["sampleRate"]) == (0, 100, 1.0), "the reply shows the old values"
    r = db.command("profile", -1)
    assert (r["slowms"], r["sampleRate"]) == (20, 0.5), "the new values stay"
    r = db.command("profile", -1, slowms=30)
    assert r["slowms"] == 20 and db.command("profile", -1)["slowms"] == 30, \
        "as mongod, -1 with slowms sets it"
    changed = [json.loads(l) for l in atomdb.log().splitlines() if '"id":48742' in l]
    assert changed and changed[-1]["attr"]["from"]["slowms"] == 20 and \
        changed[-1]["attr"]["to"]["slowms"] == 30, "mongod's Profiler settings changed line"


@pytest.mark.parametrize("cmd,code,named", [
    ({"profile": 1}, 20, "system.profile"),
    ({"profile": 2}, 20, "system.profile"),
    ({"profile": 0, "filter": {"millis": {"$gt": 1}}}, 20, "filter"),
    ({"profile": 3}, 2, "profiling level"),
    ({"profile": "x"}, 14, "profile"),
    ({"profile": 0, "sampleRate": 2.0}, 2, "sampleRate"),
    ({"profile": 0, "sampleRate": "all"}, 14, "sampleRate"),
    ({"profile": 0, "slowms": "x"}, 14, "slowms"),
    ({"profile": 0, "bogus": 1}, 40415, "bogus"),
])
def test_profile_refuses_what_atomdb_cannot_do(atomdb_module, cmd, code, named):
    from bson.son import SON
    db = client(atomdb_module).shop
    with pytest.raises(OperationFailure) as e:
        db.command(SON(cmd))
    assert e.value.code == code and named in str(e.value), str(e.value)
    assert db.command("profile", -1)["slowms"] == 100, "a refused profile changes nothing"


def test_slow_query_line_has_mongods_attributes(atomdb_factory):
    server = atomdb_factory("--slowms", "-1")
    c = client(server)
    coll = c.shop.items
    coll.insert_many([{"_id": i, "k": i % 7} for i in range(50)])
    coll.create_index("k")
    assert len(list(coll.find({"k": 3}).comment("find-by-k"))) == 7
    assert len(list(coll.find({"z": 1}).comment("find-scan"))) == 0
    finds = {l["attr"]["command"].get("comment"): l for l in slow_lines(server)
             if l["attr"].get("command", {}).get("find") == "items"}
    ix = finds["find-by-k"]
    assert ix["id"] == 51803 and ix["c"] == "COMMAND" and ix["msg"] == "Slow query"
    a = ix["attr"]
    assert a["type"] == "command" and a["ns"] == "shop.items"
    assert a["planSummary"] == "IXSCAN { k: 1 }", a
    assert a["keysExamined"] == 7 and a["docsExamined"] == 7 and a["nreturned"] == 7, a
    assert isinstance(a["durationMillis"], int) and a["reslen"] > 0
    assert "atomdbWaitMillis" in a, "atomdb's lock and lease wait"
    scan = finds["find-scan"]["attr"]
    assert scan["planSummary"] == "COLLSCAN" and scan["docsExamined"] == 50 and scan["nreturned"] == 0


def test_failed_slow_command_says_its_error(atomdb_factory):
    server = atomdb_factory("--slowms", "-1")
    with pytest.raises(OperationFailure):
        client(server).shop.command("find", "items", filter={"$bad": 1})
    bad = [l for l in slow_lines(server) if l["attr"].get("command", {}).get("find") == "items"]
    assert bad and bad[-1]["attr"]["ok"] == 0 and bad[-1]["attr"]["errName"] == "BadValue", bad


def test_default_slowms_logs_no_fast_query(atomdb):
    c = client(atomdb)
    c.shop.items.insert_one({"a": 1})
    c.shop.items.find_one({"a": 1})
    assert not [l for l in slow_lines(atomdb) if l["attr"].get("ns") == "shop.items"], \
        "a query well under 100 ms is not logged"


def test_sample_rate_zero_logs_nothing(atomdb_factory):
    server = atomdb_factory("--slowms", "-1", "--slowOpSampleRate", "0")
    c = client(server)
    for _ in range(20):
        c.shop.items.find_one({"a": 1})
    assert not [l for l in slow_lines(server) if l["attr"].get("ns") == "shop.items"]


def test_profile_command_turns_on_the_slow_log(atomdb):
    c = client(atomdb)
    c.shop.command("profile", 0, slowms=-1)
    c.shop.items.find_one({"after": 1})
    assert [l for l in slow_lines(atomdb)
            if l["attr"].get("command", {}).get("filter") == {"after": 1}], "logged after profile"


# ---- mongostat and mongotop themselves ----

@pytest.fixture(scope="module")
def mongo_tools(tmp_path_factory):
    """mongostat and mongotop built from ATOMDB_MONGO_TOOLS_SRC (a mongo-tools
    checkout; docs/operations.md says which tag) with Debian's Go, offline."""
    src = os.environ.get("ATOMDB_MONGO_TOOLS_SRC")
    if not src:
        pytest.skip("ATOMDB_MONGO_TOOLS_SRC is not set: no mongo-tools sources to build "
                    "mongostat and mongotop from (docs/operations.md)")
    require_installed(shutil.which("go"), "go (golang-go)")
    out = tmp_path_factory.mktemp("mongo-tools")
    script = Path(__file__).resolve().parents[2] / "scripts" / "build-mongo-tools.sh"
    subprocess.run(["bash", str(script), src, str(out)], check=True, timeout=1200)
    return out


def test_mongostat_shows_live_rows(atomdb, mongo_tools):
    c = client(atomdb)
    c.shop.items.insert_one({"a": 1})
    r = subprocess.run([str(mongo_tools / "mongostat"), "--host", atomdb.address, "-n", "3",
                        "--noheaders", "--json", "1"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr + r.stdout
    rows = [json.loads(l) for l in r.stdout.splitlines() if l.strip()]
    assert len(rows) == 3, r.stdout
    row = rows[-1][atomdb.address]
    assert row["repl"] == "PRI" and row["set"] == "rs0", row
    assert int(row["conn"]) >= 1 and row["net_in"] and row["net_out"], row
    assert row["qrw"] == "0|0", row


def test_mongotop_shows_the_busy_namespace(atomdb, mongo_tools):
    c = client(atomdb)
    proc = subprocess.Popen([str(mongo_tools / "mongotop"), "--host", atomdb.address, "-n", "2",
                             "--json", "1"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        import time
        deadline = time.monotonic() + 30
        while proc.poll() is None and time.monotonic() < deadline:
            c.shop.busy.insert_many([{"i": i} for i in range(200)])
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err + out
    rows = [json.loads(l) for l in out.splitlines() if l.strip()]
    assert rows and any("shop.busy" in r["totals"] for r in rows), out
    busy = [r["totals"]["shop.busy"] for r in rows if "shop.busy" in r["totals"]][-1]
    assert busy["write"]["count"] > 0, busy
