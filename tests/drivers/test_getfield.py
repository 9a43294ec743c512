"""$getField, $setField and $unsetField through pymongo's aggregate: what
each gives for every kind of `input` (a document, null, undefined, missing,
a number, a string, an array) and the parse errors, as mongod 7.0's
ExpressionGetField/ExpressionSetField (src/mongo/db/pipeline/expression.cpp)
and its jstests expression_get_field.js / expression_set_field.js."""

import struct

import pytest
from bson import SON
from bson.raw_bson import RawBSONDocument
from pymongo.errors import OperationFailure

from atomdb_clients import fresh_collection

MISSING = "MISSING"


@pytest.fixture
def coll(client, request):
    c = fresh_collection(client.getfield, request)
    # dotted and dollar names, which pymongo's insert_one refuses, as a raw command
    c.database.command(SON([("insert", c.name), ("documents", [
        {"_id": 0, "n": 5, "s": "abc", "arr": [{"k": 1}], "nul": None,
         "d": SON([("k", "v"), ("a.b", 1), ("$x", 2)])}])]))
    yield c
    c.drop()


def project(coll, expr):
    out = list(coll.aggregate([{"$project": {"_id": 0, "r": expr}}]))
    return out[0].get("r", MISSING)


def code_of(coll, expr):
    with pytest.raises(OperationFailure) as e:
        project(coll, expr)
    return e.value.code


def test_doc_example_dotted_field_name(client):
    """The $getField page's inventory example: a field named "price.usd"."""
    c = client.getfield.inventory
    c.drop()
    c.database.command(SON([("insert", "inventory"), ("documents", [
        {"_id": 1, "item": "sweatshirt", "price.usd": 45.99, "qty": 300},
        {"_id": 2, "item": "winter coat", "price.usd": 499.99, "qty": 200},
        {"_id": 3, "item": "sun dress", "price.usd": 199.99, "qty": 250},
        {"_id": 4, "item": "leather boots", "price.usd": 249.99, "qty": 300},
        {"_id": 5, "item": "bow tie", "price.usd": 9.99, "qty": 180},
    ])]))
    got = list(c.aggregate([{"$match": {"$expr": {"$gt": [{"$getField": "price.usd"}, 200]}}}]))
    assert [d["_id"] for d in got] == [2, 4], got
    c.drop()


@pytest.mark.parametrize("inp,want", [
    ("$d", "v"),                               # a document with the field
    ({"$literal": {"other": 1}}, MISSING),     # a document without it
    (None, None),                              # null: null
    ({"$literal": None}, None),
    ("$nul", None),
    ("$nope", MISSING),                        # missing: missing (not null)
    ({"$getField": "nope"}, MISSING),          # jstest: nested $getField of a missing field
    ("$n", MISSING),                           # a number: missing, no error
    (True, MISSING),                           # jstest: {field: "a", input: true}
    ("$s", MISSING),                           # a string
    ("$arr", MISSING),                         # an array (not traversed)
])
def test_getfield_input_kinds(coll, inp, want):
    assert project(coll, {"$getField": {"field": "k", "input": inp}}) == want


def test_getfield_undefined_input_is_null(client):
    c = client.getfield.undef
    c.drop()
    # pymongo cannot encode undefined: {_id: 1, u: undefined} as raw BSON
    body = b"\x10_id\x00" + struct.pack("<i", 1) + b"\x06u\x00"
    c.insert_one(RawBSONDocument(struct.pack("<i", len(body) + 5) + body + b"\x00"))
    got = list(c.aggregate([{"$project": {"_id": 0, "r": {"$getField": {"field": "k",
                                                                         "input": "$u"}}}}]))
    assert got == [{"r": None}], got
    c.drop()


def test_getfield_dotted_and_dollar_names_are_literal(coll):
    assert project(coll, {"$getField": {"field": "a.b", "input": "$d"}}) == 1
    assert project(coll, {"$getField": {"field": {"$literal": "$x"}, "input": "$d"}}) == 2
    assert project(coll, {"$getField": {"field": "d.k", "input": "$$ROOT"}}) == MISSING


def test_getfield_missing_result_drops_the_field_but_is_null_in_an_array(coll):
    assert project(coll, {"$getField": {"field": "k", "input": "$n"}}) == MISSING
    assert project(coll, [{"$getField": {"field": "k", "input": "$n"}}]) == [None]


@pytest.mark.parametrize("arg,code", [
    ({"field": "a"}, 3041703),                 # no input: only the shorthand reads $$CURRENT
    ({"input": {"a": "b"}}, 3041702),
    ({}, 3041702),
    ({"field": "a", "input": {}, "unknown": True}, 3041701),
    ({"field": "$a", "input": {}}, 5654600),
    ({"field": {"$concat": ["a", "b"]}, "input": {}}, 5654601),
    ({"field": True, "input": {}}, 5654602),
    (5, 5654602),
    ({"$add": [2, 3]}, 5654601),
])
def test_getfield_parse_errors(coll, arg, code):
    assert code_of(coll, {"$getField": arg}) == code


@pytest.mark.parametrize("inp,want", [
    ("$d", {"k": "v", "a.b": 1, "$x": 2, "z": 1}),
    (None, None),
    ("$nope", None),                           # nullish, missing included: null
])
def test_setfield_input_kinds(coll, inp, want):
    assert project(coll, {"$setField": {"field": "z", "input": inp, "value": 1}}) == want


@pytest.mark.parametrize("op,arg", [
    ("$setField", {"field": "a", "input": "$n", "value": 1}),
    ("$setField", {"field": "a", "input": "$s", "value": 1}),
    ("$setField", {"field": "a", "input": "$arr", "value": 1}),
    ("$unsetField", {"field": "a", "input": True}),
])
def test_setfield_non_document_input_is_4161105(coll, op, arg):
    with pytest.raises(OperationFailure) as e:
        project(coll, {op: arg})
    assert e.value.code == 4161105
    # mongod's kExpressionName: "$setField" for $unsetField too
    assert "$setField requires 'input' to evaluate to type Object" in str(e.value), e.value


@pytest.mark.parametrize("op,arg,code", [
    ("$setField", {"$add": [2, 3]}, 4161101),  # an operator-like object is an unknown argument
    ("$unsetField", {"$add": [2, 3]}, 4161101),
    ("$setField", "foo", 4161100),
    ("$unsetField", 5, 4161100),
    ("$setField", {"field": "a", "value": 1}, 4161109),
    ("$unsetField", {"field": "a"}, 4161109),
    ("$setField", {"field": "a", "input": {}}, 4161103),
    ("$unsetField", {"field": "a", "value": 1}, 4161101),
])
def test_setfield_parse_errors(coll, op, arg, code):
    assert code_of(coll, {op: arg}) == code


def test_unsetfield_removes_a_dollar_field(coll):
    assert project(coll, {"$unsetField": {"field": {"$literal": "$x"}, "input": "$d"}}) == \
        {"k": "v", "a.b": 1}
