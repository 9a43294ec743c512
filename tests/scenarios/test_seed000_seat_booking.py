"""Seed 000, cinema seat map: a showing's seats live in one document,
{_id: "hall1", seats: {"101": "N", ...}}, and booking a seat is the
conditional update {_id, "seats.<n>": "N"} -> {$set: {"seats.<n>": "Y:<user>"}}.
Every process tries every seat in its own random order; each seat must end
with exactly one owner, and that owner is the only user whose update reported
nModified 1. The naive read-the-seat-then-$set version double-books."""

import random
import time

from scenario_lib import N_OPS, demonstrate_race, read_collection, run_workers, seed_collection

SHOWING = "hall1"


def seat_numbers(n):
    """n seat numbers in the seed's style: row then two-digit column,
    50 to a row: "101".."150", "201", ..."""
    return ["%d%02d" % (k // 50 + 1, k % 50 + 1) for k in range(n)]


def user_of(index):
    return "user%02d" % index


def seat_map(n):
    return {"_id": SHOWING, "movie": "Jumanji 2", "office": "IMAX 5",
            "showTime": "2019-09-30 12:30:00", "seats": {s: "N" for s in seat_numbers(n)}}


def book_worker(db, index, coll_name, n_seats):
    """Tries every seat once, in a random order; returns [(seat, n, nModified)]."""
    coll = db[coll_name]
    user = user_of(index)
    seats = seat_numbers(n_seats)
    random.Random(1000 + index).shuffle(seats)
    out = []
    for seat in seats:
        field = "seats." + seat
        r = coll.update_one({"_id": SHOWING, field: "N"}, {"$set": {field: "Y:" + user}})
        out.append((seat, r.matched_count, r.modified_count))
    return out


def naive_worker(db, index, coll_name, n_seats, sleep_s):
    """Reads the seat; if it shows "N", writes "Y:<user>" with an
    unconditional $set and believes it booked the seat."""
    coll = db[coll_name]
    user = user_of(index)
    seats = seat_numbers(n_seats)
    random.Random(2000 + index).shuffle(seats)
    out = []
    for seat in seats:
        field = "seats." + seat
        doc = coll.find_one({"_id": SHOWING}, {field: 1})
        if doc["seats"][seat] != "N":
            out.append((seat, 0, 0))  # saw it taken: like a lost booking
            continue
        if sleep_s:
            time.sleep(sleep_s)
        r = coll.update_one({"_id": SHOWING}, {"$set": {field: "Y:" + user}})
        # the client believes it booked the seat when its write matched
        out.append((seat, r.matched_count, r.matched_count))
    return out


def check_seats(uri, coll_name, n_seats, results):
    """Violations of 'each seat has exactly one owner, and it is the one
    user told nModified 1'."""
    violations = []
    winners = {s: [] for s in seat_numbers(n_seats)}
    for index, attempts in enumerate(results):
        tried = sorted(a[0] for a in attempts)
        if tried != sorted(winners):
            violations.append("process %d did not try every seat exactly once" % index)
        for seat, n, n_modified in attempts:
            if (n, n_modified) not in ((0, 0), (1, 1)):
                violations.append("seat %s, %s: (n, nModified) = (%r, %r), expected (1, 1) or (0, 0)"
                                  % (seat, user_of(index), n, n_modified))
            if n_modified == 1:
                winners[seat].append(user_of(index))
    docs = read_collection(uri, coll_name)
    if len(docs) != 1:
        return violations + ["expected one seat-map document, found %d" % len(docs)]
    final = docs[0]["seats"]
    if sorted(final) != sorted(winners):
        violations.append("seat map keys changed: %d seats, expected %d"
                          % (len(final), len(winners)))
    for seat, users in sorted(winners.items()):
        if len(users) != 1:
            violations.append("seat %s: %d users were told they booked it (%s); final value %r"
                              % (seat, len(users), users, final.get(seat)))
        elif final.get(seat) != "Y:" + users[0]:
            violations.append("seat %s: %s got nModified 1 but the seat map says %r"
                              % (seat, users[0], final.get(seat)))
    return violations


def test_each_seat_is_booked_by_exactly_the_one_user_told_nmodified_1(atomdb_uri):
    seed_collection(atomdb_uri, "showing", [seat_map(N_OPS)])
    results, _ = run_workers(atomdb_uri, book_worker, ("showing", N_OPS))
    violations = check_seats(atomdb_uri, "showing", N_OPS, results)
    assert not violations, ("conditional seat booking broke (%d violations, first 10): %s"
                            % (len(violations), violations[:10]))
    assert sum(a[2] for r in results for a in r) == N_OPS, \
        "exactly one successful booking per seat expected in total"


def test_naive_read_then_set_double_books_seats_and_the_check_catches_it(atomdb_uri):
    def run_round(sleep_s, ops, round_no):
        name = "showing_naive_%d" % round_no
        seed_collection(atomdb_uri, name, [seat_map(ops)])
        results, _ = run_workers(atomdb_uri, naive_worker, (name, ops, sleep_s))
        return check_seats(atomdb_uri, name, ops, results)

    violations, log = demonstrate_race(run_round, "seat booking")
    assert violations, "the naive version must double-book; rounds: %s" % log
    print("naive seats:", "; ".join(log), "->", violations[:5])
