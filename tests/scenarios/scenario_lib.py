"""Shared machinery for the multi-process seed scenarios: start N worker
processes that each open their own MongoClient, release them together from a
barrier, optionally run an observer process that polls the data while they
work, and collect what every process saw. Also the escalation loop that makes
the naive read-then-write version of a scenario demonstrably break."""

import contextlib
import multiprocessing
import os
import queue as queue_mod
import time
import traceback

import pymongo

# Every scenario runs this many processes, each doing this many operations.
N_PROCS = 8
N_OPS = 1000

# Naive (read, compute in the client, write back) rounds, tried in order until
# one breaks the invariant: (seconds slept between the read and the write,
# operations per process). A longer sleep widens the race window; fewer
# operations keep the round's runtime bounded. The naive runs only have to
# show that the checker catches the race, so they use fewer operations than
# the real scenarios.
NAIVE_ROUNDS = ((0.0, 500), (0.001, 200), (0.005, 100))

# Limits on how long a run may take before the test gives up on it.
START_TIMEOUT_S = 30.0
RUN_TIMEOUT_S = 90.0

DB_NAME = "scenarios"

# fork: cheap start-up on 2 cores; each child opens its own MongoClient after
# the fork and never touches the parent's.
_CTX = multiprocessing.get_context("fork")


class WorkerFailed(Exception):
    """A worker or observer process raised; carries its traceback."""


def new_client(uri):
    """A MongoClient for one process (short timeouts so a dead server fails
    the test quickly instead of hanging it)."""
    return pymongo.MongoClient(uri, serverSelectionTimeoutMS=10000,
                               socketTimeoutMS=30000, connectTimeoutMS=5000)


def _child(role, index, uri, func, args, barrier, results, stop):
    client = None
    try:
        client = new_client(uri)
        client.admin.command("ping")
        barrier.wait(START_TIMEOUT_S)
        coll_db = client[DB_NAME]
        if role == "worker":
            out = func(coll_db, index, *args)
        else:
            out = func(coll_db, stop, *args)
        results.put((role, index, "ok", out))
    except BaseException:  # report everything, including barrier timeouts
        results.put((role, index, "error", traceback.format_exc()))
    finally:
        if client is not None:
            client.close()


def run_workers(uri, worker, args=(), n_procs=N_PROCS, observer=None, observer_args=()):
    """Runs worker(db, index, *args) in n_procs processes, all released at
    once, and observer(db, stop_event, *observer_args) in one more process
    until every worker is done. Returns (list of worker results by index,
    observer result or None). Raises WorkerFailed with the child's traceback
    if any process raised or the run timed out."""
    n_total = n_procs + (1 if observer else 0)
    barrier = _CTX.Barrier(n_total)
    results = _CTX.Queue()
    stop = _CTX.Event()
    procs = [_CTX.Process(target=_child,
                          args=("worker", i, uri, worker, args, barrier, results, stop))
             for i in range(n_procs)]
    if observer:
        procs.append(_CTX.Process(target=_child,
                                  args=("observer", 0, uri, observer, observer_args,
                                        barrier, results, stop)))
    for p in procs:
        p.start()
    worker_out = [None] * n_procs
    observer_out = None
    errors = []
    deadline = time.monotonic() + START_TIMEOUT_S + RUN_TIMEOUT_S
    pending_workers = n_procs
    pending_total = n_total
    try:
        while pending_total:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                errors.append("timed out after %.0fs with %d of %d processes unfinished"
                              % (START_TIMEOUT_S + RUN_TIMEOUT_S, pending_total, n_total))
                break
            try:
                role, index, status, out = results.get(timeout=min(remaining, 1.0))
            except queue_mod.Empty:
                dead = [p for p in procs if p.exitcode not in (None, 0)]
                if dead:
                    errors.append("a child process died with exit code %s" % dead[0].exitcode)
                    break
                continue
            pending_total -= 1
            if status == "error":
                errors.append("%s %d raised:\n%s" % (role, index, out))
            elif role == "worker":
                worker_out[index] = out
            else:
                observer_out = out
            if role == "worker":
                pending_workers -= 1
                if pending_workers == 0:
                    stop.set()
            if errors:
                break
    finally:
        stop.set()
        for p in procs:
            p.join(5.0)
            if p.is_alive():
                p.kill()  # only our own children, by handle
                p.join()
    if errors:
        raise WorkerFailed("\n".join(errors))
    return worker_out, observer_out


def seed_collection(uri, name, docs, indexes=()):
    """Drops collection `name` and inserts `docs`; returns nothing. Called in
    the parent before the workers fork, with a client closed before forking."""
    client = new_client(uri)
    try:
        coll = client[DB_NAME][name]
        coll.drop()
        if docs:
            coll.insert_many(docs)
        for keys, opts in indexes:
            coll.create_index(keys, **opts)
    finally:
        client.close()


def read_collection(uri, name, filter=None):
    """All documents of collection `name` (matching filter), sorted by _id
    where comparable."""
    client = new_client(uri)
    try:
        return list(client[DB_NAME][name].find(filter or {}))
    finally:
        client.close()


def demonstrate_race(run_round, what):
    """Runs run_round(sleep_s, ops, round_no) for each NAIVE_ROUNDS entry until
    it returns a non-empty list of invariant violations, and returns
    (violations, log of rounds). Fails the test when no round broke the
    invariant: then the scenario's checker could not tell a racy client or
    server from a correct one."""
    import pytest

    log = []
    for round_no, (sleep_s, ops) in enumerate(NAIVE_ROUNDS):
        violations = run_round(sleep_s, ops, round_no)
        log.append("round %d: %d procs x %d ops, %.1f ms between read and write: %d violations"
                   % (round_no, N_PROCS, ops, sleep_s * 1000, len(violations)))
        if violations:
            return violations, log
    pytest.fail("the naive read-then-write %s never broke the invariant in %d rounds, so this "
                "scenario cannot demonstrate that it catches the race:\n%s"
                % (what, len(NAIVE_ROUNDS), "\n".join(log)), pytrace=False)


@contextlib.contextmanager
def atomdb_running(extra_args=(), binary=None):
    """Starts a real atomdb on a free 127.0.0.1 port (tests/drivers/
    atomdb_testlib.py), optionally another binary than ATOMDB_BIN, yields
    its URI and stops it; a failed start, a crash, a non-zero exit or a
    sanitizer report fails the test. Logging stays at info: debug logging
    of thousands of commands would slow the scenarios."""
    import pytest
    from atomdb_testlib import AtomdbServer, ServerProblem

    server = AtomdbServer(extra_args=list(extra_args), log_level="info")
    saved = os.environ.get("ATOMDB_BIN")
    if binary:
        os.environ["ATOMDB_BIN"] = binary
    try:
        server.start()
    except ServerProblem as e:
        server.cleanup()
        pytest.fail(str(e), pytrace=False)
    finally:
        if binary:
            if saved is None:
                os.environ.pop("ATOMDB_BIN", None)
            else:
                os.environ["ATOMDB_BIN"] = saved
    failed = False
    try:
        yield server.uri()
    except BaseException:
        failed = True
        raise
    finally:
        problems = server.stop()
        server.cleanup()
        if problems and not failed:
            pytest.fail("\n".join(problems), pytrace=False)
