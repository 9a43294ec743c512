"""DBRef field names and '$'-prefixed field names (issue 19) through
pymongo, after the documentation's examples ("Database References" and
"Dollar-Prefixed Field Names") and mongod's jstests/core/
field_name_validation.js: $ref/$id/$db in query paths and under
$elemMatch (where a DBRef field makes the object form, as mongod), and
'$'-prefixed names where mongod 7 stores them (inserts, an upsert's insert,
nested fields, pipeline updates) and refuses them (a stored document's
top level: DollarPrefixedFieldName 52)."""

import pytest
from bson.dbref import DBRef
from bson.objectid import ObjectId
from bson.son import SON
from pymongo.errors import OperationFailure, WriteError

from atomdb_clients import per_test_client


client = per_test_client("")


CREATOR = ObjectId("5126bc054aed4daf9e2ab772")


def test_dbref_fields_in_query_paths(client):
    db = client.dbref_paths
    # the documentation's example: a DBRef with $db and an extra field
    db.posts.insert_one({"_id": 1, "creator": DBRef("creators", CREATOR, "users", extraField="anything")})
    db.posts.insert_one({"_id": 2, "creator": DBRef("creators", ObjectId(), "users")})
    assert [d["_id"] for d in db.posts.find({"creator.$id": CREATOR})] == [1]
    assert sorted(d["_id"] for d in db.posts.find({"creator.$ref": "creators"})) == [1, 2]
    assert [d["_id"] for d in db.posts.find({"creator.$db": "users", "creator.extraField": "anything"})] == [1]
    # a whole DBRef is a value to compare, not operators
    assert [d["_id"] for d in db.posts.find({"creator": DBRef("creators", CREATOR, "users",
                                                               extraField="anything")})] == [1]
    # an incomplete DBRef outside $elemMatch is an unknown operator, as mongod
    with pytest.raises(OperationFailure) as ei:
        list(db.posts.find({"creator": {"$id": CREATOR}}))
    assert ei.value.code == 2 and "$id" in str(ei.value)


def test_elem_match_over_an_array_of_dbrefs(client):
    db = client.dbref_elem
    a, b, c = ObjectId(), ObjectId(), ObjectId()
    db.users.insert_many([
        {"_id": 1, "roles": [DBRef("role", a), DBRef("role", b)]},
        {"_id": 2, "roles": [DBRef("role", c)]},
        {"_id": 3, "roles": [DBRef("group", a, weight=2)]},
    ])
    got = lambda f: sorted(d["_id"] for d in db.users.find(f))
    assert got({"roles": {"$elemMatch": {"$id": a}}}) == [1, 3], "$elemMatch: {$id} matches by id"
    assert got({"roles": {"$elemMatch": {"$ref": "role", "$id": a}}}) == [1]
    assert got({"roles": {"$elemMatch": {"$id": {"$in": [b, c]}}}}) == [], \
        "as mongod's parseDBRef, $id takes a value to equal, not operators"
    assert got({"roles": {"$elemMatch": {"$ref": "group", "weight": {"$gt": 1}}}}) == [3], \
        "a DBRef field with a plain field: the object form"
    assert got({"roles": {"$elemMatch": {"$db": "nope"}}}) == []
    assert got({"roles.$id": a}) == [1, 3]
    # a pull by the same condition
    db.users.update_one({"_id": 1}, {"$pull": {"roles": {"$id": b}}})
    assert db.users.find_one({"_id": 1})["roles"] == [DBRef("role", a)]


def raw(db, cmd):
    r = db.command(cmd)
    if r.get("writeErrors"):
        we = r["writeErrors"][0]
        raise WriteError(we["errmsg"], we["code"], we)
    return r


def upd(coll, q, u, upsert=False):
    return SON([("update", coll), ("updates", [{"q": q, "u": u, "upsert": upsert}])])


def test_dollar_prefixed_fields_where_mongod_7_stores_them(client):
    db = client.dollar_ok
    # inserts: top-level and nested, reserved words too (the documentation's examples)
    raw(db, SON([("insert", "sales"), ("documents", [{"_id": 1, "$price": 50.0, "quantity": 30}])]))
    raw(db, SON([("insert", "books"), ("documents", [
        {"_id": 1, "$id": "h1961-01", "location": {"$db": "novels", "$ref": "2007042768", "$inc": True}}])]))
    # an upsert that inserts is validated as an insert
    r = raw(db, upd("expenses", {"date": "2021-07-07"}, {"$set": {"phone": 25.17, "$hotel": 320.10}}, True))
    assert len(r["upserted"]) == 1
    doc = db.expenses.find_one()
    assert doc["$hotel"] == 320.10 and doc["phone"] == 25.17 and doc["date"] == "2021-07-07"
    # ... and when it matches a stored document, the same update fails (52), writing nothing
    with pytest.raises(WriteError) as ei:
        raw(db, upd("expenses", {"date": "2021-07-07"}, {"$set": {"phone": 1, "$hotel": 1}}, True))
    assert ei.value.code == 52 and "$hotel" in str(ei.value)
    assert db.expenses.find_one()["phone"] == 25.17
    # a stored '$' field does not stop updates of other fields
    raw(db, upd("sales", {"_id": 1}, {"$set": {"quantity": 31}}))
    assert db.sales.find_one() == {"_id": 1, "$price": 50.0, "quantity": 31}
    # nested '$' fields through operators and replacements; top-level through a pipeline
    raw(db, upd("sales", {"_id": 1}, {"$set": {"a.$b": 1, "c": {"$d": 2}}}))
    raw(db, upd("housing", {"_id": "E123"}, {"_id": "E123", "address": {"$number": 123, "$street": "Elm Road"}}, True))
    raw(db, upd("housing", {"_id": "E123"}, [{"$replaceWith": {"$setField": {
        "field": {"$literal": "$rooms"}, "input": "$$ROOT", "value": {"br": 2, "bath": 1}}}}]))
    assert db.housing.find_one()["$rooms"] == {"br": 2, "bath": 1}
    assert db.sales.find_one()["a"] == {"$b": 1} and db.sales.find_one()["c"] == {"$d": 2}


def test_dollar_prefixed_fields_mongod_7_refuses(client):
    db = client.dollar_refused
    raw(db, SON([("insert", "t"), ("documents", [{"_id": 1, "x": 1, "$rooms": {"br": 2}}])]))
    for u in ({"$set": {"$z": 1}}, {"$inc": {"$z": 1}}, {"$set": {"$rooms.br": 3}}):
        with pytest.raises(WriteError) as ei:
            raw(db, upd("t", {"_id": 1}, u))
        assert ei.value.code == 52, u
    # a replacement cannot carry one at its top level
    with pytest.raises(WriteError) as ei:
        raw(db, upd("t", {"_id": 1}, {"_id": 1, "$rooms": {"br": 3}}))
    assert ei.value.code == 52
    with pytest.raises(WriteError) as ei:
        raw(db, upd("t", {"_id": 1}, {"$c": 1}))
    assert ei.value.code == 9, "a replacement starting with '$' is an unknown modifier"
    # nor may _id hold one, upsert or not
    with pytest.raises(WriteError) as ei:
        raw(db, upd("t", {"a.b": 1}, {"$setOnInsert": {"_id": {"$invalid": 1}}}, True))
    assert ei.value.code == 52
    assert db.t.find_one() == {"_id": 1, "x": 1, "$rooms": {"br": 2}}, "nothing was written"
    assert db.t.count_documents({}) == 1
