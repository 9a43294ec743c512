"""Damaged WAL files: a torn last record, a flipped bit in the middle, --repair.

Each test writes numbered documents one insert at a time (so one WAL record
each) in --journal fsync mode with snapshots off, SIGKILLs the server, damages
the WAL on disk and starts a server on it.
"""

import random
import re

import pytest

from crashlib import (
    RECORD_HEADER_SIZE, ServerProblem, copy_dbpath, file_digest, flip_bit,
    offset_mentioned, read_segment, read_wal, snapshots, wal_segments)

FLAGS = ["--journal", "fsync", "--snapshot-interval", "0", "--snapshot-wal-mb", "4096"]
NDOCS = 30
# Words a log line about dropping a torn tail is expected to contain (one of).
TORN_WORDS = re.compile(r"torn|drop|truncat|partial|incomplete|short", re.I)


def marker(i):
    return "walrec-%04d" % i


def start_or_fail(server, what):
    try:
        server.start()
    except ServerProblem as e:
        pytest.fail("%s: %s" % (what, e), pytrace=False)


def write_numbered_docs(server, n=NDOCS):
    """Inserts documents 0..n-1 one by one, SIGKILLs the server and returns
    {i: the WAL record holding document i}."""
    start_or_fail(server, "first start")
    with server.client() as c:
        coll = c.crash.wal
        for i in range(n):
            coll.insert_one({"_id": i, "m": marker(i), "pad": "p" * (40 + 7 * i)})
    server.kill9()
    assert not snapshots(server.dbpath), \
        "no snapshot was written with --snapshot-interval 0 and a 4 GiB --snapshot-wal-mb " \
        "(files: %r)" % sorted(p.name for p in server.dbpath.iterdir())
    records = read_wal(server.dbpath)
    assert records, "the WAL holds records after %d fsync-acknowledged inserts (files: %r)" % (
        n, sorted(p.name for p in server.dbpath.iterdir()))
    bad = [r for r in records if not r.checksum_ok()]
    assert not bad, "every record of an undamaged WAL has a valid CRC-32C (bad: %r)" % bad[:3]
    by_doc = {}
    for i in range(n):
        holding = [r for r in records if marker(i).encode() in r.payload]
        assert len(holding) == 1, \
            "document %d (one insert command) is in exactly one WAL record (found in %r)" % (i, holding)
        by_doc[i] = holding[0]
    order = [by_doc[i].lsn for i in range(n)]
    assert order == sorted(order) and len(set(order)) == n, \
        "the inserts' records have increasing LSNs in insert order (%r)" % order
    return by_doc


def ids_present(server):
    with server.client() as c:
        return sorted((d["_id"] for d in c.crash.wal.find()), key=lambda x: (isinstance(x, str), x))


def test_a_torn_last_wal_record_is_dropped_and_the_server_starts(crash_server, tmp_path):
    origin = crash_server(*FLAGS)
    by_doc = write_numbered_docs(origin)
    last = by_doc[NDOCS - 1]
    segs = wal_segments(origin.dbpath)
    assert last.segment == segs[-1], "the last insert is in the newest segment (%s, newest %s)" % (
        last.segment.name, segs[-1].name)
    records, tail = read_segment(last.segment)
    assert records[-1].offset == last.offset and tail == 0, \
        "the last insert's record is the last thing in its segment (last record %r, %d stray bytes)" % (
            records[-1], tail)
    pristine = copy_dbpath(origin.dbpath, tmp_path / "pristine")

    size = RECORD_HEADER_SIZE + last.length
    rng = random.Random()
    cuts = sorted({1, 4, 8, RECORD_HEADER_SIZE - 1, RECORD_HEADER_SIZE, RECORD_HEADER_SIZE + 1,
                   rng.randrange(RECORD_HEADER_SIZE + 1, size - 1), size - 1})
    for cut in cuts:
        where = "[last record cut to %d of its %d bytes]" % (cut, size)
        d = copy_dbpath(pristine, tmp_path / ("cut%d" % cut))
        seg = d / last.segment.name
        with open(seg, "r+b") as f:
            f.truncate(last.offset + cut)
        server = crash_server(*FLAGS, dbpath=d)
        start_or_fail(server, "%s the server starts on a WAL whose last record is torn" % where)
        log = server.log()
        assert TORN_WORDS.search(log), \
            "%s the server logs that it dropped the torn record (no line matching %s in:\n%s)" % (
                where, TORN_WORDS.pattern, server.log_tail(30))
        assert ids_present(server) == list(range(NDOCS - 1)), \
            "%s every complete record is replayed and the torn one is not (got ids %r)" % (
                where, ids_present(server))

        # Writing after the recovery must not leave the torn bytes in the middle of the log.
        with server.client() as c:
            c.crash.wal.insert_one({"_id": "after-tear", "m": "after"})
        server.kill9()
        start_or_fail(server, "%s restart after a write that followed the torn-tail recovery" % where)
        want = list(range(NDOCS - 1)) + ["after-tear"]
        got = ids_present(server)
        assert sorted(map(str, got)) == sorted(map(str, want)), \
            "%s the write made after dropping the torn record survives the next kill -9 (got %r)" % (
                where, got)
        problems = server.stop()
        assert not problems, "%s clean stop:\n%s" % (where, "\n".join(problems))


def damage(record, where):
    """Flips a bit in `record` on disk, in its payload or in its stored
    checksum; returns the flipped byte's offset in the segment."""
    if where == "payload":
        off = record.offset + RECORD_HEADER_SIZE + record.length // 2
    else:
        off = record.offset + 4
    flip_bit(record.segment, off, bit=3)
    return off


@pytest.mark.parametrize("where", ["payload", "checksum"])
def test_a_flipped_bit_in_the_middle_of_the_wal_stops_start_up_and_names_the_offset(
        crash_server, tmp_path, where):
    server = crash_server(*FLAGS)
    by_doc = write_numbered_docs(server)
    victim = by_doc[NDOCS // 2]
    flipped = damage(victim, where)
    before = {p.name: file_digest(p) for p in server.dbpath.iterdir() if p.is_file() and p.name != "atomdb.lock"}

    rc, out = server.start_expecting_refusal()
    assert rc is not None, \
        "the server refuses to start on a WAL with a bad %s in record %r (it kept running):\n%s" % (
            where, victim, out[-3000:])
    assert rc != 0, "the server exits non-zero on a bad checksum mid-WAL (exit %d):\n%s" % (rc, out[-3000:])
    assert victim.segment.name in out, \
        "the start-up error names the damaged file %s:\n%s" % (victim.segment.name, out[-3000:])
    assert offset_mentioned(out, victim.offset) or offset_mentioned(out, flipped), \
        "the start-up error names the byte offset of the damaged record (%d) or byte (%d):\n%s" % (
            victim.offset, flipped, out[-3000:])
    after = {p.name: file_digest(p) for p in server.dbpath.iterdir() if p.is_file() and p.name != "atomdb.lock"}
    assert after == before, \
        "a refused start leaves every data file as it was (before %r, after %r)" % (before, after)


def test_repair_keeps_a_copy_and_truncates(crash_server, tmp_path):
    server = crash_server(*FLAGS)
    by_doc = write_numbered_docs(server)
    k = NDOCS // 2
    victim = by_doc[k]
    damage(victim, "payload")
    originals = {p.name: p.read_bytes() for p in server.dbpath.iterdir()
                 if p.is_file() and p.name != "atomdb.lock"}

    server.extra_args = FLAGS + ["--repair"]
    start_or_fail(server, "the server starts with --repair on a WAL with a bad checksum mid-log")
    backups = [p for p in server.dbpath.iterdir() if p.is_dir() and p.name.startswith("repair-backup-")]
    assert len(backups) == 1, "--repair made one repair-backup-<time>/ directory in the dbpath (found %r)" % (
        [p.name for p in server.dbpath.iterdir()],)
    for name, data in originals.items():
        copy = backups[0] / name
        assert copy.is_file(), "--repair kept a copy of %s in %s (it has %r)" % (
            name, backups[0].name, sorted(p.name for p in backups[0].iterdir()))
        assert copy.read_bytes() == data, "the copy of %s in %s is the original, damage included" % (
            name, backups[0].name)

    got = ids_present(server)
    assert got == list(range(k)), \
        "after --repair the documents before the damaged record are there and nothing from it on " \
        "(want 0..%d, got %r)" % (k - 1, got)
    seg = server.dbpath / victim.segment.name
    if seg.exists():
        data = seg.read_bytes()
        assert data[:victim.offset] == originals[victim.segment.name][:victim.offset], \
            "--repair keeps the WAL before the damage byte for byte"
        records, tail = read_segment(seg)
        assert all(r.checksum_ok() for r in records) and tail == 0, \
            "after --repair every record in %s has a valid checksum (records %r, %d stray bytes)" % (
                seg.name, records, tail)
        assert not any(marker(i).encode() in r.payload for r in records for i in range(k, NDOCS)), \
            "after --repair %s holds no record from the damaged one on" % seg.name

    with server.client() as c:
        c.crash.wal.insert_one({"_id": "after-repair"})
    server.kill9()
    server.extra_args = list(FLAGS)
    start_or_fail(server, "the repaired dbpath starts without --repair after a kill -9")
    got = ids_present(server)
    assert sorted(map(str, got)) == sorted(map(str, list(range(k)) + ["after-repair"])), \
        "the repaired data plus the write made after the repair survive kill -9 (got %r)" % got
