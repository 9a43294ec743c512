"""every acknowledged write survives kill -9.

Eight writer processes (writer.py) insert, upsert and $inc shared counters,
logging each write before sending it and again once it is acknowledged. The
server is SIGKILLed at a random moment, restarted on the same --dbpath, and
the data is checked against the logs. Rounds repeat on the same --dbpath, so
later rounds also recover from state that earlier recoveries (and the
snapshots taken meanwhile) produced.

CRASH_ROUNDS (default 20) sets the number of rounds per journal mode.
"""

import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

import pytest

from crashlib import HERE, ServerProblem, describe_difference, digest, dump, new_tmpdir

ROUNDS = int(os.environ.get("CRASH_ROUNDS", "20"))
WRITERS = 8
WRITER_MAX_S = 30          # a writer gives up after this long (the kill comes long before)
KILL_AFTER_S = (0.3, 1.6)  # the kill lands this long after every writer is ready

# Server flags per mode: "write" snapshots by WAL size (1 MiB, so snapshots
# happen inside rounds and a kill can land in one), "fsync" on a 1 s interval.
MODES = {
    "write": ["--journal", "write", "--snapshot-interval", "0", "--snapshot-wal-mb", "1"],
    "fsync": ["--journal", "fsync", "--snapshot-interval", "1", "--snapshot-wal-mb", "4096"],
}


def start_or_fail(server, what):
    try:
        server.start()
    except ServerProblem as e:
        pytest.fail("%s: %s" % (what, e), pytrace=False)


class Writers:
    """The writer processes, started once and driven round by round."""

    def __init__(self, logdir, rng):
        self.logdir = Path(logdir)
        self.procs = []
        self.errs = []
        for w in range(WRITERS):
            err = open(self.logdir / ("writer%d.stderr" % w), "wb")
            argv = [sys.executable, str(HERE / "writer.py"), str(w), str(rng.randrange(1 << 30))]
            if w == WRITERS - 1:
                argv.append("j")  # one writer asks for j:true on every write
            self.errs.append(err)
            self.procs.append(subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                               stderr=err))

    def stderr(self, w):
        self.errs[w].flush()
        return (self.logdir / ("writer%d.stderr" % w)).read_text(errors="replace")[-3000:]

    def expect(self, w, want):
        line = self.procs[w].stdout.readline().decode().strip()
        assert line == want, "writer %d says %r (got %r); its stderr:\n%s" % (w, want, line, self.stderr(w))

    def run_round(self, server, round_no, rng):
        """Lets every writer write, SIGKILLs the server at a random moment once
        all of them are writing, waits for them; returns their log paths."""
        logs = []
        for w, p in enumerate(self.procs):
            log = self.logdir / ("r%02d-w%d.log" % (round_no, w))
            logs.append(log)
            p.stdin.write(("round %s %d %s %d\n" % (
                server.uri("directConnection=true"), round_no, log, WRITER_MAX_S)).encode())
            p.stdin.flush()
        for w in range(WRITERS):
            self.expect(w, "ready")
        time.sleep(rng.uniform(*KILL_AFTER_S))
        rc = server.kill9()
        assert rc == -9, "the server was still running when killed (exit %r)\n%s" % (rc, server.log_tail())
        for w in range(WRITERS):
            # 0 = the connection failed (expected), 2 = never failed, 3 = unexpected error
            self.expect(w, "done 0")
        return logs

    def close(self):
        for p in self.procs:
            try:
                p.stdin.close()
            except OSError:
                pass
        for p in self.procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        for e in self.errs:
            e.close()


def read_log(path):
    """Returns (ops in order as (seq, op, acked)) for one writer log."""
    begun, acked, order = {}, set(), []
    for line in Path(path).read_text().splitlines():
        if line.startswith("B "):
            _, seq, js = line.split(" ", 2)
            begun[int(seq)] = json.loads(js)
            order.append(int(seq))
        elif line.startswith("A "):
            acked.add(int(line.split()[1]))
    return [(s, begun[s], s in acked) for s in order]


def fetch_state(client):
    docs = {d["_id"]: d for d in client.crash.docs.find()}
    counters = {d["_id"]: d.get("n", 0) for d in client.crash.counters.find()}
    return docs, counters


def check_round(mode, round_no, logs, known_docs, known_counters, docs, counters):
    """Compares the recovered state with what the writers' logs allow."""
    where = "[%s round %d]" % (mode, round_no)
    acked_inc = {}
    inflight_inc = {}
    touched = set()
    # for upsert keys: last acknowledged value and the in-flight value, if any
    upsert_last = {}
    upsert_inflight = {}
    acked_writes = 0
    for log in logs:
        ops = read_log(log)
        unacked = [(s, op) for s, op, a in ops if not a]
        assert len(unacked) <= 1, \
            "%s harness: writer log %s has at most one write in flight (%r)" % (where, log.name, unacked)
        for seq, op, acked in ops:
            kind = op["op"]
            acked_writes += acked
            if kind in ("inc", "fam"):
                target = acked_inc if acked else inflight_inc
                target[op["id"]] = target.get(op["id"], 0) + op["amt"]
            elif kind == "insert":
                touched.add(op["id"])
                if acked:
                    d = docs.get(op["id"])
                    assert d is not None, \
                        "%s acknowledged insert %s is present after restart" % (where, op["id"])
                    w = int(op["id"].split("-")[2])
                    want = {"_id": op["id"], "w": w, "n": seq, "pad": "x" * op["pad"]}
                    assert d == want, \
                        "%s acknowledged insert %s reads back as written (got %r)" % (
                            where, op["id"], {k: v for k, v in d.items() if k != "pad"})
            elif kind == "many":
                touched.update(op["ids"])
                if acked:
                    for k, i in enumerate(op["ids"]):
                        d = docs.get(i)
                        assert d is not None, \
                            "%s document %s of an acknowledged insert_many is present after restart" % (where, i)
                        assert d.get("n") == seq and d.get("k") == k, \
                            "%s document %s of an acknowledged insert_many reads back as written (got %r)" % (
                                where, i, d)
            elif kind == "upsert":
                touched.add(op["id"])
                if acked:
                    upsert_last[op["id"]] = op["v"]
                else:
                    upsert_inflight[op["id"]] = op["v"]

    for key, v in upsert_last.items():
        d = docs.get(key)
        allowed = {v} | ({upsert_inflight[key]} if key in upsert_inflight else set())
        assert d is not None, "%s acknowledged upsert %s is present after restart" % (where, key)
        assert d.get("v") in allowed, \
            "%s upserted %s holds its last acknowledged value %d%s (got %r)" % (
                where, key, v, " or the in-flight %d" % upsert_inflight[key] if key in upsert_inflight else "",
                d.get("v"))
    for key, v in upsert_inflight.items():
        if key in upsert_last:
            continue
        d = docs.get(key)
        prev = known_docs.get(key)
        applied = {"_id": key, "v": v} if prev is None else dict(prev, v=v)
        allowed = [prev, applied]
        assert d in allowed, \
            "%s upsert %s that was in flight is either applied or not, nothing else (got %r, before %r)" % (
                where, key, d, prev)

    for cid in sorted(set(acked_inc) | set(inflight_inc) | set(known_counters) | set(counters)):
        base = known_counters.get(cid, 0)
        lo = base + acked_inc.get(cid, 0)
        hi = lo + inflight_inc.get(cid, 0)
        got = counters.get(cid, 0)
        assert lo <= got <= hi, \
            "%s counter %s equals its acknowledged increments (%d before + %d acknowledged = %d, " \
            "up to %d with writes in flight), got %d" % (
                where, cid, base, acked_inc.get(cid, 0), lo, hi, got)

    for key, d in known_docs.items():
        if key not in touched:
            assert docs.get(key) == d, \
                "%s document %s untouched this round is unchanged by the restart (was %r, got %r)" % (
                    where, key, d, docs.get(key))
    for key in docs:
        assert key in known_docs or key in touched, \
            "%s document %s after restart was written by some writer (no phantom documents)" % (where, key)
    return acked_writes


@pytest.mark.timeout(900)
@pytest.mark.parametrize("mode", sorted(MODES))
def test_every_acknowledged_write_survives_kill_9(crash_server, mode):
    rng = random.Random(os.environ.get("CRASH_SEED", "%s-%d" % (mode, time.time_ns())))
    server = crash_server(*MODES[mode])
    logdir = new_tmpdir("atomdb-crash-logs-")
    known_docs, known_counters = {}, {}
    total_acked = 0
    start_or_fail(server, "first start in %s mode" % mode)
    writers = Writers(logdir.name, rng)
    try:
        for round_no in range(ROUNDS):
            logs = writers.run_round(server, round_no, rng)
            start_or_fail(server, "[%s round %d] restart after kill -9" % (mode, round_no))
            with server.client() as client:
                docs, counters = fetch_state(client)
            total_acked += check_round(mode, round_no, logs, known_docs, known_counters, docs, counters)
            known_docs, known_counters = docs, counters
    finally:
        writers.close()
    assert total_acked > ROUNDS * WRITERS, \
        "the writers got writes acknowledged (%d in %d rounds)" % (total_acked, ROUNDS)

    # A clean stop snapshots; the next start must see exactly the same data.
    with server.client() as client:
        before = dump(client)
    problems = server.stop()
    assert not problems, "a clean stop after %d recoveries is clean:\n%s" % (ROUNDS, "\n".join(problems))
    start_or_fail(server, "start after the clean stop")
    with server.client() as client:
        after = dump(client)
    assert digest(before) == digest(after), \
        "a clean stop and start keep every document:\n%s" % describe_difference(before, after)
    logdir.cleanup()
