#!/usr/bin/python3
"""The soak: every seed scenario at once against one atomdb, which is killed
with SIGKILL every 20-40 s and restarted on the same --dbpath. After every
restart and at the end it checks each scenario's invariants and that no
acknowledged write was lost; it samples the server's RSS and open file
descriptors once warmed up in each life, and at the end requires RSS within
10% of the first life's and no growth of non-socket descriptors.

Scenarios (the seed articles' workloads, tests/scenarios): a counter
($inc), a flash sale (stock decrement and order insert in one
transaction), seat booking (a unique index), a helpdesk queue (tickets
taken with findAndModify), a play counter (song total and play log in one
transaction), lease-locked critical sections (acquireLock, fenced
updates, tokens that only increase), and bank transfers in transactions
(the total never changes).

The last line is `soak: R restarts, W acknowledged writes, L lost,
invariants held` (or `... invariants VIOLATED`, exit 1).

usage: soak.py --minutes N [--kill-min S] [--kill-max S] [--journal MODE]
  ATOMDB_BIN selects the binary (default build/atomdb).
"""
import argparse
import collections
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "drivers"))

from pymongo import MongoClient, ReturnDocument  # noqa: E402
from pymongo.errors import (DuplicateKeyError, OperationFailure,  # noqa: E402
                            PyMongoError)

STALE_FENCING_TOKEN = 900000001
SALE_STOCK = 10 ** 6
ACCOUNTS = 10
BALANCE = 1000
SEATS = 200


def atomdb_bin():
    return Path(os.environ.get("ATOMDB_BIN", REPO / "build" / "atomdb"))


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class Server:
    def __init__(self, dbpath, port, journal, log_path):
        self.dbpath, self.port, self.journal, self.log_path = dbpath, port, journal, log_path
        self.proc = None

    def start(self):
        log = open(self.log_path, "ab")
        args = [str(atomdb_bin()), "--bind", "127.0.0.1", "--port", str(self.port),
                "--dbpath", str(self.dbpath), "--journal", self.journal, "--log-level", "warn",
                "--replSet", "rs0", "--advertise", "127.0.0.1:%d" % self.port,
                # change-stream history is a cache that grows with every write up
                # to its bound (64 MB, a day); five seconds of it keeps each life's
                # RSS comparable, so the 110% check below still sees leaks
                "--change-stream-history", "5"]
        self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=log, stderr=log)
        log.close()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("atomdb exited with %s on start:\n%s" % (
                    self.proc.returncode, self.log_tail()))
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("atomdb did not listen within 60 s")

    def kill9(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=60)

    def usage(self):
        """(RSS in KiB, non-socket fds, socket fds) of the running server."""
        pid = self.proc.pid
        rss = 0
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    rss = int(line.split()[1])
        files = sockets = 0
        for fd in os.listdir("/proc/%d/fd" % pid):
            try:
                target = os.readlink("/proc/%d/fd/%s" % (pid, fd))
            except OSError:
                continue
            if target.startswith("socket:"):
                sockets += 1
            else:
                files += 1
        return rss, files, sockets, self.documents()

    def documents(self):
        """How many documents the server holds (every database), -1 if it cannot say."""
        try:
            c = MongoClient("127.0.0.1", self.port, serverSelectionTimeoutMS=3000,
                            directConnection=True)
            try:
                return sum(c[d].command("dbStats")["objects"] for d in c.list_database_names())
            finally:
                c.close()
        except Exception:
            return -1

    def log_tail(self, n=40):
        try:
            return "\n".join(Path(self.log_path).read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return ""


# --- scenarios --------------------------------------------------------------------

class Scenario:
    """One workload: step() does one operation and records what was sent and
    acknowledged; check() returns the invariants it finds broken."""
    name = "?"

    def __init__(self, rng):
        self.rng = rng
        self.acked = 0      # acknowledged writes
        self.lost = 0       # acknowledged writes not found (set by check)
        self.problems = []  # found while running (e.g. a token that went back)

    def setup(self, db):
        pass


class Counter(Scenario):
    name = "counter"

    def __init__(self, rng):
        super().__init__(rng)
        self.sent = 0

    def step(self, db):
        self.sent += 1
        db.soak_counter.update_one({"_id": "c"}, {"$inc": {"n": 1}}, upsert=True)
        self.acked += 1

    def check(self, db):
        doc = db.soak_counter.find_one({"_id": "c"}) or {"n": 0}
        if doc["n"] < self.acked:
            self.lost = self.acked - doc["n"]
            return ["counter: %d increments acknowledged, the counter is %d" % (self.acked, doc["n"])]
        if doc["n"] > self.sent:
            return ["counter: %d increments sent, the counter is %d" % (self.sent, doc["n"])]
        return []


class FlashSale(Scenario):
    """Orders are shipped (deleted, counted in `shipped`) in a transaction
    too, so the data stays bounded: stock + orders + shipped never changes."""
    name = "flash sale"

    def __init__(self, rng, client):
        super().__init__(rng)
        self.client = client
        self.orders = collections.deque()  # acknowledged, not yet shipped
        self.shipped = collections.deque(maxlen=300)  # acknowledged shipped: must stay gone

    def setup(self, db):
        db.soak_stock.update_one({"_id": "sku"},
                                 {"$setOnInsert": {"stock": SALE_STOCK, "shipped": 0}},
                                 upsert=True)

    def step(self, db):
        if len(self.orders) > 300:
            oid = self.orders.popleft()  # unchecked from now on, whatever happens
            with self.client.start_session() as s:
                with s.start_transaction():
                    db.soak_orders.delete_one({"_id": oid}, session=s)
                    db.soak_stock.update_one({"_id": "sku"}, {"$inc": {"shipped": 1}},
                                             session=s)
            self.shipped.append(oid)
            self.acked += 1
            return
        oid = uuid.uuid4().hex
        with self.client.start_session() as s:
            with s.start_transaction():
                got = db.soak_stock.find_one_and_update(
                    {"_id": "sku", "stock": {"$gt": 0}}, {"$inc": {"stock": -1}}, session=s)
                if got is None:
                    return
                db.soak_orders.insert_one({"_id": oid}, session=s)
        self.orders.append(oid)
        self.acked += 1

    def check(self, db):
        st = db.soak_stock.find_one({"_id": "sku"})
        n = db.soak_orders.count_documents({})
        out = []
        if st is None:
            self.lost = 1 + len(self.orders)
            return ["flash sale: the stock document is gone"]
        if st["stock"] + n + st["shipped"] != SALE_STOCK or st["stock"] < 0:
            out.append("flash sale: stock %d + %d orders + %d shipped != %d" % (
                st["stock"], n, st["shipped"], SALE_STOCK))
        have = set(d["_id"] for d in db.soak_orders.find({}, {"_id": 1}))
        missing = [o for o in self.orders if o not in have]
        back = [o for o in self.shipped if o in have]
        if missing:
            self.lost = len(missing)
            out.append("flash sale: %d acknowledged orders lost" % len(missing))
        if back:
            self.lost += len(back)
            out.append("flash sale: %d shipped (deleted) orders are back" % len(back))
        return out


class Seats(Scenario):
    name = "seats"

    def __init__(self, rng):
        super().__init__(rng)
        self.booked = {}  # _id -> (show, seat)
        self.over = collections.deque(maxlen=20)  # shows whose bookings were deleted
        self.show = 0
        self.tries = 0

    def setup(self, db):
        db.soak_seats.create_index([("show", 1), ("seat", 1)], unique=True)

    def step(self, db):
        self.tries += 1
        if self.tries % (SEATS * 2) == 0:  # the show is over: its bookings go
            old = self.show
            self.show += 1
            self.booked = {b: k for b, k in self.booked.items() if k[0] != old}
            db.soak_seats.delete_many({"show": old})
            self.over.append(old)
            self.acked += 1
            return
        seat = self.rng.randrange(SEATS)
        bid = uuid.uuid4().hex
        try:
            db.soak_seats.insert_one({"_id": bid, "show": self.show, "seat": seat})
        except DuplicateKeyError:
            return
        self.booked[bid] = (self.show, seat)
        self.acked += 1

    def check(self, db):
        out = []
        have = {d["_id"]: (d["show"], d["seat"]) for d in db.soak_seats.find()}
        missing = [b for b in self.booked if b not in have]
        if missing:
            self.lost = len(missing)
            out.append("seats: %d acknowledged bookings lost" % len(missing))
        back = [k for k in have.values() if k[0] in self.over]
        if back:
            self.lost += len(back)
            out.append("seats: %d deleted bookings are back" % len(back))
        seen = {}
        for bid, key in have.items():
            if key in seen:
                out.append("seats: seat %r booked twice (%s, %s)" % (key, seen[key], bid))
            seen[key] = bid
        return out


class Helpdesk(Scenario):
    """Tickets are opened, taken with findAndModify (one agent each), and
    closed (deleted) once taken, so the queue stays bounded."""
    name = "helpdesk"

    def __init__(self, rng):
        super().__init__(rng)
        self.open = set()     # acknowledged open tickets
        self.taken = {}       # ticket -> agent, acknowledged
        self.closed = collections.deque(maxlen=300)  # acknowledged deletes: must stay gone

    def step(self, db):
        r = self.rng.random()
        if self.taken and r < 0.3:
            t, agent = next(iter(self.taken.items()))
            del self.taken[t]
            db.soak_tickets.delete_one({"_id": t, "status": "taken", "agent": agent})
            self.closed.append(t)
        elif len(self.open) < 200 and r < 0.65:
            t = uuid.uuid4().hex
            db.soak_tickets.insert_one({"_id": t, "status": "open"})
            self.open.add(t)
        else:
            agent = "agent%d" % self.rng.randrange(3)
            got = db.soak_tickets.find_one_and_update(
                {"status": "open"}, {"$set": {"status": "taken", "agent": agent}},
                return_document=ReturnDocument.AFTER)
            if got is None:
                return
            self.open.discard(got["_id"])
            self.taken[got["_id"]] = agent
        self.acked += 1

    def check(self, db):
        out = []
        have = {d["_id"]: d for d in db.soak_tickets.find()}
        # an open ticket may have been taken by a findAndModify whose reply was lost
        missing = [t for t in self.open if t not in have]
        lost = len(missing)
        for t, agent in self.taken.items():
            d = have.get(t)
            if d is None or d.get("status") != "taken" or d.get("agent") != agent:
                lost += 1
                out.append("helpdesk: ticket %s taken by %s, now %r" % (t, agent, d))
        back = [t for t in self.closed if t in have]
        if back:
            lost += len(back)
            out.append("helpdesk: %d closed (deleted) tickets are back" % len(back))
        if missing:
            out.append("helpdesk: %d acknowledged tickets lost" % len(missing))
        self.lost = lost
        # tickets whose state is unknown (a lost reply) are re-read as they are
        for t, d in have.items():
            if d.get("status") == "open":
                self.open.add(t)
            elif t not in self.taken and t not in self.closed:
                self.taken[t] = d.get("agent")
        return out[:5]


class PlayCounter(Scenario):
    name = "play counter"

    def __init__(self, rng, client):
        super().__init__(rng)
        self.client = client
        self.plays = collections.OrderedDict()  # acknowledged play -> song
        self.archived = collections.deque(maxlen=300)

    def step(self, db):
        if len(self.plays) > 300:  # the oldest play is archived: log and total both drop it
            pid, song = self.plays.popitem(last=False)
            with self.client.start_session() as s:
                with s.start_transaction():
                    db.soak_plays.delete_one({"_id": pid}, session=s)
                    db.soak_songs.update_one({"_id": song}, {"$inc": {"plays": -1}},
                                             session=s)
            self.archived.append(pid)
            self.acked += 1
            return
        song = "song%d" % self.rng.randrange(5)
        pid = uuid.uuid4().hex
        with self.client.start_session() as s:
            with s.start_transaction():
                db.soak_songs.update_one({"_id": song}, {"$inc": {"plays": 1}}, upsert=True,
                                         session=s)
                db.soak_plays.insert_one({"_id": pid, "song": song}, session=s)
        self.plays[pid] = song
        self.acked += 1

    def check(self, db):
        out = []
        counts = {}
        have = set()
        for p in db.soak_plays.find():
            counts[p["song"]] = counts.get(p["song"], 0) + 1
            have.add(p["_id"])
        for s in db.soak_songs.find():
            if s["plays"] != counts.get(s["_id"], 0):
                out.append("play counter: %s says %d plays, the log has %d" % (
                    s["_id"], s["plays"], counts.get(s["_id"], 0)))
        missing = [p for p in self.plays if p not in have]
        back = [p for p in self.archived if p in have]
        if missing:
            self.lost = len(missing)
            out.append("play counter: %d acknowledged plays lost" % len(missing))
        if back:
            self.lost += len(back)
            out.append("play counter: %d archived (deleted) plays are back" % len(back))
        return out


class Lease(Scenario):
    name = "lease locks"

    def __init__(self, rng):
        super().__init__(rng)
        self.max_token = 0
        self.fenced_acked = 0
        self.fenced_unknown = 0

    def step(self, db):
        owner = "soak-%d" % self.rng.randrange(2)
        r = db.command({"acquireLock": "soak-cs", "owner": owner, "leaseMs": 5000,
                        "waitMs": 200})
        if not r["acquired"]:
            return
        token = r["token"]
        if token <= self.max_token:
            self.problems.append("lease locks: token %d granted after token %d" % (
                token, self.max_token))
        self.max_token = max(self.max_token, token)
        fence = {"lock": "soak-cs", "token": token}
        doc = db.soak_guarded.find_one({"_id": "g"}) or {"n": 0}
        try:
            self.fenced_unknown += 1
            db.command({"update": "soak_guarded",
                        "updates": [{"q": {"_id": "g"}, "u": {"$set": {"n": doc["n"] + 1}},
                                     "upsert": True}],
                        "fence": fence})
            self.fenced_unknown -= 1
            self.fenced_acked += 1
            self.acked += 1
        except OperationFailure as e:
            self.fenced_unknown -= 1
            if e.code != STALE_FENCING_TOKEN:
                raise
        try:
            db.command({"releaseLock": "soak-cs", "token": token})
        except OperationFailure:
            pass

    def check(self, db):
        doc = db.soak_guarded.find_one({"_id": "g"}) or {"n": 0}
        if doc["n"] < self.fenced_acked:
            self.lost = self.fenced_acked - doc["n"]
            return ["lease locks: %d fenced increments acknowledged, n is %d (a lost update "
                    "or a lost write)" % (self.fenced_acked, doc["n"])]
        if doc["n"] > self.fenced_acked + self.fenced_unknown_total:
            return ["lease locks: n is %d, more than the %d fenced increments sent" % (
                doc["n"], self.fenced_acked + self.fenced_unknown_total)]
        return []

    fenced_unknown_total = 0


class Transfers(Scenario):
    name = "transactions"

    def __init__(self, rng, client):
        super().__init__(rng)
        self.client = client

    def setup(self, db):
        for i in range(ACCOUNTS):
            db.soak_accounts.update_one({"_id": i}, {"$setOnInsert": {"balance": BALANCE}},
                                        upsert=True)

    def step(self, db):
        a, b = self.rng.sample(range(ACCOUNTS), 2)
        amount = self.rng.randrange(1, 50)
        with self.client.start_session() as s:
            with s.start_transaction():
                src = db.soak_accounts.find_one_and_update(
                    {"_id": a, "balance": {"$gte": amount}}, {"$inc": {"balance": -amount}},
                    session=s)
                if src is None:
                    return
                db.soak_accounts.update_one({"_id": b}, {"$inc": {"balance": amount}},
                                            session=s)
        self.acked += 1

    def check(self, db):
        docs = list(db.soak_accounts.find())
        total = sum(d["balance"] for d in docs)
        if len(docs) != ACCOUNTS or total != ACCOUNTS * BALANCE or any(d["balance"] < 0
                                                                       for d in docs):
            return ["transactions: %d accounts hold %d in all (%d expected)" % (
                len(docs), total, ACCOUNTS * BALANCE)]
        return []


# --- the run ----------------------------------------------------------------------

class Worker(threading.Thread):
    def __init__(self, scenario, client, gate, stop, pace_s):
        super().__init__(daemon=True, name=scenario.name)
        self.pace_s = pace_s
        self.scenario, self.client, self.gate, self.stop_ev = scenario, client, gate, stop
        self.busy = False
        self.errors = 0

    def run(self):
        db = self.client.soak
        while not self.stop_ev.is_set():
            if not self.gate.is_set():
                self.busy = False
                self.gate.wait(0.1)
                continue
            self.busy = True
            try:
                self.scenario.step(db)
            except PyMongoError:
                self.errors += 1  # the server went away mid-operation: outcome unknown
                if isinstance(self.scenario, Lease):
                    self.scenario.fenced_unknown_total += self.scenario.fenced_unknown
                    self.scenario.fenced_unknown = 0
                time.sleep(0.05)
            self.busy = False
            if self.pace_s:
                time.sleep(self.pace_s)
        self.busy = False


def check_all(port, scenarios):
    c = MongoClient("127.0.0.1", port, serverSelectionTimeoutMS=20000, directConnection=True)
    try:
        db = c.soak
        out = []
        for s in scenarios:
            try:
                out += s.check(db) + s.problems
            except (KeyError, TypeError) as e:  # a document of the wrong shape: reported
                out.append("%s: the data has an unexpected shape: %r" % (s.name, e))
            s.problems = []
        for name in db.list_collection_names():
            r = db.command("validate", name, full=True)
            if not r["valid"]:
                out.append("validate %s: %s" % (name, r["errors"]))
        return out
    finally:
        c.close()


def quiet_driver_threads(args):
    """pymongo 3.11's pool maintenance thread prints a traceback when the
    server is down (it is, between a SIGKILL and the restart): not a result."""
    if not issubclass(args.exc_type, PyMongoError):
        sys.__excepthook__(args.exc_type, args.exc_value, args.exc_traceback)


def main():
    threading.excepthook = quiet_driver_threads
    import pymongo.helpers
    # pymongo 3.11 prints the pool maintenance thread's AutoReconnect while the
    # server is down; that is expected here, and printing it hides the results
    pymongo.helpers._handle_exception = lambda: None
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--minutes", type=float, required=True)
    ap.add_argument("--kill-min", type=float, default=20)
    ap.add_argument("--kill-max", type=float, default=40)
    ap.add_argument("--journal", default="write", choices=["write", "fsync", "none"],
                    help="none is the self-test: every kill loses data, which must be reported")
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--pace-ms", type=float, default=2.0,
                    help="pause of each scenario between operations (the machine is shared)")
    ap.add_argument("--keep", default=None, help="keep the dbpath and log in DIR")
    a = ap.parse_args()
    seed = a.seed if a.seed is not None else random.randrange(1 << 30)
    rng = random.Random(seed)
    work = Path(a.keep) if a.keep else Path(tempfile.mkdtemp(prefix="atomdb-soak-"))
    (work / "data").mkdir(parents=True, exist_ok=True)
    server = Server(work / "data", free_port(), a.journal, work / "atomdb.log")
    server.start()
    clients = []

    def client():
        c = MongoClient("127.0.0.1", server.port, serverSelectionTimeoutMS=3000,
                        socketTimeoutMS=10000, retryWrites=False, directConnection=True)
        clients.append(c)
        return c

    cs = [client() for _ in range(7)]
    scenarios = [Counter(random.Random(rng.random())), FlashSale(random.Random(rng.random()), cs[1]),
                 Seats(random.Random(rng.random())), Helpdesk(random.Random(rng.random())),
                 PlayCounter(random.Random(rng.random()), cs[4]), Lease(random.Random(rng.random())),
                 Transfers(random.Random(rng.random()), cs[6])]
    for s, c in zip(scenarios, cs):
        s.setup(c.soak)
    gate, stop = threading.Event(), threading.Event()
    gate.set()
    workers = [Worker(s, c, gate, stop, a.pace_ms / 1000.0) for s, c in zip(scenarios, cs)]
    for w in workers:
        w.start()
    print("soak: seed %d, %s journal, %.1f minutes, SIGKILL every %g-%g s, dbpath %s" % (
        seed, a.journal, a.minutes, a.kill_min, a.kill_max, work / "data"), flush=True)
    t_end = time.monotonic() + a.minutes * 60
    restarts = 0
    problems = []
    samples = []  # (life, rss KiB, files, sockets, documents)
    life_start = time.monotonic()
    sampled = False
    next_kill = time.monotonic() + rng.uniform(a.kill_min, a.kill_max)
    try:
        while True:
            now = time.monotonic()
            if not sampled and now - life_start >= min(10, a.kill_min / 2):
                samples.append((restarts,) + server.usage())
                sampled = True
            if now >= t_end:
                break
            if now < next_kill:
                time.sleep(0.1)
                continue
            server.kill9()
            gate.clear()
            deadline = time.monotonic() + 30
            while any(w.busy for w in workers) and time.monotonic() < deadline:
                time.sleep(0.05)
            server.start()
            restarts += 1
            found = check_all(server.port, scenarios)
            acked = sum(s.acked for s in scenarios)
            print("soak: restart %d at %.0f s: %d acknowledged writes so far, %s" % (
                restarts, a.minutes * 60 - (t_end - time.monotonic()), acked,
                "invariants held" if not found else "%d problems" % len(found)), flush=True)
            for p in found[:10]:
                print("soak:   " + p, flush=True)
            problems += found
            life_start = time.monotonic()
            sampled = False
            gate.set()
            next_kill = time.monotonic() + rng.uniform(a.kill_min, a.kill_max)
        gate.clear()
        stop.set()
        for w in workers:
            w.join(30)
        found = check_all(server.port, scenarios)
        problems += found
        for p in found[:10]:
            print("soak:   " + p, flush=True)
        rc = server.stop()
        if rc != 0:
            problems.append("atomdb exited with %s after SIGTERM" % rc)
    finally:
        for c in clients:
            c.close()
        if server.proc and server.proc.poll() is None:
            server.kill9()
    # resources: each life's sample after warm-up against the first life's
    for life, rss, files, sockets, docs in samples:
        print("soak: life %d: RSS %d KiB, %d file descriptors (+%d sockets), %d documents" % (
            life, rss, files, sockets, docs), flush=True)
    if samples:
        first = samples[0]
        for life, rss, files, sockets, docs in samples[1:]:
            # each life is a new process that loads what the workload has written
            # so far (helpdesk tickets, orders...): the bound allows 1 KiB per
            # document added since the first life (a document, its index entries
            # and record header are a few hundred bytes), so a leak still shows
            allowed = first[1] * 1.10 + max(0, docs - first[4])
            if rss > allowed:
                problems.append("RSS of life %d is %d KiB, over 110%% of the first life's %d KiB "
                                "plus 1 KiB for each of the %d documents added since"
                                % (life, rss, first[1], max(0, docs - first[4])))
            if files > first[2]:
                problems.append("life %d holds %d file descriptors, the first held %d" % (
                    life, files, first[2]))
    acked = sum(s.acked for s in scenarios)
    lost = sum(s.lost for s in scenarios)
    for s in scenarios:
        print("soak: %-13s %6d acknowledged" % (s.name, s.acked), flush=True)
    if not a.keep:
        shutil.rmtree(work, ignore_errors=True)
    if problems:
        for p in problems[:20]:
            print("soak: problem: " + p)
        print("soak: %d restarts, %d acknowledged writes, %d lost, invariants VIOLATED" % (
            restarts, acked, lost))
        sys.exit(1)
    print("soak: %d restarts, %d acknowledged writes, %d lost, invariants held" % (
        restarts, acked, lost))


if __name__ == "__main__":
    main()
