"""Transactions checked the way Jepsen's Elle checks databases: random
list-append transactions from 8 processes (listappend.py), the dependency
graph inferred from what they read, and every anomaly the isolation level
forbids counted. First the checker itself is shown to catch each anomaly
(hand-made histories, a run without transactions, and a server built with
fault injection that skips the write-conflict check or the serializable
validation); then atomdb must show none at snapshot isolation (G2, write
skew, is allowed there, as in mongod and PostgreSQL's REPEATABLE READ) and
none at all, G2 included, at the serializable level."""

import os
import sys
from pathlib import Path

import pymongo
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "drivers"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import listappend  # noqa: E402
from scenario_lib import atomdb_running  # noqa: E402

PROCS = 8
SECONDS = float(os.environ.get("LISTAPPEND_SECONDS", "30"))


def _fault_binary():
    b = os.environ.get("ATOMDB_FAULT_BIN")
    if not b or not Path(b).exists():
        pytest.skip("needs ATOMDB_FAULT_BIN: an atomdb built with -DFAULT_INJECTION=ON "
                    "(scripts/test.sh passes build-asan/atomdb)")
    return b


def _describe(result):
    lines = ["stats %s" % result["stats"], "anomalies %s" % result["anomalies"]]
    for kind, ex in sorted(result["examples"].items()):
        lines += ["  %s: %s" % (kind, e) for e in ex[:3]]
    return "\n".join(lines)


# ---- the checker on hand-made histories: each anomaly is found

def _t(status, *ops):
    return {"proc": 0, "status": status, "ops": [list(o) for o in ops]}


def test_checker_finds_g0_dirty_write_cycle():
    # T0 and T1 both append to keys 0 and 1, in opposite orders
    h = [_t("ok", ("append", 0, 1), ("append", 1, 2)), _t("ok", ("append", 0, 3), ("append", 1, 4))]
    r = listappend.check(h, {0: [1, 3], 1: [4, 2]})
    assert r["anomalies"].get("G0"), "a ww cycle is G0: %s" % r["anomalies"]


def test_checker_finds_g1a_aborted_read():
    h = [_t("fail", ("append", 0, 1)), _t("ok", ("r", 0, [1]))]
    r = listappend.check(h, {0: []})
    assert r["anomalies"].get("G1a") or r["anomalies"].get("not-prefix"), \
        "reading an aborted append is G1a: %s" % r["anomalies"]
    r = listappend.check(h, {0: [1]})
    assert r["anomalies"].get("G1a") and r["anomalies"].get("aborted-visible"), \
        "an aborted append in the final list and read: %s" % r["anomalies"]


def test_checker_finds_g1c_circular_information_flow():
    # T0 appends 0:1 and reads T1's 1:2; T1 appends 1:2 and reads T0's 0:1
    h = [_t("ok", ("append", 0, 1), ("r", 1, [2])), _t("ok", ("append", 1, 2), ("r", 0, [1]))]
    r = listappend.check(h, {0: [1], 1: [2]})
    assert r["anomalies"].get("G1c"), "a wr cycle is G1c: %s" % r["anomalies"]


def test_checker_finds_g_single_lost_update():
    # both read key 0 empty and both appended: T1 came after T0 (ww) but T1's
    # read missed T0's append (rw T1 -> T0): one rw edge closes the cycle
    h = [_t("ok", ("r", 0, []), ("append", 0, 1)), _t("ok", ("r", 0, []), ("append", 0, 2))]
    r = listappend.check(h, {0: [1, 2]})
    assert r["anomalies"].get("G-single"), "a lost update is G-single: %s" % r["anomalies"]
    assert "G-single" in listappend.forbidden_found(r, "snapshot"), "SI forbids G-single"


def test_checker_finds_g2_write_skew_and_allows_it_under_snapshot():
    # T0 reads key 1 empty, appends to 0; T1 reads key 0 empty, appends to 1
    h = [_t("ok", ("r", 1, []), ("append", 0, 1)), _t("ok", ("r", 0, []), ("append", 1, 2))]
    r = listappend.check(h, {0: [1], 1: [2]})
    assert r["anomalies"].get("G2"), "write skew is G2: %s" % r["anomalies"]
    assert not listappend.forbidden_found(r, "snapshot"), "SI allows G2"
    assert "G2" in listappend.forbidden_found(r, "serializable"), "serializable forbids G2"


def test_checker_finds_lost_append_and_non_prefix_reads():
    h = [_t("ok", ("append", 0, 1)), _t("ok", ("r", 0, [2]))]
    r = listappend.check(h, {0: [2]})
    assert r["anomalies"].get("lost-append"), "a committed append missing from the final list"
    h = [_t("ok", ("append", 0, 1)), _t("ok", ("append", 0, 2)), _t("ok", ("r", 0, [2]))]
    r = listappend.check(h, {0: [1, 2]})
    assert r["anomalies"].get("not-prefix"), "a read that is no prefix of the final order"


def test_checker_accepts_a_serial_history():
    h = [_t("ok", ("r", 0, []), ("append", 0, 1)), _t("ok", ("r", 0, [1]), ("append", 0, 2)),
         _t("ok", ("r", 0, [1, 2]), ("r", 1, []))]
    r = listappend.check(h, {0: [1, 2], 1: []})
    assert r["anomalies"] == {}, "a serial history has no anomaly: %s" % r["anomalies"]


# ---- the checker against broken variants of real runs

def test_checker_catches_operations_run_without_transactions():
    with atomdb_running(["--journal", "none"]) as uri:
        history, final = listappend.run(uri, procs=PROCS, seconds=4, naive=True)
    r = listappend.check(history, final)
    bad = listappend.forbidden_found(r, "snapshot")
    assert bad.get("G-single") or bad.get("G1c"), \
        "the same operations outside transactions break snapshot isolation:\n" + _describe(r)


def test_checker_catches_a_server_that_skips_the_write_conflict_check():
    binary = _fault_binary()
    with atomdb_running(["--journal", "none"], binary=binary) as uri:
        c = pymongo.MongoClient(uri)
        c.admin.command("atomdbFault", "txnSkipWriteConflictCheck")
        c.close()
        history, final = listappend.run(uri, procs=PROCS, seconds=6)
    r = listappend.check(history, final)
    bad = listappend.forbidden_found(r, "snapshot")
    assert bad.get("lost-append") or bad.get("G-single"), \
        "without first-committer-wins, appends computed from a stale snapshot overwrite each " \
        "other (lost updates) or G-single cycles appear:\n" + _describe(r)


def test_checker_catches_a_server_that_skips_the_serializable_validation():
    binary = _fault_binary()
    with atomdb_running(["--journal", "none", "--txn-isolation", "serializable"], binary=binary) as uri:
        c = pymongo.MongoClient(uri)
        c.admin.command("atomdbFault", "txnSkipReadValidation")
        c.close()
        history, final = listappend.run(uri, procs=PROCS, seconds=6)
    r = listappend.check(history, final)
    assert not listappend.forbidden_found(r, "snapshot"), \
        "still snapshot isolation:\n" + _describe(r)
    assert r["anomalies"].get("G2"), "without the read validation, write skew (G2) appears:\n" + \
        _describe(r)


# ---- atomdb itself

def test_snapshot_isolation_shows_no_forbidden_anomaly():
    with atomdb_running() as uri:
        history, final = listappend.run(uri, procs=PROCS, seconds=SECONDS)
    r = listappend.check(history, final)
    assert r["stats"]["committed"] > 500, "enough transactions committed: %s" % r["stats"]
    assert not listappend.forbidden_found(r, "snapshot"), \
        "no G0, G1a, G1b, G1c, G-single or lost/duplicate appends under snapshot isolation:\n" + \
        _describe(r)


def test_serializable_server_level_shows_no_anomaly_not_even_write_skew():
    with atomdb_running(["--txn-isolation", "serializable"]) as uri:
        history, final = listappend.run(uri, procs=PROCS, seconds=SECONDS * 2 / 3)
    r = listappend.check(history, final)
    assert r["stats"]["committed"] > 300, "enough transactions committed: %s" % r["stats"]
    assert not listappend.forbidden_found(r, "serializable"), \
        "no anomaly at all, G2 included, under --txn-isolation serializable:\n" + _describe(r)


def test_serializable_read_concern_level_shows_no_anomaly():
    with atomdb_running(["--journal", "none"]) as uri:
        history, final = listappend.run(uri, procs=PROCS, seconds=SECONDS / 3,
                                        level="serializable")
    r = listappend.check(history, final)
    assert r["stats"]["committed"] > 100, "enough transactions committed: %s" % r["stats"]
    assert not listappend.forbidden_found(r, "serializable"), \
        "readConcern {level: 'serializable'} isolates like the server level:\n" + _describe(r)
