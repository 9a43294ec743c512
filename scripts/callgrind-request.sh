#!/usr/bin/env bash
# Instructions the server spends per request on the two hot paths of the seed
# scenarios, counted by callgrind: the hot counter (update by _id with $inc,
# with lsid + txnNumber as drivers send it), the sold-out conditional sale,
# findAndModify by _id ($inc, upsert, new) and find by _id.
#
# Usage: scripts/callgrind-request.sh [--bin PATH] [--small N] [--large N]
#                                     [--only counter|soldout|famupsert|findid] [--keep DIR] [--auth]
# For each workload it starts the server twice under
# `valgrind --tool=callgrind` (--journal none, a free 127.0.0.1 port, a fresh
# --dbpath), sends the same set-up and then N identical requests through a
# lean raw-wire client (/usr/bin/python3 + tests/drivers/wireproto.py), stops
# the server with `shutdown`, and prints
#   (instructions with N=large - instructions with N=small) / (large - small)
# so start-up, set-up and shutdown cancel out. Numbers are deterministic to a
# few instructions per request for a given binary; compare two builds with
# the same --small/--large. --auth runs the server with --auth and the client
# logged in (SCRAM-SHA-256) as a root user made through the localhost
# exception, so the difference to a run without is what authorization costs.
set -euo pipefail

cd "$(dirname "$0")/.."
repo=$(pwd)
bin="$repo/build/atomdb"
small=200
large=2200
only=""
keep=""
auth=""

while [ $# -gt 0 ]; do
  case "$1" in
    --bin) bin=$2; shift 2 ;;
    --small) small=$2; shift 2 ;;
    --large) large=$2; shift 2 ;;
    --only) only=$2; shift 2 ;;
    --keep) keep=$2; shift 2 ;;
    --auth) auth=1; shift ;;
    -h|--help) sed -n '2,19p' "$0"; exit 0 ;;
    *) echo "callgrind-request: unknown argument $1" >&2; exit 2 ;;
  esac
done

command -v valgrind >/dev/null || { echo "callgrind-request: valgrind is not installed" >&2; exit 1; }
[ -x "$bin" ] || { echo "callgrind-request: no server binary at $bin (build first)" >&2; exit 1; }
if [ "$large" -le "$small" ]; then
  echo "callgrind-request: --large must be greater than --small" >&2
  exit 2
fi

if [ -n "$keep" ]; then
  mkdir -p "$keep"
  work=$keep
else
  work=$(mktemp -d /tmp/atomdb-callgrind.XXXXXX)
  trap 'rm -rf "$work"' EXIT
fi

# run_one WORKLOAD N: one server under callgrind; prints its total instructions.
run_one() {
  local workload=$1 n=$2
  local dir="$work/$workload-$n"
  rm -rf "$dir"
  mkdir -p "$dir/data"
  /usr/bin/python3 - "$bin" "$dir" "$workload" "$n" "$repo/tests/drivers" "$auth" <<'PY'
import os, socket, subprocess, sys, time

binary, dir_, workload, n, libdir = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
auth = sys.argv[6] == "1"
sys.path.insert(0, libdir)
import bson
import wireproto as wp

with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]

out = os.path.join(dir_, "callgrind.out")
log = open(os.path.join(dir_, "server.log"), "wb")
proc = subprocess.Popen(
    ["valgrind", "--tool=callgrind", "--callgrind-out-file=" + out,
     binary, "--bind", "127.0.0.1", "--port", str(port),
     "--dbpath", os.path.join(dir_, "data"), "--journal", "none", "--log-level", "warn"]
    + (["--auth"] if auth else []),
    stdin=subprocess.DEVNULL, stdout=log, stderr=log)

deadline = time.monotonic() + 120
sock = None
while time.monotonic() < deadline:
    if proc.poll() is not None:
        sys.exit("server exited during start-up, see " + log.name)
    try:
        sock = wp.connect("127.0.0.1", port, timeout=60)
        break
    except OSError:
        time.sleep(0.2)
if sock is None:
    proc.kill()
    sys.exit("server did not accept connections within 120 s")

def cmd(doc, seq=None):
    extra = () if seq is None else (wp.section_kind1(seq[0], seq[1]),)
    msg = wp.op_msg(doc, extra_sections=extra)
    wp.send(sock, msg)
    reply = wp.read_reply(sock).doc
    if reply.get("ok") != 1 or reply.get("writeErrors"):
        sys.exit("request failed: %r" % (reply,))
    return reply

lsid = {"id": bson.Binary(os.urandom(16), 4)}
cmd({"hello": 1, "helloOk": True, "client": {"driver": {"name": "callgrind-request", "version": "1"}},
     "$db": "admin"})
if auth:
    from scramclient import scram_login
    cmd({"createUser": "bench", "pwd": "bench-pw", "roles": ["root"], "$db": "admin"})
    scram_login(sock, "bench", "bench-pw")
if workload == "counter":
    cmd({"insert": "courses", "ordered": True, "$db": "test"}, ("documents", [{"_id": 1, "favCount": 0}]))
    update = {"q": {"_id": 1}, "u": {"$inc": {"favCount": 1}}}
    want_modified = 1
elif workload == "soldout":
    cmd({"insert": "items", "ordered": True, "$db": "test"}, ("documents", [{"_id": "sku1", "stock": 0}]))
    update = {"q": {"_id": "sku1", "stock": {"$gte": 1}}, "u": {"$inc": {"stock": -1}}}
    want_modified = 0
else:
    cmd({"insert": "plays", "ordered": True, "$db": "test"}, ("documents", [{"_id": 1, "count": 0, "v": 1}]))
coll = {"counter": "courses", "soldout": "items"}.get(workload, "plays")
# Identical requests, as a driver sends them (and as atomdb-bench --client
# wire does): update with its statements in a kind-1 "updates" sequence;
# findAndModify (upsert, new) and find by _id with every field in the body;
# writes carry a new txnNumber each time.
for i in range(n):
    if workload == "famupsert":
        r = cmd({"findAndModify": "plays", "query": {"_id": 1}, "update": {"$inc": {"count": bson.Int64(1)}},
                 "new": True, "upsert": True, "lsid": lsid, "txnNumber": bson.Int64(i + 1), "$db": "test"})
        if r.get("value", {}).get("count") != i + 1:
            sys.exit("unexpected findAndModify result %r" % (r,))
    elif workload == "findid":
        r = cmd({"find": "plays", "filter": {"_id": 1}, "projection": {"count": 1, "v": 1}, "limit": 1,
                 "singleBatch": True, "lsid": lsid, "$db": "test"})
        if len(r["cursor"]["firstBatch"]) != 1:
            sys.exit("unexpected find result %r" % (r,))
    else:
        r = cmd({"update": coll, "ordered": True, "lsid": lsid, "txnNumber": bson.Int64(i + 1), "$db": "test"},
                ("updates", [update]))
        if r.get("nModified") != want_modified:
            sys.exit("unexpected write result %r" % (r,))
try:
    wp.send(sock, wp.op_msg({"shutdown": 1, "$db": "admin"}))
    wp.outcome(sock, timeout=60)
except Exception:
    pass
try:
    proc.wait(timeout=120)
except subprocess.TimeoutExpired:
    proc.kill()
    sys.exit("server did not stop after shutdown")
PY
  local total
  total=$(awk '/^(summary|totals):/ {print $2; exit}' "$dir/callgrind.out")
  [ -n "$total" ] || { echo "callgrind-request: no totals in $dir/callgrind.out" >&2; exit 1; }
  echo "$total"
}

for workload in counter soldout famupsert findid; do
  if [ -n "$only" ] && [ "$only" != "$workload" ]; then
    continue
  fi
  a=$(run_one "$workload" "$small")
  b=$(run_one "$workload" "$large")
  per=$(( (b - a) / (large - small) ))
  case $workload in
    counter) what='hot counter ($inc by _id, lsid+txnNumber)' ;;
    soldout) what='sold-out sale (conditional $inc, matches nothing)' ;;
    famupsert) what='findAndModify by _id ($inc, upsert, new)' ;;
    findid) what='find by _id (projection, limit 1)' ;;
  esac
  printf '%-52s %8d instructions/request  (N=%d: %d, N=%d: %d)\n' \
    "$what" "$per" "$small" "$a" "$large" "$b"
done
