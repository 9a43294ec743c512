"""MongoDB multi-document transactions spec tests (unified test format) run against atomdb
through pymongo, with the same runner as the CRUD ones (unified_runner.py).

The JSON files are read at test time from <repo>/../shared/specs/transactions;
the module skips itself when that folder is absent. Tests that need fail
points, only assert command-monitoring events, or need a topology (sharded,
load-balanced) or server version atomdb does not claim are skipped with a
reason; `python3 test_transactions_unified.py` lists them without a server.
Every session's transaction is ended after each test, and killAllSessions
runs before each one, so no test inherits another's locks.
"""

import sys

import unified_runner as ur

SPEC_DIR = ur.SPECS / "transactions"

if __name__ == "__main__":
    sys.exit(ur.main(SPEC_DIR))
elif ur.pytest is not None:
    ur.define_spec_module(globals(), "transactions", SPEC_DIR, "Transactions", kill_sessions=True)
