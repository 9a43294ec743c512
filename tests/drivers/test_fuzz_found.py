"""What the libFuzzer targets found (issue 23, docs/reliability.md), replayed
against a real server: each request must get mongod's answer, and the
server must not crash or print a sanitizer report (the fixture's teardown
checks; scripts/test.sh runs this file against build-asan/ too)."""

import struct

import bson
from bson.son import SON
from pymongo import MongoClient

import wireproto as w


def client(server):
    return MongoClient(server.host, server.port, serverSelectionTimeoutMS=10000)


def test_distinct_on_a_missing_collection_is_empty(atomdb):
    # fuzz_command: qsort(NULL, 0) in distinct (undefined behaviour)
    with client(atomdb) as c:
        assert c.test.nope.distinct("a") == []


def test_out_and_merge_from_a_missing_collection_write_nothing(atomdb):
    # fuzz_command: pointer arithmetic on an empty record list
    with client(atomdb) as c:
        assert list(c.test.nope.aggregate([{"$out": "e"}])) == []
        assert list(c.test.nope.aggregate([{"$skip": 3}, {"$limit": 1}])) == []
        assert c.test.e.count_documents({}) == 0


def test_a_view_over_a_missing_collection_is_empty(atomdb):
    # fuzz_command: the same in view.c
    with client(atomdb) as c:
        c.test.create_collection("v", viewOn="nope", pipeline=[{"$match": {"a": 1}}])
        assert list(c.test.v.find().sort("a", 1).skip(1)) == []


def test_get_field_of_a_missing_field_is_null_inside_an_array(atomdb):
    # fuzz_matcher: $getField left its result unset (garbage) for a missing field
    with client(atomdb) as c:
        c.test.g.insert_one({"_id": 1, "a": 1})
        got = list(c.test.g.aggregate([{"$project": {"r": [{"$getField": "a.b"}]}}]))
        assert got == [{"_id": 1, "r": [None]}]
        assert c.test.g.count_documents({"$expr": {"$eq": [[{"$getField": "zz"}], [None]]}}) == 1


def test_a_nested_document_without_its_nul_terminator_is_invalid_bson(atomdb):
    # fuzz_matcher: libbson 1.23 takes the last byte of a nested document as
    # its end whatever it holds; atomdb now answers InvalidBSON as mongod
    body = bson.encode(SON([("find", "c"), ("filter", {"a": {"b": 2}}), ("$db", "test")]))
    inner = bson.encode({"b": 2})
    at = body.index(inner)
    bad = bytearray(body)
    bad[at + len(inner) - 1] = 0x07
    frame = w.frame(w.OP_MSG, struct.pack("<I", 0) + b"\x00" + bytes(bad))
    sock = w.connect(atomdb.host, atomdb.port)
    try:
        w.send(sock, frame)
        kind, reply = w.outcome(sock)
        assert kind == "reply", "an error reply, not a closed connection"
        assert reply.doc["ok"] == 0 and reply.doc["code"] == 22, reply.doc
        assert w.command(sock, SON([("ping", 1), ("$db", "admin")]))["ok"] == 1
    finally:
        sock.close()


def test_an_op_query_namespace_that_is_not_utf8_is_invalid_namespace(atomdb):
    # fuzz_frame: the namespace became a $db string that was not UTF-8
    sock = w.connect(atomdb.host, atomdb.port)
    try:
        body = (struct.pack("<i", 0) + b"tes\xf4.$cmd\x00" + struct.pack("<ii", 0, -1)
                + bson.encode({"ping": 1}))
        w.send(sock, w.frame(w.OP_QUERY, body))
        kind, reply = w.outcome(sock)
        assert kind == "reply"
        assert reply.doc["ok"] == 0 and reply.doc["code"] == 73, reply.doc
    finally:
        sock.close()


def test_a_failing_expression_inside_an_object_expression_is_an_error(atomdb):
    # fuzz_matcher: an argument of an object/array expression whose
    # evaluation failed was freed uninitialised ($bsonSize of a number)
    with client(atomdb) as c:
        c.test.f.insert_one({"_id": 1})
        for filt in ({"$expr": {"leq": [{"$bsonSize": 5}, 1]}},
                     {"$expr": {"$eq": [[{"$bsonSize": 5}], 1]}}):
            try:
                list(c.test.f.find(filt))
                raise AssertionError("expected an error for %r" % filt)
            except Exception as e:  # OperationFailure: $bsonSize of a number
                assert getattr(e, "code", None) is not None, e
        assert c.test.f.count_documents({}) == 1


def test_a_find_that_yields_over_an_unchanged_store_returns_every_document(atomdb):
    # fuzz_command: a scan that yielded looked for the changes made since
    # its snapshot, and with none ever recorded took them at NULL + 0
    # (undefined behaviour, reported by clang's UBSan: the fuzz regression
    # command/find-yields-over-an-unchanged-store)
    with client(atomdb) as c:
        c.admin.command("setParameter", 1, atomdbYieldPeriodMicros=1)
        c.test.y.insert_many([{"_id": i, "a": i % 7} for i in range(3000)])
        assert len(list(c.test.y.find({"a": {"$gte": 0}}))) == 3000
        assert c.test.y.count_documents({"a": 3}) == len([i for i in range(3000) if i % 7 == 3])
        assert c.admin.command("ping")["ok"] == 1
