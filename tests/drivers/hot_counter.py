"""The hot-counter client of the long-operation tests (test_long_ops.py,
test_txn_yield.py): its own process doing $inc on one document until told
to stop, so a test can count the requests served while a long one ran,
and the OpSpans (name, start, end) of the long operations it times."""

import subprocess
import sys
import tempfile
import time
from pathlib import Path

# Runs in the child: $inc on hot.counter {_id: 1} until the stop file
# appears; writes one line (a monotonic instant) per acknowledged increment.
COUNTER = r"""
import os, sys, time
from pymongo import MongoClient
uri, stop, out = sys.argv[1:4]
c = MongoClient(uri, serverSelectionTimeoutMS=10000)
col = c.hot.counter
with open(out, "w") as f:
    while not os.path.exists(stop):
        col.update_one({"_id": 1}, {"$inc": {"n": 1}})
        f.write("%.6f\n" % time.monotonic())
        f.flush()
"""


class HotCounter:
    """The hot-counter process on `server`; after `finish()`, `inside(t0, t1)`
    and `during(t0, t1)` tell what it saw acknowledged between two
    monotonic instants."""

    def __init__(self, server):
        self.dir = tempfile.TemporaryDirectory(prefix="atomdb-counter-")
        self.stop_file = Path(self.dir.name) / "stop"
        self.out = Path(self.dir.name) / "acks"
        self.proc = subprocess.Popen([sys.executable, "-c", COUNTER,
                                      server.uri("directConnection=true"),
                                      str(self.stop_file), str(self.out)])
        for _ in range(200):  # started: its first increments are acknowledged
            if self.out.exists() and self.out.stat().st_size > 100:
                break
            time.sleep(0.05)

    def finish(self):
        """Stops the process (which must exit cleanly); the number of
        increments it saw acknowledged."""
        self.stop_file.touch()
        assert self.proc.wait(timeout=60) == 0, "the counter process exited cleanly"
        self.acks = [float(x) for x in self.out.read_text().split()]
        self.dir.cleanup()
        return len(self.acks)

    def inside(self, t0, t1):
        """How many increments were acknowledged between t0 and t1."""
        return sum(1 for t in self.acks if t0 < t < t1)

    def during(self, t0, t1):
        """That count and the 99th percentile gap between those increments."""
        inside = [t for t in self.acks if t0 < t < t1]
        gaps = sorted(b - a for a, b in zip(inside, inside[1:])) or [0.0]
        return len(inside), gaps[min(len(gaps) - 1, int(len(gaps) * 0.99))]


class LosslessCounter(HotCounter):
    """The hot counter from n = 0 (through the client `c`), whose every
    acknowledged increment must be in the document at the end."""

    def __init__(self, server, c):
        c.hot.counter.replace_one({"_id": 1}, {"_id": 1, "n": 0}, upsert=True)
        self.c = c
        super().__init__(server)

    def finish(self):
        acks = super().finish()
        assert self.c.hot.counter.find_one({"_id": 1})["n"] == acks, \
            "no increment was lost: the counter equals the acknowledged increments"
        return acks


class OpSpans(list):
    """(name, t0, t1): when each operation run through `timed` ran."""

    def timed(self, name, fn):
        """Runs `fn`, notes its span under `name` and returns its result."""
        t0 = time.monotonic()
        try:
            return fn()
        finally:
            self.append((name, t0, time.monotonic()))
