"""Index names in createIndexes, as mongod 7.0's validateIndexSpec
(src/mongo/db/catalog/index_key_validate.cpp): the server makes up no name,
a spec without one is FailedToParse 9 for every kind of index; drivers and
shells send the name they generate from the key pattern, which the server
keeps as given."""

import pytest
from bson import SON
from pymongo import TEXT, GEOSPHERE, HASHED
from pymongo.errors import OperationFailure


@pytest.fixture
def db(client):
    client.drop_database("ixnames")
    yield client.ixnames
    client.drop_database("ixnames")


def create(db, spec, coll="t"):
    return db.command(SON([("createIndexes", coll), ("indexes", [spec])]))


def refused(db, spec):
    with pytest.raises(OperationFailure) as e:
        create(db, spec)
    return e.value


@pytest.mark.parametrize("key,shown", [
    (SON([("a", 1)]), "{ key: { a: 1 } }"),
    (SON([("a", 1), ("b", -1)]), "{ key: { a: 1, b: -1 } }"),
    (SON([("subject", "text")]), '{ key: { subject: "text" } }'),
    (SON([("a", 1), ("subject", "text")]), '{ key: { a: 1, subject: "text" } }'),
    (SON([("loc", "2dsphere")]), '{ key: { loc: "2dsphere" } }'),
    (SON([("loc", "2d")]), '{ key: { loc: "2d" } }'),
    (SON([("h", "hashed")]), '{ key: { h: "hashed" } }'),
    (SON([("$**", 1)]), '{ key: { $**: 1 } }'),
    (SON([("a.$**", 1)]), '{ key: { a.$**: 1 } }'),
    # a compound wildcard index: mongod 7.0 checks the name before building it
    (SON([("a.$**", 1), ("b", 1)]), '{ key: { a.$**: 1, b: 1 } }'),
])
def test_a_spec_without_a_name_is_refused_for_every_kind(db, key, shown):
    e = refused(db, {"key": key})
    assert e.code == 9, e
    assert e.details["codeName"] == "FailedToParse", e.details
    assert e.details["errmsg"] == (
        "Error in specification %s :: caused by :: The 'name' field is a required property "
        "of an index specification" % shown), e.details
    # as mongod, the specs are checked before the collection is made
    assert db.list_collection_names() == [], "nothing was made"
    db.t.insert_one({"a": 1})
    e = refused(db, {"key": key})
    assert e.code == 9, e
    assert [ix["name"] for ix in db.t.list_indexes()] == ["_id_"]


def test_a_bad_key_is_reported_before_the_missing_name(db):
    e = refused(db, {"key": {"a": 0}})
    assert e.code == 67, e
    e = refused(db, {"unique": True})
    assert e.code == 9 and "The 'key' field is a required property" in str(e), e
    assert "{ unique: true }" in str(e), e


def test_name_must_be_a_non_empty_string(db):
    e = refused(db, {"key": {"a": 1}, "name": 5})
    assert e.code == 14 and "The field 'name' must be a string, but got int" in str(e), e
    e = refused(db, {"key": {"a": 1}, "name": ""})
    assert e.code == 67, e
    assert e.details["errmsg"] == ('Error in specification { key: { a: 1 }, name: "", v: 2 } '
                                   ":: caused by :: index name cannot be empty"), e.details


def test_compound_wildcard_with_a_name_is_refused_as_not_implemented(db):
    e = refused(db, {"key": SON([("a.$**", 1), ("b", 1)]), "name": "a.$**_1_b_1"})
    assert e.code == 238, e
    assert "compound wildcard indexes" in str(e), e


def test_driver_generated_names_are_kept_for_every_kind(db):
    """pymongo names an index from all its key fields and values joined
    with '_' (the drivers' index-management spec); the server keeps it."""
    t = db.t
    made = [
        t.create_index([("a", 1), ("b", -1)]),
        t.create_index([("subject", TEXT), ("c", 1)]),
        t.create_index([("loc", GEOSPHERE)]),
        t.create_index([("h", HASHED)]),
        t.create_index([("w.$**", 1)]),
        db.u.create_index([("$**", 1)]),
        db.v.create_index([("g", "2d")]),
    ]
    assert made == ["a_1_b_-1", "subject_text_c_1", "loc_2dsphere", "h_hashed", "w.$**_1",
                    "$**_1", "g_2d"], made
    names = [ix["name"] for ix in t.list_indexes()]
    assert names == ["_id_", "a_1_b_-1", "subject_text_c_1", "loc_2dsphere", "h_hashed",
                     "w.$**_1"], names
    assert [ix["name"] for ix in db.u.list_indexes()] == ["_id_", "$**_1"]
    assert [ix["name"] for ix in db.v.list_indexes()] == ["_id_", "g_2d"]


def test_a_refused_spec_or_an_empty_list_makes_no_collection(db):
    with pytest.raises(OperationFailure) as e:
        db.command(SON([("createIndexes", "t"), ("indexes", [])]))
    assert e.value.code == 2 and "Must specify at least one index" in str(e.value), e.value
    e = refused(db, {"key": {"a": 1}, "name": "a_1", "bogus": 1})
    assert e.code == 197, e
    with pytest.raises(OperationFailure) as e:
        db.command(SON([("createIndexes", "t"), ("indexes", [
            {"key": {"a": 1}, "name": "a_1"}, {"key": {"b": 1}}])]))
    assert e.value.code == 9, e.value
    assert db.list_collection_names() == [], "nothing was made"
