#!/usr/bin/env bash
# Issue 17's benchmark runs, each repeated N times (default 5) and reduced to
# medians by tools/bench/medians.py: the target cells with the wire client
# (counter atomic and flash_sale_1 conditional, 16 and 64 clients, 3 s), the
# --quick matrix at 16 clients with the wire client, and the same matrix with
# the driver client (libmongoc). Prints three markdown tables sets.
#
# Usage: scripts/bench-medians.sh [--runs N] [--atomdb PATH] [--only targets|wire|driver]
set -euo pipefail

cd "$(dirname "$0")/.."
bench=$PWD/build/tools/bench/atomdb-bench
atomdb=$PWD/build/atomdb
runs=5
only=""
while [ $# -gt 0 ]; do
  case "$1" in
    --runs) runs=$2; shift 2 ;;
    --atomdb) atomdb=$(realpath "$2"); shift 2 ;;
    --only) only=$2; shift 2 ;;
    -h|--help) sed -n '2,8p' "$0"; exit 0 ;;
    *) echo "bench-medians: unknown argument $1" >&2; exit 2 ;;
  esac
done

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

run_set() { # name, bench arguments...
  local name=$1
  shift
  [ -z "$only" ] || [ "$only" = "$name" ] || return 0
  for i in $(seq 1 "$runs"); do
    "$bench" --atomdb "$atomdb" "$@" --json "$out/$name-$i.json" >"$out/$name-$i.txt" 2>&1 ||
      { echo "bench-medians: run $name-$i failed" >&2; tail -5 "$out/$name-$i.txt" >&2; exit 1; }
  done
  echo "## $name: atomdb-bench $*"
  /usr/bin/python3 tools/bench/medians.py "$out/$name"-*.json
  echo
}

run_set targets --client wire --durability buffered --scenarios counter,flash_sale_1 \
  --strategies atomic,conditional --clients 16,64 --duration 3
run_set wire --quick --client wire --clients 16
run_set driver --quick --client driver --clients 16
