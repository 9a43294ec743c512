"""Power-loss simulation (tests/powerloss/powerloss.py, docs/reliability.md):
a workload under --journal fsync recorded by the plshim.so LD_PRELOAD
library, rebuilt as a power cut at many points would leave the --dbpath
(synced data plus any prefix of unsynced writes), and reopened: every
acknowledged write is kept, nothing is invented, every collection
validates. The second test shows the checker fails when a sync is lost."""

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "powerloss"))

import powerloss  # noqa: E402


def require_shim():
    if not powerloss.shim_path().exists():
        pytest.fail("the power-loss recorder %s is not built (cmake builds plshim.so in a "
                    "build without sanitizers; set PLSHIM)" % powerloss.shim_path(), pytrace=False)


def test_every_power_cut_keeps_every_acknowledged_write():
    require_shim()
    lines = []
    seed = int(os.environ.get("POWERLOSS_SEED", "0")) or None
    problems = powerloss.run(n_ops=120, n_cuts=14, seed=seed, out=lines.append)
    print("\n".join(lines))
    assert problems == [], "\n".join(lines)


def test_the_checker_reports_writes_a_lost_sync_would_lose():
    require_shim()
    lines = []
    problems = powerloss.run(n_ops=40, n_cuts=4, seed=7, out=lines.append, forget_syncs=True,
                             variants=("synced",))
    assert any("acknowledged insert" in p and "lost" in p for p in problems), "\n".join(lines)
