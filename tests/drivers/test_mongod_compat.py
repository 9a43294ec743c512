"""atomdb as a drop-in mongod (issue 21): mongod's command line and
mongod.conf (every key, a bad key, a bad value, the same settings both ways),
mongod flags refused by name, mongod's JSON log (every line parses, the ids
tools wait for are there, getLog returns the same lines), --version,
--fork/--pidfilepath/--shutdown, and the one-member replica-set commands
through pymongo and mongosh (rs.status(), rs.conf()).
"""

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pymongo
import pytest
from pymongo.errors import OperationFailure

from atomdb_testlib import REPO, SANITIZER_MARKERS, atomdb_bin, free_port, require_installed

MONGOSH = REPO / "tests" / "drivers" / "node" / "node_modules" / ".bin" / "mongosh"
START_TIMEOUT_S = 20.0


class Mongod:
    """atomdb started with exactly the arguments a test gives (no defaults
    added), its stdout+stderr in a file; stop() checks the exit."""

    def __init__(self, tmp_path, *args, wait=True):
        self.tmp = tmp_path
        self.out_path = tmp_path / ("out-%d.log" % time.monotonic_ns())
        self.out = open(self.out_path, "wb")
        self.proc = subprocess.Popen([str(atomdb_bin()), *args], stdin=subprocess.DEVNULL,
                                     stdout=self.out, stderr=self.out)
        if wait:
            self.wait_for('"Waiting for connections"')

    def text(self):
        return self.out_path.read_text(errors="replace")

    def wait_for(self, needle, timeout=START_TIMEOUT_S):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if needle in self.text():
                return
            if self.proc.poll() is not None:
                raise AssertionError("atomdb exited (%s) before printing %r:\n%s"
                                     % (self.proc.returncode, needle, self.text()[-3000:]))
            time.sleep(0.01)
        raise AssertionError("no %r within %s s:\n%s" % (needle, timeout, self.text()[-3000:]))

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
        rc = self.proc.wait(timeout=20)
        self.out.close()
        text = self.text()
        for marker in SANITIZER_MARKERS:
            assert marker not in text, "sanitizer report in atomdb's output:\n" + text[-4000:]
        assert rc == 0, "atomdb exits 0 after SIGINT (got %s):\n%s" % (rc, text[-3000:])
        return text


def run_atomdb(*args, timeout=30):
    """Runs atomdb to completion; (exit code, stdout, stderr)."""
    p = subprocess.run([str(atomdb_bin()), *args], capture_output=True, text=True,
                       timeout=timeout, stdin=subprocess.DEVNULL)
    return p.returncode, p.stdout, p.stderr


def client(port, **kw):
    return pymongo.MongoClient("127.0.0.1", port, directConnection=True,
                               serverSelectionTimeoutMS=5000, **kw)


# ---- --version ----

def test_version_prints_mongod_first_line_and_build_info():
    rc, out, err = run_atomdb("--version")
    assert rc == 0, "--version exits 0"
    first = out.splitlines()[0]
    # the regular expression mongodb-memory-server applies to the output
    import re
    assert re.match(r"^\s*db\s+version\s+v?(\d+\.\d+\.\d+)(-\d*)?(-[a-zA-Z0-9].*)?\s*$", first), \
        "first line is mongod's 'db version v7.0.x' (got %r)" % first
    assert first.startswith("db version v7.0."), "a 7.0 version (got %r)" % first
    assert out.splitlines()[1].startswith("Build Info: {"), "then the build info:\n" + out
    info = json.loads(out.split("Build Info: ", 1)[1])
    assert info["version"] == first.split(" v")[-1], "build info names the same version"


# ---- refused and bad command-line options ----

@pytest.mark.parametrize("args,named", [
    (["--keyFile", "/tmp/k"], "--keyFile"),
    (["--wiredTigerCacheSizeGB", "1"], "--wiredTigerCacheSizeGB"),
    (["--oplogSize", "50"], "--oplogSize"),
    (["--shardsvr"], "--shardsvr"),
    (["--tlsMode", "requireTLS"], "--tlsMode"),
    (["--syslog"], "--syslog"),
    (["--profile", "1"], "--profile"),
    (["--slowOpSampleRate", "2"], "--slowOpSampleRate"),
    (["--bind_ip", "0.0.0.0"], "--protected-mode off"),
    (["--protected-mode", "maybe"], "--protected-mode"),
    (["--no-such-flag"], "--no-such-flag"),
    (["--port", "abc"], "--port"),
    (["--port", "70000"], "--port"),
    (["--storageEngine", "rocksdb"], "--storageEngine"),
    (["--setParameter", "noSuchParameter=1"], "noSuchParameter"),
    (["--setParameter", "nonsense"], "--setParameter"),
    (["--fork"], "--fork"),
    (["--bind_ip", "127.0.0.1", "--bind_ip_all"], "--bind_ip_all"),
    (["--storageEngine", "inMemory", "--journal", "fsync"], "--journal"),
    (["--replSet", "rs0/host1:27017"], "--replSet"),
])
def test_unhonoured_or_bad_options_are_refused_by_name(tmp_path, args, named):
    rc, out, err = run_atomdb("--dbpath", str(tmp_path / "d"), "--port", str(free_port()), *args)
    assert rc == 2, "%s: exit code 2, mongod's for bad options (got %s; %s%s)" % (args, rc, out, err)
    assert named in err, "%s: the error names %s:\n%s" % (args, named, err)
    assert not (tmp_path / "d").exists(), "%s: nothing was started (no dbpath made)" % (args,)


# ---- mongod.conf ----

EVERY_KEY_CONF = """\
# every mongod.conf key atomdb takes
net:
  port: {port}
  bindIp: 127.0.0.1,localhost
  ipv6: false
  maxIncomingConnections: 50
  unixDomainSocket:
    enabled: false
storage:
  dbPath: {dbpath}
  engine: wiredTiger
  journal:
    enabled: true
systemLog:
  destination: file
  path: {logpath}
  logAppend: true
  quiet: false
  verbosity: 0
replication:
  replSetName: confset
security:
  authorization: disabled
processManagement:
  fork: false
  pidFilePath: {pidfile}
setParameter:
  cursorTimeoutMillis: 123456
  transactionLifetimeLimitSeconds: 77
atomdb:
  advertise: 127.0.0.1:{port}
  journal: fsync
  snapshotIntervalSecs: 0
  snapshotWalMB: 64
  logLevel: info
  logFormat: json
  repair: false
"""


def write_conf(tmp_path, text, name="mongod.conf"):
    p = tmp_path / name
    p.write_text(text)
    return p


def test_config_file_with_every_key_starts_the_server_as_configured(tmp_path):
    port = free_port()
    dbpath, logpath, pidfile = tmp_path / "db", tmp_path / "mongod.log", tmp_path / "mongod.pid"
    conf = write_conf(tmp_path, EVERY_KEY_CONF.format(port=port, dbpath=dbpath, logpath=logpath,
                                                      pidfile=pidfile))
    server = Mongod(tmp_path, "--config", str(conf), wait=False)
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline and not (
                logpath.exists() and "Waiting for connections" in logpath.read_text()):
            assert server.proc.poll() is None, "atomdb exited:\n" + server.text()
            time.sleep(0.01)
        with client(port) as c:
            opts = c.admin.command("getCmdLineOpts")
            hello = c.admin.command("hello")
            params = c.admin.command("getParameter", 1, cursorTimeoutMillis=1,
                                     transactionLifetimeLimitSeconds=1)
            status = c.admin.command("serverStatus")
        p = opts["parsed"]
        assert p["config"] == str(conf), "parsed.config names the file"
        assert p["net"]["port"] == port and p["net"]["bindIp"] == "127.0.0.1,localhost", p
        assert p["storage"]["dbPath"] == str(dbpath) and p["storage"]["journal"]["enabled"] is True, p
        assert p["replication"]["replSetName"] == "confset", p
        assert p["atomdb"]["journal"] == "fsync" and p["atomdb"]["snapshotWalMB"] == 64, p
        assert hello["setName"] == "confset", "replication.replSetName is the set's name"
        assert hello["me"] == "127.0.0.1:%d" % port, "atomdb.advertise is what hello shows"
        assert params["cursorTimeoutMillis"] == 123456, "setParameter: applied at start"
        assert params["transactionLifetimeLimitSeconds"] == 77, "setParameter: applied at start"
        assert status["connections"]["current"] + status["connections"]["available"] == 50, \
            "net.maxIncomingConnections limits connections"
        assert pidfile.read_text().strip() == str(server.proc.pid), "the pid file holds the pid"
        assert (dbpath / "atomdb.lock").exists(), "storage.dbPath is the data directory"
    finally:
        out = server.stop()
    assert "Waiting for connections" not in out, \
        "systemLog.path: nothing is logged to stdout (got:\n%s)" % out[-2000:]
    lines = logpath.read_text().splitlines()
    assert lines and all(json.loads(l) for l in lines), "the log file is mongod's JSON"


@pytest.mark.parametrize("text,named", [
    ("net:\n  port: 1\n  bogus: 2\n", "net.bogus"),
    ("nonsense: 1\n", "nonsense"),
    ("storage:\n  wiredTiger:\n    engineConfig:\n      cacheSizeGB: 1\n",
     "storage.wiredTiger.engineConfig.cacheSizeGB"),
    ("replication:\n  oplogSizeMB: 10\n", "replication.oplogSizeMB"),
    ("security:\n  authorization: maybe\n", "security.authorization"),
    ("security:\n  keyFile: /tmp/k\n", "security.keyFile"),
    ("systemLog:\n  destination: syslog\n", "systemLog.destination"),
    ("net:\n  port: [1, 2]\n", "net.port"),
    ("net:\n  port: 1\n  port: 2\n", "net.port"),
])
def test_config_file_unknown_or_unhonoured_keys_are_refused_with_their_path(tmp_path, text, named):
    conf = write_conf(tmp_path, text)
    rc, out, err = run_atomdb("-f", str(conf), "--dbpath", str(tmp_path / "d"))
    assert rc == 2, "exit code 2 for %r (got %s: %s)" % (text, rc, err)
    assert named in err, "the error names '%s':\n%s" % (named, err)
    assert str(conf) in err, "and the file:\n" + err


@pytest.mark.parametrize("text,named", [
    ("net:\n  port: abc\n", "net.port"),
    ("net:\n  port: 99999\n", "net.port"),
    ("net:\n  ipv6: maybe\n", "net.ipv6"),
    ("storage:\n  engine: mmapv1\n", "storage.engine"),
    ("systemLog:\n  verbosity: 9\n", "systemLog.verbosity"),
    ("atomdb:\n  journal: sometimes\n", "atomdb.journal"),
    ("net: [\n", "not valid YAML"),
    ("- a\n- b\n", "mapping"),
    ("net:\n  port:\n", "net.port"),
])
def test_config_file_bad_values_are_refused(tmp_path, text, named):
    conf = write_conf(tmp_path, text)
    rc, out, err = run_atomdb("--config", str(conf), "--dbpath", str(tmp_path / "d"))
    assert rc == 2 and named in err, "bad value %r refused naming %s (rc %s):\n%s" % (
        text, named, rc, err)


def test_missing_config_file_is_refused(tmp_path):
    rc, out, err = run_atomdb("--config", str(tmp_path / "absent.conf"))
    assert rc == 2 and "absent.conf" in err, err


def test_command_line_and_config_file_give_the_same_settings(tmp_path):
    """The same settings spelled both ways give the same getCmdLineOpts
    parsed options and the same hello."""
    port = free_port()
    results = []
    for way in ("flags", "file"):
        d = tmp_path / way
        d.mkdir()
        if way == "flags":
            args = ["--port", str(port), "--bind_ip", "127.0.0.1", "--dbpath", str(d / "db"),
                    "--replSet", "parity", "--storageEngine", "inMemory", "--quiet",
                    "--setParameter", "cursorTimeoutMillis=5000", "--maxConns", "20",
                    "--journal", "none"]
        else:
            conf = write_conf(d, "net:\n  port: %d\n  bindIp: 127.0.0.1\n"
                                 "  maxIncomingConnections: 20\n"
                                 "storage:\n  dbPath: %s\n  engine: inMemory\n"
                                 "replication:\n  replSetName: parity\n"
                                 "systemLog:\n  quiet: true\n"
                                 "setParameter:\n  cursorTimeoutMillis: 5000\n"
                                 "atomdb:\n  journal: none\n" % (port, d / "db"))
            args = ["--config", str(conf)]
        server = Mongod(d, *args)
        try:
            with client(port) as c:
                parsed = c.admin.command("getCmdLineOpts")["parsed"]
                hello = c.admin.command("hello")
                param = c.admin.command("getParameter", 1, cursorTimeoutMillis=1)
        finally:
            out = server.stop()
        parsed.pop("config", None)
        parsed["storage"]["dbPath"] = "<dbpath>"
        results.append((parsed, hello["setName"], param["cursorTimeoutMillis"],
                        "Connection accepted" in out))
    flags, file = results
    assert flags[0]["setParameter"] == {"cursorTimeoutMillis": "5000"}, flags[0]
    assert flags[1:] == file[1:] == ("parity", 5000, False), \
        "both ways: the set's name, the parameter, and --quiet's missing connection lines " \
        "(flags %r, file %r)" % (flags[1:], file[1:])
    for section in ("net", "storage", "replication", "setParameter"):
        assert flags[0][section] == file[0][section], \
            "%s is parsed the same both ways: %r vs %r" % (section, flags[0][section], file[0][section])


def test_command_line_overrides_the_config_file(tmp_path):
    port, other = free_port(), free_port()
    conf = write_conf(tmp_path, "net:\n  port: %d\nreplication:\n  replSetName: fromfile\n" % other)
    server = Mongod(tmp_path, "-f", str(conf), "--port", str(port), "--dbpath", str(tmp_path / "d"))
    try:
        with client(port) as c:
            assert c.admin.command("hello")["setName"] == "fromfile", \
                "what the command line leaves alone comes from the file"
    finally:
        server.stop()


# ---- JSON log ----

TOOL_IDS = {
    4615611: "MongoDB starting",
    23016: "Waiting for connections",
    21331: "Transition to primary complete; database writes are now permitted",
    22943: "Connection accepted",
    22944: "Connection ended",
    23377: "Received signal",
    23138: "Shutting down",
}


def test_json_log_every_line_parses_and_has_the_ids_tools_wait_for(tmp_path):
    port = free_port()
    server = Mongod(tmp_path, "--port", str(port), "--dbpath", str(tmp_path / "d"))
    try:
        with client(port) as c:
            c.t.c.insert_one({"x": 1})
            got = c.admin.command("getLog", "global")
            warnings = c.admin.command("getLog", "startupWarnings")
    finally:
        out = server.stop()
    lines = [l for l in out.splitlines() if l.strip()]
    docs = []
    for l in lines:
        try:
            docs.append(json.loads(l))
        except ValueError:
            pytest.fail("a log line is not JSON: %r" % l)
    for d in docs:
        assert set(d) >= {"t", "s", "c", "id", "ctx", "msg"}, "mongod's fields in %r" % d
        assert "$date" in d["t"] and isinstance(d["id"], int), d
    by_id = {d["id"]: d for d in docs}
    for id_, msg in TOOL_IDS.items():
        assert id_ in by_id, "a line with mongod's id %d (%s) is logged" % (id_, msg)
        assert by_id[id_]["msg"] == msg, "id %d says %r" % (id_, msg)
    assert by_id[23016]["attr"]["port"] == port, "Waiting for connections names the port"
    assert by_id[23016]["ctx"] == "listener"
    # getLog returns the same lines the server printed
    assert got["log"], "getLog global returns lines"
    for l in got["log"]:
        assert l in lines, "getLog's line is one the server printed: %r" % l
    assert got["totalLinesWritten"] >= len(got["log"])
    assert warnings["log"] == [], "no start-up warnings on loopback with a journal"


def test_startup_warnings_are_tagged_and_returned_by_getlog(tmp_path):
    port = free_port()
    server = Mongod(tmp_path, "--port", str(port), "--dbpath", str(tmp_path / "d"),
                    "--storageEngine", "ephemeralForTest")
    try:
        with client(port) as c:
            warnings = c.admin.command("getLog", "startupWarnings")["log"]
    finally:
        out = server.stop()
    assert len(warnings) == 1, "one start-up warning (no journal): %r" % warnings
    w = json.loads(warnings[0])
    assert w["tags"] == ["startupWarnings"] and w["s"] == "W", w
    assert warnings[0] in out.splitlines(), "the same line is in the log"
    assert not (tmp_path / "d" / "wal").exists() or not any((tmp_path / "d").glob("*.wal")), \
        "ephemeralForTest writes no journal"


def test_text_log_format_keeps_the_text_lines(tmp_path):
    port = free_port()
    server = Mongod(tmp_path, "--port", str(port), "--dbpath", str(tmp_path / "d"),
                    "--log-format", "text", wait=False)
    server.wait_for("Waiting for connections")
    out = server.stop()
    import re
    lines = [l for l in out.splitlines() if l.strip()]
    assert all(re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z [DIWE] \S+", l) for l in lines), \
        "every line is atomdb's text format:\n" + out


def test_a_port_in_use_is_reported_as_mongod_does(tmp_path):
    port = free_port()
    first = Mongod(tmp_path, "--port", str(port), "--dbpath", str(tmp_path / "a"))
    try:
        rc, out, err = run_atomdb("--port", str(port), "--dbpath", str(tmp_path / "b"))
    finally:
        first.stop()
    assert rc == 48, "exit code 48 (mongod's network error), got %s" % rc
    assert "address already in use" in out.lower(), \
        "the line mongodb-memory-server matches is printed:\n" + out


def test_a_dbpath_in_use_fails_with_mongods_initandlisten_line(tmp_path):
    port = free_port()
    first = Mongod(tmp_path, "--port", str(port), "--dbpath", str(tmp_path / "a"))
    try:
        rc, out, err = run_atomdb("--port", str(free_port()), "--dbpath", str(tmp_path / "a"))
    finally:
        first.stop()
    assert rc == 100, "exit code 100, got %s" % rc
    line = [l for l in out.splitlines() if "DBException in initAndListen," in l]
    assert line, "the DBException line tools parse is printed:\n" + out
    assert "DBPathInUse" in json.loads(line[0])["attr"]["error"]


def test_logpath_renames_the_old_file_unless_logappend(tmp_path):
    log = tmp_path / "m.log"
    for append in (False, True, False):
        args = ["--port", str(free_port()), "--dbpath", str(tmp_path / "d"), "--logpath", str(log)]
        if append:
            args.append("--logappend")
        server = Mongod(tmp_path, *args, wait=False)
        mine = '"pid":%d,' % server.proc.pid
        deadline = time.monotonic() + START_TIMEOUT_S
        while not (log.exists() and mine in log.read_text() and
                   "Waiting for connections" in log.read_text().split(mine, 1)[1]):
            assert time.monotonic() < deadline and server.proc.poll() is None, server.text()
            time.sleep(0.01)
        server.stop()
    starts = log.read_text().count('"MongoDB starting"')
    rotated = list(tmp_path.glob("m.log.*"))
    assert starts == 1, "the last run (no --logappend) started a fresh file"
    assert len(rotated) == 1 and rotated[0].read_text().count('"MongoDB starting"') == 2, \
        "the earlier file (two runs, the second appended) was renamed to m.log.<time>"


# ---- --fork, --pidfilepath, --shutdown ----

def test_fork_then_shutdown(tmp_path):
    port = free_port()
    db, log, pid = tmp_path / "d", tmp_path / "f.log", tmp_path / "f.pid"
    rc, out, err = run_atomdb("--fork", "--logpath", str(log), "--port", str(port),
                              "--dbpath", str(db), "--pidfilepath", str(pid))
    assert rc == 0, "--fork returns 0 once the server listens:\n%s%s" % (out, err)
    assert "child process started successfully, parent exiting" in out, out
    child = int(pid.read_text())
    try:
        with client(port) as c:
            c.t.c.insert_one({"_id": 1})
        rc, out, err = run_atomdb("--shutdown", "--dbpath", str(db))
        assert rc == 0, "--shutdown stops it:\n" + out + err
        assert "killing process with pid: %d" % child in out, out
        for _ in range(500):
            try:
                os.kill(child, 0)
            except ProcessLookupError:
                break
            time.sleep(0.01)
        else:
            pytest.fail("the forked server is still running after --shutdown")
    finally:
        try:
            os.kill(child, signal.SIGKILL)
        except ProcessLookupError:
            pass
    assert '"Shutting down"' in log.read_text(), "it shut down cleanly"
    rc, out, err = run_atomdb("--shutdown", "--dbpath", str(db))
    assert rc == 1 and "doesn't seem to be a server running" in err, err


def test_bind_ip_list_listens_on_each_address(tmp_path):
    port = free_port()
    server = Mongod(tmp_path, "--port", str(port), "--bind_ip", "127.0.0.1,127.0.0.2",
                    "--dbpath", str(tmp_path / "d"))
    try:
        for host in ("127.0.0.1", "127.0.0.2"):
            with pymongo.MongoClient(host, port, directConnection=True,
                                     serverSelectionTimeoutMS=3000) as c:
                assert c.admin.command("ping")["ok"] == 1, "listening on %s" % host
    finally:
        out = server.stop()
    assert out.count('"Listening on"') == 2, out


# ---- replica-set commands ----

def test_replset_initiate_status_config_reconfig(tmp_path):
    port = free_port()
    server = Mongod(tmp_path, "--port", str(port), "--dbpath", str(tmp_path / "d"),
                    "--replSet", "rsx")
    me = "127.0.0.1:%d" % port
    try:
        with client(port) as c:
            a = c.admin
            assert a.command("hello")["isWritablePrimary"], "primary before replSetInitiate"
            with pytest.raises(OperationFailure) as e:
                a.command("replSetInitiate", {"_id": "rsx", "members": [
                    {"_id": 0, "host": me}, {"_id": 1, "host": "127.0.0.1:1"}]})
            assert e.value.code == 93 and "single node" in str(e.value), e.value.details
            with pytest.raises(OperationFailure) as e:
                a.command("replSetInitiate", {"_id": "other", "members": [{"_id": 0, "host": me}]})
            assert e.value.code == 93, "another set name is refused"
            with pytest.raises(OperationFailure) as e:
                a.command("replSetInitiate", {"_id": "rsx", "members": [
                    {"_id": 0, "host": "10.9.9.9:1"}]})
            assert e.value.code == 74, "a member that is not this node: NodeNotFound"
            with pytest.raises(OperationFailure) as e:
                a.command("replSetInitiate", {"_id": "rsx", "bogus": 1,
                                              "members": [{"_id": 0, "host": me}]})
            assert e.value.code == 40415 and "bogus" in str(e.value)
            assert a.command("replSetInitiate", {"_id": "rsx", "members": [
                {"_id": 0, "host": me, "priority": 2, "tags": {"dc": "here"}}],
                "settings": {"electionTimeoutMillis": 500}})["ok"] == 1
            with pytest.raises(OperationFailure) as e:
                a.command("replSetInitiate", {})
            assert e.value.code == 23 and e.value.details["codeName"] == "AlreadyInitialized"
            cfg = a.command("replSetGetConfig")["config"]
            assert cfg["_id"] == "rsx" and cfg["version"] == 1 and len(cfg["members"]) == 1
            m = cfg["members"][0]
            assert m["host"] == me and m["priority"] == 2 and m["tags"] == {"dc": "here"}, m
            assert cfg["settings"]["electionTimeoutMillis"] == 500
            st = a.command("replSetGetStatus")
            assert st["set"] == "rsx" and st["myState"] == 1
            assert st["members"][0]["stateStr"] == "PRIMARY" and st["members"][0]["self"]
            cfg["version"] = 2
            cfg["members"][0]["priority"] = 1
            assert a.command("replSetReconfig", cfg)["ok"] == 1
            assert a.command("replSetGetConfig")["config"]["version"] == 2
            assert a.command("hello")["setVersion"] == 2, "hello shows the new version"
            with pytest.raises(OperationFailure) as e:
                a.command("replSetReconfig", cfg)
            assert e.value.code == 103, "the same version again is refused"
            assert a.command("replSetReconfig", cfg, force=True)["ok"] == 1
            assert a.command("replSetGetConfig")["config"]["version"] > 2, "force bumps it"
            with pytest.raises(OperationFailure) as e:
                cfg["members"][0]["arbiterOnly"] = True
                a.command("replSetReconfig", cfg, force=True)
            assert e.value.code == 93
            with pytest.raises(OperationFailure) as e:
                c.test.command("replSetGetStatus")
            assert e.value.code == 13, "replica-set commands are admin-only"
    finally:
        server.stop()


def test_mongosh_rs_status_and_rs_conf(tmp_path):
    require_installed(MONGOSH.exists(), "mongosh (%s, npm ci in tests/drivers/node)" % MONGOSH)
    port = free_port()
    server = Mongod(tmp_path, "--port", str(port), "--dbpath", str(tmp_path / "d"),
                    "--replSet", "shellset")
    home = tmp_path / "home"
    (home / ".mongodb" / "mongosh").mkdir(parents=True)
    (home / ".mongodb" / "mongosh" / "config").write_text('{"enableTelemetry": false}')
    env = dict(os.environ, HOME=str(home), DO_NOT_TRACK="1", MONGOSH_NO_UPDATE_CHECK="1")
    script = ('const i = rs.initiate({_id: "shellset", members: [{_id: 0, host: "127.0.0.1:%d"}]});'
              'const s = rs.status(); const c = rs.conf();'
              'print("RESULT " + JSON.stringify({i: i.ok, set: s.set, state: s.members[0].stateStr,'
              ' host: c.members[0].host, id: c._id}));' % port)
    try:
        p = subprocess.run([str(MONGOSH), "mongodb://127.0.0.1:%d/?directConnection=true" % port,
                            "--quiet", "--norc", "--eval", script], capture_output=True, text=True,
                           timeout=240, env=env)
    finally:
        server.stop()
    line = [l for l in p.stdout.splitlines() if l.startswith("RESULT ")]
    assert p.returncode == 0 and line, "mongosh ran rs.initiate/status/conf:\n%s%s" % (p.stdout, p.stderr)
    got = json.loads(line[0][7:])
    assert got == {"i": 1, "set": "shellset", "state": "PRIMARY",
                   "host": "127.0.0.1:%d" % port, "id": "shellset"}, got
