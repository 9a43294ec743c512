#!/usr/bin/env bash
# Installs everything atomdb needs to build and to run its tests on Debian 12,
# as root. Idempotent: a second run installs nothing and finishes in seconds.
# Sources: Debian's archive (apt) and the npm registry (npm ci), nothing else.
set -euo pipefail

cd "$(dirname "$0")/.."
repo=$(pwd)

log() { printf 'install-deps: %s\n' "$*"; }

if [ "$(id -u)" -ne 0 ]; then
  echo "install-deps: must run as root (apt-get install)" >&2
  exit 1
fi

export DEBIAN_FRONTEND=noninteractive
# Wait for another apt/dpkg run to finish instead of failing at once.
apt_opts=(-o DPkg::Lock::Timeout=600)

# Build, library and test dependencies (see ../shared/DESIGN.md, Dependencies).
apt_packages=(
  build-essential cmake pkg-config git ca-certificates
  libbson-dev libmongoc-dev libuv1-dev libpcre2-dev
  libsnappy-dev libzstd-dev zlib1g-dev libssl-dev libyaml-dev
  libintelrdfpmath-dev uthash-dev
  python3 python3-pymongo python3-pymongo-ext python3-bson-ext python3-pytest
  python3-pexpect python3-pytest-timeout python3-zstandard python3-snappy
  tmux procps valgrind
  redis-server libhiredis-dev postgresql libpq-dev
)

# Node.js: keep the image's node when it is new enough (the mongodb 7.x driver
# needs >= 20.19); only fall back to Debian's nodejs/npm when node is absent.
node_ok=0
if command -v node >/dev/null 2>&1; then
  node_major=$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0)
  if [ "${node_major:-0}" -ge 20 ]; then
    node_ok=1
  else
    log "warning: node $(node --version) is older than 20; the Node driver tests need >= 20.19"
  fi
fi
if [ "$node_ok" -eq 0 ] && ! command -v node >/dev/null 2>&1; then
  apt_packages+=(nodejs)
fi
if ! command -v npm >/dev/null 2>&1; then
  apt_packages+=(npm)
fi

missing=()
for p in "${apt_packages[@]}"; do
  status=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
  if [ "$status" != "installed" ]; then
    missing+=("$p")
  fi
done

apt_lists_fresh() {
  # Fresh = some package index exists and is younger than one day.
  local newest
  newest=$(find /var/lib/apt/lists -maxdepth 1 -name '*_Packages*' -mmin -1440 2>/dev/null | head -n 1)
  [ -n "$newest" ]
}

if [ "${#missing[@]}" -gt 0 ]; then
  log "installing Debian packages: ${missing[*]}"
  updated=0
  if ! apt_lists_fresh; then
    apt-get "${apt_opts[@]}" update -qq
    updated=1
  fi
  if ! apt-get "${apt_opts[@]}" install -y -qq --no-install-recommends "${missing[@]}"; then
    if [ "$updated" -eq 1 ]; then
      exit 1
    fi
    log "install failed with the cached package lists; updating them once and retrying"
    apt-get "${apt_opts[@]}" update -qq
    apt-get "${apt_opts[@]}" install -y -qq --no-install-recommends "${missing[@]}"
  fi
else
  log "Debian packages: all present"
fi

# npm packages for the Node driver and mongosh tests, pinned by package-lock.json.
# Install scripts are skipped: nothing the tests use needs one (snappy ships its
# binary in a registry package), and some would try to download from elsewhere.
node_dir="$repo/tests/drivers/node"
if [ -f "$node_dir/package.json" ]; then
  stamp="$node_dir/node_modules/.atomdb-installed"
  if [ -f "$node_dir/package-lock.json" ]; then
    want=$(cat "$node_dir/package.json" "$node_dir/package-lock.json" | sha256sum | cut -d' ' -f1)
    if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
      log "npm packages: up to date"
    else
      log "npm ci in tests/drivers/node"
      (cd "$node_dir" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error)
      echo "$want" > "$stamp"
    fi
  else
    log "no package-lock.json: npm install in tests/drivers/node"
    (cd "$node_dir" && npm install --ignore-scripts --no-audit --no-fund --loglevel=error)
  fi
fi

# pymongo without its C extensions behaves differently (it refuses some
# requests itself): check that what was installed actually loads.
if ! /usr/bin/python3 -c 'import sys, pymongo, bson; sys.exit(0 if pymongo.has_c() and bson.has_c() else 1)'; then
  echo "install-deps: pymongo's C extensions do not load (pymongo.has_c() or bson.has_c() is False);" >&2
  echo "install-deps: python3-pymongo-ext and python3-bson-ext must both be installed" >&2
  exit 1
fi

log "done"
