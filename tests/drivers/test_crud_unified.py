"""MongoDB CRUD spec tests (unified test format) run against atomdb through pymongo.

The JSON files are read at test time from <repo>/../shared/specs/crud (a
non-commercial licence keeps them out of this repository); the module skips
itself when that folder is absent. The runner, its skip rules and matching
live in unified_runner.py; `python3 test_crud_unified.py` lists the skips
without a server.
"""

import sys

import unified_runner as ur

SPEC_DIR = ur.SPECS / "crud"

if __name__ == "__main__":
    sys.exit(ur.main(SPEC_DIR))
elif ur.pytest is not None:
    ur.define_spec_module(globals(), "crud", SPEC_DIR, "CRUD")
