"""Decimal128 stays exact through every arithmetic path, through pymongo: the
update operators ($inc, $mul), the arithmetic expressions ($add, $subtract,
$multiply, $divide) and the $sum/$avg accumulators, as mongod computes them.
A double anywhere in these results would be the binary floating-point error
Decimal128 exists to avoid (0.1 + 0.2 = 0.30000000000000004)."""

import pytest
from bson.decimal128 import Decimal128

from atomdb_clients import fresh_collection

D = Decimal128


@pytest.fixture
def coll(client, request):
    return fresh_collection(client.test_decimal, request)


def agg_one(coll, expr):
    """Evaluates one expression over the collection's single document."""
    out = list(coll.aggregate([{"$project": {"_id": 0, "r": expr}}]))
    assert len(out) == 1, "one document in, one out"
    return out[0]["r"]


def assert_decimal(value, text, what):
    assert isinstance(value, Decimal128), "%s is a Decimal128, got %r" % (what, value)
    assert str(value) == text, "%s is exactly %s, got %s" % (what, text, value)


def test_inc_by_decimal_three_times_is_exactly_0_3(coll):
    coll.insert_one({"_id": 1, "balance": D("0")})
    for _ in range(3):
        coll.update_one({"_id": 1}, {"$inc": {"balance": D("0.1")}})
    assert_decimal(coll.find_one({"_id": 1})["balance"], "0.3", "$inc 0.1 three times")
    assert coll.count_documents({"balance": D("0.3")}) == 1, "the stored 0.3 matches a query for 0.3"


def test_mul_decimal_is_exact(coll):
    coll.insert_one({"_id": 1, "price": D("19.99")})
    coll.update_one({"_id": 1}, {"$mul": {"price": D("3")}})
    assert_decimal(coll.find_one({"_id": 1})["price"], "59.97", "$mul 19.99 by 3")


def test_add_of_decimals_is_exact(coll):
    coll.insert_one({"a": D("0.1"), "b": D("0.2")})
    assert_decimal(agg_one(coll, {"$add": ["$a", "$b"]}), "0.3", "$add 0.1 0.2")


def test_subtract_of_decimals_is_exact(coll):
    coll.insert_one({"a": D("0.3"), "b": D("0.1")})
    assert_decimal(agg_one(coll, {"$subtract": ["$a", "$b"]}), "0.2", "$subtract 0.3 0.1")


def test_multiply_of_decimals_is_exact(coll):
    coll.insert_one({"a": D("0.1"), "b": D("0.1"), "c": D("0.1")})
    assert_decimal(agg_one(coll, {"$multiply": ["$a", "$b", "$c"]}), "0.001", "$multiply 0.1^3")


def test_divide_of_decimals_is_exact(coll):
    coll.insert_one({"a": D("0.3"), "b": D("0.1"), "c": D("1"), "d": D("3")})
    assert_decimal(agg_one(coll, {"$divide": ["$a", "$b"]}), "3", "$divide 0.3 by 0.1")
    assert_decimal(agg_one(coll, {"$divide": ["$c", "$d"]}),
                   "0.3333333333333333333333333333333333", "$divide 1 by 3 (34 digits)")


def test_divide_by_decimal_zero_is_16608(coll):
    from pymongo.errors import OperationFailure
    coll.insert_one({"a": D("1"), "z": D("0.00")})
    with pytest.raises(OperationFailure) as e:
        agg_one(coll, {"$divide": ["$a", "$z"]})
    assert e.value.code == 16608, "division by a decimal zero is mongod's 16608"


def test_sum_and_avg_accumulators_over_decimals_are_exact(coll):
    coll.insert_many([{"g": 1, "v": D("0.1")}, {"g": 1, "v": D("0.2")}, {"g": 1, "v": D("0.3")}])
    out = list(coll.aggregate([{"$group": {"_id": "$g", "s": {"$sum": "$v"}, "a": {"$avg": "$v"}}}]))
    assert len(out) == 1, "one group"
    assert_decimal(out[0]["s"], "0.6", "$group $sum")
    assert_decimal(out[0]["a"], "0.2", "$group $avg")


def test_sum_and_avg_expressions_over_decimals_are_exact(coll):
    coll.insert_one({"v": [D("0.1"), D("0.2"), D("0.3")]})
    assert_decimal(agg_one(coll, {"$sum": "$v"}), "0.6", "$sum over an array")
    assert_decimal(agg_one(coll, {"$avg": "$v"}), "0.2", "$avg over an array")


def test_sum_mixes_other_numbers_into_the_decimal_total(coll):
    coll.insert_many([{"v": 1}, {"v": D("0.5")}, {"v": 0.25}])
    out = list(coll.aggregate([{"$group": {"_id": None, "s": {"$sum": "$v"}}}]))
    assert_decimal(out[0]["s"], "1.75", "$sum of 1, Decimal128 0.5 and 0.25")


def test_integers_and_doubles_keep_their_types(coll):
    coll.insert_one({"i": 2147483647, "d": 0.1, "e": 0.2})
    assert agg_one(coll, {"$add": ["$i", 1]}) == 2147483648, "int32 overflow becomes a long"
    assert agg_one(coll, {"$add": ["$d", "$e"]}) == 0.30000000000000004, "doubles stay binary"
