#!/usr/bin/env bash
# Coverage-guided fuzzing of atomdb's parsers with libFuzzer (clang, ASan,
# UBSan): the targets are tests/fuzz/fuzz_*.c (see docs/reliability.md).
#
#   scripts/fuzz.sh --list              target names, one per line
#   scripts/fuzz.sh TARGET SECONDS      build (once) and fuzz one target
#   scripts/fuzz.sh all SECONDS         every target, SECONDS each
#   scripts/fuzz.sh --regress [TARGET]  only replay tests/fuzz/regressions/
#
# Builds into build-fuzz/ (CC=clang, CXX=clang++ for src/geo/s2shim.cc, -DFUZZ=ON). The seed corpus is written
# by tests/fuzz/make_corpus.py into build-fuzz/corpus/TARGET/ (new inputs
# libFuzzer finds are added there); the committed crash reproducers in
# tests/fuzz/regressions/TARGET/ are replayed first. A crash, a sanitizer
# report, a leak or a timeout exits non-zero; the input is saved in
# build-fuzz/artifacts/TARGET/. Extra libFuzzer flags: FUZZ_FLAGS="-jobs=2".
set -uo pipefail

cd "$(dirname "$0")/.."
repo=$(pwd)
build=${FUZZ_BUILD:-$repo/build-fuzz}
py=/usr/bin/python3

targets() {
  for f in "$repo"/tests/fuzz/fuzz_*.c; do
    basename "$f" .c | sed 's/^fuzz_//'
  done
}

usage() {
  echo "usage: scripts/fuzz.sh --list | TARGET SECONDS | all SECONDS | --regress [TARGET]" >&2
  exit 2
}

build_once() {
  if [ ! -f "$build/CMakeCache.txt" ]; then
    CC=${FUZZ_CC:-clang} CXX=${FUZZ_CXX:-clang++} cmake -S "$repo" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DFUZZ=ON -DSANITIZE= >"$build.configure.log" 2>&1 || {
      cat "$build.configure.log" >&2
      echo "fuzz.sh: configuring $build failed (is clang installed? scripts/install-deps.sh)" >&2
      exit 1
    }
  fi
  cmake --build "$build" -j "${JOBS:-2}" >"$build/build.log" 2>&1 || {
    tail -n 40 "$build/build.log" >&2
    echo "fuzz.sh: building $build failed" >&2
    exit 1
  }
  if [ ! -d "$build/corpus" ]; then
    "$py" "$repo/tests/fuzz/make_corpus.py" "$build/corpus" "$build/atomdb" || {
      echo "fuzz.sh: generating the seed corpus failed" >&2
      exit 1
    }
  fi
}

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0:allocator_may_return_null=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

# regress TARGET: every committed reproducer once; non-zero on any failure.
regress() {
  local t=$1 dir="$repo/tests/fuzz/regressions/$1"
  if [ ! -d "$dir" ] || [ -z "$(ls -A "$dir" 2>/dev/null)" ]; then
    return 0
  fi
  echo "fuzz.sh: $t: replaying $(ls "$dir" | wc -l) regression inputs"
  "$build/fuzz_$t" -timeout=20 -rss_limit_mb=2048 "$dir"/* 2>&1 | tail -n 3
  return "${PIPESTATUS[0]}"
}

# run TARGET SECONDS
run() {
  local t=$1 secs=$2
  local bin="$build/fuzz_$t" corpus="$build/corpus/$t" art="$build/artifacts/$t/"
  [ -x "$bin" ] || { echo "fuzz.sh: no target $t (scripts/fuzz.sh --list)" >&2; return 2; }
  regress "$t" || { echo "fuzz.sh: $t: a regression input fails" >&2; return 1; }
  mkdir -p "$corpus" "$art"
  local dict=()
  [ -f "$build/corpus/$t.dict" ] && dict=(-dict="$build/corpus/$t.dict")
  echo "fuzz.sh: $t for ${secs}s"
  # -timeout: an input running 10 s is a hang; -max_len keeps inputs below
  # the sizes where a run costs seconds; -print_final_stats for the report
  "$bin" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
    -print_final_stats=1 -artifact_prefix="$art" "${dict[@]}" ${FUZZ_FLAGS:-} "$corpus" \
    >"$build/fuzz-$t.log" 2>&1
  local rc=$?
  grep -E '^#[0-9]+' "$build/fuzz-$t.log" | grep -E 'INITED|DONE|pulse' | tail -n 4
  grep -E '^stat::number_of_executed_units|^stat::peak_rss_mb' "$build/fuzz-$t.log"
  if [ "$rc" -ne 0 ]; then
    grep -E -A 30 'ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|runtime error|deadly signal' \
      "$build/fuzz-$t.log" | head -n 60
    echo "fuzz.sh: $t FAILED (exit $rc); log $build/fuzz-$t.log, input in $art"
    return 1
  fi
  echo "fuzz.sh: $t passed"
}

case "${1:-}" in
--list)
  targets
  ;;
--regress)
  build_once
  rc=0
  for t in ${2:-$(targets)}; do regress "$t" || rc=1; done
  exit $rc
  ;;
all)
  [ $# -eq 2 ] || usage
  build_once
  failed=0
  for t in $(targets); do run "$t" "$2" || failed=$((failed + 1)); done
  [ "$failed" -eq 0 ] || { echo "fuzz.sh: $failed target(s) failed"; exit 1; }
  echo "fuzz.sh: all targets passed"
  ;;
"" | -*)
  usage
  ;;
*)
  [ $# -eq 2 ] || usage
  build_once
  run "$1" "$2"
  ;;
esac
