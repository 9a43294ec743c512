"""pytest fixtures for the seed scenarios: one real atomdb per test module,
started on a free 127.0.0.1 port with tests/drivers/atomdb_testlib.py and
stopped at the end; a crash, non-zero exit or sanitizer report fails the
module's last test."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "drivers"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import pymongo_mode  # noqa: E402

pymongo_mode.apply()  # before anything imports pymongo (ATOMDB_PYMONGO_PURE)

from scenario_lib import atomdb_running  # noqa: E402


@pytest.fixture(scope="module")
def atomdb_uri():
    """URI of an atomdb shared by the tests of one module."""
    with atomdb_running() as uri:
        yield uri


def pytest_report_header(config):
    return pymongo_mode.describe()
