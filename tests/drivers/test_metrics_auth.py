"""The metrics port under --auth (issue 22: "read-only and, with --auth,
requires credentials"): GET /metrics and GET / need HTTP Basic credentials
of a user holding serverStatus on the cluster — none or wrong ones get 401
with a Basic challenge, a user without the action 403 — repeated failures
from one address back off with 429, and protected mode refuses a public
--metrics-bind without --auth (docs/security.md).
"""

import base64
import subprocess
import urllib.error
import urllib.request

import pymongo
import pytest

from atomdb_testlib import atomdb_bin, free_port

PASSWORD = "s3cret-Pa55word"


@pytest.fixture
def guarded(atomdb_factory):
    port = free_port()
    server = atomdb_factory("--auth", "--metrics-port", str(port))
    server.metrics_url = "http://127.0.0.1:%d" % port
    # the first user through the localhost exception, then the others
    first = pymongo.MongoClient(server.uri(), directConnection=True,
                                serverSelectionTimeoutMS=10000)
    first.admin.command("createUser", "admin", pwd=PASSWORD, roles=["root"])
    admin = pymongo.MongoClient(server.uri(), directConnection=True, username="admin",
                                password=PASSWORD, authSource="admin",
                                serverSelectionTimeoutMS=10000)
    admin.admin.command("createUser", "monitor", pwd=PASSWORD, roles=["clusterMonitor"])
    admin.admin.command("createUser", "writer", pwd=PASSWORD,
                        roles=[{"role": "readWrite", "db": "shop"}])
    admin.admin.command("createUser", "old", pwd=PASSWORD, roles=["clusterMonitor"],
                        mechanisms=["SCRAM-SHA-1"])
    admin.shop.command("createUser", "shopmon", pwd=PASSWORD,
                       roles=[{"role": "clusterMonitor", "db": "admin"}])
    server.admin = admin
    yield server
    admin.close()
    first.close()


def fetch(url, user=None, password=None):
    """(status, headers, body) of GET url, with Basic credentials if given."""
    req = urllib.request.Request(url)
    if user is not None:
        token = base64.b64encode(("%s:%s" % (user, password)).encode()).decode()
        req.add_header("Authorization", "Basic " + token)
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, r.headers, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read().decode()


@pytest.mark.parametrize("page", ["/metrics", "/"])
def test_no_or_wrong_credentials_get_401_with_a_basic_challenge(guarded, page):
    for creds in [(None, None), ("monitor", "wrong-password"), ("nobody", PASSWORD),
                  ("monitor", "")]:
        status, headers, body = fetch(guarded.metrics_url + page, *creds)
        assert status == 401, (creds, status, body)
        assert headers.get("WWW-Authenticate") == 'Basic realm="atomdb"', headers
        assert "atomdb_commands_total" not in body and "<html" not in body.lower()


def test_malformed_or_other_authorization_headers_get_401(guarded):
    for header in ["Basic !!!not-base64", "Bearer abc", "Basic", "Digest username=\"monitor\"",
                   "Basic " + base64.b64encode(("x" * 3000 + ":" + PASSWORD).encode()).decode(),
                   "Basic " + base64.b64encode(("monitor@" + "d" * 200 + ":p").encode()).decode()]:
        req = urllib.request.Request(guarded.metrics_url + "/metrics",
                                     headers={"Authorization": header})
        try:
            urllib.request.urlopen(req, timeout=30)
            status = 200
        except urllib.error.HTTPError as e:
            status = e.code
        assert status == 401, (header[:40], status)
    assert fetch(guarded.metrics_url + "/metrics", "monitor", PASSWORD)[0] == 200, "still serving"


def test_a_user_without_server_status_gets_403(guarded):
    for page in ["/metrics", "/"]:
        status, _, body = fetch(guarded.metrics_url + page, "writer", PASSWORD)
        assert status == 403, (page, status, body)
        assert "serverStatus" in body and "atomdb_" not in body


@pytest.mark.parametrize("user", ["monitor", "admin", "old", "shopmon@shop"])
def test_a_monitoring_user_reads_both_pages(guarded, user):
    status, headers, body = fetch(guarded.metrics_url + "/metrics", user, PASSWORD)
    assert status == 200, (status, body)
    assert headers.get("Content-Type").startswith("text/plain; version=0.0.4")
    assert "atomdb_commands_total" in body
    status, headers, body = fetch(guarded.metrics_url + "/", user, PASSWORD)
    assert status == 200, (status, body)
    assert headers.get("Content-Type").startswith("text/html")
    # a second fetch (the page's auto-refresh) is answered the same way
    assert fetch(guarded.metrics_url + "/", user, PASSWORD)[0] == 200


def test_changing_users_takes_effect_at_once(guarded):
    url = guarded.metrics_url + "/metrics"
    assert fetch(url, "monitor", PASSWORD)[0] == 200
    guarded.admin.admin.command("revokeRolesFromUser", "monitor", roles=["clusterMonitor"])
    assert fetch(url, "monitor", PASSWORD)[0] == 403, "the privilege is gone"
    guarded.admin.admin.command("grantRolesToUser", "monitor", roles=["clusterMonitor"])
    assert fetch(url, "monitor", PASSWORD)[0] == 200
    guarded.admin.admin.command("updateUser", "monitor", pwd="another-Pa55word")
    assert fetch(url, "monitor", PASSWORD)[0] == 401, "the old password no longer works"
    assert fetch(url, "monitor", "another-Pa55word")[0] == 200
    guarded.admin.admin.command("dropUser", "monitor")
    assert fetch(url, "monitor", "another-Pa55word")[0] == 401, "a dropped user is unknown"


def test_failures_are_logged_without_the_password(guarded):
    fetch(guarded.metrics_url + "/metrics", "monitor", "my-wrong-Guess")
    log = guarded.log()
    assert '"Failed to authenticate"' in log and "HTTP Basic" in log
    assert "my-wrong-Guess" not in log and PASSWORD not in log


def test_repeated_failures_back_off_that_address(guarded):
    url = guarded.metrics_url + "/metrics"
    statuses = [fetch(url, "monitor", "wrong-password")[0] for _ in range(12)]
    assert statuses[:5] == [401] * 5, statuses
    assert set(statuses) <= {401, 429}, statuses
    # 12 failures in a row: the address waits 5 s from the last one, and
    # even the right password is not checked meanwhile
    status, headers, body = fetch(url, "monitor", PASSWORD)
    assert status == 429, (status, body)
    assert 1 <= int(headers.get("Retry-After")) <= 5


def test_without_auth_the_pages_need_no_credentials(atomdb_factory):
    port = free_port()
    server = atomdb_factory("--metrics-port", str(port))
    status, _, body = fetch("http://127.0.0.1:%d/metrics" % port)
    assert status == 200 and "atomdb_commands_total" in body
    status, _, _ = fetch("http://127.0.0.1:%d/metrics" % port, "anyone", "anything")
    assert status == 200, "credentials are not asked for, and not checked"


def test_protected_mode_refuses_a_public_metrics_bind_without_auth(tmp_path):
    p = subprocess.run([str(atomdb_bin()), "--port", str(free_port()), "--dbpath",
                        str(tmp_path / "d"), "--metrics-port", str(free_port()),
                        "--metrics-bind", "0.0.0.0"],
                       capture_output=True, text=True, timeout=30)
    assert p.returncode == 2, p
    assert "metrics port" in p.stderr and "--auth" in p.stderr, p.stderr
    assert "--protected-mode off" in p.stderr, p.stderr
    assert not (tmp_path / "d").exists(), "nothing was started"


@pytest.mark.parametrize("extra", [["--auth"], ["--protected-mode", "off"]])
def test_a_public_metrics_bind_is_allowed_with_auth_or_protected_mode_off(atomdb_factory, extra):
    port = free_port()
    server = atomdb_factory("--metrics-port", str(port), "--metrics-bind", "0.0.0.0", *extra)
    status, _, _ = fetch("http://127.0.0.1:%d/metrics" % port)
    assert status == (401 if extra == ["--auth"] else 200)
