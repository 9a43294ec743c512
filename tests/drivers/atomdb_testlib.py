"""Starting and stopping a real atomdb for the driver tests.

An AtomdbServer runs the binary from ATOMDB_BIN (default <repo>/build/atomdb)
on a free 127.0.0.1 port with a temporary --dbpath, and on stop reports any
sanitizer output or unexpected exit as a test failure.
"""

import os
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

# Lines in the server's stderr that mean a sanitizer caught something.
SANITIZER_MARKERS = (
    "ERROR: AddressSanitizer",
    "ERROR: LeakSanitizer",
    "runtime error:",
    "WARNING: ThreadSanitizer",
)

START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 20.0


def atomdb_bin():
    """Path of the atomdb binary under test."""
    return Path(os.environ.get("ATOMDB_BIN", REPO / "build" / "atomdb"))


def atomdb_build_dir():
    """The CMake build directory (for test_libmongoc and friends)."""
    return Path(os.environ.get("ATOMDB_BUILD", REPO / "build"))


def require_installed(present, what):
    """Fails the calling test when `what`, which scripts/install-deps.sh
    installs, is missing. Never a skip: a skip would let a run on a machine
    without it pass, hiding a missing install step (docs/testing.md)."""
    if not present:
        pytest.fail("%s is missing: run scripts/install-deps.sh (as root)" % what, pytrace=False)


def free_port():
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ServerProblem(Exception):
    """The server did something a test must fail on (died, sanitizer report)."""


class AtomdbServer:
    """One atomdb process. Unpacks as (host, port)."""

    def __init__(self, extra_args=(), log_level="debug"):
        self.host = "127.0.0.1"
        self.port = None
        self.extra_args = list(extra_args)
        self.log_level = log_level
        self.tmp = tempfile.TemporaryDirectory(prefix="atomdb-test-")
        self.dbpath = Path(self.tmp.name) / "data"
        self.log_path = Path(self.tmp.name) / "atomdb.stderr"
        self.proc = None
        self.argv = None
        # Set by a test that makes the server exit on purpose (shutdown).
        self.exit_expected = False

    def __iter__(self):
        return iter((self.host, self.port))

    @property
    def address(self):
        return "%s:%d" % (self.host, self.port)

    def uri(self, options=""):
        """mongodb:// URI for this server, with optional query options."""
        base = "mongodb://%s/" % self.address
        return base + ("?" + options if options else "")

    def log(self):
        """Everything the server wrote to stderr so far."""
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def log_tail(self, n=60):
        """The last n lines of output that are not debug-level log lines
        (text: " D " near the start; mongod's JSON: "s":"D1")."""
        lines = [l for l in self.log().splitlines()
                 if " D " not in l[:30] and '"s":"D' not in l[:60]]
        return "\n".join(lines[-n:])

    def start(self):
        binary = atomdb_bin()
        if not binary.exists():
            raise ServerProblem("atomdb binary not found at %s (set ATOMDB_BIN or build first)" % binary)
        last_error = None
        for _attempt in range(5):
            self.port = free_port()
            self.argv = [
                str(binary),
                "--bind", self.host,
                "--port", str(self.port),
                "--dbpath", str(self.dbpath),
                "--replSet", "rs0",
                "--advertise", self.address,
                "--log-level", self.log_level,
            ] + self.extra_args
            env = dict(os.environ)
            env.setdefault("UBSAN_OPTIONS", "print_stacktrace=1")
            self.log_file = open(self.log_path, "ab")
            try:
                self.proc = subprocess.Popen(
                    self.argv, stdin=subprocess.DEVNULL, stdout=self.log_file,
                    stderr=self.log_file, env=env)
            except OSError as e:
                self.log_file.close()
                raise ServerProblem("cannot run %s: %s" % (binary, e))
            try:
                self._wait_accepting()
                return self
            except ServerProblem as e:
                last_error = e
                if self.proc.poll() is None:
                    self._kill()
                self.log_file.close()
                # Another process may have taken the port between our probe and bind.
                if "in use" in self.log().lower():
                    continue
                raise
        raise last_error

    def _wait_accepting(self):
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            rc = self.proc.poll()
            if rc is not None:
                raise ServerProblem("atomdb exited with %s during start-up:\n%s" % (rc, self.log_tail()))
            try:
                with socket.create_connection((self.host, self.port), timeout=1.0):
                    return
            except OSError:
                time.sleep(0.05)
        raise ServerProblem("atomdb did not accept connections within %.0fs:\n%s"
                            % (START_TIMEOUT_S, self.log_tail()))

    def _kill(self):
        try:
            self.proc.send_signal(signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait()

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def wait_exit(self, timeout=STOP_TIMEOUT_S):
        """Waits for the process to exit on its own; returns its exit code or None."""
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None

    def stop(self):
        """Stops the server and returns a list of problems (empty when clean)."""
        problems = []
        if self.proc is None:
            return problems
        rc = self.proc.poll()
        if rc is not None and not self.exit_expected:
            problems.append("atomdb exited on its own with code %s before the test stopped it" % rc)
        if rc is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                rc = self.proc.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                problems.append("atomdb did not exit within %.0fs of SIGTERM; killed" % STOP_TIMEOUT_S)
                self._kill()
                rc = self.proc.returncode
        if rc != 0 and not problems:
            problems.append("atomdb exited with code %s (expected 0 after a clean stop)" % rc)
        self.log_file.close()
        text = self.log()
        for marker in SANITIZER_MARKERS:
            if marker in text:
                problems.append("sanitizer report in atomdb's stderr (%r)" % marker)
                break
        if problems:
            self.keep_files = True
            problems.append("--- atomdb stderr, debug lines left out (full log: %s) ---\n%s"
                            % (self.log_path, self.log_tail(120)))
        return problems

    def cleanup(self):
        """Removes the temporary dbpath and log, unless stop() found a problem."""
        if getattr(self, "keep_files", False):
            self.tmp._finalizer.detach()  # keep the log for whoever reads the failure
        else:
            self.tmp.cleanup()


def restart(old, kill=False):
    """Stops `old` (SIGKILL when `kill`) and starts a new server on its dbpath."""
    if kill:
        old.proc.kill()
        old.proc.wait()
        old.log_file.close()
    else:
        problems = old.stop()
        assert problems == [], problems
    old.proc = None  # stopped: a later stop() has nothing to report
    new = AtomdbServer()
    new.dbpath = old.dbpath
    new.start()
    return new


def discard(server):
    """Stops `server` if it still runs and removes its directory, without
    checking how it stopped: for the first server of a test that restarts
    it with kill=True, whose data the new server took over."""
    if server.alive():
        server.stop()
    server.cleanup()


def stop_all(servers):
    """Stops every server, removes their directories, and fails with the
    problems their logs show (sanitizer reports, unclean exits)."""
    problems = []
    for s in servers:
        problems += s.stop()
    for s in servers:
        s.cleanup()
    assert problems == [], problems


def wait_for(pred, timeout=10.0, what="condition"):
    """Returns once `pred()` is true; fails naming `what` after `timeout` s."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return
        time.sleep(0.01)
    raise AssertionError("timed out waiting for " + what)


CLUSTER_TIME_FIELDS = ("$clusterTime", "operationTime")


def without_cluster_time(reply):
    """A reply without $clusterTime and operationTime, which every reply of
    a replica-set member carries (they change with every commit); asserts
    they are there and have mongod's shape."""
    from bson.timestamp import Timestamp

    ct = reply.get("$clusterTime")
    assert isinstance(ct, dict) and isinstance(ct.get("clusterTime"), Timestamp) and \
        set(ct.get("signature", {})) == {"hash", "keyId"}, \
        "the reply carries $clusterTime {clusterTime, signature: {hash, keyId}}: %r" % (reply,)
    assert isinstance(reply.get("operationTime"), Timestamp), "the reply carries operationTime"
    return {k: v for k, v in reply.items() if k not in CLUSTER_TIME_FIELDS}


def raw_command(server, doc):
    """Sends one command as raw OP_MSG on a fresh connection (what a driver
    would refuse or rewrite) and returns the reply document."""
    import wireproto

    sock = wireproto.connect(server.host, server.port)
    try:
        return wireproto.command(sock, doc)
    finally:
        sock.close()
