"""The dbpath lock: one server per data directory."""

import re

import pytest

from crashlib import ServerProblem

FLAGS = ["--journal", "write", "--snapshot-interval", "0", "--snapshot-wal-mb", "4096"]
LOCK_WORDS = re.compile(r"lock|in use|already|another", re.I)


def start_or_fail(server, what):
    try:
        server.start()
    except ServerProblem as e:
        pytest.fail("%s: %s" % (what, e), pytrace=False)


def data_files(dbpath):
    return {p.name: p.read_bytes() for p in dbpath.iterdir() if p.is_file() and p.name != "atomdb.lock"}


def test_a_second_server_on_the_same_dbpath_refuses_to_start(crash_server):
    first = crash_server(*FLAGS)
    start_or_fail(first, "first server")
    with first.client() as c:
        c.crash.lock.insert_one({"_id": "before", "v": 1})
    assert (first.dbpath / "atomdb.lock").exists(), \
        "a running server has atomdb.lock in its dbpath (files: %r)" % sorted(p.name for p in first.dbpath.iterdir())
    files_before = data_files(first.dbpath)

    rc, out = first.start_expecting_refusal()
    assert rc is not None, "a second server on the same dbpath exits instead of running:\n%s" % out[-3000:]
    assert rc != 0, "a second server on the same dbpath exits non-zero (exit %d):\n%s" % (rc, out[-3000:])
    assert LOCK_WORDS.search(out), \
        "the second server's error says the dbpath is locked / in use:\n%s" % out[-3000:]
    assert str(first.dbpath) in out or "atomdb.lock" in out, \
        "the second server's error names the dbpath or its lock file (%s):\n%s" % (first.dbpath, out[-3000:])
    assert data_files(first.dbpath) == files_before, \
        "the refused second server changed no data file"

    assert first.alive(), "the first server keeps running:\n%s" % first.log_tail()
    with first.client() as c:
        assert c.crash.lock.find_one({"_id": "before"}) == {"_id": "before", "v": 1}, \
            "the first server still serves its data"
        c.crash.lock.insert_one({"_id": "after", "v": 2})

    # kill -9 releases the lock: the next start on the same dbpath works.
    first.kill9()
    start_or_fail(first, "a server starts on a dbpath whose previous owner was killed with -9")
    with first.client() as c:
        got = sorted(d["_id"] for d in c.crash.lock.find())
    assert got == ["after", "before"], "both writes survive (got %r)" % got
