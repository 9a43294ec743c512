"""pytest fixtures for the crash tests: `crash_server(*args, dbpath=None)`
makes a CrashServer (not yet started) that keeps its --dbpath across kill9()
and start(); teardown stops every one of them and fails the test if one
crashed, exited non-zero on a clean stop, or printed a sanitizer report."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "drivers"))

import pymongo_mode  # noqa: E402

pymongo_mode.apply()  # before anything imports pymongo (ATOMDB_PYMONGO_PURE)

import pytest  # noqa: E402

from crashlib import CrashServer, finish  # noqa: E402


def pytest_report_header(config):
    return pymongo_mode.describe()


@pytest.fixture
def crash_server():
    servers = []

    def make(*extra_args, dbpath=None, log_level="info"):
        server = CrashServer(extra_args=extra_args, dbpath=dbpath, log_level=log_level)
        servers.append(server)
        return server

    yield make
    problems = []
    for server in servers:
        problems.extend(finish(server))
    for server in servers:
        server.cleanup()
    if problems:
        pytest.fail("\n".join(problems), pytrace=False)
