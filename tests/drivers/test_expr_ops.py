"""The aggregation expression operators and $group accumulators added for
mongod 7 parity (sets, $switch, trigonometry and $log, strings and regexes,
$zip/$sortArray/$firstN & co., conversions, sizes, bitwise, and the
accumulators $stdDev*, $mergeObjects, $firstN & co., $top/$bottom(N),
$median/$percentile) through pymongo's aggregate, with the outputs MongoDB's
documentation gives for its examples and mongod's error codes."""

import datetime
import pytest
from bson import SON, Binary, Int64, ObjectId, Regex
from bson.decimal128 import Decimal128
from pymongo.errors import OperationFailure

from atomdb_clients import fresh_collection


@pytest.fixture
def coll(client, request):
    c = fresh_collection(client.exprops, request)
    yield c
    c.drop()


def project(coll, doc, expr):
    """Evaluates `expr` against `doc` through $project."""
    coll.delete_many({})
    coll.insert_one(doc)
    out = list(coll.aggregate([{"$project": {"_id": 0, "r": expr}}]))
    return out[0].get("r", "MISSING")


def code_of(coll, doc, expr):
    with pytest.raises(OperationFailure) as e:
        project(coll, doc, expr)
    return e.value.code


# ---- sets (the $setEquals & co. pages' flowers/experiments examples) ----

def test_set_operators_doc_examples(coll):
    doc = {"A": ["red", "blue"], "B": ["blue", "red", "blue"], "C": ["red", "blue", "green"]}
    assert project(coll, doc, {"$setEquals": ["$A", "$B"]}) is True
    assert project(coll, doc, {"$setIsSubset": ["$A", "$C"]}) is True
    assert project(coll, doc, {"$setIntersection": ["$A", "$C"]}) == ["blue", "red"]
    assert project(coll, doc, {"$setUnion": ["$A", "$C"]}) == ["blue", "green", "red"]
    assert project(coll, doc, {"$setDifference": ["$C", "$A"]}) == ["green"]
    assert project(coll, doc, {"$anyElementTrue": [[None, False, 0]]}) is False
    assert project(coll, doc, {"$allElementsTrue": [[True, 1, "someString"]]}) is True
    assert project(coll, doc, {"$setUnion": ["$A", "$nope"]}) is None


@pytest.mark.parametrize("expr,code", [
    ({"$setEquals": [["a"], "a"]}, 17044),
    ({"$setIntersection": [["a"], 1]}, 17047),
    ({"$setUnion": [1]}, 17043),
    ({"$setDifference": ["a", ["a"]]}, 17048),
    ({"$setDifference": [["a"], "a"]}, 17049),
    ({"$setIsSubset": [None, ["a"]]}, 17046),
    ({"$allElementsTrue": [1]}, 17040),
    ({"$anyElementTrue": [1]}, 17041),
])
def test_set_operator_errors(coll, expr, code):
    assert code_of(coll, {}, expr) == code


# ---- $switch (the $switch page's grades example) ----

def test_switch_doc_example(coll):
    avg = {"$avg": "$scores"}
    sw = {"$switch": {"branches": [
        {"case": {"$gte": [avg, 90]}, "then": "Doing great!"},
        {"case": {"$and": [{"$gte": [avg, 80]}, {"$lt": [avg, 90]}]}, "then": "Doing pretty well."},
        {"case": {"$lt": [avg, 80]}, "then": "Needs improvement."}],
        "default": "No scores found."}}
    assert project(coll, {"scores": [87, 86, 78]}, sw) == "Doing pretty well."
    assert project(coll, {"scores": [71, 64, 72]}, sw) == "Needs improvement."
    assert project(coll, {"scores": [91, 84, 97]}, sw) == "Doing great!"
    assert code_of(coll, {}, {"$switch": {"branches": [{"case": False, "then": 1}]}}) == 40066
    assert code_of(coll, {}, {"$switch": {"branches": []}}) == 40068


# ---- math ----

def test_trig_and_log(coll):
    assert project(coll, {"angle_a": 53.1301023541559}, {"$round": [{"$sin": {"$degreesToRadians": "$angle_a"}}, 4]}) == 0.8
    assert project(coll, {"x": 1}, {"$atan2": ["$x", "$x"]}) == pytest.approx(0.7853981633974483)
    assert project(coll, {}, {"$radiansToDegrees": {"$acos": -1}}) == pytest.approx(180.0)
    assert project(coll, {}, {"$log": [100, 10]}) == 2.0
    # a Decimal128 stays Decimal128 and exact to 34 digits
    assert project(coll, {}, {"$degreesToRadians": Decimal128("180")}) == \
        Decimal128("3.141592653589793238462643383279503")
    assert project(coll, {}, {"$sin": None}) is None
    assert code_of(coll, {}, {"$acos": 2}) == 50989
    assert code_of(coll, {}, {"$sin": "x"}) == 28765
    assert code_of(coll, {}, {"$log": [-1, 10]}) == 28758
    assert code_of(coll, {}, {"$log": [10, 1]}) == 28759


def test_bitwise_and_stddev_expressions(coll):
    assert project(coll, {"a": 0, "b": 127}, {"$bitAnd": ["$a", "$b"]}) == 0
    assert project(coll, {}, {"$bitOr": [12, 7]}) == 15
    assert project(coll, {}, {"$bitXor": [12, 7]}) == 11
    assert project(coll, {}, {"$bitNot": 0}) == -1
    assert code_of(coll, {}, {"$bitAnd": [1.5, 1]}) == 14
    assert project(coll, {"s": [1, 2, 3, 4]}, {"$stdDevPop": "$s"}) == pytest.approx(1.118033988749895)
    assert project(coll, {"s": [1, 2, 3, 4]}, {"$stdDevSamp": "$s"}) == pytest.approx(1.2909944487358056)


# ---- strings ----

def test_string_operators_doc_examples(coll):
    assert project(coll, {"item": "cafétéria"}, {"$indexOfBytes": ["$item", "é"]}) == 3
    assert project(coll, {"item": "cafétéria"}, {"$indexOfCP": ["$item", "t"]}) == 4
    assert project(coll, {"item": "foo.bar.fi"}, {"$indexOfBytes": ["$item", ".", 5]}) == 7
    assert project(coll, {"item": "寿司sushi"}, {"$substrCP": ["$item", 0, 3]}) == "寿司s"
    assert project(coll, {"d": " \n good  bye \t "}, {"$trim": {"input": "$d"}}) == "good  bye"
    assert project(coll, {"d": "ggggoodbyeeeee"}, {"$ltrim": {"input": "$d", "chars": "ge"}}) == "oodbyeeeee"
    assert project(coll, {"d": "    ggggoodbyeeeee"}, {"$rtrim": {"input": "$d", "chars": "ge "}}) == "    ggggoodby"
    doc = {"item": "blue paint with blue paintbrush"}
    spec = {"input": "$item", "find": "blue paint", "replacement": "red paint"}
    assert project(coll, doc, {"$replaceOne": spec}) == "red paint with blue paintbrush"
    assert project(coll, doc, {"$replaceAll": spec}) == "red paint with red paintbrush"
    assert code_of(coll, {}, {"$indexOfBytes": ["vanilla", "ll", -1]}) == 40097
    assert code_of(coll, {}, {"$trim": {"input": 5}}) == 50699
    assert code_of(coll, {}, {"$replaceOne": {"input": "a", "find": 1, "replacement": "b"}}) == 51745
    assert code_of(coll, {}, {"$substrCP": ["abc", -1, 1]}) == 34454


def test_regex_operators_doc_examples(coll):
    doc = {"description": "Single LINE description."}
    assert project(coll, doc, {"$regexMatch": {"input": "$description", "regex": "line"}}) is False
    assert project(coll, doc, {"$regexMatch": {"input": "$description", "regex": Regex("line", "i")}}) is True
    assert project(coll, doc, {"$regexFind": {"input": "$description", "regex": "line", "options": "i"}}) == \
        {"match": "LINE", "idx": 7, "captures": []}
    got = project(coll, {"c": "cafétéria café"}, {"$regexFindAll": {"input": "$c", "regex": "(é)"}})
    assert [m["idx"] for m in got] == [3, 5, 13]
    assert got[0]["captures"] == ["é"]
    assert project(coll, {}, {"$regexFindAll": {"input": None, "regex": "a"}}) == []
    assert code_of(coll, {}, {"$regexMatch": {"input": 1, "regex": "a"}}) == 51104
    assert code_of(coll, {}, {"$regexMatch": {"input": "a", "regex": "("}}) == 51111
    assert code_of(coll, {}, {"$regexMatch": {"input": "a", "regex": "a", "options": "q"}}) == 51108


# ---- arrays ----

def test_array_operators_doc_examples(coll):
    doc = {"matrix": [[1, 2], [2, 3], [3, 4]]}
    zipped = {"$zip": {"inputs": [{"$arrayElemAt": ["$matrix", 0]}, {"$arrayElemAt": ["$matrix", 1]},
                                  {"$arrayElemAt": ["$matrix", 2]}]}}
    assert project(coll, doc, zipped) == [[1, 2, 3], [2, 3, 4]]
    assert project(coll, {}, {"$zip": {"inputs": [["a"], ["b", "c"]], "useLongestLength": True,
                                       "defaults": ["x", "y"]}}) == [["a", "b"], ["x", "c"]]
    team = [{"name": "pat", "age": 30}, {"name": "dallas", "age": 36}, {"name": "charlie", "age": 42}]
    assert project(coll, {"team": team}, {"$sortArray": {"input": "$team", "sortBy": {"name": 1}}}) == \
        [team[2], team[1], team[0]]
    assert project(coll, {}, {"$sortArray": {"input": [20, 4, "Gratis", Decimal128("10.23")], "sortBy": -1}}) == \
        ["Gratis", 20, Decimal128("10.23"), 4]
    assert project(coll, {"s": [10, 20, 30, 40]}, {"$firstN": {"n": 2, "input": "$s"}}) == [10, 20]
    assert project(coll, {"s": [10, 20, 30, 40]}, {"$lastN": {"n": 2, "input": "$s"}}) == [30, 40]
    assert project(coll, {"s": [None, 2, 4, 3]}, {"$maxN": {"n": 2, "input": "$s"}}) == [4, 3]
    assert project(coll, {"s": [None, 2, 4, 3]}, {"$minN": {"n": 2, "input": "$s"}}) == [2, 3]
    scores = {"test01": 62, "test02": 81, "test03": 80}
    assert project(coll, scores, {"$median": {"input": ["$test01", "$test02", "$test03"],
                                              "method": "approximate"}}) == 80.0
    assert project(coll, scores, {"$percentile": {"input": ["$test01", "$test02", "$test03"],
                                                  "p": [0.5, 0.95], "method": "approximate"}}) == [80.0, 81.0]
    assert code_of(coll, {}, {"$zip": {"inputs": [["a"], 3]}}) == 34468
    assert code_of(coll, {}, {"$sortArray": {"input": 1, "sortBy": 1}}) == 2942504
    assert code_of(coll, {}, {"$firstN": {"n": 0, "input": [1]}}) == 5787908
    assert code_of(coll, {}, {"$median": {"input": [1], "method": "exact"}}) == 2


# ---- conversions and sizes ----

def test_conversions_doc_examples(coll):
    conv = {"$convert": {"input": "$price", "to": "decimal", "onError": "Error", "onNull": Decimal128("0")}}
    assert project(coll, {"price": 10}, conv) == Decimal128("10")
    assert project(coll, {"price": "abc"}, conv) == "Error"
    assert project(coll, {}, conv) == Decimal128("0")
    assert project(coll, {"q": "5"}, {"$convert": {"input": "$q", "to": 16}}) == 5
    assert project(coll, {}, {"$toDecimal": 2.5}) == Decimal128("2.50000000000000")
    assert project(coll, {}, {"$toDecimal": True}) == Decimal128("1")
    assert project(coll, {}, {"$toObjectId": "5ab9cbfa31c2ab715d42129e"}) == ObjectId("5ab9cbfa31c2ab715d42129e")
    assert code_of(coll, {}, {"$toObjectId": "5ab9cb"}) == 241
    assert code_of(coll, {}, {"$convert": {"input": 1, "to": "blah"}}) == 2
    # the date target: a long is milliseconds since the epoch; an int is not a date (as mongod)
    assert project(coll, {}, {"$convert": {"input": Int64(1000), "to": "date"}}) == \
        datetime.datetime(1970, 1, 1, 0, 0, 1)
    assert code_of(coll, {}, {"$convert": {"input": 1, "to": "date"}}) == 241


def test_sizes(coll):
    assert project(coll, {"a": "x"}, {"$bsonSize": "$$ROOT"}) == 14 + 17  # with its ObjectId _id
    assert project(coll, {"s": "cafétéria"}, {"$binarySize": "$s"}) == 11
    assert project(coll, {"b": Binary(b"\x00\x01\x02")}, {"$binarySize": "$b"}) == 3
    assert code_of(coll, {}, {"$bsonSize": "x"}) == 31393
    assert code_of(coll, {}, {"$binarySize": 1}) == 51276


def test_value_cap_and_refusals(coll):
    # a value past 16 MB fails with BSONObjectTooLarge (10334), the server keeps serving
    big = {"s": "a" * (1 << 20)}
    assert code_of(coll, big, {"$replaceAll": {"input": "$s", "find": "a", "replacement": "a" * 20}}) == 10334
    assert project(coll, {}, {"$const": "$x"}) == "$x"
    assert code_of(coll, {}, {"$function": {"body": "function(){}", "args": [], "lang": "js"}}) == 238
    assert code_of(coll, {}, {"$meta": "textScore"}) == 40218  # no $text in the query
    assert code_of(coll, {}, {"$meta": "searchScore"}) == 238  # Atlas Search's: not atomdb's


# ---- accumulators (the gaming examples of the $top/$firstN pages) ----

GAMES = [
    {"playerId": "PlayerA", "gameId": "G1", "score": 31},
    {"playerId": "PlayerB", "gameId": "G1", "score": 33},
    {"playerId": "PlayerC", "gameId": "G1", "score": 99},
    {"playerId": "PlayerD", "gameId": "G1", "score": 1},
    {"playerId": "PlayerA", "gameId": "G2", "score": 10},
    {"playerId": "PlayerB", "gameId": "G2", "score": 14},
    {"playerId": "PlayerC", "gameId": "G2", "score": 66},
    {"playerId": "PlayerD", "gameId": "G2", "score": 80},
]


def group(coll, acc, docs=GAMES):
    coll.delete_many({})
    coll.insert_many([dict(d) for d in docs])
    g = SON([("_id", "$gameId")])
    g.update(acc)
    return list(coll.aggregate([{"$group": g}, {"$sort": {"_id": 1}}]))


def test_top_bottom_accumulators(coll):
    out = group(coll, {"p": {"$top": {"output": ["$playerId", "$score"], "sortBy": {"score": -1}}}})
    assert [d["p"] for d in out] == [["PlayerC", 99], ["PlayerD", 80]]
    out = group(coll, {"p": {"$bottom": {"output": ["$playerId", "$score"], "sortBy": {"score": -1}}}})
    assert [d["p"] for d in out] == [["PlayerD", 1], ["PlayerA", 10]]
    out = group(coll, {"p": {"$topN": {"output": ["$playerId", "$score"], "sortBy": {"score": -1}, "n": 3}}})
    assert out[0]["p"] == [["PlayerC", 99], ["PlayerB", 33], ["PlayerA", 31]]
    out = group(coll, {"p": {"$bottomN": {"output": ["$playerId", "$score"], "sortBy": {"score": -1}, "n": 3}}})
    assert out[1]["p"] == [["PlayerC", 66], ["PlayerB", 14], ["PlayerA", 10]]


def test_n_accumulators(coll):
    out = group(coll, {"f": {"$firstN": {"input": ["$playerId", "$score"], "n": 3}},
                       "l": {"$lastN": {"input": "$score", "n": 2}},
                       "mx": {"$maxN": {"input": "$score", "n": 3}},
                       "mn": {"$minN": {"input": "$score", "n": 2}}})
    assert out[0]["f"] == [["PlayerA", 31], ["PlayerB", 33], ["PlayerC", 99]]
    assert out[0]["l"] == [99, 1]
    assert out[0]["mx"] == [99, 33, 31]
    assert out[1]["mn"] == [10, 14]
    # n may depend on the group key
    n = {"$cond": {"if": {"$eq": ["$_id", "G2"]}, "then": 1, "else": 3}}
    out = group(coll, {"mx": {"$maxN": {"input": "$score", "n": n}}})
    assert [d["mx"] for d in out] == [[99, 33, 31], [80]]


def test_stats_and_merge_accumulators(coll):
    out = group(coll, {"pop": {"$stdDevPop": "$score"}, "samp": {"$stdDevSamp": "$score"},
                       "med": {"$median": {"input": "$score", "method": "approximate"}},
                       "pc": {"$percentile": {"input": "$score", "p": [0.5, 1], "method": "approximate"}},
                       "m": {"$mergeObjects": {"last": "$playerId"}}})
    assert out[0]["pop"] == pytest.approx(35.805027579936315)
    assert out[0]["samp"] == pytest.approx(41.344084623236405)
    assert out[0]["med"] == 31.0
    assert out[0]["pc"] == [31.0, 99.0]
    assert out[0]["m"] == {"last": "PlayerD"}


@pytest.mark.parametrize("acc,code", [
    ({"$firstN": {"input": "$score", "n": 0}}, 5787908),
    ({"$firstN": {"input": "$score"}}, 5787906),
    ({"$maxN": 5}, 5787900),
    ({"$top": {"output": "$score", "sortBy": {"score": 1}, "n": 2}}, 5788002),
    ({"$topN": {"output": "$score", "sortBy": {"score": 1}}}, 5788003),
    ({"$top": {"sortBy": {"score": 1}}}, 5788004),
    ({"$top": {"output": "$score"}}, 5788005),
    ({"$median": {"input": "$score", "method": "exact"}}, 2),
    ({"$percentile": {"input": "$score", "p": [2], "method": "approximate"}}, 7750303),
    ({"$percentile": {"input": "$score", "method": "approximate"}}, 40414),
    ({"$median": {"input": "$score", "method": "approximate", "x": 1}}, 40415),
    ({"$mergeObjects": "$score"}, 40400),
    ({"$accumulator": {"init": "function() {}"}}, 238),
])
def test_accumulator_errors(coll, acc, code):
    with pytest.raises(OperationFailure) as e:
        group(coll, {"x": acc})
    assert e.value.code == code


def test_n_accumulator_memory_limit(client, coll):
    # the kept values count toward $group's memory limit
    docs = [{"gameId": "G", "s": "x" * 100000, "i": i} for i in range(40)]
    client.admin.command("setParameter", 1, internalDocumentSourceGroupMaxMemoryBytes=1000000)
    try:
        with pytest.raises(OperationFailure) as e:
            group(coll, {"l": {"$lastN": {"input": "$s", "n": 1000}}}, docs)
        assert e.value.code == 292
    finally:
        client.admin.command("setParameter", 1, internalDocumentSourceGroupMaxMemoryBytes=104857600)


def test_max_time_ms_stops_long_string_and_array_loops(coll):
    # the loops over a 15 MB string and a 1M-element array check the deadline
    coll.insert_one({"s": "a" * (15 << 20)})
    with pytest.raises(OperationFailure) as e:
        list(coll.aggregate([{"$project": {"r": {"$replaceAll": {"input": "$s", "find": "ab", "replacement": ""}}}}],
                            maxTimeMS=1))
    assert e.value.code == 50
    coll.delete_many({})
    coll.insert_one({"a": list(range(1000000))})
    with pytest.raises(OperationFailure) as e:
        list(coll.aggregate([{"$project": {"r": {"$setUnion": ["$a", "$a", "$a", "$a"]}}}], maxTimeMS=1))
    assert e.value.code == 50
    # and the server keeps serving
    assert coll.count_documents({}) == 1
