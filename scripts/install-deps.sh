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
  libbson-dev libmongoc-dev libuv1-dev libpcre2-dev libicu-dev tzdata
  libsnappy-dev libzstd-dev zlib1g-dev libssl-dev libyaml-dev libidn-dev openssl
  libintelrdfpmath-dev uthash-dev libstemmer-dev liblingua-stopwords-perl libs2-dev
  python3 python3-pymongo python3-pymongo-ext python3-bson-ext python3-pytest
  python3-pexpect python3-pytest-timeout python3-zstandard python3-snappy
  tmux procps iproute2 valgrind
  clang libclang-rt-14-dev
  redis-server libhiredis-dev postgresql libpq-dev
  libmicrohttpd-dev libsystemd-dev python3-prometheus-client
  dpkg-dev lintian golang-go chromium fonts-dejavu-core
)

# Node.js and npm for tests/drivers/node (the mongodb driver and mongosh): at
# least the engines.node of its package.json. Debian 12's archive has only
# nodejs 18, which is too old, so this script installs no Node.js: the project's
# machines ship Node.js 20 (/usr/bin/node, NodeSource's nodejs 20.20.2 .deb).
# Checked before apt runs, so a machine without it is told at once.
node_dir="$repo/tests/drivers/node"
node_min=$(sed -n 's/^ *"node": *">=\([0-9][0-9.]*\)".*/\1/p' "$node_dir/package.json")
if [ -z "$node_min" ]; then
  echo "install-deps: cannot read engines.node (\">=X.Y.Z\") from $node_dir/package.json" >&2
  exit 1
fi
node_have=$(node --version 2>/dev/null | sed 's/^v//' || true)
npm_have=$(npm --version 2>/dev/null || true)
oldest=$(printf '%s\n%s\n' "$node_min" "${node_have:-0}" | sort -V | head -n 1)
if [ -z "$node_have" ] || [ "$oldest" != "$node_min" ] || [ -z "$npm_have" ]; then
  {
    echo "install-deps: Node.js >= $node_min with npm is needed for tests/drivers/node;"
    echo "install-deps: found node ${node_have:-none}, npm ${npm_have:-none}."
    echo "install-deps: Debian 12's own nodejs (18) is too old, so this script does not install one."
    echo "install-deps: This project's machines ship Node.js 20.20.2 as /usr/bin/node; elsewhere"
    echo "install-deps: install Node.js >= $node_min and npm first (docs/testing.md, Node.js)."
  } >&2
  exit 1
fi
log "node $node_have, npm $npm_have (>= $node_min needed)"

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
