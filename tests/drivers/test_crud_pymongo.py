"""pymongo 3.11 against a real atomdb: the query and update languages, CRUD
commands, findAndModify, count/distinct/aggregate, bulkWrite, indexes (unique,
sparse, partial, TTL, explain), namespace validation and w:0 writes (issue 3).

Every expectation is what mongod 7.0 answers; where atomdb differs the test
fails and says so."""

import datetime
import re
import time

import bson
import pytest
from bson.decimal128 import Decimal128
from bson.int64 import Int64
from bson.max_key import MaxKey
from bson.min_key import MinKey
from bson.objectid import ObjectId
from bson.regex import Regex
from bson.son import SON
from bson.timestamp import Timestamp
from bson.binary import Binary
from pymongo import ASCENDING, DESCENDING, MongoClient, ReturnDocument
from pymongo import InsertOne, UpdateOne, UpdateMany, ReplaceOne, DeleteOne, DeleteMany
from pymongo.errors import BulkWriteError, DuplicateKeyError, OperationFailure, WriteError
from pymongo.write_concern import WriteConcern

import wireproto as w
from atomdb_clients import connect, fresh_collection

DB = "db"


@pytest.fixture(scope="module")
def client(atomdb_module):
    c = connect(atomdb_module, socketTimeoutMS=20000)
    yield c
    c.close()


@pytest.fixture
def db(client):
    return client[DB]


@pytest.fixture
def coll(client, request):
    """A fresh, empty collection named after the test."""
    return fresh_collection(client[DB], request)


def ids(docs):
    return [d["_id"] for d in docs]


def find_ids(coll, flt, **kw):
    return sorted(ids(coll.find(flt, **kw)))


def stages(plan):
    """Every 'stage' name in an explain plan tree."""
    found = []
    if isinstance(plan, dict):
        if "stage" in plan:
            found.append(plan["stage"])
        for v in plan.values():
            found.extend(stages(v))
    elif isinstance(plan, list):
        for v in plan:
            found.extend(stages(v))
    return found


def winning_stages(db, coll, flt, sort=None):
    cmd = SON([("find", coll.name), ("filter", flt)])
    if sort:
        cmd["sort"] = sort
    ex = db.command("explain", cmd, verbosity="queryPlanner")
    return stages(ex["queryPlanner"]["winningPlan"])


# --- insert ------------------------------------------------------------------

def test_insert_generates_objectid_id_placed_first(coll):
    r = coll.insert_one({"a": 1, "b": 2})
    assert isinstance(r.inserted_id, ObjectId), "insert_one reports a generated ObjectId"
    raw = coll.database.command("find", coll.name, filter={})
    doc = raw["cursor"]["firstBatch"][0]
    assert list(doc.keys()) == ["_id", "a", "b"], "the generated _id is stored as the first field"


def test_insert_with_id_not_first_stores_id_first(coll):
    coll.database.command(SON([("insert", coll.name), ("documents", [SON([("a", 1), ("_id", 5)])])]))
    doc = coll.find_one({"_id": 5})
    assert list(doc.keys()) == ["_id", "a"], "mongod moves a client-supplied _id to the front"


def test_duplicate_id_gives_11000_with_exact_message(client):
    coll = client[DB]["c"]
    coll.drop()
    coll.insert_one({"_id": 1})
    with pytest.raises(DuplicateKeyError) as ei:
        coll.insert_one({"_id": 1, "x": 2})
    d = ei.value.details
    assert ei.value.code == 11000, "duplicate _id fails with code 11000"
    assert d["errmsg"] == "E11000 duplicate key error collection: db.c index: _id_ dup key: { _id: 1 }", \
        "mongod's exact E11000 message"
    assert d["keyPattern"] == {"_id": 1}, "writeError carries keyPattern {_id: 1}"
    assert d["keyValue"] == {"_id": 1}, "writeError carries keyValue {_id: 1}"
    assert coll.find_one({"_id": 1}) == {"_id": 1}, "the duplicate did not overwrite the original"
    coll.drop()


def test_ordered_insert_stops_at_first_error(coll):
    with pytest.raises(BulkWriteError) as ei:
        coll.insert_many([{"_id": 1}, {"_id": 1}, {"_id": 2}], ordered=True)
    res = ei.value.details
    assert res["nInserted"] == 1, "ordered insert inserted only the document before the duplicate"
    assert [(e["index"], e["code"]) for e in res["writeErrors"]] == [(1, 11000)], \
        "one writeError at index 1 with code 11000"
    assert find_ids(coll, {}) == [1], "nothing after the failing document was inserted"


def test_unordered_insert_continues_past_errors(coll):
    with pytest.raises(BulkWriteError) as ei:
        coll.insert_many([{"_id": 1}, {"_id": 1}, {"_id": 2}, {"_id": 2}, {"_id": 3}], ordered=False)
    res = ei.value.details
    assert res["nInserted"] == 3, "unordered insert inserted every non-duplicate"
    assert [(e["index"], e["code"]) for e in res["writeErrors"]] == [(1, 11000), (3, 11000)], \
        "writeErrors at indexes 1 and 3"
    assert find_ids(coll, {}) == [1, 2, 3], "all distinct documents are stored"


# --- query operators -----------------------------------------------------------

@pytest.fixture
def people(coll):
    coll.insert_many([
        {"_id": 1, "name": "Ann", "age": 30, "tags": ["a", "b"], "addr": {"city": "Oslo", "zip": 1}},
        {"_id": 2, "name": "bob", "age": 25, "tags": ["b", "c"], "addr": {"city": "Rome"}},
        {"_id": 3, "name": "Cid", "age": 35, "tags": [], "scores": [{"s": 5, "k": "x"}, {"s": 9, "k": "y"}]},
        {"_id": 4, "name": "dan", "age": None, "tags": ["a", "b", "c"], "scores": [{"s": 1, "k": "y"}]},
        {"_id": 5, "name": "Eve\nline2", "addr": [{"city": "Oslo"}, {"city": "Bern"}]},
    ])
    return coll


def test_comparison_operators(people):
    c = people
    assert find_ids(c, {"age": 30}) == [1], "implicit equality"
    assert find_ids(c, {"age": {"$eq": 25}}) == [2], "$eq"
    assert find_ids(c, {"age": {"$ne": 30}}) == [2, 3, 4, 5], "$ne includes null and missing"
    assert find_ids(c, {"age": {"$gt": 25}}) == [1, 3], "$gt"
    assert find_ids(c, {"age": {"$gte": 25}}) == [1, 2, 3], "$gte"
    assert find_ids(c, {"age": {"$lt": 30}}) == [2], "$lt does not match null"
    assert find_ids(c, {"age": {"$lte": 30}}) == [1, 2], "$lte"
    assert find_ids(c, {"age": {"$in": [25, 35]}}) == [2, 3], "$in"
    assert find_ids(c, {"age": {"$in": [None]}}) == [4, 5], "$in [null] matches null and missing"
    assert find_ids(c, {"age": {"$nin": [25, 35]}}) == [1, 4, 5], "$nin includes missing"
    assert find_ids(c, {"age": None}) == [4, 5], "{age: null} matches null and missing"


def test_logical_operators(people):
    c = people
    assert find_ids(c, {"$and": [{"age": {"$gt": 20}}, {"age": {"$lt": 32}}]}) == [1, 2], "$and"
    assert find_ids(c, {"$or": [{"age": 25}, {"name": "Cid"}]}) == [2, 3], "$or"
    assert find_ids(c, {"$nor": [{"age": 25}, {"age": None}]}) == [1, 3], "$nor"
    assert find_ids(c, {"age": {"$not": {"$gt": 26}}}) == [2, 4, 5], "$not with an operator includes missing"
    assert find_ids(c, {"name": {"$not": re.compile("^[a-z]")}}) == [1, 3, 5], "$not with a regex"


def test_element_operators(people):
    c = people
    assert find_ids(c, {"scores": {"$exists": True}}) == [3, 4], "$exists true"
    assert find_ids(c, {"age": {"$exists": False}}) == [5], "$exists false (null is not missing)"
    assert find_ids(c, {"age": {"$type": "null"}}) == [4], "$type by alias"
    assert find_ids(c, {"age": {"$type": 16}}) == [1, 2, 3], "$type by number (16 = int)"
    assert find_ids(c, {"age": {"$type": "number"}}) == [1, 2, 3], "$type number"
    assert find_ids(c, {"addr": {"$type": "array"}}) == [5], "$type array"
    assert find_ids(c, {"addr": {"$type": ["object", "array"]}}) == [1, 2, 5], "$type with a list"


def test_array_operators(people):
    c = people
    assert find_ids(c, {"tags": "a"}) == [1, 4], "equality matches an array element"
    assert find_ids(c, {"tags": ["a", "b"]}) == [1], "equality to a whole array"
    assert find_ids(c, {"tags": {"$all": ["a", "b"]}}) == [1, 4], "$all"
    assert find_ids(c, {"tags": {"$size": 0}}) == [3], "$size 0"
    assert find_ids(c, {"tags": {"$size": 3}}) == [4], "$size 3"
    assert find_ids(c, {"scores": {"$elemMatch": {"s": {"$gt": 4}, "k": "y"}}}) == [3], \
        "$elemMatch needs one element satisfying both"
    assert find_ids(c, {"scores.s": {"$gt": 4}, "scores.k": "x"}) == [3], "dotted paths through arrays"
    assert find_ids(c, {"scores.s": 1, "scores.k": "y"}) == [4], "dotted paths through arrays, other doc"
    assert find_ids(c, {"scores.s": {"$gt": 6, "$lt": 8}}) == [3], \
        "without $elemMatch each condition may match a different element"
    assert find_ids(c, {"scores": {"$elemMatch": {"s": {"$gt": 6, "$lt": 8}}}}) == [], \
        "$elemMatch needs one element in the range"
    assert find_ids(c, {"tags.1": "c"}) == [2], "numeric path component indexes an array"
    assert find_ids(c, {"tags": {"$elemMatch": {"$eq": "c"}}}) == [2, 4], "$elemMatch on scalars"


def test_dotted_paths_into_embedded_documents_and_arrays(people):
    c = people
    assert find_ids(c, {"addr.city": "Oslo"}) == [1, 5], "dotted path into a document and an array of documents"
    assert find_ids(c, {"addr.zip": {"$exists": True}}) == [1], "$exists on a dotted path"
    assert find_ids(c, {"addr.city": {"$ne": "Oslo"}}) == [2, 3, 4], "$ne on dotted path excludes any match"


def test_mod_operator(coll):
    coll.insert_many([{"_id": i, "n": i} for i in range(1, 10)])
    assert find_ids(coll, {"n": {"$mod": [4, 1]}}) == [1, 5, 9], "$mod [4, 1]"


def test_regex_with_options(people):
    c = people
    assert find_ids(c, {"name": {"$regex": "^a", "$options": "i"}}) == [1], "$regex with i"
    assert find_ids(c, {"name": {"$regex": "^[A-Z]"}}) == [1, 3, 5], "$regex is case sensitive"
    assert find_ids(c, {"name": {"$regex": "^line2", "$options": "m"}}) == [5], "$regex with m anchors at lines"
    assert find_ids(c, {"name": {"$regex": "^line2"}}) == [], "without m ^ anchors at the start only"
    assert find_ids(c, {"name": {"$regex": "Eve.line", "$options": "s"}}) == [5], "$regex with s: dot matches newline"
    assert find_ids(c, {"name": {"$regex": "Eve.line"}}) == [], "without s dot does not match newline"
    assert find_ids(c, {"name": {"$regex": " b o b # comment", "$options": "x"}}) == [2], \
        "$regex with x ignores whitespace and comments"
    assert find_ids(c, {"name": Regex("^c", "i")}) == [3], "a BSON regex value with flags"
    assert find_ids(c, {"name": {"$in": [re.compile("^A"), "bob"]}}) == [1, 2], "$in with a regex"
    assert find_ids(c, {"tags": {"$regex": "c"}}) == [2, 4], "$regex against array elements"


def test_numbers_compare_by_value_across_types(coll):
    coll.insert_many([
        {"_id": 1, "n": 5},
        {"_id": 2, "n": Int64(5)},
        {"_id": 3, "n": 5.0},
        {"_id": 4, "n": Decimal128("5.00")},
        {"_id": 5, "n": 5.5},
        {"_id": 6, "n": Decimal128("4.9")},
        {"_id": 7, "n": "5"},
    ])
    assert find_ids(coll, {"n": 5}) == [1, 2, 3, 4], "int32 5 equals int64, double and decimal 5"
    assert find_ids(coll, {"n": Decimal128("5")}) == [1, 2, 3, 4], "decimal 5 equals all numeric 5s"
    assert find_ids(coll, {"n": Int64(5)}) == [1, 2, 3, 4], "int64 5 equals all numeric 5s"
    assert find_ids(coll, {"n": {"$gt": 4.95}}) == [1, 2, 3, 4, 5], "$gt compares decimals and ints by value"
    assert find_ids(coll, {"n": {"$lt": Decimal128("5")}}) == [6], "$lt a decimal"
    assert find_ids(coll, {"n": {"$gte": ""}}) == [7], "type bracketing: string range matches only strings"
    assert coll.count_documents({"n": {"$in": [Int64(5), 5.5]}}) == 5, "$in mixes numeric types"


def test_expr_with_comparison_arithmetic_cond_and_now(coll):
    past = datetime.datetime(2000, 1, 1)
    future = datetime.datetime(2200, 1, 1)
    coll.insert_many([
        {"_id": 1, "a": 5, "b": 7, "when": past},
        {"_id": 2, "a": 10, "b": 2, "when": future},
        {"_id": 3, "a": 1, "b": 1, "when": past},
    ])
    assert find_ids(coll, {"$expr": {"$gt": ["$a", "$b"]}}) == [2], "$expr compares two fields"
    assert find_ids(coll, {"$expr": {"$gte": [{"$add": ["$a", "$b"]}, 12]}}) == [1, 2], "$expr with $add"
    assert find_ids(coll, {"$expr": {"$eq": [{"$multiply": ["$a", "$b"]}, 20]}}) == [2], "$expr with $multiply"
    assert find_ids(coll, {"$expr": {"$lt": ["$when", "$$NOW"]}}) == [1, 3], "$expr with $$NOW"
    cond = {"$cond": {"if": {"$gt": ["$a", 4]}, "then": "$b", "else": 100}}
    assert find_ids(coll, {"$expr": {"$lt": [cond, 5]}}) == [2], "$expr with $cond"
    cond_arr = {"$cond": [{"$eq": ["$a", 1]}, True, False]}
    assert find_ids(coll, {"$expr": cond_arr}) == [3], "$expr with array-form $cond"


def test_query_errors(coll, db):
    coll.insert_one({"_id": 1, "a": "x"})
    cases = [
        ({"a": {"$regex": "("}}, 51091, "an invalid regex: 51091"),
        ({"a": {"$in": 1}}, 2, "$in needs an array: BadValue (2)"),
        ({"a": {"$foo": 1}}, 2, "an unknown operator: BadValue (2)"),
        ({"$foo": [{"a": 1}]}, 2, "an unknown top-level operator: BadValue (2)"),
        ({"$and": []}, 2, "$and with an empty array: BadValue (2)"),
        ({"a": {"$size": -1}}, 2, "$size with a negative number: BadValue (2)"),
        ({"a": {"$mod": [0, 1]}}, 2, "$mod by zero: BadValue (2)"),
    ]
    for flt, code, what in cases:
        with pytest.raises(OperationFailure) as ei:
            db.command("find", coll.name, filter=flt)
        assert ei.value.code == code, "%s (got %r)" % (what, ei.value.code)


# --- projection ----------------------------------------------------------------

def test_projection_inclusion_exclusion(coll):
    coll.insert_one({"_id": 1, "a": 1, "b": {"c": 2, "d": 3}, "e": 4})
    assert coll.find_one({}, {"a": 1}) == {"_id": 1, "a": 1}, "inclusion keeps _id"
    assert coll.find_one({}, {"a": 1, "_id": 0}) == {"a": 1}, "inclusion with _id excluded"
    assert coll.find_one({}, {"b.c": 1}) == {"_id": 1, "b": {"c": 2}}, "dotted inclusion"
    assert coll.find_one({}, {"b": 0, "e": 0}) == {"_id": 1, "a": 1}, "exclusion"
    assert coll.find_one({}, {"b.d": 0}) == {"_id": 1, "a": 1, "b": {"c": 2}, "e": 4}, "dotted exclusion"
    with pytest.raises(OperationFailure) as ei:
        coll.find_one({}, {"a": 1, "e": 0})
    assert ei.value.code == 31254, "mixing inclusion and exclusion fails (31254)"


def test_projection_slice_elemmatch_positional(coll):
    coll.insert_one({"_id": 1, "arr": [1, 2, 3, 4, 5],
                     "objs": [{"k": 1, "v": "a"}, {"k": 2, "v": "b"}, {"k": 2, "v": "c"}]})
    assert coll.find_one({}, {"arr": {"$slice": 2}})["arr"] == [1, 2], "$slice n"
    assert coll.find_one({}, {"arr": {"$slice": -2}})["arr"] == [4, 5], "$slice -n"
    assert coll.find_one({}, {"arr": {"$slice": [1, 2]}})["arr"] == [2, 3], "$slice [skip, n]"
    sl = coll.find_one({}, {"arr": {"$slice": 1}})
    assert "objs" in sl, "$slice alone is an exclusion-style projection keeping other fields"
    em = coll.find_one({}, {"objs": {"$elemMatch": {"k": 2}}})
    assert em == {"_id": 1, "objs": [{"k": 2, "v": "b"}]}, "$elemMatch keeps the first matching element only"
    pos = coll.find_one({"objs.v": "c"}, {"objs.$": 1})
    assert pos == {"_id": 1, "objs": [{"k": 2, "v": "c"}]}, "positional $ projects the matched element"
    pos2 = coll.find_one({"arr": {"$gt": 3}}, {"arr.$": 1})
    assert pos2 == {"_id": 1, "arr": [4]}, "positional $ on a scalar array"


# --- sort, skip, limit, cursors -----------------------------------------------

def test_sort_uses_mongodb_cross_type_order(coll):
    values = [
        (1, MinKey()), (2, None), (3, 1), (4, "a"), (5, {"x": 1}),
        (7, Binary(b"\x01")), (8, ObjectId("000000000000000000000001")), (9, False),
        (10, datetime.datetime(2020, 1, 1)), (11, Timestamp(1, 1)), (12, Regex("a")), (13, MaxKey()),
    ]
    shuffled = values[5:] + values[:5]
    coll.insert_many([{"_id": i, "v": v} for i, v in shuffled])
    got = ids(coll.find({}, {"_id": 1}).sort("v", ASCENDING))
    assert got == [i for i, _ in values], "ascending sort follows MinKey<null<numbers<string<object<binData<ObjectId<bool<date<timestamp<regex<MaxKey"
    got = ids(coll.find({}, {"_id": 1}).sort("v", DESCENDING))
    assert got == [i for i, _ in reversed(values)], "descending sort reverses the type order"


def test_sort_arrays_by_min_ascending_and_max_descending(coll):
    coll.insert_many([{"_id": 1, "v": [1, 10]}, {"_id": 2, "v": 5}, {"_id": 3, "v": [3, 4]}])
    assert ids(coll.find().sort("v", 1)) == [1, 3, 2], "ascending sort keys an array by its smallest element"
    assert ids(coll.find().sort("v", -1)) == [1, 2, 3], "descending sort keys an array by its largest element"


def test_sort_on_several_keys_with_mixed_numbers_skip_limit(coll):
    coll.insert_many([
        {"_id": 1, "a": 2, "b": "x"},
        {"_id": 2, "a": Int64(1), "b": "z"},
        {"_id": 3, "a": 1.5, "b": "y"},
        {"_id": 4, "a": Decimal128("2"), "b": "y"},
        {"_id": 5, "a": 1, "b": "a"},
    ])
    got = ids(coll.find().sort([("a", ASCENDING), ("b", DESCENDING)]))
    assert got == [2, 5, 3, 4, 1], "sort by a asc (numbers by value), ties by b desc"
    got = ids(coll.find().sort([("a", DESCENDING), ("b", ASCENDING)]).skip(1).limit(2))
    assert got == [4, 3], "skip and limit apply after the sort"
    assert ids(coll.find().sort("_id", 1).limit(-2)) == [1, 2], "negative limit returns that many"


def test_batchsize_getmore_and_killcursors(coll, db):
    coll.insert_many([{"_id": i} for i in range(7)])
    r = db.command("find", coll.name, filter={}, sort={"_id": 1}, batchSize=3)
    cur = r["cursor"]
    assert ids(cur["firstBatch"]) == [0, 1, 2], "firstBatch holds batchSize documents"
    assert cur["id"] != 0, "a cursor stays open for the rest"
    assert cur["ns"] == "%s.%s" % (DB, coll.name), "cursor.ns is db.collection"
    r2 = db.command("getMore", Int64(cur["id"]), collection=coll.name, batchSize=3)
    assert ids(r2["cursor"]["nextBatch"]) == [3, 4, 5], "getMore returns the next batch"
    assert r2["cursor"]["id"] == cur["id"], "the same cursor stays open"
    r3 = db.command("getMore", Int64(cur["id"]), collection=coll.name, batchSize=3)
    assert ids(r3["cursor"]["nextBatch"]) == [6], "the last getMore returns the remainder"
    assert r3["cursor"]["id"] == 0, "the exhausted cursor is closed"
    # killCursors
    r = db.command("find", coll.name, filter={}, batchSize=2)
    cid = r["cursor"]["id"]
    k = db.command("killCursors", coll.name, cursors=[Int64(cid)])
    assert k["cursorsKilled"] == [cid], "killCursors reports the cursor killed"
    k2 = db.command("killCursors", coll.name, cursors=[Int64(cid)])
    assert k2["cursorsNotFound"] == [cid], "killing it again reports cursorsNotFound"
    with pytest.raises(OperationFailure) as ei:
        db.command("getMore", Int64(cid), collection=coll.name)
    assert ei.value.code == 43, "getMore on a killed cursor fails with CursorNotFound (43)"


def test_single_batch_and_limit_close_the_cursor(coll, db):
    coll.insert_many([{"_id": i} for i in range(5)])
    r = db.command("find", coll.name, batchSize=2, singleBatch=True)
    assert len(r["cursor"]["firstBatch"]) == 2, "singleBatch returns one batch"
    assert r["cursor"]["id"] == 0, "singleBatch leaves no cursor open"
    r = db.command("find", coll.name, limit=3, batchSize=10)
    assert len(r["cursor"]["firstBatch"]) == 3 and r["cursor"]["id"] == 0, "limit closes the cursor"
    assert len(list(coll.find().batch_size(2))) == 5, "the driver iterates over several getMores"


# --- update ------------------------------------------------------------------

def test_update_operators_each(coll):
    coll.insert_one({"_id": 1, "s": "x", "u": 1, "i": 5, "m": 3, "lo": 5, "hi": 5, "old": "r",
                     "arr": [1, 2, 3], "set": [1], "pop": [1, 2, 3], "pl": [1, 2, 3, 2], "pa": [1, 2, 3, 1]})
    r = coll.update_one({"_id": 1}, {
        "$set": {"s": "y", "n.e": 1},
        "$unset": {"u": ""},
        "$inc": {"i": 2},
        "$mul": {"m": 4, "mm": 2},
        "$min": {"lo": 2},
        "$max": {"hi": 9},
        "$rename": {"old": "new"},
        "$currentDate": {"cd": True, "ts": {"$type": "timestamp"}},
        "$push": {"arr": 4},
        "$addToSet": {"set": {"$each": [1, 2]}},
        "$pop": {"pop": -1},
        "$pull": {"pl": 2},
        "$pullAll": {"pa": [1, 3]},
    })
    assert (r.matched_count, r.modified_count) == (1, 1), "one document matched and modified"
    d = coll.find_one({"_id": 1})
    assert d["s"] == "y" and d["n"] == {"e": 1}, "$set, including a new embedded path"
    assert "u" not in d, "$unset removes the field"
    assert d["i"] == 7, "$inc adds"
    assert d["m"] == 12 and d["mm"] == 0, "$mul multiplies, and sets 0 on a missing field"
    assert d["lo"] == 2 and d["hi"] == 9, "$min and $max"
    assert "old" not in d and d["new"] == "r", "$rename"
    assert isinstance(d["cd"], datetime.datetime), "$currentDate true sets a date"
    assert isinstance(d["ts"], Timestamp), "$currentDate {$type: timestamp} sets a timestamp"
    assert d["arr"] == [1, 2, 3, 4], "$push appends"
    assert d["set"] == [1, 2], "$addToSet with $each adds only the missing values"
    assert d["pop"] == [2, 3], "$pop -1 removes the first element"
    assert d["pl"] == [1, 3], "$pull removes every equal element"
    assert d["pa"] == [2], "$pullAll removes every listed value"


def test_push_modifiers_and_pull_condition(coll):
    coll.insert_one({"_id": 1, "a": [5, 1], "b": [{"s": 3}, {"s": 1}], "c": [1, 2], "p": [1, 5, 9, 3]})
    coll.update_one({"_id": 1}, {"$push": {
        "a": {"$each": [4, 2, 3], "$sort": 1, "$slice": 3},
        "b": {"$each": [{"s": 2}], "$sort": {"s": -1}},
        "c": {"$each": [9, 8], "$position": 1},
    }, "$pull": {"p": {"$gte": 5}}})
    d = coll.find_one({"_id": 1})
    assert d["a"] == [1, 2, 3], "$push $each + $sort + $slice"
    assert d["b"] == [{"s": 3}, {"s": 2}, {"s": 1}], "$push $sort by a field descending"
    assert d["c"] == [1, 9, 8, 2], "$push $position inserts at that index"
    assert d["p"] == [1, 3], "$pull with a condition"
    coll.update_one({"_id": 1}, {"$pop": {"c": 1}, "$push": {"a": {"$each": [0], "$slice": -2}}})
    d = coll.find_one({"_id": 1})
    assert d["c"] == [1, 9, 8], "$pop 1 removes the last element"
    assert d["a"] == [3, 0], "$slice -2 keeps the last two"


def test_positional_all_positional_and_filtered(coll):
    coll.insert_one({"_id": 1, "a": [1, 2, 3], "g": [{"x": 1, "y": 0}, {"x": 6, "y": 0}, {"x": 8, "y": 0}]})
    coll.update_one({"_id": 1, "a": 2}, {"$set": {"a.$": 20}})
    assert coll.find_one()["a"] == [1, 20, 3], "positional $ updates the matched element"
    coll.update_one({"_id": 1}, {"$inc": {"a.$[]": 1}})
    assert coll.find_one()["a"] == [2, 21, 4], "$[] updates every element"
    r = coll.update_one({"_id": 1}, {"$set": {"g.$[big].y": 1}}, array_filters=[{"big.x": {"$gt": 5}}])
    assert r.modified_count == 1, "arrayFilters update reports nModified 1"
    assert [e["y"] for e in coll.find_one()["g"]] == [0, 1, 1], "$[<id>] updates only elements matching arrayFilters"
    coll.update_one({"g.x": 1}, {"$set": {"g.$.y": 7}})
    assert coll.find_one()["g"][0]["y"] == 7, "positional $ into an array of documents"


def test_update_results_n_nmodified_and_multi(coll, db):
    coll.insert_many([{"_id": i, "k": 1, "v": 0} for i in range(4)])
    r = db.command("update", coll.name, updates=[
        {"q": {"k": 1}, "u": {"$set": {"v": 1}}, "multi": True}])
    assert (r["n"], r["nModified"]) == (4, 4), "multi update matched and modified every document"
    r = db.command("update", coll.name, updates=[
        {"q": {"k": 1}, "u": {"$set": {"v": 1}}, "multi": True}])
    assert (r["n"], r["nModified"]) == (4, 0), "setting the same value matches but modifies nothing"
    r = db.command("update", coll.name, updates=[
        {"q": {"k": 1}, "u": {"$set": {"v": 2}}}])
    assert (r["n"], r["nModified"]) == (1, 1), "without multi only one document is updated"
    r = db.command("update", coll.name, updates=[
        {"q": {"k": 99}, "u": {"$set": {"v": 2}}}])
    assert (r["n"], r["nModified"]) == (0, 0) and "upserted" not in r, "no match and no upsert"
    r = db.command("update", coll.name, updates=[
        {"q": {"_id": 0}, "u": {"$set": {"v": 9}}, "hint": {"_id": 1}}])
    assert r["nModified"] == 1, "hint is accepted"


def test_replacement_update(coll):
    coll.insert_one({"_id": 1, "a": 1, "b": 2})
    r = coll.replace_one({"_id": 1}, {"c": 3})
    assert r.modified_count == 1, "replacement modified the document"
    assert coll.find_one({"_id": 1}) == {"_id": 1, "c": 3}, "replacement keeps _id and drops the other fields"


def test_empty_replacement_and_empty_set_are_accepted(coll, db):
    coll.insert_one({"_id": 1, "a": 1})
    r = db.command("update", coll.name, updates=[{"q": {"_id": 1}, "u": {"$set": {}}}])
    assert (r["n"], r["nModified"]) == (1, 0), "an empty $set is a no-op since mongod 5.0"
    r = db.command("update", coll.name, updates=[{"q": {"_id": 1}, "u": {}}])
    assert (r["n"], r["nModified"]) == (1, 1), "an empty replacement document is a replacement"
    assert coll.find_one({"_id": 1}) == {"_id": 1}, "the empty replacement kept only _id"


def test_empty_write_batches_fail_with_invalid_length_16(atomdb_module, coll, db):
    # Sent as raw OP_MSG frames: pymongo may refuse an empty batch itself (the
    # pure-Python build fails in max() before sending anything), and this is
    # about what the server answers. Both framings a client may use: the empty
    # array in the command body, and an empty kind-1 document sequence.
    sock = w.connect(*atomdb_module)
    try:
        for cmd, field in [("insert", "documents"), ("update", "updates"), ("delete", "deletes")]:
            framings = [
                ("in the command body", SON([(cmd, coll.name), (field, []), ("$db", DB)]), ()),
                ("as an empty kind-1 sequence", SON([(cmd, coll.name), ("$db", DB)]),
                 (w.section_kind1(field, []),)),
            ]
            for how, body, sections in framings:
                reply = w.command(sock, body, extra_sections=sections)
                what = "%s with an empty %s %s" % (cmd, field, how)
                assert (reply.get("ok"), reply.get("code"), reply.get("codeName")) == \
                    (0, 16, "InvalidLength"), "%s: InvalidLength (16) (got %r)" % (what, reply)
                assert reply.get("errmsg") == \
                    "Write batch sizes must be between 1 and 100000. Got 0 operations.", \
                    "mongod's message for %s" % what
    finally:
        sock.close()
    assert coll.name not in db.list_collection_names(), "an empty insert creates no collection"


def test_oversized_documents_fail_and_write_nothing(atomdb_module, coll, db):
    # The insert is sent raw: pymongo refuses a document over maxBsonObjectSize
    # itself (DocumentTooLarge), and this is about what the server enforces.
    max_size = 16 * 1024 * 1024
    pad = max_size - len(bson.encode(SON([("_id", 1), ("pad", "")]))) + 1
    big = SON([("_id", 1), ("pad", "x" * pad)])
    size = len(bson.encode(big))
    assert size == max_size + 1, "the document is one byte over 16 MiB"
    sock = w.connect(*atomdb_module)
    try:
        reply = w.command(sock, SON([("insert", coll.name), ("$db", DB)]),
                          extra_sections=(w.section_kind1("documents", [big]),))
    finally:
        sock.close()
    assert (reply.get("ok"), reply.get("n")) == (1, 0), "the batch is answered, nothing inserted (got %r)" % (
        {k: v for k, v in reply.items() if k != "writeErrors"},)
    assert [(e["index"], e["code"], e["errmsg"]) for e in reply.get("writeErrors", [])] == [
        (0, 2, "object to insert too large. size in bytes: %d, max size: %d" % (size, max_size))], \
        "a document over 16 MiB: BadValue (2) with mongod's message"
    assert coll.count_documents({}) == 0, "nothing was written"

    half = "x" * (9 * 1024 * 1024)
    coll.insert_one({"_id": 2, "a": half})
    r = db.command("update", coll.name, updates=[{"q": {"_id": 2}, "u": {"$set": {"b": half}}}])
    assert [(e["index"], e["code"], e["errmsg"]) for e in r.get("writeErrors", [])] == [
        (0, 17419, "Resulting document after update is larger than %d" % max_size)], \
        "an update growing a document past 16 MiB: 17419 with mongod's message"
    assert (r["n"], r["nModified"]) == (0, 0), "the failed update counts nothing"
    assert coll.find_one({"_id": 2}, {"b": 1}) == {"_id": 2}, "the document was not changed"


def test_pipeline_update(coll):
    coll.insert_one({"_id": 1, "a": 2, "b": 3, "junk": 1, "inner": {"x": 1}})
    coll.update_one({"_id": 1}, [
        {"$set": {"sum": {"$add": ["$a", "$b"]}}},
        {"$addFields": {"twice": {"$multiply": ["$sum", 2]}}},
        {"$unset": "junk"},
    ])
    assert coll.find_one({"_id": 1}) == {"_id": 1, "a": 2, "b": 3, "inner": {"x": 1}, "sum": 5, "twice": 10}, \
        "pipeline $set/$addFields/$unset computed from fields"
    coll.update_one({"_id": 1}, [{"$replaceWith": {"$mergeObjects": [{"_id": "$_id"}, "$inner"]}}])
    assert coll.find_one({"_id": 1}) == {"_id": 1, "x": 1}, "pipeline $replaceWith"


def test_upsert_seeds_from_equality_predicates(coll, db):
    r = db.command("update", coll.name, updates=[{
        "q": {"a.b": 1, "$and": [{"c": 2}], "d": {"$eq": 3}, "e": {"$gt": 5}},
        "u": {"$inc": {"n": 1}, "$setOnInsert": {"created": True}}, "upsert": True}])
    assert r["n"] == 1 and r["nModified"] == 0, "upsert reports n 1, nModified 0"
    up = r["upserted"]
    assert len(up) == 1 and up[0]["index"] == 0 and isinstance(up[0]["_id"], ObjectId), \
        "upserted: [{index: 0, _id: ObjectId}]"
    d = coll.find_one({"_id": up[0]["_id"]})
    assert list(d.keys())[0] == "_id", "the upserted document has _id first"
    del d["_id"]
    assert d == {"a": {"b": 1}, "c": 2, "d": 3, "n": 1, "created": True}, \
        "seeded from dotted, $and and $eq equalities, not from $gt; update and $setOnInsert applied"


def test_upsert_takes_id_from_filter_and_setoninsert_only_on_insert(coll):
    r = coll.update_one({"_id": "k1"}, {"$inc": {"n": 1}, "$setOnInsert": {"first": 1}}, upsert=True)
    assert r.upserted_id == "k1", "the upserted _id comes from the filter"
    r = coll.update_one({"_id": "k1"}, {"$inc": {"n": 1}, "$setOnInsert": {"first": 2}}, upsert=True)
    assert r.upserted_id is None and r.modified_count == 1, "second upsert updates the existing document"
    assert coll.find_one({"_id": "k1"}) == {"_id": "k1", "n": 2, "first": 1}, \
        "$setOnInsert applied only on insert, $inc counted twice"
    r = coll.replace_one({"_id": 7, "x": 1}, {"y": 2}, upsert=True)
    assert r.upserted_id == 7, "replacement upsert takes _id from the filter"
    assert coll.find_one({"_id": 7}) == {"_id": 7, "y": 2}, "replacement upsert keeps only _id from the filter"


def test_update_error_conflicting_paths_40(coll):
    coll.insert_one({"_id": 1, "a": {"b": 1}})
    with pytest.raises(WriteError) as ei:
        coll.update_one({"_id": 1}, {"$set": {"a": 1}, "$inc": {"a": 1}})
    assert ei.value.code == 40, "two operators on one path: ConflictingUpdateOperators (40)"
    assert ei.value.details["errmsg"] == "Updating the path 'a' would create a conflict at 'a'", "mongod's message"
    with pytest.raises(WriteError) as ei:
        coll.update_one({"_id": 1}, {"$set": {"a.b": 2, "a": 1}})
    assert ei.value.code == 40, "a path and its prefix conflict (40)"
    assert coll.find_one({"_id": 1}) == {"_id": 1, "a": {"b": 1}}, "nothing was written"


def test_update_error_inc_non_number_14(coll):
    coll.insert_one({"_id": 1, "a": "x"})
    with pytest.raises(WriteError) as ei:
        coll.update_one({"_id": 1}, {"$inc": {"a": 1}})
    assert ei.value.code == 14, "$inc on a string: TypeMismatch (14)"
    assert ei.value.details["errmsg"] == ("Cannot apply $inc to a value of non-numeric type. "
                                          "{_id: 1} has the field 'a' of non-numeric type string"), \
        "mongod's message"
    with pytest.raises(WriteError) as ei:
        coll.update_one({"_id": 1}, {"$inc": {"b": "one"}})
    assert ei.value.code == 14, "$inc by a non-number: TypeMismatch (14)"
    assert coll.find_one({"_id": 1}) == {"_id": 1, "a": "x"}, "nothing was written"


def test_update_error_changing_id_66(coll):
    coll.insert_one({"_id": 1, "a": 1})
    with pytest.raises(WriteError) as ei:
        coll.update_one({"_id": 1}, {"$set": {"_id": 2}})
    assert ei.value.code == 66, "$set of _id: ImmutableField (66)"
    assert ei.value.details["errmsg"] == \
        "Performing an update on the path '_id' would modify the immutable field '_id'", "mongod's message"
    with pytest.raises(WriteError) as ei:
        coll.replace_one({"_id": 1}, {"_id": 2, "a": 1})
    assert ei.value.code == 66, "replacement changing _id: ImmutableField (66)"
    coll.update_one({"_id": 1}, {"$set": {"_id": 1, "a": 5}})
    assert coll.find_one() == {"_id": 1, "a": 5}, "setting _id to its current value is allowed"


def test_seed_002_set_of_dollar_field_fails_and_writes_nothing(coll):
    coll.insert_one({"_id": 1, "favCount": 0})
    with pytest.raises(WriteError) as ei:
        coll.update_one({"_id": 1}, {"$set": {"$inc": {"favCount": 1}}})
    assert ei.value.code == 52, "a $-prefixed top-level field in $set: DollarPrefixedFieldName (52)"
    assert ei.value.details["errmsg"].startswith(
        "The dollar ($) prefixed field '$inc' in '$inc' is not allowed in the context of an update's "
        "replacement document."), "mongod 6.0+'s message"
    assert coll.find_one({"_id": 1}) == {"_id": 1, "favCount": 0}, "nothing was written"


def test_unknown_update_operator_fails(coll, db):
    coll.insert_one({"_id": 1})
    r = db.command("update", coll.name, updates=[{"q": {}, "u": {"$bogus": {"a": 1}}}])
    errs = r.get("writeErrors", [])
    assert [(e["index"], e["code"]) for e in errs] == [(0, 9)], "an unknown update operator: FailedToParse (9)"
    assert errs[0]["errmsg"] == ("Unknown modifier: $bogus. Expected a valid update modifier or pipeline-style "
                                 "update specified as an array"), "mongod's message"
    assert coll.find_one() == {"_id": 1}, "nothing was written"


def test_array_update_errors(coll, db):
    coll.insert_one({"_id": 1, "a": [1, 2], "n": 5})
    cases = [
        ({"$set": {"a.$": 9}}, None, 2, "positional $ without an array match in the query: BadValue (2)"),
        ({"$set": {"a.$[x]": 9}}, None, 2, "$[x] without arrayFilters: BadValue (2)"),
        ({"$set": {"n": 1}}, [{"x": 1}], 9, "an unused array filter: FailedToParse (9)"),
        ({"$push": {"n": 1}}, None, 2, "$push onto a non-array: BadValue (2)"),
        ({"$pop": {"n": 1}}, None, 14, "$pop on a non-array: TypeMismatch (14)"),
        ({"$set": {}, "$bogus": 1}, None, 9, "unknown modifier: FailedToParse (9)"),
    ]
    for u, filters, code, what in cases:
        upd = {"q": {"_id": 1}, "u": u}
        if filters is not None:
            upd["arrayFilters"] = filters
        r = db.command("update", coll.name, updates=[upd])
        got = [e["code"] for e in r.get("writeErrors", [])]
        assert got == [code], "%s (got %r)" % (what, got)
    assert coll.find_one() == {"_id": 1, "a": [1, 2], "n": 5}, "none of the failing updates wrote anything"


def test_concurrent_upserts_make_one_document_and_count_every_increment(client, coll):
    import threading
    errors = []

    def worker():
        try:
            for _ in range(50):
                coll.update_one({"key": "k"}, {"$inc": {"n": 1}}, upsert=True)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)
    coll.create_index("key", unique=True)
    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [], "no upsert failed (mongod retries a duplicate-key upsert on an equality filter)"
    docs = list(coll.find({}, {"_id": 0}))
    assert docs == [{"key": "k", "n": 400}], "exactly one document holding all 400 increments"


def test_upsert_id_from_eq_operator(coll):
    r = coll.update_one({"_id": {"$eq": 5}, "t": {"$gte": 1}}, {"$set": {"x": 1}}, upsert=True)
    assert r.upserted_id == 5, "_id from {$eq: 5}"
    assert coll.find_one() == {"_id": 5, "x": 1}, "a range predicate does not seed the new document"


def test_int32_overflow_promotes_to_int64(coll):
    coll.insert_one({"_id": 1, "i": 2147483647, "m": 2000000000, "small": 1})
    coll.update_one({"_id": 1}, {"$inc": {"i": 1, "small": 1}, "$mul": {"m": 2}})
    assert coll.count_documents({"_id": 1, "i": {"$type": "long"}}) == 1, "$inc past int32 max stores an int64"
    assert coll.count_documents({"_id": 1, "m": {"$type": "long"}}) == 1, "$mul past int32 max stores an int64"
    assert coll.count_documents({"_id": 1, "small": {"$type": "int"}}) == 1, "$inc within range stays int32"
    d = coll.find_one({"_id": 1})
    assert d["i"] == 2147483648 and d["m"] == 4000000000, "promoted values are exact"
    coll.update_one({"_id": 1}, {"$inc": {"small": 0.5}})
    assert coll.count_documents({"_id": 1, "small": {"$type": "double"}}) == 1, "int32 + double is a double"


# --- delete ----------------------------------------------------------------------

def test_delete_limit_one_and_all(coll, db):
    coll.insert_many([{"_id": i, "k": i % 2} for i in range(6)])
    r = db.command("delete", coll.name, deletes=[{"q": {"k": 0}, "limit": 1}])
    assert r["n"] == 1, "limit 1 deletes one document"
    r = db.command("delete", coll.name, deletes=[{"q": {"k": 0}, "limit": 0}])
    assert r["n"] == 2, "limit 0 deletes every remaining match"
    assert coll.delete_many({"k": 1}).deleted_count == 3, "delete_many"
    assert coll.count_documents({}) == 0, "collection is empty"


# --- findAndModify -----------------------------------------------------------------

def test_find_one_and_update_options(coll):
    coll.insert_many([{"_id": 1, "g": 1, "v": 1, "arr": [1, 5]}, {"_id": 2, "g": 1, "v": 2, "arr": [1, 5]}])
    before = coll.find_one_and_update({"g": 1}, {"$inc": {"v": 10}}, sort=[("v", -1)])
    assert before == {"_id": 2, "g": 1, "v": 2, "arr": [1, 5]}, "sort picks v=2; default returns the old value"
    after = coll.find_one_and_update({"g": 1}, {"$inc": {"v": 1}}, sort=[("v", 1)],
                                     projection={"v": 1, "_id": 0}, return_document=ReturnDocument.AFTER)
    assert after == {"v": 2}, "new: true with fields returns the projected new value"
    r = coll.find_one_and_update({"_id": 1}, {"$set": {"arr.$[e]": 0}}, array_filters=[{"e": {"$gt": 2}}],
                                 return_document=ReturnDocument.AFTER)
    assert r["arr"] == [1, 0], "arrayFilters in findAndModify"
    assert coll.find_one_and_update({"_id": 9}, {"$set": {"v": 1}}) is None, "no match returns null"
    up = coll.find_one_and_update({"_id": 9}, {"$inc": {"plays": 1}}, upsert=True,
                                  return_document=ReturnDocument.AFTER)
    assert up == {"_id": 9, "plays": 1}, "upsert + new returns the inserted document"
    rep = coll.find_one_and_replace({"_id": 9}, {"x": 1}, return_document=ReturnDocument.AFTER)
    assert rep == {"_id": 9, "x": 1}, "findAndModify with a replacement"
    gone = coll.find_one_and_delete({"g": 1}, sort=[("v", -1)])
    assert gone["_id"] == 2, "remove with sort deletes the top document"
    assert find_ids(coll, {}) == [1, 9], "the removed document is gone"


def test_find_and_modify_last_error_object(coll, db):
    coll.insert_one({"_id": 1, "v": 0})
    r = db.command("findAndModify", coll.name, query={"_id": 1}, update={"$inc": {"v": 1}}, new=True)
    assert r["value"] == {"_id": 1, "v": 1}, "value is the new document"
    assert r["lastErrorObject"] == {"n": 1, "updatedExisting": True}, "lastErrorObject for an update"
    r = db.command("findAndModify", coll.name, query={"_id": 2}, update={"$inc": {"v": 1}}, upsert=True, new=True)
    assert r["value"] == {"_id": 2, "v": 1}, "value is the upserted document"
    assert r["lastErrorObject"] == {"n": 1, "updatedExisting": False, "upserted": 2}, \
        "lastErrorObject for an upsert names the new _id"
    r = db.command("findAndModify", coll.name, query={"_id": 4}, update={"$inc": {"v": 1}}, upsert=True)
    assert r["value"] is None, "upsert with new: false returns null"
    assert r["lastErrorObject"] == {"n": 1, "updatedExisting": False, "upserted": 4}, \
        "lastErrorObject still reports the upsert"
    r = db.command("findAndModify", coll.name, query={"_id": 3}, update={"$inc": {"v": 1}})
    assert r["value"] is None, "no match: value null"
    assert r["lastErrorObject"] == {"n": 0, "updatedExisting": False}, "lastErrorObject for no match"
    r = db.command("findAndModify", coll.name, query={"_id": 2}, remove=True)
    assert r["value"] == {"_id": 2, "v": 1} and r["lastErrorObject"] == {"n": 1}, "lastErrorObject for remove"
    r = db.command("findAndModify", coll.name, query={"_id": 2}, remove=True)
    assert r["value"] is None and r["lastErrorObject"] == {"n": 0}, "remove with no match"
    with pytest.raises(OperationFailure) as ei:
        db.command("findAndModify", coll.name, query={"_id": 1})
    assert ei.value.code == 9, "neither update nor remove: FailedToParse (9)"
    assert ei.value.details["errmsg"] == "Either an update or remove=true must be specified", "mongod's message"


def test_find_and_modify_write_errors_surface(coll, db):
    coll.insert_one({"_id": 1, "s": "x"})
    with pytest.raises(OperationFailure) as ei:
        db.command("findAndModify", coll.name, query={"_id": 1}, update={"$inc": {"s": 1}})
    assert ei.value.code == 14, "findAndModify $inc on a string fails with 14"
    with pytest.raises(OperationFailure) as ei:
        db.command("findAndModify", coll.name, query={"_id": 1}, update={"$set": {"_id": 5}})
    assert ei.value.code == 66, "findAndModify changing _id fails with 66"


# --- count, distinct, aggregate ------------------------------------------------------

@pytest.fixture
def sales(coll):
    coll.insert_many([
        {"_id": 1, "item": "a", "qty": 2, "price": 10, "tags": ["x", "y"]},
        {"_id": 2, "item": "b", "qty": 1, "price": 20, "tags": ["y"]},
        {"_id": 3, "item": "a", "qty": 5, "price": 10, "tags": []},
        {"_id": 4, "item": "c", "qty": 3, "price": 7.5, "tags": ["x", "z"]},
        {"_id": 5, "item": "b", "qty": 4, "price": 20},
    ])
    return coll


def test_count_and_distinct(sales, db):
    assert db.command("count", sales.name)["n"] == 5, "count without a query"
    assert db.command("count", sales.name, query={"item": "a"})["n"] == 2, "count with a query"
    assert db.command("count", sales.name, query={}, skip=1, limit=2)["n"] == 2, "count with skip and limit"
    assert sales.estimated_document_count() == 5, "estimatedDocumentCount"
    assert sales.count_documents({"qty": {"$gte": 3}}) == 3, "countDocuments with a filter"
    assert sales.count_documents({}, skip=1, limit=3) == 3, "countDocuments with skip and limit"
    assert sorted(sales.distinct("item")) == ["a", "b", "c"], "distinct"
    assert sorted(sales.distinct("tags")) == ["x", "y", "z"], "distinct unwinds arrays"
    assert sorted(sales.distinct("item", {"qty": {"$gt": 2}})) == ["a", "b", "c"], "distinct with a query"
    assert sales.distinct("item", {"price": 20}) == ["b"], "distinct with a narrower query"
    sales.insert_one({"_id": 6, "d": {"e": [1, 2]}})
    sales.insert_one({"_id": 7, "d": [{"e": 2}, {"e": 3}]})
    assert sorted(sales.distinct("d.e")) == [1, 2, 3], "distinct on a dotted path through arrays"


def test_aggregate_group_accumulators(sales):
    out = list(sales.aggregate([
        {"$match": {"qty": {"$gte": 1}}},
        {"$sort": {"_id": 1}},
        {"$group": {"_id": "$item",
                    "total": {"$sum": "$qty"},
                    "revenue": {"$sum": {"$multiply": ["$qty", "$price"]}},
                    "n": {"$sum": 1},
                    "avg": {"$avg": "$qty"},
                    "min": {"$min": "$qty"},
                    "max": {"$max": "$qty"},
                    "first": {"$first": "$_id"},
                    "last": {"$last": "$_id"},
                    "all": {"$push": "$qty"},
                    "prices": {"$addToSet": "$price"},
                    "cnt": {"$count": {}}}},
        {"$sort": {"_id": 1}},
    ]))
    assert out == [
        {"_id": "a", "total": 7, "revenue": 70, "n": 2, "avg": 3.5, "min": 2, "max": 5, "first": 1, "last": 3,
         "all": [2, 5], "prices": [10], "cnt": 2},
        {"_id": "b", "total": 5, "revenue": 100, "n": 2, "avg": 2.5, "min": 1, "max": 4, "first": 2, "last": 5,
         "all": [1, 4], "prices": [20], "cnt": 2},
        {"_id": "c", "total": 3, "revenue": 22.5, "n": 1, "avg": 3.0, "min": 3, "max": 3, "first": 4, "last": 4,
         "all": [3], "prices": [7.5], "cnt": 1},
    ], "$group with every accumulator"
    tot = list(sales.aggregate([{"$group": {"_id": None, "q": {"$sum": "$qty"}}}]))
    assert tot == [{"_id": None, "q": 15}], "$group with _id null"


def test_aggregate_stages(sales):
    out = list(sales.aggregate([
        {"$sort": {"qty": -1}}, {"$skip": 1}, {"$limit": 2},
        {"$project": {"item": 1, "double": {"$multiply": ["$qty", 2]}}},
    ]))
    assert out == [{"_id": 5, "item": "b", "double": 8}, {"_id": 4, "item": "c", "double": 6}], \
        "$sort/$skip/$limit/$project"
    out = list(sales.aggregate([{"$match": {"_id": 1}}, {"$addFields": {"t": {"$add": ["$qty", 1]}}},
                                {"$set": {"u": "$item"}}, {"$unset": ["tags", "price"]}]))
    assert out == [{"_id": 1, "item": "a", "qty": 2, "t": 3, "u": "a"}], "$addFields/$set/$unset"
    out = list(sales.aggregate([{"$unwind": "$tags"}, {"$project": {"_id": 1, "tags": 1}}]))
    assert [(d["_id"], d["tags"]) for d in out] == [(1, "x"), (1, "y"), (2, "y"), (4, "x"), (4, "z")], \
        "$unwind emits one document per element and skips empty or missing arrays"
    out = list(sales.aggregate([{"$match": {"_id": 4}}, {"$unwind": {"path": "$tags"}}, {"$project": {"tags": 1}}]))
    assert out == [{"_id": 4, "tags": "x"}, {"_id": 4, "tags": "z"}], "$unwind with the {path} form"
    out = list(sales.aggregate([{"$match": {"qty": {"$gt": 2}}}, {"$count": "big"}]))
    assert out == [{"big": 3}], "$count stage"
    out = list(sales.aggregate([{"$match": {"_id": 2}}, {"$replaceRoot": {"newRoot": {"i": "$item", "q": "$qty"}}}]))
    assert out == [{"i": "b", "q": 1}], "$replaceRoot"
    out = list(sales.aggregate([{"$match": {"_id": 2}}, {"$replaceWith": {"k": "$item"}}]))
    assert out == [{"k": "b"}], "$replaceWith"
    out = list(sales.aggregate([{"$match": {"nothing": 1}}, {"$count": "n"}]))
    assert out == [], "$count over no documents returns no document"


def test_aggregate_cursor_batches(coll, db):
    coll.insert_many([{"_id": i} for i in range(10)])
    r = db.command("aggregate", coll.name, pipeline=[{"$sort": {"_id": 1}}], cursor={"batchSize": 4})
    assert len(r["cursor"]["firstBatch"]) == 4 and r["cursor"]["id"] != 0, "aggregate honours cursor.batchSize"
    assert ids(coll.aggregate([{"$sort": {"_id": -1}}], batchSize=3)) == list(range(9, -1, -1)), \
        "the driver reads the whole aggregate through getMore"


# --- bulkWrite --------------------------------------------------------------------

def test_bulk_write_mixed(coll):
    coll.insert_many([{"_id": 1, "v": 0}, {"_id": 2, "v": 0}, {"_id": 3, "v": 0}])
    r = coll.bulk_write([
        InsertOne({"_id": 4, "v": 0}),
        UpdateOne({"_id": 1}, {"$inc": {"v": 1}}),
        UpdateMany({"v": 0}, {"$set": {"v": 5}}),
        ReplaceOne({"_id": 10}, {"v": 10}, upsert=True),
        DeleteOne({"_id": 2}),
        DeleteMany({"v": 5}),
    ])
    assert r.inserted_count == 1, "bulk inserted 1"
    assert r.matched_count == 4 and r.modified_count == 4, "bulk matched 1 + 3, modified 1 + 3"
    assert r.upserted_count == 1 and r.upserted_ids == {3: 10}, "bulk upserted _id 10 at op index 3"
    assert r.deleted_count == 3, "bulk deleted 1 + 2"
    assert find_ids(coll, {}) == [1, 10], "documents left after the bulk"


def test_unordered_bulk_reports_each_error(coll):
    coll.insert_one({"_id": 1})
    with pytest.raises(BulkWriteError) as ei:
        coll.bulk_write([InsertOne({"_id": 1}), UpdateOne({"_id": 1}, {"$inc": {"_id": 1}}),
                         InsertOne({"_id": 2})], ordered=False)
    d = ei.value.details
    assert [(e["index"], e["code"]) for e in d["writeErrors"]] == [(0, 11000), (1, 66)], \
        "duplicate insert (11000) and _id change (66)"
    assert d["nInserted"] == 1, "the good insert went through"


# --- indexes ----------------------------------------------------------------------

def test_create_list_drop_indexes(coll):
    assert coll.create_index([("a", ASCENDING), ("b", DESCENDING)]) == "a_1_b_-1", "compound index name"
    assert coll.create_index("c", name="by_c") == "by_c", "explicit index name"
    idx = {i["name"]: i for i in coll.list_indexes()}
    assert set(idx) == {"_id_", "a_1_b_-1", "by_c"}, "listIndexes shows _id_ and both new indexes"
    assert idx["a_1_b_-1"]["key"] == SON([("a", 1), ("b", -1)]), "listIndexes keeps key order and direction"
    assert idx["_id_"]["key"] == {"_id": 1} and idx["_id_"]["v"] == 2, "_id_ index is {_id: 1}, v 2"
    r = coll.database.command("createIndexes", coll.name, indexes=[{"key": {"c": 1}, "name": "by_c"}])
    assert r["numIndexesBefore"] == r["numIndexesAfter"] == 3, "re-creating an identical index is a no-op"
    coll.drop_index("by_c")
    assert {i["name"] for i in coll.list_indexes()} == {"_id_", "a_1_b_-1"}, "dropIndexes by name"
    coll.drop_index([("a", 1), ("b", -1)])
    assert [i["name"] for i in coll.list_indexes()] == ["_id_"], "dropIndexes by key pattern"
    with pytest.raises(OperationFailure) as ei:
        coll.drop_index("_id_")
    assert ei.value.code == 72, "dropping _id_ fails with InvalidOptions (72)"
    with pytest.raises(OperationFailure) as ei:
        coll.drop_index("nope")
    assert ei.value.code == 27, "dropping a missing index fails with IndexNotFound (27)"


def test_unique_index_violation(coll):
    coll.create_index("email", unique=True)
    coll.insert_one({"_id": 1, "email": "x@y"})
    with pytest.raises(DuplicateKeyError) as ei:
        coll.insert_one({"_id": 2, "email": "x@y", "other": 1})
    d = ei.value.details
    assert d["code"] == 11000, "unique violation code 11000"
    assert d["keyPattern"] == {"email": 1} and d["keyValue"] == {"email": "x@y"}, "keyPattern and keyValue"
    assert d["errmsg"] == ('E11000 duplicate key error collection: db.%s index: email_1 dup key: '
                           '{ email: "x@y" }' % coll.name), "mongod's message names the unique index"
    assert coll.find_one({"_id": 2}) is None, "nothing of the violating document was written"
    coll.insert_one({"_id": 3, "email": "z@y"})
    with pytest.raises(DuplicateKeyError):
        coll.update_one({"_id": 3}, {"$set": {"email": "x@y", "touched": True}})
    assert coll.find_one({"_id": 3}) == {"_id": 3, "email": "z@y"}, "a violating update writes nothing"
    coll.insert_many([{"_id": 10, "email": "a", "w": 1}, {"_id": 11, "email": "b", "w": 1}])
    with pytest.raises(OperationFailure) as ei:
        coll.create_index("w", unique=True)
    assert ei.value.code == 11000, "building a unique index over duplicates fails with 11000"
    assert "w_1" not in [i["name"] for i in coll.list_indexes()], "the failed index does not exist"


def test_compound_unique_index(coll):
    coll.create_index([("a", 1), ("b", -1)], unique=True)
    coll.insert_many([{"a": 1, "b": 1}, {"a": 1, "b": 2}, {"a": 2, "b": 1}])
    with pytest.raises(DuplicateKeyError) as ei:
        coll.insert_one({"a": 1, "b": 2})
    assert ei.value.details["keyPattern"] == {"a": 1, "b": -1}, "compound keyPattern"
    assert ei.value.details["keyValue"] == {"a": 1, "b": 2}, "compound keyValue"


def test_unique_index_treats_numeric_types_as_equal(coll):
    coll.create_index("n", unique=True)
    coll.insert_one({"n": 1})
    with pytest.raises(DuplicateKeyError):
        coll.insert_one({"n": 1.0})
    with pytest.raises(DuplicateKeyError):
        coll.insert_one({"n": Int64(1)})
    with pytest.raises(DuplicateKeyError):
        coll.insert_one({"n": Decimal128("1.0")})
    assert coll.count_documents({}) == 1, "only the first numeric 1 is stored"


def test_sparse_and_partial_unique_indexes(coll):
    coll.create_index("s", unique=True, sparse=True)
    coll.insert_many([{"_id": 1}, {"_id": 2}, {"_id": 3, "s": 1}])
    with pytest.raises(DuplicateKeyError):
        coll.insert_one({"_id": 4, "s": 1})
    coll.create_index("p", unique=True, partialFilterExpression={"active": True})
    coll.insert_many([{"_id": 10, "p": "k", "active": False}, {"_id": 11, "p": "k", "active": False},
                      {"_id": 12, "p": "k", "active": True}])
    with pytest.raises(DuplicateKeyError):
        coll.insert_one({"_id": 13, "p": "k", "active": True})
    idx = {i["name"]: i for i in coll.list_indexes()}
    assert idx["s_1"].get("sparse") is True and idx["s_1"].get("unique") is True, "listIndexes shows sparse/unique"
    assert idx["p_1"]["partialFilterExpression"] == {"active": True}, "listIndexes shows partialFilterExpression"
    assert find_ids(coll, {}) == [1, 2, 3, 10, 11, 12], "only the violating documents were refused"
    unique_missing = coll.database[coll.name + "_u"]
    unique_missing.drop()
    unique_missing.create_index("m", unique=True)
    unique_missing.insert_one({"_id": 1})
    with pytest.raises(DuplicateKeyError) as ei:
        unique_missing.insert_one({"_id": 2})
    assert ei.value.details["keyValue"] == {"m": None}, "a non-sparse unique index treats missing as null"
    unique_missing.drop()


def test_explain_reports_idhack_ixscan_collscan(coll, db):
    coll.insert_many([{"_id": i, "a": i % 10, "b": i} for i in range(50)])
    coll.create_index([("a", 1), ("b", 1)])
    assert "IDHACK" in winning_stages(db, coll, {"_id": 3}), "find by _id uses IDHACK"
    st = winning_stages(db, coll, {"a": 3})
    assert "IXSCAN" in st and "COLLSCAN" not in st, "equality on the index prefix uses IXSCAN"
    st = winning_stages(db, coll, {"a": {"$gte": 8}})
    assert "IXSCAN" in st, "a range on the index prefix uses IXSCAN"
    st = winning_stages(db, coll, {}, sort={"a": 1, "b": 1})
    assert "IXSCAN" in st and "SORT" not in st, "a sort on the index uses IXSCAN without a SORT stage"
    assert winning_stages(db, coll, {"b": 3}) == ["COLLSCAN"], "a filter on a non-prefix field is a COLLSCAN"
    assert ids(coll.find({"a": 3}).sort("b", -1)) == [43, 33, 23, 13, 3], "indexed query returns the right docs"
    assert coll.count_documents({"a": {"$gte": 8}}) == 10, "indexed range returns the right count"


def test_ttl_index_removes_expired_documents(coll):
    coll.create_index("at", expireAfterSeconds=0)
    past = datetime.datetime.utcnow() - datetime.timedelta(minutes=5)
    future = datetime.datetime.utcnow() + datetime.timedelta(days=1)
    coll.insert_many([{"_id": 1, "at": past}, {"_id": 2, "at": future}, {"_id": 3, "at": "not a date"},
                      {"_id": 4, "at": [future, past]}])
    idx = {i["name"]: i for i in coll.list_indexes()}
    assert idx["at_1"]["expireAfterSeconds"] == 0, "listIndexes shows expireAfterSeconds"
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and coll.count_documents({"_id": {"$in": [1, 4]}}) > 0:
        time.sleep(0.2)
    assert find_ids(coll, {}) == [2, 3], \
        "within 10 s the past-dated document (and the array holding a past date) is reaped; others stay"


# --- names ------------------------------------------------------------------------

def test_invalid_namespaces_fail_with_73(client):
    db = client[DB]
    for bad in ["a$b", "", ".lead", "system.foo"]:
        with pytest.raises(OperationFailure) as ei:
            db.command("insert", bad, documents=[{"_id": 1}])
        assert ei.value.code == 73, "collection name %r: InvalidNamespace (73)" % bad
    long_db = client["d" * 64]
    with pytest.raises(OperationFailure) as ei:
        long_db.c.insert_one({"_id": 1})
    assert ei.value.code == 73, "a 64-character database name: InvalidNamespace (73)"
    long_db_msg = ei.value.details["errmsg"]
    with pytest.raises(OperationFailure) as ei:
        db.command("find", "a$b")
    assert ei.value.code == 73, "find on an invalid collection name: InvalidNamespace (73)"
    assert "d" * 64 not in client.list_database_names(), "no database was created"
    client["d" * 63].c.insert_one({"_id": 1})
    assert "d" * 63 in client.list_database_names(), "a 63-character database name is accepted"
    client.drop_database("d" * 63)
    assert long_db_msg == "db name must be at most 63 characters, found: 64", "mongod 7.0's message for a long db name"


def test_collection_name_with_nul_fails_with_73(db):
    with pytest.raises(OperationFailure) as ei:
        db.command("insert", "x\x00y", documents=[{"_id": 1}])
    assert ei.value.code == 73, "a collection name with an embedded NUL: InvalidNamespace (73)"
    assert not [n for n in db.list_collection_names() if n.startswith("x")], "no collection was created"


# --- w: 0 ----------------------------------------------------------------------------

def test_w0_writes_are_applied_without_reply(atomdb_module, coll):
    c1 = MongoClient(atomdb_module.uri("directConnection=true&maxPoolSize=1"), serverSelectionTimeoutMS=10000)
    try:
        col = c1[DB].get_collection(coll.name, write_concern=WriteConcern(w=0))
        r = col.insert_one({"_id": 1, "n": 0})
        assert r.acknowledged is False, "w:0 insert is unacknowledged"
        col.update_one({"_id": 1}, {"$inc": {"n": 5}})
        col.insert_one({"_id": 1, "n": 99})  # duplicate: silently dropped under w:0
        col.insert_one({"_id": 2})
        col.delete_one({"_id": 2})
        # Same single pooled connection: had the server replied to any w:0
        # write, this read would receive a stale reply and fail.
        deadline = time.monotonic() + 5
        doc = None
        while time.monotonic() < deadline:
            doc = c1[DB][coll.name].find_one({"_id": 1})
            if doc == {"_id": 1, "n": 5} and c1[DB][coll.name].count_documents({}) == 1:
                break
            time.sleep(0.05)
        assert doc == {"_id": 1, "n": 5}, "w:0 insert and update were applied, duplicate ignored"
        assert c1[DB][coll.name].count_documents({}) == 1, "w:0 delete was applied"
        assert c1.admin.command("ping")["ok"] == 1, "the connection is still in sync"
    finally:
        c1.close()


# --- compiled statements reused between requests (src/cmd/plancache.c) -------------

def test_a_repeated_update_compiles_the_same_on_every_document(coll):
    """The same filter and update bytes are served from the plan cache after
    the first request; each request must still behave as if compiled anew."""
    coll.insert_many([{"_id": 1, "n": 0}, {"_id": 2, "n": "text"}, {"_id": 3, "n": 5}])
    for _ in range(20):
        coll.update_one({"_id": 1}, {"$inc": {"n": 1}})
    assert coll.find_one({"_id": 1})["n"] == 20
    with pytest.raises(WriteError) as e:
        coll.update_one({"_id": 2}, {"$inc": {"n": 1}})
    assert e.value.code == 14, "a type error on one document (%r)" % e.value.details
    coll.update_one({"_id": 3}, {"$inc": {"n": 1}})
    assert coll.find_one({"_id": 3})["n"] == 6, "the error did not stick to the cached update"


def test_a_cached_update_evaluates_current_date_per_request(coll):
    coll.insert_many([{"_id": 1}, {"_id": 2}])
    coll.update_one({"_id": 1}, {"$currentDate": {"at": True}})
    time.sleep(0.02)
    coll.update_one({"_id": 1}, {"$currentDate": {"at": True}})
    first = coll.find_one({"_id": 1})["at"]
    time.sleep(0.02)
    coll.update_one({"_id": 1}, {"$currentDate": {"at": True}})
    assert coll.find_one({"_id": 1})["at"] > first, "each run takes the time anew"


def test_filters_with_let_variables_are_not_reused_across_values(coll, db):
    coll.insert_many([{"_id": 1, "k": 1, "hit": 0}, {"_id": 2, "k": 2, "hit": 0}])
    for v in (1, 2, 2):
        db.command(SON([("update", coll.name), ("updates", [
            {"q": {"$expr": {"$eq": ["$k", "$$v"]}}, "u": {"$inc": {"hit": 1}}}]),
            ("let", {"v": v})]))
    assert [d["hit"] for d in coll.find().sort("_id", 1)] == [1, 2], \
        "each request matched with its own let value"


def test_find_and_modify_reuses_nothing_between_different_filters(coll):
    coll.insert_many([{"_id": i, "n": 0} for i in range(5)])
    for i in range(5):
        for _ in range(i + 1):
            coll.find_one_and_update({"_id": i}, {"$inc": {"n": 1}})
    assert [d["n"] for d in coll.find().sort("_id", 1)] == [1, 2, 3, 4, 5]
