#!/usr/bin/env bash
# The one test command: installs dependencies, builds atomdb twice (release
# with -Werror in build/, ASan+UBSan in build-asan/), runs the C unit tests in
# both, the driver tests (pymongo, libmongoc, mongosh, Node driver) against
# build/ (the pymongo ones also on pure-Python pymongo), the scenario and crash
# tests, and the raw-socket, pymongo and mongod-compat tests again against
# build-asan/.
# Exits non-zero if any step failed; prints a summary of the steps at the end.
set -uo pipefail

cd "$(dirname "$0")/.."
repo=$(pwd)
py=/usr/bin/python3
jobs=${JOBS:-2}

results=()
failed=0

# step NAME CMD...: runs CMD, records PASS/FAIL with its duration.
step() {
  local name=$1
  shift
  local t0=$SECONDS
  echo
  echo "==== $name"
  "$@"
  local rc=$?
  local dt=$((SECONDS - t0))
  if [ "$rc" -eq 0 ]; then
    results+=("PASS  $name (${dt}s)")
  else
    results+=("FAIL  $name (exit $rc, ${dt}s)")
    failed=$((failed + 1))
  fi
  return "$rc"
}

skip() {
  results+=("SKIP  $1 ($2)")
  failed=$((failed + 1))
}

# pytest exits 5 when it collected no test: that is a failure here, not a pass.
run_pytest() {
  timeout --kill-after=30 900 "$py" -m pytest -q -p no:cacheprovider "$@"
  local rc=$?
  if [ "$rc" -eq 5 ]; then
    echo "pytest collected no tests: counted as a failure"
  fi
  return "$rc"
}

run_ctest() {
  ctest --test-dir "$1" --output-on-failure --no-tests=error -j "$jobs" --timeout 300
}

drivers_release() {
  ATOMDB_BIN="$repo/build/atomdb" ATOMDB_BUILD="$repo/build" run_pytest tests/drivers
}

# The raw-socket, handshake and CRUD tests again with pymongo's C extensions
# blocked: their verdicts must not depend on the pymongo build (docs/testing.md).
drivers_pure_pymongo() {
  ATOMDB_PYMONGO_PURE=1 ATOMDB_BIN="$repo/build/atomdb" ATOMDB_BUILD="$repo/build" \
    run_pytest tests/drivers/test_raw_socket.py tests/drivers/test_pymongo_handshake.py \
    tests/drivers/test_crud_pymongo.py tests/drivers/test_crud_unified.py
}

node_release() {
  ATOMDB_BIN="$repo/build/atomdb" timeout --kill-after=30 900 node --test tests/drivers/node/*.test.mjs
}

drivers_asan() {
  ATOMDB_BIN="$repo/build-asan/atomdb" ATOMDB_BUILD="$repo/build-asan" \
    run_pytest tests/drivers/test_raw_socket.py tests/drivers/test_pymongo_handshake.py \
      tests/drivers/test_mongod_compat.py tests/drivers/test_auth.py tests/drivers/test_tls.py \
      tests/drivers/test_fuzz_found.py
}

# Every libFuzzer target for FUZZ_SECONDS (default 20, as the issue asks) after replaying the
# committed reproducers, in build-fuzz/ (clang); niced, it shares the machine.
fuzz_short() {
  nice -n 10 bash scripts/fuzz.sh all "${FUZZ_SECONDS:-20}"
}

scenarios_release() {
  # the isolation checkers also run against build-asan/ (fault injection on)
  # to show they catch a server that skips its conflict checks
  ATOMDB_BIN="$repo/build/atomdb" ATOMDB_FAULT_BIN="$repo/build-asan/atomdb" run_pytest tests/scenarios
}

crash_release() {
  ATOMDB_BIN="$repo/build/atomdb" run_pytest tests/crash --ignore=tests/crash/test_crash_faults.py
}

crash_faults_asan() {
  ATOMDB_BIN="$repo/build-asan/atomdb" run_pytest tests/crash/test_crash_faults.py
}

build() {
  local dir=$1
  shift
  cmake -S . -B "$dir" "$@" && cmake --build "$dir" -j "$jobs"
}

# Sanitizer settings for the ASan build: leaks are checked; any report fails.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0:strict_string_checks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

if [ "$(id -u)" -eq 0 ]; then
  step "install dependencies" bash scripts/install-deps.sh
else
  echo "not root: skipping scripts/install-deps.sh (dependencies must already be installed)"
fi

release_ok=0
asan_ok=0
step "build build/ (RelWithDebInfo, -Werror)" \
  build build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DWERROR=ON -DSANITIZE= && release_ok=1
step "build build-asan/ (address,undefined)" \
  build build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DWERROR=OFF -DSANITIZE=address,undefined \
  -DFAULT_INJECTION=ON && asan_ok=1

if [ "$release_ok" -eq 1 ]; then
  step "ctest build/" run_ctest build
  step "driver tests (pytest) against build/" drivers_release
  step "raw-socket, handshake and CRUD tests on pure-Python pymongo against build/" drivers_pure_pymongo
  step "Node driver tests against build/" node_release
  step "scenario tests (seed invariants) against build/" scenarios_release
  step "crash tests (kill -9, torn log, repair, lock) against build/" crash_release
else
  skip "ctest build/" "build failed"
  skip "driver tests (pytest) against build/" "build failed"
  skip "pure-Python pymongo tests against build/" "build failed"
  skip "Node driver tests against build/" "build failed"
  skip "scenario tests against build/" "build failed"
  skip "crash tests against build/" "build failed"
fi

if [ "$asan_ok" -eq 1 ]; then
  step "ctest build-asan/" run_ctest build-asan
  step "raw-socket + pymongo + mongod-compat tests against build-asan/" drivers_asan
  step "fault-injection crash tests against build-asan/" crash_faults_asan
  step "libFuzzer targets, ${FUZZ_SECONDS:-20} s each (build-fuzz/)" fuzz_short
else
  skip "ctest build-asan/" "build failed"
  skip "sanitizer driver tests" "build failed"
  skip "fault-injection crash tests against build-asan/" "build failed"
  skip "libFuzzer targets" "build failed"
fi

echo
echo "==== summary"
printf '%s\n' "${results[@]}"
if [ "$failed" -ne 0 ]; then
  echo "test.sh: $failed step(s) failed"
  exit 1
fi
echo "test.sh: all steps passed"
