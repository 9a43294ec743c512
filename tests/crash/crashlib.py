"""Helpers for the crash and recovery tests: a server that keeps one --dbpath
across restarts and can be killed with SIGKILL, a reader for the WAL file
format, and a digest of everything a server holds.

WAL segment format (the journal's interface): a 16-byte file header, then
records [u32 payload length][u32 crc32c][u64 lsn][payload BSON], little-endian.
"""

import hashlib
import os
import re
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "drivers"))

import bson  # noqa: E402
from bson.codec_options import CodecOptions  # noqa: E402
from bson.raw_bson import RawBSONDocument  # noqa: E402
from pymongo import MongoClient  # noqa: E402

from atomdb_testlib import (  # noqa: E402
    SANITIZER_MARKERS, AtomdbServer, ServerProblem, atomdb_bin, free_port)

WAL_HEADER_SIZE = 16
RECORD_HEADER_SIZE = 16
WAL_NAME = re.compile(r"^wal-([0-9a-fA-F]{16})\.log$")
SNAPSHOT_NAME = re.compile(r"^snapshot-([0-9a-fA-F]{16})\.adb$")
SNAPSHOT_TMP_NAME = re.compile(r"^snapshot-([0-9a-fA-F]{16})\.adb\.tmp$")

# How long a server that must refuse to start may take to exit.
REFUSE_TIMEOUT_S = 20.0


# --- servers -----------------------------------------------------------------

class CrashServer(AtomdbServer):
    """An AtomdbServer whose --dbpath survives kill9() and start() again.

    `dbpath` defaults to <tmp>/data as in AtomdbServer; every start appends to
    the same stderr log, so log() covers all the runs of this server."""

    def __init__(self, extra_args=(), dbpath=None, log_level="info"):
        super().__init__(extra_args=extra_args, log_level=log_level)
        if dbpath is not None:
            self.dbpath = Path(dbpath)
        self.starts = 0

    def start(self):
        self.starts += 1
        return super().start()

    def validate_all(self):
        """Runs validate {full: true} on every collection of every database
        of the running server: after recovery, every index must agree with
        the recovered documents. Returns a list of problems."""
        problems = []
        c = self.client()
        try:
            for d in c.admin.command("listDatabases", nameOnly=True)["databases"]:
                db = c[d["name"]]
                for info in db.command("listCollections", nameOnly=True)["cursor"]["firstBatch"]:
                    if info.get("type", "collection") != "collection":
                        continue
                    r = db.command("validate", info["name"], full=True)
                    if not r["valid"]:
                        problems.append("validate %s.%s after recovery: %s" %
                                        (d["name"], info["name"], r["errors"]))
        except Exception as e:  # a server that cannot answer is a problem too
            problems.append("validate after recovery failed: %r" % (e,))
        finally:
            c.close()
        return problems

    def stop(self):
        """Validates every collection (validate_all), then stops the server
        cleanly (SIGTERM); returns a list of problems. A second call, or one
        after kill9(), only checks the log for sanitizer reports."""
        if self.proc is None:
            found = self.sanitizer_problems()
            if found:
                return ["sanitizer report in atomdb's stderr (%r)\n%s" % (found[0], self.log_tail(120))]
            return []
        problems = self.validate_all() if self.proc.poll() is None else []
        problems += super().stop()
        self.proc = None
        return problems

    def kill9(self):
        """SIGKILLs the running server and waits for it; returns its exit code."""
        assert self.proc is not None, "kill9 needs a running server"
        rc = self.proc.poll()
        if rc is None:
            self.proc.send_signal(signal.SIGKILL)
            rc = self.proc.wait()
        self.log_file.close()
        self.proc = None
        return rc

    def client(self, **kw):
        """A pymongo client connected straight to this server."""
        kw.setdefault("serverSelectionTimeoutMS", 10000)
        kw.setdefault("socketTimeoutMS", 30000)
        kw.setdefault("connectTimeoutMS", 10000)
        return MongoClient(self.uri("directConnection=true"), **kw)

    def argv_with_port(self, port, extra_args=None):
        """The command line start() would use, on `port`."""
        args = self.extra_args if extra_args is None else list(extra_args)
        return [
            str(atomdb_bin()),
            "--bind", self.host,
            "--port", str(port),
            "--dbpath", str(self.dbpath),
            "--replSet", "rs0",
            "--advertise", "%s:%d" % (self.host, port),
            "--log-level", self.log_level,
        ] + list(args)

    def start_expecting_refusal(self, extra_args=None, timeout=REFUSE_TIMEOUT_S):
        """Runs the server on this dbpath expecting it to exit during start-up.

        Returns (exit code, combined stdout+stderr). Exit code None means it was
        still running after `timeout` (it was then killed)."""
        port = free_port()
        proc = subprocess.Popen(
            self.argv_with_port(port, extra_args), stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        try:
            out, _ = proc.communicate(timeout=timeout)
            return proc.returncode, out.decode(errors="replace")
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGKILL)
            out, _ = proc.communicate()
            return None, out.decode(errors="replace")

    def sanitizer_problems(self):
        """Sanitizer reports anywhere in this server's log (all runs)."""
        text = self.log()
        return [m for m in SANITIZER_MARKERS if m in text]


def finish(server):
    """Stops `server` cleanly (if running) and returns a list of problems."""
    return server.stop()


# --- files in the dbpath -------------------------------------------------------

def wal_segments(dbpath):
    """WAL segment paths in `dbpath`, oldest (lowest number) first."""
    found = []
    for p in Path(dbpath).iterdir():
        m = WAL_NAME.match(p.name)
        if m:
            found.append((int(m.group(1), 16), p))
    return [p for _, p in sorted(found)]


def snapshots(dbpath):
    """Finished snapshot paths in `dbpath`, oldest first."""
    found = []
    for p in Path(dbpath).iterdir():
        m = SNAPSHOT_NAME.match(p.name)
        if m:
            found.append((int(m.group(1), 16), p))
    return [p for _, p in sorted(found)]


def copy_dbpath(src, dst):
    """Copies the data files of `src` (not the lock file) into a new `dst`."""
    dst = Path(dst)
    if dst.exists():
        shutil.rmtree(dst)
    dst.mkdir(parents=True)
    for p in Path(src).iterdir():
        if p.name == "atomdb.lock":
            continue
        if p.is_dir():
            shutil.copytree(p, dst / p.name)
        else:
            shutil.copy2(p, dst / p.name)
    return dst


def file_digest(path):
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


# --- CRC-32C and WAL records -----------------------------------------------------

def _crc32c_table():
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_CRC_TABLE = _crc32c_table()


def crc32c(data, crc=0):
    crc ^= 0xFFFFFFFF
    for b in data:
        crc = _CRC_TABLE[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


class Record:
    """One WAL record as found on disk."""

    def __init__(self, segment, offset, length, crc, lsn, payload):
        self.segment = Path(segment)
        self.offset = offset          # byte offset of the record header
        self.length = length          # payload length from the header
        self.crc = crc
        self.lsn = lsn
        self.payload = payload

    @property
    def end(self):
        return self.offset + RECORD_HEADER_SIZE + self.length

    def checksum_ok(self):
        """True when the stored CRC-32C matches the payload (or lsn+payload, or
        the whole header without the crc plus payload: the interface does not
        say which bytes are covered, so any of these is accepted)."""
        lsn_bytes = struct.pack("<Q", self.lsn)
        len_bytes = struct.pack("<I", self.length)
        candidates = (self.payload, lsn_bytes + self.payload,
                      len_bytes + lsn_bytes + self.payload)
        return any(crc32c(c) == self.crc for c in candidates)

    def __repr__(self):
        return "Record(%s@%d, len=%d, lsn=%d)" % (self.segment.name, self.offset, self.length, self.lsn)


def read_segment(path):
    """Parses one segment. Returns (records, torn_tail_bytes): records are the
    complete ones in order; torn_tail_bytes counts bytes after the last
    complete record that do not form a complete record."""
    data = Path(path).read_bytes()
    records = []
    pos = WAL_HEADER_SIZE
    while pos + RECORD_HEADER_SIZE <= len(data):
        length, crc, lsn = struct.unpack_from("<IIQ", data, pos)
        end = pos + RECORD_HEADER_SIZE + length
        if end > len(data):
            break
        records.append(Record(path, pos, length, crc, lsn,
                              data[pos + RECORD_HEADER_SIZE:end]))
        pos = end
    return records, len(data) - pos


def read_wal(dbpath):
    """All complete records of every segment, oldest segment first."""
    out = []
    for seg in wal_segments(dbpath):
        out.extend(read_segment(seg)[0])
    return out


def flip_bit(path, offset, bit=0):
    """Flips one bit of the byte at `offset` in `path`."""
    with open(path, "r+b") as f:
        f.seek(offset)
        b = f.read(1)
        assert len(b) == 1, "offset %d is inside %s" % (offset, path)
        f.seek(offset)
        f.write(bytes([b[0] ^ (1 << bit)]))


def offset_mentioned(text, offset):
    """True when `text` names byte offset `offset` in decimal or hex."""
    forms = [r"\b%d\b" % offset, r"0x0*%x\b" % offset, r"0x0*%X\b" % offset]
    return any(re.search(f, text) for f in forms)


# --- what a server holds -----------------------------------------------------------

SYSTEM_DBS = ("admin", "local", "config")


def dump(client, dbs=None):
    """Everything a server holds: {db: {coll: {"docs": sorted raw BSON bytes,
    "indexes": sorted (name, key, unique)}}}. `dbs` defaults to every
    non-system database listDatabases reports."""
    raw = CodecOptions(document_class=RawBSONDocument)
    if dbs is None:
        dbs = [d for d in client.list_database_names() if d not in SYSTEM_DBS]
    out = {}
    for dbname in sorted(dbs):
        db = client.get_database(dbname, codec_options=raw)
        colls = {}
        for cname in sorted(db.list_collection_names()):
            coll = db[cname]
            docs = sorted(d.raw for d in coll.find({}, batch_size=1000))
            idx = sorted(
                (i["name"], bson.encode(i["key"]) if not isinstance(i["key"], RawBSONDocument) else i["key"].raw,
                 bool(i.get("unique", False)))
                for i in coll.list_indexes())
            colls[cname] = {"docs": docs, "indexes": idx}
        if colls:
            out[dbname] = colls
    return out


def digest(d):
    """A short hash of a dump()."""
    h = hashlib.sha256()
    for dbname in sorted(d):
        for cname in sorted(d[dbname]):
            h.update(("%s.%s\0" % (dbname, cname)).encode())
            for name, key, unique in d[dbname][cname]["indexes"]:
                h.update(name.encode() + b"\0" + key + (b"U" if unique else b"-"))
            for doc in d[dbname][cname]["docs"]:
                h.update(doc)
    return h.hexdigest()[:16]


def describe_difference(before, after, limit=8):
    """Readable list of what differs between two dump()s."""
    lines = []
    for dbname in sorted(set(before) | set(after)):
        b, a = before.get(dbname, {}), after.get(dbname, {})
        for cname in sorted(set(b) | set(a)):
            ns = "%s.%s" % (dbname, cname)
            if cname not in a:
                lines.append("%s: collection missing after restart" % ns)
                continue
            if cname not in b:
                lines.append("%s: collection appeared after restart" % ns)
                continue
            if b[cname]["indexes"] != a[cname]["indexes"]:
                lines.append("%s: indexes %r -> %r" % (
                    ns, [i[0] for i in b[cname]["indexes"]], [i[0] for i in a[cname]["indexes"]]))
            bd, ad = set(b[cname]["docs"]), set(a[cname]["docs"])
            for doc in sorted(bd - ad)[:limit]:
                lines.append("%s: lost/changed %r" % (ns, bson.decode(doc)))
            for doc in sorted(ad - bd)[:limit]:
                lines.append("%s: new/changed  %r" % (ns, bson.decode(doc)))
            if len(b[cname]["docs"]) != len(a[cname]["docs"]):
                lines.append("%s: %d docs before, %d after" % (
                    ns, len(b[cname]["docs"]), len(a[cname]["docs"])))
    return "\n".join(lines) if lines else "(no difference)"


def wait_for(predicate, timeout=10.0, interval=0.05):
    """Polls `predicate` until it returns a true value or `timeout` passes."""
    deadline = time.monotonic() + timeout
    while True:
        v = predicate()
        if v or time.monotonic() >= deadline:
            return v
        time.sleep(interval)


def new_tmpdir(prefix="atomdb-crash-"):
    return tempfile.TemporaryDirectory(prefix=prefix)
