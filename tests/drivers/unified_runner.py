"""The MongoDB unified test format (mongodb/specifications
source/unified-test-format/unified-test-format.md) run against atomdb
through pymongo 3.11: loading, skip decisions, matching, entities
(clients, databases, collections, sessions) and operations. Shared by
test_crud_unified.py, test_transactions_unified.py and
test_retryable_writes_unified.py; each suite's JSON files are read at test
time from <repo>/../shared/specs/<suite> (a non-commercial licence keeps them
out of this repository).

Tests that need something atomdb or pymongo 3.11 does not have (fail points,
MongoDB 8.x features, sharded or load-balanced topologies, rawData,
client bulkWrite, ...) are skipped with a reason; `pytest -ra` groups the
skips by reason, and `python3 test_<suite>_unified.py` prints the same list
without a server. Command-monitoring expectations (expectEvents) describe
what the driver sends, not what the server does: a test whose only
assertions are events is skipped, other tests run with their result, error
and outcome assertions while the events are not checked.
"""

import collections
import datetime
import functools
import json
import linecache
import re
from pathlib import Path

try:
    import pytest
except ImportError:  # only the stand-alone skip listing runs without pytest
    pytest = None

try:
    import bson
    import pymongo
    from bson import json_util
    from bson.decimal128 import Decimal128
    from bson.int64 import Int64
    from bson.max_key import MaxKey
    from bson.min_key import MinKey
    from bson.objectid import ObjectId
    from bson.regex import Regex
    from bson.timestamp import Timestamp
    from bson.binary import Binary
    from bson.code import Code
    from pymongo import errors as perr
    from pymongo.operations import (DeleteMany, DeleteOne, InsertOne, ReplaceOne,
                                    UpdateMany, UpdateOne)
    from pymongo.read_concern import ReadConcern
    from pymongo.read_preferences import ReadPreference, read_pref_mode_from_name, make_read_preference
    from pymongo.write_concern import WriteConcern
    from pymongo.collection import ReturnDocument
    from pymongo.client_session import ClientSession, TransactionOptions, _TxnState
except ImportError:  # pragma: no cover
    pymongo = None

REPO = Path(__file__).resolve().parents[2]
SPECS = REPO.parent / "shared" / "specs"
CRUD_DIR = SPECS / "crud"  # kept for callers of the former test_crud_unified API

# What atomdb presents itself as (src/cmd/server.h SERVER_MONGODB_VERSION,
# a single-node replica set).
SERVER_VERSION = (7, 0, 0)
TOPOLOGY = "replicaset"

# ---------------------------------------------------------------------------
# Loading: canonical/relaxed Extended JSON. Only the EJSON wrappers are
# converted; legacy forms such as {"$regex": ...} or {"$type": ...} stay query
# operators.

_EJSON_KEYS = {"$oid", "$numberLong", "$numberInt", "$numberDouble", "$numberDecimal",
               "$date", "$binary", "$timestamp", "$minKey", "$maxKey",
               "$regularExpression", "$symbol", "$code", "$undefined", "$dbPointer",
               "$uuid"}


def _pairs_hook(pairs):
    keys = [k for k, _ in pairs]
    if keys and (keys[0] in _EJSON_KEYS or keys == ["$code", "$scope"]):
        return json_util.object_pairs_hook(pairs)
    return dict(pairs)


def load_spec_file(path):
    return json.loads(Path(path).read_text(), object_pairs_hook=_pairs_hook)


# ---------------------------------------------------------------------------
# Skip decisions (static: from the JSON alone)

def _version(text):
    parts = [int(p) for p in str(text).split(".")]
    while len(parts) < 3:
        parts.append(0)
    return tuple(parts[:3])


def _requirement_unmet(req):
    """Reason one runOnRequirement is unmet by atomdb, or None."""
    if "minServerVersion" in req and _version(req["minServerVersion"]) > SERVER_VERSION:
        return "needs MongoDB >= %s (atomdb presents 7.0)" % _major(req["minServerVersion"])
    if "maxServerVersion" in req and _version(req["maxServerVersion"]) < SERVER_VERSION:
        return "only for MongoDB <= %s (atomdb presents 7.0)" % _major(req["maxServerVersion"])
    if "topologies" in req and TOPOLOGY not in req["topologies"] \
            and "single" not in req["topologies"]:
        return "needs topology %s (atomdb is a single-node replica set)" % "/".join(req["topologies"])
    if req.get("serverless") == "require":
        return "needs serverless"
    for key in ("auth", "csfle", "serverParameters", "authMechanism"):
        if key in req and req[key]:
            return "needs %s" % key
    return None


def _major(v):
    # Group reasons by the feature release, not the exact patch version.
    t = _version(v)
    return "%d.%d" % (t[0], t[1])


def _requirements_reason(reqs):
    if not reqs:
        return None
    reasons = [_requirement_unmet(r) for r in reqs]
    if any(r is None for r in reasons):
        return None
    return reasons[0]


# Arguments pymongo 3.11 can only send through commands that copy **kwargs
# into the command document (findAndModify, aggregate, distinct, count).
_KWARG_PASSTHROUGH_OPS = {"aggregate", "findOneAndUpdate", "findOneAndReplace",
                          "findOneAndDelete", "distinct", "countDocuments",
                          "estimatedDocumentCount"}


# Modules that run operations of their own (unified_changestreams.py):
# each has reason(op, entities) and run(target, name, args), answering
# NOT_MINE for operations that are not theirs.
OPERATION_HOOKS = []


def _operation_reason(op, entities):
    name, args = op["name"], op.get("arguments", {})
    for hook in OPERATION_HOOKS:
        r = hook.reason(op, entities)
        if r is not hook.NOT_MINE:
            return r
    if op["object"] == "testRunner":
        if name in ("failPoint", "targetedFailPoint"):
            return "needs fail points (configureFailPoint)"
        if name in ("assertSameLsidOnLastTwoCommands", "assertDifferentLsidOnLastTwoCommands"):
            return "asserts on command-monitoring events (%s)" % name
        if name in ("assertSessionPinned", "assertSessionUnpinned"):
            return "mongos pinning (%s)" % name
        if name in SPECIAL_OPERATIONS:
            if name == "createEntities":
                for ent in args.get("entities", []):
                    reason = _entity_reason(ent)
                    if reason:
                        return reason
            return None
        return "special operation %s not implemented" % name
    if op["object"] in entities and "session" in entities[op["object"]] \
            and "client" in entities[op["object"]] and name not in SESSION_OPERATIONS:
        return "session operation %s not implemented" % name
    if name == "clientBulkWrite":
        return "client bulkWrite (MongoDB 8.0; pymongo 3.11 lacks it)"
    if "rawData" in args:
        return "rawData option (pymongo 3.11 lacks it)"
    if name in ("updateOne", "replaceOne") and "sort" in args:
        return "sort on updateOne/replaceOne (MongoDB 8.0; pymongo 3.11 lacks it)"
    if name == "bulkWrite" and any(k == "sort" for r in args.get("requests", [])
                                   for m in r.values() for k in m):
        return "sort on updateOne/replaceOne (MongoDB 8.0; pymongo 3.11 lacks it)"
    if "let" in args and name not in _KWARG_PASSTHROUGH_OPS:
        return "let option on %s (pymongo 3.11 lacks it)" % name
    if "comment" in args and name not in _KWARG_PASSTHROUGH_OPS:
        if not (name == "find" and isinstance(args["comment"], str)):
            return "comment option on %s (pymongo 3.11 lacks it)" % name
    if name == "bulkWrite" and _inserts_unsendable_keys(name, args) and \
            any("insertOne" not in r for r in args.get("requests", [])):
        return ("$-prefixed or dotted field names in a mixed bulkWrite "
                "(pymongo 3.11 refuses them client-side)")
    coll = entities.get(op["object"], {})
    unack = coll.get("collectionOptions", {}).get("writeConcern", {}).get("w") == 0
    if unack and "expectError" not in op:
        hints = "hint" in args or any("hint" in m for r in args.get("requests", [])
                                      for m in r.values())
        if hints:
            return "hint on an unacknowledged write (pymongo 3.11 refuses it client-side)"
    return None


# testRunner operations this runner implements.
SPECIAL_OPERATIONS = {"createEntities", "assertSessionTransactionState",
                      "assertCollectionExists", "assertCollectionNotExists",
                      "assertIndexExists", "assertIndexNotExists"}
SESSION_OPERATIONS = {"startTransaction", "commitTransaction", "abortTransaction",
                      "endSession"}


def _entity_reason(ent):
    """Why an entity cannot be created with pymongo 3.11, or None."""
    (kind, body), = ent.items()
    if kind == "session" and body.get("sessionOptions", {}).get("snapshot"):
        return "snapshot sessions (pymongo 3.11 lacks them)"
    if kind not in ("client", "database", "collection", "session"):
        return "%s entities not implemented" % kind
    return None


def _unsendable_keys(value):
    """True when pymongo 3.11's insert key check (check_keys) would refuse `value`."""
    if isinstance(value, dict):
        return any(k.startswith("$") or "." in k or _unsendable_keys(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_unsendable_keys(v) for v in value)
    return False


def _inserts_unsendable_keys(name, args):
    if name == "insertOne":
        docs = [args.get("document")]
    elif name == "insertMany":
        docs = args.get("documents", [])
    elif name == "bulkWrite":
        docs = [r["insertOne"].get("document") for r in args.get("requests", []) if "insertOne" in r]
    else:
        return False
    return any(_unsendable_keys(d) for d in docs)


def _has_checkable_assertions(test):
    if "outcome" in test:
        return True
    for op in test["operations"]:
        if "expectResult" in op or "expectError" in op:
            return True
        if op["object"] == "testRunner" and op["name"] in SPECIAL_OPERATIONS \
                and op["name"].startswith("assert"):
            return True
    return False


# Functions (spec, test) -> reason or None that a suite adds (SKIP_HOOKS).
SKIP_HOOKS = []


def skip_reason(spec, test):
    """Why this test cannot run against atomdb through pymongo 3.11, or None."""
    reason = _requirements_reason(spec.get("runOnRequirements")) \
        or _requirements_reason(test.get("runOnRequirements")) \
        or next((r for r in (h(spec, test) for h in SKIP_HOOKS) if r), None)
    if reason:
        return reason
    if test.get("skipReason"):
        return "spec file says: " + test["skipReason"]
    entities = {}
    for ent in spec.get("createEntities", []):
        reason = _entity_reason(ent)
        if reason:
            return reason
        for kind, body in ent.items():
            entities[body["id"]] = dict(body, **{kind: True})
    for op in test["operations"]:
        if op["object"] == "testRunner" and op["name"] == "createEntities":
            for ent in op["arguments"]["entities"]:
                for kind, body in ent.items():
                    entities[body["id"]] = dict(body, **{kind: True})
        reason = _operation_reason(op, entities)
        if reason:
            return reason
        if "saveResultAsEntity" in op:
            entities[op["saveResultAsEntity"]] = {"changeStream": op["name"] == "createChangeStream"}
    if "expectEvents" in test and not _has_checkable_assertions(test):
        return "only asserts command-monitoring events"
    return None


def collect_cases(spec_dir=CRUD_DIR):
    """[(file name, test index, description, skip reason or None)]."""
    cases = []
    for path in sorted(Path(spec_dir).glob("*.json")):
        spec = load_spec_file(path)
        for i, test in enumerate(spec["tests"]):
            cases.append((path.name, i, test["description"], skip_reason(spec, test)))
    return cases


# ---------------------------------------------------------------------------
# Matching (unified format, "Evaluating Matches")

class MatchError(AssertionError):
    pass


def _is_number(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


_TYPE_CHECKS = {
    "double": lambda v: isinstance(v, float),
    "string": lambda v: isinstance(v, str),
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "binData": lambda v: isinstance(v, (bytes, Binary)),
    "undefined": lambda v: False,
    "objectId": lambda v: isinstance(v, ObjectId),
    "bool": lambda v: isinstance(v, bool),
    "date": lambda v: isinstance(v, datetime.datetime),
    "null": lambda v: v is None,
    "regex": lambda v: isinstance(v, (Regex, type(re.compile("")))),
    "javascript": lambda v: isinstance(v, Code),
    "int": lambda v: isinstance(v, int) and not isinstance(v, (bool, Int64)),
    "timestamp": lambda v: isinstance(v, Timestamp),
    "long": lambda v: isinstance(v, Int64),
    "decimal": lambda v: isinstance(v, Decimal128),
    "minKey": lambda v: isinstance(v, MinKey),
    "maxKey": lambda v: isinstance(v, MaxKey),
}
_TYPE_CHECKS["number"] = lambda v: (_TYPE_CHECKS["int"](v) or _TYPE_CHECKS["long"](v)
                                    or _TYPE_CHECKS["double"](v) or _TYPE_CHECKS["decimal"](v))

_MISSING = object()


def _special_op(value):
    """The `$$name` of a one-key special-operator document, or None."""
    if isinstance(value, dict) and len(value) == 1:
        key = next(iter(value))
        if key.startswith("$$"):
            return key
    return None


def match(expected, actual, path="", root=False, entities=None):
    """Asserts that `actual` matches `expected` under the unified-format rules."""
    op = _special_op(expected)
    if op:
        _match_special(op, expected[op], actual, path, root, entities)
        return
    if actual is _MISSING:
        raise MatchError("%s: missing, expected %r" % (path or "<root>", expected))
    if isinstance(expected, dict):
        if not isinstance(actual, dict):
            raise MatchError("%s: expected a document %r, got %r" % (path or "<root>", expected, actual))
        for key, value in expected.items():
            sub = "%s.%s" % (path, key) if path else key
            vop = _special_op(value)
            if vop == "$$exists":
                if bool(value[vop]) != (key in actual):
                    raise MatchError("%s: expected $$exists %s, document is %r"
                                     % (sub, value[vop], actual))
                continue
            if vop == "$$unsetOrMatches":
                if key not in actual:
                    continue
                match(value[vop], actual[key], sub, False, entities)
                continue
            if key not in actual:
                if vop is None:
                    raise MatchError("%s: missing in %r" % (sub, actual))
            match(value, actual.get(key, _MISSING), sub, False, entities)
        if not root:
            extra = set(actual) - set(expected)
            if extra:
                raise MatchError("%s: unexpected fields %s in %r" % (path or "<root>", sorted(extra), actual))
        return
    if isinstance(expected, list):
        if not isinstance(actual, list):
            raise MatchError("%s: expected an array %r, got %r" % (path or "<root>", expected, actual))
        if len(actual) != len(expected):
            raise MatchError("%s: expected %d elements %r, got %d %r"
                             % (path or "<root>", len(expected), expected, len(actual), actual))
        for i, (e, a) in enumerate(zip(expected, actual)):
            match(e, a, "%s.%d" % (path, i) if path else str(i), False, entities)
        return
    _match_scalar(expected, actual, path)


def _match_scalar(expected, actual, path):
    if _is_number(expected) and _is_number(actual):
        if float(expected) == float(actual) and expected == actual:
            return
    elif type(expected) is type(actual) or (
            isinstance(expected, (bytes, Binary)) and isinstance(actual, (bytes, Binary))):
        if expected == actual:
            return
    elif isinstance(expected, Regex) and isinstance(actual, Regex):
        if (expected.pattern, expected.flags) == (actual.pattern, actual.flags):
            return
    raise MatchError("%s: expected %r (%s), got %r (%s)" % (
        path or "<root>", expected, type(expected).__name__, actual, type(actual).__name__))


def _match_special(op, arg, actual, path, root, entities):
    where = path or "<root>"
    if op == "$$unsetOrMatches":
        if actual is _MISSING:
            return
        match(arg, actual, path, root, entities)
    elif op == "$$exists":
        if bool(arg) != (actual is not _MISSING):
            raise MatchError("%s: expected $$exists %s" % (where, arg))
    elif op == "$$type":
        if actual is _MISSING:
            raise MatchError("%s: missing, expected type %s" % (where, arg))
        names = arg if isinstance(arg, list) else [arg]
        if not any(_TYPE_CHECKS[n](actual) for n in names):
            raise MatchError("%s: expected type %s, got %r" % (where, names, actual))
    elif op == "$$matchesEntity":
        match(entities[arg], actual, path, root, entities)
    elif op == "$$lte":
        if actual is _MISSING or not _is_number(actual) or not actual <= arg:
            raise MatchError("%s: expected <= %r, got %r" % (where, arg, actual))
    elif op == "$$matchAsRoot":
        match(arg, actual, path, True, entities)
    elif op == "$$sessionLsid":
        match(entities[arg].session_id, actual, path, root, entities)
    elif op == "$$matchesHexBytes":
        if actual != bytes.fromhex(arg):
            raise MatchError("%s: expected bytes %s, got %r" % (where, arg, actual))
    else:
        raise NotImplementedError("special operator %s" % op)


def exact_equal(expected, actual, path=""):
    """Outcome comparison: same keys, same values and types (key order free)."""
    if isinstance(expected, dict):
        if not isinstance(actual, dict) or set(expected) != set(actual):
            raise MatchError("%s: expected %r, got %r" % (path or "<doc>", expected, actual))
        for k in expected:
            exact_equal(expected[k], actual[k], "%s.%s" % (path, k) if path else k)
    elif isinstance(expected, list):
        if not isinstance(actual, list) or len(expected) != len(actual):
            raise MatchError("%s: expected %r, got %r" % (path or "<doc>", expected, actual))
        for i, (e, a) in enumerate(zip(expected, actual)):
            exact_equal(e, a, "%s.%d" % (path, i))
    else:
        _match_scalar(expected, actual, path)
        if type(expected) is not type(actual) and not (
                isinstance(expected, (bytes, Binary)) and isinstance(actual, (bytes, Binary))):
            raise MatchError("%s: expected %r of type %s, got %r of type %s" % (
                path, expected, type(expected).__name__, actual, type(actual).__name__))


# ---------------------------------------------------------------------------
# Running operations

class UnsupportedArgument(Exception):
    pass


def _take(args, *allowed):
    unknown = set(args) - set(allowed)
    if unknown:
        raise UnsupportedArgument("unsupported arguments %s" % sorted(unknown))
    return args


def _keys_list(keys):
    return [(k, v) for k, v in keys.items()]


def _hint(args):
    """A hint for pymongo 3.11: an index name, or a key document as (key, dir) pairs."""
    hint = args.get("hint")
    return _keys_list(hint) if isinstance(hint, dict) else hint


def _update_result(r):
    if not r.acknowledged:
        return {"acknowledged": False}
    doc = {"matchedCount": r.matched_count, "modifiedCount": r.modified_count,
           "upsertedCount": 1 if "upserted" in r.raw_result else 0}
    if "upserted" in r.raw_result:
        doc["upsertedId"] = r.upserted_id
    return doc


def _bulk_result(r):
    if not r.acknowledged:
        return {"acknowledged": False}
    return {"insertedCount": r.inserted_count, "matchedCount": r.matched_count,
            "modifiedCount": r.modified_count, "deletedCount": r.deleted_count,
            "upsertedCount": r.upserted_count,
            "upsertedIds": {str(k): v for k, v in r.upserted_ids.items()}}


def _bulk_error_result(details):
    return {"insertedCount": details.get("nInserted", 0),
            "matchedCount": details.get("nMatched", 0),
            "modifiedCount": details.get("nModified", 0),
            "deletedCount": details.get("nRemoved", 0),
            "upsertedCount": details.get("nUpserted", 0),
            "upsertedIds": {str(u["index"]): u["_id"] for u in details.get("upserted", [])}}


def _write_model(request):
    (kind, a), = request.items()
    if kind == "insertOne":
        _take(a, "document")
        return InsertOne(a["document"])
    if kind == "deleteOne":
        _take(a, "filter", "hint", "collation")
        return DeleteOne(a["filter"], hint=_hint(a), collation=a.get("collation"))
    if kind == "deleteMany":
        _take(a, "filter", "hint", "collation")
        return DeleteMany(a["filter"], hint=_hint(a), collation=a.get("collation"))
    if kind == "replaceOne":
        _take(a, "filter", "replacement", "upsert", "hint", "collation")
        return ReplaceOne(a["filter"], a["replacement"], upsert=a.get("upsert", False),
                          hint=_hint(a), collation=a.get("collation"))
    if kind in ("updateOne", "updateMany"):
        _take(a, "filter", "update", "upsert", "hint", "arrayFilters", "collation")
        cls = UpdateOne if kind == "updateOne" else UpdateMany
        return cls(a["filter"], a["update"], upsert=a.get("upsert", False),
                   array_filters=a.get("arrayFilters"), hint=_hint(a),
                   collation=a.get("collation"))
    raise UnsupportedArgument("bulkWrite request %s" % kind)


def _return_document(value):
    if value is None:
        return ReturnDocument.BEFORE
    v = value.lower()
    if v == "before":
        return ReturnDocument.BEFORE
    if v == "after":
        return ReturnDocument.AFTER
    raise UnsupportedArgument("returnDocument %r" % value)


def _passthrough(args, *names):
    """Options pymongo copies verbatim into the command document."""
    return {n: args[n] for n in names if n in args}


def _raw_insert(coll, docs, ordered):
    """Sends an `insert` command directly and raises what pymongo's insert
    helpers would. pymongo 3.11 refuses $-prefixed and dotted field names in
    inserted documents client-side (MongoDB 5.0+ stores them, and the spec
    tests check that), while its command path sends any document; the
    command, reply and error are the same as a current driver's."""
    if coll.write_concern.document.get("w") == 0:
        raise UnsupportedArgument("raw insert with w:0")
    docs = [d if "_id" in d else dict([("_id", ObjectId())] + list(d.items())) for d in docs]
    cmd = bson.son.SON([("insert", coll.name), ("documents", docs), ("ordered", ordered)])
    if coll.write_concern.document:
        cmd["writeConcern"] = coll.write_concern.document
    reply = coll.database.command(cmd)
    write_errors = reply.get("writeErrors", [])
    wce = reply.get("writeConcernError")
    return docs, reply.get("n", 0), write_errors, wce


def _raw_insert_one(coll, doc):
    docs, _n, write_errors, wce = _raw_insert(coll, [doc], True)
    if write_errors:
        we = write_errors[0]
        raise perr.WriteError(we.get("errmsg"), we.get("code"), we)
    if wce:
        raise perr.WriteConcernError(wce.get("errmsg"), wce.get("code"), wce)
    return {"insertedId": docs[0]["_id"]}


def _raw_insert_many(coll, documents, ordered):
    docs, n, write_errors, wce = _raw_insert(coll, documents, ordered)
    if write_errors or wce:
        raise perr.BulkWriteError({
            "writeErrors": write_errors, "writeConcernErrors": [wce] if wce else [],
            "nInserted": n, "nUpserted": 0, "nMatched": 0, "nModified": 0, "nRemoved": 0,
            "upserted": []})
    return docs, n


def run_collection_op(coll, name, args):
    """Runs one collection operation and returns its result as a document/value."""
    if _inserts_unsendable_keys(name, args) and not args.get("bypassDocumentValidation"):
        if name == "insertOne":
            _take(args, "document")
            return _raw_insert_one(coll, args["document"])
        if name == "insertMany":
            _take(args, "documents", "ordered")
            docs, n = _raw_insert_many(coll, args["documents"], args.get("ordered", True))
            return {"insertedCount": n, "insertedIds": {str(i): d["_id"] for i, d in enumerate(docs)}}
        if name == "bulkWrite":
            _take(args, "requests", "ordered")
            for r in args["requests"]:
                _take(r["insertOne"], "document")
            _docs, n = _raw_insert_many(coll, [r["insertOne"]["document"] for r in args["requests"]],
                                        args.get("ordered", True))
            return {"insertedCount": n, "matchedCount": 0, "modifiedCount": 0, "deletedCount": 0,
                    "upsertedCount": 0, "upsertedIds": {}}
    if name == "insertOne":
        _take(args, "document", "bypassDocumentValidation")
        r = coll.insert_one(args["document"],
                            bypass_document_validation=args.get("bypassDocumentValidation", False))
        if not r.acknowledged:
            return {"acknowledged": False}
        return {"insertedId": r.inserted_id}
    if name == "insertMany":
        _take(args, "documents", "ordered", "bypassDocumentValidation")
        r = coll.insert_many(args["documents"], ordered=args.get("ordered", True),
                             bypass_document_validation=args.get("bypassDocumentValidation", False))
        if not r.acknowledged:
            return {"acknowledged": False}
        return {"insertedCount": len(r.inserted_ids),
                "insertedIds": {str(i): v for i, v in enumerate(r.inserted_ids)}}
    if name in ("updateOne", "updateMany"):
        _take(args, "filter", "update", "upsert", "arrayFilters", "hint", "bypassDocumentValidation",
              "collation")
        fn = coll.update_one if name == "updateOne" else coll.update_many
        r = fn(args["filter"], args["update"], upsert=args.get("upsert", False),
               array_filters=args.get("arrayFilters"), hint=_hint(args),
               collation=args.get("collation"),
               bypass_document_validation=args.get("bypassDocumentValidation", False))
        return _update_result(r)
    if name == "replaceOne":
        _take(args, "filter", "replacement", "upsert", "hint", "bypassDocumentValidation",
              "collation")
        r = coll.replace_one(args["filter"], args["replacement"], upsert=args.get("upsert", False),
                             hint=_hint(args), collation=args.get("collation"),
                             bypass_document_validation=args.get("bypassDocumentValidation", False))
        return _update_result(r)
    if name in ("deleteOne", "deleteMany"):
        _take(args, "filter", "hint", "collation")
        fn = coll.delete_one if name == "deleteOne" else coll.delete_many
        r = fn(args["filter"], hint=_hint(args), collation=args.get("collation"))
        if not r.acknowledged:
            return {"acknowledged": False}
        return {"deletedCount": r.deleted_count}
    if name == "bulkWrite":
        _take(args, "requests", "ordered", "bypassDocumentValidation")
        r = coll.bulk_write([_write_model(q) for q in args["requests"]],
                            ordered=args.get("ordered", True),
                            bypass_document_validation=args.get("bypassDocumentValidation", False))
        return _bulk_result(r)
    if name in ("find", "findOne"):
        _take(args, "filter", "sort", "skip", "limit", "batchSize", "projection",
              "allowDiskUse", "comment", "collation")
        kw = _passthrough(args, "collation")
        if "sort" in args:
            kw["sort"] = _keys_list(args["sort"])
        for src, dst in (("skip", "skip"), ("limit", "limit"), ("batchSize", "batch_size"),
                         ("projection", "projection"), ("allowDiskUse", "allow_disk_use"),
                         ("comment", "comment")):
            if src in args:
                kw[dst] = args[src]
        if name == "findOne":
            return coll.find_one(args.get("filter", {}), **kw)
        return list(coll.find(args.get("filter", {}), **kw))
    if name == "aggregate":
        _take(args, "pipeline", "batchSize", "allowDiskUse", "bypassDocumentValidation",
              "let", "comment", "collation")
        kw = _passthrough(args, "let", "comment", "allowDiskUse", "batchSize",
                          "bypassDocumentValidation", "collation")
        return list(coll.aggregate(args["pipeline"], **kw))
    if name == "countDocuments":
        _take(args, "filter", "skip", "limit", "comment", "hint", "collation")
        kw = _passthrough(args, "skip", "limit", "comment", "collation")
        if "hint" in args:
            kw["hint"] = _hint(args)
        return coll.count_documents(args["filter"], **kw)
    if name == "count":
        _take(args, "filter", "skip", "limit", "collation")
        return coll.count(args.get("filter", {}),
                          **_passthrough(args, "skip", "limit", "collation"))
    if name == "estimatedDocumentCount":
        _take(args, "comment", "maxTimeMS")
        return coll.estimated_document_count(**_passthrough(args, "comment", "maxTimeMS"))
    if name == "distinct":
        _take(args, "fieldName", "filter", "comment", "hint", "collation")
        return coll.distinct(args["fieldName"], args.get("filter", {}),
                             **_passthrough(args, "comment", "hint", "collation"))
    if name in ("findOneAndUpdate", "findOneAndReplace", "findOneAndDelete"):
        common = ("filter", "projection", "sort", "hint", "let", "comment", "collation")
        kw = _passthrough(args, "let", "comment", "collation")
        if "sort" in args:
            kw["sort"] = _keys_list(args["sort"])
        if "projection" in args:
            kw["projection"] = args["projection"]
        if "hint" in args:
            kw["hint"] = _hint(args)
        if name == "findOneAndDelete":
            _take(args, *common)
            return coll.find_one_and_delete(args["filter"], **kw)
        if "bypassDocumentValidation" in args:
            kw["bypassDocumentValidation"] = args["bypassDocumentValidation"]
        if name == "findOneAndUpdate":
            _take(args, "update", "upsert", "returnDocument", "arrayFilters",
                  "bypassDocumentValidation", *common)
            return coll.find_one_and_update(
                args["filter"], args["update"], upsert=args.get("upsert", False),
                return_document=_return_document(args.get("returnDocument")),
                array_filters=args.get("arrayFilters"), **kw)
        _take(args, "replacement", "upsert", "returnDocument", "bypassDocumentValidation", *common)
        return coll.find_one_and_replace(
            args["filter"], args["replacement"], upsert=args.get("upsert", False),
            return_document=_return_document(args.get("returnDocument")), **kw)
    if name == "createIndex":
        _take(args, "keys", "name", "unique", "sparse", "expireAfterSeconds",
              "partialFilterExpression")
        kw = {k: v for k, v in args.items() if k != "keys"}
        return coll.create_index(_keys_list(args["keys"]), **kw)
    if name == "dropIndex":
        _take(args, "name")
        coll.drop_index(args["name"])
        return None
    if name == "listIndexes":
        _take(args)
        return list(coll.list_indexes())
    if name == "listIndexNames":
        _take(args)
        return [ix["name"] for ix in coll.list_indexes()]
    if name == "drop":
        _take(args)
        coll.drop()
        return None
    raise UnsupportedArgument("collection operation %s" % name)


def run_database_op(db, name, args):
    if name == "aggregate":
        _take(args, "pipeline", "batchSize", "allowDiskUse", "let", "comment")
        kw = _passthrough(args, "let", "comment", "allowDiskUse", "batchSize")
        return list(db.aggregate(args["pipeline"], **kw))
    if name == "createCollection":
        _take(args, "collection", "viewOn", "pipeline")
        kw = {}
        if "viewOn" in args:
            kw["viewOn"] = args["viewOn"]
        if "pipeline" in args:
            kw["pipeline"] = args["pipeline"]
        db.create_collection(args["collection"], **kw)
        return None
    if name == "dropCollection":
        _take(args, "collection")
        db.drop_collection(args["collection"])
        return None
    if name == "modifyCollection":
        _take(args, "collection", "validator")
        cmd = {"collMod": args["collection"]}
        cmd.update({k: v for k, v in args.items() if k != "collection"})
        db.command(cmd)
        return None
    if name == "runCommand":
        _take(args, "command", "commandName", "readPreference")
        kw = {}
        if "readPreference" in args:
            kw["read_preference"] = _read_preference(args["readPreference"])
        return db.command(args["command"], **kw)
    if name == "listCollectionNames":
        _take(args, "filter")
        return db.list_collection_names(filter=args.get("filter"))
    raise UnsupportedArgument("database operation %s" % name)


def _read_concern(doc):
    return ReadConcern(doc.get("level"))


def _write_concern(doc):
    return WriteConcern(**{k if k != "wtimeoutMS" else "wtimeout": v for k, v in doc.items()})


def _read_preference(doc):
    mode = read_pref_mode_from_name(doc["mode"])
    return make_read_preference(mode, doc.get("tagSets"),
                                doc.get("maxStalenessSeconds", -1))


def _collection_options(opts):
    kw = {}
    for key, value in opts.items():
        if key == "readConcern":
            kw["read_concern"] = _read_concern(value)
        elif key == "writeConcern":
            kw["write_concern"] = _write_concern(value)
        elif key == "readPreference":
            kw["read_preference"] = _read_preference(value)
        else:
            raise UnsupportedArgument("collection/database option %s" % key)
    return kw


class Runner:
    """Runs one unified-format test against a server at (host, port)."""

    def __init__(self, host, port, kill_sessions=False):
        self.host, self.port = host, port
        self.uri = "mongodb://%s:%d/" % (host, port)
        self.internal = pymongo.MongoClient(self.uri, serverSelectionTimeoutMS=10000)
        self.clients = []
        self.sessions = []
        # Transaction suites: killAllSessions before each test, so that a
        # transaction left open by an earlier test holds no locks.
        self.kill_sessions = kill_sessions

    def close(self):
        self.end_test()
        self.internal.close()

    def end_test(self):
        """Ends the test's sessions (aborting open transactions), then closes its clients."""
        for s in self.sessions:
            s.end_session()
        self.sessions.clear()
        for c in self.clients:
            c.close()
        self.clients.clear()

    def create_entities(self, spec, entities=None):
        return self.add_entities(spec.get("createEntities", []), {})

    def add_entities(self, definitions, entities):
        for ent in definitions:
            (kind, body), = ent.items()
            eid = body["id"]
            if eid in entities:
                raise ValueError("duplicate entity %s" % eid)
            if kind == "client":
                unknown = set(body) - {"id", "observeEvents", "uriOptions", "useMultipleMongoses",
                                       "ignoreCommandMonitoringEvents"}
                if unknown:
                    raise UnsupportedArgument("client options %s" % sorted(unknown))
                client = pymongo.MongoClient(self.uri, serverSelectionTimeoutMS=10000,
                                             **body.get("uriOptions", {}))
                self.clients.append(client)
                entities[eid] = client
            elif kind == "database":
                entities[eid] = entities[body["client"]].get_database(
                    body["databaseName"], **_collection_options(body.get("databaseOptions", {})))
            elif kind == "collection":
                entities[eid] = entities[body["database"]].get_collection(
                    body["collectionName"], **_collection_options(body.get("collectionOptions", {})))
            elif kind == "session":
                session = entities[body["client"]].start_session(
                    **_session_options(body.get("sessionOptions", {})))
                self.sessions.append(session)
                entities[eid] = session
            else:
                raise UnsupportedArgument("entity type %s" % kind)
        return entities

    def load_initial_data(self, spec):
        for data in spec.get("initialData", []):
            db = self.internal.get_database(data["databaseName"])
            db.drop_collection(data["collectionName"])
            coll = db.get_collection(data["collectionName"],
                                     write_concern=WriteConcern(w="majority"))
            if data["documents"]:
                coll.insert_many(data["documents"])
            else:
                db.create_collection(data["collectionName"], **data.get("createOptions", {}))

    def run_test(self, spec, test):
        if self.kill_sessions:
            self.internal.admin.command("killAllSessions", [])
        entities = self.create_entities(spec)
        for i, op in enumerate(test["operations"]):
            try:
                self.run_operation(op, entities)
            except AssertionError as e:
                raise AssertionError("operation %d (%s on %s): %s" % (i, op["name"], op["object"], e))
        for data in test.get("outcome", []):
            coll = self.internal.get_database(data["databaseName"]).get_collection(
                data["collectionName"], read_preference=ReadPreference.PRIMARY,
                read_concern=ReadConcern("local"))
            actual = list(coll.find({}, sort=[("_id", 1)]))
            try:
                exact_equal(data["documents"], actual)
            except MatchError as e:
                raise AssertionError("outcome of %s.%s:\n  expected %r\n  actual   %r\n  (%s)" % (
                    data["databaseName"], data["collectionName"], data["documents"], actual, e))

    def run_operation(self, op, entities):
        if op["object"] == "testRunner":
            self.run_special_operation(op["name"], dict(op.get("arguments", {})), entities)
            return
        target = entities[op["object"]]
        args = dict(op.get("arguments", {}))
        if "session" in args:
            target = _SessionBound(target, entities[args.pop("session")])
        error = result = None
        try:
            if isinstance(target, _SessionBound):
                kind = target.target
            else:
                kind = target
            result = _hooks_run(target, op["name"], args)
            if result is not _NOT_RUN:
                pass
            elif isinstance(kind, pymongo.collection.Collection):
                result = run_collection_op(target, op["name"], args)
            elif isinstance(kind, pymongo.database.Database):
                result = run_database_op(target, op["name"], args)
            elif isinstance(kind, ClientSession):
                result = run_session_op(target, op["name"], args)
            else:
                raise UnsupportedArgument("operations on %s" % type(target).__name__)
        except UnsupportedArgument:
            raise
        except Exception as e:  # the driver's or the server's error, checked below
            error = e
        if op.get("ignoreResultAndError"):
            return
        if "expectError" in op:
            if error is None:
                raise AssertionError("expected an error %r, got result %r" % (op["expectError"], result))
            check_error(op["expectError"], error, entities)
            return
        if error is not None:
            raise AssertionError("unexpected error %s: %s%s" % (
                type(error).__name__, error,
                " details=%r" % (error.details,) if getattr(error, "details", None) else ""))
        if "expectResult" in op:
            root = op["name"] in ("findOneAndUpdate", "findOneAndReplace", "findOneAndDelete",
                                  "findOne", "runCommand") \
                or not isinstance(op["expectResult"], list)
            exp = op["expectResult"]
            try:
                if op["name"] in ("find", "aggregate", "listIndexes") and isinstance(exp, list):
                    if not isinstance(result, list) or len(result) != len(exp):
                        raise MatchError("expected %d documents %r, got %r" % (len(exp), exp, result))
                    for j, (e, a) in enumerate(zip(exp, result)):
                        match(e, a, str(j), True, entities)
                else:
                    match(exp, result, "", root and isinstance(exp, dict), entities)
            except MatchError as e:
                raise AssertionError("result mismatch: %s\n  expected %r\n  actual   %r" % (e, exp, result))
        if "saveResultAsEntity" in op:
            entities[op["saveResultAsEntity"]] = result


    def run_special_operation(self, name, args, entities):
        """The testRunner operations in SPECIAL_OPERATIONS."""
        if name == "createEntities":
            _take(args, "entities")
            self.add_entities(args["entities"], entities)
            return
        if name == "assertSessionTransactionState":
            _take(args, "session", "state")
            state = entities[args["session"]]._transaction.state
            want = _TXN_STATES[args["state"]]
            assert state in want, "session %s: expected transaction state %s, got %s" % (
                args["session"], args["state"], state)
            return
        db = self.internal.get_database(args["databaseName"])
        if name in ("assertCollectionExists", "assertCollectionNotExists"):
            _take(args, "databaseName", "collectionName")
            names = db.list_collection_names()
            exists = args["collectionName"] in names
            assert exists == (name == "assertCollectionExists"), \
                "%s: collection %s.%s (existing: %r)" % (name, args["databaseName"],
                                                         args["collectionName"], names)
            return
        if name in ("assertIndexExists", "assertIndexNotExists"):
            _take(args, "databaseName", "collectionName", "indexName")
            names = [ix["name"] for ix in db.get_collection(args["collectionName"]).list_indexes()]
            exists = args["indexName"] in names
            assert exists == (name == "assertIndexExists"), \
                "%s: index %s on %s.%s (existing: %r)" % (name, args["indexName"],
                                                          args["databaseName"],
                                                          args["collectionName"], names)
            return
        raise UnsupportedArgument("special operation %s" % name)


_NOT_RUN = object()


def _hooks_run(target, name, args):
    for hook in OPERATION_HOOKS:
        r = hook.run(target, name, args)
        if r is not hook.NOT_MINE:
            return r
    return _NOT_RUN


_TXN_STATES = {}
if pymongo is not None:
    _TXN_STATES = {
        "none": (_TxnState.NONE,),
        "starting": (_TxnState.STARTING,),
        "in_progress": (_TxnState.IN_PROGRESS,),
        "committed": (_TxnState.COMMITTED, _TxnState.COMMITTED_EMPTY),
        "aborted": (_TxnState.ABORTED,),
    }

# pymongo methods that take a `session` keyword.
_SESSION_METHODS = {
    "insert_one", "insert_many", "update_one", "update_many", "replace_one", "delete_one",
    "delete_many", "bulk_write", "find", "find_one", "aggregate", "count_documents", "count",
    "estimated_document_count", "distinct", "find_one_and_delete", "find_one_and_update",
    "find_one_and_replace", "create_index", "create_indexes", "drop_index", "list_indexes",
    "drop", "command", "create_collection", "drop_collection", "list_collection_names",
}


class _SessionBound:
    """A collection or database whose session-taking methods get `session`."""

    def __init__(self, target, session):
        self.target = target
        self.session = session

    def __getattr__(self, name):
        attr = getattr(self.target, name)
        if name in _SESSION_METHODS:
            return functools.partial(attr, session=self.session)
        if name == "database":
            return _SessionBound(attr, self.session)
        return attr


def _session_options(opts):
    unknown = set(opts) - {"causalConsistency", "defaultTransactionOptions"}
    if unknown:
        raise UnsupportedArgument("session options %s" % sorted(unknown))
    kw = {}
    if "causalConsistency" in opts:
        kw["causal_consistency"] = opts["causalConsistency"]
    if "defaultTransactionOptions" in opts:
        kw["default_transaction_options"] = TransactionOptions(
            **_transaction_options(opts["defaultTransactionOptions"]))
    return kw


def _transaction_options(opts):
    _take(opts, "readConcern", "writeConcern", "readPreference", "maxCommitTimeMS")
    kw = {}
    if "readConcern" in opts:
        kw["read_concern"] = _read_concern(opts["readConcern"])
    if "writeConcern" in opts:
        kw["write_concern"] = _write_concern(opts["writeConcern"])
    if "readPreference" in opts:
        kw["read_preference"] = _read_preference(opts["readPreference"])
    if "maxCommitTimeMS" in opts:
        kw["max_commit_time_ms"] = opts["maxCommitTimeMS"]
    return kw


def run_session_op(session, name, args):
    if name == "startTransaction":
        session.start_transaction(**_transaction_options(args))
        return None
    if name == "commitTransaction":
        _take(args)
        session.commit_transaction()
        return None
    if name == "abortTransaction":
        _take(args)
        session.abort_transaction()
        return None
    if name == "endSession":
        _take(args)
        session.end_session()
        return None
    raise UnsupportedArgument("session operation %s" % name)


def _server_error_parts(error):
    """(codes, codeNames, messages) from a server error, aggregated for bulk errors."""
    codes, names, msgs = [], [], [str(error)]
    if isinstance(error, perr.BulkWriteError):
        details = error.details or {}
        for we in details.get("writeErrors", []) + details.get("writeConcernErrors", []):
            codes.append(we.get("code"))
            if "codeName" in we:
                names.append(we["codeName"])
            msgs.append(we.get("errmsg", ""))
    elif isinstance(error, perr.OperationFailure):
        codes.append(error.code)
        details = error.details or {}
        if "codeName" in details:
            names.append(details["codeName"])
        msgs.append(details.get("errmsg", ""))
        wce = details.get("writeConcernError")
        if wce:
            codes.append(wce.get("code"))
            msgs.append(wce.get("errmsg", ""))
    return codes, names, msgs


def _is_client_error(error):
    if isinstance(error, perr.OperationFailure):
        return False
    return True


def _is_driver_validation_error(error):
    """A ValueError raised by pymongo's own argument checks (e.g. "update only
    works with $ operators"): a client-side error in the spec's sense, unlike a
    ValueError raised by this runner, or by a builtin inside pymongo (pure-Python
    pymongo's "max() arg is an empty sequence" is a failure, not a check)."""
    if not isinstance(error, ValueError):
        return False
    tb = error.__traceback__
    while tb.tb_next is not None:
        tb = tb.tb_next
    filename = tb.tb_frame.f_code.co_filename
    if "/pymongo/" not in filename and "/bson/" not in filename:
        return False
    return linecache.getline(filename, tb.tb_lineno).lstrip().startswith("raise ")


def check_error(expected, error, entities):
    desc = "%s: %s" % (type(error).__name__, error)
    if isinstance(error, perr.OperationFailure):
        desc += " details=%r" % (error.details,)
    unknown = set(expected) - {"isError", "isClientError", "errorContains", "errorCode",
                               "errorCodeName", "errorResponse", "expectResult",
                               "errorLabelsContain", "errorLabelsOmit"}
    if unknown:
        raise UnsupportedArgument("expectError keys %s" % sorted(unknown))
    if "isClientError" in expected:
        if expected["isClientError"] != _is_client_error(error):
            raise AssertionError("expected isClientError=%s, got %s" % (expected["isClientError"], desc))
    if not expected.get("isClientError") and not isinstance(error, perr.PyMongoError) \
            and not _is_driver_validation_error(error):
        # A Python exception (TypeError, KeyError, ...) is a runner or driver
        # defect, never the expected server error.
        raise AssertionError("operation raised %s" % desc)
    codes, names, msgs = _server_error_parts(error)
    if "errorCode" in expected and expected["errorCode"] not in codes:
        raise AssertionError("expected error code %s, got %s" % (expected["errorCode"], desc))
    if "errorCodeName" in expected:
        want = expected["errorCodeName"].lower()
        if want not in [n.lower() for n in names]:
            raise AssertionError("expected codeName %s, got %s" % (expected["errorCodeName"], desc))
    if "errorContains" in expected:
        want = expected["errorContains"].lower()
        if not any(want in (m or "").lower() for m in msgs):
            raise AssertionError("expected message containing %r, got %s" % (expected["errorContains"], desc))
    if "errorResponse" in expected:
        if not isinstance(error, perr.OperationFailure) or isinstance(error, perr.BulkWriteError):
            raise AssertionError("expected a server response %r, got %s" % (expected["errorResponse"], desc))
        try:
            match(expected["errorResponse"], error.details or {}, "", True, entities)
        except MatchError as e:
            raise AssertionError("errorResponse mismatch: %s; got %s" % (e, desc))
    for label in expected.get("errorLabelsContain", []):
        if not getattr(error, "has_error_label", lambda l: False)(label):
            raise AssertionError("expected error label %s, got %s" % (label, desc))
    for label in expected.get("errorLabelsOmit", []):
        if getattr(error, "has_error_label", lambda l: False)(label):
            raise AssertionError("unexpected error label %s in %s" % (label, desc))
    if "expectResult" in expected:
        if not isinstance(error, perr.BulkWriteError):
            raise AssertionError("expected a partial result, got %s" % desc)
        try:
            match(expected["expectResult"], _bulk_error_result(error.details), "", True, entities)
        except MatchError as e:
            raise AssertionError("partial result mismatch: %s; got %s" % (e, desc))




# ---------------------------------------------------------------------------
# What each suite's pytest module and stand-alone skip listing share

def missing_specs_message(spec_dir, label):
    return ("%s spec files not found at %s (they live outside the repository, "
            "in ../shared/specs, and are never copied into it)" % (label, spec_dir))


def params(spec_dir):
    """pytest params (file name, test index), each skipped with its reason if need be."""
    if not Path(spec_dir).is_dir() or pytest is None:
        return []
    out = []
    for fname, idx, desc, reason in collect_cases(spec_dir):
        marks = [pytest.mark.skip(reason=reason)] if reason else []
        out.append(pytest.param(fname, idx, marks=marks, id="%s: %s" % (fname[:-5], desc)))
    return out


def skip_summary_lines(spec_dir, label):
    counts = collections.Counter(reason for _, _, _, reason in collect_cases(spec_dir) if reason)
    lines = ["", "%s unified spec tests skipped, by reason (%d):" % (label, sum(counts.values()))]
    for reason, n in counts.most_common():
        lines.append("  %4d  %s" % (n, reason))
    return lines


def write_skip_summary(request, spec_dir, label):
    """Prints how many spec tests were skipped for each reason (after a module)."""
    lines = skip_summary_lines(spec_dir, label)
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    capman = request.config.pluginmanager.get_plugin("capturemanager")
    if reporter is None or capman is None:
        return
    with capman.global_and_fixture_disabled():
        for line in lines:
            reporter.write_line(line)


class SpecCache:
    """Parsed spec files of one suite, loaded once each."""

    def __init__(self, spec_dir):
        self.spec_dir = Path(spec_dir)
        self.specs = {}

    def get(self, fname):
        if fname not in self.specs:
            self.specs[fname] = load_spec_file(self.spec_dir / fname)
        return self.specs[fname]


def run_spec_test(runner, cache, fname, index):
    """Runs test `index` of spec file `fname` (the body of each suite's test)."""
    spec = cache.get(fname)
    test = spec["tests"][index]
    runner.load_initial_data(spec)
    try:
        runner.run_test(spec, test)
    finally:
        runner.end_test()


def define_spec_module(ns, name, spec_dir, label, kill_sessions=False):
    """Fills a suite module's namespace `ns` (its globals()) with what pytest
    needs to run the spec files under `spec_dir`: a module-scoped `runner`
    fixture, a skip summary printed after the module, and `test_<name>_spec`
    parametrized over every test of every file. Skips the whole module when
    the specs or pymongo are missing."""
    if not Path(spec_dir).is_dir():
        pytest.skip(missing_specs_message(spec_dir, label), allow_module_level=True)
    if pymongo is None:
        pytest.skip("pymongo is not installed", allow_module_level=True)

    @pytest.fixture(scope="module")
    def runner(atomdb_module):
        host, port = atomdb_module
        r = Runner(host, port, kill_sessions=kill_sessions)
        yield r
        r.close()

    @pytest.fixture(scope="module", autouse=True)
    def _skip_summary(request):
        """After the module, prints how many spec tests were skipped for each reason."""
        yield
        write_skip_summary(request, spec_dir, label)

    cache = SpecCache(spec_dir)

    @pytest.mark.parametrize("fname,index", params(spec_dir))
    def test_spec(runner, fname, index):
        run_spec_test(runner, cache, fname, index)

    test_spec.__name__ = "test_%s_spec" % name
    ns["runner"] = runner
    ns["_skip_summary"] = _skip_summary
    ns[test_spec.__name__] = test_spec


def main(spec_dir):
    """Prints every skipped test grouped by reason (no server needed)."""
    if not Path(spec_dir).is_dir():
        print("no spec files at %s" % spec_dir)
        return 1
    by_reason = collections.defaultdict(list)
    total = 0
    for fname, _idx, desc, reason in collect_cases(spec_dir):
        total += 1
        if reason:
            by_reason[reason].append("%s: %s" % (fname, desc))
    for reason, tests in sorted(by_reason.items(), key=lambda kv: -len(kv[1])):
        print("%d  %s" % (len(tests), reason))
        for t in tests:
            print("      " + t)
    print("%d tests, %d skipped, %d run" % (total, sum(map(len, by_reason.values())),
                                           total - sum(map(len, by_reason.values()))))
    return 0
