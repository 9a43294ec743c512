"""$setWindowFields, $densify and $fill through pymongo, with the outputs
MongoDB's documentation gives for its examples (cakeSales, stockPrices,
deliveryFleet, powerConsumption, weather, coffee, stock,
restaurantReviews, dailySales), and mongod's errors for bad specs and the
stage's memory limit."""

import datetime
import time
from decimal import Decimal

import pytest
from bson.decimal128 import Decimal128
from bson.son import SON
from pymongo import MongoClient
from pymongo.errors import OperationFailure

UTC = datetime.timezone.utc


def D(s):
    return datetime.datetime.fromisoformat(s.replace("Z", "+00:00"))


CAKE_SALES = [
    {"_id": 0, "type": "chocolate", "orderDate": D("2020-05-18T14:10:30Z"), "state": "CA",
     "price": 13, "quantity": 120},
    {"_id": 1, "type": "chocolate", "orderDate": D("2021-03-20T11:30:05Z"), "state": "WA",
     "price": 14, "quantity": 140},
    {"_id": 2, "type": "vanilla", "orderDate": D("2021-01-11T06:31:15Z"), "state": "CA",
     "price": 12, "quantity": 145},
    {"_id": 3, "type": "vanilla", "orderDate": D("2020-02-08T13:13:23Z"), "state": "WA",
     "price": 13, "quantity": 104},
    {"_id": 4, "type": "strawberry", "orderDate": D("2019-05-18T16:09:01Z"), "state": "CA",
     "price": 41, "quantity": 162},
    {"_id": 5, "type": "strawberry", "orderDate": D("2019-01-08T06:12:03Z"), "state": "WA",
     "price": 43, "quantity": 134},
]


@pytest.fixture(scope="module")
def db(atomdb_module):
    c = MongoClient(atomdb_module.uri("directConnection=true"), serverSelectionTimeoutMS=10000,
                    tz_aware=True)
    d = c.test_window
    d.cakeSales.drop()
    d.cakeSales.insert_many(CAKE_SALES)
    yield d
    c.close()


def pairs(docs, field):
    return [(d["_id"], d[field]) for d in docs]


def agg(coll, pipeline):
    return list(coll.aggregate(pipeline))


def error_of(db, coll, pipeline):
    with pytest.raises(OperationFailure) as e:
        db.command(SON([("aggregate", coll), ("pipeline", pipeline), ("cursor", {})]))
    return e.value.code


# ---- $setWindowFields: the cakeSales examples ----

def test_cumulative_quantity_for_each_state(db):
    out = agg(db.cakeSales, [{"$setWindowFields": {
        "partitionBy": "$state", "sortBy": {"orderDate": 1},
        "output": {"cumulativeQuantityForState": {
            "$sum": "$quantity", "window": {"documents": ["unbounded", "current"]}}}}}])
    assert pairs(out, "cumulativeQuantityForState") == [
        (4, 162), (0, 282), (2, 427), (5, 134), (3, 238), (1, 378)]
    assert out[0]["type"] == "strawberry"  # the rest of the document is kept


def test_cumulative_quantity_for_each_year(db):
    out = agg(db.cakeSales, [{"$setWindowFields": {
        "partitionBy": {"$year": "$orderDate"}, "sortBy": {"orderDate": 1},
        "output": {"cumulativeQuantityForYear": {
            "$sum": "$quantity", "window": {"documents": ["unbounded", "current"]}}}}}])
    assert pairs(out, "cumulativeQuantityForYear") == [
        (5, 134), (4, 296), (3, 104), (0, 224), (2, 145), (1, 285)]


def test_moving_average_quantity_for_each_year(db):
    out = agg(db.cakeSales, [{"$setWindowFields": {
        "partitionBy": {"$year": "$orderDate"}, "sortBy": {"orderDate": 1},
        "output": {"averageQuantity": {
            "$avg": "$quantity", "window": {"documents": [-1, 0]}}}}}])
    assert pairs(out, "averageQuantity") == [
        (5, 134), (4, 148), (3, 104), (0, 112), (2, 145), (1, 142.5)]


def test_cumulative_and_maximum_quantity_for_each_year(db):
    out = agg(db.cakeSales, [{"$setWindowFields": {
        "partitionBy": {"$year": "$orderDate"}, "sortBy": {"orderDate": 1},
        "output": {
            "cumulativeQuantityForYear": {
                "$sum": "$quantity", "window": {"documents": ["unbounded", "unbounded"]}},
            "maximumQuantityForYear": {
                "$max": "$quantity", "window": {"documents": ["unbounded", "unbounded"]}}}}}])
    assert [(d["_id"], d["cumulativeQuantityForYear"], d["maximumQuantityForYear"])
            for d in out] == [(5, 296, 162), (4, 296, 162), (3, 224, 120), (0, 224, 120),
                              (2, 285, 145), (1, 285, 145)]


def test_range_window_of_prices(db):
    """The documentation's range example: quantities of orders whose price
    is within 10 of this one's, per state, sorted by price."""
    out = agg(db.cakeSales, [{"$setWindowFields": {
        "partitionBy": "$state", "sortBy": {"price": 1},
        "output": {"quantityFromSimilarOrders": {
            "$sum": "$quantity", "window": {"range": [-10, 10]}}}}}])
    assert pairs(out, "quantityFromSimilarOrders") == [
        (2, 265), (0, 265), (4, 162), (3, 244), (1, 244), (5, 134)]


def test_time_range_window_with_a_unit(db):
    """The documentation's unit example: orders in the last 10 months."""
    out = agg(db.cakeSales, [{"$setWindowFields": {
        "partitionBy": "$state", "sortBy": {"orderDate": 1},
        "output": {"recentOrders": {
            "$push": "$orderDate", "window": {"range": ["unbounded", 10], "unit": "month"}}}}}])
    got = {d["_id"]: d["recentOrders"] for d in out}
    assert got[4] == [D("2019-05-18T16:09:01Z")]
    assert got[0] == [D("2019-05-18T16:09:01Z"), D("2020-05-18T14:10:30Z"),
                      D("2021-01-11T06:31:15Z")]
    assert got[5] == [D("2019-01-08T06:12:03Z")]
    assert got[3] == [D("2019-01-08T06:12:03Z"), D("2020-02-08T13:13:23Z")]
    assert got[1] == [D("2019-01-08T06:12:03Z"), D("2020-02-08T13:13:23Z"),
                      D("2021-03-20T11:30:05Z")]


def test_rank_of_quantity_per_state(db):
    out = agg(db.cakeSales, [{"$setWindowFields": {
        "partitionBy": "$state", "sortBy": {"quantity": -1},
        "output": {"rankQuantityForState": {"$rank": {}}}}}])
    assert pairs(out, "rankQuantityForState") == [
        (4, 1), (2, 2), (0, 3), (1, 1), (5, 2), (3, 3)]


def test_rank_dense_rank_and_document_number_with_ties(db):
    db.ties.drop()
    db.ties.insert_many([{"_id": i, "v": v} for i, v in enumerate([10, 20, 20, 30])])
    out = agg(db.ties, [{"$setWindowFields": {"sortBy": {"v": 1}, "output": {
        "r": {"$rank": {}}, "d": {"$denseRank": {}}, "n": {"$documentNumber": {}}}}}])
    assert [(o["r"], o["d"], o["n"]) for o in out] == [(1, 1, 1), (2, 2, 2), (2, 2, 3),
                                                        (4, 3, 4)]


def test_shift_quantity_per_state(db):
    out = agg(db.cakeSales, [{"$setWindowFields": {
        "partitionBy": "$state", "sortBy": {"quantity": -1},
        "output": {"shiftQuantityForState": {
            "$shift": {"output": "$quantity", "by": 1, "default": "Not available"}}}}}])
    assert pairs(out, "shiftQuantityForState") == [
        (4, 145), (2, 120), (0, "Not available"), (1, 134), (5, 104), (3, "Not available")]


def test_first_last_min_count_push_add_to_set_over_windows(db):
    out = agg(db.cakeSales, [{"$setWindowFields": {
        "partitionBy": "$state", "sortBy": {"orderDate": 1},
        "output": {
            "firstType": {"$first": "$type"},
            "lastSoFar": {"$last": "$type",
                          "window": {"documents": ["unbounded", "current"]}},
            "minPrice": {"$min": "$price"},
            "n": {"$count": {}},
            "prices": {"$push": "$price", "window": {"documents": [-1, 1]}},
            "types": {"$addToSet": "$type"}}}}])
    ca = out[:3]
    assert [d["firstType"] for d in ca] == ["strawberry"] * 3
    assert [d["lastSoFar"] for d in ca] == ["strawberry", "chocolate", "vanilla"]
    assert [d["minPrice"] for d in ca] == [12, 12, 12]
    assert [d["n"] for d in ca] == [3, 3, 3]
    assert [d["prices"] for d in ca] == [[41, 13], [41, 13, 12], [13, 12]]
    assert sorted(ca[0]["types"]) == ["chocolate", "strawberry", "vanilla"]


def test_std_dev_and_covariance(db):
    db.stats.drop()
    db.stats.insert_many([{"_id": i, "x": x, "y": y}
                          for i, (x, y) in enumerate([(1, 2), (2, 4), (3, 7), (4, 8)])])
    out = agg(db.stats, [{"$setWindowFields": {"sortBy": {"_id": 1}, "output": {
        "pop": {"$stdDevPop": "$x"}, "samp": {"$stdDevSamp": "$x"},
        "cpop": {"$covariancePop": ["$x", "$y"]}, "csamp": {"$covarianceSamp": ["$x", "$y"]},
        "first": {"$stdDevSamp": "$x", "window": {"documents": ["current", "current"]}}}}}])
    assert out[0]["pop"] == pytest.approx(1.118033988749895)
    assert out[0]["samp"] == pytest.approx(1.2909944487358056)
    assert out[0]["cpop"] == pytest.approx(2.625)
    assert out[0]["csamp"] == pytest.approx(3.5)
    assert out[0]["first"] is None  # one value has no sample deviation


def test_exp_moving_avg_with_n_and_alpha(db):
    db.stockPrices.drop()
    db.stockPrices.insert_many([
        {"stock": "ABC", "date": D("2020-05-18T20:00:00Z"), "price": 13},
        {"stock": "ABC", "date": D("2020-05-19T20:00:00Z"), "price": 15.4},
        {"stock": "ABC", "date": D("2020-05-20T20:00:00Z"), "price": 12},
        {"stock": "ABC", "date": D("2020-05-21T20:00:00Z"), "price": 11.7},
        {"stock": "DEF", "date": D("2020-05-18T20:00:00Z"), "price": 82},
        {"stock": "DEF", "date": D("2020-05-19T20:00:00Z"), "price": 94.3},
        {"stock": "DEF", "date": D("2020-05-20T20:00:00Z"), "price": 112.6},
        {"stock": "DEF", "date": D("2020-05-21T20:00:00Z"), "price": 97.3},
    ])
    out = agg(db.stockPrices, [{"$setWindowFields": {
        "partitionBy": "$stock", "sortBy": {"date": 1},
        "output": {"expMovingAvgForStock": {"$expMovingAvg": {"input": "$price", "N": 2}}}}}])
    assert [d["expMovingAvgForStock"] for d in out] == [
        13, 14.6, 12.866666666666667, 12.088888888888889,
        82, 90.2, 105.13333333333333, 99.91111111111111]
    out = agg(db.stockPrices, [{"$setWindowFields": {
        "partitionBy": "$stock", "sortBy": {"date": 1},
        "output": {"expMovingAvgForStock": {
            "$expMovingAvg": {"input": "$price", "alpha": 0.75}}}}}])
    assert [d["expMovingAvgForStock"] for d in out] == pytest.approx([
        13, 14.8, 12.7, 11.95, 82, 91.225, 107.25625, 99.789062], rel=1e-6)


def test_derivative_gives_the_trucks_average_speed(db):
    db.deliveryFleet.drop()
    db.deliveryFleet.insert_many([
        {"truckID": "1", "timeStamp": D("2020-05-18T14:10:30Z"), "miles": 1295.1},
        {"truckID": "1", "timeStamp": D("2020-05-18T14:11:00Z"), "miles": 1295.63},
        {"truckID": "1", "timeStamp": D("2020-05-18T14:11:30Z"), "miles": 1296.25},
        {"truckID": "1", "timeStamp": D("2020-05-18T14:12:00Z"), "miles": 1296.76},
        {"truckID": "2", "timeStamp": D("2020-05-18T14:10:30Z"), "miles": 10234.1},
        {"truckID": "2", "timeStamp": D("2020-05-18T14:11:00Z"), "miles": 10234.33},
        {"truckID": "2", "timeStamp": D("2020-05-18T14:11:30Z"), "miles": 10234.73},
        {"truckID": "2", "timeStamp": D("2020-05-18T14:12:00Z"), "miles": 10235.13},
    ])
    out = agg(db.deliveryFleet, [
        {"$setWindowFields": {
            "partitionBy": "$truckID", "sortBy": {"timeStamp": 1},
            "output": {"truckAverageSpeed": {
                "$derivative": {"input": "$miles", "unit": "hour"},
                "window": {"range": [-30, 0], "unit": "second"}}}}},
        {"$match": {"truckAverageSpeed": {"$gt": 50}}}])
    assert [(d["truckID"], d["miles"]) for d in out] == [
        ("1", 1295.63), ("1", 1296.25), ("1", 1296.76)]
    assert [d["truckAverageSpeed"] for d in out] == [
        63.60000000002401, 74.3999999999869, 61.199999999998916]


def test_integral_gives_kilowatt_hours(db):
    """The documentation's example data; the values a mongod returns for it
    (as a driver's test suite records them)."""
    db.powerConsumption.drop()
    db.powerConsumption.insert_many([
        {"powerMeterID": "1", "timeStamp": D("2020-05-18T14:10:30Z"), "kilowatts": 2.95},
        {"powerMeterID": "1", "timeStamp": D("2020-05-18T14:11:00Z"), "kilowatts": 2.7},
        {"powerMeterID": "1", "timeStamp": D("2020-05-18T14:11:30Z"), "kilowatts": 2.6},
        {"powerMeterID": "1", "timeStamp": D("2020-05-18T14:12:00Z"), "kilowatts": 2.98},
        {"powerMeterID": "2", "timeStamp": D("2020-05-18T14:10:30Z"), "kilowatts": 2.5},
        {"powerMeterID": "2", "timeStamp": D("2020-05-18T14:11:00Z"), "kilowatts": 2.25},
        {"powerMeterID": "2", "timeStamp": D("2020-05-18T14:11:30Z"), "kilowatts": 2.75},
        {"powerMeterID": "2", "timeStamp": D("2020-05-18T14:12:00Z"), "kilowatts": 2.82},
    ])
    out = agg(db.powerConsumption, [{"$setWindowFields": {
        "partitionBy": "$powerMeterID", "sortBy": {"timeStamp": 1},
        "output": {"powerMeterKilowattHours": {
            "$integral": {"input": "$kilowatts", "unit": "hour"},
            "window": {"range": ["unbounded", "current"], "unit": "hour"}}}}}])
    assert [d["powerMeterKilowattHours"] for d in out] == [
        0.0, 0.023541666666666666, 0.045625, 0.068875,
        0.0, 0.019791666666666666, 0.040625, 0.06383333333333334]


def test_integral_and_derivative_keep_decimal128_exact(db):
    db.dec.drop()
    db.dec.insert_many([{"_id": i, "y": Decimal128(v)} for i, v in enumerate(["0.1", "0.2", "0.3"])])
    out = agg(db.dec, [{"$setWindowFields": {"sortBy": {"_id": 1}, "output": {
        "area": {"$integral": {"input": "$y"}},
        "slope": {"$derivative": {"input": "$y"}, "window": {"documents": [-1, 0]}}}}}])
    assert all(isinstance(d["area"], Decimal128) for d in out)
    assert out[0]["area"].to_decimal() == Decimal("0.4")
    assert out[0]["slope"] is None
    assert [d["slope"].to_decimal() for d in out[1:]] == [Decimal("0.1"), Decimal("0.1")]


def test_dotted_output_fields_are_set_inside_documents(db):
    out = agg(db.cakeSales, [{"$match": {"state": "CA"}}, {"$setWindowFields": {
        "sortBy": {"orderDate": 1},
        "output": {"stats.n": {"$documentNumber": {}}}}}])
    assert [d["stats"] for d in out] == [{"n": 1}, {"n": 2}, {"n": 3}]


# ---- $setWindowFields errors ----

# ---- the N, top/bottom and percentile functions over windows (mongod 7) ----

TEST_SCORES = [
    {"studentId": "2345", "test01": 62, "test02": 81, "test03": 80},
    {"studentId": "2356", "test01": 60, "test02": 83, "test03": 79},
    {"studentId": "2358", "test01": 67, "test02": 82, "test03": 78},
    {"studentId": "2367", "test01": 64, "test02": 72, "test03": 77},
    {"studentId": "2369", "test01": 60, "test02": 53, "test03": 72},
]


@pytest.fixture
def scores(db):
    db.testScores.drop()
    db.testScores.insert_many([dict(d) for d in TEST_SCORES])
    return db.testScores


def test_median_over_a_range_window(scores):
    # the $median documentation's $setWindowFields example
    out = agg(scores, [
        {"$setWindowFields": {"sortBy": {"test01": 1}, "output": {"test01_median": {
            "$median": {"input": "$test01", "method": "approximate"},
            "window": {"range": [-3, 3]}}}}},
        {"$project": {"_id": 0, "studentId": 1, "test01_median": 1}}])
    assert [(d["studentId"], d["test01_median"]) for d in out] == [
        ("2356", 60), ("2369", 60), ("2345", 60), ("2367", 64), ("2358", 64)]


def test_percentile_over_a_range_window(scores):
    # the $percentile documentation's $setWindowFields example
    out = agg(scores, [
        {"$setWindowFields": {"sortBy": {"test01": 1}, "output": {"test01_95percentile": {
            "$percentile": {"input": "$test01", "p": [0.95], "method": "approximate"},
            "window": {"range": [-3, 3]}}}}},
        {"$project": {"_id": 0, "studentId": 1, "test01_95percentile": 1}}])
    assert [(d["studentId"], d["test01_95percentile"]) for d in out] == [
        ("2356", [62]), ("2369", [62]), ("2345", [64]), ("2367", [67]), ("2358", [67])]


def test_median_of_the_whole_partition(scores):
    out = agg(scores, [{"$setWindowFields": {"output": {
        "m": {"$median": {"input": "$test02", "method": "approximate"}}}}}])
    assert [d["m"] for d in out] == [81] * 5  # of 53 72 81 82 83


def test_first_n_and_last_n_over_windows(db):
    out = agg(db.cakeSales, [{"$setWindowFields": {
        "partitionBy": "$state", "sortBy": {"orderDate": 1},
        "output": {
            "firstTwo": {"$firstN": {"n": 2, "input": "$quantity"},
                         "window": {"documents": ["unbounded", "current"]}},
            "lastTwo": {"$lastN": {"n": {"$add": [1, 1]}, "input": "$quantity"},
                        "window": {"documents": ["unbounded", "current"]}}}}}])
    assert pairs(out, "firstTwo") == [(4, [162]), (0, [162, 120]), (2, [162, 120]),
                                      (5, [134]), (3, [134, 104]), (1, [134, 104])]
    assert pairs(out, "lastTwo") == [(4, [162]), (0, [162, 120]), (2, [120, 145]),
                                     (5, [134]), (3, [134, 104]), (1, [104, 140])]


def test_min_n_and_max_n_over_windows(db):
    out = agg(db.cakeSales, [{"$setWindowFields": {
        "partitionBy": "$state", "sortBy": {"orderDate": 1},
        "output": {
            "maxTwo": {"$maxN": {"n": 2, "input": "$quantity"}},
            "minTwo": {"$minN": {"n": 2, "input": "$quantity"},
                       "window": {"documents": [-1, 0]}}}}}])
    assert pairs(out, "maxTwo") == [(4, [162, 145]), (0, [162, 145]), (2, [162, 145]),
                                    (5, [140, 134]), (3, [140, 134]), (1, [140, 134])]
    assert pairs(out, "minTwo") == [(4, [162]), (0, [120, 162]), (2, [120, 145]),
                                    (5, [134]), (3, [104, 134]), (1, [104, 140])]


def test_top_n_and_bottom_n_over_windows(db):
    out = agg(db.cakeSales, [{"$setWindowFields": {
        "partitionBy": "$state", "sortBy": {"orderDate": 1},
        "output": {
            "topTwo": {"$topN": {"n": 2, "sortBy": {"quantity": -1}, "output": "$type"},
                       "window": {"documents": [-1, 1]}},
            "bottomTwo": {"$bottomN": {"n": 2, "sortBy": {"quantity": -1},
                                       "output": "$type"},
                          "window": {"documents": [-1, 1]}}}}}])
    ca = [d for d in out if d["state"] == "CA"]
    assert pairs(ca, "topTwo") == [(4, ["strawberry", "chocolate"]),
                                   (0, ["strawberry", "vanilla"]),
                                   (2, ["vanilla", "chocolate"])]
    assert pairs(ca, "bottomTwo") == [(4, ["strawberry", "chocolate"]),
                                      (0, ["vanilla", "chocolate"]),
                                      (2, ["vanilla", "chocolate"])]


def test_top_and_bottom_over_the_partition(db):
    out = agg(db.cakeSales, [{"$setWindowFields": {
        "partitionBy": "$state",
        "output": {
            "cheapest": {"$top": {"sortBy": {"price": 1}, "output": ["$type", "$price"]}},
            "dearest": {"$bottom": {"sortBy": {"price": 1}, "output": ["$type", "$price"]}}}}},
        {"$sort": {"_id": 1}}])
    by_state = {d["state"]: (d["cheapest"], d["dearest"]) for d in out}
    assert by_state == {"CA": (["vanilla", 12], ["strawberry", 41]),
                        "WA": (["vanilla", 13], ["strawberry", 43])}


def test_costly_window_results_stop_at_max_time_ms(db):
    # each result sorts or copies a 40,001-value window: the check comes per result
    db.bigwin.drop()
    db.bigwin.insert_many([{"_id": i, "a": (i * 7919) % 1000} for i in range(50000)])
    for fn in ({"$percentile": {"input": "$a", "p": [0.9], "method": "approximate"}},
               {"$push": "$a"}):
        out = dict(fn, window={"documents": [-20000, 20000]})
        t = time.monotonic()
        with pytest.raises(OperationFailure) as e:
            db.command(SON([("aggregate", "bigwin"), ("pipeline", [{"$setWindowFields": {
                "sortBy": {"_id": 1}, "output": {"r": out}}}]), ("cursor", {}),
                ("maxTimeMS", 300)]))
        assert e.value.code == 50  # MaxTimeMSExpired
        assert time.monotonic() - t < 2.5
    db.bigwin.drop()


def test_n_of_a_window_function_sees_no_document(db):
    # mongod evaluates n against an empty document: a field path is missing
    assert error_of(db, "cakeSales", [{"$setWindowFields": {"output": {
        "s": {"$firstN": {"n": "$quantity", "input": "$quantity"}}}}}]) == 5787902
    assert error_of(db, "cakeSales", [{"$setWindowFields": {"output": {
        "s": {"$topN": {"n": 0, "sortBy": {"a": 1}, "output": "$quantity"}}}}}]) == 5787908


@pytest.mark.parametrize("spec,code", [
    ({"sortBy": {"a": 1, "b": 1}, "output": {"r": {"$rank": {}}}}, 5371602),
    ({"output": {"r": {"$rank": {}}}}, 5371602),
    ({"sortBy": {"a": 1}, "output": {"r": {"$rank": {},
                                            "window": {"documents": [0, 1]}}}}, 5371601),
    ({"sortBy": {"a": 1}, "output": {"r": {"$rank": 1}}}, 5371603),
    ({"output": {"s": {"$sum": "$a", "window": {"documents": [-1, 0]}}}}, 5339901),
    ({"sortBy": {"a": 1, "b": 1},
      "output": {"s": {"$sum": "$a", "window": {"range": [-1, 0]}}}}, 5339902),
    ({"sortBy": {"a": 1}, "output": {"s": {"$sum": "$a", "window": {"documents": [1, 0]}}}},
     5339900),
    ({"sortBy": {"a": 1}, "output": {"s": {"$summ": "$a"}}}, 9),
    ({"sortBy": {"a": 1}, "output": {"s": {"$median": {"input": "$a",
                                                      "method": "exact"}}}}, 2),
    ({"output": {"s": {"$firstN": {"input": "$a"}}}}, 5787906),
    ({"output": {"s": {"$topN": {"n": 1, "output": "$a"}}}}, 5788005),
    ({"output": {"s": {"$minN": 3}}}, 5787900),
    ({"output": {"s": {"$percentile": {"input": "$a", "p": [2],
                                        "method": "approximate"}}}}, 7750303),
    ({"output": {"s": {"$maxN": {"n": 1, "input": "$a"}, "bogus": 1}}}, 9),
    ({"sortBy": {"a": 1}, "output": {"s": {"window": {}}}}, 9),
    ({"output": {"s": {"$shift": {"output": "$a", "by": 1}}}}, 9),
    ({"sortBy": {"a": 1}, "output": {"s": {"$shift": {"output": "$a", "by": 1.5}}}}, 9),
    ({"sortBy": {"a": 1}, "output": {"s": {"$shift": {"output": "$a", "by": 1,
                                                      "default": "$b"}}}}, 9),
    ({"sortBy": {"a": 1}, "output": {"s": {"$sum": 1,
                                            "window": {"documents": [-2 ** 40, 0]}}}}, 9),
    ({"output": {"s": {"$expMovingAvg": {"input": "$a", "N": 2}}}}, 9),
    ({"sortBy": {"a": 1}, "output": {"s": {"$expMovingAvg": {"input": "$a", "alpha": 2}}}}, 9),
    ({"sortBy": {"a": 1}, "output": {"s": {"$derivative": {"input": "$a"}}}}, 9),
    ({"sortBy": {"a": 1, "b": 1}, "output": {"s": {"$integral": {"input": "$a"}}}}, 9),
    ({"sortBy": {"a": 1}}, 40414),
    ({"sortBy": {}, "output": {}}, 15976),
    ({"sortBy": {"a": 1}, "output": {}, "bogus": 1}, 40415),
    ({"sortBy": {"a": 1}, "output": {"$s": {"$sum": 1}}}, 16410),
])
def test_bad_window_specs_are_refused_as_mongod(db, spec, code):
    assert error_of(db, "cakeSales", [{"$setWindowFields": spec}]) == code


def test_runtime_errors_as_mongod(db):
    db.rt.drop()
    db.rt.insert_many([{"_id": 1, "a": "x", "d": D("2020-01-01T00:00:00Z"), "p": [1]},
                       {"_id": 2, "a": 2, "d": D("2020-01-02T00:00:00Z"), "p": [2]}])
    assert error_of(db, "rt", [{"$setWindowFields": {
        "sortBy": {"a": 1}, "output": {"s": {"$sum": "$_id", "window": {"range": [-1, 1]}}}}}]
    ) == 5429414
    assert error_of(db, "rt", [{"$setWindowFields": {
        "sortBy": {"d": 1}, "output": {"s": {"$sum": "$_id", "window": {"range": [-1, 1]}}}}}]
    ) == 5429413
    assert error_of(db, "rt", [{"$setWindowFields": {
        "sortBy": {"a": 1}, "output": {"s": {"$sum": "$_id",
                                             "window": {"range": [-1, 1], "unit": "day"}}}}}]
    ) == 5429513
    assert error_of(db, "rt", [{"$setWindowFields": {
        "partitionBy": "$p", "output": {"s": {"$sum": "$_id"}}}}]) == 14
    assert error_of(db, "rt", [{"$setWindowFields": {
        "sortBy": {"d": 1}, "output": {"s": {"$integral": {"input": "$_id"}}}}}]) == 5423902
    assert error_of(db, "rt", [{"$setWindowFields": {
        "sortBy": {"_id": 1}, "output": {"s": {"$derivative": {"input": "$_id", "unit": "day"},
                                               "window": {"documents": [-1, 0]}}}}}]) == 5624900


def test_window_memory_limit_is_settable_and_enforced(db):
    admin = db.client.admin
    name = "internalDocumentSourceSetWindowFieldsMaxMemoryBytes"
    assert admin.command({"getParameter": 1, name: 1})[name] == 104857600
    admin.command({"setParameter": 1, name: 1000})
    try:
        assert error_of(db, "cakeSales", [{"$setWindowFields": {
            "sortBy": {"_id": 1}, "output": {"s": {"$push": "$$ROOT"}}}}]) == 5414201
    finally:
        admin.command({"setParameter": 1, name: 104857600})
    assert len(agg(db.cakeSales, [{"$setWindowFields": {
        "sortBy": {"_id": 1}, "output": {"s": {"$push": "$$ROOT"}}}}])) == 6


# ---- $densify ----

def test_densify_time_series_within_explicit_bounds(db):
    db.weather.drop()
    db.weather.insert_many([
        {"metadata": {"sensorId": 5578, "type": "temperature"},
         "timestamp": D("2021-05-18T00:00:00Z"), "temp": 12},
        {"metadata": {"sensorId": 5578, "type": "temperature"},
         "timestamp": D("2021-05-18T04:00:00Z"), "temp": 11},
        {"metadata": {"sensorId": 5578, "type": "temperature"},
         "timestamp": D("2021-05-18T08:00:00Z"), "temp": 11},
        {"metadata": {"sensorId": 5578, "type": "temperature"},
         "timestamp": D("2021-05-18T12:00:00Z"), "temp": 12},
    ])
    out = agg(db.weather, [{"$densify": {"field": "timestamp", "range": {
        "step": 1, "unit": "hour",
        "bounds": [D("2021-05-18T00:00:00Z"), D("2021-05-18T08:00:00Z")]}}},
        {"$project": {"_id": 0}}])
    assert [(d["timestamp"].hour, d.get("temp")) for d in out] == [
        (0, 12), (1, None), (2, None), (3, None), (4, 11), (5, None), (6, None), (7, None),
        (8, 11), (12, 12)]
    assert out[1] == {"timestamp": D("2021-05-18T01:00:00Z")}  # only the field


COFFEE = [
    {"altitude": 600, "variety": "Arabica Typica", "score": 68.3},
    {"altitude": 750, "variety": "Arabica Typica", "score": 69.5},
    {"altitude": 950, "variety": "Arabica Typica", "score": 70.5},
    {"altitude": 1250, "variety": "Gesha", "score": 88.15},
    {"altitude": 1700, "variety": "Gesha", "score": 85.5},
    {"altitude": 1600, "variety": "SL28", "score": 66.5},
    {"altitude": 1750, "variety": "SL28", "score": 77},
    {"altitude": 1800, "variety": "SL28", "score": 83.7},
]


@pytest.fixture
def coffee(db):
    db.coffee.drop()
    db.coffee.insert_many([dict(c) for c in COFFEE])
    return db.coffee


def test_densify_full_fills_every_partition_over_the_whole_range(coffee):
    out = agg(coffee, [{"$densify": {"field": "altitude", "partitionByFields": ["variety"],
                                     "range": {"bounds": "full", "step": 200}}},
                       {"$project": {"_id": 0}}])
    got = sorted((d["variety"], d["altitude"], d.get("score")) for d in out)
    assert got == sorted([
        ("Arabica Typica", 600, 68.3), ("Arabica Typica", 750, 69.5),
        ("Arabica Typica", 800, None), ("Arabica Typica", 950, 70.5),
        ("Arabica Typica", 1000, None), ("Arabica Typica", 1200, None),
        ("Arabica Typica", 1400, None), ("Arabica Typica", 1600, None),
        ("Arabica Typica", 1800, None),
        ("Gesha", 600, None), ("Gesha", 800, None), ("Gesha", 1000, None),
        ("Gesha", 1200, None), ("Gesha", 1250, 88.15), ("Gesha", 1400, None),
        ("Gesha", 1600, None), ("Gesha", 1700, 85.5), ("Gesha", 1800, None),
        ("SL28", 600, None), ("SL28", 800, None), ("SL28", 1000, None), ("SL28", 1200, None),
        ("SL28", 1400, None), ("SL28", 1600, 66.5), ("SL28", 1750, 77), ("SL28", 1800, 83.7)])
    # sorted by altitude only: "full" does not keep the partitions together
    assert [d["altitude"] for d in out][:3] == [600, 750, 800]


def test_densify_partition_fills_within_each_partition(coffee):
    out = agg(coffee, [{"$densify": {"field": "altitude", "partitionByFields": ["variety"],
                                     "range": {"bounds": "partition", "step": 200}}},
                       {"$project": {"_id": 0}}])
    assert [(d["variety"], d["altitude"], d.get("score")) for d in out] == [
        ("Arabica Typica", 600, 68.3), ("Arabica Typica", 750, 69.5),
        ("Arabica Typica", 800, None), ("Arabica Typica", 950, 70.5),
        ("Gesha", 1250, 88.15), ("Gesha", 1450, None), ("Gesha", 1650, None),
        ("Gesha", 1700, 85.5),
        ("SL28", 1600, 66.5), ("SL28", 1750, 77), ("SL28", 1800, 83.7)]
    assert out[2] == {"variety": "Arabica Typica", "altitude": 800}


def test_densify_explicit_numeric_bounds_with_no_input_still_generates(db):
    db.empty.drop()
    out = agg(db.empty, [{"$densify": {"field": "x", "range": {"step": 2, "bounds": [0, 7]}}}])
    assert out == [{"x": 0}, {"x": 2}, {"x": 4}, {"x": 6}]


@pytest.mark.parametrize("spec,code", [
    ({"field": "a", "range": {"step": -1, "bounds": [0, 1]}}, 5733401),
    ({"field": "a", "range": {"step": 1, "bounds": [0, 1, 2]}}, 5733403),
    ({"field": "a", "range": {"step": 1, "bounds": [2, 1]}}, 5733402),
    ({"field": "a", "range": {"step": 1, "bounds": "partition"}}, 5733408),
    ({"field": "a", "range": {"step": 1, "bounds": "every"}}, 5946802),
    ({"field": "a", "range": {"step": 1, "bounds": 5}}, 5733404),
    ({"field": "a", "range": {"step": 1.5, "bounds": [0, 1]}}, 5876900),
    ({"field": "a", "range": {"step": 1, "unit": "hour", "bounds": [0, 1]}}, 5733409),
    ({"field": "a", "range": {"step": 1.5, "unit": "hour", "bounds": "full"}}, 6586400),
    ({"field": "$a", "range": {"step": 1, "bounds": "full"}}, 16410),
    ({"field": "a"}, 40414),
    ({"field": "a", "range": {"step": 1, "bounds": "full"}, "extra": 1}, 40415),
])
def test_bad_densify_specs_are_refused_as_mongod(db, spec, code):
    assert error_of(db, "cakeSales", [{"$densify": spec}]) == code


def test_densify_of_a_string_field_fails_as_mongod(db):
    assert error_of(db, "cakeSales", [{"$densify": {
        "field": "state", "range": {"step": 1, "bounds": "full"}}}]) == 5733201


def test_densify_generated_documents_are_bounded(db):
    admin = db.client.admin
    admin.command({"setParameter": 1, "internalQueryMaxAllowedDensifyDocs": 10})
    try:
        assert error_of(db, "cakeSales", [{"$densify": {
            "field": "x", "range": {"step": 1, "bounds": [0, 100]}}}]) == 5897900
    finally:
        admin.command({"setParameter": 1, "internalQueryMaxAllowedDensifyDocs": 500000})


# ---- $fill ----

def test_fill_linear_interpolates_missing_prices(db):
    db.stock.drop()
    db.stock.insert_many([
        {"time": D("2021-03-08T09:00:00Z"), "price": 500},
        {"time": D("2021-03-08T10:00:00Z")},
        {"time": D("2021-03-08T11:00:00Z"), "price": 515},
        {"time": D("2021-03-08T12:00:00Z")},
        {"time": D("2021-03-08T13:00:00Z")},
        {"time": D("2021-03-08T14:00:00Z"), "price": 485},
    ])
    out = agg(db.stock, [{"$fill": {"sortBy": {"time": 1},
                                    "output": {"price": {"method": "linear"}}}}])
    assert [d["price"] for d in out] == [500, 507.5, 515, 505, 495, 485]


def test_fill_locf_carries_the_last_score(db):
    db.restaurantReviews.drop()
    db.restaurantReviews.insert_many([
        {"date": D("2021-03-08T00:00:00Z"), "score": 90},
        {"date": D("2021-03-09T00:00:00Z"), "score": 92},
        {"date": D("2021-03-10T00:00:00Z")},
        {"date": D("2021-03-11T00:00:00Z")},
        {"date": D("2021-03-12T00:00:00Z"), "score": 85},
        {"date": D("2021-03-13T00:00:00Z")},
    ])
    out = agg(db.restaurantReviews, [{"$fill": {"sortBy": {"date": 1},
                                                "output": {"score": {"method": "locf"}}}}])
    assert [d["score"] for d in out] == [90, 92, 92, 92, 85, 85]


def test_fill_value_sets_constants(db):
    db.dailySales.drop()
    db.dailySales.insert_many([
        {"date": D("2022-02-02T00:00:00Z"), "bootsSold": 10, "sandalsSold": 20,
         "sneakersSold": 12},
        {"date": D("2022-02-03T00:00:00Z"), "bootsSold": 7, "sneakersSold": 18},
        {"date": D("2022-02-04T00:00:00Z"), "sneakersSold": 5},
    ])
    out = agg(db.dailySales, [{"$fill": {"output": {
        "bootsSold": {"value": 0}, "sandalsSold": {"value": 0}, "sneakersSold": {"value": 0}}}},
        {"$project": {"_id": 0, "date": 0}}])
    assert [list(d.items()) for d in out] == [
        [("bootsSold", 10), ("sandalsSold", 20), ("sneakersSold", 12)],
        [("bootsSold", 7), ("sneakersSold", 18), ("sandalsSold", 0)],
        [("sneakersSold", 5), ("bootsSold", 0), ("sandalsSold", 0)]]


def test_fill_locf_per_partition(db):
    db.fp.drop()
    db.fp.insert_many([{"_id": 1, "g": "a", "t": 1, "v": 1}, {"_id": 2, "g": "b", "t": 1, "v": 5},
                       {"_id": 3, "g": "a", "t": 2}, {"_id": 4, "g": "b", "t": 2}])
    out = agg(db.fp, [{"$fill": {"partitionByFields": ["g"], "sortBy": {"t": 1},
                                 "output": {"v": {"method": "locf"}}}}])
    assert [(d["_id"], d["v"]) for d in out] == [(1, 1), (3, 1), (2, 5), (4, 5)]


@pytest.mark.parametrize("spec,code", [
    ({"output": {"v": {"method": "linear"}}}, 605001),
    ({"sortBy": {"t": 1}, "output": {"v": {"method": "cubic"}}}, 6050203),
    ({"output": {"v": {"value": 1, "method": "locf"}}}, 6050202),
    ({"partitionBy": "$g", "partitionByFields": ["g"], "output": {"v": {"value": 1}}}, 6050204),
    ({"sortBy": {"t": 1}}, 40414),
])
def test_bad_fill_specs_are_refused(db, spec, code):
    assert error_of(db, "cakeSales", [{"$fill": spec}]) == code


def test_linear_fill_refuses_repeated_sort_values(db):
    db.rep.drop()
    db.rep.insert_many([{"t": 1, "v": 1}, {"t": 1}, {"t": 2, "v": 3}])
    assert error_of(db, "rep", [{"$fill": {"sortBy": {"t": 1},
                                           "output": {"v": {"method": "linear"}}}}]) == 6050106


def test_a_long_window_computation_stops_at_max_time_ms(db):
    db.big.drop()
    db.big.insert_many([{"_id": i, "v": i % 7} for i in range(20000)])
    with pytest.raises(OperationFailure) as e:
        list(db.big.aggregate([{"$setWindowFields": {
            "sortBy": {"_id": 1},
            "output": {"s": {"$stdDevPop": "$v", "window": {"documents": [-3000, 3000]}}}}}],
            maxTimeMS=50))
    assert e.value.code == 50
    db.client.admin.command("ping")


# ---- which combinations mongod accepts: every function x window x sortBy x partitionBy ----

FUNCTIONS = {
    "sum": {"$sum": "$a"}, "avg": {"$avg": "$a"}, "stdDevSamp": {"$stdDevSamp": "$a"},
    "stdDevPop": {"$stdDevPop": "$a"}, "min": {"$min": "$a"}, "max": {"$max": "$a"},
    "count": {"$count": {}}, "push": {"$push": "$a"}, "addToSet": {"$addToSet": "$a"},
    "first": {"$first": "$a"}, "last": {"$last": "$a"},
    "derivative": {"$derivative": {"input": "$a"}},
    "derivative_date": {"$derivative": {"input": "$date", "unit": "millisecond"}},
    "integral": {"$integral": {"input": "$a"}},
    "integral_date": {"$integral": {"input": "$a", "unit": "millisecond"}},
    "covariancePop": {"$covariancePop": ["$a", "$date"]},
    "covarianceSamp": {"$covarianceSamp": ["$a", "$date"]},
    "expMovingAvgN": {"$expMovingAvg": {"input": "$a", "N": 3}},
    "expMovingAvgAlpha": {"$expMovingAvg": {"input": "$a", "alpha": 0.1}},
    "shift": {"$shift": {"output": "$a", "by": 1, "default": 0}},
    "documentNumber": {"$documentNumber": {}}, "rank": {"$rank": {}},
    "denseRank": {"$denseRank": {}},
    "topN": {"$topN": {"n": 2, "sortBy": {"a": -1}, "output": "$a"}},
    "bottom": {"$bottom": {"sortBy": {"a": -1}, "output": "$a"}},
    "firstN": {"$firstN": {"n": 2, "input": "$a"}}, "maxN": {"$maxN": {"n": 2, "input": "$a"}},
    "median": {"$median": {"input": "$a", "method": "approximate"}},
    "percentile": {"$percentile": {"input": "$a", "p": [0.5, 0.9], "method": "approximate"}},
}
WINDOWS = {
    "none": None,
    "doc_left": {"documents": ["unbounded", "current"]},
    "doc_right": {"documents": ["current", "unbounded"]},
    "doc_past": {"documents": [-1, "current"]},
    "doc_centered": {"documents": [-1, 1]},
    "range_full": {"range": ["unbounded", "unbounded"]},
    "range_left": {"range": ["unbounded", "current"]},
    "range_past": {"range": [-2, "current"]},
    "range_centered": {"range": [-2, 2]},
}
SORTS = {"none": None, "asc": {"seq": 1}, "desc": {"seq": -1}, "asc_date": {"date": 1},
         "desc_date": {"date": -1}, "multi": {"seq": 1, "part": 1}}
PARTITIONS = {"none": None, "field": "$part", "array": "$array"}


def expected_code(fn, window, sort, partition):
    """mongod's answer: the function's own rules first, then the window's,
    then (running) the partition key's and the sort key's types."""
    rank_like = fn in ("documentNumber", "rank", "denseRank")
    if fn.startswith("derivative") and (sort == "none" or window == "none" or sort == "multi"):
        return 9
    if fn.startswith("integral") and sort in ("none", "multi"):
        return 9
    if fn.startswith("expMovingAvg") and (window != "none" or sort == "none"):
        return 9
    if rank_like and window != "none":
        return 5371601
    if rank_like and sort in ("none", "multi"):
        return 5371602
    if fn == "shift" and (sort == "none" or window != "none"):
        return 9
    if window.startswith("doc") and sort == "none":
        return 5339901
    if window.startswith("range") and sort in ("none", "multi"):
        return 5339902
    if partition == "array":
        return 14
    date_sort = sort.endswith("date")
    if fn == "derivative_date" and not date_sort:
        return 5624900
    if fn == "derivative" and date_sort:
        return 5624901
    if fn == "integral_date" and not date_sort:
        return 5423901
    if fn == "integral" and date_sort:
        return 5423902
    return 0


def test_every_window_combination_is_accepted_or_refused_as_mongod(db):
    db.combos.drop()
    day = datetime.timedelta(days=1)
    db.combos.insert_many([{"_id": i, "a": i, "date": D("2021-01-01T00:00:00Z") + i * day,
                            "array": [], "part": i % 2, "seq": i // 2} for i in range(10)])
    wrong = []
    for fn, spec in FUNCTIONS.items():
        for wname, window in WINDOWS.items():
            for sname, sort in SORTS.items():
                if wname.startswith("range") and (sname.endswith("date") or
                                                  sname.startswith("desc")):
                    continue  # range windows over dates need a unit; descending is refused
                for pname, part in PARTITIONS.items():
                    out = dict(spec)
                    if window is not None:
                        out["window"] = window
                    stage = {"output": {"x": out}}
                    if sort is not None:
                        stage["sortBy"] = sort
                    if part is not None:
                        stage["partitionBy"] = part
                    want = expected_code(fn, wname, sname, pname)
                    try:
                        db.command(SON([("aggregate", "combos"),
                                        ("pipeline", [{"$setWindowFields": stage}]),
                                        ("cursor", {})]))
                        got = 0
                    except OperationFailure as e:
                        got = e.code
                    if got != want:
                        wrong.append((fn, wname, sname, pname, got, want))
    assert wrong == []
