"""pymongo clients and collections for the driver tests: `connect` to a
running AtomdbServer, the per-test `client` fixture a module makes with
`per_test_client(...)`, and a fresh collection named after the test."""

import re

import pytest
from pymongo import MongoClient

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
