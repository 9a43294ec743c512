"""Put on PYTHONPATH by pymongo_mode.apply() in ATOMDB_PYMONGO_PURE=1 runs
only: makes every Python the tests start (writer.py, `python3 -c WORKER`)
run pymongo without its C extensions, as the test process does."""

import os
import sys

if os.environ.get("ATOMDB_PYMONGO_PURE") == "1":
    sys.modules["bson._cbson"] = None
    sys.modules["pymongo._cmessage"] = None
