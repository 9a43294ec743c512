"""$jsonSchema (issue 20) through pymongo: collection validators built from
the MongoDB documentation's examples (the students collection and the
errInfo mongod 7 returns for it), the query operator, validationLevel
moderate, validationAction warn (log id 20294), bypassDocumentValidation,
and the keywords mongod refuses, with its codes and messages."""

import json

import pytest
from bson.int64 import Int64
from bson.son import SON
from pymongo.errors import WriteError

from atomdb_clients import fails, per_test_client


client = per_test_client("")


# The validator of "Specify JSON Schema Validation" in MongoDB's manual.
STUDENTS = {
    "bsonType": "object",
    "title": "Student Object Validation",
    "required": ["address", "major", "name", "year"],
    "properties": {
        "name": {"bsonType": "string", "description": "'name' must be a string and is required"},
        "year": {"bsonType": "int", "minimum": 2017, "maximum": 3017,
                 "description": "'year' must be an integer in [ 2017, 3017 ] and is required"},
        "gpa": {"bsonType": ["double"], "description": "'gpa' must be a double if the field exists"},
    },
}


def students(client, **opts):
    db = client.school
    cmd = SON([("create", "students"), ("validator", {"$jsonSchema": STUDENTS})])
    for k, v in opts.items():
        cmd[k] = v
    db.command(cmd)
    return db.students


def test_students_documentation_example_errinfo(client):
    coll = students(client)
    with pytest.raises(WriteError) as ei:
        coll.insert_one({"_id": 1, "name": "Alice", "year": 2019, "major": "History",
                         "gpa": 3, "address": {"city": "NYC", "street": "33rd Street"}})
    e = ei.value
    assert e.code == 121, e
    # the errInfo the manual shows for this insert (mongod 7)
    assert e.details["errInfo"] == {
        "failingDocumentId": 1,
        "details": {
            "operatorName": "$jsonSchema",
            "title": "Student Object Validation",
            "schemaRulesNotSatisfied": [{
                "operatorName": "properties",
                "propertiesNotSatisfied": [{
                    "propertyName": "gpa",
                    "description": "'gpa' must be a double if the field exists",
                    "details": [{
                        "operatorName": "bsonType",
                        "specifiedAs": {"bsonType": ["double"]},
                        "reason": "type did not match",
                        "consideredValue": 3,
                        "consideredType": "int",
                    }],
                }],
            }],
        },
    }, json.dumps(e.details["errInfo"], default=str)
    coll.insert_one({"_id": 2, "name": "Alice", "year": 2019, "major": "History",
                     "gpa": 3.0, "address": {"city": "NYC", "street": "33rd Street"}})
    assert coll.count_documents({}) == 1


def test_missing_required_and_out_of_range_year(client):
    coll = students(client)
    with pytest.raises(WriteError) as ei:
        coll.insert_one({"_id": 3, "name": "Bob", "year": 2000})
    rules = ei.value.details["errInfo"]["details"]["schemaRulesNotSatisfied"]
    assert rules[0]["operatorName"] == "properties"
    year = rules[0]["propertiesNotSatisfied"][0]
    assert year["propertyName"] == "year"
    assert year["details"] == [{"operatorName": "minimum", "specifiedAs": {"minimum": 2017},
                                "reason": "comparison failed", "consideredValue": 2000}]
    assert rules[1] == {"operatorName": "required",
                        "specifiedAs": {"required": ["address", "major", "name", "year"]},
                        "missingProperties": ["address", "major"]}
    assert client.school.students.count_documents({}) == 0


def test_update_checked_and_nothing_written(client):
    coll = students(client)
    good = {"_id": 1, "name": "A", "year": 2020, "major": "M", "address": {}}
    coll.insert_one(good)
    with pytest.raises(WriteError) as ei:
        coll.update_one({"_id": 1}, {"$set": {"name": 5}})
    assert ei.value.code == 121
    assert coll.find_one({"_id": 1})["name"] == "A"


def test_query_operator_matches_documents(client):
    """The manual's "Query with $jsonSchema" inventory example."""
    inv = client.q.inventory
    inv.insert_many([
        {"item": "journal", "qty": 25, "size": {"h": 14, "w": 21, "uom": "cm"}, "instock": True},
        {"item": "notebook", "qty": 50, "size": {"h": 8.5, "w": 11, "uom": "in"}, "instock": True},
        {"item": "paper", "qty": 100, "size": {"h": 8.5, "w": 11, "uom": "in"}, "instock": 1},
        {"item": "planner", "qty": 75, "size": {"h": 22.85, "w": 30, "uom": "cm"}, "instock": 1},
        {"item": "postcard", "qty": 45, "size": {"h": 10, "w": 15.25, "uom": "cm"}, "instock": True},
        {"item": "apple", "qty": 45, "status": "A", "instock": True},
        {"item": "pears", "qty": 50, "status": "A", "instock": True},
    ])
    schema = {"required": ["item", "qty", "instock"],
              "properties": {"item": {"bsonType": "string"},
                             "qty": {"bsonType": "int"},
                             "size": {"bsonType": "object", "required": ["uom"],
                                      "properties": {"uom": {"bsonType": "string"},
                                                     "h": {"bsonType": "double"},
                                                     "w": {"bsonType": "double"}}},
                             "instock": {"bsonType": "bool"}}}
    got = sorted(d["item"] for d in inv.find({"$jsonSchema": schema}))
    # journal/postcard have int h or w; paper/planner an int instock
    assert got == ["apple", "pears"], got
    nor = sorted(d["item"] for d in inv.find({"$nor": [{"$jsonSchema": schema}]}))
    assert nor == ["journal", "notebook", "paper", "planner", "postcard"], nor
    assert inv.count_documents({"$jsonSchema": schema, "qty": {"$gt": 45}}) == 1


def test_validator_mixed_with_query_operators(client):
    db = client.mixed
    db.command(SON([("create", "c"), ("validator", {
        "$jsonSchema": {"required": ["a"]}, "b": {"$gt": 5}})]))
    db.c.insert_one({"a": 1, "b": 6})
    with pytest.raises(WriteError) as ei:
        db.c.insert_one({"_id": 9, "b": 2})
    d = ei.value.details["errInfo"]["details"]
    assert d["operatorName"] == "$and"
    assert [c["index"] for c in d["clausesNotSatisfied"]] == [0, 1]
    assert d["clausesNotSatisfied"][0]["details"]["operatorName"] == "$jsonSchema"
    assert d["clausesNotSatisfied"][1]["details"] == {
        "operatorName": "$gt", "specifiedAs": {"b": {"$gt": 5}},
        "reason": "comparison failed", "consideredValue": 2}


def test_validation_level_moderate_lets_invalid_documents_stay(client):
    db = client.mod
    db.c.insert_many([{"_id": 1, "name": 5}, {"_id": 2, "name": "ok"}])
    db.command(SON([("collMod", "c"),
                    ("validator", {"$jsonSchema": {"properties": {"name": {"bsonType": "string"}}}}),
                    ("validationLevel", "moderate")]))
    db.c.update_one({"_id": 1}, {"$set": {"name": 6}})  # was invalid: allowed
    with pytest.raises(WriteError):
        db.c.update_one({"_id": 2}, {"$set": {"name": 7}})  # was valid: checked
    with pytest.raises(WriteError):
        db.c.insert_one({"_id": 3, "name": 1})
    db.command(SON([("collMod", "c"), ("validationLevel", "strict")]))
    with pytest.raises(WriteError):
        db.c.update_one({"_id": 1}, {"$set": {"name": 8}})
    assert db.c.find_one({"_id": 1})["name"] == 6


def test_validation_action_warn_logs_and_writes(client, atomdb):
    db = client.warn
    db.command(SON([("create", "c"), ("validator", {"$jsonSchema": {"required": ["x"]}}),
                    ("validationAction", "warn")]))
    db.c.insert_one({"_id": "w1"})
    assert db.c.count_documents({}) == 1
    lines = [json.loads(l) for l in atomdb.log().splitlines() if '"id":20294' in l]
    assert lines, "no log line 20294"
    attr = lines[-1]["attr"]
    assert attr["namespace"] == "warn.c" and attr["document"]["_id"] == "w1"
    assert lines[-1]["msg"] == "Document would fail validation"


def test_bypass_document_validation(client):
    coll = students(client)
    coll.insert_one({"_id": 1}, bypass_document_validation=True)
    coll.update_one({"_id": 1}, {"$set": {"year": 1}}, bypass_document_validation=True)
    assert coll.find_one({"_id": 1}) == {"_id": 1, "year": 1}
    with pytest.raises(WriteError):
        coll.insert_one({"_id": 2})


def test_keyword_errors_as_mongod(client):
    db = client.bad
    cases = [
        ({"foo": 1}, 9, "Unknown $jsonSchema keyword: foo"),
        ({"$ref": "#/x"}, 9, "$jsonSchema keyword '$ref' is not currently supported"),
        ({"format": "email"}, 9, "$jsonSchema keyword 'format' is not currently supported"),
        ({"type": "integer"}, 9, "$jsonSchema type 'integer' is not currently supported."),
        ({"type": "object", "bsonType": "object"}, 9,
         "Cannot specify both $jsonSchema keywords 'type' and 'bsonType'"),
        ({"bsonType": "strin"}, 2, "Unknown type name alias: strin"),
        ({"type": "int"}, 2, "Unknown type name alias: int"),
        ({"required": []}, 9, "$jsonSchema keyword 'required' cannot be an empty array"),
        ({"minLength": -1}, 9, "Expected a positive number in: minLength: -1"),
        ({"minimum": "a"}, 14, "$jsonSchema keyword 'minimum' must be a number"),
        ({"exclusiveMinimum": True}, 9,
         "$jsonSchema keyword 'minimum' must be a present if exclusiveMinimum is present"),
        ({"enum": [1, 1.0]}, 9, "$jsonSchema keyword 'enum' array cannot contain duplicate values."),
        ({"anyOf": []}, 2, "$jsonSchema keyword 'anyOf' must be a non-empty array"),
        ({"multipleOf": 0}, 9, "$jsonSchema keyword 'multipleOf' must have a positive value"),
        ({"properties": {"a": 1}}, 14, "Nested schema for $jsonSchema property 'a' must be an object"),
        ({"encrypt": {}}, 238, None),
    ]
    for schema, code, msg in cases:
        e = fails(code, lambda: db.command(SON([("create", "c"),
                                                 ("validator", {"$jsonSchema": schema})])),
                  repr(schema))
        if msg:
            assert msg in str(e), (schema, str(e))
        e = fails(code, lambda: list(db.c.find({"$jsonSchema": schema})), repr(schema))
    assert "c" not in db.list_collection_names()
    fails(14, lambda: list(db.c.find({"$jsonSchema": 1})), "non-object $jsonSchema")


def test_keywords_through_queries(client):
    c = client.kw.c
    c.insert_many([
        {"_id": 1, "s": "héllo", "n": 10, "a": [1, 2, 3], "o": {"p": 1}},
        {"_id": 2, "s": "hi", "n": 7.5, "a": [1, 1], "o": {"p": 1, "q": 2}},
        {"_id": 3, "s": 5, "n": Int64(-3), "a": [], "extra1": True},
    ])

    def ids(schema):
        return sorted(d["_id"] for d in c.find({"$jsonSchema": schema}))

    assert ids({"properties": {"s": {"minLength": 5}}}) == [1, 3]  # 5 code points; 5 not a string
    assert ids({"properties": {"s": {"maxLength": 2}}}) == [2, 3]
    assert ids({"properties": {"s": {"type": "string", "pattern": "^h.l"}}}) == [1]
    assert ids({"properties": {"n": {"multipleOf": 2.5}}}) == [1, 2]
    assert ids({"properties": {"n": {"minimum": 7.5, "exclusiveMinimum": True}}}) == [1]
    assert ids({"properties": {"n": {"bsonType": "long"}}}) == [3]
    assert ids({"properties": {"n": {"type": "number"}}}) == [1, 2, 3]
    assert ids({"properties": {"a": {"uniqueItems": True}}}) == [1, 3]
    assert ids({"properties": {"a": {"minItems": 1, "maxItems": 2}}}) == [2]
    assert ids({"properties": {"a": {"items": {"minimum": 2}}}}) == [3]
    assert ids({"properties": {"a": {"items": [{"enum": [1]}], "additionalItems": False}}}) == [3]
    assert ids({"properties": {"a": {"items": [{}], "additionalItems": {"maximum": 1}}}}) == [2, 3]
    assert ids({"properties": {"o": {"minProperties": 2}}}) == [2, 3]
    assert ids({"properties": {"o": {"additionalProperties": False, "properties": {"p": {}}}}}) == [1, 3]
    assert ids({"patternProperties": {"^extra": {"enum": [False]}}}) == [1, 2]
    assert ids({"additionalProperties": {"bsonType": ["int", "string", "double", "long",
                                                      "array", "object"]}}) == [1, 2]
    assert ids({"properties": {"o": {"enum": [{"q": 2, "p": 1}]}}}) == [2, 3]  # fields in any order
    assert ids({"dependencies": {"extra1": ["n"], "o": {"required": ["s"]}}}) == [1, 2, 3]
    assert ids({"dependencies": {"o": ["extra1"]}}) == [3]
    assert ids({"anyOf": [{"required": ["extra1"]}, {"properties": {"n": {"maximum": 8}}}]}) == [2, 3]
    assert ids({"oneOf": [{"required": ["extra1"]}, {"properties": {"n": {"maximum": 8}}}]}) == [2]
    assert ids({"allOf": [{"required": ["o"]}, {"properties": {"n": {"maximum": 8}}}]}) == [2]
    assert ids({"not": {"required": ["extra1"]}}) == [1, 2]
    assert ids({"bsonType": "array"}) == []  # documents are objects
    assert ids({"title": "t", "description": "d"}) == [1, 2, 3]


def test_details_of_common_keywords(client):
    db = client.det
    schema = {"properties": {
        "tags": {"bsonType": "array", "uniqueItems": True, "maxItems": 2},
        "status": {"enum": ["A", "B"]},
        "code": {"bsonType": "string", "pattern": "^[A-Z]+$"},
    }, "additionalProperties": False}
    db.command(SON([("create", "c"), ("validator", {"$jsonSchema": schema})]))
    with pytest.raises(WriteError) as ei:
        db.c.insert_one({"_id": 1, "tags": [1, 1, 2], "status": "C", "code": "ab", "x": 0})
    rules = ei.value.details["errInfo"]["details"]["schemaRulesNotSatisfied"]
    props = {p["propertyName"]: p["details"] for p in rules[0]["propertiesNotSatisfied"]}
    assert props["tags"] == [
        {"operatorName": "maxItems", "specifiedAs": {"maxItems": 2},
         "reason": "array did not match specified length", "consideredValue": [1, 1, 2],
         "numberOfItems": 3},
        {"operatorName": "uniqueItems", "specifiedAs": {"uniqueItems": True},
         "reason": "found a duplicate item", "consideredValue": [1, 1, 2], "duplicatedValue": 1}]
    assert props["status"] == [{"operatorName": "enum", "specifiedAs": {"enum": ["A", "B"]},
                                "reason": "value was not found in enum", "consideredValue": "C"}]
    assert props["code"] == [{"operatorName": "pattern", "specifiedAs": {"pattern": "^[A-Z]+$"},
                              "reason": "regular expression did not match",
                              "consideredValue": "ab"}]
    assert rules[1] == {"operatorName": "additionalProperties",
                        "specifiedAs": {"additionalProperties": False},
                        "additionalProperties": ["_id", "x"]}


def test_large_error_is_sent_without_values(client):
    db = client.big
    db.command(SON([("create", "c"), ("validator", {"$jsonSchema": {
        "properties": {"s": {"maxLength": 1}}}})]))
    with pytest.raises(WriteError) as ei:
        db.c.insert_one({"_id": 1, "s": "x" * 5000})
    d = ei.value.details["errInfo"]
    assert d["failingDocumentId"] == 1
    rule = d["details"]["schemaRulesNotSatisfied"][0]["propertiesNotSatisfied"][0]["details"][0]
    assert rule == {"operatorName": "maxLength",
                    "reason": "specified string length was not satisfied"}


def test_validator_shown_by_list_collections(client):
    students(client, validationLevel="moderate")
    info = client.school.command("listCollections", filter={"name": "students"})
    opts = info["cursor"]["firstBatch"][0]["options"]
    assert opts["validator"] == {"$jsonSchema": STUDENTS} and opts["validationLevel"] == "moderate"


def test_every_write_path_is_validated(client):
    db = client.paths
    db.command(SON([("create", "c"), ("validator", {"$jsonSchema": {
        "required": ["n"], "properties": {"n": {"bsonType": "int", "minimum": 0}}}})]))
    c = db.c
    c.insert_one({"_id": 1, "n": 1})
    from pymongo.errors import BulkWriteError
    with pytest.raises(BulkWriteError) as ei:
        c.insert_many([{"_id": 2, "n": 2}, {"_id": 3, "n": -1}, {"_id": 4, "n": 4}], ordered=False)
    errs = ei.value.details["writeErrors"]
    assert [(e["index"], e["code"]) for e in errs] == [(1, 121)]
    assert errs[0]["errInfo"]["failingDocumentId"] == 3
    assert errs[0]["errInfo"]["details"]["operatorName"] == "$jsonSchema"
    fails(121, lambda: c.find_one_and_update({"_id": 1}, {"$inc": {"n": -5}}), "findAndModify")
    fails(121, lambda: c.replace_one({"_id": 1}, {"x": 1}), "replace")
    fails(121, lambda: c.update_many({}, {"$unset": {"n": ""}}), "update many")
    fails(121, lambda: c.update_one({"_id": 9}, {"$set": {"n": "s"}}, upsert=True), "upsert")
    assert sorted((d["_id"], d["n"]) for d in c.find()) == [(1, 1), (2, 2), (4, 4)]


def test_schema_in_aggregation_match_and_count(client):
    c = client.agg.c
    c.insert_many([{"_id": i, "v": i if i % 2 else str(i)} for i in range(6)])
    got = list(c.aggregate([{"$match": {"$jsonSchema": {"properties": {"v": {"bsonType": "int"}}}}},
                            {"$sort": {"_id": 1}}]))
    assert [d["_id"] for d in got] == [1, 3, 5]
    assert c.count_documents({"$jsonSchema": {"properties": {"v": {"type": "string"}}}}) == 3
    assert c.count_documents({"$or": [{"_id": 0}, {"$jsonSchema": {"required": ["w"]}}]}) == 1


def test_wide_schemas_and_long_arrays_stay_fast(client):
    """A field-by-field lookup of 30,000 properties in a 30,000-field
    document (or pairwise uniqueItems over 100,000 items) would hold the
    server for many seconds; sorted lookups take a fraction of one."""
    import time
    db = client.wide
    props = {"f%d" % i: {"bsonType": "int"} for i in range(30000)}
    props["_id"] = {}
    doc = {"f%d" % i: i for i in range(30000)}
    doc["_id"] = 1
    t = time.monotonic()
    db.command(SON([("create", "w"), ("validator", {"$jsonSchema": {
        "properties": props, "required": sorted(props), "additionalProperties": False,
        "dependencies": {"f1": sorted(props)}}})]))
    db.w.insert_one(doc)
    db.u.insert_one({"a": list(range(100000))})
    n = db.u.count_documents({"$jsonSchema": {"properties": {"a": {"uniqueItems": True}}}})
    assert n == 1
    assert time.monotonic() - t < 5, "wide validation took %.1f s" % (time.monotonic() - t)


def test_validator_that_rejects_every_id_is_warned_about(client, atomdb):
    """mongod logs 3216000 when additionalProperties is false and neither
    required nor a patternProperties pattern allows _id."""
    db = client.idwarn

    def warnings():
        return sum('"id":3216000' in l for l in atomdb.log().splitlines())

    db.command(SON([("create", "ok1"), ("validator", {"$jsonSchema": {
        "required": ["_id"], "properties": {"_id": {}}, "additionalProperties": False}})]))
    db.command(SON([("create", "ok2"), ("validator", {"$jsonSchema": {
        "patternProperties": {"^_.*": {}}, "additionalProperties": False}})]))
    assert warnings() == 0
    db.command(SON([("create", "bad"), ("validator", {"$jsonSchema": {
        "properties": {"a": {}}, "additionalProperties": False}})]))
    assert warnings() == 1
    # as mongod, a pattern must match "_id" whole to count ("^_" does not)
    db.command(SON([("create", "bad2"), ("validator", {"$jsonSchema": {
        "patternProperties": {"^_": {}}, "additionalProperties": False}})]))
    assert warnings() == 2
    with pytest.raises(WriteError):
        db.bad.insert_one({"a": 1})  # _id is always there, so always additional
