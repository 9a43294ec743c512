"""mongosh 2.x against atomdb with --auth and TLS (docs/security.md):
mongosh logs in with SCRAM-SHA-256 through speculativeAuthenticate, over
TLS with a CA the test makes, and shows mongod's errors for a wrong
password and a missing privilege."""

import json
import re
import subprocess

import pytest
from pymongo import MongoClient

from atomdb_testlib import AtomdbServer, stop_all
from test_mongosh import MONGOSH, _mongosh_installed, sh_env  # noqa: F401 (fixtures)
from test_tls import certs  # noqa: F401 (fixture)

PW = "shell-Pa55"


def mongosh(uri, script, env):
    return subprocess.run([str(MONGOSH), uri, "--quiet", "--norc", "--eval", script],
                          capture_output=True, text=True, timeout=240, env=env)


@pytest.fixture
def tls_auth_server(certs):  # noqa: F811
    s = AtomdbServer(extra_args=["--auth", "--tlsMode", "requireTLS", "--tlsCertificateKeyFile",
                                 str(certs["server"])]).start()
    c = MongoClient(s.host, s.port, directConnection=True, tls=True, tlsCAFile=str(certs["ca"]),
                    serverSelectionTimeoutMS=5000)
    c.admin.command("createUser", "admin", pwd=PW, roles=["root"])
    c.close()
    c = MongoClient(s.host, s.port, directConnection=True, tls=True, tlsCAFile=str(certs["ca"]),
                    username="admin", password=PW, serverSelectionTimeoutMS=5000)
    c.admin.command("createUser", "reader", pwd="r", roles=[{"role": "read", "db": "app"}])
    c.close()
    yield s
    stop_all([s])


def uri(s, certs, user, pw):  # noqa: F811
    return ("mongodb://%s:%s@127.0.0.1:%d/?directConnection=true&authSource=admin&tls=true"
            "&tlsCAFile=%s&serverSelectionTimeoutMS=5000" % (user, pw, s.port, certs["ca"]))


def test_mongosh_logs_in_over_tls_speculatively(tls_auth_server, certs, sh_env):  # noqa: F811
    s = tls_auth_server
    p = mongosh(uri(s, certs, "admin", PW),
                'db.getSiblingDB("app").c.insertOne({by: "mongosh"});'
                'print("RESULT " + JSON.stringify(db.runCommand({connectionStatus: 1})'
                '.authInfo.authenticatedUsers))', sh_env)
    out = p.stdout + p.stderr
    assert p.returncode == 0, out
    m = re.search(r"^RESULT (.*)$", out, re.M)
    assert m and json.loads(m.group(1)) == [{"user": "admin", "db": "admin"}], out
    logins = [json.loads(l) for l in s.log().splitlines() if '"Successfully authenticated"' in l]
    assert any(l["attr"]["isSpeculative"] and l["attr"]["mechanism"] == "SCRAM-SHA-256"
               for l in logins), "mongosh logged in through speculativeAuthenticate: %s" % logins


def test_mongosh_shows_authentication_and_authorization_errors(tls_auth_server, certs, sh_env):  # noqa: F811,E501
    s = tls_auth_server
    p = mongosh(uri(s, certs, "admin", "wrong"), "db.runCommand({ping: 1})", sh_env)
    assert p.returncode != 0 and "Authentication failed." in p.stdout + p.stderr, \
        p.stdout + p.stderr
    p = mongosh(uri(s, certs, "reader", "r"), 'db.getSiblingDB("app").c.insertOne({x: 1})', sh_env)
    out = p.stdout + p.stderr
    assert p.returncode != 0 and "not authorized on app to execute command" in out, out
