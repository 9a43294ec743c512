"""$facet, $bucket, $bucketAuto, $sortByCount, $sample and $redact through
pymongo, with the outputs MongoDB's documentation gives for its examples
(artists, artwork, the granularity table, forecasts and accounts), mongod's
error codes for bad specs, the memory limits of the blocking stages, and
$redact after $changeStream."""

import time
from decimal import Decimal

import pytest
from bson import SON
from bson.decimal128 import Decimal128
from pymongo.errors import OperationFailure


def D(s):
    return Decimal128(s)


ARTISTS = [
    {"_id": 1, "last_name": "Bernard", "first_name": "Emil", "year_born": 1868},
    {"_id": 2, "last_name": "Rippl-Ronai", "first_name": "Joszef", "year_born": 1861},
    {"_id": 3, "last_name": "Ostroumova", "first_name": "Anna", "year_born": 1871},
    {"_id": 4, "last_name": "Van Gogh", "first_name": "Vincent", "year_born": 1853},
    {"_id": 5, "last_name": "Maurer", "first_name": "Alfred", "year_born": 1868},
    {"_id": 6, "last_name": "Munch", "first_name": "Edvard", "year_born": 1863},
    {"_id": 7, "last_name": "Redon", "first_name": "Odilon", "year_born": 1840},
    {"_id": 8, "last_name": "Diriks", "first_name": "Edvard", "year_born": 1855},
]

# the $facet page's artwork (The Great Wave has no year, The Scream no price)
ARTWORK = [
    {"_id": 1, "title": "The Pillars of Society", "artist": "Grosz", "year": 1926,
     "price": D("199.99"), "tags": ["painting", "satire", "Expressionism", "caricature"]},
    {"_id": 2, "title": "Melancholy III", "artist": "Munch", "year": 1902,
     "price": D("280.00"), "tags": ["woodcut", "Expressionism"]},
    {"_id": 3, "title": "Dancer", "artist": "Miro", "year": 1925,
     "price": D("76.04"), "tags": ["oil", "Surrealism", "painting"]},
    {"_id": 4, "title": "The Great Wave off Kanagawa", "artist": "Hokusai",
     "price": D("167.30"), "tags": ["woodblock", "ukiyo-e"]},
    {"_id": 5, "title": "The Persistence of Memory", "artist": "Dali", "year": 1931,
     "price": D("483.00"), "tags": ["Surrealism", "painting", "oil"]},
    {"_id": 6, "title": "Composition VII", "artist": "Kandinsky", "year": 1913,
     "price": D("385.00"), "tags": ["oil", "painting", "abstract"]},
    {"_id": 7, "title": "The Scream", "artist": "Munch", "year": 1893,
     "tags": ["Expressionism", "painting", "oil"]},
    {"_id": 8, "title": "Blue Flower", "artist": "O'Keefe", "year": 1918,
     "price": D("118.42"), "tags": ["abstract", "painting"]},
]


@pytest.fixture(scope="module")
def db(client):
    d = client.test_agg_stages
    d.artists.drop()
    d.artists.insert_many(ARTISTS)
    d.artwork.drop()
    d.artwork.insert_many(ARTWORK)
    d.things.drop()
    d.things.insert_many([{"_id": i} for i in range(100)])
    return d


def agg(coll, pipeline):
    return list(coll.aggregate(pipeline))


def fails(db, coll, pipeline):
    """The error of an aggregate sent as a raw command: (code, codeName)."""
    with pytest.raises(OperationFailure) as e:
        db.command(SON([("aggregate", coll), ("pipeline", pipeline), ("cursor", {})]))
    return e.value.code, e.value.details.get("codeName")


BUCKET_ARTISTS = {"$bucket": {
    "groupBy": "$year_born",
    "boundaries": [1840, 1850, 1860, 1870, 1880],
    "default": "Other",
    "output": {
        "count": {"$sum": 1},
        "artists": {"$push": {"name": {"$concat": ["$first_name", " ", "$last_name"]},
                              "year_born": "$year_born"}},
    },
}}


def test_bucket_artists_by_year_born(db):
    def a(n, y):
        return {"name": n, "year_born": y}
    assert agg(db.artists, [BUCKET_ARTISTS]) == [
        {"_id": 1840, "count": 1, "artists": [a("Odilon Redon", 1840)]},
        {"_id": 1850, "count": 2, "artists": [a("Vincent Van Gogh", 1853),
                                              a("Edvard Diriks", 1855)]},
        {"_id": 1860, "count": 4, "artists": [a("Emil Bernard", 1868),
                                              a("Joszef Rippl-Ronai", 1861),
                                              a("Alfred Maurer", 1868), a("Edvard Munch", 1863)]},
        {"_id": 1870, "count": 1, "artists": [a("Anna Ostroumova", 1871)]},
    ]
    out = agg(db.artists, [BUCKET_ARTISTS, {"$match": {"count": {"$gt": 3}}}])
    assert [d["_id"] for d in out] == [1860], "only the 1860s bucket holds more than 3 artists"


def test_bucket_default_bucket_and_errors(db):
    # the $bucket page's $facet example by year: no-year documents go to "Unknown"
    out = agg(db.artwork, [{"$bucket": {"groupBy": "$year", "boundaries": [1890, 1910, 1920, 1940],
                                        "default": "Unknown", "output": {"count": {"$sum": 1}}}}])
    assert out == [{"_id": 1890, "count": 2}, {"_id": 1910, "count": 2},
                   {"_id": 1920, "count": 3}, {"_id": "Unknown", "count": 1}]
    assert fails(db, "artwork", [{"$bucket": {"groupBy": "$year", "boundaries": [1900, 1950]}}]) \
        == (40066, "Location40066"), "a value outside the boundaries needs a default"
    assert fails(db, "artwork", [{"$bucket": {"groupBy": "$year", "boundaries": [1950, 1900]}}]) \
        == (40194, "Location40194")
    assert fails(db, "artwork", [{"$bucket": {"groupBy": "$year", "boundaries": [1900, "x"]}}]) \
        == (40193, "Location40193")
    assert fails(db, "artwork", [{"$bucket": {"groupBy": "$year", "boundaries": [1900, 1950],
                                              "default": 1920}}])[0] == 40199
    assert fails(db, "artwork", [{"$bucket": {"groupBy": "year", "boundaries": [0, 1]}}])[0] == 40202
    assert fails(db, "artwork", [{"$bucket": {"groupBy": "$year", "boundaries": [0, 1],
                                              "bogus": 1}}])[0] == 40197


def test_bucket_auto_artwork_by_price(db):
    # the $bucketAuto page's artwork: every piece priced (The Scream at 159.00)
    prices = {1: "199.99", 2: "280.00", 3: "76.04", 4: "167.30", 5: "483.00", 6: "385.00",
              7: "159.00", 8: "118.42"}
    db.artwork_auto.drop()
    db.artwork_auto.insert_many([{"_id": i, "price": D(p)} for i, p in prices.items()])
    out = agg(db.artwork_auto, [{"$bucketAuto": {"groupBy": "$price", "buckets": 4}}])
    assert out == [
        {"_id": {"min": D("76.04"), "max": D("159.00")}, "count": 2},
        {"_id": {"min": D("159.00"), "max": D("199.99")}, "count": 2},
        {"_id": {"min": D("199.99"), "max": D("385.00")}, "count": 2},
        {"_id": {"min": D("385.00"), "max": D("483.00")}, "count": 2},
    ]
    # the $facet page's artwork lacks The Scream's price: missing groups as null, first
    out = agg(db.artwork, [{"$bucketAuto": {"groupBy": "$price", "buckets": 4}}])
    assert out[0] == {"_id": {"min": None, "max": D("118.42")}, "count": 2}


def test_bucket_auto_granularities_match_the_documentation_table(db):
    def run(g):
        spec = {"groupBy": "$_id", "buckets": 5}
        if g:
            spec["granularity"] = g
        return [(d["_id"]["min"], d["_id"]["max"], d["count"])
                for d in agg(db.things, [{"$bucketAuto": spec}])]
    assert run(None) == [(0, 20, 20), (20, 40, 20), (40, 60, 20), (60, 80, 20), (80, 99, 20)]
    assert run("R20") == [(0, 20, 20), (20, 40, 20), (40, 63, 23), (63, 90, 27), (90, 100, 10)]
    assert run("E24") == [(0, 20, 20), (20, 43, 23), (43, 68, 25), (68, 91, 23), (91, 100, 9)]
    assert run("1-2-5") == [(0, 20, 20), (20, 50, 30), (50, 100, 50)]
    assert run("POWERSOF2") == [(0, 32, 32), (32, 64, 32), (64, 128, 36)]
    # every series is known; the boundaries land on it
    for g in ["R5", "R10", "R40", "R80", "E6", "E12", "E48", "E96", "E192"]:
        b = run(g)
        assert sum(c for _, _, c in b) == 100 and b[-1][1] >= 99, g
    assert fails(db, "things", [{"$bucketAuto": {"groupBy": "$_id", "buckets": 2,
                                                 "granularity": "R7"}}])[0] == 40257
    assert fails(db, "artwork", [{"$bucketAuto": {"groupBy": "$title", "buckets": 2,
                                                  "granularity": "R5"}}])[0] == 40258
    assert fails(db, "things", [{"$bucketAuto": {"groupBy": "$_id", "buckets": 0}}])[0] == 40243


def test_facet_artwork_example(db):
    out = agg(db.artwork, [{"$facet": SON([
        ("categorizedByTags", [{"$unwind": "$tags"}, {"$sortByCount": "$tags"}]),
        ("categorizedByPrice", [
            {"$match": {"price": {"$exists": 1}}},
            {"$bucket": {"groupBy": "$price", "boundaries": [0, 150, 200, 300, 400],
                         "default": "Other",
                         "output": {"count": {"$sum": 1}, "titles": {"$push": "$title"}}}},
        ]),
        ("categorizedByYears(Auto)", [{"$bucketAuto": {"groupBy": "$year", "buckets": 4}}]),
    ])}])
    assert len(out) == 1, "$facet emits one document"
    doc = out[0]
    assert list(doc) == ["categorizedByTags", "categorizedByPrice", "categorizedByYears(Auto)"]
    tags = doc["categorizedByTags"]
    assert {t["_id"]: t["count"] for t in tags} == {
        "painting": 6, "oil": 4, "Expressionism": 3, "Surrealism": 2, "abstract": 2,
        "woodblock": 1, "woodcut": 1, "ukiyo-e": 1, "satire": 1, "caricature": 1}
    counts = [t["count"] for t in tags]
    assert counts == sorted(counts, reverse=True), "sorted by count, descending"
    assert doc["categorizedByPrice"] == [
        {"_id": 0, "count": 2, "titles": ["Dancer", "Blue Flower"]},
        {"_id": 150, "count": 2, "titles": ["The Pillars of Society",
                                            "The Great Wave off Kanagawa"]},
        {"_id": 200, "count": 1, "titles": ["Melancholy III"]},
        {"_id": 300, "count": 1, "titles": ["Composition VII"]},
        {"_id": "Other", "count": 1, "titles": ["The Persistence of Memory"]},
    ]
    assert doc["categorizedByYears(Auto)"] == [
        {"_id": {"min": None, "max": 1902}, "count": 2},
        {"_id": {"min": 1902, "max": 1918}, "count": 2},
        {"_id": {"min": 1918, "max": 1926}, "count": 2},
        {"_id": {"min": 1926, "max": 1931}, "count": 2},
    ]


def test_facet_refusals(db):
    for inner in ({"$out": "x"}, {"$merge": "x"}, {"$facet": {"y": []}}, {"$collStats": {}},
                  {"$geoNear": {}}, {"$indexStats": {}}):
        assert fails(db, "artwork", [{"$facet": {"a": [inner]}}]) == (40600, "Location40600"), \
            inner
    assert fails(db, "artwork", [{"$facet": {}}])[0] == 40169
    assert fails(db, "artwork", [{"$facet": {"a": 1}}])[0] == 40170
    assert fails(db, "artwork", [{"$facet": {"a.b": []}}])[0] == 16412


def test_facet_output_over_16mb_fails(client):
    coll = client.test_agg_stages.big
    coll.drop()
    coll.insert_many([{"_id": i, "s": "x" * (1024 * 1024)} for i in range(17)])
    with pytest.raises(OperationFailure) as e:
        list(coll.aggregate([{"$facet": {"all": []}}]))
    assert e.value.code == 4031700
    # the same documents counted instead fit
    assert list(coll.aggregate([{"$facet": {"n": [{"$count": "n"}]}}])) == [{"n": [{"n": 17}]}]
    coll.drop()


def test_sort_by_count(db):
    out = agg(db.artists, [{"$sortByCount": "$first_name"}])
    assert out[0] == {"_id": "Edvard", "count": 2}
    assert sorted(d["_id"] for d in out[1:]) == ["Alfred", "Anna", "Emil", "Joszef", "Odilon",
                                                  "Vincent"]
    assert all(d["count"] == 1 for d in out[1:])
    assert fails(db, "artists", [{"$sortByCount": "first_name"}])[0] == 40148
    assert fails(db, "artists", [{"$sortByCount": 5}])[0] == 40149


def test_sample_size_and_distinctness(db):
    for _ in range(20):
        out = agg(db.artists, [{"$sample": {"size": 3}}])
        ids = [d["_id"] for d in out]
        assert len(ids) == 3 and len(set(ids)) == 3, "three distinct documents"
        assert set(ids) <= {a["_id"] for a in ARTISTS}
    whole = [d["_id"] for d in agg(db.artists, [{"$sample": {"size": 100}}])]
    assert sorted(whole) == list(range(1, 9)), "a size over the count returns each document once"
    firsts = {agg(db.artists, [{"$sample": {"size": 1}}])[0]["_id"] for _ in range(60)}
    assert len(firsts) > 1, "the choice is random"
    assert fails(db, "artists", [{"$sample": {"size": 0}}]) == (28747, "Location28747")
    assert fails(db, "artists", [{"$sample": {"size": "2"}}])[0] == 28746
    assert fails(db, "artists", [{"$sample": {}}])[0] == 28749


FORECAST = {
    "_id": 1, "title": "123 Department Report", "tags": ["G", "STLW"], "year": 2014,
    "subsections": [
        {"subtitle": "Section 1: Overview", "tags": ["SI", "G"],
         "content": "Section 1: This is the content of section 1."},
        {"subtitle": "Section 2: Analysis", "tags": ["STLW"],
         "content": "Section 2: This is the content of section 2."},
        {"subtitle": "Section 3: Budgeting", "tags": ["TK"],
         "content": {"text": "Section 3: This is the content of section3.", "tags": ["HCS"]}},
    ],
}


def test_redact_forecasts_and_accounts(db):
    db.forecasts.drop()
    db.forecasts.insert_one(FORECAST)
    user_access = ["STLW", "G"]
    # the documentation tests {$size: {$setIntersection: ["$tags", userAccess]}}; atomdb has
    # no set operators yet, so the same test is written with $filter and $in
    can_see = {"$gt": [{"$size": {"$filter": {"input": "$tags",
                                              "cond": {"$in": ["$$this", user_access]}}}}, 0]}
    out = agg(db.forecasts, [{"$match": {"year": 2014}},
                             {"$redact": {"$cond": {"if": can_see, "then": "$$DESCEND",
                                                    "else": "$$PRUNE"}}}])
    expect = dict(FORECAST)
    expect["subsections"] = FORECAST["subsections"][:2]
    assert out == [expect]

    db.accounts.drop()
    db.accounts.insert_one({
        "_id": 1, "level": 1, "acct_id": "xyz123",
        "cc": {"level": 5, "type": "yy", "num": 0,
               "billing_addr": {"level": 5, "addr1": "123 ABC Street", "city": "Some City"},
               "shipping_addr": [{"level": 3, "addr1": "987 XYZ Ave", "city": "Some City"},
                                 {"level": 3, "addr1": "PO Box 0123", "city": "Some City"}]},
        "status": "A"})
    out = agg(db.accounts, [{"$match": {"status": "A"}},
                            {"$redact": {"$cond": {"if": {"$eq": ["$level", 5]},
                                                   "then": "$$PRUNE", "else": "$$DESCEND"}}}])
    assert out == [{"_id": 1, "level": 1, "acct_id": "xyz123", "status": "A"}]
    assert fails(db, "accounts", [{"$redact": "keep it"}]) == (17053, "Location17053")
    assert fails(db, "accounts", [{"$project": {"a": "$$KEEP"}}])[0] == 17276, \
        "$$KEEP is defined only inside $redact"


def test_redact_after_change_stream(client):
    coll = client.test_agg_stages.watched
    coll.drop()
    coll.insert_one({"_id": 0})
    pipeline = [{"$redact": {"$cond": [{"$eq": ["$fullDocument.secret", True]},
                                       "$$PRUNE", "$$DESCEND"]}}]
    with coll.watch(pipeline, max_await_time_ms=500) as s:
        coll.insert_one({"_id": 1, "secret": True})
        coll.insert_one({"_id": 2, "secret": False, "x": 1})
        ev = s.next()
    assert ev["operationType"] == "insert"
    assert ev["fullDocument"] == {"_id": 2, "secret": False, "x": 1}, \
        "the secret insert was pruned from the stream"


def test_blocking_limits_apply(client):
    coll = client.test_agg_stages.limits
    coll.drop()
    coll.insert_many([{"_id": i, "s": "y" * 1000} for i in range(200)])
    admin = client.admin
    old = admin.command("getParameter", 1, internalDocumentSourceGroupMaxMemoryBytes=1,
                        internalQueryMaxBlockingSortMemoryUsageBytes=1)
    try:
        admin.command("setParameter", 1, internalDocumentSourceGroupMaxMemoryBytes=50000,
                      internalQueryMaxBlockingSortMemoryUsageBytes=50000)
        with pytest.raises(OperationFailure) as e:
            list(coll.aggregate([{"$bucketAuto": {"groupBy": "$_id", "buckets": 2}}]))
        assert e.value.code == 292
        with pytest.raises(OperationFailure) as e:
            list(coll.aggregate([{"$sample": {"size": 150}}]))
        assert e.value.code == 292
        assert len(list(coll.aggregate([{"$sample": {"size": 10}}]))) == 10, \
            "a small sample fits"
        # ten buckets of 20 KB each: each fits, together they pass the $group limit
        ten = {"$bucket": {"groupBy": "$_id", "boundaries": list(range(0, 201, 20)),
                           "output": {"s": {"$push": "$s"}}}}
        with pytest.raises(OperationFailure) as e:
            list(coll.aggregate([ten]))
        assert e.value.code == 292
        assert len(list(coll.aggregate([{"$match": {"_id": {"$lt": 40}}}, ten]))) == 2
    finally:
        admin.command("setParameter", 1,
                      internalDocumentSourceGroupMaxMemoryBytes=old[
                          "internalDocumentSourceGroupMaxMemoryBytes"],
                      internalQueryMaxBlockingSortMemoryUsageBytes=old[
                          "internalQueryMaxBlockingSortMemoryUsageBytes"])
    coll.drop()


def test_decimal_granularity_stays_decimal(db):
    db.dec.drop()
    db.dec.insert_many([{"p": D(s)} for s in ["1.5", "3", "7", "12"]])
    out = agg(db.dec, [{"$bucketAuto": {"groupBy": "$p", "buckets": 2, "granularity": "1-2-5"}}])
    assert [d["count"] for d in out] == [2, 2]
    for d in out:
        assert isinstance(d["_id"]["max"], Decimal128), "a decimal key rounds to a decimal"
    assert out[0]["_id"]["max"].to_decimal() == Decimal("5")
    assert out[1]["_id"]["max"].to_decimal() == Decimal("20")


SLOW = {"$reduce": {"input": {"$range": [0, 3000]}, "initialValue": 0,
                    "in": {"$add": ["$$value", "$$this"]}}}  # some ms per document


@pytest.mark.parametrize("stage", [
    {"$redact": {"$cond": [{"$gte": [SLOW, 0]}, "$$KEEP", "$$PRUNE"]}},
    {"$bucket": {"groupBy": SLOW, "boundaries": [0, 10 ** 9]}},
    {"$bucketAuto": {"groupBy": SLOW, "buckets": 2}},
    {"$sortByCount": SLOW},
    {"$facet": {"a": [{"$project": {"x": SLOW}}]}},
], ids=["redact", "bucket", "bucketAuto", "sortByCount", "facet"])
def test_max_time_ms_interrupts_the_stages(client, stage):
    coll = client.test_agg_stages.slow
    if coll.estimated_document_count() != 3000:
        coll.drop()
        coll.insert_many([{"_id": i} for i in range(3000)])
    t0 = time.monotonic()
    with pytest.raises(OperationFailure) as e:
        list(coll.aggregate([stage], maxTimeMS=100))
    assert e.value.code == 50, "MaxTimeMSExpired (got %s)" % e.value
    assert time.monotonic() - t0 < 3, "stopped inside the stage, not after its many seconds"
