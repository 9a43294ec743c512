"""pytest fixtures for the seed scenarios: one real atomdb per test module,
started on a free 127.0.0.1 port with tests/drivers/atomdb_testlib.py and
stopped at the end; a crash, non-zero exit or sanitizer report fails the
module's last test."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "drivers"))

from atomdb_testlib import AtomdbServer, ServerProblem  # noqa: E402


@pytest.fixture(scope="module")
def atomdb_uri():
    """URI of an atomdb shared by the tests of one module. Logging stays at
    info: debug logging of thousands of commands would slow the scenarios."""
    server = AtomdbServer(log_level="info")
    try:
        server.start()
    except ServerProblem as e:
        server.cleanup()
        pytest.fail(str(e), pytrace=False)
    yield server.uri()
    problems = server.stop()
    server.cleanup()
    if problems:
        pytest.fail("\n".join(problems), pytrace=False)
