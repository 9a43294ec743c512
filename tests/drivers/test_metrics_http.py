"""The metrics port (issue 22): Prometheus text at GET /metrics, parsed with
the real Prometheus parser (Debian's python3-prometheus-client) before and
after known work, and the live status page at GET / showing who holds a
lease lock, who waits for it, and which transaction waits for which
(docs/operations.md).
"""

import shutil
import subprocess
import threading
import urllib.error
import urllib.request

import pymongo
import pytest

from atomdb_testlib import free_port, require_installed

try:
    from prometheus_client.parser import text_string_to_metric_families
except ImportError:  # fails below, never skips: install-deps installs it
    text_string_to_metric_families = None


def client(server):
    return pymongo.MongoClient(server.uri("directConnection=true"), serverSelectionTimeoutMS=10000)


@pytest.fixture
def metered(atomdb_factory):
    port = free_port()
    server = atomdb_factory("--metrics-port", str(port))
    server.metrics_url = "http://127.0.0.1:%d" % port
    return server


def get(url):
    with urllib.request.urlopen(url, timeout=10) as r:
        return r.status, r.headers.get("Content-Type"), r.read().decode()


def scrape(server):
    """{(name, frozenset(labels.items())): value} of every sample."""
    require_installed(text_string_to_metric_families, "python3-prometheus-client")
    status, ctype, text = get(server.metrics_url + "/metrics")
    assert status == 200 and ctype.startswith("text/plain; version=0.0.4"), ctype
    samples = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            samples[(s.name, frozenset(s.labels.items()))] = s.value
    return samples


def value(samples, name, **labels):
    return samples.get((name, frozenset(labels.items())), 0.0)


def test_metrics_parse_and_count_exactly_the_work_done(metered):
    c = client(metered)
    coll = c.shop.items
    coll.insert_one({"_id": 0})  # the command appears before the baseline
    coll.find_one({"_id": 0})
    before = scrape(metered)
    for i in range(1, 6):
        coll.insert_one({"_id": i})
    coll.update_one({"_id": 1}, {"$inc": {"n": 1}})
    coll.update_one({"_id": 2}, {"$inc": {"n": 1}})
    coll.update_one({"_id": 3}, {"$inc": {"n": 1}})
    assert len(list(coll.find({}))) == 6
    with pytest.raises(pymongo.errors.OperationFailure):
        c.shop.command("find", "items", filter={"$bogus": 1})
    after = scrape(metered)

    def moved(name, **labels):
        return value(after, name, **labels) - value(before, name, **labels)

    assert moved("atomdb_commands_total", command="insert", outcome="ok") == 5
    assert moved("atomdb_commands_total", command="update", outcome="ok") == 3
    assert moved("atomdb_commands_total", command="find", outcome="ok") == 1
    assert moved("atomdb_commands_total", command="find", outcome="error") == 1
    assert moved("atomdb_command_duration_seconds_count", command="insert") == 5
    assert moved("atomdb_command_duration_seconds_bucket", command="update", le="+Inf") == 3
    assert moved("atomdb_command_duration_seconds_sum", command="insert") > 0
    assert moved("atomdb_opcounters_total", type="insert") == 5
    assert moved("atomdb_opcounters_total", type="update") == 3
    assert moved("atomdb_documents_returned_total") == 6
    assert moved("atomdb_wal_records_total") == 8, "one log record per write command"
    assert moved("atomdb_wal_bytes_total") > 0
    assert value(after, "atomdb_cursors_open") == 0
    assert value(after, "atomdb_connections") >= 1
    # the histogram's buckets are cumulative and end at the count
    b = [v for (n, l), v in after.items()
         if n == "atomdb_command_duration_seconds_bucket" and ("command", "insert") in l]
    assert max(b) == value(after, "atomdb_command_duration_seconds_count", command="insert")


def test_metrics_count_transactions_conflicts_and_lock_waits(metered):
    c = client(metered)
    coll = c.shop.stock
    coll.insert_one({"_id": 1, "n": 0})
    c.admin.command("setParameter", 1, maxTransactionLockRequestTimeoutMillis=50)
    before = scrape(metered)
    s1, s2 = c.start_session(), c.start_session()
    s1.start_transaction()
    coll.update_one({"_id": 1}, {"$inc": {"n": 1}}, session=s1)
    s2.start_transaction()
    with pytest.raises(pymongo.errors.OperationFailure):
        coll.update_one({"_id": 1}, {"$inc": {"n": 1}}, session=s2)  # waits 50 ms, gives up
    mid = scrape(metered)
    # the lock timeout aborted the waiter's transaction, as mongod's does
    assert value(mid, "atomdb_transactions_active") == 1
    assert value(mid, "atomdb_document_locks_held") == 1
    s2.abort_transaction()
    s1.commit_transaction()
    after = scrape(metered)

    def moved(name):
        return value(after, name) - value(before, name)

    assert moved("atomdb_transactions_started_total") == 2
    assert moved("atomdb_transactions_committed_total") == 1
    assert moved("atomdb_transactions_aborted_total") == 1
    assert moved("atomdb_document_lock_waits_total") == 1
    assert moved("atomdb_document_lock_timeouts_total") == 1
    assert moved("atomdb_document_lock_wait_seconds_total") > 0
    assert value(after, "atomdb_document_lock_waiters") == 0
    assert value(after, "atomdb_transactions_active") == 0


def test_metrics_count_leases_and_fenced_refusals(metered):
    c = client(metered)
    r = c.admin.command({"acquireLock": "sku-1", "owner": "w1", "leaseMs": 60000})
    token = r["token"]
    c.admin.command({"acquireLock": "sku-1", "owner": "w1", "leaseMs": 60000})  # same owner renews
    c.admin.command({"releaseLock": "sku-1", "token": token})
    r2 = c.admin.command({"acquireLock": "sku-1", "owner": "w2", "leaseMs": 60000})
    before = scrape(metered)
    assert value(before, "atomdb_lease_locks_held") == 1
    with pytest.raises(pymongo.errors.OperationFailure):
        c.shop.command({"insert": "items", "documents": [{"x": 1}],
                        "fence": {"lock": "sku-1", "token": token}})
    after = scrape(metered)
    assert value(after, "atomdb_lease_fenced_writes_refused_total") - \
        value(before, "atomdb_lease_fenced_writes_refused_total") == 1
    c.admin.command({"releaseLock": "sku-1", "token": r2["token"]})
    assert value(scrape(metered), "atomdb_lease_locks_held") == 0


def test_metrics_port_is_read_only_and_has_two_pages(metered):
    req = urllib.request.Request(metered.metrics_url + "/metrics", data=b"x", method="POST")
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(req, timeout=10)
    assert e.value.code == 405
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(metered.metrics_url + "/nope", timeout=10)
    assert e.value.code == 404


def test_metrics_port_is_off_by_default(atomdb):
    assert "--metrics-port" not in " ".join(atomdb.argv)
    assert "metrics and status page" not in atomdb.log()


def test_a_taken_metrics_port_stops_the_start(atomdb_factory, tmp_path):
    import socket
    from atomdb_testlib import atomdb_bin
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        taken = s.getsockname()[1]
        r = subprocess.run([str(atomdb_bin()), "--port", str(free_port()), "--dbpath",
                            str(tmp_path / "d"), "--metrics-port", str(taken)],
                           capture_output=True, text=True, timeout=30)
    assert r.returncode == 48, r.stdout + r.stderr
    assert "metrics port" in r.stdout + r.stderr


# ---- the status page ----

class LockScene:
    """user01 holds the lease `seat-101` and, in a transaction, the document
    shop.seats 101; user02 queues for the lease and a second transaction
    waits for the document. finish() lets both through."""

    def __init__(self, server):
        self.server = server
        self.c = client(server)
        self.c.admin.command({"acquireLock": "seat-101", "owner": "user01", "leaseMs": 60000})
        self.lease_done = threading.Event()
        self.t1 = threading.Thread(target=self._queue_for_lease)
        self.t1.start()
        self.coll = self.c.shop.seats
        self.coll.insert_one({"_id": 101, "state": "N"})
        self.c.admin.command("setParameter", 1, maxTransactionLockRequestTimeoutMillis=30000)
        self.holder, self.waiter = self.c.start_session(), self.c.start_session()
        self.holder.start_transaction()
        self.coll.update_one({"_id": 101}, {"$set": {"state": "Y:user01"}}, session=self.holder)
        self.t2 = threading.Thread(target=self._wait_for_doc)
        self.t2.start()

    def _queue_for_lease(self):
        try:
            client(self.server).admin.command({"acquireLock": "seat-101", "owner": "user02",
                                               "leaseMs": 60000, "waitMs": 30000})
        finally:
            self.lease_done.set()

    def _wait_for_doc(self):
        self.waiter.start_transaction()
        self.coll.update_one({"_id": 101}, {"$set": {"state": "Y:user02"}}, session=self.waiter)
        self.waiter.commit_transaction()

    def page_when_waiting(self):
        """The status page once both waits show (each parks within a few ms)."""
        page = ""
        for _ in range(200):
            status, ctype, page = get(self.server.metrics_url + "/")
            assert status == 200 and ctype.startswith("text/html"), ctype
            if "1. user02" in page and " on shop.seats" in page:
                break
            self.lease_done.wait(0.02)
        return page

    def finish(self):
        self.holder.commit_transaction()
        self.t2.join(20)
        self.c.admin.command({"releaseLock": "seat-101", "token": 1})
        self.t1.join(20)
        assert self.coll.find_one({"_id": 101})["state"] == "Y:user02"


def section(page, table_id):
    start = page.index('id="%s"' % table_id)
    return page[start:page.index("</table>", start)]


def test_status_page_shows_lease_holder_queue_and_waiting_transaction(metered):
    scene = LockScene(metered)
    page = scene.page_when_waiting()
    assert '<meta http-equiv="refresh"' in page, "the page refreshes itself"
    leases = section(page, "leases")
    assert "seat-101" in leases and "user01" in leases, "the holder is shown"
    assert "1. user02" in leases, "the queued owner is first in line"
    txns = section(page, "txns")
    assert txns.count("<tr>") + txns.count('<tr class="warn">') == 3, "two transactions"
    assert " on shop.seats, _id key" in txns, "the waiter says what it waits for"
    assert "<svg class=\"graph\"" in page and "marker-end" in page, "the wait-for graph is drawn"
    assert len(page) < 64 * 1024, "a few KB"
    scene.finish()
    txns = section(get(metered.metrics_url + "/")[2], "txns")
    assert "<i>none</i>" in txns, "no transaction once both finished"


def test_status_page_in_headless_chromium(metered, tmp_path):
    """Chromium renders the page while the locks are held: the DOM it built
    has the holder and the waiter, and its screenshot is kept in the test's
    directory (printed below)."""
    chromium = shutil.which("chromium")
    require_installed(chromium, "chromium")
    scene = LockScene(metered)
    scene.page_when_waiting()
    base = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
            "--user-data-dir=%s" % (tmp_path / "profile"), "--window-size=1100,1300"]
    shot = tmp_path / "status-page.png"
    try:
        dom = subprocess.run(base + ["--dump-dom", metered.metrics_url + "/"],
                             capture_output=True, text=True, timeout=120)
        subprocess.run(base + ["--screenshot=%s" % shot, metered.metrics_url + "/"],
                       capture_output=True, text=True, timeout=120)
    finally:
        scene.finish()
    assert dom.returncode == 0, dom.stderr[-2000:]
    leases = section(dom.stdout, "leases")
    assert "user01" in leases and "1. user02" in leases, "Chromium's DOM shows holder and queue"
    assert " on shop.seats" in section(dom.stdout, "txns"), "and the waiting transaction"
    assert shot.exists() and shot.stat().st_size > 10000, "a screenshot was taken"
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    print("status page screenshot:", shot)


def test_status_page_lists_slow_operations(atomdb_factory):
    port = free_port()
    server = atomdb_factory("--metrics-port", str(port), "--slowms", "-1")
    client(server).shop.items.insert_one({"a": 2})
    client(server).shop.items.find_one({"a": 1})
    page = get("http://127.0.0.1:%d/" % port)[2]
    slow = section(page, "slow")
    assert "shop.items" in slow and "COLLSCAN" in slow, slow
