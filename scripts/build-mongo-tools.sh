#!/bin/bash
# build-mongo-tools.sh SRC OUT: builds mongostat and mongotop from a
# mongo-tools checkout SRC (tag 100.8.0 is the one tested) into OUT, with
# Debian's Go (golang-go) and the modules vendored in SRC — offline: no
# module proxy, no downloads (docs/operations.md).
set -euo pipefail
src=${1:?usage: build-mongo-tools.sh SRC OUT}
out=${2:?usage: build-mongo-tools.sh SRC OUT}
command -v go >/dev/null || { echo "go is missing: apt-get install golang-go" >&2; exit 1; }
[ -d "$src/vendor" ] || { echo "$src has no vendor/ folder: not a mongo-tools checkout" >&2; exit 1; }
mkdir -p "$out"
out=$(cd "$out" && pwd)
cache=${GOCACHE:-$out/.gocache}
cd "$src"
for tool in mongostat mongotop; do
  GOFLAGS=-mod=vendor GOPROXY=off GOTOOLCHAIN=local GOCACHE="$cache" GOPATH="$out/.gopath" \
    go build -o "$out/$tool" "./$tool/main"
done
echo "built: $out/mongostat $out/mongotop"
