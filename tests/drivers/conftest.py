"""pytest fixtures: a real atomdb server per test (`atomdb`) or per module
(`atomdb_module`). Each yields an AtomdbServer that unpacks as (host, port);
teardown stops it and fails the test if it crashed, exited non-zero or
printed a sanitizer report. `client` is a MongoClient on the module's server
(a module needing a fresh server per test overrides it, atomdb_clients.py)."""

import pymongo_mode

pymongo_mode.apply()  # before anything imports pymongo (ATOMDB_PYMONGO_PURE)

import pytest  # noqa: E402

from atomdb_clients import connect  # noqa: E402
from atomdb_testlib import AtomdbServer, ServerProblem  # noqa: E402


def pytest_report_header(config):
    return pymongo_mode.describe()


def _run_server(extra_args=()):
    server = AtomdbServer(extra_args=extra_args)
    try:
        server.start()
    except ServerProblem as e:
        server.cleanup()
        pytest.fail(str(e), pytrace=False)
    return server


def _finish(server):
    problems = server.stop()
    server.cleanup()
    if problems:
        pytest.fail("\n".join(problems), pytrace=False)


@pytest.fixture
def atomdb():
    """A fresh atomdb for one test."""
    server = _run_server()
    yield server
    _finish(server)


@pytest.fixture(scope="module")
def atomdb_module():
    """One atomdb shared by every test of a module."""
    server = _run_server()
    yield server
    _finish(server)


@pytest.fixture(scope="module")
def client(atomdb_module):
    """A directConnection MongoClient on the module's shared atomdb."""
    c = connect(atomdb_module)
    yield c
    c.close()


@pytest.fixture
def atomdb_factory():
    """Starts servers with extra command-line flags; all are stopped at teardown."""
    servers = []

    def start(*extra_args):
        server = _run_server(extra_args)
        servers.append(server)
        return server

    yield start
    problems = []
    for server in servers:
        problems.extend(server.stop())
        server.cleanup()
    if problems:
        pytest.fail("\n".join(problems), pytrace=False)


@pytest.fixture(autouse=True)
def _module_server_still_running(request):
    """Fails a test at once when the module's shared server already died,
    instead of letting every later test wait for its client to time out."""
    if "atomdb_module" in request.fixturenames:
        server = request.getfixturevalue("atomdb_module")
        if not server.alive():
            pytest.fail("the module's atomdb is no longer running (exit code %s):\n%s"
                        % (server.proc.returncode, server.log_tail(40)), pytrace=False)
    yield
