"""Which pymongo build the Python tests run on. ATOMDB_PYMONGO_PURE=1 blocks
pymongo's C extensions before anything imports pymongo, in the test process
and in every Python it starts, so a run shows that no verdict depends on the
driver build (docs/testing.md, "Pure-Python pymongo")."""

import os
import sys
from pathlib import Path

PURE_ENV = "ATOMDB_PYMONGO_PURE"

# The C modules pymongo and bson fall back from when they cannot be imported.
C_MODULES = ("bson._cbson", "pymongo._cmessage")

# Holds a sitecustomize.py that blocks C_MODULES in child interpreters
# (writer.py, `python3 -c WORKER`); put on PYTHONPATH in pure mode only.
_CHILD_SITE = Path(__file__).resolve().parent / "pymongo_pure"


def pure_requested():
    """True when ATOMDB_PYMONGO_PURE=1; unset, '' or '0' mean the build as
    installed; any other value is refused rather than guessed at."""
    value = os.environ.get(PURE_ENV, "")
    if value in ("", "0"):
        return False
    if value == "1":
        return True
    raise RuntimeError("%s=%r: use 1 (block pymongo's C extensions) or 0" % (PURE_ENV, value))


def apply():
    """Call first in every conftest.py, before pymongo or bson is imported.
    In pure mode: blocks the C modules here and in child interpreters, then
    checks that pymongo really runs without them."""
    if not pure_requested():
        return
    for name in C_MODULES:
        if sys.modules.get(name) is not None:
            raise RuntimeError("%s=1 but %s was imported before the conftest could block it"
                               % (PURE_ENV, name))
        sys.modules[name] = None
    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if str(_CHILD_SITE) not in paths:
        os.environ["PYTHONPATH"] = os.pathsep.join([str(_CHILD_SITE)] + paths)
    import bson
    import pymongo
    if bson.has_c() or pymongo.has_c():
        raise RuntimeError("%s=1 but pymongo still uses its C extensions" % PURE_ENV)


def describe():
    """One line for pytest's header: pymongo's version and whether its C
    extensions are in use."""
    import bson
    import pymongo
    if pymongo.has_c() and bson.has_c():
        build = "C extensions in use"
    elif pure_requested():
        build = "pure Python (%s=1)" % PURE_ENV
    else:
        build = "pure Python (C extensions not installed: pymongo %s, bson %s)" % (
            pymongo.has_c(), bson.has_c())
    return "pymongo %s: %s" % (pymongo.version, build)
