"""pymongo clients and collections for the driver tests: `connect` to a
running AtomdbServer, the per-test `client` fixture a module makes with
`per_test_client(...)`, a fresh collection named after the test, and
`fails`, which checks the code of the error a call raises."""

import re

import pytest
from pymongo import MongoClient
from pymongo.errors import OperationFailure

DIRECT = "directConnection=true"


def connect(server, options=DIRECT, **kw):
    """A MongoClient on `server` (URI query `options`); server selection
    gives up after 10 s unless `kw` says otherwise."""
    kw.setdefault("serverSelectionTimeoutMS", 10000)
    return MongoClient(server.uri(options), **kw)


def per_test_client(options=DIRECT, **kw):
    """A `client` fixture on the per-test `atomdb` (a fresh server for each
    test), for modules whose tests restart or stop their server; a module
    assigns it as `client = per_test_client(...)`, overriding conftest's
    module-scoped `client`."""

    @pytest.fixture
    def client(atomdb):
        c = connect(atomdb, options, **kw)
        yield c
        c.close()

    return client


def collection_name(request, length=60):
    """The running test's name as a collection name: only [A-Za-z0-9_]."""
    return re.sub(r"[^A-Za-z0-9_]", "_", request.node.name)[:length]


def fresh_collection(db, request):
    """The collection of `db` named after the running test, dropped first."""
    c = db[collection_name(request)]
    c.drop()
    return c


def fails(code, fn, what):
    """Calls `fn`, which must raise OperationFailure with `code` (`what`
    names the call in the failure message); returns the error."""
    with pytest.raises(OperationFailure) as ei:
        fn()
    assert ei.value.code == code, "%s: code %s, got %s %s" % (what, code, ei.value.code, ei.value)
    return ei.value
