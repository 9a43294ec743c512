"""The per-request fast paths of issue 17, through pymongo and raw OP_MSG:
top-level $inc/$set patched in place (src/doc/update/inplace.c), the
retryable-write record stored with one _id lookup, find's filter and
projection reused from the plan cache. Each test checks what a client sees
— values and their BSON types, write results, change-stream and oplog
entries, a retry answered after kill -9 — against what mongod 7.0 answers
for the same statements (the documented $inc/$set semantics)."""

import os

import pytest
from bson import Binary, Int64, SON
from bson.decimal128 import Decimal128
from pymongo import ReturnDocument
from pymongo.errors import OperationFailure

from atomdb_clients import fresh_collection
from atomdb_testlib import raw_command, restart, stop_all


@pytest.fixture
def coll(client, request):
    return fresh_collection(client.test_fastpath, request)


def raw_doc(coll, _id):
    """The stored document with its exact BSON types (pymongo decodes
    int32 as int, int64 as Int64)."""
    return coll.find_one({"_id": _id})


def test_hot_counter_increments_are_exact_and_stay_int32(coll):
    coll.insert_one({"_id": 1, "favCount": 0, "title": "course"})
    for _ in range(50):
        r = coll.update_one({"_id": 1}, {"$inc": {"favCount": 1}})
        assert (r.matched_count, r.modified_count) == (1, 1), "each $inc matches and modifies"
    doc = raw_doc(coll, 1)
    assert doc == {"_id": 1, "favCount": 50, "title": "course"}, "50 increments, field order kept"
    assert type(doc["favCount"]) is int, "an int32 counter stays int32"


def test_int32_overflow_promotes_to_int64_as_mongod(coll):
    coll.insert_one({"_id": 1, "n": 2147483646})
    coll.update_one({"_id": 1}, {"$inc": {"n": 1}})
    assert type(raw_doc(coll, 1)["n"]) is int, "2147483647 still fits int32"
    coll.update_one({"_id": 1}, {"$inc": {"n": 1}})
    n = raw_doc(coll, 1)["n"]
    assert isinstance(n, Int64) and n == 2147483648, "past INT32_MAX the value becomes int64"


def test_int64_overflow_is_an_error_and_changes_nothing(coll):
    coll.insert_one({"_id": 1, "n": Int64(2 ** 63 - 1), "other": 5})
    with pytest.raises(OperationFailure) as e:
        coll.update_one({"_id": 1}, {"$inc": {"n": 1}})
    assert e.value.code == 2, "int64 overflow is BadValue, as mongod: %r" % (e.value.details,)
    assert "Failed to apply $inc operations to current value" in str(e.value)
    assert raw_doc(coll, 1) == {"_id": 1, "n": 2 ** 63 - 1, "other": 5}, "nothing written"


def test_inc_on_a_string_is_type_mismatch(coll):
    coll.insert_one({"_id": 1, "n": "x"})
    with pytest.raises(OperationFailure) as e:
        coll.update_one({"_id": 1}, {"$inc": {"n": 1}})
    assert e.value.code == 14, "TypeMismatch 14: %r" % (e.value.details,)


def test_double_decimal_and_mixed_increments(coll):
    coll.insert_one({"_id": 1, "d": 1.5, "dec": Decimal128("0.1"), "i": 1})
    coll.update_one({"_id": 1}, {"$inc": {"d": 2, "dec": Decimal128("0.2")}})
    coll.update_one({"_id": 1}, {"$inc": {"i": 0.5}})
    doc = raw_doc(coll, 1)
    assert doc["d"] == 3.5 and type(doc["d"]) is float, "double + int32 stays double"
    assert str(doc["dec"]) == "0.3", "decimal stays exact"
    assert doc["i"] == 1.5 and type(doc["i"]) is float, "int32 + double becomes double"


def test_inc_by_zero_and_set_to_same_value_modify_nothing(coll):
    coll.insert_one({"_id": 1, "n": 7, "flag": True})
    r = coll.update_one({"_id": 1}, {"$inc": {"n": 0}, "$set": {"flag": True}})
    assert (r.matched_count, r.modified_count) == (1, 0), "matched, not modified"


def test_set_of_same_type_scalars_and_type_change(coll):
    coll.insert_one({"_id": 1, "sold": False, "qty": 3, "seat": "N"})
    coll.update_one({"_id": 1}, {"$set": {"sold": True, "qty": 2}})
    coll.update_one({"_id": 1}, {"$set": {"seat": "Y:user01"}})
    coll.update_one({"_id": 1}, {"$set": {"qty": Int64(9)}})
    doc = raw_doc(coll, 1)
    assert doc == {"_id": 1, "sold": True, "qty": 9, "seat": "Y:user01"}
    assert isinstance(doc["qty"], Int64), "$set to an int64 stores an int64"


def test_conditional_sale_stops_at_zero(coll):
    coll.insert_one({"_id": "sku1", "stock": 3})
    won = 0
    for _ in range(5):
        r = coll.update_one({"_id": "sku1", "stock": {"$gte": 1}}, {"$inc": {"stock": -1}})
        won += r.modified_count
    assert won == 3, "exactly the stock is sold"
    assert raw_doc(coll, "sku1")["stock"] == 0, "stock never goes below zero"


def test_find_and_modify_upsert_new_counts(coll):
    for i in range(1, 6):
        doc = coll.find_one_and_update({"_id": 1}, {"$inc": {"count": Int64(1)}}, upsert=True,
                                       return_document=ReturnDocument.AFTER)
        assert doc == {"_id": 1, "count": i}, "findAndModify returns the new count"
        assert isinstance(doc["count"], Int64)


def test_new_field_and_dotted_paths_still_work(coll):
    coll.insert_one({"_id": 1, "a": 1, "seats": {"101": "N"}})
    coll.update_one({"_id": 1}, {"$inc": {"a": 1, "b": 1}})
    coll.update_one({"_id": 1, "seats.101": "N"}, {"$set": {"seats.101": "Y:user01"}})
    assert raw_doc(coll, 1) == {"_id": 1, "a": 2, "seats": {"101": "Y:user01"}, "b": 1}


def test_positional_update_still_uses_the_matched_index(coll):
    coll.insert_one({"_id": 1, "grades": [80, 85, 90]})
    coll.update_one({"_id": 1, "grades": 85}, {"$set": {"grades.$": 86}})
    assert raw_doc(coll, 1)["grades"] == [80, 86, 90], "$ is the matched element"


def test_secondary_index_on_an_incremented_field_is_maintained(coll):
    coll.create_index("n")
    coll.insert_many([{"_id": 1, "n": 1}, {"_id": 2, "n": 5}])
    coll.update_one({"_id": 1}, {"$inc": {"n": 10}})
    got = [d["_id"] for d in coll.find({"n": {"$gte": 5}}).sort("n", 1).hint([("n", 1)])]
    assert got == [2, 1], "the index holds the new value: %r" % (got,)
    assert list(coll.find({"n": 1}).hint([("n", 1)])) == [], "the old key is gone"


def test_validator_is_honoured_on_an_in_place_update(client):
    db = client.test_fastpath
    db.drop_collection("validated")
    db.create_collection("validated", validator={"stock": {"$gte": 0}})
    c = db.validated
    c.insert_one({"_id": 1, "stock": 1})
    c.update_one({"_id": 1}, {"$inc": {"stock": -1}})
    with pytest.raises(OperationFailure) as e:
        c.update_one({"_id": 1}, {"$inc": {"stock": -1}})
    assert e.value.code == 121, "DocumentValidationFailure: %r" % (e.value.details,)
    assert raw_doc(c, 1)["stock"] == 0, "the refused update wrote nothing"


def test_change_stream_reports_the_in_place_change(coll):
    coll.insert_one({"_id": 1, "n": 1, "s": "x"})
    with coll.watch() as stream:
        coll.update_one({"_id": 1}, {"$inc": {"n": 1}})
        ev = stream.next()
    assert ev["operationType"] == "update"
    assert ev["updateDescription"]["updatedFields"] == {"n": 2}, ev["updateDescription"]
    assert ev["updateDescription"]["removedFields"] == []


def test_oplog_entry_of_an_in_place_update(client, coll):
    coll.insert_one({"_id": 1, "n": 1})
    coll.update_one({"_id": 1}, {"$inc": {"n": 41}})
    entry = client.local["oplog.rs"].find_one({"ns": coll.full_name, "op": "u"},
                                              sort=[("$natural", -1)])
    assert entry is not None, "the update is in the oplog"
    assert entry["o2"] == {"_id": 1}, entry
    assert raw_doc(coll, 1)["n"] == 42


def test_find_by_id_with_the_same_filter_and_projection_over_changing_data(coll):
    coll.insert_many([{"_id": i, "count": i * 10, "v": 1, "hidden": "h"} for i in range(3)])
    for round_ in range(3):
        for i in range(3):
            got = list(coll.find({"_id": i}, {"count": 1, "v": 1}).limit(1))
            assert got == [{"_id": i, "count": i * 10 + round_, "v": 1}], got
        coll.update_many({}, {"$inc": {"count": 1}})


def test_positional_projection_reused_across_finds(coll):
    coll.insert_many([{"_id": 1, "a": [1, 2, 3]}, {"_id": 2, "a": [3, 4, 5]}])
    for _ in range(3):
        assert list(coll.find({"a": 3}, {"a.$": 1}).sort("_id", 1)) == [
            {"_id": 1, "a": [3]}, {"_id": 2, "a": [3]}], "each document's own matched element"


def test_find_with_let_is_not_served_from_another_lets_plan(client, coll):
    coll.insert_many([{"_id": 1, "x": 1}, {"_id": 2, "x": 2}])
    for want in (1, 2, 1):
        r = client.test_fastpath.command(SON([
            ("find", coll.name), ("filter", {"$expr": {"$eq": ["$x", "$$want"]}}),
            ("let", {"want": want})]))
        assert [d["_id"] for d in r["cursor"]["firstBatch"]] == [want], r


def test_batch_larger_than_one_reply_keeps_its_cursor(coll):
    coll.insert_many([{"_id": i, "k": 1} for i in range(250)])
    got = [d["_id"] for d in coll.find({"k": 1}, {"_id": 1}).batch_size(100)]
    assert got == list(range(250)), "getMore after a first batch sees every document"
    got = [d["_id"] for d in coll.find({"k": 1}, {"_id": 1}).batch_size(100)]
    assert got == list(range(250)), "the same find again, from the cached plan"


def test_retried_update_after_kill_returns_the_recorded_result(atomdb_factory):
    server = atomdb_factory("--journal", "write")
    servers = []
    try:
        lsid = {"id": Binary(os.urandom(16), 4)}
        raw_command(server, {"insert": "c", "documents": [{"_id": 1, "n": 0}], "$db": "fp"})
        cmd = SON([("update", "c"), ("updates", [{"q": {"_id": 1}, "u": {"$inc": {"n": 1}}}]),
                   ("lsid", lsid), ("txnNumber", Int64(7)), ("$db", "fp")])
        first = raw_command(server, cmd)
        assert (first["ok"], first["n"], first["nModified"]) == (1.0, 1, 1), first
        new = restart(server, kill=True)
        servers.append(new)
        again = raw_command(new, cmd)
        assert (again["ok"], again["n"], again["nModified"]) == (1.0, 1, 1), \
            "the retry is answered from its record: %r" % (again,)
        r = raw_command(new, {"find": "c", "filter": {"_id": 1}, "$db": "fp"})
        assert r["cursor"]["firstBatch"] == [{"_id": 1, "n": 1}], "applied exactly once"
        nxt = raw_command(new, SON([("update", "c"),
                                    ("updates", [{"q": {"_id": 1}, "u": {"$inc": {"n": 1}}}]),
                                    ("lsid", lsid), ("txnNumber", Int64(8)), ("$db", "fp")]))
        assert nxt["nModified"] == 1
        old = raw_command(new, cmd)
        assert old["ok"] == 0 and old["code"] == 225, "an older txnNumber is TransactionTooOld"
    finally:
        stop_all(servers)
