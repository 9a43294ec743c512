"""$lookup, $unionWith and $graphLookup through pymongo, with the data and
outputs of MongoDB's documentation examples (orders/inventory, array local
fields, let + pipeline with the warehouses, the concise syntax, the sales
union, the employee hierarchy, airports with maxDepth, golfers with
restrictSearchWithMatch); foreign indexes, views, transactions and missing
collections; the aggregate explain shape; and mongod's errors."""

import datetime
import threading

import pytest
from bson.son import SON
from pymongo import MongoClient
from pymongo.errors import OperationFailure

from atomdb_clients import collection_name


@pytest.fixture
def db(client, request):
    name = "lookup_" + collection_name(request, 40)
    client.drop_database(name)
    yield client[name]
    client.drop_database(name)


def agg(db, coll, pipeline, **kw):
    cmd = SON([("aggregate", coll), ("pipeline", pipeline), ("cursor", {})])
    cmd.update(kw)
    return db.command(cmd)


def err(db, coll, pipeline):
    with pytest.raises(OperationFailure) as e:
        list(db[coll].aggregate(pipeline))
    return e.value


def ids(docs):
    return sorted(d["_id"] for d in docs)


# --- $lookup: localField / foreignField ---------------------------------------

ORDERS = [
    {"_id": 1, "item": "almonds", "price": 12, "quantity": 2},
    {"_id": 2, "item": "pecans", "price": 20, "quantity": 1},
    {"_id": 3},
]
INVENTORY = [
    {"_id": 1, "sku": "almonds", "description": "product 1", "instock": 120},
    {"_id": 2, "sku": "bread", "description": "product 2", "instock": 80},
    {"_id": 3, "sku": "cashews", "description": "product 3", "instock": 60},
    {"_id": 4, "sku": "pecans", "description": "product 4", "instock": 70},
    {"_id": 5, "sku": None, "description": "Incomplete"},
    {"_id": 6},
]
JOIN = {"from": "inventory", "localField": "item", "foreignField": "sku", "as": "inventory_docs"}


def seed_orders(db):
    db.orders.insert_many(ORDERS)
    db.inventory.insert_many(INVENTORY)


def test_single_equality_join_documentation_example(db):
    seed_orders(db)
    out = list(db.orders.aggregate([{"$lookup": JOIN}, {"$sort": {"_id": 1}}]))
    assert out == [
        {**ORDERS[0], "inventory_docs": [INVENTORY[0]]},
        {**ORDERS[1], "inventory_docs": [INVENTORY[3]]},
        # a missing local field matches null and missing foreign fields
        {"_id": 3, "inventory_docs": [INVENTORY[4], INVENTORY[5]]},
    ]


def test_equality_join_uses_the_foreign_index(db, client):
    seed_orders(db)
    db.inventory.create_index("sku")
    out = list(db.orders.aggregate([{"$lookup": JOIN}, {"$sort": {"_id": 1}}]))
    assert [ids(d["inventory_docs"]) for d in out] == [[1], [4], [5, 6]]
    ex = db.command(SON([("explain", SON([("aggregate", "orders"),
                                         ("pipeline", [{"$lookup": JOIN}]), ("cursor", {})])),
                         ("verbosity", "executionStats")]))
    lookup = ex["stages"][1]
    assert lookup["$lookup"]["from"] == "inventory"
    assert lookup["nReturned"] == 3
    assert lookup["collectionScans"] == 0, lookup
    # only the matching documents were read: 1 + 1 + 2
    assert lookup["totalDocsExamined"] == 4, lookup
    db.inventory.drop_index("sku_1")
    ex = db.command(SON([("explain", SON([("aggregate", "orders"),
                                         ("pipeline", [{"$lookup": JOIN}]), ("cursor", {})])),
                         ("verbosity", "executionStats")]))
    assert ex["stages"][1]["collectionScans"] == 3


def test_join_on_id_uses_the_id_index(db):
    db.items.insert_many([{"_id": i, "name": "item%d" % i} for i in range(50)])
    db.orders.insert_many([{"_id": i, "item": i % 50} for i in range(20)])
    spec = {"from": "items", "localField": "item", "foreignField": "_id", "as": "it"}
    out = list(db.orders.aggregate([{"$lookup": spec}, {"$sort": {"_id": 1}}]))
    assert [d["it"] for d in out] == [[{"_id": i, "name": "item%d" % i}] for i in range(20)]
    ex = db.command(SON([("explain", SON([("aggregate", "orders"),
                                         ("pipeline", [{"$lookup": spec}]), ("cursor", {})])),
                         ("verbosity", "executionStats")]))
    assert ex["stages"][1]["collectionScans"] == 0
    assert ex["stages"][1]["totalDocsExamined"] == 20


def test_array_local_field_matches_any_element(db):
    db.classes.insert_many([
        {"_id": 1, "title": "Reading is ...", "enrollmentlist": ["giraffe2", "pandabear", "artie"],
         "days": ["M", "W", "F"]},
        {"_id": 2, "title": "But Writing ...", "enrollmentlist": ["giraffe1", "artie"],
         "days": ["T", "F"]},
    ])
    joined = datetime.datetime(2016, 5, 1)
    db.members.insert_many([
        {"_id": 1, "name": "artie", "joined": joined, "status": "A"},
        {"_id": 2, "name": "giraffe", "joined": joined, "status": "D"},
        {"_id": 3, "name": "giraffe1", "status": "A"},
        {"_id": 4, "name": "panda", "joined": joined, "status": "A"},
        {"_id": 5, "name": "pandabear", "joined": joined, "status": "A"},
        {"_id": 6, "name": "giraffe2", "joined": joined, "status": "D"},
    ])
    out = list(db.classes.aggregate([
        {"$lookup": {"from": "members", "localField": "enrollmentlist", "foreignField": "name",
                     "as": "enrollee_info"}},
        {"$sort": {"_id": 1}}]))
    assert [ids(d["enrollee_info"]) for d in out] == [[1, 5, 6], [1, 3]]


def test_missing_foreign_collection_gives_empty_arrays(db):
    db.orders.insert_many(ORDERS[:2])
    out = list(db.orders.aggregate([{"$lookup": JOIN}]))
    assert [d["inventory_docs"] for d in out] == [[], []]


def test_as_replaces_an_existing_field_and_may_be_dotted(db):
    seed_orders(db)
    db.orders.update_one({"_id": 1}, {"$set": {"x": {"keep": 1}, "inventory_docs": "old"}})
    out = list(db.orders.aggregate([
        {"$match": {"_id": 1}},
        {"$lookup": JOIN},
        {"$lookup": {**JOIN, "as": "x.inv"}}]))
    assert out[0]["inventory_docs"] == [INVENTORY[0]]
    assert out[0]["x"] == {"keep": 1, "inv": [INVENTORY[0]]}


def test_foreign_collection_may_be_a_view(db):
    seed_orders(db)
    db.command(SON([("create", "instock"), ("viewOn", "inventory"),
                    ("pipeline", [{"$match": {"instock": {"$gte": 75}}},
                                  {"$project": {"description": 0}}])]))
    out = list(db.orders.aggregate([
        {"$lookup": {**JOIN, "from": "instock"}}, {"$sort": {"_id": 1}}]))
    assert out[0]["inventory_docs"] == [{"_id": 1, "sku": "almonds", "instock": 120}]
    assert out[1]["inventory_docs"] == []  # pecans: 70 in stock, filtered by the view
    assert out[2]["inventory_docs"] == []


def test_a_view_may_hold_a_lookup(db):
    seed_orders(db)
    db.command(SON([("create", "orders_with_stock"), ("viewOn", "orders"),
                    ("pipeline", [{"$lookup": JOIN}])]))
    out = list(db.orders_with_stock.find({"_id": 2}))
    assert out == [{**ORDERS[1], "inventory_docs": [INVENTORY[3]]}]


def test_lookup_reads_inside_the_transaction(db, client):
    seed_orders(db)
    with client.start_session() as s:
        with s.start_transaction():
            db.inventory.insert_one({"_id": 7, "sku": "pecans", "instock": 1}, session=s)
            db.inventory.delete_one({"_id": 1}, session=s)
            out = list(db.orders.aggregate([{"$lookup": JOIN}, {"$sort": {"_id": 1}}],
                                           session=s))
            assert ids(out[0]["inventory_docs"]) == []
            assert ids(out[1]["inventory_docs"]) == [4, 7]
            # outside the transaction nothing changed yet
            out = list(db.orders.aggregate([{"$lookup": JOIN}, {"$sort": {"_id": 1}}]))
            assert ids(out[0]["inventory_docs"]) == [1]
            assert ids(out[1]["inventory_docs"]) == [4]
            s.abort_transaction()


def test_all_reads_of_one_aggregate_see_one_snapshot(db):
    """Joins run in slices between other requests; a counter bumped meanwhile
    must show one value in every joined copy of one aggregate."""
    db.items.insert_one({"_id": 0, "v": 0})
    db.orders.insert_many([{"_id": i, "item": 0} for i in range(20000)])
    stop = threading.Event()
    bumps = [0]

    def bump():
        while not stop.is_set():
            db.items.update_one({"_id": 0}, {"$inc": {"v": 1}})
            bumps[0] += 1

    t = threading.Thread(target=bump)
    t.start()
    try:
        seen = set()
        for _ in range(3):
            out = db.orders.aggregate([
                {"$lookup": {"from": "items", "localField": "item", "foreignField": "_id",
                             "as": "it"}},
                {"$group": {"_id": {"$first": "$it.v"}}}])
            seen = {d["_id"] for d in out}
            assert len(seen) == 1, "one aggregate saw several versions: %s" % sorted(seen)
    finally:
        stop.set()
        t.join()
    assert bumps[0] > 0


# --- $lookup: let + pipeline ------------------------------------------------

WH_ORDERS = [
    {"_id": 1, "item": "almonds", "price": 12, "ordered": 2},
    {"_id": 2, "item": "pecans", "price": 20, "ordered": 1},
    {"_id": 3, "item": "cookies", "price": 10, "ordered": 60},
]
WAREHOUSES = [
    {"_id": 1, "stock_item": "almonds", "warehouse": "A", "instock": 120},
    {"_id": 2, "stock_item": "pecans", "warehouse": "A", "instock": 80},
    {"_id": 3, "stock_item": "almonds", "warehouse": "B", "instock": 60},
    {"_id": 4, "stock_item": "cookies", "warehouse": "B", "instock": 40},
    {"_id": 5, "stock_item": "cookies", "warehouse": "A", "instock": 80},
]


def test_let_and_pipeline_warehouses_documentation_example(db):
    db.orders.insert_many(WH_ORDERS)
    db.warehouses.insert_many(WAREHOUSES)
    out = list(db.orders.aggregate([
        {"$lookup": {
            "from": "warehouses",
            "let": {"order_item": "$item", "order_qty": "$ordered"},
            "pipeline": [
                {"$match": {"$expr": {"$and": [
                    {"$eq": ["$stock_item", "$$order_item"]},
                    {"$gte": ["$instock", "$$order_qty"]}]}}},
                {"$project": {"stock_item": 0, "_id": 0}}],
            "as": "stockdata"}},
        {"$sort": {"_id": 1}}]))
    assert [d["stockdata"] for d in out] == [
        [{"warehouse": "A", "instock": 120}, {"warehouse": "B", "instock": 60}],
        [{"warehouse": "A", "instock": 80}],
        [{"warehouse": "A", "instock": 80}],
    ]


def test_uncorrelated_pipeline_and_command_let(db):
    db.orders.insert_many(WH_ORDERS)
    db.warehouses.insert_many(WAREHOUSES)
    out = agg(db, "orders", [
        {"$lookup": {"from": "warehouses",
                     "pipeline": [{"$match": {"$expr": {"$eq": ["$warehouse", "$$wh"]}}},
                                  {"$count": "n"}],
                     "as": "a"}},
        {"$project": {"a": 1}}], let={"wh": "A"})["cursor"]["firstBatch"]
    assert [d["a"] for d in out] == [[{"n": 3}]] * 3


def test_leading_match_of_the_pipeline_narrows_the_read(db):
    db.orders.insert_many(WH_ORDERS)
    db.warehouses.insert_many(WAREHOUSES)
    db.warehouses.create_index("stock_item")
    spec = {"from": "warehouses", "let": {"it": "$item"},
            "pipeline": [{"$match": {"stock_item": "cookies",
                                     "$expr": {"$lt": ["$instock", 50]}}},
                         {"$project": {"_id": 1}}],
            "as": "w"}
    ex = db.command(SON([("explain", SON([("aggregate", "orders"),
                                         ("pipeline", [{"$lookup": spec}]), ("cursor", {})])),
                         ("verbosity", "executionStats")]))
    lookup = ex["stages"][1]
    assert lookup["collectionScans"] == 0
    assert lookup["totalDocsExamined"] == 6  # the two cookies documents, per order
    out = list(db.orders.aggregate([{"$lookup": spec}]))
    assert [d["w"] for d in out] == [[{"_id": 4}]] * 3


def test_concise_syntax_localfield_with_pipeline(db):
    db.restaurants.insert_many([
        {"_id": 1, "name": "American Steak House", "food": ["filet", "sirloin"],
         "beverages": ["beer", "wine"]},
        {"_id": 2, "name": "Honest John Pizza", "food": ["cheese pizza", "pepperoni pizza"],
         "beverages": ["soda"]},
    ])
    db.orders.insert_many([
        {"_id": 1, "item": "filet", "restaurant_name": "American Steak House"},
        {"_id": 2, "item": "cheese pizza", "restaurant_name": "Honest John Pizza",
         "drink": "lemonade"},
        {"_id": 3, "item": "cheese pizza", "restaurant_name": "Honest John Pizza",
         "drink": "soda"},
    ])
    out = list(db.orders.aggregate([
        {"$lookup": {"from": "restaurants", "localField": "restaurant_name",
                     "foreignField": "name", "let": {"orders_drink": "$drink"},
                     "pipeline": [{"$match": {"$expr": {"$in": ["$$orders_drink",
                                                                  "$beverages"]}}}],
                     "as": "matches"}},
        {"$sort": {"_id": 1}}]))
    assert [ids(d["matches"]) for d in out] == [[], [], [2]]


def test_nested_lookup_sees_the_outer_variables(db):
    db.orders.insert_many(WH_ORDERS)
    db.warehouses.insert_many(WAREHOUSES)
    db.sites.insert_many([{"_id": "A", "city": "Oslo"}, {"_id": "B", "city": "Lima"}])
    out = list(db.orders.aggregate([
        {"$match": {"_id": 1}},
        {"$lookup": {
            "from": "warehouses", "let": {"it": "$item"},
            "pipeline": [
                {"$match": {"$expr": {"$eq": ["$stock_item", "$$it"]}}},
                {"$lookup": {"from": "sites", "let": {"w": "$warehouse"},
                             "pipeline": [{"$match": {"$expr": {"$eq": ["$_id", "$$w"]}}},
                                          {"$project": {"_id": 0, "city": 1,
                                                        "for": "$$it"}}],
                             "as": "site"}},
                {"$project": {"_id": 0, "warehouse": 1, "site": 1}}],
            "as": "w"}}]))
    assert out[0]["w"] == [
        {"warehouse": "A", "site": [{"city": "Oslo", "for": "almonds"}]},
        {"warehouse": "B", "site": [{"city": "Lima", "for": "almonds"}]},
    ]


# --- $lookup errors ------------------------------------------------------------


@pytest.mark.parametrize("spec,code,words", [
    ({"from": "inventory", "localField": "item", "foreignField": "sku"}, 9,
     "must specify 'as' field for a $lookup"),
    ({"from": "inventory", "localField": "item", "as": "x"}, 9,
     "$lookup requires either 'pipeline' or both 'localField' and 'foreignField'"),
    ({"from": "inventory", "localField": 1, "foreignField": "sku", "as": "x"}, 9,
     "$lookup argument 'localField' must be a string"),
    ({"from": 5, "pipeline": [], "as": "x"}, 9, "$lookup 'from' field must be a string"),
    ({"from": {"db": "other", "coll": "c"}, "pipeline": [], "as": "x"}, 9,
     "$lookup with syntax {from: {db:<>, coll:<>},..} is not supported for db: other"),
    ({"from": "inventory", "pipeline": [], "as": "x", "let": 5}, 9,
     "$lookup argument 'let' must be an object"),
    ({"from": "inventory", "pipeline": 5, "as": "x"}, 9, "pipeline"),
    ({"from": "inventory", "localField": "item", "foreignField": "sku", "as": "x",
      "let": {"a": 1}}, 9, "$lookup with a 'let' argument must also specify 'pipeline'"),
    ({"from": "inventory", "pipeline": [], "as": "x", "bogus": "1"}, 9,
     "unknown argument to $lookup: bogus"),
    ({"from": "inventory", "pipeline": [{"$out": "y"}], "as": "x"}, 51047,
     "$out is not allowed within a $lookup's sub-pipeline"),
    ({"from": "inventory", "pipeline": [{"$merge": "y"}], "as": "x"}, 51047,
     "$merge is not allowed within a $lookup's sub-pipeline"),
    ({"from": "inventory", "pipeline": [{"$match": {"$expr": "$$nope"}}], "as": "x"}, 17276,
     "Use of undefined variable: nope"),
    ({"from": "inventory", "pipeline": [], "as": "$x"}, 16410, "may not start with '$'"),
    ({"from": "inventory", "pipeline": [], "let": {"Bad": 1}, "as": "x"}, 16867,
     "starts with an invalid character for a user variable name"),
])
def test_lookup_errors_as_mongod(db, spec, code, words):
    seed_orders(db)
    e = err(db, "orders", [{"$lookup": spec}])
    assert e.code == code, e.details
    assert words in str(e), str(e)
    assert db.orders.count_documents({}) == 3  # the server goes on serving


def test_lookup_spec_must_be_a_document(db):
    seed_orders(db)
    e = err(db, "orders", [{"$lookup": "inventory"}])
    assert e.code == 9
    assert "the $lookup stage specification must be an object, but found string" in str(e)


def test_too_deeply_nested_lookup_is_refused(db):
    seed_orders(db)
    stage = {"$lookup": {"from": "inventory", "pipeline": [], "as": "x"}}
    for _ in range(21):
        stage = {"$lookup": {"from": "inventory", "pipeline": [stage], "as": "x"}}
    e = err(db, "orders", [stage])
    assert e.code == 232
    assert e.details["codeName"] == "MaxSubPipelineDepthExceeded"


def test_lookup_into_a_view_that_reads_itself_stops(db):
    seed_orders(db)
    db.command(SON([("create", "loop"), ("viewOn", "orders"),
                    ("pipeline", [{"$lookup": {"from": "loop", "pipeline": [], "as": "x"}}])]))
    e = err(db, "loop", [])
    assert e.code == 165


def test_lookup_is_refused_after_change_stream(db):
    seed_orders(db)
    e = err(db, "orders", [{"$changeStream": {}}, {"$lookup": JOIN}])
    assert e.code == 20  # not permitted in a $changeStream pipeline, as mongod


def test_lookup_result_past_16mb_is_refused(db):
    big = "x" * (1024 * 1024)
    db.blobs.insert_many([{"_id": i, "k": 1, "data": big} for i in range(17)])
    db.orders.insert_one({"_id": 1, "k": 1})
    e = err(db, "orders", [{"$lookup": {"from": "blobs", "localField": "k", "foreignField": "k",
                                        "as": "b"}}])
    assert e.code == 10334
    assert e.details["codeName"] == "BSONObjectTooLarge"
    # matched but unwound away in the sub-pipeline: fine
    out = list(db.orders.aggregate([{"$lookup": {"from": "blobs", "localField": "k",
                                                 "foreignField": "k", "pipeline": [
                                                     {"$project": {"data": 0}}], "as": "b"}}]))
    assert len(out[0]["b"]) == 17


# --- $unionWith -----------------------------------------------------------------

SALES = {
    "sales_2017": [("General Store", "Chocolates", 150), ("ShopMart", "Chocolates", 50),
                   ("General Store", "Cookies", 100), ("ShopMart", "Cookies", 120),
                   ("General Store", "Pie", 10), ("ShopMart", "Pie", 5)],
    "sales_2018": [("General Store", "Cheese", 30), ("ShopMart", "Cheese", 50),
                   ("General Store", "Chocolates", 125), ("ShopMart", "Chocolates", 150),
                   ("General Store", "Cookies", 200), ("ShopMart", "Cookies", 100),
                   ("ShopMart", "Nuts", 100), ("General Store", "Pie", 30),
                   ("ShopMart", "Pie", 25)],
    "sales_2019": [("General Store", "Cheese", 50), ("ShopMart", "Cheese", 20),
                   ("General Store", "Chocolates", 125), ("ShopMart", "Chocolates", 150),
                   ("General Store", "Cookies", 200), ("ShopMart", "Cookies", 100),
                   ("General Store", "Nuts", 80), ("ShopMart", "Nuts", 30),
                   ("General Store", "Pie", 50), ("ShopMart", "Pie", 75)],
    "sales_2020": [("General Store", "Cheese", 100), ("ShopMart", "Cheese", 100),
                   ("General Store", "Chocolates", 200), ("ShopMart", "Chocolates", 300),
                   ("General Store", "Cookies", 500), ("ShopMart", "Cookies", 400),
                   ("General Store", "Nuts", 100), ("ShopMart", "Nuts", 200),
                   ("General Store", "Pie", 100), ("ShopMart", "Pie", 100)],
}


def seed_sales(db):
    for name, rows in SALES.items():
        db[name].insert_many([{"store": s, "item": i, "quantity": q} for s, i, q in rows])


def test_union_sales_by_item_documentation_example(db):
    seed_sales(db)
    out = list(db.sales_2017.aggregate([
        {"$unionWith": "sales_2018"},
        {"$unionWith": "sales_2019"},
        {"$unionWith": "sales_2020"},
        {"$group": {"_id": "$item", "total": {"$sum": "$quantity"}}},
        {"$sort": {"total": -1}}]))
    assert out == [{"_id": "Cookies", "total": 1720}, {"_id": "Chocolates", "total": 1250},
                   {"_id": "Nuts", "total": 510}, {"_id": "Pie", "total": 395},
                   {"_id": "Cheese", "total": 350}]


def test_union_with_pipelines_report_by_year(db):
    seed_sales(db)
    out = list(db.sales_2017.aggregate([
        {"$set": {"_id": "2017"}},
        {"$unionWith": {"coll": "sales_2018", "pipeline": [{"$set": {"_id": "2018"}}]}},
        {"$unionWith": {"coll": "sales_2019", "pipeline": [{"$set": {"_id": "2019"}}]}},
        {"$unionWith": {"coll": "sales_2020", "pipeline": [{"$set": {"_id": "2020"}}]}},
        {"$sort": {"_id": 1, "store": 1, "item": 1}}]))
    assert len(out) == 35
    assert out[0] == {"_id": "2017", "store": "General Store", "item": "Chocolates",
                      "quantity": 150}
    assert out[-1] == {"_id": "2020", "store": "ShopMart", "item": "Pie", "quantity": 100}
    # the input documents come first, then the union's, in order
    plain = list(db.sales_2017.aggregate([{"$unionWith": "sales_2018"},
                                          {"$project": {"_id": 0, "item": 1}}]))
    assert [d["item"] for d in plain[:6]] == [i for _, i, _ in SALES["sales_2017"]]
    assert [d["item"] for d in plain[6:]] == [i for _, i, _ in SALES["sales_2018"]]


def test_union_with_documents_and_missing_collection(db):
    db.a.insert_one({"_id": 1})
    out = list(db.a.aggregate([{"$unionWith": "nothing_here"},
                               {"$unionWith": {"pipeline": [{"$documents": [{"_id": 2}]}]}}]))
    assert out == [{"_id": 1}, {"_id": 2}]


@pytest.mark.parametrize("spec,code", [
    (5, 9),
    ({"coll": "x", "bogus": 1}, 40415),
    ({"coll": 1}, 14),
    ({"pipeline": [{"$match": {}}]}, 9),
    ({"coll": "x", "pipeline": [{"$out": "y"}]}, 31441),
])
def test_union_errors_as_mongod(db, spec, code):
    db.a.insert_one({"_id": 1})
    assert err(db, "a", [{"$unionWith": spec}]).code == code


# --- $graphLookup -----------------------------------------------------------------


def test_graph_employees_reporting_hierarchy_documentation_example(db):
    db.employees.insert_many([
        {"_id": 1, "name": "Dev"},
        {"_id": 2, "name": "Eliot", "reportsTo": "Dev"},
        {"_id": 3, "name": "Ron", "reportsTo": "Eliot"},
        {"_id": 4, "name": "Andrew", "reportsTo": "Eliot"},
        {"_id": 5, "name": "Asya", "reportsTo": "Ron"},
        {"_id": 6, "name": "Dan", "reportsTo": "Andrew"},
    ])
    out = list(db.employees.aggregate([
        {"$graphLookup": {"from": "employees", "startWith": "$reportsTo",
                          "connectFromField": "reportsTo", "connectToField": "name",
                          "as": "reportingHierarchy"}},
        {"$sort": {"_id": 1}}]))
    assert [ids(d["reportingHierarchy"]) for d in out] == [
        [], [1], [1, 2], [1, 2], [1, 2, 3], [1, 2, 4]]


def test_graph_airports_max_depth_documentation_example(db):
    db.airports.insert_many([
        {"_id": 0, "airport": "JFK", "connects": ["BOS", "ORD"]},
        {"_id": 1, "airport": "BOS", "connects": ["JFK", "PWM"]},
        {"_id": 2, "airport": "ORD", "connects": ["JFK"]},
        {"_id": 3, "airport": "PWM", "connects": ["BOS", "LHR"]},
        {"_id": 4, "airport": "LHR", "connects": ["PWM"]},
    ])
    db.airports.create_index("airport")
    db.travelers.insert_many([
        {"_id": 1, "name": "Dev", "nearestAirport": "JFK"},
        {"_id": 2, "name": "Eliot", "nearestAirport": "JFK"},
        {"_id": 3, "name": "Jeff", "nearestAirport": "BOS"},
    ])
    out = list(db.travelers.aggregate([
        {"$graphLookup": {"from": "airports", "startWith": "$nearestAirport",
                          "connectFromField": "connects", "connectToField": "airport",
                          "maxDepth": 2, "depthField": "numConnections",
                          "as": "destinations"}},
        {"$sort": {"_id": 1}}]))

    def hops(d):
        return sorted((x["airport"], x["numConnections"]) for x in d["destinations"])

    assert hops(out[0]) == [("BOS", 1), ("JFK", 0), ("ORD", 1), ("PWM", 2)]
    assert hops(out[1]) == hops(out[0])
    assert hops(out[2]) == [("BOS", 0), ("JFK", 1), ("LHR", 2), ("ORD", 2), ("PWM", 1)]
    # depthField is a 64-bit integer, as mongod's NumberLong
    raw = db.command(SON([("aggregate", "travelers"), ("pipeline", [
        {"$match": {"_id": 1}},
        {"$graphLookup": {"from": "airports", "startWith": "$nearestAirport",
                          "connectFromField": "connects", "connectToField": "airport",
                          "maxDepth": 0, "depthField": "n", "as": "d"}},
        {"$project": {"t": {"$type": {"$first": "$d.n"}}, "c": {"$size": "$d"}}}]),
        ("cursor", {})]))["cursor"]["firstBatch"]
    assert raw == [{"_id": 1, "t": "long", "c": 1}]


def test_graph_restrict_search_with_match_documentation_example(db):
    db.people.insert_many([
        {"_id": 1, "name": "Tanya Jordan",
         "friends": ["Shirley Soto", "Terry Hawkins", "Carole Hale"],
         "hobbies": ["tennis", "unicycling", "golf"]},
        {"_id": 2, "name": "Carole Hale",
         "friends": ["Joseph Dennis", "Tanya Jordan", "Terry Hawkins"],
         "hobbies": ["archery", "golf", "woodworking"]},
        {"_id": 3, "name": "Terry Hawkins",
         "friends": ["Tanya Jordan", "Carole Hale", "Angelo Ward"],
         "hobbies": ["knitting", "frisbee"]},
        {"_id": 4, "name": "Joseph Dennis", "friends": ["Angelo Ward", "Carole Hale"],
         "hobbies": ["tennis", "golf", "topiary"]},
        {"_id": 5, "name": "Angelo Ward",
         "friends": ["Terry Hawkins", "Shirley Soto", "Joseph Dennis"],
         "hobbies": ["travel", "ceramics", "golf"]},
        {"_id": 6, "name": "Shirley Soto",
         "friends": ["Angelo Ward", "Tanya Jordan", "Carole Hale"],
         "hobbies": ["frisbee", "set theory"]},
    ])
    out = list(db.people.aggregate([
        {"$match": {"name": "Tanya Jordan"}},
        {"$graphLookup": {"from": "people", "startWith": "$friends",
                          "connectFromField": "friends", "connectToField": "name",
                          "as": "golfers", "restrictSearchWithMatch": {"hobbies": "golf"}}},
        {"$project": {"name": 1, "friends": 1, "connections who play golf": "$golfers.name"}}]))
    assert sorted(out[0]["connections who play golf"]) == sorted(
        ["Joseph Dennis", "Tanya Jordan", "Angelo Ward", "Carole Hale"])


@pytest.mark.parametrize("extra,code", [
    ({"maxDepth": -1}, 40101),
    ({"maxDepth": "2"}, 40100),
    ({"maxDepth": 1.5}, 40102),
    ({"maxDepth": float("nan")}, 40102),
    ({"maxDepth": float("inf")}, 40102),
    ({"depthField": "a.$b"}, 16410),
    ({"zz": 1}, 40104),
    ({"as": 5}, 40103),
    ({"restrictSearchWithMatch": 5}, 40185),
    ({"restrictSearchWithMatch": {"a": {"$bogus": 1}}}, 2),
])
def test_graph_errors_as_mongod(db, extra, code):
    db.a.insert_one({"_id": 1})
    spec = {"from": "a", "startWith": "$x", "connectFromField": "x", "connectToField": "y",
            "as": "r", **extra}
    assert err(db, "a", [{"$graphLookup": spec}]).code == code


def test_graph_missing_required_field(db):
    db.a.insert_one({"_id": 1})
    e = err(db, "a", [{"$graphLookup": {"from": "a", "startWith": "$x",
                                        "connectFromField": "x", "as": "r"}}])
    assert e.code == 40105
    assert e.details["codeName"] == "Location40105"


# --- explain ----------------------------------------------------------------------


def test_aggregate_explain_true_has_mongods_stages_shape(db):
    seed_orders(db)
    res = db.command(SON([("aggregate", "orders"),
                          ("pipeline", [{"$match": {"_id": {"$gte": 2}}}, {"$lookup": JOIN}]),
                          ("explain", True)]))
    assert res["ok"] == 1
    assert res["explainVersion"] == "1"
    cursor = res["stages"][0]["$cursor"]["queryPlanner"]
    assert cursor["namespace"] == db.name + ".orders"
    assert cursor["parsedQuery"] == {"_id": {"$gte": 2}}
    assert cursor["winningPlan"]["stage"] in ("FETCH", "IXSCAN", "COLLSCAN")
    assert res["stages"][1] == {"$lookup": JOIN}
    assert res["command"]["aggregate"] == "orders"
    assert res["serverInfo"]["version"].startswith("7.0")
    assert "cursor" not in res  # nothing was run


def test_aggregate_explain_of_a_lone_match_is_the_query_plan(db):
    seed_orders(db)
    res = db.command(SON([("aggregate", "orders"), ("pipeline", [{"$match": {"_id": 1}}]),
                          ("explain", True)]))
    assert "stages" not in res
    assert res["queryPlanner"]["winningPlan"]["stage"] in ("IDHACK", "EXPRESS_IDHACK")


def test_explain_command_verbosities(db):
    seed_orders(db)
    inner = SON([("aggregate", "orders"), ("pipeline", [{"$lookup": JOIN}, {"$limit": 2}]),
                 ("cursor", {})])
    qp = db.command(SON([("explain", inner), ("verbosity", "queryPlanner")]))
    assert "nReturned" not in qp["stages"][1]
    es = db.command(SON([("explain", inner), ("verbosity", "executionStats")]))
    assert es["stages"][0]["$cursor"]["executionStats"]["nReturned"] == 3
    assert [s.get("nReturned") for s in es["stages"][1:]] == [3, 2]
    assert list(es["stages"][2].keys())[0] == "$limit"
    ap = db.command(SON([("explain", inner)]))  # allPlansExecution, the default
    assert ap["stages"][1]["nReturned"] == 3
    with pytest.raises(OperationFailure) as e:
        db.command(SON([("explain", inner), ("verbosity", "everything")]))
    assert e.value.code == 2


def test_explain_does_not_write_out(db):
    seed_orders(db)
    db.command(SON([("aggregate", "orders"), ("pipeline", [{"$lookup": JOIN}, {"$out": "o2"}]),
                    ("explain", True)]))
    assert "o2" not in db.list_collection_names()


# --- privileges ---------------------------------------------------------------------


def test_nested_pipelines_need_find_on_what_they_read(atomdb_factory):
    s = atomdb_factory("--auth")
    MongoClient(s.uri("directConnection=true")).admin.command(
        "createUser", "admin", pwd="pw-admin", roles=["root"])
    admin = MongoClient(s.uri("directConnection=true"), username="admin", password="pw-admin",
                        authSource="admin")
    app = admin.app
    app.orders.insert_many(ORDERS)
    app.inventory.insert_many(INVENTORY)
    app.secret.insert_one({"_id": 1, "sku": "almonds", "pin": 1234})
    app.command("createRole", "ordersAndInventory", privileges=[
        {"resource": {"db": "app", "collection": "orders"}, "actions": ["find"]},
        {"resource": {"db": "app", "collection": "inventory"}, "actions": ["find"]}], roles=[])
    app.command("createUser", "clerk", pwd="pw", roles=["ordersAndInventory"])
    clerk = MongoClient(s.uri("directConnection=true"), username="clerk", password="pw",
                        authSource="app").app
    assert len(list(clerk.orders.aggregate([{"$lookup": JOIN}]))) == 3
    sneaky = [
        [{"$lookup": {**JOIN, "from": "secret"}}],
        [{"$lookup": {"from": "inventory", "pipeline": [
            {"$lookup": {"from": "secret", "pipeline": [], "as": "s"}}], "as": "x"}}],
        [{"$unionWith": {"coll": "inventory", "pipeline": [{"$unionWith": "secret"}]}}],
        [{"$lookup": {"pipeline": [{"$documents": [{}]}, {"$unionWith": "secret"}], "as": "x"}}],
        [{"$graphLookup": {"from": "secret", "startWith": "$item", "connectFromField": "sku",
                           "connectToField": "sku", "as": "x"}}],
    ]
    for p in sneaky:
        with pytest.raises(OperationFailure) as e:
            list(clerk.orders.aggregate(p))
        assert e.value.code == 13, p
    admin.close()
    clerk.client.close()


def test_a_long_join_obeys_max_time_ms(db):
    db.items.insert_many([{"_id": i, "v": i} for i in range(3000)])
    db.orders.insert_many([{"_id": i} for i in range(3000)])
    with pytest.raises(OperationFailure) as e:
        list(db.orders.aggregate([
            {"$lookup": {"from": "items", "pipeline": [{"$project": {"_id": 1}}], "as": "all"}},
            {"$count": "n"}], maxTimeMS=100))
    assert e.value.code == 50
    assert db.orders.count_documents({}) == 3000  # and the server goes on serving


def test_lookup_inside_facet_reads_the_foreign_collection(db):
    db.o.insert_many([{"_id": 1, "i": "a"}, {"_id": 2, "i": "b"}])
    db.items.insert_many([{"_id": "a", "n": 1}, {"_id": "b", "n": 2}])
    out = list(db.o.aggregate([{"$facet": {
        "joined": [{"$lookup": {"from": "items", "localField": "i", "foreignField": "_id",
                                "as": "it"}}],
        "n": [{"$count": "n"}]}}]))
    assert out == [{"joined": [{"_id": 1, "i": "a", "it": [{"_id": "a", "n": 1}]},
                               {"_id": 2, "i": "b", "it": [{"_id": "b", "n": 2}]}],
                    "n": [{"n": 2}]}], "a $facet's $lookup joins as a top-level one: %s" % out


# --- the aggregate's collation reaches the foreign reads -----------------------

CI = {"locale": "en", "strength": 2}


def test_lookup_local_foreign_compares_by_the_collation(db):
    db.orders.insert_many([{"_id": 1, "item": "ALMONDS"}, {"_id": 2, "item": "Pecans"}])
    db.inventory.insert_many(INVENTORY)
    pipeline = [{"$lookup": {"from": "inventory", "localField": "item",
                             "foreignField": "sku", "as": "inv"}}, {"$sort": {"_id": 1}}]
    simple = list(db.orders.aggregate(pipeline))
    assert [d["inv"] for d in simple] == [[], []]
    out = list(db.orders.aggregate(pipeline, collation=CI))
    assert [[i["_id"] for i in d["inv"]] for d in out] == [[1], [4]]
    # the same through a collated index on the foreign field, and through a
    # simple-collation one that cannot answer a case-insensitive equality
    def scans(collation):
        cmd = SON([("aggregate", "orders"), ("pipeline", pipeline[:1]), ("cursor", {})])
        if collation:
            cmd["collation"] = collation
        ex = db.command(SON([("explain", cmd), ("verbosity", "executionStats")]))
        return ex["stages"][1]["collectionScans"]

    db.inventory.create_index("sku", collation=CI, name="sku_ci")
    out = list(db.orders.aggregate(pipeline, collation=CI))
    assert [[i["_id"] for i in d["inv"]] for d in out] == [[1], [4]]
    assert scans(CI) == 0  # the collated index serves the collated equality
    assert scans(None) == 2  # ... but not a bytewise one
    db.inventory.drop_index("sku_ci")
    db.inventory.create_index("sku")
    out = list(db.orders.aggregate(pipeline, collation=CI))
    assert [[i["_id"] for i in d["inv"]] for d in out] == [[1], [4]]
    assert scans(CI) == 2 and scans(None) == 0
    assert [d["inv"] for d in db.orders.aggregate(pipeline)] == [[], []]


def test_lookup_by_string_id_compares_by_the_collation(db):
    db.users.insert_many([{"_id": "alice", "n": 1}, {"_id": "bob", "n": 2}])
    db.logins.insert_many([{"_id": 1, "user": "ALICE"}, {"_id": 2, "user": "bob"}])
    pipeline = [{"$lookup": {"from": "users", "localField": "user", "foreignField": "_id",
                             "as": "u"}}, {"$sort": {"_id": 1}}]
    assert [len(d["u"]) for d in db.logins.aggregate(pipeline)] == [0, 1]
    out = list(db.logins.aggregate(pipeline, collation=CI))
    assert [[u["_id"] for u in d["u"]] for d in out] == [["alice"], ["bob"]]


def test_lookup_pipeline_form_compares_by_the_collation(db):
    db.orders.insert_many([{"_id": 1, "item": "ALMONDS"}, {"_id": 2, "item": "pecans"}])
    db.inventory.insert_many(INVENTORY)
    let_form = [{"$lookup": {"from": "inventory", "let": {"it": "$item"}, "as": "inv",
                             "pipeline": [{"$match": {"$expr": {"$eq": ["$sku", "$$it"]}}},
                                          {"$project": {"_id": 1}}]}},
                {"$sort": {"_id": 1}}]
    assert [d["inv"] for d in db.orders.aggregate(let_form)] == [[], [{"_id": 4}]]
    assert [d["inv"] for d in db.orders.aggregate(let_form, collation=CI)] == [
        [{"_id": 1}], [{"_id": 4}]]
    # a plain $match inside the sub-pipeline, and the concise syntax
    plain = [{"$lookup": {"from": "inventory", "as": "inv",
                          "pipeline": [{"$match": {"sku": "CASHEWS"}},
                                       {"$project": {"_id": 1}}]}},
             {"$sort": {"_id": 1}}]
    assert [d["inv"] for d in db.orders.aggregate(plain)] == [[], []]
    assert [d["inv"] for d in db.orders.aggregate(plain, collation=CI)] == [
        [{"_id": 3}], [{"_id": 3}]]
    concise = [{"$lookup": {"from": "inventory", "localField": "item", "foreignField": "sku",
                            "as": "inv", "pipeline": [{"$project": {"_id": 1}}]}},
               {"$sort": {"_id": 1}}]
    assert [d["inv"] for d in db.orders.aggregate(concise, collation=CI)] == [
        [{"_id": 1}], [{"_id": 4}]]


def test_graph_lookup_compares_by_the_collation(db):
    # the documentation's employee hierarchy, reportsTo in another case
    db.employees.insert_many([
        {"_id": 1, "name": "Dev"},
        {"_id": 2, "name": "Eliot", "reportsTo": "DEV"},
        {"_id": 3, "name": "Ron", "reportsTo": "eliot"},
        {"_id": 4, "name": "Andrew", "reportsTo": "Eliot"},
    ])
    pipeline = [{"$match": {"_id": 4}},
                {"$graphLookup": {"from": "employees", "startWith": "$reportsTo",
                                  "connectFromField": "reportsTo", "connectToField": "name",
                                  "as": "hierarchy"}}]
    (simple,) = db.employees.aggregate(pipeline)
    assert sorted(h["_id"] for h in simple["hierarchy"]) == [2]
    (ci,) = db.employees.aggregate(pipeline, collation=CI)
    assert sorted(h["_id"] for h in ci["hierarchy"]) == [1, 2]
    restrict = [{"$match": {"_id": 3}},
                {"$graphLookup": {"from": "employees", "startWith": "$reportsTo",
                                  "connectFromField": "reportsTo", "connectToField": "name",
                                  "as": "hierarchy",
                                  "restrictSearchWithMatch": {"reportsTo": "dev"}}}]
    (r,) = db.employees.aggregate(restrict, collation=CI)
    assert [h["_id"] for h in r["hierarchy"]] == [2]


def test_union_with_pipeline_matches_by_the_collation(db):
    db.a.insert_one({"_id": 1, "type": "pie"})
    db.b.insert_many([{"_id": 2, "type": "Cake"}, {"_id": 3, "type": "pie"}])
    pipeline = [{"$unionWith": {"coll": "b", "pipeline": [{"$match": {"type": "CAKE"}}]}}]
    assert ids(db.a.aggregate(pipeline)) == [1]
    assert ids(db.a.aggregate(pipeline, collation=CI)) == [1, 2]
