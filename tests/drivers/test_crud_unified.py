"""MongoDB CRUD spec tests (unified test format) run against atomdb through pymongo.

The JSON files are read at test time from <repo>/../shared/specs/crud (a
non-commercial licence keeps them out of this repository); the module skips
itself when that folder is absent. The runner, its skip rules and matching
live in unified_runner.py; `python3 test_crud_unified.py` lists the skips
without a server.
"""

import sys

try:
    import pytest
except ImportError:  # only the stand-alone skip listing runs without pytest
    pytest = None

import unified_runner as ur

SPEC_DIR = ur.SPECS / "crud"
LABEL = "CRUD"

if pytest is not None and __name__ != "__main__":
    if not SPEC_DIR.is_dir():
        pytest.skip(ur.missing_specs_message(SPEC_DIR, LABEL), allow_module_level=True)
    if ur.pymongo is None:
        pytest.skip("pymongo is not installed", allow_module_level=True)

    @pytest.fixture(scope="module")
    def runner(atomdb_module):
        host, port = atomdb_module
        r = ur.Runner(host, port)
        yield r
        r.close()

    @pytest.fixture(scope="module", autouse=True)
    def _skip_summary(request):
        """After the module, prints how many spec tests were skipped for each reason."""
        yield
        ur.write_skip_summary(request, SPEC_DIR, LABEL)

    _SPECS = ur.SpecCache(SPEC_DIR)

    @pytest.mark.parametrize("fname,index", ur.params(SPEC_DIR))
    def test_crud_spec(runner, fname, index):
        ur.run_spec_test(runner, _SPECS, fname, index)


if __name__ == "__main__":
    sys.exit(ur.main(SPEC_DIR))
