#!/usr/bin/python3
"""Power-loss simulation for atomdb's data directory.

kill -9 keeps whatever reached the page cache; a power cut keeps only what
was synced. This runs a workload against atomdb --journal fsync with the
plshim.so LD_PRELOAD library recording every write, truncate, fsync,
rename and unlink under the --dbpath (with CLOCK_MONOTONIC times), then
rebuilds the directory as a power cut after many different operations
would have left it — each file's synced content plus a prefix of its
unsynced writes (none, all, or a random prefix whose last write is torn at
a random byte), and the directory entries as of the last directory fsync
or as the process last saw them — and restarts atomdb on each. Every
rebuilt directory must open (recovery, then validate on every
collection), keep every write acknowledged before the cut, hold no
document that was never written, and keep the counter between the
increments acknowledged and those sent before the cut.

Model (as ALICE and CrashMonkey do, simplified): a file's data is durable
once fsync/fdatasync on it returned; a directory entry (create, rename,
unlink) once fsync on the directory returned; unsynced writes to a file
persist in order, as any prefix, the last one possibly torn.

usage: powerloss.py [--ops N] [--cuts N] [--seed S] [--keep DIR]
  (ATOMDB_BIN and PLSHIM set the binary and the shim; defaults build/.)
"""
import argparse
import os
import random
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
sys.path.insert(0, str(REPO / "tests" / "crash"))
sys.path.insert(0, str(REPO / "tests" / "drivers"))

from pymongo import MongoClient  # noqa: E402

from crashlib import CrashServer  # noqa: E402
from atomdb_testlib import ServerProblem, free_port  # noqa: E402

OP_OPEN, OP_WRITE, OP_TRUNCATE, OP_SYNC, OP_RENAME, OP_UNLINK, OP_CLOSE = range(1, 8)
OP_NAMES = {OP_OPEN: "open", OP_WRITE: "write", OP_TRUNCATE: "truncate", OP_SYNC: "sync",
            OP_RENAME: "rename", OP_UNLINK: "unlink", OP_CLOSE: "close"}
O_CREAT, O_TRUNC = os.O_CREAT, os.O_TRUNC
JOURNAL_ARGS = ["--journal", "fsync", "--snapshot-interval", "0", "--snapshot-wal-mb", "4096"]


def atomdb_bin():
    return Path(os.environ.get("ATOMDB_BIN", REPO / "build" / "atomdb"))


def shim_path():
    return Path(os.environ.get("PLSHIM", atomdb_bin().parent / "plshim.so"))


# --- the recorded run ----------------------------------------------------------

class Workload:
    """Inserts, deletes and a counter, each with its send and ack times."""

    def __init__(self, n_ops, rng):
        self.n_ops = n_ops
        self.rng = rng
        self.inserts = {}   # _id -> (send_ns, ack_ns or None, value)
        self.deletes = {}   # _id -> (send_ns, ack_ns or None)
        self.incs = []      # (send_ns, ack_ns or None)

    def run(self, port, on_snapshot_point):
        c = MongoClient("127.0.0.1", port, serverSelectionTimeoutMS=20000, retryWrites=False,
                        directConnection=True)
        coll = c.test.pl
        try:
            for i in range(self.n_ops):
                if i in (self.n_ops // 3, 2 * self.n_ops // 3):
                    on_snapshot_point(c)
                r = self.rng.random()
                if r < 0.2:
                    s = time.monotonic_ns()
                    coll.update_one({"_id": "ctr"}, {"$inc": {"n": 1}}, upsert=True)
                    self.incs.append((s, time.monotonic_ns()))
                elif r < 0.3 and len(self.deletes) < len(self.inserts):
                    # a document still there (each _id is inserted once)
                    victim = self.rng.choice(sorted(k for k in self.inserts if k not in self.deletes))
                    s = time.monotonic_ns()
                    coll.delete_one({"_id": victim})
                    self.deletes[victim] = (s, time.monotonic_ns())
                else:
                    v = "v%d-" % i + "x" * self.rng.randrange(0, 300)
                    s = time.monotonic_ns()
                    coll.insert_one({"_id": i, "v": v})
                    self.inserts[i] = (s, time.monotonic_ns(), v)
        finally:
            c.close()

    def check(self, docs, cut_ns):
        """Problems with the documents `docs` recovered after a cut at `cut_ns`."""
        problems = []
        ctr = docs.pop("ctr", None)
        for _id, doc in docs.items():
            if _id not in self.inserts:
                problems.append("document %r was never written (invented)" % (_id,))
            elif self.inserts[_id][0] >= cut_ns:
                problems.append("document %r was sent after the cut, yet it is there" % (_id,))
            elif doc.get("v") != self.inserts[_id][2]:
                problems.append("document %r holds %r, not what was written" % (_id, doc))
            elif _id in self.deletes and self.deletes[_id][1] < cut_ns:
                problems.append("document %r was deleted (acknowledged) before the cut, "
                                "yet it is there" % (_id,))
        for _id, (s, a, _v) in self.inserts.items():
            deleted_maybe = _id in self.deletes and self.deletes[_id][0] < cut_ns
            if a < cut_ns and not deleted_maybe and _id not in docs:
                problems.append("acknowledged insert %r is lost" % (_id,))
        acked = sum(1 for s, a in self.incs if a < cut_ns)
        sent = sum(1 for s, a in self.incs if s < cut_ns)
        n = ctr.get("n", 0) if ctr else 0
        if not acked <= n <= sent:
            problems.append("counter is %d: %d increments were acknowledged and %d sent "
                            "before the cut" % (n, acked, sent))
        return problems

    def acknowledged(self):
        return len(self.inserts) + len(self.deletes) + len(self.incs)


def record(workdir, n_ops, rng):
    """Runs the workload under the shim; returns (ops, workload)."""
    dbpath = workdir / "recorded"
    dbpath.mkdir()
    log = workdir / "ops.bin"
    env = dict(os.environ, LD_PRELOAD=str(shim_path()), PLSHIM_DIR=str(dbpath),
               PLSHIM_LOG=str(log))
    port = free_port()
    args = [str(atomdb_bin()), "--bind", "127.0.0.1", "--port", str(port), "--dbpath",
            str(dbpath), "--log-level", "warn"] + JOURNAL_ARGS
    out = open(workdir / "recorded.log", "wb")
    proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=out, stderr=out, env=env)
    wl = Workload(n_ops, rng)

    def snapshot(c):  # {fsync: 1} writes a snapshot, rotates the log and prunes
        before = set(p.name for p in dbpath.iterdir())
        c.admin.command("fsync")
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            now = set(p.name for p in dbpath.iterdir())
            if any(n.endswith(".adb") for n in now - before):
                break
            time.sleep(0.02)

    try:
        wl.run(port, snapshot)
        proc.send_signal(signal.SIGTERM)  # the clean stop's final snapshot is recorded too
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        out.close()
    if proc.returncode != 0:
        raise RuntimeError("the recorded atomdb exited with %s:\n%s" % (
            proc.returncode, (workdir / "recorded.log").read_text(errors="replace")[-3000:]))
    return parse_log(log.read_bytes(), str(dbpath)), wl


def parse_log(data, dbpath):
    ops = []
    pos = 0
    while pos < len(data):
        magic, op, t, fd, pid, pathlen, off, length = struct.unpack_from("<IIQiIIQQ", data, pos)
        if magic != 0x504C5348:
            raise ValueError("bad shim record at %d" % pos)
        pos += 44
        path = data[pos:pos + pathlen].decode()
        pos += pathlen
        payload = b""
        if op == OP_WRITE:
            payload = data[pos:pos + length]
            pos += length
        ops.append((op, t, (pid, fd), path, off, length, payload))
    return ops


# --- the file-system model -------------------------------------------------------

class Inode:
    def __init__(self):
        self.data = bytearray()   # what the process sees
        self.durable = b""        # what survives a power cut
        self.pending = []         # ("w", off, bytes) / ("t", len) since the last sync

    def apply(self, buf, change, tear=None):
        if change[0] == "t":
            del buf[change[1]:]
            return
        _, off, payload = change
        if tear is not None:
            payload = payload[:tear]
        if len(buf) < off:
            buf.extend(b"\0" * (off - len(buf)))
        buf[off:off + len(payload)] = payload


class Model:
    def __init__(self, dbpath, forget_syncs=False):
        self.dbpath = dbpath
        # self-test: treat fdatasync of log segments as doing nothing, so the
        # checker must report acknowledged writes lost
        self.forget_syncs = forget_syncs
        self.names = {}     # volatile directory: name -> Inode
        self.durable = {}   # directory as of its last fsync
        self.fds = {}       # (pid, fd) -> Inode, or "dir"

    def fd(self, key):
        """The open file (pid, fd) names; a forked child's inherited fds are
        its parent's."""
        if key in self.fds:
            return self.fds[key]
        for (pid, fd), ino in self.fds.items():
            if fd == key[1]:
                return ino
        raise ValueError("no open file for fd %d of process %d" % (key[1], key[0]))

    def step(self, op):
        kind, _t, fd, path, off, length, payload = op
        if kind == OP_OPEN:
            if path == self.dbpath:
                self.fds[fd] = "dir"
                return
            name = os.path.relpath(path, self.dbpath)
            ino = self.names.get(name)
            if ino is None:
                if not off & O_CREAT:
                    raise ValueError("open of %s that the model does not have" % name)
                ino = self.names[name] = Inode()
            if off & O_TRUNC and ino.data:
                ino.pending.append(("t", 0))
                del ino.data[:]
            self.fds[fd] = ino
        elif kind == OP_WRITE:
            ino = self.fd(fd)
            change = ("w", off, payload)
            ino.apply(ino.data, change)
            ino.pending.append(change)
        elif kind == OP_TRUNCATE:
            ino = self.fd(fd)
            change = ("t", off)
            ino.apply(ino.data, change)
            ino.pending.append(change)
        elif kind == OP_SYNC:
            ino = self.fd(fd)
            if ino == "dir":
                self.durable = dict(self.names)
            elif self.forget_syncs and ino.data[:8] == b"ATOMDBW1":
                pass
            else:
                ino.durable = bytes(ino.data)
                ino.pending = []
        elif kind == OP_RENAME:
            old, new = path.split("\0")
            o, n = os.path.relpath(old, self.dbpath), os.path.relpath(new, self.dbpath)
            self.names[n] = self.names.pop(o)
        elif kind == OP_UNLINK:
            self.names.pop(os.path.relpath(path, self.dbpath), None)
        elif kind == OP_CLOSE:
            self.fds.pop(fd, None)

    def crash_state(self, variant, rng):
        """{name: bytes} as a power cut now could leave the directory."""
        if variant == "synced":
            names, mode = self.durable, "none"
        elif variant == "all":
            names, mode = self.names, "all"
        else:
            names, mode = rng.choice([self.durable, self.names]), "prefix"
        files = {}
        for name, ino in names.items():
            buf = bytearray(ino.durable)
            if mode == "all":
                changes, tear = ino.pending, None
            elif mode == "prefix" and ino.pending:
                k = rng.randrange(0, len(ino.pending) + 1)
                changes, tear = ino.pending[:k], None
                if k < len(ino.pending) and ino.pending[k][0] == "w" and rng.random() < 0.7:
                    changes = ino.pending[:k + 1]
                    tear = rng.randrange(0, len(ino.pending[k][2]) + 1)
            else:
                changes, tear = [], None
            for i, ch in enumerate(changes):
                ino.apply(buf, ch, tear if i == len(changes) - 1 else None)
            files[name] = bytes(buf)
        return files


# --- checking one crash state ------------------------------------------------------

def check_state(files, cut_ns, wl, workdir, label):
    d = workdir / "state"
    if d.exists():
        shutil.rmtree(d)
    d.mkdir()
    for name, data in files.items():
        if name == "atomdb.lock":
            continue
        (d / name).parent.mkdir(parents=True, exist_ok=True)
        (d / name).write_bytes(data)
    server = CrashServer(extra_args=JOURNAL_ARGS, dbpath=d, log_level="warn")
    try:
        try:
            server.start()
        except ServerProblem as e:
            return ["%s: atomdb did not open the directory: %s" % (label, e)]
        with server.client() as c:
            docs = {doc["_id"]: doc for doc in c.test.pl.find()}
        problems = ["%s: %s" % (label, p) for p in wl.check(docs, cut_ns)]
        problems += ["%s: %s" % (label, p) for p in server.validate_all()]
        server.kill9()
        return problems
    finally:
        if server.proc is not None:
            server.kill9()
        server.cleanup()


def choose_cuts(ops, n, rng):
    """Cut points: just before and just after syncs, renames and unlinks (where
    durability changes), the rest anywhere; always the very end."""
    interesting = [i for i, op in enumerate(ops) if op[0] in (OP_SYNC, OP_RENAME, OP_UNLINK)]
    cuts = set([len(ops)])
    while len(cuts) < n and (interesting or len(cuts) < len(ops)):
        if interesting and rng.random() < 0.7:
            i = rng.choice(interesting)
            cuts.add(i + rng.choice((0, 1)))
        else:
            cuts.add(rng.randrange(1, len(ops) + 1))
    return sorted(cuts)


def run(n_ops=150, n_cuts=30, seed=None, keep=None, out=print, forget_syncs=False,
        variants=("synced", "all", "prefix")):
    seed = seed if seed is not None else random.randrange(1 << 30)
    rng = random.Random(seed)
    workdir = Path(keep) if keep else Path(tempfile.mkdtemp(prefix="atomdb-powerloss-"))
    workdir.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    problems = []
    try:
        ops, wl = record(workdir, n_ops, rng)
        counts = {}
        for op in ops:
            counts[OP_NAMES[op[0]]] = counts.get(OP_NAMES[op[0]], 0) + 1
        out("powerloss: seed %d, %d operations recorded %s, %d acknowledged writes" % (
            seed, len(ops), counts, wl.acknowledged()))
        cuts = choose_cuts(ops, n_cuts, rng)
        model = Model(str(workdir / "recorded"), forget_syncs)
        done = 0
        states = 0
        for cut in cuts:
            while done < cut:
                model.step(ops[done])
                done += 1
            cut_ns = ops[cut][1] if cut < len(ops) else 1 << 63
            for variant in variants:
                files = model.crash_state(variant, rng)
                label = "cut %d/%d (%s, after %s)" % (cut, len(ops), variant,
                                                       OP_NAMES[ops[cut - 1][0]])
                problems += check_state(files, cut_ns, wl, workdir, label)
                states += 1
        out("powerloss: %d crash states at %d cut points checked in %.0f s, %d problems" % (
            states, len(cuts), time.monotonic() - t0, len(problems)))
        for p in problems[:30]:
            out("powerloss: " + p)
    finally:
        if not keep:
            shutil.rmtree(workdir, ignore_errors=True)
    return problems


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ops", type=int, default=150, help="workload operations")
    ap.add_argument("--cuts", type=int, default=30, help="cut points (3 crash states each)")
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--keep", default=None, help="keep the recording and states in DIR")
    ap.add_argument("--forget-syncs", action="store_true",
                    help="self-test: model log fdatasyncs as lost; problems must be reported")
    a = ap.parse_args()
    problems = run(a.ops, a.cuts, a.seed, a.keep, forget_syncs=a.forget_syncs)
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
