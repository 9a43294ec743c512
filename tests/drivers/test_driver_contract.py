"""What drivers rely on in commands atomdb claims (issue 15), through
pymongo 3.11 and raw OP_MSG: the cluster time in every reply and causal
consistency; write concern applied then reported as a one-member replica
set does; read concern validated; cursor options (batchSize 0, min/max,
returnKey, noCursorTimeout) honoured or refused by name; DDL inside
transactions as mongod 7; index specs kept as given; partial indexes
planned; renameCollection, validate, dbHash, fsync lock, listDatabases."""

import time

from bson.son import SON
from bson.timestamp import Timestamp

import atomdb_clients
from atomdb_clients import fails
from atomdb_testlib import raw_command, restart, stop_all


def connect(server):
    return atomdb_clients.connect(server, "replicaSet=rs0")


client = atomdb_clients.per_test_client("replicaSet=rs0")


# ---- cluster time

def test_every_reply_carries_cluster_time_and_operation_time(atomdb, client):
    r = client.r.command({"insert": "t", "documents": [{}]})
    assert sorted(r) == ["$clusterTime", "n", "ok", "operationTime"], \
        "an insert's reply has $clusterTime and operationTime: %s" % sorted(r)
    ct = r["$clusterTime"]
    assert isinstance(ct["clusterTime"], Timestamp) and ct["clusterTime"] == r["operationTime"], \
        "operationTime is the write's cluster time"
    assert set(ct["signature"]) == {"hash", "keyId"} and len(ct["signature"]["hash"]) == 20, \
        "signature has a 20-byte hash and a keyId, as drivers expect"
    err = raw_command(atomdb, {"find": 1, "$db": "r"})
    assert err["ok"] == 0 and isinstance(err.get("operationTime"), Timestamp), \
        "an error reply carries the cluster time too"


def test_cluster_time_advances_with_each_commit_and_not_with_reads(client):
    t1 = client.r.command({"insert": "t", "documents": [{}]})["operationTime"]
    t2 = client.r.command({"insert": "t", "documents": [{}]})["operationTime"]
    assert t2 > t1, "each commit gets a later cluster time"
    t3 = client.r.command({"find": "t"})["operationTime"]
    assert t3 == t2, "a read's operationTime is the newest commit it could see"


def test_cluster_time_never_goes_back_across_a_restart(atomdb):
    c = connect(atomdb)
    before = c.r.command({"insert": "t", "documents": [{}]})["operationTime"]
    c.close()
    servers = []
    try:
        s2 = restart(atomdb, kill=True)
        servers.append(s2)
        c = connect(s2)
        after = c.admin.command("ping")["$clusterTime"]["clusterTime"]
        assert after >= before, "recovery restores the cluster time (%s, then %s)" % (before, after)
        later = c.r.command({"insert": "t", "documents": [{}]})["operationTime"]
        assert later > before, "the next commit is later than every earlier one"
        c.close()
    finally:
        stop_all(servers)


def test_causally_consistent_session_gets_operation_time_and_sends_after_cluster_time(client):
    with client.start_session(causal_consistency=True) as s:
        client.r.t.insert_one({"x": 1}, session=s)
        assert isinstance(s.operation_time, Timestamp), "the session learns the write's time"
        assert client.r.t.find_one({"x": 1}, session=s) is not None, \
            "a read after the write in the same session sees it"


def test_read_concern_is_validated_as_mongod(atomdb, client):
    db = client.r
    fails(9, lambda: db.command(SON([("find", "t"), ("readConcern", {"level": "!invalid123"})])),
          "an unknown level is FailedToParse")
    fails(72, lambda: db.command(SON([("find", "t"), ("readConcern", {"x": 1})])),
          "an unknown field is InvalidOptions")
    fails(72, lambda: db.command(SON([("find", "t"), ("readConcern",
                                                      {"afterClusterTime": Timestamp(2 ** 31, 1)})])),
          "afterClusterTime ahead of the cluster time")
    fails(72, lambda: db.command(SON([("insert", "t"), ("documents", [{}]),
                                      ("readConcern", {"level": "majority"})])),
          "a write outside a transaction takes no readConcern level but local")
    now = client.admin.command("ping")["operationTime"]
    r = db.command(SON([("find", "t"), ("readConcern", {"level": "majority",
                                                        "afterClusterTime": now})]))
    assert r["ok"] == 1, "afterClusterTime at or before the cluster time is served"
    r = db.command(SON([("find", "t"), ("readConcern", {"level": "snapshot"})]))
    assert isinstance(r["cursor"].get("atClusterTime"), Timestamp), \
        "a snapshot read reports the atClusterTime it read at"
    for level in ("local", "available", "linearizable"):
        assert db.command(SON([("find", "t"), ("readConcern", {"level": level})]))["ok"] == 1, \
            "level %s is accepted" % level


# ---- write concern

def test_unsatisfiable_write_concern_writes_and_reports_a_write_concern_error(client):
    db = client.r
    r = db.command(SON([("insert", "t"), ("documents", [{"_id": 1}]), ("writeConcern", {"w": 2})]))
    assert r["ok"] == 1 and r["n"] == 1, "the insert is applied"
    wce = r["writeConcernError"]
    assert wce["code"] == 100 and wce["codeName"] == "UnsatisfiableWriteConcern", \
        "w: 2 on one node is UnsatisfiableWriteConcern: %s" % wce
    assert wce["errInfo"]["writeConcern"]["w"] == 2, "errInfo names the write concern"
    assert db.t.find_one({"_id": 1}) == {"_id": 1}, "the document is there"
    r = db.command(SON([("insert", "t"), ("documents", [{"_id": 2}]),
                        ("writeConcern", {"w": "dc-east"})]))
    assert r["writeConcernError"]["code"] == 79, "an unknown tag is UnknownReplWriteConcern"
    for cmd in (SON([("create", "wc_new")]), SON([("createIndexes", "t"),
                                                 ("indexes", [{"key": {"a": 1}, "name": "a_1"}])]),
                SON([("dropIndexes", "t"), ("index", "a_1")]), SON([("drop", "wc_new")])):
        cmd["writeConcern"] = {"w": 3}
        r = db.command(cmd)
        assert r["ok"] == 1 and r["writeConcernError"]["code"] == 100, \
            "%s applies and reports the write concern error" % next(iter(cmd))
    r = db.command(SON([("aggregate", "t"), ("pipeline", [{"$out": "wc_out"}]), ("cursor", {}),
                        ("writeConcern", {"w": 2})]))
    assert r["writeConcernError"]["code"] == 100 and db.wc_out.count_documents({}) == 2, \
        "$out writes and reports too"
    r = client.r2.command(SON([("dropDatabase", 1), ("writeConcern", {"w": 2})]))
    assert r["writeConcernError"]["code"] == 100, "dropDatabase reports it too"


def test_malformed_write_concern_writes_nothing(client):
    db = client.r
    fails(9, lambda: db.command(SON([("insert", "t"), ("documents", [{"_id": 9}]),
                                     ("writeConcern", {"w": -1})])), "a negative w")
    fails(9, lambda: db.command(SON([("insert", "t"), ("documents", [{"_id": 9}]),
                                     ("writeConcern", {"j": True, "fsync": True})])),
          "j and fsync together")
    fails(9, lambda: db.command(SON([("insert", "t"), ("documents", [{"_id": 9}]),
                                     ("writeConcern", {"wtimeoutMS": 5})])), "an unknown field")
    fails(72, lambda: db.command(SON([("find", "t"), ("writeConcern", {"w": 1})])),
          "a read does not take a write concern")
    assert db.t.find_one({"_id": 9}) is None, "nothing was written"


# ---- cursors

def test_batch_size_zero_opens_a_cursor_with_an_empty_first_batch(client):
    db = client.r
    db.t.insert_many([{"_id": i} for i in range(5)])
    r = db.command(SON([("find", "t"), ("batchSize", 0)]))
    assert r["cursor"]["firstBatch"] == [] and r["cursor"]["id"] != 0, \
        "find batchSize 0: an empty first batch and an open cursor"
    more = db.command(SON([("getMore", r["cursor"]["id"]), ("collection", "t")]))
    assert len(more["cursor"]["nextBatch"]) == 5, "getMore returns the documents"
    r = db.command(SON([("aggregate", "t"), ("pipeline", []), ("cursor", {"batchSize": 0})]))
    assert r["cursor"]["firstBatch"] == [] and r["cursor"]["id"] != 0, "aggregate too"


def test_min_and_max_bound_the_hinted_index(client):
    db = client.r
    db.t.insert_many([{"_id": i, "x": i} for i in range(10)])
    db.t.create_index("x")
    r = db.command(SON([("find", "t"), ("min", {"x": 7}), ("hint", {"x": 1})]))
    assert [d["x"] for d in r["cursor"]["firstBatch"]] == [7, 8, 9], "min is inclusive"
    r = db.command(SON([("find", "t"), ("min", {"x": 3}), ("max", {"x": 6}), ("hint", "x_1")]))
    assert [d["x"] for d in r["cursor"]["firstBatch"]] == [3, 4, 5], "max is exclusive"
    fails(51173, lambda: db.command(SON([("find", "t"), ("min", {"x": 7})])),
          "min without a hint is refused, as mongod")
    fails(51174, lambda: db.command(SON([("find", "t"), ("min", {"y": 1}), ("hint", "x_1")])),
          "min on fields the index does not have")


def test_return_key_and_cursor_flags(client):
    db = client.r
    db.t.insert_many([{"_id": i, "x": i, "y": "big"} for i in range(3)])
    db.t.create_index("x")
    r = db.command(SON([("find", "t"), ("filter", {"x": {"$lt": 2}}), ("returnKey", True),
                        ("hint", "x_1")]))
    assert r["cursor"]["firstBatch"] == [{"x": 0}, {"x": 1}], "returnKey gives the index keys"
    r = db.command(SON([("find", "t"), ("noCursorTimeout", True), ("batchSize", 1),
                        ("allowPartialResults", True)]))
    assert r["ok"] == 1 and r["cursor"]["id"] != 0, "noCursorTimeout and allowPartialResults are taken"
    fails(238, lambda: db.command(SON([("find", "t"), ("showRecordId", True)])),
          "showRecordId is refused by name (atomdb has no record ids)")
    fails(40415, lambda: db.command(SON([("find", "t"), ("bogusOption", 1)])),
          "an unknown find field is refused")
    fails(40415, lambda: db.command(SON([("aggregate", "t"), ("pipeline", []), ("cursor", {}),
                                         ("bogus", 1)])), "an unknown aggregate field is refused")
    fails(2, lambda: db.command(SON([("getMore", r["cursor"]["id"]), ("collection", "t"),
                                     ("maxTimeMS", 10)])),
          "maxTimeMS on getMore needs an awaitData cursor")
    r2 = db.command(SON([("getMore", r["cursor"]["id"]), ("collection", "t"), ("comment", "hi")]))
    assert r2["ok"] == 1, "getMore takes a comment"


def test_count_and_distinct_refuse_what_they_do_not_implement(client):
    db = client.r
    db.t.insert_one({"a": "x"})
    # count and distinct take a collation now (test_collation.py); one they
    # cannot honour is refused, never answered as if bytewise
    fails(9, lambda: db.command(SON([("distinct", "t"), ("key", "a"),
                                     ("collation", {"locale": "en", "bogus": 1})])),
          "distinct with a collation option it does not know")
    fails(2, lambda: db.command(SON([("count", "t"), ("collation", {"locale": "xx_nope"})])),
          "count with an unknown locale")
    fails(40415, lambda: db.command(SON([("count", "t"), ("bogus", 1)])), "an unknown count field")
    fails(40415, lambda: db.command(SON([("distinct", "t"), ("key", "a"), ("bogus", 1)])),
          "an unknown distinct field")


# ---- DDL in transactions

def test_create_index_on_an_existing_collection_in_a_transaction_is_refused(client):
    db = client.r
    db.t.insert_one({"a": 1})
    with client.start_session() as s:
        s.start_transaction()
        fails(263, lambda: db.command(SON([("createIndexes", "t"),
                                           ("indexes", [{"key": {"a": 1}, "name": "a_1"}])]),
                                      session=s),
              "createIndexes on an existing collection in a transaction")
        s.abort_transaction()
    names = [ix["name"] for ix in db.t.list_indexes()]
    assert names == ["_id_"], "no index survives: %s" % names


def test_create_in_a_transaction_is_undone_by_abort_and_refuses_an_existing_one(client):
    db = client.r
    db.t.insert_one({"a": 1})
    with client.start_session() as s:
        s.start_transaction()
        fails(48, lambda: db.command("create", "t", session=s),
              "create of an existing collection in a transaction is NamespaceExists")
        s.abort_transaction()
    with client.start_session() as s:
        s.start_transaction()
        db.command("create", "fresh", session=s)
        db.command(SON([("createIndexes", "fresh"), ("indexes", [{"key": {"b": 1}, "name": "b_1"}])]),
                   session=s)
        db.fresh.insert_one({"b": 2}, session=s)
        s.abort_transaction()
    assert "fresh" not in db.list_collection_names(), "abort undoes the created collection"
    with client.start_session() as s:
        s.start_transaction()
        db.command("create", "fresh", session=s)
        db.command(SON([("createIndexes", "fresh"), ("indexes", [{"key": {"b": 1}, "name": "b_1"}])]),
                   session=s)
        s.commit_transaction()
    assert [ix["name"] for ix in db.fresh.list_indexes()] == ["_id_", "b_1"], \
        "commit keeps the collection and its index"


# ---- indexes

def test_index_specs_round_trip_and_unknown_options_are_refused(client):
    db = client.r
    db.command(SON([("createIndexes", "t"), ("indexes", [
        {"key": {"a": 1}, "name": "a_1", "background": True, "sparse": True},
        {"key": {"b": 1}, "name": "b_1", "hidden": True},
        {"key": {"c": 1}, "name": "c_1", "partialFilterExpression": {"c": {"$gt": 5}}},
        {"key": {"d": 1}, "name": "d_1", "expireAfterSeconds": 3600}])]))
    specs = {ix["name"]: ix for ix in db.t.list_indexes()}
    assert specs["a_1"].get("background") is True and specs["a_1"]["sparse"] is True, \
        "background and sparse come back"
    assert specs["b_1"]["hidden"] is True and specs["d_1"]["expireAfterSeconds"] == 3600, \
        "hidden and expireAfterSeconds come back"
    assert specs["c_1"]["partialFilterExpression"] == {"c": {"$gt": 5}}, "the partial filter too"
    fails(197, lambda: db.command(SON([("createIndexes", "t"),
                                       ("indexes", [{"key": {"e": 1}, "name": "e_1", "bogus": 1}])])),
          "an unknown index option is refused")


def test_hidden_indexes_are_not_planned_and_partial_indexes_are(client):
    db = client.r
    db.t.insert_many([{"_id": i, "b": i, "c": i} for i in range(20)])
    db.command(SON([("createIndexes", "t"), ("indexes", [
        {"key": {"b": 1}, "name": "b_1", "hidden": True},
        {"key": {"c": 1}, "name": "c_1", "partialFilterExpression": {"c": {"$gt": 5}}}])]))
    plan = db.t.find({"b": 3}).explain()["queryPlanner"]["winningPlan"]
    assert plan["stage"] == "COLLSCAN", "a hidden index is not used: %s" % plan
    fails(2, lambda: list(db.t.find({"b": 3}).hint("b_1")), "a hidden index cannot be hinted")
    plan = db.t.find({"c": {"$gt": 10}}).explain()["queryPlanner"]["winningPlan"]
    assert plan["stage"] == "FETCH" and plan["inputStage"]["indexName"] == "c_1", \
        "a query that implies the partial filter uses the partial index: %s" % plan
    assert "partialFilterExpression" in plan["atomdbPlanReason"], "explain says why"
    assert [d["_id"] for d in db.t.find({"c": {"$gt": 10}})] == list(range(11, 20)), \
        "and finds every document"
    plan = db.t.find({"c": {"$gt": 2}}).explain()["queryPlanner"]["winningPlan"]
    assert plan["stage"] == "COLLSCAN", "a query the partial filter does not cover cannot use it"
    assert len(list(db.t.find({"c": {"$gt": 2}}))) == 17, "and still finds every document"


# ---- more commands

def test_rename_collection_within_and_across_databases(atomdb):
    c = connect(atomdb)
    a = c.app
    a.src.insert_many([{"_id": i, "x": i} for i in range(5)])
    a.src.create_index("x")
    c.admin.command(SON([("renameCollection", "app.src"), ("to", "app.dst")]))
    assert a.dst.count_documents({}) == 5 and "src" not in a.list_collection_names(), \
        "renamed within the database"
    assert [ix["name"] for ix in a.dst.list_indexes()] == ["_id_", "x_1"], "indexes move along"
    a.other.insert_one({"_id": "old"})
    fails(48, lambda: c.admin.command(SON([("renameCollection", "app.dst"), ("to", "app.other")])),
          "an existing target without dropTarget")
    c.admin.command(SON([("renameCollection", "app.dst"), ("to", "archive.dst"),
                         ("dropTarget", True)]))
    assert c.archive.dst.count_documents({}) == 5, "renamed across databases"
    fails(26, lambda: c.admin.command(SON([("renameCollection", "app.nothing"), ("to", "app.x")])),
          "a missing source is NamespaceNotFound")
    fails(13, lambda: a.command(SON([("renameCollection", "app.other"), ("to", "app.y")])),
          "renameCollection runs against admin only")
    c.close()
    s2 = restart(atomdb, kill=True)
    try:
        c = connect(s2)
        assert c.archive.dst.count_documents({}) == 5 and "dst" not in c.app.list_collection_names(), \
            "the rename survives kill -9"
        assert c.archive.command("validate", "dst", full=True)["valid"], "and validates"
        c.close()
    finally:
        stop_all([s2])


def test_validate_cross_checks_documents_and_indexes(client):
    db = client.r
    db.t.insert_many([{"_id": i, "tags": ["a", "b"], "n": i} for i in range(50)])
    db.t.create_index("tags")
    db.t.create_index("n", unique=True)
    r = db.command("validate", "t", full=True)
    assert r["valid"] is True and r["nrecords"] == 50 and r["errors"] == [], "a healthy collection"
    assert r["keysPerIndex"] == {"_id_": 50, "tags_1": 100, "n_1": 50}, \
        "keys per index (the multikey index has one per element): %s" % r["keysPerIndex"]
    fails(26, lambda: db.command("validate", "nothing"), "validate of a missing collection")


def test_db_hash_changes_with_the_data(client):
    db = client.r
    db.t.insert_one({"_id": 1})
    h1 = db.command("dbHash")
    h2 = db.command("dbHash")
    assert h1["md5"] == h2["md5"] and set(h1["collections"]) == {"t"}, "stable without writes"
    db.t.insert_one({"_id": 2})
    assert db.command("dbHash")["collections"]["t"] != h1["collections"]["t"], \
        "a write changes the collection's hash"


def test_fsync_lock_refuses_writes_and_serves_reads_until_unlock(client):
    db = client.r
    db.t.insert_one({"_id": 1})
    r = client.admin.command("fsync", lock=True)
    assert r["lockCount"] == 1, "locked"
    fails(20, lambda: db.t.insert_one({"_id": 2}), "a write while locked")
    assert db.t.find_one({"_id": 1}) is not None, "reads are served"
    assert client.admin.command("fsyncUnlock")["lockCount"] == 0, "unlocked"
    db.t.insert_one({"_id": 2})
    fails(20, lambda: client.admin.command("fsyncUnlock"), "unlock when not locked")


def test_list_databases_shows_admin_config_and_local(client):
    names = [d["name"] for d in client.admin.command("listDatabases")["databases"]]
    assert {"admin", "config", "local"} <= set(names), "the built-in databases are listed: %s" % names


def test_map_reduce_is_refused_clearly(client):
    e = fails(115, lambda: client.r.command(SON([("mapReduce", "t"), ("map", "function(){}"),
                                                 ("reduce", "function(){}"),
                                                 ("out", {"inline": 1})])), "mapReduce")
    assert "JavaScript" in str(e), "the error says why"


def test_drop_indexes_with_a_bad_name_in_the_list_drops_nothing(client):
    # mongod checks every name first: one unknown name fails the command and
    # the indexes named before it stay
    db = client.contract_dropidx
    db.t.drop()
    db.t.create_index("a")
    db.t.create_index("b")
    fails(27, lambda: db.command({"dropIndexes": "t", "index": ["a_1", "nope", "b_1"]}),
          "an unknown name in the list")
    fails(72, lambda: db.command({"dropIndexes": "t", "index": ["a_1", "_id_"]}),
          "_id_ in the list")
    fails(14, lambda: db.command({"dropIndexes": "t", "index": ["a_1", 5]}),
          "a non-string in the list")
    assert sorted(db.t.index_information()) == ["_id_", "a_1", "b_1"]
    db.command({"dropIndexes": "t", "index": ["a_1", "b_1"]})
    assert sorted(db.t.index_information()) == ["_id_"]
    e = fails(27, lambda: db.command({"dropIndexes": "t", "index": {"zz": 1}}), "an unknown key")
    assert "can't find index with key: { zz: 1 }" in str(e), e
