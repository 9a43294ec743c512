"""$bitsAllSet / $bitsAnySet / $bitsAllClear / $bitsAnyClear through pymongo:
numeric masks, position arrays and BinData masks, mongod's results (the
documentation's examples) and its argument errors."""

import pytest
from bson.binary import Binary
from pymongo import MongoClient
from pymongo.errors import OperationFailure


@pytest.fixture
def coll(atomdb):
    c = MongoClient(atomdb.uri())
    t = c.t.bits
    # mongod's documentation collection: a = 54 (110110), -12, BinData 20 / 53
    t.insert_many([{"_id": 1, "a": 54, "binaryValueofA": "00110110"},
                   {"_id": 2, "a": 20, "binaryValueofA": "00010100"},
                   {"_id": 3, "a": 20.0, "binaryValueofA": "00010100"},
                   {"_id": 4, "a": Binary(b"\x14"), "binaryValueofA": "00010100"},
                   {"_id": 5, "a": -12},
                   {"_id": 6, "a": 1.5},
                   {"_id": 7, "a": "x"}])
    yield t
    c.close()


def ids(cur):
    return sorted(d["_id"] for d in cur)


def test_positions_masks_and_bindata_select_as_mongod(coll):
    assert ids(coll.find({"a": {"$bitsAllSet": [1, 5]}})) == [1], "bits 1 and 5 of 54"
    assert ids(coll.find({"a": {"$bitsAllSet": 50}})) == [1]
    assert ids(coll.find({"a": {"$bitsAllSet": Binary(b"\x30")}})) == [1, 5], "-12 has bits 4 and 5"
    assert ids(coll.find({"a": {"$bitsAnySet": [1, 5]}})) == [1, 5], \
        "-12 is ...110100 in two's complement: bit 5 set"
    assert ids(coll.find({"a": {"$bitsAllClear": [1, 5]}})) == [2, 3, 4]
    assert ids(coll.find({"a": {"$bitsAnyClear": 35}})) == [1, 2, 3, 4, 5]
    assert ids(coll.find({"a": {"$bitsAllSet": [100]}})) == [5], \
        "positions past bit 63 read a negative number's sign"
    assert ids(coll.find({"a": {"$bitsAllClear": []}})) == [1, 2, 3, 4, 5], \
        "an empty position list: every integral number or BinData passes allClear"
    assert ids(coll.find({"a": {"$not": {"$bitsAnySet": 4}}})) == [6, 7]


def test_bad_arguments_fail_as_mongod(coll):
    cases = [({"$bitsAllSet": 1.5}, 9), ({"$bitsAllSet": -1}, 9),
             ({"$bitsAnySet": "x"}, 2), ({"$bitsAllClear": [-1]}, 2),
             ({"$bitsAnyClear": ["a"]}, 2), ({"$bitsAllSet": [1.5]}, 2)]
    for op, code in cases:
        with pytest.raises(OperationFailure) as e:
            list(coll.find({"a": op}))
        assert e.value.code == code, "%r fails with %d" % (op, code)
