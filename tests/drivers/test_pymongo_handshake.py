"""pymongo 3.11 (Debian's python3-pymongo) against a real atomdb: the
handshake, admin commands and compression, in replica-set discovery mode
(replicaSet=rs0) and with directConnection=true."""

import datetime
import re
import threading
import time

import pytest
from bson.int64 import Int64
from bson.objectid import ObjectId
from bson.son import SON
from pymongo import MongoClient
from pymongo.errors import AutoReconnect, ConnectionFailure, OperationFailure

from atomdb_testlib import require_installed, without_cluster_time

MODES = ["replicaSet=rs0", "directConnection=true"]


def make_client(server, options, **kw):
    kw.setdefault("serverSelectionTimeoutMS", 10000)
    kw.setdefault("socketTimeoutMS", 20000)
    kw.setdefault("connectTimeoutMS", 10000)
    return MongoClient(server.uri(options), **kw)


@pytest.fixture(scope="module", params=MODES)
def mode(request):
    return request.param


@pytest.fixture(scope="module")
def client(atomdb_module, mode):
    c = make_client(atomdb_module, mode)
    yield c
    c.close()


def topology_type(client):
    return client._topology.description.topology_type_name


# --- connecting ------------------------------------------------------------

def test_client_sees_the_expected_topology(client, mode, atomdb_module):
    client.admin.command("ping")
    want = "ReplicaSetWithPrimary" if mode.startswith("replicaSet") else "Single"
    assert topology_type(client) == want, "pymongo with %s sees topology %s" % (mode, want)
    assert client.address == (atomdb_module.host, atomdb_module.port), \
        "pymongo is connected to the server's address"
    assert client.is_primary, "pymongo sees the server as a writable primary"


def test_ping_answers_ok(client):
    assert without_cluster_time(client.admin.command("ping")) == {"ok": 1.0}, \
        "ping answers {ok: 1} plus the cluster time, as a replica-set member"


def test_plain_uri_without_options_connects(atomdb_module):
    # pymongo 3.11 treats a single seed without replicaSet as a direct connection.
    c = make_client(atomdb_module, "")
    try:
        assert c.admin.command("ping")["ok"] == 1, "ping works with a plain mongodb://host:port URI"
    finally:
        c.close()


# --- buildInfo / hello -------------------------------------------------------

def test_build_info_reports_mongodb_7_0_version(client):
    info = client.admin.command("buildInfo")
    assert re.fullmatch(r"7\.0\.\d+", info.get("version", "")), \
        "buildInfo.version is a MongoDB 7.0.x string (got %r)" % info.get("version")
    va = info.get("versionArray")
    assert isinstance(va, list) and len(va) == 4 and all(isinstance(x, int) for x in va), \
        "buildInfo.versionArray is four ints (got %r)" % va
    assert va[:3] == [int(x) for x in info["version"].split(".")], \
        "versionArray agrees with version"
    own = [k for k in info if "atomdb" in k.lower()]
    assert own and isinstance(info[own[0]], str) and info[own[0]], \
        "buildInfo carries atomdb's own version under its own key (keys: %r)" % list(info)
    assert info.get("maxBsonObjectSize") == 16777216, "buildInfo.maxBsonObjectSize is 16 MiB"


def test_hello_describes_a_single_node_replica_set_primary(client, atomdb_module):
    me = atomdb_module.address
    h = client.admin.command("hello")
    assert h.get("ok") == 1, "hello answers ok:1"
    assert h.get("setName") == "rs0", "hello.setName is rs0 (got %r)" % h.get("setName")
    assert h.get("hosts") == [me], "hello.hosts lists only the advertised address (got %r)" % h.get("hosts")
    assert h.get("primary") == me, "hello.primary is the advertised address (got %r)" % h.get("primary")
    assert h.get("me") == me, "hello.me is the advertised address (got %r)" % h.get("me")
    assert h.get("isWritablePrimary") is True, "hello.isWritablePrimary is true"
    assert h.get("secondary") is False, "hello.secondary is false"
    assert h.get("maxWireVersion") == 21, "hello.maxWireVersion is 21 (got %r)" % h.get("maxWireVersion")
    assert h.get("minWireVersion") == 0, "hello.minWireVersion is 0 (got %r)" % h.get("minWireVersion")
    assert h.get("logicalSessionTimeoutMinutes") == 30, "hello.logicalSessionTimeoutMinutes is 30"
    assert isinstance(h.get("connectionId"), int) and h["connectionId"] > 0, \
        "hello.connectionId is a positive integer (got %r)" % h.get("connectionId")
    assert h.get("maxBsonObjectSize") == 16777216, "hello.maxBsonObjectSize is 16 MiB"
    assert h.get("maxMessageSizeBytes") == 48000000, "hello.maxMessageSizeBytes is 48,000,000"
    assert h.get("maxWriteBatchSize") == 100000, "hello.maxWriteBatchSize is 100,000"
    assert isinstance(h.get("localTime"), datetime.datetime), "hello.localTime is a date"
    assert isinstance(h.get("setVersion"), int), "hello.setVersion is an integer"
    assert isinstance(h.get("electionId"), ObjectId), "hello.electionId is an ObjectId"
    tv = h.get("topologyVersion")
    assert isinstance(tv, dict) and isinstance(tv.get("processId"), ObjectId), \
        "hello.topologyVersion.processId is an ObjectId (got %r)" % tv
    assert isinstance(tv.get("counter"), int), "hello.topologyVersion.counter is an integer"


def test_is_master_legacy_names_answer_ismaster_true(client):
    for name in ("isMaster", "ismaster"):
        h = client.admin.command(name)
        assert h.get("ismaster") is True, "%s answers ismaster: true (got %r)" % (name, h.get("ismaster"))
        assert h.get("setName") == "rs0", "%s answers setName rs0" % name


def test_hello_echoes_hello_ok(client):
    h = client.admin.command(SON([("hello", 1), ("helloOk", True)]))
    assert h.get("helloOk") is True, "hello with helloOk: true answers helloOk: true"


def test_connection_ids_differ_between_connections(atomdb_module, mode):
    a = make_client(atomdb_module, mode)
    b = make_client(atomdb_module, mode)
    try:
        ida = a.admin.command("hello")["connectionId"]
        idb = b.admin.command("hello")["connectionId"]
        assert ida != idb, "two connections get different connectionIds (%r, %r)" % (ida, idb)
    finally:
        a.close()
        b.close()


def test_awaitable_hello_waits_about_max_await_time_ms(client):
    tv = client.admin.command("hello")["topologyVersion"]
    cmd = SON([("hello", 1), ("topologyVersion", tv), ("maxAwaitTimeMS", Int64(1500))])
    t0 = time.monotonic()
    h = client.admin.command(cmd)
    waited = time.monotonic() - t0
    assert h.get("ok") == 1 and h.get("isWritablePrimary") is True, "awaitable hello answers a full hello"
    assert 1.0 <= waited <= 10.0, \
        "hello with the current topologyVersion waits ~maxAwaitTimeMS=1500 (waited %.2fs)" % waited
    assert h.get("topologyVersion") == tv, "topologyVersion unchanged when nothing changed"


def test_awaitable_hello_with_other_process_id_answers_at_once(client):
    tv = client.admin.command("hello")["topologyVersion"]
    other = {"processId": ObjectId(), "counter": Int64(0)}
    assert other["processId"] != tv["processId"], "test setup: a different processId"
    cmd = SON([("hello", 1), ("topologyVersion", other), ("maxAwaitTimeMS", Int64(5000))])
    t0 = time.monotonic()
    h = client.admin.command(cmd)
    waited = time.monotonic() - t0
    assert h.get("ok") == 1, "awaitable hello with a stale processId answers ok:1"
    assert waited < 4.0, "a topologyVersion from another process is answered without waiting (%.2fs)" % waited


def test_other_clients_are_served_while_a_hello_awaits(atomdb_module, mode):
    waiter = make_client(atomdb_module, mode)
    other = make_client(atomdb_module, mode)
    try:
        tv = waiter.admin.command("hello")["topologyVersion"]
        other.admin.command("ping")
        done = threading.Event()
        result = {}

        def await_hello():
            try:
                result["hello"] = waiter.admin.command(
                    SON([("hello", 1), ("topologyVersion", tv), ("maxAwaitTimeMS", Int64(3000))]))
            finally:
                done.set()

        t = threading.Thread(target=await_hello)
        t.start()
        time.sleep(0.3)
        assert other.admin.command("ping")["ok"] == 1, "another client's ping is answered"
        assert not done.is_set(), "the ping was answered while the awaitable hello was still waiting"
        t.join(15)
        assert result.get("hello", {}).get("ok") == 1, "the awaitable hello answered afterwards"
    finally:
        waiter.close()
        other.close()


# --- errors ------------------------------------------------------------------

def test_unknown_command_is_command_not_found(client):
    with pytest.raises(OperationFailure) as ei:
        client.admin.command("nope")
    e = ei.value
    assert e.code == 59, "unknown command fails with code 59 (got %r)" % e.code
    assert e.details.get("codeName") == "CommandNotFound", "codeName is CommandNotFound (got %r)" % e.details
    assert e.details.get("errmsg") == "no such command: 'nope'", \
        "errmsg is mongod's \"no such command: 'nope'\" (got %r)" % e.details.get("errmsg")
    assert e.details.get("ok") == 0, "error reply has ok: 0"


def test_unknown_command_on_any_database_is_command_not_found(client):
    with pytest.raises(OperationFailure) as ei:
        client.get_database("somedb").command("frobnicate")
    assert ei.value.code == 59, "unknown command on another db fails with 59"
    assert ei.value.details.get("errmsg") == "no such command: 'frobnicate'", "errmsg names the command"


def test_list_collections_with_non_document_filter_is_type_mismatch(client):
    with pytest.raises(OperationFailure) as ei:
        client.get_database("t_errors").command(SON([("listCollections", 1), ("filter", 5)]))
    assert ei.value.code == 14, "listCollections filter: 5 fails with TypeMismatch 14 (got %r)" % ei.value.details
    assert ei.value.details.get("codeName") == "TypeMismatch", "codeName TypeMismatch"


# --- admin commands ------------------------------------------------------------

def test_get_parameter_feature_compatibility_version(client):
    r = client.admin.command(SON([("getParameter", 1), ("featureCompatibilityVersion", 1)]))
    fcv = r.get("featureCompatibilityVersion")
    assert isinstance(fcv, dict) and fcv.get("version") == "7.0", \
        "featureCompatibilityVersion is {version: '7.0'} (got %r)" % fcv


def test_get_parameter_star_lists_all_parameters(client):
    r = client.admin.command(SON([("getParameter", "*")]))
    assert r.get("ok") == 1, "getParameter '*' answers ok:1"
    assert "featureCompatibilityVersion" in r, "getParameter '*' includes featureCompatibilityVersion"
    assert len(r) > 3, "getParameter '*' lists several parameters (got %r)" % list(r)


def test_get_parameter_unknown_name_fails(client):
    with pytest.raises(OperationFailure):
        client.admin.command(SON([("getParameter", 1), ("noSuchParameterAtAll", 1)]))


def test_set_parameter_changes_a_parameter_and_reports_the_old_value(client):
    name = "maxTransactionLockRequestTimeoutMillis"
    before = client.admin.command(SON([("getParameter", 1), (name, 1)]))
    assert name in before, "getParameter reports %s (got %r)" % (name, before)
    old = before[name]
    try:
        r = client.admin.command(SON([("setParameter", 1), (name, 7)]))
        assert r.get("was") == old, "setParameter answers the previous value in 'was' (got %r)" % r
        now = client.admin.command(SON([("getParameter", 1), (name, 1)]))[name]
        assert now == 7, "getParameter shows the new value 7 (got %r)" % now
    finally:
        client.admin.command(SON([("setParameter", 1), (name, old)]))


def test_set_parameter_unknown_name_fails(client):
    with pytest.raises(OperationFailure):
        client.admin.command(SON([("setParameter", 1), ("noSuchParameterAtAll", 1)]))


def test_get_cmd_line_opts_shows_argv_and_parsed(client, atomdb_module):
    r = client.admin.command("getCmdLineOpts")
    argv = r.get("argv")
    assert isinstance(argv, list) and argv and argv[0] == atomdb_module.argv[0], \
        "getCmdLineOpts.argv starts with the binary as started (got %r)" % argv
    assert str(atomdb_module.port) in argv, "argv contains the --port value"
    assert isinstance(r.get("parsed"), dict), "getCmdLineOpts.parsed is a document"


def test_get_log_startup_warnings_and_global(client):
    r = client.admin.command(SON([("getLog", "startupWarnings")]))
    assert isinstance(r.get("log"), list), "getLog startupWarnings returns a log array"
    assert isinstance(r.get("totalLinesWritten"), int), "getLog returns totalLinesWritten"
    g = client.admin.command(SON([("getLog", "global")]))
    assert isinstance(g.get("log"), list) and g["log"], "getLog global returns recent log lines"
    names = client.admin.command(SON([("getLog", "*")])).get("names")
    assert names and "global" in names and "startupWarnings" in names, \
        "getLog '*' names global and startupWarnings (got %r)" % names


def test_host_info_describes_the_machine(client):
    r = client.admin.command("hostInfo")
    system = r.get("system", {})
    assert isinstance(system.get("hostname"), str) and system["hostname"], "hostInfo.system.hostname"
    assert isinstance(system.get("numCores"), int) and system["numCores"] >= 1, "hostInfo.system.numCores >= 1"
    assert isinstance(system.get("memSizeMB"), int) and system["memSizeMB"] > 0, "hostInfo.system.memSizeMB > 0"
    assert isinstance(r.get("os"), dict), "hostInfo.os is a document"


def test_whatsmyuri_names_the_client_address(client):
    r = client.admin.command("whatsmyuri")
    assert re.fullmatch(r"127\.0\.0\.1:\d+", r.get("you", "")), \
        "whatsmyuri.you is the client's 127.0.0.1:port (got %r)" % r.get("you")


def test_connection_status_shows_no_authenticated_users(client):
    r = client.admin.command("connectionStatus")
    info = r.get("authInfo", {})
    assert info.get("authenticatedUsers") == [], "connectionStatus: no authenticated users"
    assert info.get("authenticatedUserRoles") == [], "connectionStatus: no roles"


def test_server_status_reports_host_version_uptime_connections_opcounters_mem(client, atomdb_module):
    s = client.admin.command("serverStatus")
    assert isinstance(s.get("host"), str) and s["host"], "serverStatus.host is set (got %r)" % s.get("host")
    assert re.fullmatch(r"7\.0\.\d+", s.get("version", "")), "serverStatus.version is 7.0.x"
    assert isinstance(s.get("uptime"), (int, float)) and s["uptime"] >= 0, "serverStatus.uptime >= 0"
    assert isinstance(s.get("localTime"), datetime.datetime), "serverStatus.localTime is a date"
    conns = s.get("connections", {})
    assert conns.get("current", 0) >= 1, "serverStatus.connections.current counts this client"
    assert conns.get("totalCreated", 0) >= conns.get("current", 0), "totalCreated >= current"
    assert "available" in conns, "serverStatus.connections.available present"
    ops = s.get("opcounters", {})
    for k in ("insert", "query", "update", "delete", "getmore", "command"):
        assert isinstance(ops.get(k), int), "serverStatus.opcounters.%s is an integer (got %r)" % (k, ops)
    mem = s.get("mem", {})
    assert "resident" in mem and "virtual" in mem, "serverStatus.mem has resident and virtual (got %r)" % mem
    s2 = client.admin.command("serverStatus")
    assert s2["opcounters"]["command"] > ops["command"], "opcounters.command grows as commands run"


def test_list_databases_shows_a_created_database(client):
    db = client.get_database("t_listdb")
    db.drop_collection("c")
    db.create_collection("c")
    try:
        r = client.admin.command("listDatabases")
        names = [d["name"] for d in r["databases"]]
        assert "t_listdb" in names, "listDatabases includes a database with a collection (got %r)" % names
        entry = next(d for d in r["databases"] if d["name"] == "t_listdb")
        assert "sizeOnDisk" in entry and "empty" in entry, "database entries have sizeOnDisk and empty"
        assert "totalSize" in r, "listDatabases reports totalSize"
        only = client.admin.command(SON([("listDatabases", 1), ("nameOnly", True)]))
        assert all(set(d) == {"name"} for d in only["databases"]), "nameOnly lists names only"
        assert "t_listdb" in client.list_database_names(), "list_database_names sees it"
    finally:
        client.drop_database("t_listdb")
    assert "t_listdb" not in client.list_database_names(), "dropDatabase removes it from listDatabases"


def test_create_and_drop_collection(client):
    db = client.get_database("t_create")
    db.drop_collection("coll")
    r = db.command("create", "coll")
    assert r.get("ok") == 1, "create answers ok: 1"
    assert "coll" in db.list_collection_names(), "create makes the collection visible"
    db.drop_collection("coll")
    assert "coll" not in db.list_collection_names(), "drop removes the collection"
    client.drop_database("t_create")


def test_create_existing_collection_with_same_options_is_ok(client):
    # MongoDB 7.0 (SERVER-60064): create is idempotent when the options match.
    db = client.get_database("t_create_same")
    client.drop_database("t_create_same")
    db.command("create", "coll")
    r = db.command("create", "coll", check=False)
    assert r.get("ok") == 1, "creating an existing collection with the same options answers ok: 1 (got %r)" % r
    client.drop_database("t_create_same")


def test_create_existing_collection_with_other_options_is_namespace_exists(client):
    db = client.get_database("t_create_other")
    client.drop_database("t_create_other")
    db.command("create", "coll")
    with pytest.raises(OperationFailure) as ei:
        db.command(SON([("create", "coll"), ("validationAction", "warn")]))
    assert ei.value.code == 48, \
        "create of an existing name with other options fails NamespaceExists 48 (got %r)" % ei.value.details
    client.drop_database("t_create_other")


def test_drop_missing_collection_is_not_an_error(client):
    r = client.get_database("t_create2").command("drop", "never_created", check=False)
    assert r.get("ok") == 1 or r.get("code") == 26, \
        "dropping a missing collection answers ok:1 (7.0) or NamespaceNotFound (got %r)" % r


def test_list_collections_with_filter_and_name_only(client):
    db = client.get_database("t_listcoll")
    for n in ("alpha", "beta", "gamma"):
        db.create_collection(n)
    try:
        docs = list(db.list_collections(filter={"name": "beta"}))
        assert [d["name"] for d in docs] == ["beta"], "filter {name: 'beta'} lists only beta (got %r)" % docs
        assert docs[0].get("type") == "collection", "listCollections entry type is collection"
        assert "options" in docs[0] and "info" in docs[0], "full entries carry options and info"
        r = db.command(SON([("listCollections", 1), ("nameOnly", True)]))
        batch = r["cursor"]["firstBatch"]
        assert sorted(d["name"] for d in batch) == ["alpha", "beta", "gamma"], "nameOnly lists all three"
        assert all(set(d) <= {"name", "type"} for d in batch), "nameOnly entries hold name and type only (got %r)" % batch
        assert r["cursor"].get("ns") == "t_listcoll.$cmd.listCollections", "listCollections cursor ns"
        r = db.command(SON([("listCollections", 1), ("filter", {"name": {"$in": ["alpha", "gamma"]}}),
                            ("nameOnly", True)]))
        assert sorted(d["name"] for d in r["cursor"]["firstBatch"]) == ["alpha", "gamma"], \
            "a $in filter on name selects two collections"
    finally:
        client.drop_database("t_listcoll")


def test_db_stats_and_coll_stats_basics(client):
    db = client.get_database("t_stats")
    db.create_collection("s")
    try:
        d = db.command("dbStats")
        assert d.get("db") == "t_stats", "dbStats.db names the database"
        assert d.get("collections") == 1, "dbStats.collections counts one collection (got %r)" % d.get("collections")
        assert d.get("objects") == 0, "dbStats.objects is 0 for an empty collection"
        c = db.command("collStats", "s")
        assert c.get("ns") == "t_stats.s", "collStats.ns is db.coll (got %r)" % c.get("ns")
        assert c.get("count") == 0, "collStats.count is 0 for an empty collection"
        assert "size" in c and "nindexes" in c, "collStats has size and nindexes"
    finally:
        client.drop_database("t_stats")


def test_sessions_start_run_and_end(client):
    with client.start_session() as s:
        r = client.admin.command("ping", session=s)
        assert r["ok"] == 1, "ping inside a session answers ok:1"
        names = client.get_database("t_sess").list_collection_names(session=s)
        assert isinstance(names, list), "listCollections inside a session works"
        lsid = s.session_id
        assert "id" in lsid, "session has an lsid"
    r = client.admin.command("endSessions", [lsid])
    assert r["ok"] == 1, "endSessions with that lsid answers ok:1"


def test_kill_cursors_reports_unknown_ids(client):
    r = client.get_database("t_cur").command(SON([("killCursors", "c"), ("cursors", [Int64(123456789)])]))
    assert r.get("cursorsNotFound") == [123456789], "killCursors of an unknown id lists it in cursorsNotFound (got %r)" % r


def test_get_more_on_unknown_cursor_is_cursor_not_found(client):
    with pytest.raises(OperationFailure) as ei:
        client.get_database("t_cur").command(SON([("getMore", Int64(987654321)), ("collection", "c")]))
    assert ei.value.code == 43, "getMore of an unknown cursor fails CursorNotFound 43 (got %r)" % ei.value.details


def test_list_collections_cursor_continues_with_get_more(client):
    db = client.get_database("t_getmore")
    for i in range(5):
        db.create_collection("c%d" % i)
    try:
        r = db.command(SON([("listCollections", 1), ("nameOnly", True), ("cursor", {"batchSize": 2})]))
        cur = r["cursor"]
        names = [d["name"] for d in cur["firstBatch"]]
        assert len(names) == 2, "batchSize 2 gives a first batch of two (got %r)" % names
        assert cur["id"] != 0, "a cursor id is returned when more remain"
        while cur["id"] != 0:
            r = db.command(SON([("getMore", cur["id"]), ("collection", "$cmd.listCollections"),
                                ("batchSize", 2)]))
            cur = r["cursor"]
            names += [d["name"] for d in cur["nextBatch"]]
        assert sorted(names) == ["c%d" % i for i in range(5)], "getMore returns the remaining collections"
    finally:
        client.drop_database("t_getmore")


# --- compression ------------------------------------------------------------------

def _module_or_fail(name, package):
    try:
        __import__(name)
    except ImportError:
        require_installed(False, "the %r module pymongo needs for this compressor (Debian %s)"
                          % (name, package))


@pytest.mark.parametrize("compressor", ["zlib", "zstd", "snappy"])
def test_compression_is_negotiated_and_used(atomdb_module, mode, compressor):
    if compressor == "zstd":
        _module_or_fail("zstandard", "python3-zstandard")
    if compressor == "snappy":
        _module_or_fail("snappy", "python3-snappy")
    c = make_client(atomdb_module, mode + "&compressors=" + compressor)
    try:
        for _ in range(3):
            assert c.admin.command("ping")["ok"] == 1, "ping with %s compression answers ok:1" % compressor
        big = c.admin.command(SON([("ping", 1), ("comment", "x" * 100000)]))
        assert big["ok"] == 1, "a 100 KB compressible command with %s answers ok:1" % compressor
        contexts = []
        for server in c._topology._servers.values():
            for sock_info in list(server.pool.sockets):
                contexts.append(sock_info.compression_context)
        assert contexts, "test setup: pymongo holds at least one pooled connection"
        names = {type(ctx).__name__ if ctx else None for ctx in contexts}
        assert None not in names, "every pooled connection negotiated %s (got %r)" % (compressor, names)
    finally:
        c.close()


# --- shutdown ------------------------------------------------------------------------

def test_shutdown_command_from_local_connection_stops_the_server(atomdb):
    c = make_client(atomdb, "directConnection=true")
    try:
        assert c.admin.command("ping")["ok"] == 1, "server answers before shutdown"
        atomdb.exit_expected = True
        try:
            c.admin.command("shutdown")
        except (AutoReconnect, ConnectionFailure):
            pass  # mongod closes the connection instead of replying
    finally:
        c.close()
    rc = atomdb.wait_exit(20)
    assert rc is not None, "the server exits after the shutdown command"
    assert rc == 0, "the server exits with code 0 after shutdown (got %r)" % rc


def test_shutdown_command_is_refused_on_other_databases(atomdb):
    c = make_client(atomdb, "directConnection=true")
    try:
        with pytest.raises(OperationFailure) as ei:
            c.get_database("test").command("shutdown")
        assert ei.value.code == 13, "shutdown outside admin fails Unauthorized 13 (got %r)" % ei.value.details
        assert c.admin.command("ping")["ok"] == 1, "server still answers after a refused shutdown"
    finally:
        c.close()
