"""Seed 001, flash sale: N buyers race for an item with a small stock. The
conditional update {_id, stock: {$gte: q}} -> {$inc: {stock: -q, sold: q}}
never oversells: stock never goes negative, every unit is sold, and the number
of buyers told "bought" equals the units sold. The naive read-check-$set
version oversells."""

import time

import pytest

from scenario_lib import N_OPS, demonstrate_race, read_collection, run_workers, seed_collection

ITEM = "sku-flash-1"
QTY = 1  # one unit per purchase, so every unit of stock can be sold


def buy_worker(db, index, coll_name, ops):
    """Tries to buy QTY units ops times; returns [(n, nModified)]."""
    coll = db[coll_name]
    out = []
    for _ in range(ops):
        r = coll.update_one({"_id": ITEM, "stock": {"$gte": QTY}},
                            {"$inc": {"stock": -QTY, "sold": QTY}})
        out.append((r.matched_count, r.modified_count))
    return out


def naive_worker(db, index, coll_name, ops, sleep_s):
    """Reads stock; if enough, writes stock - q and sold + q back with $set
    and believes the purchase succeeded. Stops once it reads "sold out"
    (nothing after that can oversell, and it keeps the round short)."""
    coll = db[coll_name]
    out = []
    for _ in range(ops):
        doc = coll.find_one({"_id": ITEM})
        if doc["stock"] < QTY:
            break
        if sleep_s:
            time.sleep(sleep_s)
        r = coll.update_one({"_id": ITEM}, {"$set": {"stock": doc["stock"] - QTY,
                                                     "sold": doc["sold"] + QTY}})
        out.append((r.matched_count, 1 if r.matched_count == 1 else 0))
    return out


def watch_stock(db, stop, coll_name):
    """Polls the item while the buyers run; returns (reads, lowest stock
    seen, snapshots where stock + sold != initial)."""
    coll = db[coll_name]
    reads, lowest, torn = 0, None, []
    initial = None
    while True:  # at least one read, even if the buyers finish first
        done = stop.is_set()
        doc = coll.find_one({"_id": ITEM})
        reads += 1
        if initial is None:
            initial = doc["initial"]
        lowest = doc["stock"] if lowest is None else min(lowest, doc["stock"])
        if doc["stock"] + doc["sold"] != initial and len(torn) < 5:
            torn.append(doc)
        if done:
            break
    return reads, lowest, torn


def item(stock):
    return {"_id": ITEM, "name": "flash sale item", "initial": stock, "stock": stock, "sold": 0}


def check_sale(uri, coll_name, initial, results):
    """Violations of: stock >= 0, sold == initial, stock == 0, successful
    buys == units sold, every reply (n, nModified) in {(0,0), (1,1)}."""
    violations = []
    buys = 0
    for index, attempts in enumerate(results):
        bad = [a for a in attempts if a not in ((0, 0), (1, 1))]
        if bad:
            violations.append("process %d got (n, nModified) %r" % (index, bad[:3]))
        buys += sum(a[1] for a in attempts)
    docs = read_collection(uri, coll_name)
    if len(docs) != 1:
        return violations + ["expected one item document, found %d" % len(docs)]
    doc = docs[0]
    if doc["stock"] < 0:
        violations.append("stock went negative: %r" % doc)
    if doc["sold"] != initial or doc["stock"] != 0:
        violations.append("initial stock %d but final stock %r, sold %r"
                          % (initial, doc["stock"], doc["sold"]))
    if buys * QTY != initial:
        violations.append("%d buyers were told they bought %d unit(s) each, but the stock was %d "
                          "(oversold by %d); database says sold %r"
                          % (buys, QTY, initial, buys * QTY - initial, doc["sold"]))
    return violations


@pytest.mark.parametrize("stock", [1, 100])
def test_conditional_decrement_never_oversells(atomdb_uri, stock):
    name = "item_%d" % stock
    seed_collection(atomdb_uri, name, [item(stock)])
    results, (reads, lowest, torn) = run_workers(atomdb_uri, buy_worker, (name, N_OPS),
                                                 observer=watch_stock, observer_args=(name,))
    assert lowest is not None and lowest >= 0, \
        "an observer polling during the sale saw stock %r (%d reads)" % (lowest, reads)
    assert not torn, "observer saw stock + sold != initial stock %d: %r" % (stock, torn)
    violations = check_sale(atomdb_uri, name, stock, results)
    assert not violations, "flash sale with stock %d broke: %s" % (stock, violations)


@pytest.mark.parametrize("stock", [1, 100])
def test_naive_read_then_set_oversells_and_the_check_catches_it(atomdb_uri, stock):
    def run_round(sleep_s, ops, round_no):
        name = "item_naive_%d_%d" % (stock, round_no)
        seed_collection(atomdb_uri, name, [item(stock)])
        results, _ = run_workers(atomdb_uri, naive_worker, (name, ops, sleep_s))
        return check_sale(atomdb_uri, name, stock, results)

    violations, log = demonstrate_race(run_round, "flash sale with stock %d" % stock)
    assert violations, "the naive version must oversell; rounds: %s" % log
    print("naive flash sale stock %d:" % stock, "; ".join(log), "->", violations[:3])
