"""MongoDB change streams spec tests (unified test format) run against atomdb
through pymongo, with the CRUD suites' runner (unified_runner.py) and its
change stream operations (unified_changestreams.py).

The JSON files are read at test time from <repo>/../shared/specs/change-streams;
the module skips itself when that folder is absent. Tests that need fail
points (every resume test), a sharded or load-balanced topology, a server
version atomdb does not claim, or that only assert command-monitoring events
are skipped with a reason; `python3 test_change_streams_unified.py` lists
them without a server.
"""

import sys

import unified_changestreams
import unified_runner as ur

ur.OPERATION_HOOKS.append(unified_changestreams)
ur.SKIP_HOOKS.append(unified_changestreams.test_reason)
SPEC_DIR = ur.SPECS / "change-streams"

if __name__ == "__main__":
    sys.exit(ur.main(SPEC_DIR))
elif ur.pytest is not None:
    ur.define_spec_module(globals(), "change_streams", SPEC_DIR, "Change streams")
