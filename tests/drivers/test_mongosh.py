"""mongosh 2.x (tests/drivers/node/node_modules/.bin/mongosh) against a real
atomdb: --eval scripts in replica-set discovery mode (replicaSet=rs0) and
with directConnection=true, and an interactive start in tmux checked for the
replica-set primary prompt and the absence of error and warning banners."""

import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from atomdb_testlib import REPO, require_installed

MONGOSH = REPO / "tests" / "drivers" / "node" / "node_modules" / ".bin" / "mongosh"


@pytest.fixture(autouse=True)
def _mongosh_installed():
    require_installed(MONGOSH.exists(), "mongosh (%s, npm ci in tests/drivers/node)" % MONGOSH)

MODES = {
    "discovery": ("replicaSet=rs0", r"rs0 \[primary\] test> "),
    "direct": ("directConnection=true", r"rs0 \[direct: primary\] test> "),
}

# Text that must not appear anywhere in mongosh's output.
BANNERS = ("MongoServerError", "MongoNetworkError", "MongoServerSelectionError",
           "Warning:", "Error:", "Uncaught", "deprecated", "startup warnings")

EVAL_SCRIPT = r"""
const out = {};
out.ping = db.adminCommand({ping: 1}).ok;
const bi = db.adminCommand({buildInfo: 1});
out.version = bi.version;
out.versionArray = bi.versionArray;
const t = db.getSiblingDB("mongosh_eval");
t.dropDatabase();
t.createCollection("things");
out.collections = t.getCollectionNames();
out.databases = db.adminCommand({listDatabases: 1}).databases.map(d => d.name);
out.dropped = t.things.drop();
out.collectionsAfterDrop = t.getCollectionNames();
const ss = db.serverStatus();
out.ssHost = typeof ss.host;
out.ssVersion = ss.version;
out.ssUptimeOk = ss.uptime >= 0;
out.ssConnections = ss.connections.current >= 1;
out.ssOpcounters = "command" in ss.opcounters;
out.ssMem = typeof ss.mem === "object";
const session = db.getMongo().startSession();
const sdb = session.getDatabase("admin");
out.sessionPing = sdb.runCommand({ping: 1}).ok;
out.sessionHasId = !!(session.id && session.id.id);
session.endSession();
out.hello = db.hello().setName;
out.isPrimary = db.hello().isWritablePrimary;
print("RESULT " + JSON.stringify(out));
"""


@pytest.fixture
def sh_env(tmp_path):
    """A private HOME for mongosh (config, history, logs), telemetry off."""
    home = tmp_path / "home"
    home.mkdir()
    env = dict(os.environ)
    env.update(HOME=str(home), DO_NOT_TRACK="1", MONGOSH_NO_UPDATE_CHECK="1", TERM="xterm-256color",
               NO_COLOR="1")
    # mongosh reads its global config from /etc/mongosh.conf; a per-user one
    # lives in HOME. Disable telemetry and the update check there too.
    cfg = home / ".mongodb" / "mongosh"
    cfg.mkdir(parents=True)
    (cfg / "config").write_text(json.dumps({"enableTelemetry": False}))
    return env


# mongosh's own notice that the Node.js running it (20 here, from the machine
# image) is older than it would like. It is about the client, not the server,
# so these exact lines are removed before looking for banners; anything else
# in a "Deprecation warnings:" section still fails the check.
CLIENT_NODE_NOTICE = re.compile(
    r"^\s*- Using mongosh with Node\.js versions lower than [\d.]+ is deprecated.*$\n?"
    r"|^See https://www\.mongodb\.com/docs/mongodb-shell/install/#supported-operating-systems.*$\n?",
    re.M)


def without_client_notices(text):
    text = CLIENT_NODE_NOTICE.sub("", text)
    # A "Deprecation warnings:" header left with no item under it.
    return re.sub(r"^Deprecation warnings:\s*$\n?(?=\s*(\n|$|rs0 ))", "", text, flags=re.M)


def run_eval(server, options, env, script=EVAL_SCRIPT):
    uri = server.uri(options)
    proc = subprocess.run([str(MONGOSH), uri, "--quiet", "--norc", "--eval", script],
                          capture_output=True, text=True, timeout=240, env=env)
    return proc


@pytest.mark.parametrize("mode", list(MODES))
def test_mongosh_eval_runs_admin_commands_and_a_session(atomdb, sh_env, mode):
    options, _prompt = MODES[mode]
    proc = run_eval(atomdb, options, sh_env)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, "mongosh --eval exits 0 in %s mode:\n%s" % (mode, output)
    m = re.search(r"^RESULT (.*)$", proc.stdout, re.M)
    assert m, "mongosh --eval printed its RESULT line:\n%s" % output
    r = json.loads(m.group(1))
    assert r["ping"] == 1, "ping ok: 1"
    assert re.fullmatch(r"7\.0\.\d+", r["version"]), "buildInfo.version is 7.0.x (got %r)" % r["version"]
    assert len(r["versionArray"]) == 4, "buildInfo.versionArray has four numbers"
    assert r["collections"] == ["things"], "createCollection made 'things' (got %r)" % r["collections"]
    assert "mongosh_eval" in r["databases"], "listDatabases shows the new database (got %r)" % r["databases"]
    assert r["dropped"] is True, "collection.drop() answers true"
    assert r["collectionsAfterDrop"] == [], "drop removed the collection"
    assert r["ssHost"] == "string" and r["ssUptimeOk"] and r["ssConnections"] and r["ssOpcounters"] and r["ssMem"], \
        "serverStatus has host, uptime, connections, opcounters, mem (got %r)" % r
    assert re.fullmatch(r"7\.0\.\d+", r["ssVersion"]), "serverStatus.version is 7.0.x"
    assert r["sessionPing"] == 1, "ping inside a session answers ok: 1"
    assert r["sessionHasId"], "the session has an lsid"
    assert r["hello"] == "rs0", "db.hello().setName is rs0"
    assert r["isPrimary"] is True, "db.hello().isWritablePrimary is true"
    shown = without_client_notices(output)
    for banner in BANNERS:
        assert banner not in shown, "mongosh --eval output has no %r:\n%s" % (banner, output)


@pytest.mark.parametrize("mode", list(MODES))
def test_mongosh_eval_reports_server_errors(atomdb, sh_env, mode):
    options, _ = MODES[mode]
    proc = run_eval(atomdb, options, sh_env, script='db.adminCommand({nope: 1})')
    output = proc.stdout + proc.stderr
    assert proc.returncode != 0, "a failing command makes mongosh --eval exit non-zero"
    assert "no such command: 'nope'" in output, "mongosh shows mongod's errmsg:\n%s" % output


# --- interactive start ------------------------------------------------------

class Tmux:
    """A private tmux server running one pane."""

    def __init__(self, env):
        self.socket = "atomdb-mongosh-%d-%d" % (os.getpid(), time.monotonic_ns())
        self.env = env

    def run(self, *args, check=True):
        return subprocess.run(["tmux", "-L", self.socket] + list(args), capture_output=True,
                              text=True, env=self.env, check=check, timeout=30)

    def start(self, command):
        self.run("-f", "/dev/null", "new-session", "-d", "-x", "200", "-y", "50", "-s", "sh", command)

    def screen(self):
        return self.run("capture-pane", "-p", "-J", "-S", "-200", "-t", "sh").stdout

    def keys(self, *keys):
        self.run("send-keys", "-t", "sh", *keys)

    def wait_for(self, pattern, timeout=120):
        deadline = time.monotonic() + timeout
        screen = ""
        while time.monotonic() < deadline:
            screen = self.screen()
            if re.search(pattern, screen):
                return screen
            time.sleep(0.2)
        raise AssertionError("tmux pane never showed %r within %ds; screen:\n%s" % (pattern, timeout, screen))

    def kill(self):
        self.run("kill-server", check=False)


@pytest.mark.parametrize("mode", list(MODES))
def test_mongosh_interactive_shows_primary_prompt_without_banners(atomdb, sh_env, mode):
    require_installed(shutil.which("tmux") is not None, "tmux (Debian tmux)")
    options, prompt = MODES[mode]
    tmux = Tmux(sh_env)
    script = Path(tempfile.mkdtemp(prefix="mongosh-tmux-")) / "run.sh"
    script.write_text("#!/bin/sh\nexec %s '%s' --norc\n" % (MONGOSH, atomdb.uri(options)))
    script.chmod(0o755)
    try:
        tmux.start(str(script))
        screen = tmux.wait_for(prompt)
        shown = without_client_notices(screen)
        for banner in BANNERS + ("Deprecation warnings:",):
            assert banner not in shown, "mongosh's start-up screen has no %r:\n%s" % (banner, screen)
        assert "Using MongoDB:" in screen and re.search(r"Using MongoDB:\s+7\.0\.\d+", screen), \
            "mongosh's banner reports MongoDB 7.0.x:\n%s" % screen
        tmux.keys("db.runCommand({ping: 1}).ok", "Enter")
        screen = tmux.wait_for(r"db\.runCommand\(\{ping: 1\}\)\.ok\s*\n1\s*\n")
        tmux.keys("db.adminCommand({nope: 1})", "Enter")
        screen = tmux.wait_for(r"no such command: 'nope'")
        assert "MongoServerError" in screen, "a failing command is shown as MongoServerError"
        tmux.keys("exit", "Enter")
    finally:
        tmux.kill()
        shutil.rmtree(script.parent, ignore_errors=True)


WATCH_SCRIPT = r"""
const out = {};
const c = db.getSiblingDB("mongosh_watch").seats;
const cs = c.watch([{$match: {operationType: {$in: ["insert", "update"]}}}]);
out.first = cs.tryNext();
c.insertOne({_id: "A1", taken: false});
c.updateOne({_id: "A1"}, {$set: {taken: true}});
c.deleteOne({_id: "A1"});
const a = cs.next(), b = cs.next();
out.types = [a.operationType, b.operationType];
out.updated = b.updateDescription.updatedFields;
const again = c.watch([], {resumeAfter: a._id});
out.resumed = [again.next().operationType, again.next().operationType];
const dbs = db.getSiblingDB("mongosh_watch").watch();
dbs.tryNext();
db.getSiblingDB("mongosh_watch").other.insertOne({_id: 1});
out.dbStream = dbs.next().ns;
print("RESULT " + JSON.stringify(out));
"""


def test_mongosh_watch_sees_changes_and_resumes(atomdb, sh_env):
    """db.coll.watch() and db.watch() in mongosh (issue 18): a $match
    filter, next() waiting for the events, resumeAfter a token."""
    proc = run_eval(atomdb, "directConnection=true", sh_env, WATCH_SCRIPT)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, "mongosh --eval exits 0:\n%s" % output
    m = re.search(r"^RESULT (.*)$", proc.stdout, re.M)
    assert m, "mongosh printed its RESULT line:\n%s" % output
    r = json.loads(m.group(1))
    assert r["first"] is None, "nothing before the first write"
    assert r["types"] == ["insert", "update"], r
    assert r["updated"] == {"taken": True}, r
    assert r["resumed"] == ["update", "delete"], "resumeAfter the insert's token: %r" % r
    assert r["dbStream"] == {"db": "mongosh_watch", "coll": "other"}, r
