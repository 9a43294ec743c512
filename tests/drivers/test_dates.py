"""Date expression operators through pymongo, with the outputs MongoDB's
documentation gives for its examples: parts of a date in UTC, in an Olson
time zone (ICU's tz data) and at a fixed offset, formatting, arithmetic that
clamps to the month's end, truncation to weeks, the unknown-zone error, and
date strings read back ($dateFromString with format, timezone, onError and
onNull; $toDate and $convert of a string)."""

import datetime

import pytest
from bson.objectid import ObjectId
from pymongo import MongoClient
from pymongo.errors import OperationFailure

UTC = datetime.timezone.utc
D = datetime.datetime(2014, 1, 1, 8, 15, 39, 736000, tzinfo=UTC)


@pytest.fixture(scope="module")
def coll(atomdb_module):
    c = MongoClient(atomdb_module.uri("directConnection=true"), serverSelectionTimeoutMS=10000,
                    tz_aware=True)
    coll = c.test_dates.sales
    coll.drop()
    coll.insert_one({"_id": 1, "date": D})
    yield coll
    c.close()


def one(coll, expr):
    out = list(coll.aggregate([{"$project": {"_id": 0, "r": expr}}]))
    assert len(out) == 1
    return out[0]["r"]


def test_parts_of_a_date_in_utc(coll):
    assert one(coll, {"$year": "$date"}) == 2014
    assert one(coll, {"$month": "$date"}) == 1
    assert one(coll, {"$dayOfYear": "$date"}) == 1
    assert one(coll, {"$hour": "$date"}) == 8
    assert one(coll, {"$millisecond": "$date"}) == 736
    assert one(coll, {"$dayOfWeek": "$date"}) == 4  # a Wednesday
    assert one(coll, {"$week": "$date"}) == 0
    assert one(coll, {"$isoWeek": "$date"}) == 1


def test_time_zones_by_name_and_offset(coll):
    assert one(coll, {"$hour": {"date": "$date", "timezone": "America/New_York"}}) == 3
    assert one(coll, {"$dateToString": {"format": "%H:%M:%S:%L%z", "date": "$date",
                                        "timezone": "America/New_York"}}) == "03:15:39:736-0500"
    assert one(coll, {"$dateToString": {"format": "%Y-%m-%d %H:%M", "date": "$date",
                                        "timezone": "+04:30"}}) == "2014-01-01 12:45"


def test_add_clamps_to_the_end_of_the_month_and_trunc_to_weeks(coll):
    jan31 = datetime.datetime(2021, 1, 31, tzinfo=UTC)
    assert one(coll, {"$dateAdd": {"startDate": jan31, "unit": "month", "amount": 1}}) == \
        datetime.datetime(2021, 2, 28, tzinfo=UTC)
    assert one(coll, {"$dateDiff": {"startDate": jan31, "endDate": "$date", "unit": "day"}}) < 0
    assert one(coll, {"$dateTrunc": {"date": "$date", "unit": "week", "startOfWeek": "monday"}}) == \
        datetime.datetime(2013, 12, 30, tzinfo=UTC)


def test_an_unknown_time_zone_is_refused(coll):
    with pytest.raises(OperationFailure) as e:
        one(coll, {"$hour": {"date": "$date", "timezone": "Mars/Olympus_Mons"}})
    assert e.value.code == 40485


def dt(*a):
    return datetime.datetime(*a, tzinfo=UTC)


def test_date_from_string_documentation_examples(coll):
    db = coll.database
    db.logmessages.drop()
    db.logmessages.insert_many([
        {"_id": 1, "date": "2017-02-08T12:10:40.787", "timezone": "America/New_York",
         "message": "Step 1: Started"},
        {"_id": 2, "date": "2017-02-08", "timezone": "-05:00", "message": "Step 1: Ended"},
        {"_id": 3, "message": " Step 1: Ended "},
        {"_id": 4, "date": "2017-02-09", "timezone": "Europe/London", "message": "Step 2: Started"},
        {"_id": 5, "date": "2017-02-09T03:35:02.055", "timezone": "+0530",
         "message": "Step 2: In Progress"},
    ])
    got = {d["_id"]: d["date"] for d in db.logmessages.aggregate([
        {"$project": {"date": {"$dateFromString": {"dateString": "$date", "timezone": "$timezone"}}}}])}
    assert got == {1: dt(2017, 2, 8, 17, 10, 40, 787000), 2: dt(2017, 2, 8, 5, 0, 0),
                   3: None, 4: dt(2017, 2, 9, 0, 0, 0), 5: dt(2017, 2, 8, 22, 5, 2, 55000)}, got
    # onError: the unparsable string comes back as it was
    db.logmessages.insert_one({"_id": 6, "date": "20177-02-09T03:35:02.055",
                               "timezone": "America/New_York"})
    got = {d["_id"]: d["date"] for d in db.logmessages.aggregate([
        {"$match": {"_id": {"$in": [1, 6]}}},
        {"$project": {"date": {"$dateFromString": {"dateString": "$date", "timezone": "$timezone",
                                                    "onError": "$date"}}}}])}
    assert got == {1: dt(2017, 2, 8, 17, 10, 40, 787000), 6: "20177-02-09T03:35:02.055"}, got
    with pytest.raises(OperationFailure) as ei:
        list(db.logmessages.aggregate([{"$project": {"date": {"$dateFromString": {
            "dateString": "$date", "timezone": "$timezone"}}}}]))
    assert ei.value.code == 241, "without onError the parse failure is ConversionFailure"
    # onNull: a missing dateString gives the onNull value
    got = {d["_id"]: d["date"] for d in db.logmessages.aggregate([
        {"$match": {"_id": {"$in": [1, 3]}}},
        {"$project": {"date": {"$dateFromString": {"dateString": "$date", "timezone": "$timezone",
                                                    "onNull": dt(1970, 1, 1)}}}}])}
    assert got == {1: dt(2017, 2, 8, 17, 10, 40, 787000), 3: dt(1970, 1, 1)}, got


def test_date_from_string_with_a_format(coll):
    assert one(coll, {"$dateFromString": {"dateString": "06-15-2018", "format": "%m-%d-%Y"}}) == \
        dt(2018, 6, 15)
    assert one(coll, {"$dateFromString": {"dateString": "15-06-2018", "format": "%d-%m-%Y"}}) == \
        dt(2018, 6, 15)
    assert one(coll, {"$dateFromString": {"dateString": "2017, Week 53", "format": "%G, Week %V"}}) \
        == dt(2018, 1, 1)
    for fmt, code in (("%Y-%q", 18536), ("%Y%", 18535), (5, 40684)):
        with pytest.raises(OperationFailure) as ei:
            one(coll, {"$dateFromString": {"dateString": "2018", "format": fmt}})
        assert ei.value.code == code, fmt
    with pytest.raises(OperationFailure) as ei:
        one(coll, {"$dateFromString": {"dateString": "2018-01", "format": "%Y-%m-%d"}})
    assert ei.value.code == 241 and "Data missing" in str(ei.value)


def test_to_date_and_convert_of_a_string(coll):
    # the documentation's $toDate / $convert examples
    assert one(coll, {"$toDate": "2018-03-03"}) == dt(2018, 3, 3)
    assert one(coll, {"$toDate": "2018-03-20 11:00:06 +0500"}) == dt(2018, 3, 20, 6, 0, 6)
    assert one(coll, {"$convert": {"input": "2018-03-03", "to": "date"}}) == dt(2018, 3, 3)
    assert one(coll, {"$convert": {"input": "2018-02-30", "to": "date", "onError": "bad"}}) == "bad"
    assert one(coll, {"$convert": {"input": None, "to": "date", "onNull": "none"}}) == "none"
    assert one(coll, {"$convert": {"input": "5.5", "to": "double"}}) == 5.5
    with pytest.raises(OperationFailure) as ei:
        one(coll, {"$toDate": "2018-02-30"})
    assert ei.value.code == 241
    with pytest.raises(OperationFailure) as ei:
        one(coll, {"$toDate": "July 4th, 2017"})
    assert ei.value.code == 238, "free-form words atomdb does not read are refused, not invalid"
    assert one(coll, {"$convert": {"input": "5ab1ab1ab1ab1ab1ab1ab1ab", "to": "objectId"}}) == \
        ObjectId("5ab1ab1ab1ab1ab1ab1ab1ab")
    assert one(coll, {"$convert": {"input": "5ab1", "to": "objectId", "onError": 0}}) == 0, \
        "a string that is no ObjectId is a ConversionFailure that onError replaces"
