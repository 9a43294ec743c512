"""setParameter / getParameter through pymongo: the parameters test suites
and operators set are honoured (notablescan refuses unindexed queries,
ttlMonitorEnabled stops the TTL monitor) or refused with a clear error."""

import pytest
from pymongo import MongoClient
from pymongo.errors import OperationFailure


@pytest.fixture
def client(atomdb):
    c = MongoClient(atomdb.uri())
    yield c
    c.close()


def code_of(fn):
    with pytest.raises(OperationFailure) as e:
        fn()
    return e.value.code


def test_get_parameter_star_lists_every_parameter_by_name(client):
    r = client.admin.command("getParameter", "*")
    for name in ("ttlMonitorSleepSecs", "ttlMonitorEnabled", "notablescan", "logLevel",
                 "internalQueryMaxBlockingSortMemoryUsageBytes", "cursorTimeoutMillis",
                 "featureCompatibilityVersion"):
        assert name in r, "getParameter '*' has %s" % name
    assert r["featureCompatibilityVersion"] == {"version": "7.0"}


def test_show_details_gives_value_and_settability(client):
    r = client.admin.command("getParameter", {"showDetails": True}, ttlMonitorSleepSecs=1,
                             authenticationMechanisms=1)
    assert r["ttlMonitorSleepSecs"]["settableAtRuntime"] is True
    assert isinstance(r["ttlMonitorSleepSecs"]["value"], int)
    assert r["authenticationMechanisms"]["settableAtRuntime"] is False
    r = client.admin.command("getParameter", {"allParameters": True, "showDetails": True})
    assert set(r["notablescan"]) == {"value", "settableAtRuntime", "settableAtStartup"}


def test_set_parameter_reads_back_and_reports_was(client):
    admin = client.admin
    r = admin.command("setParameter", 1, ttlMonitorSleepSecs=5)
    assert r["was"] == 1, "setParameter replies with the previous value"
    assert admin.command("getParameter", 1, ttlMonitorSleepSecs=1)["ttlMonitorSleepSecs"] == 5
    admin.command("setParameter", 1, logLevel=2)
    assert admin.command("getParameter", 1, logLevel=1)["logLevel"] == 2
    admin.command("setParameter", 1, logComponentVerbosity={"command": {"verbosity": 1}})
    v = admin.command("getParameter", 1, logComponentVerbosity=1)["logComponentVerbosity"]
    assert v["command"] == {"verbosity": 1}
    admin.command("setParameter", 1, internalQueryMaxBlockingSortMemoryUsageBytes=12345)
    assert admin.command("getParameter", 1,
                         internalQueryMaxBlockingSortMemoryUsageBytes=1)[
        "internalQueryMaxBlockingSortMemoryUsageBytes"] == 12345


def test_bad_and_unknown_parameters_are_refused(client):
    admin = client.admin
    assert code_of(lambda: admin.command("setParameter", 1, noSuchParameter=1)) == 72
    assert code_of(lambda: admin.command("setParameter", 1, ttlMonitorSleepSecs=0)) == 2
    assert code_of(lambda: admin.command("setParameter", 1, ttlMonitorSleepSecs="x")) == 2
    assert code_of(lambda: admin.command("setParameter", 1, logLevel=9)) == 2
    assert code_of(lambda: admin.command("setParameter", 1,
                                         authenticationMechanisms=["PLAIN"])) == 20
    assert code_of(lambda: admin.command("setParameter", 1,
                                         featureCompatibilityVersion="6.0")) == 20
    assert code_of(lambda: admin.command("getParameter", 1, noSuchParameter=1)) == 72
    assert code_of(lambda: admin.command("getParameter", {"bogus": True}, logLevel=1)) == 40415


def test_notablescan_refuses_unindexed_queries_only(client):
    coll = client.t.c
    coll.insert_many([{"_id": i, "a": i, "b": i} for i in range(5)])
    coll.create_index("a")
    client.admin.command("setParameter", 1, notablescan=True)
    try:
        assert code_of(lambda: list(coll.find({"b": 1}))) == 291, \
            "a filter no index serves fails with NoQueryExecutionPlans"
        assert [d["_id"] for d in coll.find({"a": 2})] == [2], "an indexed filter runs"
        assert len(list(coll.find({}))) == 5, "an empty filter may still scan"
        assert code_of(lambda: coll.update_one({"b": 1}, {"$set": {"x": 1}})) == 291
    finally:
        client.admin.command("setParameter", 1, notablescan=False)
    assert len(list(coll.find({"b": 1}))) == 1


def test_ttl_monitor_disabled_keeps_expired_documents(atomdb_factory):
    import datetime
    import time
    server = atomdb_factory("--setParameter", "ttlMonitorEnabled=false")
    c = MongoClient(server.uri())
    try:
        assert c.admin.command("getParameter", 1, ttlMonitorEnabled=1)["ttlMonitorEnabled"] is False
        coll = c.t.ttl
        coll.create_index("at", expireAfterSeconds=0)
        coll.insert_one({"at": datetime.datetime(2000, 1, 1)})
        # the monitor would run every second; wait for three of its ticks
        time.sleep(3)
        assert coll.count_documents({}) == 1, "no TTL pass runs while ttlMonitorEnabled is false"
        c.admin.command("setParameter", 1, ttlMonitorEnabled=True)
        deadline = time.monotonic() + 30
        while coll.count_documents({}) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert coll.count_documents({}) == 0, "the TTL monitor deletes once it is enabled again"
    finally:
        c.close()
