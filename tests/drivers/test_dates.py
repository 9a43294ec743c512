"""Date expression operators through pymongo, with the outputs MongoDB's
documentation gives for its examples: parts of a date in UTC, in an Olson
time zone (ICU's tz data) and at a fixed offset, formatting, arithmetic that
clamps to the month's end, truncation to weeks, and the unknown-zone error."""

import datetime

import pytest
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
