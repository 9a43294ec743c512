#!/usr/bin/env bash
# Flame graph of the server on the hot counter: atomdb-bench runs the counter
# (atomic $inc, 16 wire clients, buffered journal) against a given binary while
# perf samples that server's threads with DWARF call stacks; tools/flamegraph.py
# turns the samples into an SVG and prints the frames with most self time.
#
# Usage: scripts/flamegraph.sh [--bin PATH] [--seconds N] [--scenario S]
#                              [--strategy S] [--out FILE.svg]
# Needs perf (linux-perf) and a built atomdb-bench (build/tools/bench).
set -euo pipefail

cd "$(dirname "$0")/.."
bin=$PWD/build/atomdb
bench=$PWD/build/tools/bench/atomdb-bench
seconds=5
scenario=counter
strategy=atomic
out=flame.svg

while [ $# -gt 0 ]; do
  case "$1" in
    --bin) bin=$(realpath "$2"); shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    --scenario) scenario=$2; shift 2 ;;
    --strategy) strategy=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    -h|--help) sed -n '2,9p' "$0"; exit 0 ;;
    *) echo "flamegraph: unknown argument $1" >&2; exit 2 ;;
  esac
done

command -v perf >/dev/null || { echo "flamegraph: perf is not installed (apt-get install linux-perf)" >&2; exit 1; }
[ -x "$bench" ] || { echo "flamegraph: build atomdb-bench first ($bench)" >&2; exit 1; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The bench starts its own server; its cell runs longer than perf samples so
# the sampling window sits inside the steady state.
"$bench" --engines atomdb --atomdb "$bin" --client wire --durability buffered \
  --scenarios "$scenario" --strategies "$strategy" --clients 16 \
  --duration $((seconds + 3)) >"$work/bench.txt" 2>&1 &
bench_pid=$!

pid=""
for _ in $(seq 1 200); do
  pid=$(pgrep -n -f "^$bin " || true)
  [ -n "$pid" ] && break
  sleep 0.05
done
[ -n "$pid" ] || { echo "flamegraph: the bench's server did not start" >&2; cat "$work/bench.txt" >&2; exit 1; }

sleep 1.5 # set-up and warm-up
perf record -q -o "$work/perf.data" -F 997 --call-graph dwarf,16384 -p "$pid" -- sleep "$seconds" >/dev/null 2>&1
wait "$bench_pid" || { echo "flamegraph: the bench failed" >&2; cat "$work/bench.txt" >&2; exit 1; }

perf script -i "$work/perf.data" 2>/dev/null >"$work/stacks.txt"
/usr/bin/python3 tools/flamegraph.py --title "atomdb $scenario/$strategy, 16 wire clients: $(basename "$bin")" \
  <"$work/stacks.txt" >"$out"
echo "flame graph: $out"
echo "frames with most self time:"
/usr/bin/python3 tools/flamegraph.py --top 20 <"$work/stacks.txt"
grep -E "^\|? *atomdb" "$work/bench.txt" | head -5 || true
