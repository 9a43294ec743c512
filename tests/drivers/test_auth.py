"""Authentication and authorization through pymongo (docs/security.md).

Each test starts its own atomdb with --auth on a free loopback port: SCRAM
logins with each mechanism, mongod's localhost exception, the built-in
role matrix, user management, durability of users across restart and
kill -9 with no password bytes under --dbpath, the iteration-count
parameters, protected mode, and the failed-login log line.
"""

import json
import os
import socket
import subprocess

import pytest
from bson.son import SON
from pymongo import MongoClient
from pymongo.errors import OperationFailure

import wireproto as w
from atomdb_testlib import AtomdbServer, atomdb_bin, free_port, restart, stop_all
from scramclient import ScramClient, scram_login

PASSWORD = "s3cret-Pa55word"


@pytest.fixture
def server():
    s = AtomdbServer(extra_args=["--auth"]).start()
    yield s
    stop_all([s])


def client(s, **kw):
    kw.setdefault("serverSelectionTimeoutMS", 5000)
    return MongoClient(s.uri(), directConnection=True, **kw)


def admin_client(s):
    return client(s, username="admin", password=PASSWORD, authSource="admin")


def make_admin(s):
    """The first user, through the localhost exception."""
    client(s).admin.command("createUser", "admin", pwd=PASSWORD, roles=["root"])
    return admin_client(s)


def code_of(fn):
    try:
        fn()
    except OperationFailure as e:
        return e.code
    return 0


# ---- logging in ----

@pytest.mark.parametrize("mech", ["SCRAM-SHA-256", "SCRAM-SHA-1", None])
def test_each_mechanism_logs_in_and_connection_status_names_the_user(server, mech):
    make_admin(server)
    kw = {"authMechanism": mech} if mech else {}
    c = client(server, username="admin", password=PASSWORD, **kw)
    st = c.admin.command("connectionStatus", showPrivileges=True)["authInfo"]
    assert st["authenticatedUsers"] == [{"user": "admin", "db": "admin"}], st
    assert st["authenticatedUserRoles"] == [{"role": "root", "db": "admin"}], st
    assert st["authenticatedUserPrivileges"], "showPrivileges lists the privileges"
    assert c.app.c.insert_one({"x": 1}).acknowledged
    log = server.log()
    assert '"Successfully authenticated"' in log, "the login is logged"


def test_hello_advertises_the_users_mechanisms_and_answers_speculative_auth(server):
    admin = make_admin(server)
    admin.admin.command("createUser", "only1", pwd="pw", roles=[], mechanisms=["SCRAM-SHA-1"])
    hello = client(server).admin.command("hello", saslSupportedMechs="admin.admin")
    assert sorted(hello["saslSupportedMechs"]) == ["SCRAM-SHA-1", "SCRAM-SHA-256"], hello
    hello = client(server).admin.command("hello", saslSupportedMechs="admin.only1")
    assert hello["saslSupportedMechs"] == ["SCRAM-SHA-1"], hello
    hello = client(server).admin.command("hello", saslSupportedMechs="admin.nobody")
    assert "saslSupportedMechs" not in hello, "an unknown user gets no mechanisms, as mongod"
    # speculative: client-first inside hello, the conversation goes on with saslContinue
    sock = w.connect(server.host, server.port)
    try:
        scram = ScramClient("admin", PASSWORD, "SCRAM-SHA-256")
        reply = w.command(sock, SON([("hello", 1), ("$db", "admin"), ("speculativeAuthenticate", SON([
            ("saslStart", 1), ("mechanism", "SCRAM-SHA-256"), ("payload", scram.first()),
            ("options", {"skipEmptyExchange": True}), ("db", "admin")]))]))
        spec = reply["speculativeAuthenticate"]
        assert spec["conversationId"] == 1 and spec["done"] is False, spec
        fin = w.command(sock, SON([("saslContinue", 1), ("conversationId", 1),
                                   ("payload", scram.final(spec["payload"])), ("$db", "admin")]))
        assert fin["ok"] == 1 and fin["done"] is True, fin
        assert bytes(fin["payload"]) == scram.expected_v, "server signature checks out"
        st = w.command(sock, SON([("connectionStatus", 1), ("$db", "admin")]))
        assert st["authInfo"]["authenticatedUsers"] == [{"user": "admin", "db": "admin"}]
    finally:
        sock.close()
    assert '"isSpeculative":true' in server.log(), "the speculative login is logged as such"


def test_wrong_password_and_unknown_user_fail_alike_and_are_logged_without_the_proof(server):
    make_admin(server)
    errors = []
    for user, pwd in [("admin", "wrong"), ("nobody", PASSWORD)]:
        with pytest.raises(OperationFailure) as e:
            client(server, username=user, password=pwd).admin.command("ping")
        errors.append((e.value.code, e.value.details.get("errmsg")))
    assert errors[0] == errors[1] == (18, "Authentication failed."), errors
    lines = [json.loads(l) for l in server.log().splitlines()
             if '"Failed to authenticate"' in l]
    users = {l["attr"]["user"] for l in lines}
    assert {"admin", "nobody"} <= users, "each failure is logged with the user: %s" % lines
    for l in lines:
        assert l["attr"]["client"].startswith("127.0.0.1:"), "the remote address is logged"
        assert l["attr"]["mechanism"].startswith("SCRAM-SHA-"), "the mechanism is logged"
        assert "p=" not in json.dumps(l) and "wrong" not in json.dumps(l), \
            "neither the proof nor the password is logged: %s" % l


def test_repeated_failures_delay_that_address_and_no_one_else(server):
    make_admin(server)
    for _ in range(12):
        sock = w.connect(server.host, server.port)
        try:
            with pytest.raises(AssertionError):
                scram_login(sock, "admin", "wrong-password")
        finally:
            sock.close()
    waiting = w.connect(server.host, server.port)
    other = w.connect(server.host, server.port)
    try:
        sc = ScramClient("admin", PASSWORD, "SCRAM-SHA-256")
        w.send(waiting, w.op_msg(SON([("saslStart", 1), ("mechanism", "SCRAM-SHA-256"),
                                      ("payload", sc.first()), ("$db", "admin")])))
        # the delayed login is parked: another connection is served meanwhile
        assert w.command(other, SON([("ping", 1), ("$db", "admin")]))["ok"] == 1
        assert '"Delaying a login after repeated failures"' in server.log(), \
            "the delay is logged"
        waiting.setblocking(False)
        with pytest.raises(BlockingIOError):
            waiting.recv(1)  # no answer yet: it waits (5 s after 12 failures)
        waiting.setblocking(True)
        waiting.settimeout(30)
        first = w.read_reply(waiting).doc
        assert first["ok"] == 1, "then it runs: %r" % first
        r = w.command(waiting, SON([("saslContinue", 1), ("conversationId", 1),
                                    ("payload", sc.final(first["payload"])), ("$db", "admin")]))
        assert r["ok"] == 1, "and the right password logs in: %r" % r
    finally:
        waiting.close()
        other.close()


def test_logout_forgets_the_user(server):
    c = make_admin(server)
    c.admin.command("ping")
    sock = w.connect(server.host, server.port)
    try:
        scram_login(sock, "admin", PASSWORD)
        assert w.command(sock, SON([("find", "c"), ("$db", "app")]))["ok"] == 1
        assert w.command(sock, SON([("logout", 1), ("$db", "admin")]))["ok"] == 1
        r = w.command(sock, SON([("find", "c"), ("$db", "app")]))
        assert r["code"] == 13 and r["errmsg"] == "command find requires authentication", r
    finally:
        sock.close()


def test_another_user_on_a_logged_in_connection_is_refused(server):
    admin = make_admin(server)
    admin.admin.command("createUser", "bob", pwd="pw", roles=[])
    sock = w.connect(server.host, server.port)
    try:
        scram_login(sock, "admin", PASSWORD)
        with pytest.raises(AssertionError) as e:
            scram_login(sock, "bob", "pw")
        assert "5626701" in str(e.value) or "authenticated once" in str(e.value), str(e.value)
    finally:
        sock.close()


@pytest.mark.parametrize("mech", ["SCRAM-SHA-256", "SCRAM-SHA-1"])
def test_libmongoc_logs_in_and_runs_its_checks(server, mech):
    from atomdb_testlib import atomdb_build_dir, require_installed
    program = atomdb_build_dir() / "tests" / "drivers" / "c" / "test_libmongoc"
    require_installed(program.exists(), "%s (built when libmongoc-dev is installed)" % program)
    make_admin(server)
    uri = "mongodb://admin:%s@%s/?directConnection=true&authSource=admin&authMechanism=%s" % (
        PASSWORD, server.address, mech)
    # under build-asan/ the program is built with ASan too, and LeakSanitizer
    # reports 17 KB it never frees (from libbson's realloc, with or without a
    # login; test_libmongoc.py runs against build/ only), so the client's
    # leak check is off here; the server's stays on
    env = dict(os.environ, ASAN_OPTIONS="detect_leaks=0")
    p = subprocess.run([str(program), uri], capture_output=True, text=True, timeout=120, env=env)
    out = p.stdout + p.stderr
    assert p.returncode == 0 and "not ok" not in out, "libmongoc with %s:\n%s" % (mech, out)
    assert "ok - ping answers ok: 1" in out
    logins = [l for l in server.log().splitlines() if '"Successfully authenticated"' in l
              and '"mechanism":"%s"' % mech in l]
    assert logins, "libmongoc logged in with %s" % mech


# ---- the localhost exception ----

def test_localhost_exception_allows_only_the_first_user_on_admin(server):
    anon = client(server)
    assert code_of(lambda: anon.app.c.find_one()) == 13
    assert code_of(lambda: anon.app.command("createUser", "u", pwd="pw", roles=[])) == 13, \
        "the exception is for the admin database only"
    anon.admin.command("createUser", "admin", pwd=PASSWORD, roles=["root"])
    with pytest.raises(OperationFailure) as e:
        anon.admin.command("createUser", "second", pwd="pw", roles=["root"])
    assert e.value.code == 13 and "requires authentication" in e.value.details["errmsg"], \
        "the exception closes once a user exists"


def test_without_auth_everything_runs_unauthenticated_as_before(tmp_path):
    s = AtomdbServer().start()
    try:
        c = client(s)
        c.app.c.insert_one({"a": 1})
        c.admin.command("createUser", "u", pwd="pw", roles=["readWrite"])
        assert c.app.c.count_documents({}) == 1
        # users can log in without --auth too
        assert client(s, username="u", password="pw").admin.command("ping")["ok"] == 1
    finally:
        stop_all([s])


# ---- roles ----

# (role, role db, what to run, allowed)
def _find(c):
    return c.app.c.find_one()


def _insert(c):
    return c.app.c.insert_one({"z": 1})


def _drop_db(c):
    return c.drop_database("scratch")


_made = [0]


def _create_user(c):
    _made[0] += 1
    return c.app.command("createUser", "made%d" % _made[0], pwd="pw", roles=[])


def _server_status(c):
    return c.admin.command("serverStatus")


def _lock(c):
    return c.app.command(SON([("acquireLock", "L"), ("owner", "me"), ("leaseMs", 1000)]))


def _list_dbs(c):
    return c.admin.command("listDatabases")


def _shutdown_probe(c):
    return c.admin.command("getCmdLineOpts")


def _other_db_find(c):
    return c.other.c.find_one()


MATRIX = [
    ("read", "app", _find, True), ("read", "app", _insert, False), ("read", "app", _lock, False),
    ("read", "app", _other_db_find, False), ("read", "app", _server_status, False),
    ("readWrite", "app", _find, True), ("readWrite", "app", _insert, True),
    ("readWrite", "app", _lock, True), ("readWrite", "app", _create_user, False),
    ("readWrite", "app", _other_db_find, False),
    ("dbAdmin", "app", _find, False), ("dbAdmin", "app", _insert, False),
    ("userAdmin", "app", _create_user, True), ("userAdmin", "app", _find, False),
    ("dbOwner", "app", _find, True), ("dbOwner", "app", _insert, True),
    ("dbOwner", "app", _create_user, True), ("dbOwner", "app", _other_db_find, False),
    ("lockUser", "app", _lock, True), ("lockUser", "app", _find, False),
    ("readAnyDatabase", "admin", _other_db_find, True), ("readAnyDatabase", "admin", _insert, False),
    ("readAnyDatabase", "admin", _list_dbs, True),
    ("readWriteAnyDatabase", "admin", _insert, True),
    ("readWriteAnyDatabase", "admin", _server_status, False),
    ("userAdminAnyDatabase", "admin", _create_user, True),
    ("userAdminAnyDatabase", "admin", _find, False),
    ("dbAdminAnyDatabase", "admin", _drop_db, True), ("dbAdminAnyDatabase", "admin", _find, False),
    ("clusterMonitor", "admin", _server_status, True), ("clusterMonitor", "admin", _find, False),
    ("clusterMonitor", "admin", _shutdown_probe, True),
    ("hostManager", "admin", _server_status, False),
    ("clusterAdmin", "admin", _server_status, True), ("clusterAdmin", "admin", _find, False),
    ("backup", "admin", _find, True), ("backup", "admin", _insert, False),
    ("restore", "admin", _insert, True),
    ("root", "admin", _find, True), ("root", "admin", _insert, True),
    ("root", "admin", _server_status, True), ("root", "admin", _create_user, True),
]


def test_builtin_role_matrix(server):
    admin = make_admin(server)
    admin.app.c.insert_one({"seed": 1})
    admin.other.c.insert_one({"seed": 1})
    failures = []
    for i, (role, db, fn, allowed) in enumerate(MATRIX):
        name = "u%d" % i
        admin.admin.command("createUser", name, pwd="pw", roles=[{"role": role, "db": db}])
        c = client(server, username=name, password="pw")
        code = code_of(lambda: fn(c))
        if allowed and code != 0:
            failures.append("%s@%s should run %s, got %s" % (role, db, fn.__name__, code))
        if not allowed and code != 13:
            failures.append("%s@%s should be refused %s with 13, got %s"
                            % (role, db, fn.__name__, code))
        c.close()
    assert not failures, "\n".join(failures)


def test_refusal_message_is_mongods(server):
    admin = make_admin(server)
    admin.admin.command("createUser", "r", pwd="pw", roles=[{"role": "read", "db": "app"}])
    c = client(server, username="r", password="pw")
    with pytest.raises(OperationFailure) as e:
        c.app.c.insert_one({"a": 1})
    msg = e.value.details["errmsg"]
    assert e.value.code == 13 and e.value.details["codeName"] == "Unauthorized"
    assert msg.startswith('not authorized on app to execute command { insert: "c"'), msg
    with pytest.raises(OperationFailure) as e:
        c.admin.command("createUser", "x", pwd="do-not-echo", roles=[])
    assert "do-not-echo" not in e.value.details["errmsg"], "the password is not echoed"


def test_every_command_needs_a_login_except_the_handshake(server):
    make_admin(server)
    anon = client(server)
    names = anon.admin.command("listCommands")["commands"].keys()
    open_ = {"hello", "isMaster", "ismaster", "ping", "buildInfo", "buildinfo", "whatsmyuri",
             "connectionStatus", "listCommands", "saslStart", "saslContinue", "logout",
             "authenticate"}
    sock = w.connect(server.host, server.port)
    wrong = []
    try:
        for name in names:
            if name in open_ or name == "shutdown":
                continue
            r = w.command(sock, SON([(name, 1), ("$db", "admin")]))
            if r.get("code") != 13:
                wrong.append("%s: %r" % (name, r))
    finally:
        sock.close()
    assert not wrong, "commands an anonymous client could run:\n" + "\n".join(wrong)


def test_a_user_with_no_roles_can_run_nothing_that_touches_data(server):
    admin = make_admin(server)
    admin.app.c.insert_one({"a": 1})
    admin.admin.command("createUser", "none", pwd="pw", roles=[])
    c = client(server, username="none", password="pw")
    for fn in (_find, _insert, _lock, _list_dbs, _server_status, _drop_db):
        code = code_of(lambda: fn(c))
        assert code == 13 or (fn is _list_dbs and code == 0), "%s: %s" % (fn.__name__, code)
    if code_of(lambda: _list_dbs(c)) == 0:
        assert c.admin.command("listDatabases")["databases"] == [], \
            "listDatabases shows a user without privileges no database"


def test_dropping_a_user_takes_its_privileges_from_open_connections(server):
    admin = make_admin(server)
    admin.admin.command("createUser", "w", pwd="pw", roles=[{"role": "readWrite", "db": "app"}])
    c = client(server, username="w", password="pw")
    c.app.c.insert_one({"a": 1})
    admin.admin.command("revokeRolesFromUser", "w", roles=[{"role": "readWrite", "db": "app"}])
    assert code_of(lambda: c.app.c.insert_one({"a": 2})) == 13, "revoked at once"
    admin.admin.command("grantRolesToUser", "w", roles=[{"role": "read", "db": "app"}])
    assert c.app.c.find_one({"a": 1}) is not None, "granted at once"
    admin.admin.command("dropUser", "w")
    assert code_of(lambda: c.app.c.find_one()) == 13, "a dropped user's connection keeps nothing"


def test_cursors_and_sessions_of_one_user_are_refused_to_another(server):
    admin = make_admin(server)
    admin.app.c.insert_many([{"i": i} for i in range(10)])
    for name in ("alice", "bob"):
        admin.admin.command("createUser", name, pwd="pw", roles=[{"role": "readWrite", "db": "app"}])
    alice = client(server, username="alice", password="pw")
    bob = client(server, username="bob", password="pw")
    first = alice.app.command("find", "c", batchSize=2)
    cid = first["cursor"]["id"]
    assert cid != 0
    with pytest.raises(OperationFailure) as e:
        bob.app.command("getMore", cid, collection="c")
    assert e.value.code == 13, "bob cannot read alice's cursor"
    with pytest.raises(OperationFailure) as e:
        bob.app.command("killCursors", "c", cursors=[cid])
    assert e.value.code == 13, "nor kill it"
    assert len(alice.app.command("getMore", cid, collection="c")["cursor"]["nextBatch"]) > 0
    with alice.start_session() as s:
        alice.app.c.find_one({}, session=s)
        lsid = s.session_id
        # raw, because pymongo replaces an lsid with its own session's
        sock = w.connect(server.host, server.port)
        try:
            scram_login(sock, "bob", "pw")
            r = w.command(sock, SON([("find", "c"), ("lsid", lsid), ("$db", "app")]))
            assert r.get("code") == 13, "bob cannot use alice's session: %r" % r
            r = w.command(sock, SON([("commitTransaction", 1), ("lsid", lsid), ("txnNumber", 1),
                                     ("autocommit", False), ("$db", "admin")]))
            assert r.get("code") == 13, "nor commit its transaction: %r" % r
        finally:
            sock.close()


def test_a_lease_lock_of_one_user_is_refused_to_another(server):
    admin = make_admin(server)
    for name in ("alice", "bob"):
        admin.admin.command("createUser", name, pwd="pw", roles=[{"role": "readWrite", "db": "app"}])
    alice = client(server, username="alice", password="pw")
    bob = client(server, username="bob", password="pw")
    g = alice.app.command(SON([("acquireLock", "L"), ("owner", "alice"), ("leaseMs", 60000)]))
    token = g["token"]
    for cmd in (SON([("releaseLock", "L"), ("token", token)]),
                SON([("renewLock", "L"), ("token", token), ("leaseMs", 1000)])):
        with pytest.raises(OperationFailure) as e:
            bob.app.command(cmd)
        assert e.value.code == 13, "bob cannot %s alice's lock" % next(iter(cmd))
    with pytest.raises(OperationFailure) as e:
        bob.app.command(SON([("insert", "c"), ("documents", [{"x": 1}]),
                             ("fence", {"lock": "L", "token": token})]))
    assert e.value.code == 13, "nor write under its fence"
    alice.app.command(SON([("insert", "c"), ("documents", [{"x": 1}]),
                           ("fence", {"lock": "L", "token": token})]))
    assert alice.app.command(SON([("releaseLock", "L"), ("token", token)]))["released"] is True


# ---- user management ----

def test_user_management_commands(server):
    admin = make_admin(server)
    a = admin.app
    a.command("createUser", "u", pwd="pw", roles=["read"], customData={"team": "x"})
    with pytest.raises(OperationFailure) as e:
        a.command("createUser", "u", pwd="pw", roles=[])
    assert e.value.code == 51003 and 'User "u@app" already exists' in str(e.value)
    with pytest.raises(OperationFailure) as e:
        a.command("createUser", "v", pwd="pw", roles=["noSuchRole"])
    assert e.value.code == 31 and "Could not find role: noSuchRole@app" in str(e.value)
    with pytest.raises(OperationFailure) as e:
        a.command("createUser", "v", pwd="pw", roles=[], authenticationRestrictions=[])
    assert e.value.code == 238, "refused by name, never ignored"
    with pytest.raises(OperationFailure) as e:
        a.command("createUser", "v", pwd="", roles=[])
    assert e.value.code == 2
    with pytest.raises(OperationFailure) as e:
        a.command("createUser", "v", roles=[])
    assert e.value.code == 2 and "pwd" in str(e.value)
    info = a.command("usersInfo", "u")["users"]
    assert len(info) == 1 and info[0]["user"] == "u" and info[0]["db"] == "app"
    assert info[0]["roles"] == [{"role": "read", "db": "app"}]
    assert info[0]["customData"] == {"team": "x"}
    assert sorted(info[0]["mechanisms"]) == ["SCRAM-SHA-1", "SCRAM-SHA-256"]
    assert "credentials" not in info[0], "credentials only with showCredentials"
    creds = a.command("usersInfo", "u", showCredentials=True)["users"][0]["credentials"]
    assert creds["SCRAM-SHA-256"]["iterationCount"] == 15000, creds
    assert creds["SCRAM-SHA-1"]["iterationCount"] == 10000, creds
    assert set(creds["SCRAM-SHA-256"]) == {"iterationCount", "salt", "storedKey", "serverKey"}
    a.command("updateUser", "u", pwd="pw2", roles=["readWrite"])
    assert code_of(lambda: client(server, username="u", password="pw",
                                  authSource="app").admin.command("ping")) == 18
    u = client(server, username="u", password="pw2", authSource="app")
    u.app.c.insert_one({"by": "u"})
    with pytest.raises(OperationFailure) as e:
        a.command("updateUser", "u")
    assert e.value.code == 2
    with pytest.raises(OperationFailure) as e:
        a.command("updateUser", "ghost", pwd="x")
    assert e.value.code == 11
    a.command("createUser", "v", pwd="pw", roles=[])
    assert len(a.command("usersInfo", 1)["users"]) == 2
    assert len(a.command("usersInfo", {"forAllDBs": True})["users"]) == 3
    assert a.command("dropAllUsersFromDatabase")["n"] == 2
    with pytest.raises(OperationFailure) as e:
        a.command("dropUser", "u")
    assert e.value.code == 11 and e.value.details["codeName"] == "UserNotFound"


def test_a_user_may_see_itself_but_not_others(server):
    admin = make_admin(server)
    admin.app.command("createUser", "me", pwd="pw", roles=["read"])
    admin.app.command("createUser", "other", pwd="pw", roles=["read"])
    me = client(server, username="me", password="pw", authSource="app")
    assert me.app.command("usersInfo", "me")["users"][0]["user"] == "me"
    assert code_of(lambda: me.app.command("usersInfo", "other")) == 13


def test_iteration_count_parameters_as_mongod(server):
    admin = make_admin(server)
    a = admin.admin
    assert a.command("getParameter", 1, scramIterationCount=1)["scramIterationCount"] == 10000
    assert a.command("getParameter", 1, scramSHA256IterationCount=1)[
        "scramSHA256IterationCount"] == 15000
    assert code_of(lambda: a.command("setParameter", 1, scramIterationCount=100)) == 2, \
        "below mongod's minimum"
    a.command("setParameter", 1, scramSHA256IterationCount=20000)
    a.command("createUser", "it", pwd="pw", roles=[])
    creds = a.command("usersInfo", "it", showCredentials=True)["users"][0]["credentials"]
    assert creds["SCRAM-SHA-256"]["iterationCount"] == 20000
    assert client(server, username="it", password="pw").admin.command("connectionStatus")


# ---- user-defined roles ----

def test_user_defined_roles_grant_exactly_their_privileges(server):
    admin = make_admin(server)
    admin.app.c.insert_one({"a": 1})
    admin.app.d.insert_one({"a": 1})
    app = admin.app
    app.command("createRole", "cReader", privileges=[
        {"resource": {"db": "app", "collection": "c"}, "actions": ["find"]}], roles=[])
    with pytest.raises(OperationFailure) as e:
        app.command("createRole", "cReader", privileges=[], roles=[])
    assert e.value.code == 51002
    with pytest.raises(OperationFailure) as e:
        app.command("createRole", "bad", privileges=[
            {"resource": {"db": "other", "collection": ""}, "actions": ["find"]}], roles=[])
    assert e.value.code == 2, "a role outside admin cannot name another database"
    with pytest.raises(OperationFailure) as e:
        app.command("createRole", "bad", privileges=[
            {"resource": {"db": "app", "collection": ""}, "actions": ["noSuchAction"]}], roles=[])
    assert e.value.code == 9
    app.command("createUser", "ru", pwd="pw", roles=["cReader"])
    u = client(server, username="ru", password="pw", authSource="app")
    assert u.app.c.find_one({}, {"_id": 0}) == {"a": 1}
    assert code_of(lambda: u.app.d.find_one()) == 13, "only the collection the role names"
    assert code_of(lambda: u.app.c.insert_one({})) == 13
    app.command("grantPrivilegesToRole", "cReader", privileges=[
        {"resource": {"db": "app", "collection": "c"}, "actions": ["insert"]}])
    u.app.c.insert_one({"a": 2})
    app.command("revokePrivilegesFromRole", "cReader", privileges=[
        {"resource": {"db": "app", "collection": "c"}, "actions": ["insert"]}])
    assert code_of(lambda: u.app.c.insert_one({})) == 13
    app.command("createRole", "dReader", privileges=[
        {"resource": {"db": "app", "collection": "d"}, "actions": ["find"]}], roles=["cReader"])
    with pytest.raises(OperationFailure) as e:
        app.command("grantRolesToRole", "cReader", roles=["dReader"])
    assert "cycle" in e.value.details["errmsg"]
    app.command("updateUser", "ru", roles=["dReader"])
    assert u.app.d.find_one() is not None and u.app.c.find_one() is not None, "inherited"
    info = app.command("rolesInfo", "dReader", showPrivileges=True)["roles"][0]
    assert info["isBuiltin"] is False and info["roles"] == [{"role": "cReader", "db": "app"}]
    assert {"role": "cReader", "db": "app"} in info["inheritedRoles"]
    assert any(p["resource"] == {"db": "app", "collection": "c"}
               for p in info["inheritedPrivileges"]), info
    assert app.command("rolesInfo", "read")["roles"][0]["isBuiltin"] is True
    app.command("dropRole", "dReader")
    assert code_of(lambda: u.app.d.find_one()) == 13, "a dropped role grants nothing"
    assert app.command("usersInfo", "ru")["users"][0]["roles"] == [], \
        "dropRole takes the role from its users"
    assert app.command("dropAllRolesFromDatabase")["n"] == 1


# ---- durability ----

def _no_password_under(dbpath, secrets):
    found = []
    for root, _dirs, files in os.walk(dbpath):
        for f in files:
            data = open(os.path.join(root, f), "rb").read()
            for s in secrets:
                if s.encode() in data:
                    found.append("%s holds %r" % (f, s))
    return found


@pytest.mark.parametrize("kill", [False, True], ids=["restart", "kill-9"])
def test_users_survive_restart_and_no_password_is_stored(server, kill):
    admin = make_admin(server)
    admin.admin.command("createRole", "writer", roles=["readWriteAnyDatabase"], privileges=[])
    admin.admin.command("createUser", "keeper", pwd="Unique-Pw-1234", roles=["writer"])
    if not kill:
        admin.admin.command("fsync")  # a snapshot: the users come back from it, not the log
    admin.close()
    new = restart(server, kill=kill)
    try:
        # restart() starts the new one without --auth: check its data, then
        # run a server with --auth on the same directory
        problems = new.stop()
        assert problems == [], problems
        authed = AtomdbServer(extra_args=["--auth"])
        authed.dbpath = new.dbpath
        authed.start()
        try:
            c = client(authed, username="keeper", password="Unique-Pw-1234")
            c.app.c.insert_one({"after": "restart"})
            anon = client(authed)
            assert code_of(lambda: anon.admin.command("createUser", "x", pwd="p", roles=[])) \
                == 13, "the localhost exception stays closed after a restart"
            found = _no_password_under(authed.dbpath, ["Unique-Pw-1234", PASSWORD])
            assert not found, found
        finally:
            stop_all([authed])
        new.proc = None
    finally:
        new.cleanup()


# ---- start-up ----

def test_protected_mode_refuses_a_public_address_without_auth(tmp_path):
    port = free_port()
    p = subprocess.run([str(atomdb_bin()), "--bind_ip_all", "--port", str(port), "--dbpath",
                        str(tmp_path / "d")], capture_output=True, text=True, timeout=30)
    assert p.returncode == 2, p
    assert "--auth" in p.stderr and "--protected-mode off" in p.stderr, p.stderr
    assert not (tmp_path / "d").exists(), "nothing was started"


def test_protected_mode_lets_auth_listen_on_every_address(tmp_path):
    """security.authorization: enabled in mongod.conf turns access control
    on, and then a non-loopback address is allowed."""
    conf = tmp_path / "mongod.conf"
    port = free_port()
    conf.write_text("net:\n  port: %d\n  bindIp: 0.0.0.0\nsecurity:\n  authorization: enabled\n"
                    "storage:\n  dbPath: %s\n" % (port, tmp_path / "d"))
    proc = subprocess.Popen([str(atomdb_bin()), "-f", str(conf)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        c = MongoClient("127.0.0.1", port, directConnection=True, serverSelectionTimeoutMS=10000)
        assert code_of(lambda: c.app.c.find_one()) == 13, "access control is on"
        c.close()
    finally:
        proc.terminate()
        assert proc.wait(timeout=20) == 0, "a clean stop"
