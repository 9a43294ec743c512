"""The soak, short (scripts/soak.sh, docs/reliability.md): every seed
scenario at once, atomdb SIGKILLed every 20-40 s and restarted for one
minute; 0 acknowledged writes lost, every invariant held, RSS and file
descriptors flat. The second test runs it on --journal none, where every
kill loses data: the soak must say so."""

import os
import re
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SOAK = REPO / "tests" / "soak" / "soak.py"


def run_soak(*args, timeout):
    env = dict(os.environ)
    env.setdefault("ATOMDB_BIN", str(REPO / "build" / "atomdb"))
    p = subprocess.run(["nice", "-n", "10", "/usr/bin/python3", str(SOAK)] + list(args),
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env,
                       timeout=timeout)
    return p.returncode, p.stdout.decode(errors="replace")


def test_one_minute_of_kill9_loses_no_acknowledged_write():
    rc, out = run_soak("--minutes", "1", "--pace-ms", "5", timeout=240)
    last = out.strip().splitlines()[-1]
    m = re.match(r"soak: (\d+) restarts, (\d+) acknowledged writes, 0 lost, invariants held$", last)
    assert rc == 0 and m, out[-4000:]
    assert int(m.group(1)) >= 1 and int(m.group(2)) > 0, out[-4000:]


def test_the_soak_reports_what_journal_none_loses():
    rc, out = run_soak("--minutes", "0.25", "--kill-min", "6", "--kill-max", "8",
                       "--journal", "none", "--pace-ms", "5", timeout=180)
    last = out.strip().splitlines()[-1]
    m = re.match(r"soak: (\d+) restarts, (\d+) acknowledged writes, (\d+) lost, "
                 r"invariants VIOLATED$", last)
    assert rc == 1 and m and int(m.group(3)) > 0, out[-4000:]
