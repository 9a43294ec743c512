#!/usr/bin/env bash
# The soak (docs/reliability.md): every seed scenario at once against one
# atomdb, SIGKILLed every 20-40 s and restarted; invariants, acknowledged
# writes, RSS and file descriptors checked after every restart.
#   scripts/soak.sh --minutes N [--journal write|fsync] [--seed S] [--keep DIR]
# Uses build/atomdb (ATOMDB_BIN to change); runs at nice 19.
set -euo pipefail
cd "$(dirname "$0")/.."
export ATOMDB_BIN=${ATOMDB_BIN:-$PWD/build/atomdb}
exec nice -n 19 /usr/bin/python3 tests/soak/soak.py "$@"
